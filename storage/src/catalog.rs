//! The catalog of a data directory: which tables exist, their schemas and row counts, and the
//! columns themselves, loaded on first use and cached.
//!
//! A data directory holds one entry per table: `name.parquet`, a folder `name/` of `*.parquet`
//! files (read in path order, under `key=value` folders for a hive-partitioned table), `name.csv` or `name.tsv`, `name.arrow`, `name.feather` or
//! `name.ipc` (Arrow IPC), or `name.tbl` (which needs a declared schema). Hidden files (`.x`, `_x`) and files of other kinds are ignored. The data may
//! also be one such file, the only table.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use rayon::prelude::*;

use crate::arrow_columns::FileTable;
use crate::column::{Column, ColumnStats, Dictionary};
use crate::compress::Compression;
use crate::csv_read::{open_csv, read_csv};
use crate::derived::{
    case_strings, is_made_strings_name, literal_strings, DerivedString, StringFunction,
    LITERAL_TABLE,
};
use crate::error::StorageError;
use crate::hive::{parquet_files, partition_column, Partition};
use crate::ipc_read::{open_ipc, read_ipc};
use crate::packed::PackedColumns;
use crate::parquet_read::{
    read_parquet_columns, read_parquet_dictionary, read_parquet_schema, ParquetFileSchema,
};
use crate::prepared::identity::SourceFile;
use crate::prepared::{Found, PreparedStore};
use crate::progress::{NoProgress, Progress};
use crate::spill::Buffers;
use crate::tbl::{count_tbl_rows, read_tbl};
use crate::types::{DataType, Field, Schema, Value};

#[derive(Clone, Debug)]
pub enum TableFormat {
    /// One Parquet file, or a folder of Parquet files read in name order, with the columns
    /// of a hive-partitioned folder's `key=value` folders (a value per file).
    Parquet {
        files: Vec<PathBuf>,
        partitions: Vec<Partition>,
        /// Each file's rows.
        file_rows: Vec<u64>,
    },
    /// A pipe-separated SSB `.tbl` file, read with a declared schema.
    Tbl { path: PathBuf },
    /// A CSV (or TSV) file with a header row.
    Csv { path: PathBuf },
    /// An Arrow IPC file.
    Ipc { path: PathBuf },
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
    /// Statistics known without reading the column (from Parquet footers), by column name.
    pub statistics: BTreeMap<String, ColumnStats>,
    /// Columns known to hold no value twice without reading them: those a one-file table's
    /// writer recorded (a table of several files may repeat a value across them).
    pub unique: Vec<String>,
}

/// A string column's dictionary as its Parquet dictionary pages give it, with its null count;
/// `None` when the pages cannot tell (the column must be read).
type PageDictionary = Option<(Arc<Dictionary>, u64)>;

pub struct Catalog {
    tables: BTreeMap<String, TableInfo>,
    /// Tables whose files cannot be opened, with the reason: only a query that reads one
    /// fails for it.
    broken: BTreeMap<String, Arc<StorageError>>,
    cache: Mutex<HashMap<(String, String), Arc<Column>>>,
    page_dictionaries: Mutex<HashMap<(String, String), PageDictionary>>,
    /// Whether a loaded column's values are unique, once checked: planning asks it of every
    /// join key, and checking means sorting or marking every value.
    pub(crate) unique_values: Mutex<HashMap<(String, String), Option<bool>>>,
    /// Sets of a table's columns known to hold no combination of values twice: the keys of
    /// a grouped result added as a table.
    unique_keys: BTreeMap<String, Vec<Vec<String>>>,
    /// The dictionaries of derived string columns (`crate::derived`), computed from their base
    /// columns' dictionaries: kernels read a derived column through its base's codes, so its
    /// values need never be loaded.
    derived_dictionaries: Mutex<HashMap<(String, String), DerivedCodes>>,
    /// One lock per table, held while that table's columns load, so that threads asking for
    /// the same columns at once read the files once; other tables load meanwhile.
    loading: HashMap<String, Mutex<()>>,
    /// How integer columns are encoded for kernels, and the encodings made so far.
    pub(crate) compression: Compression,
    pub(crate) packed: Mutex<PackedColumns>,
    /// Prepared columns: where they are read and written (`None`: neither), and what this
    /// catalog did with them.
    pub(crate) prepared: Option<Prepared>,
    /// Where progress of loading and encoding columns goes.
    pub(crate) progress: Arc<dyn Progress>,
}

/// A catalog's use of its prepared store.
pub(crate) struct Prepared {
    pub(crate) store: PreparedStore,
    /// The identity of each table's files, computed on first use.
    sources: Mutex<HashMap<String, Arc<Vec<SourceFile>>>>,
    /// Entries (table, column, kind) read from the store or queued for writing: none is
    /// written twice.
    pub(crate) settled: Mutex<HashSet<(String, String, String)>>,
    /// Entries being written in the background, and how many were started.
    writers: Mutex<Vec<JoinHandle<Result<(), String>>>>,
    spawned: std::sync::atomic::AtomicUsize,
    /// What encodings read from the store say of columns that were not loaded (`None`: the
    /// store was asked and had no such encoding).
    pub(crate) facts: Mutex<HashMap<(String, String), Option<ColumnFacts>>>,
    /// Corrupt entries reported so far.
    warned: Mutex<HashSet<String>>,
}

/// What a prepared encoding says of its column.
#[derive(Clone)]
pub(crate) struct ColumnFacts {
    pub(crate) stats: ColumnStats,
    /// The dictionary of the codes the encoding holds (string columns).
    pub(crate) dictionary: Option<Arc<Dictionary>>,
    pub(crate) unique: Option<bool>,
}

/// A derived string column's codes for each code of its base column's dictionary, and its own
/// dictionary ([`Catalog::derived_codes`]).
pub type DerivedCodes = (Arc<Vec<i32>>, Arc<Dictionary>);

