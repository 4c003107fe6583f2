//! The old major's installation, carried into the new image: `tusk-instance old-installation
//! DEST` runs in an init container of the **old** image and copies what `pg_upgrade` needs of
//! it — the programs, the server's libraries and extensions, the shared data — under DEST at
//! their own absolute paths (PostgreSQL finds its libraries and share directory relative to its
//! programs, so a mirrored tree runs from anywhere), and the shared libraries they link beyond
//! the C library under `DEST/deps`, so that stock images of two Debian suites need not share
//! one: bookworm's PostgreSQL 15 asks for ICU 72 and OpenLDAP 2.5, which trixie does not have.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// What DEST holds, written last (its presence means the copy is whole).
pub const MANIFEST: &str = "installation.json";
/// The linked libraries, by the name the programs ask for.
pub const DEPS: &str = "deps";

/// An installation as its own image lays it out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Installation {
    pub major: u32,
    pub bin_dir: PathBuf,
    pub lib_dir: PathBuf,
    pub share_dir: PathBuf,
}

impl Installation {
    /// The installation whose `pg_config` is in `bin_dir` (or on PATH).
    pub fn here(bin_dir: Option<&Path>) -> Result<Self, Error> {
        let pg_config = bin_dir.map_or_else(|| PathBuf::from("pg_config"), |d| d.join("pg_config"));
        let out = Command::new(&pg_config)
            .args(["--bindir", "--pkglibdir", "--sharedir", "--version"])
            .output()
            .map_err(Error::io(format!("running {}", pg_config.display())))?;
        if !out.status.success() {
            return Err(Error::Tool {
                tool: "pg_config".into(),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        parse_pg_config(&String::from_utf8_lossy(&out.stdout))
    }

    /// The manifest an earlier copy wrote under `root`.
    pub fn read(root: &Path) -> Result<Self, Error> {
        let path = root.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(Error::io(format!("reading {}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// `dir` of this installation as mirrored under `root`.
    pub fn under(root: &Path, dir: &Path) -> PathBuf {
        root.join(dir.strip_prefix("/").unwrap_or(dir))
    }

    /// Copies the installation under `root`, its libraries' dependencies into `root/deps`,
    /// and the manifest last.
    pub fn copy_to(&self, root: &Path) -> Result<(), Error> {
        for dir in [&self.bin_dir, &self.lib_dir, &self.share_dir] {
            copy_tree(dir, &Self::under(root, dir))?;
        }
        let deps = root.join(DEPS);
        std::fs::create_dir_all(&deps)
            .map_err(Error::io(format!("creating {}", deps.display())))?;
        for (name, path) in self.linked()? {
            std::fs::copy(&path, deps.join(&name))
                .map_err(Error::io(format!("copying {}", path.display())))?;
        }
        let manifest = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Config(format!("the manifest: {e}")))?;
        std::fs::write(root.join(MANIFEST), manifest)
            .map_err(Error::io("writing the installation's manifest"))
    }

    /// Every library the programs and the server's modules link, by the name asked for, but
    /// the C library's own (the new image's serves, and two would not load together) and the
    /// JIT's LLVM (hundreds of MiB; `pg_upgrade`'s servers run with `jit=off`).
    fn linked(&self) -> Result<BTreeMap<String, PathBuf>, Error> {
        let mut linked = BTreeMap::new();
        for dir in [&self.bin_dir, &self.lib_dir] {
            let entries =
                std::fs::read_dir(dir).map_err(Error::io(format!("listing {}", dir.display())))?;
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if !path.is_file() || name.starts_with("llvmjit") {
                    continue;
                }
                let Ok(out) = Command::new("ldd").arg(&path).output() else {
                    continue;
                };
                // Not a dynamic executable (a script, a data file): ldd fails, nothing to add.
                if out.status.success() {
                    linked.extend(parse_ldd(&String::from_utf8_lossy(&out.stdout)));
                }
            }
        }
        Ok(linked)
    }
}

/// The installation `pg_config --bindir --pkglibdir --sharedir --version` describes.
fn parse_pg_config(text: &str) -> Result<Installation, Error> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let [bin, lib, share, version, ..] = lines.as_slice() else {
        return Err(Error::Config(format!("pg_config said {text:?}")));
    };
    // "PostgreSQL 15.10 (Debian 15.10-0+deb12u1)"
    let major = (version.strip_prefix("PostgreSQL "))
        .and_then(|v| v.split(['.', ' ', 'b', 'r', 'd']).next())
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| Error::Config(format!("pg_config --version said {version:?}")))?;
    Ok(Installation {
        major,
        bin_dir: PathBuf::from(bin),
        lib_dir: PathBuf::from(lib),
        share_dir: PathBuf::from(share),
    })
}

/// The C library's own objects, never carried.
const C_LIBRARY: &[&str] = &[
    "ld-linux",
    "libc.so",
    "libm.so",
    "libmvec.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "libresolv.so",
    "libutil.so",
    "libanl.so",
    "libnss_",
    "libBrokenLocale.so",
    "linux-vdso",
];

/// `name => /path (0x…)` lines of `ldd`, the C library's own left out.
fn parse_ldd(text: &str) -> BTreeMap<String, PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(" => ")?;
            let path = rest.split(" (").next()?.trim();
            let carried = path.starts_with('/') && !C_LIBRARY.iter().any(|c| name.starts_with(c));
            carried.then(|| (name.to_owned(), PathBuf::from(path)))
        })
        .collect()
}

/// `from` copied to `to`: directories, files with their modes, symbolic links as links.
fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(Error::io(format!("creating {}", to.display())))?;
    let entries =
        std::fs::read_dir(from).map_err(Error::io(format!("listing {}", from.display())))?;
    for entry in entries {
        let entry = entry.map_err(Error::io(format!("listing {}", from.display())))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry
            .file_type()
            .map_err(Error::io(format!("reading {}", source.display())))?;
        if kind.is_symlink() {
            let link = std::fs::read_link(&source)
                .map_err(Error::io(format!("reading {}", source.display())))?;
            let _ = std::fs::remove_file(&target);
            std::os::unix::fs::symlink(&link, &target)
                .map_err(Error::io(format!("linking {}", target.display())))?;
        } else if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target)
                .map_err(Error::io(format!("copying {}", source.display())))?;
        }
    }
    Ok(())
}

/// The libraries under `root/deps` the running image cannot find itself (no file of that name
/// in its library directories): the only ones the old programs are given, through
/// `LD_LIBRARY_PATH`. A name the image has is left to the image, whose copy the new programs
/// load too (an older one of the same name could lack symbols they need).
pub fn missing_here(root: &Path, library_dirs: &[PathBuf]) -> Result<Vec<String>, Error> {
    let deps = root.join(DEPS);
    let entries =
        std::fs::read_dir(&deps).map_err(Error::io(format!("listing {}", deps.display())))?;
    let mut missing: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !library_dirs.iter().any(|dir| dir.join(name).exists()))
        .collect();
    missing.sort();
    Ok(missing)
}

/// The directories the dynamic loader searches by default on this machine.
pub fn library_dirs() -> Vec<PathBuf> {
    let triplet = format!("{}-linux-gnu", std::env::consts::ARCH);
    ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
        .into_iter()
        .flat_map(|dir| [PathBuf::from(dir), Path::new(dir).join(&triplet)])
        .collect()
}

#[cfg(test)]
#[path = "installation_tests.rs"]
mod tests;
