//! Bounded output capture: keep the head and the tail, count what was dropped in between.

use std::collections::VecDeque;

/// Keeps at most `limit` bytes of a stream: the first half and the last half.
///
/// Memory stays bounded by `limit` however much the command writes; the total byte and line
/// counts are exact.
#[derive(Debug, Clone)]
pub struct HeadTailBuffer {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_limit: usize,
    tail_limit: usize,
    total_bytes: u64,
    omitted_lines: u64,
}

/// A captured stream, ready for the model: text with an elision marker and the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedText {
    /// Head + marker + tail, decoded as UTF-8 with invalid sequences replaced.
    pub text: String,
    /// Whether bytes were dropped.
    pub truncated: bool,
    /// Bytes the command wrote.
    pub total_bytes: u64,
    /// Bytes kept.
    pub retained_bytes: u64,
    /// Bytes dropped.
    pub omitted_bytes: u64,
    /// Newline-terminated lines dropped.
    pub omitted_lines: u64,
}

impl HeadTailBuffer {
    /// A buffer keeping at most `limit` bytes (half head, half tail).
    pub fn new(limit: usize) -> HeadTailBuffer {
        let head_limit = limit / 2;
        let tail_limit = limit - head_limit;
        HeadTailBuffer {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_limit,
            tail_limit,
            total_bytes: 0,
            omitted_lines: 0,
        }
    }

    /// Appends a chunk of output.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total_bytes += chunk.len() as u64;
        let head_room = self.head_limit - self.head.len();
        if head_room > 0 {
            let taken = head_room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..taken]);
            chunk = &chunk[taken..];
        }
        if chunk.is_empty() {
            return;
        }
        if chunk.len() >= self.tail_limit {
            let dropped = chunk.len() - self.tail_limit;
            self.omitted_lines += count_newlines_in_deque(&self.tail, self.tail.len());
            self.omitted_lines += count_newlines(&chunk[..dropped]);
            self.tail.clear();
            self.tail.extend(&chunk[dropped..]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_limit);
        self.omitted_lines += count_newlines_in_deque(&self.tail, overflow);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Bytes written so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The captured text with an elision marker stating the omitted bytes and lines.
    pub fn finish(&self) -> CapturedText {
        let retained = (self.head.len() + self.tail.len()) as u64;
        let omitted_bytes = self.total_bytes - retained;
        let (tail_first, tail_second) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(tail_first);
        tail.extend_from_slice(tail_second);
        let text = if omitted_bytes > 0 {
            format!(
                "{}\n[... {omitted_bytes} bytes ({} lines) omitted ...]\n{}",
                String::from_utf8_lossy(&self.head),
                self.omitted_lines,
                String::from_utf8_lossy(&tail)
            )
        } else {
            // Nothing dropped: decode as one stream so a character across the halves survives.
            let mut whole = self.head.clone();
            whole.extend_from_slice(&tail);
            String::from_utf8_lossy(&whole).into_owned()
        };
        CapturedText {
            text,
            truncated: omitted_bytes > 0,
            total_bytes: self.total_bytes,
            retained_bytes: retained,
            omitted_bytes,
            omitted_lines: self.omitted_lines,
        }
    }
}

fn count_newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|byte| **byte == b'\n').count() as u64
}

fn count_newlines_in_deque(bytes: &VecDeque<u8>, first: usize) -> u64 {
    bytes.range(..first).filter(|byte| **byte == b'\n').count() as u64
}

/// Keeps the last `limit` bytes of a stream (a service's stderr, read for as long as it runs).
#[derive(Debug, Clone)]
pub(crate) struct TailBuffer {
    tail: VecDeque<u8>,
    limit: usize,
    total_bytes: u64,
}

impl TailBuffer {
    pub(crate) fn new(limit: usize) -> TailBuffer {
        TailBuffer { tail: VecDeque::new(), limit, total_bytes: 0 }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len() as u64;
        let chunk = &chunk[chunk.len().saturating_sub(self.limit)..];
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.limit);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Bytes written so far.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The kept bytes as text (invalid UTF-8 replaced), with a marker when earlier bytes were
    /// dropped.
    pub(crate) fn text(&self) -> String {
        let (first, second) = self.tail.as_slices();
        let mut bytes = Vec::with_capacity(self.tail.len());
        bytes.extend_from_slice(first);
        bytes.extend_from_slice(second);
        let text = String::from_utf8_lossy(&bytes);
        let dropped = self.total_bytes - self.tail.len() as u64;
        if dropped > 0 {
            format!("[... {dropped} earlier bytes omitted ...]\n{text}")
        } else {
            text.into_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_buffer_keeps_the_last_bytes_and_says_how_many_went() {
        let mut buffer = TailBuffer::new(4);
        buffer.push(b"ab");
        assert_eq!(buffer.text(), "ab");
        buffer.push(b"cdef");
        assert_eq!(buffer.text(), "[... 2 earlier bytes omitted ...]\ncdef");
        buffer.push(b"0123456789");
        assert_eq!(buffer.text(), "[... 12 earlier bytes omitted ...]\n6789");
        buffer.push(b"x");
        assert_eq!(buffer.text(), "[... 13 earlier bytes omitted ...]\n789x");
    }
}
