//! The shared vocabulary of ocm-score: typed models of the OCM kinds it reads or writes
//! ([`ocm`]), its own kinds ([`crd`]), and the small grammars every binary parses (Go durations,
//! Kubernetes names and quantities, YAML) and the score scale ([`normalize`]).
//!
//! The agent, the process shell and the agent's flag contract depend on this crate alone; the
//! placement engine and the tiering planner (`ocm-score-scheduler`) build on it. Nothing here
//! does I/O.
//!
//! # The models
//!
//! The models are written by hand rather than with `#[derive(CustomResource)]`: two of the kinds
//! (AddOnPlacementScore, PlacementDecision) have no `spec` at all, and several others make `spec`
//! optional, which the derive cannot express. Each root type implements [`kube_core::Resource`] so it
//! works with `kube::Api`, and [`OcmKind`] so tests can compare its identity with the upstream CRDs.
//! Our own kinds, [`crd::tiered_placement::TieredPlacement`] and [`crd::workload_shape::WorkloadShape`], are declared
//! with kube's `CustomResource` derive instead: their CRDs are generated from the types.
//!
//! Fields we do not model are kept in an `extra` map on every spec and status, so a
//! read-modify-write never drops what another controller wrote.

pub mod crd;
pub mod duration;
pub mod names;
pub mod normalize;
pub mod ocm;
pub mod quantity;
pub mod quantity_suffix;
pub mod yaml;

pub use crd::tiered_placement::{TieredPlacement, TieredPlacementSpec, TieredPlacementStatus};
pub use crd::workload_shape::{WorkloadShape, WorkloadShapeSpec};
pub use ocm::*;

pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use std::collections::BTreeMap;

/// Unmodelled fields of a spec or status, kept verbatim.
pub type Extra = BTreeMap<String, serde_json::Value>;

/// The API identity of an OCM kind, exactly as its upstream CRD declares it.
pub trait OcmKind: kube_core::Resource<DynamicType = ()> {
    const GROUP: &'static str;
    const VERSION: &'static str;
    const KIND: &'static str;
    const PLURAL: &'static str;
    const NAMESPACED: bool;
    /// Whether the CRD enables the `status` subresource (so `status` is written through `/status`).
    const STATUS_SUBRESOURCE: bool;
    /// `group/version`, as written in `apiVersion`.
    const API_VERSION: &'static str;
}

/// Implements `Resource`, `OcmKind` and serde for a root type with `metadata`, optional `spec`
/// and optional `status`. Serialization always emits `apiVersion` and `kind` (the API server
/// requires them on create); deserialization accepts objects without them (as list items come).
macro_rules! ocm_root {
    (@common $name:ident, $group:literal, $version:literal, $plural:literal, $scope:ty, $namespaced:literal, $status_sub:literal) => {
        impl kube_core::Resource for $name {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                stringify!($name).into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &$crate::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut $crate::ObjectMeta {
                &mut self.metadata
            }
        }
        impl $crate::OcmKind for $name {
            const GROUP: &'static str = $group;
            const VERSION: &'static str = $version;
            const KIND: &'static str = stringify!($name);
            const PLURAL: &'static str = $plural;
            const NAMESPACED: bool = $namespaced;
            const STATUS_SUBRESOURCE: bool = $status_sub;
            const API_VERSION: &'static str = concat!($group, "/", $version);
        }
    };
    // A root kind. `spec` is optional in the pattern: AddOnPlacementScore and PlacementDecision
    // have none; where there is one, it defaults when absent, as for objects a server stores
    // without one.
    ($(#[$doc:meta])* $name:ident { $(spec: $spec:ty,)? status: $status:ty }
        group $group:literal, version $version:literal, plural $plural:literal,
        scope $scope:ty, namespaced $namespaced:literal, status_subresource $status_sub:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name {
            pub metadata: $crate::ObjectMeta,
            $(pub spec: $spec,)?
            pub status: Option<$status>,
        }
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("apiVersion", concat!($group, "/", $version))?;
                m.serialize_entry("kind", stringify!($name))?;
                m.serialize_entry("metadata", &self.metadata)?;
                $(m.serialize_entry::<str, $spec>("spec", &self.spec)?;)?
                if let Some(status) = &self.status {
                    m.serialize_entry("status", status)?;
                }
                m.end()
            }
        }
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // Named as the type itself (shadowing it in this body only), so a body of the
                // wrong shape is refused as "expected struct Placement", not by an internal name.
                #[derive(serde::Deserialize)]
                struct $name {
                    #[serde(default)]
                    metadata: $crate::ObjectMeta,
                    $(#[serde(default)]
                    spec: Option<$spec>,)?
                    #[serde(default)]
                    status: Option<$status>,
                }
                let w = $name::deserialize(d)?;
                Ok(Self {
                    metadata: w.metadata,
                    $(spec: w.spec.unwrap_or_else(<$spec>::default),)?
                    status: w.status,
                })
            }
        }
        ocm_root!(@common $name, $group, $version, $plural, $scope, $namespaced, $status_sub);
    };
}
pub(crate) use ocm_root;

/// Keys OCM puts on objects, shared by the agent, the hub controller and the scheduler.
pub mod well_known {
    /// Label on a ManagedCluster naming its (exclusive) cluster set.
    pub const CLUSTER_SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
    /// Label on a PlacementDecision naming its Placement.
    pub const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
    /// Label on a PlacementDecision naming its decision group.
    pub const DECISION_GROUP_NAME_LABEL: &str = "cluster.open-cluster-management.io/decision-group-name";
    /// Label on a PlacementDecision giving its decision group index.
    pub const DECISION_GROUP_INDEX_LABEL: &str = "cluster.open-cluster-management.io/decision-group-index";
    /// Label on ManifestWorks created for an add-on.
    pub const ADDON_NAME_LABEL: &str = "open-cluster-management.io/addon-name";
    /// ClusterManagementAddOn annotation saying who runs the add-on's install strategy and
    /// configuration rollout: `self` (the add-on's own manager), else OCM's addon-manager.
    pub const LIFECYCLE_ANNOTATION: &str = "addon.open-cluster-management.io/lifecycle";
    /// The AddOnPlacementScore name the agent publishes (same as OCM's resource-usage-collect addon).
    pub const RESOURCE_USAGE_SCORE: &str = "resource-usage-score";
    /// Label on a pod naming the WorkloadShape it is a replica of: the agent counts such pods that
    /// kube-scheduler leaves Unschedulable while it publishes room for more
    /// (`ocm_score_agent_fits_unschedulable_total`, docs/fits-and-reservations.md).
    pub const WORKLOAD_SHAPE_LABEL: &str = "ocm-score.io/workload-shape";
}
