//! Server and connection commands. Those that only need the keyspace or the command
//! table run here; those that need connection or process state are marked
//! `Handler::Node` and run in the node, but are described here so the one table
//! knows every command.

use crate::command::{
    flags::{self, *},
    key_flags, BeginSearch, CommandSpec, FindKeys, Handler, KeySpec,
};
use crate::commands::{all_commands, lookup, lookup_subcommand};
use crate::glob::glob_match;
use crate::{args, errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

const fn node(name: &'static str, arity: i32, flags: u64, summary: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        summary,
        group: "server",
        handler: Handler::Node,
        ..CommandSpec::DEFAULT
    }
}

const fn connection(
    name: &'static str,
    arity: i32,
    flags: u64,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        group: "connection",
        categories: &["connection"],
        ..node(name, arity, flags, summary)
    }
}

const CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    connection(
        "client|id",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns the unique client ID of the connection.",
    ),
    connection(
        "client|setname",
        3,
        NOSCRIPT | LOADING | STALE,
        "Sets the connection name.",
    ),
    connection(
        "client|getname",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns the name of the connection.",
    ),
    connection(
        "client|list",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Lists open connections.",
    ),
    connection(
        "client|info",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns information about the connection.",
    ),
    connection(
        "client|kill",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Terminates open connections.",
    ),
    connection(
        "client|reply",
        3,
        NOSCRIPT | LOADING | STALE,
        "Instructs the server whether to reply to commands.",
    ),
    connection(
        "client|no-evict",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Sets the client eviction mode of the connection.",
    ),
    connection(
        "client|no-touch",
        3,
        NOSCRIPT | LOADING | STALE,
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
    ),
    connection(
        "client|setinfo",
        4,
        NOSCRIPT | LOADING | STALE,
        "Sets information specific to the client or connection.",
    ),
    connection(
        "client|unblock",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Unblocks a client blocked by a blocking command from a different connection.",
    ),
    connection(
        "client|tracking",
        -3,
        NOSCRIPT | LOADING | STALE,
        "Controls server-assisted client-side caching for the connection.",
    ),
    connection(
        "client|caching",
        3,
        NOSCRIPT | LOADING | STALE,
        "Instructs the server whether to track the keys in the next request.",
    ),
    connection(
        "client|getredir",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns the client ID to which the connection's tracking notifications are redirected.",
    ),
    connection(
        "client|trackinginfo",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns information about server-assisted client-side caching for the connection.",
    ),
    connection(
        "client|pause",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Suspends commands processing.",
    ),
    connection(
        "client|unpause",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Resumes processing commands from paused clients.",
    ),
    connection(
        "client|help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

const ADMIN_CATEGORIES: &[&str] = &["admin", "slow", "dangerous"];

/// A node command in Redis's @admin @slow @dangerous categories.
const fn admin(name: &'static str, arity: i32, flags: u64, summary: &'static str) -> CommandSpec {
    CommandSpec {
        categories: ADMIN_CATEGORIES,
        ..node(name, arity, flags, summary)
    }
}

/// A container's HELP subcommand.
const fn help_sub(name: &'static str) -> CommandSpec {
    CommandSpec {
        categories: &["slow"],
        ..node(
            name,
            2,
            LOADING | STALE,
            "Returns helpful text about the different subcommands.",
        )
    }
}

const fn container(
    name: &'static str,
    subcommands: &'static [CommandSpec],
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        categories: &["slow"],
        subcommands,
        handler: Handler::Container,
        ..node(name, -2, 0, summary)
    }
}

const SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    admin(
        "slowlog|get",
        -2,
        ADMIN | LOADING | STALE,
        "Returns the slow log's entries.",
    ),
    admin(
        "slowlog|len",
        2,
        ADMIN | LOADING | STALE,
        "Returns the number of entries in the slow log.",
    ),
    admin(
        "slowlog|reset",
        2,
        ADMIN | LOADING | STALE,
        "Clears all entries from the slow log.",
    ),
    help_sub("slowlog|help"),
];

