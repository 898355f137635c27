//! Tests of `resolve.rs`, kept beside it so the code reads without them.

use super::*;
use ocm_score_shell::args::LeaderElectionArgs;

fn file(yaml: &str) -> ConfigFile {
    serde_norway::from_str(yaml).expect("test YAML parses")
}

const MINIMAL: &str = "
query: {url: 'http://127.0.0.1:9090'}
leaderElection: {enabled: false}
scores:
  - name: cpuFree
    query: sum by (cluster) (node_cpu_free)
";

#[test]
fn defaults_fill_in_around_a_minimal_file() {
    let config = Config::from_parts(&ThanosScorerArgs::default(), file(MINIMAL)).expect("valid");
    assert_eq!(config.cluster_label, "cluster");
    assert_eq!(config.placement_score_name, "thanos-score");
    assert_eq!(config.cluster_mapping, ClusterMapping::Identity);
    assert_eq!(config.interval, Duration::from_secs(60));
    // Every round renews: renew before 60s + 30s (interval + query timeout), valid for that plus
    // half an interval.
    assert_eq!(config.renew_before, Duration::from_secs(90));
    assert_eq!(config.validity, Duration::from_secs(120));
    assert_eq!(config.scores[0].direction, Direction::HigherIsBetter);
    assert_eq!(config.scores[0].normalization, Normalization::Fleet);
    assert_eq!(config.leader_election, None);
    assert_eq!(config.query.partial, PartialPolicy::Refuse);
    assert_eq!(config.query.thanos, ThanosParams::default());
}

#[test]
fn thanos_parameters_from_the_file_and_flags() {
    let yaml = MINIMAL.replace(
        "query: {url: 'http://127.0.0.1:9090'}",
        "query: {url: 'http://127.0.0.1:9090', partialResponse: false, allowPartialResponse: true, \
             dedup: false, maxSourceResolution: 1h}",
    );
    let config = Config::from_parts(&ThanosScorerArgs::default(), file(&yaml)).expect("valid");
    assert_eq!(config.query.partial, PartialPolicy::Accept);
    assert_eq!(
        config.query.thanos,
        ThanosParams {
            partial_response: false,
            dedup: false,
            max_source_resolution: Some(MaxSourceResolution::Resolution(Duration::from_secs(3600))),
        }
    );

    let args = ThanosScorerArgs {
        query_partial_response: Some(true),
        query_allow_partial_response: Some(false),
        query_dedup: Some(true),
        query_max_source_resolution: Some("auto".into()),
        ..Default::default()
    };
    let config = Config::from_parts(&args, file(&yaml)).expect("valid");
    assert_eq!(config.query.partial, PartialPolicy::Refuse);
    assert_eq!(
        config.query.thanos,
        ThanosParams {
            partial_response: true,
            dedup: true,
            max_source_resolution: Some(MaxSourceResolution::Auto),
        }
    );
}

#[test]
fn a_bad_max_source_resolution_names_its_field() {
    let yaml = MINIMAL.replace(
        "query: {url: 'http://127.0.0.1:9090'}",
        "query: {url: 'http://127.0.0.1:9090', maxSourceResolution: soon}",
    );
    let e = Config::from_parts(&ThanosScorerArgs::default(), file(&yaml)).expect_err("invalid");
    assert_eq!(e.field(), "query.maxSourceResolution");
    assert!(e.to_string().contains("soon"), "{e}");
    let args = ThanosScorerArgs {
        query_max_source_resolution: Some("-1h".into()),
        ..Default::default()
    };
    let e = Config::from_parts(&args, file(MINIMAL)).expect_err("invalid");
    assert_eq!(e.field(), "--query-max-source-resolution");
}

#[test]
fn flags_override_the_file() {
    let args = ThanosScorerArgs {
        query_url: Some("https://thanos.example:10902".into()),
        interval: Some("30s".into()),
        cluster_mapping: Some("claim:id.k8s.io".into()),
        ..Default::default()
    };
    let config = Config::from_parts(&args, file(MINIMAL)).expect("valid");
    assert_eq!(config.query.url.as_str(), "https://thanos.example:10902/");
    assert_eq!(config.interval, Duration::from_secs(30));
    assert_eq!(config.validity, Duration::from_secs(75), "30s + 30s + 15s");
    assert_eq!(config.cluster_mapping, ClusterMapping::Claim("id.k8s.io".into()));
}

