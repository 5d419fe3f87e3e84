//! Loader tests: containment cases from `tests/data/containment.txt`, excerpt cases from
//! `tests/data/excerpts.json` (expected values in `tests/data/excerpts/`, `BLESS=1` rewrites
//! them), check-then-open races, devices, bodies and listings. The tree is `tests/data/tree/`
//! copied to a temporary directory, plus what git cannot store (symlinks, a FIFO, binary bytes)
//! made by its `setup` file.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pretty_assertions::assert_eq;
use skill_loader::{Error, ExcerptContent, LoaderConfig, SkillFolder, SkillLoader};
use skills_agent_registry::{IndexConfig, RootKind, SkillIndex, SkillRoot};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

struct Tree {
    _temporary: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn skill(&self) -> PathBuf {
        self.root.join("pdf-tools")
    }
}

fn tree() -> Result<Tree> {
    let temporary = tempfile::tempdir()?;
    let root = temporary.path().join("tree");
    copy_tree(&data_dir().join("tree"), &root)?;
    fs::remove_file(root.join("setup"))?;
    let setup = fs::read_to_string(data_dir().join("tree/setup"))?;
    for line in setup.lines().filter(|line| !line.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["symlink", link, target] => {
                let link = root.join(link);
                fs::create_dir_all(link.parent().context("parent")?)?;
                std::os::unix::fs::symlink(target, &link)?;
            }
            ["fifo", path] => {
                let status = std::process::Command::new("mkfifo").arg(root.join(path)).status()?;
                if !status.success() {
                    bail!("mkfifo failed");
                }
            }
            ["binary", path, bytes] => {
                let path = root.join(path);
                fs::create_dir_all(path.parent().context("parent")?)?;
                let bytes: Vec<u8> =
                    (0..bytes.parse::<usize>()?).map(|index| (index % 251) as u8).collect();
                fs::write(path, bytes)?;
            }
            _ => bail!("bad setup line: {line}"),
        }
    }
    Ok(Tree { _temporary: temporary, root })
}

fn variant(error: &Error) -> &'static str {
    match error {
        Error::SkillFolder { .. } => "SkillFolder",
        Error::InvalidPath { .. } => "InvalidPath",
        Error::AbsolutePath { .. } => "AbsolutePath",
        Error::ParentTraversal { .. } => "ParentTraversal",
        Error::NotFound { .. } => "NotFound",
        Error::OutsideSkill { .. } => "OutsideSkill",
        Error::NotRegularFile { .. } => "NotRegularFile",
        Error::IsDirectory { .. } => "IsDirectory",
        Error::ChangedSinceCheck { .. } => "ChangedSinceCheck",
        Error::Io { .. } => "Io",
        _ => "unknown",
    }
}

#[test]
fn containment_cases() -> Result<()> {
    let tree = tree()?;
    let loader = SkillLoader::default();
    let cases = fs::read_to_string(data_dir().join("containment.txt"))?;
    let mut expected = Vec::new();
    let mut actual = Vec::new();
    for line in cases.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty()) {
        let (path, outcome) = line.split_once("=>").context("PATH => EXPECTED")?;
        let path = path.trim();
        expected.push(format!("{path} => {}", outcome.trim()));
        let result = loader.load_from_folder(&tree.skill(), path, None);
        let outcome = match result {
            Ok(_) => "ok",
            Err(error) => variant(&error),
        };
        actual.push(format!("{path} => {outcome}"));
    }
    assert_eq!(expected, actual);
    Ok(())
}

#[test]
fn refusals_name_the_path() -> Result<()> {
    let tree = tree()?;
    let loader = SkillLoader::default();
    let folder = fs::canonicalize(tree.skill())?;
    let outside = fs::canonicalize(tree.root.join("outside/secret.txt"))?;
    let messages: Vec<String> = ["escape", "pipe", "../x", "/etc/passwd"]
        .iter()
        .map(|path| match loader.load_from_folder(&tree.skill(), path, None) {
            Ok(_) => "ok".to_owned(),
            Err(error) => error.to_string(),
        })
        .collect();
    assert_eq!(
        messages,
        vec![
            format!(
                "`escape` resolves to {}, outside skill folder {}; refused",
                outside.display(),
                folder.display()
            ),
            "`pipe` is a FIFO, not a regular file; refused".to_owned(),
            "resource path `../x` contains `..`; paths must stay inside the skill folder"
                .to_owned(),
            "resource path `/etc/passwd` is absolute; give a path relative to the skill folder"
                .to_owned(),
        ]
    );
    Ok(())
}

