//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD/EXISTS/FLUSH/HELP.
//!
//! Script bodies live in the keyspace's replicated store, keyed by SHA1; the
//! compiled functions here are derived from them. A run outside the log (a
//! replica serving EVAL_RO) compiles but does not add to the store, so the
//! store changes only through the log.

use std::collections::BTreeMap;

use bytes::Bytes;
use keyspace::scripts::MAX_CACHED_SCRIPTS;
use keyspace::{Context, Keyspace};
use mlua::chunk::ChunkMode;
use mlua::Function;
use resp::Frame;

use crate::run::{self, plain_message, RunOptions};
use crate::sandbox::Sandbox;
use crate::sha1::sha1_hex;
use crate::{check_flags, split_keys, ScriptFlags};

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Most compiled scripts kept; past it the cache starts over (compiling again
/// on demand is always possible, the bodies stay in the store).
const MAX_COMPILED: usize = 10_000;

/// Compiled scripts by SHA1, with their shebang flags.
#[derive(Default)]
pub struct Compiled {
    functions: BTreeMap<Bytes, (Function, ScriptFlags)>,
    /// Lua instructions the last run of each script took (counted at the
    /// hook's granularity).
    last_instructions: BTreeMap<Bytes, u64>,
}

/// A script whose last run took fewer instructions than this runs on the
/// runtime's worker without handing off its other tasks (about a
/// millisecond of Lua).
pub const SHORT_RUN_INSTRUCTIONS: u64 = 200_000;

impl Compiled {
    /// Whether the script `sha` ran before and its last run was short.
    pub fn known_short(&self, sha: &[u8]) -> bool {
        self.last_instructions
            .get(sha)
            .is_some_and(|used| *used < SHORT_RUN_INSTRUCTIONS)
    }
}

/// Splits off a `#!lua flags=...` line: the flags and where the code starts
/// (at the line's newline, so line numbers stay those of the body).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), Frame> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), 0));
    }
    let Some(end) = body.iter().position(|&byte| byte == b'\n') else {
        return Err(Frame::error("ERR Invalid script shebang"));
    };
    let line = &body[..end];
    let mut parts = line
        .split(|&byte| byte == b' ' || byte == b'\t' || byte == b'\r')
        .filter(|part| !part.is_empty());
    let Some(engine) = parts.next() else {
        return Err(Frame::error("ERR Invalid engine in script shebang"));
    };
    if engine != b"#!lua" {
        return Err(Frame::error_owned(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        )));
    }
    let mut flags = ScriptFlags {
        declared: true,
        ..ScriptFlags::default()
    };
    for part in parts {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(Frame::error_owned(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            )));
        };
        for flag in list
            .split(|&byte| byte == b',')
            .filter(|flag| !flag.is_empty())
        {
            if !flags.set(flag) {
                return Err(Frame::error_owned(format!(
                    "ERR Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(flag)
                )));
            }
        }
    }
    Ok((flags, end))
}

impl Compiled {
    /// The compiled script for `body` (named `sha`), compiling it if needed.
    fn get_or_compile(
        &mut self,
        sandbox: &Sandbox,
        sha: &Bytes,
        body: &[u8],
    ) -> Result<(Function, ScriptFlags), Frame> {
        if let Some(found) = self.functions.get(sha) {
            return Ok(found.clone());
        }
        let (flags, start) = parse_shebang(body)?;
        let function = sandbox
            .lua
            .load(&body[start..])
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .set_environment(sandbox.env.clone())
            .into_function()
            .map_err(|error| {
                Frame::Error(crate::convert::error_bytes(
                    format!(
                        "ERR Error compiling script (new function): {}",
                        plain_message(&error)
                    )
                    .as_bytes(),
                ))
            })?;
        if self.functions.len() >= MAX_COMPILED {
            self.functions.clear();
            self.last_instructions.clear();
        }
        self.functions
            .insert(sha.clone(), (function.clone(), flags));
        Ok((function, flags))
    }
}

