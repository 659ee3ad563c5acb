//! The frame validator: raw bytes → typed [`Envelope`], or a [`FrameError`] naming where and why.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use uuid::Uuid;

use crate::common::Id;
use crate::control::{ErrorCode, ErrorFrame};
use crate::envelope::{Envelope, SCHEMA_VERSION};
use crate::messages::{Direction, MessageType};
use crate::schemas;

/// Bounds every frame must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame in bytes. The hub also sets this as its WebSocket message limit.
    pub max_frame_bytes: usize,
    /// Deepest nesting of arrays and objects, the envelope counting as level 1.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: 1024 * 1024,
            max_depth: 32,
        }
    }
}

/// Why a frame was refused: a code, a JSON pointer into the frame, and a reason that never quotes
/// the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?} at {path:?}: {reason}")]
pub struct FrameError {
    pub code: ErrorCode,
    /// JSON pointer, `""` for the frame as a whole.
    pub path: String,
    pub reason: String,
    /// The refused frame's id, when it could be read.
    pub frame_id: Option<Uuid>,
}

impl FrameError {
    fn new(code: ErrorCode, path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            code,
            path: path.into(),
            reason: reason.into(),
            frame_id: None,
        }
    }

    /// The `error` control payload to send back to the peer.
    pub fn to_error_frame(&self) -> ErrorFrame {
        ErrorFrame {
            code: self.code,
            message: self.reason.clone(),
            path: self.path.clone(),
            frame_id: self.frame_id,
        }
    }
}

/// Validates frames against the compiled schemas of the envelope and every payload type.
#[derive(Debug)]
pub struct Validator {
    envelope: jsonschema::Validator,
    payloads: BTreeMap<MessageType, jsonschema::Validator>,
    limits: Limits,
}

fn compile(schema: &schemars::Schema) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema.as_value())
        .map_err(|e| e.to_string())
}

impl Validator {
    /// Compiles every schema once. Fails only if the crate's own schemas are broken.
    pub fn new(limits: Limits) -> Result<Self, String> {
        let envelope = compile(&schemas::envelope())?;
        let mut payloads = BTreeMap::new();
        for &kind in MessageType::ALL {
            let validator =
                compile(&kind.payload_schema()).map_err(|e| format!("schema of {kind}: {e}"))?;
            payloads.insert(kind, validator);
        }
        Ok(Self {
            envelope,
            payloads,
            limits,
        })
    }

