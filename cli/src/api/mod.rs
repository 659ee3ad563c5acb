//! A small client of the kubenest REST API: JSON in and out, the API's error shape turned into
//! a typed error, and the session (access token and refresh cookie) kept in a file between
//! invocations.
//!
//! An access token lives 30 minutes; when a call answers 401 and a refresh token is at hand, the
//! client rotates it once (`POST /api/v1/refresh`), stores the new pair and repeats the call.

use std::path::{Path, PathBuf};

use kubenest_api::Problem;
use kubenest_api::users::{LoginBody, TokenResponse};
use reqwest::Method;
use reqwest::header::{COOKIE, SET_COOKIE};
use serde::Serialize;
use serde_json::Value;

mod error;
mod events;
mod session;
mod typed;

pub use error::ApiError;
use error::way_out;
pub use events::{Event, Events};
pub use session::Session;

/// The refresh token's cookie (the API's `REFRESH_COOKIE`).
const REFRESH_COOKIE: &str = "kubenest_refresh";

/// A client bound to one API address, optionally logged in.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    session: Option<Session>,
    /// Where a refreshed session is written back (none for in-memory sessions).
    session_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    /// Writes go as dry runs (`?dryRun=true`).
    dry_run: bool,
}

/// The HTTP client: rustls with the public roots, plus `extra` CA certificates.
fn http_client(extra: Option<Vec<reqwest::Certificate>>) -> reqwest::Result<reqwest::Client> {
    roots(
        reqwest::Client::builder().timeout(std::time::Duration::from_secs(60)),
        extra,
    )
    .build()
}

fn roots(
    mut builder: reqwest::ClientBuilder,
    extra: Option<Vec<reqwest::Certificate>>,
) -> reqwest::ClientBuilder {
    for certificate in extra.into_iter().flatten() {
        builder = builder.add_root_certificate(certificate);
    }
    builder
}

/// The CA certificates of a `--ca-file`.
fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, ApiError> {
    let ca_error = |reason: String| ApiError::CaFile {
        path: path.to_owned(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| ca_error(e.to_string()))?;
    let certificates =
        reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_error(e.to_string()))?;
    if certificates.is_empty() {
        return Err(ca_error("no PEM certificate in it".into()));
    }
    Ok(certificates)
}

/// Whether `base` is plain HTTP to a host other than loopback.
fn plaintext_off_loopback(base: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base) else {
        return false;
    };
    if url.scheme() != "http" {
        return false;
    }
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

