//! The fits counts of shapes with placement constraints (issue 47), through the public interface:
//! required node affinity, anti-affinity of the replicas, topology spread, host ports. Each
//! example states what kube-scheduler's filters allow replica by replica; the property tests
//! check the count against a placement one replica at a time, in random orders.

use super::fits::{FitsIndex, FitsOptions, NeedsRelist, compile_shapes};
use super::objects::{
    ResourceList, SlimContainer, SlimNode, SlimNodeCondition, SlimNodeSpec, SlimNodeStatus, SlimPod,
    SlimPodSpec, SlimPodStatus, SlimPort, SlimResources, SlimTaint,
};
use super::quantity::QuantityText;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use ocm_score_api::WorkloadShape;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn list(entries: &[(&str, String)]) -> ResourceList {
    ResourceList(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), QuantityText(v.clone())))
            .collect(),
    )
}

/// A Ready node with `cpu` whole cores, 110 pod slots, its hostname label and `labels`.
fn node(name: &str, cpu: u32, labels: &[(&str, &str)]) -> SlimNode {
    let mut all: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.insert("kubernetes.io/hostname".into(), name.into());
    SlimNode {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(all),
            ..Default::default()
        },
        spec: SlimNodeSpec::default(),
        status: SlimNodeStatus {
            allocatable: list(&[
                ("cpu", cpu.to_string()),
                ("memory", "64Gi".into()),
                ("pods", "110".into()),
            ]),
            conditions: vec![SlimNodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
            }],
        },
    }
}

fn zoned(name: &str, cpu: u32, zone: &str) -> SlimNode {
    node(name, cpu, &[("zone", zone)])
}

fn tainted(mut node: SlimNode) -> SlimNode {
    node.spec.taints = vec![SlimTaint {
        key: "dedicated".into(),
        value: Some("batch".into()),
        effect: "NoSchedule".into(),
    }];
    node
}

/// A running pod in `namespace` on `node` requesting 100m, with `labels`.
fn pod(name: &str, namespace: &str, node: &str, labels: &[(&str, &str)]) -> SlimPod {
    SlimPod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: SlimPodSpec {
            node_name: Some(node.into()),
            containers: vec![SlimContainer {
                name: "app".into(),
                restart_policy: None,
                resources: SlimResources {
                    requests: list(&[("cpu", "100m".into())]),
                },
                ports: Vec::new(),
            }],
            ..Default::default()
        },
        status: SlimPodStatus {
            phase: Some("Running".into()),
        },
    }
}

fn web(name: &str, node: &str) -> SlimPod {
    pod(name, "shop", node, &[("app", "web")])
}

fn with_host_port(mut pod: SlimPod, port: i32, protocol: Option<&str>, ip: Option<&str>) -> SlimPod {
    pod.spec.containers[0].ports.push(SlimPort {
        host_port: Some(port),
        protocol: protocol.map(Into::into),
        host_ip: ip.map(Into::into),
    });
    pod
}

fn terminating(mut pod: SlimPod) -> SlimPod {
    pod.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    pod
}

fn shape(name: &str, yaml: &str) -> WorkloadShape {
    WorkloadShape::named(name, serde_norway::from_str(yaml).expect("shape yaml"))
}

fn index(shapes: &[WorkloadShape], nodes: &[SlimNode], pods: &[SlimPod]) -> FitsIndex {
    let (set, problems) = compile_shapes(shapes);
    assert_eq!(problems, vec![], "the test's shapes are valid");
    let mut index = FitsIndex::new(set, FitsOptions::default());
    for node in nodes {
        index.apply_node(node).expect("valid node");
    }
    for pod in pods {
        index.apply_pod(pod).expect("valid pod");
    }
    index
}

fn count(yaml: &str, nodes: &[SlimNode], pods: &[SlimPod]) -> u64 {
    let mut index = index(&[shape("s", yaml)], nodes, pods);
    index.fits()[0].replicas
}

const ONE_CPU: &str = "requests: {cpu: '1'}\n";

// ---------------------------------------------------------------------------------------------
// Required node affinity

