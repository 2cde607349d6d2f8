//! `unpack_fixed`: a tile of a column packed at one width for the whole column (`pack` or
//! `dict`, layout in `tessera_storage::compress`) decoded into a thread's registers, in place of
//! `load` or `load_sel`.
//!
//! A code's bits lie at `row * width` in the column's bit stream, so an item is decoded from
//! its row alone: the one or two words that hold its code, a funnel shift, a mask, then the
//! reference added (`pack`) or the dictionary entry looked up (`dict`). The items of a warp are
//! consecutive rows, so their words are consecutive too and the loads coalesce as a plain
//! column's do, over `width / 32` of the bytes. On the GPU, decoding every item of a tile, each
//! lane loads only the word its code starts in: when the code runs on into the next word, that
//! word is where the next lane's code starts, and a shuffle brings it over (the warp's last code
//! ends its words, since the warp's first row is a multiple of 32). Decoding selected rows, a
//! lane loads its two words only when its row is taken. A thread's items are `threads` rows
//! apart, a whole number of words, so its code starts at the same bit of every item's word, and
//! the words are constant offsets from one address. On the host an item loads its own two
//! words. Nothing is staged and no barrier is needed.
//!
//! Tried on the H100 and not kept: lane `i` of a warp loading word `i` of the warp's `width`
//! words (one coalesced request) and each lane taking its two words by shuffles, a warp of
//! rejected rows loading nothing. Decode-and-sum took 0.517 ms against 0.491, packed SSB 0.692
//! against 0.632 (`docs/runs/2026-11-23-h100-fixed-width.txt`): the two shuffles cost more than
//! the second load, which the first one's sector serves.

use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use tessera_storage::compress::{Part, Scheme};

use crate::emit::{CodegenError, CodegenResult, Emitter, Item, TileArray};

use super::load::{full_or_last_tile, param_int, param_ptr, type_name};
use super::primitive;
use super::scan::shfl_down;
use super::unpack::{funnel_right, load_i32};

/// A `pack` or `dict` column as a kernel receives it.
#[derive(Clone, Copy)]
pub struct FixedColumn<'ctx> {
    pub scheme: Scheme,
    /// Bits every code takes, 0 to 32.
    pub width: u32,
    /// The codes' bit stream, with a spare word after it.
    pub words: PointerValue<'ctx>,
    pub base: CodeBase<'ctx>,
}

/// What a code decodes through.
#[derive(Clone, Copy)]
pub enum CodeBase<'ctx> {
    /// `pack`: the reference added to every code, compiled in, so that what consumes the value
    /// folds it into its own constants (a perfect table's first key, a comparison's bound).
    Reference(i32),
    /// `dict`: the values codes index.
    Dictionary(PointerValue<'ctx>),
}

/// Which items of the tile to decode.
#[derive(Clone, Copy)]
pub enum Rows<'ctx> {
    /// The first `num_items`; the others are zero.
    First(IntValue<'ctx>),
    /// Those whose flag is set; the others are zero.
    Selected(TileArray<'ctx>),
}

/// Decodes the tile starting at row `tile_start` of `column` into `out`.
pub fn unpack_fixed<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: &FixedColumn<'ctx>,
    tile_start: IntValue<'ctx>,
    rows: Rows<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    unpack_into(em, column, tile_start, rows, out, false)
}

/// Reads the codes of the tile starting at row `tile_start` of `column` into `out` (an `i32`
/// array), without decoding them: what a hash table built over codes is probed with
/// ([`super::dict_code`]).
pub fn unpack_codes<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: &FixedColumn<'ctx>,
    tile_start: IntValue<'ctx>,
    rows: Rows<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    unpack_into(em, column, tile_start, rows, out, true)
}

