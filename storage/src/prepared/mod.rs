//! Prepared columns: what kernels read of a column — its values, validity and string
//! dictionary, or its encoding under a `--compress` setting (scheme, words, block starts,
//! dictionary) — with its statistics, stored in page-aligned, checksummed files that later runs
//! map and use as they are: no Parquet decoding and no encoding again.
//!
//! A data folder's entries live in Tessera's cache folder (`prepared/NAME-HASH/`, keyed by the
//! folder's absolute path), or beside the data in `DIR/.tessera/` when `tessera prepare
//! --in-place` put them there (a hidden folder, which the catalog does not take for a table);
//! the second is read first. Each entry records the identity of the files it was made from
//! ([`identity`]) and the entry format: an entry whose files changed is stale and is rebuilt,
//! never read; one whose checksum fails is reported and rebuilt. Entries are written whole and
//! renamed into place, so concurrent runs on the same data at worst prepare a column twice.
//!
//! | file | holds |
//! |---|---|
//! | `TABLE/COLUMN.values.tqp` | sections `values`, `validity` (when nullable), `dictionary.text` and `dictionary.ends` (strings) |
//! | `TABLE/COLUMN.SETTING.tqp` | the column's encoding under `--compress SETTING`: sections `words` (with spare zero words), `starts`, `reference`, and a string column's dictionary |

pub mod entry;
pub mod identity;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use entry::{map_entry, EntryError, EntryMeta, MappedEntry, SectionBytes, StoredEncoding};
use identity::SourceFile;

use crate::cache::{self, CacheFolder};
use crate::column::{Column, ColumnData, ColumnStats, Dictionary};
use crate::compress::{self, Compression, Encoded, Scheme};
use crate::types::{DataType, Field};

/// The folder beside the data that `tessera prepare --in-place` writes.
pub const IN_PLACE: &str = ".tessera";
const EXTENSION: &str = "tqp";
/// Zero bytes kept after an encoding's words, for decoders that load past the last value: more
/// than any decoder reads (the GPU's read four words), so the words are copied in place.
const SPARE_BYTES: usize = 64;

/// Where a data folder's prepared entries are read from and written to.
#[derive(Clone, Debug)]
pub struct PreparedStore {
    /// Folders read, in order.
    read: Vec<StoreFolder>,
    /// The folder new entries go to, when there is one.
    write: Option<StoreFolder>,
}

#[derive(Clone, Debug)]
struct StoreFolder {
    path: PathBuf,
    /// Entries of the user's cache must be private to the user; entries beside shared data
    /// are data (never code) and are read whoever wrote them.
    private: bool,
    /// Whether this folder is the user's cache, whose size budget writing keeps.
    cache: Option<CacheFolder>,
}

/// A column's encoding read from an entry, with what the entry knows of the column.
pub struct PreparedEncoding {
    /// The scheme the setting gives the column (`none`: kernels read its values).
    pub scheme: Scheme,
    /// The encoding, unless the scheme is `none`.
    pub encoded: Option<Arc<Encoded>>,
    pub stats: ColumnStats,
    pub dictionary: Option<Arc<Dictionary>>,
    pub unique: Option<bool>,
}

/// What becomes of an entry that was looked for.
pub enum Found<T> {
    Fresh(T),
    /// No entry, or a stale one: prepare it.
    Missing,
    /// A damaged entry (the reason): prepare it again, after saying so.
    Corrupt(String),
}

impl PreparedStore {
    /// The store of the data folder `data`: entries beside the data when there are any, then the
    /// user's cache; new entries go to the cache (none when there is no usable cache).
    pub fn for_data(data: &Path) -> PreparedStore {
        let cache = CacheFolder::open_default();
        // Data given as one file has no folder of its own to hold entries beside it.
        let mut read: Vec<StoreFolder> = (!data.is_file())
            .then(|| StoreFolder {
                path: data.join(IN_PLACE),
                private: false,
                cache: None,
            })
            .into_iter()
            .collect();
        let write = cache.and_then(|cache| {
            let folder = cache_folder_for(&cache, data)?;
            Some(StoreFolder {
                path: folder,
                private: true,
                cache: Some(cache),
            })
        });
        read.extend(write.clone());
        PreparedStore { read, write }
    }

    /// The store that writes beside the data (`tessera prepare --in-place`), reading only there.
    pub fn in_place(data: &Path) -> PreparedStore {
        let folder = StoreFolder {
            path: data.join(IN_PLACE),
            private: false,
            cache: None,
        };
        PreparedStore {
            read: vec![folder.clone()],
            write: Some(folder),
        }
    }

