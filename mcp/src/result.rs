//! Tool results: rmcp's `CallToolResult` turned into text, structured content and blobs.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The result of one tool call, as the agent records it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The server marked the result as an error (`isError`): an observation the model can act
    /// on, not a failure of the call.
    pub is_error: bool,
    /// The text parts, joined by newlines (plus embedded text resources and resource links as
    /// short lines).
    pub text: String,
    /// The `structuredContent`, when the server sent one.
    pub structured: Option<serde_json::Value>,
    /// Images, audio and embedded resources, decoded.
    pub blobs: Vec<Blob>,
}

/// Binary (or embedded) content of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// What the content is.
    pub kind: BlobKind,
    /// Its MIME type, when the server said.
    pub mime_type: Option<String>,
    /// The resource's URI (resources only).
    pub uri: Option<String>,
    /// The bytes (base64-decoded; a text resource's UTF-8 text).
    pub data: Vec<u8>,
}

/// The kind of a [`Blob`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlobKind {
    /// An `image` content part.
    Image,
    /// An `audio` content part.
    Audio,
    /// An embedded `resource` (text or blob).
    Resource,
}

/// Converts a result; a part whose base64 does not decode becomes a text line saying so (the
/// rest of the result stays usable).
pub(crate) fn convert(result: CallToolResult) -> CallResult {
    let mut lines = Vec::new();
    let mut undecodable = Vec::new();
    let mut blobs = Vec::new();
    let mut decoded =
        |kind: BlobKind, mime_type: Option<String>, uri: Option<String>, data: &str| {
            match decode_base64(data) {
                Some(bytes) => Some(Blob { kind, mime_type, uri, data: bytes }),
                None => {
                    let uri = uri.map(|uri| format!(" {uri}")).unwrap_or_default();
                    undecodable
                        .push(format!("[{kind:?} content{uri} was not valid base64; left out]"));
                    None
                }
            }
        };
    for block in result.content {
        match block {
            ContentBlock::Text(text) => lines.push(text.text),
            ContentBlock::Image(image) => {
                blobs.extend(decoded(BlobKind::Image, Some(image.mime_type), None, &image.data));
            }
            ContentBlock::Audio(audio) => {
                blobs.extend(decoded(BlobKind::Audio, Some(audio.mime_type), None, &audio.data));
            }
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
                    blobs.push(Blob {
                        kind: BlobKind::Resource,
                        mime_type,
                        uri: Some(uri),
                        data: text.into_bytes(),
                    });
                }
                ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
                    blobs.extend(decoded(BlobKind::Resource, mime_type, Some(uri), &blob));
                }
                other => lines.push(serde_json::to_string(&other).unwrap_or_default()),
            },
            ContentBlock::ResourceLink(link) => {
                lines.push(format!("[resource link: {} ({})]", link.uri, link.name));
            }
            other => {
                // Content kinds from newer protocol revisions: kept as their JSON so nothing is
                // silently lost.
                lines.push(serde_json::to_string(&other).unwrap_or_default());
            }
        }
    }
    lines.extend(undecodable);
    CallResult {
        is_error: result.is_error.unwrap_or(false),
        text: lines.join("\n"),
        structured: result.structured_content,
        blobs,
    }
}

/// Decodes standard base64 (RFC 4648, `+/`, padding optional, ASCII whitespace ignored; the
/// URL-safe alphabet `-_` is accepted too). `None` on any other character or a dangling bit.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut output = Vec::with_capacity(text.len() / 4 * 3);
    let mut accumulator = 0u32;
    let mut bits = 0u32;
    let mut padding = 0usize;
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => return None,
        };
        if padding > 0 {
            return None; // data after padding
        }
        accumulator = (accumulator << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            output.push((accumulator >> bits) as u8);
            accumulator &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero padding of a final partial group (2 or 4 bits).
    if bits >= 6 || accumulator != 0 || padding > 2 {
        return None;
    }
    Some(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("Zg==").unwrap(), b"f");
        assert_eq!(decode_base64("Zm8=").unwrap(), b"fo");
        assert_eq!(decode_base64("Zm9v").unwrap(), b"foo");
        assert_eq!(decode_base64("Zm9vYg").unwrap(), b"foob");
        assert_eq!(decode_base64("Zm9v\nYmFy").unwrap(), b"foobar");
        assert_eq!(decode_base64("_-8=").unwrap(), vec![0xff, 0xef]);
        assert_eq!(decode_base64("/+8=").unwrap(), vec![0xff, 0xef]);
        assert!(decode_base64("Zm9v!").is_none());
        assert!(decode_base64("Zg==Zg").is_none());
        assert!(decode_base64("Zh==").is_none(), "non-zero dangling bits");
        assert!(decode_base64("Z").is_none(), "six bits cannot end a byte");
    }

    /// Standard base64 with padding, for the round trip.
    fn encode(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut text = String::new();
        for chunk in bytes.chunks(3) {
            let group = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..4 {
                if i <= chunk.len() {
                    text.push(char::from(ALPHABET[((group >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    text.push('=');
                }
            }
        }
        text
    }

    proptest::proptest! {
        #[test]
        fn base64_round_trips(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let text = encode(&bytes);
            proptest::prop_assert_eq!(decode_base64(&text), Some(bytes.clone()));
            proptest::prop_assert_eq!(decode_base64(text.trim_end_matches('=')), Some(bytes));
        }

        #[test]
        fn base64_never_panics(text in "\\PC{0,64}") {
            let _ = decode_base64(&text);
        }
    }

    #[test]
    fn parts_become_text_structured_and_blobs() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "first"},
                {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
                {"type": "audio", "data": "AAEC", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "AQID"}},
                {"type": "resource_link", "uri": "file:///c", "name": "c"},
                {"type": "image", "data": "not base64!", "mimeType": "image/png"},
                {"type": "text", "text": "second"}
            ],
            "structuredContent": {"sum": 3},
            "isError": true
        }))
        .unwrap();
        let converted = convert(result);
        assert!(converted.is_error);
        assert_eq!(
            converted.text,
            "first\n[resource link: file:///c (c)]\nsecond\n[Image content was not valid base64; left out]"
        );
        assert_eq!(converted.structured, Some(serde_json::json!({"sum": 3})));
        let summary: Vec<_> = converted
            .blobs
            .iter()
            .map(|blob| {
                (blob.kind, blob.mime_type.as_deref(), blob.uri.as_deref(), blob.data.clone())
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (BlobKind::Image, Some("image/png"), None, vec![0x89, b'P', b'N', b'G']),
                (BlobKind::Audio, Some("audio/wav"), None, vec![0, 1, 2]),
                (BlobKind::Resource, Some("text/plain"), Some("file:///a.txt"), b"hello".to_vec()),
                (BlobKind::Resource, None, Some("mem://b"), vec![1, 2, 3]),
            ]
        );
    }
}
