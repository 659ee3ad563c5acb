//! Traffic on purpose: with `DEMO_LOAD_URL`, the app also GETs that URL `DEMO_LOAD_PER_SECOND`
//! times a second for as long as it runs, so a revision of another workload (its Service's URL)
//! has requests to be judged by, and an idle one has none. Answers are only counted, never
//! read; a summary is logged every ten seconds.

use std::time::Duration;

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// GETs `url` `per_second` times a second, for ever.
pub async fn load(url: String, per_second: u32) {
    let client = match reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build() {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "no HTTP client: no load");
            return;
        }
    };
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut summary = tokio::time::interval(Duration::from_secs(10));
    let (mut answered, mut failed, mut unreached) = (0u64, 0u64, 0u64);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                match client.get(&url).send().await {
                    Ok(response) if response.status().is_server_error() => failed += 1,
                    Ok(_) => answered += 1,
                    Err(_) => unreached += 1,
                }
            }
            _ = summary.tick() => {
                tracing::info!(%url, answered, failed, unreached, "load sent");
            }
        }
    }
}
