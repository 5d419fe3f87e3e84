//! Skill ranking: which skills of the catalog a task is about, best first.
//!
//! Okapi BM25 over each skill's name and description, with the inverse document frequency
//! taken from the installed catalog: a word most descriptions share ("file", "count") weighs
//! little, a word only one has ("csv", "celsius") much. Words are lowercased, cut to a light
//! stem (`sales` and `sale`, `converting` and `convert` meet) and common words are dropped.
//! With many skills installed,
//! plain word overlap offered a presentation-slides skill first for a question about the lines
//! of two text files: long descriptions share some word with almost any task.

use crate::state::SkillEntry;

/// BM25's term-frequency saturation: low, as descriptions are short and a word a description
/// repeats ("Markdown" three times) says little more than once (measured on the bench's tasks
/// with every example skill installed: 36/39 first at 0.5, 34/39 at the usual 1.2).
const K1: f64 = 0.5;
/// BM25's length normalisation.
const B: f64 = 0.75;

/// Lowercase words of three letters or more, without the common ones.
/// Words too common to say anything about relevance.
pub(crate) const STOP_WORDS: [&str; 60] = [
    "the", "and", "for", "with", "from", "that", "this", "what", "which", "when", "where", "who",
    "how", "are", "was", "were", "been", "has", "have", "had", "its", "his", "her", "their",
    "them", "they", "you", "your", "our", "use", "into", "about", "there", "here", "all", "any",
    "can", "not", "but", "one", "each", "these", "those", "some", "other", "then", "than", "also",
    "just", "only", "such", "will", "would", "should", "could", "please",
    // Descriptions say "Use when a task asks …": a task that says "task" is not about them.
    "task", "asks",
    // "How many …" asks for a count of anything (the local 1.5B took a unit converter, whose
    // description says "how many of one unit", for "How many units were sold").
    "many", "much",
];

/// The words of `text` that can say what it is about: lowercase, three letters or more, not a
/// [`STOP_WORDS`] word.
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .collect()
}

/// A light stem: plural and verb endings cut, so that a task's "sales" meets a description's
/// "sale" and "converting" meets "convert". Not a linguist's stemmer: both sides are cut
/// the same way, which is all matching needs.
pub(crate) fn stem(word: &str) -> String {
    let cut = |suffix: &str, keep: usize| {
        word.strip_suffix(suffix).filter(|stem| stem.chars().count() >= keep).map(str::to_owned)
    };
    if let Some(stem) = cut("ies", 3) {
        return format!("{stem}y");
    }
    for (suffix, keep) in [("ing", 3), ("ed", 3), ("es", 4), ("s", 3)] {
        if let Some(stem) = cut(suffix, keep)
            && !(suffix == "s" && (stem.ends_with('s') || stem.ends_with('u')))
        {
            return stem;
        }
    }
    word.to_owned()
}

/// The terms of `text`: its [`words`], stemmed.
fn terms(text: &str) -> Vec<String> {
    words(text).iter().map(|word| stem(word)).collect()
}

/// The catalog's skills with their BM25 score for `task`, best first (ties in catalog order).
/// A score of 0 means the skill shares no term with the task.
pub fn rank_skills(task: &str, catalog: &[SkillEntry]) -> Vec<(String, f64)> {
    let documents: Vec<Vec<String>> = catalog
        .iter()
        .map(|entry| {
            let name = entry.name.replace(['-', '_'], " ");
            terms(&format!("{name} {}", entry.description))
        })
        .collect();
    let count = documents.len() as f64;
    let average = documents.iter().map(Vec::len).sum::<usize>() as f64 / count.max(1.0);
    let mut query = terms(task);
    query.sort();
    query.dedup();
    let idf = |term: &str| {
        let holding = documents.iter().filter(|document| document.iter().any(|t| t == term));
        let n = holding.count() as f64;
        (1.0 + (count - n + 0.5) / (n + 0.5)).ln()
    };
    let weights: Vec<(&String, f64)> = query.iter().map(|term| (term, idf(term))).collect();
    let mut scored: Vec<(usize, f64)> = documents
        .iter()
        .enumerate()
        .map(|(position, document)| {
            let length = document.len() as f64;
            let score = weights
                .iter()
                .map(|(term, idf)| {
                    let tf = document.iter().filter(|t| t == term).count() as f64;
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average.max(1.0)))
                })
                .sum::<f64>();
            (position, score)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.into_iter().map(|(position, score)| (catalog[position].name.clone(), score)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, description: &str) -> SkillEntry {
        SkillEntry {
            name: name.to_owned(),
            description: description.to_owned(),
            source: "project".to_owned(),
            directory: String::new(),
            disable_model_invocation: false,
            allowed_tools: None,
        }
    }

    #[test]
    fn stems_meet() {
        for (a, b) in [("sales", "sale"), ("converting", "convert"), ("files", "file")] {
            assert_eq!(stem(a), stem(b), "{a} {b}");
        }
        assert_eq!(stem("entries"), "entry");
        for kept in ["status", "bus", "class", "its", "red", "sing"] {
            assert_eq!(stem(kept), kept);
        }
    }

    #[test]
    fn a_rare_shared_word_outweighs_a_common_one() {
        let catalog = [
            entry("slide-deck", "Build a presentation file: slides, text lines, images per file."),
            entry("line-counter", "Count the lines of text files."),
            entry("image-resize", "Resize an image file."),
            entry("json-tools", "Query a JSON file."),
        ];
        let ranked = rank_skills("How many lines do notes.txt and todo.txt have?", &catalog);
        assert_eq!(ranked[0].0, "line-counter", "{ranked:?}");
        assert!(ranked[0].1 > ranked[1].1);
        // No shared term: every score is 0, in catalog order.
        let ranked = rank_skills("Hello there", &catalog);
        assert!(ranked.iter().all(|(_, score)| *score == 0.0));
        assert_eq!(ranked[0].0, "slide-deck");
        assert!(rank_skills("anything", &[]).is_empty());
    }
}
