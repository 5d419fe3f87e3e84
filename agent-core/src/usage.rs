//! How a skill says to call its scripts: usage lines read from SKILL.md.
//!
//! A skill's body shows its scripts in code — a fenced block or an inline span such as
//! `` `scripts/convert.py VALUE FROM TO` `` or `` `python3 scripts/convert.py 5km mi` ``. Each
//! such line that names one of the skill's scripts and gives it arguments is a usage: the
//! arguments it shows tell how many the script takes (`[column]` and flags are optional, `...`
//! means any number more), and which of them are placeholders (`<file>`, `VALUE`) that the
//! model must replace with real values. A script's arity is the widest over its usages.

use serde::{Deserialize, Serialize};

/// Arguments a call may give beyond the most a usage line shows: a skill often adds one in
/// prose ("you may add the column's name as a second argument"), which no usage line shows.
pub(crate) const PROSE_ARGS: usize = 1;

/// What the usages of one script say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptUsage {
    /// The script (relative path, as listed under `scripts/`).
    pub script: String,
    /// The fewest arguments a usage shows.
    pub min_args: usize,
    /// The most arguments a usage shows (`None`: a usage allows any number more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_args: Option<usize>,
    /// Placeholders the usages write where a value goes (`<file>`, `VALUE`), as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placeholders: Vec<String>,
    /// The first usage line, as the skill writes it.
    pub example: String,
}

/// The usages `body` shows for each of `scripts` (only scripts it shows with arguments).
pub(crate) fn script_usages(body: &str, scripts: &[String]) -> Vec<ScriptUsage> {
    let lines = code_lines(body);
    // The JSON form the bundled skills write: `{"script": …, "args": […]}`; where a skill of
    // one script uses it, its inline argument lists (`["--name", "report"]`) are usages too.
    let json_form = lines.iter().any(|line| matches!(json_usage(line), Some((Some(_), _))));
    let mut usages: Vec<ScriptUsage> = Vec::new();
    for script in scripts {
        let mut found: Option<ScriptUsage> = None;
        for line in &lines {
            let bare_lists = json_form && scripts.len() == 1;
            let Some(args) = line_arguments(line, script, bare_lists) else { continue };
            if args.is_empty() {
                // A script named without arguments is a reference, not a usage.
                continue;
            }
            let shape = Shape::of(&args);
            let usage = found.get_or_insert_with(|| ScriptUsage {
                script: script.clone(),
                min_args: shape.min,
                max_args: shape.max,
                placeholders: Vec::new(),
                example: line.trim().to_owned(),
            });
            usage.min_args = usage.min_args.min(shape.min);
            usage.max_args = match (usage.max_args, shape.max) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            for placeholder in shape.placeholders {
                if !usage.placeholders.contains(&placeholder) {
                    usage.placeholders.push(placeholder);
                }
            }
        }
        usages.extend(found);
    }
    usages
}

/// The commands `documents` show `script` taking (from record format 31), each with the most
/// arguments a usage line of it writes, the command counted: the first argument of each usage
/// line that gives more after it, when that argument is a plain word and no placeholder —
/// `("between", 3)` and `("weekday", 2)` in "Run `scripts/dates.py between 2026-01-05
/// 2026-02-06` or `scripts/dates.py weekday 2026-01-05`". A value (`5`, `*.csv`, `FILE`) or
/// a flag is no command.
pub(crate) fn command_arities(documents: &[&str], script: &str) -> Vec<(String, usize)> {
    let mut commands: Vec<(String, usize)> = Vec::new();
    for line in documents.iter().flat_map(|document| code_lines(document)) {
        let Some(args) = line_arguments(&line, script, false) else { continue };
        let [first, _, ..] = args.as_slice() else { continue };
        let word = first.starts_with(|c: char| c.is_ascii_alphabetic())
            && first.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !word || is_placeholder_word(first) {
            continue;
        }
        match commands.iter_mut().find(|(command, _)| command == first) {
            Some((_, most)) => *most = (*most).max(args.len()),
            None => commands.push((first.clone(), args.len())),
        }
    }
    commands
}

