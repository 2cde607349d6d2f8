//! Where a run's large column buffers live: in memory, or — when the run prepares columns into
//! the cache — in unnamed temporary files there, mapped. A cold run reads every column its
//! kernels scan and encodes it before the prepared entries exist; held in anonymous memory,
//! those buffers grow with the data (22 GB for SSB Q4.1 at SF 100). Backed by files, they are
//! page cache that the kernel writes back and reclaims under pressure, so the process's own
//! memory stays bounded by what is in flight, whatever the scale. Readers see the same
//! [`Values`] either way; a file's space is reserved when it is made, so a full disk is an
//! error then (and the buffer falls back to memory), never a fault while writing it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::MmapMut;

use crate::error::StorageError;
use crate::values::{Plain, Values};

/// Buffers at least this large go to a file when files are asked for: smaller ones cost more
/// to map than they could save.
pub const FILE_BUFFER_BYTES: usize = 16 << 20;

/// Where large buffers are made.
#[derive(Clone, Debug, Default)]
pub enum Buffers {
    /// In the process's memory.
    #[default]
    Memory,
    /// In unnamed files in `folder` (removed when the last mapping of each goes), for buffers
    /// of at least `min_bytes`; smaller ones in memory.
    Files { folder: PathBuf, min_bytes: usize },
}

/// A buffer being filled: memory or a mapped file, turned into [`Values`] once full.
pub struct Buffer<T> {
    repr: Repr<T>,
}

enum Repr<T> {
    Memory(Vec<T>),
    File { map: MmapMut, len: usize },
}

impl Buffers {
    /// Buffers in files in `folder`, from [`FILE_BUFFER_BYTES`] up.
    pub fn files(folder: PathBuf) -> Buffers {
        Buffers::Files {
            folder,
            min_bytes: FILE_BUFFER_BYTES,
        }
    }

    /// A buffer of `len` zero values followed by `spare` more zeros (which readers may read
    /// past the end; see [`Values::padded`]).
    pub fn zeroed<T: Plain + Default>(
        &self,
        len: usize,
        spare: usize,
    ) -> Result<Buffer<T>, StorageError> {
        let bytes = (len + spare).saturating_mul(std::mem::size_of::<T>());
        if let Buffers::Files { folder, min_bytes } = self {
            if bytes >= *min_bytes && bytes > 0 {
                // A folder that cannot hold it (full, read-only) leaves the buffer in memory.
                if let Ok(map) = file_map(folder, bytes) {
                    return Ok(Buffer {
                        repr: Repr::File { map, len },
                    });
                }
            }
        }
        let values = filled_vec(len, T::default())?;
        Ok(Buffer {
            repr: Repr::Memory(values),
        })
    }
}

/// A vector of `len` copies of `value`, or an error (not an abort) when memory cannot hold it
/// (a corrupt footer claiming more rows than there can be, say).
pub(crate) fn filled_vec<T: Clone + Send + Sync>(
    len: usize,
    value: T,
) -> Result<Vec<T>, StorageError> {
    let mut values = Vec::new();
    crate::memory::fallibly(|| values.try_reserve_exact(len)).map_err(|_| {
        StorageError::Invalid(format!("not enough memory for a column of {len} rows"))
    })?;
    // Filled in parallel: touching fresh pages is the costly part, and it spreads over cores.
    rayon::iter::ParallelExtend::par_extend(&mut values, rayon::iter::repeat_n(value, len));
    Ok(values)
}

/// A zero-filled mapping of `bytes` in a new unnamed file in `folder`, its blocks allocated.
fn file_map(folder: &Path, bytes: usize) -> std::io::Result<MmapMut> {
    std::fs::create_dir_all(folder)?;
    let file: File = tempfile::tempfile_in(folder)?;
    reserve(&file, bytes)?;
    // SAFETY: the file is unnamed and this process's alone: nothing else can change or
    // truncate it while it is mapped.
    let map = unsafe { MmapMut::map_mut(&file) }?;
    populate(&map);
    Ok(map)
}

