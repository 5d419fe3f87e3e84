//! Grounded answers: the facts a final answer states must come from the run.
//!
//! A small model asked for a value no skill can give will still write one ("The file has 10
//! lines."). Before the runtime accepts a final answer it reads the answer's numbers and quoted
//! values and looks for each in what the run saw: the user's texts (the task, answers to its
//! questions) and the results of the run's actions (script output, files read, tool results).
//! A number also counts as grounded when it is what the simple arithmetic a task asks for gives
//! from the observed numbers: a rounding, a sum or difference of two, a sum over several
//! results, or a count of the lines or items a result listed.
//!
//! The check reads text only; it knows nothing of units or wording, so it errs towards
//! accepting: any number seen anywhere in the run's sources grounds the same number in the
//! answer. What it catches is the value that nothing in the run contains.

/// The record format from which final answers are checked: a re-run of an older record is not
/// (its answers were taken unchecked, and the re-run must match it event for event).
pub(crate) const SINCE_FORMAT: u32 = 5;

/// The record format from which file names, codes and the task's unused numbers are checked,
/// and a guessed argument's result grounds nothing.
pub(crate) const STRICT_SINCE_FORMAT: u32 = 8;

/// The record format from which a count the task asks for must come from a result that
/// counts that thing (see [`counted_things`]).
pub(crate) const COUNTED_SINCE_FORMAT: u32 = 10;

/// The record format from which a number the task writes twice needs two calls, a second
/// single result restated where the task asks to combine two is refused too, and a call is
/// refused once for an argument that respells a task word ([`respelled_arguments`]).
pub(crate) const EACH_SINCE_FORMAT: u32 = 11;

/// The record format from which an answer that states no figure where the task asks to
/// combine values is refused once ([`combine_figureless_note`]), a value written with its unit
/// beside that unit once ([`value_with_its_unit`]), and plan-execute-think's rounds that only
/// select skills neither think nor count toward the round limit.
pub(crate) const ROUNDS_SINCE_FORMAT: u32 = 12;

/// The record format from which the note after a script call that worked names the task's
/// values no call has used yet, while a batch goes on, instead of inviting the answer.
pub(crate) const BATCH_NOTE_SINCE_FORMAT: u32 = 13;

/// The record format from which a script call refused for a respelled word, a value written
/// with its unit or an example's value (no `ask_user` on offer) is refused again when made
/// again, with no leave to repeat it in the note. Over three whole live runs of the local 1.5B
/// (react at formats 12 and 13, plan-execute-think at 13), it made the refused call again 5
/// times when told it might, and all 5 failed; it changed the call 14 times, 12 of them then
/// worked.
pub(crate) const FIRM_SINCE_FORMAT: u32 = 14;

/// The record format from which a plan-execute-think batch ends after a step that selected a
/// skill (the steps after it were planned before its instructions were read), and a refusal
/// whose note names every value the answer needs gets its think past the round limit. In the
/// local 1.5B's runs at format 14 the steps after a selection in the same plan either used the
/// skill selected before with a placeholder or were a second select the action space refuses,
/// and each cost a think and one of the round limit's two or three rounds.
pub(crate) const SELECT_ENDS_BATCH_SINCE_FORMAT: u32 = 15;

/// The record format from which plan-execute-think's plan note shows the last plan without
/// its reasoning (the local 1.5B wrote the one shown back as its next plan's, word for word,
/// round after round), and the steps a selection cut off leave the plan (the 1.5B planned
/// them again: "run csv-summary on `<file named in the task>`").
pub(crate) const SHORT_PLAN_NOTE_SINCE_FORMAT: u32 = 16;

/// The record format from which a word of sixteen digits or more among letters is a code the
/// answer must have seen (`2292e8282…`: read as a number it overflows, so it was no number and,
/// with one letter, no code either; the local 1.5B answered a SHA-256 it could not compute so).
pub(crate) const LONG_CODES_SINCE_FORMAT: u32 = 16;

/// The record format from which a script run on one of the task's numbers counts as part of a
/// batch whose results follow an answer that states only some of them, and an answer that
/// states a figure of any run of the task is such an answer (see `Run::with_batch_results`).
pub(crate) const BATCH_RESULTS_SINCE_FORMAT: u32 = 16;

/// The record format from which plan-execute-think bounds a plan's reasoning and a think's
/// next-step preview at 120 characters instead of 300.
pub(crate) const SHORT_REASONING_SINCE_FORMAT: u32 = 17;

/// The record format from which an answer states a figure only when it states one of a result
/// (digits of its own, "the exit code is always 0", do not count), so that an answer with none
/// gets the task's results after it.
pub(crate) const RESULT_FIGURES_SINCE_FORMAT: u32 = 17;

/// The record format from which a refusal that knows the call to make instead shows it whole
/// ([`shown_call`]): a respelled word written as the task writes it and a value written with
/// its unit as the value alone ([`fixed_arguments`]), an example's file pattern as the task's
/// kind of file, an optional last argument the error named left out. Told "write the task's own
/// value in its place", the local 1.5B made the refused call again word for word ("I will run
/// the script again with the correct value": `["1 GiB", "GB", "MB"]` three times), or went to
/// another skill.
pub(crate) const CALL_SHOWN_SINCE_FORMAT: u32 = 18;

/// The record format from which the turn after a call that failed on an optional last
/// argument its error names shows the call without it (from format 18 only a repeat of the
/// call, refused, showed it).
pub(crate) const FAILED_CALL_SHOWN_SINCE_FORMAT: u32 = 19;

/// The record format from which a call that failed on an argument its error names is followed
/// by the call with the task's word in its place, when one word of the task is a value the
/// skill's instructions or the error show ([`task_word_for`]): in the turn right after the
/// failure, and in the refusal of a repeat.
pub(crate) const TASK_WORD_SHOWN_SINCE_FORMAT: u32 = 23;

/// The record format from which a count the task asks for, of a thing no result names, is
/// grounded only by a figure the user's texts or the results write (or a count of a result's
/// lines, or a document's line that names the thing): "TASK.md has 0 words" was grounded by
/// file-finder's SKILL.md, whose example says `matches: 0`. From the same format an answer
/// that states two or more results as printed and nothing else, where the task asks to combine
/// values, is refused once with the arithmetic to work out ([`restates_results`]).
pub(crate) const COUNTS_FROM_RESULTS_SINCE_FORMAT: u32 = 24;

/// The record format from which the answer that follows a refusal naming every value it needs
/// (the arithmetic to work out) may write figures: with no new result between, it was held to
/// an admission as after an ungrounded answer, and the local 1.5B answered "I cannot answer …
/// Work out their sum (  +  )".
pub(crate) const FIGURES_AFTER_COMBINE_SINCE_FORMAT: u32 = 25;

/// The record format from which a script refused for a file placeholder, in a task that names
/// no file, is not on offer again until a script gives a result: told "the task names no file:
/// find it first", the local 1.5B's plan-execute-think runs planned the same placeholder call
/// round after round, one of them right after selecting file-finder, and ended stuck or at the
/// round limit (find-then-total, its among-many twin, find-total-convert).
/// From the same format an answer with no figure, where the task asks a statistic of a column
/// ("the total of its amount column"), is refused once, and a figure for it that only a
/// document writes is grounded by a document line naming the column ([`measured_things`]):
/// the think after finding sales.csv answered "the total of the 'amount' column … is 1000", a
/// figure from file-finder's SKILL.md ("up to 1000"), and was taken.
pub(crate) const FILE_FIRST_SINCE_FORMAT: u32 = 26;

/// The record format from which an answer that names none of the units the task asks to
/// convert into ("convert that many pounds to kilograms") is refused (once, and a second time
/// only after a new result), where a script ran and the answer does not admit it cannot
/// ([`unnamed_targets`]): the local 1.5B's runs of units-to-kilograms and find-total-convert
/// completed with "The units total 212." and never converted.
pub(crate) const TARGET_UNIT_SINCE_FORMAT: u32 = 27;

/// The record format from which plan-execute-think keeps a think's answer refused only as
/// incomplete (every figure of it grounded, no plan in it) as the answer to end with if a limit
/// ends the run first: at the round limit, the refused "The total units column … is 212." said
/// more than the summary before it ("The CSV file `sales.csv` was found."), which was the
/// ending.
pub(crate) const PARTIAL_ENDING_SINCE_FORMAT: u32 = 27;

/// The record format from which the refusal of an ungrounded answer, where the task asks to
/// combine values, works out that arithmetic on the results the answer names
/// ([`worked_combination`]): asked to add two totals, the local 1.5B answered with both and a
/// sum of its own (1917.84 for 1705.47 + 212), was refused, ran the script again and gave up.
/// From the same format a refused example word whose symbol the task writes (`celsius`, where
/// the task writes "20 C to F") is followed by the call with the task's symbol in its place
/// ([`task_symbol_for`]): told only "write the task's own value", the 1.5B made the refused
/// call twice more and the run ended stuck. And an argument that leaves out the first letter
/// of a unit the task writes (`mi` for "1 nmi") is refused as a respelling
/// ([`respelled_arguments`]): plan-execute-think converted a mile and answered with it. And
/// the refusal of an answer that names no unit the task converts into shows the result lines
/// that already do ([`target_result_lines`]); and the same one result restated again where the
/// task combines values is refused once more, with the results' lines to combine
/// ([`lines_to_combine`]).
pub(crate) const WORKED_SINCE_FORMAT: u32 = 29;

/// The record format from which a value written with its unit is refused where two words of
/// letters follow it among the arguments (the unit's own place and the unit to convert into),
/// whatever those words are ([`value_with_its_unit`]): the local 1.5B ran `convert.py "212 lbs"
/// pounds kilograms`, which the converter read as 212 lb into the unit `pounds kilograms`, and
/// the same shape again until the turn limit; until now only the unit written twice alike
/// (`"1 nmi" nmi m`) was refused. From the same format a quoted quantity in an answer (`212
/// lbs`) is checked as its number, as it would be unquoted: after that conversion the 1.5B
/// answered "The value `212 lbs` is converted to `96.16158244 kg`.", refused because no text
/// of the run writes `lbs`.
pub(crate) const UNIT_PLACE_SINCE_FORMAT: u32 = 30;

/// The record format from which an answer that states none of the results' figures for a
/// column the task asks a statistic of is refused once, with the result lines that give them
/// ([`columns_without_figure`]): asked "the total of the units, unit_price and amount columns
/// and the number of rows", the local 1.5B answered "The total of the units, unit_price, and
/// amount columns is 1705.47" (the amount's sum alone), and the answer was taken.
pub(crate) const COLUMNS_SINCE_FORMAT: u32 = 30;

/// The record format from which the note of the turn after a refusal that shows the call to
/// make writes that call ("make this call: {…}") instead of "the refusal above shows the call
/// to make": plan-execute-think's plan note shows the last round's plan, whose refused step
/// (`convert.py 1 gb mb`) the local 1.5B planned again word for word, round after round.
pub(crate) const CALL_IN_NOTE_SINCE_FORMAT: u32 = 27;

/// The record format from which a refused example file name (`data/invoice-2024.csv`, a
/// script that takes a path) is followed by the call on the one file of its kind that the
/// run's scripts found: told "the task's CSV files: `*.csv`" after finding `sales.csv`, the
/// local 1.5B made the refused call twice more.
pub(crate) const FOUND_FILE_SHOWN_SINCE_FORMAT: u32 = 19;

/// The record format from which, with `ask_user` on offer, an answer that gives one of several
/// like results the task names none of (`units sum: 212` beside `amount sum: 1705.47`, for "the
/// total of the column") is refused once with a note to ask the user which one
/// ([`unchosen_label`]): the local 1.5B summarised every column and answered with the first.
pub(crate) const CHOICE_SINCE_FORMAT: u32 = 22;

/// The check of a run's final answers: what it needs beside the run's observations, and what
/// it found.
#[derive(Debug)]
pub(crate) struct Grounding {
    /// Whether answers are checked (see [`SINCE_FORMAT`]).
    pub(crate) applies: bool,
    /// The user's texts: the task and every later input.
    pub(crate) user_texts: Vec<String>,
    /// The current task had an answer refused: the next ungrounded one is taken, marked.
    pub(crate) refused: bool,
    /// How many of the task's numbers the calls had used when an answer of the current task
    /// was last refused for leaving others unused (format 8): the next such answer is refused
    /// again only if the calls used more since (the batch goes on), else taken as it is.
    pub(crate) incomplete_at: Option<usize>,
    /// The figures of the current task's answers refused for restating one result where the
    /// task asks to combine two: once per task in format 10; from format 11 also a second,
    /// other figure (the second value fetched and restated alone).
    pub(crate) combine_refused: Vec<String>,
    /// An answer of the current task was refused for stating no figure where the task asks
    /// to combine values (format 12) or a statistic of a column (format 26).
    pub(crate) combine_figureless: bool,
    /// The last refusal named every value the answer needs ("work out their sum (A + B)"):
    /// nothing is left to run (format 12; plan-execute-think goes straight to a think).
    pub(crate) answer_from_results: bool,
    /// The last refusal showed, for each unit the answer left out, the result line that
    /// already converts into it (format 36): the answer alone is asked to give them.
    pub(crate) converted_in_results: bool,
    /// Answers are checked for file names and codes, and for the task's unused numbers; a
    /// guessed argument's result grounds nothing (format 8).
    pub(crate) strict: bool,
    /// The answer that ends the current piece of work is ungrounded.
    pub(crate) ungrounded: bool,
    /// An answer of the current task was refused for a choice the task did not make
    /// ([`unchosen_label`], format 22).
    pub(crate) choice_refused: bool,
    /// The results of the current task when an answer was last refused for naming no unit the
    /// task asks to convert into ([`unnamed_targets`], format 27), and how many times: refused
    /// again, a second time at most, only after a new result.
    pub(crate) target_refused: Option<(usize, u8)>,
    /// Whether an answer that restated the same one result again, where the task combines
    /// values, was refused with the results' lines to combine (format 29).
    pub(crate) combine_lines_shown: bool,
    /// Whether an answer that gave no figure of some column the task names was refused
    /// ([`columns_without_figure`], format 30).
    pub(crate) columns_refused: bool,
}

impl Grounding {
    pub(crate) fn new(record_format: u32, task: &str) -> Grounding {
        Grounding {
            applies: record_format >= SINCE_FORMAT,
            user_texts: vec![task.to_owned()],
            refused: false,
            incomplete_at: None,
            combine_refused: Vec::new(),
            combine_figureless: false,
            answer_from_results: false,
            converted_in_results: false,
            strict: record_format >= STRICT_SINCE_FORMAT,
            ungrounded: false,
            choice_refused: false,
            target_refused: None,
            combine_lines_shown: false,
            columns_refused: false,
        }
    }
}

/// A script observation's stdout and stderr, without the status line and the section heads.
pub(crate) fn script_output(text: &str) -> Vec<&str> {
    let (head, err) = match text.split_once("\nstderr:\n") {
        Some((head, err)) => (head, Some(err)),
        None => (text, None),
    };
    let out = head.split_once("\nstdout:\n").map(|(_, out)| out);
    out.into_iter().chain(err).collect()
}

/// The characters of a call's output a gist keeps (a results line, an ending report).
pub(crate) const RESULT_CHARS: usize = 100;

/// The first lines of a call's output, joined, cut at [`RESULT_CHARS`]: without the
/// runtime's framing (`exit code N`, `stdout:`, `stderr:`) and blank lines.
pub(crate) fn output_gist(text: &str) -> String {
    gist_within(text, RESULT_CHARS)
}

/// [`output_gist`] cut at `max` characters (an ending report shows a script's error whole).
pub(crate) fn gist_within(text: &str, max: usize) -> String {
    let max = max.max(2);
    let mut gist = String::new();
    for line in text.lines().map(str::trim) {
        let framing = line.is_empty()
            || line == "stdout:"
            || line == "stderr:"
            || line.strip_prefix("exit code ").is_some_and(|code| code.parse::<i64>().is_ok());
        if framing {
            continue;
        }
        if !gist.is_empty() {
            gist.push_str(" · ");
        }
        gist.push_str(line);
        if gist.chars().count() >= max {
            break;
        }
    }
    if gist.chars().count() > max {
        gist = gist.chars().take(max - 1).collect();
        gist.push('…');
    }
    if gist.is_empty() { "(no output)".to_owned() } else { gist }
}

/// Whether a text meant for the user reads as the writer's own next step ("…, so I need to
/// select the X skill"): its first sentence says what the writer is going to do. A small
/// model asked for a stop report often writes the thought it would have acted on.
pub(crate) fn reads_as_plan(text: &str) -> bool {
    const INTENT: [&str; 9] = [
        "i need to ",
        "i will ",
        "i'll ",
        "let me ",
        "i should ",
        "i must ",
        "i am going to ",
        "i'm going to ",
        "next, i ",
    ];
    let first = text.trim_start().split(['.', '\n', '!', '?']).next().unwrap_or_default();
    let first = format!(" {}", first.to_lowercase());
    INTENT.iter().any(|intent| first.contains(&format!(" {intent}")))
}

/// The arguments of a call that no user text and no result in `sources` states, nor the
/// script's usage line `usage` (for its literal words, such as a subcommand): values the model
/// chose itself, as when a task that names no unit gets `km` and `mi`. A word counts as stated
/// when a source writes it, or when it abbreviates a source's word (`mi` for "miles", `C` for
/// "Celsius", `txt` for "text"); flags (`-x`, `--name`) are the script's own. Documents are
/// no source here: a skill's example values are not the task's.
pub(crate) fn unstated_arguments<'a>(
    args: &'a [String],
    sources: &Sources<'_>,
    usage: &str,
) -> Vec<&'a str> {
    let texts: Vec<String> = sources
        .user
        .iter()
        .chain(&sources.results)
        .map(|text| text.to_lowercase())
        .chain([usage.to_lowercase()])
        .collect();
    let words: Vec<&str> = texts
        .iter()
        .flat_map(|text| text.split(|c: char| !c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
        .collect();
    let stated = |arg: &str| {
        let arg = arg.trim().to_lowercase();
        let long = |text: &str| text.chars().count() >= 4;
        if arg.is_empty()
            || arg.starts_with('-')
            || (long(&arg) && texts.iter().any(|text| text.contains(&arg)))
        {
            return true;
        }
        arg.split(|c: char| !c.is_alphanumeric())
            .filter(|token| token.chars().any(char::is_alphabetic))
            .all(|token| {
                // A short token inside a longer word ("km" in "bookmark") is no statement.
                (long(token) && texts.iter().any(|text| text.contains(token)))
                    || words.iter().any(|word| abbreviates(token, word))
            })
    };
    args.iter()
        .filter(|arg| !ungrounded(arg, sources).is_empty() || !stated(arg))
        .map(String::as_str)
        .collect()
}

/// The words of a usage line that may be literal arguments (a subcommand, a mode): plain
/// identifiers, not the example values beside them (`*.csv`, `sales.csv`, `12`).
pub(crate) fn usage_literals(usage: &str) -> String {
    usage
        .split(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '[' | ']' | '{' | '}' | ',' | ':' | '`')
        })
        .filter(|word| {
            word.starts_with(|c: char| c.is_alphabetic())
                && word.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `arg` is written, as a whole value, inside a code example of one of `documents`
/// (a fenced block or an inline code span): an example value a model may copy.
pub(crate) fn in_code_example(arg: &str, documents: &[&str]) -> bool {
    let arg = arg.trim();
    if arg.is_empty() {
        return false;
    }
    let whole = |span: &str| whole_word_at(span, arg).is_some();
    documents.iter().any(|document| {
        document.split("```").enumerate().any(|(index, part)| {
            if index % 2 == 1 {
                return whole(part);
            }
            // Odd pieces between backticks are code spans, when a backtick closes them.
            let pieces: Vec<&str> = part.split('`').collect();
            (1..pieces.len().saturating_sub(1)).step_by(2).any(|index| whole(pieces[index]))
        })
    })
}

/// Where `text` first writes `word` whole: not inside a longer word or identifier (no letter,
/// digit or `_` on either side).
fn whole_word_at(text: &str, word: &str) -> Option<usize> {
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let edge = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        edge(before) && edge(after)
    })
}

/// Whether `short` is `word` or an abbreviation of it: the same first letter, then its
/// letters in order.
fn abbreviates(short: &str, word: &str) -> bool {
    let mut letters = word.chars();
    short.chars().next().is_some_and(|first| word.starts_with(first))
        && short.chars().all(|c| letters.any(|letter| letter == c))
}

