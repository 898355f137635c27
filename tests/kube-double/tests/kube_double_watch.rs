//! Watches against the API server double: resume from a resourceVersion, 410 after compaction,
//! bookmarks, selector transitions, streaming lists, and a reflector under churn and faults.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    runtime::{WatchStreamExt, reflector, watcher},
};
use ocm_score_kube_double::{ApiServer, Gvr};
use serde_json::json;
use std::{collections::BTreeMap, time::Duration};

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
    }))
    .unwrap()
}

/// Reads the next `n` events of a watch (bookmarks skipped), failing the test after 10 s.
async fn next_events(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
    n: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("a watch event within 10 s")
            .expect("the stream stays open")
            .expect("no transport error");
        match event {
            WatchEvent::Added(o) => out.push(("ADDED".into(), o.name_any())),
            WatchEvent::Modified(o) => out.push(("MODIFIED".into(), o.name_any())),
            WatchEvent::Deleted(o) => out.push(("DELETED".into(), o.name_any())),
            WatchEvent::Error(e) => out.push(("ERROR".into(), format!("{} {}", e.code, e.reason))),
            WatchEvent::Bookmark(_) => {}
        }
    }
    out
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();

    cms.create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();

    let mut stream = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let events = next_events(&mut stream, 3).await;
    assert_eq!(
        events,
        pairs(&[("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")])
    );

    // "0" starts from the current state, as synthetic ADDED events.
    let mut from_now = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    assert_eq!(next_events(&mut from_now, 1).await, pairs(&[("ADDED", "a")]));
    cms.create(&PostParams::default(), &config_map("c", &[]))
        .await
        .unwrap();
    assert_eq!(next_events(&mut from_now, 1).await, pairs(&[("ADDED", "c")]));
}

#[tokio::test]
async fn watch_from_a_compacted_version_gets_410_gone() {
    let server = ApiServer::builder()
        .builtin_kinds()
        .watch_window(3)
        .start()
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for i in 0..5 {
        cms.create(&PostParams::default(), &config_map(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let mut stream = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    assert_eq!(
        next_events(&mut stream, 1).await,
        pairs(&[("ERROR", "410 Expired")])
    );

    // Compaction at the current version keeps watches from it valid, and forgets everything before.
    let recent = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.create(&PostParams::default(), &config_map("before-compaction", &[]))
        .await
        .unwrap();
    server.compact();
    let current = server.resource_version().to_string();
    let mut stream = cms.watch(&WatchParams::default(), &recent).await.unwrap().boxed();
    assert_eq!(
        next_events(&mut stream, 1).await,
        pairs(&[("ERROR", "410 Expired")])
    );
    let mut stream = cms
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &config_map("after", &[]))
        .await
        .unwrap();
    assert_eq!(next_events(&mut stream, 1).await, pairs(&[("ADDED", "after")]));

    let exact = ListParams::default()
        .at(&rv)
        .matching(kube::api::VersionMatch::Exact);
    let err = cms.list(&exact).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 410));
}

#[tokio::test]
async fn bookmarks_and_selector_transitions() {
    let server = ApiServer::builder()
        .builtin_kinds()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    cms.create(&PostParams::default(), &config_map("x", &[("team", "a")]))
        .await
        .unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();

    let params = WatchParams {
        bookmarks: true,
        ..WatchParams::default().labels("team=a")
    };
    let mut stream = cms.watch(&params, &rv).await.unwrap().boxed();
    let bookmark = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(Ok(WatchEvent::Bookmark(b))) = stream.next().await {
                return b;
            }
        }
    })
    .await
    .expect("a bookmark within 5 s");
    assert!(bookmark.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse().unwrap());
    assert_eq!(bookmark.types.kind, "ConfigMap");

    // Leaving the selection reads as DELETED, entering it as ADDED.
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    let events = next_events(&mut stream, 3).await;
    assert_eq!(
        events,
        pairs(&[("DELETED", "x"), ("ADDED", "x"), ("MODIFIED", "x")])
    );
}

#[tokio::test]
async fn streaming_list_watcher_ends_its_initial_events_with_a_bookmark() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    for i in 0..3 {
        cms.create(&PostParams::default(), &config_map(&format!("s{i}"), &[]))
            .await
            .unwrap();
    }
    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => initial.push(o.name_any()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected event before InitDone: {other:?}"),
        }
    }
    assert_eq!(initial, ["s0", "s1", "s2"]);
    assert_eq!(
        server.request_count("list", "configmaps"),
        0,
        "no list in streaming mode"
    );
}

