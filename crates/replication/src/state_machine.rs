//! The state machine of a shard group: the keyspace, applied deterministically.
//!
//! Applying an entry uses only what the entry carries: the commands, the leader's
//! time and a seed. Entry time is made monotonic (`max(entry time, last applied
//! time)`), so a new leader whose clock is behind never moves expiry backwards.
//!
//! Snapshots: [`StateMachine::get_snapshot_builder`] clones the keyspace under the
//! lock and serializes the copy in the builder, off the apply path. The clone is
//! copy-on-write (key tables share pages of 256 buckets, the slot index shares
//! each slot's key set): writes wait for one reference per page, and a write to
//! a page the builder still shares copies that page. A snapshot file is:
//!
//! ```text
//! +-------------+-------------------+--------------------+-------------------------+
//! | "SLRFSMETA" | meta length u32LE | meta (postcard)    | crc32 of meta u32 LE    |
//! +-------------+-------------------+--------------------+-------------------------+
//! | keyspace snapshot (keyspace::snapshot format: versioned, CRC-64 checked)       |
//! +--------------------------------------------------------------------------------+
//! ```

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use keyspace::{Context, Keyspace, Rng};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::EntryPayload;
use resp::Frame;

use crate::log_store::fs::{AppendFile, Fs};
use crate::types::{LogId, Op, Request, Response, SnapshotMeta, StoredMembership, TypeConfig};

/// The first snapshot format: metadata only.
const META_MAGIC: &[u8; 9] = b"SLRFSMETA";
/// The current format: metadata and the log time at the snapshot's index.
const META_MAGIC_V2: &[u8; 9] = b"SLRFSMET2";
const MAX_META_BYTES: u32 = 64 << 20;

/// Everything the state machine owns, behind one lock shared with the node,
/// which reads the keyspace directly for (linearized) reads.
pub struct ShardState {
    pub keyspace: Keyspace,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    /// Time of the latest applied entry (Unix ms); entry times never go backwards.
    pub log_time_ms: u64,
    /// The leader's source of entry seeds. Local to this replica, not replicated
    /// state: only the seeds it draws travel, inside entries.
    pub rng: Rng,
}

/// The lock around [`ShardState`].
pub type SharedState = Arc<Mutex<ShardState>>;

/// Locks the shared state, recovering from a poisoned lock (a panic elsewhere must
/// not wedge the shard; the state itself is only changed by whole commands).
pub fn lock(state: &SharedState) -> MutexGuard<'_, ShardState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`lock`] for the state machine's worker. A read-only script served on this
/// replica (EVAL_RO to a READONLY connection) holds the state for as long as
/// it runs; blocking the runtime's worker on the lock meanwhile would stop the
/// whole node (Raft RPCs, BUSY replies, SCRIPT KILL) until the script ends. So
/// a wait happens off the worker ([`crate::runtime::long_running`]).
pub fn lock_off_worker(state: &SharedState) -> MutexGuard<'_, ShardState> {
    match state.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => crate::runtime::long_running(|| lock(state)),
    }
}

/// Told, after every applied batch, which keys received elements in it (list
/// pushes and the like), in the order they first did: the node wakes clients
/// blocked on them. Every replica drains the keys, leader or not, so they never
/// pile up.
pub trait ApplyObserver: Send + Sync + 'static {
    fn applied(&self, ready: Vec<(usize, Bytes)>);

    /// The keyspace events the batch raised (`notify-keyspace-events`), with
    /// the flags that were in force.
    fn events(&self, _flags: u32, _events: Vec<keyspace::notify::Event>) {}

    /// Messages scripts published in entries this replica proposed (as
    /// leader); other replicas drop theirs, so each is delivered once.
    fn published(&self, _messages: Vec<keyspace::Published>) {}

    /// Commands scripts ran in entries this replica proposed, as
    /// (database, arguments), while it records them for MONITOR.
    fn script_calls(&self, _calls: Vec<(usize, Vec<Bytes>)>) {}

    /// The keys the batch changed while some client of this node tracks
    /// keys (CLIENT TRACKING): every replica invalidates its own clients'.
    fn invalidated(&self, _invalidations: keyspace::Invalidations) {}
}

/// A snapshot as openraft moves it around: a file on the replica's disk
/// (the real one, or a simulation's, through the [`Fs`] seam).
#[derive(Clone)]
pub struct SnapshotFile {
    pub path: PathBuf,
    pub fs: Arc<dyn Fs>,
}

