//! A shard group's replicas as simulated hosts, and the driver's view of them.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use keyspace::Keyspace;
use openraft::ServerState;
use replication::group::{GroupOptions, Registry, ShardGroup};
use replication::log_store::WriterMode;
use replication::serve::Proposal;
use replication::state_machine::lock;
use replication::{GroupId, NodeAddr, NodeId, Op, Request};
use resp::Frame;

use crate::disk::SimDisk;

/// The Raft port every simulated replica listens on.
pub const RAFT_PORT: u16 = 7100;

/// The one group these scenarios replicate.
pub const GROUP: GroupId = 1;

/// Unix time at the simulation's start; log time is this plus simulated time.
const EPOCH_MS: u64 = 1_700_000_000_000;

/// The simulated host name of a replica.
pub fn host_name(id: NodeId) -> String {
    format!("node{id}")
}

/// The group's members, replicas `1..=count`.
pub fn members(count: u64) -> BTreeMap<NodeId, NodeAddr> {
    (1..=count)
        .map(|id| {
            let host = host_name(id);
            let address = NodeAddr {
                raft: format!("{host}:{RAFT_PORT}"),
                resp: format!("{host}:6379"),
            };
            (id, address)
        })
        .collect()
}

/// The replicas that are running, by node id: the driver's handles on them.
#[derive(Clone, Default)]
pub struct Handles(Arc<Mutex<BTreeMap<NodeId, ShardGroup>>>);

impl Handles {
    pub fn insert(&self, id: NodeId, group: ShardGroup) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(id, group);
    }

    /// Forgets a replica that is going down (its host crashes).
    pub fn remove(&self, id: NodeId) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&id);
    }

    pub fn get(&self, id: NodeId) -> Option<ShardGroup> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&id)
            .cloned()
    }

    /// The replica among `ids` that is leader and knows it, of the newest
    /// term any of them knows; `None` while none is (an election under way).
    /// A leader cut off from the others keeps believing it leads: asked
    /// first, it answered for a membership it no longer had (seed 105
    /// promoted nobody, as the stale leader still counted the demoted
    /// replica a voter).
    pub fn leader_among(&self, ids: &[NodeId]) -> Option<NodeId> {
        let metrics: Vec<(NodeId, openraft::RaftMetrics<replication::TypeConfig>)> = ids
            .iter()
            .filter_map(|id| Some((*id, self.get(*id)?.metrics())))
            .collect();
        let newest = metrics
            .iter()
            .map(|(_, metrics)| metrics.current_term)
            .max()?;
        metrics.into_iter().find_map(|(id, metrics)| {
            (metrics.state == ServerState::Leader
                && metrics.current_leader == Some(id)
                && metrics.current_term == newest)
                .then_some(id)
        })
    }

    /// Waits (in simulated time) until one of `ids` leads; `None` after `limit`.
    pub async fn wait_for_leader(&self, ids: &[NodeId], limit: Duration) -> Option<NodeId> {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if let Some(leader) = self.leader_among(ids) {
                return Some(leader);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }

    /// Replica `id`'s applied index and state digest.
    /// Replica `id`'s state described for a report: log time and each key
    /// with its type and TTL.
    pub fn describe_state(&self, id: NodeId) -> Option<String> {
        let group = self.get(id)?;
        let state = lock(&group.state);
        let mut keys = Vec::new();
        for (index, db) in state.keyspace.dbs().iter().enumerate() {
            for (key, entry) in db.iter(0) {
                keys.push(format!(
                    "{index}:{} expires {:?}",
                    String::from_utf8_lossy(key),
                    entry.expire_at_ms()
                ));
            }
        }
        Some(format!("log time {} keys {keys:?}", state.log_time_ms))
    }

    pub fn applied_and_digest(&self, id: NodeId) -> Option<(u64, String)> {
        let group = self.get(id)?;
        let state = lock(&group.state);
        let applied = state.last_applied.map(|log_id| log_id.index).unwrap_or(0);
        Some((
            applied,
            keyspace::digest::digest(&state.keyspace, state.log_time_ms),
        ))
    }
}

/// How the simulated replicas keep their log.
#[derive(Clone, Copy, Debug)]
pub struct Storage {
    /// Build a snapshot (and compact the log) after this many entries.
    pub snapshot_every: u64,
    /// Entries kept behind a snapshot.
    pub keep_behind_snapshot: u64,
    /// Bound on the bytes of log entries held in memory (`raft-log-memory`).
    pub log_memory_limit: u64,
    /// Replicas (bit `1 << id`) that serve no stream sessions, as a node of
    /// a version before them: their leaders replicate to them by unary
    /// appends (a rolling upgrade).
    pub without_streams: u64,
    /// The replicas take their heartbeats from their registry's beat, as a
    /// node's groups do, instead of each group's own timer.
    pub node_heartbeats: bool,
}

impl Default for Storage {
    fn default() -> Self {
        let defaults = GroupOptions::new(0, 0, PathBuf::new(), Keyspace::new(1, 0));
        Storage {
            snapshot_every: defaults.snapshot_every,
            keep_behind_snapshot: defaults.keep_behind_snapshot,
            log_memory_limit: defaults.log_memory_limit,
            without_streams: 0,
            node_heartbeats: false,
        }
    }
}

/// Adds replicas `1..=count` as hosts; replica 1 initializes the group. A
/// host that is bounced reopens its group from its files. A replica with a
/// disk in `disks` keeps its log there; the others on the real file system.
pub fn add_replicas(
    sim: &mut turmoil::Sim<'_>,
    count: u64,
    root: PathBuf,
    handles: &Handles,
    storage: Storage,
    disks: &BTreeMap<NodeId, SimDisk>,
) {
    for id in 1..=count {
        let dir = root.join(host_name(id));
        let handles = handles.clone();
        let disk = disks.get(&id).cloned();
        sim.host(host_name(id), move || {
            run_replica(
                id,
                count,
                dir.clone(),
                handles.clone(),
                storage,
                disk.clone(),
            )
        });
    }
}

