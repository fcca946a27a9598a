//! Per-connection state and the commands that need it or the process: HELLO, AUTH,
//! SELECT, CLIENT, QUIT, RESET, TIME, INFO, CONFIG, DEBUG, SHUTDOWN.

use crate::clients::ClientInfo;
use crate::clock;
use crate::connection::Flow;
use crate::info;
use crate::server::{apply_keyspace_config, Shared};
use bytes::{Bytes, BytesMut};
use keyspace::args::{is_keyword, parse_i64};
use keyspace::{errors, CommandSpec, Context};
use resp::{encode, Frame, Protocol};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The reply to CLUSTER on a node that is not part of a cluster.
pub const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

/// A transaction being queued (MULTI ... EXEC).
#[derive(Default)]
pub struct Transaction {
    pub queued: Vec<(Vec<Bytes>, &'static CommandSpec)>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    pub failed: bool,
    /// The slot of the keys queued so far (cluster mode checks that they all
    /// share it).
    pub slot: Option<u16>,
}

/// EXEC's answer when a queued command was refused.
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// What a connection does with a request while it is in MULTI.
pub enum InMulti {
    /// Not in a transaction, or a command that runs now (EXEC, DISCARD, MULTI,
    /// QUIT, RESET, WATCH ...).
    RunNow,
    /// Queued, or refused: this is the reply.
    Answered(Frame),
}

/// Queues `spec` if the session is in MULTI. Cluster nodes also check that the
/// transaction's keys share one slot.
pub fn queue_in_multi(
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &mut Vec<Bytes>,
    cluster: bool,
) -> InMulti {
    let Some(transaction) = session.multi.as_mut() else {
        return InMulti::RunNow;
    };
    if matches!(spec.name, "exec" | "discard" | "multi" | "quit" | "reset") {
        return InMulti::RunNow;
    }
    if spec.name == "watch" {
        // Refused, and (as in Redis) the transaction is not aborted.
        return InMulti::Answered(Frame::error("ERR WATCH inside MULTI is not allowed"));
    }
    if cluster {
        match (keyspace::command_slot(spec, arguments), transaction.slot) {
            (Ok(None), _) => {}
            (Ok(Some(slot)), None) => transaction.slot = Some(slot),
            (Ok(Some(slot)), Some(first)) if slot == first => {}
            _ => {
                transaction.failed = true;
                return InMulti::Answered(Frame::error(keyspace::slots::CROSSSLOT));
            }
        }
    }
    // Queued, the request is not run now: the transaction takes it over.
    transaction.queued.push((std::mem::take(arguments), spec));
    session.stats.set_outcome(crate::stats::Outcome::Queued);
    InMulti::Answered(Frame::simple("QUEUED"))
}

/// Whether `spec` would be queued (MULTI is open and it is not one of the
/// commands that run at once inside it).
pub fn queues(session: &Session, spec: &CommandSpec) -> bool {
    session.multi.is_some()
        && !matches!(
            spec.name,
            "exec" | "discard" | "multi" | "quit" | "reset" | "watch"
        )
}

/// EXEC's reply when the transaction is refused as a whole (Redis's
/// `execCommandAbort`).
pub fn execabort_because(error: &str) -> String {
    format!("EXECABORT Transaction discarded because of: {error}")
}

/// Marks the transaction failed when a request inside MULTI could not even be
/// resolved (unknown command, wrong arity).
pub fn refuse_in_multi(session: &mut Session) {
    if let Some(transaction) = session.multi.as_mut() {
        transaction.failed = true;
    }
}

/// CLIENT REPLY mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Suppress the reply of the next command only.
    Skip,
}

pub struct Session {
    pub client: Arc<ClientInfo>,
    pub db: usize,
    pub protocol: Protocol,
    pub authenticated: bool,
    pub reply_mode: ReplyMode,
    /// READONLY: reads may be served by a follower from its own state.
    pub readonly: bool,
    /// CLIENT NO-TOUCH: this client's reads leave keys' access data alone.
    pub no_touch: bool,
    /// Set while a blocking command waits (BLPOP and relatives); the
    /// connection waits for its reply before it runs anything else.
    pub blocked: Option<crate::connection::Blocked>,
    /// Set while CLIENT PAUSE holds the command at the head of `deferred`:
    /// its ticket, and whether it is held as a write (see `crate::pause`).
    pub paused: Option<(u64, bool)>,
    /// The pause ticket whose turn came: kept while this connection's batch
    /// runs, given back after it.
    pub pause_turn: Option<u64>,
    /// Requests that arrived behind a blocking command, run once it is answered.
    pub deferred: Vec<(Vec<Bytes>, crate::connection::Resolved)>,
    /// A protocol error met behind a blocking command, reported after the
    /// deferred requests.
    pub deferred_error: Option<String>,
    /// Commands queued since MULTI (see [`Transaction`]).
    pub multi: Option<Transaction>,
    /// WATCHed keys: (database, key, fingerprint when watched).
    pub watched: Vec<(usize, Bytes, Bytes)>,
    /// Channels, patterns and shard channels this connection listens to.
    pub subscriptions: crate::pubsub::Subscriptions,
    /// Replies beyond the first of a command that answers several
    /// (SUBSCRIBE ch1 ch2 ...); [`Session::reply`] writes them after it.
    more_replies: Vec<Frame>,
    /// Set by CLIENT REPLY SKIP for the command after it.
    skip_next: bool,
    last_command: &'static str,
    /// Messages this connection PUBLISHed, delivered before it runs
    /// anything else (see [`crate::pubsub::Deliveries`]).
    pub deliveries: crate::pubsub::Deliveries,
    /// This connection's command statistics since they were last folded into
    /// the node's (see [`crate::stats`]).
    pub stats: crate::stats::LocalStats,
    /// CLIENT TRACKING, while on.
    pub tracking: Option<crate::tracking::SessionTracking>,
}

