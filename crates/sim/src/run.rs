//! One simulated run: replicas and clients under a fault schedule, then the
//! checkers over what the clients saw.
//!
//! Phases: the workload runs for `window` while faults come and go; then every
//! fault is healed and crashed replicas restart; the run waits until the
//! replicas converge (same applied index and state digest), reads every key's
//! final value through the linearizable path, and checks the history.
//!
//! On a cluster ([`Hosts::Cluster`]) the driver first forms it with the
//! admin's `create` (the window starts then), moves slots of workload keys
//! between shards during the window, finishes every migration a fault left
//! unfinished after healing, and checks that every group converges and the
//! admin's `check` passes.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::changes::{Changer, Retired};
use crate::check::{self, Violation};
use crate::client::{Client, ReadMode, Transport};
use crate::disk::{SimDisk, BASE_SYNC_LATENCY};
use crate::faults::{self, Event, Kind, BASE_LATENCY_MS};
use crate::group::{add_replicas, host_name, Clocks, Handles, Storage};
use crate::history::{Call, History, Observed, Outcome};
use crate::node_host::{
    add_cluster_nodes_with, add_nodes_with, node_address, ClusterHandles, RespClient,
};
use crate::rng::Rng;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    /// Hosts, `spare` of them included.
    pub nodes: u64,
    /// Cluster runs: hosts that start outside the cluster (the highest
    /// ids). The admin adds them, moves replicas to and from them, and
    /// deletes them again while the faults run (see `crate::changes`).
    pub spare: u64,
    pub clients: u64,
    /// How long the workload runs (simulated time) while faults come and go.
    pub window: Duration,
    pub faults: Vec<Kind>,
    pub read_mode: ReadMode,
    /// The ack-before-commit mutation (see [`Client::ack_before_commit`]).
    pub ack_before_commit: bool,
    pub storage: Storage,
    /// Bounds of the replicas' clock offsets (ms) and drifts (ppm).
    pub clock_offset_ms: u64,
    pub clock_drift_ppm: u64,
    pub hosts: Hosts,
}

/// What runs on the simulated hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// The replication stack alone (openraft, log store, state machine,
    /// transport); clients go through `replication::serve` as the node does,
    /// each replica with its own skewed clock.
    Replication,
    /// The real `slotraft node` in replicated mode; clients speak RESP to it.
    /// Each node's wall clock is skewed as the replicas' are.
    Node,
    /// A cluster of `slotraft node`s (`--cluster-enabled yes`) formed by the
    /// admin's `create`: a metadata group and one shard per node, each
    /// replicated on every node. Clients keep a slot map and follow MOVED
    /// and ASK; slots holding workload keys move between shards while the
    /// faults run.
    Cluster,
}

impl Hosts {
    pub fn name(self) -> &'static str {
        match self {
            Hosts::Replication => "replication",
            Hosts::Node => "node",
            Hosts::Cluster => "cluster",
        }
    }

    pub fn parse(text: &str) -> Result<Hosts, String> {
        match text {
            "replication" => Ok(Hosts::Replication),
            "node" => Ok(Hosts::Node),
            "cluster" => Ok(Hosts::Cluster),
            other => Err(format!(
                "unknown hosts '{other}' (replication, node or cluster)"
            )),
        }
    }
}

impl Config {
    pub fn new(seed: u64) -> Config {
        Config {
            seed,
            nodes: 3,
            spare: 0,
            clients: 4,
            window: Duration::from_secs(10),
            faults: Kind::ALL.to_vec(),
            read_mode: ReadMode::Linearizable,
            ack_before_commit: false,
            // Small, so snapshots are built, logs compacted and snapshots
            // installed on replicas that were down.
            storage: Storage {
                snapshot_every: 200,
                keep_behind_snapshot: 50,
                // Every other seed bounds it far tighter (see `run`).
                log_memory_limit: 64 << 20,
                without_streams: 0,
                // Each group on its own timer, as the sweep's seeds were
                // recorded with (the node-level hosts run the node's beat).
                node_heartbeats: false,
            },
            clock_offset_ms: 500,
            clock_drift_ppm: 500,
            hosts: Hosts::Replication,
        }
    }

    /// The same run on the real node (see [`Hosts::Node`]).
    pub fn on_nodes(seed: u64) -> Config {
        Config {
            hosts: Hosts::Node,
            ..Config::new(seed)
        }
    }

    /// The same run on a cluster of real nodes (see [`Hosts::Cluster`]):
    /// three form it, one spare joins and leaves.
    pub fn on_cluster(seed: u64) -> Config {
        Config {
            hosts: Hosts::Cluster,
            ..Config::new(seed)
        }
        .with_spare(1)
    }

    /// This run with `spare` hosts outside the cluster besides the three
    /// that form it.
    pub fn with_spare(self, spare: u64) -> Config {
        Config {
            nodes: 3 + spare,
            spare,
            ..self
        }
    }

    /// The command that replays this run.
    pub fn reproduce(&self) -> String {
        let faults: Vec<&str> = self.faults.iter().map(|kind| kind.name()).collect();
        let faults = if faults.is_empty() {
            "none".to_string()
        } else {
            faults.join(",")
        };
        let mut mutation = match self.read_mode {
            ReadMode::Linearizable => "",
            ReadMode::AnyReplica => " --mutation stale-reads",
        }
        .to_string();
        if self.ack_before_commit {
            mutation.push_str(" --mutation ack-before-commit");
        }
        if self.hosts != Hosts::Replication {
            mutation.push_str(&format!(" --hosts {}", self.hosts.name()));
        }
        if self.hosts == Hosts::Cluster && self.spare != 1 {
            mutation.push_str(&format!(" --spare {}", self.spare));
        }
        if self.storage.without_streams != 0 {
            let ids: Vec<String> = (1..64)
                .filter(|id| self.storage.without_streams & (1 << id) != 0)
                .map(|id| id.to_string())
                .collect();
            mutation.push_str(&format!(" --without-streams {}", ids.join(",")));
        }
        format!(
            "cargo xtask sim --from {} --seeds 1 --faults {faults} --window-ms {}{mutation}",
            self.seed,
            self.window.as_millis()
        )
    }
}

