//! Containment: resolving a relative path inside a skill folder and opening it without races.
//!
//! [`SkillFolder::check`] is the *check*: it refuses absolute paths and `..` lexically, resolves
//! symlinks, refuses anything that resolves outside the (canonical) folder, and refuses
//! directories, FIFOs, sockets and devices from their metadata, so they are never opened.
//! [`SkillFolder::open_checked`] is the *use*: it opens the resolved path relative to a
//! descriptor of the folder with `O_NOFOLLOW | O_NONBLOCK`, on Linux through `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (the kernel refuses any symlink or escape that
//! appeared since the check), and then compares the opened file's device and inode with what the
//! check saw. A file swapped for a link, another file or a FIFO in between is refused with
//! [`Error::ChangedSinceCheck`].

use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use skills_agent_registry::file_kind;

use crate::error::{Error, Result};

/// A skill folder, opened once, that paths are resolved against.
#[derive(Debug)]
pub struct SkillFolder {
    /// The folder with every symlink resolved.
    canonical: PathBuf,
    /// A descriptor of the folder; opens are relative to it.
    descriptor: OwnedFd,
}

/// A path that passed [`SkillFolder::check`]: inside the folder, a regular file, with its
/// identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedPath {
    /// The path as requested.
    pub requested: String,
    /// The resolved path relative to the folder (no symlinks left in it).
    pub inside: PathBuf,
    /// The resolved absolute path: the reference to the full file.
    pub absolute: PathBuf,
    /// Size in bytes at check time.
    pub size: u64,
    device: u64,
    inode: u64,
}

const OPEN_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOCTTY);

impl SkillFolder {
    /// Opens the skill folder at `directory` (symlinks to it are resolved once, here).
    ///
    /// # Errors
    ///
    /// [`Error::SkillFolder`] when it does not resolve or cannot be opened as a directory.
    pub fn open(directory: &Path) -> Result<SkillFolder> {
        let folder_error =
            |source: io::Error| Error::SkillFolder { path: directory.to_path_buf(), source };
        let canonical = fs::canonicalize(directory).map_err(folder_error)?;
        let descriptor = rustix::fs::open(
            &canonical,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| folder_error(errno.into()))?;
        Ok(SkillFolder { canonical, descriptor })
    }