/// Adds a body to the replicated store when this run may change replicated
/// state (see the module doc).
fn remember(
    keyspace: &mut Keyspace,
    context: &Context,
    sha: &Bytes,
    body: &Bytes,
) -> Result<(), Frame> {
    if !context.lazy_expire || keyspace.scripts.scripts.contains_key(sha) {
        return Ok(());
    }
    if keyspace.scripts.scripts.len() >= MAX_CACHED_SCRIPTS {
        return Err(Frame::error(
            "ERR the script cache is full (SCRIPT FLUSH empties it)",
        ));
    }
    // A copy: the body may be a view of a whole request buffer.
    keyspace
        .scripts
        .scripts
        .insert(sha.clone(), Bytes::copy_from_slice(body));
    Ok(())
}

pub fn eval(
    compiled: &mut Compiled,
    sandbox: &Sandbox,
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
) -> Frame {
    let name = arguments[0].to_ascii_lowercase();
    let by_sha = name.starts_with(b"evalsha");
    let read_only = name.ends_with(b"_ro");
    let (keys, argv) = match split_keys(arguments) {
        Ok(split) => split,
        Err(error) => return error,
    };
    let (sha, body) = if by_sha {
        let sha = Bytes::from(arguments[1].to_ascii_lowercase());
        if sha.len() != 40 {
            return Frame::error(NOSCRIPT);
        }
        match keyspace.scripts.scripts.get(&sha) {
            Some(body) => (sha, body.clone()),
            None => return Frame::error(NOSCRIPT),
        }
    } else {
        (Bytes::from(sha1_hex(&arguments[1])), arguments[1].clone())
    };
    let (function, flags) = match compiled.get_or_compile(sandbox, &sha, &body) {
        Ok(found) => found,
        Err(error) => return error,
    };
    if let Err(error) = check_flags(&flags, context) {
        return error;
    }
    if !by_sha {
        if let Err(error) = remember(keyspace, context, &sha, &body) {
            return error;
        }
    }
    let name = String::from_utf8_lossy(&sha).into_owned();
    let reply = run::run(
        sandbox,
        keyspace,
        context,
        &function,
        keys,
        argv,
        &RunOptions {
            name: &name,
            read_only: read_only || flags.no_writes,
            as_function: false,
            oom_on_first_write: context.out_of_memory && !flags.declared,
            described: None,
        },
    );
    let used = sandbox
        .control
        .instructions
        .load(std::sync::atomic::Ordering::SeqCst);
    compiled.last_instructions.insert(sha, used);
    reply
}

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Print this help.",
];

/// Redis's HELP reply: the lines as status replies.
pub fn help(lines: &[&str]) -> Frame {
    Frame::Array(
        lines
            .iter()
            .map(|line| Frame::Simple(Bytes::copy_from_slice(line.as_bytes())))
            .collect(),
    )
}

pub fn script(
    compiled: &mut Compiled,
    sandbox: &Sandbox,
    keyspace: &mut Keyspace,
    context: &mut Context,
    sub: &[u8],
    arguments: &[Bytes],
) -> Frame {
    match sub {
        b"load" => {
            let body = &arguments[2];
            let sha = Bytes::from(sha1_hex(body));
            if let Err(error) = compiled.get_or_compile(sandbox, &sha, body) {
                return error;
            }
            if let Err(error) = remember(keyspace, context, &sha, body) {
                return error;
            }
            Frame::Bulk(sha)
        }
        b"exists" => Frame::Array(
            arguments[2..]
                .iter()
                .map(|sha| {
                    let sha = sha.to_ascii_lowercase();
                    Frame::Integer(i64::from(keyspace.scripts.scripts.contains_key(&sha[..])))
                })
                .collect(),
        ),
        b"flush" => {
            let mode_ok = match arguments.len() {
                2 => true,
                3 => {
                    arguments[2].eq_ignore_ascii_case(b"sync")
                        || arguments[2].eq_ignore_ascii_case(b"async")
                }
                _ => false,
            };
            if !mode_ok {
                return Frame::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            if context.lazy_expire {
                keyspace.scripts.scripts.clear();
            }
            compiled.functions.clear();
            compiled.last_instructions.clear();
            Frame::OK
        }
        b"help" => help(SCRIPT_HELP),
        _ => Frame::error_owned(format!(
            "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}
