//! The cluster section of `cargo xtask bench`.
//!
//! * Throughput: `redis-benchmark --cluster` (SET, GET, INCR at -P 1 and -P 16) against the
//!   `slotraft dev` topology (three cluster-enabled nodes, three shards of three replicas,
//!   Raft log fsync'd) and against a Redis Cluster of three masters and three replicas
//!   built from the same redis-server (asynchronous replication, no persistence).
//! * Resharding: on a fresh slotraft cluster, one slot holding many keys moves to another
//!   shard with `slotraft cluster reshard` while a client keeps writing to that slot; the
//!   section reports keys moved per second, the writer's longest stall and the redirects
//!   it followed, and checks that the new owner holds every key.
//! * Router: on the slotraft cluster, plain `redis-benchmark` through `slotraft router`
//!   against `redis-benchmark --cluster` straight to the nodes (target: at least 0.8x,
//!   and under 0.1 ms added to the p50 latency).

use crate::bench::{self, Programs, Report, Sample, Sizes, CLIENTS, KEYSPACE, PIPELINES};
use crate::server::{self, Launch, Server};
use crate::tools::{self, run_captured};
use crate::wire::{self, Conn, Reply};
use anyhow::{anyhow, bail, Context as _, Result};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Nodes of the slotraft cluster (the `slotraft dev` default).
const SLOTRAFT_NODES: usize = 3;
/// Raft voters per shard; with three nodes every node holds a replica of every shard.
const SHARD_REPLICAS: usize = 3;
/// Masters of the Redis Cluster; each gets one replica.
const REDIS_MASTERS: usize = 3;
const REDIS_NODES: usize = REDIS_MASTERS * 2;
/// Redis Cluster listens for its bus on the client port plus this.
const BUS_PORT_OFFSET: u16 = 10_000;
/// Attempts to start a cluster, each on fresh ports.
const START_ATTEMPTS: usize = 3;
/// Bounds `slotraft cluster create` and `redis-cli --cluster create`.
const CREATE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a created cluster may take until every node reports `cluster_state:ok`.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between two looks at the nodes' state.
const POLL: Duration = Duration::from_millis(50);
/// Bounds connecting to a node and reading one reply.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Socket timeout while loading keys and counting them.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// Upper bound on one redis-benchmark run (three tests).
const RUN_TIMEOUT: Duration = Duration::from_secs(900);
/// (row label, `redis-benchmark -t` name), in the order redis-benchmark runs them.
const TESTS: [(&str, &str); 3] = [("SET", "set"), ("GET", "get"), ("INCR", "incr")];
/// Column names of the two systems.
const SYSTEMS: [&str; 2] = ["slotraft", "redis-cluster"];

/// The slot that is loaded and moved, and the shards it moves between (shard 1 owns slots
/// 0-5460 after `cluster create`).
const RESHARD_SLOT: u16 = 0;
const FROM_SHARD: u64 = 1;
const TO_SHARD: u64 = 2;
/// Keys loaded into the slot before it moves.
const RESHARD_KEYS: u64 = 100_000;
const RESHARD_KEYS_QUICK: u64 = 10_000;
/// SETs per pipelined batch while loading.
const LOAD_BATCH: u64 = 1000;
/// Length of the loaded values.
const VALUE_LEN: usize = 16;
/// How long the writer runs before the reshard command starts and after it exits.
const WRITER_MARGIN: Duration = Duration::from_millis(500);
/// Pause before retrying a write answered with TRYAGAIN.
const TRYAGAIN_PAUSE: Duration = Duration::from_millis(2);
/// Pause before retrying after an unexpected error or a broken connection.
const ERROR_PAUSE: Duration = Duration::from_millis(10);
/// Bounds connecting to a node and waiting for the reply to one write.
const WRITER_TIMEOUT: Duration = Duration::from_secs(5);
/// Most MOVED targets the writer remembers.
const MOVED_TRAIL: usize = 8;
/// Bounds the reshard command.
const RESHARD_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the reshard command is checked for having exited (its time resolution).
const RESHARD_POLL: Duration = Duration::from_millis(2);

/// Runs both parts; a part that cannot run is recorded as a failure and the other still
/// runs.
pub(crate) fn run(
    report: &mut Report,
    programs: &Programs,
    work_dir: &Path,
    sizes: Sizes,
    quick: bool,
) -> Result<()> {
    tools::ensure_redis_tools(&["redis-cli"], false)?;
    let redis_cli = tools::find_in_path("redis-cli").context("redis-cli not found")?;
    println!("==> cluster throughput: starting a slotraft cluster and a Redis Cluster");
    if let Err(error) = throughput(report, programs, &redis_cli, work_dir, sizes) {
        report.fail(format!("cluster throughput: {error:#}"));
    }
    println!("==> router: plain redis-benchmark through slotraft router vs --cluster direct");
    if let Err(error) = router_throughput(report, programs, work_dir, sizes) {
        report.fail(format!("router throughput: {error:#}"));
    }
    println!("==> resharding: starting a fresh slotraft cluster");
    let keys = if quick {
        RESHARD_KEYS_QUICK
    } else {
        RESHARD_KEYS
    };
    if let Err(error) = resharding(report, &programs.slotraft, work_dir, keys) {
        report.fail(format!("resharding: {error:#}"));
    }
    Ok(())
}

/// The processes of one cluster; stopped, and their data removed, when dropped.
struct Nodes {
    servers: Vec<Server>,
    /// Holds the nodes' data directories.
    dir: PathBuf,
}

impl Nodes {
    fn new(dir: PathBuf) -> Nodes {
        let _ = std::fs::remove_dir_all(&dir);
        Nodes {
            servers: Vec::new(),
            dir,
        }
    }

    fn ports(&self) -> Vec<u16> {
        self.servers.iter().map(|server| server.port).collect()
    }

    /// The port clients are pointed at.
    fn entry_port(&self) -> Result<u16> {
        self.servers
            .first()
            .map(|server| server.port)
            .context("the cluster has no nodes")
    }

