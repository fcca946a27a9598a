//! The durable Raft log of one group.
//!
//! On disk, a directory of segment files plus one metadata file:
//!
//! ```text
//! 00000000000000000001.log   records of entries 1..  (name = first index)
//! 00000000000000004097.log   the next segment, started once the previous one
//!                            exceeded `segment_bytes`
//! meta                       vote, committed log id, last purged log id
//! ```
//!
//! A record is `[payload length u32 LE][CRC-32 of payload u32 LE][payload]`, the
//! payload being the entry in the crate's codec. Recovery reads the segments in
//! order and stops at the first torn (short) or corrupt (checksum, decoding, or
//! index sequence) record: the file is cut there and later segments are removed,
//! so the log is always a clean prefix of what was written.
//!
//! The metadata file is replaced atomically (temporary file, fsync, rename,
//! directory fsync) and carries its own CRC.
//!
//! Writes go to one writer (a dedicated thread by default, or a task under a
//! simulated runtime). It takes every operation queued since its last round,
//! performs them in order, then makes them durable with one fsync and only then
//! reports the appends flushed: concurrent appends share an fsync (group
//! commit). Entries are also kept in memory from the moment `append` returns
//! until they are purged (after a snapshot), so reads never touch the disk; the
//! snapshot policy bounds how many that is.

pub mod fs;

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::codec;
use crate::types::{Entry, LogId, TypeConfig, Vote};
use fs::{AppendFile, Fs, StdFs};

/// Largest record accepted when reading or writing.
pub const MAX_RECORD_BYTES: usize = 512 << 20;

const RECORD_HEADER_BYTES: usize = 8;
const META_MAGIC: &[u8; 8] = b"SLRFMETA";
const META_FILE: &str = "meta";

/// Persist the committed log id at least this often (in entries); it is
/// advisory (a restarted replica re-applies up to it before hearing from the
/// leader), so it need not cost an fsync per commit.
const COMMITTED_PERSIST_STRIDE: u64 = 1024;

/// Zeros written ahead of a segment's records at a time.
pub const DEFAULT_PREALLOCATE: u64 = 1 << 20;

/// Where the writer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterMode {
    /// A dedicated OS thread: fsyncs never stall the async runtime.
    Thread,
    /// A task on the current runtime (for simulated runtimes and disks).
    Task,
}

#[derive(Clone)]
pub struct LogStoreOptions {
    /// Start a new segment once the current one holds this many bytes.
    pub segment_bytes: u64,
    /// fsync every write batch (the default). Without it, acknowledged entries
    /// survive a process crash but not a power failure or kernel crash.
    pub fsync: bool,
    pub writer: WriterMode,
    pub fs: Arc<dyn Fs>,
    /// Write zeros ahead of the records this many bytes at a time, so an
    /// fsync after an append need not write the file's size and block map
    /// (0: append plainly). See [`fs::Fs::open_segment`].
    pub preallocate: u64,
}

impl Default for LogStoreOptions {
    fn default() -> Self {
        LogStoreOptions {
            segment_bytes: 64 << 20,
            fsync: true,
            writer: WriterMode::Thread,
            fs: Arc::new(StdFs),
            preallocate: DEFAULT_PREALLOCATE,
        }
    }
}

/// The metadata file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
}

/// A handle on the log; clones share it.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

struct Shared {
    memory: Mutex<Memory>,
    writer: mpsc::UnboundedSender<WriteOp>,
    fsyncs: Arc<AtomicU64>,
}

/// What reads see: every entry not yet purged, and the metadata.
struct Memory {
    entries: VecDeque<Entry>,
    /// Running totals of [`entry_bytes`], one per entry of `entries`: the
    /// estimated bytes of every entry held since the log opened, up to and
    /// including that one. The bytes of any run of held entries is then a
    /// difference of two totals, so the log-bounding task's questions cost
    /// O(log n) instead of a walk over every argument held.
    totals: VecDeque<u64>,
    /// The running total before the first held entry.
    base: u64,
    meta: Meta,
    /// Committed index last sent to disk.
    committed_persisted: u64,
}

