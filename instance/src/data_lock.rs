//! One manager per data directory. A force-deleted pod is replaced by a pod of the same name
//! at once, while the kubelet may still be killing the old one: the benchmark saw the new
//! pod's postmaster start on the shared volume a second before the old one was killed.
//! PostgreSQL's own `postmaster.pid` check cannot see a postmaster in another container's PID
//! namespace, so both ran on one PGDATA, and the new one lost commits the old one had
//! acknowledged after it read the WAL. An exclusive `flock` on `<PGDATA>.tusk-lock` (on the
//! volume, beside PGDATA so clones and rewinds never copy it) makes the new manager wait.
//! The descriptor is inherited by every child, so the lock is held until the last process of
//! the old pod — the postmaster and its backends included — is gone.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;

/// How often a waiting manager tries the lock again.
const RETRY: Duration = Duration::from_millis(200);

/// The held lock; released when this and every child holding the descriptor are gone.
pub struct DataLock {
    _file: File,
}

/// `<PGDATA>.tusk-lock`.
pub fn lock_path(pgdata: &Path) -> PathBuf {
    let mut path = pgdata.as_os_str().to_owned();
    path.push(".tusk-lock");
    PathBuf::from(path)
}

impl DataLock {
    /// Takes the lock if nobody holds it; `Ok(None)` when another process does.
    pub fn try_acquire(pgdata: &Path) -> Result<Option<DataLock>, Error> {
        let path = lock_path(pgdata);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(Error::io(format!("opening {}", path.display())))?;
        let fd = file.as_raw_fd();
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Ok(None);
            }
            return Err(Error::io(format!("locking {}", path.display()))(e));
        }
        // Children inherit it (std opens with close-on-exec): a postmaster that outlives this
        // manager for a moment still holds the lock.
        // SAFETY: clearing FD_CLOEXEC on a descriptor this function owns.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::io(format!(
                "keeping {} open for children",
                path.display()
            ))(e));
        }
        Ok(Some(DataLock { _file: file }))
    }

    /// Waits until the lock is free, saying once why it waits.
    pub async fn acquire(pgdata: &Path) -> Result<DataLock, Error> {
        let mut said = false;
        loop {
            if let Some(lock) = DataLock::try_acquire(pgdata)? {
                if said {
                    tracing::info!("the data directory is free: starting");
                }
                return Ok(lock);
            }
            if !said {
                tracing::warn!(
                    lock = %lock_path(pgdata).display(),
                    "another manager's processes still use this data directory (a pod being \
                     replaced?): waiting until they are gone"
                );
                said = true;
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_the_first_and_its_children_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let pgdata = dir.path().join("data");
        let first = DataLock::try_acquire(&pgdata).unwrap().expect("free");
        assert!(DataLock::try_acquire(&pgdata).unwrap().is_none());
        // Another PGDATA is another lock.
        assert!(
            DataLock::try_acquire(&dir.path().join("other"))
                .unwrap()
                .is_some()
        );
        drop(first);
        assert!(DataLock::try_acquire(&pgdata).unwrap().is_some());
        assert_eq!(lock_path(&pgdata), dir.path().join("data.tusk-lock"));
        // One test, not two: a child spawned by a concurrent test would inherit the lock.
        let pgdata = dir.path().join("inherited");
        let lock = DataLock::try_acquire(&pgdata).unwrap().expect("free");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        drop(lock);
        assert!(
            DataLock::try_acquire(&pgdata).unwrap().is_none(),
            "the child inherited the lock"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(DataLock::try_acquire(&pgdata).unwrap().is_some());
    }
}
