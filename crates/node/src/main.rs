//! `slotraft`: the node (standalone, replicated or cluster-enabled), the admin CLI
//! (`slotraft cluster ...`), the router (a RESP proxy for non-cluster clients) and
//! the `dev` launcher.

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use config::Config;
use node::{
    admin, alloc, clock, cluster_node, config, dev, local, persist, replica, resp_client, router,
    server,
};
use std::io::Read;
use std::sync::Arc;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

#[derive(Parser)]
#[command(
    name = "slotraft",
    version,
    about = "A Redis-compatible cluster that keeps acknowledged writes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node: `slotraft node --port 6379 [--bind ADDR] [--dir DATA] [--<redis-option> VALUE]...`
    Node {
        /// Redis-style options as `--name value` pairs (port, bind, dir, maxmemory, ...).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "--NAME VALUE"
        )]
        options: Vec<String>,
    },
    /// Run a local cluster (3 nodes, 3 shards, 3 replicas each by default) until Ctrl-C.
    Dev {
        /// Where the nodes keep their data; a second run reuses it.
        #[arg(long, default_value = "slotraft-dev")]
        dir: std::path::PathBuf,
        /// Client port of the first node (node i listens on PORT + i).
        #[arg(long, default_value_t = 7000)]
        port: u16,
        /// Raft port of the first node (default: PORT + 10000).
        #[arg(long)]
        raft_port: Option<u16>,
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        #[arg(long, default_value_t = 3)]
        shards: usize,
        #[arg(long, default_value_t = 3)]
        replicas: usize,
        /// Client port of the router (default: PORT + NODES).
        #[arg(long)]
        router_port: Option<u16>,
    },
    /// Run the RESP proxy for clients without cluster support:
    /// `slotraft router --port P --seeds HOST:PORT[,HOST:PORT...]`.
    Router {
        #[arg(long, default_value_t = 6379)]
        port: u16,
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// Cluster nodes to learn the slot map from (client ports).
        #[arg(long, value_delimiter = ',', required = true)]
        seeds: Vec<String>,
        /// Most clients served at once; more are refused with an error.
        #[arg(long, default_value_t = 10_000)]
        maxclients: usize,
        /// Bound on each connect, write and read to a node (blocking commands
        /// wait their own timeout plus this).
        #[arg(long, default_value_t = 5_000)]
        upstream_timeout_ms: u64,
        /// How often the slot map is refreshed besides on MOVED and failures.
        #[arg(long, default_value_t = 5_000)]
        refresh_interval_ms: u64,
        /// Requests one client may have in flight; the router reads no more
        /// of its input until they are answered.
        #[arg(long, default_value_t = 256)]
        pipeline_depth: usize,
        /// Connections per node for plain writes, shared by all threads
        /// (reads share one per thread). More let a node commit several
        /// batches at once; fewer gather more writes into each batch.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
        links_per_node: u64,
        /// READONLY clients' reads go to a replica (or the master) in this
        /// zone (nodes' `--zone`) when their slot has one there.
        #[arg(long)]
        prefer_zone: Option<String>,
        /// Worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// The nodes' `requirepass`: every connection to a node sends AUTH.
        #[arg(long)]
        upstream_password: Option<String>,
        /// Clients must AUTH with this password first (as a node's
        /// `requirepass`).
        #[arg(long)]
        requirepass: Option<String>,
    },
    /// Administer a cluster of running nodes (`--cluster-enabled yes`).
    Cluster {
        /// The nodes' `requirepass`, sent with AUTH on every call.
        #[arg(long, global = true)]
        password: Option<String>,
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Form a cluster of running nodes: `slotraft cluster create HOST:PORT... [--replicas N] [--shards S]`.
    Create {
        /// The nodes, as HOST:PORT of their client ports.
        #[arg(required = true)]
        nodes: Vec<String>,
        /// Replicas per shard (Raft voters holding a copy), counting the leader.
        #[arg(long, default_value_t = 3)]
        replicas: usize,
        /// Number of shards (default: one per node).
        #[arg(long)]
        shards: Option<usize>,
    },
    /// Show the cluster as one node sees it: `slotraft cluster info HOST:PORT`.
    Info { node: String },
    /// Add a running node that belongs to no cluster: `slotraft cluster add-node NEW_HOST:PORT EXISTING_HOST:PORT`.
    AddNode { new: String, existing: String },
    /// Move a node's replicas and metadata vote to other nodes, remove it and shut it down: `slotraft cluster del-node EXISTING_HOST:PORT NODE`.
    DelNode { existing: String, node: String },
    /// Move a shard's replica to another node, online: `slotraft cluster move-replica EXISTING_HOST:PORT --shard S --from NODE --to NODE`.
    MoveReplica {
        existing: String,
        /// The shard (its id, as `slotraft cluster info` shows).
        #[arg(long)]
        shard: u64,
        /// The node id holding the replica now.
        #[arg(long)]
        from: u64,
        /// The node id to hold it.
        #[arg(long)]
        to: u64,
    },
    /// Add a shard without slots on some nodes: `slotraft cluster add-shard EXISTING_HOST:PORT --nodes ID,ID,ID`.
    AddShard {
        existing: String,
        /// Node ids (as `slotraft cluster info` shows), preferred leader first.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<u64>,
    },
    /// Even out the slots over the shards, online: `slotraft cluster rebalance EXISTING_HOST:PORT`.
    Rebalance { existing: String },
    /// Check that every node agrees and every slot is served: `slotraft cluster check HOST:PORT`.
    Check { node: String },
    /// Move slots between shards online: `slotraft cluster reshard HOST:PORT --from SHARD --to SHARD --slots N`.
    Reshard {
        /// Any node of the cluster.
        node: String,
        /// The shard giving slots (its id, as `slotraft cluster info` shows).
        #[arg(long)]
        from: u64,
        /// The shard receiving them.
        #[arg(long)]
        to: u64,
        /// How many slots to move.
        #[arg(long)]
        slots: usize,
    },
}

