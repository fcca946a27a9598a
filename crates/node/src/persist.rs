//! A standalone node's data on disk, as Redis keeps it with RDB files: a
//! snapshot of the whole keyspace (the replicas' snapshot format, see
//! `keyspace::snapshot`) written by SAVE, BGSAVE, the `save` points and a
//! shutdown, and loaded when the node starts.
//!
//! What this guarantees is what RDB guarantees: writes since the last save are
//! lost if the process dies. A node that must not lose an acknowledged write
//! runs with `--appendonly yes` (a one-member Raft group: every write is in
//! its fsynced log before it is acknowledged) or as a replica of a group.
//!
//! A save copies the keyspace under its lock (the only pause writes see),
//! then writes the copy to a temporary file that is fsynced and renamed over
//! the previous one, and fsyncs the directory: a crash leaves the old file or
//! the new one, never a torn one.

use crate::clock;
use crate::server::Shared;
use keyspace::Keyspace;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The snapshot file in the node's `--dir`.
pub const FILE: &str = "standalone.snapshot";
/// How often the `save` points are checked.
const SAVE_POINT_CHECK: Duration = Duration::from_secs(1);
/// After a failed background save, the save points wait this long before
/// trying again (Redis's `CONFIG_BGSAVE_RETRY_DELAY`).
const RETRY_AFTER_FAILURE_MS: u64 = 5_000;

pub const IN_PROGRESS: &str = "ERR Background save already in progress";
/// SAVE/BGSAVE reaching this module on a node without a snapshot file.
const NOT_STANDALONE: &str = "ERR this node keeps its data in its Raft log";

#[derive(Debug, Clone, Copy)]
pub struct SaveState {
    /// When the data on disk was last current (Unix ms): the last successful
    /// save, or the start.
    pub last_save_ms: u64,
    /// The keyspace's change counter when that save copied it.
    pub dirty_at_save: u64,
    pub in_progress: bool,
    pub last_ok: bool,
    pub last_attempt_ms: u64,
    /// Successful saves since the start.
    pub saves: u64,
}

/// A standalone node's persistence (set only on such nodes).
pub struct Persistence {
    dir: PathBuf,
    state: Arc<Mutex<SaveState>>,
}

fn lock(state: &Mutex<SaveState>) -> MutexGuard<'_, SaveState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Persistence {
    pub fn state(&self) -> SaveState {
        *lock(&self.state)
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }
}

/// Loads `dir`'s snapshot into the node's keyspace, if there is one, and
/// turns persistence on. A file that cannot be read stops the start (as
/// Redis refuses a bad RDB file): the data must not be silently dropped.
pub fn restore(shared: &Shared, dir: &Path) -> anyhow::Result<()> {
    let path = dir.join(FILE);
    let mut store = shared.store();
    if path.exists() {
        let file = File::open(&path)
            .map_err(|error| anyhow::anyhow!("opening {}: {error}", path.display()))?;
        let config = store.keyspace.config.clone();
        let loaded = keyspace::snapshot::read_snapshot(&mut BufReader::new(file), config)
            .map_err(|error| anyhow::anyhow!("loading {}: {error}", path.display()))?;
        store.keyspace = loaded;
        let config = shared.config().clone();
        crate::server::apply_keyspace_config(&config, &mut store.keyspace, &shared.local);
        let keys: usize = store.keyspace.dbs().iter().map(|db| db.len()).sum();
        tracing::info!(keys, path = %path.display(), "data loaded");
    }
    let state = SaveState {
        last_save_ms: clock::unix_ms(),
        dirty_at_save: store.keyspace.stats.dirty,
        in_progress: false,
        last_ok: true,
        last_attempt_ms: 0,
        saves: 0,
    };
    drop(store);
    let _ = shared.persistence.set(Persistence {
        dir: dir.to_path_buf(),
        state: Arc::new(Mutex::new(state)),
    });
    Ok(())
}

