//! The placement constraints of a shape, compiled (issue 47), and the count of replicas they let
//! through: kube-scheduler's filter rules of NodeAffinity (required terms), InterPodAffinity (the
//! replicas' required anti-affinity), PodTopologySpread (`DoNotSchedule`) and NodePorts, written
//! from their documented behaviour (docs/fits-and-reservations.md, "Placement constraints").

use crate::accounting::objects::{SlimPod, SlimTaint};
use k8s_openapi::api::core::v1::{NodeSelector, PodAffinityTerm, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ocm_score_api::crd::workload_shape::HostPort;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Labels as the index keeps them.
pub(super) type Labels = [(Box<str>, Box<str>)];

fn label<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| **k == *key).map(|(_, v)| &**v)
}

/// One requirement on a label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Requirement {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

impl Requirement {
    fn parse(operator: &str, values: &[String]) -> Option<Self> {
        let number = || values.first().and_then(|v| v.parse::<i64>().ok());
        Some(match operator {
            "In" => Requirement::In(values.to_vec()),
            "NotIn" => Requirement::NotIn(values.to_vec()),
            "Exists" => Requirement::Exists,
            "DoesNotExist" => Requirement::DoesNotExist,
            "Gt" => Requirement::Gt(number()?),
            "Lt" => Requirement::Lt(number()?),
            _ => return None,
        })
    }

    /// Kubernetes' rule: NotIn and DoesNotExist hold for an absent label; Gt and Lt need an
    /// integer value.
    fn holds(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (Requirement::In(values), Some(v)) => values.iter().any(|x| x == v),
            (Requirement::NotIn(values), Some(v)) => !values.iter().any(|x| x == v),
            (Requirement::NotIn(_), None) | (Requirement::DoesNotExist, None) => true,
            (Requirement::Exists, Some(_)) => true,
            (Requirement::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
            (Requirement::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
            _ => false,
        }
    }
}

/// A label selector: every requirement holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct LabelMatch(Vec<(String, Requirement)>);

impl LabelMatch {
    fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|(key, req)| req.holds(get(key).as_deref()))
    }

    /// A label selector with `matchLabelKeys` (`key In [the replica's value]`) and
    /// `mismatchLabelKeys` (`key NotIn [...]`) merged, for keys the replicas carry.
    fn of(
        selector: &LabelSelector,
        pod_labels: &BTreeMap<String, String>,
        match_keys: &[String],
        mismatch_keys: &[String],
    ) -> Option<Self> {
        let mut reqs: Vec<(String, Requirement)> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), Requirement::In(vec![v.clone()])))
            .collect();
        for e in selector.match_expressions.iter().flatten() {
            let values = e.values.as_deref().unwrap_or_default();
            reqs.push((e.key.clone(), Requirement::parse(&e.operator, values)?));
        }
        for key in match_keys {
            if let Some(v) = pod_labels.get(key) {
                reqs.push((key.clone(), Requirement::In(vec![v.clone()])));
            }
        }
        for key in mismatch_keys {
            if let Some(v) = pod_labels.get(key) {
                reqs.push((key.clone(), Requirement::NotIn(vec![v.clone()])));
            }
        }
        Some(LabelMatch(reqs))
    }
}

/// Which existing pods a term or constraint counts. Pods are matched once, when their event
/// arrives; the index keeps one bit per selector of the set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PodSelector {
    namespaces: Vec<String>,
    labels: LabelMatch,
    /// Topology spread does not count pods being deleted; anti-affinity does.
    skip_terminating: bool,
}

impl PodSelector {
    pub(super) fn matches(&self, pod: &SlimPod) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if !self.namespaces.iter().any(|n| n == namespace) {
            return false;
        }
        if self.skip_terminating && pod.is_terminating() {
            return false;
        }
        let labels = pod.metadata.labels.as_ref();
        self.labels.matches(|k| labels.and_then(|l| l.get(k)).cloned())
    }
}

/// One required node affinity requirement.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum NodeRequirement {
    Label(String, Requirement),
    /// `matchFields` on `metadata.name`: In (`true`) or NotIn one name.
    Name(bool, String),
}

/// A host port: protocol, port, and the bound address (`None`: every address, `0.0.0.0`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PortKey {
    protocol: Box<str>,
    port: i32,
    ip: Option<Box<str>>,
}

