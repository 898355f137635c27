//! Reserved capacity for plain OCM Placements: the `ocm-score-reserved` AddOnPlacementScore.
//!
//! TieredPlacements see `fits` minus the ledger's reservations; a plain Placement sees only what the
//! agents report, and could take room a TieredPlacement was just given. The hub therefore publishes,
//! on each cluster with reservations in flight, the score `ocm-score-reserved` with `fits.<shape>`
//! = −(reserved replicas of that shape / the shape's scale), rounded away from zero. A Placement that
//! gives `resource-usage-score/fits.<shape>` and `ocm-score-reserved/fits.<shape>` the same weight
//! gets their sum from OCM: the reported capacity minus what is promised. OCM scores a missing score
//! as 0, which is exactly right for the clusters without reservations, so nothing is written there
//! (docs/design/workload-failover.md §7: a mirror of every `fits` score would be rewritten
//! for every cluster at every report).
//!
//! The sum is the exact effective score or one point below it (each term rounds toward less
//! capacity), except where a term is clamped: more than `200 × scale` replicas reported (the sum is
//! lower) or more than `100 × scale` reserved (the deduction stops at −100, so the sum is higher).

use super::{Ledger, ShapeCatalog};
use crate::instant::time;
use ocm_score_api::Time;
use ocm_score_api::crd::workload_shape::fits_score_name;
use std::collections::BTreeMap;

/// The AddOnPlacementScore the hub writes in a cluster's namespace.
pub const RESOURCE_NAME: &str = "ocm-score-reserved";

/// What one cluster's `ocm-score-reserved` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deduction {
    /// `fits.<shape>` → −1..=−100, for each shape some reservation takes replicas of.
    pub scores: BTreeMap<String, i32>,
    /// The last TTL among the cluster's reservations in flight: if the hub stops, OCM stops
    /// counting them when the ledger would have.
    pub valid_until: Time,
}

/// The deduction of every cluster with reservations in flight at `now`, by cluster. Every shape of
/// `shapes` is deducted (a reservation of another shape counts as the ledger converts it), and so
/// is each reserved shape the catalog does not know (one for one).
pub fn deductions(ledger: &Ledger, shapes: &ShapeCatalog, now: i128) -> BTreeMap<String, Deduction> {
    let mut valid_until: BTreeMap<&str, i128> = BTreeMap::new();
    let mut reserved_shapes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (cluster, _, entry) in ledger.entries().filter(|(_, _, e)| e.in_flight(now)) {
        let until = valid_until.entry(cluster).or_insert(entry.expires_at);
        *until = (*until).max(entry.expires_at);
        reserved_shapes.entry(cluster).or_default().push(&entry.shape);
    }
    // A view that is no placement's own sees every reservation.
    let everything = ledger.view("", shapes, now);
    let mut out = BTreeMap::new();
    for (cluster, until) in valid_until {
        let mut names: Vec<&str> = shapes.names().collect();
        names.extend(reserved_shapes.get(cluster).into_iter().flatten().copied());
        names.sort_unstable();
        names.dedup();
        let scores: BTreeMap<String, i32> = names
            .into_iter()
            .filter_map(|shape| {
                let replicas = everything.reserved(cluster, shape);
                let score = score(replicas, shapes.scale(shape));
                (score < 0).then(|| (fits_score_name(shape), score))
            })
            .collect();
        if !scores.is_empty() {
            out.insert(
                cluster.to_string(),
                Deduction {
                    scores,
                    valid_until: time(until),
                },
            );
        }
    }
    out
}

