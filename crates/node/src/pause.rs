//! CLIENT PAUSE and CLIENT UNPAUSE: the node's pause gate.
//!
//! A pause is node state (as in Redis, where it is server state): while it
//! lasts, every connection of this node holds the commands it covers (all of
//! them in ALL mode; writes, and commands Redis flags `may-replicate` such as
//! PUBLISH and PFCOUNT, in WRITE mode) before they run, and runs them once
//! the pause ends, by its timeout or by CLIENT UNPAUSE. A held command is
//! never refused. The caller's own later commands are held too, as in Redis.
//!
//! Held commands leave in the order they were held: each takes a ticket, and
//! a connection may go on only when its ticket is the oldest left and the
//! pause no longer covers its command. While held commands remain, new
//! commands queue behind them (Redis serves its postponed clients before it
//! reads new input). The connection keeps its ticket for the rest of its
//! batch (its pipeline goes on as Redis's would) and gives it back after.
//!
//! While a pause lasts, keys do not expire or get evicted: the active expiry
//! cycle (and a shard leader's expiry entries) and eviction skip, and reads
//! see expired keys as absent without deleting them (Redis's `expireIfNeeded`
//! during a pause).
//!
//! The unpaused path costs one relaxed load of [`PauseGate::gated`] per
//! command; everything else is behind the mutex.

use crate::server::Shared;
use crate::session::Session;
use bytes::Bytes;
use keyspace::command::flags;
use keyspace::CommandSpec;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

/// CLIENT PAUSE's mode. `All` is the more restrictive, and wins when two
/// pauses overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseMode {
    Write,
    All,
}

/// What a command does at the gate.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// Run it now. `keys_frozen`: a pause is on, so reads must not delete
    /// expired keys.
    Proceed { keys_frozen: bool },
    /// Hold it with this ticket until [`PauseGate::wait_turn`] says so.
    Wait(u64),
}

#[derive(Default)]
struct State {
    /// The pause in force and when it ends.
    pause: Option<(PauseMode, Instant)>,
    /// Tickets of held commands, oldest first.
    waiting: BTreeSet<u64>,
    next_ticket: u64,
}

impl State {
    /// Ends a pause whose time is up; true when it did.
    fn expire(&mut self, now: Instant) -> bool {
        match self.pause {
            Some((_, until)) if now >= until => {
                self.pause = None;
                true
            }
            _ => false,
        }
    }

    /// Whether the pause in force holds a command (`write`: a write or
    /// may-replicate command).
    fn holds(&self, write: bool) -> bool {
        match self.pause {
            Some((PauseMode::All, _)) => true,
            Some((PauseMode::Write, _)) => write,
            None => false,
        }
    }
}

/// The pause shared by every connection of a node (see the module docs).
pub struct PauseGate {
    /// Set while a pause is on or held commands remain.
    gated: AtomicBool,
    state: Mutex<State>,
    /// Bumped at every change held commands may wait for.
    changed: watch::Sender<u64>,
}

impl Default for PauseGate {
    fn default() -> Self {
        PauseGate {
            gated: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(0),
        }
    }
}

/// The longest pause: CLIENT PAUSE takes any non-negative 64-bit timeout,
/// and a timeout this long never ends in practice.
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl PauseGate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Publishes a change: the fast-path flag, and a wake-up for held
    /// commands.
    fn changed(&self, state: &State) {
        self.gated.store(
            state.pause.is_some() || !state.waiting.is_empty(),
            Ordering::Relaxed,
        );
        self.changed.send_modify(|version| *version += 1);
    }

    /// The state with an elapsed pause ended.
    fn current(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if state.expire(Instant::now()) {
            self.changed(&state);
        }
        state
    }

    /// The fast path: false while no pause is on and nothing is held.
    #[inline]
    pub fn gated(&self) -> bool {
        self.gated.load(Ordering::Relaxed)
    }

    /// CLIENT PAUSE: a pause that overlaps one in force keeps the later end
    /// and the more restrictive mode of the two (Redis's rule).
    pub fn pause(&self, mode: PauseMode, timeout_ms: u64) {
        let now = Instant::now();
        let until = now
            .checked_add(Duration::from_millis(timeout_ms).min(LONGEST))
            .unwrap_or(now + LONGEST);
        let mut state = self.current();
        state.pause = Some(match state.pause {
            Some((old_mode, old_until)) => (old_mode.max(mode), old_until.max(until)),
            None => (mode, until),
        });
        self.changed(&state);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        let mut state = self.lock();
        state.pause = None;
        self.changed(&state);
    }

    /// Whether keys must not expire or be evicted now (a pause is on).
    pub fn keys_frozen(&self) -> bool {
        self.gated() && self.current().pause.is_some()
    }

    /// Held commands (INFO's `blocked_clients` counts them, as Redis counts
    /// its postponed clients).
    pub fn held(&self) -> usize {
        if !self.gated() {
            return 0;
        }
        self.lock().waiting.len()
    }

    /// The slow path of the gate, for a command the fast path did not let
    /// through. `write`: the command is held by a WRITE pause. `turn`: the
    /// ticket the connection holds (its turn came), if any; it is kept when
    /// the command must wait again.
    pub fn enter(&self, write: bool, turn: Option<u64>) -> Entry {
        let mut state = self.current();
        let holds = state.holds(write);
        let keys_frozen = state.pause.is_some();
        match turn {
            Some(ticket) if holds => Entry::Wait(ticket),
            Some(_) => Entry::Proceed { keys_frozen },
            None if holds || (!keys_frozen && !state.waiting.is_empty()) => {
                state.next_ticket += 1;
                let ticket = state.next_ticket;
                state.waiting.insert(ticket);
                self.changed(&state);
                Entry::Wait(ticket)
            }
            None => Entry::Proceed { keys_frozen },
        }
    }

    /// Waits until `ticket` is the oldest held and the pause no longer holds
    /// its command. The ticket stays taken until [`PauseGate::release`].
    pub async fn wait_turn(&self, ticket: u64, write: bool) {
        let mut changes = self.changed.subscribe();
        loop {
            let deadline = {
                let state = self.current();
                if state.waiting.first() == Some(&ticket) && !state.holds(write) {
                    return;
                }
                state.pause.map(|(_, until)| until)
            };
            match deadline {
                Some(deadline) => {
                    tokio::select! {
                        _ = changes.changed() => {}
                        _ = tokio::time::sleep_until(deadline) => {}
                    }
                }
                None => {
                    let _ = changes.changed().await;
                }
            }
        }
    }

    /// Gives a ticket back (its command ran, or its connection went away).
    pub fn release(&self, ticket: u64) {
        let mut state = self.lock();
        if state.waiting.remove(&ticket) {
            self.changed(&state);
        }
    }
}

