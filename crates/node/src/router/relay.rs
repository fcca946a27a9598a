//! Pub/Sub through the router. A client's first SUBSCRIBE, PSUBSCRIBE or
//! SSUBSCRIBE turns its connection into a relay to one node: a connection of
//! its own to that node (with HELLO 3 first for a RESP3 client), every later
//! request parsed and passed on, every byte the node sends passed back
//! (subscription replies, messages, pushes). PUBLISH reaches subscribers on
//! every node, so SUBSCRIBE and PSUBSCRIBE go to any node; SSUBSCRIBE goes to
//! the leader of its channel's slot. The relay lasts as long as the client's
//! connection or until it sends RESET (passed on: once the node's `+RESET`
//! is relayed, the connection is the router's again, in its reset state);
//! if the node goes away the client is disconnected, as a client of a
//! failed Redis node is, and resubscribes on reconnecting.

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

/// How a relay ended.
pub enum Ended {
    /// Either side closed, or the client broke the protocol.
    Closed,
    /// The client sent RESET: the node answered it (its `+RESET` was passed
    /// on) and the connection goes back to the router, with the requests
    /// the client sent after RESET.
    Reset {
        client: TcpStream,
        parser: RequestParser,
        input: BytesMut,
        after: Vec<Vec<Bytes>>,
    },
}

fn is_reset(arguments: &[Bytes]) -> bool {
    arguments.len() == 1 && arguments[0].eq_ignore_ascii_case(b"reset")
}

/// Relays the client's connection to a node from `first` on (the
/// subscribing request and those parsed after it), until either side closes
/// or the client sends RESET. `input` holds bytes not yet parsed; `output`
/// replies not yet written.
pub async fn run(
    router: Arc<Router>,
    mut client: TcpStream,
    protocol: Protocol,
    first: Vec<Vec<Bytes>>,
    mut parser: RequestParser,
    mut input: BytesMut,
    mut output: BytesMut,
) -> Ended {
    let upstream = match node_for(&router, &first[0]) {
        Some(address) => open(&router, &address, protocol).await,
        None => Err(Frame::error(super::client::CLUSTER_DOWN)),
    };
    let mut upstream = match upstream {
        Ok(upstream) => upstream,
        Err(reply) => {
            // Nothing was relayed: answer the subscribing request and close.
            resp::encode(&reply, protocol, &mut output);
            let _ = client.write_all(&output).await;
            return Ended::Closed;
        }
    };
    if !output.is_empty() && client.write_all(&output).await.is_err() {
        return Ended::Closed;
    }
    let mut pending: std::collections::VecDeque<Vec<Bytes>> = first.into();
    let mut wire = Vec::new();
    let mut from_node = BytesMut::with_capacity(16 * 1024);
    // Set once RESET went to the node: what the client sent after it.
    let mut after_reset: Option<Vec<Vec<Bytes>>> = None;
    loop {
        if after_reset.is_none() {
            loop {
                match parser.next_request(&mut input) {
                    Ok(Some(arguments)) => pending.push_back(arguments),
                    Ok(None) => break,
                    Err(_) => return Ended::Closed,
                }
            }
            while let Some(arguments) = pending.pop_front() {
                let reset = is_reset(&arguments);
                encode_request(&arguments, &mut wire);
                if reset {
                    // The node's `+RESET` marks the end of its replies to
                    // what came before; nothing is relayed after it.
                    after_reset = Some(pending.drain(..).collect());
                    break;
                }
            }
            if !wire.is_empty() {
                if upstream.write_all(&wire).await.is_err() {
                    return Ended::Closed;
                }
                wire.clear();
            }
        }
        if after_reset.is_none() {
            input.reserve(16 * 1024);
        }
        from_node.reserve(16 * 1024);
        tokio::select! {
            read = client.read_buf(&mut input), if after_reset.is_none() => match read {
                Ok(0) | Err(_) => return Ended::Closed,
                Ok(_) => {}
            },
            read = upstream.read_buf(&mut from_node) => match read {
                Ok(0) | Err(_) => {
                    let _ = client.shutdown().await;
                    return Ended::Closed;
                }
                Ok(_) => {
                    // Whole replies only, so the stream is at a reply
                    // boundary whenever RESET goes out; once it has, up to
                    // and including the node's `+RESET`.
                    let mut end = 0;
                    let mut done = false;
                    loop {
                        match resp::reply_length(&from_node[end..]) {
                            Ok(Some(length)) => {
                                let reply = &from_node[end..end + length];
                                end += length;
                                if after_reset.is_some() && reply == b"+RESET\r\n" {
                                    done = true;
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(_) => return Ended::Closed,
                        }
                    }
                    let relayed = from_node.split_to(end);
                    if !relayed.is_empty() && client.write_all(&relayed).await.is_err() {
                        return Ended::Closed;
                    }
                    if done {
                        return Ended::Reset {
                            client,
                            parser,
                            input,
                            after: after_reset.take().unwrap_or_default(),
                        };
                    }
                }
            },
        }
    }
}
