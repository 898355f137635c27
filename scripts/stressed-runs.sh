#!/usr/bin/env bash
# Runs README's test command (scripts/test.sh) N times in a row beside a CPU, disk and memory hog,
# stopping at the first failure: the check that the suite neither lies nor flakes on a loaded 2-core
# machine.
#
#   bash scripts/stressed-runs.sh [RUNS]        # default 5; logs under target/stressed-runs/
#
# The hog is Debian's stress-ng (installed when missing), started before the first run and stopped
# at the end: `--cpu $(nproc)`; `--hdd 1 --hdd-opts fsync` and `--io 1` (writes forced to disk and
# sync() calls, what etcd's fsyncs then wait behind; its files under the run's log directory); and
# `--vm 1 --vm-keep` holding OCM_SCORE_STRESS_MEMORY (default 4G) of memory. Each run's log is kept; one summary line per run (exit code,
# wall time, nextest's closing line, load average, the three slowest tests) goes to the terminal and to
# summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

runs=${1:-5}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: RUNS must be a whole number from 1, got '$runs'" >&2
  exit 2
fi

if ! command -v stress-ng >/dev/null 2>&1; then
  apt_install stress-ng
fi

logs="target/stressed-runs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$logs"
summary="$logs/summary.txt"
memory=${OCM_SCORE_STRESS_MEMORY:-4G}
hog_args=(--cpu "$(nproc)" --hdd 1 --hdd-bytes 1G --hdd-opts fsync --io 1
  --vm 1 --vm-bytes "$memory" --vm-keep --temp-path "$logs")
echo "commit $(git rev-parse --short HEAD) · nproc $(nproc) · hog: stress-ng ${hog_args[*]}" | tee "$summary"

stress-ng "${hog_args[@]}" --timeout 0 --quiet &
hog=$!
# Waits for stress-ng to stop its stressors (and remove its files), so nothing of it outlives the script.
trap 'kill "$hog" 2>/dev/null && wait "$hog" 2>/dev/null; true' EXIT

for run in $(seq 1 "$runs"); do
  log="$logs/run-$run.log"
  t0=$(date +%s)
  set +e
  bash scripts/test.sh >"$log" 2>&1
  code=$?
  set -e
  wall=$(( $(date +%s) - t0 ))
  # Under pipefail and -e, a failing stage ends the whole loop and stops the hog: grep finds no summary
  # when the build failed, and `head` would close the pipe on a sort whose output (690 lines) no longer
  # fits in the pipe's buffer.
  closing=$( (grep -E '^ *Summary \[|tests run:' "$log" || true) | tail -1 | sed 's/^ *//')
  # nextest's result lines: `PASS [ 123.456s] package::binary test`.
  slowest=$(sed -n 's/^ *\(PASS\|FAIL\|TIMEOUT\) \[ *\([0-9.]*\)s\] \(.*\)$/\2 s \3/p' "$log" |
    sort -rn | sed -n 1,3p | paste -sd ';' - | sed 's/;/; /g')
  echo "run $run: exit $code · ${wall} s · ${closing:-no nextest summary} · load $(cut -d' ' -f1-3 /proc/loadavg) · slowest: ${slowest:-none}" | tee -a "$summary"
  if [ "$code" -ne 0 ]; then
    echo "run $run failed; its log: $log" | tee -a "$summary"
    grep -E '^ *(FAIL|TIMEOUT|SIGSEGV|SIGABRT) ' "$log" | sort -u | head -20 | tee -a "$summary" || true
    exit 1
  fi
done
echo "$runs runs passed in a row" | tee -a "$summary"
