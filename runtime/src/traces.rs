//! Traces: the programs' `tracing` spans as OpenTelemetry spans, exported as OTLP over
//! HTTP/protobuf when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! is set, and nothing otherwise. `OTEL_SERVICE_NAME` overrides the program's name; the batch
//! settings (`OTEL_BSP_*`) are OpenTelemetry's own.
//!
//! One App's journey is one trace because the W3C `traceparent` is carried across each hop:
//! the REST request's header into the API server, an annotation on the App
//! (`kubenest.io/traceparent`) into the controllers' reconcile, and the hub envelope's
//! `traceparent` into the hub's route and the agent's apply. [`traceparent`] writes a span's
//! context in that form and [`continue_from`] makes a span its child.

use std::collections::HashMap;

use bytes::Bytes;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The W3C header, and the key the propagator reads and writes.
pub const TRACEPARENT: &str = "traceparent";

/// The annotation the API server puts the request's trace context in, on what it writes.
pub const ANNOTATION: &str = "kubenest.io/traceparent";

/// The OTLP endpoint settings; the signal-specific one wins, as OpenTelemetry's SDKs read them.
fn endpoint_set() -> bool {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty()))
}

/// Sends the exporter's requests with the programs' own HTTP client, on their tokio runtime.
/// The SDK's batch processor exports from a thread of its own with no runtime; the request is
/// spawned onto the runtime that was current when tracing started, and the thread awaits it.
/// (The exporter's bundled clients are a blocking reqwest of another major version, or hyper
/// without TLS.)
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request.map(reqwest::Body::from))?;
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let status = response.status();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        });
        let (status, body) = sent.await??;
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        Ok(response)
    }
}

/// The tracer provider to export with, and the layer that feeds it `tracing`'s spans; `None`
/// when no endpoint is set or no tokio runtime is current.
pub fn layer<S>(
    service: &str,
) -> Option<(
    SdkTracerProvider,
    tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>,
)>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    if !endpoint_set() {
        return None;
    }
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let client = OnRuntime {
        client: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .ok()?,
        runtime,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_http_client(client)
        .build()
        .ok()?;
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service.to_owned());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service.clone())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer(service);
    Some((provider, tracing_opentelemetry::layer().with_tracer(tracer)))
}

/// `span`'s context as a W3C `traceparent`, when it is being traced.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// The current span's context as a W3C `traceparent`.
pub fn current_traceparent() -> Option<String> {
    traceparent(&tracing::Span::current())
}

/// Makes `span` a child of the span `traceparent` names (a malformed one is ignored).
pub fn continue_from(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    let parent = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(parent);
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[test]
    fn a_span_continues_the_trace_its_traceparent_names() {
        let provider = SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            let span = tracing::info_span!("apply");
            continue_from(&span, incoming);
            let carried = traceparent(&span).unwrap();
            // The same trace, a span of its own.
            assert!(
                carried.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
                "{carried}"
            );
            assert!(!carried.contains("00f067aa0ba902b7"), "{carried}");
            // Garbage is no parent: the span starts a trace of its own.
            let other = tracing::info_span!("other");
            continue_from(&other, "not a traceparent");
            assert!(!traceparent(&other).unwrap().contains("4bf92f3577b34da6"));
        });
    }
}