/// −ceil(replicas / scale), at least −100 (the lowest score OCM takes).
fn score(replicas: u64, scale: i32) -> i32 {
    let scale = u64::try_from(scale.max(1)).unwrap_or(1);
    let points = replicas.div_ceil(scale).min(100);
    // At most 100, so the cast cannot truncate.
    -(points as i32)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::instant::SECOND;
    use crate::reservation::Timing;
    use ocm_score_api::WorkloadShape;
    use ocm_score_api::crd::workload_shape::{WorkloadShapeSpec, encode_fits};
    use std::time::Duration;

    fn shape(name: &str, gpus: &str, scale: i32) -> WorkloadShape {
        WorkloadShape::new(
            name,
            WorkloadShapeSpec {
                requests: BTreeMap::from([(
                    "nvidia.com/gpu".to_string(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(gpus.into()),
                )]),
                scale,
                ..Default::default()
            },
        )
    }

    fn ledger() -> Ledger {
        Ledger::new(Timing {
            ttl: Duration::from_secs(300),
            settle: Duration::from_secs(90),
        })
    }

    #[test]
    fn nothing_reserved_nothing_written() {
        let catalog = ShapeCatalog::new(&[shape("x1", "1", 1)]);
        assert!(deductions(&ledger(), &catalog, 0).is_empty());
    }

    #[test]
    fn each_shape_is_deducted_as_the_ledger_converts_it_until_the_last_ttl() {
        let catalog = ShapeCatalog::new(&[shape("x1", "1", 1), shape("x2", "2", 1), shape("tiny", "1", 4)]);
        let mut ledger = ledger();
        let footprint = |shape: &str, replicas| {
            Some(ocm_score_api::crd::tiered_placement::WorkloadFootprint {
                shape: shape.into(),
                replicas_per_cluster: replicas,
            })
        };
        ledger.assume("apps/a", footprint("x2", 3).as_ref(), &["c1".to_string()], 0);
        ledger.assume(
            "apps/b",
            footprint("x1", 2).as_ref(),
            &["c1".to_string()],
            60 * SECOND,
        );
        ledger.assume("apps/c", footprint("gone", 5).as_ref(), &["c2".to_string()], 0);
        let all = deductions(&ledger, &catalog, 61 * SECOND);
        let c1 = &all["c1"];
        // x2 ×3 is 6 of x1, plus b's 2; x1 ×2 is 1 of x2, plus a's 3; tiny (4 per point): 8 → 2.
        assert_eq!(
            c1.scores,
            BTreeMap::from([
                ("fits.x1".to_string(), -8),
                ("fits.x2".to_string(), -4),
                ("fits.tiny".to_string(), -2),
            ])
        );
        assert_eq!(c1.valid_until, time(360 * SECOND), "b's TTL, the later one");
        // A shape with no WorkloadShape counts one for one, against itself and every known shape.
        assert_eq!(all["c2"].scores["fits.gone"], -5);
        assert_eq!(all["c2"].scores["fits.x1"], -5);
        // a's and c's TTL passed: only b's reservation is left.
        let later = deductions(&ledger, &catalog, 300 * SECOND);
        assert_eq!(later.keys().collect::<Vec<_>>(), ["c1"]);
        assert_eq!(later["c1"].scores["fits.x1"], -2);
        assert!(deductions(&ledger, &catalog, 360 * SECOND).is_empty());
    }

    #[test]
    fn the_sum_with_the_report_is_the_effective_capacity_rounded_down() {
        for scale in [1, 3, 10] {
            for reported in [0u64, 1, 7, 35, 199] {
                for reserved in [1u64, 2, 9, 40, 100 * scale as u64] {
                    let sum = encode_fits(reported, scale) + score(reserved, scale);
                    let exact = encode_fits(reported.saturating_sub(reserved), scale);
                    assert!(
                        (exact - 1..=exact).contains(&sum) || (exact == -100 && sum <= -100),
                        "{reported} − {reserved} at scale {scale}: {sum}, exact {exact}"
                    );
                }
            }
        }
        // Beyond 100 points the deduction is clamped, as every score is: it then takes less.
        assert_eq!(score(1_000_000, 1), -100);
        assert_eq!(encode_fits(199, 1) + score(500, 1), -1);
    }
}
