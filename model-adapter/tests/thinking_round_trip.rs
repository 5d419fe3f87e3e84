//! Extended thinking across tool round trips, over loopback: Anthropic answers with thinking,
//! redacted_thinking, text and tool_use blocks (documented wire shapes, streamed and not, whole
//! and one byte per write); each answer goes back through `Message::from_response`, and every
//! request body is compared whole with the expected one, in which each assistant turn is the
//! previous answer's content array exactly as received. A recording keeps the blocks too.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use std::sync::Arc;

use common::{Recorded, Reply, Step, TestServer, data, fast_http};
use model_adapter::{
    AnthropicConfig, AnthropicProvider, ChatRequest, Error, INTERLEAVED_THINKING_BETA, Message,
    ModelProvider, ReasoningEffort, RecordingModel, ReplayModel, Response, ThinkingBlockContent,
    ThinkingConfig, Tool, collect_stream, read_recording, write_recording,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const TURNS: usize = 4;

/// How the answers travel.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Transport {
    /// Non-streamed JSON bodies, `chat`.
    Chat,
    /// Non-streamed JSON bodies written one byte per write, `chat`.
    ChatBytewise,
    /// SSE written in one piece, `stream`.
    Stream,
    /// SSE written one byte per write, `stream`.
    StreamBytewise,
}

fn replies(transport: Transport) -> Vec<Reply> {
    (1..=TURNS)
        .map(|turn| {
            let name = format!("anthropic_round_trip_{turn}");
            let json = || {
                Reply::json(200, &[], &String::from_utf8(data(&format!("{name}.json"))).unwrap())
            };
            match transport {
                Transport::Chat => json(),
                Transport::ChatBytewise => Reply {
                    steps: json()
                        .steps
                        .into_iter()
                        .map(|step| match step {
                            Step::Write(bytes) => Step::WriteBytewise(bytes),
                            other => other,
                        })
                        .collect(),
                },
                Transport::Stream => Reply::sse(&data(&format!("{name}.sse"))),
                Transport::StreamBytewise => {
                    Reply::sse_with(&data(&format!("{name}.sse")), Step::WriteBytewise)
                }
            }
        })
        .collect()
}

fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "calculator".into(),
            description: "Perform mathematical calculations".into(),
            parameters: json!({"type": "object", "properties": {"expression": {"type": "string", "description": "Mathematical expression to evaluate"}}, "required": ["expression"]}),
        },
        Tool {
            name: "database_query".into(),
            description: "Query product database".into(),
            parameters: json!({"type": "object", "properties": {"query": {"type": "string", "description": "SQL query to execute"}}, "required": ["query"]}),
        },
    ]
}

fn request(messages: &[Message]) -> ChatRequest {
    let mut request = ChatRequest::new("claude-sonnet-4-5", messages.to_vec());
    request.tools = tools();
    request.max_tokens = Some(16000);
    request.thinking = Some(ThinkingConfig { budget_tokens: 10000 });
    // Both left out of the Anthropic body: no temperature with thinking, and reasoning_effort
    // is OpenAI's.
    request.temperature = Some(0.2);
    request.reasoning_effort = Some(ReasoningEffort::High);
    request
}

/// What the agent does with each answer before the next call.
fn follow_up(turn: usize) -> Option<Message> {
    match turn {
        1 => Some(Message::Tool {
            tool_call_id: "toolu_01Calc".into(),
            content: "7500".into(),
            is_error: false,
        }),
        2 => Some(Message::Tool {
            tool_call_id: "toolu_01Db".into(),
            content: "5200".into(),
            is_error: false,
        }),
        3 => Some(Message::user("And per unit?")),
        _ => None,
    }
}

fn provider(url: &str) -> AnthropicProvider {
    let mut config = AnthropicConfig::new(url);
    config.http = fast_http();
    config.betas = vec![INTERLEAVED_THINKING_BETA.to_owned()];
    AnthropicProvider::new(config).unwrap()
}

async fn ask(model: &dyn ModelProvider, request: &ChatRequest, transport: Transport) -> Response {
    match transport {
        Transport::Chat | Transport::ChatBytewise => model.chat(request).await.unwrap(),
        Transport::Stream | Transport::StreamBytewise => {
            collect_stream(model.stream(request).await.unwrap(), |_| {}).await.unwrap()
        }
    }
}

