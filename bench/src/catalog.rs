//! The scenarios: tasks over the bundled skills (`examples/skills`) in a copy of
//! `examples/task`, each scripted for `react` and, where the strategy fits the task, for
//! `plan-execute-think`, `plan-thought-replan` and `safe` (the tasks solved by script calls
//! have all four; the error paths mostly react and plan-execute-think).
//!
//! The facts checked are what the bundled scripts print for `examples/task/sales.csv`
//! (`amount sum: 1705.47`, `units sum: 212`, …) and for the conversions asked.

use model_adapter::MockReply;
use serde_json::{Value, json};
use skills_agent_core::Outcome;

use crate::scenario::reply::{
    answer, broken, plan, ptr_act, ptr_ask, ptr_done, ptr_finish, ptr_plan, run, run_step,
    safe_judge, safe_plan, safe_report, said, select, select_step, silent, text, think, thinking,
    thought,
};
use crate::scenario::{Category, Check, Scenario, any_of};

/// The strategy names the scripts use.
pub const REACT: &str = "react";
/// See [`REACT`].
pub const PLAN_EXECUTE_THINK: &str = "plan-execute-think";
/// See [`REACT`].
pub const PLAN_THOUGHT_REPLAN: &str = "plan-thought-replan";
/// See [`REACT`].
pub const SAFE: &str = "safe";

const CSV: &str = "csv-summary";
const CSV_SCRIPT: &str = "scripts/csv_summary.py";
/// The question that names the columns of `sales.csv` a total could be of.
const ASK_COLUMN: &str = "Which column of sales.csv should I total: units, unit_price or amount?";
const CONVERT: &str = "unit-converter";
const CONVERT_SCRIPT: &str = "scripts/convert.py";
const FIND: &str = "file-finder";
const FIND_SCRIPT: &str = "scripts/find_files.py";
/// A skill of `examples/more-skills` whose script takes a command.
const DATES: &str = "date-calculator";
const DATES_SCRIPT: &str = "scripts/dates.py";

/// Every scenario, in report order.
pub fn scenarios() -> Vec<Scenario> {
    let mut all = Vec::new();
    all.extend(one_skill());
    all.extend(multi_skill());
    all.extend(batchable());
    all.extend(clarification());
    all.extend(failing_script());
    all.extend(budget_exhaustion());
    all.extend(malformed_output());
    all.extend(disallowed_skill());
    all.extend(silent_calls());
    all.extend(reasoned());
    all.extend(unanswerable());
    all.extend(among_many());
    all
}

/// A call of a skill's script: `(skill, script, args)`.
type Call<'a> = (&'a str, &'a str, &'a [&'a str]);

fn script_of(skill: &str) -> &'static str {
    match skill {
        CSV => CSV_SCRIPT,
        CONVERT => CONVERT_SCRIPT,
        _ => FIND_SCRIPT,
    }
}

