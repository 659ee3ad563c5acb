//! Naming rules: what a Kubernetes name may be, and the names kubenest derives from others.

/// A name kubenest cannot derive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The organization's namespace would be longer than a DNS label allows.
    #[error("organization name {0:?} is longer than 59 characters")]
    OrganizationTooLong(String),
}

/// The namespace of an organization: `org-<name>`, which must stay a DNS label.
pub fn namespace_of(org: &str) -> Result<String, NameError> {
    let name = format!("org-{org}");
    if name.len() > 63 {
        return Err(NameError::OrganizationTooLong(org.to_owned()));
    }
    Ok(name)
}

/// Why [`is_dns_label`] refuses a name, worded for whoever wrote it.
pub const DNS_LABEL_RULE: &str =
    "a name is 1 to 63 lowercase letters, digits and '-', not starting or ending with '-'";

/// Whether `name` is a DNS label (RFC 1123): what Kubernetes accepts as most object names.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` is a DNS subdomain (RFC 1123): dot-separated labels, at most 253
/// characters, what Kubernetes accepts as the name of most other objects (CRDs' among them).
/// A name that is not one can name no object: looking it up would be a request for another
/// path (`""` lists, `a/b` is a subresource).
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// The namespace the agent runs in (its chart's default), never a project's.
pub const AGENT_NAMESPACE: &str = "kubenest-system";

/// Why a project may not use `namespace` on any cluster, if it may not: Kubernetes' own
/// namespaces (`default`, `kube-*`) and the agent's exist on every cluster and are not
/// kubenest's to hand out (the agent would refuse them, and deleting the project must never
/// take them down).
pub fn reserved_namespace(namespace: &str) -> Option<String> {
    if namespace == "default" || namespace.starts_with("kube-") {
        return Some(format!(
            "namespace {namespace} belongs to Kubernetes on every cluster; a project needs a \
             namespace of its own"
        ));
    }
    if namespace == AGENT_NAMESPACE {
        return Some(format!(
            "namespace {namespace} is where the kubenest agent runs; a project needs a \
             namespace of its own"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_and_agent_namespaces_are_reserved() {
        for reserved in [
            "default",
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "kubenest-system",
        ] {
            assert!(reserved_namespace(reserved).is_some(), "{reserved}");
        }
        for free in ["shop", "kubes", "default-shop", "kubenest"] {
            assert_eq!(reserved_namespace(free), None, "{free}");
        }
    }

    #[test]
    fn an_organization_namespace_is_prefixed_and_stays_a_label() {
        assert_eq!(namespace_of("acme").unwrap(), "org-acme");
        assert_eq!(
            namespace_of(&"x".repeat(60)),
            Err(NameError::OrganizationTooLong("x".repeat(60)))
        );
        assert!(namespace_of(&"x".repeat(59)).is_ok());
    }

    #[test]
    fn dns_subdomains_are_dotted_labels() {
        for good in ["postgres", "my.addon", "a-1.b-2"] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in ["", "a..b", ".a", "a/b", "Postgres", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn dns_labels_are_short_lowercase_and_not_dashed_at_the_ends() {
        assert!(is_dns_label("web-1"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("Web"));
        assert!(!is_dns_label("-web"));
        assert!(!is_dns_label("web-"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
