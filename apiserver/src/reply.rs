//! Successful answers whose status is part of their type, so that the OpenAPI document shows it:
//! `Created(Json(app))` is a 201 with the App's schema, where `(StatusCode::CREATED, Json(app))`
//! would be a 201 that the document does not know (aide cannot see a status chosen at run time).
//! A handler cannot answer a success its document does not list. (A 204 is axum's own
//! `NoContent`, which aide documents already.)

use aide::OperationOutput;
use aide::generate::GenContext;
use aide::openapi::{Operation, Response, StatusCode as DocStatus};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response as HttpResponse};

/// The documented responses of `T` under `status`.
fn documented<T: OperationOutput>(
    ctx: &mut GenContext,
    operation: &mut Operation,
    status: u16,
) -> Vec<(Option<DocStatus>, Response)> {
    T::operation_response(ctx, operation)
        .map(|response| vec![(Some(DocStatus::Code(status)), response)])
        .unwrap_or_default()
}

macro_rules! status_reply {
    ($(#[$doc:meta])* $name:ident, $status:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<T>(pub T);

        impl<T: IntoResponse> IntoResponse for $name<T> {
            fn into_response(self) -> HttpResponse {
                ($status, self.0).into_response()
            }
        }

        impl<T: OperationOutput> OperationOutput for $name<T> {
            type Inner = T::Inner;

            fn operation_response(
                ctx: &mut GenContext,
                operation: &mut Operation,
            ) -> Option<Response> {
                T::operation_response(ctx, operation)
            }

            fn inferred_responses(
                ctx: &mut GenContext,
                operation: &mut Operation,
            ) -> Vec<(Option<DocStatus>, Response)> {
                documented::<T>(ctx, operation, $status.as_u16())
            }
        }
    };
}

status_reply!(
    /// 201: the object was made; the body is the object.
    Created,
    StatusCode::CREATED
);
status_reply!(
    /// 202: the change is recorded and on its way to the cluster; the body says where it is.
    Accepted,
    StatusCode::ACCEPTED
);

/// The answer of a removal: 200 when the object is gone at once (a forced removal, or nothing
/// left on a cluster), 202 while the cluster removes what it holds.
#[derive(Debug)]
pub enum Removal<T> {
    Gone(T),
    Started(T),
}

impl<T: IntoResponse> IntoResponse for Removal<T> {
    fn into_response(self) -> HttpResponse {
        match self {
            Self::Gone(body) => (StatusCode::OK, body).into_response(),
            Self::Started(body) => (StatusCode::ACCEPTED, body).into_response(),
        }
    }
}

impl<T: OperationOutput> OperationOutput for Removal<T> {
    type Inner = T::Inner;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        T::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<DocStatus>, Response)> {
        let mut responses = documented::<T>(ctx, operation, 200);
        responses.extend(documented::<T>(ctx, operation, 202));
        responses
    }
}
