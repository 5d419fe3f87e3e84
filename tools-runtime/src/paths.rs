//! Path checks before spawn: canonical workspace roots, cwd inside them, path-like arguments
//! resolved and kept inside them.

use std::path::{Component, Path, PathBuf};

/// Why a path in the request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathViolation {
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// Canonicalises each workspace root (they must exist and be directories).
pub(crate) fn canonical_roots(roots: &[PathBuf]) -> Result<Vec<PathBuf>, PathViolation> {
    roots
        .iter()
        .map(|root| match root.canonicalize() {
            Ok(canonical) if canonical.is_dir() => Ok(canonical),
            Ok(_) => Err(violation(root, "the workspace root is not a directory")),
            Err(error) => {
                Err(violation(root, &format!("cannot resolve the workspace root: {error}")))
            }
        })
        .collect()
}

/// Resolves the working directory (relative to the first root) and checks it is inside a root.
pub(crate) fn checked_cwd(cwd: &Path, roots: &[PathBuf]) -> Result<PathBuf, PathViolation> {
    let joined = match roots.first() {
        Some(first) if cwd.is_relative() => first.join(cwd),
        Some(_) | None => cwd.to_path_buf(),
    };
    let canonical = joined.canonicalize().map_err(|error| {
        violation(cwd, &format!("cannot resolve the working directory: {error}"))
    })?;
    if !inside_any(&canonical, roots) {
        return Err(violation(cwd, "the working directory is outside the workspace"));
    }
    if !canonical.is_dir() {
        return Err(violation(cwd, "the working directory is not a directory"));
    }
    Ok(canonical)
}

/// Checks the arguments that name paths.
///
/// Each argument is checked whole (unless it is a `--flag=value`), and so is the value after
/// its first `=` (`--output=FILE`, `dd of=FILE`) and the value glued to a short option
/// (`-oFILE`, everything after `-o`); a leading `@` is taken off each (`curl -d @FILE`). A candidate is checked when it is absolute, starts with `~`, contains a `/`, or
/// names an existing entry relative to `cwd`. It must then resolve (symlinks followed, through
/// its longest existing ancestor) inside a workspace root or inside one of `read_roots` (system
/// directories a command may name, such as `/usr` or `/dev/null`; Landlock still keeps them
/// read-only), and an existing regular file inside the workspace must not have other hard
/// links. This is an early, explainable refusal, not the confinement: a script can always
/// build paths at run time, and Landlock or bubblewrap stops those.
pub(crate) fn check_arguments(
    args: &[String],
    cwd: &Path,
    roots: &[PathBuf],
    read_roots: &[PathBuf],
) -> Result<(), PathViolation> {
    for argument in args {
        let value = argument.split_once('=').map(|(_, value)| value);
        let whole = (!(argument.starts_with('-') && value.is_some())).then_some(argument.as_str());
        let glued = argument
            .strip_prefix('-')
            .filter(|rest| !rest.starts_with('-'))
            .and_then(|rest| rest.char_indices().nth(1).and_then(|(index, _)| rest.get(index..)));
        for candidate in [whole, value, glued].into_iter().flatten() {
            check_argument(
                candidate.strip_prefix('@').unwrap_or(candidate),
                cwd,
                roots,
                read_roots,
            )?;
        }
    }
    Ok(())
}

fn check_argument(
    candidate: &str,
    cwd: &Path,
    roots: &[PathBuf],
    read_roots: &[PathBuf],
) -> Result<(), PathViolation> {
    if candidate.is_empty() {
        return Ok(());
    }
    let path = Path::new(candidate);
    let looks_like_path = path.is_absolute()
        || candidate.starts_with('~')
        || candidate.contains('/')
        || cwd.join(path).symlink_metadata().is_ok();
    if !looks_like_path {
        return Ok(());
    }
    if candidate.starts_with('~') {
        return Err(violation(path, "home-relative paths are outside the workspace"));
    }
    let resolved = resolve_through_existing_ancestor(&cwd.join(path));
    if !inside_any(&resolved, roots) {
        if inside_any(&resolved, read_roots) {
            return Ok(());
        }
        return Err(violation(path, "the path resolves outside the workspace"));
    }
    if let Ok(metadata) = std::fs::metadata(&resolved) {
        use std::os::unix::fs::MetadataExt;
        if metadata.is_file() && metadata.nlink() > 1 {
            return Err(violation(path, "the file has other hard links"));
        }
    }
    Ok(())
}

/// Canonicalises the longest existing ancestor and appends the rest lexically (`..` in the
/// rest pops a component), so paths to files not yet created are checked too.
fn resolve_through_existing_ancestor(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    // Components below the existing ancestor, innermost first; `None` stands for `..`.
    let mut rest: Vec<Option<std::ffi::OsString>> = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            let mut resolved = canonical;
            for component in rest.iter().rev() {
                match component {
                    None => {
                        resolved.pop();
                    }
                    Some(name) => resolved.push(name),
                }
            }
            return resolved;
        }
        let last = match existing.components().next_back() {
            Some(Component::ParentDir) => Some(None),
            Some(Component::Normal(name)) => Some(Some(name.to_os_string())),
            Some(Component::CurDir | Component::RootDir | Component::Prefix(_)) | None => None,
        };
        match (last, existing.parent()) {
            (Some(component), Some(parent)) => {
                rest.push(component);
                existing = parent.to_path_buf();
            }
            (None, Some(parent)) => existing = parent.to_path_buf(),
            (Some(_) | None, None) => return path.to_path_buf(),
        }
    }
}

fn inside_any(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

fn violation(path: &Path, reason: &str) -> PathViolation {
    PathViolation { path: path.display().to_string(), reason: reason.to_owned() }
}
