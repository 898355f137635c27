//! Who is asking, and whether they may: the caller's bearer token is authenticated by a
//! TokenReview and the request authorized by a SubjectAccessReview, both answered by the hub's
//! API server, so the endpoint honours exactly the hub's users, groups and RBAC.
//!
//! The rule is OCM's debug endpoint's: explaining a Placement that exists needs `get` on
//! `placements` in its namespace; explaining a Placement sent in the request (a dry run) needs
//! `create` there. A caller who may do that can already see which clusters the placement gets.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::future::Future;

/// An authenticated caller, as the TokenReview named them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request does to Placements, in RBAC's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Explain a Placement on the hub (GET).
    Get,
    /// Explain a Placement sent in the request (POST), as if it were created.
    Create,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Create => "create",
        }
    }
}

/// The API server's verdict on a SubjectAccessReview.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// Why (RBAC's reason; often empty when denied without a rule).
    pub reason: String,
}

/// A review the API server could not answer.
#[derive(Debug, thiserror::Error)]
#[error("{review}: {source}")]
pub struct ReviewError {
    pub review: &'static str,
    #[source]
    pub source: kube::Error,
}

/// Authentication and authorization, as the handler needs them.
pub trait Access: Send + Sync {
    /// The user behind a bearer token; `None` when the token is not valid.
    fn authenticate(&self, token: &str) -> impl Future<Output = Result<Option<User>, ReviewError>> + Send;
    /// Whether `user` may `verb` placements in `namespace`.
    fn authorize(
        &self,
        user: &User,
        verb: Verb,
        namespace: &str,
    ) -> impl Future<Output = Result<Verdict, ReviewError>> + Send;
}

/// [`Access`] through the hub's API server (needs `create` on `tokenreviews` and
/// `subjectaccessreviews`).
#[derive(Clone)]
pub struct HubAccess {
    client: Client,
}

impl HubAccess {
    pub fn new(client: Client) -> Self {
        HubAccess { client }
    }
}

impl Access for HubAccess {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ReviewError {
                review: "TokenReview",
                source,
            })?;
        let Some(status) = answer.status else {
            return Ok(None);
        };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let Some(user) = status.user else {
            return Ok(None);
        };
        Ok(Some(User {
            name: user.username.unwrap_or_default(),
            uid: user.uid,
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default().into_iter().collect(),
        }))
    }

    async fn authorize(&self, user: &User, verb: Verb, namespace: &str) -> Result<Verdict, ReviewError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone().into_iter().collect()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_owned()),
                    verb: Some(verb.as_str().to_owned()),
                    group: Some("cluster.open-cluster-management.io".to_owned()),
                    version: Some("v1beta1".to_owned()),
                    resource: Some("placements".to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ReviewError {
                review: "SubjectAccessReview",
                source,
            })?;
        let status = answer.status.unwrap_or_default();
        Ok(Verdict {
            allowed: status.allowed,
            reason: status.reason.unwrap_or_default(),
        })
    }
}
