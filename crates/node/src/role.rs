//! ROLE, WAIT and WAITAOF: Redis's replication questions, answered from the
//! Raft groups a node hosts.
//!
//! A replica that leads its group is a master whose replicas are the other
//! members, each at the log index it is known to hold; a follower is a
//! replica of the leader. A cluster node that leads any shard is a master
//! (its replicas: the other members of the shards it leads); one that leads
//! none is a replica of its first shard's leader, as CLUSTER NODES shows it.
//!
//! WAIT's meaning carries over: how many replicas hold this connection's
//! writes. Every acknowledged write is already on a majority, so WAIT returns
//! at once with at least that many; a higher count waits for followers to
//! catch up. Followers append to their logs with fsync before they answer,
//! so WAITAOF counts the same replicas, and the local copy is on disk when
//! the log is fsynced (`raft-fsync yes`).

use crate::replica::Replica;
use crate::server::Shared;
use bytes::Bytes;
use keyspace::args;
use resp::Frame;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How often a waiting WAIT looks at its group's progress again.
const WAIT_POLL: Duration = Duration::from_millis(5);

/// The replicas whose roles this node answers for.
fn hosted(shared: &Shared) -> Vec<Arc<Replica>> {
    match (&shared.cluster, &shared.replica) {
        (Some(node), _) => node.local_shards(),
        (None, Some(replica)) => vec![replica.clone()],
        (None, None) => Vec::new(),
    }
}

fn bulk(text: impl Into<String>) -> Frame {
    Frame::Bulk(Bytes::from(text.into()))
}

fn leads(replica: &Replica) -> bool {
    replica.group.metrics().current_leader == Some(replica.node_id)
}

