//! SLOWLOG and LATENCY: reading what [`crate::stats`] recorded; MEMORY's
//! process-wide subcommands (MEMORY USAGE runs in the keyspace).

use crate::server::Shared;
use crate::stats::{bucket_upper_us, CommandStat};
use bytes::Bytes;
use keyspace::{args, errors};
use resp::Frame;
use std::fmt::Write as _;

/// SLOWLOG GET's count when none is given.
const DEFAULT_SLOWLOG_COUNT: usize = 10;
/// Columns of a LATENCY GRAPH (the newest samples).
const GRAPH_COLUMNS: usize = 80;
/// Rows of a LATENCY GRAPH's bars.
const GRAPH_ROWS: u64 = 4;

fn lines(text: &[&str]) -> Frame {
    Frame::Array(
        text.iter()
            .map(|line| Frame::Simple(Bytes::copy_from_slice(line.as_bytes())))
            .collect(),
    )
}

fn verbatim(text: String) -> Frame {
    Frame::Verbatim(Bytes::from(format!("txt:{text}")))
}

/// A process using less than this has too little data for MEMORY DOCTOR to
/// judge.
const DOCTOR_MIN_BYTES: usize = 5 << 20;

/// SLOWLOG, LATENCY and MEMORY subcommands; None for other commands.
pub fn execute(shared: &Shared, name: &str, arguments: &[Bytes]) -> Option<Frame> {
    let monitors = &shared.monitors;
    let reply = match name {
        "slowlog|get" => {
            let count = match arguments.get(2) {
                None => Some(DEFAULT_SLOWLOG_COUNT),
                Some(argument) => match args::parse_i64(argument) {
                    Ok(-1) => None,
                    Ok(count) if count >= 0 => Some(count as usize),
                    _ => {
                        return Some(Frame::error(
                            "ERR count should be greater than or equal to -1",
                        ))
                    }
                },
            };
            if arguments.len() > 3 {
                return Some(Frame::error_owned(errors::wrong_arity("slowlog|get")));
            }
            monitors.slowlog_get(count)
        }
        "slowlog|len" => Frame::Integer(monitors.slowlog_len() as i64),
        "slowlog|reset" => {
            monitors.slowlog_reset();
            Frame::OK
        }
        "slowlog|help" => lines(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Prints this help.",
        ]),
        "latency|latest" => monitors.latency_latest(),
        "latency|history" => Frame::Array(
            monitors
                .latency_history(&arguments[2])
                .into_iter()
                .map(|(second, ms)| {
                    Frame::Array(vec![
                        Frame::Integer(second as i64),
                        Frame::Integer(ms as i64),
                    ])
                })
                .collect(),
        ),
        "latency|reset" => Frame::Integer(monitors.latency_reset(&arguments[2..]) as i64),
        "latency|graph" => graph(shared, &arguments[2]),
        "latency|doctor" => verbatim(doctor(shared)),
        "latency|histogram" => histogram(shared, &arguments[2..]),
        "latency|help" => lines(&[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ]),
        "memory|stats" => memory_stats(shared),
        "memory|doctor" => verbatim(memory_doctor(shared)),
        "memory|malloc-stats" => verbatim(String::from(
            "Stats not supported for the current allocator",
        )),
        "memory|purge" => Frame::OK,
        "memory|help" => lines(&[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        ]),
        _ => return None,
    };
    Some(reply)
}

/// Keys in every database of every data store this node holds (one per
/// hosted shard on a cluster node).
fn key_count(shared: &Shared) -> usize {
    crate::info::data_stores(shared)
        .iter()
        .map(|store| {
            let state = replication::state_machine::lock_off_worker(store);
            state
                .keyspace
                .dbs()
                .iter()
                .map(|db| db.len())
                .sum::<usize>()
        })
        .sum()
}

