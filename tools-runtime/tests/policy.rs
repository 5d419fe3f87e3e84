//! Policy merging and approvals: data-driven merge cases, then real runs that are forbidden,
//! denied, timed out or approved, each with its audit record.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use serde::Deserialize;
use support::{Fixture, MachineLayers, ran, refused};
use tools_runtime::{
    ApprovalAnswer, ApprovalMode, ApprovalRequest, Approver, Decision, PrefixRule, RefusalKind,
    RuleSet, merge_decisions,
};

#[derive(Debug, Deserialize)]
struct MergeCase {
    name: String,
    skill_allowed_tools: Option<Vec<String>>,
    user_rules: RuleSet,
    argv: Vec<String>,
    decision: Decision,
}

#[test]
fn merged_decisions_follow_the_strictest_rule() {
    let cases: Vec<MergeCase> =
        serde_json::from_str(include_str!("data/policy_cases.json")).unwrap();
    let actual: Vec<(String, Decision)> = cases
        .iter()
        .map(|case| {
            let skill = case.skill_allowed_tools.as_deref().map(RuleSet::from_allowed_tools);
            let merged = merge_decisions(skill.as_ref(), &case.user_rules, &case.argv);
            (case.name.clone(), merged.decision)
        })
        .collect();
    let expected: Vec<(String, Decision)> =
        cases.iter().map(|case| (case.name.clone(), case.decision)).collect();
    assert_eq!(actual, expected);
}

#[derive(Debug)]
struct ScriptedApprover {
    answer: Option<ApprovalAnswer>,
}

#[async_trait]
impl Approver for ScriptedApprover {
    fn name(&self) -> String {
        "scripted".to_owned()
    }

    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        match &self.answer {
            Some(answer) => answer.clone(),
            None => std::future::pending().await,
        }
    }
}

fn user_prompts_for_sh() -> RuleSet {
    RuleSet {
        rules: vec![PrefixRule { prefix: vec!["sh".to_owned()], decision: Decision::Prompt }],
        default: Decision::Allow,
    }
}

#[tokio::test]
async fn skill_allows_but_user_forbids_is_refused_and_audited() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy.rules = RuleSet {
        rules: vec![PrefixRule { prefix: vec!["sh".to_owned()], decision: Decision::Forbidden }],
        default: Decision::Allow,
    };
    let mut request = fixture.request("forbidden", &["sh", "-c", "echo ran > ran.txt"]);
    request.skill = Some("demo".to_owned());
    request.skill_rules = Some(RuleSet::from_allowed_tools(&["Bash(sh:*)"]));
    let refusal = refused(fixture.runtime_with(config).run(&request).await.unwrap());
    assert_eq!(refusal.kind, RefusalKind::PolicyForbidden);
    assert_eq!(
        refusal.message,
        "policy forbids `sh -c echo ran > ran.txt` (skill rule `sh` says allow, user rule `sh` \
         says forbidden)"
    );
    assert!(!fixture.workspace.join("ran.txt").exists());
    let record = fixture.audit_record("forbidden");
    assert_eq!(record.outcome, "policy_forbidden");
    assert_eq!(record.skill.as_deref(), Some("demo"));
    assert_eq!(record.decision.unwrap().decision, Decision::Forbidden);
    assert_eq!(record.sandbox, None);
}