/// The client address of `member` of `replica`'s group, split in host and port.
fn address(replica: &Replica, member: u64) -> Option<(String, u16)> {
    let metrics = replica.group.metrics();
    let from_membership = metrics
        .membership_config
        .membership()
        .get_node(&member)
        .map(|node| node.resp.clone());
    let resp =
        from_membership.or_else(|| replica.members.get(&member).map(|node| node.resp.clone()))?;
    let (host, port) = resp.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// The log index each other member of a group this replica leads is known
/// to hold.
fn matched(replica: &Replica) -> BTreeMap<u64, u64> {
    let metrics = replica.group.metrics();
    let Some(replication) = metrics.replication.as_ref() else {
        return BTreeMap::new();
    };
    replication
        .iter()
        .filter(|(member, _)| **member != replica.node_id)
        .map(|(member, log_id)| (*member, log_id.as_ref().map_or(0, |id| id.index)))
        .collect()
}

pub fn role(shared: &Shared) -> Frame {
    let replicas = hosted(shared);
    let led: Vec<&Arc<Replica>> = replicas.iter().filter(|replica| leads(replica)).collect();
    if replicas.is_empty() || !led.is_empty() {
        let mut offset = 0;
        // Per member node: its address and the lowest index it holds of the
        // groups this node leads.
        let mut followers: BTreeMap<u64, (String, u16, u64)> = BTreeMap::new();
        for replica in &led {
            let metrics = replica.group.metrics();
            offset = offset.max(metrics.last_applied.map_or(0, |id| id.index));
            for (member, index) in matched(replica) {
                let Some((host, port)) = address(replica, member) else {
                    continue;
                };
                followers
                    .entry(member)
                    .and_modify(|known| known.2 = known.2.min(index))
                    .or_insert((host, port, index));
            }
        }
        return Frame::Array(vec![
            bulk("master"),
            Frame::Integer(offset as i64),
            Frame::Array(
                followers
                    .into_values()
                    .map(|(host, port, index)| {
                        Frame::Array(vec![
                            bulk(host),
                            bulk(port.to_string()),
                            bulk(index.to_string()),
                        ])
                    })
                    .collect(),
            ),
        ]);
    }
    let first = &replicas[0];
    let metrics = first.group.metrics();
    let applied = metrics.last_applied.map_or(0, |id| id.index);
    let leader = metrics
        .current_leader
        .and_then(|leader| address(first, leader));
    let (host, port, state) = match leader {
        Some((host, port)) => (host, i64::from(port), "connected"),
        None => (String::from("?"), -1, "connecting"),
    };
    Frame::Array(vec![
        bulk("slave"),
        bulk(host),
        Frame::Integer(port),
        bulk(state),
        Frame::Integer(applied as i64),
    ])
}

/// WAIT's and WAITAOF's arguments: a count (negative means 0) and a timeout
/// in milliseconds (0 waits forever).
fn count_argument(argument: &[u8]) -> Result<u64, Frame> {
    Ok(args::parse_i64(argument)?.max(0) as u64)
}

/// WAIT's (numreplicas, timeout) or WAITAOF's (numlocal, numreplicas,
/// timeout), as (local, wanted, timeout); `local` is 0 for WAIT.
fn wait_arguments(aof: bool, arguments: &[Bytes]) -> Result<(u64, u64, Option<Duration>), Frame> {
    let local = if aof {
        count_argument(&arguments[1])?
    } else {
        0
    };
    let wanted = count_argument(&arguments[arguments.len() - 2])?;
    let timeout = timeout_argument(&arguments[arguments.len() - 1])?;
    Ok((local, wanted, timeout))
}

fn timeout_argument(argument: &[u8]) -> Result<Option<Duration>, Frame> {
    match args::parse_i64(argument) {
        Ok(0) => Ok(None),
        Ok(milliseconds) if milliseconds > 0 => {
            Ok(Some(Duration::from_millis(milliseconds as u64)))
        }
        Ok(_) => Err(Frame::error("ERR timeout is negative")),
        Err(_) => Err(Frame::error(
            "ERR timeout is not an integer or out of range",
        )),
    }
}

/// The replicas of the groups this node leads that hold everything applied
/// so far (the writes of any client that was answered); None when it leads
/// no group.
fn caught_up(shared: &Shared) -> Option<u64> {
    let led: Vec<Arc<Replica>> = hosted(shared)
        .into_iter()
        .filter(|replica| leads(replica))
        .collect();
    if led.is_empty() {
        return None;
    }
    let mut fewest = u64::MAX;
    for replica in &led {
        let applied = replica
            .group
            .metrics()
            .last_applied
            .map_or(0, |id| id.index);
        let holding = matched(replica)
            .values()
            .filter(|&&index| index >= applied)
            .count() as u64;
        fewest = fewest.min(holding);
    }
    Some(fewest)
}

/// Whether this node's Raft log is fsynced before writes are acknowledged.
fn fsyncs(shared: &Shared) -> bool {
    shared.config().get("raft-fsync") != Some("no")
}

/// WAIT numreplicas timeout / WAITAOF numlocal numreplicas timeout, on a node
/// that hosts Raft groups (None on a standalone node, see [`standalone_wait`]).
pub async fn wait(shared: &Shared, name: &str, arguments: &[Bytes]) -> Option<Frame> {
    if shared.replica.is_none() && shared.cluster.is_none() {
        return None;
    }
    let aof = name == "waitaof";
    let parsed = wait_arguments(aof, arguments);
    let (local, wanted, timeout) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return Some(error),
    };
    let local_synced = u64::from(fsyncs(shared));
    if aof && local > 0 && local_synced == 0 {
        return Some(Frame::error(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ));
    }
    let Some(mut holding) = caught_up(shared) else {
        // A replica that leads nothing: as on a Redis replica.
        return Some(Frame::error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    };
    let deadline = timeout.map(|timeout| tokio::time::Instant::now() + timeout);
    while holding < wanted {
        if deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline) {
            break;
        }
        tokio::time::sleep(WAIT_POLL).await;
        holding = caught_up(shared).unwrap_or(0);
    }
    Some(if aof {
        Frame::Array(vec![
            Frame::Integer(local_synced as i64),
            Frame::Integer(holding as i64),
        ])
    } else {
        Frame::Integer(holding as i64)
    })
}

