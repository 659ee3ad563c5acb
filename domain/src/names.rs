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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn dns_labels_are_short_lowercase_and_not_dashed_at_the_ends() {
        assert!(is_dns_label("web-1"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("Web"));
        assert!(!is_dns_label("-web"));
        assert!(!is_dns_label("web-"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
