//! Hosting Raft groups on a node: opening a group (log store, state machine,
//! openraft) and dispatching incoming RPCs to the right group.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::log_store::fs::Fs;
use crate::types::LogId;
use bytes::Bytes;
use futures_util::StreamExt;
use keyspace::Keyspace;
use openraft::raft::{AppendEntriesResponse, StreamAppendError};
use openraft::{Config, SnapshotPolicy};
use rpc::{IncomingChunks, IncomingMessages, MessageStream, RaftHandler, RpcClient, RpcKind};
use serde::Serialize;
use tracing::Instrument;

use crate::codec;
use crate::log_store::{LogStore, LogStoreOptions, WriterMode};
use crate::network::{NetworkFactory, SnapshotHeader, VoteMessage};
use crate::state_machine::{ApplyObserver, SharedState, SnapshotFile, StateMachine};
use crate::types::{GroupId, NodeId, TypeConfig};

/// The openraft handle of a group.
pub type Raft = openraft::Raft<TypeConfig, StateMachine>;

/// How a group is opened.
#[derive(Clone)]
pub struct GroupOptions {
    pub node_id: NodeId,
    pub group: GroupId,
    /// The group's directory: `log/` and `snapshot/` live under it.
    pub dir: PathBuf,
    /// fsync every commit batch (the default) or leave it to the OS.
    pub fsync: bool,
    /// Where the log's writer runs: its own thread, or a task (simulations).
    pub log_writer: WriterMode,
    pub heartbeat_ms: u64,
    /// The node's heartbeat drives this group's: openraft's own heartbeat
    /// timer is off, and [`Registry::drive_heartbeats`] sends every led
    /// group's heartbeats at once, which then travel as one message per
    /// peer. Off by default (each group on its own timer).
    pub node_heartbeats: bool,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot (and compact the log) after this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot, for followers slightly behind.
    pub keep_behind_snapshot: u64,
    /// Bound on the estimated bytes of the entries the log holds in memory
    /// (0: none); see `keep_log_bounded`.
    pub log_memory_limit: u64,
    /// An empty keyspace with the group's hash seed and configuration.
    pub keyspace: Keyspace,
    /// Seeds this replica's source of entry seeds (used when it leads).
    pub seed: u64,
    /// The file system under the log (a simulated disk in simulations).
    pub log_fs: Arc<dyn crate::log_store::fs::Fs>,
}

impl GroupOptions {
    pub fn new(node_id: NodeId, group: GroupId, dir: PathBuf, keyspace: Keyspace) -> Self {
        GroupOptions {
            node_id,
            group,
            dir,
            fsync: true,
            log_writer: WriterMode::Thread,
            heartbeat_ms: 50,
            node_heartbeats: false,
            election_timeout_min_ms: 300,
            election_timeout_max_ms: 600,
            snapshot_every: 50_000,
            keep_behind_snapshot: 5_000,
            log_memory_limit: DEFAULT_LOG_MEMORY_LIMIT,
            keyspace,
            seed: group,
            log_fs: Arc::new(crate::log_store::fs::StdFs),
        }
    }

    /// The heartbeat interval openraft is given. When the node's beat
    /// sends the heartbeats, openraft's interval only paces its tick (13/64
    /// of it), which is then left with watching the election timer, and
    /// bounds a heartbeat's wait for its reply: two thirds of the minimum
    /// election timeout (the most its validation allows, with a margin),
    /// so that an idle group ticks half as often; never less than the
    /// heartbeat itself.
    fn raft_heartbeat_interval(&self) -> u64 {
        if self.node_heartbeats {
            (self.election_timeout_min_ms * 2 / 3).max(self.heartbeat_ms)
        } else {
            self.heartbeat_ms
        }
    }

    fn raft_config(&self) -> io::Result<Config> {
        let config = Config {
            cluster_name: format!("group-{}", self.group),
            heartbeat_interval: self.raft_heartbeat_interval(),
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            // Purging is `keep_log_bounded`'s: openraft's own policy, run
            // after each snapshot, would move its purge point back below one
            // that task has already scheduled.
            max_in_snapshot_log_to_keep: u64::MAX,
            install_snapshot_timeout: 10_000,
            max_payload_entries: 4096,
            // A restarted leader must win an election again. Restoring its
            // leadership at startup is unsafe here: the committed index is
            // saved lazily and applying does not flush, so the restored leader
            // can confirm a read index behind writes it had acknowledged and
            // serve a stale read (found by the simulation, seed 8).
            enable_leader_restore: Some(false),
            ..Default::default()
        };
        config
            .validate()
            .map_err(|error| io::Error::other(error.to_string()))
    }
}

