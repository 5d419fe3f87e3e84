//! Data-driven index tests: each folder of `tests/data/index/` is a case, run lenient and strict.
//!
//! A case holds `roots/` (skill trees), an optional `roots.txt` (`KIND PATH` lines in the given
//! order; otherwise every folder of `roots/` is an extra root), an optional `setup` (`symlink
//! LINK TARGET`, `fifo PATH`, `body PATH BYTES` — things git cannot store or that are too big to
//! commit), an optional `config` (`KEY VALUE` lines) and the expected index as JSON in
//! `expected-lenient.json` and `expected-strict.json`, with the case directory written as
//! `$CASE`. Run with `BLESS=1` to rewrite the expected files after a deliberate change.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pretty_assertions::assert_eq;
use skills_agent_registry::{
    Catalog, IndexConfig, Mode, RootKind, SkillIndex, SkillRoot, SourceSelector,
};

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

/// A case copied into a temporary directory, with its setup applied.
struct Case {
    _temporary: tempfile::TempDir,
    directory: PathBuf,
    source: PathBuf,
}

fn prepare(name: &str) -> Result<Case> {
    let source = data_dir().join("index").join(name);
    let temporary = tempfile::tempdir()?;
    let directory = temporary.path().join(name);
    copy_tree(&source, &directory)?;
    if let Ok(setup) = fs::read_to_string(source.join("setup")) {
        for line in setup.lines().filter(|line| !line.trim().is_empty()) {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["symlink", link, target] => {
                    let link = directory.join(link);
                    fs::create_dir_all(link.parent().context("link has a parent")?)?;
                    std::os::unix::fs::symlink(target, &link)?;
                }
                ["fifo", path] => {
                    let path = directory.join(path);
                    fs::create_dir_all(path.parent().context("fifo has a parent")?)?;
                    let status = std::process::Command::new("mkfifo").arg(&path).status()?;
                    if !status.success() {
                        bail!("mkfifo {} failed", path.display());
                    }
                }
                ["body", path, bytes] => {
                    let bytes: usize = bytes.parse()?;
                    let mut file =
                        fs::OpenOptions::new().append(true).open(directory.join(path))?;
                    let line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n";
                    let mut written = 0;
                    while written < bytes {
                        file.write_all(line.as_bytes())?;
                        written += line.len();
                    }
                }
                _ => bail!("bad setup line in {name}: {line}"),
            }
        }
    }
    Ok(Case { _temporary: temporary, directory, source })
}

fn roots(case: &Case) -> Result<Vec<SkillRoot>> {
    match fs::read_to_string(case.source.join("roots.txt")) {
        Ok(text) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                let (kind, path) = line.split_once(' ').context("roots.txt line is KIND PATH")?;
                let kind = match kind {
                    "project" => RootKind::Project,
                    "user" => RootKind::User,
                    "extra" => RootKind::Extra,
                    "builtin" => RootKind::Builtin,
                    other => bail!("unknown root kind {other}"),
                };
                Ok(SkillRoot::new(kind, case.directory.join(path)))
            })
            .collect(),
        Err(_) => {
            let mut names: Vec<_> = fs::read_dir(case.directory.join("roots"))?
                .map(|entry| entry.map(|entry| entry.path()))
                .collect::<std::io::Result<_>>()?;
            names.sort();
            Ok(names.into_iter().map(|path| SkillRoot::new(RootKind::Extra, path)).collect())
        }
    }
}

fn config(case: &Case, mode: Mode) -> Result<IndexConfig> {
    let mut config = IndexConfig { mode, ..IndexConfig::default() };
    if let Ok(text) = fs::read_to_string(case.source.join("config")) {
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let (key, value) = line.split_once(' ').context("config line is KEY VALUE")?;
            match key {
                "max_depth" => config.max_depth = value.parse()?,
                "max_directories" => config.max_directories = value.parse()?,
                "max_frontmatter_bytes" => config.max_frontmatter_bytes = value.parse()?,
                "follow_symlinks" => config.follow_symlinks = value.parse()?,
                "include" => config.include.push(value.to_owned()),
                "exclude" => config.exclude.push(value.to_owned()),
                other => bail!("unknown config key {other}"),
            }
        }
    }
    Ok(config)
}

/// The index as JSON with the temporary case directory replaced by `$CASE`.
fn rendered(index: &SkillIndex, case: &Case) -> Result<serde_json::Value> {
    let text = serde_json::to_string_pretty(index)?;
    let prefix = serde_json::to_string(&case.directory.display().to_string())?;
    let prefix = prefix.trim_matches('"');
    Ok(serde_json::from_str(&text.replace(prefix, "$CASE"))?)
}

fn check_against(expected_file: &Path, actual: &serde_json::Value) -> Result<()> {
    if std::env::var_os("BLESS").is_some() {
        fs::write(expected_file, serde_json::to_string_pretty(actual)? + "\n")?;
        return Ok(());
    }
    let expected: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(expected_file)
            .with_context(|| format!("missing {}; run with BLESS=1", expected_file.display()))?,
    )?;
    assert_eq!(&expected, actual, "{}", expected_file.display());
    Ok(())
}