#[tokio::test]
async fn approval_denied_and_timed_out_are_typed_refusals() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy.rules = user_prompts_for_sh();
    config.policy.approval_mode = ApprovalMode::AskForRisky;
    config.policy.approval_timeout = Duration::from_millis(50);

    let denying = Arc::new(ScriptedApprover {
        answer: Some(ApprovalAnswer::Denied { reason: Some("not today".to_owned()) }),
    });
    let request = fixture.request("denied", &["sh", "-c", "echo ran > ran.txt"]);
    let refusal = refused(
        fixture.runtime_with(config.clone()).with_approver(denying).run(&request).await.unwrap(),
    );
    assert_eq!(refusal.kind, RefusalKind::ApprovalDenied);
    assert_eq!(refusal.message, "scripted denied `sh -c echo ran > ran.txt`: not today");

    let silent = Arc::new(ScriptedApprover { answer: None });
    let request = fixture.request("silent", &["sh", "-c", "echo ran > ran.txt"]);
    let refusal = refused(
        fixture.runtime_with(config.clone()).with_approver(silent).run(&request).await.unwrap(),
    );
    assert_eq!(refusal.kind, RefusalKind::ApprovalTimedOut);
    assert!(!fixture.workspace.join("ran.txt").exists());

    let mut never = config.clone();
    never.policy.approval_mode = ApprovalMode::Never;
    let request = fixture.request("never", &["sh", "-c", "echo ran > ran.txt"]);
    let refusal = refused(fixture.runtime_with(never).run(&request).await.unwrap());
    assert_eq!(refusal.kind, RefusalKind::ApprovalUnavailable);

    let outcomes: Vec<(String, Option<String>)> = fixture
        .audit_records()
        .into_iter()
        .map(|record| (record.outcome, record.approver))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("approval_denied".to_owned(), Some("scripted".to_owned())),
            ("approval_timed_out".to_owned(), Some("scripted".to_owned())),
            ("approval_unavailable".to_owned(), None),
        ]
    );
}

#[tokio::test]
async fn an_approved_command_runs_and_names_its_approver() {
    let machine = MachineLayers::probe();
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy.rules = user_prompts_for_sh();
    config.policy.approval_mode = ApprovalMode::AlwaysAsk;
    let approving = Arc::new(ScriptedApprover { answer: Some(ApprovalAnswer::Approved) });
    let request = fixture.request("approved", &["sh", "-c", "echo ran > ran.txt; echo ok"]);
    let outcome =
        fixture.runtime_with(config).with_approver(approving).run(&request).await.unwrap();
    let record = fixture.audit_record("approved");
    assert_eq!(record.approver.as_deref(), Some("scripted"));
    if !machine.can_confine() {
        assert_eq!(refused(outcome).kind, RefusalKind::SandboxUnavailable);
        return;
    }
    let result = ran(outcome);
    assert_eq!(result.stdout, "ok\n");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("ran.txt")).unwrap(), "ran\n");
    assert_eq!(record.outcome, "ran");
}

#[tokio::test]
async fn skill_scripts_run_from_their_folder_and_cannot_name_paths_outside_it() {
    let machine = MachineLayers::probe();
    let fixture = Fixture::with_protected_tree(support::Owner::User);
    let skill = fixture.workspace.join("skill");
    let script = skill.join("scripts/hello.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"hello $1\"\necho pwned > \"$0\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    for escape in ["../data.txt", "/etc/passwd", "", "scripts"] {
        let refusal = tools_runtime::ExecRequest::for_skill_script(
            "skill",
            &skill,
            escape,
            Vec::new(),
            &fixture.workspace,
        )
        .unwrap_err();
        assert_eq!(refusal.kind, RefusalKind::PathOutsideWorkspace, "{escape}");
    }

    let mut request = tools_runtime::ExecRequest::for_skill_script(
        "skill",
        &skill,
        "scripts/hello.sh",
        vec!["world".to_owned()],
        &fixture.workspace,
    )
    .unwrap();
    request.call_id = "skill-script".to_owned();
    assert_eq!(request.protected_paths, vec![skill.canonicalize().unwrap()]);
    let outcome = fixture.runtime().run(&request).await.unwrap();
    if !machine.bubblewrap {
        assert_eq!(refused(outcome).kind, RefusalKind::SandboxUnavailable);
        return;
    }
    let result = ran(outcome);
    assert_eq!(result.stdout, "hello world\n");
    assert!(result.stderr.contains("Read-only file system"), "{result:?}");
    assert!(std::fs::read_to_string(&script).unwrap().starts_with("#!/bin/sh\n"));
    assert_eq!(fixture.audit_record("skill-script").skill.as_deref(), Some("skill"));
}