/// A poisoned lock only means another thread panicked while holding it; the map it guards is
/// still consistent (entries are inserted whole), so carry on.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Catalog {
    /// Scans `dir` for tables. `declared` holds the schemas the script declares: required for
    /// `.tbl` files, and checked against the files' own schema for Parquet tables. Only
    /// footers are read (row counts come from Parquet metadata); a `.tbl` file is scanned once
    /// to count its lines.
    pub fn open(dir: &Path, declared: &[(String, Schema)]) -> Result<Catalog, StorageError> {
        let entries = if dir.is_file() {
            vec![single_file(dir)?]
        } else if dir.is_dir() {
            crate::gen::check_generation(dir)?;
            scan_directory(dir)?
        } else if dir.exists() {
            // A device or a pipe, say: something there, but nothing tables can be read from.
            return Err(StorageError::NotFileOrFolder(dir.to_path_buf()));
        } else {
            return Err(StorageError::NoDirectory(dir.to_path_buf()));
        };
        let declared: HashMap<&str, &Schema> = declared
            .iter()
            .map(|(name, schema)| (name.as_str(), schema))
            .collect();
        let opened: Vec<(String, Result<TableInfo, StorageError>)> = entries
            .into_par_iter()
            .map(|(name, source)| (name.clone(), open_table(name, source, &declared)))
            .collect();
        let mut tables = BTreeMap::new();
        let mut broken = BTreeMap::new();
        for (name, table) in opened {
            match table {
                Ok(table) => {
                    tables.insert(name, table);
                }
                Err(error) => {
                    broken.insert(name, Arc::new(error));
                }
            }
        }
        let loading = tables
            .keys()
            .map(|name| (name.clone(), Mutex::new(())))
            .collect();
        Ok(Catalog {
            tables,
            broken,
            loading,
            ..Catalog::empty()
        })
    }

    /// A catalog of no tables, nothing loaded, columns plain, no prepared store.
    fn empty() -> Catalog {
        Catalog {
            tables: BTreeMap::new(),
            broken: BTreeMap::new(),
            cache: Mutex::new(HashMap::new()),
            page_dictionaries: Mutex::new(HashMap::new()),
            unique_values: Mutex::new(HashMap::new()),
            unique_keys: BTreeMap::new(),
            derived_dictionaries: Mutex::new(HashMap::new()),
            loading: HashMap::new(),
            compression: Compression::NONE,
            packed: Mutex::new(PackedColumns::default()),
            prepared: None,
            progress: Arc::new(NoProgress),
        }
    }

    /// An in-memory catalog of the given tables and columns.
    ///
    /// # Panics
    ///
    /// When the columns of one table differ in length or a table name repeats: that is a bug
    /// in the caller, not bad input. [`Catalog::try_from_columns`] reports it instead.
    pub fn from_columns(tables: Vec<(String, Vec<(String, Column)>)>) -> Catalog {
        match Catalog::try_from_columns(tables) {
            Ok(catalog) => catalog,
            Err(error) => panic!("Catalog::from_columns: {error}"),
        }
    }

    /// An in-memory catalog, or an error when a table's columns differ in length or a table or
    /// column name repeats.
    pub fn try_from_columns(
        tables: Vec<(String, Vec<(String, Column)>)>,
    ) -> Result<Catalog, StorageError> {
        let mut catalog = Catalog::empty();
        for (name, columns) in tables {
            catalog.add_table(&name, columns)?;
        }
        Ok(catalog)
    }

    /// Adds a table held in memory (a stage's result, a test's data), or an error when its
    /// columns differ in length, a column name repeats, or the catalog has a table of that
    /// name (its files', if they are broken).
    pub fn add_table(
        &mut self,
        name: &str,
        columns: Vec<(String, Column)>,
    ) -> Result<(), StorageError> {
        if self.tables.contains_key(name) || self.broken.contains_key(name) {
            return Err(StorageError::Invalid(format!(
                "table `{name}` is given twice"
            )));
        }
        let rows = columns.first().map_or(0, |(_, c)| c.len());
        let mut fields: Vec<Field> = Vec::with_capacity(columns.len());
        let mut loaded = Vec::with_capacity(columns.len());
        for (column_name, column) in columns {
            if column.len() != rows {
                return Err(StorageError::SchemaMismatch {
                    table: name.to_string(),
                    message: format!(
                        "column `{column_name}` has {} rows but the first column has {rows}",
                        column.len()
                    ),
                });
            }
            if fields.iter().any(|f| f.name == column_name) {
                return Err(StorageError::SchemaMismatch {
                    table: name.to_string(),
                    message: format!("column `{column_name}` is given twice"),
                });
            }
            fields.push(
                Field::new(column_name.clone(), column.ty()).nullable(column.validity.is_some()),
            );
            loaded.push(((name.to_string(), column_name), Arc::new(column)));
        }
        self.tables.insert(
            name.to_string(),
            TableInfo {
                name: name.to_string(),
                schema: Schema::new(fields),
                rows: rows as u64,
                format: TableFormat::Memory,
                unsupported: Vec::new(),
                statistics: BTreeMap::new(),
                unique: Vec::new(),
            },
        );
        self.loading.insert(name.to_string(), Mutex::new(()));
        self.cache
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(loaded);
        Ok(())
    }

    pub fn tables(&self) -> impl Iterator<Item = &TableInfo> {
        self.tables.values()
    }

    /// The tables whose files cannot be opened, with the reason.
    pub fn broken(&self) -> impl Iterator<Item = (&str, &StorageError)> {
        self.broken
            .iter()
            .map(|(name, error)| (name.as_str(), error.as_ref()))
    }

    /// Why table `name` cannot be opened, when its files are broken.
    pub fn broken_table(&self, name: &str) -> Option<Arc<StorageError>> {
        self.broken.get(name).cloned()
    }

    pub fn table(&self, name: &str) -> Option<&TableInfo> {
        self.tables.get(name)
    }

    /// The field of `table.column`: one of its files' columns, or a string function of one
    /// (`crate::derived`, of a function of one, ...), computed when loaded.
    pub fn field(&self, table: &str, column: &str) -> Option<Field> {
        if table == LITERAL_TABLE && is_made_strings_name(column) {
            return Some(Field {
                name: column.to_string(),
                ty: DataType::Str,
                nullable: true,
            });
        }
        if let Some(field) = self.tables.get(table).and_then(|t| t.schema.field(column)) {
            return Some(field.clone());
        }
        let derived = self.derived(table, column)?;
        let base = self.field(table, &derived.base)?;
        Some(Field {
            name: column.to_string(),
            ty: derived.result_type(),
            nullable: base.nullable,
        })
    }

    /// What `table.column` is computed from, when it is a derived string column: such a
    /// column is computed whenever it is loaded, never read from or written to the prepared
    /// store.
    pub(crate) fn derived(&self, table: &str, column: &str) -> Option<DerivedString> {
        // Under the literal table, a function of a `case`'s strings (a `case` among the results
        // of another).
        match self.tables.get(table) {
            Some(info) if info.schema.field(column).is_some() => return None,
            None if table != LITERAL_TABLE => return None,
            _ => {}
        }
        DerivedString::parse(column).filter(|d| {
            self.field(table, &d.base)
                .is_some_and(|base| base.ty == DataType::Str)
        })
    }

    /// A column's statistics: from the loaded column, else from the files' footers (for
    /// strings, their dictionary pages), else by loading the column. Planning asks for these;
    /// only footer-less files and strings not wholly dictionary-encoded need the data read.
    pub fn stats(&self, table: &str, column: &str) -> Result<ColumnStats, StorageError> {
        if let Some(strings) = self.case_dictionary(table, column)? {
            let codes = strings.len() as i64;
            return Ok(ColumnStats {
                rows: 0,
                nulls: 0,
                min: Value::Int(0),
                max: Value::Int(codes - 1),
                dictionary_size: Some(codes as u64),
            });
        }
        let key = (table.to_string(), column.to_string());
        if let Some(loaded) = lock(&self.cache).get(&key) {
            return Ok(loaded.stats.clone());
        }
        if let Some(derived) = self
            .derived(table, column)
            .filter(|d| d.result_type() == DataType::Str)
        {
            let base = self.stats(table, &derived.base)?;
            let codes = self.derived_dictionary(table, column, &derived)?.len() as i64;
            let (min, max) = if codes == 0 || base.nulls >= base.rows {
                (Value::Null, Value::Null)
            } else {
                (Value::Int(0), Value::Int(codes - 1))
            };
            return Ok(ColumnStats {
                min,
                max,
                dictionary_size: Some(codes as u64),
                ..base
            });
        }
        let info = self.tables.get(table);
        if let Some(stats) = info.and_then(|t| t.statistics.get(column)) {
            return Ok(stats.clone());
        }
        if let Some(facts) = self.prepared_facts(table, column)? {
            return Ok(facts.stats);
        }
        if let (Some(info), Some((dictionary, nulls))) =
            (info, self.page_dictionary(table, column)?)
        {
            let codes = dictionary.len() as i64;
            let (min, max) = if codes == 0 || nulls >= info.rows {
                (Value::Null, Value::Null)
            } else {
                (Value::Int(0), Value::Int(codes - 1))
            };
            return Ok(ColumnStats {
                rows: info.rows,
                nulls,
                min,
                max,
                dictionary_size: Some(codes as u64),
            });
        }
        Ok(self.column(table, column)?.stats.clone())
    }

    /// A string column's sorted dictionary, for binding string literals to codes and sizing
    /// code ranges: the loaded column's; else, for Parquet tables whose string pages are all
    /// dictionary-encoded, the union of their dictionary pages, read without the rows (it may
    /// hold strings no row uses, so codes from it are not the loaded column's); else the
    /// loaded column's after all. `None` for a column that is not a string.
    pub fn dictionary(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<Arc<Dictionary>>, StorageError> {
        if let Some(made) = self.made_dictionary(table, column)? {
            return Ok(made);
        }
        let key = (table.to_string(), column.to_string());
        if let Some(loaded) = lock(&self.cache).get(&key) {
            return Ok(loaded.data.dictionary().cloned());
        }
        if let Some(facts) = self.prepared_facts(table, column)? {
            return Ok(facts.dictionary);
        }
        if let Some((dictionary, _)) = self.page_dictionary(table, column)? {
            return Ok(Some(dictionary));
        }
        Ok(self.column(table, column)?.data.dictionary().cloned())
    }

    /// The dictionary of the codes kernels read for a string column (`None` for other
    /// columns): the loaded column's, else the one a prepared encoding holds with its codes,
    /// else the column's once loaded. Never the dictionary pages', whose codes may differ.
    pub fn codes_dictionary(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<Arc<Dictionary>>, StorageError> {
        if let Some(made) = self.made_dictionary(table, column)? {
            return Ok(made);
        }
        let key = (table.to_string(), column.to_string());
        if let Some(loaded) = lock(&self.cache).get(&key) {
            return Ok(loaded.data.dictionary().cloned());
        }
        if let Some(facts) = self.prepared_facts(table, column)? {
            if facts.dictionary.is_some() {
                return Ok(facts.dictionary);
            }
        }
        Ok(self.column(table, column)?.data.dictionary().cloned())
    }

    /// The smallest and largest value of an integer, date or string column (codes for
    /// strings, so `0..=entries - 1`), as kernels compiled for a range check it; `None` when
    /// the column holds no value or is of another type.
    pub fn value_range(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        // Only a string column has codes; asking another for its dictionary would load it.
        let is_string = self
            .field(table, column)
            .is_some_and(|field| field.ty == DataType::Str);
        if is_string {
            if let Some(dictionary) = self.codes_dictionary(table, column)? {
                return Ok((!dictionary.is_empty()).then(|| (0, dictionary.len() as i64 - 1)));
            }
        }
        let stats = self.stats(table, column)?;
        Ok(stats.int_range().filter(|_| stats.rows > stats.nulls))
    }

    /// Whether the column has been read (and is cached).
    pub fn is_loaded(&self, table: &str, column: &str) -> bool {
        lock(&self.cache).contains_key(&(table.to_string(), column.to_string()))
    }

    fn page_dictionary(&self, table: &str, column: &str) -> Result<PageDictionary, StorageError> {
        let key = (table.to_string(), column.to_string());
        if let Some(known) = lock(&self.page_dictionaries).get(&key) {
            return Ok(known.clone());
        }
        let found = match self.tables.get(table) {
            Some(TableInfo {
                format:
                    TableFormat::Parquet {
                        files, partitions, ..
                    },
                schema,
                ..
            }) => match schema.field(column) {
                Some(field)
                    if field.ty == DataType::Str
                        && !partitions.iter().any(|p| p.field.name == column) =>
                {
                    read_parquet_dictionary(table, files, field)?
                        .map(|(dictionary, nulls)| (Arc::new(dictionary), nulls))
                }
                _ => None,
            },
            _ => None,
        };
        lock(&self.page_dictionaries).insert(key, found.clone());
        Ok(found)
    }

    /// Records that `columns` of `table` hold no combination of values twice (a grouped
    /// result's keys, which a column's statistics cannot tell when there are several).
    pub fn add_unique_key(&mut self, table: &str, columns: Vec<String>) {
        self.unique_keys
            .entry(table.to_string())
            .or_default()
            .push(columns);
    }

    /// Whether `columns` of `table` together hold no combination of values twice, as a key
    /// recorded with [`Catalog::add_unique_key`] among them says.
    fn is_unique_key(&self, table: &str, columns: &[&str]) -> bool {
        self.unique_keys.get(table).is_some_and(|keys| {
            keys.iter()
                .any(|key| key.iter().all(|c| columns.contains(&c.as_str())))
        })
    }

    /// Whether `columns` of `table` together hold no combination of values twice among the
    /// rows where none is null: as a key recorded among them says, or one of them alone, else
    /// checked once on the loaded columns (TPC-H's `ps_partkey, ps_suppkey`). `false` where it
    /// cannot be told (a type other than integers, ranges past 64 bits together).
    pub fn unique_together(&self, table: &str, columns: &[&str]) -> Result<bool, StorageError> {
        if self.is_unique_key(table, columns) {
            return Ok(true);
        }
        for column in columns {
            if self.unique(table, column)? == Some(true) {
                return Ok(true);
            }
        }
        // Each combination is checked once, under its names joined by a character no name
        // holds.
        let key = (table.to_string(), columns.join("\0"));
        if let Some(&known) = lock(&self.unique_values).get(&key) {
            return Ok(known == Some(true));
        }
        let loaded = self.columns(table, columns)?;
        let loaded: Vec<&Column> = loaded.iter().map(|c| c.as_ref()).collect();
        let unique = crate::column::unique_combinations(&loaded);
        lock(&self.unique_values).insert(key, unique);
        Ok(unique == Some(true))
    }

    /// Whether no value of a key column occurs twice (`None` where the type has no such
    /// notion): taken from the file's record of it, else checked once on the loaded column,
    /// else settled by the statistics when there are more values than the range holds, else
    /// checked after loading the column.
    pub fn unique(&self, table: &str, column: &str) -> Result<Option<bool>, StorageError> {
        let recorded = self
            .tables
            .get(table)
            .is_some_and(|t| t.unique.iter().any(|c| c == column));
        if recorded {
            return Ok(Some(true));
        }
        let key = (table.to_string(), column.to_string());
        if let Some(&known) = lock(&self.unique_values).get(&key) {
            return Ok(known);
        }
        let loaded = lock(&self.cache).get(&key).cloned();
        if let Some(loaded) = loaded {
            let unique = loaded.has_unique_values();
            lock(&self.unique_values).insert(key, unique);
            return Ok(unique);
        }
        if let Some(unique) = self.prepared_facts(table, column)?.and_then(|f| f.unique) {
            lock(&self.unique_values).insert(key, Some(unique));
            return Ok(Some(unique));
        }
        // More values than the range has room for must repeat: no need to read them.
        let stats = self.stats(table, column)?;
        if let Some((min, max)) = stats.int_range() {
            let room = (max as i128 - min as i128 + 1).max(0) as u128;
            if u128::from(stats.rows.saturating_sub(stats.nulls)) > room {
                return Ok(Some(false));
            }
        }
        let unique = self.column(table, column)?.has_unique_values();
        lock(&self.unique_values).insert(key, unique);
        Ok(unique)
    }

    /// One column, loaded on first use and cached.
    pub fn column(&self, table: &str, column: &str) -> Result<Arc<Column>, StorageError> {
        let mut columns = self.columns(table, &[column])?;
        columns.pop().ok_or_else(|| StorageError::UnknownColumn {
            table: table.into(),
            column: column.into(),
        })
    }

    /// Several columns of one table, in the order asked; those not cached yet are read in one
    /// pass over the table's files, in parallel.
    pub fn columns(&self, table: &str, columns: &[&str]) -> Result<Vec<Arc<Column>>, StorageError> {
        self.columns_with_progress(table, columns, self.progress.as_ref())
    }

    /// The same catalog, reporting progress of loading and encoding columns to `progress`.
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Catalog {
        self.progress = progress;
        self
    }

    /// [`Catalog::columns`], reporting rows decoded (summed over the columns read) to `progress`.
    pub fn columns_with_progress(
        &self,
        table: &str,
        columns: &[&str],
        progress: &dyn Progress,
    ) -> Result<Vec<Arc<Column>>, StorageError> {
        self.columns_into(table, columns, progress, &self.buffers())
    }

    /// [`Catalog::columns_with_progress`], the values of columns read from Parquet files in
    /// buffers made by `buffers`.
    pub(crate) fn columns_into(
        &self,
        table: &str,
        columns: &[&str],
        progress: &dyn Progress,
        buffers: &Buffers,
    ) -> Result<Vec<Arc<Column>>, StorageError> {
        let info = self
            .tables
            .get(table)
            .ok_or_else(|| StorageError::UnknownTable(table.into()))?;
        for &name in columns {
            if self.field(table, name).is_none() {
                return Err(match info.unsupported.iter().find(|(n, _)| n == name) {
                    Some((_, reason)) => StorageError::UnsupportedColumn {
                        table: table.into(),
                        column: name.into(),
                        reason: reason.clone(),
                    },
                    None => StorageError::UnknownColumn {
                        table: table.into(),
                        column: name.into(),
                    },
                });
            }
        }
        if let Some(found) = self.cached(table, columns) {
            return Ok(found);
        }
        let derived: Vec<(&str, DerivedString)> = columns
            .iter()
            .filter_map(|&name| Some((name, self.derived(table, name)?)))
            .collect();
        if !derived.is_empty() {
            return self.load_derived(table, columns, derived, progress);
        }
        let _loading = self.loading.get(table).map(lock);
        // Another thread may have loaded them while this one waited.
        if let Some(found) = self.cached(table, columns) {
            return Ok(found);
        }
        let missing: Vec<Field> = {
            let cache = lock(&self.cache);
            let mut missing: Vec<Field> = Vec::new();
            for &name in columns {
                let key = (table.to_string(), name.to_string());
                if !cache.contains_key(&key) && !missing.iter().any(|f| f.name == name) {
                    if let Some(field) = info.schema.field(name) {
                        missing.push(field.clone());
                    }
                }
            }
            missing
        };
        let mut missing = missing;
        if let Some(prepared) = &self.prepared {
            if let Some(sources) = self.sources(prepared, table)? {
                missing.retain(|field| {
                    match prepared.store.values(table, field, &sources, info.rows) {
                        Found::Fresh((column, unique)) => {
                            let key = (table.to_string(), field.name.clone());
                            prepared.settle(table, &field.name, "values");
                            if unique.is_some() {
                                lock(&self.unique_values).insert(key.clone(), unique);
                            }
                            lock(&self.cache).insert(key, Arc::new(column));
                            false
                        }
                        Found::Corrupt(reason) => {
                            prepared.warn(reason);
                            true
                        }
                        Found::Missing => true,
                    }
                });
                if missing.is_empty() {
                    return self.cached(table, columns).ok_or_else(|| {
                        StorageError::UnknownColumn {
                            table: table.into(),
                            column: columns.join(", "),
                        }
                    });
                }
            }
        }
        let loaded: Vec<(String, Column)> = match &info.format {
            TableFormat::Parquet {
                files,
                partitions,
                file_rows,
            } => {
                progress.start(
                    &format!("loading {table}"),
                    info.rows * missing.len() as u64,
                );
                let (from_folders, in_files): (Vec<Field>, Vec<Field>) = missing
                    .into_iter()
                    .partition(|f| partitions.iter().any(|p| p.field.name == f.name));
                let loaded = read_parquet_columns(table, files, &in_files, buffers, progress)?;
                let mut columns: Vec<(String, Column)> = in_files
                    .iter()
                    .map(|f| f.name.clone())
                    .zip(loaded)
                    .collect();
                for field in from_folders {
                    if let Some(partition) = partitions.iter().find(|p| p.field.name == field.name)
                    {
                        columns.push((field.name, partition_column(partition, file_rows)));
                    }
                }
                columns
            }
            TableFormat::Tbl { path } | TableFormat::Csv { path } | TableFormat::Ipc { path } => {
                // The file is read whole anyway, so keep every column it holds.
                progress.start(&format!("loading {table}"), info.rows);
                let loaded = match &info.format {
                    TableFormat::Csv { .. } => read_csv(path, &info.schema, info.rows, progress)?,
                    TableFormat::Ipc { .. } => read_ipc(path, &info.schema, info.rows, progress)?,
                    _ => read_tbl(path, &info.schema, progress)?,
                };
                info.schema
                    .names()
                    .map(str::to_string)
                    .zip(loaded)
                    .collect()
            }
            // Memory tables are cached whole from the start.
            TableFormat::Memory => Vec::new(),
        };
        progress.finish();
        {
            let mut cache = lock(&self.cache);
            for (name, column) in loaded {
                cache
                    .entry((table.to_string(), name))
                    .or_insert_with(|| Arc::new(column));
            }
        }
        self.cached(table, columns)
            .ok_or_else(|| StorageError::UnknownColumn {
                table: table.into(),
                column: columns.join(", "),
            })
    }

    /// The dictionary of a column this catalog makes rather than reads — a `case`'s string
    /// literals, or a derived column (`None` inside for `length`, which has none) — or `None`
    /// for a column of the data.
    fn made_dictionary(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<Option<Arc<Dictionary>>>, StorageError> {
        if let Some(strings) = self.case_dictionary(table, column)? {
            return Ok(Some(Some(strings)));
        }
        let Some(derived) = self.derived(table, column) else {
            return Ok(None);
        };
        Ok(Some(match derived.result_type() {
            DataType::Str => Some(self.derived_dictionary(table, column, &derived)?),
            _ => None,
        }))
    }

    /// The dictionary of the strings a `case` produces, when `table.column` names one: its
    /// literals (`crate::derived::literal_strings_name`), or those and the strings of the
    /// columns among its results (`crate::derived::case_strings_name`, made once per catalog
    /// from the dictionaries of those columns' codes).
    fn case_dictionary(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<Arc<Dictionary>>, StorageError> {
        if table != LITERAL_TABLE {
            return Ok(None);
        }
        if let Some(strings) = literal_strings(column) {
            return Ok(Some(Arc::new(strings)));
        }
        let Some(case) = case_strings(column) else {
            return Ok(None);
        };
        let key = (table.to_string(), column.to_string());
        if let Some(known) = lock(&self.derived_dictionaries).get(&key) {
            return Ok(Some(Arc::clone(&known.1)));
        }
        let mut strings = case.literals;
        for (of, name) in &case.columns {
            let dictionary = self.codes_dictionary(of, name)?.ok_or_else(|| {
                StorageError::Invalid(format!("`{of}.{name}` is not a string column"))
            })?;
            strings.extend(dictionary.iter().map(str::to_string));
        }
        let dictionary = Arc::new(Dictionary::from_unsorted(strings));
        lock(&self.derived_dictionaries)
            .insert(key, (Arc::new(Vec::new()), Arc::clone(&dictionary)));
        Ok(Some(dictionary))
    }

    /// The dictionary of `table.column`, derived as `derived` says from its base column's
    /// dictionary (computed once per catalog).
    fn derived_dictionary(
        &self,
        table: &str,
        column: &str,
        derived: &DerivedString,
    ) -> Result<Arc<Dictionary>, StorageError> {
        Ok(self.derived_recoding(table, column, derived)?.1)
    }

    /// For each code of the dictionary kernels read for the base of derived column
    /// `table.column`, the code of its string's result in the derived column's dictionary,
    /// and that dictionary: what a kernel reading the base's codes needs (computed once per
    /// catalog). `None` when the column is not a derived one.
    pub fn derived_codes(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<DerivedCodes>, StorageError> {
        match self.derived(table, column) {
            Some(derived) => self.derived_recoding(table, column, &derived).map(Some),
            None => Ok(None),
        }
    }

    fn derived_recoding(
        &self,
        table: &str,
        column: &str,
        derived: &DerivedString,
    ) -> Result<DerivedCodes, StorageError> {
        let key = (table.to_string(), column.to_string());
        if let Some(known) = lock(&self.derived_dictionaries).get(&key) {
            return Ok(known.clone());
        }
        let base = self
            .codes_dictionary(table, &derived.base)?
            .ok_or_else(|| {
                StorageError::Invalid(format!("`{table}.{}` is not a string column", derived.base))
            })?;
        let target = match &derived.function {
            StringFunction::Recode { into } => self.case_dictionary(LITERAL_TABLE, into)?,
            _ => None,
        };
        let (codes, dictionary) = derived.recode(&base, target.as_ref()).ok_or_else(|| {
            StorageError::Invalid(format!(
                "the strings of `{table}.{}` are not all among its `case`'s strings",
                derived.base
            ))
        })?;
        let recoding = (Arc::new(codes), dictionary);
        lock(&self.derived_dictionaries).insert(key, recoding.clone());
        Ok(recoding)
    }

    /// `columns` of `table`, of which `derived` are string functions of others: their bases
    /// and the stored columns are loaded, then each derived one is computed from its base,
    /// once per dictionary entry, and kept like a loaded column.
    fn load_derived(
        &self,
        table: &str,
        columns: &[&str],
        derived: Vec<(&str, DerivedString)>,
        progress: &dyn Progress,
    ) -> Result<Vec<Arc<Column>>, StorageError> {
        let mut stored: Vec<&str> = columns
            .iter()
            .copied()
            .filter(|name| derived.iter().all(|(d, _)| d != name))
            .collect();
        for (_, definition) in &derived {
            if !stored.contains(&definition.base.as_str()) {
                stored.push(&definition.base);
            }
        }
        let loaded = self.columns_with_progress(table, &stored, progress)?;
        for (name, definition) in &derived {
            let at = stored.iter().position(|s| *s == definition.base);
            let base =
                at.and_then(|at| loaded.get(at))
                    .ok_or_else(|| StorageError::UnknownColumn {
                        table: table.into(),
                        column: definition.base.clone(),
                    })?;
            let (codes, dictionary) = self.derived_recoding(table, name, definition)?;
            let column = definition
                .compute(base, &codes, &dictionary)
                .ok_or_else(|| {
                    StorageError::Invalid(format!(
                        "`{table}.{}` is not a string column",
                        definition.base
                    ))
                })?;
            lock(&self.cache)
                .entry((table.to_string(), name.to_string()))
                .or_insert_with(|| Arc::new(column));
        }
        self.cached(table, columns)
            .ok_or_else(|| StorageError::UnknownColumn {
                table: table.into(),
                column: columns.join(", "),
            })
    }

    /// A column a kernel reads: [`Catalog::column`], and when the prepared store holds no
    /// fresh entry of it, its values written there (in the background; see
    /// [`Catalog::finish_preparing`]).
    pub fn kernel_column(&self, table: &str, column: &str) -> Result<Arc<Column>, StorageError> {
        let loaded = self.column(table, column)?;
        let Some(prepared) = self
            .writable_store()
            .filter(|_| self.derived(table, column).is_none())
        else {
            return Ok(loaded);
        };
        // Under `auto`, a column read plain was chosen to be: record the choice, so later runs
        // need not weigh the schemes again.
        if self.compression == Compression::Auto && crate::packed::packable(loaded.ty()) {
            let chosen = lock(&self.packed).chosen(table, column);
            if chosen == Some(crate::compress::Scheme::None) {
                self.prepare_encoding(table, column, crate::compress::Scheme::None, None)?;
            }
        }
        if !prepared.settle(table, column, "values") {
            return Ok(loaded);
        }
        let Some(sources) = self.sources(prepared, table)? else {
            return Ok(loaded);
        };
        let key = (table.to_string(), column.to_string());
        let unique = lock(&self.unique_values).get(&key).copied().flatten();
        let store = prepared.store.clone();
        let (table, name, column) = (table.to_string(), column.to_string(), Arc::clone(&loaded));
        prepared.spawn(move || {
            store
                .write_values(&table, &name, &column, unique, &sources)
                .map_err(|e| format!("cannot prepare {table}.{name}: {e}"))
        });
        Ok(loaded)
    }

    /// Stores what kernels read of `table.column` under the catalog's setting, unless the store
    /// holds it already, and frees the column's memory: `tessera prepare`, one column at a time.
    /// Returns whether anything was written.
    pub fn prepare_column(&self, table: &str, column: &str) -> Result<bool, StorageError> {
        let Some(prepared) = self.writable_store() else {
            return Err(StorageError::Invalid(
                "there is no folder to prepare columns in".into(),
            ));
        };
        let field = self
            .field(table, column)
            .ok_or_else(|| StorageError::UnknownColumn {
                table: table.into(),
                column: column.into(),
            })?;
        let written_before = prepared.spawned();
        let packs = self.compression != Compression::NONE && crate::packed::packable(field.ty);
        let scheme = if packs {
            self.scheme(table, column)?
        } else {
            crate::compress::Scheme::None
        };
        if scheme != crate::compress::Scheme::None {
            self.kernel_packed(table, column, scheme)?;
        }
        // Plain values, or the validity beside an encoding.
        if scheme == crate::compress::Scheme::None || field.nullable {
            self.kernel_column(table, column)?;
        }
        let problems = self.finish_preparing();
        let wrote = prepared.spawned() > written_before;
        self.unload(table, column);
        lock(&self.packed).forget(table, column);
        match problems.into_iter().next() {
            Some(problem) => Err(StorageError::Invalid(problem)),
            None => Ok(wrote),
        }
    }

    /// How many prepared entries this catalog read from its store, and how many it wrote.
    pub fn prepared_counts(&self) -> (usize, usize) {
        self.prepared.as_ref().map_or((0, 0), |p| {
            (lock(&p.settled).len() - p.spawned(), p.spawned())
        })
    }

    /// Forgets a loaded column, freeing its memory (a later use loads it again).
    pub fn unload(&self, table: &str, column: &str) {
        lock(&self.cache).remove(&(table.to_string(), column.to_string()));
    }

    /// The same catalog, reading columns from `store` where it holds them fresh, and writing
    /// there what kernels read of the others.
    pub fn with_prepared(mut self, store: PreparedStore) -> Catalog {
        self.prepared = Some(Prepared {
            store,
            sources: Mutex::new(HashMap::new()),
            settled: Mutex::new(HashSet::new()),
            writers: Mutex::new(Vec::new()),
            spawned: std::sync::atomic::AtomicUsize::new(0),
            facts: Mutex::new(HashMap::new()),
            warned: Mutex::new(HashSet::new()),
        });
        self
    }

    /// Where prepared columns are read and written, if anywhere.
    pub fn prepared_store(&self) -> Option<&PreparedStore> {
        self.prepared.as_ref().map(|p| &p.store)
    }

    /// Where large column buffers are made: while this catalog prepares columns into the
    /// user's cache, in files there (so a cold run's columns and encodings, read and made
    /// before their entries exist, are page cache rather than the process's memory); else in
    /// memory.
    pub(crate) fn buffers(&self) -> Buffers {
        self.writable_store()
            .and_then(|prepared| prepared.store.scratch_folder())
            .map_or(Buffers::Memory, Buffers::files)
    }

    pub(crate) fn writable_store(&self) -> Option<&Prepared> {
        self.prepared
            .as_ref()
            .filter(|p| p.store.write_folder().is_some())
    }

    /// Waits for the prepared entries still being written. Returns what went wrong (entries
    /// that could not be written, entries found corrupt), one line each, for the caller to say.
    pub fn finish_preparing(&self) -> Vec<String> {
        let Some(prepared) = &self.prepared else {
            return Vec::new();
        };
        let writers = std::mem::take(&mut *lock(&prepared.writers));
        let mut problems: Vec<String> = writers
            .into_iter()
            .filter_map(|writer| match writer.join() {
                Ok(Ok(())) => None,
                Ok(Err(problem)) => Some(problem),
                Err(_) => Some("a thread writing prepared columns failed".into()),
            })
            .collect();
        problems.extend(prepared.take_warnings());
        problems
    }

    /// Warnings about corrupt prepared entries found since the last call.
    pub fn take_warnings(&self) -> Vec<String> {
        self.prepared
            .as_ref()
            .map(Prepared::take_warnings)
            .unwrap_or_default()
    }

    /// The identity of `table`'s files (`None` for a table held in memory).
    pub(crate) fn sources(
        &self,
        prepared: &Prepared,
        table: &str,
    ) -> Result<Option<Arc<Vec<SourceFile>>>, StorageError> {
        if let Some(known) = lock(&prepared.sources).get(table) {
            return Ok(Some(Arc::clone(known)));
        }
        let info = self
            .tables
            .get(table)
            .ok_or_else(|| StorageError::UnknownTable(table.into()))?;
        let files: Vec<SourceFile> = match &info.format {
            TableFormat::Parquet { files, .. } => files
                .par_iter()
                .map(|f| SourceFile::of(f))
                .collect::<Result<_, _>>()?,
            TableFormat::Tbl { path } | TableFormat::Csv { path } | TableFormat::Ipc { path } => {
                vec![SourceFile::of(path)?]
            }
            TableFormat::Memory => return Ok(None),
        };
        let files = Arc::new(files);
        lock(&prepared.sources).insert(table.to_string(), Arc::clone(&files));
        Ok(Some(files))
    }

    /// The columns, if all are cached.
    pub(crate) fn cached(&self, table: &str, columns: &[&str]) -> Option<Vec<Arc<Column>>> {
        let cache = lock(&self.cache);
        columns
            .iter()
            .map(|&name| cache.get(&(table.to_string(), name.to_string())).cloned())
            .collect()
    }
}

impl Prepared {
    /// Marks an entry as settled (read from the store, or being written); false when it was
    /// already.
    pub(crate) fn settle(&self, table: &str, column: &str, kind: &str) -> bool {
        lock(&self.settled).insert((table.to_string(), column.to_string(), kind.to_string()))
    }

    pub(crate) fn spawn(&self, write: impl FnOnce() -> Result<(), String> + Send + 'static) {
        self.spawned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.writers).push(std::thread::spawn(write));
    }

    /// Entries written (or being written) so far.
    fn spawned(&self) -> usize {
        self.spawned.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that an entry was found corrupt (it is prepared again).
    pub(crate) fn warn(&self, reason: String) {
        lock(&self.warned).insert(format!(
            "a prepared column was damaged and is prepared again ({reason})"
        ));
    }

    fn take_warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = lock(&self.warned).drain().collect();
        warnings.sort();
        warnings
    }
}

/// Where a table's data lives, before its files are opened.
enum Source {
    ParquetFile(PathBuf),
    ParquetFolder(PathBuf, Vec<PathBuf>, Vec<Partition>),
    Tbl(PathBuf),
    Csv(PathBuf),
    Ipc(PathBuf),
}

impl Source {
    /// The source a file is, by its extension; `None` for files of other kinds.
    fn of_file(path: &Path) -> Option<Source> {
        if has_extension(path, "parquet") {
            Some(Source::ParquetFile(path.to_path_buf()))
        } else if has_extension(path, "tbl") {
            Some(Source::Tbl(path.to_path_buf()))
        } else if has_extension(path, "csv") || has_extension(path, "tsv") {
            Some(Source::Csv(path.to_path_buf()))
        } else if ["arrow", "feather", "ipc"]
            .iter()
            .any(|extension| has_extension(path, extension))
        {
            Some(Source::Ipc(path.to_path_buf()))
        } else {
            None
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::ParquetFile(path)
            | Source::Tbl(path)
            | Source::Csv(path)
            | Source::Ipc(path) => path.display().to_string(),
            Source::ParquetFolder(path, ..) => format!("{}/", path.display()),
        }
    }
}

fn is_hidden(name: &OsStr) -> bool {
    name.to_str()
        .is_none_or(|name| name.starts_with('.') || name.starts_with('_'))
}

fn has_extension(path: &Path, extension: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(extension))
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, StorageError> {
    let io = |source| StorageError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if !is_hidden(&entry.file_name()) {
            paths.push(entry.path());
        }
    }
    paths.sort();
    Ok(paths)
}

/// The tables in `dir`, by name. Two entries for one name (say `t.parquet` and `t/`) are an
/// error: which one the user meant is not ours to guess.
fn scan_directory(dir: &Path) -> Result<Vec<(String, Source)>, StorageError> {
    let mut tables: BTreeMap<String, Source> = BTreeMap::new();
    for path in read_dir_sorted(dir)? {
        let Some(stem) = path.file_stem().and_then(OsStr::to_str).map(str::to_string) else {
            continue;
        };
        let source = if path.is_dir() {
            let (files, partitions) = parquet_files(&path, &read_dir_sorted)?;
            if files.is_empty() {
                continue;
            }
            let name = path
                .file_name()
                .and_then(OsStr::to_str)
                .unwrap_or(&stem)
                .to_string();
            insert_table(
                &mut tables,
                name,
                Source::ParquetFolder(path, files, partitions),
            )?;
            continue;
        } else if !path.is_file() {
            // A pipe or device named like a table would block its reader forever.
            continue;
        } else {
            match Source::of_file(&path) {
                Some(source) => source,
                None => continue,
            }
        };
        insert_table(&mut tables, stem, source)?;
    }
    Ok(tables.into_iter().collect())
}

/// The one table of data given as a single file, named after the file's stem.
fn single_file(path: &Path) -> Result<(String, Source), StorageError> {
    let stem = path.file_stem().and_then(OsStr::to_str);
    match (stem, Source::of_file(path)) {
        (Some(stem), Some(source)) => Ok((stem.to_string(), source)),
        _ => Err(StorageError::Invalid(format!(
            "{} is not a table: data is a folder, or a .parquet, .csv, .tsv, .arrow, .feather, .ipc or .tbl file",
            path.display()
        ))),
    }
}

fn insert_table(
    tables: &mut BTreeMap<String, Source>,
    name: String,
    source: Source,
) -> Result<(), StorageError> {
    if let Some(existing) = tables.get(&name) {
        return Err(StorageError::Invalid(format!(
            "table `{name}` is stored twice, in {} and in {}; remove one",
            existing.describe(),
            source.describe()
        )));
    }
    tables.insert(name, source);
    Ok(())
}

fn open_table(
    name: String,
    source: Source,
    declared: &HashMap<&str, &Schema>,
) -> Result<TableInfo, StorageError> {
    let declared = declared.get(name.as_str()).copied();
    match source {
        Source::Tbl(path) => {
            let Some(schema) = declared else {
                return Err(StorageError::SchemaMismatch {
                    table: name.clone(),
                    message: format!(
                        "{} has no schema of its own; declare `table {name} {{ ... }}` in the script",
                        path.display()
                    ),
                });
            };
            Ok(TableInfo {
                rows: count_tbl_rows(&path)?,
                schema: schema.clone(),
                format: TableFormat::Tbl { path },
                unsupported: Vec::new(),
                statistics: BTreeMap::new(),
                unique: Vec::new(),
                name,
            })
        }
        Source::ParquetFile(path) => open_parquet(name, vec![path], Vec::new(), declared),
        Source::Ipc(path) => {
            whole_file_table(name, open_ipc(&path)?, TableFormat::Ipc { path }, declared)
        }
        Source::Csv(path) => {
            let found = open_csv(&path, declared)?;
            whole_file_table(name, found, TableFormat::Csv { path }, declared)
        }
        Source::ParquetFolder(_, files, partitions) => {
            open_parquet(name, files, partitions, declared)
        }
    }
}

/// The table of a file read whole (CSV, Arrow IPC), as opening it `found`, checked against its
/// declaration.
fn whole_file_table(
    name: String,
    found: FileTable,
    format: TableFormat,
    declared: Option<&Schema>,
) -> Result<TableInfo, StorageError> {
    if let Some(declared) = declared {
        check_declared(&name, &found.schema, &found.unsupported, declared)?;
    }
    Ok(TableInfo {
        rows: found.rows,
        schema: found.schema,
        format,
        unsupported: found.unsupported,
        statistics: BTreeMap::new(),
        unique: Vec::new(),
        name,
    })
}

fn open_parquet(
    name: String,
    files: Vec<PathBuf>,
    partitions: Vec<Partition>,
    declared: Option<&Schema>,
) -> Result<TableInfo, StorageError> {
    let schemas: Vec<ParquetFileSchema> = files
        .par_iter()
        .map(|path| read_parquet_schema(path))
        .collect::<Result<_, _>>()?;
    let Some(first) = schemas.first() else {
        return Err(StorageError::Invalid(format!(
            "table `{name}` has no files"
        )));
    };
    for (path, schema) in files.iter().zip(&schemas).skip(1) {
        if schema.schema != first.schema || schema.unsupported != first.unsupported {
            return Err(StorageError::SchemaMismatch {
                table: name,
                message: format!(
                    "{} has a different schema from {}",
                    path.display(),
                    files[0].display()
                ),
            });
        }
    }
    let rows = schemas.iter().map(|s| s.rows).sum();
    let statistics = combine_footer_stats(&first.schema, &schemas, rows);
    let mut schema = first.schema.clone();
    for partition in &partitions {
        if schema.field(&partition.field.name).is_some() {
            return Err(StorageError::SchemaMismatch {
                table: name,
                message: format!(
                    "`{}` is both a column of the files and a partition folder's key",
                    partition.field.name
                ),
            });
        }
        schema.fields.push(partition.field.clone());
    }
    let unsupported = first.unsupported.clone();
    if let Some(declared) = declared {
        check_declared(&name, &schema, &unsupported, declared)?;
        // The declaration's order is the one the script sees; nullability comes from the
        // files, which know whether they hold nulls.
        let fields = declared
            .fields
            .iter()
            .filter_map(|d| schema.field(&d.name).cloned())
            .collect();
        schema = Schema::new(fields);
    }
    let unique = match schemas.as_slice() {
        [only] => only.unique.clone(),
        _ => Vec::new(),
    };
    Ok(TableInfo {
        name,
        schema,
        rows,
        format: TableFormat::Parquet {
            files,
            partitions,
            file_rows: schemas.iter().map(|s| s.rows).collect(),
        },
        unsupported,
        statistics,
        unique,
    })
}

/// Whole-table statistics of the columns whose footers carry them in every file.
fn combine_footer_stats(
    schema: &Schema,
    files: &[ParquetFileSchema],
    rows: u64,
) -> BTreeMap<String, ColumnStats> {
    let mut combined = BTreeMap::new();
    'columns: for (index, field) in schema.fields.iter().enumerate() {
        let mut min = Value::Null;
        let mut max = Value::Null;
        let mut nulls = 0;
        for file in files {
            let Some(Some(stats)) = file.statistics.get(index) else {
                continue 'columns;
            };
            nulls += stats.nulls;
            let (Some(lo), Some(hi)) = (
                extreme(&min, &stats.min, std::cmp::Ordering::Less),
                extreme(&max, &stats.max, std::cmp::Ordering::Greater),
            ) else {
                continue 'columns;
            };
            min = lo;
            max = hi;
        }
        combined.insert(
            field.name.clone(),
            ColumnStats {
                rows,
                nulls,
                min,
                max,
                dictionary_size: None,
            },
        );
    }
    combined
}

/// Whichever of `a` and `b` compares as `wanted` (`Null` yields); `None` when they do not
/// compare.
fn extreme(a: &Value, b: &Value, wanted: std::cmp::Ordering) -> Option<Value> {
    let ordering = match (a, b) {
        (Value::Null, _) => return Some(b.clone()),
        (_, Value::Null) => return Some(a.clone()),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Decimal(x, s), Value::Decimal(y, t)) if s == t => x.cmp(y),
        (Value::WideDecimal(x, s), Value::WideDecimal(y, t)) if s == t => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y)?,
        _ => return None,
    };
    Some(if ordering == wanted {
        a.clone()
    } else {
        b.clone()
    })
}

