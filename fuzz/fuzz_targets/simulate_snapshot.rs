//! The `simulate_snapshot` target: its checks are `ocm_score_fuzz::simulate_snapshot::check` (fuzz/src/simulate_snapshot.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocm_score_fuzz::simulate_snapshot::check(data));