impl Session {
    /// A new connection's session; it starts authenticated when no password is set
    /// (setting one later does not log out existing connections, as in Redis).
    pub fn new(client: Arc<ClientInfo>, authenticated: bool) -> Session {
        Session {
            client,
            db: 0,
            protocol: Protocol::Resp2,
            authenticated,
            reply_mode: ReplyMode::On,
            readonly: false,
            no_touch: false,
            blocked: None,
            paused: None,
            pause_turn: None,
            deferred: Vec::new(),
            deferred_error: None,
            multi: None,
            watched: Vec::new(),
            subscriptions: Default::default(),
            more_replies: Vec::new(),
            skip_next: false,
            last_command: "",
            deliveries: Default::default(),
            stats: Default::default(),
            tracking: None,
        }
    }

    /// Appends a reply unless CLIENT REPLY says otherwise.
    pub fn reply(&mut self, output: &mut BytesMut, frame: &Frame) {
        self.stats.replied(frame);
        self.write_reply(output, frame);
    }

    /// [`Session::reply`] to the request whose `arguments` are at hand: the
    /// statistics copy them only for the slow log (see
    /// [`crate::stats::LocalStats::replied_with`]).
    pub fn reply_to(&mut self, output: &mut BytesMut, frame: &Frame, arguments: &[Bytes]) {
        self.stats.replied_with(frame, Some(arguments));
        self.write_reply(output, frame);
    }

    fn write_reply(&mut self, output: &mut BytesMut, frame: &Frame) {
        if self.skip_next {
            self.skip_next = false;
            return;
        }
        match self.reply_mode {
            ReplyMode::On => {
                encode(frame, self.protocol, output);
                for more in self.more_replies.drain(..) {
                    encode(&more, self.protocol, output);
                }
            }
            ReplyMode::Off => self.more_replies.clear(),
            ReplyMode::Skip => {
                self.more_replies.clear();
                self.reply_mode = ReplyMode::On;
                self.skip_next = true;
            }
        }
    }

    /// A command begins: CLIENT LIST's last command, and its statistics.
    pub fn start_command(&mut self, spec: &'static CommandSpec, arguments: &[Bytes]) {
        self.note_command(spec.name);
        self.stats.start(spec, arguments);
        if let Some(tracking) = &mut self.tracking {
            tracking.command(self.client.id, spec, arguments, self.multi.is_some());
        }
    }

    /// The command begun last was refused before it ran (Redis's rejected
    /// calls).
    pub fn rejected(&mut self) {
        self.stats.set_outcome(crate::stats::Outcome::Rejected);
    }

    /// Records the last command name for CLIENT LIST.
    pub fn note_command(&mut self, name: &'static str) {
        if !self.deliveries.is_empty() && name != "publish" {
            self.deliveries.flush();
        }
        // Names are the table's statics: comparing addresses is enough (a
        // false "changed" only costs one more store).
        if !std::ptr::eq(self.last_command, name) {
            self.last_command = name;
            self.client.details().last_command = name;
        }
    }

    fn select(&mut self, db: usize) {
        self.db = db;
        self.client.db.store(db, Ordering::Relaxed);
    }

    fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        if let Some(subscriber) = &self.subscriptions.subscriber {
            subscriber.set_protocol(protocol);
        }
        let version = if protocol == Protocol::Resp3 { 3 } else { 2 };
        self.client.protocol.store(version, Ordering::Relaxed);
    }
}

fn text(argument: &[u8]) -> String {
    String::from_utf8_lossy(argument).into_owned()
}

fn bulk_text(value: impl Into<String>) -> Frame {
    Frame::Bulk(Bytes::from(value.into()))
}

/// MULTI: opens a transaction.
pub fn multi(session: &mut Session) -> Frame {
    if session.multi.is_some() {
        Frame::error("ERR MULTI calls can not be nested")
    } else {
        session.multi = Some(Transaction::default());
        Frame::OK
    }
}

