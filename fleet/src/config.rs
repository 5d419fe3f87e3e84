//! Where the engine is, how to log in, and the names of the streams and buckets a fleet uses.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// How to log in to the NATS server. Never written to a run record.
#[derive(Clone, Default)]
pub enum Credentials {
    /// No credentials (a server without authorization, or credentials in the URL).
    #[default]
    None,
    /// A user and password.
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// A token.
    Token(String),
    /// A `.creds` file (a JWT and an NKey seed, as `nsc` writes them).
    CredsFile(PathBuf),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => formatter.write_str("None"),
            Credentials::UserPassword { user, .. } => {
                write!(formatter, "UserPassword({user}, ***)")
            }
            Credentials::Token(_) => formatter.write_str("Token(***)"),
            Credentials::CredsFile(path) => write!(formatter, "CredsFile({})", path.display()),
        }
    }
}

impl Credentials {
    /// Credentials from the environment: `NATS_CREDS` (a `.creds` file), `NATS_TOKEN`, or
    /// `NATS_USER` with `NATS_PASSWORD`, in that order; none when no variable is set.
    pub fn from_env(env: &[(String, String)]) -> Credentials {
        let get = |name: &str| {
            env.iter().find(|(key, value)| key == name && !value.is_empty()).map(|(_, v)| v.clone())
        };
        if let Some(path) = get("NATS_CREDS") {
            return Credentials::CredsFile(PathBuf::from(path));
        }
        if let Some(token) = get("NATS_TOKEN") {
            return Credentials::Token(token);
        }
        match (get("NATS_USER"), get("NATS_PASSWORD")) {
            (Some(user), Some(password)) => Credentials::UserPassword { user, password },
            _ => Credentials::None,
        }
    }

    /// The secret values, for a redactor (nothing for a creds file: its content stays on disk).
    pub fn secrets(&self) -> Vec<(String, String)> {
        match self {
            Credentials::UserPassword { password, .. } => {
                vec![("NATS_PASSWORD".to_owned(), password.clone())]
            }
            Credentials::Token(token) => vec![("NATS_TOKEN".to_owned(), token.clone())],
            Credentials::None | Credentials::CredsFile(_) => Vec::new(),
        }
    }
}

/// A fleet: the server, the credentials, the prefix of every name, and the task rules.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The server, e.g. `nats://127.0.0.1:4222` (several, comma-separated, for a cluster).
    pub url: String,
    /// How to log in.
    pub credentials: Credentials,
    /// The prefix of every subject, stream and bucket (letters, digits, `-`, `_`): two fleets
    /// with different prefixes share a server without seeing each other's work.
    pub prefix: String,
    /// How long a task may go without an acknowledgement (a worker sends progress every third
    /// of it while a run is alive) before the engine gives it to another worker.
    pub ack_wait: Duration,
    /// How many times a task is tried (a killed worker counts) before it goes to dead-letter.
    pub max_tries: u32,
    /// The largest workspace a task may carry, in bytes.
    pub workspace_limit: u64,
    /// How many servers of a cluster keep each stream, bucket and the object store (1 to 5;
    /// 3 on a 3-node cluster keeps the fleet through the loss of a node). It applies when they
    /// are first created; existing ones keep theirs.
    pub replicas: usize,
}

/// The default prefix of a fleet's names.
pub const DEFAULT_PREFIX: &str = "skills-agent";

impl FleetConfig {
    /// A fleet at `url` with the default prefix, a 30 s ack wait, 3 tries, a 64 MiB limit and
    /// one replica.
    pub fn new(url: impl Into<String>) -> FleetConfig {
        FleetConfig {
            url: url.into(),
            credentials: Credentials::None,
            prefix: DEFAULT_PREFIX.to_owned(),
            ack_wait: Duration::from_secs(30),
            max_tries: 3,
            workspace_limit: 64 * 1024 * 1024,
            replicas: 1,
        }
    }

    /// The names this configuration uses.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the prefix is empty or holds other characters than letters,
    /// digits, `-` and `_`.
    pub fn names(&self) -> Result<Names> {
        Names::new(&self.prefix)
    }
}

/// The subjects, streams and buckets of one fleet, all derived from its prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The prefix.
    pub prefix: String,
    /// The work-queue stream of tasks.
    pub tasks_stream: String,
    /// The subject tasks are published on.
    pub tasks_subject: String,
    /// The durable consumer workers share.
    pub workers_consumer: String,
    /// The stream of run events (one subject per task).
    pub events_stream: String,
    /// The stream of tasks that failed every try.
    pub dead_stream: String,
    /// The subject of dead-lettered tasks.
    pub dead_subject: String,
    /// The KV bucket of run states, by task id.
    pub runs_bucket: String,
    /// The KV bucket of worker heartbeats, by worker name.
    pub workers_bucket: String,
    /// The object store of workspaces and run files.
    pub files_bucket: String,
}

impl Names {
    /// The names for `prefix`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when `prefix` is empty, longer than 64 characters, or holds other
    /// characters than ASCII letters, digits, `-` and `_`.
    pub fn new(prefix: &str) -> Result<Names> {
        let valid = !prefix.is_empty()
            && prefix.len() <= 64
            && prefix
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
        if !valid {
            return Err(Error::Config(format!(
                "prefix `{prefix}`: use 1 to 64 ASCII letters, digits, `-` or `_` (it names \
                 subjects, streams and buckets)"
            )));
        }
        Ok(Names {
            prefix: prefix.to_owned(),
            tasks_stream: format!("{prefix}-tasks"),
            tasks_subject: format!("{prefix}.tasks"),
            workers_consumer: "workers".to_owned(),
            events_stream: format!("{prefix}-events"),
            dead_stream: format!("{prefix}-dead"),
            dead_subject: format!("{prefix}.dead"),
            runs_bucket: format!("{prefix}-runs"),
            workers_bucket: format!("{prefix}-workers"),
            files_bucket: format!("{prefix}-files"),
        })
    }

    /// The subject of one task's run events.
    pub fn events_subject(&self, task_id: &str) -> String {
        format!("{}.events.{task_id}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_names_everything_and_bad_ones_are_refused() {
        let names = Names::new("team_a").unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(names.events_subject("t-1"), "team_a.events.t-1");
        assert_eq!(names.tasks_stream, "team_a-tasks");
        for bad in ["", "a.b", "a*", "a>", "a b", &"x".repeat(65)] {
            assert!(Names::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn credentials_come_from_the_environment_and_never_show() {
        let env = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<Vec<_>>()
        };
        let token = Credentials::from_env(&env(&[("NATS_TOKEN", "s3cret-token")]));
        assert_eq!(format!("{token:?}"), "Token(***)");
        assert_eq!(token.secrets(), vec![("NATS_TOKEN".to_owned(), "s3cret-token".to_owned())]);
        let user =
            Credentials::from_env(&env(&[("NATS_USER", "u"), ("NATS_PASSWORD", "pw-123456")]));
        assert!(!format!("{user:?}").contains("pw-123456"));
        assert!(matches!(Credentials::from_env(&env(&[("NATS_USER", "u")])), Credentials::None));
    }
}
