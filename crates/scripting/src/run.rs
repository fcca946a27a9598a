//! One run of a script or function: KEYS and ARGV, the `redis.call` bridge
//! into the keyspace, the instruction budget, and Redis's error replies.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use keyspace::command::{flags, Handler};
use keyspace::{Context, Keyspace, Rng};
use mlua::{Function, Lua, MultiValue, Value};
use resp::{Frame, Protocol};

use crate::convert::{error_bytes, frame_to_lua, lua_to_frame};
use crate::redis_lib::{error_text, number_argument};
use crate::sandbox::{self, RunControl, Sandbox, STOP_BUDGET, STOP_KILLED, STOP_MEMORY, STOP_NONE};

pub const BUDGET_EXCEEDED: &str =
    "ERR Script exceeded its instruction budget (lua-instruction-limit) and was stopped";
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
pub const MEMORY_EXCEEDED: &str =
    "ERR Script used more than the Lua memory limit (1 GB) and was stopped";

/// What one run is allowed to do.
pub struct RunOptions<'a> {
    /// Named in error replies: the script's SHA1 or the function's name.
    pub name: &'a str,
    /// EVAL_RO, FCALL_RO, or a `no-writes` script: writes are refused.
    pub read_only: bool,
    /// Functions get KEYS and ARGV as arguments, scripts as globals.
    pub as_function: bool,
    /// A script without a shebang, run while memory is over the limit: its
    /// first write that may grow memory fails with OOM (later ones cannot,
    /// since a script is not stopped half way).
    pub oom_on_first_write: bool,
    /// A function's run, as FUNCTION STATS shows it while it lasts.
    pub described: Option<keyspace::RunningFunction>,
}

/// Runs `function` against the keyspace. `keys` and `argv` are the command's.
pub fn run(
    sandbox: &Sandbox,
    keyspace: &mut Keyspace,
    context: &mut Context,
    function: &Function,
    keys: &[Bytes],
    argv: &[Bytes],
    options: &RunOptions<'_>,
) -> Frame {
    let lua = &sandbox.lua;
    let control = &sandbox.control;
    // Effects of a run applied from the log happen on every replica: such a
    // run is never killed. Other runs may be, until they write.
    let killable = !keyspace.config.replicated || !context.lazy_expire;
    control.activity.start(killable, options.as_function);
    if let Some(function) = &options.described {
        control.activity.describe(function.clone());
    }
    control.resp.store(2, Ordering::SeqCst);
    *control.random.lock().unwrap_or_else(|p| p.into_inner()) = Rng::new(context.rng.next_u64());
    let client_protocol = context.protocol;
    let client_db = context.db;
    let was_in_script = std::mem::replace(&mut context.in_script, true);
    let slot = keys.first().map(|key| cluster::key_slot(key));
    let result = (|| -> mlua::Result<Frame> {
        sandbox::arm_hook(lua, control, keyspace.config.script_instruction_limit)?;
        let mut state = CallState {
            keyspace,
            context,
            read_only: options.read_only,
            slot,
            killable,
            oom_on_first_write: options.oom_on_first_write,
        };
        let _current = CurrentRun::enter(lua, &mut state);
        let (ok, value) = call_runner(sandbox, function, keys, argv, options.as_function)?;
        let resp3 = control.resp.load(Ordering::SeqCst) == 3;
        Ok(if ok {
            lua_to_frame(&value, resp3)
        } else {
            error_reply(&value, options.name)
        })
    })();
    sandbox::disarm_hook(control);
    control.activity.finish();
    context.protocol = client_protocol;
    context.db = client_db;
    context.in_script = was_in_script;
    context.block = None;
    let stop = control.stop.swap(STOP_NONE, Ordering::SeqCst);
    match result {
        Ok(frame) => frame,
        Err(_) if stop == STOP_BUDGET => Frame::error(BUDGET_EXCEEDED),
        Err(_) if stop == STOP_KILLED => Frame::error(KILLED),
        Err(_) if stop == STOP_MEMORY => Frame::error(MEMORY_EXCEEDED),
        Err(error) => Frame::Error(error_bytes(
            format!("ERR Error running script: {}", plain_message(&error)).as_bytes(),
        )),
    }
}

