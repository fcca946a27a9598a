//! One client connection: read bytes, parse every complete request in them, run
//! them in order, and write all their replies with one write. The keyspace lock is
//! taken once for a run of keyspace commands in the same read, not per command.

use crate::blocking::{Blocking, Cancelled, Waiter};
use crate::clients::ClientInfo;
use crate::clock;
use crate::server::{Shared, Store};
use crate::session::{self, Session};
use bytes::{Bytes, BytesMut};
use keyspace::command::flags;
use keyspace::{commands, BlockOn, CommandSpec, Context, Handler, Rng};
use resp::{encode, Frame, RequestLimits, RequestParser};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// What the connection does after a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Flush the replies so far, then close (QUIT, protocol errors).
    Close,
}

/// Answers a connection we cannot accept with one error, then closes it.
/// A client connection: a TCP stream, or a simulated one.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> ClientStream for S {}

pub async fn reject(mut stream: impl ClientStream, message: &'static str) {
    let mut out = BytesMut::new();
    encode(&Frame::error(message), resp::Protocol::Resp2, &mut out);
    let _ = stream.write_all(&out).await;
}

pub async fn serve(shared: Arc<Shared>, mut stream: impl ClientStream, client: Arc<ClientInfo>) {
    let authenticated = shared.config().requirepass().is_none();
    let mut session = Session::new(client.clone(), authenticated);
    let mut parser = RequestParser::new(limits(&shared));
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut output = BytesMut::with_capacity(READ_CHUNK_BYTES);
    // One wait for CLIENT KILL for the whole connection: made anew per read
    // and per write, it would join and leave the signal's waiter list twice
    // per request.
    let killed = client.killed();
    tokio::pin!(killed);
    'serve: loop {
        if input.capacity() - input.len() < READ_CHUNK_BYTES / 4 {
            input.reserve(READ_CHUNK_BYTES);
        }
        let (idle_limit, query_limit) = {
            let config = shared.config();
            (config.idle_timeout(), config.client_query_buffer_limit())
        };
        let inbox = session.subscriptions.subscriber.clone();
        let read = tokio::select! {
            // Input first: the other arms are rare, and polling them only
            // when the socket has nothing spares that work per request.
            biased;
            read = stream.read_buf(&mut input) => read,
            _ = messages_ready(inbox.as_deref()) => {
                // Let the connections that are ready now run first: messages
                // they publish join this write instead of each costing one
                // (Redis likewise writes to a subscriber once per event loop
                // round).
                tokio::task::yield_now().await;
                if let Some(subscriber) = &inbox {
                    subscriber.drain_into(&mut output);
                }
                shared
                    .stats
                    .net_output_bytes
                    .fetch_add(output.len() as u64, Ordering::Relaxed);
                if !write_replies(&mut stream, &output, killed.as_mut()).await {
                    break;
                }
                output.clear();
                continue;
            }
            _ = &mut killed => break,
            _ = idle_deadline(idle_limit) => {
                tracing::debug!(client = client.id, "closing idle client");
                break;
            }
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(count) => {
                shared
                    .stats
                    .net_input_bytes
                    .fetch_add(count as u64, Ordering::Relaxed);
            }
        }
        let mut flow = process(&shared, &mut session, &mut parser, &mut input, &mut output).await;
        end_pause_turn(&shared, &mut session);
        session.deliveries.flush();
        if let Some(subscriber) = &session.subscriptions.subscriber {
            subscriber.drain_into(&mut output);
        }
        // Write the replies; while a blocking command waits, wait for its reply,
        // then run what arrived behind it.
        loop {
            if !output.is_empty() {
                shared
                    .stats
                    .net_output_bytes
                    .fetch_add(output.len() as u64, Ordering::Relaxed);
                if !write_replies(&mut stream, &output, killed.as_mut()).await {
                    break 'serve;
                }
                output.clear();
            }
            if flow == Flow::Close || client.is_killed() {
                break 'serve;
            }
            if let Some((ticket, write)) = session.paused.take() {
                // CLIENT PAUSE holds the command at the head of `deferred`.
                client.blocked.store(true, Ordering::Relaxed);
                let turn =
                    wait_paused(&shared, &client, &mut stream, &mut input, ticket, write).await;
                client.blocked.store(false, Ordering::Relaxed);
                if !turn {
                    shared.local.pause.release(ticket);
                    break 'serve;
                }
                session.pause_turn = Some(ticket);
                flow = process(&shared, &mut session, &mut parser, &mut input, &mut output).await;
                end_pause_turn(&shared, &mut session);
                session.deliveries.flush();
                continue;
            }
            let Some(blocked) = session.blocked.take() else {
                break;
            };
            client.blocked.store(true, Ordering::Relaxed);
            let reply = wait_unblocked(&shared, &client, &mut stream, &mut input, blocked).await;
            client.blocked.store(false, Ordering::Relaxed);
            let Some(reply) = reply else {
                break 'serve;
            };
            session.reply(&mut output, &reply);
            flow = process(&shared, &mut session, &mut parser, &mut input, &mut output).await;
            session.deliveries.flush();
        }
        let buffered = input.len() + parser.pending_bytes();
        client.query_buffer_bytes.store(buffered, Ordering::Relaxed);
        if buffered > query_limit {
            tracing::warn!(
                client = client.id,
                "closing client that reached max query buffer length"
            );
            break;
        }
    }
    let _ = stream.shutdown().await;
    if let Some((ticket, _)) = session.paused.take() {
        shared.local.pause.release(ticket);
    }
    end_pause_turn(&shared, &mut session);
    shared
        .local
        .pubsub
        .forget(client.id, &session.subscriptions);
    shared.local.tracking.disable(&client);
    shared.clients.unregister(client.id);
}

