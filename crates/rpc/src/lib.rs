//! Node-to-node gRPC: the Raft transport. The only crate that knows protobuf.
//!
//! Messages are opaque byte payloads tagged with a Raft group id; the
//! replication layer encodes openraft's messages itself. One HTTP/2 channel per
//! peer address is shared by every group, with keepalive (so a connection cut by
//! a partition is noticed and replaced) and a deadline on every request.
//! Besides unary calls and snapshot streams, a stream session carries one
//! group's messages both ways without waiting for each reply (pipelined
//! replication). Heartbeats of many groups to one peer travel together, as
//! one call per node pair and round ([`RpcClient::heartbeat`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

pub use bytes::Bytes;
use futures_util::{FutureExt, Stream, StreamExt};
use hyper_util::rt::TokioIo;
use tonic::codegen::http::Uri;
use tonic::codegen::Service as TowerService;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status, Streaming};

mod pb {
    tonic::include_proto!("slotraft.raft.v1");
}

use pb::raft_client::RaftClient;
use pb::raft_server::{Raft, RaftServer};
use pb::{GroupMessage, GroupReply, HeartbeatBatch, HeartbeatReplies, SnapshotChunk};

/// Largest message accepted or sent (a batch of log entries, a snapshot chunk).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The unary Raft calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcKind {
    AppendEntries,
    Vote,
    TransferLeader,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum RpcError {
    /// No connection could be made (nothing listening, connection refused).
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The deadline passed before a reply.
    #[error("timeout")]
    Timeout,
    /// The peer answered with an error, or the exchange failed midway.
    #[error("remote: {0}")]
    Remote(String),
    /// The peer does not serve this call (an older version).
    #[error("unimplemented: {0}")]
    Unimplemented(String),
}

/// How long a peer that refused stream sessions (an older version) is
/// served by unary calls before a session is tried again: an upgraded peer
/// gets them back within this time.
pub const STREAMS_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Most heartbeat replies one message of a batch's answer carries.
const MAX_HEARTBEAT_REPLIES_PER_MESSAGE: usize = 1024;

/// How long the first heartbeat queued towards a peer waits for the others
/// of its round (every group's leader heartbeats at the node's beat, through
/// a few task hops each) before they all go as one call.
pub const HEARTBEAT_GATHER: Duration = Duration::from_millis(1);

/// Client connection settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// How many streams this client reset (a call dropped at its deadline)
    /// HTTP/2 remembers per connection, and for how long, so that their late
    /// replies are ignored rather than answered with a reset of their own.
    /// `None` keeps h2's defaults: up to 50, for 1 s of the operating
    /// system's clock. A simulation needs another setting: whether a late
    /// reply finds its stream remembered would otherwise depend on how fast
    /// the host ran the simulation, not on simulated time, and the extra
    /// reset on the wire changes the rest of the run
    /// ([`ClientOptions::simulated`]).
    pub reset_streams: Option<(usize, Duration)>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_millis(500),
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(2),
            reset_streams: None,
        }
    }
}

impl ClientOptions {
    /// The defaults, except that reset streams are remembered (up to 100,000
    /// per connection) for longer than any simulation runs, so that no
    /// real-time clock decides what a late reply does.
    pub fn simulated() -> Self {
        ClientOptions {
            reset_streams: Some((100_000, Duration::from_secs(365 * 24 * 3600))),
            ..ClientOptions::default()
        }
    }
}

/// A snapshot's data chunks, as sent.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

/// A snapshot's data chunks, as received.
pub type IncomingChunks = Pin<Box<dyn Stream<Item = Result<Bytes, RpcError>> + Send>>;

/// Messages sent on a stream session, in order.
pub type MessageStream = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

/// Messages received on a stream session, in order; an error ends it.
pub type IncomingMessages = Pin<Box<dyn Stream<Item = Result<Bytes, RpcError>> + Send>>;

/// The metadata key naming the group of a stream session.
const GROUP_METADATA: &str = "group-id";

/// Messages queued towards a stream session's connection before its sender
/// waits (HTTP/2 flow control bounds what is in flight beyond that).
const STREAM_QUEUE: usize = 16;