/// Calls the runner on `function` with KEYS and ARGV: for a script as
/// globals (removed again afterwards), for a function as its arguments. The
/// tables are built through Lua's C API, with no Rust-side reference per
/// string; the runner's `xpcall` answers (ok, value or error table).
fn call_runner(
    sandbox: &Sandbox,
    function: &Function,
    keys: &[Bytes],
    argv: &[Bytes],
    as_function: bool,
) -> mlua::Result<(bool, Value)> {
    use mlua::ffi;
    let runner = if as_function {
        &sandbox.function_runner
    } else {
        &sandbox.runner
    };
    let arguments = (sandbox.globals.clone(), runner.clone(), function.clone());
    // SAFETY: the closure runs in protected mode (a Lua error, such as
    // running out of memory, unwinds to mlua, which reports it) with the
    // three arguments at stack indexes 1 to 3, and leaves exactly the
    // runner's two results on the stack.
    unsafe {
        sandbox.lua.exec_raw(arguments, |state| {
            ffi::luaL_checkstack(state, 8, c"script arguments".as_ptr());
            push_sequence(state, keys);
            push_sequence(state, argv);
            if as_function {
                // globals, runner, function, KEYS, ARGV
                ffi::lua_call(state, 3, 2);
            } else {
                set_raw(state, c"ARGV");
                set_raw(state, c"KEYS");
                ffi::lua_call(state, 1, 2);
                for name in [c"KEYS", c"ARGV"] {
                    ffi::lua_pushnil(state);
                    set_raw(state, name);
                }
            }
            // globals, ok, value
            ffi::lua_remove(state, 1);
        })
    }
}

/// Pushes a new table holding `items` as a sequence of strings.
///
/// # Safety
/// `state` is a Lua state with room for two more stack slots, in protected mode.
unsafe fn push_sequence(state: *mut mlua::ffi::lua_State, items: &[Bytes]) {
    use mlua::ffi;
    unsafe {
        ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as i32, 0);
        for (index, item) in items.iter().enumerate() {
            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
            ffi::lua_rawseti(state, -2, (index + 1) as _);
        }
    }
}

/// Pops the value on top of the stack into the table at index 1 under `name`,
/// bypassing metamethods.
///
/// # Safety
/// `state` holds a table at index 1 and a value on top, with room for two
/// more slots, in protected mode.
unsafe fn set_raw(state: *mut mlua::ffi::lua_State, name: &std::ffi::CStr) {
    use mlua::ffi;
    unsafe {
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_insert(state, -2);
        ffi::lua_rawset(state, 1);
    }
}

/// The reply for an error that ended a run: the error table's `err`, then
/// where it happened (`script: <name>, on @user_script:<line>.`).
fn error_reply(value: &Value, name: &str) -> Frame {
    let (message, source, line) = match value {
        Value::Table(table) => (
            table
                .raw_get::<mlua::LuaString>("err")
                .map(|text| text.as_bytes().to_vec())
                .unwrap_or_else(|_| b"ERR unknown error".to_vec()),
            table
                .raw_get::<Option<mlua::LuaString>>("source")
                .ok()
                .flatten(),
            table.raw_get::<Option<i64>>("line").ok().flatten(),
        ),
        Value::String(text) => ([b"ERR ".as_slice(), &text.as_bytes()].concat(), None, None),
        _ => (b"ERR unknown error".to_vec(), None, None),
    };
    let mut text = message;
    if let (Some(source), Some(line)) = (source, line) {
        text.extend_from_slice(format!(" script: {name}, on ").as_bytes());
        text.extend_from_slice(&source.as_bytes());
        text.extend_from_slice(format!(":{line}.").as_bytes());
    }
    Frame::Error(error_bytes(&text))
}

