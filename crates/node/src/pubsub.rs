//! Pub/Sub: who listens to which channel, pattern or shard channel, and the
//! outbox each subscribed connection drains.
//!
//! Messages are not replicated state: PUBLISH delivers to the subscribers of
//! this node (and a cluster node forwards it to the other nodes, see
//! `crate::cluster_node`). A publisher encodes the message into each
//! subscriber's outbox and wakes its connection; an outbox past the pubsub
//! class of `client-output-buffer-limit` (hard limit, or soft limit for longer
//! than its seconds) gets its client disconnected instead of growing memory.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use keyspace::glob::glob_match;
use resp::{encode, Frame, Protocol};
use tokio::sync::Notify;

use crate::clients::ClientInfo;
use crate::cluster_node::Target;
use crate::server::Shared;
use crate::session::Session;
use keyspace::CommandSpec;

/// One subscribed connection's delivery side.
pub struct Subscriber {
    pub client: Arc<ClientInfo>,
    resp3: AtomicBool,
    outbox: Mutex<Outbox>,
    ready: Notify,
}

#[derive(Default)]
struct Outbox {
    bytes: BytesMut,
    /// Since when the outbox has been above the soft limit.
    over_soft_since: Option<Instant>,
}

/// The pubsub class of `client-output-buffer-limit` (0: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputLimits {
    pub hard_bytes: usize,
    pub soft_bytes: usize,
    pub soft_seconds: u64,
}

impl OutputLimits {
    /// The pubsub class from the parameter's text (`normal 0 0 0 slave ...
    /// pubsub 33554432 8388608 60`); Redis's defaults when it is missing.
    pub fn parse(text: &str) -> OutputLimits {
        let words: Vec<&str> = text.split_whitespace().collect();
        for chunk in words.chunks(4) {
            if let [class, hard, soft, seconds] = chunk {
                if class.eq_ignore_ascii_case("pubsub") {
                    return OutputLimits {
                        hard_bytes: parse_memory(hard).unwrap_or(32 << 20),
                        soft_bytes: parse_memory(soft).unwrap_or(8 << 20),
                        soft_seconds: seconds.parse().unwrap_or(60),
                    };
                }
            }
        }
        OutputLimits {
            hard_bytes: 32 << 20,
            soft_bytes: 8 << 20,
            soft_seconds: 60,
        }
    }
}

/// `1024`, `8mb`, `1gb` ...
fn parse_memory(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let (digits, unit) = lower
        .find(|c: char| !c.is_ascii_digit())
        .map(|split| lower.split_at(split))
        .unwrap_or((&lower, ""));
    let number: usize = digits.parse().ok()?;
    let multiplier = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(multiplier)
}

impl Subscriber {
    pub fn new(client: Arc<ClientInfo>, protocol: Protocol) -> Arc<Subscriber> {
        let subscriber = Arc::new(Subscriber {
            client: client.clone(),
            resp3: AtomicBool::new(protocol == Protocol::Resp3),
            outbox: Mutex::new(Outbox::default()),
            ready: Notify::new(),
        });
        client.set_inbox(&subscriber);
        subscriber
    }

    /// Queues bytes already in the form of the connection's protocol (see
    /// [`Subscriber::is_resp3`]).
    pub fn deliver_wire(&self, wire: &[u8], limits: OutputLimits) {
        self.queue(std::iter::once(wire), limits);
    }

    pub fn is_resp3(&self) -> bool {
        self.resp3.load(Ordering::Relaxed)
    }

    pub fn set_protocol(&self, protocol: Protocol) {
        self.resp3
            .store(protocol == Protocol::Resp3, Ordering::Relaxed);
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a message; a subscriber past its limits is disconnected instead.
    fn deliver(&self, message: &Message, limits: OutputLimits) {
        self.deliver_all(std::iter::once(message), limits);
    }

    /// Queues messages in order, taking the outbox once.
    fn deliver_all<'m>(&self, messages: impl Iterator<Item = &'m Message>, limits: OutputLimits) {
        let resp3 = self.resp3.load(Ordering::Relaxed);
        self.queue(
            messages.map(|message| {
                if resp3 {
                    &message.resp3[..]
                } else {
                    &message.resp2[..]
                }
            }),
            limits,
        );
    }

