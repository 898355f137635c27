//! `ocm-score-hub tiering` flags. Every flag is also an environment variable of the shell's scheme
//! (`--some-thing` / `OCM_SCORE_SOME_THING`); bad values exit 2 naming the flag and value.

use clap::Args;
use ocm_score_scheduler::reservation::Timing;
use ocm_score_shell::args::{
    LeaderDefaults, LeaderElection, LeaderElectionArgs, LeaderElectionFile, ProbeArgs, SettingError,
    parse_duration,
};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct TieringArgs {
    /// `/metrics`, `/healthz` and `/readyz` (the process shell's flags).
    #[command(flatten)]
    pub probes: ProbeArgs,

    /// Leader election (the process shell's flags).
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,

    /// How many TieredPlacements are reconciled at once.
    #[arg(long, env = "OCM_SCORE_WORKERS", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,

    /// Re-plan every TieredPlacement at least this often, even without events or a planned time.
    #[arg(long, env = "OCM_SCORE_RESYNC_PERIOD", default_value = "5m", value_parser = parse_duration)]
    pub resync_period: Duration,

    /// How long OCM's decisions for a child may differ from the planner's prediction (same child
    /// generation) before `PlanDiverged=True`: OCM needs one sync after each change.
    #[arg(long, env = "OCM_SCORE_DIVERGENCE_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub divergence_grace: Duration,

    /// Reserve each TieredPlacement's `spec.workload` on the clusters its plan adds until their
    /// agents report again, so plans made in between see the capacity it takes.
    #[arg(long, env = "OCM_SCORE_RESERVATIONS", value_name = "BOOL", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub reservations: bool,

    /// A reservation's lifetime when no report releases it.
    #[arg(long, env = "OCM_SCORE_RESERVATION_TTL", default_value = "5m", value_parser = parse_duration)]
    pub reservation_ttl: Duration,

    /// Reports observed sooner than this after a reservation may predate the workload's pods
    /// (ManifestWork delivery, pod creation) and do not release it.
    #[arg(long, env = "OCM_SCORE_RESERVATION_SETTLE", default_value = "90s", value_parser = parse_duration)]
    pub reservation_settle: Duration,

    /// Kubeconfig of the hub; default: $KUBECONFIG, ~/.kube/config, or the in-cluster account.
    #[arg(long, env = "OCM_SCORE_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// The controller's Lease, in the namespace of the hub client's configuration (the service
/// account's in a pod) unless told otherwise.
pub const LEADER_DEFAULTS: LeaderDefaults = LeaderDefaults {
    lease_name: "ocm-score-tiering",
    namespace: None,
    identity_fallback: "tiering",
};

/// What the controller runs with, derived from the flags.
#[derive(Clone, Debug)]
pub struct Settings {
    pub workers: u16,
    pub resync: Duration,
    pub divergence_grace: Duration,
    /// `None`: reservations are off.
    pub reservations: Option<Timing>,
    /// Reported as the events' instance.
    pub identity: String,
}

impl TieringArgs {
    /// Checks clap cannot express; the settings and leader election (`None`: off).
    pub fn validate(&self) -> Result<(Settings, Option<LeaderElection>), SettingError> {
        let zero = |flag: &str, d: Duration| SettingError {
            field: flag.to_owned(),
            value: format!("{d:?}"),
            problem: "must be above zero".to_owned(),
        };
        if self.resync_period.is_zero() {
            return Err(zero("--resync-period", self.resync_period));
        }
        if self.divergence_grace.is_zero() {
            return Err(zero("--divergence-grace", self.divergence_grace));
        }
        if self.reservation_ttl.is_zero() {
            return Err(zero("--reservation-ttl", self.reservation_ttl));
        }
        if self.reservation_settle >= self.reservation_ttl {
            return Err(SettingError {
                field: "--reservation-settle".to_owned(),
                value: format!("{:?}", self.reservation_settle),
                problem: format!(
                    "must be shorter than --reservation-ttl ({:?}), or no report could release a reservation",
                    self.reservation_ttl
                ),
            });
        }
        let leader = self
            .leader_election
            .resolve(LeaderElectionFile::default(), &LEADER_DEFAULTS)?;
        let identity = leader.as_ref().map_or_else(
            || ocm_score_shell::args::default_identity(LEADER_DEFAULTS.identity_fallback),
            |le| le.identity.clone(),
        );
        Ok((
            Settings {
                workers: self.workers,
                resync: self.resync_period,
                divergence_grace: self.divergence_grace,
                reservations: self.reservations.then_some(Timing {
                    ttl: self.reservation_ttl,
                    settle: self.reservation_settle,
                }),
                identity,
            },
            leader,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: TieringArgs,
    }

    fn parse(args: &[&str]) -> Result<TieringArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("tiering").chain(args.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_and_overrides() {
        let (settings, leader) = parse(&[]).expect("parses").validate().expect("valid");
        assert_eq!(settings.workers, 4);
        assert_eq!(settings.resync, Duration::from_secs(300));
        assert_eq!(settings.divergence_grace, Duration::from_secs(30));
        assert_eq!(settings.reservations, Some(Timing::default()));
        let leader = leader.expect("on by default");
        assert_eq!(leader.lease_name, "ocm-score-tiering");
        assert_eq!(leader.namespace, None);
        let (settings, leader) = parse(&["--workers=2", "--divergence-grace=5s", "--leader-elect=false"])
            .expect("parses")
            .validate()
            .expect("valid");
        assert_eq!(
            (settings.workers, settings.divergence_grace),
            (2, Duration::from_secs(5))
        );
        assert!(leader.is_none());
        let (settings, _) = parse(&["--reservations=false"])
            .expect("parses")
            .validate()
            .expect("valid");
        assert_eq!(settings.reservations, None);
        let (settings, _) = parse(&["--reservation-ttl=20s", "--reservation-settle=2s"])
            .expect("parses")
            .validate()
            .expect("valid");
        assert_eq!(
            settings.reservations,
            Some(Timing {
                ttl: Duration::from_secs(20),
                settle: Duration::from_secs(2)
            })
        );
    }

    #[test]
    fn bad_values_name_the_flag() {
        let err = parse(&["--resync-period=soon"]).expect_err("bad duration");
        assert!(err.to_string().contains("--resync-period"), "{err}");
        let err = parse(&["--workers=0"]).expect_err("out of range");
        assert!(err.to_string().contains("--workers"), "{err}");
        let err = parse(&["--divergence-grace=0s"])
            .expect("parses")
            .validate()
            .expect_err("zero");
        assert_eq!(err.field, "--divergence-grace");
        let err = parse(&["--reservation-ttl=1m", "--reservation-settle=1m"])
            .expect("parses")
            .validate()
            .expect_err("settle not below the TTL");
        assert_eq!(err.field, "--reservation-settle");
        assert!(err.problem.contains("--reservation-ttl"), "{err:?}");
        let err = parse(&["--reservations=maybe"]).expect_err("not a bool");
        assert!(err.to_string().contains("--reservations"), "{err}");
    }
}