#[test]
fn required_node_affinity_keeps_only_the_nodes_a_term_matches() {
    let nodes = [
        node("a", 4, &[("zone", "z1"), ("cores", "16"), ("gpu", "yes")]),
        node("b", 4, &[("zone", "z2"), ("cores", "8")]),
        node("c", 4, &[("zone", "z3"), ("cores", "x")]),
        node("d", 4, &[]),
    ];
    let with = |terms: &str| {
        count(
            &format!("{ONE_CPU}nodeAffinity: {{nodeSelectorTerms: {terms}}}"),
            &nodes,
            &[],
        )
    };
    // Without the affinity every node takes 4: the measured over-count (33-74 vs 0-44) came
    // from ignoring it.
    assert_eq!(count(ONE_CPU, &nodes, &[]), 16);
    assert_eq!(
        with("[{matchExpressions: [{key: zone, operator: In, values: [z1, z2]}]}]"),
        8
    );
    assert_eq!(
        with("[{matchExpressions: [{key: zone, operator: NotIn, values: [z1]}]}]"),
        12,
        "absent passes NotIn"
    );
    assert_eq!(with("[{matchExpressions: [{key: gpu, operator: Exists}]}]"), 4);
    assert_eq!(
        with("[{matchExpressions: [{key: gpu, operator: DoesNotExist}]}]"),
        12
    );
    assert_eq!(
        with("[{matchExpressions: [{key: cores, operator: Gt, values: ['8']}]}]"),
        4,
        "16 > 8; 'x' is no number"
    );
    assert_eq!(
        with("[{matchExpressions: [{key: cores, operator: Lt, values: ['16']}]}]"),
        4
    );
    assert_eq!(
        with("[{matchFields: [{key: metadata.name, operator: In, values: [c]}]}]"),
        4
    );
    assert_eq!(
        with("[{matchFields: [{key: metadata.name, operator: NotIn, values: [c]}]}]"),
        12
    );
    // Expressions of a term are ANDed, terms ORed, and an empty term matches nothing.
    assert_eq!(
        with(
            "[{matchExpressions: [{key: zone, operator: In, values: [z1, z2]}, {key: gpu, operator: DoesNotExist}]}]"
        ),
        4
    );
    assert_eq!(
        with(
            "[{matchExpressions: [{key: gpu, operator: Exists}]}, {matchFields: [{key: metadata.name, operator: In, values: [d]}]}]"
        ),
        8
    );
    assert_eq!(with("[{}]"), 0);
}

// ---------------------------------------------------------------------------------------------
// Pod anti-affinity

const HOSTNAME_ANTI: &str = "requests: {cpu: '1'}\nnamespace: shop\npodLabels: {app: web}\n\
    podAntiAffinity: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}]\n";

#[test]
fn hostname_anti_affinity_takes_one_replica_per_node_not_per_core() {
    // The measured case: 61-141 counted where kube-scheduler bound 3-6.
    let nodes: Vec<SlimNode> = (0..5).map(|i| zoned(&format!("n{i}"), 32, "z")).collect();
    assert_eq!(count(ONE_CPU, &nodes, &[]), 160);
    assert_eq!(count(HOSTNAME_ANTI, &nodes, &[]), 5);
    // A replica already running (a pod the selector matches) occupies its node; one in another
    // namespace, or with other labels, does not.
    let pods = [
        web("w0", "n0"),
        pod("other-ns", "cafe", "n1", &[("app", "web")]),
        pod("db", "shop", "n2", &[("app", "db")]),
    ];
    assert_eq!(count(HOSTNAME_ANTI, &nodes, &pods), 4);
    // A terminating pod still counts for anti-affinity (kube-scheduler does not skip it).
    assert_eq!(count(HOSTNAME_ANTI, &nodes, &[terminating(web("w0", "n0"))]), 4);
    // A node without the topology key is not limited by the term.
    let mut bare = zoned("bare", 32, "z");
    if let Some(labels) = bare.metadata.labels.as_mut() {
        labels.remove("kubernetes.io/hostname");
    }
    let mut with_bare = nodes.clone();
    with_bare.push(bare);
    assert_eq!(count(HOSTNAME_ANTI, &with_bare, &[]), 5 + 32);
}

