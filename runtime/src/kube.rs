//! The Kubernetes client of a program.

use std::path::Path;

/// The client could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file is missing or malformed.
    #[error(transparent)]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// Neither the in-cluster configuration nor `$KUBECONFIG` works.
    #[error(transparent)]
    Infer(#[from] kube::config::InferConfigError),
    /// The configuration does not make a client (e.g. an unusable TLS setting).
    #[error(transparent)]
    Client(#[from] kube::Error),
}

/// A client for the cluster of `kubeconfig` (its current context), or of the inferred
/// configuration (in-cluster, else `$KUBECONFIG`) when absent.
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}
