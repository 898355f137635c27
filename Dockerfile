# syntax=docker/dockerfile:1
# Both binaries (ocm-score-agent, ocm-score-hub), statically linked against musl, in a distroless
# image that runs as a non-root user. The Deployments choose the binary with `command`.
#
#   docker build -t localhost/ocm-score:0.1.0 .     (the name manifests/hub/kustomization.yaml uses)
#   docker run --rm localhost/ocm-score:0.1.0 ocm-score-agent once --source host

FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
# Build natively for the platform being built (buildx runs this stage per platform).
RUN case "$(uname -m)" in \
      aarch64) echo aarch64-unknown-linux-musl ;; \
      x86_64) echo x86_64-unknown-linux-musl ;; \
      *) echo "unsupported architecture $(uname -m)" >&2; exit 1 ;; \
    esac > /rust-target \
 && rustup target add "$(cat /rust-target)"
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(cat /rust-target)" \
 && cargo build --release --locked --target "$target" -p ocm-score-agent -p ocm-score-hub \
 && mkdir /out \
 && cp "target/$target/release/ocm-score-agent" "target/$target/release/ocm-score-hub" /out/

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ocm-score-agent /out/ocm-score-hub /usr/local/bin/
# The distroless "nonroot" user; the manifests also require runAsNonRoot.
USER 65532:65532
CMD ["ocm-score-hub", "--help"]
