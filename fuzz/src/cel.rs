//! A placement's `celSelector` expression: compiled, then evaluated for every cluster of a small
//! fleet. Must hold: no panic, no hang (the cost budget bounds every evaluation), a compile error in
//! OCM's shape, and the two ways the scheduler asks (`is_true` on the bound program, `eval_bool`
//! unbound) agree for every cluster.

use ocm_score_scheduler::placement::cel::{ClusterActivation, Program};

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let program = match Program::compile(src) {
        Ok(program) => program,
        Err(e) => {
            assert!(
                e.starts_with("compilation failed: ERROR: <input>: ")
                    || e.starts_with("instantiation failed: "),
                "unexpected compile error shape: {e}"
            );
            return;
        }
    };
    let fleet = super::small_fleet();
    let bound = program.bind(fleet);
    for id in fleet.cluster_ids() {
        let matched = bound.is_true(&ClusterActivation::new(fleet, id));
        let evaluated = program.eval_bool(&ClusterActivation::new(fleet, id));
        assert_eq!(
            matched,
            evaluated == Ok(true),
            "is_true and eval_bool disagree on {}: {evaluated:?}",
            fleet.cluster_name(id)
        );
    }
}
