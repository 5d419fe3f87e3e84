//! Discovery: a bounded breadth-first walk of one skill root that finds `SKILL.md` files.
//!
//! Each directory is listed with `walkdir` (one level, sorted by name, so the order is
//! stable), children are queued breadth-first, and a directory holding a `SKILL.md` is a skill
//! folder: it is not searched further. Dot-directories (`.git`, …) and `node_modules` are
//! skipped; exclude globs prune directories; include globs select skill folders. Symlinked
//! folders and symlinked `SKILL.md` files are followed when configured; a symlink back to an
//! ancestor is reported as a cycle. Every limit that cuts the walk short is reported.
//!
//! Queued folders are *probed* in batches: one `open` of `SKILL.md` per folder, and for skill
//! folders the bounded read, parse and validation. A batch of many folders is split over reader
//! threads (the work is mostly waiting on the file system); the probes are merged back in queue
//! order, so the index, the diagnostics and their order never depend on the threads.

use std::collections::{HashSet, VecDeque};
use std::fs::{self, File, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use globset::GlobSet;
use rustix::fs::{Mode as FileMode, OFlags};
use rustix::io::Errno;
use walkdir::WalkDir;

use crate::diagnostic::{Diagnostic, Mode, Rule, Severity};
use crate::frontmatter::{HeadProblem, RawFrontmatter, YamlProblem, parse_yaml, read_frontmatter};
use crate::index::{IndexConfig, IndexStats, RootStatus};
use crate::skill::{Skill, SkillFile, SkillRoot, SkillSource, build_skill};

/// The file name that makes a directory a skill folder.
pub const SKILL_FILE_NAME: &str = "SKILL.md";

/// Compiled include and exclude globs.
#[derive(Debug)]
pub(crate) struct Globs {
    pub(crate) include: Option<GlobSet>,
    pub(crate) exclude: Option<GlobSet>,
}

/// The identity of a directory: device and inode.
type Identity = (u64, u64);

fn identity(metadata: &Metadata) -> Identity {
    (metadata.dev(), metadata.ino())
}

/// Walks one root and its state.
pub(crate) struct RootWalk<'a> {
    pub(crate) config: &'a IndexConfig,
    pub(crate) globs: &'a Globs,
    pub(crate) diagnostics: &'a mut Vec<Diagnostic>,
    pub(crate) stats: &'a mut IndexStats,
    pub(crate) found: &'a mut Vec<Skill>,
}

struct Queued {
    directory: PathBuf,
    depth: usize,
    /// The identities of the folder and of every folder above it, up to the root.
    ancestors: Vec<Identity>,
}

/// How opening `SKILL.md` in a folder went.
enum SkillFileOpen {
    /// There is none: the folder is not a skill folder.
    Absent,
    /// Opened (following a symlink when allowed); not yet known to be a regular file.
    Opened(File),
    /// `SKILL.md` is a symlink and following symlinks is off.
    SymlinkNotFollowed,
    /// `SKILL.md` is a symlink that leads nowhere.
    Dangling(io::Error),
    /// Any other failure.
    Failed(io::Error),
}

const OPEN_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::CLOEXEC).union(OFlags::NOCTTY);

/// Opens `path` for reading without blocking (a FIFO does not hang the walk) and without
/// following a final symlink unless `follow_symlinks`. One `open` for the common cases: no
/// `SKILL.md` (not a skill folder) and a plain `SKILL.md`.
fn open_skill_file(path: &Path, follow_symlinks: bool) -> SkillFileOpen {
    match rustix::fs::open(path, OPEN_FLAGS | OFlags::NOFOLLOW, FileMode::empty()) {
        Ok(descriptor) => SkillFileOpen::Opened(File::from(descriptor)),
        Err(errno) if errno == Errno::NOENT => SkillFileOpen::Absent,
        // O_NOFOLLOW on a symlink: ELOOP on Linux, EMLINK on the BSDs.
        Err(errno) if errno == Errno::LOOP || errno == Errno::MLINK => {
            if !follow_symlinks {
                return SkillFileOpen::SymlinkNotFollowed;
            }
            match rustix::fs::open(path, OPEN_FLAGS, FileMode::empty()) {
                Ok(descriptor) => SkillFileOpen::Opened(File::from(descriptor)),
                Err(errno) if errno == Errno::NOENT => SkillFileOpen::Dangling(errno.into()),
                Err(errno) => SkillFileOpen::Failed(errno.into()),
            }
        }
        Err(errno) => SkillFileOpen::Failed(errno.into()),
    }
}

