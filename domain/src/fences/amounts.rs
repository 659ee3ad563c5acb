//! Amounts of the fenced resources, and what an App's spec declares of them (pure).

use std::collections::BTreeMap;

use kubenest_crds::app::{AppSpec, Resources};

use crate::app::quantity;

/// A resource a quota or a budget limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    Cpu,
    Memory,
    Storage,
    Pods,
    LoadBalancers,
}

impl Resource {
    pub const ALL: [Resource; 5] = [
        Resource::Cpu,
        Resource::Memory,
        Resource::Storage,
        Resource::Pods,
        Resource::LoadBalancers,
    ];

    /// The field of a quota or a budget that limits it, as REST spells it.
    pub fn field(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
            Resource::Storage => "storage",
            Resource::Pods => "pods",
            Resource::LoadBalancers => "load_balancers",
        }
    }

    /// Its name in a ResourceQuota's `hard` and `used`.
    pub fn quota_key(self) -> &'static str {
        match self {
            Resource::Cpu => "requests.cpu",
            Resource::Memory => "requests.memory",
            Resource::Storage => "requests.storage",
            Resource::Pods => "pods",
            Resource::LoadBalancers => "services.loadbalancers",
        }
    }
}

/// How much of each resource: CPU in cores, memory and storage in bytes, objects counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Amounts {
    pub cpu: f64,
    pub memory: f64,
    pub storage: f64,
    pub pods: f64,
    pub load_balancers: f64,
}

impl Amounts {
    pub fn get(&self, resource: Resource) -> f64 {
        match resource {
            Resource::Cpu => self.cpu,
            Resource::Memory => self.memory,
            Resource::Storage => self.storage,
            Resource::Pods => self.pods,
            Resource::LoadBalancers => self.load_balancers,
        }
    }

    fn slot(&mut self, resource: Resource) -> &mut f64 {
        match resource {
            Resource::Cpu => &mut self.cpu,
            Resource::Memory => &mut self.memory,
            Resource::Storage => &mut self.storage,
            Resource::Pods => &mut self.pods,
            Resource::LoadBalancers => &mut self.load_balancers,
        }
    }

    /// Each resource combined with `other`'s by `f`.
    pub fn zip(&self, other: &Amounts, f: impl Fn(f64, f64) -> f64) -> Amounts {
        let mut out = Amounts::default();
        for r in Resource::ALL {
            *out.slot(r) = f(self.get(r), other.get(r));
        }
        out
    }

    pub fn plus(&self, other: &Amounts) -> Amounts {
        self.zip(other, |a, b| a + b)
    }

    /// Each resource, the more of the two.
    pub fn max(&self, other: &Amounts) -> Amounts {
        self.zip(other, f64::max)
    }
}

/// An amount as people read it: `1.5` cores or `250m`, `512Mi` or `2Gi`, a count.
pub fn format_amount(resource: Resource, amount: f64) -> String {
    match resource {
        Resource::Cpu => {
            let milli = (amount * 1000.0).round();
            if milli % 1000.0 == 0.0 {
                format!("{}", milli / 1000.0)
            } else {
                format!("{milli}m")
            }
        }
        Resource::Memory | Resource::Storage => {
            let units = [
                ("Gi", 1024f64.powi(3)),
                ("Mi", 1024f64.powi(2)),
                ("Ki", 1024.0),
            ];
            for (suffix, size) in units {
                if amount >= size && (amount / size).fract() == 0.0 {
                    return format!("{}{suffix}", amount / size);
                }
            }
            match units.iter().find(|(_, size)| amount >= *size) {
                Some((suffix, size)) => format!("{:.1}{suffix}", amount / size),
                None => format!("{amount}"),
            }
        }
        Resource::Pods | Resource::LoadBalancers => format!("{amount}"),
    }
}

/// Why `text` is not a quantity of `resource` as kubenest takes it (the CRDs' and the hub's
/// [`kubenest_contracts::patterns::CPU_QUANTITY`] and `MEMORY_QUANTITY`), or `None` when it is.
pub fn quantity_refusal(resource: Resource, text: &str) -> Option<&'static str> {
    let (suffixes, rule): (&[&str], &'static str) = match resource {
        Resource::Cpu => (
            &["m"],
            "a CPU quantity: cores (`2`, `0.5`) or millicores (`250m`)",
        ),
        _ => (
            &["Ki", "Mi", "Gi", "Ti", "k", "M", "G", "T"],
            "a quantity of bytes: a number with an optional suffix Ki, Mi, Gi, Ti, k, M, G or T \
             (`512Mi`, `4Gi`)",
        ),
    };
    let number = suffixes
        .iter()
        .find_map(|suffix| text.strip_suffix(suffix))
        .unwrap_or(text);
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let shaped = match number.split_once('.') {
        Some((whole, fraction)) => digits(whole) && digits(fraction),
        None => digits(number),
    };
    (!(shaped && text.len() <= 32)).then_some(rule)
}

