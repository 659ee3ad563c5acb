//! Authentication: argon2id passwords, short-lived access JWTs and rotating refresh tokens.

pub mod accounts;
pub mod tokens;
