//! Workspaces as archives: a task's workspace packed at submit (tar; `.agent/`, `.git/`,
//! ignored files and symbolic links left out), unpacked by a worker into its private folder,
//! and the files a run created, changed or deleted, packed as one cumulative change set.
//!
//! Unpacking trusts nothing: an archive holds regular files and folders at relative paths
//! (no `..`, no absolute path, no link, no device), or it is refused whole.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The archive member that lists the paths a change set deletes (a JSON array); the folder is
/// never packed from a workspace, so it cannot clash with a file.
const DELETED: &str = ".skills-agent-fleet/deleted.json";

/// What a file looked like when it was last seen: size, change and modification times, inode.
type Seen = (u64, i64, i64, i64, i64, u64);

/// The files of a workspace as last seen, by relative path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    files: BTreeMap<String, Seen>,
}

/// The files of `workspace` a task carries: everything but `.agent/`, `.git/`, the fleet's own
/// folder, what `.gitignore`/`.ignore` files leave out, and symbolic links.
fn walk(workspace: &Path) -> Result<Vec<(String, PathBuf, std::fs::Metadata)>> {
    let mut files = Vec::new();
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .filter_entry(|entry| {
            !(entry.depth() == 1
                && matches!(
                    entry.file_name().to_str(),
                    Some(".agent" | ".git" | ".skills-agent-fleet")
                ))
        })
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            // A file that went away while the folder was walked (a script's temporary file)
            // is simply not there.
            Err(error) if vanished(error.io_error()) => continue,
            Err(error) => {
                return Err(Error::Io {
                    path: workspace.to_owned(),
                    error: std::io::Error::other(error.to_string()),
                });
            }
        };
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        let path = entry.path().to_owned();
        let Ok(relative) = path.strip_prefix(workspace) else { continue };
        let Some(name) = relative.to_str() else {
            return Err(Error::io(
                &path,
                std::io::Error::other("the file name is not UTF-8; rename it or leave it out"),
            ));
        };
        let name = name.to_owned();
        let metadata = match std::fs::symlink_metadata(&path) {
            Ok(metadata) => metadata,
            Err(error) if vanished(Some(&error)) => continue,
            Err(error) => return Err(Error::io(&path, error)),
        };
        files.push((name, path, metadata));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// Whether an IO error says the file is no longer there.
fn vanished(error: Option<&std::io::Error>) -> bool {
    error.is_some_and(|error| error.kind() == std::io::ErrorKind::NotFound)
}

fn seen(metadata: &std::fs::Metadata) -> Seen {
    (
        metadata.len(),
        metadata.mtime(),
        metadata.mtime_nsec(),
        metadata.ctime(),
        metadata.ctime_nsec(),
        metadata.ino(),
    )
}

impl Manifest {
    /// The workspace's files as they are now.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the folder cannot be walked.
    pub fn of(workspace: &Path) -> Result<Manifest> {
        Ok(Manifest {
            files: walk(workspace)?
                .into_iter()
                .map(|(name, _, meta)| (name, seen(&meta)))
                .collect(),
        })
    }

    /// How many files it lists.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether it lists no file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn header(size: u64, mode: u32, mtime: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode & 0o777);
    header.set_mtime(mtime);
    header
}

/// Packs `workspace` (see the module's rules) into a tar archive.
///
/// # Errors
///
/// [`Error::TooLarge`] past `limit` bytes of file content, [`Error::Io`] when a file cannot be
/// read.
pub fn pack(workspace: &Path, limit: u64) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut total = 0u64;
    for (name, path, metadata) in walk(workspace)? {
        total = total.saturating_add(metadata.len());
        if total > limit {
            return Err(Error::TooLarge { path: workspace.to_owned(), limit });
        }
        append_file(&mut builder, &name, &path, &metadata)?;
    }
    builder.into_inner().map_err(|error| Error::io(workspace, error))
}

/// Appends one file; `false` when it went away since the walk saw it.
fn append_file(
    builder: &mut tar::Builder<Vec<u8>>,
    name: &str,
    path: &Path,
    metadata: &std::fs::Metadata,
) -> Result<bool> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if vanished(Some(&error)) => return Ok(false),
        Err(error) => return Err(Error::io(path, error)),
    };
    let mut content = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.read_to_end(&mut content).map_err(|error| Error::io(path, error))?;
    let mut header =
        header(content.len() as u64, metadata.mode(), u64::try_from(metadata.mtime()).unwrap_or(0));
    builder
        .append_data(&mut header, name, content.as_slice())
        .map_err(|error| Error::io(path, error))?;
    Ok(true)
}

