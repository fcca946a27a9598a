//! The cluster topology: nodes, shards (one Raft group each), slot ownership,
//! known leaders, metadata voters and slot migrations, with the config epoch
//! that versions it.
//!
//! Everything here is plain data and pure functions: the metadata group stores a
//! `Topology`, nodes read it, and the admin CLI computes new ones with the update
//! helpers. Maps are `BTreeMap`s so that iteration order, and therefore the
//! encoded bytes, are a function of the contents alone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::SLOTS;

/// Leading byte of the encoded form; bumped when the layout changes.
const FORMAT_VERSION: u8 = 1;

/// Raft group id reserved for the metadata group; no shard may use it.
pub const METADATA_GROUP: u64 = 0;

/// One server process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Raft node id, non-zero, unique in the cluster.
    pub id: u64,
    /// The Redis node id: 40 lowercase hex characters.
    pub name: String,
    /// Address clients and peers use (an IP or a host name).
    pub host: String,
    /// RESP port.
    pub port: u16,
    /// Node-to-node (Raft) port; shown as the cluster bus port.
    pub raft_port: u16,
    /// Failure-domain label such as `us-east-1a`.
    pub zone: Option<String>,
}

/// A replica set: one Raft group that owns some slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// The Raft group id; never [`METADATA_GROUP`].
    pub id: u64,
    /// Redis 7's shard id: 40 lowercase hex characters.
    pub name: String,
    /// Node ids of the replicas, most preferred leader first.
    pub replicas: Vec<u64>,
}

/// The last leader reported for a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leader {
    pub node: u64,
    pub term: u64,
}

impl Leader {
    /// True when this leadership came after `other`: a later term, or the
    /// same term and a higher node id (a vote for a higher node id in one
    /// term supersedes a vote for a lower one).
    pub fn succeeds(&self, other: &Leader) -> bool {
        (self.term, self.node) > (other.term, other.node)
    }
}

/// A slot moving from one shard to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    pub from: u64,
    pub to: u64,
}

/// A run of slots `start..=end` owned by one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub shard: u64,
}

/// Slot ownership as sorted, non-overlapping ranges. Adjacent ranges of the same
/// shard are always merged, so equal ownership has one representation.
/// Unassigned slots are simply not covered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotMap {
    ranges: Vec<SlotRange>,
}

impl SlotMap {
    /// The shard owning `slot`, in O(log ranges).
    pub fn owner(&self, slot: u16) -> Option<u64> {
        let index = self.ranges.partition_point(|range| range.end < slot);
        self.ranges
            .get(index)
            .filter(|range| range.start <= slot)
            .map(|range| range.shard)
    }

    /// All ranges, sorted by start.
    pub fn ranges(&self) -> &[SlotRange] {
        &self.ranges
    }

    /// The ranges `shard` owns, sorted.
    pub fn ranges_of(&self, shard: u64) -> Vec<(u16, u16)> {
        self.ranges
            .iter()
            .filter(|range| range.shard == shard)
            .map(|range| (range.start, range.end))
            .collect()
    }

    /// Number of slots owned by some shard.
    pub fn assigned(&self) -> u32 {
        self.ranges
            .iter()
            .map(|range| u32::from(range.end - range.start) + 1)
            .sum()
    }

    /// Gives `start..=end` to `shard`, taking it from whoever owned it.
    /// The caller checks `start <= end < SLOTS`.
    pub(crate) fn assign(&mut self, start: u16, end: u16, shard: u64) {
        let mut ranges = Vec::with_capacity(self.ranges.len() + 2);
        for range in &self.ranges {
            if range.end < start || range.start > end {
                ranges.push(*range);
                continue;
            }
            if range.start < start {
                ranges.push(SlotRange {
                    start: range.start,
                    end: start - 1,
                    shard: range.shard,
                });
            }
            if range.end > end {
                ranges.push(SlotRange {
                    start: end + 1,
                    end: range.end,
                    shard: range.shard,
                });
            }
        }
        ranges.push(SlotRange { start, end, shard });
        ranges.sort_by_key(|range| range.start);
        self.ranges = merge_adjacent(ranges);
    }

