//! Running as one replica of a replicated shard: opening the Raft group, serving
//! node-to-node RPCs, and the leader's periodic expiry proposals.
//!
//! Group membership is static configuration (`--group-members`): every replica
//! is started with the same list and initializes the group with it when its
//! storage is empty; Raft makes the identical initializations agree.

use crate::blocking::Blocking;
use crate::clock;
use crate::config::Config;
use crate::local::NodeLocal;
use anyhow::{bail, Context as _};
use bytes::Bytes;
use keyspace::Keyspace;
use replication::group::{GroupOptions, Registry, ShardGroup};
use replication::log_store::fs::{Fs, StdFs};
use replication::log_store::WriterMode;
use replication::state_machine::{ApplyObserver, ShardState, SharedState};
use replication::{GroupId, NodeAddr, NodeId, Op, Request};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, MutexGuard, TryLockError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// This node's replica of its shard group.
pub struct Replica {
    pub node_id: NodeId,
    pub group: ShardGroup,
    pub members: BTreeMap<NodeId, NodeAddr>,
    /// Clients blocked on this replica (it leads, or did when they blocked).
    pub blocking: Arc<Blocking>,
    /// The node's Pub/Sub, script board and forwarder.
    pub local: Arc<NodeLocal>,
    /// Short runs of writes may share an entry with other clients'
    /// (`raft-shared-entries`).
    pub shared_entries: bool,
    ready: Arc<ReadyKeys>,
    /// Set when the replica stops (its node shuts down, or the replica is
    /// closed); its background tasks end then.
    stop: tokio::sync::watch::Sender<bool>,
}

impl Replica {
    /// Stops this replica for good (it left its group): its background tasks
    /// end, incoming Raft messages for its group are no longer served here,
    /// and its Raft node shuts down; its files stay (see
    /// `ClusterNode::close_group`).
    pub async fn close(&self, registry: &Registry) {
        self.stop.send_replace(true);
        registry.remove(self.group.id);
        if let Err(error) = self.group.close().await {
            tracing::warn!(group = self.group.id, %error, "closing a replica");
        }
    }

    /// Asks the blocked-client task to look at `keys` (after registering a
    /// waiter: an entry applied between its own entry and the registration may
    /// have filled them).
    pub fn signal_ready(&self, db: usize, keys: &[Bytes]) {
        self.ready
            .applied(keys.iter().map(|key| (db, key.clone())).collect());
    }
}

/// Most ready keys held for the blocked-client task; past this the oldest
/// notices are dropped and the task checks every waiter instead.
const MAX_PENDING_READY: usize = 1 << 16;

/// Keys that received elements in applied entries, for the blocked-client task.
struct ReadyKeys {
    pending: std::sync::Mutex<ReadyState>,
    notify: Notify,
    /// Where keyspace events and what scripts publish are delivered.
    local: Arc<NodeLocal>,
}

#[derive(Default)]
struct ReadyState {
    keys: Vec<(usize, Bytes)>,
    /// Too many keys arrived at once: check every waiter's keys.
    overflowed: bool,
}

impl ApplyObserver for ReadyKeys {
    fn applied(&self, ready: Vec<(usize, Bytes)>) {
        {
            let mut state = self
                .pending
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if state.keys.len() + ready.len() > MAX_PENDING_READY {
                state.keys.clear();
                state.overflowed = true;
            } else {
                state.keys.extend(ready);
            }
        }
        self.notify.notify_one();
    }

    fn events(&self, flags: u32, events: Vec<keyspace::notify::Event>) {
        crate::pubsub::publish_events(&self.local.pubsub, flags, events);
    }

    fn script_calls(&self, calls: Vec<(usize, Vec<Bytes>)>) {
        crate::pubsub::feed_script_calls(&self.local.pubsub, calls);
    }

    fn invalidated(&self, invalidations: keyspace::Invalidations) {
        self.local.tracking.invalidate(invalidations, None);
    }

    fn published(&self, messages: Vec<keyspace::Published>) {
        crate::pubsub::deliver_script_messages(
            &self.local.pubsub,
            self.local.forwarder(),
            messages,
        );
    }
}

