//! The images of tools/build-images.sh as the test kit finds them: built on demand, archived
//! where `Images` says, under the name a pod spec uses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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