    /// Fails if a node has exited.
    fn check_running(&mut self) -> Result<(), String> {
        for server in &mut self.servers {
            if !server.alive() {
                return Err(format!(
                    "{} exited; log tail:\n{}",
                    server.name,
                    server.log_tail()
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for server in &mut self.servers {
            server.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Calls `start` up to [`START_ATTEMPTS`] times (ports may be taken between choosing and
/// binding them).
fn with_attempts(what: &str, mut start: impl FnMut() -> Result<Nodes>) -> Result<Nodes> {
    let mut last_error = None;
    for _ in 0..START_ATTEMPTS {
        match start() {
            Ok(nodes) => return Ok(nodes),
            Err(error) => {
                eprintln!("   the {what} did not start: {error:#}");
                last_error = Some(error);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| anyhow!("no attempt made")))
        .with_context(|| format!("starting the {what}"))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

fn addresses(ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect()
}

/// The `slotraft dev` topology: [`SLOTRAFT_NODES`] nodes started one by one, then
/// `slotraft cluster create` with [`SHARD_REPLICAS`] replicas per shard.
fn start_slotraft(program: &Path, work_dir: &Path) -> Result<Nodes> {
    with_attempts("slotraft cluster", || {
        start_slotraft_once(program, work_dir)
    })
}

fn start_slotraft_once(program: &Path, work_dir: &Path) -> Result<Nodes> {
    let ports = server::free_ports(SLOTRAFT_NODES * 2)?;
    let mut nodes = Nodes::new(work_dir.join(format!("slotraft-cluster-{}", ports[0])));
    for index in 0..SLOTRAFT_NODES {
        let (port, raft_port) = (ports[index * 2], ports[index * 2 + 1]);
        let data_dir = nodes.dir.join(format!("node-{}", index + 1));
        let args = strings(&[
            "node",
            "--cluster-enabled",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--raft-port",
            &raft_port.to_string(),
            "--dir",
            &data_dir.to_string_lossy(),
        ]);
        let launch = Launch {
            name: format!("slotraft-cluster-{}", index + 1),
            program: program.to_path_buf(),
            args,
            port,
            data_dir,
            log: work_dir.join(format!("slotraft-cluster-{}-{port}.log", index + 1)),
            owns_data: true,
            check_process: true,
        };
        nodes.servers.push(Server::launch(&launch)?);
    }
    let mut create = Command::new(program);
    create
        .args(["cluster", "create"])
        .args(addresses(&nodes.ports()))
        .args(["--replicas", &SHARD_REPLICAS.to_string()]);
    run_tool(&mut create, "[OK] All 16384 slots covered.")?;
    wait_settled(&mut nodes, false)?;
    Ok(nodes)
}

/// A Redis Cluster of [`REDIS_MASTERS`] masters with one replica each, persistence off.
fn start_redis(program: &Path, redis_cli: &Path, work_dir: &Path) -> Result<Nodes> {
    with_attempts("Redis Cluster", || {
        start_redis_once(program, redis_cli, work_dir)
    })
}

fn start_redis_once(program: &Path, redis_cli: &Path, work_dir: &Path) -> Result<Nodes> {
    let ports = ports_with_bus(REDIS_NODES)?;
    let mut nodes = Nodes::new(work_dir.join(format!("redis-cluster-{}", ports[0])));
    for (index, &port) in ports.iter().enumerate() {
        let data_dir = nodes.dir.join(format!("node-{}", index + 1));
        let config_file = data_dir.join("nodes.conf");
        let args = strings(&[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &data_dir.to_string_lossy(),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &config_file.to_string_lossy(),
            "--appendonly",
            "no",
            "--save",
            "",
            "--daemonize",
            "no",
        ]);
        let launch = Launch {
            name: format!("redis-cluster-{}", index + 1),
            program: program.to_path_buf(),
            args,
            port,
            data_dir,
            log: work_dir.join(format!("redis-cluster-{}-{port}.log", index + 1)),
            owns_data: true,
            check_process: true,
        };
        nodes.servers.push(Server::launch(&launch)?);
    }
    let mut create = Command::new(redis_cli);
    create
        .args(["--cluster", "create"])
        .args(addresses(&nodes.ports()))
        .args(["--cluster-replicas", "1", "--cluster-yes"]);
    run_tool(&mut create, "[OK] All 16384 slots covered.")?;
    wait_settled(&mut nodes, true)?;
    Ok(nodes)
}

/// `count` ports on 127.0.0.1 that are free together with their cluster bus port (port +
/// [`BUS_PORT_OFFSET`]), taken from 20000-29999 so the bus port stays below 65536.
fn ports_with_bus(count: usize) -> Result<Vec<u16>> {
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 10_000;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let start = (std::process::id().wrapping_mul(7919) ^ nanos) % SPAN;
    let bind = |port: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).ok();
    // Every listener stays bound until all ports are chosen, so none is chosen twice.
    let mut held = Vec::new();
    let mut ports = Vec::new();
    for step in 0..SPAN {
        if ports.len() == count {
            break;
        }
        let Ok(port) = u16::try_from(FIRST + (start + step) % SPAN) else {
            continue;
        };
        if let (Some(client), Some(bus)) = (bind(port), bind(port + BUS_PORT_OFFSET)) {
            held.push((client, bus));
            ports.push(port);
        }
    }
    if ports.len() < count {
        bail!("found only {} of {count} free port pairs", ports.len());
    }
    Ok(ports)
}

/// Runs an administration command and checks that it succeeded and printed `expected`.
fn run_tool(command: &mut Command, expected: &str) -> Result<()> {
    let line = tools::describe(command);
    eprintln!("   $ {line}");
    let out = run_captured(command, CREATE_TIMEOUT)?;
    if out.success() && out.stdout.contains(expected) {
        return Ok(());
    }
    let status = match out.status {
        Some(status) => status.to_string(),
        None => format!("killed after {}s", CREATE_TIMEOUT.as_secs()),
    };
    bail!(
        "`{line}` did not print {expected:?} ({status}); stdout:\n{}\nstderr:\n{}",
        last_lines(&out.stdout, 15),
        last_lines(&out.stderr, 15)
    )
}

fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

/// Waits until every node says `cluster_state:ok` and knows every other node; with
/// `replicas`, also until every Redis master has its replica connected.
fn wait_settled(nodes: &mut Nodes, replicas: bool) -> Result<()> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let ports = nodes.ports();
    loop {
        nodes.check_running().map_err(anyhow::Error::msg)?;
        let mut waiting_for = None;
        for &port in &ports {
            if let Err(reason) = node_settled(port, ports.len(), replicas) {
                waiting_for = Some(format!("127.0.0.1:{port}: {reason}"));
                break;
            }
        }
        let Some(reason) = waiting_for else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            bail!(
                "the cluster did not settle within {}s; {reason}",
                SETTLE_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// `Ok` if the node on `port` is part of a healthy cluster of `size` nodes.
fn node_settled(port: u16, size: usize, replicas: bool) -> Result<(), String> {
    let mut conn = Conn::connect(port, PROBE_TIMEOUT).map_err(|error| format!("{error:#}"))?;
    let info = match conn.command(&[b"CLUSTER", b"INFO"]) {
        Ok(Reply::Bulk(Some(text))) => String::from_utf8_lossy(&text).into_owned(),
        other => return Err(format!("CLUSTER INFO answered {other:?}")),
    };
    if wire::info_text(&info, "cluster_state") != Some("ok") {
        return Err("cluster_state is not ok".to_owned());
    }
    let known = wire::info_field(&info, "cluster_known_nodes");
    if known != Some(size as u64) {
        return Err(format!("knows {known:?} nodes, not {size}"));
    }
    if !replicas {
        return Ok(());
    }
    let replication = wire::info(&mut conn, "replication").map_err(|error| format!("{error:#}"))?;
    let linked = match wire::info_text(&replication, "role") {
        Some("master") => wire::info_field(&replication, "connected_slaves").unwrap_or(0) >= 1,
        Some("slave") => wire::info_text(&replication, "master_link_status") == Some("up"),
        _ => false,
    };
    if linked {
        Ok(())
    } else {
        Err("its replication link is not up".to_owned())
    }
}

/// slotraft's minimum throughput as a multiple of Redis Cluster's, where there is one.
fn target(test: &str, pipeline: u64) -> Option<f64> {
    match (test, pipeline) {
        ("get", _) => Some(1.0),
        ("set", 1) => Some(0.5),
        ("set", _) => Some(1.0),
        _ => None,
    }
}

/// `yes`, `no`, or `-` when there is no target or no ratio.
fn verdict(target: Option<f64>, ratio: Option<f64>) -> &'static str {
    match (target, ratio) {
        (Some(target), Some(ratio)) if ratio >= target => "yes",
        (Some(_), Some(_)) => "no",
        _ => "-",
    }
}

fn throughput(
    report: &mut Report,
    programs: &Programs,
    redis_cli: &Path,
    work_dir: &Path,
    sizes: Sizes,
) -> Result<()> {
    let mut clusters = [
        start_slotraft(&programs.slotraft, work_dir)?,
        start_redis(&programs.redis, redis_cli, work_dir)?,
    ];
    write_throughput_header(report, sizes)?;
    // samples[pipeline index][system][test index]
    let mut samples = vec![vec![vec![Vec::<Sample>::new(); TESTS.len()]; SYSTEMS.len()]; 2];
    let mut turn = 0usize;
    for (pipeline_index, pipeline) in PIPELINES.into_iter().enumerate() {
        let requests = sizes.requests(pipeline);
        for _ in 0..sizes.rounds {
            let first = turn % SYSTEMS.len();
            turn += 1;
            for system in (0..SYSTEMS.len()).map(|offset| (first + offset) % SYSTEMS.len()) {
                let nodes = &mut clusters[system];
                match bench_cluster(&programs.benchmark, nodes, pipeline, requests) {
                    Ok(results) => {
                        for (test, sample) in results {
                            eprintln!(
                                "   {:<4} -P {:<2} {:<14} {:>12.0} rps",
                                TESTS[test].0, pipeline, SYSTEMS[system], sample.rps
                            );
                            samples[pipeline_index][system][test].push(sample);
                        }
                    }
                    Err(error) => report.fail(format!(
                        "cluster -P {pipeline} on {}: {error}",
                        SYSTEMS[system]
                    )),
                }
            }
        }
    }
    for (test_index, (label, test)) in TESTS.into_iter().enumerate() {
        for (pipeline_index, pipeline) in PIPELINES.into_iter().enumerate() {
            let cell = &samples[pipeline_index];
            let ours = bench::median(&cell[0][test_index]);
            let theirs = bench::median(&cell[1][test_index]);
            let ratio = bench::ratio(ours, theirs);
            let target = target(test, pipeline);
            writeln!(
                report.md,
                "| {label} | {pipeline} | {} | {} | {} | {} | {} | {} | {} |",
                bench::rps_cell(ours),
                bench::rps_cell(theirs),
                bench::ratio_cell(ratio),
                target.map_or_else(|| "-".to_owned(), |min| format!(">= {min:.1}x")),
                verdict(target, ratio),
                bench::p50_cell(ours),
                bench::p50_cell(theirs),
            )?;
        }
    }
    Ok(())
}

fn write_throughput_header(report: &mut Report, sizes: Sizes) -> Result<()> {
    writeln!(
        report.md,
        "\n## Cluster throughput\n\n\
         - slotraft: the `slotraft dev` topology, {SLOTRAFT_NODES} cluster-enabled nodes \
         holding {SLOTRAFT_NODES} shards of {SHARD_REPLICAS} replicas each (every node a \
         replica of every shard); a write is acknowledged once a majority of its shard has it \
         in its fsync'd Raft log (synchronous replication, fsync on).\n\
         - redis-cluster: {REDIS_MASTERS} masters + {REDIS_MASTERS} replicas of redis-server \
         --cluster-enabled yes --appendonly no --save ''; a write is acknowledged before its \
         replica has it (asynchronous replication) and nothing is fsync'd.\n\n\
         redis-benchmark --cluster -c {CLIENTS} -r {KEYSPACE} -t set,get,incr; -n {} at -P 1, \
         -n {} at -P 16; median of {} runs per cell, alternating which cluster goes first. \
         Both clusters and redis-benchmark share the machine's cores.\n",
        sizes.requests(1),
        sizes.requests(16),
        sizes.rounds
    )?;
    writeln!(
        report.md,
        "| test | pipeline | slotraft rps | redis-cluster rps | slotraft/redis | target | met \
         | slotraft p50 ms | redis p50 ms |"
    )?;
    writeln!(report.md, "|---|---|---:|---:|---:|---|---|---:|---:|")?;
    Ok(())
}

/// One `redis-benchmark --cluster` run of every test in [`TESTS`]; returns (test index,
/// sample) pairs. `Err` carries a one-paragraph explanation.
fn bench_cluster(
    benchmark: &Path,
    nodes: &mut Nodes,
    pipeline: u64,
    requests: u64,
) -> Result<Vec<(usize, Sample)>, String> {
    nodes.check_running()?;
    let port = nodes.entry_port().map_err(|error| format!("{error:#}"))?;
    run_tests(benchmark, true, port, pipeline, requests)
}

/// `redis-benchmark` against 127.0.0.1:`port` with `clients`, `requests`
/// per test, `pipeline` and `tests`, printing CSV rows.
fn benchmark_command(
    benchmark: &Path,
    port: u16,
    clients: u64,
    requests: u64,
    pipeline: u64,
    tests: &[&str],
) -> Command {
    let mut command = Command::new(benchmark);
    command.args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-c",
        &clients.to_string(),
        "-n",
        &requests.to_string(),
        "-P",
        &pipeline.to_string(),
        "-t",
        &tests.join(","),
        "-q",
        "--csv",
    ]);
    command
}

/// One `redis-benchmark` run of every test in [`TESTS`] against `port` (in
/// cluster mode when `cluster`); returns (test index, sample) pairs. `Err`
/// carries a one-paragraph explanation.
fn run_tests(
    benchmark: &Path,
    cluster: bool,
    port: u16,
    pipeline: u64,
    requests: u64,
) -> Result<Vec<(usize, Sample)>, String> {
    let tests: Vec<&str> = TESTS.iter().map(|(_, test)| *test).collect();
    let mut command = benchmark_command(benchmark, port, CLIENTS, requests, pipeline, &tests);
    command.args(["-r", &KEYSPACE.to_string()]);
    if cluster {
        command.arg("--cluster");
    }
    let started = Instant::now();
    let out = run_captured(&mut command, RUN_TIMEOUT).map_err(|error| format!("{error:#}"))?;
    match out.status {
        None => {
            return Err(format!(
                "redis-benchmark ran past {}s and was killed",
                RUN_TIMEOUT.as_secs()
            ))
        }
        Some(status) if !status.success() => {
            return Err(format!(
                "redis-benchmark failed ({status}) after {:.1}s: {}",
                started.elapsed().as_secs_f64(),
                last_lines(out.stderr.trim(), 5)
            ))
        }
        Some(_) => {}
    }
    let rows = parse_rows(&out.stdout);
    let mut results = Vec::new();
    let mut missing = Vec::new();
    for (index, (label, _)) in TESTS.iter().enumerate() {
        match rows
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(label))
        {
            Some((_, sample)) => results.push((index, *sample)),
            None => missing.push(*label),
        }
    }
    if missing.is_empty() {
        Ok(results)
    } else {
        Err(format!(
            "no result for {} in the output; stdout: {}; stderr: {}",
            missing.join(", "),
            last_lines(&out.stdout, 8),
            last_lines(out.stderr.trim(), 5)
        ))
    }
}

/// Router throughput and added latency: plain redis-benchmark through the
/// router against `--cluster` straight to the nodes, each cell the median of
/// alternating rounds.
fn router_throughput(
    report: &mut Report,
    programs: &Programs,
    work_dir: &Path,
    sizes: Sizes,
) -> Result<()> {
    let mut nodes = start_slotraft(&programs.slotraft, work_dir)?;
    let port = server::free_port()?;
    let seeds = addresses(&nodes.ports()).join(",");
    let launch = Launch {
        name: "slotraft-router".to_string(),
        program: programs.slotraft.clone(),
        args: strings(&["router", "--port", &port.to_string(), "--seeds", &seeds]),
        port,
        data_dir: work_dir.join(format!("slotraft-router-{port}")),
        log: work_dir.join(format!("slotraft-router-{port}.log")),
        owns_data: true,
        // The router forwards INFO to a node: its answer names that process.
        check_process: false,
    };
    let mut router = Server::launch(&launch)?;
    writeln!(
        report.md,
        "\n### Router\n\nPlain redis-benchmark -c {CLIENTS} -r {KEYSPACE} through `slotraft router` \
         against redis-benchmark --cluster straight to the same nodes; median of {} runs per \
         cell, alternating which goes first; -n {} at -P 1 and {} at -P 16. Targets: >= 0.8x, p50 added < 0.1 ms.\n",
        sizes.rounds.max(1),
        sizes.requests(1),
        sizes.requests(16)
    )?;
    writeln!(
        report.md,
        "| test | pipeline | router rps | direct rps | ratio | met | router p50 ms | direct p50 ms | added p50 ms | met |"
    )?;
    writeln!(report.md, "|---|---|---:|---:|---:|---|---:|---:|---:|---|")?;
    for pipeline in PIPELINES {
        let requests = sizes.requests(pipeline);
        // Samples per test, over `sizes.rounds` rounds that alternate which
        // of the two goes first; each cell is the median.
        let mut routed_runs: Vec<Vec<Sample>> = vec![Vec::new(); TESTS.len()];
        let mut direct_runs: Vec<Vec<Sample>> = vec![Vec::new(); TESTS.len()];
        for round in 0..sizes.rounds.max(1) {
            for direct_turn in [round % 2 == 0, round % 2 == 1] {
                if direct_turn {
                    let direct = bench_cluster(&programs.benchmark, &mut nodes, pipeline, requests)
                        .map_err(|error| anyhow!("direct: {error}"))?;
                    for (index, sample) in direct {
                        direct_runs[index].push(sample);
                    }
                } else {
                    if !router.alive() {
                        bail!("the router stopped; log tail:\n{}", router.log_tail());
                    }
                    let routed = run_tests(&programs.benchmark, false, port, pipeline, requests)
                        .map_err(|error| anyhow!("through the router: {error}"))?;
                    for (index, sample) in routed {
                        routed_runs[index].push(sample);
                    }
                }
            }
        }
        for (index, (label, _)) in TESTS.iter().enumerate() {
            let routed = bench::median(&routed_runs[index]);
            let Some(direct_sample) = bench::median(&direct_runs[index]) else {
                continue;
            };
            let ratio = bench::ratio(routed, Some(direct_sample));
            let added = match (routed.and_then(|s| s.p50_ms), direct_sample.p50_ms) {
                (Some(routed), Some(direct)) => Some(routed - direct),
                _ => None,
            };
            eprintln!(
                "   {label:<5} -P {pipeline:<2} router {:>10.0} rps, direct {:>10.0} rps",
                routed.map_or(0.0, |s| s.rps),
                direct_sample.rps
            );
            writeln!(
                report.md,
                "| {label} | {pipeline} | {} | {} | {} | {} | {} | {} | {} | {} |",
                bench::rps_cell(routed),
                bench::rps_cell(Some(direct_sample)),
                bench::ratio_cell(ratio),
                bench::met(ratio, 0.8),
                bench::p50_cell(routed),
                bench::p50_cell(Some(direct_sample)),
                added.map_or("-".to_string(), |added| format!("{added:.3}")),
                match added {
                    Some(added) if added < 0.1 => "yes",
                    Some(_) => "no",
                    None => "-",
                },
            )?;
        }
    }
    router_latency(
        report,
        &programs.benchmark,
        &nodes,
        port,
        sizes.rounds.max(1),
    )?;
    router.stop();
    Ok(())
}

/// Requests per test in one single-client latency run.
const LATENCY_REQUESTS: u64 = 20_000;
/// The key redis-benchmark's SET and GET use without `-r`.
const LATENCY_KEY: &str = "key:__rand_int__";

/// The hop itself: one client, no pipeline, one key, through the router and
/// straight to the key's leader. Under the saturating load of the table above,
/// p50 mostly measures queueing for the machine's two cores, which the
/// router's process shares with the nodes and the load generator.
fn router_latency(
    report: &mut Report,
    benchmark: &Path,
    nodes: &Nodes,
    router: u16,
    rounds: u64,
) -> Result<()> {
    let leader = key_leader(nodes.entry_port()?, LATENCY_KEY)?;
    writeln!(
        report.md,
        "\nOne client without a pipeline (`redis-benchmark -c 1 -P 1 -n {LATENCY_REQUESTS} \
         -t set,get`, one key: `{LATENCY_KEY}`) through the router and straight to the \
         key's leader; median p50 of {rounds} runs per cell, alternating which goes first. \
         Target: p50 added < 0.1 ms.\n"
    )?;
    writeln!(
        report.md,
        "| test | router p50 ms | direct p50 ms | added p50 ms | met |\n|---|---:|---:|---:|---|"
    )?;
    let labels = ["SET", "GET"];
    let mut routed: Vec<Vec<f64>> = vec![Vec::new(); labels.len()];
    let mut direct: Vec<Vec<f64>> = vec![Vec::new(); labels.len()];
    for round in 0..rounds {
        for direct_turn in [round % 2 == 0, round % 2 == 1] {
            let (port, into) = if direct_turn {
                (leader, &mut direct)
            } else {
                (router, &mut routed)
            };
            let rows = single_client_run(benchmark, port)
                .map_err(|error| anyhow!("latency run on port {port}: {error}"))?;
            for (index, label) in labels.iter().enumerate() {
                let p50 = rows
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(label))
                    .and_then(|(_, sample)| sample.p50_ms)
                    .with_context(|| format!("no p50 for {label} on port {port}"))?;
                into[index].push(p50);
            }
        }
    }
    for (index, label) in labels.iter().enumerate() {
        let (Some(routed), Some(direct)) = (middle(&routed[index]), middle(&direct[index])) else {
            continue;
        };
        let added = routed - direct;
        eprintln!("   {label:<5} one client: router p50 {routed:.3} ms, direct {direct:.3} ms");
        writeln!(
            report.md,
            "| {label} | {routed:.3} | {direct:.3} | {added:.3} | {} |",
            if added < 0.1 { "yes" } else { "no" }
        )?;
    }
    Ok(())
}

/// The median of `values`.
fn middle(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

/// The port of the node that serves `key`: the entry node, or the one its
/// MOVED names.
fn key_leader(entry: u16, key: &str) -> Result<u16> {
    let mut conn = Conn::connect(entry, PROBE_TIMEOUT)?;
    match conn.command(&[b"GET", key.as_bytes()])? {
        Reply::Error(error) if error.starts_with("MOVED ") => error
            .rsplit(':')
            .next()
            .and_then(|port| port.trim().parse().ok())
            .with_context(|| format!("unreadable redirect: {error}")),
        Reply::Error(error) => bail!("GET {key}: {error}"),
        _ => Ok(entry),
    }
}

/// One single-client `redis-benchmark` run of SET and GET on one key.
fn single_client_run(benchmark: &Path, port: u16) -> Result<Vec<(String, Sample)>, String> {
    let mut command = benchmark_command(benchmark, port, 1, LATENCY_REQUESTS, 1, &["set", "get"]);
    let out = run_captured(&mut command, RUN_TIMEOUT).map_err(|error| format!("{error:#}"))?;
    match out.status {
        Some(status) if status.success() => Ok(parse_rows(&out.stdout)),
        _ => Err(format!(
            "redis-benchmark failed: {}",
            last_lines(out.stderr.trim(), 5)
        )),
    }
}

/// The (test name, sample) rows of `redis-benchmark --csv` output, which starts with a
/// `"test","rps",...,"p50_latency_ms",...` header (cluster mode also prints `Master N:`
/// lines without commas, which are skipped). Rows without a number are left out.
fn parse_rows(stdout: &str) -> Vec<(String, Sample)> {
    let mut header: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in stdout.lines() {
        let fields: Vec<String> = line
            .trim()
            .split(',')
            .map(|field| field.trim_matches('"').to_owned())
            .collect();
        if fields.len() < 2 {
            continue;
        }
        if fields[0].eq_ignore_ascii_case("test") {
            header = fields;
            continue;
        }
        let column = |name: &str| header.iter().position(|field| field == name);
        let number = |index: Option<usize>| -> Option<f64> { fields.get(index?)?.parse().ok() };
        let Some(rps) = number(Some(column("rps").unwrap_or(1))) else {
            continue;
        };
        let p50_ms = number(column("p50_latency_ms"));
        rows.push((fields[0].clone(), Sample::new(rps, p50_ms)));
    }
    rows
}

/// CRC16-CCITT (XModem), the checksum Redis Cluster hashes keys with.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of `key`, honouring a non-empty `{hash tag}`.
fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&byte| byte == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&byte| byte == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) & 16383
}

/// The shortest `{<number>}` hash tag whose keys hash to `slot`.
fn hash_tag_for_slot(slot: u16) -> String {
    (0u64..)
        .map(|number| format!("{{{number}}}"))
        .find(|tag| key_slot(tag.as_bytes()) == slot)
        .unwrap_or_default()
}

/// A redirect or retry answer to a keyed command.
#[derive(Debug, PartialEq, Eq)]
enum Redirect {
    /// The slot lives on the node at this port.
    Moved(u16),
    /// This one command goes to the node at this port, after ASKING.
    Ask(u16),
    TryAgain,
}

/// Reads a `MOVED <slot> <host>:<port>`, `ASK ...` or `TRYAGAIN ...` error (without `-`).
fn parse_redirect(error: &str) -> Option<Redirect> {
    let mut words = error.split_whitespace();
    let kind = words.next()?;
    if kind == "TRYAGAIN" {
        return Some(Redirect::TryAgain);
    }
    let _slot: u16 = words.next()?.parse().ok()?;
    let port = words.next()?.rsplit_once(':')?.1.parse().ok()?;
    match kind {
        "MOVED" => Some(Redirect::Moved(port)),
        "ASK" => Some(Redirect::Ask(port)),
        _ => None,
    }
}

/// The port of the node `CLUSTER SLOTS` (asked of the node on `port`) names first for
/// `slot`: its master, for slotraft the leader of the owning shard.
fn slot_owner(port: u16, slot: u16) -> Result<u16> {
    let mut conn = Conn::connect(port, IO_TIMEOUT)?;
    let reply = conn.command(&[b"CLUSTER", b"SLOTS"])?;
    let Reply::Array(Some(ranges)) = &reply else {
        bail!("CLUSTER SLOTS answered {reply:?}");
    };
    for range in ranges {
        let Reply::Array(Some(parts)) = range else {
            continue;
        };
        let (Some(Reply::Integer(start)), Some(Reply::Integer(end))) =
            (parts.first(), parts.get(1))
        else {
            continue;
        };
        if !(*start..=*end).contains(&i64::from(slot)) {
            continue;
        }
        if let Some(Reply::Array(Some(node))) = parts.get(2) {
            if let Some(Reply::Integer(owner)) = node.get(1) {
                return Ok(u16::try_from(*owner)?);
            }
        }
    }
    bail!("CLUSTER SLOTS names no node for slot {slot}: {reply:?}")
}

/// `CLUSTER COUNTKEYSINSLOT slot` on the node at `port`.
fn count_keys_in_slot(port: u16, slot: u16) -> Result<u64> {
    let mut conn = Conn::connect(port, IO_TIMEOUT)?;
    let slot = slot.to_string();
    match conn.command(&[b"CLUSTER", b"COUNTKEYSINSLOT", slot.as_bytes()])? {
        Reply::Integer(count) => Ok(u64::try_from(count)?),
        other => bail!("CLUSTER COUNTKEYSINSLOT {slot} answered {other:?}"),
    }
}

/// Writes `count` keys `<tag>:load:<n>` to the node at `port` with pipelined SETs; every
/// one must be acknowledged with +OK.
fn load_keys(port: u16, tag: &str, count: u64) -> Result<()> {
    let mut conn = Conn::connect(port, IO_TIMEOUT)?;
    let mut batch = Vec::with_capacity(64 * LOAD_BATCH as usize);
    let mut next = 0u64;
    while next < count {
        let end = (next + LOAD_BATCH).min(count);
        batch.clear();
        for n in next..end {
            let key = format!("{tag}:load:{n}");
            let value = format!("v{n:0width$}", width = VALUE_LEN - 1);
            wire::encode(&mut batch, &[b"SET", key.as_bytes(), value.as_bytes()]);
        }
        conn.send(&batch)?;
        for n in next..end {
            match conn.read_reply()? {
                Reply::Simple(ok) if ok == "OK" => {}
                other => bail!("SET {tag}:load:{n} answered {other:?}"),
            }
        }
        next = end;
    }
    Ok(())
}

/// What the continuous writer saw.
#[derive(Debug, Default)]
struct WriterStats {
    /// Acknowledged writes; key `<tag>:writer:<n>` exists for every n below this.
    writes: u64,
    /// Whether `<tag>:writer:<writes>` may also exist (its last attempt got no answer).
    in_doubt: bool,
    /// Longest time between two acknowledged writes (or from the last one to the stop).
    max_stall: Duration,
    tryagain: u64,
    moved: u64,
    /// The ports MOVED named, in order, a repeat of the previous one left out (at most
    /// [`MOVED_TRAIL`]): a node that has not yet adopted the new owner sends the writer
    /// back.
    moved_to: Vec<u16>,
    ask: u64,
    /// Other error replies and broken connections.
    errors: u64,
    last_error: Option<String>,
    elapsed: Duration,
}

/// SETs `<tag>:writer:<n>` for n = 0, 1, ... one request at a time until `stop`, starting
/// at the node on `port`: follows MOVED (to a fresh connection to the named node) and ASK,
/// retries TRYAGAIN after [`TRYAGAIN_PAUSE`] and anything else after [`ERROR_PAUSE`]. A
/// key is retried until it is acknowledged, so the keys written are exactly
/// `0..writes` (plus `writes` itself when `in_doubt`).
fn write_continuously(port: u16, tag: &str, stop: &AtomicBool) -> WriterStats {
    let mut stats = WriterStats::default();
    let mut port = port;
    let mut conn: Option<Conn> = None;
    let mut ask: Option<u16> = None;
    let started = Instant::now();
    let mut last_write = started;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("{tag}:writer:{}", stats.writes);
        let value = stats.writes.to_string();
        let command: [&[u8]; 3] = [b"SET", key.as_bytes(), value.as_bytes()];
        let outcome = match ask.take() {
            Some(target) => write_asking(target, &command),
            None => {
                let connection = match conn.take() {
                    Some(connection) => Ok(connection),
                    None => Conn::connect(port, WRITER_TIMEOUT).map_err(|error| (false, error)),
                };
                connection.and_then(|mut connection| {
                    let reply = connection
                        .command(&command)
                        .map_err(|error| (true, error))?;
                    conn = Some(connection);
                    Ok(reply)
                })
            }
        };
        match outcome {
            Ok(Reply::Simple(ok)) if ok == "OK" => {
                let now = Instant::now();
                stats.max_stall = stats.max_stall.max(now - last_write);
                last_write = now;
                stats.writes += 1;
                stats.in_doubt = false;
            }
            Ok(Reply::Error(error)) => match parse_redirect(&error) {
                Some(Redirect::Moved(target)) => {
                    stats.moved += 1;
                    if stats.moved_to.last() != Some(&target) && stats.moved_to.len() < MOVED_TRAIL
                    {
                        stats.moved_to.push(target);
                    }
                    if target != port {
                        port = target;
                        conn = None;
                    }
                }
                Some(Redirect::Ask(target)) => {
                    stats.ask += 1;
                    ask = Some(target);
                }
                Some(Redirect::TryAgain) => {
                    stats.tryagain += 1;
                    std::thread::sleep(TRYAGAIN_PAUSE);
                }
                None => {
                    stats.errors += 1;
                    stats.last_error = Some(format!("-{error}"));
                    std::thread::sleep(ERROR_PAUSE);
                }
            },
            Ok(other) => {
                stats.errors += 1;
                stats.last_error = Some(format!("{other:?}"));
                std::thread::sleep(ERROR_PAUSE);
            }
            Err((sent, error)) => {
                stats.errors += 1;
                stats.in_doubt |= sent;
                stats.last_error = Some(format!("{error:#}"));
                conn = None;
                std::thread::sleep(ERROR_PAUSE);
            }
        }
    }
    let stopped = Instant::now();
    stats.max_stall = stats.max_stall.max(stopped - last_write);
    stats.elapsed = stopped - started;
    stats
}

/// ASKING then `command` on a fresh connection to the node at `port`; the error's flag
/// says whether the command may have reached the node.
fn write_asking(port: u16, command: &[&[u8]]) -> Result<Reply, (bool, anyhow::Error)> {
    let mut conn = Conn::connect(port, WRITER_TIMEOUT).map_err(|error| (false, error))?;
    let mut out = Vec::new();
    wire::encode(&mut out, &[b"ASKING"]);
    wire::encode(&mut out, command);
    conn.send(&out).map_err(|error| (true, error))?;
    conn.read_reply().map_err(|error| (true, error))?;
    conn.read_reply().map_err(|error| (true, error))
}

/// The reshard command's outcome.
struct Reshard {
    wall: Duration,
    /// (keys, seconds) from its `[OK] Moved N slots (K keys) in S s.` line.
    reported: Option<(u64, f64)>,
}

/// Reads keys and seconds from `[OK] Moved 1 slots (109588 keys) in 5.0s.`.
fn parse_moved(output: &str) -> Option<(u64, f64)> {
    let start = output.find("[OK] Moved ")?;
    let line = output[start..].lines().next()?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let keys = words.get(4)?.trim_start_matches('(').parse().ok()?;
    let seconds = words.get(7)?.trim_end_matches('.').trim_end_matches('s');
    Some((keys, seconds.parse().ok()?))
}

/// Runs `slotraft cluster reshard` (output to a log in `work_dir`) and times it, checking
/// for its exit every [`RESHARD_POLL`].
fn run_reshard(program: &Path, entry_port: u16, work_dir: &Path) -> Result<Reshard> {
    let log = work_dir.join(format!("reshard-{entry_port}.log"));
    let file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(program);
    command
        .args(["cluster", "reshard", &format!("127.0.0.1:{entry_port}")])
        .args(["--from", &FROM_SHARD.to_string()])
        .args(["--to", &TO_SHARD.to_string()])
        .args(["--slots", "1"])
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    let line = tools::describe(&command);
    eprintln!("   $ {line}");
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start `{line}`"))?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() >= RESHARD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`{line}` did not finish within {}s; killed",
                RESHARD_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(RESHARD_POLL);
    };
    let wall = started.elapsed();
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    if !status.success() {
        bail!("`{line}` failed ({status}):\n{}", last_lines(&output, 15));
    }
    let reported = parse_moved(&output);
    if reported.is_none() {
        bail!(
            "`{line}` printed no `[OK] Moved` line:\n{}",
            last_lines(&output, 15)
        );
    }
    Ok(Reshard { wall, reported })
}

fn resharding(report: &mut Report, slotraft: &Path, work_dir: &Path, keys: u64) -> Result<()> {
    let mut nodes = start_slotraft(slotraft, work_dir)?;
    let entry = nodes.entry_port()?;
    let tag = hash_tag_for_slot(RESHARD_SLOT);
    let source = slot_owner(entry, RESHARD_SLOT)?;
    let before = count_keys_in_slot(source, RESHARD_SLOT)?;

    eprintln!(
        "   loading {keys} keys {tag}:load:<n> into slot {RESHARD_SLOT} on 127.0.0.1:{source}"
    );
    let load_started = Instant::now();
    load_keys(source, &tag, keys)?;
    let load_time = load_started.elapsed();

    let stop = AtomicBool::new(false);
    let (writer, reshard) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| write_continuously(source, &tag, &stop));
        std::thread::sleep(WRITER_MARGIN);
        let reshard = run_reshard(slotraft, entry, work_dir);
        std::thread::sleep(WRITER_MARGIN);
        stop.store(true, Ordering::SeqCst);
        (writer.join(), reshard)
    });
    let writer = writer.map_err(|_| anyhow!("the writing thread panicked"))?;
    eprintln!("   writer: {writer:?}");
    let reshard = reshard?;
    nodes.check_running().map_err(anyhow::Error::msg)?;

