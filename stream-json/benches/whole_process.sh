#!/usr/bin/env bash
# Whole-process times, as a user runs the examples from the outside: `sjcheck FILE` (one
# chunk), `sjcheck --chunk 16 FILE` and actson (`contenders file:FILE actson_one_chunk`) on a
# 10 MB action document and a 20 MB twitter-like one, made by `gendoc`. Every command runs
# RUNS times (default 5), interleaved, in the same run; the table gives medians of wall-clock
# and CPU (user + system) time. `contenders file:FILE none` (read the file, parse nothing) shows
# what reading costs.
#
# EXTRA="name=/path/to/sjcheck ..." adds other sjcheck builds (e.g. an older commit's) to the
# same run, whole and --chunk 16.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q --release -p stream-json --example sjcheck --example contenders --example gendoc
bin="${CARGO_TARGET_DIR:-target}/release/examples"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin/gendoc" action 10000000 >"$dir/action_10m.json"
"$bin/gendoc" twitter 20000000 >"$dir/twitter_20m.json"
python3 - "$bin" "$dir" "${RUNS:-5}" "${EXTRA:-}" <<'EOF'
import os, resource, statistics, subprocess, sys, time

bin, dir, runs, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
sjchecks = [("", f"{bin}/sjcheck")] + [tuple(e.split("=", 1)) for e in extra]

def commands(path):
    out = {}
    for name, sjcheck in sjchecks:
        suffix = f" ({name})" if name else ""
        out[f"sjcheck{suffix}"] = [sjcheck, path]
        out[f"sjcheck --chunk 16{suffix}"] = [sjcheck, "--chunk", "16", path]
    out["actson"] = [f"{bin}/contenders", f"file:{path}", "actson_one_chunk"]
    out["read only"] = [f"{bin}/contenders", f"file:{path}", "none"]
    return out

def timed(command):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000

print(f"load average before: {os.getloadavg()[0]:.2f}")
for doc in ["action_10m.json", "twitter_20m.json"]:
    cmds = commands(os.path.join(dir, doc))
    walls = {name: [] for name in cmds}
    cpus = {name: [] for name in cmds}
    for _ in range(runs):
        for name, command in cmds.items():
            wall, cpu = timed(command)
            walls[name].append(wall)
            cpus[name].append(cpu)
    wall = {name: statistics.median(v) for name, v in walls.items()}
    cpu = {name: statistics.median(v) for name, v in cpus.items()}
    print(f"\n{doc} ({os.path.getsize(os.path.join(dir, doc)):,} bytes), medians of {runs}")
    print("| command | wall ms | CPU ms |\n|---|---:|---:|")
    for name in cmds:
        print(f"| {name} | {wall[name]:.1f} | {cpu[name]:.1f} |")
    for name, _ in sjchecks:
        suffix = f" ({name})" if name else ""
        whole, chunked = f"sjcheck{suffix}", f"sjcheck --chunk 16{suffix}"
        print(f"{chunked} / {whole}: wall {wall[chunked] / wall[whole]:.2f}x, "
              f"CPU {cpu[chunked] / cpu[whole]:.2f}x")
        print(f"{whole} / actson: wall {wall[whole] / wall['actson']:.2f}x, "
              f"CPU {cpu[whole] / cpu['actson']:.2f}x")
print(f"\nload average after: {os.getloadavg()[0]:.2f}")
EOF