impl RootWalk<'_> {
    fn report(&mut self, rule: Rule, path: &Path, line: Option<usize>, message: String) {
        self.diagnostics.push(Diagnostic::new(path, self.config.mode, rule, line, message));
    }

    /// Walks `root` (already known to be a directory with identity `root_identity`) and returns
    /// how many directories were scanned and the root's status.
    pub(crate) fn walk(
        &mut self,
        root: &SkillRoot,
        root_identity: Identity,
    ) -> (usize, RootStatus) {
        let source = SkillSource { kind: root.kind, root: root.path.clone() };
        let mut queue = VecDeque::from([Queued {
            directory: root.path.clone(),
            depth: 0,
            ancestors: vec![root_identity],
        }]);
        let mut visited: HashSet<Identity> = HashSet::from([root_identity]);
        let mut scanned = 0usize;
        let mut too_deep = 0usize;
        let mut status = RootStatus::Scanned;
        let context = ProbeContext {
            config: self.config,
            include: self.globs.include.as_ref(),
            root,
            source: &source,
        };
        while !queue.is_empty() {
            let budget = self.config.max_directories.saturating_sub(scanned);
            if budget == 0 {
                let message = format!(
                    "stopped after {} directories (the limit); {} more queued directories were not \
                     searched",
                    self.config.max_directories,
                    queue.len()
                );
                self.report(Rule::DirectoryLimit, &root.path, None, message);
                break;
            }
            let batch: Vec<Queued> = queue.drain(..queue.len().min(budget).min(BATCH)).collect();
            scanned += batch.len();
            let probes = probe_batch(&context, &batch, self.config.reader_threads);
            for (item, probe) in batch.into_iter().zip(probes) {
                match probe {
                    Probe::NotSkill => {}
                    Probe::SkillFolder { skill, diagnostics, bytes_read } => {
                        self.diagnostics.extend(diagnostics);
                        if let Some(bytes_read) = bytes_read {
                            self.stats.skill_files_read += 1;
                            self.stats.frontmatter_bytes_read += bytes_read;
                        }
                        self.found.extend(skill.map(|skill| *skill));
                        continue;
                    }
                }
                for entry in WalkDir::new(&item.directory)
                    .min_depth(1)
                    .max_depth(1)
                    .follow_links(false)
                    .sort_by_file_name()
                {
                    let entry = match entry {
                        Ok(entry) => entry,
                        Err(error) => {
                            let message =
                                format!("cannot list {}: {error}", item.directory.display());
                            if item.depth == 0 {
                                status = RootStatus::Unreadable { message: message.clone() };
                                self.report(Rule::RootUnreadable, &item.directory, None, message);
                            } else {
                                self.report(
                                    Rule::DirectoryUnreadable,
                                    &item.directory,
                                    None,
                                    message,
                                );
                            }
                            break;
                        }
                    };
                    let name = entry.file_name().to_string_lossy();
                    if name.starts_with('.') || name == "node_modules" {
                        continue;
                    }
                    let path = entry.path();
                    // A folder's identity is its device and inode; a symlink is followed first.
                    let child_identity = if entry.path_is_symlink() {
                        match fs::metadata(path) {
                            Ok(metadata) if !metadata.is_dir() => continue,
                            Ok(_) if !self.config.follow_symlinks => {
                                self.report(
                                    Rule::SymlinkNotFollowed,
                                    path,
                                    None,
                                    format!("symlinked folder {} not followed", path.display()),
                                );
                                continue;
                            }
                            Ok(metadata) => identity(&metadata),
                            Err(error) => {
                                let target = fs::read_link(path).unwrap_or_default();
                                self.report(
                                    Rule::SymlinkDangling,
                                    path,
                                    None,
                                    format!(
                                        "symlink {} -> {} cannot be followed: {error}",
                                        path.display(),
                                        target.display()
                                    ),
                                );
                                continue;
                            }
                        }
                    } else if entry.file_type().is_dir() {
                        // `stat`, not the directory entry's inode: on overlayfs the two differ,
                        // and a symlink's target is identified by `stat`.
                        match entry.metadata() {
                            Ok(metadata) => identity(&metadata),
                            Err(_) => continue,
                        }
                    } else {
                        if name.eq_ignore_ascii_case(SKILL_FILE_NAME) {
                            // `skill.md`, `Skill.md`, …: almost certainly meant as a skill.
                            self.report(
                                Rule::SkillFileName,
                                path,
                                None,
                                format!(
                                    "{} is not named exactly {SKILL_FILE_NAME}; the folder is not \
                                     a skill until it is renamed",
                                    path.display()
                                ),
                            );
                        }
                        continue;
                    };
                    let relative = path.strip_prefix(&root.path).unwrap_or(path);
                    if self.globs.exclude.as_ref().is_some_and(|exclude| exclude.is_match(relative))
                    {
                        continue;
                    }
                    if item.depth + 1 > self.config.max_depth {
                        too_deep += 1;
                        continue;
                    }
                    if item.ancestors.contains(&child_identity) {
                        let target = fs::read_link(path).unwrap_or_default();
                        self.report(
                            Rule::SymlinkCycle,
                            path,
                            None,
                            format!(
                                "symlink {} -> {} leads back to a folder above it; not followed",
                                path.display(),
                                target.display()
                            ),
                        );
                        continue;
                    }
                    if !visited.insert(child_identity) {
                        continue;
                    }
                    let mut ancestors = item.ancestors.clone();
                    ancestors.push(child_identity);
                    queue.push_back(Queued {
                        directory: path.to_path_buf(),
                        depth: item.depth + 1,
                        ancestors,
                    });
                }
            }
        }
        if too_deep > 0 {
            let message = format!(
                "{too_deep} folders deeper than {} levels were not searched",
                self.config.max_depth
            );
            self.report(Rule::DepthLimit, &root.path, None, message);
        }
        (scanned, status)
    }
}