    let owner = slot_owner(entry, RESHARD_SLOT)?;
    let count = count_keys_in_slot(owner, RESHARD_SLOT)?;
    let expected = before + keys + writer.writes;
    let verified = count == expected || (writer.in_doubt && count == expected + 1);
    write_resharding(
        report,
        keys,
        load_time,
        &reshard,
        &writer,
        (source, owner),
        (count, expected),
    )?;
    if !verified {
        report.fail(format!(
            "resharding: CLUSTER COUNTKEYSINSLOT {RESHARD_SLOT} on 127.0.0.1:{owner} is \
             {count}, expected {expected} ({before} before + {keys} loaded + {} written \
             during the move{})",
            writer.writes,
            if writer.in_doubt { ", or one more" } else { "" }
        ));
    }
    if owner == source {
        report.notes.push(format!(
            "resharding: slot {RESHARD_SLOT} is served by 127.0.0.1:{owner} before and after; \
             the same node leads shards {FROM_SHARD} and {TO_SHARD}"
        ));
    }
    if let Some(error) = &writer.last_error {
        report.notes.push(format!(
            "resharding: the writer saw {} error(s) other than redirects; the last: {error}",
            writer.errors
        ));
    }
    Ok(())
}

fn write_resharding(
    report: &mut Report,
    keys: u64,
    load_time: Duration,
    reshard: &Reshard,
    writer: &WriterStats,
    (source, owner): (u16, u16),
    (count, expected): (u64, u64),
) -> Result<()> {
    let tag = hash_tag_for_slot(RESHARD_SLOT);
    writeln!(
        report.md,
        "\n## Resharding\n\n\
         A fresh slotraft cluster of the same topology. Slot {RESHARD_SLOT} gets {keys} keys \
         `{tag}:load:<n>` ({VALUE_LEN}-byte values, SETs pipelined {LOAD_BATCH} at a time to \
         its leader), then `slotraft cluster reshard --from {FROM_SHARD} --to {TO_SHARD} \
         --slots 1` moves it while one client writes `SET {tag}:writer:<n>` one request at a \
         time, following MOVED to the named node and retrying TRYAGAIN after {} ms. The \
         writer starts {} ms before the command and stops {} ms after it exits. Keys moved \
         per second: the keys the command reports over its wall time (process start to exit, \
         including its wait until every node has adopted the new owner). Longest stall: the \
         longest time between two acknowledged writes.\n",
        TRYAGAIN_PAUSE.as_millis(),
        WRITER_MARGIN.as_millis(),
        WRITER_MARGIN.as_millis(),
    )?;
    writeln!(report.md, "| measure | value |")?;
    writeln!(report.md, "|---|---:|")?;
    let seconds = |time: Duration| time.as_secs_f64();
    let per_second = |count: u64, time: f64| {
        if time > 0.0 {
            format!("{:.0}", count as f64 / time)
        } else {
            "-".to_owned()
        }
    };
    writeln!(
        report.md,
        "| keys loaded (pipelined SET, keys/s) | {keys} ({}) |",
        per_second(keys, seconds(load_time))
    )?;
    writeln!(
        report.md,
        "| reshard wall time s | {:.2} |",
        seconds(reshard.wall)
    )?;
    match reshard.reported {
        Some((moved, tool_seconds)) => {
            writeln!(report.md, "| keys moved (as reported) | {moved} |")?;
            writeln!(
                report.md,
                "| keys moved per second | {} |",
                per_second(moved, seconds(reshard.wall))
            )?;
            writeln!(
                report.md,
                "| the command's own timing s | {tool_seconds:.1} |"
            )?;
        }
        None => writeln!(report.md, "| keys moved (as reported) | - |")?,
    }
    writeln!(
        report.md,
        "| writer: acknowledged writes (per s) | {} ({}) |",
        writer.writes,
        per_second(writer.writes, seconds(writer.elapsed))
    )?;
    writeln!(
        report.md,
        "| writer: longest stall ms | {:.0} |",
        writer.max_stall.as_secs_f64() * 1000.0
    )?;
    writeln!(
        report.md,
        "| writer: TRYAGAIN / MOVED / ASK / other errors | {} / {} / {} / {} |",
        writer.tryagain, writer.moved, writer.ask, writer.errors
    )?;
    let trail: Vec<String> = writer.moved_to.iter().map(u16::to_string).collect();
    writeln!(
        report.md,
        "| writer: ports MOVED named, in order | {} |",
        if trail.is_empty() {
            "-".to_owned()
        } else {
            trail.join(", ")
        }
    )?;
    writeln!(
        report.md,
        "| slot {RESHARD_SLOT} served by | 127.0.0.1:{source} -> 127.0.0.1:{owner} |"
    )?;
    let verdict = if count == expected || (writer.in_doubt && count == expected + 1) {
        "yes"
    } else {
        "no"
    };
    writeln!(
        report.md,
        "| CLUSTER COUNTKEYSINSLOT {RESHARD_SLOT} on the new owner (expected) | {count} \
         ({expected}) |"
    )?;
    writeln!(report.md, "| every key there | {verdict} |")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag does not count: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
    }

    #[test]
    fn hash_tag_for_slot_zero() {
        let tag = hash_tag_for_slot(0);
        assert_eq!(tag, "{3560}");
        assert_eq!(key_slot(format!("{tag}:load:17").as_bytes()), 0);
    }

    #[test]
    fn redirects() {
        assert_eq!(
            parse_redirect("MOVED 0 127.0.0.1:7002"),
            Some(Redirect::Moved(7002))
        );
        assert_eq!(
            parse_redirect("ASK 12 127.0.0.1:7003"),
            Some(Redirect::Ask(7003))
        );
        assert_eq!(
            parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(parse_redirect("CLUSTERDOWN The cluster is down"), None);
        assert_eq!(parse_redirect("MOVED 0 nowhere"), None);
    }

    #[test]
    fn targets_and_verdicts() {
        assert_eq!(target("get", 1), Some(1.0));
        assert_eq!(target("get", 16), Some(1.0));
        assert_eq!(target("set", 1), Some(0.5));
        assert_eq!(target("set", 16), Some(1.0));
        assert_eq!(target("incr", 1), None);
        assert_eq!(verdict(Some(0.5), Some(0.5)), "yes");
        assert_eq!(verdict(Some(1.0), Some(0.99)), "no");
        assert_eq!(verdict(Some(1.0), None), "-");
        assert_eq!(verdict(None, Some(3.0)), "-");
    }

    #[test]
    fn parses_cluster_benchmark_output() {
        let out = "Cluster has 3 master nodes:\n\n\
                   Master 0: 6a3b 127.0.0.1:7003\n\
                   \"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"11389.52\",\"4.123\",\"0.936\",\"3.647\",\"7.375\",\"14.583\",\
                   \"42.591\"\n\
                   \"GET\",\"77821.02\",\"0.419\",\"0.024\",\"0.351\",\"0.847\",\"2.391\",\
                   \"18.015\"\n";
        let rows = parse_rows(out);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, "SET");
        assert_eq!(rows[0].1.rps, 11389.52);
        assert_eq!(rows[1].1.p50_ms, Some(0.351));
        assert!(parse_rows("\"test\",\"rps\"\n\"SET\",\"n/a\"\n").is_empty());
    }

    #[test]
    fn parses_the_reshard_summary() {
        let out = ">>> Moving 1 slots from shard 1 to shard 2\n\
                   [####] 1/1 slots, 109588 keys\r\n\
                   [OK] Moved 1 slots (109588 keys) in 5.0s.\n";
        assert_eq!(parse_moved(out), Some((109_588, 5.0)));
        assert_eq!(parse_moved("nothing moved\n"), None);
    }

    #[test]
    fn bus_ports_are_free_in_pairs() {
        let ports = ports_with_bus(4).unwrap_or_default();
        assert_eq!(ports.len(), 4);
        assert!(ports.iter().all(|port| (20_000..30_000).contains(port)));
    }
}
