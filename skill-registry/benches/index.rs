//! Benchmark: indexing 10,000 generated skills with 200 KB bodies, against a naive indexer that
//! reads every whole file and parses it, in the same run.
//!
//! The corpus is generated once under the target directory (`skill-bench-corpus-N-B`, with a
//! marker file) and reused. `SKILL_BENCH_SKILLS` and `SKILL_BENCH_BODY_BYTES` scale it. Before
//! measuring, the bench prints the bytes each indexer reads per skill.
//! `SKILL_BENCH_READER_THREADS` overrides `IndexConfig::reader_threads`.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use saphyr::{LoadableYamlNode, MarkedYaml};
use skills_agent_registry::{IndexConfig, RootKind, SkillIndex, SkillRoot};

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// The target directory the bench binary lives in (`<target>/<profile>/deps/<bench>`).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(std::env::temp_dir)
}

/// Generates (once) `skills` skill folders whose `SKILL.md` bodies are `body_bytes` long.
fn corpus(skills: usize, body_bytes: usize) -> Result<PathBuf> {
    let root = target_dir().join(format!("skill-bench-corpus-{skills}-{body_bytes}"));
    let marker = root.join(".complete");
    if marker.exists() {
        return Ok(root);
    }
    eprintln!("generating {skills} skills with {body_bytes}-byte bodies in {}", root.display());
    let _ = fs::remove_dir_all(&root);
    let line = "Step: read the reference, run the script, check the output, report the result.\n";
    for number in 0..skills {
        let name = format!("skill-{number:05}");
        let directory = root.join(&name);
        fs::create_dir_all(&directory)?;
        let mut file = BufWriter::new(fs::File::create(directory.join("SKILL.md"))?);
        write!(
            file,
            "---\nname: {name}\ndescription: >-\n  Generated skill number {number}. Use it when the\n  benchmark asks for skill {number}.\nlicense: MIT\nmetadata:\n  author: bench\n  version: \"1.0\"\nallowed-tools: Read Bash(python:*)\n---\n# {name}\n\n"
        )?;
        let mut written = 0;
        while written < body_bytes {
            file.write_all(line.as_bytes())?;
            written += line.len();
        }
        file.flush()?;
        // Clean pages can be evicted for the cold-cache runs.
        file.get_ref().sync_data()?;
    }
    fs::write(&marker, "complete\n")?;
    Ok(root)
}

/// The naive indexer: read every `SKILL.md` whole, cut the frontmatter, parse it.
fn naive_index(root: &Path) -> Result<(usize, u64)> {
    let mut skills = 0;
    let mut bytes = 0u64;
    let mut directories: Vec<PathBuf> = fs::read_dir(root)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<io::Result<_>>()?;
    directories.sort();
    for directory in directories {
        let Ok(text) = fs::read_to_string(directory.join("SKILL.md")) else { continue };
        bytes += text.len() as u64;
        let Some(rest) = text.strip_prefix("---\n") else { continue };
        let Some(end) = rest.find("\n---\n") else { continue };
        let documents = MarkedYaml::load_from_str(&rest[..=end])?;
        let is_mapping = documents
            .first()
            .and_then(|document| document.data.as_mapping())
            .is_some_and(|mapping| !mapping.is_empty());
        if is_mapping {
            skills += 1;
        }
    }
    Ok((skills, bytes))
}

/// Evicts the corpus files from the page cache (only these files: `POSIX_FADV_DONTNEED` on each),
/// so the next run reads them from the disk as on a first start.
fn evict(root: &Path) -> Result<()> {
    for entry in fs::read_dir(root)? {
        let path = entry?.path().join("SKILL.md");
        if let Ok(file) = fs::File::open(&path) {
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
        }
    }
    Ok(())
}

fn config() -> IndexConfig {
    let defaults = IndexConfig::default();
    IndexConfig {
        max_directories: 1_000_000,
        reader_threads: setting("SKILL_BENCH_READER_THREADS", defaults.reader_threads),
        ..defaults
    }
}

fn bench_index(criterion: &mut Criterion) {
    if let Err(error) = run(criterion) {
        eprintln!("index bench failed: {error:#}");
        std::process::exit(1);
    }
}

fn run(criterion: &mut Criterion) -> Result<()> {
    let skills = setting("SKILL_BENCH_SKILLS", 10_000);
    let body_bytes = setting("SKILL_BENCH_BODY_BYTES", 200_000);
    let root = corpus(skills, body_bytes)?;
    let roots = [SkillRoot::new(RootKind::Extra, &root)];

    let index = SkillIndex::build(&roots, &config())?;
    let (naive_skills, naive_bytes) = naive_index(&root)?;
    if index.skills.len() != skills || naive_skills != skills {
        bail!("indexed {} and {naive_skills} of {skills} skills", index.skills.len());
    }
    eprintln!(
        "bytes read per skill: index {}, naive {}",
        index.stats.frontmatter_bytes_read / skills as u64,
        naive_bytes / skills as u64
    );

    let label = format!("{skills}x{body_bytes}B");
    let mut group = criterion.benchmark_group("index_warm_cache");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.bench_with_input(BenchmarkId::new("skill_index", &label), &roots, |bencher, roots| {
        bencher.iter(|| SkillIndex::build(roots, &config()).map(|index| index.skills.len()));
    });
    group.bench_with_input(BenchmarkId::new("naive_whole_file", &label), &root, |bencher, root| {
        bencher.iter(|| naive_index(root).map(|(skills, _)| skills));
    });
    group.finish();

    // Cold cache: before every iteration the corpus is evicted from the page cache (setup time
    // is not measured), as on the first start after boot or after other work pushed it out.
    let mut group = criterion.benchmark_group("index_cold_cache");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(5));
    let evict_corpus = || {
        if let Err(error) = evict(&root) {
            eprintln!("cannot evict the corpus: {error}");
        }
    };
    group.bench_with_input(BenchmarkId::new("skill_index", &label), &roots, |bencher, roots| {
        bencher.iter_batched(
            evict_corpus,
            |()| SkillIndex::build(roots, &config()).map(|index| index.skills.len()),
            BatchSize::PerIteration,
        );
    });
    group.bench_with_input(BenchmarkId::new("naive_whole_file", &label), &root, |bencher, root| {
        bencher.iter_batched(
            evict_corpus,
            |()| naive_index(root).map(|(skills, _)| skills),
            BatchSize::PerIteration,
        );
    });
    group.finish();
    Ok(())
}

criterion_group!(benches, bench_index);
criterion_main!(benches);