#[test]
fn renewing_less_often_lengthens_the_derived_validity() {
    let every = |n| ThanosScorerArgs {
        renew_every: Some(n),
        ..Default::default()
    };
    let config = Config::from_parts(&every(2), file(MINIMAL)).expect("valid");
    assert_eq!(
        (config.validity, config.renew_before),
        (Duration::from_secs(180), Duration::from_secs(90)),
        "today's defaults before issue 16"
    );
    let config = Config::from_parts(
        &ThanosScorerArgs::default(),
        file(&format!("{MINIMAL}renewEvery: 3\n")),
    )
    .expect("valid");
    assert_eq!(config.validity, Duration::from_secs(240));
    // An explicit validity keeps the old rule: renew once half of it is left.
    let explicit = ThanosScorerArgs {
        validity: Some("10m".into()),
        ..Default::default()
    };
    let config = Config::from_parts(&explicit, file(MINIMAL)).expect("valid");
    assert_eq!(config.renew_before, Duration::from_secs(300));
    let both = ThanosScorerArgs {
        validity: Some("10m".into()),
        renew_every: Some(2),
        ..Default::default()
    };
    assert_eq!(error(both, MINIMAL).field(), "--renew-every");
    assert_eq!(
        error(ThanosScorerArgs::default(), &format!("{MINIMAL}renewEvery: 0\n")).field(),
        "renewEvery"
    );
}

fn error(args: ThanosScorerArgs, yaml: &str) -> ConfigError {
    Config::from_parts(&args, file(yaml)).expect_err("must be rejected")
}