    /// Appends wire-form messages to the outbox, taking it once.
    fn queue<'w>(&self, wires: impl Iterator<Item = &'w [u8]>, limits: OutputLimits) {
        let mut outbox = self.outbox();
        // A non-empty outbox was already announced and not drained yet.
        let announced = !outbox.bytes.is_empty();
        for wire in wires {
            outbox.bytes.extend_from_slice(wire);
        }
        let size = outbox.bytes.len();
        let mut overflow = limits.hard_bytes > 0 && size > limits.hard_bytes;
        if limits.soft_bytes > 0 && size > limits.soft_bytes {
            let since = *outbox.over_soft_since.get_or_insert_with(Instant::now);
            overflow |= since.elapsed() >= Duration::from_secs(limits.soft_seconds);
        } else {
            outbox.over_soft_since = None;
        }
        if overflow {
            outbox.bytes = BytesMut::new();
            drop(outbox);
            tracing::warn!(
                client = self.client.id,
                "closing a subscriber past client-output-buffer-limit pubsub"
            );
            self.client.kill();
            return;
        }
        drop(outbox);
        if !announced {
            self.ready.notify_one();
        }
    }

    /// Moves the queued messages to `out`.
    pub fn drain_into(&self, out: &mut BytesMut) {
        let mut outbox = self.outbox();
        if out.is_empty() {
            // Hand over the whole buffer instead of copying it.
            std::mem::swap(out, &mut outbox.bytes);
        } else if !outbox.bytes.is_empty() {
            out.extend_from_slice(&outbox.bytes);
            outbox.bytes.clear();
        }
        outbox.over_soft_since = None;
    }

    /// Waits until messages are queued.
    pub async fn ready(&self) {
        self.ready.notified().await
    }
}

/// Messages PUBLISHed by one connection, held until it runs anything else
/// (or its batch of requests ends): a pipeline of PUBLISH commands then
/// takes each subscriber's outbox once rather than once per message.
/// Messages keep their order per subscriber, and nothing the connection does
/// afterwards (a write's keyspace event, a script's PUBLISH) overtakes them.
#[derive(Default)]
pub struct Deliveries {
    messages: Vec<Message>,
    /// (subscriber, index into `messages`), in publishing order.
    pending: Vec<(Arc<Subscriber>, usize)>,
    limits: Option<OutputLimits>,
}

impl Deliveries {
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Delivers everything held, each subscriber's messages in one go.
    pub fn flush(&mut self) {
        let Some(limits) = self.limits else {
            return;
        };
        // Stable: each subscriber's messages stay in publishing order.
        self.pending
            .sort_by_key(|(subscriber, _)| subscriber.client.id);
        let mut rest = &self.pending[..];
        while let Some((first, _)) = rest.first() {
            let run = rest
                .iter()
                .take_while(|(subscriber, _)| subscriber.client.id == first.client.id)
                .count();
            let messages = &self.messages;
            first.deliver_all(
                rest[..run].iter().map(|(_, index)| &messages[*index]),
                limits,
            );
            rest = &rest[run..];
        }
        self.pending.clear();
        self.messages.clear();
    }
}

impl Drop for Deliveries {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Where a publish goes: to the subscribers now, or held by the publisher.
enum Sink<'d> {
    Now(OutputLimits),
    Held(&'d mut Deliveries, OutputLimits),
}

impl Sink<'_> {
    fn send(&mut self, subscribers: Vec<Arc<Subscriber>>, message: Message) {
        match self {
            Sink::Now(limits) => {
                for subscriber in subscribers {
                    subscriber.deliver(&message, *limits);
                }
            }
            Sink::Held(deliveries, limits) => {
                deliveries.limits = Some(*limits);
                let index = deliveries.messages.len();
                deliveries.messages.push(message);
                deliveries.pending.extend(
                    subscribers
                        .into_iter()
                        .map(|subscriber| (subscriber, index)),
                );
            }
        }
    }
}