/// Runs a node-handled command. `None` means no reply at all (CLIENT REPLY OFF).
pub fn execute(
    shared: &Shared,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
) -> (Option<Frame>, Flow) {
    let reply = match spec.name {
        "hello" => hello(shared, session, arguments),
        "auth" => auth(shared, session, arguments),
        "select" => select(shared, session, arguments),
        "quit" => return (Some(Frame::OK), Flow::Close),
        "multi" => multi(session),
        "discard" => match session.multi.take() {
            Some(_) => {
                session.watched.clear();
                Frame::OK
            }
            None => Frame::error("ERR DISCARD without MULTI"),
        },
        "unwatch" => {
            session.watched.clear();
            Frame::OK
        }
        "reset" => {
            shared
                .local
                .pubsub
                .forget(session.client.id, &session.subscriptions);
            crate::tracking::stop(shared, session);
            session.subscriptions = Default::default();
            session.multi = None;
            session.watched.clear();
            session.select(0);
            session.set_protocol(Protocol::Resp2);
            session.reply_mode = ReplyMode::On;
            session.readonly = false;
            session.no_touch = false;
            session.client.details().no_touch = false;
            session.authenticated = shared.config().requirepass().is_none();
            session.client.details().name.clear();
            Frame::simple("RESET")
        }
        "monitor" => {
            let subscriber = session
                .subscriptions
                .subscriber
                .get_or_insert_with(|| {
                    crate::pubsub::Subscriber::new(session.client.clone(), session.protocol)
                })
                .clone();
            if !session.subscriptions.monitor {
                session.subscriptions.monitor = true;
                shared.local.pubsub.add_monitor(&subscriber);
            }
            Frame::OK
        }
        "readonly" | "readwrite" => {
            if shared.replica.is_none() && shared.cluster.is_none() {
                Frame::error("ERR This instance has cluster support disabled")
            } else {
                session.readonly = spec.name == "readonly";
                Frame::OK
            }
        }
        "time" => {
            let micros = clock::unix_micros();
            Frame::Array(vec![
                bulk_text((micros / 1_000_000).to_string()),
                bulk_text((micros % 1_000_000).to_string()),
            ])
        }
        "info" => info::info(shared, arguments),
        "subscribe" | "psubscribe" | "ssubscribe" | "unsubscribe" | "punsubscribe"
        | "sunsubscribe" => {
            let mut replies = crate::pubsub::subscription_command(shared, session, spec, arguments);
            if replies.is_empty() {
                return (None, Flow::Continue);
            }
            let first = replies.remove(0);
            session.more_replies = replies;
            first
        }
        "publish" | "spublish" | "slotraft|publish-local" | "slotraft|spublish-local" => {
            crate::pubsub::publish_command(shared, spec, arguments, Some(&mut session.deliveries))
        }
        name if name.starts_with("pubsub|") => crate::pubsub::introspect(shared, spec, arguments),
        "script|kill" => crate::busy::kill(&shared.local.scripts, false),
        "script|debug" => script_debug(&arguments[2]),
        "function|kill" => crate::busy::kill(&shared.local.scripts, true),
        "shutdown" => return shutdown(shared, arguments),
        "debug" => debug(shared, session, arguments),
        "config|get" => config_get(shared, arguments),
        "config|set" => config_set(shared, arguments),
        "config|resetstat" => {
            info::reset_stats(shared);
            Frame::OK
        }
        "config|rewrite" => Frame::error("ERR The server is running without a config file"),
        "config|help" => help(&[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        ]),
        name if name.starts_with("client|") => return client(shared, session, spec, arguments),
        "role" => crate::role::role(shared),
        "lolwut" => bulk_text(format!("Redis ver. {}\n", crate::info::REDIS_VERSION)),
        "replicaof" | "slaveof" => crate::role::replicaof(shared, arguments),
        "failover" => match crate::role::failover_check(shared, arguments) {
            Err(refusal) => refusal,
            // A group's leader runs FAILOVER on its connection (it waits).
            Ok(_) => Frame::error("ERR FAILOVER is answered by the group's leader"),
        },
        "replconf" => return (crate::role::replconf(arguments), Flow::Continue),
        "migrate" if shared.replica.is_none() && shared.cluster.is_none() => {
            let mut store = shared.store();
            let seed = store.rng.next_u64();
            replication::runtime::long_running(|| {
                crate::migrate::migrate(
                    &mut store.keyspace,
                    &shared.local.migrate_sockets,
                    session.db,
                    clock::unix_ms(),
                    seed,
                    arguments,
                )
            })
        }
        // A replicated shard's leader runs it on the connection; queued in
        // a transaction it would need the network inside one log entry.
        "migrate" => {
            Frame::error("ERR MIGRATE inside MULTI is not available on a replicated shard")
        }
        "sync" | "psync" => Frame::error(
            "ERR this node replicates through Raft groups, not the Redis replication protocol",
        ),
        name if name.starts_with("module|") => crate::role::module(name),
        name if name.starts_with("acl|") => crate::acl::execute(shared, name, arguments)
            .unwrap_or_else(|| Frame::error_owned(format!("ERR unknown command '{name}'"))),
        "save" | "bgsave" | "lastsave" | "bgrewriteaof" => {
            crate::role::persistence(shared, spec.name, arguments)
        }
        // Blocking waits are the connection's (see `connection::block_keyless`);
        // here, inside a transaction, WAIT answers at once.
        "wait" | "waitaof" => {
            crate::role::standalone_wait(spec.name, arguments).unwrap_or_else(|(_, reply)| reply)
        }
        name if name.starts_with("slowlog|")
            || name.starts_with("latency|")
            || name.starts_with("memory|") =>
        {
            crate::diagnostics::execute(shared, name, arguments)
                .unwrap_or_else(|| Frame::error_owned(format!("ERR unknown command '{name}'")))
        }
        // Answered by a cluster node before it gets here.
        name if name.starts_with("cluster|") || name.starts_with("slotraft|") => {
            Frame::error(CLUSTER_DISABLED)
        }
        other => Frame::error_owned(format!("ERR unknown command '{other}'")),
    };
    (Some(reply), Flow::Continue)
}

