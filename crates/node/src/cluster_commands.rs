//! The node-answered CLUSTER subcommands (SLOTS, SHARDS, NODES, INFO, MYID,
//! MYSHARDID, REPLICAS, COUNT-FAILURE-REPORTS, LINKS, SAVECONFIG, HELP, and
//! the refusal of those that change the topology Redis's way) and the cluster's own SLOTRAFT commands used by the admin CLI and
//! between nodes (NODE-INFO, BOOTSTRAP, PUT-LEADER, TOPOLOGY).

use crate::clock;
use crate::cluster_node::ClusterNode;
use bytes::Bytes;
use keyspace::args::parse_i64;
use keyspace::CommandSpec;
use replication::Op;
use resp::Frame;

fn bulk(text: impl Into<String>) -> Frame {
    Frame::Bulk(Bytes::from(text.into()))
}

/// Answers `spec` when it is one of this module's commands on a cluster node;
/// `None` leaves it to the ordinary node commands.
pub async fn execute(node: &ClusterNode, spec: &CommandSpec, arguments: &[Bytes]) -> Option<Frame> {
    let reply = match spec.name {
        "cluster|myid" => bulk(node.identity.name.clone()),
        "cluster|myshardid" => {
            let topology = node.topology()?;
            match topology
                .shards
                .values()
                .find(|shard| shard.replicas.contains(&node.identity.id))
            {
                Some(shard) => bulk(shard.name.clone()),
                None => Frame::error("ERR this node hosts no shard"),
            }
        }
        "cluster|slots" => slots(node),
        "cluster|shards" => shards(node),
        "cluster|nodes" => match node.topology() {
            Some(topology) => Frame::Verbatim(Bytes::from(format!(
                "txt:{}",
                topology.nodes_text(node.identity.id, clock::unix_ms())
            ))),
            None => Frame::Verbatim(Bytes::from(format!(
                "txt:{} :0@0 myself,master - 0 0 0 connected\n",
                node.identity.name
            ))),
        },
        "cluster|info" => {
            let text = match node.topology() {
                Some(topology) => topology.info_text(node.identity.id),
                None => "cluster_state:fail\r\ncluster_slots_assigned:0\r\ncluster_slots_ok:0\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\ncluster_size:0\r\ncluster_current_epoch:0\r\ncluster_my_epoch:0\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n".to_string(),
            };
            Frame::Verbatim(Bytes::from(format!("txt:{text}")))
        }
        "cluster|replicas" | "cluster|slaves" => replicas(node, &arguments[2]),
        "cluster|count-failure-reports" => match node_line(node, &arguments[2]) {
            // Nodes are judged by Raft, not by gossiped failure reports.
            Ok(_) => Frame::Integer(0),
            Err(error) => error,
        },
        // The configuration lives in the metadata group's log: always saved.
        "cluster|saveconfig" => Frame::OK,
        // No cluster bus: nodes talk over one gRPC connection per peer.
        "cluster|links" => Frame::Array(Vec::new()),
        "cluster|help" => help(),
        "cluster|meet"
        | "cluster|forget"
        | "cluster|reset"
        | "cluster|flushslots"
        | "cluster|addslots"
        | "cluster|addslotsrange"
        | "cluster|delslots"
        | "cluster|delslotsrange"
        | "cluster|setslot"
        | "cluster|bumpepoch"
        | "cluster|set-config-epoch"
        | "cluster|replicate"
        | "cluster|failover" => Frame::error_owned(format!(
            "ERR CLUSTER {} is not supported: slotraft changes its topology through its \
                 metadata group (slotraft cluster add-node, del-node, reshard, rebalance) and \
                 fails over within a shard by Raft election",
            spec.name["cluster|".len()..].to_uppercase()
        )),
        "slotraft|node-info" => Frame::Array(vec![
            Frame::Integer(node.identity.id as i64),
            bulk(node.identity.name.clone()),
            Frame::Integer(node.raft_port().into()),
            bulk(node.zone()),
        ]),
        "slotraft|bootstrap" => match node.bootstrap(&arguments[2]).await {
            Ok(()) => Frame::OK,
            Err(error) => Frame::error_owned(format!("ERR {error}")),
        },
        "slotraft|put-leader" => {
            let mut numbers = [0u64; 3];
            for (slot, argument) in numbers.iter_mut().zip(&arguments[2..5]) {
                match parse_i64(argument).ok().and_then(|n| u64::try_from(n).ok()) {
                    Some(number) => *slot = number,
                    None => return Some(Frame::error(keyspace::errors::NOT_INTEGER)),
                }
            }
            let [shard, leader, term] = numbers;
            match node.record_leader(shard, leader, term).await {
                Ok(reply) => reply,
                Err(error) => Frame::error_owned(format!("ERR {error}")),
            }
        }
        "slotraft|topology" => match node.topology() {
            Some(topology) => Frame::Bulk(Bytes::from(topology.to_bytes())),
            None => Frame::Null,
        },
        "slotraft|migrate-begin" => {
            let (Some(slots), Some(to)) = (slot_list(&arguments[2]), number(&arguments[3])) else {
                return Some(Frame::error("ERR invalid slots or shard"));
            };
            node.change_topology(|topology| {
                slots
                    .iter()
                    .try_fold(topology.clone(), |next, slot| {
                        next.begin_migration(*slot, to)
                    })
                    .map(|next| renumbered(topology, next))
            })
            .await
        }
        "slotraft|migrate-finish" => {
            let Some(slots) = slot_list(&arguments[2]) else {
                return Some(Frame::error("ERR invalid slots"));
            };
            node.change_topology(|topology| {
                slots
                    .iter()
                    .try_fold(topology.clone(), |next, slot| next.finish_migration(*slot))
                    .map(|next| renumbered(topology, next))
            })
            .await
        }
        "slotraft|slot-state" | "slotraft|drop-slot" => {
            let (Some(shard), Some(slots)) = (number(&arguments[2]), slot_list(&arguments[3]))
            else {
                return Some(Frame::error("ERR invalid shard or slots"));
            };
            let op = if spec.name == "slotraft|drop-slot" {
                match arguments.get(4).map(|limit| number(limit)) {
                    None => Op::DropSlot { slots },
                    Some(Some(limit)) if limit > 0 => Op::DropSlotKeys {
                        slots,
                        limit: limit.min(u64::from(u32::MAX)) as u32,
                    },
                    Some(_) => return Some(Frame::error("ERR invalid key limit")),
                }
            } else {
                match number(&arguments[4]).filter(|state| *state <= 3) {
                    Some(state) => Op::SlotState {
                        slots,
                        state: state as u8,
                    },
                    None => return Some(Frame::error("ERR invalid slot state")),
                }
            };
            match node.leading_shard(shard) {
                Ok(replica) => match crate::cluster_node::propose_op(&replica, op).await {
                    Ok(reply) => reply,
                    Err(error) => Frame::error_owned(format!("ERR {error}")),
                },
                Err(error) => error,
            }
        }
        "slotraft|add-node" => {
            // id name host port raft-port zone ("" for none)
            let (Some(id), Some(port), Some(raft_port)) = (
                number(&arguments[2]),
                number(&arguments[5]).and_then(|port| u16::try_from(port).ok()),
                number(&arguments[6]).and_then(|port| u16::try_from(port).ok()),
            ) else {
                return Some(Frame::error("ERR invalid node id or port"));
            };
            let text = |argument: &Bytes| String::from_utf8_lossy(argument).into_owned();
            let info = cluster::NodeInfo {
                id,
                name: text(&arguments[3]),
                host: text(&arguments[4]),
                port,
                raft_port,
                zone: Some(text(&arguments[7])).filter(|zone| !zone.is_empty()),
            };
            node.change_topology(|topology| topology.add_node(info))
                .await
        }
        "slotraft|remove-node" => match number(&arguments[2]) {
            Some(id) => {
                node.change_topology(|topology| topology.remove_node(id))
                    .await
            }
            None => Frame::error("ERR invalid node id"),
        },
        "slotraft|add-shard" => {
            // id name replica-node-ids...
            let Some(id) = number(&arguments[2]) else {
                return Some(Frame::error("ERR invalid shard id"));
            };
            let name = String::from_utf8_lossy(&arguments[3]).into_owned();
            let mut replicas = Vec::new();
            for argument in &arguments[4..] {
                match number(argument) {
                    Some(replica) => replicas.push(replica),
                    None => return Some(Frame::error("ERR invalid node id")),
                }
            }
            let shard = cluster::Shard { id, name, replicas };
            node.change_topology(|topology| topology.add_shard(shard))
                .await
        }
        "slotraft|add-replica" => {
            let (Some(shard), Some(to)) = (number(&arguments[2]), number(&arguments[3])) else {
                return Some(Frame::error("ERR invalid shard or node id"));
            };
            node.change_topology(|topology| topology.add_replica(shard, to))
                .await
        }
        "slotraft|move-replica" => {
            let (Some(shard), Some(from), Some(to)) = (
                number(&arguments[2]),
                number(&arguments[3]),
                number(&arguments[4]),
            ) else {
                return Some(Frame::error("ERR invalid shard or node id"));
            };
            node.change_topology(|topology| topology.move_replica(shard, from, to))
                .await
        }
        "slotraft|replace-metadata-voter" => {
            let (Some(from), Some(to)) = (number(&arguments[2]), number(&arguments[3])) else {
                return Some(Frame::error("ERR invalid node id"));
            };
            node.change_topology(|topology| topology.replace_metadata_voter(from, to))
                .await
        }
        "slotraft|replace-voter" => {
            let (Some(group), Some(from), Some(to)) = (
                number(&arguments[2]),
                number(&arguments[3]),
                number(&arguments[4]),
            ) else {
                return Some(Frame::error("ERR invalid group or node id"));
            };
            node.replace_voter(group, from, to).await
        }
        "slotraft|voters" => {
            let Some(group) = number(&arguments[2]) else {
                return Some(Frame::error("ERR invalid group id"));
            };
            node.voters(group)
        }
        "slotraft|open-metadata" => match node.open_metadata_learner().await {
            Ok(()) => Frame::OK,
            Err(error) => Frame::error_owned(format!("ERR {error}")),
        },
        "slotraft|export" => export(node, arguments, false).await,
        "slotraft|export-changes" => export(node, arguments, true).await,
        "slotraft|import" => import(node, arguments).await,
        _ => return None,
    };
    Some(reply)
}

