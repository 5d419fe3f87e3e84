//! A long script output shown with the lines the task is about (record format 21).
//!
//! A script's output is read once by the model, but every line of it is a prompt token to
//! evaluate: on the embedded 1.5B (2 cores, ≈ 40 prompt tokens/s) the CSV summary of a
//! six-column file is ~390 tokens, ten seconds, for a task that asks about one column. When
//! an output has many lines and some of them name a word of the task that the skill's own
//! instructions do not use (the user's `amount`, not the skill's `column` or `total`), the
//! model is shown the output's first lines, those lines and its last line, in their order,
//! and a line saying how many were left out. The whole text stays the observation's: the
//! answer check and the results list read it, and the run directory stores it. The lines left
//! out are not offered to `recall_observation`: offered, the local 1.5B recalled the output
//! again and again instead of answering (two runs of the live suite ended at the turn limit).

use crate::rank::{stem, words};

/// The record format from which long script outputs are focused.
pub(crate) const SINCE_FORMAT: u32 = 21;

/// The record format from which a first line naming a task word the call's arguments do not
/// hold picks the output out too (format 33). "How many rows does sales.csv have?" is answered
/// by the summary's second line, `rows: 20`, and no later line names a word of the task: the
/// 1.5B was shown all 27 lines (~380 prompt tokens) for one. A first line that names only what
/// the call passed (`file: sales.csv`) echoes the input and picks nothing.
pub(crate) const HEAD_SINCE_FORMAT: u32 = 33;

/// The stdout lines an output must have before it is focused.
const MIN_LINES: usize = 16;

/// The first lines always shown (what the output is about: a file, a count, a header).
const HEAD_LINES: usize = 3;

/// A task word found in more than this share of the lines picks nothing out (the word a
/// search matched, on every line of its output).
const COMMON_SHARE: f64 = 0.5;

/// At least this many lines must be left out for the focus to be worth its note.
const MIN_LEFT_OUT: usize = 5;

