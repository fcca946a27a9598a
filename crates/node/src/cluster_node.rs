//! A node of a cluster (`--cluster-enabled yes`): it hosts a replica of the
//! metadata group (when it is one of its voters) and replicas of the shards the
//! topology places on it, all on one Raft RPC listener, and routes each request
//! by hash slot.
//!
//! The topology reaches a node twice: once directly, when `slotraft cluster
//! create` hands every node the same initial topology (`SLOTRAFT BOOTSTRAP`,
//! saved in the node's directory so a restart finds it), and afterwards through
//! the metadata group, whose founder proposes the initial topology and which
//! carries every later change with a growing epoch. A task on every node
//! watches the metadata state, opens the replicas a newer topology places on
//! it, and reports the shards it leads (so every node can present leaders in
//! CLUSTER SLOTS and send MOVED to them).

use crate::blocking::Blocking;
use crate::clock;
use crate::config::Config;
use crate::local::NodeLocal;
use crate::replica::{self, GroupSpec, Replica};
use anyhow::{bail, Context as _};
use bytes::Bytes;
use cluster::Topology;
use keyspace::{CommandSpec, Keyspace, KeyspaceConfig};
use openraft::raft::linearizable_read::LinearizerOption;
use replication::group::Registry;
use replication::meta;
use replication::state_machine::lock;
use replication::{NodeAddr, Op, Request};
use resp::Frame;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

use cluster::topology::METADATA_GROUP;

/// How close (in log entries) a new learner must be to the leader's log before
/// it is made a voter.
const CAUGHT_UP_ENTRIES: u64 = 64;

/// The reply for a slot no shard owns.
pub const SLOT_NOT_SERVED: &str = "CLUSTERDOWN Hash slot not served";

/// This node's permanent identity: its Raft node id and its Redis node name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub id: u64,
    pub name: String,
}

impl Identity {
    /// Loads `dir/node.identity`, or creates it (with `--node-id` when given,
    /// else a random id) on first start.
    pub fn load_or_create(dir: &Path, wanted_id: u64, random: u64) -> anyhow::Result<Identity> {
        let path = dir.join("node.identity");
        if let Ok(text) = std::fs::read_to_string(&path) {
            let mut words = text.split_whitespace();
            let (Some(id), Some(name)) = (words.next(), words.next()) else {
                bail!("{} is malformed", path.display());
            };
            let id: u64 = id
                .parse()
                .with_context(|| format!("node id in {}", path.display()))?;
            if wanted_id != 0 && wanted_id != id {
                bail!("--node-id {wanted_id} differs from the saved id {id}");
            }
            return Ok(Identity {
                id,
                name: name.to_string(),
            });
        }
        let mut rng = keyspace::Rng::new(random);
        let id = if wanted_id != 0 {
            wanted_id
        } else {
            // Keep ids within what every client and tool prints without loss.
            (rng.next_u64() >> 12).max(1)
        };
        let name = crate::admin::random_name(&mut rng);
        write_atomically(&path, format!("{id} {name}\n").as_bytes())?;
        Ok(Identity { id, name })
    }
}

