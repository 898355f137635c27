//! The outcome code of a scheduling step, as OCM's framework status carries it.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusCode {
    Success,
    /// The step produced a usable result but something deserves attention (expired scores).
    Warning,
    /// The step failed for an operational reason (OCM: lister errors; this crate has none).
    Error,
    /// The placement's spec cannot be honoured as written.
    Misconfigured,
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StatusCode::Success => "Success",
            StatusCode::Warning => "Warning",
            StatusCode::Error => "Error",
            StatusCode::Misconfigured => "Misconfigured",
        })
    }
}

/// A status code with the plugin that produced it (may be empty) and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub code: StatusCode,
    pub plugin: String,
    pub message: String,
}

impl Status {
    pub fn success() -> Self {
        Self {
            code: StatusCode::Success,
            plugin: String::new(),
            message: String::new(),
        }
    }

    pub fn warning(plugin: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: StatusCode::Warning,
            plugin: plugin.into(),
            message: message.into(),
        }
    }

    pub fn misconfigured(plugin: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: StatusCode::Misconfigured,
            plugin: plugin.into(),
            message: message.into(),
        }
    }

    /// OCM's `IsError`: both Error and Misconfigured stop the pipeline.
    pub fn is_error(&self) -> bool {
        matches!(self.code, StatusCode::Error | StatusCode::Misconfigured)
    }
}

impl Default for Status {
    fn default() -> Self {
        Self::success()
    }
}
