//! The replication section of `cargo xtask bench`.
//!
//! * Throughput: redis-benchmark against the leader of a three-replica slotraft group
//!   (every write fsync'd to a majority's Raft log before it is acknowledged), against
//!   redis-server with `appendfsync always`, and against redis-server without persistence.
//! * Failover: SIGKILL the group's leader and time until a surviving replica acknowledges
//!   a SET; the killed replica is restarted on its data before the next trial.

use crate::bench::{self, Cell, Programs, Report, Sample, Sizes, CLIENTS, KEYSPACE, PIPELINES};
use crate::group::{self, Group};
use crate::server::{Kind, Server};
use crate::wire::{Conn, Reply};
use anyhow::{bail, Context as _, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// (row label, `redis-benchmark -t` name); SET first so GET finds keys.
const TESTS: [(&str, &str); 3] = [("SET", "set"), ("INCR", "incr"), ("GET", "get")];
/// Leader kills per failover measurement.
const FAILOVER_TRIALS: usize = 5;
/// Pause between two write attempts on one surviving replica.
const WRITE_POLL: Duration = Duration::from_millis(5);
/// How long a failover may take before the trial counts as failed.
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);
/// Bounds connecting to a survivor and waiting for its reply to one SET.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// The Redis configuration a ratio compares against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Baseline {
    AofAlways,
    Plain,
}

/// A throughput target: slotraft's rps at least `min` times the baseline's.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Goal {
    baseline: Baseline,
    min: f64,
}

impl Goal {
    /// Replicated writes are held to fsync'd Redis (half as fast unpipelined, as fast with
    /// pipelining, where one fsync covers many writes); reads to Redis without persistence.
    fn for_cell(test: &str, pipeline: u64) -> Goal {
        match (test, pipeline) {
            ("get", _) => Goal {
                baseline: Baseline::Plain,
                min: 0.8,
            },
            (_, 1) => Goal {
                baseline: Baseline::AofAlways,
                min: 0.5,
            },
            _ => Goal {
                baseline: Baseline::AofAlways,
                min: 1.0,
            },
        }
    }

    fn describe(self) -> String {
        let baseline = match self.baseline {
            Baseline::AofAlways => "aof-always",
            Baseline::Plain => "plain",
        };
        format!(">= {:.1}x {baseline}", self.min)
    }

    /// `yes`, `no`, or `-` when a ratio is missing.
    fn verdict(self, vs_aof: Option<f64>, vs_plain: Option<f64>) -> &'static str {
        let ratio = match self.baseline {
            Baseline::AofAlways => vs_aof,
            Baseline::Plain => vs_plain,
        };
        match ratio {
            Some(ratio) if ratio >= self.min => "yes",
            Some(_) => "no",
            None => "-",
        }
    }
}

/// Runs both parts; a part that cannot run is recorded as a failure and the other still
/// runs.
pub(crate) fn run(
    report: &mut Report,
    programs: &Programs,
    work_dir: &Path,
    sizes: Sizes,
) -> Result<()> {
    println!("==> replication throughput: starting a 3-replica group and two redis-servers");
    if let Err(error) = throughput(report, programs, work_dir, sizes) {
        report.fail(format!("replication throughput: {error:#}"));
    }
    println!("==> failover: starting a fresh 3-replica group");
    if let Err(error) = failover(report, &programs.slotraft, work_dir) {
        report.fail(format!("failover: {error:#}"));
    }
    Ok(())
}

