//! `kubenest-controllers`: the management-plane controllers and the PostgreSQL history.
//!
//! So far: [`history`], the store of deployments, addon revisions and the audit log, and the
//! pure core of the App controller ([`app`]): revision hashing and building `app.deploy`.

pub mod app;
pub mod history;
