#!/usr/bin/env bash
# Runs CI (.ci/run) as a fresh machine would: in a clean clone of HEAD, with empty caches of its own
# for cargo (CARGO_HOME: registry and installed tools), Go (GOPATH: the module cache) and ours
# (XDG_CACHE_HOME: the Go builds, the prebuilt cargo-nextest, Go from PyPI), so nothing built or
# downloaded before is reused. The toolchains stay (rustup's Rust, Go on PATH), as on a fresh
# machine of our kind.
#
#   bash scripts/fresh-ci.sh [DIR]      # default DIR: a new directory under /tmp; log in DIR/ci.log
#
# With OCM_SCORE_FRESH_PURGE=1 it first removes the Debian packages scripts/test.sh installs
# (containerd, runc, CNI plugins, prometheus), so that their install is timed too. Run it alone: the
# control plane takes the machine's lock, and any other build on the machine slows what it measures.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-$(mktemp -d /tmp/ocm-score-fresh-ci.XXXXXX)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -e "$dir/clone" ]; then
  echo "error: $dir/clone exists; give a new directory" >&2
  exit 2
fi
if [ "${OCM_SCORE_FRESH_PURGE:-0}" = 1 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq containerd runc containernetworking-plugins \
    prometheus >/dev/null 2>&1 || true
fi
git clone --quiet --no-local "$(pwd)" "$dir/clone"
echo "fresh CI of $(git rev-parse --short HEAD) in $dir; log: $dir/ci.log"
cd "$dir/clone"
started=$(date +%s)
status=0
env CI=true CARGO_HOME="$dir/cargo-home" GOPATH="$dir/gopath" XDG_CACHE_HOME="$dir/cache" \
  bash .ci/run </dev/null >"$dir/ci.log" 2>&1 || status=$?
echo "exit $status after $(( $(date +%s) - started )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E '^::: ' "$dir/ci.log" | grep -E ' took | total ' || true
grep -E '^ +Summary ' "$dir/ci.log" || true
exit "$status"
