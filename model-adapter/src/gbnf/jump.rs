//! Jump-forward decoding over a one-line document: which parts of it the schema fixes (the
//! runtime writes them) and which the model must write (a grammar for each).
//!
//! A per-turn action document is mostly fixed by its schema: the keys, the separators, a
//! one-value enum (the only script of a selected skill), the closing brackets. Under a grammar
//! each of those characters still costs the model a generation step. [`step`] walks the schema
//! along the document written so far and stops at the next part the model must choose or
//! write: a free value (a string, an array, a number, …) or a choice among literals (an enum,
//! the `type` of an action in an `anyOf`). The caller sends the document so far as the start of
//! the assistant's answer (llama.cpp continues it: a prefill), with a grammar for that part
//! alone, and calls [`step`] again with the part the model wrote. The fixed text in between is
//! evaluated with the prompt, as a batch, several times cheaper per token than generating it
//! (SGLang's compressed-FSM jump-forward decoding is the reference).
//!
//! Every part the model writes starts with the space after its key's colon (`": "`), so the
//! text sent ends at `":`, where the tokenizer splits a JSON document anyway, and the model's
//! own first token (` "` or ` [`) is the one it would have written. Each part's grammar also
//! takes the punctuation that follows it up to the next space (`",`, `]}}}`): a small model
//! writes `",` as one token, and a grammar that ends at the closing quote makes it keep on
//! writing the string instead (seen on Qwen2.5-Coder-1.5B). [`Segment`] holds that split.
//!
//! A part whose end is known (a string's closing quote, an array's closing bracket, a choice
//! among strings) also carries a stop word, its closing character and that punctuation (`",`,
//! `]}}}`): the server stops as soon as the model has written it, instead of evaluating that
//! last token to sample the end-of-text token the grammar leaves as the only way on (one
//! generation step a part). The server leaves the stop word out of the text; [`Segment::stopped`]
//! tells a real end from the same characters met inside a string (`\",` in a thought) and
//! gives, for a string, the grammar of its rest.
//!
//! The walk covers the schemas [`one_line_grammar`](super::one_line_grammar) covers and makes
//! the same document: required members first in order, then the optional ones (whose presence
//! the model writes, with the object's closing brace). Alternatives (`anyOf`, `oneOf`) are
//! walked side by side while they agree on their keys, a choice of literals picking which go
//! on; a place where they differ and no choice picks is not covered. [`covers`] walks every
//! path before a document starts, so a request is either walked to its end or sent whole.

use serde_json::{Map, Value};

use super::{ANNOTATIONS, Builder, MAX_DEPTH, Member, PRIMITIVES, literal, members, quoted};

/// Where a document stands: the text the schema fixes so far, and what comes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// The document so far: fixed text and the parts the model wrote.
    pub prefix: String,
    /// What the model writes next, if anything.
    pub next: Next,
}

/// The next part of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// The document is complete.
    Done,
    /// A value the model writes, with the space before it: the GBNF expression of its text,
    /// the rules that expression uses, and how it ends when that is known.
    Free { expression: String, rules: Vec<(String, String)>, closing: Option<Closing> },
    /// One of these texts (each with the space before it), as JSON literals.
    Choice(Vec<String>),
}

/// How a free part ends, when its schema tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closing {
    /// A plain string (no pattern, format or least length), at most `max` characters long.
    String { max: Option<u64> },
    /// An array: `]`.
    Array,
}

impl Closing {
    fn character(self) -> char {
        match self {
            Closing::String { .. } => '"',
            Closing::Array => ']',
        }
    }
}

/// A request's part: the grammar the model writes it under, and how much of what it wrote is
/// the part itself (the rest, `tail`, is the fixed text after it that the grammar also took).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The document so far, sent as the start of the answer.
    pub prefix: String,
    /// The grammar of the part followed by `tail`.
    pub grammar: String,
    /// The fixed text after the part, up to its first space, written by the model too.
    pub tail: TailSpec,
    /// The text every whole part ends with (its closing character and the tail), for the
    /// server to stop at; `None` where the end is not known or could not be told apart.
    pub stop: Option<String>,
    /// How the part ends, for [`Segment::stopped`].
    closing: Option<Closing>,
}

/// What the text of a part that the server stopped at [`Segment::stop`] turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// The whole part with its stop word (its tail included).
    Whole(String),
    /// The stop word came inside a string (after `\`): the model goes on under this grammar,
    /// which takes the rest of the string and the tail.
    Inside(String),
    /// Neither: the part cannot be put together.
    Cut,
}

