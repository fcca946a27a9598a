//! openraft's network over the `rpc` crate: one cached gRPC channel per peer,
//! shared by every group; each message names its group.
//!
//! Payloads are openraft's own messages in the crate's codec. A reply payload is
//! `Result<Response, String>`: `Err` carries a remote failure (for instance the
//! group is not hosted there), which openraft sees as a network error and retries
//! with backoff.

use std::collections::VecDeque;
use std::future::Future;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, Stream, StreamExt};
use openraft::base::{BoxFuture, BoxStream};
use openraft::error::RPCError;
use openraft::error::{NetworkError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};
use rpc::{IncomingMessages, RpcClient, RpcError, RpcKind};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::time::Instant;

use crate::codec;
use crate::state_machine::{open_snapshot_file, SnapshotFile};
use crate::types::{GroupId, LogId, NodeAddr, NodeId, SnapshotMeta, TypeConfig, Vote};

/// How long a replication session holds a request without entries (it only
/// tells the follower a newer commit index) for the next request to carry
/// that index instead. openraft sends one after every commit that found no
/// newer entry to ride on; a follower spends nearly as much on it (a receive,
/// a reply, several thread switches) as on the entries themselves, so under
/// steady writes it doubled the messages per entry. Followers learn commits
/// (and apply) up to this much later; the leader's commits, its lease and
/// heartbeats (sessions of one request, sent at once) are unaffected.
pub const COMMIT_UPDATE_HOLD: Duration = Duration::from_millis(5);

/// Size of the chunks a snapshot file is streamed in.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;

/// A vote or a pre-vote: both travel as [`RpcKind::Vote`].
#[derive(Debug, Serialize, Deserialize)]
pub enum VoteMessage {
    Vote(VoteRequest<TypeConfig>),
    PreVote(VoteRequest<TypeConfig>),
}

/// The first chunk of a snapshot stream.
#[derive(Debug, Serialize, Deserialize)]
pub struct SnapshotHeader {
    pub vote: Vote,
    pub meta: SnapshotMeta,
}

/// Builds per-peer network handles for one group.
#[derive(Clone)]
pub struct NetworkFactory {
    client: RpcClient,
    group: GroupId,
    append_deadline: Duration,
}

