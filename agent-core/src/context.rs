//! Context packing and compaction (seed 002 §7.2–7.3).
//!
//! The request of every turn is laid out so its prefix stays the same from turn to turn, which
//! is what prompt caches (llama.cpp's slot cache, OpenAI's and Anthropic's prompt caching)
//! reuse:
//!
//! 1. system: the protocol and the skill catalog (fixed for the run);
//! 2. user: the request;
//! 3. the transcript: each turn's answer and its observation (loaded skill bodies arrive here,
//!    as the observation of `select_skills`), only ever appended;
//! 4. a trailing note, rebuilt every turn and never kept: plan, budget, selected skills,
//!    allowed actions and the task restated.
//!
//! Compaction is the only rewrite. When the packed context passes `compact_at` of
//! `max_context_chars`, observations older than the last `keep_recent_observations` are cut to
//! their first line plus their id and file reference; `recall_observation` brings any of them
//! back whole. Every compacted item keeps its event id (`obs-N`).

use model_adapter::{ContentPart, Message};

/// One message of the transcript.
#[derive(Debug, Clone)]
struct Entry {
    message: Message,
    chars: usize,
    /// Set on observation messages.
    observation: Option<ObservationEntry>,
}

#[derive(Debug, Clone)]
struct ObservationEntry {
    id: String,
    /// The header line (`[obs-3] run_script … → ok`).
    header: String,
    /// Where the full text lives (`observations/<sha>.txt`), if stored.
    reference: Option<String>,
    compacted: bool,
}

/// The packed conversation of a run.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    system: String,
    task: String,
    entries: Vec<Entry>,
}

/// What one compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compaction {
    pub(crate) before_chars: usize,
    pub(crate) after_chars: usize,
    pub(crate) compacted: Vec<String>,
}

/// The characters a message contributes (text, thinking, tool-call arguments).
pub(crate) fn message_chars(message: &Message) -> usize {
    match message {
        Message::System { content } | Message::User { content } => content
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => text.chars().count(),
                _ => 0,
            })
            .sum(),
        Message::Assistant { content, thinking, tool_calls, .. } => {
            content.chars().count()
                + thinking.as_ref().map_or(0, |thinking| thinking.text.chars().count())
                + tool_calls
                    .iter()
                    .map(|call| call.name.len() + call.arguments.to_string().chars().count())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.chars().count(),
    }
}

impl Context {
    pub(crate) fn new(system: String, task: String) -> Context {
        Context { system, task, entries: Vec::new() }
    }

    /// Appends a message that is not an observation (the model's answer).
    pub(crate) fn push(&mut self, message: Message) {
        let chars = message_chars(&message);
        self.entries.push(Entry { message, chars, observation: None });
    }

    /// Appends an observation: `header` then `body`, as a tool result (when the answer was a
    /// tool call with this id) or a user message.
    pub(crate) fn push_observation(
        &mut self,
        id: &str,
        header: String,
        body: &str,
        tool_call_id: Option<&str>,
        reference: Option<String>,
        is_error: bool,
    ) {
        let text = if body.is_empty() { header.clone() } else { format!("{header}\n{body}") };
        let message = match tool_call_id {
            Some(call) => Message::Tool { tool_call_id: call.to_owned(), content: text, is_error },
            None => Message::user(text),
        };
        let chars = message_chars(&message);
        self.entries.push(Entry {
            message,
            chars,
            observation: Some(ObservationEntry {
                id: id.to_owned(),
                header,
                reference,
                compacted: false,
            }),
        });
    }

    /// The messages of a request: system, task, transcript, then `note` (if any).
    pub(crate) fn messages(&self, note: Option<&str>) -> Vec<Message> {
        let mut messages = Vec::with_capacity(self.entries.len() + 3);
        messages.push(Message::system(self.system.clone()));
        messages.push(Message::user(self.task.clone()));
        messages.extend(self.entries.iter().map(|entry| entry.message.clone()));
        if let Some(note) = note {
            messages.push(Message::user(note.to_owned()));
        }
        messages
    }

    /// Characters of the system message, the task and the transcript.
    pub(crate) fn chars(&self) -> usize {
        self.system.chars().count()
            + self.task.chars().count()
            + self.entries.iter().map(|entry| entry.chars).sum::<usize>()
    }

    /// Cuts observations older than the `keep_recent` newest ones to their header, id and
    /// reference. Returns what it did, or `None` when there was nothing left to cut.
    pub(crate) fn compact(&mut self, keep_recent: usize, keep_chars: usize) -> Option<Compaction> {
        let before_chars = self.chars();
        let observations: Vec<usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.observation.is_some())
            .map(|(index, _)| index)
            .collect();
        let old = observations.len().saturating_sub(keep_recent);
        let mut compacted = Vec::new();
        for &index in &observations[..old] {
            let entry = &mut self.entries[index];
            let Some(observation) = entry.observation.as_mut() else { continue };
            if observation.compacted {
                continue;
            }
            let first_line = match &entry.message {
                Message::Tool { content, .. } => content.lines().nth(1).unwrap_or(""),
                Message::User { content } => content
                    .iter()
                    .find_map(|part| match part {
                        ContentPart::Text { text } => text.lines().nth(1),
                        _ => None,
                    })
                    .unwrap_or(""),
                Message::System { .. } | Message::Assistant { .. } => "",
            };
            let excerpt: String = first_line.chars().take(keep_chars).collect();
            let reference = observation
                .reference
                .as_ref()
                .map(|path| format!("; full text in {path}"))
                .unwrap_or_default();
            let short = format!(
                "{}\n{excerpt}… [compacted; recall_observation {} shows it again{reference}]",
                observation.header, observation.id
            );
            observation.compacted = true;
            compacted.push(observation.id.clone());
            entry.message = match &entry.message {
                Message::Tool { tool_call_id, is_error, .. } => Message::Tool {
                    tool_call_id: tool_call_id.clone(),
                    content: short,
                    is_error: *is_error,
                },
                _ => Message::user(short),
            };
            entry.chars = message_chars(&entry.message);
        }
        if compacted.is_empty() {
            return None;
        }
        Some(Compaction { before_chars, after_chars: self.chars(), compacted })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_recent_observations_and_ids() {
        let mut context = Context::new("system".into(), "task".into());
        for n in 1..=4 {
            context.push(Message::from_response(&model_adapter::Response {
                text: format!("step {n}"),
                ..Default::default()
            }));
            let body = format!("first line {n}\n{}", "x".repeat(1_000));
            context.push_observation(
                &format!("obs-{n}"),
                format!("[obs-{n}] run_script → ok"),
                &body,
                None,
                Some(format!("observations/{n}.txt")),
                false,
            );
        }
        let before = context.messages(None);
        let done = context.compact(2, 40).unwrap();
        assert_eq!(done.compacted, vec!["obs-1".to_owned(), "obs-2".to_owned()]);
        assert!(done.after_chars + 1_700 < done.before_chars, "{done:?}");
        let after = context.messages(None);
        // Untouched prefix, rewritten old observations, recent ones whole.
        assert_eq!(after[..3], before[..3]);
        let Message::User { content } = &after[3] else { panic!("{:?}", after[3]) };
        let ContentPart::Text { text } = &content[0] else { panic!() };
        assert!(text.starts_with("[obs-1] run_script → ok\nfirst line 1… [compacted;"), "{text}");
        assert!(text.contains("observations/1.txt"), "{text}");
        assert_eq!(after[9], before[9]);
        assert!(context.compact(2, 40).is_none());
    }
}
