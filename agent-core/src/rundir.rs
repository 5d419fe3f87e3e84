//! The run directory (seed 002 §10.1) and secret redaction.
//!
//! ```text
//! <runs-dir>/<run_id>/
//!   events.jsonl      the source of truth: one line per event, fsync at every turn end
//!   state.json        the run state after the last finished turn
//!   final.md          the final answer
//!   inputs/request.txt
//!   artifacts/
//!   observations/     texts over the inline cap, named by SHA-256 (events hold the reference)
//!   last_execution.json  only between an action's `action_executed` and its observation:
//!                     the whole result, so a resume completes the action without redoing it
//! ```
//!
//! Secrets (provider keys, values of variables with secret-looking names, values the caller
//! names) are redacted where text enters the run — the task, every observation, every model
//! answer — so the context the model sees, the events and every file agree, and a replay is
//! exact. The event bus redacts once more before any sink sees an event.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Values shorter than this are not treated as secrets (they would redact ordinary words).
const MIN_SECRET_CHARS: usize = 6;

/// Replaces known secret values with `[REDACTED:NAME]`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `(name, value)`, longest value first.
    secrets: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor that knows no secret.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Redacts the values of the variables in `vars` whose names look secret (tools-runtime's
    /// rule: `*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, …) or are listed in `names`.
    pub fn from_env<I>(vars: I, names: &[String]) -> Redactor
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut redactor = Redactor::new();
        for (name, value) in vars {
            if tools_runtime::is_secret_name(&name) || names.contains(&name) {
                redactor.add(&name, &value);
            }
        }
        redactor
    }

    /// Adds one secret value under `name` (values under 6 characters are ignored).
    pub fn add(&mut self, name: &str, value: &str) {
        let value = value.trim();
        if value.chars().count() < MIN_SECRET_CHARS
            || self.secrets.iter().any(|(_, known)| known == value)
        {
            return;
        }
        self.secrets.push((name.to_owned(), value.to_owned()));
        self.secrets.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    }

    /// How many secrets it knows.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// Whether it knows none.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every known secret replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for (name, value) in &self.secrets {
            if text.contains(value.as_str()) {
                text = Cow::Owned(text.replace(value.as_str(), &format!("[REDACTED:{name}]")));
            }
        }
        text
    }

    /// Redacts every string (and object key) inside `value`.
    pub fn redact_value(&self, value: &mut Value) {
        if self.secrets.is_empty() {
            return;
        }
        match value {
            Value::String(text) => {
                if let Cow::Owned(clean) = self.redact(text) {
                    *text = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_value(item)),
            Value::Object(map) => {
                let dirty: Vec<String> = map
                    .keys()
                    .filter(|key| matches!(self.redact(key), Cow::Owned(_)))
                    .cloned()
                    .collect();
                for key in dirty {
                    if let Some(item) = map.remove(&key) {
                        map.insert(self.redact(&key).into_owned(), item);
                    }
                }
                map.values_mut().for_each(|item| self.redact_value(item));
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// Where a long text was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredText {
    /// SHA-256 of the text, lowercase hex.
    pub sha256: String,
    /// The path relative to the run directory (`observations/<sha256>.txt`).
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The last action executed live, with its whole observation text (redacted), written to
/// `last_execution.json` before its `action_executed` event. A record that ends with that
/// event (the process died before the observation was recorded) is completed from it on
/// resume instead of executing the action a second time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LastExecution {
    /// The `seq` of the `action_executed` event that follows.
    pub(crate) seq: u64,
    /// The action, its status and its result as that event holds them.
    pub(crate) action: crate::action::Action,
    pub(crate) status: crate::state::ObservationStatus,
    pub(crate) result: Value,
    /// The observation text, redacted, before the inline cap.
    pub(crate) content: String,
}

/// `last_execution.json`, relative to the run directory.
const LAST_EXECUTION: &str = "last_execution.json";

/// One run's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates `<runs_dir>/<run_id>/` with its subfolders; fails if the run exists.
    pub(crate) fn create(runs_dir: &Path, run_id: &str) -> Result<RunDir> {
        std::fs::create_dir_all(runs_dir).map_err(|error| Error::io(runs_dir, error))?;
        let path = runs_dir.join(run_id);
        std::fs::create_dir(&path).map_err(|error| Error::io(&path, error))?;
        let run_dir = RunDir { path };
        for folder in ["inputs", "artifacts", "observations"] {
            let folder = run_dir.path.join(folder);
            if let Err(error) = std::fs::create_dir(&folder) {
                run_dir.remove_if_unstarted();
                return Err(Error::NotStarted { path: folder, error });
            }
        }
        Ok(run_dir)
    }

    /// An existing run directory (it must hold `events.jsonl`).
    pub(crate) fn open(path: &Path) -> Result<RunDir> {
        let events = path.join("events.jsonl");
        if !events.is_file() {
            return Err(Error::Recording {
                path: events,
                message: "no such file: not a run directory".to_owned(),
            });
        }
        Ok(RunDir { path: path.to_owned() })
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `events.jsonl`.
    pub(crate) fn events_path(&self) -> PathBuf {
        self.path.join("events.jsonl")
    }

    /// Writes `bytes` to `relative` inside the run directory, atomically (temp file + rename).
    pub(crate) fn write_file(&self, relative: &Path, bytes: &[u8]) -> Result<()> {
        let path = self.path.join(relative);
        let temporary = path.with_extension("partial");
        // A write that fails (a full disk) leaves no half-written temporary file behind.
        std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, &path)).map_err(
            |error| {
                let _ = std::fs::remove_file(&temporary);
                Error::io(&path, error)
            },
        )
    }

    /// Writes `last_execution.json` (atomically).
    pub(crate) fn write_last_execution(&self, execution: &LastExecution) -> Result<()> {
        let bytes = serde_json::to_vec(execution).map_err(|error| Error::Recording {
            path: self.path.join(LAST_EXECUTION),
            message: format!("cannot encode the last execution: {error}"),
        })?;
        self.write_file(Path::new(LAST_EXECUTION), &bytes)
    }

    /// Removes `last_execution.json` once its observation is recorded: a finished run
    /// directory holds the record alone. A file left behind (this failed, or the process died
    /// first) is harmless: it names the `seq` of its `action_executed`, which is then no longer
    /// the record's last event.
    pub(crate) fn remove_last_execution(&self) {
        let _ = std::fs::remove_file(self.path.join(LAST_EXECUTION));
    }

    /// Removes the directory when its record holds no complete event (the run could not
    /// record `run_started`): such a folder has nothing to resume or replay. Whether it did.
    pub(crate) fn remove_if_unstarted(&self) -> bool {
        let started = std::fs::read(self.events_path()).is_ok_and(|bytes| bytes.contains(&b'\n'));
        !started && std::fs::remove_dir_all(&self.path).is_ok()
    }

    /// `last_execution.json`, when there is one that can be read.
    pub(crate) fn read_last_execution(&self) -> Option<LastExecution> {
        let bytes = std::fs::read(self.path.join(LAST_EXECUTION)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Stores `text` under `observations/<sha256>.txt` (once per content).
    pub(crate) fn store_observation(&self, text: &str) -> Result<StoredText> {
        let sha256 = sha256_hex(text.as_bytes());
        let relative = format!("observations/{sha256}.txt");
        let path = self.path.join(&relative);
        if !path.exists() {
            self.write_file(Path::new(&relative), text.as_bytes())?;
        }
        Ok(StoredText { sha256, path: relative, bytes: text.len() as u64 })
    }

    /// Stores binary content (an image or resource an external tool returned) under
    /// `observations/<sha256>.<extension>` (once per content).
    pub(crate) fn store_blob(&self, bytes: &[u8], extension: &str) -> Result<StoredText> {
        let sha256 = sha256_hex(bytes);
        let relative = format!("observations/{sha256}.{extension}");
        let path = self.path.join(&relative);
        if !path.exists() {
            self.write_file(Path::new(&relative), bytes)?;
        }
        Ok(StoredText { sha256, path: relative, bytes: bytes.len() as u64 })
    }

    /// Reads a stored observation back, checking its hash.
    pub(crate) fn read_observation(&self, stored: &StoredText) -> Result<String> {
        if !is_sha256_hex(&stored.sha256) {
            return Err(Error::Recording {
                path: self.path.clone(),
                message: format!("`{}` is not a SHA-256 reference", stored.sha256),
            });
        }
        let path = self.path.join("observations").join(format!("{}.txt", stored.sha256));
        let text = std::fs::read_to_string(&path).map_err(|error| Error::io(&path, error))?;
        if sha256_hex(text.as_bytes()) != stored.sha256 {
            return Err(Error::Recording {
                path,
                message: "the stored observation does not match its SHA-256".to_owned(),
            });
        }
        Ok(text)
    }
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    lowercase_hex(&Sha256::digest(bytes))
}

/// Bytes as lowercase hex.
pub(crate) fn lowercase_hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Whether `text` is 64 lowercase hex digits (a safe file name).
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

/// A new run id: `YYYYMMDD_HHMMSS_xxxx` (UTC time plus four hex digits of entropy).
pub(crate) fn new_run_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (date, time) = civil(now.as_secs());
    let salt = format!(
        "{}:{}:{}",
        now.as_nanos(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let hex = sha256_hex(salt.as_bytes());
    format!("{}_{}_{}", date.replace('-', ""), time.replace(':', ""), &hex[..4])
}

/// Whether `id` is a plausible run id (no separators, no dots): safe to join to a runs dir.
pub fn is_valid_run_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// `(YYYY-MM-DD, HH:MM:SS)` of a Unix time (Howard Hinnant's days-to-civil algorithm).
pub(crate) fn civil(unix_seconds: u64) -> (String, String) {
    let days = (unix_seconds / 86_400) as i64;
    let seconds = unix_seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!("{:02}:{:02}:{:02}", seconds / 3_600, seconds % 3_600 / 60, seconds % 60),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_named_once_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let run_dir = RunDir::create(dir.path(), "20260101_000000_aaaa")
            .unwrap_or_else(|error| panic!("{error}"));
        // Writes through this link fail as on a full disk (ENOSPC).
        let temporary = run_dir.path().join("state.partial");
        std::os::unix::fs::symlink("/dev/full", &temporary)
            .unwrap_or_else(|error| panic!("{error}"));
        let error = run_dir.write_file(Path::new("state.json"), b"{}").err();
        let message = error.map(|error| error.to_string()).unwrap_or_default();
        assert!(message.contains("state.json: No space left on device"), "{message}");
        assert_eq!(message.matches("No space left").count(), 1, "{message}");
        assert!(std::fs::symlink_metadata(&temporary).is_err(), "the temporary file is gone");
        assert!(!run_dir.path().join("state.json").exists());
    }

    #[test]
    fn civil_dates_match_known_instants() {
        assert_eq!(civil(0), ("1970-01-01".to_owned(), "00:00:00".to_owned()));
        assert_eq!(civil(1_770_122_096), ("2026-02-03".to_owned(), "12:34:56".to_owned()));
        assert_eq!(civil(951_782_400), ("2000-02-29".to_owned(), "00:00:00".to_owned()));
    }

    #[test]
    fn secrets_are_replaced_longest_first_and_short_values_ignored() {
        let redactor = Redactor::from_env(
            [
                ("FOO_API_KEY".to_owned(), "sk-abcdef123456".to_owned()),
                ("GH_TOKEN".to_owned(), "sk-abcdef".to_owned()),
                ("HOME".to_owned(), "/root".to_owned()),
                ("MY_PASSWORD".to_owned(), "pw".to_owned()),
            ],
            &[],
        );
        assert_eq!(redactor.len(), 2);
        assert_eq!(
            redactor.redact("key=sk-abcdef123456 short=sk-abcdef home=/root"),
            "key=[REDACTED:FOO_API_KEY] short=[REDACTED:GH_TOKEN] home=/root"
        );
        let mut value = serde_json::json!({"a": ["x sk-abcdef123456"], "sk-abcdef": 1});
        redactor.redact_value(&mut value);
        assert_eq!(
            value,
            serde_json::json!({"a": ["x [REDACTED:FOO_API_KEY]"], "[REDACTED:GH_TOKEN]": 1})
        );
    }

    #[test]
    fn run_ids_are_unique_and_safe() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_ne!(a, b);
        assert!(is_valid_run_id(&a), "{a}");
        assert_eq!(a.len(), "20260203_123456_abcd".len());
        assert!(!is_valid_run_id("../x") && !is_valid_run_id("a/b") && !is_valid_run_id(""));
    }
}
