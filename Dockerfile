# syntax=docker/dockerfile:1
# Both binaries (ocm-score-agent, ocm-score-hub) on the smallest root filesystem that runs them:
# the binaries, the C libraries they load, a passwd entry for the non-root user and a CA bundle,
# laid out by scripts/image-rootfs.sh, the same recipe `control-plane image` uses without a
# daemon (tests/control-plane/src/image.rs; a test keeps this file's last stage equal to that builder's config).
# The Deployments choose the binary with `command`.
#
#   docker build -t localhost/ocm-score:0.1.0 .     (the name the manifests and the chart use)
#   docker run --rm localhost/ocm-score:0.1.0 ocm-score-agent once --source host
#   docker buildx build --platform linux/amd64,linux/arm64 -t registry.example.com/ocm-score:0.1.0 --push .
#
# The build stage runs on the builder's platform and cross-compiles for the target's (rustup's
# target, Debian's cross toolchain), so no platform is emulated; natively it is a plain build.

FROM --platform=$BUILDPLATFORM rust:1.95-bookworm AS build
ARG TARGETARCH
WORKDIR /src
# /target: the rust target and Debian triple of TARGETARCH, and the cross toolchain when it is not
# the builder's own architecture.
RUN case "$TARGETARCH" in \
      amd64) echo "x86_64-unknown-linux-gnu x86_64-linux-gnu" >/target ;; \
      arm64) echo "aarch64-unknown-linux-gnu aarch64-linux-gnu" >/target ;; \
      *) echo "TARGETARCH=$TARGETARCH: the image is built for amd64 and arm64" >&2; exit 1 ;; \
    esac \
 && read -r rust triple </target \
 && if [ "${triple%%-*}" != "$(uname -m)" ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends "gcc-$(echo "$triple" | tr _ -)" "libc6-dev-$TARGETARCH-cross" \
      && rm -rf /var/lib/apt/lists/* \
      && rustup target add "$rust"; \
    fi
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=ocm-score-target-$TARGETARCH \
    read -r rust triple </target \
 && upper=$(echo "$rust" | tr a-z- A-Z_) && lower=$(echo "$rust" | tr - _) \
 && if [ "${triple%%-*}" != "$(uname -m)" ]; then \
      export "CARGO_TARGET_${upper}_LINKER=$triple-gcc" "CC_$lower=$triple-gcc" "AR_$lower=$triple-ar"; \
    fi \
 && cargo build --release --locked --target "$rust" -p ocm-score-agent -p ocm-score-hub \
 && bash scripts/image-rootfs.sh --target "$triple" /out/rootfs target/$rust/release/ocm-score-agent target/$rust/release/ocm-score-hub

FROM scratch
COPY --from=build /out/rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
# The non-root user of /etc/passwd; the manifests also require runAsNonRoot.
USER 65532:65532
CMD ["ocm-score-hub", "--help"]