/// An mlua error's message without the wrapping mlua adds.
pub fn plain_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::RuntimeError(message) | mlua::Error::SyntaxError { message, .. } => {
            message.clone()
        }
        mlua::Error::CallbackError { cause, .. } => plain_message(cause),
        mlua::Error::MemoryError(message) => message.clone(),
        other => other.to_string(),
    }
}

/// The handler `xpcall` runs where an error is raised: turns any error into
/// an error table with the script position (`source`, `line`), as Redis does.
pub fn error_handler(lua: &Lua, control: &Arc<RunControl>) -> mlua::Result<Function> {
    let control = control.clone();
    lua.create_function(move |lua, error: Value| {
        let position = user_position(lua);
        let table = lua.create_table()?;
        let message: Vec<u8> = match control.stopped() {
            STOP_BUDGET => BUDGET_EXCEEDED.as_bytes().to_vec(),
            STOP_KILLED => KILLED.as_bytes().to_vec(),
            STOP_MEMORY => MEMORY_EXCEEDED.as_bytes().to_vec(),
            _ => match &error {
                Value::Table(raised) => {
                    if let Ok(Value::String(text)) = raised.raw_get::<Value>("err") {
                        text.as_bytes().to_vec()
                    } else {
                        b"ERR unknown error".to_vec()
                    }
                }
                Value::String(text) => [b"ERR ".as_slice(), &text.as_bytes()].concat(),
                other if script_error(other).is_some() => script_error(other).unwrap_or_default(),
                other => {
                    // An error an mlua callback raised (`math.random`, the
                    // `redis` helpers): give it the position Lua gives errors
                    // from its own C functions. The libraries' errors are not
                    // among them: those are strings that already carry their
                    // position (see `libs`), handled above.
                    let message = match other.as_error() {
                        Some(error) => plain_message(error),
                        None => lua
                            .coerce_string(other.clone())
                            .ok()
                            .flatten()
                            .map(|text| text.to_string_lossy())
                            .unwrap_or_else(|| "unknown error".to_string()),
                    };
                    match &position {
                        Some((source, line)) => {
                            format!("ERR {}:{line}: {message}", source.trim_start_matches('@'))
                                .into_bytes()
                        }
                        None => format!("ERR {message}").into_bytes(),
                    }
                }
            },
        };
        table.raw_set("err", lua.create_string(&message)?)?;
        if let Some((source, line)) = position {
            table.raw_set("source", source)?;
            table.raw_set("line", line)?;
        }
        Ok(table)
    })
}

/// A command's error raised by `redis.call`, carrying Redis's `err` text.
#[derive(Debug)]
pub struct ScriptError(pub Vec<u8>);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for ScriptError {}

/// The `err` text of a [`ScriptError`] raised through Lua, if `value` is one.
fn script_error(value: &Value) -> Option<Vec<u8>> {
    let mut error = value.as_error()?;
    loop {
        match error {
            mlua::Error::CallbackError { cause, .. } => error = cause,
            other => {
                return other
                    .downcast_ref::<ScriptError>()
                    .map(|found| found.0.clone())
            }
        }
    }
}

/// `error_text(e)` for the prelude's `pcall`: the text a script sees for an
/// error raised by a Rust function (nil for Lua's own error values).
pub fn error_text_function(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(|lua, value: Value| {
        if let Some(text) = script_error(&value) {
            return Ok(Some(lua.create_string(&text)?));
        }
        match value.as_error() {
            Some(error) => Ok(Some(lua.create_string(plain_message(error))?)),
            None => Ok(None),
        }
    })
}

/// The innermost stack frame running user code: its chunk name and line.
fn user_position(lua: &Lua) -> Option<(String, i64)> {
    for level in 1..64 {
        let found = lua.inspect_stack(level, |debug| {
            let source = debug.source().source.map(|source| source.into_owned());
            (source, debug.current_line())
        })?;
        if let (Some(source), Some(line)) = found {
            if source.starts_with("@user_") {
                return Some((source, line as i64));
            }
        }
    }
    None
}