/// Gives back the pause ticket whose turn this connection had, once the
/// batch it ran is done (see `crate::pause`).
fn end_pause_turn(shared: &Shared, session: &mut Session) {
    if let Some(ticket) = session.pause_turn.take() {
        shared.local.pause.release(ticket);
    }
}

/// Waits for a command held by CLIENT PAUSE to get its turn: true then,
/// false when the connection is gone or killed meanwhile. Input that arrives
/// is kept, as while blocked.
async fn wait_paused(
    shared: &Shared,
    client: &ClientInfo,
    stream: &mut impl ClientStream,
    input: &mut BytesMut,
    ticket: u64,
    write: bool,
) -> bool {
    let turn = shared.local.pause.wait_turn(ticket, write);
    tokio::pin!(turn);
    let query_limit = shared.config().client_query_buffer_limit();
    loop {
        tokio::select! {
            _ = &mut turn => return true,
            _ = client.killed() => return false,
            open = read_meanwhile(shared, stream, input, query_limit) => {
                if !open {
                    return false;
                }
            }
        }
    }
}

/// One read while the connection waits (blocked, or held by CLIENT PAUSE):
/// the input is kept, not run, as Redis does. False when the connection is
/// gone or its query buffer went past its limit.
async fn read_meanwhile(
    shared: &Shared,
    stream: &mut impl ClientStream,
    input: &mut BytesMut,
    query_limit: usize,
) -> bool {
    if input.capacity() - input.len() < READ_CHUNK_BYTES / 4 {
        input.reserve(READ_CHUNK_BYTES);
    }
    match stream.read_buf(input).await {
        Ok(0) | Err(_) => false,
        Ok(count) => {
            shared
                .stats
                .net_input_bytes
                .fetch_add(count as u64, Ordering::Relaxed);
            input.len() <= query_limit
        }
    }
}

