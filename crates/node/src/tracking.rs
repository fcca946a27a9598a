//! Client-side caching: CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO,
//! and the invalidation messages tracking clients receive.
//!
//! The table is the node's own (every node tracks for its own clients; it is
//! not replicated state). Writes are seen where they apply: on a standalone
//! node as they run, on a replica as each replica applies the log, so a client
//! reading from a follower (READONLY) is told by that follower.
//!
//! - Default mode: a read-only command (or a script, by its declared keys)
//!   that a tracking client runs records its keys, before it runs. On a node
//!   where commands run on several threads, recording after the read would
//!   let a write that lands in between go unreported. The first change to a
//!   recorded key sends each client that recorded it one `invalidate`
//!   message and forgets the key; reading it again records it again.
//! - OPTIN: only the command after `CLIENT CACHING yes` records (a whole
//!   MULTI ... EXEC when it follows); OPTOUT: every command but the one after
//!   `CLIENT CACHING no`.
//! - BCAST: nothing is recorded; every change to a key under one of the
//!   client's prefixes is reported, the keys of one batch together per prefix.
//! - NOLOOP: a client is not told of changes its own commands made (on a
//!   standalone node; a replica applying the log does not know which client
//!   proposed an entry, so there the client is told).
//! - FLUSHDB and FLUSHALL send every tracking client a null invalidation.
//! - REDIRECT sends the messages to another client: as a `message` on
//!   `__redis__:invalidate` when it speaks RESP2 (it should be subscribed), as
//!   a push when it speaks RESP3. Once it is gone, a RESP3 tracking client is
//!   told `tracking-redir-broken` instead.
//!
//! `tracking-table-max-keys` bounds the table: past it, keys are dropped from
//! it and their clients told to drop them too, as Redis does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{BufMut, Bytes, BytesMut};
use keyspace::args::is_keyword;
use keyspace::command::flags;
use keyspace::{CommandSpec, Invalidations};
use resp::Frame;

use crate::clients::{ClientInfo, TrackingFlags};
use crate::pubsub::{OutputLimits, PubSub, Subscriber};
use crate::server::Shared;
use crate::session::Session;

/// The node's tracking table.
pub struct Tracking {
    /// Whose output limit bounds the messages (they go through the
    /// connections' pub/sub outboxes).
    pubsub: Arc<PubSub>,
    /// On while any client tracks: the keyspaces then record what writes
    /// change (shared with them through their configuration).
    switch: Arc<AtomicBool>,
    /// `tracking-table-max-keys` (0: no bound).
    max_keys: AtomicUsize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    clients: HashMap<u64, Tracker>,
    /// Default mode: each recorded key and the clients that may cache it.
    keys: HashMap<Bytes, BTreeSet<u64>>,
    /// Sum of the clients over `keys` (INFO's `tracking_total_items`).
    items: usize,
    /// BCAST: each prefix and the clients that asked for it.
    prefixes: BTreeMap<Bytes, BTreeSet<u64>>,
}

struct Tracker {
    client: Arc<ClientInfo>,
    mode: Mode,
    /// The client messages go to instead (0: none), and its connection.
    redirect: u64,
    redirect_to: Option<Arc<ClientInfo>>,
    prefixes: BTreeSet<Bytes>,
    broken_redirect: bool,
}

/// CLIENT TRACKING's mode options.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
}

/// What a tracking session keeps for itself (checked per command without a
/// lock).
pub struct SessionTracking {
    mode: Mode,
    /// CLIENT CACHING's answer for the next command (or transaction).
    caching: Option<bool>,
    table: Arc<Tracking>,
}

