//! The file format of one prepared entry: a header page, then sections that each start on a
//! page boundary, so a mapped entry's sections are read, registered with the GPU driver and
//! copied in place.
//!
//! | bytes | hold |
//! |---|---|
//! | 0..8 | `MAGIC` |
//! | 8..12 | the format version, `ENTRY_FORMAT` (little-endian) |
//! | 12..16 | the length `n` of the metadata |
//! | 16..24 | the checksum |
//! | 24..24+n | the metadata, JSON ([`EntryMeta`]): what the entry is, the identity of the files it was made from, statistics, and each section's place |
//! | from the next page boundary | the sections, each padded with zeros to a page boundary |
//!
//! A section's offset counts from the first page after the metadata. The checksum is xxh3 over
//! the metadata's own xxh3 followed by the xxh3 of every 16 MiB piece of every section, padding
//! included, so it is computed on all cores and any flipped byte of the file is found.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use memmap2::{Mmap, MmapOptions};
use rayon::prelude::*;
use twox_hash::XxHash3_64;

use super::identity::SourceFile;
use crate::column::ColumnStats;
use crate::types::{DataType, Value};
use crate::values::{Plain, Values};

const MAGIC: &[u8; 8] = b"TQPREP\r\n";
/// Bumped whenever the layout of entries or of what they hold changes; an entry of another
/// version is stale.
pub const ENTRY_FORMAT: u32 = 1;
const PAGE: usize = 4096;
const HEADER: usize = 24;
/// Bytes hashed as one piece, on one core.
const PIECE: usize = 16 << 20;

/// What an entry holds, beside its sections.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EntryMeta {
    pub table: String,
    pub column: String,
    /// `values`, or the `--compress` setting of an encoding.
    pub kind: String,
    /// The table's files when the entry was made.
    pub sources: Vec<SourceFile>,
    pub ty: DataType,
    pub rows: u64,
    pub stats: StoredStats,
    /// Whether no value repeats, when that was known.
    pub unique: Option<bool>,
    /// For encodings: the scheme, value count and bit width.
    pub encoding: Option<StoredEncoding>,
    pub sections: Vec<Section>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredEncoding {
    pub scheme: crate::compress::Scheme,
    pub len: u64,
    pub width: u32,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Section {
    pub name: String,
    /// From the first page after the metadata; a multiple of the page size.
    pub offset: u64,
    pub bytes: u64,
    /// Bytes that lie in the file from `offset` on: `bytes`, then zeros up to a page boundary.
    pub readable: u64,
}

/// Column statistics in a form JSON keeps exactly (floats as their bits, so infinities survive).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredStats {
    pub rows: u64,
    pub nulls: u64,
    pub min: StoredValue,
    pub max: StoredValue,
    pub dictionary_size: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum StoredValue {
    Null,
    Bool(bool),
    Int(i64),
    FloatBits(u64),
    Date(i32),
    Timestamp(i64),
    Time(i64),
    Str(String),
    Decimal(i64, u8),
    /// A wide decimal's raw value as its high and low 64 bits.
    WideDecimal {
        high: i64,
        low: u64,
        scale: u8,
    },
}

impl From<&ColumnStats> for StoredStats {
    fn from(stats: &ColumnStats) -> StoredStats {
        let value = |v: &Value| match v {
            Value::Null => StoredValue::Null,
            Value::Bool(b) => StoredValue::Bool(*b),
            Value::Int(i) => StoredValue::Int(*i),
            Value::Float(x) => StoredValue::FloatBits(x.to_bits()),
            Value::Date(d) => StoredValue::Date(*d),
            Value::Timestamp(t) => StoredValue::Timestamp(*t),
            Value::Time(t) => StoredValue::Time(*t),
            Value::Str(s) => StoredValue::Str(s.to_string()),
            Value::Decimal(raw, scale) => StoredValue::Decimal(*raw, *scale),
            Value::WideDecimal(raw, scale) => StoredValue::WideDecimal {
                high: (*raw >> 64) as i64,
                low: *raw as u64,
                scale: *scale,
            },
        };
        StoredStats {
            rows: stats.rows,
            nulls: stats.nulls,
            min: value(&stats.min),
            max: value(&stats.max),
            dictionary_size: stats.dictionary_size,
        }
    }
}

impl From<&StoredStats> for ColumnStats {
    fn from(stats: &StoredStats) -> ColumnStats {
        let value = |v: &StoredValue| match v {
            StoredValue::Null => Value::Null,
            StoredValue::Bool(b) => Value::Bool(*b),
            StoredValue::Int(i) => Value::Int(*i),
            StoredValue::FloatBits(bits) => Value::Float(f64::from_bits(*bits)),
            StoredValue::Date(d) => Value::Date(*d),
            StoredValue::Timestamp(t) => Value::Timestamp(*t),
            StoredValue::Time(t) => Value::Time(*t),
            StoredValue::Str(s) => Value::Str(s.as_str().into()),
            StoredValue::Decimal(raw, scale) => Value::Decimal(*raw, *scale),
            StoredValue::WideDecimal { high, low, scale } => {
                Value::WideDecimal(i128::from(*high) << 64 | i128::from(*low), *scale)
            }
        };
        ColumnStats {
            rows: stats.rows,
            nulls: stats.nulls,
            min: value(&stats.min),
            max: value(&stats.max),
            dictionary_size: stats.dictionary_size,
        }
    }
}

/// Why an entry was not used.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// Made from other files, or by another version: rebuilt without a word.
    #[error("stale: {0}")]
    Stale(String),
    /// Damaged: rebuilt, with a warning.
    #[error("corrupt: {0}")]
    Corrupt(String),
}

