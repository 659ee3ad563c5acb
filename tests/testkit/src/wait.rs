//! Polling with a deadline, a liveness check and a last observation for the error message.

use std::future::Future;
use std::net::TcpListener;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Error;

const POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it returns `Ok(true)`. Between polls `alive` must hold (a process that
/// died will never become ready, so waiting on is pointless). `check` returns `Err(observation)`
/// or `Ok(false)` while not ready; the last observation goes into the timeout error.
pub async fn until<C, F>(
    what: &str,
    timeout: Duration,
    mut alive: impl FnMut() -> Result<(), Error>,
    mut check: C,
) -> Result<(), Error>
where
    C: FnMut() -> F,
    F: Future<Output = Result<bool, String>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        alive()?;
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(observation) => last = observation,
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                secs: timeout.as_secs(),
                last_observation: last,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A loopback TCP port that is free now and has not been handed out before by this process.
pub fn free_port() -> Result<u16, Error> {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::io("find a free port", e))?
            .port();
        let mut seen = HANDED_OUT
            .lock()
            .map_err(|_| Error::Process("port list poisoned".into()))?;
        if !seen.contains(&port) {
            seen.push(port);
            return Ok(port);
        }
    }
    Err(Error::Process(
        "no free loopback port after 100 tries".into(),
    ))
}
