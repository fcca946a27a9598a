//! A client of the simulated group. It reaches replicas the way a node's
//! request path does, through `replication::serve`: writes are proposed and
//! their fate classified, reads are checked for linearizability and then read
//! the applied state. A refused request follows the leader hint, as a Redis
//! client follows MOVED.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use replication::serve::{self, Proposal, ReadRefusal};
use replication::state_machine::lock;
use replication::{NodeId, Op, Request};
use resp::{Frame, Protocol};

use crate::group::{Clocks, Handles};
use crate::history::{now_ns, Call, History, Observed, Operation, Outcome};
use crate::node_host::RespClient;

/// How long a write may wait for its commit (the node's limit).
pub const WRITE_LIMIT: Duration = Duration::from_secs(5);

/// The sliding-window rate limiter of the seed documents, over a sorted set
/// whose scores are admission times; the time is the script's own (`TIME`,
/// the log entry's time here). Returns whether it admitted, and that time.
pub const LIMITER: &str = "\
local key = KEYS[1]
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
  return {1, now}
end
return {0, now}";

/// The limiter's window and the admissions it allows per window.
pub const LIMIT_WINDOW_MS: u64 = 1_000;
pub const LIMIT: u64 = 5;

/// How long a client waits to connect to a node (or for its READONLY).
const CONNECT_LIMIT: Duration = Duration::from_secs(1);

/// Attempts per operation when replicas send the client elsewhere.
const ATTEMPTS: usize = 3;

/// How reads are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Through the linearizability check, as the node serves them.
    Linearizable,
    /// Deliberately broken, to prove the checkers can fail: any replica's
    /// applied state is read as if it were linearizable.
    AnyReplica,
}

/// One client: where it sends requests next, and its seed source.
pub struct Client {
    pub id: u64,
    pub node: NodeId,
    pub nodes: Vec<NodeId>,
    pub handles: Handles,
    pub history: History,
    pub read_mode: ReadMode,
    /// Deliberately broken, to prove the checkers can fail: a SET or SADD
    /// whose commit was not confirmed (the leader had only proposed it) is
    /// reported to the application as done, as a server acknowledging
    /// before commit would.
    pub ack_before_commit: bool,
    /// The replicas' clocks (a request carries its replica's time).
    pub clocks: Clocks,
    /// How requests reach the replicas.
    pub transport: Transport,
    /// On a cluster: the node each slot was last served by (a cluster
    /// client's slot map, learned from MOVED); `None` for a single group,
    /// where one leader serves every key.
    pub slots: Option<BTreeMap<u16, NodeId>>,
    /// Attempts per operation when nodes send the client elsewhere.
    pub attempts: usize,
    rotation: usize,
}

/// How a client reaches the replicas.
pub enum Transport {
    /// Through `replication::serve`, as the node's request path does (the
    /// hosts run the replication stack alone).
    Direct,
    /// Over RESP to `slotraft node` hosts, with a connection per node.
    Resp(BTreeMap<NodeId, RespClient>),
}

/// What an error reply asks of the client.
enum Redirect {
    /// MOVED to this node: refused there, retry at the leader.
    Moved(NodeId),
    /// ASK: refused there, ask this node once (after ASKING).
    Ask(NodeId),
    /// CLUSTERDOWN, TRYAGAIN, EXECABORT: refused, retry later.
    Refused,
    /// UNKNOWN: proposed, then its fate was lost.
    Unknown,
}

fn redirect(reply: &Frame) -> Option<Redirect> {
    let Frame::Error(text) = reply else {
        return None;
    };
    let text = String::from_utf8_lossy(text);
    let mut words = text.split(' ');
    match words.next()? {
        word @ ("MOVED" | "ASK") => {
            let address = words.nth(1)?;
            let host = address.split(':').next()?;
            let node = host.strip_prefix("node")?.parse().ok();
            Some(match node {
                Some(node) if word == "ASK" => Redirect::Ask(node),
                Some(node) => Redirect::Moved(node),
                None => Redirect::Refused,
            })
        }
        "CLUSTERDOWN" | "TRYAGAIN" | "EXECABORT" => Some(Redirect::Refused),
        "UNKNOWN" => Some(Redirect::Unknown),
        _ => None,
    }
}

