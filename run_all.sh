#!/usr/bin/env bash
# Builds everything and runs every step, printing the progression table; or, with --test,
# builds everything and runs the test suites. On a fresh machine with the CUDA toolkit it does
# all the set-up itself (installing meson, ninja and doctest with apt-get when it runs as root).
#
#   ./run_all.sh                      the progression table at 4096^3 and 4097^3
#   ./run_all.sh --sizes "4096 8192 4097 1000x3000x2000"
#   ./run_all.sh --steps "3 05 13"    only these steps (numbers, with or without the 0)
#   ./run_all.sh --test               host tests + the GPU suite of every step
#   ./run_all.sh --test --exercises   ... and the exercise skeletons' suites (they fail until
#                                     the TODOs are solved; turns on -Dexercises=true)
#
# Options: --sizes "S ...", --steps "NN ...", --warmup N, --repeats N, --build-dir DIR,
# --test, --exercises, -h/--help. Sizes are N (N x N x N) or MxNxK.
#
# Results: build/results/<step>.csv and .log (one per step), build/results/progression.csv
# (all rows), build/results/progression.md (the tables, with GPU and date) and, when python3
# has matplotlib, build/results/progression.png. Build output goes to build/logs/; on a
# failure its last lines are printed. Exit status: 0 everything passed, 1 a check or test
# failed (or the build did), 2 bad options, 3 no GPU (table mode).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

build_dir=build
sizes="4096 4097"
step_filter=""
warmup=3
repeats=11
mode=table
with_exercises=no

usage() {
  sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}
die_usage() {
  echo "run_all.sh: $*" >&2
  echo "(./run_all.sh --help for the options)" >&2
  exit 2
}
say() { printf '==> %s\n' "$*" >&2; }

# --- options: all checked before anything is built -------------------------------------------
need_value() {  # option, number of arguments left after it
  [[ $2 -ge 2 ]] || die_usage "$1 needs a value"
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --test) mode="test" ;;
    --exercises) with_exercises=yes ;;
    --sizes) need_value "$1" $#; sizes=$2; shift ;;
    --steps) need_value "$1" $#; step_filter=$2; shift ;;
    --warmup) need_value "$1" $#; warmup=$2; shift ;;
    --repeats) need_value "$1" $#; repeats=$2; shift ;;
    --build-dir) need_value "$1" $#; build_dir=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
  shift
done

positive='^[1-9][0-9]{0,8}$'  # 1 .. 999,999,999: fits an int
[[ $warmup =~ $positive && $warmup -le 100000 ]] ||
  die_usage "--warmup '$warmup' must be a whole number from 1 to 100000"
[[ $repeats =~ $positive && $repeats -le 100000 ]] ||
  die_usage "--repeats '$repeats' must be a whole number from 1 to 100000"