fn run_case(name: &str) -> Result<()> {
    let case = prepare(name)?;
    let roots = roots(&case)?;
    for (mode, file) in
        [(Mode::Lenient, "expected-lenient.json"), (Mode::Strict, "expected-strict.json")]
    {
        let index = SkillIndex::build(&roots, &config(&case, mode)?)?;
        check_against(&case.source.join(file), &rendered(&index, &case)?)?;
    }
    Ok(())
}

#[test]
fn every_rule_lenient_and_strict() -> Result<()> {
    run_case("rules")
}

/// Frontmatter patterns seen in public third-party skills (Anthropic's, Claude Code plugins,
/// Codex): folded and quoted descriptions, tool lists, list-shaped argument hints, names with
/// colons or spaces, a doubled frontmatter whose first description is `name: "pdf"`.
#[test]
fn real_world_frontmatter() -> Result<()> {
    run_case("real-world")
}

#[test]
fn yaml_quirks_of_real_skills_load_in_lenient_mode() -> Result<()> {
    run_case("yaml-quirks")
}

#[test]
fn symlinked_folders_files_dangling_links_and_cycles() -> Result<()> {
    run_case("symlinks")
}

#[test]
fn symlinks_reported_not_followed_when_switched_off() -> Result<()> {
    run_case("no-follow")
}

#[test]
fn shadowing_by_priority_duplicates_and_bad_roots() -> Result<()> {
    run_case("shadowing")
}

#[test]
fn depth_directory_and_frontmatter_limits_are_reported() -> Result<()> {
    run_case("limits")
}

#[test]
fn include_and_exclude_globs() -> Result<()> {
    run_case("globs")
}

#[test]
fn huge_bodies_are_not_read() -> Result<()> {
    let case = prepare("rules")?;
    let index = SkillIndex::build(&roots(&case)?, &config(&case, Mode::Lenient)?)?;
    let huge = index.get("huge-body").context("huge-body indexed")?;
    let file_size = fs::metadata(&huge.path)?.len();
    assert!(file_size > 1_000_000);
    // Every SKILL.md costs at most one 2 KiB read here, so the whole index reads less than the
    // huge body alone would.
    let files = index.stats.skill_files_read as u64;
    assert!(index.stats.frontmatter_bytes_read <= files * 2048);
    Ok(())
}

#[test]
fn an_explicit_source_selects_a_shadowed_skill() -> Result<()> {
    let case = prepare("shadowing")?;
    let index = SkillIndex::build(&roots(&case)?, &IndexConfig::default())?;
    let winner = index.select("alpha", None)?;
    assert_eq!(winner.source.kind, RootKind::Project);
    let shadowed = index.select("alpha", Some(&SourceSelector::Kind(RootKind::User)))?;
    assert_eq!(shadowed.description, "User alpha is shadowed.");
    let by_root =
        index.select("beta", Some(&SourceSelector::Root(case.directory.join("roots/builtin"))))?;
    assert_eq!(by_root.description, "Builtin beta is shadowed.");
    let missing = index.select("delta", Some(&SourceSelector::Kind(RootKind::Project)));
    assert_eq!(
        missing.map(|skill| skill.name.clone()).map_err(|error| error.to_string()),
        Err("skill `delta` does not come from a project root".to_owned())
    );
    assert_eq!(
        index.select("omega", None).map_err(|error| error.to_string()).map(|_| ()),
        Err("no skill named `omega`".to_owned())
    );
    Ok(())
}

#[test]
fn catalog_respects_the_budget_and_reports_omissions() -> Result<()> {
    let case = prepare("rules")?;
    let index = SkillIndex::build(&roots(&case)?, &IndexConfig::default())?;
    let mut catalogs = Vec::new();
    for budget in [100_000, 600, 80, 0] {
        let catalog = Catalog::render(&index, budget);
        assert!(catalog.text.chars().count() <= budget, "budget {budget}");
        let text = catalog.text.replace(&case.directory.display().to_string(), "$CASE");
        catalogs.push(serde_json::json!({
            "budget": budget,
            "text": text,
            "listed": catalog.listed,
            "omitted": catalog.omitted,
            "hidden": catalog.hidden,
        }));
    }
    check_against(&data_dir().join("catalog/expected.json"), &serde_json::Value::Array(catalogs))
}

#[test]
fn parallel_readers_give_the_same_index_as_one() -> Result<()> {
    let temporary = tempfile::tempdir()?;
    for number in 0..300 {
        let directory = temporary.path().join(format!("group-{}/skill-{number:03}", number % 3));
        fs::create_dir_all(&directory)?;
        let frontmatter = match number % 10 {
            0 => format!("---\nname: skill-{number:03}\n---\n"),
            1 => format!("---\nname: other-{number:03}\ndescription: Mismatch: yes\n---\n"),
            _ => format!("---\nname: skill-{number:03}\ndescription: Skill {number}.\n---\n"),
        };
        fs::write(directory.join("SKILL.md"), frontmatter)?;
    }
    let roots = [SkillRoot::new(RootKind::Project, temporary.path())];
    let one =
        SkillIndex::build(&roots, &IndexConfig { reader_threads: 1, ..IndexConfig::default() })?;
    let eight =
        SkillIndex::build(&roots, &IndexConfig { reader_threads: 8, ..IndexConfig::default() })?;
    assert_eq!(one.skills.len(), 270);
    assert_eq!(one.diagnostics.len(), 30 + 30 * 2);
    assert_eq!(one, eight);
    Ok(())
}
