//! Bit-packed integer columns: the GPU-FOR and GPU-DFOR formats of Shanbhag's thesis
//! ("Interactive analytics on GPUs", chapter 5) and two whole-column formats at one bit width
//! (`pack`, `dict`); the CPU encoders, the choice between the schemes, a CPU reference
//! decoder that a GPU decoder must agree with word for word, and how a kernel reads a column
//! in each scheme (`reading`: decoder family, tile requirement, staged shared memory, buffers).
//!
//! # Layout
//!
//! An [`Encoded`] column holds `len` values of type `i32` in `data`, a vector of 32-bit words.
//! With [`Scheme::None`], `data[i]` is value `i` (its `i32` bits) and `block_starts` is empty.
//! With `for` and `dfor` the values are cut into blocks of [`BLOCK_LEN`] = 128 (the last block holds
//! `len % 128` real values when that is not zero) and block `b` occupies the words
//! `data[block_starts[b] .. block_starts[b + 1]]`. `block_starts` has `ceil(len / 128) + 1`
//! entries: it starts at 0, the blocks follow each other without gaps, and its final entry is
//! `data.len()`. Every block can be decoded without reading any other block.
//!
//! A GPU-FOR block of values `v[0..128]`:
//!
//! | word | holds |
//! |---|---|
//! | 0 | the reference `r = min(v)`, as the bits of an `i32` |
//! | 1 | the four miniblocks' bit widths `w0..w3`, one byte each, `w0` in the low byte; each in `0..=32` |
//! | 2 .. 2+w0 | miniblock 0: `v[0..32]` |
//! | 2+w0 .. 2+w0+w1 | miniblock 1: `v[32..64]` |
//! | … | miniblocks 2 and 3 likewise; the block is `2 + w0 + w1 + w2 + w3` words |
//!
//! Miniblock `m` stores `d[i] = (v[32m + i] as u32).wrapping_sub(r as u32)` for `i` in `0..32`,
//! with width `w = wm`, the fewest bits that hold the largest `d[i]` (0 when all are 0).
//! The `w` words form one bit stream, least significant bit first: `d[i]` occupies stream bits
//! `i*w .. (i+1)*w`, where stream bit `k` is bit `k % 32` of word `k / 32`. A value whose bits
//! cross a word boundary has its low bits at the top of one word and its high bits at the
//! bottom of the next. Decoding is `v[i] = (r as u32).wrapping_add(d[i]) as i32`, so any pair of
//! `i32` values, `i32::MIN` with `i32::MAX` included, fits in a width of 32.
//!
//! A GPU-DFOR block is one word, the block's first value `v[0]` (its base), followed by a
//! GPU-FOR block of the deltas `e[0] = 0`, `e[i] = v[i].wrapping_sub(v[i - 1])`. Decoding is the
//! GPU-FOR decoding of the deltas followed by an inclusive prefix sum that starts from the base:
//! `v[i] = base + e[0] + … + e[i]`, all additions wrapping. The thesis stores one base per group
//! of D blocks decoded by one thread block; one base per block costs a word per 128 values and
//! leaves the group size to the decoder.
//!
//! Positions past `len` in the last block are padding: the encoder gives them the block's
//! reference (a difference of 0, so they widen no miniblock and a miniblock of padding alone takes
//! no words), and a decoder may decode them to anything, as long as it does not write them out.
//! A decoder that, like the thesis's, loads the two words from `k / 32` on for every value reads
//! past a miniblock's end: one word past, or two for a miniblock of width 0 that ends its block.
//! Those words belong to the next miniblock or block, except after the last block, so a device
//! copy of `data` wants two spare words at its end (or the decoder skips loads for width 0 and
//! the second load when the value does not straddle).
//!
//! A `pack` or `dict` column has no blocks (`block_starts` is empty): every value's code takes
//! the column's one `width` (0 to 32) and the codes form one bit stream, code `i` at stream bits
//! `i*width .. (i+1)*width` as in a miniblock, in `ceil(len * width / 32)` words. With `pack`,
//! `dictionary` holds one entry, the column's minimum `r`, and code `d` decodes to
//! `(r as u32).wrapping_add(d) as i32`; with `dict`, `dictionary` holds the column's distinct
//! values in ascending order and code `d` decodes to `dictionary[d]`. A value is found from its
//! row alone, so a decoder reads only the rows it needs, at the cost of the block headers'
//! adaptation: on columns whose values are spread evenly over their range (most keys and
//! measures), the headers' 0.75 bits a value buy nothing, and a dictionary narrows a column of
//! few distinct values spread over a wide range (dates as `yyyymmdd`) more than any frame of
//! reference can. A decoder that loads two words per value reads one word past the stream.

