//! The checked expression the evaluator walks: [`Node`] (what the checker and planner build from
//! the syntax tree, with overloads, macros and regexes resolved), and the item predicates of
//! `scores(...)` filters that are compiled at check time so they run without the tree walk.

use super::eval::{NAME_KEY, VALUE_KEY};
use super::library::Overload;
use super::syntax::BinaryOp;
use super::value::{Key, Value};
use regex::Regex;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Macro {
    All,
    Exists,
    ExistsOne,
    Filter,
    Map,
    OptMap,
    OptFlatMap,
}

impl Macro {
    /// The receiver-style macros, by name and argument count.
    pub fn of(name: &str, argc: usize) -> Option<Macro> {
        match (name, argc) {
            ("all", 2) => Some(Macro::All),
            ("exists", 2) => Some(Macro::Exists),
            ("exists_one", 2) => Some(Macro::ExistsOne),
            ("filter", 2) => Some(Macro::Filter),
            ("map", 2 | 3) => Some(Macro::Map),
            ("optMap", 2) => Some(Macro::OptMap),
            ("optFlatMap", 2) => Some(Macro::OptFlatMap),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Macro::All => "all",
            Macro::Exists => "exists",
            Macro::ExistsOne => "exists_one",
            Macro::Filter => "filter",
            Macro::Map => "map",
            Macro::OptMap => "optMap",
            Macro::OptFlatMap => "optFlatMap",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum RegexOp {
    Matches,
    Find,
    FindAll,
}

/// A checked expression, with every name and call resolved.
#[derive(Clone, Debug)]
pub enum Node {
    Const(Value),
    /// `managedCluster`.
    Root,
    /// `managedCluster.a.b['c']...`: field selections and constant-key indexes from the root,
    /// each step marked `true` when it is an index. The environment may answer it without
    /// building the whole cluster value.
    RootPath(Vec<(Key, bool)>),
    /// A comprehension variable, by slot.
    Local(usize),
    Select {
        target: Box<Node>,
        field: Key,
        optional: bool,
    },
    Has {
        target: Box<Node>,
        field: Key,
    },
    Index {
        target: Box<Node>,
        index: Box<Node>,
        optional: bool,
    },
    List(Vec<(Node, bool)>),
    Map(Vec<(Node, Node, bool)>),
    Not(Box<Node>),
    Neg(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    /// A library function; the overloads are those the checker found applicable.
    Call {
        name: Arc<str>,
        overloads: Vec<&'static Overload>,
        args: Vec<Node>,
    },
    /// `or` / `orValue` on an optional: the alternative is evaluated only when needed.
    OptOr {
        receiver: Box<Node>,
        alternative: Box<Node>,
        unwrap: bool,
    },
    /// A regex function with a constant pattern, compiled once.
    Regex {
        op: RegexOp,
        text: Box<Node>,
        regex: Result<Arc<Regex>, String>,
        limit: Option<Box<Node>>,
        /// For `matches`, the strings the pattern accepts when they are a fixed set.
        literals: Option<Vec<Arc<str>>>,
    },
    /// OCM's `managedCluster.scores(name)`.
    Scores {
        target: Box<Node>,
        resource: Box<Node>,
    },
    Comprehension {
        kind: Macro,
        range: Box<Node>,
        slot: usize,
        body: Vec<Node>,
        /// The body planned for score items, when it is simple enough (see [`ItemPredicate`]).
        item_body: Option<Box<ItemPredicate>>,
    },
}

/// Which field of a score item a comparison reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemField {
    Name,
    Value,
}

/// The body of `all`/`exists`/`exists_one`/`filter` over `managedCluster.scores('<constant>')`
/// when it is `&&`/`||` over comparisons of `s.name` with a string constant or `s.value` with an
/// int constant: evaluated on the borrowed item without the tree walk, with the result and
/// the charges the walk would give (such a comparison cannot fail, so only the cost budget can
/// make the result an error).
#[derive(Clone, Debug)]
pub enum ItemPredicate {
    And(Box<ItemPredicate>, Box<ItemPredicate>),
    Or(Box<ItemPredicate>, Box<ItemPredicate>),
    /// `s.<field> <op> constant`.
    Compare {
        field: ItemField,
        op: BinaryOp,
        text: Arc<str>,
        int: i64,
    },
}

impl ItemPredicate {
    /// The plan of `body` for the comprehension `kind` over `range` with its variable in `slot`,
    /// or `None` when the range is not the scores of `managedCluster` or the body is not simple.
    pub fn plan(kind: Macro, range: &Node, slot: usize, body: &[Node]) -> Option<ItemPredicate> {
        if !matches!(
            kind,
            Macro::All | Macro::Exists | Macro::ExistsOne | Macro::Filter
        ) {
            return None;
        }
        let Node::Scores { target, resource } = range else {
            return None;
        };
        if !matches!(
            (&**target, &**resource),
            (Node::Root, Node::Const(Value::String(_)))
        ) {
            return None;
        }
        match body {
            [single] => Self::plan_node(single, slot),
            _ => None,
        }
    }

    fn plan_node(n: &Node, slot: usize) -> Option<ItemPredicate> {
        match n {
            Node::And(l, r) => Some(ItemPredicate::And(
                Box::new(Self::plan_node(l, slot)?),
                Box::new(Self::plan_node(r, slot)?),
            )),
            Node::Or(l, r) => Some(ItemPredicate::Or(
                Box::new(Self::plan_node(l, slot)?),
                Box::new(Self::plan_node(r, slot)?),
            )),
            Node::Binary(op, l, r) => {
                if !matches!(
                    op,
                    BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
                ) {
                    return None;
                }
                let Node::Select {
                    target,
                    field,
                    optional: false,
                } = &**l
                else {
                    return None;
                };
                if !matches!(**target, Node::Local(s) if s == slot) {
                    return None;
                }
                match (&**r, field) {
                    (Node::Const(Value::String(text)), f) if *f == *NAME_KEY => {
                        Some(ItemPredicate::Compare {
                            field: ItemField::Name,
                            op: *op,
                            text: text.clone(),
                            int: 0,
                        })
                    }
                    (Node::Const(Value::Int(int)), f) if *f == *VALUE_KEY => Some(ItemPredicate::Compare {
                        field: ItemField::Value,
                        op: *op,
                        text: Arc::from(""),
                        int: *int,
                    }),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}
