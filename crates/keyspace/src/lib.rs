//! The pure keyspace: databases, values, expiry and command execution.
//!
//! **Architecture Invariant:** nothing in this crate reads a clock, draws global
//! randomness, spawns, blocks or does I/O. Time and randomness arrive in a
//! [`Context`]; the same commands with the same contexts produce the same replies and
//! the same state on every replica.

pub mod args;
pub mod command;
pub mod commands;
pub mod db;
pub mod dict;
pub mod digest;
pub mod dump;
pub mod errors;
pub mod evict;
pub mod glob;
pub mod hash;
pub mod hll;
pub mod indexed;
mod keyspace;
pub mod list;
pub mod notify;
mod rank_tree;
pub mod rdb;
pub mod rng;
pub mod scripts;
pub mod set;
mod sip;
pub mod slot_changes;
pub mod slot_index;
pub mod slots;
pub mod snapshot;
mod snapshot_copies;
pub mod stream;
#[cfg(test)]
mod testing;
pub mod value;
pub mod zset;

pub use command::{CommandSpec, Handler};
pub use db::{Db, DbLayout, Entry};
pub use keyspace::{
    BlockOn, Context, Invalidations, Keyspace, KeyspaceConfig, Published, SlotState, Stats,
    DEFAULT_SCRIPT_INSTRUCTION_LIMIT,
};
pub use rng::Rng;
pub use scripts::{
    RunningFunction, ScriptActivity, ScriptEngine, ScriptEngineFactory, ScriptStore, ScriptingSetup,
};
pub use slots::{command_slot, SlotError};
pub use value::{HashValue, ListValue, SetValue, StreamValue, StringValue, Value, ZSetValue};

use bytes::Bytes;
use resp::Frame;

/// The reply to a command refused because of its slot's migration state
/// (Redis's text; clients retry on the TRYAGAIN prefix).
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

impl Keyspace {
    /// Runs a resolved command (see [`commands::resolve`]). Node-handled commands
    /// are refused here; the node runs them itself.
    ///
    /// A command whose keys are in a [`SlotState::Frozen`] slot is answered
    /// [`TRYAGAIN`] without running when it is a write; in a
    /// [`SlotState::Gone`] slot, whatever it is. Keyless writes (FLUSHALL,
    /// FLUSHDB) are refused while any slot is frozen. Keyless reads, and
    /// commands whose keys hash to different slots (the node refuses those
    /// first), run.
    pub fn execute(
        &mut self,
        spec: &CommandSpec,
        context: &mut Context,
        arguments: &[Bytes],
    ) -> Frame {
        if self.config.notify_flags != 0 || self.recording_expired || self.config.tracking_on() {
            return self.execute_notifying(spec, context, arguments);
        }
        self.execute_quietly(spec, context, arguments)
    }

    /// Runs a command and records the keyspace events it raises (see
    /// [`notify`]).
    fn execute_notifying(
        &mut self,
        spec: &CommandSpec,
        context: &mut Context,
        arguments: &[Bytes],
    ) -> Frame {
        let tracking = self.config.tracking_on();
        let on = notify::publishes(self.config.notify_flags) || tracking;
        if on != self.recording_expired {
            for db in &mut self.dbs {
                db.record_expired(on);
            }
            self.recording_expired = on;
        }
        if !on {
            return self.execute_quietly(spec, context, arguments);
        }
        let db = context.db;
        let wants_misses =
            !spec.is_write() && self.config.notify_flags & notify::class::KEY_MISS != 0;
        // Each key with its index among the command's keys. A write raises
        // events only for the keys it may change, as Redis does: none for the
        // keys it only reads (SINTERSTORE's or BITOP's sources, COPY's).
        let keys: Vec<(usize, Bytes)> = if spec.is_write() || wants_misses {
            spec.key_positions_with_flags(arguments)
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .filter(|(_, (_, flags))| {
                    !spec.is_write()
                        || flags & command::key_flags::RO == 0
                        || spec.group == "stream"
                })
                .filter_map(|(index, (position, _))| {
                    arguments.get(position).cloned().map(|key| (index, key))
                })
                .collect()
        } else {
            Vec::new()
        };
        let now_ms = context.now_ms;
        let existed: Vec<bool> = keys
            .iter()
            .map(|(_, key)| self.dbs[db].peek(key, now_ms).is_some())
            .collect();
        let dirty = self.stats.dirty;
        let misses = self.stats.keyspace_misses;
        let reply = self.execute_quietly(spec, context, arguments);
        self.collect_expired();
        if wants_misses {
            // A read that missed: `keymiss` for each of its keys not there.
            if self.stats.keyspace_misses != misses {
                for (_, key) in &keys {
                    if self.dbs[db].peek(key, now_ms).is_none() {
                        self.record_event(db, notify::class::KEY_MISS, "keymiss", key);
                    }
                }
            }
            return reply;
        }
        if tracking && spec.is_write() && !matches!(reply, Frame::Error(_)) {
            if matches!(spec.name, "flushall" | "flushdb") {
                // Redis tells every tracking client after a flush, even of
                // an empty database.
                self.invalidations.flushed = true;
            } else if self.stats.dirty != dirty || spec.group == "stream" {
                // A key absent before and after was not changed (DEL of a
                // missing key among present ones).
                for ((_, key), existed) in keys.iter().zip(&existed) {
                    if *existed || self.dbs[db].peek(key, now_ms).is_some() {
                        self.invalidations.push(key, true);
                    }
                }
            }
        }
        if spec.group != "stream" && (matches!(reply, Frame::Error(_)) || self.stats.dirty == dirty)
        {
            return reply;
        }
        let class = notify::class_of(spec.group);
        let stream_events = std::mem::take(&mut self.stream_events);
        if spec.group == "stream" {
            // Stream commands name their own events (one key each).
            if let Some((_, key)) = keys.first() {
                if !existed.first().copied().unwrap_or(true)
                    && self.dbs[db].peek(key, now_ms).is_some()
                {
                    self.record_event(db, notify::class::NEW, "new", key);
                }
            }
            for (name, key) in stream_events {
                self.record_event(db, class, name, &key);
            }
            return reply;
        }
        let mut order: Vec<usize> = (0..keys.len()).collect();
        if notify::destination_first(spec.name) {
            order.reverse();
        }
        for at in order {
            let (index, key) = (&keys[at].0, &keys[at].1);
            let (index, existed) = (*index, existed[at]);
            let exists = self.dbs[db].peek(key, now_ms).is_some();
            if !existed && !exists {
                continue;
            }
            if !existed {
                self.record_event(db, notify::class::NEW, "new", key);
            }
            if existed && !exists && notify::replaces_destination(spec.name) {
                // A store whose result is empty deletes its destination,
                // and Redis notifies only that.
                self.record_event(db, notify::class::GENERIC, "del", key);
                continue;
            }
            let name = notify::event_name(spec.name, index, arguments);
            self.record_event(db, class, name, key);
            // A key that moved away (RENAME, MOVE) was not deleted.
            if existed && !exists && !matches!(name, "del" | "rename_from" | "move") {
                self.record_event(db, notify::class::GENERIC, "del", key);
            }
            // SET with EX/PX/EXAT/PXAT, SETEX and PSETEX also set a TTL.
            if matches!(spec.name, "set" | "setex" | "psetex")
                && self.dbs[db]
                    .peek(key, now_ms)
                    .is_some_and(|entry| entry.expire_at_ms().is_some())
            {
                self.record_event(db, notify::class::GENERIC, "expire", key);
            }
        }
        reply
    }