/// Waits until the reflector's store holds exactly what the server holds.
async fn converge(server: &ApiServer, store: &reflector::Store<ConfigMap>) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..200 {
        let want: BTreeMap<String, String> = server
            .objects(&Gvr::of::<ConfigMap>())
            .iter()
            .filter(|o| o["metadata"]["namespace"] == "churn")
            .map(|o| {
                let m = &o["metadata"];
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["resourceVersion"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let have: BTreeMap<String, String> = store
            .state()
            .iter()
            .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
            .collect();
        if want == have {
            return Ok(());
        }
        last = format!("server has {} objects, store {}", want.len(), have.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_converges_under_churn_cut_watches_and_compaction() {
    let server = ApiServer::builder()
        .builtin_kinds()
        .watch_window(500)
        .bookmark_interval(Duration::from_millis(200))
        .object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "churn"}}))
        .start()
        .await
        .unwrap();
    let client = server.admin_client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "churn");
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().page_size(100);
    let reflector_task = tokio::spawn(
        reflector(writer, watcher(cms.clone(), config))
            .default_backoff()
            .applied_objects()
            .for_each(|_| async {}),
    );
    store.wait_until_ready().await.unwrap();

    // Four writers create, update and delete 2,000 objects' worth of churn (~4,500 writes).
    const PER_WRITER: usize = 500;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let cms = cms.clone();
            tokio::spawn(async move {
                for i in 0..PER_WRITER {
                    let name = format!("w{w}-{i}");
                    cms.create(
                        &PostParams::default(),
                        &config_map(&name, &[("w", &w.to_string())]),
                    )
                    .await
                    .unwrap();
                    if i % 2 == 0 {
                        let patch = Patch::Merge(json!({"data": {"i": i.to_string()}}));
                        cms.patch(&name, &PatchParams::default(), &patch).await.unwrap();
                    }
                    if i % 3 == 0 && i > 0 {
                        let victim = format!("w{w}-{}", i - 1);
                        cms.delete(&victim, &DeleteParams::default()).await.unwrap();
                    }
                }
            })
        })
        .collect();
    // Disturb the watch while the writers run: cut it every 300 ms, and compact so often that its
    // resume (after the watcher's backoff, with writes in between) always predates compaction: 410, relist.
    let disturb = async {
        for _ in 0..5 {
            for _ in 0..15 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                server.compact();
            }
            server.faults().cut_watches();
        }
    };
    let writers = async {
        for w in writers {
            w.await.unwrap();
        }
    };
    tokio::join!(disturb, writers);
    // Should the churn have ended before a resume, force one deterministically: a cut watch
    // resumes at once, so instead the server drops every connection and refuses new ones while
    // objects are written (directly, not over HTTP) and history is compacted. Every resume the
    // watcher attempts fails until the refusal ends, and the first one that gets through asks for
    // a version older than the compaction: 410, relist.
    for round in 0..5 {
        if server.request_count("list", "configmaps") >= 2 {
            break;
        }
        // Refused until the writes and the compaction are done, however long those take here.
        server.faults().refuse_connections(Duration::from_secs(3600));
        for i in 0..5 {
            let mut object = serde_json::to_value(config_map(&format!("late-{round}-{i}"), &[])).unwrap();
            object["apiVersion"] = json!("v1");
            object["kind"] = json!("ConfigMap");
            object["metadata"]["namespace"] = json!("churn");
            server.create(object).unwrap();
        }
        server.compact();
        server.faults().accept_connections();
        // The watcher's backoff; polled so a quick relist ends the wait early.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while server.request_count("list", "configmaps") < 2 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    converge(&server, &store).await.unwrap();
    assert!(
        server.request_count("list", "configmaps") >= 2,
        "the reflector relisted after 410"
    );
    assert!(server.objects(&Gvr::of::<ConfigMap>()).len() > 1000);
    reflector_task.abort();
}

#[tokio::test]
async fn versions_newer_than_the_server_are_not_silently_served() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    // kube retries 504s (15 times, honouring Retry-After): this client shows the first answer.
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.default_retry = false;
    let token = format!("Bearer {}", server.admin().token);
    config.headers.push((
        hyper::header::AUTHORIZATION,
        hyper::header::HeaderValue::from_str(&token).unwrap(),
    ));
    let no_retry: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    let ahead = (server.resource_version() + 2).to_string();

    // A list must never claim a version it has not reached: 504 ResourceVersionTooLarge, as upstream.
    for matching in [
        None,
        Some(kube::api::VersionMatch::NotOlderThan),
        Some(kube::api::VersionMatch::Exact),
    ] {
        let mut params = ListParams::default().at(&ahead);
        if let Some(m) = &matching {
            params = params.matching(m.clone());
        }
        let err = no_retry.list(&params).await.unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{matching:?}: an API error expected, got {err:?}")
        };
        assert_eq!(
            (status.code, status.reason.as_str()),
            (504, "Timeout"),
            "{matching:?}"
        );
        assert!(
            status.message.contains("Too large resource version"),
            "{}",
            status.message
        );
    }
    // "0" means any version and stays valid.
    cms.list(&ListParams::default().at("0")).await.unwrap();

    // A watch from a future version delivers only what comes after that version, as the real
    // watch cache does: the two writes that bring the server to `ahead` are not events for it.
    let mut stream = cms.watch(&WatchParams::default(), &ahead).await.unwrap().boxed();
    for name in ["reach-1", "reach-2", "after"] {
        cms.create(&PostParams::default(), &config_map(name, &[]))
            .await
            .unwrap();
    }
    assert_eq!(next_events(&mut stream, 1).await, pairs(&[("ADDED", "after")]));
}
