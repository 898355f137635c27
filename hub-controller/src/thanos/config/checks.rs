//! Checks of single values, each naming the field on failure: durations (the process shell's one
//! grammar, bounded here), readable files, Prometheus label names, DNS names; and the URL as
//! messages may show it.

use super::ConfigError;
use ocm_score_api::names::is_dns_subdomain;
use std::path::Path;
use std::time::Duration;

pub(super) fn optional_duration(field: &str, text: Option<String>) -> Result<Option<Duration>, ConfigError> {
    text.map(|t| checked_duration(field, &t)).transpose()
}

/// A duration in the process shell's grammar (`90s`, `1m30s`, `250ms`, `1h`, bare seconds, and the
/// friendly and ISO 8601 forms this file always took, see `ocm_score_shell::args::parse_duration`);
/// must be positive and at most a year.
pub fn checked_duration(field: &str, text: &str) -> Result<Duration, ConfigError> {
    if text.trim().starts_with('-') {
        return Err(ConfigError::invalid(field, text, "must be longer than zero"));
    }
    let duration = ocm_score_shell::args::parse_duration(text)
        .map_err(|_| ConfigError::invalid(field, text, "is not a duration like 30s, 5m or 1h30m"))?;
    if duration.is_zero() {
        return Err(ConfigError::invalid(field, text, "must be longer than zero"));
    }
    // Far beyond any sensible setting, and small enough that sums and multiples of durations (3 ×
    // interval, timeout × attempts × scores) cannot overflow.
    if duration > MAX_DURATION {
        return Err(ConfigError::invalid(field, text, "must be at most a year"));
    }
    Ok(duration)
}

const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

pub(super) fn must_be_readable(field: &str, path: &Path) -> Result<(), ConfigError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ConfigError::invalid(field, path.display(), format!("cannot be read: {e}")))?;
    match file.metadata() {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(ConfigError::invalid(
            field,
            path.display(),
            "is not a regular file",
        )),
        Err(e) => Err(ConfigError::invalid(
            field,
            path.display(),
            format!("cannot be read: {e}"),
        )),
    }
}

/// `scheme://user:password@host/...` → `scheme://***@host/...`, for messages.
pub(super) fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

pub(super) fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn is_dns_name(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    is_dns_subdomain(lower.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(checked_duration("f", "90s"), Ok(Duration::from_secs(90)));
        assert_eq!(checked_duration("f", "1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(checked_duration("f", "250ms"), Ok(Duration::from_millis(250)));
        assert!(checked_duration("f", "0s").is_err());
        assert!(checked_duration("f", "-5s").is_err());
        assert!(checked_duration("f", "5 parsecs").is_err());
        assert!(checked_duration("f", "366d").is_err());
    }

    /// The shell's grammar is the agent's Go-style one plus the forms this file took before the two
    /// were merged: both kinds keep working here.
    #[test]
    fn durations_old_and_new_forms() {
        for (text, millis) in [
            // Taken before (jiff's friendly format and ISO 8601) and still.
            ("1.5s", 1_500),
            ("2 minutes", 120_000),
            ("1h 30m", 5_400_000),
            ("PT1M30S", 90_000),
            ("90s", 90_000),
            // New: the Go-style grammar's bare seconds.
            ("90", 90_000),
        ] {
            assert_eq!(
                checked_duration("f", text),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
        }
    }
}