/// Parses `ID=HOST:PORT@RAFTPORT,...` (RESP address, then the Raft port).
pub fn parse_members(text: &str) -> anyhow::Result<BTreeMap<NodeId, NodeAddr>> {
    let mut members = BTreeMap::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let Some((id, address)) = item.split_once('=') else {
            bail!("group member '{item}' is not ID=HOST:PORT@RAFTPORT");
        };
        let id: NodeId = id
            .parse()
            .with_context(|| format!("node id in group member '{item}'"))?;
        let Some((resp, raft_port)) = address.rsplit_once('@') else {
            bail!("group member '{item}' has no @RAFTPORT");
        };
        let Some((host, _)) = resp.rsplit_once(':') else {
            bail!("group member '{item}' has no :PORT");
        };
        let raft_port: u16 = raft_port
            .parse()
            .with_context(|| format!("raft port in group member '{item}'"))?;
        let node = NodeAddr {
            raft: format!("{host}:{raft_port}"),
            resp: resp.to_string(),
        };
        if members.insert(id, node).is_some() {
            bail!("node id {id} appears twice in the group members");
        }
    }
    Ok(members)
}

/// The hash seed of a group's keyspace: identical on every replica, so that
/// iteration orders (SCAN, random picks, expiry sampling) agree.
pub fn group_hash_seed(group: GroupId) -> u64 {
    0x736c_6f74_7261_6674 ^ group.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Opens the group, starts the Raft RPC server on `raft_listener` and initializes
/// the group on first start.
pub async fn start(
    config: &Config,
    local: Arc<NodeLocal>,
    raft_listener: TcpListener,
    shutdown: tokio::sync::watch::Receiver<bool>,
    seed: u64,
) -> anyhow::Result<Arc<Replica>> {
    let registry = Registry::new();
    serve_raft(raft_listener, registry.clone(), shutdown.clone());
    let client = rpc::RpcClient::new(rpc::ClientOptions::default());
    start_with(
        config,
        local,
        &registry,
        client,
        LogSetup::default(),
        shutdown,
        seed,
    )
    .await
}

/// Where a replica's log lives and how it is written: files through the
/// operating system by a writer thread, or (in a simulation) a simulated disk
/// written by a task.
#[derive(Clone)]
pub struct LogSetup {
    pub writer: WriterMode,
    pub fs: Arc<dyn Fs>,
}

impl Default for LogSetup {
    fn default() -> Self {
        LogSetup {
            writer: WriterMode::Thread,
            fs: Arc::new(StdFs),
        }
    }
}

/// [`start`] with the Raft RPC server left to the caller (it serves
/// `registry`), peers reached through `client`, and the log as `log` says.
pub async fn start_with(
    config: &Config,
    local: Arc<NodeLocal>,
    registry: &Arc<Registry>,
    client: rpc::RpcClient,
    log: LogSetup,
    shutdown: tokio::sync::watch::Receiver<bool>,
    seed: u64,
) -> anyhow::Result<Arc<Replica>> {
    let node_id = config.node_id();
    let members = parse_members(config.group_members())?;
    if !members.contains_key(&node_id) {
        bail!("--node-id {node_id} is not one of --group-members");
    }
    let template = {
        let mut keyspace = Keyspace::new(config.databases(), group_hash_seed(1));
        crate::server::apply_config_to(config, &mut keyspace.config, &local);
        keyspace.config.replicated = true;
        keyspace
    };
    open(
        GroupSpec {
            group_id: 1,
            node_id,
            members,
            dir: Path::new(config.dir()).join("group-1"),
            template,
            founder: None,
            log,
            local,
        },
        config,
        registry,
        client,
        Arc::new(Blocking::new()),
        shutdown,
        seed,
    )
    .await
}

/// Serves node-to-node Raft RPCs for every group in `registry`.
pub fn serve_raft(
    raft_listener: TcpListener,
    registry: Arc<Registry>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let stop = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        if let Err(error) = rpc::serve(raft_listener, registry, stop).await {
            tracing::error!(%error, "raft rpc server failed");
        }
    });
}

