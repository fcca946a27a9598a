//! openraft's network over the `rpc` crate: one cached gRPC channel per peer,
//! shared by every group; each message names its group.
//!
//! Payloads are openraft's own messages in the crate's codec. A reply payload is
//! `Result<Response, String>`: `Err` carries a remote failure (for instance the
//! group is not hosted there), which openraft sees as a network error and retries
//! with backoff.

use std::future::Future;
use std::io::Read;
use std::time::Duration;

use bytes::Bytes;
use openraft::error::RPCError;
use openraft::error::{NetworkError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use rpc::{RpcClient, RpcError, RpcKind};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

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