/// A message encoded once per protocol, for every subscriber.
struct Message {
    resp2: BytesMut,
    resp3: BytesMut,
}

impl Message {
    fn new(frame: &Frame) -> Message {
        let mut resp2 = BytesMut::new();
        let mut resp3 = BytesMut::new();
        encode(frame, Protocol::Resp2, &mut resp2);
        encode(frame, Protocol::Resp3, &mut resp3);
        Message { resp2, resp3 }
    }
}

type Listeners = BTreeMap<Bytes, BTreeMap<u64, Arc<Subscriber>>>;

/// The node's subscriptions.
#[derive(Default)]
pub struct PubSub {
    /// Connections that sent MONITOR, and how many (checked per command
    /// without a lock).
    monitors: Mutex<BTreeMap<u64, Arc<Subscriber>>>,
    monitor_count: std::sync::atomic::AtomicUsize,
    channels: Mutex<Listeners>,
    patterns: Mutex<Listeners>,
    shard_channels: Mutex<Listeners>,
    /// The pubsub class of `client-output-buffer-limit`, kept current by
    /// CONFIG SET.
    limits: Mutex<OutputLimits>,
}

/// Delivers what scripts published to this node's subscribers and, through
/// `forwarder`, the other nodes' (as PUBLISH and SPUBLISH do).
pub fn deliver_script_messages(
    pubsub: &PubSub,
    forwarder: Option<&Forwarder>,
    messages: Vec<keyspace::Published>,
) {
    let limits = pubsub.limits();
    for message in messages {
        if message.shard {
            pubsub.publish_shard(&message.channel, &message.message, limits);
            if let Some(forwarder) = forwarder {
                forwarder.forward_shard(&message.channel, &message.message);
            }
        } else {
            pubsub.publish(&message.channel, &message.message, limits);
            if let Some(forwarder) = forwarder {
                forwarder.forward(&message.channel, &message.message);
            }
        }
    }
}

/// Publishes keyspace events on `__keyspace@<db>__:<key>` (message: the
/// event) and `__keyevent@<db>__:<event>` (message: the key), as the flags ask.
pub fn publish_events(pubsub: &PubSub, flags: u32, events: Vec<keyspace::notify::Event>) {
    use keyspace::notify::class;
    let limits = pubsub.limits();
    for event in events {
        if flags & class::KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{}__:", event.db).into_bytes();
            channel.extend_from_slice(&event.key);
            pubsub.publish(
                &Bytes::from(channel),
                &Bytes::from_static(event.name.as_bytes()),
                limits,
            );
        }
        if flags & class::KEYEVENT != 0 {
            let channel = format!("__keyevent@{}__:{}", event.db, event.name);
            pubsub.publish(&Bytes::from(channel), &event.key, limits);
        }
    }
}

