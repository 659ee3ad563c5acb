//! Logins, refresh tokens and the tokens the API refuses, across both replicas.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_refresh_rotation_reuse_and_logout_across_both_replicas() {
    let [a, b] = plane().urls.clone();
    let http = reqwest::Client::new();
    let login = http
        .post(format!("{a}/api/v1/login"))
        .json(&json!({"username": common::ADMIN, "password": common::ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let set_cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"));
    assert!(set_cookie.contains("Max-Age=604800"), "{set_cookie}");
    let first = refresh_cookie(&login).unwrap();
    let body: Value = login.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert!(body["expires_in"].as_i64().unwrap() > 1700);

    // Rotation on the other replica: a new cookie and a working access token.
    let rotated = refresh(&b, &first).await;
    assert_eq!(rotated.status(), 200);
    let second = refresh_cookie(&rotated).unwrap();
    assert_ne!(first, second);
    let token: Value = rotated.json().await.unwrap();
    let me = http
        .get(format!("{a}/api/v1/me"))
        .bearer_auth(token["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);

    // Reusing the first token revokes the family: the second stops working too.
    let reused = refresh(&a, &first).await;
    assert_eq!(reused.status(), 401);
    let body: Value = reused.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("already used"));
    assert_eq!(refresh(&b, &second).await.status(), 401);

    // Logout ends a fresh login's family.
    let again = http
        .post(format!("{b}/api/v1/login"))
        .json(&json!({"username": common::ADMIN, "password": common::ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    let cookie = refresh_cookie(&again).unwrap();
    let out = http
        .post(format!("{a}/api/v1/logout"))
        .header("cookie", format!("kubenest_refresh={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_eq!(refresh(&a, &cookie).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_limited_per_user_and_address_on_every_replica() {
    let admin = Client::admin().await;
    let name = user(&admin, "guess").await;
    let [a, b] = plane().urls.clone();
    for i in 0..5 {
        let base = if i % 2 == 0 { &a } else { &b };
        let (status, body) = Client::anonymous(base)
            .post(
                "/api/v1/login",
                json!({"username": name, "password": "wrong password!"}),
            )
            .await;
        assert_eq!(status, 401, "{body}");
    }
    // Even the right password waits now at this address, on either replica.
    let (status, body) = Client::anonymous(&b)
        .post(
            "/api/v1/login",
            json!({"username": name, "password": PASSWORD}),
        )
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["code"], "rate_limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_are_expired_unsigned_foreign_or_for_another_audience_are_refused() {
    let plane = plane();
    let now = chrono::Utc::now().timestamp();
    // The admin's user id and token epoch, from a real token (every request checks both).
    let real = Client::admin().await.token.unwrap();
    let real: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(real.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    let claims = |aud: &str, exp: i64| {
        json!({"sub": "admin", "iss": "kubenest", "aud": aud, "iat": now - 10, "exp": exp,
               "jti": "x", "adm": true, "uid": real["uid"], "epo": real["epo"]})
    };
    let good = forge(
        claims("kubenest-api", now + 600),
        &plane.api_key_pem,
        jsonwebtoken::Algorithm::EdDSA,
    );
    let other_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .unwrap()
        .serialize_pem();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims("kubenest-api", now + 600).to_string());
    let cases = [
        (
            "expired",
            forge(
                claims("kubenest-api", now - 120),
                &plane.api_key_pem,
                jsonwebtoken::Algorithm::EdDSA,
            ),
        ),
        ("alg none", format!("{header}.{payload}.")),
        (
            "wrong key",
            forge(
                claims("kubenest-api", now + 600),
                &other_key,
                jsonwebtoken::Algorithm::EdDSA,
            ),
        ),
        (
            "wrong audience",
            forge(
                claims("kubenest-hub", now + 600),
                &plane.api_key_pem,
                jsonwebtoken::Algorithm::EdDSA,
            ),
        ),
        ("garbage", "not.a.token".to_owned()),
    ];
    let mut client = Client::anonymous(&plane.urls[1]);
    client.token = Some(good);
    assert_eq!(client.get("/api/v1/orgs").await.0, 200);
    for (what, token) in cases {
        client.token = Some(token);
        let (status, body) = client.get("/api/v1/orgs").await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["code"], "unauthenticated", "{what}");
    }
    client.token = None;
    assert_eq!(client.get("/api/v1/orgs").await.0, 401);
}