/// The run in progress, as `redis.call` and `redis.pcall` find it: a
/// pointer to the [`CallState`] on [`run`]'s stack, set for exactly the
/// length of the script call and removed when the guard drops (on every
/// path out of `run`).
///
/// The two functions are created once, with the sandbox; handing them the
/// state through Lua's app data instead of creating them per run (with
/// mlua's scoped functions) saves several allocations and registry
/// operations on every script call.
pub(crate) struct CurrentRun(*mut CallState<'static>);

// SAFETY: the pointer is only dereferenced by the callbacks of the Lua state
// it was stored in, while `run` (which owns the pointee and holds the Lua
// state) is inside the script call on the same thread.
unsafe impl Send for CurrentRun {}

/// Removes the [`CurrentRun`] when dropped.
struct CurrentRunGuard<'l> {
    lua: &'l Lua,
}

impl CurrentRun {
    fn enter<'l>(lua: &'l Lua, state: &mut CallState<'_>) -> CurrentRunGuard<'l> {
        let pointer: *mut CallState<'_> = state;
        lua.set_app_data(CurrentRun(pointer.cast()));
        CurrentRunGuard { lua }
    }
}

impl Drop for CurrentRunGuard<'_> {
    fn drop(&mut self) {
        self.lua.remove_app_data::<CurrentRun>();
    }
}

/// Creates `redis.call` (raises a command's error) and `redis.pcall`
/// (returns it as `{err=...}`). Rust functions, so `return redis.call(...)`
/// keeps the script's frame (a tail call into Lua would lose its line).
pub fn install_call(lua: &Lua, redis: &mlua::Table, control: &Arc<RunControl>) -> mlua::Result<()> {
    for raise in [true, false] {
        let control = control.clone();
        let function = lua.create_function(move |lua, arguments: CallArguments| {
            let Some(pointer) = lua.app_data_ref::<CurrentRun>().map(|current| current.0) else {
                return Err(mlua::Error::runtime(
                    "redis.call/pcall can only be called inside a script invocation",
                ));
            };
            // SAFETY: see `CurrentRun`: set only while the script that is
            // calling us runs, pointing at a live `CallState` that nothing
            // else uses meanwhile (commands never call back into Lua).
            let state = unsafe { &mut *pointer };
            match call_command(lua, state, &control, arguments)? {
                Ok(value) => Ok(value),
                Err(text) if raise => Err(mlua::Error::external(ScriptError(text))),
                Err(text) => {
                    let table = lua.create_table()?;
                    table.raw_set("err", lua.create_string(&text)?)?;
                    Ok(Value::Table(table))
                }
            }
        })?;
        redis.raw_set(if raise { "call" } else { "pcall" }, function)?;
    }
    Ok(())
}

/// `redis.call`'s arguments as command words, or the error for an argument
/// that is neither a string nor a number. Read straight off the Lua stack,
/// each copied into its own allocation: no Lua reference per argument, and no
/// shared buffer whose reference counts every word would touch.
struct CallArguments(Result<Vec<Bytes>, &'static str>);

const BAD_ARGUMENT: &str = "Lua redis lib command arguments must be strings or integers";

/// A number argument as Redis passes it: an integral value within i64 (not
/// -0) in decimal, as the Lua binding reads numbers; others with 17
/// significant digits.
fn number_word(number: f64) -> Bytes {
    let integral = number.fract() == 0.0
        && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&number)
        && ((number as i64) as f64).to_bits() == number.to_bits();
    if integral {
        Bytes::copy_from_slice(resp::format_i64(number as i64, &mut [0; 20]))
    } else {
        Bytes::from(number_argument(number))
    }
}

