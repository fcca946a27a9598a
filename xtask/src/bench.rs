//! `cargo xtask bench`: slotraft side by side with a real `redis-server`, both on free
//! 127.0.0.1 ports with persistence off. It reports numbers, it never asserts on them.
//!
//! * Throughput: `redis-benchmark` (50 clients, random keys) for SET, GET, INCR and MSET at
//!   pipeline depths 1 and 16, alternating which server goes first.
//! * Memory: bytes per key (`used_memory` and `used_memory_rss` deltas) after pipelining a
//!   known number of `SET key:<n> <16 bytes>` over our own connection, on fresh servers.
//! * Replication: a three-replica slotraft group against redis-server with and without an
//!   fsync'd append-only file, and the time a group takes to accept writes again after its
//!   leader is killed (see [`crate::replication`]).
//! * Cluster: the `slotraft dev` topology against a Redis Cluster under
//!   `redis-benchmark --cluster`, and online resharding of a loaded slot under a writing
//!   client (see [`crate::cluster`]).
//!
//! The Markdown report is printed and written to `target/bench/latest.md`.

use crate::cluster;
use crate::replication;
use crate::server::{Kind, Server};
use crate::tools::{self, cargo, run_captured, run_checked, target_dir};
use crate::wire::{self, Conn, Reply};
use anyhow::{bail, Context as _, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Options {
    /// Small runs for a smoke test.
    pub quick: bool,
    /// Requests per `-P 1` run (`-P 16` runs use ten times as many).
    pub requests: Option<u64>,
    /// Keys inserted for the memory comparison.
    pub keys: Option<u64>,
    /// Runs per table cell; the median is reported (the machine is noisy).
    pub rounds: Option<u64>,
    /// Sections to run; empty means all.
    pub only: Vec<Section>,
}

impl Options {
    fn wants(&self, section: Section) -> bool {
        self.only.is_empty() || self.only.contains(&section)
    }
}

/// A part of the benchmark that `--only` can select.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Section {
    Throughput,
    Memory,
    Replication,
    Cluster,
    Types,
    Scripting,
}

impl Section {
    const ALL: [Section; 6] = [
        Section::Throughput,
        Section::Memory,
        Section::Replication,
        Section::Cluster,
        Section::Types,
        Section::Scripting,
    ];

    fn name(self) -> &'static str {
        match self {
            Section::Throughput => "throughput",
            Section::Memory => "memory",
            Section::Replication => "replication",
            Section::Cluster => "cluster",
            Section::Types => "types",
            Section::Scripting => "scripting",
        }
    }

    /// Parses a comma-separated list of section names.
    pub fn parse_list(text: &str) -> Result<Vec<Section>, String> {
        let mut sections = Vec::new();
        for name in text.split(',').map(str::trim) {
            let section = Section::ALL
                .into_iter()
                .find(|section| section.name() == name)
                .ok_or_else(|| {
                    let names: Vec<&str> = Section::ALL.iter().map(|s| s.name()).collect();
                    format!("unknown section '{name}' (one of {})", names.join(", "))
                })?;
            if !sections.contains(&section) {
                sections.push(section);
            }
        }
        Ok(sections)
    }
}

/// The programs the benchmark runs.
pub(crate) struct Programs {
    pub slotraft: PathBuf,
    pub redis: PathBuf,
    pub benchmark: PathBuf,
}

/// Request counts and repetitions shared by the throughput tables.
#[derive(Clone, Copy)]
pub(crate) struct Sizes {
    /// Requests per `-P 1` run.
    pub p1_requests: u64,
    /// Runs per cell.
    pub rounds: u64,
}

impl Sizes {
    /// Requests per run at `pipeline` (ten times more when pipelined).
    pub fn requests(self, pipeline: u64) -> u64 {
        if pipeline == 1 {
            self.p1_requests
        } else {
            self.p1_requests.saturating_mul(10)
        }
    }
}

