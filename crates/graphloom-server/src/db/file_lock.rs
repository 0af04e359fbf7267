//! One server per SQLite file: an exclusive advisory lock on `<db>.lock`, held while the
//! server runs.
//!
//! A server on an embedded SQLite file is then the only process that can hold the leases of
//! that file's runs, so at start it may take over the runs a crashed predecessor left
//! running at once instead of waiting for their leases to run out. The lock is the
//! operating system's (`flock` on Unix, `LockFileEx` on Windows, through `fs4`): the kernel
//! releases it when the process ends, however it ends (SIGKILL too), so a restart after a
//! crash finds it free. The lock file itself stays; deleting it would let two servers each
//! lock a different file of the same name.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// The lock, held until dropped.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

/// The lock file of database file `db`: `<db>.lock` beside it.
pub(crate) fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl FileLock {
    /// Take the lock of database file `db` without waiting.
    ///
    /// # Errors
    /// A message for the person starting the server: another process holds the lock, or
    /// the lock file cannot be opened or locked.
    pub(crate) fn acquire(db: &Path) -> Result<Self, String> {
        let path = lock_path(db);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => Ok(Self { _file: file }),
            Err(fs4::TryLockError::WouldBlock) => Err(format!(
                "{} is in use by another graphloom server (it holds {}); stop that server, or give \
                 this one another database file",
                db.display(),
                path.display()
            )),
            Err(fs4::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_file_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        let first = FileLock::acquire(&db).unwrap();
        let err = FileLock::acquire(&db).unwrap_err();
        assert!(err.contains("in use by another graphloom server"), "{err}");
        assert!(err.contains("g.db.lock"), "{err}");
        drop(first);
        FileLock::acquire(&db).unwrap();
    }
}
