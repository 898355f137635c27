//! The boolean skeleton of a predicate, planned at compile time and bound to a snapshot once
//! per sync, so that the per-cluster loop compares interned ids instead of walking the tree.
//!
//! A [`Test`] covers `&&`, `||`, `!`, bool constants, `matches` of a cluster's name or label
//! against a constant pattern, comparisons of a cluster's name or label with a string
//! constant, and `all`/`exists`/`exists_one` over `managedCluster.scores('<constant>')` with a
//! planned body. Everything else stays a [`Node`] evaluated by the tree walk. Each test charges
//! the cost budget exactly as the walk of its node would, and gives the same result and the
//! same error text (a test compares the two at every budget); errors are kept unformatted
//! ([`Fail`]) until someone asks for the reason.
//!
//! [`Binding`] holds what depends on the snapshot: the interned ids of the label keys and
//! values, resource and score names the plan uses, and per pattern the answers already
//! computed for each interned label value (a regular expression runs once per distinct value
//! and sync, not once per cluster).

use super::ClusterActivation;
use super::eval::{COST_LIMIT_EXCEEDED, Evaluator, ordered_binary, spend};
use super::node::{ItemField, ItemPredicate, Macro, Node, RegexOp};
use super::syntax::BinaryOp;
use super::value::{Key, Value, no_overload};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use regex::Regex;
use std::cell::{Cell, OnceCell};
use std::sync::Arc;

/// The planned form of a checked expression.
#[derive(Clone, Debug)]
pub struct Plan {
    test: Test,
    /// What each id slot of the plan names (resolved by [`Plan::bind`]).
    slots: Vec<Interned>,
    /// How many patterns keep answers per label value.
    memos: usize,
}

#[derive(Clone, Debug)]
enum Interned {
    Label(Arc<str>),
    ScoreName(Arc<str>),
}

/// A string of the cluster that the snapshot holds.
#[derive(Clone, Debug)]
enum RootText {
    /// `managedCluster.metadata.name`.
    Name,
    /// `managedCluster.metadata.labels[key]`; `slot` holds the key's label id.
    Label { key: Arc<str>, slot: usize },
}

impl RootText {
    /// The path [`super::ClusterActivation`] answers from the snapshot, as the walk charges it.
    fn of(path: &[(Key, bool)], slots: &mut Vec<Interned>) -> Option<RootText> {
        let field = |i: usize| match path.get(i) {
            Some((Key::String(s), _)) => Some(s),
            _ => None,
        };
        match (path.len(), field(0).map(|s| &**s), field(1).map(|s| &**s)) {
            (2, Some("metadata"), Some("name")) => Some(RootText::Name),
            (3, Some("metadata"), Some("labels")) => {
                let key = field(2)?.clone();
                slots.push(Interned::Label(key.clone()));
                Some(RootText::Label {
                    key,
                    slot: slots.len() - 1,
                })
            }
            _ => None,
        }
    }

    /// The steps of the path, as `Node::RootPath` charges them.
    fn path_len(&self) -> usize {
        match self {
            RootText::Name => 2,
            RootText::Label { .. } => 3,
        }
    }
}

#[derive(Clone, Debug)]
enum Test {
    Const(bool),
    And(Box<Test>, Box<Test>),
    Or(Box<Test>, Box<Test>),
    Not(Box<Test>),
    /// `<root text>.matches('<constant>')`.
    Matches {
        text: RootText,
        regex: Arc<Regex>,
        literals: Option<Vec<Arc<str>>>,
        memo: usize,
        /// The whole call, walked when the snapshot cannot lend the text.
        node: Box<Node>,
    },
    /// `<root text> <op> '<constant>'`, or the constant first.
    Compare {
        text: RootText,
        op: BinaryOp,
        constant: Arc<str>,
        /// The slot of the constant's label id, for `==`/`!=` on a label.
        constant_slot: Option<usize>,
        constant_first: bool,
        node: Box<Node>,
    },
    /// `managedCluster.scores('<resource>').<kind>(s, <body>)`.
    Quantifier {
        kind: Macro,
        resource: Arc<str>,
        resource_slot: usize,
        body: ItemTest,
    },
    Walk(Box<Node>),
}

