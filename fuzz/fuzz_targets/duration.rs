//! The `duration` target: its checks are `ocm_score_fuzz::duration::check` (fuzz/src/duration.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::duration::check(data));