    /// Checks the representation: sorted, in bounds, non-overlapping, merged.
    fn check(&self) -> Result<(), String> {
        let mut previous: Option<&SlotRange> = None;
        for range in &self.ranges {
            if range.start > range.end || range.end >= SLOTS {
                return Err(format!(
                    "invalid slot range {}-{} (slots are 0-{})",
                    range.start,
                    range.end,
                    SLOTS - 1
                ));
            }
            if let Some(previous) = previous {
                if range.start <= previous.end {
                    return Err(format!(
                        "slot ranges {}-{} and {}-{} overlap or are out of order",
                        previous.start, previous.end, range.start, range.end
                    ));
                }
                if range.start == previous.end + 1 && range.shard == previous.shard {
                    return Err(format!(
                        "slot ranges {}-{} and {}-{} of shard {} are not merged",
                        previous.start, previous.end, range.start, range.end, range.shard
                    ));
                }
            }
            previous = Some(range);
        }
        Ok(())
    }
}

fn merge_adjacent(ranges: Vec<SlotRange>) -> Vec<SlotRange> {
    let mut merged: Vec<SlotRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if last.shard == range.shard && last.end + 1 == range.start => {
                last.end = range.end;
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// The whole cluster configuration, versioned by `epoch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Config epoch: bumped by every change except leader reports.
    pub epoch: u64,
    pub nodes: BTreeMap<u64, NodeInfo>,
    pub shards: BTreeMap<u64, Shard>,
    pub slots: SlotMap,
    /// Last known leader per shard. Absent: the first replica is presumed.
    pub leaders: BTreeMap<u64, Leader>,
    /// Voters of the metadata group, sorted by node id.
    pub metadata_voters: Vec<u64>,
    /// Slots in migration, keyed by slot; the slot stays owned by `from`
    /// until the migration finishes.
    pub migrations: BTreeMap<u16, Migration>,
}

/// Whether `name` is a valid Redis node or shard id: 40 lowercase hex characters.
pub fn is_valid_name(name: &str) -> bool {
    name.len() == 40
        && name
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// The first and last slot of each of `masters` contiguous ranges, split as
/// `redis-cli --cluster create` splits them: a single-precision step of
/// 16384/masters, each end rounded to nearest, the last range ending at 16383.
///
/// # Panics
///
/// When `masters` is not between 1 and 16384.
pub fn even_split(masters: usize) -> Vec<(u16, u16)> {
    assert!((1..=usize::from(SLOTS)).contains(&masters));
    let per_master = f32::from(SLOTS) / masters as f32;
    let mut ranges = Vec::with_capacity(masters);
    let mut first: i64 = 0;
    let mut cursor: f32 = 0.0;
    for index in 0..masters {
        let mut last = (f64::from(cursor + per_master - 1.0)).round() as i64;
        if last > i64::from(SLOTS) || index == masters - 1 {
            last = i64::from(SLOTS) - 1;
        }
        if last < first {
            last = first;
        }
        ranges.push((first as u16, last as u16));
        first = last + 1;
        cursor += per_master;
    }
    ranges
}

impl Topology {
    /// A new cluster: `shard_count` shards of `replicas` replicas each placed over
    /// `nodes`, the 16384 slots split as `redis-cli --cluster create` does, the
    /// metadata voters chosen, epoch 1. Shards get ids 1..=shard_count and the
    /// names `names` returns, in order.
    ///
    /// Placement: no shard has two replicas on one node; no node holds more than
    /// ceil(shards × replicas / nodes) replicas; a shard's replicas go to
    /// different zones when the zones allow it; preferred leaders (first
    /// replicas) are spread over the nodes. Node order is the order given.
    pub fn create(
        nodes: Vec<NodeInfo>,
        shard_count: usize,
        replicas: usize,
        mut names: impl FnMut() -> String,
    ) -> Result<Topology, String> {
        if nodes.is_empty() {
            return Err("a cluster needs at least one node".into());
        }
        if shard_count == 0 {
            return Err("a cluster needs at least one shard".into());
        }
        if shard_count > usize::from(SLOTS) {
            return Err(format!(
                "{shard_count} shards requested but there are only {SLOTS} slots"
            ));
        }
        if replicas == 0 {
            return Err("a shard needs at least one replica".into());
        }
        if replicas > nodes.len() {
            return Err(format!(
                "{replicas} replicas per shard need at least {replicas} nodes, got {}",
                nodes.len()
            ));
        }
        let mut node_map = BTreeMap::new();
        for node in &nodes {
            if node_map.insert(node.id, node.clone()).is_some() {
                return Err(format!("node id {} is given twice", node.id));
            }
        }

        let placement = place_replicas(&nodes, shard_count, replicas);
        let split = even_split(shard_count);
        let mut shards = BTreeMap::new();
        let mut slots = SlotMap::default();
        for (index, (replica_set, (start, end))) in placement.into_iter().zip(split).enumerate() {
            let id = index as u64 + 1;
            shards.insert(
                id,
                Shard {
                    id,
                    name: names(),
                    replicas: replica_set,
                },
            );
            slots.assign(start, end, id);
        }
        let topology = Topology {
            epoch: 1,
            nodes: node_map,
            shards,
            slots,
            leaders: BTreeMap::new(),
            metadata_voters: choose_voters(&nodes),
            migrations: BTreeMap::new(),
        };
        topology.validate()?;
        Ok(topology)
    }

    /// Checks every rule a topology keeps. A stored or received topology that
    /// fails this must not be used.
    pub fn validate(&self) -> Result<(), String> {
        let mut names = BTreeSet::new();
        let mut endpoints = BTreeSet::new();
        for (&id, node) in &self.nodes {
            if id != node.id {
                return Err(format!("node {} is stored under id {id}", node.id));
            }
            if id == 0 {
                return Err("node id 0 is not allowed".into());
            }
            if !is_valid_name(&node.name) {
                return Err(format!(
                    "node {id} has an invalid name {:?} (40 lowercase hex characters expected)",
                    node.name
                ));
            }
            if !names.insert(node.name.as_str()) {
                return Err(format!("node name {} is used twice", node.name));
            }
            if node.host.is_empty() {
                return Err(format!("node {id} has an empty host"));
            }
            if node.port == 0 || node.raft_port == 0 {
                return Err(format!("node {id} has a zero port"));
            }
            if !endpoints.insert((node.host.as_str(), node.port)) {
                return Err(format!(
                    "address {}:{} is used by two nodes",
                    node.host, node.port
                ));
            }
        }

        let mut shard_names = BTreeSet::new();
        for (&id, shard) in &self.shards {
            if id != shard.id {
                return Err(format!("shard {} is stored under id {id}", shard.id));
            }
            if id == METADATA_GROUP {
                return Err("shard id 0 is reserved for the metadata group".into());
            }
            if !is_valid_name(&shard.name) {
                return Err(format!(
                    "shard {id} has an invalid name {:?} (40 lowercase hex characters expected)",
                    shard.name
                ));
            }
            if !shard_names.insert(shard.name.as_str()) {
                return Err(format!("shard name {} is used twice", shard.name));
            }
            if shard.replicas.is_empty() {
                return Err(format!("shard {id} has no replicas"));
            }
            let mut seen = BTreeSet::new();
            for replica in &shard.replicas {
                if !self.nodes.contains_key(replica) {
                    return Err(format!(
                        "shard {id} has a replica on unknown node {replica}"
                    ));
                }
                if !seen.insert(replica) {
                    return Err(format!("shard {id} has two replicas on node {replica}"));
                }
            }
        }

        self.slots.check()?;
        for range in self.slots.ranges() {
            if !self.shards.contains_key(&range.shard) {
                return Err(format!(
                    "slots {}-{} belong to unknown shard {}",
                    range.start, range.end, range.shard
                ));
            }
        }
        let assigned = self.slots.assigned();
        if assigned != u32::from(SLOTS) {
            let missing = (0..SLOTS).find(|&slot| self.slots.owner(slot).is_none());
            return Err(format!(
                "only {assigned} of {SLOTS} slots are assigned (slot {} has no shard)",
                missing.unwrap_or_default()
            ));
        }

        for (&shard, leader) in &self.leaders {
            let Some(info) = self.shards.get(&shard) else {
                return Err(format!("a leader is recorded for unknown shard {shard}"));
            };
            if !info.replicas.contains(&leader.node) {
                return Err(format!(
                    "the leader of shard {shard}, node {}, is not one of its replicas",
                    leader.node
                ));
            }
        }

        if self.metadata_voters.is_empty() {
            return Err("the metadata group has no voters".into());
        }
        if !self.metadata_voters.is_sorted_by(|a, b| a < b) {
            return Err("metadata voters must be sorted and distinct".into());
        }
        for voter in &self.metadata_voters {
            if !self.nodes.contains_key(voter) {
                return Err(format!("metadata voter {voter} is not a known node"));
            }
        }

        for (&slot, migration) in &self.migrations {
            if slot >= SLOTS {
                return Err(format!("migration of slot {slot}, which does not exist"));
            }
            if self.slots.owner(slot) != Some(migration.from) {
                return Err(format!(
                    "slot {slot} migrates from shard {}, which does not own it",
                    migration.from
                ));
            }
            if !self.shards.contains_key(&migration.to) || migration.to == migration.from {
                return Err(format!(
                    "slot {slot} migrates to shard {}, which is not another known shard",
                    migration.to
                ));
            }
        }
        Ok(())
    }

    /// The encoded form: a format byte followed by postcard. Deterministic: equal
    /// topologies encode to equal bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = vec![FORMAT_VERSION];
        // Serializing plain data into a vector cannot fail.
        bytes.extend(postcard::to_stdvec(self).expect("topology serializes"));
        bytes
    }

    /// Decodes [`Topology::to_bytes`]'s output. Does not validate; call
    /// [`Topology::validate`] before trusting it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Topology, String> {
        let Some((&version, body)) = bytes.split_first() else {
            return Err("topology decode error: empty input".into());
        };
        if version != FORMAT_VERSION {
            return Err(format!(
                "topology decode error: unsupported format version {version} (expected {FORMAT_VERSION})"
            ));
        }
        let (topology, rest) = postcard::take_from_bytes::<Topology>(body)
            .map_err(|error| format!("topology decode error: {error}"))?;
        if !rest.is_empty() {
            return Err(format!(
                "topology decode error: {} trailing bytes",
                rest.len()
            ));
        }
        Ok(topology)
    }

    /// The shard owning `slot`.
    pub fn slot_owner(&self, slot: u16) -> Option<u64> {
        self.slots.owner(slot)
    }

    /// The slot ranges `shard` owns, sorted.
    pub fn ranges_of(&self, shard: u64) -> Vec<(u16, u16)> {
        self.slots.ranges_of(shard)
    }

    /// The shards with a replica on `node`, in shard id order.
    pub fn shards_hosted_by(&self, node: u64) -> Vec<u64> {
        self.shards
            .values()
            .filter(|shard| shard.replicas.contains(&node))
            .map(|shard| shard.id)
            .collect()
    }

    /// The shards whose current leader (see [`Topology::leader_of`]) is `node`.
    pub fn shards_led_by(&self, node: u64) -> Vec<u64> {
        self.shards
            .keys()
            .copied()
            .filter(|&shard| self.leader_of(shard) == Some(node))
            .collect()
    }

    /// The node presumed to lead `shard`: the recorded leader while it is still
    /// a replica, otherwise the first replica.
    pub fn leader_of(&self, shard: u64) -> Option<u64> {
        let info = self.shards.get(&shard)?;
        match self.leaders.get(&shard) {
            Some(leader) if info.replicas.contains(&leader.node) => Some(leader.node),
            _ => info.replicas.first().copied(),
        }
    }

    /// The shard's replicas with the presumed leader first, then the others in
    /// preference order.
    pub fn members_leader_first(&self, shard: u64) -> Vec<u64> {
        let Some(info) = self.shards.get(&shard) else {
            return Vec::new();
        };
        let leader = self.leader_of(shard);
        leader
            .into_iter()
            .chain(
                info.replicas
                    .iter()
                    .copied()
                    .filter(|&node| Some(node) != leader),
            )
            .collect()
    }

    /// The node to send `slot`'s writes to (its shard's presumed leader).
    pub fn node_for_slot(&self, slot: u16) -> Option<&NodeInfo> {
        let shard = self.slot_owner(slot)?;
        self.nodes.get(&self.leader_of(shard)?)
    }

    /// The node named `name` (its Redis node id).
    pub fn node_by_name(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.values().find(|node| node.name == name)
    }

    /// Records that `node` leads `shard` in `term`. Leader reports are frequent
    /// and are not configuration changes, so the epoch is NOT bumped. Raft
    /// leaderships are ordered by (term, node): one term may see several
    /// leaders one after another, each with a higher node id than the last
    /// (openraft's default leader ids), so a report that precedes the
    /// recorded leadership in that order leaves the topology unchanged.
    pub fn with_leader(&self, shard: u64, node: u64, term: u64) -> Result<Topology, String> {
        let info = self
            .shards
            .get(&shard)
            .ok_or_else(|| format!("unknown shard {shard}"))?;
        if !info.replicas.contains(&node) {
            return Err(format!("node {node} is not a replica of shard {shard}"));
        }
        let mut next = self.clone();
        let reported = Leader { node, term };
        if self
            .leaders
            .get(&shard)
            .is_some_and(|current| !reported.succeeds(current))
        {
            return Ok(next);
        }
        next.leaders.insert(shard, reported);
        Ok(next)
    }

    /// Gives each range `start..=end` to `shard`. Refused for slots in migration
    /// (finish or cancel the migration instead).
    pub fn assign_slots(&self, ranges: &[(u16, u16)], shard: u64) -> Result<Topology, String> {
        if !self.shards.contains_key(&shard) {
            return Err(format!("unknown shard {shard}"));
        }
        let mut next = self.bumped();
        for &(start, end) in ranges {
            if start > end || end >= SLOTS {
                return Err(format!(
                    "invalid slot range {start}-{end} (slots are 0-{})",
                    SLOTS - 1
                ));
            }
            if let Some((slot, _)) = self.migrations.range(start..=end).next() {
                return Err(format!("slot {slot} is migrating"));
            }
            next.slots.assign(start, end, shard);
        }
        Ok(next)
    }

    /// Starts moving `slot` from its owner to shard `to`.
    pub fn begin_migration(&self, slot: u16, to: u64) -> Result<Topology, String> {
        if slot >= SLOTS {
            return Err(format!("invalid slot {slot}"));
        }
        if !self.shards.contains_key(&to) {
            return Err(format!("unknown shard {to}"));
        }
        let from = self
            .slot_owner(slot)
            .ok_or_else(|| format!("slot {slot} has no owner"))?;
        if from == to {
            return Err(format!("slot {slot} already belongs to shard {to}"));
        }
        if self.migrations.contains_key(&slot) {
            return Err(format!("slot {slot} is already migrating"));
        }
        let mut next = self.bumped();
        next.migrations.insert(slot, Migration { from, to });
        Ok(next)
    }

    /// Completes `slot`'s migration: the target shard now owns it.
    pub fn finish_migration(&self, slot: u16) -> Result<Topology, String> {
        let migration = self
            .migrations
            .get(&slot)
            .ok_or_else(|| format!("slot {slot} is not migrating"))?;
        let mut next = self.bumped();
        next.migrations.remove(&slot);
        next.slots.assign(slot, slot, migration.to);
        Ok(next)
    }

    /// Abandons `slot`'s migration: the source shard keeps it.
    pub fn cancel_migration(&self, slot: u16) -> Result<Topology, String> {
        if !self.migrations.contains_key(&slot) {
            return Err(format!("slot {slot} is not migrating"));
        }
        let mut next = self.bumped();
        next.migrations.remove(&slot);
        Ok(next)
    }

    /// Adds a node that hosts nothing yet.
    pub fn add_node(&self, node: NodeInfo) -> Result<Topology, String> {
        if self.nodes.contains_key(&node.id) {
            return Err(format!("node {} already exists", node.id));
        }
        let mut next = self.bumped();
        next.nodes.insert(node.id, node);
        next.validate()?;
        Ok(next)
    }

    /// Removes a node. Refused while it holds replicas or votes in the metadata
    /// group.
    pub fn remove_node(&self, id: u64) -> Result<Topology, String> {
        if !self.nodes.contains_key(&id) {
            return Err(format!("unknown node {id}"));
        }
        let hosted = self.shards_hosted_by(id);
        if !hosted.is_empty() {
            return Err(format!(
                "node {id} still holds replicas of shards {hosted:?}; move them first"
            ));
        }
        if self.metadata_voters.contains(&id) {
            return Err(format!("node {id} is a metadata voter; replace it first"));
        }
        let mut next = self.bumped();
        next.nodes.remove(&id);
        Ok(next)
    }

    /// Adds a shard that owns no slots yet.
    pub fn add_shard(&self, shard: Shard) -> Result<Topology, String> {
        if self.shards.contains_key(&shard.id) {
            return Err(format!("shard {} already exists", shard.id));
        }
        let mut next = self.bumped();
        next.shards.insert(shard.id, shard);
        next.validate()?;
        Ok(next)
    }

    /// Removes a shard that owns no slots and takes part in no migration.
    pub fn remove_shard(&self, id: u64) -> Result<Topology, String> {
        if !self.shards.contains_key(&id) {
            return Err(format!("unknown shard {id}"));
        }
        if !self.ranges_of(id).is_empty() {
            return Err(format!("shard {id} still owns slots"));
        }
        if self
            .migrations
            .values()
            .any(|migration| migration.to == id || migration.from == id)
        {
            return Err(format!("shard {id} takes part in a migration"));
        }
        let mut next = self.bumped();
        next.shards.remove(&id);
        next.leaders.remove(&id);
        Ok(next)
    }

    /// Places a new replica of `shard` on node `to`, last in the preference
    /// order: the first step of moving a replica (the node opens the group
    /// and waits to be added to it as a learner).
    pub fn add_replica(&self, shard: u64, to: u64) -> Result<Topology, String> {
        let info = self
            .shards
            .get(&shard)
            .ok_or_else(|| format!("unknown shard {shard}"))?;
        if !self.nodes.contains_key(&to) {
            return Err(format!("unknown node {to}"));
        }
        if info.replicas.contains(&to) {
            return Err(format!(
                "node {to} already holds a replica of shard {shard}"
            ));
        }
        let mut next = self.bumped();
        if let Some(info) = next.shards.get_mut(&shard) {
            info.replicas.push(to);
        }
        Ok(next)
    }

    /// Replaces `shard`'s replica on node `from` by one on node `to`, keeping
    /// its place in the preference order (`to` may already be placed by
    /// [`Topology::add_replica`]; it then leaves its own place). A recorded
    /// leader on `from` is forgotten.
    pub fn move_replica(&self, shard: u64, from: u64, to: u64) -> Result<Topology, String> {
        let info = self
            .shards
            .get(&shard)
            .ok_or_else(|| format!("unknown shard {shard}"))?;
        if !info.replicas.contains(&from) {
            return Err(format!("node {from} holds no replica of shard {shard}"));
        }
        if !self.nodes.contains_key(&to) {
            return Err(format!("unknown node {to}"));
        }
        if from == to {
            return Err(format!(
                "node {to} already holds a replica of shard {shard}"
            ));
        }
        let mut next = self.bumped();
        if let Some(info) = next.shards.get_mut(&shard) {
            info.replicas.retain(|&node| node != to);
            if let Some(place) = info.replicas.iter_mut().find(|node| **node == from) {
                *place = to;
            }
        }
        if next
            .leaders
            .get(&shard)
            .is_some_and(|leader| leader.node == from)
        {
            next.leaders.remove(&shard);
        }
        Ok(next)
    }

    /// Makes node `to` a metadata voter in place of node `from` (after the
    /// metadata group's Raft membership made the same change).
    pub fn replace_metadata_voter(&self, from: u64, to: u64) -> Result<Topology, String> {
        if !self.metadata_voters.contains(&from) {
            return Err(format!("node {from} is not a metadata voter"));
        }
        if !self.nodes.contains_key(&to) {
            return Err(format!("unknown node {to}"));
        }
        if self.metadata_voters.contains(&to) {
            return Err(format!("node {to} is already a metadata voter"));
        }
        let mut next = self.bumped();
        next.metadata_voters.retain(|&voter| voter != from);
        next.metadata_voters.push(to);
        next.metadata_voters.sort_unstable();
        next.validate()?;
        Ok(next)
    }

    fn bumped(&self) -> Topology {
        let mut next = self.clone();
        next.epoch += 1;
        next
    }
}