#[test]
fn zone_anti_affinity_takes_one_replica_per_zone_and_other_workloads_only_exclude() {
    let nodes = [
        zoned("a1", 8, "a"),
        zoned("a2", 8, "a"),
        zoned("b1", 8, "b"),
        zoned("c1", 0, "c"),
        zoned("d1", 8, "d"),
    ];
    let zone_anti = HOSTNAME_ANTI.replace("kubernetes.io/hostname", "zone");
    // Zone c has no room; zones a, b and d take one each.
    assert_eq!(count(&zone_anti, &nodes, &[]), 3);
    assert_eq!(count(&zone_anti, &nodes, &[web("w", "a2")]), 2);
    // Anti-affinity to another workload (the replicas do not match): its zones are excluded,
    // the others take what their nodes take.
    let away_from_db = "requests: {cpu: '1'}\nnamespace: shop\npodLabels: {app: web}\n\
        podAntiAffinity: [{topologyKey: zone, labelSelector: {matchLabels: {app: db}}}]\n";
    let db = pod("db", "shop", "b1", &[("app", "db")]);
    // b1 takes 7 with db's 100m, but zone b is excluded: a1 + a2 + d1.
    assert_eq!(count(away_from_db, &nodes, std::slice::from_ref(&db)), 24);
    // `namespaces` widens the term to pods of other namespaces.
    let db_elsewhere = pod("db", "cafe", "a1", &[("app", "db")]);
    assert_eq!(
        count(away_from_db, &nodes, std::slice::from_ref(&db_elsewhere)),
        32 - 1
    );
    let listed = away_from_db.replace("topologyKey: zone,", "topologyKey: zone, namespaces: [cafe],");
    assert_eq!(count(&listed, &nodes, &[db_elsewhere]), 16);
}

#[test]
fn match_label_keys_narrow_the_selector_to_the_replicas_revision() {
    let nodes: Vec<SlimNode> = (0..4).map(|i| zoned(&format!("n{i}"), 8, "z")).collect();
    let yaml = "requests: {cpu: '1'}\nnamespace: shop\npodLabels: {app: web, rev: '2'}\n\
        podAntiAffinity: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}},\n\
        \x20 matchLabelKeys: [rev]}]\n";
    let old = pod("old", "shop", "n0", &[("app", "web"), ("rev", "1")]);
    let new = pod("new", "shop", "n1", &[("app", "web"), ("rev", "2")]);
    // The old revision's pod is not selected; the new one's is.
    assert_eq!(count(yaml, &nodes, &[old, new]), 3);
}

// ---------------------------------------------------------------------------------------------
// Topology spread

fn spread(max_skew: u32, extra: &str) -> String {
    format!(
        "requests: {{cpu: '1'}}\nnamespace: shop\npodLabels: {{app: web}}\n\
         topologySpreadConstraints: [{{maxSkew: {max_skew}, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,\n\
         \x20 labelSelector: {{matchLabels: {{app: web}}}}{extra}}}]\n"
    )
}

#[test]
fn zone_spread_is_bounded_by_the_fullest_zone_the_smallest_can_match() {
    // Zones a and b take 10 each, zone c 1. Placing one at a time: c fills at 1, so a and b stop at
    // 1 + maxSkew. The measured over-count (29-74 vs 23-51) counted every core.
    let nodes = [zoned("a1", 10, "a"), zoned("b1", 10, "b"), zoned("c1", 1, "c")];
    assert_eq!(count(ONE_CPU, &nodes, &[]), 21);
    assert_eq!(count(&spread(1, ""), &nodes, &[]), 2 + 2 + 1);
    assert_eq!(count(&spread(3, ""), &nodes, &[]), 4 + 4 + 1);
    // Existing matching pods count: zone a already holds 3 (0.3 of its cores), so its 10th core is
    // gone too: a: 9 left, b: 10, c: 1 -> level 1 (c), ceiling 2, a is already beyond.
    let pods = [web("w1", "a1"), web("w2", "a1"), web("w3", "a1")];
    assert_eq!(count(&spread(1, ""), &nodes, &pods), 2 + 1);
    // Terminating pods and pods of other namespaces are not counted by spread.
    let pods = [
        terminating(web("w1", "a1")),
        pod("x", "cafe", "a1", &[("app", "web")]),
    ];
    assert_eq!(count(&spread(1, ""), &nodes, &pods), 5);
}

#[test]
fn min_domains_holds_the_minimum_at_zero_until_enough_zones_exist() {
    let nodes = [zoned("a1", 10, "a"), zoned("b1", 10, "b"), zoned("c1", 10, "c")];
    assert_eq!(count(&spread(1, ""), &nodes, &[]), 30);
    assert_eq!(count(&spread(1, ", minDomains: 3"), &nodes, &[]), 30);
    // Three zones, four required: every zone stays at maxSkew.
    assert_eq!(count(&spread(1, ", minDomains: 4"), &nodes, &[]), 3);
    assert_eq!(count(&spread(2, ", minDomains: 4"), &nodes, &[]), 6);
}