/// Publishes the keyspace events the keyspace recorded (nothing to do, and
/// nearly free, while `notify-keyspace-events` is empty), and sends tracking
/// clients the invalidations for what changed; `writer` is the client whose
/// commands ran (None for expiry).
pub fn publish_keyspace_events(
    shared: &Shared,
    keyspace: &mut keyspace::Keyspace,
    writer: Option<u64>,
) {
    if keyspace.config.tracking_on() {
        let invalidations = keyspace.take_invalidations();
        if !invalidations.is_empty() {
            shared.local.tracking.invalidate(invalidations, writer);
        }
    }
    let calls = keyspace.take_script_calls();
    if !calls.is_empty() {
        crate::pubsub::feed_script_calls(&shared.local.pubsub, calls);
    }
    let published = keyspace.take_published();
    if !published.is_empty() {
        crate::pubsub::deliver_script_messages(
            &shared.local.pubsub,
            shared.local.forwarder(),
            published,
        );
    }
    let flags = keyspace.config.notify_flags;
    if flags == 0 {
        return;
    }
    let events = keyspace.take_events();
    if !events.is_empty() {
        crate::pubsub::publish_events(&shared.local.pubsub, flags, events);
    }
}

/// Writes `output`; false when the connection is gone or the client was
/// killed meanwhile (a subscriber that stopped reading is killed by its
/// output limit while its socket is full).
async fn write_replies(
    stream: &mut impl ClientStream,
    output: &[u8],
    killed: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> bool {
    tokio::select! {
        // A write that completes at once (the usual case) never polls the
        // kill signal.
        biased;
        written = stream.write_all(output) => written.is_ok(),
        _ = killed => false,
    }
}

/// Resolves when a subscribed connection has messages to write; never for
/// one that subscribes to nothing.
async fn messages_ready(subscriber: Option<&crate::pubsub::Subscriber>) {
    match subscriber {
        Some(subscriber) => subscriber.ready().await,
        None => std::future::pending().await,
    }
}

/// Runs every complete request in `input` (after any deferred ones).
async fn process(
    shared: &Shared,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    output: &mut BytesMut,
) -> Flow {
    use crate::replicated::{process_input as replicated, Route};
    if crate::busy::wait_for_scripts(&shared.local.scripts).await {
        return crate::busy::answer_busy(shared, session, parser, input, output);
    }
    match (&shared.replica, &shared.cluster) {
        (Some(replica), _) => {
            replicated(
                shared,
                Route::Single(replica),
                session,
                parser,
                input,
                output,
            )
            .await
        }
        (None, Some(node)) => {
            replicated(shared, Route::Cluster(node), session, parser, input, output).await
        }
        (None, None) => process_input(shared, session, parser, input, output),
    }
}

/// A client waiting in a blocking command.
pub struct Blocked {
    ticket: u64,
    reply: oneshot::Receiver<Frame>,
    /// When the command's timeout ends the wait; `None` waits forever. Set once,
    /// when the client first blocks: running the command again does not extend it.
    deadline: Option<Instant>,
    timeout_reply: Frame,
}

/// Blocks the client for `timeout` (None: until CLIENT UNBLOCK or it
/// disconnects) on no key: WAIT on a node without replicas. The wait ends
/// with `reply`.
pub fn block_keyless(
    shared: &Shared,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
    timeout: Option<Duration>,
    reply: Frame,
) {
    session.stats.blocked();
    let waiter = Waiter {
        client: session.client.id,
        group: 0,
        db: session.db,
        protocol: session.protocol,
        spec,
        arguments: arguments.to_vec(),
        keys: Vec::new(),
        timeout_reply: reply.clone(),
        wants: "",
        no_touch: session.no_touch,
    };
    let (ticket, receiver) = shared.blocking.block(waiter);
    session.blocked = Some(Blocked {
        ticket,
        reply: receiver,
        deadline: timeout.map(|timeout| Instant::now() + timeout),
        timeout_reply: reply,
    });
}

/// Registers the client as blocked by `spec` (which recorded `block`). A
/// wait that times out (or that CLIENT UNBLOCK ends) answers the null array
/// for every blocking command, BLMOVE and BRPOPLPUSH included, as Redis's
/// `replyToBlockedClientTimedOut` does; only a blocking command that may not
/// block (in MULTI or a script) answers as its handler does (a null bulk
/// string for those two).
pub fn block_client(
    shared: &Shared,
    group: u64,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
    block: BlockOn,
) {
    let timeout_reply = Frame::NullArray;
    let deadline =
        (block.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(block.timeout_ms));
    let waiter = Waiter {
        client: session.client.id,
        group,
        db: block.db,
        protocol: session.protocol,
        spec,
        // XREAD pins what `$` meant when the client blocked.
        arguments: block.arguments.unwrap_or_else(|| arguments.to_vec()),
        keys: block.keys,
        timeout_reply: timeout_reply.clone(),
        wants: Blocking::wanted_type(spec),
        no_touch: session.no_touch,
    };
    session.stats.blocked();
    let (ticket, reply) = shared.blocking.block(waiter);
    session.blocked = Some(Blocked {
        ticket,
        reply,
        deadline,
        timeout_reply,
    });
}

/// Waits for a blocked client's reply, its timeout, or its end (`None`: the
/// connection is gone or killed). Input that arrives meanwhile is kept, not run,
/// as Redis does.
async fn wait_unblocked(
    shared: &Shared,
    client: &ClientInfo,
    stream: &mut impl ClientStream,
    input: &mut BytesMut,
    blocked: Blocked,
) -> Option<Frame> {
    let Blocked {
        ticket,
        mut reply,
        deadline,
        timeout_reply,
    } = blocked;
    let timeout = async move {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let query_limit = shared.config().client_query_buffer_limit();
    loop {
        tokio::select! {
            answer = &mut reply => {
                return Some(answer.unwrap_or_else(|_| Frame::error("ERR blocked command lost its reply")));
            }
            _ = &mut timeout => {
                return match shared.blocking.cancel(ticket) {
                    Cancelled::Removed => Some(timeout_reply),
                    // Its command is running again (or just did): that reply
                    // is the answer, data may have moved for it.
                    Cancelled::InFlight | Cancelled::Finished => Some(
                        reply.await.unwrap_or(timeout_reply),
                    ),
                };
            }
            _ = client.killed() => {
                shared.blocking.cancel(ticket);
                return None;
            }
            open = read_meanwhile(shared, stream, input, query_limit) => {
                if !open {
                    shared.blocking.cancel(ticket);
                    return None;
                }
            }
        }
    }
}

/// Resolves after `limit` (the `timeout` parameter); never when there is none.
async fn idle_deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}

pub fn limits(shared: &Shared) -> RequestLimits {
    RequestLimits {
        max_bulk_bytes: shared.config().proto_max_bulk_len(),
        ..RequestLimits::default()
    }
}

/// Runs every complete request in `input`, appending replies to `output`.
pub fn process_input(
    shared: &Shared,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    output: &mut BytesMut,
) -> Flow {
    // Counted locally and published once per read: a shared counter bumped per
    // command would bounce its cache line between threads.
    let mut commands_run = 0;
    let flow = run_requests(shared, session, parser, input, output, &mut commands_run);
    shared
        .stats
        .total_commands_processed
        .fetch_add(commands_run, Ordering::Relaxed);
    if !session.stats.is_empty() {
        shared.monitors.flush(&mut session.stats, &session.client);
    }
    flow
}

fn run_requests(
    shared: &Shared,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    output: &mut BytesMut,
    commands_run: &mut u64,
) -> Flow {
    let mut store: Option<MutexGuard<'_, Store>> = None;
    let now_ms = clock::unix_ms();
    session
        .client
        .last_interaction_ms
        .store(now_ms, Ordering::Relaxed);
    let mut batch = std::mem::take(&mut session.deferred);
    batch.reserve(BATCH_REQUESTS);
    let mut parse_error = session.deferred_error.take();
    loop {
        // Parse (and resolve against the table) a batch first, so the memory the
        // batch's keys live in can be requested all at once (`Keyspace::prefetch`).
        while parse_error.is_none() && batch.len() < BATCH_REQUESTS {
            match parser.next_request(input) {
                Ok(Some(arguments)) => {
                    let resolved = commands::resolve(&arguments);
                    batch.push((arguments, resolved));
                }
                Ok(None) => break,
                Err(error) => {
                    parse_error = Some(error.to_string());
                    break;
                }
            }
        }
        let batch_was_full = batch.len() >= BATCH_REQUESTS;
        // Pays off from two keys on (a pipeline, or one MSET): a lone key is looked
        // up right away anyway.
        {
            let mut keys = batch
                .iter()
                .flat_map(|(arguments, resolved)| fixed_keys(arguments, resolved));
            if let (Some(first), Some(second)) = (keys.next(), keys.next()) {
                let store = store.get_or_insert_with(|| shared.store());
                let all = [first, second].into_iter().chain(keys);
                store.keyspace.prefetch(session.db, all);
                store
                    .keyspace
                    .prefetch_members(session.db, keyed_requests(&batch));
            }
        }
        let mut requests = batch.drain(..);
        // One reading per command: a command ends where the next begins.
        let mut started = clock::ticks();
        while let Some((mut arguments, resolved)) = requests.next() {
            *commands_run += 1;
            let spec = resolved.as_ref().ok().copied();
            let flow = execute_request(
                shared,
                session,
                parser,
                output,
                &mut store,
                now_ms,
                &mut arguments,
                resolved,
            );
            if session.paused.is_some() {
                // CLIENT PAUSE holds it (it went back to `deferred`): it and
                // the rest run when its turn comes, and count then.
                *commands_run -= 1;
                session.deferred.extend(requests);
                session.deferred_error = parse_error;
                serve_blocked_clients(shared, &mut store, now_ms);
                if let Some(store) = &mut store {
                    publish_keyspace_events(shared, &mut store.keyspace, Some(session.client.id));
                }
                return Flow::Continue;
            }
            let ended = clock::ticks();
            if let Some(spec) = spec {
                let outcome = session.stats.outcome;
                shared.monitors.observe(
                    &mut session.stats,
                    spec,
                    &arguments,
                    &session.client,
                    now_ms,
                    clock::ticks_to_micros(started, ended),
                    outcome,
                );
            }
            started = ended;
            if flow == Flow::Close {
                return Flow::Close;
            }
            if session.blocked.is_some() {
                // The rest waits for the blocking command's reply.
                session.deferred.extend(requests);
                session.deferred_error = parse_error;
                serve_blocked_clients(shared, &mut store, now_ms);
                return Flow::Continue;
            }
        }
        drop(requests);
        serve_blocked_clients(shared, &mut store, now_ms);
        if let Some(store) = &mut store {
            publish_keyspace_events(shared, &mut store.keyspace, Some(session.client.id));
        }
        if let Some(error) = parse_error {
            encode(
                &Frame::error_owned(format!("ERR {error}")),
                session.protocol,
                output,
            );
            tracing::debug!(client = session.client.id, %error, "protocol error");
            return Flow::Close;
        }
        if !batch_was_full {
            return Flow::Continue;
        }
    }
}

/// Runs again the commands of clients blocked on keys that received elements,
/// oldest waiter first, until no ready key is left (a served BLMOVE makes its
/// destination ready in turn). Runs under the keyspace lock, so a waiter's
/// command sees exactly the state the push left.
pub(crate) fn serve_blocked_clients<'a>(
    shared: &'a Shared,
    store: &mut Option<MutexGuard<'a, Store>>,
    now_ms: u64,
) {
    if shared.blocking.is_empty() {
        // Waiters register under the keyspace lock (turning recording back
        // on), so none can be missed here: keys made ready before a waiter
        // existed hold the data it will find.
        if let Some(store) = store.as_mut() {
            store.keyspace.set_ready_tracking(false);
        }
        return;
    }
    let store = store.get_or_insert_with(|| shared.store());
    loop {
        let ready = store.keyspace.take_ready_keys();
        if ready.is_empty() {
            return;
        }
        for (db, key) in ready {
            // A key gone (or of another type) still serves XREADGROUP,
            // which then answers NOGROUP (or WRONGTYPE), as Redis 7.2.
            let holding = match store.keyspace.db_ref(db).peek(&key, now_ms) {
                Some(entry) => entry.value.type_name(),
                None => "none",
            };
            while let Some((ticket, waiter)) = shared.blocking.take_first(0, db, &key, holding) {
                let seed = store.rng.next_u64();
                let mut context = Context {
                    now_ms,
                    rng: Rng::new(seed),
                    db: waiter.db,
                    protocol: waiter.protocol,
                    cluster_mode: false,
                    lazy_expire: true,
                    block: None,
                    out_of_memory: false,
                    in_script: false,
                    no_touch: waiter.no_touch,
                };
                let reply = store
                    .keyspace
                    .execute(waiter.spec, &mut context, &waiter.arguments);
                if context.block.is_some() {
                    // Still nothing for it (say, a key of another type).
                    shared.blocking.give_back(ticket);
                    break;
                }
                shared.blocking.finish(ticket, reply);
            }
        }
    }
}