/// EVAL, EVALSHA, FCALL and their read-only forms.
/// A command queued by MULTI, run by EXEC: as on its own, but for SCRIPT
/// DEBUG, which Redis refuses there (EXEC's reply has begun, so Redis finds
/// replies pending and calls it a pipeline).
pub fn execute_queued(
    shared: &Shared,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
) -> Frame {
    if spec.name == "script|debug" {
        return Frame::error("ERR SCRIPT DEBUG must be called outside a pipeline");
    }
    execute(shared, session, spec, arguments)
        .0
        .unwrap_or(Frame::Null)
}

/// SCRIPT DEBUG: NO is the only mode here. The Lua debugger (YES, SYNC)
/// would stop a script in the middle of an entry every replica applies, so
/// slotraft has none, and says so.
fn script_debug(mode: &[u8]) -> Frame {
    if mode.eq_ignore_ascii_case(b"no") {
        Frame::OK
    } else if mode.eq_ignore_ascii_case(b"yes") || mode.eq_ignore_ascii_case(b"sync") {
        Frame::error(
            "ERR SCRIPT DEBUG YES and SYNC are not supported: slotraft has no Lua debugger",
        )
    } else {
        Frame::error("ERR Use SCRIPT DEBUG YES/SYNC/NO")
    }
}

pub fn is_script_call(spec: &CommandSpec) -> bool {
    spec.name.starts_with("eval") || spec.name.starts_with("fcall")
}

/// Shows a command to the connections in MONITOR (when there are any): not
/// the cluster's own plumbing (SLOTRAFT ...), nor commands Redis keeps from
/// monitors, except the script calls it shows.
pub fn feed_monitors(shared: &Shared, session: &Session, spec: &CommandSpec, arguments: &[Bytes]) {
    // As Redis 7, which shows a command once it has run: a command queued
    // in MULTI shows when EXEC runs it, and EXEC after the commands
    // ([`feed_exec`]).
    if !shared.local.pubsub.monitoring() || queues(session, spec) || spec.name == "exec" {
        return;
    }
    feed_monitor_line(shared, session.db, session, spec, arguments);
}

fn feed_monitor_line(
    shared: &Shared,
    db: usize,
    session: &Session,
    spec: &CommandSpec,
    arguments: &[Bytes],
) {
    if !shared.local.pubsub.monitoring() || spec.name.starts_with("slotraft") {
        return;
    }
    if spec.has(keyspace::command::flags::SKIP_MONITOR) && !is_script_call(spec) {
        return;
    }
    let line = crate::pubsub::monitor_line(
        clock::unix_micros(),
        db,
        &session.client.peer.to_string(),
        arguments,
    );
    shared.local.pubsub.feed_monitors(line);
}

