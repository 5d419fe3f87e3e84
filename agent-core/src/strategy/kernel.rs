//! The turn kernel: the one loop every strategy runs in, and the steps of a turn that every
//! strategy shares.
//!
//! [`drive`] owns the run's loop: the cancellation, the budgets (and a strategy's own limits),
//! the strategy's turn, stuck detection, and the ending — a [`Stop`] always becomes a text
//! through the strategy's [`Strategy::end`]. Inside a turn a strategy calls the kernel for
//! everything that is not a decision: [`prepare`] derives the turn's action space and note
//! around context fitting, [`start_turn`]/[`finish_turn`] frame the turn, [`forced_call`] asks
//! the model for one forced contract and reads the answer, [`reject_answer`] records an answer
//! that breaks its contract, [`final_action`] validates and emits `final_answer` and
//! `ask_user`, [`review_answer`] refuses once an answer whose figures nothing in the run shows
//! (every strategy's completing answer passes it), and [`run_batch`] runs a plan's steps in
//! order. Validating, executing, counting
//! and recording an action is [`Run::act`]'s.
//!
//! What the kernel does not do: choose what to ask, in what order, or what an answer means.

use model_adapter::{ChatRequest, Message, Response, ResponseFormat, Tool, ToolChoice};
use serde_json::{Map, Value, json};

use crate::action::{Action, strip_fence};
use crate::budget::Outcome;
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::{ActionValidated, TurnBudget, TurnFinished, TurnStarted};
use crate::grounding;
use crate::metrics::TurnReasoning;
use crate::run::{Answer, Ending, Run, Stop};
use crate::space::ActionSpace;
use crate::state::ObservationStatus;

/// What one turn of a strategy led to.
#[derive(Debug)]
pub(crate) enum Flow {
    /// The work goes on: the kernel checks for a stuck loop, then the next turn.
    Continue,
    /// The work is done: the model's own answer, a question for the user.
    End(Ending),
    /// The work must stop (a budget hit inside the turn, a cancellation): the strategy's
    /// [`Strategy::end`] gives the text.
    Stop(Stop),
}

/// A loop strategy: how the model is asked and in what order. It decides only; the kernel
/// ([`drive`]) owns the loop and [`Run`] validates, executes, counts and records.
pub(crate) trait Strategy {
    /// Before the first turn of a piece of work (a strategy that plans its task once does it
    /// here). A stop ends the work at once.
    async fn start(&mut self, _run: &mut Run) -> Result<Option<Stop>> {
        Ok(None)
    }

    /// The limit the next turn would pass: by default the run's budgets; a strategy adds its
    /// own (rounds, steps) and may check its state's invariants.
    fn limit(&self, run: &Run) -> Option<Stop> {
        run.budget_exhausted()
    }

    /// One turn: at most one Decide, or one round of the strategy's phases.
    async fn turn(&mut self, run: &mut Run) -> Result<Flow>;

    /// The text when the work stops without the model's answer: by default the degraded
    /// answer ([`Run::degrade`]); a strategy with its own last answer (a think's summary, a
    /// report) gives that.
    async fn end(&mut self, run: &mut Run, stop: Stop) -> Result<Ending> {
        run.degrade(stop).await
    }
}

/// Runs a piece of work to its end with `strategy`: every way out gives an [`Ending`].
pub(crate) async fn drive(run: &mut Run, mut strategy: impl Strategy) -> Result<Ending> {
    if let Some(stop) = strategy.start(run).await? {
        return strategy.end(run, stop).await;
    }
    loop {
        if run.cancel.is_cancelled() || run.recorded_stop(Outcome::Cancelled) {
            return strategy.end(run, Stop::cancelled()).await;
        }
        if let Some(stop) = strategy.limit(run) {
            return strategy.end(run, stop).await;
        }
        match strategy.turn(run).await? {
            Flow::Continue => {}
            Flow::End(ending) => return Ok(ending),
            Flow::Stop(stop) => return strategy.end(run, stop).await,
        }
        if let Some(stop) = run.stuck() {
            return strategy.end(run, stop).await;
        }
    }
}

/// A turn's action space and note, derived once the context fits.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) space: ActionSpace,
    pub(crate) note: String,
}

