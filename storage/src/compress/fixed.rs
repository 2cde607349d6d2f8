//! Whole columns at one bit width: `pack` (each value's difference from the column's minimum)
//! and `dict` (each value's rank among the column's distinct values), in the layout the parent
//! module's documentation gives. With no per-block header, value `i`'s bits are found from `i`
//! alone, so a decoder reads any row, or only the selected ones, like a plain column.

use rayon::prelude::*;

use super::pack::pack_miniblock;
use super::{CompressError, Encoded, Scheme, MINIBLOCK_LEN};
use crate::spill::Buffers;
use crate::values::Values;

/// Value ranges up to this wide find their distinct values with a bitmap (2 MiB per thread).
const BITMAP_RANGE: u64 = 1 << 24;

/// `auto` considers a dictionary of at most this many entries (256 KiB): GPU threads look codes
/// up in it at random, so it should stay in the caches.
pub const AUTO_DICTIONARY_ENTRIES: usize = 1 << 16;

/// The fewest bits that hold `largest`.
fn bits_for(largest: u32) -> u32 {
    u32::BITS - largest.leading_zeros()
}

/// Words of `len` codes of `width` bits.
pub(super) fn stream_words(len: usize, width: u32) -> usize {
    (len as u64 * u64::from(width)).div_ceil(32) as usize
}

/// The bit stream of every value's `code`, `width` bits each, packed 32 values (`width` words)
/// at a time in parallel, straight from the values, into a buffer made by `buffers`.
fn pack_codes(
    values: &[i32],
    width: u32,
    code: impl Fn(i32) -> u32 + Sync,
    buffers: &Buffers,
) -> Result<Values<u32>, CompressError> {
    let mut buffer = buffers
        .zeroed::<u32>(stream_words(values.len(), width), 0)
        .map_err(|e| CompressError::Buffer(e.to_string()))?;
    if width > 0 {
        pack_codes_into(values, width, code, buffer.as_mut_slice());
    }
    buffer
        .into_values()
        .map_err(|e| CompressError::Buffer(e.to_string()))
}

fn pack_codes_into(values: &[i32], width: u32, code: impl Fn(i32) -> u32 + Sync, data: &mut [u32]) {
    data.par_chunks_mut(width as usize)
        .zip(values.par_chunks(MINIBLOCK_LEN))
        .for_each(|(words, chunk)| {
            let mut codes = [0u32; MINIBLOCK_LEN];
            for (c, &v) in codes.iter_mut().zip(chunk) {
                *c = code(v);
            }
            // A last chunk of fewer than 32 values may own fewer than `width` words.
            let mut packed = Vec::with_capacity(width as usize);
            pack_miniblock(&codes[..chunk.len()], width, &mut packed);
            words.copy_from_slice(&packed[..words.len()]);
        });
}

/// The smallest and largest of `values`, `None` when there are none.
fn extremes(values: &[i32]) -> Option<(i32, i32)> {
    values
        .par_iter()
        .fold(
            || None,
            |acc: Option<(i32, i32)>, &v| {
                Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
            },
        )
        .reduce(
            || None,
            |a, b| match (a, b) {
                (Some((a_lo, a_hi)), Some((b_lo, b_hi))) => Some((a_lo.min(b_lo), a_hi.max(b_hi))),
                (a, None) => a,
                (None, b) => b,
            },
        )
}

/// `values` as `pack`: the reference is the smallest value, the width that of the largest
/// difference from it.
pub(super) fn encode_pack(values: &[i32], buffers: &Buffers) -> Result<Encoded, CompressError> {
    pack_between(values, extremes(values).unwrap_or((0, 0)), buffers)
}

/// `values`, all within `low..=high`, as `pack`.
fn pack_between(
    values: &[i32],
    (low, high): (i32, i32),
    buffers: &Buffers,
) -> Result<Encoded, CompressError> {
    let width = pack_width(low, high);
    Ok(Encoded {
        scheme: Scheme::Pack,
        len: values.len(),
        block_starts: Values::default(),
        data: pack_codes(
            values,
            width,
            |v| (v as u32).wrapping_sub(low as u32),
            buffers,
        )?,
        width,
        dictionary: vec![low],
    })
}