/// What MONITOR is to show of an EXEC about to run: the database and the
/// queued commands, taken before EXEC consumes the transaction (`None` while
/// nobody monitors).
pub struct ExecForMonitors {
    db: usize,
    queued: Vec<(Vec<Bytes>, &'static CommandSpec)>,
}

pub fn exec_for_monitors(shared: &Shared, session: &Session) -> Option<ExecForMonitors> {
    if !shared.local.pubsub.monitoring() {
        return None;
    }
    Some(ExecForMonitors {
        db: session.db,
        queued: session
            .multi
            .as_ref()
            .map(|transaction| transaction.queued.clone())
            .unwrap_or_default(),
    })
}

/// Feeds an EXEC that has run to the monitors: the queued commands when it
/// ran them (its reply is their array; a refused or aborted EXEC ran none),
/// each in the database selected after it ran, then EXEC itself.
pub fn feed_exec(
    shared: &Shared,
    session: &Session,
    exec: Option<ExecForMonitors>,
    spec: &CommandSpec,
    arguments: &[Bytes],
    reply: &Frame,
) {
    let Some(exec) = exec else {
        return;
    };
    let mut db = exec.db;
    if let Frame::Array(replies) = reply {
        for ((queued, queued_spec), queued_reply) in exec.queued.iter().zip(replies) {
            if queued_spec.name == "select" && matches!(queued_reply, Frame::Simple(_)) {
                if let Some(index) = queued
                    .get(1)
                    .and_then(|index| keyspace::args::parse_i64(index).ok())
                    .and_then(|index| usize::try_from(index).ok())
                {
                    db = index;
                }
            }
            feed_monitor_line(shared, db, session, queued_spec, queued);
        }
    }
    feed_monitor_line(shared, session.db, session, spec, arguments);
}

/// What a RESP2 connection in subscribed mode may not run, and PING's reply
/// there; `None` when the command runs as usual.
pub fn subscribed_refusal(
    session: &Session,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Option<Frame> {
    if session.protocol != Protocol::Resp2 || !session.subscriptions.active() {
        return None;
    }
    match spec.name {
        "subscribe" | "psubscribe" | "ssubscribe" | "unsubscribe" | "punsubscribe"
        | "sunsubscribe" | "quit" | "reset" => None,
        "ping" => Some(Frame::Array(vec![
            Frame::bulk("pong"),
            Frame::Bulk(arguments.get(1).cloned().unwrap_or_default()),
        ])),
        name => Some(Frame::error_owned(format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        ))),
    }
}

fn help(lines: &[&str]) -> Frame {
    Frame::Array(
        lines
            .iter()
            .map(|line| Frame::Simple(Bytes::copy_from_slice(line.as_bytes())))
            .collect(),
    )
}

fn check_password(shared: &Shared, username: Option<&[u8]>, password: &[u8]) -> Result<(), Frame> {
    let config = shared.config();
    match config.requirepass() {
        None => {
            if username.is_none() {
                Err(Frame::error(
                    "ERR AUTH <password> called without any password configured for the default user. \
                     Are you sure your configuration is correct?",
                ))
            } else if username == Some(b"default") {
                Ok(())
            } else {
                Err(Frame::error(
                    "WRONGPASS invalid username-password pair or user is disabled.",
                ))
            }
        }
        Some(expected) => {
            let user_ok = username.is_none_or(|user| user == b"default");
            if user_ok && password == expected.as_bytes() {
                Ok(())
            } else {
                Err(Frame::error(
                    "WRONGPASS invalid username-password pair or user is disabled.",
                ))
            }
        }
    }
}

fn auth(shared: &Shared, session: &mut Session, arguments: &[Bytes]) -> Frame {
    let result = match arguments.len() {
        2 => check_password(shared, None, &arguments[1]),
        3 => check_password(shared, Some(&arguments[1]), &arguments[2]),
        _ => return Frame::error(errors::SYNTAX),
    };
    match result {
        Ok(()) => {
            session.authenticated = true;
            Frame::OK
        }
        Err(error) => error,
    }
}

fn hello(shared: &Shared, session: &mut Session, arguments: &[Bytes]) -> Frame {
    let mut protocol = session.protocol;
    let mut index = 1;
    if let Some(version) = arguments.get(1) {
        match parse_i64(version) {
            Ok(2) => protocol = Protocol::Resp2,
            Ok(3) => protocol = Protocol::Resp3,
            Ok(_) => return Frame::error("NOPROTO unsupported protocol version"),
            Err(_) => {
                return Frame::error("ERR Protocol version is not an integer or out of range")
            }
        }
        index = 2;
    }
    let mut name = None;
    while index < arguments.len() {
        let remaining = arguments.len() - index - 1;
        if is_keyword(&arguments[index], "AUTH") && remaining >= 2 {
            if let Err(error) =
                check_password(shared, Some(&arguments[index + 1]), &arguments[index + 2])
            {
                return error;
            }
            session.authenticated = true;
            index += 3;
        } else if is_keyword(&arguments[index], "SETNAME") && remaining >= 1 {
            if let Err(error) = valid_client_name(&arguments[index + 1]) {
                return error;
            }
            name = Some(text(&arguments[index + 1]));
            index += 2;
        } else {
            return Frame::error_owned(format!(
                "ERR Syntax error in HELLO option '{}'",
                text(&arguments[index])
            ));
        }
    }
    if !session.authenticated && shared.config().requirepass().is_some() {
        return Frame::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> \
             AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol \
             version at the same time",
        );
    }
    if let Some(name) = name {
        session.client.details().name = name;
    }
    session.set_protocol(protocol);
    let cluster = shared.config().cluster_enabled();
    Frame::Map(vec![
        (bulk_text("server"), bulk_text("redis")),
        (bulk_text("version"), bulk_text(info::REDIS_VERSION)),
        (
            bulk_text("proto"),
            Frame::Integer(if protocol == Protocol::Resp3 { 3 } else { 2 }),
        ),
        (bulk_text("id"), Frame::Integer(session.client.id as i64)),
        (
            bulk_text("mode"),
            bulk_text(if cluster { "cluster" } else { "standalone" }),
        ),
        (bulk_text("role"), bulk_text("master")),
        (bulk_text("modules"), Frame::Array(vec![])),
    ])
}