/// What a ResourceQuota's `used` says, by the resources fences know.
pub fn reported(usage: &BTreeMap<String, String>) -> Amounts {
    let mut out = Amounts::default();
    for r in Resource::ALL {
        if let Some(value) = usage.get(r.quota_key()).and_then(|v| quantity(v)) {
            *out.slot(r) = value;
        }
    }
    out
}

/// What one container of an image or Git workload requests: its request, else its limit (as
/// Kubernetes defaults a request to the limit), else the project's default request, else
/// nothing.
fn request(own: Option<&Resources>, defaults: Option<&Resources>, resource: Resource) -> f64 {
    let pick = |r: Option<&Resources>| -> Option<f64> {
        let r = r?;
        let (request, limit) = match resource {
            Resource::Cpu => (&r.cpu_request, &r.cpu_limit),
            Resource::Memory => (&r.memory_request, &r.memory_limit),
            _ => return None,
        };
        request.as_deref().or(limit.as_deref()).and_then(quantity)
    };
    pick(own).or_else(|| pick(defaults)).unwrap_or(0.0)
}

/// What an App's spec declares, per component (pure): its image and Git workloads'
/// `replicas` × requests and pods. Charts and addons declare nothing the door can read (the
/// cluster counts them).
pub fn component_charges(spec: &AppSpec, defaults: Option<&Resources>) -> Vec<(String, Amounts)> {
    spec.components
        .iter()
        .map(|component| {
            let charge = match &component.workload {
                Some(w) if w.helm.is_none() && !spec.paused => {
                    let replicas = f64::from(w.replicas);
                    let own = w.resources.as_ref();
                    Amounts {
                        cpu: replicas * request(own, defaults, Resource::Cpu),
                        memory: replicas * request(own, defaults, Resource::Memory),
                        pods: replicas,
                        ..Amounts::default()
                    }
                }
                _ => Amounts::default(),
            };
            (component.name.clone(), charge)
        })
        .collect()
}

/// What an App's spec declares in all.
pub fn app_charge(spec: &AppSpec, defaults: Option<&Resources>) -> Amounts {
    component_charges(spec, defaults)
        .iter()
        .fold(Amounts::default(), |sum, (_, c)| sum.plus(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(format_amount(Resource::Cpu, 1.5), "1500m");
        assert_eq!(format_amount(Resource::Cpu, 4.0), "4");
        assert_eq!(format_amount(Resource::Cpu, 0.25), "250m");
        assert_eq!(
            format_amount(Resource::Memory, 512.0 * 1024.0 * 1024.0),
            "512Mi"
        );
        assert_eq!(
            format_amount(Resource::Memory, 2.0 * 1024f64.powi(3)),
            "2Gi"
        );
        assert_eq!(format_amount(Resource::Pods, 3.0), "3");
        for good in ["2", "0.5", "250m", "1.5m"] {
            assert_eq!(quantity_refusal(Resource::Cpu, good), None, "{good}");
        }
        for bad in ["", "m", "-1", "1e3", "2 ", "1.", ".5", "2Gi", "--2"] {
            assert!(quantity_refusal(Resource::Cpu, bad).is_some(), "{bad}");
        }
        for good in ["512Mi", "4Gi", "1000", "1.5G"] {
            assert_eq!(quantity_refusal(Resource::Memory, good), None, "{good}");
        }
        for bad in ["4gi", "512m", "Mi", "-4Gi"] {
            assert!(quantity_refusal(Resource::Memory, bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_reported_quota_use_is_read_by_its_keys() {
        let used: BTreeMap<String, String> = [
            ("requests.cpu".to_owned(), "1500m".to_owned()),
            ("requests.memory".to_owned(), "1Gi".to_owned()),
            ("pods".to_owned(), "3".to_owned()),
        ]
        .into();
        let amounts = reported(&used);
        assert_eq!(amounts.cpu, 1.5);
        assert_eq!(amounts.memory, 1024f64.powi(3));
        assert_eq!(amounts.pods, 3.0);
        assert_eq!(amounts.storage, 0.0);
    }
}
