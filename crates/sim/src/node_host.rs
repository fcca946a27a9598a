//! The real node on simulated hosts: `slotraft node` in replicated mode (its
//! RESP listener, connections, sessions, request path, Raft RPC server and
//! client, log store) with turmoil's sockets and clock. Clients speak RESP to
//! it over the simulated network ([`RespClient`]).

use std::error::Error;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::BytesMut;
use replication::group::Registry;
use replication::log_store::fs::{Fs, StdFs};
use replication::log_store::WriterMode;
use resp::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use replication::NodeId;

use crate::disk::SimDisk;
use crate::group::{host_name, Clocks, Handles, Storage, RAFT_PORT};

/// The port every simulated node serves clients on.
pub const RESP_PORT: u16 = 6379;

thread_local! {
    /// The clocks of the simulation running on this thread, and which node
    /// each host runtime runs (a restarted host gets a new runtime).
    static CLOCKS: RefCell<(Clocks, HashMap<tokio::runtime::Id, NodeId>)> =
        RefCell::new((Clocks::default(), HashMap::new()));
}

/// The node's clock in a simulation: the clock of the host whose runtime
/// asks (simulated time plus its offset and drift), as each replica of the
/// replication runs has its own.
fn simulated_micros() -> u64 {
    let runtime = tokio::runtime::Handle::try_current().map(|handle| handle.id());
    CLOCKS.with(|clocks| {
        let (clocks, hosts) = &*clocks.borrow();
        let node = runtime
            .ok()
            .and_then(|runtime| hosts.get(&runtime).copied())
            .unwrap_or(0);
        clocks.now_micros(node)
    })
}

/// Accepts client connections on the simulated network.
struct SimListener(turmoil::net::TcpListener);

impl node::server::Listener for SimListener {
    type Stream = crate::net::Tracked;

    async fn accept(&self) -> io::Result<(Self::Stream, SocketAddr, Option<SocketAddr>)> {
        let (stream, peer) = self.0.accept().await?;
        let local = stream.local_addr().ok();
        Ok((crate::net::Tracked::new(stream)?, peer, local))
    }

    fn local_port(&self) -> Option<u16> {
        self.0.local_addr().ok().map(|address| address.port())
    }
}

/// Adds nodes `1..=count` as hosts, each a `slotraft node` replica of one
/// group of all of them (node 1 forms it), with its data under `root`.
pub fn add_nodes(sim: &mut turmoil::Sim<'_>, count: u64, root: PathBuf, seed: u64) {
    add_nodes_with(
        sim,
        count,
        root,
        seed,
        &Handles::default(),
        Storage::default(),
        &BTreeMap::new(),
        Clocks::default(),
    );
}

/// [`add_nodes`] for a fault run: each node's group is published in
/// `handles` (for membership changes and convergence checks), snapshots
/// follow `storage`, a node with a disk in `disks` keeps its log there, and
/// each node's wall clock is its clock in `clocks`. (Simulations of one
/// thread run one at a time; `clocks` holds for this thread's.)
#[allow(clippy::too_many_arguments)]
pub fn add_nodes_with(
    sim: &mut turmoil::Sim<'_>,
    count: u64,
    root: PathBuf,
    seed: u64,
    handles: &Handles,
    storage: Storage,
    disks: &BTreeMap<NodeId, SimDisk>,
    clocks: Clocks,
) {
    node::clock::set_source(simulated_micros);
    CLOCKS.with(|current| *current.borrow_mut() = (clocks, HashMap::new()));
    let members: Vec<String> = (1..=count)
        .map(|id| format!("{id}={}:{RESP_PORT}@{RAFT_PORT}", host_name(id)))
        .collect();
    let members = members.join(",");
    for id in 1..=count {
        let host = NodeHost {
            id,
            members: members.clone(),
            dir: root.join(host_name(id)),
            seed: seed.wrapping_add(id),
            handles: handles.clone(),
            storage,
            disk: disks.get(&id).cloned(),
        };
        sim.host(host_name(id), move || host.clone().run());
    }
}