impl SessionTracking {
    /// A command begins: records its keys when the mode asks for them, and
    /// spends CLIENT CACHING's choice (kept across MULTI ... EXEC, and by
    /// CLIENT subcommands).
    pub fn command(
        &mut self,
        client: u64,
        spec: &CommandSpec,
        arguments: &[Bytes],
        in_multi: bool,
    ) {
        let wanted = if self.mode.bcast {
            false
        } else if self.mode.optin {
            self.caching == Some(true)
        } else if self.mode.optout {
            self.caching != Some(false)
        } else {
            true
        };
        if wanted && (spec.has(flags::READONLY) || crate::session::is_script_call(spec)) {
            if let Ok(positions) = spec.key_positions(arguments) {
                if !positions.is_empty() {
                    self.table.remember(
                        client,
                        positions.iter().filter_map(|&index| arguments.get(index)),
                    );
                }
            }
        }
        // As Redis: CLIENT subcommands (TRACKINGINFO ...) leave it too.
        let keeps = spec.name == "multi"
            || spec.name.starts_with("client|")
            || (in_multi && !matches!(spec.name, "exec" | "discard"));
        if !keeps {
            self.caching = None;
        }
    }
}

impl Tracking {
    pub fn new(pubsub: Arc<PubSub>) -> Tracking {
        Tracking {
            pubsub,
            switch: Arc::new(AtomicBool::new(false)),
            max_keys: AtomicUsize::new(1_000_000),
            table: Mutex::new(Table::default()),
        }
    }
}

/// One message waiting to be queued, built under the table's lock and
/// delivered after it.
type Outgoing = (Arc<Subscriber>, BytesMut);

impl Tracking {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The switch the keyspaces read (see [`keyspace::KeyspaceConfig::tracking`]).
    pub fn switch(&self) -> Arc<AtomicBool> {
        self.switch.clone()
    }

    pub fn set_max_keys(&self, max_keys: usize) {
        self.max_keys.store(max_keys, Ordering::Relaxed);
    }

