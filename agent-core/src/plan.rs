//! The plan: the model's explicit plan (seed 002 §4.2) with its steps and their status, and the
//! patches that change it by step id. Plain data, serialised in events and `state.json`.

use serde::{Deserialize, Serialize};

/// Status of one plan step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Done,
    /// Given up or not needed.
    Skipped,
}

impl StepStatus {
    /// The snake_case name, as in events and `state.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::InProgress => "in_progress",
            StepStatus::Done => "done",
            StepStatus::Skipped => "skipped",
        }
    }
}

/// One plan step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// Stable id (`s1`, `s2`, …) that `plan_update` refers to.
    pub id: String,
    /// What the step does.
    pub title: String,
    /// Where it stands.
    pub status: StepStatus,
}

/// The model's explicit plan (seed 002 §4.2).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Plan {
    /// What the run is for.
    #[serde(default)]
    pub goal: String,
    /// The steps, in order.
    #[serde(default)]
    pub steps: Vec<PlanStep>,
    /// Assumptions the model made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumptions: Vec<String>,
    /// Constraints it must respect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
}

/// A change to one step, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepChange {
    /// The step's id.
    pub id: String,
    /// A new title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A new status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StepStatus>,
}

/// A patch to the plan: add, update and remove steps by id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlanUpdate {
    /// Steps appended (an existing id is replaced in place).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<PlanStep>,
    /// Steps changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub update: Vec<StepChange>,
    /// Ids removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl Plan {
    /// Applies `update`; returns the ids it named that do not exist (ignored, reported).
    pub fn apply(&mut self, update: &PlanUpdate) -> Vec<String> {
        let mut unknown = Vec::new();
        for id in &update.remove {
            let before = self.steps.len();
            self.steps.retain(|step| &step.id != id);
            if self.steps.len() == before {
                unknown.push(id.clone());
            }
        }
        for change in &update.update {
            match self.steps.iter_mut().find(|step| step.id == change.id) {
                Some(step) => {
                    if let Some(title) = &change.title {
                        step.title.clone_from(title);
                    }
                    if let Some(status) = change.status {
                        step.status = status;
                    }
                }
                None => unknown.push(change.id.clone()),
            }
        }
        for added in &update.add {
            match self.steps.iter_mut().find(|step| step.id == added.id) {
                Some(step) => *step = added.clone(),
                None => self.steps.push(added.clone()),
            }
        }
        unknown
    }

    /// One line per step with a status mark, for the model and the console.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if !self.goal.is_empty() {
            text.push_str("goal: ");
            text.push_str(&self.goal);
            text.push('\n');
        }
        for step in &self.steps {
            let mark = match step.status {
                StepStatus::Pending => "[ ]",
                StepStatus::InProgress => "[>]",
                StepStatus::Done => "[x]",
                StepStatus::Skipped => "[-]",
            };
            text.push_str(&format!("{mark} {} {}\n", step.id, step.title));
        }
        text
    }
}
