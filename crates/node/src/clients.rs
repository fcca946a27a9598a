//! The registry of connected clients, for CLIENT LIST / INFO / KILL and INFO clients.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::pubsub::Subscriber;
use tokio::sync::Notify;

/// What the registry knows about one connection; the connection task updates it.
pub struct ClientInfo {
    pub id: u64,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    pub created_ms: u64,
    pub last_interaction_ms: AtomicU64,
    pub db: AtomicUsize,
    pub protocol: AtomicUsize,
    /// Bytes read but not yet run (CLIENT LIST's `qbuf`), set after each read.
    pub query_buffer_bytes: AtomicUsize,
    /// Waiting in a blocking command or held by CLIENT PAUSE (flag `b`).
    pub blocked: AtomicBool,
    pub details: Mutex<ClientDetails>,
    killed: AtomicBool,
    kill_signal: Notify,
    /// Set once the connection is gone (a tracking redirection to it is broken).
    closed: AtomicBool,
    /// The connection's outbox while it has one (subscribed, monitoring or
    /// tracking): where other connections' invalidations reach it.
    inbox: Mutex<Weak<Subscriber>>,
}

/// Mutable text fields.
#[derive(Default, Clone)]
pub struct ClientDetails {
    pub name: String,
    pub library_name: String,
    pub library_version: String,
    /// The name of the command run last (`""` before the first).
    pub last_command: &'static str,
    pub no_evict: bool,
    /// CLIENT TRACKING's state as CLIENT LIST shows it (None: off).
    pub tracking: Option<TrackingFlags>,
    /// CLIENT NO-TOUCH (flag `T`).
    pub no_touch: bool,
}

/// What CLIENT LIST shows of a tracking client.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TrackingFlags {
    pub bcast: bool,
    pub broken_redirect: bool,
    /// The client invalidations go to (0: this one).
    pub redirect: u64,
}

impl ClientInfo {
    pub fn new(
        id: u64,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        now_ms: u64,
    ) -> Arc<ClientInfo> {
        Arc::new(ClientInfo {
            id,
            peer,
            local,
            created_ms: now_ms,
            last_interaction_ms: AtomicU64::new(now_ms),
            db: AtomicUsize::new(0),
            protocol: AtomicUsize::new(2),
            query_buffer_bytes: AtomicUsize::new(0),
            blocked: AtomicBool::new(false),
            details: Mutex::new(ClientDetails::default()),
            killed: AtomicBool::new(false),
            kill_signal: Notify::new(),
            closed: AtomicBool::new(false),
            inbox: Mutex::new(Weak::new()),
        })
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The connection's outbox, if it has one now.
    pub fn inbox(&self) -> Option<Arc<Subscriber>> {
        self.inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .upgrade()
    }

    /// Records the connection's outbox (see [`ClientInfo::inbox`]).
    pub fn set_inbox(&self, inbox: &Arc<Subscriber>) {
        *self
            .inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::downgrade(inbox);
    }

    pub fn details(&self) -> std::sync::MutexGuard<'_, ClientDetails> {
        self.details
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks the connection to close (CLIENT KILL, shutdown).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill_signal.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Resolves once the client has been killed.
    pub async fn killed(&self) {
        loop {
            if self.is_killed() {
                return;
            }
            self.kill_signal.notified().await;
        }
    }

    /// The CLIENT LIST / CLIENT INFO line (without the trailing newline).
    pub fn describe(&self, now_ms: u64) -> String {
        let details = self.details().clone();
        let age = now_ms.saturating_sub(self.created_ms) / 1000;
        let idle = now_ms.saturating_sub(self.last_interaction_ms.load(Ordering::Relaxed)) / 1000;
        let local = self
            .local
            .map(|address| address.to_string())
            .unwrap_or_default();
        // Redis's letters, in its order; `N` when none applies.
        let mut flags = String::new();
        if self.blocked.load(Ordering::Relaxed) {
            flags.push('b');
        }
        if let Some(tracking) = details.tracking {
            flags.push('t');
            if tracking.broken_redirect {
                flags.push('R');
            }
            if tracking.bcast {
                flags.push('B');
            }
        }
        if details.no_evict {
            flags.push('e');
        }
        if details.no_touch {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let redirect = details
            .tracking
            .map_or(-1, |tracking| tracking.redirect as i64);
        format!(
            "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 \
             qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r \
             cmd={} user=default redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.peer,
            local,
            details.name,
            age,
            idle,
            flags,
            self.db.load(Ordering::Relaxed),
            self.query_buffer_bytes.load(Ordering::Relaxed),
            if details.last_command.is_empty() { "NULL" } else { details.last_command },
            redirect,
            self.protocol.load(Ordering::Relaxed),
            details.library_name,
            details.library_version,
        )
    }
}

#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    by_id: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl Clients {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ClientInfo>>> {
        self.by_id
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn register(&self, client: Arc<ClientInfo>) {
        self.map().insert(client.id, client);
    }

    pub fn unregister(&self, id: u64) {
        if let Some(client) = self.map().remove(&id) {
            client.closed.store(true, Ordering::Release);
        }
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.map().get(&id).cloned()
    }

    pub fn count(&self) -> usize {
        self.map().len()
    }

    /// Every client, in id order.
    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        self.map().values().cloned().collect()
    }

    pub fn kill_all(&self) {
        for client in self.all() {
            client.kill();
        }
    }
}
