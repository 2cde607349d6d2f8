//! Strings read in parallel chunks (Parquet row groups, byte ranges of a `.tbl` file): each chunk
//! interns its strings locally, then [`merge`] builds one sorted dictionary for the whole column
//! and rewrites every chunk's local ids as codes into it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use rayon::prelude::*;

use crate::column::{ColumnData, Dictionary};

/// The local id a null row gets; it becomes code 0 after the merge (validity says it is null).
const NULL_ID: u32 = u32::MAX;

/// The distinct strings of one chunk of rows and the local id of each row.
#[derive(Default)]
pub(crate) struct ChunkStrings {
    ids: HashMap<Box<[u8]>, u32, BuildHasherDefault<FxHasher>>,
    rows: Vec<u32>,
}

/// A chunk held bytes that are not UTF-8.
#[derive(Debug)]
pub(crate) struct NotUtf8;

impl ChunkStrings {
    pub(crate) fn with_capacity(rows: usize) -> ChunkStrings {
        ChunkStrings {
            ids: HashMap::default(),
            rows: Vec::with_capacity(rows),
        }
    }

    /// Adds one row's string. UTF-8 is checked once per distinct value, not per row.
    pub(crate) fn push(&mut self, value: &[u8]) -> Result<(), NotUtf8> {
        let id = match self.ids.get(value) {
            Some(&id) => id,
            None => {
                std::str::from_utf8(value).map_err(|_| NotUtf8)?;
                let id = self.ids.len() as u32;
                self.ids.insert(value.into(), id);
                id
            }
        };
        self.rows.push(id);
        Ok(())
    }

    /// Adds a batch of rows (`None` for null). Values decoded from a Parquet dictionary page are
    /// slices of that page, so a row repeating a value repeats its (address, length): a small
    /// memo on those skips hashing the bytes. The memo lives for this call only, while every
    /// slice of the batch is borrowed and so cannot be freed and its address reused.
    pub(crate) fn push_batch<'a>(
        &mut self,
        batch: impl IntoIterator<Item = Option<&'a [u8]>>,
    ) -> Result<(), NotUtf8> {
        const SLOTS: usize = 64;
        let mut memo = [(0usize, 0usize, NULL_ID); SLOTS];
        for value in batch {
            let Some(value) = value else {
                self.push_null();
                continue;
            };
            let address = value.as_ptr() as usize;
            let slot = (address >> 3 ^ address >> 11) % SLOTS;
            let (seen_address, seen_len, id) = memo[slot];
            if seen_address == address && seen_len == value.len() && id != NULL_ID {
                self.rows.push(id);
                continue;
            }
            self.push(value)?;
            memo[slot] = (address, value.len(), self.rows[self.rows.len() - 1]);
        }
        Ok(())
    }

    pub(crate) fn push_null(&mut self) {
        self.rows.push(NULL_ID);
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The distinct values in local-id order, and the rows' local ids.
    fn into_parts(self) -> ChunkParts {
        let mut distinct: Vec<Box<[u8]>> = vec![Box::default(); self.ids.len()];
        for (value, id) in self.ids {
            distinct[id as usize] = value;
        }
        (distinct, self.rows)
    }
}

/// A chunk's distinct values (by local id) and its rows' local ids.
type ChunkParts = (Vec<Box<[u8]>>, Vec<u32>);

