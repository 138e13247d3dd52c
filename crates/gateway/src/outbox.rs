//! The bounded queue of one change stream (a handshake-era session's standalone stream, a
//! 2026-07-28 listen): many senders (one relay per watched instance, the session's tasks),
//! one receiver, at most `limits.maxBufferedNotifications` changes waiting.
//!
//! Thousands of these stay open at once and nearly all of them sit empty, so a queue costs
//! only what it holds: its buffer grows with the changes waiting and is given back once they
//! are read. (`tokio::sync::mpsc` allocates a block of 32 slots up front, 2.6 KiB for a
//! `Value`, for every stream.)

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Notify;

/// An empty queue keeps at most this many slots of what a burst grew it to.
const KEEP_SLOTS: usize = 4;

/// A queue of at most `capacity` (at least 1) changes waiting.
pub fn channel(capacity: usize) -> (Sender, Receiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { queue: VecDeque::new(), senders: 1, receiver_gone: false }),
        capacity: capacity.max(1),
        readable: Notify::new(),
        closed: Notify::new(),
    });
    (Sender(shared.clone()), Receiver(shared))
}

struct Shared {
    state: Mutex<State>,
    capacity: usize,
    /// Wakes the receiver: a change arrived, or the last sender went.
    readable: Notify,
    /// Wakes the senders waiting in [`Sender::closed`].
    closed: Notify,
}

struct State {
    queue: VecDeque<Value>,
    senders: usize,
    receiver_gone: bool,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a change was not queued.
#[derive(Debug)]
pub enum TrySendError {
    /// `capacity` changes wait already.
    Full(Value),
    /// Nobody receives any more.
    Closed(Value),
}

pub struct Sender(Arc<Shared>);

impl Sender {
    /// Queues `change` unless the queue is full or its receiver is gone.
    pub fn try_send(&self, change: Value) -> Result<(), TrySendError> {
        {
            let mut state = self.0.state();
            if state.receiver_gone {
                return Err(TrySendError::Closed(change));
            }
            if state.queue.len() >= self.0.capacity {
                return Err(TrySendError::Full(change));
            }
            state.queue.push_back(change);
        }
        self.0.readable.notify_one();
        Ok(())
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.0.state().receiver_gone
    }

    /// Resolves once the receiver is gone.
    pub async fn closed(&self) {
        loop {
            let notified = self.0.closed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a receiver dropped in between still wakes it.
            notified.as_mut().enable();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }
}

impl Clone for Sender {
    fn clone(&self) -> Sender {
        self.0.state().senders += 1;
        Sender(self.0.clone())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let last = {
            let mut state = self.0.state();
            state.senders -= 1;
            state.senders == 0
        };
        if last {
            self.0.readable.notify_one();
        }
    }
}

pub struct Receiver(Arc<Shared>);

impl Receiver {
    /// The next change; `None` once every sender is gone and nothing waits.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            {
                let mut state = self.0.state();
                if let Some(change) = state.queue.pop_front() {
                    if state.queue.is_empty() && state.queue.capacity() > KEEP_SLOTS {
                        state.queue.shrink_to(KEEP_SLOTS);
                    }
                    return Some(change);
                }
                if state.senders == 0 {
                    return None;
                }
            }
            // A change or the last sender's going between the check and here leaves a
            // permit: this returns at once.
            self.0.readable.notified().await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let waiting = {
            let mut state = self.0.state();
            state.receiver_gone = true;
            std::mem::take(&mut state.queue)
        };
        drop(waiting);
        self.0.closed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn delivers_in_order_up_to_capacity_and_ends_with_the_last_sender() {
        let (tx, mut rx) = channel(2);
        let other = tx.clone();
        tx.try_send(json!(1)).unwrap();
        other.try_send(json!(2)).unwrap();
        assert!(matches!(tx.try_send(json!(3)), Err(TrySendError::Full(_))));
        assert_eq!(rx.recv().await, Some(json!(1)));
        assert_eq!(rx.recv().await, Some(json!(2)));
        drop(tx);
        other.try_send(json!(4)).unwrap();
        drop(other);
        assert_eq!(rx.recv().await, Some(json!(4)));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_for_a_change_and_senders_see_it_go() {
        let (tx, mut rx) = channel(8);
        let sent = tx.clone();
        let waiting = tokio::spawn(async move { rx.recv().await });
        tokio::task::yield_now().await;
        sent.try_send(json!("x")).unwrap();
        assert_eq!(waiting.await.unwrap(), Some(json!("x")));
        // The receiver went with its task.
        tx.closed().await;
        assert!(tx.is_closed());
        assert!(matches!(tx.try_send(json!(1)), Err(TrySendError::Closed(_))));
    }

    #[tokio::test]
    async fn a_sender_waiting_for_the_close_wakes_when_the_receiver_goes() {
        let (tx, rx) = channel(1);
        let waiting = tokio::spawn(async move { tx.closed().await });
        tokio::task::yield_now().await;
        drop(rx);
        waiting.await.unwrap();
    }
}
