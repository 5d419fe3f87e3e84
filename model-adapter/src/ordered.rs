//! Request bodies as compact JSON, with the property order a schema asks for.
//!
//! JSON Schema's `properties` is unordered and `serde_json` keeps object keys sorted, but the
//! order in which a schema lists its properties is the order in which constrained decoders
//! make the model write them: llama.cpp builds its grammar in that order and OpenAI's
//! structured outputs follow it. A model that must write `action` before `thought` cannot
//! reason before it acts. A schema object may therefore carry `propertyOrdering` (the keyword
//! Gemini's API defines): an array of property names written first, in that order, before the
//! other properties (sorted). The keyword itself is not sent. Everything else is written
//! exactly as `serde_json::to_vec` writes it.

use serde_json::{Map, Value};

/// The keyword that orders a schema object's `properties`.
pub const PROPERTY_ORDERING: &str = "propertyOrdering";

/// `value` as compact JSON bytes, `properties` in `propertyOrdering` order where given.
pub(crate) fn to_vec(value: &Value) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out)?;
    Ok(out)
}

fn write(value: &Value, out: &mut Vec<u8>) -> serde_json::Result<()> {
    match value {
        Value::Object(map) => write_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write(item, out)?;
            }
            out.push(b']');
            Ok(())
        }
        scalar => serde_json::to_writer(out, scalar),
    }
}

/// The names an object's `propertyOrdering` lists, when it is an array of strings.
fn ordering(map: &Map<String, Value>) -> Option<Vec<&str>> {
    map.get(PROPERTY_ORDERING)?.as_array()?.iter().map(Value::as_str).collect()
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let order = ordering(map);
    out.push(b'{');
    let mut first = true;
    for (key, value) in map {
        if order.is_some() && key == PROPERTY_ORDERING {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        match (key.as_str(), &order, value) {
            ("properties", Some(order), Value::Object(properties)) => {
                write_ordered(properties, order, out)?;
            }
            _ => write(value, out)?,
        }
    }
    out.push(b'}');
    Ok(())
}

fn write_ordered(
    properties: &Map<String, Value>,
    order: &[&str],
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    let listed = order.iter().filter(|name| properties.contains_key(**name));
    let mut seen: Vec<&str> = Vec::new();
    let mut keys: Vec<&str> = Vec::new();
    for name in listed {
        if !seen.contains(name) {
            seen.push(name);
            keys.push(name);
        }
    }
    keys.extend(properties.keys().map(String::as_str).filter(|key| !seen.contains(key)));
    out.push(b'{');
    for (index, key) in keys.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        if let Some(value) = properties.get(*key) {
            write(value, out)?;
        }
    }
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn text(value: &Value) -> String {
        String::from_utf8(to_vec(value).unwrap()).unwrap()
    }

    #[test]
    fn properties_follow_the_ordering_and_the_keyword_is_dropped() {
        let schema = json!({
            "type": "object",
            "propertyOrdering": ["thought", "action", "missing", "thought"],
            "properties": {
                "action": {"type": "object", "propertyOrdering": ["type", "args"],
                           "properties": {"args": {"type": "object"}, "type": {"const": "x"}}},
                "plan": {"type": "string"},
                "thought": {"type": "string", "maxLength": 3},
            },
            "required": ["action"],
        });
        assert_eq!(
            text(&schema),
            r#"{"properties":{"thought":{"maxLength":3,"type":"string"},"action":{"properties":{"type":{"const":"x"},"args":{"type":"object"}},"type":"object"},"plan":{"type":"string"}},"required":["action"],"type":"object"}"#
        );
        // The result still means the same schema, minus the keyword.
        let back: Value = serde_json::from_slice(&to_vec(&schema).unwrap()).unwrap();
        assert_eq!(back["properties"]["plan"], schema["properties"]["plan"]);
        assert!(back.get(PROPERTY_ORDERING).is_none());
    }

    #[test]
    fn a_property_named_like_the_keyword_is_kept() {
        let schema = json!({"propertyOrdering": "not an array", "properties": {"propertyOrdering": {"type": "string"}}});
        assert_eq!(text(&schema), serde_json::to_string(&schema).unwrap());
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-zA-Z\"\\\\ ]{0,6}", inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn without_the_keyword_the_bytes_are_serde_jsons(value in any_json()) {
            prop_assert_eq!(to_vec(&value).unwrap(), serde_json::to_vec(&value).unwrap());
        }
    }
}
