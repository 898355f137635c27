# Shell functions shared by scripts/test.sh, scripts/stressed-runs.sh and .ci/run (sourced, not run).

# Runs a command under a name, and says how long it took.
step() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "::: ${name}"
  "$@"
  echo "::: ${name} took $(( $(date +%s) - t0 )) s"
}

# Runs a command as root: as it is when we are root, else through sudo.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs Debian packages. The package lists are read anew only when the ones at hand do not serve
# (a fresh machine has none), which saves the update on a machine that has them.
apt_install() {
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@")
  as_root "${apt[@]}" >/dev/null 2>&1 || { as_root apt-get update -qq && as_root "${apt[@]}" >/dev/null; }
}
