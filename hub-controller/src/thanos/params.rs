//! Thanos Query's own parameters of `/api/v1/query`, sent with every score query (Prometheus
//! ignores them), and what the scorer does with an answer that says it is partial.
//!
//! - `partial_response`: whether Thanos may answer without the stores that fail (HTTP 200, the
//!   missing stores named in `warnings`) or must fail the query instead. Thanos v0.41 answers with
//!   warnings even when asked not to if a store cannot be reached at all (it aborts only when a store
//!   fails inside its stream), so the scorer judges every answer by its warnings ([`PartialPolicy`]).
//! - `dedup`: whether series of HA replicas (equal but for the querier's `--query.replica-label`)
//!   are merged; without it an aggregation over an HA pair counts every sample twice.
//! - `max_source_resolution`: the coarsest downsampled data a query may read (`0s`: raw only, `5m`,
//!   `1h`, or `auto`: a fifth of the step); unset, the querier's default applies.

use std::{fmt, str::FromStr, time::Duration};

/// The Thanos parameters of every score query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThanosParams {
    /// `partial_response`. On by default, as in Thanos: a partial answer arrives with warnings naming
    /// the stores that did not answer, and [`PartialPolicy`] decides; off, Thanos fails the query
    /// when a store fails while it streams.
    pub partial_response: bool,
    /// `dedup`.
    pub dedup: bool,
    /// `max_source_resolution`; `None` sends nothing.
    pub max_source_resolution: Option<MaxSourceResolution>,
}

impl Default for ThanosParams {
    fn default() -> Self {
        Self {
            partial_response: true,
            dedup: true,
            max_source_resolution: None,
        }
    }
}

impl ThanosParams {
    /// The form fields to send, in a fixed order.
    pub fn form(&self) -> Vec<(&'static str, String)> {
        let mut form = vec![
            ("partial_response", self.partial_response.to_string()),
            ("dedup", self.dedup.to_string()),
        ];
        if let Some(resolution) = &self.max_source_resolution {
            form.push(("max_source_resolution", resolution.to_string()));
        }
        form
    }
}

/// `max_source_resolution`: `auto` or a resolution in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxSourceResolution {
    Auto,
    Resolution(Duration),
}

impl FromStr for MaxSourceResolution {
    type Err = String;

    /// `auto`, or a duration such as `0s` (raw data only), `5m` or `1h`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text == "auto" {
            return Ok(Self::Auto);
        }
        let signed: jiff::SignedDuration = text
            .parse()
            .map_err(|_| "is neither `auto` nor a duration like 0s, 5m or 1h".to_owned())?;
        if signed.is_negative() {
            return Err("must not be negative".into());
        }
        if signed.subsec_nanos() != 0 {
            return Err("must be whole seconds (Thanos downsamples to 5m and 1h)".into());
        }
        Duration::try_from(signed)
            .map(Self::Resolution)
            .map_err(|_| "is out of range".into())
    }
}

impl fmt::Display for MaxSourceResolution {
    /// As Thanos reads it: `auto` or seconds, e.g. `300s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Resolution(d) => write!(f, "{}s", d.as_secs()),
        }
    }
}

/// What to do with an answer that carries warnings other than PromQL annotations. Thanos names the
/// stores that did not answer there; an answer without some stores lacks their clusters, and
/// fleet-wide bounds taken from the rest would shift every other cluster's score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartialPolicy {
    /// Use nothing of the round (the default): published scores age towards their `validUntil`.
    #[default]
    Refuse,
    /// Score from what answered (the missing clusters are not renewed and expire).
    Accept,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ask_for_partial_answers_and_deduplication() {
        assert_eq!(
            ThanosParams::default().form(),
            vec![
                ("partial_response", "true".to_owned()),
                ("dedup", "true".to_owned())
            ]
        );
    }

    #[test]
    fn every_parameter_is_sent_as_set() {
        let params = ThanosParams {
            partial_response: false,
            dedup: false,
            max_source_resolution: Some(MaxSourceResolution::Resolution(Duration::from_secs(300))),
        };
        assert_eq!(
            params.form(),
            vec![
                ("partial_response", "false".to_owned()),
                ("dedup", "false".to_owned()),
                ("max_source_resolution", "300s".to_owned())
            ]
        );
        let auto = ThanosParams {
            max_source_resolution: Some(MaxSourceResolution::Auto),
            ..ThanosParams::default()
        };
        assert_eq!(auto.form()[2], ("max_source_resolution", "auto".to_owned()));
    }

    #[test]
    fn max_source_resolutions_parse() {
        let ok = |text: &str| MaxSourceResolution::from_str(text).map(|r| r.to_string());
        assert_eq!(ok("auto"), Ok("auto".into()));
        assert_eq!(ok("0s"), Ok("0s".into()));
        assert_eq!(ok("5m"), Ok("300s".into()));
        assert_eq!(ok(" 1h "), Ok("3600s".into()));
        assert_eq!(ok("1h30m"), Ok("5400s".into()));
        for bad in ["", "Auto", "-5m", "1.5s", "250ms", "soon"] {
            assert!(MaxSourceResolution::from_str(bad).is_err(), "{bad:?}");
        }
    }
}
