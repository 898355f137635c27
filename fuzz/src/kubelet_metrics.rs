//! Kubelet `/metrics/resource` text, as the agent's kubelet source scrapes it: two scrapes of one
//! node (split at the first NUL byte) give a cpu rate and memory usage, which are combined with the
//! node's requests and scored. Must hold: no panic; what the parser accepts is finite and not
//! negative; a rate is never negative; every score is within -100..=100.

use ocm_score_agent::accounting::resources::ResourceSet;
use ocm_score_agent::scores::{built_in_defs, compute};
use ocm_score_agent::sources::kubelet::{
    NodeRequests, NodeSample, NodeUsage, cpu_rate_millicores, parse_resource_metrics, view_with_usage,
};

fn checked(text: &str) -> Option<NodeSample> {
    let sample = parse_resource_metrics(text).ok()?;
    if let Some((seconds, _)) = sample.cpu_seconds {
        assert!(seconds.is_finite() && seconds >= 0.0, "cpu seconds {seconds}");
    }
    if let Some(bytes) = sample.memory_working_set {
        assert!(bytes.is_finite() && bytes >= 0.0, "memory {bytes}");
    }
    Some(sample)
}

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (first, second) = text.split_once('\0').unwrap_or((text, ""));
    let before = checked(first);
    let Some(now) = checked(second).or(before) else {
        return;
    };
    let cpu = match (before.and_then(|s| s.cpu_seconds), now.cpu_seconds) {
        (Some(before), Some(now)) => cpu_rate_millicores(before, now),
        _ => None,
    };
    if let Some(rate) = cpu {
        assert!(rate >= 0.0, "negative cpu rate {rate}");
    }
    let node = |name: &str| NodeRequests {
        name: name.into(),
        allocatable_cpu: 4000,
        allocatable_memory: 16 << 30,
        requested_cpu: 500,
        requested_memory: 1 << 30,
    };
    let usage = NodeUsage {
        cpu,
        memory: now.memory_working_set,
    };
    let nodes = [(node("scraped"), usage), (node("quiet"), NodeUsage::default())];
    let resources = ResourceSet::built_in();
    let view = view_with_usage(&nodes, &resources);
    for score in compute(&built_in_defs(), &view, &resources) {
        assert!((-100..=100).contains(&score.value), "{score:?} out of range");
    }
}
