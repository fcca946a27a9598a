//! INFO: Redis's sections and field names, so monitoring tools and clients that read
//! them (`redis_version`, `cluster_enabled`, `loading`, `db0:keys=...`) keep working.

use crate::alloc;
use crate::clock;
use crate::server::Shared;
use bytes::Bytes;
use keyspace::args::is_keyword;
use replication::state_machine::lock_off_worker;
use resp::Frame;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The Redis version slotraft answers as (clients gate features on it).
pub const REDIS_VERSION: &str = "7.2.4";

/// `INFO all` and `INFO everything`, in Redis's order; the default sections
/// are these but the per-command ones.
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// Sections only `all` and `everything` (or their own names) show.
const PER_COMMAND_SECTIONS: &[&str] = &["commandstats", "latencystats"];

fn default_sections() -> impl Iterator<Item = String> {
    ALL_SECTIONS
        .iter()
        .filter(|name| !PER_COMMAND_SECTIONS.contains(name))
        .map(|name| name.to_string())
}

pub fn info(shared: &Shared, arguments: &[Bytes]) -> Frame {
    let mut sections: Vec<String> = Vec::new();
    if arguments.len() == 1 {
        sections.extend(default_sections());
    }
    for argument in &arguments[1..] {
        if is_keyword(argument, "default") {
            sections.extend(default_sections());
        } else if is_keyword(argument, "all") || is_keyword(argument, "everything") {
            sections.extend(ALL_SECTIONS.iter().map(|name| name.to_string()));
        } else {
            sections.push(String::from_utf8_lossy(argument).to_ascii_lowercase());
        }
    }
    let mut seen = Vec::new();
    let mut parts = Vec::new();
    for section in sections {
        if seen.contains(&section) {
            continue;
        }
        if let Some(text) = render(shared, &section) {
            parts.push(text);
        }
        seen.push(section);
    }
    Frame::Verbatim(Bytes::from(format!("txt:{}", parts.join("\r\n"))))
}

fn human(bytes: usize) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (suffix, size) in units {
        if bytes as u64 >= size {
            return format!("{:.2}{}", bytes as f64 / size as f64, suffix);
        }
    }
    format!("{bytes}B")
}

fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14th, 15th.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