/// Writes a file so that a crash leaves either the old or the new contents.
fn write_atomically(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(data)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[derive(Default)]
struct State {
    topology: Option<Arc<Topology>>,
    metadata: Option<Arc<Replica>>,
    /// The metadata replica was opened to join the metadata group (`SLOTRAFT
    /// OPEN-METADATA`) and the topology does not name this node a voter yet:
    /// topology changes meanwhile must not close it.
    joining_metadata: bool,
    shards: BTreeMap<u64, Arc<Replica>>,
    /// Replicas the topology no longer places here that still count this
    /// node as a member, and since when (see [`ClusterNode::close_departed`]).
    departing: BTreeMap<u64, tokio::time::Instant>,
}

/// Whether `replica`'s own membership still counts node `me`: a voter of
/// its newest configuration (the new half of a joint one), or a learner. A
/// voter being removed sees the joint configuration at most (its leader
/// stops replicating to it once the final one is appended), whose new half
/// leaves it out.
fn counts_as_member(replica: &Replica, me: u64) -> bool {
    let metrics = replica.group.metrics();
    let membership = metrics.membership_config.membership();
    let newest_votes = membership
        .get_joint_config()
        .last()
        .is_some_and(|voters| voters.contains(&me));
    let learner = membership.learner_ids().any(|id| id == me);
    newest_votes || learner
}

/// How long a replica the topology no longer places here is kept open while
/// its own membership still counts this node (its removal may never reach
/// it: a leader stops replicating to a node it removed).
const DEPARTURE_GRACE: Duration = Duration::from_secs(30);

pub struct ClusterNode {
    pub identity: Identity,
    /// The node's Pub/Sub, script board and forwarder, shared by its shards.
    pub local: Arc<NodeLocal>,
    config: Config,
    keyspace_config: KeyspaceConfig,
    dir: PathBuf,
    registry: Arc<Registry>,
    client: rpc::RpcClient,
    /// How every hosted group keeps its log.
    log: replica::LogSetup,
    pub blocking: Arc<Blocking>,
    shutdown: watch::Receiver<bool>,
    state: RwLock<State>,
    /// Serializes topology application (opening groups is async).
    applying: tokio::sync::Mutex<()>,
    seed: std::sync::Mutex<keyspace::Rng>,
    /// Which metadata voter of its view a node without a metadata replica
    /// asks first for the topology (see [`fetch_topology`]); moves on every
    /// round.
    fetch_turn: std::sync::atomic::AtomicUsize,
}

/// Where a request goes.
pub enum Target {
    /// A replica on this node (which may still redirect to its leader).
    Local(Arc<Replica>),
    /// Answer this instead (MOVED, CROSSSLOT, CLUSTERDOWN).
    Reply(Frame),
    /// A keyless read with no shard here to run it (PING, ECHO, TIME ... on
    /// a node not yet in a cluster): run it on the node's own empty keyspace.
    Unsharded,
}

impl ClusterNode {
    pub async fn start(
        config: &Config,
        local: Arc<NodeLocal>,
        raft_listener: TcpListener,
        shutdown: watch::Receiver<bool>,
        seed: u64,
    ) -> anyhow::Result<Arc<ClusterNode>> {
        let registry = Registry::new();
        replica::serve_raft(raft_listener, registry.clone(), shutdown.clone());
        ClusterNode::start_with(
            config,
            local,
            registry,
            rpc::RpcClient::new(rpc::ClientOptions::default()),
            replica::LogSetup::default(),
            shutdown,
            seed,
        )
        .await
    }

    /// [`ClusterNode::start`] with the Raft RPC server left to the caller (it
    /// serves `registry`), peers reached through `client`, and every group's
    /// log as `log` says (a simulation's network and disk).
    pub async fn start_with(
        config: &Config,
        local: Arc<NodeLocal>,
        registry: Arc<Registry>,
        client: rpc::RpcClient,
        log: replica::LogSetup,
        shutdown: watch::Receiver<bool>,
        seed: u64,
    ) -> anyhow::Result<Arc<ClusterNode>> {
        let dir = Path::new(config.dir()).join("cluster");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let identity = Identity::load_or_create(&dir, config.node_id(), seed)?;
        let mut keyspace_config = KeyspaceConfig::default();
        crate::server::apply_config_to(config, &mut keyspace_config, &local);
        let node = Arc::new(ClusterNode {
            local,
            identity,
            config: config.clone(),
            keyspace_config,
            dir,
            registry,
            client,
            log,
            blocking: Arc::new(Blocking::new()),
            shutdown,
            state: RwLock::new(State::default()),
            applying: tokio::sync::Mutex::new(()),
            fetch_turn: std::sync::atomic::AtomicUsize::new(0),
            seed: std::sync::Mutex::new(keyspace::Rng::new(seed ^ 0x5eed)),
        });
        if let Ok(bytes) = std::fs::read(node.bootstrap_path()) {
            let topology = Topology::from_bytes(&bytes)
                .map_err(|error| anyhow::anyhow!("saved topology: {error}"))?;
            node.apply(topology).await?;
        }
        tokio::spawn(watch_metadata(node.clone()));
        Ok(node)
    }

    fn bootstrap_path(&self) -> PathBuf {
        self.dir.join("bootstrap.topology")
    }

    fn next_seed(&self) -> u64 {
        self.seed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .next_u64()
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn topology(&self) -> Option<Arc<Topology>> {
        self.state().topology.clone()
    }

    pub fn shard(&self, id: u64) -> Option<Arc<Replica>> {
        self.state().shards.get(&id).cloned()
    }

    pub fn local_shards(&self) -> Vec<Arc<Replica>> {
        self.state().shards.values().cloned().collect()
    }

    /// This node's Raft port and zone label, for `SLOTRAFT NODE-INFO`.
    pub fn raft_port(&self) -> u16 {
        self.config.raft_port()
    }

    pub fn zone(&self) -> String {
        self.config.get("zone").unwrap_or("").to_string()
    }

    pub fn metadata(&self) -> Option<Arc<Replica>> {
        self.state().metadata.clone()
    }

    /// SLOTRAFT BOOTSTRAP: joins the cluster described by `bytes`.
    pub async fn bootstrap(&self, bytes: &[u8]) -> Result<(), String> {
        let topology = Topology::from_bytes(bytes)?;
        topology.validate()?;
        if !topology.nodes.contains_key(&self.identity.id) {
            return Err("this node is not part of the given topology".into());
        }
        if let Some(current) = self.topology() {
            if current.epoch >= topology.epoch {
                return if current.to_bytes() == topology.to_bytes() {
                    Ok(())
                } else {
                    Err("this node already belongs to a cluster".into())
                };
            }
        }
        write_atomically(&self.bootstrap_path(), bytes).map_err(|error| error.to_string())?;
        self.apply(topology)
            .await
            .map_err(|error| error.to_string())
    }

    /// Opens whatever `topology` places on this node and makes it current.
    async fn apply(&self, topology: Topology) -> anyhow::Result<()> {
        let _applying = self.applying.lock().await;
        if self
            .topology()
            .is_some_and(|current| current.epoch > topology.epoch)
        {
            return Ok(());
        }
        let me = self.identity.id;
        let addresses: BTreeMap<u64, NodeAddr> = topology
            .nodes
            .values()
            .map(|node| {
                (
                    node.id,
                    NodeAddr {
                        raft: format!("{}:{}", node.host, node.raft_port),
                        resp: format!("{}:{}", node.host, node.port),
                    },
                )
            })
            .collect();
        let members_of = |ids: &[u64]| -> BTreeMap<u64, NodeAddr> {
            ids.iter()
                .filter_map(|id| addresses.get(id).map(|address| (*id, address.clone())))
                .collect()
        };
        if self.metadata().is_none() && topology.metadata_voters.contains(&me) {
            let replica = self
                .open_group(
                    METADATA_GROUP,
                    members_of(&topology.metadata_voters),
                    topology.metadata_voters.first().copied(),
                    false,
                )
                .await?;
            self.write_state().metadata = Some(replica);
        }
        for shard in topology.shards.values() {
            if shard.replicas.contains(&me) && self.shard(shard.id).is_none() {
                // The preferred leader (first replica) forms the shard, so
                // shards start out led by different nodes.
                let replica = self
                    .open_group(
                        shard.id,
                        members_of(&shard.replicas),
                        shard.replicas.first().copied(),
                        true,
                    )
                    .await?;
                self.write_state().shards.insert(shard.id, replica);
            }
        }
        self.close_departed(&topology).await;
        if topology.metadata_voters.contains(&me) {
            self.write_state().joining_metadata = false;
        } else if !self.state().joining_metadata {
            let metadata = self.write_state().metadata.take();
            if let Some(metadata) = metadata {
                self.close_group(METADATA_GROUP, &metadata).await;
            }
        }
        self.write_state().topology = Some(Arc::new(topology));
        Ok(())
    }

    /// Closes the replicas `topology` no longer places here (their data
    /// stays, see [`ClusterNode::close_group`]), once they have left their
    /// group (the admin changes the Raft membership before the topology). A
    /// replica whose own membership still counts this node is kept open, for
    /// [`DEPARTURE_GRACE`]: a node restarting replays its metadata log and
    /// passes through older topologies, one of which may not place a replica
    /// it hosts again by the newest; closing it would take a voter away.
    async fn close_departed(&self, topology: &Topology) {
        let me = self.identity.id;
        let now = tokio::time::Instant::now();
        let mut leaving = Vec::new();
        {
            let mut state = self.write_state();
            let placed = |id: &u64| {
                topology
                    .shards
                    .get(id)
                    .is_some_and(|shard| shard.replicas.contains(&me))
            };
            let shards: Vec<(u64, Arc<Replica>)> = state
                .shards
                .iter()
                .map(|(id, replica)| (*id, replica.clone()))
                .collect();
            state.departing.retain(|id, _| !placed(id));
            for (id, replica) in shards {
                if placed(&id) {
                    continue;
                }
                let member = counts_as_member(&replica, me);
                let since = *state.departing.entry(id).or_insert(now);
                if !member || now.duration_since(since) >= DEPARTURE_GRACE {
                    state.shards.remove(&id);
                    state.departing.remove(&id);
                    leaving.push((id, replica));
                }
            }
        }
        for (id, replica) in leaving {
            self.close_group(id, &replica).await;
        }
    }

    fn group_dir(&self, group_id: u64) -> PathBuf {
        self.dir.join(format!("group-{group_id}"))
    }

    /// Stops a replica that left its group. Its data stays on disk: Raft's
    /// safety rests on every member's vote and log outliving its membership.
    /// A node still following an older configuration that counts this one
    /// (cut off while the membership changed) may stand for election; a
    /// replica of the group placed here again must answer it with the vote
    /// and log it had, not from empty storage (which would grant the vote,
    /// or acknowledge a stale leader's entries, and let that node win or
    /// commit without the group's real majority). A replica placed here
    /// again resumes from this data and catches up like any lagging member.
    async fn close_group(&self, group_id: u64, replica: &Replica) {
        replica.close(&self.registry).await;
        tracing::info!(group = group_id, "left the group");
    }

    /// SLOTRAFT OPEN-METADATA: opens this node's replica of the metadata group
    /// before it is added to it (a voter replacement); it waits for the
    /// leader's first message.
    pub async fn open_metadata_learner(&self) -> Result<(), String> {
        let _applying = self.applying.lock().await;
        if self.metadata().is_some() {
            return Ok(());
        }
        let topology = self.topology().ok_or("this node is in no cluster")?;
        let founder = topology.metadata_voters.first().copied();
        let replica = self
            .open_group(METADATA_GROUP, BTreeMap::new(), founder, false)
            .await
            .map_err(|error| error.to_string())?;
        let mut state = self.write_state();
        state.metadata = Some(replica);
        state.joining_metadata = true;
        Ok(())
    }

    /// This node's replica of `group` (the metadata group or a shard) if it
    /// leads it; otherwise the error that names the leader.
    fn leading_group(&self, group: u64) -> Result<Arc<Replica>, Frame> {
        if group == METADATA_GROUP {
            self.leading_metadata()
        } else {
            self.leading_shard(group)
        }
    }

    /// `SLOTRAFT VOTERS`: the voters of `group` as its leader (this node)
    /// sees them, in id order; TRYAGAIN while a membership change is under
    /// way (a joint configuration).
    pub fn voters(&self, group: u64) -> Frame {
        let replica = match self.leading_group(group) {
            Ok(replica) => replica,
            Err(not_leader) => return not_leader,
        };
        let metrics = replica.group.metrics();
        let membership = metrics.membership_config.membership();
        if membership.get_joint_config().len() > 1 {
            return Frame::error("TRYAGAIN membership change in progress");
        }
        Frame::Array(
            membership
                .voter_ids()
                .map(|id| Frame::Integer(id as i64))
                .collect(),
        )
    }

    /// SLOTRAFT REPLACE-VOTER, on the leader of `group`: one step towards a
    /// membership where node `to` votes instead of node `from`. Answers `+OK`
    /// once that membership is committed; `-TRYAGAIN ...` after a step that
    /// needs time (the caller asks again): handing leadership over when this
    /// node is the one leaving, adding `to` as a learner, waiting for it to
    /// catch up.
    pub async fn replace_voter(&self, group: u64, from: u64, to: u64) -> Frame {
        let replica = match self.leading_group(group) {
            Ok(replica) => replica,
            Err(not_leader) => return not_leader,
        };
        let Some(address) = self.topology().and_then(|topology| {
            topology.nodes.get(&to).map(|info| NodeAddr {
                raft: format!("{}:{}", info.host, info.raft_port),
                resp: format!("{}:{}", info.host, info.port),
            })
        }) else {
            return Frame::error_owned(format!("ERR unknown node {to}"));
        };
        let metrics = replica.group.metrics();
        let membership = metrics.membership_config.membership();
        let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
        let joint = membership.get_joint_config().len() > 1;
        if !voters.contains(&from) && voters.contains(&to) && !joint {
            if membership.get_node(&from).is_none() {
                return Frame::OK;
            }
            // A voter demoted to a learner before the move (or left one by
            // an interrupted change) is still replicated to: remove it, as
            // its node is about to close the replica.
            let removal = replica
                .group
                .raft
                .change_membership(openraft::ChangeMembers::RemoveNodes([from].into()), false);
            return match tokio::time::timeout(Duration::from_secs(3), removal).await {
                Ok(Ok(_)) => Frame::OK,
                Ok(Err(error)) => {
                    Frame::error_owned(format!("TRYAGAIN removing the former voter: {error}"))
                }
                Err(_) => Frame::error("TRYAGAIN removing the former voter"),
            };
        }
        if from == self.identity.id {
            match voters.iter().find(|&&voter| voter != from) {
                Some(&next) => {
                    replica.group.transfer_leadership(next).await;
                    return Frame::error("TRYAGAIN leadership handed over before leaving");
                }
                None => return Frame::error("ERR the only voter cannot leave"),
            }
        }
        if membership.get_node(&to).is_none() {
            return match replica.group.raft.add_learner(to, address, false).await {
                Ok(_) => Frame::error("TRYAGAIN learner added"),
                Err(error) => Frame::error_owned(format!("TRYAGAIN adding the learner: {error}")),
            };
        }
        if !voters.contains(&to) {
            let last = metrics.last_log_index.unwrap_or(0);
            let matched = metrics
                .replication
                .as_ref()
                .and_then(|replication| replication.get(&to).cloned().flatten())
                .map_or(0, |log_id| log_id.index);
            if matched + CAUGHT_UP_ENTRIES < last {
                return Frame::error_owned(format!("TRYAGAIN learner at {matched} of {last}"));
            }
        }
        let learner_leaving = !voters.contains(&from) && membership.get_node(&from).is_some();
        let mut next = voters;
        next.remove(&from);
        next.insert(to);
        let change = replica.group.raft.change_membership(next, false);
        match tokio::time::timeout(Duration::from_secs(3), change).await {
            // A `from` that was only a learner when the change began is one
            // still (the change drops former voters only): the next step
            // removes it.
            Ok(Ok(_)) if learner_leaving => {
                Frame::error("TRYAGAIN the former learner is removed next")
            }
            Ok(Ok(_)) => Frame::OK,
            Ok(Err(error)) => Frame::error_owned(format!("TRYAGAIN membership change: {error}")),
            Err(_) => Frame::error("TRYAGAIN membership change still in progress"),
        }
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn open_group(
        &self,
        group_id: u64,
        members: BTreeMap<u64, NodeAddr>,
        founder: Option<u64>,
        shard: bool,
    ) -> anyhow::Result<Arc<Replica>> {
        let template = {
            let mut keyspace = Keyspace::new(1, replica::group_hash_seed(group_id));
            keyspace.config = self.keyspace_config.clone();
            keyspace.config.cluster_mode = shard;
            keyspace.config.replicated = true;
            if shard {
                keyspace.enable_slot_index();
            }
            keyspace
        };
        replica::open(
            GroupSpec {
                group_id,
                node_id: self.identity.id,
                members,
                dir: self.group_dir(group_id),
                template,
                founder,
                log: self.log.clone(),
                local: self.local.clone(),
            },
            &self.config,
            &self.registry,
            self.client.clone(),
            self.blocking.clone(),
            self.shutdown.clone(),
            self.next_seed(),
        )
        .await
    }

    /// The node a shard's requests should go to: its leader as this node
    /// sees it (its own replica's view, else the metadata's record), else its
    /// first replica.
    pub fn leader_of(&self, topology: &Topology, shard: u64) -> Option<u64> {
        if let Some(replica) = self.shard(shard) {
            if let Some(leader) = replica.group.metrics().current_leader {
                return Some(leader);
            }
        }
        topology
            .leaders
            .get(&shard)
            .map(|leader| leader.node)
            .or_else(|| {
                topology
                    .shards
                    .get(&shard)
                    .and_then(|shard| shard.replicas.first().copied())
            })
    }

    /// Routes a keyspace command by the slot of its keys.
    pub fn target(&self, spec: &CommandSpec, arguments: &[Bytes]) -> Target {
        if reads_no_shard(spec) {
            return Target::Unsharded;
        }
        let keyless = || {
            if spec.through_log() {
                Target::Reply(Frame::error("CLUSTERDOWN The cluster is down"))
            } else {
                Target::Unsharded
            }
        };
        let Some(topology) = self.topology() else {
            return match command_slot(spec, arguments) {
                Ok(None) => keyless(),
                _ => Target::Reply(Frame::error("CLUSTERDOWN The cluster is down")),
            };
        };
        let slot = match spec.name {
            // Per-slot questions go to the shard that owns the slot; a node
            // that holds none of its keys answers for none, as in Redis.
            "cluster|countkeysinslot" | "cluster|getkeysinslot" => {
                let owner = keyspace::args::parse_i64(&arguments[2])
                    .ok()
                    .and_then(|slot| u16::try_from(slot).ok())
                    .and_then(|slot| topology.slot_owner(slot))
                    .and_then(|shard| self.shard(shard));
                return match owner {
                    Some(replica) => Target::Local(replica),
                    // Invalid slots get their error from any shard.
                    None => match self.local_shards().into_iter().next() {
                        Some(replica) => Target::Local(replica),
                        None => Target::Reply(Frame::error(SLOT_NOT_SERVED)),
                    },
                };
            }
            _ => match command_slot(spec, arguments) {
                Ok(slot) => slot,
                Err(reply) => return Target::Reply(reply),
            },
        };
        let Some(slot) = slot else {
            // Keyless: this node's first shard, preferring one it leads.
            let shards = self.local_shards();
            let led = shards.iter().find(|replica| replica.group.raft.is_leader());
            return match led.or(shards.first()) {
                Some(replica) => Target::Local(replica.clone()),
                None => keyless(),
            };
        };
        let Some(shard) = topology.slot_owner(slot) else {
            return Target::Reply(Frame::error(SLOT_NOT_SERVED));
        };
        if let Some(replica) = self.shard(shard) {
            if !replica.group.raft.is_leader()
                && lock(&replica.group.state)
                    .keyspace
                    .slot_state(slot)
                    .is_some()
            {
                // The shard is handing the slot over (frozen; this follower
                // may not have applied the close yet, which comes moments
                // later) or has handed it over, and this node has not adopted
                // the new owner yet: its leader would answer TRYAGAIN too (a
                // read in a frozen slot only for the few milliseconds before
                // it closes), and MOVED there would bounce a client between
                // this node and one that has adopted the change.
                return Target::Reply(Frame::error(keyspace::TRYAGAIN));
            }
            return Target::Local(replica);
        }
        if topology
            .migrations
            .get(&slot)
            .is_some_and(|migration| self.shard(migration.to).is_some())
        {
            // The slot is moving to a shard hosted here and a client already
            // knows it: the migration has finished and this node has not
            // adopted the topology that says so yet. MOVED back to the old
            // owner, which may have adopted it, would bounce the client
            // between the two; come back shortly instead.
            return Target::Reply(Frame::error(keyspace::TRYAGAIN));
        }
        match self
            .leader_of(&topology, shard)
            .and_then(|node| topology.nodes.get(&node))
        {
            Some(node) => Target::Reply(Frame::error_owned(format!(
                "MOVED {slot} {}:{}",
                node.host, node.port
            ))),
            None => Target::Reply(Frame::error(SLOT_NOT_SERVED)),
        }
    }

    /// This node's replica of `shard` if it leads it; otherwise the error
    /// that names the leader (`ERR NOTLEADER host:port`).
    pub fn leading_shard(&self, shard: u64) -> Result<Arc<Replica>, Frame> {
        let topology = self.topology();
        match self.shard(shard) {
            Some(replica) if replica.group.raft.is_leader() => Ok(replica),
            _ => {
                let leader = topology
                    .as_ref()
                    .and_then(|topology| {
                        self.leader_of(topology, shard)
                            .and_then(|node| topology.nodes.get(&node))
                    })
                    .map(|node| format!("{}:{}", node.host, node.port))
                    .unwrap_or_else(|| "?".into());
                Err(Frame::error_owned(format!("ERR NOTLEADER {leader}")))
            }
        }
    }

    /// This node's metadata replica if it leads the metadata group; otherwise
    /// the error that names the leader.
    pub fn leading_metadata(&self) -> Result<Arc<Replica>, Frame> {
        match self.metadata() {
            Some(metadata) if metadata.group.raft.is_leader() => Ok(metadata),
            _ => {
                let leader = self
                    .topology()
                    .and_then(|topology| metadata_leader_address(self, &topology))
                    .unwrap_or_else(|| "?".into());
                Err(Frame::error_owned(format!("ERR NOTLEADER {leader}")))
            }
        }
    }

    /// Proposes a topology computed from the current one by `change` to the
    /// metadata group (this node must lead it). The new epoch when stored,
    /// `:0` when another change came first (the caller retries).
    pub async fn change_topology(
        &self,
        change: impl FnOnce(&Topology) -> Result<Topology, String>,
    ) -> Frame {
        let metadata = match self.leading_metadata() {
            Ok(metadata) => metadata,
            Err(error) => return error,
        };
        // A leader fresh from an election may not have applied what its
        // predecessor committed yet: wait until it has (the read index)
        // before computing the change from its state.
        let caught_up = metadata
            .group
            .raft
            .ensure_linearizable(LinearizerOption::new(None, true));
        match tokio::time::timeout(Duration::from_secs(2), caught_up).await {
            Ok(Ok(_)) => {}
            _ => return Frame::Integer(0),
        }
        // The metadata state itself, not this node's view of it (which lags
        // by up to one poll).
        let stored = meta::topology(&mut lock(&metadata.group.state));
        // Right after `cluster create` the metadata state may not hold the
        // bootstrap topology yet (this leader stores it on its next round):
        // change the bootstrap topology then, expecting nothing stored.
        let (expected_epoch, current) = match stored {
            Some((epoch, bytes)) => match Topology::from_bytes(&bytes) {
                Ok(topology) => (epoch, topology),
                Err(error) => return Frame::error_owned(format!("ERR {error}")),
            },
            None => match self.topology() {
                Some(topology) => (0, (*topology).clone()),
                None => return Frame::error("ERR no topology yet"),
            },
        };
        let next = match change(&current) {
            Ok(next) => next,
            Err(error) => return Frame::error_owned(format!("ERR {error}")),
        };
        let epoch = next.epoch;
        let op = Op::PutTopology {
            expected_epoch,
            epoch,
            topology: Bytes::from(next.to_bytes()),
        };
        match propose_op(&metadata, op).await {
            // Stored: answer the new epoch, so the caller can wait for the
            // nodes to reach it.
            Ok(Frame::Integer(1)) => Frame::Integer(epoch as i64),
            Ok(reply) => reply,
            Err(error) => Frame::error_owned(format!("ERR {error}")),
        }
    }

    /// `SLOTRAFT PUT-LEADER` on the metadata leader; elsewhere the
    /// `ERR NOTLEADER host:port` reply that names it, for the reporter to
    /// follow.
    pub async fn record_leader(&self, shard: u64, node: u64, term: u64) -> Result<Frame, String> {
        let metadata = match self.leading_metadata() {
            Ok(metadata) => metadata,
            Err(not_leader) => return Ok(not_leader),
        };
        propose_op(&metadata, Op::PutLeader { shard, node, term }).await
    }
}

/// Proposes one non-command entry to a group this node leads and returns its
/// reply.
pub async fn propose_op(metadata: &Replica, op: Op) -> Result<Frame, String> {
    let seed = lock(&metadata.group.state).rng.next_u64();
    let request = Request::new(clock::unix_ms(), seed, op);
    let write = metadata
        .group
        .raft
        .client_write(std::sync::Arc::new(request));
    match tokio::time::timeout(Duration::from_secs(5), write).await {
        Ok(Ok(response)) => Ok(response
            .data
            .replies
            .into_iter()
            .next()
            .unwrap_or(Frame::Integer(0))),
        // Lost the leadership before proposing: nothing was written, so the
        // caller may follow the new leader and try again.
        Ok(Err(openraft::error::RaftError::APIError(
            openraft::error::ClientWriteError::ForwardToLeader(forward),
        ))) => Ok(Frame::error_owned(format!(
            "ERR NOTLEADER {}",
            forward
                .leader_node
                .map_or_else(|| String::from("?"), |node| node.resp)
        ))),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("metadata proposal timed out".into()),
    }
}

/// Whether a command reads no shard's state at all (PING, ECHO, COMMAND and
/// its subcommands, CLUSTER KEYSLOT): any node answers it at once, from its
/// own empty keyspace, as Redis does, whether or not it leads a shard or can
/// reach its peers. (Served by a shard, it went through that shard's read
/// check: a node cut off from its peers answered PING with CLUSTERDOWN.) The
/// list is explicit: Redis's flags do not tell these apart from keyless
/// commands that read a shard's state (CLUSTER COUNTKEYSINSLOT, SCRIPT
/// EXISTS, FUNCTION LIST carry no `readonly` flag either).
pub fn reads_no_shard(spec: &CommandSpec) -> bool {
    matches!(spec.name, "ping" | "echo" | "command" | "cluster|keyslot")
        || spec.name.starts_with("command|")
}

/// The slot of a command's keys: `None` when it has none, CROSSSLOT when they
/// hash to different slots.
pub fn command_slot(spec: &CommandSpec, arguments: &[Bytes]) -> Result<Option<u16>, Frame> {
    keyspace::command_slot(spec, arguments).map_err(|_| Frame::error(keyspace::slots::CROSSSLOT))
}

/// Every 100 ms, and as soon as this node's metadata replica (if any)
/// applies an entry: adopt a newer topology from the metadata group, publish
/// the initial one when this node founded the group, and report shards this
/// node leads. (A migration's clients wait for the nodes to adopt its new
/// owner: up to a whole interval, without the wake-up on apply.)
async fn watch_metadata(node: Arc<ClusterNode>) {
    let mut shutdown = node.shutdown.clone();
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The metadata replica watched, and its data metrics (which change as
    // its log and applied state do, and on the leader as quorum
    // acknowledgements age).
    let mut watched: Option<(Arc<Replica>, _)> = None;
    let mut last_applied = None;
    loop {
        let metadata = node.metadata();
        let same = match (&watched, &metadata) {
            (Some((replica, _)), Some(metadata)) => Arc::ptr_eq(replica, metadata),
            (None, None) => true,
            _ => false,
        };
        if !same {
            watched = metadata.map(|replica| {
                let metrics = replica.group.raft.data_metrics();
                (replica, metrics)
            });
        }
        let applied = async {
            use openraft::async_runtime::WatchReceiver;
            if let Some((_, metrics)) = &mut watched {
                while metrics.changed().await.is_ok() {
                    let applied = metrics.borrow_watched().last_applied;
                    if applied != last_applied {
                        last_applied = applied;
                        return;
                    }
                }
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = interval.tick() => {}
            _ = applied => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        if let Err(error) = metadata_round(&node).await {
            tracing::debug!(%error, "metadata round");
        }
    }
}

async fn metadata_round(node: &Arc<ClusterNode>) -> anyhow::Result<()> {
    let Some(current) = node.topology() else {
        return Ok(());
    };
    // What the metadata group holds (a local replica, or asked of a member).
    let stored = match node.metadata() {
        Some(metadata) => {
            let (stored, leaders) = {
                let mut state = lock(&metadata.group.state);
                (meta::topology(&mut state), meta::leaders(&mut state))
            };
            if metadata.group.raft.is_leader()
                && stored
                    .as_ref()
                    .is_none_or(|(epoch, _)| *epoch < current.epoch)
            {
                let expected_epoch = stored.as_ref().map_or(0, |(epoch, _)| *epoch);
                propose_op(
                    &metadata,
                    Op::PutTopology {
                        expected_epoch,
                        epoch: current.epoch,
                        topology: Bytes::from(current.to_bytes()),
                    },
                )
                .await
                .map_err(anyhow::Error::msg)?;
            }
            stored.map(|(epoch, bytes)| (epoch, bytes, leaders))
        }
        None => fetch_topology(node, &current).await,
    };
    if let Some((epoch, bytes, leaders)) = stored {
        let mut topology = if epoch > current.epoch {
            Topology::from_bytes(&bytes).map_err(anyhow::Error::msg)?
        } else {
            (*current).clone()
        };
        for (shard, record) in leaders {
            if let Ok(next) = topology.with_leader(shard, record.node, record.term) {
                topology = next;
            }
        }
        if epoch > current.epoch {
            node.apply(topology).await?;
        } else {
            node.write_state().topology = Some(Arc::new(topology));
        }
    }
    // Replicas kept after the topology stopped placing them: closed once
    // they have left their group, or after the grace period.
    if !node.state().departing.is_empty() {
        if let Some(topology) = node.topology() {
            let _applying = node.applying.lock().await;
            node.close_departed(&topology).await;
        }
    }
    reclaim_closed_slots(node).await;
    report_leadership(node).await
}

/// Keys a closed slot's shard deletes per entry (as the admin's last step
/// of a migration does).
const RECLAIM_BATCH: u32 = 5000;

/// Deletes, on shards this node leads, the keys left in slots the shard has
/// closed (given away) and that no migration in this node's topology still
/// moves: what an admin stopped between a migration's change of owner and
/// its deletion leaves behind. The deletion applies only to a slot still
/// closed then (`Op::DropSlotKeys`), so a slot opened again meanwhile keeps
/// what it holds.
async fn reclaim_closed_slots(node: &Arc<ClusterNode>) {
    let Some(topology) = node.topology() else {
        return;
    };
    for replica in node.local_shards() {
        if !replica.group.raft.is_leader() {
            continue;
        }
        let slots: Vec<u16> = {
            let state = lock(&replica.group.state);
            let keyspace = &state.keyspace;
            keyspace
                .slot_states()
                .iter()
                .filter(|(slot, slot_state)| {
                    **slot_state == keyspace::SlotState::Gone
                        && !topology.migrations.contains_key(*slot)
                        && !keyspace.slot_is_empty(0, **slot)
                })
                .map(|(slot, _)| *slot)
                .take(256)
                .collect()
        };
        if slots.is_empty() {
            continue;
        }
        let op = Op::DropSlotKeys {
            slots,
            limit: RECLAIM_BATCH,
        };
        if let Err(error) = propose_op(&replica, op).await {
            tracing::debug!(%error, shard = replica.group.id, "reclaiming closed slots");
        }
    }
}

/// A node without a metadata replica asks for the topology (leaders included
/// in it): one metadata voter of its view, a different one each round; when
/// that one does not answer, the other voters; when none of them does,
/// every other node of its view. The newest answer wins. A node whose view
/// is old (say it restarted from the topology it was handed when it joined)
/// may name voters that have since left the cluster, or miss that it became
/// a voter itself: any node of its view that is still in service brings it
/// up to date. Taking turns matters there: a voter removed from the
/// metadata group but still running (a `del-node` cut short before it shut
/// the node down) keeps answering with the topology it last applied, and a
/// node that always asked it first, and stopped at its answer, never
/// learned the newer one. A node never asks itself.
async fn fetch_topology(
    node: &ClusterNode,
    current: &Topology,
) -> Option<(u64, Bytes, BTreeMap<u64, meta::LeaderRecord>)> {
    let me = node.identity.id;
    let address_of = |id: &u64| {
        current
            .nodes
            .get(id)
            .map(|info| format!("{}:{}", info.host, info.port))
    };
    let mut voters: Vec<String> = current
        .metadata_voters
        .iter()
        .filter(|id| **id != me)
        .filter_map(address_of)
        .collect();
    let first = (!voters.is_empty()).then(|| {
        let turn = node
            .fetch_turn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        voters.remove(turn % voters.len())
    });
    let others: Vec<String> = current
        .nodes
        .keys()
        .filter(|id| **id != me && !current.metadata_voters.contains(id))
        .filter_map(address_of)
        .collect();
    let rounds = [first.into_iter().collect::<Vec<_>>(), voters, others];
    let mut newest: Option<(Bytes, Topology)> = None;
    for round in rounds {
        let asked = round.iter().map(|address| async move {
            match crate::resp_client::call(address, &[b"SLOTRAFT", b"TOPOLOGY"]).await {
                Ok(Frame::Bulk(bytes)) => Topology::from_bytes(&bytes)
                    .ok()
                    .map(|topology| (bytes, topology)),
                _ => None,
            }
        });
        for (bytes, topology) in futures_util::future::join_all(asked)
            .await
            .into_iter()
            .flatten()
        {
            if newest
                .as_ref()
                .is_none_or(|(_, known)| topology.epoch > known.epoch)
            {
                newest = Some((bytes, topology));
            }
        }
        if newest.is_some() {
            break;
        }
    }
    let (bytes, topology) = newest?;
    let leaders = topology
        .leaders
        .iter()
        .map(|(shard, leader)| {
            (
                *shard,
                meta::LeaderRecord {
                    node: leader.node,
                    term: leader.term,
                },
            )
        })
        .collect();
    Some((topology.epoch, bytes, leaders))
}

/// Tells the metadata group about shards this node leads that it does not
/// know as led by this node in this term.
async fn report_leadership(node: &Arc<ClusterNode>) -> anyhow::Result<()> {
    let Some(topology) = node.topology() else {
        return Ok(());
    };
    let me = node.identity.id;
    for replica in node.local_shards() {
        let metrics = replica.group.metrics();
        if metrics.current_leader != Some(me) {
            continue;
        }
        let term = metrics.current_term;
        let known = topology.leaders.get(&replica.group.id);
        if known.is_some_and(|leader| leader.node == me && leader.term >= term) {
            continue;
        }
        let shard = replica.group.id;
        match node.metadata() {
            Some(metadata) if metadata.group.raft.is_leader() => {
                propose_op(
                    &metadata,
                    Op::PutLeader {
                        shard,
                        node: me,
                        term,
                    },
                )
                .await
                .map_err(anyhow::Error::msg)?;
            }
            _ => {
                let (shard, me, term) = (shard.to_string(), me.to_string(), term.to_string());
                let report: [&[u8]; 5] = [
                    b"SLOTRAFT",
                    b"PUT-LEADER",
                    shard.as_bytes(),
                    me.as_bytes(),
                    term.as_bytes(),
                ];
                report_to_metadata(node, &topology, &report).await?;
            }
        }
    }
    Ok(())
}

/// Sends `report` to the metadata group's leader: the one this node knows
/// of, else each voter in turn, following a `NOTLEADER` reply to the leader
/// it names. A node without a metadata replica knows no leader, and the
/// first voter may not lead.
async fn report_to_metadata(
    node: &ClusterNode,
    topology: &Topology,
    report: &[&[u8]],
) -> anyhow::Result<()> {
    let voters = topology
        .metadata_voters
        .iter()
        .filter_map(|voter| topology.nodes.get(voter))
        .map(|info| format!("{}:{}", info.host, info.port));
    let mut last = anyhow::anyhow!("no metadata voter known");
    for mut address in metadata_leader_address(node, topology)
        .into_iter()
        .chain(voters)
    {
        for _ in 0..3 {
            match crate::resp_client::call(&address, report).await {
                Ok(Frame::Error(text)) => {
                    let text = String::from_utf8_lossy(&text).into_owned();
                    match text.strip_prefix("ERR NOTLEADER ") {
                        Some(leader) if leader != "?" && leader != address => {
                            address = leader.to_string();
                        }
                        _ => {
                            last = anyhow::anyhow!("reporting leadership: {text}");
                            break;
                        }
                    }
                }
                Ok(_) => return Ok(()),
                Err(error) => {
                    last = error;
                    break;
                }
            }
        }
    }
    Err(last)
}

/// The RESP address of the metadata group's leader, as far as this node knows.
fn metadata_leader_address(node: &ClusterNode, topology: &Topology) -> Option<String> {
    let leader = node
        .metadata()
        .and_then(|metadata| metadata.group.metrics().current_leader)
        .or_else(|| topology.metadata_voters.first().copied())?;
    topology
        .nodes
        .get(&leader)
        .map(|info| format!("{}:{}", info.host, info.port))
}