    /// Turns tracking on for `client` (or changes its options), after the
    /// checks Redis makes in its order.
    fn enable(
        self: &Arc<Self>,
        client: &Arc<ClientInfo>,
        mode: Mode,
        redirect: Option<Arc<ClientInfo>>,
        prefixes: Vec<Bytes>,
    ) -> Result<(), Frame> {
        if !mode.bcast && !prefixes.is_empty() {
            return Err(Frame::error(
                "ERR PREFIX option requires BCAST mode to be enabled",
            ));
        }
        let mut table = self.table();
        let current = table.clients.get(&client.id);
        if let Some(current) = current {
            if current.mode.bcast != mode.bcast {
                return Err(Frame::error(
                    "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
                ));
            }
        }
        if mode.bcast && (mode.optin || mode.optout) {
            return Err(Frame::error(
                "ERR OPTIN and OPTOUT are not compatible with BCAST",
            ));
        }
        if mode.optin && mode.optout {
            return Err(Frame::error(
                "ERR You can't specify both OPTIN mode and OPTOUT mode",
            ));
        }
        if let Some(current) = current {
            if (mode.optin && current.mode.optout) || (mode.optout && current.mode.optin) {
                return Err(Frame::error(
                    "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
                ));
            }
        }
        let mut prefixes = prefixes;
        if mode.bcast && prefixes.is_empty() && current.is_none_or(|c| c.prefixes.is_empty()) {
            // BCAST without a prefix: every key.
            prefixes.push(Bytes::new());
        }
        if mode.bcast {
            for (index, prefix) in prefixes.iter().enumerate() {
                if let Some(existing) = current.and_then(|current| {
                    current
                        .prefixes
                        .iter()
                        .find(|existing| overlap(existing, prefix))
                }) {
                    return Err(Frame::error_owned(format!(
                        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(prefix),
                        String::from_utf8_lossy(existing)
                    )));
                }
                if let Some(other) = prefixes[index + 1..]
                    .iter()
                    .find(|other| overlap(prefix, other))
                {
                    return Err(Frame::error_owned(format!(
                        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(prefix),
                        String::from_utf8_lossy(other)
                    )));
                }
            }
        }
        let redirect_id = redirect.as_ref().map_or(0, |target| target.id);
        let tracker = table.clients.entry(client.id).or_insert_with(|| Tracker {
            client: client.clone(),
            mode: Mode::default(),
            redirect: 0,
            redirect_to: None,
            prefixes: BTreeSet::new(),
            broken_redirect: false,
        });
        // Options add up, as Redis's flags do; the redirection is replaced.
        tracker.mode.bcast |= mode.bcast;
        tracker.mode.optin |= mode.optin;
        tracker.mode.optout |= mode.optout;
        tracker.mode.noloop |= mode.noloop;
        tracker.redirect = redirect_id;
        tracker.redirect_to = redirect;
        tracker.broken_redirect = false;
        tracker.prefixes.extend(prefixes.iter().cloned());
        let shown = tracker.shown();
        for prefix in prefixes {
            table.prefixes.entry(prefix).or_default().insert(client.id);
        }
        client.details().tracking = Some(shown);
        self.switch.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Turns tracking off for `client` (also when its connection closes).
    /// Keys it recorded stay in the table until they change, as in Redis.
    pub fn disable(&self, client: &ClientInfo) {
        let mut table = self.table();
        let Some(tracker) = table.clients.remove(&client.id) else {
            return;
        };
        for prefix in &tracker.prefixes {
            if let Some(clients) = table.prefixes.get_mut(prefix) {
                clients.remove(&client.id);
                if clients.is_empty() {
                    table.prefixes.remove(prefix);
                }
            }
        }
        if table.clients.is_empty() {
            self.switch.store(false, Ordering::Relaxed);
        }
        drop(table);
        client.details().tracking = None;
    }

    /// Records that `client` may cache `keys`.
    fn remember<'k>(&self, client: u64, keys: impl Iterator<Item = &'k Bytes>) {
        let mut table = self.table();
        for key in keys {
            if table.keys.entry(key.clone()).or_default().insert(client) {
                table.items += 1;
            }
        }
        let max_keys = self.max_keys.load(Ordering::Relaxed);
        if max_keys == 0 || table.keys.len() <= max_keys {
            return;
        }
        // Over the bound: drop keys (whichever the table yields first) and
        // tell their clients.
        let mut outgoing = Vec::new();
        while table.keys.len() > max_keys {
            let Some(key) = table.keys.keys().next().cloned() else {
                break;
            };
            table.invalidate_key(&key, None, &mut outgoing);
        }
        drop(table);
        deliver(outgoing, self.pubsub.limits());
    }

    /// Tells tracking clients what changed. `writer` is the client whose
    /// commands changed the keys marked as changed by a command, when known.
    pub fn invalidate(&self, invalidations: Invalidations, writer: Option<u64>) {
        let mut outgoing = Vec::new();
        {
            let mut table = self.table();
            if table.clients.is_empty() && table.keys.is_empty() {
                return;
            }
            for (key, by_command) in &invalidations.keys {
                let writer = if *by_command { writer } else { None };
                table.invalidate_key(key, writer, &mut outgoing);
            }
            if !table.prefixes.is_empty() && !invalidations.keys.is_empty() {
                table.broadcast(&invalidations.keys, writer, &mut outgoing);
            }
            if invalidations.flushed {
                table.keys.clear();
                table.items = 0;
                let ids: Vec<u64> = table.clients.keys().copied().collect();
                for id in ids {
                    table.send(id, None, &mut outgoing);
                }
            }
        }
        deliver(outgoing, self.pubsub.limits());
    }

    /// INFO's `tracking_clients`, `tracking_total_keys`,
    /// `tracking_total_items` and `tracking_total_prefixes`.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let table = self.table();
        (
            table.clients.len(),
            table.keys.len(),
            table.items,
            table.prefixes.len(),
        )
    }
}

