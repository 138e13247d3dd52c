//! The requests to an authorization server's endpoints: dynamic client registration
//! (RFC 7591), the token endpoint (authorization code, refresh, client credentials) with
//! the client's authentication method, and revocation (RFC 7009). Plus the secrets mcpx
//! makes for a login: the PKCE verifier and challenge (S256) and the `state`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::discovery::AuthServer;
use crate::error::OAuthError;
use crate::http::Http;
use crate::store::{AuthMethod, Client};

/// `bytes` random bytes, base64url: state, PKCE verifier, flow ids.
pub fn random(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the system's random source works");
    URL_SAFE_NO_PAD.encode(buf)
}

/// The S256 challenge of a verifier (RFC 7636 §4.2).
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// What a token endpoint gave.
#[derive(Clone)]
pub struct Granted {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: Option<u64>,
    pub scope: Option<Vec<String>>,
}

/// A private key for `private_key_jwt` (RFC 7523), ES256.
#[derive(Clone)]
pub struct SigningKey {
    pub pem: String,
}

/// The token endpoint auth method for a client with (or without) a secret, from what the
/// server supports. Absent support list: RFC 8414's default, `client_secret_basic`.
pub fn auth_method_for(auth: &AuthServer, has_secret: bool, has_key: bool) -> AuthMethod {
    let supported =
        auth.token_endpoint_auth_methods_supported.clone().unwrap_or_else(|| vec!["client_secret_basic".into()]);
    let offers = |m: AuthMethod| supported.iter().any(|s| s == m.name());
    if has_key && offers(AuthMethod::PrivateKeyJwt) {
        return AuthMethod::PrivateKeyJwt;
    }
    if has_secret {
        for m in [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost] {
            if offers(m) {
                return m;
            }
        }
        return AuthMethod::ClientSecretBasic;
    }
    AuthMethod::None
}

/// Registers mcpx with the authorization server (RFC 7591) as a native app.
pub async fn register(
    http: &Http,
    auth: &AuthServer,
    endpoint: &str,
    redirect_uri: &str,
    client_name: &str,
) -> Result<Client, OAuthError> {
    let supported =
        auth.token_endpoint_auth_methods_supported.clone().unwrap_or_else(|| vec!["client_secret_basic".into()]);
    // A confidential registration when the server takes one; a public one otherwise.
    let wanted = ["client_secret_basic", "client_secret_post", "none"]
        .into_iter()
        .find(|m| supported.iter().any(|s| s == m))
        .unwrap_or("none");
    let body = json!({
        "client_name": client_name,
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted,
    });
    let posted = http.post_json(endpoint, &body).await?;
    if !(200..300).contains(&posted.status) {
        return Err(OAuthError::Registration(format!("HTTP {}: {}", posted.status, error_text(&posted.body))));
    }
    let client_id = posted
        .body
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or_else(|| OAuthError::Registration("the registration answer has no client_id".into()))?;
    let client_secret = posted.body.get("client_secret").and_then(Value::as_str).map(str::to_owned);
    let auth_method = posted
        .body
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .and_then(AuthMethod::from_name)
        .unwrap_or(if client_secret.is_some() {
            AuthMethod::from_name(wanted).unwrap_or(AuthMethod::ClientSecretBasic)
        } else {
            AuthMethod::None
        });
    let auth_method = match (auth_method, &client_secret) {
        (AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost, None) => AuthMethod::None,
        (m, _) => m,
    };
    Ok(Client {
        client_id: client_id.to_owned(),
        client_secret,
        auth_method,
        redirect_uris: vec![redirect_uri.to_owned()],
    })
}