/// A declared schema agrees with the files when both name the same columns with the same types.
fn check_declared(
    table: &str,
    found: &Schema,
    unsupported: &[(String, String)],
    declared: &Schema,
) -> Result<(), StorageError> {
    let mismatch = |message: String| StorageError::SchemaMismatch {
        table: table.into(),
        message,
    };
    for field in &declared.fields {
        if let Some((_, reason)) = unsupported.iter().find(|(n, _)| *n == field.name) {
            return Err(mismatch(format!(
                "declared column `{}` cannot be read from the files: {reason}",
                field.name
            )));
        }
    }
    let missing: Vec<&str> = declared
        .names()
        .filter(|name| found.field(name).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(mismatch(format!(
            "declared columns missing from the files: {}",
            missing.join(", ")
        )));
    }
    let undeclared: Vec<&str> = found
        .names()
        .filter(|name| declared.field(name).is_none())
        .collect();
    if !undeclared.is_empty() {
        return Err(mismatch(format!(
            "columns in the files but not declared: {}",
            undeclared.join(", ")
        )));
    }
    for field in &declared.fields {
        if let Some(file_field) = found.field(&field.name) {
            if file_field.ty != field.ty {
                return Err(mismatch(format!(
                    "column `{}` is declared {} but the files hold {}",
                    field.name, field.ty, file_field.ty
                )));
            }
        }
    }
    Ok(())
}
