//! Which prioritizers run, and with what weight (`spec.prioritizerPolicy`).
//!
//! Upstream keys its weight map by the whole `ScoreCoordinate` value, whose `addOn` is a Go
//! pointer. So built-in entries without `addOn` override each other and the defaults (last one
//! wins), while every entry that has `addOn` set is a key of its own: the same add-on score
//! configured twice runs twice. Upstream walks that map in random order; here the order is the
//! defaults first, then the configurations in spec order, which only matters for which of
//! several misconfigurations gets reported.

use super::status::Status;
use ocm_score_api::{Placement, ScoreCoordinate};
use std::fmt;

pub const MODE_ADDITIVE: &str = "Additive";
pub const MODE_EXACT: &str = "Exact";

/// A prioritizer that can be built.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PrioritizerKind {
    Balance,
    Steady,
    ResourceAllocatableCpu,
    ResourceAllocatableMemory,
    AddOn {
        resource_name: String,
        score_name: String,
    },
}

impl fmt::Display for PrioritizerKind {
    /// The prioritizer name as OCM's debug output and events show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrioritizerKind::Balance => f.write_str("Balance"),
            PrioritizerKind::Steady => f.write_str("Steady"),
            PrioritizerKind::ResourceAllocatableCpu => f.write_str("ResourceAllocatableCPU"),
            PrioritizerKind::ResourceAllocatableMemory => f.write_str("ResourceAllocatableMemory"),
            PrioritizerKind::AddOn {
                resource_name,
                score_name,
            } => write!(f, "AddOn/{resource_name}/{score_name}"),
        }
    }
}

/// A prioritizer with a non-zero weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedPrioritizer {
    pub kind: PrioritizerKind,
    pub weight: i32,
    /// Index in `spec.prioritizerPolicy.configurations`, or `None` for a default.
    pub configuration: Option<usize>,
}

#[derive(PartialEq, Eq)]
enum Key {
    /// A coordinate without `addOn`: type and built-in name.
    Plain(String, String),
    /// A coordinate with `addOn` (never equal to another, like a Go pointer).
    Unique(usize),
}

enum Source<'p> {
    Default(PrioritizerKind),
    Configured(usize, &'p ScoreCoordinate),
}

struct Entry<'p> {
    key: Key,
    weight: i32,
    source: Source<'p>,
}

/// Resolves the effective prioritizers. An omitted `weight` is the CRD default 1.
pub fn resolve(placement: &Placement) -> Result<Vec<WeightedPrioritizer>, Status> {
    let policy = placement.spec.prioritizer_policy.as_ref();
    let mode = policy.and_then(|p| p.mode.as_deref()).unwrap_or("");
    let mut entries: Vec<Entry<'_>> = match mode {
        MODE_EXACT => Vec::new(),
        "" | MODE_ADDITIVE => [
            ("Balance", PrioritizerKind::Balance),
            ("Steady", PrioritizerKind::Steady),
        ]
        .into_iter()
        .map(|(name, kind)| Entry {
            key: Key::Plain("BuiltIn".into(), name.into()),
            weight: 1,
            source: Source::Default(kind),
        })
        .collect(),
        other => {
            return Err(Status::misconfigured(
                "",
                format!("incorrect prioritizer policy mode: {other}"),
            ));
        }
    };
    for (i, config) in policy
        .map_or(&[][..], |p| p.configurations.as_slice())
        .iter()
        .enumerate()
    {
        let Some(coordinate) = config.score_coordinate.as_ref() else {
            return Err(Status::misconfigured("", "scoreCoordinate field is required"));
        };
        let key = if coordinate.add_on.is_some() {
            Key::Unique(i)
        } else {
            Key::Plain(
                coordinate.type_.clone(),
                coordinate.built_in.clone().unwrap_or_default(),
            )
        };
        let weight = config.weight.unwrap_or(1);
        let entry = Entry {
            key,
            weight,
            source: Source::Configured(i, coordinate),
        };
        match entries.iter_mut().find(|e| e.key == entry.key) {
            Some(existing) => *existing = entry,
            None => entries.push(entry),
        }
    }

    let mut out = Vec::with_capacity(entries.len());
    for entry in entries.into_iter().filter(|e| e.weight != 0) {
        let (kind, configuration) = match entry.source {
            Source::Default(kind) => (kind, None),
            // Only the exact type "BuiltIn" is built-in; "" takes the add-on branch upstream.
            Source::Configured(i, c) if c.type_ == "BuiltIn" => {
                (builtin(c.built_in.as_deref().unwrap_or(""))?, Some(i))
            }
            Source::Configured(i, c) => match &c.add_on {
                Some(a) => (
                    PrioritizerKind::AddOn {
                        resource_name: a.resource_name.clone(),
                        score_name: a.score_name.clone(),
                    },
                    Some(i),
                ),
                None => return Err(Status::misconfigured("", "addOn should not be empty")),
            },
        };
        out.push(WeightedPrioritizer {
            kind,
            weight: entry.weight,
            configuration,
        });
    }
    Ok(out)
}

fn builtin(name: &str) -> Result<PrioritizerKind, Status> {
    match name {
        "Balance" => Ok(PrioritizerKind::Balance),
        "Steady" => Ok(PrioritizerKind::Steady),
        "ResourceAllocatableCPU" => Ok(PrioritizerKind::ResourceAllocatableCpu),
        "ResourceAllocatableMemory" => Ok(PrioritizerKind::ResourceAllocatableMemory),
        other => Err(Status::misconfigured(
            "",
            format!("incorrect builtin prioritizer: {other}"),
        )),
    }
}