/// MEMORY STATS: Redis's fields this process can measure (allocations are
/// counted by the node's allocator; there is no jemalloc arena to report).
fn memory_stats(shared: &Shared) -> Frame {
    let used = crate::alloc::allocated_bytes();
    let peak = crate::alloc::peak_bytes().max(used);
    let resident = crate::alloc::resident_bytes();
    let startup = shared.startup_allocated.min(used);
    let keys = key_count(shared);
    let dataset = used - startup;
    let percent = |part: usize, whole: usize| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let integer = |name: &'static str, value: usize| {
        (
            Frame::Bulk(Bytes::from_static(name.as_bytes())),
            Frame::Integer(value as i64),
        )
    };
    let double = |name: &'static str, value: f64| {
        (
            Frame::Bulk(Bytes::from_static(name.as_bytes())),
            Frame::Double(value),
        )
    };
    Frame::Map(vec![
        integer("peak.allocated", peak),
        integer("total.allocated", used),
        integer("startup.allocated", startup),
        integer("replication.backlog", 0),
        integer("clients.slaves", 0),
        integer("clients.normal", 0),
        integer("cluster.links", 0),
        integer("aof.buffer", 0),
        integer("lua.caches", 0),
        integer("functions.caches", 0),
        integer("overhead.total", startup),
        integer("keys.count", keys),
        integer("keys.bytes-per-key", dataset.checked_div(keys).unwrap_or(0)),
        integer("dataset.bytes", dataset),
        double("dataset.percentage", percent(dataset, used)),
        double("peak.percentage", percent(used, peak)),
        integer("allocator.allocated", used),
        integer("allocator.resident", resident),
        double(
            "fragmentation",
            if used == 0 {
                0.0
            } else {
                resident as f64 / used as f64
            },
        ),
        integer("fragmentation.bytes", resident.saturating_sub(used)),
    ])
}

/// MEMORY DOCTOR: what looks wrong in the process's memory, if anything.
fn memory_doctor(shared: &Shared) -> String {
    let used = crate::alloc::allocated_bytes();
    let peak = crate::alloc::peak_bytes().max(used);
    let resident = crate::alloc::resident_bytes();
    if used < DOCTOR_MIN_BYTES {
        return String::from(
            "This node holds too little data (under 5 MB allocated) for a memory report to mean anything.\n",
        );
    }
    let mut findings = Vec::new();
    if peak > used.saturating_mul(3) / 2 {
        findings.push(format!(
            "The peak allocation ({peak} bytes) is more than 150% of what is allocated now ({used} bytes): \
             the memory once used may still be held by the process (see fragmentation)."
        ));
    }
    let fragmentation = resident as f64 / used as f64;
    if fragmentation > 1.4 {
        findings.push(format!(
            "The process's resident memory is {fragmentation:.2} times what it has allocated: \
             freed memory is not returned to the system yet."
        ));
    }
    let maxmemory: usize = shared
        .config()
        .get("maxmemory")
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    if maxmemory > 0 && used > maxmemory {
        findings.push(format!(
            "Allocated memory ({used} bytes) is over maxmemory ({maxmemory} bytes): writes are refused \
             or keys evicted by the maxmemory-policy."
        ));
    }
    if findings.is_empty() {
        return String::from("No memory problem found.\n");
    }
    let mut text = String::from("Memory report:\n\n");
    for finding in findings {
        let _ = writeln!(text, " * {finding}");
    }
    text
}

/// LATENCY HISTOGRAM: per command that ran, its calls and the cumulative
/// count of calls at or below each power-of-two microsecond bound. Named
/// commands only when names are given (a container's name stands for its
/// subcommands).
fn histogram(shared: &Shared, names: &[Bytes]) -> Frame {
    let wanted = |name: &str| {
        names.is_empty()
            || names.iter().any(|wanted| {
                let wanted = String::from_utf8_lossy(wanted).to_ascii_lowercase();
                name == wanted
                    || name
                        .strip_prefix(&wanted)
                        .is_some_and(|rest| rest.starts_with('|'))
            })
    };
    let entries = shared
        .monitors
        .command_stats()
        .into_iter()
        .filter(|(name, stat)| stat.calls > 0 && wanted(name))
        .map(|(name, stat)| {
            (
                Frame::Bulk(Bytes::from_static(name.as_bytes())),
                Frame::Map(vec![
                    (
                        Frame::Bulk(Bytes::from_static(b"calls")),
                        Frame::Integer(stat.calls as i64),
                    ),
                    (
                        Frame::Bulk(Bytes::from_static(b"histogram_usec")),
                        Frame::Map(cumulative(&stat)),
                    ),
                ]),
            )
        })
        .collect();
    Frame::Map(entries)
}

