//! SOP-driven collaboration's agents: the in-process bus (one tokio inbox per agent), the
//! collaboration step of the main agent, and the peers' message cycles with their own context
//! and a deadline on each model call.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use model_adapter::{ChatRequest, DeltaStream, Message, ModelProvider, Response, TimeoutPhase};
use tokio::sync::mpsc;

use crate::context::Context;
use crate::error::Result;
use crate::event::{
    CollaborationDropped, CollaborationReceived, CollaborationRequested, CollaborationResponded,
    CollaborationTimedOut,
};
use crate::run::{Answer, Run};
use crate::state::ObservationStatus;

use super::{Collaboration, CollaborationStatus, MAIN, PeerState, Queued, SafeState, save};

/// Messages of a peer's transcript sent with its next answer: its latest exchanges.
const PEER_MEMORY: usize = 6;

/// A message on the bus.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Envelope {
    /// The request id (`collab-N`), on the request and on its response.
    pub(super) id: String,
    pub(super) from: String,
    pub(super) to: String,
    pub(super) body: Body,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Body {
    Request(String),
    Response { ok: bool, text: String },
}

/// The agents' inboxes: one unbounded tokio channel per agent id.
#[derive(Debug)]
pub(super) struct Bus {
    inboxes: Vec<(String, mpsc::UnboundedSender<Envelope>)>,
}

impl Bus {
    /// A bus for `ids`, with the receiving end of each inbox in the same order.
    pub(super) fn open(ids: &[String]) -> (Bus, Vec<mpsc::UnboundedReceiver<Envelope>>) {
        let mut inboxes = Vec::with_capacity(ids.len());
        let mut receivers = Vec::with_capacity(ids.len());
        for id in ids {
            let (sender, receiver) = mpsc::unbounded_channel();
            inboxes.push((id.clone(), sender));
            receivers.push(receiver);
        }
        (Bus { inboxes }, receivers)
    }

    /// Puts `envelope` in its addressee's inbox; `false` when there is no such agent.
    pub(super) fn post(&self, envelope: Envelope) -> bool {
        match self.inboxes.iter().find(|(id, _)| *id == envelope.to) {
            Some((_, inbox)) => inbox.send(envelope).is_ok(),
            None => false,
        }
    }
}

/// The bus and the inboxes of this piece of work.
#[derive(Debug)]
pub(super) struct Agents {
    pub(super) bus: Bus,
    pub(super) main: mpsc::UnboundedReceiver<Envelope>,
    /// The peers' inboxes, in the order of `SafeState::peers`.
    pub(super) peers: Vec<mpsc::UnboundedReceiver<Envelope>>,
}

