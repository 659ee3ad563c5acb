//! An App's ingresses, checked at the door (pure): what is wrong and where, as a JSON pointer
//! into the deploy; [`super::validate_deploy`] names the App's field.

use kubenest_contracts as wire;

/// Why an ingress is refused: (JSON pointer, reason).
pub(super) type Refusal = (String, &'static str);

/// An ingress routes to the workload's Service, which exists only when the workload has a
/// port: an ingress without one is refused with its field, not dropped. Its `tls_secret` is
/// the certificate of `tls` (so only with it), and never one of kubenest's own Secrets
/// (`kubenest-`: the project's ingress CA, its registry credentials).
pub(super) fn check_ingresses(deploy: &wire::AppDeploy) -> Result<(), Refusal> {
    for (i, component) in deploy.components.iter().enumerate() {
        let wire::Component::Workload(workload) = component else {
            continue;
        };
        let Some(ingress) = &workload.ingress else {
            continue;
        };
        let at = |pointer: String, why: &'static str| Err((pointer, why));
        if workload.port.is_none() {
            return at(
                format!("/components/{i}/ingress"),
                "an ingress routes to the workload's port: set port too",
            );
        }
        let Some(secret) = &ingress.tls_secret else {
            continue;
        };
        let pointer = format!("/components/{i}/ingress/tls_secret");
        if !ingress.tls {
            return at(
                pointer,
                "tls_secret is the certificate of tls: set tls: true",
            );
        }
        if secret.as_str().starts_with("kubenest-") {
            return at(
                pointer,
                "Secrets named kubenest-* are kubenest's own (the project's ingress CA, its \
                 registry credentials); name a kubernetes.io/tls Secret of your own",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn deploy(components: Value) -> wire::AppDeploy {
        serde_json::from_value(json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": components,
        }))
        .unwrap()
    }

    #[test]
    fn an_ingress_without_a_port_is_refused_at_its_pointer() {
        let mut portless = deploy(json!([
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx:1.27"},
             "replicas": 1, "ingress": {"host": "shop.example.test", "path": "/"}}
        ]));
        let (pointer, why) = check_ingresses(&portless).unwrap_err();
        assert_eq!(pointer, "/components/0/ingress");
        assert!(why.contains("port"), "{why}");
        let wire::Component::Workload(w) = &mut portless.components[0] else {
            panic!("a workload");
        };
        w.port = Some(8080);
        assert_eq!(check_ingresses(&portless), Ok(()));
    }

    #[test]
    fn an_ingress_names_a_certificate_of_its_own_only_with_tls() {
        let with = |ingress: Value| {
            deploy(json!([
                {"kind": "workload", "name": "web",
                 "source": {"type": "image", "image": "nginx:1.27"},
                 "replicas": 1, "port": 8080, "ingress": ingress}
            ]))
        };
        let pointer = "/components/0/ingress/tls_secret";
        let without_tls = json!({"host": "a.test", "path": "/", "tls_secret": "shop-cert"});
        let (at, why) = check_ingresses(&with(without_tls)).unwrap_err();
        assert_eq!(at, pointer);
        assert!(why.contains("tls: true"), "{why}");
        for own in ["kubenest-ingress-ca", "kubenest-registry"] {
            let ca = json!({"host": "a.test", "path": "/", "tls": true, "tls_secret": own});
            let (at, why) = check_ingresses(&with(ca)).unwrap_err();
            assert_eq!(at, pointer);
            assert!(why.contains("kubenest's own"), "{why}");
        }
        let mine = json!({"host": "a.test", "path": "/", "tls": true, "tls_secret": "shop-cert"});
        assert_eq!(check_ingresses(&with(mine)), Ok(()));
    }
}
