//! Fault schedules: a timed list of faults drawn from the run's seed, applied
//! by the run between simulation steps.

use std::time::Duration;

use replication::NodeId;

use crate::rng::Rng;

/// The kinds of fault a schedule may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A replica cut off from another, both ways. Applied as TCP sees it: the
    /// link stalls and delivers what was sent, in order, once repaired.
    Partition,
    /// Packets from one replica to another lost; to TCP that stalls the
    /// connection both ways, so it is applied as a stall of the link.
    OneWay,
    /// The current leader cut off from every other replica (stalled links).
    IsolateLeader,
    /// A replica crashed and restarted later from its files.
    Crash,
    /// Messages between two replicas held back for at most 1.5 s, then
    /// delivered at once (delay and reordering relative to other links).
    Delay,
    /// Message latency raised for a while.
    SlowNetwork,
    /// A replica's disk syncs slowly for a while.
    SlowDisk,
    /// A voter demoted to learner by a membership change, promoted back later.
    Membership,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Partition,
        Kind::OneWay,
        Kind::IsolateLeader,
        Kind::Crash,
        Kind::Delay,
        Kind::SlowNetwork,
        Kind::SlowDisk,
        Kind::Membership,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Partition => "partition",
            Kind::OneWay => "one-way",
            Kind::IsolateLeader => "isolate-leader",
            Kind::Crash => "crash",
            Kind::Delay => "delay",
            Kind::SlowNetwork => "slow-network",
            Kind::SlowDisk => "slow-disk",
            Kind::Membership => "membership",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Parses a comma-separated list; `all` (or empty) means every kind,
    /// `none` no faults.
    pub fn parse_list(text: &str) -> Result<Vec<Kind>, String> {
        match text.trim() {
            "" | "all" => Ok(Kind::ALL.to_vec()),
            "none" => Ok(Vec::new()),
            list => list
                .split(',')
                .map(|name| {
                    Kind::parse(name.trim()).ok_or_else(|| {
                        let known: Vec<&str> = Kind::ALL.iter().map(|kind| kind.name()).collect();
                        format!("unknown fault {name:?} (known: {})", known.join(", "))
                    })
                })
                .collect(),
        }
    }
}

/// One step of a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Partition(NodeId, NodeId),
    Repair(NodeId, NodeId),
    PartitionOneWay {
        from: NodeId,
        to: NodeId,
    },
    RepairOneWay {
        from: NodeId,
        to: NodeId,
    },
    /// Isolates whichever replica leads at that moment, for this long.
    IsolateLeader(Duration),
    Crash(NodeId),
    Restart(NodeId),
    Hold(NodeId, NodeId),
    Release(NodeId, NodeId),
    /// Maximum message latency in milliseconds.
    Latency(u64),
    /// A replica's sync time in milliseconds.
    SyncLatency(NodeId, u64),
    /// A membership change that makes a voter a learner.
    Demote(NodeId),
    /// A membership change that makes a learner a voter again.
    Promote(NodeId),
}

/// The latency the network has outside [`Kind::SlowNetwork`] faults.
pub const BASE_LATENCY_MS: u64 = 2;

/// A disk's sync time outside [`Kind::SlowDisk`] faults.
pub const BASE_SYNC_MS: u64 = 1;

/// Draws a schedule over `window` for replicas `1..=nodes`.
pub fn plan(rng: &mut Rng, kinds: &[Kind], nodes: u64, window: Duration) -> Vec<(Duration, Event)> {
    let mut events = Vec::new();
    if kinds.is_empty() {
        return events;
    }
    let end = window.as_millis() as u64;
    let mut crashed_until = vec![0u64; nodes as usize + 1];
    let mut at = 500 + rng.below(1_000);
    while at < end {
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        let until = (at + rng.between(300, 4_000)).min(end);
        let node = rng.between(1, nodes);
        let mut other = rng.between(1, nodes - 1);
        if other >= node {
            other += 1;
        }
        let ms = Duration::from_millis;
        match kind {
            Kind::Partition => {
                events.push((ms(at), Event::Partition(node, other)));
                events.push((ms(until), Event::Repair(node, other)));
            }
            Kind::OneWay => {
                events.push((
                    ms(at),
                    Event::PartitionOneWay {
                        from: node,
                        to: other,
                    },
                ));
                events.push((
                    ms(until),
                    Event::RepairOneWay {
                        from: node,
                        to: other,
                    },
                ));
            }
            Kind::IsolateLeader => {
                events.push((ms(at), Event::IsolateLeader(ms(until - at))));
            }
            Kind::Crash => {
                if crashed_until[node as usize] < at {
                    crashed_until[node as usize] = until;
                    events.push((ms(at), Event::Crash(node)));
                    events.push((ms(until), Event::Restart(node)));
                }
            }
            Kind::Delay => {
                events.push((ms(at), Event::Hold(node, other)));
                events.push((ms(until.min(at + 1_500)), Event::Release(node, other)));
            }
            Kind::SlowNetwork => {
                events.push((ms(at), Event::Latency(rng.between(10, 150))));
                events.push((ms(until), Event::Latency(BASE_LATENCY_MS)));
            }
            Kind::Membership => {
                events.push((ms(at), Event::Demote(node)));
                events.push((ms(until), Event::Promote(node)));
            }
            Kind::SlowDisk => {
                events.push((ms(at), Event::SyncLatency(node, rng.between(10, 200))));
                events.push((ms(until), Event::SyncLatency(node, BASE_SYNC_MS)));
            }
        }
        at += rng.between(200, 2_500);
    }
    events.sort_by_key(|(at, _)| *at);
    events
}
