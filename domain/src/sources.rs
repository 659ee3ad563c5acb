//! Where the platform may fetch what a user names (a chart repository, an OCI registry): which
//! URLs a user may write, which addresses count as the platform's own network, and the
//! administrator's list of sources that may be on it. Pure: the fetcher resolves names and
//! connects; these functions decide, so every fetching path decides the same way.
//!
//! A source of the allow-list may be anywhere; any other source is fetched only from public
//! addresses. Every URL a fetch is about to request (the first, each redirect hop, an index's
//! chart URL, a registry's token realm) goes through [`decide`] again.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::Url;

/// What kind of network an address is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Routed on the internet.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `169.254.0.0/16` (cloud metadata lives there), `fe80::/10`.
    LinkLocal,
    /// RFC 1918, unique local `fc00::/7`, site-local `fec0::/10`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT.
    SharedAddressSpace,
    /// `0.0.0.0/8`, `::` (connecting to it reaches this host).
    Unspecified,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// Broadcast, `240.0.0.0/4`, protocol assignments, benchmarking, Teredo.
    Reserved,
}

impl Reach {
    /// Whether the address is anything but public.
    pub fn is_internal(self) -> bool {
        self != Reach::Public
    }
}

/// The network address `ip` is on; IPv4 written inside IPv6 (mapped, compatible, NAT64, 6to4)
/// counts as that IPv4 address, since a dual stack connects to it.
pub fn reach(ip: IpAddr) -> Reach {
    match ip {
        IpAddr::V4(v4) => reach_v4(v4),
        IpAddr::V6(v6) => reach_v6(v6),
    }
}

fn reach_v4(ip: Ipv4Addr) -> Reach {
    let [a, b, c, _] = ip.octets();
    if a == 0 {
        Reach::Unspecified
    } else if ip.is_loopback() {
        Reach::Loopback
    } else if ip.is_link_local() {
        Reach::LinkLocal
    } else if ip.is_private() {
        Reach::Private
    } else if a == 100 && (64..128).contains(&b) {
        Reach::SharedAddressSpace
    } else if ip.is_multicast() {
        Reach::Multicast
    } else if a >= 240 || (a == 192 && b == 0 && c == 0) || (a == 198 && (b == 18 || b == 19)) {
        Reach::Reserved
    } else {
        Reach::Public
    }
}

fn reach_v6(ip: Ipv6Addr) -> Reach {
    let s = ip.segments();
    if ip.is_unspecified() {
        Reach::Unspecified
    } else if ip.is_loopback() {
        Reach::Loopback
    } else if let Some(v4) = embedded_v4(ip) {
        reach_v4(v4)
    } else if s[0] & 0xffc0 == 0xfe80 {
        Reach::LinkLocal
    } else if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 {
        Reach::Private
    } else if ip.is_multicast() {
        Reach::Multicast
    } else if s[0] == 0x2001 && s[1] == 0 {
        Reach::Reserved
    } else {
        Reach::Public
    }
}

/// The IPv4 address an IPv6 address carries, where a host would connect to it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    // Compatible (`::a.b.c.d`) and NAT64 (`64:ff9b::a.b.c.d`) both carry it in the last 32 bits.
    let last_32 = s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        Some(mapped)
    } else if last_32 {
        Some(v4(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(v4(s[1], s[2]))
    } else {
        None
    }
}

/// Why a source or a URL to fetch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("not a URL")]
    NotUrl,
    #[error("only https:// (a chart repository) and oci:// (a registry path)")]
    Scheme,
    #[error("no credentials in a URL ('@'); they go through the credential routes")]
    Userinfo,
    #[error("a URL without a host")]
    NoHost,
    #[error("no query or fragment")]
    QueryOrFragment,
    #[error("the address is {0:?}, not public, and the source is not allowed to be there")]
    Internal(Reach),
}

