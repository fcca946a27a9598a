//! The Raft transport over loopback: every call kind, snapshot streams, errors,
//! deadlines, and one channel per peer shared by all groups.

use futures_util::StreamExt;
use rpc::{
    Bytes, ClientOptions, IncomingChunks, IncomingMessages, MessageStream, RaftHandler, RpcClient,
    RpcError, RpcKind,
};
use std::sync::Arc;
use std::time::Duration;

struct Echo;

/// Opened by a test to release the calls waiting on it (payload `gated`).
static GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

impl RaftHandler for Echo {
    async fn handle(&self, kind: RpcKind, group: u64, payload: Bytes) -> Result<Bytes, String> {
        match &payload[..] {
            b"fail" => Err("refused on purpose".to_string()),
            b"slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(payload)
            }
            // Held until the test opens the gate.
            b"gated" => {
                let _permit = GATE.acquire().await.expect("the gate stays open");
                Ok(payload)
            }
            // Which server task handled the call: calls that arrived together
            // in one batch share one.
            b"task" => Ok(Bytes::from(format!("{group}/{:?}", tokio::task::id()))),
            _ => Ok(Bytes::from(format!(
                "{kind:?}/{group}/{}",
                String::from_utf8_lossy(&payload)
            ))),
        }
    }

    /// Answers `group/message` for every message, but only once three more
    /// have arrived (or the stream ended): a caller that waited for each
    /// reply before sending on would wait forever. Group 0 is refused. An
    /// error from the caller's side ends the replies.
    async fn stream(
        &self,
        group: u64,
        messages: IncomingMessages,
    ) -> Result<MessageStream, String> {
        if group == 0 {
            return Err("no group 0".to_string());
        }
        let replies = messages
            .take_while(|message| std::future::ready(message.is_ok()))
            .chunks(3)
            .flat_map(move |messages| {
                futures_util::stream::iter(messages.into_iter().filter_map(move |message| {
                    let message = message.ok()?;
                    Some(Bytes::from(format!(
                        "{group}/{}",
                        String::from_utf8_lossy(&message)
                    )))
                }))
            });
        Ok(Box::pin(replies))
    }

    async fn install_snapshot(
        &self,
        group: u64,
        header: Bytes,
        mut chunks: IncomingChunks,
    ) -> Result<Bytes, String> {
        if &header[..] == b"fail" {
            return Err("snapshot refused".to_string());
        }
        let mut all = format!("{group}/{}/", String::from_utf8_lossy(&header)).into_bytes();
        let mut count = 0;
        while let Some(chunk) = chunks.next().await {
            all.extend_from_slice(&chunk.map_err(|error| error.to_string())?);
            count += 1;
        }
        all.extend_from_slice(format!("/{count}").as_bytes());
        Ok(Bytes::from(all))
    }
}

async fn start() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(rpc::serve(listener, Arc::new(Echo), std::future::pending()));
    address
}

const DEADLINE: Duration = Duration::from_secs(5);

/// A peer as a version without stream sessions answers: everything but
/// streams, which it does not know.
struct WithoutStreams;

impl RaftHandler for WithoutStreams {
    fn serves_streams(&self) -> bool {
        false
    }

    async fn handle(&self, kind: RpcKind, group: u64, payload: Bytes) -> Result<Bytes, String> {
        Echo.handle(kind, group, payload).await
    }

    async fn stream(&self, _: u64, _: IncomingMessages) -> Result<MessageStream, String> {
        unreachable!("a handler without streams is never asked for one")
    }

    async fn install_snapshot(
        &self,
        group: u64,
        header: Bytes,
        chunks: IncomingChunks,
    ) -> Result<Bytes, String> {
        Echo.install_snapshot(group, header, chunks).await
    }
}

