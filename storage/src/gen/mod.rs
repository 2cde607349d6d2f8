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
pub mod tpch;
pub mod wisconsin;

use std::sync::Arc;

use crate::column::Dictionary;
use crate::parquet_write::{WriteColumn, WriteValues};
use crate::types::DecimalType;

pub use generation::{check_generation, ensure_generated, holds_generation, Dataset};
pub use ssb::{generate_ssb, ssb_schemas, GenSummary, GeneratedTable, SsbScale};

/// One generated column, owned until it is written.
pub(crate) enum GenColumn {
    Int(Vec<i32>),
    Long(Vec<i64>),
    Float(Vec<f32>),
    /// Raw decimal values.
    Decimal(Vec<i64>, DecimalType),
    /// Days since 1970-01-01.
    Date(Vec<i32>),
    /// One string per row (names, addresses: mostly distinct).
    Text(Vec<String>),
    /// One string per row, borrowed from a generator's fixed text.
    Words(Vec<&'static str>),
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
            GenColumn::Long(values) => WriteValues::I64(values),
            GenColumn::Float(values) => WriteValues::F32(values),
            GenColumn::Decimal(values, decimal) => WriteValues::Decimal(values, *decimal),
            GenColumn::Date(values) => WriteValues::Date(values),
            GenColumn::Text(values) => WriteValues::Text(values),
            GenColumn::Words(values) => WriteValues::Words(values),
            GenColumn::Codes { codes, dictionary } => WriteValues::Codes { codes, dictionary },
        })
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            GenColumn::Int(values) | GenColumn::Date(values) => values.len(),
            GenColumn::Long(values) | GenColumn::Decimal(values, _) => values.len(),
            GenColumn::Float(values) => values.len(),
            GenColumn::Text(values) => values.len(),
            GenColumn::Words(values) => values.len(),
            GenColumn::Codes { codes, .. } => codes.len(),
        }
    }

    /// Appends the rows of `more`, a column of the same kind (a later part of one table).
    pub(crate) fn append(&mut self, more: GenColumn) {
        match (self, more) {
            (GenColumn::Int(a), GenColumn::Int(mut b))
            | (GenColumn::Date(a), GenColumn::Date(mut b)) => a.append(&mut b),
            (GenColumn::Long(a), GenColumn::Long(mut b))
            | (GenColumn::Decimal(a, _), GenColumn::Decimal(mut b, _)) => a.append(&mut b),
            (GenColumn::Float(a), GenColumn::Float(mut b)) => a.append(&mut b),
            (GenColumn::Text(a), GenColumn::Text(mut b)) => a.append(&mut b),
            (GenColumn::Words(a), GenColumn::Words(mut b)) => a.append(&mut b),
            (GenColumn::Codes { codes: a, .. }, GenColumn::Codes { codes: mut b, .. }) => {
                a.append(&mut b)
            }
            (column, more) => unreachable!(
                "parts of one table hold the same kinds of columns ({} and {} rows)",
                column.len(),
                more.len()
            ),
        }
    }
}
