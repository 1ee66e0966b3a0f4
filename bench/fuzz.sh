#!/usr/bin/env bash
# Every fuzz target in fuzz/ run under libFuzzer (cargo-fuzz, the nightly
# toolchain, AddressSanitizer) for SECONDS each, JOBS at a time; the
# corpus of each target is kept under the target directory between runs.
# CI only checks that the targets build (.ci/run); this is where they run.
# Prints, per target, the runs made and the coverage reached, and any
# crash with the file that replays it:
#   cargo +nightly fuzz run --fuzz-dir fuzz TARGET FILE
#
# Usage: bench/fuzz.sh [SECONDS] [JOBS] [TARGET...]
#        (cargo-fuzz and the nightly toolchain are installed if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
secs="${1:-60}"
jobs="${2:-2}"
shift $(( $# > 2 ? 2 : $# ))
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
out="${SQLFLEET_TARGET:-target}/fuzz"
mkdir -p "$out"
export CARGO_TARGET_DIR="$out/build"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir fuzz)
fi
cargo +nightly fuzz build -O --fuzz-dir fuzz >"$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
run_one() {
  local t="$1"
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  local before
  before=$(ls "$out/artifacts/$t" | wc -l)
  # The binary built above, run as it is (a rebuild mid-campaign would
  # fuzz a working tree that changed since).
  if "$out/build/x86_64-unknown-linux-gnu/release/$t" "$out/corpus/$t" \
      -max_total_time="$secs" -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 \
      >"$out/$t.log" 2>&1; then
    printf '%-18s ok    %s\n' "$t" "$(grep -E '^stat::number_of_executed_units' "$out/$t.log" | awk '{print $2 " runs"}'), $(grep -Eo 'cov: [0-9]+' "$out/$t.log" | tail -1)"
  elif [ "$(ls "$out/artifacts/$t" | wc -l)" -gt "$before" ]; then
    printf '%-18s CRASH %s\n' "$t" "$(ls -t "$out/artifacts/$t" | head -1) (log: $out/$t.log)"
  else
    printf '%-18s ERROR no crash file (log: %s)\n' "$t" "$out/$t.log"
  fi
}
export -f run_one
export out secs
rc=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' | tee "$out/summary.txt"
grep -qE ' (CRASH|ERROR) ' "$out/summary.txt" && rc=1
echo "(each target's output: $out/TARGET.log)"
exit "$rc"
