//! Where a request comes from, as the login limits count it. Behind a reverse proxy every TCP
//! peer is the proxy, so the proxy's forwarding header (`X-Forwarded-For` unless configured
//! otherwise) is read, but only when the peer is one of the configured trusted proxies.
//!
//! The header is a comma-separated list that each proxy appends its own peer to, so its
//! right end is written by the nearest proxies and its left end by whoever sent the request.
//! [`client_address`] therefore walks it from the right, skipping trusted proxies, and takes
//! the first address no trusted proxy owns: the one a trusted proxy saw connect. Entries left
//! of it are the client's to invent and are never read. An entry that is not an address stops
//! the walk at the last trusted hop, so a garbled header costs the client its own bucket, never
//! someone else's.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::http::{HeaderMap, HeaderName};
use ipnet::IpNet;

/// The proxies whose forwarding header is believed, and the header they write.
#[derive(Debug, Clone)]
pub struct TrustedProxies {
    networks: Vec<IpNet>,
    header: HeaderName,
}

impl Default for TrustedProxies {
    /// No proxy is trusted: the TCP peer is the client.
    fn default() -> Self {
        Self {
            networks: Vec::new(),
            header: HeaderName::from_static("x-forwarded-for"),
        }
    }
}

/// A trusted-proxy setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// Neither `address/prefix` nor a lone address.
    #[error(
        "--trusted-proxies: {0:?} is not a network (such as 10.0.0.0/8 or fd00::/8) nor an address"
    )]
    NotANetwork(String),
    /// A network written with address bits past its prefix, most likely a typo.
    #[error(
        "--trusted-proxies: {entry:?} has address bits past its prefix; the network is {network}"
    )]
    HostBits { entry: String, network: IpNet },
    /// A `/0`, which would let any client name its own address.
    #[error("--trusted-proxies: {0:?} trusts every address, so any client could name its own")]
    EveryAddress(String),
    /// Not a valid HTTP header name.
    #[error("--client-address-header: {0:?} is not an HTTP header name")]
    NotAHeader(String),
    /// RFC 7239's `Forwarded`, whose `for=` pairs this reader does not parse.
    #[error(
        "--client-address-header: Forwarded (RFC 7239) is not read; name a header that lists \
         addresses separated by commas, such as X-Forwarded-For"
    )]
    Forwarded,
}

impl TrustedProxies {
    /// The proxies in `networks` (`10.0.0.0/8`, `fd00::/8`, or one address), which write the
    /// client's address into `header`.
    pub fn parse(networks: &[String], header: &str) -> Result<Self, ProxyError> {
        let header = HeaderName::try_from(header.trim())
            .map_err(|_| ProxyError::NotAHeader(header.to_owned()))?;
        if header.as_str() == "forwarded" {
            return Err(ProxyError::Forwarded);
        }
        let networks = networks
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(network)
            .collect::<Result<_, _>>()?;
        Ok(Self { networks, header })
    }

    /// Whether `address` is one of the trusted proxies.
    pub fn trusts(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.networks.iter().any(|net| net.contains(&address))
    }

    /// The header the proxies write.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }
}

fn network(entry: &str) -> Result<IpNet, ProxyError> {
    let net = match entry.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) => entry
            .parse::<IpAddr>()
            .map(IpNet::from)
            .map_err(|_| ProxyError::NotANetwork(entry.to_owned()))?,
    };
    if net.prefix_len() == 0 {
        return Err(ProxyError::EveryAddress(entry.to_owned()));
    }
    if net.trunc() != net {
        return Err(ProxyError::HostBits {
            entry: entry.to_owned(),
            network: net.trunc(),
        });
    }
    Ok(net)
}

/// One entry of a forwarding list: an address, IPv6 bare or in brackets, with or without a
/// port. Anything else (a name, `unknown`, a zone, an empty entry) is not one.
fn entry_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim_matches([' ', '\t']);
    let address = entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            let inner = entry.strip_prefix('[')?.strip_suffix(']')?;
            inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
        })?;
    Some(address.to_canonical())
}

