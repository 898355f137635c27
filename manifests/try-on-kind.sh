#!/usr/bin/env bash
# Tries ocm-score on a real Open Cluster Management setup made of kind clusters: a hub and two
# managed clusters, the add-on installed on the hub, scores flowing back, example Placements
# choosing by them. Needs docker, kind, kubectl and clusteradm on PATH, and network access to
# pull the OCM images. Not run in CI.
#
#   manifests/try-on-kind.sh          # create everything and show the scores
#   manifests/try-on-kind.sh down     # delete the kind clusters
set -euo pipefail

HUB=ocm-score-hub
CLUSTERS=(cluster1 cluster2)
# The reference manifests/hub/kustomization.yaml ships; kind loads it into every node.
IMAGE=localhost/ocm-score:0.1.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

say() { printf '\n==> %s\n' "$*"; }

for tool in docker kind kubectl clusteradm; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not on PATH" >&2; exit 1; }
done

if [[ "${1:-}" == "down" ]]; then
  for name in "$HUB" "${CLUSTERS[@]}"; do kind delete cluster --name "$name"; done
  exit 0
fi

say "Creating kind clusters: $HUB ${CLUSTERS[*]}"
for name in "$HUB" "${CLUSTERS[@]}"; do
  kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --wait 120s
done

say "Installing the OCM hub (cluster-manager) on $HUB"
clusteradm init --wait --context "kind-$HUB"
join_command="$(clusteradm get token --context "kind-$HUB" | grep -o 'clusteradm join.*')"

for cluster in "${CLUSTERS[@]}"; do
  say "Joining $cluster"
  # The kind node reaches the hub through the docker network, not localhost.
  ${join_command/<cluster_name>/$cluster} --force-internal-endpoint-lookup --wait --context "kind-$cluster"
done
say "Accepting the managed clusters"
for attempt in $(seq 1 30); do
  clusteradm accept --clusters "$(IFS=,; echo "${CLUSTERS[*]}")" --context "kind-$HUB" && break
  sleep 5
done

say "Building $IMAGE (both binaries) and loading it into every cluster"
docker build -t "$IMAGE" "$ROOT"
for name in "$HUB" "${CLUSTERS[@]}"; do kind load docker-image "$IMAGE" --name "$name"; done

say "Installing ocm-score on the hub"
kubectl --context "kind-$HUB" apply -k "$ROOT/manifests/hub"
kubectl --context "kind-$HUB" -n ocm-score rollout status deployment/ocm-score-addon-manager --timeout=180s

say "Waiting for the add-on to be available on every cluster"
for cluster in "${CLUSTERS[@]}"; do
  kubectl --context "kind-$HUB" -n "$cluster" wait managedclusteraddon/resource-usage-collect \
    --for=condition=Available --timeout=300s
done

say "Scores published by the agents"
for cluster in "${CLUSTERS[@]}"; do
  for attempt in $(seq 1 60); do
    valid_until="$(kubectl --context "kind-$HUB" -n "$cluster" get addonplacementscore resource-usage-score \
      -o jsonpath='{.status.validUntil}' 2>/dev/null || true)"
    [[ -n "$valid_until" ]] && break
    sleep 3
  done
  kubectl --context "kind-$HUB" -n "$cluster" get addonplacementscore resource-usage-score \
    -o jsonpath='{.metadata.namespace}{": validUntil "}{.status.validUntil}{"\n"}{range .status.scores[*]}{"  "}{.name}{"="}{.value}{"\n"}{end}'
done

say "Example Placements choosing by those scores"
kubectl --context "kind-$HUB" apply -k "$ROOT/manifests/examples"
sleep 10
kubectl --context "kind-$HUB" -n ocm-score-examples get placementdecisions \
  -o custom-columns='PLACEMENT:.metadata.labels.cluster\.open-cluster-management\.io/placement,CLUSTERS:.status.decisions[*].clusterName'

say "Done. Try changing a variable in the AddOnDeploymentConfig and watch the agents roll:"
echo "  kubectl --context kind-$HUB -n ocm-score edit addondeploymentconfig resource-usage-collect"
echo "Remove everything with: $0 down"
