//! The cluster's own changes while the faults run (cluster runs with spare
//! nodes): the admin adds a spare node, moves shard replicas between nodes
//! (to the spare and back), adds one shard (which the slot migrations then
//! move workload slots into and out of), and late in the window deletes a
//! node, which first moves its replicas away: the spare again, or in half
//! the runs one of the founders, which also hands its vote in the metadata
//! group to a node without one. Each change is the admin's own command
//! (`add_node`, `move_replica`, `add_shard`, `del_node`), as an operator
//! would run it. A change a fault cut short is run again until it
//! completes, first during the faults and then after healing, as an
//! operator would rerun it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::node_host::node_address;
use crate::rng::Rng;
use crate::run::{newest_topology, Migrations};

/// How long one change may take before it counts as failed (and is rerun).
const CHANGE_LIMIT: Duration = Duration::from_secs(60);

/// Nodes deleted from the cluster: they are shut down and stay down (a
/// restart fault or the healing must not start them again).
#[derive(Clone, Default)]
pub struct Retired(Arc<Mutex<BTreeSet<u64>>>);

impl Retired {
    pub fn contains(&self, node: u64) -> bool {
        self.lock().contains(&node)
    }

    fn insert(&self, node: u64) {
        self.lock().insert(node);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One change, as the admin's command line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    AddNode(u64),
    MoveReplica {
        shard: u64,
        from: u64,
        to: u64,
    },
    /// A new shard `id` (the next free id) with replicas on `nodes`.
    AddShard {
        id: u64,
        nodes: Vec<u64>,
    },
    DelNode(u64),
}

/// The changes of one run.
#[derive(Clone)]
pub struct Changer {
    /// Every host, founders and spares.
    pub all: Vec<u64>,
    /// The hosts the cluster is formed of (one may be deleted late in the
    /// window).
    pub founders: Vec<u64>,
    /// The hosts that start outside the cluster.
    pub spares: Vec<u64>,
    /// Shards the cluster may grow to (by `add_shard`, once all spares
    /// joined).
    pub max_shards: usize,
    pub log: Migrations,
    pub retired: Retired,
    /// The highest topology epoch the changes have seen.
    pub highest_epoch: Arc<std::sync::atomic::AtomicU64>,
    /// Held while a change runs: the membership faults wait meanwhile (an
    /// operator makes one membership change at a time).
    pub gate: Arc<tokio::sync::Mutex<()>>,
}

impl Changer {
    /// Until `end`: a change every 0.3-2 s. Spares join first; from
    /// `retire_from` on, nodes are deleted (a joined spare, or a founder in
    /// its place) while more than three remain. Returns the change left
    /// unfinished, if any.
    pub async fn during(
        &self,
        retire_from: Duration,
        end: Duration,
        mut rng: Rng,
    ) -> Option<Change> {
        let mut unfinished: Option<Change> = None;
        loop {
            tokio::time::sleep(Duration::from_millis(rng.between(300, 2_000))).await;
            let now = turmoil::sim_elapsed().unwrap_or_default();
            if now >= end {
                return unfinished;
            }
            let change = match unfinished.take() {
                Some(change) => change,
                None => match self.next(now >= retire_from, &mut rng).await {
                    Some(change) => change,
                    None => continue,
                },
            };
            if !self.perform(&change).await {
                unfinished = Some(change);
            }
        }
    }

