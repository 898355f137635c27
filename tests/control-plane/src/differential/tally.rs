//! The live check's outcomes counted by what each placement uses, so a run says which parts of
//! the engine it exercised and where any disagreement sits.

use std::collections::BTreeMap;

use serde_json::Value;

/// A part of the Placement API a generated placement may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    LabelSelector,
    ClaimSelector,
    Cel,
    ClusterSets,
    NumberOfClusters,
    Tolerations,
    AddOnScores,
    BuiltInPrioritizers,
    ExactMode,
    DecisionGroups,
    ClustersPerDecisionGroup,
}

impl Feature {
    pub const ALL: [Feature; 11] = [
        Feature::LabelSelector,
        Feature::ClaimSelector,
        Feature::Cel,
        Feature::ClusterSets,
        Feature::NumberOfClusters,
        Feature::Tolerations,
        Feature::AddOnScores,
        Feature::BuiltInPrioritizers,
        Feature::ExactMode,
        Feature::DecisionGroups,
        Feature::ClustersPerDecisionGroup,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Feature::LabelSelector => "selectors: labels",
            Feature::ClaimSelector => "selectors: claims",
            Feature::Cel => "selectors: CEL",
            Feature::ClusterSets => "clusterSets",
            Feature::NumberOfClusters => "numberOfClusters",
            Feature::Tolerations => "taints: tolerations",
            Feature::AddOnScores => "prioritizers: AddOn scores",
            Feature::BuiltInPrioritizers => "prioritizers: built-in",
            Feature::ExactMode => "prioritizers: Exact mode",
            Feature::DecisionGroups => "decision groups: named",
            Feature::ClustersPerDecisionGroup => "decision groups: clustersPerDecisionGroup",
        }
    }
}

/// The features `placement` (as the user wrote it) uses.
pub fn features(placement: &Value) -> Vec<Feature> {
    let spec = &placement["spec"];
    let predicates = spec["predicates"].as_array().cloned().unwrap_or_default();
    let selector = |field: &str| {
        predicates
            .iter()
            .any(|p| !p["requiredClusterSelector"][field].is_null())
    };
    let configurations = spec["prioritizerPolicy"]["configurations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let coordinate = |kind: &str| {
        configurations
            .iter()
            .any(|c| c["scoreCoordinate"]["type"] == kind)
    };
    let groups = &spec["decisionStrategy"]["groupStrategy"];
    let has = [
        (Feature::LabelSelector, selector("labelSelector")),
        (Feature::ClaimSelector, selector("claimSelector")),
        (Feature::Cel, selector("celSelector")),
        (Feature::ClusterSets, !spec["clusterSets"].is_null()),
        (Feature::NumberOfClusters, !spec["numberOfClusters"].is_null()),
        (
            Feature::Tolerations,
            spec["tolerations"].as_array().is_some_and(|t| !t.is_empty()),
        ),
        (Feature::AddOnScores, coordinate("AddOn")),
        (Feature::BuiltInPrioritizers, coordinate("BuiltIn")),
        (Feature::ExactMode, spec["prioritizerPolicy"]["mode"] == "Exact"),
        (
            Feature::DecisionGroups,
            groups["decisionGroups"].as_array().is_some_and(|g| !g.is_empty()),
        ),
        (
            Feature::ClustersPerDecisionGroup,
            !groups["clustersPerDecisionGroup"].is_null(),
        ),
    ];
    has.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
}

/// What happened to one placement.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub features: Vec<Feature>,
    /// OCM selected at least one cluster.
    pub selected: bool,
    /// OCM and the prediction both said misconfigured.
    pub misconfigured: bool,
    /// The prediction from the snapshot taken before the placement existed equals OCM's first
    /// decision.
    pub first_agrees: bool,
    /// Consistency, not a prediction: `simulate` on the snapshot taken once OCM settled the
    /// placement (OCM's own decisions in it) equals OCM's settled answer.
    pub settled_consistent: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Row {
    placements: usize,
    selected: usize,
    misconfigured: usize,
    first_agrees: usize,
    settled_consistent: usize,
}