impl NetworkFactory {
    /// `append_deadline`: the least time an AppendEntries call (heartbeats
    /// included) is given; see [`PeerLink::append_entries`].
    pub fn new(client: RpcClient, group: GroupId, append_deadline: Duration) -> Self {
        NetworkFactory {
            client,
            group,
            append_deadline,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerLink;

    async fn new_client(&mut self, target: NodeId, node: &NodeAddr) -> PeerLink {
        PeerLink {
            client: self.client.clone(),
            group: self.group,
            target,
            addr: node.raft.clone(),
            append_deadline: self.append_deadline,
        }
    }
}

/// The network as seen from one group towards one peer.
pub struct PeerLink {
    client: RpcClient,
    group: GroupId,
    #[allow(dead_code)]
    target: NodeId,
    addr: String,
    append_deadline: Duration,
}

impl PeerLink {
    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        kind: RpcKind,
        request: &Req,
        deadline: Duration,
    ) -> Result<Resp, RPCError<TypeConfig>> {
        self.call_encoded(kind, Bytes::from(codec::encode(request)), deadline)
            .await
    }

    async fn call_encoded<Resp: DeserializeOwned>(
        &self,
        kind: RpcKind,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<Resp, RPCError<TypeConfig>> {
        let reply = self
            .client
            .call(&self.addr, kind, self.group, payload, deadline)
            .await
            .map_err(rpc_error)?;
        decode_reply(&reply).map_err(|error| RPCError::Network(NetworkError::from_string(error)))
    }
}

fn decode_reply<Resp: DeserializeOwned>(reply: &[u8]) -> Result<Resp, String> {
    match codec::decode::<Result<Resp, String>>(reply) {
        Ok(result) => result,
        Err(error) => Err(format!("undecodable reply: {error}")),
    }
}

fn rpc_error(error: RpcError) -> RPCError<TypeConfig> {
    match error {
        RpcError::Unreachable(_) => RPCError::Unreachable(Unreachable::from_string(error)),
        other => RPCError::Network(NetworkError::from_string(other)),
    }
}

impl RaftNetworkV2<TypeConfig> for PeerLink {
    type SnapshotData = SnapshotFile;

    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        // openraft gives an append its heartbeat interval, but a
        // follower answers only once the entries are on its disk: one slow
        // fsync on a busy machine made every append time out and be sent
        // again, and the group stopped committing for seconds. A slow peer
        // now only slows its own stream; a dead one is still given up on
        // well within an election timeout, and leases count from the send.
        let deadline = option.hard_ttl().max(self.append_deadline);
        let payload = Bytes::from(codec::encode_append(&request));
        self.call_encoded(RpcKind::AppendEntries, payload, deadline)
            .await
    }

    /// One pipelined replication session on a stream: each request goes out
    /// as openraft produces it, without waiting for the replies to earlier
    /// ones (the follower's group commit then shares one fsync among them),
    /// and the replies come back in order. A reply overdue by the append
    /// deadline, counted from its request's send, ends the session with a
    /// timeout, as a unary append would.
    ///
    /// The stream is opened only once openraft has produced the first
    /// request: openraft paces a failing peer by sleeping in its request
    /// stream, so a peer that refuses connections is retried at that pace
    /// rather than as fast as a connection can be refused.
    ///
    /// A session of one request without entries, ended as soon as that
    /// request is out, is openraft's heartbeat: it goes with the heartbeats
    /// of the other groups towards the same peer, as one call
    /// (`RpcClient::heartbeat`), not as a stream of its own.
    ///
    /// A peer that answered a session `Unimplemented` (a version without
    /// them) gets one unary append at a time instead, until the rpc client
    /// tries it with a session again.
    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<AppendReplies<'s>, RPCError<TypeConfig>>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
    {
        if !self.client.streams_supported(&self.addr) {
            // A peer of a version without stream sessions (a rolling
            // upgrade): one unary append at a time, as before them.
            return openraft::network::stream_append_sequential(self, input, option);
        }
        let opening = Opening {
            client: self.client.clone(),
            addr: self.addr.clone(),
            group: self.group,
            deadline: option.soft_ttl().max(self.append_deadline),
        };
        let replies =
            futures_util::stream::unfold(SessionState::Start(opening, input), |state| async move {
                let (mut replies, sent, deadline, mut owed) = match state {
                    SessionState::Start(opening, mut input) => {
                        let first = input.next().await?;
                        // A request taken to see whether the session ends.
                        let mut second = None;
                        if first.entries.is_empty() {
                            match input.next().now_or_never() {
                                Some(None) => {
                                    let result = opening.heartbeat(first).await;
                                    return Some((result, SessionState::Done));
                                }
                                Some(Some(request)) => second = Some(request),
                                None => {}
                            }
                        }
                        let input =
                            futures_util::stream::iter(std::iter::once(first).chain(second))
                                .chain(input);
                        let input = fold_commit_updates(input, COMMIT_UPDATE_HOLD);
                        match opening.open(input).await? {
                            Ok((replies, sent, deadline)) => {
                                (replies, sent, deadline, VecDeque::new())
                            }
                            Err(error) => return Some((Err(error), SessionState::Done)),
                        }
                    }
                    SessionState::Open(replies, sent, deadline, owed) => {
                        (replies, sent, deadline, owed)
                    }
                    SessionState::Done => return None,
                };
                if let Some(reply) = owed.pop_front() {
                    return Some((Ok(reply), SessionState::Open(replies, sent, deadline, owed)));
                }
                match next_reply(&mut replies, &sent, deadline).await {
                    Some(Ok((reply, folded))) => {
                        // `owed` is empty here. The requests folded into this
                        // one are answered first, in order, as the follower
                        // would have.
                        let first = if folded.count == 0 {
                            reply
                        } else {
                            let answer = folded.answer(&reply);
                            owed.extend(std::iter::repeat_n(answer.clone(), folded.count - 1));
                            owed.push_back(reply);
                            answer
                        };
                        Some((Ok(first), SessionState::Open(replies, sent, deadline, owed)))
                    }
                    Some(Err(error)) => Some((Err(error), SessionState::Done)),
                    None => None,
                }
            });
        let replies: AppendReplies<'s> = Box::pin(replies);
        Box::pin(std::future::ready(Ok(replies)))
    }

    async fn vote(
        &mut self,
        request: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(
            RpcKind::Vote,
            &VoteMessage::Vote(request),
            option.hard_ttl(),
        )
        .await
    }

    async fn pre_vote(
        &mut self,
        request: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(
            RpcKind::Vote,
            &VoteMessage::PreVote(request),
            option.hard_ttl(),
        )
        .await
    }

    async fn transfer_leader(
        &mut self,
        request: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(RpcKind::TransferLeader, &request, option.hard_ttl())
            .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::alias::SnapshotOf<TypeConfig, SnapshotFile>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        // The header carries the metadata of the file actually sent, which is
        // newer than `snapshot.meta` if a build replaced the file since openraft
        // read it; the receiver refuses a file offered under other metadata.
        let (meta, file) =
            open_snapshot_file(snapshot.snapshot.fs.as_ref(), &snapshot.snapshot.path)
                .map_err(|error| StreamingError::Network(NetworkError::new(&error)))?;
        let header = Bytes::from(codec::encode(&SnapshotHeader { vote, meta }));
        let chunks = file_chunks(file);
        // A snapshot can be large: allow it well beyond a heartbeat's deadline.
        let deadline = option.hard_ttl().max(Duration::from_secs(600));
        let send = self
            .client
            .send_snapshot(&self.addr, self.group, header, chunks, deadline);
        let reply = tokio::select! {
            closed = cancel => return Err(StreamingError::Closed(closed)),
            reply = send => reply,
        };
        let reply = reply.map_err(|error| match error {
            RpcError::Unreachable(_) => {
                StreamingError::Unreachable(Unreachable::from_string(error))
            }
            other => StreamingError::Network(NetworkError::from_string(other)),
        })?;
        decode_reply(&reply)
            .map_err(|error| StreamingError::Network(NetworkError::from_string(error)))
    }
}

/// The replies of a pipelined replication session.
type AppendReplies<'s> =
    BoxStream<'s, Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>>;

/// What opening a replication session needs.
struct Opening {
    client: RpcClient,
    addr: String,
    group: GroupId,
    deadline: Duration,
}

/// An open session: its replies, the send times of the requests still
/// owed a reply, and the reply deadline.
type OpenSession = (IncomingMessages, SendTimes, Duration);

/// A replication session: not yet open, open (with the replies already
/// known and not yet handed to openraft), or over.
enum SessionState<S> {
    Start(Opening, S),
    Open(
        IncomingMessages,
        SendTimes,
        Duration,
        VecDeque<StreamAppendResult<TypeConfig>>,
    ),
    Done,
}

/// Requests without entries that a sent request stands in for: how many,
/// and the log position they (and it) start from.
#[derive(Debug, Clone, Default, PartialEq)]
struct Folded {
    count: usize,
    prev: Option<LogId>,
}

impl Folded {
    /// The follower's answer to each folded request, given its answer to
    /// the request that carried them: each starts where that one starts and
    /// appends nothing, so it matches up to that start when that one was
    /// accepted, and meets the same conflict or higher vote when it was not.
    fn answer(&self, carrier: &StreamAppendResult<TypeConfig>) -> StreamAppendResult<TypeConfig> {
        match carrier {
            Ok(_) => Ok(self.prev),
            Err(error) => Err(error.clone()),
        }
    }
}

/// Folds each request without entries into the next request of the same
/// leader vote and start, if one comes within `hold`: that one carries a
/// commit index at least as new, so the follower learns the same and the
/// session sends one message instead of two. Each request that goes out
/// says how many it stands in for, so their replies can be given in order.
/// A request that cannot be folded, the end of `input` or the end of the
/// hold sends what is held as it is.
fn fold_commit_updates<S>(
    input: S,
    hold: Duration,
) -> impl Stream<Item = (AppendEntriesRequest<TypeConfig>, Folded)> + Send + Unpin + 'static
where
    S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
{
    struct Folding<S> {
        input: S,
        /// A request without entries not yet sent, until when it may wait,
        /// and the ones it already stands in for.
        held: Option<(AppendEntriesRequest<TypeConfig>, Instant, usize)>,
        /// A request read while one was held that could not take its place.
        next: Option<AppendEntriesRequest<TypeConfig>>,
        ended: bool,
        /// Nothing was sent yet: a session's first request (openraft's probe
        /// of where the follower's log stands) goes out at once.
        first: bool,
    }
    let folding = Folding {
        input,
        held: None,
        next: None,
        ended: false,
        first: true,
    };
    Box::pin(futures_util::stream::unfold(
        folding,
        move |mut folding| async move {
            loop {
                let Some((held, until, count)) = folding.held.take() else {
                    let request = match folding.next.take() {
                        Some(request) => request,
                        None if folding.ended => return None,
                        None => match folding.input.next().await {
                            Some(request) => request,
                            None => return None,
                        },
                    };
                    if request.entries.is_empty() && !folding.first {
                        folding.held = Some((request, Instant::now() + hold, 0));
                        continue;
                    }
                    folding.first = false;
                    return Some(((request, Folded::default()), folding));
                };
                let folded = Folded {
                    count,
                    prev: held.prev_log_id,
                };
                if folding.ended {
                    return Some(((held, folded), folding));
                }
                match tokio::time::timeout_at(until, folding.input.next()).await {
                    Err(_) => return Some(((held, folded), folding)),
                    Ok(None) => {
                        folding.ended = true;
                        return Some(((held, folded), folding));
                    }
                    Ok(Some(request))
                        if request.vote == held.vote && request.prev_log_id == held.prev_log_id =>
                    {
                        if request.entries.is_empty() {
                            folding.held = Some((request, until, count + 1));
                            continue;
                        }
                        let folded = Folded {
                            count: count + 1,
                            ..folded
                        };
                        return Some(((request, folded), folding));
                    }
                    Ok(Some(request)) => {
                        folding.next = Some(request);
                        return Some(((held, folded), folding));
                    }
                }
            }
        },
    ))
}

impl Opening {
    /// Sends a heartbeat with the others towards the same peer and answers
    /// it as a session would.
    async fn heartbeat(
        self,
        request: AppendEntriesRequest<TypeConfig>,
    ) -> Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>> {
        // No entries: the request's log ends where it starts.
        let prev = request.prev_log_id;
        let payload = Bytes::from(codec::encode(&request));
        let reply = self
            .client
            .heartbeat(&self.addr, self.group, payload, self.deadline)
            .await
            .map_err(rpc_error)?;
        let response: AppendEntriesResponse<TypeConfig> = decode_reply(&reply)
            .map_err(|error| RPCError::Network(NetworkError::from_string(error)))?;
        Ok(response.into_stream_result(prev, prev))
    }

