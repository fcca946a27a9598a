//! Configuration parameters: Redis's names, defaults, validation and CONFIG GET/SET
//! semantics. Values are kept in their canonical text form (memory sizes in bytes,
//! booleans as yes/no) and parsed by the typed getters.
//!
//! Redis's encoding-tuning parameters (`hash-max-listpack-entries` and friends) are
//! accepted, validated and echoed so existing tooling that sets them keeps working,
//! even where slotraft's representation does not use them.

use keyspace::glob::glob_match;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
enum Kind {
    Integer { min: i64, max: i64 },
    Memory { min: i64 },
    Bool,
    Enum(&'static [&'static str]),
    Text,
}

#[derive(Debug, Clone, Copy)]
struct Parameter {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    default: &'static str,
    mutable: bool,
}

const fn param(name: &'static str, kind: Kind, default: &'static str) -> Parameter {
    Parameter {
        name,
        alias: None,
        kind,
        default,
        mutable: true,
    }
}

const fn fixed(name: &'static str, kind: Kind, default: &'static str) -> Parameter {
    Parameter {
        mutable: false,
        ..param(name, kind, default)
    }
}

const fn aliased(
    name: &'static str,
    alias: &'static str,
    kind: Kind,
    default: &'static str,
) -> Parameter {
    Parameter {
        alias: Some(alias),
        ..param(name, kind, default)
    }
}

const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;

const fn int(min: i64, max: i64) -> Kind {
    Kind::Integer { min, max }
}

const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

const PARAMETERS: &[Parameter] = &[
    fixed("port", int(0, 65535), "6379"),
    fixed("bind", Kind::Text, "127.0.0.1"),
    fixed("dir", Kind::Text, "./data"),
    fixed("databases", int(1, INT_MAX), "16"),
    fixed("cluster-enabled", Kind::Bool, "no"),
    fixed("raft-port", int(0, 65535), "0"),
    fixed("node-id", int(0, LONG_MAX), "0"),
    fixed("group-members", Kind::Text, ""),
    fixed("raft-fsync", Kind::Bool, "yes"),
    fixed("raft-shared-entries", Kind::Bool, "yes"),
    fixed("raft-snapshot-entries", int(1, LONG_MAX), "50000"),
    fixed("raft-keep-entries", int(0, LONG_MAX), "5000"),
    fixed("raft-log-memory", Kind::Memory { min: 0 }, "67108864"),
    fixed("raft-election-timeout", int(10, INT_MAX), "300"),
    fixed("raft-heartbeat", int(0, INT_MAX), "0"),
    fixed("zone", Kind::Text, ""),
    fixed("daemonize", Kind::Bool, "no"),
    fixed("io-threads", int(1, 128), "1"),
    // Decides script outcomes, so every replica of a group must use the same
    // value: set at start-up only.
    fixed("lua-instruction-limit", int(1000, LONG_MAX), "1000000000"),
    param("maxclients", int(1, INT_MAX), "10000"),
    param("tracking-table-max-keys", int(0, LONG_MAX), "1000000"),
    param("timeout", int(0, INT_MAX), "0"),
    param("tcp-keepalive", int(0, INT_MAX), "300"),
    param("hz", int(0, INT_MAX), "10"),
    param("dynamic-hz", Kind::Bool, "yes"),
    param(
        "proto-max-bulk-len",
        Kind::Memory { min: 1024 * 1024 },
        "536870912",
    ),
    param(
        "client-query-buffer-limit",
        Kind::Memory { min: 1024 * 1024 },
        "1073741824",
    ),
    param("maxmemory", Kind::Memory { min: 0 }, "0"),
    param("maxmemory-policy", Kind::Enum(POLICIES), "noeviction"),
    param("maxmemory-samples", int(1, 64), "5"),
    param("maxmemory-eviction-tenacity", int(0, 100), "10"),
    param("lfu-log-factor", int(0, INT_MAX), "10"),
    param("lfu-decay-time", int(0, INT_MAX), "1"),
    param("active-expire-effort", int(1, 10), "1"),
    param("save", Kind::Text, "3600 1 300 100 60 10000"),
    // `yes` runs a standalone node as a group of one: every write is in its
    // Raft log before it is acknowledged. Chosen at start-up.
    fixed("appendonly", Kind::Bool, "no"),
    param(
        "appendfsync",
        Kind::Enum(&["always", "everysec", "no"]),
        "everysec",
    ),
    param("appendfilename", Kind::Text, "appendonly.aof"),
    param("dbfilename", Kind::Text, "dump.rdb"),
    param("requirepass", Kind::Text, ""),
    param("notify-keyspace-events", Kind::Text, ""),
    param(
        "client-output-buffer-limit",
        Kind::Text,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    aliased(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        int(0, LONG_MAX),
        "512",
    ),
    aliased(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        int(0, LONG_MAX),
        "64",
    ),
    aliased(
        "list-max-listpack-size",
        "list-max-ziplist-size",
        int(i32::MIN as i64, INT_MAX),
        "-2",
    ),
    param("list-compress-depth", int(0, INT_MAX), "0"),
    param("set-max-intset-entries", int(0, LONG_MAX), "512"),
    param("set-max-listpack-entries", int(0, LONG_MAX), "128"),
    param("set-max-listpack-value", int(0, LONG_MAX), "64"),
    aliased(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        int(0, LONG_MAX),
        "128",
    ),
    aliased(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        int(0, LONG_MAX),
        "64",
    ),
    param("hll-sparse-max-bytes", int(0, LONG_MAX), "3000"),
    param("stream-node-max-bytes", Kind::Memory { min: 0 }, "4096"),
    param("stream-node-max-entries", int(0, LONG_MAX), "100"),
    param("activerehashing", Kind::Bool, "yes"),
    param("lazyfree-lazy-eviction", Kind::Bool, "no"),
    param("lazyfree-lazy-expire", Kind::Bool, "no"),
    param("lazyfree-lazy-server-del", Kind::Bool, "no"),
    param("lazyfree-lazy-user-del", Kind::Bool, "no"),
    param("lazyfree-lazy-user-flush", Kind::Bool, "no"),
    aliased(
        "busy-reply-threshold",
        "lua-time-limit",
        int(0, LONG_MAX),
        "5000",
    ),
    param("slowlog-log-slower-than", int(-1, LONG_MAX), "10000"),
    param("slowlog-max-len", int(0, LONG_MAX), "128"),
    param("latency-monitor-threshold", int(0, LONG_MAX), "0"),
    param(
        "loglevel",
        Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]),
        "notice",
    ),
    param("protected-mode", Kind::Bool, "yes"),
    param("cluster-node-timeout", int(0, LONG_MAX), "15000"),
    param("cluster-require-full-coverage", Kind::Bool, "yes"),
    param("cluster-allow-reads-when-down", Kind::Bool, "no"),
];