impl PortKey {
    fn new(port: i32, protocol: Option<&str>, ip: Option<&str>) -> Self {
        Self {
            protocol: protocol.filter(|p| !p.is_empty()).unwrap_or("TCP").into(),
            port,
            ip: ip.filter(|ip| !ip.is_empty() && *ip != "0.0.0.0").map(Into::into),
        }
    }

    /// NodePorts' rule: same protocol and port, and the same address or either on every address.
    pub(super) fn conflicts(&self, other: &PortKey) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip.is_none() || other.ip.is_none() || self.ip == other.ip)
    }

    /// The host ports of a pod's containers and sidecars (init containers that run to the end).
    pub(super) fn of_pod(pod: &SlimPod) -> Box<[PortKey]> {
        pod.spec
            .containers
            .iter()
            .chain(pod.spec.init_containers.iter().filter(|c| c.is_sidecar()))
            .flat_map(|c| c.ports.iter())
            .filter_map(|p| {
                let port = p.host_port.filter(|&port| port > 0)?;
                Some(PortKey::new(port, p.protocol.as_deref(), p.host_ip.as_deref()))
            })
            .collect()
    }
}

/// A required anti-affinity term: no replica in a domain of `key` holding a pod of `selector`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct AntiAffinity {
    key: String,
    selector: usize,
    /// The replicas carry labels the selector matches: they exclude each other too.
    self_match: bool,
}

/// A `DoNotSchedule` topology spread constraint.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Spread {
    key: String,
    max_skew: u64,
    min_domains: usize,
    /// `None`: counts no pod (absent or empty selector, as kube-scheduler counts).
    selector: Option<usize>,
    self_match: bool,
    honor_affinity: bool,
    honor_taints: bool,
}

/// The constraints of one shape beyond resources, nodeSelector and tolerations.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Constraints {
    /// Required node affinity: terms ORed, requirements ANDed.
    pub(super) node_affinity: Option<Vec<Vec<NodeRequirement>>>,
    pub(super) host_ports: Vec<PortKey>,
    pub(super) anti_affinity: Vec<AntiAffinity>,
    pub(super) spread: Vec<Spread>,
}

/// Selectors of all shapes, one bit per pod each.
pub(super) const MAX_SELECTORS: usize = 64;

/// The constraints could not be compiled: the field and why.
pub(super) type CompileError = (String, String);

impl Constraints {
    /// Compiles a validated shape's constraints; new pod selectors are added to `selectors`.
    pub(super) fn compile(
        spec: &ocm_score_api::WorkloadShapeSpec,
        selectors: &mut Vec<PodSelector>,
    ) -> Result<Self, CompileError> {
        let namespace = spec.namespace.clone().unwrap_or_default();
        let mut intern = |selector: PodSelector, field: String| -> Result<usize, CompileError> {
            if let Some(i) = selectors.iter().position(|s| *s == selector) {
                return Ok(i);
            }
            if selectors.len() == MAX_SELECTORS {
                return Err((
                    field,
                    format!(
                        "beyond the {MAX_SELECTORS} distinct pod selectors the agent counts at once \
                         (shapes earlier by name use the others)"
                    ),
                ));
            }
            selectors.push(selector);
            Ok(selectors.len() - 1)
        };
        let unreadable = |field: String| (field, "an operator the count does not know".to_owned());
        let mut anti_affinity = Vec::new();
        for (i, term) in spec.pod_anti_affinity.iter().enumerate() {
            let field = format!("spec.podAntiAffinity[{i}]");
            // An absent selector selects nothing: the term excludes no node.
            let Some(selector) = &term.label_selector else {
                continue;
            };
            let labels = anti_labels(term, selector, &spec.pod_labels)
                .ok_or_else(|| unreadable(format!("{field}.labelSelector")))?;
            let namespaces = match term.namespaces.as_deref() {
                Some(list) if !list.is_empty() => list.to_vec(),
                _ => vec![namespace.clone()],
            };
            let self_match =
                namespaces.contains(&namespace) && labels.matches(|k| spec.pod_labels.get(k).cloned());
            let selector = intern(
                PodSelector {
                    namespaces,
                    labels,
                    skip_terminating: false,
                },
                field,
            )?;
            anti_affinity.push(AntiAffinity {
                key: term.topology_key.clone(),
                selector,
                self_match,
            });
        }
        let mut spread = Vec::new();
        for (i, c) in spec.topology_spread_constraints.iter().enumerate() {
            if c.when_unsatisfiable != "DoNotSchedule" {
                continue;
            }
            let field = format!("spec.topologySpreadConstraints[{i}]");
            let labels = match &c.label_selector {
                Some(selector) => Some(
                    spread_labels(c, selector, &spec.pod_labels)
                        .ok_or_else(|| unreadable(format!("{field}.labelSelector")))?,
                ),
                None => None,
            };
            // kube-scheduler counts no pod for an empty selector, and the replicas then never
            // raise a domain's count either.
            let labels = labels.filter(|l| !l.0.is_empty());
            let self_match = labels
                .as_ref()
                .is_some_and(|l| l.matches(|k| spec.pod_labels.get(k).cloned()));
            let selector = match labels {
                Some(labels) => Some(intern(
                    PodSelector {
                        namespaces: vec![namespace.clone()],
                        labels,
                        skip_terminating: true,
                    },
                    field,
                )?),
                None => None,
            };
            spread.push(Spread {
                key: c.topology_key.clone(),
                max_skew: u64::try_from(c.max_skew.max(1)).unwrap_or(1),
                min_domains: usize::try_from(c.min_domains.unwrap_or(1).max(1)).unwrap_or(1),
                selector,
                self_match,
                honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            });
        }
        Ok(Self {
            node_affinity: match &spec.node_affinity {
                Some(selector) => {
                    Some(node_terms(selector).ok_or_else(|| unreadable("spec.nodeAffinity".to_owned()))?)
                }
                None => None,
            },
            host_ports: spec.host_ports.iter().map(port_key).collect(),
            anti_affinity,
            spread,
        })
    }

