//! A stream's frames (pure): each line as the contract has it ([`log_line`]), the lines of one
//! `log.lines` frame within the hub's frame limit ([`Batch`]), and the pace of a stream
//! ([`RateLimit`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use kubenest_contracts as wire;

/// Lines per `log.lines` frame (the contract's maximum).
pub const MAX_LINES_PER_FRAME: usize = 1000;
/// Characters per line (the contract's maximum); longer lines are cut there.
pub const MAX_LINE_CHARS: usize = 16384;
/// Bytes of lines (as JSON) per frame: half the hub's frame limit (1 MiB), so a frame with
/// its envelope always fits and never ends the session.
pub const MAX_BATCH_BYTES: usize = 512 * 1024;
/// Lines a stream may send per second; faster output is read more slowly.
pub const LINES_PER_SECOND: u32 = 2000;
/// A line as the API server sent it (`<RFC 3339 timestamp> <text>`), cut to the contract's
/// limit; a line without a timestamp is stamped now.
pub fn log_line(pod: &str, container: &str, raw: &str) -> wire::LogLine {
    let (timestamp, text) = split_timestamp(raw);
    let mut line = text.trim_end_matches('\r').to_owned();
    truncate(&mut line, MAX_LINE_CHARS);
    wire::LogLine {
        timestamp: timestamp.unwrap_or_else(Utc::now),
        pod: pod.to_owned(),
        container: container.to_owned(),
        line,
    }
}

fn split_timestamp(raw: &str) -> (Option<DateTime<Utc>>, &str) {
    if let Some((head, rest)) = raw.split_once(' ')
        && let Ok(at) = DateTime::parse_from_rfc3339(head)
    {
        return (Some(at.with_timezone(&Utc)), rest);
    }
    (None, raw)
}

/// Cuts `text` to at most `max` characters, on a character boundary.
pub fn truncate(text: &mut String, max: usize) {
    if let Some((at, _)) = text.char_indices().nth(max) {
        text.truncate(at);
    }
}

/// Lines gathered for the next frame, within [`MAX_LINES_PER_FRAME`] lines and
/// [`MAX_BATCH_BYTES`] bytes as JSON (a line of escaped control characters takes six bytes a
/// character, so characters alone do not bound a frame).
#[derive(Debug, Default)]
pub struct Batch {
    lines: Vec<wire::LogLine>,
    bytes: usize,
}

impl Batch {
    /// Adds a line; the lines of a frame that is full come back: those gathered before this
    /// line when it would not fit beside them, or all of them when it filled the last place.
    pub fn push(&mut self, line: wire::LogLine) -> Option<Vec<wire::LogLine>> {
        let size = serde_json::to_vec(&line).map_or(MAX_BATCH_BYTES, |v| v.len() + 1);
        let before = if self.bytes + size > MAX_BATCH_BYTES {
            self.take()
        } else {
            None
        };
        self.lines.push(line);
        self.bytes += size;
        before.or_else(|| (self.lines.len() >= MAX_LINES_PER_FRAME).then(|| self.take_all()))
    }

    /// The lines gathered so far, if any.
    pub fn take(&mut self) -> Option<Vec<wire::LogLine>> {
        (!self.lines.is_empty()).then(|| self.take_all())
    }

    fn take_all(&mut self) -> Vec<wire::LogLine> {
        self.bytes = 0;
        std::mem::take(&mut self.lines)
    }
}

/// A token bucket of one second's worth of lines.
#[derive(Debug)]
pub struct RateLimit {
    per_second: f64,
    tokens: f64,
    last: Option<std::time::Instant>,
}

impl RateLimit {
    /// At most `per_second` lines a second, with a burst of as many.
    pub fn new(per_second: u32) -> Self {
        Self {
            per_second: f64::from(per_second.max(1)),
            tokens: f64::from(per_second.max(1)),
            last: None,
        }
    }

    /// Takes one line at `now`; `Some(wait)` when the caller must wait that long first.
    pub fn take(&mut self, now: std::time::Instant) -> Option<Duration> {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + refill).min(self.per_second);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / self.per_second))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_keeps_the_api_servers_timestamp_and_loses_it_from_the_text() {
        let line = log_line(
            "web-1",
            "web",
            "2026-12-03T06:00:00.123456789Z listening on :80\r",
        );
        assert_eq!(line.line, "listening on :80");
        assert_eq!(
            line.timestamp.to_rfc3339(),
            "2026-12-03T06:00:00.123456789+00:00"
        );
        assert_eq!(
            (line.pod.as_str(), line.container.as_str()),
            ("web-1", "web")
        );
    }

    #[test]
    fn a_line_without_a_timestamp_is_kept_whole() {
        let line = log_line("web-1", "web", "plain text here");
        assert_eq!(line.line, "plain text here");
    }

    #[test]
    fn long_lines_are_cut_at_the_contracts_limit_on_a_character_boundary() {
        let raw = "é".repeat(MAX_LINE_CHARS + 10);
        let line = log_line("p", "c", &raw);
        assert_eq!(line.line.chars().count(), MAX_LINE_CHARS);
        let mut short = "abc".to_owned();
        truncate(&mut short, 10);
        assert_eq!(short, "abc");
    }

    #[test]
    fn a_batch_is_handed_over_full_at_the_frame_limit_and_the_rest_on_take() {
        let mut batch = Batch::default();
        let line = log_line("p", "c", "x");
        for _ in 0..MAX_LINES_PER_FRAME - 1 {
            assert!(batch.push(line.clone()).is_none());
        }
        let full = batch.push(line.clone()).unwrap_or_default();
        assert_eq!(full.len(), MAX_LINES_PER_FRAME);
        assert!(batch.take().is_none());
        batch.push(line);
        assert_eq!(batch.take().map(|l| l.len()), Some(1));
    }

    #[test]
    fn a_frame_of_long_escaped_lines_stays_under_the_hubs_frame_limit() {
        // Control characters are escaped as \u00XX: six bytes each in the frame.
        let raw = "\u{1}".repeat(MAX_LINE_CHARS);
        let line = log_line("p", "c", &raw);
        let mut batch = Batch::default();
        let mut frames = Vec::new();
        for _ in 0..100 {
            frames.extend(batch.push(line.clone()));
        }
        frames.extend(batch.take());
        assert!(frames.len() > 1, "{}", frames.len());
        assert_eq!(frames.iter().map(Vec::len).sum::<usize>(), 100);
        let limits = wire::Limits::default();
        for lines in frames {
            let frame = wire::Envelope::new(wire::LogLines {
                subscription_id: wire::Id::new("s1"),
                lines,
            });
            let text = serde_json::to_string(&frame).unwrap();
            assert!(text.len() < limits.max_frame_bytes, "{}", text.len());
        }
    }

    #[test]
    fn the_rate_limit_allows_a_burst_then_asks_to_wait() {
        let mut limit = RateLimit::new(10);
        let now = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(limit.take(now), None);
        }
        let wait = limit.take(now).unwrap_or_default();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100));
        // A second later the bucket is full again.
        assert_eq!(limit.take(now + Duration::from_secs(2)), None);
    }
}
