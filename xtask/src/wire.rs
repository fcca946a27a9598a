//! A minimal blocking RESP2 client over `std::net::TcpStream`, always to 127.0.0.1: enough
//! to PING a server, read `INFO`, and pipeline bulk writes for the memory benchmark.

use anyhow::{bail, Context as _, Result};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// Longest status/integer/length line accepted from a server.
const MAX_LINE: u64 = 64 * 1024;
/// Largest bulk string accepted from a server.
const MAX_BULK: usize = 64 * 1024 * 1024;
/// Most elements accepted in one array reply.
const MAX_ARRAY: usize = 1 << 20;
/// Deepest nesting accepted in array replies.
const MAX_DEPTH: usize = 8;

/// One RESP2 reply.
#[derive(Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// A connection to a server on 127.0.0.1 whose reads and writes time out.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    /// Connects to `127.0.0.1:port`; `timeout` bounds the connect and every read and write.
    pub fn connect(port: u16, timeout: Duration) -> Result<Conn> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&address, timeout)
            .with_context(|| format!("cannot connect to {address}"))?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        Ok(Conn {
            reader: BufReader::with_capacity(64 * 1024, stream),
            writer,
        })
    }

    /// Sends one command and reads its reply.
    pub fn command(&mut self, args: &[&[u8]]) -> Result<Reply> {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.send(&out)?;
        self.read_reply()
    }

    /// Writes already-encoded commands (a pipeline); read the replies with
    /// [`Conn::read_reply`].
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .context("writing to the server")?;
        Ok(())
    }

    /// Reads one complete reply.
    pub fn read_reply(&mut self) -> Result<Reply> {
        self.read_nested(0)
    }

    fn read_nested(&mut self, depth: usize) -> Result<Reply> {
        let line = self.read_line()?;
        let (kind, rest) = line.split_at(1);
        Ok(match kind {
            "+" => Reply::Simple(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Integer(
                rest.parse()
                    .with_context(|| format!("bad integer {line:?}"))?,
            ),
            "$" => {
                let length: i64 = rest
                    .parse()
                    .with_context(|| format!("bad length {line:?}"))?;
                if length < 0 {
                    Reply::Bulk(None)
                } else {
                    let length = usize::try_from(length)?;
                    if length > MAX_BULK {
                        bail!("bulk reply of {length} bytes is too large");
                    }
                    let mut data = vec![0; length + 2];
                    self.reader
                        .read_exact(&mut data)
                        .context("reading a bulk reply")?;
                    if !data.ends_with(b"\r\n") {
                        bail!("bulk reply not terminated by CRLF");
                    }
                    data.truncate(length);
                    Reply::Bulk(Some(data))
                }
            }
            "*" => {
                let count: i64 = rest
                    .parse()
                    .with_context(|| format!("bad count {line:?}"))?;
                if count < 0 {
                    Reply::Array(None)
                } else {
                    let count = usize::try_from(count)?;
                    if count > MAX_ARRAY || depth >= MAX_DEPTH {
                        bail!("array reply too large or too deep");
                    }
                    let mut items = Vec::with_capacity(count);
                    for _ in 0..count {
                        items.push(self.read_nested(depth + 1)?);
                    }
                    Reply::Array(Some(items))
                }
            }
            _ => bail!("unexpected reply line {line:?}"),
        })
    }

    /// One CRLF-terminated line, without the CRLF.
    fn read_line(&mut self) -> Result<String> {
        let mut line = Vec::new();
        (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .context("reading from the server")?;
        if line.is_empty() {
            bail!("the server closed the connection");
        }
        if !line.ends_with(b"\r\n") || line.len() < 3 {
            bail!(
                "malformed reply line {:?}",
                String::from_utf8_lossy(&line[..line.len().min(80)])
            );
        }
        line.truncate(line.len() - 2);
        String::from_utf8(line).context("reply line is not UTF-8")
    }
}

/// Appends `args` as one RESP command (an array of bulk strings) to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// `Ok` if 127.0.0.1:`port` answers `PING` with `+PONG` within `timeout`.
pub fn ping(port: u16, timeout: Duration) -> Result<()> {
    let mut conn = Conn::connect(port, timeout)?;
    conn.send(b"*1\r\n$4\r\nPING\r\n")?;
    match conn.read_reply()? {
        Reply::Simple(pong) if pong == "PONG" => Ok(()),
        other => bail!("PING answered {other:?}"),
    }
}

/// The `field:value` lines of an `INFO` reply as an integer, if present.
pub fn info_field(info: &str, field: &str) -> Option<u64> {
    info_text(info, field)?.parse().ok()
}

/// The value of a `field:value` line of an `INFO` reply, if present.
pub fn info_text<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (name, value) = line.trim_end().split_once(':')?;
        (name == field).then_some(value)
    })
}

/// Sends `INFO <section>` and returns the text.
pub fn info(conn: &mut Conn, section: &str) -> Result<String> {
    match conn.command(&[b"INFO", section.as_bytes()])? {
        Reply::Bulk(Some(text)) => Ok(String::from_utf8_lossy(&text).into_owned()),
        other => bail!("INFO {section} answered {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands() {
        let mut out = Vec::new();
        encode(&mut out, &[b"SET", b"k", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn reads_info_fields() {
        let info =
            "# Memory\r\nused_memory:1024\r\nused_memory_rss:4096\r\nused_memory_human:1K\r\n";
        assert_eq!(info_field(info, "used_memory"), Some(1024));
        assert_eq!(info_field(info, "used_memory_rss"), Some(4096));
        assert_eq!(info_field(info, "used_memory_human"), None);
        assert_eq!(info_field(info, "missing"), None);
    }

    #[test]
    fn reads_info_text() {
        let info = "# Replication\r\nrole:master\r\nraft_leader_id:\r\n";
        assert_eq!(info_text(info, "role"), Some("master"));
        assert_eq!(info_text(info, "raft_leader_id"), Some(""));
        assert_eq!(info_text(info, "master_host"), None);
    }
}