mod fixed;
mod pack;
mod reading;

pub use fixed::{code_at, AUTO_DICTIONARY_ENTRIES};
pub use reading::{
    Family, Part, Reading, StagedTile, MAX_BLOCK_WORDS, MINIBLOCK_FIELDS, STAGING_VECTOR_WORDS,
};
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

use crate::spill::{Buffer, Buffers};
use crate::values::Values;

/// Values per block: one GPU thread block of 128 threads decodes one value per thread.
pub const BLOCK_LEN: usize = 128;
/// Values per miniblock: one warp, and `32 * width` bits is exactly `width` words.
pub const MINIBLOCK_LEN: usize = 32;
/// Miniblocks per block.
pub const MINIBLOCKS: usize = BLOCK_LEN / MINIBLOCK_LEN;
/// Zero words a decoder that always loads two words per value needs after the data.
pub const SPARE_WORDS: usize = 2;

/// How a column's values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Scheme {
    /// One word per value.
    None,
    /// GPU-FOR: frame of reference and bit-packing per block of 128.
    For,
    /// GPU-DFOR: deltas within each block of 128, then GPU-FOR.
    Dfor,
    /// Every value's difference from the column's minimum, in one width for the whole column.
    Pack,
    /// Every value's rank among the column's distinct values, in one width for the whole column.
    Dict,
}

impl Scheme {
    /// Every scheme, in the order `auto` prefers them on a tie (the simpler decodes faster).
    pub const ALL: [Scheme; 5] = [
        Scheme::None,
        Scheme::Pack,
        Scheme::Dict,
        Scheme::For,
        Scheme::Dfor,
    ];

    /// Reads `none`, `for`, `dfor`, `pack` or `dict`, in any case.
    pub fn parse(text: &str) -> Result<Scheme, CompressError> {
        let text = text.trim();
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| CompressError::UnknownScheme(text.to_string()))
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheme::None => "none",
            Scheme::For => "for",
            Scheme::Dfor => "dfor",
            Scheme::Pack => "pack",
            Scheme::Dict => "dict",
        }
    }

    /// Whether the scheme packs values in blocks of 128 with their own headers (GPU-FOR and
    /// GPU-DFOR), which a decoder finds through the block starts.
    pub fn has_blocks(self) -> bool {
        self.reading().family == Family::Blocks
    }

    /// Whether the scheme packs the whole column at one width (`pack`, `dict`).
    pub fn is_fixed_width(self) -> bool {
        self.reading().family == Family::FixedWidth
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scheme {
    type Err = CompressError;

    fn from_str(text: &str) -> Result<Scheme, CompressError> {
        Scheme::parse(text)
    }
}

/// Which encoding the catalog gives the integer columns kernels read: per column the smallest
/// (`auto`), or one scheme for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Per column, the smallest of none, pack, dict, FOR and DFOR ([`choose`]).
    Auto,
    /// Every column in this scheme.
    Only(Scheme),
}

impl Default for Compression {
    fn default() -> Compression {
        Compression::NONE
    }
}

impl Compression {
    /// Plain 4-byte values.
    pub const NONE: Compression = Compression::Only(Scheme::None);

