//! An App's logs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsQuery {
    /// The component; may be left out when the App has one workload component.
    pub component: Option<String>,
    /// Keep the stream open for new lines (`true`/`false`, default false).
    pub follow: Option<String>,
    /// Only lines newer than this, e.g. `30s`, `10m`, `2h`, `1d` (at most 30 days).
    pub since: Option<String>,
    /// Only the last N lines of each container (1 to 10000).
    pub tail: Option<String>,
    /// The previous, terminated instance of each container (`true`/`false`).
    pub previous: Option<String>,
}
