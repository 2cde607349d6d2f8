//! The catalog's bit-packed copies of integer columns: which scheme each column read by a kernel
//! takes under the catalog's [`Compression`], and the encodings themselves, made from the loaded
//! column on first use and cached beside it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::{lock, Catalog};
use crate::compress::{self, Compression, Encoded, Scheme};
use crate::error::StorageError;
use crate::types::DataType;

/// Encodings made so far, and the scheme `auto` chose per column.
#[derive(Default)]
pub(crate) struct PackedColumns {
    chosen: HashMap<(String, String), Scheme>,
    encoded: HashMap<(String, String, Scheme), Arc<Encoded>>,
}

/// Whether columns of `ty` can be bit-packed: the 4-byte integers (dates and string codes
/// included).
pub fn packable(ty: DataType) -> bool {
    matches!(ty, DataType::I32 | DataType::Date | DataType::Str)
}

impl Catalog {
    /// The same catalog, encoding the integer columns kernels read as `compression` says.
    pub fn with_compression(mut self, compression: Compression) -> Catalog {
        self.compression = compression;
        self
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The scheme kernels read `table.column` in. Under `auto` this encodes the column in every
    /// scheme (loading it first) and keeps the smallest; columns that cannot be packed are
    /// always plain.
    pub fn scheme(&self, table: &str, column: &str) -> Result<Scheme, StorageError> {
        let ty = self
            .table(table)
            .ok_or_else(|| StorageError::UnknownTable(table.into()))?
            .schema
            .field(column)
            .ok_or_else(|| StorageError::UnknownColumn {
                table: table.into(),
                column: column.into(),
            })?
            .ty;
        if !packable(ty) {
            return Ok(Scheme::None);
        }
        if let Some(scheme) = self.compression.fixed() {
            return Ok(scheme);
        }
        let key = (table.to_string(), column.to_string());
        if let Some(&scheme) = lock(&self.packed).chosen.get(&key) {
            return Ok(scheme);
        }
        let loaded = self.column(table, column)?;
        let values = int_values(table, column, &loaded.data)?;
        let best = compress::choose(values);
        let scheme = best.scheme;
        let mut packed = lock(&self.packed);
        packed.chosen.insert(key, scheme);
        if scheme != Scheme::None {
            packed
                .encoded
                .insert((table.into(), column.into(), scheme), Arc::new(best));
        }
        Ok(scheme)
    }

    /// `table.column` encoded in `scheme` (not [`Scheme::None`]), made on first use.
    pub fn packed(
        &self,
        table: &str,
        column: &str,
        scheme: Scheme,
    ) -> Result<Arc<Encoded>, StorageError> {
        let key = (table.to_string(), column.to_string(), scheme);
        if let Some(found) = lock(&self.packed).encoded.get(&key) {
            return Ok(Arc::clone(found));
        }
        let loaded = self.column(table, column)?;
        let values = int_values(table, column, &loaded.data)?;
        // Encoding runs unlocked, so other columns encode meanwhile; two threads asking for the
        // same column at once both encode it, and the first one's copy is kept.
        let encoded =
            compress::try_encode(values, scheme).map_err(|e| StorageError::UnsupportedColumn {
                table: table.into(),
                column: column.into(),
                reason: e.to_string(),
            })?;
        let mut packed = lock(&self.packed);
        Ok(Arc::clone(
            packed
                .encoded
                .entry(key)
                .or_insert_with(|| Arc::new(encoded)),
        ))
    }
}

fn int_values<'c>(
    table: &str,
    column: &str,
    data: &'c crate::ColumnData,
) -> Result<&'c [i32], StorageError> {
    data.as_i32()
        .ok_or_else(|| StorageError::UnsupportedColumn {
            table: table.into(),
            column: column.into(),
            reason: format!("a {} column cannot be bit-packed", data.ty().name()),
        })
}
