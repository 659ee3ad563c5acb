//! The live event stream (`GET /api/v1/events/stream`, Server-Sent Events) read event by event.
//! Written by hand: the format is a few line rules, and the SSE crates either bring their own
//! HTTP client (losing this client's CA and token refresh) or parse only complete bodies.

use super::{ApiError, Client};

/// One event: its id, its name (`app.phase`, ...) and its data (JSON text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

/// An open stream.
#[derive(Debug)]
pub struct Events {
    response: reqwest::Response,
    pending: Vec<u8>,
    parser: Parser,
}

/// The line rules of the format.
#[derive(Debug, Default)]
struct Parser {
    building: Event,
}

impl Events {
    /// Opens `/api/v1/events/stream` with `query` (`app_id=…`, `org=…`, `project_id=…`).
    pub async fn open(client: &mut Client, query: &str) -> Result<Self, ApiError> {
        let response = client
            .stream(
                &format!("/api/v1/events/stream?{query}"),
                "text/event-stream",
            )
            .await?;
        Ok(Self {
            response,
            pending: Vec::new(),
            parser: Parser::default(),
        })
    }

    /// The next event; `None` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<Event>, reqwest::Error> {
        loop {
            while let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                let line = String::from_utf8_lossy(&line);
                if let Some(event) = self.parser.line(line.trim_end_matches(['\n', '\r'])) {
                    return Ok(Some(event));
                }
            }
            match self.response.chunk().await? {
                Some(chunk) => self.pending.extend_from_slice(&chunk),
                None => return Ok(None),
            }
        }
    }
}

impl Parser {
    /// Takes one line; a blank line ends an event that has data.
    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.building);
            return (!event.data.is_empty()).then_some(event);
        }
        if line.starts_with(':') {
            return None; // a comment: the heartbeat
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => self.building.id = Some(value.to_owned()),
            "event" => self.building.event = value.to_owned(),
            "data" => {
                if !self.building.data.is_empty() {
                    self.building.data.push('\n');
                }
                self.building.data.push_str(value);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Event> {
        let mut parser = Parser::default();
        text.lines().filter_map(|l| parser.line(l)).collect()
    }

    #[test]
    fn events_are_cut_at_blank_lines_and_comments_are_skipped() {
        let events = parse(
            ": heartbeat\n\nid: 7\nevent: app.phase\ndata: {\"phase\":\"Running\"}\n\n\
             event: x\ndata: a\ndata:b\n\n",
        );
        assert_eq!(
            events,
            vec![
                Event {
                    id: Some("7".into()),
                    event: "app.phase".into(),
                    data: "{\"phase\":\"Running\"}".into()
                },
                Event {
                    id: None,
                    event: "x".into(),
                    data: "a\nb".into()
                },
            ]
        );
    }
}
