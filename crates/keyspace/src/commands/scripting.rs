//! The scripting commands' rows: EVAL and its variants, SCRIPT, FCALL and
//! FUNCTION. They all run through [`crate::scripts`], which lends the keyspace
//! to the script engine; SCRIPT KILL and FUNCTION KILL act on a running script
//! from another connection, so the node runs them.

use crate::command::{
    flags::*, key_flags::*, BeginSearch, CommandSpec, FindKeys, Handler, KeySpec,
};
use crate::scripts::run_script_command;

const SCRIPT_KEYS_NOTES: &str =
    "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE";
const EVAL_KEYS: &[KeySpec] = &[KeySpec {
    notes: SCRIPT_KEYS_NOTES,
    flags: RW | ACCESS | UPDATE,
    begin: BeginSearch::Index(2),
    find: FindKeys::KeyNum {
        key_num_index: 0,
        first_key: 1,
        step: 1,
    },
}];
const EVAL_RO_KEYS: &[KeySpec] = &[KeySpec {
    notes: "",
    flags: RO | ACCESS,
    begin: BeginSearch::Index(2),
    find: FindKeys::KeyNum {
        key_num_index: 0,
        first_key: 1,
        step: 1,
    },
}];
const SCRIPTING_SLOW: &[&str] = &["slow", "scripting"];
const EVAL_COMPLEXITY: &str = "Depends on the script that is executed.";
const FCALL_COMPLEXITY: &str = "Depends on the function that is executed.";

const SCRIPT: Handler = Handler::Keyspace(run_script_command);

const fn eval_row(
    name: &'static str,
    flags: u64,
    key_specs: &'static [KeySpec],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags,
        key_specs,
        categories: SCRIPTING_SLOW,
        group: "scripting",
        summary,
        since,
        complexity,
        handler: SCRIPT,
        ..CommandSpec::DEFAULT
    }
}

#[allow(clippy::too_many_arguments)]
const fn sub(
    name: &'static str,
    arity: i32,
    flags: u64,
    tips: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        categories: SCRIPTING_SLOW,
        tips,
        group: "scripting",
        summary,
        since,
        complexity,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "script|debug",
        3,
        NOSCRIPT,
        &[],
        "Sets the debug mode of server-side Lua scripts.",
        "3.2.0",
        "O(1)",
        Handler::Node,
    ),
    sub(
        "script|exists",
        -3,
        NOSCRIPT | STALE,
        &["request_policy:all_shards", "response_policy:agg_logical_and"],
        "Determines whether server-side Lua scripts exist in the script cache.",
        "2.6.0",
        "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).",
        SCRIPT,
    ),
    sub(
        "script|flush",
        -2,
        NOSCRIPT | LOGGED,
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
        "Removes all server-side Lua scripts from the script cache.",
        "2.6.0",
        "O(N) with N being the number of scripts in cache",
        SCRIPT,
    ),
    sub(
        "script|help",
        2,
        LOADING | STALE,
        &[],
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        "O(1)",
        SCRIPT,
    ),
    sub(
        "script|kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        &["request_policy:all_shards", "response_policy:one_succeeded"],
        "Terminates a server-side Lua script during execution.",
        "2.6.0",
        "O(1)",
        Handler::Node,
    ),
    sub(
        "script|load",
        3,
        NOSCRIPT | STALE | LOGGED,
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
        "Loads a server-side Lua script to the script cache.",
        "2.6.0",
        "O(N) with N being the length in bytes of the script body.",
        SCRIPT,
    ),
];

