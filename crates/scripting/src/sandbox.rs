//! The Lua state scripts run in: Redis's sandbox, built once per engine.
//!
//! Scripts see a global table they cannot change: reading a name that does not
//! exist and assigning any name are errors, and the library tables (`redis`,
//! `string`, `math`, `table`, `cjson`, ...) are read-only views, so nothing one
//! script does survives into the next. Nothing that reads the outside world is
//! there: no `os`, `io`, `loadstring`, `dofile`, `load`, `loadfile`,
//! `getfenv` or `setfenv` (the last two would reach the real globals); `math.random` draws from a generator the engine seeds from the
//! log entry; `tostring` of a table, function, userdata or coroutine gives
//! its type without an address, and the heap size reads as 0, since both
//! differ between replicas.
//!
//! Errors that stop a script (the instruction budget, SCRIPT KILL) must not be
//! swallowed by the script's own `pcall`: the wrappers of `pcall`, `xpcall` and
//! `coroutine.resume` raise them again.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use keyspace::{Rng, ScriptActivity};
use mlua::chunk::ChunkMode;
use mlua::debug::Debug;
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Thread, Value, VmState,
};

/// The Lua VM instructions between two budget checks. Counting is exact at
/// this granularity and the same on every replica (the hook is re-armed at
/// every run's start, so no count carries over from earlier runs).
pub const BUDGET_STEP: u32 = 1000;

/// Most memory one engine's Lua state may hold; the instruction hook stops a
/// run past it. It is checked by the hook rather than set as mlua's memory
/// limit: with a limit, mlua (on Lua 5.1) wraps every API call in a
/// protected call that allocates two C closures, which cost scripts about a
/// third of their time. The heap size depends on when the collector last
/// ran, so this stop is not exact the way the instruction budget is; it
/// guards the process, not replica agreement.
pub const MEMORY_LIMIT_BYTES: usize = 1 << 30;

/// The longest string `string.rep` builds (Redis's `proto-max-bulk-len`
/// default): one call allocates at once, before any hook could look.
const MAX_REP_BYTES: u64 = 512 << 20;

/// Why a run was stopped from outside the script's own logic.
pub const STOP_NONE: u8 = 0;
pub const STOP_BUDGET: u8 = 1;
pub const STOP_KILLED: u8 = 2;
pub const STOP_MEMORY: u8 = 3;

/// What the instruction hook and the Rust-side globals share with the engine.
pub struct RunControl {
    pub instructions: AtomicU64,
    pub instruction_limit: AtomicU64,
    pub stop: AtomicU8,
    /// The run's protocol for replies of commands called from it (2 or 3).
    pub resp: AtomicU8,
    /// `math.random`'s generator, seeded at every run's start.
    pub random: Mutex<Rng>,
    pub activity: Arc<ScriptActivity>,
    /// The instruction hook is installed (once, on the first run; between
    /// runs it is disarmed by an unlimited budget).
    pub hooked: AtomicBool,
}

impl RunControl {
    pub fn stopped(&self) -> u8 {
        self.stop.load(Ordering::SeqCst)
    }
}

/// The parts of the Lua state the engine works with.
pub struct Sandbox {
    pub lua: Lua,
    /// What scripts see as their globals (a read-only view of `globals`).
    pub env: Table,
    /// The real globals behind `env`; KEYS and ARGV are set here per run.
    pub globals: Table,
    /// Per-run slots the prelude's closures read: `register_function` is
    /// set while a library load lasts.
    pub hidden: Table,
    /// `function(f) return xpcall(f, handler) end`.
    pub runner: Function,
    /// The same for functions, which get KEYS and ARGV as arguments.
    pub function_runner: Function,
    /// Returns a new library environment and the function that opens it to
    /// the full script environment once the library is loaded.
    pub make_library_env: Function,
    pub control: Arc<RunControl>,
}

/// The prelude, run once with the full standard library still in reach. It
/// builds the protected environment and returns what the engine keeps.
const PRELUDE: &str = r#"
local hidden, stopped, raw_globals, error_text, arm = ...
local error, type, tostring, rawset, setmetatable, select =
      error, type, tostring, rawset, setmetatable, select
