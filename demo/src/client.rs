//! `kubenest-demo get URL`: the app as its own HTTP client. Tests run it in a pod to ask a
//! Service by its cluster DNS name from inside the cluster network; it prints the body on
//! stdout and exits non-zero unless the answer is a 2xx.

use std::process::ExitCode;
use std::time::Duration;

use crate::GetArgs;

/// Why a GET failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No answer (connection, DNS, timeout) or an unreadable body.
    #[error("GET {url}: {source}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// An answer that is not a 2xx; the body goes with it.
    #[error("GET {url}: {status}")]
    Status {
        url: String,
        status: reqwest::StatusCode,
        body: String,
    },
}

/// GETs `url` and returns the body of a 2xx answer.
pub async fn get(url: &str, timeout: Duration) -> Result<String, ClientError> {
    let failed = |source| ClientError::Request {
        url: url.to_owned(),
        source,
    };
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(failed)?;
    let response = client.get(url).send().await.map_err(failed)?;
    let status = response.status();
    let body = response.text().await.map_err(failed)?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(ClientError::Status {
            url: url.to_owned(),
            status,
            body,
        })
    }
}

/// The `get` subcommand: body on stdout (also of a failed answer), the failure on stderr.
pub async fn main(args: GetArgs) -> ExitCode {
    match get(&args.url, Duration::from_secs(args.timeout_seconds.max(1))).await {
        Ok(body) => {
            println!("{body}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let ClientError::Status { body, .. } = &e {
                println!("{body}");
            }
            eprintln!("kubenest-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
