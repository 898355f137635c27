//! Durations as the TieredPlacement status shows them.

use std::time::Duration;

/// A duration as the API shows it (`90s`, `15m`, `1h30m`).
pub fn format_duration(d: Duration) -> String {
    let total = d.as_secs();
    if total == 0 {
        return if d.subsec_millis() > 0 {
            format!("{}ms", d.subsec_millis())
        } else {
            "0s".to_string()
        };
    }
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_the_spec_writes_them() {
        assert_eq!(format_duration(Duration::from_secs(15 * 60)), "15m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
