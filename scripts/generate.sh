#!/usr/bin/env bash
# Regenerates every generated file in the repository, in dependency order, and lists what changed:
#   1. the CRDs of our kinds from their Rust types (api/src/crd/), into charts/ocm-score/crds/;
#   2. the manifests rendered from the chart (manifests/), which ship those CRDs.
# The same tests, run without the variables, fail when a committed file differs from its source.
#   bash scripts/generate.sh
# Step 2 renders with the helm the control plane builds (tests/go-build/), so a first run builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
UPDATE_CRDS=1 cargo test --locked -q -p ocm-score-api --test crds
UPDATE_MANIFESTS=1 cargo test --locked -q -p ocm-score-tests --test chart
git status --short -- charts manifests