const LATENCY_SUBCOMMANDS: &[CommandSpec] = &[
    admin(
        "latency|doctor",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns a human-readable latency analysis report.",
    ),
    admin(
        "latency|graph",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns a latency graph for an event.",
    ),
    admin(
        "latency|history",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns timestamp-latency samples for an event.",
    ),
    admin(
        "latency|latest",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the latest latency samples for all events.",
    ),
    admin(
        "latency|histogram",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the cumulative distribution of latencies of a subset or all commands.",
    ),
    admin(
        "latency|reset",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Resets the latency data for one or more events.",
    ),
    help_sub("latency|help"),
];

/// ACL subcommands: the admin ones, and those any user may run.
const fn acl_admin(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    admin(name, arity, ADMIN | NOSCRIPT | LOADING | STALE, summary)
}

const fn acl_user(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    CommandSpec {
        categories: &["slow"],
        ..node(name, arity, NOSCRIPT | LOADING | STALE, summary)
    }
}

const ACL_SUBCOMMANDS: &[CommandSpec] = &[
    acl_user(
        "acl|cat",
        -2,
        "Lists the ACL categories, or the commands inside a category.",
    ),
    acl_admin(
        "acl|deluser",
        -3,
        "Deletes ACL users, and terminates their connections.",
    ),
    acl_admin(
        "acl|dryrun",
        -4,
        "Simulates the execution of a command by a user, without executing the command.",
    ),
    acl_user(
        "acl|genpass",
        -2,
        "Generates a pseudorandom, secure password that can be used to identify ACL users.",
    ),
    acl_admin("acl|getuser", 3, "Lists the ACL rules of a user."),
    acl_admin(
        "acl|list",
        2,
        "Dumps the effective rules in ACL file format.",
    ),
    acl_admin(
        "acl|load",
        2,
        "Reloads the rules from the configured ACL file.",
    ),
    acl_admin(
        "acl|log",
        -2,
        "Lists recent security events generated due to ACL rules.",
    ),
    acl_admin(
        "acl|save",
        2,
        "Saves the effective ACL rules in the configured ACL file.",
    ),
    acl_admin(
        "acl|setuser",
        -3,
        "Creates and modifies an ACL user and its rules.",
    ),
    acl_admin("acl|users", 2, "Lists all ACL users."),
    acl_user(
        "acl|whoami",
        2,
        "Returns the authenticated username of the current connection.",
    ),
    help_sub("acl|help"),
];

const MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        tips: &["nondeterministic_output_order"],
        ..admin(
            "module|list",
            2,
            ADMIN | NOSCRIPT,
            "Returns all loaded modules.",
        )
    },
    admin(
        "module|load",
        -3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "Loads a module.",
    ),
    admin(
        "module|loadex",
        -3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "Loads a module using extended parameters.",
    ),
    admin(
        "module|unload",
        3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "Unloads a module.",
    ),
    help_sub("module|help"),
];

