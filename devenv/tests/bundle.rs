//! The platform bundle (`make bundle`, tools/bundle.sh): one archive with everything a machine
//! needs offline, checked against its own manifest; a changed or an unlisted file fails the
//! check naming it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The script, from this package's directory.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/bundle.sh")
}

fn run(command: &mut Command) -> Output {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn verify(what: &Path) -> Output {
    Command::new(script())
        .args(["--verify"])
        .arg(what)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundle_holds_every_piece_a_machine_needs_and_its_manifest_catches_a_change() {
    // The images as the tests build them (unchanged ones are skipped); the bundle takes them.
    kubenest_testkit::Images::build(&[]).await.unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let built = run(Command::new(script())
        .env("KUBENEST_BUNDLE_DIR", out_dir.path())
        .env("KUBENEST_BUNDLE_PREBUILT", "1"));
    let archive = PathBuf::from(String::from_utf8(built.stdout).unwrap().trim());
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        archive
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("kubenest-bundle-{version}-")),
        "{}",
        archive.display()
    );
    let checked = verify(&archive);
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains("every checksum matches"),
        "{checked:?}"
    );

    let unpacked = tempfile::tempdir().unwrap();
    run(Command::new("tar")
        .args(["--zstd", "-xf"])
        .arg(&archive)
        .arg("-C")
        .arg(unpacked.path()));
    let top = unpacked.path().join(format!("kubenest-bundle-{version}"));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(top.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_array().unwrap();
    let named = |kind: &str| -> BTreeSet<String> {
        files
            .iter()
            .filter(|f| f["kind"] == kind)
            .map(|f| {
                let path = f["path"].as_str().unwrap();
                path.rsplit('/').next().unwrap().to_owned()
            })
            .collect()
    };

    // Every program a machine runs, each one that runs here.
    let binaries = named("binary");
    for name in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "kube-proxy",
        "kubectl",
        "etcd",
        "coredns",
        "local-path-provisioner",
        "helm",
    ] {
        assert!(binaries.contains(name), "no {name} in {binaries:?}");
    }
    let kubelet = run(Command::new(top.join("bin/kubelet")).arg("--version"));
    let k8s = manifest["versions"]["kubernetes"].as_str().unwrap();
    assert!(
        String::from_utf8_lossy(&kubelet.stdout).contains(k8s),
        "{kubelet:?}"
    );
    run(Command::new(top.join("bin/etcd")).arg("--version"));

    // The runtime as Debian's packages, each a package of the name it has; nothing every
    // Debian install has already (the C library would downgrade a newer one).
    let debs = named("deb");
    for package in [
        "containerd",
        "runc",
        "containernetworking-plugins",
        "iptables",
        "conntrack",
    ] {
        let file = debs
            .iter()
            .find(|d| d.starts_with(&format!("{package}_")))
            .unwrap_or_else(|| panic!("no {package} in {debs:?}"));
        let field = run(Command::new("dpkg-deb")
            .args(["--field"])
            .arg(top.join("debs").join(file))
            .arg("Package"));
        assert_eq!(String::from_utf8_lossy(&field.stdout).trim(), package);
    }
    assert!(!debs.iter().any(|d| d.starts_with("libc6_")), "{debs:?}");

    // Every kubenest image, the sandbox image, and both charts at the version.
    let images = named("image");
    for name in kubenest_testkit::IMAGE_NAMES {
        assert!(
            images.contains(&format!("{name}-{version}.oci.tar")),
            "no image {name} in {images:?}"
        );
    }
    assert!(images.iter().any(|i| i.starts_with("pause-")), "{images:?}");
    for chart in ["kubenest", "kubenest-agent"] {
        let file = top.join("charts").join(format!("{chart}-{version}.tgz"));
        let shown =
            kubenest_testkit::tools::helm(&["show", "chart", file.to_str().unwrap()]).unwrap();
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(
            shown.contains(&format!("name: {chart}\n")) && shown.contains(version),
            "{shown}"
        );
    }

    // A changed file, then a file the manifest does not list, each fail the check by name.
    let chart = top.join(format!("charts/kubenest-agent-{version}.tgz"));
    let mut bytes = std::fs::read(&chart).unwrap();
    bytes.push(0);
    std::fs::write(&chart, &bytes).unwrap();
    let refused = verify(&top);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains(&format!(
                "charts/kubenest-agent-{version}.tgz does not match its checksum"
            )),
        "{refused:?}"
    );
    bytes.pop();
    std::fs::write(&chart, &bytes).unwrap();
    assert!(verify(&top).status.success());
    std::fs::write(top.join("bin/extra"), "#!/bin/sh\n").unwrap();
    let refused = verify(&top);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr)
                .contains("bin/extra is in the archive but not in the manifest"),
        "{refused:?}"
    );
}
