//! The router's slot map: which node address leads each hash slot, learned
//! from `CLUSTER SLOTS` of any reachable node (the current masters first,
//! then the seeds).

use crate::resp_client;
use resp::Frame;

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
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            owners: vec![u16::MAX; SLOTS],
            masters: Vec::new(),
            replicas: vec![u16::MAX; SLOTS],
            replica_sets: Vec::new(),
        }
    }
}

impl SlotMap {
    /// The address serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&str> {
        let index = *self.owners.get(slot as usize)?;
        self.masters.get(index as usize).map(String::as_str)
    }

    /// A replica serving `slot` for READONLY reads, chosen by `pick` among
    /// them (spreading clients over replicas); `None` when it has none.
    pub fn replica(&self, slot: u16, pick: u64) -> Option<&str> {
        let index = *self.replicas.get(slot as usize)?;
        let set = self.replica_sets.get(index as usize)?;
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

/// Asks each candidate in turn for CLUSTER SLOTS; the first usable answer wins.
pub async fn fetch(candidates: &[String]) -> Result<SlotMap, String> {
    let mut last = "no seed to ask".to_string();
    for address in candidates {
        match resp_client::call(address, &[b"CLUSTER", b"SLOTS"]).await {
            Ok(reply) => match SlotMap::from_cluster_slots(&reply, address) {
                Some(map) if !map.is_empty() => return Ok(map),
                Some(_) => last = format!("{address} serves no slots"),
                None => last = format!("{address} answered CLUSTER SLOTS with {reply:?}"),
            },
            Err(error) => last = format!("{error:#}"),
        }
    }
    Err(last)
}
