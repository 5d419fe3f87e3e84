//! Fault injection for the crash tests: with `SKILLS_AGENT_FAULT_KILL_AFTER_SEQ=N` in its
//! environment, a `run`, `resume` or `chat` process SIGKILLs itself right after the event
//! numbered N is written to the run's `events.jsonl`.
//!
//! The kill comes from a sink the launcher adds after the run directory's own (agent-core
//! calls sinks in order, and the JSONL sink writes each event with one `write`), so the event
//! is in the file — a SIGKILL loses nothing the kernel already has — and nothing after it is.
//! Events a resume reproduces from the record reach no sink and never trigger it. Nothing
//! else in the CLI reads the variable; without it there is no sink.

use skills_agent_core::{Event, EventSink};

/// The variable, and the number it holds: an event `seq` (1 is `run_started`).
pub(crate) const KILL_AFTER_SEQ: &str = "SKILLS_AGENT_FAULT_KILL_AFTER_SEQ";

/// Kills the process after the event numbered `seq`.
#[derive(Debug)]
pub(crate) struct KillAfterSeq {
    seq: u64,
}

impl KillAfterSeq {
    /// The sink the environment asks for, if any; a value that is not an event number is a
    /// usage error naming the variable.
    pub(crate) fn from_env(env: &[(String, String)]) -> anyhow::Result<Option<KillAfterSeq>> {
        let Some((_, value)) = env.iter().find(|(name, _)| name == KILL_AFTER_SEQ) else {
            return Ok(None);
        };
        match value.trim().parse::<u64>() {
            Ok(seq) if seq > 0 => Ok(Some(KillAfterSeq { seq })),
            _ => Err(anyhow::anyhow!(
                "{KILL_AFTER_SEQ}={value:?} is not an event number (1 or more); unset it or give \
                 the seq after which the process should kill itself"
            )),
        }
    }
}

impl EventSink for KillAfterSeq {
    fn record(&self, event: &Event) -> skills_agent_core::Result<()> {
        if event.seq == self.seq {
            // Nothing runs after this: no flush, no drop, no `run_finished`.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_positive_event_number_is_accepted() {
        let env = |value: &str| vec![(KILL_AFTER_SEQ.to_owned(), value.to_owned())];
        assert!(KillAfterSeq::from_env(&[]).unwrap().is_none());
        assert_eq!(KillAfterSeq::from_env(&env("7")).unwrap().map(|sink| sink.seq), Some(7));
        for bad in ["0", "-1", "soon", ""] {
            let error = KillAfterSeq::from_env(&env(bad)).unwrap_err().to_string();
            assert!(error.contains(KILL_AFTER_SEQ), "{error}");
        }
    }
}