    /// A process-wide validator with the default limits, compiled on first use.
    pub fn shared() -> Result<&'static Self, FrameError> {
        static SHARED: LazyLock<Result<Validator, String>> =
            LazyLock::new(|| Validator::new(Limits::default()));
        SHARED
            .as_ref()
            .map_err(|e| FrameError::new(ErrorCode::Invalid, "", e.clone()))
    }

    /// The limits this validator enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Raw frame → typed envelope.
    pub fn decode(&self, raw: &[u8]) -> Result<Envelope, FrameError> {
        self.check(raw)?.into_envelope()
    }

    /// Raw frame → a frame that passed every check, with its routing header read but its
    /// payload left as JSON. For routers, which need the header and forward the bytes.
    pub fn check(&self, raw: &[u8]) -> Result<Checked, FrameError> {
        if raw.len() > self.limits.max_frame_bytes {
            return Err(FrameError::new(
                ErrorCode::TooLarge,
                "",
                format!(
                    "frame of {} bytes exceeds {} bytes",
                    raw.len(),
                    self.limits.max_frame_bytes
                ),
            ));
        }
        let value: Value = serde_json::from_slice(raw).map_err(|e| {
            let code = if e.to_string().contains("recursion limit") {
                ErrorCode::TooDeep
            } else {
                ErrorCode::MalformedJson
            };
            FrameError::new(code, "", format!("not valid JSON: {e}"))
        })?;
        self.check_value(value)
    }

    /// Parsed JSON → typed envelope.
    pub fn decode_value(&self, value: Value) -> Result<Envelope, FrameError> {
        self.check_value(value)?.into_envelope()
    }

    /// Parsed JSON → a checked frame.
    pub fn check_value(&self, value: Value) -> Result<Checked, FrameError> {
        let frame_id = header_uuid(&value, "id");
        let (message_type, direction) = self.check_shape(&value).map_err(|mut e| {
            e.frame_id = frame_id;
            e
        })?;
        Ok(Checked {
            id: frame_id.unwrap_or_default(),
            message_type,
            direction,
            cluster_id: header_id(&value, "cluster_id"),
            org_id: header_id(&value, "org_id"),
            correlation_id: header_uuid(&value, "correlation_id"),
            traceparent: value
                .get("traceparent")
                .and_then(Value::as_str)
                .map(str::to_owned),
            value,
        })
    }

    /// Checks one payload of type `kind` against its schema, as a peer would on receiving it:
    /// the error's path is a JSON pointer into the payload. For the side that builds a payload
    /// from a user's input, to refuse at its own door what the hub would refuse later.
    pub fn check_payload(&self, kind: MessageType, payload: &Value) -> Result<(), FrameError> {
        match self.payloads.get(&kind) {
            Some(validator) => validator
                .validate(payload)
                .map_err(|error| schema_error("", &error)),
            None => Err(FrameError::new(
                ErrorCode::UnknownType,
                "",
                format!("no schema for {kind}"),
            )),
        }
    }

    /// Typed envelope → frame text, refusing what a peer would refuse.
    pub fn encode(&self, envelope: &Envelope) -> Result<String, FrameError> {
        let value = serde_json::to_value(envelope).map_err(|e| {
            FrameError::new(ErrorCode::Invalid, "", format!("cannot serialize: {e}"))
        })?;
        self.check_shape(&value).map_err(|e| FrameError {
            frame_id: Some(envelope.id),
            ..e
        })?;
        let text = value.to_string();
        if text.len() > self.limits.max_frame_bytes {
            return Err(FrameError::new(
                ErrorCode::TooLarge,
                "",
                format!(
                    "frame of {} bytes exceeds {} bytes",
                    text.len(),
                    self.limits.max_frame_bytes
                ),
            ));
        }
        Ok(text)
    }

    /// Every check; returns the frame's type and direction.
    fn check_shape(&self, value: &Value) -> Result<(MessageType, Direction), FrameError> {
        let Some(frame) = value.as_object() else {
            return Err(FrameError::new(
                ErrorCode::MalformedJson,
                "",
                "a frame is a JSON object",
            ));
        };
        if let Some(path) = too_deep(value, self.limits.max_depth) {
            return Err(FrameError::new(
                ErrorCode::TooDeep,
                path,
                format!("nested deeper than {} levels", self.limits.max_depth),
            ));
        }
        if let Some(version) = frame.get("schema_version").and_then(Value::as_u64)
            && version > u64::from(SCHEMA_VERSION)
        {
            return Err(FrameError::new(
                ErrorCode::UnsupportedVersion,
                "/schema_version",
                format!("schema_version {version} is newer than {SCHEMA_VERSION}"),
            ));
        }
        let kind = match frame.get("type").and_then(Value::as_str) {
            Some(name) => Some(MessageType::parse(name).ok_or_else(|| {
                FrameError::new(ErrorCode::UnknownType, "/type", "unknown message type")
            })?),
            None => None, // the envelope schema reports it
        };
        if let Err(error) = self.envelope.validate(value) {
            return Err(schema_error("", &error));
        }
        let Some(kind) = kind else {
            return Err(FrameError::new(
                ErrorCode::Invalid,
                "/type",
                "missing message type",
            ));
        };
        let payload = frame.get("payload").unwrap_or(&Value::Null);
        if let Some(validator) = self.payloads.get(&kind)
            && let Err(error) = validator.validate(payload)
        {
            return Err(schema_error("/payload", &error));
        }
        let direction = kind.direction();
        if frame.get("direction") != Some(&serde_json::to_value(direction).unwrap_or(Value::Null)) {
            return Err(FrameError::new(
                ErrorCode::Forbidden,
                "/direction",
                format!("{kind} frames travel in direction {direction:?}"),
            ));
        }
        if direction != Direction::Control {
            for field in ["cluster_id", "org_id"] {
                if frame.get(field).is_none_or(Value::is_null) {
                    return Err(FrameError::new(
                        ErrorCode::Invalid,
                        format!("/{field}"),
                        format!("{field} is required on {direction:?} frames"),
                    ));
                }
            }
        }
        Ok((kind, direction))
    }
}

/// A frame that passed every check: its routing header, and the whole frame as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub id: Uuid,
    pub message_type: MessageType,
    pub direction: Direction,
    pub cluster_id: Option<Id>,
    pub org_id: Option<Id>,
    pub correlation_id: Option<Uuid>,
    /// The trace context the sender put in (checked against the schema's pattern).
    pub traceparent: Option<String>,
    value: Value,
}

impl Checked {
    /// A string field of the payload, read without decoding the frame (e.g. the
    /// `subscription_id` the hub routes log frames by).
    pub fn payload_str(&self, field: &str) -> Option<&str> {
        self.value.get("payload")?.get(field)?.as_str()
    }

    /// The typed envelope.
    pub fn into_envelope(self) -> Result<Envelope, FrameError> {
        let frame_id = Some(self.id);
        // The schemas are stricter than the types, so this only fails if they disagree: a bug.
        // serde's message may quote the value, so it is not passed on.
        serde_json::from_value(self.value).map_err(|_| FrameError {
            frame_id,
            ..FrameError::new(
                ErrorCode::Invalid,
                "",
                "frame does not match the typed contract",
            )
        })
    }
}

fn header_uuid(value: &Value, field: &str) -> Option<Uuid> {
    value
        .get(field)
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
}