/// The head of a turn: reads the external tools, derives the action space (`space`) and the
/// note (`note`), compacts the context if the note would not fit, and derives both again
/// (compaction may have made observations recallable). A context that cannot fit is a stop.
pub(crate) async fn prepare(
    run: &mut Run,
    space: impl Fn(&Run) -> ActionSpace,
    note: impl Fn(&Run, &ActionSpace) -> String,
) -> Result<std::result::Result<Prepared, Stop>> {
    run.refresh_tools()?;
    let first = space(run);
    if let Some(stop) = run.fit_context(note(run, &first).chars().count()).await? {
        return Ok(Err(stop));
    }
    let space = space(run);
    let note = note(run, &space);
    Ok(Ok(Prepared { space, note }))
}

/// The note of a phase that offers no action space (a judgement, a replan), once the context
/// fits with it.
pub(crate) async fn fit_note(
    run: &mut Run,
    note: impl Fn(&Run) -> String,
) -> Result<std::result::Result<String, Stop>> {
    if let Some(stop) = run.fit_context(note(run).chars().count()).await? {
        return Ok(Err(stop));
    }
    Ok(Ok(note(run)))
}

/// Where a strategy is when a turn starts, as `turn_started` records it.
#[derive(Debug)]
pub(crate) enum Position {
    /// plan-execute-think: `[round, max_rounds]`.
    Round([u32; 2]),
    /// plan-thought-replan: `{phase, steps, …}`.
    Step(Value),
    /// safe: `{agent, phase, cycle?}`.
    Safe(Value),
}

/// Starts a turn: counts it and emits `turn_started` with the budgets (the context with a
/// note of `note_chars`), the names the model may call, and the strategy's `position`.
pub(crate) fn start_turn(
    run: &mut Run,
    note_chars: usize,
    allowed: &[&str],
    position: Option<Position>,
) -> Result<()> {
    // Turns whose head did not read the tool list read it here.
    if !run.external.fresh {
        run.refresh_tools()?;
    }
    run.external.fresh = false;
    run.state.counters.turns += 1;
    run.bus.set_turn(run.state.counters.turns);
    let used = run.state.task_counters();
    let budgets = &run.config.budgets;
    let pair = |used: u32, limit: u32| [u64::from(used), u64::from(limit)];
    let context = [(run.context.chars() + note_chars) as u64, budgets.max_context_chars as u64];
    run.emit(TurnStarted {
        budget: TurnBudget {
            turns: pair(used.turns, budgets.max_turns),
            tool_calls: pair(used.tool_calls, budgets.max_tool_calls),
            script_runs: pair(used.script_runs, budgets.max_script_runs),
            context_chars: context,
        },
        allowed: allowed.iter().map(|name| (*name).to_owned()).collect(),
        round: match position {
            Some(Position::Round(round)) => Some(round),
            _ => None,
        },
        step: match &position {
            Some(Position::Step(step)) => Some(step.clone()),
            _ => None,
        },
        safe: match position {
            Some(Position::Safe(safe)) => Some(safe),
            _ => None,
        },
    })
}

/// Ends a turn: `turn_finished` with the counters, then `state.json` and an fsync.
pub(crate) fn finish_turn(run: &mut Run, reasoning: Option<TurnReasoning>) -> Result<()> {
    run.emit(TurnFinished {
        counters: run.state.counters.clone(),
        context_chars: run.context.chars() as u64,
        reasoning,
    })?;
    run.checkpoint()
}

/// Asks the model once; a failed call becomes a `model_error` observation and `None`.
pub(crate) async fn ask(
    run: &mut Run,
    purpose: &str,
    request: ChatRequest,
    mode: Option<DecideMode>,
) -> Result<Option<Response>> {
    match run.call_model(purpose, request, mode).await? {
        Answer::Response(response) => Ok(Some(*response)),
        Answer::Failed(error) => {
            run.observe(
                None,
                ObservationStatus::ModelError,
                &format!("the model call failed: {error}"),
                None,
            )?;
            Ok(None)
        }
    }
}

/// A forced contract of a strategy: the tool the model must call (or, in JSON mode, the
/// document it must write) and what it does, as the model reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contract {
    pub(crate) tool: &'static str,
    pub(crate) description: &'static str,
}

/// The model's answer to a forced contract.
#[derive(Debug)]
pub(crate) struct Reply<T> {
    pub(crate) response: Response,
    /// The answer read by the contract's parser, or why it breaks the contract.
    pub(crate) parsed: std::result::Result<T, String>,
    /// The tool call the answer's observation or acknowledgement answers (tools mode).
    pub(crate) tool_call_id: Option<String>,
}

/// A contract's answer that keeps the contract.
#[derive(Debug)]
pub(crate) struct Accepted<T> {
    pub(crate) value: T,
    pub(crate) response: Response,
    pub(crate) tool_call_id: Option<String>,
}

