//! Long-running scripts: BUSY replies, SCRIPT KILL and FUNCTION KILL.
//!
//! A script runs while holding its keyspace's lock, on a runtime worker. Other
//! connections must not block a worker on that lock (two blocked workers would
//! stall the node, watchdog included), so each batch first waits,
//! asynchronously, while a script runs. Once a run has lasted past
//! `busy-reply-threshold`, the watchdog marks it busy and waiting batches are
//! answered BUSY instead, except for the commands Redis allows then.
//!
//! The board ([`crate::local::NodeLocal::scripts`]) is one per node: a long
//! script in one shard makes the node's other shards wait too.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use keyspace::command::{flags, Handler};
use keyspace::commands;
use resp::{encode, Frame, RequestParser};

use crate::connection::Flow;
use crate::server::Shared;
use crate::session::{self, Session};

/// How often waiting connections and the watchdog look at the board.
const POLL: Duration = Duration::from_millis(1);
const WATCHDOG_PERIOD: Duration = Duration::from_millis(20);

/// Waits while a script runs; true when the run is busy (past the threshold).
pub async fn wait_for_scripts(activity: &keyspace::ScriptActivity) -> bool {
    loop {
        if activity.current_run().is_none() {
            return false;
        }
        if activity.is_busy() {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Marks a run busy once it has lasted `busy-reply-threshold` milliseconds.
pub async fn watchdog(shared: Arc<Shared>) {
    let local = &shared.local;
    let activity = &local.scripts;
    loop {
        tokio::time::sleep(WATCHDOG_PERIOD).await;
        let Some(run) = activity.current_run() else {
            *local.watched_run() = None;
            continue;
        };
        let seen = *local.watched_run();
        let started = match seen {
            Some((previous, started)) if previous == run => started,
            _ => {
                *local.watched_run() = Some((run, tokio::time::Instant::now()));
                continue;
            }
        };
        let threshold_ms = shared.config().busy_reply_threshold_ms();
        if threshold_ms > 0 && started.elapsed() >= Duration::from_millis(threshold_ms) {
            activity.set_busy(true);
        }
    }
}

/// Answers the client's pending requests while a script is busy: connection
/// commands Redis allows then run, everything else gets BUSY.
pub fn answer_busy(
    shared: &Shared,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut BytesMut,
    output: &mut BytesMut,
) -> Flow {
    loop {
        let arguments = match parser.next_request(input) {
            Ok(Some(arguments)) => arguments,
            Ok(None) => return Flow::Continue,
            Err(error) => {
                encode(
                    &Frame::error_owned(format!("ERR {error}")),
                    session.protocol,
                    output,
                );
                return Flow::Close;
            }
        };
        let reply = match commands::resolve(&arguments) {
            Err(error) => error,
            Ok(spec) if spec.name == "function|stats" && shared.local.scripts.is_function() => {
                function_stats(&shared.local)
            }
            Ok(spec) if spec.has(flags::ALLOW_BUSY) && matches!(spec.handler, Handler::Node) => {
                let (reply, flow) = session::execute(shared, session, spec, &arguments);
                if let Some(reply) = reply {
                    session.reply(output, &reply);
                }
                if flow == Flow::Close {
                    return Flow::Close;
                }
                continue;
            }
            Ok(_) => Frame::error(busy_error(&shared.local.scripts)),
        };
        session.reply(output, &reply);
    }
}

/// FUNCTION STATS while a function is busy: the running function (name, its
/// FCALL, how long it has run) and the engine's counts, as Redis answers.
/// While a script (EVAL) is busy it gets BUSY, as in Redis.
fn function_stats(local: &crate::local::NodeLocal) -> Frame {
    let Some(function) = local.scripts.running_function() else {
        return Frame::error(busy_error(&local.scripts));
    };
    let duration_ms = local
        .watched_run()
        .map_or(0, |(_, started)| started.elapsed().as_millis());
    let text = |value: &'static str| Frame::bulk(value);
    Frame::Map(vec![
        (
            text("running_script"),
            Frame::Map(vec![
                (text("name"), Frame::Bulk(function.name)),
                (
                    text("command"),
                    Frame::Array(function.command.into_iter().map(Frame::Bulk).collect()),
                ),
                (
                    text("duration_ms"),
                    Frame::Integer(i64::try_from(duration_ms).unwrap_or(i64::MAX)),
                ),
            ]),
        ),
        (
            text("engines"),
            Frame::Map(vec![(
                text("LUA"),
                Frame::Map(vec![
                    (
                        text("libraries_count"),
                        Frame::Integer(function.libraries as i64),
                    ),
                    (
                        text("functions_count"),
                        Frame::Integer(function.functions as i64),
                    ),
                ]),
            )]),
        ),
    ])
}

/// The BUSY reply: it names the command that stops the run (SCRIPT KILL for
/// a script, FUNCTION KILL for a function).
fn busy_error(activity: &keyspace::ScriptActivity) -> &'static str {
    if activity.is_function() {
        scripting::BUSY_FUNCTION
    } else {
        scripting::BUSY
    }
}

/// SCRIPT KILL (`function_kill` false) and FUNCTION KILL: each stops only
/// its kind of run, as in Redis; the other kind answers BUSY.
pub fn kill(activity: &keyspace::ScriptActivity, function_kill: bool) -> Frame {
    if activity.current_run().is_none() {
        return Frame::error(scripting::NOTBUSY);
    }
    if activity.has_written() {
        return Frame::error(scripting::UNKILLABLE);
    }
    if !activity.is_killable() {
        return Frame::error(
            "UNKILLABLE The busy script runs through the replicated log: it is applied on every replica alike and stops only at its instruction budget (lua-instruction-limit).",
        );
    }
    if activity.is_function() != function_kill {
        return Frame::error(busy_error(activity));
    }
    activity.request_kill();
    Frame::OK
}