/// What is logged unless `SLOTRAFT_LOG` says otherwise: `info`, except
/// openraft's core loop, which logs every command it is given at `info`,
/// the node's heartbeat triggers (every led group, ten times a second)
/// among them. Elections and leadership changes are still logged by
/// openraft's engine.
const DEFAULT_LOG: &str = "info,openraft::core::raft_core=warn";

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLOTRAFT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Node { options } => run_node(parse_options(&options)?),
        Command::Dev {
            dir,
            port,
            raft_port,
            nodes,
            shards,
            replicas,
            router_port,
        } => {
            let router_port = match router_port {
                Some(router_port) => router_port,
                None => u16::try_from(port as usize + nodes)
                    .context("--port is too high for the default --router-port")?,
            };
            let raft_port = match raft_port {
                Some(raft_port) => raft_port,
                None => port
                    .checked_add(10_000)
                    .context("--port is too high for the default --raft-port")?,
            };
            let options = dev::DevOptions {
                dir,
                port,
                raft_port,
                nodes,
                shards,
                replicas,
                router_port,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?;
            runtime.block_on(dev::run(options, random_seed()))
        }
        Command::Router {
            port,
            bind,
            seeds,
            maxclients,
            upstream_timeout_ms,
            refresh_interval_ms,
            pipeline_depth,
            links_per_node,
            prefer_zone,
            threads,
            upstream_password,
            requirepass,
        } => {
            resp_client::set_password(upstream_password.as_deref());
            let options = router::RouterOptions {
                bind,
                port,
                seeds,
                max_clients: maxclients.max(1),
                upstream_timeout: std::time::Duration::from_millis(upstream_timeout_ms.max(1)),
                refresh_interval: std::time::Duration::from_millis(refresh_interval_ms),
                pipeline_depth: pipeline_depth.max(1),
                write_links: links_per_node,
                prefer_zone: prefer_zone.filter(|zone| !zone.is_empty()),
                requirepass: requirepass.filter(|password| !password.is_empty()),
            };
            router::run(options, threads)
        }
        Command::Cluster { password, command } => {
            resp_client::set_password(password.as_deref());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?;
            runtime.block_on(async move {
                match command {
                    ClusterCommand::Create {
                        nodes,
                        replicas,
                        shards,
                    } => admin::create(&nodes, shards, replicas, random_seed()).await,
                    ClusterCommand::Info { node } => admin::info(&node).await,
                    ClusterCommand::Check { node } => admin::check(&node).await,
                    ClusterCommand::AddNode { new, existing } => {
                        admin::add_node(&new, &existing).await
                    }
                    ClusterCommand::DelNode { existing, node } => {
                        admin::del_node(&existing, &node).await
                    }
                    ClusterCommand::MoveReplica {
                        existing,
                        shard,
                        from,
                        to,
                    } => admin::move_replica(&existing, shard, from, to).await,
                    ClusterCommand::AddShard { existing, nodes } => {
                        admin::add_shard(&existing, &nodes, random_seed()).await
                    }
                    ClusterCommand::Rebalance { existing } => admin::rebalance(&existing).await,
                    ClusterCommand::Reshard {
                        node,
                        from,
                        to,
                        slots,
                    } => admin::reshard(&node, from, to, slots).await,
                }
            })
        }
    }
}

/// Reads `--name value` pairs into a configuration.
fn parse_options(options: &[String]) -> anyhow::Result<Config> {
    let mut config = Config::default();
    let mut index = 0;
    while index < options.len() {
        let Some(name) = options[index].strip_prefix("--") else {
            bail!("expected an option like --port, found '{}'", options[index]);
        };
        let Some(value) = options.get(index + 1) else {
            bail!("option --{name} needs a value");
        };
        config
            .set_startup(name, value)
            .map_err(anyhow::Error::msg)?;
        index += 2;
    }
    Ok(config)
}

/// A seed for the node's own random source (hash layout, sampling).
fn random_seed() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut bytes))
        .is_ok()
    {
        return u64::from_le_bytes(bytes);
    }
    clock::unix_micros() ^ u64::from(std::process::id()) << 32
}