/// Folders probed per batch: each batch is probed (in parallel when large), then merged in
/// queue order, so the result does not depend on thread timing.
const BATCH: usize = 256;

/// Batches smaller than this are probed on the calling thread.
const PARALLEL_MIN: usize = 32;

/// What a probe needs; shared read-only by the reader threads.
struct ProbeContext<'a> {
    config: &'a IndexConfig,
    include: Option<&'a GlobSet>,
    root: &'a SkillRoot,
    source: &'a SkillSource,
}

/// What probing one folder found.
enum Probe {
    /// No `SKILL.md`: the folder is listed and its subfolders queued.
    NotSkill,
    /// A skill folder (not searched further): the skill when it is valid, the diagnostics, and
    /// the bytes read when the file was read.
    SkillFolder { skill: Option<Box<Skill>>, diagnostics: Vec<Diagnostic>, bytes_read: Option<u64> },
}

/// Probes every folder of `batch`, on up to `threads` threads, and returns the probes in order.
fn probe_batch(context: &ProbeContext<'_>, batch: &[Queued], threads: usize) -> Vec<Probe> {
    let threads = threads.max(1).min(batch.len().div_ceil(PARALLEL_MIN / 2).max(1));
    if threads == 1 || batch.len() < PARALLEL_MIN {
        return batch.iter().map(|item| probe(context, &item.directory)).collect();
    }
    let chunk_size = batch.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .chunks(chunk_size)
            .map(|chunk| {
                let handle = scope.spawn(move || {
                    chunk.iter().map(|item| probe(context, &item.directory)).collect::<Vec<_>>()
                });
                (chunk, handle)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(chunk, handle)| {
                // A reader thread cannot panic; should it anyway, its folders are probed again
                // here rather than lost.
                handle.join().unwrap_or_else(|_| {
                    chunk.iter().map(|item| probe(context, &item.directory)).collect()
                })
            })
            .collect()
    })
}