impl Client {
    pub fn new(id: u64, nodes: Vec<NodeId>, handles: Handles, history: History) -> Client {
        Client {
            id,
            node: nodes[id as usize % nodes.len()],
            nodes,
            handles,
            history,
            read_mode: ReadMode::Linearizable,
            ack_before_commit: false,
            clocks: Clocks::default(),
            transport: Transport::Direct,
            slots: None,
            attempts: ATTEMPTS,
            rotation: id as usize,
        }
    }

    /// Moves on to the next replica (after a failure without a hint).
    fn rotate(&mut self) {
        self.rotation += 1;
        self.node = self.nodes[self.rotation % self.nodes.len()];
    }

    /// Goes where a refusal pointed (as a client follows MOVED); without a
    /// new leader named, tries the next replica a moment later.
    async fn follow(&mut self, leader: Option<NodeId>) {
        match leader {
            Some(leader) if leader != self.node => self.node = leader,
            _ => {
                self.rotate();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Performs `call` on `key`, records it and returns its outcome.
    pub async fn perform(&mut self, key: &str, call: Call, seed: u64) -> Outcome {
        let invoked = now_ns();
        let slot = cluster::key_slot(key.as_bytes());
        if let Some(node) = self.slots.as_ref().and_then(|slots| slots.get(&slot)) {
            self.node = *node;
        }
        let resp = matches!(self.transport, Transport::Resp(_));
        let outcome = match (call.through_log(), resp) {
            (true, false) => self.write(key, &call, seed).await,
            (false, false) => self.read(key, &call).await,
            (true, true) => self.write_resp(key, &call).await,
            (false, true) => self.read_resp(key, &call).await,
        };
        let completed = match outcome {
            Outcome::Unknown => u64::MAX,
            _ => now_ns(),
        };
        if let Some(slots) = &mut self.slots {
            slots.insert(slot, self.node);
        }
        self.history.record(Operation {
            client: self.id,
            key: key.to_string(),
            call,
            invoked,
            completed,
            outcome: outcome.clone(),
            node: self.node,
        });
        outcome
    }

    async fn write(&mut self, key: &str, call: &Call, seed: u64) -> Outcome {
        let commands = commands(key, call);
        for _ in 0..ATTEMPTS {
            let Some(group) = self.handles.get(self.node) else {
                // The replica is down: the connection is refused.
                self.rotate();
                continue;
            };
            let request = Request::new(
                self.clocks.now_ms(self.node),
                seed,
                Op::Exec {
                    db: 0,
                    resp3: false,
                    watched: Vec::new(),
                    commands: commands.clone(),
                },
            );
            match group.propose(request, WRITE_LIMIT).await {
                Proposal::Applied(response) => {
                    return match response.replies.as_slice() {
                        [reply] => Outcome::Done(observe(call, reply)),
                        [] => Outcome::Unknown,
                        replies => Outcome::Done(observe_all(replies)),
                    }
                }
                Proposal::Refused(forward, _) => self.follow(forward.leader_id).await,
                Proposal::Unknown | Proposal::Failed(_) => {
                    self.rotate();
                    if self.ack_before_commit {
                        match call {
                            Call::Set(_) => return Outcome::Done(Observed::Ok),
                            Call::SAdd(_) => return Outcome::Done(Observed::Integer(1)),
                            _ => {}
                        }
                    }
                    return Outcome::Unknown;
                }
            }
        }
        Outcome::Failed
    }

    async fn read(&mut self, key: &str, call: &Call) -> Outcome {
        let command = commands(key, call).remove(0);
        let spec = keyspace::commands::lookup(&command[0]).expect("a known read command");
        for _ in 0..ATTEMPTS {
            let Some(group) = self.handles.get(self.node) else {
                self.rotate();
                continue;
            };
            if self.read_mode == ReadMode::Linearizable {
                match group.check_read().await {
                    Ok(()) => {}
                    Err(ReadRefusal::NotLeader(forward)) => {
                        self.follow(forward.leader_id).await;
                        continue;
                    }
                    Err(ReadRefusal::Down) => {
                        self.rotate();
                        continue;
                    }
                }
            }
            let reply = {
                let mut state = lock(&group.state);
                let now_ms = self.clocks.now_ms(self.node);
                serve::read(
                    &mut state,
                    now_ms,
                    0,
                    Protocol::Resp2,
                    false,
                    spec,
                    &command,
                )
            };
            return Outcome::Done(observe(call, &reply));
        }
        Outcome::Failed
    }
}

impl Client {
    /// The connection to `node`, opened (with READONLY when reads may go to
    /// any replica) if there is none; None when the node cannot be reached.
    async fn connection(&mut self, node: NodeId) -> Option<&mut RespClient> {
        let readonly = self.read_mode == ReadMode::AnyReplica;
        let Transport::Resp(connections) = &mut self.transport else {
            return None;
        };
        match connections.entry(node) {
            std::collections::btree_map::Entry::Occupied(entry) => Some(entry.into_mut()),
            std::collections::btree_map::Entry::Vacant(entry) => {
                let connect = tokio::time::timeout(CONNECT_LIMIT, RespClient::connect(node));
                let Ok(Ok(mut connection)) = connect.await else {
                    return None;
                };
                if readonly {
                    let answer =
                        tokio::time::timeout(CONNECT_LIMIT, connection.call(&["READONLY"]));
                    if !matches!(answer.await, Ok(Ok(Frame::Simple(_)))) {
                        return None;
                    }
                }
                Some(entry.insert(connection))
            }
        }
    }

    fn drop_connection(&mut self, node: NodeId) {
        if let Transport::Resp(connections) = &mut self.transport {
            connections.remove(&node);
        }
    }

    /// The outcome of a write whose fate is unknown (or, under the
    /// ack-before-commit mutation, a SET or SADD reported done).
    fn unknown(&self, call: &Call) -> Outcome {
        if self.ack_before_commit {
            match call {
                Call::Set(_) => return Outcome::Done(Observed::Ok),
                Call::SAdd(_) => return Outcome::Done(Observed::Integer(1)),
                _ => {}
            }
        }
        Outcome::Unknown
    }

    /// A write (or a transaction) over RESP: MULTI ... EXEC for several
    /// commands, sent in one round trip. A reply that never comes leaves the
    /// outcome unknown; a refusal (MOVED, CLUSTERDOWN, TRYAGAIN) is retried
    /// where it points.
    async fn write_resp(&mut self, key: &str, call: &Call) -> Outcome {
        let mut lines = commands(key, call);
        let transaction = lines.len() > 1;
        if transaction {
            lines.insert(0, vec![Bytes::from_static(b"MULTI")]);
            lines.push(vec![Bytes::from_static(b"EXEC")]);
        }
        let mut asking = None;
        for _ in 0..self.attempts {
            let node = asking.unwrap_or(self.node);
            let Some(connection) = self.connection(node).await else {
                // Not connected, nothing sent.
                self.rotate();
                continue;
            };
            let lines = with_asking(&lines, asking.take().is_some());
            let sent =
                tokio::time::timeout(WRITE_LIMIT + CONNECT_LIMIT, connection.pipeline(&lines));
            let Ok(Ok(replies)) = sent.await else {
                self.drop_connection(node);
                self.rotate();
                return self.unknown(call);
            };
            match replies.iter().find_map(redirect) {
                Some(Redirect::Moved(leader)) => {
                    self.follow(Some(leader)).await;
                    continue;
                }
                Some(Redirect::Ask(node)) => {
                    asking = Some(node);
                    continue;
                }
                Some(Redirect::Refused) => {
                    self.follow(None).await;
                    continue;
                }
                Some(Redirect::Unknown) => {
                    self.rotate();
                    return self.unknown(call);
                }
                None => {}
            }
            let Some(reply) = replies.last() else {
                return Outcome::Unknown;
            };
            return match reply {
                Frame::Array(items) if transaction => Outcome::Done(observe_all(items)),
                reply => Outcome::Done(observe(call, reply)),
            };
        }
        Outcome::Failed
    }

    /// A read over RESP; one that gets no answer is tried elsewhere (it
    /// changed nothing).
    async fn read_resp(&mut self, key: &str, call: &Call) -> Outcome {
        let command = commands(key, call);
        let mut asking = None;
        for _ in 0..self.attempts {
            let node = asking.unwrap_or(self.node);
            let Some(connection) = self.connection(node).await else {
                self.rotate();
                continue;
            };
            let command = with_asking(&command, asking.take().is_some());
            let sent = tokio::time::timeout(WRITE_LIMIT, connection.pipeline(&command));
            let Ok(Ok(mut replies)) = sent.await else {
                self.drop_connection(node);
                self.rotate();
                continue;
            };
            let Some(reply) = replies.pop() else {
                continue;
            };
            match redirect(&reply) {
                Some(Redirect::Moved(leader)) => self.follow(Some(leader)).await,
                Some(Redirect::Ask(node)) => asking = Some(node),
                Some(_) => self.follow(None).await,
                None => return Outcome::Done(observe(call, &reply)),
            }
        }
        Outcome::Failed
    }
}

/// `lines` preceded by ASKING when a redirect said ASK (its reply, OK, is
/// read and passed over like any reply that is no redirect).
fn with_asking(lines: &[Vec<Bytes>], asking: bool) -> std::borrow::Cow<'_, [Vec<Bytes>]> {
    if !asking {
        return std::borrow::Cow::Borrowed(lines);
    }
    let mut with = vec![vec![Bytes::from_static(b"ASKING")]];
    with.extend_from_slice(lines);
    std::borrow::Cow::Owned(with)
}

/// The command lines of `call` on `key` (several for a transaction).
fn commands(key: &str, call: &Call) -> Vec<Vec<Bytes>> {
    let (from, to) = (format!("{{{key}}}a"), format!("{{{key}}}b"));
    let lines: Vec<Vec<String>> = match call {
        Call::Transfer(amount) => vec![
            vec!["DECRBY".into(), from, amount.to_string()],
            vec!["INCRBY".into(), to, amount.to_string()],
        ],
        Call::Audit => vec![vec!["GET".into(), from], vec!["GET".into(), to]],
        Call::Limit(member) => vec![vec![
            "EVAL".into(),
            LIMITER.into(),
            "1".into(),
            format!("{{{key}}}"),
            LIMIT_WINDOW_MS.to_string(),
            LIMIT.to_string(),
            member.clone(),
        ]],
        single => return vec![command(key, single)],
    };
    lines
        .into_iter()
        .map(|words| words.into_iter().map(Bytes::from).collect())
        .collect()
}

/// The command line of a single-command `call` on `key`.
fn command(key: &str, call: &Call) -> Vec<Bytes> {
    let words: Vec<&str> = match call {
        Call::Set(value) => vec!["SET", key, value],
        Call::Get => vec!["GET", key],
        Call::Incr => vec!["INCR", key],
        Call::SAdd(member) => vec!["SADD", key, member],
        Call::SMembers => vec!["SMEMBERS", key],
        Call::RPush(element) => vec!["RPUSH", key, element],
        Call::LRange => vec!["LRANGE", key, "0", "-1"],
        Call::BLPop => vec!["BLPOP", key, "0.5"],
        Call::Transfer(_) | Call::Audit | Call::Limit(_) => {
            unreachable!("built by `commands`")
        }
    };
    words
        .into_iter()
        .map(|word| Bytes::copy_from_slice(word.as_bytes()))
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A transaction's replies: each integer or string as text, an absent key
/// as 0 (a balance never touched).
fn observe_all(replies: &[Frame]) -> Observed {
    Observed::Elements(
        replies
            .iter()
            .map(|reply| match reply {
                Frame::Integer(value) => value.to_string(),
                Frame::Bulk(bytes) => text(bytes),
                Frame::Null => "0".to_string(),
                other => format!("unexpected reply {other:?}"),
            })
            .collect(),
    )
}

/// Reduces a reply to what the checkers compare. Anything unexpected (an
/// error reply) is kept as text, which no model accepts.
fn observe(call: &Call, reply: &Frame) -> Observed {
    match reply {
        Frame::Simple(status) if status.as_ref() == b"OK" => Observed::Ok,
        Frame::Null | Frame::NullArray => Observed::Nil,
        Frame::Bulk(bytes) => Observed::Bulk(text(bytes)),
        Frame::Integer(value) => Observed::Integer(*value),
        Frame::Array(items) | Frame::Set(items) => {
            let mut elements: Vec<String> = items
                .iter()
                .map(|item| match item {
                    Frame::Bulk(bytes) => text(bytes),
                    Frame::Integer(value) => value.to_string(),
                    other => format!("{other:?}"),
                })
                .collect();
            if *call == Call::SMembers {
                elements.sort();
            }
            Observed::Elements(elements)
        }
        Frame::Bulks(elements) => Observed::Elements(elements.iter().map(text).collect()),
        other => Observed::Bulk(format!("unexpected reply {other:?}")),
    }
}
