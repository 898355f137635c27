//! Tests of `lib.rs`, kept beside it so the code reads without them.

use super::*;

#[test]
fn durations_parse_and_print_in_one_grammar() {
    assert_eq!(duration_arg("1m30s"), Ok(DurationArg(Duration::from_secs(90))));
    assert_eq!(DurationArg(Duration::from_secs(90)).to_string(), "1m30s");
    for bad in ["", "s", "1x", "1.5s", "-1s", "m5", "1 s", "1d"] {
        assert!(duration_arg(bad).is_err(), "{bad}");
    }
}

#[test]
fn sources() {
    let list = |text: &str| {
        let parsed: Result<Vec<Source>, String> = text.split(',').map(parse_source).collect();
        Sources::from_list(&parsed.map_err(|e| FlagError::new(flag::SOURCE, text, e))?)
    };
    assert_eq!(
        list("cluster,kubelet").map(|s| s.names()),
        Ok(vec!["cluster", "kubelet"])
    );
    assert!(list("cluster,moon").is_err_and(|e| e.reason.contains("moon")));
    assert!(list("host,host").is_err_and(|e| e.reason.contains("twice")));
    assert!(list("kubelet").is_err_and(|e| e.reason.contains("cluster,kubelet")));
    assert!(Sources::from_list(&[]).is_err_and(|e| e.value.is_empty()));
    assert_eq!(list(DEFAULT_SOURCES), Ok(Sources::DEFAULT));
}

#[test]
fn extended_resource_prefixes() {
    let p = |t| parse_extended_resource(t).map(|e| e.prefix);
    assert_eq!(p("amd.com/gpu"), Ok("amdGpu".into()));
    assert_eq!(p("nvidia.com/mig-1g.5gb"), Ok("nvidiaMig1g5gb".into()));
    assert_eq!(p("hugepages-2Mi"), Ok("hugepages2Mi".into()));
    assert_eq!(p("example.com/fpga=fpga"), Ok("fpga".into()));
    assert!(p("nvidia.com/gpu").is_err_and(|e| e.contains("scored already")));
    assert!(p("a b").is_err());
    assert!(p("a/b/c").is_err());
    assert!(p("x.io/y=Bad").is_err_and(|e| e.contains("lowerCamelCase")));
}

#[test]
fn normalize_specs() {
    assert_eq!(
        parse_normalize("cpuClusterAvailable=absolute:0:500"),
        Ok(NormalizeArg {
            score: "cpuClusterAvailable".into(),
            normalization: Normalization::Absolute { min: 0.0, max: 500.0 }
        })
    );
    assert_eq!(
        parse_normalize("memNodeAvailable=percent").map(|n| n.normalization),
        Ok(Normalization::Percent { min: 0.0, max: 100.0 })
    );
    for bad in [
        "cpu",
        "x=absolute:1",
        "x=absolute:5:5",
        "x=absolute:a:5",
        "x=linear:0:1",
        "x=percent:0:inf",
    ] {
        assert!(parse_normalize(bad).is_err(), "{bad}");
    }
}

#[test]
fn published_scores_follow_extension_renormalization_and_selection() {
    assert_eq!(
        built_in_score_names().collect::<Vec<_>>(),
        published_scores(&[], &[], &[])
            .expect("defaults")
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
    );
    let amd = parse_extended_resource("amd.com/gpu").expect("valid");
    let scores = published_scores(
        &[amd],
        &[parse_normalize("amdGpuClusterAvailable=absolute:0:4").expect("valid")],
        &["cpuNodeAvailable".into(), "amdGpuClusterAvailable".into()],
    )
    .expect("valid");
    assert_eq!(scores.len(), 2);
    assert_eq!(scores[1].resource, "amd.com/gpu");
    assert_eq!(
        scores[1].normalization,
        Normalization::Absolute { min: 0.0, max: 4.0 }
    );
    let taken = parse_extended_resource("example.com/x=cpu").expect("parses");
    assert!(published_scores(&[taken], &[], &[]).is_err_and(|e| e.reason.contains("taken")));
    let e = published_scores(
        &[],
        &[parse_normalize("gpuAvailable=percent").expect("parses")],
        &[],
    )
    .expect_err("unknown");
    assert_eq!(
        (e.flag, e.value.as_str()),
        (flag::NORMALIZE, "gpuAvailable=percent:0:100")
    );
    assert!(
        e.reason.contains("gpuClusterAvailable"),
        "lists the known names: {e}"
    );
    let e = published_scores(&[], &[], &["nope".into()]).expect_err("unknown");
    assert_eq!((e.flag, e.value.as_str()), (flag::SCORES, "nope"));
}

#[test]
fn timing_defaults_renew_every_refresh() {
    let renewal = Timing::default().check().expect("valid");
    assert_eq!(renewal.renew_margin, Duration::from_secs(96), "66s + 10s + 20s");
    assert_eq!(
        (renewal.validity, renewal.renew_every),
        (Duration::from_secs(97), 1)
    );
    let saving = Timing {
        renew_every: Some(2),
        ..Timing::default()
    };
    assert_eq!(saving.check().map(|r| r.validity), Ok(Duration::from_secs(163)));
}

#[test]
fn timing_rules_name_flag_and_value() {
    let err = |t: Timing| t.check().expect_err("invalid");
    let e = err(Timing {
        validity: Some(Duration::from_secs(60)),
        ..Timing::default()
    });
    assert_eq!((e.flag, e.value.as_str()), (flag::VALIDITY, "1m"));
    assert!(
        e.to_string()
            .starts_with("invalid value '1m' for '--validity': must exceed"),
        "{e}"
    );
    let e = err(Timing {
        validity: Some(Duration::from_secs(180)),
        renew_every: Some(2),
        ..Timing::default()
    });
    assert_eq!((e.flag, e.value.as_str()), (flag::RENEW_EVERY, "2"));
    let e = err(Timing {
        refresh: Duration::from_secs(3600),
        renew_every: Some(30),
        ..Timing::default()
    });
    assert!(
        e.flag == flag::RENEW_EVERY && e.reason.contains("at most 24h"),
        "{e}"
    );
    assert_eq!(
        err(Timing {
            jitter: 0.9,
            ..Timing::default()
        })
        .flag,
        flag::JITTER
    );
    let e = err(Timing {
        refresh: Duration::from_secs(3),
        ..Timing::default()
    });
    assert_eq!(e.flag, flag::DEBOUNCE);
    let e = err(Timing {
        hub_timeout: Duration::from_millis(10),
        ..Timing::default()
    });
    assert_eq!((e.flag, e.value.as_str()), (flag::HUB_TIMEOUT, "10ms"));
}