read -r -a size_list <<<"$sizes"
[[ ${#size_list[@]} -gt 0 ]] || die_usage "--sizes needs at least one size"
for size in "${size_list[@]}"; do
  if [[ ! $size =~ ^[1-9][0-9]{0,8}$ && ! $size =~ ^[1-9][0-9]{0,8}x[1-9][0-9]{0,8}x[1-9][0-9]{0,8}$ ]]; then
    die_usage "size '$size' must be N or MxNxK with whole numbers >= 1 (e.g. 4096 or 1000x3000x2000)"
  fi
done
[[ $with_exercises == no || $mode == test ]] || die_usage "--exercises goes with --test"

# The steps to run, as directory names; --steps takes numbers with or without a leading 0.
all_steps=()
for dir in steps/*/; do all_steps+=("$(basename "$dir")"); done
steps=()
if [[ -z $step_filter ]]; then
  steps=("${all_steps[@]}")
else
  read -r -a wanted <<<"$step_filter"
  [[ ${#wanted[@]} -gt 0 ]] || die_usage "--steps needs at least one step number"
  for number in "${wanted[@]}"; do
    [[ $number =~ ^[0-9]{1,2}$ ]] || die_usage "--steps: '$number' is not a step number (e.g. 5 or 05)"
    padded=$(printf '%02d' "$((10#$number))")
    found=""
    for step in "${all_steps[@]}"; do
      [[ ${step%%_*} == "$padded" ]] && found=$step
    done
    [[ -n $found ]] || die_usage "--steps: there is no step $padded (steps: ${all_steps[*]%%_*})"
    steps+=("$found")
  done
fi

# --- prerequisites -----------------------------------------------------------------------------
nvcc_path=$(command -v nvcc 2>/dev/null || true)
if [[ -z $nvcc_path && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
fi
if [[ -z $nvcc_path ]]; then
  echo "run_all.sh: the CUDA toolkit (nvcc) was not found on PATH or in /usr/local/cuda/bin." >&2
  echo "  Install it (https://developer.nvidia.com/cuda-downloads), or put its bin/ on PATH." >&2
  exit 1
fi
nvcc_path=$(cd "$(dirname "$nvcc_path")" && pwd)/$(basename "$nvcc_path")
nvcc_dir=$(dirname "$nvcc_path")
export PATH="$nvcc_dir:$PATH"

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
meson_version=$(meson --version)
if [[ ! $meson_version =~ ^([0-9]+)\. ]] || [[ ${BASH_REMATCH[1]} -lt 1 ]]; then
  echo "run_all.sh: Meson $meson_version is too old; the build needs Meson 1.0 or later." >&2
  echo "  Where the distribution's is older (Ubuntu 22.04 ships 0.61), install a newer one" >&2
  echo "  for your user and make sure it comes first on PATH:" >&2
  echo "    python3 -m pip install --user 'meson>=1.0' ninja && export PATH=\$HOME/.local/bin:\$PATH" >&2
  exit 1
fi

# --- configure and build -----------------------------------------------------------------------
logs=$build_dir/logs
# Runs a build command with its output in a log file; on failure shows the log's tail.
logged() {
  local log=$1
  shift
  mkdir -p "$logs"
  if ! "$@" >"$log" 2>&1; then
    echo "run_all.sh: '$*' failed. The last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}
if [[ ! -f $build_dir/build.ninja ]]; then
  say "configuring $build_dir (log: $logs/setup.log)"
  # The native file pins nvcc by its absolute path, so that the build directory keeps working
  # from a shell whose PATH does not have nvcc (meson compile, meson test after an edit).
  mkdir -p "$logs"
  printf "[binaries]\ncuda = '%s'\n" "$nvcc_path" >"$logs/nvcc-native.ini"
  logged "$logs/setup.log" meson setup "$build_dir" --native-file "$logs/nvcc-native.ini"
elif [[ $mode == test && ! -x $build_dir/host_tests ]]; then
  say "reconfiguring $build_dir (doctest is available now)"
  logged "$logs/setup.log" meson setup --reconfigure "$build_dir"
fi
if [[ $with_exercises == yes ]]; then
  logged "$logs/setup.log" meson configure "$build_dir" -Dexercises=true
fi
say "building (log: $logs/compile.log)"
logged "$logs/compile.log" meson compile -C "$build_dir"

if [[ $mode == test ]]; then
  if [[ $with_exercises == yes ]]; then
    say "running the tests: host, the GPU suite of every step, and the exercise skeletons"
    exec meson test -C "$build_dir" --print-errorlogs
  fi
  say "running the tests: host, and the GPU suite of every step (skipped without a GPU)"
  exec meson test -C "$build_dir" --print-errorlogs --no-suite exercises
fi

# --- run every step ----------------------------------------------------------------------------
# A directory under steps/ that meson.build does not list has no executable: say so, skip it.
built_steps=()
for step in "${steps[@]}"; do
  if [[ -x $build_dir/$step ]]; then
    built_steps+=("$step")
  else
    echo "run_all.sh: steps/$step has no executable $build_dir/$step (is it in meson.build?); skipped" >&2
  fi
done
[[ ${#built_steps[@]} -gt 0 ]] || { echo "run_all.sh: no step to run" >&2; exit 1; }
steps=("${built_steps[@]}")
results=$build_dir/results
mkdir -p "$results"
failed=()
csv_files=()
for i in "${!steps[@]}"; do
  step=${steps[$i]}
  say "[$((i + 1))/${#steps[@]}] $step: sizes $sizes"
  csv=$results/$step.csv
  log=$results/$step.log
  status=0
  "$build_dir/$step" --csv --warmup "$warmup" --repeats "$repeats" "${size_list[@]}" >"$csv.part" \
    2>"$log" || status=$?
  if [[ $status -eq 3 ]]; then  # no GPU: nothing else will run either, and nothing is kept
    cat "$log" >&2
    rm -f "$csv.part" "$log"
    exit 3
  fi
  if [[ $(wc -l <"$csv.part") -gt 1 ]]; then
    mv "$csv.part" "$csv"
    csv_files+=("$csv")
    python3 common/harness/results.py progress "$csv" | sed 's/^/      /' >&2
  else
    rm -f "$csv.part" "$csv"
  fi
  grep -v '^# \(step\|GPU\|CUDA\)' "$log" | sed 's/^/      /' >&2 || true
  case $status in
    0) ;;
    77) ;;  # a Hopper step on another GPU, or not built for this target: its log says why
    1) failed+=("$step (wrong result)") ;;
    *) failed+=("$step (exit $status)") ;;
  esac
done

# --- the tables --------------------------------------------------------------------------------
if [[ ${#csv_files[@]} -eq 0 ]]; then
  echo "run_all.sh: no step produced a result" >&2
  exit 1
fi
{
  head -n 1 "${csv_files[0]}"
  for f in "${csv_files[@]}"; do tail -n +2 "$f"; done
} >"$results/progression.csv"
# The GPU line, and one software line per baseline (FP32 and BF16 steps name different ones).
environment=$(for step in "${steps[@]}"; do
  grep -h '^# \(GPU\|CUDA\)' "$results/$step.log" 2>/dev/null || true
done | awk '!seen[$0]++' | sed 's/^# /    /')
{
  echo "Measured $(date -u +%Y-%m-%d) with ./run_all.sh --sizes \"$sizes\" --warmup $warmup --repeats $repeats"
  echo
  echo "$environment"
  echo
  python3 common/harness/results.py table "$results/progression.csv"
} >"$results/progression.md"
cat "$results/progression.md"
echo "(written to $results/progression.md and $results/progression.csv)" >&2

if python3 -c 'import matplotlib' >/dev/null 2>&1; then
  python3 common/harness/results.py plot "$results/progression.csv" "$results/progression.png"
else
  echo "(no plot: python3 has no matplotlib; 'python3 -m pip install matplotlib' for $results/progression.png)" >&2
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_all.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