/// A call's arguments with a script's command where `commands` ([`command_arities`]) says it
/// goes:
/// a command written with the arguments after it as one (`"between 2026-03-01 2026-04-15"`)
/// split into its words, or a command written after the values (`["2026-12-25", "weekday"]`)
/// moved first; cut to `max_args`. With `arities` ([`command_arities`], from format 32) the
/// command also goes first when values came before the merged argument, and the call is cut to
/// the arguments its own usage line writes (`["2026-12-25", "weekday 2026-12-25"]` is
/// `["weekday", "2026-12-25"]`; before, `["2026-12-25", "weekday", "2026-12-25"]`, which the
/// local 1.5B ran). `None` when the call has neither shape. Returns the argument at fault with
/// the fixed call.
pub(crate) fn command_fix(
    args: &[String],
    commands: &[String],
    max_args: Option<usize>,
    arities: &[(String, usize)],
) -> Option<(String, Vec<String>)> {
    let is_command = |word: &str| commands.iter().any(|command| command == word);
    let merged = args.iter().position(|arg| {
        let mut words = arg.split_whitespace();
        words.next().is_some_and(is_command) && words.next().is_some()
    });
    let (fault, mut fixed) = if let Some(at) = merged {
        let mut fixed: Vec<String> = args[..at].to_vec();
        fixed.extend(args[at].split_whitespace().map(str::to_owned));
        fixed.extend(args[at + 1..].iter().cloned());
        if !arities.is_empty() && at > 0 {
            let command = fixed.remove(at);
            fixed.insert(0, command);
        }
        (args[at].clone(), fixed)
    } else {
        let first = args.first()?;
        if is_command(first) || first.starts_with('-') {
            return None;
        }
        let at = args.iter().position(|arg| is_command(arg))?;
        let mut fixed = args.to_vec();
        let command = fixed.remove(at);
        fixed.insert(0, command.clone());
        (command, fixed)
    };
    let own = fixed
        .first()
        .and_then(|command| arities.iter().find(|(word, _)| word == command))
        .map(|(_, most)| *most);
    if let Some(max) = own.or(max_args) {
        fixed.truncate(max.max(1));
    }
    Some((fault, fixed))
}

/// The arguments a code line gives `script`: a JSON usage naming it, a bare JSON list of
/// arguments with `bare_lists` (a skill of one script that writes its usages that way), or a
/// command line naming it. `None` when the line is no usage of `script`.
fn line_arguments(line: &str, script: &str, bare_lists: bool) -> Option<Vec<String>> {
    match json_usage(line) {
        Some((Some(named), args)) if named == script => Some(args),
        Some((None, args)) if bare_lists => Some(args),
        Some(_) => None,
        None => arguments_after(line, script),
    }
}

/// A usage in JSON: an object with `script` and `args` (the script named), or a bare list of
/// string arguments (no script named).
fn json_usage(line: &str) -> Option<(Option<String>, Vec<String>)> {
    let line = line.trim();
    if !(line.starts_with('{') || line.starts_with('[')) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let strings = |value: &serde_json::Value| -> Option<Vec<String>> {
        value.as_array()?.iter().map(|item| item.as_str().map(str::to_owned)).collect()
    };
    match &value {
        serde_json::Value::Object(map) => {
            let script = map.get("script")?.as_str()?.to_owned();
            Some((Some(script), strings(map.get("args")?)?))
        }
        serde_json::Value::Array(_) => Some((None, strings(&value)?)),
        _ => None,
    }
}

/// Whether `arg` is a placeholder rather than a value: words in angle brackets (`<file named
/// in the task>`; a tag or a pattern such as `<div>` or `<[^>]+>` is a value), or one of
/// `usage`'s placeholders as written (`VALUE`, `<value>`) that `task` does not use.
pub(crate) fn is_placeholder(arg: &str, usage: Option<&ScriptUsage>, task: &str) -> bool {
    let arg = arg.trim();
    let described =
        arg.strip_prefix('<').and_then(|rest| rest.strip_suffix('>')).is_some_and(|inner| {
            inner.contains(' ')
                && inner
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.' | '/' | '\''))
        });
    described
        || usage.is_some_and(|usage| {
            usage
                .placeholders
                .iter()
                .any(|placeholder| placeholder == arg && !contains_word(task, arg))
        })
}

fn contains_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|token| token == word)
}

/// The lines of code in a Markdown body: each line of a fenced block, and each inline span.
fn code_lines(body: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in body.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            lines.push(line.to_owned());
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let Some(code) = parts.next() {
            if parts.next().is_none() {
                break;
            }
            lines.push(code.to_owned());
        }
    }
    lines
}