local raw_pcall, raw_xpcall, raw_resume = pcall, xpcall, coroutine.resume

local protected = setmetatable({}, {__mode = 'k'})
local function readonly_error() error('Attempt to modify a readonly table', 2) end
local function readonly(target)
  local view = setmetatable({}, {
    __index = target,
    __newindex = readonly_error,
    __metatable = false,
  })
  protected[view] = true
  return view
end

-- Errors that stop a run are raised again where a script catches them; a
-- caught error table gives the script its `err` text, as Redis's pcall does.
local function check(ok, ...)
  if not ok then
    if stopped() then error((...), 0) end
    local raised = ...
    if type(raised) == 'table' and type(raised.err) == 'string' then
      return false, raised.err
    end
    local text = error_text(raised)
    if text ~= nil then return false, text end
  end
  return ok, ...
end
raw_globals.pcall = function(...) return check(raw_pcall(...)) end
raw_globals.xpcall = function(...) return check(raw_xpcall(...)) end
-- Addresses and heap sizes differ between replicas: a script must not be
-- able to read them (and write them into the keyspace).
local raw_tostring, raw_collect, getmetatable = tostring, collectgarbage, getmetatable
raw_globals.tostring = function(value)
  local kind = type(value)
  if kind == 'table' or kind == 'function' or kind == 'userdata' or kind == 'thread' then
    local meta = getmetatable(value)
    if not (type(meta) == 'table' and meta.__tostring) then return kind end
  end
  return raw_tostring(value)
end
raw_globals.collectgarbage = function(option, ...)
  if option == 'count' then return 0 end
  return raw_collect(option, ...)
end
raw_globals.gcinfo = function() return 0 end
raw_globals.rawset = function(target, key, value)
  if protected[target] then readonly_error() end
  return rawset(target, key, value)
end

local redis = raw_globals.redis
redis.register_function = function(...)
  local register = hidden.register_function
  if register == nil then
    error('redis.register_function can only be called on FUNCTION LOAD command', 2)
  end
  return register(...)
end

local coroutine_view = {}
for name, value in pairs(coroutine) do coroutine_view[name] = value end
local raw_create = coroutine.create
coroutine_view.create = function(f)
  local co = raw_create(f)
  arm(co)
  return co
end
coroutine_view.resume = function(...) return check(raw_resume(...)) end
local function wrapped_result(ok, ...)
  if not ok then error((...), 0) end
  return ...
end
coroutine_view.wrap = function(f)
  local co = coroutine_view.create(f)
  return function(...) return wrapped_result(check(raw_resume(co, ...))) end
end
raw_globals.coroutine = readonly(coroutine_view)

for _, name in ipairs({'string', 'math', 'table', 'redis', 'bit', 'cjson', 'cmsgpack', 'struct'}) do
  raw_globals[name] = readonly(raw_globals[name])
end

-- The string metatable must not lead back to the real string table.
getmetatable('').__metatable = false