#[test]
fn devices_are_refused_without_opening() -> Result<()> {
    let folder = SkillFolder::open(Path::new("/dev"))?;
    let refused = folder.check("null").map(|_| ()).map_err(|error| error.to_string());
    assert_eq!(
        refused,
        Err("`null` is a character device, not a regular file; refused".to_owned())
    );
    Ok(())
}

#[test]
fn a_file_swapped_for_a_symlink_after_the_check_is_refused() -> Result<()> {
    let tree = tree()?;
    let folder = SkillFolder::open(&tree.skill())?;
    let checked = folder.check("scripts/fill.py")?;
    let file = tree.skill().join("scripts/fill.py");
    fs::remove_file(&file)?;
    std::os::unix::fs::symlink("../../outside/secret.txt", &file)?;
    let error = folder.open_checked(&checked).map(|_| ()).map_err(|error| variant(&error));
    assert_eq!(error, Err("ChangedSinceCheck"));
    Ok(())
}

#[test]
fn a_directory_swapped_for_a_symlink_after_the_check_is_refused() -> Result<()> {
    let tree = tree()?;
    let folder = SkillFolder::open(&tree.skill())?;
    let checked = folder.check("scripts/fill.py")?;
    let scripts = tree.skill().join("scripts");
    fs::rename(&scripts, tree.root.join("outside/scripts"))?;
    std::os::unix::fs::symlink("../outside/scripts", &scripts)?;
    let error = folder.open_checked(&checked).map(|_| ()).map_err(|error| variant(&error));
    assert_eq!(error, Err("ChangedSinceCheck"));
    Ok(())
}

#[test]
fn a_file_replaced_by_another_or_a_fifo_after_the_check_is_refused() -> Result<()> {
    let tree = tree()?;
    let folder = SkillFolder::open(&tree.skill())?;
    let checked = folder.check("scripts/fill.py")?;
    let file = tree.skill().join("scripts/fill.py");
    let replacement = tree.skill().join("scripts/other.py");
    fs::write(&replacement, "print('other')\n")?;
    fs::rename(&replacement, &file)?;
    let replaced = folder.open_checked(&checked).map(|_| ()).map_err(|error| error.to_string());
    assert_eq!(
        replaced,
        Err("`scripts/fill.py` changed between check and open (it was replaced by another file); \
             refused"
            .to_owned())
    );

    let checked = folder.check("scripts/fill.py")?;
    fs::remove_file(&file)?;
    let status = std::process::Command::new("mkfifo").arg(&file).status()?;
    assert!(status.success());
    // The open does not block on the FIFO (O_NONBLOCK) and the swap is caught.
    let swapped = folder.open_checked(&checked).map(|_| ()).map_err(|error| error.to_string());
    assert_eq!(
        swapped,
        Err("`scripts/fill.py` changed between check and open (it is now a FIFO); refused"
            .to_owned())
    );
    Ok(())
}

#[derive(serde::Deserialize)]
struct ExcerptCase {
    name: String,
    path: String,
    hint: Option<String>,
    cap: usize,
    /// The scan limit, when the case is about files too large to hold in memory.
    scan: Option<usize>,
}

#[test]
fn excerpt_cases() -> Result<()> {
    let tree = tree()?;
    let cases: Vec<ExcerptCase> =
        serde_json::from_str(&fs::read_to_string(data_dir().join("excerpts.json"))?)?;
    let canonical_root = fs::canonicalize(&tree.root)?.display().to_string();
    for case in cases {
        let defaults = LoaderConfig::default();
        let loader = SkillLoader::new(LoaderConfig {
            max_resource_bytes: case.cap,
            max_scan_bytes: case.scan.unwrap_or(defaults.max_scan_bytes),
            ..defaults
        });
        let excerpt = loader.load_from_folder(&tree.skill(), &case.path, case.hint.as_deref())?;
        let mut actual = serde_json::to_value(&excerpt)?;
        actual["rendered"] = serde_json::Value::String(excerpt.render());
        let actual: serde_json::Value = serde_json::from_str(
            &serde_json::to_string(&actual)?.replace(&canonical_root, "$TREE"),
        )?;
        let expected_file = data_dir().join("excerpts").join(format!("{}.json", case.name));
        if std::env::var_os("BLESS").is_some() {
            fs::create_dir_all(expected_file.parent().context("parent")?)?;
            fs::write(&expected_file, serde_json::to_string_pretty(&actual)? + "\n")?;
            continue;
        }
        let expected: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&expected_file).with_context(|| {
                format!("missing {}; run with BLESS=1", expected_file.display())
            })?)?;
        assert_eq!(expected, actual, "{}", case.name);
    }
    Ok(())
}