    /// Reads `none`, `auto`, `for`, `dfor`, `pack` or `dict`, in any case.
    pub fn parse(text: &str) -> Result<Compression, CompressError> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(Compression::Auto);
        }
        Scheme::parse(text).map(Compression::Only)
    }

    /// The scheme every column takes, or `None` for `auto` (decided per column).
    pub fn fixed(self) -> Option<Scheme> {
        match self {
            Compression::Auto => None,
            Compression::Only(scheme) => Some(scheme),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Auto => "auto",
            Compression::Only(scheme) => scheme.name(),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = CompressError;

    fn from_str(text: &str) -> Result<Compression, CompressError> {
        Compression::parse(text)
    }
}

/// Why an encoding could not be made or an [`Encoded`] column could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressError {
    #[error("unknown compression scheme `{0}` (expected none, auto, pack, dict, for or dfor)")]
    UnknownScheme(String),
    #[error("{words} words of {scheme} data do not fit the 32-bit block starts")]
    TooLarge { scheme: Scheme, words: usize },
    #[error("{scheme} column of {len} values has {found} block starts, expected {expected}")]
    BlockCount {
        scheme: Scheme,
        len: usize,
        expected: usize,
        found: usize,
    },
    #[error("{scheme} column has {found} data words, expected {expected}")]
    DataLength {
        scheme: Scheme,
        expected: usize,
        found: usize,
    },
    #[error("words {start}..{end} of the {scheme} data belong to no block")]
    Unowned {
        scheme: Scheme,
        start: usize,
        end: usize,
    },
    #[error("block {block} asked for, the column has {blocks}")]
    NoSuchBlock { block: usize, blocks: usize },
    #[error("block {block} spans words {start}..{end} of {data_len}")]
    BlockRange {
        block: usize,
        start: usize,
        end: usize,
        data_len: usize,
    },
    #[error("block {block}, miniblock {miniblock}: bit width {width} is over 32")]
    BitWidth {
        block: usize,
        miniblock: usize,
        width: u32,
    },
    #[error("{scheme} column has a bit width of {width}, over 32")]
    Width { scheme: Scheme, width: u32 },
    #[error("{scheme} column has a dictionary of {entries} values")]
    Dictionary { scheme: Scheme, entries: usize },
    #[error("row {row} has code {code}, the dictionary holds {entries} values")]
    NoSuchEntry {
        row: usize,
        code: u32,
        entries: usize,
    },
    #[error("block {block} has {found} words, its header says {expected}")]
    BlockSize {
        block: usize,
        expected: usize,
        found: usize,
    },
    #[error("{0}")]
    Buffer(String),
}

/// A column of `i32` values in one [`Scheme`]; the module documentation gives the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub scheme: Scheme,
    /// Number of values, padding excluded.
    pub len: usize,
    /// Where each block begins in `data`, in words, then `data.len()`; empty unless the scheme
    /// [has blocks](Scheme::has_blocks).
    pub block_starts: Values<u32>,
    pub data: Values<u32>,
    /// `pack` and `dict`: the bits every code takes; 0 for the others.
    pub width: u32,
    /// `pack`: the reference, alone; `dict`: the distinct values codes index; empty for the
    /// others.
    pub dictionary: Vec<i32>,
}

impl Encoded {
    /// Storage size: the data, the block starts and the dictionary.
    pub fn bytes(&self) -> usize {
        (self.data.len() + self.block_starts.len() + self.dictionary.len())
            * std::mem::size_of::<u32>()
    }

    /// Storage size per value, in bits; 0 for an empty column.
    pub fn bits_per_value(&self) -> f64 {
        if self.len == 0 {
            0.0
        } else {
            (self.bytes() * 8) as f64 / self.len as f64
        }
    }

    /// Number of blocks of [`BLOCK_LEN`] values, the last one possibly partial.
    pub fn blocks(&self) -> usize {
        self.len.div_ceil(BLOCK_LEN)
    }

    /// Words the largest block takes (0 for [`Scheme::None`] or an empty column): what a
    /// decoder copying whole blocks must make room for.
    pub fn widest_block(&self) -> u32 {
        self.block_starts
            .windows(2)
            .map(|pair| pair[1].saturating_sub(pair[0]))
            .max()
            .unwrap_or(0)
    }
}

/// Encodes `values` in `scheme`, the blocks in parallel.
///
/// # Panics
///
/// If the encoding needs more than `u32::MAX` words (more than about four billion values), which
/// the 32-bit block starts cannot address, or memory for it cannot be had; [`try_encode`] says
/// so instead.
pub fn encode(values: &[i32], scheme: Scheme) -> Encoded {
    match try_encode(values, scheme) {
        Ok(encoded) => encoded,
        Err(error) => panic!("{error}"),
    }
}

