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
//! 4. a trailing note, rebuilt every turn: plan, budget, selected skills, the results so far
//!    (react), allowed actions and the task restated. From record format 7 the note stays in
//!    the transcript, before the answer it asked for: the next request then starts with
//!    everything the model has already read and written (llama.cpp's slot holds the note and
//!    the generated answer), so only the observation and the new note are new prompt tokens —
//!    a dropped note made the server evaluate the old note, the answer, the observation and the
//!    new note again every turn (~170 tokens more on the embedded model). Before format 7 the
//!    note was never kept.
//!
//! Compaction is the only rewrite. When the packed context passes `compact_at` of
//! `max_context_chars`, observations older than the last `keep_recent_observations` are cut to
//! their first line plus their id and file reference; `recall_observation` brings any of them
//! back whole. Every compacted item keeps its event id (`obs-N`). A compaction also drops the
//! kept notes before the last one (the state of turns long gone).
//!
//! The same layout makes a request's fingerprint (the SHA-256 of its JSON body, which replay
//! and resume compare) cheap: the hash state after the stable prefix is kept and only what
//! follows it is hashed each turn, so a turn's cost does not grow with the transcript.

use model_adapter::{ChatRequest, ContentPart, Message};
use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::rundir::lowercase_hex;

/// One message of the transcript.
#[derive(Debug, Clone)]
struct Entry {
    message: Message,
    chars: usize,
    /// Set on observation messages.
    observation: Option<ObservationEntry>,
    /// A kept turn note.
    note: bool,
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
    /// The body hash absorbed up to the end of the transcript (see [`Context::fingerprint`]).
    prefix_hash: Option<PrefixHash>,
    /// The messages of the last request, handed back by [`Context::recycle`]: system, task and
    /// the transcript as it was then. The next request appends what came since instead of
    /// cloning the whole transcript again. Compaction drops it.
    spare: Option<Vec<Message>>,
    /// The transcript length when [`Context::messages`] last lent its messages out.
    lent_at: Option<usize>,
    /// Whether a request's note stays in the transcript (record format 7 on).
    keep_notes: bool,
}

/// SHA-256 state after `{"model":…,"messages":[system,task,entry…` for the first `entries`
/// entries of the transcript, under one model name. Compaction drops it.
#[derive(Debug, Clone)]
struct PrefixHash {
    model: String,
    entries: usize,
    hasher: Sha256,
}

/// What [`Context::fingerprint`] says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    /// SHA-256 of `serde_json::to_vec(request)`, lowercase hex.
    pub(crate) sha256: String,
    /// [`message_chars`] summed over the request's messages.
    pub(crate) chars: usize,
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

/// [`Context::fingerprint`] the slow way: the whole body serialised and hashed.
fn whole_body_fingerprint(request: &ChatRequest) -> Result<Fingerprint> {
    let body = serde_json::to_vec(request)?;
    Ok(Fingerprint {
        sha256: crate::rundir::sha256_hex(&body),
        chars: request.messages.iter().map(message_chars).sum(),
    })
}

impl Context {
    pub(crate) fn new(system: String, task: String) -> Context {
        Context {
            system,
            task,
            entries: Vec::new(),
            prefix_hash: None,
            spare: None,
            lent_at: None,
            keep_notes: false,
        }
    }

    /// The same context keeping each request's note in the transcript (see the module docs).
    pub(crate) fn keeping_notes(mut self, keep: bool) -> Context {
        self.keep_notes = keep;
        self
    }