/// slotraft's own cluster plumbing, used by `slotraft cluster` and between
/// nodes (not part of Redis).
const SLOTRAFT_SUBCOMMANDS: &[CommandSpec] = &[
    node(
        "slotraft|node-info",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns this node's Raft id and cluster name.",
    ),
    node(
        "slotraft|bootstrap",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Joins the cluster described by an encoded topology.",
    ),
    node(
        "slotraft|put-leader",
        5,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Records a shard's leader in the metadata group (on its leader).",
    ),
    node(
        "slotraft|topology",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the encoded topology this node knows.",
    ),
    node(
        "slotraft|migrate-begin",
        4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Marks a slot as moving to a shard (on the metadata leader).",
    ),
    node(
        "slotraft|migrate-finish",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Makes a moving slot's target its owner (on the metadata leader).",
    ),
    node(
        "slotraft|slot-state",
        5,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Sets a slot's migration state in a shard (on the shard's leader).",
    ),
    node(
        "slotraft|export",
        6,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns a batch of a slot's keys with their expiry and DUMP payload.",
    ),
    node(
        "slotraft|export-changes",
        6,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns a batch of the keys changed in slots being copied away, with their expiry and DUMP payload.",
    ),
    node(
        "slotraft|import",
        -5,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Restores keys exported from another shard (on the shard's leader).",
    ),
    node(
        "slotraft|add-node",
        8,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Adds a node to the topology (on the metadata leader).",
    ),
    node(
        "slotraft|remove-node",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Removes a node that holds no replicas from the topology (on the metadata leader).",
    ),
    node(
        "slotraft|add-shard",
        -5,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Adds a shard without slots on the given nodes (on the metadata leader).",
    ),
    node(
        "slotraft|add-replica",
        4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Places a new replica of a shard on a node, last in preference order (on the metadata leader).",
    ),
    node(
        "slotraft|move-replica",
        5,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Records that a node's replica of a shard moved to another node (on the metadata leader).",
    ),
    node(
        "slotraft|replace-metadata-voter",
        4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Records that a node votes in the metadata group instead of another (on the metadata leader).",
    ),
    node(
        "slotraft|replace-voter",
        5,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "One step of a Raft membership change replacing a voter of a group (on the group's leader).",
    ),
    node(
        "slotraft|voters",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "A group's Raft voters (on the group's leader); TRYAGAIN during a membership change.",
    ),
    node(
        "slotraft|open-metadata",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Opens this node's replica of the metadata group before it joins it.",
    ),
    node(
        "slotraft|drop-slot",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Deletes a slot's keys from a shard that gave it away.",
    ),
    node(
        "slotraft|publish-local",
        4,
        PUBSUB | NOSCRIPT | LOADING | STALE,
        "Delivers a message to this node's subscribers only (PUBLISH forwarded by another node).",
    ),
    node(
        "slotraft|spublish-local",
        4,
        PUBSUB | NOSCRIPT | LOADING | STALE,
        "Delivers a message to this node's shard channel subscribers only (SPUBLISH forwarded by another node).",
    ),
];

const CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    node(
        "config|get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the effective values of configuration parameters.",
    ),
    node(
        "config|set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Sets configuration parameters in-flight.",
    ),
    node(
        "config|resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Resets the server's statistics.",
    ),
    node(
        "config|rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Persists the effective configuration to file.",
    ),
    node(
        "config|help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

const fn command_sub(
    name: &'static str,
    arity: i32,
    handler: Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: LOADING | STALE,
        categories: &["slow", "connection"],
        group: "server",
        summary,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    command_sub(
        "command|count",
        2,
        Handler::Keyspace(command_count),
        "Returns a count of commands.",
    ),
    command_sub(
        "command|info",
        -2,
        Handler::Keyspace(command_info),
        "Returns information about one, multiple or all commands.",
    ),
    command_sub(
        "command|docs",
        -2,
        Handler::Keyspace(command_docs),
        "Returns documentary information about one, multiple or all commands.",
    ),
    command_sub(
        "command|getkeys",
        -3,
        Handler::Keyspace(command_getkeys),
        "Extracts the key names from an arbitrary command.",
    ),
    command_sub(
        "command|getkeysandflags",
        -3,
        Handler::Keyspace(command_getkeys_and_flags),
        "Extracts the key names and access flags for an arbitrary command.",
    ),
    command_sub(
        "command|list",
        -2,
        Handler::Keyspace(command_list),
        "Returns a list of command names.",
    ),
    command_sub(
        "command|help",
        2,
        Handler::Keyspace(command_help),
        "Returns helpful text about the different subcommands.",
    ),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "ping",
        arity: -1,
        flags: FAST,
        categories: &["fast", "connection"],
        group: "connection",
        summary: "Returns the server's liveliness response.",
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: Handler::Keyspace(ping),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "echo",
        arity: 2,
        flags: FAST,
        categories: &["fast", "connection"],
        group: "connection",
        summary: "Returns the given string.",
        handler: Handler::Keyspace(echo),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "dbsize",
        arity: 1,
        flags: READONLY | FAST,
        categories: &["keyspace", "read", "fast"],
        group: "server",
        summary: "Returns the number of keys in the database.",
        tips: &["request_policy:all_shards", "response_policy:agg_sum"],
        handler: Handler::Keyspace(dbsize),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "command",
        arity: -1,
        flags: LOADING | STALE,
        categories: &["slow", "connection"],
        group: "server",
        summary: "Returns detailed information about all commands.",
        complexity: "O(N) where N is the total number of Redis commands",
        tips: &["nondeterministic_output_order"],
        subcommands: COMMAND_SUBCOMMANDS,
        handler: Handler::Keyspace(command_all),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        group: "transactions",
        categories: &["fast", "transaction"],
        ..node(
            "multi",
            1,
            NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
            "Starts a transaction.",
        )
    },
    CommandSpec {
        group: "transactions",
        categories: &["slow", "transaction"],
        ..node(
            "exec",
            1,
            NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG,
            "Executes all commands in a transaction.",
        )
    },
    CommandSpec {
        group: "transactions",
        categories: &["fast", "transaction"],
        ..node(
            "watch",
            -2,
            NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
            "Monitors changes to keys to determine the execution of a transaction.",
        )
    },
    CommandSpec {
        group: "transactions",
        categories: &["fast", "transaction"],
        ..node(
            "unwatch",
            1,
            NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
            "Forgets about watched keys of a transaction.",
        )
    },
    CommandSpec {
        group: "transactions",
        categories: &["fast", "transaction"],
        ..node(
            "discard",
            1,
            NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
            "Discards a transaction.",
        )
    },
    connection(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH,
        "Handshakes with the Redis server.",
    ),
    connection(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH,
        "Authenticates the connection.",
    ),
    connection(
        "select",
        2,
        LOADING | STALE | FAST,
        "Changes the selected database.",
    ),
    connection(
        "quit",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        "Closes the connection.",
    ),
    CommandSpec {
        categories: &[],
        ..connection(
            "monitor",
            1,
            ADMIN | NOSCRIPT | LOADING | STALE,
            "Listens for all requests received by the server in real-time.",
        )
    },
    connection(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        "Resets the connection.",
    ),
    CommandSpec {
        name: "client",
        arity: -2,
        subcommands: CLIENT_SUBCOMMANDS,
        handler: Handler::Container,
        ..connection(
            "client",
            -2,
            0,
            "A container for client connection commands.",
        )
    },
    CommandSpec {
        name: "slotraft",
        arity: -2,
        subcommands: SLOTRAFT_SUBCOMMANDS,
        handler: Handler::Container,
        ..node(
            "slotraft",
            -2,
            0,
            "A container for slotraft's cluster commands.",
        )
    },
    CommandSpec {
        categories: &["admin", "fast", "dangerous"],
        ..node(
            "role",
            1,
            NOSCRIPT | LOADING | STALE | FAST,
            "Returns the replication role.",
        )
    },
    CommandSpec {
        categories: &["slow", "connection"],
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        ..node(
            "wait",
            3,
            NOSCRIPT,
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
        )
    },
    CommandSpec {
        categories: &["slow", "connection"],
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        ..node(
            "waitaof",
            4,
            NOSCRIPT,
            "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.",
        )
    },
    admin(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        "Synchronously saves the database(s) to disk.",
    ),
    admin(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "Asynchronously saves the database(s) to disk.",
    ),
    admin(
        "bgrewriteaof",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "Asynchronously rewrites the append-only file to disk.",
    ),
    CommandSpec {
        categories: &["admin", "fast", "dangerous"],
        tips: &["nondeterministic_output"],
        ..node(
            "lastsave",
            1,
            LOADING | STALE | FAST,
            "Returns the Unix timestamp of the last successful save to disk.",
        )
    },
    container("acl", ACL_SUBCOMMANDS, "A container for Access List Control commands."),
    container("module", MODULE_SUBCOMMANDS, "A container for module commands."),
    CommandSpec {
        categories: &["read", "fast"],
        ..node(
            "lolwut",
            -1,
            READONLY | FAST,
            "Displays computer art and the Redis version",
        )
    },
    admin(
        "replicaof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        "Configures a server as replica of another, or promotes it to a master.",
    ),
    admin(
        "slaveof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        "Sets a Redis server as a replica of another, or promotes it to being a master.",
    ),
    admin(
        "failover",
        -1,
        ADMIN | NOSCRIPT | STALE,
        "Starts a coordinated failover from a server to one of its replicas.",
    ),
    admin(
        "sync",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        "An internal command used in replication.",
    ),
    CommandSpec {
        name: "migrate",
        arity: -6,
        flags: WRITE,
        key_specs: &[
            KeySpec::single(3, key_flags::RW | key_flags::ACCESS | key_flags::DELETE),
            KeySpec {
                notes: "",
                flags: key_flags::RW | key_flags::ACCESS | key_flags::DELETE | key_flags::INCOMPLETE,
                begin: BeginSearch::Keyword {
                    keyword: "KEYS",
                    start_from: -2,
                },
                find: FindKeys::Range {
                    last_key: -1,
                    step: 1,
                    limit: 0,
                },
            },
        ],
        categories: &["keyspace", "write", "slow", "dangerous"],
        tips: &["nondeterministic_output"],
        group: "generic",
        summary: "Atomically transfers a key from one Redis instance to another.",
        since: "2.6.0",
        complexity: "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.",
        handler: Handler::Node,
        ..CommandSpec::DEFAULT
    },
    admin(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        "An internal command for configuring the replication stream.",
    ),
    admin(
        "psync",
        -3,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        "An internal command used in replication.",
    ),
    container(
        "slowlog",
        SLOWLOG_SUBCOMMANDS,
        "A container for slow log commands.",
    ),
    container(
        "latency",
        LATENCY_SUBCOMMANDS,
        "A container for latency diagnostics commands.",
    ),
    CommandSpec {
        name: "config",
        arity: -2,
        subcommands: CONFIG_SUBCOMMANDS,
        handler: Handler::Container,
        ..node(
            "config",
            -2,
            0,
            "A container for server configuration commands.",
        )
    },
    CommandSpec {
        group: "cluster",
        categories: &["connection"],
        ..node(
            "readonly",
            1,
            LOADING | STALE | FAST,
            "Enables read-only queries for a connection to a Redis Cluster replica node.",
        )
    },
    CommandSpec {
        group: "cluster",
        categories: &["connection"],
        ..node(
            "readwrite",
            1,
            LOADING | STALE | FAST,
            "Enables read-write queries for a connection to a Redis Cluster replica node.",
        )
    },
    node(
        "time",
        1,
        LOADING | STALE | FAST,
        "Returns the server time.",
    ),
    CommandSpec {
        categories: &["dangerous"],
        ..node(
            "info",
            -1,
            LOADING | STALE,
            "Returns information and statistics about the server.",
        )
    },
    node(
        "debug",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED,
        "A container for debugging commands.",
    ),
    node(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | SENTINEL | ALLOW_BUSY,
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
    ),
];

