//! The catalog's bit-packed copies of integer columns: which scheme each column read by a kernel
//! takes under the catalog's [`Compression`], and the encodings themselves, made from the loaded
//! column on first use and cached beside it.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::catalog::{lock, Catalog, ColumnFacts, TableFormat};
use crate::column::Column;
use crate::compress::{self, Compression, Encoded, Scheme};
use crate::error::StorageError;
use crate::prepared::{Found, PreparedEncoding};
use crate::spill::Buffers;
use crate::types::{DataType, Field};

/// Bytes of 4-byte column values a cold run reads into memory at once to encode them (all of
/// SSB's lineorder columns a query reads at SF 20, one at SF 100); a column larger than this
/// alone is read into files ([`crate::spill`]).
pub const COLD_BATCH_BYTES: u64 = 3 << 30;

/// A column's scheme under the catalog's setting, with its encoding unless the scheme is `none`.
type StoredChoice = (Scheme, Option<Arc<Encoded>>);

/// Encodings made so far, and the scheme `auto` chose per column.
#[derive(Default)]
pub(crate) struct PackedColumns {
    chosen: HashMap<(String, String), Scheme>,
    encoded: HashMap<(String, String, Scheme), Arc<Encoded>>,
}

impl PackedColumns {
    /// The scheme `auto` chose for `table.column`, once chosen.
    pub(crate) fn chosen(&self, table: &str, column: &str) -> Option<Scheme> {
        self.chosen
            .get(&(table.to_string(), column.to_string()))
            .copied()
    }

    /// Drops the encodings of `table.column` (the choice stays).
    pub(crate) fn forget(&mut self, table: &str, column: &str) {
        self.encoded
            .retain(|(t, c, _), _| !(t == table && c == column));
    }
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
        self.table(table)
            .ok_or_else(|| StorageError::UnknownTable(table.into()))?;
        let ty = self
            .field(table, column)
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
        if let Some((scheme, _)) = self.prepared_encoding(table, column)? {
            return Ok(scheme);
        }
        let loaded = self.column(table, column)?;
        let values = int_values(table, column, &loaded.data)?;
        let best = compress::choose_in(values, &self.buffers())
            .map_err(|e| unencodable(table, column, e))?;
        self.keep_facts(table, column, &loaded);
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
        // The encoding the setting gives: from the store, or, under `auto`, the choice made
        // (which encodes the column in the chosen scheme only).
        if self.compression.fixed().is_none_or(|fixed| fixed == scheme) {
            if let Some((found, Some(prepared))) = self.prepared_encoding(table, column)? {
                if found == scheme {
                    return Ok(prepared);
                }
            }
            if self.compression == Compression::Auto && self.scheme(table, column)? == scheme {
                if let Some(found) = lock(&self.packed).encoded.get(&key) {
                    return Ok(Arc::clone(found));
                }
            }
        }
        let loaded = self.column(table, column)?;
        let values = int_values(table, column, &loaded.data)?;
        // Encoding runs unlocked, so other columns encode meanwhile; two threads asking for the
        // same column at once both encode it, and the first one's copy is kept.
        let encoded = compress::try_encode_in(values, scheme, &self.buffers())
            .map_err(|e| unencodable(table, column, e))?;
        self.keep_facts(table, column, &loaded);
        let mut packed = lock(&self.packed);
        Ok(Arc::clone(
            packed
                .encoded
                .entry(key)
                .or_insert_with(|| Arc::new(encoded)),
        ))
    }
}