/// The client's address: `peer` unless `trusted` trusts it; then the first address of the
/// forwarding header, from the right, that `trusted` does not trust. With no such header, or an
/// entry that is not an address, the last trusted hop reached (the peer at first).
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    let mut hop = peer.to_canonical();
    if !trusted.trusts(hop) {
        return hop;
    }
    // Several lines of the header are one list, in the order they came.
    for line in headers.get_all(&trusted.header).iter().rev() {
        let Ok(line) = line.to_str() else {
            return hop;
        };
        for entry in line.rsplit(',') {
            let Some(address) = entry_address(entry) else {
                return hop;
            };
            if !trusted.trusts(address) {
                return address;
            }
            hop = address;
        }
    }
    hop
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn proxies(networks: &[&str]) -> TrustedProxies {
        let networks: Vec<String> = networks.iter().map(|n| (*n).to_owned()).collect();
        TrustedProxies::parse(&networks, "X-Forwarded-For").unwrap()
    }

    fn forwarded(lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append("x-forwarded-for", HeaderValue::from_str(line).unwrap());
        }
        headers
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_its_header_says() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let headers = forwarded(&["203.0.113.7"]);
        assert_eq!(
            client_address(ip("198.51.100.1"), &headers, &trusted),
            ip("198.51.100.1")
        );
        assert_eq!(
            client_address(ip("10.0.0.1"), &headers, &TrustedProxies::default()),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn behind_trusted_proxies_the_client_is_the_first_untrusted_address_from_the_right() {
        let trusted = proxies(&["10.0.0.0/8", "192.168.1.1"]);
        let one_hop = forwarded(&["203.0.113.7"]);
        assert_eq!(
            client_address(ip("10.1.2.3"), &one_hop, &trusted),
            ip("203.0.113.7")
        );
        // Two proxies: the edge one appended the client, the inner one the edge proxy.
        let two_hops = forwarded(&["203.0.113.7, 192.168.1.1"]);
        assert_eq!(
            client_address(ip("10.1.2.3"), &two_hops, &trusted),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn addresses_a_client_adds_on_the_left_are_never_read() {
        let trusted = proxies(&["10.0.0.0/8"]);
        // The client sent "1.2.3.4" (and even a trusted-looking 10.9.9.9); the proxy appended
        // the peer it saw.
        for sent in [
            "1.2.3.4",
            "10.9.9.9",
            "1.2.3.4, 10.9.9.9",
            "garbage, 1.2.3.4",
        ] {
            let headers = forwarded(&[&format!("{sent}, 203.0.113.7")]);
            assert_eq!(
                client_address(ip("10.0.0.1"), &headers, &trusted),
                ip("203.0.113.7"),
                "{sent}"
            );
        }
    }

    #[test]
    fn several_header_lines_are_one_list_in_their_order() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let headers = forwarded(&["1.2.3.4", "203.0.113.7, 10.0.0.2"]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &headers, &trusted),
            ip("203.0.113.7")
        );
        let headers = forwarded(&["1.2.3.4, 203.0.113.7", "10.0.0.2"]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &headers, &trusted),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn a_missing_or_malformed_header_leaves_the_last_trusted_hop() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let peer = ip("10.0.0.1");
        assert_eq!(client_address(peer, &HeaderMap::new(), &trusted), peer);
        for line in [
            "",
            " ",
            "unknown",
            "example.com",
            "203.0.113.7,",
            "fe80::1%eth0",
            "_hidden",
        ] {
            assert_eq!(
                client_address(peer, &forwarded(&[line]), &trusted),
                peer,
                "{line:?}"
            );
        }
        // The walk stops at the garbled entry, on the trusted hop right of it.
        let headers = forwarded(&["203.0.113.7, nonsense, 10.0.0.9"]);
        assert_eq!(client_address(peer, &headers, &trusted), ip("10.0.0.9"));
        // Every entry trusted: the leftmost is where the request came from.
        let headers = forwarded(&["10.0.0.3, 10.0.0.2"]);
        assert_eq!(client_address(peer, &headers, &trusted), ip("10.0.0.3"));
        // A line that is not visible ASCII stops the walk too.
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"203.0.113.7\xff").unwrap(),
        );
        assert_eq!(client_address(peer, &headers, &trusted), peer);
    }

    #[test]
    fn entries_are_read_with_spaces_ports_and_ipv6_in_or_out_of_brackets() {
        let trusted = proxies(&["10.0.0.0/8", "fd00::/8"]);
        let peer = ip("fd00::1");
        for (line, client) in [
            ("  203.0.113.7\t", "203.0.113.7"),
            ("203.0.113.7:4711", "203.0.113.7"),
            ("2001:db8::7", "2001:db8::7"),
            ("[2001:db8::7]", "2001:db8::7"),
            ("[2001:db8::7]:4711", "2001:db8::7"),
            ("::ffff:203.0.113.7", "203.0.113.7"),
            ("2001:db8::7 ,  fd00::2 ,10.0.0.2", "2001:db8::7"),
        ] {
            assert_eq!(
                client_address(peer, &forwarded(&[line]), &trusted),
                ip(client),
                "{line:?}"
            );
        }
    }

    #[test]
    fn an_ipv4_peer_on_an_ipv6_socket_is_trusted_as_itself() {
        let trusted = proxies(&["127.0.0.1/32"]);
        let headers = forwarded(&["203.0.113.7"]);
        assert_eq!(
            client_address(ip("::ffff:127.0.0.1"), &headers, &trusted),
            ip("203.0.113.7")
        );
        assert_eq!(
            client_address(ip("::ffff:198.51.100.1"), &headers, &trusted),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn the_header_is_the_configured_one() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8".into()], "X-Real-IP").unwrap();
        let mut headers = forwarded(&["1.2.3.4"]);
        headers.insert("x-real-ip", HeaderValue::from_static("203.0.113.7"));
        assert_eq!(
            client_address(ip("10.0.0.1"), &headers, &trusted),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn settings_that_cannot_be_meant_are_refused_naming_the_entry() {
        let parse = |networks: &[&str], header: &str| {
            let networks: Vec<String> = networks.iter().map(|n| (*n).to_owned()).collect();
            TrustedProxies::parse(&networks, header).map(|_| ())
        };
        assert_eq!(parse(&[], "X-Forwarded-For"), Ok(()));
        assert_eq!(
            parse(
                &["10.0.0.0/8", " 127.0.0.1 ", "", "fd00::/8"],
                "x-forwarded-for"
            ),
            Ok(())
        );
        assert_eq!(
            parse(&["10.0.0.300/8"], "X-Forwarded-For"),
            Err(ProxyError::NotANetwork("10.0.0.300/8".into()))
        );
        assert_eq!(
            parse(&["proxy.internal"], "X-Forwarded-For"),
            Err(ProxyError::NotANetwork("proxy.internal".into()))
        );
        assert_eq!(
            parse(&["10.0.0.1/8"], "X-Forwarded-For"),
            Err(ProxyError::HostBits {
                entry: "10.0.0.1/8".into(),
                network: "10.0.0.0/8".parse().unwrap()
            })
        );
        assert_eq!(
            parse(&["0.0.0.0/0"], "X-Forwarded-For"),
            Err(ProxyError::EveryAddress("0.0.0.0/0".into()))
        );
        assert_eq!(
            parse(&["::/0"], "X-Forwarded-For"),
            Err(ProxyError::EveryAddress("::/0".into()))
        );
        assert_eq!(
            parse(&[], "X Forwarded For"),
            Err(ProxyError::NotAHeader("X Forwarded For".into()))
        );
        assert_eq!(parse(&[], "Forwarded"), Err(ProxyError::Forwarded));
        let message = ProxyError::HostBits {
            entry: "10.0.0.1/8".into(),
            network: "10.0.0.0/8".parse().unwrap(),
        }
        .to_string();
        assert_eq!(
            message,
            "--trusted-proxies: \"10.0.0.1/8\" has address bits past its prefix; the network is \
             10.0.0.0/8"
        );
    }
}
