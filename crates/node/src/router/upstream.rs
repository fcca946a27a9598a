//! One client's connections to the cluster's nodes: opened lazily, one per node
//! address, reused for every later command of that client (so WATCH, MULTI and
//! blocking commands keep their connection-level meaning). Every connect, write
//! and read is bounded by a timeout, so a dead or stalled node turns into an
//! error reply instead of a hung client.
//!
//! A client's pipeline is forwarded as a pipeline: its requests for several
//! nodes are all sent before any reply is read (`send`, then `receive`).
//!
//! The plain keyed commands of all clients share the multiplexed links of
//! `pool`; these per-client connections carry what has connection state
//! (WATCH, MULTI, ASKING, READONLY, blocking commands, scripts), the retries
//! after redirects, and keyless commands.

use bytes::{Buf, Bytes, BytesMut};
use resp::{Frame, Protocol};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest single reply accepted from a node (Redis's `proto-max-bulk-len`
/// plus room for the framing of an aggregate).
pub const MAX_REPLY_BYTES: usize = 512 * 1024 * 1024 + 64 * 1024;
/// How many node connections one client may hold (a guard against a topology
/// that names endless addresses).
const MAX_CONNECTIONS_PER_CLIENT: usize = 256;

/// Why an exchange with a node failed.
#[derive(Debug, Clone)]
pub enum Failure {
    /// Nothing was sent: connecting failed. Retrying elsewhere is safe.
    Connect(String),
    /// The request may have reached the node (write, read, timeout, malformed
    /// reply): a write's outcome is unknown, so only reads may be retried.
    Io(String),
}

impl Failure {
    /// The reply a client sees: `ERR upstream <addr> failed: <reason>`.
    pub fn reply(&self, address: &str) -> Frame {
        let reason = match self {
            Failure::Connect(reason) | Failure::Io(reason) => reason,
        };
        Frame::error_owned(format!("ERR upstream {address} failed: {reason}"))
    }
}

/// One open connection to a node.
struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    /// READONLY was sent on it: the node serves this client's reads from
    /// its replicas' state.
    readonly: bool,
}

/// Connects to `address`, authenticates when the router was given the
/// nodes' password (`--upstream-password`) and, for RESP3, switches the
/// connection with HELLO 3. Nothing the client asked for is sent, so every
/// failure here is a [`Failure::Connect`].
pub async fn connect(
    address: &str,
    protocol: Protocol,
    limit: Duration,
) -> Result<TcpStream, Failure> {
    let stream = match tokio::time::timeout(limit, TcpStream::connect(address)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => return Err(Failure::Connect(format!("connect: {error}"))),
        Err(_) => return Err(Failure::Connect("connect timed out".to_string())),
    };
    let _ = stream.set_nodelay(true);
    let mut opening: Vec<(&str, Vec<u8>)> = Vec::new();
    if let Some(auth) = crate::resp_client::auth_request() {
        opening.push(("AUTH", auth));
    }
    if protocol == Protocol::Resp3 {
        let mut hello = Vec::new();
        encode_request(
            &[Bytes::from_static(b"HELLO"), Bytes::from_static(b"3")],
            &mut hello,
        );
        opening.push(("HELLO 3", hello));
    }
    if opening.is_empty() {
        return Ok(stream);
    }
    let mut connection = Connection {
        stream,
        buffer: BytesMut::with_capacity(1024),
        readonly: false,
    };
    let wire: Vec<u8> = opening.iter().flat_map(|(_, wire)| wire.clone()).collect();
    match tokio::time::timeout(limit, connection.stream.write_all(&wire)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(Failure::Connect(format!("write: {error}"))),
        Err(_) => return Err(Failure::Connect("write timed out".to_string())),
    }
    for (name, _) in &opening {
        match connection.read(Some(limit)).await {
            Ok(frame) if !frame.is_error() => {}
            // A node with no password at all needs none.
            Ok(frame) if *name == "AUTH" && crate::resp_client::no_password_configured(&frame) => {}
            Ok(frame) => {
                return Err(Failure::Connect(format!(
                    "{name} refused: {}",
                    String::from_utf8_lossy(frame.as_bytes().unwrap_or_default())
                )))
            }
            Err(Failure::Io(reason) | Failure::Connect(reason)) => {
                return Err(Failure::Connect(reason))
            }
        }
    }
    if !connection.buffer.is_empty() {
        return Err(Failure::Connect(
            "unexpected bytes after the connection's opening".to_string(),
        ));
    }
    Ok(connection.stream)
}

