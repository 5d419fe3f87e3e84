//! Server-sent events decoding, fed arbitrary byte chunks (the WHATWG event-stream rules).
//!
//! Lines end with `\n`, `\r\n` or a lone `\r`; a `\r` at the end of one chunk and a `\n` at the
//! start of the next are one line ending. A line is decoded as UTF-8 only once it is complete,
//! so a multi-byte character split across chunks arrives whole. `data:` lines accumulate (joined
//! by `\n`); an empty line dispatches the event; lines starting with `:` are comments
//! (keep-alives) and are dropped; a byte order mark before the first line is skipped. Each
//! input byte is examined once; the only buffer is the current unfinished line and the current
//! event's fields.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, or `message` when absent.
    pub event: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// The last `id:` field seen, if any.
    pub id: Option<String>,
}

/// Incremental decoder: [`feed`](SseDecoder::feed) chunks as they arrive, then
/// [`finish`](SseDecoder::finish) at end of stream.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    after_carriage_return: bool,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
    /// Whether a field line has been seen since the last dispatch.
    pending_fields: bool,
    /// Whether the first line has been processed (only it may start with a byte order mark).
    past_first_line: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Decodes `chunk`, appending every event it completes to `events`.
    pub fn feed(&mut self, mut chunk: &[u8], events: &mut Vec<SseEvent>) {
        if self.after_carriage_return {
            self.after_carriage_return = false;
            if let Some((b'\n', rest)) = chunk.split_first() {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            match chunk.iter().position(|byte| *byte == b'\n' || *byte == b'\r') {
                None => {
                    self.line.extend_from_slice(chunk);
                    return;
                }
                Some(end) => {
                    let ending = chunk[end];
                    if self.line.is_empty() {
                        self.process_line(&chunk[..end], events);
                    } else {
                        self.line.extend_from_slice(&chunk[..end]);
                        let line = std::mem::take(&mut self.line);
                        self.process_line(&line, events);
                        self.line = line;
                        self.line.clear();
                    }
                    chunk = &chunk[end + 1..];
                    if ending == b'\r' {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            Some(_) => {}
                            None => self.after_carriage_return = true,
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream. A final event whose lines were complete but which lacks the blank line
    /// is dispatched; an unfinished last line is discarded (it was cut off).
    pub fn finish(&mut self, events: &mut Vec<SseEvent>) {
        self.line.clear();
        self.after_carriage_return = false;
        if self.pending_fields {
            self.dispatch(events);
        }
    }

    fn process_line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        let line = if self.past_first_line {
            line
        } else {
            self.past_first_line = true;
            line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line)
        };
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|byte| *byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                let value = value.strip_prefix(b" ").unwrap_or(value);
                (&line[..colon], value)
            }
            None => (line, &b""[..]),
        };
        self.pending_fields = true;
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"id" => self.id = Some(String::from_utf8_lossy(value).into_owned()),
            // `retry:` and unknown fields are ignored, as the standard says.
            _ => {}
        }
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        self.pending_fields = false;
        let event = std::mem::take(&mut self.event);
        if !self.has_data {
            return;
        }
        self.has_data = false;
        events.push(SseEvent {
            event: if event.is_empty() { "message".to_owned() } else { event },
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn decode_in_chunks(input: &[u8], chunk_size: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in input.chunks(chunk_size) {
            decoder.feed(chunk, &mut events);
        }
        decoder.finish(&mut events);
        events
    }

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent { event: name.to_owned(), data: data.to_owned(), id: None }
    }

    #[test]
    fn every_line_ending_and_every_split_gives_the_same_events() {
        let text = "event: a\ndata: héllo 🌍\ndata:two\n\n: keep-alive\n\ndata: [DONE]\n\n";
        let expected = vec![event("a", "héllo 🌍\ntwo"), event("message", "[DONE]")];
        for ending in ["\n", "\r\n", "\r"] {
            let input = text.replace('\n', ending);
            for chunk_size in 1..input.len() {
                assert_eq!(decode_in_chunks(input.as_bytes(), chunk_size), expected, "{ending:?}");
            }
        }
    }

    #[test]
    fn an_unfinished_last_line_is_dropped_but_complete_fields_are_dispatched() {
        assert_eq!(decode_in_chunks(b"data: a\n\ndata: {\"cut", 4), vec![event("message", "a")]);
        assert_eq!(decode_in_chunks(b"data: a\ndata: b\n", 3), vec![event("message", "a\nb")]);
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped_even_when_split() {
        let input = "\u{feff}data: a\n\n\u{feff}data: b\n\n";
        for chunk_size in 1..4 {
            assert_eq!(
                decode_in_chunks(input.as_bytes(), chunk_size),
                vec![event("message", "a")],
                "the second mark is not at the stream's start: its line is an unknown field"
            );
        }
    }

    #[test]
    fn ids_and_field_without_colon() {
        let events = decode_in_chunks(b"id: 7\ndata\n\n", 2);
        assert_eq!(
            events,
            vec![SseEvent { event: "message".into(), data: String::new(), id: Some("7".into()) }]
        );
    }
}
