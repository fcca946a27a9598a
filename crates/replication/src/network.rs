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
use futures_util::{Stream, StreamExt};
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
use crate::types::{GroupId, NodeAddr, NodeId, SnapshotMeta, TypeConfig, Vote};

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
        let payload = Bytes::from(codec::encode(request));
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
        // openraft gives an append the heartbeat interval (50 ms), but a
        // follower answers only once the entries are on its disk: one slow
        // fsync on a busy machine made every append time out and be sent
        // again, and the group stopped committing for seconds. A slow peer
        // now only slows its own stream; a dead one is still given up on
        // well within an election timeout, and leases count from the send.
        let deadline = option.hard_ttl().max(self.append_deadline);
        self.call(RpcKind::AppendEntries, &request, deadline).await
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
                let (mut replies, sent, deadline) = match state {
                    SessionState::Start(opening, input) => match opening.open(input).await? {
                        Ok(open) => open,
                        Err(error) => return Some((Err(error), SessionState::Done)),
                    },
                    SessionState::Open(replies, sent, deadline) => (replies, sent, deadline),
                    SessionState::Done => return None,
                };
                match next_reply(&mut replies, &sent, deadline).await {
                    Some(Ok(reply)) => {
                        Some((Ok(reply), SessionState::Open(replies, sent, deadline)))
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

/// A replication session: not yet open, open, or over.
enum SessionState<S> {
    Start(Opening, S),
    Open(IncomingMessages, SendTimes, Duration),
    Done,
}

impl Opening {
    /// Waits for openraft's first request, then opens the stream with it and
    /// the rest of `input`. `None` when `input` ends first.
    async fn open<S>(self, mut input: S) -> Option<Result<OpenSession, RPCError<TypeConfig>>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
    {
        let first = input.next().await?;
        let sent = SendTimes::default();
        let sending = sent.clone();
        let requests = futures_util::stream::iter([first])
            .chain(input)
            .map(move |request| {
                sending.push(Instant::now());
                Bytes::from(codec::encode(&request))
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
/// oldest first.
#[derive(Clone, Default)]
struct SendTimes(Arc<Mutex<VecDeque<Instant>>>);

impl SendTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Instant>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, at: Instant) {
        self.lock().push_back(at);
    }

    fn oldest(&self) -> Option<Instant> {
        self.lock().front().copied()
    }

    fn answered(&self) {
        self.lock().pop_front();
    }
}

/// The next reply of a session, or the error that ends it: a transport
/// error, a remote failure, or a reply overdue by `deadline`. `None` when
/// the follower ended the session.
async fn next_reply(
    replies: &mut IncomingMessages,
    sent: &SendTimes,
    deadline: Duration,
) -> Option<Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>> {
    loop {
        // With nothing awaited, wake after a deadline to look again.
        let due = sent.oldest().unwrap_or_else(Instant::now) + deadline;
        match tokio::time::timeout_at(due, replies.next()).await {
            Ok(Some(Ok(reply))) => {
                sent.answered();
                let reply = decode_reply::<StreamAppendResult<TypeConfig>>(&reply);
                return Some(
                    reply.map_err(|error| RPCError::Network(NetworkError::from_string(error))),
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
        sent.push(Instant::now());
        sent.push(Instant::now());
        let ok: Result<StreamAppendResult<TypeConfig>, String> = Ok(Ok(None));
        let mut stream = replies(vec![Ok(Bytes::from(codec::encode(&ok)))]);
        let reply = next_reply(&mut stream, &sent, DEADLINE).await;
        assert!(matches!(reply, Some(Ok(Ok(None)))), "{reply:?}");
        assert_eq!(sent.lock().len(), 1);
        // The second request's reply is overdue.
        let reply = next_reply(&mut stream, &sent, DEADLINE).await;
        assert!(
            matches!(reply, Some(Err(RPCError::Network(_)))),
            "{reply:?}"
        );
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
        sent.push(Instant::now());
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
}
