//! Where the figures come from: the managed cluster's Nodes and Pods (`cluster`), the kubelets' real
//! usage (`kubelet`), or this machine (`host`).

pub mod cluster;
pub mod host;
pub mod kubelet;

use crate::accounting::{ObjectError, ResourceView};

/// Why a source could not give current figures. Any of these stops the scores from being renewed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the initial list of {0} has not completed yet")]
    NotSynced(&'static str),
    #[error("re-listing {0} after the watch was interrupted")]
    Relisting(&'static str),
    #[error("watching {kind} failed {ago_secs}s ago: {message}")]
    Watch {
        kind: &'static str,
        ago_secs: u64,
        message: String,
    },
    #[error("the managed cluster's API server did not answer: {0}")]
    Unreachable(String),
    #[error("{count} object(s) cannot be accounted, e.g. {first}")]
    InvalidObjects { count: usize, first: ObjectError },
    #[error("listing {kind}: {message}")]
    List { kind: &'static str, message: String },
    #[error("no kubelet answered ({nodes} node(s) tried), e.g. {first}")]
    Kubelet { nodes: usize, first: String },
    #[error("reading this host: {0}")]
    Host(String),
}

/// Figures from one source with a short human description (for the status condition and logs).
#[derive(Debug, Clone)]
pub struct Reading {
    pub source: &'static str,
    pub view: ResourceView,
    pub detail: String,
}

impl Reading {
    /// Several sources' readings as one: each figure the smallest any of them reports (see
    /// [`ResourceView::combine`]), and their details joined.
    pub fn combine(readings: &[Reading]) -> (ResourceView, String) {
        let views: Vec<ResourceView> = readings.iter().map(|r| r.view.clone()).collect();
        let detail = readings
            .iter()
            .map(|r| r.detail.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        (ResourceView::combine(&views), detail)
    }
}