/// Which kind of subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    ShardChannel,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl PubSub {
    pub fn set_limits(&self, limits: OutputLimits) {
        *self
            .limits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = limits;
    }

    pub fn limits(&self) -> OutputLimits {
        *self
            .limits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn listeners(&self, kind: Kind) -> &Mutex<Listeners> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::ShardChannel => &self.shard_channels,
        }
    }

    pub fn subscribe(&self, kind: Kind, name: &Bytes, subscriber: &Arc<Subscriber>) {
        lock(self.listeners(kind))
            .entry(name.clone())
            .or_default()
            .insert(subscriber.client.id, subscriber.clone());
    }

    pub fn unsubscribe(&self, kind: Kind, name: &[u8], client: u64) {
        let mut listeners = lock(self.listeners(kind));
        if let Some(clients) = listeners.get_mut(name) {
            clients.remove(&client);
            if clients.is_empty() {
                listeners.remove(name);
            }
        }
    }

    /// Delivers to this node's subscribers of `channel` and of the patterns
    /// matching it; answers how many received it.
    pub fn publish(&self, channel: &Bytes, message: &Bytes, limits: OutputLimits) -> usize {
        self.publish_to(channel, message, Sink::Now(limits))
    }

    /// PUBLISH whose deliveries `deliveries` holds for the publisher.
    pub fn publish_held(
        &self,
        channel: &Bytes,
        message: &Bytes,
        limits: OutputLimits,
        deliveries: &mut Deliveries,
    ) -> usize {
        self.publish_to(channel, message, Sink::Held(deliveries, limits))
    }

    fn publish_to(&self, channel: &Bytes, message: &Bytes, mut sink: Sink<'_>) -> usize {
        let direct: Vec<Arc<Subscriber>> = lock(&self.channels)
            .get(channel)
            .map(|clients| clients.values().cloned().collect())
            .unwrap_or_default();
        let mut received = direct.len();
        if !direct.is_empty() {
            let frame = Message::new(&Frame::Push(vec![
                Frame::bulk("message"),
                Frame::Bulk(channel.clone()),
                Frame::Bulk(message.clone()),
            ]));
            sink.send(direct, frame);
        }
        let matching: Vec<(Bytes, Vec<Arc<Subscriber>>)> = lock(&self.patterns)
            .iter()
            .filter(|(pattern, _)| glob_match(pattern, channel, false))
            .map(|(pattern, clients)| (pattern.clone(), clients.values().cloned().collect()))
            .collect();
        for (pattern, subscribers) in matching {
            received += subscribers.len();
            let frame = Message::new(&Frame::Push(vec![
                Frame::bulk("pmessage"),
                Frame::Bulk(pattern),
                Frame::Bulk(channel.clone()),
                Frame::Bulk(message.clone()),
            ]));
            sink.send(subscribers, frame);
        }
        received
    }

    /// SPUBLISH: delivers to this node's subscribers of a shard channel.
    pub fn publish_shard(&self, channel: &Bytes, message: &Bytes, limits: OutputLimits) -> usize {
        let subscribers: Vec<Arc<Subscriber>> = lock(&self.shard_channels)
            .get(channel)
            .map(|clients| clients.values().cloned().collect())
            .unwrap_or_default();
        let frame = Message::new(&Frame::Push(vec![
            Frame::bulk("smessage"),
            Frame::Bulk(channel.clone()),
            Frame::Bulk(message.clone()),
        ]));
        for subscriber in &subscribers {
            subscriber.deliver(&frame, limits);
        }
        subscribers.len()
    }

    /// Active channels (with at least one subscriber) matching `pattern`.
    pub fn active(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        lock(self.listeners(kind))
            .keys()
            .filter(|name| pattern.is_none_or(|pattern| glob_match(pattern, name, false)))
            .cloned()
            .collect()
    }

    pub fn count(&self, kind: Kind, name: &[u8]) -> usize {
        lock(self.listeners(kind))
            .get(name)
            .map_or(0, BTreeMap::len)
    }

    /// Distinct patterns subscribed to.
    pub fn pattern_count(&self) -> usize {
        lock(&self.patterns).len()
    }

    /// MONITOR: `subscriber` gets a line for every command from now on.
    pub fn add_monitor(&self, subscriber: &Arc<Subscriber>) {
        let mut monitors = lock(&self.monitors);
        monitors.insert(subscriber.client.id, subscriber.clone());
        self.monitor_count.store(monitors.len(), Ordering::Relaxed);
    }

    pub fn remove_monitor(&self, client: u64) {
        let mut monitors = lock(&self.monitors);
        monitors.remove(&client);
        self.monitor_count.store(monitors.len(), Ordering::Relaxed);
    }

    /// Whether any connection is monitoring (a relaxed read: a command that
    /// races a new MONITOR may be missed, as it may in Redis).
    pub fn monitoring(&self) -> bool {
        self.monitor_count.load(Ordering::Relaxed) > 0
    }

    /// Sends a MONITOR line (a whole simple-string reply, the same in both
    /// protocols) to every monitor.
    pub fn feed_monitors(&self, line: BytesMut) {
        let monitors: Vec<Arc<Subscriber>> = lock(&self.monitors).values().cloned().collect();
        let message = Message {
            resp3: line.clone(),
            resp2: line,
        };
        let limits = self.limits();
        for monitor in monitors {
            monitor.deliver(&message, limits);
        }
    }

    /// Removes every subscription of a closing connection.
    pub fn forget(&self, client: u64, subscriptions: &Subscriptions) {
        if subscriptions.monitor {
            self.remove_monitor(client);
        }
        for (kind, names) in subscriptions.all() {
            for name in names {
                self.unsubscribe(kind, name, client);
            }
        }
    }
}