fn throughput(
    report: &mut Report,
    programs: &Programs,
    work_dir: &Path,
    sizes: Sizes,
) -> Result<()> {
    let mut group = Group::start(&programs.slotraft, work_dir)?;
    let mut aof = Server::start(Kind::RedisAofAlways, &programs.redis, work_dir)?;
    let mut plain = Server::start(Kind::Redis, &programs.redis, work_dir)?;
    write_throughput_header(report, sizes)?;
    let mut turn = 0usize;
    for (label, test) in TESTS {
        for pipeline in PIPELINES {
            let cell = Cell {
                label,
                test,
                pipeline,
                requests: sizes.requests(pipeline),
            };
            let (leader, before) = group.wait_whole(group::WHOLE_TIMEOUT)?;
            let medians = bench::measure_cell(
                report,
                &programs.benchmark,
                &mut [group.server_mut(leader)?, &mut aof, &mut plain],
                cell,
                sizes.rounds,
                &mut turn,
            );
            note_leader_change(report, &mut group, cell, &before);
            write_throughput_row(report, cell, &medians)?;
        }
    }
    Ok(())
}

fn write_throughput_header(report: &mut Report, sizes: Sizes) -> Result<()> {
    writeln!(
        report.md,
        "\n## Replication throughput\n\n\
         - slotraft-group: {} `slotraft node` replicas (raft-fsync yes), redis-benchmark \
         against the leader; a write is acknowledged once a majority has it in its fsync'd \
         log.\n\
         - redis-aof-always: redis-server --appendonly yes --appendfsync always.\n\
         - redis-plain: redis-server --save '' --appendonly no.\n\n\
         redis-benchmark -c {CLIENTS} -r {KEYSPACE}; -n {} at -P 1, -n {} at -P 16; median \
         of {} runs per cell, rotating which server goes first.\n",
        group::SIZE,
        sizes.requests(1),
        sizes.requests(16),
        sizes.rounds
    )?;
    writeln!(
        report.md,
        "| test | pipeline | slotraft-group rps | redis-aof-always rps | redis-plain rps | \
         slotraft/aof-always | slotraft/plain | target | met | slotraft p50 ms |"
    )?;
    writeln!(report.md, "|---|---|---:|---:|---:|---:|---:|---|---|---:|")?;
    Ok(())
}

/// One row from the medians of (group leader, redis-aof-always, redis-plain).
fn write_throughput_row(
    report: &mut Report,
    cell: Cell<'_>,
    medians: &[Option<Sample>],
) -> Result<()> {
    let sample = |index: usize| medians.get(index).copied().flatten();
    let (ours, aof, plain) = (sample(0), sample(1), sample(2));
    let vs_aof = bench::ratio(ours, aof);
    let vs_plain = bench::ratio(ours, plain);
    let goal = Goal::for_cell(cell.test, cell.pipeline);
    writeln!(
        report.md,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        cell.label,
        cell.pipeline,
        bench::rps_cell(ours),
        bench::rps_cell(aof),
        bench::rps_cell(plain),
        bench::ratio_cell(vs_aof),
        bench::ratio_cell(vs_plain),
        goal.describe(),
        goal.verdict(vs_aof, vs_plain),
        bench::p50_cell(ours),
    )?;
    Ok(())
}

/// Notes a cell during which the group changed leader (redis-benchmark would then have
/// been answered with redirects).
fn note_leader_change(
    report: &mut Report,
    group: &mut Group,
    cell: Cell<'_>,
    before: &group::Status,
) {
    let after = group.wait_whole(group::WHOLE_TIMEOUT);
    let changed = match &after {
        Ok((_, status)) => status.node_id != before.node_id || status.term != before.term,
        Err(_) => true,
    };
    if changed {
        let now = match after {
            Ok((_, status)) => format!("replica {} in term {}", status.node_id, status.term),
            Err(error) => format!("no whole group ({error:#})"),
        };
        report.notes.push(format!(
            "{} -P {}: the leader changed during the runs (replica {} in term {} before, {now} \
             after); the slotraft numbers may count redirect errors",
            cell.label, cell.pipeline, before.node_id, before.term
        ));
    }
}

