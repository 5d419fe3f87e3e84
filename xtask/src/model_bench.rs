//! `cargo xtask model-bench [--url URL] [--repeat N] [--requests DIR]`: recorded requests of the
//! embedded model replayed against its server, each call's wall time set against the server's
//! own time for it.
//!
//! The requests under `models/benches/requests/` are the request bodies one run of the README's
//! main job sent (recorded on the wire, in order: a jump-forward call is several of them). Each
//! is sent as recorded, streamed and read to its end; the call's wall time (from connect to the
//! last byte) is set against llama.cpp's own `timings` for it (prompt evaluation + generation)
//! from the stream's last chunk. The ratio is what the client and HTTP add to the model's own
//! work; the tokens and milliseconds beside it show where the model's time goes. The sequence
//! runs `--repeat` times (3 by default): the first pass may find the prompt cache cold, the
//! others replay it warm. Medians and totals per pass; nothing here is timed against a bound.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use model_adapter::ServerTimings;
use serde_json::Value;
use skills_agent_models::local_model::{LocalModel, ModelSize, cache_dir};

const USAGE: &str = "usage: cargo xtask model-bench [--url URL] [--repeat N] [--requests DIR]";

/// One replayed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The request file's name.
    pub name: String,
    /// From connect to the stream's last byte, milliseconds.
    pub wall_ms: f64,
    /// The server's `timings` for the call.
    pub timings: ServerTimings,
}

/// The model's own time for a call: prompt evaluation and generation.
fn model_ms(timings: &ServerTimings) -> f64 {
    timings.prompt_ms + timings.predicted_ms
}

/// Runs `model-bench <arguments>`.
pub fn run(arguments: &[String]) -> Result<()> {
    let options = parse(arguments)?;
    let url = match options.url {
        Some(url) => url,
        None => LocalModel::new(ModelSize::B1_5, cache_dir()?)
            .running()
            .map(|state| state.url())
            .context(
            "no --url and the 1.5b model is not running (`skills-agent model start` starts it)",
        )?,
    };
    let requests = read_requests(&options.requests)?;
    println!(
        "model-bench: {} recorded requests against {url}, {} passes",
        requests.len(),
        options.repeat
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let client = reqwest::Client::new();
    for pass in 1..=options.repeat {
        let mut calls = Vec::new();
        for (name, body) in &requests {
            let call = runtime.block_on(replay(&client, &url, name, body))?;
            calls.push(call);
        }
        println!("\npass {pass}\n{}", table(&calls));
    }
    Ok(())
}

struct Options {
    url: Option<String>,
    repeat: usize,
    requests: PathBuf,
}

fn parse(arguments: &[String]) -> Result<Options> {
    let mut options = Options {
        url: None,
        repeat: 3,
        requests: crate::tidy::workspace_root().join("models/benches/requests"),
    };
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let mut value =
            || rest.next().with_context(|| format!("{argument} needs a value\n{USAGE}"));
        match argument.as_str() {
            "--url" => options.url = Some(value()?.trim_end_matches('/').to_owned()),
            "--repeat" => {
                let text = value()?;
                options.repeat =
                    text.parse().ok().filter(|repeat| *repeat > 0).with_context(|| {
                        format!("--repeat takes a count of 1 or more, not `{text}`")
                    })?;
            }
            "--requests" => options.requests = PathBuf::from(value()?),
            other => bail!("unexpected argument `{other}`\n{USAGE}"),
        }
    }
    Ok(options)
}

/// The `*.json` files of `directory` in name order, each a request body.
fn read_requests(directory: &Path) -> Result<Vec<(String, Value)>> {
    let entries = std::fs::read_dir(directory)
        .with_context(|| format!("cannot list the recorded requests in {}", directory.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!("no recorded requests (*.json) in {}", directory.display());
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let body: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a JSON request body", path.display()))?;
            let name = path.file_name().map(|name| name.to_string_lossy().into_owned());
            Ok((name.unwrap_or_default(), body))
        })
        .collect()
}

async fn replay(client: &reqwest::Client, url: &str, name: &str, body: &Value) -> Result<Call> {
    let started = Instant::now();
    let mut response = client
        .post(format!("{url}/v1/chat/completions"))
        .header("connection", "close")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body)?)
        .send()
        .await
        .with_context(|| format!("{name}: the server did not answer"))?;
    let status = response.status();
    let mut bytes = Vec::new();
    while let Some(chunk) =
        response.chunk().await.with_context(|| format!("{name}: the stream broke"))?
    {
        bytes.extend_from_slice(&chunk);
    }
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        bail!(
            "{name}: the server answered {status}: {}",
            text.chars().take(300).collect::<String>()
        );
    }
    let timings = timings_of(&text).with_context(|| {
        format!("{name}: no `timings` in the answer (is it llama.cpp's server?)")
    })?;
    Ok(Call { name: name.to_owned(), wall_ms, timings })
}

