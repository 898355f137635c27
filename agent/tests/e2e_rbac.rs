//! The real `ocm-score-agent` under the hub RBAC OCM's add-on manager grants it: it publishes in its own
//! cluster's namespace, and the same identity is refused (403) in another cluster's namespace.

mod support;

use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use ocm_score_api::{AddOnPlacementScore, ObjectMeta};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_identity_publishes_in_its_own_namespace_and_gets_403_in_another_clusters() {
    let clusters = Clusters::start("rbac").await;
    let args = [
        "--refresh-interval=1s",
        "--debounce=200ms",
        "--validity=1m",
        "--min-write-interval=1s",
    ];
    // Both agents read the same mounted hub kubeconfig; the second one claims another cluster's name.
    let own = clusters.agent("own-namespace", &args).await;
    let mut other_args = args.to_vec();
    other_args.extend(["--cluster-name", OTHER_CLUSTER, "--lease=false"]);
    let mut intruder = clusters.agent("other-namespace", &other_args).await;

    let status = clusters
        .wait_published("the publication in the agent's own namespace", -26, STARTUP)
        .await;
    assert_eq!(scores_of(&status), owned(&expected_scores(false)));

    eventually("the intruder's writes to fail", STARTUP, async || {
        (intruder.hub_writes("failed").await >= 2.0).then_some(())
    })
    .await;
    assert!(intruder.is_running(), "a refusal does not stop the agent");
    assert_eq!(intruder.hub_writes("written").await, 0.0);
    assert_eq!(intruder.get("/readyz").await.0, 503);
    let refusals: Vec<String> = intruder
        .logged("hub write failed")
        .iter()
        .filter_map(|l| l["fields"]["error"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !refusals.is_empty()
            && refusals
                .iter()
                .all(|e| e.contains("403") && e.contains(OTHER_CLUSTER)),
        "{refusals:?}"
    );
    assert_eq!(
        clusters.score_in(OTHER_CLUSTER),
        None,
        "nothing was created there"
    );

    // The hub saw the identity's requests in the other namespace and refused every one.
    let user = &clusters.hub_identity.user;
    let requests = clusters.hub.requests();
    let elsewhere: Vec<_> = requests
        .iter()
        .filter(|r| &r.user == user && r.namespace == OTHER_CLUSTER)
        .collect();
    assert!(!elsewhere.is_empty());
    assert!(elsewhere.iter().all(|r| r.code == 403), "{elsewhere:?}");
    assert!(
        requests
            .iter()
            .any(|r| &r.user == user && r.namespace == CLUSTER && r.verb == "create" && r.code == 201),
        "the same identity created the object in its own namespace"
    );

    // Through the mounted kubeconfig directly: a create there is refused too, by RBAC.
    let kubeconfig =
        Kubeconfig::read_from(clusters.hub_secret.join("kubeconfig")).expect("the mounted kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a client config");
    let client = kube::Client::try_from(config).expect("a client");
    let theirs: Api<AddOnPlacementScore> = Api::namespaced(client, OTHER_CLUSTER);
    let object = AddOnPlacementScore {
        metadata: ObjectMeta {
            name: Some(SCORE_NAME.to_owned()),
            ..Default::default()
        },
        status: None,
    };
    match theirs.create(&PostParams::default(), &object).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        }
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }

    intruder.stop().await;
    own.stop().await;
}
