//! Handing freed heap back to the system. glibc keeps what the worker threads free in their own
//! arenas, so after a burst — the initial lists of a restart, a thousand clusters created at once
//! — the operator's resident memory would stay at the burst's peak for good (README,
//! Performance: scripts/bench-scale.sh measures it). Trimming once a minute returns it. With
//! another C library this does nothing.

use std::time::Duration;

/// How often freed memory is returned: often enough that a burst's peak does not linger,
/// rarely enough that the walk over the arenas (milliseconds) costs nothing.
const EVERY: Duration = Duration::from_secs(60);

/// Returns freed heap to the system every minute, forever.
pub async fn trim_periodically() {
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        trim();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only releases free pages of the allocator's own arenas, taking each
    // arena's lock; glibc documents it as safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_keeps_live_memory_intact() {
        let live: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop((0..256).map(|_| vec![0u8; 64 * 1024]).collect::<Vec<_>>());
        trim();
        assert!(
            live.iter()
                .enumerate()
                .all(|(i, v)| v.iter().all(|b| *b == i as u8))
        );
    }
}
