//! A simulated disk under the log store: writes are pending until synced, and
//! a crash loses what was pending. Some crashes tear the pending tail instead
//! (a prefix of it reached the platter) or leave it torn and with one byte
//! flipped, the cases the log's recovery must stop at.
//!
//! The model: appended bytes become durable at `sync`; a new file's directory
//! entry becomes durable at `sync_dir` of its directory (until then a crash
//! removes the file); truncation, removal and atomic replacement are durable
//! at once (the store syncs after each), and so is a rename, which carries
//! the file's unsynced bytes along (a crash then loses them under the new
//! name: a file renamed into place before its sync is torn there). A sync takes simulated time (the log
//! writer waits [`Fs::sync_latency`] before it), so crashes land between
//! writes and their sync; a slow-disk fault raises that time.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use replication::log_store::fs::{AppendFile, Fs};

use crate::rng::Rng;

#[derive(Default)]
struct SimFile {
    durable: Vec<u8>,
    pending: Vec<u8>,
    /// The directory entry survives a crash.
    entry_durable: bool,
}

/// One host's disk; it outlives the host's crashes.
#[derive(Clone)]
pub struct SimDisk {
    files: Arc<Mutex<BTreeMap<PathBuf, SimFile>>>,
    /// How long a sync takes, in microseconds.
    sync_micros: Arc<AtomicU64>,
}

/// A healthy disk's sync time.
pub const BASE_SYNC_LATENCY: Duration = Duration::from_millis(1);

impl Default for SimDisk {
    fn default() -> Self {
        SimDisk {
            files: Arc::default(),
            sync_micros: Arc::new(AtomicU64::new(BASE_SYNC_LATENCY.as_micros() as u64)),
        }
    }
}

/// What a crash did to the pending data, for the trace.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CrashDamage {
    pub lost_bytes: usize,
    pub torn_files: usize,
    pub corrupted_files: usize,
    pub vanished_files: usize,
}

impl SimDisk {
    /// Makes syncs take `latency` from now on (a slow disk, or a healthy one).
    pub fn set_sync_latency(&self, latency: Duration) {
        self.sync_micros
            .store(latency.as_micros() as u64, Ordering::SeqCst);
    }

    /// How many files named `name` the disk holds, in any directory.
    pub fn count_named(&self, name: &str) -> usize {
        self.files()
            .keys()
            .filter(|path| path.file_name().is_some_and(|file| file == name))
            .count()
    }

    /// True while some file holds written but unsynced bytes.
    pub fn has_pending(&self) -> bool {
        self.files().values().any(|file| !file.pending.is_empty())
    }

    fn files(&self) -> MutexGuard<'_, BTreeMap<PathBuf, SimFile>> {
        self.files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Loses what was not synced. With `tear`, some files keep a random
    /// prefix of their pending bytes, a few with one byte flipped.
    pub fn crash(&self, rng: &mut Rng, tear: bool) -> CrashDamage {
        let mut damage = CrashDamage::default();
        let mut files = self.files();
        files.retain(|_, file| {
            if !file.entry_durable {
                damage.vanished_files += 1;
                return false;
            }
            true
        });
        for file in files.values_mut() {
            let pending = std::mem::take(&mut file.pending);
            if pending.is_empty() {
                continue;
            }
            if tear && rng.chance(30) {
                let kept = rng.below(pending.len() as u64) as usize;
                let start = file.durable.len();
                file.durable.extend_from_slice(&pending[..kept]);
                damage.torn_files += 1;
                if kept > 0 && rng.chance(30) {
                    let at = start + rng.below(kept as u64) as usize;
                    file.durable[at] ^= 1 << rng.below(8);
                    damage.corrupted_files += 1;
                }
                damage.lost_bytes += pending.len() - kept;
            } else {
                damage.lost_bytes += pending.len();
            }
        }
        damage
    }
}

struct SimAppend {
    disk: SimDisk,
    path: PathBuf,
}

impl AppendFile for SimAppend {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut files = self.disk.files();
        let file = files.get_mut(&self.path).ok_or_else(not_found)?;
        file.pending.extend_from_slice(data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut files = self.disk.files();
        let file = files.get_mut(&self.path).ok_or_else(not_found)?;
        let pending = std::mem::take(&mut file.pending);
        file.durable.extend_from_slice(&pending);
        Ok(())
    }
}

fn not_found() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        "no such file on the simulated disk",
    )
}