/// EXEC on a standalone node: the queued keyspace commands run one after the
/// other under the keyspace lock, so no other client's command comes between
/// them. Blocking commands inside do not block (they answer their timeout
/// reply, as in Redis); keys they fill wake waiters after the batch.
fn exec<'a>(
    shared: &'a Shared,
    session: &mut Session,
    store: &mut Option<MutexGuard<'a, Store>>,
    now_ms: u64,
    keys_frozen: bool,
) -> Frame {
    let Some(transaction) = session.multi.take() else {
        return Frame::error("ERR EXEC without MULTI");
    };
    let watched = std::mem::take(&mut session.watched);
    if transaction.failed {
        return Frame::error(session::EXECABORT);
    }
    let store_guard = store.get_or_insert_with(|| shared.store());
    // As Redis: memory is checked before EXEC runs at all, then WATCH.
    let out_of_memory = crate::evict::out_of_memory(shared, store_guard);
    if out_of_memory
        && transaction.queued.iter().any(|(arguments, spec)| {
            spec.has(flags::DENYOOM)
                || (session::is_script_call(spec)
                    && store_guard.keyspace.script_denies_oom(arguments))
        })
    {
        return Frame::error_owned(session::execabort_because(keyspace::evict::OOM));
    }
    // A watched key that changed (or expired) since WATCH aborts it all.
    if watched.iter().any(|(db, key, fingerprint)| {
        store_guard.keyspace.watch_fingerprint(*db, key, now_ms) != *fingerprint
    }) {
        return Frame::NullArray;
    }
    let mut replies = Vec::with_capacity(transaction.queued.len());
    for (arguments, spec) in transaction.queued {
        let reply = match spec.handler {
            Handler::Keyspace(_) if spec.name.starts_with("cluster|") => {
                Frame::error(session::CLUSTER_DISABLED)
            }
            Handler::Keyspace(_) => {
                let store = store.get_or_insert_with(|| shared.store());
                let seed = store.rng.next_u64();
                let mut context = Context {
                    now_ms,
                    rng: Rng::new(seed),
                    db: session.db,
                    protocol: session.protocol,
                    cluster_mode: false,
                    lazy_expire: !keys_frozen,
                    block: None,
                    out_of_memory,
                    in_script: false,
                    no_touch: session.no_touch,
                };
                if spec.group == "scripting" {
                    store.keyspace.record_script_calls = shared.local.pubsub.monitoring();
                }
                if spec.group == "scripting" && store.keyspace.script_may_run_long(&arguments) {
                    replication::runtime::long_running(|| {
                        store.keyspace.execute(spec, &mut context, &arguments)
                    })
                } else {
                    store.keyspace.execute(spec, &mut context, &arguments)
                }
            }
            Handler::Node | Handler::Container => {
                // Connection and server commands (SELECT, CLIENT ...) run in
                // place, outside the keyspace lock.
                if let Some(held) = store.as_mut() {
                    publish_keyspace_events(shared, &mut held.keyspace, Some(session.client.id));
                }
                *store = None;
                session::execute_queued(shared, session, spec, &arguments)
            }
        };
        replies.push(reply);
    }
    Frame::Array(replies)
}

