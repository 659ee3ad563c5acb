//! The CLI's error of an API call: the API's problem (RFC 9457 with kubenest's `code`, `field`
//! and `ways_out`), or why the API could not be asked.

use std::path::PathBuf;

use kubenest_api::WayOut;

/// An answer other than 2xx, in the API's words.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{status} {code}: {message}{}{}", field.as_ref().map(|f| format!(" (field `{f}`)")).unwrap_or_default(), ways(ways_out))]
    Status {
        status: u16,
        code: String,
        message: String,
        field: Option<String>,
        /// For an App or addon that does not converge: the requests still allowed
        /// (`METHOD path`, with the components a patch must touch).
        ways_out: Vec<String>,
    },
    #[error("cannot reach the kubenest API at {base}: {source}")]
    Transport {
        base: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("not logged in: run `kubenest login` (or set KUBENEST_API and log in again)")]
    NotLoggedIn,
    /// `--ca-file` cannot be read or holds no PEM certificate.
    #[error("--ca-file {path}: {reason}")]
    CaFile { path: PathBuf, reason: String },
    /// A password would cross the network unencrypted.
    #[error(
        "refusing to send a password to {base} over plain HTTP: use https:// (with --ca-file \
         for a private CA); plain http is only for loopback addresses"
    )]
    PlaintextPassword { base: String },
    /// A 2xx answer that is not the shape this version of the CLI knows (an API of another
    /// version).
    #[error("the API's answer to {path} is not what this kubenest expects: {reason}")]
    Answer { path: String, reason: String },
}

impl ApiError {
    /// The HTTP status, when the API answered at all.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API's error code (`not_found`, `validation`, `blocked_sync`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Status { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// One of an error's `ways_out` as `action: METHOD path` (and the components a patch touches).
pub(super) fn way_out(way: &WayOut) -> String {
    // The action as the API spells it (`rollback`, `patch`, ...).
    let action = serde_json::to_value(way.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut line = format!("{action}: {} {}", way.method, way.path);
    if !way.components.is_empty() {
        line.push_str(&format!(" (change {})", way.components.join(", ")));
    }
    line
}

/// The ways out as lines after an error's message.
fn ways(ways_out: &[String]) -> String {
    ways_out
        .iter()
        .map(|w| format!("\n  way out: {w}"))
        .collect()
}
