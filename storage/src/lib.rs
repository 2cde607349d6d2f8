//! Tessera's data layer: types and schemas, columns in memory with their statistics and sorted
//! string dictionaries, the catalog of a data directory (Parquet files or folders, SSB `.tbl`
//! files) that loads only the columns asked for, and the built-in data generators.
//!
//! It knows nothing of the query language or of GPUs.

pub mod catalog;
pub mod column;
pub mod date;
pub mod error;
pub mod gen;
pub mod parquet_read;
pub mod parquet_write;
pub mod progress;
mod string_chunks;
pub mod tbl;
pub mod types;

pub use catalog::{Catalog, TableInfo};
pub use column::{Column, ColumnData, ColumnStats, Dictionary, DictionaryBuilder};
pub use error::StorageError;
pub use types::{DataType, Field, Schema, Value};

#[cfg(test)]
mod tests;