fn index(root: &Path) -> Result<SkillIndex> {
    Ok(SkillIndex::build(&[SkillRoot::new(RootKind::Project, root)], &IndexConfig::default())?)
}

#[test]
fn bodies_small_large_and_through_a_symlinked_skill_file() -> Result<()> {
    let tree = tree()?;
    // A huge body: 300 KB of text after the frontmatter.
    let huge = tree.root.join("huge");
    fs::create_dir_all(&huge)?;
    let mut file = fs::File::create(huge.join("SKILL.md"))?;
    file.write_all(b"---\nname: huge\ndescription: A huge body.\n---\n# Start\n")?;
    for line in 0..10_000 {
        writeln!(file, "line {line:05} of the huge body")?;
    }
    file.write_all(b"# End\nlast line\n")?;
    drop(file);

    let index = index(&tree.root)?;
    let loader = SkillLoader::new(LoaderConfig { max_body_bytes: 200, ..LoaderConfig::default() });

    let small =
        SkillLoader::default().load_skill_body(index.get("pdf-tools").context("pdf-tools")?)?;
    assert_eq!(
        small.content,
        ExcerptContent::Complete {
            text: "# PDF tools\n\n1. Read `references/guide.md` for the section you need.\n2. Run \
                   `scripts/fill.py` to fill a form.\n"
                .to_owned()
        }
    );

    let large = loader.load_skill_body(index.get("huge").context("huge")?)?;
    let ExcerptContent::HeadTail { head, tail, omitted_bytes } = &large.content else {
        bail!("expected head and tail, got {:?}", large.content);
    };
    assert_eq!(
        head,
        "# Start\nline 00000 of the huge body\nline 00001 of the huge body\nline 00002 of the huge body\n"
    );
    assert_eq!(
        tail,
        "line 09997 of the huge body\nline 09998 of the huge body\nline 09999 of the huge body\n# End\nlast line\n"
    );
    assert_eq!(large.total_bytes, fs::metadata(tree.root.join("huge/SKILL.md"))?.len());
    // The body is "# Start\n", 10,000 lines of 28 bytes, then "# End\nlast line\n".
    assert_eq!(*omitted_bytes, (8 + 280_000 + 16 - head.len() - tail.len()) as u64);
    assert_eq!(large.headings, vec!["# Start", "# End"]);

    let linked = SkillLoader::default().load_skill_body(index.get("linked").context("linked")?)?;
    assert_eq!(linked.content, ExcerptContent::Complete { text: "# Linked body\n".to_owned() });
    Ok(())
}

#[test]
fn listing_reports_paths_sizes_and_kinds_without_reading() -> Result<()> {
    let tree = tree()?;
    let index = index(&tree.root)?;
    let listing =
        SkillLoader::default().list_resources(index.get("pdf-tools").context("pdf-tools")?)?;
    let rendered: Vec<String> = listing
        .entries
        .iter()
        .map(|entry| {
            format!("{} {}", entry.path, serde_json::to_string(&entry.kind).unwrap_or_default())
        })
        .collect();
    assert_eq!(
        rendered,
        vec![
            r#"SKILL.md {"type":"file"}"#,
            r#"absolute-link {"type":"symlink","target":"/etc/hostname","inside":false}"#,
            r#"assets {"type":"directory"}"#,
            r#"assets/logo.bin {"type":"file"}"#,
            r#"assets/no-nul.bin {"type":"file"}"#,
            r#"dangling-in {"type":"symlink","target":"missing.md","inside":false}"#,
            r#"dangling-out {"type":"symlink","target":"../../nowhere/x","inside":false}"#,
            r#"escape {"type":"symlink","target":"../outside/secret.txt","inside":false}"#,
            r#"escape-dir {"type":"symlink","target":"../outside","inside":false}"#,
            r#"pipe {"type":"special","what":"a FIFO"}"#,
            r#"references {"type":"directory"}"#,
            r#"references/guide.md {"type":"file"}"#,
            r#"references/late-nul.txt {"type":"file"}"#,
            r#"references/latin1.txt {"type":"file"}"#,
            r#"references/nested-fences.md {"type":"file"}"#,
            r#"references/utf8-edges.md {"type":"file"}"#,
            r#"refs {"type":"symlink","target":"references","inside":true}"#,
            r#"scripts {"type":"directory"}"#,
            r#"scripts/fill.py {"type":"file"}"#,
        ]
    );
    let logo =
        listing.entries.iter().find(|entry| entry.path == "assets/logo.bin").context("logo")?;
    assert_eq!(logo.size, 3000);
    assert!(!listing.truncated);
    Ok(())
}