/// A standalone node has no replicas: WAIT answers 0 (after its timeout when
/// it asks for more, as Redis without replicas does: `Err` carries the wait),
/// WAITAOF refuses a local count, as Redis without an AOF does.
pub fn standalone_wait(
    name: &str,
    arguments: &[Bytes],
) -> Result<Frame, (Option<Duration>, Frame)> {
    let aof = name == "waitaof";
    let parsed = wait_arguments(aof, arguments);
    let (local, wanted, timeout) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return Ok(error),
    };
    if aof && local > 0 {
        return Ok(Frame::error(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ));
    }
    let reply = if aof {
        Frame::Array(vec![Frame::Integer(0), Frame::Integer(0)])
    } else {
        Frame::Integer(0)
    };
    if wanted == 0 {
        Ok(reply)
    } else {
        Err((timeout, reply))
    }
}

/// How long SAVE waits for the snapshots of a node's groups.
const SAVE_LIMIT: Duration = Duration::from_secs(60);

/// SAVE, BGSAVE, LASTSAVE and BGREWRITEAOF where they need no waiting: a
/// standalone node's snapshot file (see `persist`), a replica's Raft
/// snapshots (SAVE on a replica is [`raft_save`]).
pub fn persistence(shared: &Shared, name: &str, arguments: &[Bytes]) -> Frame {
    let on_raft = shared.persistence.get().is_none();
    match name {
        "lastsave" => {
            let last_ms = match shared.persistence.get() {
                Some(persistence) => persistence.state().last_save_ms,
                None => shared
                    .last_raft_save_ms
                    .load(std::sync::atomic::Ordering::Relaxed),
            };
            Frame::Integer((last_ms / 1000) as i64)
        }
        // On a replica the connection runs SAVE itself (`raft_save`).
        "save" => match tokio::task::block_in_place(|| crate::persist::save(shared)) {
            Ok(()) => Frame::OK,
            Err(error) => Frame::error_owned(error),
        },
        "bgsave" => {
            let schedule = match &arguments[1..] {
                [] => false,
                [word] if args::is_keyword(word, "schedule") => true,
                _ => return Frame::error(keyspace::errors::SYNTAX),
            };
            if on_raft {
                start_raft_snapshots(shared);
                return Frame::simple("Background saving started");
            }
            match crate::persist::bgsave(shared) {
                Ok(()) => Frame::simple("Background saving started"),
                Err(crate::persist::IN_PROGRESS) if schedule => {
                    Frame::simple("Background saving scheduled")
                }
                Err(error) => Frame::error(error),
            }
        }
        // The log is the append-only file: it is compacted by snapshots.
        _ => {
            if on_raft {
                start_raft_snapshots(shared);
            }
            Frame::simple("Background append only file rewriting started")
        }
    }
}

/// Asks every group this node hosts for a snapshot; LASTSAVE moves once they
/// are all taken.
fn start_raft_snapshots(shared: &Shared) {
    let replicas = hosted(shared);
    let last_save = shared.last_raft_save_ms.clone();
    tokio::spawn(async move {
        if snapshot_all(&replicas).await.is_ok() {
            last_save.store(
                crate::clock::unix_ms(),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    });
}

/// Snapshots every group in `replicas` up to what each had applied, and
/// waits until they are built.
async fn snapshot_all(replicas: &[Arc<Replica>]) -> Result<(), String> {
    let mut targets = Vec::new();
    for replica in replicas {
        let applied = replica
            .group
            .metrics()
            .last_applied
            .map_or(0, |id| id.index);
        if let Err(error) = replica.group.raft.trigger().snapshot().await {
            return Err(format!(
                "ERR snapshot of shard {}: {error}",
                replica.group.id
            ));
        }
        targets.push((replica.clone(), applied));
    }
    let deadline = tokio::time::Instant::now() + SAVE_LIMIT;
    for (replica, applied) in targets {
        loop {
            let taken = replica.group.metrics().snapshot.map_or(0, |id| id.index);
            if taken >= applied {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "ERR snapshot of shard {} not taken within {}s",
                    replica.group.id,
                    SAVE_LIMIT.as_secs()
                ));
            }
            tokio::time::sleep(WAIT_POLL * 4).await;
        }
    }
    Ok(())
}

