#!/usr/bin/env bash
# The root filesystem of the ocm-score image, in one recipe for both ways of building it: the
# Dockerfile runs it in its build stage, and `control-plane image` (tests/control-plane/src/image.rs) runs it on
# this machine. What it lays out in OUT:
#   usr/local/bin/<binary>     each BINARY, debug info stripped
#   the shared libraries the binaries load (as `ldd` resolves them), at the same paths
#   etc/passwd, etc/group      root and the non-root user 65532 ("nonroot") the image runs as
#   etc/ssl/certs/ca-certificates.crt   the build machine's CA bundle, when it has one
#   tmp                        world-writable with the sticky bit
#
#   bash scripts/image-rootfs.sh OUT BINARY...
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OUT BINARY..." >&2
  exit 2
fi
out=$1
shift
mkdir -p "$out/usr/local/bin" "$out/etc/ssl/certs" "$out/tmp"
chmod 1777 "$out/tmp"
for binary in "$@"; do
  name=$(basename "$binary")
  cp "$binary" "$out/usr/local/bin/$name"
  chmod 0755 "$out/usr/local/bin/$name"
  # Line tables help a debugger, not a pod: they triple the image.
  strip --strip-debug "$out/usr/local/bin/$name"
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