impl Segment {
    /// `text` (what the model wrote of the part, across requests, without the stop word the
    /// server left out), told as a whole part or a stop met inside it.
    pub(crate) fn stopped(&self, text: &str) -> Stopped {
        let Some(word) = &self.stop else { return Stopped::Cut };
        let whole = format!("{text}{word}");
        let complete = self.tail.part(&whole).is_some_and(|part| {
            // A choice is whole when it is one of the choices; a free part when it parses.
            self.closing.is_none() || serde_json::from_str::<Value>(part).is_ok()
        });
        if complete {
            return Stopped::Whole(whole);
        }
        let Some(Closing::String { max }) = self.closing else { return Stopped::Cut };
        // Inside the string: what it holds so far, decoded.
        let Some(decoded) = string_so_far(&whole) else { return Stopped::Cut };
        let TailSpec::Same(tail) = &self.tail else { return Stopped::Cut };
        let used = u64::try_from(decoded.chars().count()).unwrap_or(u64::MAX);
        let rest = match max {
            Some(max) if used > max => return Stopped::Cut,
            Some(max) if used == max => String::new(),
            Some(max) => format!("char{{0,{}}} ", max - used),
            None => "char* ".to_owned(),
        };
        Stopped::Inside(format!("root ::= {rest}\"\\\"\" {}\n{PRIMITIVES}", quoted(tail)))
    }

    /// The grammar that ends the part's string where `text` (what the model wrote of the
    /// part) stops: the closing quote and the tail, nothing more. For a loop cut short (see
    /// `openai/jump.rs`). `None` where the part is no plain string, or `text` does not stop
    /// between two characters of it (inside an escape).
    pub(crate) fn closed(&self, text: &str) -> Option<String> {
        let Some(Closing::String { .. }) = self.closing else { return None };
        string_so_far(text)?;
        let TailSpec::Same(tail) = &self.tail else { return None };
        Some(format!("root ::= \"\\\"\" {}\n{PRIMITIVES}", quoted(tail)))
    }
}

/// What a string part written so far holds (` "` and the characters after it, no closing
/// quote), decoded: `None` where `text` opens no string or stops inside an escape.
fn string_so_far(text: &str) -> Option<String> {
    let content = text.strip_prefix(" \"")?;
    serde_json::from_str::<String>(&format!("\"{content}\"")).ok()
}

/// The fixed text a segment's grammar takes after the part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TailSpec {
    /// The same after any text of the part.
    Same(String),
    /// After each choice (a choice's text, its tail).
    PerChoice(Vec<(String, String)>),
}

impl TailSpec {
    /// The part the model wrote, from the segment's whole text (`None` when the text does not
    /// end as the grammar says it must: a cut answer).
    pub(crate) fn part<'t>(&self, written: &'t str) -> Option<&'t str> {
        match self {
            TailSpec::Same(tail) => written.strip_suffix(tail.as_str()),
            TailSpec::PerChoice(choices) => choices
                .iter()
                .find(|(choice, tail)| written.strip_suffix(tail.as_str()) == Some(choice))
                .map(|(choice, _)| &written[..choice.len()]),
        }
    }
}

/// The most documents' paths [`covers`] walks before it gives up on a schema.
const MAX_PATHS: usize = 256;

/// The step after the parts `written` (each as the model wrote it, without its tail), or
/// `None` where the walk does not cover the schema.
pub(crate) fn step(schema: &Value, written: &[String]) -> Option<Step> {
    let mut walker = Walker { written, used: 0, text: String::new(), depth: 0 };
    match walker.value(&[schema]) {
        Ok(_) if walker.used == written.len() => {
            Some(Step { prefix: walker.text, next: Next::Done })
        }
        Ok(_) => None,
        Err(Halt::Free(expression, rules, closing)) => {
            Some(Step { prefix: walker.text, next: Next::Free { expression, rules, closing } })
        }
        Err(Halt::Choice(choices)) => {
            Some(Step { prefix: walker.text, next: Next::Choice(choices) })
        }
        Err(Halt::Unsupported) => None,
    }
}