/// What every simulated node starts from: its configuration (`options` as
/// `--name value` pairs, applied at startup) and its Raft side: the RPC server on
/// [`RAFT_PORT`] serving `registry`, a client over the simulated network, and
/// the log written by a task on `disk` (the real file system without one).
struct NodeSetup {
    config: node::config::Config,
    registry: Arc<Registry>,
    client: rpc::RpcClient,
    log: node::replica::LogSetup,
}

impl NodeSetup {
    async fn new(
        dir: &std::path::Path,
        options: &[(&str, &str)],
        disk: Option<&SimDisk>,
    ) -> Result<NodeSetup, Box<dyn Error>> {
        let mut config = node::config::Config::default();
        let dir_text = dir.to_string_lossy().into_owned();
        config.set_startup("dir", &dir_text)?;
        for (name, value) in options {
            config.set_startup(name, value)?;
        }
        std::fs::create_dir_all(dir)?;
        let registry = Registry::new();
        let raft_listener = turmoil::net::TcpListener::bind(("0.0.0.0", RAFT_PORT)).await?;
        tokio::spawn(rpc::serve_with_incoming(
            crate::net::incoming(raft_listener),
            registry.clone(),
            std::future::pending(),
        ));
        let client = rpc::RpcClient::with_connector(
            rpc::ClientOptions::simulated(),
            crate::net::connector(),
        );
        let fs: Arc<dyn Fs> = match disk {
            Some(disk) => Arc::new(disk.clone()),
            None => Arc::new(StdFs),
        };
        let log = node::replica::LogSetup {
            writer: WriterMode::Task,
            fs,
        };
        Ok(NodeSetup {
            config,
            registry,
            client,
            log,
        })
    }

    /// Serves clients on [`RESP_PORT`] until the host ends.
    async fn serve(shared: Arc<node::server::Shared>) -> Result<(), Box<dyn Error>> {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", RESP_PORT)).await?;
        node::server::run(shared, SimListener(listener)).await?;
        Ok(())
    }
}

/// One simulated host's node, as (re)started.
#[derive(Clone)]
struct NodeHost {
    id: NodeId,
    members: String,
    dir: PathBuf,
    seed: u64,
    handles: Handles,
    storage: Storage,
    disk: Option<SimDisk>,
}

impl NodeHost {
    async fn run(self) -> Result<(), Box<dyn Error>> {
        let runtime = tokio::runtime::Handle::current().id();
        CLOCKS.with(|clocks| clocks.borrow_mut().1.insert(runtime, self.id));
        let id_text = self.id.to_string();
        let snapshot_every = self.storage.snapshot_every.to_string();
        let keep = self.storage.keep_behind_snapshot.to_string();
        let log_memory = self.storage.log_memory_limit.to_string();
        let setup = NodeSetup::new(
            &self.dir,
            &[
                ("port", "6379"),
                ("node-id", &id_text),
                ("group-members", &self.members),
                ("raft-snapshot-entries", &snapshot_every),
                ("raft-keep-entries", &keep),
                ("raft-log-memory", &log_memory),
            ],
            self.disk.as_ref(),
        )
        .await?;
        // Never stopped: a simulated host ends when it crashes or the
        // simulation does.
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let replica = node::replica::start_with(
            &setup.config,
            node::local::NodeLocal::new(),
            &setup.registry,
            setup.client,
            setup.log,
            stopped,
            self.seed,
        )
        .await
        .map_err(|error| error.to_string())?;
        self.handles.insert(self.id, replica.group.clone());
        NodeSetup::serve(node::server::Shared::replicated(
            setup.config,
            self.seed ^ 0x5eed,
            replica,
        ))
        .await
    }
}

/// A RESP2 client connection over the simulated network.
pub struct RespClient {
    stream: turmoil::net::TcpStream,
    input: BytesMut,
}