/// About how many heap bytes an entry held in memory takes: its commands'
/// arguments plus a fixed overhead per argument and per entry. `maxmemory`
/// leaves this out of the memory it compares with the limit, as Redis leaves
/// out its replication buffers.
fn entry_bytes(entry: &Entry) -> u64 {
    const ENTRY_OVERHEAD: u64 = 128;
    const ARGUMENT_OVERHEAD: u64 = 40;
    fn op_bytes(op: &crate::Op) -> u64 {
        match op {
            crate::Op::Exec { commands, .. } | crate::Op::ExecOutOfMemory { commands, .. } => {
                commands
                    .iter()
                    .flatten()
                    .map(|argument| argument.len() as u64 + ARGUMENT_OVERHEAD)
                    .sum::<u64>()
            }
            crate::Op::Evict { keys } => keys
                .iter()
                .map(|(_, key)| key.len() as u64 + ARGUMENT_OVERHEAD)
                .sum::<u64>(),
            crate::Op::Batch(parts) => parts.iter().map(|(_, op)| op_bytes(op)).sum(),
            _ => 0,
        }
    }
    match &entry.payload {
        openraft::EntryPayload::Normal(request) => ENTRY_OVERHEAD + op_bytes(&request.op),
        _ => ENTRY_OVERHEAD,
    }
}

impl Memory {
    fn new(entries: VecDeque<Entry>, meta: Meta, committed_persisted: u64) -> Memory {
        let mut memory = Memory {
            entries: VecDeque::with_capacity(entries.len()),
            totals: VecDeque::with_capacity(entries.len()),
            base: 0,
            meta,
            committed_persisted,
        };
        for entry in entries {
            memory.push_back(entry);
        }
        memory
    }

    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|entry| entry.log_id.index)
    }

    fn push_back(&mut self, entry: Entry) {
        let total = self.totals.back().copied().unwrap_or(self.base) + entry_bytes(&entry);
        self.totals.push_back(total);
        self.entries.push_back(entry);
    }

    fn pop_back(&mut self) {
        self.entries.pop_back();
        self.totals.pop_back();
    }

    fn pop_front(&mut self) {
        self.entries.pop_front();
        if let Some(total) = self.totals.pop_front() {
            self.base = total;
        }
    }

    /// Estimated heap bytes of every held entry.
    fn bytes(&self) -> u64 {
        self.totals.back().map_or(0, |total| total - self.base)
    }

    /// The running total through index `index`: of every held entry at or
    /// below it.
    fn total_through(&self, index: u64) -> u64 {
        let Some(first) = self.first_index() else {
            return self.base;
        };
        match index.checked_sub(first) {
            None => self.base,
            Some(offset) => match self.totals.get(offset as usize) {
                Some(total) => *total,
                None => self.totals.back().copied().unwrap_or(self.base),
            },
        }
    }

    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .back()
            .map(|entry| entry.log_id)
            .or(self.meta.last_purged)
    }
}

enum WriteOp {
    Append {
        records: Vec<(u64, Vec<u8>)>,
        callback: IOFlushed<TypeConfig>,
    },
    /// Remove every entry from this index on.
    TruncateFrom {
        index: u64,
        done: oneshot::Sender<io::Result<()>>,
    },
    /// Entries up to and including this index are purged.
    Purge {
        index: u64,
        meta: Meta,
        done: oneshot::Sender<io::Result<()>>,
    },
    SaveMeta {
        meta: Meta,
        done: Option<oneshot::Sender<io::Result<()>>>,
    },
    /// Answered once every operation queued before it has reached the files.
    Barrier {
        done: oneshot::Sender<io::Result<()>>,
    },
}

