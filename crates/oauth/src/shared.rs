//! Credential sets a cluster of daemons shares: each node reads and writes them in one
//! store (the cluster's Redis, behind [`SharedStore`]), so a login through one node serves
//! every node, and a refresh token is spent by one node at a time.
//!
//! Trust: the store is not trusted. Every value is sealed (ChaCha20-Poly1305 under a key
//! the daemon derives from its cluster's secret, the credential's key as associated data,
//! so a value cannot be moved to another key): whoever reads the store learns no token,
//! and whoever writes to it can delete a credential (the next call asks for a login) but
//! never plant a token, a refresh token or an endpoint a node would send either to. A
//! value that does not open is treated as absent, and logged. Store names are digests:
//! server names and principals stay out of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use sha2::{Digest, Sha256};

use crate::store::{CredentialKey, Tokens};

/// What a [`SharedStore`] call yields: its result, or why the store could not answer.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// A store every node of a cluster reaches, holding opaque bytes by name.
pub trait SharedStore: Send + Sync {
    /// The value under `name`, if any.
    fn get<'a>(&'a self, name: &'a str) -> Pending<'a, Option<Vec<u8>>>;
    /// Writes `value` under `name`; with `lock` (a lock's name and value), only while that
    /// lock still holds that value: whether it was written.
    fn put<'a>(&'a self, name: &'a str, value: Vec<u8>, lock: Option<(&'a str, &'a str)>) -> Pending<'a, bool>;
    fn delete<'a>(&'a self, name: &'a str) -> Pending<'a, ()>;
    /// Takes the lock `name` with `value` for `ttl` if it is free: whether it was taken.
    fn lock<'a>(&'a self, name: &'a str, value: &'a str, ttl: Duration) -> Pending<'a, bool>;
    /// Frees the lock `name` if it still holds `value`.
    fn unlock<'a>(&'a self, name: &'a str, value: &'a str) -> Pending<'a, ()>;
    /// A number for `name` larger than every one any node was given for it before, and at
    /// least `floor`: the store's counter, raised to `floor` first when it is below.
    fn next<'a>(&'a self, name: &'a str, floor: u64) -> Pending<'a, u64>;
    /// Writes `value` under `name` and starts the counter `counter` at `first`, only if
    /// neither exists (nothing was ever written under that counter): whether it was.
    fn put_first<'a>(&'a self, name: &'a str, counter: &'a str, value: Vec<u8>, first: u64) -> Pending<'a, bool>;
}

/// The cluster's store and the key its values are sealed with.
pub(crate) struct Shared {
    pub store: Arc<dyn SharedStore>,
    key: LessSafeKey,
}

impl Shared {
    pub fn new(store: Arc<dyn SharedStore>, key: [u8; 32]) -> Shared {
        let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).expect("a 32-byte key"));
        Shared { store, key }
    }

    /// Where credential `key` is stored: `oauth:` and a digest of the key.
    pub fn name(key: &CredentialKey) -> String {
        format!("oauth:{}", digest(key))
    }

    /// The lock a node holds while it spends `key`'s refresh token.
    pub fn lock_name(key: &CredentialKey) -> String {
        format!("oauth-lock:{}", digest(key))
    }

    /// The counter `key`'s credential sets take their generations from.
    pub fn generation_name(key: &CredentialKey) -> String {
        format!("oauth-generation:{}", digest(key))
    }

    pub fn seal(&self, key: &CredentialKey, tokens: &Tokens) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        let mut sealed = serde_json::to_vec(tokens).expect("tokens serialize");
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad(key)), &mut sealed)
            .expect("a credential set is far below the AEAD's limit");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        out
    }

    /// The credential set in `value`, if a node of this cluster sealed it for `key`.
    pub fn open(&self, key: &CredentialKey, value: &[u8]) -> Option<Tokens> {
        if value.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = value.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(aad(key)), &mut sealed).ok()?;
        serde_json::from_slice(plain).ok()
    }
}

fn aad(key: &CredentialKey) -> Vec<u8> {
    let mut aad = key.server.as_bytes().to_vec();
    if let Some(principal) = &key.principal {
        aad.push(0);
        aad.extend_from_slice(principal.as_bytes());
    }
    aad
}

fn digest(key: &CredentialKey) -> String {
    Sha256::digest(aad(key)).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nowhere;
    impl SharedStore for Nowhere {
        fn get<'a>(&'a self, _: &'a str) -> Pending<'a, Option<Vec<u8>>> {
            Box::pin(async { Ok(None) })
        }
        fn put<'a>(&'a self, _: &'a str, _: Vec<u8>, _: Option<(&'a str, &'a str)>) -> Pending<'a, bool> {
            Box::pin(async { Ok(true) })
        }
        fn delete<'a>(&'a self, _: &'a str) -> Pending<'a, ()> {
            Box::pin(async { Ok(()) })
        }
        fn lock<'a>(&'a self, _: &'a str, _: &'a str, _: Duration) -> Pending<'a, bool> {
            Box::pin(async { Ok(true) })
        }
        fn unlock<'a>(&'a self, _: &'a str, _: &'a str) -> Pending<'a, ()> {
            Box::pin(async { Ok(()) })
        }
        fn next<'a>(&'a self, _: &'a str, floor: u64) -> Pending<'a, u64> {
            Box::pin(async move { Ok(floor) })
        }
        fn put_first<'a>(&'a self, _: &'a str, _: &'a str, _: Vec<u8>, _: u64) -> Pending<'a, bool> {
            Box::pin(async { Ok(false) })
        }
    }

    #[test]
    fn a_sealed_set_opens_for_its_key_under_its_clusters_key_only_and_says_nothing() {
        let shared = Shared::new(Arc::new(Nowhere), [7; 32]);
        let docs = CredentialKey::shared("docs");
        let alice = CredentialKey { server: "docs".into(), principal: Some("alice".into()) };
        let tokens = crate::store::tests::sample("https://docs/mcp");
        let sealed = shared.seal(&docs, &tokens);
        assert_eq!(shared.open(&docs, &sealed), Some(tokens.clone()));
        let text = String::from_utf8_lossy(&sealed);
        assert!(!text.contains("secret") && !text.contains("docs"), "{text}");
        assert_eq!(shared.open(&alice, &sealed), None, "moved to another key");
        assert_eq!(Shared::new(Arc::new(Nowhere), [8; 32]).open(&docs, &sealed), None, "another cluster");
        let mut altered = sealed.clone();
        altered[NONCE_LEN + 3] ^= 1;
        assert_eq!(shared.open(&docs, &altered), None, "altered");
        assert_eq!(shared.open(&docs, b"{\"accessToken\":\"planted\"}"), None, "planted in the clear");
        assert_ne!(Shared::name(&docs), Shared::name(&alice));
        assert!(!Shared::name(&alice).contains("alice") && !Shared::lock_name(&docs).contains("docs"));
    }
}
