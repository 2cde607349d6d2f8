//! How a kernel reads a column kept in each [`Scheme`], described once: the family of its
//! decoder, what that family asks of a tile, the shared memory a GPU block stages a tile of it
//! in, and the buffers a kernel is passed for it. The tile a query's kernels take
//! (`Target::tile_for`), each kernel's choices (`codegen/choices.rs`), a stored column's kernel
//! parameters and the GPU decoder's staging arrays all follow this description; none of them
//! decides by naming a scheme.

use super::{Scheme, BLOCK_LEN, MINIBLOCKS};

/// How a column's values are found from its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// One word per value, loaded as it is.
    Plain,
    /// One code width for the whole column: any row's code is found from its row alone.
    FixedWidth,
    /// Blocks of [`BLOCK_LEN`] values with their own headers, decoded a block at a time.
    Blocks,
}

/// One buffer a kernel is passed for a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The values, a word each.
    Values,
    /// The codes' bit stream at the column's width, each added to the column's reference (its
    /// minimum), which the kernel is compiled with.
    CodesFromReference,
    /// The codes' bit stream at the column's width, each an index into [`Part::Dictionary`].
    CodesIntoDictionary,
    /// The distinct values codes index, in ascending order.
    Dictionary,
    /// The blocks' words.
    BlockWords,
    /// Where each block begins among [`Part::BlockWords`].
    BlockStarts,
}

/// How a kernel reads a column of one scheme ([`Scheme::reading`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub family: Family,
    /// The buffers a kernel is passed, in order (a nullable column's validity follows them).
    pub parts: &'static [Part],
    /// Whether a GPU block decodes a tile from a copy of its words in shared memory
    /// ([`Reading::staged_tile`]), with a thread per miniblock describing it first.
    pub staged_on_gpu: bool,
    /// Whether the decoder adds each block's deltas up from the block's base (DFOR), in a
    /// shared array of a word per row beside the staged words.
    pub sums_deltas: bool,
}

/// Words a staged tile's words are copied in: one 16-byte load.
pub const STAGING_VECTOR_WORDS: u32 = 4;

/// Words one miniblock's description takes in shared memory (the staged word its bits start at,
/// its width, its block's reference and its mask), read with one 16-byte load.
pub const MINIBLOCK_FIELDS: u32 = 4;

/// Words a block of any scheme in blocks can take: a DFOR base, the reference and width words,
/// and 128 values of 32 bits.
pub const MAX_BLOCK_WORDS: u32 = 3 + BLOCK_LEN as u32;

/// The shared-memory arrays a GPU block stages one tile of a column in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedTile {
    /// The most blocks of [`BLOCK_LEN`] values one tile covers.
    pub blocks: u32,
    /// The tile's words: its blocks' words, the up to three before them in their 16-byte
    /// vector and the word after them that a decoder reads (and ignores), in whole vectors.
    pub words: u32,
    /// One description of [`MINIBLOCK_FIELDS`] words per miniblock.
    pub miniblocks: u32,
    /// With [`Reading::sums_deltas`], a base per block and a delta per row; else 0 and 0.
    pub bases: u32,
    pub deltas: u32,
}

impl StagedTile {
    /// Shared memory the arrays take, in bytes.
    pub fn bytes(&self) -> u32 {
        (self.words + self.miniblocks * MINIBLOCK_FIELDS + self.bases + self.deltas) * 4
    }

    /// 16-byte vectors [`StagedTile::words`] holds.
    pub fn vectors(&self) -> u32 {
        self.words / STAGING_VECTOR_WORDS
    }
}

impl Reading {
    /// Whether a kernel whose tiles hold `rows` rows, `threads` threads a block (on the GPU
    /// where `gpu`), can decode the column: a column in blocks needs whole blocks per tile,
    /// and on the GPU a thread per miniblock of its tile.
    pub fn fits_tile(&self, rows: u32, threads: u32, gpu: bool) -> bool {
        if self.family != Family::Blocks {
            return true;
        }
        let blocks = rows / BLOCK_LEN as u32;
        rows.is_multiple_of(BLOCK_LEN as u32) && (!gpu || blocks * MINIBLOCKS as u32 <= threads)
    }

