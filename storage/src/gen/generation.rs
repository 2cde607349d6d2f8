//! What a generator keeps in the folder it writes besides the tables: a hidden record per
//! dataset (`.tessera-gen-ssb.json`, `.tessera-gen-wisconsin.json`) saying which generation the
//! folder holds and whether it ran to the end, the lock that keeps two generations out of one
//! folder, and the hidden temporary names tables are written under before they are complete.
//!
//! A generation locks the folder, checks that it may replace the tables it writes, removes what
//! an interrupted generation of the same dataset left, records itself "in progress", writes
//! each table under a temporary name created exclusively and renames it into place, then
//! records itself "complete" with each table's rows. Records are replaced by rename, so a
//! reader sees the old one or the new one. A folder whose record says "in progress" is refused
//! by [`check_generation`] until a generation runs to the end; nothing else in it is touched.

use std::fs::{self, File, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::StorageError;
use crate::gen::ssb::{write_ssb, SsbScale};
use crate::gen::wisconsin::{check_rows, write_wisconsin};
use crate::gen::GeneratedTable;
use crate::progress::Progress;

/// A dataset the generators write, with the parameters that decide its contents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase")]
pub enum Dataset {
    /// The Star Schema Benchmark at a scale factor.
    Ssb { sf: f64 },
    /// The Wisconsin relations, the larger of `rows` rows.
    Wisconsin { rows: u64 },
    /// TPC-H at a scale factor.
    Tpch { sf: f64 },
}

/// The record of each dataset, by the name it has in the folder. Hidden, so the catalog never
/// takes it for a table.
const RECORDS: [&str; 3] = [
    ".tessera-gen-ssb.json",
    ".tessera-gen-wisconsin.json",
    ".tessera-gen-tpch.json",
];

/// How the temporary entries of a generation end: files (see `parquet_write`) and records,
/// a table folder being written, and a replaced table folder moved aside before removal.
const TEMPORARY_SUFFIXES: [&str; 3] = [".partial", ".tmp", ".old"];

impl Dataset {
    /// The tables it writes: `name.parquet`, or for SSB's `lineorder` a folder `name/`.
    pub fn tables(&self) -> &'static [&'static str] {
        match self {
            Dataset::Ssb { .. } => &["lineorder", "part", "supplier", "customer", "date"],
            Dataset::Wisconsin { .. } => &["wisconsin", "wisconsin_small"],
            Dataset::Tpch { .. } => &crate::gen::tpch::TABLES,
        }
    }

    /// The command that generates it (without its `--out`).
    pub fn command(&self) -> String {
        match self {
            Dataset::Ssb { sf } => format!("tessera gen ssb --sf {sf}"),
            Dataset::Wisconsin { rows } => format!("tessera gen wisconsin --rows {rows}"),
            Dataset::Tpch { sf } => format!("tessera gen tpch --sf {sf}"),
        }
    }

    /// Checks the parameters, so that a bad one fails before the folder is touched.
    pub fn check(&self) -> Result<(), StorageError> {
        match self {
            Dataset::Ssb { sf } => SsbScale::new(*sf).map(drop),
            Dataset::Wisconsin { rows } => check_rows(*rows),
            Dataset::Tpch { sf } => crate::gen::tpch::check_scale(*sf),
        }
    }

    fn record_name(&self) -> &'static str {
        match self {
            Dataset::Ssb { .. } => RECORDS[0],
            Dataset::Wisconsin { .. } => RECORDS[1],
            Dataset::Tpch { .. } => RECORDS[2],
        }
    }
}

/// What a dataset's record file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    dataset: Dataset,
    state: State,
    /// Each table's rows, once complete.
    #[serde(default)]
    tables: Vec<TableRows>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum State {
    InProgress,
    Complete,
}

#[derive(Debug, Serialize, Deserialize)]
struct TableRows {
    name: String,
    rows: u64,
}

/// Fails when `dir` holds a generation that did not run to the end (interrupted, or still
/// running in another process): its tables may be partial, or of two different generations.
/// A folder without records (written some other way) passes.
pub fn check_generation(dir: &Path) -> Result<(), StorageError> {
    for name in RECORDS {
        let Some(record) = read_record(&dir.join(name))? else {
            continue;
        };
        if record.state == State::InProgress {
            let dir = dir.to_path_buf();
            return Err(if is_locked(&dir) {
                StorageError::GenerationRunning { dir }
            } else {
                StorageError::InterruptedGeneration {
                    dir,
                    command: record.dataset.command(),
                }
            });
        }
    }
    Ok(())
}