/// Writes `keyspace` to `dir`'s snapshot file, atomically.
fn write(dir: &Path, keyspace: &Keyspace) -> std::io::Result<()> {
    let temporary = dir.join(format!("temp-{}.snapshot", std::process::id()));
    let result = (|| {
        let file = File::create(&temporary)?;
        let mut out = BufWriter::new(file);
        keyspace::snapshot::write_snapshot(keyspace, &mut out)?;
        out.flush()?;
        let file = out.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, dir.join(FILE))?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// A copy of the keyspace being saved; its bytes do not count against
/// `maxmemory` while it lives (see `alloc::hold_save_copy`).
struct Copy {
    keyspace: Keyspace,
    bytes: usize,
}

impl Drop for Copy {
    fn drop(&mut self) {
        crate::alloc::release_save_copy(self.bytes);
    }
}

/// The keyspace as it is now, and its change counter.
fn copy(shared: &Shared) -> (Copy, u64) {
    let mut store = shared.store();
    let before = crate::alloc::allocated_bytes();
    let keyspace = store.keyspace.clone_for_snapshot();
    let bytes = crate::alloc::allocated_bytes().saturating_sub(before);
    crate::alloc::hold_save_copy(bytes);
    let dirty = store.keyspace.stats.dirty;
    (Copy { keyspace, bytes }, dirty)
}

fn finish(state: &Mutex<SaveState>, dirty: u64, result: &std::io::Result<()>) {
    let mut state = lock(state);
    state.in_progress = false;
    state.last_attempt_ms = clock::unix_ms();
    state.last_ok = result.is_ok();
    if result.is_ok() {
        state.last_save_ms = state.last_attempt_ms;
        state.dirty_at_save = dirty;
        state.saves += 1;
    }
}

/// SAVE: writes the snapshot now and answers when it is on disk.
pub fn save(shared: &Shared) -> Result<(), String> {
    let Some(persistence) = shared.persistence.get() else {
        return Err(NOT_STANDALONE.to_string());
    };
    {
        let mut state = lock(&persistence.state);
        if state.in_progress {
            return Err(IN_PROGRESS.to_string());
        }
        state.in_progress = true;
    }
    let (copied, dirty) = copy(shared);
    let result = write(&persistence.dir, &copied.keyspace);
    drop(copied);
    finish(&persistence.state, dirty, &result);
    result.map_err(|error| {
        tracing::warn!(%error, "save failed");
        format!("ERR {error}")
    })
}

/// BGSAVE: copies the keyspace and writes it on a blocking-pool thread.
pub fn bgsave(shared: &Shared) -> Result<(), &'static str> {
    let Some(persistence) = shared.persistence.get() else {
        return Err(NOT_STANDALONE);
    };
    {
        let mut state = lock(&persistence.state);
        if state.in_progress {
            return Err(IN_PROGRESS);
        }
        state.in_progress = true;
    }
    let (copied, dirty) = copy(shared);
    let dir = persistence.dir.clone();
    let state = persistence.state.clone();
    tokio::task::spawn_blocking(move || {
        let result = write(&dir, &copied.keyspace);
        drop(copied);
        match &result {
            Ok(()) => tracing::info!("background save done"),
            Err(error) => tracing::warn!(%error, "background save failed"),
        }
        finish(&state, dirty, &result);
    });
    Ok(())
}

/// The `save` parameter's points: (seconds, changes).
fn save_points(shared: &Shared) -> Vec<(u64, u64)> {
    let config = shared.config();
    let numbers: Vec<u64> = config
        .get("save")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    numbers
        .chunks_exact(2)
        .map(|pair| (pair[0], pair[1]))
        .collect()
}

/// Whether the shutdown should save: the `save` points are set (or SHUTDOWN
/// SAVE asked for it) and SHUTDOWN NOSAVE did not say otherwise.
pub fn saves_on_shutdown(shared: &Shared) -> bool {
    match shared.shutdown_save() {
        Some(save) => save,
        None => !save_points(shared).is_empty(),
    }
}

/// Starts a background save whenever a `save` point is reached: at least
/// `changes` changes and `seconds` seconds since the last save.
pub async fn run_save_points(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_requested();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SAVE_POINT_CHECK) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let Some(persistence) = shared.persistence.get() else {
            return;
        };
        let state = persistence.state();
        if state.in_progress {
            continue;
        }
        let now_ms = clock::unix_ms();
        if !state.last_ok && now_ms < state.last_attempt_ms + RETRY_AFTER_FAILURE_MS {
            continue;
        }
        let dirty = shared.store().keyspace.stats.dirty;
        let changes = dirty.saturating_sub(state.dirty_at_save);
        let elapsed_s = now_ms.saturating_sub(state.last_save_ms) / 1000;
        let due = save_points(&shared)
            .into_iter()
            .any(|(seconds, wanted)| changes >= wanted && elapsed_s > seconds);
        if due {
            tracing::info!(
                changes,
                elapsed_s,
                "save point reached, saving in the background"
            );
            let _ = bgsave(&shared);
        }
    }
}
