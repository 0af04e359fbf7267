//! Things tests install or create on first use (a virtualenv, a `node_modules`), made once
//! however many test processes ask for them at the same moment.
//!
//! nextest runs each test in its own process, so on a fresh machine several processes reach
//! the same missing install at once. [`prepare`] makes it safe: the first takes an exclusive
//! file lock beside the directory and builds it; the others wait on the lock and then find it
//! made. A directory counts as made only when its stamp file (written last, by a rename)
//! holds the stamp asked for, so a half-made directory (a process killed while building it,
//! or one built before stamps existed) is built again rather than used.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory under `$HOME/.cache/graphloom` named `name`, outside any clone, where
/// repeated runs find what earlier runs made.
///
/// # Panics
/// When `HOME` is not set.
#[allow(clippy::expect_used)]
pub fn cache_dir(name: &str) -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is not set");
    PathBuf::from(home).join(".cache/graphloom").join(name)
}

/// The stamp file inside a prepared directory.
const STAMP: &str = ".graphloom-ready";

/// Whether `dir` was made with `stamp`.
pub fn is_ready(dir: &Path, stamp: &str) -> bool {
    std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == stamp)
}

/// Make `dir` with `make` unless it is already made with `stamp`; when this returns, `dir`
/// is made, by this process or by another.
///
/// `make` runs under an exclusive lock on `<dir>.lock`, at most once among the processes
/// that call this together. It gets `dir` emptied (removed if it held anything that is not a
/// made directory with this stamp) and must leave it complete; the stamp is written after it
/// returns. A `make` that panics leaves no stamp, so the next caller starts again.
///
/// # Panics
/// When the lock file or the stamp cannot be written (an unwritable cache directory), or
/// when `make` panics.
#[allow(clippy::expect_used)]
pub fn prepare(dir: &Path, stamp: &str, make: impl FnOnce(&Path)) {
    if is_ready(dir, stamp) {
        return;
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).expect("create the cache directory");
    let mut lock_path = dir.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock = File::create(&lock_path).expect("create the lock file");
    // Released when `lock` is closed, at the end of this function or if `make` panics.
    fs4::FileExt::lock(&lock).expect("lock the lock file");
    if is_ready(dir, stamp) {
        return;
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove a half-made directory");
    }
    std::fs::create_dir_all(dir).expect("create the directory");
    make(dir);
    let tmp = dir.join(format!("{STAMP}.{}", std::process::id()));
    let mut f = File::create(&tmp).expect("write the stamp");
    f.write_all(stamp.as_bytes()).expect("write the stamp");
    f.sync_all().expect("write the stamp");
    std::fs::rename(&tmp, dir.join(STAMP)).expect("write the stamp");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_made_directory_is_not_made_again_and_a_new_stamp_remakes_it() {
        let tmp = tempfile_dir();
        let dir = tmp.join("thing");
        let mut runs = 0;
        prepare(&dir, "v1", |d| {
            runs += 1;
            std::fs::write(d.join("a"), "1").unwrap();
        });
        prepare(&dir, "v1", |_| runs += 1);
        assert_eq!(runs, 1);
        assert!(is_ready(&dir, "v1"));
        prepare(&dir, "v2", |d| {
            runs += 1;
            // The directory was emptied before being made again.
            assert!(!d.join("a").exists());
        });
        assert_eq!(runs, 2);
        assert!(is_ready(&dir, "v2") && !is_ready(&dir, "v1"));
        std::fs::remove_dir_all(tmp).unwrap();
    }

    #[test]
    fn a_make_that_panics_leaves_the_directory_unmade() {
        let tmp = tempfile_dir();
        let dir = tmp.join("thing");
        let failed = std::panic::catch_unwind(|| prepare(&dir, "v1", |_| panic!("no network")));
        assert!(failed.is_err());
        assert!(!is_ready(&dir, "v1"));
        let mut made = false;
        prepare(&dir, "v1", |_| made = true);
        assert!(made && is_ready(&dir, "v1"));
        std::fs::remove_dir_all(tmp).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "graphloom-first-use-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