/// One section to write: its name, its bytes, and how many zero bytes readers may read past
/// its end (at least; the padding to a page boundary usually gives more).
pub struct SectionBytes<'a> {
    pub name: &'static str,
    pub bytes: &'a [u8],
    pub spare: usize,
}

/// Writes an entry: `meta` (whose sections are filled in here) and `sections`, in order.
pub fn write_entry(
    out: &mut impl Write,
    mut meta: EntryMeta,
    sections: &[SectionBytes<'_>],
) -> io::Result<()> {
    let mut offset = 0u64;
    meta.sections = sections
        .iter()
        .map(|s| {
            let readable = padded(s.bytes.len() + s.spare) as u64;
            let section = Section {
                name: s.name.to_string(),
                offset,
                bytes: s.bytes.len() as u64,
                readable,
            };
            offset += readable;
            section
        })
        .collect();
    let json = serde_json::to_vec(&meta).map_err(io::Error::other)?;
    let checksum = checksum(
        &json,
        sections
            .iter()
            .zip(&meta.sections)
            .map(|(s, placed)| (s.bytes, placed.readable as usize)),
    );
    let json_len = u32::try_from(json.len()).map_err(io::Error::other)?;
    out.write_all(MAGIC)?;
    out.write_all(&ENTRY_FORMAT.to_le_bytes())?;
    out.write_all(&json_len.to_le_bytes())?;
    out.write_all(&checksum.to_le_bytes())?;
    out.write_all(&json)?;
    write_zeros(out, padded(HEADER + json.len()) - HEADER - json.len())?;
    for (section, placed) in sections.iter().zip(&meta.sections) {
        out.write_all(section.bytes)?;
        write_zeros(out, placed.readable as usize - section.bytes.len())?;
    }
    Ok(())
}

fn write_zeros(out: &mut impl Write, mut count: usize) -> io::Result<()> {
    const ZEROS: [u8; PAGE] = [0; PAGE];
    while count > 0 {
        let n = count.min(PAGE);
        out.write_all(&ZEROS[..n])?;
        count -= n;
    }
    Ok(())
}

fn padded(bytes: usize) -> usize {
    bytes.div_ceil(PAGE).max(1) * PAGE
}

/// The checksum of the metadata and of sections given as (bytes, readable length): the bytes
/// followed by zeros up to the readable length.
fn checksum<'a>(json: &[u8], sections: impl Iterator<Item = (&'a [u8], usize)>) -> u64 {
    let mut pieces: Vec<(&[u8], usize)> = Vec::new();
    for (bytes, readable) in sections {
        let mut start = 0;
        while start < readable {
            let end = (start + PIECE).min(readable);
            let data = &bytes[start.min(bytes.len())..end.min(bytes.len())];
            pieces.push((data, end - start - data.len()));
            start = end;
        }
    }
    let hashes: Vec<u64> = pieces
        .par_iter()
        .map(|(data, zeros)| {
            let mut hasher = XxHash3_64::default();
            std::hash::Hasher::write(&mut hasher, data);
            let page = [0u8; PAGE];
            let mut left = *zeros;
            while left > 0 {
                let n = left.min(PAGE);
                std::hash::Hasher::write(&mut hasher, &page[..n]);
                left -= n;
            }
            std::hash::Hasher::finish(&hasher)
        })
        .collect();
    let mut hasher = XxHash3_64::default();
    std::hash::Hasher::write(&mut hasher, &XxHash3_64::oneshot(json).to_le_bytes());
    for hash in hashes {
        std::hash::Hasher::write(&mut hasher, &hash.to_le_bytes());
    }
    std::hash::Hasher::finish(&hasher)
}