    /// After healing: runs `unfinished` until it completes.
    pub async fn finish(&self, unfinished: Option<Change>) -> Result<(), String> {
        let Some(change) = unfinished else {
            return Ok(());
        };
        for _ in 0..20 {
            if self.perform(&change).await {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(format!(
            "the cluster change {change:?} did not complete after healing"
        ))
    }

    /// The next change, drawn from the newest topology.
    async fn next(&self, retiring: bool, rng: &mut Rng) -> Option<Change> {
        let (_, topology, _) = newest_topology(&self.all).await?;
        self.saw(topology.epoch);
        for &spare in &self.spares {
            if self.retired.contains(spare) {
                continue;
            }
            if !topology.nodes.contains_key(&spare) {
                return Some(Change::AddNode(spare));
            }
            let remaining = self
                .all
                .iter()
                .filter(|node| !self.retired.contains(**node))
                .count();
            if retiring && remaining > 3 {
                // Half the time a founder leaves instead: a metadata voter,
                // whose vote goes to a node without one first.
                let founder_left = self
                    .founders
                    .iter()
                    .any(|node| self.retired.contains(*node));
                if !founder_left && rng.below(2) == 0 {
                    return Some(Change::DelNode(*pick(rng, &self.founders)?));
                }
                return Some(Change::DelNode(spare));
            }
        }
        let shards: Vec<u64> = topology.shards.keys().copied().collect();
        let live: Vec<u64> = topology
            .nodes
            .keys()
            .copied()
            .filter(|node| !self.retired.contains(*node))
            .collect();
        if shards.len() < self.max_shards && live.len() >= 3 && rng.below(4) == 0 {
            let mut nodes = live;
            while nodes.len() > 3 {
                nodes.remove(rng.below(nodes.len() as u64) as usize);
            }
            let id = shards.iter().max().copied().unwrap_or(0) + 1;
            return Some(Change::AddShard { id, nodes });
        }
        let shard = *pick(rng, &shards)?;
        let replicas = &topology.shards[&shard].replicas;
        let from = *pick(rng, replicas)?;
        let free: Vec<u64> = topology
            .nodes
            .keys()
            .copied()
            .filter(|node| !replicas.contains(node) && !self.retired.contains(*node))
            .collect();
        let to = *pick(rng, &free)?;
        Some(Change::MoveReplica { shard, from, to })
    }

    /// The hosts not deleted, but `leaving`.
    fn in_service(&self, leaving: Option<u64>) -> Vec<u64> {
        self.all
            .iter()
            .copied()
            .filter(|node| !self.retired.contains(*node) && Some(*node) != leaving)
            .collect()
    }

    fn saw(&self, epoch: u64) {
        self.highest_epoch
            .fetch_max(epoch, std::sync::atomic::Ordering::Relaxed);
    }

    /// Runs one change with the admin's command; true when it completed.
    async fn perform(&self, change: &Change) -> bool {
        let _gate = self.gate.lock().await;
        let highest = self
            .highest_epoch
            .load(std::sync::atomic::Ordering::Relaxed);
        // The admin asks any node still in service, never the one leaving
        // (`del_node` refuses to be sent to it).
        let leaving = match change {
            Change::DelNode(node) => Some(*node),
            _ => None,
        };
        let askable = self.in_service(leaving);
        let Some((existing, topology, _)) = newest_topology(&askable).await else {
            self.log.record(
                false,
                format!("{change:?}: no node answered with the topology"),
            );
            return false;
        };
        self.saw(topology.epoch);
        let run = async {
            match change {
                // An earlier attempt got as far as the metadata: the shard
                // exists (the admin's own wait for its leader was cut short).
                Change::AddShard { id, .. } if topology.shards.contains_key(id) => Ok(()),
                Change::AddShard { nodes, .. } => {
                    node::admin::add_shard(&existing, nodes, rng_seed(nodes)).await
                }
                Change::AddNode(node) => {
                    node::admin::add_node(&node_address(*node), &existing).await
                }
                Change::MoveReplica { shard, from, to } => {
                    node::admin::move_replica(&existing, *shard, *from, *to).await
                }
                Change::DelNode(node) => {
                    let node = *node;
                    match node::admin::del_node(&existing, &node.to_string()).await {
                        // An earlier attempt removed it and was cut short
                        // before it shut the node down: an operator reading
                        // this shuts it down by hand, once every node agrees
                        // (the node asked may have restarted and be replaying
                        // an older topology that never listed it).
                        Err(error)
                            if error.to_string() == format!("no node {node} in the cluster")
                                && removal_agreed(&askable, node, highest).await =>
                        {
                            let address = node_address(node);
                            let shutdown = node::resp_client::call(&address, &[b"SHUTDOWN"]);
                            let _ = tokio::time::timeout(Duration::from_secs(2), shutdown).await;
                            Ok(())
                        }
                        other => other,
                    }
                }
            }
        };
        let outcome = tokio::time::timeout(CHANGE_LIMIT, run).await;
        let done = matches!(outcome, Ok(Ok(())));
        if let (true, Change::DelNode(node)) = (done, change) {
            self.retired.insert(*node);
        }
        let line = match outcome {
            Ok(Ok(())) => format!("{change:?}"),
            Ok(Err(error)) => format!("{change:?} failed: {error:#}"),
            Err(_) => format!("{change:?} timed out"),
        };
        self.log.record(done, line);
        done
    }
}

/// Whether every node the newest topology lists answers with it, it is at
/// least as new as any the changes saw (nodes that restarted replay older
/// ones for a while), and it does not list `node`.
async fn removal_agreed(founders: &[u64], node: u64, highest: u64) -> bool {
    matches!(
        newest_topology(founders).await,
        Some((_, topology, true))
            if topology.epoch >= highest && !topology.nodes.contains_key(&node)
    )
}

/// The seed `add_shard` names the shard from: fixed by the change.
fn rng_seed(nodes: &[u64]) -> u64 {
    nodes
        .iter()
        .fold(0x5107_5eed, |seed, node| seed * 31 + node)
}

fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() {
        return None;
    }
    items.get(rng.below(items.len() as u64) as usize)
}