    /// The folder with every symlink resolved.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Resolves `relative` inside the folder and checks that it is a regular file there.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`], [`Error::AbsolutePath`], [`Error::ParentTraversal`] (lexical),
    /// [`Error::NotFound`], [`Error::OutsideSkill`] (a symlink leads out),
    /// [`Error::IsDirectory`], [`Error::NotRegularFile`] (FIFO, socket, device), [`Error::Io`].
    pub fn check(&self, relative: &str) -> Result<CheckedPath> {
        let requested = relative.to_owned();
        if relative.is_empty() {
            return Err(Error::InvalidPath { path: requested, reason: "the path is empty" });
        }
        if relative.contains('\0') {
            return Err(Error::InvalidPath { path: requested, reason: "the path has a NUL byte" });
        }
        let path = Path::new(relative);
        for component in path.components() {
            match component {
                Component::RootDir | Component::Prefix(_) => {
                    return Err(Error::AbsolutePath { path: requested });
                }
                Component::ParentDir => return Err(Error::ParentTraversal { path: requested }),
                Component::CurDir | Component::Normal(_) => {}
            }
        }
        let joined = self.canonical.join(path);
        let resolved = match fs::canonicalize(&joined) {
            Ok(resolved) => resolved,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                // A dangling symlink whose target would be outside is still an escape attempt.
                if let Ok(target) = fs::read_link(&joined)
                    && let Some(outside) = outside_target(&self.canonical, &joined, &target)
                {
                    return Err(Error::OutsideSkill {
                        path: requested,
                        resolved: outside,
                        folder: self.canonical.clone(),
                    });
                }
                return Err(Error::NotFound { path: requested, folder: self.canonical.clone() });
            }
            Err(source) => return Err(Error::Io { path: joined, source }),
        };
        let Ok(inside) = resolved.strip_prefix(&self.canonical).map(Path::to_path_buf) else {
            return Err(Error::OutsideSkill {
                path: requested,
                resolved,
                folder: self.canonical.clone(),
            });
        };
        let metadata = fs::symlink_metadata(&resolved)
            .map_err(|source| Error::Io { path: resolved.clone(), source })?;
        if metadata.is_dir() {
            return Err(Error::IsDirectory { path: requested });
        }
        if !metadata.is_file() {
            return Err(Error::NotRegularFile { path: requested, kind: file_kind(&metadata) });
        }
        Ok(CheckedPath {
            requested,
            inside,
            absolute: resolved,
            size: metadata.len(),
            device: metadata.dev(),
            inode: metadata.ino(),
        })
    }

    /// Opens a checked path, refusing it if anything changed since the check.
    ///
    /// # Errors
    ///
    /// [`Error::ChangedSinceCheck`] when a component became a symlink, the file was replaced,
    /// or it is no longer a regular file; [`Error::Io`] for other failures.
    pub fn open_checked(&self, checked: &CheckedPath) -> Result<File> {
        let changed =
            |reason: String| Error::ChangedSinceCheck { path: checked.requested.clone(), reason };
        let descriptor = match open_beneath(&self.descriptor, &checked.inside) {
            Ok(descriptor) => descriptor,
            Err(errno) if errno == rustix::io::Errno::LOOP => {
                return Err(changed("a path component is now a symlink".to_owned()));
            }
            Err(errno) if errno == rustix::io::Errno::XDEV => {
                return Err(changed("the path now leads outside the skill folder".to_owned()));
            }
            Err(errno) if errno == rustix::io::Errno::NOENT => {
                return Err(changed("the file is gone".to_owned()));
            }
            Err(errno) => {
                return Err(Error::Io { path: checked.absolute.clone(), source: errno.into() });
            }
        };
        let file = File::from(descriptor);
        let metadata = file
            .metadata()
            .map_err(|source| Error::Io { path: checked.absolute.clone(), source })?;
        if !metadata.is_file() {
            return Err(changed(format!("it is now {}", file_kind(&metadata))));
        }
        if (metadata.dev(), metadata.ino()) != (checked.device, checked.inode) {
            return Err(changed("it was replaced by another file".to_owned()));
        }
        Ok(file)
    }

    /// Checks and opens `relative` in one go.
    ///
    /// # Errors
    ///
    /// Everything [`SkillFolder::check`] and [`SkillFolder::open_checked`] return.
    pub fn open_file(&self, relative: &str) -> Result<(CheckedPath, File)> {
        let checked = self.check(relative)?;
        let file = self.open_checked(&checked)?;
        Ok((checked, file))
    }
}

/// Where a dangling symlink would point, when that is outside `folder`.
fn outside_target(folder: &Path, link: &Path, target: &Path) -> Option<PathBuf> {
    let absolute =
        if target.is_absolute() { target.to_path_buf() } else { link.parent()?.join(target) };
    let mut normal = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    if normal.starts_with(folder) { None } else { Some(normal) }
}

/// Opens `inside` relative to `directory`: `openat2` with `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS` on Linux (falling back to `openat` when the kernel lacks it), `openat`
/// with `O_NOFOLLOW` elsewhere. The identity check after the open covers the fallback.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn open_beneath(directory: &OwnedFd, inside: &Path) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    let flags = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(directory, inside, OPEN_FLAGS, Mode::empty(), flags) {
        Err(errno) if errno == rustix::io::Errno::NOSYS || errno == rustix::io::Errno::PERM => {
            rustix::fs::openat(directory, inside, OPEN_FLAGS, Mode::empty())
        }
        other => other,
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn open_beneath(directory: &OwnedFd, inside: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(directory, inside, OPEN_FLAGS, Mode::empty())
}