fn unpack_into<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: &FixedColumn<'ctx>,
    tile_start: IntValue<'ctx>,
    rows: Rows<'ctx>,
    out: TileArray<'ctx>,
    codes: bool,
) -> CodegenResult<()> {
    let codes_part = match column.base {
        CodeBase::Reference(_) => Part::CodesFromReference,
        CodeBase::Dictionary(_) => Part::CodesIntoDictionary,
    };
    let base_fits = column.scheme.reading().parts.contains(&codes_part);
    if !base_fits || column.width > 32 {
        return Err(CodegenError::Invalid(format!(
            "{} at {} bits is not a fixed-width scheme with its base",
            column.scheme, column.width
        )));
    }
    let (mode, selector) = match rows {
        Rows::First(count) => ("all", count.into()),
        Rows::Selected(flags) => ("sel", flags.ptr.into()),
    };
    let ty = em.ctx.void_type().fn_type(
        &[
            em.global_ptr().into(),
            em.global_ptr().into(),
            em.i64().into(),
            match rows {
                Rows::First(_) => em.i32().into(),
                Rows::Selected(_) => em.local_ptr().into(),
            },
            em.local_ptr().into(),
        ],
        false,
    );
    // `pack`'s reference is a constant of the primitive's body rather than an argument, so
    // that the optimizer sees it in every pass that runs before inlining.
    let (dictionary, reference) = match column.base {
        CodeBase::Reference(reference) => (em.global_ptr().const_null(), Some(reference)),
        CodeBase::Dictionary(dictionary) => (dictionary, None),
    };
    let name = format!(
        "tessera.unpack_fixed.{}.w{}{}.{mode}{}.{}",
        column.scheme,
        column.width,
        reference.map_or(String::new(), |r| format!(".r{r}")),
        if codes { ".codes" } else { "" },
        type_name(out.elem)
    );
    let width = column.width;
    let f = primitive(em, &name, ty, |p| {
        let words = param_ptr(p, 0)?;
        let dictionary = param_ptr(p, 1)?;
        let reference = reference.map(|r| p.const_i32(i64::from(r)));
        let start = param_int(p, 2)?;
        let out = TileArray {
            ptr: param_ptr(p, 4)?,
            ..out
        };
        let decoder = Decoder::new(p, words, dictionary, reference, width, start, codes)?;
        match rows {
            Rows::First(_) => {
                let count = param_int(p, 3)?;
                full_or_last_tile(
                    p,
                    count,
                    || decoder.decode(p, out, Take::All),
                    || decoder.decode(p, out, Take::Inside(count)),
                )?;
            }
            Rows::Selected(flags) => {
                let flags = TileArray {
                    ptr: param_ptr(p, 3)?,
                    ..flags
                };
                decoder.decode(p, out, Take::Flags(flags))?;
            }
        }
        p.b.build_return(None)?;
        Ok(())
    })?;
    em.b.build_call(
        f,
        &[
            column.words.into(),
            dictionary.into(),
            tile_start.into(),
            selector,
            out.ptr.into(),
        ],
        "",
    )?;
    Ok(())
}

/// Which items a decoder writes (the others are zero).
#[derive(Clone, Copy)]
enum Take<'ctx> {
    All,
    /// The first `count`.
    Inside(IntValue<'ctx>),
    /// Those whose flag is set.
    Flags(TileArray<'ctx>),
}

impl<'ctx> Take<'ctx> {
    /// Whether this thread's `item` is taken; `None` when every item is.
    fn item(
        self,
        p: &Emitter<'ctx, '_>,
        item: Item<'ctx>,
    ) -> CodegenResult<Option<IntValue<'ctx>>> {
        Ok(match self {
            Take::All => None,
            Take::Inside(count) => Some(p.b.build_int_compare(
                IntPredicate::SLT,
                p.item_offset(item)?,
                count,
                "inside",
            )?),
            Take::Flags(flags) => Some(p.truth(p.get(flags, item)?.into_int_value())?),
        })
    }
}

/// What decoding an item needs inside the primitive.
struct Decoder<'ctx> {
    words: PointerValue<'ctx>,
    dictionary: PointerValue<'ctx>,
    /// `pack`'s reference.
    reference: Option<IntValue<'ctx>>,
    width: u32,
    /// Whether the codes are wanted rather than the values.
    codes: bool,
    start: IntValue<'ctx>,
    /// On the GPU, where warps are whole: the word holding the thread's first code and the bit
    /// it starts at, the same bit for all the thread's items.
    thread_first: Option<(PointerValue<'ctx>, IntValue<'ctx>)>,
}