fn select(shared: &Shared, session: &mut Session, arguments: &[Bytes]) -> Frame {
    let index = match parse_i64(&arguments[1]) {
        Ok(index) => index,
        Err(error) => return error,
    };
    if shared.config().cluster_enabled() && index != 0 {
        return Frame::error("ERR SELECT is not allowed in cluster mode");
    }
    let databases = shared.config().databases() as i64;
    if index < 0 || index >= databases {
        return Frame::error(errors::DB_INDEX_OUT_OF_RANGE);
    }
    session.select(index as usize);
    Frame::OK
}

fn shutdown(shared: &Shared, arguments: &[Bytes]) -> (Option<Frame>, Flow) {
    for argument in &arguments[1..] {
        let known = ["NOSAVE", "SAVE", "NOW", "FORCE", "ABORT"];
        if !known.iter().any(|keyword| is_keyword(argument, keyword)) {
            return (Some(Frame::error(errors::SYNTAX)), Flow::Continue);
        }
        if is_keyword(argument, "ABORT") {
            return (
                Some(Frame::error("ERR No shutdown in progress.")),
                Flow::Continue,
            );
        }
    }
    if arguments[1..]
        .iter()
        .any(|argument| is_keyword(argument, "NOSAVE"))
    {
        shared.set_shutdown_save(false);
    } else if arguments[1..]
        .iter()
        .any(|argument| is_keyword(argument, "SAVE"))
    {
        shared.set_shutdown_save(true);
    }
    tracing::info!("shutdown requested by a client");
    shared.request_shutdown();
    // Like Redis, a successful SHUTDOWN closes the connection without a reply.
    (None, Flow::Close)
}

fn config_get(shared: &Shared, arguments: &[Bytes]) -> Frame {
    let patterns: Vec<&[u8]> = arguments[2..].iter().map(|pattern| &pattern[..]).collect();
    let found = shared.config().matching(&patterns);
    Frame::Map(
        found
            .into_iter()
            .map(|(name, value)| (bulk_text(name), bulk_text(value)))
            .collect(),
    )
}

fn config_set(shared: &Shared, arguments: &[Bytes]) -> Frame {
    if !arguments.len().is_multiple_of(2) {
        return Frame::error_owned(errors::wrong_arity("config|set"));
    }
    let pairs: Vec<(&[u8], &[u8])> = arguments[2..]
        .chunks(2)
        .map(|pair| (&pair[0][..], &pair[1][..]))
        .collect();
    let mut config = shared.config_mut();
    if let Err(error) = config.set_many(&pairs) {
        return Frame::error_owned(error);
    }
    let config = config.clone();
    config.configure_monitors(&shared.monitors);
    crate::resp_client::set_password(config.requirepass());
    apply_keyspace_config(&config, &mut shared.store().keyspace, &shared.local);
    if let Some(node) = &shared.cluster {
        for replica in node.local_shards() {
            let mut state = replication::state_machine::lock(&replica.group.state);
            apply_keyspace_config(&config, &mut state.keyspace, &shared.local);
        }
    }
    Frame::OK
}

fn debug(shared: &Shared, session: &Session, arguments: &[Bytes]) -> Frame {
    let sub = text(&arguments[1]).to_ascii_lowercase();
    match (sub.as_str(), arguments.len()) {
        ("sleep", 3) => {
            let seconds = match keyspace::args::parse_f64(&arguments[2]) {
                Ok(seconds) if seconds >= 0.0 => seconds,
                _ => return Frame::error(errors::NOT_FLOAT),
            };
            // Redis's DEBUG SLEEP stalls the whole server: hold the keyspace.
            let _store = shared.store();
            let duration = Duration::from_secs_f64(seconds.min(3600.0));
            tokio::task::block_in_place(|| std::thread::sleep(duration));
            Frame::OK
        }
        ("set-active-expire", 3) => {
            let enabled = match parse_i64(&arguments[2]) {
                Ok(value) => value != 0,
                Err(error) => return error,
            };
            shared
                .active_expire_enabled
                .store(enabled, Ordering::Relaxed);
            Frame::OK
        }
        ("object", 3) => {
            let mut store = shared.store();
            let mut context = Context::new(clock::unix_ms(), 0);
            context.db = session.db;
            let keyspace = &mut store.keyspace;
            let Some(entry) = keyspace
                .db(session.db)
                .peek(&arguments[2], context.now_ms)
                .cloned()
            else {
                return Frame::error(errors::NO_SUCH_KEY);
            };
            Frame::Simple(Bytes::from(keyspace::digest::debug_object(
                keyspace, &entry, &context,
            )))
        }
        ("digest", 2) => {
            let store = shared.store();
            bulk_text(keyspace::digest::digest(&store.keyspace, clock::unix_ms()))
        }
        ("digest-value", _) => {
            let store = shared.store();
            let now_ms = clock::unix_ms();
            let db = store.keyspace.db_ref(session.db);
            Frame::Array(
                arguments[2..]
                    .iter()
                    .map(|key| bulk_text(keyspace::digest::value_digest(db.peek(key, now_ms))))
                    .collect(),
            )
        }
        ("jmap", _) | ("quicklist-packed-threshold", _) | ("stringmatch-len", _) => Frame::OK,
        ("help", _) => help(&[
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "OBJECT <key>",
            "    Show low level info about the key and associated value.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not accessed.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => Frame::error_owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            text(&arguments[1])
        )),
    }
}