    /// Whether the count needs the whole cluster (domains), not node by node.
    pub(super) fn spans_domains(&self) -> bool {
        !self.anti_affinity.is_empty() || !self.spread.is_empty()
    }

    /// The required node affinity holds for the node `name` with `labels`.
    pub(super) fn affinity_holds(&self, name: &str, labels: &Labels) -> bool {
        let Some(terms) = &self.node_affinity else {
            return true;
        };
        terms.iter().any(|term| {
            // An empty term matches no node.
            !term.is_empty()
                && term.iter().all(|req| match req {
                    NodeRequirement::Label(key, req) => req.holds(label(labels, key)),
                    NodeRequirement::Name(true, n) => n == name,
                    NodeRequirement::Name(false, n) => n != name,
                })
        })
    }
}

fn anti_labels(
    term: &PodAffinityTerm,
    selector: &LabelSelector,
    pod_labels: &BTreeMap<String, String>,
) -> Option<LabelMatch> {
    LabelMatch::of(
        selector,
        pod_labels,
        term.match_label_keys.as_deref().unwrap_or_default(),
        term.mismatch_label_keys.as_deref().unwrap_or_default(),
    )
}

fn spread_labels(
    c: &TopologySpreadConstraint,
    selector: &LabelSelector,
    pod_labels: &BTreeMap<String, String>,
) -> Option<LabelMatch> {
    LabelMatch::of(
        selector,
        pod_labels,
        c.match_label_keys.as_deref().unwrap_or_default(),
        &[],
    )
}

fn node_terms(selector: &NodeSelector) -> Option<Vec<Vec<NodeRequirement>>> {
    selector
        .node_selector_terms
        .iter()
        .map(|term| {
            let labels = term.match_expressions.iter().flatten().map(|e| {
                let values = e.values.as_deref().unwrap_or_default();
                Requirement::parse(&e.operator, values).map(|r| NodeRequirement::Label(e.key.clone(), r))
            });
            let fields = term.match_fields.iter().flatten().map(|e| {
                let value = e.values.as_deref().unwrap_or_default().first()?.clone();
                (e.key == "metadata.name").then_some(())?;
                match e.operator.as_str() {
                    "In" => Some(NodeRequirement::Name(true, value)),
                    "NotIn" => Some(NodeRequirement::Name(false, value)),
                    _ => None,
                }
            });
            labels.chain(fields).collect::<Option<Vec<_>>>()
        })
        .collect()
}

fn port_key(p: &HostPort) -> PortKey {
    PortKey::new(p.port, p.protocol.as_deref(), p.host_ip.as_deref())
}

// ---------------------------------------------------------------------------------------------
// The count

/// What the count reads of one node, in node-name order.
pub(super) struct NodeView<'a> {
    pub(super) name: &'a str,
    pub(super) labels: &'a Labels,
    pub(super) taints: &'a [SlimTaint],
    /// The replicas of the shape the node takes by itself (0 when not eligible): resources, pod
    /// slots, pending deductions, host ports.
    pub(super) capacity: u64,
    /// Per selector of the set, the pods bound to the node it matches.
    pub(super) matched: &'a [u32],
}