fn ping(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    match arguments.len() {
        1 => Frame::simple("PONG"),
        2 => Frame::Bulk(arguments[1].clone()),
        _ => Frame::error_owned(errors::wrong_arity("ping")),
    }
}

fn echo(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    Frame::Bulk(arguments[1].clone())
}

fn dbsize(keyspace: &mut Keyspace, context: &mut Context, _: &[Bytes]) -> Frame {
    Frame::Integer(keyspace.db(context.db).len() as i64)
}

// ---- COMMAND ---------------------------------------------------------------

fn status(text: &str) -> Frame {
    Frame::Simple(Bytes::copy_from_slice(text.as_bytes()))
}

fn bulk(text: &str) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

fn command_flag_names(spec: &CommandSpec) -> Vec<Frame> {
    let mut names: Vec<Frame> = flags::NAMES
        .iter()
        .filter(|(bit, _)| spec.flags & bit != 0)
        .map(|(_, name)| status(name))
        .collect();
    if spec.has_movable_keys() {
        names.push(status("movablekeys"));
    }
    names
}

fn key_spec_frame(spec: &KeySpec) -> Frame {
    let flag_names = key_flags::NAMES
        .iter()
        .filter(|(bit, _)| spec.flags & bit != 0)
        .map(|(_, name)| status(name))
        .collect();
    let begin = match spec.begin {
        BeginSearch::Index(index) => Frame::Map(vec![
            (bulk("type"), bulk("index")),
            (
                bulk("spec"),
                Frame::Map(vec![(bulk("index"), Frame::Integer(index as i64))]),
            ),
        ]),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => Frame::Map(vec![
            (bulk("type"), bulk("keyword")),
            (
                bulk("spec"),
                Frame::Map(vec![
                    (bulk("keyword"), bulk(keyword)),
                    (bulk("startfrom"), Frame::Integer(start_from as i64)),
                ]),
            ),
        ]),
        BeginSearch::Unknown => unknown_search(),
    };
    let find = match spec.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => Frame::Map(vec![
            (bulk("type"), bulk("range")),
            (
                bulk("spec"),
                Frame::Map(vec![
                    (bulk("lastkey"), Frame::Integer(last_key as i64)),
                    (bulk("keystep"), Frame::Integer(step as i64)),
                    (bulk("limit"), Frame::Integer(limit as i64)),
                ]),
            ),
        ]),
        FindKeys::KeyNum {
            key_num_index,
            first_key,
            step,
        } => Frame::Map(vec![
            (bulk("type"), bulk("keynum")),
            (
                bulk("spec"),
                Frame::Map(vec![
                    (bulk("keynumidx"), Frame::Integer(key_num_index as i64)),
                    (bulk("firstkey"), Frame::Integer(first_key as i64)),
                    (bulk("keystep"), Frame::Integer(step as i64)),
                ]),
            ),
        ]),
        FindKeys::Unknown => unknown_search(),
    };
    let mut fields = Vec::with_capacity(4);
    if !spec.notes.is_empty() {
        fields.push((bulk("notes"), bulk(spec.notes)));
    }
    fields.push((bulk("flags"), Frame::Set(flag_names)));
    fields.push((bulk("begin_search"), begin));
    fields.push((bulk("find_keys"), find));
    Frame::Map(fields)
}

