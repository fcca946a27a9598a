//! One simulated run: replicas and clients under a fault schedule, then the
//! checkers over what the clients saw.
//!
//! Phases: the workload runs for `window` while faults come and go; then every
//! fault is healed and crashed replicas restart; the run waits until the
//! replicas converge (same applied index and state digest), reads every key's
//! final value through the linearizable path, and checks the history.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::check::{self, Violation};
use crate::client::{Client, ReadMode, Transport};
use crate::disk::{SimDisk, BASE_SYNC_LATENCY};
use crate::faults::{self, Event, Kind, BASE_LATENCY_MS};
use crate::group::{add_replicas, host_name, Clocks, Handles, Storage};
use crate::history::{Call, History, Observed, Outcome};
use crate::node_host::add_nodes_with;
use crate::rng::Rng;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    pub nodes: u64,
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
}

impl Hosts {
    pub fn name(self) -> &'static str {
        match self {
            Hosts::Replication => "replication",
            Hosts::Node => "node",
        }
    }

    pub fn parse(text: &str) -> Result<Hosts, String> {
        match text {
            "replication" => Ok(Hosts::Replication),
            "node" => Ok(Hosts::Node),
            other => Err(format!("unknown hosts '{other}' (replication or node)")),
        }
    }
}

impl Config {
    pub fn new(seed: u64) -> Config {
        Config {
            seed,
            nodes: 3,
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
        if self.hosts == Hosts::Node {
            mutation.push_str(" --hosts node");
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
    let disks: BTreeMap<u64, SimDisk> = (1..=config.nodes)
        .map(|node| (node, SimDisk::default()))
        .collect();
    match config.hosts {
        Hosts::Replication => add_replicas(
            &mut sim,
            config.nodes,
            root.clone(),
            &handles,
            config.storage,
            &disks,
        ),
        Hosts::Node => add_nodes_with(
            &mut sim,
            config.nodes,
            root.clone(),
            config.seed,
            &handles,
            config.storage,
            &disks,
            clocks.clone(),
        ),
    }
    let mut crash_rng = rng.fork();
    let history = History::default();
    let healed = Arc::new(AtomicBool::new(false));
    let membership = Membership::default();
    let finals: Arc<Mutex<Option<Result<Finals, String>>>> = Arc::default();
    {
        let (handles, history, healed, finals) = (
            handles.clone(),
            history.clone(),
            healed.clone(),
            finals.clone(),
        );
        let (config, workload_rng, clocks) = (config.clone(), rng.fork(), clocks.clone());
        let membership = membership.clone();
        sim.client("driver", async move {
            let changes = tokio::spawn(membership.clone().run(handles.clone(), config.nodes));
            let outcome = drive(
                &config,
                workload_rng,
                &handles,
                &history,
                &healed,
                &clocks,
                &membership,
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
        while pending.front().is_some_and(|(at, _)| *at <= now) {
            let Some((at, event)) = pending.pop_front() else {
                break;
            };
            let mut later = Vec::new();
            let mut host = Host {
                sim: &mut sim,
                handles: &handles,
                disks: &disks,
                rng: &mut crash_rng,
                down: &mut down,
                later: &mut later,
                crash_waits: &mut crash_waits,
                membership: &membership,
            };
            if let Some(line) = host.apply(&event, config.nodes) {
                applied.push(format!("{:>6}ms {line}", at.as_millis()));
            }
            if !later.is_empty() {
                pending.extend(later);
                pending.make_contiguous().sort_by_key(|(at, _)| *at);
            }
        }
        if !healing_done && now >= config.window {
            // Faults still queued (a crash waiting for a write, a repair)
            // are moot: everything heals now.
            pending.clear();
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
    let _ = std::fs::remove_dir_all(&root);
    let operations = history.operations();
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
        faults_applied: applied.len(),
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
    handles: &'a Handles,
    disks: &'a BTreeMap<u64, SimDisk>,
    rng: &'a mut Rng,
    down: &'a mut Vec<u64>,
    /// Events this one schedules (the repair of an isolated leader).
    later: &'a mut Vec<(Duration, Event)>,
    /// How long each pending crash has waited for a write in progress.
    crash_waits: &'a mut BTreeMap<u64, u32>,
    /// Membership changes for the driver to propose (they are async).
    membership: &'a Membership,
}

impl Host<'_, '_> {
    /// Applies one scheduled event; a line for the trace, or `None` when the
    /// event did not apply (restarting a replica that is up).
    fn apply(&mut self, event: &Event, nodes: u64) -> Option<String> {
        let Host {
            sim,
            handles,
            disks,
            rng,
            down,
            later,
            crash_waits,
            membership,
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
                let leader = handles.leader_among(&all)?;
                let repair_at = sim.elapsed() + length;
                for other in all.iter().filter(|other| **other != leader) {
                    sim.hold(host_name(leader), host_name(*other));
                    later.push((repair_at, Event::Repair(leader, *other)));
                }
                return Some(format!("isolate leader node{leader}"));
            }
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
                handles.remove(node);
                sim.crash(host_name(node));
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

/// The clients' workload, then the liveness phase.
async fn drive(
    config: &Config,
    mut rng: Rng,
    handles: &Handles,
    history: &History,
    healed: &AtomicBool,
    clocks: &Clocks,
    membership: &Membership,
) -> Result<Finals, String> {
    let nodes: Vec<u64> = (1..=config.nodes).collect();
    let mut clients = Vec::new();
    for id in 0..config.clients {
        let mut client = Client::new(id, nodes.clone(), handles.clone(), history.clone());
        client.read_mode = config.read_mode;
        client.ack_before_commit = config.ack_before_commit;
        client.clocks = clocks.clone();
        if config.hosts == Hosts::Node {
            client.transport = Transport::Resp(BTreeMap::new());
        }
        let (mut rng, window) = (rng.fork(), config.window);
        let queue = config.hosts == Hosts::Node;
        clients.push(tokio::spawn(async move {
            let mut sequence = 0u64;
            while turmoil::sim_elapsed().unwrap_or_default() < window {
                sequence += 1;
                let unique = format!("{id}-{sequence}");
                let (key, call) = pick(&mut rng, unique, queue);
                client.perform(key, call, rng.next_u64()).await;
                tokio::time::sleep(Duration::from_millis(rng.between(1, 30))).await;
            }
        }));
    }
    for client in clients {
        client
            .await
            .map_err(|error| format!("a client failed: {error}"))?;
    }
    while !healed.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Liveness: every replica back and a voter again, one leader, the same
    // state everywhere.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !membership.is_idle() || !all_voters(handles, &nodes) {
        if tokio::time::Instant::now() > deadline {
            let all = nodes.clone();
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
            return Err(format!(
                "the replicas did not all become voters again after healing (changes pending: {}; leader's membership: {state:?}; replicas: {replicas:?})",
                !membership.is_idle()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let digest = converge(handles, &nodes, Duration::from_secs(120)).await?;
    let mut reader = Client::new(1_000, nodes.clone(), handles.clone(), history.clone());
    reader.clocks = clocks.clone();
    if config.hosts == Hosts::Node {
        reader.transport = Transport::Resp(BTreeMap::new());
    }
    let mut values = BTreeMap::new();
    let queue = (config.hosts == Hosts::Node).then_some((QUEUE, Call::LRange));
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

    async fn run(self, handles: Handles, nodes: u64) {
        let all: Vec<u64> = (1..=nodes).collect();
        loop {
            self.busy.store(true, Ordering::SeqCst);
            while let Some(event) = self.pop() {
                for _ in 0..50 {
                    if change(&handles, &all, &event).await {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
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

/// True when the leader's committed membership has every replica as a voter.
fn all_voters(handles: &Handles, all: &[u64]) -> bool {
    let Some(leader) = handles.leader_among(all).and_then(|id| handles.get(id)) else {
        return false;
    };
    let metrics = leader.metrics();
    let membership = metrics.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    voters == all && membership.get_joint_config().len() == 1
}