/// Encodes `values` in `scheme`, the blocks in parallel, in memory; fails only with
/// [`CompressError::TooLarge`] or when the memory cannot be had.
pub fn try_encode(values: &[i32], scheme: Scheme) -> Result<Encoded, CompressError> {
    try_encode_in(values, scheme, &Buffers::Memory)
}

/// [`try_encode`], the encoding's words in a buffer made by `buffers`.
pub fn try_encode_in(
    values: &[i32],
    scheme: Scheme,
    buffers: &Buffers,
) -> Result<Encoded, CompressError> {
    match scheme {
        Scheme::None => {
            let mut data = zeroed(buffers, values.len())?;
            data.as_mut_slice()
                .par_iter_mut()
                .zip(values)
                .for_each(|(word, &value)| *word = value as u32);
            return Ok(Encoded {
                scheme,
                len: values.len(),
                block_starts: Values::default(),
                data: sealed(data)?,
                width: 0,
                dictionary: Vec::new(),
            });
        }
        Scheme::Pack => return fixed::encode_pack(values, buffers),
        Scheme::Dict => return fixed::encode_dict(values, buffers),
        Scheme::For | Scheme::Dfor => {}
    }
    // Each block's size is found first (without packing it), so the blocks are then packed in
    // parallel straight into their place in one buffer.
    let sizes: Vec<u32> = values
        .par_chunks(BLOCK_LEN)
        .map(|chunk| block_words(chunk, scheme) as u32)
        .collect();
    let mut block_starts = Vec::with_capacity(sizes.len() + 1);
    let mut words = 0usize;
    for &size in &sizes {
        block_starts.push(words as u32);
        words += size as usize;
        if u32::try_from(words).is_err() {
            return Err(CompressError::TooLarge { scheme, words });
        }
    }
    block_starts.push(words as u32);
    let mut data = zeroed(buffers, words)?;
    // Runs of blocks, each a contiguous piece of the words: one task each.
    const RUN: usize = 1024;
    let mut pieces = Vec::with_capacity(sizes.len().div_ceil(RUN));
    let mut rest = data.as_mut_slice();
    for (run, chunk) in values.chunks(BLOCK_LEN * RUN).enumerate() {
        let first = run * RUN;
        let last = first + chunk.len().div_ceil(BLOCK_LEN);
        let length = (block_starts[last] - block_starts[first]) as usize;
        let (piece, tail) = rest.split_at_mut(length);
        rest = tail;
        pieces.push((first, piece, chunk));
    }
    pieces
        .into_par_iter()
        .try_for_each(|(first, piece, chunk)| {
            let mut at = 0;
            for (offset, block) in chunk.chunks(BLOCK_LEN).enumerate() {
                let packed = match scheme {
                    Scheme::Dfor => pack::encode_dfor_block(block),
                    _ => pack::encode_for_block(block),
                };
                let expected = sizes[first + offset] as usize;
                if packed.len() != expected {
                    return Err(CompressError::BlockSize {
                        block: first + offset,
                        expected,
                        found: packed.len(),
                    });
                }
                piece[at..at + expected].copy_from_slice(&packed);
                at += expected;
            }
            Ok(())
        })?;
    Ok(Encoded {
        scheme,
        len: values.len(),
        block_starts: block_starts.into(),
        data: sealed(data)?,
        width: 0,
        dictionary: Vec::new(),
    })
}

/// Words of one block of `chunk` in GPU-FOR or GPU-DFOR, found without packing it.
fn block_words(chunk: &[i32], scheme: Scheme) -> usize {
    match scheme {
        Scheme::Dfor => pack::dfor_block_words(chunk),
        _ => pack::for_block_words(chunk),
    }
}

fn zeroed(buffers: &Buffers, words: usize) -> Result<Buffer<u32>, CompressError> {
    buffers
        .zeroed::<u32>(words, 0)
        .map_err(|e| CompressError::Buffer(e.to_string()))
}

fn sealed(buffer: Buffer<u32>) -> Result<Values<u32>, CompressError> {
    buffer
        .into_values()
        .map_err(|e| CompressError::Buffer(e.to_string()))
}

/// Bits per value a scheme in blocks must save over the best at one width to be chosen: GPU-FOR
/// blocks are staged through shared memory and decode slower (decode-and-sum of 500M values on
/// the H100: 0.63 ms against 0.47 at one width, docs/PERFORMANCE.md), which a fraction of a bit
/// does not pay for.
pub const BLOCKS_MUST_SAVE_BITS: usize = 1;