/// The text to show for `text` (an observation of a script run, `exit code …\nstdout:\n…`)
/// on `task`, or `None` when it is shown whole: a short output, no task word that picks
/// lines out, or too few lines left out. `skill` is the text of the skill's instructions
/// (its words pick nothing out). From [`HEAD_SINCE_FORMAT`] (`format`), a first line that names
/// a task word not in `args` (the call's arguments) picks too.
pub(crate) fn focused(
    text: &str,
    task: &str,
    skill: &str,
    args: &[String],
    format: u32,
) -> Option<String> {
    let (head, rest) = text.split_once("\nstdout:\n")?;
    let (stdout, tail) = match rest.find("\nstderr:\n") {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let lines: Vec<&str> = stdout.lines().collect();
    if lines.len() < MIN_LINES {
        return None;
    }
    let skill_terms: Vec<String> = words(skill).iter().map(|word| stem(word)).collect();
    let task_terms: Vec<String> = words(task)
        .iter()
        .map(|word| stem(word))
        .filter(|term| !skill_terms.contains(term))
        .collect();
    let line_terms: Vec<Vec<String>> = lines
        .iter()
        .map(|line| {
            let terms: Vec<String> = words(line).iter().map(|word| stem(word)).collect();
            task_terms.iter().filter(|term| terms.contains(term)).cloned().collect()
        })
        .collect();
    let common = |term: &String| {
        let count = line_terms.iter().filter(|terms| terms.contains(term)).count();
        count as f64 > lines.len() as f64 * COMMON_SHARE
    };
    let keep: Vec<bool> = (0..lines.len())
        .map(|at| at < HEAD_LINES || at + 1 == lines.len() || !line_terms[at].iter().all(common))
        .collect();
    let arg_terms: Vec<String> =
        args.iter().flat_map(|arg| words(arg)).map(|word| stem(&word)).collect();
    let head_picks = format >= HEAD_SINCE_FORMAT
        && line_terms
            .iter()
            .take(HEAD_LINES)
            .any(|terms| terms.iter().any(|term| !common(term) && !arg_terms.contains(term)));
    let picked =
        (HEAD_LINES..lines.len() - 1).filter(|&at| keep[at]).count() + usize::from(head_picks);
    let left_out = keep.iter().filter(|kept| !**kept).count();
    if picked == 0 || left_out < MIN_LEFT_OUT {
        return None;
    }
    let mut shown = format!("{head}\nstdout:\n");
    for (line, _) in lines.iter().zip(&keep).filter(|(_, kept)| **kept) {
        shown.push_str(line);
        shown.push('\n');
    }
    shown.push_str(&format!(
        "[{left_out} of {} lines left out: they name no word of the task]",
        lines.len()
    ));
    shown.push_str(tail);
    Some(shown)
}

#[cfg(test)]
mod tests {
    fn summary() -> String {
        let mut out = String::from(
            "exit code 0\nstdout:\nfile: sales.csv\nrows: 20\ncolumns: 3 (region, units, amount)\n",
        );
        for column in ["region", "units", "amount"] {
            out.push_str(&format!("column {column}: numeric, 20 values, 0 empty\n"));
            for stat in ["min", "max", "mean", "sum"] {
                out.push_str(&format!("{column} {stat}: 1.5\n"));
            }
        }
        out.push_str("checked: yes");
        out
    }

    const SKILL: &str = "Summarise a CSV file: for each column the total, mean, min and max.";

    /// The focus before format 33 (the first lines pick nothing).
    fn focused(text: &str, task: &str, skill: &str) -> Option<String> {
        super::focused(text, task, skill, &[], 32)
    }

    fn args(values: &[&str]) -> Vec<String> {
        values.iter().map(|value| value.to_string()).collect()
    }

    #[test]
    fn a_first_line_naming_a_task_word_picks_the_output_out_from_format_33() {
        let task = "How many rows does sales.csv have?";
        let call = args(&["sales.csv"]);
        assert_eq!(focused(&summary(), task, SKILL), None);
        let shown = super::focused(&summary(), task, SKILL, &call, 33).unwrap();
        assert_eq!(
            shown,
            "exit code 0\nstdout:\nfile: sales.csv\nrows: 20\ncolumns: 3 (region, units, amount)\n\
             checked: yes\n[15 of 19 lines left out: they name no word of the task]"
        );
        // A first line that only echoes the call's own arguments picks nothing: every column
        // of "Summarise sales.csv" stays in view.
        assert_eq!(super::focused(&summary(), "Summarise sales.csv", SKILL, &call, 33), None);
        assert_eq!(
            super::focused(&summary(), "Summarise sales.csv", SKILL, &args(&["sales.csv"]), 32),
            None
        );
    }

    #[test]
    fn a_long_output_shows_the_lines_that_name_the_tasks_rarer_words() {
        let shown =
            focused(&summary(), "What is the total of the amount column in sales.csv?", SKILL)
                .unwrap();
        assert_eq!(
            shown,
            "exit code 0\nstdout:\nfile: sales.csv\nrows: 20\ncolumns: 3 (region, units, amount)\n\
             column amount: numeric, 20 values, 0 empty\namount min: 1.5\namount max: 1.5\n\
             amount mean: 1.5\namount sum: 1.5\nchecked: yes\n\
             [10 of 19 lines left out: they name no word of the task]"
        );
    }

    #[test]
    fn stderr_stays_whole_after_the_focused_stdout() {
        let text = format!("{}\nstderr:\nwarning: one\nwarning: two", summary());
        let shown = focused(&text, "the mean of units", SKILL).unwrap();
        assert!(shown.contains("units mean: 1.5\n"), "{shown}");
        assert!(!shown.contains("region min"), "{shown}");
        assert!(shown.ends_with("of the task]\nstderr:\nwarning: one\nwarning: two"), "{shown}");
    }

    #[test]
    fn outputs_are_shown_whole_when_nothing_picks_lines_out() {
        let task = "What is the total of the amount column in sales.csv?";
        // Short.
        assert_eq!(focused("exit code 0\nstdout:\na\nb\namount: 1", task, SKILL), None);
        // No task word, or only a word most lines name (every line is a match of a search).
        let matches: String =
            (0..20).map(|n| format!("notes{n}.md:3: the amount is due\n")).collect();
        assert_eq!(focused(&format!("exit code 0\nstdout:\n{matches}"), task, SKILL), None);
        assert_eq!(focused(&summary(), "How big is it?", SKILL), None);
        // Only words of the skill's own instructions.
        assert_eq!(focused(&summary(), "The total of each column", SKILL), None);
        // No stdout section at all.
        assert_eq!(focused("exit code 1\nstderr:\nboom", task, SKILL), None);
        // Too few lines left out.
        let each: String = ["region", "units", "amount"]
            .iter()
            .flat_map(|word| (0..4).map(move |n| format!("{word} {n}\n")))
            .collect();
        let text = format!("exit code 0\nstdout:\na\nb\nc\n{each}end");
        assert_eq!(focused(&text, "region units amount", SKILL), None);
        assert!(focused(&text, "units", SKILL).is_some());
    }

    #[test]
    fn any_text_is_taken_without_a_panic() {
        for text in ["", "\nstdout:\n", "x\nstdout:\n\u{0}\n\nstderr:\n", "é\nstdout:\né"] {
            let _ = focused(text, "é amount", "é");
        }
    }
}