/// A begin-search or find-keys step of type `unknown` (its spec is empty).
fn unknown_search() -> Frame {
    Frame::Map(vec![
        (bulk("type"), bulk("unknown")),
        (bulk("spec"), Frame::Map(Vec::new())),
    ])
}

/// One command's COMMAND INFO entry (Redis 7 layout, ten elements).
pub fn command_info_frame(spec: &CommandSpec) -> Frame {
    let (first, last, step) = spec.legacy_key_range();
    Frame::Array(vec![
        bulk(spec.name),
        Frame::Integer(spec.arity as i64),
        Frame::Set(command_flag_names(spec)),
        Frame::Integer(first as i64),
        Frame::Integer(last as i64),
        Frame::Integer(step as i64),
        Frame::Set(
            spec.acl_categories()
                .iter()
                .map(|category| status(&format!("@{category}")))
                .collect(),
        ),
        Frame::Set(spec.tips.iter().map(|tip| bulk(tip)).collect()),
        Frame::Array(spec.key_specs.iter().map(key_spec_frame).collect()),
        Frame::Array(spec.subcommands.iter().map(command_info_frame).collect()),
    ])
}

fn command_docs_frame(spec: &CommandSpec) -> Frame {
    let mut fields = vec![
        (bulk("summary"), bulk(spec.summary)),
        (bulk("since"), bulk(spec.since)),
        (bulk("group"), bulk(spec.group)),
        (bulk("complexity"), bulk(spec.complexity)),
    ];
    if !spec.subcommands.is_empty() {
        let subcommands = spec
            .subcommands
            .iter()
            .map(|sub| (bulk(sub.name), command_docs_frame(sub)))
            .collect();
        fields.push((bulk("subcommands"), Frame::Map(subcommands)));
    }
    Frame::Map(fields)
}

