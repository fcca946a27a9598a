//! Shared, multiplexed node connections ("links") for the plain keyed
//! commands of every client. Each link is one TCP connection to one node,
//! owned by two tasks: a writer that coalesces whatever jobs are waiting into
//! one write, and a reader that hands each job its replies in order. Many
//! clients' requests thus cost one write and one read per node and wakeup,
//! and the node sees them as one pipeline (one proposal for a run of writes).
//!
//! Reads and writes use separate links, so a read never waits behind a write
//! that waits for its commit. Commands with connection state (WATCH, MULTI,
//! ASKING, READONLY, blocking commands, scripts) never come here: they use
//! the client's own connections (`upstream`).
//!
//! Failures: a connect failure fails the waiting jobs with
//! [`Failure::Connect`] (nothing was sent); a write or read failure, a closed
//! connection or a reply that does not come within the upstream timeout fails
//! every job whose bytes may have gone out with [`Failure::Io`]. The link is
//! then dead and the next job opens a new one.

use super::upstream::{self, Failure};
use bytes::{Bytes, BytesMut};
use resp::Protocol;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// A job's replies: the bytes the node sent for them, back to back, how
/// many replies those are, and the failure that stopped the rest, if any.
#[derive(Debug)]
pub struct Outcome {
    pub replies: Bytes,
    pub count: usize,
    pub failure: Option<Failure>,
}

impl Outcome {
    fn failed(replies: Bytes, count: usize, failure: Failure) -> Outcome {
        Outcome {
            replies,
            count,
            failure: Some(failure),
        }
    }

    /// The replies one by one (each as the node sent it). A lone reply is
    /// not parsed again.
    pub fn each(&self) -> impl Iterator<Item = Bytes> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let rest = &self.replies[at..];
            let length = match self.count {
                1 if !rest.is_empty() => rest.len(),
                _ => resp::reply_length(rest).ok().flatten()?,
            };
            at += length;
            Some(self.replies.slice(at - length..at))
        })
        .take(self.count)
    }
}

/// Bytes one write may gather from waiting jobs.
const MAX_WRITE_BYTES: usize = 256 * 1024;

/// Which link of a node a job takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    Read,
    Write(u8),
}

impl Lane {
    /// The lane for a batch: reads only, or writes spread by client over
    /// `write_links` links.
    pub fn of(reads_only: bool, client: u64, write_links: u64) -> Lane {
        if reads_only {
            Lane::Read
        } else {
            Lane::Write((client % write_links.clamp(1, 64)) as u8)
        }
    }
}

/// A node's link for one protocol and lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LinkKind {
    resp3: bool,
    lane: Lane,
}

struct Job {
    wire: Vec<u8>,
    count: usize,
    done: oneshot::Sender<Outcome>,
}

struct Link {
    jobs: mpsc::UnboundedSender<Job>,
    alive: Arc<AtomicBool>,
}

/// A multiply-rotate hash for the links' keys, a word at a time: node
/// addresses and lanes come from the cluster's own topology, not from
/// clients, so a keyed hash buys nothing, and SipHash cost more than the
/// rest of a submit.
#[derive(Default)]
struct WordHash(u64);

impl WordHash {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for WordHash {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut eight = [0u8; 8];
            eight.copy_from_slice(word);
            self.add(u64::from_le_bytes(eight));
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        self.add(u64::from_le_bytes(last));
    }

