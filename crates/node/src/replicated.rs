//! The request path of a replica: writes go through the shard's Raft log, reads
//! are served after a linearizability check, and a node that does not lead
//! redirects like a Redis Cluster replica.
//!
//! Requests of one read are handled in order. A run of consecutive writes
//! becomes one log entry (its commands apply atomically, in order, with one
//! time and one seed); reads are checked once per batch (leader lease, with a
//! heartbeat round when the lease is stale) and then read the applied state.
//! Connections that sent READONLY read this replica's state as it is, like Redis
//! replica reads.

use crate::clock;
use crate::cluster_node::{ClusterNode, Target};
use crate::connection::{self, Flow, Resolved};
use crate::replica::Replica;
use crate::server::Shared;
use crate::session::{self, Session};
use bytes::{Bytes, BytesMut};
use keyspace::command::flags;
use keyspace::{commands, CommandSpec, Handler};
use openraft::error::ForwardToLeader;
use replication::serve::{Proposal, ReadRefusal};
use replication::state_machine::{lock_off_worker, ShardState};
use replication::{Op, Request, TypeConfig};
use resp::{encode, Frame, Protocol, RequestParser};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Requests parsed per round. A round's consecutive writes to one shard are
/// one proposal, and the next round waits for it to commit: a round must
/// take what one read brought (up to 16 KB, some 350 small SETs from a
/// router link carrying many clients) or the rest would wait for further
/// commits, one after another.
const BATCH_REQUESTS: usize = 1024;

/// The reply when no replica leads the shard.
pub const CLUSTER_DOWN: &str = "CLUSTERDOWN The cluster is down";

/// The reply when a write's fate is unknown: it was proposed, then leadership
/// changed before it committed here. It may or may not be applied; the server
/// never retries it.
pub const OUTCOME_UNKNOWN: &str =
    "UNKNOWN the write was proposed but leadership changed before it was acknowledged; it may or may not have been applied";

/// How long a proposed write may wait for its commit before its outcome is
/// reported unknown (a leader cut off from its majority).
const WRITE_LIMIT: Duration = Duration::from_secs(5);

/// A follower's reply to a keyless write.
const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";

/// Which replica serves a request: always the node's one replica, or chosen
/// by hash slot on a cluster node.
#[derive(Clone, Copy)]
pub enum Route<'a> {
    Single(&'a Arc<Replica>),
    Cluster(&'a ClusterNode),
}

impl Route<'_> {
    fn target(&self, spec: &CommandSpec, arguments: &[Bytes]) -> Target {
        match self {
            Route::Single(_) if crate::cluster_node::reads_no_shard(spec) => Target::Unsharded,
            Route::Single(replica) => Target::Local(Arc::clone(replica)),
            Route::Cluster(node) => node.target(spec, arguments),
        }
    }

    /// Whether a request goes to `replica` too (so it may join its run).
    fn stays_on(&self, replica: &Replica, spec: &CommandSpec, arguments: &[Bytes]) -> bool {
        match self {
            Route::Single(_) => true,
            Route::Cluster(node) => matches!(
                node.target(spec, arguments),
                Target::Local(other) if other.group.id == replica.group.id
            ),
        }
    }
}

pub async fn process_input(
    shared: &Shared,
    route: Route<'_>,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    output: &mut BytesMut,
) -> Flow {
    let mut commands_run = 0u64;
    session.stats.track_replies(&shared.monitors);
    let flow = run(
        shared,
        route,
        session,
        parser,
        input,
        output,
        &mut commands_run,
    )
    .await;
    shared
        .stats
        .total_commands_processed
        .fetch_add(commands_run, Ordering::Relaxed);
    if !session.stats.is_empty() {
        shared.monitors.flush(&mut session.stats, &session.client);
    }
    flow
}