    /// The entries held of `table.column` (fresh or not), as (kind, bytes), in every folder
    /// read: what `tessera stats` reports.
    pub fn entries_of(&self, table: &str, column: &str) -> Vec<(String, u64)> {
        let prefix = format!("{}.", file_name(column));
        let suffix = format!(".{EXTENSION}");
        let mut found = Vec::new();
        for folder in &self.read {
            let Ok(listed) = std::fs::read_dir(folder.path.join(file_name(table))) else {
                continue;
            };
            for entry in listed.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let kind = name
                    .strip_prefix(&prefix)
                    .and_then(|rest| rest.strip_suffix(&suffix));
                if let (Some(kind), Ok(metadata)) = (kind, entry.metadata()) {
                    if metadata.is_file() && !kind.contains('.') {
                        found.push((kind.to_string(), metadata.len()));
                    }
                }
            }
        }
        found.sort();
        found
    }

    /// Where a run preparing columns here makes its large temporary buffers
    /// ([`crate::spill`]): the cache's folder when entries go to the cache, else the folder
    /// entries go to; `None` when none is written.
    pub fn scratch_folder(&self) -> Option<PathBuf> {
        let folder = self.write.as_ref()?;
        Some(match &folder.cache {
            Some(cache) => cache.root().to_path_buf(),
            None => folder.path.clone(),
        })
    }

    /// Where new entries go, if anywhere.
    pub fn write_folder(&self) -> Option<&Path> {
        self.write.as_ref().map(|f| f.path.as_path())
    }

    /// Every folder read.
    pub fn folders(&self) -> impl Iterator<Item = &Path> {
        self.read.iter().map(|f| f.path.as_path())
    }

    fn find(
        &self,
        table: &str,
        column: &str,
        kind: &str,
        check: impl Fn(&EntryMeta) -> Result<(), EntryError>,
    ) -> Found<MappedEntry> {
        let mut corrupt = None;
        for folder in &self.read {
            let path = entry_path(&folder.path, table, column, kind);
            let file = if folder.private {
                cache::open_entry(&path)
            } else {
                open_shared_entry(&path)
            };
            let Some(file) = file else { continue };
            let mapped = map_entry(&file).and_then(|entry| {
                check(&entry.meta)?;
                entry.verify()?;
                Ok(entry)
            });
            match mapped {
                Ok(entry) => return Found::Fresh(entry),
                Err(EntryError::Stale(_)) => {}
                Err(EntryError::Corrupt(reason)) => {
                    corrupt.get_or_insert(format!("{}: {reason}", path.display()));
                }
            }
        }
        corrupt.map_or(Found::Missing, Found::Corrupt)
    }

    /// The prepared values of `table.column`, if a fresh entry holds them.
    pub fn values(
        &self,
        table: &str,
        field: &Field,
        sources: &[SourceFile],
        rows: u64,
    ) -> Found<(Column, Option<bool>)> {
        let found = self.find(table, &field.name, "values", |meta| {
            same_source(meta, table, &field.name, "values", sources, field.ty, rows)
        });
        match found {
            Found::Fresh(entry) => match read_column(&entry) {
                Ok(column) => Found::Fresh((column, entry.meta.unique)),
                Err(error) => Found::Corrupt(error.to_string()),
            },
            Found::Missing => Found::Missing,
            Found::Corrupt(reason) => Found::Corrupt(reason),
        }
    }

    /// The prepared encoding of `table.column` under `compression`, if a fresh entry holds it.
    pub fn encoding(
        &self,
        table: &str,
        field: &Field,
        compression: Compression,
        sources: &[SourceFile],
        rows: u64,
    ) -> Found<PreparedEncoding> {
        let kind = compression.name();
        let found = self.find(table, &field.name, kind, |meta| {
            same_source(meta, table, &field.name, kind, sources, field.ty, rows)
        });
        match found {
            Found::Fresh(entry) => match read_encoding(&entry) {
                Ok(prepared) => Found::Fresh(prepared),
                Err(error) => Found::Corrupt(error.to_string()),
            },
            Found::Missing => Found::Missing,
            Found::Corrupt(reason) => Found::Corrupt(reason),
        }
    }

    /// Stores `column` as the prepared values of `table.column`.
    pub fn write_values(
        &self,
        table: &str,
        name: &str,
        column: &Column,
        unique: Option<bool>,
        sources: &[SourceFile],
    ) -> std::io::Result<()> {
        let meta = meta_for(
            table,
            name,
            "values",
            column.ty(),
            column.len(),
            &column.stats,
            unique,
            sources,
        );
        let validity = column.validity.as_ref().map(|v| bool_bytes(v));
        let dictionary = column.data.dictionary().map(|d| dictionary_sections(d));
        let mut sections = vec![SectionBytes {
            name: "values",
            bytes: column.data.as_bytes(),
            spare: 0,
        }];
        if let Some(bytes) = validity {
            sections.push(SectionBytes {
                name: "validity",
                bytes,
                spare: 0,
            });
        }
        if let Some((text, ends)) = &dictionary {
            push_dictionary(&mut sections, text, ends);
        }
        self.write_sections(table, name, "values", meta, &sections)
    }

    /// Stores the encoding of `table.column` under `compression`: `scheme`, and unless that is
    /// `none`, `encoded`; with what is known of the column (its statistics, string dictionary,
    /// whether its values are unique).
    #[allow(clippy::too_many_arguments)]
    pub fn write_encoding(
        &self,
        table: &str,
        field: &Field,
        compression: Compression,
        scheme: Scheme,
        encoded: Option<&Encoded>,
        stats: &ColumnStats,
        dictionary: Option<&Dictionary>,
        unique: Option<bool>,
        sources: &[SourceFile],
    ) -> std::io::Result<()> {
        let kind = compression.name();
        let rows = stats.rows as usize;
        let mut meta = meta_for(
            table,
            &field.name,
            kind,
            field.ty,
            rows,
            stats,
            unique,
            sources,
        );
        meta.encoding = Some(StoredEncoding {
            scheme,
            len: encoded.map_or(rows, |e| e.len) as u64,
            width: encoded.map_or(0, |e| e.width),
        });
        let dictionary = dictionary.map(dictionary_sections);
        let mut sections = Vec::new();
        if let Some(encoded) = encoded.filter(|_| scheme != Scheme::None) {
            sections.extend([
                SectionBytes {
                    name: "words",
                    bytes: word_bytes(&encoded.data),
                    spare: SPARE_BYTES,
                },
                SectionBytes {
                    name: "starts",
                    bytes: word_bytes(&encoded.block_starts),
                    spare: 0,
                },
                SectionBytes {
                    name: "reference",
                    bytes: int_bytes(&encoded.dictionary),
                    spare: 0,
                },
            ]);
        }
        if let Some((text, ends)) = &dictionary {
            push_dictionary(&mut sections, text, ends);
        }
        self.write_sections(table, &field.name, kind, meta, &sections)
    }

    fn write_sections(
        &self,
        table: &str,
        column: &str,
        kind: &str,
        meta: EntryMeta,
        sections: &[SectionBytes<'_>],
    ) -> std::io::Result<()> {
        let Some(folder) = &self.write else {
            return Ok(());
        };
        let table_folder = folder.path.join(file_name(table));
        if folder.private {
            if let Some(cache) = &folder.cache {
                let relative = table_folder
                    .strip_prefix(cache.root())
                    .map_err(std::io::Error::other)?;
                cache
                    .subfolder(&relative.to_string_lossy())
                    .map_err(std::io::Error::other)?;
            }
        } else {
            std::fs::create_dir_all(&table_folder)?;
        }
        let name = format!("{}.{kind}.{EXTENSION}", file_name(column));
        cache::write_entry(&table_folder, &name, |out| {
            entry::write_entry(out, meta, sections)
        })?;
        if let Some(cache) = &folder.cache {
            cache.evict_to_budget();
        }
        Ok(())
    }
}

