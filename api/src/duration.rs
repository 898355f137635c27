//! Go-style durations (`90s`, `1m30s`, `500ms`, `1h`) as the agent and the add-on manager accept them.
//!
//! One grammar for every flag and add-on variable, so a value valid for one is valid for all.
//! Callers wrap [`DurationError`] in their own message naming the flag or variable and the value.

use std::time::Duration;

/// Why a text is not a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("is empty")]
    Empty,
    #[error("{0:?} is not a whole number")]
    NotANumber(String),
    #[error("a number must come before {0:?}")]
    MissingNumber(String),
    #[error("{0:?} has no unit (ms, s, m or h)")]
    MissingUnit(String),
    #[error("unknown unit {0:?}; expected ms, s, m or h")]
    UnknownUnit(String),
    #[error("is too long to represent")]
    Overflow,
}

/// Parses a sum of `<whole number><unit>` parts with units `ms`, `s`, `m`, `h` (e.g. `1h30m`),
/// or a bare whole number of seconds (`90`). Surrounding whitespace is ignored; signs, fractions
/// and inner spaces are rejected, and arithmetic that would overflow is an error, not a wrap.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return whole_number(text).map(Duration::from_secs);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == rest.len() {
            return Err(DurationError::MissingUnit(rest.to_owned()));
        }
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - digits);
        let unit = &rest[digits..digits + unit_len];
        if digits == 0 {
            return Err(DurationError::MissingNumber(unit.to_owned()));
        }
        let number = whole_number(&rest[..digits])?;
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.checked_mul(60).ok_or(DurationError::Overflow)?),
            "h" => Duration::from_secs(number.checked_mul(3600).ok_or(DurationError::Overflow)?),
            other => return Err(DurationError::UnknownUnit(other.to_owned())),
        };
        total = total.checked_add(part).ok_or(DurationError::Overflow)?;
        rest = &rest[digits + unit_len..];
    }
    Ok(total)
}

fn whole_number(digits: &str) -> Result<u64, DurationError> {
    digits
        .parse()
        .map_err(|_| DurationError::NotANumber(digits.to_owned()))
}

/// A duration in the same grammar, shortest form first: `90s` → `1m30s`, `1500ms` → `1500ms`,
/// `2h` → `2h`. Whatever [`format`] writes, [`parse`] reads back to the same duration (below a
/// millisecond, the sub-millisecond part is shown in milliseconds rounded down).
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        if u64::try_from(ms).is_ok() {
            return format!("{ms}ms");
        }
        // Past u64 milliseconds one number cannot be read back: spell out the seconds first.
        return format!("{}{}ms", format(Duration::from_secs(d.as_secs())), ms % 1000);
    }
    let s = ms / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, 0, s) => format!("{h}h{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_units_sums_and_bare_seconds() {
        for (text, millis) in [
            ("60s", 60_000),
            ("3m", 180_000),
            ("1m30s", 90_000),
            ("1h30m", 5_400_000),
            ("500ms", 500),
            ("1s500ms", 1_500),
            ("1h", 3_600_000),
            ("45", 45_000),
            (" 90s\n", 90_000),
            ("0s", 0),
        ] {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
    }

    #[test]
    fn names_what_is_wrong() {
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert_eq!(parse("  "), Err(DurationError::Empty));
        assert_eq!(parse("s"), Err(DurationError::MissingNumber("s".into())));
        assert_eq!(parse("m5"), Err(DurationError::MissingNumber("m".into())));
        assert_eq!(parse("-1s"), Err(DurationError::MissingNumber("-".into())));
        assert_eq!(parse("1m30"), Err(DurationError::MissingUnit("30".into())));
        assert_eq!(parse("1x"), Err(DurationError::UnknownUnit("x".into())));
        assert_eq!(parse("1d"), Err(DurationError::UnknownUnit("d".into())));
        assert_eq!(parse("1.5s"), Err(DurationError::UnknownUnit(".".into())));
        assert_eq!(parse("1 s"), Err(DurationError::UnknownUnit(" s".into())));
        assert_eq!(
            parse("99999999999999999999"),
            Err(DurationError::NotANumber("99999999999999999999".into()))
        );
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        let max = u64::MAX;
        assert_eq!(parse(&format!("{max}h")), Err(DurationError::Overflow));
        assert_eq!(parse(&format!("{max}m")), Err(DurationError::Overflow));
        assert_eq!(parse(&format!("{max}s1s")), Err(DurationError::Overflow));
        assert_eq!(parse(&format!("{max}s")), Ok(Duration::from_secs(max)));
    }

    #[test]
    fn formats_shortest_first_and_parses_back() {
        for (millis, text) in [
            (90_000, "1m30s"),
            (1_500, "1500ms"),
            (60_000, "1m"),
            (7_200_000, "2h"),
            (3_660_000, "1h1m"),
            (3_601_000, "1h1s"),
            (0, "0s"),
        ] {
            let d = Duration::from_millis(millis);
            assert_eq!(format(d), text);
            assert_eq!(parse(text), Ok(d), "{text}");
        }
    }

    /// Found by the `duration` fuzz target: `244442444444415h42h45m5ms` was written back as one
    /// number of milliseconds too large for `parse` to read.
    #[test]
    fn durations_past_u64_milliseconds_read_back() {
        let d = parse(" 244442444444415h42h45m5ms ").expect("a sum of parts");
        assert_eq!(parse(&format(d)), Ok(d));
        let max = Duration::from_secs(u64::MAX) + Duration::from_millis(999);
        assert_eq!(format(max), "5124095576030431h15s999ms");
        assert_eq!(parse(&format(max)), Ok(max));
    }
}