impl Fs for SimDisk {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        Ok(self
            .files()
            .keys()
            .filter(|path| path.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn size(&self, path: &Path) -> io::Result<u64> {
        let files = self.files();
        let file = files.get(path).ok_or_else(not_found)?;
        Ok((file.durable.len() + file.pending.len()) as u64)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let files = self.files();
        let file = files.get(path).ok_or_else(not_found)?;
        let mut content = file.durable.clone();
        content.extend_from_slice(&file.pending);
        Ok(content)
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn io::Read + Send>> {
        Ok(Box::new(io::Cursor::new(self.read(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut files = self.files();
        let mut file = files.remove(from).ok_or_else(not_found)?;
        file.entry_durable = true;
        files.insert(to.to_path_buf(), file);
        Ok(())
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        self.files().entry(path.to_path_buf()).or_default();
        Ok(Box::new(SimAppend {
            disk: self.clone(),
            path: path.to_path_buf(),
        }))
    }

    fn truncate(&self, path: &Path, length: u64) -> io::Result<()> {
        let mut files = self.files();
        let file = files.get_mut(path).ok_or_else(not_found)?;
        let mut content = std::mem::take(&mut file.durable);
        content.append(&mut file.pending);
        content.truncate(length as usize);
        file.durable = content;
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.files().remove(path);
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        self.files().contains_key(path)
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.files().insert(
            path.to_path_buf(),
            SimFile {
                durable: data.to_vec(),
                pending: Vec::new(),
                entry_durable: true,
            },
        );
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        for (path, file) in self.files().iter_mut() {
            if path.parent() == Some(dir) {
                file.entry_durable = true;
            }
        }
        Ok(())
    }

    fn sync_latency(&self) -> Duration {
        Duration::from_micros(self.sync_micros.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vote saved after an append (a founder's first election after its
    /// membership entry) must not survive a crash that loses the entry: a
    /// replica with a vote and no membership can never initialize again.
    #[tokio::test]
    async fn a_saved_vote_never_outlives_the_entries_appended_before_it() {
        use openraft::entry::RaftEntry;
        use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
        use openraft::type_config::TypeConfigExt;
        use replication::log_store::{LogStore, LogStoreOptions, WriterMode};
        use replication::types::{Entry, Vote};
        use replication::TypeConfig;

        let disk = Arc::new(SimDisk::default());
        disk.set_sync_latency(Duration::from_millis(10));
        let dir = Path::new("/g/log");
        let options = LogStoreOptions {
            fs: disk.clone(),
            writer: WriterMode::Task,
            ..LogStoreOptions::default()
        };
        let mut store = LogStore::open(dir, options.clone()).await.unwrap();
        let membership = openraft::Membership::new_with_defaults(
            vec![std::collections::BTreeSet::from([1u64])],
            [],
        );
        let entry =
            Entry::new_membership(openraft::testing::log_id::<TypeConfig>(0, 1, 0), membership);
        let (sender, _flushed) = TypeConfig::oneshot();
        store
            .append(vec![entry], IOFlushed::signal(sender))
            .await
            .unwrap();
        let vote = Vote::new(1, 1);
        store.save_vote(&vote).await.unwrap();
        disk.crash(&mut Rng::new(1), false);
        drop(store);
        let mut store = LogStore::open(dir, options).await.unwrap();
        assert_eq!(store.read_vote().await.unwrap(), Some(vote));
        let entries = store.try_get_log_entries(..).await.unwrap();
        assert_eq!(
            entries.len(),
            1,
            "the vote survived, its membership entry did not"
        );
    }

    #[test]
    fn a_crash_keeps_synced_bytes_and_loses_the_rest() {
        let disk = SimDisk::default();
        let dir = Path::new("/d");
        let path = dir.join("a");
        let mut file = disk.open_append(&path).unwrap();
        file.append(b"one").unwrap();
        file.sync().unwrap();
        disk.sync_dir(dir).unwrap();
        file.append(b"two").unwrap();
        assert_eq!(disk.read(&path).unwrap(), b"onetwo");
        let damage = disk.crash(&mut Rng::new(1), false);
        assert_eq!(damage.lost_bytes, 3);
        assert_eq!(disk.read(&path).unwrap(), b"one");
    }

    #[test]
    fn a_rename_before_the_sync_loses_the_bytes_under_the_new_name() {
        let disk = SimDisk::default();
        let dir = Path::new("/d");
        let (tmp, current) = (dir.join("build.tmp"), dir.join("current.snap"));
        let mut file = disk.open_append(&tmp).unwrap();
        file.append(b"synced").unwrap();
        file.sync().unwrap();
        file.append(b"pending").unwrap();
        disk.rename(&tmp, &current).unwrap();
        assert!(!disk.exists(&tmp));
        assert_eq!(disk.count_named("current.snap"), 1);
        disk.crash(&mut Rng::new(1), false);
        assert_eq!(disk.read(&current).unwrap(), b"synced");
    }

    #[test]
    fn a_file_whose_directory_was_not_synced_vanishes() {
        let disk = SimDisk::default();
        let path = Path::new("/d/b");
        let mut file = disk.open_append(path).unwrap();
        file.append(b"x").unwrap();
        file.sync().unwrap();
        disk.crash(&mut Rng::new(1), false);
        assert!(!disk.exists(path));
    }

    #[test]
    fn torn_crashes_keep_a_prefix_of_the_pending_bytes() {
        let disk = SimDisk::default();
        let dir = Path::new("/d");
        let path = dir.join("c");
        let mut torn = 0;
        for seed in 0..50 {
            let mut file = disk.open_append(&path).unwrap();
            disk.sync_dir(dir).unwrap();
            file.append(&[7u8; 100]).unwrap();
            let before = disk.read(&path).unwrap().len() - 100;
            let damage = disk.crash(&mut Rng::new(seed), true);
            let after = disk.read(&path).unwrap().len();
            assert!(after >= before && after < before + 100);
            torn += damage.torn_files;
        }
        assert!(torn > 0);
    }
}
