//! The two decisions every request path makes against a group, shared by the
//! node and the simulation so both run the same code: may this replica serve a
//! linearizable read now, and what became of a proposed write.

use std::time::Duration;

use openraft::error::{
    ClientWriteError, ForwardReason, ForwardToLeader, LinearizableReadError, RaftError,
};
use openraft::raft::linearizable_read::LinearizerOption;

use bytes::Bytes;
use keyspace::{CommandSpec, Context};
use resp::{Frame, Protocol};

use crate::group::Raft;
use crate::group::ShardGroup;
use crate::state_machine::{lock_off_worker, ShardState};
use crate::types::{Op, Request, Response, TypeConfig};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// A write refused because the leader's quorum lease lapsed is retried this many
/// times, this far apart, before the client is sent away.
pub const LEASE_WAITS: u32 = 20;
pub const LEASE_WAIT: Duration = Duration::from_millis(10);

/// How long a read may wait for the leader to confirm its leadership.
pub const READ_CHECK_LIMIT: Duration = Duration::from_secs(2);

/// Why a replica may not serve a linearizable read.
#[derive(Debug)]
pub enum ReadRefusal {
    /// Another replica leads (or may): the client goes there.
    NotLeader(ForwardToLeader<TypeConfig>),
    /// Leadership could not be confirmed in time.
    Down,
}

/// What became of a proposed write.
#[derive(Debug, Clone)]
pub enum Proposal {
    /// Committed and applied; the state machine's reply.
    Applied(Response),
    /// Refused before anything was appended: it never happened.
    Refused(ForwardToLeader<TypeConfig>),
    /// Proposed, then leadership changed or the commit did not come in time:
    /// it may or may not be applied. Never retried as a new write.
    Unknown,
    /// Refused for another reason before it was appended.
    Failed(String),
}

impl ShardGroup {
    /// Confirms that reading this replica's applied state now is linearizable:
    /// the leader lease when fresh ([`ShardGroup::holds_read_lease`]),
    /// otherwise one heartbeat round (ReadIndex) that also waits until the
    /// state machine has applied up to the confirmed index.
    pub async fn check_read(&self) -> Result<(), ReadRefusal> {
        let applied = lock_off_worker(&self.state).last_applied;
        if self.holds_read_lease(applied) {
            return Ok(());
        }
        let option = LinearizerOption::new(None, true);
        let check = self.raft.ensure_linearizable(option);
        match tokio::time::timeout(READ_CHECK_LIMIT, check).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(forward)))) => {
                Err(ReadRefusal::NotLeader(forward))
            }
            Ok(Err(_)) | Err(_) => Err(ReadRefusal::Down),
        }
    }

    /// Proposes `request` and waits up to `limit` for it to apply. Client
    /// writes (other than scripts) join a batch: while earlier batches of
    /// this group are in flight, writes arriving from other connections
    /// queue and go out together as one entry ([`Op::Batch`]), so their
    /// log record, replication and commit are shared.
    pub async fn propose(&self, request: Request, limit: Duration) -> Proposal {
        if !batchable(&request) {
            return propose_entry(&self.raft, request, limit).await;
        }
        let (reply, outcome) = oneshot::channel();
        let queued = Queued {
            request,
            limit,
            reply,
        };
        if let Err(refused) = self.proposals.send(queued) {
            let Queued { request, .. } = refused.0;
            return propose_entry(&self.raft, request, limit).await;
        }
        outcome.await.unwrap_or(Proposal::Unknown)
    }
}

/// Most client writes one batched entry carries.
const BATCH_PARTS: usize = 256;
/// A batch stops growing once its arguments reach this many bytes.
const BATCH_BYTES: usize = 1 << 20;
/// Entries of one group's batcher proposed and not yet applied at a time:
/// writes that arrive meanwhile wait and form the next batch.
const BATCHES_IN_FLIGHT: usize = 2;

/// A client write waiting for its batch.
pub(crate) struct Queued {
    request: Request,
    limit: Duration,
    reply: oneshot::Sender<Proposal>,
}

/// Client writes that may share an entry: plain command runs. Scripts (which
/// may run long, and are watched for BUSY one entry at a time) go alone.
fn batchable(request: &Request) -> bool {
    match &request.op {
        Op::Exec { commands, .. } | Op::ExecOutOfMemory { commands, .. } => {
            !commands.iter().any(|arguments| {
                arguments.first().is_some_and(|name| {
                    keyspace::commands::lookup(name).is_some_and(|spec| spec.group == "scripting")
                })
            })
        }
        _ => false,
    }
}