/// A byte stream to a peer, from a [`Connector`].
pub trait PeerStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> PeerStream for T {}

/// Opens a connection to `host:port`.
pub type ConnectFuture = Pin<Box<dyn Future<Output = std::io::Result<Box<dyn PeerStream>>> + Send>>;

/// Dials peers instead of the operating system's TCP (a simulated network).
pub type Connector = Arc<dyn Fn(String) -> ConnectFuture + Send + Sync>;

/// Adapts a [`Connector`] to the service tonic dials through.
#[derive(Clone)]
struct Dial(Connector);

impl TowerService<Uri> for Dial {
    type Response = TokioIo<Box<dyn PeerStream>>;
    type Error = std::io::Error;
    type Future =
        Pin<Box<dyn Future<Output = std::io::Result<TokioIo<Box<dyn PeerStream>>>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let address = uri.authority().map(|authority| authority.to_string());
        let connector = self.0.clone();
        Box::pin(async move {
            let address = address.ok_or_else(|| std::io::Error::other("peer uri has no host"))?;
            Ok(TokioIo::new(connector(address).await?))
        })
    }
}

/// Peers that answered a kind of call `Unimplemented` (an older version),
/// and when: they are not asked again for [`STREAMS_RETRY_AFTER`].
#[derive(Clone, Default)]
struct Refusals(Arc<Mutex<HashMap<String, tokio::time::Instant>>>);

impl Refusals {
    fn allow(&self, addr: &str) -> bool {
        let mut refused = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match refused.get(addr) {
            Some(at) if at.elapsed() < STREAMS_RETRY_AFTER => false,
            Some(_) => {
                refused.remove(addr);
                true
            }
            None => true,
        }
    }

    fn note(&self, addr: &str) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(addr.to_string(), tokio::time::Instant::now());
    }
}

/// A heartbeat waiting to go to its peer with the others of its round.
struct Beat {
    group: u64,
    payload: Bytes,
    deadline: Duration,
    reply: tokio::sync::oneshot::Sender<Result<Bytes, RpcError>>,
}

/// Calls Raft RPCs on peers, one cached channel per peer address.
#[derive(Clone)]
pub struct RpcClient {
    options: ClientOptions,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    connector: Option<Connector>,
    /// Peers that answered a stream session with `Unimplemented`.
    without_streams: Refusals,
    /// Peers that answered a heartbeat batch with `Unimplemented`.
    without_batches: Refusals,
    /// Heartbeats gathering towards each peer (see [`RpcClient::heartbeat`]).
    beats: Arc<Mutex<HashMap<String, Vec<Beat>>>>,
}

impl RpcClient {
    pub fn new(options: ClientOptions) -> Self {
        RpcClient {
            options,
            channels: Arc::new(Mutex::new(HashMap::new())),
            connector: None,
            without_streams: Refusals::default(),
            without_batches: Refusals::default(),
            beats: Arc::default(),
        }
    }

    /// Whether stream sessions to `addr` are worth opening: false for
    /// [`STREAMS_RETRY_AFTER`] after the peer refused one as unknown.
    pub fn streams_supported(&self, addr: &str) -> bool {
        self.without_streams.allow(addr)
    }

    /// Whether heartbeats to `addr` go in batches: false for
    /// [`STREAMS_RETRY_AFTER`] after the peer refused one as unknown.
    pub fn heartbeat_batches_supported(&self, addr: &str) -> bool {
        self.without_batches.allow(addr)
    }

