//! The redirect's receiving end (RFC 8252 §7.3): a listener on 127.0.0.1, opened when a
//! login begins and closed when it ends, serving `GET /callback`. Only a request that
//! carries the login's `state` is acted on; any other (a page in the browser guessing, an
//! old tab, a replay) gets a 400 page and leaves the login as it was. It reads at most a
//! request head of [`MAX_HEAD`] bytes, each within [`READ_WITHIN`], and reads
//! connections side by side so that a silent one holds up no other.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MAX_HEAD: usize = 16 * 1024;
const READ_WITHIN: Duration = Duration::from_secs(10);
/// Most connections read at once.
const MAX_READING: usize = 64;

/// The authorization response's parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// Binds the listener; `port` 0 takes an ephemeral one. Returns it with its redirect URI.
pub async fn bind(port: u16) -> std::io::Result<(TcpListener, String)> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let port = listener.local_addr()?.port();
    Ok((listener, format!("http://127.0.0.1:{port}/callback")))
}

/// Serves requests until one carries `state`; returns its parameters and the connection
/// to answer it on (after the code is exchanged, so the page tells the truth). Each
/// connection is read on its own, so one that never writes (another local process) holds
/// up only itself; at most [`MAX_READING`] are read at once, any more are closed.
pub async fn wait_for(listener: &TcpListener, state: &str) -> (Callback, TcpStream) {
    let mut reading = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if reading.len() < MAX_READING => {
                    let state = state.to_owned();
                    reading.spawn(async move { read_callback(stream, &state).await });
                }
                Ok(_) => {}
                // Out of file descriptors, say: wait a little rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            },
            Some(Ok(Some(found))) = reading.join_next() => return found,
        }
    }
}

/// One connection's request: the callback when it carries `state`; otherwise it is
/// answered here and closed.
async fn read_callback(mut stream: TcpStream, state: &str) -> Option<(Callback, TcpStream)> {
    let Some(target) = tokio::time::timeout(READ_WITHIN, read_target(&mut stream)).await.ok().flatten() else {
        let _ = answer(&mut stream, 400, "mcpx could not read that request.").await;
        return None;
    };
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    if path != "/callback" {
        let _ = answer(&mut stream, 404, "Nothing here.").await;
        return None;
    }
    let callback = parse_query(query);
    if callback.state.as_deref() != Some(state) {
        let _ = answer(&mut stream, 400, "This is not a login mcpx is waiting for (unknown or already used).").await;
        return None;
    }
    Some((callback, stream))
}

pub fn parse_query(query: &str) -> Callback {
    let mut callback = Callback::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match key.as_ref() {
            "code" => &mut callback.code,
            "state" => &mut callback.state,
            "iss" => &mut callback.iss,
            "error" => &mut callback.error,
            "error_description" => &mut callback.error_description,
            _ => continue,
        };
        // A repeated parameter makes the response ambiguous: keep the first (RFC 6749 §3.1).
        slot.get_or_insert(value.into_owned());
    }
    callback
}

/// The request target of a `GET`, from its head.
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?;
    let mut parts = line.split(' ');
    (parts.next()? == "GET").then_some(())?;
    parts.next().map(str::to_owned)
}

/// A small HTML page and the connection closed.
pub async fn answer(stream: &mut TcpStream, status: u16, message: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let escaped = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcpx</title></head><body><p>{escaped}</p></body></html>\n"
    );
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_query_is_read_and_a_repeated_parameter_keeps_its_first_value() {
        let c = parse_query("code=abc&state=s1&iss=https%3A%2F%2Fas&state=s2&other=x");
        assert_eq!(c.code.as_deref(), Some("abc"));
        assert_eq!(c.state.as_deref(), Some("s1"));
        assert_eq!(c.iss.as_deref(), Some("https://as"));
        let c = parse_query("error=access_denied&error_description=no+way&state=s");
        assert_eq!(c.error.as_deref(), Some("access_denied"));
        assert_eq!(c.error_description.as_deref(), Some("no way"));
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_does_not_hold_up_the_redirect() {
        let (listener, redirect_uri) = bind(0).await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Another local process opens connections and never writes: each used to hold the
        // listener for READ_WITHIN before the next connection was even accepted.
        let mut silent = Vec::new();
        for _ in 0..3 {
            silent.push(TcpStream::connect(addr).await.unwrap());
        }
        let mut browser = TcpStream::connect(addr).await.unwrap();
        browser.write_all(b"GET /callback?code=c&state=s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(5), wait_for(&listener, "s")).await;
        let (callback, _) = waited.unwrap_or_else(|_| panic!("the redirect to {redirect_uri} waited on silent peers"));
        assert_eq!(callback.code.as_deref(), Some("c"));
        drop(silent);
    }
}
