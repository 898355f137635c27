#!/usr/bin/env bash
# The multi-arch image, end to end on an amd64 machine with no arm64 hardware and no container
# daemon (docs/testing.md):
#   1. installs what is missing: Debian's gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user
#      (and python3-yaml for the checks), rustup's aarch64-unknown-linux-gnu target;
#   2. cross-compiles ocm-score-agent and ocm-score-hub for aarch64 (release);
#   3. runs the arm64 agent under qemu-user, `once --source host`, and checks that it prints an
#      AddOnPlacementScore whose scores are all within -100..100;
#   4. builds the two-platform archive with `control-plane image --platforms linux/amd64,linux/arm64`
#      and checks it: an image index of both platforms, digests and sizes that match the blobs;
#      each platform's layer runs its agent with only the layer's own loader and libraries (the
#      arm64 one under qemu-user again);
#   5. imports each platform into a throwaway containerd (its own root, state and socket in a temp
#      dir) with `ctr images import --platform`, and checks that the root filesystem containerd
#      unpacks for it holds that platform's agent, when containerd is installed and this is root.
# It prints each step's time. It compiles the workspace in release for both architectures (the
# first run is long on a small machine); it reuses CARGO_TARGET_DIR (default target/).
#
#   bash scripts/multiarch-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target_dir=${CARGO_TARGET_DIR:-$root/target}
rust_target=aarch64-unknown-linux-gnu
triple=aarch64-linux-gnu
sysroot=/usr/$triple
work=$(mktemp -d "${TMPDIR:-/tmp}/ocm-score-multiarch.XXXXXX")
containerd_pid=
cleanup() {
  if [ -n "$containerd_pid" ]; then
    kill "$containerd_pid" 2>/dev/null || true
    wait "$containerd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

started=$(date +%s)
step_started=$started
step() {
  local now
  now=$(date +%s)
  if [ -n "${step_name:-}" ]; then
    echo "== $step_name: $((now - step_started)) s"
  fi
  step_name=$1
  step_started=$now
  echo "== $step_name"
}

step "install what is missing"
packages=()
command -v "$triple-gcc" >/dev/null || packages+=("gcc-$triple")
[ -e "$sysroot/lib/libc.so.6" ] || packages+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || packages+=(qemu-user)
command -v file >/dev/null || packages+=(file)
python3 -c 'import yaml' 2>/dev/null || packages+=(python3-yaml)
if [ ${#packages[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi
if ! rustup target list --installed | grep -qx "$rust_target"; then
  rustup target add "$rust_target"
fi

step "cross-compile for $rust_target"
# What `control-plane image` runs for a foreign platform (tests/control-plane/src/image.rs,
# cross_binaries), so that its build in step 4 finds this one up to date.
# A linker or compiler already named in the environment is kept, as there.
upper=$(echo "$rust_target" | tr a-z- A-Z_)
lower=$(echo "$rust_target" | tr - _)
for pair in "CARGO_TARGET_${upper}_LINKER=$triple-gcc" "CC_$lower=$triple-gcc" "AR_$lower=$triple-ar"; do
  var=${pair%%=*}
  export "$var=${!var:-${pair#*=}}"
done
cargo build --release --locked --workspace --target "$rust_target" \
  --bin ocm-score-agent --bin ocm-score-hub --target-dir "$target_dir"
agent=$target_dir/$rust_target/release/ocm-score-agent
file "$agent" | grep -q 'ARM aarch64' || {
  echo "$agent is not an aarch64 binary: $(file "$agent")" >&2
  exit 1
}

# Checks that `once` printed one AddOnPlacementScore whose scores are all within -100..100.
check_score() {
  python3 -c '
import sys, yaml
text = open(sys.argv[1]).read()
obj = yaml.safe_load(text)
if not isinstance(obj, dict) or obj.get("kind") != "AddOnPlacementScore":
    sys.exit("not an AddOnPlacementScore:\n" + text)
scores = (obj.get("status") or {}).get("scores") or []
if not scores:
    sys.exit("no scores:\n" + text)
bad = [s for s in scores if not isinstance(s.get("value"), int) or not -100 <= s["value"] <= 100]
if bad:
    sys.exit("scores outside -100..100: %r" % bad)
if not (obj.get("status") or {}).get("validUntil"):
    sys.exit("no validUntil:\n" + text)
print("  " + ", ".join("%s=%d" % (s["name"], s["value"]) for s in scores))
' "$1"
}

step "run the arm64 agent under qemu-aarch64"
qemu-aarch64 -L "$sysroot" "$agent" once --source host >"$work/once-arm64.yaml"
check_score "$work/once-arm64.yaml"

step "build the two-platform archive"
archive=$work/ocm-score-multiarch.tar
cargo run --release --locked --target-dir "$target_dir" -p ocm-score-control-plane --bin control-plane -- \
  image --platforms linux/amd64,linux/arm64 --out "$archive"

step "check the archive"
mkdir -p "$work/archive"
tar -xf "$archive" -C "$work/archive"
# Prints "<architecture> <layer blob>" per platform after checking the index against the blobs.
python3 - "$work/archive" >"$work/layers" <<'EOF'
import hashlib, json, os, sys
root = sys.argv[1]
def blob(descriptor):
    digest = descriptor["digest"]
    path = os.path.join(root, "blobs", "sha256", digest.split(":", 1)[1])
    data = open(path, "rb").read()
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest or len(data) != descriptor["size"]:
        sys.exit("%s: digest or size differs from its descriptor" % path)
    return data, path
index = json.load(open(os.path.join(root, "index.json")))
top = index["manifests"]
if len(top) != 1 or top[0]["mediaType"] != "application/vnd.oci.image.index.v1+json":
    sys.exit("index.json does not name one image index: %r" % index)
platforms = json.loads(blob(top[0])[0])["manifests"]
found = [(m["platform"]["os"], m["platform"]["architecture"]) for m in platforms]
if found != [("linux", "amd64"), ("linux", "arm64")]:
    sys.exit("platforms %r" % found)
for m in platforms:
    manifest = json.loads(blob(m)[0])
    config = json.loads(blob(manifest["config"])[0])
    if (config["os"], config["architecture"]) != (m["platform"]["os"], m["platform"]["architecture"]):
        sys.exit("config of %r says %s/%s" % (m["platform"], config["os"], config["architecture"]))
    print(config["architecture"], blob(manifest["layers"][0])[1])
EOF
while read -r arch layer; do
  mkdir -p "$work/rootfs-$arch"
  tar -xf "$layer" -C "$work/rootfs-$arch"
  bin=$work/rootfs-$arch/usr/local/bin/ocm-score-agent
  echo "  linux/$arch: $(file -b "$bin" | cut -d, -f1-2)"
  case $arch in
    # The layer's loader and libraries only: the loader is told where the layer keeps them.
    amd64) "$work/rootfs-amd64/lib64/ld-linux-x86-64.so.2" --inhibit-cache \
      --library-path "$work/rootfs-amd64/lib/x86_64-linux-gnu" "$bin" once --source host >"$work/once-$arch.yaml" ;;
    # qemu's -L makes the layer the root the loader and its libraries are found under.
    arm64) qemu-aarch64 -L "$work/rootfs-arm64" "$bin" once --source host >"$work/once-$arch.yaml" ;;
  esac
  check_score "$work/once-$arch.yaml"
done <"$work/layers"

step "import each platform into a throwaway containerd"
if command -v containerd >/dev/null && command -v ctr >/dev/null && [ "$(id -u)" = 0 ]; then
  sock=$work/containerd/containerd.sock
  mkdir -p "$work/containerd"
  cat >"$work/containerd/config.toml" <<EOF
version = 2
root = "$work/containerd/root"
state = "$work/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$work/containerd/opt"
EOF
  containerd --config "$work/containerd/config.toml" >"$work/containerd/log" 2>&1 &
  containerd_pid=$!
  for _ in $(seq 50); do
    ctr --address "$sock" version >/dev/null 2>&1 && break
    sleep 0.2
  done
  for platform in linux/arm64 linux/amd64; do
    arch=${platform#linux/}
    ctr=(ctr --address "$sock" -n "$arch")
    "${ctr[@]}" images import --platform "$platform" "$archive"
    "${ctr[@]}" images ls
    # containerd unpacked that platform's layer: the agent in the image's root filesystem is its.
    reference=$("${ctr[@]}" images ls -q | head -1)
    mkdir -p "$work/mnt-$arch"
    "${ctr[@]}" images mount --platform "$platform" "$reference" "$work/mnt-$arch" >/dev/null
    described=$(file -b "$work/mnt-$arch/usr/local/bin/ocm-score-agent")
    "${ctr[@]}" images unmount "$work/mnt-$arch" >/dev/null
    echo "  $platform in containerd: $(echo "$described" | cut -d, -f1-2)"
    case $arch in
      amd64) echo "$described" | grep -q x86-64 ;;
      arm64) echo "$described" | grep -q aarch64 ;;
    esac
  done
else
  echo "  skipped: needs root and containerd (Debian containerd)"
fi

step "done"
echo "== total: $(($(date +%s) - started)) s"