/// The encoding `auto` takes for `values`: the smallest of plain, `pack` and `dict` (a
/// dictionary only when it holds at most [`fixed::AUTO_DICTIONARY_ENTRIES`] values), unless
/// GPU-FOR or GPU-DFOR is smaller still by [`BLOCKS_MUST_SAVE_BITS`] a value. On a tie, the
/// first in [`Scheme::ALL`].
///
/// # Panics
///
/// When memory for the encoding cannot be had; [`choose_in`] says so instead.
pub fn choose(values: &[i32]) -> Encoded {
    match choose_in(values, &Buffers::Memory) {
        Ok(encoded) => encoded,
        Err(error) => panic!("{error}"),
    }
}

/// [`choose`], the encoding's words in a buffer made by `buffers`.
pub fn choose_in(values: &[i32], buffers: &Buffers) -> Result<Encoded, CompressError> {
    // Every candidate is sized without being made, and only the smallest is encoded.
    let (fixed, (for_bytes, dfor_bytes)) = rayon::join(
        || fixed::FixedCandidates::of(values, fixed::AUTO_DICTIONARY_ENTRIES),
        || {
            rayon::join(
                || blocks_bytes(values, Scheme::For),
                || blocks_bytes(values, Scheme::Dfor),
            )
        },
    );
    let margin = values.len() * BLOCKS_MUST_SAVE_BITS / 8;
    let candidates = [
        (Scheme::Pack, Some(fixed.pack_bytes())),
        (Scheme::Dict, fixed.dict_bytes()),
        (Scheme::For, for_bytes),
        (Scheme::Dfor, dfor_bytes),
    ];
    let mut best = (Scheme::None, values.len() * std::mem::size_of::<u32>());
    for (scheme, bytes) in candidates {
        let Some(bytes) = bytes else { continue };
        let handicap = if scheme.has_blocks() { margin } else { 0 };
        if bytes + handicap < best.1 {
            best = (scheme, bytes + handicap);
        }
    }
    match best.0 {
        Scheme::Pack => fixed.pack(buffers),
        Scheme::Dict => fixed.dict(buffers).unwrap_or_else(|| fixed.pack(buffers)),
        scheme => match try_encode_in(values, scheme, buffers) {
            Err(CompressError::TooLarge { .. }) => try_encode_in(values, Scheme::None, buffers),
            encoded => encoded,
        },
    }
}

/// Bytes of `values` in `scheme` (GPU-FOR or GPU-DFOR), as [`Encoded::bytes`] counts them,
/// found without packing; `None` when the encoding would be too large.
fn blocks_bytes(values: &[i32], scheme: Scheme) -> Option<usize> {
    let words: usize = values
        .par_chunks(BLOCK_LEN)
        .map(|chunk| block_words(chunk, scheme))
        .sum();
    u32::try_from(words).ok()?;
    let starts = values.len().div_ceil(BLOCK_LEN) + 1;
    Some((words + starts) * std::mem::size_of::<u32>())
}

/// Decodes a whole column, checking the block starts and every block header against `data`.
pub fn decode(encoded: &Encoded) -> Result<Vec<i32>, CompressError> {
    check_shape(encoded)?;
    if encoded.scheme == Scheme::None {
        return Ok(encoded.data.iter().map(|&w| w as i32).collect());
    }
    if encoded.scheme.is_fixed_width() {
        let mut values = vec![0; encoded.len];
        fixed::decode_range(encoded, 0, &mut values)?;
        return Ok(values);
    }
    if let (Some(&first), Some(&last)) = (encoded.block_starts.first(), encoded.block_starts.last())
    {
        let (first, last, data_len) = (first as usize, last as usize, encoded.data.len());
        // Words outside every block were not written by `encode`, so their column is corrupt even
        // though each block alone may decode.
        if first != 0 {
            return Err(CompressError::Unowned {
                scheme: encoded.scheme,
                start: 0,
                end: first,
            });
        }
        if last < data_len {
            return Err(CompressError::Unowned {
                scheme: encoded.scheme,
                start: last,
                end: data_len,
            });
        }
        if last > data_len {
            return Err(CompressError::DataLength {
                scheme: encoded.scheme,
                expected: last,
                found: data_len,
            });
        }
    }
    let mut values = vec![0; encoded.len];
    let mut block = [0; BLOCK_LEN];
    for (b, out) in values.chunks_mut(BLOCK_LEN).enumerate() {
        decode_checked_block(encoded, b, &mut block)?;
        out.copy_from_slice(&block[..out.len()]);
    }
    Ok(values)
}

