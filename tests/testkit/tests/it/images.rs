//! The images of tools/build-images.sh as the test kit finds them: built on demand, archived
//! where `Images` says, under the name a pod spec uses.

use kubenest_testkit::Images;

#[tokio::test]
async fn a_built_image_is_an_oci_archive_carrying_its_localhost_name() {
    let images = Images::build(&["demo"]).await.unwrap();
    let demo = images.get("demo").unwrap();
    assert_eq!(
        demo.reference,
        format!("localhost/kubenest/demo:{}", env!("CARGO_PKG_VERSION"))
    );
    // `ctr images import` names the image after this annotation of the archive's index.
    let index = std::process::Command::new("tar")
        .arg("-xOf")
        .arg(&demo.path)
        .arg("index.json")
        .output()
        .expect("tar");
    assert!(index.status.success(), "{index:?}");
    let index: serde_json::Value = serde_json::from_slice(&index.stdout).unwrap();
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        demo.reference.as_str()
    );
}

#[tokio::test]
async fn an_unknown_image_name_is_refused_before_anything_is_built() {
    let err = Images::build(&["nginx"]).await.unwrap_err();
    assert!(err.to_string().contains("no image named nginx"), "{err}");
}

fn values(path: &str) -> serde_yaml::Value {
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    serde_yaml::from_str(&std::fs::read_to_string(&file).expect(&file)).expect(&file)
}

/// The image a chart's values name: an empty tag is the chart's `appVersion` (`chart`'s
/// Chart.yaml), as the templates take it.
fn repository_and_tag(chart: &str, image: &serde_yaml::Value) -> String {
    let tag = match image["tag"].as_str().unwrap_or_default() {
        "" => values(&format!("{chart}/Chart.yaml"))["appVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        tag => tag.to_owned(),
    };
    format!("{}:{tag}", image["repository"].as_str().unwrap_or_default())
}

#[test]
fn every_image_has_a_containerfile_and_the_charts_name_the_images_make_images_builds() {
    let images = Images::locate().unwrap();
    let reference = |name: &str| {
        images
            .all()
            .find(|i| i.name == name)
            .map(|i| i.reference.clone())
            .unwrap()
    };
    for image in images.all() {
        let containerfile = format!(
            "{}/../../images/{}/Containerfile",
            env!("CARGO_MANIFEST_DIR"),
            image.name
        );
        assert!(
            std::path::Path::new(&containerfile).exists(),
            "{containerfile}"
        );
    }
    let control_plane = values("charts/kubenest/values.yaml");
    for name in ["apiserver", "controllers", "hub"] {
        assert_eq!(
            repository_and_tag("charts/kubenest", &control_plane["images"][name]),
            reference(name)
        );
    }
    let agent = values("charts/kubenest-agent/values.yaml");
    assert_eq!(
        repository_and_tag("charts/kubenest-agent", &agent["image"]),
        reference("agent")
    );
    for addon in ["postgres", "redis", "kafka"] {
        let chart = values(&format!("charts/addons/{addon}/values.yaml"));
        assert_eq!(chart["image"].as_str(), Some(reference(addon).as_str()));
    }
}
