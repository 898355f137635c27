//! `once`'s settings: scoring, and the hub only when `--publish` asks for a write.

use super::{ConfigError, HubTarget, ScoringConfig};
use crate::cli::OnceArgs;

#[derive(Clone, Debug)]
pub struct OnceConfig {
    pub scoring: ScoringConfig,
    /// Set when `--publish` was given.
    pub publish: Option<HubTarget>,
}

impl OnceConfig {
    pub fn from_args(args: OnceArgs) -> Result<Self, ConfigError> {
        let OnceArgs { scoring, publish } = args;
        let scoring = ScoringConfig::from_args(scoring, ocm_score_agent_contract::ONCE_VALIDITY)?;
        let publish = if publish {
            Some(scoring.require_hub()?)
        } else {
            None
        };
        Ok(OnceConfig { scoring, publish })
    }
}
