#!/usr/bin/env bash
# Builds everything and runs every step, printing the progression table; or, with --atlas,
# measures the last BF16 step against cuBLAS over a fixed grid of about a hundred shapes; or, with
# --test, builds everything and runs the test suites. On a fresh machine with the CUDA toolkit
# it does all the set-up itself (installing meson, ninja and doctest with apt-get when it runs
# as root).
#
#   ./run_all.sh                      the progression table at 4096^3 and 4097^3
#   ./run_all.sh --sizes "4096 8192 4097 1000x3000x2000 4096:ld+8"
#   ./run_all.sh --steps "3 05 13"    only these steps (numbers, with or without the 0); only
#                                     their executables are built
#   ./run_all.sh --atlas              the shape atlas of the last BF16 step (only it is built)
#   ./run_all.sh --atlas --steps "20 26"   one atlas per step
#   ./run_all.sh --test               host tests + the GPU suite of every step
#   ./run_all.sh --test --steps 5     host tests + step 05's GPU suite (only these are built)
#   ./run_all.sh --test --exercises   ... and the exercise skeletons' suites (they fail until
#                                     the TODOs are solved; turns on -Dexercises=true)
#
# Options: --sizes "S ...", --steps "NN ...", --warmup N, --repeats N, --build-dir DIR,
# --atlas, --test, --exercises, -h/--help. Sizes are N (N x N x N) or MxNxK, either optionally
# followed by :ld+P, P from 1 to 65536 extra elements at the end of every row of A, B and C
# (lda = k + P, ldb = ldc = n + P; e.g. 4096:ld+8). --sizes, --warmup and --repeats go with the
# table, --warmup and --repeats also with --atlas (which takes no --sizes), --exercises with
# --test.
#
# The atlas's grid (python3 common/harness/results.py atlas-shapes lists it) has four panels:
# square outputs (M = N) by depth K, small M against N = K, the awkward neighbours of S^3
# ((S+1)^3, (S+8)^3, padded rows, K+4, N+4) and the projections of Llama 3 8B by token count.
# It prints a line per shape as it is measured, then the summary (the top of the atlas .md).
#
# Without an NVIDIA GPU (no nvidia-smi, or it lists none) nothing can be timed: the table mode
# and --atlas say so at once, build anyway (a check that the tree compiles) and exit 3. --test
# runs the host tests, and its last line says how many GPU suites were skipped: they checked
# nothing.
#
# Results: build/results/<step>.csv and .log (one per step), build/results/progression.csv
# (all rows), build/results/progression.md (the tables, with GPU and date) and, when python3
# has matplotlib, build/results/progression.png. With --atlas: build/results/atlas_<step>.csv
# and .log, atlas_<step>.md (the summary, then a table per panel: % of cuBLAS and both TFLOP/s)
# and, with matplotlib, the heat maps atlas_<step>_pct.png (% of cuBLAS) and
# atlas_<step>_cublas.png (cuBLAS's own TFLOP/s, where its cliffs show). Build output goes to
# build/logs/; Meson's warnings and, on a failure, the log's last lines are printed. Exit
# status: 0 everything passed, 1 a check or test failed (or the build did), 2 bad options, 3 no
# GPU (table mode and --atlas).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

build_dir=build
sizes="4096 4097"
sizes_given=no
step_filter=""
steps_given=no
warmup=3
repeats=11
mode=table
atlas=no
with_exercises=no
table_option=""  # the last option given that only the table uses

usage() {  # the header comment above, whatever its length
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
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
    --atlas) atlas=yes ;;
    --exercises) with_exercises=yes ;;
    --sizes) need_value "$1" $#; sizes=$2; sizes_given=yes; table_option=$1; shift ;;
    --steps) need_value "$1" $#; step_filter=$2; steps_given=yes; shift ;;
    --warmup) need_value "$1" $#; warmup=$2; table_option=$1; shift ;;
    --repeats) need_value "$1" $#; repeats=$2; table_option=$1; shift ;;
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
# N or MxNxK, then optionally :ld+P; BASH_REMATCH[3] is P.
size_pattern='^[1-9][0-9]{0,8}(x[1-9][0-9]{0,8}x[1-9][0-9]{0,8})?(:ld\+([1-9][0-9]{0,4}))?$'
for size in "${size_list[@]}"; do
  if [[ ! $size =~ $size_pattern ]] ||
    [[ -n ${BASH_REMATCH[3]} && ${BASH_REMATCH[3]} -gt 65536 ]]; then
    die_usage "size '$size' must be N or MxNxK with whole numbers >= 1, optionally followed by" \
      ":ld+P with P from 1 to 65536 (e.g. 4096, 1000x3000x2000 or 4096:ld+8)"
  fi