/// The group's batcher: takes queued writes, at most [`BATCHES_IN_FLIGHT`]
/// entries at a time, and proposes what has queued as one entry. It ends
/// when the group's handles are gone.
pub(crate) async fn batch_proposals(raft: Raft, mut queue: mpsc::UnboundedReceiver<Queued>) {
    let slots = Arc::new(Semaphore::new(BATCHES_IN_FLIGHT));
    while let Some(first) = queue.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let mut bytes = first.request.op.payload_bytes();
        let mut batch = vec![first];
        while batch.len() < BATCH_PARTS && bytes < BATCH_BYTES {
            match queue.try_recv() {
                Ok(next) => {
                    bytes += next.request.op.payload_bytes();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        let raft = raft.clone();
        tokio::spawn(async move {
            propose_batch(&raft, batch).await;
            drop(slot);
        });
    }
}

/// Proposes a batch as one entry (a single write as itself) and hands each
/// part its outcome: all refused, all unknown, or each its own response.
async fn propose_batch(raft: &Raft, mut batch: Vec<Queued>) {
    if batch.len() == 1 {
        let Queued {
            request,
            limit,
            reply,
        } = batch.remove(0);
        let _ = reply.send(propose_entry(raft, request, limit).await);
        return;
    }
    let limit = batch
        .iter()
        .map(|queued| queued.limit)
        .max()
        .unwrap_or_default();
    let now_ms = batch
        .iter()
        .map(|queued| queued.request.now_ms)
        .max()
        .unwrap_or_default();
    let seed = batch[0].request.seed;
    let (parts, replies): (Vec<Request>, Vec<oneshot::Sender<Proposal>>) = batch
        .into_iter()
        .map(|queued| (queued.request, queued.reply))
        .unzip();
    let count = parts.len();
    let request = Request {
        now_ms,
        seed,
        op: Op::Batch { parts },
    };
    match propose_entry(raft, request, limit).await {
        Proposal::Applied(response) if response.parts.len() == count => {
            for (reply, part) in replies.into_iter().zip(response.parts) {
                let _ = reply.send(Proposal::Applied(part));
            }
        }
        Proposal::Applied(_) => {
            for reply in replies {
                let _ = reply.send(Proposal::Failed(
                    "internal: batch reply count mismatch".into(),
                ));
            }
        }
        outcome => {
            for reply in replies {
                let _ = reply.send(outcome.clone());
            }
        }
    }
}

/// Proposes `request` as one entry and waits up to `limit` for it to apply.
/// A fresh leader without its quorum lease yet refuses before appending;
/// that is retried for a few heartbeats before the caller is sent away.
async fn propose_entry(raft: &Raft, request: Request, limit: Duration) -> Proposal {
    let mut lease_waits = 0;
    loop {
        match tokio::time::timeout(limit, raft.client_write(request.clone())).await {
            Ok(Ok(response)) => return Proposal::Applied(response.data),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                if forward.reason == ForwardReason::LeaseExpired && lease_waits < LEASE_WAITS {
                    lease_waits += 1;
                    tokio::time::sleep(LEASE_WAIT).await;
                    continue;
                }
                return Proposal::Refused(forward);
            }
            Ok(Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_))))
            | Ok(Err(RaftError::Fatal(_)))
            | Err(_) => return Proposal::Unknown,
            Ok(Err(error)) => return Proposal::Failed(error.to_string()),
        }
    }
}

/// Runs a read-only command against the applied state without changing it
/// (no lazy expiry: a logically expired key reads as absent and stays until
/// the log removes it). `now_ms` is the reader's clock, never behind the log.
pub fn read(
    state: &mut ShardState,
    now_ms: u64,
    db: usize,
    protocol: Protocol,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Frame {
    let mut context = Context::new(now_ms.max(state.log_time_ms), state.rng.next_u64());
    context.db = db;
    context.protocol = protocol;
    context.lazy_expire = false;
    context.cluster_mode = state.keyspace.config.cluster_mode;
    if spec.group == "scripting" && state.keyspace.script_may_run_long(arguments) {
        return crate::runtime::long_running(|| {
            state.keyspace.execute(spec, &mut context, arguments)
        });
    }
    state.keyspace.execute(spec, &mut context, arguments)
}
