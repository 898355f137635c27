//! Durations: scheduler-core's Go-style grammar (agent flags, add-on variables, TieredPlacement
//! fields), the process shell's superset (hub flags and configuration files), and the Thanos
//! scorer's bounded settings. Must hold: no panic; what `format` writes reads back to the same
//! duration; every parser that shares the grammar agrees with it; the scorer's checks keep their
//! bounds.

use ocm_score_api::duration;
use std::time::Duration;

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let core = duration::parse(text);
    if let Ok(d) = core {
        let written = duration::format(d);
        assert_eq!(
            duration::parse(&written),
            Ok(d),
            "{text:?} -> {written:?} does not read back"
        );
    }
    assert_eq!(
        ocm_score_agent_contract::duration_arg(text).map(|d| d.0).ok(),
        core.clone().ok(),
        "{text:?}: the agent's flags disagree with the grammar"
    );
    let shell = ocm_score_shell::args::parse_duration(text);
    match (&core, &shell) {
        (Ok(c), Ok(s)) => assert_eq!(c, s, "{text:?}: the shell reads another duration"),
        (Ok(c), Err(e)) => panic!("{text:?}: the shell refuses what the grammar reads as {c:?}: {e}"),
        _ => {}
    }
    if let Ok(d) = shell {
        // Below a millisecond, `format` rounds down; the rest reads back exactly.
        let whole_ms = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        if whole_ms == d {
            assert_eq!(
                duration::parse(&duration::format(d)),
                Ok(d),
                "{text:?}: shell reading does not round-trip"
            );
        }
    }
    if let Ok(d) = ocm_score_hub::thanos::config::checked_duration("interval", text) {
        assert!(
            !d.is_zero() && d <= Duration::from_secs(365 * 24 * 3600),
            "{text:?}: {d:?} out of bounds"
        );
    }
}
