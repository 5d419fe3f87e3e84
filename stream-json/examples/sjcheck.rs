//! `sjcheck`: validate a JSON document with the streaming parser and print subscribed values.
//!
//! ```text
//! cargo run -q -p stream-json --example sjcheck -- [--chunk N] [--path PATTERN]... [--deltas] FILE|-
//! ```
//!
//! Exit status: 0 when the document is valid, 1 when it is not (the error, with its byte offset
//! and JSON path, goes to stderr), 2 on usage errors (including an unreadable FILE).
//! With `--path`, one line per matched value: `{"path":"$.a[0]","value":...}` (the value's
//! exact input text with insignificant whitespace removed). With `--deltas`, also
//! `{"path":"$.a[0]","delta":"..."}` lines for string values as their text arrives.
//! `--chunk N` feeds the input in N-byte chunks (default: all at once).

use std::io::{self, BufWriter, Read, Write};
use std::process::ExitCode;

use stream_json::{Capture, Event, EventKind, Parser};

/// How much `--chunk` reads at a time (at least two pieces).
const READ_BUFFER_BYTES: usize = 256 * 1024;

const USAGE: &str =
    "usage: sjcheck [--chunk N] [--path PATTERN]... [--deltas] FILE   (FILE may be - for stdin)";

struct Options {
    chunk: Option<usize>,
    paths: Vec<String>,
    deltas: bool,
    file: String,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut options =
        Options { chunk: None, paths: Vec::new(), deltas: false, file: String::new() };
    let mut file = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--chunk" => {
                let value = iter.next().ok_or("--chunk needs a number of bytes")?;
                match value.parse::<usize>() {
                    Ok(size) if size > 0 => options.chunk = Some(size),
                    _ => {
                        return Err(format!(
                            "--chunk needs a positive number of bytes, got {value:?}"
                        ));
                    }
                }
            }
            "--path" => {
                let pattern = iter.next().ok_or("--path needs a pattern such as '$.a.b'")?;
                stream_json::Pattern::parse(pattern).map_err(|error| error.to_string())?;
                options.paths.push(pattern.clone());
            }
            "--deltas" => options.deltas = true,
            "-h" | "--help" => return Err(String::new()),
            "--" => {
                let rest: Vec<&String> = iter.by_ref().collect();
                match rest.as_slice() {
                    [only] if file.is_none() => file = Some((*only).clone()),
                    _ => return Err("expected exactly one FILE".to_owned()),
                }
            }
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            path => {
                if file.replace(path.to_owned()).is_some() {
                    return Err("expected exactly one FILE".to_owned());
                }
            }
        }
    }
    options.file = file.ok_or("missing FILE (use - for stdin)")?;
    Ok(options)
}

/// The value's text without insignificant whitespace (the input is already validated JSON).
fn minify(raw: &[u8], out: &mut Vec<u8>) {
    let mut in_string = false;
    let mut escaped = false;
    for &byte in raw {
        if in_string {
            out.push(byte);
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
        } else if !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = byte == b'"';
            out.push(byte);
        }
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_args(&args) {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("sjcheck: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let mut parser = Parser::new();
    for pattern in &options.paths {
        let subscribed = parser.subscribe(pattern, Capture::Raw).and_then(|_| {
            if options.deltas {
                parser.subscribe(pattern, Capture::Deltas).map(|_| ())
            } else {
                Ok(())
            }
        });
        if let Err(error) = subscribed {
            eprintln!("sjcheck: {error}");
            return ExitCode::from(2);
        }
    }

    let mut input: Box<dyn Read> = if options.file == "-" {
        Box::new(io::stdin().lock())
    } else {
        match std::fs::File::open(&options.file) {
            Ok(file) => Box::new(file),
            Err(error) => {
                eprintln!("sjcheck: cannot read {}: {error}", options.file);
                return ExitCode::from(2);
            }
        }
    };

    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut line = Vec::new();
    let mut handler = |event: Event<'_>| {
        line.clear();
        match event.kind {
            EventKind::Raw(raw) => {
                line.extend_from_slice(b"{\"path\":");
                line.extend_from_slice(json_string(&event.path.to_string()).as_bytes());
                line.extend_from_slice(b",\"value\":");
                minify(raw, &mut line);
                line.extend_from_slice(b"}\n");
            }
            EventKind::StringDelta(delta) => {
                let path = json_string(&event.path.to_string());
                line.extend_from_slice(
                    format!("{{\"path\":{path},\"delta\":{}}}\n", json_string(delta)).as_bytes(),
                );
            }
            _ => return,
        }
        // A closed stdout (e.g. `| head`) must not change the verdict.
        let _ = out.write_all(&line);
    };

    let result = feed_all(&mut parser, input.as_mut(), options.chunk, &mut handler);
    let result = match result {
        Ok(()) => parser.finish(&mut handler).map_err(|error| error.to_string()),
        Err(error) => Err(error),
    };
    let _ = out.flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) if message.starts_with("cannot read") => {
            eprintln!("sjcheck: {message}");
            ExitCode::from(2)
        }
        Err(message) => {
            eprintln!("sjcheck: {message}");
            ExitCode::from(1)
        }
    }
}

fn feed_all(
    parser: &mut Parser,
    input: &mut dyn Read,
    chunk: Option<usize>,
    handler: &mut dyn FnMut(Event<'_>),
) -> Result<(), String> {
    let read_error = |error: io::Error| format!("cannot read input: {error}");
    match chunk {
        None => {
            let mut document = Vec::new();
            input.read_to_end(&mut document).map_err(read_error)?;
            parser.feed(&document, handler).map_err(|error| error.to_string())
        }
        Some(size) => {
            // Read through a large buffer and feed exact `size`-byte pieces from it, so
            // `--chunk` measures the parser as a streaming caller drives it, not one `read`
            // system call per piece. A short read (a pipe delivering slowly) only means
            // fewer whole pieces this time: the rest waits for more input.
            let mut buffer = vec![0; READ_BUFFER_BYTES.max(size.saturating_mul(2))];
            let mut filled = 0;
            loop {
                let read = match input.read(&mut buffer[filled..]) {
                    Ok(read) => read,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => return Err(read_error(error)),
                };
                if read == 0 {
                    break;
                }
                filled += read;
                let whole = filled - filled % size;
                for piece in buffer[..whole].chunks_exact(size) {
                    parser.feed(piece, handler).map_err(|error| error.to_string())?;
                }
                buffer.copy_within(whole..filled, 0);
                filled -= whole;
            }
            if filled > 0 {
                parser.feed(&buffer[..filled], handler).map_err(|error| error.to_string())?;
            }
            Ok(())
        }
    }
}