impl<T> Reply<T> {
    /// The answer when it keeps its contract. One that breaks it becomes an `invalid_action`
    /// observation naming what was wrong and, when given, what the strategy does instead
    /// (`consequence`: "the task is taken as complex"); a judgement, a think or a report is
    /// no action, so there is no `action_validated`.
    pub(crate) fn accepted(self, run: &mut Run, consequence: &str) -> Result<Option<Accepted<T>>> {
        match self.parsed {
            Ok(value) => Ok(Some(Accepted {
                value,
                response: self.response,
                tool_call_id: self.tool_call_id,
            })),
            Err(message) => {
                let text = match consequence {
                    "" => message,
                    consequence => format!("{message}; {consequence}"),
                };
                let tool_call_id = self.tool_call_id.as_deref();
                run.observe(None, ObservationStatus::InvalidAction, &text, tool_call_id)?;
                Ok(None)
            }
        }
    }
}

/// A plan contract's answer, once read.
#[derive(Debug)]
pub(crate) enum PlanReply<T> {
    /// The plan keeps the contract; its stated reasoning is recorded (`reasoning`, the turn's
    /// Think-Act figures).
    Accepted { plan: T, reasoning: Option<TurnReasoning>, tool_call_id: Option<String> },
    /// It breaks the contract: recorded as `action_validated` (invalid) and an
    /// `invalid_action` observation.
    Rejected,
}

impl<T> Reply<T> {
    /// Reads a plan contract's reply (plan-execute-think's batch, sop-collaboration's plan);
    /// `reasoning_of` is the plan's own reasoning field.
    pub(crate) fn into_plan(
        self,
        run: &mut Run,
        reasoning_of: impl Fn(&T) -> Option<&str>,
    ) -> Result<PlanReply<T>> {
        match self.parsed {
            Err(message) => {
                reject_answer(run, &message, self.tool_call_id.as_deref(), None)?;
                Ok(PlanReply::Rejected)
            }
            Ok(plan) => {
                let reasoning = run.record_reasoning_with(&self.response, reasoning_of(&plan));
                Ok(PlanReply::Accepted { plan, reasoning, tool_call_id: self.tool_call_id })
            }
        }
    }
}

/// The schema of one step of a plan: `{tool: <name>, args: <its arguments>}`, with the name
/// written first when `name_first` (the order model-adapter sends).
pub(crate) fn step_schema(space: &ActionSpace, name: &str, name_first: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {"tool": {"const": name}, "args": space.args_schema(name)},
        "required": ["tool", "args"],
        "additionalProperties": false,
    });
    if name_first {
        schema["propertyOrdering"] = json!(["tool", "args"]);
    }
    schema
}

/// Asks the model for `contract` under `schema` (purpose `purpose` in the record), adds the
/// answer to the transcript and reads it with `parse`. `None` when the call failed (recorded
/// as a `model_error` observation).
pub(crate) async fn forced_call<T>(
    run: &mut Run,
    purpose: &str,
    contract: Contract,
    note: &str,
    schema: Value,
    parse: impl FnOnce(&Response, DecideMode) -> std::result::Result<T, String>,
) -> Result<Option<Reply<T>>> {
    let request = forced_request(run, note, contract, schema);
    let Some(response) = ask(run, purpose, request, None).await? else { return Ok(None) };
    let parsed = parse(&response, run.config.decide);
    let tool_call_id = run.push_answer(&response);
    Ok(Some(Reply { response, parsed, tool_call_id }))
}

/// [`forced_call`] for a contract that is no action (a judgement, a think, a report): the
/// answer when it keeps the contract, else `None` after the failed call's or the broken
/// answer's observation ([`Reply::accepted`], with `consequence`).
pub(crate) async fn forced_answer<T>(
    run: &mut Run,
    purpose: &str,
    contract: Contract,
    note: &str,
    schema: Value,
    parse: impl FnOnce(&Response, DecideMode) -> std::result::Result<T, String>,
    consequence: &str,
) -> Result<Option<Accepted<T>>> {
    match forced_call(run, purpose, contract, note, schema, parse).await? {
        Some(reply) => reply.accepted(run, consequence),
        None => Ok(None),
    }
}

