//! Clients blocked by BLPOP and its relatives (BZPOPMIN ..., XREAD and
//! XREADGROUP with BLOCK).
//!
//! The keyspace never waits: a blocking command that finds nothing answers its
//! timeout reply and says what it waits for ([`keyspace::BlockOn`]). The
//! connection then registers a [`Waiter`] here and waits for its reply. Whoever
//! learns that a key received elements (the connection that pushed, or, on a
//! replica, the task that watches applied entries) takes the waiters of that key
//! in the order they blocked, runs each one's command again, and either finishes
//! the waiter with the reply or gives it back when the command would still block
//! (another waiter took the element first).
//!
//! A waiter keeps its place in every key's queue while its command runs again
//! ("in flight"), so giving it back keeps first-come, first-served order.

use bytes::Bytes;
use keyspace::CommandSpec;
use resp::{Frame, Protocol};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// A blocked client's command, kept to run again.
#[derive(Clone)]
pub struct Waiter {
    /// The client's id (CLIENT UNBLOCK names clients by it).
    pub client: u64,
    /// The Raft group whose keyspace it waits on (0 for a standalone node).
    pub group: u64,
    pub db: usize,
    pub protocol: Protocol,
    pub spec: &'static CommandSpec,
    pub arguments: Vec<Bytes>,
    /// The keys waited for, each once.
    pub keys: Vec<Bytes>,
    /// The type that serves it (`list`, `zset`, `stream`): a key made ready
    /// while it holds another type leaves the waiter waiting, as in Redis,
    /// except XREADGROUP's, which runs again whatever the key holds (or
    /// when it is gone) and answers NOGROUP or WRONGTYPE, as Redis 7.2.
    pub wants: &'static str,
    /// What the client gets when the wait ends without data.
    pub timeout_reply: Frame,
    /// The client was in CLIENT NO-TOUCH mode when it blocked: its command,
    /// run again on a standalone node, leaves access data alone as it would
    /// have the first time (on a shard it runs again through the log, where
    /// the flag does not travel).
    pub no_touch: bool,
}

/// How [`Blocking::cancel`] found a waiter.
#[derive(Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// It was waiting and is gone now: nothing will answer it.
    Removed,
    /// Its command is running again right now; its reply will arrive.
    InFlight,
    /// It was already answered (the reply is in its channel).
    Finished,
}

struct Entry {
    waiter: Waiter,
    reply: oneshot::Sender<Frame>,
    in_flight: bool,
}

#[derive(Default)]
struct Inner {
    next_ticket: u64,
    /// Tickets grow, so the map iterates in blocking order.
    waiters: BTreeMap<u64, Entry>,
    /// Per (db, key), the tickets waiting for it, oldest first.
    queues: BTreeMap<(usize, Bytes), VecDeque<u64>>,
}

impl Inner {
    fn remove(&mut self, ticket: u64) -> Option<Entry> {
        let entry = self.waiters.remove(&ticket)?;
        for key in &entry.waiter.keys {
            let slot = (entry.waiter.db, key.clone());
            if let Some(queue) = self.queues.get_mut(&slot) {
                queue.retain(|&other| other != ticket);
                if queue.is_empty() {
                    self.queues.remove(&slot);
                }
            }
        }
        Some(entry)
    }
}

/// The registry of blocked clients of one keyspace.
#[derive(Default)]
pub struct Blocking {
    inner: Mutex<Inner>,
}

