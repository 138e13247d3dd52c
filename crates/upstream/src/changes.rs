//! Change notifications: what an upstream says changed on its side (lists, subscribed
//! resources), as opposed to what it says about one request. Both transports hand them on
//! untagged, for the gateway to tag for each of its own watchers. A handshake-era
//! server's `notifications/tasks/status` go their own way, as they came, for the gateway
//! to match against the tasks the connection runs.

use serde_json::Value;

/// Notifications that say something changed on the server, as opposed to notifications
/// about one request.
pub const CHANGE_NOTIFICATIONS: [&str; 4] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
];

/// What a handshake-era server says, unasked, when one of its tasks changes status.
pub const TASK_STATUS: &str = "notifications/tasks/status";

pub(crate) fn is_change(method: &str) -> bool {
    CHANGE_NOTIFICATIONS.contains(&method)
}

/// A change notification without the upstream's subscription tag (mcpx tags it again for
/// each of its own watchers).
pub(crate) fn untagged_change(method: &str, mut params: Value) -> Value {
    if let Some(Value::Object(m)) = params.get_mut("_meta") {
        m.remove(mcpx_protocol::meta::SUBSCRIPTION_ID);
        if m.is_empty() {
            params.as_object_mut().map(|p| p.remove("_meta"));
        }
    }
    mcpx_protocol::message::notification(method, params)
}

/// Which list a list request reads, as its change notification names it: resources and
/// their templates change together.
fn list_of(method: &str) -> Option<usize> {
    match method {
        "tools/list" | "notifications/tools/list_changed" => Some(0),
        "prompts/list" | "notifications/prompts/list_changed" => Some(1),
        "resources/list" | "resources/templates/list" | "notifications/resources/list_changed" => Some(2),
        _ => None,
    }
}

/// What one connection heard change: handed on to whoever watches, and counted per list,
/// so a listing kept from before a change can tell it is out of date without watching.
pub(crate) struct Changes {
    sender: tokio::sync::broadcast::Sender<Value>,
    /// The task statuses the server announced (`notifications/tasks/status` params), for
    /// the gateway to match against the tasks this connection runs.
    statuses: tokio::sync::broadcast::Sender<Value>,
    /// The list changes heard so far, per list (tools, prompts, resources).
    counts: [std::sync::atomic::AtomicU64; 3],
    /// Whether the server's unasked notifications reach this connection now.
    hearing: std::sync::atomic::AtomicBool,
}

impl Changes {
    /// `hearing`: whether the server's unasked notifications reach the connection from
    /// the start (over stdio they do; over HTTP only while a stream carries them).
    pub(crate) fn new(backlog: usize, hearing: bool) -> Changes {
        Changes {
            sender: tokio::sync::broadcast::channel(backlog).0,
            statuses: tokio::sync::broadcast::channel(backlog).0,
            counts: Default::default(),
            hearing: hearing.into(),
        }
    }

    /// A stream that carries the server's unasked notifications opened or ended: what
    /// changed while none was open went unheard.
    pub(crate) fn set_hearing(&self, hearing: bool) {
        self.hearing.store(hearing, std::sync::atomic::Ordering::SeqCst);
        self.missed();
    }

    /// Whether the server's unasked notifications reach this connection now.
    pub(crate) fn hearing(&self) -> bool {
        self.hearing.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Value> {
        self.sender.subscribe()
    }

    pub(crate) fn task_statuses(&self) -> tokio::sync::broadcast::Receiver<Value> {
        self.statuses.subscribe()
    }

    /// A task status the server announced (the notification's params), for whoever
    /// follows a task this connection runs.
    pub(crate) fn announce_status(&self, params: Value) {
        let _ = self.statuses.send(params);
    }

    /// A change the server announced: counted first, then handed on, so whoever hears of
    /// it and lists again finds the old listing out of date.
    pub(crate) fn announce(&self, method: &str, params: Value) {
        if let Some(list) = list_of(method) {
            self.counts[list].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let _ = self.sender.send(untagged_change(method, params));
    }

    /// Changes may have gone unheard (a stream that carried them dropped): every list
    /// counts as changed.
    pub(crate) fn missed(&self) {
        for count in &self.counts {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// How many changes of the list `method` reads were heard so far; `None` for a
    /// method that reads no list.
    pub(crate) fn count(&self, method: &str) -> Option<u64> {
        list_of(method).map(|list| self.counts[list].load(std::sync::atomic::Ordering::SeqCst))
    }
}
