//! [`OAuthError`]: every way logging in or getting a token can fail. Messages name the
//! server, the step and what the authorization server said; never a token, a code, a
//! client secret or a verifier.

#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    /// No usable token and none can be had without a person: `mcpx auth login <server>`.
    #[error("server {server:?} needs you to log in: run `mcpx auth login {server}`")]
    LoginNeeded { server: String },
    /// The metadata that says where to go is missing or unreadable.
    #[error("authorization discovery failed: {0}")]
    Discovery(String),
    /// Something mcpx must not go along with (a resource or issuer that does not match,
    /// no PKCE S256, a wrong `iss`, a scope step-up that keeps failing).
    #[error("{0}")]
    Refused(String),
    #[error("client registration failed: {0}")]
    Registration(String),
    /// The token endpoint said no (its `error` and `error_description`).
    #[error("the token endpoint refused: {0}")]
    Token(String),
    /// The authorization server answered the login with an error (`error` on the redirect).
    #[error("the authorization server refused the login: {0}")]
    Denied(String),
    #[error("could not reach {url}: {reason}")]
    Http { url: String, reason: String },
    /// The login did not finish in time, or no login of that id is under way.
    #[error("{0}")]
    Flow(String),
    #[error("the token store: {0}")]
    Store(String),
    #[error("{0}")]
    Config(String),
}