fn find(name: &str) -> Option<&'static Parameter> {
    PARAMETERS
        .iter()
        .find(|parameter| parameter.name == name || parameter.alias == Some(name))
}

/// Parses `1gb`, `512mb`, `100k`, `42` into bytes, as Redis's memtoull.
fn parse_memory(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let units: &[(&str, i64)] = &[
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1_000),
        ("b", 1),
    ];
    for (suffix, multiplier) in units {
        if let Some(number) = lower.strip_suffix(suffix) {
            return number.parse::<i64>().ok()?.checked_mul(*multiplier);
        }
    }
    lower.parse().ok()
}

/// Validates `value` for `parameter` and returns its canonical text, or the reason
/// Redis gives.
fn canonical(parameter: &Parameter, value: &str) -> Result<String, String> {
    if parameter.name == "notify-keyspace-events" {
        return keyspace::notify::parse_flags(value)
            .map(keyspace::notify::flags_text)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string());
    }
    match parameter.kind {
        Kind::Integer { min, max } => {
            let number: i64 = value
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if number < min || number > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(number.to_string())
        }
        Kind::Memory { min } => {
            let number =
                parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            if number < min {
                return Err(format!(
                    "argument must be between {min} and {LONG_MAX} inclusive"
                ));
            }
            Ok(number.to_string())
        }
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Enum(choices) => {
            let lower = value.to_ascii_lowercase();
            if choices.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &choices.join(", "))
            }
        }
        Kind::Text => Ok(value.to_string()),
    }
}

/// The live configuration.
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// Values read for every connection round or request, parsed once per
    /// change instead of looked up by name each time.
    hot: Hot,
}

#[derive(Debug, Clone, Copy, Default)]
struct Hot {
    idle_seconds: i64,
    query_limit: usize,
    max_bulk: usize,
}

impl Default for Config {
    fn default() -> Self {
        let mut config = Config {
            values: PARAMETERS
                .iter()
                .map(|parameter| (parameter.name, parameter.default.to_string()))
                .collect(),
            hot: Hot::default(),
        };
        config.refresh();
        config
    }
}