/// The segment the model writes after `written`: `None` when the document is done or the
/// walk does not cover it.
pub(crate) fn segment(schema: &Value, written: &[String]) -> Option<Segment> {
    let here = step(schema, written)?;
    // What the schema fixes after a part: the step after it, less the part.
    let tail_after = |part: &str| -> Option<String> {
        let mut more = written.to_vec();
        more.push(part.to_owned());
        let after = step(schema, &more)?;
        let fixed = after.prefix.get(here.prefix.len() + part.len()..)?;
        let end = fixed.find(' ').unwrap_or(fixed.len());
        Some(fixed[..end].to_owned())
    };
    let (root, rules, tail, closing, stop) = match here.next {
        Next::Done => return None,
        Next::Free { expression, rules, closing } => {
            // The fixed text after a free part does not depend on what the part says.
            let tail = tail_after("")?;
            let stop = closing
                .filter(|_| !tail.is_empty())
                .map(|closing| format!("{}{tail}", closing.character()));
            (format!("{expression} {}", quoted(&tail)), rules, TailSpec::Same(tail), closing, stop)
        }
        Next::Choice(choices) => {
            let mut alternatives = Vec::with_capacity(choices.len());
            let mut tails = Vec::with_capacity(choices.len());
            for choice in choices {
                let tail = tail_after(&choice)?;
                alternatives.push(quoted(&format!("{choice}{tail}")));
                tails.push((choice, tail));
            }
            let stop = choice_stop(&tails);
            (alternatives.join(" | "), Vec::new(), TailSpec::PerChoice(tails), None, stop)
        }
    };
    let mut grammar = format!("root ::= {root}\n");
    for (name, body) in &rules {
        grammar.push_str(&format!("{name} ::= {body}\n"));
    }
    grammar.push_str(PRIMITIVES);
    Some(Segment { prefix: here.prefix, grammar, tail, stop, closing })
}

/// The stop word of a choice: the last character of every choice and its tail, when all
/// choices share it and none holds it before its end (then the text before the stop word tells
/// the choice).
fn choice_stop(choices: &[(String, String)]) -> Option<String> {
    let (first, tail) = choices.first()?;
    let word = format!("{}{tail}", first.chars().last()?);
    let fits = |(choice, tail): &(String, String)| {
        let whole = format!("{choice}{tail}");
        !tail.is_empty()
            && whole.ends_with(&word)
            && whole.find(&word) == Some(whole.len() - word.len())
    };
    choices.iter().all(fits).then_some(word)
}

/// Whether every document `schema` admits can be walked (each choice tried, a free part taken
/// as empty), within [`MAX_PATHS`] paths.
pub(crate) fn covers(schema: &Value) -> bool {
    let mut budget = MAX_PATHS;
    let mut pending = vec![Vec::<String>::new()];
    while let Some(written) = pending.pop() {
        if budget == 0 {
            return false;
        }
        budget -= 1;
        let Some(step) = step(schema, &written) else { return false };
        match step.next {
            Next::Done => {}
            Next::Free { .. } => {
                let mut more = written;
                more.push(String::new());
                pending.push(more);
            }
            Next::Choice(choices) => {
                for choice in choices {
                    let mut more = written.clone();
                    more.push(choice);
                    pending.push(more);
                }
            }
        }
    }
    true
}

enum Halt {
    Free(String, Vec<(String, String)>, Option<Closing>),
    Choice(Vec<String>),
    Unsupported,
}

struct Walker<'a> {
    written: &'a [String],
    used: usize,
    text: String,
    depth: usize,
}

/// The schema's map, when it is one (`true` is any value: not walked).
fn map_of(schema: &Value) -> Option<&Map<String, Value>> {
    schema.as_object()
}

/// The alternatives of an `anyOf`/`oneOf` with nothing else beside it.
fn alternatives(map: &Map<String, Value>) -> Option<&Vec<Value>> {
    let keyword = ["anyOf", "oneOf"].into_iter().find(|keyword| map.contains_key(*keyword))?;
    let others = map.keys().all(|key| key == keyword || ANNOTATIONS.contains(&key.as_str()));
    map.get(keyword).and_then(Value::as_array).filter(|variants| others && !variants.is_empty())
}

/// A `const` or `enum`: its members as compact JSON.
fn literals(map: &Map<String, Value>) -> Option<Vec<String>> {
    if let Some(value) = map.get("const") {
        return serde_json::to_string(value).ok().map(|text| vec![text]);
    }
    let values = map.get("enum")?.as_array()?;
    values.iter().map(|value| serde_json::to_string(value).ok()).collect()
}

/// How a value of `map` written whole ends, when every such value ends the same way and (for
/// a string) its rest after any point is `char`s and the closing quote.
fn closing(map: &Map<String, Value>) -> Option<Closing> {
    let kind = map.get("type").and_then(Value::as_str)?;
    let plain = |allowed: &[&str]| {
        map.keys().all(|key| allowed.contains(&key.as_str()) || ANNOTATIONS.contains(&key.as_str()))
    };
    match kind {
        "string" if plain(&["type", "maxLength"]) => {
            Some(Closing::String { max: map.get("maxLength").and_then(Value::as_u64) })
        }
        // An array of flat items only: in an array of objects or arrays the closing
        // character and tail come inside it too (`["csv-summary"]}` in a plan's steps, whose
        // own closing is `]}`), and the server would stop there, in the middle of the part.
        "array" if map.get("items").is_some_and(flat) => Some(Closing::Array),
        _ => None,
    }
}