/// An entry mapped into memory, its metadata read and its checksum verified.
pub struct MappedEntry {
    pub meta: EntryMeta,
    map: Arc<Mmap>,
    data_start: usize,
}

/// Reads the metadata of the entry in `file`: `Ok(None)` when it is not an entry of this
/// format at all (treated as corrupt by the caller), with the map for [`verify`].
pub fn map_entry(file: &File) -> Result<MappedEntry, EntryError> {
    // SAFETY: entries are only ever replaced by renaming a new file over them, never written in
    // place, so the mapped file does not change while mapped (a process that truncated it would
    // be tampering, which the checksum below cannot prevent, but whose effect on a private,
    // read-only mapping is a fault, not a wrong read).
    let map = unsafe { MmapOptions::new().populate().map(file) }
        .map_err(|e| EntryError::Corrupt(format!("cannot be mapped: {e}")))?;
    let header = map
        .get(..HEADER)
        .ok_or_else(|| EntryError::Corrupt("shorter than its header".into()))?;
    if &header[..8] != MAGIC {
        return Err(EntryError::Corrupt("not a prepared entry".into()));
    }
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let version = word(8);
    if version != ENTRY_FORMAT {
        return Err(EntryError::Stale(format!(
            "written in format {version}, this Tessera reads {ENTRY_FORMAT}"
        )));
    }
    let json_len = word(12) as usize;
    let json = map
        .get(HEADER..HEADER + json_len)
        .ok_or_else(|| EntryError::Corrupt("its metadata runs past its end".into()))?;
    let meta: EntryMeta = serde_json::from_slice(json)
        .map_err(|e| EntryError::Corrupt(format!("unreadable metadata: {e}")))?;
    let data_start = padded(HEADER + json_len);
    for section in &meta.sections {
        let fits = (section.offset as usize).is_multiple_of(PAGE)
            && section.bytes <= section.readable
            && (data_start as u64)
                .checked_add(section.offset)
                .and_then(|s| s.checked_add(section.readable))
                .is_some_and(|end| end <= map.len() as u64);
        if !fits {
            return Err(EntryError::Corrupt(format!(
                "section `{}` lies outside the file",
                section.name
            )));
        }
    }
    Ok(MappedEntry {
        meta,
        map: Arc::new(map),
        data_start,
    })
}

impl MappedEntry {
    /// Checks the checksum over the metadata and every section.
    pub fn verify(&self) -> Result<(), EntryError> {
        let header = &self.map[..HEADER];
        let stored = u64::from_le_bytes(header[16..24].try_into().unwrap_or([0; 8]));
        let json_len = u32::from_le_bytes(header[12..16].try_into().unwrap_or([0; 4])) as usize;
        let json = &self.map[HEADER..HEADER + json_len];
        let sections = self.meta.sections.iter().map(|s| {
            let start = self.data_start + s.offset as usize;
            (
                &self.map[start..start + s.readable as usize],
                s.readable as usize,
            )
        });
        if checksum(json, sections) != stored {
            return Err(EntryError::Corrupt("its checksum does not match".into()));
        }
        Ok(())
    }