    /// Waits for openraft's first request, then opens the stream with it and
    /// the rest of `input`. `None` when `input` ends first.
    async fn open<S>(self, mut input: S) -> Option<Result<OpenSession, RPCError<TypeConfig>>>
    where
        S: Stream<Item = (AppendEntriesRequest<TypeConfig>, Folded)> + Send + Unpin + 'static,
    {
        let first = input.next().await?;
        let sent = SendTimes::default();
        let sending = sent.clone();
        let requests =
            futures_util::stream::iter([first])
                .chain(input)
                .map(move |(request, folded)| {
                    sending.push(Instant::now(), folded);
                    Bytes::from(codec::encode_append(&request))
                });
        let opened = self
            .client
            .open_stream(&self.addr, self.group, Box::pin(requests), self.deadline)
            .await;
        Some(match opened {
            Ok(replies) => Ok((replies, sent, self.deadline)),
            Err(error) => Err(rpc_error(error)),
        })
    }
}

/// When each request of a session still waiting for its reply was sent,
/// and the requests it stands in for, oldest first.
#[derive(Clone, Default)]
struct SendTimes(Arc<Mutex<VecDeque<(Instant, Folded)>>>);

impl SendTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Instant, Folded)>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, at: Instant, folded: Folded) {
        self.lock().push_back((at, folded));
    }

    fn oldest(&self) -> Option<Instant> {
        self.lock().front().map(|(at, _)| *at)
    }

    fn answered(&self) -> Folded {
        self.lock()
            .pop_front()
            .map(|(_, folded)| folded)
            .unwrap_or_default()
    }
}