    /// Appends a message that is not an observation (the model's answer).
    pub(crate) fn push(&mut self, message: Message) {
        let chars = message_chars(&message);
        self.entries.push(Entry { message, chars, observation: None, note: false });
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
            note: false,
        });
    }

    /// The messages of a request: system, task, transcript, then `note` (if any; kept in the
    /// transcript when the context keeps notes, in place of a kept note no answer followed).
    /// Hand them back with [`Context::recycle`] after the call, so the next request reuses
    /// them.
    pub(crate) fn messages(&mut self, mut note: Option<&str>) -> Vec<Message> {
        if self.keep_notes
            && let Some(text) = note.take()
        {
            if self.entries.last().is_some_and(|entry| entry.note) {
                // The call that note asked for gave no answer (it failed): the new note
                // replaces it, and what was lent or hashed with it is stale.
                self.entries.pop();
                self.spare = None;
                self.prefix_hash = None;
                self.lent_at = None;
            }
            let message = Message::user(text.to_owned());
            let chars = message_chars(&message);
            self.entries.push(Entry { message, chars, observation: None, note: true });
        }
        let mut messages = match self.spare.take() {
            Some(spare) => spare,
            None => {
                let mut messages = Vec::with_capacity(self.entries.len() + 3);
                messages.push(Message::system(self.system.clone()));
                messages.push(Message::user(self.task.clone()));
                messages
            }
        };
        let copied = messages.len() - 2;
        messages.extend(self.entries[copied..].iter().map(|entry| entry.message.clone()));
        if let Some(note) = note {
            messages.push(Message::user(note.to_owned()));
        }
        self.lent_at = Some(self.entries.len());
        messages
    }

    /// Takes back the messages of the last [`Context::messages`] (whatever followed the
    /// transcript is dropped). Messages lent before a compaction are dropped whole.
    pub(crate) fn recycle(&mut self, mut messages: Vec<Message>) {
        if let Some(entries) = self.lent_at.take()
            && messages.len() >= entries + 2
        {
            messages.truncate(entries + 2);
            self.spare = Some(messages);
        }
    }

    /// The texts of the notes kept in the transcript, the latest first (none when notes are
    /// not kept; a compacted note reads as its shortened line).
    pub(crate) fn kept_notes(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().rev().filter(|entry| entry.note).filter_map(|entry| {
            match &entry.message {
                Message::User { content } => content.iter().find_map(|part| match part {
                    ContentPart::Text { text } => Some(text.as_str()),
                    _ => None,
                }),
                _ => None,
            }
        })
    }

    /// Characters of the system message, the task and the transcript.
    pub(crate) fn chars(&self) -> usize {
        self.system.chars().count()
            + self.task.chars().count()
            + self.entries.iter().map(|entry| entry.chars).sum::<usize>()
    }

    /// The SHA-256 of `request`'s JSON body and its characters, for a request whose messages
    /// start with [`Context::messages`]: the transcript is hashed once, when it is appended
    /// (again after a compaction), and only the messages after it and the request's other
    /// fields are serialised here.
    pub(crate) fn fingerprint(&mut self, request: &ChatRequest) -> Result<Fingerprint> {
        let own = self.entries.len() + 2;
        let Some(extra) = request.messages.get(own..) else {
            return whole_body_fingerprint(request);
        };
        let chars = self.chars() + extra.iter().map(message_chars).sum::<usize>();
        // `{"model":"","messages":[]` then the other fields, as serde writes `ChatRequest`.
        let others = serde_json::to_vec(&ChatRequest {
            model: String::new(),
            messages: Vec::new(),
            tools: request.tools.clone(),
            tool_choice: request.tool_choice.clone(),
            parallel_tool_calls: request.parallel_tool_calls,
            response_format: request.response_format.clone(),
            temperature: request.temperature,
            max_tokens: request.max_tokens,
            stop: request.stop.clone(),
            thinking: request.thinking,
            reasoning_effort: request.reasoning_effort,
        })?;
        let empty_head = br#"{"model":"","messages":[]"#;
        let Some(others) = others.strip_prefix(empty_head.as_slice()) else {
            return whole_body_fingerprint(request);
        };
        let mut hasher = self.prefix_hasher(&request.model)?;
        for message in extra {
            hasher.update(b",");
            hasher.update(serde_json::to_vec(message)?);
        }
        hasher.update(b"]");
        hasher.update(others);
        Ok(Fingerprint { sha256: lowercase_hex(&hasher.finalize()), chars })
    }

    /// The hash state after the system message, the task and the whole transcript, brought up
    /// to date.
    fn prefix_hasher(&mut self, model: &str) -> Result<Sha256> {
        let prefix = match self.prefix_hash.take() {
            Some(prefix) if prefix.model == model && prefix.entries <= self.entries.len() => prefix,
            _ => {
                let mut hasher = Sha256::new();
                hasher.update(br#"{"model":"#);
                hasher.update(serde_json::to_vec(model)?);
                hasher.update(br#","messages":["#);
                hasher.update(serde_json::to_vec(&Message::system(self.system.clone()))?);
                hasher.update(b",");
                hasher.update(serde_json::to_vec(&Message::user(self.task.clone()))?);
                PrefixHash { model: model.to_owned(), entries: 0, hasher }
            }
        };
        let PrefixHash { model, entries, mut hasher } = prefix;
        for entry in &self.entries[entries..] {
            hasher.update(b",");
            hasher.update(serde_json::to_vec(&entry.message)?);
        }
        let current = hasher.clone();
        self.prefix_hash = Some(PrefixHash { model, entries: self.entries.len(), hasher });
        Ok(current)
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
        let last_note = self.entries.iter().rposition(|entry| entry.note);
        let mut index = 0;
        self.entries.retain(|entry| {
            let keep = !entry.note || Some(index) == last_note;
            index += 1;
            keep
        });
        self.prefix_hash = None;
        self.spare = None;
        self.lent_at = None;
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

    #[test]
    fn a_kept_note_makes_each_request_start_with_the_last_one_and_its_answer() {
        let notes = |messages: &[Message]| -> Vec<Message> {
            let is_note = |message: &&Message| {
                matches!(message, Message::User { content }
                if matches!(&content[0], ContentPart::Text { text } if text.starts_with("note")))
            };
            messages.iter().filter(is_note).cloned().collect()
        };
        let mut context = Context::new("system".into(), "task".into()).keeping_notes(true);
        let mut last: Option<Vec<Message>> = None;
        for n in 1..=4 {
            let request = context.messages(Some(&format!("note {n}")));
            if let Some(last) = last.take() {
                // The whole previous request and its answer, the observation, the new note.
                assert_eq!(request[..last.len()], last[..]);
                assert_eq!(request.len(), last.len() + 2);
            }
            assert_eq!(request.last(), Some(&Message::user(format!("note {n}"))));
            last = Some(request.clone());
            context.recycle(request);
            let answer = Message::from_response(&model_adapter::Response {
                text: format!("step {n}"),
                ..Default::default()
            });
            context.push(answer.clone());
            if let Some(last) = last.as_mut() {
                last.push(answer);
            }
            context.push_observation(
                &format!("obs-{n}"),
                format!("[obs-{n}] run_script → ok"),
                &format!("line {n}\n{}", "x".repeat(400)),
                None,
                None,
                false,
            );
        }
        // A call that gave no answer: its note gives way to the next one.
        let failed = context.messages(Some("note 5"));
        context.recycle(failed);
        let retried = context.messages(Some("note 5, again"));
        assert_eq!(retried.last(), Some(&Message::user("note 5, again")));
        assert_eq!(notes(&retried).len(), 5);
        context.recycle(retried);
        // Compaction drops every kept note but the last.
        assert!(context.compact(1, 20).is_some());
        assert_eq!(notes(&context.messages(None)), vec![Message::user("note 5, again")]);
    }

    #[test]
    fn recycled_messages_equal_fresh_ones() {
        let mut context = Context::new("system".into(), "task".into());
        let fresh = |context: &Context, note: Option<&str>| {
            let mut copy = context.clone();
            copy.spare = None;
            copy.messages(note)
        };
        for n in 1..=6 {
            context.push(Message::from_response(&model_adapter::Response {
                text: format!("step {n}"),
                ..Default::default()
            }));
            context.push_observation(
                &format!("obs-{n}"),
                format!("[obs-{n}] load_resource → ok"),
                &format!("first line {n}\n{}", "x".repeat(300)),
                None,
                None,
                false,
            );
            let note = format!("note {n}");
            let lent = context.messages(Some(&note));
            assert_eq!(lent, fresh(&context, Some(&note)));
            if n == 3 {
                // Compacted while the messages were out: they are not taken back.
                assert!(context.compact(1, 20).is_some());
            }
            let mut lent = lent;
            lent.push(Message::user("an extra question"));
            context.recycle(lent);
            let again = context.messages(None);
            assert_eq!(again, fresh(&context, None));
            context.recycle(again);
        }
    }

    #[test]
    fn fingerprint_is_the_hash_of_the_whole_body() {
        let mut context = Context::new("system \"quoted\" é".into(), "task\n".into());
        let check = |context: &mut Context, model: &str, note: Option<&str>, schema: bool| {
            let mut request = ChatRequest::new(model, context.messages(note));
            request.max_tokens = Some(64);
            if schema {
                request.response_format = model_adapter::ResponseFormat::JsonSchema {
                    name: "action".into(),
                    schema: serde_json::json!({"type": "object"}),
                    strict: true,
                };
            } else {
                request.tools = vec![model_adapter::Tool {
                    name: "final_answer".into(),
                    description: "answer".into(),
                    parameters: serde_json::json!({"type": "object"}),
                }];
                request.tool_choice = model_adapter::ToolChoice::Required;
            }
            let whole = whole_body_fingerprint(&request).unwrap();
            assert_eq!(context.fingerprint(&request).unwrap(), whole);
        };
        check(&mut context, "m", Some("note"), false);
        for n in 1..=5 {
            context.push(Message::from_response(&model_adapter::Response {
                text: format!("step {n}"),
                ..Default::default()
            }));
            check(&mut context, "m", Some("note"), n % 2 == 0);
            context.push_observation(
                &format!("obs-{n}"),
                format!("[obs-{n}] load_resource → ok"),
                &format!("line one\n{}", "x".repeat(100 * n)),
                None,
                None,
                false,
            );
            check(&mut context, "m", Some("turn note"), n % 2 == 1);
            check(&mut context, "m", None, false);
        }
        check(&mut context, "other model", Some("note"), true);
        assert!(context.compact(2, 10).is_some());
        check(&mut context, "other model", Some("note"), false);
        check(&mut context, "m", Some("note"), false);
        // A request that does not start with the context's messages is hashed whole.
        let request = ChatRequest::new("m", vec![Message::user("alone")]);
        assert_eq!(
            context.fingerprint(&request).unwrap(),
            whole_body_fingerprint(&request).unwrap()
        );
    }
}
