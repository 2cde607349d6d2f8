//! Tessera's data layer: types and schemas, columns in memory with their statistics and sorted
//! string dictionaries, the catalog of a data directory or file (Parquet files or folders, CSV,
//! SSB `.tbl` files) that loads only the columns asked for, and the built-in data generators.
//!
//! | module | owns |
//! |---|---|
//! | `types`, `column`, `date`, `decimal` | data types and schemas; columns, dictionaries, statistics; dates as day numbers; exact decimals' text and conversions |
//! | `catalog` | the tables of a data directory, schema checks, the column cache |
//! | `parquet_read` / `parquet_write` | Parquet footers and columns in; whole tables out |
//! | `tbl` | dbgen's pipe-separated `.tbl` files, read with a declared schema |
//! | `csv_read`, `ipc_read` | CSV and TSV files (types inferred or declared) and Arrow IPC files, read with arrow-rs |
//! | `hive` | hive-partitioned folders: the `key=value` folders' columns |
//! | `arrow_columns` | Arrow record batches into columns: the types Tessera reads, nulls as validity |
//! | `string_chunks` | strings read in parallel chunks, merged into one sorted dictionary |
//! | `gen` | the SSB and Wisconsin generators (deterministic, parallel, written as Parquet), and the record of a generation that its folder keeps |
//! | `compress` | the integer columns' schemes (GPU-FOR, GPU-DFOR, `pack`, `dict`): CPU encoders, the choice between them, a reference decoder, and how a kernel reads each (`Scheme::reading`) |
//! | `packed` | the catalog's choice of encoding per column and its cache of packed columns |
//! | `spill` | where a run's large column buffers live: memory, or mapped unnamed files in the cache |
//! | `error`, `progress` | one-line errors naming the file or table; progress of long work |
//!
//! It knows nothing of the query language or of GPUs.

mod arrow_columns;
pub mod cache;
pub mod catalog;
pub mod column;
pub mod compress;
mod csv_read;
pub mod date;
pub mod decimal;
pub mod derived;
pub mod error;
pub mod gen;
pub mod hive;
mod ipc_read;
pub mod memory;
pub mod packed;
pub mod parquet_read;
pub mod parquet_write;
pub mod prepared;
pub mod progress;
pub mod spill;
mod string_chunks;
pub mod tbl;
pub mod types;
pub mod values;

pub use catalog::{Catalog, TableFormat, TableInfo};
pub use column::{Column, ColumnData, ColumnStats, Dictionary, DictionaryBuilder};
pub use error::StorageError;
pub use gen::{generate_ssb, ssb_schemas, GenSummary};
pub use parquet_write::{write_parquet, write_parquet_columns, WriteColumn, WriteValues};
pub use progress::{NoProgress, Progress};
pub use types::{DataType, DecimalType, Field, Schema, Value};
pub use values::Values;

#[cfg(test)]
mod tests;
