//! The REST API as the tests call it: a bearer token and JSON both ways.

use reqwest::Method;
use serde_json::Value;

pub struct Rest {
    pub base: String,
    pub http: reqwest::Client,
    pub token: String,
}

impl Rest {
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let (status, value) = self.call(method.clone(), path, body).await;
        assert_eq!(status, want, "{method} {path}: {value}");
        value
    }

    pub async fn get(&self, path: &str) -> Value {
        self.expect(Method::GET, path, None, 200).await
    }
}