/// SAVE on a node that hosts Raft groups: a snapshot of each, taken before
/// the reply.
pub async fn raft_save(shared: &Shared) -> Frame {
    match snapshot_all(&hosted(shared)).await {
        Ok(()) => {
            shared.last_raft_save_ms.store(
                crate::clock::unix_ms(),
                std::sync::atomic::Ordering::Relaxed,
            );
            Frame::OK
        }
        Err(error) => Frame::error_owned(error),
    }
}

/// REPLICAOF / SLAVEOF. Roles are decided by Raft groups, so only `NO ONE`
/// on a node that is already a master is accepted.
pub fn replicaof(shared: &Shared, arguments: &[Bytes]) -> Frame {
    if shared.cluster.is_some() {
        return Frame::error("ERR REPLICAOF not allowed in cluster mode.");
    }
    let no_one = args::is_keyword(&arguments[1], "no") && args::is_keyword(&arguments[2], "one");
    if !no_one && args::parse_i64(&arguments[2]).is_err() {
        return Frame::error("ERR Invalid master port");
    }
    match (&shared.replica, no_one) {
        (None, true) => Frame::OK,
        (Some(replica), true) if leads(replica) => Frame::OK,
        _ => Frame::error(
            "ERR roles here are decided by Raft: a node replicates as a member of a group (--group-members), not from a Redis master",
        ),
    }
}