    fn record_event(&mut self, db: usize, class: u32, name: &'static str, key: &Bytes) {
        if self.config.notify_flags & class != 0 && self.events.len() < notify::MAX_EVENTS {
            self.events.push(notify::Event {
                db,
                class,
                name,
                key: key.clone(),
            });
        }
    }

    /// Turns keys deleted by expiry into `expired` events.
    fn collect_expired(&mut self) {
        for index in 0..self.dbs.len() {
            for key in self.dbs[index].take_expired() {
                if self.config.tracking_on() {
                    self.invalidations.push(&key, false);
                }
                self.record_event(index, notify::class::EXPIRED, "expired", &key);
            }
        }
    }

    /// The events recorded since the last call, oldest first (expiry by
    /// [`Keyspace::active_expire_cycle`] included).
    pub fn take_events(&mut self) -> Vec<notify::Event> {
        if self.recording_expired {
            self.collect_expired();
        }
        std::mem::take(&mut self.events)
    }

    fn execute_quietly(
        &mut self,
        spec: &CommandSpec,
        context: &mut Context,
        arguments: &[Bytes],
    ) -> Frame {
        context.block = None;
        if !self.slot_states().is_empty() && self.refused_by_slot_state(spec, arguments) {
            return Frame::error(TRYAGAIN);
        }
        match spec.handler {
            // A write runs through the log with the entry's time on every replica
            // alike, so it may always reclaim the expired keys it meets.
            Handler::Keyspace(run) if spec.through_log() && !context.lazy_expire => {
                context.lazy_expire = true;
                let reply = run(self, context, arguments);
                context.lazy_expire = false;
                reply
            }
            Handler::Keyspace(run) => run(self, context, arguments),
            Handler::Node | Handler::Container => {
                Frame::error_owned(format!("ERR command '{}' is not available here", spec.name))
            }
        }
    }

    /// Whether the state of the command's slot refuses it (see [`Keyspace::execute`]).
    fn refused_by_slot_state(&self, spec: &CommandSpec, arguments: &[Bytes]) -> bool {
        let slot = match slots::command_slot(spec, arguments) {
            Ok(Some(slot)) => slot,
            // FLUSHALL and FLUSHDB would reach into a frozen slot whose copy
            // is already taken: refused while one is frozen. Other keyless
            // writes (SCRIPT LOAD, FUNCTION LOAD ...) touch no key and run.
            Ok(None) => {
                return matches!(spec.name, "flushall" | "flushdb")
                    && self
                        .slot_states()
                        .values()
                        .any(|state| *state == SlotState::Frozen)
            }
            Err(_) => return false,
        };
        match self.slot_state(slot) {
            None => false,
            Some(SlotState::Frozen) => spec.through_log(),
            Some(SlotState::Gone) => true,
        }
    }
}