/// (row label, `redis-benchmark -t` name).
const TESTS: [(&str, &str); 4] = [
    ("SET", "set"),
    ("GET", "get"),
    ("INCR", "incr"),
    ("MSET", "mset"),
];
pub(crate) const PIPELINES: [u64; 2] = [1, 16];
pub(crate) const CLIENTS: u64 = 50;
pub(crate) const KEYSPACE: u64 = 100_000;
/// Upper bound on one redis-benchmark run.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// Socket timeout for our own connections.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// SET commands per pipelined batch in the memory test.
const BATCH: u64 = 1000;
const VALUE_LEN: usize = 16;

pub fn run(options: &Options) -> Result<()> {
    let p1_requests = options
        .requests
        .unwrap_or(if options.quick { 20_000 } else { 200_000 });
    let keys = options
        .keys
        .unwrap_or(if options.quick { 100_000 } else { 1_000_000 });
    let rounds = options.rounds.unwrap_or(if options.quick { 1 } else { 3 });

    println!("==> cargo build --release -p node");
    run_checked(
        cargo().args(["build", "--release", "-p", "node"]),
        Duration::from_secs(60 * 60),
    )?;
    let slotraft = target_dir().join("release").join("slotraft");
    if !slotraft.is_file() {
        bail!("{} is missing after the build", slotraft.display());
    }
    tools::ensure_redis_tools(&["redis-server", "redis-benchmark"], false)?;
    let redis = tools::find_in_path("redis-server").context("redis-server not found")?;
    let benchmark = tools::find_in_path("redis-benchmark").context("redis-benchmark not found")?;

    let work_dir = target_dir().join("bench");
    // Server logs and data directories of this run (the previous run's are removed).
    let servers_dir = work_dir.join("servers");
    let _ = std::fs::remove_dir_all(&servers_dir);
    std::fs::create_dir_all(&servers_dir)
        .with_context(|| format!("creating {}", servers_dir.display()))?;

    let mut report = Report::default();
    let redis_version = tools::version_of(&redis);
    let slotraft_version = tools::version_of(&slotraft);
    println!("redis-server used: {redis_version}");
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    writeln!(report.md, "# slotraft vs Redis\n")?;
    writeln!(report.md, "- slotraft: {slotraft_version} (release build)")?;
    writeln!(report.md, "- redis-server: {redis_version}")?;
    writeln!(
        report.md,
        "- redis-benchmark: {}",
        tools::version_of(&benchmark)
    )?;
    writeln!(
        report.md,
        "- machine: {cores} cores; servers and redis-benchmark share them, all on 127.0.0.1"
    )?;
    writeln!(
        report.md,
        "- git: {}; unix time {}",
        git_revision(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs())
    )?;
    if options.quick {
        writeln!(report.md, "- --quick: small runs, numbers are noisy")?;
    }

    let programs = Programs {
        slotraft,
        redis,
        benchmark,
    };
    let sizes = Sizes {
        p1_requests,
        rounds,
    };
    // Throughput, then memory on freshly started servers (so RSS is not inflated by pages
    // the throughput runs left behind).
    if options.wants(Section::Throughput) {
        println!("==> throughput: starting servers");
        let mut slotraft_server = Server::start(Kind::Slotraft, &programs.slotraft, &servers_dir)?;
        let mut redis_server = Server::start(Kind::Redis, &programs.redis, &servers_dir)?;
        throughput(
            &mut report,
            &programs.benchmark,
            &mut slotraft_server,
            &mut redis_server,
            sizes,
        )?;
    }
    if options.wants(Section::Memory) {
        println!("==> memory: starting fresh servers");
        let mut slotraft_server = Server::start(Kind::Slotraft, &programs.slotraft, &servers_dir)?;
        let mut redis_server = Server::start(Kind::Redis, &programs.redis, &servers_dir)?;
        memory(&mut report, &mut slotraft_server, &mut redis_server, keys)?;
    }
    if options.wants(Section::Replication) {
        replication::run(&mut report, &programs, &servers_dir, sizes)?;
    }
    if options.wants(Section::Types) {
        println!("==> data types: starting fresh servers");
        let mut slotraft_server = Server::start(Kind::Slotraft, &programs.slotraft, &servers_dir)?;
        let mut redis_server = Server::start(Kind::Redis, &programs.redis, &servers_dir)?;
        let large = if options.quick { 100_000 } else { 1_000_000 };
        crate::types::run(
            &mut report,
            &programs.benchmark,
            &mut slotraft_server,
            &mut redis_server,
            sizes,
            large,
        )?;
    }
    if options.wants(Section::Scripting) {
        println!("==> scripting: starting fresh servers");
        let mut slotraft_server = Server::start(Kind::Slotraft, &programs.slotraft, &servers_dir)?;
        let mut redis_server = Server::start(Kind::Redis, &programs.redis, &servers_dir)?;
        crate::scripting::run(
            &mut report,
            &programs.benchmark,
            &mut slotraft_server,
            &mut redis_server,
            sizes,
        )?;
    }
    if options.wants(Section::Cluster) {
        cluster::run(&mut report, &programs, &servers_dir, sizes, options.quick)?;
    }

    if !report.notes.is_empty() {
        writeln!(report.md, "\n## Notes\n")?;
        for note in &report.notes {
            writeln!(report.md, "- {note}")?;
        }
    }
    let path = work_dir.join("latest.md");
    std::fs::write(&path, &report.md).with_context(|| format!("writing {}", path.display()))?;
    println!("\n{}", report.md);
    println!("(written to {})", path.display());
    if report.failures > 0 {
        bail!(
            "{} measurement(s) failed; see the notes in the report",
            report.failures
        );
    }
    Ok(())
}