/// What a node needs to host one replica of a group.
pub struct GroupSpec {
    pub group_id: GroupId,
    pub node_id: NodeId,
    pub members: BTreeMap<NodeId, NodeAddr>,
    pub dir: std::path::PathBuf,
    /// An empty keyspace with the group's hash seed and configuration.
    pub template: Keyspace,
    /// The member that forms the group on its first start (and so usually
    /// leads it first); the lowest id when not given.
    pub founder: Option<NodeId>,
    pub log: LogSetup,
    pub local: Arc<NodeLocal>,
}

/// Opens this node's replica of a group, registers it for incoming RPCs,
/// initializes the group on its founder's first start, and starts the
/// replica's background tasks (expiry ticks, blocked clients).
pub async fn open(
    spec: GroupSpec,
    config: &Config,
    registry: &Arc<Registry>,
    client: rpc::RpcClient,
    blocking: Arc<Blocking>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    seed: u64,
) -> anyhow::Result<Arc<Replica>> {
    let GroupSpec {
        group_id,
        node_id,
        members,
        dir,
        template,
        founder,
        log,
        local,
    } = spec;
    let mut options = GroupOptions::new(node_id, group_id, dir, template);
    options.fsync = config.raft_fsync();
    options.snapshot_every = config.raft_snapshot_entries();
    options.keep_behind_snapshot = config.raft_keep_entries();
    options.log_memory_limit = config.raft_log_memory();
    options.election_timeout_min_ms = config.raft_election_timeout();
    options.election_timeout_max_ms = config.raft_election_timeout() * 2;
    options.heartbeat_ms = config.raft_heartbeat();
    options.node_heartbeats = true;
    options.seed = seed;
    options.log_writer = log.writer;
    options.log_fs = log.fs;
    let ready = Arc::new(ReadyKeys {
        pending: Default::default(),
        notify: Notify::new(),
        local: local.clone(),
    });
    let group = ShardGroup::open(options, client, Some(ready.clone()))
        .await
        .with_context(|| format!("opening group {group_id}"))?;
    registry.insert(group.clone());
    let initialized = group
        .raft
        .is_initialized()
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    // Exactly one member forms the group: the lowest id, on its first start. If
    // every member initialized, a late one would stand for election with a
    // larger vote and unseat a leader the others had just elected. The others
    // join when the founder first contacts them.
    let founder = founder.or_else(|| members.keys().next().copied());
    if !initialized && founder == Some(node_id) {
        match group.raft.initialize(members.clone()).await {
            Ok(()) => tracing::info!(
                group = group_id,
                members = members.len(),
                "initialized the group"
            ),
            Err(error) => tracing::info!(group = group_id, %error, "group initialization skipped"),
        }
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let replica = Arc::new(Replica {
        node_id,
        group,
        members,
        blocking,
        local,
        shared_entries: config.raft_shared_entries(),
        ready,
        stop,
    });
    tokio::spawn(stop_with_node(replica.clone(), shutdown));
    tokio::spawn(expiry_ticks(replica.clone(), stopped.clone()));
    tokio::spawn(serve_blocked(replica.clone(), stopped.clone()));
    tokio::spawn(release_on_leader_change(replica.clone(), stopped));
    Ok(replica)
}

/// Stops the replica's tasks when the node shuts down (unless the replica was
/// closed first).
async fn stop_with_node(replica: Arc<Replica>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut stopped = replica.stop.subscribe();
    tokio::select! {
        _ = shutdown.wait_for(|stop| *stop) => {
            replica.stop.send_replace(true);
        }
        _ = stopped.wait_for(|stop| *stop) => {}
    }
}

/// On the leader, proposes an expiry tick ten times a second while any key has a
/// TTL: expiry happens through the log, at the log's time, on every replica.
async fn expiry_ticks(replica: Arc<Replica>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        // CLIENT PAUSE on this node keeps the data set still: its shards'
        // expiry waits for the pause to end.
        if !replica.group.raft.is_leader() || replica.local.pause.keys_frozen() {
            continue;
        }
        let (has_volatile, seed) = {
            let mut state = lock_when_free(&replica.group.state).await;
            let has_volatile = state.keyspace.dbs().iter().any(|db| db.expires_len() > 0);
            (has_volatile, state.rng.next_u64())
        };
        if !has_volatile {
            continue;
        }
        let request = Request::new(clock::unix_ms(), seed, Op::ExpireTick);
        if let Err(error) = replica
            .group
            .raft
            .client_write(std::sync::Arc::new(request))
            .await
        {
            tracing::debug!(%error, "expiry tick not committed");
        }
    }
}