impl RespClient {
    /// Connects to node `id`.
    pub async fn connect(id: u64) -> io::Result<RespClient> {
        let stream = turmoil::net::TcpStream::connect((host_name(id), RESP_PORT)).await?;
        Ok(RespClient {
            stream,
            input: BytesMut::new(),
        })
    }

    /// Sends one command and reads its reply.
    pub async fn call(&mut self, command: &[&str]) -> io::Result<Frame> {
        let words: Vec<bytes::Bytes> = command
            .iter()
            .map(|part| bytes::Bytes::copy_from_slice(part.as_bytes()))
            .collect();
        let mut replies = self.pipeline(&[words]).await?;
        replies
            .pop()
            .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }

    /// Sends `commands` in one write and reads their replies, in order.
    pub async fn pipeline(&mut self, commands: &[Vec<bytes::Bytes>]) -> io::Result<Vec<Frame>> {
        let mut out = BytesMut::new();
        for command in commands {
            let frame = Frame::Array(command.iter().cloned().map(Frame::Bulk).collect());
            resp::encode(&frame, resp::Protocol::Resp2, &mut out);
        }
        self.stream.write_all(&out).await?;
        let mut replies = Vec::with_capacity(commands.len());
        while replies.len() < commands.len() {
            replies.push(self.read_reply().await?);
        }
        Ok(replies)
    }

