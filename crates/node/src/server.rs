//! The server: shared state, the accept loop and the periodic tasks. Sockets are
//! injected (`run` takes a bound listener) so tests and the simulation can supply
//! their own.

use crate::blocking::Blocking;
use crate::clients::{ClientInfo, Clients};
use crate::clock;
use crate::cluster_node::ClusterNode;
use crate::config::Config;
use crate::connection;
use crate::local::NodeLocal;
use crate::replica::Replica;
use keyspace::{Keyspace, KeyspaceConfig, Rng};
use replication::state_machine::{ShardState, SharedState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The keyspace and the node's own random source, locked together: a command takes
/// its seed from `rng` while it holds the keyspace. The same state is a Raft
/// group's state machine when the node is a replica.
pub type Store = ShardState;

/// Server-wide counters for INFO stats.
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Commands per second over the last few seconds (INFO instantaneous_ops_per_sec).
    pub instantaneous_ops_per_second: AtomicU64,
}

pub struct Shared {
    pub store: SharedState,
    /// Set when the node is a replica of a Raft group.
    pub replica: Option<Arc<Replica>>,
    /// Set when the node is part of a cluster (`--cluster-enabled yes`).
    pub cluster: Option<Arc<ClusterNode>>,
    /// Clients blocked by BLPOP and its relatives (the replica's registry when
    /// the node is one).
    pub blocking: Arc<Blocking>,
    pub config: RwLock<Config>,
    pub clients: Clients,
    pub stats: ServerStats,
    pub start_ms: u64,
    /// Bytes allocated when the node was set up (MEMORY STATS's
    /// `startup.allocated`).
    pub startup_allocated: usize,
    pub run_id: String,
    /// DEBUG SET-ACTIVE-EXPIRE.
    pub active_expire_enabled: AtomicBool,
    /// The port actually bound (the configured one may be 0).
    pub bound_port: AtomicU64,
    /// What this node shares among its shards: Pub/Sub subscriptions, the
    /// script board, a cluster node's PUBLISH forwarder.
    pub local: Arc<NodeLocal>,
    /// Command statistics, the slow log and the latency monitor.
    pub monitors: crate::stats::Monitors,
    /// A standalone node's snapshot file and save state (see `persist`).
    pub persistence: std::sync::OnceLock<crate::persist::Persistence>,
    /// When a replica's groups were last all snapshotted by SAVE or BGSAVE
    /// (Unix ms; the start before that): its LASTSAVE.
    pub last_raft_save_ms: Arc<AtomicU64>,
    /// What SHUTDOWN said about saving: 0 nothing, 1 NOSAVE, 2 SAVE.
    shutdown_save: std::sync::atomic::AtomicU8,
    shutdown: watch::Sender<bool>,
}

impl Shared {
    /// A standalone node's shared state.
    pub fn new(config: Config, seed: u64) -> Arc<Shared> {
        Self::standalone(config, seed, NodeLocal::new())
    }

    fn standalone(config: Config, seed: u64, local: Arc<NodeLocal>) -> Arc<Shared> {
        let mut rng = Rng::new(seed);
        let mut keyspace = Keyspace::new(config.databases(), rng.next_u64());
        apply_keyspace_config(&config, &mut keyspace, &local);
        let store = Arc::new(Mutex::new(ShardState {
            keyspace,
            last_applied: None,
            membership: Default::default(),
            log_time_ms: 0,
            rng: Rng::new(rng.next_u64()),
        }));
        Self::with_store(config, &mut rng, store, None, local)
    }

    /// A replica's shared state: the keyspace is the group's state machine.
    pub fn replicated(config: Config, seed: u64, replica: Arc<Replica>) -> Arc<Shared> {
        let mut rng = Rng::new(seed);
        let store = replica.group.state.clone();
        let local = replica.local.clone();
        Self::with_store(config, &mut rng, store, Some(replica), local)
    }