impl Row {
    fn add(&mut self, o: &Outcome) {
        self.placements += 1;
        self.selected += usize::from(o.selected);
        self.misconfigured += usize::from(o.misconfigured);
        self.first_agrees += usize::from(o.first_agrees);
        self.settled_consistent += usize::from(o.settled_consistent);
    }
}

/// The outcomes of a run.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    outcomes: Vec<Outcome>,
}

impl Tally {
    pub fn add(&mut self, outcome: Outcome) {
        self.outcomes.push(outcome);
    }

    fn all(&self) -> Row {
        let mut row = Row::default();
        self.outcomes.iter().for_each(|o| row.add(o));
        row
    }

    pub fn placements(&self) -> usize {
        self.outcomes.len()
    }

    /// Placements for which OCM selected at least one cluster.
    pub fn selected(&self) -> usize {
        self.all().selected
    }

    /// Placements both sides called misconfigured.
    pub fn misconfigured(&self) -> usize {
        self.all().misconfigured
    }

    /// Placements on which either comparison failed.
    pub fn disagreements(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| !o.first_agrees || !o.settled_consistent)
            .count()
    }

    /// A markdown table: every placement, then each feature's placements.
    pub fn table(&self) -> String {
        let mut rows: BTreeMap<Feature, Row> = BTreeMap::new();
        for o in &self.outcomes {
            for f in &o.features {
                rows.entry(*f).or_default().add(o);
            }
        }
        let mut out = String::from(
            "| placements using | placements | selected clusters | misconfigured | first decision predicted | consistent once settled |\n\
             |---|---:|---:|---:|---:|---:|\n",
        );
        let line = |name: &str, r: Row| {
            format!(
                "| {name} | {} | {} | {} | {} | {} |\n",
                r.placements, r.selected, r.misconfigured, r.first_agrees, r.settled_consistent
            )
        };
        out.push_str(&line("(all)", self.all()));
        for f in Feature::ALL {
            out.push_str(&line(f.label(), rows.get(&f).copied().unwrap_or_default()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn features_name_what_the_spec_uses() {
        let p = json!({"spec": {
            "predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": ["true"]}}}],
            "tolerations": [{"operator": "Exists"}],
            "prioritizerPolicy": {"mode": "Exact", "configurations": [
                {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "r", "scoreName": "s"}}},
            ]},
            "decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "50%"}},
        }});
        assert_eq!(
            features(&p),
            vec![
                Feature::Cel,
                Feature::Tolerations,
                Feature::AddOnScores,
                Feature::ExactMode,
                Feature::ClustersPerDecisionGroup
            ]
        );
        assert_eq!(features(&json!({"spec": {"tolerations": []}})), vec![]);
    }

    #[test]
    fn the_table_counts_each_feature_and_the_whole() {
        let mut tally = Tally::default();
        let outcome = |features: Vec<Feature>, selected, first_agrees| Outcome {
            features,
            selected,
            misconfigured: !selected,
            first_agrees,
            settled_consistent: true,
        };
        tally.add(outcome(vec![Feature::Cel], true, true));
        tally.add(outcome(vec![Feature::Cel, Feature::Tolerations], false, false));
        tally.add(outcome(vec![], true, true));
        assert_eq!(
            (tally.placements(), tally.selected(), tally.misconfigured()),
            (3, 2, 1)
        );
        assert_eq!(tally.disagreements(), 1);
        let table = tally.table();
        assert!(table.contains("| (all) | 3 | 2 | 1 | 2 | 3 |"), "{table}");
        assert!(
            table.contains("| selectors: CEL | 2 | 1 | 1 | 1 | 2 |"),
            "{table}"
        );
        assert!(
            table.contains("| taints: tolerations | 1 | 0 | 1 | 0 | 1 |"),
            "{table}"
        );
        assert!(table.contains("| clusterSets | 0 | 0 | 0 | 0 | 0 |"), "{table}");
    }
}