/// Whether `dir` holds a complete generation of `dataset` with the same parameters: what a
/// data cache asks before reusing a folder.
pub fn holds_generation(dir: &Path, dataset: &Dataset) -> bool {
    match read_record(&dir.join(dataset.record_name())) {
        Ok(Some(record)) => record.state == State::Complete && record.dataset == *dataset,
        _ => false,
    }
}

/// Generates `dataset` into `dir` unless it holds a complete generation of it already, waiting
/// first for another process generating there. Returns whether it generated. For data caches
/// that several processes may fill at once.
pub fn ensure_generated(
    dir: &Path,
    dataset: &Dataset,
    progress: &dyn Progress,
) -> Result<bool, StorageError> {
    dataset.check()?;
    let generation = Generation::lock(dir, dataset.clone(), Wait::Yes)?;
    // Asked again under the lock: the process waited for may have written it.
    if holds_generation(dir, dataset) {
        return Ok(false);
    }
    match *dataset {
        Dataset::Ssb { sf } => write_ssb(generation, SsbScale::new(sf)?, progress).map(drop)?,
        Dataset::Wisconsin { rows } => write_wisconsin(generation, rows, progress).map(drop)?,
        Dataset::Tpch { sf } => crate::gen::tpch::write_tpch(generation, sf, progress).map(drop)?,
    }
    Ok(true)
}

/// Whether [`Generation::lock`] waits for another generation in the folder or fails.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Wait {
    No,
    Yes,
}

/// A generation under way: its folder, locked against other generations until it is dropped
/// (or the process dies, since the lock is the kernel's).
pub(crate) struct Generation {
    dir: PathBuf,
    dataset: Dataset,
    _lock: File,
}

