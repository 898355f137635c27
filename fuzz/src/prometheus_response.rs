//! Answers of the Prometheus / Thanos query API (`/api/v1/query`): the first two bytes are the HTTP
//! status, the rest the body. Must hold: no panic; a successful vector, scored across a small fleet
//! with every direction and normalization, gives only scores within -100..=100, and every cluster
//! it scores is one of the fleet's.

use jiff::Timestamp;
use ocm_score_hub::thanos::config::{Direction, Normalization, ScoreSpec};
use ocm_score_hub::thanos::fleet::score_fleet;
use ocm_score_hub::thanos::mapping::{ClusterIndex, ClusterMapping};
use ocm_score_hub::thanos::response::{QueryData, parse_response};
use std::time::Duration;

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Some((status, body)) = data.split_first_chunk::<2>() else {
        return;
    };
    let status = 100 + u16::from_be_bytes(*status) % 500;
    let Ok(response) = parse_response(status, body) else {
        return;
    };
    let QueryData::Vector(samples) = response.data else {
        return;
    };
    let fleet = super::small_fleet();
    let index = ClusterIndex::build(&ClusterMapping::Identity, &super::small_fleet_objects().clusters);
    let spec = |name: &str, direction, normalization| ScoreSpec {
        name: name.into(),
        query: String::new(),
        direction,
        normalization,
    };
    let specs = [
        spec("fleetHigher", Direction::HigherIsBetter, Normalization::Fleet),
        spec("fleetLower", Direction::LowerIsBetter, Normalization::Fleet),
        spec(
            "fixed",
            Direction::HigherIsBetter,
            Normalization::Fixed { min: -5.0, max: 1e6 },
        ),
        spec(
            "fixedLower",
            Direction::LowerIsBetter,
            Normalization::Fixed { min: 0.0, max: 0.5 },
        ),
    ];
    let results = vec![samples; specs.len()];
    let now = Timestamp::from_second(1_700_000_060).expect("a valid time");
    let scored = score_fleet(&specs, &results, "cluster", &index, now, Duration::from_secs(180));
    for (cluster, desired) in &scored.clusters {
        assert!(
            fleet.cluster_id(cluster).is_some(),
            "scored a cluster not in the fleet: {cluster}"
        );
        for item in &desired.scores {
            assert!(
                (-100..=100).contains(&item.value),
                "{cluster}: {item:?} out of range"
            );
        }
    }
}
