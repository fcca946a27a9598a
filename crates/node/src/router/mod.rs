//! `slotraft router`: a RESP proxy that makes the cluster usable from any
//! Redis client (no cluster support needed). It learns the slot map from
//! `CLUSTER SLOTS`, forwards each command to the leader of its slot's shard,
//! follows MOVED / ASK / TRYAGAIN / CLUSTERDOWN itself (bounded retries with
//! backoff, so a client never sees a redirect), splits the multi-key commands
//! whose Redis semantics allow it, and answers whole-cluster commands.
//!
//! Modules: `topology` (the slot map), `pool` (node links shared by all
//! clients for plain keyed commands), `upstream` (a client's own node
//! connections, for what has connection state; every step bounded by a
//! timeout), `client` (one task per
//! client: parsing, local commands, MULTI, routing with redirects), `whole`
//! (split multi-key commands and whole-cluster commands), `relay` (Pub/Sub:
//! a subscribing client's connection relayed to one node), `monitor`
//! (MONITOR: every node's stream merged).

mod client;
mod monitor;
mod pool;
mod relay;
mod topology;
mod upstream;
mod whole;

use anyhow::Context as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use topology::SlotMap;

/// The router's command-line options.
pub struct RouterOptions {
    pub bind: String,
    pub port: u16,
    /// Nodes to learn the topology from (`HOST:PORT`).
    pub seeds: Vec<String>,
    pub max_clients: usize,
    /// Bound on each connect, write and read to a node.
    pub upstream_timeout: Duration,
    /// How often the slot map is refreshed without being asked to.
    pub refresh_interval: Duration,
    /// Requests one client may have in flight (the input read per batch).
    pub pipeline_depth: usize,
    /// Shared write links per node (reads share one).
    pub write_links: u64,
    /// READONLY reads go to a replica (or the master) in this zone when the
    /// slot has one there.
    pub prefer_zone: Option<String>,
    /// Clients must AUTH with this password first.
    pub requirepass: Option<String>,
}

/// State shared by every client task.
pub struct Router {
    seeds: Vec<String>,
    map: RwLock<Arc<SlotMap>>,
    /// When the last refresh started; refreshes closer together than
    /// `REFRESH_SPACING` are skipped (a burst of MOVED replies asks once).
    last_refresh: tokio::sync::Mutex<Option<Instant>>,
    upstream_timeout: Duration,
    /// Why the last refresh failed (None after a success).
    refresh_error: RwLock<Option<String>>,
    /// This thread's node links for plain keyed reads.
    pool: pool::Pool,
    /// The node links for plain keyed writes, one set for all the router's
    /// threads (see [`run`]).
    write_pool: Arc<pool::Pool>,
    /// Requests taken from one client's input per batch.
    pipeline_depth: usize,
    /// Shared write links per node; a client's writes take one by its id.
    write_links: u64,
    /// The zone READONLY reads prefer.
    pub prefer_zone: Option<String>,
    /// The password clients must AUTH with (`--requirepass`).
    pub requirepass: Option<String>,
}

const REFRESH_SPACING: Duration = Duration::from_millis(100);

impl Router {
    pub fn new(options: &RouterOptions, write_pool: Arc<pool::Pool>) -> Router {
        let (seeds, upstream_timeout) = (options.seeds.clone(), options.upstream_timeout);
        Router {
            seeds,
            map: RwLock::new(Arc::new(SlotMap::default())),
            last_refresh: tokio::sync::Mutex::new(None),
            upstream_timeout,
            refresh_error: RwLock::new(None),
            pool: pool::Pool::new(upstream_timeout),
            write_pool,
            pipeline_depth: options.pipeline_depth,
            write_links: options.write_links,
            prefer_zone: options.prefer_zone.clone(),
            requirepass: options.requirepass.clone(),
        }
    }