/// `values` as `dict`, however many distinct values they hold.
pub(super) fn encode_dict(values: &[i32], buffers: &Buffers) -> Result<Encoded, CompressError> {
    match extremes(values) {
        None => dict_from(values, Vec::new(), buffers),
        Some((low, high)) if range(low, high) <= BITMAP_RANGE => {
            let present = Bitmap::of(values, low, high);
            dict_from_bitmap(values, &present, buffers)
        }
        Some(_) => {
            let mut distinct = values.to_vec();
            distinct.par_sort_unstable();
            distinct.dedup();
            dict_from(values, distinct, buffers)
        }
    }
}

fn pack_width(low: i32, high: i32) -> u32 {
    bits_for((high as u32).wrapping_sub(low as u32))
}

/// The one-width encodings `auto` weighs for a column, sized before either is made.
pub(super) struct FixedCandidates<'v> {
    values: &'v [i32],
    extremes: Option<(i32, i32)>,
    /// The distinct values when there are at most the entries asked for and their codes take
    /// fewer bits than `pack`'s (found with a bitmap, so only for a range of at most
    /// [`BITMAP_RANGE`]).
    dictionary: Option<Bitmap>,
}

impl<'v> FixedCandidates<'v> {
    pub(super) fn of(values: &'v [i32], entries: usize) -> FixedCandidates<'v> {
        let extremes = extremes(values);
        let dictionary = extremes
            .filter(|&(low, high)| range(low, high) <= BITMAP_RANGE)
            .map(|(low, high)| Bitmap::of(values, low, high))
            .filter(|present| {
                let (low, high) = extremes.unwrap_or((0, 0));
                present.count() <= entries && dict_width(present.count()) < pack_width(low, high)
            });
        FixedCandidates {
            values,
            extremes,
            dictionary,
        }
    }

    /// Bytes of `pack` (its bit stream and reference, as [`Encoded::bytes`] counts them).
    pub(super) fn pack_bytes(&self) -> usize {
        let (low, high) = self.extremes.unwrap_or((0, 0));
        (stream_words(self.values.len(), pack_width(low, high)) + 1) * 4
    }

    /// Bytes of `dict`, when it is a candidate.
    pub(super) fn dict_bytes(&self) -> Option<usize> {
        let entries = self.dictionary.as_ref()?.count();
        Some((stream_words(self.values.len(), dict_width(entries)) + entries) * 4)
    }

    pub(super) fn pack(&self, buffers: &Buffers) -> Result<Encoded, CompressError> {
        pack_between(self.values, self.extremes.unwrap_or((0, 0)), buffers)
    }

    /// `dict`, when it is a candidate.
    pub(super) fn dict(&self, buffers: &Buffers) -> Option<Result<Encoded, CompressError>> {
        let present = self.dictionary.as_ref()?;
        Some(dict_from_bitmap(self.values, present, buffers))
    }
}

fn range(low: i32, high: i32) -> u64 {
    (i64::from(high) - i64::from(low)) as u64 + 1
}

/// `dict` with the dictionary `distinct` (ascending, every value of `values` in it).
fn dict_from(
    values: &[i32],
    distinct: Vec<i32>,
    buffers: &Buffers,
) -> Result<Encoded, CompressError> {
    // Every value is in the dictionary, which is sorted.
    let rank = |v: i32| distinct.binary_search(&v).unwrap_or_default() as u32;
    let data = pack_codes(values, dict_width(distinct.len()), rank, buffers)?;
    Ok(dict_encoded(values.len(), data, distinct))
}

fn dict_from_bitmap(
    values: &[i32],
    present: &Bitmap,
    buffers: &Buffers,
) -> Result<Encoded, CompressError> {
    let distinct = present.values();
    let ranks = present.ranks();
    let rank = |v| present.rank(&ranks, v);
    let data = pack_codes(values, dict_width(distinct.len()), rank, buffers)?;
    Ok(dict_encoded(values.len(), data, distinct))
}

fn dict_width(entries: usize) -> u32 {
    bits_for(entries.saturating_sub(1) as u32)
}

fn dict_encoded(len: usize, data: Values<u32>, distinct: Vec<i32>) -> Encoded {
    Encoded {
        scheme: Scheme::Dict,
        len,
        block_starts: Values::default(),
        data,
        width: dict_width(distinct.len()),
        dictionary: distinct,
    }
}

/// Which values of `low..=high` occur, one bit each.
struct Bitmap {
    low: i32,
    bits: Vec<u64>,
}

impl Bitmap {
    fn of(values: &[i32], low: i32, high: i32) -> Bitmap {
        let words = range(low, high).div_ceil(64) as usize;
        let bits = values
            .par_chunks(1 << 16)
            .fold(
                || vec![0u64; words],
                |mut bits, chunk| {
                    for &v in chunk {
                        let at = (v as u32).wrapping_sub(low as u32) as usize;
                        bits[at / 64] |= 1 << (at % 64);
                    }
                    bits
                },
            )
            .reduce(
                || vec![0u64; words],
                |mut a, b| {
                    a.iter_mut().zip(&b).for_each(|(a, b)| *a |= b);
                    a
                },
            );
        Bitmap { low, bits }
    }

    fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The present values, ascending.
    fn values(&self) -> Vec<i32> {
        let mut out = Vec::with_capacity(self.count());
        for (w, &word) in self.bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                let bit = rest.trailing_zeros() as usize;
                out.push((self.low as u32).wrapping_add((w * 64 + bit) as u32) as i32);
                rest &= rest - 1;
            }
        }
        out
    }

    /// Per word, how many values are present before it.
    fn ranks(&self) -> Vec<u32> {
        let mut before = 0u32;
        self.bits
            .iter()
            .map(|w| {
                let rank = before;
                before += w.count_ones();
                rank
            })
            .collect()
    }

    /// How many present values are smaller than `v`.
    fn rank(&self, ranks: &[u32], v: i32) -> u32 {
        let at = (v as u32).wrapping_sub(self.low as u32) as usize;
        let below = self.bits[at / 64] & ((1u64 << (at % 64)) - 1);
        ranks[at / 64] + below.count_ones()
    }
}

/// Code `i` of a stream of `width`-bit codes.
pub fn code_at(data: &[u32], width: u32, i: usize) -> u32 {
    if width == 0 {
        return 0;
    }
    let bit = i as u64 * u64::from(width);
    let (word, shift) = ((bit / 32) as usize, (bit % 32) as u32);
    let low = data[word] >> shift;
    let high = if shift + width > 32 {
        data[word + 1] << (32 - shift)
    } else {
        0
    };
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    };
    (low | high) & mask
}

/// Checks the shape of a `pack` or `dict` column: its width, its number of words, its
/// dictionary's size.
pub(super) fn check(encoded: &Encoded) -> Result<(), CompressError> {
    let scheme = encoded.scheme;
    if encoded.width > 32 {
        return Err(CompressError::Width {
            scheme,
            width: encoded.width,
        });
    }
    let words = stream_words(encoded.len, encoded.width);
    if encoded.data.len() != words {
        return Err(CompressError::DataLength {
            scheme,
            expected: words,
            found: encoded.data.len(),
        });
    }
    if !encoded.block_starts.is_empty() {
        return Err(CompressError::BlockCount {
            scheme,
            len: encoded.len,
            expected: 0,
            found: encoded.block_starts.len(),
        });
    }
    let entries_ok = match scheme {
        Scheme::Pack => encoded.dictionary.len() == 1,
        _ => encoded.len == 0 || !encoded.dictionary.is_empty(),
    };
    if !entries_ok {
        return Err(CompressError::Dictionary {
            scheme,
            entries: encoded.dictionary.len(),
        });
    }
    Ok(())
}

/// Decodes values `first .. first + out.len()` of a checked `pack` or `dict` column.
pub(super) fn decode_range(
    encoded: &Encoded,
    first: usize,
    out: &mut [i32],
) -> Result<(), CompressError> {
    for (i, v) in (first..).zip(out.iter_mut()) {
        let code = code_at(&encoded.data, encoded.width, i);
        *v = match encoded.scheme {
            Scheme::Pack => (encoded.dictionary[0] as u32).wrapping_add(code) as i32,
            _ => *encoded
                .dictionary
                .get(code as usize)
                .ok_or(CompressError::NoSuchEntry {
                    row: i,
                    code,
                    entries: encoded.dictionary.len(),
                })?,
        };
    }
    Ok(())
}