/// The files of `workspace` that are new or changed since `base`, and the ones deleted, as
/// one archive ([`apply`] replays it onto a copy of the base).
///
/// # Errors
///
/// [`Error::TooLarge`] past `limit` bytes, [`Error::Io`] when a file cannot be read.
pub fn changes(workspace: &Path, base: &Manifest, limit: u64) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut total = 0u64;
    let mut present = std::collections::BTreeSet::new();
    for (name, path, metadata) in walk(workspace)? {
        if base.files.get(&name) != Some(&seen(&metadata)) {
            total = total.saturating_add(metadata.len());
            if total > limit {
                return Err(Error::TooLarge { path: workspace.to_owned(), limit });
            }
            if !append_file(&mut builder, &name, &path, &metadata)? {
                continue;
            }
        }
        present.insert(name);
    }
    let deleted: Vec<&String> = base.files.keys().filter(|name| !present.contains(*name)).collect();
    let list = serde_json::to_vec(&deleted).unwrap_or_default();
    let mut header = header(list.len() as u64, 0o644, 0);
    builder
        .append_data(&mut header, DELETED, list.as_slice())
        .map_err(|error| Error::io(workspace, error))?;
    builder.into_inner().map_err(|error| Error::io(workspace, error))
}

/// A path from an archive, checked: relative, only normal components, UTF-8.
fn checked(name: &str, path: &Path) -> Result<PathBuf> {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            _ => {
                return Err(Error::Archive {
                    name: name.to_owned(),
                    message: format!("member {} leaves the folder it unpacks into", path.display()),
                });
            }
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(Error::Archive {
            name: name.to_owned(),
            message: "a member has no path".into(),
        });
    }
    Ok(clean)
}

/// Unpacks an archive written by [`pack`] or [`changes`] into `into` (created if needed):
/// files are written (replacing what is there), then a change set's deletions are made.
/// Returns how many files it wrote.
///
/// # Errors
///
/// [`Error::Archive`] for a damaged archive or a member that is not a regular file at a
/// relative path (nothing of such an archive is trusted: check before writing), [`Error::Io`]
/// when a file cannot be written.
pub fn apply(name: &str, archive: &[u8], into: &Path) -> Result<usize> {
    let bad = |message: String| Error::Archive { name: name.to_owned(), message };
    // First pass: check every member before writing anything.
    let mut reader = tar::Archive::new(archive);
    let entries = reader.entries().map_err(|error| bad(error.to_string()))?;
    let mut deleted: Vec<String> = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(|error| bad(error.to_string()))?;
        let path = entry.path().map_err(|error| bad(error.to_string()))?.into_owned();
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            return Err(bad(format!(
                "member {} is a {kind:?}, not a file or folder: refused",
                path.display()
            )));
        }
        checked(name, &path)?;
        if path == Path::new(DELETED) {
            let mut list = Vec::new();
            entry.read_to_end(&mut list).map_err(|error| bad(error.to_string()))?;
            deleted = serde_json::from_slice(&list)
                .map_err(|error| bad(format!("the list of deleted files: {error}")))?;
            for gone in &deleted {
                checked(name, Path::new(gone))?;
            }
        }
    }
    std::fs::create_dir_all(into).map_err(|error| Error::io(into, error))?;
    let mut written = 0;
    let mut reader = tar::Archive::new(archive);
    reader.set_preserve_permissions(false);
    for entry in reader.entries().map_err(|error| bad(error.to_string()))? {
        let mut entry = entry.map_err(|error| bad(error.to_string()))?;
        let path = entry.path().map_err(|error| bad(error.to_string()))?.into_owned();
        if path == Path::new(DELETED) || entry.header().entry_type().is_dir() {
            continue;
        }
        let target = into.join(checked(name, &path)?);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|error| Error::io(parent, error))?;
        }
        // A link left where the file goes is replaced, never followed.
        if std::fs::symlink_metadata(&target).is_ok_and(|meta| !meta.is_file()) {
            remove(&target)?;
        }
        if !entry.unpack_in(into).map_err(|error| Error::io(&target, error))? {
            return Err(bad(format!("member {} leaves the folder", path.display())));
        }
        written += 1;
    }
    for name_deleted in deleted {
        let path = into.join(checked(name, Path::new(&name_deleted))?);
        if std::fs::symlink_metadata(&path).is_ok() {
            remove(&path)?;
        }
    }
    Ok(written)
}

