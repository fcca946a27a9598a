//! Redis Functions: FUNCTION LOAD/DELETE/FLUSH/LIST/DUMP/RESTORE/STATS/HELP,
//! FCALL and FCALL_RO.
//!
//! A library's code is replicated state (the keyspace's store, by library
//! name); the functions it registers are derived by running the code again
//! whenever the store changed under the engine (a fresh engine, a loaded
//! snapshot). While the library body runs, only `redis.register_function`,
//! `redis.log` and the version constants are visible, as in Redis; the
//! registered callbacks see the full script environment when called.

use std::cell::RefCell;
use std::collections::BTreeMap;

use bytes::Bytes;
use keyspace::scripts::MAX_LIBRARIES;
use keyspace::{Context, Keyspace};
use mlua::chunk::ChunkMode;
use mlua::{Function, MultiValue, Table, Value};
use resp::Frame;

use crate::convert::error_bytes;
use crate::eval::help;
use crate::run::{self, RunOptions};
use crate::sandbox::{self, Sandbox};
use crate::{check_flags, ScriptFlags};

/// The RDB version FUNCTION DUMP writes (Redis 7.2's), so Redis can restore
/// our payloads; payloads up to it are read.
const RDB_VERSION: u16 = 11;
/// RDB_OPCODE_FUNCTION2: one library's code follows.
const OPCODE_FUNCTION: u8 = 0xF5;
const OPCODE_FUNCTION_PRE_GA: u8 = 0xF6;
const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";

/// One registered function.
#[derive(Clone)]
pub struct LoadedFunction {
    /// As registered (lookups ignore case).
    pub name: String,
    pub function: Function,
    pub flags: ScriptFlags,
    pub description: Option<Bytes>,
}

/// One library: its functions in registration order.
#[derive(Clone)]
pub struct Library {
    pub name: Bytes,
    pub functions: Vec<LoadedFunction>,
}

/// The functions derived from the store's libraries.
#[derive(Default)]
pub struct Registry {
    /// The store's `libraries_version` this registry reflects.
    synced: Option<u64>,
    libraries: BTreeMap<Bytes, Library>,
    /// Lua instructions the last call of each function took, by lowercase
    /// name (see [`crate::eval::SHORT_RUN_INSTRUCTIONS`]).
    last_instructions: BTreeMap<Vec<u8>, u64>,
}

impl Registry {
    /// Whether the function `name` ran before and its last call was short.
    pub fn known_short(&self, name: &[u8]) -> bool {
        self.last_instructions
            .get(&name.to_ascii_lowercase())
            .is_some_and(|used| *used < crate::eval::SHORT_RUN_INSTRUCTIONS)
    }

    /// Rebuilds the registry when the store changed under it.
    fn sync(&mut self, sandbox: &Sandbox, keyspace: &Keyspace) {
        if self.synced == Some(keyspace.scripts.libraries_version) {
            return;
        }
        self.libraries.clear();
        let limit = keyspace.config.script_instruction_limit;
        for code in keyspace.scripts.libraries.values() {
            // Stored code loaded once; should it fail now (a smaller budget),
            // its functions are simply missing.
            if let Ok(library) = load_library(sandbox, code, limit) {
                self.libraries.insert(library.name.clone(), library);
            }
        }
        self.synced = Some(keyspace.scripts.libraries_version);
    }

    /// The flags of function `name` as the stored libraries declare them.
    pub(crate) fn flags_of(
        &mut self,
        sandbox: &Sandbox,
        keyspace: &Keyspace,
        name: &[u8],
    ) -> Option<ScriptFlags> {
        self.sync(sandbox, keyspace);
        self.find(name).map(|function| function.flags)
    }

    fn find(&self, name: &[u8]) -> Option<&LoadedFunction> {
        self.libraries
            .values()
            .flat_map(|library| &library.functions)
            .find(|function| function.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// The first function of `library` whose name another library (other than
    /// those in `replaced`) already uses.
    fn clash<'a>(&self, library: &'a Library, replaced: &[&Bytes]) -> Option<&'a str> {
        library
            .functions
            .iter()
            .map(|function| function.name.as_str())
            .find(|name| {
                self.libraries
                    .values()
                    .filter(|other| !replaced.contains(&&other.name))
                    .flat_map(|other| &other.functions)
                    .any(|function| function.name.eq_ignore_ascii_case(name))
            })
    }
}

