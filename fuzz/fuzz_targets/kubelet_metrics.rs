//! The `kubelet_metrics` target: its checks are `ocm_score_fuzz::kubelet_metrics::check` (fuzz/src/kubelet_metrics.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::kubelet_metrics::check(data));