/// One connection's subscriptions, by kind.
#[derive(Default)]
pub struct Subscriptions {
    pub subscriber: Option<Arc<Subscriber>>,
    /// The connection sent MONITOR.
    pub monitor: bool,
    pub channels: BTreeSet<Bytes>,
    pub patterns: BTreeSet<Bytes>,
    pub shard_channels: BTreeSet<Bytes>,
}

impl Subscriptions {
    pub fn set(&mut self, kind: Kind) -> &mut BTreeSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::ShardChannel => &mut self.shard_channels,
        }
    }

    fn all(&self) -> [(Kind, &BTreeSet<Bytes>); 3] {
        [
            (Kind::Channel, &self.channels),
            (Kind::Pattern, &self.patterns),
            (Kind::ShardChannel, &self.shard_channels),
        ]
    }

    /// Whether the connection is in subscribed mode.
    pub fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }

    /// The count Redis reports after (un)subscribing: channels and patterns
    /// together, shard channels on their own.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::ShardChannel => self.shard_channels.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }
}

/// On a cluster node, where a shard channel command must run: `Some(reply)`
/// (MOVED, CROSSSLOT ...) when not here.
fn shard_channel_refusal(
    shared: &Shared,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Option<Frame> {
    let node = shared.cluster.as_ref()?;
    match node.target(spec, arguments) {
        Target::Reply(reply) => Some(reply),
        Target::Local(_) | Target::Unsharded => None,
    }
}

/// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UN- forms: one reply per
/// channel, as Redis sends them.
pub fn subscription_command(
    shared: &Shared,
    session: &mut Session,
    spec: &CommandSpec,
    arguments: &[Bytes],
) -> Vec<Frame> {
    let name = spec.name;
    let kind = match name {
        "ssubscribe" | "sunsubscribe" => Kind::ShardChannel,
        "psubscribe" | "punsubscribe" => Kind::Pattern,
        _ => Kind::Channel,
    };
    if kind == Kind::ShardChannel && arguments.len() > 1 {
        if let Some(refusal) = shard_channel_refusal(shared, spec, arguments) {
            return vec![refusal];
        }
    }
    let client = session.client.id;
    let mut replies = Vec::new();
    if name.contains("unsubscribe") {
        let names: Vec<Bytes> = if arguments.len() > 1 {
            arguments[1..].to_vec()
        } else {
            session.subscriptions.set(kind).iter().cloned().collect()
        };
        if names.is_empty() {
            replies.push(Frame::Push(vec![
                Frame::bulk(name.to_string()),
                Frame::Null,
                Frame::Integer(session.subscriptions.count(kind) as i64),
            ]));
        }
        for channel in names {
            if session.subscriptions.set(kind).remove(&channel) {
                shared.local.pubsub.unsubscribe(kind, &channel, client);
            }
            replies.push(Frame::Push(vec![
                Frame::bulk(name.to_string()),
                Frame::Bulk(channel),
                Frame::Integer(session.subscriptions.count(kind) as i64),
            ]));
        }
        // A tracking connection keeps its outbox for invalidations.
        if !session.subscriptions.active() && session.tracking.is_none() {
            session.subscriptions.subscriber = None;
        }
    } else {
        let subscriber = session
            .subscriptions
            .subscriber
            .get_or_insert_with(|| Subscriber::new(session.client.clone(), session.protocol))
            .clone();
        for channel in &arguments[1..] {
            if session.subscriptions.set(kind).insert(channel.clone()) {
                shared.local.pubsub.subscribe(kind, channel, &subscriber);
            }
            replies.push(Frame::Push(vec![
                Frame::bulk(name.to_string()),
                Frame::Bulk(channel.clone()),
                Frame::Integer(session.subscriptions.count(kind) as i64),
            ]));
        }
    }
    replies
}

/// PUBLISH (here, and forwarded to the other nodes of a cluster), SPUBLISH
/// (on the node serving the channel's slot) and SLOTRAFT PUBLISH-LOCAL (a
/// forwarded PUBLISH).
pub fn publish_command(
    shared: &Shared,
    spec: &CommandSpec,
    arguments: &[Bytes],
    deliveries: Option<&mut Deliveries>,
) -> Frame {
    let limits = shared.local.pubsub.limits();
    match spec.name {
        "spublish" => {
            if let Some(refusal) = shard_channel_refusal(shared, spec, arguments) {
                return refusal;
            }
            let received = shared
                .local
                .pubsub
                .publish_shard(&arguments[1], &arguments[2], limits);
            // The shard's other replicas may have subscribers too (a client
            // may SSUBSCRIBE on any of them, or stay on a former leader).
            if let Some(forwarder) = shared.local.forwarder() {
                forwarder.forward_shard(&arguments[1], &arguments[2]);
            }
            Frame::Integer(received as i64)
        }
        "slotraft|publish-local" => {
            let received = shared
                .local
                .pubsub
                .publish(&arguments[2], &arguments[3], limits);
            Frame::Integer(received as i64)
        }
        "slotraft|spublish-local" => {
            let received = shared
                .local
                .pubsub
                .publish_shard(&arguments[2], &arguments[3], limits);
            Frame::Integer(received as i64)
        }
        _ => {
            let received = match deliveries {
                Some(deliveries) => shared.local.pubsub.publish_held(
                    &arguments[1],
                    &arguments[2],
                    limits,
                    deliveries,
                ),
                None => shared
                    .local
                    .pubsub
                    .publish(&arguments[1], &arguments[2], limits),
            };
            if let Some(forwarder) = shared.local.forwarder() {
                forwarder.forward(&arguments[1], &arguments[2]);
            }
            Frame::Integer(received as i64)
        }
    }
}

const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB / HELP
/// about this node's subscriptions.
pub fn introspect(shared: &Shared, spec: &CommandSpec, arguments: &[Bytes]) -> Frame {
    let list = |kind: Kind| -> Frame {
        if arguments.len() > 3 {
            return Frame::error_owned(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(&arguments[1])
            ));
        }
        Frame::Array(
            shared
                .local
                .pubsub
                .active(kind, arguments.get(2).map(|pattern| &pattern[..]))
                .into_iter()
                .map(Frame::Bulk)
                .collect(),
        )
    };
    let counts = |kind: Kind| -> Frame {
        Frame::Map(
            arguments[2..]
                .iter()
                .map(|channel| {
                    (
                        Frame::Bulk(channel.clone()),
                        Frame::Integer(shared.local.pubsub.count(kind, channel) as i64),
                    )
                })
                .collect(),
        )
    };
    match spec.name {
        "pubsub|channels" => list(Kind::Channel),
        "pubsub|shardchannels" => list(Kind::ShardChannel),
        "pubsub|numsub" => counts(Kind::Channel),
        "pubsub|shardnumsub" => counts(Kind::ShardChannel),
        "pubsub|numpat" => Frame::Integer(shared.local.pubsub.pattern_count() as i64),
        _ => Frame::Array(
            PUBSUB_HELP
                .iter()
                .map(|line| Frame::Simple(Bytes::copy_from_slice(line.as_bytes())))
                .collect(),
        ),
    }
}

