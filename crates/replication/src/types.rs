//! The openraft type configuration and the log payload of a shard group.

use std::fmt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use resp::{Frame, Protocol};
use serde::{Deserialize, Serialize};

/// Identifies a node across the whole deployment.
pub type NodeId = u64;

/// Identifies one Raft group (a shard's replica set) on a node.
pub type GroupId = u64;

/// Where a node listens: its Raft (gRPC) address and its RESP address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddr {
    /// `host:port` of the node-to-node gRPC listener.
    pub raft: String,
    /// `host:port` of the client-facing RESP listener (used in MOVED redirects).
    pub resp: String,
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "raft={} resp={}", self.raft, self.resp)
    }
}

openraft::declare_raft_types!(
    /// The type configuration shared by every Raft group of slotraft. An
    /// entry's request is shared, not copied: openraft clones entries to
    /// send them to each follower and to apply them, and a copy of a
    /// pipelined batch of commands cost allocations per command. Shared or
    /// not, it is encoded the same.
    pub TypeConfig:
        D = Arc<Request>,
        R = Response,
        NodeId = NodeId,
        Node = NodeAddr,
        AsyncRuntime = crate::runtime::SeededTokio,
);

/// A log entry's application payload. The leader stamps time and seed; every
/// replica applies it with exactly these inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The leader's wall clock, Unix milliseconds, when it proposed the entry.
    pub now_ms: u64,
    /// Seed for everything random in the entry (SPOP, RANDOMKEY, Lua ...).
    pub seed: u64,
    pub op: Op,
    /// This request's own encoding, made once by the leader that proposes
    /// it for its log record and the appends that carry it to the followers
    /// (see [`crate::codec`]); never encoded itself.
    #[serde(skip)]
    encoding: EncodingCache,
}

/// A request's encoding, kept from its proposal until the entry applies: a
/// follower that needs it later (one that lags) has it made again, so the
/// log's memory holds it only while entries are in flight.
#[derive(Default)]
struct EncodingCache(std::sync::Mutex<Option<Bytes>>);

impl EncodingCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Bytes>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A copy starts without the encoding: it is a new value.
impl Clone for EncodingCache {
    fn clone(&self) -> Self {
        EncodingCache::default()
    }
}

/// The encoding follows from the fields: it never tells two requests apart.
impl PartialEq for EncodingCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for EncodingCache {}

impl fmt::Debug for EncodingCache {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("..")
    }
}

/// What an entry does to the state machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Commands executed in order, atomically, against database `db`, with
    /// replies shaped for `resp3`.
    Exec {
        db: u32,
        resp3: bool,
        #[serde(deserialize_with = "shared::commands")]
        commands: Vec<Vec<Bytes>>,
        /// WATCHed keys with the fingerprint they had when watched
        /// (`Keyspace::watch_fingerprint`); if any differs when the entry
        /// applies, no command runs and the entry answers `aborted`.
        watched: Vec<(Bytes, Bytes)>,
    },
    /// Active expiry: delete keys whose deadline is before the entry's time.
    ExpireTick,
    /// Metadata group: replace the cluster topology (the `cluster` crate's
    /// encoding) with `topology` at `epoch`, if the stored one is still at
    /// `expected_epoch` (see [`crate::meta`]).
    PutTopology {
        expected_epoch: u64,
        epoch: u64,
        topology: Bytes,
    },
    /// Metadata group: `node` leads shard `shard` in Raft term `term` (kept
    /// only if later than the recorded leadership in (term, node) order).
    PutLeader { shard: u64, node: u64, term: u64 },
    /// Shard: set slots' migration state (0 serving, 1 frozen: writes
    /// answer TRYAGAIN, 2 gone: everything answers TRYAGAIN), or (3) start
    /// recording the keys changed in served slots that are being copied
    /// away (`keyspace::slot_changes`).
    SlotState { slots: Vec<u16>, state: u8 },
    /// Shard: delete every key of slots that moved away and mark them gone.
    DropSlot { slots: Vec<u16> },
    /// Shard: delete keys the leader chose to evict under `maxmemory`
    /// (database, key), each if still present.
    Evict { keys: Vec<(u32, Bytes)> },
    /// [`Op::Exec`] proposed while the leader was over `maxmemory` with
    /// nothing left to evict (Redis's pre-command OOM state): scripts run
    /// with `Context::out_of_memory`, on every replica alike.
    ExecOutOfMemory {
        db: u32,
        resp3: bool,
        #[serde(deserialize_with = "shared::commands")]
        commands: Vec<Vec<Bytes>>,
        watched: Vec<(Bytes, Bytes)>,
    },
    /// Several proposals made at once on the leader (by different clients),
    /// carried by one entry: each `(seed, op)` applies in order exactly as it
    /// would alone, at the entry's time, and gets its own [`Response`] in
    /// `Response::parts`. Only [`Op::Exec`] without scripts is batched.
    Batch(Vec<(u64, Op)>),
    /// Shard: as [`Op::DropSlot`] for the slots that are closed (gone) when
    /// it applies, deleting at most `limit` keys (over all the slots): a slot
    /// of many keys is deleted in several entries, so no one entry keeps the
    /// replicas from everything else for long. Slots in another state are
    /// left as they are.
    DropSlotKeys { slots: Vec<u16>, limit: u32 },
}