/// One Raft group hosted on this node.
#[derive(Clone)]
pub struct ShardGroup {
    pub id: GroupId,
    pub node_id: NodeId,
    pub raft: Raft,
    pub state: SharedState,
    pub log: LogStore,
    snapshot_dir: PathBuf,
    /// The disk the log and the snapshots are on.
    fs: Arc<dyn Fs>,
    /// The term (plus one; 0 for none) in which this replica handed its
    /// leadership over: in that term its lease no longer vouches for reads
    /// (the target is elected at once, without waiting for the lease to run
    /// out). A later term of its own leads normally again.
    handed_over_in: Arc<AtomicU64>,
    /// Proposals waiting to share one entry (see `ShardGroup::propose_batched`).
    pub(crate) waiting: Arc<std::sync::Mutex<crate::serve::Waiting>>,
    /// Set by [`ShardGroup::close`]: no snapshot file is written after it.
    closed: Arc<tokio::sync::Mutex<bool>>,
    /// When this replica last accepted an AppendEntries (heartbeats
    /// included), in milliseconds since `opened_at`.
    last_append_ms: Arc<AtomicU64>,
    opened_at: tokio::time::Instant,
    /// Heartbeats come from the node's beat (`GroupOptions::node_heartbeats`).
    node_heartbeats: bool,
    /// `GroupOptions::heartbeat_ms`: the beat a registry holding this group
    /// drives, when the node's beat sends its heartbeats.
    heartbeat: Duration,
}

impl ShardGroup {
    /// Opens (or creates) the group's storage and starts its Raft node.
    pub async fn open(
        options: GroupOptions,
        client: RpcClient,
        observer: Option<Arc<dyn ApplyObserver>>,
    ) -> io::Result<ShardGroup> {
        let config = Arc::new(options.raft_config()?);
        let log_options = LogStoreOptions {
            fsync: options.fsync,
            writer: options.log_writer,
            fs: options.log_fs.clone(),
            ..LogStoreOptions::default()
        };
        let log = LogStore::open(&options.dir.join("log"), log_options).await?;
        let snapshot_dir = options.dir.join("snapshot");
        let mut state_machine = StateMachine::open(
            &snapshot_dir,
            options.log_fs.clone(),
            options.keyspace.clone(),
            options.seed,
        )?;
        if let Some(observer) = observer {
            state_machine.set_observer(observer);
        }
        state_machine.offload_builds(options.log_writer == WriterMode::Thread);
        let state = state_machine.state();
        let closed = state_machine.closing();
        let network = NetworkFactory::new(
            client,
            options.group,
            Duration::from_millis(options.election_timeout_min_ms),
        );
        // Openraft's tasks inherit this span (the runtime instruments what
        // it spawns), so their logs name the node and the group.
        let span = tracing::info_span!("raft", node = options.node_id, group = options.group);
        let raft = Raft::new(options.node_id, config, network, log.clone(), state_machine)
            .instrument(span)
            .await
            .map_err(|error| io::Error::other(error.to_string()))?;
        if options.node_heartbeats {
            raft.runtime_config().heartbeat(false);
        }
        let group = ShardGroup {
            id: options.group,
            node_id: options.node_id,
            raft,
            state,
            log,
            snapshot_dir,
            fs: options.log_fs.clone(),
            handed_over_in: Arc::default(),
            waiting: Arc::default(),
            closed,
            last_append_ms: Arc::default(),
            opened_at: tokio::time::Instant::now(),
            node_heartbeats: options.node_heartbeats,
            heartbeat: Duration::from_millis(options.heartbeat_ms),
        };
        // A watch period per replica (from its seed), so that the followers
        // of a dead leader rarely stand at the same moment: between a twelfth
        // and a quarter of the election timeout (25-75 ms by default).
        let step = (options.election_timeout_min_ms / 12).max(1);
        let period = Duration::from_millis(step + options.seed % (step * 2));
        let lease = Duration::from_millis(options.election_timeout_max_ms);
        let longest = Duration::from_millis(options.election_timeout_min_ms);
        tokio::spawn(stand_when_the_leader_is_silent(
            group.clone(),
            lease,
            period,
            longest,
        ));
        tokio::spawn(keep_log_bounded(
            group.clone(),
            options.keep_behind_snapshot,
            options.log_memory_limit,
        ));
        Ok(group)
    }

