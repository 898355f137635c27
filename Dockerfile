# syntax=docker/dockerfile:1
# Both binaries (ocm-score-agent, ocm-score-hub) on the smallest root filesystem that runs them:
# the binaries, the C libraries they load, a passwd entry for the non-root user and a CA bundle,
# laid out by scripts/image-rootfs.sh, the same recipe `control-plane image` uses without a
# daemon (tests/src/image.rs; a test keeps this file's last stage equal to that builder's config).
# The Deployments choose the binary with `command`.
#
#   docker build -t localhost/ocm-score:0.1.0 .     (the name the manifests and the chart use)
#   docker run --rm localhost/ocm-score:0.1.0 ocm-score-agent once --source host

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ocm-score-agent -p ocm-score-hub \
 && bash scripts/image-rootfs.sh /out/rootfs target/release/ocm-score-agent target/release/ocm-score-hub

FROM scratch
COPY --from=build /out/rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
# The non-root user of /etc/passwd; the manifests also require runAsNonRoot.
USER 65532:65532
CMD ["ocm-score-hub", "--help"]