/// Slots as `a,b,c` (at most 16384, each below 16384).
fn slot_list(argument: &[u8]) -> Option<Vec<u16>> {
    let text = std::str::from_utf8(argument).ok()?;
    let slots: Vec<u16> = text
        .split(',')
        .map(|slot| slot.parse::<u16>().ok().filter(|slot| *slot < 16384))
        .collect::<Option<_>>()?;
    (!slots.is_empty() && slots.len() <= 16384).then_some(slots)
}

/// A topology changed by several single steps counts as one change: one
/// epoch after the current one.
fn renumbered(current: &cluster::Topology, mut next: cluster::Topology) -> cluster::Topology {
    next.epoch = current.epoch + 1;
    next
}

fn number(argument: &[u8]) -> Option<u64> {
    parse_i64(argument).ok().and_then(|n| u64::try_from(n).ok())
}

/// Bytes of DUMP payloads after which an EXPORT batch stops growing (it
/// always holds at least one key): the IMPORT that follows is one log entry.
const EXPORT_BYTES: usize = 4 << 20;

/// SLOTRAFT EXPORT shard slots after count: up to `count` keys of the slots
/// (a comma-separated list, walked in its order) after the key `after` (""
/// from the start), each as [key, expire-at-ms or -1, DUMP payload in
/// slotraft's own format], read
/// linearizably on the shard's leader; fewer once the payloads reach
/// [`EXPORT_BYTES`]. The reply is [the time the export read at (never
/// behind the shard's log time; keys expired by then are skipped), items];
/// no items means done.
///
/// SLOTRAFT EXPORT-CHANGES (`changes`), same arguments: only the keys
/// recorded as changed in the slots since they were tracked (SLOTRAFT
/// SLOT-STATE ... 3; see `keyspace::slot_changes`), a key no longer present
/// as [key, -2, nil] (to be deleted on the target). The reply is [time,
/// untracked, items], `untracked` being the listed slots whose changes are
/// unknown (not tracked here, or the record was given up): the admin copies
/// those whole instead. Slots already dropped here have nothing to send.
async fn export(node: &ClusterNode, arguments: &[Bytes], changes: bool) -> Frame {
    let (Some(shard), Some(slots), Some(count)) = (
        number(&arguments[2]),
        slot_list(&arguments[3]),
        number(&arguments[5]),
    ) else {
        return Frame::error("ERR invalid shard, slots or count");
    };
    let replica = match confirmed_leader(node, shard).await {
        Ok(replica) => replica,
        Err(error) => return error,
    };
    let count = count.min(10_000) as usize;
    let after = (!arguments[4].is_empty()).then(|| arguments[4].clone());
    // Resume in the slot of the last key exported, after that key.
    let mut position = match cursor_position(&slots, after.as_deref()) {
        Ok(position) => position,
        Err(error) => return error,
    };
    let state = replication::state_machine::lock(&replica.group.state);
    let keyspace = &state.keyspace;
    let now_ms = clock::unix_ms().max(state.log_time_ms);
    let dropped = |slot: u16| keyspace.slot_state(slot) == Some(keyspace::SlotState::Gone);
    // Up to `count` keys of `slot` after `cursor`; None: its changes are
    // unknown.
    let keys_of = |slot: u16, cursor: Option<&[u8]>, count: usize| {
        if !changes {
            Some(keyspace.keys_in_slot(0, slot, cursor, count))
        } else if dropped(slot) {
            Some(Vec::new())
        } else {
            keyspace.slot_changes(0, slot, cursor, count)
        }
    };
    let mut keys = Vec::new();
    let mut cursor = after;
    while position < slots.len() && keys.len() < count {
        let batch =
            keys_of(slots[position], cursor.as_deref(), count - keys.len()).unwrap_or_default();
        if batch.len() < count - keys.len() {
            position += 1;
            cursor = None;
        } else {
            cursor = batch.last().cloned();
        }
        keys.extend(batch);
    }
    let mut reply = vec![Frame::Integer(now_ms.min(i64::MAX as u64) as i64)];
    if changes {
        let untracked = slots
            .iter()
            .filter(|slot| keys_of(**slot, None, 0).is_none())
            .map(|slot| Frame::Integer(i64::from(*slot)))
            .collect();
        reply.push(Frame::Array(untracked));
    }
    reply.push(Frame::Array(export_items(keyspace, keys, now_ms)));
    Frame::Array(reply)
}

