//! The one definition of every user value that reaches a program's command line (helm, git,
//! buildah) or a URL the platform fetches: chart names, repositories and versions, Git
//! repositories, refs and context folders. The hub's schemas, the CRDs' schemas and the REST
//! document carry these patterns; [`rule_of`] says each one in words for the errors that name
//! the field.
//!
//! The patterns are written for RE2 (the kube-apiserver's CRD validation), so they use no
//! look-around. Each one keeps a value from being read as something else by the program that
//! receives it: no leading `-` (a flag), no `..` segment or leading `/` (a path outside the
//! folder meant), no whitespace or control character (NUL included), and no userinfo in a URL
//! (credentials go through the credential routes, never into a URL that every viewer reads).

// The pieces the patterns are made of, as literals so `concat!` can join them.
/// A host, as a URL parser reads it without doubt: a DNS name whose labels start with a letter
/// or digit and whose last label starts with a letter (a last label of digits makes the whole
/// host an IPv4 address), a dotted IPv4 address, or a bracketed IPv6 address; then an optional
/// port up to 65535. (What the patterns admit, `url` parses; a test of `kubenest-domain`'s
/// sources generates values of these patterns and parses them.)
macro_rules! host {
    () => {
        concat!(
            "(",
            r"([A-Za-z0-9][A-Za-z0-9-]*\.)*[A-Za-z][A-Za-z0-9-]*",
            "|",
            ipv4!(),
            r"|\[",
            ipv6!(),
            r"\]",
            ")",
            r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0))?",
        )
    };
}
/// A dotted IPv4 address, each part 0 to 255 without leading zeros.
macro_rules! ipv4 {
    () => {
        r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    };
}
/// An IPv6 address in any of its written forms (full, `::`-shortened, IPv4 at the end).
macro_rules! ipv6 {
    () => {
        concat!(
            "(",
            r"([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}",
            r"|([0-9A-Fa-f]{1,4}:){1,7}:",
            r"|([0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}",
            r"|([0-9A-Fa-f]{1,4}:){1,5}(:[0-9A-Fa-f]{1,4}){1,2}",
            r"|([0-9A-Fa-f]{1,4}:){1,4}(:[0-9A-Fa-f]{1,4}){1,3}",
            r"|([0-9A-Fa-f]{1,4}:){1,3}(:[0-9A-Fa-f]{1,4}){1,4}",
            r"|([0-9A-Fa-f]{1,4}:){1,2}(:[0-9A-Fa-f]{1,4}){1,5}",
            r"|[0-9A-Fa-f]{1,4}:(:[0-9A-Fa-f]{1,4}){1,6}",
            r"|:((:[0-9A-Fa-f]{1,4}){1,7}|:)",
            r"|::([Ff]{4}(:0{1,4})?:)?",
            ipv4!(),
            r"|([0-9A-Fa-f]{1,4}:){1,4}:",
            ipv4!(),
            ")"
        )
    };
}
/// One path segment that is never `.` or `..` (a dot is followed by a name character, or two
/// dots by anything but the end) and never starts with `-`.
macro_rules! segment {
    () => {
        r"([A-Za-z0-9_~+]|\.[A-Za-z0-9_~+-]|\.\.[A-Za-z0-9._~+-])[A-Za-z0-9._~+-]*"
    };
}

/// An `https://` chart repository or `oci://` registry path: a host and optional port, never
/// `user:password@`, then path segments.
macro_rules! remote {
    () => {
        concat!(r"(https|oci)://", host!(), "(/", segment!(), ")*/?")
    };
}

/// A chart's name: letters, digits, `.`, `_`, `-`, starting with a letter or digit (so never a
/// flag, and never `.` or `..` in the catalog's folder).
pub const CHART_NAME: &str = r"^[A-Za-z0-9][A-Za-z0-9._-]*$";

/// A chart repository: the agent's catalog (`charts/<folder>`), an `https://` chart repository
/// or an `oci://` registry path; a URL's authority is a host (name, IPv4 or bracketed IPv6) and
/// an optional port, never `user:password@`.
pub const CHART_REPOSITORY: &str = concat!(r"^(charts(/[a-z0-9][a-z0-9-]*)*|", remote!(), ")$");

/// A chart source the API server fetches for a template: the remote half of
/// [`CHART_REPOSITORY`] (an `https://` chart repository or an `oci://` registry path).
pub const CHART_SOURCE: &str = concat!("^", remote!(), "$");

/// A chart version: an exact semantic version (kubenest pins charts; ranges are refused).
pub const CHART_VERSION: &str = r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$";

