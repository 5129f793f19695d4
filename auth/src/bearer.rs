//! Reading `Authorization: Bearer <token>` (RFC 6750 §2.1).

/// The token of an `Authorization` header value using the Bearer scheme, or
/// `None` for any other scheme or an empty token. The scheme name is
/// case-insensitive (RFC 7235 §2.1); the token is taken as sent.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim_matches(' ');
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn only_the_bearer_scheme_with_a_token() {
        assert_eq!(bearer_token("Bearer abc.def.ghi"), Some("abc.def.ghi"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("abc.def.ghi"), None);
    }
}