    fn note_append(&self) {
        let elapsed = self.opened_at.elapsed().as_millis() as u64;
        self.last_append_ms.store(elapsed, Ordering::Relaxed);
    }

    /// How long since this replica last accepted an AppendEntries.
    fn silence(&self) -> Duration {
        let last = self.last_append_ms.load(Ordering::Relaxed);
        self.opened_at
            .elapsed()
            .saturating_sub(Duration::from_millis(last))
    }

    /// Hands this replica's leadership to `to`. Lease reads stop here at
    /// once: the target starts its election without waiting for this
    /// leader's lease to lapse, so the lease no longer proves that no other
    /// leader exists (the simulation caught a stale read without this, seed
    /// 268). Reads then confirm leadership with a heartbeat round, which the
    /// voters refuse once they follow the new term.
    pub async fn transfer_leadership(&self, to: NodeId) {
        use openraft::async_runtime::WatchReceiver;
        let term = self.raft.metrics().borrow_watched().current_term;
        self.handed_over_in.store(term + 1, Ordering::SeqCst);
        let _ = self.raft.trigger().transfer_leader(to).await;
    }

    /// Stops this replica for good and leaves its files alone: Raft shut
    /// down, no snapshot build or install writes any more, and every log
    /// write queued has reached the files. The data stays (a replica of
    /// the group placed on this node again resumes from it).
    pub async fn close(&self) -> io::Result<()> {
        let stopped = self
            .raft
            .shutdown()
            .await
            .map_err(|error| io::Error::other(error.to_string()));
        *self.closed.lock().await = true;
        self.log.settle().await?;
        stopped
    }

    /// A copy of the group's latest Raft metrics.
    pub fn metrics(&self) -> openraft::RaftMetrics<TypeConfig> {
        use openraft::async_runtime::WatchReceiver;
        self.raft.metrics().borrow_watched().clone()
    }

    /// True when a read of the applied state is linearizable right now without
    /// asking the Raft core: this replica leads, a quorum acknowledged its
    /// leadership less than one leader lease ago (no other leader can have been
    /// elected since), and `applied` (the state machine's last applied entry)
    /// is of its own term, so every entry committed by earlier leaders is
    /// applied. Writes this leader acknowledged are applied before their
    /// replies, so they are visible too. The metrics may lag; a stale
    /// acknowledgement time only makes the check stricter. When it fails, the
    /// caller asks the core (`ensure_linearizable`).
    pub fn holds_read_lease(&self, applied: Option<LogId>) -> bool {
        use openraft::async_runtime::WatchReceiver;
        use openraft::Instant as _;
        let Some(applied) = applied else {
            return false;
        };
        let watch = self.raft.metrics();
        let metrics = watch.borrow_watched();
        if metrics.state != openraft::ServerState::Leader
            || applied.leader_id.term != metrics.current_term
            || applied.leader_id.node_id != self.node_id
            || self.handed_over_in.load(Ordering::SeqCst) == metrics.current_term + 1
        {
            return false;
        }
        let Some(acked) = metrics.last_quorum_acked.as_ref() else {
            return false;
        };
        let lease = std::time::Duration::from_millis(self.raft.config().election_timeout_max);
        let now = openraft::alias::InstantOf::<TypeConfig>::now();
        now < **acked + lease
    }
}

/// The groups hosted on this node, by id; serves the node's Raft RPCs.
#[derive(Default)]
pub struct Registry {
    groups: RwLock<BTreeMap<GroupId, ShardGroup>>,
    incoming: AtomicU64,
    /// Whether the node's beat runs (see [`Registry::drive_heartbeats`]).
    beating: AtomicBool,
}

