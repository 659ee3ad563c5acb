//! `kubenest projects ingress-ca`: the CA from which a project's ingresses with `tls` and no
//! `tls_secret` get their certificates.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use kubenest_api::ingress_ca::{IngressCaBody, IngressCaRemoved, IngressCaResponse};

use super::{Global, cell};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum IngressCaCommand {
    /// Set the project's ingress CA (admins), replacing an earlier one. The key goes to the
    /// cluster only; kubenest never stores it.
    Set {
        project: String,
        /// The CA's certificate: one PEM CERTIFICATE with basicConstraints CA:TRUE.
        #[arg(long, value_name = "FILE")]
        cert: PathBuf,
        /// Its private key: one unencrypted PEM private key.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
    },
    /// Print the project's ingress CA certificate (PEM).
    Get { project: String },
    /// Remove the project's ingress CA (admins; refused while an App's ingress uses it).
    Delete { project: String },
}

impl IngressCaCommand {
    /// The project the command is about, as the user named it.
    pub fn project(&self) -> &str {
        match self {
            Self::Set { project, .. } | Self::Get { project } | Self::Delete { project } => project,
        }
    }
}

/// The text of a PEM file the user named (`what` says which in the error).
fn read_pem(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("read the {what} {}", path.display()))
}

/// Runs `command` on the project of id `id` (its [`IngressCaCommand::project`], resolved).
pub async fn run(
    global: &Global,
    client: &mut api::Client,
    id: &str,
    command: IngressCaCommand,
) -> anyhow::Result<()> {
    let path = format!("/api/v1/projects/{id}/ingress-ca");
    match command {
        IngressCaCommand::Set { project, cert, key } => {
            let certificate = read_pem(&cert, "certificate")?;
            let private_key = read_pem(&key, "private key")?;
            let body = IngressCaBody {
                certificate,
                private_key,
            };
            let answer: IngressCaResponse = client.put_as(&path, &body).await?;
            global.done(
                &answer,
                &format!(
                    "project {project} issues its ingresses' certificates from {} (until {}; \
                     Secret {})",
                    cell(&answer.subject),
                    cell(&answer.not_after),
                    cell(&answer.secret)
                ),
            );
        }
        IngressCaCommand::Get { .. } => {
            let answer: IngressCaResponse = client.get_as(&path).await?;
            // For people, the PEM alone, so `> ca.crt` saves it.
            global.done(&answer, cell(&answer.certificate).trim_end());
        }
        IngressCaCommand::Delete { project } => {
            let answer: IngressCaRemoved = client.delete_as(&path).await?;
            global.done(&answer, &format!("project {project} has no ingress CA now"));
        }
    }
    Ok(())
}