/// Asks the kernel to give the mapping all its pages now, pieces on all cores: writing them
/// afterwards takes no page faults, which on reserved (not yet written) file blocks cost
/// several times an anonymous page's. A kernel without `MADV_POPULATE_WRITE` (before Linux
/// 5.14) declines, and the pages come as they are written.
fn populate(map: &MmapMut) {
    use rayon::prelude::*;
    const PIECE: usize = 64 << 20;
    let (start, length) = (map.as_ptr() as usize, map.len());
    (0..length.div_ceil(PIECE))
        .into_par_iter()
        .for_each(|piece| {
            let offset = piece * PIECE;
            let bytes = PIECE.min(length - offset);
            // SAFETY: advice on pages of a live mapping this function borrows; it changes no
            // contents (fresh pages of a reserved file read as zeros either way).
            unsafe {
                libc::madvise(
                    (start + offset) as *mut libc::c_void,
                    bytes,
                    libc::MADV_POPULATE_WRITE,
                )
            };
        });
}

/// Gives `file` `bytes` of allocated space, so writing through a mapping cannot run out of
/// disk (which would be a bus error rather than an error return).
fn reserve(file: &File, bytes: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let length = libc::off_t::try_from(bytes).map_err(std::io::Error::other)?;
    // SAFETY: a plain system call on an open descriptor.
    let status = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, length) };
    match status {
        0 => Ok(()),
        // File systems without `fallocate` (tmpfs allocates on write anyway): the file gets its
        // length, and the mapping its pages as they are written.
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(bytes as u64),
        code => Err(std::io::Error::from_raw_os_error(code)),
    }
}

impl<T: Plain> Buffer<T> {
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.repr {
            Repr::Memory(values) => values,
            // SAFETY: the map holds at least `len` values of `T` (made for `len + spare`), is
            // page-aligned, and `T` is plain data for which zero bytes are a value.
            Repr::File { map, len } => unsafe {
                std::slice::from_raw_parts_mut(map.as_mut_ptr().cast::<T>(), *len)
            },
        }
    }

    /// Whether the buffer is a mapped file.
    pub fn is_file(&self) -> bool {
        matches!(self.repr, Repr::File { .. })
    }

    /// The filled buffer as values (a file's mapping read-only from now on).
    pub fn into_values(self) -> Result<Values<T>, StorageError> {
        match self.repr {
            Repr::Memory(values) => Ok(values.into()),
            Repr::File { map, len } => {
                let readable = map.len() / std::mem::size_of::<T>();
                let map = map
                    .make_read_only()
                    .map_err(|e| StorageError::Invalid(format!("cannot seal a buffer: {e}")))?;
                Values::mapped(&Arc::new(map), 0, len, readable)
                    .map_err(|e| StorageError::Invalid(format!("a buffer's mapping: {e}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_buffer_reads_back_what_was_written_with_its_spare_zeros() {
        let folder = tempfile::tempdir().expect("a folder");
        let buffers = Buffers::Files {
            folder: folder.path().to_path_buf(),
            min_bytes: 0,
        };
        let mut buffer = buffers.zeroed::<u32>(1000, 2).expect("a buffer");
        assert!(buffer.is_file());
        for (i, slot) in buffer.as_mut_slice().iter_mut().enumerate() {
            *slot = i as u32 * 3;
        }
        let values = buffer.into_values().expect("values");
        assert!(values.is_mapped());
        assert_eq!(values.len(), 1000);
        assert_eq!(values[999], 2997);
        assert_eq!(
            values.padded(2).map(|p| &p[998..]),
            Some(&[2994, 2997, 0, 0][..])
        );
        // The file is unnamed: nothing is left in the folder.
        assert_eq!(std::fs::read_dir(folder.path()).expect("listed").count(), 0);
    }

    #[test]
    fn small_buffers_and_unusable_folders_stay_in_memory() {
        let folder = tempfile::tempdir().expect("a folder");
        let small = Buffers::files(folder.path().to_path_buf())
            .zeroed::<i32>(10, 0)
            .expect("a buffer");
        assert!(!small.is_file());
        let blocked = folder.path().join("a file, not a folder");
        std::fs::write(&blocked, b"x").expect("written");
        let buffers = Buffers::Files {
            folder: blocked,
            min_bytes: 0,
        };
        let mut buffer = buffers.zeroed::<i32>(10, 0).expect("a buffer");
        assert!(!buffer.is_file());
        buffer.as_mut_slice()[3] = 7;
        assert_eq!(buffer.into_values().expect("values")[3], 7);
    }
}
