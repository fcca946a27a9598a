//! The simulated network behind the rpc crate's seams: a connector that dials
//! turmoil sockets and a stream of accepted turmoil connections for the server.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// A turmoil connection the gRPC server can serve.
pub struct SimStream(turmoil::net::TcpStream);

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
        let accepted = listener.accept().await.map(|(stream, _)| SimStream(stream));
        Some((accepted, listener))
    })
}

/// Dials `host:port` on the simulated network.
pub fn connector() -> rpc::Connector {
    Arc::new(|address: String| {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(address).await?;
            Ok(Box::new(stream) as Box<dyn rpc::PeerStream>)
        })
    })
}