/// The shard's replica here, once its leadership is confirmed (a
/// linearizable read point); otherwise a redirect, which the admin retries,
/// to the leader this node knows of or to itself ("?").
async fn confirmed_leader(
    node: &ClusterNode,
    shard: u64,
) -> Result<std::sync::Arc<crate::replica::Replica>, Frame> {
    use openraft::raft::linearizable_read::LinearizerOption;
    let replica = node.leading_shard(shard)?;
    let check = replica
        .group
        .raft
        .ensure_linearizable(LinearizerOption::new(None, true));
    match tokio::time::timeout(std::time::Duration::from_secs(2), check).await {
        Ok(Ok(_)) => Ok(replica),
        // Not confirmed in time (a busy or partitioned leader, or one that
        // just lost its place).
        _ => Err(node
            .leading_shard(shard)
            .err()
            .unwrap_or_else(|| Frame::error("ERR NOTLEADER ?"))),
    }
}

/// Where in `slots` an export resumes: the slot of its cursor key (the first
/// slot without one).
fn cursor_position(slots: &[u16], after: Option<&[u8]>) -> Result<usize, Frame> {
    match after {
        Some(key) => {
            let slot = cluster::key_slot(key);
            slots
                .iter()
                .position(|candidate| *candidate == slot)
                .ok_or_else(|| Frame::error("ERR the cursor key is in none of the slots"))
        }
        None => Ok(0),
    }
}

