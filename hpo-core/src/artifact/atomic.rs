//! Writing a file so that it appears whole or not at all.
//!
//! The content goes to a temporary file in the destination's folder (same
//! file system, so the rename is atomic), is flushed to disk, and only then
//! renamed over the destination; the folder is synced so that the rename
//! survives a power cut. On any error the temporary file is removed and
//! the destination is as it was.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Prefix of the temporary files, hidden (no id starts with `.`), so that a
/// store's sweep recognises those a crash left behind.
pub(crate) const TEMP_PREFIX: &str = ".hpo-tmp-";

/// Writes `dest` atomically with what `fill` writes to the file it is given;
/// returns the number of bytes `fill` reports.
pub(crate) fn write(
    dest: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<u64>,
) -> Result<u64> {
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(format!("{TEMP_PREFIX}{}", super::id::new(None)));
    let io = |message: String| {
        let path = temp.clone();
        move |source| Error::ArtifactIo {
            path,
            message,
            source,
        }
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(io("cannot create a temporary file".into()))?;
    let written = (|| {
        let n = fill(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        Ok(n)
    })()
    .map_err(io(format!(
        "cannot write the content of {}",
        dest.display()
    )));
    drop(file);
    let renamed = written.and_then(|n| {
        std::fs::rename(&temp, dest)
            .map(|()| n)
            .map_err(io(format!("cannot rename into {}", dest.display())))
    });
    match renamed {
        Ok(n) => {
            sync_dir(&dir);
            Ok(n)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// Flushes a folder's entries (the rename) to disk where the platform can;
/// best effort: the data itself is already synced.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hpo-atomic-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn success_leaves_the_file_and_no_temporary() {
        let dir = temp_dir("ok");
        let dest = dir.join("out.bin");
        let n = write(&dest, |f| f.write_all(b"hello").map(|()| 5)).unwrap();
        assert_eq!(n, 5);
        assert_eq!(std::fs::read(&dest).unwrap(), b"hello");
        assert_eq!(entries(&dir), ["out.bin"]);
        // Replacing is atomic too.
        write(&dest, |f| f.write_all(b"bye").map(|()| 3)).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"bye");
        assert_eq!(entries(&dir), ["out.bin"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_fill_leaves_nothing() {
        let dir = temp_dir("fill");
        let dest = dir.join("out.bin");
        let err = write(&dest, |f| {
            f.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(matches!(err, Error::ArtifactIo { .. }), "{err}");
        assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_rename_leaves_the_destination_as_it_was_and_no_temporary() {
        let dir = temp_dir("rename");
        // A non-empty folder where the file should go: the rename fails.
        let dest = dir.join("taken");
        std::fs::create_dir_all(dest.join("inside")).unwrap();
        let err = write(&dest, |f| f.write_all(b"x").map(|()| 1)).unwrap_err();
        assert!(err.to_string().contains("cannot rename"), "{err}");
        assert_eq!(entries(&dir), ["taken"]);
        assert!(dest.join("inside").is_dir());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
