//! MIGRATE on a standalone node: moves keys to another server (a Redis, or
//! another slotraft) as DUMP payloads restored there, then deletes them here
//! unless COPY.
//!
//! As in Redis the command is atomic and blocking: the node holds its
//! keyspace for the whole exchange (bounded by the command's timeout per
//! connect, write and read), so no other client's command comes between the
//! dump and the delete. The worker thread hands its other connections to
//! another thread meanwhile (`replication::runtime::long_running`).
//!
//! Connections to targets are kept, as Redis keeps them (up to 64, each
//! dropped after 10 seconds unused), with the database last selected there:
//! a call sends `SELECT db` only when that differs (any refusal forgets it),
//! an AUTH first when asked, and one `RESTORE key ttl payload [REPLACE]` per
//! key. Keys the target restored are deleted here (unless COPY) even when it
//! refused others; the first refusal answers the command. A connection that
//! fails before any reply is opened again once, unless it timed out.
//!
//! On a replicated shard the leader runs it (`replicated.rs`): it reads the
//! keys' payloads linearizably, sends them without holding the shard, then
//! deletes what the target restored through the log, in one entry that
//! WATCHes each key as it was dumped, so a key written meanwhile is kept
//! (and the command says so) instead of losing that write.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use keyspace::args::is_keyword;
use keyspace::{commands, errors, Context, Keyspace};
use resp::Frame;

/// The largest reply read from the target (RESTORE answers are short).
const MAX_REPLY_BYTES: usize = 1 << 20;