impl Client {
    /// A client of the API at `base` (`http://127.0.0.1:8080`), not logged in, trusting the
    /// public roots for https.
    pub fn new(base: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            http: http_client(None).unwrap_or_default(),
            session: None,
            session_file: None,
            ca_file: None,
            dry_run: false,
        }
    }

    /// Sends every later write as a dry run (`?dryRun=true`): the API judges it as it would
    /// and keeps nothing.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        self.dry_run = dry_run;
    }

    /// Whether writes go as dry runs.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// A client of the API at `base` that also trusts the CA certificate(s) in `ca_file`.
    pub fn with_ca(base: &str, ca_file: Option<&Path>) -> Result<Self, ApiError> {
        let Some(path) = ca_file else {
            return Ok(Self::new(base));
        };
        let http = http_client(Some(ca_certificates(path)?)).map_err(|e| ApiError::CaFile {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            http,
            ca_file: Some(std::path::absolute(path).unwrap_or_else(|_| path.to_owned())),
            ..Self::new(base)
        })
    }

    /// A client for a stored session (trusting the CA it was logged in with).
    pub fn from_session(session: Session, file: Option<PathBuf>) -> Result<Self, ApiError> {
        let mut client = Self::with_ca(&session.api, session.ca_file.as_deref())?;
        client.session = Some(session);
        client.session_file = file;
        Ok(client)
    }

    /// The CA file this client trusts besides the public roots.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// An HTTP client for long responses (an event or log stream): the same roots, no overall
    /// timeout (only one for connecting).
    pub fn streaming(&self) -> Result<reqwest::Client, ApiError> {
        let extra = self.ca_file.as_deref().map(ca_certificates).transpose()?;
        roots(
            reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(10)),
            extra,
        )
        .build()
        .map_err(|e| ApiError::CaFile {
            path: self.ca_file.clone().unwrap_or_default(),
            reason: e.to_string(),
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// `POST /api/v1/login`; keeps the session in this client and returns it.
    pub async fn login(&mut self, username: &str, password: &str) -> Result<Session, ApiError> {
        if plaintext_off_loopback(&self.base) {
            return Err(ApiError::PlaintextPassword {
                base: self.base.clone(),
            });
        }
        let body = LoginBody {
            username: username.to_owned(),
            password: password.to_owned(),
        };
        let response = self
            .http
            .post(format!("{}/api/v1/login", self.base))
            .json(&body)
            .send()
            .await
            .map_err(|source| self.transport(source))?;
        let refresh_token = refresh_cookie(&response);
        let token: TokenResponse = typed::read("/api/v1/login", self.answer(response).await?)?;
        let session = Session {
            api: self.base.clone(),
            username: username.to_owned(),
            access_token: token.access_token,
            refresh_token,
            ca_file: self.ca_file.clone(),
            org: None,
        };
        self.session = Some(session.clone());
        Ok(session)
    }

    /// `POST /api/v1/logout`: revokes the refresh family and forgets the session.
    pub async fn logout(&mut self) -> Result<(), ApiError> {
        if let Some(session) = self.session.take() {
            let mut request = self
                .http
                .post(format!("{}/api/v1/logout", self.base))
                .bearer_auth(&session.access_token);
            if let Some(refresh) = &session.refresh_token {
                request = request.header(COOKIE, format!("{REFRESH_COOKIE}={refresh}"));
            }
            let response = request.send().await.map_err(|s| self.transport(s))?;
            self.answer(response).await?;
        }
        Ok(())
    }

    /// `GET path`, the answer as raw JSON (for callers that read any answer, such as the
    /// system tests; the commands read typed answers with [`Client::get_as`]).
    pub async fn get(&mut self, path: &str) -> Result<Value, ApiError> {
        self.call(Method::GET, path, None).await
    }

    /// `POST path` with `body`, the answer as raw JSON.
    pub async fn post(&mut self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `PATCH path` with `body`, the answer as raw JSON.
    pub async fn patch(&mut self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.call(Method::PATCH, path, Some(body)).await
    }

    /// `DELETE path`, the answer as raw JSON.
    pub async fn delete(&mut self, path: &str) -> Result<Value, ApiError> {
        self.call(Method::DELETE, path, None).await
    }

    /// A streamed GET (`Accept: accept`): the response once it answered 2xx, for the caller to
    /// read chunk by chunk; a 401 rotates the session once, as [`Client::call`] does.
    pub async fn stream(
        &mut self,
        path: &str,
        accept: &str,
    ) -> Result<reqwest::Response, ApiError> {
        let mut rotated = false;
        // No overall timeout: a followed log or an event stream stays open.
        let http = self.streaming()?;
        loop {
            let session = self.session.as_ref().ok_or(ApiError::NotLoggedIn)?;
            let response = http
                .get(format!("{}{path}", self.base))
                .bearer_auth(&session.access_token)
                .header(reqwest::header::ACCEPT, accept)
                .send()
                .await
                .map_err(|s| self.transport(s))?;
            if response.status().is_success() {
                return Ok(response);
            }
            let can_refresh = session.refresh_token.is_some();
            match self.answer(response).await {
                Err(ApiError::Status { status: 401, .. }) if can_refresh && !rotated => {
                    self.refresh().await?;
                    rotated = true;
                }
                Err(error) => return Err(error),
                Ok(_) => unreachable_success()?,
            }
        }
    }

    /// One call with the session's access token; a 401 with a refresh token at hand rotates
    /// the session once and repeats the call.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.call_with(method, path, body).await
    }

    /// [`Client::call`] with any body that serializes.
    pub(super) async fn call_with<B: Serialize + ?Sized>(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Value, ApiError> {
        match self.send(method.clone(), path, body).await {
            Err(ApiError::Status { status: 401, .. })
                if self
                    .session
                    .as_ref()
                    .is_some_and(|s| s.refresh_token.is_some()) =>
            {
                self.refresh().await?;
                self.send(method, path, body).await
            }
            other => other,
        }
    }

    async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Value, ApiError> {
        let session = self.session.as_ref().ok_or(ApiError::NotLoggedIn)?;
        let path = if self.dry_run && method != Method::GET {
            let separator = if path.contains('?') { '&' } else { '?' };
            format!("{path}{separator}dryRun=true")
        } else {
            path.to_owned()
        };
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&session.access_token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|s| self.transport(s))?;
        self.answer(response).await
    }

    /// Rotates the refresh token and stores the new session where it came from.
    async fn refresh(&mut self) -> Result<(), ApiError> {
        let Some(session) = self.session.clone() else {
            return Err(ApiError::NotLoggedIn);
        };
        let refresh = session.refresh_token.clone().unwrap_or_default();
        let response = self
            .http
            .post(format!("{}/api/v1/refresh", self.base))
            .header(COOKIE, format!("{REFRESH_COOKIE}={refresh}"))
            .send()
            .await
            .map_err(|s| self.transport(s))?;
        let rotated = refresh_cookie(&response);
        let token: TokenResponse = typed::read("/api/v1/refresh", self.answer(response).await?)?;
        let renewed = Session {
            access_token: token.access_token,
            refresh_token: rotated.or(session.refresh_token.clone()),
            ..session
        };
        if let Some(file) = &self.session_file {
            // A session that cannot be written back still serves this invocation.
            if let Err(e) = renewed.save(file) {
                tracing::warn!(file = %file.display(), "cannot store the refreshed session: {e}");
            }
        }
        self.session = Some(renewed);
        Ok(())
    }

    async fn answer(&self, response: reqwest::Response) -> Result<Value, ApiError> {
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|s| self.transport(s))?;
        let value: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if (200..300).contains(&status) {
            return Ok(value);
        }
        // An RFC 9457 problem with kubenest's `code`, `field` and `ways_out`; anything else
        // (a proxy's page) is shown as it came.
        Err(match serde_json::from_value::<Problem>(value.clone()) {
            Ok(problem) => ApiError::Status {
                status,
                code: problem.code,
                message: problem.detail,
                field: problem.field,
                ways_out: problem.ways_out.iter().flatten().map(way_out).collect(),
            },
            Err(_) => ApiError::Status {
                status,
                code: "unknown".into(),
                message: value.to_string(),
                field: None,
                ways_out: Vec::new(),
            },
        })
    }

    fn transport(&self, source: reqwest::Error) -> ApiError {
        ApiError::Transport {
            base: self.base.clone(),
            source,
        }
    }
}