impl<'ctx> Decoder<'ctx> {
    fn new(
        p: &Emitter<'ctx, '_>,
        words: PointerValue<'ctx>,
        dictionary: PointerValue<'ctx>,
        reference: Option<IntValue<'ctx>>,
        width: u32,
        start: IntValue<'ctx>,
        codes: bool,
    ) -> CodegenResult<Decoder<'ctx>> {
        let mut decoder = Decoder {
            words,
            dictionary,
            reference,
            width,
            codes,
            start,
            thread_first: None,
        };
        if p.target.is_gpu() && width > 0 && p.tile.threads.is_multiple_of(32) {
            let tid = p.b.build_int_z_extend(p.tid()?, p.i64(), "")?;
            let row = p.b.build_int_add(start, tid, "row")?;
            let (word, shift) = decoder.word_and_shift(p, row)?;
            let first = p.offset_ptr(p.i32().into(), words, word)?;
            decoder.thread_first = Some((first, shift));
        }
        Ok(decoder)
    }

    /// Decodes the items `take` chooses into `out`, the others being zero. Every item's words
    /// are requested before any is used (a dictionary entry, once looked up, is only stored), so
    /// a thread waits for memory once per round rather than once per item, which loads under a
    /// branch would otherwise cost.
    fn decode(
        &self,
        p: &Emitter<'ctx, '_>,
        out: TileArray<'ctx>,
        take: Take<'ctx>,
    ) -> CodegenResult<()> {
        let taken =
            |item: Item<'ctx>, then: &dyn Fn() -> CodegenResult<()>| match take.item(p, item)? {
                None => then(),
                Some(condition) => p.if_then(condition, then),
            };
        let low = p.tile_array(p.i32().into(), "low")?;
        let high = p.tile_array(p.i32().into(), "high")?;
        if self.width > 0 {
            p.for_each_item(|item| {
                p.set(low, item, p.const_i32(0))?;
                p.set(high, item, p.const_i32(0))?;
                if self.next_word_by_shuffle(take) {
                    let (word, _) = self.code_word(p, item)?;
                    return p.set(low, item, load_i32(p, word, p.const_i64(0))?);
                }
                taken(item, &|| {
                    let (word, _) = self.code_word(p, item)?;
                    p.set(low, item, load_i32(p, word, p.const_i64(0))?)?;
                    p.set(high, item, load_i32(p, word, p.const_i64(1))?)
                })
            })?;
        }
        // Only taken items decode: a warp whose rows are all rejected skips the arithmetic too.
        p.for_each_item(|item| {
            p.set(out, item, out.elem.const_zero())?;
            taken(item, &|| {
                let code = self.code(p, item, low, high, self.next_word_by_shuffle(take))?;
                let value = match self.reference {
                    _ if self.codes => code,
                    Some(reference) => p.b.build_int_add(reference, code, "unpacked")?,
                    None => {
                        let index = p.b.build_int_z_extend(code, p.i64(), "")?;
                        load_i32(p, self.dictionary, index)?
                    }
                };
                p.set(out, item, value)
            })
        })
    }

    /// Whether a lane takes the word after its code's first from the next lane rather than
    /// loading it: on the GPU, when every item is decoded. Where rows are selected, a lane loads
    /// both its words only when its row is taken, and a warp of rejected rows does nothing; a
    /// shuffle would need every lane, and cost the probing kernels that select rows more than
    /// the second load (SSB geomean 0.669 ms against 0.635, `docs/runs/2026-11-23-h100-fixed-width.txt`).
    fn next_word_by_shuffle(&self, take: Take<'ctx>) -> bool {
        self.thread_first.is_some() && matches!(take, Take::All)
    }

    /// The word of the stream that holds the first bit of `row`'s code, and the bit.
    fn word_and_shift(
        &self,
        p: &Emitter<'ctx, '_>,
        row: IntValue<'ctx>,
    ) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let bit =
            p.b.build_int_nuw_mul(row, p.const_i64(i64::from(self.width)), "bit")?;
        let word = p.b.build_right_shift(bit, p.const_i64(5), false, "word")?;
        let shift = p.b.build_int_truncate(bit, p.i32(), "")?;
        let shift = p.b.build_and(shift, p.const_i32(31), "shift")?;
        Ok((word, shift))
    }

    /// The word of the stream holding the first bit of the item's code, and the bit.
    fn code_word(
        &self,
        p: &Emitter<'ctx, '_>,
        item: Item<'ctx>,
    ) -> CodegenResult<(PointerValue<'ctx>, IntValue<'ctx>)> {
        // Item `k` is `k * threads` rows on: `k * threads * width / 32` words on, at the same bit.
        if let Some((first, shift)) = self.thread_first {
            let words_apart = p.const_i32(i64::from(p.tile.threads * self.width / 32));
            let apart = p.b.build_int_nuw_mul(item.index, words_apart, "")?;
            return Ok((p.offset_ptr(p.i32().into(), first, apart)?, shift));
        }
        let offset = p.b.build_int_z_extend(p.item_offset(item)?, p.i64(), "")?;
        let row = p.b.build_int_add(self.start, offset, "row")?;
        let (word, shift) = self.word_and_shift(p, row)?;
        Ok((p.offset_ptr(p.i32().into(), self.words, word)?, shift))
    }

    /// The item's code, from the two words loaded for it.
    fn code(
        &self,
        p: &Emitter<'ctx, '_>,
        item: Item<'ctx>,
        low: TileArray<'ctx>,
        high: TileArray<'ctx>,
        next_by_shuffle: bool,
    ) -> CodegenResult<IntValue<'ctx>> {
        if self.width == 0 {
            return Ok(p.const_i32(0));
        }
        let (_, shift) = self.code_word(p, item)?;
        let low = p.get(low, item)?.into_int_value();
        let high = if next_by_shuffle {
            shfl_down(p, low, 1)?
        } else {
            p.get(high, item)?.into_int_value()
        };
        let bits = funnel_right(p, low, high, shift)?;
        if self.width == 32 {
            return Ok(bits);
        }
        let mask = p.const_i32((1i64 << self.width) - 1);
        Ok(p.b.build_and(bits, mask, "code")?)
    }
}
