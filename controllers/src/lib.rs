//! `kubenest-controllers`: the management-plane controllers and the PostgreSQL history.