fn line(out: &mut String, name: &str, value: &dyn std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

fn render(shared: &Shared, section: &str) -> Option<String> {
    let mut out = String::new();
    let now_micros = clock::unix_micros();
    let now_ms = now_micros / 1000;
    let config = shared.config().clone();
    match section {
        "server" => {
            out.push_str("# Server\r\n");
            line(&mut out, "redis_version", &REDIS_VERSION);
            line(&mut out, "slotraft_version", &env!("CARGO_PKG_VERSION"));
            line(&mut out, "redis_git_sha1", &"00000000");
            line(&mut out, "redis_git_dirty", &0);
            line(&mut out, "redis_build_id", &"0");
            line(
                &mut out,
                "redis_mode",
                &if config.cluster_enabled() {
                    "cluster"
                } else {
                    "standalone"
                },
            );
            line(
                &mut out,
                "os",
                &format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            );
            line(&mut out, "arch_bits", &64);
            line(&mut out, "monotonic_clock", &"POSIX clock_gettime");
            line(&mut out, "multiplexing_api", &"epoll");
            line(&mut out, "process_id", &std::process::id());
            line(&mut out, "process_supervised", &"no");
            line(&mut out, "run_id", &shared.run_id);
            line(
                &mut out,
                "tcp_port",
                &shared.bound_port.load(Ordering::Relaxed),
            );
            line(&mut out, "server_time_usec", &now_micros);
            let uptime = now_ms.saturating_sub(shared.start_ms) / 1000;
            line(&mut out, "uptime_in_seconds", &uptime);
            line(&mut out, "uptime_in_days", &(uptime / 86400));
            line(&mut out, "hz", &config.hz());
            line(&mut out, "configured_hz", &config.hz());
            line(&mut out, "lru_clock", &((now_ms / 1000) & 0xFF_FFFF));
            let executable = std::env::current_exe()
                .map(|path| path.display().to_string())
                .unwrap_or_default();
            line(&mut out, "executable", &executable);
            line(&mut out, "config_file", &"");
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            line(&mut out, "connected_clients", &shared.clients.count());
            line(&mut out, "cluster_connections", &0);
            line(&mut out, "maxclients", &config.maxclients());
            line(&mut out, "client_recent_max_input_buffer", &0);
            line(&mut out, "client_recent_max_output_buffer", &0);
            line(
                &mut out,
                "blocked_clients",
                &(shared.blocking.count() + shared.local.pause.held()),
            );
            line(
                &mut out,
                "tracking_clients",
                &shared.local.tracking.counts().0,
            );
            line(&mut out, "pubsub_clients", &0);
            line(&mut out, "watching_clients", &0);
            line(&mut out, "clients_in_timeout_table", &0);
            line(&mut out, "total_watched_keys", &0);
            line(&mut out, "total_blocking_keys", &0);
            line(&mut out, "total_blocking_keys_on_nokey", &0);
        }
        "memory" => {
            let used = alloc::allocated_bytes();
            let peak = alloc::peak_bytes();
            let resident = alloc::resident_bytes();
            let maxmemory: usize = config
                .get("maxmemory")
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            out.push_str("# Memory\r\n");
            line(&mut out, "used_memory", &used);
            line(&mut out, "used_memory_human", &human(used));
            line(&mut out, "used_memory_rss", &resident);
            line(&mut out, "used_memory_rss_human", &human(resident));
            line(&mut out, "used_memory_peak", &peak);
            line(&mut out, "used_memory_peak_human", &human(peak));
            let percent = if peak > 0 {
                used as f64 * 100.0 / peak as f64
            } else {
                100.0
            };
            line(&mut out, "used_memory_peak_perc", &format!("{percent:.2}%"));
            line(&mut out, "used_memory_dataset", &used);
            line(&mut out, "maxmemory", &maxmemory);
            line(&mut out, "maxmemory_human", &human(maxmemory));
            line(
                &mut out,
                "maxmemory_policy",
                &config.get("maxmemory-policy").unwrap_or("noeviction"),
            );
            let ratio = if used > 0 {
                resident as f64 / used as f64
            } else {
                1.0
            };
            line(&mut out, "mem_fragmentation_ratio", &format!("{ratio:.2}"));
            line(&mut out, "mem_allocator", &"libc");
        }
        "persistence" => {
            let dirty = shared.store().keyspace.stats.dirty;
            // A standalone node's snapshot file; a replica's data is in its
            // Raft log (Redis's AOF in this role) and snapshots.
            let saved = shared
                .persistence
                .get()
                .map(|persistence| persistence.state());
            out.push_str("# Persistence\r\n");
            line(&mut out, "loading", &0);
            line(&mut out, "async_loading", &0);
            line(&mut out, "current_cow_peak", &0);
            line(
                &mut out,
                "rdb_changes_since_last_save",
                &dirty.saturating_sub(saved.map_or(0, |state| state.dirty_at_save)),
            );
            line(
                &mut out,
                "rdb_bgsave_in_progress",
                &u8::from(saved.is_some_and(|state| state.in_progress)),
            );
            let last_save_ms = match saved {
                Some(state) => state.last_save_ms,
                None => shared.last_raft_save_ms.load(Ordering::Relaxed),
            };
            line(&mut out, "rdb_last_save_time", &(last_save_ms / 1000));
            line(
                &mut out,
                "rdb_last_bgsave_status",
                &if saved.is_none_or(|state| state.last_ok) {
                    "ok"
                } else {
                    "err"
                },
            );
            line(&mut out, "rdb_saves", &saved.map_or(0, |state| state.saves));
            line(
                &mut out,
                "aof_enabled",
                &u8::from(shared.replica.is_some() || shared.cluster.is_some()),
            );
            line(&mut out, "aof_rewrite_in_progress", &0);
            line(&mut out, "aof_last_write_status", &"ok");
        }
        "stats" => {
            let stats = &shared.stats;
            let (mut hits, mut misses, mut expired, mut evicted) = (0, 0, 0, 0);
            for store in data_stores(shared) {
                let state = lock_off_worker(&store);
                hits += state.keyspace.stats.keyspace_hits;
                misses += state.keyspace.stats.keyspace_misses;
                expired += state.keyspace.expired_keys();
                evicted += state.keyspace.stats.evicted_keys;
            }
            out.push_str("# Stats\r\n");
            line(
                &mut out,
                "total_connections_received",
                &stats.total_connections_received.load(Ordering::Relaxed),
            );
            line(
                &mut out,
                "total_commands_processed",
                &stats.total_commands_processed.load(Ordering::Relaxed),
            );
            line(
                &mut out,
                "instantaneous_ops_per_sec",
                &stats.instantaneous_ops_per_second.load(Ordering::Relaxed),
            );
            line(
                &mut out,
                "total_net_input_bytes",
                &stats.net_input_bytes.load(Ordering::Relaxed),
            );
            line(
                &mut out,
                "total_net_output_bytes",
                &stats.net_output_bytes.load(Ordering::Relaxed),
            );
            line(
                &mut out,
                "rejected_connections",
                &stats.rejected_connections.load(Ordering::Relaxed),
            );
            line(&mut out, "expired_keys", &expired);
            line(&mut out, "evicted_keys", &evicted);
            line(&mut out, "keyspace_hits", &hits);
            line(&mut out, "keyspace_misses", &misses);
            line(
                &mut out,
                "pubsub_channels",
                &shared
                    .local
                    .pubsub
                    .active(crate::pubsub::Kind::Channel, None)
                    .len(),
            );
            line(
                &mut out,
                "pubsub_patterns",
                &shared.local.pubsub.pattern_count(),
            );
            line(&mut out, "pubsubshard_channels", &0);
            line(
                &mut out,
                "migrate_cached_sockets",
                &shared.local.migrate_sockets.count(),
            );
            let (_, keys, items, prefixes) = shared.local.tracking.counts();
            line(&mut out, "tracking_total_keys", &keys);
            line(&mut out, "tracking_total_items", &items);
            line(&mut out, "tracking_total_prefixes", &prefixes);
            line(
                &mut out,
                "total_error_replies",
                &shared.monitors.total_error_replies.load(Ordering::Relaxed),
            );
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            match &shared.replica {
                None => {
                    line(&mut out, "role", &"master");
                    line(&mut out, "connected_slaves", &0);
                    line(&mut out, "master_replid", &shared.run_id);
                    line(&mut out, "master_repl_offset", &0);
                }
                Some(replica) => raft_lines(&mut out, replica),
            }
        }
        "cpu" => {
            let (user, system) = cpu_seconds();
            out.push_str("# CPU\r\n");
            line(&mut out, "used_cpu_sys", &format!("{system:.6}"));
            line(&mut out, "used_cpu_user", &format!("{user:.6}"));
        }
        "modules" => out.push_str("# Modules\r\n"),
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            for (code, count) in shared.monitors.error_stats() {
                let code = String::from_utf8_lossy(&code).into_owned();
                line(
                    &mut out,
                    &format!("errorstat_{code}"),
                    &format!("count={count}"),
                );
            }
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for (name, stat) in shared.monitors.command_stats() {
                let per_call = if stat.calls == 0 {
                    0.0
                } else {
                    stat.usec as f64 / stat.calls as f64
                };
                line(
                    &mut out,
                    &format!("cmdstat_{name}"),
                    &format!(
                        "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                        stat.calls, stat.usec, stat.rejected, stat.failed
                    ),
                );
            }
        }
        "latencystats" => {
            out.push_str("# Latencystats\r\n");
            for (name, stat) in shared.monitors.command_stats() {
                if stat.calls == 0 {
                    continue;
                }
                line(
                    &mut out,
                    &format!("latency_percentiles_usec_{name}"),
                    &format!(
                        "p50={:.3},p99={:.3},p99.9={:.3}",
                        stat.percentile_us(50.0),
                        stat.percentile_us(99.0),
                        stat.percentile_us(99.9)
                    ),
                );
            }
        }
        "cluster" => {
            out.push_str("# Cluster\r\n");
            line(
                &mut out,
                "cluster_enabled",
                &u8::from(config.cluster_enabled()),
            );
            if let Some(node) = &shared.cluster {
                // The shards this node hosts a replica of, in id order.
                let hosted: Vec<String> = node
                    .local_shards()
                    .iter()
                    .map(|replica| replica.group.id.to_string())
                    .collect();
                line(&mut out, "slotraft_shards", &hosted.join(","));
                for replica in node.local_shards() {
                    line(
                        &mut out,
                        &format!("slotraft_shard_{}", replica.group.id),
                        &shard_progress(&replica),
                    );
                }
            }
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            // Per database: keys, expires, and the sampled TTL total and count.
            let mut totals: Vec<(usize, usize, u64, u64)> = Vec::new();
            for store in data_stores(shared) {
                let state = lock_off_worker(&store);
                for (index, db) in state.keyspace.dbs().iter().enumerate() {
                    if totals.len() <= index {
                        totals.resize(index + 1, (0, 0, 0, 0));
                    }
                    let (total_ttl, counted) = db.ttl_sample(now_ms, 100);
                    let entry = &mut totals[index];
                    entry.0 += db.len();
                    entry.1 += db.expires_len();
                    entry.2 += total_ttl;
                    entry.3 += counted;
                }
            }
            for (index, (keys, expires, total_ttl, counted)) in totals.into_iter().enumerate() {
                if keys == 0 {
                    continue;
                }
                let average = total_ttl.checked_div(counted).unwrap_or(0);
                let _ = write!(
                    out,
                    "db{index}:keys={keys},expires={expires},avg_ttl={average}\r\n"
                );
            }
        }
        _ => return None,
    }
    Some(out)
}

