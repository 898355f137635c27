//! Reading the live hub with the user's own permissions: every kind the placement engine reads,
//! cluster-wide where the user may, otherwise in the user's namespace, and each kind (or scope)
//! the user may not read named rather than guessed.

use kube::api::{Api, ListParams};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource};
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision, TieredPlacement,
};
use ocm_score_scheduler::placement::HubObjects;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReadError {
    /// The cause follows in the error chain (`{:#}`).
    #[error("cannot list {resource}")]
    List {
        resource: String,
        #[source]
        source: kube::Error,
    },
}

/// A kind, in a scope, that the user may not read (or that the hub does not serve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// `plural.group`, as `kubectl auth can-i` takes it.
    pub resource: String,
    /// `cluster-wide`, or `outside namespace NS` when the namespace itself could be read.
    pub scope: String,
    /// The API server's answer.
    pub reason: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.resource, self.scope, self.reason)
    }
}

/// What the user could read of the hub.
#[derive(Debug, Default)]
pub struct LiveHub {
    pub objects: HubObjects,
    pub tiered: Vec<TieredPlacement>,
    pub unreadable: Vec<Unreadable>,
    /// When the lists were read.
    pub read_at: Option<jiff::Timestamp>,
}

impl LiveHub {
    /// The entry naming `resource` (`plural.group`) as unreadable, if any.
    pub fn unreadable(&self, resource: &str) -> Option<&Unreadable> {
        self.unreadable.iter().find(|u| u.resource == resource)
    }
}

pub fn resource_name<K: Resource<DynamicType = ()>>() -> String {
    format!("{}.{}", K::plural(&()), K::group(&()))
}

/// A refusal or a kind not served becomes an [`Unreadable`]; anything else stops the read.
fn refusal(error: &kube::Error) -> Option<String> {
    match error {
        kube::Error::Api(status) if status.code == 403 || status.code == 401 => Some(status.message.clone()),
        kube::Error::Api(status) if status.code == 404 => {
            Some("not served by this hub (is its CRD installed?)".to_owned())
        }
        _ => None,
    }
}

pub async fn list_cluster_scoped<K>(client: &Client, hub: &mut LiveHub) -> Result<Vec<K>, ReadError>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    match Api::<K>::all(client.clone()).list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(e) => match refusal(&e) {
            Some(reason) => {
                hub.unreadable.push(Unreadable {
                    resource: resource_name::<K>(),
                    scope: "cluster-wide".to_owned(),
                    reason,
                });
                Ok(Vec::new())
            }
            None => Err(ReadError::List {
                resource: resource_name::<K>(),
                source: e,
            }),
        },
    }
}

/// Every namespace's objects when the user may list them all; otherwise `namespace`'s, and the
/// rest named as unreadable.
pub async fn list_namespaced<K>(
    client: &Client,
    namespace: &str,
    hub: &mut LiveHub,
) -> Result<Vec<K>, ReadError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    let all = match Api::<K>::all(client.clone()).list(&ListParams::default()).await {
        Ok(list) => return Ok(list.items),
        Err(e) => refusal(&e).ok_or_else(|| ReadError::List {
            resource: resource_name::<K>(),
            source: e,
        })?,
    };
    match Api::<K>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            hub.unreadable.push(Unreadable {
                resource: resource_name::<K>(),
                scope: format!("outside namespace {namespace}"),
                reason: all,
            });
            Ok(list.items)
        }
        Err(e) => match refusal(&e) {
            Some(reason) => {
                hub.unreadable.push(Unreadable {
                    resource: resource_name::<K>(),
                    scope: "cluster-wide".to_owned(),
                    reason: format!("{all}; in namespace {namespace}: {reason}"),
                });
                Ok(Vec::new())
            }
            None => Err(ReadError::List {
                resource: resource_name::<K>(),
                source: e,
            }),
        },
    }
}

/// Reads every kind the engine and the tiering planner read; `namespace` is where to fall back
/// to when a namespaced kind cannot be listed cluster-wide.
pub async fn read(client: &Client, namespace: &str) -> Result<LiveHub, ReadError> {
    let mut hub = LiveHub::default();
    let clusters = list_cluster_scoped::<ManagedCluster>(client, &mut hub).await?;
    let cluster_sets = list_cluster_scoped::<ManagedClusterSet>(client, &mut hub).await?;
    let bindings = list_namespaced::<ManagedClusterSetBinding>(client, namespace, &mut hub).await?;
    let placements = list_namespaced::<Placement>(client, namespace, &mut hub).await?;
    let decisions = list_namespaced::<PlacementDecision>(client, namespace, &mut hub).await?;
    let scores = list_namespaced::<AddOnPlacementScore>(client, namespace, &mut hub).await?;
    hub.tiered = list_namespaced::<TieredPlacement>(client, namespace, &mut hub).await?;
    hub.objects = HubObjects {
        clusters,
        cluster_sets,
        bindings,
        placements,
        decisions,
        scores,
    };
    hub.read_at = Some(jiff::Timestamp::now());
    Ok(hub)
}