/// A command or `container|sub` name to its spec.
fn find_spec(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&byte| byte == b'|') {
        None => lookup(name),
        Some(bar) => {
            lookup(&name[..bar]).and_then(|parent| lookup_subcommand(parent, &name[bar + 1..]))
        }
    }
}

fn command_all(_: &mut Keyspace, _: &mut Context, _: &[Bytes]) -> Frame {
    Frame::Array(all_commands().map(command_info_frame).collect())
}

fn command_count(_: &mut Keyspace, _: &mut Context, _: &[Bytes]) -> Frame {
    Frame::Integer(all_commands().count() as i64)
}

fn command_info(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    if arguments.len() == 2 {
        return Frame::Array(all_commands().map(command_info_frame).collect());
    }
    Frame::Array(
        arguments[2..]
            .iter()
            .map(|name| find_spec(name).map_or(Frame::NullArray, command_info_frame))
            .collect(),
    )
}

fn command_docs(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    let specs: Vec<&CommandSpec> = if arguments.len() == 2 {
        all_commands().collect()
    } else {
        arguments[2..]
            .iter()
            .filter_map(|name| find_spec(name))
            .collect()
    };
    Frame::Map(
        specs
            .into_iter()
            .map(|spec| (bulk(spec.name), command_docs_frame(spec)))
            .collect(),
    )
}