#[test]
fn node_inclusion_policies_decide_which_zones_count() {
    // Zone c's only node is tainted: no replica goes there, but with nodeTaintsPolicy Ignore (the
    // default) its zone still counts, at 0.
    let nodes = [
        zoned("a1", 10, "a"),
        zoned("b1", 10, "b"),
        tainted(zoned("c1", 10, "c")),
        node("d1", 10, &[("zone", "d"), ("pool", "other")]),
    ];
    let pinned = ", nodeTaintsPolicy: Honor";
    let selector = "nodeSelector: {zone: a}\n";
    assert_eq!(
        count(&spread(1, ""), &nodes, &[]),
        1 + 1 + 1,
        "a, b and d stop at 1 beside c's 0"
    );
    assert_eq!(count(&spread(1, pinned), &nodes, &[]), 30, "c is not counted");
    // nodeAffinityPolicy Honor (the default): only zones of nodes matching the shape's
    // nodeSelector / node affinity count; Ignore counts every zone.
    let honor = format!("{}{selector}", spread(1, pinned));
    assert_eq!(count(&honor, &nodes, &[]), 10);
    let ignore = format!("{}{selector}", spread(1, ", nodeAffinityPolicy: Ignore"));
    assert_eq!(count(&ignore, &nodes, &[]), 1);
}

#[test]
fn a_spread_the_replicas_do_not_match_only_excludes_skewed_zones() {
    let nodes = [zoned("a1", 10, "a"), zoned("b1", 10, "b"), zoned("c1", 10, "c")];
    let db = (0..3).map(|i| pod(&format!("db{i}"), "shop", "a1", &[("app", "db")]));
    let pods: Vec<SlimPod> = db.collect();
    let yaml = spread(1, "").replace("matchLabels: {app: web}", "matchLabels: {app: db}");
    // Zone a holds 3 db pods, the others 0: a is skewed by 3 > 1 and excluded; b and c take all.
    assert_eq!(count(&yaml, &nodes, &pods), 20);
    // maxSkew 3 admits zone a's 3: a1 takes 9 beside the db pods' 300m.
    assert_eq!(
        count(&yaml.replace("maxSkew: 1", "maxSkew: 3"), &nodes, &pods),
        29
    );
}

#[test]
fn nodes_without_the_spread_key_take_no_replica_and_empty_selectors_count_nothing() {
    let nodes = [zoned("a1", 10, "a"), zoned("b1", 10, "b"), node("bare", 10, &[])];
    assert_eq!(count(&spread(5, ""), &nodes, &[]), 20);
    // An empty selector: kube-scheduler counts no pod, so only the key is required.
    let empty = spread(1, "").replace("{matchLabels: {app: web}}", "{}");
    assert_eq!(count(&empty, &nodes, &[]), 20);
    // ScheduleAnyway only scores.
    let anyway = spread(1, "").replace("DoNotSchedule", "ScheduleAnyway");
    assert_eq!(count(&anyway, &nodes, &[]), 30);
}

#[test]
fn spread_and_hostname_anti_affinity_together() {
    // Zone a has 4 nodes, zone b 2: one replica per node, zones within 1 of each other.
    let nodes = [
        zoned("a1", 8, "a"),
        zoned("a2", 8, "a"),
        zoned("a3", 8, "a"),
        zoned("a4", 8, "a"),
        zoned("b1", 8, "b"),
        zoned("b2", 8, "b"),
    ];
    let yaml = format!(
        "{}podAntiAffinity: [{{topologyKey: kubernetes.io/hostname, labelSelector: {{matchLabels: {{app: web}}}}}}]\n",
        spread(1, "")
    );
    assert_eq!(count(&yaml, &nodes, &[]), 2 + 3);
}