/// The arguments `line` gives `script` (tokens after its name up to a shell operator), or
/// `None` when the line does not name it as a command.
fn arguments_after(line: &str, script: &str) -> Option<Vec<String>> {
    let tokens = shell_words(line);
    let file_name = script.rsplit('/').next().unwrap_or(script);
    let at = tokens.iter().position(|token| {
        let token = token.trim_start_matches("./");
        token == script
            || token.ends_with(&format!("/{script}"))
            || token == file_name
            || token.ends_with(&format!("/{file_name}"))
    })?;
    let args = tokens[at + 1..].iter().take_while(|token| !is_operator(token)).cloned().collect();
    Some(args)
}

fn is_operator(token: &str) -> bool {
    matches!(token, "|" | "||" | "&&" | ";" | ">" | ">>" | "<" | "2>&1" | "&" | "#" | "\\")
        || token.starts_with('#')
        || token.starts_with("2>")
        || token.starts_with('>')
}

/// Splits a command line into words: whitespace separates, quotes group (and are kept off),
/// and so does a placeholder in angle brackets (`<file named in the task>`, kept whole).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    let chars: Vec<char> = line.chars().collect();
    for (at, &c) in chars.iter().enumerate() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                if q == '>' {
                    word.push(c);
                }
            }
            Some(_) => word.push(c),
            // `<` opening a word, not a redirection (`< in.txt`), with its `>` on the line.
            None if c == '<'
                && word.is_empty()
                && chars.get(at + 1).is_some_and(|next| !next.is_whitespace())
                && chars[at + 1..].contains(&'>') =>
            {
                quote = Some('>');
                started = true;
                word.push(c);
            }
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            None => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

/// What one usage's arguments say.
struct Shape {
    min: usize,
    max: Option<usize>,
    placeholders: Vec<String>,
}

impl Shape {
    fn of(args: &[String]) -> Shape {
        let mut min = 0;
        let mut count = 0;
        let mut unbounded = false;
        let mut optional_depth = 0usize;
        let mut flags = false;
        let mut placeholders = Vec::new();
        for arg in args {
            let opens = arg.starts_with('[');
            if opens {
                optional_depth += 1;
            }
            let bare = arg.trim_matches(|c| c == '[' || c == ']');
            if bare.ends_with("...") || bare.ends_with('…') || bare == "..." || bare == "…" {
                unbounded = true;
            }
            let bare = bare.trim_end_matches("...").trim_end_matches('…');
            if bare.starts_with('-') {
                flags = true;
            }
            if !bare.is_empty() {
                count += 1;
                if optional_depth == 0 && !flags {
                    min += 1;
                }
                if is_placeholder_word(bare) && !placeholders.iter().any(|p| p == bare) {
                    placeholders.push(bare.to_owned());
                }
            }
            let closes = arg.matches(']').count();
            optional_depth = optional_depth.saturating_sub(closes);
        }
        Shape { min, max: (!unbounded).then_some(count), placeholders }
    }
}

