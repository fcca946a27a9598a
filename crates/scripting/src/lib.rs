//! Lua 5.1 scripting and Functions bound to the keyspace.
//!
//! The keyspace stores script bodies and library code as replicated state
//! ([`keyspace::ScriptStore`]) and hands EVAL, SCRIPT, FCALL and FUNCTION to
//! an [`Engine`] it builds through [`setup`]. The engine owns one sandboxed
//! Lua state and the functions compiled from the store, which are derived data.
//!
//! **Determinism.** A run sees only the entry: KEYS, ARGV, the keyspace, the
//! entry's time (TIME) and a `math.random` seeded from the entry's seed. It is
//! stopped after `lua-instruction-limit` VM instructions, counted the same way
//! on every replica, so a runaway script ends with the same error everywhere.
//! SCRIPT KILL stops only runs whose effects are not replicated (a standalone
//! server's run that has not written, or a read-only run served outside the
//! log); runs applied from the log answer UNKILLABLE.

mod convert;
mod eval;
mod functions;
pub mod libs;
mod redis_lib;
mod run;
mod sandbox;
pub mod sha1;

use std::sync::Arc;

use bytes::Bytes;
use keyspace::{Context, Keyspace, ScriptActivity, ScriptEngine, ScriptingSetup};
use resp::Frame;

pub use run::{BUDGET_EXCEEDED, KILLED};

/// Redis's reply when SCRIPT KILL finds nothing to kill.
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
/// Redis's reply when the running script already wrote.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// The reply to other commands while a script has run too long.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same while a function (FCALL) has run too long.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// How a keyspace builds its engine; `activity` is the board the node
/// watches for BUSY and SCRIPT KILL.
pub fn setup(activity: Arc<ScriptActivity>) -> ScriptingSetup {
    ScriptingSetup {
        factory: new_engine,
        activity,
    }
}

fn new_engine(activity: Arc<ScriptActivity>) -> Box<dyn ScriptEngine> {
    Box::new(Engine::new(activity))
}

/// One keyspace's Lua state and compiled code.
pub struct Engine {
    sandbox: Result<sandbox::Sandbox, String>,
    scripts: eval::Compiled,
    functions: functions::Registry,
}

impl Engine {
    pub fn new(activity: Arc<ScriptActivity>) -> Engine {
        Engine {
            sandbox: sandbox::build(activity).map_err(|error| run::plain_message(&error)),
            scripts: eval::Compiled::default(),
            functions: functions::Registry::default(),
        }
    }

    /// The flags EVAL, EVALSHA or FCALL `arguments` runs with (a script
    /// without a shebang has undeclared flags); `None` when the script or
    /// function is not found, and for the _RO forms.
    fn declared_flags(&mut self, keyspace: &Keyspace, arguments: &[Bytes]) -> Option<ScriptFlags> {
        let name = arguments[0].to_ascii_lowercase();
        match &name[..] {
            b"eval" => eval::parse_shebang(&arguments[1])
                .ok()
                .map(|(flags, _)| flags),
            b"evalsha" => keyspace
                .scripts
                .scripts
                .get(&arguments[1].to_ascii_lowercase()[..])
                .and_then(|body| eval::parse_shebang(body).ok())
                .map(|(flags, _)| flags),
            b"fcall" => match &self.sandbox {
                Ok(sandbox) => self.functions.flags_of(sandbox, keyspace, &arguments[1]),
                Err(_) => None,
            },
            _ => None,
        }
    }
}

impl ScriptEngine for Engine {
    fn may_run_long(&mut self, _keyspace: &Keyspace, arguments: &[Bytes]) -> bool {
        let name = arguments[0].to_ascii_lowercase();
        match &name[..] {
            b"eval" | b"eval_ro" => !self
                .scripts
                .known_short(sha1::sha1_hex(&arguments[1]).as_bytes()),
            b"evalsha" | b"evalsha_ro" => {
                !self.scripts.known_short(&arguments[1].to_ascii_lowercase())
            }
            b"fcall" | b"fcall_ro" => !self.functions.known_short(&arguments[1]),
            // SCRIPT EXISTS, FUNCTION LIST ... do not run Lua; SCRIPT LOAD
            // and FUNCTION LOAD compile (and run a library's body).
            b"script" | b"function" => arguments.get(1).is_some_and(|sub| {
                sub.eq_ignore_ascii_case(b"load") || sub.eq_ignore_ascii_case(b"restore")
            }),
            _ => true,
        }
    }

