//! Pub/Sub through the router. A client's first SUBSCRIBE, PSUBSCRIBE or
//! SSUBSCRIBE turns its connection into a relay to one node: a connection of
//! its own to that node (with HELLO 3 first for a RESP3 client), every later
//! request parsed and passed on, every byte the node sends passed back
//! (subscription replies, messages, pushes). PUBLISH reaches subscribers on
//! every node, so SUBSCRIBE and PSUBSCRIBE go to any node; SSUBSCRIBE goes to
//! the leader of its channel's slot. The relay lasts as long as the client's
//! connection; if the node goes away the client is disconnected, as a client
//! of a failed Redis node is, and resubscribes on reconnecting.

use super::upstream::encode_request;
use super::Router;
use bytes::{Bytes, BytesMut};
use resp::{Frame, Protocol, RequestParser};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Whether `name` starts a relay.
pub fn starts_relay(name: &str) -> bool {
    matches!(name, "subscribe" | "psubscribe" | "ssubscribe")
}

/// The node a relay starting with `arguments` goes to.
fn node_for(router: &Router, arguments: &[Bytes]) -> Option<String> {
    let shard_channel = arguments[0].eq_ignore_ascii_case(b"ssubscribe");
    match arguments.get(1) {
        Some(channel) if shard_channel => {
            let slot = cluster::key_slot(channel);
            router.map().owner(slot).map(str::to_string)
        }
        _ => router.any_nodes().into_iter().next(),
    }
}

/// Opens the node connection (authenticated, and switched with HELLO 3 for
/// a RESP3 client). `Err` is the reply for the client.
async fn open(router: &Router, address: &str, protocol: Protocol) -> Result<TcpStream, Frame> {
    super::upstream::connect(address, protocol, router.upstream_timeout)
        .await
        .map_err(|failure| failure.reply(address))
}

/// Relays the client's connection to a node from `first` on (the
/// subscribing request and those parsed after it), until either side closes.
/// `input` holds bytes not yet parsed; `output` replies not yet written.
pub async fn run(
    router: Arc<Router>,
    mut client: TcpStream,
    protocol: Protocol,
    first: Vec<Vec<Bytes>>,
    mut parser: RequestParser,
    mut input: BytesMut,
    mut output: BytesMut,
) {
    let upstream = match node_for(&router, &first[0]) {
        Some(address) => open(&router, &address, protocol).await,
        None => Err(Frame::error(super::client::CLUSTER_DOWN)),
    };
    let upstream = match upstream {
        Ok(upstream) => upstream,
        Err(reply) => {
            // Nothing was relayed: answer the subscribing request and close.
            resp::encode(&reply, protocol, &mut output);
            let _ = client.write_all(&output).await;
            return;
        }
    };
    if !output.is_empty() && client.write_all(&output).await.is_err() {
        return;
    }
    let (mut from_node, mut to_node) = upstream.into_split();
    let (mut from_client, mut to_client) = client.into_split();
    // Node to client: raw bytes. `ended` resolves when this stops.
    let (stopped, mut ended) = tokio::sync::oneshot::channel::<()>();
    let downstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_node, &mut to_client).await;
        let _ = to_client.shutdown().await;
        drop(stopped);
    });
    let mut wire = Vec::new();
    for arguments in &first {
        encode_request(arguments, &mut wire);
    }
    // Client to node: parsed requests (the parser holds a partial one).
    loop {
        loop {
            match parser.next_request(&mut input) {
                Ok(Some(arguments)) => encode_request(&arguments, &mut wire),
                Ok(None) => break,
                Err(_) => {
                    downstream.abort();
                    return;
                }
            }
        }
        if !wire.is_empty() {
            if to_node.write_all(&wire).await.is_err() {
                break;
            }
            wire.clear();
        }
        input.reserve(16 * 1024);
        tokio::select! {
            read = from_client.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = &mut ended => break,
        }
    }
    downstream.abort();
}