impl Registry {
    pub fn new() -> Arc<Registry> {
        Arc::new(Registry::default())
    }

    /// Hosts `group`. A group that takes its heartbeats from the node's
    /// beat starts that beat (at its heartbeat interval) if nothing has yet,
    /// so such a group never goes without heartbeats.
    pub fn insert(self: &Arc<Self>, group: ShardGroup) {
        if group.node_heartbeats {
            self.drive_heartbeats(group.heartbeat);
        }
        self.groups
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(group.id, group);
    }

    pub fn remove(&self, id: GroupId) -> Option<ShardGroup> {
        self.groups
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&id)
    }

    pub fn get(&self, id: GroupId) -> Option<ShardGroup> {
        self.groups
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&id)
            .cloned()
    }

    /// Every `period`, while the registry lives, makes each group it holds
    /// that leads and takes its heartbeats from the node send them: all at
    /// the same moment, so that the rpc client sends those towards one peer
    /// as one message (`RpcClient::heartbeat`). One timer for the node
    /// instead of one per group. Only the first call starts it (a node's
    /// groups share one heartbeat setting); [`Registry::insert`] makes it.
    fn drive_heartbeats(self: &Arc<Self>, period: Duration) {
        if self.beating.swap(true, Ordering::SeqCst) {
            return;
        }
        let registry = Arc::downgrade(self);
        tokio::spawn(async move {
            use openraft::async_runtime::WatchReceiver;
            let mut beat = tokio::time::interval(period);
            beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                beat.tick().await;
                let Some(registry) = registry.upgrade() else {
                    return;
                };
                let leading: Vec<Raft> = registry
                    .groups
                    .read()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .values()
                    .filter(|group| {
                        group.node_heartbeats
                            && group.raft.metrics().borrow_watched().state
                                == openraft::ServerState::Leader
                    })
                    .map(|group| group.raft.clone())
                    .collect();
                drop(registry);
                for raft in leading {
                    // Fails only for a group that stopped meanwhile.
                    let _ = raft.trigger().heartbeat().await;
                }
            }
        });
    }

    fn group(&self, id: GroupId) -> Result<ShardGroup, String> {
        self.get(id)
            .ok_or_else(|| format!("group {id} is not hosted here"))
    }
}

fn reply<T: Serialize>(result: Result<T, String>) -> Bytes {
    Bytes::from(codec::encode(&result))
}

impl RaftHandler for Registry {
    async fn handle(&self, kind: RpcKind, group: u64, payload: Bytes) -> Result<Bytes, String> {
        let group = match self.group(group) {
            Ok(group) => group,
            Err(error) => return Err(error),
        };
        let raft = &group.raft;
        let bad = |error: io::Error| format!("bad request: {error}");
        Ok(match kind {
            RpcKind::AppendEntries => {
                let request = codec::decode_append(&payload).map_err(bad)?;
                let response = raft.append_entries(request).await;
                // Anything but a higher vote means this replica took the
                // sender as its leader (a conflict is only a log mismatch).
                if response
                    .as_ref()
                    .is_ok_and(|reply| !matches!(reply, AppendEntriesResponse::HigherVote(_)))
                {
                    group.note_append();
                }
                reply(response.map_err(|e| e.to_string()))
            }
            RpcKind::Vote => match codec::decode::<VoteMessage>(&payload).map_err(bad)? {
                VoteMessage::Vote(request) => {
                    reply(raft.vote(request).await.map_err(|e| e.to_string()))
                }
                VoteMessage::PreVote(request) => {
                    reply(raft.pre_vote(request).await.map_err(|e| e.to_string()))
                }
            },
            RpcKind::TransferLeader => {
                let request = codec::decode(&payload).map_err(bad)?;
                reply(
                    raft.handle_transfer_leader(request)
                        .await
                        .map_err(|e| e.to_string()),
                )
            }
        })
    }