/// A peer of an older version, on a free loopback port.
async fn start_without_streams() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(rpc::serve(
        listener,
        Arc::new(WithoutStreams),
        std::future::pending(),
    ));
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_streams_is_remembered_as_such() {
    let address = start_without_streams().await;
    let client = RpcClient::new(ClientOptions::default());
    assert!(client.streams_supported(&address));
    let refused = client
        .open_stream(
            &address,
            3,
            Box::pin(futures_util::stream::iter([Bytes::from("a")])),
            DEADLINE,
        )
        .await;
    assert!(
        matches!(&refused, Err(RpcError::Unimplemented(_))),
        "{:?}",
        refused.err()
    );
    assert!(!client.streams_supported(&address));
    // Only that peer: another still gets sessions, and unary calls to the
    // old one still work.
    let other = start().await;
    assert!(client.streams_supported(&other));
    let reply = client
        .call(&address, RpcKind::Vote, 3, Bytes::from("x"), DEADLINE)
        .await
        .unwrap();
    assert_eq!(&reply[..], b"Vote/3/x");
}

/// The server task named in a `task` reply (`group/task`).
fn task_of(reply: &Result<Bytes, RpcError>) -> String {
    let reply = reply.as_ref().expect("a reply");
    let text = String::from_utf8_lossy(reply);
    text.split_once('/').expect("group/task").1.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_to_one_peer_go_as_one_call() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    let beats = (1..=8u64).map(|group| {
        let payload = if group == 5 { "fail" } else { "task" };
        client.heartbeat(&address, group, Bytes::from(payload), DEADLINE)
    });
    let replies = futures_util::future::join_all(beats).await;
    // Each got its own group's reply, in place; the refused one its error.
    for (group, reply) in (1..=8u64).zip(&replies) {
        if group == 5 {
            assert!(
                matches!(reply, Err(RpcError::Remote(text)) if text == "refused on purpose"),
                "{reply:?}"
            );
        } else {
            let text = String::from_utf8_lossy(reply.as_ref().unwrap()).into_owned();
            assert!(text.starts_with(&format!("{group}/")), "{text}");
        }
    }
    // One call: one server task handled them all.
    let tasks: std::collections::BTreeSet<String> = replies
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != 4)
        .map(|(_, reply)| task_of(reply))
        .collect();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    // Unary calls made at once are handled apart: this is what tells.
    let calls = (1..=4u64).map(|group| {
        client.call(
            &address,
            RpcKind::AppendEntries,
            group,
            Bytes::from("task"),
            DEADLINE,
        )
    });
    let tasks: std::collections::BTreeSet<String> = futures_util::future::join_all(calls)
        .await
        .iter()
        .map(task_of)
        .collect();
    assert_eq!(tasks.len(), 4, "{tasks:?}");
    assert!(client.heartbeat_batches_supported(&address));
    assert_eq!(client.channel_count(), 1);
}