/// One token endpoint request with the client's authentication.
pub async fn request(
    http: &Http,
    token_endpoint: &str,
    client: &Client,
    key: Option<&SigningKey>,
    issuer: &str,
    mut form: Vec<(&str, String)>,
) -> Result<Granted, OAuthError> {
    let mut basic = None;
    let assertion;
    match client.auth_method {
        AuthMethod::ClientSecretBasic => {
            basic = Some((client.client_id.as_str(), client.client_secret.as_deref().unwrap_or_default()));
        }
        AuthMethod::ClientSecretPost => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", client.client_secret.clone().unwrap_or_default()));
        }
        AuthMethod::PrivateKeyJwt => {
            let key = key.ok_or_else(|| OAuthError::Config("private_key_jwt needs oauth.privateKey".into()))?;
            assertion = client_assertion(&client.client_id, issuer, token_endpoint, key)?;
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into()));
            form.push(("client_assertion", assertion));
        }
        AuthMethod::None => form.push(("client_id", client.client_id.clone())),
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let posted = http.post_form(token_endpoint, &pairs, basic).await?;
    if !(200..300).contains(&posted.status) {
        return Err(OAuthError::Token(format!("HTTP {}: {}", posted.status, error_text(&posted.body))));
    }
    let body = posted.body;
    let access_token = body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| OAuthError::Token("the answer has no access_token".into()))?;
    let token_type = body.get("token_type").and_then(Value::as_str).unwrap_or("Bearer");
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(OAuthError::Token(format!("token_type {token_type:?} is not Bearer")));
    }
    Ok(Granted {
        access_token: access_token.to_owned(),
        refresh_token: body.get("refresh_token").and_then(Value::as_str).map(str::to_owned),
        expires_in: body.get("expires_in").and_then(Value::as_u64),
        scope: body
            .get("scope")
            .and_then(Value::as_str)
            .map(|s| s.split_ascii_whitespace().map(str::to_owned).collect()),
    })
}

/// Revokes a token (RFC 7009); failure is reported, the caller forgets the token anyway.
pub async fn revoke(http: &Http, endpoint: &str, client: &Client, token: &str, hint: &str) -> Result<(), OAuthError> {
    let mut form = vec![("token", token.to_owned()), ("token_type_hint", hint.to_owned())];
    let mut basic = None;
    match client.auth_method {
        AuthMethod::ClientSecretBasic => {
            basic = Some((client.client_id.as_str(), client.client_secret.as_deref().unwrap_or_default()))
        }
        AuthMethod::ClientSecretPost => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", client.client_secret.clone().unwrap_or_default()));
        }
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let posted = http.post_form(endpoint, &pairs, basic).await?;
    if (200..300).contains(&posted.status) {
        Ok(())
    } else {
        Err(OAuthError::Token(format!("revocation: HTTP {}: {}", posted.status, error_text(&posted.body))))
    }
}

/// `error: error_description` of an OAuth error body, bounded; never the whole body.
fn error_text(body: &Value) -> String {
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(|s| s.chars().take(200).collect::<String>());
    match (text("error"), text("error_description")) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e,
        _ => "no OAuth error in the answer".into(),
    }
}

/// A `private_key_jwt` client assertion (RFC 7523 §2.2), ES256, audience the issuer.
fn client_assertion(
    client_id: &str,
    issuer: &str,
    _token_endpoint: &str,
    key: &SigningKey,
) -> Result<String, OAuthError> {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let der =
        pem_body(&key.pem).ok_or_else(|| OAuthError::Config("oauth.privateKey is not a PEM private key".into()))?;
    let rng = ring::rand::SystemRandom::new();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|e| OAuthError::Config(format!("oauth.privateKey is not a PKCS#8 P-256 key: {e}")))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let header = json!({ "alg": "ES256", "typ": "JWT" });
    let claims = json!({
        "iss": client_id, "sub": client_id, "aud": issuer,
        "iat": now, "exp": now + 300, "jti": random(16),
    });
    let signing_input =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature = pair
        .sign(&rng, signing_input.as_bytes())
        .map_err(|_| OAuthError::Config("signing the client assertion failed".into()))?;
    Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
}

fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pkce_challenge_is_s256_of_the_verifier() {
        // Computed independently: base64url(sha256(verifier)), unpadded.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mJ92K1XxSZhTxS5n4MRKaXhFq4ycGM"),
            "zfiYdt9JkzVCSYkzJNEzsTGgN23nYwUMXzVirU83yHs"
        );
        assert_ne!(random(32), random(32));
        assert_eq!(random(32).len(), 43);
    }

    #[test]
    fn the_auth_method_follows_what_the_server_supports() {
        let with = |methods: Option<&[&str]>| AuthServer {
            token_endpoint_auth_methods_supported: methods.map(|m| m.iter().map(|s| s.to_string()).collect()),
            ..AuthServer::default()
        };
        assert_eq!(auth_method_for(&with(None), true, false), AuthMethod::ClientSecretBasic);
        assert_eq!(auth_method_for(&with(Some(&["client_secret_post"])), true, false), AuthMethod::ClientSecretPost);
        assert_eq!(auth_method_for(&with(Some(&["client_secret_basic"])), false, false), AuthMethod::None);
        assert_eq!(auth_method_for(&with(Some(&["private_key_jwt"])), false, true), AuthMethod::PrivateKeyJwt);
    }
}