/// What a run found.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    /// A hash of everything observable: the history, the faults applied and
    /// the final digest. The same seed gives the same hash.
    pub trace_hash: u64,
    pub operations: usize,
    pub acknowledged: usize,
    pub unknown: usize,
    pub failed: usize,
    /// The rate limiter's acknowledged answers: admitted, refused.
    pub admissions: (usize, usize),
    /// Acknowledged blocking pops: that took an element, that timed out.
    pub pops: (usize, usize),
    /// Slot migrations (cluster runs): completed, attempts that failed
    /// (each failed one was rolled forward later).
    pub migrations: (usize, usize),
    /// Cluster changes (runs with spare nodes): completed, attempts that
    /// failed (each rerun later).
    pub changes: (usize, usize),
    /// Snapshot files on the simulated disks at the end (each replica keeps
    /// its newest, built or installed).
    pub snapshot_files: usize,
    pub faults_applied: usize,
    /// The faults as applied, with their simulated times.
    pub fault_log: Vec<String>,
    pub simulated: Duration,
    pub violations: Vec<Violation>,
    /// The run could not finish (no convergence, a host failed, ...).
    pub error: Option<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.error.is_none()
    }
}

/// The keys of the workload, by the kind of value they hold.
const REGISTERS: [&str; 3] = ["r0", "r1", "r2"];
const COUNTER: &str = "c0";
const SET: &str = "s0";
const LIST: &str = "l0";
/// The transfer pair: keys `{acct}a` and `{acct}b`, one slot.
const ACCOUNTS: &str = "acct";
/// The work queue: pushes and blocking pops.
const QUEUE: &str = "q0";
/// The rate limiter's sorted set: key `{rl}`.
const LIMITER: &str = "rl";