#[test]
fn two_spread_keys_are_counted_in_one_placement_order() {
    // Zone and hostname spread both couple the replicas; the count is one order's (node-name
    // rounds): a1 b1 a2 b2 a1 b1 ... each node at most one more than the emptiest node.
    let nodes = [
        zoned("a1", 3, "a"),
        zoned("a2", 3, "a"),
        zoned("b1", 3, "b"),
        zoned("b2", 1, "b"),
    ];
    let yaml = format!(
        "{}- {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,\n\
         \x20 labelSelector: {{matchLabels: {{app: web}}}}}}\n",
        spread(1, "")
            .replace("topologySpreadConstraints: [", "topologySpreadConstraints:\n- ")
            .replace("}}]\n", "}}\n")
    );
    // b2 fills at 1, so every node stops at 2: a1 2, a2 2, b1 2, b2 1.
    assert_eq!(count(&yaml, &nodes, &[]), 7);
}

// ---------------------------------------------------------------------------------------------
// Host ports

#[test]
fn host_ports_take_one_replica_per_node_and_skip_nodes_binding_the_port() {
    let nodes = [
        zoned("n1", 8, "z"),
        zoned("n2", 8, "z"),
        zoned("n3", 8, "z"),
        zoned("n4", 8, "z"),
    ];
    let yaml = "requests: {cpu: '1'}\nhostPorts: [{port: 8080}]\n";
    assert_eq!(count(yaml, &nodes, &[]), 4);
    let pods = [
        with_host_port(web("tcp", "n1"), 8080, None, None),
        with_host_port(web("udp", "n2"), 8080, Some("UDP"), None),
        with_host_port(web("ip", "n3"), 8080, Some("TCP"), Some("10.0.0.3")),
    ];
    // n1: the same port; n2: another protocol, no conflict; n3: a specific address conflicts with
    // the replica's 0.0.0.0.
    assert_eq!(count(yaml, &nodes, &pods), 2);
    let on_address = "requests: {cpu: '1'}\nhostPorts: [{port: 8080, hostIP: 10.0.0.9}]\n";
    assert_eq!(
        count(on_address, &nodes, &pods),
        3,
        "only n1's 0.0.0.0 conflicts with 10.0.0.9"
    );
}

// ---------------------------------------------------------------------------------------------
// Incremental behaviour

#[test]
fn events_move_the_constrained_counts() {
    let nodes: Vec<SlimNode> = (0..3).map(|i| zoned(&format!("n{i}"), 8, "z")).collect();
    let mut index = index(
        &[shape("web", HOSTNAME_ANTI), shape("plain", ONE_CPU)],
        &nodes,
        &[],
    );
    let counts = |index: &mut FitsIndex| index.fits().iter().map(|f| f.replicas).collect::<Vec<_>>();
    assert_eq!(counts(&mut index), [24, 3]);
    let before = index.revision();
    index.apply_pod(&web("w", "n0")).expect("valid");
    assert_ne!(index.revision(), before);
    assert_eq!(counts(&mut index), [23, 2]);
    // Relabelled away from the selector: n0 is free again for the shape.
    index
        .apply_pod(&pod("w", "shop", "n0", &[("app", "old")]))
        .expect("valid");
    assert_eq!(counts(&mut index), [23, 3]);
    index.delete_pod("shop", "w");
    assert_eq!(counts(&mut index), [24, 3]);
    // A node gone takes its replicas with it.
    index.delete_node("n2");
    assert_eq!(counts(&mut index), [16, 2]);
    // A re-list recounts the same.
    index.begin_pod_relist();
    index.apply_pod(&web("w", "n1")).expect("valid");
    index.finish_pod_relist();
    assert_eq!(counts(&mut index), [15, 1]);
    index.recompute();
    assert_eq!(counts(&mut index), [15, 1]);
}

#[test]
fn shapes_with_other_selectors_need_a_relist() {
    let (set, _) = compile_shapes(&[shape("plain", ONE_CPU)]);
    let mut index = FitsIndex::new(set, FitsOptions::default());
    index.apply_node(&zoned("n", 4, "z")).expect("valid");
    let (anti, _) = compile_shapes(&[shape("web", HOSTNAME_ANTI)]);
    assert_eq!(index.set_shapes(anti), Err(NeedsRelist));
    let (ports, _) = compile_shapes(&[shape("p", "hostPorts: [{port: 80}]")]);
    assert_eq!(index.set_shapes(ports), Err(NeedsRelist));
    let (affinity, _) = compile_shapes(&[shape(
        "aff",
        "requests: {cpu: '1'}\nnodeAffinity: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [y]}]}]}",
    )]);
    assert_eq!(index.set_shapes(affinity), Ok(true), "node affinity needs no pod");
    assert_eq!(index.fits()[0].replicas, 0);
}