local load_redis = {}
for _, name in ipairs({'register_function', 'log', 'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE',
                       'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  load_redis[name] = redis[name]
end
local load_api = {redis = readonly(load_redis)}

local env = readonly(raw_globals)
raw_globals._G = env

-- A library's environment: while its body runs only the load API is
-- visible; `finish` then opens the full script environment to the
-- functions it registered.
local function make_library_env()
  local meta = {
    __index = function(_, name)
      local value = load_api[name]
      if value == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
      end
      return value
    end,
    __newindex = readonly_error,
    __metatable = false,
  }
  local library_env = setmetatable({}, meta)
  protected[library_env] = true
  return library_env, function() meta.__index = env end
end
setmetatable(raw_globals, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = readonly_error,
  __metatable = false,
})
return env, make_library_env
"#;

/// Builds a sandboxed Lua state.
pub fn build(activity: Arc<ScriptActivity>) -> mlua::Result<Sandbox> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::new(),
    )?;
    crate::libs::register_all(&lua)?;
    let control = Arc::new(RunControl {
        instructions: AtomicU64::new(0),
        instruction_limit: AtomicU64::new(u64::MAX),
        stop: AtomicU8::new(STOP_NONE),
        resp: AtomicU8::new(2),
        random: Mutex::new(Rng::new(0)),
        activity,
        hooked: AtomicBool::new(false),
    });
    let real = lua.globals();
    // What scripts may see of the base library, plus Redis's additions.
    let globals = lua.create_table()?;
    for name in [
        "assert",
        "collectgarbage",
        "error",
        "gcinfo",
        "getmetatable",
        "ipairs",
        "next",
        "pairs",
        "pcall",
        "rawequal",
        "rawget",
        "rawset",
        "select",
        "setmetatable",
        "tonumber",
        "tostring",
        "type",
        "unpack",
        "xpcall",
        "newproxy",
        "_VERSION",
        "string",
        "math",
        "table",
        "coroutine",
        "bit",
        "cjson",
        "cmsgpack",
        "struct",
    ] {
        globals.raw_set(name, real.raw_get::<Value>(name)?)?;
    }
    install_random(&lua, &globals, &control)?;
    install_bounded_rep(&lua, &globals)?;
    let redis = crate::redis_lib::build(&lua, &control)?;
    crate::run::install_call(&lua, &redis, &control)?;
    globals.raw_set("redis", redis)?;
    let hidden = lua.create_table()?;
    let stopped = {
        let control = control.clone();
        lua.create_function(move |_, ()| Ok(control.stopped() != STOP_NONE))?
    };
    let (env, make_library_env): (Table, Function) = lua
        .load(PRELUDE)
        .set_name("=prelude")
        .set_mode(ChunkMode::Text)
        .call((
            hidden.clone(),
            stopped,
            globals.clone(),
            crate::run::error_text_function(&lua)?,
            thread_arming(&lua, &control)?,
        ))?;
    let handler = crate::run::error_handler(&lua, &control)?;
    let runner: Function = lua
        .load("local handler = ... return function(f) return xpcall(f, handler) end")
        .set_name("=runner")
        .call(handler.clone())?;
    let function_runner: Function = lua
        .load(
            "local handler = ... return function(f, keys, args) \
             return xpcall(function() return f(keys, args) end, handler) end",
        )
        .set_name("=runner")
        .call(handler)?;
    Ok(Sandbox {
        lua,
        env,
        globals,
        hidden,
        runner,
        function_runner,
        make_library_env,
        control,
    })
}

