//! What the front ends share across requests: the gateway, the handshake-era HTTP
//! sessions, the questions waiting for `/v1` callers, and the daemon's [`Life`] as they
//! see it. The router holds one [`Front`]; `daemon` makes it and ends it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use mcpx_gateway::{Gateway, Transport};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bearer::Verifier;
use crate::pending::Pending;
use crate::session::Sessions;

pub struct Front {
    pub gateway: Arc<Gateway>,
    /// Handshake-era HTTP sessions, by `Mcp-Session-Id`.
    pub sessions: Sessions,
    /// Questions waiting for `/v1` callers.
    pub pending: Pending,
    /// Validates the OAuth access tokens callers bring, with its caches.
    pub bearer: Verifier,
    pub life: Life,
    /// This node and its keys, when the daemon runs as one node of a cluster.
    pub cluster: Option<Arc<crate::cluster::Link>>,
    /// Upstreams' questions during requests other nodes relayed here, waiting for their
    /// callers' answers.
    pub relayed_questions: Arc<crate::relayed::Questions>,
}

impl Front {
    pub fn new(gateway: Arc<Gateway>, life: Life) -> Front {
        Front {
            gateway,
            sessions: Sessions::default(),
            pending: Pending::default(),
            bearer: Verifier::default(),
            life,
            cluster: None,
            relayed_questions: Arc::default(),
        }
    }

    /// As one node of a cluster.
    pub fn in_cluster(mut self, link: Arc<crate::cluster::Link>) -> Front {
        self.cluster = Some(link);
        self
    }

    /// A new legacy session id: one that names this node, in a cluster.
    pub fn new_session_id(&self) -> String {
        match &self.cluster {
            Some(link) => link.mint_session_id(),
            None => crate::session::new_session_id(),
        }
    }
}

/// The daemon's life as the front ends see it: where it listens and since when, when it
/// was last used, the relayed stdio streams it holds open, and a request to stop.
pub struct Life {
    pub url: String,
    pub socket: Option<PathBuf>,
    pub started: SystemTime,
    stop: Notify,
    last_activity: Mutex<Instant>,
    /// Relayed stdio streams, each a task until its stream ends.
    streams: TaskTracker,
    /// Who each open relayed stream is (the status page lists them), by a number of its own.
    open: Arc<Mutex<HashMap<u64, OpenStream>>>,
    next_stream: AtomicU64,
    /// Cancelled when the daemon stops: every relayed stream ends its input then.
    ending: CancellationToken,
}

impl Life {
    pub fn new(url: String, socket: Option<PathBuf>) -> Life {
        Life {
            url,
            socket,
            started: SystemTime::now(),
            stop: Notify::new(),
            last_activity: Mutex::new(Instant::now()),
            streams: TaskTracker::new(),
            open: Arc::default(),
            next_stream: AtomicU64::new(0),
            ending: CancellationToken::new(),
        }
    }

    /// Someone used the daemon now.
    pub fn touch(&self) {
        *self.last_activity.lock().expect("activity lock") = Instant::now();
    }

    /// How long nobody has used the daemon; `None` while a relayed stdio stream is open.
    pub fn idle_for(&self) -> Option<Duration> {
        self.streams.is_empty().then(|| self.last_activity.lock().expect("activity lock").elapsed())
    }

    /// Asks the daemon to stop (`POST /v1/stop`).
    pub fn request_stop(&self) {
        self.stop.notify_one();
    }

    /// Resolves once a stop was asked for.
    pub async fn stop_requested(&self) {
        self.stop.notified().await
    }

    /// Runs a relayed stdio stream for `transport`, counted as use (and listed as open)
    /// until it ends. `serve` gets the token that is cancelled when the daemon stops.
    pub fn hold_stream<F>(&self, transport: Transport, serve: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let number = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let open = self.open.clone();
        open.lock().expect("streams lock").insert(number, OpenStream { transport, opened: Instant::now() });
        let served = serve(self.ending.clone());
        self.streams.spawn(async move {
            // Off the list however the task ends, finished or dropped.
            let _listed = Unlist(open, number);
            served.await
        });
    }

    /// The relayed stdio streams open now, oldest first.
    pub fn open_streams(&self) -> Vec<OpenStream> {
        let mut open: Vec<OpenStream> = self.open.lock().expect("streams lock").values().cloned().collect();
        open.sort_by_key(|s| s.opened);
        open
    }

    /// Ends every relayed stream's input and waits, at most `grace`, for them to finish
    /// as they do at the end of input. Returns whether they all did.
    pub async fn end_streams(&self, grace: Duration) -> bool {
        self.ending.cancel();
        self.streams.close();
        tokio::time::timeout(grace, self.streams.wait()).await.is_ok()
    }
}

/// A relayed stdio stream: the transport it serves (the `mcpx serve` process, its cwd and
/// session) and since when.
#[derive(Clone, Debug)]
pub struct OpenStream {
    pub transport: Transport,
    pub opened: Instant,
}

/// Takes a stream off the open list when dropped.
struct Unlist(Arc<Mutex<HashMap<u64, OpenStream>>>, u64);

impl Drop for Unlist {
    fn drop(&mut self) {
        self.0.lock().expect("streams lock").remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_open_stream_keeps_the_daemon_from_idling_until_the_daemon_ends_it() {
        let life = Life::new("http://127.0.0.1:1/mcp".into(), None);
        assert!(life.idle_for().is_some(), "nothing open: the daemon idles");
        let (started, running) = tokio::sync::oneshot::channel();
        life.hold_stream(Transport { pid: Some(7), ..Transport::default() }, |end| async move {
            let _ = started.send(());
            end.cancelled().await;
        });
        running.await.unwrap();
        assert_eq!(life.idle_for(), None, "a relayed stream is use");
        assert_eq!(life.open_streams().iter().map(|s| s.transport.pid).collect::<Vec<_>>(), [Some(7)]);
        assert!(life.end_streams(Duration::from_secs(5)).await, "the stream ends when told to");
        assert!(life.idle_for().is_some());
        assert!(life.open_streams().is_empty(), "an ended stream is no longer listed");
    }

    #[tokio::test]
    async fn a_stream_that_does_not_end_is_not_waited_for_past_the_grace() {
        let life = Life::new("http://127.0.0.1:1/mcp".into(), None);
        life.hold_stream(Transport::default(), |_| std::future::pending());
        assert!(!life.end_streams(Duration::from_millis(10)).await);
    }
}
