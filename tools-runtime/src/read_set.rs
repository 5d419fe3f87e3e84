//! The world-readable part of a uid-0 command's read set (`/etc` without `shadow`,
//! `ssl/private`, ...), walked once per process and kept until something that could widen or
//! narrow it changes.
//!
//! The walk ([`world_readable_rules_watched`]) puts an inotify watch on every entry (directory,
//! file, symbolic link) before it looks at it, so a change after the look is an event:
//!
//! * `IN_ATTRIB` on the entry itself: `chmod`, `chown`, a link count change, through any path
//!   (a hard link or a bind mount elsewhere included: the watch is on the inode);
//! * `IN_CREATE`, `IN_DELETE`, `IN_MOVED_FROM`, `IN_MOVED_TO` on a directory: entries appear,
//!   go or are replaced;
//! * `IN_DELETE_SELF`, `IN_MOVE_SELF`, `IN_IGNORED` (the watch is gone, say by an unmount),
//!   `IN_Q_OVERFLOW`.
//!
//! Mounts are not inotify events: a file bound over `/etc/hosts` changes what the path names,
//! not any watched inode. So the cache also keeps the text of `/proc/self/mountinfo` (the helper
//! starts in the runtime's mount namespace) and compares it at each use.
//!
//! A use costs one non-blocking `read` of the inotify descriptor and one read of mountinfo; any
//! event or a different mount table throws the rules away and walks again. Without inotify (no
//! instance or watch left for root) every use walks, as before the cache. What it does not do:
//! it does not close the window between its check and the helper's Landlock rules (a `chmod` in
//! those few milliseconds is seen by the next run), which the walk in the helper had as well.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use crate::root_mode::{world_readable_rules, world_readable_rules_watched};

/// The narrowed read set's world-readable rules, cached with the watches that invalidate them.
#[derive(Debug)]
pub(crate) struct WorldReadableCache {
    state: Mutex<Option<Cached>>,
    walks: AtomicU64,
}

#[derive(Debug)]
struct Cached {
    roots: Vec<PathBuf>,
    rules: Vec<PathBuf>,
    watcher: Inotify,
    mountinfo: String,
}

impl WorldReadableCache {
    pub(crate) const fn new() -> WorldReadableCache {
        WorldReadableCache { state: Mutex::new(None), walks: AtomicU64::new(0) }
    }

    /// The process's cache: one set of watches however many runtimes run uid-0 commands.
    pub(crate) fn global() -> &'static WorldReadableCache {
        static GLOBAL: WorldReadableCache = WorldReadableCache::new();
        &GLOBAL
    }

    /// How many times the roots were walked (a test's window on the cache).
    #[cfg(test)]
    pub(crate) fn walks(&self) -> u64 {
        self.walks.load(Ordering::Relaxed)
    }

    /// The rules for `roots`: the cached ones when nothing under them and no mount changed
    /// since they were walked, else a fresh walk (kept for the next use when it could be
    /// watched).
    pub(crate) fn rules(&self, roots: &[PathBuf]) -> Vec<PathBuf> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = state.as_ref()
            && cached.roots == roots
            && cached.unchanged()
        {
            return cached.rules.clone();
        }
        *state = None;
        self.walks.fetch_add(1, Ordering::Relaxed);
        match Cached::walk(roots) {
            Ok(cached) => {
                let rules = cached.rules.clone();
                *state = Some(cached);
                rules
            }
            // No inotify to lean on: walk without watches and keep nothing.
            Err(_) => world_readable_rules(roots),
        }
    }
}

/// What a watch reports: anything that could change a rule (see the module docs).
fn watch_mask() -> AddWatchFlags {
    AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_DONT_FOLLOW
}

impl Cached {
    fn walk(roots: &[PathBuf]) -> Result<Cached, String> {
        let watcher = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|error| format!("inotify_init1: {error}"))?;
        // Read before the walk: a mount made during it shows as a different table next time.
        let mountinfo = read_mountinfo()?;
        let mask = watch_mask();
        let mut watch = |path: &Path| match watcher.add_watch(path, mask) {
            // Gone between its directory's listing and here: the directory's watch saw it go.
            Ok(_) | Err(Errno::ENOENT) => Ok(()),
            Err(error) => Err(format!("cannot watch {}: {error}", path.display())),
        };
        let rules = world_readable_rules_watched(roots, &mut watch)?;
        Ok(Cached { roots: roots.to_vec(), rules, watcher, mountinfo })
    }

    /// No event since the walk and the same mount table.
    fn unchanged(&self) -> bool {
        let quiet = matches!(self.watcher.read_events(), Err(Errno::EAGAIN));
        quiet && read_mountinfo().is_ok_and(|mountinfo| mountinfo == self.mountinfo)
    }
}