/// The numbers and quoted values of `answer` that nothing in `sources` grounds, as the answer
/// writes them, each once, in order of appearance.
pub(crate) fn ungrounded(answer: &str, sources: &Sources<'_>) -> Vec<String> {
    let known = Known::new(sources);
    let mut missing: Vec<String> = Vec::new();
    let mut push = |value: String| {
        if !missing.contains(&value) {
            missing.push(value);
        }
    };
    let tokens = answer_tokens(answer);
    // The answer's own numbers that the run shows: the operands its arithmetic may use when
    // the results hold too many numbers to pair them all.
    let operands: Vec<f64> = tokens
        .iter()
        .filter_map(|token| match token {
            Token::Number(number) if known.values.iter().any(|&x| same(number, x)) => {
                Some(number.value)
            }
            _ => None,
        })
        .collect();
    // From format 26 a figure that only a document writes, for a statistic the task asks of a
    // column, needs a document line that names the column ([`measured_things`]).
    let measured = (!sources.measured.is_empty()).then(|| {
        let naming = |line: &&str| {
            let lower = line.to_lowercase();
            sources.measured.iter().any(|thing| lower.contains(thing.as_str()))
        };
        Known::new(&Sources {
            user: sources.user.clone(),
            documents: sources
                .documents
                .iter()
                .flat_map(|text| text.lines())
                .filter(naming)
                .collect(),
            results: sources.results.clone(),
            lenient_sums: sources.lenient_sums,
            ..Default::default()
        })
    });
    for token in tokens {
        match token {
            Token::Number(number) => {
                if !known.grounds(&number, &operands)
                    || measured.as_ref().is_some_and(|known| !known.grounds(&number, &operands))
                {
                    push(number.text);
                }
            }
            Token::Date(date) => {
                if !known.texts.iter().any(|text| text.contains(&date)) {
                    push(date);
                }
            }
        }
    }
    for quoted in quoted_values(answer) {
        // From format 30 a quoted quantity (`212 lbs`) is checked as its number, as it is
        // unquoted: its unit word is no name to find in the run.
        if sources.unit_place && quantity(&quoted) {
            continue;
        }
        if !known.grounds_words(&quoted) {
            push(format!("\"{quoted}\""));
        }
    }
    if sources.strict {
        // A file name comes from the task, a result, the run's own calls or a document's
        // prose (a script's output file): a path in a skill's example output
        // (`data/invoice-2024.csv`) is no file of this workspace.
        let prose = sources.documents.iter().flat_map(|document| document.split("```").step_by(2));
        let named: Vec<String> = sources
            .user
            .iter()
            .chain(&sources.results)
            .chain(&sources.names)
            .copied()
            .chain(sources.qualified_names.iter().map(String::as_str))
            .chain(prose)
            .map(str::to_lowercase)
            .collect();
        for word in answer.split_whitespace().map(trim_word) {
            let lower = word.trim_start_matches("./").to_lowercase();
            let unseen = if is_file_name(&lower) {
                !named.iter().any(|text| text.contains(&lower))
            } else {
                is_code(word, sources.long_codes)
                    && !known.texts.iter().any(|text| text.contains(&lower))
            };
            if unseen {
                push(word.to_owned());
            }
        }
    }
    for (figure, count) in uncounted(answer, sources) {
        // A figure already ungrounded is named once.
        if !missing.contains(&figure) && !missing.contains(&count) {
            missing.push(count);
        }
    }
    missing
}

/// What a task that gives no figure asks to count ("How many words does TASK.md have?":
/// `word`), singular and lowercased: the words after "how many" up to the verb, each of three
/// letters or more. Empty for a task with a figure (a conversion, "how many km are 5 miles",
/// whose results write units short) or no "how many".
pub(crate) fn counted_things(task: &str) -> Vec<String> {
    if !stated_numbers(task).is_empty() {
        return Vec::new();
    }
    let lower = task.to_lowercase();
    let Some((_, after)) = lower.split_once("how many ") else { return Vec::new() };
    const VERBS: [&str; 14] = [
        "does", "do", "did", "are", "is", "were", "was", "have", "has", "in", "of", "there", "can",
        "will",
    ];
    after
        .split_whitespace()
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric()))
        .take_while(|word| !word.is_empty() && !VERBS.contains(word))
        .take(3)
        .filter(|word| word.chars().count() >= 3 && word.chars().all(char::is_alphabetic))
        .filter(|word| !matches!(*word, "and" | "the"))
        .map(singular)
        .collect()
}

/// The words before "column" that name no column ("the total of its column").
const NOT_COLUMN_NAMES: [&str; 9] =
    ["the", "its", "that", "this", "each", "every", "one", "first", "last"];

/// What a task that gives no figure asks a statistic of (a total, sum, average, mean, median,
/// minimum or maximum): the word before each "column" ("the total of its amount column":
/// `amount`), singular and lowercased. Empty for a task with a figure or no such word.
pub(crate) fn measured_things(task: &str) -> Vec<String> {
    if !stated_numbers(task).is_empty() {
        return Vec::new();
    }
    let lower = task.to_lowercase();
    let words: Vec<&str> =
        lower.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).collect();
    if asked_statistics(&words).is_empty() {
        return Vec::new();
    }
    let mut things: Vec<String> = Vec::new();
    for pair in words.windows(2) {
        let (word, next) = (pair[0], pair[1]);
        if matches!(next, "column" | "columns")
            && word.chars().count() >= 3
            && word.chars().all(char::is_alphabetic)
            && !NOT_COLUMN_NAMES.contains(&word)
        {
            let thing = singular(word);
            if !things.contains(&thing) {
                things.push(thing);
            }
        }
    }
    things
}

/// `word` without a plural ending (`words` → `word`, `matches` → `match`, `entries` →
/// `entry`); lowercase in, lowercase out.
fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("ies").filter(|stem| stem.len() >= 2) {
        return format!("{stem}y");
    }
    for ending in ["ches", "shes", "sses", "xes"] {
        if word.ends_with(ending) {
            return word[..word.len() - 2].to_owned();
        }
    }
    match word.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_owned(),
        _ => word.to_owned(),
    }
}

/// The counts `answer` gives of what the task asks to count ([`Sources::counted`]: "1 word")
/// when no result of the run names that thing and the results write the figure only as another
/// label's value: `matches: 1` from a file search is no count of words. Each as the answer
/// writes it, after its figure alone.
fn uncounted(answer: &str, sources: &Sources<'_>) -> Vec<(String, String)> {
    if sources.counted.is_empty() {
        return Vec::new();
    }
    let results: Vec<String> = sources.results.iter().map(|text| text.to_lowercase()).collect();
    let mut found = Vec::new();
    let words: Vec<&str> = answer.split_whitespace().collect();
    for pair in words.windows(2) {
        let (figure, thing) = (trim_word(pair[0]), trim_word(pair[1]).to_lowercase());
        if stated_numbers(figure).is_empty() {
            continue;
        }
        let thing = singular(&thing);
        if sources.counted.contains(&thing)
            && !results.iter().any(|text| text.contains(&thing))
            && (labelled_otherwise(figure, &sources.results)
                || (sources.counts_from_results && !seen_as_count(figure, &thing, sources)))
        {
            found.push((figure.to_owned(), format!("{figure} {}", trim_word(pair[1]))));
        }
    }
    found
}

/// Whether `figure`, a count of `thing` that no result names, is one the run saw: written in a
/// user text or a result, a count of a result's lines or items, or written on a document's line
/// that names the thing (a reference's "15 codes"). A skill's example output (`matches: 0`)
/// is none: "TASK.md has 0 words" was taken from file-finder's SKILL.md.
fn seen_as_count(figure: &str, thing: &str, sources: &Sources<'_>) -> bool {
    let Some(number) = stated_numbers(figure).into_iter().next() else { return true };
    let writes = |text: &str| {
        let mut values = Vec::new();
        source_numbers(text, &mut values, false);
        values.iter().any(|&value| same(&number, value))
    };
    sources.user.iter().chain(&sources.results).any(|text| writes(text))
        || sources.results.iter().any(|text| counts(text).iter().any(|&n| same(&number, n)))
        || sources
            .documents
            .iter()
            .flat_map(|text| text.lines())
            .any(|line| line.to_lowercase().contains(thing) && writes(line))
}

/// Labels that say "the figure" and nothing of what it counts (`count: 3` from a word counter):
/// a figure under one of them may be the count asked for.
const GENERIC_LABELS: [&str; 14] = [
    "count", "total", "result", "value", "number", "num", "n", "sum", "answer", "output", "size",
    "length", "quantity", "qty",
];

/// Whether the results write `figure` only as the value of another label (`matches: 1`): a
/// bare figure (`277 README.md`, as `wc -l` prints it) may be the count asked for.
fn labelled_otherwise(figure: &str, results: &[&str]) -> bool {
    let Some(number) = stated_numbers(figure).into_iter().next() else { return false };
    let mut labelled = false;
    for line in results.iter().flat_map(|text| text.lines()) {
        let mut values = Vec::new();
        source_numbers(line, &mut values, false);
        if !values.iter().any(|&value| same(&number, value)) {
            continue;
        }
        let as_label = line.split_once(':').is_some_and(|(label, value)| {
            let label = label.trim().to_lowercase();
            let generic = label
                .split([' ', '_', '-'])
                .all(|word| GENERIC_LABELS.contains(&word) || word.is_empty());
            !label.is_empty()
                && !generic
                && label.chars().all(|c| c.is_alphabetic() || matches!(c, ' ' | '_' | '-'))
                && stated_numbers(value).first().is_some_and(|first| same(&number, first.value))
        });
        if !as_label {
            return false;
        }
        labelled = true;
    }
    labelled
}

/// A result line `label words: value` of two words or more, as [`unchosen_label`] reads it: its
/// label's words (lowercased) and its value's first number.
type Labelled = (Vec<String>, f64);

/// The [`Labelled`] lines of `results`, in order.
fn labelled_lines(results: &[&str]) -> Vec<Labelled> {
    let mut lines = Vec::new();
    for line in results.iter().flat_map(|text| text.lines()) {
        let Some((label, value)) = line.split_once(':') else { continue };
        let words: Vec<String> = label.split_whitespace().map(str::to_lowercase).collect();
        let word = |w: &String| {
            w.starts_with(|c: char| c.is_alphabetic())
                && w.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-'))
        };
        if words.len() < 2 || !words.iter().all(word) {
            continue;
        }
        if let Some(first) = stated_numbers(value).first() {
            lines.push((words, first.value));
        }
    }
    lines
}

/// A choice an answer made that the task did not ([`unchosen_label`]).
#[derive(Debug, PartialEq)]
pub(crate) struct Choice {
    /// The label of the line whose value the answer gives (`units sum`).
    pub(crate) chosen: String,
    /// Every label of its kind, in the results' order (`units sum`, `amount sum`).
    pub(crate) labels: Vec<String>,
    /// The words that tell them apart, in the same order (`units`, `amount`).
    pub(crate) options: Vec<String>,
    /// What the options are, when other lines name it (`column units`, `column amount`).
    pub(crate) noun: Option<String>,
}

/// The choice an answer made that the task did not: the answer gives the value of one result
/// line among several alike (`units sum: 212`, `unit_price sum: 229.44`, `amount sum: 1705.47`:
/// the same label but for one word), and the user's texts name none of the words of its label
/// nor any that tells the lines apart. `None` when the answer gives none or several of them.
pub(crate) fn unchosen_label(answer: &str, sources: &Sources<'_>) -> Option<Choice> {
    let figures = stated_numbers(answer);
    if figures.is_empty() {
        return None;
    }
    let user: Vec<String> = sources.user.iter().map(|text| text.to_lowercase()).collect();
    let named = |word: &str| {
        let forms = [word.to_owned(), singular(word), word.replace(['_', '-'], " ")];
        user.iter().any(|text| forms.iter().any(|form| whole_word_at(text, form).is_some()))
    };
    let lines = labelled_lines(&sources.results);
    let given = |value: f64| figures.iter().any(|figure| same(figure, value));
    for (words, value) in &lines {
        if !given(*value) || words.iter().any(|word| named(word)) {
            continue;
        }
        // Each word in turn as the one that tells the lines apart: the lines alike but for it.
        let kinds: Vec<(usize, Vec<&Labelled>)> = (0..words.len())
            .map(|at| {
                let rest = |other: &Vec<String>| {
                    other.len() == words.len()
                        && (0..words.len()).all(|i| i == at || other[i] == words[i])
                };
                let mut kind: Vec<&Labelled> = Vec::new();
                for line in lines.iter().filter(|(other, _)| rest(other)) {
                    if !kind.iter().any(|(seen, _)| seen[at] == line.0[at]) {
                        kind.push(line);
                    }
                }
                (at, kind)
            })
            .collect();
        let answered =
            |kind: &[&(Vec<String>, f64)]| kind.iter().filter(|(_, value)| given(*value)).count();
        // An answer that gives several lines of a kind lists them: it chose none.
        if kinds.iter().any(|(_, kind)| answered(kind) > 1) {
            continue;
        }
        for (at, kind) in &kinds {
            let options: Vec<String> = kind.iter().map(|(other, _)| other[*at].clone()).collect();
            if kind.len() < 2 || options.iter().any(|option| named(option)) {
                continue;
            }
            return Some(Choice {
                chosen: words.join(" "),
                labels: kind.iter().map(|(other, _)| other.join(" ")).collect(),
                noun: option_noun(&lines, &options, words),
                options,
            });
        }
    }
    None
}

/// What `options` are, when two-word labels pair each with the same other word, the option
/// second (`column units`, `column amount`): that word. Not a word of `chosen`'s label.
fn option_noun(
    lines: &[(Vec<String>, f64)],
    options: &[String],
    chosen: &[String],
) -> Option<String> {
    let first = lines.iter().find_map(|(words, _)| match &words[..] {
        [noun, option] if *option == options[0] && !chosen.contains(noun) => Some(noun.clone()),
        _ => None,
    })?;
    options
        .iter()
        .all(|option| lines.iter().any(|(words, _)| words[..] == [first.clone(), option.clone()]))
        .then_some(first)
}

/// The note that refuses, once, an answer that made a [`Choice`] the task did not, with the
/// question to ask.
pub(crate) fn choice_note(choice: &Choice) -> String {
    let others: Vec<String> = choice
        .labels
        .iter()
        .filter(|label| **label != choice.chosen)
        .map(|label| format!("`{label}`"))
        .collect();
    let options = match &choice.options[..] {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    };
    let which =
        choice.noun.as_deref().map_or("Which one".to_owned(), |noun| format!("Which {noun}"));
    format!(
        "answer not accepted yet: it gives `{}`, and the results give {} too; the task does not \
         say which one it means. Ask the user (ask_user): \"{which} do you mean: {options}?\" \
         If the task does say, answer with that one.",
        choice.chosen,
        others.join(", ")
    )
}

/// Whether `task` asks to combine two values by a verb of arithmetic ("add the total of A to
/// the total of B", "plus", "subtract", "minus"; English only, like [`reads_as_plan`]).
pub(crate) fn asks_to_combine(task: &str) -> bool {
    task.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|word| matches!(word, "add" | "plus" | "subtract" | "minus"))
}

/// Whether `task` asks for two or more things counted together: "how many" (or "the number
/// of") and, within four words, "and", then "in total", "altogether" or "combined" later in
/// the sentence ("How many ERROR and WARN lines does app.log have in total?"). "How many units
/// were sold in total" counts one thing; "Find the file and tell me how many rows it has in
/// total" joins two requests, not two things.
pub(crate) fn totals_two_things(task: &str) -> bool {
    counted_pair(task).is_some()
}

/// The two words around the "and" of the first sentence of `task` that counts two things
/// together ([`totals_two_things`]), lowercase: `("error", "warn")`.
fn counted_pair(task: &str) -> Option<(String, String)> {
    let text = task.to_lowercase().replace(". ", "\n");
    text.split(['\n', '?', '!', ';']).find_map(|sentence| {
        let words: Vec<&str> = sentence
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        let asks =
            words.windows(2).position(|pair| matches!(pair, ["how", "many"] | ["number", "of"]))?;
        let joined = (asks + 2..(asks + 7).min(words.len())).find(|&at| words[at] == "and")?;
        let rest = &words[joined + 1..];
        let totals = rest.windows(2).any(|pair| pair == ["in", "total"])
            || rest.iter().any(|word| matches!(*word, "altogether" | "combined"));
        totals.then(|| (words[joined - 1].to_owned(), rest[0].to_owned()))
    })
}

/// Whether `task` asks to combine values ([`asks_to_combine`], and from format 32 two or more
/// things counted together, [`totals_two_things`]).
pub(crate) fn combines(task: &str, format: u32) -> bool {
    asks_to_combine(task) || (format >= TOTAL_OF_TWO_SINCE_FORMAT && totals_two_things(task))
}

/// The record format from which a task that counts two or more things together ("How many
/// ERROR and WARN lines … in total?", [`totals_two_things`]) combines values as "add A to B"
/// does: asked that with 22 skills installed, the local 1.5B answered "There are 3 ERROR and
/// 2 WARN lines in app.log." — each count from the log analyzer, no total — and it was taken.
pub(crate) const TOTAL_OF_TWO_SINCE_FORMAT: u32 = 32;

/// The record format from which the refusal of an ungrounded answer that works out the
/// task's arithmetic on the results it names ([`worked_combination`]), or that shows the
/// results' lines to combine ([`lines_to_combine`]), is followed by the answer alone (react: only `final_answer` on offer, figures allowed; plan-execute-think: a
/// think alone): told "1705.47 + 212 = 1917.47. If that is the figure the task asks for,
/// answer with it", the local 1.5B ran the summary again, and the repeat left it only an
/// admission ("I cannot tell the sum …").
pub(crate) const WORKED_ANSWER_SINCE_FORMAT: u32 = 32;

/// The record format from which the refusal of an answer that names none of the units the
/// task converts into, where the results already give a converted figure in each of those
/// units ([`target_result_lines`]), is followed by the answer alone (react: only
/// `final_answer`; plan-execute-think: a think alone). Shown `1 nmi = 1852 m`, `20 C = 68 F`
/// and `1 GiB = 1073.741824 MB` beside its answer of the amount's total alone, the local 1.5B
/// ran the total again, gave the same answer, and the turn limit came first.
pub(crate) const CONVERTED_ANSWER_SINCE_FORMAT: u32 = 36;

/// The record format from which a column the task asks a statistic of, that no result gives
/// a line of while the results give another named column's, leaves the answer incomplete too
/// ([`columns_without_figure`]): asked "the total of the units, unit_price and amount columns
/// and the number of rows", the local 1.5B's plan-execute-think ran the summary of `units`
/// alone and answered with its figures, and the answer was taken (only a column with result
/// lines counted).
pub(crate) const UNRUN_COLUMNS_SINCE_FORMAT: u32 = 37;

/// The record format from which a text that ends inside a document it copied (an open `{`,
/// `[` or code span, as when the model copies a note's `Make this call: {"skill": …}` into a
/// JSON string, whose first quote ends the string) is no report for the user ([`cut_off`]):
/// plan-execute-think's turn limit ended the local 1.5B's run with "… but the task writes
/// `nmi`. Make this call: {".
pub(crate) const CUT_OFF_SINCE_FORMAT: u32 = 37;

/// A result line `<label>: <figure>`: the line, its label's words and its figure.
type LabelledLine<'a> = (&'a str, Vec<String>, f64);

/// The record format from which an answer that names a unit the task converts into, with none
/// of the results' figures in it, is refused as one that names none of them
/// ([`figureless_targets`]): "… 212, and it has been converted from pounds to kilograms." was
/// taken after `212 lb = 96.16158244 kg`.
pub(crate) const FIGURELESS_TARGET_SINCE_FORMAT: u32 = 38;

/// The record format from which a stopped run's answer that gives none of the results' figures,
/// where they give some and the task writes figures or asks for a quantity, is no report for
/// the user ([`gives_no_result_figure`]): the report from the record, which lists them, stands
/// in.
pub(crate) const REPORT_FIGURES_SINCE_FORMAT: u32 = 38;

/// The record format from which plan-execute-think keeps no summary of a think that does not
/// complete as the run's ending at a limit: its `user_summary` is the model's view of the
/// round, and on the local 1.5B it repeated an early failure ("The script `unit-converter`
/// failed to find the column `length` …") rounds after that call had worked. A limit ends the
/// run as react's does ([`crate::run::Run::degrade`]: the degraded answer checked, else the
/// report from the record).
pub(crate) const OPEN_THINK_SINCE_FORMAT: u32 = 37;

/// The record format from which a stopped run's answer that repeats the runtime's words ten
/// in a row — a refusal note of the task, or the instruction that asks for the degraded answer
/// — is no report ([`copies_note`]): asked for a degraded answer at the turn limit, the local
/// 1.5B wrote "The run must stop now: the turn limit (12) was reached. The final answer is: …"
/// and the refusal note it had copied before; the report from the record stands in.
pub(crate) const RUNTIME_WORDS_SINCE_FORMAT: u32 = 39;

/// Words in a row a text shares with a note for [`copies_note`].
const COPIED_WORDS: usize = 10;

