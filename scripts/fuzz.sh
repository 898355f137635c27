#!/usr/bin/env bash
# Fuzzing campaigns: every cargo-fuzz target (fuzz/README.md) for SECONDS each, from its committed
# seeds (fuzz/seeds/<target>) into a scratch corpus, so the checkout stays clean. The tests replay the
# seeds on stable Rust (tests/tests/fuzz_seeds.rs); this is the search for new inputs, run by hand or
# from scripts/test.sh with OCM_SCORE_FUZZ_SECONDS=N.
#
#   bash scripts/fuzz.sh [SECONDS]      # default 30 s per target
#
# What it may install (only when missing): nightly Rust (rustup) and cargo-fuzz (cargo install).
# Fails on a crash, a panic or an input running over 10 s (the input is kept in
# fuzz/artifacts/<target>/ to reproduce it), and unless every [[bin]] target of fuzz/Cargo.toml ran.
# Each step prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# One-shot builds gain nothing from incremental compilation, whose caches take gigabytes of disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

seconds=${1:-30}
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: SECONDS must be a whole number from 1, got '$seconds'" >&2
  exit 2
fi

# The targets need nightly Rust (libFuzzer's instrumentation) and cargo-fuzz.
install_fuzz() {
  if ! cargo +nightly --version >/dev/null 2>&1; then
    if ! command -v rustup >/dev/null 2>&1; then
      echo "error: the fuzz targets need nightly Rust, and rustup is not installed to get it;" >&2
      echo "       install rustup (https://rustup.rs)" >&2
      exit 1
    fi
    echo "nightly Rust is missing (cargo fuzz needs it): installing it with rustup"
    rustup toolchain install nightly --profile minimal
  fi
  cargo +nightly --version
  if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
  fi
  cargo fuzz --version
}

# The [[bin]] names of fuzz/Cargo.toml, sorted: the targets that must run.
declared_targets() {
  awk '/^\[/ { in_bin = ($0 == "[[bin]]") }
       in_bin && /^name *=/ { sub(/^name *= *"/, ""); sub(/".*$/, ""); print }' fuzz/Cargo.toml | sort
}

# What cargo-fuzz will run must be what fuzz/Cargo.toml declares: a failing or empty `cargo fuzz
# list` would otherwise run nothing and pass. Checked before the build, which takes minutes.
check_targets() {
  local declared listed
  declared=$(declared_targets)
  if [ -z "$declared" ]; then
    echo "error: no [[bin]] targets in fuzz/Cargo.toml" >&2
    return 1
  fi
  if ! listed=$(cargo +nightly fuzz list); then
    echo "error: cargo fuzz list failed" >&2
    return 1
  fi
  listed=$(printf '%s\n' "$listed" | sed '/^$/d' | sort)
  if [ -z "$listed" ]; then
    echo "error: cargo fuzz list printed no targets" >&2
    return 1
  fi
  if [ "$listed" != "$declared" ]; then
    echo "error: cargo fuzz list and fuzz/Cargo.toml's [[bin]] targets differ:" >&2
    diff <(echo "$declared") <(echo "$listed") | sed 's/^</  only in fuzz\/Cargo.toml:/; s/^>/  only in cargo fuzz list:/' | grep '^  ' >&2 || true
    return 1
  fi
  echo "$(echo "$declared" | wc -l) targets:" $declared
}

# Rust is memory safe here (unsafe_code is forbidden), so no sanitizer: panics, overflow checks
# (--debug-assertions) and timeouts are what the targets look for, at several times ASan's speed.
build_fuzz() {
  cargo +nightly fuzz build --sanitizer none --debug-assertions
}

# Each declared target for $seconds. A target counts as run when libFuzzer reports executions.
run_fuzz() {
  local target scratch log executed ran=() failed=()
  for target in $(declared_targets); do
    scratch=$(mktemp -d)
    log=$(mktemp)
    echo "::: fuzz ${target} for ${seconds} s"
    if cargo +nightly fuzz run --sanitizer none --debug-assertions "$target" "$scratch" "fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
      grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
      executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
      if [ "${executed:-0}" -gt 0 ]; then
        ran+=("$target")
      else
        tail -n 40 "$log"
        echo "error: ${target} reported no executions" >&2
        failed+=("$target")
      fi
    else
      tail -n 40 "$log"
      failed+=("$target")
    fi
    rm -rf "$scratch" "$log"
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "error: fuzz targets failed: ${failed[*]} (inputs in fuzz/artifacts/; see fuzz/README.md)" >&2
    return 1
  fi
  if [ "$(printf '%s\n' "${ran[@]}" | sort)" != "$(declared_targets)" ]; then
    echo "error: targets run (${ran[*]}) are not fuzz/Cargo.toml's ($(declared_targets | tr '\n' ' '))" >&2
    return 1
  fi
  echo "all ${#ran[@]} targets ran for ${seconds} s each"
}

started=$(date +%s)
step "install nightly Rust and cargo-fuzz" install_fuzz
step "check the fuzz targets" check_targets
step "build the fuzz targets" build_fuzz
step "fuzz targets, ${seconds} s each" run_fuzz
echo "::: total $(( $(date +%s) - started )) s"