fn failover(report: &mut Report, slotraft: &Path, work_dir: &Path) -> Result<()> {
    let mut group = Group::start(slotraft, work_dir)?;
    let mut times = Vec::new();
    let mut error = None;
    for trial in 0..FAILOVER_TRIALS {
        match failover_trial(&mut group, trial) {
            Ok(elapsed) => {
                eprintln!("   failover trial {}: {:.0} ms", trial + 1, millis(elapsed));
                times.push(elapsed);
            }
            Err(trial_error) => {
                error = Some(trial_error.context(format!("trial {}", trial + 1)));
                break;
            }
        }
    }
    write_failover(report, &times)?;
    match error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Kills the leader of a whole group and returns how long until a survivor acknowledged a
/// write; restarts the killed replica before returning, even when no write succeeded.
fn failover_trial(group: &mut Group, trial: usize) -> Result<Duration> {
    let (leader, _) = group.wait_whole(group::WHOLE_TIMEOUT)?;
    let survivors: Vec<u16> = (0..group::SIZE)
        .filter(|&index| index != leader)
        .map(|index| group.port(index))
        .collect();
    let key = format!("failover:{trial}");
    let killed_at = group.kill(leader)?;
    let result = first_write(&survivors, &key, killed_at);
    group
        .restart(leader)
        .context("restarting the killed leader")?;
    result
}

/// Polls SET `key` on every port in its own thread every [`WRITE_POLL`] until one is
/// acknowledged; returns the time from `killed_at` to that acknowledgement.
fn first_write(ports: &[u16], key: &str, killed_at: Instant) -> Result<Duration> {
    let deadline = killed_at + FAILOVER_LIMIT;
    let done = AtomicBool::new(false);
    let outcomes: Vec<(u16, Result<Instant, String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ports
            .iter()
            .map(|&port| {
                let done = &done;
                scope.spawn(move || (port, poll_writes(port, key, deadline, done)))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|handle| handle.join().ok())
            .collect()
    });
    let first = outcomes
        .iter()
        .filter_map(|(_, outcome)| outcome.as_ref().ok())
        .min();
    match first {
        Some(&written_at) => Ok(written_at.saturating_duration_since(killed_at)),
        None => {
            let last: Vec<String> = outcomes
                .iter()
                .map(|(port, outcome)| match outcome {
                    Ok(_) => format!("127.0.0.1:{port}: written"),
                    Err(last) => format!("127.0.0.1:{port}: {last}"),
                })
                .collect();
            bail!(
                "no survivor acknowledged a SET within {}s of the kill; last answers: {}",
                FAILOVER_LIMIT.as_secs(),
                last.join("; ")
            )
        }
    }
}

/// Tries SET on `port` until it is acknowledged (`Ok` with the moment), another thread
/// succeeds, or `deadline` passes (`Err` with the last answer).
fn poll_writes(
    port: u16,
    key: &str,
    deadline: Instant,
    done: &AtomicBool,
) -> Result<Instant, String> {
    let mut conn: Option<Conn> = None;
    let mut last = "not tried".to_owned();
    while !done.load(Ordering::SeqCst) && Instant::now() < deadline {
        match try_write(&mut conn, port, key) {
            Ok(()) => {
                let written_at = Instant::now();
                done.store(true, Ordering::SeqCst);
                return Ok(written_at);
            }
            Err(answer) => last = answer,
        }
        std::thread::sleep(WRITE_POLL);
    }
    Err(last)
}

/// One SET over `conn` (connecting first if needed); `Err` describes why it was not
/// acknowledged, and drops the connection unless the server answered.
fn try_write(conn: &mut Option<Conn>, port: u16, key: &str) -> Result<(), String> {
    let connection = match conn {
        Some(connection) => connection,
        None => conn.insert(Conn::connect(port, WRITE_TIMEOUT).map_err(|e| format!("{e:#}"))?),
    };
    match connection.command(&[b"SET", key.as_bytes(), b"1"]) {
        Ok(reply) => write_acknowledged(&reply),
        Err(error) => {
            *conn = None;
            Err(format!("{error:#}"))
        }
    }
}

/// `Ok` for `+OK`; any other reply (MOVED, CLUSTERDOWN, UNKNOWN, ...) means not yet.
fn write_acknowledged(reply: &Reply) -> Result<(), String> {
    match reply {
        Reply::Simple(ok) if ok == "OK" => Ok(()),
        Reply::Error(error) => Err(format!("-{error}")),
        other => Err(format!("{other:?}")),
    }
}

fn write_failover(report: &mut Report, times: &[Duration]) -> Result<()> {
    writeln!(
        report.md,
        "\n## Failover\n\n{} replicas (default raft-election-timeout); SIGKILL the leader, \
         then SET on each survivor every {} ms until one answers +OK; time from the kill to \
         that reply. The killed replica is restarted on its data and the group is whole again \
         before the next trial.\n",
        group::SIZE,
        WRITE_POLL.as_millis()
    )?;
    writeln!(
        report.md,
        "| trials | median ms | min ms | max ms | each trial ms |"
    )?;
    writeln!(report.md, "|---:|---:|---:|---:|---|")?;
    let cell = |time: Option<Duration>| {
        time.map_or_else(|| "-".to_owned(), |t| format!("{:.0}", millis(t)))
    };
    let each: Vec<String> = times.iter().map(|t| format!("{:.0}", millis(*t))).collect();
    writeln!(
        report.md,
        "| {} | {} | {} | {} | {} |",
        times.len(),
        cell(median_duration(times)),
        cell(times.iter().min().copied()),
        cell(times.iter().max().copied()),
        each.join(", ")
    )?;
    Ok(())
}

/// The median duration (the upper one of an even count).
fn median_duration(times: &[Duration]) -> Option<Duration> {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied()
}

fn millis(time: Duration) -> f64 {
    time.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_follow_the_targets() {
        let set_p1 = Goal::for_cell("set", 1);
        assert_eq!(set_p1.baseline, Baseline::AofAlways);
        assert_eq!(set_p1.min, 0.5);
        assert_eq!(Goal::for_cell("incr", 16).min, 1.0);
        assert_eq!(Goal::for_cell("get", 16).baseline, Baseline::Plain);
        assert_eq!(Goal::for_cell("get", 1).describe(), ">= 0.8x plain");
        assert_eq!(set_p1.describe(), ">= 0.5x aof-always");
    }

    #[test]
    fn verdicts() {
        let goal = Goal::for_cell("set", 1);
        assert_eq!(goal.verdict(Some(0.5), Some(0.1)), "yes");
        assert_eq!(goal.verdict(Some(0.49), Some(2.0)), "no");
        assert_eq!(goal.verdict(None, Some(2.0)), "-");
        assert_eq!(Goal::for_cell("get", 1).verdict(None, Some(0.8)), "yes");
    }

    #[test]
    fn only_ok_acknowledges_a_write() {
        assert!(write_acknowledged(&Reply::Simple("OK".into())).is_ok());
        let moved = Reply::Error("MOVED 1234 127.0.0.1:7001".into());
        assert_eq!(
            write_acknowledged(&moved),
            Err("-MOVED 1234 127.0.0.1:7001".to_owned())
        );
        assert!(
            write_acknowledged(&Reply::Error("CLUSTERDOWN The cluster is down".into())).is_err()
        );
        assert!(write_acknowledged(&Reply::Bulk(None)).is_err());
    }

    #[test]
    fn median_of_durations() {
        let ms = Duration::from_millis;
        assert_eq!(median_duration(&[ms(30), ms(10), ms(20)]), Some(ms(20)));
        assert_eq!(
            median_duration(&[ms(10), ms(40), ms(30), ms(20)]),
            Some(ms(30))
        );
        assert_eq!(median_duration(&[]), None);
    }

    #[test]
    fn a_survivor_that_refuses_connections_is_not_written() {
        let port = crate::server::free_port().unwrap_or(1);
        let started = Instant::now();
        let mut conn = None;
        assert!(try_write(&mut conn, port, "k").is_err());
        assert!(conn.is_none());
        let outcome = poll_writes(
            port,
            "k",
            started + Duration::from_millis(50),
            &AtomicBool::new(false),
        );
        assert!(outcome.is_err());
    }
}
