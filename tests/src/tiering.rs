//! The TieredPlacement controller's end-to-end harness, shared by the test against the API server
//! double (`hub-controller/tests/tiering_e2e.rs`, with a `scheduler-core` stand-in for OCM's
//! placement controller) and the one on the real control plane
//! (`tests/tests/control_plane_tiering.rs`, with OCM's own): `ocm-score-hub tiering` as a process,
//! and waits on what it and the placement controller wrote, read through the API like a user's
//! `kubectl get` would.

use jiff::Timestamp;
use kube::api::{Api, ListParams};
use ocm_score_api::crd::tiered_placement::{TieredPlacement, Transition, TransitionKind};
use ocm_score_api::{Placement, PlacementDecision};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;
use tokio::process::Command;

use crate::support::{ModeProcess, eventually};

/// The label OCM puts on a placement's decisions.
const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";

/// A set of cluster names.
pub fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// The TieredPlacements of one namespace, their children and the children's decisions.
#[derive(Clone)]
pub struct TieringView {
    pub client: kube::Client,
    pub namespace: String,
}

impl TieringView {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        TieringView {
            client,
            namespace: namespace.to_owned(),
        }
    }

    pub async fn tiered(&self, name: &str) -> Option<TieredPlacement> {
        Api::<TieredPlacement>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(name)
            .await
            .ok()
            .flatten()
    }

    /// The child Placement (the TieredPlacement's name unless `placementName` says otherwise).
    pub async fn child(&self, name: &str) -> Option<Placement> {
        Api::<Placement>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(name)
            .await
            .ok()
            .flatten()
    }

    /// The clusters in a placement's decisions, found by label as consumers find them.
    pub async fn decisions(&self, placement: &str) -> Option<BTreeSet<String>> {
        let list = Api::<PlacementDecision>::namespaced(self.client.clone(), &self.namespace)
            .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={placement}")))
            .await
            .ok()?;
        Some(
            list.items
                .iter()
                .filter_map(|d| d.status.as_ref())
                .flat_map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()))
                .collect(),
        )
    }

    /// Condition `type_` of the TieredPlacement: (status, reason).
    pub async fn condition(&self, name: &str, type_: &str) -> Option<(String, String)> {
        condition(&self.tiered(name).await?, type_)
    }

    /// Waits until the controller has planned the TieredPlacement's current generation and
    /// mirrored the child's, the active tiers are `active`, OCM's decisions are `clusters`, and
    /// they equal the plan's prediction with `PlanDiverged=False`.
    pub async fn settled(
        &self,
        name: &str,
        active: &[&str],
        clusters: &[&str],
        timeout: Duration,
        context: impl Fn() -> String,
    ) -> TieredPlacement {
        let want = set(clusters);
        self.agreed(
            name,
            &format!("active {active:?} with decisions {clusters:?}"),
            |tp, decided| tp.status.as_ref().is_some_and(|s| s.active_tiers == active) && *decided == want,
            timeout,
            context,
        )
        .await
    }

    /// Waits until the controller has planned the current generation and mirrored the child's,
    /// OCM's decisions equal the plan's prediction with `PlanDiverged=False`, and `check` holds
    /// for the TieredPlacement and those decisions. Returns the TieredPlacement.
    pub async fn agreed(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&TieredPlacement, &BTreeSet<String>) -> bool,
        timeout: Duration,
        context: impl Fn() -> String,
    ) -> TieredPlacement {
        let last = Mutex::new(String::new());
        let check = &check;
        let last_ref = &last;
        eventually(
            &format!(
                "{}/{name}: {what}, equal to the prediction, PlanDiverged=False",
                self.namespace
            ),
            timeout,
            || {
                let last = last_ref.lock().map(|l| l.clone()).unwrap_or_default();
                format!("last seen:\n{last}\n{}", context())
            },
            || async move {
                let tp = self.tiered(name).await?;
                let child = self.child(tp.spec.child_name(name)).await;
                let decided = self.decisions(tp.spec.child_name(name)).await?;
                if let Ok(mut last) = last_ref.lock() {
                    *last = format!(
                        "generation {:?}, child generation {:?}, OCM's decisions {decided:?}\n{:#?}",
                        tp.metadata.generation,
                        child.as_ref().and_then(|c| c.metadata.generation),
                        tp.status
                    );
                }
                let status = tp.status.as_ref()?;
                let mirror = status.placement.as_ref()?;
                let predicted: BTreeSet<String> = mirror.predicted.iter().cloned().collect();
                let agrees = status.observed_generation == tp.metadata.generation
                    && mirror.observed_generation == child?.metadata.generation
                    && mirror.number_of_selected_clusters == i32::try_from(decided.len()).ok()
                    && predicted == decided
                    && condition(&tp, "PlanDiverged") == Some(("False".into(), "OCMAgrees".into()))
                    && check(&tp, &decided);
                agrees.then_some(tp)
            },
        )
        .await
    }

    /// Waits for a transition of `kind` at or after `after`; returns it.
    pub async fn transition(
        &self,
        name: &str,
        kind: TransitionKind,
        after: Timestamp,
        timeout: Duration,
        context: impl Fn() -> String,
    ) -> Transition {
        eventually(
            &format!("{}/{name}: a {kind:?} transition", self.namespace),
            timeout,
            context,
            || async move {
                self.tiered(name)
                    .await?
                    .status?
                    .transitions
                    .into_iter()
                    .find(|t| t.kind == kind && t.time.0 >= after)
            },
        )
        .await
    }

    /// Waits for `FailbackPending=True` with one of `reasons` and a pending failback; returns
    /// its `eligibleAt` (none while a Manual failback awaits its trigger).
    pub async fn failback_pending(
        &self,
        name: &str,
        reasons: &[&str],
        timeout: Duration,
        context: impl Fn() -> String,
    ) -> Option<Timestamp> {
        eventually(
            &format!("{}/{name}: FailbackPending=True ({reasons:?})", self.namespace),
            timeout,
            context,
            || async move {
                let tp = self.tiered(name).await?;
                let pending = tp.status.as_ref()?.failback.as_ref()?.pending.as_ref()?;
                let (status, reason) = condition(&tp, "FailbackPending")?;
                (status == "True" && reasons.contains(&reason.as_str()))
                    .then(|| pending.eligible_at.as_ref().map(|t| t.0))
            },
        )
        .await
    }
}

