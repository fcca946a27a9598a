//! One client connection: read bytes, parse every complete request in them, run
//! them in order, and write all their replies with one write. The keyspace lock is
//! taken once for a run of keyspace commands in the same read, not per command.

use crate::clients::ClientInfo;
use crate::clock;
use crate::server::{Shared, Store};
use crate::session::{self, Session};
use bytes::{Bytes, BytesMut};
use keyspace::command::flags;
use keyspace::{commands, CommandSpec, Context, Handler, Rng};
use resp::{encode, Frame, RequestLimits, RequestParser};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
pub async fn reject(mut stream: TcpStream, message: &'static str) {
    let mut out = BytesMut::new();
    encode(&Frame::error(message), resp::Protocol::Resp2, &mut out);
    let _ = stream.write_all(&out).await;
}

pub async fn serve(shared: Arc<Shared>, mut stream: TcpStream, client: Arc<ClientInfo>) {
    let authenticated = shared.config().requirepass().is_none();
    let mut session = Session::new(client.clone(), authenticated);
    let mut parser = RequestParser::new(limits(&shared));
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut output = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        if input.capacity() - input.len() < READ_CHUNK_BYTES / 4 {
            input.reserve(READ_CHUNK_BYTES);
        }
        let (idle_limit, query_limit) = {
            let config = shared.config();
            (config.idle_timeout(), config.client_query_buffer_limit())
        };
        let read = tokio::select! {
            read = stream.read_buf(&mut input) => read,
            _ = client.killed() => break,
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
        let flow = match &shared.replica {
            Some(replica) => {
                crate::replicated::process_input(
                    &shared,
                    replica,
                    &mut session,
                    &mut parser,
                    &mut input,
                    &mut output,
                )
                .await
            }
            None => process_input(&shared, &mut session, &mut parser, &mut input, &mut output),
        };
        if !output.is_empty() {
            shared
                .stats
                .net_output_bytes
                .fetch_add(output.len() as u64, Ordering::Relaxed);
            if stream.write_all(&output).await.is_err() {
                break;
            }
            output.clear();
        }
        if flow == Flow::Close || client.is_killed() {
            break;
        }
        let buffered = input.len() + parser.pending_bytes();
        client.details().query_buffer_bytes = buffered;
        if buffered > query_limit {
            tracing::warn!(
                client = client.id,
                "closing client that reached max query buffer length"
            );
            break;
        }
    }
    let _ = stream.shutdown().await;
    shared.clients.unregister(client.id);
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
    let mut batch: Vec<(Vec<Bytes>, Resolved)> = Vec::with_capacity(BATCH_REQUESTS);
    loop {
        // Parse (and resolve against the table) a batch first, so the memory the
        // batch's keys live in can be requested all at once (`Keyspace::prefetch`).
        let mut parse_error = None;
        while batch.len() < BATCH_REQUESTS {
            match parser.next_request(input) {
                Ok(Some(arguments)) => {
                    let resolved = commands::resolve(&arguments);
                    batch.push((arguments, resolved));
                }
                Ok(None) => break,
                Err(error) => {
                    parse_error = Some(error);
                    break;
                }
            }
        }
        let batch_was_full = batch.len() == BATCH_REQUESTS;
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
            }
        }
        for (arguments, resolved) in batch.drain(..) {
            *commands_run += 1;
            let flow = execute_request(
                shared, session, parser, output, &mut store, now_ms, &arguments, resolved,
            );
            if flow == Flow::Close {
                return Flow::Close;
            }
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

/// Requests parsed ahead of execution.
const BATCH_REQUESTS: usize = 32;

/// A request's command, or the error that answers it (unknown, wrong arity).
pub type Resolved = Result<&'static CommandSpec, Frame>;

/// The keys of a keyspace command at fixed positions (its legacy key range).
fn fixed_keys<'a>(arguments: &'a [Bytes], resolved: &Resolved) -> impl Iterator<Item = &'a [u8]> {
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
    arguments: &[Bytes],
    resolved: Resolved,
) -> Flow {
    let spec = match resolved {
        Ok(spec) => spec,
        Err(error) => {
            session.reply(output, &error);
            return Flow::Continue;
        }
    };
    session.note_command(spec.name);
    if !session.authenticated
        && !spec.has(flags::NO_AUTH)
        && shared.config().requirepass().is_some()
    {
        session.reply(output, &Frame::error("NOAUTH Authentication required."));
        return Flow::Continue;
    }
    let reply = match spec.handler {
        Handler::Keyspace(_) => {
            let store = store.get_or_insert_with(|| shared.store());
            let seed = store.rng.next_u64();
            let mut context = Context {
                now_ms,
                rng: Rng::new(seed),
                db: session.db,
                protocol: session.protocol,
                cluster_mode: false,
                lazy_expire: true,
                block: None,
            };
            store.keyspace.execute(spec, &mut context, arguments)
        }
        Handler::Node | Handler::Container => {
            // Node commands may take other locks or change limits: release the
            // keyspace first.
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