/// The export items of `keys` read at `now_ms`: [key, expire-at-ms or -1,
/// payload in slotraft's own format] each, or [key, -2, nil] for a key not
/// (or no longer) present; the payloads stop once they reach
/// [`EXPORT_BYTES`].
fn export_items(keyspace: &keyspace::Keyspace, keys: Vec<Bytes>, now_ms: u64) -> Vec<Frame> {
    let mut items = Vec::with_capacity(keys.len());
    let mut bytes = 0;
    for key in keys {
        if bytes >= EXPORT_BYTES {
            break;
        }
        // slotraft's own format, which keeps everything a value holds
        // (Redis's stream form loses a consumer's active-time); RESTORE
        // reads it as it reads Redis's. Read without a lookup for writing,
        // which would record the key as changed in a tracked slot (see
        // `keyspace::slot_changes`).
        let found = keyspace.db_ref(0).peek(&key, now_ms).map(|entry| {
            (
                Bytes::from(keyspace::dump::serialize_value(&entry.value)),
                entry
                    .expire_at_ms()
                    .map_or(-1, |at| at.min(i64::MAX as u64) as i64),
            )
        });
        if let Some((dump, expire)) = found {
            bytes += key.len() + dump.len();
            items.push(Frame::Array(vec![
                Frame::Bulk(key),
                Frame::Integer(expire),
                Frame::Bulk(dump),
            ]));
        } else {
            // Absent, or expired but not yet reclaimed: nothing to move, but
            // the cursor must still pass it.
            items.push(Frame::Array(vec![
                Frame::Bulk(key),
                Frame::Integer(-2),
                Frame::Null,
            ]));
        }
    }
    items
}