impl Tracker {
    fn shown(&self) -> TrackingFlags {
        TrackingFlags {
            bcast: self.mode.bcast,
            broken_redirect: self.broken_redirect,
            redirect: self.redirect,
        }
    }
}

impl Table {
    /// Drops `key` from the table and tells the clients that recorded it.
    fn invalidate_key(&mut self, key: &Bytes, writer: Option<u64>, outgoing: &mut Vec<Outgoing>) {
        let Some(clients) = self.keys.remove(key) else {
            return;
        };
        self.items -= clients.len();
        for id in clients {
            let Some(tracker) = self.clients.get(&id) else {
                continue;
            };
            if tracker.mode.bcast || (tracker.mode.noloop && writer == Some(id)) {
                continue;
            }
            self.send(id, Some(std::slice::from_ref(key)), outgoing);
        }
    }

    /// BCAST: each prefix's changed keys (sorted, once each) to its clients.
    fn broadcast(
        &mut self,
        keys: &[(Bytes, bool)],
        writer: Option<u64>,
        outgoing: &mut Vec<Outgoing>,
    ) {
        let mut sends: Vec<(u64, Vec<Bytes>)> = Vec::new();
        for (prefix, clients) in &self.prefixes {
            let mut matching: BTreeMap<&Bytes, bool> = BTreeMap::new();
            for (key, by_command) in keys {
                if key.starts_with(prefix) {
                    // Changed by the writer's command at least once.
                    *matching.entry(key).or_insert(false) |= *by_command;
                }
            }
            if matching.is_empty() {
                continue;
            }
            for &id in clients {
                let noloop = self.clients.get(&id).is_some_and(|t| t.mode.noloop);
                let keys: Vec<Bytes> = matching
                    .iter()
                    .filter(|(_, by_command)| !(noloop && **by_command && writer == Some(id)))
                    .map(|(key, _)| (*key).clone())
                    .collect();
                if !keys.is_empty() {
                    sends.push((id, keys));
                }
            }
        }
        for (id, keys) in sends {
            self.send(id, Some(&keys), outgoing);
        }
    }

    /// One invalidation (`None`: everything) for tracking client `id`, to
    /// where its messages go.
    fn send(&mut self, id: u64, keys: Option<&[Bytes]>, outgoing: &mut Vec<Outgoing>) {
        let Some(tracker) = self.clients.get_mut(&id) else {
            return;
        };
        let tracker_resp3 = tracker.client.protocol.load(Ordering::Relaxed) == 3;
        let target = match &tracker.redirect_to {
            Some(target) if target.is_closed() => {
                if !tracker.broken_redirect {
                    tracker.broken_redirect = true;
                    tracker.client.details().tracking = Some(tracker.shown());
                }
                if tracker_resp3 {
                    if let Some(inbox) = tracker.client.inbox() {
                        let mut wire = BytesMut::new();
                        wire.put_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n");
                        wire.put_slice(format!(":{}\r\n", tracker.redirect).as_bytes());
                        outgoing.push((inbox, wire));
                    }
                }
                return;
            }
            Some(target) => target.clone(),
            None => tracker.client.clone(),
        };
        let Some(inbox) = target.inbox() else {
            return;
        };
        let target_resp3 = inbox.is_resp3();
        if !target_resp3 && tracker.redirect == 0 {
            // RESP2 has no pushes: without a redirection nothing can be sent.
            return;
        }
        let mut wire = BytesMut::new();
        if target_resp3 {
            wire.put_slice(b">2\r\n$10\r\ninvalidate\r\n");
        } else {
            wire.put_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
        }
        match keys {
            Some(keys) => {
                wire.put_slice(format!("*{}\r\n", keys.len()).as_bytes());
                for key in keys {
                    wire.put_slice(format!("${}\r\n", key.len()).as_bytes());
                    wire.put_slice(key);
                    wire.put_slice(b"\r\n");
                }
            }
            // Redis writes the null in the tracking client's protocol.
            None if target_resp3 && tracker_resp3 => wire.put_slice(b"_\r\n"),
            None => wire.put_slice(b"$-1\r\n"),
        }
        outgoing.push((inbox, wire));
    }
}