/// The node passes the shape's nodeSelector and required node affinity (a spread constraint's
/// `nodeAffinityPolicy: Honor`).
pub(super) type PlacementFilter<'a> = &'a dyn Fn(&NodeView) -> bool;
/// The node's NoSchedule/NoExecute taints are all tolerated (`nodeTaintsPolicy: Honor`).
pub(super) type TaintFilter<'a> = &'a dyn Fn(&NodeView) -> bool;

/// How many replicas kube-scheduler's filters let through, placed one after another, given the
/// nodes' own capacities (see the module and docs/fits-and-reservations.md). `limit` bounds the
/// simulation used when two constraints couple replicas across different topology keys.
pub(super) fn count<'a>(
    c: &Constraints,
    nodes: &[NodeView<'a>],
    placement: PlacementFilter,
    tolerated: TaintFilter,
    limit: u64,
) -> u64 {
    // Domains holding a pod an anti-affinity term selects, per topology key.
    let mut blocked: HashMap<&str, HashSet<&str>> = HashMap::new();
    for term in &c.anti_affinity {
        let set = blocked.entry(term.key.as_str()).or_default();
        for node in nodes {
            if node.matched[term.selector] > 0
                && let Some(v) = label(node.labels, &term.key)
            {
                set.insert(v);
            }
        }
    }
    // Spread: matching pods per domain over the nodes the constraint counts, and the global
    // minimum (0 while fewer domains than minDomains exist).
    let has_spread_keys = |node: &NodeView| c.spread.iter().all(|s| label(node.labels, &s.key).is_some());
    let mut domains: Vec<HashMap<&'a str, u64>> = Vec::with_capacity(c.spread.len());
    for s in &c.spread {
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for node in nodes {
            if !has_spread_keys(node)
                || (s.honor_affinity && !placement(node))
                || (s.honor_taints && !tolerated(node))
            {
                continue;
            }
            let Some(v) = label(node.labels, &s.key) else {
                continue;
            };
            let matched = s.selector.map_or(0, |i| u64::from(node.matched[i]));
            *counts.entry(v).or_default() += matched;
        }
        domains.push(counts);
    }
    let minimum = |s: &Spread, counts: &HashMap<&str, u64>| -> u64 {
        if counts.len() < s.min_domains {
            0
        } else {
            counts.values().copied().min().unwrap_or(0)
        }
    };
    // The nodes a replica may go to now, with their capacity.
    let mut feasible: Vec<(usize, u64)> = Vec::new();
    'nodes: for (i, node) in nodes.iter().enumerate() {
        if node.capacity == 0 || !has_spread_keys(node) {
            continue;
        }
        for (key, values) in &blocked {
            if label(node.labels, key).is_some_and(|v| values.contains(v)) {
                continue 'nodes;
            }
        }
        // A constraint the replicas do not match never moves: a skewed domain stays closed. One
        // they match moves as they are placed, below.
        for (s, counts) in c.spread.iter().zip(&domains) {
            let v = label(node.labels, &s.key).unwrap_or_default();
            let here = counts.get(v).copied().unwrap_or(0);
            if !s.self_match && here > minimum(s, counts) + s.max_skew {
                continue 'nodes;
            }
        }
        feasible.push((i, node.capacity));
    }
    // Anti-affinity of the replicas to each other: a key whose every domain has one feasible node
    // (hostnames, usually) caps each node at one replica.
    let mut self_keys: Vec<&str> = c
        .anti_affinity
        .iter()
        .filter(|t| t.self_match)
        .map(|t| t.key.as_str())
        .collect();
    self_keys.sort_unstable();
    self_keys.dedup();
    self_keys.retain(|key| {
        let mut seen = HashSet::new();
        let singletons = feasible
            .iter()
            .filter_map(|&(i, _)| label(nodes[i].labels, key))
            .all(|v| seen.insert(v));
        if singletons {
            for (i, cap) in &mut feasible {
                if label(nodes[*i].labels, key).is_some() {
                    *cap = (*cap).min(1);
                }
            }
        }
        !singletons
    });
    let self_spread: Vec<usize> = (0..c.spread.len()).filter(|&s| c.spread[s].self_match).collect();
    let sum = |f: &[(usize, u64)]| f.iter().map(|&(_, cap)| cap).fold(0u64, u64::saturating_add);
    let one_key = self_keys
        .iter()
        .copied()
        .chain(self_spread.iter().map(|&s| c.spread[s].key.as_str()))
        .collect::<HashSet<&str>>();
    if one_key.is_empty() {
        return sum(&feasible);
    }
    if one_key.len() == 1 && self_spread.len() <= 1 {
        // One key K couples the replicas: per domain of K, the replicas its nodes take (one, with
        // anti-affinity on K); nodes without K (possible only without spread) take theirs.
        let key = one_key.iter().next().copied().unwrap_or_default();
        let mut free = 0u64;
        let mut per_domain: HashMap<&str, u64> = HashMap::new();
        for &(i, cap) in &feasible {
            match label(nodes[i].labels, key) {
                Some(v) => {
                    let d = per_domain.entry(v).or_default();
                    *d = d.saturating_add(cap);
                }
                None => free = free.saturating_add(cap),
            }
        }
        if !self_keys.is_empty() {
            per_domain.values_mut().for_each(|d| *d = (*d).min(1));
        }
        let Some(&s) = self_spread.first() else {
            return free.saturating_add(per_domain.values().fold(0u64, |a, d| a.saturating_add(*d)));
        };
        // Placing one at a time, a domain d can rise to E + maxSkew, where E is the lowest level
        // any domain can reach (its count plus what its nodes take); every order of placement
        // ends there (docs/fits-and-reservations.md).
        let spread = &c.spread[s];
        let counts = &domains[s];
        let level = if counts.len() < spread.min_domains {
            0
        } else {
            counts
                .iter()
                .map(|(v, &n)| n.saturating_add(per_domain.get(v).copied().unwrap_or(0)))
                .min()
                .unwrap_or(0)
        };
        let ceiling = level.saturating_add(spread.max_skew);
        return counts
            .iter()
            .map(|(v, &n)| {
                ceiling
                    .saturating_sub(n)
                    .min(per_domain.get(v).copied().unwrap_or(0))
            })
            .fold(free, u64::saturating_add);
    }
    simulate(c, nodes, &feasible, &self_keys, &self_spread, domains, limit)
}