/// Looks for `SKILL.md` in `directory` and, when there is one, reads and validates it.
fn probe(context: &ProbeContext<'_>, directory: &Path) -> Probe {
    let skill_file = directory.join(SKILL_FILE_NAME);
    let mut diagnostics = Vec::new();
    let mut report = |rule: Rule, line: Option<usize>, message: String| {
        diagnostics.push(Diagnostic::new(&skill_file, context.config.mode, rule, line, message));
    };
    let file = match open_skill_file(&skill_file, context.config.follow_symlinks) {
        SkillFileOpen::Absent => return Probe::NotSkill,
        SkillFileOpen::Opened(file) => file,
        SkillFileOpen::SymlinkNotFollowed => {
            report(
                Rule::SymlinkNotFollowed,
                None,
                format!("symlinked {} not followed", skill_file.display()),
            );
            return Probe::SkillFolder { skill: None, diagnostics, bytes_read: None };
        }
        SkillFileOpen::Dangling(error) => {
            let target = fs::read_link(&skill_file).unwrap_or_default();
            report(
                Rule::SkillFileUnreadable,
                None,
                format!(
                    "{} is a symlink to {} that cannot be followed: {error}",
                    skill_file.display(),
                    target.display()
                ),
            );
            return Probe::SkillFolder { skill: None, diagnostics, bytes_read: None };
        }
        SkillFileOpen::Failed(error) => {
            match fs::symlink_metadata(&skill_file) {
                Ok(metadata) if !metadata.is_file() => report(
                    Rule::SkillFileNotRegular,
                    None,
                    format!(
                        "{} is {}, not a regular file",
                        skill_file.display(),
                        file_kind(&metadata)
                    ),
                ),
                _ => report(
                    Rule::SkillFileUnreadable,
                    None,
                    format!("cannot read {}: {error}", skill_file.display()),
                ),
            }
            return Probe::SkillFolder { skill: None, diagnostics, bytes_read: None };
        }
    };
    let relative = directory.strip_prefix(&context.root.path).unwrap_or(directory);
    if context.include.is_some_and(|include| !include.is_match(relative)) {
        return Probe::SkillFolder { skill: None, diagnostics, bytes_read: None };
    }
    let (skill, bytes_read) = read_skill(context, directory, &skill_file, file, &mut diagnostics);
    Probe::SkillFolder { skill, diagnostics, bytes_read }
}

/// Reads the frontmatter of an opened `SKILL.md`, parses and validates it. Returns the skill
/// (when valid) and the bytes read (when the file was read).
fn read_skill(
    context: &ProbeContext<'_>,
    directory: &Path,
    skill_file: &Path,
    mut file: File,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Option<Box<Skill>>, Option<u64>) {
    let mode = context.config.mode;
    let mut report = |rule: Rule, line: Option<usize>, message: String| {
        diagnostics.push(Diagnostic::new(skill_file, mode, rule, line, message));
    };
    match file.metadata() {
        Ok(metadata) if metadata.is_file() => {}
        Ok(metadata) => {
            let kind = file_kind(&metadata);
            report(
                Rule::SkillFileNotRegular,
                None,
                format!("{} is {kind}, not a regular file", skill_file.display()),
            );
            return (None, None);
        }
        Err(error) => {
            report(
                Rule::SkillFileUnreadable,
                None,
                format!("cannot read {}: {error}", skill_file.display()),
            );
            return (None, None);
        }
    }
    advise_no_readahead(&file);
    let head = read_frontmatter(&mut file, context.config.max_frontmatter_bytes);
    let bytes_read = Some(head.bytes_read);
    let skill =
        skill_from_head(head.result, skill_file, directory, context.source, mode, diagnostics);
    (skill.map(Box::new), bytes_read)
}