impl Connection {
    async fn open(
        address: &str,
        protocol: Protocol,
        limit: Duration,
    ) -> Result<Connection, Failure> {
        Ok(Connection {
            stream: connect(address, protocol, limit).await?,
            buffer: BytesMut::with_capacity(16 * 1024),
            readonly: false,
        })
    }

    async fn send(&mut self, requests: &[&[Bytes]], limit: Duration) -> Result<(), Failure> {
        let mut wire = Vec::new();
        for arguments in requests {
            encode_request(arguments, &mut wire);
        }
        match tokio::time::timeout(limit, self.stream.write_all(&wire)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Failure::Io(format!("write: {error}"))),
            Err(_) => Err(Failure::Io("write timed out".to_string())),
        }
    }

    /// Reads one reply as the bytes it came in, to be passed on unchanged.
    async fn read_raw(&mut self, limit: Duration) -> Result<Bytes, Failure> {
        let work = async {
            loop {
                match resp::reply_length(&self.buffer) {
                    Ok(Some(length)) => return Ok(self.buffer.split_to(length).freeze()),
                    Ok(None) => {}
                    Err(error) => return Err(Failure::Io(error.to_string())),
                }
                if self.buffer.len() > MAX_REPLY_BYTES {
                    return Err(Failure::Io("reply too large".to_string()));
                }
                self.buffer.reserve(16 * 1024);
                match self.stream.read_buf(&mut self.buffer).await {
                    Ok(0) => return Err(Failure::Io("connection closed".to_string())),
                    Ok(_) => {}
                    Err(error) => return Err(Failure::Io(format!("read: {error}"))),
                }
            }
        };
        match tokio::time::timeout(limit, work).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Io(format!(
                "no reply within {} ms",
                limit.as_millis()
            ))),
        }
    }

    /// Reads one reply; `limit` None waits as long as it takes (blocking
    /// commands with no timeout).
    async fn read(&mut self, limit: Option<Duration>) -> Result<Frame, Failure> {
        let work = async {
            loop {
                match resp::parse_reply(&self.buffer) {
                    Ok(Some((frame, consumed))) => {
                        self.buffer.advance(consumed);
                        return Ok(frame);
                    }
                    Ok(None) => {}
                    Err(error) => return Err(Failure::Io(error.to_string())),
                }
                if self.buffer.len() > MAX_REPLY_BYTES {
                    return Err(Failure::Io("reply too large".to_string()));
                }
                self.buffer.reserve(16 * 1024);
                match self.stream.read_buf(&mut self.buffer).await {
                    Ok(0) => return Err(Failure::Io("connection closed".to_string())),
                    Ok(_) => {}
                    Err(error) => return Err(Failure::Io(format!("read: {error}"))),
                }
            }
        };
        match limit {
            Some(limit) => match tokio::time::timeout(limit, work).await {
                Ok(result) => result,
                Err(_) => Err(Failure::Io(format!(
                    "no reply within {} ms",
                    limit.as_millis()
                ))),
            },
            None => work.await,
        }
    }
}

/// Appends `arguments` as a RESP multibulk request.
pub fn encode_request(arguments: &[Bytes], wire: &mut Vec<u8>) {
    push_header(wire, b'*', arguments.len());
    for argument in arguments {
        push_header(wire, b'$', argument.len());
        wire.extend_from_slice(argument);
        wire.extend_from_slice(b"\r\n");
    }
}

/// Appends `<kind><length>\r\n` without going through `format!`.
fn push_header(wire: &mut Vec<u8>, kind: u8, length: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = length;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    wire.push(kind);
    wire.extend_from_slice(&digits[at..]);
    wire.extend_from_slice(b"\r\n");
}