fn header_id(value: &Value, field: &str) -> Option<Id> {
    value.get(field).and_then(Value::as_str).map(Id::new)
}

/// The JSON pointer of the first value nested deeper than `max` levels, if any.
fn too_deep(value: &Value, max: usize) -> Option<String> {
    fn walk(value: &Value, depth: usize, max: usize, path: &mut Vec<String>) -> bool {
        let children: Box<dyn Iterator<Item = (String, &Value)>> = match value {
            Value::Array(items) => {
                Box::new(items.iter().enumerate().map(|(i, v)| (i.to_string(), v)))
            }
            Value::Object(map) => Box::new(map.iter().map(|(k, v)| (k.clone(), v))),
            _ => return false,
        };
        if depth > max {
            return true;
        }
        for (key, child) in children {
            path.push(key);
            if walk(child, depth + 1, max, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = Vec::new();
    walk(value, 1, max, &mut path).then(|| {
        path.iter()
            .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
            .collect()
    })
}

/// A schema violation as a frame error, described without quoting the value.
fn schema_error(prefix: &str, error: &jsonschema::ValidationError<'_>) -> FrameError {
    let (path, reason) = match chosen_branch_error(error) {
        Some(inner) => (inner.instance_path().to_string(), describe(inner)),
        None => (error.instance_path().to_string(), describe(error)),
    };
    FrameError::new(ErrorCode::Invalid, format!("{prefix}{path}"), reason)
}

/// For a `oneOf`/`anyOf` failure (tagged enums), the first error of the one branch whose shape
/// the value has, found recursively: "replicas is too large" says more than "matches none of
/// the shapes". The value has a tagged branch's shape when the tag matched (no `const` error);
/// it has an untagged branch's shape when no error sits at the value itself.
fn chosen_branch_error<'e>(
    error: &'e jsonschema::ValidationError<'_>,
) -> Option<&'e jsonschema::ValidationError<'static>> {
    let (ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context }) =
        error.kind()
    else {
        return None;
    };
    let own_path = error.instance_path().to_string();
    let tag_matches = |branch: &&Vec<jsonschema::ValidationError<'static>>| {
        branch
            .iter()
            .all(|e| !matches!(e.kind(), ValidationErrorKind::Constant { .. }))
    };
    let shape_matches = |branch: &&Vec<jsonschema::ValidationError<'static>>| {
        branch
            .iter()
            .all(|e| e.instance_path().to_string() != own_path)
    };
    let branch = only(context.iter().filter(tag_matches))
        .or_else(|| only(context.iter().filter(tag_matches).filter(shape_matches)))?;
    let first = branch.first()?;
    Some(chosen_branch_error(first).unwrap_or(first))
}

/// The single item of an iterator, or `None` when it has zero or several.
fn only<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    let first = items.next()?;
    items.next().is_none().then_some(first)
}

fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("unknown field(s): {}", unexpected.join(", "))
        }
        ValidationErrorKind::Required { property } => {
            format!(
                "missing required field {}",
                property.as_str().unwrap_or("?")
            )
        }
        ValidationErrorKind::Type { kind } => format!("wrong type, expected {kind:?}"),
        ValidationErrorKind::Enum { options } => format!("must be one of {options}"),
        ValidationErrorKind::Constant { expected_value } => format!("must be {expected_value}"),
        ValidationErrorKind::MaxLength { limit } => format!("longer than {limit} characters"),
        ValidationErrorKind::MinLength { limit } => format!("shorter than {limit} characters"),
        ValidationErrorKind::MaxItems { limit } => format!("more than {limit} items"),
        ValidationErrorKind::MinItems { limit } => format!("fewer than {limit} items"),
        ValidationErrorKind::MaxProperties { limit } => format!("more than {limit} entries"),
        ValidationErrorKind::MinProperties { limit } => format!("fewer than {limit} entries"),
        ValidationErrorKind::Maximum { limit } => format!("greater than {limit}"),
        ValidationErrorKind::Minimum { limit } => format!("less than {limit}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("not less than {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("not greater than {limit}"),
        ValidationErrorKind::Pattern { pattern } => crate::patterns::rule_of(pattern)
            .map_or_else(|| format!("does not match {pattern}"), str::to_owned),
        ValidationErrorKind::Format { format } => format!("not a valid {format}"),
        ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::AnyOf { .. } => {
            "matches none of the allowed shapes".into()
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => {
            "matches more than one allowed shape".into()
        }
        _ => format!("violates the schema at {}", error.schema_path()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn depth_is_measured_from_the_envelope() {
        let shallow = json!({"a": {"b": [1]}});
        assert_eq!(too_deep(&shallow, 3), None);
        assert_eq!(too_deep(&shallow, 2).as_deref(), Some("/a/b"));
        assert_eq!(
            too_deep(&json!({"a/b": {"c": {}}}), 2).as_deref(),
            Some("/a~1b/c")
        );
    }
}
