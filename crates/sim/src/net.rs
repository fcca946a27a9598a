//! The simulated network behind the rpc crate's seams: a connector that dials
//! turmoil sockets and a stream of accepted turmoil connections for the server.
//!
//! Every connection a host opens or accepts is a [`Tracked`] one, so that a
//! crash closes them in the order they were opened ([`crash`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

type Slot = Mutex<Option<turmoil::net::TcpStream>>;

/// The connections open on this thread's simulation, by host address and
/// the order they were opened in, and the host being crashed, if any.
#[derive(Default)]
struct Open {
    next: u64,
    streams: BTreeMap<(IpAddr, u64), Weak<Slot>>,
    crashing: Option<IpAddr>,
}

thread_local! {
    static OPEN: RefCell<Open> = RefCell::new(Open::default());
}

/// A turmoil connection, known to [`crash`].
///
/// A crash drops the host's tokio runtime, which drops its tasks, and with
/// them their connections, in an order that depends on tokio's task ids: a
/// current-thread runtime keeps its tasks in four lists picked by task id,
/// and ids come from one counter for the whole process. Each connection
/// dropped sends its FIN or RST, which draws that message's latency from the
/// simulation's random source: in another order, the peers learn of the
/// crash in another order and the run diverges. A second run of a seed in one
/// process starts from other task ids than the first, so the two differed.
/// Here the first connection of a crashing host to be dropped closes all of
/// that host's connections, in the order they were opened.
pub struct Tracked {
    slot: Arc<Slot>,
    key: (IpAddr, u64),
}

impl Tracked {
    pub fn new(stream: turmoil::net::TcpStream) -> io::Result<Tracked> {
        let host = stream.local_addr()?.ip();
        let slot = Arc::new(Mutex::new(Some(stream)));
        let key = OPEN.with(|open| {
            let mut open = open.borrow_mut();
            open.next += 1;
            let key = (host, open.next);
            open.streams.insert(key, Arc::downgrade(&slot));
            key
        });
        Ok(Tracked { slot, key })
    }

    fn poll_stream<T>(
        &self,
        poll: impl FnOnce(Pin<&mut turmoil::net::TcpStream>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let mut slot = lock(&self.slot);
        match slot.as_mut() {
            Some(stream) => poll(Pin::new(stream)),
            // Closed by a crash of its host, which is going away.
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }
}

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<turmoil::net::TcpStream>> {
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let (host, _) = self.key;
        let doomed: Vec<Arc<Slot>> = OPEN
            .try_with(|open| {
                let mut open = open.borrow_mut();
                if open.crashing != Some(host) {
                    open.streams.remove(&self.key);
                    return Vec::new();
                }
                let keys: Vec<(IpAddr, u64)> = open
                    .streams
                    .range((host, 0)..=(host, u64::MAX))
                    .map(|(key, _)| *key)
                    .collect();
                keys.iter()
                    .filter_map(|key| open.streams.remove(key))
                    .filter_map(|slot| slot.upgrade())
                    .collect()
            })
            .unwrap_or_default();
        // Outside the registry's borrow: closing sends on the network.
        for slot in doomed {
            drop(lock(&slot).take());
        }
    }
}

/// Crashes `host`: its software stops and its connections close, in the
/// order they were opened (see [`Tracked`]).
pub fn crash(sim: &mut turmoil::Sim<'_>, host: &str) {
    struct Crashing(IpAddr);
    impl Drop for Crashing {
        fn drop(&mut self) {
            let _ = OPEN.try_with(|open| {
                let mut open = open.borrow_mut();
                open.crashing = None;
                let host = self.0;
                open.streams.retain(|(address, _), _| *address != host);
            });
        }
    }
    let address = sim.lookup(host);
    OPEN.with(|open| open.borrow_mut().crashing = Some(address));
    let _crashing = Crashing(address);
    sim.crash(host);
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_stream(|stream| stream.poll_read(context, buffer))
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_stream(|stream| stream.poll_write(context, buffer))
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_stream(|stream| stream.poll_flush(context))
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_stream(|stream| stream.poll_shutdown(context))
    }
}

/// A turmoil connection the gRPC server can serve.
pub struct SimStream(Tracked);

impl Connected for SimStream {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for SimStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(context, buffer)
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(context, buffer)
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(context)
    }
}

/// The connections accepted on `listener`, for `rpc::serve_with_incoming`.
pub fn incoming(
    listener: turmoil::net::TcpListener,
) -> impl Stream<Item = io::Result<SimStream>> + Send + 'static {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = match listener.accept().await {
            Ok((stream, _)) => Tracked::new(stream).map(SimStream),
            Err(error) => Err(error),
        };
        Some((accepted, listener))
    })
}

/// Dials `host:port` on the simulated network.
pub fn connector() -> rpc::Connector {
    Arc::new(|address: String| {
        Box::pin(async move {
            let stream = Tracked::new(turmoil::net::TcpStream::connect(address).await?)?;
            Ok(Box::new(stream) as Box<dyn rpc::PeerStream>)
        })
    })
}
