//! The commands' calls: a typed body (`kubenest_api`) in, the answer read as its API type.

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ApiError, Client};

impl Client {
    /// `GET path`, the answer read as a `T` (a [`Value`] only for answers that are free-form).
    pub async fn get_as<T: DeserializeOwned>(&mut self, path: &str) -> Result<T, ApiError> {
        let value = self.call_with(Method::GET, path, None::<&()>).await?;
        read(path, value)
    }

    /// `POST path` with `body`, the answer read as a `T`.
    pub async fn post_as<T: DeserializeOwned>(
        &mut self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ApiError> {
        let value = self.call_with(Method::POST, path, Some(body)).await?;
        read(path, value)
    }

    /// `PATCH path` with `body`, the answer read as a `T`.
    pub async fn patch_as<T: DeserializeOwned>(
        &mut self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ApiError> {
        let value = self.call_with(Method::PATCH, path, Some(body)).await?;
        read(path, value)
    }

    /// `PUT path` with `body`, the answer read as a `T`.
    pub async fn put_as<T: DeserializeOwned>(
        &mut self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ApiError> {
        let value = self.call_with(Method::PUT, path, Some(body)).await?;
        read(path, value)
    }

    /// `DELETE path`, the answer read as a `T` (`()` for a 204).
    pub async fn delete_as<T: DeserializeOwned>(&mut self, path: &str) -> Result<T, ApiError> {
        let value = self.call_with(Method::DELETE, path, None::<&()>).await?;
        read(path, value)
    }
}

/// A 2xx answer to `path` read as a `T`; an answer of another shape says so, naming the path.
pub(super) fn read<T: DeserializeOwned>(path: &str, value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::Answer {
        path: path.split('?').next().unwrap_or(path).to_owned(),
        reason: e.to_string(),
    })
}