const MODULE_REFUSED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// MODULE: no module is loaded, and none can be.
pub fn module(name: &str) -> Frame {
    match name {
        "module|list" => Frame::Array(Vec::new()),
        "module|help" => Frame::Array(
            [
                "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LIST",
                "    Return a list of loaded modules.",
                "LOAD <path> [<arg> ...]",
                "    Load a module library from <path>, passing to it any optional arguments.",
                "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
                "    Load a module library from <path>, while passing it module configurations and optional arguments.",
                "UNLOAD <name>",
                "    Unload a module.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|line| Frame::Simple(Bytes::copy_from_slice(line.as_bytes())))
            .collect(),
        ),
        _ => Frame::error(MODULE_REFUSED),
    }
}

/// What FAILOVER may do here: hand over leadership of this node's group
/// (its target and timeout), or the refusal to answer.
pub fn failover_check(shared: &Shared, arguments: &[Bytes]) -> Result<FailoverOptions, Frame> {
    if shared.cluster.is_some() {
        return Err(Frame::error("ERR FAILOVER not allowed in cluster mode."));
    }
    let options = failover_options(arguments)?;
    if arguments[1..]
        .iter()
        .any(|word| args::is_keyword(word, "abort"))
    {
        return Err(Frame::error("ERR No failover in progress."));
    }
    match &shared.replica {
        None => Err(Frame::error("ERR FAILOVER requires connected replicas.")),
        Some(replica) if !leads(replica) => Err(Frame::error(
            "ERR FAILOVER is not valid when server is a replica.",
        )),
        Some(_) => Ok(options),
    }
}

/// FAILOVER's target (host, port) and timeout.
type FailoverOptions = (Option<(String, u16)>, Option<Duration>);

/// FAILOVER's target (host, port) and timeout.
#[allow(clippy::type_complexity)]
fn failover_options(
    arguments: &[Bytes],
) -> Result<(Option<(String, u16)>, Option<Duration>), Frame> {
    let mut target = None;
    let mut timeout = None;
    let mut index = 1;
    while index < arguments.len() {
        let word = &arguments[index];
        if args::is_keyword(word, "to") && index + 2 < arguments.len() {
            let host = String::from_utf8_lossy(&arguments[index + 1]).into_owned();
            let port = args::parse_i64(&arguments[index + 2])
                .ok()
                .and_then(|port| u16::try_from(port).ok())
                .ok_or_else(|| Frame::error("ERR value is not an integer or out of range"))?;
            target = Some((host, port));
            index += 3;
        } else if args::is_keyword(word, "timeout") && index + 1 < arguments.len() {
            match args::parse_i64(&arguments[index + 1]) {
                Ok(milliseconds) if milliseconds > 0 => {
                    timeout = Some(Duration::from_millis(milliseconds as u64))
                }
                Ok(_) => return Err(Frame::error("ERR FAILOVER timeout must be greater than 0")),
                Err(error) => return Err(error),
            }
            index += 2;
        } else if args::is_keyword(word, "force") || args::is_keyword(word, "abort") {
            index += 1;
        } else {
            return Err(Frame::error(keyspace::errors::SYNTAX));
        }
    }
    Ok((target, timeout))
}

/// FAILOVER on a group's leader: hands leadership to the named member, or to
/// the one holding most of the log, and answers once it has moved.
pub async fn failover(shared: &Shared, arguments: &[Bytes]) -> Frame {
    let (target, timeout) = match failover_check(shared, arguments) {
        Ok(options) => options,
        Err(refusal) => return refusal,
    };
    let Some(replica) = &shared.replica else {
        return Frame::error("ERR FAILOVER requires connected replicas.");
    };
    let held = matched(replica);
    let chosen = match target {
        Some((host, port)) => held.keys().copied().find(|member| {
            address(replica, *member).is_some_and(|(known_host, known_port)| {
                known_port == port && (known_host == host || host == "localhost")
            })
        }),
        None => held
            .iter()
            .max_by_key(|(member, index)| (**index, std::cmp::Reverse(**member)))
            .map(|(member, _)| *member),
    };
    let Some(chosen) = chosen else {
        return Frame::error("ERR FAILOVER target HOST and PORT is not a replica.");
    };
    replica.group.transfer_leadership(chosen).await;
    let deadline = tokio::time::Instant::now() + timeout.unwrap_or(Duration::from_secs(10));
    while tokio::time::Instant::now() < deadline {
        if replica.group.metrics().current_leader == Some(chosen) {
            return Frame::OK;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
    Frame::error("ERR FAILOVER did not complete before its timeout")
}

/// REPLCONF: the options a replica announces during Redis's handshake are
/// accepted and checked as Redis checks them (this node takes no Redis
/// replicas: SYNC and PSYNC refuse). ACK and GETACK, which only a link to a
/// master or a replica sends, get no reply, as from Redis to a plain client.
pub fn replconf(arguments: &[Bytes]) -> Option<Frame> {
    if arguments.len().is_multiple_of(2) {
        return Some(Frame::error(keyspace::errors::SYNTAX));
    }
    for pair in arguments[1..].chunks(2) {
        let option = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        match option.as_str() {
            "listening-port" => {
                if let Err(error) = args::parse_i64(&pair[1]) {
                    return Some(error);
                }
            }
            "ip-address" => {
                // Redis's NET_HOST_STR_LEN.
                if pair[1].len() >= 256 {
                    return Some(Frame::error_owned(format!(
                        "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                        pair[1].len()
                    )));
                }
            }
            "capa" | "rdb-filter-only" => {}
            "rdb-only" => match args::parse_i64(&pair[1]) {
                Ok(0 | 1) => {}
                Ok(_) => {
                    return Some(Frame::error(
                        "ERR value is out of range, value must between 0 and 1",
                    ))
                }
                Err(error) => return Some(error),
            },
            "ack" | "getack" => return None,
            _ => {
                return Some(Frame::error_owned(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(&pair[0])
                )))
            }
        }
    }
    Some(Frame::OK)
}