/// A group slow to answer its heartbeat (its log in a long fsync, say)
/// holds back no other group's reply in the same batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_group_holds_back_no_other_heartbeat_of_its_batch() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    // Polled first, in the same pass as the others: one batch for all four.
    let mut gated = Box::pin(client.heartbeat(&address, 1, Bytes::from("gated"), DEADLINE));
    let others = futures_util::future::join_all(
        (2..=4u64).map(|group| client.heartbeat(&address, group, Bytes::from("task"), DEADLINE)),
    );
    // While group 1 is still held, the others are answered; had they waited
    // for the whole batch, they would run out their deadline here.
    let replies = tokio::select! {
        biased;
        reply = &mut gated => panic!("answered before the gate opened: {reply:?}"),
        replies = others => replies,
    };
    for (group, reply) in (2..=4u64).zip(&replies) {
        let text = String::from_utf8_lossy(reply.as_ref().unwrap()).into_owned();
        assert!(text.starts_with(&format!("{group}/")), "{text}");
    }
    let tasks: std::collections::BTreeSet<String> = replies.iter().map(task_of).collect();
    assert_eq!(tasks.len(), 1, "one call: {tasks:?}");
    GATE.add_permits(1);
    assert_eq!(gated.await.unwrap(), Bytes::from("gated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_to_a_peer_without_batches_go_one_by_one() {
    let address = start_without_streams().await;
    let client = RpcClient::new(ClientOptions::default());
    for round in 0..2 {
        let beats = (1..=3u64)
            .map(|group| client.heartbeat(&address, group, Bytes::from("beat"), DEADLINE));
        let replies = futures_util::future::join_all(beats).await;
        for (group, reply) in (1..=3u64).zip(replies) {
            assert_eq!(
                reply.unwrap(),
                Bytes::from(format!("AppendEntries/{group}/beat")),
                "round {round}"
            );
        }
        // Refused once as unknown, then not asked again.
        assert!(!client.heartbeat_batches_supported(&address));
    }
    // A peer that cannot be reached: every heartbeat of the batch fails.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let beats = (1..=2u64).map(|group| client.heartbeat(&dead, group, Bytes::from("x"), DEADLINE));
    for reply in futures_util::future::join_all(beats).await {
        assert!(matches!(reply, Err(RpcError::Unreachable(_))), "{reply:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_carry_kind_group_and_payload() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    for (kind, expected) in [
        (RpcKind::AppendEntries, "AppendEntries/7/hello"),
        (RpcKind::Vote, "Vote/7/hello"),
        (RpcKind::TransferLeader, "TransferLeader/7/hello"),
    ] {
        let reply = client
            .call(&address, kind, 7, Bytes::from_static(b"hello"), DEADLINE)
            .await
            .unwrap();
        assert_eq!(&reply[..], expected.as_bytes());
    }
    // Another group reuses the same channel.
    let reply = client
        .call(
            &address,
            RpcKind::Vote,
            8,
            Bytes::from_static(b"x"),
            DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(&reply[..], b"Vote/8/x");
    assert_eq!(client.channel_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_stream_in_chunks() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    let chunks = futures_util::stream::iter(vec![
        Bytes::from_static(b"aa"),
        Bytes::from_static(b"bb"),
        Bytes::from_static(b"cc"),
    ]);
    let reply = client
        .send_snapshot(
            &address,
            3,
            Bytes::from_static(b"head"),
            Box::pin(chunks),
            DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(&reply[..], b"3/head/aabbcc/3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_session_is_pipelined_and_ends_when_dropped() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(8);
    let messages: MessageStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(receiver));
    let mut replies = client
        .open_stream(&address, 9, messages, DEADLINE)
        .await
        .unwrap();
    // Three messages go out before any reply comes back (the peer answers
    // in threes).
    for text in ["a", "b", "c"] {
        sender.send(Bytes::from(text)).await.unwrap();
    }
    for expected in ["9/a", "9/b", "9/c"] {
        let reply = tokio::time::timeout(DEADLINE, replies.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(&reply[..], expected.as_bytes());
    }
    assert_eq!(
        client.channel_count(),
        1,
        "the session shares the peer's channel"
    );
    // Dropping the replies stops pulling messages: the receiving end closes.
    drop(replies);
    tokio::time::timeout(DEADLINE, sender.closed())
        .await
        .unwrap();

    let refused = client
        .open_stream(
            &address,
            0,
            Box::pin(futures_util::stream::empty()),
            DEADLINE,
        )
        .await;
    assert!(
        matches!(&refused, Err(RpcError::Remote(text)) if text == "no group 0"),
        "{:?}",
        refused.err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_timeouts_and_unreachable_peers() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    let error = client
        .call(
            &address,
            RpcKind::Vote,
            1,
            Bytes::from_static(b"fail"),
            DEADLINE,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RpcError::Remote(text) if text == "refused on purpose"),
        "{error:?}"
    );

    let error = client
        .call(
            &address,
            RpcKind::AppendEntries,
            1,
            Bytes::from_static(b"slow"),
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, RpcError::Timeout), "{error:?}");

    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let started = std::time::Instant::now();
    let error = client
        .call(
            &closed,
            RpcKind::Vote,
            1,
            Bytes::from_static(b"x"),
            DEADLINE,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, RpcError::Unreachable(_)), "{error:?}");
    assert!(
        started.elapsed() < DEADLINE,
        "refused connections fail fast"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_edge_cases() {
    let address = start().await;
    let client = RpcClient::new(ClientOptions::default());
    // A header and no data chunks at all.
    let reply = client
        .send_snapshot(
            &address,
            4,
            Bytes::from_static(b"only"),
            Box::pin(futures_util::stream::empty()),
            DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(&reply[..], b"4/only//0");
    // The handler refuses the snapshot.
    let chunks = futures_util::stream::iter(vec![Bytes::from_static(b"zz")]);
    let error = client
        .send_snapshot(
            &address,
            4,
            Bytes::from_static(b"fail"),
            Box::pin(chunks),
            DEADLINE,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RpcError::Remote(text) if text == "snapshot refused"),
        "{error:?}"
    );
    // Snapshots and unary calls to one peer share its channel.
    assert_eq!(client.channel_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_are_per_peer_and_forgettable() {
    let first = start().await;
    let second = start().await;
    let client = RpcClient::new(ClientOptions::default());
    for group in 0..4 {
        for address in [&first, &second] {
            client
                .call(
                    address,
                    RpcKind::AppendEntries,
                    group,
                    Bytes::new(),
                    DEADLINE,
                )
                .await
                .unwrap();
        }
    }
    assert_eq!(client.channel_count(), 2);
    // Clones share the cache.
    assert_eq!(client.clone().channel_count(), 2);

    client.forget(&first);
    assert_eq!(client.channel_count(), 1);
    let reply = client
        .call(
            &first,
            RpcKind::Vote,
            9,
            Bytes::from_static(b"again"),
            DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(&reply[..], b"Vote/9/again");
    assert_eq!(client.channel_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_returns_after_shutdown() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(rpc::serve(listener, Arc::new(Echo), async move {
        let _ = stopped.await;
    }));
    let client = RpcClient::new(ClientOptions::default());
    client
        .call(&address, RpcKind::Vote, 1, Bytes::new(), DEADLINE)
        .await
        .unwrap();
    stop.send(()).unwrap();
    tokio::time::timeout(DEADLINE, server)
        .await
        .expect("serve returns once shut down")
        .unwrap()
        .unwrap();
    // The listener is closed: a client without a cached connection is refused.
    let error = RpcClient::new(ClientOptions::default())
        .call(&address, RpcKind::Vote, 1, Bytes::new(), DEADLINE)
        .await
        .unwrap_err();
    assert!(matches!(error, RpcError::Unreachable(_)), "{error:?}");
    // The old client's connection was closed under it: the call fails (as
    // `Unreachable`, or as `Timeout` when hyper reports the request cancelled).
    client
        .call(&address, RpcKind::Vote, 1, Bytes::new(), DEADLINE)
        .await
        .unwrap_err();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_connector_carries_the_calls() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let address = start().await;
    let dialed = Arc::new(AtomicUsize::new(0));
    let connector: rpc::Connector = {
        let dialed = dialed.clone();
        Arc::new(move |target: String| {
            dialed.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let stream = tokio::net::TcpStream::connect(target).await?;
                Ok(Box::new(stream) as Box<dyn rpc::PeerStream>)
            })
        })
    };
    let client = RpcClient::with_connector(ClientOptions::default(), connector);
    for group in [1, 2] {
        let reply = client
            .call(
                &address,
                RpcKind::Vote,
                group,
                Bytes::from_static(b"x"),
                DEADLINE,
            )
            .await
            .unwrap();
        assert_eq!(reply, Bytes::from(format!("Vote/{group}/x")));
    }
    assert_eq!(dialed.load(Ordering::SeqCst), 1, "one connection per peer");
    // A connector that fails makes the peer unreachable, not a hang.
    let refusing: rpc::Connector =
        Arc::new(|_| Box::pin(async { Err(std::io::Error::other("no route")) }));
    let client = RpcClient::with_connector(ClientOptions::default(), refusing);
    let error = client
        .call(
            &address,
            RpcKind::Vote,
            1,
            Bytes::from_static(b"x"),
            DEADLINE,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, RpcError::Unreachable(_)),
        "unexpected error: {error:?}"
    );
}