/// Messages waiting to be forwarded to the other nodes; past it PUBLISH
/// still delivers locally but the others miss the message (logged).
const FORWARD_QUEUE: usize = 65_536;
/// Messages sent to a peer in one write.
const FORWARD_BATCH: usize = 256;
const PEER_LIMIT: Duration = Duration::from_secs(2);

/// Forwards PUBLISH and SPUBLISH to the other nodes of a cluster (`SLOTRAFT
/// PUBLISH-LOCAL` / `SPUBLISH-LOCAL`), over one connection per peer kept open
/// between messages.
#[derive(Clone)]
pub struct Forwarder {
    queue: tokio::sync::mpsc::Sender<Forwarded>,
}

/// A message to forward: channel, message, and whether it is a shard
/// channel's.
type Forwarded = (Bytes, Bytes, bool);

impl Forwarder {
    /// Starts the forwarding task; `peers` answers the other nodes' RESP
    /// addresses at each batch.
    pub fn start(peers: impl Fn() -> Vec<String> + Send + 'static) -> Forwarder {
        let (queue, receiver) = tokio::sync::mpsc::channel(FORWARD_QUEUE);
        tokio::spawn(forward_loop(receiver, peers));
        Forwarder { queue }
    }

    pub fn forward(&self, channel: &Bytes, message: &Bytes) {
        self.send((channel.clone(), message.clone(), false));
    }