pub struct Options {
    address: String,
    db: i64,
    timeout: Duration,
    pub copy: bool,
    replace: bool,
    auth: Option<(Option<Bytes>, Bytes)>,
    pub keys: Vec<Bytes>,
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key ...], checked in
/// Redis's order.
pub fn parse(arguments: &[Bytes]) -> Result<Options, Frame> {
    let mut options = Options {
        address: format!(
            "{}:{}",
            String::from_utf8_lossy(&arguments[1]),
            String::from_utf8_lossy(&arguments[2])
        ),
        db: 0,
        timeout: Duration::ZERO,
        copy: false,
        replace: false,
        auth: None,
        keys: vec![arguments[3].clone()],
    };
    let mut index = 6;
    while index < arguments.len() {
        let more = arguments.len() - 1 - index;
        let option = &arguments[index];
        if is_keyword(option, "copy") {
            options.copy = true;
        } else if is_keyword(option, "replace") {
            options.replace = true;
        } else if is_keyword(option, "auth") && more >= 1 {
            options.auth = Some((None, arguments[index + 1].clone()));
            index += 1;
        } else if is_keyword(option, "auth2") && more >= 2 {
            options.auth = Some((
                Some(arguments[index + 1].clone()),
                arguments[index + 2].clone(),
            ));
            index += 2;
        } else if is_keyword(option, "keys") {
            if !arguments[3].is_empty() {
                return Err(Frame::error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            options.keys = arguments[index + 1..].to_vec();
            break;
        } else {
            return Err(Frame::error(errors::SYNTAX));
        }
        index += 1;
    }
    let timeout = keyspace::args::parse_i64(&arguments[5])?;
    options.db = keyspace::args::parse_i64(&arguments[4])?;
    let timeout = if timeout <= 0 { 1000 } else { timeout };
    options.timeout = Duration::from_millis(timeout as u64);
    Ok(options)
}

fn push_request(wire: &mut Vec<u8>, arguments: &[&[u8]]) {
    wire.extend(crate::resp_client::encode_request(arguments));
}

/// Runs `name` on the keyspace as the session would.
fn run(keyspace: &mut Keyspace, context: &mut Context, arguments: &[&[u8]]) -> Frame {
    let arguments: Vec<Bytes> = arguments
        .iter()
        .map(|argument| Bytes::copy_from_slice(argument))
        .collect();
    match commands::resolve(&arguments) {
        Ok(spec) => keyspace.execute(spec, context, &arguments),
        Err(error) => error,
    }
}

/// A key to move: its name, remaining time to live in ms (0: none) and
/// DUMP payload.
pub type Moving = (Bytes, i64, Bytes);

/// The keys of `keys` present in `db` at `now_ms`, as [`Moving`], read
/// without changing anything (no access time, no lazy expiry), so a
/// replica's state is untouched outside its log.
pub fn dumps(keyspace: &mut Keyspace, db: usize, now_ms: u64, keys: &[Bytes]) -> Vec<Moving> {
    let db = keyspace.db(db);
    keys.iter()
        .filter_map(|key| {
            let entry = db.peek(key, now_ms)?;
            let ttl = entry
                .expire_at_ms()
                .map_or(0, |at| (at.saturating_sub(now_ms) as i64).max(1));
            Some((
                key.clone(),
                ttl,
                Bytes::from(keyspace::rdb::dump(&entry.value)),
            ))
        })
        .collect()
}

/// What the target answered: the command's reply, and the keys it restored
/// (to delete here unless COPY).
pub struct Outcome {
    pub reply: Frame,
    pub restored: Vec<Bytes>,
}

/// Sends `moving` to the target (a connection that failed before any reply
/// is tried once more, unless it timed out).
pub fn send(sockets: &Sockets, options: &Options, moving: &[Moving]) -> Outcome {
    let mut retried = false;
    loop {
        match exchange(sockets, options, moving) {
            Exchange::Done(outcome) => return outcome,
            Exchange::Failed { reply, may_retry } => {
                if !may_retry || retried {
                    return Outcome {
                        reply,
                        restored: Vec::new(),
                    };
                }
                retried = true;
            }
        }
    }
}

/// MIGRATE, with the keyspace held.
pub fn migrate(
    keyspace: &mut Keyspace,
    sockets: &Sockets,
    db: usize,
    now_ms: u64,
    seed: u64,
    arguments: &[Bytes],
) -> Frame {
    let options = match parse(arguments) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let moving = dumps(keyspace, db, now_ms, &options.keys);
    if moving.is_empty() {
        return Frame::simple("NOKEY");
    }
    let outcome = send(sockets, &options, &moving);
    if !options.copy {
        let mut context = Context {
            db,
            ..Context::new(now_ms, seed)
        };
        for key in &outcome.restored {
            run(keyspace, &mut context, &[b"DEL", key]);
        }
    }
    outcome.reply
}

enum Exchange {
    Done(Outcome),
    /// The connection failed (and was dropped) with `reply`; `may_retry`
    /// when nothing reached the target's answers and it did not time out.
    Failed {
        reply: Frame,
        may_retry: bool,
    },
}

fn exchange(sockets: &Sockets, options: &Options, moving: &[Moving]) -> Exchange {
    let done = |reply: Frame, restored: Vec<Bytes>| Exchange::Done(Outcome { reply, restored });
    let mut cached = match sockets.take(&options.address, options.timeout) {
        Ok(cached) => cached,
        // Redis connects without blocking and learns of a refusal when it
        // writes.
        Err(refused) => {
            let reply = if refused {
                "IOERR error or timeout writing to target instance"
            } else {
                "IOERR error or timeout connecting to the client"
            };
            return done(Frame::error(reply), Vec::new());
        }
    };
    let mut wire = Vec::new();
    if let Some((user, password)) = &options.auth {
        match user {
            Some(user) => push_request(&mut wire, &[b"AUTH", user, password]),
            None => push_request(&mut wire, &[b"AUTH", password]),
        }
    }
    let select = cached.db != Some(options.db);
    if select {
        let db_text = options.db.to_string();
        push_request(&mut wire, &[b"SELECT", db_text.as_bytes()]);
    }
    for (key, ttl, payload) in moving {
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if options.replace {
            restore.push(b"REPLACE");
        }
        push_request(&mut wire, &restore);
    }
    if let Err(error) = cached.stream.write_all(&wire) {
        return Exchange::Failed {
            reply: Frame::error("IOERR error or timeout writing to target instance"),
            may_retry: !timed_out(&error),
        };
    }
    let mut reader = Replies {
        stream: &mut cached.stream,
        buffer: Vec::new(),
        deadline: Instant::now() + options.timeout,
        timed_out: false,
    };
    let mut refusal: Option<Bytes> = None;
    let preludes = options.auth.is_some() as usize + select as usize;
    for _ in 0..preludes {
        match reader.next() {
            Some(Frame::Error(error)) => {
                refusal.get_or_insert(error);
            }
            Some(_) => {}
            None => {
                let may_retry = !reader.timed_out;
                return Exchange::Failed {
                    reply: reading_error(),
                    may_retry,
                };
            }
        }
    }
    let mut first_error = refusal.clone();
    let mut broken = false;
    let mut restored = Vec::new();
    for (index, (key, _, _)) in moving.iter().enumerate() {
        let Some(reply) = reader.next() else {
            if first_error.is_none() && index == 0 && !reader.timed_out {
                return Exchange::Failed {
                    reply: reading_error(),
                    may_retry: true,
                };
            }
            broken = true;
            break;
        };
        match reply {
            Frame::Error(error) => {
                first_error.get_or_insert(error);
            }
            _ if refusal.is_some() => {}
            _ => restored.push(key.clone()),
        }
    }
    if let Some(error) = first_error {
        // After a refusal the database selected there is unknown.
        cached.db = None;
        if !broken {
            sockets.give_back(&options.address, cached);
        }
        let reply = Frame::error_owned(format!(
            "ERR Target instance replied with error: {}",
            String::from_utf8_lossy(&error)
        ));
        return done(reply, restored);
    }
    if broken {
        return done(reading_error(), restored);
    }
    cached.db = Some(options.db);
    sockets.give_back(&options.address, cached);
    done(Frame::OK, restored)
}

fn timed_out(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

fn reading_error() -> Frame {
    Frame::error("IOERR error or timeout reading to target instance")
}

/// Connections kept to MIGRATE targets (Redis's `migrate_cached_sockets`).
#[derive(Default)]
pub struct Sockets {
    by_address: Mutex<HashMap<String, Cached>>,
}

/// A kept connection and the database last selected over it (None: unknown).
struct Cached {
    stream: TcpStream,
    db: Option<i64>,
    last_used: Instant,
}

/// Most connections kept.
const MAX_SOCKETS: usize = 64;
/// A connection unused this long is closed.
const SOCKET_IDLE: Duration = Duration::from_secs(10);

impl Sockets {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.by_address
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// INFO's `migrate_cached_sockets`.
    pub fn count(&self) -> usize {
        let mut map = self.map();
        map.retain(|_, cached| cached.last_used.elapsed() < SOCKET_IDLE);
        map.len()
    }

    /// The kept connection to `address` (taken out while in use), or a new
    /// one; the error says whether the connection was refused.
    fn take(&self, address: &str, timeout: Duration) -> Result<Cached, bool> {
        if let Some(cached) = self.map().remove(address) {
            if cached.last_used.elapsed() < SOCKET_IDLE {
                return Ok(cached);
            }
        }
        let stream = connect(address, timeout)?;
        Ok(Cached {
            stream,
            db: None,
            last_used: Instant::now(),
        })
    }

    fn give_back(&self, address: &str, mut cached: Cached) {
        cached.last_used = Instant::now();
        let mut map = self.map();
        map.retain(|_, cached| cached.last_used.elapsed() < SOCKET_IDLE);
        if map.len() >= MAX_SOCKETS {
            if let Some(victim) = map.keys().next().cloned() {
                map.remove(&victim);
            }
        }
        map.insert(address.to_string(), cached);
    }
}

/// A connection to `address`; the error says whether it was refused.
fn connect(address: &str, timeout: Duration) -> Result<TcpStream, bool> {
    let target = address
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or(false)?;
    let stream = TcpStream::connect_timeout(&target, timeout)
        .map_err(|error| error.kind() == std::io::ErrorKind::ConnectionRefused)?;
    stream.set_write_timeout(Some(timeout)).map_err(|_| false)?;
    stream.set_nodelay(true).map_err(|_| false)?;
    Ok(stream)
}

/// The target's replies, one at a time, until the deadline.
struct Replies<'s> {
    stream: &'s mut TcpStream,
    buffer: Vec<u8>,
    deadline: Instant,
    timed_out: bool,
}

impl Replies<'_> {
    fn next(&mut self) -> Option<Frame> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Ok(Some((frame, used))) = resp::parse_reply(&self.buffer) {
                self.buffer.drain(..used);
                return Some(frame);
            }
            let Some(left) = self.deadline.checked_duration_since(Instant::now()) else {
                self.timed_out = true;
                return None;
            };
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .ok()?;
            let count = match self.stream.read(&mut chunk) {
                Ok(count) => count,
                Err(error) => {
                    self.timed_out = timed_out(&error);
                    return None;
                }
            };
            if count == 0 || self.buffer.len() + count > MAX_REPLY_BYTES {
                return None;
            }
            self.buffer.extend_from_slice(&chunk[..count]);
        }
    }
}