/// One collaboration step: request, the peer's message cycle, the response or the timeout.
/// Returns whether the peer answered.
pub(super) async fn collaborate(
    run: &mut Run,
    safe: &mut SafeState,
    agents: &mut Agents,
    agent: &str,
    request: &str,
) -> Result<bool> {
    // A collaboration request is a function call of the agent: it counts like an action.
    run.state.counters.tool_calls += 1;
    let id = format!("collab-{}", safe.collaborations.len() + 1);
    let timeout_ms = run.config.safe.collaboration_timeout_ms;
    safe.collaborations.push(Collaboration {
        id: id.clone(),
        to: agent.to_owned(),
        request: request.to_owned(),
        status: CollaborationStatus::Pending,
    });
    safe.pending_collaboration_id = Some(id.clone());
    save(run, safe);
    run.emit(CollaborationRequested {
        agent: MAIN.to_owned(),
        id: id.clone(),
        to: agent.to_owned(),
        request: request.to_owned(),
        timeout_ms,
    })?;
    let posted = agents.bus.post(Envelope {
        id: id.clone(),
        from: MAIN.to_owned(),
        to: agent.to_owned(),
        body: Body::Request(request.to_owned()),
    });
    // state.json shows the pending request while the requester waits.
    run.checkpoint()?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
    if let Some(index) = safe.peers.iter().position(|peer| peer.id == agent)
        && posted
    {
        peer_cycle(run, safe, agents, index, deadline).await?;
    }
    // The requester's message cycle: the response it waits for, and anything else (dropped).
    let mut response = None;
    while let Ok(envelope) = agents.main.try_recv() {
        match envelope.body {
            Body::Response { ok, text } if envelope.id == id && response.is_none() => {
                response = Some((ok, text));
            }
            Body::Response { text, .. } | Body::Request(text) => {
                let late = safe.collaborations.iter().any(|collaboration| {
                    collaboration.id == envelope.id
                        && collaboration.status == CollaborationStatus::TimedOut
                });
                run.emit(CollaborationDropped {
                    agent: MAIN.to_owned(),
                    id: envelope.id.clone(),
                    from: envelope.from.clone(),
                    reason: if late { "late" } else { "unknown" }.to_owned(),
                    response: text.clone(),
                })?;
            }
        }
    }
    safe.pending_collaboration_id = None;
    let (status, observation, text) = match response {
        Some((true, text)) => (
            CollaborationStatus::Answered,
            ObservationStatus::Ok,
            format!("[{id}] {agent} answered:\n{text}"),
        ),
        Some((false, text)) => (
            CollaborationStatus::Failed,
            ObservationStatus::Failed,
            format!("[{id}] {agent} could not answer: {text}"),
        ),
        None => {
            run.emit(CollaborationTimedOut {
                agent: MAIN.to_owned(),
                id: id.clone(),
                to: agent.to_owned(),
                timeout_ms,
            })?;
            (
                CollaborationStatus::TimedOut,
                ObservationStatus::Timeout,
                format!(
                    "[{id}] no answer from {agent} within {timeout_ms} ms: the request timed out"
                ),
            )
        }
    };
    if let Some(collaboration) = safe.collaborations.iter_mut().find(|c| c.id == id) {
        collaboration.status = status;
    }
    save(run, safe);
    run.observe(None, observation, &text, None)?;
    Ok(observation == ObservationStatus::Ok)
}

/// A peer's message cycle: it takes what is in its inbox and answers its queue oldest first,
/// until the queue is empty or the deadline cuts an answer (that request stays queued).
async fn peer_cycle(
    run: &mut Run,
    safe: &mut SafeState,
    agents: &mut Agents,
    index: usize,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let Some(inbox) = agents.peers.get_mut(index) else { return Ok(()) };
    while let Ok(envelope) = inbox.try_recv() {
        // Peers only ever get requests; a response addressed to one has no one to go to.
        let Body::Request(request) = envelope.body else { continue };
        let peer = &mut safe.peers[index];
        run.emit(CollaborationReceived {
            agent: peer.id.clone(),
            id: envelope.id.clone(),
            from: envelope.from.clone(),
            request: request.clone(),
        })?;
        peer.queue.push_back(Queued {
            id: envelope.id,
            from: envelope.from,
            request,
            asked: false,
        });
    }
    save(run, safe);
    loop {
        let peer = &mut safe.peers[index];
        let Some(front) = peer.queue.front_mut() else { break };
        if !front.asked {
            front.asked = true;
            let message = format!("Request {} from {}:\n{}", front.id, front.from, front.request);
            peer.transcript.push(Message::user(message));
        }
        let (id, from) = (front.id.clone(), front.from.clone());
        let timeout_ms = run.config.safe.collaboration_timeout_ms;
        let answer = peer_answer(run, peer, deadline, timeout_ms).await?;
        let peer = &mut safe.peers[index];
        let (ok, text) = match answer {
            PeerAnswer::Cut => break,
            PeerAnswer::Text(text) => {
                peer.transcript.push(Message::from_response(&Response {
                    text: text.clone(),
                    ..Response::default()
                }));
                (true, text)
            }
            PeerAnswer::Failed(message) => {
                // The request leaves the transcript with no answer (turns keep alternating).
                peer.transcript.pop();
                (false, message)
            }
        };
        peer.queue.pop_front();
        peer.handled += 1;
        let peer_id = peer.id.clone();
        save(run, safe);
        run.emit(CollaborationResponded {
            agent: peer_id.clone(),
            id: id.clone(),
            to: from.clone(),
            ok,
            response: text.clone(),
        })?;
        agents.bus.post(Envelope {
            id,
            from: peer_id,
            to: from,
            body: Body::Response { ok, text },
        });
    }
    save(run, safe);
    Ok(())
}