/// A chart's source as a user wrote it, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A chart repository (`index.yaml` beside packages) at this `https://` URL.
    Repository(Url),
    /// An OCI registry path `oci://host/path`, held as `https://host/path`: the registry's
    /// API is HTTPS on the same host.
    Registry(Url),
}

impl Source {
    /// The `https://` URL the source's requests start from.
    pub fn url(&self) -> &Url {
        match self {
            Source::Repository(url) | Source::Registry(url) => url,
        }
    }
}

/// Checks a chart repository a user wrote: `https://` or `oci://`, a host, no userinfo (no
/// '@' at all), no query or fragment. A trailing '/' is dropped.
pub fn parse_source(text: &str) -> Result<Source, SourceError> {
    let text = text.trim_end_matches('/');
    if text.contains('@') {
        return Err(SourceError::Userinfo);
    }
    if text.contains(char::is_whitespace) {
        return Err(SourceError::NotUrl);
    }
    let (registry, rest) = match text.split_once("://") {
        Some(("https", rest)) => (false, rest),
        Some(("oci", rest)) => (true, rest),
        _ => return Err(SourceError::Scheme),
    };
    // An OCI reference is parsed as the HTTPS URL it is fetched from, so its host is
    // normalised (`127.1`, `[::ffff:127.0.0.1]`) as every fetched URL's is.
    let url = https_url(&format!("https://{rest}"))?;
    Ok(if registry {
        Source::Registry(url)
    } else {
        Source::Repository(url)
    })
}

fn https_url(text: &str) -> Result<Url, SourceError> {
    let url = Url::parse(text).map_err(|_| SourceError::NotUrl)?;
    if url.scheme() != "https" {
        return Err(SourceError::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(SourceError::Userinfo);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(SourceError::NoHost);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(SourceError::QueryOrFragment);
    }
    Ok(url)
}

/// One source the administrator allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Allowed {
    host: String,
    port: u16,
    /// URLs under this path; `None` for a registry (its whole API is on the origin).
    path: Option<String>,
}

/// The chart sources that may be on the platform's own network (`--chart-sources`): URL
/// prefixes, `https://host[:port][/path]` or `oci://host[:port][/path]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<Allowed>);

impl AllowList {
    /// The list from its entries; an entry that is not an https:// or oci:// URL is refused.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, SourceError> {
        let mut allowed = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry.is_empty() {
                continue;
            }
            let source = parse_source(entry)?;
            let url = source.url();
            let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
                return Err(SourceError::NoHost);
            };
            let path = match source {
                Source::Registry(_) => None,
                Source::Repository(_) => Some(url.path().trim_end_matches('/').to_owned()),
            };
            allowed.push(Allowed {
                host: host.to_owned(),
                port,
                path,
            });
        }
        Ok(Self(allowed))
    }

    /// Whether some allowed source is at `host` and `port`, whatever its path: what a tunnel
    /// (an HTTP `CONNECT`, which names no path) can be checked against.
    pub fn allows_host(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.0
            .iter()
            .any(|a| a.port == port && a.host.trim_start_matches('[').trim_end_matches(']') == host)
    }

    /// Whether `url` (an https URL about to be requested) is under an allowed source: the same
    /// host and port and, for a repository, a path under the source's at a '/' boundary.
    pub fn allows(&self, url: &Url) -> bool {
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        self.0.iter().any(|a| {
            a.host == host
                && a.port == port
                && a.path.as_deref().is_none_or(|prefix| {
                    url.path()
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                })
        })
    }
}

/// How a URL may be requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Under an allowed source: whatever address its host has.
    Allowed,
    /// Only at a public address: its name resolves through the filtering resolver.
    PublicOnly,
}

