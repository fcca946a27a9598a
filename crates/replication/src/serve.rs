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

use crate::group::ShardGroup;
use crate::state_machine::{lock_off_worker, ShardState};
use crate::types::{Request, Response, TypeConfig};

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

/// Proposals waiting for a task that carries them in one entry (each with
/// its time limit and where its outcome goes), the tasks doing so, and the
/// writes their entries carry that are not yet applied.
#[derive(Default)]
pub(crate) struct Waiting {
    proposals: Vec<(Request, Duration, tokio::sync::oneshot::Sender<Proposal>)>,
    proposers: usize,
    in_flight: usize,
}

/// A new shared entry starts while others are in flight only if those carry
/// fewer writes than this in all; otherwise the writes wait for the entry in
/// flight to apply and then go together in the next. Few clients (whose
/// entries would carry a few writes each) keep Raft's pipelining and its
/// latency; many clients get fuller entries, and every replica handles fewer
/// of them. Measured on three replicas on two cores: 50 clients on one group
/// filled about 23 writes per entry instead of 12, with fewer context
/// switches per write; a lower bound (8) also serialized a cluster's groups
/// at about 17 clients each, for no fuller entries and about 13% fewer
/// writes per second.
const IN_FLIGHT_FOR_ANOTHER_ENTRY: usize = 16;

/// Takes back a proposer's writes from the in-flight count once they are
/// answered, however its task ends.
struct InFlight<'a>(&'a std::sync::Mutex<Waiting>, usize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut waiting = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        waiting.in_flight -= self.1;
    }
}

/// What became of a proposed write.
#[derive(Debug, Clone)]
pub enum Proposal {
    /// Committed and applied; the state machine's reply.
    Applied(Response),
    /// Refused before anything was appended: it never happened. The
    /// proposal's op comes back (its commands answer with redirects), when
    /// it can be told apart from the others it shared an entry with.
    Refused(ForwardToLeader<TypeConfig>, Option<crate::Op>),
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

    /// Proposes `request` and waits up to `limit` for it to apply. A fresh
    /// leader without its quorum lease yet refuses before appending; that is
    /// retried for a few heartbeats before the caller is sent away.
    pub async fn propose(&self, request: Request, limit: Duration) -> Proposal {
        // Encoded once for the log record and the appends (see `codec`).
        request.keep_encoding();
        let request = std::sync::Arc::new(request);
        let mut lease_waits = 0;
        loop {
            match tokio::time::timeout(limit, self.raft.client_write(request.clone())).await {
                Ok(Ok(response)) => return Proposal::Applied(response.data),
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                    if forward.reason == ForwardReason::LeaseExpired && lease_waits < LEASE_WAITS {
                        lease_waits += 1;
                        tokio::time::sleep(LEASE_WAIT).await;
                        continue;
                    }
                    // Openraft let go of its copy with the refusal.
                    let op = std::sync::Arc::try_unwrap(request)
                        .map_or_else(|shared| shared.op.clone(), |request| request.op);
                    return Proposal::Refused(forward, Some(op));
                }
                Ok(Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_))))
                | Ok(Err(RaftError::Fatal(_)))
                | Err(_) => return Proposal::Unknown,
                Ok(Err(error)) => return Proposal::Failed(error.to_string()),
            }
        }
    }
}

impl ShardGroup {
    /// [`ShardGroup::propose`], sharing one entry with the proposals that
    /// other clients make at the same moment. The first proposal to find none
    /// waiting starts a task; the runtime runs it after the tasks already
    /// ready (the node's runtime gives a woken task no priority), so every
    /// client whose request arrived in the same round of I/O has added its
    /// proposal by then, and the task proposes them all as one
    /// [`Op::Batch`](crate::Op::Batch). Each part applies as if alone and
    /// gets its own outcome; the batch is committed, refused or lost as a
    /// whole. Every replica then handles one entry instead of many, which
    /// is most of the cost of a write that is not pipelined. While entries
    /// carrying [`IN_FLIGHT_FOR_ANOTHER_ENTRY`] writes or more are in flight,
    /// new proposals wait for the first of them to apply instead.
    ///
    /// For [`Op::Exec`](crate::Op::Exec) without scripts (whose time limit
    /// and long-running handling are their own).
    pub async fn propose_batched(&self, request: Request, limit: Duration) -> Proposal {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let start = {
            let mut waiting = self
                .waiting
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            waiting.proposals.push((request, limit, done));
            // Whenever proposals wait, a proposer runs: one that finishes
            // its entry takes the waiting ones before it stops.
            let start = waiting.proposals.len() == 1
                && (waiting.proposers == 0 || waiting.in_flight < IN_FLIGHT_FOR_ANOTHER_ENTRY);
            if start {
                waiting.proposers += 1;
            }
            start
        };
        if start {
            // A task of its own: the batch outlives any one client's request
            // (a client that disconnects meanwhile does not cancel the others').
            let group = self.clone();
            tokio::spawn(async move { while group.propose_waiting().await {} });
        }
        outcome.await.unwrap_or(Proposal::Unknown)
    }