impl Blocking {
    pub fn new() -> Blocking {
        Blocking::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a waiter; its reply arrives on the returned channel.
    pub fn block(&self, waiter: Waiter) -> (u64, oneshot::Receiver<Frame>) {
        let (sender, receiver) = oneshot::channel();
        let mut inner = self.lock();
        inner.next_ticket += 1;
        let ticket = inner.next_ticket;
        for key in &waiter.keys {
            inner
                .queues
                .entry((waiter.db, key.clone()))
                .or_default()
                .push_back(ticket);
        }
        inner.waiters.insert(
            ticket,
            Entry {
                waiter,
                reply: sender,
                in_flight: false,
            },
        );
        (ticket, receiver)
    }

    /// Stops a wait (timeout, disconnect).
    pub fn cancel(&self, ticket: u64) -> Cancelled {
        let mut inner = self.lock();
        match inner.waiters.get(&ticket) {
            None => Cancelled::Finished,
            Some(entry) if entry.in_flight => Cancelled::InFlight,
            Some(_) => {
                inner.remove(ticket);
                Cancelled::Removed
            }
        }
    }

    /// The oldest waiter for `key` that a value of type `holding` can serve
    /// and whose command is not already running, marked in flight: the caller
    /// must [`finish`](Self::finish) or [`give_back`](Self::give_back) it.
    pub fn take_first(
        &self,
        group: u64,
        db: usize,
        key: &Bytes,
        holding: &str,
    ) -> Option<(u64, Waiter)> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let queue = inner.queues.get(&(db, key.clone()))?;
        for &ticket in queue {
            if let Some(entry) = inner.waiters.get_mut(&ticket) {
                let serves =
                    entry.waiter.wants == holding || entry.waiter.spec.name == "xreadgroup";
                if !entry.in_flight && serves && entry.waiter.group == group {
                    entry.in_flight = true;
                    return Some((ticket, entry.waiter.clone()));
                }
            }
        }
        None
    }

    /// Answers a waiter and forgets it.
    pub fn finish(&self, ticket: u64, reply: Frame) {
        let entry = self.lock().remove(ticket);
        if let Some(entry) = entry {
            let _ = entry.reply.send(reply);
        }
    }

    /// Puts a waiter whose command would still block back in its places.
    pub fn give_back(&self, ticket: u64) {
        if let Some(entry) = self.lock().waiters.get_mut(&ticket) {
            entry.in_flight = false;
        }
    }

    /// Removes every waiter on `group` not in flight, oldest first
    /// (leadership of the group moved away).
    pub fn take_all(&self, group: u64) -> Vec<(Waiter, oneshot::Sender<Frame>)> {
        let mut inner = self.lock();
        let tickets: Vec<u64> = inner
            .waiters
            .iter()
            .filter(|(_, entry)| !entry.in_flight && entry.waiter.group == group)
            .map(|(&ticket, _)| ticket)
            .collect();
        tickets
            .into_iter()
            .filter_map(|ticket| inner.remove(ticket))
            .map(|entry| (entry.waiter, entry.reply))
            .collect()
    }

    /// CLIENT UNBLOCK: ends the wait of `client` with its timeout reply, or with
    /// `error` when given. False when the client is not blocked (or its command
    /// is running again right now).
    pub fn unblock_client(&self, client: u64, error: Option<Frame>) -> bool {
        let mut inner = self.lock();
        let ticket = inner
            .waiters
            .iter()
            .find(|(_, entry)| entry.waiter.client == client && !entry.in_flight)
            .map(|(&ticket, _)| ticket);
        let Some(entry) = ticket.and_then(|ticket| inner.remove(ticket)) else {
            return false;
        };
        drop(inner);
        let reply = error.unwrap_or(entry.waiter.timeout_reply);
        let _ = entry.reply.send(reply);
        true
    }

