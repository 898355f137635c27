//! Kubernetes label selectors and OCM's cluster selector (labels AND claims AND CEL).
//!
//! Semantics follow `metav1.LabelSelectorAsSelector`: a nil selector selects nothing, an empty one
//! selects everything, and every requirement is validated (key, operator, values) with
//! apimachinery's messages, because those messages end up in the `PlacementMisconfigured`
//! condition.

use super::cel::{self, ClusterActivation};
use super::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::{ClusterSelector, LabelSelector, LabelSelectorRequirement, ManagedCluster};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One validated requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    /// The same text as apimachinery's `Requirement.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, self.values.first().map_or("", |v| v)),
            Operator::In => write!(f, "{} in ({})", self.key, sorted(&self.values).join(",")),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, sorted(&self.values).join(",")),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
        }
    }
}

/// Splits at commas outside parentheses (`a in (x,y),b` is two terms).
fn split_outside_parentheses(text: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn sorted(values: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = values.iter().map(String::as_str).collect();
    v.sort_unstable();
    v
}

/// A label selector after validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelMatcher {
    Nothing,
    Everything,
    All(Vec<Requirement>),
}

impl LabelMatcher {
    /// `LabelSelectorAsSelector`: `None` selects nothing.
    pub fn from_selector(selector: Option<&LabelSelector>) -> Result<Self, String> {
        match selector {
            None => Ok(LabelMatcher::Nothing),
            Some(s) => Self::from_parts(
                s.match_labels.as_ref(),
                s.match_expressions.as_deref().unwrap_or(&[]),
            ),
        }
    }

    /// For the value-typed selectors in a Placement, where an absent selector is an empty one.
    pub fn from_optional_everything(selector: Option<&LabelSelector>) -> Result<Self, String> {
        match selector {
            None => Ok(LabelMatcher::Everything),
            Some(s) => Self::from_selector(Some(s)),
        }
    }

    /// The text form of a label selector, as the API's `labelSelector` query parameter and
    /// `kubectl -l` take it: `env=prod`, `env==prod`, `tier!=gold`, `gpu`, `!legacy`,
    /// `region in (a,b)`, `team notin (x)`, comma separated. Empty text selects everything.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(LabelMatcher::Everything);
        }
        let mut requirements = Vec::new();
        for term in split_outside_parentheses(text).into_iter().map(str::trim) {
            let values_in = |list: &str| -> Result<Vec<String>, String> {
                let inner = list
                    .trim()
                    .strip_prefix('(')
                    .and_then(|l| l.strip_suffix(')'))
                    .ok_or_else(|| format!("found '{}', expected: '(' and ')'", list.trim()))?;
                Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
            };
            let (key, operator, values) = if let Some(key) = term.strip_prefix('!') {
                (key, Operator::DoesNotExist, Vec::new())
            } else if let Some((key, value)) = term.split_once("!=") {
                (key, Operator::NotIn, vec![value.trim().to_owned()])
            } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (key, Operator::Equals, vec![value.trim().to_owned()])
            } else if let Some((key, list)) = term.split_once(" notin ") {
                (key, Operator::NotIn, values_in(list)?)
            } else if let Some((key, list)) = term.split_once(" in ") {
                (key, Operator::In, values_in(list)?)
            } else {
                (term, Operator::Exists, Vec::new())
            };
            requirements.push(new_requirement(key.trim(), operator, &values)?);
        }
        Ok(LabelMatcher::All(requirements))
    }

    /// A selector made only of match expressions (OCM's claim selector).
    pub fn from_expressions(expressions: &[LabelSelectorRequirement]) -> Result<Self, String> {
        Self::from_parts(None, expressions)
    }

    fn from_parts(
        match_labels: Option<&BTreeMap<String, String>>,
        expressions: &[LabelSelectorRequirement],
    ) -> Result<Self, String> {
        let labels_len = match_labels.map_or(0, BTreeMap::len);
        if labels_len + expressions.len() == 0 {
            return Ok(LabelMatcher::Everything);
        }
        let mut requirements = Vec::with_capacity(labels_len + expressions.len());
        for (k, v) in match_labels.into_iter().flatten() {
            requirements.push(new_requirement(k, Operator::Equals, std::slice::from_ref(v))?);
        }
        for expr in expressions {
            let op = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push(new_requirement(
                &expr.key,
                op,
                expr.values.as_deref().unwrap_or(&[]),
            )?);
        }
        Ok(LabelMatcher::All(requirements))
    }

    pub fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.first_unmatched(lookup).is_none()
    }

    /// The first requirement that fails, or `None` when the selector matches. `Nothing` fails
    /// without a requirement to blame, reported as `Some(None)`.
    pub fn first_unmatched<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<Option<&Requirement>> {
        match self {
            LabelMatcher::Nothing => Some(None),
            LabelMatcher::Everything => None,
            LabelMatcher::All(reqs) => reqs.iter().find(|r| !r.matches(lookup(&r.key))).map(Some),
        }
    }
}