/// How often a background task looks again at a state held by a long apply.
const LOCK_RETRY: Duration = Duration::from_millis(1);

/// Locks the shard state from a background task. An entry that runs a script
/// holds the state for as long as the script runs (up to its instruction
/// budget); blocking on the lock would block the runtime worker too, and with
/// one worker the whole node (Raft heartbeats, BUSY replies, SCRIPT KILL)
/// would stop until the script ends. So the task waits asynchronously.
async fn lock_when_free(state: &SharedState) -> MutexGuard<'_, ShardState> {
    loop {
        match state.try_lock() {
            Ok(guard) => return guard,
            Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {}
        }
        tokio::time::sleep(LOCK_RETRY).await;
    }
}

/// Serves clients blocked on keys that received elements: each waiter's command
/// is proposed again, oldest waiter first, through the log like any write; a
/// waiter whose command would still block keeps its place.
async fn serve_blocked(replica: Arc<Replica>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = replica.ready.notify.notified() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let (keys, overflowed) = {
            let mut state = replica
                .ready
                .pending
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            (
                std::mem::take(&mut state.keys),
                std::mem::take(&mut state.overflowed),
            )
        };
        {
            let mut state = lock_when_free(&replica.group.state).await;
            if !replica.blocking.waits_on(replica.group.id) {
                // Nobody waits here: stop recording until someone blocks
                // (registration turns it back on under this lock).
                state.keyspace.set_ready_tracking(false);
                continue;
            }
        }
        let keys = if overflowed {
            replica.blocking.waited_keys()
        } else {
            keys
        };
        let mut seen = std::collections::BTreeSet::new();
        for (db, key) in keys {
            if !seen.insert((db, key.clone())) {
                continue;
            }
            let holding = {
                let state = lock_when_free(&replica.group.state).await;
                let now_ms = clock::unix_ms().max(state.log_time_ms);
                match state
                    .keyspace
                    .dbs()
                    .get(db)
                    .and_then(|d| d.peek(&key, now_ms))
                {
                    Some(entry) => entry.value.type_name(),
                    // Serves XREADGROUP only (see `Blocking::take_first`).
                    None => "none",
                }
            };
            while let Some((ticket, waiter)) =
                replica
                    .blocking
                    .take_first(replica.group.id, db, &key, holding)
            {
                let (reply, block) = crate::replicated::propose(
                    &replica,
                    waiter.db,
                    waiter.protocol,
                    vec![(waiter.arguments.clone(), waiter.spec)],
                )
                .await;
                if block.is_some() {
                    replica.blocking.give_back(ticket);
                    break;
                }
                let reply = reply
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| resp::Frame::error("ERR internal: no reply"));
                replica.blocking.finish(ticket, reply);
            }
        }
    }
}

/// When this replica stops leading, its blocked clients are released with the
/// redirect a write gets (MOVED to the new leader, or CLUSTERDOWN): their
/// commands must run where the log is led.
async fn release_on_leader_change(
    replica: Arc<Replica>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(Duration::from_millis(50));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        if !replica.blocking.waits_on(replica.group.id) {
            continue;
        }
        let Err(forward) = replica.group.raft.as_leader() else {
            continue;
        };
        for (waiter, reply) in replica.blocking.take_all(replica.group.id) {
            let _ = reply.send(crate::replicated::redirect(
                &forward,
                waiter.spec,
                &waiter.arguments,
            ));
        }
    }
}