/// `answer` turns only non-2xx responses into values here; a 2xx was returned before.
fn unreachable_success() -> Result<(), ApiError> {
    Err(ApiError::Status {
        status: 0,
        code: "unexpected".into(),
        message: "the API answered without a stream".into(),
        field: None,
        ways_out: Vec::new(),
    })
}

/// The refresh token from a `Set-Cookie: kubenest_refresh=...` header, if any.
fn refresh_cookie(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|cookie| {
            let (pair, _) = cookie.split_once(';').unwrap_or((cookie, ""));
            let (name, value) = pair.trim().split_once('=')?;
            (name == REFRESH_COOKIE && !value.is_empty()).then(|| value.to_owned())
        })
}

/// Percent-encodes a query value (ids and names are URL-safe already; this guards the rest).
pub fn query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_go_over_plain_http_only_to_loopback() {
        for base in [
            "http://127.0.0.1:8080",
            "http://localhost:1",
            "http://[::1]:80",
        ] {
            assert!(!plaintext_off_loopback(base), "{base}");
        }
        for base in [
            "http://10.0.0.5:8080",
            "http://api.example",
            "http://[2001:db8::1]",
        ] {
            assert!(plaintext_off_loopback(base), "{base}");
        }
        assert!(!plaintext_off_loopback("https://api.example"));
    }
}