fn remove(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).map_err(|error| Error::io(path, error))?;
    let result =
        if meta.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    result.map_err(|error| Error::io(path, error))
}

/// The regular files under `folder` (recursively, links left out), as `(relative name, path)`:
/// what a run directory archive holds.
pub(crate) fn pack_folder(folder: &Path) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut stack = vec![folder.to_owned()];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|error| Error::io(&dir, error))?;
        for entry in entries {
            let entry = entry.map_err(|error| Error::io(&dir, error))?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(|error| Error::io(&path, error))?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file()
                && let Ok(relative) = path.strip_prefix(folder)
                && let Some(name) = relative.to_str()
            {
                files.push((name.to_owned(), path.clone(), meta));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, path, meta) in files {
        append_file(&mut builder, &name, &path, &meta)?;
    }
    builder.into_inner().map_err(|error| Error::io(folder, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, name: &str, text: &str) {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_workspace_round_trips_without_what_stays_home() {
        let source = tempfile::tempdir().unwrap();
        let root = source.path();
        write(root, "data/input.csv", "a,b\n1,2\n");
        write(root, "notes.txt", "hello");
        write(root, ".gitignore", "*.log\nbuild/\n");
        write(root, "debug.log", "noise");
        write(root, "build/out.bin", "big");
        write(root, ".agent/runs/x/events.jsonl", "{}");
        write(root, ".git/HEAD", "ref");
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
        let script = root.join("run.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let archive = pack(root, 1 << 20).unwrap();
        let target = tempfile::tempdir().unwrap();
        let written = apply("ws", &archive, target.path()).unwrap();
        assert_eq!(written, 4, "data/input.csv, notes.txt, .gitignore, run.sh");
        assert_eq!(
            std::fs::read_to_string(target.path().join("data/input.csv")).unwrap(),
            "a,b\n1,2\n"
        );
        for absent in ["debug.log", "build", ".agent", ".git", "link"] {
            assert!(!target.path().join(absent).exists(), "{absent}");
        }
        let mode = std::fs::metadata(target.path().join("run.sh")).unwrap().mode();
        assert_eq!(mode & 0o111, 0o111, "the script stays executable");
        assert!(matches!(pack(root, 10), Err(Error::TooLarge { .. })));
    }

    #[test]
    fn a_change_set_carries_new_changed_and_deleted_files() {
        let work = tempfile::tempdir().unwrap();
        let root = work.path();
        write(root, "keep.txt", "same");
        write(root, "edit.txt", "before");
        write(root, "gone.txt", "bye");
        let base_archive = pack(root, 1 << 20).unwrap();
        let base = Manifest::of(root).unwrap();
        write(root, "edit.txt", "after!");
        write(root, "new/out.txt", "made by the run");
        std::fs::remove_file(root.join("gone.txt")).unwrap();
        let change_set = changes(root, &base, 1 << 20).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        apply("ws", &base_archive, elsewhere.path()).unwrap();
        let written = apply("changes", &change_set, elsewhere.path()).unwrap();
        assert_eq!(written, 2);
        let read = |name: &str| std::fs::read_to_string(elsewhere.path().join(name)).ok();
        assert_eq!(read("keep.txt").as_deref(), Some("same"));
        assert_eq!(read("edit.txt").as_deref(), Some("after!"));
        assert_eq!(read("new/out.txt").as_deref(), Some("made by the run"));
        assert_eq!(read("gone.txt"), None);
    }

    #[test]
    fn a_hostile_archive_is_refused_before_anything_is_written() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut good = header(2, 0o644, 0);
        builder.append_data(&mut good, "fine.txt", &b"ok"[..]).unwrap();
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        builder.append_link(&mut link, "evil", "/etc").unwrap();
        let archive = builder.into_inner().unwrap();
        let target = tempfile::tempdir().unwrap();
        let error = apply("hostile", &archive, target.path()).unwrap_err();
        assert!(error.to_string().contains("not a file or folder"), "{error}");
        assert!(!target.path().join("fine.txt").exists());
        // Garbage and a truncated archive are errors, never panics.
        let _ = apply("junk", b"not a tar at all, just some bytes", target.path());
        let _ = apply("cut", &archive[..archive.len() / 2], target.path());
        let mut deleted = tar::Builder::new(Vec::new());
        let list = br#"["../outside"]"#;
        let mut head = header(list.len() as u64, 0o644, 0);
        deleted.append_data(&mut head, DELETED, &list[..]).unwrap();
        let archive = deleted.into_inner().unwrap();
        assert!(apply("escape", &archive, target.path()).is_err());
    }
}