impl Catalog {
    /// Settles the encodings of several columns of one table together, as kernels will read
    /// them: the columns neither prepared nor encoded yet are loaded in one pass over the
    /// table's files, then encoded on all cores at once (under `auto`, each in the scheme it
    /// chooses), where asking column by column would do one at a time.
    pub fn encode_columns(&self, table: &str, columns: &[&str]) -> Result<(), StorageError> {
        if self.compression == Compression::NONE {
            return Ok(());
        }
        let mut packable_columns = Vec::new();
        for &column in columns {
            if packable(self.stored_field(table, column)?.ty) && !packable_columns.contains(&column)
            {
                packable_columns.push(column);
            }
        }
        let mut unsettled = Vec::new();
        for &column in &packable_columns {
            let chosen = lock(&self.packed).chosen(table, column).is_some();
            if !chosen && self.prepared_encoding(table, column)?.is_none() {
                unsettled.push(column);
            }
        }
        if unsettled.is_empty() {
            return Ok(());
        }
        // Each column's encoding under the setting, made here: the scheme it takes.
        let settle = |column: &&str| match self.compression.fixed() {
            Some(scheme) => self.packed(table, column, scheme).map(|_| scheme),
            None => self.scheme(table, column),
        };
        let info = self.table(table);
        // A table held in memory (a stage's result) cannot be read again: its columns stay.
        let rereadable = info.is_some_and(|t| !matches!(t.format, TableFormat::Memory));
        let files = self.buffers();
        let spilling = rereadable && !matches!(files, Buffers::Memory);
        let column_bytes = info.map_or(0, |t| t.rows) * 4;
        // Columns are read in batches of at most `COLD_BATCH_BYTES` (at least one column a
        // batch), in memory unless one column alone is larger. While this catalog prepares
        // columns, each one encoded is dropped at once (the entry and the encoding are what
        // later reads use), so a cold run's memory is bounded by one batch whatever the scale.
        let per_batch = if spilling {
            (COLD_BATCH_BYTES / column_bytes.max(1)).max(1) as usize
        } else {
            unsettled.len()
        };
        for batch in unsettled.chunks(per_batch) {
            let buffers = if batch.len() as u64 * column_bytes <= COLD_BATCH_BYTES {
                &Buffers::Memory
            } else {
                &files
            };
            self.columns_into(table, batch, self.progress.as_ref(), buffers)?;
            let schemes: Vec<Scheme> = batch.par_iter().map(settle).collect::<Result<_, _>>()?;
            if !spilling {
                continue;
            }
            for (column, scheme) in batch.iter().zip(schemes) {
                if scheme != Scheme::None && !self.stored_field(table, column)?.nullable {
                    self.unload(table, column);
                }
            }
        }
        Ok(())
    }

    /// Records what an entry of `table.column` will say of it (statistics, dictionary, whether
    /// its values are unique, as far as known), from the loaded column, while this catalog
    /// prepares columns: a column dropped once encoded is then never read again for them.
    fn keep_facts(&self, table: &str, column: &str, loaded: &Column) {
        let Some(prepared) = self.writable_store() else {
            return;
        };
        let key = (table.to_string(), column.to_string());
        let unique = lock(&self.unique_values).get(&key).copied().flatten();
        let facts = ColumnFacts {
            stats: loaded.stats.clone(),
            dictionary: loaded.data.dictionary().cloned(),
            unique,
        };
        let mut known = lock(&prepared.facts);
        if !matches!(known.get(&key), Some(Some(_))) {
            known.insert(key, Some(facts));
        }
    }

    /// A column's encoding that a kernel reads: [`Catalog::packed`], and when it is the one the
    /// catalog's setting gives and the prepared store holds no fresh entry of it, the encoding
    /// written there (in the background; see [`Catalog::finish_preparing`]).
    pub fn kernel_packed(
        &self,
        table: &str,
        column: &str,
        scheme: Scheme,
    ) -> Result<Arc<Encoded>, StorageError> {
        let encoded = self.packed(table, column, scheme)?;
        if self.writable_store().is_some() {
            let settles = match self.compression.fixed() {
                Some(fixed) => fixed == scheme,
                None => self.scheme(table, column)? == scheme,
            };
            if settles && scheme != Scheme::None {
                self.prepare_encoding(table, column, scheme, Some(&encoded))?;
            }
        }
        Ok(encoded)
    }

