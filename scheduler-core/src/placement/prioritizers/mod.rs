//! The prioritizers. Each returns one optional score per feasible cluster (in the order of the
//! feasible list); `None` means the prioritizer has no entry for that cluster, which upstream
//! shows as a missing map key and which counts 0 in the sum.

pub mod addon;
pub mod balance;
pub mod resource;
pub mod steady;

use super::snapshot::{ClusterId, HubSnapshot};
use super::status::Status;
use super::weights::PrioritizerKind;
use ocm_score_api::Placement;

/// What the prioritizers read.
pub struct ScoreContext<'a> {
    pub snapshot: &'a HubSnapshot,
    pub placement: &'a Placement,
    pub feasible: &'a [ClusterId],
    /// Whether each cluster (by id) is in the placement's existing decisions.
    pub in_decision: &'a [bool],
    pub now_ns: i128,
}

/// Scores of one prioritizer, plus the add-on findings the explanation reports.
pub struct Scored {
    pub scores: Vec<Option<i64>>,
    pub status: Status,
    pub addon: Option<addon::AddOnFindings>,
}

pub fn score(kind: &PrioritizerKind, ctx: &ScoreContext<'_>) -> Scored {
    let plain = |scores| Scored {
        scores,
        status: Status::success(),
        addon: None,
    };
    match kind {
        PrioritizerKind::Balance => plain(balance::score(ctx)),
        PrioritizerKind::Steady => plain(steady::score(ctx)),
        PrioritizerKind::ResourceAllocatableCpu => plain(resource::score(ctx, resource::Resource::Cpu)),
        PrioritizerKind::ResourceAllocatableMemory => plain(resource::score(ctx, resource::Resource::Memory)),
        PrioritizerKind::AddOn {
            resource_name,
            score_name,
        } => {
            let (scores, findings) = addon::score(ctx, resource_name, score_name);
            let status = findings.status(|| kind.to_string(), ctx.snapshot, resource_name);
            Scored {
                scores,
                status,
                addon: Some(findings),
            }
        }
    }
}