/// Whether `text` writes [`COPIED_WORDS`] words in a row (case and punctuation aside) as one
/// of `notes` writes them outside its code spans: what a note quotes (a result's line, a call)
/// is the run's, and an answer may give it in the same order.
pub(crate) fn copies_note(text: &str, notes: &[&str]) -> bool {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let text = words(text);
    if text.len() < COPIED_WORDS {
        return false;
    }
    let runs: std::collections::HashSet<&[String]> = text.windows(COPIED_WORDS).collect();
    // The note's own words: the pieces between its code spans, each on its own.
    notes.iter().any(|note| {
        note.split('`')
            .step_by(2)
            .any(|piece| words(piece).windows(COPIED_WORDS).any(|run| runs.contains(run)))
    })
}

/// Whether `text` ends inside something it opened: a code span (an odd number of backticks),
/// more `{` or `[` than it closes, or an end on `{`, `[`, `(` or a backtick.
pub(crate) fn cut_off(text: &str) -> bool {
    let text = text.trim_end();
    let count = |c: char| text.chars().filter(|&x| x == c).count();
    text.ends_with(['{', '[', '(', '`'])
        || count('`') % 2 == 1
        || count('{') > count('}')
        || count('[') > count(']')
}

/// Whether `text` gives none of the figures of `results` while they give some (format 38): a
/// stopped run's answer that tells the user nothing of what the run found. On the local 1.5B,
/// plan-execute-think's degraded answer after `amount sum: 1705.47` and `1 nmi = 1852 m` was
/// "The script `unit-converter` failed to find the column `length` …", an early failure of
/// the run; the report from the record lists the results.
pub(crate) fn gives_no_result_figure(text: &str, results: &[&str]) -> bool {
    results.iter().any(|result| states_figure(result))
        && !stated_numbers(text).iter().any(|figure| held_by(results, figure))
}

/// Whether one of `texts` holds `figure` among its numbers.
fn held_by(texts: &[&str], figure: &Number) -> bool {
    texts.iter().any(|text| {
        let mut values = Vec::new();
        source_numbers(text, &mut values, true);
        values.iter().any(|&value| same(figure, value))
    })
}

/// Whether `task` adds ("add", "plus", two things counted "in total") rather than subtracts.
fn adds(task: &str) -> bool {
    task.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|word| matches!(word, "add" | "plus"))
        || totals_two_things(task)
}

/// The answer's one figure when the results show it as it is and the task does not give it:
/// an answer to "add A to B" that gives A alone, from the script's output, with no sum worked
/// out (the local 1.5B summed one column and answered with that total). `None` when the
/// answer states no figure, or more than one.
pub(crate) fn restates_one_result(answer: &str, sources: &Sources<'_>) -> Option<String> {
    let [figure] = &stated_numbers(answer)[..] else { return None };
    (held_by(&sources.results, figure) && !held_by(&sources.user, figure))
        .then(|| figure.text.clone())
}

/// The answer's figures when there are two or more and each is a result as the scripts printed
/// it that the user's texts do not give: an answer to "add A to B" that states A and B and no
/// sum ("The total of the amount column is 1705.47 and the total of the units column is 212.",
/// from the local 1.5B). `None` otherwise.
pub(crate) fn restates_results(answer: &str, sources: &Sources<'_>) -> Option<Vec<String>> {
    let figures = stated_numbers(answer);
    let restated =
        |figure: &Number| held_by(&sources.results, figure) && !held_by(&sources.user, figure);
    // An answer that shows arithmetic ("2 + 3 = 5": one figure the sum or difference of two
    // others) combined them, whatever a result also printed.
    let worked = answer.contains('=')
        || figures.iter().enumerate().any(|(k, sum)| {
            figures.iter().enumerate().any(|(i, a)| {
                figures.iter().enumerate().any(|(j, b)| {
                    i != j
                        && i != k
                        && j != k
                        && (equal(a.value + b.value, sum.value)
                            || equal((a.value - b.value).abs(), sum.value))
                })
            })
        });
    (figures.len() >= 2 && !worked && figures.iter().all(restated))
        .then(|| figures.into_iter().map(|figure| figure.text).collect())
}

/// The statistics a task may ask of a column, each with the names scripts print it under: a
/// task's "total" is a `sum` line.
const STATISTICS: [&[&str]; 5] = [
    &["total", "sum"],
    &["average", "mean"],
    &["median"],
    &["minimum", "min"],
    &["maximum", "max"],
];

/// The statistics of [`STATISTICS`] that one of `task_words` names.
fn asked_statistics(task_words: &[&str]) -> Vec<&'static [&'static str]> {
    STATISTICS
        .into_iter()
        .filter(|kind| kind.iter().any(|word| task_words.contains(word)))
        .collect()
}

/// The result lines that give what a task that combines values names (format 29): for "add
/// the total of the amount column to the total of its units column", `amount sum: 1705.47` and
/// `units sum: 212` — for each column of the task ([`measured_things`]), the first line whose
/// label names it and the task's statistic (`total` or `sum`, `average` or `mean`, `min`,
/// `max`). `None` unless every column has one and there are two or more.
pub(crate) fn lines_to_combine(task: &str, results: &[&str]) -> Option<Vec<String>> {
    let things = measured_things(task);
    let lower = task.to_lowercase();
    let task_words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
    let kinds = asked_statistics(&task_words);
    if things.len() < 2 || kinds.is_empty() {
        return None;
    }
    first_labelled_lines(results, &things, |label, thing| {
        let words: Vec<String> = label
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .map(|word| singular(&word.to_lowercase()))
            .collect();
        let named = words.iter().any(|word| word == thing);
        let measured = kinds.iter().any(|kind| kind.iter().any(|k| words.iter().any(|w| w == k)));
        named && measured
    })
}

/// For each of `things`, the first line of `results` (`label: value`, trimmed) whose value
/// states a figure and whose label `fits` the thing. `None` unless every thing has one.
fn first_labelled_lines<T: AsRef<str>>(
    results: &[&str],
    things: &[T],
    fits: impl Fn(&str, &str) -> bool,
) -> Option<Vec<String>> {
    let lines: Vec<&str> = results.iter().flat_map(|text| text.lines()).map(str::trim).collect();
    things
        .iter()
        .map(|thing| {
            lines.iter().find_map(|line| {
                let (label, value) = line.split_once(':')?;
                (fits(label, thing.as_ref()) && states_figure(value)).then(|| (*line).to_owned())
            })
        })
        .collect()
}

/// The note that refuses, once more, the same one result restated where the task combines
/// values (format 29): the results' lines to combine, and the arithmetic.
pub(crate) fn combine_lines_note(lines: &[String], task: &str) -> String {
    let (shown, work) = lines_and_work(lines, task);
    format!(
        "answer not accepted yet: the task asks to combine values, and the results give {shown}. \
         Work out {work} and answer with that result and the values it comes from."
    )
}

/// The note that refuses, once, an answer that restates one result where the task asks to
/// combine two.
pub(crate) fn combine_note(figure: &str) -> String {
    format!(
        "answer not accepted yet: the task asks to combine values, and {figure} is one result as \
         the script printed it. Find each value the task names (run the script again for the \
         other one if needed), then answer with the result of the arithmetic and the values it \
         comes from."
    )
}

/// An argument that writes a value with its unit ("1 nmi") while the unit is another argument
/// of the same call (`["1 nmi", "nmi", "m"]`, format 12): the value twice, once with its unit,
/// where a usage of VALUE FROM TO takes the number alone. With `unit_place` (format 30,
/// [`UNIT_PLACE_SINCE_FORMAT`]) also where two words of letters follow it, however the first
/// spells the unit (`["212 lbs", "pounds", "kilograms"]`): three units for one conversion.
/// The argument, the unit's own argument and the value alone; `None` when no argument is so.
pub(crate) fn value_with_its_unit(args: &[String], unit_place: bool) -> Option<(&str, &str, &str)> {
    // A word of letters: a unit's place (`pounds`, `kg`), not a number or a phrase.
    let letters = |text: &str| {
        text.chars().next().is_some_and(char::is_alphabetic) && !text.contains(char::is_whitespace)
    };
    args.iter().enumerate().find_map(|(at, arg)| {
        let (value, unit) = arg.trim().split_once(' ')?;
        let unit = unit.trim();
        let numeric = !value.is_empty()
            && value.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '-' | '+'))
            && value.chars().any(|c| c.is_ascii_digit());
        if !numeric || unit.is_empty() || unit.contains(char::is_whitespace) {
            return None;
        }
        if args.iter().any(|other| other.trim() == unit) {
            return Some((arg.as_str(), unit, value));
        }
        match &args[at + 1..] {
            [place, to, ..]
                if unit_place && letters(unit) && letters(place.trim()) && letters(to.trim()) =>
            {
                Some((arg.as_str(), place.trim(), value))
            }
            _ => None,
        }
    })
}

/// The note that refuses, once, an answer that states no figure where the task asks to
/// combine values (format 12): the local 1.5B's plan-execute-think summary of "Add the total
/// of the amount column … to the total of its units column" was "The script `csv-summary` has
/// run successfully, and the results are available.", the two totals only in its next-step
/// preview.
pub(crate) fn combine_figureless_note() -> String {
    "answer not accepted yet: the task asks to combine values, and the answer states no \
     figure. Take each value the task names from the results above (run the script for one \
     that is missing), work out the arithmetic the task asks for, and answer with that result \
     and the values it comes from."
        .to_owned()
}

/// The columns a task that gives no figure asks a statistic of, as it writes them (format 30):
/// the word before "column" as [`measured_things`] finds it, and each name of a list before
/// "columns" ("the units, unit_price and amount columns": `units`, `unit_price`, `amount`).
pub(crate) fn named_columns(task: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    if measured_things(task).is_empty() {
        return names;
    }
    let lower = task.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let name = |word: &str| -> Option<String> {
        let word = word.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        (word.chars().count() >= 2
            && word.chars().all(|c| c.is_alphanumeric() || c == '_')
            && word.chars().any(char::is_alphabetic)
            && !NOT_COLUMN_NAMES.contains(&word)
            && !matches!(word, "and" | "of" | "all" | "both"))
        .then(|| word.to_owned())
    };
    for (at, word) in words.iter().enumerate() {
        let plural = match word.trim_end_matches(|c: char| !c.is_alphanumeric()) {
            "column" => false,
            "columns" => true,
            _ => continue,
        };
        // Back from "columns" over the list: a name, then "and" or a comma before each earlier one.
        let mut back = at;
        while back > 0 {
            back -= 1;
            let Some(found) = name(words[back]) else { break };
            if !names.contains(&found) {
                names.push(found);
            }
            if !plural || back == 0 {
                break;
            }
            if words[back - 1] == "and" {
                back -= 1;
            } else if !words[back - 1].ends_with(',') {
                break;
            }
        }
    }
    names
}

/// The columns of `columns` ([`named_columns`]) for which `results` have lines of the form
/// `<label naming the column>: <figure>` and `answer` states none of those figures (format 30),
/// each with the lines that give the statistic the task asks ("total" → `units sum: 212`), or
/// all of the column's lines when none names it. With `unrun` (format 37), a column no result
/// has such a line of, where another of `columns` has them, is missing too, with no lines.
/// Empty when each column has its figure, or the results have no such lines.
pub(crate) fn columns_without_figure(
    answer: &str,
    task: &str,
    columns: &[String],
    results: &[&str],
    unrun: bool,
) -> Vec<(String, Vec<String>)> {
    let stated = stated_numbers(answer);
    let lower = task.to_lowercase();
    let task_words: Vec<&str> =
        lower.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).collect();
    let kinds = asked_statistics(&task_words);
    // The words of a line's label, the column's name kept whole (`unit_price sum`).
    let words = |label: &str| {
        label.split(|c: char| !(c.is_alphanumeric() || c == '_')).map(str::to_owned).collect()
    };
    // The lines `<label naming the column>: <figure>`, with their labels' words.
    let lines_of = |column: &str| {
        let one = singular(column);
        let mut lines: Vec<LabelledLine<'_>> = Vec::new();
        for line in results.iter().flat_map(|text| text.lines()) {
            let Some((label, value)) = line.split_once(':') else { continue };
            let Ok(figure) = value.trim().replace(',', "").parse::<f64>() else { continue };
            let label: Vec<String> = words(&label.trim().to_lowercase());
            if figure.is_finite()
                && label.iter().any(|word| word == column || singular(word) == one)
            {
                lines.push((line.trim(), label, figure));
            }
        }
        lines
    };
    let columns: Vec<(&String, Vec<LabelledLine<'_>>)> =
        columns.iter().map(|column| (column, lines_of(column))).collect();
    // From format 37 a column no result gives a line of is missing too, where the results
    // give another named column's: the call for it never ran.
    let unrun = unrun && columns.iter().any(|(_, lines)| !lines.is_empty());
    let mut missing = Vec::new();
    for (column, lines) in columns {
        if lines.is_empty() {
            if unrun {
                missing.push((column.clone(), Vec::new()));
            }
            continue;
        }
        if lines.iter().any(|(_, _, figure)| stated.iter().any(|number| same(number, *figure))) {
            continue;
        }
        // The lines whose label names, beside the column, a word of the task or the statistic
        // it asks under another name; all of them when none does.
        let asked = |label: &[String]| {
            label.iter().any(|word| {
                word != column
                    && (task_words.contains(&word.as_str())
                        || kinds.iter().any(|kind| kind.contains(&word.as_str())))
            })
        };
        let shown: Vec<String> = lines
            .iter()
            .filter(|(_, label, _)| asked(label))
            .map(|(line, _, _)| (*line).to_owned())
            .collect();
        let shown = if shown.is_empty() {
            lines.iter().map(|(line, _, _)| (*line).to_owned()).collect()
        } else {
            shown
        };
        missing.push((column.clone(), shown));
    }
    missing
}

/// The note that refuses, once, an answer that states no figure of the results for some of
/// the columns the task names ([`columns_without_figure`], format 30).
pub(crate) fn columns_note(missing: &[(String, Vec<String>)]) -> String {
    let names = |unrun: bool| {
        missing
            .iter()
            .filter(|(_, lines)| lines.is_empty() == unrun)
            .map(|(column, _)| format!("`{column}`"))
            .collect::<Vec<_>>()
    };
    let plural = |names: &[String], one: &'static str, many: &'static str| {
        if names.len() == 1 { one } else { many }
    };
    let (shown, unrun) = (names(false), names(true));
    let lines: Vec<String> = missing
        .iter()
        .flat_map(|(_, lines)| lines.iter().take(4).map(|line| format!("`{line}`")))
        .collect();
    let mut note = String::from("answer not accepted yet: ");
    if !shown.is_empty() {
        note.push_str(&format!(
            "the task asks a figure of the {} column{}, and the answer gives none of the \
             results' figures for {}. The results give {}. ",
            shown.join(", "),
            plural(&shown, "", "s"),
            plural(&shown, "it", "them"),
            lines.join(", ")
        ));
    }
    if !unrun.is_empty() {
        // Format 37: the call for the column never ran.
        note.push_str(&format!(
            "{} the {} column{}, and no result gives {} yet: run the script for {} too. ",
            if shown.is_empty() { "the task asks a figure of" } else { "It asks a figure of" },
            unrun.join(", "),
            plural(&unrun, "", "s"),
            plural(&unrun, "it", "them"),
            plural(&unrun, "it", "them"),
        ));
    }
    note.push_str("Answer with the figure of each column the task names.");
    note
}

/// The note that refuses, once, an answer that states no figure where the task asks a
/// statistic of a column (format 26): `things` are the columns ([`measured_things`]).
pub(crate) fn measured_figureless_note(things: &[String]) -> String {
    let columns = things.iter().map(|thing| format!("`{thing}`")).collect::<Vec<_>>().join(", ");
    format!(
        "answer not accepted yet: the task asks for a figure of the {columns} column, and the \
         answer states none. Run the script that computes it (on the file the task or the \
         results name), then answer with that figure."
    )
}

/// The articles and pronouns passed over before a unit ("convert the total to the metric
/// units" → `metric`).
const PASSED_WORDS: [&str; 10] =
    ["the", "a", "an", "that", "this", "these", "those", "its", "their", "each"];

/// What `task` asks to convert into: in each sentence, the word after the first "to" or
/// "into" that follows a word of converting ("convert", "conversion", not "converter";
/// "convert that many pounds to kilograms" →
/// `kilograms`; "Convert 72 F to C" → `c`), lowercased, each once. An article or pronoun
/// there is passed over ("convert the total to the metric units" → `metric`). Only the first
/// target after each such word: in a batch ("convert 5 mi to km, 10 km to mi") the later
/// items are the completeness check's ([`unused_task_numbers`]). English only.
pub(crate) fn conversion_targets(task: &str) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    // A sentence ends at a full stop before a space, not in `1.5` or `sales.csv`.
    for sentence in task.replace(". ", "\n").split(['?', '!', ';', '\n']) {
        let lower = sentence.to_lowercase();
        let words: Vec<&str> =
            lower.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).collect();
        let mut converting = false;
        for (index, &word) in words.iter().enumerate() {
            // The verb and its noun, not "converter" ("use the unit converter to tell me …").
            if matches!(
                word,
                "convert" | "converts" | "converted" | "converting" | "conversion" | "conversions"
            ) {
                converting = true;
            } else if converting && matches!(word, "to" | "into") {
                let target = words[index + 1..]
                    .iter()
                    .find(|next| !PASSED_WORDS.contains(next))
                    .filter(|next| next.chars().any(char::is_alphabetic));
                if let Some(target) = target
                    && !targets.iter().any(|known| known == target)
                {
                    targets.push((*target).to_owned());
                }
                converting = false;
            }
        }
    }
    targets
}

/// The `targets` ([`conversion_targets`]) that `answer` names nowhere: no word of the answer is
/// the target, its singular, an abbreviation of it (`kg` for `kilograms`) or a word it
/// abbreviates (`kilometres` for `km`). Leans to naming: a unit written in any of those forms
/// counts.
pub(crate) fn unnamed_targets(answer: &str, targets: &[String]) -> Vec<String> {
    let lower = answer.to_lowercase();
    let words: Vec<&str> =
        lower.split(|c: char| !c.is_alphabetic()).filter(|word| !word.is_empty()).collect();
    targets
        .iter()
        .filter(|target| {
            let target = target.as_str();
            let one = singular(target);
            !words.iter().any(|word| {
                *word == target
                    || singular(word) == one
                    || abbreviates(word, target)
                    || abbreviates(target, word)
            })
        })
        .cloned()
        .collect()
}

/// The `targets` that `answer` names ([`unnamed_targets`] leaves them out) while the results
/// convert into them and `answer` states none of those converted figures (format 38): a unit
/// named with no figure in it. After `212 lb = 96.16158244 kg`, the local 1.5B answered "The
/// total of the `units` column is 212, and it has been converted from pounds to kilograms.",
/// and the answer was taken. A conversion's line is `… = FIGURE UNIT …`; the unit is read
/// after the `=`.
pub(crate) fn figureless_targets(
    answer: &str,
    targets: &[String],
    results: &[&str],
) -> Vec<String> {
    let stated = stated_numbers(answer);
    let unnamed = unnamed_targets(answer, targets);
    let conversions: Vec<(f64, &str)> = results
        .iter()
        .flat_map(|text| text.lines())
        .filter_map(|line| {
            let (_, converted) = line.split_once('=')?;
            let figure = stated_numbers(converted).into_iter().next()?;
            Some((figure.value, converted))
        })
        .collect();
    targets
        .iter()
        .filter(|target| !unnamed.contains(target))
        .filter(|target| {
            let into: Vec<f64> = conversions
                .iter()
                .filter(|(_, converted)| {
                    unnamed_targets(converted, std::slice::from_ref(target)).is_empty()
                })
                .map(|(figure, _)| *figure)
                .collect();
            !into.is_empty()
                && !into.iter().any(|figure| stated.iter().any(|number| same(number, *figure)))
        })
        .cloned()
        .collect()
}

/// The note that refuses, once, an answer that names none of the units the task asks to
/// convert into (format 27).
pub(crate) fn target_unit_note(targets: &[String]) -> String {
    let units = targets.iter().map(|target| format!("`{target}`")).collect::<Vec<_>>().join(", ");
    format!(
        "answer not accepted yet: the task asks to convert to {units}, and the answer states no \
         figure in it. Run the script that converts the value (select a skill that converts, if \
         the selected ones do not), then answer with the converted figure."
    )
}