#[derive(Default)]
pub(crate) struct Report {
    pub md: String,
    pub notes: Vec<String>,
    failures: usize,
}

impl Report {
    pub fn fail(&mut self, note: String) {
        eprintln!("   FAILED: {note}");
        self.notes.push(note);
        self.failures += 1;
    }
}

/// One redis-benchmark result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    pub rps: f64,
    pub p50_ms: Option<f64>,
    /// The server's CPU time (user + system) per request during the run.
    pub server_cpu_us: Option<f64>,
    /// The load generator's CPU time over the run's wall time: near 1.0, it
    /// was the bottleneck, and the throughputs compare the load generator
    /// more than the servers (the CPU per request then compares them).
    pub client_busy: Option<f64>,
}

impl Sample {
    pub fn new(rps: f64, p50_ms: Option<f64>) -> Sample {
        Sample {
            rps,
            p50_ms,
            server_cpu_us: None,
            client_busy: None,
        }
    }
}

/// CPU clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Fields of `/proc/<pid>/stat` after the command name, summed: `first` and
/// the one after it (14 and 15 are a process's user and system time, 16 and
/// 17 those of its waited-for children), in clock ticks.
fn stat_ticks(pid: &str, first: usize) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    // `after_name` starts at field 3.
    let mut fields = after_name.split_whitespace().skip(first - 3);
    let one: u64 = fields.next()?.parse().ok()?;
    let two: u64 = fields.next()?.parse().ok()?;
    Some(one + two)
}

/// A process's CPU time so far, in clock ticks.
pub(crate) fn process_ticks(pid: u32) -> Option<u64> {
    stat_ticks(&pid.to_string(), 14)
}

/// The CPU time of this process's finished (waited-for) children.
fn children_ticks() -> Option<u64> {
    stat_ticks("self", 16)
}

/// Seconds of CPU time in `ticks`.
pub(crate) fn cpu_seconds(ticks: u64) -> f64 {
    ticks as f64 / clock_ticks()
}

/// CPU microseconds per request from a tick difference.
pub(crate) fn cpu_us_per_request(ticks: u64, requests: u64) -> f64 {
    cpu_seconds(ticks) * 1e6 / requests.max(1) as f64
}

/// One table cell: a redis-benchmark test at one pipeline depth.
#[derive(Clone, Copy)]
pub(crate) struct Cell<'a> {
    /// Row label, e.g. `SET`.
    pub label: &'a str,
    /// `redis-benchmark -t` name.
    pub test: &'a str,
    pub pipeline: u64,
    pub requests: u64,
}