/// The next reply of a session, with the requests its request stood in for,
/// or the error that ends it: a transport error, a remote failure, or a
/// reply overdue by `deadline`. `None` when the follower ended the session.
async fn next_reply(
    replies: &mut IncomingMessages,
    sent: &SendTimes,
    deadline: Duration,
) -> Option<Result<(StreamAppendResult<TypeConfig>, Folded), RPCError<TypeConfig>>> {
    loop {
        // With nothing awaited, wake after a deadline to look again.
        let due = sent.oldest().unwrap_or_else(Instant::now) + deadline;
        match tokio::time::timeout_at(due, replies.next()).await {
            Ok(Some(Ok(reply))) => {
                let folded = sent.answered();
                let reply = decode_reply::<StreamAppendResult<TypeConfig>>(&reply);
                return Some(
                    reply
                        .map(|reply| (reply, folded))
                        .map_err(|error| RPCError::Network(NetworkError::from_string(error))),
                );
            }
            Ok(Some(Err(error))) => return Some(Err(rpc_error(error))),
            Ok(None) => return None,
            Err(_) => {
                if sent
                    .oldest()
                    .is_some_and(|oldest| oldest + deadline <= Instant::now())
                {
                    return Some(Err(rpc_error(RpcError::Timeout)));
                }
            }
        }
    }
}

