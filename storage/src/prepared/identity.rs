//! The identity of a table's source files, which every prepared entry records: a file's
//! canonical path, size, modification time and a checksum of its footer (the last 64 KiB of a
//! file that is not Parquet). An entry whose recorded identity differs from the files' identity
//! now is stale.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::UNIX_EPOCH;

use twox_hash::XxHash3_64;

use crate::error::StorageError;

/// Bytes hashed from the end of a file whose footer is not found.
const TAIL_BYTES: u64 = 64 << 10;
/// The longest Parquet footer hashed whole; a larger one is hashed through its last
/// `TAIL_BYTES` (with its length, so a change of length still shows).
const MAX_FOOTER_BYTES: u64 = 64 << 20;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceFile {
    /// The file's absolute path.
    pub path: String,
    pub bytes: u64,
    /// Modification time, nanoseconds since 1970.
    pub modified_ns: u64,
    /// xxh3 of the file's footer.
    pub footer: u64,
}

impl SourceFile {
    /// The identity of the file at `path` as it is now.
    pub fn of(path: &Path) -> Result<SourceFile, StorageError> {
        let io = |source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        };
        // The canonical path: the data reached through `..` or a link is the same data, and
        // its entries are not made again for each way of naming it.
        let absolute = std::fs::canonicalize(path).map_err(io)?;
        let mut file = File::open(path).map_err(io)?;
        let metadata = file.metadata().map_err(io)?;
        let bytes = metadata.len();
        let modified_ns = metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let footer = footer_hash(&mut file, bytes).map_err(io)?;
        Ok(SourceFile {
            path: absolute.to_string_lossy().into_owned(),
            bytes,
            modified_ns,
            footer,
        })
    }
}

/// The xxh3 of a Parquet file's footer (its metadata, length and magic), or of the file's last
/// bytes when it does not end like a Parquet file.
fn footer_hash(file: &mut File, bytes: u64) -> std::io::Result<u64> {
    let mut end = [0u8; 8];
    let footer_len = if bytes >= 8 {
        file.read_exact_at(&mut end, bytes - 8)?;
        (&end[4..] == b"PAR1")
            .then(|| u64::from(u32::from_le_bytes([end[0], end[1], end[2], end[3]])))
    } else {
        None
    };
    let take = match footer_len {
        Some(len) if len + 8 <= bytes && len <= MAX_FOOTER_BYTES => len + 8,
        _ => TAIL_BYTES.min(bytes),
    };
    file.seek(SeekFrom::Start(bytes - take))?;
    let mut tail = Vec::with_capacity(take as usize);
    file.take(take).read_to_end(&mut tail)?;
    let mut hasher = XxHash3_64::default();
    std::hash::Hasher::write(&mut hasher, &bytes.to_le_bytes());
    std::hash::Hasher::write(&mut hasher, &tail);
    Ok(std::hash::Hasher::finish(&hasher))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_has_another_identity() {
        let scratch = tempfile::tempdir().expect("a scratch folder");
        let path = scratch.path().join("t.tbl");
        std::fs::write(&path, b"1|2|\n3|4|\n").expect("written");
        let before = SourceFile::of(&path).expect("identified");
        assert_eq!(before, SourceFile::of(&path).expect("identified"));
        assert!(before.path.starts_with('/'));
        // Same size, same modification time, other bytes: the checksum tells.
        let modified = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("dated");
        std::fs::write(&path, b"1|2|\n3|5|\n").expect("rewritten");
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(modified))
            .expect("dated");
        let after = SourceFile::of(&path).expect("identified");
        assert_eq!(
            (after.bytes, after.modified_ns),
            (before.bytes, before.modified_ns)
        );
        assert_ne!(after, before);
    }

    #[test]
    fn a_file_named_two_ways_has_one_identity() {
        let scratch = tempfile::tempdir().expect("a scratch folder");
        std::fs::create_dir(scratch.path().join("sub")).expect("made");
        let path = scratch.path().join("t.tbl");
        std::fs::write(&path, b"1|2|\n").expect("written");
        let roundabout = scratch.path().join("sub").join("..").join("t.tbl");
        assert_eq!(
            SourceFile::of(&path).expect("identified"),
            SourceFile::of(&roundabout).expect("identified")
        );
    }
}