/// Runs `cell` `rounds` times on every server, rotating which goes first (so none always
/// gets the cooler machine; `turn` carries the rotation across cells), and returns each
/// server's median sample, `None` where every run failed. Failures become report notes.
pub(crate) fn measure_cell(
    report: &mut Report,
    benchmark: &Path,
    servers: &mut [&mut Server],
    cell: Cell<'_>,
    rounds: u64,
    turn: &mut usize,
) -> Vec<Option<Sample>> {
    let count = servers.len();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); count];
    for _ in 0..rounds {
        let first = *turn % count.max(1);
        *turn += 1;
        for index in (0..count).map(|offset| (first + offset) % count) {
            let server = &mut *servers[index];
            match bench_one(benchmark, server, cell.test, cell.pipeline, cell.requests) {
                Ok(sample) => {
                    eprintln!(
                        "   {:<4} -P {:<2} {:<18} {:>12.0} rps",
                        cell.label, cell.pipeline, server.name, sample.rps
                    );
                    samples[index].push(sample);
                }
                Err(error) => report.fail(format!(
                    "{} -P {} on {}: {error}",
                    cell.label, cell.pipeline, server.name
                )),
            }
        }
    }
    samples.iter().map(|list| median(list)).collect()
}

/// The header of a [`compare_row`] table.
pub(crate) const COMPARE_HEADER: &str = "| test | pipeline | slotraft rps | redis rps | ratio | met | slotraft p50 ms | redis p50 ms | slotraft CPU us/req | redis CPU us/req | CPU ratio | load generator busy |\n|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|";

/// Measures `test` (a redis-benchmark test name or a whole command) at every
/// pipeline depth on slotraft and redis-server, and writes one table row per
/// depth: throughputs, ratio, whether it reaches 1.0x, and p50 latencies.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_row(
    report: &mut Report,
    benchmark: &Path,
    slotraft: &mut Server,
    redis: &mut Server,
    label: &str,
    test: &str,
    sizes: Sizes,
    turn: &mut usize,
) -> Result<()> {
    for pipeline in PIPELINES {
        let cell = Cell {
            label,
            test,
            pipeline,
            requests: sizes.requests(pipeline),
        };
        let medians = measure_cell(
            report,
            benchmark,
            &mut [&mut *slotraft, &mut *redis],
            cell,
            sizes.rounds,
            turn,
        );
        let value = ratio(medians[0], medians[1]);
        writeln!(
            report.md,
            "| {label} | {pipeline} | {} | {} | {} | {} | {} | {} | {} |",
            rps_cell(medians[0]),
            rps_cell(medians[1]),
            ratio_cell(value),
            met(value, 1.0),
            p50_cell(medians[0]),
            p50_cell(medians[1]),
            cpu_cells(medians[0], medians[1]),
        )?;
    }
    Ok(())
}

/// The CPU columns of a [`compare_row`]: each server's CPU per request,
/// slotraft's over redis-server's (below 1.0: slotraft spends less), and
/// the busier of the two runs' load generator (near 100%: the throughputs
/// are bounded by it, not by the servers).
pub(crate) fn cpu_cells(ours: Option<Sample>, theirs: Option<Sample>) -> String {
    let cpu = |sample: Option<Sample>| sample.and_then(|sample| sample.server_cpu_us);
    let cell = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |us| format!("{us:.2}"));
    let ratio = cpu(ours)
        .zip(cpu(theirs))
        .filter(|(_, theirs)| *theirs > 0.0)
        .map(|(ours, theirs)| ours / theirs);
    let busy = [ours, theirs]
        .iter()
        .filter_map(|sample| sample.and_then(|sample| sample.client_busy))
        .reduce(f64::max);
    format!(
        "{} | {} | {} | {}",
        cell(cpu(ours)),
        cell(cpu(theirs)),
        ratio.map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}")),
        busy.map_or_else(|| "-".to_owned(), |busy| format!("{:.0}%", busy * 100.0)),
    )
}

/// `yes` when `value` reaches `target`, `no` below it, `-` unmeasured.
pub(crate) fn met(value: Option<f64>, target: f64) -> &'static str {
    match value {
        Some(value) if value >= target => "yes",
        Some(_) => "no",
        None => "-",
    }
}

