//! Finding who authorizes an MCP server, in the order the spec gives:
//!
//! 1. Protected resource metadata (RFC 9728): the URL a 401's `resource_metadata` names,
//!    else `/.well-known/oauth-protected-resource/<path>` then the root one. Its
//!    `resource` must name this server (a server cannot send mcpx's tokens for another
//!    resource's audience), and is sent back exactly as published.
//! 2. Authorization server metadata for its first `authorization_servers` entry: for an
//!    issuer with a path, RFC 8414 path insertion, OpenID path insertion, then OpenID path
//!    appending; for one without, RFC 8414 then OpenID. The document's `issuer` must be
//!    the issuer it was looked up for, character for character.
//!    Both documents are read over https (or from loopback, or from the server's own
//!    origin): one read in the clear could be swapped for another authorization server's.
//! 3. 2025-03-26 servers publish no resource metadata: the authorization server is the
//!    server's origin, its metadata at the root there, and without metadata the default
//!    endpoints `/authorize`, `/token` and `/register` at the origin.

use serde_json::Value;
use url::Url;

use crate::challenge::Challenge;
use crate::error::OAuthError;
use crate::http::{Http, secure_enough};

/// What the resource server publishes about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtectedResource {
    pub resource: String,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
}

/// What mcpx uses of an authorization server's metadata.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    pub scopes_supported: Option<Vec<String>>,
    /// `None`: the field is absent.
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
    pub authorization_response_iss_parameter_supported: bool,
    /// False for the 2025-03-26 default endpoints, taken without any metadata.
    pub from_metadata: bool,
}

/// Everything a login or a token request needs to know about where to go.
#[derive(Clone, Debug, PartialEq)]
pub struct Discovered {
    /// The `resource` parameter: the metadata's `resource` exactly, or (2025-03-26, no
    /// resource metadata) the server URL.
    pub resource: String,
    pub scopes_supported: Option<Vec<String>>,
    pub auth: AuthServer,
}

/// Where to look for protected resource metadata, in order.
pub fn resource_metadata_urls(server: &Url, challenge: Option<&Challenge>) -> Vec<Url> {
    let mut urls = Vec::new();
    if let Some(named) = challenge.and_then(|c| c.resource_metadata.as_deref()).and_then(|u| Url::parse(u).ok()) {
        urls.push(named);
    }
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        urls.push(at(server, &format!("/.well-known/oauth-protected-resource{path}")));
    }
    urls.push(at(server, "/.well-known/oauth-protected-resource"));
    urls
}