    /// The type a blocking command waits for.
    pub fn wanted_type(spec: &CommandSpec) -> &'static str {
        if spec.name.starts_with("bz") {
            "zset"
        } else if spec.name.starts_with('x') {
            "stream"
        } else {
            "list"
        }
    }

    /// Every key some waiter waits for.
    pub fn waited_keys(&self) -> Vec<(usize, Bytes)> {
        self.lock().queues.keys().cloned().collect()
    }

    /// Whether any client waits on `group`.
    pub fn waits_on(&self, group: u64) -> bool {
        self.lock()
            .waiters
            .values()
            .any(|entry| entry.waiter.group == group)
    }

    /// Number of blocked clients (INFO `blocked_clients`).
    pub fn count(&self) -> usize {
        self.lock().waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(client: u64, keys: &[&str]) -> Waiter {
        Waiter {
            client,
            group: 0,
            db: 0,
            protocol: Protocol::Resp2,
            spec: keyspace::commands::lookup(b"blpop").expect("blpop"),
            arguments: vec![],
            keys: keys
                .iter()
                .map(|key| Bytes::copy_from_slice(key.as_bytes()))
                .collect(),
            timeout_reply: Frame::NullArray,
            wants: "list",
            no_touch: false,
        }
    }

    fn key(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    #[test]
    fn waiters_are_served_in_blocking_order_and_keep_their_place() {
        let blocking = Blocking::new();
        let (first, mut first_reply) = blocking.block(waiter(1, &["a", "b"]));
        let (second, _second_reply) = blocking.block(waiter(2, &["b"]));
        assert_eq!(blocking.count(), 2);

        let (ticket, taken) = blocking
            .take_first(0, 0, &key("b"), "list")
            .expect("first waiter");
        assert_eq!((ticket, taken.client), (first, 1));
        // In flight: the next take skips it.
        let (next, _) = blocking
            .take_first(0, 0, &key("b"), "list")
            .expect("second waiter");
        assert_eq!(next, second);
        blocking.give_back(next);
        blocking.give_back(ticket);
        // Given back: first in line again.
        assert_eq!(
            blocking.take_first(0, 0, &key("b"), "list").map(|(t, _)| t),
            Some(first)
        );
        blocking.finish(first, Frame::Integer(7));
        assert_eq!(first_reply.try_recv().ok(), Some(Frame::Integer(7)));
        assert_eq!(blocking.count(), 1);
        // A key holding another type serves nobody here.
        assert!(blocking.take_first(0, 0, &key("b"), "zset").is_none());
        // Finished waiters leave every queue.
        assert!(blocking.take_first(0, 0, &key("a"), "list").is_none());
        assert!(blocking.take_first(0, 1, &key("b"), "list").is_none());
    }

    #[test]
    fn cancel_reports_how_it_found_the_waiter() {
        let blocking = Blocking::new();
        let (ticket, _reply) = blocking.block(waiter(1, &["a"]));
        let (taken, _) = blocking
            .take_first(0, 0, &key("a"), "list")
            .expect("waiter");
        assert_eq!(taken, ticket);
        assert_eq!(blocking.cancel(ticket), Cancelled::InFlight);
        blocking.give_back(ticket);
        assert_eq!(blocking.cancel(ticket), Cancelled::Removed);
        assert_eq!(blocking.cancel(ticket), Cancelled::Finished);
        assert!(blocking.is_empty());
    }

    #[test]
    fn unblock_and_take_all() {
        let blocking = Blocking::new();
        let (_, mut reply) = blocking.block(waiter(5, &["a"]));
        assert!(!blocking.unblock_client(6, None));
        assert!(blocking.unblock_client(5, None));
        assert_eq!(reply.try_recv().ok(), Some(Frame::NullArray));
        let (_, mut reply) = blocking.block(waiter(5, &["a"]));
        assert!(blocking.unblock_client(5, Some(Frame::error("UNBLOCKED x"))));
        assert_eq!(reply.try_recv().ok(), Some(Frame::error("UNBLOCKED x")));

        blocking.block(waiter(1, &["a"]));
        let (in_flight, _) = blocking.block(waiter(2, &["b"]));
        blocking.take_first(0, 0, &key("b"), "list");
        assert!(blocking.take_all(9).is_empty());
        let taken = blocking.take_all(0);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0.client, 1);
        assert_eq!(blocking.count(), 1);
        blocking.finish(in_flight, Frame::OK);
        assert!(blocking.is_empty());
    }
}