fn read_mountinfo() -> Result<String, String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|error| format!("cannot read /proc/self/mountinfo: {error}"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// `etc/{public/a, mixed/{open, secret}}` in a fresh directory, everything public but
    /// `mixed/secret`.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("etc");
        for directory in ["public", "mixed"] {
            std::fs::create_dir_all(root.join(directory)).unwrap();
        }
        for file in ["public/a", "mixed/open", "mixed/secret"] {
            std::fs::write(root.join(file), "x").unwrap();
            set_mode(&root.join(file), 0o644);
        }
        for directory in ["", "public", "mixed"] {
            set_mode(&root.join(directory), 0o755);
        }
        set_mode(&root.join("mixed/secret"), 0o600);
        (base, root)
    }

    fn sorted(mut rules: Vec<PathBuf>) -> Vec<PathBuf> {
        rules.sort();
        rules
    }

    fn under(root: &Path, paths: &[&str]) -> Vec<PathBuf> {
        paths.iter().map(|path| root.join(path)).collect()
    }

    #[test]
    fn the_cached_rules_are_reused_until_a_chmod_and_then_follow_it() {
        let (_base, root) = tree();
        let roots = vec![root.clone()];
        let cache = WorldReadableCache::new();
        let public = under(&root, &["mixed/open", "public"]);
        assert_eq!(sorted(cache.rules(&roots)), public);
        // Reading the files (atime) and asking again changes nothing: no second walk.
        assert_eq!(std::fs::read_to_string(root.join("public/a")).unwrap(), "x");
        assert_eq!(sorted(cache.rules(&roots)), public);
        assert_eq!(cache.walks(), 1);

        // Narrowing: a public file made private drops its directory's rule.
        set_mode(&root.join("public/a"), 0o600);
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["mixed/open"]));
        // Widening: the secret made public makes all of `etc` one rule.
        set_mode(&root.join("public/a"), 0o644);
        set_mode(&root.join("mixed/secret"), 0o644);
        assert_eq!(cache.rules(&roots), vec![root.clone()]);
        // A directory's own mode counts too.
        set_mode(&root.join("mixed"), 0o700);
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["public"]));
        assert_eq!(cache.walks(), 4);
    }

    #[test]
    fn new_removed_renamed_and_hard_linked_entries_are_seen() {
        let (base, root) = tree();
        let roots = vec![root.clone()];
        let cache = WorldReadableCache::new();
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["mixed/open", "public"]));
        // A private file appears in a public directory.
        std::fs::write(root.join("public/new-key"), "k").unwrap();
        set_mode(&root.join("public/new-key"), 0o600);
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["mixed/open", "public/a"]));
        // It goes.
        std::fs::remove_file(root.join("public/new-key")).unwrap();
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["mixed/open", "public"]));
        // A private file is renamed over a public one.
        let outside = base.path().join("outside");
        std::fs::write(&outside, "k").unwrap();
        set_mode(&outside, 0o600);
        std::fs::rename(&outside, root.join("mixed/open")).unwrap();
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["public"]));
        // A `chmod` through a hard link outside the watched tree (its directory sees nothing,
        // the inode's own watch does).
        std::fs::hard_link(root.join("public/a"), &outside).unwrap();
        assert_eq!(sorted(cache.rules(&roots)), under(&root, &["public"]));
        set_mode(&outside, 0o600);
        assert_eq!(sorted(cache.rules(&roots)), Vec::<PathBuf>::new());
        assert_eq!(cache.walks(), 6);
    }

    #[test]
    fn other_roots_are_walked_afresh() {
        let (_base, root) = tree();
        let (_other_base, other) = tree();
        let cache = WorldReadableCache::new();
        assert_eq!(
            sorted(cache.rules(std::slice::from_ref(&root))),
            under(&root, &["mixed/open", "public"])
        );
        assert_eq!(
            sorted(cache.rules(std::slice::from_ref(&other))),
            under(&other, &["mixed/open", "public"])
        );
        assert_eq!(cache.walks(), 2);
    }
}