/// The last `timings` object of a streamed (`data: {…}` lines) or whole JSON answer.
pub fn timings_of(text: &str) -> Option<ServerTimings> {
    let documents = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim))
        .chain(std::iter::once(text.trim()));
    let number = |timings: &Value, key: &str| timings.get(key).and_then(Value::as_f64);
    documents
        .rev()
        .filter_map(|document| serde_json::from_str::<Value>(document).ok())
        .find_map(|value| value.get("timings").filter(|timings| timings.is_object()).cloned())
        .and_then(|timings| {
            Some(ServerTimings {
                cache_n: number(&timings, "cache_n").unwrap_or(0.0) as u64,
                prompt_n: number(&timings, "prompt_n")? as u64,
                prompt_ms: number(&timings, "prompt_ms")?,
                predicted_n: number(&timings, "predicted_n")? as u64,
                predicted_ms: number(&timings, "predicted_ms")?,
            })
        })
}

/// One line per call and the pass's summary: medians and totals of wall ÷ model.
pub fn table(calls: &[Call]) -> String {
    let mut out = String::from(
        "| request | cached | evaluated | prompt ms | generated | generation ms | wall ms | wall ÷ model |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for call in calls {
        let t = &call.timings;
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {:.0} | {:.0} | {:.3} |\n",
            call.name,
            t.cache_n,
            t.prompt_n,
            t.prompt_ms,
            t.predicted_n,
            t.predicted_ms,
            call.wall_ms,
            ratio(call.wall_ms, model_ms(t))
        ));
    }
    let mut ratios: Vec<f64> =
        calls.iter().map(|call| ratio(call.wall_ms, model_ms(&call.timings))).collect();
    ratios.sort_by(f64::total_cmp);
    let wall: f64 = calls.iter().map(|call| call.wall_ms).sum();
    let prompt: f64 = calls.iter().map(|call| call.timings.prompt_ms).sum();
    let generation: f64 = calls.iter().map(|call| call.timings.predicted_ms).sum();
    out.push_str(&format!(
        "calls {}: wall {:.1} s, model {:.1} s (prompt {:.1} + generation {:.1}); wall ÷ model: \
         median {:.3}, p90 {:.3}, max {:.3}, total {:.3}",
        calls.len(),
        wall / 1000.0,
        (prompt + generation) / 1000.0,
        prompt / 1000.0,
        generation / 1000.0,
        percentile(&ratios, 0.5),
        percentile(&ratios, 0.9),
        ratios.last().copied().unwrap_or(f64::NAN),
        ratio(wall, prompt + generation)
    ));
    out
}

fn ratio(wall: f64, model: f64) -> f64 {
    if model > 0.0 { wall / model } else { f64::NAN }
}

/// The nearest-rank percentile of sorted values (NaN when there are none).
fn percentile(sorted: &[f64], share: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 * share).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn timings_come_from_the_streams_last_chunk_or_a_whole_body() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\
                      data: {\"choices\":[],\"timings\":{\"cache_n\":700,\"prompt_n\":12,\
                      \"prompt_ms\":300.5,\"predicted_n\":4,\"predicted_ms\":180.0}}\n\ndata: [DONE]\n";
        assert_eq!(
            timings_of(stream),
            Some(ServerTimings {
                cache_n: 700,
                prompt_n: 12,
                prompt_ms: 300.5,
                predicted_n: 4,
                predicted_ms: 180.0
            })
        );
        let body =
            "{\"timings\":{\"prompt_n\":1,\"prompt_ms\":2,\"predicted_n\":3,\"predicted_ms\":4}}";
        assert_eq!(timings_of(body).as_ref().map(model_ms), Some(6.0));
        for broken in ["", "data: {", "{\"timings\":{\"prompt_n\":1}}", "{\"timings\":7}"] {
            assert_eq!(timings_of(broken), None, "{broken}");
        }
    }

    #[test]
    fn the_table_reports_medians_and_totals() {
        let call = |name: &str, wall_ms: f64, model: f64| Call {
            name: name.to_owned(),
            wall_ms,
            timings: ServerTimings {
                prompt_ms: model / 2.0,
                predicted_ms: model / 2.0,
                ..ServerTimings::default()
            },
        };
        let table = table(&[
            call("a", 1010.0, 1000.0),
            call("b", 2200.0, 2000.0),
            call("c", 3000.0, 3000.0),
        ]);
        assert!(table.contains("| a | 0 | 0 | 500 | 0 | 500 | 1010 | 1.010 |"), "{table}");
        assert!(
            table.ends_with(
                "calls 3: wall 6.2 s, model 6.0 s (prompt 3.0 + generation 3.0); wall ÷ model: \
                 median 1.010, p90 1.100, max 1.100, total 1.035"
            ),
            "{table}"
        );
    }

    #[test]
    fn arguments_are_checked() {
        let options = parse(&args("--url http://127.0.0.1:8080/ --repeat 2 --requests x")).unwrap();
        assert_eq!(options.url.as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!((options.repeat, options.requests), (2, PathBuf::from("x")));
        for bad in ["--repeat 0", "--repeat", "--url", "--fast"] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_recorded_requests_are_request_bodies() {
        let requests =
            read_requests(&crate::tidy::workspace_root().join("models/benches/requests")).unwrap();
        assert!(requests.len() >= 3);
        for (name, body) in &requests {
            assert!(body["messages"].is_array() && body["stream"] == true, "{name}");
        }
        assert!(read_requests(Path::new("/nonexistent")).is_err());
    }
}
