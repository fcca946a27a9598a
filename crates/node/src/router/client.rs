//! One task per router client: read requests (with `RequestParser`'s limits),
//! answer connection-level commands locally, queue MULTI in the router, and
//! route everything else to the leader of its slot's shard, following
//! MOVED / ASK / TRYAGAIN / CLUSTERDOWN with bounded retries and backoff.

use super::topology::redirect_address;
use super::upstream::{Failure, Upstreams};
use super::{monitor, pool, relay, whole, Router};
use bytes::{Bytes, BytesMut};
use keyspace::command::flags;
use keyspace::CommandSpec;
use resp::{Frame, Protocol, RequestLimits, RequestParser};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Attempts per command (the first try included) before the last error is
/// passed on.
const MAX_ATTEMPTS: usize = 12;
/// Backoff between retries: starts here, doubles, capped.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(640);
/// Redirects followed at once before retries start to back off too.
const FREE_REDIRECTS: usize = 2;
/// Redis's client-query-buffer-limit default: a client buffering more is dropped.
const QUERY_BUFFER_LIMIT: usize = 1024 * 1024 * 1024;
/// Replies are written once this much is pending, even mid-pipeline.
const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;
/// Commands one MULTI may queue in the router.
const MAX_QUEUED: usize = 100_000;

pub const CLUSTER_DOWN: &str = "CLUSTERDOWN The cluster is down";
pub const SLOT_NOT_SERVED: &str = "CLUSTERDOWN Hash slot not served";
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// How a request may be retried and how long its reply may take.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// Retry after an I/O failure that may have reached the node (reads only:
    /// a write's outcome would be unknown).
    pub retry_io: bool,
    /// Bound on waiting for the reply; None for a blocking command without
    /// a timeout.
    pub read_limit: Option<Duration>,
    /// A read of a client that sent READONLY: a replica may serve it.
    pub replica_read: bool,
}

/// What an error reply asks the router to do.
enum Redirect {
    None,
    Moved(String),
    Ask(String),
    /// TRYAGAIN or CLUSTERDOWN: the command was not run; retry later.
    Retry,
}

impl Redirect {
    fn of(reply: &Frame, from: &str) -> Redirect {
        let Frame::Error(text) = reply else {
            return Redirect::None;
        };
        let text = String::from_utf8_lossy(text);
        let mut words = text.split(' ');
        match words.next() {
            Some("MOVED") => match words.nth(1) {
                Some(endpoint) => Redirect::Moved(redirect_address(endpoint, from)),
                None => Redirect::None,
            },
            Some("ASK") => match words.nth(1) {
                Some(endpoint) => Redirect::Ask(redirect_address(endpoint, from)),
                None => Redirect::None,
            },
            Some("TRYAGAIN") | Some("CLUSTERDOWN") => Redirect::Retry,
            _ => Redirect::None,
        }
    }

    fn is_some(&self) -> bool {
        !matches!(self, Redirect::None)
    }
}

/// A forwarded reply: as the node sent it, or built by the router.
#[derive(Clone)]
enum Reply {
    Raw(Bytes),
    Frame(Frame),
}

impl Reply {
    /// Whether the node refused it with a redirect or a retryable error.
    fn redirects_raw(bytes: &[u8]) -> bool {
        // Only error replies can redirect; only those are parsed.
        bytes.first() == Some(&b'-')
            && resp::parse_reply(bytes)
                .ok()
                .flatten()
                .is_some_and(|(frame, _)| Redirect::of(&frame, "").is_some())
    }

    fn redirects_frame(frame: &Frame) -> bool {
        Redirect::of(frame, "").is_some()
    }
}

/// The error a client sees when retries ran out: redirects never reach it.
pub fn give_up(last: Frame) -> Frame {
    match &last {
        Frame::Error(text) if text.starts_with(b"MOVED ") || text.starts_with(b"ASK ") => {
            Frame::error_owned(format!(
                "CLUSTERDOWN the router's redirects did not settle after {MAX_ATTEMPTS} attempts (last: {})",
                String::from_utf8_lossy(text)
            ))
        }
        _ => last,
    }
}

struct Multi {
    queued: Vec<Vec<Bytes>>,
    slot: Option<u16>,
    failed: bool,
}

/// A WATCH pinned to the node (and connection) of one slot.
struct Watch {
    slot: u16,
    address: String,
}

pub struct Client {
    pub router: Arc<Router>,
    pub upstreams: Upstreams,
    protocol: Protocol,
    id: u64,
    multi: Option<Multi>,
    watch: Option<Watch>,
    /// The client sent READONLY: its reads may be served by replicas.
    readonly: bool,
    /// AUTH succeeded, or the router asks for no password.
    authenticated: bool,
}