/// A Git repository: `https://host[:port]/path` (no userinfo), `ssh://[user@]host[:port]/path`
/// or Git's scp-like `user@host:path`; a host never starts with `-` (ssh would read it as an
/// option).
pub const GIT_REPOSITORY: &str = concat!(
    "^(https://",
    host!(),
    "(/",
    segment!(),
    ")*/?|ssh://([A-Za-z0-9_][A-Za-z0-9._-]*@)?",
    host!(),
    "(/",
    segment!(),
    ")+/?|[A-Za-z0-9_][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*:",
    segment!(),
    "(/",
    segment!(),
    ")*/?)$"
);

/// A Git ref: a branch, tag, full ref or commit. It starts with a letter, digit or `_` (never
/// a flag); a `.` or `/` is always followed by a name character, so no `..`, `//`, `/.`, or
/// trailing `.` or `/`.
pub const GIT_REF: &str = r"^[A-Za-z0-9_]([A-Za-z0-9_+-]|\.[A-Za-z0-9_+-]|/[A-Za-z0-9_])*$";

/// A build's context folder inside the repository: relative, `/`-separated names, no `.` or `..`
/// segment, no leading `/` or `-` (buildah would read it as an option).
pub const CONTEXT_DIR: &str = concat!("^", segment!(), "(/", segment!(), ")*$");

/// Each pattern with the rule it enforces, in words.
const RULES: [(&str, &str); 7] = [
    (
        CHART_NAME,
        "letters, digits, '.', '_' and '-', starting with a letter or digit",
    ),
    (
        CHART_REPOSITORY,
        "an https:// chart repository or an oci:// registry path without user or password \
         (set credentials through the credential routes), or a catalog path like charts/addons",
    ),
    (
        CHART_SOURCE,
        "an https:// chart repository or an oci:// registry path without user or password",
    ),
    (CHART_VERSION, "an exact version like 1.2.3 (no ranges)"),
    (
        GIT_REPOSITORY,
        "an https://host/path URL without user or password (set Git credentials through the \
         git-credentials route), ssh://[user@]host/path or user@host:path",
    ),
    (
        GIT_REF,
        "a branch, tag or commit: letters, digits, '_', '+', '-', '.' and '/', starting with a \
         letter, digit or '_', without '..', '//' or a trailing '.' or '/'",
    ),
    (
        CONTEXT_DIR,
        "a folder inside the repository like web or services/api: no leading '/' or '-', no \
         '.' or '..' segment",
    ),
];

/// The rule `pattern` enforces, in words, when it is one of these patterns.
pub fn rule_of(pattern: &str) -> Option<&'static str> {
    RULES
        .iter()
        .find(|(p, _)| *p == pattern)
        .map(|(_, rule)| *rule)
}

/// Whether `value` matches `pattern` (one of these), as the schemas decide it.
pub fn matches(pattern: &str, value: &str) -> bool {
    // The patterns are constants checked by this module's tests, compiled once; one that failed
    // to compile would refuse everything rather than let anything through.
    static COMPILED: std::sync::LazyLock<Vec<(&str, Option<regex::Regex>)>> =
        std::sync::LazyLock::new(|| {
            RULES
                .iter()
                .map(|(p, _)| (*p, regex::Regex::new(p).ok()))
                .collect()
        });
    match COMPILED.iter().find(|(p, _)| *p == pattern) {
        Some((_, compiled)) => compiled.as_ref().is_some_and(|re| re.is_match(value)),
        None => regex::Regex::new(pattern).is_ok_and(|re| re.is_match(value)),
    }
}

/// A CPU quantity as kubenest takes it: cores with an optional fraction, or millicores (`m`).
pub const CPU_QUANTITY: &str = r"^[0-9]+(\.[0-9]+)?m?$";

/// A memory or storage quantity as kubenest takes it: bytes with an optional fraction and a
/// binary (`Ki` … `Ti`) or decimal (`k` … `T`) suffix.
pub const MEMORY_QUANTITY: &str = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$";

#[cfg(test)]
mod tests {
    use super::*;

    fn all(pattern: &str, values: &[&str]) -> Vec<String> {
        values
            .iter()
            .filter(|v| !matches(pattern, v))
            .map(|v| (*v).to_owned())
            .collect()
    }

    fn none(pattern: &str, values: &[&str]) -> Vec<String> {
        values
            .iter()
            .filter(|v| matches(pattern, v))
            .map(|v| (*v).to_owned())
            .collect()
    }