fn deliver(outgoing: Vec<Outgoing>, limits: OutputLimits) {
    for (inbox, wire) in outgoing {
        inbox.deliver_wire(&wire, limits);
    }
}

/// Whether one prefix starts the other.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
pub fn client_tracking(shared: &Shared, session: &mut Session, arguments: &[Bytes]) -> Frame {
    let mut mode = Mode::default();
    let mut redirect: Option<Arc<ClientInfo>> = None;
    let mut prefixes = Vec::new();
    let mut index = 3;
    while index < arguments.len() {
        let more = index + 1 < arguments.len();
        let option = &arguments[index];
        if is_keyword(option, "redirect") && more {
            index += 1;
            if redirect.is_some() {
                return Frame::error("ERR A client can only redirect to a single other client");
            }
            let id = match keyspace::args::parse_i64(&arguments[index]) {
                Ok(id) => id,
                Err(error) => return error,
            };
            match u64::try_from(id).ok().and_then(|id| shared.clients.get(id)) {
                Some(target) => redirect = Some(target),
                None => {
                    return Frame::error("ERR The client ID you want redirect to does not exist")
                }
            }
        } else if is_keyword(option, "bcast") {
            mode.bcast = true;
        } else if is_keyword(option, "optin") {
            mode.optin = true;
        } else if is_keyword(option, "optout") {
            mode.optout = true;
        } else if is_keyword(option, "noloop") {
            mode.noloop = true;
        } else if is_keyword(option, "prefix") && more {
            index += 1;
            prefixes.push(arguments[index].clone());
        } else {
            return Frame::error(keyspace::errors::SYNTAX);
        }
        index += 1;
    }
    let table = &shared.local.tracking;
    if is_keyword(&arguments[2], "on") {
        if let Err(error) = table.enable(&session.client, mode, redirect, prefixes) {
            return error;
        }
        let tracking = session.tracking.get_or_insert_with(|| SessionTracking {
            mode: Mode::default(),
            caching: None,
            table: table.clone(),
        });
        tracking.mode.bcast |= mode.bcast;
        tracking.mode.optin |= mode.optin;
        tracking.mode.optout |= mode.optout;
        tracking.mode.noloop |= mode.noloop;
        // Invalidations reach the connection through its outbox.
        let client = session.client.clone();
        let protocol = session.protocol;
        session
            .subscriptions
            .subscriber
            .get_or_insert_with(|| Subscriber::new(client, protocol));
        Frame::OK
    } else if is_keyword(&arguments[2], "off") {
        stop(shared, session);
        Frame::OK
    } else {
        Frame::error(keyspace::errors::SYNTAX)
    }
}

/// Turns the session's tracking off (CLIENT TRACKING OFF, RESET).
pub fn stop(shared: &Shared, session: &mut Session) {
    if session.tracking.take().is_some() {
        shared.local.tracking.disable(&session.client);
        if !session.subscriptions.active() && !session.subscriptions.monitor {
            session.subscriptions.subscriber = None;
        }
    }
}