    fn denies_oom(&mut self, keyspace: &Keyspace, arguments: &[Bytes]) -> bool {
        self.declared_flags(keyspace, arguments)
            .is_some_and(|flags| flags.declared && !flags.no_writes && !flags.allow_oom)
    }

    fn may_write(&mut self, keyspace: &Keyspace, arguments: &[Bytes]) -> bool {
        let name = arguments[0].to_ascii_lowercase();
        if name.ends_with(b"_ro") {
            return false;
        }
        self.declared_flags(keyspace, arguments)
            .is_none_or(|flags| !flags.declared || !flags.no_writes)
    }

    fn execute(
        &mut self,
        keyspace: &mut Keyspace,
        context: &mut Context,
        arguments: &[Bytes],
    ) -> Frame {
        let sandbox = match &self.sandbox {
            Ok(sandbox) => sandbox,
            Err(error) => {
                return Frame::error_owned(format!("ERR scripting is unavailable: {error}"))
            }
        };
        let name = arguments[0].to_ascii_lowercase();
        let sub = || {
            arguments
                .get(1)
                .map(|word| word.to_ascii_lowercase())
                .unwrap_or_default()
        };
        match &name[..] {
            b"eval" | b"evalsha" | b"eval_ro" | b"evalsha_ro" => {
                eval::eval(&mut self.scripts, sandbox, keyspace, context, arguments)
            }
            b"script" => eval::script(
                &mut self.scripts,
                sandbox,
                keyspace,
                context,
                &sub(),
                arguments,
            ),
            b"fcall" | b"fcall_ro" => {
                functions::fcall(&mut self.functions, sandbox, keyspace, context, arguments)
            }
            b"function" => functions::function(
                &mut self.functions,
                sandbox,
                keyspace,
                context,
                &sub(),
                arguments,
            ),
            _ => Frame::error("ERR unknown scripting command"),
        }
    }
}

/// The keys and arguments of `EVAL body numkeys key... arg...` (and FCALL),
/// with Redis's errors for a bad key count.
fn split_keys(arguments: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), Frame> {
    let count = keyspace::args::parse_i64(&arguments[2])
        .map_err(|_| Frame::error("ERR value is not an integer or out of range"))?;
    if count < 0 {
        return Err(Frame::error("ERR Number of keys can't be negative"));
    }
    let rest = &arguments[3..];
    if count as u64 > rest.len() as u64 {
        return Err(Frame::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(count as usize))
}

/// Flags a script or function declares (`#!lua flags=...` or `flags = {...}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// A script with a shebang: flags apply; without one, Redis's legacy
    /// behaviour (may write).
    pub declared: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

impl ScriptFlags {
    /// Sets the flag called `name`; false for an unknown name.
    fn set(&mut self, name: &[u8]) -> bool {
        match name {
            b"no-writes" => self.no_writes = true,
            b"allow-oom" => self.allow_oom = true,
            b"allow-stale" => self.allow_stale = true,
            b"no-cluster" => self.no_cluster = true,
            b"allow-cross-slot-keys" => self.allow_cross_slot_keys = true,
            _ => return false,
        }
        true
    }

    /// The flag names, in Redis's order, for FUNCTION LIST.
    fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        for (set, name) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ] {
            if set {
                names.push(name);
            }
        }
        names
    }
}

/// Refuses a run its flags forbid here (cluster mode for `no-cluster`).
fn check_flags(flags: &ScriptFlags, context: &Context) -> Result<(), Frame> {
    // As Redis: a script with declared flags that may write and does not
    // allow OOM is refused up front while memory is over the limit.
    if context.out_of_memory && flags.declared && !flags.no_writes && !flags.allow_oom {
        return Err(Frame::error(keyspace::evict::OOM));
    }
    if flags.no_cluster && context.cluster_mode {
        return Err(Frame::error(
            "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
