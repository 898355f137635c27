//! Fault injection: failing requests, latency, cut watch streams and refused connections.

use super::{lock, status::ApiError};
use std::{
    sync::Mutex,
    time::{Duration, Instant},
};
use tokio::sync::{Notify, watch};

/// Which requests a fault applies to; unset parts match anything.
///
/// `resource` is a plural (`addonplacementscores`, matching the resource and its subresources)
/// or `plural/subresource` (`addonplacementscores/status`, matching only that subresource).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMatch {
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl RequestMatch {
    pub fn any() -> Self {
        Self::default()
    }

    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }

    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Parses `verb=patch,resource=addonplacementscores/status,namespace=c1,name=x` (all optional).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut m = Self::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("expected key=value, got {part:?}"))?;
            match k {
                "verb" => m.verb = Some(v.into()),
                "resource" => m.resource = Some(v.into()),
                "namespace" => m.namespace = Some(v.into()),
                "name" => m.name = Some(v.into()),
                other => {
                    return Err(format!(
                        "unknown match key {other:?} (verb, resource, namespace, name)"
                    ));
                }
            }
        }
        Ok(m)
    }

    pub(crate) fn matches(&self, r: &RequestFacts) -> bool {
        let resource_ok = match self.resource.as_deref() {
            None => true,
            Some(want) => match want.split_once('/') {
                Some((res, sub)) => r.resource == res && r.subresource == sub,
                None => r.resource == want,
            },
        };
        resource_ok
            && self.verb.as_deref().is_none_or(|v| v == r.verb)
            && self.namespace.as_deref().is_none_or(|n| n == r.namespace)
            && self.name.as_deref().is_none_or(|n| n == r.name)
    }
}

/// The parts of a request faults are matched on.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestFacts {
    pub(crate) verb: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

#[derive(Debug)]
struct Failure {
    matching: RequestMatch,
    remaining: usize,
    code: u16,
    retry_after: Option<u64>,
}

#[derive(Default)]
struct State {
    failures: Vec<Failure>,
    latencies: Vec<(RequestMatch, Duration)>,
    refuse_until: Option<Instant>,
}

/// The fault programme of one server, shared by the test that programs it and the server.
pub struct Faults {
    state: Mutex<State>,
    /// Bumped to end every open watch stream abruptly.
    pub(crate) cut: watch::Sender<u64>,
    /// Wakes the accept loop when connections must be refused.
    pub(crate) refuse: Notify,
    /// Wakes the refusing accept loop when a test ends the refusal early.
    pub(crate) resume: Notify,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            cut: watch::channel(0).0,
            refuse: Notify::new(),
            resume: Notify::new(),
        }
    }
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").finish_non_exhaustive()
    }
}

impl Faults {
    /// Fails the next `count` matching requests with `code` (e.g. 500, 503, 409, 504) and a `Status`
    /// body worded as the real server words that code.
    pub fn fail_next(&self, count: usize, matching: RequestMatch, code: u16) {
        lock(&self.state).failures.push(Failure {
            matching,
            remaining: count,
            code,
            retry_after: None,
        });
    }

    /// Answers the next `count` matching requests with 429 TooManyRequests and `Retry-After`.
    pub fn throttle_next(&self, count: usize, matching: RequestMatch, retry_after_seconds: u64) {
        lock(&self.state).failures.push(Failure {
            matching,
            remaining: count,
            code: 429,
            retry_after: Some(retry_after_seconds),
        });
    }

    /// Delays every matching request by `delay` before it is handled (until `clear`).
    pub fn add_latency(&self, matching: RequestMatch, delay: Duration) {
        lock(&self.state).latencies.push((matching, delay));
    }

    /// Ends every open watch stream now, mid-stream, without a clean end of the chunked body.
    pub fn cut_watches(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Closes the listening socket and every open connection; new connections are refused
    /// (ECONNREFUSED) for `period`, then the server listens on the same address again.
    pub fn refuse_connections(&self, period: Duration) {
        lock(&self.state).refuse_until = Some(Instant::now() + period);
        self.refuse.notify_one();
    }

    /// Ends a refusal at once: the server listens on its address again (no-op when not refusing).
    /// A test that refuses "until the client has met the refusal" uses a long period and this.
    pub fn accept_connections(&self) {
        lock(&self.state).refuse_until = None;
        self.resume.notify_one();
    }

    /// Removes every programmed failure and latency.
    pub fn clear(&self) {
        let mut state = lock(&self.state);
        state.failures.clear();
        state.latencies.clear();
    }

    /// How many programmed failures have not fired yet.
    pub fn pending(&self) -> usize {
        lock(&self.state).failures.iter().map(|f| f.remaining).sum()
    }

    pub(crate) fn refuse_until(&self) -> Option<Instant> {
        lock(&self.state).refuse_until.filter(|t| *t > Instant::now())
    }

    pub(crate) fn latency(&self, r: &RequestFacts) -> Duration {
        lock(&self.state)
            .latencies
            .iter()
            .filter(|(m, _)| m.matches(r))
            .map(|(_, d)| *d)
            .sum()
    }

    /// Consumes one matching failure, if any is programmed.
    pub(crate) fn take_failure(&self, r: &RequestFacts) -> Option<ApiError> {
        let mut state = lock(&self.state);
        let failure = state
            .failures
            .iter_mut()
            .find(|f| f.remaining > 0 && f.matching.matches(r))?;
        failure.remaining -= 1;
        let error = ApiError::from_code(failure.code, failure.retry_after);
        state.failures.retain(|f| f.remaining > 0);
        Some(error)
    }
}
