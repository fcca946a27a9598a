//! The `scripting` section of `cargo xtask bench`: the programmable half of
//! Redis against redis-server in the same run (target: at least as fast).
//!
//! - EVALSHA of the sliding-window limiter, under redis-benchmark.
//! - MULTI / three commands / EXEC, from our own load generator (redis-benchmark
//!   cannot send a transaction): 50 connections, each sending whole
//!   transactions and waiting for their replies.
//! - PUBLISH to a channel with 50 subscribers, under redis-benchmark.

use crate::bench::{
    compare_row, cpu_cells, cpu_seconds, cpu_us_per_request, median, met, process_ticks, ratio,
    ratio_cell, rps_cell, Report, Sample, Sizes, CLIENTS, COMPARE_HEADER,
};
use crate::server::Server;
use crate::wire::{self, Conn, Reply};
use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// The sliding-window limiter of the seed documents.
const LIMITER: &str = "local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return 1
end
return 0";

const IO_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) fn run(
    report: &mut Report,
    benchmark: &Path,
    slotraft: &mut Server,
    redis: &mut Server,
    sizes: Sizes,
) -> Result<()> {
    writeln!(
        report.md,
        "\n## Scripting and transactions\n\nTarget: >= 1.0x of redis-server, same run; \
         median of {} runs per cell, alternating which server goes first.\n",
        sizes.rounds
    )?;
    let mut sha = String::new();
    for server in [&mut *slotraft, &mut *redis] {
        let mut conn = Conn::connect(server.port, IO_TIMEOUT)?;
        match conn.command(&[b"SCRIPT", b"LOAD", LIMITER.as_bytes()])? {
            Reply::Bulk(Some(bytes)) => sha = String::from_utf8_lossy(&bytes).into_owned(),
            other => bail!("SCRIPT LOAD on {} answered {other:?}", server.name),
        }
    }
    writeln!(
        report.md,
        "EVALSHA of the sliding-window limiter (ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE) over \
         100000 keys: redis-benchmark -c {CLIENTS} -r 100000, -n {} at -P 1, -n {} at -P 16.\n",
        sizes.requests(1),
        sizes.requests(16)
    )?;
    writeln!(report.md, "{COMPARE_HEADER}")?;
    let command = format!("EVALSHA {sha} 1 {{rl}}:__rand_int__ 1000 1000 5 member");
    let mut turn = 0usize;
    compare_row(
        report,
        benchmark,
        slotraft,
        redis,
        "EVALSHA limiter",
        &command,
        sizes,
        &mut turn,
    )?;

    let transactions = sizes.requests(1) / 2;
    writeln!(
        report.md,
        "\nMULTI, SET, INCR, GET, EXEC sent as one write per transaction by {CLIENTS} \
         connections, {transactions} transactions per run.\n"
    )?;
    writeln!(
        report.md,
        "| test | slotraft tx/s | redis tx/s | ratio | met | slotraft CPU us/tx | redis CPU us/tx | CPU ratio | load generator busy |"
    )?;
    writeln!(report.md, "|---|---:|---:|---:|---|---:|---:|---:|---:|")?;
    let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    for round in 0..sizes.rounds {
        for offset in 0..2 {
            let index = (round as usize + offset) % 2;
            let server = if index == 0 {
                &mut *slotraft
            } else {
                &mut *redis
            };
            // The load runs on this process's own threads: its CPU time
            // is the load generator's.
            let server_before = process_ticks(server.pid());
            let client_before = process_ticks(std::process::id());
            let started = Instant::now();
            match transactions_per_second(server.port, transactions) {
                Ok(rate) => {
                    eprintln!("   MULTI/EXEC x3 {:<18} {rate:>12.0} tx/s", server.name);
                    let wall = started.elapsed().as_secs_f64();
                    let spent = |before: Option<u64>, pid: u32| {
                        before
                            .zip(process_ticks(pid))
                            .map(|(before, after)| after.saturating_sub(before))
                    };
                    samples[index].push(Sample {
                        server_cpu_us: spent(server_before, server.pid())
                            .map(|ticks| cpu_us_per_request(ticks, transactions)),
                        client_busy: spent(client_before, std::process::id())
                            .map(|ticks| cpu_seconds(ticks) / wall),
                        ..Sample::new(rate, None)
                    });
                }
                Err(error) => report.fail(format!("MULTI/EXEC on {}: {error:#}", server.name)),
            }
        }
    }
    let medians = [median(&samples[0]), median(&samples[1])];
    let value = ratio(medians[0], medians[1]);
    writeln!(
        report.md,
        "| MULTI/EXEC of 3 | {} | {} | {} | {} | {} |",
        rps_cell(medians[0]),
        rps_cell(medians[1]),
        ratio_cell(value),
        met(value, 1.0),
        cpu_cells(medians[0], medians[1]),
    )?;
    writeln!(
        report.md,
        "\nPUBLISH of a 16-byte message to one channel with {SUBSCRIBERS} subscribers \
         (each on its own connection, reading all the time): redis-benchmark -c {CLIENTS}.\n"
    )?;
    writeln!(report.md, "{COMPARE_HEADER}")?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut listeners = Vec::new();
    for server in [&*slotraft, &*redis] {
        for _ in 0..SUBSCRIBERS {
            listeners.push(subscribe(server.port, stop.clone())?);
        }
    }
    compare_row(
        report,
        benchmark,
        slotraft,
        redis,
        &format!("PUBLISH to {SUBSCRIBERS} subscribers"),
        "PUBLISH bench:channel message-16bytes",
        sizes,
        &mut turn,
    )?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for listener in listeners {
        let _ = listener.join();
    }
    Ok(())
}

/// Subscribers per server in the PUBLISH cell.
const SUBSCRIBERS: usize = 50;

/// A connection subscribed to the bench channel, reading (and dropping)
/// everything until `stop`.
fn subscribe(
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    use std::io::Read;
    use std::net::{Ipv4Addr, SocketAddr, TcpStream};
    let mut stream =
        TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), IO_TIMEOUT)?;
    let mut request = Vec::new();
    wire::encode(&mut request, &[b"SUBSCRIBE", b"bench:channel"]);
    std::io::Write::write_all(&mut stream, &request)?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    Ok(std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(_) => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
    }))
}

/// Runs `total` transactions spread over [`CLIENTS`] connections; answers
/// transactions per second.
fn transactions_per_second(port: u16, total: u64) -> Result<f64> {
    let per_client = (total / CLIENTS).max(1);
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            std::thread::spawn(move || -> Result<()> {
                let mut conn = Conn::connect(port, IO_TIMEOUT)?;
                let key = format!("tx:{client}");
                let counter = format!("tx:{client}:count");
                let mut out = Vec::new();
                for _ in 0..per_client {
                    out.clear();
                    wire::encode(&mut out, &[b"MULTI"]);
                    wire::encode(&mut out, &[b"SET", key.as_bytes(), b"value"]);
                    wire::encode(&mut out, &[b"INCR", counter.as_bytes()]);
                    wire::encode(&mut out, &[b"GET", key.as_bytes()]);
                    wire::encode(&mut out, &[b"EXEC"]);
                    conn.send(&out)?;
                    for _ in 0..4 {
                        conn.read_reply()?;
                    }
                    match conn.read_reply()? {
                        Reply::Array(Some(replies)) if replies.len() == 3 => {}
                        other => bail!("EXEC answered {other:?}"),
                    }
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        match worker.join() {
            Ok(result) => result?,
            Err(_) => bail!("a load thread panicked"),
        }
    }
    Ok((per_client * CLIENTS) as f64 / started.elapsed().as_secs_f64())
}