impl mlua::FromLuaMulti for CallArguments {
    fn from_lua_multi(values: MultiValue, _lua: &Lua) -> mlua::Result<Self> {
        let mut words = Vec::with_capacity(values.len());
        for value in &values {
            let word = match value {
                Value::String(text) => Bytes::copy_from_slice(&text.as_bytes()),
                Value::Integer(number) => {
                    Bytes::copy_from_slice(resp::format_i64(*number, &mut [0; 20]))
                }
                Value::Number(number) => number_word(*number),
                _ => return Ok(CallArguments(Err(BAD_ARGUMENT))),
            };
            words.push(word);
        }
        Ok(CallArguments(Ok(words)))
    }

    unsafe fn from_stack_args(
        count: std::ffi::c_int,
        _first: usize,
        _to: Option<&str>,
        lua: &mlua::state::RawLua,
    ) -> mlua::Result<Self> {
        use mlua::ffi;
        let state = lua.state();
        let mut words = Vec::with_capacity(count.max(0) as usize);
        for offset in 0..count {
            let index = offset - count;
            // SAFETY: `index` names one of the `count` arguments on top of
            // the stack of the running function; a string's bytes stay valid
            // while it is on the stack, and are copied before anything pops it.
            let word = unsafe {
                match ffi::lua_type(state, index) {
                    ffi::LUA_TSTRING => {
                        let mut length = 0usize;
                        let pointer = ffi::lua_tolstring(state, index, &mut length);
                        let bytes = std::slice::from_raw_parts(pointer as *const u8, length);
                        Bytes::copy_from_slice(bytes)
                    }
                    ffi::LUA_TNUMBER => number_word(ffi::lua_tonumber(state, index)),
                    _ => return Ok(CallArguments(Err(BAD_ARGUMENT))),
                }
            };
            words.push(word);
        }
        Ok(CallArguments(Ok(words)))
    }
}

/// What `redis.call` reaches while a run lasts.
struct CallState<'a> {
    keyspace: &'a mut Keyspace,
    context: &'a mut Context,
    read_only: bool,
    /// The slot of the declared keys (cluster mode confines calls to it).
    slot: Option<u16>,
    killable: bool,
    /// See [`RunOptions::oom_on_first_write`]; cleared by the first write.
    oom_on_first_write: bool,
}

const NOT_ALLOWED: &str = "This Redis command is not allowed from script";

