#!/usr/bin/env bash
# OCM's placement scheduler and ours, side by side on the same fleets, in one run.
#
#   scripts/bench-vs-ocm.sh [CLUSTERS...]     # default: 100 1000 10000 50000
#
# Builds OCM's side (tests/ocm-bench/placement-bench, OCM at the version tests/control-plane pins)
# and ours (scheduler-core's placement benchmark), prints the machine, the versions and the load,
# then runs both on each fleet, each side as its own process per size (see
# scheduler-core/benches/placement/vs_ocm.rs), and prints one markdown table:
# | clusters | OCM ms | ours ms | ratio | OCM peak MiB | ours peak MiB |
# plus a row for the CEL placement at 10,000 clusters. Times are medians of one full scheduling pass
# with decisions; ratio = OCM ms / ours ms; peak = each process's VmHWM.
#
# Go: $OCM_SCORE_GO, else `go` on PATH, else /usr/local/go/bin/go, else the one scripts/test.sh
# installs. It builds with GOTOOLCHAIN=local and -mod=readonly: go.mod and go.sum decide, and only
# the Go module proxy is used (for modules not yet in Go's module cache).
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)

find_go() {
  if [ -n "${OCM_SCORE_GO:-}" ]; then echo "$OCM_SCORE_GO"; return; fi
  if command -v go >/dev/null 2>&1; then command -v go; return; fi
  if [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; return; fi
  local venv_go
  venv_go=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/ocm-score/go/lib/python3*/site-packages/go/bin/go 2>/dev/null | tail -1 || true)
  if [ -n "$venv_go" ]; then echo "$venv_go"; return; fi
  echo "no Go toolchain: install Go 1.25 or newer, or run scripts/test.sh once, or set OCM_SCORE_GO" >&2
  exit 1
}
go=$(find_go)

cache="${OCM_SCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ocm-score}/bench-vs-ocm"
mkdir -p "$cache/bin"
echo "building OCM's side (tests/ocm-bench/placement-bench) ..." >&2
(
  cd tests/ocm-bench
  GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
    "$go" build -trimpath -o "$cache/bin/" ./placement-bench
)
echo "building our side (cargo bench -p ocm-score-scheduler --bench placement) ..." >&2
cargo bench -q -p ocm-score-scheduler --bench placement --no-run >&2

ocm_version=$(cd tests/ocm-bench && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go" list -m -f '{{.Version}}' open-cluster-management.io/ocm)
rev=$(git -C "$repo" rev-parse --short HEAD)
if [ -n "$(git -C "$repo" status --porcelain)" ]; then rev="$rev (with uncommitted changes)"; fi

echo "## Placement: OCM's scheduler and ours on the same fleets"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: nproc $(nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "- versions: OCM $ocm_version ($(GOTOOLCHAIN=local "$go" env GOVERSION)), ocm-score $rev ($(rustc --version))"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

cargo bench -q -p ocm-score-scheduler --bench placement -- vs-ocm "$cache/bin/placement-bench" "$@"

echo
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