/// `labels.NewRequirement` with its validation.
fn new_requirement(key: &str, operator: Operator, values: &[String]) -> Result<Requirement, String> {
    let mut errors = Vec::new();
    if let Some(msg) = validate_qualified_name(key) {
        errors.push(format!("key: Invalid value: {key:?}: {msg}"));
    }
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => errors.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            go_string_slice(values)
        )),
        Operator::Equals if values.len() != 1 => errors.push(format!(
            "values: Invalid value: {}: exact-match compatibility requires one single value",
            go_string_slice(values)
        )),
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errors.push(format!(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            go_string_slice(values)
        )),
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        if let Some(msg) = validate_label_value(v) {
            errors.push(format!("values[{i}]: Invalid value: {v:?}: {msg}"));
        }
    }
    match errors.len() {
        0 => Ok(Requirement {
            key: key.to_string(),
            operator,
            values: values.to_vec(),
        }),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// Go's `%#v` of a `[]string`.
fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

const QUALIFIED_NAME_FMT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && is_lower_alnum(b[0])
            && is_lower_alnum(b[b.len() - 1])
            && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
    })
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `validation.IsQualifiedName`; `None` when valid.
fn validate_qualified_name(key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            return Some(format!(
                "a qualified name {QUALIFIED_NAME_FMT} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
        }
    };
    let mut msgs = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            msgs.push("prefix part must be non-empty".to_string());
        } else {
            if prefix.len() > 253 {
                msgs.push("prefix part must be no more than 253 characters".to_string());
            }
            if !is_dns1123_subdomain(prefix) {
                msgs.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
            }
        }
    }
    if name.is_empty() {
        msgs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            msgs.push("name part must be no more than 63 characters".to_string());
        }
        if !is_qualified_name_part(name) {
            msgs.push(format!("name part {QUALIFIED_NAME_FMT}"));
        }
    }
    (!msgs.is_empty()).then(|| msgs.join("; "))
}

/// `validation.IsValidLabelValue`; `None` when valid.
fn validate_label_value(value: &str) -> Option<String> {
    let mut msgs = Vec::new();
    if value.len() > 63 {
        msgs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        msgs.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string());
    }
    (!msgs.is_empty()).then(|| msgs.join("; "))
}

/// `status.clusterClaims` as a map; on a duplicate name the last claim wins.
pub fn cluster_claims(cluster: &ManagedCluster) -> BTreeMap<&str, &str> {
    cluster
        .status
        .iter()
        .flat_map(|s| s.cluster_claims.iter())
        .map(|c| (c.name.as_str(), c.value.as_str()))
        .collect()
}

/// Why a cluster selector did not match a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorMiss {
    /// A label requirement failed (text as `labels.Requirement.String()`).
    Label(String),
    /// A claim requirement failed.
    Claim(String),
    /// A CEL expression did not evaluate to `true`.
    Cel { expression: String, reason: String },
}

impl fmt::Display for SelectorMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectorMiss::Label(r) => write!(f, "label requirement `{r}` not met"),
            SelectorMiss::Claim(r) => write!(f, "claim requirement `{r}` not met"),
            SelectorMiss::Cel { expression, reason } => write!(f, "CEL `{expression}` {reason}"),
        }
    }
}

/// A compiled `requiredClusterSelector` / `groupClusterSelector`: labels AND claims AND CEL.
#[derive(Clone, Debug)]
pub struct ClusterMatcher {
    labels: LabelMatcher,
    claims: LabelMatcher,
    cel: Vec<(String, Result<cel::Program, String>)>,
}

impl ClusterMatcher {
    /// Builds the selector. Invalid label or claim selectors are errors (OCM's Misconfigured);
    /// CEL compile errors are kept, see [`ClusterMatcher::cel_compile_error`].
    pub fn new(selector: &ClusterSelector) -> Result<Self, String> {
        let labels = LabelMatcher::from_optional_everything(selector.label_selector.as_ref())?;
        let claims = LabelMatcher::from_expressions(
            selector
                .claim_selector
                .as_ref()
                .map_or(&[][..], |c| c.match_expressions.as_slice()),
        )?;
        let cel = selector
            .cel_selector
            .iter()
            .flat_map(|c| c.cel_expressions.iter())
            .map(|e| (e.clone(), cel::Program::compile(e)))
            .collect();
        Ok(Self { labels, claims, cel })
    }

    /// The first CEL compile error, formatted as OCM reports it.
    pub fn cel_compile_error(&self) -> Option<String> {
        self.cel.iter().find_map(|(_, p)| p.as_ref().err()).cloned()
    }

    /// Whether the cluster matches; the same answer as [`ClusterMatcher::miss`], without
    /// building the reason. Over many clusters, [`ClusterMatcher::bind`] once instead.
    pub fn matches(&self, snapshot: &HubSnapshot, id: ClusterId) -> bool {
        self.bind(snapshot).matches(id)
    }