/// `redis.call` / `redis.pcall`: runs one command and answers its reply as
/// a Lua value, or the `err` text of a failure (`call` raises it, `pcall`
/// returns it as `{err=...}`).
fn call_command(
    lua: &Lua,
    state: &mut CallState<'_>,
    control: &RunControl,
    arguments: CallArguments,
) -> mlua::Result<Result<Value, Vec<u8>>> {
    let failure = |text: &str| -> mlua::Result<Result<Value, Vec<u8>>> {
        Ok(Err(error_text(text.as_bytes())))
    };
    let words = match arguments.0 {
        Ok(words) if words.is_empty() => {
            return failure("Please specify at least one argument for this redis lib call")
        }
        Ok(words) => words,
        Err(text) => return failure(text),
    };
    let Some(command) = keyspace::commands::lookup(&words[0]) else {
        return failure("Unknown Redis command called from script");
    };
    let spec = match keyspace::commands::resolve(&words) {
        Ok(spec) => spec,
        // An unknown subcommand is an unknown command; a known one with
        // the wrong number of arguments is an arity error, as in Redis.
        Err(_)
            if !command.subcommands.is_empty()
                && words.len() >= 2
                && keyspace::commands::lookup_subcommand(command, &words[1]).is_none() =>
        {
            return failure("Unknown Redis command called from script")
        }
        Err(_) => return failure("Wrong number of args calling Redis command from script"),
    };
    if spec.has(flags::NOSCRIPT) {
        return failure(NOT_ALLOWED);
    }
    let resp3 = control.resp.load(Ordering::SeqCst) == 3;
    let reply = match spec.name {
        "time" => {
            let now_ms = state.context.now_ms;
            Frame::Array(vec![
                Frame::bulk((now_ms / 1000).to_string()),
                Frame::bulk(((now_ms % 1000) * 1000).to_string()),
            ])
        }
        "ping" if words.len() <= 2 => match words.get(1) {
            Some(message) => Frame::Bulk(message.clone()),
            None => Frame::simple("PONG"),
        },
        "echo" => Frame::Bulk(words[1].clone()),
        "select" => select(state, &words[1]),
        "publish" | "spublish" => {
            // Delivered by the node once the script is done (by the leader
            // alone on a shard). The receiver count would differ between
            // replicas, so a script always sees 0.
            if state.read_only {
                return failure("Write commands are not allowed from read-only scripts.");
            }
            let shard = spec.name == "spublish";
            if shard && state.context.cluster_mode {
                let slot = cluster::key_slot(&words[1]);
                if state.slot.is_some_and(|own| own != slot) {
                    return failure(
                        "Script attempted to access keys that do not hash to the same slot",
                    );
                }
                if state.slot.is_none() {
                    return failure("Script attempted to access a non local key in a cluster node");
                }
            }
            state
                .keyspace
                .publish_from_script(words[1].clone(), words[2].clone(), shard);
            Frame::Integer(0)
        }
        _ => {
            if !matches!(spec.handler, Handler::Keyspace(_)) {
                return failure(NOT_ALLOWED);
            }
            if spec.is_write() && state.read_only {
                return failure("Write commands are not allowed from read-only scripts.");
            }
            if state.context.cluster_mode {
                match keyspace::command_slot(spec, &words) {
                    Ok(None) => {}
                    Ok(Some(slot)) if Some(slot) == state.slot => {}
                    Ok(Some(_)) if state.slot.is_none() => {
                        return failure(
                            "Script attempted to access a non local key in a cluster node",
                        )
                    }
                    Ok(Some(_)) | Err(_) => {
                        return failure(
                            "Script attempted to access keys that do not hash to the same slot",
                        )
                    }
                }
            }
            if state.oom_on_first_write && spec.has(flags::DENYOOM) {
                return Ok(Err(error_text(
                    format!("-{}", keyspace::evict::OOM).as_bytes(),
                )));
            }
            if spec.is_write() {
                state.oom_on_first_write = false;
            }
            if spec.is_write() && state.killable {
                state.killable = false;
                control.activity.record_write();
            }
            let context = &mut *state.context;
            let saved = context.protocol;
            context.protocol = if resp3 {
                Protocol::Resp3
            } else {
                Protocol::Resp2
            };
            let reply = state.keyspace.execute(spec, context, &words);
            // A blocking command called from a script never blocks: it has
            // answered as if its timeout had passed.
            context.block = None;
            context.protocol = saved;
            reply
        }
    };
    // MONITOR shows a command the script ran (as `[db lua]`, in the database
    // it leaves selected), after it ran, as Redis does; refused ones returned
    // above.
    state.keyspace.note_script_call(state.context.db, &words);
    match reply {
        Frame::Error(text) => {
            let mut line = b"-".to_vec();
            line.extend_from_slice(&text);
            Ok(Err(error_text(&line)))
        }
        reply => Ok(Ok(frame_to_lua(lua, &reply, resp3)?)),
    }
}

/// SELECT inside a script: changes the database for the rest of the run only.
fn select(state: &mut CallState<'_>, index: &[u8]) -> Frame {
    if state.context.cluster_mode {
        return Frame::error("ERR SELECT is not allowed in cluster mode");
    }
    match keyspace::args::parse_i64(index) {
        Ok(db) if db >= 0 && (db as usize) < state.keyspace.database_count() => {
            state.context.db = db as usize;
            Frame::OK
        }
        Ok(_) => Frame::error("ERR DB index is out of range"),
        Err(_) => Frame::error("ERR value is not an integer or out of range"),
    }
}