    pub fn forward_shard(&self, channel: &Bytes, message: &Bytes) {
        self.send((channel.clone(), message.clone(), true));
    }

    fn send(&self, item: Forwarded) {
        if self.queue.try_send(item).is_err() {
            tracing::warn!(
                "the publish forwarding queue is full; a message reaches this node only"
            );
        }
    }
}

async fn forward_loop(
    mut receiver: tokio::sync::mpsc::Receiver<Forwarded>,
    peers: impl Fn() -> Vec<String>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut connections: BTreeMap<String, tokio::net::TcpStream> = BTreeMap::new();
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        while batch.len() < FORWARD_BATCH {
            match receiver.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        let mut wire = Vec::new();
        for (channel, message, shard) in &batch {
            let command: &[u8] = if *shard {
                b"SPUBLISH-LOCAL"
            } else {
                b"PUBLISH-LOCAL"
            };
            wire.extend(crate::resp_client::encode_request(&[
                b"SLOTRAFT",
                command,
                channel,
                message,
            ]));
        }
        for address in peers() {
            let sent = tokio::time::timeout(PEER_LIMIT, async {
                if !connections.contains_key(&address) {
                    let mut stream = tokio::net::TcpStream::connect(&address).await?;
                    stream.set_nodelay(true)?;
                    if let Some(auth) = crate::resp_client::auth_request() {
                        // Authenticate first (a node's own requirepass). A
                        // refusal keeps no connection; a peer with no
                        // password at all needs none.
                        stream.write_all(&auth).await?;
                        let mut reply = Vec::new();
                        let mut chunk = [0u8; 512];
                        let frame = loop {
                            if let Ok(Some((frame, _))) = resp::parse_reply(&reply) {
                                break frame;
                            }
                            let count = stream.read(&mut chunk).await?;
                            if count == 0 {
                                return Err(std::io::Error::from(
                                    std::io::ErrorKind::UnexpectedEof,
                                ));
                            }
                            reply.extend_from_slice(&chunk[..count]);
                        };
                        if frame.is_error() && !crate::resp_client::no_password_configured(&frame) {
                            return Err(std::io::Error::other("the peer refused AUTH"));
                        }
                    }
                    connections.insert(address.clone(), stream);
                }
                let Some(stream) = connections.get_mut(&address) else {
                    return Ok(());
                };
                stream.write_all(&wire).await?;
                // Read the replies, so the peer never blocks on a full socket.
                let mut replies = 0;
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                while replies < batch.len() {
                    let count = stream.read(&mut chunk).await?;
                    if count == 0 {
                        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                    }
                    buffer.extend_from_slice(&chunk[..count]);
                    while let Ok(Some((frame, used))) = resp::parse_reply(&buffer) {
                        if matches!(&frame, resp::Frame::Error(text) if text.starts_with(b"NOAUTH"))
                        {
                            // The peer wants a password this node does not
                            // have (yet): drop the connection, retry later.
                            return Err(std::io::Error::other("the peer asks for AUTH"));
                        }
                        buffer.drain(..used);
                        replies += 1;
                    }
                }
                Ok::<(), std::io::Error>(())
            })
            .await;
            if !matches!(sent, Ok(Ok(()))) {
                connections.remove(&address);
                tracing::debug!(%address, "forwarding PUBLISH failed");
            }
        }
    }
}