/// `prepared/NAME-HASH` in the cache, for the data folder `data` (its absolute path hashed, its
/// last name kept so a person can tell the folders apart).
fn cache_folder_for(cache: &CacheFolder, data: &Path) -> Option<PathBuf> {
    let absolute = std::fs::canonicalize(data).ok()?;
    let hash = twox_hash::XxHash3_64::oneshot(absolute.as_os_str().as_encoded_bytes());
    let name = absolute
        .file_name()
        .map(|n| file_name(&n.to_string_lossy()))
        .unwrap_or_default();
    Some(
        cache
            .root()
            .join(cache::PREPARED)
            .join(format!("{name}-{hash:016x}")),
    )
}

fn entry_path(folder: &Path, table: &str, column: &str, kind: &str) -> PathBuf {
    folder
        .join(file_name(table))
        .join(format!("{}.{kind}.{EXTENSION}", file_name(column)))
}

/// A name safe as one file name: letters, digits, `_` and `-` as they are, every other byte as
/// `%XX`.
fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// An entry of a shared folder: a regular file (not a link).
fn open_shared_entry(path: &Path) -> Option<std::fs::File> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    std::fs::File::open(path).ok()
}

#[allow(clippy::too_many_arguments)]
fn meta_for(
    table: &str,
    column: &str,
    kind: &str,
    ty: DataType,
    rows: usize,
    stats: &ColumnStats,
    unique: Option<bool>,
    sources: &[SourceFile],
) -> EntryMeta {
    EntryMeta {
        table: table.into(),
        column: column.into(),
        kind: kind.into(),
        sources: sources.to_vec(),
        ty,
        rows: rows as u64,
        stats: stats.into(),
        unique,
        encoding: None,
        sections: Vec::new(),
    }
}

