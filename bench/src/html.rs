//! `report.html`: one self-contained page (inline CSS, hand-written SVG bar charts, no
//! script, nothing fetched).

use std::fmt::Write as _;

use crate::report::{Results, StrategySummary, cell, percent, scenario_rows};

/// Colours of the strategies, in order.
const COLOURS: [&str; 4] = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1"];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One bar: its label, its value (for the length), the text shown and its colour.
struct Bar {
    label: String,
    value: f64,
    shown: String,
    colour: &'static str,
}

/// A horizontal bar chart.
fn bar_chart(title: &str, bars: &[Bar]) -> String {
    // About 7 px per character at 13 px: long labels get the room they need.
    let longest = bars.iter().map(|bar| bar.label.chars().count()).max().unwrap_or(0);
    let label_width = (longest as f64 * 7.2 + 16.0).max(160.0).round();
    let (bar_width, row) = (360.0, 26.0);
    let height = 36.0 + row * bars.len() as f64;
    let max = bars.iter().map(|bar| bar.value).fold(0.0_f64, f64::max);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{w}\" height=\"{height}\" \
         viewBox=\"0 0 {w} {height}\"><title>{t}</title>\
         <text x=\"0\" y=\"16\" class=\"title\">{t}</text>",
        w = label_width + bar_width + 140.0,
        t = escape(title)
    );
    for (index, bar) in bars.iter().enumerate() {
        let y = 30.0 + row * index as f64;
        let length = if max > 0.0 { bar.value / max * bar_width } else { 0.0 };
        let _ = write!(
            svg,
            "<text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{label}</text>\
             <rect x=\"{x}\" y=\"{y}\" width=\"{length:.1}\" height=\"18\" fill=\"{colour}\"/>\
             <text x=\"{vx:.1}\" y=\"{ty}\">{shown}</text>",
            lx = label_width - 8.0,
            ty = y + 14.0,
            label = escape(&bar.label),
            x = label_width,
            colour = bar.colour,
            vx = label_width + length + 6.0,
            shown = escape(&bar.shown),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn per_strategy(
    strategies: &[StrategySummary],
    value: impl Fn(&StrategySummary) -> f64,
    shown: impl Fn(&StrategySummary) -> String,
) -> Vec<Bar> {
    strategies
        .iter()
        .enumerate()
        .map(|(index, summary)| Bar {
            label: summary.strategy.clone(),
            value: value(summary),
            shown: shown(summary),
            colour: COLOURS[index % COLOURS.len()],
        })
        .collect()
}

/// The whole page.
pub(crate) fn html(results: &Results) -> String {
    let strategies = &results.strategies;
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>skills-agent bench</title><style>\
         body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}\
         svg{display:block;margin:1em 0}svg text{font-size:13px;fill:#222}\
         svg .title{font-weight:bold;font-size:14px}\
         table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px}\
         td.ok{background:#e3f4e1}td.fail{background:#fbe0de}td.none{color:#999}\
         </style></head><body>\n<h1>skills-agent bench</h1>\n",
    );
    let _ = writeln!(
        page,
        "<p>Mode: {} (model: {}). {} scenarios, {} runs; every figure comes from the runs' \
         <code>events.jsonl</code>.</p>",
        escape(&results.mode),
        escape(&results.model),
        results.scenarios,
        results.runs.len()
    );
    page.push_str("<h2>Success and model calls</h2>\n");
    page.push_str(&bar_chart(
        "Success rate per strategy",
        &per_strategy(
            strategies,
            |s| s.success_rate,
            |s| format!("{} ({}/{})", percent(s.success_rate), s.successes, s.runs),
        ),
    ));
    page.push_str(&bar_chart(
        "Model calls per run (mean)",
        &per_strategy(strategies, |s| s.mean_model_calls, |s| format!("{:.2}", s.mean_model_calls)),
    ));
    let batch = &results.batchable;
    if !batch.scenarios.is_empty() {
        let mut bars = Vec::new();
        for scenario in &batch.scenarios {
            for (index, summary) in strategies.iter().enumerate() {
                if let Some(run) = results
                    .runs
                    .iter()
                    .find(|run| &run.scenario == scenario && run.strategy == summary.strategy)
                {
                    bars.push(Bar {
                        label: format!("{scenario} · {}", summary.strategy),
                        value: run.model_calls as f64,
                        shown: run.model_calls.to_string(),
                        colour: COLOURS[index % COLOURS.len()],
                    });
                }
            }
        }
        page.push_str(&bar_chart("Model calls on the batchable scenarios", &bars));
        if let Some(ratio) = batch.react_over_plan_execute_think {
            let _ = writeln!(
                page,
                "<p>react makes {ratio:.2}× the model calls of plan-execute-think on these \
                 scenarios (seed 003 claims about 6×).</p>"
            );
        }
    }
    page.push_str("<h2>Reasoning quality</h2>\n");
    page.push_str(&bar_chart(
        "Silent-call rate per strategy",
        &per_strategy(
            strategies,
            |s| s.reasoning.silent_call_rate,
            |s| {
                format!(
                    "{} ({}/{})",
                    percent(s.reasoning.silent_call_rate),
                    s.reasoning.silent_calls,
                    s.reasoning.calls
                )
            },
        ),
    ));
    page.push_str(&bar_chart(
        "Mean reasoning characters per call",
        &per_strategy(
            strategies,
            |s| s.reasoning.mean_reasoning_chars_per_call,
            |s| format!("{:.1}", s.reasoning.mean_reasoning_chars_per_call),
        ),
    ));
    page.push_str("<h2>Token use</h2>\n");
    page.push_str(&bar_chart(
        "Prompt tokens, all runs",
        &per_strategy(strategies, |s| s.prompt_tokens as f64, |s| s.prompt_tokens.to_string()),
    ));
    page.push_str(&bar_chart(
        "Completion tokens, all runs",
        &per_strategy(
            strategies,
            |s| s.completion_tokens as f64,
            |s| s.completion_tokens.to_string(),
        ),
    ));
    page.push_str("<h2>Scenarios</h2>\n<table><tr><th>scenario</th><th>category</th>");
    for summary in strategies {
        let _ = write!(page, "<th>{}</th>", escape(&summary.strategy));
    }
    page.push_str("</tr>\n");
    for (scenario, category) in scenario_rows(&results.runs) {
        let _ = write!(page, "<tr><td>{}</td><td>{}</td>", escape(&scenario), category.as_str());
        for summary in strategies {
            match results
                .runs
                .iter()
                .find(|run| run.scenario == scenario && run.strategy == summary.strategy)
            {
                Some(run) => {
                    let class = if run.success { "ok" } else { "fail" };
                    let title = escape(&run.failures.join("; "));
                    let _ = write!(
                        page,
                        "<td class=\"{class}\" title=\"{title}\">{}</td>",
                        escape(&cell(run))
                    );
                }
                None => page.push_str("<td class=\"none\">-</td>"),
            }
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</table>\n</body></html>\n");
    page
}

/// The page's charts stacked into one SVG image (`report.svg`, for a README).
pub(crate) fn summary_svg(results: &Results) -> String {
    let page = html(results);
    let mut charts = Vec::new();
    let mut rest = page.as_str();
    while let Some(start) = rest.find("<svg ") {
        let Some(length) = rest[start..].find("</svg>") else { break };
        let end = start + length + "</svg>".len();
        charts.push(&rest[start..end]);
        rest = &rest[end..];
    }
    let height_of = |chart: &str| -> f64 {
        chart
            .split_once("height=\"")
            .and_then(|(_, after)| after.split_once('"'))
            .and_then(|(height, _)| height.parse().ok())
            .unwrap_or(0.0)
    };
    let width_of = |chart: &str| -> f64 {
        chart
            .split_once("width=\"")
            .and_then(|(_, after)| after.split_once('"'))
            .and_then(|(width, _)| width.parse().ok())
            .unwrap_or(0.0)
    };
    let width = charts.iter().map(|chart| width_of(chart)).fold(0.0_f64, f64::max);
    let gap = 12.0;
    let mut body = String::new();
    let mut top = 10.0;
    for chart in &charts {
        let placed = chart.replacen(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" ",
            &format!("<svg x=\"10\" y=\"{top}\" "),
            1,
        );
        body.push_str(&placed);
        body.push('\n');
        top += height_of(chart) + gap;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{top}\" viewBox=\"0 0 {w} {top}\" \
         font-family=\"system-ui,sans-serif\"><style>text{{font-size:13px;fill:#222}}\
         .title{{font-weight:bold;font-size:14px}}</style>\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n{body}</svg>\n",
        w = width + 20.0
    )
}