impl Config {
    /// Recomputes [`Hot`] after a change.
    fn refresh(&mut self) {
        self.hot = Hot {
            idle_seconds: self.integer("timeout"),
            query_limit: self.integer("client-query-buffer-limit") as usize,
            max_bulk: self.integer("proto-max-bulk-len") as usize,
        };
    }

    /// Sets a parameter at start-up (command line): immutable ones allowed.
    pub fn set_startup(&mut self, name: &str, value: &str) -> Result<(), String> {
        let parameter = find(&name.to_ascii_lowercase())
            .ok_or_else(|| format!("unknown configuration option '{name}'"))?;
        let value = canonical(parameter, value)
            .map_err(|reason| format!("invalid value for '{name}': {reason}"))?;
        self.values.insert(parameter.name, value);
        self.refresh();
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        let parameter = find(name)?;
        self.values.get(parameter.name).map(String::as_str)
    }

    /// CONFIG GET: every parameter name or alias matching any pattern, once.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut found = BTreeMap::new();
        for parameter in PARAMETERS {
            for name in std::iter::once(parameter.name).chain(parameter.alias) {
                if patterns
                    .iter()
                    .any(|pattern| glob_match(pattern, name.as_bytes(), true))
                {
                    found.insert(name.to_string(), self.values[parameter.name].clone());
                }
            }
        }
        found.into_iter().collect()
    }

    /// CONFIG SET with one or more pairs, applied all or nothing. The error is the
    /// whole Redis error line.
    pub fn set_many(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut staged: Vec<(&'static str, String)> = Vec::new();
        for (raw_name, raw_value) in pairs {
            let name = String::from_utf8_lossy(raw_name).to_ascii_lowercase();
            let Some(parameter) = find(&name) else {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            let failed = |reason: &str| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
            };
            if !parameter.mutable {
                return Err(failed("can't set immutable config"));
            }
            if staged
                .iter()
                .any(|(staged_name, _)| *staged_name == parameter.name)
            {
                return Err(failed("duplicate parameter"));
            }
            let value = canonical(parameter, &String::from_utf8_lossy(raw_value))
                .map_err(|reason| failed(&reason))?;
            staged.push((parameter.name, value));
        }
        for (name, value) in staged {
            self.values.insert(name, value);
        }
        self.refresh();
        Ok(())
    }

    pub fn integer(&self, name: &str) -> i64 {
        self.get(name)
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    }

    fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("yes")
    }

    /// Hands the slow log's and latency monitor's thresholds to `monitors`.
    pub fn configure_monitors(&self, monitors: &crate::stats::Monitors) {
        monitors.configure(
            self.integer("slowlog-log-slower-than"),
            self.integer("slowlog-max-len").max(0) as u64,
            self.integer("latency-monitor-threshold").max(0) as u64,
        );
    }

    pub fn port(&self) -> u16 {
        self.integer("port") as u16
    }

    pub fn bind(&self) -> &str {
        self.get("bind").unwrap_or("127.0.0.1")
    }

    pub fn dir(&self) -> &str {
        self.get("dir").unwrap_or(".")
    }

    pub fn databases(&self) -> usize {
        self.integer("databases") as usize
    }

    pub fn cluster_enabled(&self) -> bool {
        self.flag("cluster-enabled")
    }

    pub fn raft_port(&self) -> u16 {
        self.integer("raft-port") as u16
    }

    pub fn node_id(&self) -> u64 {
        self.integer("node-id") as u64
    }

    /// `ID=HOST:PORT@RAFTPORT,...`: the replicas of this node's shard group.
    pub fn group_members(&self) -> &str {
        self.get("group-members").unwrap_or("")
    }

    /// fsync every Raft commit batch (default) or leave flushing to the OS.
    pub fn raft_fsync(&self) -> bool {
        self.flag("raft-fsync")
    }

    /// Short runs of writes from different clients may share one log entry
    /// (`Op::Batch`). Replicas of a version without it cannot read such an
    /// entry: `no` while a group still has any.
    pub fn raft_shared_entries(&self) -> bool {
        self.flag("raft-shared-entries")
    }

    /// Applied entries between snapshots (log compaction).
    pub fn raft_snapshot_entries(&self) -> u64 {
        self.integer("raft-snapshot-entries") as u64
    }

    /// Entries kept in the log behind a snapshot.
    pub fn raft_keep_entries(&self) -> u64 {
        self.integer("raft-keep-entries") as u64
    }

    /// Bound on the bytes a group's log holds in memory (0: none): over it,
    /// a snapshot comes early or covered entries are purged.
    pub fn raft_log_memory(&self) -> u64 {
        self.integer("raft-log-memory") as u64
    }

    /// Minimum election timeout in milliseconds (the maximum is twice it).
    pub fn raft_election_timeout(&self) -> u64 {
        self.integer("raft-election-timeout") as u64
    }

    /// Heartbeat interval in milliseconds; 0 (the default) takes a third of
    /// the election timeout. Each group's Raft core also ticks about five
    /// times per heartbeat interval, on every replica, so on a node hosting
    /// many groups this interval sets most of what an idle node costs.
    pub fn raft_heartbeat(&self) -> u64 {
        match self.integer("raft-heartbeat") as u64 {
            0 => (self.raft_election_timeout() / 3).max(1),
            explicit => explicit,
        }
    }

    pub fn maxclients(&self) -> usize {
        self.integer("maxclients") as usize
    }

    pub fn hz(&self) -> u64 {
        self.integer("hz").clamp(1, 500) as u64
    }

    pub fn proto_max_bulk_len(&self) -> usize {
        self.hot.max_bulk
    }

    pub fn client_query_buffer_limit(&self) -> usize {
        self.hot.query_limit
    }

    pub fn requirepass(&self) -> Option<&str> {
        self.get("requirepass")
            .filter(|password| !password.is_empty())
    }

    pub fn lfu_policy(&self) -> bool {
        self.get("maxmemory-policy")
            .is_some_and(|policy| policy.ends_with("lfu"))
    }

    pub fn lfu_log_factor(&self) -> u32 {
        self.integer("lfu-log-factor") as u32
    }

    pub fn lfu_decay_time(&self) -> u32 {
        self.integer("lfu-decay-time") as u32
    }

    /// `lua-instruction-limit`: Lua VM instructions one script may run.
    pub fn lua_instruction_limit(&self) -> u64 {
        self.integer("lua-instruction-limit") as u64
    }

    /// `busy-reply-threshold` (`lua-time-limit`): after this long a running
    /// script makes other clients' commands answer BUSY (0: never).
    pub fn busy_reply_threshold_ms(&self) -> u64 {
        self.integer("busy-reply-threshold").max(0) as u64
    }

    /// `timeout`: close a client idle this long (0 = never).
    pub fn idle_timeout(&self) -> Option<std::time::Duration> {
        let seconds = self.hot.idle_seconds;
        (seconds > 0).then(|| std::time::Duration::from_secs(seconds as u64))
    }

    pub fn io_threads(&self) -> usize {
        self.integer("io-threads").max(1) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_defaults_to_a_third_of_the_election_timeout() {
        let mut config = Config::default();
        assert_eq!(config.get("raft-heartbeat"), Some("0"));
        assert_eq!(config.raft_heartbeat(), 100);
        config.set_startup("raft-election-timeout", "150").unwrap();
        assert_eq!(config.raft_heartbeat(), 50);
        config.set_startup("raft-heartbeat", "20").unwrap();
        assert_eq!(config.raft_heartbeat(), 20);
        config.set_startup("raft-election-timeout", "10").unwrap();
        config.set_startup("raft-heartbeat", "0").unwrap();
        assert_eq!(config.raft_heartbeat(), 3);
    }

    #[test]
    fn get_set_with_redis_texts() {
        let mut config = Config::default();
        assert_eq!(
            config.matching(&[b"maxmemory"]),
            vec![("maxmemory".to_string(), "0".to_string())]
        );
        config.set_many(&[(b"maxmemory", b"1gb")]).unwrap();
        assert_eq!(config.get("maxmemory"), Some("1073741824"));
        assert_eq!(
            config.set_many(&[(b"nope", b"1")]).unwrap_err(),
            "ERR Unknown option or number of arguments for CONFIG SET - 'nope'"
        );
        assert_eq!(
            config.set_many(&[(b"databases", b"4")]).unwrap_err(),
            "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
        );
        // All or nothing.
        assert!(config
            .set_many(&[(b"hz", b"20"), (b"maxclients", b"x")])
            .is_err());
        assert_eq!(config.get("hz"), Some("10"));
        config
            .set_many(&[(b"hash-max-ziplist-entries", b"256")])
            .unwrap();
        assert_eq!(config.get("hash-max-listpack-entries"), Some("256"));
        let both = config.matching(&[b"hash-max-*-entries"]);
        assert_eq!(both.len(), 2);
    }
}