    fn write_u8(&mut self, value: u8) {
        self.add(u64::from(value));
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type LinkMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<WordHash>>;

/// The router's links, by node, then protocol and lane (found without
/// allocating: the address is looked up as borrowed text).
pub struct Pool {
    links: Mutex<LinkMap<String, LinkMap<LinkKind, Link>>>,
    timeout: Duration,
}

impl Pool {
    pub fn new(timeout: Duration) -> Pool {
        Pool {
            links: Mutex::new(LinkMap::default()),
            timeout,
        }
    }

    /// Queues `count` requests, encoded in `wire`, for `address` and returns
    /// where their replies will arrive. Never waits: several nodes' shares go
    /// out before any reply is awaited.
    pub fn submit(
        &self,
        address: &str,
        protocol: Protocol,
        lane: Lane,
        wire: Vec<u8>,
        count: usize,
    ) -> oneshot::Receiver<Outcome> {
        let (done, receiver) = oneshot::channel();
        let mut job = Job { wire, count, done };
        let kind = LinkKind {
            resp3: protocol == Protocol::Resp3,
            lane,
        };
        let mut all = match self.links.lock() {
            Ok(links) => links,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !all.contains_key(address) {
            all.insert(address.to_string(), LinkMap::default());
        }
        // A dead link is replaced; a link that died between the check and
        // the send hands the job back, and a fresh one takes it.
        for _ in 0..2 {
            let Some(links) = all.get_mut(address) else {
                break;
            };
            let link = match links.entry(kind) {
                Entry::Occupied(entry) if entry.get().alive.load(Ordering::Acquire) => {
                    entry.into_mut()
                }
                Entry::Occupied(mut entry) => {
                    entry.insert(Link::open(address, protocol, self.timeout));
                    entry.into_mut()
                }
                Entry::Vacant(entry) => entry.insert(Link::open(address, protocol, self.timeout)),
            };
            match link.jobs.send(job) {
                Ok(()) => return receiver,
                Err(mpsc::error::SendError(returned)) => {
                    link.alive.store(false, Ordering::Release);
                    job = returned;
                }
            }
        }
        let _ = job.done.send(Outcome::failed(
            Bytes::new(),
            0,
            Failure::Connect("no usable connection".to_string()),
        ));
        receiver
    }
}

/// Waits for a submitted job's outcome.
pub async fn outcome(receiver: oneshot::Receiver<Outcome>) -> Outcome {
    match receiver.await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::failed(
            Bytes::new(),
            0,
            Failure::Io("connection task ended".to_string()),
        ),
    }
}

impl Link {
    fn open(address: &str, protocol: Protocol, limit: Duration) -> Link {
        let (jobs, receiver) = mpsc::unbounded_channel();
        let alive = Arc::new(AtomicBool::new(true));
        tokio::spawn(run(
            address.to_string(),
            protocol,
            limit,
            receiver,
            alive.clone(),
        ));
        Link { jobs, alive }
    }
}

/// One link's life: connect, then write and read until something fails.
async fn run(
    address: String,
    protocol: Protocol,
    limit: Duration,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    alive: Arc<AtomicBool>,
) {
    let stream = match upstream::connect(&address, protocol, limit).await {
        Ok(stream) => stream,
        Err(failure) => {
            alive.store(false, Ordering::Release);
            refuse_waiting(&mut jobs, failure);
            return;
        }
    };
    let (read_half, write_half) = stream.into_split();
    let (pending, waiting) = mpsc::unbounded_channel();
    tokio::spawn(read_replies(read_half, waiting, limit, alive.clone()));
    write_jobs(write_half, &mut jobs, pending, limit, &alive).await;
    alive.store(false, Ordering::Release);
    refuse_waiting(
        &mut jobs,
        Failure::Connect("the node connection closed before sending".to_string()),
    );
}

/// Fails every job still queued (none of their bytes went out).
fn refuse_waiting(jobs: &mut mpsc::UnboundedReceiver<Job>, failure: Failure) {
    jobs.close();
    while let Ok(job) = jobs.try_recv() {
        let _ = job
            .done
            .send(Outcome::failed(Bytes::new(), 0, failure.clone()));
    }
}

/// Gathers waiting jobs into one write each time; hands their reply slots to
/// the reader first, so replies never arrive before their slot.
async fn write_jobs(
    mut stream: OwnedWriteHalf,
    jobs: &mut mpsc::UnboundedReceiver<Job>,
    pending: mpsc::UnboundedSender<(usize, oneshot::Sender<Outcome>)>,
    limit: Duration,
    alive: &AtomicBool,
) {
    let mut wire = Vec::with_capacity(16 * 1024);
    while let Some(first) = jobs.recv().await {
        if !alive.load(Ordering::Acquire) {
            let failure = Failure::Connect("the node connection closed".to_string());
            let _ = first.done.send(Outcome::failed(Bytes::new(), 0, failure));
            return;
        }
        wire.clear();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            wire.extend_from_slice(&job.wire);
            if let Err(mpsc::error::SendError((_, done))) = pending.send((job.count, job.done)) {
                // The reader is gone: nothing of this job was sent.
                let failure = Failure::Connect("the node connection closed".to_string());
                let _ = done.send(Outcome::failed(Bytes::new(), 0, failure));
                return;
            }
            if wire.len() < MAX_WRITE_BYTES {
                next = jobs.try_recv().ok();
            }
        }
        match tokio::time::timeout(limit, stream.write_all(&wire)).await {
            Ok(Ok(())) => {}
            // The reader fails the jobs written so far when `pending` drops.
            Ok(Err(_)) | Err(_) => return,
        }
        if wire.capacity() > 4 * MAX_WRITE_BYTES {
            wire = Vec::with_capacity(16 * 1024);
        }
    }
}

/// A job being answered: `answered` of its `count` replies are complete,
/// taking the first `length` bytes of the reader's buffer (the job at the
/// front of the queue only).
struct Waiting {
    count: usize,
    answered: usize,
    length: usize,
    done: oneshot::Sender<Outcome>,
}

/// Queues a written job's reply slot; the reply deadline starts when the
/// queue stops being empty.
fn register(
    queue: &mut VecDeque<Waiting>,
    deadline: std::pin::Pin<&mut tokio::time::Sleep>,
    limit: Duration,
    count: usize,
    done: oneshot::Sender<Outcome>,
) {
    if queue.is_empty() {
        deadline.reset(Instant::now() + limit);
    }
    queue.push_back(Waiting {
        count,
        answered: 0,
        length: 0,
        done,
    });
}

/// Reads replies and hands them to the jobs in the order they were written.
/// A reply overdue by more than `limit` (no byte for that long while a job
/// waits) kills the link.
async fn read_replies(
    mut stream: OwnedReadHalf,
    mut waiting_jobs: mpsc::UnboundedReceiver<(usize, oneshot::Sender<Outcome>)>,
    limit: Duration,
    alive: Arc<AtomicBool>,
) {
    let mut queue: VecDeque<Waiting> = VecDeque::new();
    let mut buffer = BytesMut::with_capacity(16 * 1024);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    let reason = 'link: loop {
        // Jobs are registered before their bytes are written: take every
        // registered one first, so a reply never looks unasked for because
        // its job was not picked up yet.
        while let Ok((count, done)) = waiting_jobs.try_recv() {
            register(&mut queue, deadline.as_mut(), limit, count, done);
        }
        // Hand out every job whose replies are complete, in one piece.
        while let Some(front) = queue.front_mut() {
            if front.answered == front.count {
                let replies = buffer.split_to(front.length).freeze();
                if let Some(answered) = queue.pop_front() {
                    let _ = answered.done.send(Outcome {
                        replies,
                        count: answered.count,
                        failure: None,
                    });
                }
                continue;
            }
            match resp::reply_length(&buffer[front.length..]) {
                Ok(Some(length)) => {
                    front.length += length;
                    front.answered += 1;
                }
                Ok(None) => break,
                Err(error) => break 'link error.to_string(),
            }
        }
        if queue.is_empty() && !buffer.is_empty() {
            break 'link "a reply nobody asked for".to_string();
        }
        // The reply being read, past those of the front job already complete.
        let reading = buffer.len() - queue.front().map_or(0, |front| front.length);
        if reading > upstream::MAX_REPLY_BYTES {
            break 'link "reply too large".to_string();
        }
        tokio::select! {
            biased;
            entry = waiting_jobs.recv() => match entry {
                Some((count, done)) => register(&mut queue, deadline.as_mut(), limit, count, done),
                None => break 'link "connection closed".to_string(),
            },
            read = stream.read_buf(&mut buffer) => match read {
                Ok(0) => break 'link "connection closed".to_string(),
                Ok(_) => {
                    deadline.as_mut().reset(Instant::now() + limit);
                    if buffer.capacity() - buffer.len() < 4096 {
                        buffer.reserve(16 * 1024);
                    }
                }
                Err(error) => break 'link format!("read: {error}"),
            },
            _ = &mut deadline, if !queue.is_empty() => {
                break 'link format!("no reply within {} ms", limit.as_millis());
            }
        }
    };
    alive.store(false, Ordering::Release);
    let failure = Failure::Io(reason);
    for job in queue {
        // Only the front job can have complete replies.
        let replies = buffer.split_to(job.length.min(buffer.len())).freeze();
        let _ = job
            .done
            .send(Outcome::failed(replies, job.answered, failure.clone()));
    }
    waiting_jobs.close();
    while let Ok((_, done)) = waiting_jobs.try_recv() {
        let _ = done.send(Outcome::failed(Bytes::new(), 0, failure.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A node stand-in: reads `expect` request bytes, then sends `replies`
    /// in the given pieces, a little apart, then closes.
    async fn node(expect: usize, pieces: Vec<&'static [u8]>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; expect];
            stream.read_exact(&mut request).await.unwrap();
            for piece in pieces {
                stream.write_all(piece).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        address
    }

    fn wire(requests: &[&[u8]]) -> Vec<u8> {
        requests.concat()
    }

    #[tokio::test]
    async fn a_job_gets_its_replies_whole_however_they_arrive() {
        let get = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n".as_slice();
        let address = node(
            3 * get.len(),
            vec![b"$1\r\nx", b"\r\n:4", b"2\r\n-MOVED 1 h:1\r", b"\n"],
        )
        .await;
        let pool = Pool::new(Duration::from_secs(5));
        let first = pool.submit(&address, Protocol::Resp2, Lane::Read, wire(&[get, get]), 2);
        let second = pool.submit(&address, Protocol::Resp2, Lane::Read, wire(&[get]), 1);
        let first = outcome(first).await;
        assert!(first.failure.is_none(), "{:?}", first.failure);
        let replies: Vec<Bytes> = first.each().collect();
        assert_eq!(
            replies,
            vec![Bytes::from("$1\r\nx\r\n"), Bytes::from(":42\r\n")]
        );
        let second = outcome(second).await;
        assert_eq!(
            second.each().collect::<Vec<_>>(),
            vec![Bytes::from("-MOVED 1 h:1\r\n")]
        );
    }

    #[tokio::test]
    async fn a_connection_lost_mid_job_keeps_the_replies_that_came() {
        let get = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n".as_slice();
        let address = node(3 * get.len(), vec![b"+OK\r\n$3\r\nab"]).await;
        let pool = Pool::new(Duration::from_secs(5));
        let job = pool.submit(
            &address,
            Protocol::Resp2,
            Lane::Read,
            wire(&[get, get, get]),
            3,
        );
        let job = outcome(job).await;
        assert_eq!(job.count, 1);
        assert_eq!(job.each().collect::<Vec<_>>(), vec![Bytes::from("+OK\r\n")]);
        assert!(
            matches!(job.failure, Some(Failure::Io(_))),
            "{:?}",
            job.failure
        );
    }
}