/// Concatenates the chunks in order into one string column with one sorted dictionary.
pub(crate) fn merge(chunks: Vec<ChunkStrings>) -> ColumnData {
    let parts: Vec<ChunkParts> = chunks
        .into_par_iter()
        .map(ChunkStrings::into_parts)
        .collect();

    // Every distinct value of every chunk, sorted once; walking them in order hands out codes.
    let mut entries: Vec<(&[u8], u32, u32)> = parts
        .iter()
        .enumerate()
        .flat_map(|(chunk, (distinct, _))| {
            distinct
                .iter()
                .enumerate()
                .map(move |(local, value)| (&**value, chunk as u32, local as u32))
        })
        .collect();
    entries.par_sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut code_maps: Vec<Vec<i32>> = parts
        .iter()
        .map(|(distinct, _)| vec![0; distinct.len()])
        .collect();
    let mut sorted: Vec<&[u8]> = Vec::new();
    for &(value, chunk, local) in &entries {
        if sorted.last() != Some(&value) {
            sorted.push(value);
        }
        code_maps[chunk as usize][local as usize] = sorted.len() as i32 - 1;
    }

    let total: usize = parts.iter().map(|(_, rows)| rows.len()).sum();
    let mut codes = vec![0i32; total];
    let mut outputs = Vec::with_capacity(parts.len());
    let mut rest = codes.as_mut_slice();
    for (_, rows) in &parts {
        let (head, tail) = rest.split_at_mut(rows.len());
        outputs.push(head);
        rest = tail;
    }
    outputs
        .into_par_iter()
        .zip(parts.par_iter().zip(code_maps.par_iter()))
        .for_each(|(out, ((_, rows), code_of))| {
            for (code, &id) in out.iter_mut().zip(rows) {
                *code = if id == NULL_ID {
                    0
                } else {
                    code_of[id as usize]
                };
            }
        });

    // Every value was checked to be UTF-8 when it was interned, so nothing is replaced here.
    let values = sorted
        .par_iter()
        .map(|value| String::from_utf8_lossy(value).into_owned())
        .collect();
    ColumnData::Str {
        codes: codes.into(),
        dictionary: Arc::new(Dictionary::from_sorted_distinct(values)),
    }
}

/// The Fx hash (as in rustc) with a finalizer: much faster than SipHash on short keys, and the
/// keys here come from data files, not from an adversary probing a service.
#[derive(Default, Clone, Copy)]
struct FxHasher {
    hash: u64,
}

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            self.add(u64::from_le_bytes(buf));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut buf = [0u8; 8];
            buf[..tail.len()].copy_from_slice(tail);
            self.add(u64::from_le_bytes(buf));
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    /// Fx alone leaves the low bits (which pick a bucket) depending on little but the last
    /// word, so keys differing early (`Customer#000123456`) crowd a few buckets; a final mix
    /// spreads every bit over the whole hash.
    fn finish(&self) -> u64 {
        let h = (self.hash ^ (self.hash >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
        h ^ (h >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(values: &[Option<&str>]) -> ChunkStrings {
        let mut chunk = ChunkStrings::default();
        for value in values {
            match value {
                Some(s) => chunk.push(s.as_bytes()).unwrap(),
                None => chunk.push_null(),
            }
        }
        chunk
    }

    #[test]
    fn merges_chunk_dictionaries_into_one_sorted_dictionary() {
        let merged = merge(vec![
            chunk(&[Some("pear"), Some("apple"), Some("pear")]),
            chunk(&[]),
            chunk(&[Some("fig"), None, Some("apple"), Some("zucchini")]),
        ]);
        let ColumnData::Str { codes, dictionary } = merged else {
            panic!("merge makes a string column");
        };
        assert_eq!(
            dictionary.iter().collect::<Vec<_>>(),
            ["apple", "fig", "pear", "zucchini"]
        );
        assert_eq!(codes, [2, 0, 2, 1, 0, 0, 3]);
    }

    #[test]
    fn batches_give_equal_values_equal_ids_whatever_their_address() {
        let page = b"ASIAEUROPE".to_vec();
        let copy = b"ASIA".to_vec();
        let (asia, europe) = (&page[..4], &page[4..]);
        let mut chunk = ChunkStrings::default();
        chunk
            .push_batch([
                Some(asia),
                Some(europe),
                None,
                Some(asia),
                Some(&copy[..]),
                Some(&page[..0]),
            ])
            .unwrap();
        let ColumnData::Str { codes, dictionary } = merge(vec![chunk]) else {
            panic!("merge makes a string column");
        };
        assert_eq!(
            dictionary.iter().collect::<Vec<_>>(),
            ["", "ASIA", "EUROPE"]
        );
        assert_eq!(codes, [1, 2, 0, 1, 1, 0]);
    }

    #[test]
    fn rejects_bytes_that_are_not_utf8() {
        let mut chunk = ChunkStrings::default();
        assert!(chunk.push(b"fine").is_ok());
        assert!(chunk.push(&[0xff, 0xfe]).is_err());
    }
}