impl std::fmt::Debug for SnapshotFile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SnapshotFile")
            .field("path", &self.path)
            .finish()
    }
}

/// The openraft state machine over a [`SharedState`].
pub struct StateMachine {
    state: SharedState,
    /// An empty keyspace with the group's hash seed and configuration.
    template: Keyspace,
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    current: Option<(SnapshotMeta, PathBuf)>,
    observer: Option<Arc<dyn ApplyObserver>>,
    /// Held while a snapshot file is written or installed; true once the
    /// replica is closed (see [`StateMachine::closing`]).
    closed: Arc<tokio::sync::Mutex<bool>>,
    /// Snapshot files are written on a blocking-pool thread (see
    /// [`StateMachine::offload_builds`]).
    offload: bool,
}

impl StateMachine {
    /// Opens the state machine whose snapshots live in `dir`, loading the newest
    /// snapshot found there (if any).
    pub fn open(
        dir: &Path,
        fs: Arc<dyn Fs>,
        template: Keyspace,
        rng_seed: u64,
    ) -> io::Result<StateMachine> {
        fs.create_dir_all(dir)?;
        let current_path = dir.join("current.snap");
        let rng = Rng::new(rng_seed);
        let (state, current) = if fs.exists(&current_path) {
            let (meta, log_time_ms, keyspace) =
                read_snapshot_file(fs.as_ref(), &current_path, &template)?;
            let state = ShardState {
                keyspace,
                last_applied: meta.last_log_id,
                membership: meta.last_membership.clone(),
                log_time_ms,
                rng,
            };
            (state, Some((meta, current_path)))
        } else {
            let state = ShardState {
                keyspace: template.clone(),
                last_applied: None,
                membership: StoredMembership::default(),
                log_time_ms: 0,
                rng,
            };
            (state, None)
        };
        // Leftovers of an interrupted build or install.
        for path in fs.list(dir)? {
            if path.to_string_lossy().ends_with(".tmp") {
                let _ = fs.remove(&path);
            }
        }
        Ok(StateMachine {
            state: Arc::new(Mutex::new(state)),
            template,
            dir: dir.to_path_buf(),
            fs,
            current,
            observer: None,
            closed: Arc::new(tokio::sync::Mutex::new(false)),
            offload: false,
        })
    }

    /// Writes snapshot files on tokio's blocking pool instead of the task
    /// that builds them. Serializing a large keyspace and fsyncing the file
    /// take milliseconds to seconds; on the runtime's own thread that stalls
    /// every connection and Raft message of the node meanwhile. Not for
    /// simulated runtimes, where file work must stay on the simulated clock.
    pub fn offload_builds(&mut self, offload: bool) {
        self.offload = offload;
    }

    /// The flag that closes this state machine's snapshot directory: once it
    /// is set (which waits for a snapshot build or install under way), no
    /// build of this replica writes there any more, so the directory can be
    /// opened again by a new replica of the group on this node.
    pub fn closing(&self) -> Arc<tokio::sync::Mutex<bool>> {
        self.closed.clone()
    }

    /// The shared state, for the node's read path.
    pub fn state(&self) -> SharedState {
        self.state.clone()
    }

    pub fn set_observer(&mut self, observer: Arc<dyn ApplyObserver>) {
        self.observer = Some(observer);
    }

    /// A fresh path for a snapshot being received from the leader.
    pub fn incoming_path(dir: &Path, tag: u64) -> PathBuf {
        dir.join(format!("incoming-{tag}.tmp"))
    }
}

/// Whether an entry runs a script or function that may take long (see
/// `Keyspace::script_may_run_long`).
fn may_run_long(state: &mut ShardState, op: &Op) -> bool {
    match op {
        Op::Batch(parts) => parts.iter().any(|(_, op)| may_run_long(state, op)),
        Op::Exec { commands, .. } | Op::ExecOutOfMemory { commands, .. } => {
            commands.iter().any(|arguments| {
                arguments.first().is_some_and(|name| is_scripting(name))
                    && state.keyspace.script_may_run_long(arguments)
            })
        }
        _ => false,
    }
}

/// The top-level commands of the scripting group (EVAL, FCALL, SCRIPT,
/// FUNCTION and their variants); checked by name first, so that the other
/// commands of an entry (nearly all) cost no lookup in the table.
const SCRIPTING_COMMANDS: [&str; 8] = [
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "script",
    "function",
];