/// Turns the result of a bounded head read into a validated skill, reporting every problem.
pub(crate) fn skill_from_head(
    head: Result<RawFrontmatter, HeadProblem>,
    skill_file: &Path,
    directory: &Path,
    source: &SkillSource,
    mode: Mode,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Skill> {
    let mut report = |rule: Rule, line: Option<usize>, message: String| {
        diagnostics.push(Diagnostic::new(skill_file, mode, rule, line, message));
    };
    let raw = match head {
        Ok(raw) => raw,
        Err(problem) => {
            let (rule, line, message) = match problem {
                HeadProblem::Missing => (
                    Rule::FrontmatterMissing,
                    Some(1),
                    "the file does not start with a `---` frontmatter line".to_owned(),
                ),
                HeadProblem::Utf16 => (
                    Rule::FrontmatterMissing,
                    Some(1),
                    "the file is UTF-16 (it starts with a UTF-16 byte order mark); save it as \
                     UTF-8"
                        .to_owned(),
                ),
                HeadProblem::Unclosed => (
                    Rule::FrontmatterUnclosed,
                    Some(1),
                    "the frontmatter opened on line 1 has no closing `---` line".to_owned(),
                ),
                HeadProblem::TooLarge { limit } => (
                    Rule::FrontmatterTooLarge,
                    Some(1),
                    format!("no closing `---` line within the first {limit} bytes"),
                ),
                HeadProblem::Io(error) => (
                    Rule::SkillFileUnreadable,
                    None,
                    format!("cannot read {}: {error}", skill_file.display()),
                ),
            };
            report(rule, line, message);
            return None;
        }
    };
    if let Some(line) = raw.invalid_utf8_line {
        report(
            Rule::FrontmatterEncoding,
            Some(line),
            "the frontmatter is not valid UTF-8; the bad bytes were read as U+FFFD (save the \
             file as UTF-8)"
                .to_owned(),
        );
    }
    let parsed = match parse_yaml(&raw) {
        Ok(parsed) => parsed,
        Err(YamlProblem::Syntax { line, message }) => {
            report(Rule::YamlSyntax, line, format!("invalid YAML: {message}"));
            return None;
        }
        Err(YamlProblem::NotMapping { line, found }) => {
            report(
                Rule::FrontmatterNotMapping,
                Some(line),
                format!("the frontmatter is {found}, not a mapping of fields"),
            );
            return None;
        }
    };
    let folder_name = folder_name(directory);
    let skill_file = SkillFile { path: skill_file, directory, folder_name: &folder_name, source };
    let skill = build_skill(skill_file, parsed, mode, diagnostics);
    // Bytes that are not UTF-8 are an error in strict mode: the skill is reported, not indexed.
    let encoding_is_error = raw.invalid_utf8_line.is_some()
        && Rule::FrontmatterEncoding.severity(mode) == Severity::Error;
    skill.filter(|_| !encoding_is_error)
}

/// Validates the text of a `SKILL.md` without touching the file system: the same frontmatter
/// reading, YAML parsing and rules as [`crate::SkillIndex::build`], for a file at `path` (its
/// parent folder's name is the expected skill name) found in `source`. Returns the skill when
/// no error was reported, and every diagnostic.
pub fn validate_skill_text(
    contents: &[u8],
    path: &Path,
    source: &SkillSource,
    mode: Mode,
) -> (Option<Skill>, Vec<Diagnostic>) {
    let mut reader = contents;
    // One byte more than the text, so the end of the text is seen before the limit.
    let head = read_frontmatter(&mut reader, contents.len().saturating_add(1));
    let directory = path.parent().unwrap_or(Path::new(""));
    let mut diagnostics = Vec::new();
    let skill = skill_from_head(head.result, path, directory, source, mode, &mut diagnostics);
    (skill, diagnostics)
}

/// Tells the kernel not to read ahead: only the head of the file is wanted, so on a cold cache
/// a skill costs the page or two it needs, not the default readahead window of its body.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn advise_no_readahead(file: &File) {
    // Advice only; a refusal changes nothing but speed.
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random);
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn advise_no_readahead(_file: &File) {}

/// The name of a skill folder (for a root that is itself a skill folder, such as `.`, the name
/// of the directory it resolves to).
fn folder_name(directory: &Path) -> String {
    match directory.file_name() {
        Some(name)
            if directory
                .components()
                .next_back()
                .is_some_and(|last| matches!(last, std::path::Component::Normal(_))) =>
        {
            name.to_string_lossy().into_owned()
        }
        _ => fs::canonicalize(directory)
            .ok()
            .and_then(|resolved| {
                resolved.file_name().map(|name| name.to_string_lossy().into_owned())
            })
            .unwrap_or_default(),
    }
}

/// A phrase naming the kind of file `metadata` describes (`a regular file`, `a FIFO`, …), for
/// messages.
pub fn file_kind(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "a special file"
    }
}