/// `<file>`, `{value}`, or an upper-case name (`VALUE`, `FROM_UNIT`, `FILE1`).
fn is_placeholder_word(word: &str) -> bool {
    let angled = word.len() > 2
        && ((word.starts_with('<') && word.ends_with('>'))
            || (word.starts_with('{') && word.ends_with('}')));
    let upper = word.len() >= 2
        && word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && word.chars().any(|c| c.is_ascii_uppercase());
    angled || upper
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of [`command_arities`].
    fn commands(documents: &[&str], script: &str) -> Vec<String> {
        command_arities(documents, script).into_iter().map(|(command, _)| command).collect()
    }

    fn usages(body: &str, scripts: &[&str]) -> Vec<ScriptUsage> {
        let scripts: Vec<String> = scripts.iter().map(|s| (*s).to_owned()).collect();
        script_usages(body, &scripts)
    }

    fn arity(usage: &ScriptUsage) -> (usize, Option<usize>) {
        (usage.min_args, usage.max_args)
    }

    #[test]
    fn inline_and_fenced_usages_give_the_widest_arity() {
        let body = "Run `scripts/convert.py VALUE FROM TO`.\n\n```bash\npython3 scripts/convert.py 5km mi\n```\n";
        let found = usages(body, &["scripts/convert.py"]);
        assert_eq!(found.len(), 1);
        assert_eq!(arity(&found[0]), (2, Some(3)));
        assert_eq!(found[0].placeholders, ["VALUE", "FROM", "TO"]);
        assert_eq!(found[0].example, "scripts/convert.py VALUE FROM TO");
    }

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn commands_are_the_first_plain_words_of_usage_lines_with_more_after_them() {
        let body = "Run `scripts/dates.py between 2026-01-05 2026-02-06` or \
                    `scripts/dates.py weekday 2026-01-05`. See `scripts/dates.py`.";
        assert_eq!(commands(&[body], "scripts/dates.py"), ["between", "weekday"]);
        // Values, placeholders, flags and a lone word are no commands; nor another script's.
        let body = "```\nscripts/convert.py 5 miles km\nscripts/jq.py FILE PATH\n\
                    scripts/find.py --name report\nscripts/find.py invoice\n\
                    scripts/find.py *.md docs\nscripts/git.py log --oneline\n```\n\
                    `{\"script\": \"scripts/find.py\", \"args\": [\"status\", \"-s\"]}`";
        assert!(commands(&[body], "scripts/convert.py").is_empty());
        assert!(commands(&[body], "scripts/jq.py").is_empty());
        assert_eq!(commands(&[body], "scripts/find.py"), ["status"]);
        assert_eq!(commands(&[body], "scripts/git.py"), ["log"]);
        assert!(commands(&[], "scripts/git.py").is_empty());
    }

    #[test]
    fn a_command_merged_with_its_values_or_written_after_them_is_put_right() {
        let commands = strings(&["between", "weekday"]);
        let merged = strings(&["between 2026-03-01 2026-04-15", "2026-03-01"]);
        assert_eq!(
            command_fix(&merged, &commands, Some(3), &[]),
            Some((
                "between 2026-03-01 2026-04-15".to_owned(),
                strings(&["between", "2026-03-01", "2026-04-15"])
            ))
        );
        let after = strings(&["2026-12-25", "weekday"]);
        assert_eq!(
            command_fix(&after, &commands, Some(3), &[]),
            Some(("weekday".to_owned(), strings(&["weekday", "2026-12-25"])))
        );
        // As the usage writes it, a flag first, a text with spaces that starts with no
        // command, or a script without commands: nothing to put right.
        for args in [
            strings(&["weekday", "2026-12-25"]),
            strings(&["--utc", "weekday", "2026-12-25"]),
            strings(&["the lines between", "x"]),
            strings(&[]),
        ] {
            assert_eq!(command_fix(&args, &commands, Some(3), &[]), None, "{args:?}");
        }
        assert_eq!(command_fix(&after, &[], None, &[]), None);
        // From format 32, with each command's own arity: the command first, the call cut to
        // its usage line (the 1.5B ran the fix shown before, a date twice).
        let body = "Run `scripts/dates.py between 2026-01-05 2026-02-06` or \
                    `scripts/dates.py weekday 2026-01-05`.";
        let arities = command_arities(&[body], "scripts/dates.py");
        assert_eq!(arities, [("between".to_owned(), 3), ("weekday".to_owned(), 2)]);
        let doubled = strings(&["2026-12-25", "weekday 2026-12-25"]);
        assert_eq!(
            command_fix(&doubled, &commands, Some(3), &[]),
            Some((
                "weekday 2026-12-25".to_owned(),
                strings(&["2026-12-25", "weekday", "2026-12-25"])
            )),
            "format 31"
        );
        assert_eq!(
            command_fix(&doubled, &commands, Some(3), &arities),
            Some(("weekday 2026-12-25".to_owned(), strings(&["weekday", "2026-12-25"])))
        );
        let after = strings(&["2026-12-25", "weekday", "2026-12-25"]);
        assert_eq!(
            command_fix(&after, &commands, Some(3), &arities),
            Some(("weekday".to_owned(), strings(&["weekday", "2026-12-25"])))
        );
        let between = strings(&["between 2026-03-01 2026-04-15", "2026-03-01"]);
        assert_eq!(
            command_fix(&between, &commands, Some(3), &arities).map(|(_, fixed)| fixed),
            Some(strings(&["between", "2026-03-01", "2026-04-15"]))
        );
    }

    #[test]
    fn optional_arguments_flags_and_ellipses() {
        let body = "```\npython scripts/summary.py <file> [column]\npython scripts/find.py PATTERN [--limit N]\nscripts/cat.sh FILE...\n```";
        let found = usages(body, &["scripts/summary.py", "scripts/find.py", "scripts/cat.sh"]);
        assert_eq!(arity(&found[0]), (1, Some(2)));
        assert_eq!(found[0].placeholders, ["<file>"]);
        assert_eq!(arity(&found[1]), (1, Some(3)));
        assert_eq!(arity(&found[2]), (1, None));
        // Flags make the rest optional.
        let found = usages("`scripts/x.py --json FILE`", &["scripts/x.py"]);
        assert_eq!(arity(&found[0]), (0, Some(2)));
    }

    #[test]
    fn several_scripts_and_shell_operators() {
        let body = "Count with `scripts/count.py data.csv | head` and plot with\n`./scripts/plot.py data.csv out.png > log.txt`; see `scripts/count.py`.";
        let found = usages(body, &["scripts/count.py", "scripts/plot.py", "scripts/other.py"]);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].script.as_str(), arity(&found[0])),
            ("scripts/count.py", (1, Some(1)))
        );
        assert_eq!((found[1].script.as_str(), arity(&found[1])), ("scripts/plot.py", (2, Some(2))));
    }

    #[test]
    fn quoted_arguments_are_one_each() {
        let found = usages("`python scripts/find.py '*.csv' \"two words\"`", &["scripts/find.py"]);
        assert_eq!(arity(&found[0]), (2, Some(2)));
    }

    #[test]
    fn a_script_named_by_file_name_or_under_a_base_dir() {
        let body = "```\npython {baseDir}/scripts/convert.py 1 km mi\nconvert.py 2 km\n```";
        let found = usages(body, &["scripts/convert.py"]);
        assert_eq!(arity(&found[0]), (2, Some(3)));
        assert_eq!(found[0].placeholders, Vec::<String>::new());
    }

    #[test]
    fn placeholders_are_told_from_values() {
        let found = usages("`scripts/c.py VALUE FROM TO`", &["scripts/c.py"]);
        let usage = found.first();
        assert!(is_placeholder("<file named in the task>", None, "any"));
        assert!(is_placeholder("VALUE", usage, "Convert 5 km to mi"));
        // A word the task itself uses is a value.
        assert!(!is_placeholder("TO", usage, "Convert TO the other unit"));
        assert!(!is_placeholder("5", usage, "Convert 5 km"));
        assert!(!is_placeholder("<", usage, "x"));
        // Tags and patterns are values, unless the usage writes them as its placeholders.
        assert!(!is_placeholder("<div>", None, "x"));
        assert!(!is_placeholder("<[^>]+>", None, "x"));
        let angled = usages("`scripts/c.py <value> <to unit> < in.txt`", &["scripts/c.py"]);
        assert_eq!(arity(&angled[0]), (2, Some(2)));
        assert_eq!(angled[0].placeholders, ["<value>", "<to unit>"]);
        assert!(is_placeholder("<value>", angled.first(), "Convert 5 km"));
        assert!(!is_placeholder("km", usage, "x"));
    }

    #[test]
    fn the_json_form_of_the_bundled_skills() {
        let body = "```json\n{\"skill\": \"f\", \"script\": \"scripts/find.py\", \"args\": [\"*.csv\"]}\n```\n\
                    - `[\"--name\", \"report\"]` searches names; `[\"*.md\", \"docs\"]` a folder.";
        let found = usages(body, &["scripts/find.py"]);
        assert_eq!(arity(&found[0]), (0, Some(2)));
        let body = "```json\n{\"script\": \"scripts/c.py\", \"args\": [\"<value>\", \"<from unit>\", \"<to unit>\"]}\n```";
        let found = usages(body, &["scripts/c.py", "scripts/d.py"]);
        assert_eq!(found.len(), 1);
        assert_eq!(arity(&found[0]), (3, Some(3)));
        assert_eq!(found[0].placeholders, ["<value>", "<from unit>", "<to unit>"]);
        // Without the JSON form, a bare list names no script.
        assert!(usages("`[\"a\", \"b\"]`", &["scripts/find.py"]).is_empty());
    }

    #[test]
    fn no_panic_on_odd_bodies() {
        for body in [
            "`",
            "```",
            "`scripts/a.py [`",
            "`scripts/a.py ]]] [[[`",
            "`a.py \"unclosed`",
            "…",
            "`scripts/a.py …`",
        ] {
            let _ = usages(body, &["scripts/a.py"]);
        }
    }
}
