//! The `quantity` target: its checks are `ocm_score_fuzz::quantity::check` (fuzz/src/quantity.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::quantity::check(data));
