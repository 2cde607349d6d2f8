//! Tessera's cache folder, shared by compiled programs (the kernel cache) and prepared columns:
//! where it is, keeping it private to the user, writing entries whole or not at all, and one
//! size budget over both, kept by evicting the entries used least recently.
//!
//! Entries are native code and column bytes that later runs trust, so the folder is created
//! with mode 0700, and a folder or entry that another user owns or can write is not used.
//! Every entry is written to a fresh temporary file in its destination folder (created
//! exclusively, never at a predictable name) and renamed into place when complete, so a reader
//! sees a whole entry or none, and a planted link is never followed. Reading an entry marks it
//! used (its modification time), which is the order eviction follows.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The folder's subfolder for compiled programs.
pub const KERNELS: &str = "kernels";
/// The folder's subfolder for prepared columns.
pub const PREPARED: &str = "prepared";

/// The budget when neither `TESSERA_CACHE_SIZE` nor free space says less.
const DEFAULT_BUDGET: u64 = 32 << 30;
/// Temporary files older than this belong to a process that died; eviction removes them.
const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache folder {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cache folder {0} is not private to this user (owned by another user, or writable by others); it is not used")]
    NotPrivate(PathBuf),
    #[error("`{0}` is not a size; write bytes or a number with KB, MB, GB, KiB, MiB or GiB")]
    BadSize(String),
}

/// An open cache folder.
#[derive(Clone, Debug)]
pub struct CacheFolder {
    root: PathBuf,
}

/// What the folder holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub kernel_entries: u64,
    pub kernel_bytes: u64,
    pub prepared_entries: u64,
    pub prepared_bytes: u64,
    pub other_bytes: u64,
}

impl Usage {
    pub fn bytes(&self) -> u64 {
        self.kernel_bytes + self.prepared_bytes + self.other_bytes
    }
}

impl CacheFolder {
    /// Where the cache lives: `$TESSERA_CACHE_DIR` (set and empty: no cache), else
    /// `$XDG_CACHE_HOME/tessera`, else `~/.cache/tessera`; `None` when none of these is known.
    pub fn location() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("TESSERA_CACHE_DIR") {
            return (!dir.is_empty()).then(|| PathBuf::from(dir));
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir).join("tessera"));
        }
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".cache").join("tessera"))
    }

    /// The cache at its usual location, created when missing; `None` when there is no
    /// location or it cannot be used (said once on stderr, since the run goes on without it).
    pub fn open_default() -> Option<CacheFolder> {
        let root = CacheFolder::location()?;
        match CacheFolder::open(&root) {
            Ok(folder) => Some(folder),
            Err(error) => {
                warn_once(&error.to_string());
                None
            }
        }
    }

    /// Opens the folder at `root`, creating it (mode 0700) when missing.
    pub fn open(root: &Path) -> Result<CacheFolder, CacheError> {
        private_folder(root)?;
        Ok(CacheFolder {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A subfolder (`KERNELS`, `PREPARED`, or below), created private when missing.
    pub fn subfolder(&self, name: &str) -> Result<PathBuf, CacheError> {
        let path = self.root.join(name);
        private_folder(&path)?;
        Ok(path)
    }

    /// What the folder holds, by kind.
    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        for entry in entries(&self.root) {
            let kind = entry.path.strip_prefix(&self.root).ok().and_then(|p| {
                p.components()
                    .next()
                    .and_then(|c| c.as_os_str().to_str().map(str::to_string))
            });
            match kind.as_deref() {
                Some(KERNELS) => {
                    usage.kernel_entries += 1;
                    usage.kernel_bytes += entry.bytes;
                }
                Some(PREPARED) => {
                    usage.prepared_entries += 1;
                    usage.prepared_bytes += entry.bytes;
                }
                _ => usage.other_bytes += entry.bytes,
            }
        }
        usage
    }

    /// Removes entries, least recently used first, until the folder holds at most `budget`
    /// bytes; also removes temporary files that dying processes left. Returns the bytes freed.
    pub fn evict(&self, budget: u64) -> u64 {
        let mut entries = entries(&self.root);
        let now = SystemTime::now();
        let mut freed = 0;
        entries.retain(|entry| {
            let abandoned = entry.temporary
                && now
                    .duration_since(entry.used)
                    .is_ok_and(|age| age > ABANDONED_AFTER);
            if abandoned && fs::remove_file(&entry.path).is_ok() {
                freed += entry.bytes;
                return false;
            }
            !entry.temporary
        });
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        if total <= budget {
            return freed;
        }
        entries.sort_by_key(|e| e.used);
        for entry in entries {
            if total <= budget {
                break;
            }
            if fs::remove_file(&entry.path).is_ok() {
                total -= entry.bytes;
                freed += entry.bytes;
            }
        }
        freed
    }

    /// Keeps the folder within the budget `TESSERA_CACHE_SIZE` (or the default) sets.
    pub fn evict_to_budget(&self) {
        match budget(&self.root) {
            Ok(bytes) => {
                self.evict(bytes);
            }
            Err(error) => warn_once(&error.to_string()),
        }
    }

    /// Removes every entry (and nothing that is not one of Tessera's entries). Returns the
    /// bytes freed.
    pub fn clear(&self) -> Result<u64, CacheError> {
        let mut freed = 0;
        for entry in entries(&self.root) {
            fs::remove_file(&entry.path).map_err(|source| CacheError::Io {
                path: entry.path.clone(),
                source,
            })?;
            freed += entry.bytes;
        }
        // Empty folders left behind go too; a folder still holding something stays.
        remove_empty_folders(&self.root.join(KERNELS));
        remove_empty_folders(&self.root.join(PREPARED));
        Ok(freed)
    }
}

/// The cache's size budget: `TESSERA_CACHE_SIZE` when set, else 32 GiB or half the free space
/// of the file system holding `root`, whichever is less (counting what the cache holds as free).
pub fn budget(root: &Path) -> Result<u64, CacheError> {
    if let Some(text) = std::env::var_os("TESSERA_CACHE_SIZE") {
        let text = text.to_string_lossy();
        return parse_size(&text).ok_or_else(|| CacheError::BadSize(text.into_owned()));
    }
    let held: u64 = entries(root).iter().map(|e| e.bytes).sum();
    Ok(match free_bytes(root) {
        Some(free) => DEFAULT_BUDGET.min((free + held) / 2),
        None => DEFAULT_BUDGET,
    })
}

/// Reads `123`, `10MB`, `1.5 GiB` (decimal and binary units, any case) as bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = number * scale;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid C string and `stats` has room for the result.
    let status = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
    if status != 0 {
        return None;
    }
    // SAFETY: `statvfs` succeeded, so it filled `stats`.
    let stats = unsafe { stats.assume_init() };
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// Creates `path` (and its parents) with mode 0700 when missing, then checks that it is a
/// folder this user owns and no one else can write.
fn private_folder(path: &Path) -> Result<(), CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    };
    if !path.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(io)?;
    }
    let metadata = fs::symlink_metadata(path).map_err(io)?;
    if !metadata.is_dir() || !is_private(&metadata) {
        return Err(CacheError::NotPrivate(path.to_path_buf()));
    }
    Ok(())
}