/// Requests parsed ahead of execution.
const BATCH_REQUESTS: usize = 32;

/// A request's command, or the error that answers it (unknown, wrong arity).
pub type Resolved = Result<&'static CommandSpec, Frame>;

/// The keys of a keyspace command at fixed positions (its legacy key range).
/// The batch's requests for keyspace commands, for the member prefetch.
pub(crate) fn keyed_requests(
    batch: &[(Vec<Bytes>, Resolved)],
) -> impl Iterator<Item = (&'static CommandSpec, &[Bytes])> + Clone {
    batch.iter().filter_map(|(arguments, resolved)| {
        let spec = *resolved.as_ref().ok()?;
        matches!(spec.handler, Handler::Keyspace(_)).then_some((spec, &arguments[..]))
    })
}

pub(crate) fn fixed_keys<'a>(
    arguments: &'a [Bytes],
    resolved: &Resolved,
) -> impl Iterator<Item = &'a [u8]> {
    let range = resolved
        .as_ref()
        .ok()
        .filter(|spec| matches!(spec.handler, Handler::Keyspace(_)))
        .map(|spec| spec.legacy_key_range())
        .filter(|&(first, _, step)| first > 0 && step > 0)
        .map(|(first, last, step)| {
            let count = arguments.len() as i32;
            let last = if last < 0 {
                count + last
            } else {
                last.min(count - 1)
            };
            (first as usize, last.max(0) as usize, step as usize)
        });
    range
        .into_iter()
        .flat_map(|(first, last, step)| (first..=last).step_by(step))
        .filter_map(|index| arguments.get(index).map(|key| &key[..]))
}