/// Checks a column's shape, and for block schemes that its block starts cover its words in
/// order and every block's header agrees with its size, without keeping the values: what a
/// column read from a file must pass before kernels read it.
pub fn validate(encoded: &Encoded) -> Result<(), CompressError> {
    check_shape(encoded)?;
    if !encoded.scheme.has_blocks() {
        return Ok(());
    }
    let starts = &encoded.block_starts;
    let data_len = encoded.data.len();
    if starts.first() != Some(&0) || starts.last().map(|&l| l as usize) != Some(data_len) {
        return Err(CompressError::Unowned {
            scheme: encoded.scheme,
            start: starts.first().map_or(0, |&f| f as usize),
            end: data_len,
        });
    }
    (0..encoded.blocks()).into_par_iter().try_for_each(|b| {
        let mut block = [0; BLOCK_LEN];
        decode_checked_block(encoded, b, &mut block)
    })
}

/// Decodes block `block` into `out`; positions past the column's end hold unspecified values.
pub fn decode_block(
    encoded: &Encoded,
    block: usize,
    out: &mut [i32; BLOCK_LEN],
) -> Result<(), CompressError> {
    check_shape(encoded)?;
    let blocks = encoded.blocks();
    if block >= blocks {
        return Err(CompressError::NoSuchBlock { block, blocks });
    }
    decode_checked_block(encoded, block, out)
}

/// The checks that cost nothing per block: the number of block starts, or for `None` the number
/// of words.
fn check_shape(encoded: &Encoded) -> Result<(), CompressError> {
    let (expected, found) = match encoded.scheme {
        Scheme::None => {
            if encoded.data.len() != encoded.len {
                return Err(CompressError::DataLength {
                    scheme: encoded.scheme,
                    expected: encoded.len,
                    found: encoded.data.len(),
                });
            }
            (0, encoded.block_starts.len())
        }
        Scheme::For | Scheme::Dfor => (encoded.blocks() + 1, encoded.block_starts.len()),
        Scheme::Pack | Scheme::Dict => return fixed::check(encoded),
    };
    if expected != found {
        return Err(CompressError::BlockCount {
            scheme: encoded.scheme,
            len: encoded.len,
            expected,
            found,
        });
    }
    Ok(())
}

/// Decodes one block of a column whose shape has been checked, and `block < blocks()`.
fn decode_checked_block(
    encoded: &Encoded,
    block: usize,
    out: &mut [i32; BLOCK_LEN],
) -> Result<(), CompressError> {
    if encoded.scheme == Scheme::None {
        let start = block * BLOCK_LEN;
        let end = encoded.len.min(start + BLOCK_LEN);
        let words = encoded.data.get(start..end).unwrap_or(&[]);
        out.fill(0);
        for (v, &w) in out.iter_mut().zip(words) {
            *v = w as i32;
        }
        return Ok(());
    }
    if encoded.scheme.is_fixed_width() {
        let start = block * BLOCK_LEN;
        let count = encoded.len.saturating_sub(start).min(BLOCK_LEN);
        out.fill(0);
        return fixed::decode_range(encoded, start, &mut out[..count]);
    }
    let (start, end) = match (
        encoded.block_starts.get(block),
        encoded.block_starts.get(block + 1),
    ) {
        (Some(&start), Some(&end)) => (start as usize, end as usize),
        _ => {
            return Err(CompressError::NoSuchBlock {
                block,
                blocks: encoded.blocks(),
            })
        }
    };
    let words = encoded
        .data
        .get(start..end)
        .ok_or(CompressError::BlockRange {
            block,
            start,
            end,
            data_len: encoded.data.len(),
        })?;
    match encoded.scheme {
        Scheme::Dfor => pack::decode_dfor_block(words, block, out),
        _ => pack::decode_for_block(words, block, out),
    }
}