// ---------------------------------------------------------------------------------------------
// Properties: the count is what placing replicas one at a time, in any order, reaches.

/// One replica at a time onto any node the filters allow (chosen by `picks`), until none does:
/// zone spread (`max_skew`, counting `existing` matching pods per zone) and, optionally, zone
/// anti-affinity. Capacities are whole replicas per node.
fn place_one_by_one(
    zones: &[usize],
    capacity: &[u64],
    existing: &[u64],
    max_skew: Option<u64>,
    anti: bool,
    picks: &[usize],
) -> u64 {
    let mut left = capacity.to_vec();
    let zone_count = existing.len();
    let mut counts = existing.to_vec();
    let mut placed_in = vec![0u64; zone_count];
    for (placed, step) in (0u64..).zip(0usize..) {
        let min = counts.iter().copied().min().unwrap_or(0);
        let feasible: Vec<usize> = (0..zones.len())
            .filter(|&i| {
                let z = zones[i];
                left[i] > 0
                    && max_skew.is_none_or(|skew| counts[z] < min + skew)
                    && (!anti || (existing[z] == 0 && placed_in[z] == 0))
            })
            .collect();
        if feasible.is_empty() {
            return placed;
        }
        let i = feasible[picks[step % picks.len()] % feasible.len()];
        left[i] -= 1;
        counts[zones[i]] += 1;
        placed_in[zones[i]] += 1;
    }
    unreachable!()
}

proptest! {
    #[test]
    fn spread_counts_match_any_placement_order(
        cluster in proptest::collection::vec((0usize..4, 0u32..5), 1..8),
        existing in proptest::collection::vec(0u64..4, 4),
        max_skew in 1u64..4,
        anti in any::<bool>(),
        use_spread in any::<bool>(),
        picks in proptest::collection::vec(any::<usize>(), 1..20),
    ) {
        // Zones z0..z3 exist on the nodes listed; existing matching pods sit on a 0-cpu node of
        // their zone (one per zone, so every zone exists).
        let mut nodes: Vec<SlimNode> =
            (0..4).map(|z| zoned(&format!("holder{z}"), 0, &format!("z{z}"))).collect();
        let mut pods = Vec::new();
        for (z, &n) in existing.iter().enumerate() {
            for k in 0..n {
                let mut p = web(&format!("e{z}-{k}"), &format!("holder{z}"));
                p.spec.containers[0].resources.requests = ResourceList::default();
                pods.push(p);
            }
        }
        for (i, &(z, cpu)) in cluster.iter().enumerate() {
            nodes.push(zoned(&format!("n{i}"), cpu, &format!("z{z}")));
        }
        let mut yaml = if use_spread { spread(u32::try_from(max_skew).unwrap_or(1), "") } else {
            "requests: {cpu: '1'}\nnamespace: shop\npodLabels: {app: web}\n".to_owned()
        };
        if anti {
            yaml.push_str("podAntiAffinity: [{topologyKey: zone, labelSelector: {matchLabels: {app: web}}}]\n");
        }
        let counted = count(&yaml, &nodes, &pods);
        let zones: Vec<usize> = cluster.iter().map(|&(z, _)| z).collect();
        let capacity: Vec<u64> = cluster.iter().map(|&(_, cpu)| u64::from(cpu)).collect();
        let reference = place_one_by_one(
            &zones, &capacity, &existing, use_spread.then_some(max_skew), anti, &picks,
        );
        prop_assert_eq!(counted, reference);
    }

    #[test]
    fn hostname_anti_affinity_counts_the_free_nodes(
        cpus in proptest::collection::vec(0u32..4, 1..10),
        occupied in proptest::collection::vec(any::<bool>(), 10),
    ) {
        let nodes: Vec<SlimNode> =
            cpus.iter().enumerate().map(|(i, &c)| zoned(&format!("n{i}"), c, "z")).collect();
        let pods: Vec<SlimPod> = (0..cpus.len())
            .filter(|&i| occupied[i])
            .map(|i| {
                let mut p = web(&format!("w{i}"), &format!("n{i}"));
                p.spec.containers[0].resources.requests = ResourceList::default();
                p
            })
            .collect();
        let expected = (0..cpus.len()).filter(|&i| cpus[i] > 0 && !occupied[i]).count() as u64;
        prop_assert_eq!(count(HOSTNAME_ANTI, &nodes, &pods), expected);
    }
}