impl TieringView {
    /// Waits for the Failback transition at or after `after`, noting every `eligibleAt` the
    /// status shows meanwhile: after a restart during the hold-down, the new process must keep
    /// the old one's. Returns the transition and the `eligibleAt`s seen.
    pub async fn failback_keeping_eligible_at(
        &self,
        name: &str,
        after: Timestamp,
        timeout: Duration,
        context: impl Fn() -> String,
    ) -> (Transition, BTreeSet<Timestamp>) {
        let seen = Mutex::new(BTreeSet::new());
        let seen_ref = &seen;
        let failback = eventually(
            &format!("{}/{name}: the failback", self.namespace),
            timeout,
            context,
            || async move {
                let status = self.tiered(name).await?.status?;
                if let Some(at) = status
                    .failback
                    .as_ref()
                    .and_then(|f| f.pending.as_ref())
                    .and_then(|p| p.eligible_at.as_ref())
                {
                    seen_ref.lock().expect("lock").insert(at.0);
                }
                status
                    .transitions
                    .into_iter()
                    .find(|t| t.kind == TransitionKind::Failback && t.time.0 >= after)
            },
        )
        .await;
        (failback, seen.into_inner().expect("lock"))
    }
}

/// The Contract transitions at or after `after`, oldest first, checked to be `count` swaps of
/// one cluster each, at least `min_dwell` apart (consolidation at `maxClustersPerStep: 1`).
pub fn single_cluster_swaps(
    tp: &TieredPlacement,
    after: Timestamp,
    count: usize,
    min_dwell: jiff::SignedDuration,
) -> Vec<Transition> {
    let transitions = tp
        .status
        .as_ref()
        .map(|s| s.transitions.clone())
        .unwrap_or_default();
    let mut swaps: Vec<Transition> = transitions
        .iter()
        .filter(|t| t.kind == TransitionKind::Contract && t.time.0 >= after)
        .cloned()
        .collect();
    swaps.reverse();
    assert_eq!(swaps.len(), count, "{count} single swaps: {transitions:#?}");
    for swap in &swaps {
        assert_eq!(
            swap.message.matches("->").count(),
            1,
            "one cluster per step: {}",
            swap.message
        );
    }
    for pair in swaps.windows(2) {
        assert!(
            pair[1].time.0 >= pair[0].time.0 + min_dwell,
            "a swap waits minDwell ({min_dwell}) after the one before: {swaps:#?}"
        );
    }
    swaps
}