    /// Why the cluster does not match, or `None` when it does.
    pub fn miss(&self, snapshot: &HubSnapshot, id: ClusterId) -> Option<SelectorMiss> {
        self.bind(snapshot).miss(id)
    }

    /// The selector ready to run over the clusters of `snapshot`: its CEL programs resolve the
    /// snapshot's names once, not per cluster.
    pub fn bind<'m, 's>(&'m self, snapshot: &'s HubSnapshot) -> BoundMatcher<'m, 's> {
        BoundMatcher {
            matcher: self,
            snapshot,
            cel: self
                .cel
                .iter()
                .map(|(expression, program)| (expression, program.as_ref().map(|p| p.bind(snapshot))))
                .collect(),
        }
    }
}

/// A [`ClusterMatcher`] bound to one snapshot (see [`ClusterMatcher::bind`]).
pub struct BoundMatcher<'m, 's> {
    matcher: &'m ClusterMatcher,
    snapshot: &'s HubSnapshot,
    cel: Vec<(&'m String, Result<cel::BoundProgram<'m, 's>, &'m String>)>,
}

impl BoundMatcher<'_, '_> {
    /// Whether the cluster matches; the same answer as [`BoundMatcher::miss`], without
    /// building the reason (the scheduler asks this for every cluster).
    pub fn matches(&self, id: ClusterId) -> bool {
        let snapshot = self.snapshot;
        if !self.labels_and_claims_match(id) {
            return false;
        }
        if self.cel.is_empty() {
            return true;
        }
        let activation = ClusterActivation::new(snapshot, id);
        self.cel
            .iter()
            .all(|(_, program)| matches!(program, Ok(p) if p.is_true(&activation)))
    }

    /// Reads the cluster only for a requirement, so that a CEL-only selector does not touch it.
    fn labels_and_claims_match(&self, id: ClusterId) -> bool {
        let snapshot = self.snapshot;
        self.matcher.labels.matches(|k| snapshot.cluster_label(id, k))
            && self.matcher.claims.matches(|k| snapshot.claim_value(id, k))
    }

    /// Why the cluster does not match, or `None` when it does.
    pub fn miss(&self, id: ClusterId) -> Option<SelectorMiss> {
        let snapshot = self.snapshot;
        if let Some(req) = self
            .matcher
            .labels
            .first_unmatched(|k| snapshot.cluster_label(id, k))
        {
            return Some(SelectorMiss::Label(
                req.map_or_else(|| "<nothing>".into(), |r| r.to_string()),
            ));
        }
        if let Some(req) = self
            .matcher
            .claims
            .first_unmatched(|k| snapshot.claim_value(id, k))
        {
            return Some(SelectorMiss::Claim(
                req.map_or_else(|| "<nothing>".into(), |r| r.to_string()),
            ));
        }
        if self.cel.is_empty() {
            return None;
        }
        let activation = ClusterActivation::new(snapshot, id);
        for (expression, program) in &self.cel {
            let reason = match program {
                Err(e) => format!("does not compile: {e}"),
                Ok(p) => match p.eval_bool(&activation) {
                    Ok(true) => continue,
                    Ok(false) => "evaluated to false".to_string(),
                    Err(e) => format!("failed: {e}"),
                },
            };
            return Some(SelectorMiss::Cel {
                expression: (*expression).clone(),
                reason,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v)
    }

    #[test]
    fn the_text_form_parses_as_the_api_server_reads_it() {
        let m =
            LabelMatcher::parse("env in (prod, dev),!legacy,tier!=gold,gpu,team==a,zone=z1").expect("parses");
        let LabelMatcher::All(reqs) = &m else {
            panic!("{m:?}")
        };
        let text: Vec<String> = reqs.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "env in (dev,prod)",
                "!legacy",
                "tier notin (gold)",
                "gpu",
                "team=a",
                "zone=z1"
            ]
        );
        let ok = [("env", "prod"), ("gpu", "1"), ("team", "a"), ("zone", "z1")];
        assert!(m.matches(labels(&ok)));
        let gold = [
            ("env", "prod"),
            ("gpu", "1"),
            ("team", "a"),
            ("zone", "z1"),
            ("tier", "gold"),
        ];
        assert!(!m.matches(labels(&gold)));
        assert_eq!(LabelMatcher::parse(" "), Ok(LabelMatcher::Everything));
    }

    #[test]
    fn bad_text_is_refused_with_what_is_wrong() {
        let err = |t: &str| LabelMatcher::parse(t).expect_err(t);
        assert!(
            err("env in (a").contains("expected: '(' and ')'"),
            "{}",
            err("env in (a")
        );
        assert!(
            err("bad key!=x").contains("key: Invalid value"),
            "{}",
            err("bad key!=x")
        );
        assert!(
            err("env=not valid").contains("values[0]: Invalid value"),
            "{}",
            err("env=not valid")
        );
        assert!(
            err("env=a,,b").contains("key: Invalid value: \"\""),
            "{}",
            err("env=a,,b")
        );
    }
}