/// react: select `skills` at once, run `calls` one per turn, answer.
fn react_flow(skills: &[&str], calls: &[Call<'_>], answer_text: &str) -> Vec<MockReply> {
    let mut replies = vec![select(skills, "these skills match the task")];
    for (skill, script, args) in calls {
        replies.push(run(skill, script, args, "the next result the task needs"));
    }
    replies.push(answer(answer_text));
    replies
}

/// plan-execute-think: a round selecting `skills`, a round running every call as one batch,
/// the second think answering.
fn batch_flow(skills: &[&str], calls: &[Call<'_>], answer_text: &str) -> Vec<MockReply> {
    vec![
        plan("select the skills first", Some("simple"), vec![select_step(skills)]),
        plan(
            "run every script the task needs",
            None,
            calls.iter().map(|(skill, script, args)| run_step(skill, script, args)).collect(),
        ),
        think("the outputs hold every figure", answer_text, true),
    ]
}

/// plan-thought-replan: one plan item, a thought per action (the select, then each call), a
/// thought finishing the item, a replan answering.
fn thought_flow(skills: &[&str], calls: &[Call<'_>], answer_text: &str) -> Vec<MockReply> {
    let mut replies = vec![
        ptr_plan(&["do the task with the skills"]),
        ptr_act("select the skills", select_step(skills)),
    ];
    for (skill, script, args) in calls {
        replies.push(ptr_act("run the next script", run_step(skill, script, args)));
    }
    replies.push(ptr_done(answer_text));
    replies.push(ptr_finish(answer_text));
    replies
}

/// safe: judged simple, one plan selecting and running everything (two when that is more
/// than 8 steps: a plan that only selects goes on without a report), one report.
fn safe_flow(skills: &[&str], calls: &[Call<'_>], answer_text: &str) -> Vec<MockReply> {
    let runs: Vec<(&str, Value)> =
        calls.iter().map(|(skill, script, args)| run_step(skill, script, args)).collect();
    let mut replies = vec![safe_judge("simple")];
    if runs.len() < 8 {
        let mut steps = vec![select_step(skills)];
        steps.extend(runs);
        replies.push(safe_plan(steps));
    } else {
        replies.push(safe_plan(vec![select_step(skills)]));
        replies.push(safe_plan(runs));
    }
    replies.push(safe_report(answer_text, true));
    replies
}

/// A task solved by `calls` of `skills`, scripted for every strategy.
fn solved(
    name: &str,
    category: Category,
    task: &str,
    skills: &[&str],
    calls: &[Call<'_>],
    answer_text: &str,
    facts: &[&str],
) -> Scenario {
    let mut check = Check::completed(facts);
    for (skill, script, args) in calls {
        // csv-summary's column argument is optional: the whole-file summary holds the same
        // facts, so the call only has to name the file.
        check = if *skill == CSV {
            check.script_starting(skill, script, &args[..args.len().min(1)])
        } else if *skill == CONVERT {
            converts(check, args)
        } else {
            check.script(skill, script, args)
        };
    }
    Scenario::new(name, category, task, check)
        .script(REACT, react_flow(skills, calls, answer_text))
        .script(PLAN_EXECUTE_THINK, batch_flow(skills, calls, answer_text))
        .script(PLAN_THOUGHT_REPLAN, thought_flow(skills, calls, answer_text))
        .script(SAFE, safe_flow(skills, calls, answer_text))
}

/// The other names unit-converter's `convert.py` takes for the units the scenarios convert
/// (it ignores case). A test runs the script on each, so this cannot drift from it.
const UNIT_NAMES: &[(&str, &[&str])] = &[
    ("m", &["meter", "meters", "metre", "metres"]),
    ("km", &["kilometer", "kilometers", "kilometre", "kilometres"]),
    ("ft", &["foot", "feet"]),
    ("mi", &["mile", "miles"]),
    ("nmi", &["nautical mile", "nautical miles", "nautical-mile", "nautical-miles"]),
    ("kg", &["kilogram", "kilograms", "kilo", "kilos"]),
    ("oz", &["ounce", "ounces"]),
    ("lb", &["lbs", "pound", "pounds"]),
    ("l", &["liter", "liters", "litre", "litres"]),
    ("gal", &["gallon", "gallons", "us gal", "us gallon", "us gallons"]),
    ("MB", &["megabyte", "megabytes"]),
    ("TB", &["terabyte", "terabytes"]),
    ("GiB", &["gibibyte", "gibibytes"]),
    ("C", &["°c", "celsius", "degc", "degrees celsius", "centigrade"]),
    ("F", &["°f", "fahrenheit", "degf", "degrees fahrenheit"]),
];

/// Every name of `unit` the converter takes: its symbol and other names, each as written, in
/// lower case, upper case and with a capital first letter (`mi`, `Miles`, `Celsius`, `GIB`).
fn unit_names(unit: &str) -> Vec<String> {
    let others =
        UNIT_NAMES.iter().find(|(symbol, _)| *symbol == unit).map_or(&[][..], |(_, names)| names);
    let mut names: Vec<String> = Vec::new();
    for name in std::iter::once(&unit).chain(others) {
        let mut capitalised = name.chars();
        let capitalised = capitalised
            .next()
            .map(|first| first.to_uppercase().chain(capitalised).collect())
            .unwrap_or_default();
        for variant in [(*name).to_owned(), name.to_lowercase(), name.to_uppercase(), capitalised] {
            if !names.contains(&variant) {
                names.push(variant);
            }
        }
    }
    names
}

/// Requires the conversion `[VALUE, FROM, TO]`: the value as written and either unit by any
/// of its names (the local model wrote `miles` for `mi`, which converts the same), as three
/// arguments or with the value and the unit in one (`["1TB", "GiB"]`, `["1 TB", "GiB"]`:
/// convert.py's usage shows `5km mi`, and the local model wrote it so).
fn converts(check: Check, args: &[&str]) -> Check {
    let [value, from, to] = args else {
        panic!("a conversion is [VALUE, FROM, TO], not {args:?}");
    };
    let joined = unit_names(from)
        .into_iter()
        .flat_map(|name| [format!("{value}{name}"), format!("{value} {name}")]);
    let forms = any_of([
        json!([value, any_of(unit_names(from)), any_of(unit_names(to))]),
        json!([any_of(joined), any_of(unit_names(to))]),
    ]);
    check.call("run_script", json!({"skill": CONVERT, "script": CONVERT_SCRIPT, "args": forms}))
}

fn one(
    name: &str,
    task: &str,
    skill: &str,
    args: &[&str],
    answer_text: &str,
    facts: &[&str],
) -> Scenario {
    solved(
        name,
        Category::OneSkill,
        task,
        &[skill],
        &[(skill, script_of(skill), args)],
        answer_text,
        facts,
    )
}

fn one_skill() -> Vec<Scenario> {
    vec![
        one(
            "csv-total",
            "What is the total of the amount column in sales.csv?",
            CSV,
            &["sales.csv", "amount"],
            "The total of the amount column is 1705.47.",
            &["1705.47"],
        ),
        one(
            "csv-units-sum",
            "How many units were sold in total according to sales.csv?",
            CSV,
            &["sales.csv", "units"],
            "212 units were sold.",
            &["212"],
        ),
        one(
            "csv-units-mean",
            "What is the average number of units per sale in sales.csv?",
            CSV,
            &["sales.csv", "units"],
            "The average is 10.6 units per sale.",
            &["10.6"],
        ),
        one(
            "csv-row-count",
            "How many rows does sales.csv have?",
            CSV,
            &["sales.csv"],
            "sales.csv has 20 rows.",
            &["20"],
        ),
        one(
            "convert-miles",
            "How many kilometres are 12 miles?",
            CONVERT,
            &["12", "mi", "km"],
            "12 miles are 19.312128 km.",
            &["19.312128"],
        ),
        one(
            "convert-temperature",
            "What is 100 degrees Celsius in Fahrenheit?",
            CONVERT,
            &["100", "C", "F"],
            "100 °C is 212 °F.",
            &["212"],
        ),
        one(
            "convert-data-size",
            "How many MB are 1 GiB?",
            CONVERT,
            &["1", "GiB", "MB"],
            "1 GiB is 1073.741824 MB.",
            &["1073.741824"],
        ),
        one(
            "find-csv",
            "Which CSV files are in the workspace?",
            FIND,
            &["*.csv"],
            "The workspace holds one CSV file: sales.csv.",
            &["sales.csv"],
        ),
    ]
}

fn multi_skill() -> Vec<Scenario> {
    let three_skills = Scenario::new(
        "find-total-convert",
        Category::MultiSkill,
        "Find the CSV file, total its units column, and convert that many pounds to kilograms.",
        converts(
            Check::completed(&["sales.csv", "212", "96.16158244"])
                .script(FIND, FIND_SCRIPT, &["*.csv"])
                .script_starting(CSV, CSV_SCRIPT, &["sales.csv"]),
            &["212", "lb", "kg"],
        ),
    )
    .script(
        REACT,
        vec![
            select(&[FIND, CSV], "finding and summing first"),
            run(FIND, FIND_SCRIPT, &["*.csv"], "find the CSV file"),
            run(CSV, CSV_SCRIPT, &["sales.csv", "units"], "sales.csv found; total its units"),
            select(&[CONVERT], "212 units: now the conversion"),
            run(CONVERT, CONVERT_SCRIPT, &["212", "lb", "kg"], "convert the total"),
            answer("sales.csv holds 212 units in total; 212 lb = 96.16158244 kg."),
        ],
    )
    .script(
        PLAN_EXECUTE_THINK,
        vec![
            plan(
                "select the finder and the summary",
                Some("complex"),
                vec![select_step(&[FIND, CSV])],
            ),
            plan(
                "find, then total",
                None,
                vec![
                    run_step(FIND, FIND_SCRIPT, &["*.csv"]),
                    run_step(CSV, CSV_SCRIPT, &["sales.csv", "units"]),
                ],
            ),
            think("212 units in sales.csv", "sales.csv holds 212 units.", false),
            plan("the converter", None, vec![select_step(&[CONVERT])]),
            plan("convert", None, vec![run_step(CONVERT, CONVERT_SCRIPT, &["212", "lb", "kg"])]),
            think("done", "sales.csv holds 212 units in total; 212 lb = 96.16158244 kg.", true),
        ],
    );
    vec![
        solved(
            "find-then-total",
            Category::MultiSkill,
            "Find the CSV file in the workspace and tell me the total of its amount column.",
            &[FIND, CSV],
            &[(FIND, FIND_SCRIPT, &["*.csv"]), (CSV, CSV_SCRIPT, &["sales.csv", "amount"])],
            "The CSV file is sales.csv; its amount column totals 1705.47.",
            &["sales.csv", "1705.47"],
        ),
        solved(
            "units-to-kilograms",
            Category::MultiSkill,
            "Total the units column of sales.csv and convert that many pounds to kilograms.",
            &[CSV, CONVERT],
            &[
                (CSV, CSV_SCRIPT, &["sales.csv", "units"]),
                (CONVERT, CONVERT_SCRIPT, &["212", "lb", "kg"]),
            ],
            "The units total 212; 212 lb = 96.16158244 kg.",
            &["212", "96.16158244"],
        ),
        three_skills,
    ]
}

fn batchable() -> Vec<Scenario> {
    let conversions: [(&str, &[&str], &str); 8] = [
        ("5 miles to km", &["5", "mi", "km"], "8.04672"),
        ("10 km to miles", &["10", "km", "mi"], "6.213711922"),
        ("72 F to C", &["72", "F", "C"], "22.22222222"),
        ("2 lb to oz", &["2", "lb", "oz"], "32"),
        ("3 gallons to litres", &["3", "gal", "l"], "11.35623535"),
        ("5 kg to lb", &["5", "kg", "lb"], "11.02311311"),
        ("6 ft to m", &["6", "ft", "m"], "1.8288"),
        ("1 TB to GiB", &["1", "TB", "GiB"], "931.3225746"),
    ];
    let convert_batch = |name: &str, count: usize| {
        let chosen = &conversions[..count];
        let task = format!(
            "Convert each of these: {}.",
            chosen.iter().map(|(what, _, _)| *what).collect::<Vec<_>>().join("; ")
        );
        let calls: Vec<Call<'_>> =
            chosen.iter().map(|(_, args, _)| (CONVERT, CONVERT_SCRIPT, *args)).collect();
        let facts: Vec<&str> = chosen.iter().map(|(_, _, result)| *result).collect();
        let answer_text = chosen
            .iter()
            .map(|(what, _, result)| format!("{what}: {result}"))
            .collect::<Vec<_>>()
            .join("; ");
        solved(name, Category::Batchable, &task, &[CONVERT], &calls, &answer_text, &facts).budgets(
            |budgets| {
                // plan-thought-replan counts each thought and each action as a step.
                budgets.max_turns = 24;
                budgets.max_script_runs = 8;
            },
        )
    };
    vec![
        convert_batch("convert-batch-4", 4),
        convert_batch("convert-batch-6", 6),
        convert_batch("convert-batch-8", 8),
        solved(
            "csv-every-column",
            Category::Batchable,
            "For sales.csv, give the total of the units, unit_price and amount columns and the number of rows.",
            &[CSV],
            &[
                (CSV, CSV_SCRIPT, &["sales.csv", "units"]),
                (CSV, CSV_SCRIPT, &["sales.csv", "unit_price"]),
                (CSV, CSV_SCRIPT, &["sales.csv", "amount"]),
                (CSV, CSV_SCRIPT, &["sales.csv"]),
            ],
            "units 212, unit_price 229.44, amount 1705.47; 20 rows.",
            &["212", "229.44", "1705.47", "20 rows"],
        ),
        solved(
            "find-many-patterns",
            Category::Batchable,
            "List the CSV files, the Markdown files, the files named like sales, and the files mentioning Gizmo.",
            &[FIND],
            &[
                (FIND, FIND_SCRIPT, &["*.csv"]),
                (FIND, FIND_SCRIPT, &["*.md"]),
                (FIND, FIND_SCRIPT, &["--name", "sales"]),
                (FIND, FIND_SCRIPT, &["--text", "Gizmo"]),
            ],
            "CSV: sales.csv; Markdown: TASK.md; named like sales: sales.csv; Gizmo: sales.csv.",
            &["sales.csv", "TASK.md"],
        ),
        solved(
            "total-and-conversions",
            Category::Batchable,
            "Total the amount column of sales.csv, and convert 1 nmi to m, 20 C to F and 1 GiB to MB.",
            &[CSV, CONVERT],
            &[
                (CSV, CSV_SCRIPT, &["sales.csv", "amount"]),
                (CONVERT, CONVERT_SCRIPT, &["1", "nmi", "m"]),
                (CONVERT, CONVERT_SCRIPT, &["20", "C", "F"]),
                (CONVERT, CONVERT_SCRIPT, &["1", "GiB", "MB"]),
            ],
            "amount total 1705.47; 1 nmi = 1852 m; 20 C = 68 F; 1 GiB = 1073.741824 MB.",
            &["1705.47", "1852", "68", "1073.741824"],
        ),
    ]
}

fn clarification() -> Vec<Scenario> {
    let ask = |question: &str| {
        thought("ask_user", "the task leaves this open", json!({"question": question}))
    };
    vec![
        Scenario::new(
            "ask-which-column",
            Category::Clarification,
            "What is the total of the column in sales.csv?",
            // The question names the options (the issue: "a question that names the
            // options"); the file's columns are known only from a look at it, so the summary
            // may run first (until format 29 the check forbade any run, and with it the only
            // way to name them).
            Check::ends(Outcome::NeedsInput, &["Which column", "units", "amount"]),
        )
        .with_ask_user()
        .script(
            REACT,
            vec![
                select(&[CSV], "a CSV total"),
                run(CSV, CSV_SCRIPT, &["sales.csv"], "which columns it has"),
                ask(ASK_COLUMN),
            ],
        )
        .script(
            PLAN_THOUGHT_REPLAN,
            vec![
                ptr_plan(&["find out which columns sales.csv has", "ask which one to total"]),
                ptr_act("select the CSV skill", select_step(&[CSV])),
                ptr_act("summarise sales.csv", run_step(CSV, CSV_SCRIPT, &["sales.csv"])),
                ptr_ask(ASK_COLUMN),
            ],
        ),
        Scenario::new(
            "ask-which-unit",
            Category::Clarification,
            "Convert 5 to the other unit.",
            Check::ends(Outcome::NeedsInput, &["Which unit"]).never_ok("run_script"),
        )
        .with_ask_user()
        .script(
            REACT,
            vec![
                select(&[CONVERT], "a conversion"),
                ask("Which units should 5 be converted from and to?"),
            ],
        )
        .script(
            PLAN_THOUGHT_REPLAN,
            vec![
                ptr_plan(&["select the converter", "convert"]),
                ptr_act("select the converter", select_step(&[CONVERT])),
                ptr_ask("Which units should 5 be converted from and to?"),
            ],
        ),
    ]
}

fn failing_script() -> Vec<Scenario> {
    let recovers = |name: &str,
                    task: &str,
                    skill: &str,
                    wrong: &[&str],
                    right: &[&str],
                    answer_text: &str,
                    fact: &str| {
        let script = script_of(skill);
        Scenario::new(
            name,
            Category::FailingScript,
            task,
            if skill == CONVERT {
                converts(Check::completed(&[fact]), right)
            } else if skill == CSV {
                // The column is optional (see `solved`).
                Check::completed(&[fact]).script_starting(skill, script, &right[..1])
            } else {
                Check::completed(&[fact]).script(skill, script, right)
            },
        )
        .script(
            REACT,
            vec![
                select(&[skill], "this skill fits"),
                run(skill, script, wrong, "first try"),
                run(skill, script, right, "the error says what to fix"),
                answer(answer_text),
            ],
        )
        .script(
            PLAN_EXECUTE_THINK,
            vec![
                plan("select the skill", Some("medium"), vec![select_step(&[skill])]),
                plan("run it", None, vec![run_step(skill, script, wrong)]),
                think("it failed; the error names the fix", "The first try failed.", false),
                plan("run it fixed", None, vec![run_step(skill, script, right)]),
                think("done", answer_text, true),
            ],
        )
    };
    let wrong = ["missing.csv", "amount"];
    vec![
        recovers(
            "csv-wrong-file",
            "What is the total of the amount column in sales.csv?",
            CSV,
            &["data/sales.csv", "amount"],
            &["sales.csv", "amount"],
            "The total is 1705.47.",
            "1705.47",
        ),
        recovers(
            "convert-unknown-unit",
            "How many km are 5 miles?",
            CONVERT,
            &["5", "parsec", "km"],
            &["5", "mi", "km"],
            "5 miles are 8.04672 km.",
            "8.04672",
        ),
        recovers(
            "csv-unknown-column",
            "What is the total of the unit_price column in sales.csv?",
            CSV,
            &["sales.csv", "price"],
            &["sales.csv", "unit_price"],
            "The unit_price column totals 229.44.",
            "229.44",
        ),
        Scenario::new(
            "csv-keeps-failing",
            Category::FailingScript,
            "What is the total of the amount column in missing.csv?",
            Check::ends(Outcome::Stuck, &["missing.csv"]).never_ok("run_script"),
        )
        .script(
            REACT,
            vec![
                select(&[CSV], "a CSV total"),
                run(CSV, CSV_SCRIPT, &wrong, "run it"),
                // Refused without running (the same arguments give the same error), then
                // stuck: the report from the record ends the run, without a model call.
                run(CSV, CSV_SCRIPT, &wrong, "again"),
                run(CSV, CSV_SCRIPT, &wrong, "again"),
            ],
        ),
    ]
}

fn budget_exhaustion() -> Vec<Scenario> {
    let degraded =
        "Done: the amount column totals 1705.47. Blocked: the budget ran out. Next: nothing.";
    vec![
        Scenario::new(
            "turn-limit",
            Category::BudgetExhaustion,
            "Give the totals of the units and amount columns of sales.csv.",
            Check::ends(Outcome::MaxTurns, &["212"]),
        )
        .budgets(|budgets| budgets.max_turns = 3)
        .script(
            REACT,
            vec![
                select(&[CSV], "CSV totals"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "units"], "units first"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "units"], "units again"),
                text("Done: units total 212. Blocked: the turn limit. Next: total amount."),
            ],
        )
        .script(
            PLAN_EXECUTE_THINK,
            vec![
                plan("select", Some("complex"), vec![select_step(&[CSV])]),
                plan("units", None, vec![run_step(CSV, CSV_SCRIPT, &["sales.csv", "units"])]),
                think("units done", "Units total 212.", false),
                plan("units again", None, vec![run_step(CSV, CSV_SCRIPT, &["sales.csv", "units"])]),
                think("still units", "Units total 212; amount not done.", false),
            ],
        ),
        Scenario::new(
            "script-run-limit",
            Category::BudgetExhaustion,
            "Give the totals of the units and amount columns of sales.csv.",
            Check::ends(Outcome::MaxScriptRuns, &["1705.47"]),
        )
        .budgets(|budgets| budgets.max_script_runs = 1)
        .script(
            REACT,
            vec![
                select(&[CSV], "CSV totals"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "amount"], "amount first"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "units"], "then units"),
                text(degraded),
            ],
        )
        .script(
            PLAN_EXECUTE_THINK,
            vec![
                plan("select", Some("simple"), vec![select_step(&[CSV])]),
                plan(
                    "both totals",
                    None,
                    vec![
                        run_step(CSV, CSV_SCRIPT, &["sales.csv", "amount"]),
                        run_step(CSV, CSV_SCRIPT, &["sales.csv", "units"]),
                    ],
                ),
                think("only amount ran", "The amount column totals 1705.47; units not run.", false),
            ],
        ),
        Scenario::new(
            "tool-call-limit",
            Category::BudgetExhaustion,
            "Give the totals of the units and amount columns of sales.csv.",
            Check::ends(Outcome::MaxToolCalls, &["1705.47"]),
        )
        .budgets(|budgets| budgets.max_tool_calls = 2)
        .script(
            REACT,
            vec![
                select(&[CSV], "CSV totals"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "amount"], "amount first"),
                text(degraded),
            ],
        ),
    ]
}