/// Shows the commands scripts ran to the monitors, as Redis shows its Lua
/// client: `[<db> lua]`.
pub fn feed_script_calls(pubsub: &PubSub, calls: Vec<(usize, Vec<Bytes>)>) {
    if !pubsub.monitoring() {
        return;
    }
    for (db, arguments) in calls {
        pubsub.feed_monitors(monitor_line(
            crate::clock::unix_micros(),
            db,
            "lua",
            &arguments,
        ));
    }
}

/// The positions of a command's arguments that MONITOR and SLOWLOG show as
/// `(redacted)`: AUTH's user and password, HELLO's after its AUTH.
pub fn redacted_arguments(arguments: &[Bytes]) -> std::ops::Range<usize> {
    let Some(name) = arguments.first() else {
        return 0..0;
    };
    let from = if name.eq_ignore_ascii_case(b"auth") {
        1
    } else if name.eq_ignore_ascii_case(b"hello") {
        match arguments
            .iter()
            .position(|word| word.eq_ignore_ascii_case(b"auth"))
        {
            Some(auth) => auth + 1,
            None => return 0..0,
        }
    } else {
        return 0..0;
    };
    from..from + 2
}

/// A MONITOR line for a command a client sent: `+<seconds>.<micros> [<db>
/// <address>] "arg" ...`, each argument quoted as Redis quotes it, passwords
/// redacted.
pub fn monitor_line(now_micros: u64, db: usize, peer: &str, arguments: &[Bytes]) -> BytesMut {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(64);
    let _ = write!(
        text,
        "+{}.{:06} [{} {}]",
        now_micros / 1_000_000,
        now_micros % 1_000_000,
        db,
        peer
    );
    let redacted = redacted_arguments(arguments);
    for (index, argument) in arguments.iter().enumerate() {
        text.push(' ');
        if redacted.contains(&index) {
            text.push_str("\"(redacted)\"");
        } else {
            quote(&mut text, argument);
        }
    }
    text.push_str("\r\n");
    BytesMut::from(text.as_bytes())
}

/// Redis's `sdscatrepr`: in double quotes, with `\\`, `\"`, `\n`, `\r`, `\t`,
/// `\a`, `\b` escaped and other unprintable bytes as `\xHH`.
fn quote(out: &mut String, bytes: &[u8]) {
    use std::fmt::Write as _;
    out.push('"');
    for &byte in bytes {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(byte as char),
            _ => {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_limits_parse_the_pubsub_class() {
        assert_eq!(
            OutputLimits::parse(
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
            ),
            OutputLimits {
                hard_bytes: 33554432,
                soft_bytes: 8388608,
                soft_seconds: 60
            }
        );
        assert_eq!(
            OutputLimits::parse("pubsub 1mb 512kb 5"),
            OutputLimits {
                hard_bytes: 1 << 20,
                soft_bytes: 512 << 10,
                soft_seconds: 5
            }
        );
    }
}
