//! Logging in and out, refreshing, and the users platform administrators manage.

pub use kubenest_api::users::{
    LoginBody, NewUserBody, PasswordBody, TokenResponse, UserPath, UserView,
};

use crate::reply::Created;
use axum::response::NoContent;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kubenest_store::User;

use crate::auth::accounts::{REFRESH_TTL, Refresh};
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, ClientAddress};
use crate::state::AppState;

/// The refresh token's cookie.
pub const REFRESH_COOKIE: &str = "kubenest_refresh";

fn cookie(state: &AppState, value: &str, max_age: i64) -> HeaderValue {
    let secure = if state.settings().secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let text = format!(
        "{REFRESH_COOKIE}={value}; HttpOnly{secure}; SameSite=Strict; Path=/api/v1; Max-Age={max_age}"
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn refresh_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == REFRESH_COOKIE)
        .map(|(_, value)| value.to_owned())
}

fn issued(state: &AppState, user: &User, refresh: &str) -> ApiResult<Response> {
    let (access_token, expires_at) = state
        .tokens()
        .issue(user.into())
        .map_err(ApiError::internal)?;
    let body = TokenResponse {
        access_token,
        token_type: "Bearer".into(),
        expires_in: expires_at - chrono::Utc::now().timestamp(),
        username: user.username.clone(),
        user_id: user.id.to_string(),
    };
    let mut response = Json(body).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        cookie(state, refresh, REFRESH_TTL.num_seconds()),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// Logs in with a username and password. Attempts and failures count per client address
/// (behind trusted proxies, the address they report), and per user at that address: failing
/// from one address never locks the user out at another.
pub async fn login(
    State(state): State<AppState>,
    ClientAddress(client): ClientAddress,
    Body(body): Body<LoginBody>,
) -> ApiResult<Response> {
    let address = crate::limits::login_key(client);
    state.limits().check_login(address)?;
    // No such user can exist; nothing to look up or count against a user.
    if !is_username(&body.username) || body.password.contains('\0') {
        return Err(ApiError::unauthenticated("invalid username or password"));
    }
    let accounts = state.accounts();
    if let Some(wait) = accounts
        .login_blocked(&body.username, &address.to_string())
        .await?
    {
        return Err(ApiError::too_many(
            "too many failed logins from this address; try again later",
            wait,
        ));
    }
    let Some(user) = accounts
        .check_login(&body.username, &body.password, &address.to_string())
        .await?
    else {
        return Err(ApiError::unauthenticated("invalid username or password"));
    };
    // Told only to whoever knows the password.
    if user.disabled_at.is_some() {
        return Err(ApiError::unauthenticated(
            "this account is disabled; ask a platform administrator",
        ));
    }
    let refresh = accounts.start_family(&user.username).await?;
    issued(&state, &user, &refresh)
}

/// Exchanges the refresh cookie for a new access token and a new refresh cookie. Using a
/// refresh token twice revokes every token of its login.
pub async fn refresh(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let token = refresh_cookie(&headers)
        .ok_or_else(|| ApiError::unauthenticated("no refresh cookie; log in"))?;
    match state.accounts().refresh(&token).await? {
        Refresh::Rotated { user, token } => issued(&state, &user, &token),
        Refresh::Invalid => Err(ApiError::unauthenticated(
            "the refresh token is unknown, expired or revoked; log in",
        )),
        Refresh::Reused => Err(ApiError::unauthenticated(
            "this refresh token was already used: every session of this login is revoked; log in",
        )),
    }
}

/// Ends the login: its refresh tokens stop working and the cookie is cleared.
pub async fn logout(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    if let Some(token) = refresh_cookie(&headers) {
        state.accounts().revoke_family_of(&token).await?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie(&state, "", 0));
    Ok(response)
}

/// A user as the API answers it (never the password hash).
pub fn user_view(user: User) -> UserView {
    UserView {
        username: user.username,
        id: user.id.to_string(),
        platform_admin: user.platform_admin,
        disabled: user.disabled_at.is_some(),
        created_at: user.created_at.to_rfc3339(),
    }
}

/// The caller.
pub async fn me(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<UserView>> {
    let user = state
        .accounts()
        .user(&caller.user)
        .await?
        .ok_or_else(|| ApiError::unauthenticated("this user no longer exists"))?;
    Ok(Json(user_view(user)))
}

fn require_platform_admin(caller: &Caller) -> ApiResult<()> {
    if caller.platform_admin {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "only platform administrators manage users",
        ))
    }
}

/// Whether `name` can be a user name (the same rule the database enforces).
pub fn is_username(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._@".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn check_username(name: &str) -> ApiResult<()> {
    if is_username(name) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "username",
            "lowercase letters, digits and -._@, starting and ending with a letter or digit",
        ))
    }
}

fn check_password(password: &str) -> ApiResult<()> {
    if password.contains('\0') {
        return Err(ApiError::invalid(
            "password",
            "a password holds no NUL characters",
        ));
    }
    if password.chars().count() < 12 || password.len() > 1024 {
        return Err(ApiError::invalid(
            "password",
            "a password has 12 to 1024 characters",
        ));
    }
    Ok(())
}

/// Creates a user (platform administrators only).
pub async fn create_user(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewUserBody>,
) -> ApiResult<Created<Json<UserView>>> {
    require_platform_admin(&caller)?;
    check_username(&body.username)?;
    check_password(&body.password)?;
    let user = state
        .accounts()
        .create_user(&body.username, &body.password, body.platform_admin)
        .await
        .map_err(|e| match ApiError::from(e) {
            conflict if conflict.status == StatusCode::CONFLICT => {
                ApiError::conflict("exists", format!("user {:?} exists", body.username))
            }
            other => other,
        })?;
    Ok(Created(Json(user_view(user))))
}

/// Every user (platform administrators only).
pub async fn list_users(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<Vec<UserView>>> {
    require_platform_admin(&caller)?;
    let users = state.accounts().users().await?;
    Ok(Json(users.into_iter().map(user_view).collect()))
}

/// Sets a password: your own, or anyone's as a platform administrator. Ends every session of
/// the user and refuses every access token issued before, this caller's included: log in again.
pub async fn set_password(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<UserPath>,
    Body(body): Body<PasswordBody>,
) -> ApiResult<NoContent> {
    if path.username != caller.user {
        require_platform_admin(&caller)?;
    }
    if !is_username(&path.username) {
        return Err(ApiError::not_found("user"));
    }
    check_password(&body.password)?;
    if state
        .accounts()
        .set_password(&path.username, &body.password)
        .await?
    {
        Ok(NoContent)
    } else {
        Err(ApiError::not_found("user"))
    }
}
