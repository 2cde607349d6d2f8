//! The catalog of a data directory: which tables exist, their schemas and row counts, and the
//! columns themselves, loaded on first use and cached.
// SKELETON: the storage helper replaces the bodies below.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::column::Column;
use crate::error::StorageError;
use crate::types::Schema;

#[derive(Clone, Debug)]
pub enum TableFormat {
    /// One Parquet file, or a folder of Parquet files read in name order.
    Parquet { files: Vec<PathBuf> },
    /// A pipe-separated SSB `.tbl` file, read with a declared schema.
    Tbl { path: PathBuf },
    /// Columns given directly (tests, generated data).
    Memory,
}

#[derive(Clone, Debug)]
pub struct TableInfo {
    pub name: String,
    pub schema: Schema,
    pub rows: u64,
    pub format: TableFormat,
    /// Columns present in the files that Tessera cannot read, with the reason.
    pub unsupported: Vec<(String, String)>,
}

pub struct Catalog {
    tables: BTreeMap<String, TableInfo>,
    cache: Mutex<HashMap<(String, String), Arc<Column>>>,
}

impl Catalog {
    pub fn open(dir: &Path, declared: &[(String, Schema)]) -> Result<Catalog, StorageError> {
        let _ = (dir, declared);
        Err(StorageError::Invalid("catalog not yet implemented".into()))
    }

    pub fn from_columns(tables: Vec<(String, Vec<(String, Column)>)>) -> Catalog {
        let _ = tables;
        Catalog {
            tables: BTreeMap::new(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn tables(&self) -> impl Iterator<Item = &TableInfo> {
        self.tables.values()
    }

    pub fn table(&self, name: &str) -> Option<&TableInfo> {
        self.tables.get(name)
    }

    pub fn column(&self, table: &str, column: &str) -> Result<Arc<Column>, StorageError> {
        let _ = &self.cache;
        Err(StorageError::UnknownColumn {
            table: table.into(),
            column: column.into(),
        })
    }
}