    /// A heartbeat (an AppendEntries without entries) of `group` to `addr`,
    /// answered as [`RpcClient::call`] answers one. It joins the heartbeats
    /// queued towards the same peer; the first one queued sends them all as
    /// one `HeartbeatStream` call after [`HEARTBEAT_GATHER`], so the groups a
    /// node leads cost one message per peer and round, not one stream each.
    /// A peer that does not know the call (an older version) gets unary
    /// calls instead, and is not asked again for a while.
    pub async fn heartbeat(
        &self,
        addr: &str,
        group: u64,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<Bytes, RpcError> {
        if !self.heartbeat_batches_supported(addr) {
            return self
                .call(addr, RpcKind::AppendEntries, group, payload, deadline)
                .await;
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let first = {
            let mut beats = self
                .beats
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let queue = beats.entry(addr.to_string()).or_default();
            queue.push(Beat {
                group,
                payload,
                deadline,
                reply,
            });
            queue.len() == 1
        };
        if first {
            let client = self.clone();
            let addr = addr.to_string();
            tokio::spawn(async move {
                tokio::time::sleep(HEARTBEAT_GATHER).await;
                client.send_heartbeats(&addr).await;
            });
        }
        match tokio::time::timeout(deadline, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(RpcError::Remote("heartbeat batch dropped".to_string())),
            Err(_) => Err(RpcError::Timeout),
        }
    }

    /// Sends the heartbeats queued towards `addr` as one call and hands each
    /// its reply.
    async fn send_heartbeats(&self, addr: &str) {
        let beats = self
            .beats
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(addr)
            .unwrap_or_default();
        let Some(deadline) = beats.iter().map(|beat| beat.deadline).max() else {
            return;
        };
        let batch = HeartbeatBatch {
            messages: beats
                .iter()
                .map(|beat| GroupMessage {
                    group_id: beat.group,
                    payload: beat.payload.clone(),
                })
                .collect(),
        };
        let started = tokio::time::Instant::now();
        let sent = match self.client(addr) {
            Ok(mut client) => {
                let mut request = Request::new(batch);
                request.set_timeout(deadline);
                within(deadline, client.heartbeat_stream(request)).await
            }
            Err(error) => Err(error),
        };
        let mut replies = match sent {
            Ok(replies) => replies,
            Err(RpcError::Unimplemented(_)) => {
                self.without_batches.note(addr);
                let calls = beats.into_iter().map(|beat| async move {
                    let result = self
                        .call(
                            addr,
                            RpcKind::AppendEntries,
                            beat.group,
                            beat.payload,
                            beat.deadline,
                        )
                        .await;
                    let _ = beat.reply.send(result);
                });
                futures_util::future::join_all(calls).await;
                return;
            }
            Err(error) => {
                for beat in beats {
                    let _ = beat.reply.send(Err(error.clone()));
                }
                return;
            }
        };
        // Each reply goes to its heartbeat as it arrives; whatever is left
        // unanswered when the replies end (or the deadline passes) fails
        // like a failed call. The replies are read to their end, so the
        // call closes as answered instead of being reset.
        let mut waiting: Vec<Option<Beat>> = beats.into_iter().map(Some).collect();
        let failure = 'replies: loop {
            let next = tokio::time::timeout_at(started + deadline, replies.message()).await;
            let message = match next {
                Ok(Ok(Some(message))) => message,
                Ok(Ok(None)) => break None,
                Ok(Err(status)) => break Some(status_error(status)),
                Err(_) => break Some(RpcError::Timeout),
            };
            for reply in message.replies {
                let slot = waiting.get_mut(reply.position as usize);
                let Some(beat) =
                    slot.and_then(|slot| slot.take_if(|beat| beat.group == reply.group_id))
                else {
                    break 'replies Some(RpcError::Remote(format!(
                        "a heartbeat reply for group {} at position {} of a batch of {}",
                        reply.group_id,
                        reply.position,
                        waiting.len()
                    )));
                };
                let result = if reply.error.is_empty() {
                    Ok(reply.payload)
                } else {
                    Err(RpcError::Remote(reply.error))
                };
                let _ = beat.reply.send(result);
            }
        };
        for beat in waiting.into_iter().flatten() {
            let error = failure.clone().unwrap_or_else(|| {
                RpcError::Remote("no reply to a heartbeat of its batch".to_string())
            });
            let _ = beat.reply.send(Err(error));
        }
    }

    /// A client that opens connections through `connector` (the seam a
    /// simulated network plugs into) instead of the operating system.
    pub fn with_connector(options: ClientOptions, connector: Connector) -> Self {
        RpcClient {
            connector: Some(connector),
            ..RpcClient::new(options)
        }
    }

    /// The channel to `addr`, created (lazily connecting) on first use.
    fn channel(&self, addr: &str) -> Result<Channel, RpcError> {
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(channel) = channels.get(addr) {
            return Ok(channel.clone());
        }
        let endpoint = self.endpoint(addr)?;
        let channel = match &self.connector {
            Some(connector) => endpoint.connect_with_connector_lazy(Dial(connector.clone())),
            None => endpoint.connect_lazy(),
        };
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    /// The endpoint settings for a peer.
    fn endpoint(&self, addr: &str) -> Result<Endpoint, RpcError> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|error| RpcError::Unreachable(format!("bad address {addr}: {error}")))?;
        let endpoint = endpoint
            .connect_timeout(self.options.connect_timeout)
            .http2_keep_alive_interval(self.options.keepalive_interval)
            .keep_alive_timeout(self.options.keepalive_timeout)
            .keep_alive_while_idle(true)
            .tcp_nodelay(true);
        Ok(match self.options.reset_streams {
            Some((count, duration)) => endpoint
                .http2_max_concurrent_reset_streams(count)
                .http2_reset_stream_duration(duration),
            None => endpoint,
        })
    }

    fn client(&self, addr: &str) -> Result<RaftClient<Channel>, RpcError> {
        Ok(RaftClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    /// Drops the cached channel to `addr`; the next call reconnects.
    pub fn forget(&self, addr: &str) {
        self.channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(addr);
    }

    /// Number of cached channels (one per peer address).
    pub fn channel_count(&self) -> usize {
        self.channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// One unary call with a deadline.
    pub async fn call(
        &self,
        addr: &str,
        kind: RpcKind,
        group: u64,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<Bytes, RpcError> {
        let mut client = self.client(addr)?;
        let mut request = Request::new(GroupMessage {
            group_id: group,
            payload,
        });
        request.set_timeout(deadline);
        let call = async move {
            match kind {
                RpcKind::AppendEntries => client.append_entries(request).await,
                RpcKind::Vote => client.vote(request).await,
                RpcKind::TransferLeader => client.transfer_leader(request).await,
            }
        };
        Ok(within(deadline, call).await?.payload)
    }

    /// Opens a stream session for `group` on the channel to `addr`: every
    /// message of `messages` is sent as soon as it is ready, without waiting
    /// for replies, and the replies come back in the order the peer sends
    /// them. `deadline` bounds opening the session, and how long the replies
    /// to messages already sent are still read once the session is dropped.
    /// Dropping the returned stream stops polling `messages` (after taking
    /// what is ready at once); the messages taken still go out and the
    /// stream is then closed, not reset, so the peer handles every message
    /// it was sent, as it would a unary call already on its way. The
    /// returned future owns what it uses.
    pub fn open_stream(
        &self,
        addr: &str,
        group: u64,
        messages: MessageStream,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<IncomingMessages, RpcError>> + Send + 'static>> {
        let client = self.client(addr);
        let this = self.clone();
        let addr = addr.to_string();
        Box::pin(async move {
            let mut client = client?;
            // Messages travel through a channel fed by a task of our own, for
            // the same reason as a snapshot's chunks, and so that ending the
            // session stops pulling from `messages`: the connection may go on
            // polling a request body after its reply was dropped.
            let (sender, receiver) = tokio::sync::mpsc::channel(STREAM_QUEUE);
            let (stop, stopped) = tokio::sync::oneshot::channel();
            tokio::spawn(feed(group, messages, sender, stopped));
            let mut request = Request::new(tokio_stream::wrappers::ReceiverStream::new(receiver));
            let group_value = tonic::metadata::MetadataValue::from(group);
            request.metadata_mut().insert(GROUP_METADATA, group_value);
            let replies = within(deadline, client.append_stream(request))
                .await
                .inspect_err(|error| {
                    if matches!(error, RpcError::Unimplemented(_)) {
                        this.without_streams.note(&addr);
                    }
                })?;
            let session: IncomingMessages = Box::pin(Session {
                replies: Some(replies),
                _stop: stop,
                linger: deadline,
            });
            Ok(session)
        })
    }

    /// Streams a snapshot: `header` in the first chunk, then the data chunks.
    /// The returned future owns what it uses (it may be spawned).
    pub fn send_snapshot(
        &self,
        addr: &str,
        group: u64,
        header: Bytes,
        chunks: ChunkStream,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Bytes, RpcError>> + Send + 'static>> {
        let client = self.client(addr);
        Box::pin(async move {
            let mut client = client?;
            // Chunks travel through a channel: a concrete stream type keeps the
            // request future provably Send (a boxed stream trips the compiler's
            // higher-ranked lifetime check inside tonic's client streaming).
            let (sender, receiver) = tokio::sync::mpsc::channel(4);
            let mut stream = snapshot_stream(group, header, chunks);
            let feeder = tokio::spawn(async move {
                while let Some(chunk) = stream.next().await {
                    if sender.send(chunk).await.is_err() {
                        break;
                    }
                }
            });
            let mut request = Request::new(tokio_stream::wrappers::ReceiverStream::new(receiver));
            request.set_timeout(deadline);
            let result = within(deadline, client.install_snapshot(request)).await;
            feeder.abort();
            Ok(result?.payload)
        })
    }
}

/// The reply of a call, or the error that ended it: its status, or the
/// deadline passing first.
async fn within<T>(
    deadline: Duration,
    call: impl Future<Output = Result<Response<T>, Status>>,
) -> Result<T, RpcError> {
    match tokio::time::timeout(deadline, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(status_error(status)),
        Err(_) => Err(RpcError::Timeout),
    }
}

/// The replies of a stream session. Dropping it stops its feeder (the
/// stop sender goes with it) and leaves a task reading the replies still
/// owed, for up to `linger`, so that the stream ends cleanly instead of
/// being reset under messages in flight.
struct Session {
    replies: Option<Streaming<GroupMessage>>,
    _stop: tokio::sync::oneshot::Sender<()>,
    linger: Duration,
}

impl Stream for Session {
    type Item = Result<Bytes, RpcError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let Some(replies) = self.replies.as_mut() else {
            return Poll::Ready(None);
        };
        replies.poll_next_unpin(context).map(|reply| {
            reply.map(|reply| match reply {
                Ok(message) => Ok(message.payload),
                Err(status) => Err(status_error(status)),
            })
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let (Some(mut replies), Ok(runtime)) =
            (self.replies.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let linger = self.linger;
        runtime.spawn(async move {
            let drain = async { while let Some(Ok(_)) = replies.next().await {} };
            let _ = tokio::time::timeout(linger, drain).await;
        });
    }
}

/// Moves a session's messages into the channel its connection reads, until
/// `messages` ends or the session is dropped (`stopped`): then the messages
/// ready at once are still taken, everything taken is sent, and the
/// channel closes and with it the request stream.
async fn feed(
    group: u64,
    mut messages: MessageStream,
    sender: tokio::sync::mpsc::Sender<GroupMessage>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let mut ending = false;
    loop {
        let next = if ending {
            match messages.next().now_or_never() {
                Some(next) => next,
                None => break,
            }
        } else {
            tokio::select! {
                next = messages.next() => next,
                _ = &mut stopped => {
                    ending = true;
                    continue;
                }
            }
        };
        let Some(payload) = next else { break };
        let message = GroupMessage {
            group_id: group,
            payload,
        };
        if sender.send(message).await.is_err() {
            break;
        }
    }
}

/// The outgoing chunk stream: the header first, then the data. A free function
/// with no lifetimes, so the stream is `'static` as tonic requires.
fn snapshot_stream(
    group: u64,
    header: Bytes,
    chunks: ChunkStream,
) -> Pin<Box<dyn Stream<Item = SnapshotChunk> + Send>> {
    let first = futures_util::stream::iter([SnapshotChunk {
        group_id: group,
        header,
        data: Bytes::new(),
    }]);
    let rest = chunks.map(move |data| SnapshotChunk {
        group_id: group,
        header: Bytes::new(),
        data,
    });
    Box::pin(first.chain(rest))
}

fn status_error(status: Status) -> RpcError {
    match status.code() {
        Code::Unavailable => RpcError::Unreachable(status.message().to_string()),
        Code::DeadlineExceeded | Code::Cancelled => RpcError::Timeout,
        Code::Unimplemented => RpcError::Unimplemented(status.message().to_string()),
        _ => RpcError::Remote(status.message().to_string()),
    }
}

/// What a node does with incoming Raft RPCs.
pub trait RaftHandler: Send + Sync + 'static {
    /// A unary call for `group`; `Err` becomes an error status at the caller.
    fn handle(
        &self,
        kind: RpcKind,
        group: u64,
        payload: Bytes,
    ) -> impl Future<Output = Result<Bytes, String>> + Send;

    /// Whether this handler serves stream sessions. One that does not is
    /// answered `Unimplemented`, as a peer of a version without them
    /// answers: its callers fall back to unary calls.
    fn serves_streams(&self) -> bool {
        true
    }

    /// Whether this handler serves heartbeat batches; one that does not is
    /// answered `Unimplemented`, and its callers send each heartbeat alone.
    /// A version without stream sessions predates batches too.
    fn serves_heartbeat_batches(&self) -> bool {
        self.serves_streams()
    }

    /// A stream session for `group`: its replies to `messages`, in order.
    /// `Err` refuses the session (an error status at the caller).
    fn stream(
        &self,
        group: u64,
        messages: IncomingMessages,
    ) -> impl Future<Output = Result<MessageStream, String>> + Send;

    /// A snapshot for `group`: its header and its data chunks.
    fn install_snapshot(
        &self,
        group: u64,
        header: Bytes,
        chunks: IncomingChunks,
    ) -> impl Future<Output = Result<Bytes, String>> + Send;
}

struct Service<H> {
    handler: Arc<H>,
}

impl<H: RaftHandler> Service<H> {
    async fn unary(
        &self,
        kind: RpcKind,
        request: Request<GroupMessage>,
    ) -> Result<Response<GroupMessage>, Status> {
        let message = request.into_inner();
        let group_id = message.group_id;
        match self.handler.handle(kind, group_id, message.payload).await {
            Ok(payload) => Ok(Response::new(GroupMessage { group_id, payload })),
            Err(error) => Err(Status::internal(error)),
        }
    }
}

/// The replies of a stream session, as tonic sends them.
type ReplyStream = Pin<Box<dyn Stream<Item = Result<GroupMessage, Status>> + Send>>;

/// The replies of a heartbeat batch as their groups answer, those ready
/// together in one message.
type HeartbeatReplyStream = Pin<Box<dyn Stream<Item = Result<HeartbeatReplies, Status>> + Send>>;

#[tonic::async_trait]
impl<H: RaftHandler> Raft for Service<H> {
    type AppendStreamStream = ReplyStream;
    type HeartbeatStreamStream = HeartbeatReplyStream;

    async fn append_stream(
        &self,
        request: Request<Streaming<GroupMessage>>,
    ) -> Result<Response<ReplyStream>, Status> {
        if !self.handler.serves_streams() {
            return Err(Status::unimplemented("stream sessions are not served"));
        }
        let group_id = request
            .metadata()
            .get(GROUP_METADATA)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok())
            .ok_or_else(|| Status::invalid_argument("stream without a group-id"))?;
        let messages = request.into_inner().map(move |message| match message {
            Ok(message) if message.group_id == group_id => Ok(message.payload),
            Ok(_) => Err(RpcError::Remote("stream message for another group".into())),
            Err(status) => Err(status_error(status)),
        });
        let replies = self
            .handler
            .stream(group_id, Box::pin(messages))
            .await
            .map_err(Status::internal)?;
        let replies: ReplyStream =
            Box::pin(replies.map(move |payload| Ok(GroupMessage { group_id, payload })));
        Ok(Response::new(replies))
    }

    async fn append_entries(
        &self,
        request: Request<GroupMessage>,
    ) -> Result<Response<GroupMessage>, Status> {
        self.unary(RpcKind::AppendEntries, request).await
    }

    async fn vote(&self, request: Request<GroupMessage>) -> Result<Response<GroupMessage>, Status> {
        self.unary(RpcKind::Vote, request).await
    }

    async fn transfer_leader(
        &self,
        request: Request<GroupMessage>,
    ) -> Result<Response<GroupMessage>, Status> {
        self.unary(RpcKind::TransferLeader, request).await
    }

    /// Each heartbeat is handled as a unary append of its group, all at
    /// once; the replies go back as their groups answer (those ready at the
    /// same moment in one message), each with its position in the batch, so
    /// one slow group (its log in a long fsync, say) holds back no other
    /// group's reply.
    async fn heartbeat_stream(
        &self,
        request: Request<HeartbeatBatch>,
    ) -> Result<Response<HeartbeatReplyStream>, Status> {
        if !self.handler.serves_heartbeat_batches() {
            return Err(Status::unimplemented("heartbeat batches are not served"));
        }
        let replies: futures_util::stream::FuturesUnordered<_> = request
            .into_inner()
            .messages
            .into_iter()
            .enumerate()
            .map(|(position, message)| {
                let handler = Arc::clone(&self.handler);
                async move {
                    let group_id = message.group_id;
                    let (payload, error) = match handler
                        .handle(RpcKind::AppendEntries, group_id, message.payload)
                        .await
                    {
                        Ok(payload) => (payload, String::new()),
                        // An empty text would read as success at the caller.
                        Err(error) if error.is_empty() => (Bytes::new(), "failed".to_string()),
                        Err(error) => (Bytes::new(), error),
                    };
                    GroupReply {
                        group_id,
                        payload,
                        error,
                        position: position as u32,
                    }
                }
            })
            .collect();
        // Replies ready at the same moment (usually all of them) share a
        // message.
        let replies: HeartbeatReplyStream = Box::pin(
            replies
                .ready_chunks(MAX_HEARTBEAT_REPLIES_PER_MESSAGE)
                .map(|replies| Ok(HeartbeatReplies { replies })),
        );
        Ok(Response::new(replies))
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<GroupMessage>, Status> {
        let mut stream = request.into_inner();
        let first = match stream.message().await? {
            Some(first) => first,
            None => return Err(Status::invalid_argument("empty snapshot stream")),
        };
        let group_id = first.group_id;
        let leading = if first.data.is_empty() {
            None
        } else {
            Some(Ok(first.data))
        };
        let rest = stream.map(move |chunk| match chunk {
            Ok(chunk) if chunk.group_id == group_id => Ok(chunk.data),
            Ok(_) => Err(RpcError::Remote("snapshot chunk for another group".into())),
            Err(status) => Err(status_error(status)),
        });
        let chunks: IncomingChunks = Box::pin(futures_util::stream::iter(leading).chain(rest));
        match self
            .handler
            .install_snapshot(group_id, first.header, chunks)
            .await
        {
            Ok(payload) => Ok(Response::new(GroupMessage { group_id, payload })),
            Err(error) => Err(Status::internal(error)),
        }
    }
}

fn server() -> Server {
    Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(1)))
        .http2_keepalive_timeout(Some(Duration::from_secs(2)))
        .tcp_nodelay(true)
}

fn service<H: RaftHandler>(handler: Arc<H>) -> RaftServer<Service<H>> {
    RaftServer::new(Service { handler })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// Serves the Raft service on `listener` until `shutdown` resolves.
pub async fn serve<H: RaftHandler>(
    listener: tokio::net::TcpListener,
    handler: Arc<H>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RpcError> {
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|stream| {
        if let Ok(stream) = &stream {
            let _ = stream.set_nodelay(true);
        }
        stream
    });
    serve_with_incoming(incoming, handler, shutdown).await
}

/// Serves the Raft service over any stream of connections (the seam a simulated
/// network plugs into).
pub async fn serve_with_incoming<H, S, IO, E>(
    incoming: S,
    handler: Arc<H>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RpcError>
where
    H: RaftHandler,
    S: Stream<Item = Result<IO, E>> + Send + 'static,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // A single service needs no router: served directly, every path goes to
    // it (unknown methods get `Unimplemented`).
    server()
        .serve_with_incoming_shutdown(service(handler), incoming, shutdown)
        .await
        .map_err(|error| RpcError::Remote(error.to_string()))
}
