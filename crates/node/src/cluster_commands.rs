//! The node-answered CLUSTER subcommands (SLOTS, SHARDS, NODES, INFO, MYID,
//! MYSHARDID) and the cluster's own SLOTRAFT commands used by the admin CLI and
//! between nodes (NODE-INFO, BOOTSTRAP, PUT-LEADER, TOPOLOGY).

use crate::clock;
use crate::cluster_node::ClusterNode;
use bytes::Bytes;
use keyspace::args::parse_i64;
use keyspace::CommandSpec;
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
        _ => return None,
    };
    Some(reply)
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