/// The lines of `results` (outputs, as [`Sources::results`] holds them) that already state a
/// figure in one of `targets` (format 29), the first for each target, as the script printed
/// them (`1 nmi = 1852 m`): the local 1.5B ran every conversion of a batch, answered with the
/// one total that needed none, and was told to "run the script that converts" twice, with the
/// conversions already above.
pub(crate) fn target_result_lines(targets: &[String], results: &[&str]) -> Vec<String> {
    // Named as a word: the unit, its singular, or an abbreviation either way of two letters
    // or more (`m` is no abbreviation of "mean").
    let names = |line: &str, target: &str| {
        let lower = line.to_lowercase();
        let one = singular(target);
        lower.split(|c: char| !c.is_alphabetic()).filter(|word| !word.is_empty()).any(|word| {
            word == target
                || singular(word) == one
                || (word.len() >= 2 && abbreviates(word, target))
                || (target.len() >= 2 && abbreviates(target, word))
        })
    };
    let output: Vec<&str> = results.iter().flat_map(|text| text.lines()).collect();
    let mut lines: Vec<String> = Vec::new();
    for target in targets {
        let naming = |line: &&&str| states_figure(line) && names(line, target);
        // A conversion's line (`=`) first.
        let line = output
            .iter()
            .filter(|line| line.contains('='))
            .find(naming)
            .or_else(|| output.iter().find(naming));
        if let Some(line) = line.map(|line| gist_within(line.trim(), RESULT_CHARS))
            && !lines.contains(&line)
        {
            lines.push(line);
        }
    }
    lines
}

/// The conversion lines of `results` (`1 GiB = 1073.741824 MB`) whose converted figure, the
/// first after `=`, `answer` does not state (format 31), as the script printed them, each
/// once: the refusal of an answer that names no unit the task converts into showed the first
/// target's line alone, and the local 1.5B, with every conversion of a batch run, answered
/// with the total and one conversion twice more, to the turn limit.
pub(crate) fn conversions_left_out(answer: &str, results: &[&str]) -> Vec<String> {
    let stated = stated_numbers(answer);
    let mut lines: Vec<String> = Vec::new();
    for line in results.iter().flat_map(|text| text.lines()) {
        let Some((_, converted)) = line.split_once('=') else { continue };
        let Some(figure) = stated_numbers(converted).into_iter().next() else { continue };
        let line = gist_within(line.trim(), RESULT_CHARS);
        if !stated.iter().any(|number| same(number, figure.value)) && !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// The note that refuses, once, an answer that names none of the units the task asks to
/// convert into, where the results already state the converted figures (format 29): those
/// lines, to answer with.
pub(crate) fn target_in_results_note(targets: &[String], lines: &[String]) -> String {
    let units = targets.iter().map(|target| format!("`{target}`")).collect::<Vec<_>>().join(", ");
    let lines = lines.iter().map(|line| format!("`{line}`")).collect::<Vec<_>>().join(", ");
    format!(
        "answer not accepted yet: the task asks to convert to {units}, and the answer states no \
         figure in it. The results above already give {lines}: answer with the converted \
         figures, together with the rest of what the task asks."
    )
}

/// Whether `text` states a figure (a number as the grounding check reads it).
pub(crate) fn states_figure(text: &str) -> bool {
    !stated_numbers(text).is_empty()
}

/// The note that refuses a second restated result (format 11): the figures restated so far,
/// and the arithmetic the task asks for with them ("1705.47 + 212" where the task adds).
pub(crate) fn combine_again_note(figures: &[String], task: &str) -> String {
    let both = figures.join(" and ");
    let work = combine_work(figures, task);
    format!(
        "answer not accepted yet: the task asks to combine values, and {both} are results as the \
         scripts printed them. Work out {work} and answer with that result and the values it \
         comes from."
    )
}

/// The arithmetic the task asks for, worked out on the results an ungrounded answer names
/// (format 29): for "add the total of A to the total of B", answered "A is 1705.47 and B is
/// 212. The sum … is 1917.84." (the local 1.5B's own addition, wrong), the sentence "The
/// results your answer names: 1705.47 and 212; 1705.47 + 212 = 1917.47." to add to the
/// refusal. A sum of every such result where the task adds ("add", "plus"); the difference of
/// two where it subtracts. `None` when the task combines nothing, or the answer names fewer
/// than two results (or, to subtract, more than two) that the user's texts do not give.
pub(crate) fn worked_combination(
    answer: &str,
    sources: &Sources<'_>,
    task: &str,
    format: u32,
) -> Option<String> {
    if !combines(task, format) {
        return None;
    }
    let mut figures: Vec<Number> = Vec::new();
    for figure in stated_numbers(answer) {
        if held_by(&sources.results, &figure)
            && !held_by(&sources.user, &figure)
            && !figures.iter().any(|known| equal(known.value, figure.value))
        {
            figures.push(figure);
        }
    }
    let decimals = figures.iter().map(|figure| figure.decimals).max()?.min(12) as usize;
    let names = figures.iter().map(|figure| figure.text.as_str()).collect::<Vec<_>>();
    let work = match figures.as_slice() {
        [_, _, ..] if adds(task) => {
            let sum: f64 = figures.iter().map(|figure| figure.value).sum();
            format!("{} = {sum:.decimals$}", names.join(" + "))
        }
        [a, b] => {
            let (big, small) = if a.value >= b.value { (a, b) } else { (b, a) };
            let difference = big.value - small.value;
            format!("{} - {} = {difference:.decimals$}", big.text, small.text)
        }
        _ => return None,
    };
    Some(format!("The results your answer names: {}; {work}.", names.join(" and ")))
}

/// The word of the user's texts that `arg` spells out (format 29): a unit as the task writes
/// it, right after a number or after "to"/"into" ([`unit_words`]: "20 C to F", "1 GiB to MB"), that
/// abbreviates `arg` (`C` for `celsius`, `kg` for `kilograms`) and is no argument of the call
/// yet. A one-letter word counts only as a capital (a symbol, not `m` for `miles`). `None`
/// unless exactly one word is so: which of two to write is a guess.
pub(crate) fn task_symbol_for(arg: &str, user: &[&str], args: &[String]) -> Option<String> {
    let spelled = arg.trim().to_lowercase();
    if spelled.chars().count() < 2 || !spelled.chars().all(char::is_alphabetic) {
        return None;
    }
    let mut found: Vec<&str> = Vec::new();
    for word in user.iter().flat_map(|text| unit_words(text)) {
        let symbol = word.chars().count() >= 2 || word.chars().all(char::is_uppercase);
        if symbol
            && word.to_lowercase() != spelled
            && abbreviates(&word.to_lowercase(), &spelled)
            && !args.iter().any(|other| other.trim() == word)
            && !found.contains(&word)
        {
            found.push(word);
        }
    }
    match found.as_slice() {
        [word] => Some((*word).to_owned()),
        _ => None,
    }
}

/// The words of `text` where a unit stands: right after a number or after "to"/"into"
/// ("20 C to F", "1 GiB to MB" → `C`, `F`, `GiB`, `MB`), letters only, no article or pronoun
/// ("to the").
fn unit_words(text: &str) -> Vec<&str> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric() && c != '.')
        .map(|word| word.trim_matches('.'))
        .filter(|word| !word.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|pair| {
            let before = pair[0];
            before.replace(',', "").parse::<f64>().is_ok()
                || matches!(before.to_lowercase().as_str(), "to" | "into")
        })
        .map(|pair| pair[1])
        .filter(|word| {
            word.chars().all(char::is_alphabetic)
                && !PASSED_WORDS.contains(&word.to_lowercase().as_str())
        })
        .collect()
}

/// The arithmetic to work out on `figures` where `task` combines values: "their sum (1705.47 +
/// 212)" where it adds, "the difference the task asks for" otherwise.
fn combine_work(figures: &[String], task: &str) -> String {
    if adds(task) {
        format!("their sum ({})", figures.join(" + "))
    } else {
        "the difference the task asks for".to_owned()
    }
}

/// The numbers of `task` that no call's `args` used and `answer` does not state, when another
/// of the task's numbers was used or two or more are left: the rest of a batch ("5 miles to
/// km; 10 km to miles; …") that the model answered after its first call, or the second part
/// of a task it left undone. Also how many of the task's numbers the calls used (the batch's
/// progress). The caller asks only once a script ran in the task. With `each` (format 11) a
/// number the task writes twice ("5 miles to km; … 5 kg to lb") needs two calls that use it,
/// or an answer that states it twice; the second is listed as "5 (a second time)".
pub(crate) fn unused_task_numbers(
    task: &str,
    args: &[&str],
    answer: &str,
    each: bool,
) -> (usize, Vec<String>) {
    let in_args: Vec<Number> = args.iter().flat_map(|arg| stated_numbers(arg)).collect();
    let stated = stated_numbers(answer);
    let times_in = |list: &[Number], number: &Number| {
        list.iter().filter(|other| equal(other.value, number.value)).count()
    };
    // The task's numbers, each once, with how many times the task writes it.
    let mut task_numbers: Vec<(Number, usize)> = Vec::new();
    for number in stated_numbers(task) {
        match task_numbers.iter_mut().find(|(other, _)| equal(other.value, number.value)) {
            Some((_, times)) => *times += 1,
            None => task_numbers.push((number, 1)),
        }
    }
    let mut used = 0;
    let mut unused = Vec::new();
    for (number, times) in task_numbers {
        let times = if each { times } else { 1 };
        let in_calls = times_in(&in_args, &number);
        used += in_calls.min(times);
        let covered = in_calls.max(times_in(&stated, &number));
        for time in covered..times {
            unused.push(match time {
                0 => number.text.clone(),
                1 => format!("{} (a second time)", number.text),
                2 => format!("{} (a third time)", number.text),
                _ => format!("{} (once more)", number.text),
            });
        }
    }
    // One number no call used may be no argument at all ("rounded to 2 decimals").
    if used == 0 && unused.len() < 2 {
        return (0, Vec::new());
    }
    (used, unused)
}

/// The arguments of a call that respell a word of the user's texts by leaving out one of its
/// inner letters (`GB` where the task writes "GiB", `amont` for "amount"), each with the word
/// as the user wrote it, when no user text or result writes the argument's own word. A small
/// model writes the familiar token for the task's rarer one, and a script that knows both
/// gives a confident wrong result. A plural's `s` left out (`lb` for "lbs") is no respelling,
/// and a word of three letters counts only with a capital in it, as a symbol (`GiB`), not a
/// word of the sentence (`fr`, a language code, is no respelling of "for").
pub(crate) fn respelled_arguments<'a>(
    args: &'a [String],
    sources: &Sources<'_>,
) -> Vec<(&'a str, String)> {
    fn split(text: &str) -> impl Iterator<Item = &str> {
        text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty())
    }
    let user_words: Vec<&str> = sources
        .user
        .iter()
        .flat_map(|text| split(text))
        .filter(|word| word.chars().count() > 3 || word.chars().any(char::is_uppercase))
        .collect();
    let known: Vec<String> = sources
        .user
        .iter()
        .chain(&sources.results)
        .flat_map(|text| split(text))
        .map(str::to_lowercase)
        .collect();
    let drops_inner_letter = |token: &str, word: &str| {
        let (token, word): (Vec<char>, Vec<char>) =
            (token.chars().collect(), word.chars().collect());
        token.len() >= 2
            && word.len() == token.len() + 1
            && (1..word.len() - 1).any(|gone| {
                word[gone].is_alphabetic()
                    && word[..gone] == token[..gone]
                    && word[gone + 1..] == token[gone..]
            })
    };
    let mut found = Vec::new();
    for arg in args {
        if arg.starts_with('-') {
            continue;
        }
        let respelled = arg
            .split(|c: char| !c.is_alphanumeric())
            .filter(|token| token.chars().any(char::is_alphabetic))
            .find_map(|token| {
                let lower = token.to_lowercase();
                if known.contains(&lower) {
                    return None;
                }
                user_words
                    .iter()
                    .find(|word| drops_inner_letter(&lower, &word.to_lowercase()))
                    .map(|word| (*word).to_owned())
            });
        // From format 29, a unit the user writes with its first letter left out (`mi` for
        // "1 nmi": the local 1.5B converted a mile), when the argument abbreviates no word of
        // theirs (`mi` beside "miles" is that word).
        let respelled = respelled.or_else(|| {
            let token = arg.trim().to_lowercase();
            (sources.first_letter_units
                && token.chars().count() >= 2
                && token.chars().all(char::is_alphabetic)
                && !known.contains(&token)
                && !user_words.iter().any(|word| abbreviates(&token, &word.to_lowercase())))
            .then(|| {
                sources
                    .user
                    .iter()
                    .flat_map(|text| unit_words(text))
                    .find(|word| {
                        let lower = word.to_lowercase();
                        lower.chars().count() == token.chars().count() + 1
                            && lower.chars().skip(1).eq(token.chars())
                    })
                    .map(str::to_owned)
            })
            .flatten()
        });
        if let Some(word) = respelled {
            found.push((arg.as_str(), word));
        }
    }
    found
}

/// `args` with the fixes the firm refusals ask for (format 18): each argument that respells a
/// word of the user's texts ([`respelled_arguments`]) written as they write it, then each value
/// written with its unit beside the unit's own argument ([`value_with_its_unit`]) as the value
/// alone. `None` when nothing needs fixing, or when a respelled word sits inside a longer
/// argument (which of its words to change is a guess).
pub(crate) fn fixed_arguments(args: &[String], sources: &Sources<'_>) -> Option<Vec<String>> {
    let mut fixed = args.to_vec();
    for (arg, word) in respelled_arguments(args, sources) {
        if !arg.trim().chars().all(char::is_alphanumeric) {
            return None;
        }
        for slot in fixed.iter_mut().filter(|slot| slot.as_str() == arg) {
            slot.clone_from(&word);
        }
    }
    // Each pass writes one argument as its value alone.
    for _ in 0..fixed.len() {
        let Some((arg, _, value)) = value_with_its_unit(&fixed, sources.unit_place) else { break };
        let (arg, value) = (arg.to_owned(), value.to_owned());
        if let Some(slot) = fixed.iter_mut().find(|slot| **slot == arg) {
            *slot = value;
        }
    }
    (fixed != args).then_some(fixed)
}

/// Whether a refusal's note shows the call to make: the notes write "make this call: " (with a
/// capital at a sentence's start) before a [`shown_call`].
pub(crate) fn shows_call(note: &str) -> bool {
    note.to_lowercase().contains("make this call: {\"skill\": ")
}

/// The call a refusal's note shows ([`shows_call`]): the JSON object after "make this call: ",
/// as the note writes it. `None` when the note shows none or it is not a whole object.
pub(crate) fn call_shown_in(note: &str) -> Option<&str> {
    const MARK: &str = "make this call: ";
    // ASCII lowercasing keeps every byte offset of `note`.
    let at = note.to_ascii_lowercase().find(MARK)? + MARK.len();
    let rest = &note[at..];
    let mut objects = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
    match objects.next() {
        Some(Ok(serde_json::Value::Object(_))) => Some(&rest[..objects.byte_offset()]),
        _ => None,
    }
}

/// A `run_script` call's arguments as the model writes them (`{"skill": "…", "script": "…",
/// "args": ["…", "…"]}`, the separators of its one-line grammar), for a note to show.
pub(crate) fn shown_call(skill: &str, script: &str, args: &[String]) -> String {
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let args: Vec<String> = args.iter().map(|arg| quoted(arg)).collect();
    format!(
        "{{\"skill\": {}, \"script\": {}, \"args\": [{}]}}",
        quoted(skill),
        quoted(script),
        args.join(", ")
    )
}

/// The argument of a failed call that its error names first, as a whole word, after the
/// `stderr:` line when there is one (`'units'` in "unknown unit: 'units'; known units: …, kg";
/// `docs` in "no such folder in the workspace: docs"): most errors name the value they failed
/// on before any list of what would do. Arguments of one character, and figures, are left out
/// (they turn up in any text).
pub(crate) fn argument_named_by_error<'a>(args: &'a [String], output: &str) -> Option<&'a str> {
    let error = output.split_once("stderr:").map_or(output, |(_, error)| error);
    args.iter()
        .map(|arg| arg.trim())
        .filter(|arg| arg.chars().count() >= 2 && arg.parse::<f64>().is_err())
        .filter_map(|arg| Some((whole_word_at(error, arg)?, arg)))
        .min_by_key(|(at, _)| *at)
        .map(|(_, arg)| arg)
}

/// The word of `task` to write in place of `named`, the argument a failed call's error names:
/// the one task word that the skill's `instructions` show as a value of its own (an inline code
/// span that is that word alone: `pounds`) or that the error lists as a value (a word between
/// separators: "columns in sales.csv: date, region, amount"), and that no argument of the call
/// writes or abbreviates. `None` when there is none, or several. Asked to "convert that many
/// pounds to kilograms" after summing the units column, the local 1.5B ran `convert.py 212
/// units kg` three times, told each time that the error names `units`.
pub(crate) fn task_word_for(
    named: &str,
    args: &[String],
    task: &str,
    instructions: &str,
    error: &str,
) -> Option<String> {
    let lower = |text: &str| text.trim().to_lowercase();
    // The instructions' inline code spans, outside fenced blocks.
    let spans: Vec<String> = instructions
        .split("```")
        .step_by(2)
        .flat_map(|part| {
            let pieces: Vec<&str> = part.split('`').collect();
            let last = pieces.len().saturating_sub(1);
            pieces.into_iter().enumerate().filter(move |(i, _)| i % 2 == 1 && *i < last)
        })
        .map(|(_, span)| lower(span))
        .collect();
    // The items of the lists the error writes after the value it names: each word beside a
    // comma (`mass: kg, lb`; `columns in sales.csv: date, region, amount`).
    let error = error.split_once("stderr:").map_or(error, |(_, error)| error);
    let after = whole_word_at(error, named).map_or("", |at| &error[at + named.len()..]);
    let words_of = |piece: &str| -> Vec<String> {
        piece
            .split(|c: char| c.is_whitespace() || matches!(c, ';' | ':' | '(' | ')' | '\'' | '"'))
            .map(lower)
            .filter(|word| !word.is_empty())
            .collect()
    };
    let pieces: Vec<Vec<String>> = after.split(',').map(words_of).collect();
    let mut listed: Vec<String> = Vec::new();
    for (i, words) in pieces.iter().enumerate() {
        if i + 1 < pieces.len() {
            listed.extend(words.last().cloned());
        }
        if i > 0 {
            listed.extend(words.first().cloned());
        }
    }
    let written = |word: &str| {
        args.iter().map(|arg| lower(arg)).any(|arg| arg == word || abbreviates(&arg, word))
    };
    let mut found: Vec<String> = Vec::new();
    for word in task.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-'))) {
        let word = lower(word);
        if word.chars().count() < 3
            || !word.chars().any(char::is_alphabetic)
            || word == lower(named)
            || found.contains(&word)
            || written(&word)
        {
            continue;
        }
        if spans.contains(&word) || listed.contains(&word) {
            found.push(word);
        }
    }
    match found.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Kinds of file a task may name ("Markdown files"), with the extension their names end in.
const FILE_KINDS: [(&str, &str); 16] = [
    ("markdown", "md"),
    ("csv", "csv"),
    ("json", "json"),
    ("yaml", "yaml"),
    ("python", "py"),
    ("text", "txt"),
    ("pdf", "pdf"),
    ("html", "html"),
    ("javascript", "js"),
    ("typescript", "ts"),
    ("rust", "rs"),
    ("shell", "sh"),
    ("excel", "xlsx"),
    ("word", "docx"),
    ("powerpoint", "pptx"),
    ("toml", "toml"),
];

/// The kinds of file `task` names, as it writes them, each with the pattern of its names:
/// a kind word right before "file(s)", "document(s)" or "script(s)" ("Which Markdown files
/// …" → `Markdown`, `*.md`). English only, like [`reads_as_plan`].
pub(crate) fn file_kind_patterns(task: &str) -> Vec<(String, String)> {
    let words: Vec<&str> =
        task.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).collect();
    let mut found: Vec<(String, String)> = Vec::new();
    for pair in words.windows(2) {
        let noun = pair[1].to_lowercase();
        if !matches!(
            noun.as_str(),
            "file" | "files" | "document" | "documents" | "script" | "scripts"
        ) {
            continue;
        }
        let kind = pair[0].to_lowercase();
        if let Some((_, extension)) = FILE_KINDS.iter().find(|(name, _)| *name == kind) {
            let pattern = format!("*.{extension}");
            if !found.iter().any(|(_, known)| *known == pattern) {
                found.push((pair[0].to_owned(), pattern));
            }
        }
    }
    found
}