enum PeerAnswer {
    Text(String),
    /// The call failed; the message says why.
    Failed(String),
    /// The deadline cut the call.
    Cut,
}

/// The peer's system prompt.
fn peer_system(peer: &PeerState) -> String {
    format!(
        "You are agent `{}` in a team of agents working for a user. Your role: {}\nOther agents \
         send you requests. Answer the latest request directly in plain text, briefly, with \
         facts and results only. You cannot run tools or scripts.\n{}",
        peer.id,
        peer.role,
        crate::reasoning::SUBAGENT_PROTOCOL
    )
}

const PEER_INTRO: &str = "Requests from other agents follow; each names its id and its sender.";

/// One answer of `peer` to the last request of its transcript: a model call through
/// [`Run::call_model`] with the peer's own context, cut at `deadline`.
async fn peer_answer(
    run: &mut Run,
    peer: &PeerState,
    deadline: tokio::time::Instant,
    timeout_ms: u64,
) -> Result<PeerAnswer> {
    let mut context = Context::new(peer_system(peer), PEER_INTRO.to_owned());
    let recent = peer.transcript.len().saturating_sub(PEER_MEMORY + 1);
    for message in &peer.transcript[recent..] {
        context.push(message.clone());
    }
    let request = run.request(context.messages(None));
    let cut = deadline_error(&peer.id, timeout_ms);
    let live = run.model.live.clone();
    run.model.live = live.clone().map(|inner| {
        Arc::new(Deadline { inner, deadline, peer: peer.id.clone(), timeout_ms })
            as Arc<dyn ModelProvider>
    });
    // The call fingerprints and recycles the context it is given: the peer's, not main's.
    std::mem::swap(&mut run.context, &mut context);
    let answer = run.call_model(&format!("collaborate:{}", peer.id), request, None).await;
    std::mem::swap(&mut run.context, &mut context);
    run.model.live = live;
    Ok(match answer? {
        Answer::Response(response) => {
            let text = response.text.trim();
            if text.is_empty() {
                PeerAnswer::Failed("the peer's answer was empty".to_owned())
            } else {
                PeerAnswer::Text(text.to_owned())
            }
        }
        Answer::Failed(error) if error == cut.to_string() => PeerAnswer::Cut,
        Answer::Failed(error) => PeerAnswer::Failed(format!("the model call failed: {error}")),
    })
}

/// The error a peer's model call ends with at its deadline (what `model_response` records).
fn deadline_error(peer: &str, timeout_ms: u64) -> model_adapter::Error {
    model_adapter::Error::Timeout {
        url: format!("collaboration peer `{peer}`"),
        phase: TimeoutPhase::FirstByte,
        after: Duration::from_millis(timeout_ms),
        delivered: 0,
    }
}

/// The live model with a deadline: a call still running at `deadline` fails with
/// [`deadline_error`]. The answer is collected before it is handed on, so a cut call
/// delivers nothing.
#[derive(Debug)]
struct Deadline {
    inner: Arc<dyn ModelProvider>,
    deadline: tokio::time::Instant,
    peer: String,
    timeout_ms: u64,
}

#[async_trait]
impl ModelProvider for Deadline {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<Response> {
        match tokio::time::timeout_at(self.deadline, self.inner.chat(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(deadline_error(&self.peer, self.timeout_ms)),
        }
    }

    async fn stream(&self, request: &ChatRequest) -> model_adapter::Result<DeltaStream> {
        let collected = tokio::time::timeout_at(self.deadline, async {
            let mut stream = self.inner.stream(request).await?;
            let mut items = Vec::new();
            while let Some(item) = stream.next().await {
                let failed = item.is_err();
                items.push(item);
                if failed {
                    break;
                }
            }
            Ok::<_, model_adapter::Error>(items)
        })
        .await;
        match collected {
            Ok(Ok(items)) => Ok(Box::pin(futures_util::stream::iter(items))),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(deadline_error(&self.peer, self.timeout_ms)),
        }
    }
}
