//! The `cel` target: its checks are `ocm_score_fuzz::cel::check` (fuzz/src/cel.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::cel::check(data));