/// Serves one client until it disconnects or breaks the protocol.
pub async fn serve(router: Arc<Router>, mut stream: TcpStream) {
    let mut client = Client {
        upstreams: Upstreams::new(router.upstream_timeout),
        id: router.next_client_id(),
        router,
        protocol: Protocol::Resp2,
        multi: None,
        watch: None,
        readonly: false,
        authenticated: false,
    };
    client.authenticated = client.router.requirepass.is_none();
    let mut parser = RequestParser::new(RequestLimits::default());
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = BytesMut::with_capacity(16 * 1024);
    let mut requests: Vec<Vec<Bytes>> = Vec::new();
    // Each request's bytes as the client sent them, when they can be passed
    // on as they are (`RequestParser::next_request_with_bytes`).
    let mut wires: Vec<Option<Bytes>> = Vec::new();
    let mut run: Vec<(u16, &'static CommandSpec)> = Vec::new();
    loop {
        // Everything the client has sent so far (up to a bound) is one batch.
        let mut broken = None;
        let depth = client.router.pipeline_depth;
        while requests.len() < depth {
            match parser.next_request_with_bytes(&mut input) {
                Ok(Some((arguments, wire))) => {
                    requests.push(arguments);
                    wires.push(wire);
                }
                Ok(None) => break,
                Err(error) => {
                    broken = Some(error);
                    break;
                }
            }
        }
        let mut next = 0;
        while next < requests.len() {
            // A run of plain keyed commands is forwarded as a pipeline.
            run.clear();
            run.extend(
                requests[next..]
                    .iter()
                    .map_while(|arguments| client.pipelinable(arguments)),
            );
            if !run.is_empty() {
                client
                    .pipeline(
                        &run,
                        &requests[next..next + run.len()],
                        &wires[next..next + run.len()],
                        &mut output,
                    )
                    .await;
                next += run.len();
            } else {
                let arguments = std::mem::take(&mut requests[next]);
                next += 1;
                let resolved = keyspace::commands::resolve(&arguments);
                let name = resolved.as_ref().ok().map(|spec| spec.name);
                let plain = client.multi.is_none();
                // Unknown commands and wrong arities get their own error first,
                // as from Redis.
                if !client.authenticated
                    && name.is_some_and(|name| !matches!(name, "auth" | "hello" | "quit" | "reset"))
                {
                    resp::encode(
                        &Frame::error("NOAUTH Authentication required."),
                        client.protocol,
                        &mut output,
                    );
                    continue;
                }
                let relays = plain && name.is_some_and(relay::starts_relay);
                if relays || (plain && name == Some("monitor")) {
                    // Pub/Sub: from here on the connection is relayed to a
                    // node; MONITOR: it carries every node's stream.
                    let taken = (std::mem::take(&mut input), std::mem::take(&mut output));
                    let router = client.router.clone();
                    let ended = if relays {
                        let rest: Vec<Vec<Bytes>> = std::iter::once(arguments)
                            .chain(requests.drain(next..))
                            .collect();
                        relay::run(
                            router,
                            stream,
                            client.protocol,
                            rest,
                            parser,
                            taken.0,
                            taken.1,
                        )
                        .await
                    } else {
                        let rest: Vec<Vec<Bytes>> = requests.drain(next..).collect();
                        monitor::run(
                            router,
                            stream,
                            client.protocol,
                            rest,
                            parser,
                            taken.0,
                            taken.1,
                        )
                        .await
                    };
                    let relay::Ended::Reset {
                        client: back,
                        parser: back_parser,
                        input: back_input,
                        after,
                    } = ended
                    else {
                        return;
                    };
                    // The node answered the RESET; the connection is the
                    // router's again, in its reset state, and what the client
                    // sent after RESET is served here.
                    (stream, parser, input) = (back, back_parser, back_input);
                    output = BytesMut::with_capacity(16 * 1024);
                    client.reset().await;
                    requests = after;
                    wires = vec![None; requests.len()];
                    next = 0;
                    continue;
                }
                match name {
                    Some(name @ ("unsubscribe" | "punsubscribe" | "sunsubscribe")) if plain => {
                        for reply in unsubscribed(name, &arguments) {
                            resp::encode(&reply, client.protocol, &mut output);
                        }
                    }
                    _ => {
                        let (reply, close) = client.handle(arguments, resolved).await;
                        resp::encode(&reply, client.protocol, &mut output);
                        if close {
                            let _ = stream.write_all(&output).await;
                            return;
                        }
                    }
                }
            }
            if output.len() >= OUTPUT_FLUSH_BYTES {
                if stream.write_all(&output).await.is_err() {
                    return;
                }
                output.clear();
            }
        }
        let full = requests.len() >= depth;
        requests.clear();
        wires.clear();
        if let Some(error) = broken {
            resp::encode(
                &Frame::error_owned(format!("ERR {error}")),
                client.protocol,
                &mut output,
            );
            let _ = stream.write_all(&output).await;
            return;
        }
        if full {
            // The batch bound was hit: serve what is buffered before reading.
            continue;
        }
        if !output.is_empty() {
            if stream.write_all(&output).await.is_err() {
                return;
            }
            output.clear();
        }
        if input.len() + parser.pending_bytes() > QUERY_BUFFER_LIMIT {
            return;
        }
        input.reserve(16 * 1024);
        match stream.read_buf(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// How a node's share of a pipeline went out.
enum Sent {
    /// On a shared link: the replies arrive here.
    Shared(tokio::sync::oneshot::Receiver<pool::Outcome>),
    /// On the client's own connection: read them from there.
    Own(Result<(), Failure>),
}

/// A node's share of a pipeline (the requests at `indexes`) as one buffer:
/// each request's bytes as the client sent them, or encoded again when the
/// parser kept none.
fn wire_of(
    indexes: impl Iterator<Item = usize> + Clone,
    requests: &[Vec<Bytes>],
    wires: &[Option<Bytes>],
) -> Vec<u8> {
    let size: usize = indexes
        .clone()
        .map(|index| match &wires[index] {
            Some(wire) => wire.len(),
            None => {
                16 + requests[index]
                    .iter()
                    .map(|argument| argument.len() + 16)
                    .sum::<usize>()
            }
        })
        .sum();
    let mut wire = Vec::with_capacity(size);
    for index in indexes {
        match &wires[index] {
            Some(bytes) => wire.extend_from_slice(bytes),
            None => super::upstream::encode_request(&requests[index], &mut wire),
        }
    }
    wire
}

/// Scripts and functions: they may run long, so they stay off shared links.
fn is_script(spec: &CommandSpec) -> bool {
    spec.name.starts_with("eval") || spec.name.starts_with("fcall")
}

/// Commands the router answers, splits or queues itself (see
/// [`Client::handle`]); never part of a forwarded pipeline.
fn answered_by_router(name: &str) -> bool {
    matches!(
        name,
        "quit"
            | "ping"
            | "echo"
            | "hello"
            | "select"
            | "readonly"
            | "readwrite"
            | "multi"
            | "exec"
            | "discard"
            | "watch"
            | "unwatch"
            | "reset"
            | "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
            | "monitor"
            | "client|tracking"
            | "client|caching"
            | "mget"
            | "mset"
            | "del"
            | "unlink"
            | "exists"
            | "touch"
            | "dbsize"
            | "scan"
            | "keys"
            | "randomkey"
            | "flushall"
            | "flushdb"
            | "script|load"
            | "script|flush"
            | "function|load"
            | "function|flush"
            | "function|delete"
            | "function|restore"
            | "script|exists"
    )
}

/// Commands the router answers for the whole cluster, which a transaction
/// (run on one node) cannot.
const SPANS_EVERY_SHARD: &[&str] = &[
    "dbsize",
    "scan",
    "keys",
    "randomkey",
    "flushall",
    "flushdb",
    "script|load",
    "script|flush",
    "script|exists",
    "function|load",
    "function|flush",
    "function|delete",
    "function|restore",
];

/// UNSUBSCRIBE and relatives on a connection with no subscriptions: one
/// reply per channel named, or one with a null channel.
fn unsubscribed(name: &str, arguments: &[Bytes]) -> Vec<Frame> {
    let kind = Bytes::copy_from_slice(name.as_bytes());
    if arguments.len() > 1 {
        arguments[1..]
            .iter()
            .map(|channel| {
                Frame::Push(vec![
                    Frame::Bulk(kind.clone()),
                    Frame::Bulk(channel.clone()),
                    Frame::Integer(0),
                ])
            })
            .collect()
    } else {
        vec![Frame::Push(vec![
            Frame::Bulk(kind),
            Frame::Null,
            Frame::Integer(0),
        ])]
    }
}

/// The read limit for a blocking command: its own timeout plus the usual
/// margin, none for 0 (wait forever).
fn blocking_limit(spec: &CommandSpec, arguments: &[Bytes], margin: Duration) -> Option<Duration> {
    let seconds = |argument: Option<&Bytes>| -> Option<f64> {
        std::str::from_utf8(argument?).ok()?.parse::<f64>().ok()
    };
    let timeout_seconds = match spec.name {
        "blmpop" | "bzmpop" => seconds(arguments.get(1)),
        "wait" => seconds(arguments.get(2)).map(|ms| ms / 1000.0),
        "waitaof" => seconds(arguments.get(3)).map(|ms| ms / 1000.0),
        "xread" | "xreadgroup" => {
            let block = arguments
                .iter()
                .position(|argument| argument.eq_ignore_ascii_case(b"block"));
            match block {
                Some(index) => seconds(arguments.get(index + 1)).map(|ms| ms / 1000.0),
                None => return Some(margin),
            }
        }
        _ => seconds(arguments.last()),
    };
    match timeout_seconds {
        Some(0.0) => None,
        Some(value) if value.is_finite() && value > 0.0 && value < 1e9 => {
            Some(Duration::from_secs_f64(value) + margin)
        }
        // Invalid timeouts get the node's error at once.
        _ => Some(margin),
    }
}

impl Client {
    /// How `spec` may be retried and how long it may take.
    pub fn call_for(&self, spec: &CommandSpec, arguments: &[Bytes]) -> Call {
        let margin = self.upstreams.timeout;
        if spec.has(flags::BLOCKING) {
            return Call {
                retry_io: false,
                read_limit: blocking_limit(spec, arguments, margin),
                replica_read: false,
            };
        }
        let read = spec.has(flags::READONLY) && !spec.is_write();
        Call {
            retry_io: read,
            read_limit: Some(margin),
            replica_read: read && self.readonly,
        }
    }

    /// The slot and command of a request that may be forwarded as part of a
    /// pipeline: a plain keyed command the router does not answer or split
    /// itself, outside MULTI, not blocking, its keys in one slot.
    fn pipelinable(&self, arguments: &[Bytes]) -> Option<(u16, &'static CommandSpec)> {
        if self.multi.is_some() || !self.authenticated {
            return None;
        }
        let spec = keyspace::commands::resolve(arguments).ok()?;
        if spec.has(flags::BLOCKING) || answered_by_router(spec.name) {
            return None;
        }
        if self.readonly && spec.has(flags::READONLY) && !spec.is_write() {
            // Replica reads take the one-at-a-time path, which picks a replica.
            return None;
        }
        match keyspace::command_slot(spec, arguments) {
            Ok(Some(slot)) => Some((slot, spec)),
            _ => None,
        }
    }

    /// Forwards a run of plain keyed commands: each node's share goes out in
    /// one write, to every node before any reply is read, then the replies
    /// are appended to `output` in the client's order. A command that met a
    /// redirect, a retryable refusal or a failed connection (when it is safe
    /// to retry) is then run again on its own, in order, through
    /// [`Client::routed`]. Later commands of the batch have already run by
    /// then; a redirect concerns one slot on one node, so a later command of
    /// that slot sent to that node was redirected too and is retried after it.
    async fn pipeline(
        &mut self,
        run: &[(u16, &'static CommandSpec)],
        requests: &[Vec<Bytes>],
        wires: &[Option<Bytes>],
        output: &mut BytesMut,
    ) {
        // Held for the whole batch: the shares name its addresses.
        let map = self.router.map();
        let owner = |slot: u16| map.owner(slot);
        let first = run.first().and_then(|(slot, _)| owner(*slot));
        let one_node = first.filter(|first| {
            run.iter().all(|(slot, spec)| {
                !is_script(spec)
                    && owner(*slot)
                        .is_some_and(|address| std::ptr::eq(address, *first) || address == *first)
            })
        });
        if let Some(address) = one_node {
            // The common case (always so for a lone request): the whole run
            // is one share, answered in order, with no bookkeeping per node.
            let receiver = self.submit(address, run, 0..run.len(), requests, wires);
            let outcome = pool::outcome(receiver).await;
            let mut replies = outcome.each();
            for index in 0..run.len() {
                let reply = match replies.next() {
                    Some(bytes) => Some(Reply::Raw(bytes)),
                    None => outcome.failure.as_ref().and_then(|failure| {
                        self.unanswered(failure, address, run[index].1, &requests[index])
                    }),
                };
                if !self.append(reply, output) {
                    self.retry(run[index], &requests[index], output).await;
                }
            }
            return;
        }
        let mut shares: Vec<(&str, Vec<usize>)> = Vec::new();
        let mut replies: Vec<Option<Reply>> = vec![None; run.len()];
        for (index, (slot, _)) in run.iter().enumerate() {
            let Some(address) = owner(*slot) else {
                continue;
            };
            // The map's own strings: the same node is the same pointer.
            match shares
                .iter_mut()
                .find(|(known, _)| std::ptr::eq(*known, address) || *known == address)
            {
                Some((_, indexes)) => indexes.push(index),
                None => shares.push((address, vec![index])),
            }
        }
        // Shares without scripts go to the shared links; a script may run
        // long, so it keeps to the client's own connection.
        let mut sent = Vec::with_capacity(shares.len());
        for (address, indexes) in &shares {
            let scripted = indexes.iter().any(|index| is_script(run[*index].1));
            if scripted {
                let batch: Vec<&[Bytes]> =
                    indexes.iter().map(|index| &requests[*index][..]).collect();
                sent.push(Sent::Own(self.upstreams.send(address, &batch).await));
            } else {
                sent.push(Sent::Shared(self.submit(
                    address,
                    run,
                    indexes.iter().copied(),
                    requests,
                    wires,
                )));
            }
        }
        for ((address, indexes), sent) in shares.iter().zip(sent) {
            let (answered, failure) = match sent {
                Sent::Shared(receiver) => {
                    let outcome = pool::outcome(receiver).await;
                    for (index, reply) in indexes.iter().zip(outcome.each()) {
                        replies[*index] = Some(Reply::Raw(reply));
                    }
                    (outcome.count, outcome.failure)
                }
                Sent::Own(Ok(())) => {
                    let (received, failure) =
                        self.upstreams.receive_raw(address, indexes.len()).await;
                    let answered = received.len();
                    for (index, reply) in indexes.iter().zip(received) {
                        replies[*index] = Some(Reply::Raw(reply));
                    }
                    (answered, failure)
                }
                Sent::Own(Err(failure)) => (0, Some(failure)),
            };
            if let Some(failure) = failure {
                for index in &indexes[answered..] {
                    replies[*index] =
                        self.unanswered(&failure, address, run[*index].1, &requests[*index]);
                }
            }
        }
        for (index, reply) in replies.into_iter().enumerate() {
            if !self.append(reply, output) {
                self.retry(run[index], &requests[index], output).await;
            }
        }
    }

    /// Sends one node's share of a run (the requests at `indexes`, in
    /// order) on the shared links: reads on the read link, writes on the
    /// client's write link.
    fn submit(
        &self,
        address: &str,
        run: &[(u16, &'static CommandSpec)],
        indexes: impl Iterator<Item = usize> + Clone,
        requests: &[Vec<Bytes>],
        wires: &[Option<Bytes>],
    ) -> tokio::sync::oneshot::Receiver<pool::Outcome> {
        let reads_only = |spec: &CommandSpec| spec.has(flags::READONLY) && !spec.is_write();
        let reads = indexes.clone().all(|index| reads_only(run[index].1));
        let count = indexes.clone().count();
        let lane = pool::Lane::of(reads, self.id, self.router.write_links);
        let pool = match lane {
            pool::Lane::Read => &self.router.pool,
            pool::Lane::Write(_) => &*self.router.write_pool,
        };
        let wire = wire_of(indexes, requests, wires);
        pool.submit(address, self.protocol, lane, wire, count)
    }

    /// What a request left unanswered by a failed exchange gets: nothing
    /// (it is retried) when connecting failed, since nothing was run, or when
    /// it is a read; the failure otherwise, as a write's outcome is unknown.
    fn unanswered(
        &self,
        failure: &Failure,
        address: &str,
        spec: &'static CommandSpec,
        request: &[Bytes],
    ) -> Option<Reply> {
        let retry = matches!(failure, Failure::Connect(_)) || self.call_for(spec, request).retry_io;
        (!retry).then(|| Reply::Frame(failure.reply(address)))
    }

    /// Appends a forwarded request's reply to `output`, unless it has none
    /// or was redirected: false then, and the request is to run again on
    /// its own ([`Client::retry`]).
    fn append(&self, reply: Option<Reply>, output: &mut BytesMut) -> bool {
        match reply {
            Some(Reply::Raw(bytes)) if !Reply::redirects_raw(&bytes) => {
                output.extend_from_slice(&bytes);
                true
            }
            Some(Reply::Frame(frame)) if !Reply::redirects_frame(&frame) => {
                resp::encode(&frame, self.protocol, output);
                true
            }
            _ => false,
        }
    }

    /// Runs a forwarded request again on its own and appends its reply.
    async fn retry(
        &mut self,
        (slot, spec): (u16, &'static CommandSpec),
        request: &[Bytes],
        output: &mut BytesMut,
    ) {
        let call = self.call_for(spec, request);
        let frame = self.keyed(slot, request, call).await;
        resp::encode(&frame, self.protocol, output);
    }

    /// Answers one request (`resolved` is its command, or the error for an
    /// unknown one); true when the connection should close after it.
    async fn handle(
        &mut self,
        arguments: Vec<Bytes>,
        resolved: Result<&'static CommandSpec, Frame>,
    ) -> (Frame, bool) {
        let spec = match resolved {
            Ok(spec) => spec,
            Err(error) => {
                if let Some(multi) = &mut self.multi {
                    multi.failed = true;
                }
                return (error, false);
            }
        };
        if self.multi.is_some()
            && !matches!(
                spec.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset" | "auth"
            )
        {
            return (self.queue(spec, arguments), false);
        }
        let reply = match spec.name {
            "quit" => return (Frame::OK, true),
            "auth" => {
                let (user, password) = match &arguments[1..] {
                    [password] => (None, password),
                    [user, password] => (Some(&user[..]), password),
                    _ => return (Frame::error("ERR syntax error"), false),
                };
                match self.check_password(user, password) {
                    Ok(()) => {
                        self.authenticated = true;
                        Frame::OK
                    }
                    Err(error) => error,
                }
            }
            "ping" => match arguments.get(1) {
                Some(message) => Frame::Bulk(message.clone()),
                None => Frame::simple("PONG"),
            },
            "echo" => Frame::Bulk(arguments[1].clone()),
            "hello" => self.hello(&arguments),
            "select" => match keyspace::args::parse_i64(&arguments[1]) {
                Ok(0) => Frame::OK,
                Ok(_) => Frame::error("ERR SELECT is not allowed in cluster mode"),
                Err(_) => Frame::error("ERR value is not an integer or out of range"),
            },
            "readonly" => {
                self.readonly = true;
                Frame::OK
            }
            "readwrite" => {
                self.readonly = false;
                Frame::OK
            }
            "multi" => match self.multi {
                Some(_) => Frame::error("ERR MULTI calls can not be nested"),
                None => {
                    self.multi = Some(Multi {
                        queued: Vec::new(),
                        slot: None,
                        failed: false,
                    });
                    Frame::OK
                }
            },
            "exec" => self.exec().await,
            "discard" => match self.multi.take() {
                Some(_) => {
                    self.unwatch().await;
                    Frame::OK
                }
                None => Frame::error("ERR DISCARD without MULTI"),
            },
            "watch" => self.watch(&arguments).await,
            "unwatch" => {
                self.unwatch().await;
                Frame::OK
            }
            "reset" => {
                self.reset().await;
                Frame::simple("RESET")
            }
            // `serve` relays or answers these before they get here; never
            // forward one into a pooled node connection.
            "subscribe" | "psubscribe" | "ssubscribe" | "unsubscribe" | "punsubscribe"
            | "sunsubscribe" => Frame::error("ERR Pub/Sub is relayed only outside MULTI"),
            // `serve` starts MONITOR outside MULTI before it gets here.
            "monitor" => Frame::error("ERR MONITOR is not allowed here"),
            // Invalidations would arrive on upstream connections other
            // clients share.
            "client|tracking" | "client|caching" => Frame::error(
                "ERR client-side caching is not available through the router; connect to the cluster's nodes",
            ),
            "mget" | "mset" | "del" | "unlink" | "exists" | "touch" => {
                whole::split(self, spec, &arguments).await
            }
            "dbsize" => whole::dbsize(self).await,
            "info" => whole::info(self, &arguments).await,
            "scan" => whole::scan(self, &arguments).await,
            "keys" => whole::keys(self, &arguments).await,
            "randomkey" => whole::random_key(self).await,
            "flushall" | "flushdb" | "script|load" | "script|flush" | "function|load"
            | "function|flush" | "function|delete" | "function|restore" => {
                whole::broadcast(self, &arguments).await
            }
            "script|exists" => whole::script_exists(self, &arguments).await,
            _ => self.forward(spec, &arguments).await,
        };
        (reply, false)
    }

    /// RESET: no transaction, no WATCH, no READONLY, RESP2, and logged out
    /// when the router asks for a password.
    async fn reset(&mut self) {
        self.multi = None;
        self.readonly = false;
        self.authenticated = self.router.requirepass.is_none();
        self.unwatch().await;
        self.protocol = Protocol::Resp2;
        self.upstreams.set_protocol(Protocol::Resp2);
    }

    /// HELLO [protover [AUTH user pass] [SETNAME name]], answered by the router.
    fn hello(&mut self, arguments: &[Bytes]) -> Frame {
        let mut protocol = self.protocol;
        if let Some(version) = arguments.get(1) {
            protocol = match keyspace::args::parse_i64(version) {
                Ok(2) => Protocol::Resp2,
                Ok(3) => Protocol::Resp3,
                Ok(_) => return Frame::error("NOPROTO unsupported protocol version"),
                Err(_) => {
                    return Frame::error("ERR Protocol version is not an integer or out of range")
                }
            };
        }
        let mut index = 2;
        while index < arguments.len() {
            let option = &arguments[index];
            if option.eq_ignore_ascii_case(b"setname") && index + 1 < arguments.len() {
                index += 2;
            } else if option.eq_ignore_ascii_case(b"auth") && index + 2 < arguments.len() {
                if let Err(error) =
                    self.check_password(Some(&arguments[index + 1]), &arguments[index + 2])
                {
                    return error;
                }
                self.authenticated = true;
                index += 3;
            } else {
                return Frame::error_owned(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(option)
                ));
            }
        }
        if !self.authenticated {
            return Frame::error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
                 HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
                 select the RESP protocol version at the same time",
            );
        }
        if protocol != self.protocol {
            // The node connections are reopened in the new protocol; a WATCH
            // lived on them.
            self.watch = None;
            self.protocol = protocol;
            self.upstreams.set_protocol(protocol);
        }
        let text = |value: &'static str| Frame::Bulk(Bytes::from_static(value.as_bytes()));
        Frame::Map(vec![
            (text("server"), text("redis")),
            (text("version"), text("7.2.4")),
            (
                text("proto"),
                Frame::Integer(if protocol == Protocol::Resp3 { 3 } else { 2 }),
            ),
            (text("id"), Frame::Integer(self.id as i64)),
            (text("mode"), text("standalone")),
            (text("role"), text("master")),
            (text("modules"), Frame::Array(Vec::new())),
        ])
    }

    /// AUTH [user] password against `--requirepass`, with Redis's replies
    /// (only the `default` user exists).
    fn check_password(&self, user: Option<&[u8]>, password: &[u8]) -> Result<(), Frame> {
        const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
        match &self.router.requirepass {
            None if user.is_none() => Err(Frame::error(
                "ERR AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?",
            )),
            None if user == Some(b"default") => Ok(()),
            None => Err(Frame::error(WRONGPASS)),
            Some(expected) => {
                if user.is_none_or(|user| user == b"default") && password == expected.as_bytes() {
                    Ok(())
                } else {
                    Err(Frame::error(WRONGPASS))
                }
            }
        }
    }

    /// Routes a command by its slot: keyed to the slot's leader, keyless to
    /// any node, CROSSSLOT when its keys span slots.
    async fn forward(&mut self, spec: &CommandSpec, arguments: &[Bytes]) -> Frame {
        let call = self.call_for(spec, arguments);
        match keyspace::command_slot(spec, arguments) {
            Err(error) => Frame::error(error.message()),
            Ok(Some(slot)) => self.keyed(slot, arguments, call).await,
            Ok(None) => self.keyless(arguments, call).await,
        }
    }

    /// One keyed command, redirects followed.
    pub async fn keyed(&mut self, slot: u16, arguments: &[Bytes], call: Call) -> Frame {
        match self.routed(slot, &[arguments], call).await {
            Ok((_, mut replies)) => replies.pop().unwrap_or(Frame::Null),
            Err(error) => error,
        }
    }

    /// Sends `requests` (a command, or MULTI ... EXEC) to the leader of
    /// `slot`, following MOVED, ASK (with ASKING first), TRYAGAIN and
    /// CLUSTERDOWN. A batch counts as redirected when any of its replies is a
    /// redirect: then none of it ran (a node refuses before running anything,
    /// and a transaction with a refused command is discarded). Returns the
    /// address that answered and the replies, or the error to answer with.
    pub async fn routed(
        &mut self,
        slot: u16,
        requests: &[&[Bytes]],
        call: Call,
    ) -> Result<(String, Vec<Frame>), Frame> {
        let asking = [Bytes::from_static(b"ASKING")];
        let readonly = [Bytes::from_static(b"READONLY")];
        let mut target: Option<(String, bool)> = None;
        let mut delay = FIRST_BACKOFF;
        let mut redirects = 0;
        let mut last = Frame::error(SLOT_NOT_SERVED);
        for attempt in 0..MAX_ATTEMPTS {
            let (address, ask) = match target.take() {
                Some(target) => target,
                None if call.replica_read && attempt == 0 => {
                    let map = self.router.map();
                    let zone = self.router.prefer_zone.as_deref();
                    match map.replica(slot, self.id, zone).or_else(|| map.owner(slot)) {
                        Some(address) => (address.to_string(), false),
                        None => {
                            drop(map);
                            self.router.refresh().await;
                            last = Frame::error(SLOT_NOT_SERVED);
                            backoff(&mut delay, attempt).await;
                            continue;
                        }
                    }
                }
                None => {
                    let mut owner = self.router.map().owner(slot).map(str::to_string);
                    if owner.is_none() {
                        self.router.refresh().await;
                        owner = self.router.map().owner(slot).map(str::to_string);
                    }
                    match owner {
                        Some(address) => (address, false),
                        None if self.router.no_map_error().is_some() => {
                            return Err(self
                                .router
                                .no_map_error()
                                .unwrap_or_else(|| Frame::error(CLUSTER_DOWN)));
                        }
                        None => {
                            last = Frame::error(SLOT_NOT_SERVED);
                            backoff(&mut delay, attempt).await;
                            continue;
                        }
                    }
                }
            };
            let mut batch: Vec<&[Bytes]> = Vec::with_capacity(requests.len() + 2);
            // A READONLY client's connection says so once, so replicas serve it.
            let announce = call.replica_read && !self.upstreams.is_readonly(&address);
            if announce {
                batch.push(&readonly);
            }
            if ask {
                batch.push(&asking);
            }
            batch.extend_from_slice(requests);
            match self
                .upstreams
                .exchange(&address, &batch, call.read_limit)
                .await
            {
                Ok(mut replies) => {
                    if announce {
                        replies.remove(0);
                        self.upstreams.mark_readonly(&address);
                    }
                    if ask {
                        replies.remove(0);
                    }
                    let redirect = replies
                        .iter()
                        .map(|reply| (Redirect::of(reply, &address), reply))
                        .find(|(redirect, _)| redirect.is_some());
                    let Some((redirect, reply)) = redirect else {
                        return Ok((address, replies));
                    };
                    last = reply.clone();
                    match redirect {
                        Redirect::Moved(to) => {
                            let router = self.router.clone();
                            tokio::spawn(async move { router.refresh().await });
                            redirects += 1;
                            if redirects > FREE_REDIRECTS {
                                backoff(&mut delay, attempt).await;
                            }
                            target = Some((to, false));
                        }
                        Redirect::Ask(to) => {
                            redirects += 1;
                            if redirects > FREE_REDIRECTS {
                                backoff(&mut delay, attempt).await;
                            }
                            target = Some((to, true));
                        }
                        Redirect::Retry | Redirect::None => {
                            self.router.refresh().await;
                            backoff(&mut delay, attempt).await;
                        }
                    }
                }
                Err(failure) => {
                    last = failure.reply(&address);
                    if matches!(failure, Failure::Io(_)) && !call.retry_io {
                        return Err(last);
                    }
                    self.router.refresh().await;
                    backoff(&mut delay, attempt).await;
                }
            }
        }
        Err(give_up(last))
    }

    /// A keyless command: the first node that answers (masters first).
    pub async fn keyless(&mut self, arguments: &[Bytes], call: Call) -> Frame {
        let mut candidates = self.router.any_nodes();
        if candidates.is_empty() {
            self.router.refresh().await;
            candidates = self.router.any_nodes();
        }
        let mut last = Frame::error(CLUSTER_DOWN);
        for address in candidates {
            match self
                .upstreams
                .exchange(&address, &[arguments], call.read_limit)
                .await
            {
                Ok(mut replies) => return replies.pop().unwrap_or(Frame::Null),
                Err(failure) => {
                    last = failure.reply(&address);
                    if matches!(failure, Failure::Io(_)) && !call.retry_io {
                        return last;
                    }
                }
            }
        }
        let router = self.router.clone();
        tokio::spawn(async move { router.refresh().await });
        last
    }

    /// Queues a command inside MULTI; every keyed one must share one slot.
    fn queue(&mut self, spec: &CommandSpec, arguments: Vec<Bytes>) -> Frame {
        let watched_slot = self.watch.as_ref().map(|watch| watch.slot);
        let Some(multi) = self.multi.as_mut() else {
            return Frame::error("ERR internal: no transaction");
        };
        if SPANS_EVERY_SHARD.contains(&spec.name) {
            // Queued, it would run on one node only; one transaction cannot
            // span shards, so it is refused at queue time (EXEC then aborts).
            multi.failed = true;
            return Frame::error_owned(format!(
                "ERR {} inside MULTI is not supported through the router: it spans every shard",
                spec.name.replace('|', " ").to_uppercase()
            ));
        }
        match keyspace::command_slot(spec, &arguments) {
            Err(error) => {
                multi.failed = true;
                return Frame::error(error.message());
            }
            Ok(Some(slot)) => {
                let pinned = multi.slot.or(watched_slot);
                if pinned.is_some_and(|pinned| pinned != slot) {
                    multi.failed = true;
                    return Frame::error(keyspace::slots::CROSSSLOT);
                }
                multi.slot = Some(slot);
            }
            Ok(None) => {}
        }
        if multi.queued.len() >= MAX_QUEUED {
            multi.failed = true;
            return Frame::error_owned(format!(
                "ERR the router queues at most {MAX_QUEUED} commands in one transaction"
            ));
        }
        multi.queued.push(arguments);
        Frame::simple("QUEUED")
    }

    /// EXEC: MULTI, the queued commands and EXEC go to the node of the
    /// transaction's slot in one pipeline (retried while it is redirected,
    /// which means it did not run), or on the WATCH's connection.
    async fn exec(&mut self) -> Frame {
        let Some(multi) = self.multi.take() else {
            return Frame::error("ERR EXEC without MULTI");
        };
        let watch = self.watch.take();
        if multi.failed {
            if let Some(watch) = watch {
                self.send_unwatch(&watch.address).await;
            }
            return Frame::error(EXECABORT);
        }
        let begin = [Bytes::from_static(b"MULTI")];
        let end = [Bytes::from_static(b"EXEC")];
        let mut requests: Vec<&[Bytes]> = Vec::with_capacity(multi.queued.len() + 2);
        requests.push(&begin);
        requests.extend(multi.queued.iter().map(Vec::as_slice));
        requests.push(&end);
        let call = Call {
            retry_io: false,
            read_limit: Some(self.upstreams.timeout),
            replica_read: false,
        };
        if let Some(watch) = watch {
            // The watch lives on that connection: no retries elsewhere. A
            // lost connection lost the watch, so the transaction aborts as
            // if a watched key had changed.
            if !self.upstreams.is_open(&watch.address) {
                return Frame::NullArray;
            }
            return match self
                .upstreams
                .exchange(&watch.address, &requests, call.read_limit)
                .await
            {
                Ok(mut replies) => give_up(replies.pop().unwrap_or(Frame::Null)),
                Err(failure) => failure.reply(&watch.address),
            };
        }
        match multi.slot {
            Some(slot) => match self.routed(slot, &requests, call).await {
                Ok((_, mut replies)) => replies.pop().unwrap_or(Frame::Null),
                Err(error) => error,
            },
            None => {
                let Some(address) = self.router.any_nodes().into_iter().next() else {
                    return Frame::error(CLUSTER_DOWN);
                };
                match self
                    .upstreams
                    .exchange(&address, &requests, call.read_limit)
                    .await
                {
                    Ok(mut replies) => replies.pop().unwrap_or(Frame::Null),
                    Err(failure) => failure.reply(&address),
                }
            }
        }
    }

    /// WATCH key...: the keys share a slot; the watch is pinned to the node
    /// (and connection) that serves it.
    async fn watch(&mut self, arguments: &[Bytes]) -> Frame {
        if self.multi.is_some() {
            return Frame::error("ERR WATCH inside MULTI is not allowed");
        }
        let slot = cluster::key_slot(&arguments[1]);
        if arguments[2..]
            .iter()
            .any(|key| cluster::key_slot(key) != slot)
            || self.watch.as_ref().is_some_and(|watch| watch.slot != slot)
        {
            return Frame::error(keyspace::slots::CROSSSLOT);
        }
        let call = Call {
            retry_io: true,
            read_limit: Some(self.upstreams.timeout),
            replica_read: false,
        };
        match self.routed(slot, &[arguments], call).await {
            Ok((address, mut replies)) => {
                let reply = replies.pop().unwrap_or(Frame::Null);
                if !reply.is_error() {
                    self.watch = Some(Watch { slot, address });
                }
                reply
            }
            Err(error) => error,
        }
    }

    async fn unwatch(&mut self) {
        if let Some(watch) = self.watch.take() {
            self.send_unwatch(&watch.address).await;
        }
    }

    async fn send_unwatch(&mut self, address: &str) {
        if self.upstreams.is_open(address) {
            let unwatch = [Bytes::from_static(b"UNWATCH")];
            let _ = self
                .upstreams
                .exchange(address, &[&unwatch], Some(self.upstreams.timeout))
                .await;
        }
    }
}

/// Sleeps before the next attempt (not after the last one) and doubles the delay.
pub async fn backoff(delay: &mut Duration, attempt: usize) {
    if attempt + 1 < MAX_ATTEMPTS {
        tokio::time::sleep(*delay).await;
        *delay = (*delay * 2).min(MAX_BACKOFF);
    }
}
