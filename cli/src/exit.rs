//! The exit status of `kubenest`, so a script can tell what went wrong without reading the
//! message. As `diff` and `kubectl diff` do, 1 means "differences found" and every failure is
//! greater than 1:
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | differences found (`apps diff`) |
//! | 2 | a usage error, or a failure none of the below names |
//! | 3 | not found |
//! | 4 | refused: not signed in, not allowed, not valid, or in conflict |
//! | 5 | timed out: a wait ran out, or the cluster did not confirm in time |
//! | 6 | unavailable: the API, or what it depends on, cannot be reached now |

use crate::api::ApiError;

/// A wait that ran out of time.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TimedOut(pub String);

/// A name that names nothing the caller sees.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotFound(pub String);

/// `apps diff` found differences (after printing them).
#[derive(Debug, thiserror::Error)]
#[error("differences found")]
pub struct DiffFound;

pub const DIFF_FOUND: i32 = 1;
pub const FAILED: i32 = 2;
pub const NOT_FOUND: i32 = 3;
pub const REFUSED: i32 = 4;
pub const TIMED_OUT: i32 = 5;
pub const UNAVAILABLE: i32 = 6;

/// The exit status of a command that ended with `error`.
pub fn status(error: &anyhow::Error) -> i32 {
    if error.downcast_ref::<DiffFound>().is_some() {
        return DIFF_FOUND;
    }
    if error.downcast_ref::<TimedOut>().is_some() {
        return TIMED_OUT;
    }
    if error.downcast_ref::<NotFound>().is_some() {
        return NOT_FOUND;
    }
    match error.downcast_ref::<ApiError>() {
        Some(ApiError::Status { status, .. }) => match status {
            404 => NOT_FOUND,
            400 | 401 | 403 | 405 | 409 | 413 | 422 => REFUSED,
            504 => TIMED_OUT,
            429 | 502 | 503 => UNAVAILABLE,
            _ => FAILED,
        },
        Some(ApiError::Transport { source, .. }) if source.is_timeout() => TIMED_OUT,
        Some(ApiError::Transport { .. }) => UNAVAILABLE,
        Some(ApiError::NotLoggedIn | ApiError::PlaintextPassword { .. }) => REFUSED,
        Some(ApiError::CaFile { .. } | ApiError::Answer { .. }) | None => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> anyhow::Error {
        ApiError::Status {
            status,
            code: "x".into(),
            message: "y".into(),
            field: None,
            ways_out: vec![],
        }
        .into()
    }

    #[test]
    fn each_kind_of_failure_has_its_status() {
        assert_eq!(status(&api(404)), NOT_FOUND);
        assert_eq!(status(&api(403)), REFUSED);
        assert_eq!(status(&api(422)), REFUSED);
        assert_eq!(status(&api(409)), REFUSED);
        assert_eq!(status(&api(504)), TIMED_OUT);
        assert_eq!(status(&api(503)), UNAVAILABLE);
        assert_eq!(status(&api(500)), FAILED);
        assert_eq!(status(&TimedOut("late".into()).into()), TIMED_OUT);
        assert_eq!(status(&DiffFound.into()), DIFF_FOUND);
        assert_eq!(
            status(&NotFound("no App named web".into()).into()),
            NOT_FOUND
        );
        assert_eq!(status(&ApiError::NotLoggedIn.into()), REFUSED);
        assert_eq!(status(&anyhow::anyhow!("other")), FAILED);
        // Context added on the way up keeps the status.
        assert_eq!(status(&api(404).context("reading the App")), NOT_FOUND);
    }
}