impl LogStore {
    /// Opens (recovering) or creates the log in `dir`.
    pub async fn open(dir: &Path, options: LogStoreOptions) -> io::Result<LogStore> {
        let fs = options.fs.clone();
        fs.create_dir_all(dir)?;
        let meta = read_meta(fs.as_ref(), dir)?;
        let (mut disk, mut entries) = Disk::recover(dir, &options)?;
        if let Some(purged) = meta.last_purged {
            while entries
                .front()
                .is_some_and(|entry| entry.log_id.index <= purged.index)
            {
                entries.pop_front();
            }
            // Finishes a purge cut short by a crash after its metadata was saved.
            disk.discard_through(purged.index)?;
        }
        let fsyncs = disk.fsyncs.clone();
        let (sender, receiver) = mpsc::unbounded_channel();
        match options.writer {
            WriterMode::Thread => {
                std::thread::Builder::new()
                    .name("raft-log-writer".into())
                    .spawn(move || disk.run_blocking(receiver))?;
            }
            WriterMode::Task => {
                tokio::spawn(disk.run_async(receiver));
            }
        }
        let committed_persisted = meta.committed.map(|id| id.index).unwrap_or(0);
        Ok(LogStore {
            shared: Arc::new(Shared {
                memory: Mutex::new(Memory::new(entries, meta, committed_persisted)),
                writer: sender,
                fsyncs,
            }),
        })
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.shared
            .memory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn send(&self, op: WriteOp) -> io::Result<()> {
        self.shared
            .writer
            .send(op)
            .map_err(|_| io::Error::other("the log writer has stopped"))
    }

    async fn send_and_wait(
        &self,
        make: impl FnOnce(oneshot::Sender<io::Result<()>>) -> WriteOp,
    ) -> io::Result<()> {
        let (done, wait) = oneshot::channel();
        self.send(make(done))?;
        wait.await
            .map_err(|_| io::Error::other("the log writer has stopped"))?
    }

    /// Waits until every write queued so far has reached the files (written,
    /// not necessarily synced): after this, a log of a closed replica is
    /// left alone and may be opened again.
    pub async fn settle(&self) -> io::Result<()> {
        self.send_and_wait(|done| WriteOp::Barrier { done }).await
    }

    /// Estimated heap bytes of the entries held in memory (not yet purged).
    pub fn memory_bytes(&self) -> u64 {
        self.memory().bytes()
    }

    /// Estimated heap bytes of the entries held in memory whose index is in
    /// `after + 1 ..= through`.
    pub fn bytes_between(&self, after: u64, through: u64) -> u64 {
        let memory = self.memory();
        memory
            .total_through(through)
            .saturating_sub(memory.total_through(after))
    }

    /// The highest index at or below `through` such that the entries held in
    /// memory after it, up to `through`, take at most `keep` bytes: purging up
    /// to it leaves about `keep` bytes behind `through`. None when those
    /// entries already fit.
    pub fn purge_point(&self, through: u64, keep: u64) -> Option<u64> {
        let memory = self.memory();
        let first = memory.first_index()?;
        let end = memory.total_through(through);
        if end - memory.base <= keep {
            return None;
        }
        // The entry at offset k keeps end - (total before it) bytes, more
        // than `keep` exactly while the total before it is below `end - keep`:
        // for offset 0 (the base) and offsets 1..=count below.
        let count = memory.totals.partition_point(|total| *total < end - keep);
        Some(first + count as u64)
    }

    /// Number of fsyncs the writer has issued (for tests of group commit).
    pub fn fsync_count(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }
}

fn range_bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&start) => start,
        Bound::Excluded(&start) => start.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&end) => end.saturating_add(1),
        Bound::Excluded(&end) => end,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (start, end) = range_bounds(&range);
        let memory = self.memory();
        let Some(first) = memory.first_index() else {
            return Ok(Vec::new());
        };
        let from = start.max(first);
        if from >= end {
            return Ok(Vec::new());
        }
        let skip = (from - first) as usize;
        let take = (end - from).min(memory.entries.len() as u64) as usize;
        Ok(memory
            .entries
            .iter()
            .skip(skip)
            .take(take)
            .cloned()
            .collect())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.memory().meta.vote)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let memory = self.memory();
        Ok(LogState {
            last_purged_log_id: memory.meta.last_purged,
            last_log_id: memory.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let meta = {
            let mut memory = self.memory();
            memory.meta.vote = Some(*vote);
            memory.meta.clone()
        };
        self.send_and_wait(|done| WriteOp::SaveMeta {
            meta,
            done: Some(done),
        })
        .await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let meta = {
            let mut memory = self.memory();
            memory.meta.committed = committed;
            let index = committed.map(|id| id.index).unwrap_or(0);
            if index < memory.committed_persisted + COMMITTED_PERSIST_STRIDE {
                return Ok(());
            }
            memory.committed_persisted = index;
            memory.meta.clone()
        };
        self.send(WriteOp::SaveMeta { meta, done: None })
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        let memory = self.memory();
        // Never claim more than the log holds (a relaxed-fsync crash may lose a tail).
        let last = memory.last_log_id();
        Ok(match (memory.meta.committed, last) {
            (Some(committed), Some(last)) if committed.index > last.index => Some(last),
            (Some(_), None) => None,
            (committed, _) => committed,
        })
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut records = Vec::new();
        {
            let mut memory = self.memory();
            for entry in entries {
                let expected = memory.last_log_id().map(|id| id.index + 1);
                if let Some(expected) = expected {
                    if entry.log_id.index != expected {
                        return Err(io::Error::other(format!(
                            "append of index {} after {}: the log must stay contiguous",
                            entry.log_id.index,
                            expected - 1
                        )));
                    }
                }
                let payload = codec::encode_entry(&entry);
                if payload.len() > MAX_RECORD_BYTES {
                    return Err(io::Error::other("log entry larger than the record limit"));
                }
                records.push((entry.log_id.index, payload));
                memory.push_back(entry);
            }
        }
        self.send(WriteOp::Append { records, callback })
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let index = last_log_id.map(|id| id.index + 1).unwrap_or(0);
        {
            let mut memory = self.memory();
            while memory
                .entries
                .back()
                .is_some_and(|entry| entry.log_id.index >= index)
            {
                memory.pop_back();
            }
        }
        self.send_and_wait(|done| WriteOp::TruncateFrom { index, done })
            .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let meta = {
            let mut memory = self.memory();
            while memory
                .entries
                .front()
                .is_some_and(|entry| entry.log_id.index <= log_id.index)
            {
                memory.pop_front();
            }
            memory.meta.last_purged = Some(log_id);
            memory.meta.clone()
        };
        self.send_and_wait(|done| WriteOp::Purge {
            index: log_id.index,
            meta,
            done,
        })
        .await
    }
}