/// Whether a file or folder is this user's and no one else can write it: the condition for
/// trusting what it holds.
pub fn is_private(metadata: &fs::Metadata) -> bool {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    metadata.uid() == me && metadata.permissions().mode() & 0o022 == 0
}

/// Opens the entry at `path` for reading when it is a regular file this user owns and no one
/// else can write (not a link), and marks it used. `None` when it is missing or not trusted.
pub fn open_entry(path: &Path) -> Option<File> {
    let metadata = fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() || !is_private(&metadata) {
        return None;
    }
    let file = File::open(path).ok()?;
    // The file opened must be the one checked (not swapped in between).
    let opened = file.metadata().ok()?;
    if opened.ino() != metadata.ino() || opened.dev() != metadata.dev() {
        return None;
    }
    mark_used(&file);
    Some(file)
}

/// Records that an entry was just used, for least-recently-used eviction.
pub fn mark_used(file: &File) {
    // A failure only makes eviction take this entry a little sooner.
    let _ = file.set_modified(SystemTime::now());
}

/// Writes an entry named `name` in `folder` whole or not at all: into a new temporary file
/// (created exclusively, mode 0600) in the same folder, renamed over `name` once complete.
pub fn write_entry(
    folder: &Path,
    name: &str,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let temporary = tempfile::Builder::new()
        .prefix(".")
        .suffix(".partial")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(folder)?;
    let (file, temporary_path) = temporary.into_parts();
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    write(&mut writer)?;
    writer.flush()?;
    drop(writer);
    let target = folder.join(name);
    temporary_path
        .persist(&target)
        .map_err(|error| error.error)?;
    Ok(target)
}

struct CacheFile {
    path: PathBuf,
    bytes: u64,
    used: SystemTime,
    /// A temporary file of a writer (named `.…partial`).
    temporary: bool,
}