async fn run(
    shared: &Shared,
    route: Route<'_>,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    output: &mut BytesMut,
    commands_run: &mut u64,
) -> Flow {
    session
        .client
        .last_interaction_ms
        .store(clock::unix_ms(), Ordering::Relaxed);
    let mut batch: Vec<(Vec<Bytes>, Resolved)> = std::mem::take(&mut session.deferred);
    let mut parse_error = session.deferred_error.take();
    loop {
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
        *commands_run += batch.len() as u64;
        let mut read_checked: BTreeMap<u64, Result<(), ReadRefusal>> = BTreeMap::new();
        let mut requests = std::mem::take(&mut batch).into_iter();
        while let Some((mut arguments, resolved)) = requests.next() {
            let spec = match resolved {
                Ok(spec) => spec,
                Err(error) => {
                    session::refuse_in_multi(session);
                    session.reply(output, &error);
                    continue;
                }
            };
            if shared.local.pause.gated() && held_by_pause(shared, route, session, spec, &arguments)
            {
                // Proposed only once the pause lets it go: it and the rest
                // wait in `deferred` (and are counted when they run).
                *commands_run -= 1 + requests.len() as u64;
                session.deferred.push((arguments, Ok(spec)));
                session.deferred.extend(requests);
                session.deferred_error = parse_error;
                return Flow::Continue;
            }
            session.start_command(spec, &arguments);
            session::feed_monitors(shared, session, spec, &arguments);
            if !session.authenticated
                && !spec.has(flags::NO_AUTH)
                && shared.config().requirepass().is_some()
            {
                session.rejected();
                session.reply(output, &Frame::error("NOAUTH Authentication required."));
                continue;
            }
            if let Some(reply) = session::subscribed_refusal(session, spec, &arguments) {
                session.rejected();
                session.reply(output, &reply);
                continue;
            }
            let cluster = matches!(route, Route::Cluster(_));
            let same_slot = || {
                let transaction_slot = session.multi.as_ref().and_then(|tx| tx.slot);
                match keyspace::command_slot(spec, &arguments) {
                    Ok(Some(slot)) => transaction_slot.is_none_or(|first| first == slot),
                    _ => false,
                }
            };
            if session.multi.is_some()
                && matches!(spec.handler, Handler::Keyspace(_))
                && same_slot()
            {
                // As Redis Cluster: a queued command whose keys are served
                // elsewhere gets its redirect now, and EXEC then aborts.
                let refusal = match route.target(spec, &arguments) {
                    Target::Reply(reply) => Some(reply),
                    Target::Local(replica) => replica
                        .group
                        .raft
                        .as_leader()
                        .err()
                        .map(|forward| redirect(&forward, spec, &arguments)),
                    Target::Unsharded => None,
                };
                if let Some(reply) = refusal {
                    session::refuse_in_multi(session);
                    session.reply(output, &reply);
                    continue;
                }
            }
            if session::queues(session, spec) && matches!(spec.handler, Handler::Keyspace(_)) {
                // As Redis: while memory is over the limit, nothing is queued.
                if let Target::Local(replica) = route.target(spec, &arguments) {
                    if crate::evict::out_of_memory_replicated(shared, &replica).await {
                        session::refuse_in_multi(session);
                        session.rejected();
                        session.reply(output, &Frame::error(keyspace::evict::OOM));
                        continue;
                    }
                }
            }
            if let session::InMulti::Answered(reply) =
                session::queue_in_multi(session, spec, &mut arguments, cluster)
            {
                session.reply(output, &reply);
                continue;
            }
            if spec.name == "exec" {
                let monitored = session::exec_for_monitors(shared, session);
                let reply = exec(shared, route, session).await;
                session::feed_exec(shared, session, monitored, spec, &arguments, &reply);
                session.reply(output, &reply);
                continue;
            }
            if spec.name == "watch" {
                let reply = watch(route, session, &arguments).await;
                session.reply(output, &reply);
                continue;
            }
            match spec.handler {
                Handler::Node | Handler::Container => {
                    if spec.name == "failover" {
                        let reply = crate::role::failover(shared, &arguments).await;
                        session.reply(output, &reply);
                        continue;
                    }
                    if spec.name == "save" {
                        let reply = crate::role::raft_save(shared).await;
                        session.reply(output, &reply);
                        continue;
                    }
                    if matches!(spec.name, "wait" | "waitaof") {
                        if let Some(reply) = crate::role::wait(shared, spec.name, &arguments).await
                        {
                            session.reply(output, &reply);
                            continue;
                        }
                    }
                    if spec.name == "migrate" {
                        let reply = migrate(shared, route, session, &arguments).await;
                        session.reply(output, &reply);
                        continue;
                    }
                    if let Route::Cluster(node) = route {
                        if let Some(reply) =
                            crate::cluster_commands::execute(node, spec, &arguments).await
                        {
                            session.reply(output, &reply);
                            continue;
                        }
                    }
                    let (reply, flow) = session::execute(shared, session, spec, &arguments);
                    parser.set_limits(connection::limits(shared));
                    // CONFIG SET may have changed what the slow log takes.
                    session.stats.track_replies(&shared.monitors);
                    if let Some(reply) = reply {
                        session.reply(output, &reply);
                    }
                    if flow == Flow::Close {
                        return Flow::Close;
                    }
                }
                Handler::Keyspace(_)
                    if spec.name.starts_with("cluster|") && matches!(route, Route::Single(_)) =>
                {
                    session.reply(output, &Frame::error(session::CLUSTER_DISABLED));
                }
                Handler::Keyspace(_)
                    if reads_every_led_shard(spec)
                        && !session.readonly
                        && leads_any_shard(route) =>
                {
                    let Route::Cluster(node) = route else {
                        continue;
                    };
                    let reply = read_every_led_shard(node, session, spec, &arguments).await;
                    session.reply(output, &reply);
                }
                Handler::Keyspace(_)
                    if applies_to_every_led_shard(spec) && leads_any_shard(route) =>
                {
                    let Route::Cluster(node) = route else {
                        continue;
                    };
                    let reply = to_every_led_shard(node, session, spec, arguments).await;
                    session.reply(output, &reply);
                }
                Handler::Keyspace(_) => {
                    let shard = match route.target(spec, &arguments) {
                        Target::Local(replica) => replica,
                        Target::Reply(reply) => {
                            session.reply_to(output, &reply, &arguments);
                            continue;
                        }
                        Target::Unsharded => {
                            let mut store = shared.store();
                            let now_ms = clock::unix_ms();
                            let reply = read(
                                &shared.local.pubsub,
                                &mut store,
                                now_ms,
                                session,
                                spec,
                                &arguments,
                            );
                            session.reply_to(output, &reply, &arguments);
                            continue;
                        }
                    };
                    let replica = &*shard;
                    if !spec.through_log() && !blocking_read(spec, &arguments) {
                        // Reads: checked once per replica and batch.
                        if let std::collections::btree_map::Entry::Vacant(slot) =
                            read_checked.entry(replica.group.id)
                        {
                            slot.insert(check_read(replica, session).await);
                        }
                        match read_checked.get(&replica.group.id) {
                            Some(Ok(())) => {
                                // This read and the plain reads right behind it
                                // run under one lock of the applied state.
                                let mut state = lock_off_worker(&replica.group.state);
                                prefetch_reads(
                                    &state,
                                    session.db,
                                    spec,
                                    &arguments,
                                    requests.as_slice(),
                                );
                                let now_ms = clock::unix_ms().max(state.log_time_ms);
                                let reply = read(
                                    &shared.local.pubsub,
                                    &mut state,
                                    now_ms,
                                    session,
                                    spec,
                                    &arguments,
                                );
                                session.reply_to(output, &reply, &arguments);
                                while let Some((arguments, Ok(next))) = requests.as_slice().first()
                                {
                                    if !matches!(next.handler, Handler::Keyspace(_))
                                        || next.through_log()
                                        || !route.stays_on(replica, next, arguments)
                                    {
                                        break;
                                    }
                                    if !session.authenticated
                                        && shared.config().requirepass().is_some()
                                    {
                                        break;
                                    }
                                    let Some((arguments, Ok(next))) = requests.next() else {
                                        break;
                                    };
                                    session.start_command(next, &arguments);
                                    session::feed_monitors(shared, session, next, &arguments);
                                    let reply = read(
                                        &shared.local.pubsub,
                                        &mut state,
                                        now_ms,
                                        session,
                                        next,
                                        &arguments,
                                    );
                                    session.reply_to(output, &reply, &arguments);
                                }
                            }
                            Some(Err(refusal)) => {
                                let reply = refusal.reply(spec, &arguments).unwrap_or_else(|| {
                                    let mut state = lock_off_worker(&replica.group.state);
                                    let now_ms = clock::unix_ms().max(state.log_time_ms);
                                    read(
                                        &shared.local.pubsub,
                                        &mut state,
                                        now_ms,
                                        session,
                                        spec,
                                        &arguments,
                                    )
                                });
                                session.reply_to(output, &reply, &arguments);
                            }
                            None => session.reply(output, &unreachable_reply()),
                        }
                        continue;
                    }
                    // Gather the run of writes that follows, up to the next
                    // request that is not a plain keyspace write. A blocking
                    // command ends its run: what follows waits for its reply.
                    // Writes for other shards this node leads join the batch
                    // as runs of their own (`others`), so that a pipeline
                    // spread over several shards waits for one commit round,
                    // not one per change of shard; replies keep the order of
                    // the requests.
                    let mut run = vec![(arguments, spec)];
                    let mut others: Vec<ShardRun> = Vec::new();
                    // Where each gathered write went: 0 is `run`, i is
                    // `others[i - 1]`.
                    let mut order = vec![0];
                    while let Some((next_arguments, Ok(next))) = requests.as_slice().first() {
                        if run
                            .last()
                            .is_some_and(|(_, spec)| spec.has(flags::BLOCKING))
                        {
                            break;
                        }
                        if !matches!(next.handler, Handler::Keyspace(_))
                            || !next.through_log()
                            || applies_to_every_led_shard(next)
                        {
                            break;
                        }
                        if !session.authenticated && shared.config().requirepass().is_some() {
                            break;
                        }
                        let destination = match route.target(next, next_arguments) {
                            Target::Local(other) if other.group.id == replica.group.id => {
                                // A blocking command is served alone with
                                // its own shard's run.
                                if next.has(flags::BLOCKING) && !others.is_empty() {
                                    break;
                                }
                                0
                            }
                            Target::Local(other) if !next.has(flags::BLOCKING) => {
                                match others
                                    .iter()
                                    .position(|(known, _)| known.group.id == other.group.id)
                                {
                                    Some(index) => index + 1,
                                    None => {
                                        others.push((other, Vec::new()));
                                        others.len()
                                    }
                                }
                            }
                            _ => break,
                        };
                        let Some((arguments, Ok(next))) = requests.next() else {
                            break;
                        };
                        session.start_command(next, &arguments);
                        session::feed_monitors(shared, session, next, &arguments);
                        match destination {
                            0 => run.push((arguments, next)),
                            index => others[index - 1].1.push((arguments, next)),
                        }
                        order.push(destination);
                    }
                    if !others.is_empty() {
                        let mut shards: Vec<ShardRun> = vec![(shard.clone(), run)];
                        shards.extend(others);
                        let replies = propose_runs(shared, session, shards).await;
                        let mut replies: Vec<_> = replies.into_iter().map(Vec::into_iter).collect();
                        for destination in order {
                            let reply = replies[destination].next().unwrap_or_else(|| {
                                Frame::error("ERR internal: reply count mismatch")
                            });
                            session.reply(output, &reply);
                        }
                        continue;
                    }
                    let last = run
                        .last()
                        .map(|(arguments, spec)| (arguments.clone(), *spec));
                    let out_of_memory =
                        crate::evict::out_of_memory_replicated(shared, replica).await;
                    if out_of_memory && run.iter().any(|(_, spec)| spec.has(flags::DENYOOM)) {
                        let replies = propose_run(replica, session, run, out_of_memory).await;
                        for reply in replies {
                            session.reply(output, &reply);
                        }
                        continue;
                    }
                    let (mut replies, block) = propose_watched(
                        replica,
                        session.db,
                        session.protocol,
                        run,
                        Vec::new(),
                        out_of_memory,
                    )
                    .await
                    .unwatched();
                    if let (Some(block), Some((arguments, spec))) = (block, last) {
                        // The blocking command's own reply stands for a
                        // wait that cannot happen; the wait has its own.
                        replies.pop();
                        for reply in replies {
                            session.reply(output, &reply);
                        }
                        let (db, keys) = (block.db, block.keys.clone());
                        {
                            // Recording on and the waiter registered under the
                            // state lock, so the task that turns recording off
                            // sees the waiter.
                            let mut state = lock_off_worker(&replica.group.state);
                            state.keyspace.set_ready_tracking(true);
                            connection::block_client(
                                shared,
                                replica.group.id,
                                session,
                                spec,
                                &arguments,
                                block,
                            );
                        }
                        // Entries applied since this one may have filled the keys.
                        replica.signal_ready(db, &keys);
                        session.deferred.extend(requests);
                        session.deferred_error = parse_error;
                        return Flow::Continue;
                    }
                    for reply in replies {
                        session.reply(output, &reply);
                    }
                }
            }
        }
        if let Some(error) = parse_error {
            encode(
                &Frame::error_owned(format!("ERR {error}")),
                session.protocol,
                output,
            );
            return Flow::Close;
        }
        if !batch_was_full {
            return Flow::Continue;
        }
    }
}