/// The keyspaces INFO reports on: the node's own store, or on a cluster node
/// the shards it leads (as a Redis master reports its slots' keys), or every
/// shard it hosts when it leads none (as a replica reports what it copies).
pub fn data_stores(shared: &Shared) -> Vec<replication::state_machine::SharedState> {
    let Some(node) = &shared.cluster else {
        return vec![shared.store.clone()];
    };
    let shards = node.local_shards();
    let led: Vec<_> = shards
        .iter()
        .filter(|replica| replica.group.raft.is_leader())
        .map(|replica| replica.group.state.clone())
        .collect();
    if led.is_empty() {
        shards
            .iter()
            .map(|replica| replica.group.state.clone())
            .collect()
    } else {
        led
    }
}

/// CONFIG RESETSTAT.
pub fn reset_stats(shared: &Shared) {
    shared.monitors.reset_stats();
    let stats = &shared.stats;
    for counter in [
        &stats.total_connections_received,
        &stats.total_commands_processed,
        &stats.rejected_connections,
        &stats.net_input_bytes,
        &stats.net_output_bytes,
    ] {
        counter.store(0, Ordering::Relaxed);
    }
    let mut stores = vec![shared.store.clone()];
    if let Some(node) = &shared.cluster {
        stores.extend(
            node.local_shards()
                .iter()
                .map(|replica| replica.group.state.clone()),
        );
    }
    for store in stores {
        let mut state = lock_off_worker(&store);
        state.keyspace.stats.keyspace_hits = 0;
        state.keyspace.stats.keyspace_misses = 0;
    }
}