/// SLOTRAFT IMPORT shard slots source-time key expire-at dump [key expire-at
/// dump ...]: restores the keys (replacing, with their absolute expiry;
/// an expire-at of -2 deletes the key instead: it is gone from the source)
/// through the shard's log on its leader, in an entry no older than
/// `source-time` (the time the export read at). Every key must belong to one
/// of the slots. With no keys it only moves the shard's log time up to
/// `source-time`: the admin's last IMPORT of a slot, so that keys the
/// export found expired are expired here too, however few were copied.
async fn import(node: &ClusterNode, arguments: &[Bytes]) -> Frame {
    let (Some(shard), Some(slots), Some(source_time)) = (
        number(&arguments[2]),
        slot_list(&arguments[3]),
        number(&arguments[4]),
    ) else {
        return Frame::error("ERR invalid shard, slots or source time");
    };
    let items = &arguments[5..];
    if !items.len().is_multiple_of(3) {
        return Frame::error("ERR wrong number of arguments for 'slotraft|import' command");
    }
    if items.is_empty() && source_time == 0 {
        return Frame::Integer(0);
    }
    let replica = match node.leading_shard(shard) {
        Ok(replica) => replica,
        Err(error) => return error,
    };
    let restore = keyspace::commands::lookup(b"restore").expect("RESTORE exists");
    let del = keyspace::commands::lookup(b"del").expect("DEL exists");
    let mut run = Vec::new();
    for item in items.chunks(3) {
        if !slots.contains(&cluster::key_slot(&item[0])) {
            return Frame::error("ERR a key belongs to none of the slots");
        }
        if &item[1][..] == b"-2" {
            // Gone from the source since an earlier copy.
            run.push((vec![Bytes::from_static(b"DEL"), item[0].clone()], del));
            continue;
        }
        let expire = parse_i64(&item[1]).unwrap_or(-1).max(0);
        run.push((
            vec![
                Bytes::from_static(b"RESTORE"),
                item[0].clone(),
                Bytes::from(expire.to_string()),
                item[2].clone(),
                Bytes::from_static(b"REPLACE"),
                Bytes::from_static(b"ABSTTL"),
            ],
            restore,
        ));
    }
    // The entry's time is at least the source's log time: the keys' scores
    // and expiries were made on that timeline, and time as they see it must
    // not go back (the target's own leaders' clocks may be behind).
    let replies = crate::replicated::propose_at(&replica, run, source_time).await;
    match replies
        .iter()
        .find(|reply| matches!(reply, Frame::Error(_)))
    {
        Some(error) => error.clone(),
        None => Frame::Integer(replies.len() as i64),
    }
}

/// The CLUSTER NODES line of the node named `name`, or Redis's error for an
/// unknown node.
fn node_line(node: &ClusterNode, name: &[u8]) -> Result<String, Frame> {
    let unknown = || {
        Frame::error_owned(format!(
            "ERR Unknown node {}",
            String::from_utf8_lossy(name)
        ))
    };
    let topology = node.topology().ok_or_else(unknown)?;
    topology
        .nodes_text(node.identity.id, clock::unix_ms())
        .lines()
        .find(|line| line.split(' ').next() == Some(&*String::from_utf8_lossy(name)))
        .map(str::to_string)
        .ok_or_else(unknown)
}

