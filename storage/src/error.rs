//! Errors of the data layer. Each says which file or table it concerns, in one line.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a readable Parquet file: {message}")]
    Parquet { path: PathBuf, message: String },
    #[error("{path}, line {line}: {message}")]
    Text {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("data {0} does not exist (the data is a folder of tables, or one table's file: .parquet, .csv, .tsv, .arrow, .feather, .ipc or .tbl)")]
    NoDirectory(PathBuf),
    #[error("data {0} is neither a folder nor a file (the data is a folder of tables, or one table's file: .parquet, .csv, .tsv, .arrow, .feather, .ipc or .tbl)")]
    NotFileOrFolder(PathBuf),
    #[error("no table `{0}` in the data directory")]
    UnknownTable(String),
    #[error("table `{table}` has no column `{column}`")]
    UnknownColumn { table: String, column: String },
    #[error("table `{table}`, column `{column}`: {reason}")]
    UnsupportedColumn {
        table: String,
        column: String,
        reason: String,
    },
    #[error("table `{table}`: {message}")]
    SchemaMismatch { table: String, message: String },
    #[error("data directory {dir} holds an interrupted `{command}`; run it again")]
    InterruptedGeneration { dir: PathBuf, command: String },
    #[error(
        "data directory {dir} is being written by another `tessera gen`; wait for it to finish"
    )]
    GenerationRunning { dir: PathBuf },
    #[error("{0}")]
    Invalid(String),
}

impl StorageError {
    /// An I/O failure on `path`.
    pub(crate) fn io(path: &Path, source: std::io::Error) -> StorageError {
        StorageError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// `path` holds what cannot be read as it must be; `message` says what.
    pub(crate) fn in_file(path: &Path, message: impl std::fmt::Display) -> StorageError {
        StorageError::Invalid(format!("{}: {message}", path.display()))
    }
}
