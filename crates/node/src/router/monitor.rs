//! MONITOR through the router: the client's connection becomes a merge of
//! every node's MONITOR stream (masters and replicas, each on a connection
//! of its own), one whole line at a time, in the order lines reach the
//! router. Each node writes what it executes; commands that come through the
//! router show the router's address as their client. While monitoring, the
//! client may send QUIT (answered `+OK`, then closed) or RESET (answered
//! `+RESET`; the node connections are dropped and the connection is the
//! router's again); anything else gets an error, since the router cannot
//! interleave a routed reply with the streams.

use super::relay::Ended;
use super::Router;
use bytes::{Bytes, BytesMut};
use resp::{Frame, Protocol, RequestParser};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Lines buffered from the nodes before the readers wait for the client.
const LINES_BUFFERED: usize = 4096;

/// Starts MONITOR on one node; its lines go to `lines` until either side
/// ends. `Err` is why it could not start.
async fn start(
    router: &Router,
    address: String,
    protocol: Protocol,
    lines: mpsc::Sender<Bytes>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let mut node = super::upstream::connect(&address, protocol, router.upstream_timeout)
        .await
        .map_err(|failure| format!("{failure:?}"))?;
    node.write_all(b"*1\r\n$7\r\nMONITOR\r\n")
        .await
        .map_err(|error| error.to_string())?;
    Ok(tokio::spawn(async move {
        let mut buffer = BytesMut::with_capacity(16 * 1024);
        // The first reply is MONITOR's own `+OK`.
        let mut acknowledged = false;
        loop {
            loop {
                match resp::reply_length(&buffer) {
                    Ok(Some(length)) => {
                        let line = buffer.split_to(length).freeze();
                        if !acknowledged {
                            acknowledged = true;
                            continue;
                        }
                        if lines.send(line).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
            buffer.reserve(16 * 1024);
            match node.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }))
}

/// Serves a client that sent MONITOR (`after` is what it pipelined behind
/// it) until it closes, QUITs or RESETs.
pub async fn run(
    router: Arc<Router>,
    mut client: TcpStream,
    protocol: Protocol,
    after: Vec<Vec<Bytes>>,
    mut parser: RequestParser,
    mut input: BytesMut,
    mut output: BytesMut,
) -> Ended {
    let (sender, mut lines) = mpsc::channel::<Bytes>(LINES_BUFFERED);
    let mut readers = Vec::new();
    for address in router.map().nodes() {
        match start(&router, address.clone(), protocol, sender.clone()).await {
            Ok(reader) => readers.push(reader),
            Err(error) => tracing::warn!(%address, %error, "MONITOR could not start on a node"),
        }
    }
    drop(sender);
    let stop = |readers: &mut Vec<tokio::task::JoinHandle<()>>| {
        for reader in readers.drain(..) {
            reader.abort();
        }
    };
    if readers.is_empty() {
        resp::encode(
            &Frame::error(super::client::CLUSTER_DOWN),
            protocol,
            &mut output,
        );
        let _ = client.write_all(&output).await;
        return Ended::Closed;
    }
    resp::encode(&Frame::OK, protocol, &mut output);
    let mut pending: std::collections::VecDeque<Vec<Bytes>> = after.into();
    loop {
        loop {
            match parser.next_request(&mut input) {
                Ok(Some(arguments)) => pending.push_back(arguments),
                Ok(None) => break,
                Err(_) => {
                    stop(&mut readers);
                    return Ended::Closed;
                }
            }
        }
        while let Some(arguments) = pending.pop_front() {
            let name = arguments[0].to_ascii_lowercase();
            match name.as_slice() {
                b"quit" => {
                    resp::encode(&Frame::OK, protocol, &mut output);
                    let _ = client.write_all(&output).await;
                    stop(&mut readers);
                    return Ended::Closed;
                }
                b"reset" if arguments.len() == 1 => {
                    stop(&mut readers);
                    resp::encode(&Frame::simple("RESET"), protocol, &mut output);
                    if client.write_all(&output).await.is_err() {
                        return Ended::Closed;
                    }
                    return Ended::Reset {
                        client,
                        parser,
                        input,
                        after: pending.into_iter().collect(),
                    };
                }
                _ => resp::encode(
                    &Frame::error(
                        "ERR only QUIT and RESET are accepted while MONITOR runs through the router",
                    ),
                    protocol,
                    &mut output,
                ),
            }
        }
        if !output.is_empty() {
            if client.write_all(&output).await.is_err() {
                stop(&mut readers);
                return Ended::Closed;
            }
            output.clear();
        }
        input.reserve(16 * 1024);
        tokio::select! {
            read = client.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => {
                    stop(&mut readers);
                    return Ended::Closed;
                }
                Ok(_) => {}
            },
            line = lines.recv() => match line {
                Some(line) => {
                    output.extend_from_slice(&line);
                    // Whatever else is already waiting goes in the same write.
                    while let Ok(line) = lines.try_recv() {
                        output.extend_from_slice(&line);
                        if output.len() >= 64 * 1024 {
                            break;
                        }
                    }
                }
                // Every node's stream ended: the client is told by the close.
                None => {
                    let _ = client.write_all(&output).await;
                    return Ended::Closed;
                }
            },
        }
    }
}