/// Asserts that the child pins its clusters by name (a CEL predicate), as the planner renders it
/// whenever capacity rules or overflow decide which clusters qualify.
pub fn assert_pinned(child: &Placement) {
    let predicates = serde_json::to_string(&child.spec.predicates).expect("JSON");
    assert!(
        predicates.contains("managedCluster.metadata.name in"),
        "the child is not pinned: {predicates}"
    );
}

/// Condition `type_` of a TieredPlacement: (status, reason).
pub fn condition(tp: &TieredPlacement, type_: &str) -> Option<(String, String)> {
    tp.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// `t` plus whole `seconds`, truncated to the second (`metav1.Time` keeps whole seconds).
pub fn whole_seconds_after(t: Timestamp, seconds: i64) -> Timestamp {
    Timestamp::from_second(t.as_second() + seconds).unwrap_or(t)
}

// ---------------------------------------------------------------------------------------------
// The controller process

/// The hub side of the controller: its CRD and RBAC from `manifests/hub`, as a user applies them.
pub fn install_tiering(kubeconfig: &Path) {
    let run = |args: &[&str]| {
        ocm_score_control_plane::addon::kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
    };
    run(&["apply", "-k", "manifests/hub/crds"]);
    run(&[
        "wait",
        "--for=condition=Established",
        "--timeout=120s",
        "crd/tieredplacements.tiering.ocm-score.io",
    ]);
    run(&[
        "apply",
        "-f",
        "manifests/hub/namespace.yaml",
        "-f",
        "manifests/hub/tiering-service-account.yaml",
        "-f",
        "manifests/hub/tiering-cluster-role.yaml",
        "-f",
        "manifests/hub/tiering-leader-election-rbac.yaml",
    ]);
}

/// `ocm-score-hub tiering` as a process.
pub type ControllerProcess = ModeProcess;

impl ModeProcess {
    /// Starts `program tiering` against the hub of `kubeconfig`, leader-elected in `ocm-score`
    /// as `identity`, with `divergence_grace`. The Lease is far longer than any stall of a loaded
    /// machine, with short retries. `TIERING_E2E_RUST_LOG` overrides the log filter.
    pub fn tiering(
        program: &Path,
        kubeconfig: &Path,
        identity: &str,
        divergence_grace: Duration,
        flags: &[&str],
    ) -> ControllerProcess {
        let mut command = Command::new(program);
        command
            .arg("tiering")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-election-namespace=ocm-score")
            .arg(format!("--leader-election-identity={identity}"))
            .arg("--leader-election-lease-duration=60s")
            .arg("--leader-election-renew-deadline=40s")
            .arg("--leader-election-retry-period=300ms")
            .arg(format!(
                "--divergence-grace={}s",
                divergence_grace.as_secs().max(1)
            ))
            .args(flags)
            .env(
                "RUST_LOG",
                std::env::var("TIERING_E2E_RUST_LOG").unwrap_or_else(|_| "info,ocm_score_hub=debug".into()),
            )
            .env("NO_COLOR", "1");
        // The Lease renewals would drown everything else at debug level.
        ModeProcess::spawn("ocm-score-hub tiering", command, |line| {
            line.contains("/leases") && line.contains("DEBUG")
        })
    }
}
