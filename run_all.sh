#!/usr/bin/env bash
# Builds everything and runs every step, printing the progression table; or, with --test,
# builds everything and runs the test suites. On a fresh machine with the CUDA toolkit it does
# all the set-up itself (installing meson, ninja and doctest with apt-get when it runs as root).
#
#   ./run_all.sh                      progression table at 4096^3 and 4097^3
#   ./run_all.sh --sizes "4096 8192 4097 1000x3000x2000"
#   ./run_all.sh --steps "03 05"      only these steps
#   ./run_all.sh --test               host tests + the GPU suite for every step
#
# Results: build/results/<step>.csv (one per step), build/results/progression.csv (all rows),
# build/results/progression.md (the table, with GPU and date) and, when python3 has
# matplotlib, build/results/progression.png (GFLOPS per step against cuBLAS).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

build_dir=build
sizes="4096 4097"
step_filter=""
warmup=3
repeats=11
mode=table

usage() {
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  echo "options: --sizes \"S ...\"  --steps \"NN ...\"  --warmup N  --repeats N  --build-dir DIR  --test"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --test) mode=test ;;
    --sizes) sizes=${2:?--sizes needs a value}; shift ;;
    --steps) step_filter=${2:?--steps needs a value}; shift ;;
    --warmup) warmup=${2:?--warmup needs a value}; shift ;;
    --repeats) repeats=${2:?--repeats needs a value}; shift ;;
    --build-dir) build_dir=${2:?--build-dir needs a value}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

say() { printf '==> %s\n' "$*" >&2; }

# --- prerequisites ---------------------------------------------------------------------------
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "run_all.sh: the CUDA toolkit (nvcc) was not found. Install it, or put its bin/ on PATH." >&2
  exit 1
fi

have_doctest() {
  echo '#include <doctest/doctest.h>' | c++ -std=c++20 -fsyntax-only -x c++ - >/dev/null 2>&1
}

missing=()
command -v meson >/dev/null 2>&1 || missing+=(meson)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
# The table needs no test framework; the tests need doctest (header-only).
if [[ $mode == test ]] && ! have_doctest; then missing+=(doctest-dev); fi
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${missing[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "run_all.sh: missing ${missing[*]}. Install with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# --- configure and build ---------------------------------------------------------------------
if [[ ! -f $build_dir/build.ninja ]]; then
  say "configuring $build_dir"
  meson setup "$build_dir" >/dev/null
elif [[ $mode == test && ! -x $build_dir/host_tests ]]; then
  say "reconfiguring $build_dir (doctest is available now)"
  meson setup --reconfigure "$build_dir" >/dev/null
fi
say "building"
meson compile -C "$build_dir" >/dev/null

if [[ $mode == test ]]; then
  say "running the tests (host tests; GPU suite per step, skipped without a GPU)"
  exec meson test -C "$build_dir" --print-errorlogs
fi

# --- run every step ----------------------------------------------------------------------------
results=$build_dir/results
mkdir -p "$results"
steps=()
for dir in steps/*/; do
  step=$(basename "$dir")
  if [[ -n $step_filter ]]; then
    [[ " $step_filter " == *" ${step%%_*} "* ]] || continue
  fi
  steps+=("$step")
done
if [[ ${#steps[@]} -eq 0 ]]; then
  echo "run_all.sh: no step matches '$step_filter'" >&2
  exit 2
fi

failed=()
csv_files=()
header_written=no
for i in "${!steps[@]}"; do
  step=${steps[$i]}
  say "[$((i + 1))/${#steps[@]}] $step: sizes $sizes"
  csv=$results/$step.csv
  status=0
  # shellcheck disable=SC2086  # $sizes is a list of sizes
  "$build_dir/$step" --csv --warmup "$warmup" --repeats "$repeats" $sizes >"$csv" \
    2>"$results/$step.log" || status=$?
  if [[ $header_written == no ]]; then
    grep '^# ' "$results/$step.log" | grep -E 'GPU|CUDA' | sed 's/^# //' >"$results/environment.txt" || true
    header_written=yes
  fi
  case $status in
    0) ;;
    1) failed+=("$step (wrong result)") ;;
    3) cat "$results/$step.log" >&2; exit 3 ;;  # no GPU: nothing else will run either
    *) failed+=("$step (exit $status)") ;;
  esac
  # Progress: one line per size as the step finishes.
  awk -F, 'NR > 1 { printf "      %-20s %10.1f GFLOPS  %5.1f%% of cuBLAS  %s\n", $4 "x" $5 "x" $6, $10, $13, $14 }' "$csv" >&2
  grep -v '^# \(step\|GPU\|CUDA\)' "$results/$step.log" | sed 's/^/      /' >&2 || true
  [[ -s $csv ]] && csv_files+=("$csv")
done

# --- the table -------------------------------------------------------------------------------
head -n 1 "${csv_files[0]}" >"$results/progression.csv"
for f in "${csv_files[@]}"; do tail -n +2 "$f" >>"$results/progression.csv"; done
{
  echo "Measured $(date -u +%Y-%m-%d) with run_all.sh --sizes \"$sizes\" --warmup $warmup --repeats $repeats"
  echo
  sed 's/^/    /' "$results/environment.txt"
  echo
  "$build_dir/progression_table" "$results/progression.csv"
} >"$results/progression.md"
cat "$results/progression.md"
echo "(written to $results/progression.md and $results/progression.csv)" >&2

# The progression plot, when python3 has matplotlib.
if python3 -c 'import matplotlib' >/dev/null 2>&1; then
  python3 common/plot_progression.py "$results/progression.csv" "$results/progression.png" >&2
else
  echo "(no plot: python3 with matplotlib not found; 'pip install matplotlib' to get $results/progression.png)" >&2
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_all.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