    fn section(&self, name: &str) -> Result<&Section, EntryError> {
        self.meta
            .sections
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| EntryError::Corrupt(format!("no section `{name}`")))
    }

    pub fn has_section(&self, name: &str) -> bool {
        self.meta.sections.iter().any(|s| s.name == name)
    }

    /// Section `name` as values of `T`, exactly `count` of them.
    pub fn values<T: Plain>(&self, name: &str, count: usize) -> Result<Values<T>, EntryError> {
        let section = self.section(name)?;
        let width = std::mem::size_of::<T>() as u64;
        if section.bytes != count as u64 * width {
            return Err(EntryError::Corrupt(format!(
                "section `{name}` holds {} bytes, not {count} values",
                section.bytes
            )));
        }
        Values::mapped(
            &self.map,
            self.data_start + section.offset as usize,
            count,
            (section.readable / width) as usize,
        )
        .map_err(|e| EntryError::Corrupt(format!("section `{name}`: {e}")))
    }

    /// Section `name` as `count` booleans (each byte checked to be 0 or 1).
    pub fn bools(&self, name: &str, count: usize) -> Result<Values<bool>, EntryError> {
        let section = self.section(name)?;
        if section.bytes != count as u64 {
            return Err(EntryError::Corrupt(format!(
                "section `{name}` holds {} bytes, not {count} booleans",
                section.bytes
            )));
        }
        Values::mapped_bools(&self.map, self.data_start + section.offset as usize, count)
            .map_err(|e| EntryError::Corrupt(format!("section `{name}`: {e}")))
    }

    /// Section `name`'s bytes.
    pub fn bytes(&self, name: &str) -> Result<&[u8], EntryError> {
        let section = self.section(name)?;
        let start = self.data_start + section.offset as usize;
        Ok(&self.map[start..start + section.bytes as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> EntryMeta {
        EntryMeta {
            table: "t".into(),
            column: "c".into(),
            kind: "values".into(),
            sources: Vec::new(),
            ty: DataType::I32,
            rows: 3,
            stats: StoredStats::from(&ColumnStats {
                rows: 3,
                nulls: 0,
                min: Value::Float(f64::NEG_INFINITY),
                max: Value::Int(9),
                dictionary_size: None,
            }),
            unique: Some(true),
            encoding: None,
            sections: Vec::new(),
        }
    }

    fn written(sections: &[SectionBytes<'_>]) -> File {
        let mut file = tempfile::tempfile().expect("a temporary file");
        write_entry(&mut file, meta(), sections).expect("written");
        file
    }

    #[test]
    fn an_entry_reads_back_and_its_sections_are_page_aligned() {
        let values: Vec<u8> = [7i32, 8, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = written(&[
            SectionBytes {
                name: "values",
                bytes: &values,
                spare: 8,
            },
            SectionBytes {
                name: "validity",
                bytes: &[1, 0, 1],
                spare: 0,
            },
        ]);
        let entry = map_entry(&file).expect("mapped");
        entry.verify().expect("intact");
        assert_eq!(entry.meta.table, "t");
        let read: Values<i32> = entry.values("values", 3).expect("three values");
        assert_eq!(read.as_slice(), &[7, 8, 9]);
        assert_eq!(read.padded(2), Some(&[7, 8, 9, 0, 0][..]));
        assert_eq!(read.as_ptr() as usize % PAGE, 0);
        assert_eq!(
            entry.bools("validity", 3).expect("flags").as_slice(),
            &[true, false, true]
        );
        assert!(entry.values::<i32>("values", 4).is_err());
        let stats = ColumnStats::from(&entry.meta.stats);
        assert_eq!(stats.min, Value::Float(f64::NEG_INFINITY));
    }

    #[test]
    fn any_flipped_byte_is_found() {
        let values = vec![5u8; 10_000];
        let file = written(&[SectionBytes {
            name: "values",
            bytes: &values,
            spare: 0,
        }]);
        let length = file.metadata().expect("stat").len();
        // A byte in the metadata, in a section, and in the padding after it.
        for at in [30, 4096 + 17, length - 1] {
            let copy = tempfile::tempfile().expect("a temporary file");
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut &file, &mut bytes).ok();
            let bytes = {
                use std::os::unix::fs::FileExt;
                let mut all = vec![0u8; length as usize];
                file.read_exact_at(&mut all, 0).expect("read");
                all[at as usize] ^= 0x40;
                all
            };
            (&copy).write_all(&bytes).expect("written");
            let found = map_entry(&copy).and_then(|entry| entry.verify());
            assert!(
                matches!(found, Err(EntryError::Corrupt(_))),
                "byte {at}: {found:?}"
            );
        }
    }
}