/// Places `replicas` replicas of each of `shards` shards over `nodes` (see
/// [`Topology::create`]). Tries with zone spreading first; should that corner
/// itself (every node outside the shard full), falls back to plain
/// least-loaded placement, which always succeeds within the cap.
fn place_replicas(nodes: &[NodeInfo], shards: usize, replicas: usize) -> Vec<Vec<u64>> {
    let zoned = nodes.iter().any(|node| node.zone.is_some());
    let mut placement = zoned
        .then(|| try_place(nodes, shards, replicas, true))
        .flatten()
        .unwrap_or_else(|| {
            try_place(nodes, shards, replicas, false)
                .expect("least-loaded placement never exceeds the cap")
        });
    balance_leaders(&mut placement, nodes.len());
    placement
}

/// Chooses each shard's preferred leader among its replicas so that no node is
/// the preferred leader of more than ceil(shards / nodes) shards where the
/// placement allows it (a bipartite matching with augmenting paths), then
/// moves it to the front of the replica list. Shards keep the first replica
/// that has room, so the placement's order is kept where it already balances.
fn balance_leaders(placement: &mut [Vec<u64>], node_count: usize) {
    let limit = placement.len().div_ceil(node_count.max(1));
    let mut leader: Vec<Option<u64>> = vec![None; placement.len()];
    let mut led: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for shard in 0..placement.len() {
        let mut visited = BTreeSet::new();
        if !find_leader(shard, placement, limit, &mut leader, &mut led, &mut visited) {
            // No room anywhere along any path: take the least burdened replica.
            if let Some(&node) = placement[shard]
                .iter()
                .min_by_key(|node| led.get(node).map_or(0, Vec::len))
            {
                leader[shard] = Some(node);
                led.entry(node).or_default().push(shard);
            }
        }
    }
    for (replicas, leader) in placement.iter_mut().zip(leader) {
        if let Some(position) = replicas.iter().position(|&node| Some(node) == leader) {
            let node = replicas.remove(position);
            replicas.insert(0, node);
        }
    }
}

