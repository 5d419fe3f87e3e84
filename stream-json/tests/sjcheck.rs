//! The `sjcheck` example is a stable interface: exit codes, output lines, error messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;

/// `cargo test` builds the examples next to the test binaries: target/<profile>/examples.
fn sjcheck_binary() -> PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    let profile_dir = test_binary.parent().unwrap().parent().unwrap();
    let binary =
        profile_dir.join("examples").join(format!("sjcheck{}", std::env::consts::EXE_SUFFIX));
    assert!(binary.exists(), "{} not built; run through `cargo test`", binary.display());
    binary
}

fn sjcheck(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(sjcheck_binary())
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A usage error exits before reading stdin: a broken pipe here is expected.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8(output.stdout.clone()).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn valid_file_with_paths_prints_one_line_per_match() {
    let output = sjcheck(&["--path", "$.plan_update.steps[*].title", "examples/action.json"], b"");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        stdout_lines(&output),
        [
            r#"{"path":"$.plan_update.steps[0].title","value":"read the workbook"}"#,
            r#"{"path":"$.plan_update.steps[1].title","value":"summarise"}"#,
        ]
    );
}

#[test]
fn deltas_concatenate_to_the_value_at_any_chunk_size() {
    let document = br#"{"a": {"b": "caf\u00e9 \ud83d\ude00 and more text", "c": [1, {"d": 2}]}}"#;
    let mut reference = None;
    for chunk in ["1", "2", "3", "7", "64"] {
        let output = sjcheck(
            &["--chunk", chunk, "--deltas", "--path", "$.a.b", "--path", "$.a.c", "-"],
            document,
        );
        assert_eq!(output.status.code(), Some(0));
        let lines: Vec<serde_json::Value> =
            stdout_lines(&output).iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        let text: String = lines.iter().filter_map(|line| line["delta"].as_str()).collect();
        assert_eq!(text, "café 😀 and more text", "chunk {chunk}");
        let values: Vec<&serde_json::Value> =
            lines.iter().filter(|line| line.get("value").is_some()).collect();
        assert_eq!(
            values,
            [
                &serde_json::json!({"path": "$.a.b", "value": "café 😀 and more text"}),
                &serde_json::json!({"path": "$.a.c", "value": [1, {"d": 2}]}),
            ]
        );
        // Small chunks deliver the text in several pieces, never the same piece twice.
        let pieces = lines.iter().filter(|line| line.get("delta").is_some()).count();
        if chunk == "1" {
            assert!(pieces > 10, "{pieces}");
        }
        let values_only: Vec<serde_json::Value> =
            lines.into_iter().filter(|line| line.get("value").is_some()).collect();
        match &reference {
            None => reference = Some(values_only),
            Some(reference) => assert_eq!(&values_only, reference),
        }
    }
}

#[test]
fn values_keep_their_exact_text_without_whitespace() {
    let output = sjcheck(&["--path", "$", "-"], b" { \"n\" : 1.50e+2 , \"s\" : \"a b\\u0041\" } ");
    assert_eq!(stdout_lines(&output), [r#"{"path":"$","value":{"n":1.50e+2,"s":"a b\u0041"}}"#]);
}

#[test]
fn invalid_document_exits_1_naming_offset_and_path() {
    let output = sjcheck(&["--chunk", "3", "-"], br#"{"action": {"args": [1, 2,]}}"#);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "sjcheck: invalid JSON at byte 26 ($.action.args[2]): expected a JSON value, found ']'\n"
    );
    let output = sjcheck(&["-"], br#"{"a": "#);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "sjcheck: incomplete JSON at end of input (byte 6, $.a): expected a JSON value\n"
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["--chunk", "0", "-"],
        &["--chunk", "x", "-"],
        &["--path", "$..a", "-"],
        &["--bogus", "-"],
        &["a.json", "b.json"],
        &["does/not/exist.json"],
    ] {
        let output = sjcheck(args, b"{}");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stderr.starts_with(b"sjcheck: "), "{args:?}");
    }
}

#[test]
fn index_outside_the_i_json_range_and_malformed_indices_exit_2() {
    for pattern in ["$[9007199254740992]", "$[01]", "$[-0]", "$[+1]", "$[1 2]", "$ "] {
        let output = sjcheck(&["--path", pattern, "-"], b"[1]");
        assert_eq!(output.status.code(), Some(2), "{pattern}");
        assert!(output.stderr.starts_with(b"sjcheck: invalid path pattern"), "{pattern}");
        assert!(output.stdout.is_empty(), "{pattern}");
    }
    let output = sjcheck(&["--path", "$[9007199254740991]", "--path", "$ [0]", "-"], b"[1]");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout_lines(&output), [r#"{"path":"$[0]","value":1}"#]);
}

/// `--chunk N` feeds exact N-byte pieces whatever the reads deliver: stdin written one byte
/// per `write` (a pipe delivering slowly) gives the same lines as the file read at once, and
/// a long document gives one delta line per piece that ends inside the string.
#[test]
fn chunks_are_exact_when_a_pipe_delivers_slowly() {
    let text = "wörld \\u00e9 \\ud83d\\ude00 line\\n ".repeat(40);
    let document = format!(r#"{{"a": {{"b": "{text}", "c": [1, 2.5e3, true, null]}}}}"#);
    let dir = std::env::temp_dir().join(format!("sjcheck-slow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("document.json");
    std::fs::write(&file, &document).unwrap();
    for chunk in ["1", "7", "16", "4096"] {
        let args = ["--chunk", chunk, "--deltas", "--path", "$.a.b", "--path", "$.a.c"];
        let from_file = Command::new(sjcheck_binary()).args(args).arg(&file).output().unwrap();
        assert_eq!(from_file.status.code(), Some(0));

        let mut child = Command::new(sjcheck_binary())
            .args(args)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let bytes = document.clone().into_bytes();
        let writer = std::thread::spawn(move || {
            for byte in bytes {
                stdin.write_all(&[byte]).unwrap();
                stdin.flush().unwrap();
            }
        });
        let from_pipe = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_eq!(
            from_pipe.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&from_pipe.stderr)
        );
        assert_eq!(stdout_lines(&from_pipe), stdout_lines(&from_file), "chunk {chunk}");

        // The same deltas as the parser gives for exact `size`-byte pieces, in process.
        let size: usize = chunk.parse().unwrap();
        let mut parser = stream_json::Parser::new();
        parser.subscribe("$.a.b", stream_json::Capture::Deltas).unwrap();
        let mut expected = Vec::new();
        let mut handler = |event: stream_json::Event<'_>| {
            if let stream_json::EventKind::StringDelta(delta) = event.kind {
                expected.push(serde_json::json!({"path": "$.a.b", "delta": delta}));
            }
        };
        for piece in document.as_bytes().chunks(size) {
            parser.feed(piece, &mut handler).unwrap();
        }
        parser.finish(&mut handler).unwrap();
        let deltas: Vec<serde_json::Value> = stdout_lines(&from_pipe)
            .iter()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|line| line.get("delta").is_some())
            .collect();
        assert_eq!(deltas, expected, "chunk {chunk}");
        assert!(size > 100 || deltas.len() > 10, "chunk {chunk}: {} deltas", deltas.len());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