/// `ours / theirs` throughput, if both were measured.
pub(crate) fn ratio(ours: Option<Sample>, theirs: Option<Sample>) -> Option<f64> {
    match (ours, theirs) {
        (Some(ours), Some(theirs)) if theirs.rps > 0.0 => Some(ours.rps / theirs.rps),
        _ => None,
    }
}

pub(crate) fn ratio_cell(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}"))
}

fn throughput(
    report: &mut Report,
    benchmark: &Path,
    slotraft: &mut Server,
    redis: &mut Server,
    sizes: Sizes,
) -> Result<()> {
    writeln!(
        report.md,
        "\n## Throughput\n\nredis-benchmark -c {CLIENTS} -r {KEYSPACE}; -n {} at -P 1, \
         -n {} at -P 16; median of {} runs per cell, alternating which server goes first.\n",
        sizes.requests(1),
        sizes.requests(16),
        sizes.rounds
    )?;
    writeln!(
        report.md,
        "| test | pipeline | slotraft rps | redis rps | ratio | slotraft p50 ms | redis p50 ms |"
    )?;
    writeln!(report.md, "|---|---|---:|---:|---:|---:|---:|")?;
    let mut turn = 0usize;
    for (label, test) in TESTS {
        for pipeline in PIPELINES {
            let cell = Cell {
                label,
                test,
                pipeline,
                requests: sizes.requests(pipeline),
            };
            let medians = measure_cell(
                report,
                benchmark,
                &mut [&mut *slotraft, &mut *redis],
                cell,
                sizes.rounds,
                &mut turn,
            );
            let (slotraft_sample, redis_sample) = (medians[0], medians[1]);
            writeln!(
                report.md,
                "| {label} | {pipeline} | {} | {} | {} | {} | {} |",
                rps_cell(slotraft_sample),
                rps_cell(redis_sample),
                ratio_cell(ratio(slotraft_sample, redis_sample)),
                p50_cell(slotraft_sample),
                p50_cell(redis_sample),
            )?;
        }
    }
    Ok(())
}

/// The sample with the median throughput (the upper one of an even count).
pub(crate) fn median(samples: &[Sample]) -> Option<Sample> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(|left, right| left.rps.total_cmp(&right.rps));
    sorted.get(sorted.len() / 2).copied()
}

pub(crate) fn rps_cell(sample: Option<Sample>) -> String {
    sample.map_or_else(|| "error".to_owned(), |sample| format!("{:.0}", sample.rps))
}

pub(crate) fn p50_cell(sample: Option<Sample>) -> String {
    sample
        .and_then(|sample| sample.p50_ms)
        .map_or_else(|| "-".to_owned(), |p50| format!("{p50:.3}"))
}

/// One redis-benchmark run; `Err` carries a one-paragraph explanation.
fn bench_one(
    benchmark: &Path,
    server: &mut Server,
    test: &str,
    pipeline: u64,
    requests: u64,
) -> Result<Sample, String> {
    if !server.alive() {
        return Err(format!(
            "the server is no longer running; log tail:\n{}",
            server.log_tail()
        ));
    }
    let mut command = Command::new(benchmark);
    command.args([
        "-h",
        "127.0.0.1",
        "-p",
        &server.port.to_string(),
        "-c",
        &CLIENTS.to_string(),
        "-n",
        &requests.to_string(),
        "-P",
        &pipeline.to_string(),
        "-r",
        &KEYSPACE.to_string(),
        "--csv",
        "-q",
    ]);
    // A test name with spaces is a whole command (redis-benchmark's custom
    // command mode); otherwise one of its built-in tests.
    if test.contains(' ') {
        command.args(test.split_whitespace());
    } else {
        command.args(["-t", test]);
    }
    let started = Instant::now();
    let server_before = process_ticks(server.pid());
    let client_before = children_ticks();
    let out = run_captured(&mut command, RUN_TIMEOUT).map_err(|error| format!("{error:#}"))?;
    let wall = started.elapsed().as_secs_f64();
    let server_ticks = server_before
        .zip(process_ticks(server.pid()))
        .map(|(before, after)| after.saturating_sub(before));
    let client_ticks = client_before
        .zip(children_ticks())
        .map(|(before, after)| after.saturating_sub(before));
    let stderr = out.stderr.trim();
    match out.status {
        None => Err(format!(
            "redis-benchmark ran past {}s and was killed{}",
            RUN_TIMEOUT.as_secs(),
            if server.alive() {
                String::new()
            } else {
                format!("; the server died, log tail:\n{}", server.log_tail())
            }
        )),
        Some(status) if !status.success() => Err(format!(
            "redis-benchmark failed ({status}) after {:.1}s: {}",
            started.elapsed().as_secs_f64(),
            first_lines(stderr, 5)
        )),
        Some(_) => parse_csv(&out.stdout)
            .map(|sample| Sample {
                server_cpu_us: server_ticks.map(|ticks| cpu_us_per_request(ticks, requests)),
                client_busy: client_ticks.map(|ticks| cpu_seconds(ticks) / wall),
                ..sample
            })
            .map_err(|error| {
                format!(
                    "{error}; stdout: {:?}; stderr: {}",
                    first_lines(&out.stdout, 5),
                    first_lines(stderr, 5)
                )
            }),
    }
}