/// Streams a file in [`SNAPSHOT_CHUNK_BYTES`] chunks.
fn file_chunks(file: Box<dyn Read + Send>) -> rpc::ChunkStream {
    let stream = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buffer = vec![0u8; SNAPSHOT_CHUNK_BYTES];
        let mut filled = 0;
        while filled < buffer.len() {
            match file.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(read) => filled += read,
                // The receiver checks the snapshot's checksums: a short stream fails there.
                Err(_) => return None,
            }
        }
        if filled == 0 {
            return None;
        }
        buffer.truncate(filled);
        Some((Bytes::from(buffer), Some(file)))
    });
    Box::pin(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_millis(50);

    fn replies(items: Vec<Result<Bytes, RpcError>>) -> IncomingMessages {
        Box::pin(futures_util::stream::iter(items).chain(futures_util::stream::pending()))
    }

    #[tokio::test]
    async fn a_reply_is_decoded_and_answers_the_oldest_request() {
        let sent = SendTimes::default();
        sent.push(Instant::now(), Folded::default());
        sent.push(Instant::now(), Folded::default());
        let ok: Result<StreamAppendResult<TypeConfig>, String> = Ok(Ok(None));
        let mut stream = replies(vec![Ok(Bytes::from(codec::encode(&ok)))]);
        let reply = next_reply(&mut stream, &sent, DEADLINE).await;
        assert!(matches!(reply, Some(Ok((Ok(None), _)))), "{reply:?}");
        assert_eq!(sent.lock().len(), 1);
        // The second request's reply is overdue.
        let reply = next_reply(&mut stream, &sent, DEADLINE).await;
        assert!(
            matches!(reply, Some(Err(RPCError::Network(_)))),
            "{reply:?}"
        );
    }

    fn request(
        term: u64,
        prev: u64,
        commit: u64,
        entries: &[u64],
    ) -> AppendEntriesRequest<TypeConfig> {
        use openraft::entry::RaftEntry;
        use openraft::testing::log_id;
        AppendEntriesRequest {
            vote: Vote::new_committed(term, 1),
            prev_log_id: Some(log_id::<TypeConfig>(term, 1, prev)),
            leader_commit: Some(log_id::<TypeConfig>(term, 1, commit)),
            entries: entries
                .iter()
                .map(|index| crate::types::Entry::new_blank(log_id::<TypeConfig>(term, 1, *index)))
                .collect(),
        }
    }

    /// Runs `fold_commit_updates` over requests that arrive `gap` apart and
    /// returns what goes out: (prev index, entry count, commit index, folded).
    async fn folded(
        requests: Vec<AppendEntriesRequest<TypeConfig>>,
        gap: Duration,
    ) -> Vec<(u64, usize, u64, usize)> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            for request in requests {
                let _ = sender.send(request);
                tokio::time::sleep(gap).await;
            }
        });
        let input = tokio_stream_of(receiver);
        fold_commit_updates(input, COMMIT_UPDATE_HOLD)
            .map(|(request, folded)| {
                if folded.count > 0 {
                    assert_eq!(
                        folded.prev, request.prev_log_id,
                        "folded ones start where it does"
                    );
                }
                (
                    request.prev_log_id.map_or(0, |id| id.index),
                    request.entries.len(),
                    request.leader_commit.map_or(0, |id| id.index),
                    folded.count,
                )
            })
            .collect()
            .await
    }

    fn tokio_stream_of<T: Send + 'static>(
        mut receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
    ) -> impl Stream<Item = T> + Send + Unpin + 'static {
        Box::pin(futures_util::stream::poll_fn(move |context| {
            receiver.poll_recv(context)
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn commit_updates_ride_on_the_next_request() {
        // A probe, entries 1-2, two commit updates, entries 3: the updates
        // go with entries 3, which answers for them.
        let sent = folded(
            vec![
                request(1, 0, 0, &[]),
                request(1, 0, 0, &[1, 2]),
                request(1, 2, 1, &[]),
                request(1, 2, 2, &[]),
                request(1, 2, 2, &[3]),
            ],
            Duration::from_millis(1),
        )
        .await;
        assert_eq!(sent, vec![(0, 0, 0, 0), (0, 2, 0, 0), (2, 1, 2, 2)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_commit_update_goes_alone_when_nothing_follows_in_time() {
        let sent = folded(
            vec![
                request(1, 0, 0, &[1]),
                request(1, 1, 1, &[]),
                request(1, 1, 1, &[2]),
            ],
            COMMIT_UPDATE_HOLD * 2,
        )
        .await;
        assert_eq!(sent, vec![(0, 1, 0, 0), (1, 0, 1, 0), (1, 1, 1, 0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_from_elsewhere_in_the_log_or_another_term_is_not_folded_into() {
        let sent = folded(
            vec![
                request(1, 0, 0, &[1]),
                request(1, 1, 1, &[]),
                request(1, 0, 1, &[1, 2]),
                request(1, 2, 2, &[]),
                request(2, 2, 2, &[3]),
            ],
            Duration::from_millis(1),
        )
        .await;
        assert_eq!(
            sent,
            vec![
                (0, 1, 0, 0),
                (1, 0, 1, 0),
                (0, 2, 1, 0),
                (2, 0, 2, 0),
                (2, 1, 2, 0)
            ]
        );
    }

    #[test]
    fn folded_requests_are_answered_as_their_carrier_was() {
        use openraft::raft::StreamAppendError;
        use openraft::testing::log_id;
        let folded = Folded {
            count: 2,
            prev: Some(log_id::<TypeConfig>(1, 1, 5)),
        };
        let accepted: StreamAppendResult<TypeConfig> = Ok(Some(log_id::<TypeConfig>(1, 1, 7)));
        assert_eq!(folded.answer(&accepted), Ok(folded.prev));
        let refused: StreamAppendResult<TypeConfig> =
            Err(StreamAppendError::HigherVote(Vote::new_committed(2, 3)));
        assert_eq!(folded.answer(&refused), refused);
    }

    #[tokio::test]
    async fn an_idle_session_does_not_time_out() {
        let sent = SendTimes::default();
        let mut stream = replies(Vec::new());
        let waited =
            tokio::time::timeout(DEADLINE * 4, next_reply(&mut stream, &sent, DEADLINE)).await;
        assert!(waited.is_err(), "nothing awaited, nothing overdue");
    }

    #[tokio::test]
    async fn a_remote_error_or_the_end_ends_the_session() {
        let sent = SendTimes::default();
        sent.push(Instant::now(), Folded::default());
        let failed: Result<StreamAppendResult<TypeConfig>, String> = Err("gone".into());
        let mut stream = replies(vec![Ok(Bytes::from(codec::encode(&failed)))]);
        let reply = next_reply(&mut stream, &sent, DEADLINE).await;
        assert!(
            matches!(reply, Some(Err(RPCError::Network(_)))),
            "{reply:?}"
        );
        let mut stream = replies(vec![Err(RpcError::Unreachable("down".into()))]);
        let reply = next_reply(&mut stream, &sent, DEADLINE).await;
        assert!(
            matches!(reply, Some(Err(RPCError::Unreachable(_)))),
            "{reply:?}"
        );
        let mut ended: IncomingMessages = Box::pin(futures_util::stream::empty());
        assert!(next_reply(&mut ended, &sent, DEADLINE).await.is_none());
    }

    /// Answers appends as a follower that has every entry would, and
    /// records which way each session or call came: `unary` (alone or in
    /// a heartbeat batch) or `stream`.
    #[derive(Default)]
    struct Ways(Mutex<Vec<&'static str>>);

    impl Ways {
        fn taken(&self) -> Vec<&'static str> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl rpc::RaftHandler for Ways {
        async fn handle(&self, _: RpcKind, _: u64, _: Bytes) -> Result<Bytes, String> {
            self.0.lock().unwrap().push("unary");
            let reply: Result<AppendEntriesResponse<TypeConfig>, String> =
                Ok(AppendEntriesResponse::Success);
            Ok(Bytes::from(codec::encode(&reply)))
        }

        async fn stream(
            &self,
            _: u64,
            messages: IncomingMessages,
        ) -> Result<rpc::MessageStream, String> {
            self.0.lock().unwrap().push("stream");
            let replies = messages.map(|_| {
                let reply: Result<StreamAppendResult<TypeConfig>, String> = Ok(Ok(None));
                Bytes::from(codec::encode(&reply))
            });
            Ok(Box::pin(replies))
        }

        async fn install_snapshot(
            &self,
            _: u64,
            _: Bytes,
            _: rpc::IncomingChunks,
        ) -> Result<Bytes, String> {
            Err("no snapshots here".to_string())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_of_one_request_without_entries_goes_as_a_heartbeat() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let ways = Arc::new(Ways::default());
        tokio::spawn(rpc::serve(listener, ways.clone(), std::future::pending()));
        let mut link = PeerLink {
            client: RpcClient::new(rpc::ClientOptions::default()),
            group: 1,
            target: 2,
            addr,
            append_deadline: Duration::from_secs(5),
        };
        let option = || RPCOption::new(Duration::from_secs(5));
        // openraft's heartbeat: one request without entries, then the end.
        // It is answered as the session would have been: matching up to
        // where it starts.
        let heartbeat = request(1, 3, 3, &[]);
        let input = Box::pin(futures_util::stream::once(async move { heartbeat }));
        let mut replies = link.stream_append(input, option()).await.unwrap();
        let reply = replies.next().await;
        assert!(
            matches!(&reply, Some(Ok(Ok(Some(id)))) if id.index == 3),
            "{reply:?}"
        );
        assert!(replies.next().await.is_none());
        drop(replies);
        assert_eq!(ways.taken(), vec!["unary"]);
        // One request with entries: a session.
        let append = request(1, 3, 3, &[4]);
        let input = Box::pin(futures_util::stream::once(async move { append }));
        let mut replies = link.stream_append(input, option()).await.unwrap();
        let reply = replies.next().await;
        assert!(matches!(&reply, Some(Ok(Ok(None)))), "{reply:?}");
        drop(replies);
        assert_eq!(ways.taken(), vec!["stream"]);
        // A request without entries with more to come (openraft's probe
        // opening a replication session): a session too.
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        sender.send(request(1, 3, 3, &[])).unwrap();
        let mut replies = link
            .stream_append(tokio_stream_of(receiver), option())
            .await
            .unwrap();
        let reply = replies.next().await;
        assert!(matches!(&reply, Some(Ok(Ok(None)))), "{reply:?}");
        sender.send(request(1, 3, 3, &[4])).unwrap();
        let reply = replies.next().await;
        assert!(matches!(&reply, Some(Ok(Ok(None)))), "{reply:?}");
        drop(replies);
        assert_eq!(ways.taken(), vec!["stream"]);
    }
}