/// The request of a forced contract: the context, the phase's note, and exactly one tool,
/// named in `tool_choice` — or, in [`DecideMode::Json`], its schema as the response format.
fn forced_request(run: &mut Run, note: &str, contract: Contract, schema: Value) -> ChatRequest {
    let messages = run.context.messages(Some(note));
    let mut request = run.request(messages);
    match run.config.decide {
        DecideMode::Tools => {
            request.tools = vec![Tool {
                name: contract.tool.to_owned(),
                description: contract.description.to_owned(),
                parameters: schema,
            }];
            request.tool_choice = ToolChoice::Named(contract.tool.to_owned());
            request.parallel_tool_calls = Some(false);
        }
        DecideMode::Json => {
            request.response_format =
                ResponseFormat::JsonSchema { name: contract.tool.to_owned(), schema, strict: true };
        }
    }
    request
}

/// The arguments of the forced call `tool`: its tool call, or (JSON mode) the document.
pub(crate) fn forced_arguments(
    response: &Response,
    mode: DecideMode,
    tool: &str,
) -> std::result::Result<Map<String, Value>, String> {
    let value = if let Some(call) = response.tool_calls.first() {
        if call.name != tool {
            return Err(format!("expected a call to `{tool}`, got `{}`", call.name));
        }
        call.arguments.clone()
    } else if let Some(bad) = response.invalid_tool_calls.first() {
        return Err(format!("the call to `{}` had unreadable arguments ({})", bad.name, bad.error));
    } else if mode == DecideMode::Json {
        serde_json::from_str(strip_fence(&response.text))
            .map_err(|error| format!("the answer is not valid JSON: {error}"))?
    } else {
        return Err(format!("expected a call to `{tool}`, got no tool call"));
    };
    match value {
        Value::Object(map) => Ok(map),
        other => Err(format!("the arguments of `{tool}` must be a JSON object, got {other}")),
    }
}

/// Answers the tool call of an accepted contract (tools mode; JSON mode has no call).
pub(crate) fn acknowledge(run: &mut Run, tool_call_id: Option<String>, content: String) {
    answer_call(run, tool_call_id, content, false);
}

/// Answers a tool call with `content`, an error when `is_error`.
pub(crate) fn answer_call(
    run: &mut Run,
    tool_call_id: Option<String>,
    content: String,
    is_error: bool,
) {
    if let Some(tool_call_id) = tool_call_id {
        run.context.push(Message::Tool { tool_call_id, content, is_error });
    }
}

/// An answer that breaks its contract: `action_validated` (invalid; with the strategy's
/// `phase` when it has several contracts) and an `invalid_action` observation answering the
/// call.
pub(crate) fn reject_answer(
    run: &mut Run,
    message: &str,
    tool_call_id: Option<&str>,
    phase: Option<&str>,
) -> Result<()> {
    run.emit(ActionValidated {
        phase: phase.map(str::to_owned),
        ..ActionValidated::invalid(None, message)
    })?;
    run.observe(None, ObservationStatus::InvalidAction, message, tool_call_id)?;
    Ok(())
}

/// A final action (`final_answer`, `ask_user`) the model chose: checked against the turn's
/// action space and recorded (`action_validated`); a valid one ends the work — the answer,
/// or the question for the user — and an invalid one is an `invalid_action` observation.
/// Any other action is `None` (it goes through [`Run::act`]).
pub(crate) fn final_action(
    run: &mut Run,
    action: &Action,
    space: &ActionSpace,
    tool_call_id: Option<String>,
) -> Result<Option<Flow>> {
    let ends = match action {
        Action::FinalAnswer { content } => Ends::Answer(content),
        Action::AskUser { question } => Ends::Question(question),
        _ => return Ok(None),
    };
    if let Err(message) = space.check(action) {
        run.emit(ActionValidated::invalid(Some(action), &message))?;
        run.observe(
            Some(action),
            ObservationStatus::InvalidAction,
            &message,
            tool_call_id.as_deref(),
        )?;
        return Ok(Some(Flow::Continue));
    }
    if let Ends::Answer(content) = ends
        && let Some(note) = review_answer(run, content)
    {
        run.emit(ActionValidated::invalid(Some(action), &note))?;
        run.observe(Some(action), ObservationStatus::Refused, &note, tool_call_id.as_deref())?;
        return Ok(Some(Flow::Continue));
    }
    run.emit(ActionValidated::valid(action))?;
    let ending = match ends {
        Ends::Question(question) => run.request_input(question, tool_call_id)?,
        Ends::Answer(content) => {
            run.pending_call = tool_call_id;
            Ending { outcome: Outcome::Completed, final_text: content.trim().to_owned() }
        }
    };
    Ok(Some(Flow::End(ending)))
}