/// A planned [`ItemPredicate`], with `==`/`!=` on `s.name` compared by interned id.
#[derive(Clone, Debug)]
enum ItemTest {
    And(Box<ItemTest>, Box<ItemTest>),
    Or(Box<ItemTest>, Box<ItemTest>),
    Name {
        op: BinaryOp,
        text: Arc<str>,
        /// The slot of `text`'s score-name id when `op` is `==` or `!=`.
        slot: Option<usize>,
    },
    Value {
        op: BinaryOp,
        int: i64,
    },
}

fn is_comparison(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
    )
}

impl Plan {
    /// Plans the boolean skeleton of `node`.
    pub fn new(node: &Node) -> Plan {
        let mut plan = Plan {
            test: Test::Const(false),
            slots: Vec::new(),
            memos: 0,
        };
        plan.test = plan.test_of(node);
        plan
    }

    fn test_of(&mut self, node: &Node) -> Test {
        match node {
            Node::Const(Value::Bool(b)) => Test::Const(*b),
            Node::And(l, r) => Test::And(Box::new(self.test_of(l)), Box::new(self.test_of(r))),
            Node::Or(l, r) => Test::Or(Box::new(self.test_of(l)), Box::new(self.test_of(r))),
            Node::Not(inner) => Test::Not(Box::new(self.test_of(inner))),
            Node::Regex {
                op: RegexOp::Matches,
                text,
                regex: Ok(regex),
                limit: None,
                literals,
            } => match &**text {
                Node::RootPath(path) => match RootText::of(path, &mut self.slots) {
                    Some(text) => {
                        self.memos += 1;
                        Test::Matches {
                            text,
                            regex: regex.clone(),
                            literals: literals.clone(),
                            memo: self.memos - 1,
                            node: Box::new(node.clone()),
                        }
                    }
                    None => Test::Walk(Box::new(node.clone())),
                },
                _ => Test::Walk(Box::new(node.clone())),
            },
            Node::Binary(op, l, r) if is_comparison(*op) => {
                let (path, constant, constant_first) = match (&**l, &**r) {
                    (Node::RootPath(p), Node::Const(Value::String(c))) => (p, c, false),
                    (Node::Const(Value::String(c)), Node::RootPath(p)) => (p, c, true),
                    _ => return Test::Walk(Box::new(node.clone())),
                };
                let Some(text) = RootText::of(path, &mut self.slots) else {
                    return Test::Walk(Box::new(node.clone()));
                };
                let constant_slot = match (&text, op) {
                    (RootText::Label { .. }, BinaryOp::Eq | BinaryOp::Ne) => {
                        self.slots.push(Interned::Label(constant.clone()));
                        Some(self.slots.len() - 1)
                    }
                    _ => None,
                };
                Test::Compare {
                    text,
                    op: *op,
                    constant: constant.clone(),
                    constant_slot,
                    constant_first,
                    node: Box::new(node.clone()),
                }
            }
            Node::Comprehension {
                kind: kind @ (Macro::All | Macro::Exists | Macro::ExistsOne),
                range,
                item_body: Some(body),
                ..
            } => match &**range {
                Node::Scores { target, resource } => match (&**target, &**resource) {
                    (Node::Root, Node::Const(Value::String(resource))) => {
                        self.slots.push(Interned::ScoreName(resource.clone()));
                        let resource_slot = self.slots.len() - 1;
                        Test::Quantifier {
                            kind: *kind,
                            resource: resource.clone(),
                            resource_slot,
                            body: self.item_test(body),
                        }
                    }
                    _ => Test::Walk(Box::new(node.clone())),
                },
                _ => Test::Walk(Box::new(node.clone())),
            },
            other => Test::Walk(Box::new(other.clone())),
        }
    }

    fn item_test(&mut self, p: &ItemPredicate) -> ItemTest {
        match p {
            ItemPredicate::And(l, r) => {
                ItemTest::And(Box::new(self.item_test(l)), Box::new(self.item_test(r)))
            }
            ItemPredicate::Or(l, r) => ItemTest::Or(Box::new(self.item_test(l)), Box::new(self.item_test(r))),
            ItemPredicate::Compare {
                field: ItemField::Name,
                op,
                text,
                ..
            } => {
                let slot = matches!(op, BinaryOp::Eq | BinaryOp::Ne).then(|| {
                    self.slots.push(Interned::ScoreName(text.clone()));
                    self.slots.len() - 1
                });
                ItemTest::Name {
                    op: *op,
                    text: text.clone(),
                    slot,
                }
            }
            ItemPredicate::Compare {
                field: ItemField::Value,
                op,
                int,
                ..
            } => ItemTest::Value { op: *op, int: *int },
        }
    }