/// Whether `arg` names files by kind: a pattern or a file name with an extension (`*.csv`,
/// `data/invoice-2024.csv`).
pub(crate) fn names_file_kind(arg: &str) -> bool {
    let arg = arg.trim();
    arg.rsplit_once('.').is_some_and(|(name, extension)| {
        !name.is_empty()
            && (1..=5).contains(&extension.len())
            && extension.starts_with(|c: char| c.is_ascii_alphabetic())
            && extension.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

/// Whether `answer` states a number `output` writes (its arguments' numbers included: "It
/// printed 3 lines" of `print.sh 3 x`).
pub(crate) fn shares_a_number(answer: &str, output: &str) -> bool {
    let mut written = Vec::new();
    source_numbers(output, &mut written, true);
    stated_numbers(answer)
        .iter()
        .any(|number| written.iter().any(|&other| equal(other, number.value)))
}

/// Whether `answer` states a figure of a call's `output` (as written or rounded), other than
/// the numbers of the call's own `args`; an output with no such figure needs none.
pub(crate) fn states_figures(answer: &str, output: &str, args: &[String]) -> bool {
    let given: Vec<f64> =
        args.iter().flat_map(|arg| stated_numbers(arg)).map(|n| n.value).collect();
    let figures: Vec<f64> = stated_numbers(output)
        .into_iter()
        .map(|number| number.value)
        .filter(|&value| !given.iter().any(|&arg| equal(arg, value)))
        .collect();
    let stated = stated_numbers(answer);
    figures.is_empty()
        || figures.iter().any(|&figure| stated.iter().any(|number| same(number, figure)))
}

/// Whether `task` asks for a quantity: "how many", "how much", or a total, sum, average,
/// mean, count or number of something (English only, like [`reads_as_plan`]).
pub(crate) fn asks_quantity(task: &str) -> bool {
    let lower = task.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
    lower.contains("how many")
        || lower.contains("how much")
        || words
            .iter()
            .any(|word| matches!(*word, "total" | "sum" | "average" | "mean" | "count" | "number"))
}

/// The task's unused values as a note lists them: the first eight, comma-separated.
pub(crate) fn value_list(unused: &[String]) -> String {
    unused.iter().take(8).map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// The note that refuses, once, an answer that leaves some of the task's numbers unused.
pub(crate) fn incomplete_note(unused: &[String]) -> String {
    let list = value_list(unused);
    let them = if unused.len() == 1 { "it" } else { "each of them" };
    format!(
        "answer not accepted yet: the task also gives {list}, which no script call has used. \
         If the task asks about {them}, run a script for it (select the skill that does it if \
         needed), one call per value, then answer with every result; if not, give the same \
         answer again."
    )
}

/// The longest value a refusal note writes whole.
const MAX_NOTED_VALUE: usize = 40;

/// `value` as a note writes it: whole up to [`MAX_NOTED_VALUE`] characters, else its start,
/// `…` and its length (an invented 200-digit checksum).
pub(crate) fn shortened(value: &str) -> String {
    let length = value.chars().count();
    if length <= MAX_NOTED_VALUE {
        return value.to_owned();
    }
    let start: String = value.chars().take(16).collect();
    format!("{start}… ({length} characters)")
}

/// The note that refuses an ungrounded answer once: the values, and what to do instead.
/// `unbacked` names the calls whose results do not count (see [`Sources::unbacked`]).
pub(crate) fn refusal_note(values: &[String], unbacked: &[String]) -> String {
    let mut note = refusal_head(values);
    if let Some(call) = unbacked.first() {
        note.push_str(&format!(
            " The result of {call} does not count: the task and the results never give that \
             argument, it was guessed."
        ));
    }
    note.push_str(
        " Do not guess. Run a script that gives the value and answer from its output, or answer \
         that the value is unknown and why.",
    );
    note
}

/// The result lines that give the things a task counts together ([`totals_two_things`],
/// format 32): for "How many ERROR and WARN lines does app.log have in total?", `ERROR: 3` and
/// `WARN: 2` — for each of the two words around the "and", the first result line labelled with
/// that word. `None` unless both have one.
pub(crate) fn counted_lines(task: &str, results: &[&str]) -> Option<Vec<String>> {
    let (first, second) = counted_pair(task)?;
    first_labelled_lines(results, &[first, second], |label, thing| {
        label.trim().to_lowercase() == thing
    })
}

/// The note that refuses an ungrounded answer once where the task counts two things together
/// and the results give each count ([`counted_lines`], format 32): the values, the lines, the
/// sum to work out. Told "do not guess, run a script", the local 1.5B ran the log analyzer
/// again and admitted it could not tell, after answering `8` (3 + 2 + 3: the INFO lines too).
pub(crate) fn counted_refusal_note(values: &[String], lines: &[String], task: &str) -> String {
    let (shown, work) = lines_and_work(lines, task);
    format!(
        "{} The results give {shown}: work out {work} and answer with that result and the values \
         it comes from.",
        refusal_head(values)
    )
}

/// Result lines (`label: value`) as a note shows them (`` `amount sum: 1705.47` and `units
/// sum: 212` ``), and the arithmetic the task asks on their figures ([`combine_work`]).
fn lines_and_work(lines: &[String], task: &str) -> (String, String) {
    let figures: Vec<String> = lines
        .iter()
        .filter_map(|line| line.split_once(':'))
        .filter_map(|(_, value)| stated_numbers(value).into_iter().next())
        .map(|number| number.text)
        .collect();
    let shown = lines.iter().map(|line| format!("`{line}`")).collect::<Vec<_>>().join(" and ");
    (shown, combine_work(&figures, task))
}

/// The note that refuses an ungrounded answer once where the task combines values and the
/// answer names the results to combine (format 29): the values, the arithmetic worked out on
/// those results ([`worked_combination`]), and to answer with it. Told first "do not guess, run
/// a script", the local 1.5B ran the script again and gave up.
pub(crate) fn worked_refusal_note(values: &[String], work: &str) -> String {
    format!(
        "{} {work} If that is the figure the task asks for, answer with it and the values it \
         comes from.",
        refusal_head(values)
    )
}

/// The first sentence of an ungrounded answer's refusal: the values (six at most) and where
/// they are not.
fn refusal_head(values: &[String]) -> String {
    let list = values.iter().take(6).map(String::as_str).collect::<Vec<_>>().join(", ");
    let (subject, verb) =
        if values.len() == 1 { ("this value", "appears") } else { ("these values", "appear") };
    format!(
        "answer not accepted: {subject} ({list}) {verb} neither in the task nor in any result of \
         this run."
    )
}

/// What a run saw, by kind: only results take part in arithmetic and counts, since a
/// document (a skill's body, a reference) is full of example figures.
#[derive(Debug, Default)]
pub(crate) struct Sources<'a> {
    /// The user's own texts: the task, answers to the run's questions.
    pub(crate) user: Vec<&'a str>,
    /// Documents the run read: skill bodies, resources, descriptions.
    pub(crate) documents: Vec<&'a str>,
    /// Results of the run's actions: script output (also of a failed run), tool results.
    pub(crate) results: Vec<&'a str>,
    /// Arithmetic as records before format 6 were checked: a sum or difference may be
    /// rounded to a whole number, and a figure two results repeat may be summed twice.
    pub(crate) lenient_sums: bool,
    /// From format 8: file names and codes (hashes, identifiers) are checked too, and the
    /// result of a call made with a figure nothing gave is no source (see `unbacked`).
    pub(crate) strict: bool,
    /// What the run's own calls name (scripts, resources, arguments): a file name in an
    /// answer may come from them.
    pub(crate) names: Vec<&'a str>,
    /// The run's scripts and resources as the notes write them (`csv-summary/scripts/s.py`),
    /// from format 9.
    pub(crate) qualified_names: Vec<String>,
    /// What the task asks to count, when it gives no figure ([`counted_things`], from format
    /// 10): a count in the answer needs a result that names the thing counted.
    pub(crate) counted: Vec<String>,
    /// The calls whose results are left out of `results`, as a note names them
    /// (`` scripts/convert.py with `20` ``): a script run with a number that neither the user
    /// nor an earlier result gave (a temperature asked of a unit converter, "20", became
    /// "68 °F").
    pub(crate) unbacked: Vec<String>,
    /// From format 16: a word of sixteen digits or more among letters is a code too
    /// ([`LONG_CODES_SINCE_FORMAT`]).
    pub(crate) long_codes: bool,
    /// From format 24: a count of what the task counts that no result names must be a figure
    /// the results or the user write (or a document's line that names the thing), not one a
    /// document shows elsewhere ([`COUNTS_FROM_RESULTS_SINCE_FORMAT`]).
    pub(crate) counts_from_results: bool,
    /// From format 26: what the task asks a statistic of ([`measured_things`]); a figure for
    /// it that only documents write is grounded by a document line naming it, not by a
    /// skill's other figures (file-finder's "up to 1000" grounded "the total of the amount
    /// column is 1000").
    pub(crate) measured: Vec<String>,
    /// From format 29: an argument that leaves out the first letter of a unit the user writes
    /// (`mi` for "1 nmi") is a respelling too ([`respelled_arguments`]).
    pub(crate) first_letter_units: bool,
    /// From format 30 ([`UNIT_PLACE_SINCE_FORMAT`]): a value written with its unit before two
    /// words of letters is the value twice too ([`value_with_its_unit`]), and a quoted quantity
    /// (`212 lbs`) in an answer is checked as its number.
    pub(crate) unit_place: bool,
}

/// A number written in an answer: its text, its absolute value, and the decimals it shows.
#[derive(Debug, Clone, PartialEq)]
struct Number {
    text: String,
    value: f64,
    decimals: u32,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(Number),
    /// An ISO date (`2024-01-15`), matched as written.
    Date(String),
}

/// The most numbers one check combines in sums over several results (2^16 subsets).
const MAX_SUMMANDS: usize = 16;
/// The most distinct numbers paired for sums and differences of two.
const MAX_PAIRED: usize = 200;
/// Up to this many distinct numbers in the results, any two of them may be an answer's
/// operands; beyond, only numbers the answer states.
const MAX_FREE_PAIRS: usize = 24;
/// The largest count of lines or items that grounds a number by itself.
const MAX_COUNT: usize = 10_000;

/// What the run's sources hold, read once per check.
struct Known {
    /// The sources' texts, lowercased.
    texts: Vec<String>,
    /// Every number the sources write (absolute values), sorted.
    values: Vec<f64>,
    /// Numbers to pair: the results' first, then the user's.
    paired: Vec<f64>,
    /// Sums over several results: every subset sum of the results' leading numbers.
    summands: Vec<f64>,
    /// Counts of the lines or items of each result.
    counts: Vec<f64>,
    /// See [`Sources::lenient_sums`].
    lenient_sums: bool,
}

impl Known {
    fn new(sources: &Sources<'_>) -> Known {
        let Sources { user, documents, results, lenient_sums, .. } = sources;
        let all = || user.iter().chain(documents).chain(results);
        let texts: Vec<String> = all().map(|text| text.to_lowercase()).collect();
        let mut values = Vec::new();
        for text in all() {
            source_numbers(text, &mut values, true);
        }
        values.sort_by(f64::total_cmp);
        values.dedup();
        let numbers_of = |text: &str| {
            let mut found = Vec::new();
            source_numbers(text, &mut found, false);
            found
        };
        let result_values: Vec<f64> = results.iter().flat_map(|text| numbers_of(text)).collect();
        let mut paired = Vec::new();
        for value in result_values
            .iter()
            .chain(user.iter().flat_map(|text| numbers_of(text)).collect::<Vec<_>>().iter())
        {
            if paired.len() >= MAX_PAIRED {
                break;
            }
            if !paired.contains(value) {
                paired.push(*value);
            }
        }
        // Sums over several results: all of the results' numbers when they are few, else the
        // first number of each result (a count, a total, a converted value).
        let mut summands: Vec<f64> = result_values;
        if *lenient_sums {
            summands.dedup();
        } else {
            // The same script run twice prints the same figures: with them twice, subset
            // sums reached 106 (30 + 30 + 20 + 20 + 6) for "212 pounds are 106 kilograms".
            let mut seen = Vec::new();
            summands.retain(|value| {
                let new = !seen.contains(value);
                seen.push(*value);
                new
            });
        }
        if summands.len() > MAX_SUMMANDS {
            summands = results
                .iter()
                .filter_map(|text| numbers_of(text).first().copied())
                .take(MAX_SUMMANDS)
                .collect();
        }
        let counts = results.iter().flat_map(|text| counts(text)).collect();
        Known { texts, values, paired, summands, counts, lenient_sums: *lenient_sums }
    }

    fn grounds(&self, number: &Number, operands: &[f64]) -> bool {
        if self.values.iter().any(|&x| same(number, x))
            || self.counts.iter().any(|&x| same(number, x))
        {
            return true;
        }
        // A sum is not rounded to a whole number: among a CSV summary's figures, 85.2735 + 15
        // "grounded" an invented average of 100.
        let matches = |x: f64| {
            (self.lenient_sums || number.decimals > 0 || x.fract() == 0.0) && same(number, x)
        };
        // Few numbers: any two may be added or subtracted. Many (a CSV summary prints dozens,
        // and their pairwise sums cover most small numbers): only two the answer itself states.
        let paired = if self.paired.len() <= MAX_FREE_PAIRS { &self.paired[..] } else { operands };
        for (i, &a) in paired.iter().enumerate() {
            for &b in &paired[i + 1..] {
                if matches(a + b) || matches((a - b).abs()) {
                    return true;
                }
            }
        }
        subset_sums(&self.summands).any(matches)
    }

    /// A quoted value is grounded when each of its words (three characters or more) appears
    /// in some source: formatting may differ, an invented name does not pass.
    fn grounds_words(&self, quoted: &str) -> bool {
        let lower = quoted.to_lowercase();
        lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| word.chars().count() >= 3 && !word.chars().all(|c| c.is_ascii_digit()))
            .all(|word| self.texts.iter().any(|text| text.contains(word)))
    }
}

/// Whether `a` and `b` are the same figure (equal up to floating-point noise, relative to
/// `b`).
fn equal(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.max(1.0)
}

/// Whether the answer's `number` is `x`, as written or rounded (or cut) to the decimals the
/// answer shows.
fn same(number: &Number, x: f64) -> bool {
    let x = x.abs();
    let v = number.value;
    if equal(x, v) {
        return true;
    }
    let scale = 10f64.powi(number.decimals.min(12) as i32);
    let rounded = (x * scale).round() / scale;
    let cut = (x * scale).trunc() / scale;
    let close = |y: f64| (y - v).abs() <= 0.5e-9 * v.max(1.0) + 1e-12;
    // An integer answer rounds only a value that had decimals (277.4 → 277), never a
    // different integer.
    (number.decimals > 0 || x.fract() != 0.0) && (close(rounded) || close(cut))
}

/// Every sum of two or more of `values` (at most [`MAX_SUMMANDS`] of them).
fn subset_sums(values: &[f64]) -> impl Iterator<Item = f64> + '_ {
    let n = values.len().min(MAX_SUMMANDS);
    (1u32..(1u32 << n))
        .filter(|mask| mask.count_ones() >= 2)
        .map(move |mask| (0..n).filter(|bit| mask & (1 << bit) != 0).map(|bit| values[bit]).sum())
}

/// The counts a result gives without writing them: its non-empty lines, and the items of a
/// JSON array or the keys of a JSON object it holds (at the top, or one level down).
fn counts(text: &str) -> Vec<f64> {
    let mut found = Vec::new();
    let lines = text.lines().filter(|line| !line.trim().is_empty()).count();
    if lines <= MAX_COUNT {
        found.push(lines as f64);
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text.trim()) {
        let mut add = |value: &serde_json::Value| match value {
            serde_json::Value::Array(items) if items.len() <= MAX_COUNT => {
                found.push(items.len() as f64)
            }
            serde_json::Value::Object(map) if map.len() <= MAX_COUNT => {
                found.push(map.len() as f64)
            }
            _ => {}
        };
        add(&value);
        if let serde_json::Value::Object(map) = &value {
            map.values().for_each(&mut add);
        }
    }
    found
}

/// Every number a source writes, liberally: each run of digits with its decimal part, with a
/// comma read both as a thousands separator and as a decimal point, and (with `parts`) each
/// run of digits alone (`3.11.2` gives 3, 11 and 2).
fn source_numbers(text: &str, out: &mut Vec<f64>, parts: bool) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len()
            && (bytes[i].is_ascii_digit()
                || (matches!(bytes[i], b'.' | b',')
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        let run = &text[start..i];
        let mut push = |s: &str| {
            if let Ok(value) = s.parse::<f64>()
                && value.is_finite()
            {
                out.push(value);
            }
        };
        push(&run.replace(',', ""));
        if run.contains(',') {
            push(&run.replace(',', "."));
        }
        if parts && (run.contains('.') || run.contains(',')) {
            for part in run.split(['.', ',']) {
                push(part);
            }
        }
        // Scientific notation (`1.5e3`).
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(bytes.get(j), Some(b'-' | b'+')) {
                j += 1;
            }
            let exp_start = j;
            while bytes.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j > exp_start {
                push(&text[start..j].replace(',', ""));
                i = j;
            }
        }
    }
}

/// The numbers and dates an answer states. A number must start a word (after a sign, a
/// currency sign or an opening bracket): the digits of a name (`v2`, `file1.csv`, `sha256`)
/// are not values; units may follow (`5km`, `50%`); a range or a time gives each of its
/// numbers (`10-20`, `10:30`). A numbered list's markers (`1.` at a line's start) are not
/// values.
fn answer_tokens(answer: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    for line in answer.lines() {
        let mut words = line.split_whitespace().peekable();
        // A list marker: `1.`, `2)`, `(3)`.
        if let Some(first) = words.peek() {
            let marker = first.trim_start_matches('(').trim_end_matches(['.', ')']);
            if first.len() > marker.len()
                && !marker.is_empty()
                && marker.len() <= 3
                && marker.bytes().all(|b| b.is_ascii_digit())
            {
                words.next();
            }
        }
        for word in words {
            word_tokens(word, &mut tokens);
        }
    }
    tokens
}

fn word_tokens(word: &str, tokens: &mut Vec<Token>) {
    let word = trim_word(word);
    let body = word.trim_start_matches(['-', '+', '−', '$', '€', '£', '¥', '#', '≈', '~']);
    if !body.starts_with(|c: char| c.is_ascii_digit()) {
        return;
    }
    if is_date(body) {
        tokens.push(Token::Date(body[..10].to_owned()));
        return;
    }
    let mut rest = body;
    loop {
        let (number, after) = leading_number(rest);
        let Some(number) = number else { return };
        tokens.push(Token::Number(number));
        // A range, a ratio or a time goes on with its next number.
        let mut chars = after.chars();
        match (chars.next(), chars.as_str()) {
            (Some('-' | '–' | '/' | ':' | 'x' | '×'), next)
                if next.starts_with(|c: char| c.is_ascii_digit()) =>
            {
                rest = next
            }
            _ => return,
        }
    }
}

/// The numbers `text` states, as an answer's are read (no dates).
fn stated_numbers(text: &str) -> Vec<Number> {
    answer_tokens(text)
        .into_iter()
        .filter_map(|token| match token {
            Token::Number(number) => Some(number),
            Token::Date(_) => None,
        })
        .collect()
}

/// The file names with `extension` (any case) that `text` writes, as it writes them, each
/// once (`sales.csv` in "file: sales.csv", for `csv`).
pub(crate) fn files_written(text: &str, extension: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in path_words(text) {
        if is_file_name(word)
            && word.rsplit_once('.').is_some_and(|(_, ext)| ext.eq_ignore_ascii_case(extension))
            && !found.iter().any(|known| known == word)
        {
            found.push(word.to_owned());
        }
    }
    found
}

/// The file names `text` writes (words that read as one, without their quoting), lowercased.
pub(crate) fn file_names(text: &str) -> Vec<String> {
    path_words(text).map(str::to_lowercase).filter(|word| is_file_name(word)).collect()
}

/// The words of `text` without their quoting and a leading `./`, as a path would be read.
fn path_words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace().map(|word| trim_word(word).trim_start_matches("./"))
}

/// Whether `word` reads as a file name: a name (two characters or more, or a path) and an
/// extension of one to five letters or digits that starts with a letter (`sales.csv`,
/// `docs/report.md`; not `e.g`, `8.04672` or `v1.2`).
fn is_file_name(word: &str) -> bool {
    let Some((stem, ext)) = word.rsplit_once('.') else { return false };
    let name = stem.rsplit('/').next().unwrap_or(stem);
    !name.is_empty()
        && (name.chars().count() >= 2 || stem.contains('/'))
        && (1..=5).contains(&ext.len())
        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().all(|c| c.is_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'))
}

/// Whether `word` reads as a code (a checksum, an identifier): eight characters or more of
/// letters, digits and dashes, with at least two of each of letters and digits; or sixteen
/// digits or more (beyond what a figure holds), alone or (with `long`) among letters and
/// dashes.
fn is_code(word: &str, long: bool) -> bool {
    let count = |f: fn(&char) -> bool| word.chars().filter(f).count();
    let digits = count(char::is_ascii_digit);
    let alphanumeric = word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    (word.chars().count() >= 8
        && alphanumeric
        && digits >= 2
        && count(char::is_ascii_alphabetic) >= 2)
        || (digits >= 16 && digits == word.chars().count())
        || (long && digits >= 16 && alphanumeric)
}

/// `word` without the punctuation and quoting around it.
fn trim_word(word: &str) -> &str {
    let word = word.trim_matches(|c: char| {
        matches!(
            c,
            '(' | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '"'
                | '\''
                | '`'
                | '*'
                | '_'
                | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | '='
                | '<'
                | '>'
                | '~'
                | '“'
                | '”'
                | '‘'
                | '’'
                | '|'
        )
    });
    word.trim_end_matches('.')
}

/// `YYYY-MM-DD` at the start of `text`.
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
        && !b.get(10).is_some_and(u8::is_ascii_digit)
}

