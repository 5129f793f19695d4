//! Who is calling: a user (HS256 JWT), the admin (admin token) or nobody.
//!
//! Every route that acts for a user takes the user id from a verified token
//! and from nothing else; `X-User-Id` counts only when the development
//! setting `auth.insecure_dev_user_header` is on. Refusals are `401` when
//! the caller is not known (no credentials, or credentials that do not check
//! out) and `403` when a known caller may not do this.

use std::sync::Arc;

use seckill_auth::{bearer_token, unix_now, AdminToken, JwtKey, JwtRules};
use seckill_core::metrics::RefusalReason;
use seckill_core::UserId;
use seckill_web::ApiError;
use warp::http::StatusCode;
use warp::{Filter, Rejection};

use super::Access;
use crate::config::AuthConfig;

/// Who acts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Presented the admin token.
    Admin,
    /// Presented a valid token for this user (or, in development, named it).
    User(UserId),
}

/// Checks credentials against the configured secrets.
#[derive(Debug)]
pub(crate) struct Authenticator {
    /// `None` only when the configuration has no admin token, which
    /// validation refuses outside unit tests of this module.
    admin: Option<AdminToken>,
    users: Option<(JwtKey, JwtRules)>,
    trust_user_header: bool,
}

impl Authenticator {
    pub(crate) fn new(config: &AuthConfig) -> Self {
        let rules = JwtRules {
            leeway_seconds: config.jwt_leeway_seconds,
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
        };
        Self {
            admin: config.admin_token.as_ref().map(AdminToken::new),
            users: config.jwt_secret.as_ref().map(|secret| (JwtKey::new(secret), rules)),
            trust_user_header: config.insecure_dev_user_header,
        }
    }

    /// The caller presenting `authorization` (the header's value) and, in
    /// development, `user_header` (`X-User-Id`).
    pub(crate) fn caller(&self, authorization: Option<&str>, user_header: Option<&str>) -> Result<Caller, ApiError> {
        let Some(authorization) = authorization else {
            return match user_header {
                Some(raw) if self.trust_user_header => {
                    UserId::parse(raw).map(Caller::User).map_err(|e| ApiError::invalid(format!("X-User-Id: {e}")))
                }
                Some(_) => Err(ApiError::unauthorized(
                    "X-User-Id is not accepted as an identity here; send Authorization: Bearer <token>",
                )),
                None => Err(ApiError::unauthorized("Authorization: Bearer <token> is required")),
            };
        };
        let token = bearer_token(authorization)
            .ok_or_else(|| ApiError::unauthorized("the Authorization header must be `Bearer <token>`"))?;
        // Admin tokens contain no dot (the config refuses them) and every
        // JWT has two: a user's token skips the admin comparison, which
        // costs a SHA-256 on every order request.
        if !token.contains('.') && self.is_admin(token) {
            return Ok(Caller::Admin);
        }
        let Some((key, rules)) = &self.users else {
            return Err(ApiError::unauthorized("this access accepts no user tokens (no auth.jwt_secret is set)"));
        };
        key.verify(token, rules, unix_now()).map(Caller::User).map_err(|e| ApiError::unauthorized(e.to_string()))
    }

    /// Passes the admin token only: `401` without a bearer token, `403`
    /// with any other token (a valid user token included).
    pub(crate) fn admin(&self, authorization: Option<&str>) -> Result<(), ApiError> {
        let token = authorization
            .and_then(bearer_token)
            .ok_or_else(|| ApiError::unauthorized("admin routes need Authorization: Bearer <admin token>"))?;
        if self.is_admin(token) {
            Ok(())
        } else {
            Err(ApiError::forbidden("this route needs the admin token"))
        }
    }

    fn is_admin(&self, token: &str) -> bool {
        self.admin.as_ref().is_some_and(|admin| admin.matches(token))
    }
}

/// Counts a refusal by its status and passes it on.
fn counted(access: &Access, error: ApiError) -> Rejection {
    let reason =
        if error.status == StatusCode::FORBIDDEN { RefusalReason::Forbidden } else { RefusalReason::Unauthorized };
    access.metrics.refused.with_label_values(&[reason.as_str()]).inc();
    Rejection::from(error)
}

