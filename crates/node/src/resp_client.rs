//! A minimal RESP client for node-to-node and admin calls that are rare and
//! small (leadership reports, topology fetches, `slotraft cluster` commands):
//! one connection per call, one request, one reply, bounded in time and size.

use anyhow::{bail, Context as _};
use resp::Frame;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one call may take, connection included.
const CALL_LIMIT: Duration = Duration::from_secs(5);
/// The largest reply accepted.
const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

/// The password calls authenticate with: a node's own `requirepass` (every
/// node of a cluster shares it, as Redis replicas share `masterauth`), or
/// what an admin command or the router was given.
static PASSWORD: std::sync::RwLock<Option<String>> = std::sync::RwLock::new(None);

pub fn set_password(password: Option<&str>) {
    let password = password.filter(|text| !text.is_empty()).map(str::to_string);
    *PASSWORD.write().unwrap_or_else(|p| p.into_inner()) = password;
}

/// `AUTH <password>` encoded, when calls must authenticate.
pub fn auth_request() -> Option<Vec<u8>> {
    let password = PASSWORD.read().unwrap_or_else(|p| p.into_inner());
    password
        .as_deref()
        .map(|password| encode_request(&[b"AUTH", password.as_bytes()]))
}

/// Whether `reply` is AUTH's answer from a server with no password set.
pub fn no_password_configured(reply: &Frame) -> bool {
    matches!(reply, Frame::Error(text) if text.starts_with(b"ERR AUTH <password> called without any password configured"))
}

/// Encodes `arguments` as a RESP multibulk request.
pub fn encode_request(arguments: &[&[u8]]) -> Vec<u8> {
    let mut wire = format!("*{}\r\n", arguments.len()).into_bytes();
    for argument in arguments {
        wire.extend(format!("${}\r\n", argument.len()).into_bytes());
        wire.extend_from_slice(argument);
        wire.extend_from_slice(b"\r\n");
    }
    wire
}

/// A connection a call is made over.
pub trait CallStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> CallStream for S {}

/// Opens a connection to an address (`HOST:PORT`).
pub type Dialer = fn(
    String,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = std::io::Result<Box<dyn CallStream>>> + Send>,
>;

/// A replacement for TCP, set by a simulation.
static DIALER: std::sync::OnceLock<Dialer> = std::sync::OnceLock::new();

/// Makes `dialer` open every call's connection from now on (a simulation's
/// network). Only the first call counts; false for later ones.
pub fn set_dialer(dialer: Dialer) -> bool {
    DIALER.set(dialer).is_ok()
}

async fn connect(address: &str) -> std::io::Result<Box<dyn CallStream>> {
    if let Some(dialer) = DIALER.get() {
        return dialer(address.to_string()).await;
    }
    let stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    Ok(Box::new(stream))
}

/// Sends one command to `address` and returns its reply (error replies are
/// replies, not `Err`).
pub async fn call(address: &str, arguments: &[&[u8]]) -> anyhow::Result<Frame> {
    tokio::time::timeout(CALL_LIMIT, call_unbounded(address, arguments))
        .await
        .with_context(|| format!("{address} did not answer in time"))?
}

async fn call_unbounded(address: &str, arguments: &[&[u8]]) -> anyhow::Result<Frame> {
    let mut stream = connect(address)
        .await
        .with_context(|| format!("connecting to {address}"))?;
    let mut wire = Vec::new();
    let mut skip = 0;
    if let Some(auth) = auth_request() {
        wire.extend(auth);
        skip = 1;
    }
    wire.extend(encode_request(arguments));
    stream.write_all(&wire).await?;
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        while let Ok(Some((frame, used))) = resp::parse_reply(&buffer) {
            if skip == 0 {
                return Ok(frame);
            }
            // AUTH's reply: a refusal answers the call, except from a node
            // with no password at all (the call needs none).
            if frame.is_error() && !no_password_configured(&frame) {
                return Ok(frame);
            }
            skip -= 1;
            buffer.drain(..used);
        }
        let count = stream.read(&mut chunk).await?;
        if count == 0 {
            bail!("{address} closed the connection before replying");
        }
        buffer.extend_from_slice(&chunk[..count]);
        if buffer.len() > MAX_REPLY_BYTES {
            bail!("reply from {address} is too large");
        }
    }
}