/// The cache's entries: every regular file in its `kernels/` and `prepared/` folders, and the
/// programs an older Tessera kept at the top (`*.tqx`). Nothing else in the folder is touched.
fn entries(root: &Path) -> Vec<CacheFile> {
    let mut found = files_under(&root.join(KERNELS));
    found.extend(files_under(&root.join(PREPARED)));
    if let Ok(top) = fs::read_dir(root) {
        for entry in top.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let ours = name.ends_with(".tqx") || name.ends_with(".partial");
            match entry.metadata() {
                Ok(metadata) if ours && metadata.is_file() => found.push(CacheFile {
                    temporary: name.ends_with(".partial"),
                    path: entry.path(),
                    bytes: metadata.len(),
                    used: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                }),
                _ => {}
            }
        }
    }
    found
}

/// Every regular file below `root` (links are not followed).
fn files_under(root: &Path) -> Vec<CacheFile> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let path = entry.path();
            if metadata.is_dir() {
                folders.push(path);
            } else if metadata.is_file() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                found.push(CacheFile {
                    temporary: name.starts_with('.') && name.ends_with(".partial"),
                    path,
                    bytes: metadata.len(),
                    used: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
    }
    found
}

fn remove_empty_folders(folder: &Path) {
    let Ok(entries) = fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_empty_folders(&entry.path());
        }
    }
    // Fails, harmlessly, when something is left inside.
    let _ = fs::remove_dir(folder);
}

/// Prints a warning about the cache once per process.
fn warn_once(message: &str) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| eprintln!("warning: {message}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_created_private_and_a_shared_one_is_refused() {
        let scratch = tempfile::tempdir().expect("a scratch folder");
        let root = scratch.path().join("a").join("cache");
        let folder = CacheFolder::open(&root).expect("created");
        let mode = fs::metadata(folder.root())
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(matches!(
            CacheFolder::open(&root),
            Err(CacheError::NotPrivate(_))
        ));
    }

    #[test]
    fn entries_are_written_whole_and_links_are_not_followed() {
        let scratch = tempfile::tempdir().expect("a scratch folder");
        let folder = CacheFolder::open(scratch.path()).expect("opened");
        let victim = scratch.path().join("victim");
        fs::write(&victim, b"keep me").expect("written");
        // A link planted where the entry goes is replaced, not written through.
        std::os::unix::fs::symlink(&victim, folder.root().join("entry")).expect("linked");
        let path = write_entry(folder.root(), "entry", |w| w.write_all(b"new")).expect("written");
        assert_eq!(fs::read(&path).expect("read"), b"new");
        assert_eq!(fs::read(&victim).expect("read"), b"keep me");
        // A failing writer leaves nothing behind.
        let failed = write_entry(folder.root(), "other", |_| Err(io::Error::other("no")));
        assert!(failed.is_err());
        assert!(!folder.root().join("other").exists());
        let leftovers = entries(folder.root())
            .into_iter()
            .filter(|f| f.temporary)
            .count();
        assert_eq!(leftovers, 0);
        // Only private regular files are opened.
        assert!(open_entry(&path).is_some());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(open_entry(&path).is_none());
    }

    #[test]
    fn eviction_removes_the_least_recently_used_first() {
        let scratch = tempfile::tempdir().expect("a scratch folder");
        let folder = CacheFolder::open(scratch.path()).expect("opened");
        let kernels = folder.subfolder(KERNELS).expect("made");
        let prepared = folder.subfolder(PREPARED).expect("made");
        let old = write_entry(&kernels, "old", |w| w.write_all(&[0; 100])).expect("written");
        let new = write_entry(&prepared, "new", |w| w.write_all(&[0; 100])).expect("written");
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        File::open(&old)
            .and_then(|f| f.set_modified(an_hour_ago))
            .expect("dated");
        let usage = folder.usage();
        assert_eq!((usage.kernel_entries, usage.prepared_entries), (1, 1));
        assert_eq!(usage.bytes(), 200);
        assert_eq!(folder.evict(150), 100);
        assert!(!old.exists() && new.exists());
        // Using an entry makes it recent.
        assert!(open_entry(&new).is_some());
        assert_eq!(folder.clear().expect("cleared"), 100);
        assert_eq!(folder.usage(), Usage::default());
    }

    #[test]
    fn sizes_read_in_decimal_and_binary_units() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("10MB"), Some(10_000_000));
        assert_eq!(parse_size("1.5 GiB"), Some(3 << 29));
        assert_eq!(parse_size("2kib"), Some(2048));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-1"), None);
    }
}