/// `math.random` and `math.randomseed` over the run's seeded generator, with
/// Lua 5.1's argument rules.
fn install_random(lua: &Lua, globals: &Table, control: &Arc<RunControl>) -> mlua::Result<()> {
    let math: Table = globals.raw_get("math")?;
    let random = {
        let control = control.clone();
        lua.create_function(move |_, arguments: MultiValue| {
            let fraction = {
                let mut random = control.random.lock().unwrap_or_else(|p| p.into_inner());
                // 53 random bits: a double in [0, 1).
                (random.next_u64() >> 11) as f64 / (1u64 << 53) as f64
            };
            let number = |value: &Value| -> mlua::Result<f64> {
                match value {
                    Value::Integer(value) => Ok(*value as f64),
                    Value::Number(value) => Ok(*value),
                    Value::String(text) => text
                        .to_str()
                        .ok()
                        .and_then(|text| text.trim().parse::<f64>().ok())
                        .ok_or_else(|| {
                            mlua::Error::runtime("bad argument to 'random' (number expected)")
                        }),
                    _ => Err(mlua::Error::runtime(
                        "bad argument to 'random' (number expected)",
                    )),
                }
            };
            match arguments.len() {
                0 => Ok(fraction),
                1 => {
                    let upper = number(&arguments[0])?.floor();
                    if upper < 1.0 {
                        return Err(mlua::Error::runtime(
                            "bad argument #1 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((fraction * upper).floor() + 1.0)
                }
                2 => {
                    let lower = number(&arguments[0])?.floor();
                    let upper = number(&arguments[1])?.floor();
                    if lower > upper {
                        return Err(mlua::Error::runtime(
                            "bad argument #2 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((fraction * (upper - lower + 1.0)).floor() + lower)
                }
                _ => Err(mlua::Error::runtime("wrong number of arguments")),
            }
        })?
    };
    let randomseed = {
        let control = control.clone();
        lua.create_function(move |_, seed: f64| {
            *control.random.lock().unwrap_or_else(|p| p.into_inner()) =
                Rng::new(seed as i64 as u64);
            Ok(())
        })?
    };
    math.raw_set("random", random)?;
    math.raw_set("randomseed", randomseed)?;
    Ok(())
}

/// `string.rep` with Lua 5.1's argument rules, refusing results over
/// [`MAX_REP_BYTES`] (one call allocates its whole result before any hook
/// could look).
fn install_bounded_rep(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    use crate::libs::{check_number, check_string, fail};
    let string: Table = globals.raw_get("string")?;
    crate::libs::add(lua, &string, "rep", |lua, arguments: MultiValue| {
        let text = check_string(lua, &arguments, 1, "rep")?;
        let count = check_number(lua, &arguments, 2, "rep")? as i64;
        if count <= 0 || text.is_empty() {
            return Ok(Value::String(lua.create_string("")?));
        }
        if (text.len() as u64).saturating_mul(count as u64) > MAX_REP_BYTES {
            return Err(fail("resulting string too large"));
        }
        Ok(Value::String(
            lua.create_string(text.repeat(count as usize))?,
        ))
    })
}

/// Arms the instruction hook for one run (see [`BUDGET_STEP`]).
pub fn arm_hook(lua: &Lua, control: &Arc<RunControl>, limit: u64) -> mlua::Result<()> {
    control.instructions.store(0, Ordering::SeqCst);
    control.instruction_limit.store(limit, Ordering::SeqCst);
    control.stop.store(STOP_NONE, Ordering::SeqCst);
    if !control.hooked.swap(true, Ordering::SeqCst) {
        // Installed once: setting a hook allocates, and a run is short.
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(BUDGET_STEP),
            hook(control),
        )?;
    }
    Ok(())
}

/// Ends a run's budget: Lua that runs outside a run (none does today) is not
/// counted against the last run's.
pub fn disarm_hook(control: &RunControl) {
    control.instruction_limit.store(u64::MAX, Ordering::SeqCst);
}

/// The instruction hook: counts the run's instructions (coroutines included)
/// and stops the run past its budget or when a kill applies to it.
fn hook(
    control: &Arc<RunControl>,
) -> impl Fn(&Lua, &Debug) -> mlua::Result<VmState> + Send + 'static {
    let control = control.clone();
    move |lua, _| {
        if control.stopped() != STOP_NONE {
            return Err(mlua::Error::runtime("script stopped"));
        }
        if lua.used_memory() > MEMORY_LIMIT_BYTES {
            control.stop.store(STOP_MEMORY, Ordering::SeqCst);
            return Err(mlua::Error::runtime("script stopped"));
        }
        let used = control
            .instructions
            .fetch_add(u64::from(BUDGET_STEP), Ordering::SeqCst)
            + u64::from(BUDGET_STEP);
        if used > control.instruction_limit.load(Ordering::SeqCst) {
            control.stop.store(STOP_BUDGET, Ordering::SeqCst);
            return Err(mlua::Error::runtime("script stopped"));
        }
        if control.activity.kill_requested() && control.activity.is_killable() {
            control.stop.store(STOP_KILLED, Ordering::SeqCst);
            return Err(mlua::Error::runtime("script stopped"));
        }
        Ok(VmState::Continue)
    }
}

/// `arm(co)` for the prelude: a coroutine gets the instruction hook too.
fn thread_arming(lua: &Lua, control: &Arc<RunControl>) -> mlua::Result<Function> {
    let control = control.clone();
    lua.create_function(move |_, thread: Thread| {
        thread.set_hook(
            HookTriggers::new().every_nth_instruction(BUDGET_STEP),
            hook(&control),
        )
    })
}