fn run_node(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(config.dir())
        .with_context(|| format!("creating data directory {}", config.dir()))?;
    let address = format!("{}:{}", config.bind(), config.port());
    // `io-threads` (Redis's name) sets the number of worker threads serving clients.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads())
        // A task another task wakes would otherwise run next, ahead of the
        // connections already ready: a proposal's Raft core, a subscriber's
        // write would each take one request at a time instead of batching
        // those that arrived together. (A `tokio_unstable` option; the
        // workspace builds with that cfg.)
        .disable_lifo_slot()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Calls to other nodes authenticate with this node's own password.
    resp_client::set_password(config.requirepass());
    // Command timings calibrate their clock once, before clients come.
    let _ = clock::ticks();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .with_context(|| format!("binding {address}"))?;
        let bound = listener.local_addr()?;
        let shared = if config.cluster_enabled() {
            let raft_address = format!("{}:{}", config.bind(), config.raft_port());
            let raft_listener = tokio::net::TcpListener::bind(&raft_address)
                .await
                .with_context(|| format!("binding {raft_address}"))?;
            tracing::info!(raft = %raft_listener.local_addr()?, "raft listener bound");
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let node = cluster_node::ClusterNode::start(
                &config,
                local::NodeLocal::new(),
                raft_listener,
                stopped,
                random_seed(),
            )
            .await?;
            tracing::info!(id = node.identity.id, name = %node.identity.name, "cluster node");
            let shared = server::Shared::clustered(config, random_seed(), node);
            let mut shutdown = shared.shutdown_requested();
            tokio::spawn(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
                let _ = stop.send(true);
            });
            shared
        } else if config.group_members().is_empty() && config.get("appendonly") != Some("yes") {
            let dir = std::path::PathBuf::from(config.dir());
            let shared = server::Shared::new(config, random_seed());
            persist::restore(&shared, &dir)?;
            tokio::spawn(persist::run_save_points(shared.clone()));
            shared
        } else {
            let mut config = config;
            let single = config.group_members().is_empty();
            let raft_address = if single {
                // `--appendonly yes`: a group of this node alone, whose Raft
                // port nobody dials (loopback, any free port).
                String::from("127.0.0.1:0")
            } else {
                format!("{}:{}", config.bind(), config.raft_port())
            };
            let raft_listener = tokio::net::TcpListener::bind(&raft_address)
                .await
                .with_context(|| format!("binding {raft_address}"))?;
            tracing::info!(raft = %raft_listener.local_addr()?, "raft listener bound");
            if single {
                let host = if bound.ip().is_unspecified() {
                    String::from("127.0.0.1")
                } else {
                    bound.ip().to_string()
                };
                let members = format!(
                    "1={host}:{}@{}",
                    bound.port(),
                    raft_listener.local_addr()?.port()
                );
                config
                    .set_startup("group-members", &members)
                    .map_err(anyhow::Error::msg)?;
                config
                    .set_startup("node-id", "1")
                    .map_err(anyhow::Error::msg)?;
                if config.get("appendfsync") == Some("no") {
                    config
                        .set_startup("raft-fsync", "no")
                        .map_err(anyhow::Error::msg)?;
                }
            }
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let replica = replica::start(
                &config,
                local::NodeLocal::new(),
                raft_listener,
                stopped,
                random_seed(),
            )
            .await?;
            if single {
                // Alone in its group: it leads as soon as it has replayed its
                // log and elected itself; clients wait for that.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while replica.group.metrics().current_leader != Some(1) {
                    if std::time::Instant::now() >= deadline {
                        bail!("this node did not come to lead its own group within 60 s");
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
            let shared = server::Shared::replicated(config, random_seed(), replica);
            let mut shutdown = shared.shutdown_requested();
            tokio::spawn(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
                let _ = stop.send(true);
            });
            shared
        };
        // Handlers first: a SIGTERM sent as soon as the ready line appears must
        // find them installed.
        let signals = install_signal_handlers();
        tracing::info!(%bound, "slotraft node ready to accept connections");
        tokio::spawn(watch_signals(shared.clone(), signals));
        server::run(shared.clone(), listener).await?;
        if shared.persistence.get().is_some() && persist::saves_on_shutdown(&shared) {
            let saved = tokio::task::block_in_place(|| persist::save(&shared));
            match saved {
                Ok(()) => tracing::info!("data saved before stopping"),
                Err(error) => tracing::error!(%error, "saving before stopping failed"),
            }
        }
        tracing::info!("slotraft node stopped");
        Ok(())
    })
}

type Signals = Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>;

/// Installs the SIGTERM and SIGINT handlers (must run inside the runtime).
fn install_signal_handlers() -> Signals {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(terminate), Ok(interrupt)) => Some((terminate, interrupt)),
        _ => None,
    }
}

/// SIGTERM and SIGINT request a graceful shutdown, like SHUTDOWN.
async fn watch_signals(shared: Arc<server::Shared>, signals: Signals) {
    let Some((mut terminate, mut interrupt)) = signals else {
        tracing::warn!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = terminate.recv() => tracing::info!("received SIGTERM, shutting down"),
        _ = interrupt.recv() => tracing::info!("received SIGINT, shutting down"),
    }
    shared.request_shutdown();
}