fn first_lines(text: &str, count: usize) -> String {
    text.lines().take(count).collect::<Vec<_>>().join(" / ")
}

/// Reads rps (and p50 if present) from `redis-benchmark --csv` output. Redis 7 prints a
/// header `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...`; older
/// versions print bare `"TEST","rps"` rows.
fn parse_csv(stdout: &str) -> Result<Sample, String> {
    let mut header: Option<Vec<String>> = None;
    let mut row: Option<Vec<String>> = None;
    for line in stdout.lines() {
        let fields = split_csv(line.trim());
        if fields.len() < 2 {
            continue;
        }
        if fields[0].eq_ignore_ascii_case("test") {
            header = Some(fields);
        } else {
            row = Some(fields);
        }
    }
    let row = row.ok_or("no result row in the CSV output")?;
    let column = |name: &str| {
        header
            .as_ref()
            .and_then(|header| header.iter().position(|field| field == name))
    };
    let rps_column = column("rps").unwrap_or(1);
    let rps: f64 = row
        .get(rps_column)
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| format!("no requests-per-second number in {row:?}"))?;
    let p50_ms = column("p50_latency_ms")
        .and_then(|index| row.get(index))
        .and_then(|field| field.parse().ok());
    Ok(Sample::new(rps, p50_ms))
}

/// Splits one CSV line, removing double quotes (`""` inside quotes is a literal quote).
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    if line.is_empty() {
        return fields;
    }
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// Bytes per key measured on one server.
struct MemorySample {
    used_per_key: f64,
    rss_per_key: f64,
}

fn memory(report: &mut Report, slotraft: &mut Server, redis: &mut Server, keys: u64) -> Result<()> {
    writeln!(
        report.md,
        "\n## Memory\n\n{keys} keys `key:<n>` with {VALUE_LEN}-byte values, pipelined SET in \
         batches of {BATCH}; deltas of INFO memory after FLUSHALL, divided by {keys}.\n"
    )?;
    writeln!(
        report.md,
        "| server | used_memory bytes/key | rss bytes/key |"
    )?;
    writeln!(report.md, "|---|---:|---:|")?;
    let mut results = Vec::new();
    for server in [slotraft, redis] {
        let started = Instant::now();
        let result = measure_memory(server, keys);
        match &result {
            Ok(sample) => {
                eprintln!(
                    "   memory {:<8} {:.1} B/key used, {:.1} B/key rss ({:.1}s)",
                    server.name,
                    sample.used_per_key,
                    sample.rss_per_key,
                    started.elapsed().as_secs_f64()
                );
                writeln!(
                    report.md,
                    "| {} | {:.1} | {:.1} |",
                    server.name, sample.used_per_key, sample.rss_per_key
                )?;
            }
            Err(error) => {
                report.fail(format!("memory on {}: {error:#}", server.name));
                writeln!(report.md, "| {} | error | error |", server.name)?;
            }
        }
        results.push(result.ok());
    }
    if let [Some(ours), Some(theirs)] = results.as_slice() {
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:.2}", a / b)
            } else {
                "-".to_owned()
            }
        };
        writeln!(
            report.md,
            "| ratio slotraft/redis | {} | {} |",
            ratio(ours.used_per_key, theirs.used_per_key),
            ratio(ours.rss_per_key, theirs.rss_per_key)
        )?;
    }
    Ok(())
}

