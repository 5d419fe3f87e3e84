#!/usr/bin/env bash
# Instruction counts (valgrind callgrind) per input and contender, minus input generation:
# a repeatable complement to the criterion timings on a noisy machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q --release -p stream-json --example contenders
bin="${CARGO_TARGET_DIR:-target}/release/examples/contenders"
count() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 | sed -n 's/.*refs: *//p' | tr -d ,; }
# The last column, for chunked stream-json: instructions per feed beyond the one-chunk parse.
printf '| input | contender | instructions | vs stream_json_one_chunk | extra per feed |\n|---|---|---:|---:|---:|\n'
for input in action_10k action_100k action_1m twitter_like; do
  base=$(count "$input" none)
  size=$("$bin" "$input" size)
  ours=$(( $(count "$input" stream_json_one_chunk) - base ))
  contenders="stream_json_one_chunk stream_json_chunks_16 stream_json_chunks_4 stream_json_chunks_1"
  contenders="$contenders serde_json_value actson_one_chunk struson_skip"
  case "$input" in action_10k|action_100k) contenders="$contenders reparse_per_chunk_16";; esac
  for contender in $contenders; do
    n=$(( $(count "$input" "$contender") - base ))
    per_feed=""
    case "$contender" in stream_json_chunks_*)
      chunk=${contender#stream_json_chunks_}
      per_feed=$(python3 -c "print(f'{($n - $ours) / -(-$size // $chunk):.1f}')");;
    esac
    printf '| %s | %s | %d | %s | %s |\n' "$input" "$contender" "$n" "$(python3 -c "print(f'{$n/$ours:.2f}x')")" "$per_feed"
  done
done
