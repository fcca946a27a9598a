//! The router's slot map: which node address leads each hash slot, learned
//! from `CLUSTER SLOTS` of any reachable node (the current masters first,
//! then the seeds).

use crate::resp_client;
use resp::Frame;
use std::collections::HashMap;

/// Number of hash slots.
pub const SLOTS: usize = 16384;

/// Slot -> master address (and replica addresses), as one node reported it.
#[derive(Debug, Clone)]
pub struct SlotMap {
    /// Index into `masters` for each slot; `u16::MAX` when no one serves it.
    owners: Vec<u16>,
    /// Distinct master addresses, in order of the first slot each serves.
    masters: Vec<String>,
    /// Index into `replica_sets` for each slot; `u16::MAX` when it has none.
    replicas: Vec<u16>,
    /// Distinct lists of replica addresses.
    replica_sets: Vec<Vec<String>>,
    /// Each node's zone by address (from the cluster topology; only fetched
    /// when the router prefers a zone).
    zones: HashMap<String, String>,
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            owners: vec![u16::MAX; SLOTS],
            masters: Vec::new(),
            replicas: vec![u16::MAX; SLOTS],
            replica_sets: Vec::new(),
            zones: HashMap::new(),
        }
    }
}

impl SlotMap {
    /// The address serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&str> {
        let index = *self.owners.get(slot as usize)?;
        self.masters.get(index as usize).map(String::as_str)
    }

    /// Where a READONLY read of `slot` goes: with a preferred `zone`, a
    /// replica or the master in that zone; otherwise (or when none is there)
    /// a replica. Chosen by `pick` among the candidates (spreading clients);
    /// `None` when the slot has no replica and no master in the zone.
    pub fn replica(&self, slot: u16, pick: u64, zone: Option<&str>) -> Option<&str> {
        let index = *self.replicas.get(slot as usize)?;
        let set = self.replica_sets.get(index as usize)?;
        if let Some(zone) = zone {
            let in_zone =
                |address: &&str| self.zones.get(*address).map(String::as_str) == Some(zone);
            let local: Vec<&str> = set
                .iter()
                .map(String::as_str)
                .chain(self.owner(slot))
                .filter(in_zone)
                .collect();
            if !local.is_empty() {
                return Some(local[(pick % local.len() as u64) as usize]);
            }
        }
        if set.is_empty() {
            return None;
        }
        set.get((pick % set.len() as u64) as usize)
            .map(String::as_str)
    }

    /// Every distinct master address.
    pub fn masters(&self) -> &[String] {
        &self.masters
    }

    pub fn is_empty(&self) -> bool {
        self.masters.is_empty()
    }

    /// Every distinct node address, masters first.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes = self.masters.clone();
        for address in self.replica_sets.iter().flatten() {
            if !nodes.contains(address) {
                nodes.push(address.clone());
            }
        }
        nodes
    }

    /// Parses a CLUSTER SLOTS reply from `source` (an empty endpoint means
    /// `source`'s host, as in Redis).
    pub fn from_cluster_slots(reply: &Frame, source: &str) -> Option<SlotMap> {
        let Frame::Array(ranges) = reply else {
            return None;
        };
        let source_host = host_of(source);
        let mut map = SlotMap::default();
        let mut sorted: Vec<(i64, i64, String, Vec<String>)> = Vec::new();
        for range in ranges {
            let Frame::Array(parts) = range else {
                return None;
            };
            let (
                Some(Frame::Integer(start)),
                Some(Frame::Integer(end)),
                Some(Frame::Array(master)),
            ) = (parts.first(), parts.get(1), parts.get(2))
            else {
                return None;
            };
            let (Some(host), Some(Frame::Integer(port))) =
                (master.first().and_then(Frame::as_bytes), master.get(1))
            else {
                return None;
            };
            let address = |host: &[u8], port: i64| {
                let host = String::from_utf8_lossy(host);
                let host = if host.is_empty() || host == "?" {
                    source_host.to_string()
                } else {
                    host.into_owned()
                };
                format!("{host}:{port}")
            };
            if !(0..SLOTS as i64).contains(start) || !(0..SLOTS as i64).contains(end) {
                return None;
            }
            let replicas: Vec<String> = parts[3..]
                .iter()
                .filter_map(|replica| match replica {
                    Frame::Array(fields) => {
                        match (fields.first().and_then(Frame::as_bytes), fields.get(1)) {
                            (Some(host), Some(Frame::Integer(port))) => Some(address(host, *port)),
                            _ => None,
                        }
                    }
                    _ => None,
                })
                .collect();
            sorted.push((*start, *end, address(host, *port), replicas));
        }
        sorted.sort();
        for (start, end, address, replicas) in sorted {
            let replica_index = match map.replica_sets.iter().position(|known| *known == replicas) {
                Some(index) => index,
                None => {
                    map.replica_sets.push(replicas);
                    map.replica_sets.len() - 1
                }
            };
            let replica_index = u16::try_from(replica_index).ok()?;
            let index = match map.masters.iter().position(|known| *known == address) {
                Some(index) => index,
                None => {
                    map.masters.push(address);
                    map.masters.len() - 1
                }
            };
            let index = u16::try_from(index).ok()?;
            for slot in start..=end {
                map.owners[slot as usize] = index;
                map.replicas[slot as usize] = replica_index;
            }
        }
        Some(map)
    }
}

/// The host part of `HOST:PORT`.
pub fn host_of(address: &str) -> &str {
    address
        .rsplit_once(':')
        .map(|(host, _)| host)
        .unwrap_or(address)
}

/// Resolves a redirect's endpoint (`host:port`, or `:port` meaning the host
/// of the node that answered).
pub fn redirect_address(endpoint: &str, replied_from: &str) -> String {
    match endpoint.strip_prefix(':') {
        Some(port) => format!("{}:{port}", host_of(replied_from)),
        None => endpoint.to_string(),
    }
}

/// Asks each candidate in turn for CLUSTER SLOTS; the first usable answer
/// wins. With `zones`, the same node's topology (`SLOTRAFT TOPOLOGY`) gives
/// each node's zone; without it the map has none.
pub async fn fetch(candidates: &[String], zones: bool) -> Result<SlotMap, String> {
    let mut last = "no seed to ask".to_string();
    for address in candidates {
        match resp_client::call(address, &[b"CLUSTER", b"SLOTS"]).await {
            Ok(reply) => match SlotMap::from_cluster_slots(&reply, address) {
                Some(mut map) if !map.is_empty() => {
                    if zones {
                        map.zones = fetch_zones(address).await;
                    }
                    return Ok(map);
                }
                Some(_) => last = format!("{address} serves no slots"),
                None => last = format!("{address} answered CLUSTER SLOTS with {reply:?}"),
            },
            Err(error) => last = format!("{error:#}"),
        }
    }
    Err(last)
}

/// Each node's zone by client address, from `address`'s topology; empty when
/// it cannot be had (the router then reads from any replica).
async fn fetch_zones(address: &str) -> HashMap<String, String> {
    let reply = match resp_client::call(address, &[b"SLOTRAFT", b"TOPOLOGY"]).await {
        Ok(Frame::Bulk(bytes)) => bytes,
        Ok(_) | Err(_) => return HashMap::new(),
    };
    let Ok(topology) = cluster::Topology::from_bytes(&reply) else {
        return HashMap::new();
    };
    topology
        .nodes
        .values()
        .filter_map(|node| {
            let zone = node.zone.clone()?;
            Some((format!("{}:{}", node.host, node.port), zone))
        })
        .collect()
}