/// The task's first selection when the skill ranking is sure of it ([`ActionSpace::sure`],
/// from format 32): the runtime makes it without a model call, in a turn of its own (framed
/// by [`start_turn`]/[`finish_turn`] with the turn's `note` counted, as a Decide turn's).
/// The transcript gets the action document the model would have written (a short thought,
/// the one name it could choose), so later turns read as they do after the model's own
/// selection; the action runs as any other, its `action_validated` marked
/// `chosen_by: "ranking"`. `None` when the turn offers no such selection; else the stop the
/// action imposed, if any.
pub(crate) async fn sure_selection(
    run: &mut Run,
    space: &ActionSpace,
    note: &str,
) -> Result<Option<Option<Stop>>> {
    let [name] = space.select.as_slice() else { return Ok(None) };
    if !space.sure || run.config.decide != DecideMode::Json {
        return Ok(None);
    }
    start_turn(run, note.chars().count(), &space.allowed(), None)?;
    let action = Action::SelectSkills { names: vec![name.clone()] };
    let thought = format!("I need to load the instructions of the {name} skill.");
    run.context.push(Message::from_response(&Response {
        text: action_document(&thought, &action),
        ..Response::default()
    }));
    let stop = run.act_chosen(&action, space, None, Some(CHOSEN_BY_RANKING)).await?;
    finish_turn(run, None)?;
    Ok(Some(stop))
}

/// `action_validated.chosen_by` of an action the runtime chose because the skill ranking was
/// sure of it ([`sure_selection`]).
pub(crate) const CHOSEN_BY_RANKING: &str = "ranking";

/// An action document as the one-line grammar has the model write it (`": "` after a key,
/// `", "` between members and items; `thought` first).
fn action_document(thought: &str, action: &Action) -> String {
    #[derive(serde::Serialize)]
    struct Document<'a> {
        thought: &'a str,
        action: &'a Action,
    }
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
    // A string and an action always serialize.
    let _ = serde::Serialize::serialize(&Document { thought, action }, &mut serializer);
    String::from_utf8(out).unwrap_or_default()
}