fn find_leader(
    shard: usize,
    placement: &[Vec<u64>],
    limit: usize,
    leader: &mut [Option<u64>],
    led: &mut BTreeMap<u64, Vec<usize>>,
    visited: &mut BTreeSet<u64>,
) -> bool {
    for &node in &placement[shard] {
        if led.get(&node).map_or(0, Vec::len) < limit {
            leader[shard] = Some(node);
            led.entry(node).or_default().push(shard);
            return true;
        }
    }
    for &node in &placement[shard] {
        if !visited.insert(node) {
            continue;
        }
        let others = led.get(&node).cloned().unwrap_or_default();
        for other in others {
            if find_leader(other, placement, limit, leader, led, visited) {
                let list = led.entry(node).or_default();
                list.retain(|&led_shard| led_shard != other);
                list.push(shard);
                leader[shard] = Some(node);
                return true;
            }
        }
    }
    false
}

fn try_place(
    nodes: &[NodeInfo],
    shards: usize,
    replicas: usize,
    zoned: bool,
) -> Option<Vec<Vec<u64>>> {
    let count = nodes.len();
    let cap = (shards * replicas).div_ceil(count);
    let mut load = vec![0usize; count];
    let mut leads = vec![0usize; count];
    let mut placement = Vec::with_capacity(shards);
    for shard in 0..shards {
        let mut chosen: Vec<usize> = Vec::with_capacity(replicas);
        for position in 0..replicas {
            // Ties rotate: the first replica starts at the shard's index, each
            // further one after the previous pick, so small clusters get the
            // familiar staggered layout.
            let start = match chosen.last() {
                None => shard % count,
                Some(&previous) => (previous + 1) % count,
            };
            let pick = (0..count)
                .filter(|&index| !chosen.contains(&index) && load[index] < cap)
                .min_by_key(|&index| {
                    let zone_clash = if zoned {
                        zone_clashes(nodes, &chosen, index)
                    } else {
                        0
                    };
                    let leader_load = if position == 0 { leads[index] } else { 0 };
                    let distance = (index + count - start) % count;
                    (zone_clash, load[index], leader_load, distance)
                })?;
            load[pick] += 1;
            if position == 0 {
                leads[pick] += 1;
            }
            chosen.push(pick);
        }
        placement.push(chosen.into_iter().map(|index| nodes[index].id).collect());
    }
    Some(placement)
}