fn valid_client_name(name: &[u8]) -> Result<(), Frame> {
    if name.iter().any(|&byte| !(b'!'..=b'~').contains(&byte)) {
        return Err(Frame::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn client(
    shared: &Shared,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
) -> (Option<Frame>, Flow) {
    let reply = match spec.name {
        "client|id" => Frame::Integer(session.client.id as i64),
        "client|getname" => {
            let name = session.client.details().name.clone();
            if name.is_empty() {
                Frame::Null
            } else {
                bulk_text(name)
            }
        }
        "client|setname" => match valid_client_name(&arguments[2]) {
            Ok(()) => {
                session.client.details().name = text(&arguments[2]);
                Frame::OK
            }
            Err(error) => error,
        },
        "client|info" => verbatim(session.client.describe(clock::unix_ms()) + "\n"),
        "client|list" => client_list(shared, arguments),
        "client|kill" => client_kill(shared, session, arguments),
        "client|reply" => {
            let mode = text(&arguments[2]).to_ascii_lowercase();
            match mode.as_str() {
                "on" => {
                    session.reply_mode = ReplyMode::On;
                    Frame::OK
                }
                "off" => {
                    session.reply_mode = ReplyMode::Off;
                    return (None, Flow::Continue);
                }
                "skip" => {
                    session.reply_mode = ReplyMode::Skip;
                    return (Some(Frame::OK), Flow::Continue);
                }
                _ => Frame::error(errors::SYNTAX),
            }
        }
        "client|no-evict" => {
            let mode = text(&arguments[2]).to_ascii_lowercase();
            match mode.as_str() {
                "on" | "off" => {
                    session.client.details().no_evict = mode == "on";
                    Frame::OK
                }
                _ => Frame::error(errors::SYNTAX),
            }
        }
        "client|no-touch" => {
            let mode = text(&arguments[2]).to_ascii_lowercase();
            match mode.as_str() {
                "on" | "off" => {
                    session.no_touch = mode == "on";
                    session.client.details().no_touch = session.no_touch;
                    Frame::OK
                }
                _ => Frame::error(errors::SYNTAX),
            }
        }
        "client|setinfo" => {
            let attribute = text(&arguments[2]).to_ascii_lowercase();
            let value = &arguments[3];
            if value.iter().any(|&byte| !(b'!'..=b'~').contains(&byte)) {
                Frame::error_owned(format!(
                    "ERR {attribute} cannot contain spaces, newlines or special characters."
                ))
            } else {
                match attribute.as_str() {
                    "lib-name" => {
                        session.client.details().library_name = text(value);
                        Frame::OK
                    }
                    "lib-ver" => {
                        session.client.details().library_version = text(value);
                        Frame::OK
                    }
                    _ => Frame::error_owned(format!(
                        "ERR Unrecognized option '{}'",
                        text(&arguments[2])
                    )),
                }
            }
        }
        "client|unblock" => client_unblock(shared, arguments),
        "client|tracking" => crate::tracking::client_tracking(shared, session, arguments),
        "client|caching" => crate::tracking::client_caching(session, arguments),
        "client|getredir" => crate::tracking::client_getredir(session),
        "client|trackinginfo" => crate::tracking::client_trackinginfo(shared, session),
        "client|pause" => client_pause(shared, arguments),
        "client|unpause" => {
            shared.local.pause.unpause();
            Frame::OK
        }
        "client|help" => help(&[
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID id ...]",
            "    Return information about client connections.",
            "GETNAME",
            "    Return the name of the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => Frame::error(errors::SYNTAX),
    };
    (Some(reply), Flow::Continue)
}

fn verbatim(text: String) -> Frame {
    Frame::Verbatim(Bytes::from(format!("txt:{text}")))
}

fn client_list(shared: &Shared, arguments: &[Bytes]) -> Frame {
    let now_ms = clock::unix_ms();
    let mut wanted_ids: Option<Vec<u64>> = None;
    let mut index = 2;
    while index < arguments.len() {
        if is_keyword(&arguments[index], "TYPE") && index + 1 < arguments.len() {
            let kind = text(&arguments[index + 1]).to_ascii_lowercase();
            match kind.as_str() {
                "normal" => {}
                "master" | "replica" | "slave" | "pubsub" => wanted_ids = Some(Vec::new()),
                _ => return Frame::error_owned(format!("ERR Unknown client type '{kind}'")),
            }
            index += 2;
        } else if is_keyword(&arguments[index], "ID") && index + 1 < arguments.len() {
            let mut ids = wanted_ids.take().unwrap_or_default();
            for argument in &arguments[index + 1..] {
                match parse_i64(argument) {
                    Ok(id) if id > 0 => ids.push(id as u64),
                    _ => return Frame::error("ERR Invalid client ID"),
                }
            }
            wanted_ids = Some(ids);
            index = arguments.len();
        } else {
            return Frame::error(errors::SYNTAX);
        }
    }
    let mut listing = String::new();
    for client in shared.clients.all() {
        if wanted_ids
            .as_ref()
            .is_some_and(|ids| !ids.contains(&client.id))
        {
            continue;
        }
        listing.push_str(&client.describe(now_ms));
        listing.push('\n');
    }
    verbatim(listing)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends another client's blocking wait with
/// its timeout reply or with an UNBLOCKED error.
fn client_unblock(shared: &Shared, arguments: &[Bytes]) -> Frame {
    if arguments.len() > 4 {
        return Frame::error_owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            text(&arguments[1])
        ));
    }
    let error = match arguments.get(3) {
        None => None,
        Some(reason) if is_keyword(reason, "timeout") => None,
        Some(reason) if is_keyword(reason, "error") => Some(Frame::error(
            "UNBLOCKED client unblocked via CLIENT UNBLOCK",
        )),
        Some(_) => return Frame::error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let id = match parse_i64(&arguments[2]) {
        Ok(id) => id,
        Err(error) => return error,
    };
    let unblocked = u64::try_from(id)
        .map(|id| shared.blocking.unblock_client(id, error))
        .unwrap_or(false);
    Frame::Integer(unblocked as i64)
}

/// CLIENT PAUSE timeout [WRITE|ALL] (ALL by default): the mode is checked
/// before the timeout, as Redis does.
fn client_pause(shared: &Shared, arguments: &[Bytes]) -> Frame {
    if arguments.len() > 4 {
        return Frame::error_owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            text(&arguments[1])
        ));
    }
    let mode = match arguments.get(3) {
        None => crate::pause::PauseMode::All,
        Some(mode) if is_keyword(mode, "WRITE") => crate::pause::PauseMode::Write,
        Some(mode) if is_keyword(mode, "ALL") => crate::pause::PauseMode::All,
        Some(_) => return Frame::error("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let timeout_ms = match parse_i64(&arguments[2]) {
        Ok(timeout) if timeout < 0 => return Frame::error("ERR timeout is negative"),
        Ok(timeout) => timeout as u64,
        Err(_) => return Frame::error("ERR timeout is not an integer or out of range"),
    };
    shared.local.pause.pause(mode, timeout_ms);
    Frame::OK
}

/// One CLIENT KILL condition.
type ClientFilter = Box<dyn Fn(&ClientInfo) -> bool>;

fn client_kill(shared: &Shared, session: &Session, arguments: &[Bytes]) -> Frame {
    // Old form: CLIENT KILL addr:port.
    if arguments.len() == 3 {
        let address = text(&arguments[2]);
        return match shared
            .clients
            .all()
            .into_iter()
            .find(|client| client.peer.to_string() == address)
        {
            Some(client) => {
                client.kill();
                Frame::OK
            }
            None => Frame::error("ERR No such client"),
        };
    }
    let mut filters: Vec<ClientFilter> = Vec::new();
    let mut skip_me = true;
    let now_ms = clock::unix_ms();
    let pairs = &arguments[2..];
    if !pairs.len().is_multiple_of(2) {
        return Frame::error(errors::SYNTAX);
    }
    for pair in pairs.chunks(2) {
        let (option, value) = (text(&pair[0]).to_ascii_lowercase(), text(&pair[1]));
        match option.as_str() {
            "id" => match value.parse::<u64>() {
                Ok(id) if id > 0 => filters.push(Box::new(move |client| client.id == id)),
                _ => return Frame::error("ERR client-id should be greater than 0"),
            },
            "addr" => filters.push(Box::new(move |client| client.peer.to_string() == value)),
            "laddr" => filters.push(Box::new(move |client| {
                client.local.is_some_and(|local| local.to_string() == value)
            })),
            "type" => match value.to_ascii_lowercase().as_str() {
                "normal" => {}
                "master" | "replica" | "slave" | "pubsub" => filters.push(Box::new(|_| false)),
                _ => return Frame::error_owned(format!("ERR Unknown client type '{value}'")),
            },
            "user" => {
                let is_default = value == "default";
                filters.push(Box::new(move |_| is_default));
            }
            "skipme" => match value.to_ascii_lowercase().as_str() {
                "yes" => skip_me = true,
                "no" => skip_me = false,
                _ => return Frame::error(errors::SYNTAX),
            },
            "maxage" => match value.parse::<u64>() {
                Ok(seconds) => filters.push(Box::new(move |client| {
                    now_ms.saturating_sub(client.created_ms) / 1000 >= seconds
                })),
                Err(_) => return Frame::error(errors::NOT_INTEGER),
            },
            _ => return Frame::error(errors::SYNTAX),
        }
    }
    let mut killed = 0;
    for client in shared.clients.all() {
        if skip_me && client.id == session.client.id {
            continue;
        }
        if filters.iter().all(|filter| filter(&client)) {
            client.kill();
            killed += 1;
        }
    }
    Frame::Integer(killed)
}
