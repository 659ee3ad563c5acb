//! A namespace of its own for each test on a shared cluster.

use kube::Client;

use crate::Cluster;

/// A namespace created for one test. When the test panics, dropping it prints the end of the
/// cluster's process logs, which is usually where the reason is. The namespace itself is left
/// in place: the cluster is thrown away with the test binary, and a failed test's objects are
/// worth looking at.
pub struct TestNamespace<'a> {
    name: String,
    client: Client,
    cluster: &'a Cluster,
}

impl<'a> TestNamespace<'a> {
    pub(crate) fn new(name: String, client: Client, cluster: &'a Cluster) -> Self {
        Self {
            name,
            client,
            cluster,
        }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An admin client of the namespace's cluster.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The cluster the namespace is on.
    pub fn cluster(&self) -> &'a Cluster {
        self.cluster
    }
}

impl std::fmt::Debug for TestNamespace<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .field("cluster", &self.cluster.name())
            .finish_non_exhaustive()
    }
}

impl Drop for TestNamespace<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "test in namespace {} on cluster {} failed; last log lines:\n{}",
                self.name,
                self.cluster.name(),
                self.cluster.log_tails(20)
            );
        }
    }
}