/// Whether an array's `items` schema is a flat value: a string, number, integer or boolean, or
/// an `enum`/`const` of those, with no object or array inside.
fn flat(items: &Value) -> bool {
    let Some(map) = items.as_object() else { return false };
    let scalar = |value: &Value| !value.is_object() && !value.is_array();
    if let Some(choices) = map.get("enum").and_then(Value::as_array) {
        return choices.iter().all(scalar);
    }
    if let Some(value) = map.get("const") {
        return scalar(value);
    }
    matches!(
        map.get("type").and_then(Value::as_str),
        Some("string" | "number" | "integer" | "boolean")
    )
}

fn is_object(map: &Map<String, Value>) -> bool {
    map.get("type").and_then(Value::as_str) == Some("object")
        || (map.get("type").is_none() && map.contains_key("properties"))
}

impl Walker<'_> {
    /// Walk one value that is one of `candidates`; which of them it turned out to be.
    fn value(&mut self, candidates: &[&Value]) -> Result<Vec<usize>, Halt> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Halt::Unsupported);
        }
        let result = self.value_inner(candidates);
        self.depth -= 1;
        result
    }

    fn value_inner(&mut self, candidates: &[&Value]) -> Result<Vec<usize>, Halt> {
        // Alternatives stand beside the candidates they came from.
        let mut flat: Vec<(usize, &Map<String, Value>)> = Vec::new();
        let mut stack: Vec<(usize, &Value)> =
            candidates.iter().copied().enumerate().rev().collect();
        while let Some((origin, schema)) = stack.pop() {
            let map = map_of(schema).ok_or(Halt::Unsupported)?;
            match alternatives(map) {
                Some(variants) => stack.extend(variants.iter().rev().map(|v| (origin, v))),
                None => flat.push((origin, map)),
            }
            if flat.len() + stack.len() > MAX_PATHS {
                return Err(Halt::Unsupported);
            }
        }
        let origins = |kept: &[usize]| -> Vec<usize> {
            let mut found: Vec<usize> = kept.iter().map(|index| flat[*index].0).collect();
            found.dedup();
            found
        };
        let first = flat.first().ok_or(Halt::Unsupported)?.1;
        if flat.iter().all(|(_, map)| *map == first) {
            self.single(first)?;
            return Ok(origins(&(0..flat.len()).collect::<Vec<_>>()));
        }
        // A choice of literals: the model picks one, the candidates that admit it go on.
        let all_literals: Option<Vec<Vec<String>>> =
            flat.iter().map(|(_, map)| literals(map)).collect();
        if let Some(all_literals) = all_literals {
            let mut choices: Vec<String> = Vec::new();
            for text in all_literals.iter().flatten() {
                if !choices.contains(text) {
                    choices.push(text.clone());
                }
            }
            let chosen = self.choose(&choices)?;
            let kept: Vec<usize> =
                (0..flat.len()).filter(|index| all_literals[*index].contains(&chosen)).collect();
            return Ok(origins(&kept));
        }
        // Objects that agree on their keys (all required): walked member by member, side by side.
        let shapes: Option<Vec<Vec<Member<'_>>>> =
            flat.iter().map(|(_, map)| if is_object(map) { members(map) } else { None }).collect();
        let shapes = shapes.ok_or(Halt::Unsupported)?;
        let keys: Vec<&str> = shapes[0].iter().map(|(name, _, _)| *name).collect();
        let agree = shapes.iter().all(|shape| {
            shape.len() == keys.len()
                && shape.iter().zip(&keys).all(|((name, _, needed), key)| name == key && *needed)
        });
        if !agree {
            return Err(Halt::Unsupported);
        }
        let mut alive: Vec<usize> = (0..flat.len()).collect();
        for (position, key) in keys.iter().enumerate() {
            self.key(position, key);
            let values: Vec<&Value> =
                alive.iter().map(|index| shapes[*index][position].1).collect();
            let kept = self.value(&values)?;
            alive = kept.into_iter().map(|index| alive[index]).collect();
        }
        self.text.push('}');
        Ok(origins(&alive))
    }

    /// `{"key":` (with the space before it inside the document) or `, "key":`; the space
    /// after the colon is the value's.
    fn key(&mut self, position: usize, key: &str) {
        self.text.push_str(match (position, self.text.is_empty()) {
            (0, true) => "{",
            (0, false) => " {",
            _ => ", ",
        });
        self.text.push_str(&serde_json::to_string(key).unwrap_or_default());
        self.text.push(':');
    }

    /// Walk a value of one schema.
    fn single(&mut self, map: &Map<String, Value>) -> Result<(), Halt> {
        if let Some(choices) = literals(map) {
            self.choose(&choices)?;
            return Ok(());
        }
        if is_object(map)
            && let Some(shape) = members(map)
            && shape.first().is_some_and(|(_, _, needed)| *needed)
        {
            let required = shape.iter().take_while(|(_, _, needed)| *needed).count();
            for (position, (key, value, _)) in shape[..required].iter().enumerate() {
                self.key(position, key);
                self.value(&[*value])?;
            }
            if required == shape.len() {
                self.text.push('}');
                return Ok(());
            }
            // The optional members and the closing brace: the model's.
            let mut builder = Builder::default();
            let mut rest = String::new();
            for (key, value, _) in &shape[required..] {
                let value = builder.visit(value, self.depth + 1).ok_or(Halt::Unsupported)?;
                let key = literal(&Value::String((*key).to_owned())).ok_or(Halt::Unsupported)?;
                rest.push_str(&format!("(comma {key} colon {value})? "));
            }
            rest.push_str(r#""}""#);
            return self.free_text(rest, builder.rules, false, None);
        }
        // Anything else the model writes whole, with the space before it.
        let mut builder = Builder::default();
        let expression = builder.visit(&Value::Object(map.clone()), self.depth + 1);
        let expression = expression.ok_or(Halt::Unsupported)?;
        self.free_text(expression, builder.rules, true, closing(map))
    }

    /// A choice among `choices` (JSON literals), written with the space before it (none is
    /// written when there is one).
    fn choose(&mut self, choices: &[String]) -> Result<String, Halt> {
        if let [only] = choices {
            self.text.push(' ');
            self.text.push_str(only);
            return Ok(only.clone());
        }
        let spaced: Vec<String> = choices.iter().map(|choice| format!(" {choice}")).collect();
        let written = self.take().ok_or_else(|| Halt::Choice(spaced.clone()))?;
        let chosen = written.strip_prefix(' ').filter(|chosen| choices.iter().any(|c| c == chosen));
        let chosen = chosen.ok_or(Halt::Unsupported)?.to_owned();
        self.text.push_str(&written);
        Ok(chosen)
    }

    /// A part the model writes (with a leading space when `spaced`).
    fn free_text(
        &mut self,
        expression: String,
        rules: Vec<(String, String)>,
        spaced: bool,
        closing: Option<Closing>,
    ) -> Result<(), Halt> {
        let expression = if spaced { format!(r#"" " {expression}"#) } else { expression };
        let written = self.take().ok_or(Halt::Free(expression, rules, closing))?;
        self.text.push_str(&written);
        Ok(())
    }

    /// The next part the model wrote, if it has written it.
    fn take(&mut self) -> Option<String> {
        let written = self.written.get(self.used)?.clone();
        self.used += 1;
        Some(written)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A turn's schema as agent-core writes it: a thought, then a `run_script` (one skill, one
    /// script) or an answer (the integration tests' too).
    fn turn() -> Value {
        serde_json::from_str(include_str!("../../tests/data/turn_schema.json")).unwrap()
    }

    fn parts(list: &[&str]) -> Vec<String> {
        list.iter().map(|part| (*part).to_owned()).collect()
    }

    #[test]
    fn a_run_script_turn_is_three_parts_and_the_rest_is_fixed() {
        let schema = turn();
        assert!(covers(&schema));
        let first = segment(&schema, &[]).unwrap();
        assert_eq!(first.prefix, r#"{"thought":"#);
        assert_eq!(first.tail, TailSpec::Same(",".to_owned()));
        assert!(first.grammar.starts_with("root ::= \" \" "), "{}", first.grammar);
        assert!(first.grammar.contains(r#"char{0,300}"#), "{}", first.grammar);

        let second = segment(&schema, &parts(&[r#" "Convert it.""#])).unwrap();
        assert_eq!(second.prefix, r#"{"thought": "Convert it.", "action": {"type":"#);
        assert!(
            second.grammar.starts_with(r#"root ::= " \"run_script\"," | " \"final_answer\",""#),
            "{}",
            second.grammar
        );

        let written = parts(&[r#" "Convert it.""#, r#" "run_script""#]);
        let third = segment(&schema, &written).unwrap();
        assert_eq!(
            third.prefix,
            r#"{"thought": "Convert it.", "action": {"type": "run_script", "args": {"skill": "unit-converter", "script": "scripts/convert.py", "args":"#
        );
        assert_eq!(third.tail, TailSpec::Same("}}}".to_owned()));
        assert_eq!(third.tail.part(r#" ["5", "mi", "km"]}}}"#), Some(r#" ["5", "mi", "km"]"#));

        let mut done = written;
        done.push(r#" ["5", "mi", "km"]"#.to_owned());
        assert_eq!(segment(&schema, &done), None);
        let document = step(&schema, &done).unwrap();
        assert_eq!(document.next, Next::Done);
        let parsed: Value = serde_json::from_str(&document.prefix).unwrap();
        assert_eq!(parsed["action"]["args"]["args"], json!(["5", "mi", "km"]));
        assert_eq!(
            document.prefix,
            r#"{"thought": "Convert it.", "action": {"type": "run_script", "args": {"skill": "unit-converter", "script": "scripts/convert.py", "args": ["5", "mi", "km"]}}}"#
        );
    }

    #[test]
    fn a_final_answer_turn_goes_its_own_way_after_the_choice() {
        let schema = turn();
        let written = parts(&[r#" "Done.""#, r#" "final_answer""#]);
        let third = segment(&schema, &written).unwrap();
        assert_eq!(
            third.prefix,
            r#"{"thought": "Done.", "action": {"type": "final_answer", "args": {"content":"#
        );
        assert_eq!(third.tail, TailSpec::Same("}}}".to_owned()));
        let mut done = written;
        done.push(r#" "42 km""#.to_owned());
        let document = step(&schema, &done).unwrap().prefix;
        assert_eq!(
            serde_json::from_str::<Value>(&document).unwrap()["action"]["args"]["content"],
            "42 km"
        );
    }

    #[test]
    fn a_choice_tail_tells_the_part_from_what_follows() {
        let tail = TailSpec::PerChoice(vec![
            (r#" "a""#.to_owned(), ",".to_owned()),
            (r#" "ab""#.to_owned(), "}".to_owned()),
        ]);
        assert_eq!(tail.part(r#" "a","#), Some(r#" "a""#));
        assert_eq!(tail.part(r#" "ab"}"#), Some(r#" "ab""#));
        assert_eq!(tail.part(r#" "ab","#), None);
        assert_eq!(TailSpec::Same("}}".to_owned()).part(r#" "cut"#), None);
    }

    #[test]
    fn optional_members_and_their_closing_brace_are_the_models() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"const": 1}, "b": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": false,
        });
        assert!(covers(&schema));
        let first = segment(&schema, &[]).unwrap();
        assert_eq!(first.prefix, r#"{"a": 1"#);
        assert!(
            first.grammar.starts_with(r#"root ::= (comma "\"b\"" colon integer)? "}" """#),
            "{}",
            first.grammar
        );
        let done = step(&schema, &parts(&[r#", "b": 7}"#])).unwrap();
        assert_eq!((done.prefix.as_str(), done.next), (r#"{"a": 1, "b": 7}"#, Next::Done));
    }

    #[test]
    fn a_fixed_document_needs_no_model() {
        let schema = json!({
            "type": "object",
            "properties": {"type": {"const": "x"}},
            "required": ["type"],
            "additionalProperties": false,
        });
        assert_eq!(segment(&schema, &[]), None);
        assert_eq!(step(&schema, &[]).unwrap().prefix, r#"{"type": "x"}"#);
    }

    #[test]
    fn alternatives_that_no_choice_tells_apart_are_not_walked() {
        let differ = json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": false},
        ]});
        assert!(!covers(&differ));
        let same_keys = json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false},
        ]});
        assert!(!covers(&same_keys));
        assert!(!covers(&json!(true)));
        // A string written whole is covered.
        assert!(covers(&json!({"type": "string"})));
    }

    #[test]
    fn scripts_of_several_skills_are_told_apart_member_by_member() {
        let variant = |skill: &str, script: &str, max: u64| {
            json!({
                "type": "object",
                "properties": {
                    "type": {"const": "run_script"},
                    "args": {
                        "type": "object",
                        "properties": {
                            "skill": {"enum": [skill]},
                            "script": {"enum": [script]},
                            "args": {"type": "array", "items": {"type": "string"}, "maxItems": max},
                        },
                        "required": ["skill", "script", "args"],
                        "propertyOrdering": ["skill", "script", "args"],
                        "additionalProperties": false,
                    },
                },
                "required": ["type", "args"],
                "propertyOrdering": ["type", "args"],
                "additionalProperties": false,
            })
        };
        let schema = json!({"anyOf": [variant("a", "x.py", 1), variant("a", "y.py", 2), variant("b", "z.py", 3)]});
        assert!(covers(&schema));
        let first = step(&schema, &[]).unwrap();
        assert_eq!(first.prefix, r#"{"type": "run_script", "args": {"skill":"#);
        assert_eq!(first.next, Next::Choice(parts(&[r#" "a""#, r#" "b""#])));
        let second = step(&schema, &parts(&[r#" "a""#])).unwrap();
        assert_eq!(second.next, Next::Choice(parts(&[r#" "x.py""#, r#" "y.py""#])));
        let third = step(&schema, &parts(&[r#" "b""#])).unwrap();
        assert!(
            third.prefix.ends_with(r#""skill": "b", "script": "z.py", "args":"#),
            "{}",
            third.prefix
        );
        let Next::Free { expression, .. } = third.next else { panic!("{third:?}") };
        assert!(expression.starts_with(r#"" " "#), "{expression}");
    }

    /// A JSON value written as the one-line grammar writes it (`": "`, `", "`), with the space
    /// a part starts with.
    #[cfg(feature = "structured")]
    fn spaced(value: &Value) -> String {
        let text = serde_json::to_string(value).unwrap();
        match value {
            Value::Array(items) => {
                let items: Vec<String> =
                    items.iter().map(|item| serde_json::to_string(item).unwrap()).collect();
                format!(" [{}]", items.join(", "))
            }
            _ => format!(" {text}"),
        }
    }

    // The schema check needs `jsonschema` (the `structured` feature).
    #[cfg(feature = "structured")]
    proptest::proptest! {
        /// Whatever the model writes in each part (any thought, any arguments, either action),
        /// the document put together is valid JSON that the schema admits.
        #[test]
        fn every_walk_ends_in_a_document_the_schema_admits(
            thought in "\\PC{0,40}",
            answer in proptest::bool::ANY,
            args in proptest::collection::vec("\\PC{0,8}", 0..=3),
            content in "\\PC{0,20}",
        ) {
            let schema = turn();
            let mut written = vec![spaced(&json!(thought))];
            written.push(if answer { r#" "final_answer""# } else { r#" "run_script""# }.to_owned());
            written.push(if answer { spaced(&json!(content)) } else { spaced(&json!(args)) });
            let document = step(&schema, &written).unwrap();
            proptest::prop_assert_eq!(&document.next, &Next::Done);
            let value: Value = serde_json::from_str(&document.prefix).unwrap();
            let validator = jsonschema::validator_for(&schema).unwrap();
            proptest::prop_assert!(validator.is_valid(&value), "{}", document.prefix);
            proptest::prop_assert_eq!(value["thought"].as_str(), Some(thought.as_str()));
        }

        /// A part that is not one of the choices, or more parts than the document has, is
        /// no document (never a panic).
        #[test]
        fn parts_the_walk_cannot_take_are_refused(parts in proptest::collection::vec("\\PC{0,12}", 0..6)) {
            let schema = turn();
            if let Some(step) = step(&schema, &parts) {
                proptest::prop_assert!(step.prefix.starts_with(r#"{"thought":"#), "{}", step.prefix);
            }
            let _ = segment(&schema, &parts);
        }
    }

    #[test]
    fn a_string_part_is_closed_where_it_stops() {
        let schema = turn();
        let first = segment(&schema, &[]).unwrap();
        let closed = first.closed(r#" "Run it, run it"#).unwrap();
        assert!(closed.starts_with(r#"root ::= "\"" ",""#), "{closed}");
        // Inside an escape, or no string at all: none.
        assert_eq!(first.closed(r#" "a \"#), None);
        assert_eq!(first.closed("no quote"), None);
        let choice = segment(&schema, &[r#" "x""#.to_owned()]).unwrap();
        assert_eq!(choice.closed(r#" "run_script"#), None);
    }

    #[test]
    fn an_array_of_objects_has_no_stop_word() {
        // A plan's steps: each step's `["csv-summary"]}` holds the array's own closing `]}`,
        // where the server would stop in the middle of the part.
        let plan = json!({
            "type": "object",
            "properties": {
                "steps": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"names": {"type": "array", "items": {"enum": ["csv-summary"]}}},
                    "required": ["names"], "additionalProperties": false}},
            },
            "required": ["steps"], "additionalProperties": false,
        });
        let steps = segment(&plan, &[]).unwrap();
        assert_eq!(steps.stop, None);
        // An array of plain strings or of enum values keeps its stop word.
        let flat = |items: Value| {
            json!({"type": "object", "properties": {"args": {"type": "array", "items": items}},
                   "required": ["args"], "additionalProperties": false})
        };
        for items in
            [json!({"type": "string"}), json!({"enum": ["a", "b"]}), json!({"type": "integer"})]
        {
            assert_eq!(segment(&flat(items), &[]).unwrap().stop.as_deref(), Some("]}"));
        }
        assert_eq!(
            segment(&flat(json!({"type": "array", "items": {"type": "string"}})), &[])
                .unwrap()
                .stop,
            None
        );
    }

    #[test]
    fn each_part_stops_at_its_end_and_a_stop_inside_a_string_goes_on() {
        let schema = turn();
        let first = segment(&schema, &[]).unwrap();
        assert_eq!(first.stop.as_deref(), Some(r#"","#));
        let whole = |text: &str| Stopped::Whole(text.to_owned());
        assert_eq!(first.stopped(r#" "Convert it."#), whole(r#" "Convert it.","#));
        // An escaped backslash before the quote: the string's end.
        assert_eq!(first.stopped(r#" "a \\"#), whole(r#" "a \\","#));
        // An escaped quote: inside the string, 9 of its 300 characters written.
        let Stopped::Inside(rest) = first.stopped(r#" "Say \"hi\"#) else { panic!() };
        assert!(rest.starts_with(r#"root ::= char{0,291} "\"" ",""#), "{rest}");
        assert!(rest.contains("char ::= "), "{rest}");
        // At the bound, only the closing quote is left; past it, nothing can follow.
        let full = format!(" \"{}\\", "a".repeat(298));
        let Stopped::Inside(rest) = first.stopped(&full) else { panic!() };
        assert!(rest.starts_with(r#"root ::= "\"" ",""#), "{rest}");
        let over = format!(" \"{}\\", "a".repeat(299));
        assert_eq!(first.stopped(&over), Stopped::Cut);

        let written = parts(&[r#" "Convert it.""#]);
        let second = segment(&schema, &written).unwrap();
        assert_eq!(second.stop.as_deref(), Some(r#"","#));
        assert_eq!(second.stopped(r#" "run_script"#), whole(r#" "run_script","#));
        assert_eq!(second.stopped(r#" "run_scr"#), Stopped::Cut);

        let mut written = written;
        written.push(r#" "run_script""#.to_owned());
        let third = segment(&schema, &written).unwrap();
        assert_eq!(third.stop.as_deref(), Some("]}}}"));
        assert_eq!(third.stopped(r#" ["5", "mi""#), whole(r#" ["5", "mi"]}}}"#));
        // The word inside an argument: an array has no grammar for its rest.
        assert_eq!(third.stopped(r#" ["a"#), Stopped::Cut);

        let answer = parts(&[r#" "Done.""#, r#" "final_answer""#]);
        assert_eq!(segment(&schema, &answer).unwrap().stop.as_deref(), Some(r#""}}}"#));
    }

    #[test]
    fn a_choice_stops_only_where_its_end_tells_it() {
        let choices = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(choice, tail)| ((*choice).to_owned(), (*tail).to_owned())).collect()
        };
        let same = choices(&[(r#" "a""#, ","), (r#" "bc""#, ",")]);
        assert_eq!(choice_stop(&same).as_deref(), Some(r#"","#));
        assert_eq!(choice_stop(&choices(&[(r#" "a""#, ","), (r#" "b""#, "}")])), None);
        // A choice that holds the word before its end would stop there.
        assert_eq!(choice_stop(&choices(&[(r#" "a\",b""#, ","), (r#" "c""#, ",")])), None);
        assert_eq!(choice_stop(&choices(&[(" 1", ","), (" 2", ",")])), None);
        assert_eq!(choice_stop(&choices(&[(r#" "a""#, "")])), None);
    }

    proptest::proptest! {
        /// Whatever thought the model writes (quotes, backslashes and commas in it), a server
        /// that stops at every `",` it meets gives, told and gone on from, the whole thought.
        #[test]
        fn a_thought_stopped_at_every_stop_word_comes_back_whole(thought in "[a \"\\\\,.]{0,40}") {
            let first = segment(&turn(), &[]).unwrap();
            let word = first.stop.clone().unwrap();
            let written = format!(" {},", serde_json::to_string(&thought).unwrap());
            let (mut text, mut rest) = (String::new(), written.as_str());
            loop {
                let at = rest.find(&word).unwrap();
                text.push_str(&rest[..at]);
                rest = &rest[at + word.len()..];
                match first.stopped(&text) {
                    Stopped::Whole(whole) => {
                        proptest::prop_assert_eq!(&whole, &written);
                        proptest::prop_assert!(rest.is_empty());
                        break;
                    }
                    Stopped::Inside(_) => text.push_str(&word),
                    Stopped::Cut => proptest::prop_assert!(false, "cut at {text}"),
                }
            }
        }

        /// Any text, told: never a panic.
        #[test]
        fn any_stopped_text_is_told_without_a_panic(text in "\\PC{0,30}") {
            let first = segment(&turn(), &[]).unwrap();
            let _ = first.stopped(&text);
        }
    }

    #[test]
    fn a_literal_with_quotes_is_escaped_in_the_grammar() {
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