#[test]
fn bad_values_name_their_field() {
    let cases: &[(&str, ThanosScorerArgs, &str)] = &[
        (
            "--interval",
            ThanosScorerArgs {
                interval: Some("soon".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--validity",
            ThanosScorerArgs {
                validity: Some("30s".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--renew-before",
            ThanosScorerArgs {
                validity: Some("3m".into()),
                renew_before: Some("200s".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--renew-before",
            ThanosScorerArgs {
                renew_before: Some("10s".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--cluster-label",
            ThanosScorerArgs {
                cluster_label: Some("1bad".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--cluster-mapping",
            ThanosScorerArgs {
                cluster_mapping: Some("label:".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--query-url",
            ThanosScorerArgs {
                query_url: Some("ftp://x".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--placement-score-name",
            ThanosScorerArgs {
                placement_score_name: Some("Bad_Name".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--write-concurrency",
            ThanosScorerArgs {
                write_concurrency: Some(0),
                ..Default::default()
            },
            "",
        ),
        (
            "--ca-file",
            ThanosScorerArgs {
                ca_file: Some("/nonexistent/ca.pem".into()),
                ..Default::default()
            },
            "",
        ),
        (
            "--bearer-token-file",
            ThanosScorerArgs {
                bearer_token_file: Some("/nonexistent/token".into()),
                ..Default::default()
            },
            "",
        ),
    ];
    for (field, args, _) in cases {
        let err = error(args.clone(), MINIMAL);
        assert_eq!(err.field(), *field, "{err}");
        assert!(err.to_string().starts_with(field), "{err}");
    }
}

#[test]
fn tls_settings_need_https() {
    let dir = std::env::temp_dir();
    let args = ThanosScorerArgs {
        tls_server_name: Some("thanos.example".into()),
        ..Default::default()
    };
    let err = error(args, MINIMAL);
    assert_eq!(err.field(), "--tls-server-name", "{err}");
    let args = ThanosScorerArgs {
        ca_file: Some(dir),
        ..Default::default()
    };
    assert_eq!(error(args, MINIMAL).field(), "--ca-file");
}

#[test]
fn score_list_errors_point_at_the_entry() {
    let base = "query: {url: 'http://127.0.0.1:9090'}\n";
    let cases = [
        ("scores", base.to_owned()),
        (
            "scores[1].name",
            format!("{base}scores: [{{name: a, query: x}}, {{name: a, query: y}}]"),
        ),
        (
            "scores[0].query",
            format!("{base}scores: [{{name: a, query: ' '}}]"),
        ),
        (
            "scores[0].min",
            format!("{base}scores: [{{name: a, query: x, min: 1}}]"),
        ),
        (
            "scores[0].max",
            format!("{base}scores: [{{name: a, query: x, normalization: fixed, min: 1}}]"),
        ),
        (
            "scores[0].max",
            format!("{base}scores: [{{name: a, query: x, normalization: fixed, min: 5, max: 1}}]"),
        ),
        (
            "scores[0].name",
            format!("{base}scores: [{{name: '', query: x}}]"),
        ),
    ];
    for (field, yaml) in cases {
        let err = error(ThanosScorerArgs::default(), &yaml);
        assert_eq!(err.field(), field, "{err}");
    }
}

#[test]
fn absurd_durations_and_retries_are_refused_not_overflowed() {
    // The round budget multiplies timeout, retries and scores, and validity defaults to
    // 3 × interval: values this large used to overflow (a panic) instead of being reported.
    let args = ThanosScorerArgs {
        query_retries: Some(u32::MAX),
        ..Default::default()
    };
    assert_eq!(error(args, MINIMAL).field(), "--query-retries");
    let huge = "2562047788015215h";
    let args = ThanosScorerArgs {
        interval: Some(huge.into()),
        ..Default::default()
    };
    assert_eq!(error(args, MINIMAL).field(), "--interval");
    let args = ThanosScorerArgs {
        query_timeout: Some(huge.into()),
        ..Default::default()
    };
    assert_eq!(error(args, MINIMAL).field(), "--query-timeout");
}

#[test]
fn missing_url_says_how_to_set_it() {
    let err = error(ThanosScorerArgs::default(), "scores: [{name: a, query: x}]");
    assert_eq!(err.field(), "query.url");
    assert!(err.to_string().contains("--query-url"), "{err}");
}

#[test]
fn fixed_bounds_and_directions_parse() {
    let yaml = "
query: {url: 'http://127.0.0.1:9090'}
scores:
  - {name: lat, query: x, direction: lowerIsBetter, normalization: fixed, min: -5, max: 250.5}
leaderElection: {namespace: ocm, leaseName: scorer, leaseDuration: 20s, renewDeadline: 15s, retryPeriod: 3s}
";
    let config = Config::from_parts(&ThanosScorerArgs::default(), file(yaml)).expect("valid");
    assert_eq!(config.scores[0].direction, Direction::LowerIsBetter);
    assert_eq!(
        config.scores[0].normalization,
        Normalization::Fixed {
            min: -5.0,
            max: 250.5
        }
    );
    let le = config.leader_election.expect("enabled by default");
    assert_eq!(le.namespace.as_deref(), Some("ocm"));
    assert_eq!(le.lease_name, "scorer");
    assert_eq!(le.lease_duration, Duration::from_secs(20));
}

#[test]
fn lease_timing_must_nest() {
    let args = ThanosScorerArgs {
        leader_election: LeaderElectionArgs {
            renew_deadline: Some(Duration::from_secs(20)),
            ..Default::default()
        },
        ..Default::default()
    };
    let yaml = "query: {url: 'http://127.0.0.1:9090'}\nscores: [{name: a, query: x}]\n";
    assert_eq!(error(args, yaml).field(), "--leader-election-renew-deadline");
    let yaml =
        "query: {url: 'http://127.0.0.1:9090'}\nscores: [{name: a, query: x}]\nmetricsBindAddress: '8080'\n";
    assert_eq!(
        error(ThanosScorerArgs::default(), yaml).field(),
        "metricsBindAddress"
    );
}

#[test]
fn passwords_in_the_url_stay_out_of_messages() {
    let args = ThanosScorerArgs {
        query_url: Some("ftp://scorer:hunter2@thanos".into()),
        ..Default::default()
    };
    let err = error(args, MINIMAL).to_string();
    assert!(
        !err.contains("hunter2") && err.contains("ftp://***@thanos"),
        "{err}"
    );
    assert_eq!(
        redact_userinfo("http://thanos:9090/a@b"),
        "http://thanos:9090/a@b"
    );
}
