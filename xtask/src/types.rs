//! The `types` section of `cargo xtask bench`: the data-type commands under
//! redis-benchmark against redis-server (target: at least as fast), and how the
//! per-operation cost of sorted-set commands grows from a 1k-member set to a
//! large one (target: under 4x, i.e. logarithmic).

use crate::bench::{compare_row, Report, Sizes, COMPARE_HEADER};
use crate::server::Server;
use crate::wire::{self, Conn, Reply};
use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// (row label, `redis-benchmark -t` name). LPOP and RPOP follow LPUSH, so
/// they pop what it pushed.
const TESTS: [(&str, &str); 8] = [
    ("LPUSH", "lpush"),
    ("LPOP", "lpop"),
    ("RPOP", "rpop"),
    ("SADD", "sadd"),
    ("SPOP", "spop"),
    ("HSET", "hset"),
    ("ZADD", "zadd"),
    ("LRANGE_100", "lrange_100"),
];

/// Members of the small sorted set.
const SMALL: u64 = 1_000;
/// Commands timed per operation and set.
const TIMED: u64 = 20_000;
/// Commands per pipelined batch.
const BATCH: u64 = 100;
const IO_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) fn run(
    report: &mut Report,
    benchmark: &Path,
    slotraft: &mut Server,
    redis: &mut Server,
    sizes: Sizes,
    large: u64,
) -> Result<()> {
    writeln!(
        report.md,
        "\n## Data types\n\nredis-benchmark -c 50 -r 100000; -n {} at -P 1, -n {} at -P 16; \
         median of {} runs per cell, alternating which server goes first. Target: >= 1.0x.\n",
        sizes.requests(1),
        sizes.requests(16),
        sizes.rounds
    )?;
    writeln!(report.md, "{COMPARE_HEADER}")?;
    let mut turn = 0usize;
    for (label, test) in TESTS {
        compare_row(
            report, benchmark, slotraft, redis, label, test, sizes, &mut turn,
        )?;
    }

    writeln!(
        report.md,
        "\n### Sorted-set scaling\n\nMicroseconds per command, {TIMED} commands pipelined \
         {BATCH} at a time on one connection, against a set of {SMALL} members and one of \
         {large}; target: large/small under 4x.\n"
    )?;
    writeln!(
        report.md,
        "| server | command | {SMALL} members us/op | {large} members us/op | large/small | met |"
    )?;
    writeln!(report.md, "|---|---|---:|---:|---:|---|")?;
    for server in [slotraft, redis] {
        match scaling(server.port, large) {
            Ok(rows) => {
                for (command, small_us, large_us) in rows {
                    let growth = large_us / small_us;
                    let met = if growth < 4.0 { "yes" } else { "no" };
                    eprintln!(
                        "   {:<8} {command:<24} {small_us:.2} us -> {large_us:.2} us ({growth:.2}x)",
                        server.name
                    );
                    writeln!(
                        report.md,
                        "| {} | {command} | {small_us:.2} | {large_us:.2} | {growth:.2} | {met} |",
                        server.name
                    )?;
                }
            }
            Err(error) => report.fail(format!("sorted-set scaling on {}: {error:#}", server.name)),
        }
    }
    Ok(())
}

/// A small deterministic sequence (xorshift) for members and scores.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Fills `key` with members `m0..m{count}` scored by their index.
fn fill(conn: &mut Conn, key: &str, count: u64) -> Result<()> {
    const PER_COMMAND: u64 = 1000;
    let mut start = 0;
    while start < count {
        let end = (start + PER_COMMAND).min(count);
        let texts: Vec<(String, String)> = (start..end)
            .map(|index| (index.to_string(), format!("m{index}")))
            .collect();
        let mut arguments: Vec<&[u8]> = vec![b"ZADD", key.as_bytes()];
        for (score, member) in &texts {
            arguments.push(score.as_bytes());
            arguments.push(member.as_bytes());
        }
        if let Reply::Error(error) = conn.command(&arguments)? {
            bail!("ZADD while filling {key}: {error}");
        }
        start = end;
    }
    Ok(())
}

/// Sends `TIMED` commands made by `make` in pipelined batches and returns
/// microseconds per command.
fn time_commands(conn: &mut Conn, mut make: impl FnMut(&mut Vec<u8>)) -> Result<f64> {
    let started = Instant::now();
    let mut sent = 0;
    while sent < TIMED {
        let mut wire_bytes = Vec::new();
        let batch = BATCH.min(TIMED - sent);
        for _ in 0..batch {
            make(&mut wire_bytes);
        }
        conn.send(&wire_bytes)?;
        for _ in 0..batch {
            if let Reply::Error(error) = conn.read_reply()? {
                bail!("timed command failed: {error}");
            }
        }
        sent += batch;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / TIMED as f64)
}

/// (command, us/op on the small set, us/op on the large set).
fn scaling(port: u16, large: u64) -> Result<Vec<(&'static str, f64, f64)>> {
    let mut conn = Conn::connect(port, IO_TIMEOUT)?;
    conn.command(&[b"DEL", b"scale:small", b"scale:large"])?;
    fill(&mut conn, "scale:small", SMALL)?;
    fill(&mut conn, "scale:large", large)?;
    let mut rows = Vec::new();
    type Maker = fn(&mut Vec<u8>, &str, u64, &mut Sequence);
    let operations: [(&'static str, Maker); 3] = [
        ("ZADD (update a score)", |out, key, size, sequence| {
            let member = format!("m{}", sequence.next() % size);
            let score = (sequence.next() % (size * 2)).to_string();
            wire::encode(
                out,
                &[b"ZADD", key.as_bytes(), score.as_bytes(), member.as_bytes()],
            );
        }),
        ("ZRANK", |out, key, size, sequence| {
            let member = format!("m{}", sequence.next() % size);
            wire::encode(out, &[b"ZRANK", key.as_bytes(), member.as_bytes()]);
        }),
        ("ZRANGEBYSCORE LIMIT 0 10", |out, key, size, sequence| {
            let min = (sequence.next() % size).to_string();
            wire::encode(
                out,
                &[
                    b"ZRANGEBYSCORE",
                    key.as_bytes(),
                    min.as_bytes(),
                    b"+inf",
                    b"LIMIT",
                    b"0",
                    b"10",
                ],
            );
        }),
    ];
    for (name, make) in operations {
        let mut timings = [0.0; 2];
        for (slot, (key, size)) in timings
            .iter_mut()
            .zip([("scale:small", SMALL), ("scale:large", large)])
        {
            let mut sequence = Sequence(0x9e37_79b9_7f4a_7c15);
            *slot = time_commands(&mut conn, |out| make(out, key, size, &mut sequence))?;
        }
        rows.push((name, timings[0], timings[1]));
    }
    conn.command(&[b"DEL", b"scale:small", b"scale:large"])?;
    Ok(rows)
}
