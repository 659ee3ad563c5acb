//! HTTPS requests that never reach the server's own network for a user: a resolver that hands
//! the connector only public addresses (the connection goes to the address checked, so a name
//! that re-resolves elsewhere gains nothing), redirects followed by hand so each hop is decided
//! again, and bodies read up to a cap.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use kubenest_domain::sources::{AllowList, Decision, decide, reach};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{AUTHORIZATION, HeaderMap, LOCATION};
use reqwest::{Response, Url};

use super::{FETCH_TIMEOUT, FetchError};

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;

/// Resolves a name to its public addresses only (and none of this server's own).
#[derive(Debug)]
struct PublicOnly {
    own: Arc<[IpAddr]>,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let own = self.own.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found
                .filter(|a| !reach(a.ip()).is_internal() && !own.contains(&a.ip()))
                .collect();
            if public.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The two clients and the rules that choose between them.
#[derive(Debug)]
pub(super) struct Net {
    /// For every URL not under an allowed source: public addresses only.
    public: reqwest::Client,
    /// For URLs under an allowed source.
    allowed: reqwest::Client,
    allow: AllowList,
    own: Arc<[IpAddr]>,
}

fn client(
    ca: Option<&reqwest::Certificate>,
    resolver: Option<PublicOnly>,
) -> Result<reqwest::Client, FetchError> {
    let mut builder = reqwest::Client::builder()
        // A proxy from the environment would connect for us, past the resolver.
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .https_only(true)
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(FETCH_TIMEOUT);
    if let Some(ca) = ca {
        builder = builder.add_root_certificate(ca.clone());
    }
    if let Some(resolver) = resolver {
        builder = builder.dns_resolver(Arc::new(resolver));
    }
    builder
        .build()
        .map_err(|e| FetchError::Client(e.to_string()))
}

impl Net {
    pub(super) fn new(
        allow: AllowList,
        ca_pem: Option<&str>,
        own: Vec<IpAddr>,
    ) -> Result<Self, FetchError> {
        let ca = ca_pem
            .map(|pem| reqwest::Certificate::from_pem(pem.as_bytes()))
            .transpose()
            .map_err(|e| FetchError::Client(format!("the private CA: {e}")))?;
        let own: Arc<[IpAddr]> = own.into();
        Ok(Self {
            public: client(ca.as_ref(), Some(PublicOnly { own: own.clone() }))?,
            allowed: client(ca.as_ref(), None)?,
            allow,
            own,
        })
    }

    /// The client that may request `url`, or why none may.
    fn client_for(&self, url: &Url) -> Result<&reqwest::Client, FetchError> {
        let refused = |reason| FetchError::Refused {
            url: url.to_string(),
            reason,
        };
        match decide(&self.allow, url).map_err(refused)? {
            Decision::Allowed => Ok(&self.allowed),
            Decision::PublicOnly => {
                let literal = match url.host() {
                    Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
                    Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
                    _ => None,
                };
                if literal.is_some_and(|ip| self.own.contains(&ip)) {
                    return Err(FetchError::OwnAddress(url.to_string()));
                }
                Ok(&self.public)
            }
        }
    }

    /// GETs `url` with `headers`, following redirects (each hop decided again; credentials
    /// dropped when the origin changes); the first answer that is not a redirect.
    pub(super) async fn send(&self, url: Url, headers: HeaderMap) -> Result<Response, FetchError> {
        let (mut url, mut headers) = (url, headers);
        for _ in 0..=MAX_REDIRECTS {
            let client = self.client_for(&url)?;
            let response = client
                .get(url.clone())
                .headers(headers.clone())
                .send()
                .await?;
            if !response.status().is_redirection() {
                return Ok(response);
            }
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| FetchError::Status {
                    url: url.to_string(),
                    status: response.status().as_u16(),
                })?;
            let next = url.join(location).map_err(|_| FetchError::Status {
                url: url.to_string(),
                status: response.status().as_u16(),
            })?;
            if next.origin() != url.origin() {
                headers.remove(AUTHORIZATION);
            }
            url = next;
        }
        Err(FetchError::Redirects(MAX_REDIRECTS))
    }

    /// GETs `url` and reads its body of at most `limit` bytes; anything but a 2xx is an error.
    pub(super) async fn get(
        &self,
        url: Url,
        headers: HeaderMap,
        limit: usize,
    ) -> Result<Vec<u8>, FetchError> {
        let response = self.send(url.clone(), headers).await?;
        if !response.status().is_success() {
            return Err(FetchError::Status {
                url: url.to_string(),
                status: response.status().as_u16(),
            });
        }
        read_capped(response, limit).await
    }
}

/// The body of `response`, refused as soon as it passes `limit` bytes (before reading it all).
pub(super) async fn read_capped(
    mut response: Response,
    limit: usize,
) -> Result<Vec<u8>, FetchError> {
    let url = response.url().to_string();
    let too_large = || FetchError::TooLarge {
        url: url.clone(),
        limit,
    };
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