fn is_scripting(name: &[u8]) -> bool {
    SCRIPTING_COMMANDS
        .iter()
        .any(|known| name.eq_ignore_ascii_case(known.as_bytes()))
        && keyspace::commands::lookup(name).is_some_and(|spec| spec.group == "scripting")
}

/// [`Op::SlotState`] 3: the slots that are served normally start recording
/// their changed keys, to be copied while they take writes; a frozen or
/// dropped slot is left as it is. Answers the slots whose record started
/// afresh: their target may hold keys of an earlier copy that the record
/// does not cover, so the admin empties the target's slot first.
fn track_slot_changes(state: &mut ShardState, slots: &[u16]) -> Response {
    let mut fresh = Vec::new();
    for &slot in slots {
        if state.keyspace.slot_state(slot).is_none() && state.keyspace.track_slot_changes(slot) {
            fresh.push(Frame::Integer(i64::from(slot)));
        }
    }
    Response {
        replies: vec![Frame::Array(fresh)],
        ..Response::default()
    }
}

/// Applies one request to the state: deterministic in (state, request).
pub fn apply_request(state: &mut ShardState, request: &Request) -> Response {
    let now_ms = request.now_ms.max(state.log_time_ms);
    state.log_time_ms = now_ms;
    apply_op(state, now_ms, request.seed, &request.op)
}