/// One hosted shard's line in `INFO cluster`: this replica's role and its
/// group's progress, as `key=value` pairs (the form of Redis's `slave0:` lines).
fn shard_progress(replica: &crate::replica::Replica) -> String {
    let metrics = replica.group.metrics();
    let leader = metrics.current_leader;
    let role = if leader == Some(replica.node_id) {
        "leader"
    } else {
        "follower"
    };
    format!(
        "role={role},leader={},term={},last_log_index={},last_applied={},snapshot_index={}",
        leader.map(|id| id.to_string()).unwrap_or_default(),
        metrics.current_term,
        metrics.last_log_index.unwrap_or(0),
        metrics.last_applied.map(|id| id.index).unwrap_or(0),
        metrics.snapshot.map(|id| id.index).unwrap_or(0),
    )
}

/// The replication section of a Raft replica: its role and the group's progress.
fn raft_lines(out: &mut String, replica: &crate::replica::Replica) {
    let metrics = replica.group.metrics();
    let leader = metrics.current_leader;
    let is_leader = leader == Some(replica.node_id);
    line(out, "role", &if is_leader { "master" } else { "slave" });
    let applied = metrics.last_applied.map(|id| id.index).unwrap_or(0);
    if !is_leader {
        if let Some(node) = leader.and_then(|id| replica.members.get(&id)) {
            if let Some((host, port)) = node.resp.rsplit_once(':') {
                line(out, "master_host", &host);
                line(out, "master_port", &port);
            }
        }
        line(
            out,
            "master_link_status",
            &if leader.is_some() { "up" } else { "down" },
        );
    } else {
        line(
            out,
            "connected_slaves",
            &(replica.members.len().saturating_sub(1)),
        );
    }
    line(out, "master_repl_offset", &applied);
    line(out, "raft_node_id", &replica.node_id);
    line(
        out,
        "raft_leader_id",
        &leader.map(|id| id.to_string()).unwrap_or_default(),
    );
    line(out, "raft_term", &metrics.current_term);
    line(
        out,
        "raft_last_log_index",
        &metrics.last_log_index.unwrap_or(0),
    );
    line(out, "raft_last_applied", &applied);
    line(
        out,
        "raft_snapshot_index",
        &metrics.snapshot.map(|id| id.index).unwrap_or(0),
    );
    line(
        out,
        "raft_purged_index",
        &metrics.purged.map(|id| id.index).unwrap_or(0),
    );
    line(
        out,
        "raft_log_memory_bytes",
        &replica.group.log.memory_bytes(),
    );
}