fn metadata_error(text: String) -> Frame {
    Frame::Error(error_bytes(format!("ERR {text}").as_bytes()))
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

const NAME_RULE: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// The library name from `#!lua name=<name>`, and where the code starts.
fn parse_metadata(code: &[u8]) -> Result<(Bytes, usize), Frame> {
    if !code.starts_with(b"#!") {
        return Err(metadata_error("Missing library metadata".into()));
    }
    let Some(end) = code.iter().position(|&byte| byte == b'\n') else {
        return Err(metadata_error("Invalid library metadata".into()));
    };
    let mut parts = code[2..end]
        .split(|&byte| byte == b' ' || byte == b'\t' || byte == b'\r')
        .filter(|part| !part.is_empty());
    let engine = if code.get(2).is_some_and(|byte| !byte.is_ascii_whitespace()) {
        parts.next().unwrap_or_default()
    } else {
        &[]
    };
    let mut name = None;
    for part in parts {
        let lowered = part.to_ascii_lowercase();
        let Some(value) = lowered.strip_prefix(b"name=").map(|_| &part[5..]) else {
            return Err(metadata_error(format!(
                "Invalid metadata value given: {}",
                String::from_utf8_lossy(part)
            )));
        };
        if name.is_some() {
            return Err(metadata_error(
                "Invalid metadata value, name argument was given multiple times".into(),
            ));
        }
        let value = value
            .strip_prefix(b"\"")
            .and_then(|rest| rest.strip_suffix(b"\""))
            .unwrap_or(value);
        name = Some(Bytes::copy_from_slice(value));
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(metadata_error(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(engine)
        )));
    }
    let Some(name) = name else {
        return Err(metadata_error("Library name was not given".into()));
    };
    if !valid_name(&name) {
        return Err(metadata_error(NAME_RULE.into()));
    }
    Ok((name, end))
}

/// Runs a library's code and collects what it registers.
fn load_library(sandbox: &Sandbox, code: &[u8], instruction_limit: u64) -> Result<Library, Frame> {
    let (name, start) = parse_metadata(code)?;
    let lua = &sandbox.lua;
    let internal = |error: mlua::Error| {
        metadata_error(format!(
            "Error registering functions: {}",
            run::plain_message(&error)
        ))
    };
    let (env, finish): (Table, Function) = sandbox.make_library_env.call(()).map_err(internal)?;
    let chunk = lua
        .load(&code[start..])
        .set_name("@user_function")
        .set_mode(ChunkMode::Text)
        .set_environment(env)
        .into_function()
        .map_err(|error| {
            metadata_error(format!(
                "Error compiling function: {}",
                run::plain_message(&error)
            ))
        })?;
    let registered: RefCell<Vec<LoadedFunction>> = RefCell::new(Vec::new());
    sandbox::arm_hook(lua, &sandbox.control, instruction_limit).map_err(internal)?;
    let outcome = lua.scope(|scope| {
        let register = scope.create_function(|_, arguments: MultiValue| {
            let function = registration(arguments)?;
            let mut registered = registered.borrow_mut();
            if registered
                .iter()
                .any(|other| other.name.eq_ignore_ascii_case(&function.name))
            {
                return Err(mlua::Error::runtime(
                    "Function already exists in the library",
                ));
            }
            registered.push(function);
            Ok(())
        })?;
        sandbox.hidden.raw_set("register_function", register)?;
        let (ok, value): (bool, Value) = sandbox.runner.call(chunk)?;
        Ok((ok, value))
    });
    sandbox::disarm_hook(&sandbox.control);
    let _ = sandbox.hidden.raw_set("register_function", Value::Nil);
    sandbox
        .control
        .stop
        .store(sandbox::STOP_NONE, std::sync::atomic::Ordering::SeqCst);
    let (ok, value) = outcome.map_err(internal)?;
    if !ok {
        let text = match &value {
            Value::Table(table) => table
                .raw_get::<mlua::LuaString>("err")
                .map(|text| text.to_string_lossy())
                .unwrap_or_else(|_| "unknown error".into()),
            _ => "unknown error".into(),
        };
        let text = text.strip_prefix("ERR ").unwrap_or(&text).to_string();
        return Err(metadata_error(format!(
            "Error registering functions: {text}"
        )));
    }
    finish.call::<()>(()).map_err(internal)?;
    let functions = registered.into_inner();
    if functions.is_empty() {
        return Err(metadata_error("No functions registered".into()));
    }
    Ok(Library { name, functions })
}