    /// Writes `encoded`, the encoding of `table.column` under the catalog's setting, to the
    /// store unless it came from there or is being written.
    pub(crate) fn prepare_encoding(
        &self,
        table: &str,
        column: &str,
        scheme: Scheme,
        encoded: Option<&Arc<Encoded>>,
    ) -> Result<(), StorageError> {
        let Some(prepared) = self.writable_store() else {
            return Ok(());
        };
        if self.derived(table, column).is_some() {
            return Ok(());
        }
        let compression = self.compression;
        if !prepared.settle(table, column, compression.name()) {
            return Ok(());
        }
        let Some(sources) = self.sources(prepared, table)? else {
            return Ok(());
        };
        let field = self.stored_field(table, column)?;
        let key = (table.to_string(), column.to_string());
        let loaded = self
            .cached(table, &[column])
            .and_then(|mut found| found.pop());
        let kept = lock(&prepared.facts).get(&key).cloned().flatten();
        let (stats, dictionary) = match (loaded, kept) {
            (Some(loaded), _) => (loaded.stats.clone(), loaded.data.dictionary().cloned()),
            (None, Some(facts)) => (facts.stats, facts.dictionary),
            (None, None) => {
                let loaded = self.column(table, column)?;
                (loaded.stats.clone(), loaded.data.dictionary().cloned())
            }
        };
        let unique = lock(&self.unique_values).get(&key).copied().flatten();
        let store = prepared.store.clone();
        let (table, encoded) = (table.to_string(), encoded.cloned());
        prepared.spawn(move || {
            store
                .write_encoding(
                    &table,
                    &field,
                    compression,
                    scheme,
                    encoded.as_deref(),
                    &stats,
                    dictionary.as_deref(),
                    unique,
                    &sources,
                )
                .map_err(|e| format!("cannot prepare {table}.{}: {e}", field.name))
        });
        Ok(())
    }

    /// What a prepared encoding of `table.column` under the catalog's setting says of the
    /// column, reading the entry the first time (and keeping its encoding for kernels).
    pub(crate) fn prepared_facts(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<ColumnFacts>, StorageError> {
        let Some(prepared) = &self.prepared else {
            return Ok(None);
        };
        let key = (table.to_string(), column.to_string());
        if let Some(facts) = lock(&prepared.facts).get(&key) {
            return Ok(facts.clone());
        }
        self.prepared_encoding(table, column)?;
        Ok(lock(&prepared.facts).entry(key).or_insert(None).clone())
    }

    /// The encoding of `table.column` under the catalog's setting, from the prepared store when
    /// it holds a fresh one (registered then as if made here).
    fn prepared_encoding(
        &self,
        table: &str,
        column: &str,
    ) -> Result<Option<StoredChoice>, StorageError> {
        let Some(prepared) = &self.prepared else {
            return Ok(None);
        };
        if self.compression == Compression::NONE || self.derived(table, column).is_some() {
            return Ok(None);
        }
        let field = self.stored_field(table, column)?;
        if !packable(field.ty) {
            return Ok(None);
        }
        let Some(sources) = self.sources(prepared, table)? else {
            return Ok(None);
        };
        let rows = self.table(table).map_or(0, |t| t.rows);
        let found = prepared
            .store
            .encoding(table, &field, self.compression, &sources, rows);
        let PreparedEncoding {
            scheme,
            encoded,
            stats,
            dictionary,
            unique,
        } = match found {
            Found::Fresh(found) => found,
            Found::Missing => return Ok(None),
            Found::Corrupt(reason) => {
                prepared.warn(reason);
                return Ok(None);
            }
        };
        // A setting of one scheme must find that scheme stored.
        if self.compression.fixed().is_some_and(|s| s != scheme) {
            return Ok(None);
        }
        let key = (table.to_string(), column.to_string());
        prepared.settle(table, column, self.compression.name());
        lock(&prepared.facts).insert(
            key.clone(),
            Some(ColumnFacts {
                stats,
                dictionary,
                unique,
            }),
        );
        let mut packed = lock(&self.packed);
        if self.compression == Compression::Auto {
            packed.chosen.insert(key, scheme);
        }
        if let Some(encoded) = &encoded {
            packed.encoded.insert(
                (table.to_string(), column.to_string(), scheme),
                Arc::clone(encoded),
            );
        }
        Ok(Some((scheme, encoded)))
    }

    fn stored_field(&self, table: &str, column: &str) -> Result<Field, StorageError> {
        self.table(table)
            .ok_or_else(|| StorageError::UnknownTable(table.into()))?;
        self.field(table, column)
            .ok_or_else(|| StorageError::UnknownColumn {
                table: table.into(),
                column: column.into(),
            })
    }
}

fn unencodable(table: &str, column: &str, error: compress::CompressError) -> StorageError {
    StorageError::UnsupportedColumn {
        table: table.into(),
        column: column.into(),
        reason: error.to_string(),
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
