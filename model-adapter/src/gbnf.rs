//! A JSON Schema as a llama.cpp GBNF grammar that writes the document on one line.
//!
//! llama.cpp turns a `response_format` json_schema into a grammar whose separators allow
//! optional whitespace (`space ::= | " " | "\n" [ \t]{0,20}`), and a small model then writes
//! the document pretty-printed: on Qwen2.5-Coder a `run_script` action took 79 tokens
//! pretty-printed, 65 on one line, every one of them a generation step. The grammar built here
//! is the one llama.cpp would build, property for property (required properties first, in the
//! order the schema lists them, then the optional ones, any subset in order), with `": "` after
//! each key and `", "` between members and items (the `colon` and `comma` rules) and no other
//! whitespace. No spaces at all (53 tokens) cost the 1.5B its arguments (`[\"12\",\":mi\"`):
//! the separators Python's `json.dumps` writes are the ones it knows.
//!
//! The keywords covered are the ones structured actions use: `type` (object, array, string,
//! integer, number, boolean, null), `properties`, `required`, `additionalProperties: false`,
//! `propertyOrdering`, `items`, `minItems`, `maxItems`, `minLength`, `maxLength`, `enum`,
//! `const`, `anyOf`, `oneOf`, and a string's `pattern` when it is one [`pattern`] covers
//! (anchored, classes, groups, bounded repeats; a `minLength`/`maxLength` beside it is left to
//! the validator, as llama.cpp leaves it); `description`, `title`, `default` and `examples` are
//! ignored. Anything else (`$ref`, `allOf`, numeric bounds, extra properties beside declared
//! ones, a pattern with lookaround, …) makes [`one_line_grammar`] return `None`, and the schema
//! goes as `response_format`.

pub(crate) mod jump;
mod pattern;

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::ordered::PROPERTY_ORDERING;

/// Deeper schemas are not converted.
const MAX_DEPTH: usize = 32;

/// Keywords that say nothing about the grammar.
const ANNOTATIONS: &[&str] =
    &["description", "title", "default", "examples", "$schema", "$comment"];

/// The primitive rules, named as llama.cpp names them.
const PRIMITIVES: &str = r#"char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" (string colon value (comma string colon value)*)? "}"
array ::= "[" (value (comma value)*)? "]"
colon ::= ": "
comma ::= ", "
"#;

/// The GBNF grammar (root rule `root`) that admits exactly the one-line JSON documents
/// `schema` admits (separators `": "` and `", "`), or `None` when the schema uses a keyword this conversion does not cover.
pub(crate) fn one_line_grammar(schema: &Value) -> Option<String> {
    let mut builder = Builder::default();
    let root = builder.visit(schema, 0)?;
    let mut grammar = format!("root ::= {root}\n");
    for (name, body) in &builder.rules {
        let _ = writeln!(grammar, "{name} ::= {body}");
    }
    grammar.push_str(PRIMITIVES);
    Some(grammar)
}

#[derive(Default)]
struct Builder {
    /// Rules in the order they were made.
    rules: Vec<(String, String)>,
    /// Rule name by body, so equal sub-schemas share a rule.
    by_body: HashMap<String, String>,
}

impl Builder {
    /// A rule named for `body` (an existing one when the body was seen before).
    fn rule(&mut self, body: String) -> String {
        if let Some(name) = self.by_body.get(&body) {
            return name.clone();
        }
        let name = format!("r{}", self.rules.len());
        self.by_body.insert(body.clone(), name.clone());
        self.rules.push((name.clone(), body));
        name
    }