/// Whether an entry was made for this column, from these files, by this format.
fn same_source(
    meta: &EntryMeta,
    table: &str,
    column: &str,
    kind: &str,
    sources: &[SourceFile],
    ty: DataType,
    rows: u64,
) -> Result<(), EntryError> {
    if meta.table != table || meta.column != column || meta.kind != kind {
        return Err(EntryError::Corrupt(format!(
            "it holds {}.{} ({}), not {table}.{column} ({kind})",
            meta.table, meta.column, meta.kind
        )));
    }
    if meta.sources != sources {
        return Err(EntryError::Stale("the table's files changed".into()));
    }
    if meta.ty != ty || meta.rows != rows {
        return Err(EntryError::Stale(format!(
            "made for {} rows of {}, the table has {rows} of {ty}",
            meta.rows, meta.ty
        )));
    }
    Ok(())
}

fn read_column(entry: &MappedEntry) -> Result<Column, EntryError> {
    let rows = usize::try_from(entry.meta.rows)
        .map_err(|_| EntryError::Corrupt("too many rows".into()))?;
    let data = match entry.meta.ty {
        DataType::Bool => ColumnData::Bool(entry.bools("values", rows)?),
        DataType::I32 => ColumnData::I32(entry.values("values", rows)?),
        DataType::I64 => ColumnData::I64(entry.values("values", rows)?),
        DataType::F32 => ColumnData::F32(entry.values("values", rows)?),
        DataType::F64 => ColumnData::F64(entry.values("values", rows)?),
        DataType::Date => ColumnData::Date(entry.values("values", rows)?),
        DataType::Timestamp => ColumnData::Timestamp(entry.values("values", rows)?),
        DataType::Time => ColumnData::Time(entry.values("values", rows)?),
        DataType::Decimal(decimal) if decimal.is_wide() => {
            ColumnData::WideDecimal(entry.values("values", rows)?, decimal)
        }
        DataType::Decimal(decimal) => ColumnData::Decimal(entry.values("values", rows)?, decimal),
        DataType::Str => ColumnData::Str {
            codes: entry.values("values", rows)?,
            dictionary: Arc::new(read_dictionary(entry)?),
        },
    };
    let validity = if entry.has_section("validity") {
        Some(entry.bools("validity", rows)?)
    } else {
        None
    };
    Ok(Column {
        data,
        validity,
        stats: ColumnStats::from(&entry.meta.stats),
    })
}

fn read_encoding(entry: &MappedEntry) -> Result<PreparedEncoding, EntryError> {
    let stored = entry
        .meta
        .encoding
        .as_ref()
        .ok_or_else(|| EntryError::Corrupt("no encoding recorded".into()))?;
    let encoded = match stored.scheme {
        Scheme::None => None,
        scheme => {
            let section_len = |name: &str| {
                entry
                    .meta
                    .sections
                    .iter()
                    .find(|s| s.name == name)
                    .map(|s| (s.bytes / 4) as usize)
                    .ok_or_else(|| EntryError::Corrupt(format!("no section `{name}`")))
            };
            let encoded = Encoded {
                scheme,
                len: usize::try_from(stored.len)
                    .map_err(|_| EntryError::Corrupt("too many values".into()))?,
                width: stored.width,
                data: entry.values("words", section_len("words")?)?,
                block_starts: entry.values("starts", section_len("starts")?)?,
                dictionary: entry
                    .values::<i32>("reference", section_len("reference")?)?
                    .into_vec(),
            };
            compress::validate(&encoded).map_err(|e| EntryError::Corrupt(e.to_string()))?;
            Some(Arc::new(encoded))
        }
    };
    let dictionary = if entry.has_section("dictionary.text") {
        Some(Arc::new(read_dictionary(entry)?))
    } else {
        None
    };
    Ok(PreparedEncoding {
        scheme: stored.scheme,
        encoded,
        stats: ColumnStats::from(&entry.meta.stats),
        dictionary,
        unique: entry.meta.unique,
    })
}

