//! `kubenest apps logs`: the text form of `GET /api/v1/apps/{id}/logs`, printed as it comes.
//! The API's last line (`# end of logs (reason): message`) goes to standard error; a stream
//! that did not end on its own (cut for a slow reader, the hub session dropped, an error)
//! makes the command fail.

use std::io::Write;

use crate::api;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct LogsArgs {
    pub component: Option<String>,
    pub follow: bool,
    pub since: Option<String>,
    pub tail: Option<u32>,
    pub previous: bool,
}

/// The query string of the request.
pub fn query(args: &LogsArgs) -> String {
    let mut pairs = Vec::new();
    if let Some(component) = &args.component {
        pairs.push(format!("component={}", api::query_value(component)));
    }
    if args.follow {
        pairs.push("follow=true".to_owned());
    }
    if let Some(since) = &args.since {
        pairs.push(format!("since={}", api::query_value(since)));
    }
    if let Some(tail) = args.tail {
        pairs.push(format!("tail={tail}"));
    }
    if args.previous {
        pairs.push("previous=true".to_owned());
    }
    if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    }
}

/// Streams the logs of App `id` to standard output.
pub async fn print(client: &mut api::Client, id: &str, args: &LogsArgs) -> anyhow::Result<()> {
    let path = format!("/api/v1/apps/{}/logs{}", api::query_value(id), query(args));
    let mut response = client.stream(&path, "text/plain").await?;
    let mut pending: Vec<u8> = Vec::new();
    let mut end: Option<String> = None;
    while let Some(chunk) = response.chunk().await? {
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            let text = String::from_utf8_lossy(&line);
            if let Some(rest) = text.strip_prefix("# end of logs ") {
                end = Some(rest.trim_end().to_owned());
                eprintln!("{}", text.trim_end());
            } else {
                let mut out = std::io::stdout().lock();
                out.write_all(&line)?;
                out.flush()?;
            }
        }
    }
    match end {
        Some(reason) if reason.starts_with("(pod_ended)") => Ok(()),
        Some(reason) => anyhow::bail!("the log stream was cut {reason}"),
        None => anyhow::bail!("the log stream ended without saying why"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_carries_only_what_was_asked() {
        assert_eq!(query(&LogsArgs::default()), "");
        let args = LogsArgs {
            component: Some("web".into()),
            follow: true,
            since: Some("10m".into()),
            tail: Some(100),
            previous: false,
        };
        assert_eq!(
            query(&args),
            "?component=web&follow=true&since=10m&tail=100"
        );
    }
}