    #[test]
    fn every_pattern_has_its_rule_in_words() {
        for (pattern, _) in RULES {
            assert!(regex::Regex::new(pattern).is_ok(), "{pattern}");
            assert!(rule_of(pattern).is_some());
        }
        assert_eq!(rule_of("^x$"), None);
    }

    #[test]
    fn chart_names_are_never_flags_or_paths() {
        assert!(all(CHART_NAME, &["postgres", "web-app", "a.b_c", "9lives"]).is_empty());
        let refused = none(
            CHART_NAME,
            &[
                "--debug",
                "--post-renderer=/bin/sh",
                "-x",
                "..",
                ".",
                "../etc",
                "/etc",
                "a/b",
                "a b",
                "a\0b",
                "",
                "a\nb",
            ],
        );
        assert!(refused.is_empty(), "{refused:?}");
    }

    #[test]
    fn chart_repositories_are_catalog_paths_or_https_and_oci_urls_without_credentials() {
        let allowed = all(
            CHART_REPOSITORY,
            &[
                "charts/addons",
                "charts",
                "https://charts.example.test",
                "https://charts.example.test/",
                "https://charts.example.test:8443/stable/x",
                "oci://registry.example.test/charts",
                "https://10.89.0.1:5000/charts",
                "https://[::1]:8443/charts",
            ],
        );
        assert!(allowed.is_empty(), "{allowed:?}");
        let refused = none(
            CHART_REPOSITORY,
            &[
                "http://charts.example.test",
                "https://user:secret@charts.example.test",
                "https://user@charts.example.test",
                "oci://u:p@registry.example.test/charts",
                "../../etc",
                "/etc",
                "charts/../../etc",
                "charts/addons/..",
                "--repo=x",
                "file:///etc",
                "https://-oProxy/x",
                "https://charts.example.test/a b",
                "https://charts.example.test/a\0",
                "https://charts.example.test/../x",
                "",
            ],
        );
        assert!(refused.is_empty(), "{refused:?}");
    }

    #[test]
    fn git_repositories_have_no_credentials_and_no_flag_hosts() {
        let allowed = all(
            GIT_REPOSITORY,
            &[
                "https://git.example.test/shop.git",
                "https://git.example.test:8443/team/shop",
                "ssh://git@git.example.test:2222/shop.git",
                "ssh://git.example.test/shop.git",
                "git@10.89.0.1:shop.git",
                "git@git.example.test:team/shop.git",
            ],
        );
        assert!(allowed.is_empty(), "{allowed:?}");
        let refused = none(
            GIT_REPOSITORY,
            &[
                "https://user:secret@git.example.test/shop.git",
                "https://token@git.example.test/shop.git",
                "ssh://git:secret@git.example.test/shop.git",
                "ssh://-oProxyCommand=touch%20x/shop",
                "git@-oProxyCommand=x:shop",
                "--upload-pack=touch x",
                "-c",
                "file:///etc/passwd",
                "http://git.example.test/shop.git",
                "ext::sh -c touch% x",
                "https://git.example.test/../x",
                "https://git.example.test/a b",
                "",
            ],
        );
        assert!(refused.is_empty(), "{refused:?}");
    }

    #[test]
    fn git_refs_are_never_flags_or_ranges() {
        let allowed = all(
            GIT_REF,
            &[
                "main",
                "v1.2.3",
                "feature/new-ui",
                "refs/heads/main",
                "0123456789abcdef0123456789abcdef01234567",
                "release-1.0+build",
            ],
        );
        assert!(allowed.is_empty(), "{allowed:?}");
        let refused = none(
            GIT_REF,
            &[
                "--upload-pack=touch x",
                "-b",
                "main..evil",
                "a//b",
                "a/",
                "a.",
                "/main",
                ".hidden",
                "a b",
                "a\0b",
                "main@{1}",
                "a:b",
                "",
            ],
        );
        assert!(refused.is_empty(), "{refused:?}");
    }

    #[test]
    fn context_folders_stay_inside_the_repository() {
        let allowed = all(
            CONTEXT_DIR,
            &["web", "services/api", ".docker", "a/..b", "a/...", "v1.2"],
        );
        assert!(allowed.is_empty(), "{allowed:?}");
        let refused = none(
            CONTEXT_DIR,
            &[
                "..", "../..", "a/../..", "a/..", "/etc", ".", "./web", "a/./b", "a//b", "a/",
                "-f", "--file=x", "a b", "a\0b", "",
            ],
        );
        assert!(refused.is_empty(), "{refused:?}");
    }
}