/// A string dictionary's sections: its strings one after another, and each one's end (u64).
fn dictionary_sections(dictionary: &Dictionary) -> (&[u8], &[u8]) {
    let (text, ends) = dictionary.parts();
    // SAFETY: `u64` is plain data with no padding; the slice borrows the dictionary's ends
    // (stored little-endian, as the targets are).
    let ends = unsafe {
        std::slice::from_raw_parts(ends.as_ptr().cast::<u8>(), std::mem::size_of_val(ends))
    };
    (text, ends)
}

fn push_dictionary<'a>(sections: &mut Vec<SectionBytes<'a>>, text: &'a [u8], ends: &'a [u8]) {
    sections.push(SectionBytes {
        name: "dictionary.text",
        bytes: text,
        spare: 0,
    });
    sections.push(SectionBytes {
        name: "dictionary.ends",
        bytes: ends,
        spare: 0,
    });
}

/// The entry's dictionary, used where it is mapped (checked on every core: a near-unique
/// column's dictionary holds a string per row, TPC-H's `o_comment` 75 M at SF 50).
fn read_dictionary(entry: &MappedEntry) -> Result<Dictionary, EntryError> {
    let text_bytes = entry.bytes("dictionary.text")?.len();
    let end_bytes = entry.bytes("dictionary.ends")?.len();
    if !end_bytes.is_multiple_of(8) {
        return Err(EntryError::Corrupt(
            "a dictionary's ends are not whole".into(),
        ));
    }
    let text = entry.values::<u8>("dictionary.text", text_bytes)?;
    let ends = entry.values::<u64>("dictionary.ends", end_bytes / 8)?;
    Dictionary::from_parts(text, ends).map_err(|e| EntryError::Corrupt(e.to_string()))
}

fn bool_bytes(values: &[bool]) -> &[u8] {
    // SAFETY: a `bool` is one byte holding 0 or 1.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), values.len()) }
}

fn word_bytes(values: &[u32]) -> &[u8] {
    // SAFETY: `u32` is plain data with no padding; the slice borrows `values`.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

fn int_bytes(values: &[i32]) -> &[u8] {
    // SAFETY: `i32` is plain data with no padding; the slice borrows `values`.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

#[cfg(test)]
mod tests {
    use super::entry::{write_entry, StoredStats};
    use super::*;
    use crate::types::Value;

    /// A mapped entry holding a dictionary of `strings`, written as the store writes one.
    fn dictionary_entry(strings: &[&[u8]]) -> MappedEntry {
        let text: Vec<u8> = strings.concat();
        let mut end = 0u64;
        let ends: Vec<u8> = strings
            .iter()
            .flat_map(|s| {
                end += s.len() as u64;
                end.to_le_bytes()
            })
            .collect();
        let mut sections = Vec::new();
        push_dictionary(&mut sections, &text, &ends);
        let meta = EntryMeta {
            table: "t".into(),
            column: "s".into(),
            kind: "values".into(),
            sources: Vec::new(),
            ty: DataType::Str,
            rows: 0,
            stats: StoredStats::from(&ColumnStats {
                rows: 0,
                nulls: 0,
                min: Value::Null,
                max: Value::Null,
                dictionary_size: Some(strings.len() as u64),
            }),
            unique: None,
            encoding: None,
            sections: Vec::new(),
        };
        let mut file = tempfile::tempfile().expect("a temporary file");
        write_entry(&mut file, meta, &sections).expect("written");
        map_entry(&file).expect("mapped")
    }

    #[test]
    fn a_large_dictionary_reads_back_whole_and_a_bad_one_is_corrupt() {
        let many: Vec<String> = (0..100_000).map(|i| format!("value {i:06}")).collect();
        let bytes: Vec<&[u8]> = many.iter().map(|s| s.as_bytes()).collect();
        let read = read_dictionary(&dictionary_entry(&bytes)).expect("a dictionary");
        assert_eq!(read.iter().collect::<Vec<_>>(), many.as_slice());
        for bad in [
            &[&b"b"[..], b"a"][..],
            &[&b"a"[..], b"a"],
            &[&b"a"[..], &[0xff, 0xfe]],
        ] {
            assert!(matches!(
                read_dictionary(&dictionary_entry(bad)),
                Err(EntryError::Corrupt(_))
            ));
        }
    }
}