/// Whether a WRITE pause holds a command: writes and `may-replicate`
/// commands (PUBLISH, PFCOUNT ...); EVAL, EVALSHA and FCALL as their
/// script's flags say (`script_may_write`), their _RO forms never; EXEC when
/// a queued command is held.
pub fn held_by_write_pause(
    spec: &CommandSpec,
    arguments: &[Bytes],
    queued: &[(Vec<Bytes>, &'static CommandSpec)],
    script_may_write: &mut dyn FnMut(&[Bytes]) -> bool,
) -> bool {
    if spec.name == "exec" {
        return queued.iter().any(|(arguments, spec)| {
            spec.name != "exec" && held_by_write_pause(spec, arguments, &[], script_may_write)
        });
    }
    if crate::session::is_script_call(spec) {
        return spec.has(flags::MAY_REPLICATE) && script_may_write(arguments);
    }
    spec.has(flags::WRITE | flags::MAY_REPLICATE)
}

/// The gate's slow path for a resolved command (callers test
/// [`PauseGate::gated`] first). `Some(keys_frozen)`: run it now. `None`: it
/// is held; the caller keeps it, and what follows it, in
/// `session.deferred`, and the connection waits for its turn
/// (`session.paused`). Commands that would be refused anyway (NOAUTH, a
/// subscribed connection) and the cluster's own node-to-node commands are
/// not held, as Redis answers the former before its pause check and never
/// pauses its replication and cluster links.
pub fn check(
    shared: &Shared,
    session: &mut Session,
    spec: &'static CommandSpec,
    arguments: &[Bytes],
    script_may_write: &mut dyn FnMut(&[Bytes]) -> bool,
) -> Option<bool> {
    let gate = &shared.local.pause;
    let refused = (!session.authenticated && shared.config().requirepass().is_some())
        || crate::session::subscribed_refusal(session, spec, arguments).is_some();
    if refused || spec.name.starts_with("slotraft|") {
        return Some(gate.keys_frozen());
    }
    let queued = session
        .multi
        .as_ref()
        .map(|transaction| &transaction.queued[..])
        .unwrap_or(&[]);
    let write = held_by_write_pause(spec, arguments, queued, script_may_write);
    let turn = session.pause_turn.take();
    match gate.enter(write, turn) {
        Entry::Proceed { keys_frozen } => {
            session.pause_turn = turn;
            Some(keys_frozen)
        }
        Entry::Wait(ticket) => {
            // CLIENT LIST shows the held command, as Redis does.
            session.note_command(spec.name);
            session.paused = Some((ticket, write));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn held_commands_leave_in_order_after_unpause() {
        let gate = PauseGate::default();
        assert!(!gate.gated());
        gate.pause(PauseMode::Write, 60_000);
        assert_eq!(
            gate.enter(false, None),
            Entry::Proceed { keys_frozen: true }
        );
        let Entry::Wait(first) = gate.enter(true, None) else {
            panic!("a write must wait");
        };
        let Entry::Wait(second) = gate.enter(true, None) else {
            panic!("a write must wait");
        };
        assert_eq!(gate.held(), 2);
        gate.unpause();
        // Nothing new passes the held ones, reads included.
        let Entry::Wait(third) = gate.enter(false, None) else {
            panic!("a new command queues behind held ones");
        };
        gate.wait_turn(first, true).await;
        let waiting_second =
            tokio::time::timeout(Duration::from_millis(20), gate.wait_turn(second, true)).await;
        assert!(waiting_second.is_err(), "the second waits for the first");
        gate.release(first);
        gate.wait_turn(second, true).await;
        gate.release(second);
        gate.wait_turn(third, false).await;
        gate.release(third);
        assert!(!gate.gated());
    }

    #[tokio::test]
    async fn all_wins_over_write_and_the_later_end_is_kept() {
        let gate = PauseGate::default();
        gate.pause(PauseMode::All, 60_000);
        gate.pause(PauseMode::Write, 1);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(matches!(gate.enter(false, None), Entry::Wait(_)));
        gate.unpause();
        assert!(gate.gated(), "a held command remains");
    }

    #[tokio::test]
    async fn a_pause_ends_by_its_timeout() {
        let gate = PauseGate::default();
        gate.pause(PauseMode::All, 30);
        let Entry::Wait(ticket) = gate.enter(true, None) else {
            panic!("held");
        };
        tokio::time::timeout(Duration::from_secs(5), gate.wait_turn(ticket, true))
            .await
            .expect("released by the timeout");
        assert!(!gate.keys_frozen());
        gate.release(ticket);
        assert!(!gate.gated());
    }
}