impl Generation {
    /// Creates `dir` when missing and locks it.
    pub(crate) fn lock(
        dir: &Path,
        dataset: Dataset,
        wait: Wait,
    ) -> Result<Generation, StorageError> {
        let io = |source| StorageError::Io {
            path: dir.to_path_buf(),
            source,
        };
        fs::create_dir_all(dir).map_err(io)?;
        let lock = File::open(dir).map_err(io)?;
        match wait {
            Wait::Yes => lock.lock().map_err(io)?,
            Wait::No => match lock.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(StorageError::GenerationRunning {
                        dir: dir.to_path_buf(),
                    })
                }
                Err(TryLockError::Error(source)) => return Err(io(source)),
            },
        }
        Ok(Generation {
            dir: dir.to_path_buf(),
            dataset,
            _lock: lock,
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes what an interrupted generation of this dataset left (hidden temporaries of its
    /// tables and record: no other process writes them while the lock is held) and records this
    /// one in progress. Call after checking the folder, before the first table changes.
    pub(crate) fn start(&self) -> Result<(), StorageError> {
        self.remove_leftovers()?;
        self.write_record(State::InProgress, &[])
    }

    /// Records the generation complete, with the tables it wrote.
    pub(crate) fn complete(self, tables: &[GeneratedTable]) -> Result<(), StorageError> {
        self.write_record(State::Complete, tables)
    }

    /// A new, empty, hidden folder beside where table `name` goes, to write it into;
    /// [`NewFolder::replace`] puts it in place.
    pub(crate) fn new_folder(&self, name: &str) -> Result<NewFolder, StorageError> {
        let temporary = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(fs::Permissions::from_mode(0o777))
            .tempdir_in(&self.dir)
            .map_err(|source| StorageError::Io {
                path: self.dir.clone(),
                source,
            })?;
        Ok(NewFolder {
            temporary,
            destination: self.dir.join(name),
        })
    }

    fn remove_leftovers(&self) -> Result<(), StorageError> {
        let prefixes: Vec<String> = self
            .dataset
            .tables()
            .iter()
            .map(|table| format!(".{table}."))
            .chain([format!("{}.", self.dataset.record_name())])
            .collect();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StorageError::Io { path, source }
        };
        for entry in fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let entry = entry.map_err(io(&self.dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let ours = prefixes.iter().any(|p| name.starts_with(p.as_str()))
                && TEMPORARY_SUFFIXES.iter().any(|s| name.ends_with(s));
            if !ours {
                continue;
            }
            let path = entry.path();
            // The entry's own type: a link is removed, never followed.
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_dir() {
                fs::remove_dir_all(&path).map_err(io(&path))?;
            } else {
                fs::remove_file(&path).map_err(io(&path))?;
            }
        }
        Ok(())
    }

    fn write_record(&self, state: State, tables: &[GeneratedTable]) -> Result<(), StorageError> {
        let record = Record {
            dataset: self.dataset.clone(),
            state,
            tables: tables
                .iter()
                .map(|table| TableRows {
                    name: table.name.clone(),
                    rows: table.rows,
                })
                .collect(),
        };
        let name = self.dataset.record_name();
        let path = self.dir.join(name);
        let io = |source| StorageError::Io {
            path: path.clone(),
            source,
        };
        let mut temporary = tempfile::Builder::new()
            .prefix(&format!("{name}."))
            .suffix(".partial")
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(&self.dir)
            .map_err(io)?;
        let mut text = serde_json::to_vec_pretty(&record)
            .map_err(io::Error::other)
            .map_err(io)?;
        text.push(b'\n');
        temporary.write_all(&text).map_err(io)?;
        temporary.persist(&path).map_err(|error| io(error.error))?;
        Ok(())
    }
}

/// A table folder being written under a hidden name beside its destination.
pub(crate) struct NewFolder {
    /// Removed with what it holds when dropped before [`NewFolder::replace`].
    temporary: tempfile::TempDir,
    destination: PathBuf,
}

impl NewFolder {
    pub(crate) fn path(&self) -> &Path {
        self.temporary.path()
    }

    /// Puts the folder in place of its destination. An existing destination is moved aside
    /// to a hidden name first and, once `replaceable` accepts what it holds there (where no
    /// name can change under the check), removed; when it does not, it is moved back and the
    /// error returned.
    pub(crate) fn replace(
        self,
        replaceable: impl Fn(&Path) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let parent = self.destination.parent().unwrap_or(Path::new("."));
        let name = self
            .destination
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("table");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StorageError::Io { path, source }
        };
        // An empty folder reserved at a fresh name; renaming a folder over it is atomic.
        let aside = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".old")
            .tempdir_in(parent)
            .map_err(io(parent))?;
        let moved_aside = match fs::rename(&self.destination, aside.path()) {
            Ok(()) => true,
            Err(error) if error.kind() == io::ErrorKind::NotFound => false,
            Err(error) => return Err(io(&self.destination)(error)),
        };
        if moved_aside {
            if let Err(refused) = replaceable(aside.path()) {
                fs::rename(aside.path(), &self.destination).map_err(io(&self.destination))?;
                return Err(refused);
            }
        }
        let new = self.temporary.keep();
        if let Err(error) = fs::rename(&new, &self.destination) {
            // Nothing of the new table is in place; what was moved aside goes back.
            let _ = fs::remove_dir_all(&new);
            if moved_aside {
                let _ = fs::rename(aside.path(), &self.destination);
            }
            return Err(io(&self.destination)(error));
        }
        // Dropping `aside` removes the old table. Should that fail, what is left is a hidden
        // leftover the next generation removes; the new table is in place either way.
        drop(aside);
        Ok(())
    }
}

/// Checks that a table file's destination is not a folder, which renaming the new file over
/// would fail on after all the work.
pub(crate) fn check_file_destination(path: &Path) -> Result<(), StorageError> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => Err(StorageError::Invalid(format!(
            "{} is a folder, where `tessera gen` writes a file; move it elsewhere or generate \
             into another folder",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// The record at `path`; `None` when there is none.
fn read_record(path: &Path) -> Result<Option<Record>, StorageError> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StorageError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    serde_json::from_slice(&text).map(Some).map_err(|error| {
        StorageError::Invalid(format!(
            "{}: not a record `tessera gen` wrote ({error}); remove it and generate the data again",
            path.display()
        ))
    })
}

/// Whether a generation holds the lock on `dir` now.
fn is_locked(dir: &Path) -> bool {
    let Ok(probe) = File::open(dir) else {
        return false;
    };
    // The shared lock, when granted, is released when `probe` is dropped.
    matches!(probe.try_lock_shared(), Err(TryLockError::WouldBlock))
}
