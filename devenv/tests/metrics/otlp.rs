//! An OTLP/HTTP trace receiver in the test process: what the programs export
//! (`POST /v1/traces`, protobuf), kept as (service, trace id, span name) for the test to read.
//! The decoding is opentelemetry-proto's; the server is axum.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;

/// One exported span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub service: String,
    pub trace_id: String,
    pub name: String,
}

/// The receiver: its endpoint and what it got.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(export))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(axum::serve(listener, app).into_future());
        Self { endpoint, spans }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }
}

async fn export(State(spans): State<Arc<Mutex<Vec<Received>>>>, body: Bytes) -> Vec<u8> {
    let request = ExportTraceServiceRequest::decode(body).unwrap();
    let mut received = Vec::new();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .and_then(|a| a.value.as_ref()?.value.as_ref())
            .map(|v| match v {
                AnyValue::StringValue(s) => s.clone(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                received.push(Received {
                    service: service.clone(),
                    trace_id: span.trace_id.iter().map(|b| format!("{b:02x}")).collect(),
                    name: span.name,
                });
            }
        }
    }
    spans.lock().unwrap().extend(received);
    // An empty ExportTraceServiceResponse.
    Vec::new()
}