/// The number `text` starts with (thousands separators `1,234`, a decimal point or a decimal
/// comma `0,5`, an exponent), and what follows it.
fn leading_number(text: &str) -> (Option<Number>, &str) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == 0 {
        return (None, text);
    }
    let mut digits = text[..i].to_owned();
    let mut decimals = 0;
    // Thousands groups: `,ddd` not followed by another digit.
    while b.get(i) == Some(&b',')
        && b.len() >= i + 4
        && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
        && !b.get(i + 4).is_some_and(u8::is_ascii_digit)
    {
        digits.push_str(&text[i + 1..i + 4]);
        i += 4;
    }
    if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        let start = i + 1;
        let mut j = start;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        digits.push('.');
        digits.push_str(&text[start..j]);
        decimals = (j - start) as u32;
        i = j;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start && !b.get(j).is_some_and(u8::is_ascii_alphabetic) {
            digits.push_str(&text[i..j]);
            i = j;
            decimals = 0;
        }
    }
    let Ok(value) = digits.parse::<f64>() else { return (None, &text[i..]) };
    let number = Number { text: text[..i].to_owned(), value, decimals };
    (value.is_finite().then_some(number), &text[i..])
}

/// Whether a quoted value is a quantity: a number and one word of letters after it (`212 lbs`,
/// `-2.5 celsius`), whose number the answer's numbers are checked with.
fn quantity(quoted: &str) -> bool {
    let mut words = quoted.split_whitespace();
    let (Some(number), Some(unit), None) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    number.replace(',', "").parse::<f64>().is_ok_and(f64::is_finite)
        && unit.chars().count() <= 16
        && unit.chars().all(char::is_alphabetic)
}