fn read_meta(fs: &dyn Fs, dir: &Path) -> io::Result<Meta> {
    let path = dir.join(META_FILE);
    if !fs.exists(&path) {
        return Ok(Meta::default());
    }
    let data = fs.read(&path)?;
    let corrupt = || io::Error::new(io::ErrorKind::InvalidData, "the log's meta file is corrupt");
    if data.len() < META_MAGIC.len() + 8 || &data[..META_MAGIC.len()] != META_MAGIC {
        return Err(corrupt());
    }
    let body = &data[META_MAGIC.len()..];
    let length = u32::from_le_bytes(body[..4].try_into().map_err(|_| corrupt())?) as usize;
    let checksum = u32::from_le_bytes(body[4..8].try_into().map_err(|_| corrupt())?);
    let payload = body.get(8..8 + length).ok_or_else(corrupt)?;
    if crc32fast::hash(payload) != checksum {
        return Err(corrupt());
    }
    codec::decode(payload)
}

fn encode_meta(meta: &Meta) -> Vec<u8> {
    let payload = codec::encode(meta);
    let mut data = Vec::with_capacity(META_MAGIC.len() + 8 + payload.len());
    data.extend_from_slice(META_MAGIC);
    data.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    data.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    data.extend_from_slice(&payload);
    data
}

fn segment_name(first_index: u64) -> String {
    format!("{first_index:020}.log")
}

/// The writer's view: segment files and where each entry's record starts.
struct Disk {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    segment_bytes: u64,
    fsync: bool,
    preallocate: u64,
    /// Segment first index -> the length of its records in bytes (the file
    /// may be longer: zeros written ahead).
    segments: BTreeMap<u64, u64>,
    /// (segment, offset) of the record of entry `positions_base + i`.
    positions: VecDeque<(u64, u64)>,
    positions_base: u64,
    /// The segment being appended to, open.
    current: Option<(u64, Box<dyn AppendFile>)>,
    /// Records for `current` not yet handed to the file: a batch's records go
    /// out in one write.
    pending: Vec<u8>,
    fsyncs: Arc<AtomicU64>,
}

