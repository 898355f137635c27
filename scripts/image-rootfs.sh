#!/usr/bin/env bash
# The root filesystem of the ocm-score image, in one recipe for both ways of building it: the
# Dockerfile runs it in its build stage, and `control-plane image` (tests/control-plane/src/image.rs) runs it on
# this machine. What it lays out in OUT:
#   usr/local/bin/<binary>     each BINARY, debug info stripped
#   the shared libraries the binaries load, at the paths the loader finds them
#   etc/passwd, etc/group      root and the non-root user 65532 ("nonroot") the image runs as
#   etc/ssl/certs/ca-certificates.crt   the build machine's CA bundle, when it has one
#   tmp                        world-writable with the sticky bit
#
#   bash scripts/image-rootfs.sh [--target TRIPLE [--sysroot DIR]] OUT BINARY...
#
# --target names the Debian multiarch triple the binaries were built for (aarch64-linux-gnu,
# x86_64-linux-gnu). Without it, or with this machine's own, they are this machine's, and `ldd`
# says which libraries they load and where. Another triple means they were cross-compiled: `ldd`
# cannot run them, so their ELF headers name the libraries (`readelf`), which come from the cross
# toolchain's sysroot (default /usr/TRIPLE, Debian's libc6-<arch>-cross) and go where that
# architecture's Debian keeps them: the loader at the path the binary asks for, the rest in
# /lib/TRIPLE. TRIPLE-strip strips them.
set -euo pipefail
usage() {
  echo "usage: $0 [--target TRIPLE [--sysroot DIR]] OUT BINARY..." >&2
  exit 2
}
target=
sysroot=
while [ $# -gt 0 ]; do
  case $1 in
    --target) [ $# -ge 2 ] || usage; target=$2; shift 2 ;;
    --sysroot) [ $# -ge 2 ] || usage; sysroot=$2; shift 2 ;;
    --*) usage ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ] || { [ -n "$sysroot" ] && [ -z "$target" ]; }; then
  usage
fi
if [ "${target%%-*}" = "$(uname -m)" ] && [ -z "$sysroot" ]; then
  target=
fi
strip=strip
if [ -n "$target" ]; then
  sysroot=${sysroot:-/usr/$target}
  strip=$target-strip
  for tool in "$strip" readelf; do
    if ! command -v "$tool" >/dev/null; then
      echo "$0: $tool is missing (Debian: binutils-$target, binutils)" >&2
      exit 1
    fi
  done
  if [ ! -d "$sysroot/lib" ]; then
    echo "$0: no $sysroot/lib (Debian: libc6-dev-${target%%-*}-cross, or name it with --sysroot)" >&2
    exit 1
  fi
fi
out=$1
shift
mkdir -p "$out/usr/local/bin" "$out/etc/ssl/certs" "$out/tmp"
chmod 1777 "$out/tmp"

# Copies a cross-compiled ELF file's libraries (its DT_NEEDED entries, and theirs) from the sysroot.
copy_needed() {
  local file=$1 lib
  for lib in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    # libc names the loader too; it is already at the path the binary asks for.
    if [ "$lib" = "$(basename "$interpreter")" ] || [ -e "$out/lib/$target/$lib" ]; then
      continue
    fi
    if [ ! -e "$sysroot/lib/$lib" ]; then
      echo "$0: $file needs $lib, which is not in $sysroot/lib" >&2
      exit 1
    fi
    mkdir -p "$out/lib/$target"
    cp -L "$sysroot/lib/$lib" "$out/lib/$target/$lib"
    copy_needed "$sysroot/lib/$lib"
  done
}

for binary in "$@"; do
  name=$(basename "$binary")
  cp "$binary" "$out/usr/local/bin/$name"
  chmod 0755 "$out/usr/local/bin/$name"
  # Line tables help a debugger, not a pod: they triple the image.
  "$strip" --strip-debug "$out/usr/local/bin/$name"
  if [ -n "$target" ]; then
    interpreter=$(readelf -l "$binary" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
    if [ -n "$interpreter" ]; then
      mkdir -p "$out$(dirname "$interpreter")"
      cp -L "$sysroot/lib/$(basename "$interpreter")" "$out$interpreter"
      copy_needed "$binary"
    fi
    continue
  fi
  # `ldd` prints "name => /path (addr)" for libraries and "/path (addr)" for the loader; a static
  # binary prints "not a dynamic executable" (and fails), which leaves nothing to copy.
  for lib in $(ldd "$binary" 2>/dev/null | sed -n 's#.*=> \(/[^ ]*\) .*#\1#p; s#^[[:space:]]*\(/[^ ]*\) .*#\1#p'); do
    mkdir -p "$out$(dirname "$lib")"
    cp -L "$lib" "$out$lib"
  done
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$out/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/etc/group"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
fi
