//! The file-system seam of the log store and the snapshot files. Both only
//! touch files through [`Fs`], so a simulated disk (one that loses unsynced
//! writes on a crash) can stand in for the real one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A file opened for appending.
pub trait AppendFile: Send {
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> io::Result<()>;
}

/// The operations the log store and the snapshot files need.
pub trait Fs: Send + Sync + 'static {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Files directly in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// A file's content as a stream (snapshots can be large).
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn io::Read + Send>>;
    /// Renames `from` over `to`; durable once the directory is synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Opens `path` for appending, creating it if missing.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>>;
    /// Opens the log segment `path` (creating it if missing) to append at
    /// `length`, its logical end, keeping the bytes ahead of the writes
    /// already written as zeros, at least `preallocate` at a time (0: no
    /// preallocation). The file may then be longer than what was appended;
    /// the log store reads a zero tail as the end of the segment. By
    /// default there is no preallocation and the file must be exactly
    /// `length` bytes long (a simulated disk's files are).
    fn open_segment(
        &self,
        path: &Path,
        length: u64,
        preallocate: u64,
    ) -> io::Result<Box<dyn AppendFile>> {
        let _ = (length, preallocate);
        self.open_append(path)
    }
    /// Cuts `path` to `length` bytes and makes that durable.
    fn truncate(&self, path: &Path, length: u64) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// The length of the file at `path`, written or not yet synced.
    fn size(&self, path: &Path) -> io::Result<u64>;
    /// Writes `data` to `path` atomically: a temporary file, fsync, rename over
    /// `path`, fsync of the directory.
    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// Makes creations, removals and renames in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// How long a sync takes on a simulated disk; a log writer running as a
    /// task waits this long (in simulated time) between its writes and their
    /// sync. The real file system's syncs take real time instead: zero.
    fn sync_latency(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

struct StdAppendFile(File);

impl AppendFile for StdAppendFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.write_all(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// A log segment written ahead with zeros. An append inside the written
/// zeros changes neither the file's size nor its block allocation, so its
/// `fdatasync` writes the data and flushes the device, and writes the inode
/// only when the file's modification time has moved on by a clock tick (on
/// ext4 without a journal, one disk write in three fewer for syncs that
/// come close together, and about a quarter off their latency).
struct PreallocatedFile {
    file: File,
    /// Where the next append goes.
    position: u64,
    /// The file's length: zeros from `position` up to here.
    allocated: u64,
    step: u64,
}

impl PreallocatedFile {
    /// Writes zeros from the current end until the file holds `end` bytes,
    /// and `step` more.
    fn extend_to(&mut self, end: u64) -> io::Result<()> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let target = end.max(self.allocated.saturating_add(self.step));
        while self.allocated < target {
            let chunk = (target - self.allocated).min(ZEROS.len() as u64) as usize;
            self.file.write_all_at(&ZEROS[..chunk], self.allocated)?;
            self.allocated += chunk as u64;
        }
        Ok(())
    }
}

impl AppendFile for PreallocatedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let end = self.position + data.len() as u64;
        if end > self.allocated {
            self.extend_to(end)?;
        }
        self.file.write_all_at(data, self.position)?;
        self.position = end;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

impl Fs for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            paths.push(entry?.path());
        }
        Ok(paths)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn size(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn io::Read + Send>> {
        Ok(Box::new(File::open(path)?))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Box::new(StdAppendFile(file)))
    }

    fn open_segment(
        &self,
        path: &Path,
        length: u64,
        preallocate: u64,
    ) -> io::Result<Box<dyn AppendFile>> {
        if preallocate == 0 {
            return self.open_append(path);
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        let allocated = file.metadata()?.len();
        if allocated < length {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "log segment {} is {allocated} bytes, shorter than its {length} bytes of records",
                    path.display()
                ),
            ));
        }
        Ok(Box::new(PreallocatedFile {
            file,
            position: length,
            allocated,
            step: preallocate,
        }))
    }

    fn truncate(&self, path: &Path, length: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(length)?;
        file.sync_all()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut file = File::create(&tmp)?;
            file.write_all(data)?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        match path.parent() {
            Some(dir) => self.sync_dir(dir),
            None => Ok(()),
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}
