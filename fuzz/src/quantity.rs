//! Kubernetes quantities: the agent's exact parser (requests, allocatable) and scheduler-core's
//! `AsApproximateFloat64` (resource prioritizers), and CEL's `isQuantity`. Must hold: no panic;
//! where two of them accept the same text, they agree on its value; the agent's whole and milli
//! readings are the same value rounded up at two scales.

use ocm_score_agent::accounting::quantity::{AccountingUnit, parse_quantity};
use ocm_score_api::quantity::approximate_f64;
use ocm_score_scheduler::placement::cel::{ClusterActivation, Program};

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let milli = parse_quantity(text, AccountingUnit::Milli);
    let whole = parse_quantity(text, AccountingUnit::Whole);
    let approx = approximate_f64(text);

    if let (Ok(m), Ok(w)) = (&milli, &whole) {
        // Both round away from zero: w = ceil(|v|), m = ceil(1000|v|), so 1000(w-1) < m <= 1000w.
        let (m, w) = (i128::from(*m).abs(), i128::from(*w).abs());
        assert!(
            m <= 1000 * w && (w == 0 || m > 1000 * (w - 1)),
            "{text:?}: milli {m} and whole {w} disagree"
        );
    }
    if let (Ok(m), Ok(a)) = (&milli, &approx) {
        if a.is_nan() {
            // Go's AsApproximateFloat64 multiplies a zero by 10^scale, and 0 × ∞ is NaN.
            assert_eq!(*m, 0, "{text:?}: NaN for a quantity that is not zero");
            return;
        }
        let m = *m as f64;
        let tolerance = 1.0 + m.abs() * 1e-9;
        assert!(
            (a * 1000.0 - m).abs() <= tolerance,
            "{text:?}: agent reads {m} milli, the prioritizers {a}"
        );
    }
    // CEL's quantity library: what it accepts, Kubernetes' parser accepts.
    if !text.contains(['\'', '\\']) && !text.contains(|c: char| c.is_control()) {
        let program =
            Program::compile(&format!("isQuantity('{text}')")).expect("isQuantity of a literal compiles");
        let fleet = super::small_fleet();
        let Some(id) = fleet.cluster_ids().next() else {
            return;
        };
        if program.eval_bool(&ClusterActivation::new(fleet, id)) == Ok(true) {
            assert!(
                approx.is_ok(),
                "{text:?}: CEL isQuantity accepts, ParseQuantity refuses: {approx:?}"
            );
        }
    }
}