/// Runs one resolved request and appends its reply.
#[allow(clippy::too_many_arguments)]
fn execute_request<'a>(
    shared: &'a Shared,
    session: &mut Session,
    parser: &mut RequestParser,
    output: &mut BytesMut,
    store: &mut Option<MutexGuard<'a, Store>>,
    now_ms: u64,
    arguments: &mut Vec<Bytes>,
    resolved: Resolved,
) -> Flow {
    let spec = match resolved {
        Ok(spec) => spec,
        Err(error) => {
            session::refuse_in_multi(session);
            session.reply(output, &error);
            return Flow::Continue;
        }
    };
    let mut keys_frozen = false;
    if shared.local.pause.gated() {
        let mut script_may_write = |arguments: &[Bytes]| {
            store
                .get_or_insert_with(|| shared.store())
                .keyspace
                .script_may_write(arguments)
        };
        match crate::pause::check(shared, session, spec, arguments, &mut script_may_write) {
            Some(frozen) => keys_frozen = frozen,
            None => {
                session.deferred.push((std::mem::take(arguments), Ok(spec)));
                return Flow::Continue;
            }
        }
    }
    session.start_command(spec, arguments);
    session::feed_monitors(shared, session, spec, arguments);
    if !session.authenticated
        && !spec.has(flags::NO_AUTH)
        && shared.config().requirepass().is_some()
    {
        session.rejected();
        session.reply(output, &Frame::error("NOAUTH Authentication required."));
        return Flow::Continue;
    }
    if let Some(reply) = session::subscribed_refusal(session, spec, arguments) {
        session.rejected();
        session.reply(output, &reply);
        return Flow::Continue;
    }
    if session::queues(session, spec) {
        // As Redis: while memory is over the limit, nothing is queued.
        let store = store.get_or_insert_with(|| shared.store());
        if crate::evict::out_of_memory(shared, store) {
            session::refuse_in_multi(session);
            session.rejected();
            session.reply(output, &Frame::error(keyspace::evict::OOM));
            return Flow::Continue;
        }
    }
    if let session::InMulti::Answered(reply) =
        session::queue_in_multi(session, spec, arguments, false)
    {
        session.reply(output, &reply);
        return Flow::Continue;
    }
    let arguments = &arguments[..];
    if spec.name == "multi" {
        // Touches only the session: the keyspace lock is kept for the
        // requests behind it.
        let reply = session::multi(session);
        session.reply(output, &reply);
        return Flow::Continue;
    }
    if spec.name == "exec" {
        let monitored = session::exec_for_monitors(shared, session);
        let reply = exec(shared, session, store, now_ms, keys_frozen);
        session::feed_exec(shared, session, monitored, spec, arguments, &reply);
        session.reply(output, &reply);
        return Flow::Continue;
    }
    if spec.name == "watch" {
        let store = store.get_or_insert_with(|| shared.store());
        for key in &arguments[1..] {
            let fingerprint = store.keyspace.watch_fingerprint(session.db, key, now_ms);
            session.watched.push((session.db, key.clone(), fingerprint));
        }
        session.reply(output, &Frame::OK);
        return Flow::Continue;
    }
    if spec.name.starts_with("cluster|") {
        // Not a cluster node (cluster nodes route elsewhere).
        session.reply(output, &Frame::error(session::CLUSTER_DISABLED));
        return Flow::Continue;
    }
    let reply = match spec.handler {
        Handler::Keyspace(_) => {
            let store = store.get_or_insert_with(|| shared.store());
            let out_of_memory = spec.through_log() && crate::evict::out_of_memory(shared, store);
            if out_of_memory && spec.has(flags::DENYOOM) {
                session.rejected();
                session.reply(output, &Frame::error(keyspace::evict::OOM));
                return Flow::Continue;
            }
            let seed = store.rng.next_u64();
            let mut context = Context {
                now_ms,
                rng: Rng::new(seed),
                db: session.db,
                protocol: session.protocol,
                cluster_mode: false,
                lazy_expire: !keys_frozen,
                block: None,
                out_of_memory,
                in_script: false,
                no_touch: session.no_touch,
            };
            if spec.group == "scripting" {
                store.keyspace.record_script_calls = shared.local.pubsub.monitoring();
            }
            let reply =
                if spec.group == "scripting" && store.keyspace.script_may_run_long(arguments) {
                    replication::runtime::long_running(|| {
                        store.keyspace.execute(spec, &mut context, arguments)
                    })
                } else {
                    store.keyspace.execute(spec, &mut context, arguments)
                };
            if let Some(block) = context.block.take() {
                // Under the keyspace lock: pushes from now on are recorded.
                store.keyspace.set_ready_tracking(true);
                block_client(shared, 0, session, spec, arguments, block);
                return Flow::Continue;
            }
            reply
        }
        Handler::Node if matches!(spec.name, "wait" | "waitaof") => {
            match crate::role::standalone_wait(spec.name, arguments) {
                Ok(reply) => reply,
                Err((timeout, reply)) => {
                    block_keyless(shared, session, spec, arguments, timeout, reply);
                    return Flow::Continue;
                }
            }
        }
        Handler::Node | Handler::Container => {
            // Node commands may take other locks or change limits: release the
            // keyspace first.
            if let Some(held) = store.as_mut() {
                publish_keyspace_events(shared, &mut held.keyspace, Some(session.client.id));
            }
            *store = None;
            let (reply, flow) = session::execute(shared, session, spec, arguments);
            parser.set_limits(limits(shared));
            if flow == Flow::Close {
                if let Some(reply) = reply {
                    session.reply(output, &reply);
                }
                return Flow::Close;
            }
            match reply {
                Some(reply) => reply,
                None => return Flow::Continue,
            }
        }
    };
    session.reply(output, &reply);
    Flow::Continue
}