/// The values an answer quotes: between double quotes (straight or curly) or backticks, on one
/// line, at most 120 characters.
fn quoted_values(answer: &str) -> Vec<String> {
    let mut values = Vec::new();
    for line in answer.lines() {
        for (open, close) in [('"', '"'), ('“', '”'), ('`', '`')] {
            let mut rest = line;
            while let Some(start) = rest.find(open) {
                let after = &rest[start + open.len_utf8()..];
                let Some(end) = after.find(close) else { break };
                let value = after[..end].trim();
                if !value.is_empty() && value.chars().count() <= 120 {
                    values.push(value.to_owned());
                }
                rest = &after[end + close.len_utf8()..];
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_inside_code_examples() {
        let body = "Run it.\n\n```json\n{\"args\": [\"*.csv\"]}\n```\n\n- Add a folder: \
                    `[\"*.md\", \"docs\"]`. Units: km, mi.";
        assert!(in_code_example("docs", &[body]));
        assert!(in_code_example("*.csv", &[body]));
        assert!(in_code_example("*.md", &[body]));
        // Prose is no example, a part of a word is no value, nothing is in no document.
        assert!(!in_code_example("km", &[body]));
        assert!(!in_code_example("doc", &[body]));
        assert!(!in_code_example("", &[body]));
        assert!(!in_code_example("docs", &[]));
        assert!(!in_code_example("a", &["`unclosed a"]));
    }

    #[test]
    fn a_sum_is_not_rounded_to_a_whole_number() {
        let summary = "rows: 20\nunits mean: 10.6\nunits sum: 212\namount mean: 85.2735\n\
                       amount sum: 1705.47\nregion values: East (5), North (15)";
        let mut sources = Sources { results: vec![summary], ..Sources::default() };
        // 85.2735 + 15 = 100.27: no ground for an invented average of 100.
        assert_eq!(ungrounded("The average is 100 units.", &sources), ["100"]);
        assert!(ungrounded("The average is 10.6 units, about 11.", &sources).is_empty());
        assert!(ungrounded("212 + 20 = 232 units", &sources).is_empty());
        assert!(ungrounded("1705.47 + 10.6 = 1716.07", &sources).is_empty());
        sources.lenient_sums = true;
        assert!(ungrounded("The average is 100 units.", &sources).is_empty());
        // A result repeated (the same run twice) does not make its figures count twice.
        let units = "units min: 2\nunits max: 30\nunits mean: 10.6\nunits sum: 212\nrows: 20\n6";
        let mut sources = Sources { results: vec![units, units], ..Sources::default() };
        assert_eq!(ungrounded("212 pounds are 106 kilograms.", &sources), ["106"]);
        assert!(ungrounded("30 + 20 = 50", &sources).is_empty());
        sources.lenient_sums = true;
        assert!(ungrounded("212 pounds are 106 kilograms.", &sources).is_empty());
    }

    #[test]
    fn arguments_the_task_does_not_state() {
        let unstated = |task: &str, results: &[&str], args: &[&str]| {
            let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
            let sources =
                Sources { user: vec![task], results: results.to_vec(), ..Sources::default() };
            unstated_arguments(&args, &sources, "scripts/convert.py VALUE FROM TO [--precise]")
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert!(unstated("Convert 10 miles to km.", &[], &["10", "mi", "km"]).is_empty());
        assert!(
            unstated("Convert 100 degrees Celsius to Fahrenheit", &[], &["100", "C", "F"])
                .is_empty()
        );
        assert!(unstated("Count the text files", &[], &["*.txt", "--precise"]).is_empty());
        assert_eq!(unstated("Convert 5 to the other unit.", &[], &["5", "km", "mi"]), ["km", "mi"]);
        assert_eq!(
            unstated(
                "What is the total of the column in sales.csv?",
                &[],
                &["sales.csv", "amount"]
            ),
            ["amount"]
        );
        // A result states it: the column was read from the file first.
        assert!(
            unstated(
                "Total the money column of sales.csv",
                &["columns: units, amount"],
                &["sales.csv", "amount"]
            )
            .is_empty()
        );
        // A number no source gives, and one a result gives.
        assert_eq!(
            unstated("Convert the total to euros", &[], &["1705.47", "usd", "eur"]),
            ["1705.47", "usd"]
        );
        assert_eq!(
            unstated(
                "Convert the total to euros",
                &["total 1705.47 usd"],
                &["1705.47", "usd", "eur"]
            ),
            Vec::<String>::new()
        );
        // The usage's own words, and an empty argument.
        assert!(unstated("Convert 5 km", &[], &["5", "km", "value", ""]).is_empty());
        // A short token inside a longer word is not stated.
        assert_eq!(unstated("Open the bookmark file", &[], &["km"]), ["km"]);
    }

    #[test]
    fn a_next_step_is_no_report() {
        assert!(reads_as_plan(
            "The run script failed three times in a row, so I need to select the 'csv' skill."
        ));
        assert!(reads_as_plan("Let me try the other script."));
        assert!(reads_as_plan("Next, I will run count.py"));
        assert!(!reads_as_plan(
            "Done: counted notes.txt (12 lines). Blocked: the script failed. Next steps: I will \
             need the file named."
        ));
        assert!(!reads_as_plan("The file has 12 lines; I could not read the second one."));
        assert!(!reads_as_plan(""));
    }

    #[test]
    fn a_gist_is_the_first_lines_of_the_output_without_the_framing() {
        assert_eq!(
            output_gist("exit code 0\nstdout:\n5 mi = 8.04672 km\nquantity: length"),
            "5 mi = 8.04672 km · quantity: length"
        );
        assert_eq!(
            output_gist("exit code 2\nstderr:\n\nconvert: unknown unit"),
            "convert: unknown unit"
        );
        assert_eq!(output_gist("exit code 0"), "(no output)");
        assert_eq!(output_gist(""), "(no output)");
        // A line that only looks like framing stays.
        assert_eq!(output_gist("exit code zero"), "exit code zero");
        let long = format!("exit code 0\nstdout:\n{}\nnever shown", "é".repeat(300));
        let gist = output_gist(&long);
        assert_eq!(gist.chars().count(), RESULT_CHARS);
        assert!(gist.ends_with('…') && !gist.contains("never"), "{gist}");
    }

    fn check(answer: &str, user: &[&str], results: &[&str]) -> Vec<String> {
        ungrounded(
            answer,
            &Sources {
                user: user.to_vec(),
                documents: Vec::new(),
                results: results.to_vec(),
                ..Sources::default()
            },
        )
    }

    #[test]
    fn an_invented_number_is_ungrounded() {
        let task = "How many lines does README.md have?";
        assert_eq!(check("The file README.md has 10 lines.", &[task], &[]), vec!["10"]);
        assert_eq!(
            check("README.md has 277 lines.", &[task], &["277 README.md"]),
            Vec::<String>::new()
        );
        // The honest answer has nothing to ground.
        assert!(check("I cannot tell: no installed skill counts lines.", &[task], &[]).is_empty());
    }

    #[test]
    fn numbers_with_units_signs_and_separators() {
        let results = ["1.5 km = 0.932057 mi", "total: 1234567 bytes", "-5 C", "50"];
        assert!(check("1.5km is 0.932057mi.", &[], &results).is_empty());
        assert!(check("It is 1,234,567 bytes", &[], &results).is_empty());
        assert!(check("The low was −5°C, or -5 °C.", &[], &results).is_empty());
        assert!(check("That is 50%.", &[], &results).is_empty());
        assert_eq!(check("It is 1,234,600 bytes", &[], &results), vec!["1,234,600"]);
        assert_eq!(check("Costs $12.50", &[], &results), vec!["12.50"]);
    }

    #[test]
    fn rounding_and_decimal_commas() {
        let results = ["0.932057", "277.4"];
        assert!(check("about 0.93 miles", &[], &results).is_empty());
        assert!(check("about 0,93 miles", &[], &results).is_empty());
        assert!(check("277 lines", &[], &results).is_empty());
        assert_eq!(check("0.94 miles", &[], &results), vec!["0.94"]);
        // An integer does not round another integer.
        assert_eq!(check("278 lines", &[], &["277"]), vec!["278"]);
    }

    #[test]
    fn sums_differences_and_counts() {
        let results = ["a.txt: 10", "b.txt: 20", "c.txt: 35"];
        assert!(check("Total: 65 lines", &[], &results).is_empty());
        assert!(check("b has 10 more than a", &[], &results).is_empty());
        assert!(check("a and c: 45", &[], &results).is_empty());
        assert_eq!(check("Total: 66 lines", &[], &results), vec!["66"]);
        // Three listed files, counted by the model.
        assert!(check("3 files match", &[], &["a.csv\nb.csv\nc.csv\n"]).is_empty());
        assert!(check("4 items", &[], &[r#"{"items": [1, 2, 7, 9]}"#]).is_empty());
    }

    #[test]
    fn documents_ground_their_own_figures_only() {
        let body = "Limits: 500 lines, 1024 characters. Example: `count.py 3 4`";
        let sources = Sources {
            user: vec!["How many lines?"],
            documents: vec![body],
            results: Vec::new(),
            ..Sources::default()
        };
        assert!(ungrounded("At most 500 lines.", &sources).is_empty());
        // Neither a sum of a document's figures nor a count of its lines.
        assert_eq!(ungrounded("7 lines, 1 line", &sources), vec!["7", "1"]);
    }

    #[test]
    fn with_many_numbers_only_operands_the_answer_states_combine() {
        let summary: String = (1..=40).map(|n| format!("column c{n} sum: {}\n", n * 7)).collect();
        let results = [summary.as_str()];
        // 212 - 106 is no sum of two figures the answer gives: invented.
        assert_eq!(
            check("212 units, that is 106 kilograms", &[], &["units sum: 212"]),
            vec!["106"]
        );
        assert_eq!(check("7 and 14 make 300", &[], &results), vec!["300"]);
        assert!(check("7 and 14 make 21", &[], &results).is_empty());
    }

    #[test]
    fn dates_and_times() {
        let results = ["2024-03-01 is a Friday", "starts 10:30"];
        assert!(check("It is 2024-03-01.", &[], &results).is_empty());
        assert_eq!(check("It is 2024-03-02.", &[], &results), vec!["2024-03-02"]);
        assert!(check("At 10:30.", &[], &["starts 10:30"]).is_empty());
        assert_eq!(check("At 12:30.", &[], &["starts 10:30"]), vec!["12"]);
    }

    #[test]
    fn names_list_markers_and_the_task_are_not_values() {
        let task = "Convert 5 km to miles with convert.py";
        assert!(
            check("1. Ran scripts/convert.py\n2. Read v2 of file1.csv", &[task], &[]).is_empty()
        );
        assert!(check("5 km", &[task], &[]).is_empty());
        assert!(check("sha256 of utf-8 text", &[task], &[]).is_empty());
    }

    #[test]
    fn strict_checks_file_names_and_codes() {
        let finder = "# File finder\nFind files: writes found.txt.\n```text\nfile: data/invoice-2024.csv\n```";
        let sources = |strict: bool| Sources {
            user: vec!["Which Markdown files are in the workspace?"],
            documents: vec![finder],
            results: vec!["pattern: *.md\nfile: TASK.md\nmatches: 1 of 8.04672"],
            names: vec!["scripts/find_files.py", "out.json"],
            strict,
            ..Sources::default()
        };
        let answer = "TASK.md and ./task.md, docs/report.md, data/invoice-2024.csv (e.g. via \
                      scripts/find_files.py into out.json and found.txt; v1.2, 8.04672 km).";
        assert_eq!(ungrounded(answer, &sources(true)), ["docs/report.md", "data/invoice-2024.csv"]);
        assert!(ungrounded(answer, &sources(false)).is_empty());
        // A checksum nothing printed is a guess; one a result shows is not.
        let hash = "e3b0c44298fc1c149afbf41c04f9e051b9016974817d8878989d34f07d93da29";
        let answer = format!("The SHA-256 is {hash}.");
        assert_eq!(ungrounded(&answer, &sources(true)), [hash]);
        let mut shown = sources(true);
        let printed = format!("sha256: {hash}");
        shown.results.push(&printed);
        assert!(ungrounded(&answer, &shown).is_empty());
        // Digits beyond a figure's are a code too, and from format 16 also among letters (read
        // as a number, `2292e828…` overflows).
        let long = format!("It is 229{}.", "4".repeat(600));
        assert_eq!(ungrounded(&long, &sources(true)), [&long[6..long.len() - 1]]);
        let exponent = format!("2292e{}", "82".repeat(120));
        assert!(ungrounded(&exponent, &sources(true)).is_empty());
        let from_16 = Sources { long_codes: true, ..sources(true) };
        assert_eq!(ungrounded(&exponent, &from_16), [exponent.as_str()]);
        assert!(ungrounded("utf-8, sha256, Qwen2.5 and x86_64", &from_16).is_empty());
        // Words with a digit or two are no codes.
        assert!(ungrounded("utf-8, sha256, Qwen2.5 and x86_64", &sources(true)).is_empty());
    }

    #[test]
    fn questions_for_a_quantity() {
        assert!(asks_quantity("How many rows does sales.csv have?"));
        assert!(asks_quantity("What is the total of the amount column?"));
        assert!(asks_quantity("Count the words of TASK.md"));
        assert!(!asks_quantity("Which Markdown files are in the workspace?"));
        assert!(!asks_quantity("Summarise the totals table")); // "totals" is no quantity asked
    }

    #[test]
    fn what_a_task_counts() {
        assert_eq!(counted_things("How many words does TASK.md have?"), ["word"]);
        assert_eq!(
            counted_things("how many distinct regions are in sales.csv"),
            ["distinct", "region"]
        );
        assert_eq!(counted_things("How many entries and matches?"), ["entry", "match"]);
        assert_eq!(counted_things("How many lines has README.md"), ["line"]);
        // A task with a figure (a conversion) or no "how many": nothing.
        assert!(counted_things("How many km are 5 miles?").is_empty());
        assert!(counted_things("What is the total of the amount column?").is_empty());
        assert_eq!(singular("boxes"), "box");
        assert_eq!(singular("class"), "class");
        assert_eq!(singular("bus"), "bus");
    }

    #[test]
    fn a_count_needs_a_result_that_names_the_thing_counted() {
        let search = "pattern: TASK.md\nfile: TASK.md\nmatches: 1 (files searched: 2)";
        let sources = |results: Vec<&'static str>| Sources {
            user: vec!["How many words does TASK.md have?"],
            results,
            counted: counted_things("How many words does TASK.md have?"),
            ..Sources::default()
        };
        // `matches: 1` is no count of words.
        assert_eq!(
            ungrounded("The file 'TASK.md' has 1 word.", &sources(vec![search])),
            ["1 word"]
        );
        assert_eq!(ungrounded("TASK.md has 1 Words", &sources(vec![search])), ["1 Words"]);
        // A result that counts words grounds it; so does a figure said of something else.
        assert!(ungrounded("TASK.md has 12 words.", &sources(vec!["words: 12"])).is_empty());
        assert!(ungrounded("There is 1 match for TASK.md.", &sources(vec![search])).is_empty());
        // A figure under a label that says nothing of what it counts may be the count.
        assert!(ungrounded("There are 3 words.", &sources(vec!["count: 3"])).is_empty());
        assert!(ungrounded("There are 3 words.", &sources(vec!["Total count: 3"])).is_empty());
        // A bare figure (as `wc -w` prints it) may be the count: not refused.
        assert!(ungrounded("TASK.md has 12 words.", &sources(vec!["12 TASK.md"])).is_empty());
        assert!(ungrounded("It has 1 word", &sources(vec![search, "1 TASK.md"])).is_empty());
        // Without the rule (before format 10), the number alone is looked for.
        let old = Sources { counted: Vec::new(), ..sources(vec![search]) };
        assert!(ungrounded("The file 'TASK.md' has 1 word.", &old).is_empty());
        // A skill's example figure is no count of words (format 24); a result's figure, or a
        // document's line that names the thing, may be.
        let skill = "Run it.\n\n`matches: 0` means nothing was found.";
        let with = |counts_from_results: bool, documents: Vec<&'static str>| Sources {
            documents,
            counts_from_results,
            ..sources(vec![search])
        };
        assert_eq!(ungrounded("TASK.md has 0 words.", &with(true, vec![skill])), ["0 words"]);
        assert!(ungrounded("TASK.md has 0 words.", &with(false, vec![skill])).is_empty());
        assert!(ungrounded("TASK.md has 2 words.", &with(true, vec![skill])).is_empty());
        let reference = "A file of 0 words is empty.";
        assert!(ungrounded("TASK.md has 0 words.", &with(true, vec![reference])).is_empty());
    }

    #[test]
    fn the_call_a_refusal_shows_is_read_whole() {
        let call =
            shown_call("units", "scripts/convert.py", &["1".into(), "GiB".into(), "mb".into()]);
        let note = format!(
            "`gb` is not how the task writes it: the task writes `GiB`. Make this call: {call}"
        );
        assert!(shows_call(&note));
        assert_eq!(call_shown_in(&note), Some(call.as_str()));
        // Text after the call, braces inside its strings, other letters' case.
        let braced = shown_call("s", "scripts/x.py", &["{a}".into(), "é}".into()]);
        let note = format!("FOUND `x`: MAKE THIS CALL: {braced} (then answer)");
        assert_eq!(call_shown_in(&note), Some(braced.as_str()));
        assert_eq!(call_shown_in("make this call: {\"skill\": \"s\""), None);
        assert_eq!(call_shown_in("make this call: [1]"), None);
        assert_eq!(call_shown_in("no call here"), None);
        assert_eq!(call_shown_in(""), None);
    }

    #[test]
    fn the_units_a_task_converts_into_must_be_named_by_the_answer() {
        let task = "Total the units column of sales.csv and convert that many pounds to kilograms.";
        assert_eq!(conversion_targets(task), ["kilograms"]);
        let chain =
            "Find the CSV file, total its units column, and convert that many pounds to kilograms.";
        assert_eq!(conversion_targets(chain), ["kilograms"]);
        assert_eq!(conversion_targets("Convert 72 F to C."), ["c"]);
        assert_eq!(
            conversion_targets("Please convert the total into the metric units"),
            ["metric"]
        );
        // One target a sentence: a batch's later items are the completeness check's.
        assert_eq!(conversion_targets("Convert 5 mi to km, 10 km to mi"), ["km"]);
        assert_eq!(
            conversion_targets("Convert 1 GiB to MB. Then convert 3 gal to l?"),
            ["mb", "l"]
        );
        // No word of converting, or nothing after "to": no target.
        assert!(conversion_targets("How many MB are 1 GiB? Add it to the total.").is_empty());
        assert!(conversion_targets("Convert it to").is_empty());
        assert!(conversion_targets("Convert to 5").is_empty());
        assert!(conversion_targets("").is_empty());
        // A word "to" before the word of converting is not its target, nor one after the name
        // of a converter.
        assert_eq!(conversion_targets("Go to the data and convert 5 lb to kg"), ["kg"]);
        assert!(conversion_targets("Use the unit converter to tell me 5 mi in km").is_empty());
        assert_eq!(conversion_targets("A conversion of 5 mi into km"), ["km"]);
        assert_eq!(conversion_targets("Convert 1.5 lb from data.csv to kg."), ["kg"]);

        let targets = conversion_targets(task);
        assert_eq!(unnamed_targets("The units total 212.", &targets), ["kilograms"]);
        for named in [
            "212 lb = 96.16158244 kg.",
            "212 pounds are 96.16 kilograms",
            "96.16 Kilogram",
            "96.16 kilos",
        ] {
            assert!(unnamed_targets(named, &targets).is_empty(), "{named}");
        }
        let targets = conversion_targets("Convert 5 miles to km");
        assert!(unnamed_targets("5 miles are 8.04672 kilometres.", &targets).is_empty());
        assert!(unnamed_targets("8.04672km", &targets).is_empty());
        assert_eq!(unnamed_targets("5 miles is 8.04672.", &targets), ["km"]);
        assert!(unnamed_targets("22.2°C", &conversion_targets("Convert 72 F to C")).is_empty());
        assert!(unnamed_targets("anything", &[]).is_empty());
        let note = target_unit_note(&["kilograms".to_owned()]);
        assert!(note.starts_with("answer not accepted yet") && note.contains("`kilograms`"));
    }

    #[test]
    fn a_statistic_of_a_column_is_grounded_by_results_or_a_document_line_naming_it() {
        let task = "Find the CSV file in the workspace and tell me the total of its amount column.";
        assert_eq!(measured_things(task), ["amount"]);
        assert_eq!(
            measured_things("Total the units column of sales.csv, then convert it."),
            ["unit"]
        );
        assert_eq!(measured_things("What is the average of the price and cost columns?"), ["cost"]);
        // A task with a figure, or no statistic, measures nothing.
        assert!(measured_things("Total the first 5 rows of the amount column").is_empty());
        assert!(measured_things("List the amount column of sales.csv").is_empty());
        assert!(measured_things("").is_empty());
        let finder = "At most 50 matches are shown (`--max N`, up to 1000).";
        let found = "file: sales.csv\nmatches: 1 (files searched: 2)";
        let sources =
            |measured: &[&str], documents: Vec<&'static str>, results: Vec<&'static str>| Sources {
                user: vec![task],
                documents,
                results,
                strict: true,
                measured: measured.iter().map(|thing| thing.to_string()).collect(),
                ..Default::default()
            };
        let answer = "The total of the 'amount' column in `sales.csv` is 1000.";
        assert_eq!(ungrounded(answer, &sources(&["amount"], vec![finder], vec![found])), ["1000"]);
        // Before format 26 (nothing measured) the document grounded it.
        assert_eq!(
            ungrounded(answer, &sources(&[], vec![finder], vec![found])),
            Vec::<String>::new()
        );
        // A result's figure, the task's own, or a document's line naming the column grounds it.
        let total = "file: sales.csv\ncolumn amount: numeric\namount sum: 1000";
        assert!(ungrounded(answer, &sources(&["amount"], vec![finder], vec![total])).is_empty());
        let reference = "The amount column of the demo file totals 1000.";
        assert!(ungrounded(answer, &sources(&["amount"], vec![reference], vec![found])).is_empty());
        // Arithmetic over results still holds.
        let two = "amount sum: 600\nunits sum: 400";
        assert!(
            ungrounded("600 + 400 = 1000", &sources(&["amount"], vec![], vec![two])).is_empty()
        );
    }

    #[test]
    fn the_tasks_word_for_an_argument_an_error_names() {
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let instructions = "Run it.\n\n```json\n{\"args\": [\"<value>\"]}\n```\n\nUnits \
                            (symbols or full names such as `miles`, `pounds`, `celsius`):\n\
                            - mass: kg, lb";
        let unit = "exit code 2\nstderr:\nconvert: unknown unit: 'units'; known units: mass: kg, lb \
                    (usage: convert.py VALUE FROM TO)";
        let task = "Sum the units column of sales.csv, then convert that many pounds to kilograms.";
        let word = |named: &str, call: &[&str], task: &str, error: &str| {
            task_word_for(named, &args(call), task, instructions, error)
        };
        assert_eq!(word("units", &["212", "units", "kg"], task, unit), Some("pounds".into()));
        // Already written (or abbreviated) by the call, or the word the error names.
        assert_eq!(word("units", &["212", "pounds", "units"], "212 pounds to units", unit), None);
        assert_eq!(word("units", &["212", "units", "kg"], "the units, in kilograms", unit), None);
        // Two candidates: no choice is made.
        assert_eq!(word("units", &["5", "units", "kg"], "5 miles or pounds to kg", unit), None);
        // A word of the error that is no list's item, or one before the value it names, is no
        // value; nor is a code span inside a fenced block.
        assert_eq!(word("units", &["1", "units", "kg"], "convert the value to kg", unit), None);
        assert_eq!(word("units", &["1", "units", "kg"], "args of 1 unknown to kg", unit), None);
        // A value the error lists.
        let column = "exit code 2\nstderr:\nunknown column: revenue (columns in sales.csv: date, \
                      region, amount)";
        let task = "What is the total amount of sales.csv?";
        assert_eq!(word("revenue", &["sales.csv", "revenue"], task, column), Some("amount".into()));
        assert_eq!(task_word_for("x", &[], "", "", ""), None);
        assert_eq!(task_word_for("x", &[], "a `b", "`", "é`"), None);
    }

    #[test]
    fn a_choice_the_task_did_not_make() {
        let summary = "file: sales.csv\nrows: 20\ncolumn units: numeric, 20 values, 0 empty\n\
                       units min: 2\nunits sum: 212\ncolumn unit_price: numeric, 20 values\n\
                       unit_price sum: 229.44\ncolumn amount: numeric, 20 values\n\
                       amount mean: 85.2735\namount sum: 1705.47";
        let choice = |task: &'static str, answer: &str| {
            let sources =
                Sources { user: vec![task], results: vec![summary], ..Sources::default() };
            unchosen_label(answer, &sources).map(|choice| (choice.chosen, choice.labels))
        };
        let sums = ["units sum", "unit_price sum", "amount sum"].map(String::from).to_vec();
        let task = "What is the total of the column in sales.csv?";
        assert_eq!(choice(task, "212"), Some(("units sum".to_owned(), sums.clone())));
        assert_eq!(choice(task, "The total is 1,705.47."), Some(("amount sum".to_owned(), sums)));
        // The task names the column (or the measure, or its word as the task writes it).
        assert_eq!(choice("What is the total of the amount column?", "1705.47"), None);
        assert_eq!(choice("How many units were sold?", "212 units"), None);
        assert_eq!(choice("What is the total unit price?", "229.44"), None);
        assert_eq!(choice("What is the sum of the column?", "212"), None);
        // Every one of them, none, or a figure no such line gives.
        assert_eq!(choice(task, "units 212, unit_price 229.44, amount 1705.47"), None);
        assert_eq!(choice(task, "Which column do you mean?"), None);
        assert_eq!(choice("How many rows does sales.csv have?", "20 rows"), None);
        assert_eq!(choice(task, "7"), None);
        // One label word, or a label that is no word: not a kind of lines.
        let flat = Sources {
            user: vec![task],
            results: vec!["rows: 20\ncolumns: 6\nsales.csv total: 5\nother.csv total: 6"],
            ..Sources::default()
        };
        assert_eq!(unchosen_label("20", &flat), None);
        assert_eq!(unchosen_label("5", &flat), None);
        // The note asks the question, with the options' noun when lines name it.
        let sources = Sources { user: vec![task], results: vec![summary], ..Sources::default() };
        let found = unchosen_label("212", &sources).unwrap();
        assert_eq!(found.noun.as_deref(), Some("column"));
        let note = choice_note(&found);
        assert!(
            note.contains(
                "gives `units sum`, and the results give `unit_price sum`, `amount sum` too"
            ),
            "{note}"
        );
        assert!(
            note.contains("(ask_user): \"Which column do you mean: units, unit_price or amount?\""),
            "{note}"
        );
        let bare =
            Sources { user: vec![task], results: vec!["a sum: 1\nb sum: 2"], ..Sources::default() };
        let found = unchosen_label("2", &bare).unwrap();
        assert_eq!((found.noun, found.options), (None, vec!["a".to_owned(), "b".to_owned()]));
        assert!(
            choice_note(&unchosen_label("2", &bare).unwrap())
                .contains("\"Which one do you mean: a or b?\"")
        );
    }

    #[test]
    fn one_result_restated_where_the_task_combines_two() {
        assert!(asks_to_combine("Add the total of amount to the total of units: the sum?"));
        assert!(asks_to_combine("What is 5 km plus 3 miles?"));
        assert!(!asks_to_combine("What is the sum of the amount column?"));
        assert!(!asks_to_combine("Which additional files are there?"));
        let both = "How many ERROR and WARN lines does app.log have in total?";
        assert!(totals_two_things(both));
        assert!(totals_two_things("What is the number of CSV and Markdown files altogether?"));
        assert!(!totals_two_things("How many units were sold in total according to sales.csv?"));
        assert!(!totals_two_things("Find the CSV file and tell me how many rows it has in total."));
        assert!(!totals_two_things("How many ERROR and WARN lines does app.log have?"));
        assert!(!totals_two_things("How many lines are in total. Then add and remove one."));
        assert!(combines(both, TOTAL_OF_TWO_SINCE_FORMAT));
        assert!(!combines(both, TOTAL_OF_TWO_SINCE_FORMAT - 1), "older records replay as written");
        assert!(adds(both));
        let counts = "ERROR: 3\nWARN: 2\nINFO: 3";
        let sources = Sources { user: vec![both], results: vec![counts], ..Sources::default() };
        assert_eq!(
            restates_results("There are 3 ERROR and 2 WARN lines.", &sources),
            Some(vec!["3".to_owned(), "2".to_owned()])
        );
        assert_eq!(
            worked_combination("3 ERROR and 2 WARN", &sources, both, TOTAL_OF_TWO_SINCE_FORMAT)
                .as_deref(),
            Some("The results your answer names: 3 and 2; 3 + 2 = 5.")
        );
        assert!(
            combine_again_note(&["3".to_owned(), "2".to_owned()], both)
                .contains("their sum (3 + 2)")
        );
        assert_eq!(
            counted_lines(both, &[counts]),
            Some(vec!["ERROR: 3".to_owned(), "WARN: 2".to_owned()])
        );
        assert_eq!(counted_lines(both, &["ERROR: 3"]), None, "no WARN line");
        assert_eq!(counted_lines("How many ERROR lines does app.log have?", &[counts]), None);
        assert_eq!(
            counted_refusal_note(&["8".to_owned()], &counted_lines(both, &[counts]).unwrap(), both),
            "answer not accepted: this value (8) appears neither in the task nor in any result of \
             this run. The results give `ERROR: 3` and `WARN: 2`: work out their sum (3 + 2) and \
             answer with that result and the values it comes from."
        );
        let output = "amount sum: 1705.47\nrows: 20";
        let sources = Sources {
            user: vec!["Add the total of amount to 20 units"],
            results: vec![output],
            ..Sources::default()
        };
        assert_eq!(restates_one_result("The total is 1705.47.", &sources), Some("1705.47".into()));
        // Worked out, two figures, none, or one the task gives: not a restatement.
        assert_eq!(restates_one_result("The sum is 1725.47.", &sources), None);
        assert_eq!(restates_one_result("1705.47 + 20 = 1725.47", &sources), None);
        assert_eq!(restates_one_result("I cannot tell.", &sources), None);
        assert_eq!(restates_one_result("There are 20 rows.", &sources), None);
        let both = Sources {
            user: vec!["Add the total of amount to the total of units"],
            results: vec!["amount sum: 1705.47", "units sum: 212"],
            ..Sources::default()
        };
        let restated = "The total of amount is 1705.47 and the total of units is 212.";
        assert_eq!(restates_results(restated, &both), Some(vec!["1705.47".into(), "212".into()]));
        assert_eq!(restates_results("1705.47 + 212 = 1917.47", &both), None);
        let sums = Sources {
            user: vec!["Count, add, read the notes"],
            results: vec!["2", "The sum of 2 and 3 is 5."],
            ..Sources::default()
        };
        assert_eq!(restates_results("2 words, 2 + 3 = 5, the meeting is at noon.", &sums), None);
        assert_eq!(restates_results("2 words; 2 and 3 make 5", &sums), None);
        assert_eq!(restates_results("The total is 1705.47.", &both), None);
        assert_eq!(restates_results("I cannot tell.", &both), None);
    }

    #[test]
    fn long_values_are_cut_in_the_note() {
        assert_eq!(shortened("1234"), "1234");
        let long = "9".repeat(200);
        assert_eq!(shortened(&long), format!("{}… (200 characters)", "9".repeat(16)));
    }

    #[test]
    fn the_numbers_of_a_batch_left_unused() {
        let task = "Convert each of these: 5 miles to km; 10 km to miles; 72 F to C; 2 lb to oz.";
        let unused = |args: &[&str], answer: &str| unused_task_numbers(task, args, answer, true).1;
        assert_eq!(unused(&["5", "mi", "km"], "5 miles are 8.04672 km."), ["10", "72", "2"]);
        assert_eq!(unused(&["5", "mi", "km", "10", "km", "mi"], "8.04672; 6.2"), ["72", "2"]);
        assert_eq!(unused_task_numbers(task, &["5", "10", "2"], "", true).0, 3);
        // Stated in the answer, or no number used by any call: nothing to say.
        assert!(
            unused(&["5", "mi", "km"], "5 → 8.04672; 10, 72 and 2 were not converted").is_empty()
        );
        assert!(unused(&["sales.csv"], "done") == ["5", "10", "72", "2"]);
        assert!(
            unused_task_numbers("The 3 largest in sales.csv", &["sales.csv"], "", true)
                .1
                .is_empty()
        );
        assert!(
            unused_task_numbers("Sum of sales.csv on 2026-01-05", &["sales.csv"], "", true)
                .1
                .is_empty()
        );
    }

    #[test]
    fn a_number_the_task_writes_twice_needs_two_calls() {
        let task = "Convert: 5 miles to km; 72 F to C; 5 kg to lb.";
        let each = |args: &[&str], answer: &str| unused_task_numbers(task, args, answer, true);
        assert_eq!(
            each(&["5", "mi", "km", "72", "F", "C"], "72 F is 22.2 C."),
            (2, vec!["5 (a second time)".to_owned()])
        );
        // The answer of the first conversion states 5 once: still one short.
        assert_eq!(
            each(&["5", "mi", "km", "72", "F", "C"], "5 miles is 8.04672 km.").1,
            ["5 (a second time)"]
        );
        assert!(each(&["5", "mi", "km", "72", "F", "C", "5", "kg", "lb"], "").1.is_empty());
        assert_eq!(each(&["5", "mi", "km", "72", "F", "C", "5", "kg", "lb"], "").0, 3);
        // Format 10 counted each number once.
        assert!(
            unused_task_numbers(task, &["5", "mi", "km", "72", "F", "C"], "", false).1.is_empty()
        );
    }

    #[test]
    fn a_value_written_with_its_unit_beside_that_unit_is_found() {
        let args = |list: &[&str]| list.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
        let call = args(&["1 nmi", "nmi", "m"]);
        assert_eq!(value_with_its_unit(&call, false), Some(("1 nmi", "nmi", "1")));
        assert_eq!(
            value_with_its_unit(&args(&["-2.5 C", "C", "F"]), false),
            Some(("-2.5 C", "C", "-2.5"))
        );
        // The unit not repeated, a phrase, a name with a space: none.
        assert_eq!(value_with_its_unit(&args(&["1 nmi", "m"]), false), None);
        assert_eq!(value_with_its_unit(&args(&["1 nautical mile", "mile"]), false), None);
        assert_eq!(value_with_its_unit(&args(&["my notes", "notes"]), false), None);
        assert_eq!(value_with_its_unit(&args(&["1", "nmi", "m"]), false), None);
    }

    #[test]
    fn a_value_with_its_unit_before_two_units_is_found_from_format_30() {
        let args = |list: &[&str]| list.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
        // The local 1.5B's call: the unit spelled two ways, then the unit to convert into.
        let call = args(&["212 lbs", "pounds", "kilograms"]);
        assert_eq!(value_with_its_unit(&call, false), None, "before format 30");
        assert_eq!(value_with_its_unit(&call, true), Some(("212 lbs", "pounds", "212")));
        let sources = Sources {
            user: vec!["Convert that many pounds to kilograms."],
            unit_place: true,
            ..Default::default()
        };
        assert_eq!(fixed_arguments(&call, &sources), Some(args(&["212", "pounds", "kilograms"])));
        // A value with its unit and one place after it (a usage of VALUE-WITH-UNIT TO), a
        // number after it, a phrase, or a value with no unit: none.
        assert_eq!(value_with_its_unit(&args(&["212 lb", "kg"]), true), None);
        assert_eq!(value_with_its_unit(&args(&["212 lb", "kg", "3"]), true), None);
        assert_eq!(value_with_its_unit(&args(&["1 nautical mile", "nmi", "m"]), true), None);
        assert_eq!(value_with_its_unit(&args(&["212", "lb", "kg"]), true), None);
        assert_eq!(value_with_its_unit(&args(&["5 %", "lb", "kg"]), true), None);
    }

    #[test]
    fn an_argument_that_leaves_out_a_letter_of_the_tasks_word_is_respelled() {
        let task = ["How many MB are 1 GiB?"];
        let sources = Sources { user: task.to_vec(), ..Default::default() };
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let call = args(&["1", "GB", "MB"]);
        assert_eq!(respelled_arguments(&call, &sources), [("GB", "GiB".to_owned())]);
        assert!(respelled_arguments(&args(&["1", "GiB", "MB"]), &sources).is_empty());
        assert!(respelled_arguments(&args(&["1", "gib", "mb"]), &sources).is_empty());
        // A plural's `s`, a first letter, a word a result writes: no respelling.
        let task = ["Convert 3 lbs to kg"];
        let plural = Sources { user: task.to_vec(), ..Default::default() };
        assert!(respelled_arguments(&args(&["3", "lb", "kg"]), &plural).is_empty());
        let listed = Sources {
            user: vec!["How many MB are 1 GiB?"],
            results: vec!["known units: B, kB, MB, GB, GiB"],
            ..Default::default()
        };
        assert!(respelled_arguments(&call, &listed).is_empty());
        let column = Sources { user: vec!["Total the amount column"], ..Default::default() };
        assert_eq!(
            respelled_arguments(&args(&["sales.csv", "amont"]), &column),
            [("amont", "amount".to_owned())]
        );
        assert!(respelled_arguments(&args(&["--name", "sales"]), &column).is_empty());
        let sentence =
            Sources { user: vec!["Translate it for me into French"], ..Default::default() };
        assert!(respelled_arguments(&args(&["fr"]), &sentence).is_empty());
    }

    #[test]
    fn the_fixed_arguments_write_the_tasks_word_and_the_value_alone() {
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let sources = Sources { user: vec!["How many MB are 1 GiB?"], ..Default::default() };
        // The local 1.5B's call: the task's value with its unit, and the unit respelled.
        assert_eq!(
            fixed_arguments(&args(&["1 GiB", "GB", "MB"]), &sources),
            Some(args(&["1", "GiB", "MB"]))
        );
        assert_eq!(
            fixed_arguments(&args(&["1", "GB", "MB"]), &sources),
            Some(args(&["1", "GiB", "MB"]))
        );
        assert_eq!(
            fixed_arguments(&args(&["1 nmi", "nmi", "m"]), &sources),
            Some(args(&["1", "nmi", "m"]))
        );
        // Nothing to fix, or a respelled word inside a longer argument: none.
        assert_eq!(fixed_arguments(&args(&["1", "GiB", "MB"]), &sources), None);
        assert_eq!(fixed_arguments(&args(&["1 GB", "MB"]), &sources), None);
    }

    #[test]
    fn a_unit_with_its_first_letter_left_out_is_a_respelling_from_format_29() {
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let task =
            "Total the amount column of sales.csv, convert 1 nmi to m, 20 C to F and 1 GiB to MB.";
        let summary = "amount min: 36.75\namount sum: 1705.47";
        let mut sources =
            Sources { user: vec![task], results: vec![summary], ..Default::default() };
        let call = args(&["1", "mi", "m"]);
        assert!(respelled_arguments(&call, &sources).is_empty(), "before format 29");
        sources.first_letter_units = true;
        // `mi` abbreviates the result's `min`, but no word of the task: a respelling of `nmi`.
        assert_eq!(respelled_arguments(&call, &sources), [("mi", "nmi".to_owned())]);
        assert_eq!(fixed_arguments(&call, &sources), Some(args(&["1", "nmi", "m"])));
        // The task's own words, and `mi` where the task also writes miles: none.
        assert!(respelled_arguments(&args(&["1", "nmi", "m"]), &sources).is_empty());
        let miles = "Convert 1 nmi to m and 5 miles to km.";
        let sources = Sources { user: vec![miles], first_letter_units: true, ..Default::default() };
        assert!(respelled_arguments(&args(&["5", "mi", "km"]), &sources).is_empty());
        // A word of the sentence is no unit: `he` is no respelling of "the".
        let sentence = "Count the words in the file, and add 2 to the total.";
        let sources =
            Sources { user: vec![sentence], first_letter_units: true, ..Default::default() };
        assert!(respelled_arguments(&args(&["he"]), &sources).is_empty());
    }

    #[test]
    fn the_files_written_of_a_kind_are_found_as_written() {
        let output = "pattern: *.csv\nfile: Sales.csv\nfile: ./data/b.CSV\nfile: Sales.csv (2)\n\
                      file: notes.md, 8.04672 and e.g. x.csv1";
        assert_eq!(files_written(output, "csv"), ["Sales.csv", "data/b.CSV"]);
        assert_eq!(files_written(output, "md"), ["notes.md"]);
        assert!(files_written(output, "txt").is_empty());
    }

    #[test]
    fn the_arithmetic_is_worked_out_on_the_results_an_answer_names() {
        let summary = "units sum: 212\namount sum: 1705.47\nrows: 20";
        let task =
            "Add the total of the amount column of sales.csv to the total of its units column.";
        let sources = Sources { user: vec![task], results: vec![summary], ..Sources::default() };
        let answer = "The amount total is 1705.47 and the units total is 212: together 1917.84.";
        assert_eq!(
            worked_combination(answer, &sources, task, crate::RECORD_FORMAT).as_deref(),
            Some("The results your answer names: 1705.47 and 212; 1705.47 + 212 = 1917.47.")
        );
        // The difference of two, the larger first; whole numbers stay whole.
        let minus = "Subtract the rows from the units total.";
        let sources = Sources { user: vec![minus], results: vec![summary], ..Sources::default() };
        assert_eq!(
            worked_combination("20 from 212 is 190.", &sources, minus, crate::RECORD_FORMAT)
                .as_deref(),
            Some("The results your answer names: 20 and 212; 212 - 20 = 192.")
        );
        // Fewer than two results named, a figure the task gives, or no arithmetic asked: none.
        assert_eq!(
            worked_combination("It is 1917.84.", &sources, task, crate::RECORD_FORMAT),
            None
        );
        assert_eq!(
            worked_combination(
                "1705.47 and 212 make 1917.84",
                &sources,
                "What is the total?",
                crate::RECORD_FORMAT
            ),
            None
        );
        let gives = "Add 212 to the amount total.";
        let sources = Sources { user: vec![gives], results: vec![summary], ..Sources::default() };
        assert_eq!(
            worked_combination("212 + 1705.47 = 1917.84", &sources, gives, crate::RECORD_FORMAT),
            None
        );
        // Three results to subtract: which from which is a guess.
        let sources = Sources { user: vec![minus], results: vec![summary], ..Sources::default() };
        assert_eq!(
            worked_combination("212, 20 and 1705.47 give 3", &sources, minus, crate::RECORD_FORMAT),
            None
        );
    }

    #[test]
    fn the_task_symbol_an_example_word_spells_out() {
        let task =
            "Total the amount column of sales.csv, convert 1 nmi to m, 20 C to F and 1 GiB to MB.";
        let args = |list: &[&str]| list.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
        let call = args(&["20", "celsius", "fahrenheit"]);
        assert_eq!(task_symbol_for("celsius", &[task], &call).as_deref(), Some("C"));
        assert_eq!(task_symbol_for("fahrenheit", &[task], &call).as_deref(), Some("F"));
        assert_eq!(task_symbol_for("gibibytes", &[task], &call).as_deref(), Some("GiB"));
        // A symbol the call already writes, a lowercase letter (`m` is no symbol for `miles`),
        // a word no unit of the task abbreviates, or a value that is no word: none.
        assert_eq!(task_symbol_for("celsius", &[task], &args(&["20", "C", "celsius"])), None);
        assert_eq!(task_symbol_for("miles", &[task], &call), None);
        assert_eq!(task_symbol_for("pounds", &[task], &call), None);
        assert_eq!(task_symbol_for("*.csv", &[task], &call), None);
        assert_eq!(task_symbol_for("", &[task], &call), None);
        // Two words it could be (`kg` and `km` both abbreviate `kilograms`): a guess.
        let one = "Convert 5 kg to lb.";
        assert_eq!(task_symbol_for("kilograms", &[one], &call).as_deref(), Some("kg"));
        let both = "Convert 5 kg to lb and 3 km to mi.";
        assert_eq!(task_symbol_for("kilograms", &[both], &call), None);
    }

    #[test]
    fn the_result_lines_that_already_convert() {
        // Results as the sources hold them: a script's output without its framing.
        let summary =
            "file: sales.csv\namount min: 36.75\namount mean: 85.2735\namount sum: 1705.47";
        let nmi = "1 nmi = 1852 m\nquantity: length";
        let pounds = "212 lb = 96.16158244 kg\nquantity: mass";
        let targets = |list: &[&str]| list.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        // `m` names no word of "amount mean": the conversion's line.
        assert_eq!(target_result_lines(&targets(&["m"]), &[summary, nmi]), ["1 nmi = 1852 m"]);
        assert_eq!(
            target_result_lines(&targets(&["kilograms"]), &[summary, pounds]),
            ["212 lb = 96.16158244 kg"]
        );
        // No conversion ran: nothing to show.
        assert!(target_result_lines(&targets(&["m", "kilograms"]), &[summary]).is_empty());
        assert!(target_result_lines(&targets(&["m"]), &[]).is_empty());
        let batch = "1 nmi = 1852 m\nquantity: length\n20 C = 68 F\n1 GiB = 1073.741824 MB";
        assert_eq!(
            conversions_left_out("The total is 1705.47, and 20 C is 68 F.", &[summary, batch]),
            ["1 nmi = 1852 m", "1 GiB = 1073.741824 MB"]
        );
        assert!(conversions_left_out("1852 m, 68 F and 1073.74 MB", &[batch]).is_empty());
        assert!(conversions_left_out("anything", &[summary]).is_empty());
    }

    #[test]
    fn the_lines_a_combining_task_names() {
        let task = "Add the total of the amount column of sales.csv to the total of its units column: what is the sum?";
        let summary = "file: sales.csv\ncolumn units: numeric, 20 values\nunits mean: 10.6\n\
                       units sum: 212\namount mean: 85.2735\namount sum: 1705.47";
        let lines = lines_to_combine(task, &[summary]).unwrap();
        assert_eq!(lines, ["amount sum: 1705.47", "units sum: 212"]);
        assert_eq!(
            combine_lines_note(&lines, task),
            "answer not accepted yet: the task asks to combine values, and the results give \
             `amount sum: 1705.47` and `units sum: 212`. Work out their sum (1705.47 + 212) and \
             answer with that result and the values it comes from."
        );
        // A column the results do not give, one column, or no statistic: none.
        assert_eq!(lines_to_combine(task, &["amount sum: 1705.47"]), None);
        assert_eq!(lines_to_combine("What is the total of the amount column?", &[summary]), None);
        assert_eq!(
            lines_to_combine("Add the amount column to the units column.", &[summary]),
            None
        );
    }

    #[test]
    fn a_shown_call_is_written_as_the_model_writes_one() {
        let args = ["*.md".to_owned(), "say \"hi\"".to_owned()];
        assert_eq!(
            shown_call("file-finder", "scripts/find_files.py", &args),
            r#"{"skill": "file-finder", "script": "scripts/find_files.py", "args": ["*.md", "say \"hi\""]}"#
        );
        assert_eq!(shown_call("s", "x.py", &[]), r#"{"skill": "s", "script": "x.py", "args": []}"#);
    }

    #[test]
    fn the_argument_an_error_names_first() {
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let unit = "exit code 2\nstderr:\nconvert: unknown unit: 'units'; known units: mass: g, \
                    kg, lb";
        assert_eq!(argument_named_by_error(&args(&["212", "units", "kg"]), unit), Some("units"));
        let folder = "exit code 2\nstderr:\nfind_files: no such folder in the workspace: docs \
                      (usage: find_files.py PATTERN [FOLDER])";
        assert_eq!(argument_named_by_error(&args(&["*.md", "docs"]), folder), Some("docs"));
        assert_eq!(argument_named_by_error(&args(&["3", "x"]), "stderr:\nfailed on 3 x"), None);
        assert_eq!(argument_named_by_error(&args(&["a.csv"]), "stderr:\nno a.csvx here"), None);
    }

    #[test]
    fn the_kinds_of_file_a_task_names() {
        let kinds = |task: &str| file_kind_patterns(task);
        assert_eq!(
            kinds("Which Markdown files are in the workspace?"),
            [("Markdown".to_owned(), "*.md".to_owned())]
        );
        assert_eq!(kinds("List the CSV files and the Python scripts.").len(), 2);
        assert!(kinds("How many words does the file have?").is_empty());
        assert!(kinds("Count the words in notes.md").is_empty());
        assert!(names_file_kind("*.csv") && names_file_kind("data/invoice-2024.csv"));
        assert!(!names_file_kind("docs") && !names_file_kind("8.04672") && !names_file_kind("."));
    }

    #[test]
    fn the_second_restated_result_is_named_with_the_first() {
        let note =
            combine_again_note(&["1705.47".to_owned(), "212".to_owned()], "Add A to B: the sum?");
        assert!(note.contains("1705.47 and 212 are results"), "{note}");
        assert!(note.contains("their sum (1705.47 + 212)"), "{note}");
        let note = combine_again_note(&["9".to_owned(), "4".to_owned()], "Subtract B from A.");
        assert!(note.contains("the difference the task asks for"), "{note}");
    }

    #[test]
    fn figures_of_a_result_stated_or_not() {
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let output = "5 mi = 8.04672 km\nquantity: length";
        assert!(states_figures("5 miles are 8.05 km", output, &args(&["5", "mi", "km"])));
        assert!(!states_figures(
            "5 miles, and 10 km are 6.2 mi",
            output,
            &args(&["5", "mi", "km"])
        ));
        assert!(states_figures("done", "quantity: length", &args(&["5"])));
    }

    #[test]
    fn only_a_usage_lines_plain_words_are_literals() {
        let usage = r#"{"skill": "file-finder", "script": "scripts/find_files.py", "args": ["*.csv", "--name", "report", "12"]}"#;
        assert_eq!(usage_literals(usage), "skill file-finder script args report");
        assert_eq!(usage_literals("scripts/convert.py VALUE FROM TO [--precise]"), "VALUE FROM TO");
    }

    #[test]
    fn values_inside_code_blocks_are_checked() {
        let answer = "Output:\n```\nlines: 12\n```";
        assert_eq!(check(answer, &[], &["lines: 11"]), vec!["12"]);
        assert!(check(answer, &[], &["lines: 12"]).is_empty());
    }

    #[test]
    fn quoted_values_must_come_from_the_run() {
        let results = ["skills: csv-summary, unit-convert"];
        assert!(check("Use `csv-summary`.", &[], &results).is_empty());
        assert!(check("The skill \"Unit-Convert\" fits", &[], &results).is_empty());
        assert_eq!(check("Use \"csv-wizard\".", &[], &results), vec!["\"csv-wizard\""]);
    }

    #[test]
    fn the_columns_a_task_names_before_column_or_in_a_list() {
        let task = "For sales.csv, give the total of the units, unit_price and amount columns and \
                    the number of rows.";
        assert_eq!(named_columns(task), ["amount", "unit_price", "units"]);
        assert_eq!(
            named_columns("What is the total of the amount column in sales.csv?"),
            ["amount"]
        );
        assert_eq!(named_columns("The mean of the price, tax columns"), ["tax", "price"]);
        // No statistic, or a figure in the task: none.
        assert!(named_columns("List the units, amount columns").is_empty());
        assert!(named_columns("Convert the total of 5 amount columns").is_empty());
    }

    #[test]
    fn a_named_column_no_result_gives_is_missing_from_format_37() {
        let task = "For sales.csv, give the total of the units, unit_price and amount columns and \
                    the number of rows.";
        // plan-execute-think ran the summary of `units` alone, and answered with its figures.
        let units = "file: sales.csv\nrows: 20\ncolumns: 6 (date, region, product, units, \
                     unit_price, amount)\ncolumn units: numeric, 20 values, 0 empty\nunits min: \
                     2\nunits max: 30\nunits mean: 10.6\nunits sum: 212";
        let columns = named_columns(task);
        let answer = "The total number of units is 212; the average is 10.6.";
        assert!(columns_without_figure(answer, task, &columns, &[units], false).is_empty());
        let missing = columns_without_figure(answer, task, &columns, &[units], true);
        assert_eq!(missing, [("amount".to_owned(), vec![]), ("unit_price".to_owned(), vec![])]);
        assert_eq!(
            columns_note(&missing),
            "answer not accepted yet: the task asks a figure of the `amount`, `unit_price` \
             columns, and no result gives them yet: run the script for them too. Answer with the \
             figure of each column the task names."
        );
        // Beside a column whose figure the answer left out: both, in one note.
        let answer = "The total of the amount column is 5.";
        let missing = columns_without_figure(answer, task, &columns, &[units], true);
        assert_eq!(
            columns_note(&missing),
            "answer not accepted yet: the task asks a figure of the `units` column, and the \
             answer gives none of the results' figures for it. The results give `units sum: \
             212`. It asks a figure of the `amount`, `unit_price` columns, and no result gives \
             them yet: run the script for them too. Answer with the figure of each column the \
             task names."
        );
        // No named column has a line (another kind of output): nothing to say.
        assert!(columns_without_figure(answer, task, &columns, &["rows: 20"], true).is_empty());
        // Every column's line, every figure stated: complete.
        let all = "units sum: 212\nunit_price sum: 229.44\namount sum: 1705.47";
        let whole = "units 212, unit_price 229.44, amount 1705.47; 20 rows";
        assert!(columns_without_figure(whole, task, &columns, &[all], true).is_empty());
    }

    #[test]
    fn a_target_named_without_any_converted_figure_is_figureless() {
        let targets = vec!["kilograms".to_owned()];
        let results =
            ["file: sales.csv\nunits sum: 212", "212 lb = 96.16158244 kg\nquantity: mass"];
        let named = "The total is 212, and it has been converted from pounds to kilograms.";
        assert_eq!(figureless_targets(named, &targets, &results), ["kilograms"]);
        // The figure, rounded or not, or the unit not named (the other check's): none.
        for answer in ["212 lb is 96.16 kg.", "212 lb = 96.16158244 kilograms", "The total is 212."]
        {
            assert!(figureless_targets(answer, &targets, &results).is_empty(), "{answer}");
        }
        // No result converts into the unit: nothing to hold the answer to.
        assert!(figureless_targets(named, &targets, &results[..1]).is_empty());
        let into_pounds = ["96 kg = 211.64 lb"];
        assert!(figureless_targets(named, &targets, &into_pounds).is_empty());
    }

    #[test]
    fn a_stop_text_with_none_of_the_results_figures_gives_no_result() {
        let results = ["amount sum: 1705.47", "1 nmi = 1852 m\nquantity: length"];
        let stale = "The script `unit-converter` failed to find the column `length`.";
        assert!(gives_no_result_figure(stale, &results));
        assert!(gives_no_result_figure("Blocked at step 2 of 4.", &results));
        assert!(!gives_no_result_figure("Done: the amount totals 1705.47.", &results));
        assert!(!gives_no_result_figure("1 nmi is 1,852 m.", &results));
        // Results with no figure: nothing to give.
        assert!(!gives_no_result_figure(stale, &["file: sales.csv"]));
        assert!(!gives_no_result_figure(stale, &[]));
    }

    #[test]
    fn a_text_that_repeats_a_note_ten_words_in_a_row_copies_it() {
        let note = "answer not accepted yet: the task asks to convert to `kilograms`, and the \
                    answer states no figure in it. The results above already give `212 lb = \
                    96.16158244 kg`: answer with the converted figures, together with the rest \
                    of what the task asks.";
        // The local 1.5B's answer after that note.
        let copied = "The total is 212, and it has been converted from pounds to kilograms. The \
                      task asks to convert to kilograms, and the answer states no figure in it. \
                      The results above already give `212 lb = 96.16158244 kg`: answer with the \
                      converted figures, together with the rest of what the task asks.";
        assert!(copies_note(copied, &[note]));
        // The figures and a few of the note's words are the model's own.
        let answer = "The total is 212 units; 212 lb = 96.16158244 kg, the converted figure.";
        assert!(!copies_note(answer, &[note]));
        assert!(!copies_note(copied, &[]));
        assert!(!copies_note("too short", &[note]));
        // The results a note quotes, given in its order, are the run's, not the note's words.
        let shown = "answer not accepted yet: the results above already give `1 nmi = 1852 m`, \
                     `20 C = 68 F`, `1 GiB = 1073.741824 MB`: answer with them.";
        let results = "Converted: 1 nmi = 1852 m, 20 C = 68 F, 1 GiB = 1073.741824 MB.";
        assert!(!copies_note(results, &[shown]));
    }

    #[test]
    fn a_text_that_ends_inside_what_it_opened_is_cut_off() {
        for text in [
            "The script expects the unit, but the task writes `nmi`. Make this call: {",
            "The script's usage is `{",
            "Run it with [\"a\", ",
            "It printed `rows: 20",
            "Call {\"skill\": \"x\"",
        ] {
            assert!(cut_off(text), "{text}");
        }
        for text in [
            "The total is 1705.47.",
            "Run `{\"skill\": \"x\"}` next (done).",
            "Units total 212; amount not done.",
            "",
        ] {
            assert!(!cut_off(text), "{text}");
        }
    }

    #[test]
    fn a_column_the_answer_gives_no_figure_of_is_found() {
        let task = "For sales.csv, give the total of the units, unit_price and amount columns and \
                    the number of rows.";
        let summary = "file: sales.csv\nrows: 20\ncolumn units: numeric, 20 values, 0 empty\n\
                       units min: 2\nunits sum: 212\nunit_price sum: 229.44\namount mean: 85.27\n\
                       amount sum: 1705.47";
        let columns = named_columns(task);
        // The local 1.5B's answer: the amount's sum for every column.
        let answer = "The total of the units, unit_price, and amount columns is 1705.47, and the \
                      number of rows is 20.";
        let missing = columns_without_figure(answer, task, &columns, &[summary], false);
        assert_eq!(
            missing,
            [
                ("unit_price".to_owned(), vec!["unit_price sum: 229.44".to_owned()]),
                ("units".to_owned(), vec!["units sum: 212".to_owned()]),
            ]
        );
        let note = columns_note(&missing);
        assert!(note.contains("`unit_price`, `units` columns"), "{note}");
        assert!(note.contains("`unit_price sum: 229.44`, `units sum: 212`"), "{note}");
        // Each column with a figure (rounded is a figure), or no `label: figure` lines: none.
        let whole = "units 212, unit_price 229.44 and amount 1705";
        assert!(columns_without_figure(whole, task, &columns, &[summary], false).is_empty());
        assert!(columns_without_figure(answer, task, &columns, &["units: many"], false).is_empty());
    }

    #[test]
    fn a_quoted_quantity_is_checked_as_its_number_from_format_30() {
        // The local 1.5B's answer after `convert.py 212 pounds kilograms`.
        let answer = "The value `212 lbs` is converted to `96.16158244 kg`.";
        let task = ["Find the CSV file, total its units column, and convert that many pounds \
                     to kilograms."];
        let results = ["units sum: 212", "212 lb = 96.16158244 kg\nquantity: mass"];
        let mut sources =
            Sources { user: task.to_vec(), results: results.to_vec(), ..Sources::default() };
        assert_eq!(ungrounded(answer, &sources), vec!["\"212 lbs\""], "before format 30");
        sources.unit_place = true;
        assert!(ungrounded(answer, &sources).is_empty());
        // The number is still checked, and a quoted name is no quantity.
        assert_eq!(ungrounded("It is `213 lbs`.", &sources), vec!["213"]);
        assert_eq!(ungrounded("Use `212 widgets extra`.", &sources), vec!["\"212 widgets extra\""]);
        assert!(quantity("-2.5 celsius") && quantity("1,705.47 dollars"));
        assert!(!quantity("lbs 212") && !quantity("212") && !quantity("212 lb2"));
    }

    #[test]
    fn the_note_names_each_value_once() {
        let values = check("10 lines, then 10 again and 12", &[], &[]);
        assert_eq!(values, vec!["10", "12"]);
        let note = refusal_note(&values, &[]);
        assert!(note.contains("(10, 12)"), "{note}");
        assert!(note.contains("unknown"), "{note}");
    }

    #[test]
    fn no_panic_on_odd_text() {
        for text in [
            "",
            "-",
            "1e",
            "1e+",
            "1,",
            "1,2,",
            ".5",
            "9".repeat(400).as_str(),
            "1-",
            "“",
            "`",
            "0x1F",
            "１２３",
            "1e999",
        ] {
            let _ = check(text, &[text], &[text]);
        }
    }
}