/// The spec and key positions of the command named in `arguments[2..]`.
fn keys_of(arguments: &[Bytes]) -> Result<(&'static CommandSpec, Vec<usize>), Frame> {
    let target = &arguments[2..];
    let Some(mut spec) = lookup(&target[0]) else {
        return Err(Frame::error("ERR Invalid command specified"));
    };
    if !spec.subcommands.is_empty() {
        match target.get(1).and_then(|name| lookup_subcommand(spec, name)) {
            Some(sub) => spec = sub,
            None => return Err(Frame::error("ERR Invalid command specified")),
        }
    }
    let count = target.len() as i32;
    if (spec.arity > 0 && spec.arity != count) || (spec.arity < 0 && count < -spec.arity) {
        return Err(Frame::error(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let positions = spec
        .key_positions(target)
        .map_err(|_| Frame::error("ERR Invalid arguments specified for command"))?;
    if positions.is_empty() {
        return Err(Frame::error("ERR The command has no key arguments"));
    }
    Ok((spec, positions))
}

fn command_getkeys(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    match keys_of(arguments) {
        Ok((_, positions)) => Frame::Array(
            positions
                .into_iter()
                .map(|position| Frame::Bulk(arguments[2 + position].clone()))
                .collect(),
        ),
        Err(error) => error,
    }
}

fn command_getkeys_and_flags(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    let (spec, positions) = match keys_of(arguments) {
        Ok(found) => found,
        Err(error) => return error,
    };
    let target = &arguments[2..];
    let flag_names = |flags: u32| {
        Frame::Set(
            key_flags::NAMES
                .iter()
                .filter(|(bit, _)| flags & bit != 0)
                .map(|(_, name)| status(name))
                .collect(),
        )
    };
    // A command with its own key finder knows each key's flags.
    if let Some(get_keys) = spec.get_keys {
        return Frame::Array(
            get_keys(target)
                .into_iter()
                .map(|(position, flags)| {
                    Frame::Array(vec![
                        Frame::Bulk(target[position].clone()),
                        flag_names(flags),
                    ])
                })
                .collect(),
        );
    }
    // Attribute each position to the spec that produced it.
    let mut items = Vec::new();
    for key_spec in spec.key_specs {
        let single = CommandSpec {
            key_specs: std::slice::from_ref(key_spec),
            ..*spec
        };
        for position in single.key_positions(target).unwrap_or_default() {
            if positions.contains(&position) {
                items.push(Frame::Array(vec![
                    Frame::Bulk(target[position].clone()),
                    flag_names(key_spec.flags),
                ]));
            }
        }
    }
    Frame::Array(items)
}

fn command_list(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    let names = || {
        all_commands().flat_map(|spec| {
            std::iter::once(spec.name).chain(spec.subcommands.iter().map(|sub| sub.name))
        })
    };
    match arguments.len() {
        2 => Frame::Array(names().map(bulk).collect()),
        5 if args::is_keyword(&arguments[2], "FILTERBY") => {
            let value = &arguments[4];
            let filter = &arguments[3];
            let selected: Vec<Frame> = if args::is_keyword(filter, "PATTERN") {
                names()
                    .filter(|name| glob_match(value, name.as_bytes(), true))
                    .map(bulk)
                    .collect()
            } else if args::is_keyword(filter, "ACLCAT") {
                let category = String::from_utf8_lossy(value).to_ascii_lowercase();
                all_commands()
                    .flat_map(|spec| std::iter::once(spec).chain(spec.subcommands.iter()))
                    .filter(|spec| spec.acl_categories().contains(&category.as_str()))
                    .map(|spec| bulk(spec.name))
                    .collect()
            } else if args::is_keyword(filter, "MODULE") {
                Vec::new()
            } else {
                return Frame::error(errors::SYNTAX);
            };
            Frame::Array(selected)
        }
        _ => Frame::error(errors::SYNTAX),
    }
}

fn command_help(_: &mut Keyspace, _: &mut Context, _: &[Bytes]) -> Frame {
    let lines = [
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Prints this help.",
    ];
    Frame::Array(lines.iter().map(|line| status(line)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(words: &[&str]) -> Frame {
        let arguments: Vec<Bytes> = words
            .iter()
            .map(|word| Bytes::copy_from_slice(word.as_bytes()))
            .collect();
        let spec = crate::commands::resolve(&arguments).unwrap();
        let mut keyspace = Keyspace::new(16, 1);
        let mut context = Context::new(0, 1);
        keyspace.execute(spec, &mut context, &arguments)
    }

    #[test]
    fn getkeys_uses_key_specs() {
        assert_eq!(
            run(&["COMMAND", "GETKEYS", "DEL", "a", "b"]),
            Frame::Array(vec![Frame::bulk("a"), Frame::bulk("b")])
        );
        assert_eq!(
            run(&["COMMAND", "GETKEYS", "PING"]),
            Frame::error("ERR The command has no key arguments")
        );
        assert_eq!(
            run(&["COMMAND", "GETKEYS", "NOPE"]),
            Frame::error("ERR Invalid command specified")
        );
        assert_eq!(
            run(&["COMMAND", "GETKEYS", "GET"]),
            Frame::error("ERR Invalid number of arguments specified for command")
        );
    }

    #[test]
    fn info_has_redis_layout() {
        let Frame::Array(entries) = run(&["COMMAND", "INFO", "get", "nope"]) else {
            panic!("not an array");
        };
        assert_eq!(entries[1], Frame::NullArray);
        let Frame::Array(get) = &entries[0] else {
            panic!()
        };
        assert_eq!(get.len(), 10);
        assert_eq!(get[0], Frame::bulk("get"));
        assert_eq!(get[1], Frame::Integer(2));
        assert_eq!(
            &get[3..6],
            &[Frame::Integer(1), Frame::Integer(1), Frame::Integer(1)]
        );
    }

    #[test]
    fn every_command_has_docs() {
        for spec in all_commands() {
            assert!(!spec.summary.is_empty(), "{} has no summary", spec.name);
            for sub in spec.subcommands {
                assert!(!sub.summary.is_empty(), "{} has no summary", sub.name);
            }
        }
    }
}