    /// Resolves the plan's names against `snapshot`, for one pass over its clusters.
    pub fn bind(&self, snapshot: &HubSnapshot) -> Binding {
        let ids = self
            .slots
            .iter()
            .map(|s| match s {
                Interned::Label(text) => snapshot.label_id(text),
                Interned::ScoreName(text) => snapshot.score_name_id(text),
            })
            .collect();
        let memos = (0..self.memos).map(|_| Memo::default()).collect();
        Binding {
            ids,
            memos,
            label_values: snapshot.label_text_count(),
        }
    }

    /// Evaluates the plan for the cluster of `activation`, charging its budget.
    pub fn eval<'p>(
        &'p self,
        binding: &Binding,
        activation: &ClusterActivation<'_>,
    ) -> Result<bool, Fail<'p>> {
        Run {
            binding,
            activation,
            budget: &activation.budget,
        }
        .test(&self.test)
    }
}

const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;

/// A plan's names resolved against one snapshot, and the answers of its patterns so far.
#[derive(Debug)]
pub struct Binding {
    ids: Vec<Option<u32>>,
    memos: Vec<Memo>,
    /// How many label texts the snapshot interned (the size of a memo).
    label_values: usize,
}

/// A pattern's answers by label value id, made at its second use, so that a binding used for
/// one cluster (an explanation) allocates nothing.
#[derive(Debug, Default)]
struct Memo {
    answers: OnceCell<Box<[Cell<u8>]>>,
    used: Cell<bool>,
}

impl Binding {
    /// The answer slot of pattern `memo` for label value `value`, once it is worth keeping.
    fn memo(&self, memo: usize, value: u32) -> Option<&Cell<u8>> {
        let m = self.memos.get(memo)?;
        if m.answers.get().is_none() && !m.used.replace(true) {
            return None;
        }
        let answers = m
            .answers
            .get_or_init(|| (0..self.label_values).map(|_| Cell::new(UNKNOWN)).collect());
        answers.get(value as usize)
    }
}

/// Why a planned test did not give a bool; formatted only when the reason is wanted. Two words,
/// so that `Result<bool, Fail>` is returned in registers, not through memory.
#[derive(Debug)]
pub enum Fail<'p> {
    CostLimit,
    NoSuchKey(&'p Arc<str>),
    ScoreNotFound(&'p Arc<str>),
    /// The walk gave a value that is not a bool (not an error yet: `&&` and `||` may absorb it).
    NotBool(Box<Value>),
    /// Boxed to keep the enum two words (a `String` alone is three).
    #[allow(clippy::box_collection)]
    Error(Box<String>),
}

/// The cost budget ran out (the only way a planned score-item body fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OutOfBudget;

impl From<OutOfBudget> for Fail<'_> {
    fn from(_: OutOfBudget) -> Self {
        Fail::CostLimit
    }
}

impl Fail<'_> {
    /// The error text the tree walk gives. `NotBool` is not an error by itself; as one it reads
    /// like [`super::Program::eval_bool`]'s.
    pub fn message(self) -> String {
        match self {
            Fail::CostLimit => COST_LIMIT_EXCEEDED.to_string(),
            Fail::NoSuchKey(k) => format!("no such key: {k}"),
            Fail::ScoreNotFound(r) => format!(
                "failed to get score: addonplacementscores.cluster.open-cluster-management.io \"{r}\" not found"
            ),
            Fail::NotBool(v) => format!("returned a {} instead of a bool", v.type_name()),
            Fail::Error(e) => *e,
        }
    }

    /// The walk's result for the same node: a non-bool value is a value.
    #[cfg(test)]
    pub fn into_walk_result(result: Result<bool, Fail<'_>>) -> super::value::EvalResult {
        match result {
            Ok(b) => Ok(Value::Bool(b)),
            Err(Fail::NotBool(v)) => Ok(*v),
            Err(f) => Err(f.message()),
        }
    }
}

