//! Hostile values for the doors' property tests: for each kind of value that reaches a program
//! or a URL (chart names, repositories and versions, Git repositories, refs and context
//! folders), values built the ways an attacker builds them — a leading `-` (a flag), `..` and
//! absolute paths, a NUL or a line break, whitespace, credentials in a URL — around random
//! words, so every run tries new ones while a seed replays a run.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The kinds of value that reach a program's command line or a fetched URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    ChartName,
    ChartRepository,
    ChartVersion,
    GitRepository,
    GitRef,
    ContextDir,
}

/// Every [`Field`].
pub const FIELDS: [Field; 6] = [
    Field::ChartName,
    Field::ChartRepository,
    Field::ChartVersion,
    Field::GitRepository,
    Field::GitRef,
    Field::ContextDir,
];

/// The seed of a run: `KUBENEST_PROPERTY_SEED` (a number, or `random` for a new one), else a
/// fixed one so `make test` does not depend on luck. Printed so a failure can be replayed.
pub fn seed(default: u64) -> u64 {
    let seed = match std::env::var("KUBENEST_PROPERTY_SEED").ok().as_deref() {
        Some("random") => rand::random::<u64>(),
        Some(text) => text.parse().unwrap_or(default),
        None => default,
    };
    eprintln!("hostile values: seed {seed} (KUBENEST_PROPERTY_SEED={seed} replays it)");
    seed
}

/// Hostile values of `field`, `count` of them, from `seed`.
pub fn values(field: Field, seed: u64, count: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed ^ (field as u64).wrapping_mul(0x9E37_79B9));
    (0..count).map(|_| one(field, &mut rng)).collect()
}

fn word(rng: &mut StdRng) -> String {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let len = rng.random_range(1..10);
    (0..len)
        .map(|_| char::from(LETTERS[rng.random_range(0..LETTERS.len())]))
        .collect()
}

/// Ways to make a value that is a flag, a path out, or a value with bytes no program expects.
fn plain_attack(rng: &mut StdRng) -> String {
    let (a, b) = (word(rng), word(rng));
    match rng.random_range(0..10) {
        0 => format!("-{a}"),
        1 => format!("--{a}={b}"),
        2 => "--post-renderer=/bin/sh".to_owned(),
        3 => format!("--upload-pack=touch /tmp/{a}"),
        4 => format!("../{a}"),
        5 => format!("{a}/../../{b}"),
        6 => format!("/{a}/{b}"),
        7 => format!("{a}\0{b}"),
        8 => format!("{a}\n{b}"),
        _ => format!("{a} {b}"),
    }
}

/// Ways to make a URL that carries credentials, reaches a scheme that is not allowed, or hides
/// a flag or a path in its host.
fn url_attack(rng: &mut StdRng, schemes: &[&str]) -> String {
    let (a, b, host) = (word(rng), word(rng), format!("{}.example.test", word(rng)));
    let scheme = schemes[rng.random_range(0..schemes.len())];
    match rng.random_range(0..8) {
        0 => format!("{scheme}://{a}:{b}@{host}/{a}"),
        1 => format!("{scheme}://{a}@{host}/{b}"),
        2 => format!("{scheme}://-o{a}/{b}"),
        3 => format!("file:///{a}/{b}"),
        4 => format!("http://{host}/{a}"),
        5 => format!("{scheme}://{host}/{a}/../{b}"),
        6 => format!("{scheme}://{host}/{a} {b}"),
        _ => plain_attack(rng),
    }
}

fn one(field: Field, rng: &mut StdRng) -> String {
    match field {
        Field::ChartRepository => url_attack(rng, &["https", "oci"]),
        Field::GitRepository => {
            if rng.random_bool(0.2) {
                // ssh with a password, and ssh's option injection through the host.
                let (a, b) = (word(rng), word(rng));
                if rng.random_bool(0.5) {
                    format!("ssh://{a}:{b}@{a}.example.test/{b}.git")
                } else {
                    format!("ssh://-oProxyCommand={a}/{b}")
                }
            } else {
                url_attack(rng, &["https"])
            }
        }
        Field::ChartVersion => {
            let v = format!(
                "{}.{}.{}",
                rng.random_range(0..9),
                rng.random_range(0..9),
                0
            );
            match rng.random_range(0..3) {
                0 => format!("--set-file=x=/{}", word(rng)),
                1 => format!("{v} {}", word(rng)),
                _ => plain_attack(rng),
            }
        }
        Field::ChartName | Field::GitRef | Field::ContextDir => plain_attack(rng),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_its_values_and_every_field_gets_some() {
        for field in FIELDS {
            let first = values(field, 7, 20);
            assert_eq!(first, values(field, 7, 20));
            assert_eq!(first.len(), 20);
            assert!(first.iter().all(|v| !v.is_empty()));
        }
    }
}