/// The caller, whoever it is.
pub(crate) fn caller(access: Arc<Access>) -> impl Filter<Extract = (Caller,), Error = Rejection> + Clone {
    warp::header::optional::<String>("authorization").and(warp::header::optional::<String>("x-user-id")).and_then(
        move |authorization: Option<String>, user: Option<String>| {
            let access = Arc::clone(&access);
            async move {
                access.auth.caller(authorization.as_deref(), user.as_deref()).map_err(|e| counted(&access, e))
            }
        },
    )
}

/// The calling user: orders are placed by users, not by the admin token.
pub(crate) fn user(access: Arc<Access>) -> impl Filter<Extract = (UserId,), Error = Rejection> + Clone {
    let refusing = Arc::clone(&access);
    caller(access).and_then(move |caller: Caller| {
        let access = Arc::clone(&refusing);
        async move {
            match caller {
                Caller::User(user) => Ok(user),
                Caller::Admin => Err(counted(
                    &access,
                    ApiError::forbidden("orders are placed by users: send a user's token, not the admin token"),
                )),
            }
        }
    })
}

/// Passes the admin only.
pub(crate) fn admin(access: Arc<Access>) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    warp::header::optional::<String>("authorization")
        .and_then(move |authorization: Option<String>| {
            let access = Arc::clone(&access);
            async move { access.auth.admin(authorization.as_deref()).map_err(|e| counted(&access, e)) }
        })
        .untuple_one()
}

#[cfg(test)]
mod tests {
    use seckill_auth::Claims;
    use seckill_core::config::Secret;

    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";
    const ADMIN: &str = "the admin token for tests";

    fn authenticator(trust_user_header: bool) -> Authenticator {
        Authenticator::new(&AuthConfig {
            jwt_secret: Some(Secret::new(SECRET)),
            admin_token: Some(Secret::new(ADMIN)),
            insecure_dev_user_header: trust_user_header,
            ..AuthConfig::default()
        })
    }

    fn token_for(user: &str) -> String {
        let user = UserId::parse(user).expect("valid");
        format!("Bearer {}", JwtKey::new(&Secret::new(SECRET)).issue(&Claims::for_user(&user, unix_now(), 60)))
    }

    fn status(result: Result<impl std::fmt::Debug, ApiError>) -> StatusCode {
        result.expect_err("refused").status
    }

    #[test]
    fn users_come_from_tokens_and_admins_from_the_admin_token() {
        let auth = authenticator(false);
        let alice = UserId::parse("alice").expect("valid");
        let caller = |authorization: &str, header| auth.caller(Some(authorization), header).expect("accepted");
        assert_eq!(caller(&token_for("alice"), None), Caller::User(alice.clone()));
        // A header naming someone else changes nothing.
        assert_eq!(caller(&token_for("alice"), Some("bob")), Caller::User(alice));
        assert_eq!(caller(&format!("Bearer {ADMIN}"), None), Caller::Admin);
    }

    #[test]
    fn the_user_header_counts_only_in_development() {
        assert_eq!(status(authenticator(false).caller(None, Some("alice"))), StatusCode::UNAUTHORIZED);
        let dev = authenticator(true);
        let alice = UserId::parse("alice").expect("valid");
        assert_eq!(dev.caller(None, Some("alice")).expect("trusted in development"), Caller::User(alice));
        assert_eq!(status(dev.caller(None, Some("not a user id"))), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn missing_and_bad_credentials_are_unauthorized() {
        let auth = authenticator(false);
        assert_eq!(status(auth.caller(None, None)), StatusCode::UNAUTHORIZED);
        assert_eq!(status(auth.caller(Some("Basic YWxpY2U6cHc="), None)), StatusCode::UNAUTHORIZED);
        assert_eq!(status(auth.caller(Some("Bearer a.b.c"), None)), StatusCode::UNAUTHORIZED);
        let error = auth.caller(None, None).expect_err("refused");
        assert!(error.headers.iter().any(|(name, _)| *name == "www-authenticate"));
    }

    #[test]
    fn admin_routes_take_the_admin_token_only() {
        let auth = authenticator(false);
        assert!(auth.admin(Some(&format!("Bearer {ADMIN}"))).is_ok());
        assert_eq!(status(auth.admin(None)), StatusCode::UNAUTHORIZED);
        assert_eq!(status(auth.admin(Some("Basic YWRtaW46cHc="))), StatusCode::UNAUTHORIZED);
        assert_eq!(status(auth.admin(Some("Bearer wrong"))), StatusCode::FORBIDDEN);
        assert_eq!(status(auth.admin(Some(&token_for("alice")))), StatusCode::FORBIDDEN);
    }
}