/// Runs `config` and checks it.
pub fn run(config: &Config) -> Report {
    replication::runtime::seed_rng(config.seed);
    let root = scratch_dir(config.seed);
    let mut rng = Rng::new(config.seed);
    let schedule = faults::plan(&mut rng, &config.faults, config.nodes, config.window);
    let clocks = Clocks::draw(
        &mut rng.fork(),
        config.nodes,
        config.clock_offset_ms,
        config.clock_drift_ppm,
    );
    let mut sim = turmoil::Builder::new()
        .simulation_duration(config.window + Duration::from_secs(300))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(BASE_LATENCY_MS))
        .rng_seed(config.seed)
        .build();
    let handles = Handles::default();
    let cluster_handles = ClusterHandles::default();
    let groups = match config.hosts {
        Hosts::Cluster => Groups::Cluster(cluster_handles.clone()),
        Hosts::Replication | Hosts::Node => Groups::One(handles.clone()),
    };
    let disks: BTreeMap<u64, SimDisk> = (1..=config.nodes)
        .map(|node| (node, SimDisk::default()))
        .collect();
    // Every other seed bounds the log's memory so tightly that snapshots
    // and purges also come by bytes, between the ones by entry count.
    let mut storage = config.storage;
    if config.seed.is_multiple_of(2) {
        storage.log_memory_limit = storage.log_memory_limit.min(16 << 10);
    }
    match config.hosts {
        Hosts::Replication => add_replicas(
            &mut sim,
            config.nodes,
            root.clone(),
            &handles,
            storage,
            &disks,
        ),
        Hosts::Node => add_nodes_with(
            &mut sim,
            config.nodes,
            root.clone(),
            config.seed,
            &handles,
            storage,
            &disks,
            clocks.clone(),
        ),
        Hosts::Cluster => {
            node::admin::set_quiet(true);
            add_cluster_nodes_with(
                &mut sim,
                config.nodes,
                root.clone(),
                config.seed,
                clocks.clone(),
                &cluster_handles,
                storage,
                &disks,
            )
        }
    }
    let mut crash_rng = rng.fork();
    let history = History::default();
    let healed = Arc::new(AtomicBool::new(false));
    let membership = Membership::default();
    let finals: Arc<Mutex<Option<Result<Finals, String>>>> = Arc::default();
    // When the fault window starts: at once, or once the cluster is formed.
    let started: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(
        (config.hosts != Hosts::Cluster).then_some(Duration::ZERO),
    ));
    let migrations = Migrations::default();
    let changer = Changer {
        all: (1..=config.nodes).collect(),
        founders: (1..=config.nodes - config.spare).collect(),
        spares: (config.nodes - config.spare + 1..=config.nodes).collect(),
        // One more shard than `create` makes, when spares join.
        max_shards: if config.spare > 0 { 4 } else { 3 },
        log: Migrations::default(),
        retired: Retired::default(),
        highest_epoch: Arc::default(),
        gate: membership.gate.clone(),
    };
    {
        let (groups, history, healed, finals) = (
            groups.clone(),
            history.clone(),
            healed.clone(),
            finals.clone(),
        );
        let (config, workload_rng, clocks) = (config.clone(), rng.fork(), clocks.clone());
        let (membership, started, migrations, changer) = (
            membership.clone(),
            started.clone(),
            migrations.clone(),
            changer.clone(),
        );
        sim.client("driver", async move {
            let changes = tokio::spawn(membership.clone().run(
                groups.clone(),
                config.nodes,
                config.spare > 0,
            ));
            let outcome = drive(
                &config,
                workload_rng,
                &groups,
                &history,
                &healed,
                &clocks,
                &membership,
                &started,
                &migrations,
                &changer,
            )
            .await;
            changes.abort();
            *finals
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(outcome);
            Ok(())
        });
    }
    let mut applied = vec![format!("     0ms clocks: {}", clocks.describe())];
    // Due events are taken from the front; events scheduled by others are
    // merged in by time (a stable sort keeps equal times in order).
    let mut pending: std::collections::VecDeque<(Duration, Event)> = schedule.into();
    let mut down: Vec<u64> = Vec::new();
    let mut crash_waits = BTreeMap::new();
    let mut error = None;
    let mut healing_done = false;
    let mut origin = None;
    loop {
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(failure) => {
                error = Some(format!("the simulation stopped: {failure}"));
                break;
            }
        }
        let now = sim.elapsed();
        // The schedule is drawn from the window's start.
        let start = match origin {
            Some(start) => start,
            None => {
                let Some(start) = *started
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                else {
                    continue;
                };
                for (at, _) in pending.iter_mut() {
                    *at += start;
                }
                origin = Some(start);
                start
            }
        };
        while pending.front().is_some_and(|(at, _)| *at <= now) {
            let Some((at, event)) = pending.pop_front() else {
                break;
            };
            let mut later = Vec::new();
            let mut host = Host {
                sim: &mut sim,
                groups: &groups,
                disks: &disks,
                rng: &mut crash_rng,
                down: &mut down,
                later: &mut later,
                crash_waits: &mut crash_waits,
                membership: &membership,
                retired: &changer.retired,
            };
            if let Some(line) = host.apply(&event, config.nodes) {
                // `SIM_DEBUG=1` prints faults and cluster changes as they
                // happen (a run that panics prints no trace).
                if std::env::var_os("SIM_DEBUG").is_some() {
                    eprintln!("{:>6}ms FAULT {line}", at.as_millis());
                }
                applied.push(format!("{:>6}ms {line}", at.as_millis()));
            }
            if !later.is_empty() {
                pending.extend(later);
                pending.make_contiguous().sort_by_key(|(at, _)| *at);
            }
        }
        if !healing_done && now >= start + config.window {
            // Faults still queued (a crash waiting for a write, a repair)
            // are moot: everything heals now.
            pending.clear();
            // A node deleted from the cluster stays down.
            down.retain(|node| !changer.retired.contains(*node));
            heal(&mut sim, config.nodes, &down, &disks);
            for node in 1..=config.nodes {
                membership.push(Event::Promote(node));
            }
            down.clear();
            applied.push(format!("{:>6}ms heal", now.as_millis()));
            healing_done = true;
            healed.store(true, Ordering::SeqCst);
        }
    }
    let simulated = sim.elapsed();
    drop(sim);
    let snapshot_files = disks
        .values()
        .map(|disk| disk.count_named("current.snap"))
        .sum();
    let _ = std::fs::remove_dir_all(&root);
    let operations = history.operations();
    // `SIM_DEBUG_KEY=KEY` prints that key's history (a failing seed's
    // replay).
    if let Some(wanted) = std::env::var_os("SIM_DEBUG_KEY") {
        for operation in operations
            .iter()
            .filter(|operation| wanted.to_str() == Some(operation.key.as_str()))
        {
            eprintln!("{operation:?}");
        }
    }
    let faults_applied = applied.len();
    let migrations = migrations.take();
    applied.extend(migrations.lines);
    let changes = changer.log.take();
    applied.extend(changes.lines);
    let finals = finals
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    let mut violations = Vec::new();
    let mut digest = String::new();
    match finals {
        Some(Ok(finals)) => {
            violations.extend(check::linearizable(&operations));
            violations.extend(check::final_state(&operations, &finals.values));
            violations.extend(check::conservation(&operations));
            violations.extend(check::rate_limit(
                &operations,
                crate::client::LIMIT_WINDOW_MS,
                crate::client::LIMIT,
            ));
            digest = finals.digest;
        }
        Some(Err(failure)) => error = error.or(Some(failure)),
        None => error = error.or(Some("the driver did not finish".to_string())),
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    operations.hash(&mut hasher);
    applied.hash(&mut hasher);
    digest.hash(&mut hasher);
    let count = |wanted: fn(&Outcome) -> bool| {
        operations
            .iter()
            .filter(|operation| wanted(&operation.outcome))
            .count()
    };
    Report {
        seed: config.seed,
        trace_hash: hasher.finish(),
        operations: operations.len(),
        acknowledged: count(|outcome| matches!(outcome, Outcome::Done(_))),
        unknown: count(|outcome| matches!(outcome, Outcome::Unknown)),
        failed: count(|outcome| matches!(outcome, Outcome::Failed)),
        admissions: (
            limiter_answers(&operations, "1"),
            limiter_answers(&operations, "0"),
        ),
        pops: (
            operations
                .iter()
                .filter(|operation| operation.call == Call::BLPop)
                .filter(|operation| {
                    matches!(operation.outcome, Outcome::Done(Observed::Elements(_)))
                })
                .count(),
            operations
                .iter()
                .filter(|operation| operation.call == Call::BLPop)
                .filter(|operation| operation.outcome == Outcome::Done(Observed::Nil))
                .count(),
        ),
        migrations: (migrations.done, migrations.failed),
        changes: (changes.done, changes.failed),
        snapshot_files,
        faults_applied,
        fault_log: applied,
        simulated,
        violations,
        error,
    }
}