/// One `redis.register_function` call's function, checked as Redis does.
fn registration(arguments: MultiValue) -> mlua::Result<LoadedFunction> {
    let fail = |text: &str| Err(mlua::Error::runtime(text));
    let (name, callback, flags, description) = match arguments.len() {
        2 => {
            let Value::String(name) = &arguments[0] else {
                return fail("first argument to redis.register_function must be a string");
            };
            let Value::Function(callback) = &arguments[1] else {
                return fail("second argument to redis.register_function must be a function");
            };
            (name.as_bytes().to_vec(), callback.clone(), None, None)
        }
        1 => {
            let Value::Table(named) = &arguments[0] else {
                return fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut callback, mut flags, mut description) = (None, None, None, None);
            for pair in named.pairs::<Value, Value>() {
                let (key, value) = pair?;
                let Value::String(key) = key else {
                    return fail(
                        "named argument key given to redis.register_function is not a string",
                    );
                };
                match &key.as_bytes()[..] {
                    b"function_name" => match value {
                        Value::String(text) => name = Some(text.as_bytes().to_vec()),
                        _ => return fail("function_name argument given to redis.register_function must be a string"),
                    },
                    b"description" => match value {
                        Value::String(text) => description = Some(Bytes::copy_from_slice(&text.as_bytes())),
                        _ => return fail("description argument given to redis.register_function must be a string"),
                    },
                    b"callback" => match value {
                        Value::Function(function) => callback = Some(function),
                        _ => return fail("callback argument given to redis.register_function must be a function"),
                    },
                    b"flags" => match value {
                        Value::Table(table) => flags = Some(table),
                        _ => return fail("flags argument to redis.register_function must be a table representing function flags"),
                    },
                    _ => return fail("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return fail("redis.register_function must get a function name argument");
            };
            let Some(callback) = callback else {
                return fail("redis.register_function must get a callback argument");
            };
            (name, callback, flags, description)
        }
        _ => return fail("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(&name) {
        return fail(NAME_RULE);
    }
    let mut parsed = ScriptFlags {
        declared: true,
        ..ScriptFlags::default()
    };
    if let Some(flags) = flags {
        for value in flags.sequence_values::<Value>() {
            let known = match value? {
                Value::String(flag) => parsed.set(&flag.as_bytes().to_ascii_lowercase()),
                _ => false,
            };
            if !known {
                return fail("unknown flag given");
            }
        }
    }
    Ok(LoadedFunction {
        name: String::from_utf8_lossy(&name).into_owned(),
        function: callback,
        flags: parsed,
        description,
    })
}

pub fn fcall(
    registry: &mut Registry,
    sandbox: &Sandbox,
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
) -> Frame {
    registry.sync(sandbox, keyspace);
    let read_only = arguments[0].eq_ignore_ascii_case(b"fcall_ro");
    let Some(found) = registry.find(&arguments[1]).cloned() else {
        return Frame::error("ERR Function not found");
    };
    let Ok(count) = keyspace::args::parse_i64(&arguments[2]) else {
        return Frame::error("ERR Bad number of keys provided");
    };
    if count < 0 {
        return Frame::error("ERR Number of keys can't be negative");
    }
    let rest = &arguments[3..];
    if count as u64 > rest.len() as u64 {
        return Frame::error("ERR Number of keys can't be greater than number of args");
    }
    let (keys, argv) = rest.split_at(count as usize);
    if read_only && !found.flags.no_writes {
        return Frame::error("ERR Can not execute a script with write flag using *_ro command.");
    }
    if let Err(error) = check_flags(&found.flags, context) {
        return error;
    }
    let reply = run::run(
        sandbox,
        keyspace,
        context,
        &found.function,
        keys,
        argv,
        &RunOptions {
            name: &found.name,
            read_only: read_only || found.flags.no_writes,
            as_function: true,
            oom_on_first_write: false,
            described: Some(keyspace::RunningFunction {
                name: Bytes::from(found.name.clone()),
                command: arguments.to_vec(),
                libraries: registry.libraries.len(),
                functions: registry
                    .libraries
                    .values()
                    .map(|library| library.functions.len())
                    .sum(),
            }),
        },
    );
    let used = sandbox
        .control
        .instructions
        .load(std::sync::atomic::Ordering::SeqCst);
    registry
        .last_instructions
        .insert(found.name.to_ascii_lowercase().into_bytes(), used);
    reply
}

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Print this help.",
];

/// Records a change of the store's libraries that `registry` already reflects.
fn commit(registry: &mut Registry, keyspace: &mut Keyspace) {
    keyspace.scripts.libraries_version += 1;
    registry.synced = Some(keyspace.scripts.libraries_version);
}

pub fn function(
    registry: &mut Registry,
    sandbox: &Sandbox,
    keyspace: &mut Keyspace,
    context: &mut Context,
    sub: &[u8],
    arguments: &[Bytes],
) -> Frame {
    let _ = context;
    registry.sync(sandbox, keyspace);
    match sub {
        b"load" => {
            let mut replace = false;
            for option in &arguments[2..arguments.len() - 1] {
                if option.eq_ignore_ascii_case(b"replace") {
                    replace = true;
                } else {
                    return metadata_error(format!(
                        "Unknown option given: {}",
                        String::from_utf8_lossy(option)
                    ));
                }
            }
            let code = &arguments[arguments.len() - 1];
            let library =
                match load_library(sandbox, code, keyspace.config.script_instruction_limit) {
                    Ok(library) => library,
                    Err(error) => return error,
                };
            let exists = keyspace.scripts.libraries.contains_key(&library.name);
            if exists && !replace {
                return metadata_error(format!(
                    "Library '{}' already exists",
                    String::from_utf8_lossy(&library.name)
                ));
            }
            if let Some(name) = registry.clash(&library, &[&library.name]) {
                return metadata_error(format!("Function {name} already exists"));
            }
            if !exists && keyspace.scripts.libraries.len() >= MAX_LIBRARIES {
                return Frame::error("ERR too many function libraries");
            }
            let name = library.name.clone();
            keyspace
                .scripts
                .libraries
                .insert(name.clone(), Bytes::copy_from_slice(code));
            registry.libraries.insert(name.clone(), library);
            commit(registry, keyspace);
            Frame::Bulk(name)
        }
        b"delete" => {
            let name = &arguments[2];
            if keyspace.scripts.libraries.remove(&name[..]).is_none() {
                return Frame::error("ERR Library not found");
            }
            registry.libraries.remove(&name[..]);
            commit(registry, keyspace);
            Frame::OK
        }
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
                return Frame::error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            keyspace.scripts.libraries.clear();
            registry.libraries.clear();
            commit(registry, keyspace);
            Frame::OK
        }
        b"list" => list(registry, keyspace, &arguments[2..]),
        b"dump" => Frame::Bulk(Bytes::from(dump(keyspace))),
        b"restore" => restore(registry, sandbox, keyspace, &arguments[2..]),
        b"stats" => {
            let functions: usize = registry
                .libraries
                .values()
                .map(|library| library.functions.len())
                .sum();
            Frame::Map(vec![
                (Frame::bulk("running_script"), Frame::Null),
                (
                    Frame::bulk("engines"),
                    Frame::Map(vec![(
                        Frame::bulk("LUA"),
                        Frame::Map(vec![
                            (
                                Frame::bulk("libraries_count"),
                                Frame::Integer(registry.libraries.len() as i64),
                            ),
                            (
                                Frame::bulk("functions_count"),
                                Frame::Integer(functions as i64),
                            ),
                        ]),
                    )]),
                ),
            ])
        }
        b"help" => help(FUNCTION_HELP),
        _ => Frame::error_owned(format!(
            "ERR unknown subcommand '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

fn list(registry: &Registry, keyspace: &Keyspace, options: &[Bytes]) -> Frame {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut index = 0;
    while index < options.len() {
        let option = &options[index];
        if option.eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
        } else if option.eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            index += 1;
            match options.get(index) {
                Some(value) => pattern = Some(value),
                None => return Frame::error("ERR library name argument was not given"),
            }
        } else {
            return metadata_error(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(option)
            ));
        }
        index += 1;
    }
    let mut libraries = Vec::new();
    for library in registry.libraries.values() {
        if let Some(pattern) = pattern {
            if !keyspace::glob::glob_match(pattern, &library.name, true) {
                continue;
            }
        }
        let functions = library
            .functions
            .iter()
            .map(|function| {
                Frame::Map(vec![
                    (Frame::bulk("name"), Frame::bulk(function.name.clone())),
                    (
                        Frame::bulk("description"),
                        function
                            .description
                            .clone()
                            .map(Frame::Bulk)
                            .unwrap_or(Frame::Null),
                    ),
                    (
                        Frame::bulk("flags"),
                        Frame::Set(
                            function
                                .flags
                                .names()
                                .into_iter()
                                .map(Frame::simple)
                                .collect(),
                        ),
                    ),
                ])
            })
            .collect();
        let mut fields = vec![
            (
                Frame::bulk("library_name"),
                Frame::Bulk(library.name.clone()),
            ),
            (Frame::bulk("engine"), Frame::bulk("LUA")),
            (Frame::bulk("functions"), Frame::Array(functions)),
        ];
        if with_code {
            let code = keyspace
                .scripts
                .libraries
                .get(&library.name)
                .cloned()
                .unwrap_or_default();
            fields.push((Frame::bulk("library_code"), Frame::Bulk(code)));
        }
        libraries.push(Frame::Map(fields));
    }
    Frame::Array(libraries)
}

/// FUNCTION DUMP: each library's code after the FUNCTION2 opcode as an RDB
/// string, then the RDB version and Redis's CRC-64, as Redis lays it out.
fn dump(keyspace: &Keyspace) -> Vec<u8> {
    let mut payload = Vec::new();
    for code in keyspace.scripts.libraries.values() {
        payload.push(OPCODE_FUNCTION);
        put_rdb_length(&mut payload, code.len() as u64);
        payload.extend_from_slice(code);
    }
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = keyspace::dump::crc64(0, &payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

fn put_rdb_length(out: &mut Vec<u8>, length: u64) {
    if length < 64 {
        out.push(length as u8);
    } else if length < 16384 {
        out.push(0x40 | (length >> 8) as u8);
        out.push(length as u8);
    } else if length <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(length as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&length.to_be_bytes());
    }
}

/// Reads an RDB string (plain or LZF-compressed) at `*at`.
fn read_rdb_string(data: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let first = *data.get(*at)?;
    *at += 1;
    match first >> 6 {
        0 => take(data, at, usize::from(first & 0x3f)),
        1 => {
            let second = *data.get(*at)?;
            *at += 1;
            take(
                data,
                at,
                (usize::from(first & 0x3f) << 8) | usize::from(second),
            )
        }
        2 => {
            let length = match first {
                0x80 => u64::from(u32::from_be_bytes(take(data, at, 4)?.try_into().ok()?)),
                0x81 => u64::from_be_bytes(take(data, at, 8)?.try_into().ok()?),
                _ => return None,
            };
            take(data, at, usize::try_from(length).ok()?)
        }
        _ if first == 0xC3 => {
            let compressed = read_rdb_length(data, at)?;
            let original = read_rdb_length(data, at)?;
            let input = take(data, at, compressed)?;
            lzf_decompress(&input, original)
        }
        _ => None,
    }
}

fn read_rdb_length(data: &[u8], at: &mut usize) -> Option<usize> {
    let first = *data.get(*at)?;
    *at += 1;
    match first >> 6 {
        0 => Some(usize::from(first & 0x3f)),
        1 => {
            let second = *data.get(*at)?;
            *at += 1;
            Some((usize::from(first & 0x3f) << 8) | usize::from(second))
        }
        _ if first == 0x80 => {
            Some(u32::from_be_bytes(take(data, at, 4)?.try_into().ok()?) as usize)
        }
        _ if first == 0x81 => {
            usize::try_from(u64::from_be_bytes(take(data, at, 8)?.try_into().ok()?)).ok()
        }
        _ => None,
    }
}

fn take(data: &[u8], at: &mut usize, length: usize) -> Option<Vec<u8>> {
    let end = at.checked_add(length)?;
    let bytes = data.get(*at..end)?.to_vec();
    *at = end;
    Some(bytes)
}

/// LZF decompression (the format Redis compresses RDB strings with), into
/// exactly `expected` bytes.
fn lzf_decompress(input: &[u8], expected: usize) -> Option<Vec<u8>> {
    // The output can only be as large as the input allows (at most 264
    // bytes per 2 input bytes); refuse sizes no input could produce.
    if expected > input.len().saturating_mul(132) {
        return None;
    }
    let mut out = Vec::with_capacity(expected);
    let mut at = 0;
    while at < input.len() {
        let control = usize::from(input[at]);
        at += 1;
        if control < 32 {
            let literal = input.get(at..at + control + 1)?;
            out.extend_from_slice(literal);
            at += control + 1;
        } else {
            let mut length = control >> 5;
            if length == 7 {
                length += usize::from(*input.get(at)?);
                at += 1;
            }
            let low = usize::from(*input.get(at)?);
            at += 1;
            let back = ((control & 0x1f) << 8) + low + 1;
            let start = out.len().checked_sub(back)?;
            for offset in 0..length + 2 {
                let byte = out[start + offset];
                out.push(byte);
            }
        }
        if out.len() > expected {
            return None;
        }
    }
    (out.len() == expected).then_some(out)
}

fn restore(
    registry: &mut Registry,
    sandbox: &Sandbox,
    keyspace: &mut Keyspace,
    options: &[Bytes],
) -> Frame {
    if options.len() > 2 {
        return Frame::error(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.",
        );
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy =
        match options.get(1) {
            None => Policy::Append,
            Some(word) if word.eq_ignore_ascii_case(b"flush") => Policy::Flush,
            Some(word) if word.eq_ignore_ascii_case(b"append") => Policy::Append,
            Some(word) if word.eq_ignore_ascii_case(b"replace") => Policy::Replace,
            Some(_) => return Frame::error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let payload = &options[0];
    if payload.len() < 10 {
        return Frame::error(BAD_PAYLOAD);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let checksum = u64::from_le_bytes(footer[2..].try_into().unwrap_or_default());
    if version > RDB_VERSION || keyspace::dump::crc64(0, &payload[..payload.len() - 8]) != checksum
    {
        return Frame::error(BAD_PAYLOAD);
    }
    let limit = keyspace.config.script_instruction_limit;
    let mut incoming: BTreeMap<Bytes, (Bytes, Library)> = BTreeMap::new();
    let mut at = 0;
    while at < body.len() {
        match body[at] {
            OPCODE_FUNCTION => {}
            OPCODE_FUNCTION_PRE_GA => {
                return Frame::error("ERR Pre-GA function format not supported")
            }
            _ => return Frame::error("ERR given type is not a function"),
        }
        at += 1;
        let Some(code) = read_rdb_string(body, &mut at) else {
            return Frame::error("ERR Failed loading library payload");
        };
        let code = Bytes::from(code);
        let library = match load_library(sandbox, &code, limit) {
            Ok(library) => library,
            Err(error) => return error,
        };
        if incoming.contains_key(&library.name) {
            return metadata_error(format!(
                "Library {} already exists",
                String::from_utf8_lossy(&library.name)
            ));
        }
        incoming.insert(library.name.clone(), (code, library));
    }
    if policy != Policy::Flush {
        let replaced: Vec<&Bytes> = if policy == Policy::Replace {
            incoming.keys().collect()
        } else {
            Vec::new()
        };
        for (name, (_, library)) in &incoming {
            if policy == Policy::Append && keyspace.scripts.libraries.contains_key(name) {
                return metadata_error(format!(
                    "Library {} already exists",
                    String::from_utf8_lossy(name)
                ));
            }
            if let Some(function) = registry.clash(library, &replaced) {
                return metadata_error(format!("Function {function} already exists"));
            }
        }
    }
    if policy == Policy::Flush {
        keyspace.scripts.libraries.clear();
        registry.libraries.clear();
    }
    for (name, (code, library)) in incoming {
        keyspace.scripts.libraries.insert(name.clone(), code);
        registry.libraries.insert(name, library);
    }
    commit(registry, keyspace);
    Frame::OK
}