impl Disk {
    /// Scans the segments, cutting the log at the first bad record.
    fn recover(dir: &Path, options: &LogStoreOptions) -> io::Result<(Disk, VecDeque<Entry>)> {
        let fs = options.fs.clone();
        let mut firsts: Vec<u64> = fs
            .list(dir)?
            .iter()
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?;
                name.strip_suffix(".log")?.parse::<u64>().ok()
            })
            .collect();
        firsts.sort_unstable();
        let mut disk = Disk {
            fs: fs.clone(),
            dir: dir.to_path_buf(),
            segment_bytes: options.segment_bytes.max(1),
            fsync: options.fsync,
            // A step past the segment's size would write zeros no record
            // ever takes.
            preallocate: options.preallocate.min(options.segment_bytes.max(1)),
            segments: BTreeMap::new(),
            positions: VecDeque::new(),
            positions_base: 0,
            current: None,
            pending: Vec::new(),
            fsyncs: Arc::new(AtomicU64::new(0)),
        };
        let mut entries: VecDeque<Entry> = VecDeque::new();
        let mut broken = false;
        for first in firsts {
            let path = dir.join(segment_name(first));
            if broken {
                tracing::warn!(path = %path.display(), "removing a log segment after a damaged record");
                fs.remove(&path)?;
                continue;
            }
            let data = fs.read(&path)?;
            let mut offset = 0usize;
            let mut zero_tail = false;
            while offset < data.len() {
                let Some(entry) = decode_record(&data[offset..]) else {
                    // Zeros to the end are the space written ahead of the
                    // records: the segment ends here, whole.
                    zero_tail = data[offset..].iter().all(|&byte| byte == 0);
                    broken = !zero_tail;
                    break;
                };
                let (entry, used) = entry;
                let expected = entries.back().map(|last| last.log_id.index + 1);
                if expected.is_some_and(|expected| expected != entry.log_id.index)
                    || (expected.is_none() && entry.log_id.index < first)
                {
                    broken = true;
                    break;
                }
                if entries.is_empty() {
                    disk.positions_base = entry.log_id.index;
                }
                disk.positions.push_back((first, offset as u64));
                entries.push_back(entry);
                offset += used;
            }
            if broken {
                tracing::warn!(
                    path = %path.display(),
                    offset,
                    "log recovery stopped at a torn or corrupt record"
                );
                if offset == 0 {
                    fs.remove(&path)?;
                } else {
                    fs.truncate(&path, offset as u64)?;
                    disk.segments.insert(first, offset as u64);
                }
                fs.sync_dir(dir)?;
            } else {
                if zero_tail {
                    // Cut, so that every file system appends right after the
                    // records (one without preallocation appends at the
                    // file's end); the writer writes zeros ahead again.
                    fs.truncate(&path, offset as u64)?;
                }
                disk.segments.insert(first, offset as u64);
            }
        }
        Ok((disk, entries))
    }

    fn run_blocking(mut self, mut receiver: mpsc::UnboundedReceiver<WriteOp>) {
        while let Some(first) = receiver.blocking_recv() {
            let mut batch = vec![first];
            while let Ok(op) = receiver.try_recv() {
                batch.push(op);
            }
            self.handle(batch);
        }
    }

    async fn run_async(mut self, mut receiver: mpsc::UnboundedReceiver<WriteOp>) {
        while let Some(first) = receiver.recv().await {
            let mut batch = vec![first];
            while let Ok(op) = receiver.try_recv() {
                batch.push(op);
            }
            let (flushed, failure) = self.write(batch);
            // A simulated disk's sync takes simulated time: a crash can come
            // between the writes and their sync.
            let latency = self.fs.sync_latency();
            if !flushed.is_empty() && !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            self.sync_and_report(flushed, failure);
        }
    }

    /// Performs a batch in order, then one fsync, then reports the appends.
    fn handle(&mut self, batch: Vec<WriteOp>) {
        let (flushed, failure) = self.write(batch);
        self.sync_and_report(flushed, failure);
    }

    /// Performs a batch's operations in order; the appends' callbacks wait
    /// for [`Disk::sync_and_report`].
    fn write(&mut self, batch: Vec<WriteOp>) -> (Vec<IOFlushed<TypeConfig>>, Option<io::Error>) {
        let mut flushed = Vec::new();
        let mut failure: Option<io::Error> = None;
        for op in batch {
            match op {
                WriteOp::Append { records, callback } => {
                    if failure.is_none() {
                        if let Err(error) = self.append(&records) {
                            failure = Some(error);
                        }
                    }
                    flushed.push(callback);
                }
                WriteOp::TruncateFrom { index, done } => {
                    let _ = done.send(self.truncate_from(index));
                }
                WriteOp::Purge { index, meta, done } => {
                    let _ = done.send(self.purge(index, &meta));
                }
                WriteOp::SaveMeta { meta, done } => {
                    // Entries appended before this are made durable first:
                    // what is saved never gets ahead of the log issued
                    // before it. A group's founder appends its membership
                    // entry and then saves its vote for the first election;
                    // a crash that kept the vote but lost the entry left a
                    // replica that openraft calls initialized (a vote of a
                    // later term) with no membership, so the group never
                    // formed (cluster simulation, seeds 372 and 686).
                    let synced = match failure {
                        Some(_) => Ok(()),
                        None => self.sync_current(),
                    };
                    let result = match synced {
                        Ok(()) => self.save_meta(&meta),
                        Err(error) => {
                            let reported = io::Error::new(error.kind(), error.to_string());
                            failure = Some(error);
                            Err(reported)
                        }
                    };
                    if let Some(done) = done {
                        let _ = done.send(result);
                    }
                }
                WriteOp::Barrier { done } => {
                    let _ = done.send(self.flush_pending());
                }
            }
        }
        if let Err(error) = self.flush_pending() {
            failure.get_or_insert(error);
        }
        (flushed, failure)
    }

    /// Writes the buffered records to the open segment.
    fn flush_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let result = match &mut self.current {
            Some((_, file)) => file.append(&self.pending),
            None => unreachable_segment(),
        };
        self.pending.clear();
        result
    }

    /// One fsync for a batch's appends, then their callbacks.
    fn sync_and_report(
        &mut self,
        flushed: Vec<IOFlushed<TypeConfig>>,
        mut failure: Option<io::Error>,
    ) {
        if failure.is_none() && !flushed.is_empty() {
            if let Err(error) = self.sync_current() {
                failure = Some(error);
            }
        }
        for callback in flushed {
            match &failure {
                None => callback.io_completed(Ok(())),
                Some(error) => {
                    callback.io_completed(Err(io::Error::new(error.kind(), error.to_string())))
                }
            }
        }
    }

    fn sync_current(&mut self) -> io::Result<()> {
        self.flush_pending()?;
        if !self.fsync {
            return Ok(());
        }
        if let Some((_, file)) = &mut self.current {
            file.sync()?;
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn append(&mut self, records: &[(u64, Vec<u8>)]) -> io::Result<()> {
        for (index, payload) in records {
            let segment = self.segment_for(*index)?;
            if segment
                != self
                    .current
                    .as_ref()
                    .map(|(first, _)| *first)
                    .unwrap_or(u64::MAX)
            {
                unreachable_segment()?;
            }
            if self.positions.is_empty() {
                self.positions_base = *index;
            }
            let length = self.segments.get(&segment).copied().unwrap_or(0);
            self.positions.push_back((segment, length));
            self.pending
                .extend_from_slice(&(payload.len() as u32).to_le_bytes());
            self.pending
                .extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
            self.pending.extend_from_slice(payload);
            let record = (RECORD_HEADER_BYTES + payload.len()) as u64;
            *self.segments.entry(segment).or_insert(0) += record;
        }
        Ok(())
    }

    /// The open segment to append entry `index` to, rolling to a new one when the
    /// current is full.
    fn segment_for(&mut self, index: u64) -> io::Result<u64> {
        let last = self
            .segments
            .iter()
            .next_back()
            .map(|(first, length)| (*first, *length));
        match last {
            Some((first, length)) if length < self.segment_bytes => {
                if self.current.as_ref().map(|(open, _)| *open) != Some(first) {
                    self.flush_pending()?;
                    let file = self.fs.open_segment(
                        &self.dir.join(segment_name(first)),
                        length,
                        self.preallocate,
                    )?;
                    self.current = Some((first, file));
                }
                Ok(first)
            }
            _ => {
                // The previous segment must be durable before later entries are.
                self.sync_current()?;
                if let (Some((first, length)), true) = (last, self.preallocate > 0) {
                    // A full segment keeps only its records: zeros are read
                    // as the end of the log's last segment alone (a version
                    // before zeros were written ahead reads them anywhere
                    // else as damage, and drops the segments after it).
                    self.current = None;
                    self.fs
                        .truncate(&self.dir.join(segment_name(first)), length)?;
                }
                let file = self.fs.open_segment(
                    &self.dir.join(segment_name(index)),
                    0,
                    self.preallocate,
                )?;
                self.fs.sync_dir(&self.dir)?;
                self.segments.insert(index, 0);
                self.current = Some((index, file));
                Ok(index)
            }
        }
    }

    fn truncate_from(&mut self, index: u64) -> io::Result<()> {
        let last = self.positions_base + self.positions.len() as u64;
        if self.positions.is_empty() || index >= last {
            return Ok(());
        }
        self.flush_pending()?;
        self.current = None;
        let (segment, offset) = if index <= self.positions_base {
            self.positions.front().copied().unwrap_or((0, 0))
        } else {
            self.positions[(index - self.positions_base) as usize]
        };
        let later: Vec<u64> = self
            .segments
            .range(segment + 1..)
            .map(|(first, _)| *first)
            .collect();
        for first in later {
            self.fs.remove(&self.dir.join(segment_name(first)))?;
            self.segments.remove(&first);
        }
        let path = self.dir.join(segment_name(segment));
        if offset == 0 {
            self.fs.remove(&path)?;
            self.segments.remove(&segment);
        } else {
            self.fs.truncate(&path, offset)?;
            self.segments.insert(segment, offset);
        }
        self.fs.sync_dir(&self.dir)?;
        let keep = index.saturating_sub(self.positions_base) as usize;
        self.positions.truncate(keep);
        Ok(())
    }

    fn purge(&mut self, index: u64, meta: &Meta) -> io::Result<()> {
        // Record the purge first: a crash between the two steps leaves extra
        // entries on disk, which recovery drops.
        self.save_meta(meta)?;
        self.discard_through(index)
    }

    /// Forgets entries up to and including `index` and removes the segments
    /// that hold nothing after it.
    fn discard_through(&mut self, index: u64) -> io::Result<()> {
        self.flush_pending()?;
        while self.positions_base <= index && !self.positions.is_empty() {
            self.positions.pop_front();
            self.positions_base += 1;
        }
        let doomed: Vec<u64> = if self.positions.is_empty() {
            // Nothing on disk outlives the purge (it may reach past the last
            // entry, as when a snapshot ahead of the log is installed). Every
            // segment goes: the next entry, `index + 1` or later, must start a
            // segment of its own, or recovery would read it after a gap and cut
            // the log there.
            self.positions_base = index + 1;
            self.segments.keys().copied().collect()
        } else {
            // A segment can go when the next one starts at or before index + 1.
            let firsts: Vec<u64> = self.segments.keys().copied().collect();
            firsts
                .windows(2)
                .filter(|pair| pair[1] <= index + 1)
                .map(|pair| pair[0])
                .collect()
        };
        for first in &doomed {
            if self.current.as_ref().map(|(open, _)| *open) == Some(*first) {
                self.current = None;
            }
            self.fs.remove(&self.dir.join(segment_name(*first)))?;
            self.segments.remove(first);
        }
        if !doomed.is_empty() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn save_meta(&mut self, meta: &Meta) -> io::Result<()> {
        self.fs
            .write_atomic(&self.dir.join(META_FILE), &encode_meta(meta))?;
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn unreachable_segment() -> io::Result<()> {
    Err(io::Error::other("log writer lost its open segment"))
}

/// One record at the start of `data`: the entry and the bytes it used, or
/// `None` when the record is torn or corrupt.
fn decode_record(data: &[u8]) -> Option<(Entry, usize)> {
    let header = data.get(..RECORD_HEADER_BYTES)?;
    let length = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let checksum = u32::from_le_bytes(header[4..8].try_into().ok()?);
    if length > MAX_RECORD_BYTES {
        return None;
    }
    let payload = data.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + length)?;
    if crc32fast::hash(payload) != checksum {
        return None;
    }
    let entry: Entry = codec::decode(payload).ok()?;
    Some((entry, RECORD_HEADER_BYTES + length))
}

#[cfg(test)]
mod tests;