/// How many limiter runs were acknowledged with `answer`.
fn limiter_answers(operations: &[crate::history::Operation], answer: &str) -> usize {
    operations
        .iter()
        .filter(|operation| matches!(operation.call, Call::Limit(_)))
        .filter(|operation| match &operation.outcome {
            Outcome::Done(Observed::Elements(reply)) => {
                reply.first().map(String::as_str) == Some(answer)
            }
            _ => false,
        })
        .count()
}

fn scratch_dir(seed: u64) -> PathBuf {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, Ordering::SeqCst);
    let dir =
        std::env::temp_dir().join(format!("slotraft-sim-{}-{seed}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// What applying faults touches.
struct Host<'a, 'b> {
    sim: &'a mut turmoil::Sim<'b>,
    groups: &'a Groups,
    disks: &'a BTreeMap<u64, SimDisk>,
    rng: &'a mut Rng,
    down: &'a mut Vec<u64>,
    /// Events this one schedules (the repair of an isolated leader).
    later: &'a mut Vec<(Duration, Event)>,
    /// How long each pending crash has waited for a write in progress.
    crash_waits: &'a mut BTreeMap<u64, u32>,
    /// Membership changes for the driver to propose (they are async).
    membership: &'a Membership,
    /// Nodes deleted from the cluster, which stay down.
    retired: &'a Retired,
}

impl Host<'_, '_> {
    /// Applies one scheduled event; a line for the trace, or `None` when the
    /// event did not apply (restarting a replica that is up).
    fn apply(&mut self, event: &Event, nodes: u64) -> Option<String> {
        let Host {
            sim,
            groups,
            disks,
            rng,
            down,
            later,
            crash_waits,
            membership,
            retired,
        } = self;
        match *event {
            // A partition as TCP sees it: the link stalls (turmoil holds its
            // segments) and what was sent arrives once it heals, in order.
            // turmoil's own partitions drop segments from a stream that
            // stays open, which no TCP connection does, and left replies
            // missing from the middle of live HTTP/2 connections. A one-way
            // loss stalls TCP both ways, since acknowledgements cannot pass.
            Event::Partition(a, b) => sim.hold(host_name(a), host_name(b)),
            Event::Repair(a, b) => sim.release(host_name(a), host_name(b)),
            Event::PartitionOneWay { from, to } => sim.hold(host_name(from), host_name(to)),
            Event::RepairOneWay { from, to } => sim.release(host_name(from), host_name(to)),
            Event::IsolateLeader(length) => {
                let all: Vec<u64> = (1..=nodes).collect();
                // On a cluster, the leader of one of its groups.
                let every = groups.all();
                let (group, handles) = match every.len() {
                    0 | 1 => every.first()?,
                    count => &every[rng.below(count as u64) as usize],
                };
                let leader = handles.leader_among(&all)?;
                let repair_at = sim.elapsed() + length;
                for other in all.iter().filter(|other| **other != leader) {
                    sim.hold(host_name(leader), host_name(*other));
                    later.push((repair_at, Event::Repair(leader, *other)));
                }
                return Some(match groups {
                    Groups::One(_) => format!("isolate leader node{leader}"),
                    Groups::Cluster(_) => format!("isolate leader node{leader} (of group {group})"),
                });
            }
            Event::Crash(node) | Event::Restart(node) if retired.contains(node) => return None,
            Event::Crash(node) => {
                // Crash in the middle of a write when one comes soon: that is
                // when unsynced data is lost or torn.
                let waits = crash_waits.entry(node).or_insert(0);
                let writing = disks.get(&node).is_some_and(|disk| disk.has_pending());
                if !writing && *waits < 50 {
                    *waits += 1;
                    later.push((sim.elapsed() + Duration::from_millis(1), event.clone()));
                    return None;
                }
                crash_waits.remove(&node);
                groups.remove(node);
                crate::net::crash(sim, &host_name(node));
                down.push(node);
                let damage = disks.get(&node).map(|disk| disk.crash(rng, true));
                return Some(format!("{event:?} {damage:?}"));
            }
            Event::Restart(node) => {
                if !down.contains(&node) {
                    return None;
                }
                down.retain(|other| *other != node);
                sim.bounce(host_name(node));
            }
            Event::Hold(a, b) => sim.hold(host_name(a), host_name(b)),
            Event::Release(a, b) => sim.release(host_name(a), host_name(b)),
            Event::Latency(ms) => sim.set_max_message_latency(Duration::from_millis(ms)),
            Event::SyncLatency(node, ms) => {
                if let Some(disk) = disks.get(&node) {
                    disk.set_sync_latency(Duration::from_millis(ms));
                }
            }
            Event::Demote(_) | Event::Promote(_) => membership.push(event.clone()),
        }
        Some(format!("{event:?}"))
    }
}

/// Ends every fault: links repaired and released, latency back to normal,
/// disks healthy, crashed replicas restarted.
fn heal(sim: &mut turmoil::Sim<'_>, nodes: u64, down: &[u64], disks: &BTreeMap<u64, SimDisk>) {
    for disk in disks.values() {
        disk.set_sync_latency(BASE_SYNC_LATENCY);
    }
    for a in 1..=nodes {
        for b in (a + 1)..=nodes {
            sim.repair(host_name(a), host_name(b));
            sim.release(host_name(a), host_name(b));
        }
    }
    sim.set_max_message_latency(Duration::from_millis(BASE_LATENCY_MS));
    for node in down {
        sim.bounce(host_name(*node));
    }
}

/// What the driver learned after healing.
struct Finals {
    /// Each key's final value, read through the linearizable path.
    values: BTreeMap<String, Observed>,
    /// The converged replicas' applied index and digest.
    digest: String,
}

/// The replica groups the faults and the liveness checks act on.
#[derive(Clone)]
enum Groups {
    /// One group (the replication stack, or a node in replicated mode).
    One(Handles),
    /// A cluster's groups: metadata (0) and shards, as the nodes open them.
    Cluster(ClusterHandles),
}

impl Groups {
    fn all(&self) -> Vec<(replication::GroupId, Handles)> {
        match self {
            Groups::One(handles) => vec![(crate::group::GROUP, handles.clone())],
            Groups::Cluster(groups) => groups.groups(),
        }
    }

    /// One group's replicas (none yet if no node has opened it).
    fn get(&self, group: u64) -> Handles {
        match self {
            Groups::One(handles) => handles.clone(),
            Groups::Cluster(groups) => groups.group(group),
        }
    }

    fn remove(&self, node: u64) {
        match self {
            Groups::One(handles) => handles.remove(node),
            Groups::Cluster(groups) => groups.remove(node),
        }
    }
}

/// What the cluster driver's slot migrations did: a line each for the
/// trace, and how many completed and failed.
#[derive(Clone, Default)]
pub struct Migrations(Arc<Mutex<MigrationLog>>);

#[derive(Default)]
struct MigrationLog {
    lines: Vec<String>,
    done: usize,
    failed: usize,
}

impl Migrations {
    pub fn record(&self, done: bool, line: String) {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default().as_millis();
        let mut log = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if done {
            log.done += 1;
        } else {
            log.failed += 1;
        }
        if std::env::var_os("SIM_DEBUG").is_some() {
            eprintln!("{elapsed:>6}ms {line}");
        }
        log.lines.push(format!("{elapsed:>6}ms {line}"));
    }

    fn take(&self) -> MigrationLog {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }
}

/// The clients' workload, then the liveness phase.
#[allow(clippy::too_many_arguments)]
async fn drive(
    config: &Config,
    mut rng: Rng,
    groups: &Groups,
    history: &History,
    healed: &AtomicBool,
    clocks: &Clocks,
    membership: &Membership,
    started: &Mutex<Option<Duration>>,
    migrations: &Migrations,
    changer: &Changer,
) -> Result<Finals, String> {
    let nodes: Vec<u64> = (1..=config.nodes).collect();
    let cluster = config.hosts == Hosts::Cluster;
    let mut start = Duration::ZERO;
    if cluster {
        // Formed before the faults start, as `slotraft cluster create`, of
        // every host but the spares.
        let addresses: Vec<String> = changer
            .founders
            .iter()
            .map(|id| node_address(*id))
            .collect();
        node::admin::create(&addresses, None, addresses.len(), config.seed)
            .await
            .map_err(|error| format!("forming the cluster failed: {error}"))?;
        start = turmoil::sim_elapsed().unwrap_or_default();
        *started
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(start);
    }
    let end = start + config.window;
    let handles = match groups {
        Groups::One(handles) => handles.clone(),
        Groups::Cluster(_) => Handles::default(),
    };
    let new_client = |id: u64| {
        let mut client = Client::new(id, nodes.clone(), handles.clone(), history.clone());
        client.read_mode = config.read_mode;
        client.ack_before_commit = config.ack_before_commit;
        client.clocks = clocks.clone();
        if config.hosts != Hosts::Replication {
            client.transport = Transport::Resp(BTreeMap::new());
        }
        if cluster {
            client.slots = Some(BTreeMap::new());
            client.attempts = CLUSTER_ATTEMPTS;
        }
        client
    };
    let mut clients = Vec::new();
    for id in 0..config.clients {
        let mut client = new_client(id);
        let mut rng = rng.fork();
        let queue = config.hosts != Hosts::Replication;
        clients.push(tokio::spawn(async move {
            let mut sequence = 0u64;
            while turmoil::sim_elapsed().unwrap_or_default() < end {
                sequence += 1;
                let unique = format!("{id}-{sequence}");
                let (key, call) = pick(&mut rng, unique, queue);
                client.perform(key, call, rng.next_u64()).await;
                tokio::time::sleep(Duration::from_millis(rng.between(1, 30))).await;
            }
        }));
    }
    let mover = cluster.then(|| {
        tokio::spawn(migrate_during(
            nodes.clone(),
            end,
            rng.fork(),
            migrations.clone(),
        ))
    });
    // The spares leave again from a point between half and six sevenths of
    // the window.
    let retire_from = start + config.window * rng.between(7, 12) as u32 / 14;
    let changes = (cluster && config.spare > 0).then(|| {
        let (changer, rng) = (changer.clone(), rng.fork());
        tokio::spawn(async move { changer.during(retire_from, end, rng).await })
    });
    for client in clients {
        client
            .await
            .map_err(|error| format!("a client failed: {error}"))?;
    }
    if let Some(mover) = mover {
        mover
            .await
            .map_err(|error| format!("the migrations failed: {error}"))?;
    }
    let unfinished = match changes {
        Some(changes) => changes
            .await
            .map_err(|error| format!("the cluster changes failed: {error}"))?,
        None => None,
    };
    while !healed.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if cluster {
        changer.finish(unfinished).await?;
        finish_migrations(&nodes, migrations).await?;
    }
    // Liveness: every replica back and a voter again, one leader, the same
    // state everywhere.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let sets = loop {
        let sets = replica_sets(groups, &nodes).await;
        if let Some(sets) = sets.filter(|sets| membership.is_idle() && all_voters(groups, sets)) {
            break sets;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the replicas did not all become voters again after healing (changes pending: {}; {})",
                !membership.is_idle(),
                group_states(groups, &nodes)
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut digests = Vec::new();
    for (group, ids) in &sets {
        let handles = groups.get(*group);
        let digest = converge(&handles, ids, Duration::from_secs(120))
            .await
            .map_err(|error| format!("group {group}: {error}"))?;
        digests.push(match groups {
            Groups::One(_) => digest,
            Groups::Cluster(_) => format!("group {group}: {digest}"),
        });
    }
    let digest = digests.join("; ");
    if cluster {
        // Asked of a node in service (a founder may have been deleted).
        let asked = nodes
            .iter()
            .copied()
            .find(|node| !changer.retired.contains(*node))
            .unwrap_or(1);
        check_cluster(asked)
            .await
            .map_err(|error| format!("{error}; {}", group_states(groups, &nodes)))?;
    }
    // The final reads are never mutated.
    let mut reader = new_client(1_000);
    reader.read_mode = ReadMode::Linearizable;
    reader.ack_before_commit = false;
    let mut values = BTreeMap::new();
    let queue = (config.hosts != Hosts::Replication).then_some((QUEUE, Call::LRange));
    let finals = REGISTERS
        .iter()
        .map(|key| (*key, Call::Get))
        .chain([
            (COUNTER, Call::Get),
            (SET, Call::SMembers),
            (LIST, Call::LRange),
        ])
        .chain(queue);
    for (key, call) in finals {
        let mut tries = 0;
        loop {
            match reader.perform(key, call.clone(), 0).await {
                Outcome::Done(observed) => {
                    values.insert(key.to_string(), observed);
                    break;
                }
                _ if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return Err(format!("the final read of {key} kept failing: {other:?}")),
            }
        }
    }
    Ok(Finals { values, digest })
}

/// Attempts per operation of a cluster client: a key of another shard
/// costs a MOVED first, and a moving slot a TRYAGAIN or two.
const CLUSTER_ATTEMPTS: usize = 5;

/// The workload keys whose slots the cluster driver moves (the transfer
/// pair's and the limiter's are their hash tags).
const MIGRATED_KEYS: [&str; 9] = [
    REGISTERS[0],
    REGISTERS[1],
    REGISTERS[2],
    COUNTER,
    SET,
    LIST,
    ACCOUNTS,
    LIMITER,
    QUEUE,
];

/// How long one migration may take before the driver gives up on it (as
/// an admin whose CLI was stopped); the next one rolls it forward.
const MIGRATION_LIMIT: Duration = Duration::from_secs(60);

/// Until `end`: every 0.2-1.5 s, moves the slot of a random workload key to
/// another shard with the admin's `migrate_slots`, while the clients write
/// and the faults run. A migration left unfinished by a failure is finished
/// (rolled forward) first.
async fn migrate_during(nodes: Vec<u64>, end: Duration, mut rng: Rng, log: Migrations) {
    loop {
        tokio::time::sleep(Duration::from_millis(rng.between(200, 1_500))).await;
        if turmoil::sim_elapsed().unwrap_or_default() >= end {
            return;
        }
        let key = MIGRATED_KEYS[rng.below(MIGRATED_KEYS.len() as u64) as usize];
        migrate_once(&nodes, Some(key), rng.next_u64(), &log).await;
    }
}

/// The newest topology any of `nodes` answers with, and that node's
/// address; also whether every node it lists answered with that one epoch.
pub(crate) async fn newest_topology(nodes: &[u64]) -> Option<(String, cluster::Topology, bool)> {
    let mut newest: Option<(String, cluster::Topology)> = None;
    let mut epochs = Vec::new();
    for node in nodes {
        let ask = async {
            let mut client = RespClient::connect(*node).await.ok()?;
            match client.call(&["SLOTRAFT", "TOPOLOGY"]).await.ok()? {
                resp::Frame::Bulk(bytes) => cluster::Topology::from_bytes(&bytes).ok(),
                _ => None,
            }
        };
        let Ok(Some(topology)) = tokio::time::timeout(Duration::from_secs(1), ask).await else {
            epochs.push((*node, None));
            continue;
        };
        epochs.push((*node, Some(topology.epoch)));
        if newest
            .as_ref()
            .is_none_or(|(_, known)| topology.epoch > known.epoch)
        {
            newest = Some((node_address(*node), topology));
        }
    }
    let (address, topology) = newest?;
    let agreed = epochs
        .iter()
        .filter(|(node, _)| topology.nodes.contains_key(node))
        .all(|(_, epoch)| *epoch == Some(topology.epoch));
    Some((address, topology, agreed))
}

/// One migration: finishes the first one the topology records as under
/// way, else moves the slot of `key` (if any) from its shard to another
/// (picked by `choice`). Recorded in `log` either way.
async fn migrate_once(nodes: &[u64], key: Option<&str>, choice: u64, log: &Migrations) {
    let Some((address, topology, _)) = newest_topology(nodes).await else {
        log.record(
            false,
            "migration: no node answered with the topology".into(),
        );
        return;
    };
    let (slot, from, to, what) = if let Some((slot, migration)) = topology.migrations.iter().next()
    {
        (*slot, migration.from, migration.to, "finish".to_string())
    } else if let Some(key) = key {
        let slot = cluster::key_slot(key.as_bytes());
        let Some(from) = topology.slot_owner(slot) else {
            log.record(false, format!("migration: slot {slot} has no owner"));
            return;
        };
        let others: Vec<u64> = topology
            .shards
            .keys()
            .copied()
            .filter(|shard| *shard != from)
            .collect();
        if others.is_empty() {
            return;
        }
        let to = others[(choice % others.len() as u64) as usize];
        (slot, from, to, format!("move ({key})"))
    } else {
        return;
    };
    let slots = [slot];
    let moving = node::admin::migrate_slots(&address, &slots, from, to);
    match tokio::time::timeout(MIGRATION_LIMIT, moving).await {
        Ok(Ok(keys)) => log.record(
            true,
            format!("{what} slot {slot} shard {from} -> {to}: {keys} keys copied"),
        ),
        Ok(Err(error)) => log.record(
            false,
            format!("{what} slot {slot} shard {from} -> {to} failed: {error:#}"),
        ),
        Err(_) => log.record(
            false,
            format!("{what} slot {slot} shard {from} -> {to} timed out"),
        ),
    }
}

/// After healing: finishes every migration a fault left unfinished, until
/// every node answers with the same topology and it records none.
async fn finish_migrations(nodes: &[u64], log: &Migrations) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let newest = newest_topology(nodes).await;
        if let Some((_, topology, agreed)) = &newest {
            if topology.migrations.is_empty() {
                if *agreed {
                    return Ok(());
                }
            } else {
                migrate_once(nodes, None, 0, log).await;
                continue;
            }
        }
        if tokio::time::Instant::now() > deadline {
            let mut epochs = Vec::new();
            for node in nodes {
                let epoch = newest_topology(&[*node])
                    .await
                    .map(|(_, topology, _)| topology.epoch);
                epochs.push(format!("node{node}: {epoch:?}"));
            }
            let state = newest.map(|(_, topology, agreed)| {
                format!(
                    "epoch {} (all nodes agree: {agreed}; {}), migrations {:?}",
                    topology.epoch,
                    epochs.join(", "),
                    topology.migrations
                )
            });
            return Err(format!(
                "the slot migrations were not finished after healing: {state:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every group's replicas as their Raft metrics show them, for a failure's
/// message.
fn group_states(groups: &Groups, nodes: &[u64]) -> String {
    let mut states = Vec::new();
    for (group, handles) in groups.all() {
        let all = nodes.to_vec();
        let state = handles
            .leader_among(&all)
            .and_then(|id| handles.get(id))
            .map(|leader| format!("{:?}", leader.metrics().membership_config));
        let replicas: Vec<String> = all
            .iter()
            .filter_map(|id| handles.get(*id))
            .map(|group| {
                let metrics = group.metrics();
                format!(
                    "node{} {:?} term {} leader {:?} vote {} last log {:?} committed {:?}",
                    group.node_id,
                    metrics.state,
                    metrics.current_term,
                    metrics.current_leader,
                    metrics.vote,
                    metrics.last_log_index,
                    metrics.local_committed.map(|id| id.index)
                )
            })
            .collect();
        states.push(format!(
            "group {group}: leader's membership: {state:?}; replicas: {replicas:?}"
        ));
    }
    states.join("; ")
}

/// The admin's `check` after healing: one topology everywhere, every slot
/// owned, none moving, every shard with a leader that serves requests.
async fn check_cluster(node: u64) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..20 {
        match node::admin::check(&node_address(node)).await {
            Ok(()) => return Ok(()),
            Err(error) => last = format!("{error:#}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("the admin's check failed after healing: {last}"))
}

/// One operation of the workload mix; with `queue`, also a work queue of
/// pushes and blocking pops (on the real node only).
fn pick(rng: &mut Rng, unique: String, queue: bool) -> (&'static str, Call) {
    if queue && rng.below(100) < 12 {
        return if rng.below(2) == 0 {
            (QUEUE, Call::RPush(unique))
        } else {
            (QUEUE, Call::BLPop)
        };
    }
    let register = REGISTERS[rng.below(REGISTERS.len() as u64) as usize];
    match rng.below(100) {
        0..=24 => (register, Call::Set(unique)),
        25..=44 => (register, Call::Get),
        45..=54 => (LIMITER, Call::Limit(unique)),
        55..=64 => (COUNTER, Call::Incr),
        65..=69 => (COUNTER, Call::Get),
        70..=79 => (SET, Call::SAdd(unique)),
        80..=84 => (SET, Call::SMembers),
        85..=91 => (LIST, Call::RPush(unique)),
        92..=93 => (LIST, Call::LRange),
        94..=97 => (ACCOUNTS, Call::Transfer(rng.between(1, 100) as i64)),
        _ => (ACCOUNTS, Call::Audit),
    }
}

/// Waits until every replica is up and all have applied the same index with
/// the same digest; returns that state.
async fn converge(handles: &Handles, ids: &[u64], limit: Duration) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = Vec::new();
    while tokio::time::Instant::now() < deadline {
        last = ids
            .iter()
            .map(|id| handles.applied_and_digest(*id))
            .collect::<Vec<_>>();
        if let Some(Some(first)) = last.first() {
            if handles.leader_among(ids).is_some()
                && last.iter().all(|state| state.as_ref() == Some(first))
            {
                return Ok(format!("applied {} digest {}", first.0, first.1));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let states: Vec<Option<String>> = ids.iter().map(|id| handles.describe_state(*id)).collect();
    Err(format!(
        "the replicas did not converge within {limit:?} after healing: {last:?}; states: {states:?}"
    ))
}

/// Membership changes waiting to be proposed, and a task that proposes them
/// to whichever replica leads, in order, each retried for a while.
#[derive(Clone, Default)]
struct Membership {
    queue: Arc<Mutex<std::collections::VecDeque<Event>>>,
    busy: Arc<AtomicBool>,
    /// Held while a membership change or a cluster change (which changes
    /// memberships too) is made: one at a time, as one operator would.
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl Membership {
    fn push(&self, event: Event) {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push_back(event);
    }

    fn pop(&self) -> Option<Event> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop_front()
    }

    fn is_idle(&self) -> bool {
        !self.busy.load(Ordering::SeqCst)
            && self
                .queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .is_empty()
    }

    /// On a cluster, each change is made in every group the node is a
    /// replica of (by the newest topology); with `metadata_only`, in the
    /// metadata group alone. A cluster whose replicas move (a spare node)
    /// takes the shards' membership changes from the admin's moves: no
    /// product command demotes a shard replica, and one demoted by hand
    /// would look to `del-node` like the new replica of an interrupted move.
    async fn run(self, groups: Groups, nodes: u64, metadata_only: bool) {
        let hosts: Vec<u64> = (1..=nodes).collect();
        loop {
            self.busy.store(true, Ordering::SeqCst);
            while let Some(event) = self.pop() {
                let (Event::Demote(node) | Event::Promote(node)) = event else {
                    continue;
                };
                let _gate = self.gate.lock().await;
                let sets = loop {
                    match replica_sets(&groups, &hosts).await {
                        Some(sets) => break sets,
                        None => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                for (group, replicas) in &sets {
                    let excluded = metadata_only && *group != cluster::topology::METADATA_GROUP;
                    if excluded || !replicas.contains(&node) {
                        continue;
                    }
                    let handles = groups.get(*group);
                    for _ in 0..50 {
                        if change(&handles, replicas, &event).await {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            self.busy.store(false, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Proposes one membership change on the leader; true when it is done or
/// moot (a voter set below two is not proposed).
async fn change(handles: &Handles, all: &[u64], event: &Event) -> bool {
    let Some(leader) = handles.leader_among(all).and_then(|id| handles.get(id)) else {
        return false;
    };
    let metrics = leader.metrics();
    // A change cut short by a leader change leaves a joint configuration;
    // the next change starts from its newer half, which finishes it.
    let joint = metrics.membership_config.membership().get_joint_config();
    let Some(newest) = joint.last() else {
        return false;
    };
    let mut voters = newest.clone();
    match *event {
        Event::Demote(node) => {
            voters.remove(&node);
            if voters.len() < 2 {
                return true;
            }
        }
        Event::Promote(node) => {
            if metrics
                .membership_config
                .membership()
                .get_node(&node)
                .is_none()
            {
                // Not a learner of this group (yet, or any more: a replica
                // being moved): nothing to promote.
                return true;
            }
            voters.insert(node);
        }
        _ => return true,
    }
    if joint.len() == 1 && voters == *newest {
        return true;
    }
    if !voters.contains(&leader.node_id) {
        // A leader that demotes itself keeps leading with a lease it can no
        // longer renew, and its heartbeats keep the voters from electing
        // another: the group stalls. Hand leadership over first.
        if let Some(next) = voters.iter().next() {
            leader.transfer_leadership(*next).await;
        }
        return false;
    }
    let proposal = leader.raft.change_membership(voters, true);
    let outcome = tokio::time::timeout(Duration::from_secs(3), proposal).await;
    // `SIM_DEBUG=1` shows why a change was refused (the open liveness finding).
    if std::env::var_os("SIM_DEBUG").is_some() && !matches!(outcome, Ok(Ok(_))) {
        let metrics = leader.metrics();
        eprintln!(
            "{:?} node{} {event:?}: {:?}; quorum acked at {:?}; heartbeat acks {:?}; matched {:?}",
            turmoil::sim_elapsed(),
            leader.node_id,
            outcome.as_ref().map(|result| result.as_ref().err()),
            metrics.last_quorum_acked,
            metrics.heartbeat,
            metrics.replication
        );
    }
    matches!(outcome, Ok(Ok(_)))
}

/// Each group's replicas: every host for one group; on a cluster, what the
/// newest topology places (the metadata group's voters as group 0).
async fn replica_sets(groups: &Groups, nodes: &[u64]) -> Option<BTreeMap<u64, Vec<u64>>> {
    match groups {
        Groups::One(_) => Some(BTreeMap::from([(crate::group::GROUP, nodes.to_vec())])),
        Groups::Cluster(_) => {
            let (_, topology, _) = newest_topology(nodes).await?;
            let mut sets = BTreeMap::new();
            let mut voters = topology.metadata_voters.clone();
            voters.sort_unstable();
            sets.insert(cluster::topology::METADATA_GROUP, voters);
            for (shard, info) in &topology.shards {
                let mut replicas = info.replicas.clone();
                replicas.sort_unstable();
                sets.insert(*shard, replicas);
            }
            Some(sets)
        }
    }
}

/// True when every group's leader has its replicas (and only them) as
/// voters in its committed membership.
fn all_voters(groups: &Groups, sets: &BTreeMap<u64, Vec<u64>>) -> bool {
    sets.iter()
        .all(|(group, replicas)| group_all_voters(&groups.get(*group), replicas))
}

fn group_all_voters(handles: &Handles, all: &[u64]) -> bool {
    let Some(leader) = handles.leader_among(all).and_then(|id| handles.get(id)) else {
        return false;
    };
    let metrics = leader.metrics();
    let membership = metrics.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    voters == all && membership.get_joint_config().len() == 1
}
