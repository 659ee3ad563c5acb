//! A chart from an OCI registry, pulled as helm does: the tag's manifest, an anonymous bearer
//! token when the registry asks for one, then the layer holding the chart's package.

use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use serde::Deserialize;
use sha2::Digest;

use super::net::{Net, read_capped};
use super::{CHART_LIMIT, FetchError};

/// The media type of a chart package's layer.
const CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const MANIFEST_TYPES: &str =
    "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.artifact.manifest.v1+json";
const MANIFEST_LIMIT: usize = 1024 * 1024;
const TOKEN_LIMIT: usize = 64 * 1024;

#[derive(Debug, Deserialize)]
struct Manifest {
    #[serde(default)]
    layers: Vec<Layer>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layer {
    media_type: String,
    digest: String,
}

#[derive(Debug, Deserialize)]
struct Token {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// The package of chart `name` at `version` under registry path `registry`
/// (`https://host/path`, from `oci://host/path`).
pub(super) async fn pull(
    net: &Net,
    registry: &Url,
    name: &str,
    version: &str,
) -> Result<Vec<u8>, FetchError> {
    let path = registry.path().trim_matches('/');
    let repository = if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}/{name}")
    };
    // OCI tags have no '+'; helm writes a version's build metadata with '_'.
    let tag = version.replace('+', "_");
    let at = |suffix: &str| {
        registry
            .join(&format!("/v2/{repository}/{suffix}"))
            .map_err(|e| FetchError::Registry(e.to_string()))
    };
    let manifest_url = at(&format!("manifests/{tag}"))?;
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(MANIFEST_TYPES));
    let mut answer = net.send(manifest_url.clone(), headers.clone()).await?;
    if answer.status() == reqwest::StatusCode::UNAUTHORIZED {
        let challenge = answer
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_challenge)
            .ok_or_else(|| FetchError::Registry("401 without a bearer challenge".into()))?;
        let token = anonymous_token(net, &challenge).await?;
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| FetchError::Registry("a token that is no header".into()))?;
        headers.insert(AUTHORIZATION, value);
        answer = net.send(manifest_url.clone(), headers.clone()).await?;
    }
    if !answer.status().is_success() {
        return Err(FetchError::Status {
            url: manifest_url.to_string(),
            status: answer.status().as_u16(),
        });
    }
    let manifest: Manifest = serde_json::from_slice(&read_capped(answer, MANIFEST_LIMIT).await?)
        .map_err(|e| FetchError::Registry(format!("the manifest: {e}")))?;
    let layer = manifest
        .layers
        .iter()
        .find(|l| l.media_type == CHART_LAYER)
        .ok_or_else(|| FetchError::Registry("no chart layer in the manifest".into()))?;
    let expected = layer
        .digest
        .strip_prefix("sha256:")
        .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| FetchError::Registry(format!("digest {:?}", layer.digest)))?;
    headers.remove(ACCEPT);
    let package = net
        .get(
            at(&format!("blobs/{}", layer.digest))?,
            headers,
            CHART_LIMIT,
        )
        .await?;
    let actual = hex(&sha2::Sha256::digest(&package));
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(FetchError::Registry(
            "the layer does not match its digest".into(),
        ));
    }
    Ok(package)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a `WWW-Authenticate: Bearer realm="…",service="…",scope="…"` asks for.
#[derive(Debug, PartialEq, Eq)]
struct Challenge {
    realm: String,
    params: Vec<(String, String)>,
}

fn bearer_challenge(header: &str) -> Option<Challenge> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = Vec::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_once(',').unwrap_or((after, "")),
        };
        params.push((key.trim().to_ascii_lowercase(), value.to_owned()));
        rest = after.trim_start_matches([',', ' ']);
    }
    let realm = params
        .iter()
        .position(|(k, _)| k == "realm")
        .map(|i| params.remove(i).1)?;
    Some(Challenge { realm, params })
}

/// An anonymous token from the challenge's realm (itself a URL the fetch decides on).
async fn anonymous_token(net: &Net, challenge: &Challenge) -> Result<String, FetchError> {
    let mut realm = Url::parse(&challenge.realm)
        .map_err(|_| FetchError::Registry(format!("realm {:?}", challenge.realm)))?;
    for (key, value) in &challenge.params {
        if key == "service" || key == "scope" {
            realm.query_pairs_mut().append_pair(key, value);
        }
    }
    let body = net.get(realm, HeaderMap::new(), TOKEN_LIMIT).await?;
    let token: Token = serde_json::from_slice(&body)
        .map_err(|e| FetchError::Registry(format!("the token: {e}")))?;
    token
        .token
        .or(token.access_token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| FetchError::Registry("an empty token".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_names_its_realm_service_and_scope() {
        let challenge = bearer_challenge(
            r#"Bearer realm="https://auth.example.test/token",service="registry.example.test",scope="repository:charts/web:pull""#,
        )
        .unwrap();
        assert_eq!(challenge.realm, "https://auth.example.test/token");
        assert_eq!(
            challenge.params,
            [
                ("service".to_owned(), "registry.example.test".to_owned()),
                ("scope".into(), "repository:charts/web:pull".into())
            ]
        );
        assert_eq!(bearer_challenge(r#"Basic realm="registry""#), None);
        assert_eq!(bearer_challenge(r#"Bearer service="x""#), None);
    }
}