struct Run<'r, 's> {
    binding: &'r Binding,
    activation: &'r ClusterActivation<'s>,
    budget: &'r Cell<u64>,
}

impl<'s> Run<'_, 's> {
    /// As `Evaluator::charge`.
    #[inline]
    fn charge(&self, units: usize) -> Result<(), OutOfBudget> {
        if spend(self.budget, units) {
            Ok(())
        } else {
            Err(OutOfBudget)
        }
    }

    #[inline]
    fn id(&self, slot: usize) -> Option<u32> {
        self.binding.ids.get(slot).copied().flatten()
    }

    fn snapshot(&self) -> &'s HubSnapshot {
        self.activation.snapshot
    }

    fn cluster(&self) -> ClusterId {
        self.activation.id
    }

    fn walk<'p>(&self, node: &Node) -> Result<bool, Fail<'p>> {
        match Evaluator::new(self.activation, self.budget).eval(node) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(Fail::NotBool(Box::new(other))),
            Err(e) if e == COST_LIMIT_EXCEEDED => Err(Fail::CostLimit),
            Err(e) => Err(Fail::Error(Box::new(e))),
        }
    }

    /// The cluster's `text` as the snapshot holds it: `None` when the walk must read it from
    /// the cluster's JSON (no name, or no `metadata.labels` at all), otherwise the text and its
    /// label id, or the missing key.
    #[inline(always)]
    fn root_text<'p>(&self, text: &'p RootText) -> Option<Result<(&'s str, Option<u32>), Fail<'p>>> {
        let snapshot = self.snapshot();
        match text {
            RootText::Name => snapshot
                .cluster_metadata_name(self.cluster())
                .map(|n| Ok((n, None))),
            RootText::Label { key, slot } => {
                if !snapshot.has_labels(self.cluster()) {
                    return None;
                }
                let value = self
                    .id(*slot)
                    .and_then(|k| snapshot.label_value_id(self.cluster(), k))
                    .and_then(|v| Some((&**snapshot.label_text(v)?, Some(v))));
                Some(value.ok_or(Fail::NoSuchKey(key)))
            }
        }
    }

    fn test<'p>(&self, t: &'p Test) -> Result<bool, Fail<'p>> {
        match t {
            Test::Const(b) => {
                self.charge(1)?;
                Ok(*b)
            }
            Test::And(l, r) => self.logical(l, r, false),
            Test::Or(l, r) => self.logical(l, r, true),
            Test::Not(inner) => {
                self.charge(1)?;
                match self.test(inner) {
                    Ok(b) => Ok(!b),
                    Err(Fail::NotBool(v)) => Err(Fail::Error(Box::new(no_overload("!_", &[&v])))),
                    Err(f) => Err(f),
                }
            }
            Test::Matches {
                text,
                regex,
                literals,
                memo,
                node,
            } => {
                let Some(found) = self.root_text(text) else {
                    return self.walk(node);
                };
                // The call, then the path and its root (see `Evaluator::operand`).
                self.charge(2 + text.path_len())?;
                let (s, value_id) = found?;
                self.charge(s.len())?;
                let decide = || match literals {
                    Some(set) => set.iter().any(|l| **l == *s),
                    None => regex.is_match(s),
                };
                let memo = value_id.and_then(|v| self.binding.memo(*memo, v));
                Ok(match memo {
                    Some(cell) => match cell.get() {
                        UNKNOWN => {
                            let yes = decide();
                            cell.set(if yes { YES } else { NO });
                            yes
                        }
                        known => known == YES,
                    },
                    None => decide(),
                })
            }
            Test::Compare {
                text,
                op,
                constant,
                constant_slot,
                constant_first,
                node,
            } => {
                let Some(found) = self.root_text(text) else {
                    return self.walk(node);
                };
                // The comparison, the path and its root (see `Evaluator::operand`), and the
                // constant: before the lookup when it comes first, after it otherwise.
                let constant_first_units = usize::from(*constant_first);
                self.charge(2 + text.path_len() + constant_first_units)?;
                let (s, value_id) = found?;
                self.charge(1 - constant_first_units + s.len() + constant.len())?;
                let result = match (constant_slot, value_id) {
                    (Some(slot), Some(v)) => {
                        let equal = self.id(*slot) == Some(v);
                        Some(if *op == BinaryOp::Eq { equal } else { !equal })
                    }
                    _ if *constant_first => ordered_binary(*op, &**constant, s),
                    _ => ordered_binary(*op, s, &**constant),
                };
                result.ok_or_else(|| Fail::Error(Box::new("unplanned comparison".into())))
            }
            Test::Quantifier {
                kind,
                resource,
                resource_slot,
                body,
            } => {
                // The comprehension, then the call, its receiver and its argument.
                self.charge(4)?;
                let snapshot = self.snapshot();
                let entry = self
                    .id(*resource_slot)
                    .and_then(|r| snapshot.score_entry(self.cluster(), r))
                    .ok_or(Fail::ScoreNotFound(resource))?;
                let items = snapshot.score_items_of(entry);
                // The list's size, charged by the call and again by the comprehension.
                self.charge(items.len())?;
                self.charge(items.len())?;
                let names = snapshot.score_name_text();
                let mut trues = 0usize;
                for &(name, value) in items {
                    let name_text = names.get(name as usize).map_or("", |n| &**n);
                    // Only the budget can fail a planned body, and that ends every macro.
                    let b = self.item(body, name, name_text, value)?;
                    trues += usize::from(b);
                    if *kind == Macro::All && !b {
                        return Ok(false);
                    }
                    if *kind == Macro::Exists && b {
                        return Ok(true);
                    }
                }
                Ok(match kind {
                    Macro::All => true,
                    Macro::Exists => false,
                    _ => trues == 1,
                })
            }
            Test::Walk(node) => self.walk(node),
        }
    }

    /// `&&` (decisive = false) and `||` (decisive = true), as `Evaluator::logical`.
    fn logical<'p>(&self, l: &'p Test, r: &'p Test, decisive: bool) -> Result<bool, Fail<'p>> {
        self.charge(1)?;
        let left = self.test(l);
        if matches!(left, Ok(b) if b == decisive) {
            return left;
        }
        let right = self.test(r);
        match (left, right) {
            (_, Ok(b)) if b == decisive => Ok(b),
            (Ok(_), Ok(b)) => Ok(b),
            (
                Err(e @ (Fail::CostLimit | Fail::NoSuchKey(_) | Fail::ScoreNotFound(_) | Fail::Error(_))),
                _,
            ) => Err(e),
            (
                _,
                Err(e @ (Fail::CostLimit | Fail::NoSuchKey(_) | Fail::ScoreNotFound(_) | Fail::Error(_))),
            ) => Err(e),
            (left, right) => {
                let value = |r: Result<bool, Fail<'_>>| match r {
                    Ok(b) => Value::Bool(b),
                    Err(Fail::NotBool(v)) => *v,
                    // Unreachable: the errors are handled above.
                    Err(_) => Value::Null,
                };
                let (a, b) = (value(left), value(right));
                Err(Fail::Error(Box::new(no_overload(
                    if decisive { "_||_" } else { "_&&_" },
                    &[&a, &b],
                ))))
            }
        }
    }

    /// A planned body on one score item, as `Evaluator::item_predicate`.
    /// Every planned comparison has a result (`plan` admits only comparison operators), so
    /// only the budget can fail.
    fn item(&self, t: &ItemTest, name: u32, name_text: &str, value: i32) -> Result<bool, OutOfBudget> {
        match t {
            ItemTest::And(l, r) | ItemTest::Or(l, r) => {
                let decisive = matches!(t, ItemTest::Or(..));
                self.charge(1)?;
                let left = self.item(l, name, name_text, value);
                if matches!(left, Ok(b) if b == decisive) {
                    return left;
                }
                match (left, self.item(r, name, name_text, value)) {
                    (_, Ok(b)) if b == decisive => Ok(b),
                    (Ok(_), Ok(b)) => Ok(b),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                }
            }
            ItemTest::Name { op, text, slot } => {
                self.charge(4 + name_text.len() + text.len())?;
                Ok(match slot {
                    Some(slot) => {
                        let equal = self.id(*slot) == Some(name);
                        if *op == BinaryOp::Eq { equal } else { !equal }
                    }
                    None => ordered_binary(*op, name_text, &**text).unwrap_or(false),
                })
            }
            ItemTest::Value { op, int } => {
                self.charge(6)?;
                Ok(ordered_binary(*op, &i64::from(value), int).unwrap_or(false))
            }
        }
    }
}
