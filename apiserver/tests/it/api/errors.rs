//! One error shape for every refusal, the OpenAPI document, and a property-based run against it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_one_shape_and_the_openapi_document_is_served() {
    let admin = Client::admin().await;
    let response = admin
        .http
        .get(format!("{}/api/v1/nothing-here", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    // RFC 9457: type, title, status, detail, instance (the request id), and our extensions.
    assert_eq!(
        body,
        json!({
            "type": "tag:kubenest.io,2026:problem:not_found",
            "title": "Not found",
            "status": 404,
            "detail": "route not found",
            "instance": request_id,
            "code": "not_found",
        })
    );
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/apps", plane().urls[0]))
        .bearer_auth(admin.token.clone().unwrap())
        .header("content-type", "application/json")
        .body(vec![b'x'; kubenest_apiserver::MAX_BODY_BYTES + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert!(response.headers().contains_key("x-request-id"));
    let (status, document) = admin.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(
        document,
        serde_json::to_value(kubenest_apiserver::openapi()).unwrap()
    );
    assert!(document["paths"]["/api/v1/apps/{id}/rollback"]["post"].is_object());

    // The reference page beside it: Swagger UI over that document, its inline scripts allowed
    // by hash and nothing else inline.
    let response = reqwest::Client::new()
        .get(format!("{}/api/v1/reference", plane().urls[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let policy = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("script-src 'sha256-"), "{policy}");
    assert!(
        !policy.contains("script-src 'self' 'unsafe-inline'"),
        "{policy}"
    );
    let page = response.text().await.unwrap();
    assert!(page.contains("SwaggerUIBundle") && page.contains("/api/v1/openapi.json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_property_based_run_against_the_openapi_document_finds_no_server_error() {
    // Something to find: an organization with a cluster, a project and an app. The run acts as
    // that organization's admin, not a platform administrator, so that what it changes (it sets
    // passwords and deletes members, as it should try to) stays inside its organization and
    // does not disturb the tests running beside it.
    let admin = Client::admin().await;
    let fuzzer = user(&admin, "fuzzer").await;
    let org = org(&admin, "fuzz", json!([{"user": fuzzer, "role": "admin"}])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(project["id"].as_str().unwrap(), "fuzzed", "f:1")),
            202,
        )
        .await;
    let base = &plane().urls[1];
    let fuzzer = Client::login(1, &fuzzer, PASSWORD).await;
    let token = fuzzer.token.clone().unwrap();
    let session_alive = async || {
        reqwest::Client::new()
            .get(format!("{base}/api/v1/me"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status()
            == 200
    };
    // Everything but the fuzzer's own password: setting it (as it may, and does once it has
    // read its name from /me) ends the session, and every later request would be a 401 that
    // exercises nothing. The session must outlive that run; the password goes last, alone.
    let password = "/api/v1/users/{username}/password";
    let everything = schemathesis_run(base, &token, &["--exclude-path", password]).await;
    assert!(
        session_alive().await,
        "the fuzzer's session ended during the run: its requests were not authenticated"
    );
    schemathesis_run(base, &token, &["--include-path", password]).await;
    // The run really exercised the API.
    assert!(everything.contains("passed"), "{everything}");
}

/// Every refusal is in the API's error shape, also those made before a handler runs: a query
/// value of the wrong type, an unknown query parameter, a method the path does not take, a
/// path that is no route, a body that is not JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_before_a_handler_is_in_the_error_shape_naming_the_parameter() {
    let admin = Client::admin().await;
    let token = admin.token.clone().unwrap();
    let send = async |method: Method, path: &str, body: Option<&str>| {
        let mut request = admin
            .http
            .request(method, format!("{}{path}", admin.base))
            .bearer_auth(&token);
        if let Some(body) = body {
            request = request
                .header("content-type", "text/plain")
                .body(body.to_owned());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let allow = response
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        (status, body, allow)
    };
    for (query, parameter) in [
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("colour=red", "colour"),
    ] {
        let (status, body, _) = send(Method::GET, &format!("/api/v1/apps?{query}"), None).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["code"], "bad_request", "{body}");
        assert_eq!(body["field"], parameter, "{query}: {body}");
    }
    // An operation that reads no query string refuses a parameter too, by the document's list.
    let (status, body, _) = send(Method::GET, "/api/v1/orgs?colour=red", None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "colour", "{body}");
    // A value of the right type that is out of range is the handler's to refuse, as before.
    let (status, body, _) = send(Method::GET, "/api/v1/apps?limit=0", None).await;
    assert_eq!((status, body["field"].as_str()), (422, Some("limit")));

    let (status, body, allow) = send(Method::DELETE, "/api/v1/orgs", None).await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(body["code"], "method_not_allowed", "{body}");
    let allow = allow.unwrap_or_default();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");

    let (status, body, _) = send(Method::GET, "/api/v1/no-such-thing", None).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));

    let (status, body, _) = send(Method::POST, "/api/v1/orgs", Some("name=x")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "bad_request", "{body}");

    // serde would build a body of optional fields from an array of them in order; the API
    // takes objects only.
    for body in ["[null, null]", " [\"x\"]", "null"] {
        let response = admin
            .http
            .post(format!("{}/api/v1/orgs", admin.base))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["detail"], "the body must be a JSON object");
    }
}
