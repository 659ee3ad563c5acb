//! The API's event stream (Server-Sent Events), read event by event.

use anyhow::Context as _;
use kubenest_cli::api;
use serde_json::Value;

use super::watch::STEP;

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: Option<String>,
    pub kind: String,
    pub data: Value,
}

/// `GET /api/v1/events/stream?app_id=...`, read event by event.
#[derive(Debug)]
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
}

impl EventStream {
    pub async fn open(api: &str, client: &api::Client, app_id: &str) -> anyhow::Result<Self> {
        Self::open_filtered(api, client, "app_id", app_id).await
    }

    /// The stream of one organization (`org`), project (`project_id`) or App (`app_id`).
    pub async fn open_filtered(
        api: &str,
        client: &api::Client,
        filter: &str,
        id: &str,
    ) -> anyhow::Result<Self> {
        Self::resume_filtered(api, client, filter, id, None).await
    }

    /// [`Self::open_filtered`], resuming after the event id `after` when there is one.
    pub async fn resume_filtered(
        api: &str,
        client: &api::Client,
        filter: &str,
        id: &str,
        after: Option<&str>,
    ) -> anyhow::Result<Self> {
        let token = client
            .session()
            .map(|s| s.access_token.clone())
            .ok_or(api::ApiError::NotLoggedIn)?;
        let mut request = client
            .streaming()?
            .get(format!(
                "{}/api/v1/events/stream?{filter}={}",
                api.trim_end_matches('/'),
                api::query_value(id)
            ))
            .bearer_auth(token);
        if let Some(after) = after {
            request = request.header("last-event-id", after);
        }
        let response = request.send().await?;
        anyhow::ensure!(
            response.status().is_success(),
            "the event stream answered {}",
            response.status()
        );
        Ok(Self {
            response,
            buffer: String::new(),
        })
    }

    /// The next event (heartbeat comments skipped).
    pub async fn next(&mut self) -> anyhow::Result<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = Event {
                    id: None,
                    kind: "message".into(),
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        event.id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event.kind = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue;
                }
                event.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Ok(event);
            }
            let chunk = self
                .response
                .chunk()
                .await?
                .context("the event stream ended")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Reads events until one satisfies `want`, within one step's time.
    pub async fn until(&mut self, want: impl Fn(&Event) -> bool) -> anyhow::Result<Event> {
        let wait = async {
            loop {
                let event = self.next().await?;
                if want(&event) {
                    return anyhow::Ok(event);
                }
            }
        };
        tokio::time::timeout(STEP, wait)
            .await
            .map_err(|_| anyhow::anyhow!("no such event within {}s", STEP.as_secs()))?
    }
}