#[tokio::test]
async fn a_missing_helper_is_an_error_and_is_audited() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.helper = tools_runtime::SandboxHelper::at("/nonexistent/tools-runtime-sandbox");
    let request = fixture.request("no-helper", &["true"]);
    let runtime = fixture.runtime_with(config);
    // The run future can move between threads (agent-core spawns it).
    fn assert_send<T: Send>(value: T) -> T {
        value
    }
    let error = assert_send(runtime.run(&request)).await.unwrap_err();
    assert!(matches!(error, tools_runtime::Error::Spawn { .. }), "{error}");
    let record = fixture.audit_record("no-helper");
    assert_eq!(record.outcome, "error");
    assert_eq!(
        record.refusal.as_deref(),
        Some(
            "cannot start sandbox helper /nonexistent/tools-runtime-sandbox: No such file or \
             directory (os error 2)"
        )
    );
}

#[tokio::test]
async fn a_workspace_copy_of_a_shell_named_like_an_allowed_program_is_refused() {
    let fixture = Fixture::new();
    let runtime = fixture.runtime();
    let skill_rules = RuleSet::from_allowed_tools(&["Bash(git:*)", "Bash(cp:*)"]);
    let mut copy = fixture.request("copy-shell", &["cp", "/bin/sh", "git"]);
    copy.skill_rules = Some(skill_rules.clone());
    let copied = runtime.run(&copy).await.unwrap();
    let mut outcomes = vec![fixture.audit_record("copy-shell").outcome];
    let workspace_git = fixture.workspace.join("git").display().to_string();
    for (call_id, program) in [("relative-copy", "./git"), ("absolute-copy", &workspace_git)] {
        let mut request = fixture.request(call_id, &[program, "-c", "echo escaped"]);
        request.skill_rules = Some(skill_rules.clone());
        let refusal = refused(runtime.run(&request).await.unwrap());
        assert_eq!(refusal.kind, RefusalKind::PolicyForbidden, "{refusal:?}");
        outcomes.push(fixture.audit_record(call_id).outcome);
    }
    assert_eq!(outcomes, ["ran", "policy_forbidden", "policy_forbidden"], "{copied:?}");
}

#[tokio::test]
async fn an_invalid_request_is_an_error_and_is_audited() {
    let fixture = Fixture::new();
    let runtime = fixture.runtime();
    let mut empty_program = fixture.request("invalid-program", &["true"]);
    empty_program.program = String::new();
    let mut tiny_output = fixture.request("invalid-output", &["true"]);
    tiny_output.max_output_bytes = 1;
    let mut no_workspace = fixture.request("invalid-workspace", &["true"]);
    no_workspace.workspace_roots.clear();
    let mut audited = Vec::new();
    for request in [&empty_program, &tiny_output, &no_workspace] {
        let error = runtime.run(request).await.unwrap_err();
        assert!(matches!(error, tools_runtime::Error::InvalidRequest(_)), "{error}");
        let record = fixture.audit_record(&request.call_id);
        audited.push((record.outcome, record.refusal));
    }
    let expected: Vec<(String, Option<String>)> = [
        "invalid exec request: the program is empty",
        "invalid exec request: max_output_bytes must be at least 2",
        "invalid exec request: no workspace root",
    ]
    .iter()
    .map(|message| ("error".to_owned(), Some((*message).to_owned())))
    .collect();
    assert_eq!(audited, expected);
}

#[test]
fn the_helper_is_located_next_to_the_running_binary_or_its_parent_directory() {
    let located = tools_runtime::SandboxHelper::locate().unwrap();
    assert_eq!(
        located.program.canonicalize().unwrap(),
        std::path::Path::new(env!("CARGO_BIN_EXE_tools-runtime-sandbox")).canonicalize().unwrap()
    );
}
