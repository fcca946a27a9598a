//! What one node keeps to itself and shares among the shards it hosts: its
//! Pub/Sub subscriptions, its client-side caching table, the board its script runs are recorded on (see
//! `crate::busy`), and on a cluster node the forwarder that carries PUBLISH
//! to the other nodes.
//!
//! One per node, not one per process: a simulation runs several nodes, and
//! several simulations side by side, in one process, and none of them may
//! see another's subscribers or wait for another's scripts.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::pubsub::{Forwarder, OutputLimits, PubSub};
use crate::tracking::Tracking;

pub struct NodeLocal {
    pub pubsub: Arc<PubSub>,
    pub scripts: Arc<keyspace::ScriptActivity>,
    /// Client-side caching's table (CLIENT TRACKING).
    pub tracking: Arc<Tracking>,
    /// Connections MIGRATE keeps to its targets.
    pub migrate_sockets: crate::migrate::Sockets,
    /// The run the busy watchdog watches and when it first saw it (FUNCTION
    /// STATS reports the duration from there).
    watched_run: Mutex<Option<(u64, tokio::time::Instant)>>,
    forwarder: OnceLock<Forwarder>,
    /// CLIENT PAUSE: one pause for the node's connections and shards.
    pub pause: crate::pause::PauseGate,
}

impl NodeLocal {
    pub fn new() -> Arc<NodeLocal> {
        let pubsub = PubSub::default();
        pubsub.set_limits(OutputLimits::parse(""));
        let pubsub = Arc::new(pubsub);
        Arc::new(NodeLocal {
            tracking: Arc::new(Tracking::new(pubsub.clone())),
            pubsub,
            scripts: keyspace::ScriptActivity::new(),
            migrate_sockets: Default::default(),
            watched_run: Mutex::new(None),
            forwarder: OnceLock::new(),
            pause: Default::default(),
        })
    }

    /// The run the busy watchdog watches, and since when.
    pub fn watched_run(&self) -> MutexGuard<'_, Option<(u64, tokio::time::Instant)>> {
        self.watched_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets the cluster node's forwarder (once; later calls are ignored).
    pub fn set_forwarder(&self, forwarder: Forwarder) {
        let _ = self.forwarder.set(forwarder);
    }

    /// The cluster node's forwarder, if this node is one.
    pub fn forwarder(&self) -> Option<&Forwarder> {
        self.forwarder.get()
    }
}