    /// A leader's pipelined replication session: each request is handed to
    /// Raft as it arrives (openraft keeps up to 64 in flight), and each reply,
    /// `Result<StreamAppendResult, String>`, is sent once its entries are on
    /// disk, in order. A request that cannot be decoded ends the session.
    async fn stream(
        &self,
        group: u64,
        messages: IncomingMessages,
    ) -> Result<MessageStream, String> {
        let group = self.group(group)?;
        let requests = messages.scan((), |_, message| {
            let request = match message {
                Ok(payload) => codec::decode_append(&payload)
                    .map_err(|error| tracing::warn!("bad append in a stream: {error}"))
                    .ok(),
                Err(_) => None,
            };
            std::future::ready(request)
        });
        let replies = group.raft.stream_append(requests);
        let replies = replies.map(move |result| {
            // As for a unary append: anything but a higher vote means this
            // replica took the sender as its leader.
            if let Ok(Ok(_) | Err(StreamAppendError::Conflict(_))) = &result {
                group.note_append();
            }
            reply(result.map_err(|fatal| fatal.to_string()))
        });
        Ok(Box::pin(replies))
    }

    async fn install_snapshot(
        &self,
        group: u64,
        header: Bytes,
        mut chunks: IncomingChunks,
    ) -> Result<Bytes, String> {
        let group = self.group(group)?;
        let header: SnapshotHeader =
            codec::decode(&header).map_err(|error| format!("bad snapshot header: {error}"))?;
        let tag = self.incoming.fetch_add(1, Ordering::Relaxed);
        let path = StateMachine::incoming_path(&group.snapshot_dir, tag);
        let received = receive_file(group.fs.as_ref(), &path, &mut chunks).await;
        if let Err(error) = received {
            let _ = group.fs.remove(&path);
            return Err(format!("receiving snapshot: {error}"));
        }
        let snapshot = openraft::Snapshot {
            meta: header.meta,
            snapshot: SnapshotFile {
                path: path.clone(),
                fs: group.fs.clone(),
            },
        };
        let result = group
            .raft
            .install_full_snapshot(header.vote, snapshot)
            .await
            .map_err(|error| error.to_string());
        // Installed snapshots are renamed into place; anything left is stale.
        let _ = group.fs.remove(&path);
        Ok(reply(result))
    }
}

async fn receive_file(fs: &dyn Fs, path: &Path, chunks: &mut IncomingChunks) -> io::Result<()> {
    use std::io::Write;
    let mut file = crate::state_machine::create_file(fs, path)?;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|error| io::Error::other(error.to_string()))?;
        file.write_all(&chunk)?;
    }
    crate::state_machine::finish_file(file)
}

/// Starts an election, after a Pre-Vote round, as soon as a follower's lease
/// on its leader has lapsed, instead of when its election timer next fires.
///
/// A follower refuses to vote for `lease` (the maximum election timeout)
/// after its leader's last heartbeat; that refusal is what makes lease reads
/// safe. With only the election timer, a candidate whose timer fired before
/// the other followers' leases lapsed was refused and waited a whole new
/// timeout: about two timeouts from a leader's death to a new leader. Here a
/// follower that has heard nothing for `lease` asks for a Pre-Vote, then
/// again after `period`, twice that, and so on up to `longest` between
/// tries: nothing changes where a Pre-Vote is refused (another follower still
/// holds its lease, or a leader still holds a quorum), so a live leader is
/// never disturbed and no term is spent. The growing gap matters: each try
/// supersedes the round before it, so tries closer together than a round
/// trip would never complete one (seen in the simulation of a cluster with
/// 100 ms links: a shard stayed leaderless).
async fn stand_when_the_leader_is_silent(
    group: ShardGroup,
    lease: Duration,
    period: Duration,
    longest: Duration,
) {
    use openraft::async_runtime::WatchReceiver;
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut gap = period;
    let mut next_try = tokio::time::Instant::now();
    loop {
        ticks.tick().await;
        if group.silence() <= lease {
            gap = period;
            continue;
        }
        if tokio::time::Instant::now() < next_try {
            continue;
        }
        let stand = {
            let metrics = group.raft.metrics();
            let metrics = metrics.borrow_watched();
            if metrics.running_state.is_err() {
                return;
            }
            metrics.state == openraft::ServerState::Follower
                && metrics
                    .current_leader
                    .is_some_and(|leader| leader != group.node_id)
                && metrics
                    .membership_config
                    .membership()
                    .voter_ids()
                    .any(|voter| voter == group.node_id)
        };
        if !stand {
            continue;
        }
        if group.raft.trigger().elect(true).await.is_err() {
            return;
        }
        next_try = tokio::time::Instant::now() + gap;
        gap = (gap * 2).min(longest);
    }
}

