//! What a prune left on the cluster, as a person reads it (pure).

/// An object a prune asked to delete that was still there: `Deployment/web`, with the
/// finalizers that hold it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remaining {
    pub kind: String,
    pub name: String,
    pub finalizers: Vec<String>,
}

impl std::fmt::Display for Remaining {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)?;
        if !self.finalizers.is_empty() {
            write!(f, " (finalizers: {})", self.finalizers.join(", "))?;
        }
        Ok(())
    }
}

/// At most this many remaining objects are named in a report; the rest are counted.
const NAMED: usize = 10;

/// What `remaining` says to a person (pure): the first few, named with what holds them, then
/// how many more.
pub fn describe(remaining: &[Remaining]) -> String {
    let mut text = remaining
        .iter()
        .take(NAMED)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if text.len() > LONGEST {
        let cut = (0..=LONGEST)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    if remaining.len() > NAMED {
        text.push_str(&format!(" and {} more", remaining.len() - NAMED));
    }
    text
}

/// The longest list of names a report carries (a condition's message holds 4096 bytes).
const LONGEST: usize = 3000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_remains_is_named_with_its_finalizers_and_a_long_list_is_counted() {
        let left = |name: &str, finalizers: &[&str]| Remaining {
            kind: "ConfigMap".into(),
            name: name.into(),
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
        };
        assert_eq!(
            describe(&[left("a", &["example.test/hold", "x/y"]), left("b", &[])]),
            "ConfigMap/a (finalizers: example.test/hold, x/y), ConfigMap/b"
        );
        let many: Vec<Remaining> = (0..13).map(|i| left(&format!("c{i}"), &[])).collect();
        let text = describe(&many);
        assert!(text.ends_with("ConfigMap/c9 and 3 more"), "{text}");
    }
}
