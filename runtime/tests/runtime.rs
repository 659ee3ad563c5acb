//! The shared set-up's failures are errors the programs report, never panics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use kubenest_runtime::kube::{ClientError, client};
use kubenest_runtime::logs::init_json;

#[tokio::test]
async fn a_missing_kubeconfig_is_a_kubeconfig_error() {
    let error = client(Some(Path::new("/nonexistent/kubeconfig")))
        .await
        .err();
    assert!(
        matches!(error, Some(ClientError::Kubeconfig(_))),
        "{error:?}"
    );
}

#[test]
fn logs_are_set_up_once() {
    assert!(init_json("info", "test").is_ok());
    assert!(init_json("info", "test").is_err());
}