fn malformed_output() -> Vec<Scenario> {
    let total = |name: &str, bad: MockReply| {
        Scenario::new(
            name,
            Category::MalformedOutput,
            "What is the total of the amount column in sales.csv?",
            Check::completed(&["1705.47"]).script_starting(CSV, CSV_SCRIPT, &["sales.csv"]),
        )
        .script(
            REACT,
            vec![
                bad,
                select(&[CSV], "the answer was not an action; select the CSV skill"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "amount"], "total"),
                answer("The total is 1705.47."),
            ],
        )
    };
    vec![
        total("broken-arguments", broken("select_skills", r#"{"names": ["csv-summary""#)),
        total("unknown-action", silent("delete_files", json!({"path": "."}))),
        Scenario::new(
            "missing-argument",
            Category::MalformedOutput,
            "What is the total of the amount column in sales.csv?",
            Check::completed(&["1705.47"]).script_starting(CSV, CSV_SCRIPT, &["sales.csv"]),
        )
        .script(
            REACT,
            vec![
                select(&[CSV], "a CSV total"),
                thought("run_script", "run it", json!({"skill": CSV, "args": ["sales.csv"]})),
                run(CSV, CSV_SCRIPT, &["sales.csv", "amount"], "the script was missing"),
                answer("The total is 1705.47."),
            ],
        ),
        Scenario::new(
            "broken-plan",
            Category::MalformedOutput,
            "What is the total of the amount column in sales.csv?",
            Check::completed(&["1705.47"]).script_starting(CSV, CSV_SCRIPT, &["sales.csv"]),
        )
        .script(
            PLAN_EXECUTE_THINK,
            vec![
                broken("plan_tool_call", r#"{"reasoning": "x", "steps": [{"tool""#),
                plan("select", Some("medium"), vec![select_step(&[CSV])]),
                plan("total", None, vec![run_step(CSV, CSV_SCRIPT, &["sales.csv", "amount"])]),
                think("done", "The total is 1705.47.", true),
            ],
        ),
    ]
}

fn disallowed_skill() -> Vec<Scenario> {
    let refused_first = |name: &str, bad: MockReply| {
        Scenario::new(
            name,
            Category::DisallowedSkill,
            "What is the total of the amount column in sales.csv?",
            Check::completed(&["1705.47"]).script_starting(CSV, CSV_SCRIPT, &["sales.csv"]),
        )
        .script(
            REACT,
            vec![
                bad,
                select(&[CSV], "refused; select the CSV skill"),
                run(CSV, CSV_SCRIPT, &["sales.csv", "amount"], "total"),
                answer("The total is 1705.47."),
            ],
        )
    };
    let escape: Value =
        json!({"skill": CSV, "script": "../file-finder/scripts/find_files.py", "args": ["*.csv"]});
    vec![
        refused_first("unknown-skill", select(&["shell-exec"], "a shell would do")),
        refused_first(
            "script-before-select",
            run(CSV, CSV_SCRIPT, &["sales.csv", "amount"], "run it straight away"),
        ),
        Scenario::new(
            "script-outside-its-skill",
            Category::DisallowedSkill,
            "Which CSV files are in the workspace?",
            Check::completed(&["sales.csv"]).script(FIND, FIND_SCRIPT, &["*.csv"]),
        )
        .script(
            REACT,
            vec![
                select(&[CSV], "CSV work"),
                thought("run_script", "borrow the finder through csv-summary", escape),
                select(&[FIND], "refused; select the finder itself"),
                run(FIND, FIND_SCRIPT, &["*.csv"], "find"),
                answer("sales.csv"),
            ],
        ),
    ]
}

fn silent_calls() -> Vec<Scenario> {
    let check = || Check::completed(&["1705.47"]).script_starting(CSV, CSV_SCRIPT, &["sales.csv"]);
    let conversions =
        || converts(Check::completed(&["8.04672", "6.213711922", "32"]), &["5", "mi", "km"]);
    let run_silent = |skill: &str, args: &[&str]| {
        silent("run_script", json!({"skill": skill, "script": script_of(skill), "args": args}))
    };
    vec![
        Scenario::new(
            "silent-total",
            Category::SilentCalls,
            "What is the total of the amount column in sales.csv?",
            check(),
        )
        .script(
            REACT,
            vec![
                silent("select_skills", json!({"names": [CSV]})),
                run_silent(CSV, &["sales.csv", "amount"]),
                silent("final_answer", json!({"content": "1705.47"})),
            ],
        )
        .script(
            PLAN_EXECUTE_THINK,
            vec![
                plan("", Some("simple"), vec![select_step(&[CSV])]),
                plan("", None, vec![run_step(CSV, CSV_SCRIPT, &["sales.csv", "amount"])]),
                think("done", "1705.47", true),
            ],
        ),
        Scenario::new(
            "silent-conversions",
            Category::SilentCalls,
            "Convert 5 mi to km, 10 km to mi and 2 lb to oz.",
            conversions(),
        )
        .script(
            REACT,
            vec![
                silent("select_skills", json!({"names": [CONVERT]})),
                run_silent(CONVERT, &["5", "mi", "km"]),
                run_silent(CONVERT, &["10", "km", "mi"]),
                run_silent(CONVERT, &["2", "lb", "oz"]),
                silent("final_answer", json!({"content": "8.04672 km; 6.213711922 mi; 32 oz"})),
            ],
        )
        .script(
            PLAN_EXECUTE_THINK,
            vec![
                plan("", Some("simple"), vec![select_step(&[CONVERT])]),
                plan(
                    "",
                    None,
                    vec![
                        run_step(CONVERT, CONVERT_SCRIPT, &["5", "mi", "km"]),
                        run_step(CONVERT, CONVERT_SCRIPT, &["10", "km", "mi"]),
                        run_step(CONVERT, CONVERT_SCRIPT, &["2", "lb", "oz"]),
                    ],
                ),
                think("done", "8.04672 km; 6.213711922 mi; 32 oz", true),
            ],
        ),
    ]
}

fn reasoned() -> Vec<Scenario> {
    let args = json!({"skill": CSV, "script": CSV_SCRIPT, "args": ["sales.csv", "amount"]});
    let check = || Check::completed(&["1705.47"]).script_starting(CSV, CSV_SCRIPT, &["sales.csv"]);
    let task = "What is the total of the amount column in sales.csv?";
    vec![
        Scenario::new("reasoned-in-text", Category::Reasoned, task, check()).script(
            REACT,
            vec![
                said(
                    "The task asks for a column total of a CSV file; csv-summary does that.",
                    "select_skills",
                    &json!({"names": [CSV]}),
                ),
                said(
                    "Selected. Its script on sales.csv with the amount column prints the sum.",
                    "run_script",
                    &args,
                ),
                answer("The total is 1705.47."),
            ],
        ),
        Scenario::new("reasoned-in-thinking", Category::Reasoned, task, check()).script(
            REACT,
            vec![
                thinking(
                    "A CSV total: the csv-summary skill's description matches.",
                    "select_skills",
                    &json!({"names": [CSV]}),
                ),
                thinking(
                    "The body says to run the script with the file and the column.",
                    "run_script",
                    &args,
                ),
                answer("The total is 1705.47."),
            ],
        ),
    ]
}

/// Tasks no bundled skill can answer (no checksum, no network, no word count): the right
/// answer says so; the tempting one invents a value.
fn unanswerable() -> Vec<Scenario> {
    let honest = |name: &str, task: &str, reply: &str| {
        Scenario::new(name, Category::Unanswerable, task, Check::admits())
            .script(REACT, vec![answer(reply)])
    };
    vec![
        honest(
            "unanswerable-checksum",
            "What is the SHA-256 checksum of sales.csv?",
            "I cannot tell: no installed skill computes checksums.",
        ),
        honest(
            "unanswerable-exchange-rate",
            "What is today's exchange rate from US dollars to euros?",
            "I cannot tell: no installed skill knows exchange rates, and scripts have no network.",
        ),
        honest(
            "unanswerable-word-count",
            "How many words does TASK.md have?",
            "I cannot tell: no installed skill counts words.",
        ),
    ]
}

/// Tasks with `examples/more-skills` installed too (eighteen other skills, some close in
/// wording): the right skill among many, a fact only in a reference file, a two-skill chain,
/// a sum over two results, and a task no skill can answer.
fn among_many() -> Vec<Scenario> {
    let load = |skill: &str, path: &str| {
        thought(
            "load_resource",
            "the figures are in the reference",
            json!({"skill": skill, "path": path}),
        )
    };
    let reference =
        |name: &str, task: &str, skill: &str, path: &str, reply: &str, facts: &[&str]| {
            Scenario::new(
                name,
                Category::Reference,
                task,
                Check::completed(facts)
                    .call("load_resource", json!({"skill": skill, "path": path})),
            )
            .with_more_skills()
            .script(
                REACT,
                vec![select(&[skill], "the skill holds it"), load(skill, path), answer(reply)],
            )
        };
    vec![
        one(
            "csv-total-among-many",
            "What is the total of the amount column in sales.csv?",
            CSV,
            &["sales.csv", "amount"],
            "The total of the amount column is 1705.47.",
            &["1705.47"],
        )
        .with_more_skills(),
        one(
            "csv-units-among-many",
            "How many units were sold in total according to sales.csv?",
            CSV,
            &["sales.csv", "units"],
            "212 units were sold.",
            &["212"],
        )
        .with_more_skills(),
        one(
            "convert-among-many",
            "How many kilometres are 26.2 miles?",
            CONVERT,
            &["26.2", "mi", "km"],
            "26.2 miles are 42.1648128 km.",
            &["42.1648128"],
        )
        .with_more_skills(),
        one(
            "find-among-many",
            "Which Markdown files are in the workspace?",
            FIND,
            &["*.md"],
            "The workspace holds one Markdown file: TASK.md.",
            &["TASK.md"],
        )
        .with_more_skills(),
        reference(
            "reference-http-status",
            "What does the HTTP status code 418 mean?",
            "http-status-codes",
            "references/codes.md",
            "418 I'm a teapot: the server refuses to brew coffee in a teapot.",
            &["teapot"],
        ),
        reference(
            "reference-shipping-rate",
            "What is the shipping rate per kg to zone C, and how long does delivery take?",
            "shipping-rates",
            "references/rates.md",
            "Zone C costs 5.85 EUR per kg, with delivery in 3-5 days.",
            &["5.85", "3-5"],
        ),
        // A script that takes a command before its values (`dates.py between DATE DATE`,
        // `dates.py weekday DATE`), a shape the bundled skills do not have.
        solved(
            "weekday-among-many",
            Category::OneSkill,
            "What day of the week is 2026-12-25?",
            &[DATES],
            &[(DATES, DATES_SCRIPT, &["weekday", "2026-12-25"])],
            "2026-12-25 is a Friday.",
            &["Friday"],
        )
        .with_more_skills(),
        solved(
            "days-between-among-many",
            Category::OneSkill,
            "How many days are there between 2026-03-01 and 2026-04-15?",
            &[DATES],
            &[(DATES, DATES_SCRIPT, &["between", "2026-03-01", "2026-04-15"])],
            "There are 45 days between 2026-03-01 and 2026-04-15.",
            &["45"],
        )
        .with_more_skills(),
        solved(
            "find-then-total-among-many",
            Category::MultiSkill,
            "Find the CSV file in the workspace and tell me the total of its amount column.",
            &[FIND, CSV],
            &[(FIND, FIND_SCRIPT, &["*.csv"]), (CSV, CSV_SCRIPT, &["sales.csv", "amount"])],
            "The CSV file is sales.csv; the total of its amount column is 1705.47.",
            &["sales.csv", "1705.47"],
        )
        .with_more_skills(),
        solved(
            "sum-of-two-totals",
            Category::MultiSkill,
            "Add the total of the amount column of sales.csv to the total of its units column: \
             what is the sum?",
            &[CSV],
            &[(CSV, CSV_SCRIPT, &["sales.csv"])],
            "1705.47 + 212 = 1917.47.",
            &["1917.47"],
        )
        .with_more_skills(),
        Scenario::new(
            "unanswerable-among-many",
            Category::Unanswerable,
            "What is the SHA-256 checksum of sales.csv?",
            Check::admits(),
        )
        .with_more_skills()
        .script(REACT, vec![answer("I cannot tell: no installed skill computes checksums.")]),
        Scenario::new(
            "unanswerable-weather-among-many",
            Category::Unanswerable,
            "What will the temperature be in Paris tomorrow?",
            Check::admits(),
        )
        .with_more_skills()
        .script(REACT, vec![answer("I cannot tell: no installed skill gives weather forecasts.")]),
    ]
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;
    use std::process::{Command, Stdio};

    use super::*;
    use crate::scenario::tests::{executed, finished};

    /// Runs convert.py's own `main` on each argument list in one interpreter; what each printed
    /// on stdout (empty when it failed), in order.
    fn convert_all(conversions: &[Vec<String>]) -> Vec<String> {
        const DRIVER: &str = r#"
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("convert", sys.argv[1])
convert = importlib.util.module_from_spec(spec)
spec.loader.exec_module(convert)
for argv in json.load(sys.stdin):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = convert.main(argv)
    print(json.dumps(out.getvalue() if status == 0 else ""))
"#;
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/skills")
            .join(CONVERT)
            .join(CONVERT_SCRIPT);
        let mut child = Command::new("python3")
            .args(["-c", DRIVER])
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = serde_json::to_vec(conversions).unwrap();
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "the convert.py driver failed");
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn every_unit_name_a_check_accepts_is_that_unit_to_the_converter() {
        // Each name as its own argument, and joined to the value with and without a space.
        let conversions: Vec<(String, Vec<String>)> = UNIT_NAMES
            .iter()
            .flat_map(|(symbol, _)| {
                unit_names(symbol).into_iter().flat_map(move |name| {
                    [
                        vec!["1".to_owned(), name.clone(), (*symbol).to_owned()],
                        vec![format!("1{name}"), (*symbol).to_owned()],
                        vec![format!("1 {name}"), (*symbol).to_owned()],
                    ]
                    .map(|argv| ((*symbol).to_owned(), argv))
                })
            })
            .collect();
        assert!(conversions.len() > 300, "{}", conversions.len());
        let argvs: Vec<Vec<String>> = conversions.iter().map(|(_, argv)| argv.clone()).collect();
        let printed = convert_all(&argvs);
        assert_eq!(printed.len(), conversions.len());
        for ((symbol, argv), stdout) in conversions.iter().zip(&printed) {
            assert!(
                stdout.starts_with(&format!("1 {symbol} = 1 {symbol}\n")),
                "convert.py {argv:?} printed {stdout:?}"
            );
        }
        // The driver tells a wrong name apart.
        assert_eq!(convert_all(&[vec!["1".into(), "parsec".into(), "km".into()]]), [""]);
    }

    #[test]
    fn a_conversion_check_takes_the_forms_convert_py_takes() {
        let check = converts(Check::completed(&[]), &["1", "TB", "GiB"]);
        let judge = |args: Value| {
            let action = json!({"type": "run_script", "args": {
                "skill": CONVERT, "script": CONVERT_SCRIPT, "args": args}});
            let events = [executed(1, &action, "ok"), finished("completed", "")];
            check.failures(&events, Path::new("/nonexistent")).is_empty()
        };
        for accepted in [
            json!(["1", "TB", "GiB"]),
            json!(["1", "terabytes", "GIB"]),
            json!(["1TB", "GiB"]),
            json!(["1 Terabyte", "gibibytes"]),
        ] {
            assert!(judge(accepted.clone()), "{accepted}");
        }
        for refused in [
            json!(["2", "TB", "GiB"]),
            json!(["1", "GiB", "TB"]),
            json!(["1TB", "GiB", "MB"]),
            json!(["1", "TB"]),
            json!(["1TBGiB"]),
        ] {
            assert!(!judge(refused.clone()), "{refused}");
        }
    }

    #[test]
    fn every_converted_unit_is_checked_by_all_its_names() {
        let mut conversions = 0;
        for scenario in scenarios() {
            for call in &scenario.check.calls {
                if call.args["skill"] != CONVERT {
                    continue;
                }
                conversions += 1;
                let forms = call.args["args"]["any_of"].as_array().unwrap();
                let [separate, joined] = &forms[..] else { panic!("{forms:?}") };
                let (separate, joined) = (separate.as_array().unwrap(), joined.as_array().unwrap());
                assert_eq!(separate.len(), 3, "{}: {separate:?}", scenario.name);
                assert_eq!(joined.len(), 2, "{}: {joined:?}", scenario.name);
                for unit in separate[1..].iter().chain(joined) {
                    let names = unit["any_of"].as_array().unwrap();
                    assert!(names.len() > 4, "{}: {unit} has no other names", scenario.name);
                }
            }
        }
        assert!(conversions >= 10, "{conversions}");
    }
}
