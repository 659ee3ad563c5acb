//! The JSON Schemas of the envelope and of every payload type, as committed under
//! `contracts/schemas/` (one file per type, named after it: `app.deploy.json`).

use crate::envelope::EnvelopeShape;
use crate::messages::MessageType;

/// The schema of the envelope (the payload is checked by its type's schema).
pub fn envelope() -> schemars::Schema {
    schemars::schema_for!(EnvelopeShape)
}

/// Every schema as (file name, pretty JSON with a trailing newline).
pub fn files() -> Vec<(String, String)> {
    let mut files = vec![("envelope.json".to_owned(), pretty(&envelope()))];
    for &kind in MessageType::ALL {
        files.push((format!("{kind}.json"), pretty(&kind.payload_schema())));
    }
    files
}

fn pretty(schema: &schemars::Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema.as_value()).unwrap_or_default();
    text.push('\n');
    text
}