/// Whether and how `url` (any URL a fetch is about to request) may be requested: https only,
/// no userinfo, and an address written into the URL (which no resolver sees) public unless
/// the source is allowed.
pub fn decide(allow: &AllowList, url: &Url) -> Result<Decision, SourceError> {
    if url.scheme() != "https" {
        return Err(SourceError::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(SourceError::Userinfo);
    }
    if allow.allows(url) {
        return Ok(Decision::Allowed);
    }
    let literal = match url.host() {
        Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        Some(url::Host::Domain(_)) => None,
        None => return Err(SourceError::NoHost),
    };
    match literal.map(reach) {
        Some(r) if r.is_internal() => Err(SourceError::Internal(r)),
        _ => Ok(Decision::PublicOnly),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_contracts::patterns;
    use rand::{RngExt as _, SeedableRng as _};

    /// Every chart source the document's pattern admits is a URL here, so the door never
    /// refuses what its own schema said was valid. Values are drawn from the pattern itself
    /// (seeded, so a failure names the value and repeats).
    #[test]
    fn every_value_of_the_chart_source_pattern_parses_as_a_source() {
        let pattern = patterns::CHART_SOURCE
            .trim_start_matches('^')
            .trim_end_matches('$');
        let values = rand_regex::Regex::compile(pattern, 8).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(36);
        for _ in 0..5_000 {
            let value: String = rng.sample(&values);
            assert!(patterns::matches(patterns::CHART_SOURCE, &value), "{value}");
            match parse_source(&value) {
                Ok(_) => {}
                Err(e) => panic!("{value:?} matches the pattern but does not parse: {e}"),
            }
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn every_internal_range_is_internal_and_public_addresses_are_not() {
        for (address, want) in [
            ("127.0.0.1", Reach::Loopback),
            ("127.255.0.9", Reach::Loopback),
            ("::1", Reach::Loopback),
            ("0.0.0.0", Reach::Unspecified),
            ("0.1.2.3", Reach::Unspecified),
            ("::", Reach::Unspecified),
            ("169.254.169.254", Reach::LinkLocal),
            ("fe80::1", Reach::LinkLocal),
            ("10.0.0.1", Reach::Private),
            ("172.16.0.1", Reach::Private),
            ("172.31.255.255", Reach::Private),
            ("192.168.1.1", Reach::Private),
            ("fc00::1", Reach::Private),
            ("fd12:3456::1", Reach::Private),
            ("fec0::1", Reach::Private),
            ("100.64.0.1", Reach::SharedAddressSpace),
            ("100.127.255.254", Reach::SharedAddressSpace),
            ("224.0.0.1", Reach::Multicast),
            ("ff02::1", Reach::Multicast),
            ("255.255.255.255", Reach::Reserved),
            ("240.0.0.1", Reach::Reserved),
            ("198.18.0.1", Reach::Reserved),
            ("2001:0:4136:e378::1", Reach::Reserved),
            ("8.8.8.8", Reach::Public),
            ("100.128.0.1", Reach::Public),
            ("172.32.0.1", Reach::Public),
            ("2606:4700::1111", Reach::Public),
        ] {
            assert_eq!(reach(ip(address)), want, "{address}");
        }
    }

    #[test]
    fn ipv4_inside_ipv6_counts_as_the_ipv4_address() {
        for (address, want) in [
            ("::ffff:127.0.0.1", Reach::Loopback),
            ("::ffff:169.254.169.254", Reach::LinkLocal),
            ("::ffff:10.1.2.3", Reach::Private),
            ("::ffff:0.0.0.0", Reach::Unspecified),
            ("::127.0.0.1", Reach::Loopback),
            ("64:ff9b::10.0.0.1", Reach::Private),
            ("2002:7f00:1::", Reach::Loopback),
            ("::ffff:8.8.8.8", Reach::Public),
        ] {
            assert_eq!(reach(ip(address)), want, "{address}");
        }
    }

    #[test]
    fn a_source_is_https_or_oci_without_credentials() {
        assert!(matches!(
            parse_source("https://charts.example.test/stable/"),
            Ok(Source::Repository(u)) if u.as_str() == "https://charts.example.test/stable"
        ));
        assert!(matches!(
            parse_source("oci://registry.example.test:5000/charts"),
            Ok(Source::Registry(u)) if u.as_str() == "https://registry.example.test:5000/charts"
        ));
        for (text, want) in [
            ("http://charts.example.test", SourceError::Scheme),
            ("ftp://charts.example.test", SourceError::Scheme),
            ("charts.example.test", SourceError::Scheme),
            (
                "https://user:pass@charts.example.test",
                SourceError::Userinfo,
            ),
            ("oci://token@registry.example.test/c", SourceError::Userinfo),
            (
                "https://charts.example.test/?q=1",
                SourceError::QueryOrFragment,
            ),
            (
                "https://charts.example.test/#x",
                SourceError::QueryOrFragment,
            ),
            ("https://[", SourceError::NotUrl),
            ("https://a b", SourceError::NotUrl),
        ] {
            assert_eq!(parse_source(text), Err(want), "{text}");
        }
    }

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn internal_addresses_written_in_a_url_are_refused_unless_allowed() {
        let none = AllowList::default();
        for text in [
            "https://127.0.0.1:8443/index.yaml",
            "https://127.1/index.yaml",
            "https://2130706433/index.yaml",
            "https://0x7f.0.0.1/index.yaml",
            "https://[::ffff:127.0.0.1]:8443/x",
            "https://[::1]/x",
            "https://0.0.0.0/x",
            "https://169.254.169.254/latest/meta-data",
            "https://[fe80::1]/x",
            "https://10.0.0.1/x",
        ] {
            assert!(
                matches!(decide(&none, &url(text)), Err(SourceError::Internal(_))),
                "{text}"
            );
        }
        assert_eq!(
            decide(&none, &url("https://localhost:8443/x")),
            Ok(Decision::PublicOnly),
            "names go through the filtering resolver"
        );
        assert_eq!(
            decide(&none, &url("http://charts.example.test/x")),
            Err(SourceError::Scheme)
        );
        assert_eq!(
            decide(&none, &url("https://u:p@charts.example.test/x")),
            Err(SourceError::Userinfo)
        );
        let allowed = AllowList::parse(&["https://127.0.0.1:8443/charts"]).unwrap();
        assert_eq!(
            decide(&allowed, &url("https://127.0.0.1:8443/charts/index.yaml")),
            Ok(Decision::Allowed)
        );
        assert!(decide(&allowed, &url("https://127.0.0.1:8444/charts/index.yaml")).is_err());
    }

    #[test]
    fn an_allowed_source_covers_its_own_paths_only() {
        let list = AllowList::parse(&[
            "https://charts.internal:8443/stable/",
            "oci://registry.internal/charts",
            "",
        ])
        .unwrap();
        for (text, want) in [
            ("https://charts.internal:8443/stable/index.yaml", true),
            ("https://charts.internal:8443/stable", true),
            ("https://CHARTS.internal:8443/stable/a.tgz", true),
            ("https://charts.internal:8443/stableX/index.yaml", false),
            ("https://charts.internal:8443/other/index.yaml", false),
            ("https://charts.internal/stable/index.yaml", false),
            ("https://charts.internal.evil.test:8443/stable/x", false),
            (
                "https://registry.internal/v2/charts/web/manifests/1.0.0",
                true,
            ),
            ("https://registry.internal:5000/v2/", false),
        ] {
            assert_eq!(list.allows(&url(text)), want, "{text}");
        }
        assert_eq!(
            AllowList::parse(&["http://charts.internal"]),
            Err(SourceError::Scheme)
        );
    }

    #[test]
    fn a_tunnel_is_allowed_by_host_and_port_whatever_the_sources_path() {
        let allow =
            AllowList::parse(&["https://charts.internal:8443/team", "oci://[::1]:5000"]).unwrap();
        assert!(allow.allows_host("charts.internal", 8443));
        assert!(allow.allows_host("::1", 5000));
        assert!(allow.allows_host("[::1]", 5000));
        assert!(!allow.allows_host("charts.internal", 443));
        assert!(!allow.allows_host("other.internal", 8443));
    }
}