/// Places replicas one at a time, in rounds over the feasible nodes in name order, until none
/// fits or `limit` are placed: one order kube-scheduler could follow when constraints on different
/// keys couple the replicas (another order may end at another count).
fn simulate<'a>(
    c: &Constraints,
    nodes: &[NodeView<'a>],
    feasible: &[(usize, u64)],
    self_keys: &[&str],
    self_spread: &[usize],
    mut domains: Vec<HashMap<&'a str, u64>>,
    limit: u64,
) -> u64 {
    let mut left: Vec<u64> = feasible.iter().map(|&(_, cap)| cap).collect();
    let mut used: Vec<HashSet<&'a str>> = vec![HashSet::new(); self_keys.len()];
    let mut minima: Vec<u64> = self_spread
        .iter()
        .map(|&s| {
            let counts = &domains[s];
            if counts.len() < c.spread[s].min_domains {
                0
            } else {
                counts.values().copied().min().unwrap_or(0)
            }
        })
        .collect();
    let mut placed = 0u64;
    loop {
        let before = placed;
        for (f, &(i, _)) in feasible.iter().enumerate() {
            let labels = nodes[i].labels;
            while left[f] > 0 && placed < limit {
                let anti_ok = self_keys
                    .iter()
                    .zip(&used)
                    .all(|(key, used)| label(labels, key).is_none_or(|v| !used.contains(v)));
                let spread_ok = self_spread.iter().zip(&minima).all(|(&s, &min)| {
                    let v = label(labels, &c.spread[s].key).unwrap_or_default();
                    domains[s].get(v).copied().unwrap_or(0) < min + c.spread[s].max_skew
                });
                if !(anti_ok && spread_ok) {
                    break;
                }
                left[f] -= 1;
                placed += 1;
                for (key, used) in self_keys.iter().zip(&mut used) {
                    if let Some(v) = label(labels, key) {
                        used.insert(v);
                    }
                }
                for (&s, min) in self_spread.iter().zip(&mut minima) {
                    let v = label(labels, &c.spread[s].key).unwrap_or_default();
                    *domains[s].entry(v).or_default() += 1;
                    if domains[s].len() >= c.spread[s].min_domains {
                        *min = domains[s].values().copied().min().unwrap_or(0);
                    }
                }
            }
        }
        if placed == before || placed >= limit {
            return placed;
        }
    }
}