    /// The current slot map.
    pub fn map(&self) -> Arc<SlotMap> {
        match self.map.read() {
            Ok(map) => map.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Fetches CLUSTER SLOTS from the known masters, then the seeds, unless
    /// another refresh started less than `REFRESH_SPACING` ago.
    pub async fn refresh(&self) {
        let mut last = self.last_refresh.lock().await;
        if last.is_some_and(|at| at.elapsed() < REFRESH_SPACING) {
            return;
        }
        *last = Some(Instant::now());
        let mut candidates: Vec<String> = self.map().masters().to_vec();
        for seed in &self.seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        let outcome = topology::fetch(&candidates, self.prefer_zone.is_some()).await;
        let error = match outcome {
            Ok(map) => {
                let map = Arc::new(map);
                match self.map.write() {
                    Ok(mut current) => *current = map,
                    Err(poisoned) => *poisoned.into_inner() = map,
                }
                None
            }
            Err(error) => {
                tracing::warn!(%error, "cannot refresh the slot map");
                Some(error)
            }
        };
        match self.refresh_error.write() {
            Ok(mut current) => *current = error,
            Err(poisoned) => *poisoned.into_inner() = error,
        }
    }

    /// The error for a client while the router knows no slot map at all (no
    /// node answered CLUSTER SLOTS): answered at once, not after retries.
    pub fn no_map_error(&self) -> Option<resp::Frame> {
        if !self.map().is_empty() {
            return None;
        }
        let reason = match self.refresh_error.read() {
            Ok(error) => error.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        Some(resp::Frame::error_owned(format!(
            "CLUSTERDOWN the router cannot reach any cluster node ({})",
            reason.unwrap_or_else(|| "no slot map yet".to_string())
        )))
    }

    /// Addresses to send a keyless command to: the masters, then the seeds.
    pub fn any_nodes(&self) -> Vec<String> {
        let mut candidates: Vec<String> = self.map().masters().to_vec();
        for seed in &self.seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        candidates
    }

    /// Client ids are unique across the router's threads.
    fn next_client_id(&self) -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}

/// Runs the router until SIGTERM or SIGINT on `threads` threads (0: one per
/// core). Each thread runs its own single-threaded runtime with its own
/// [`Router`] (slot map and read links) and accepts from the one listening
/// socket: a client's read, its node link and its reply stay on one thread,
/// with no hand-off between threads on the way.
///
/// Write links are shared by all threads instead: a node runs what one link
/// brings as one Raft entry and waits for its commit before reading that
/// link again, so every link more per node means smaller entries, each
/// costing a commit round and an fsync on every replica (figures in
/// ARCHITECTURE.md, Router). Reads keep per-thread links: they are bound by
/// the router's CPU, not by commits, and sharing them measured slower.
pub fn run(options: RouterOptions, threads: usize) -> anyhow::Result<()> {
    if options.seeds.is_empty() {
        anyhow::bail!("name at least one seed node with --seeds HOST:PORT[,HOST:PORT...]");
    }
    let threads = if threads > 0 {
        threads
    } else {
        std::thread::available_parallelism().map_or(1, |count| count.get())
    };
    let address = format!("{}:{}", options.bind, options.port);
    let listener =
        std::net::TcpListener::bind(&address).with_context(|| format!("binding {address}"))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let options = Arc::new(options);
    let write_pool = Arc::new(pool::Pool::new(options.upstream_timeout));
    let clients = Arc::new(Semaphore::new(options.max_clients));
    let (ready, started) = std::sync::mpsc::channel();
    for index in 0..threads {
        let listener = listener.try_clone()?;
        let (options, clients, ready) = (options.clone(), clients.clone(), ready.clone());
        let write_pool = write_pool.clone();
        std::thread::Builder::new()
            .name(format!("router-{index}"))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready.send(Err(anyhow::Error::from(error)));
                        return;
                    }
                };
                runtime.block_on(serve(options, write_pool, listener, clients, ready));
            })
            .context("starting a router thread")?;
    }
    drop(ready);
    for _ in 0..threads {
        started
            .recv()
            .context("a router thread stopped while starting")??;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let (Ok(mut terminate), Ok(mut interrupt)) = (
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()),
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()),
        ) else {
            anyhow::bail!("cannot install signal handlers");
        };
        tracing::info!(%bound, seeds = ?options.seeds, threads, "slotraft router ready to accept connections");
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        tracing::info!("slotraft router stopped");
        Ok(())
    })
}

/// One router thread: learns the slot map, refreshes it on an interval and
/// serves the clients it accepts.
async fn serve(
    options: Arc<RouterOptions>,
    write_pool: Arc<pool::Pool>,
    listener: std::net::TcpListener,
    clients: Arc<Semaphore>,
    ready: std::sync::mpsc::Sender<anyhow::Result<()>>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            let _ = ready.send(Err(error.into()));
            return;
        }
    };
    let router = Arc::new(Router::new(&options, write_pool));
    router.refresh().await;
    if router.map().is_empty() {
        tracing::warn!("no seed answered CLUSTER SLOTS yet; clients get errors until one does");
    }
    let _ = ready.send(Ok(()));
    let refresher = router.clone();
    let interval = options.refresh_interval.max(Duration::from_millis(100));
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            refresher.refresh().await;
        }
    });
    loop {
        let (mut stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = clients.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        tokio::spawn(async move {
            client::serve(router, stream).await;
            drop(permit);
        });
    }
}