async fn run_replica(
    id: NodeId,
    count: u64,
    dir: PathBuf,
    handles: Handles,
    storage: Storage,
    disk: Option<SimDisk>,
) -> Result<(), Box<dyn Error>> {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", RAFT_PORT)).await?;
    let mut template = Keyspace::new(16, 0x5eed ^ GROUP);
    template.config.replicated = true;
    template.config.scripting = Some(scripting::setup(keyspace::ScriptActivity::new()));
    let mut options = GroupOptions::new(id, GROUP, dir, template);
    options.log_writer = WriterMode::Task;
    options.seed = id;
    options.snapshot_every = storage.snapshot_every;
    options.keep_behind_snapshot = storage.keep_behind_snapshot;
    options.log_memory_limit = storage.log_memory_limit;
    options.node_heartbeats = storage.node_heartbeats;
    if let Some(disk) = disk {
        options.log_fs = Arc::new(disk);
    }
    let client =
        rpc::RpcClient::with_connector(rpc::ClientOptions::simulated(), crate::net::connector());
    let group = ShardGroup::open(options, client, None).await?;
    let registry = Registry::new();
    registry.insert(group.clone());
    if storage.without_streams & (1 << id) != 0 {
        tokio::spawn(rpc::serve_with_incoming(
            crate::net::incoming(listener),
            Arc::new(WithoutStreams(registry)),
            std::future::pending(),
        ));
    } else {
        tokio::spawn(rpc::serve_with_incoming(
            crate::net::incoming(listener),
            registry,
            std::future::pending(),
        ));
    }
    if id == 1 && !group.raft.is_initialized().await? {
        group.raft.initialize(members(count)).await?;
    }
    handles.insert(id, group);
    std::future::pending::<()>().await;
    Ok(())
}

/// A replica's Raft service as a version without stream sessions serves it.
struct WithoutStreams(Arc<Registry>);

impl rpc::RaftHandler for WithoutStreams {
    fn serves_streams(&self) -> bool {
        false
    }

    async fn handle(
        &self,
        kind: rpc::RpcKind,
        group: u64,
        payload: Bytes,
    ) -> Result<Bytes, String> {
        self.0.handle(kind, group, payload).await
    }

    async fn stream(
        &self,
        group: u64,
        messages: rpc::IncomingMessages,
    ) -> Result<rpc::MessageStream, String> {
        self.0.stream(group, messages).await
    }

    async fn install_snapshot(
        &self,
        group: u64,
        header: Bytes,
        chunks: rpc::IncomingChunks,
    ) -> Result<Bytes, String> {
        self.0.install_snapshot(group, header, chunks).await
    }
}

/// Each replica's wall clock: simulated time plus a fixed offset and a drift
/// (parts per million of the time elapsed), drawn per run. Entries carry the
/// proposing leader's clock, so skewed clocks exercise log time (monotonic
/// across leaders) without touching Raft's own timers.
#[derive(Clone, Default)]
pub struct Clocks {
    skews: BTreeMap<NodeId, (i64, i64)>,
}

impl Clocks {
    /// Offsets within `offset_ms` either way and drifts within `drift_ppm`.
    pub fn draw(rng: &mut crate::rng::Rng, nodes: u64, offset_ms: u64, drift_ppm: u64) -> Clocks {
        let mut signed = |bound: u64| rng.below(2 * bound + 1) as i64 - bound as i64;
        Clocks {
            skews: (1..=nodes)
                .map(|node| (node, (signed(offset_ms), signed(drift_ppm))))
                .collect(),
        }
    }

    /// Fixed offsets (ms) per node, without drift.
    pub fn with_offsets(offsets: &[(NodeId, i64)]) -> Clocks {
        Clocks {
            skews: offsets
                .iter()
                .map(|&(node, offset)| (node, (offset, 0)))
                .collect(),
        }
    }

    /// Replica `node`'s clock now, in Unix milliseconds.
    pub fn now_ms(&self, node: NodeId) -> u64 {
        self.now_micros(node) / 1000
    }

    /// Replica `node`'s clock now, in Unix microseconds.
    pub fn now_micros(&self, node: NodeId) -> u64 {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default().as_micros() as i64;
        let (offset, drift) = self.skews.get(&node).copied().unwrap_or((0, 0));
        (EPOCH_MS as i64 * 1000 + elapsed + offset * 1000 + elapsed * drift / 1_000_000) as u64
    }

    /// One line per replica for the trace.
    pub fn describe(&self) -> String {
        self.skews
            .iter()
            .map(|(node, (offset, drift))| format!("node{node} {offset:+}ms {drift:+}ppm"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The log time of an entry proposed now.
pub fn now_ms() -> u64 {
    EPOCH_MS + turmoil::sim_elapsed().unwrap_or_default().as_millis() as u64
}

/// Proposes one command on `group` and returns its reply once applied.
pub async fn write(group: &ShardGroup, command: &[&str], seed: u64) -> Result<Frame, String> {
    let request = Request::new(
        now_ms(),
        seed,
        Op::Exec {
            db: 0,
            resp3: false,
            watched: Vec::new(),
            commands: vec![command
                .iter()
                .map(|part| Bytes::copy_from_slice(part.as_bytes()))
                .collect()],
        },
    );
    match group.propose(request, Duration::from_secs(5)).await {
        Proposal::Applied(response) => response
            .replies
            .into_iter()
            .next()
            .ok_or_else(|| "no reply".to_string()),
        other => Err(format!("{other:?}")),
    }
}