/// Applies one operation at log time `now_ms` with `seed`.
fn apply_op(state: &mut ShardState, now_ms: u64, seed: u64, op: &Op) -> Response {
    match op {
        Op::Batch(parts) => Response {
            parts: parts
                .iter()
                .map(|(seed, op)| apply_op(state, now_ms, *seed, op))
                .collect(),
            ..Response::default()
        },
        Op::ExpireTick => {
            state.keyspace.active_expire_cycle(now_ms);
            Response::default()
        }
        Op::SlotState {
            slots,
            state: wanted,
        } => {
            if *wanted == 3 {
                return track_slot_changes(state, slots);
            }
            let wanted = match wanted {
                1 => Some(keyspace::SlotState::Frozen),
                2 => Some(keyspace::SlotState::Gone),
                _ => None,
            };
            for slot in slots {
                // A slot this shard already dropped stays dropped when frozen
                // again: a migration rolled forward (its ownership change
                // lost) freezes its source once more, and a frozen slot serves
                // reads, from a keyspace that no longer holds the keys (a GET
                // answered nil, found by the cluster simulation, seed 123).
                // Opening it (state 0) still serves it again.
                if wanted == Some(keyspace::SlotState::Frozen)
                    && state.keyspace.slot_state(*slot) == Some(keyspace::SlotState::Gone)
                {
                    continue;
                }
                state.keyspace.set_slot_state(*slot, wanted);
            }
            Response {
                replies: vec![Frame::OK],
                ..Response::default()
            }
        }
        Op::DropSlot { slots } => {
            let dropped: usize = slots
                .iter()
                .map(|slot| state.keyspace.drop_slot(*slot))
                .sum();
            Response {
                replies: vec![Frame::Integer(dropped as i64)],
                ..Response::default()
            }
        }
        Op::DropSlotKeys { slots, limit } => {
            let mut left = *limit as usize;
            let mut dropped = 0;
            for slot in slots {
                // Only a slot still closed: one opened again (moving back)
                // keeps what it holds.
                if state.keyspace.slot_state(*slot) != Some(keyspace::SlotState::Gone) {
                    continue;
                }
                let count = state.keyspace.drop_slot_keys(*slot, left);
                dropped += count;
                left -= count;
            }
            Response {
                replies: vec![Frame::Integer(dropped as i64)],
                ..Response::default()
            }
        }
        Op::Evict { keys } => {
            let evicted = keys
                .iter()
                .filter(|(db, key)| state.keyspace.evict(*db as usize, key))
                .count();
            Response {
                replies: vec![Frame::Integer(evicted as i64)],
                ..Response::default()
            }
        }
        Op::PutTopology { .. } | Op::PutLeader { .. } => {
            let mut context = Context::new(now_ms, seed);
            let reply = crate::meta::apply(state, &mut context, op);
            Response {
                replies: vec![reply],
                ..Response::default()
            }
        }
        Op::Exec {
            db,
            commands,
            watched,
            ..
        }
        | Op::ExecOutOfMemory {
            db,
            commands,
            watched,
            ..
        } => {
            let mut context = Context::new(now_ms, seed);
            context.out_of_memory = matches!(op, Op::ExecOutOfMemory { .. });
            context.db = (*db as usize).min(state.keyspace.dbs().len().saturating_sub(1));
            if watched.iter().any(|(key, fingerprint)| {
                state.keyspace.watch_fingerprint(context.db, key, now_ms) != *fingerprint
            }) {
                return Response {
                    aborted: true,
                    ..Response::default()
                };
            }
            context.protocol = op.protocol();
            context.cluster_mode = state.keyspace.config.cluster_mode;
            let resolved: Vec<_> = commands
                .iter()
                .map(|arguments| keyspace::commands::resolve(arguments))
                .collect();
            if commands.len() > 1 {
                // Request the memory of every command's first key at once: the
                // loads overlap instead of missing the cache one by one.
                let first_keys = commands
                    .iter()
                    .zip(&resolved)
                    .filter_map(|(arguments, spec)| {
                        let (first, _, _) = spec.as_ref().ok()?.legacy_key_range();
                        let first = usize::try_from(first).ok().filter(|first| *first > 0)?;
                        arguments.get(first).map(|key| &key[..])
                    });
                state.keyspace.prefetch(context.db, first_keys);
                let keyed = commands
                    .iter()
                    .zip(&resolved)
                    .filter_map(|(arguments, spec)| Some((*spec.as_ref().ok()?, &arguments[..])));
                state.keyspace.prefetch_members(context.db, keyed);
            }
            let mut replies = Vec::with_capacity(commands.len());
            for (arguments, resolved) in commands.iter().zip(resolved) {
                let reply = match resolved {
                    Ok(spec) => state.keyspace.execute(spec, &mut context, arguments),
                    Err(error) => error,
                };
                replies.push(reply);
            }
            // `execute` clears `block` before every command: it describes the
            // last one, the only place a blocking command may stand in an entry
            // proposed by the node.
            Response {
                replies,
                block: context.block.take(),
                ..Response::default()
            }
        }
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = SnapshotFile;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let state = lock_off_worker(&self.state);
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + Send,
    {
        let mut pending = Vec::new();
        let mut published = Vec::new();
        let mut script_calls = Vec::new();
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let response = {
                let mut state = lock_off_worker(&self.state);
                state.last_applied = Some(entry.log_id);
                if let EntryPayload::Normal(request) = &entry.payload {
                    // Committed, the entry is on a majority's disks: its kept
                    // encoding has served (see `Request::keep_encoding`).
                    request.retire_encoding();
                }
                let response = match &entry.payload {
                    EntryPayload::Blank => Response::default(),
                    EntryPayload::Normal(request) if may_run_long(&mut state, &request.op) => {
                        crate::runtime::long_running(|| apply_request(&mut state, request))
                    }
                    EntryPayload::Normal(request) => apply_request(&mut state, request),
                    EntryPayload::Membership(membership) => {
                        state.membership =
                            StoredMembership::new(Some(entry.log_id), membership.clone());
                        Response::default()
                    }
                };
                let messages = state.keyspace.take_published();
                let calls = state.keyspace.take_script_calls();
                if responder.is_some() {
                    published.extend(messages);
                    script_calls.extend(calls);
                }
                response
            };
            if let Some(responder) = responder {
                pending.push((responder, response));
            }
        }
        let (ready, flags, events, invalidations) = {
            let mut state = lock_off_worker(&self.state);
            let flags = state.keyspace.config.notify_flags;
            let events = if flags != 0 {
                state.keyspace.take_events()
            } else {
                Vec::new()
            };
            let invalidations = state.keyspace.take_invalidations();
            (
                state.keyspace.take_ready_keys(),
                flags,
                events,
                invalidations,
            )
        };
        if let (Some(observer), false) = (&self.observer, invalidations.is_empty()) {
            observer.invalidated(invalidations);
        }
        if let (Some(observer), false) = (&self.observer, ready.is_empty()) {
            observer.applied(ready);
        }
        if let (Some(observer), false) = (&self.observer, events.is_empty()) {
            observer.events(flags, events);
        }
        if let (Some(observer), false) = (&self.observer, script_calls.is_empty()) {
            observer.script_calls(script_calls);
        }
        if let (Some(observer), false) = (&self.observer, published.is_empty()) {
            observer.published(published);
        }
        for (responder, response) in pending {
            responder.send(response);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        let mut state = lock_off_worker(&self.state);
        SnapshotBuilder {
            keyspace: Some(state.keyspace.clone_for_snapshot()),
            meta: SnapshotMeta {
                last_log_id: state.last_applied,
                last_membership: state.membership.clone(),
            },
            log_time_ms: state.log_time_ms,
            dir: self.dir.clone(),
            fs: self.fs.clone(),
            closed: self.closed.clone(),
            offload: self.offload,
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotFile,
    ) -> Result<(), io::Error> {
        let _open = still_open(&self.closed).await?;
        let (file_meta, log_time_ms, keyspace) =
            read_snapshot_file(snapshot.fs.as_ref(), &snapshot.path, &self.template)?;
        // The file says what it holds. Installing it under other metadata (say,
        // a newer snapshot file sent with an older snapshot's metadata) would
        // set `last_applied` behind the keyspace and re-apply entries.
        if &file_meta != meta {
            return Err(invalid(&format!(
                "snapshot file holds {:?}, offered as {:?}",
                file_meta.last_log_id, meta.last_log_id
            )));
        }
        let current = self.dir.join("current.snap");
        if snapshot.path != current {
            if snapshot.path.parent() == Some(self.dir.as_path()) {
                self.fs.rename(&snapshot.path, &current)?;
            } else {
                // A file outside this directory belongs to someone else (and may
                // be on another file system): copy it, never take it.
                let tmp = self.dir.join("install.tmp");
                let mut source = snapshot.fs.open_read(&snapshot.path)?;
                let mut out = create_file(self.fs.as_ref(), &tmp)?;
                io::copy(&mut source, &mut out)?;
                finish_file(out)?;
                self.fs.rename(&tmp, &current)?;
            }
            self.fs.sync_dir(&self.dir)?;
        }
        {
            let mut state = lock_off_worker(&self.state);
            state.keyspace = keyspace;
            state.last_applied = meta.last_log_id;
            state.membership = meta.last_membership.clone();
            // Log time is replicated state: entries after the snapshot apply
            // at max(their time, this), on every replica alike.
            state.log_time_ms = log_time_ms;
        }
        self.current = Some((meta.clone(), current));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::alias::SnapshotOf<TypeConfig, SnapshotFile>>, io::Error> {
        // A builder may have produced a newer file since; the file is authoritative.
        let current = self.dir.join("current.snap");
        if !self.fs.exists(&current) {
            return Ok(None);
        }
        let (meta, _) = read_meta(&mut self.fs.open_read(&current)?)?;
        self.current = Some((meta.clone(), current.clone()));
        Ok(Some(openraft::Snapshot {
            meta,
            snapshot: SnapshotFile {
                path: current,
                fs: self.fs.clone(),
            },
        }))
    }
}

/// Serializes a copy of the keyspace taken at snapshot time.
pub struct SnapshotBuilder {
    keyspace: Option<Keyspace>,
    meta: SnapshotMeta,
    log_time_ms: u64,
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    closed: Arc<tokio::sync::Mutex<bool>>,
    offload: bool,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = SnapshotFile;

    async fn build_snapshot(
        &mut self,
    ) -> Result<openraft::alias::SnapshotOf<TypeConfig, SnapshotFile>, io::Error> {
        let keyspace = self
            .keyspace
            .take()
            .ok_or_else(|| io::Error::other("snapshot builder used twice"))?;
        // A build outlives its Raft node's shutdown: it must not write into
        // the directory once the replica is closed.
        let open = still_open(&self.closed).await?;
        let index = self.meta.last_log_id.map(|id| id.index).unwrap_or(0);
        let tmp = self.dir.join(format!("build-{index}.tmp"));
        let current = self.dir.join("current.snap");
        let (fs, dir, meta, log_time_ms) = (
            self.fs.clone(),
            self.dir.clone(),
            self.meta.clone(),
            self.log_time_ms,
        );
        let current_path = current.clone();
        let write = move || -> io::Result<()> {
            // The directory stays this replica's until the file is in place.
            let _open = open;
            write_snapshot_file(fs.as_ref(), &tmp, &meta, log_time_ms, &keyspace)?;
            // The copy of the keyspace goes here too: dropping it frees
            // every page the live keyspace no longer shares.
            drop(keyspace);
            fs.rename(&tmp, &current_path)?;
            fs.sync_dir(&dir)
        };
        if self.offload {
            tokio::task::spawn_blocking(write)
                .await
                .map_err(|error| io::Error::other(format!("snapshot writer: {error}")))??;
        } else {
            write()?;
        }
        Ok(openraft::Snapshot {
            meta: self.meta.clone(),
            snapshot: SnapshotFile {
                path: current,
                fs: self.fs.clone(),
            },
        })
    }
}

/// Holds the snapshot directory for a build or an install, unless the
/// replica is closed (see [`StateMachine::closing`]).
async fn still_open(
    closed: &Arc<tokio::sync::Mutex<bool>>,
) -> io::Result<tokio::sync::OwnedMutexGuard<bool>> {
    let guard = closed.clone().lock_owned().await;
    if *guard {
        return Err(io::Error::other("the replica is closed"));
    }
    Ok(guard)
}

/// Writes a complete snapshot file and fsyncs it.
pub fn write_snapshot_file(
    fs: &dyn Fs,
    path: &Path,
    meta: &SnapshotMeta,
    log_time_ms: u64,
    keyspace: &Keyspace,
) -> io::Result<()> {
    let mut out = create_file(fs, path)?;
    let meta_bytes = crate::codec::encode(&(meta, log_time_ms));
    out.write_all(META_MAGIC_V2)?;
    out.write_all(&(meta_bytes.len() as u32).to_le_bytes())?;
    out.write_all(&meta_bytes)?;
    out.write_all(&crc32fast::hash(&meta_bytes).to_le_bytes())?;
    keyspace::snapshot::write_snapshot(keyspace, &mut out)?;
    finish_file(out)
}

/// A file written from its start (`path` replaced if it exists), buffered.
pub fn create_file(fs: &dyn Fs, path: &Path) -> io::Result<BufWriter<FileWriter>> {
    fs.remove(path)?;
    Ok(BufWriter::with_capacity(
        1 << 20,
        FileWriter(fs.open_append(path)?),
    ))
}

/// Writes out what `out` buffers and makes the file durable.
pub fn finish_file(out: BufWriter<FileWriter>) -> io::Result<()> {
    let mut file = out.into_inner().map_err(|error| error.into_error())?;
    file.0.sync()
}

/// [`Write`] over a file of the [`Fs`] seam.
pub struct FileWriter(Box<dyn AppendFile>);

impl Write for FileWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0.append(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The snapshot's metadata and the log time at its index (0 in files of the
/// first format, which did not keep it).
fn read_meta(input: &mut impl Read) -> io::Result<(SnapshotMeta, u64)> {
    let mut magic = [0u8; 9];
    input.read_exact(&mut magic)?;
    let with_log_time = match &magic {
        magic if magic == META_MAGIC_V2 => true,
        magic if magic == META_MAGIC => false,
        _ => return Err(invalid("not a slotraft snapshot file")),
    };
    let mut word = [0u8; 4];
    input.read_exact(&mut word)?;
    let length = u32::from_le_bytes(word);
    if length > MAX_META_BYTES {
        return Err(invalid("snapshot metadata too large"));
    }
    let mut meta_bytes = vec![0u8; length as usize];
    input.read_exact(&mut meta_bytes)?;
    input.read_exact(&mut word)?;
    if crc32fast::hash(&meta_bytes) != u32::from_le_bytes(word) {
        return Err(invalid("snapshot metadata checksum mismatch"));
    }
    if with_log_time {
        crate::codec::decode(&meta_bytes)
    } else {
        Ok((crate::codec::decode(&meta_bytes)?, 0))
    }
}

/// Opens a snapshot file for sending: the metadata it holds, and the file
/// positioned at its start. The metadata comes from the open file itself, so a
/// newer build renamed over the path meanwhile cannot pair one snapshot's
/// metadata with another's content.
pub fn open_snapshot_file(
    fs: &dyn Fs,
    path: &Path,
) -> io::Result<(SnapshotMeta, Box<dyn Read + Send>)> {
    let mut file = Recorded {
        inner: fs.open_read(path)?,
        seen: Vec::new(),
    };
    let (meta, _) = read_meta(&mut file)?;
    // The file again from its start: the header as read, then the rest.
    let whole = io::Cursor::new(file.seen).chain(file.inner);
    Ok((meta, Box::new(whole)))
}

/// A reader that keeps what it read.
struct Recorded {
    inner: Box<dyn Read + Send>,
    seen: Vec<u8>,
}

impl Read for Recorded {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.seen.extend_from_slice(&buffer[..read]);
        Ok(read)
    }
}

/// Reads and verifies a snapshot file.
pub fn read_snapshot_file(
    fs: &dyn Fs,
    path: &Path,
    template: &Keyspace,
) -> io::Result<(SnapshotMeta, u64, Keyspace)> {
    let mut input = BufReader::with_capacity(1 << 20, fs.open_read(path)?);
    let (meta, log_time_ms) = read_meta(&mut input)?;
    let keyspace = keyspace::snapshot::read_snapshot(&mut input, template.config.clone())
        .map_err(|error| invalid(&error.to_string()))?;
    Ok((meta, log_time_ms, keyspace))
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// Replies for a request that could not be applied (used by callers that need a
/// reply per command).
pub fn error_replies(count: usize, text: &str) -> Vec<Frame> {
    (0..count)
        .map(|_| Frame::error_owned(text.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_store::fs::StdFs;
    use crate::scratch::Scratch;
    use openraft::entry::RaftEntry;
    use openraft::testing::log_id;
    use openraft::Membership;

    fn open(dir: &Path) -> StateMachine {
        StateMachine::open(dir, Arc::new(StdFs), Keyspace::new(16, 7), 1).unwrap()
    }

    /// The name check before the table lookup knows every top-level
    /// scripting command, in any case, and no other.
    #[test]
    fn the_scripting_names_are_the_scripting_group() {
        for spec in keyspace::commands::all_commands() {
            if spec.name.contains('|') {
                continue;
            }
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(
                is_scripting(spec.name.as_bytes()),
                spec.group == "scripting",
                "{}",
                spec.name
            );
            assert_eq!(is_scripting(upper.as_bytes()), spec.group == "scripting");
        }
    }

    async fn build_after(machine: &mut StateMachine, index: u64) -> SnapshotMeta {
        let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
        let entries = [
            crate::types::Entry::new_membership(log_id::<TypeConfig>(1, 1, index - 1), membership),
            crate::types::Entry::new_blank(log_id::<TypeConfig>(1, 1, index)),
        ];
        let stream = futures_util::stream::iter(entries.map(|entry| Ok((entry, None))));
        machine.apply(stream).await.unwrap();
        let mut builder = machine.get_snapshot_builder().await;
        builder.build_snapshot().await.unwrap().meta
    }

    fn fresh_state() -> ShardState {
        ShardState {
            keyspace: Keyspace::new(16, 7),
            last_applied: None,
            membership: Default::default(),
            log_time_ms: 0,
            rng: keyspace::Rng::new(1),
        }
    }

    fn exec(commands: &[&[&str]], watched: Vec<(Bytes, Bytes)>) -> Op {
        Op::Exec {
            db: 0,
            resp3: false,
            commands: commands
                .iter()
                .map(|command| {
                    command
                        .iter()
                        .map(|argument| Bytes::copy_from_slice(argument.as_bytes()))
                        .collect()
                })
                .collect(),
            watched,
        }
    }

    #[test]
    fn a_batch_applies_each_part_as_if_it_were_alone() {
        let stale = Bytes::from_static(b"not the fingerprint");
        let parts = vec![
            (
                11,
                exec(&[&["SET", "k", "1"], &["SADD", "s", "a", "b", "c"]], vec![]),
            ),
            // A transaction whose WATCHed key changed: aborted, nothing runs.
            (
                12,
                exec(
                    &[&["SET", "k", "lost"]],
                    vec![(Bytes::from_static(b"k"), stale)],
                ),
            ),
            (
                13,
                exec(&[&["INCR", "k"], &["SPOP", "s"], &["GET", "k"]], vec![]),
            ),
            (14, exec(&[&["GET", "k"], &["LPUSH", "k", "x"]], vec![])),
        ];
        let now_ms = 5_000;
        let mut batched = fresh_state();
        let batch = Request::new(now_ms, 11, Op::Batch(parts.clone()));
        let response = apply_request(&mut batched, &batch);
        assert!(response.replies.is_empty());
        let mut alone = fresh_state();
        let responses: Vec<Response> = parts
            .into_iter()
            .map(|(seed, op)| apply_request(&mut alone, &Request::new(now_ms, seed, op)))
            .collect();
        assert_eq!(response.parts, responses);
        assert!(response.parts[1].aborted);
        assert_eq!(response.parts[2].replies[0], Frame::Integer(2));
        assert_eq!(
            keyspace::digest::digest(&batched.keyspace, now_ms),
            keyspace::digest::digest(&alone.keyspace, now_ms)
        );
        assert_eq!(batched.log_time_ms, now_ms);
    }

    #[tokio::test]
    async fn installing_a_file_from_another_directory_copies_it() {
        let scratch = Scratch::new("sm-install-copy");
        let mut leader = open(&scratch.0.join("leader"));
        let mut follower = open(&scratch.0.join("follower"));
        let meta = build_after(&mut leader, 3).await;
        let sent = leader.get_current_snapshot().await.unwrap().unwrap();
        follower
            .install_snapshot(&meta, sent.snapshot)
            .await
            .unwrap();
        let installed = follower.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(installed.meta, meta);
        assert_eq!(follower.applied_state().await.unwrap().0, meta.last_log_id);
        // The leader still has its snapshot to send to the next follower.
        let kept = leader.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(kept.meta, meta);
    }

    #[tokio::test]
    async fn a_file_offered_under_other_metadata_is_refused() {
        let scratch = Scratch::new("sm-install-mismatch");
        let mut leader = open(&scratch.0.join("leader"));
        let mut follower = open(&scratch.0.join("follower"));
        let older = build_after(&mut leader, 3).await;
        // A newer build replaced the file after its metadata was read, and the
        // two were paired anyway.
        let newer = build_after(&mut leader, 5).await;
        let file = leader
            .get_current_snapshot()
            .await
            .unwrap()
            .unwrap()
            .snapshot;
        let error = follower.install_snapshot(&older, file).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(follower.applied_state().await.unwrap().0, None);
        assert_ne!(older, newer);
    }

    #[tokio::test]
    async fn a_file_opened_for_sending_keeps_its_own_metadata() {
        let scratch = Scratch::new("sm-open-for-sending");
        let mut leader = open(&scratch.0.join("leader"));
        let mut follower = open(&scratch.0.join("follower"));
        let older = build_after(&mut leader, 3).await;
        let path = leader
            .get_current_snapshot()
            .await
            .unwrap()
            .unwrap()
            .snapshot
            .path;
        let (meta, mut file) = open_snapshot_file(&StdFs, &path).unwrap();
        // A newer build is renamed over the path while the file is being sent.
        let newer = build_after(&mut leader, 5).await;
        assert_ne!(older, newer);
        assert_eq!(meta, older);
        let received = StateMachine::incoming_path(&scratch.0.join("follower"), 0);
        std::io::copy(&mut file, &mut std::fs::File::create(&received).unwrap()).unwrap();
        let received = SnapshotFile {
            path: received,
            fs: Arc::new(StdFs),
        };
        follower.install_snapshot(&meta, received).await.unwrap();
        assert_eq!(follower.applied_state().await.unwrap().0, older.last_log_id);
    }

    #[tokio::test]
    async fn log_time_travels_with_snapshots() {
        let scratch = Scratch::new("sm-log-time");
        let mut leader = open(&scratch.0.join("leader"));
        lock(&leader.state()).log_time_ms = 1_700_000_123_456;
        let meta = build_after(&mut leader, 3).await;
        // Installed on a follower whose clock-driven log time differs.
        let mut follower = open(&scratch.0.join("follower"));
        lock(&follower.state()).log_time_ms = 5;
        let sent = leader.get_current_snapshot().await.unwrap().unwrap();
        follower
            .install_snapshot(&meta, sent.snapshot)
            .await
            .unwrap();
        assert_eq!(lock(&follower.state()).log_time_ms, 1_700_000_123_456);
        // And after a restart from the snapshot.
        drop(leader);
        let reopened = open(&scratch.0.join("leader"));
        assert_eq!(lock(&reopened.state()).log_time_ms, 1_700_000_123_456);
    }

    #[test]
    fn files_of_the_first_format_still_load() {
        let scratch = Scratch::new("sm-first-format");
        let dir = scratch.0.join("old");
        std::fs::create_dir_all(&dir).unwrap();
        let meta = SnapshotMeta {
            last_log_id: Some(log_id::<TypeConfig>(1, 1, 4)),
            last_membership: StoredMembership::default(),
        };
        let meta_bytes = crate::codec::encode(&meta);
        let mut bytes = META_MAGIC.to_vec();
        bytes.extend_from_slice(&(meta_bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&meta_bytes);
        bytes.extend_from_slice(&crc32fast::hash(&meta_bytes).to_le_bytes());
        keyspace::snapshot::write_snapshot(&Keyspace::new(16, 7), &mut bytes).unwrap();
        std::fs::write(dir.join("current.snap"), bytes).unwrap();
        let machine = open(&dir);
        let shared = machine.state();
        let state = lock(&shared);
        assert_eq!(state.last_applied, meta.last_log_id);
        assert_eq!(state.log_time_ms, 0);
    }
}
