//! `tusk-instance install DEST`: the init container copies this executable into the shared
//! emptyDir, where the stock postgres container runs it.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::Error;

/// Copies the running executable to `dest` (mode 0755), and each of `with` beside it under
/// its own name (a point-in-time restore needs the backup agent in the database container).
pub fn install(dest: &Path, with: &[std::path::PathBuf]) -> Result<(), Error> {
    let me = std::env::current_exe().map_err(Error::io("locating the running executable"))?;
    copy_executable(&me, dest)?;
    for extra in with {
        let name = extra
            .file_name()
            .ok_or_else(|| Error::Config(format!("{} is not a file path", extra.display())))?;
        copy_executable(extra, &dest.with_file_name(name))?;
    }
    Ok(())
}

/// Copies `source` to `dest` (mode 0755) through a temporary file in the same directory and a
/// rename, so `dest` is never seen half-written.
fn copy_executable(source: &Path, dest: &Path) -> Result<(), Error> {
    let bytes =
        std::fs::read(source).map_err(Error::io(format!("reading {}", source.display())))?;
    let dir = match dest.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = dest
        .file_name()
        .ok_or_else(|| Error::Config(format!("{} is not a file path", dest.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o755))?;
        file.sync_all()?;
        std::fs::rename(&tmp, dest)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        Error::Io {
            what: format!("installing to {}", dest.display()),
            source,
        }
    })
}
