//! The query of `GET /api/v1/apps/{id}/logs`, checked (pure): which component, whether to
//! follow, how far back, which instance; a bad parameter is refused naming it.

pub use kubenest_api::apps::LogsQuery;

use crate::error::{ApiError, ApiResult};

/// The largest `tail`.
const MAX_TAIL: u32 = 10_000;
/// The largest `since`: 30 days.
const MAX_SINCE_SECONDS: u64 = 30 * 24 * 3600;

/// The query, checked.
#[derive(Debug, PartialEq, Eq)]
pub struct LogsRequest {
    pub component: Option<String>,
    pub follow: bool,
    pub since_seconds: Option<u32>,
    pub tail: Option<u32>,
    pub previous: bool,
}

/// Checks every query parameter, naming the one at fault.
pub fn check_query(query: &LogsQuery) -> ApiResult<LogsRequest> {
    let since_seconds = query
        .since
        .as_deref()
        .map(|s| {
            parse_since(s).ok_or_else(|| {
                ApiError::invalid(
                    "since",
                    "a duration such as 30s, 10m, 2h or 1d, from 1 second to 30 days",
                )
            })
        })
        .transpose()?;
    let tail = query
        .tail
        .as_deref()
        .map(|t| {
            t.parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_TAIL).contains(n))
                .ok_or_else(|| ApiError::invalid("tail", "a whole number from 1 to 10000"))
        })
        .transpose()?;
    Ok(LogsRequest {
        component: query.component.clone(),
        follow: parse_bool(query.follow.as_deref(), "follow")?,
        since_seconds,
        tail,
        previous: parse_bool(query.previous.as_deref(), "previous")?,
    })
}

fn parse_bool(value: Option<&str>, field: &str) -> ApiResult<bool> {
    match value {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(_) => Err(ApiError::invalid(field, "true or false")),
    }
}

/// `30s`, `10m`, `2h`, `1d` (or plain seconds) as seconds, from 1 second to 30 days.
pub fn parse_since(text: &str) -> Option<u32> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (at, c) if c.is_ascii_alphabetic() => (&text[..at], c),
        _ => (text, 's'),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        _ => return None,
    };
    let seconds = digits.parse::<u64>().ok()?.checked_mul(scale)?;
    (1..=MAX_SINCE_SECONDS)
        .contains(&seconds)
        .then(|| u32::try_from(seconds).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> LogsQuery {
        let mut q = LogsQuery {
            component: None,
            follow: None,
            since: None,
            tail: None,
            previous: None,
        };
        for (k, v) in pairs {
            let v = Some((*v).to_owned());
            match *k {
                "follow" => q.follow = v,
                "since" => q.since = v,
                "tail" => q.tail = v,
                "previous" => q.previous = v,
                _ => q.component = v,
            }
        }
        q
    }

    #[test]
    fn since_takes_seconds_minutes_hours_and_days() {
        assert_eq!(parse_since("30s"), Some(30));
        assert_eq!(parse_since("10m"), Some(600));
        assert_eq!(parse_since("2h"), Some(7200));
        assert_eq!(parse_since("1d"), Some(86400));
        assert_eq!(parse_since("45"), Some(45));
        for bad in [
            "",
            "m",
            "0s",
            "-5m",
            "10x",
            "1.5h",
            "31d",
            "99999999999999999999s",
        ] {
            assert_eq!(parse_since(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_parameters_are_refused_naming_the_field() {
        for (pairs, field) in [
            (vec![("tail", "0")], "tail"),
            (vec![("tail", "10001")], "tail"),
            (vec![("tail", "lots")], "tail"),
            (vec![("since", "yesterday")], "since"),
            (vec![("follow", "maybe")], "follow"),
            (vec![("previous", "2")], "previous"),
        ] {
            let error = check_query(&query(&pairs)).err();
            assert_eq!(
                error.and_then(|e| e.field).as_deref(),
                Some(field),
                "{pairs:?}"
            );
        }
        let ok = check_query(&query(&[
            ("follow", "true"),
            ("since", "10m"),
            ("tail", "100"),
        ]));
        assert_eq!(
            ok.ok(),
            Some(LogsRequest {
                component: None,
                follow: true,
                since_seconds: Some(600),
                tail: Some(100),
                previous: false,
            })
        );
    }
}