fn measure_memory(server: &mut Server, keys: u64) -> Result<MemorySample> {
    let mut conn = Conn::connect(server.port, IO_TIMEOUT)?;
    expect_ok(conn.command(&[b"FLUSHALL"])?, "FLUSHALL")?;
    let (used_before, rss_before) = memory_info(&mut conn)?;

    let mut batch = Vec::with_capacity(64 * BATCH as usize);
    let mut next = 0u64;
    while next < keys {
        let end = (next + BATCH).min(keys);
        batch.clear();
        for n in next..end {
            let key = format!("key:{n}");
            // Not a number, so Redis cannot store it as a shared or int-encoded value.
            let value = format!("v{n:0width$}", width = VALUE_LEN - 1);
            wire::encode(&mut batch, &[b"SET", key.as_bytes(), value.as_bytes()]);
        }
        conn.send(&batch)?;
        for n in next..end {
            expect_ok(conn.read_reply()?, &format!("SET key:{n}"))?;
        }
        next = end;
    }

    match conn.command(&[b"DBSIZE"])? {
        Reply::Integer(size) if u64::try_from(size).ok() == Some(keys) => {}
        other => bail!("DBSIZE answered {other:?}, expected {keys}"),
    }
    let (used_after, rss_after) = memory_info(&mut conn)?;
    let per_key = |after: u64, before: u64| (after as f64 - before as f64) / keys as f64;
    Ok(MemorySample {
        used_per_key: per_key(used_after, used_before),
        rss_per_key: per_key(rss_after, rss_before),
    })
}

/// (`used_memory`, `used_memory_rss`) from `INFO memory`.
fn memory_info(conn: &mut Conn) -> Result<(u64, u64)> {
    let info = wire::info(conn, "memory")?;
    let field = |name: &str| {
        wire::info_field(&info, name).with_context(|| format!("INFO memory has no {name}"))
    };
    Ok((field("used_memory")?, field("used_memory_rss")?))
}

fn expect_ok(reply: Reply, what: &str) -> Result<()> {
    match reply {
        Reply::Simple(ok) if ok == "OK" => Ok(()),
        other => bail!("{what} answered {other:?}"),
    }
}

fn git_revision() -> String {
    let mut command = Command::new("git");
    command
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(tools::workspace_root());
    match run_captured(&mut command, Duration::from_secs(20)) {
        Ok(out) if out.success() => out.stdout.trim().to_owned(),
        _ => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis7_csv() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"MSET (10 keys)\",\"96618.36\",\"7.939\",\"0.928\",\"7.439\",\"14.487\",\
                   \"17.183\",\"17.759\"\n";
        assert_eq!(parse_csv(out), Ok(Sample::new(96618.36, Some(7.439))));
    }

    #[test]
    fn parses_old_two_column_csv() {
        assert_eq!(
            parse_csv("\"SET\",\"55401.66\"\n"),
            Ok(Sample::new(55401.66, None))
        );
    }

    #[test]
    fn rejects_output_without_numbers() {
        assert!(parse_csv("").is_err());
        assert!(parse_csv("\"test\",\"rps\"\n").is_err());
        assert!(parse_csv("\"SET\",\"n/a\"\n").is_err());
    }

    #[test]
    fn splits_quoted_fields() {
        assert_eq!(split_csv(r#""a,b","c""d",e"#), vec!["a,b", "c\"d", "e"]);
    }

    #[test]
    fn median_picks_the_middle_throughput() {
        let sample = |rps| Sample::new(rps, None);
        assert_eq!(
            median(&[sample(3.0), sample(1.0), sample(2.0)]),
            Some(sample(2.0))
        );
        assert_eq!(median(&[]), None);
    }
}