fn cumulative(stat: &CommandStat) -> Vec<(Frame, Frame)> {
    let mut total = 0;
    let mut out = Vec::new();
    for (index, count) in stat.histogram.iter().enumerate() {
        if *count == 0 {
            continue;
        }
        total += count;
        out.push((
            Frame::Integer(bucket_upper_us(index) as i64),
            Frame::Integer(total as i64),
        ));
    }
    out
}

/// LATENCY GRAPH: the event's newest samples as columns of `#`, the highest
/// at full height, with each column's age below it.
fn graph(shared: &Shared, event: &Bytes) -> Frame {
    let samples = shared.monitors.latency_history(event);
    let name = String::from_utf8_lossy(event).into_owned();
    let (Some(max_ever), false) = (shared.monitors.latency_max(event), samples.is_empty()) else {
        return Frame::error_owned(format!("ERR No samples available for event '{name}'"));
    };
    let shown = &samples[samples.len().saturating_sub(GRAPH_COLUMNS)..];
    let high = shown.iter().map(|(_, ms)| *ms).max().unwrap_or(0);
    let low = shown.iter().map(|(_, ms)| *ms).min().unwrap_or(0);
    let mut text = format!(
        "{name} - high {high} ms, low {low} ms (all time high {max_ever} ms)\n{}\n",
        "-".repeat(GRAPH_COLUMNS)
    );
    for row in (1..=GRAPH_ROWS).rev() {
        for (_, ms) in shown {
            let height = if high == 0 {
                0
            } else {
                (ms * GRAPH_ROWS).div_ceil(high)
            };
            text.push(if height >= row { '#' } else { ' ' });
        }
        text.push('\n');
    }
    let newest = shown.last().map_or(0, |(second, _)| *second);
    let ages: Vec<String> = shown
        .iter()
        .map(|(second, _)| age(newest.saturating_sub(*second)))
        .collect();
    let height = ages.iter().map(String::len).max().unwrap_or(0);
    for position in 0..height {
        for label in &ages {
            text.push(
                label
                    .as_bytes()
                    .get(position)
                    .map_or(' ', |&byte| byte as char),
            );
        }
        text.push('\n');
    }
    verbatim(text)
}

/// A sample's age as a short vertical label: seconds, minutes, hours or days.
fn age(seconds: u64) -> String {
    match seconds {
        0..=59 => format!("{seconds}s"),
        60..=3599 => format!("{}m", seconds / 60),
        3600..=86_399 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// LATENCY DOCTOR: a short report on each event the monitor recorded.
fn doctor(shared: &Shared) -> String {
    let threshold = shared.monitors.latency_threshold_ms();
    let events = shared.monitors.latency_summary();
    let mut text = String::new();
    if events.is_empty() {
        if threshold == 0 {
            text.push_str(
                "The latency monitor is off: set it with \"CONFIG SET latency-monitor-threshold <milliseconds>\" \
                 and events that take at least that long are recorded.\n",
            );
        } else {
            let _ = writeln!(
                text,
                "No event took {threshold} ms or more (latency-monitor-threshold) since the monitor started or was reset."
            );
        }
        return text;
    }
    let _ = writeln!(
        text,
        "Events that took at least {threshold} ms (latency-monitor-threshold):\n"
    );
    for (index, (event, samples, average, highest, max_ever)) in events.iter().enumerate() {
        let _ = writeln!(
            text,
            "{}. {event}: {samples} samples (one per second at most), average {average:.0} ms, \
             highest {highest} ms, all time high {max_ever} ms.",
            index + 1
        );
    }
    let slow = events.iter().any(|(event, ..)| *event == "command");
    let fast = events.iter().any(|(event, ..)| *event == "fast-command");
    text.push_str("\nAdvice:\n");
    if slow {
        text.push_str(
            "- \"command\": commands of O(N) or worse took long; SLOWLOG GET shows which ones and \
             their arguments. Prefer bounded ranges (SCAN over KEYS, LIMIT/COUNT options).\n",
        );
    }
    if fast {
        text.push_str(
            "- \"fast-command\": O(1) or O(log N) commands took long: the process was starved of \
             CPU or stalled (swap, a busy host, a long script holding the keyspace).\n",
        );
    }
    if shared.replica.is_some() || shared.cluster.is_some() {
        text.push_str(
            "- On a replica of a shard, a write's time includes its Raft round and the log's fsync: \
             a slow disk or a lagging majority shows up here.\n",
        );
    }
    text
}
