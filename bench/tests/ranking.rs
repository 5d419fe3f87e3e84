//! The skill ranking on the bench's tasks with every example skill installed, against the
//! named baseline (plain word overlap, the ranking before BM25): where the skill a task needs
//! comes. Prints the table; run with `--nocapture` to read it.

use std::collections::HashSet;
use std::path::Path;

use skills_agent_core::SkillEntry;

/// The baseline: how many distinct words (three letters or more, lowercase) of the task the
/// skill's name and description share, ties in catalog order.
fn overlap_position(task: &str, catalog: &[SkillEntry], needed: &str) -> usize {
    let words = |text: &str| -> HashSet<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|word| word.chars().count() >= 3)
            .map(str::to_lowercase)
            .collect()
    };
    let task = words(task);
    let mut scored: Vec<(usize, usize, &str)> = catalog
        .iter()
        .enumerate()
        .map(|(position, entry)| {
            let text = format!("{} {}", entry.name.replace('-', " "), entry.description);
            (words(&text).intersection(&task).count(), position, entry.name.as_str())
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.iter().position(|(_, _, name)| *name == needed).map_or(usize::MAX, |at| at + 1)
}

#[test]
fn the_needed_skill_ranks_first_more_often_than_with_word_overlap() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let catalog = bench::ranking::example_catalog(&examples).unwrap();
    assert!(catalog.len() >= 15, "{} skills", catalog.len());
    let ranked = bench::ranking::rank_scenarios(&bench::catalog::scenarios(), &catalog);
    assert!(ranked.len() >= 30, "{} tasks", ranked.len());
    let scenarios = bench::catalog::scenarios();
    let task = |name: &str| &scenarios.iter().find(|s| s.name == name).unwrap().task;
    let baseline: Vec<usize> = ranked
        .iter()
        .map(|row| overlap_position(task(&row.scenario), &catalog, &row.needed))
        .collect();
    let count =
        |positions: &[usize], within: usize| positions.iter().filter(|p| **p <= within).count();
    let bm25: Vec<usize> = ranked.iter().map(|row| row.position).collect();
    println!("{} skills installed, {} tasks that need one", catalog.len(), ranked.len());
    for (row, overlap) in ranked.iter().zip(&baseline) {
        if row.position > 1 || *overlap > 1 {
            println!(
                "  {}: {} at {} (first: {}), overlap at {overlap}",
                row.scenario, row.needed, row.position, row.first
            );
        }
    }
    let total = ranked.len();
    println!(
        "first: BM25 {}/{total}, overlap {}/{total}; top 3: BM25 {}/{total}, overlap {}/{total}",
        count(&bm25, 1),
        count(&baseline, 1),
        count(&bm25, 3),
        count(&baseline, 3)
    );
    assert!(count(&bm25, 1) >= count(&baseline, 1));
    assert_eq!(count(&bm25, 3), total, "the needed skill is always among the first three");
}
