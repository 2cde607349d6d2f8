//! Built-in data generators: deterministic, parallel, written as Parquet, and safe with the
//! folder they write into. A generation replaces only its own tables, each written whole under
//! a hidden temporary name created exclusively in the folder and renamed into place when
//! complete; every other file is left alone. A hidden record per dataset says whether the
//! generation in a folder ran to the end: [`check_generation`] (which the catalog calls)
//! refuses a folder whose generation was interrupted, and [`holds_generation`] tells a data
//! cache whether a folder can be reused. `generation` owns all of that.

pub(crate) mod generation;
mod rng;
pub mod ssb;
mod ssb_dimensions;
mod ssb_lineorder;
mod ssb_text;
pub mod wisconsin;

use std::sync::Arc;

use crate::column::Dictionary;
use crate::parquet_write::{WriteColumn, WriteValues};

pub use generation::{check_generation, ensure_generated, holds_generation, Dataset};
pub use ssb::{generate_ssb, ssb_schemas, GenSummary, GeneratedTable, SsbScale};

/// One generated column, owned until it is written.
pub(crate) enum GenColumn {
    Int(Vec<i32>),
    Float(Vec<f32>),
    /// One string per row (names, addresses: mostly distinct).
    Text(Vec<String>),
    /// Codes into a small fixed dictionary (priorities, ship modes).
    Codes {
        codes: Vec<i32>,
        dictionary: Arc<Dictionary>,
    },
}

impl GenColumn {
    pub(crate) fn to_write(&self) -> WriteColumn<'_> {
        WriteColumn::new(match self {
            GenColumn::Int(values) => WriteValues::I32(values),
            GenColumn::Float(values) => WriteValues::F32(values),
            GenColumn::Text(values) => WriteValues::Text(values),
            GenColumn::Codes { codes, dictionary } => WriteValues::Codes { codes, dictionary },
        })
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            GenColumn::Int(values) => values.len(),
            GenColumn::Float(values) => values.len(),
            GenColumn::Text(values) => values.len(),
            GenColumn::Codes { codes, .. } => codes.len(),
        }
    }
}