/// Default bound on a log's entries held in memory (`raft-log-memory`).
pub const DEFAULT_LOG_MEMORY_LIMIT: u64 = 64 << 20;

/// How often `keep_log_bounded` looks at the log.
const LOG_CHECK: Duration = Duration::from_millis(100);

/// Purges the entries a snapshot covers and keeps the entries the log holds
/// in memory near `limit` bytes (0: no bound), whatever their size.
///
/// Behind the last snapshot, `keep` entries stay for followers slightly
/// behind (a follower further behind gets the snapshot). Snapshots come every
/// `snapshot_every` entries, and with large values that many entries could
/// take gigabytes, so once the log holds more than `limit`: if the applied
/// entries since the last snapshot take half of it, and at least as much as
/// the last snapshot file (so that, as Redis's AOF rewrites, a large keyspace
/// is written out again only after about its own size of writes, not every
/// few megabytes), a snapshot is built now (openraft ignores the request
/// while one is being built); and the entries the snapshot covers are purged
/// down to a quarter of the limit behind it, even if fewer than `keep` stay.
async fn keep_log_bounded(group: ShardGroup, keep: u64, limit: u64) {
    use openraft::async_runtime::WatchReceiver;
    let mut ticks = tokio::time::interval(LOG_CHECK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (snapshot, applied, purged) = {
            let metrics = group.raft.metrics();
            let metrics = metrics.borrow_watched();
            // Ends with the group (a closed group's log must not stay held).
            if metrics.running_state.is_err() {
                return;
            }
            let index = |id: &Option<LogId>| id.as_ref().map(|id| id.index);
            (
                index(&metrics.snapshot),
                index(&metrics.last_applied).unwrap_or(0),
                index(&metrics.purged),
            )
        };
        let over = limit > 0 && group.log.memory_bytes() > limit;
        if over {
            // No file yet: size 0.
            let last_file = group
                .fs
                .size(&group.snapshot_dir.join("current.snap"))
                .unwrap_or(0);
            let since = group.log.bytes_between(snapshot.unwrap_or(0), applied);
            if since >= (limit / 2).max(last_file) && group.raft.trigger().snapshot().await.is_err()
            {
                return;
            }
        }
        // Nothing can be purged before the first snapshot.
        let Some(snapshot) = snapshot else {
            continue;
        };
        let mut upto = snapshot.saturating_sub(keep);
        if over {
            if let Some(point) = group.log.purge_point(snapshot, limit / 4) {
                upto = upto.max(point);
            }
        }
        // Fails only when the group has stopped.
        if upto > 0
            && purged.is_none_or(|purged| upto > purged)
            && group.raft.trigger().purge_log(upto).await.is_err()
        {
            return;
        }
    }
}

/// Default deadline for one Raft RPC (heartbeats and appends).
pub const RPC_DEADLINE: Duration = Duration::from_millis(1000);

#[cfg(test)]
mod tests {
    use super::*;

    fn options(node_heartbeats: bool, heartbeat_ms: u64) -> GroupOptions {
        let mut options = GroupOptions::new(1, 1, PathBuf::new(), Keyspace::new(1, 0));
        options.node_heartbeats = node_heartbeats;
        options.heartbeat_ms = heartbeat_ms;
        options
    }

    #[test]
    fn groups_heartbeating_with_the_node_tick_at_the_election_timeouts_pace() {
        let interval = |node, heartbeat| {
            options(node, heartbeat)
                .raft_config()
                .expect("a valid configuration")
                .heartbeat_interval
        };
        // Their own heartbeat timer: openraft's interval is the heartbeat.
        assert_eq!(interval(false, 50), 50);
        assert_eq!(interval(false, 100), 100);
        // The node's beat: two thirds of the minimum election timeout (300),
        // or the heartbeat itself when that is longer.
        assert_eq!(interval(true, 100), 200);
        assert_eq!(interval(true, 240), 240);
        let mut short = options(true, 50);
        short.election_timeout_min_ms = 150;
        short.election_timeout_max_ms = 300;
        assert_eq!(short.raft_config().unwrap().heartbeat_interval, 100);
    }
}
