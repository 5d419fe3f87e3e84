//! How well the runtime's skill ranking ([`skills_agent_core::rank_skills`]) puts the skill a task
//! needs first, with every example skill installed (the bundled ones and
//! `examples/more-skills`, the realistic case of a user's full skills folder). The skill a
//! scenario needs is the one its check requires a call of; scenarios that need none (no fitting
//! skill, a clarification) are left out.

use std::path::Path;

use skills_agent_core::SkillEntry;
use skills_agent_registry::{IndexConfig, RootKind, SkillIndex, SkillRoot};

use crate::scenario::Scenario;

/// One scenario's ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The scenario.
    pub scenario: String,
    /// The skill its first required call uses.
    pub needed: String,
    /// Where the ranking puts it (1 = first).
    pub position: usize,
    /// The skill ranked first.
    pub first: String,
}

/// The catalog of every example skill under `examples` (`skills/` and `more-skills/`).
///
/// # Errors
///
/// A skills folder that cannot be indexed.
pub fn example_catalog(examples: &Path) -> crate::Result<Vec<SkillEntry>> {
    let roots = [
        SkillRoot::new(RootKind::Project, examples.join("skills")),
        SkillRoot::new(RootKind::User, examples.join("more-skills")),
    ];
    let index = SkillIndex::build(&roots, &IndexConfig::default()).map_err(|error| {
        crate::Error::Scenario { scenario: "ranking".to_owned(), message: error.to_string() }
    })?;
    Ok(index.skills.iter().map(SkillEntry::from).collect())
}

/// Each scenario that needs a skill, ranked against `catalog`.
pub fn rank_scenarios(scenarios: &[Scenario], catalog: &[SkillEntry]) -> Vec<Ranked> {
    scenarios
        .iter()
        .filter_map(|scenario| {
            let needed = scenario
                .check
                .calls
                .iter()
                .find_map(|call| call.args.get("skill").and_then(|skill| skill.as_str()))?;
            let ranked = skills_agent_core::rank_skills(&scenario.task, catalog);
            let position = ranked.iter().position(|(name, _)| name == needed)? + 1;
            Some(Ranked {
                scenario: scenario.name.clone(),
                needed: needed.to_owned(),
                position,
                first: ranked[0].0.clone(),
            })
        })
        .collect()
}