/// `serde_json`'s compact output with the separators of Python's `json.dumps`.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// How a final action ends the work.
enum Ends<'a> {
    Answer(&'a str),
    Question(&'a str),
}

/// A plan's steps, run in order by [`run_batch`].
pub(crate) trait Batch {
    /// How many steps the plan holds.
    fn len(&self) -> usize;

    /// Before step `index`, ahead of the tool-call limit: `false` ends the batch here with
    /// the steps done so far (plan-execute-think's round time limit).
    fn may_start(&mut self, _run: &mut Run, _index: usize) -> Result<bool> {
        Ok(true)
    }

    /// Runs step `index`: whether it ended `ok`, and a stop it imposed.
    async fn run_step(&mut self, run: &mut Run, index: usize) -> Result<(bool, Option<Stop>)>;
}

/// The record format from which a planned step that repeats a script run or tool call which
/// already worked in this run is not run again ([`already_done`]): its result is in the
/// record, and running it again left only the answer on offer, so the steps after it were
/// refused (the local 1.5B planned "total the amount column, convert 1 nmi to m, …" again
/// with the total it had, and the conversions never ran, round after round). From the same
/// format a stopped task's report lists each result once.
pub(crate) const REPEATS_SKIPPED_SINCE_FORMAT: u32 = 31;

/// Whether a batch's step `action` is a script run or tool call that already worked in this
/// run with the same arguments (from format 31): the batch marks it done and goes on without
/// running it.
pub(crate) fn already_done(run: &Run, action: &Action) -> bool {
    run.format >= REPEATS_SKIPPED_SINCE_FORMAT
        && action.is_call()
        && run.state.actions.iter().any(|record| {
            record.status == ObservationStatus::Ok && record.action.as_ref() == Some(action)
        })
}

/// How a batch ended.
#[derive(Debug)]
pub(crate) enum BatchEnd {
    /// Every step ran `ok` (`all_ok`), or one did not and ended the batch, or the batch was
    /// cut short by [`Batch::may_start`] (`all_ok`: nothing failed).
    Done { all_ok: bool },
    /// A budget was hit, or the run was cancelled.
    Stopped(Stop),
}

/// Runs `batch`'s steps in order: the tool-call limit is checked before each step, a step
/// that does not end `ok` ends the batch, and a stop ends it at once.
pub(crate) async fn run_batch(run: &mut Run, batch: &mut impl Batch) -> Result<BatchEnd> {
    for index in 0..batch.len() {
        if !batch.may_start(run, index)? {
            break;
        }
        if let Some(stop) = run.tool_calls_exhausted() {
            return Ok(BatchEnd::Stopped(stop));
        }
        match batch.run_step(run, index).await? {
            (_, Some(stop)) => return Ok(BatchEnd::Stopped(stop)),
            (false, None) => return Ok(BatchEnd::Done { all_ok: false }),
            (true, None) => {}
        }
    }
    Ok(BatchEnd::Done { all_ok: true })
}

/// Reviews a final answer before it is taken: an ungrounded answer is refused once per task
/// (the note to give the model is returned); a second is taken, counted and marked. From
/// format 8, a grounded answer that leaves some of the task's numbers unused while a call
/// used another is refused once too (a batch answered after its first item).
pub(crate) fn review_answer(run: &mut Run, answer: &str) -> Option<String> {
    if !run.grounding.applies {
        return None;
    }
    run.grounding.converted_in_results = false;
    let sources = run.answer_sources();
    let values = grounding::ungrounded(answer, &sources);
    if values.is_empty() {
        return review_completeness(run, answer)
            .or_else(|| review_measured(run, answer))
            .or_else(|| review_columns(run, answer))
            .or_else(|| review_target(run, answer))
            .or_else(|| review_choice(run, answer));
    }
    if run.grounding.refused {
        run.state.reasoning.ungrounded_answers += 1;
        run.grounding.ungrounded = true;
        return None;
    }
    // From format 10 a long value is cut in the note (the console printed a 200-digit
    // invented checksum whole).
    let values: Vec<String> = if run.format >= grounding::COUNTED_SINCE_FORMAT {
        values.iter().map(|value| grounding::shortened(value)).collect()
    } else {
        values
    };
    let worked = (run.format >= grounding::WORKED_SINCE_FORMAT)
        .then(|| grounding::worked_combination(answer, &sources, &run.state.task, run.format))
        .flatten();
    let note = match worked {
        Some(work) => {
            // From format 32 the arithmetic worked out leaves nothing to run: the next turn is
            // the answer alone, as after a refusal that names every value it needs.
            if run.format >= grounding::WORKED_ANSWER_SINCE_FORMAT {
                run.grounding.answer_from_results = true;
            }
            grounding::worked_refusal_note(&values, &work)
        }
        None => {
            // From format 32, where the task counts two things together and the results give
            // each count: their lines and the sum to work out, then the answer alone.
            let counted = (run.format >= grounding::TOTAL_OF_TWO_SINCE_FORMAT)
                .then(|| grounding::counted_lines(&run.state.task, &sources.results))
                .flatten();
            match counted {
                Some(lines) => {
                    run.grounding.answer_from_results = true;
                    grounding::counted_refusal_note(&values, &lines, &run.state.task)
                }
                None => grounding::refusal_note(&values, &sources.unbacked),
            }
        }
    };
    run.grounding.refused = true;
    run.state.reasoning.ungrounded_refusals += 1;
    Some(note)
}

/// The refusal, once per task, of an answer that states no figure where the task asks a
/// statistic of a column ([`grounding::measured_things`], format 26): after finding sales.csv,
/// the local 1.5B's plan-execute-think completed "Find the CSV file … and tell me the total of
/// its amount column" with "The script found the CSV file `sales.csv` …", no total. An
/// admission is not refused.
fn review_measured(run: &mut Run, answer: &str) -> Option<String> {
    if run.format < grounding::FILE_FIRST_SINCE_FORMAT
        || !run.grounding.strict
        || run.grounding.combine_figureless
        || grounding::states_figure(answer)
        || crate::run::admits(answer)
    {
        return None;
    }
    let things = grounding::measured_things(&run.state.task);
    if things.is_empty() {
        return None;
    }
    run.grounding.combine_figureless = true;
    run.state.reasoning.incomplete_refusals += 1;
    Some(grounding::measured_figureless_note(&things))
}

/// The refusal, once per task, of an answer that states none of the results' figures for some
/// column the task asks a statistic of ([`grounding::columns_without_figure`], format 30): "the
/// total of the units, unit_price and amount columns" answered with the amount's sum alone.
/// From format 37 a named column no result gives a line of counts too, where the results give
/// another's (only the `units` summary ran). An admission is not refused.
fn review_columns(run: &mut Run, answer: &str) -> Option<String> {
    if run.format < grounding::COLUMNS_SINCE_FORMAT
        || !run.grounding.strict
        || run.grounding.columns_refused
        || crate::run::admits(answer)
        // Where the task combines the columns' figures, the answer's figure is the result.
        || grounding::combines(&run.state.task, run.format)
    {
        return None;
    }
    let columns = grounding::named_columns(&run.state.task);
    if columns.is_empty() {
        return None;
    }
    let sources = run.answer_sources();
    let unrun = run.format >= grounding::UNRUN_COLUMNS_SINCE_FORMAT;
    let missing = grounding::columns_without_figure(
        answer,
        &run.state.task,
        &columns,
        &sources.results,
        unrun,
    );
    if missing.is_empty() {
        return None;
    }
    run.grounding.columns_refused = true;
    run.state.reasoning.incomplete_refusals += 1;
    Some(grounding::columns_note(&missing))
}

/// The refusal, once per task, of an answer that restates one result where the task asks to
/// combine two ("add A to B" answered with A; format 10). From format 11 a second answer that
/// restates another single result is refused too, naming both (refused once, the local 1.5B
/// fetched the other total and answered with it alone). From format 12 an answer that states
/// no figure at all is refused once too (an admission is not).
fn review_combination(run: &mut Run, answer: &str) -> Option<String> {
    if run.format < grounding::COUNTED_SINCE_FORMAT
        || !grounding::combines(&run.state.task, run.format)
    {
        return None;
    }
    if run.format >= grounding::ROUNDS_SINCE_FORMAT
        && !run.grounding.combine_figureless
        && !grounding::states_figure(answer)
        && !crate::run::admits(answer)
    {
        run.grounding.combine_figureless = true;
        run.state.reasoning.incomplete_refusals += 1;
        return Some(grounding::combine_figureless_note());
    }
    let again = run.format >= grounding::EACH_SINCE_FORMAT;
    let refused = &run.grounding.combine_refused;
    if refused.len() >= if again { 2 } else { 1 } {
        return None;
    }
    let sources = run.answer_sources();
    let Some(figure) = grounding::restates_one_result(answer, &sources) else {
        // From format 24, the values restated side by side with no arithmetic ("A is 1705.47
        // and B is 212" for "add A to B"): refused once, with the sum to work out.
        if run.format < grounding::COUNTS_FROM_RESULTS_SINCE_FORMAT {
            return None;
        }
        let figures = grounding::restates_results(answer, &sources)?;
        run.grounding.combine_refused = figures.clone();
        run.grounding.answer_from_results = true;
        run.state.reasoning.incomplete_refusals += 1;
        return Some(grounding::combine_again_note(&figures, &run.state.task));
    };
    if run.grounding.combine_refused.contains(&figure) {
        // From format 29 the same result restated again is refused once more, with the
        // results' lines to combine: refused once for giving the amount total alone, the local
        // 1.5B ran the same script again and gave the same answer, which was taken.
        if run.format < grounding::WORKED_SINCE_FORMAT || run.grounding.combine_lines_shown {
            return None;
        }
        let lines = grounding::lines_to_combine(&run.state.task, &sources.results)?;
        run.grounding.combine_lines_shown = true;
        // From format 32 those lines leave nothing to run: the answer alone (told "work out
        // their sum (1705.47 + 212)", the 1.5B ran the units' total again, then gave the
        // amount's alone once more, which was taken).
        run.grounding.answer_from_results |= run.format >= grounding::WORKED_ANSWER_SINCE_FORMAT;
        run.state.reasoning.incomplete_refusals += 1;
        return Some(grounding::combine_lines_note(&lines, &run.state.task));
    }
    run.grounding.combine_refused.push(figure);
    run.state.reasoning.incomplete_refusals += 1;
    Some(match &run.grounding.combine_refused[..] {
        [figure] => grounding::combine_note(figure),
        figures => {
            run.grounding.answer_from_results = run.format >= grounding::ROUNDS_SINCE_FORMAT;
            grounding::combine_again_note(figures, &run.state.task)
        }
    })
}

/// The refusal, once per task and only with `ask_user` on offer (format 22), of an answer that
/// gives one of several like results the task names none of: "the total of the column"
/// answered with the units' sum of a summary of every column ([`grounding::unchosen_label`]).
fn review_choice(run: &mut Run, answer: &str) -> Option<String> {
    if run.format < grounding::CHOICE_SINCE_FORMAT
        || !run.config.guard.ask_user
        || run.grounding.choice_refused
    {
        return None;
    }
    let choice = grounding::unchosen_label(answer, &run.answer_sources())?;
    run.grounding.choice_refused = true;
    run.state.reasoning.incomplete_refusals += 1;
    Some(grounding::choice_note(&choice))
}

/// The refusal of an answer that names none of the units the task asks to convert into
/// ([`grounding::unnamed_targets`], format 27), once a script ran: asked to "total the units
/// column of sales.csv and convert that many pounds to kilograms", the local 1.5B answered "The
/// units total 212." and the run completed. Refused again, twice a task at most, only after a
/// new result: plan-execute-think's first such answer came before the total ("the total … is
/// 1", from a file search), and the one refusal was spent on it. From format 38 a unit named
/// with none of the results' figures in it counts as one not named
/// ([`grounding::figureless_targets`]). An admission is not refused.
fn review_target(run: &mut Run, answer: &str) -> Option<String> {
    if run.format < grounding::TARGET_UNIT_SINCE_FORMAT
        || !run.grounding.strict
        || crate::run::admits(answer)
        || !ran_script(run)
    {
        return None;
    }
    let results = run.state.task_actions().filter(|record| record.is_result()).count();
    let times = match run.grounding.target_refused {
        None => 0,
        Some((before, times)) if times < 2 && results > before => times,
        Some(_) => return None,
    };
    let targets = grounding::conversion_targets(&run.state.task);
    let sources = run.answer_sources();
    let mut unnamed = grounding::unnamed_targets(answer, &targets);
    // From format 38 a unit named with none of the results' figures in it counts as unnamed.
    if run.format >= grounding::FIGURELESS_TARGET_SINCE_FORMAT {
        unnamed.extend(grounding::figureless_targets(answer, &targets, &sources.results));
    }
    if unnamed.is_empty() {
        return None;
    }
    let (mut lines, mut all_given) = (Vec::new(), false);
    if run.format >= grounding::WORKED_SINCE_FORMAT {
        lines = grounding::target_result_lines(&unnamed, &sources.results);
        // From format 31 with every other conversion the answer leaves out.
        if !lines.is_empty() && run.format >= REPEATS_SKIPPED_SINCE_FORMAT {
            for line in grounding::conversions_left_out(answer, &sources.results) {
                if !lines.contains(&line) {
                    lines.push(line);
                }
            }
        }
        // From format 36, when the results give a converted figure in each unit the answer
        // leaves out and every value of the task has had its call (the batch's later items
        // are the completeness check's), nothing is left to run: the answer alone.
        all_given = run.format >= grounding::CONVERTED_ANSWER_SINCE_FORMAT
            && grounding::unused_task_numbers(&run.state.task, &run.task_script_args(), "", true)
                .1
                .is_empty()
            && unnamed.iter().all(|unit| {
                !grounding::target_result_lines(std::slice::from_ref(unit), &sources.results)
                    .is_empty()
            });
    }
    run.grounding.target_refused = Some((results, times + 1));
    run.state.reasoning.incomplete_refusals += 1;
    if all_given {
        run.grounding.answer_from_results = true;
        run.grounding.converted_in_results = true;
    }
    if !lines.is_empty() {
        return Some(grounding::target_in_results_note(&unnamed, &lines));
    }
    Some(grounding::target_unit_note(&unnamed))
}

/// Whether a script ran in the current task (the answer checks that need a result to hold the
/// answer to).
fn ran_script(run: &Run) -> bool {
    run.state.task_actions().any(|record| matches!(record.action, Some(Action::RunScript { .. })))
}

/// The refusal of an answer that leaves numbers of the task unused (format 8): once, and again
/// after each step of the batch (a call that used another of the task's numbers).
fn review_completeness(run: &mut Run, answer: &str) -> Option<String> {
    if !run.grounding.strict {
        return None;
    }
    let args = run.task_script_args();
    if !ran_script(run) {
        return None;
    }
    let each = run.format >= grounding::EACH_SINCE_FORMAT;
    let (used, unused) = grounding::unused_task_numbers(&run.state.task, &args, answer, each);
    if unused.is_empty() || run.grounding.incomplete_at.is_some_and(|before| used <= before) {
        return review_combination(run, answer);
    }
    run.grounding.incomplete_at = Some(used);
    run.state.reasoning.incomplete_refusals += 1;
    Some(grounding::incomplete_note(&unused))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_action_document_reads_as_the_grammar_writes_one() {
        let action = Action::SelectSkills { names: vec!["csv-summary".to_owned()] };
        let text = action_document("Say \"why\".", &action);
        assert_eq!(
            text,
            r#"{"thought": "Say \"why\".", "action": {"type": "select_skills", "args": {"names": ["csv-summary"]}}}"#
        );
        let response = model_adapter::Response { text, ..Response::default() };
        let decision = crate::action::parse_answer(&response, false).unwrap();
        assert_eq!(decision.action, action);
        assert_eq!(decision.thought.as_deref(), Some("Say \"why\"."));
    }
}
