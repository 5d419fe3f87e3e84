//! The level-1 catalog: name, description and location of each skill, for the model's prompt,
//! within a character budget.
//!
//! Skills marked `disable-model-invocation` are never listed (the model may not pick them).
//! The rest are ranked by root priority (project, user, extra, builtin) and then by name; the
//! catalog takes them in that order while they fit, skipping any that does not fit, and ends with
//! one line saying how many were left out. The names of the left-out skills are returned in
//! [`Catalog::omitted`] so the caller can report them.

use serde::Serialize;

use crate::index::SkillIndex;
use crate::skill::Skill;

/// The rendered catalog and what did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Catalog {
    /// The text for the prompt (never longer than the budget, in characters).
    pub text: String,
    /// Names of the skills listed.
    pub listed: Vec<String>,
    /// Names of the skills dropped because the budget was too small, in rank order.
    pub omitted: Vec<String>,
    /// Names of the skills not listed because they disable model invocation.
    pub hidden: Vec<String>,
}

fn entry(skill: &Skill) -> String {
    let description = skill.description.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("- {}: {} (location: {})\n", skill.name, description, skill.path.display())
}

fn omission_line(count: usize) -> String {
    format!("({count} more skills not listed for length)\n")
}

impl Catalog {
    /// Renders the catalog of `index` in at most `budget_chars` characters.
    pub fn render(index: &SkillIndex, budget_chars: usize) -> Catalog {
        let mut ranked: Vec<&Skill> = Vec::new();
        let mut hidden = Vec::new();
        for skill in &index.skills {
            if skill.controls.disable_model_invocation {
                hidden.push(skill.name.clone());
            } else {
                ranked.push(skill);
            }
        }
        ranked.sort_by(|left, right| {
            (left.source.kind, &left.name).cmp(&(right.source.kind, &right.name))
        });
        let entries: Vec<(String, usize)> = ranked
            .iter()
            .map(|skill| {
                let text = entry(skill);
                let length = text.chars().count();
                (text, length)
            })
            .collect();

        // Greedy fill; when something is left out, keep room for the omission line, dropping
        // more entries (lowest rank first) until it fits.
        let mut included: Vec<bool> = vec![false; entries.len()];
        let mut used = 0usize;
        for (position, (_, length)) in entries.iter().enumerate() {
            if used + length <= budget_chars {
                used += length;
                included[position] = true;
            }
        }
        loop {
            let omitted_count = included.iter().filter(|included| !**included).count();
            if omitted_count == 0 {
                break;
            }
            let notice = omission_line(omitted_count).chars().count();
            if used + notice <= budget_chars {
                break;
            }
            match included.iter().rposition(|included| *included) {
                Some(last) => {
                    included[last] = false;
                    used -= entries[last].1;
                }
                None => break,
            }
        }

        let mut text = String::new();
        let mut listed = Vec::new();
        let mut omitted = Vec::new();
        for ((skill, (entry_text, _)), included) in ranked.iter().zip(&entries).zip(&included) {
            if *included {
                text.push_str(entry_text);
                listed.push(skill.name.clone());
            } else {
                omitted.push(skill.name.clone());
            }
        }
        if !omitted.is_empty() {
            let notice = omission_line(omitted.len());
            if text.chars().count() + notice.chars().count() <= budget_chars {
                text.push_str(&notice);
            }
        }
        Catalog { text, listed, omitted, hidden }
    }
}