    /// The arrays a GPU block stages a tile of `rows` rows in, for blocks of at most
    /// `block_words` words; `None` where the column is read without staging.
    pub fn staged_tile(&self, rows: u32, block_words: u32) -> Option<StagedTile> {
        if !self.staged_on_gpu {
            return None;
        }
        let blocks = rows / BLOCK_LEN as u32;
        let most_words = blocks * block_words.min(MAX_BLOCK_WORDS) + 3 + 1;
        let (bases, deltas) = match self.sums_deltas {
            true => (blocks, rows),
            false => (0, 0),
        };
        Some(StagedTile {
            blocks,
            words: most_words.div_ceil(STAGING_VECTOR_WORDS) * STAGING_VECTOR_WORDS,
            miniblocks: blocks * MINIBLOCKS as u32,
            bases,
            deltas,
        })
    }
}

impl Scheme {
    /// How a kernel reads a column kept in this scheme.
    pub const fn reading(self) -> Reading {
        match self {
            Scheme::None => Reading {
                family: Family::Plain,
                parts: &[Part::Values],
                staged_on_gpu: false,
                sums_deltas: false,
            },
            Scheme::Pack => Reading {
                family: Family::FixedWidth,
                parts: &[Part::CodesFromReference],
                staged_on_gpu: false,
                sums_deltas: false,
            },
            Scheme::Dict => Reading {
                family: Family::FixedWidth,
                parts: &[Part::CodesIntoDictionary, Part::Dictionary],
                staged_on_gpu: false,
                sums_deltas: false,
            },
            Scheme::For => Reading {
                family: Family::Blocks,
                parts: &[Part::BlockWords, Part::BlockStarts],
                staged_on_gpu: true,
                sums_deltas: false,
            },
            Scheme::Dfor => Reading {
                family: Family::Blocks,
                parts: &[Part::BlockWords, Part::BlockStarts],
                staged_on_gpu: true,
                sums_deltas: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_schemes_in_blocks_ask_for_whole_blocks_and_a_thread_per_miniblock() {
        for scheme in Scheme::ALL {
            let reading = scheme.reading();
            let in_blocks = reading.family == Family::Blocks;
            assert_eq!(in_blocks, scheme.has_blocks(), "{scheme}");
            assert_eq!(reading.fits_tile(100, 1, true), !in_blocks, "{scheme}");
            // 512 rows are four blocks: sixteen miniblocks, so sixteen threads at least.
            assert_eq!(reading.fits_tile(512, 8, true), !in_blocks, "{scheme}");
            assert!(reading.fits_tile(512, 16, true), "{scheme}");
            assert!(reading.fits_tile(512, 1, false), "{scheme}");
        }
    }

    #[test]
    fn a_staged_tile_holds_whole_vectors_and_dfor_adds_its_deltas_beside_them() {
        assert_eq!(Scheme::Pack.reading().staged_tile(2048, 40), None);
        let fr = Scheme::For.reading().staged_tile(2048, 40).unwrap();
        // 16 blocks of at most 40 words, three words of skew and one read past: 644 words.
        assert_eq!((fr.blocks, fr.words, fr.miniblocks), (16, 644, 64));
        assert_eq!((fr.bases, fr.deltas), (0, 0));
        assert_eq!(fr.bytes(), (644 + 64 * MINIBLOCK_FIELDS) * 4);
        let dfor = Scheme::Dfor.reading().staged_tile(2048, 40).unwrap();
        assert_eq!((dfor.bases, dfor.deltas), (16, 2048));
        assert_eq!(dfor.bytes(), fr.bytes() + (16 + 2048) * 4);
        // Blocks are never counted wider than a block can be.
        let widest = Scheme::For.reading().staged_tile(128, u32::MAX).unwrap();
        assert_eq!(widest.words, (MAX_BLOCK_WORDS + 4).div_ceil(4) * 4);
    }

    #[test]
    fn every_scheme_but_plain_passes_its_codes_first() {
        for scheme in Scheme::ALL {
            let parts = scheme.reading().parts;
            assert_eq!(parts.first() == Some(&Part::Values), scheme == Scheme::None);
            assert_eq!(
                parts.contains(&Part::Dictionary),
                parts.contains(&Part::CodesIntoDictionary)
            );
        }
    }
}