impl Op {
    /// The protocol an [`Op::Exec`]'s replies are shaped for.
    pub fn protocol(&self) -> Protocol {
        match self {
            Op::Exec { resp3: true, .. } | Op::ExecOutOfMemory { resp3: true, .. } => {
                Protocol::Resp3
            }
            _ => Protocol::Resp2,
        }
    }
}

impl Request {
    pub fn new(now_ms: u64, seed: u64, op: Op) -> Request {
        Request {
            now_ms,
            seed,
            op,
            encoding: EncodingCache::default(),
        }
    }

    pub fn protocol(&self) -> Protocol {
        self.op.protocol()
    }

    /// Makes and keeps this request's encoding (a leader proposing it: the
    /// log record and every follower's append use the same bytes).
    pub fn keep_encoding(&self) {
        let mut kept = self.encoding.lock();
        if kept.is_none() {
            *kept = Some(Bytes::from(crate::codec::encode(self)));
        }
    }

    /// Keeps `bytes`, this request's encoding as received (a follower: its
    /// log record uses them instead of encoding the request again).
    pub(crate) fn keep_received_encoding(&self, bytes: Bytes) {
        *self.encoding.lock() = Some(bytes);
    }

    /// Appends this request's encoding to `out`: the kept one if there is
    /// one, else made now and not kept.
    pub fn append_encoding(&self, mut out: Vec<u8>) -> Vec<u8> {
        if let Some(bytes) = &*self.encoding.lock() {
            out.extend_from_slice(bytes);
            return out;
        }
        crate::codec::encode_into(self, out)
    }

    /// Gives up the kept encoding (the entry has applied here; on a leader,
    /// a majority has it).
    pub fn retire_encoding(&self) {
        *self.encoding.lock() = None;
    }

    /// The length of the kept encoding, if one is kept.
    pub fn kept_len(&self) -> Option<usize> {
        self.encoding.lock().as_ref().map(Bytes::len)
    }
}

impl fmt::Display for Request {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.op {
            Op::Exec { db, commands, .. } | Op::ExecOutOfMemory { db, commands, .. } => {
                write!(
                    formatter,
                    "exec db={db} commands={} t={}",
                    commands.len(),
                    self.now_ms
                )
            }
            Op::ExpireTick => write!(formatter, "expire-tick t={}", self.now_ms),
            Op::PutTopology { epoch, .. } => write!(formatter, "put-topology epoch={epoch}"),
            Op::PutLeader { shard, node, term } => {
                write!(
                    formatter,
                    "put-leader shard={shard} node={node} term={term}"
                )
            }
            Op::SlotState { slots, state } => {
                write!(formatter, "slot-state {} slots={state}", slots.len())
            }
            Op::DropSlot { slots } => write!(formatter, "drop-slot {} slots", slots.len()),
            Op::DropSlotKeys { slots, limit } => {
                write!(formatter, "drop-slot {} slots limit={limit}", slots.len())
            }
            Op::Evict { keys } => write!(formatter, "evict {} keys", keys.len()),
            Op::Batch(parts) => write!(formatter, "batch {} parts t={}", parts.len(), self.now_ms),
        }
    }
}

/// The replies of an applied entry, one per command, handed to the client that
/// proposed it. Responses never cross the network; their serde form (RESP3
/// bytes) exists because openraft requires it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    pub replies: Vec<Frame>,
    /// Set when the entry's last command is a blocking command that found
    /// nothing to serve: what it waits for. Local to the proposing replica
    /// (never serialized).
    pub block: Option<keyspace::BlockOn>,
    /// A WATCHed key had changed: nothing ran (local, never serialized).
    pub aborted: bool,
    /// An [`Op::Batch`]'s responses, one per part (local, never serialized).
    pub parts: Vec<Response>,
}

impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = BytesMut::new();
        for reply in &self.replies {
            resp::encode(reply, Protocol::Resp3, &mut out);
        }
        serializer.serialize_bytes(&out)
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes: Vec<u8> = serde::de::Deserialize::deserialize(deserializer)?;
        let mut replies = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match resp::parse_reply(rest) {
                Ok(Some((frame, used))) => {
                    replies.push(frame);
                    rest = &rest[used..];
                }
                _ => return Err(serde::de::Error::custom("malformed response frames")),
            }
        }
        Ok(Response {
            replies,
            ..Response::default()
        })
    }
}

pub type Entry = openraft::alias::EntryOf<TypeConfig>;
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;

/// Decoding commands' arguments as views of the bytes they were decoded from,
/// instead of copies, when [`shared::Source`] names those bytes (a follower
/// decoding an append: an argument costs no allocation and no copy).
pub(crate) mod shared {
    use std::cell::RefCell;
    use std::fmt;

    use bytes::Bytes;
    use serde::de::{Deserializer, SeqAccess, Visitor};

    thread_local! {
        static SOURCE: RefCell<Option<Bytes>> = const { RefCell::new(None) };
    }

    /// While it lives, arguments decoded on this thread from within `bytes`
    /// are views of it; the previous source is back when it drops.
    pub(crate) struct Source(Option<Bytes>);

    impl Source {
        pub(crate) fn set(bytes: &Bytes) -> Source {
            Source(SOURCE.with(|source| source.replace(Some(bytes.clone()))))
        }
    }

    impl Drop for Source {
        fn drop(&mut self) {
            let previous = self.0.take();
            SOURCE.with(|source| *source.borrow_mut() = previous);
        }
    }

    /// `data` as a view of the source if it lies within it, else a copy.
    fn argument(data: &[u8]) -> Bytes {
        SOURCE.with(|source| match &*source.borrow() {
            Some(source) if within(source, data) => source.slice_ref(data),
            _ => Bytes::copy_from_slice(data),
        })
    }

    fn within(source: &Bytes, data: &[u8]) -> bool {
        let start = source.as_ptr() as usize;
        let at = data.as_ptr() as usize;
        !data.is_empty() && at >= start && at + data.len() <= start + source.len()
    }

    struct Argument;

    impl<'de> Visitor<'de> for Argument {
        type Value = Bytes;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("bytes")
        }

        fn visit_borrowed_bytes<E>(self, data: &'de [u8]) -> Result<Bytes, E> {
            Ok(argument(data))
        }

        fn visit_bytes<E>(self, data: &[u8]) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(data))
        }

        fn visit_byte_buf<E>(self, data: Vec<u8>) -> Result<Bytes, E> {
            Ok(Bytes::from(data))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
            let mut data = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(byte) = seq.next_element::<u8>()? {
                data.push(byte);
            }
            Ok(Bytes::from(data))
        }
    }

    struct ArgumentSeed;

    impl<'de> serde::de::DeserializeSeed<'de> for ArgumentSeed {
        type Value = Bytes;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Bytes, D::Error> {
            deserializer.deserialize_bytes(Argument)
        }
    }

    /// One command: its arguments.
    struct Command;

    impl<'de> Visitor<'de> for Command {
        type Value = Vec<Bytes>;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("a command's arguments")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Bytes>, A::Error> {
            let mut arguments = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            while let Some(argument) = seq.next_element_seed(ArgumentSeed)? {
                arguments.push(argument);
            }
            Ok(arguments)
        }
    }

    struct CommandSeed;

    impl<'de> serde::de::DeserializeSeed<'de> for CommandSeed {
        type Value = Vec<Bytes>;

        fn deserialize<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Vec<Bytes>, D::Error> {
            deserializer.deserialize_seq(Command)
        }
    }

    struct Commands;

    impl<'de> Visitor<'de> for Commands {
        type Value = Vec<Vec<Bytes>>;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("commands")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Vec<Bytes>>, A::Error> {
            let mut commands = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            while let Some(command) = seq.next_element_seed(CommandSeed)? {
                commands.push(command);
            }
            Ok(commands)
        }
    }

    /// The `commands` of an `Op::Exec`, arguments shared with the source.
    pub(crate) fn commands<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Vec<Bytes>>, D::Error> {
        deserializer.deserialize_seq(Commands)
    }
}
