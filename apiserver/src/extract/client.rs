//! The client's address of a request as an extractor: [`crate::client_address::client_address`]
//! of its TCP peer, its headers and the configured trusted proxies.

use std::net::{IpAddr, SocketAddr};

use aide::OperationInput;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

use crate::client_address::client_address;
use crate::error::ApiError;
use crate::state::AppState;

/// The client's address ([`client_address`]) of a request, from its TCP peer and the
/// configured trusted proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

impl FromRequestParts<AppState> for ClientAddress {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let ConnectInfo(peer) = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .copied()
            .ok_or_else(|| ApiError::internal("served without the peer's address"))?;
        Ok(Self(client_address(
            peer.ip(),
            &parts.headers,
            state.limits().proxies(),
        )))
    }
}

/// The header is the proxies', not the caller's: nothing to document.
impl OperationInput for ClientAddress {}