/// CLIENT CACHING YES|NO.
pub fn client_caching(session: &mut Session, arguments: &[Bytes]) -> Frame {
    let Some(tracking) = session.tracking.as_mut() else {
        return Frame::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        );
    };
    if is_keyword(&arguments[2], "yes") {
        if !tracking.mode.optin {
            return Frame::error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
        tracking.caching = Some(true);
    } else if is_keyword(&arguments[2], "no") {
        if !tracking.mode.optout {
            return Frame::error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
        tracking.caching = Some(false);
    } else {
        return Frame::error(keyspace::errors::SYNTAX);
    }
    Frame::OK
}

/// CLIENT GETREDIR: -1 when not tracking, 0 without a redirection.
pub fn client_getredir(session: &Session) -> Frame {
    Frame::Integer(match session.client.details().tracking {
        Some(flags) => flags.redirect as i64,
        None => -1,
    })
}

/// CLIENT TRACKINGINFO.
pub fn client_trackinginfo(shared: &Shared, session: &Session) -> Frame {
    let bulk = |text: &str| Frame::Bulk(Bytes::copy_from_slice(text.as_bytes()));
    let mut flags = Vec::new();
    let (redirect, prefixes) = match &session.tracking {
        None => {
            flags.push(bulk("off"));
            (-1, Vec::new())
        }
        Some(tracking) => {
            flags.push(bulk("on"));
            let table = shared.local.tracking.table();
            let tracker = table.clients.get(&session.client.id);
            if tracking.mode.bcast {
                flags.push(bulk("bcast"));
            }
            if tracking.mode.optin {
                flags.push(bulk("optin"));
                if tracking.caching == Some(true) {
                    flags.push(bulk("caching-yes"));
                }
            }
            if tracking.mode.optout {
                flags.push(bulk("optout"));
                if tracking.caching == Some(false) {
                    flags.push(bulk("caching-no"));
                }
            }
            if tracking.mode.noloop {
                flags.push(bulk("noloop"));
            }
            if tracker.is_some_and(|tracker| tracker.broken_redirect) {
                flags.push(bulk("broken_redirect"));
            }
            let redirect = tracker.map_or(0, |tracker| tracker.redirect as i64);
            let prefixes = tracker
                .map(|tracker| tracker.prefixes.iter().cloned().map(Frame::Bulk).collect())
                .unwrap_or_default();
            (redirect, prefixes)
        }
    };
    Frame::Map(vec![
        (bulk("flags"), Frame::Set(flags)),
        (bulk("redirect"), Frame::Integer(redirect)),
        (bulk("prefixes"), Frame::Array(prefixes)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Arc<Tracking> {
        Arc::new(Tracking::new(Arc::new(PubSub::default())))
    }

    fn client(id: u64) -> Arc<ClientInfo> {
        ClientInfo::new(id, "127.0.0.1:1".parse().unwrap(), None, 0)
    }

    fn inbox(client: &Arc<ClientInfo>, resp3: bool) -> Arc<Subscriber> {
        let protocol = if resp3 {
            resp::Protocol::Resp3
        } else {
            resp::Protocol::Resp2
        };
        client
            .protocol
            .store(if resp3 { 3 } else { 2 }, Ordering::Relaxed);
        Subscriber::new(client.clone(), protocol)
    }

    fn drained(inbox: &Subscriber) -> String {
        let mut out = BytesMut::new();
        inbox.drain_into(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn changed(keys: &[&str]) -> Invalidations {
        Invalidations {
            keys: keys
                .iter()
                .map(|key| (Bytes::copy_from_slice(key.as_bytes()), true))
                .collect(),
            flushed: false,
        }
    }

    #[test]
    fn a_recorded_key_is_invalidated_once() {
        let tracking = table();
        let a = client(1);
        let a_inbox = inbox(&a, true);
        tracking
            .enable(&a, Mode::default(), None, Vec::new())
            .unwrap();
        assert!(tracking.switch.load(Ordering::Relaxed));
        tracking.remember(1, [Bytes::from_static(b"k")].iter());
        assert_eq!(tracking.counts(), (1, 1, 1, 0));
        tracking.invalidate(changed(&["k", "other", "k"]), None);
        assert_eq!(
            drained(&a_inbox),
            ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(tracking.counts(), (1, 0, 0, 0));
        tracking.disable(&a);
        assert!(!tracking.switch.load(Ordering::Relaxed));
    }

    #[test]
    fn noloop_skips_the_writer_only() {
        let tracking = table();
        let (a, b) = (client(1), client(2));
        let (a_inbox, b_inbox) = (inbox(&a, true), inbox(&b, true));
        let noloop = Mode {
            noloop: true,
            ..Mode::default()
        };
        tracking.enable(&a, noloop, None, Vec::new()).unwrap();
        tracking.enable(&b, noloop, None, Vec::new()).unwrap();
        let key = [Bytes::from_static(b"k")];
        tracking.remember(1, key.iter());
        tracking.remember(2, key.iter());
        assert_eq!(tracking.counts(), (2, 1, 2, 0));
        tracking.invalidate(changed(&["k"]), Some(1));
        assert_eq!(drained(&a_inbox), "");
        assert_eq!(
            drained(&b_inbox),
            ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
    }

    #[test]
    fn bcast_groups_keys_per_prefix_and_flush_reaches_everyone() {
        let tracking = table();
        let a = client(1);
        let a_inbox = inbox(&a, true);
        let bcast = Mode {
            bcast: true,
            ..Mode::default()
        };
        let prefixes = vec![Bytes::from_static(b"p:"), Bytes::from_static(b"q")];
        tracking.enable(&a, bcast, None, prefixes).unwrap();
        assert_eq!(tracking.counts(), (1, 0, 0, 2));
        tracking.invalidate(changed(&["p:2", "zz", "q", "p:1", "p:2"]), None);
        assert_eq!(
            drained(&a_inbox),
            ">2\r\n$10\r\ninvalidate\r\n*2\r\n$3\r\np:1\r\n$3\r\np:2\r\n\
             >2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nq\r\n"
        );
        let overlapping = tracking.enable(&a, bcast, None, vec![Bytes::from_static(b"p:x")]);
        assert_eq!(
            overlapping,
            Err(Frame::error(
                "ERR Prefix 'p:x' overlaps with an existing prefix 'p:'. Prefixes for a single client must not overlap."
            ))
        );
        tracking.invalidate(
            Invalidations {
                keys: Vec::new(),
                flushed: true,
            },
            None,
        );
        assert_eq!(drained(&a_inbox), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    }

    #[test]
    fn redirection_to_a_resp2_subscriber_and_when_it_is_gone() {
        let tracking = table();
        let (a, target) = (client(1), client(2));
        let a_inbox = inbox(&a, true);
        let target_inbox = inbox(&target, false);
        tracking
            .enable(&a, Mode::default(), Some(target.clone()), Vec::new())
            .unwrap();
        tracking.remember(1, [Bytes::from_static(b"k")].iter());
        tracking.invalidate(changed(&["k"]), None);
        assert_eq!(
            drained(&target_inbox),
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        let clients = crate::clients::Clients::default();
        clients.register(target.clone());
        clients.unregister(2);
        tracking.remember(1, [Bytes::from_static(b"k")].iter());
        tracking.invalidate(changed(&["k"]), None);
        assert_eq!(
            drained(&a_inbox),
            ">2\r\n$21\r\ntracking-redir-broken\r\n:2\r\n"
        );
        assert_eq!(
            a.details().tracking,
            Some(TrackingFlags {
                bcast: false,
                broken_redirect: true,
                redirect: 2
            })
        );
    }

    #[test]
    fn the_table_stays_within_its_bound() {
        let tracking = table();
        tracking.set_max_keys(2);
        let a = client(1);
        let a_inbox = inbox(&a, true);
        tracking
            .enable(&a, Mode::default(), None, Vec::new())
            .unwrap();
        let keys: Vec<Bytes> = ["a", "b", "c"]
            .iter()
            .map(|key| Bytes::copy_from_slice(key.as_bytes()))
            .collect();
        tracking.remember(1, keys.iter());
        assert_eq!(tracking.counts(), (1, 2, 2, 0));
        // The dropped key was announced.
        assert!(drained(&a_inbox).starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n"));
    }
}
