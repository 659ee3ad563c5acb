//! `kubenest-controllers`: the management-plane controllers and the PostgreSQL history.
//!
//! So far: [`history`], the store of deployments, addon revisions and the audit log.

pub mod history;