    /// A cluster node's shared state. Keyspace commands are routed to its shard
    /// replicas; the standalone store only backs node-level commands.
    pub fn clustered(config: Config, seed: u64, node: Arc<ClusterNode>) -> Arc<Shared> {
        let standalone = Shared::standalone(config.clone(), seed, node.local.clone());
        let mut rng = Rng::new(seed ^ 0xc1u64);
        let shared = Self::with_store(
            config,
            &mut rng,
            standalone.store.clone(),
            None,
            node.local.clone(),
        );
        let mut shared = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("fresh Arc"));
        shared.blocking = node.blocking.clone();
        let peers = node.clone();
        let forwarder = crate::pubsub::Forwarder::start(move || {
            let own = peers.identity.id;
            peers
                .topology()
                .map(|topology| {
                    topology
                        .nodes
                        .values()
                        .filter(|info| info.id != own)
                        .map(|info| format!("{}:{}", info.host, info.port))
                        .collect()
                })
                .unwrap_or_default()
        });
        node.local.set_forwarder(forwarder);
        shared.cluster = Some(node);
        Arc::new(shared)
    }

    fn with_store(
        config: Config,
        rng: &mut Rng,
        store: SharedState,
        replica: Option<Arc<Replica>>,
        local: Arc<NodeLocal>,
    ) -> Arc<Shared> {
        let run_id = (0..40)
            .map(|_| char::from_digit((rng.next_u64() % 16) as u32, 16).unwrap_or('0'))
            .collect();
        let (shutdown, _) = watch::channel(false);
        let monitors = crate::stats::Monitors::default();
        config.configure_monitors(&monitors);
        let blocking = replica
            .as_ref()
            .map(|replica| replica.blocking.clone())
            .unwrap_or_default();
        Arc::new(Shared {
            store,
            replica,
            cluster: None,
            blocking,
            config: RwLock::new(config),
            clients: Clients::default(),
            stats: ServerStats::default(),
            start_ms: clock::unix_ms(),
            startup_allocated: crate::alloc::allocated_bytes(),
            run_id,
            active_expire_enabled: AtomicBool::new(true),
            bound_port: AtomicU64::new(0),
            local,
            monitors,
            persistence: std::sync::OnceLock::new(),
            last_raft_save_ms: Arc::new(AtomicU64::new(clock::unix_ms())),
            shutdown_save: std::sync::atomic::AtomicU8::new(0),
            shutdown,
        })
    }

    /// Locks the keyspace; a panic in another holder does not wedge the server.
    /// A script holds the keyspace for as long as it runs, and a request may
    /// pass `busy::wait_for_scripts` just before one starts: waiting for the
    /// lock then happens off the runtime's worker, so the watchdog, BUSY
    /// replies and SCRIPT KILL keep running meanwhile.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        replication::state_machine::lock_off_worker(&self.store)
    }

    pub fn config(&self) -> std::sync::RwLockReadGuard<'_, Config> {
        self.config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn config_mut(&self) -> std::sync::RwLockWriteGuard<'_, Config> {
        self.config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks the server to stop (SHUTDOWN, signals).
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// SHUTDOWN SAVE (`Some(true)`) or NOSAVE (`Some(false)`).
    pub fn set_shutdown_save(&self, save: bool) {
        self.shutdown_save
            .store(if save { 2 } else { 1 }, Ordering::Relaxed);
    }

    pub fn shutdown_save(&self) -> Option<bool> {
        match self.shutdown_save.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    pub fn shutdown_requested(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// Pushes the keyspace-relevant parameters into the keyspace (after start-up and
/// every CONFIG SET).
pub fn apply_keyspace_config(config: &Config, keyspace: &mut Keyspace, local: &NodeLocal) {
    apply_config_to(config, &mut keyspace.config, local);
}

/// The keyspace's share of the configuration.
pub fn apply_config_to(config: &Config, keyspace: &mut KeyspaceConfig, local: &NodeLocal) {
    keyspace.max_string_bytes = config.proto_max_bulk_len();
    keyspace.lfu = config.lfu_policy();
    keyspace.lfu_log_factor = config.lfu_log_factor();
    keyspace.lfu_decay_time_minutes = config.lfu_decay_time();
    keyspace.script_instruction_limit = config.lua_instruction_limit();
    keyspace.max_memory = crate::evict::limit_from(config);
    keyspace.notify_flags =
        keyspace::notify::parse_flags(config.get("notify-keyspace-events").unwrap_or_default())
            .unwrap_or(0);
    keyspace.tracking = Some(local.tracking.switch());
    local
        .tracking
        .set_max_keys(config.integer("tracking-table-max-keys") as usize);
    local.pubsub.set_limits(crate::pubsub::OutputLimits::parse(
        config.get("client-output-buffer-limit").unwrap_or_default(),
    ));
    if keyspace.scripting.is_none() {
        keyspace.scripting = Some(scripting::setup(local.scripts.clone()));
    }
}

/// Where client connections come from: a TCP listener, or a simulated one.
pub trait Listener {
    type Stream: crate::connection::ClientStream;

    /// The next connection, with the peer's and the local address.
    fn accept(
        &self,
    ) -> impl std::future::Future<
        Output = std::io::Result<(
            Self::Stream,
            std::net::SocketAddr,
            Option<std::net::SocketAddr>,
        )>,
    >;

    /// The port bound.
    fn local_port(&self) -> Option<u16>;
}

impl Listener for TcpListener {
    type Stream = tokio::net::TcpStream;

    async fn accept(
        &self,
    ) -> std::io::Result<(
        Self::Stream,
        std::net::SocketAddr,
        Option<std::net::SocketAddr>,
    )> {
        let (stream, peer) = TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().ok();
        Ok((stream, peer, local))
    }

    fn local_port(&self) -> Option<u16> {
        self.local_addr().ok().map(|address| address.port())
    }
}

/// Serves clients from `listener` until shutdown is requested; then closes every
/// connection and returns.
pub async fn run(shared: Arc<Shared>, listener: impl Listener) -> std::io::Result<()> {
    if let Some(port) = listener.local_port() {
        shared.bound_port.store(port as u64, Ordering::Relaxed);
    }
    let mut shutdown = shared.shutdown_requested();
    let expiry = tokio::spawn(active_expiry_loop(shared.clone()));
    let watchdog = tokio::spawn(crate::busy::watchdog(shared.clone()));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer, local) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                shared.stats.total_connections_received.fetch_add(1, Ordering::Relaxed);
                if shared.clients.count() >= shared.config().maxclients() {
                    shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(connection::reject(stream, "ERR max number of clients reached"));
                    continue;
                }
                let client = ClientInfo::new(shared.clients.next_id(), peer, local, clock::unix_ms());
                shared.clients.register(client.clone());
                tokio::spawn(connection::serve(shared.clone(), stream, client));
            }
            // `wait_for` sees a shutdown requested before this loop subscribed
            // (a SIGTERM right after the ready line).
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    expiry.abort();
    watchdog.abort();
    shared.clients.kill_all();
    // Give connections a moment to flush and close.
    for _ in 0..100 {
        if shared.clients.count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Runs active expiry `hz` times a second with the current time, and samples the
/// command rate as Redis does (16 samples, at most one every 100 ms).
async fn active_expiry_loop(shared: Arc<Shared>) {
    let mut rate = RateSampler::default();
    loop {
        let hz = shared.config().hz();
        tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
        let now_ms = clock::unix_ms();
        let commands = shared
            .stats
            .total_commands_processed
            .load(Ordering::Relaxed);
        if let Some(per_second) = rate.sample(now_ms, commands) {
            shared
                .stats
                .instantaneous_ops_per_second
                .store(per_second, Ordering::Relaxed);
        }
        // A replica's expiry goes through the log (`replica::expiry_ticks`).
        if !shared.active_expire_enabled.load(Ordering::Relaxed) || shared.replica.is_some() {
            continue;
        }
        // CLIENT PAUSE keeps the data set still: no expiry while it lasts.
        if shared.local.pause.keys_frozen() {
            continue;
        }
        // A running script holds the keyspace; waiting for it would hold a
        // worker thread (see `crate::busy`).
        if shared.local.scripts.current_run().is_some() {
            continue;
        }
        let mut store = Some(shared.store());
        if let Some(store) = &mut store {
            store.keyspace.active_expire_cycle(now_ms);
        }
        // An XREADGROUP blocked on a stream that expired runs again.
        crate::connection::serve_blocked_clients(&shared, &mut store, now_ms);
        if let Some(store) = &mut store {
            crate::connection::publish_keyspace_events(&shared, &mut store.keyspace, None);
        }
    }
}

/// Redis's instantaneous metric: the average of the last 16 rates, sampled at most
/// every 100 ms.
#[derive(Default)]
struct RateSampler {
    previous: Option<(u64, u64)>,
    rates: [u64; 16],
    taken: usize,
}

impl RateSampler {
    /// Records the counter's value at `now_ms`; returns the new average rate per
    /// second when a sample was taken.
    fn sample(&mut self, now_ms: u64, counter: u64) -> Option<u64> {
        if let Some((previous_ms, previous_counter)) = self.previous {
            let elapsed_ms = now_ms.saturating_sub(previous_ms);
            if elapsed_ms < 100 {
                return None;
            }
            let rate = counter.saturating_sub(previous_counter) * 1000 / elapsed_ms;
            self.rates[self.taken % self.rates.len()] = rate;
            self.taken += 1;
        }
        self.previous = Some((now_ms, counter));
        let filled = self.taken.min(self.rates.len()) as u64;
        Some(
            self.rates
                .iter()
                .sum::<u64>()
                .checked_div(filled)
                .unwrap_or(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::RateSampler;

    #[test]
    fn rate_is_averaged_over_samples() {
        let mut sampler = RateSampler::default();
        assert_eq!(sampler.sample(1_000, 0), Some(0));
        assert_eq!(sampler.sample(1_050, 10), None, "too soon");
        assert_eq!(sampler.sample(1_100, 100), Some(1000));
        assert_eq!(sampler.sample(1_200, 100), Some(500));
    }
}
