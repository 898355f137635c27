//! The `prometheus_response` target: its checks are `ocm_score_fuzz::prometheus_response::check` (fuzz/src/prometheus_response.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::prometheus_response::check(data));