    /// The expression (a rule name) for `schema`.
    fn visit(&mut self, schema: &Value, depth: usize) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        let map = match schema {
            Value::Bool(true) => return Some("value".to_owned()),
            Value::Object(map) => map,
            _ => return None,
        };
        let known = |key: &str| {
            ANNOTATIONS.contains(&key)
                || matches!(
                    key,
                    "type"
                        | "properties"
                        | "required"
                        | "additionalProperties"
                        | "items"
                        | "prefixItems"
                        | "minItems"
                        | "maxItems"
                        | "minLength"
                        | "maxLength"
                        | "pattern"
                        | "enum"
                        | "const"
                        | "anyOf"
                        | "oneOf"
                )
                || key == PROPERTY_ORDERING
        };
        if !map.keys().all(|key| known(key)) {
            return None;
        }
        if let Some(value) = map.get("const") {
            let literal = literal(value)?;
            return Some(self.rule(literal));
        }
        if let Some(values) = map.get("enum") {
            let values = values.as_array().filter(|values| !values.is_empty())?;
            let alternatives: Option<Vec<String>> = values.iter().map(literal).collect();
            return Some(self.rule(alternatives?.join(" | ")));
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(variants) = map.get(keyword) {
                // Alternatives beside a type or properties of their own: not covered.
                if map.contains_key("type") || map.contains_key("properties") {
                    return None;
                }
                let variants = variants.as_array().filter(|variants| !variants.is_empty())?;
                let alternatives: Option<Vec<String>> =
                    variants.iter().map(|variant| self.visit(variant, depth + 1)).collect();
                return Some(self.rule(alternatives?.join(" | ")));
            }
        }
        let kind = match map.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(_) => return None,
            None if map.contains_key("properties") => "object",
            None if map.contains_key("items") => "array",
            None => return Some("value".to_owned()),
        };
        match kind {
            "object" => self.object(map, depth),
            "array" => self.array(map, depth),
            "string" => {
                if let Some(pattern) = map.get("pattern") {
                    let contents = pattern::contents(pattern.as_str()?)?;
                    return Some(self.rule(format!(r#""\"" {contents} "\"""#)));
                }
                let min = count(map.get("minLength"))?.unwrap_or(0);
                match count(map.get("maxLength"))? {
                    None if min == 0 => Some("string".to_owned()),
                    None => Some(self.rule(format!(r#""\"" char{{{min},}} "\"""#))),
                    Some(max) if max < min => None,
                    Some(max) => Some(self.rule(format!(r#""\"" char{{{min},{max}}} "\"""#))),
                }
            }
            "integer" | "number" | "boolean" | "null" => Some(kind.to_owned()),
            _ => None,
        }
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Option<String> {
        let empty = Map::new();
        let properties = match map.get("properties") {
            Some(Value::Object(properties)) => properties,
            Some(_) => return None,
            None => &empty,
        };
        let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
        if properties.is_empty() {
            return Some(if closed {
                self.rule(r#""{}""#.to_owned())
            } else {
                "object".to_owned()
            });
        }
        if !closed {
            return None;
        }
        let mut written = Vec::new();
        for (name, schema, needed) in members(map)? {
            let value = self.visit(schema, depth + 1)?;
            let key = literal(&Value::String(name.to_owned()))?;
            written.push((needed, format!(r#"{key} colon {value}"#)));
        }
        // llama.cpp's layout: the required members in order, then the optional ones, each
        // present or not, in order.
        let (must, may): (Vec<_>, Vec<_>) = written.into_iter().partition(|(needed, _)| *needed);
        let must: Vec<String> = must.into_iter().map(|(_, member)| member).collect();
        let may: Vec<String> = may.into_iter().map(|(_, member)| member).collect();
        let mut body = String::from(r#""{" "#);
        body.push_str(&must.join(" comma "));
        if !may.is_empty() {
            if must.is_empty() {
                // The first optional member present has no comma before it.
                let firsts: Vec<String> = (0..may.len())
                    .map(|first| {
                        let mut alternative = may[first].clone();
                        for later in &may[first + 1..] {
                            let _ = write!(alternative, " (comma {later})?");
                        }
                        alternative
                    })
                    .collect();
                let _ = write!(body, "({})?", firsts.join(" | "));
            } else {
                for member in &may {
                    let _ = write!(body, " (comma {member})?");
                }
            }
        }
        body.push_str(r#" "}""#);
        Some(self.rule(body))
    }

    fn array(&mut self, map: &Map<String, Value>, depth: usize) -> Option<String> {
        if let Some(prefix) = map.get("prefixItems") {
            return self.tuple(map, prefix, depth);
        }
        let item = match map.get("items") {
            Some(items) => self.visit(items, depth + 1)?,
            None => "value".to_owned(),
        };
        let min = count(map.get("minItems"))?.unwrap_or(0);
        let max = count(map.get("maxItems"))?;
        let body = match max {
            Some(max) if max < min => return None,
            Some(0) => r#""[]""#.to_owned(),
            Some(max) if min == 0 => {
                format!(r#""[" ({item} (comma {item}){{0,{}}})? "]""#, max - 1)
            }
            Some(max) => format!(r#""[" {item} (comma {item}){{{},{}}} "]""#, min - 1, max - 1),
            None if min == 0 => format!(r#""[" ({item} (comma {item})*)? "]""#),
            None => format!(r#""[" {item} (comma {item}){{{},}} "]""#, min - 1),
        };
        Some(self.rule(body))
    }

    /// A closed tuple (`prefixItems` with `items: false`): exactly its items, each by its own
    /// schema. One that admits more items, or fewer than all (`minItems` below the count), is
    /// not covered.
    fn tuple(&mut self, map: &Map<String, Value>, prefix: &Value, depth: usize) -> Option<String> {
        let prefix = prefix.as_array()?;
        if map.get("items") != Some(&Value::Bool(false))
            || count(map.get("minItems"))?.is_some_and(|min| min != prefix.len() as u64)
            || count(map.get("maxItems"))?.is_some_and(|max| max != prefix.len() as u64)
        {
            return None;
        }
        let items: Option<Vec<String>> =
            prefix.iter().map(|item| self.visit(item, depth + 1)).collect();
        let items = items?;
        if items.is_empty() {
            return Some(self.rule(r#""[]""#.to_owned()));
        }
        Some(self.rule(format!(r#""[" {} "]""#, items.join(" comma "))))
    }
}

/// An object's member: its key, its schema, whether it is required.
type Member<'a> = (&'a str, &'a Value, bool);

/// A closed object's members in the order its document writes them: the required ones first,
/// then the optional ones, each group in the order the request body lists them (see `ordered`:
/// `propertyOrdering` first, then the others as serde_json keeps them). `None` for an object
/// with no properties, open to others, or requiring one it does not declare.
fn members(map: &Map<String, Value>) -> Option<Vec<Member<'_>>> {
    let properties = map.get("properties")?.as_object()?;
    if map.get("additionalProperties") != Some(&Value::Bool(false)) || properties.is_empty() {
        return None;
    }
    let required: Vec<&str> = match map.get("required") {
        Some(Value::Array(names)) => names.iter().map(Value::as_str).collect::<Option<_>>()?,
        Some(_) => return None,
        None => Vec::new(),
    };
    if required.iter().any(|name| !properties.contains_key(*name)) {
        return None;
    }
    let listed: Vec<&str> = match map.get(PROPERTY_ORDERING) {
        Some(Value::Array(names)) => names.iter().map(Value::as_str).collect::<Option<_>>()?,
        Some(_) => return None,
        None => Vec::new(),
    };
    let mut order: Vec<&str> =
        listed.iter().copied().filter(|name| properties.contains_key(*name)).collect();
    order.extend(properties.keys().map(String::as_str).filter(|name| !listed.contains(name)));
    let (mut must, may): (Vec<_>, Vec<_>) = order
        .into_iter()
        .map(|name| (name, &properties[name], required.contains(&name)))
        .partition(|(_, _, needed)| *needed);
    must.extend(may);
    Some(must)
}

/// A `minLength`-style count: `Some(None)` when absent, `None` when not a small whole number.
fn count(value: Option<&Value>) -> Option<Option<u64>> {
    match value {
        None => Some(None),
        Some(value) => value.as_u64().filter(|count| *count <= 100_000).map(Some),
    }
}

/// `value` written as compact JSON (a `const` or `enum` member; strings in practice), as a
/// GBNF string literal.
fn literal(value: &Value) -> Option<String> {
    serde_json::to_string(value).ok().map(|json| quoted(&json))
}

/// `text` as a GBNF string literal.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(schema: &Value) -> String {
        let grammar = one_line_grammar(schema).unwrap();
        grammar.split(PRIMITIVES).next().unwrap().to_owned()
    }

    #[test]
    fn an_action_document_is_one_line_and_keeps_the_schemas_order() {
        let schema = json!({
            "type": "object",
            "properties": {
                "thought": {"type": "string", "maxLength": 300},
                "action": {"anyOf": [
                    {"type": "object",
                     "properties": {"type": {"const": "final_answer"},
                                    "args": {"type": "object",
                                             "properties": {"content": {"type": "string"}},
                                             "required": ["content"],
                                             "additionalProperties": false}},
                     "required": ["type", "args"], "additionalProperties": false},
                    {"type": "object",
                     "properties": {"type": {"const": "run_script"},
                                    "args": {"type": "object",
                                             "properties": {
                                                 "skill": {"enum": ["csv"]},
                                                 "args": {"type": "array",
                                                          "items": {"type": "string"},
                                                          "minItems": 1, "maxItems": 3}},
                                             "required": ["skill", "args"],
                                             "additionalProperties": false}},
                     "required": ["type", "args"], "additionalProperties": false}
                ]},
                "plan": {"type": "object"}
            },
            "required": ["thought", "action"],
            "propertyOrdering": ["thought", "action"],
            "additionalProperties": false
        });
        // One line; thought, then action, then the optional plan; the variants'
        // members in the order the request body lists them (sorted, as serde_json keeps them).
        let expected = r#"root ::= r10
r0 ::= "\"" char{0,300} "\""
r1 ::= "{" "\"content\"" colon string "}"
r2 ::= "\"final_answer\""
r3 ::= "{" "\"args\"" colon r1 comma "\"type\"" colon r2 "}"
r4 ::= "[" string (comma string){0,2} "]"
r5 ::= "\"csv\""
r6 ::= "{" "\"args\"" colon r4 comma "\"skill\"" colon r5 "}"
r7 ::= "\"run_script\""
r8 ::= "{" "\"args\"" colon r6 comma "\"type\"" colon r7 "}"
r9 ::= r3 | r8
r10 ::= "{" "\"thought\"" colon r0 comma "\"action\"" colon r9 (comma "\"plan\"" colon object)? "}"
"#;
        assert_eq!(rules(&schema), expected);
    }

    #[test]
    fn literals_are_escaped_and_unicode_kept() {
        assert_eq!(literal(&json!("a\"b\\c\nd")).unwrap(), r#""\"a\\\"b\\\\c\\nd\"""#);
        assert_eq!(literal(&json!("café")).unwrap(), r#""\"café\"""#);
        assert_eq!(literal(&json!(3)).unwrap(), r#""3""#);
        assert_eq!(literal(&json!(false)).unwrap(), r#""false""#);
    }

    #[test]
    fn optional_members_with_none_required_take_no_leading_comma() {
        let text = rules(&json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
            "additionalProperties": false
        }));
        assert!(
            text.contains(r#"r0 ::= "{" ("\"a\"" colon integer (comma "\"b\"" colon boolean)? | "\"b\"" colon boolean)? "}""#),
            "{text}"
        );
    }

    #[test]
    fn closed_tuples_take_each_item_in_its_place() {
        let schema = json!({"type": "array", "items": false, "minItems": 3, "maxItems": 3,
            "prefixItems": [{"type": "string"}, {"enum": ["kg", "lb"]}, {"type": "string"}]});
        let text = rules(&schema);
        assert!(text.contains(r#"r0 ::= "\"kg\"" | "\"lb\"""#), "{text}");
        assert!(text.contains(r#"r1 ::= "[" string comma r0 comma string "]""#), "{text}");
        // Open (more items may follow) or shorter than its items: not covered.
        let open = json!({"type": "array", "prefixItems": [{"type": "string"}]});
        assert_eq!(one_line_grammar(&open), None);
        let short = json!({"type": "array", "items": false, "minItems": 1,
            "prefixItems": [{"type": "string"}, {"type": "string"}]});
        assert_eq!(one_line_grammar(&short), None);
    }

    #[test]
    fn arrays_take_their_bounds() {
        let item = json!({"type": "string"});
        let text = |min: Option<u64>, max: Option<u64>| {
            let mut schema = json!({"type": "array", "items": item});
            if let Some(min) = min {
                schema["minItems"] = json!(min);
            }
            if let Some(max) = max {
                schema["maxItems"] = json!(max);
            }
            rules(&schema).lines().nth(1).unwrap().to_owned()
        };
        assert_eq!(text(None, None), r#"r0 ::= "[" (string (comma string)*)? "]""#);
        assert_eq!(text(Some(2), None), r#"r0 ::= "[" string (comma string){1,} "]""#);
        assert_eq!(text(Some(1), Some(3)), r#"r0 ::= "[" string (comma string){0,2} "]""#);
        assert_eq!(text(None, Some(2)), r#"r0 ::= "[" (string (comma string){0,1})? "]""#);
        assert_eq!(text(None, Some(0)), r#"r0 ::= "[]""#);
        assert_eq!(one_line_grammar(&json!({"type": "array", "minItems": 3, "maxItems": 2})), None);
    }

    #[test]
    fn what_is_not_covered_is_refused() {
        for schema in [
            json!({"type": "string", "pattern": "^I"}), // not anchored at the end
            json!({"type": "string", "pattern": "^(?=I)I$"}),
            json!({"$ref": "#/$defs/a"}),
            json!({"allOf": [{"type": "string"}]}),
            json!({"type": "integer", "minimum": 0}),
            json!({"type": ["string", "null"]}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"],
                   "additionalProperties": false}),
            json!({"enum": []}),
            json!({"type": "tuple"}),
            json!(7),
        ] {
            assert_eq!(one_line_grammar(&schema), None, "{schema}");
        }
        // Deep nesting is refused, not recursed into without end.
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "array", "items": deep});
        }
        assert_eq!(one_line_grammar(&deep), None);
    }

    #[test]
    fn a_string_pattern_becomes_its_contents() {
        let text = rules(&json!({"type": "string", "maxLength": 300,
            "pattern": "^I (cannot|do not know)[^0-9\"]{0,4}$"}));
        assert_eq!(
            text.lines().nth(1).unwrap(),
            r#"r0 ::= "\"" "I" " " ("c" "a" "n" "n" "o" "t" | "d" "o" " " "n" "o" "t" " " "k" "n" "o" "w") [^0-9\x22"\\\x7F\x00-\x1F]{0,4} "\"""#
        );
    }

    #[test]
    fn equal_sub_schemas_share_a_rule() {
        let text = rules(&json!({"type": "array", "items": {"anyOf": [
            {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 5}]}}));
        assert_eq!(text.matches("char{0,5}").count(), 1, "{text}");
    }
}