/// CLUSTER REPLICAS (SLAVES): the CLUSTER NODES lines of the nodes that
/// name `name` as their master.
fn replicas(node: &ClusterNode, name: &[u8]) -> Frame {
    let line = match node_line(node, name) {
        Ok(line) => line,
        Err(error) => return error,
    };
    let flags = line.split(' ').nth(2).unwrap_or_default();
    if !flags.split(',').any(|flag| flag == "master") {
        return Frame::error("ERR The specified node is not a master");
    }
    let Some(topology) = node.topology() else {
        return Frame::Array(Vec::new());
    };
    let name = String::from_utf8_lossy(name);
    Frame::Array(
        topology
            .nodes_text(node.identity.id, clock::unix_ms())
            .lines()
            .filter(|line| line.split(' ').nth(3) == Some(&*name))
            .map(|line| bulk(line.to_string()))
            .collect(),
    )
}

/// CLUSTER HELP: the subcommands a slotraft node answers.
fn help() -> Frame {
    const LINES: &[&str] = &[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNT-FAILURE-REPORTS <node-id>",
        "    Return the number of failure reports for <node-id> (always 0: Raft judges failures).",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "LINKS",
        "    Return information about all network links between this node and its peers",
        "    (none: nodes talk over gRPC, not a cluster bus).",
        "MYID",
        "    Return the node id.",
        "MYSHARDID",
        "    Return the node's shard id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas.",
        "SAVECONFIG",
        "    Force saving cluster configuration on disk (it is always saved).",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "SLAVES <node-id>",
        "    Return <node-id> replicas.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "The topology changes with `slotraft cluster` (add-node, del-node, reshard,",
        "rebalance), not with MEET, FORGET, ADDSLOTS, SETSLOT or FAILOVER.",
        "HELP",
        "    Print this help.",
    ];
    Frame::Array(
        LINES
            .iter()
            .map(|line| Frame::Simple(Bytes::from_static(line.as_bytes())))
            .collect(),
    )
}

fn slots(node: &ClusterNode) -> Frame {
    let Some(topology) = node.topology() else {
        return Frame::Array(vec![]);
    };
    let topology = with_live_leaders(node, &topology);
    Frame::Array(
        topology
            .slots_view()
            .into_iter()
            .map(|range| {
                let mut item = vec![
                    Frame::Integer(range.start.into()),
                    Frame::Integer(range.end.into()),
                ];
                item.extend(range.nodes.into_iter().map(|endpoint| {
                    Frame::Array(vec![
                        bulk(endpoint.host),
                        Frame::Integer(endpoint.port.into()),
                        bulk(endpoint.name),
                        Frame::Map(vec![]),
                    ])
                }));
                Frame::Array(item)
            })
            .collect(),
    )
}

fn shards(node: &ClusterNode) -> Frame {
    let Some(topology) = node.topology() else {
        return Frame::Array(vec![]);
    };
    let topology = with_live_leaders(node, &topology);
    Frame::Array(
        topology
            .shards_view()
            .into_iter()
            .map(|shard| {
                let slots = shard
                    .slots
                    .iter()
                    .flat_map(|&(start, end)| {
                        [Frame::Integer(start.into()), Frame::Integer(end.into())]
                    })
                    .collect();
                let nodes = shard
                    .nodes
                    .into_iter()
                    .map(|member| {
                        Frame::Map(vec![
                            (bulk("id"), bulk(member.name)),
                            (bulk("port"), Frame::Integer(member.port.into())),
                            (bulk("ip"), bulk(member.host.clone())),
                            (bulk("endpoint"), bulk(member.host)),
                            (bulk("role"), bulk(member.role)),
                            (bulk("replication-offset"), Frame::Integer(0)),
                            (bulk("health"), bulk(member.health)),
                        ])
                    })
                    .collect();
                Frame::Map(vec![
                    (bulk("slots"), Frame::Array(slots)),
                    (bulk("nodes"), Frame::Array(nodes)),
                ])
            })
            .collect(),
    )
}

/// The topology with each locally hosted shard's leader as this node's replica
/// sees it right now (fresher than the metadata's record after a failover).
fn with_live_leaders(node: &ClusterNode, topology: &cluster::Topology) -> cluster::Topology {
    let mut topology = topology.clone();
    for replica in node.local_shards() {
        let metrics = replica.group.metrics();
        if let Some(leader) = metrics.current_leader {
            if let Ok(next) = topology.with_leader(replica.group.id, leader, metrics.current_term) {
                topology = next;
            }
        }
    }
    topology
}