const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "function|delete",
        3,
        NOSCRIPT | WRITE,
        &["request_policy:all_shards", "response_policy:all_succeeded"],
        "Deletes a library and its functions.",
        "7.0.0",
        "O(1)",
        SCRIPT,
    ),
    sub(
        "function|dump",
        2,
        NOSCRIPT,
        &[],
        "Dumps all libraries into a serialized binary payload.",
        "7.0.0",
        "O(N) where N is the number of functions",
        SCRIPT,
    ),
    sub(
        "function|flush",
        -2,
        NOSCRIPT | WRITE,
        &["request_policy:all_shards", "response_policy:all_succeeded"],
        "Deletes all libraries and functions.",
        "7.0.0",
        "O(N) where N is the number of functions deleted",
        SCRIPT,
    ),
    sub(
        "function|help",
        2,
        LOADING | STALE,
        &[],
        "Returns helpful text about the different subcommands.",
        "7.0.0",
        "O(1)",
        SCRIPT,
    ),
    sub(
        "function|kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        &["request_policy:all_shards", "response_policy:one_succeeded"],
        "Terminates a function during execution.",
        "7.0.0",
        "O(1)",
        Handler::Node,
    ),
    sub(
        "function|list",
        -2,
        NOSCRIPT,
        &["nondeterministic_output_order"],
        "Returns information about all libraries.",
        "7.0.0",
        "O(N) where N is the number of functions",
        SCRIPT,
    ),
    sub(
        "function|load",
        -3,
        NOSCRIPT | WRITE | DENYOOM,
        &["request_policy:all_shards", "response_policy:all_succeeded"],
        "Creates a library.",
        "7.0.0",
        "O(1) (considering compilation time is redundant)",
        SCRIPT,
    ),
    sub(
        "function|restore",
        -3,
        NOSCRIPT | WRITE | DENYOOM,
        &["request_policy:all_shards", "response_policy:all_succeeded"],
        "Restores all libraries from a payload.",
        "7.0.0",
        "O(N) where N is the number of functions on the payload",
        SCRIPT,
    ),
    sub(
        "function|stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        "Returns information about a function during execution.",
        "7.0.0",
        "O(1)",
        SCRIPT,
    ),
];

pub const COMMANDS: &[CommandSpec] = &[
    eval_row(
        "eval",
        NOSCRIPT | STALE | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | LOGGED,
        EVAL_KEYS,
        "Executes a server-side Lua script.",
        "2.6.0",
        EVAL_COMPLEXITY,
    ),
    eval_row(
        "evalsha",
        NOSCRIPT | STALE | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | LOGGED,
        EVAL_KEYS,
        "Executes a server-side Lua script by SHA1 digest.",
        "2.6.0",
        EVAL_COMPLEXITY,
    ),
    eval_row(
        "eval_ro",
        NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | READONLY,
        EVAL_RO_KEYS,
        "Executes a read-only server-side Lua script.",
        "7.0.0",
        EVAL_COMPLEXITY,
    ),
    eval_row(
        "evalsha_ro",
        NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | READONLY,
        EVAL_RO_KEYS,
        "Executes a read-only server-side Lua script by SHA1 digest.",
        "7.0.0",
        EVAL_COMPLEXITY,
    ),
    eval_row(
        "fcall",
        NOSCRIPT | STALE | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | LOGGED,
        EVAL_KEYS,
        "Invokes a function.",
        "7.0.0",
        FCALL_COMPLEXITY,
    ),
    eval_row(
        "fcall_ro",
        NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | READONLY,
        EVAL_RO_KEYS,
        "Invokes a read-only function.",
        "7.0.0",
        FCALL_COMPLEXITY,
    ),
    CommandSpec {
        name: "script",
        arity: -2,
        categories: &["slow"],
        group: "scripting",
        summary: "A container for Lua scripts management commands.",
        since: "2.6.0",
        complexity: "Depends on subcommand.",
        subcommands: SCRIPT_SUBCOMMANDS,
        handler: Handler::Container,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "function",
        arity: -2,
        categories: &["slow"],
        group: "scripting",
        summary: "A container for function commands.",
        since: "7.0.0",
        complexity: "Depends on subcommand.",
        subcommands: FUNCTION_SUBCOMMANDS,
        handler: Handler::Container,
        ..CommandSpec::DEFAULT
    },
];