/// Runs the four-turn conversation; returns the answers and the conversation at its end.
async fn converse(
    model: &dyn ModelProvider,
    transport: Transport,
) -> (Vec<Response>, Vec<Message>) {
    let mut messages = vec![
        Message::system("You are a sales analyst."),
        Message::user(
            "What's the total revenue if we sold 150 units of product A at $50 each, and how \
             does this compare to our average monthly revenue from the database?",
        ),
    ];
    let mut answers = Vec::new();
    for turn in 1..=TURNS {
        let answer = ask(model, &request(&messages), transport).await;
        messages.push(Message::from_response(&answer));
        messages.extend(follow_up(turn));
        answers.push(answer);
    }
    (answers, messages)
}

fn expected_body(turn: usize, transport: Transport) -> Value {
    let mut body: Value =
        serde_json::from_slice(&data(&format!("anthropic_round_trip.request{turn}.json"))).unwrap();
    if matches!(transport, Transport::Stream | Transport::StreamBytewise) {
        body["stream"] = json!(true);
    }
    body
}

fn check_requests(recorded: &[Recorded], transport: Transport) {
    assert_eq!(recorded.len(), TURNS, "{transport:?}");
    for (turn, request) in (1..).zip(recorded) {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.header("anthropic-beta"), Some(INTERLEAVED_THINKING_BETA));
        assert_eq!(request.json(), expected_body(turn, transport), "{transport:?}: request {turn}");
    }
}

#[tokio::test]
async fn thinking_blocks_come_back_unchanged_in_every_transport() {
    let mut reference: Option<Vec<Response>> = None;
    for transport in
        [Transport::Chat, Transport::ChatBytewise, Transport::Stream, Transport::StreamBytewise]
    {
        let server = TestServer::start(replies(transport)).await;
        let model = provider(&server.url);
        let (answers, _) = converse(&model, transport).await;
        check_requests(&server.requests(), transport);
        match &reference {
            None => reference = Some(answers),
            Some(reference) => assert_eq!(&answers, reference, "{transport:?} against chat"),
        }
    }
    let answers = reference.unwrap();
    let kinds: Vec<Vec<&str>> = answers
        .iter()
        .map(|answer| {
            answer
                .thinking_blocks
                .iter()
                .map(|block| match block.content {
                    ThinkingBlockContent::Thinking { .. } => "thinking",
                    ThinkingBlockContent::RedactedThinking { .. } => "redacted_thinking",
                    _ => "other",
                })
                .collect()
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            vec!["thinking"],
            vec!["thinking", "redacted_thinking"],
            vec!["thinking"],
            vec!["thinking"],
        ]
    );
    assert_eq!(answers[1].tool_calls[0].name, "database_query");
    assert_eq!(answers[3].text, "$50 per unit.");
}

#[tokio::test]
async fn a_recording_keeps_the_blocks_and_replays_the_round_trip() {
    let server = TestServer::start(replies(Transport::Stream)).await;
    let live: Arc<dyn ModelProvider> = Arc::new(provider(&server.url));
    let recorder = RecordingModel::new(live);
    let (live_answers, conversation) = converse(&recorder, Transport::Stream).await;

    let directory =
        std::env::temp_dir().join(format!("model-adapter-thinking-replay-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("run.jsonl");
    write_recording(&path, &recorder.calls()).unwrap();
    let calls = read_recording(&path).unwrap();
    std::fs::remove_dir_all(&directory).unwrap();
    assert_eq!(calls, recorder.calls());
    assert!(
        calls[2].response.thinking_blocks.len() == 1
            && calls[1].response.thinking_blocks.len() == 2
    );

    // Played back, by chat and by stream, the same conversation gets the same answers.
    for transport in [Transport::Chat, Transport::Stream] {
        let replay = ReplayModel::new(calls.clone());
        let (answers, _) = converse(&replay, transport).await;
        assert_eq!(answers, live_answers, "{transport:?}");
        assert_eq!(replay.remaining(), 0);
    }

    // A conversation whose thinking was altered is not the recorded one.
    let replay = ReplayModel::new(calls.clone());
    let mut altered = conversation[..4].to_vec();
    if let Message::Assistant { thinking: Some(thinking), .. } = &mut altered[2]
        && let ThinkingBlockContent::Thinking { signature, .. } = &mut thinking.blocks[0].content
    {
        signature.push('x');
    }
    replay.chat(&request(&conversation[..2])).await.unwrap();
    let error = replay.chat(&request(&altered)).await.unwrap_err();
    match error {
        Error::ReplayDiverged { index: 1, message } => assert!(
            message.starts_with("/messages/2/thinking/blocks/0/signature: recorded"),
            "{message}"
        ),
        other => panic!("expected a divergence, got {other:?}"),
    }
}
