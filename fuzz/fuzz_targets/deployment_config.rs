//! The `deployment_config` target: its checks are `ocm_score_fuzz::deployment_config::check` (fuzz/src/deployment_config.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::deployment_config::check(data));