done
[[ $with_exercises == no || $mode == test ]] || die_usage "--exercises goes with --test"
if [[ $atlas == yes ]]; then
  [[ $mode == table ]] || die_usage "--atlas and --test go separately"
  [[ $sizes_given == no ]] || die_usage "--atlas measures its own grid of shapes: no --sizes"
fi
[[ -z $table_option || $mode == table ]] ||
  die_usage "$table_option goes with the table, not with --test"

# The steps to run, as directory names; --steps takes numbers with or without a leading 0.
all_steps=()
for dir in steps/*/; do all_steps+=("$(basename "$dir")"); done
steps=()
if [[ $steps_given == no && $atlas == yes ]]; then
  # The atlas measures against cuBLAS BF16: by default the last step of the BF16 track, the
  # last whose kernel defines gemm::bf16_gemm.
  for step in "${all_steps[@]}"; do
    if grep -qs 'void gemm::bf16_gemm(' steps/"$step"/*.cu; then steps=("$step"); fi
  done
  [[ ${#steps[@]} -gt 0 ]] || die_usage "--atlas: no step defines gemm::bf16_gemm"
elif [[ $steps_given == no ]]; then
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

# The atlas's shapes, from the one place that defines its grid.
atlas_sizes=()
if [[ $atlas == yes ]]; then
  read -r -a atlas_sizes <<<"$(python3 common/harness/results.py atlas-shapes | tr '\n' ' ')"
  if [[ ${#atlas_sizes[@]} -eq 0 ]]; then
    echo "run_all.sh: 'python3 common/harness/results.py atlas-shapes' gave no shape" >&2
    exit 1
  fi
fi

# --- the GPU -----------------------------------------------------------------------------------
# Prints why there is no usable NVIDIA GPU here, or nothing when there is one.
no_gpu_reason() {
  local listing
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "nvidia-smi not found"
  elif ! listing=$(nvidia-smi -L 2>&1); then
    echo "nvidia-smi -L failed: $(head -n 1 <<<"$listing")"
  elif ! grep -q '^GPU [0-9]' <<<"$listing"; then
    echo "nvidia-smi -L lists no GPU"
  fi
}
no_gpu=$(no_gpu_reason)
if [[ $mode == table && -n $no_gpu ]]; then
  echo "run_all.sh: no NVIDIA GPU here ($no_gpu): nothing can be timed, so this run only builds" \
    "(exit status 3)" >&2
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
# Runs a build command with its output in a log file; on failure shows the log's tail. Meson's
# warnings (such as meson.build's: Meson < 1.4 does not track headers) are shown either way.
logged() {
  local log=$1
  shift
  mkdir -p "$logs"
  if ! "$@" >"$log" 2>&1; then
    echo "run_all.sh: '$*' failed. The last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  grep 'WARNING:' "$log" | awk '!seen[$0]++' | sed 's/^/    /' >&2 || true
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

# With --steps, and with --atlas, only the chosen steps are built: for the table and the atlas,
# their executables (the targets named like the step directories); for --test, what the host
# suite and the chosen steps' suites (gpu_NN_name, exercise_NN_name) run, as Meson's
# introspection files list it.
targets=()
tests=()
if [[ $steps_given == yes || $atlas == yes ]]; then
  # Brings build.ninja and the introspection files up to date with meson.build and the options
  # first, as meson compile would.
  logged "$logs/compile.log" ninja -C "$build_dir" build.ninja
  selection=$(python3 - "$build_dir" "$mode" "$with_exercises" "${steps[@]}" <<'PY'
import json
import sys

build, mode, exercises, steps = sys.argv[1], sys.argv[2], sys.argv[3] == "yes", sys.argv[4:]


def intro(kind):
    with open(f"{build}/meson-info/intro-{kind}.json", encoding="utf-8") as f:
        return json.load(f)


# Line 1: the tests to run; line 2: the targets to build.
names = {target["id"]: target["name"] for target in intro("targets")}
if mode == "table":
    for step in steps:
        if step not in names.values():
            print(f"run_all.sh: steps/{step} has no executable (is it in meson.build?); skipped",
                  file=sys.stderr)
    print()
    print(" ".join(step for step in steps if step in names.values()))
    sys.exit(0)
wanted = {"gpu_" + s for s in steps} | ({"exercise_" + s for s in steps} if exercises else set())
tests = [test for test in intro("tests")
         if test["name"] in wanted or any(s.split(":")[-1] == "host" for s in test["suite"])]
for step in steps:
    if "gpu_" + step not in [test["name"] for test in tests]:
        print(f"run_all.sh: steps/{step} has no test gpu_{step} (is it in meson.build?); "
              "skipped", file=sys.stderr)
print(" ".join(test["name"] for test in tests))
print(" ".join(sorted({names[d] for test in tests for d in test["depends"]})))
PY
  )
  read -r -a tests <<<"$(sed -n 1p <<<"$selection")"
  read -r -a targets <<<"$(sed -n 2p <<<"$selection")"
  if [[ $mode == table ]]; then
    [[ ${#targets[@]} -gt 0 ]] || { echo "run_all.sh: no step to run" >&2; exit 1; }
    steps=("${targets[@]}")
  fi
fi
if [[ ${#targets[@]} -gt 0 ]]; then
  say "building ${targets[*]} (log: $logs/compile.log)"
else
  say "building (log: $logs/compile.log)"
fi
logged "$logs/compile.log" meson compile -C "$build_dir" "${targets[@]}"

# --- the tests ---------------------------------------------------------------------------------
if [[ $mode == test ]]; then
  what="host, and the GPU suite of every step"
  [[ $steps_given == no ]] || what="host, and the GPU suites of steps ${steps[*]%%_*}"
  suites=(--no-suite exercises)
  if [[ $with_exercises == yes ]]; then
    suites=()
    what="$what and of their exercise skeletons"
  fi
  say "running the tests: $what"
  testlog=$build_dir/meson-logs/testlog.json
  rm -f "$testlog"
  status=0
  meson test -C "$build_dir" --print-errorlogs "${suites[@]}" "${tests[@]}" || status=$?
  # A GPU suite that cannot run (no GPU; a Hopper step on another GPU) exits 77, which meson
  # reports as SKIP and does not count as a failure: say how many checked nothing.
  if [[ -f $testlog ]]; then
    summary=$(python3 - "$testlog" <<'PY'
import json
import sys

skipped, gpu_suites = [], 0
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        test = json.loads(line)  # "name": "project:suite / test"
        suite, _, name = test["name"].partition(" / ")
        if suite.split(":")[-1] in ("gpu", "exercises"):
            gpu_suites += 1
            skipped += [name] if test["result"] == "SKIP" else []
print(len(skipped), gpu_suites, " ".join(skipped))
PY
    ) || summary=""
    read -r skipped gpu_suites skipped_names <<<"$summary"
    if [[ $skipped -gt 0 && -n $no_gpu ]]; then
      echo "run_all.sh: no GPU ($no_gpu): $skipped of $gpu_suites GPU suites skipped;" \
        "nothing was checked on a GPU" >&2
    elif [[ $skipped -gt 0 ]]; then
      echo "run_all.sh: $skipped of $gpu_suites GPU suites skipped, so not checked on this GPU" \
        "($build_dir/meson-logs/testlog.txt says why): $skipped_names" >&2
    fi
  fi
  exit "$status"
fi
if [[ -n $no_gpu ]]; then
  echo "run_all.sh: built; no NVIDIA GPU here ($no_gpu), so no step was run" >&2
  exit 3
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

# A step that exits 3 found no usable GPU: nothing else will run either, so say why, keep
# nothing and exit 3.
exit_if_no_gpu() {  # exit status, log, partial CSV
  [[ $1 -eq 3 ]] || return 0
  cat "$2" >&2
  rm -f "$3" "$2"
  rmdir "$results" 2>/dev/null || true
  exit 3
}

exit_if_failed() {
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "run_all.sh: FAILED: ${failed[*]}" >&2
    exit 1
  fi
}

# What a step's exit status adds to the list of failures.
record_failure() {  # step, exit status
  case $2 in
    0) ;;
    77) ;;  # a Hopper step on another GPU, or not built for this target: its log says why
    1) failed+=("$1 (wrong result)") ;;
    *) failed+=("$1 (exit $2)") ;;
  esac
}

# --- the shape atlas ---------------------------------------------------------------------------
if [[ $atlas == yes ]]; then
  atlases=()
  for i in "${!steps[@]}"; do
    step=${steps[$i]}
    say "[$((i + 1))/${#steps[@]}] $step: the shape atlas, ${#atlas_sizes[@]} shapes"
    csv=$results/atlas_$step.csv
    log=$results/atlas_$step.log
    # The CSV goes to its file as the executable prints it, and a line per shape to the
    # terminal as it comes; PIPESTATUS keeps the executable's own exit status.
    if "$build_dir/$step" --csv --warmup "$warmup" --repeats "$repeats" "${atlas_sizes[@]}" \
      2>"$log" | tee "$csv.part" |
      python3 -u common/harness/results.py atlas-progress "${#atlas_sizes[@]}" |
      while IFS= read -r line; do printf '      %s\n' "$line" >&2; done; then
      status=0
    else
      status=${PIPESTATUS[0]}
    fi
    exit_if_no_gpu "$status" "$log" "$csv.part"
    grep -v '^# \(step\|GPU\|CUDA\)' "$log" | sed 's/^/      /' >&2 || true
    if [[ $(wc -l <"$csv.part") -gt 1 ]]; then
      mv "$csv.part" "$csv"
      if python3 common/harness/results.py atlas "$csv" "$results/atlas_$step"; then
        atlases+=("$results/atlas_$step")
        echo
        awk '/^## / { exit } { print }' "$results/atlas_$step.md"  # the title and the summary
      else
        failed+=("$step (results.py atlas)")
      fi
    else
      rm -f "$csv.part" "$csv"
    fi
    record_failure "$step" "$status"
  done
  if [[ ${#atlases[@]} -eq 0 ]]; then
    echo "run_all.sh: no step produced a result" >&2
    exit 1
  fi
  for prefix in "${atlases[@]}"; do
    echo "(written to $prefix.md and $prefix.csv)" >&2
  done
  exit_if_failed
  exit 0
fi

# --- the table: every step at every size -------------------------------------------------------
csv_files=()
for i in "${!steps[@]}"; do
  step=${steps[$i]}
  say "[$((i + 1))/${#steps[@]}] $step: sizes $sizes"
  csv=$results/$step.csv
  log=$results/$step.log
  status=0
  "$build_dir/$step" --csv --warmup "$warmup" --repeats "$repeats" "${size_list[@]}" >"$csv.part" \
    2>"$log" || status=$?
  exit_if_no_gpu "$status" "$log" "$csv.part"
  if [[ $(wc -l <"$csv.part") -gt 1 ]]; then
    mv "$csv.part" "$csv"
    csv_files+=("$csv")
    python3 common/harness/results.py progress "$csv" | sed 's/^/      /' >&2
  else
    rm -f "$csv.part" "$csv"
  fi
  grep -v '^# \(step\|GPU\|CUDA\)' "$log" | sed 's/^/      /' >&2 || true
  record_failure "$step" "$status"
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
  steps_option=""
  [[ $steps_given == no ]] || steps_option=" --steps \"$step_filter\""
  echo "Measured $(date -u +%Y-%m-%d) with ./run_all.sh$steps_option --sizes \"$sizes\" --warmup $warmup --repeats $repeats"
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

exit_if_failed
