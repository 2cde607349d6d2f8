//! One block at a time: GPU-FOR and GPU-DFOR blocks packed from and unpacked into 128 values,
//! in the word layout that the parent module's documentation gives.

use super::{CompressError, BLOCK_LEN, MINIBLOCKS, MINIBLOCK_LEN};

/// Words of a GPU-FOR block before its miniblocks: the reference and the bit widths.
const FOR_HEADER: usize = 2;
/// Words of a GPU-DFOR block before its GPU-FOR block: the base.
const DFOR_HEADER: usize = 1;

/// A block's differences from its reference, with the width each miniblock needs.
struct Frame {
    reference: i32,
    diffs: [u32; BLOCK_LEN],
    widths: [u32; MINIBLOCKS],
}

impl Frame {
    /// `values` holds 1 to 128 values; the rest of the block is padding.
    fn new(values: &[i32]) -> Frame {
        let reference = values.iter().copied().min().unwrap_or(0);
        // Padding keeps the difference 0, so it widens no miniblock and a miniblock of padding
        // alone costs no words.
        let mut diffs = [0u32; BLOCK_LEN];
        for (d, &v) in diffs.iter_mut().zip(values) {
            *d = (v as u32).wrapping_sub(reference as u32);
        }
        let mut widths = [0u32; MINIBLOCKS];
        for (width, mini) in widths.iter_mut().zip(diffs.chunks_exact(MINIBLOCK_LEN)) {
            let all_bits = mini.iter().fold(0u32, |acc, &d| acc | d);
            *width = u32::BITS - all_bits.leading_zeros();
        }
        Frame {
            reference,
            diffs,
            widths,
        }
    }

    fn words(&self) -> usize {
        FOR_HEADER + self.widths.iter().map(|&w| w as usize).sum::<usize>()
    }

    fn write(&self, out: &mut Vec<u32>) {
        out.push(self.reference as u32);
        out.push(
            self.widths
                .iter()
                .enumerate()
                .fold(0u32, |word, (m, &w)| word | (w << (8 * m))),
        );
        for (&width, mini) in self
            .widths
            .iter()
            .zip(self.diffs.chunks_exact(MINIBLOCK_LEN))
        {
            pack_miniblock(mini, width, out);
        }
    }
}

/// Appends the `width` words of one miniblock's bit stream.
pub(super) fn pack_miniblock(diffs: &[u32], width: u32, out: &mut Vec<u32>) {
    if width == 0 {
        return;
    }
    let first = out.len();
    out.resize(first + width as usize, 0);
    let words = &mut out[first..];
    for (i, &d) in diffs.iter().enumerate() {
        let bit = i * width as usize;
        let (word, shift) = (bit / 32, (bit % 32) as u32);
        words[word] |= d << shift;
        // `shift + width > 32` implies `shift > 0`, so the shift below stays under 32.
        if shift + width > 32 {
            words[word + 1] |= d >> (32 - shift);
        }
    }
}

/// Reads one miniblock of `width` words into `out` (32 values), adding the reference back.
fn unpack_miniblock(words: &[u32], width: u32, reference: u32, out: &mut [i32]) {
    if width == 0 {
        out.fill(reference as i32);
        return;
    }
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    for (i, v) in out.iter_mut().enumerate() {
        let bit = i * width as usize;
        let (word, shift) = (bit / 32, (bit % 32) as u32);
        let mut d = words[word] >> shift;
        if shift + width > 32 {
            d |= words[word + 1] << (32 - shift);
        }
        *v = reference.wrapping_add(d & mask) as i32;
    }
}

/// Words of 1 to 128 values as one GPU-FOR block, found without packing them.
pub(super) fn for_block_words(values: &[i32]) -> usize {
    Frame::new(values).words()
}

/// Words of 1 to 128 values as one GPU-DFOR block, found without packing them.
pub(super) fn dfor_block_words(values: &[i32]) -> usize {
    DFOR_HEADER + Frame::new(&dfor_deltas(values)[..values.len().max(1)]).words()
}

/// The deltas GPU-DFOR frames: 0 for the first value (the block's base holds it), then each
/// value less the one before.
fn dfor_deltas(values: &[i32]) -> [i32; BLOCK_LEN] {
    let mut deltas = [0i32; BLOCK_LEN];
    for (delta, pair) in deltas[1..].iter_mut().zip(values.windows(2)) {
        *delta = pair[1].wrapping_sub(pair[0]);
    }
    deltas
}

/// Packs 1 to 128 values as one GPU-FOR block.
pub(super) fn encode_for_block(values: &[i32]) -> Vec<u32> {
    let frame = Frame::new(values);
    let mut out = Vec::with_capacity(frame.words());
    frame.write(&mut out);
    out
}

/// Packs 1 to 128 values as one GPU-DFOR block.
pub(super) fn encode_dfor_block(values: &[i32]) -> Vec<u32> {
    let base = values.first().copied().unwrap_or(0);
    let deltas = dfor_deltas(values);
    let frame = Frame::new(&deltas[..values.len().max(1)]);
    let mut out = Vec::with_capacity(DFOR_HEADER + frame.words());
    out.push(base as u32);
    frame.write(&mut out);
    out
}

/// Unpacks the GPU-FOR block that is exactly `words`; `block` only names it in errors.
pub(super) fn decode_for_block(
    words: &[u32],
    block: usize,
    out: &mut [i32; BLOCK_LEN],
) -> Result<(), CompressError> {
    unpack_frame(words, 0, block, out)
}

/// Unpacks the GPU-DFOR block that is exactly `words`; `block` only names it in errors.
pub(super) fn decode_dfor_block(
    words: &[u32],
    block: usize,
    out: &mut [i32; BLOCK_LEN],
) -> Result<(), CompressError> {
    let Some((&base, frame)) = words.split_first() else {
        return Err(CompressError::BlockSize {
            block,
            expected: DFOR_HEADER + FOR_HEADER,
            found: words.len(),
        });
    };
    unpack_frame(frame, DFOR_HEADER, block, out)?;
    let mut running = base as i32;
    for v in out.iter_mut() {
        running = running.wrapping_add(*v);
        *v = running;
    }
    Ok(())
}

/// Unpacks a GPU-FOR frame; `header` is the number of words before it in its block, so that
/// sizes in errors count the whole block.
fn unpack_frame(
    words: &[u32],
    header: usize,
    block: usize,
    out: &mut [i32; BLOCK_LEN],
) -> Result<(), CompressError> {
    let wrong_size = |expected: usize| CompressError::BlockSize {
        block,
        expected: header + expected,
        found: header + words.len(),
    };
    let (reference, width_word) = match words {
        [reference, width_word, ..] => (*reference, *width_word),
        _ => return Err(wrong_size(FOR_HEADER)),
    };
    let mut widths = [0u32; MINIBLOCKS];
    for (m, width) in widths.iter_mut().enumerate() {
        *width = (width_word >> (8 * m)) & 0xff;
        if *width > 32 {
            return Err(CompressError::BitWidth {
                block,
                miniblock: m,
                width: *width,
            });
        }
    }
    let expected = FOR_HEADER + widths.iter().map(|&w| w as usize).sum::<usize>();
    if words.len() != expected {
        return Err(wrong_size(expected));
    }
    let mut at = FOR_HEADER;
    for (&width, mini) in widths.iter().zip(out.chunks_exact_mut(MINIBLOCK_LEN)) {
        let next = at + width as usize;
        unpack_miniblock(&words[at..next], width, reference, mini);
        at = next;
    }
    Ok(())
}
