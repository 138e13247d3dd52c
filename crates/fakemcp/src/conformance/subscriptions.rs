//! Which modern `subscriptions/listen` streams are open, and what each one asked to hear.
//!
//! On stdio every subscription shares stdout; a notification belongs to one because its
//! `_meta` names the listen request's id as `subscriptionId`. A subscription is opened
//! with `notifications/subscriptions/acknowledged` (the honoured part of its filter),
//! receives only the list changes it opted in to, and ends when the client sends
//! `notifications/cancelled` for it, answered with the listen result. The registry lock is
//! held while a subscription's frames are written, so an acknowledgement always precedes
//! that subscription's first change and nothing follows its closing result.

use std::sync::{Mutex, MutexGuard};

use serde_json::{Map, Value, json};

use crate::era::{self, SUBSCRIPTION_ID_KEY};
use crate::instance::Instance;
use crate::wire::{INVALID_PARAMS, INVALID_REQUEST, Output, RpcError};

/// A list whose contents changed.
#[derive(Debug, Clone, Copy)]
pub enum Change {
    Tools,
    Prompts,
}

struct Listen {
    /// The listen request's id, which is also the subscription id.
    id: Value,
    tools: bool,
    prompts: bool,
}

pub struct Subscriptions {
    out: Output,
    open: Mutex<Vec<Listen>>,
}

impl Subscriptions {
    pub fn new(out: Output) -> Self {
        Subscriptions { out, open: Mutex::default() }
    }

    /// Opens subscription `id` with the filter in `params.notifications` and acknowledges
    /// the part fakemcp honours. The listen request itself stays unanswered until it ends.
    ///
    /// Honoured: `toolsListChanged`, `promptsListChanged` and `resourcesListChanged`, and
    /// `resourceSubscriptions` for URIs that exist (for which `known_resource` says so).
    /// The resource list and contents never change, so those are honoured trivially.
    pub fn listen(&self, id: &Value, params: &Value, known_resource: impl Fn(&str) -> bool) -> Result<(), RpcError> {
        let empty = Map::new();
        let filter = match params.get("notifications") {
            None => &empty,
            Some(Value::Object(filter)) => filter,
            Some(_) => {
                return Err(RpcError::new(INVALID_PARAMS, "subscriptions/listen: notifications must be an object"));
            }
        };
        let wants = |key: &str| filter.get(key).and_then(Value::as_bool) == Some(true);
        let mut honoured = Map::new();
        for key in ["toolsListChanged", "promptsListChanged", "resourcesListChanged"] {
            if wants(key) {
                honoured.insert(key.into(), true.into());
            }
        }
        if let Some(uris) = filter.get("resourceSubscriptions").and_then(Value::as_array) {
            let known: Vec<Value> =
                uris.iter().filter(|uri| uri.as_str().is_some_and(&known_resource)).cloned().collect();
            honoured.insert("resourceSubscriptions".into(), known.into());
        }

        let mut open = self.lock();
        if open.iter().any(|listen| listen.id == *id) {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "subscriptions/listen: a subscription with this id is already open",
            ));
        }
        open.push(Listen { id: id.clone(), tools: wants("toolsListChanged"), prompts: wants("promptsListChanged") });
        self.out.notify_with(
            "notifications/subscriptions/acknowledged",
            json!({"_meta": {SUBSCRIPTION_ID_KEY: id}, "notifications": honoured}),
        );
        Ok(())
    }

    /// Tells every subscription that asked for `change` about it; returns how many.
    pub fn changed(&self, change: Change) -> usize {
        let method = match change {
            Change::Tools => "notifications/tools/list_changed",
            Change::Prompts => "notifications/prompts/list_changed",
        };
        let open = self.lock();
        let told = open.iter().filter(|listen| match change {
            Change::Tools => listen.tools,
            Change::Prompts => listen.prompts,
        });
        let mut count = 0;
        for listen in told {
            self.out.notify_with(method, json!({"_meta": {SUBSCRIPTION_ID_KEY: listen.id}}));
            count += 1;
        }
        count
    }

    /// Ends subscription `id` if it is open, answering its listen request with the closing
    /// result. Returns false when `id` names no open subscription.
    pub fn cancel(&self, id: &Value, instance: &Instance) -> bool {
        let mut open = self.lock();
        let Some(index) = open.iter().position(|listen| listen.id == *id) else {
            return false;
        };
        open.remove(index);
        let result = era::complete(json!({"_meta": {SUBSCRIPTION_ID_KEY: id}}), instance);
        self.out.reply(id, Ok(result));
        true
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Listen>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}