    async fn read_reply(&mut self) -> io::Result<Frame> {
        loop {
            match resp::parse_reply(&self.input) {
                Ok(Some((frame, length))) => {
                    let _ = self.input.split_to(length);
                    return Ok(frame);
                }
                Ok(None) => {}
                Err(error) => return Err(io::Error::other(format!("{error:?}"))),
            }
            if self.stream.read_buf(&mut self.input).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// Opens admin and node-to-node RESP calls over the simulated network (a
/// `node::resp_client::Dialer`).
fn simulated_dial(address: String) -> DialFuture {
    Box::pin(async move {
        let stream = crate::net::Tracked::new(turmoil::net::TcpStream::connect(address).await?)?;
        Ok(Box::new(stream) as Box<dyn node::resp_client::CallStream>)
    })
}

type DialFuture = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = io::Result<Box<dyn node::resp_client::CallStream>>> + Send,
    >,
>;

/// The address clients and the admin use for node `id`.
pub fn node_address(id: NodeId) -> String {
    format!("{}:{RESP_PORT}", host_name(id))
}

/// Adds nodes `1..=count` as cluster-enabled hosts (`--cluster-enabled yes`),
/// not yet in a cluster: the driver forms one with
/// `node::admin::create` over [`node_address`]es, as `slotraft cluster
/// create` does. Admin calls and the nodes' own calls to each other go over
/// the simulated network.
pub fn add_cluster_nodes(
    sim: &mut turmoil::Sim<'_>,
    count: u64,
    root: PathBuf,
    seed: u64,
    clocks: Clocks,
) {
    add_cluster_nodes_with(
        sim,
        count,
        root,
        seed,
        clocks,
        &ClusterHandles::default(),
        Storage::default(),
        &BTreeMap::new(),
    );
}

/// The groups of simulated cluster nodes, by group id (0: the metadata
/// group, then the shards), each with its replicas by node: the driver's
/// handles for fault injection and convergence checks. A node publishes a
/// group once it has opened it.
#[derive(Clone, Default)]
pub struct ClusterHandles(Arc<std::sync::Mutex<BTreeMap<replication::GroupId, Handles>>>);

impl ClusterHandles {
    /// The replicas of `group` (empty until a node opens it).
    pub fn group(&self, group: replication::GroupId) -> Handles {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(group)
            .or_default()
            .clone()
    }

    /// Every group some node has opened, by id.
    pub fn groups(&self) -> Vec<(replication::GroupId, Handles)> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .map(|(id, handles)| (*id, handles.clone()))
            .collect()
    }

    /// Forgets node `id`'s replicas (its host crashes).
    pub fn remove(&self, id: NodeId) {
        for (_, handles) in self.groups() {
            handles.remove(id);
        }
    }
}

/// [`add_cluster_nodes`] for a fault run: each node publishes the groups it
/// hosts in `handles`, snapshots follow `storage`, and a node with a disk in
/// `disks` keeps every group's log there.
#[allow(clippy::too_many_arguments)]
pub fn add_cluster_nodes_with(
    sim: &mut turmoil::Sim<'_>,
    count: u64,
    root: PathBuf,
    seed: u64,
    clocks: Clocks,
    handles: &ClusterHandles,
    storage: Storage,
    disks: &BTreeMap<NodeId, SimDisk>,
) {
    node::clock::set_source(simulated_micros);
    node::resp_client::set_dialer(simulated_dial);
    CLOCKS.with(|current| *current.borrow_mut() = (clocks, HashMap::new()));
    for id in 1..=count {
        let host = ClusterHost {
            id,
            dir: root.join(host_name(id)),
            seed: seed.wrapping_add(id),
            handles: handles.clone(),
            storage,
            disk: disks.get(&id).cloned(),
        };
        sim.host(host_name(id), move || host.clone().run());
    }
}

/// One simulated host's cluster node, as (re)started.
#[derive(Clone)]
struct ClusterHost {
    id: NodeId,
    dir: PathBuf,
    seed: u64,
    handles: ClusterHandles,
    storage: Storage,
    disk: Option<SimDisk>,
}

impl ClusterHost {
    async fn run(self) -> Result<(), Box<dyn Error>> {
        let runtime = tokio::runtime::Handle::current().id();
        CLOCKS.with(|clocks| clocks.borrow_mut().1.insert(runtime, self.id));
        let id_text = self.id.to_string();
        let raft_port = RAFT_PORT.to_string();
        let snapshot_every = self.storage.snapshot_every.to_string();
        let keep = self.storage.keep_behind_snapshot.to_string();
        let log_memory = self.storage.log_memory_limit.to_string();
        let setup = NodeSetup::new(
            &self.dir,
            &[
                ("port", "6379"),
                ("raft-port", &raft_port),
                ("cluster-enabled", "yes"),
                ("node-id", &id_text),
                ("raft-snapshot-entries", &snapshot_every),
                ("raft-keep-entries", &keep),
                ("raft-log-memory", &log_memory),
            ],
            self.disk.as_ref(),
        )
        .await?;
        // Never stopped: a simulated host ends when it crashes or the
        // simulation does.
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let cluster = node::cluster_node::ClusterNode::start_with(
            &setup.config,
            node::local::NodeLocal::new(),
            setup.registry,
            setup.client,
            setup.log,
            stopped,
            self.seed,
        )
        .await
        .map_err(|error| error.to_string())?;
        tokio::spawn(publish_groups(self.id, cluster.clone(), self.handles));
        NodeSetup::serve(node::server::Shared::clustered(
            setup.config,
            self.seed ^ 0x5eed,
            cluster,
        ))
        .await
    }
}

/// Publishes the groups `node` hosts (its metadata replica as group 0) in
/// `handles` as it opens them, until its host ends.
async fn publish_groups(
    id: NodeId,
    node: Arc<node::cluster_node::ClusterNode>,
    handles: ClusterHandles,
) {
    // What this node published: each group's replica, by identity. A
    // replica moved away and back is a new one and replaces the closed one;
    // a replica moved away is withdrawn.
    let mut published: BTreeMap<replication::GroupId, Arc<node::replica::Replica>> =
        BTreeMap::new();
    loop {
        let replicas: Vec<_> = node
            .metadata()
            .into_iter()
            .chain(node.local_shards())
            .collect();
        for replica in &replicas {
            let known = published.get(&replica.group.id);
            if !known.is_some_and(|known| Arc::ptr_eq(known, replica)) {
                handles
                    .group(replica.group.id)
                    .insert(id, replica.group.clone());
                published.insert(replica.group.id, replica.clone());
            }
        }
        published.retain(|group, _| {
            let open = replicas.iter().any(|replica| replica.group.id == *group);
            if !open {
                handles.group(*group).remove(id);
            }
            open
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