/// A client's connections, keyed by node address.
pub struct Upstreams {
    connections: HashMap<String, Connection>,
    protocol: Protocol,
    /// Bound on every connect, write and (non-blocking) read.
    pub timeout: Duration,
}

impl Upstreams {
    pub fn new(timeout: Duration) -> Upstreams {
        Upstreams {
            connections: HashMap::new(),
            protocol: Protocol::Resp2,
            timeout,
        }
    }

    /// Switches the protocol the nodes speak to this client (HELLO 2/3):
    /// open connections are closed and reopened with the new one.
    pub fn set_protocol(&mut self, protocol: Protocol) {
        if protocol != self.protocol {
            self.connections.clear();
            self.protocol = protocol;
        }
    }

    /// Whether the open connection to `address` has sent READONLY.
    pub fn is_readonly(&self, address: &str) -> bool {
        self.connections
            .get(address)
            .is_some_and(|connection| connection.readonly)
    }

    /// Records that READONLY was sent (and accepted) on `address`'s connection.
    pub fn mark_readonly(&mut self, address: &str) {
        if let Some(connection) = self.connections.get_mut(address) {
            connection.readonly = true;
        }
    }

    /// Whether a connection to `address` is open (WATCH state lives there).
    pub fn is_open(&self, address: &str) -> bool {
        self.connections.contains_key(address)
    }

    /// Sends `requests` to `address` in one write and reads one reply per
    /// request. `read_limit` bounds the wait for the replies (None: no bound,
    /// for blocking commands without a timeout). A failed connection is
    /// dropped, so the next exchange reconnects.
    pub async fn exchange(
        &mut self,
        address: &str,
        requests: &[&[Bytes]],
        read_limit: Option<Duration>,
    ) -> Result<Vec<Frame>, Failure> {
        self.send(address, requests).await?;
        let (replies, failure) = self.receive(address, requests.len(), read_limit).await;
        match failure {
            Some(failure) => Err(failure),
            None => Ok(replies),
        }
    }

    /// Sends `requests` to `address` in one write, connecting first if
    /// needed; their replies are read by [`Upstreams::receive`]. Sending to
    /// several nodes before reading from any lets them work at once.
    pub async fn send(&mut self, address: &str, requests: &[&[Bytes]]) -> Result<(), Failure> {
        if !self.connections.contains_key(address) {
            if self.connections.len() >= MAX_CONNECTIONS_PER_CLIENT {
                self.connections.clear();
            }
            let connection = Connection::open(address, self.protocol, self.timeout).await?;
            self.connections.insert(address.to_string(), connection);
        }
        let Some(connection) = self.connections.get_mut(address) else {
            return Err(Failure::Connect("no connection".to_string()));
        };
        let result = connection.send(requests, self.timeout).await;
        if result.is_err() {
            self.connections.remove(address);
        }
        result
    }

    /// [`Upstreams::receive`] with each reply kept as its bytes (they go to
    /// the client unchanged: a client's node connections speak its protocol).
    pub async fn receive_raw(
        &mut self,
        address: &str,
        count: usize,
    ) -> (Vec<Bytes>, Option<Failure>) {
        let Some(connection) = self.connections.get_mut(address) else {
            return (Vec::new(), Some(Failure::Io("connection lost".to_string())));
        };
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            match connection.read_raw(self.timeout).await {
                Ok(reply) => replies.push(reply),
                Err(failure) => {
                    self.connections.remove(address);
                    return (replies, Some(failure));
                }
            }
        }
        (replies, None)
    }

    /// Reads `count` replies from `address`: those that arrived, and the
    /// failure that stopped the rest (the connection is then dropped).
    pub async fn receive(
        &mut self,
        address: &str,
        count: usize,
        read_limit: Option<Duration>,
    ) -> (Vec<Frame>, Option<Failure>) {
        let Some(connection) = self.connections.get_mut(address) else {
            return (Vec::new(), Some(Failure::Io("connection lost".to_string())));
        };
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            match connection.read(read_limit).await {
                Ok(reply) => replies.push(reply),
                Err(failure) => {
                    self.connections.remove(address);
                    return (replies, Some(failure));
                }
            }
        }
        (replies, None)
    }
}