/// Whether CLIENT PAUSE holds a command (see `crate::pause::check`); a
/// script's flags are read from the shard its keys live in.
fn held_by_pause(
    shared: &Shared,
    route: Route<'_>,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
) -> bool {
    // The script call itself, or one queued in the transaction EXEC runs.
    let mut script_may_write = |arguments: &[Bytes]| {
        let script = commands::resolve(arguments).unwrap_or(spec);
        match route.target(script, arguments) {
            Target::Local(replica) => lock_off_worker(&replica.group.state)
                .keyspace
                .script_may_write(arguments),
            _ => shared.store().keyspace.script_may_write(arguments),
        }
    };
    crate::pause::check(shared, session, spec, arguments, &mut script_may_write).is_none()
}

/// One shard's writes of a batch, in request order.
type ShardRun = (Arc<Replica>, Vec<(Vec<Bytes>, &'static CommandSpec)>);

/// Proposes each shard's run of plain (not blocking) writes, all at once;
/// the replies of each run, in the order of `shards`.
async fn propose_runs(
    shared: &Shared,
    session: &Session,
    shards: Vec<ShardRun>,
) -> Vec<Vec<Frame>> {
    let mut proposals = Vec::with_capacity(shards.len());
    for (replica, run) in shards {
        let out_of_memory = crate::evict::out_of_memory_replicated(shared, &replica).await;
        proposals.push(async move { propose_run(&replica, session, run, out_of_memory).await });
    }
    futures_util::future::join_all(proposals).await
}

/// Proposes a run of plain writes as one entry; one reply per write. While
/// memory is over the limit, writes that may grow it are refused and the
/// others still run, each alone.
async fn propose_run(
    replica: &Replica,
    session: &Session,
    run: Vec<(Vec<Bytes>, &'static CommandSpec)>,
    out_of_memory: bool,
) -> Vec<Frame> {
    let (db, protocol) = (session.db, session.protocol);
    if out_of_memory && run.iter().any(|(_, spec)| spec.has(flags::DENYOOM)) {
        let mut replies = Vec::with_capacity(run.len());
        for (arguments, spec) in run {
            let reply = if spec.has(flags::DENYOOM) {
                Frame::error(keyspace::evict::OOM)
            } else {
                let run = vec![(arguments, spec)];
                let (replies, _) = propose_watched(replica, db, protocol, run, Vec::new(), true)
                    .await
                    .unwatched();
                replies.into_iter().next().unwrap_or(Frame::Null)
            };
            replies.push(reply);
        }
        return replies;
    }
    propose_watched(replica, db, protocol, run, Vec::new(), out_of_memory)
        .await
        .unwatched()
        .0
}

/// SCRIPT LOAD/FLUSH, the FUNCTION writes (keyless changes of a shard's
/// script store) and FLUSHALL/FLUSHDB. A cluster node applies them to every
/// shard it leads, as Redis Cluster clients expect of a master (they send
/// them to each one, and a master's data is all its slots).
fn applies_to_every_led_shard(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "flushall"
            | "flushdb"
            | "script|load"
            | "script|flush"
            | "function|load"
            | "function|delete"
            | "function|flush"
            | "function|restore"
    )
}

/// Whole-node reads: on a node they cover the keys of every shard it leads,
/// as a Redis Cluster master's cover all its slots (cluster clients send
/// DBSIZE and SCAN to every master and add up the answers).
fn reads_every_led_shard(spec: &CommandSpec) -> bool {
    matches!(spec.name, "dbsize" | "keys" | "scan" | "randomkey")
}

/// Bits of a node's SCAN cursor that name the shard being scanned; the
/// shard's own cursor is above them.
const SCAN_SHARD_BITS: u32 = 16;

/// DBSIZE (summed), KEYS (concatenated), RANDOMKEY (a shard with keys, tried
/// in a random order) and SCAN (one shard at a time, in shard order, the
/// cursor carrying the shard) over the shards this node leads, each read
/// after that shard's own read check.
async fn read_every_led_shard(
    node: &ClusterNode,
    session: &Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
) -> Frame {
    let mut led: Vec<Arc<Replica>> = node
        .local_shards()
        .into_iter()
        .filter(|replica| replica.group.raft.is_leader())
        .collect();
    led.sort_by_key(|replica| replica.group.id);
    let run = |replica: &Replica, arguments: &[Bytes]| {
        let mut state = lock_off_worker(&replica.group.state);
        let now_ms = clock::unix_ms().max(state.log_time_ms);
        read(
            &node.local.pubsub,
            &mut state,
            now_ms,
            session,
            spec,
            arguments,
        )
    };
    let checked = |replica: Arc<Replica>| async move {
        match check_read(&replica, session).await {
            Ok(()) => Ok(replica),
            Err(refusal) => Err(refusal
                .reply(spec, arguments)
                .unwrap_or_else(|| Frame::error(CLUSTER_DOWN))),
        }
    };
    match spec.name {
        "scan" => {
            let Some(cursor) = std::str::from_utf8(&arguments[1])
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
            else {
                return Frame::error("ERR invalid cursor");
            };
            let shard = cursor & ((1 << SCAN_SHARD_BITS) - 1);
            let mut inner = cursor >> SCAN_SHARD_BITS;
            // The named shard, or (when this node no longer leads it) the
            // next one it leads, from its start.
            let Some(position) = led.iter().position(|replica| replica.group.id >= shard) else {
                return Frame::Array(vec![Frame::bulk("0"), Frame::Array(Vec::new())]);
            };
            if led[position].group.id != shard {
                inner = 0;
            }
            let replica = match checked(led[position].clone()).await {
                Ok(replica) => replica,
                Err(reply) => return reply,
            };
            let mut step = arguments.to_vec();
            step[1] = Bytes::from(inner.to_string());
            let reply = run(&replica, &step);
            let Frame::Array(mut parts) = reply else {
                return reply;
            };
            let next_inner = match parts.first().and_then(Frame::as_bytes) {
                Some(text) => std::str::from_utf8(text)
                    .ok()
                    .and_then(|text| text.parse::<u64>().ok())
                    .unwrap_or(0),
                None => return Frame::Array(parts),
            };
            let next = if next_inner != 0 && next_inner >> (64 - SCAN_SHARD_BITS) == 0 {
                (next_inner << SCAN_SHARD_BITS) | replica.group.id
            } else {
                // This shard is done: the next led shard from its start.
                led.get(position + 1).map_or(0, |next| next.group.id)
            };
            parts[0] = Frame::Bulk(Bytes::from(next.to_string()));
            Frame::Array(parts)
        }
        "randomkey" => {
            if led.is_empty() {
                return Frame::Null;
            }
            let start = clock::unix_micros() as usize % led.len();
            for offset in 0..led.len() {
                let replica = match checked(led[(start + offset) % led.len()].clone()).await {
                    Ok(replica) => replica,
                    Err(reply) => return reply,
                };
                let reply = run(&replica, arguments);
                if !matches!(reply, Frame::Null) {
                    return reply;
                }
            }
            Frame::Null
        }
        _ => {
            let mut total = 0i64;
            let mut keys = Vec::new();
            for replica in led {
                let replica = match checked(replica).await {
                    Ok(replica) => replica,
                    Err(reply) => return reply,
                };
                match run(&replica, arguments) {
                    Frame::Integer(count) => total += count,
                    Frame::Array(found) => keys.extend(found),
                    other => return other,
                }
            }
            if spec.name == "dbsize" {
                Frame::Integer(total)
            } else {
                Frame::Array(keys)
            }
        }
    }
}

fn leads_any_shard(route: Route<'_>) -> bool {
    match route {
        Route::Single(_) => false,
        Route::Cluster(node) => node
            .local_shards()
            .iter()
            .any(|replica| replica.group.raft.is_leader()),
    }
}

/// Proposes a keyless change to every shard this node leads, in shard order;
/// answers the first error, or the first shard's reply.
async fn to_every_led_shard(
    node: &ClusterNode,
    session: &Session,
    spec: &'static CommandSpec,
    arguments: Vec<Bytes>,
) -> Frame {
    let mut first = None;
    for replica in node.local_shards() {
        if !replica.group.raft.is_leader() {
            continue;
        }
        let (replies, _) = propose(
            &replica,
            session.db,
            session.protocol,
            vec![(arguments.clone(), spec)],
        )
        .await;
        let reply = replies.into_iter().next().unwrap_or(Frame::Null);
        if matches!(reply, Frame::Error(_)) {
            return reply;
        }
        first.get_or_insert(reply);
    }
    first.unwrap_or_else(|| Frame::error(CLUSTER_DOWN))
}

fn unreachable_reply() -> Frame {
    Frame::error("ERR internal: read check missing")
}

/// How a read refusal is told to the client.
trait RefusalReply {
    fn reply(&self, spec: &CommandSpec, arguments: &[Bytes]) -> Option<Frame>;
}

impl RefusalReply for ReadRefusal {
    /// The refusal for this read, or `None` when it is a keyless read a replica
    /// answers from its own state (DBSIZE, SCAN, RANDOMKEY ...), as in Redis.
    fn reply(&self, spec: &CommandSpec, arguments: &[Bytes]) -> Option<Frame> {
        match self {
            ReadRefusal::NotLeader(forward) => {
                first_key(spec, arguments).map(|_| redirect(forward, spec, arguments))
            }
            ReadRefusal::Down => Some(Frame::error(CLUSTER_DOWN)),
        }
    }
}

/// Confirms this replica may serve linearizable reads now (READONLY sessions
/// accept this replica's state as it is).
async fn check_read(replica: &Replica, session: &Session) -> Result<(), ReadRefusal> {
    if session.readonly {
        return Ok(());
    }
    replica.group.check_read().await
}

/// EXEC on a replica: the queued keyspace commands go through the log as one
/// entry, so every replica applies them together and nothing comes between
/// them; reads inside see the transaction's own writes. Connection commands
/// queued with them run in place. A replica that does not lead answers the
/// whole EXEC with the redirect its first keyed command would get.
async fn exec(shared: &Shared, route: Route<'_>, session: &mut Session) -> Frame {
    let Some(transaction) = session.multi.take() else {
        return Frame::error("ERR EXEC without MULTI");
    };
    let watched: Vec<(Bytes, Bytes)> = std::mem::take(&mut session.watched)
        .into_iter()
        .map(|(_, key, fingerprint)| (key, fingerprint))
        .collect();
    if transaction.failed {
        return Frame::error(session::EXECABORT);
    }
    let keyspace_commands: Vec<(Vec<Bytes>, &'static CommandSpec)> = transaction
        .queued
        .iter()
        .filter(|(_, spec)| matches!(spec.handler, Handler::Keyspace(_)))
        .cloned()
        .collect();
    let mut keyspace_replies: std::vec::IntoIter<Frame>;
    // The transaction's replica: where its keyed commands go (they share a
    // slot), else where its first command that needs a shard goes, else
    // where its watched keys are. A transaction of only PING, ECHO and the
    // like, watching nothing, needs no shard: its commands are answered here.
    let exists = commands::lookup(b"exists").expect("EXISTS exists");
    let watch_probe: Option<Vec<Bytes>> = watched
        .first()
        .map(|(key, _)| vec![Bytes::from_static(b"EXISTS"), key.clone()]);
    let routing = keyspace_commands
        .iter()
        .find(|(arguments, spec)| first_key(spec, arguments).is_some())
        .or_else(|| {
            keyspace_commands
                .iter()
                .find(|(_, spec)| !crate::cluster_node::reads_no_shard(spec))
        })
        .map(|(arguments, spec)| (arguments.as_slice(), *spec))
        .or_else(|| watch_probe.as_deref().map(|probe| (probe, exists)));
    if let (Some((arguments, spec)), false) = (routing, keyspace_commands.is_empty()) {
        let replica = match route.target(spec, arguments) {
            Target::Local(replica) => replica,
            Target::Reply(reply) => return reply,
            Target::Unsharded => {
                return Frame::error("CLUSTERDOWN The cluster is down");
            }
        };
        if let Err(forward) = replica.group.raft.as_leader() {
            return redirect(&forward, spec, arguments);
        }
        let out_of_memory = crate::evict::out_of_memory_replicated(shared, &replica).await;
        if out_of_memory
            && keyspace_commands.iter().any(|(arguments, spec)| {
                spec.has(flags::DENYOOM)
                    || (session::is_script_call(spec)
                        && lock_off_worker(&replica.group.state)
                            .keyspace
                            .script_denies_oom(arguments))
            })
        {
            return Frame::error_owned(session::execabort_because(keyspace::evict::OOM));
        }
        let specs: Vec<&'static CommandSpec> =
            keyspace_commands.iter().map(|(_, spec)| *spec).collect();
        match propose_watched(
            &replica,
            session.db,
            session.protocol,
            keyspace_commands,
            watched,
            out_of_memory,
        )
        .await
        {
            Proposed::Replies(replies, _) => {
                if let Some(refusal) = moving_slot_refusal(&specs, &replies) {
                    return refusal;
                }
                keyspace_replies = replies.into_iter()
            }
            Proposed::NotRun(replies) => {
                return replies
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Frame::error(CLUSTER_DOWN))
            }
            Proposed::Aborted => return Frame::NullArray,
        }
    } else {
        let now_ms = clock::unix_ms();
        let replies: Vec<Frame> = keyspace_commands
            .iter()
            .map(|(arguments, spec)| {
                read(
                    &shared.local.pubsub,
                    &mut shared.store(),
                    now_ms,
                    session,
                    spec,
                    arguments,
                )
            })
            .collect();
        keyspace_replies = replies.into_iter();
    }
    let mut replies = Vec::with_capacity(transaction.queued.len());
    for (arguments, spec) in transaction.queued {
        let reply = match spec.handler {
            Handler::Keyspace(_) => keyspace_replies
                .next()
                .unwrap_or_else(|| Frame::error("ERR internal: reply count mismatch")),
            Handler::Node | Handler::Container => {
                session::execute_queued(shared, session, spec, &arguments)
            }
        };
        replies.push(reply);
    }
    Frame::Array(replies)
}

/// A transaction whose slot was frozen or dropped by a migration when its
/// entry applied changed nothing: every write in it was refused with
/// TRYAGAIN (only reads and keyless commands that write nothing ran). As in
/// Redis Cluster, EXEC then answers that one error, not an array of it that
/// reads as a transaction run with failing commands. `None` when the
/// transaction ran (some write went through, or none was refused).
fn moving_slot_refusal(specs: &[&'static CommandSpec], replies: &[Frame]) -> Option<Frame> {
    let refused = |reply: &Frame| matches!(reply, Frame::Error(text) if text.as_ref() == keyspace::TRYAGAIN.as_bytes());
    let refusal = replies.iter().find(|reply| refused(reply))?;
    let wrote = specs
        .iter()
        .zip(replies)
        .any(|(spec, reply)| spec.has(flags::WRITE) && !refused(reply));
    (!wrote).then(|| refusal.clone())
}

/// WATCH on a replica: the keys must share a slot (cluster) and be served
/// here by the leader; their fingerprints are read linearizably. The EXEC
/// entry carries them, and every replica checks them when it applies it.
async fn watch(route: Route<'_>, session: &mut Session, arguments: &[Bytes]) -> Frame {
    let keys = &arguments[1..];
    let slot = cluster::key_slot(&keys[0]);
    if matches!(route, Route::Cluster(_)) && keys.iter().any(|key| cluster::key_slot(key) != slot) {
        return Frame::error(keyspace::slots::CROSSSLOT);
    }
    // Route as a read of the first key would be.
    let exists = keyspace::commands::lookup(b"exists").expect("EXISTS exists");
    let probe = [Bytes::from_static(b"EXISTS"), keys[0].clone()];
    let replica = match route.target(exists, &probe) {
        Target::Local(replica) => replica,
        Target::Reply(reply) => return reply,
        Target::Unsharded => return Frame::error("CLUSTERDOWN The cluster is down"),
    };
    match check_read(&replica, session).await {
        Ok(()) => {}
        Err(refusal) => {
            return refusal
                .reply(exists, &probe)
                .unwrap_or_else(|| Frame::error(CLUSTER_DOWN))
        }
    }
    let state = lock_off_worker(&replica.group.state);
    let now_ms = clock::unix_ms().max(state.log_time_ms);
    for key in keys {
        let fingerprint = state.keyspace.watch_fingerprint(session.db, key, now_ms);
        session.watched.push((session.db, key.clone(), fingerprint));
    }
    Frame::OK
}

/// MIGRATE on the shard of its keys (one slot in a cluster), run by that
/// shard's leader: the payloads are read linearizably, sent to the target
/// with the shard free meanwhile, and what the target restored is deleted
/// here (unless COPY) through the log in one entry that WATCHes each key as
/// it was dumped. If one was written in between, nothing is deleted and the
/// reply says so: the target holds the old value, this shard the new one.
async fn migrate(
    shared: &Shared,
    route: Route<'_>,
    session: &Session,
    arguments: &[Bytes],
) -> Frame {
    let options = match crate::migrate::parse(arguments) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let Some(first) = options.keys.first() else {
        return Frame::simple("NOKEY");
    };
    let slot = cluster::key_slot(first);
    if matches!(route, Route::Cluster(_))
        && options
            .keys
            .iter()
            .any(|key| cluster::key_slot(key) != slot)
    {
        return Frame::error(keyspace::slots::CROSSSLOT);
    }
    // Routed as the delete it ends with.
    let del = keyspace::commands::lookup(b"del").expect("DEL exists");
    let probe = [Bytes::from_static(b"DEL"), first.clone()];
    let replica = match route.target(del, &probe) {
        Target::Local(replica) => replica,
        Target::Reply(reply) => return reply,
        Target::Unsharded => return Frame::error(CLUSTER_DOWN),
    };
    if let Err(forward) = replica.group.raft.as_leader() {
        return redirect(&forward, del, &probe);
    }
    if let Err(refusal) = replica.group.check_read().await {
        return refusal
            .reply(del, &probe)
            .unwrap_or_else(|| Frame::error(CLUSTER_DOWN));
    }
    let (moving, watched) = {
        let mut state = lock_off_worker(&replica.group.state);
        let now_ms = clock::unix_ms().max(state.log_time_ms);
        let moving = crate::migrate::dumps(&mut state.keyspace, session.db, now_ms, &options.keys);
        let watched: Vec<(Bytes, Bytes)> = moving
            .iter()
            .map(|(key, _, _)| {
                let fingerprint = state.keyspace.watch_fingerprint(session.db, key, now_ms);
                (key.clone(), fingerprint)
            })
            .collect();
        (moving, watched)
    };
    if moving.is_empty() {
        return Frame::simple("NOKEY");
    }
    let outcome = replication::runtime::long_running(|| {
        crate::migrate::send(&shared.local.migrate_sockets, &options, &moving)
    });
    if options.copy || outcome.restored.is_empty() {
        return outcome.reply;
    }
    let mut delete = vec![Bytes::from_static(b"DEL")];
    delete.extend(outcome.restored.iter().cloned());
    let watched = watched
        .into_iter()
        .filter(|(key, _)| outcome.restored.contains(key))
        .collect();
    match propose_watched(
        &replica,
        session.db,
        session.protocol,
        vec![(delete, del)],
        watched,
        false,
    )
    .await
    {
        Proposed::Replies(..) => outcome.reply,
        Proposed::Aborted => Frame::error(
            "ERR MIGRATE copied the keys, but one was written here meanwhile, so none was deleted here",
        ),
        Proposed::NotRun(errors) => errors.into_iter().next().unwrap_or(outcome.reply),
    }
}

/// XREAD with BLOCK: a read that may wait. It runs through the log like
/// the blocking writes, so that a wait registers after its own entry
/// applied and is served again through the log (see `replica.rs`).
fn blocking_read(spec: &CommandSpec, arguments: &[Bytes]) -> bool {
    spec.has(flags::BLOCKING)
        && arguments
            .iter()
            .skip(1)
            .any(|argument| argument.eq_ignore_ascii_case(b"BLOCK"))
}

/// Runs a read-only command against the applied state without changing it.
/// Requests the memory of the keys of this read and of the plain reads
/// queued right behind it, which run under the same lock: the loads overlap
/// instead of missing the cache one by one (as a standalone node does for its
/// batches, and the state machine for an entry's commands).
fn prefetch_reads(
    state: &ShardState,
    db: usize,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
    queued: &[(Vec<Bytes>, Resolved)],
) {
    let following = queued
        .iter()
        .take_while(|(_, resolved)| {
            resolved.as_ref().is_ok_and(|next| {
                matches!(next.handler, Handler::Keyspace(_)) && !next.through_log()
            })
        })
        .map(|(arguments, resolved)| (&arguments[..], resolved));
    let this: Resolved = Ok(spec);
    let mut keys = std::iter::once((arguments, &this))
        .chain(following)
        .flat_map(|(arguments, resolved)| connection::fixed_keys(arguments, resolved));
    // A lone key is looked up right away anyway.
    if let (Some(first), Some(second)) = (keys.next(), keys.next()) {
        state
            .keyspace
            .prefetch(db, [first, second].into_iter().chain(keys));
        let following =
            connection::keyed_requests(queued).take_while(|(next, _)| !next.through_log());
        let requests = std::iter::once((spec, arguments)).chain(following);
        state.keyspace.prefetch_members(db, requests);
    }
}

fn read(
    pubsub: &crate::pubsub::PubSub,
    state: &mut ShardState,
    now_ms: u64,
    session: &Session,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Frame {
    // A script's commands are shown to monitors (read paths take no log
    // entry, so nothing else collects them).
    let scripting = spec.group == "scripting";
    if scripting {
        state.keyspace.record_script_calls = pubsub.monitoring();
    }
    let reply = replication::serve::read(
        state,
        now_ms,
        session.db,
        session.protocol,
        session.no_touch,
        spec,
        arguments,
    );
    if scripting {
        crate::pubsub::feed_script_calls(pubsub, state.keyspace.take_script_calls());
    }
    reply
}

/// Proposes a run of writes as one entry and returns one reply per command,
/// and what the last command waits for if it is a blocking command that found
/// nothing to serve.
pub async fn propose(
    replica: &Replica,
    db: usize,
    protocol: Protocol,
    run: Vec<(Vec<Bytes>, &'static CommandSpec)>,
) -> (Vec<Frame>, Option<keyspace::BlockOn>) {
    propose_watched(replica, db, protocol, run, Vec::new(), false)
        .await
        .unwatched()
}

/// What a proposal came back with.
pub enum Proposed {
    Replies(Vec<Frame>, Option<keyspace::BlockOn>),
    /// A watched key had changed: nothing ran.
    Aborted,
    /// The entry did not run here (refused: MOVED, CLUSTERDOWN), or its fate
    /// is unknown (UNKNOWN), or it failed: the error, once per command. A
    /// transaction answers EXEC with the first as a whole (it did not run as
    /// far as the client can tell), never as an array of errors, which would
    /// read as a transaction that ran and whose commands all failed.
    NotRun(Vec<Frame>),
}

impl Proposed {
    /// A proposal that watched nothing: one reply per command (the errors
    /// when it did not run), and what a blocking last command waits for.
    fn unwatched(self) -> (Vec<Frame>, Option<keyspace::BlockOn>) {
        match self {
            Proposed::Replies(replies, block) => (replies, block),
            Proposed::NotRun(replies) => (replies, None),
            // Nothing was watched, so nothing can abort.
            Proposed::Aborted => (Vec::new(), None),
        }
    }
}

/// [`propose`] with WATCHed keys checked when the entry applies, and
/// `out_of_memory` (the leader found memory over the limit with nothing left
/// to evict) carried in the entry for scripts.
pub async fn propose_watched(
    replica: &Replica,
    db: usize,
    protocol: Protocol,
    run: Vec<(Vec<Bytes>, &'static CommandSpec)>,
    watched: Vec<(Bytes, Bytes)>,
    out_of_memory: bool,
) -> Proposed {
    propose_entry(replica, db, protocol, run, watched, out_of_memory, 0).await
}

/// [`propose`] in an entry whose time is at least `min_now_ms`: keys
/// imported from another shard carry that shard's log time, so that time,
/// as their scripts, scores and expiries see it, never goes back.
pub async fn propose_at(
    replica: &Replica,
    run: Vec<(Vec<Bytes>, &'static CommandSpec)>,
    min_now_ms: u64,
) -> Vec<Frame> {
    propose_entry(
        replica,
        0,
        Protocol::Resp2,
        run,
        Vec::new(),
        false,
        min_now_ms,
    )
    .await
    .unwatched()
    .0
}

/// Runs of fewer commands than this share an entry with other clients'.
const SHARED_ENTRY_MAX_RUN: usize = 8;

async fn propose_entry(
    replica: &Replica,
    db: usize,
    protocol: Protocol,
    mut run: Vec<(Vec<Bytes>, &'static CommandSpec)>,
    watched: Vec<(Bytes, Bytes)>,
    out_of_memory: bool,
    min_now_ms: u64,
) -> Proposed {
    let raft = &replica.group.raft;
    if let Err(forward) = raft.as_leader() {
        let replies = run
            .iter()
            .map(|(arguments, spec)| redirect(&forward, spec, arguments))
            .collect();
        return Proposed::NotRun(replies);
    }
    let count = run.len();
    let (seed, instruction_limit) = {
        let mut state = lock_off_worker(&replica.group.state);
        if run.iter().any(|(_, spec)| spec.group == "scripting") {
            // The leader's apply records what the scripts run, for MONITOR.
            state.keyspace.record_script_calls = replica.local.pubsub.monitoring();
        }
        (
            state.rng.next_u64(),
            state.keyspace.config.script_instruction_limit,
        )
    };
    // A script may run up to its instruction budget before it commits
    // (counted here at 50 million instructions a second, a slow machine's
    // pace): its entry is not late until then.
    let scripted = run.iter().any(|(_, spec)| spec.group == "scripting");
    let write_limit = if scripted {
        WRITE_LIMIT + Duration::from_millis(instruction_limit / 50_000)
    } else {
        WRITE_LIMIT
    };
    let (db, resp3) = (db as u32, protocol == Protocol::Resp3);
    // Moved, not copied: a refusal hands them back for its redirects.
    let commands = run
        .iter_mut()
        .map(|(arguments, _)| std::mem::take(arguments))
        .collect();
    let op = if out_of_memory {
        Op::ExecOutOfMemory {
            db,
            resp3,
            commands,
            watched,
        }
    } else {
        Op::Exec {
            db,
            resp3,
            commands,
            watched,
        }
    };
    let request = Request::new(clock::unix_ms().max(min_now_ms), seed, op);
    // Short runs of plain commands share an entry with other clients' (see
    // `ShardGroup::propose_batched`). A pipelined run already fills an entry
    // of its own (merging those measured no faster); scripts keep their own
    // limit and long-running handling.
    let proposal =
        if scripted || out_of_memory || count >= SHARED_ENTRY_MAX_RUN || !replica.shared_entries {
            replica.group.propose(request, write_limit).await
        } else {
            replica.group.propose_batched(request, write_limit).await
        };
    match proposal {
        Proposal::Applied(response) if response.aborted => Proposed::Aborted,
        Proposal::Applied(response) if response.replies.len() == count => {
            Proposed::Replies(response.replies, response.block)
        }
        Proposal::Applied(_) => Proposed::Replies(
            vec![Frame::error("ERR internal: reply count mismatch"); count],
            None,
        ),
        // Refused before anything was appended: nothing happened, so the
        // client is told where to go.
        Proposal::Refused(forward, op) => {
            let commands = match op {
                Some(Op::Exec { commands, .. } | Op::ExecOutOfMemory { commands, .. }) => commands,
                _ => Vec::new(),
            };
            let replies = run
                .iter()
                .enumerate()
                .map(|(at, (_, spec))| {
                    let arguments = commands.get(at).map_or(&[][..], Vec::as_slice);
                    redirect(&forward, spec, arguments)
                })
                .collect();
            Proposed::NotRun(replies)
        }
        Proposal::Unknown => Proposed::NotRun(vec![Frame::error(OUTCOME_UNKNOWN); count]),
        Proposal::Failed(error) => {
            Proposed::NotRun(vec![Frame::error_owned(format!("ERR {error}")); count])
        }
    }
}

/// The reply that sends a client to the leader: MOVED with the slot of the
/// command's first key, READONLY for keyless writes, CLUSTERDOWN with no leader.
pub fn redirect(
    forward: &ForwardToLeader<TypeConfig>,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Frame {
    let Some(leader) = &forward.leader_node else {
        return Frame::error(CLUSTER_DOWN);
    };
    match first_key(spec, arguments) {
        Some(key) => {
            Frame::error_owned(format!("MOVED {} {}", cluster::key_slot(key), leader.resp))
        }
        None => Frame::error(READONLY_REPLICA),
    }
}

fn first_key<'a>(spec: &CommandSpec, arguments: &'a [Bytes]) -> Option<&'a Bytes> {
    spec.key_positions(arguments)
        .ok()
        .and_then(|positions| positions.first().copied())
        .and_then(|position| arguments.get(position))
}
