//! What the Redis CLUSTER commands show, computed from a [`Topology`]. Pure
//! data and text; the node turns it into RESP.
//!
//! Redis has one master per slot range and one role per node. Here every shard
//! is a Raft group and a node hosts replicas of many shards, so the shard is
//! the unit that plays a Redis master: CLUSTER SLOTS and CLUSTER SHARDS list
//! each shard with its current leader as the master and the other replicas as
//! its replicas. CLUSTER NODES needs one role per node: a node that leads at
//! least one shard (or hosts none) is a master serving the slots of the shards
//! it leads; any other node is a replica of the leader of the first shard it
//! hosts.

use std::fmt::Write;

use crate::topology::Topology;
use crate::SLOTS;

/// A node as CLUSTER SLOTS lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// The Redis node id.
    pub name: String,
}

/// One CLUSTER SLOTS entry: a contiguous range of one shard, leader first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotsRange {
    pub start: u16,
    pub end: u16,
    pub nodes: Vec<Endpoint>,
}

/// A node as CLUSTER SHARDS lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardNode {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// `master` for the shard's leader, `replica` for the others.
    pub role: &'static str,
    /// Always `online` for now: health is not tracked yet.
    pub health: &'static str,
}

/// One CLUSTER SHARDS entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardView {
    /// The shard's Raft group id (not part of Redis's reply).
    pub shard: u64,
    pub slots: Vec<(u16, u16)>,
    /// Leader first, then the other replicas in preference order.
    pub nodes: Vec<ShardNode>,
}

impl Topology {
    /// CLUSTER SLOTS: one entry per contiguous range of a shard, sorted by
    /// start; each lists the shard's leader, then its other replicas.
    pub fn slots_view(&self) -> Vec<SlotsRange> {
        self.slots
            .ranges()
            .iter()
            .map(|range| SlotsRange {
                start: range.start,
                end: range.end,
                nodes: self
                    .members_leader_first(range.shard)
                    .into_iter()
                    .filter_map(|id| self.nodes.get(&id))
                    .map(|node| Endpoint {
                        host: node.host.clone(),
                        port: node.port,
                        name: node.name.clone(),
                    })
                    .collect(),
            })
            .collect()
    }

    /// CLUSTER SHARDS: every shard in id order, including shards without slots.
    pub fn shards_view(&self) -> Vec<ShardView> {
        self.shards
            .keys()
            .map(|&shard| {
                let leader = self.leader_of(shard);
                ShardView {
                    shard,
                    slots: self.ranges_of(shard),
                    nodes: self
                        .members_leader_first(shard)
                        .into_iter()
                        .filter_map(|id| self.nodes.get(&id))
                        .map(|node| ShardNode {
                            name: node.name.clone(),
                            host: node.host.clone(),
                            port: node.port,
                            role: if Some(node.id) == leader {
                                "master"
                            } else {
                                "replica"
                            },
                            health: "online",
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// CLUSTER NODES as node `myself` answers it at `now_ms`: one line per node
    /// in node id order, each ending in `\n`. Every link is reported connected,
    /// every config epoch is the topology's epoch. As in Redis, only the
    /// `myself` line carries open-slot markers: `[slot->-target]` when it leads
    /// the source shard of a migration, `[slot-<-source]` when it leads the
    /// target shard, naming the other side's leader.
    pub fn nodes_text(&self, myself: u64, now_ms: u64) -> String {
        let mut text = String::new();
        for node in self.nodes.values() {
            let led = self.shards_led_by(node.id);
            let hosted = self.shards_hosted_by(node.id);
            let master_of = if led.is_empty() {
                hosted
                    .first()
                    .and_then(|&shard| self.leader_of(shard))
                    .and_then(|leader| self.nodes.get(&leader))
            } else {
                None
            };
            let role = if master_of.is_some() {
                "slave"
            } else {
                "master"
            };
            let flags = if node.id == myself {
                format!("myself,{role}")
            } else {
                role.to_string()
            };
            let master = master_of.map_or("-", |master| master.name.as_str());
            let pong = if node.id == myself { 0 } else { now_ms };
            let _ = write!(
                text,
                "{} {}:{}@{} {flags} {master} 0 {pong} {} connected",
                node.name, node.host, node.port, node.raft_port, self.epoch
            );
            let mut ranges: Vec<(u16, u16)> = led
                .iter()
                .flat_map(|&shard| self.ranges_of(shard))
                .collect();
            ranges.sort_unstable();
            for (start, end) in merge_ranges(ranges) {
                if start == end {
                    let _ = write!(text, " {start}");
                } else {
                    let _ = write!(text, " {start}-{end}");
                }
            }
            if node.id == myself {
                self.write_open_slots(&mut text, myself);
            }
            text.push('\n');
        }
        text
    }

    fn write_open_slots(&self, text: &mut String, myself: u64) {
        let name_of_leader = |shard: u64| {
            self.leader_of(shard)
                .and_then(|leader| self.nodes.get(&leader))
                .map_or("", |node| node.name.as_str())
        };
        for (slot, migration) in &self.migrations {
            if self.leader_of(migration.from) == Some(myself) {
                let _ = write!(text, " [{slot}->-{}]", name_of_leader(migration.to));
            } else if self.leader_of(migration.to) == Some(myself) {
                let _ = write!(text, " [{slot}-<-{}]", name_of_leader(migration.from));
            }
        }
    }

    /// CLUSTER INFO, lines ending in `\r\n` as Redis writes them. The state is
    /// `ok` when every slot is assigned; `cluster_size` counts the shards that
    /// own slots; the epochs are the topology's epoch (it is cluster-wide, so
    /// every node's own epoch equals it); message counters are zero.
    pub fn info_text(&self, _myself: u64) -> String {
        let assigned = self.slots.assigned();
        let state = if assigned == u32::from(SLOTS) {
            "ok"
        } else {
            "fail"
        };
        let size = self
            .shards
            .keys()
            .filter(|&&shard| !self.ranges_of(shard).is_empty())
            .count();
        let lines = [
            format!("cluster_state:{state}"),
            format!("cluster_slots_assigned:{assigned}"),
            format!("cluster_slots_ok:{assigned}"),
            "cluster_slots_pfail:0".to_string(),
            "cluster_slots_fail:0".to_string(),
            format!("cluster_known_nodes:{}", self.nodes.len()),
            format!("cluster_size:{size}"),
            format!("cluster_current_epoch:{}", self.epoch),
            format!("cluster_my_epoch:{}", self.epoch),
            "cluster_stats_messages_sent:0".to_string(),
            "cluster_stats_messages_received:0".to_string(),
            "total_cluster_links_buffer_limit_exceeded:0".to_string(),
        ];
        let mut text = String::new();
        for line in lines {
            text.push_str(&line);
            text.push_str("\r\n");
        }
        text
    }
}

/// Joins touching or overlapping ranges of a sorted list.
fn merge_ranges(ranges: Vec<(u16, u16)>) -> Vec<(u16, u16)> {
    let mut merged: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if u32::from(start) <= u32::from(last.1) + 1 => {
                last.1 = last.1.max(end);
            }
            _ => merged.push((start, end)),
        }
    }
    merged
}
