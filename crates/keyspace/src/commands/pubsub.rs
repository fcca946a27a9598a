//! The Pub/Sub commands' rows. Subscriptions are connection state and
//! messages never touch the keyspace, so the node runs them all.

use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};

const PUBSUB_SLOW: &[&str] = &["pubsub", "slow"];
const PUBSUB_FAST: &[&str] = &["pubsub", "fast"];
/// Shard channels are placed like keys (their slot routes the command) but
/// are not keys.
const SHARD_CHANNELS: &[KeySpec] = &[KeySpec::range(1, -1, 1, NOT_KEY)];
const SHARD_CHANNEL: &[KeySpec] = &[KeySpec::single(1, NOT_KEY)];

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i32,
    flags: u64,
    key_specs: &'static [KeySpec],
    categories: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        key_specs,
        categories,
        group: "pubsub",
        summary,
        since,
        complexity,
        handler: Handler::Node,
        ..CommandSpec::DEFAULT
    }
}

const fn sub(
    name: &'static str,
    arity: i32,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    row(
        name,
        arity,
        PUBSUB | LOADING | STALE,
        &[],
        PUBSUB_SLOW,
        summary,
        since,
        complexity,
    )
}

const SUBSCRIPTION: u64 = PUBSUB | NOSCRIPT | LOADING | STALE;

const PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "pubsub|channels",
        -2,
        "Returns the active channels.",
        "2.8.0",
        "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
    ),
    sub(
        "pubsub|help",
        2,
        "Returns helpful text about the different subcommands.",
        "6.2.0",
        "O(1)",
    ),
    sub(
        "pubsub|numpat",
        2,
        "Returns a count of unique pattern subscriptions.",
        "2.8.0",
        "O(1)",
    ),
    sub(
        "pubsub|numsub",
        -2,
        "Returns a count of subscribers to channels.",
        "2.8.0",
        "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
    ),
    sub(
        "pubsub|shardchannels",
        -2,
        "Returns the active shard channels.",
        "7.0.0",
        "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
    ),
    sub(
        "pubsub|shardnumsub",
        -2,
        "Returns the count of subscribers of shard channels.",
        "7.0.0",
        "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
    ),
];

pub const COMMANDS: &[CommandSpec] = &[
    row(
        "psubscribe",
        -2,
        SUBSCRIPTION,
        &[],
        PUBSUB_SLOW,
        "Listens for messages published to channels that match one or more patterns.",
        "2.0.0",
        "O(N) where N is the number of patterns to subscribe to.",
    ),
    row(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        &[],
        PUBSUB_FAST,
        "Posts a message to a channel.",
        "2.0.0",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
    ),
    CommandSpec {
        name: "pubsub",
        arity: -2,
        categories: &["slow"],
        group: "pubsub",
        summary: "A container for Pub/Sub commands.",
        since: "2.8.0",
        complexity: "Depends on subcommand.",
        subcommands: PUBSUB_SUBCOMMANDS,
        handler: Handler::Container,
        ..CommandSpec::DEFAULT
    },
    row(
        "punsubscribe",
        -1,
        SUBSCRIPTION,
        &[],
        PUBSUB_SLOW,
        "Stops listening to messages published to channels that match one or more patterns.",
        "2.0.0",
        "O(N) where N is the number of patterns to unsubscribe.",
    ),
    row(
        "spublish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        SHARD_CHANNEL,
        PUBSUB_FAST,
        "Post a message to a shard channel",
        "7.0.0",
        "O(N) where N is the number of clients subscribed to the receiving shard channel.",
    ),
    row(
        "ssubscribe",
        -2,
        SUBSCRIPTION,
        SHARD_CHANNELS,
        PUBSUB_SLOW,
        "Listens for messages published to shard channels.",
        "7.0.0",
        "O(N) where N is the number of shard channels to subscribe to.",
    ),
    row(
        "subscribe",
        -2,
        SUBSCRIPTION,
        &[],
        PUBSUB_SLOW,
        "Listens for messages published to channels.",
        "2.0.0",
        "O(N) where N is the number of channels to subscribe to.",
    ),
    row(
        "sunsubscribe",
        -1,
        SUBSCRIPTION,
        SHARD_CHANNELS,
        PUBSUB_SLOW,
        "Stops listening to messages posted to shard channels.",
        "7.0.0",
        "O(N) where N is the number of shard channels to unsubscribe.",
    ),
    row(
        "unsubscribe",
        -1,
        SUBSCRIPTION,
        &[],
        PUBSUB_SLOW,
        "Stops listening to messages posted to channels.",
        "2.0.0",
        "O(N) where N is the number of channels to unsubscribe.",
    ),
];