/// Where to look for an issuer's metadata, in order.
pub fn auth_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![at(issuer, "/.well-known/oauth-authorization-server"), at(issuer, "/.well-known/openid-configuration")]
    } else {
        vec![
            at(issuer, &format!("/.well-known/oauth-authorization-server{path}")),
            at(issuer, &format!("/.well-known/openid-configuration{path}")),
            at(issuer, &format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// `path` at `base`'s origin.
fn at(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// The origin as text, no trailing slash: `https://host:port`.
pub fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Whether protected resource metadata's `resource` may stand for the server at `server`:
/// the same origin, and a path that is the server's or one of its parents (by whole
/// segments). A resource elsewhere would make mcpx ask for tokens meant for someone else.
pub fn resource_matches(server: &Url, resource: &str) -> bool {
    let Ok(resource) = Url::parse(resource) else { return false };
    if resource.origin() != server.origin() || resource.fragment().is_some() {
        return false;
    }
    let want = resource.path().trim_end_matches('/');
    let have = server.path().trim_end_matches('/');
    want.is_empty() || have == want || have.strip_prefix(want).is_some_and(|rest| rest.starts_with('/'))
}

/// Runs discovery for the server at `server`.
pub async fn discover(http: &Http, server: &Url, challenge: Option<&Challenge>) -> Result<Discovered, OAuthError> {
    // What tells mcpx where to send a person and its secrets travels as safely as the
    // server's own traffic at least: https, loopback, or the server's own origin.
    let safe = |url: &Url| secure_enough(url) || url.origin() == server.origin();
    let mut prm = None;
    for url in resource_metadata_urls(server, challenge) {
        if !safe(&url) {
            return Err(OAuthError::Refused(format!(
                "the protected resource metadata at {url} would be read in the clear; refusing it"
            )));
        }
        if let Some(doc) = http.get_json(&url).await? {
            prm = Some(parse_resource(&doc).ok_or_else(|| {
                OAuthError::Discovery(format!("the protected resource metadata at {url} has no \"resource\""))
            })?);
            break;
        }
    }
    match prm {
        Some(prm) => {
            if !resource_matches(server, &prm.resource) {
                return Err(OAuthError::Refused(format!(
                    "the protected resource metadata names resource {:?}, which is not the server at {server}",
                    prm.resource
                )));
            }
            let issuer = prm.authorization_servers.first().cloned().ok_or_else(|| {
                OAuthError::Discovery("the protected resource metadata names no authorization server".into())
            })?;
            let issuer_url = Url::parse(&issuer)
                .map_err(|e| OAuthError::Discovery(format!("authorization server {issuer:?}: {e}")))?;
            if !safe(&issuer_url) {
                return Err(OAuthError::Refused(format!(
                    "the authorization server {issuer:?} is not an https (or loopback http) URL; refusing it"
                )));
            }
            let auth = auth_server(http, &issuer, &issuer_url)
                .await?
                .ok_or_else(|| OAuthError::Discovery(format!("no authorization server metadata found for {issuer}")))?;
            Ok(Discovered { resource: prm.resource, scopes_supported: prm.scopes_supported, auth })
        }
        None => {
            // 2025-03-26: the server's origin is its authorization server.
            let issuer = origin(server);
            let issuer_url = Url::parse(&issuer).map_err(|e| OAuthError::Discovery(e.to_string()))?;
            let auth = match auth_server(http, &issuer, &issuer_url).await? {
                Some(auth) => auth,
                None => AuthServer {
                    issuer: issuer.clone(),
                    authorization_endpoint: format!("{issuer}/authorize"),
                    token_endpoint: format!("{issuer}/token"),
                    registration_endpoint: Some(format!("{issuer}/register")),
                    ..AuthServer::default()
                },
            };
            Ok(Discovered { resource: server.to_string(), scopes_supported: None, auth })
        }
    }
}

/// An issuer's metadata, from the first location that has it; `None` when none does.
async fn auth_server(http: &Http, issuer: &str, issuer_url: &Url) -> Result<Option<AuthServer>, OAuthError> {
    for url in auth_server_metadata_urls(issuer_url) {
        if let Some(doc) = http.get_json(&url).await? {
            return parse_auth_server(&doc, issuer).map(Some);
        }
    }
    Ok(None)
}

pub fn parse_resource(doc: &Value) -> Option<ProtectedResource> {
    Some(ProtectedResource {
        resource: doc.get("resource")?.as_str()?.to_owned(),
        authorization_servers: strings(doc.get("authorization_servers")).unwrap_or_default(),
        scopes_supported: strings(doc.get("scopes_supported")),
    })
}

/// Authorization server metadata looked up for `issuer`; refused when it names another.
pub fn parse_auth_server(doc: &Value, issuer: &str) -> Result<AuthServer, OAuthError> {
    let text = |key: &str| doc.get(key).and_then(Value::as_str).map(str::to_owned);
    let published = text("issuer").unwrap_or_default();
    if published != issuer {
        return Err(OAuthError::Refused(format!(
            "the authorization server metadata for {issuer} names issuer {published:?}; refusing to use it"
        )));
    }
    let endpoint = |key: &str| -> Result<Option<String>, OAuthError> {
        match text(key) {
            None => Ok(None),
            Some(value) => match Url::parse(&value) {
                Ok(url) if secure_enough(&url) => Ok(Some(value)),
                _ => Err(OAuthError::Refused(format!(
                    "the authorization server's {key} {value:?} is not an https (or loopback http) URL"
                ))),
            },
        }
    };
    let required = |key: &str| {
        endpoint(key)?.ok_or_else(|| OAuthError::Discovery(format!("the authorization server metadata has no {key}")))
    };
    Ok(AuthServer {
        issuer: published,
        authorization_endpoint: required("authorization_endpoint")?,
        token_endpoint: required("token_endpoint")?,
        registration_endpoint: endpoint("registration_endpoint")?,
        revocation_endpoint: endpoint("revocation_endpoint")?,
        scopes_supported: strings(doc.get("scopes_supported")),
        code_challenge_methods_supported: strings(doc.get("code_challenge_methods_supported")),
        token_endpoint_auth_methods_supported: strings(doc.get("token_endpoint_auth_methods_supported")),
        client_id_metadata_document_supported: doc.get("client_id_metadata_document_supported")
            == Some(&Value::Bool(true)),
        authorization_response_iss_parameter_supported: doc.get("authorization_response_iss_parameter_supported")
            == Some(&Value::Bool(true)),
        from_metadata: true,
    })
}

fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    Some(value?.as_array()?.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn texts(urls: Vec<Url>) -> Vec<String> {
        urls.into_iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn resource_metadata_is_looked_for_where_the_challenge_says_then_path_based_then_root() {
        let challenge =
            Challenge { resource_metadata: Some("https://h/custom/meta.json".into()), ..Default::default() };
        assert_eq!(
            texts(resource_metadata_urls(&url("https://h/mcp"), Some(&challenge))),
            [
                "https://h/custom/meta.json",
                "https://h/.well-known/oauth-protected-resource/mcp",
                "https://h/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            texts(resource_metadata_urls(&url("https://h/"), None)),
            ["https://h/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn auth_server_metadata_is_looked_for_in_the_specs_order() {
        assert_eq!(
            texts(auth_server_metadata_urls(&url("https://as/tenant1"))),
            [
                "https://as/.well-known/oauth-authorization-server/tenant1",
                "https://as/.well-known/openid-configuration/tenant1",
                "https://as/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            texts(auth_server_metadata_urls(&url("https://as"))),
            ["https://as/.well-known/oauth-authorization-server", "https://as/.well-known/openid-configuration"]
        );
    }

    #[test]
    fn a_resource_matches_its_server_or_a_parent_path_on_the_same_origin_only() {
        let server = url("http://localhost:3000/mcp");
        assert!(resource_matches(&server, "http://localhost:3000/mcp"));
        assert!(resource_matches(&server, "http://localhost:3000"));
        assert!(resource_matches(&server, "http://localhost:3000/"));
        assert!(!resource_matches(&server, "https://evil.example.com/mcp"));
        assert!(!resource_matches(&server, "http://localhost:3001/mcp"));
        assert!(!resource_matches(&server, "http://localhost:3000/mc"));
        assert!(!resource_matches(&server, "http://localhost:3000/mcp/deeper"));
        assert!(!resource_matches(&url("http://localhost:3000/mcpx"), "http://localhost:3000/mcp"));
    }

    #[test]
    fn metadata_naming_another_issuer_is_refused_and_the_same_one_is_read() {
        let doc = json!({
            "issuer": "https://attacker.example.com",
            "authorization_endpoint": "https://as/authorize", "token_endpoint": "https://as/token"
        });
        assert!(matches!(parse_auth_server(&doc, "https://as"), Err(OAuthError::Refused(_))));
        let doc = json!({
            "issuer": "https://as", "authorization_endpoint": "https://as/authorize", "token_endpoint": "https://as/token",
            "code_challenge_methods_supported": ["S256"], "authorization_response_iss_parameter_supported": true
        });
        let auth = parse_auth_server(&doc, "https://as").unwrap();
        assert!(auth.authorization_response_iss_parameter_supported);
        assert_eq!(auth.code_challenge_methods_supported, Some(vec!["S256".to_owned()]));
        // A trailing slash is another issuer.
        assert!(parse_auth_server(&doc, "https://as/").is_err());
    }

    /// A resource server on loopback whose every answer is `doc`.
    async fn serving(doc: Value) -> Url {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let body = doc.to_string().replace("{base}", &base);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        url(&format!("{base}/mcp"))
    }

    #[tokio::test]
    async fn an_authorization_server_in_the_clear_is_refused_before_it_is_asked() {
        // Its metadata over plain HTTP could be swapped on the way for one that sends the
        // person, the code and the client's secret elsewhere.
        let doc = json!({ "resource": "{base}/mcp", "authorization_servers": ["http://as.invalid"] });
        let server = serving(doc).await;
        let refused = discover(&Http::toward(&server, std::sync::Arc::from([])), &server, None).await.unwrap_err();
        assert!(matches!(refused, OAuthError::Refused(_)), "{refused}");
        // Nor is protected resource metadata a challenge names in the clear read.
        let challenge = Challenge {
            resource_metadata: Some("http://metadata.invalid/.well-known/oauth-protected-resource".into()),
            ..Default::default()
        };
        let refused =
            discover(&Http::toward(&server, std::sync::Arc::from([])), &server, Some(&challenge)).await.unwrap_err();
        assert!(matches!(refused, OAuthError::Refused(_)), "{refused}");
    }

    #[test]
    fn endpoints_must_be_https_or_loopback_http() {
        let doc = json!({
            "issuer": "https://as", "authorization_endpoint": "http://as.example/authorize", "token_endpoint": "https://as/token"
        });
        assert!(matches!(parse_auth_server(&doc, "https://as"), Err(OAuthError::Refused(_))));
        assert!(secure_enough(&url("http://127.0.0.1:9/x")));
        assert!(secure_enough(&url("http://localhost:9/x")));
        assert!(!secure_enough(&url("javascript:alert(1)")));
    }
}