/// How many of the already chosen replicas share `candidate`'s zone. Nodes
/// without a zone clash with nobody.
fn zone_clashes(nodes: &[NodeInfo], chosen: &[usize], candidate: usize) -> usize {
    let Some(zone) = &nodes[candidate].zone else {
        return 0;
    };
    chosen
        .iter()
        .filter(|&&index| nodes[index].zone.as_ref() == Some(zone))
        .count()
}

/// Five voters from five nodes up, otherwise three (or every node when there
/// are fewer than three). Taken round-robin over the zones (nodes without a
/// zone form one group), in the order the nodes were given; returned sorted.
fn choose_voters(nodes: &[NodeInfo]) -> Vec<u64> {
    let wanted = if nodes.len() >= 5 {
        5
    } else {
        nodes.len().min(3)
    };
    let mut groups: Vec<(Option<&str>, Vec<u64>)> = Vec::new();
    for node in nodes {
        let zone = node.zone.as_deref();
        match groups.iter_mut().find(|(name, _)| *name == zone) {
            Some((_, members)) => members.push(node.id),
            None => groups.push((zone, vec![node.id])),
        }
    }
    let mut voters = Vec::with_capacity(wanted);
    let mut round = 0;
    while voters.len() < wanted {
        for (_, members) in &groups {
            if let Some(&id) = members.get(round) {
                if voters.len() < wanted {
                    voters.push(id);
                }
            }
        }
        round += 1;
    }
    voters.sort_unstable();
    voters
}