    /// Proposes every waiting proposal in one entry and hands out the
    /// outcomes; false (and one proposer fewer) when none was waiting.
    async fn propose_waiting(&self) -> bool {
        let waiting = {
            let mut waiting = self
                .waiting
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if waiting.proposals.is_empty() {
                waiting.proposers -= 1;
                return false;
            }
            waiting.in_flight += waiting.proposals.len();
            std::mem::take(&mut waiting.proposals)
        };
        let _answered = InFlight(&self.waiting, waiting.len());
        if waiting.len() == 1 {
            for (request, limit, done) in waiting {
                let _ = done.send(self.propose(request, limit).await);
            }
            return true;
        }
        let limit = waiting
            .iter()
            .map(|(_, limit, _)| *limit)
            .max()
            .unwrap_or_default();
        let now_ms = waiting
            .iter()
            .map(|(request, _, _)| request.now_ms)
            .max()
            .unwrap_or_default();
        let mut parts = Vec::with_capacity(waiting.len());
        let mut outcomes = Vec::with_capacity(waiting.len());
        for (request, _, done) in waiting {
            parts.push((request.seed, request.op));
            outcomes.push(done);
        }
        let batch = Request::new(
            now_ms,
            parts.first().map_or(0, |(seed, _)| *seed),
            crate::Op::Batch(parts),
        );
        match self.propose(batch, limit).await {
            Proposal::Applied(response) if response.parts.len() == outcomes.len() => {
                for (part, done) in response.parts.into_iter().zip(outcomes) {
                    let _ = done.send(Proposal::Applied(part));
                }
            }
            Proposal::Applied(_) => {
                for done in outcomes {
                    let _ = done.send(Proposal::Failed(
                        "internal: a batch's parts were not all answered".to_string(),
                    ));
                }
            }
            Proposal::Refused(forward, Some(crate::Op::Batch(parts)))
                if parts.len() == outcomes.len() =>
            {
                for ((_, op), done) in parts.into_iter().zip(outcomes) {
                    let _ = done.send(Proposal::Refused(forward.clone(), Some(op)));
                }
            }
            Proposal::Refused(forward, _) => {
                for done in outcomes {
                    let _ = done.send(Proposal::Refused(forward.clone(), None));
                }
            }
            other => {
                for done in outcomes {
                    let _ = done.send(other.clone());
                }
            }
        }
        true
    }
}

/// Runs a read-only command against the applied state without changing it
/// (no lazy expiry: a logically expired key reads as absent and stays until
/// the log removes it). `now_ms` is the reader's clock, never behind the log.
/// `no_touch`: the reader is in CLIENT NO-TOUCH mode.
pub fn read(
    state: &mut ShardState,
    now_ms: u64,
    db: usize,
    protocol: Protocol,
    no_touch: bool,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Frame {
    let mut context = Context::new(now_ms.max(state.log_time_ms), state.rng.next_u64());
    context.db = db;
    context.protocol = protocol;
    context.no_touch = no_touch;
    context.lazy_expire = false;
    context.cluster_mode = state.keyspace.config.cluster_mode;
    if spec.group == "scripting" && state.keyspace.script_may_run_long(arguments) {
        return crate::runtime::long_running(|| {
            state.keyspace.execute(spec, &mut context, arguments)
        });
    }
    state.keyspace.execute(spec, &mut context, arguments)
}
