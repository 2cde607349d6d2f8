//! `unpack_fixed`: a tile of a column packed at one width for the whole column (`pack` or
//! `dict`, layout in `tessera_storage::compress`) decoded into a thread's registers, in place of
//! `load` or `load_sel`.
//!
//! A code's bits lie at `row * width` in the column's bit stream, so an item is decoded from
//! its row alone: the one or two words that hold its code, a funnel shift, a mask, then the
//! reference added (`pack`) or the dictionary entry looked up (`dict`). The items of a warp are
//! consecutive rows, so their words are consecutive too and the loads coalesce as a plain
//! column's do, over `width / 32` of the bytes. Nothing is staged and no thread waits for
//! another, so the same code runs on the host, and only selected rows need be decoded.

use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use tessera_storage::compress::Scheme;

use crate::emit::{CodegenError, CodegenResult, Emitter, Item, TileArray};

use super::load::{param_int, param_ptr, type_name};
use super::primitive;
use super::unpack::{funnel_right, load_i32};

/// A `pack` or `dict` column as a kernel receives it.
#[derive(Clone, Copy)]
pub struct FixedColumn<'ctx> {
    pub scheme: Scheme,
    /// Bits every code takes, 0 to 32.
    pub width: u32,
    /// The codes' bit stream, with a spare word after it.
    pub words: PointerValue<'ctx>,
    /// `pack`: the reference alone; `dict`: the values codes index.
    pub dictionary: PointerValue<'ctx>,
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
    if !column.scheme.is_fixed_width() || column.width > 32 {
        return Err(CodegenError::Invalid(format!(
            "{} at {} bits is not a fixed-width scheme",
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
    let name = format!(
        "tessera.unpack_fixed.{}.w{}.{mode}.{}",
        column.scheme,
        column.width,
        type_name(out.elem)
    );
    let (scheme, width) = (column.scheme, column.width);
    let f = primitive(em, &name, ty, |p| {
        let words = param_ptr(p, 0)?;
        let dictionary = param_ptr(p, 1)?;
        let start = param_int(p, 2)?;
        let out = TileArray {
            ptr: param_ptr(p, 4)?,
            ..out
        };
        let reference = match scheme {
            Scheme::Pack => Some(load_i32(p, dictionary, p.const_i64(0))?),
            _ => None,
        };
        let decoder = Decoder {
            words,
            dictionary,
            reference,
            width,
            start,
        };
        match rows {
            Rows::First(_) => {
                let count = param_int(p, 3)?;
                let full = p.b.build_int_compare(
                    IntPredicate::EQ,
                    count,
                    p.const_i32(i64::from(p.tile.items())),
                    "full",
                )?;
                let full_block = p.ctx.append_basic_block(p.function, "full_tile");
                let partial_block = p.ctx.append_basic_block(p.function, "last_tile");
                let done = p.ctx.append_basic_block(p.function, "done");
                p.b.build_conditional_branch(full, full_block, partial_block)?;
                p.b.position_at_end(full_block);
                p.for_each_item(|item| p.set(out, item, decoder.value(p, item)?))?;
                p.b.build_unconditional_branch(done)?;
                p.b.position_at_end(partial_block);
                p.for_each_item(|item| {
                    let offset = p.item_offset(item)?;
                    let inside =
                        p.b.build_int_compare(IntPredicate::SLT, offset, count, "")?;
                    p.set(out, item, out.elem.const_zero())?;
                    p.if_then(inside, || p.set(out, item, decoder.value(p, item)?))
                })?;
                p.b.build_unconditional_branch(done)?;
                p.b.position_at_end(done);
            }
            Rows::Selected(flags) => {
                let flags = TileArray {
                    ptr: param_ptr(p, 3)?,
                    ..flags
                };
                p.for_each_item(|item| {
                    let selected = p.truth(p.get(flags, item)?.into_int_value())?;
                    p.set(out, item, out.elem.const_zero())?;
                    p.if_then(selected, || p.set(out, item, decoder.value(p, item)?))
                })?;
            }
        }
        p.b.build_return(None)?;
        Ok(())
    })?;
    em.b.build_call(
        f,
        &[
            column.words.into(),
            column.dictionary.into(),
            tile_start.into(),
            selector,
            out.ptr.into(),
        ],
        "",
    )?;
    Ok(())
}

/// What decoding an item needs inside the primitive.
struct Decoder<'ctx> {
    words: PointerValue<'ctx>,
    dictionary: PointerValue<'ctx>,
    /// `pack`'s reference, loaded once per tile.
    reference: Option<IntValue<'ctx>>,
    width: u32,
    start: IntValue<'ctx>,
}

impl<'ctx> Decoder<'ctx> {
    fn value(&self, p: &Emitter<'ctx, '_>, item: Item<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        let code = self.code(p, item)?;
        match self.reference {
            Some(reference) => Ok(p.b.build_int_add(reference, code, "unpacked")?),
            None => {
                let index = p.b.build_int_z_extend(code, p.i64(), "")?;
                load_i32(p, self.dictionary, index)
            }
        }
    }

    /// The item's code: bits `row * width ..` of the stream.
    fn code(&self, p: &Emitter<'ctx, '_>, item: Item<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        if self.width == 0 {
            return Ok(p.const_i32(0));
        }
        let offset = p.b.build_int_z_extend(p.item_offset(item)?, p.i64(), "")?;
        let row = p.b.build_int_add(self.start, offset, "row")?;
        let bit =
            p.b.build_int_nuw_mul(row, p.const_i64(i64::from(self.width)), "bit")?;
        let word = p.b.build_right_shift(bit, p.const_i64(5), false, "word")?;
        let low = load_i32(p, self.words, word)?;
        let next = p.b.build_int_add(word, p.const_i64(1), "")?;
        let high = load_i32(p, self.words, next)?;
        let shift = p.b.build_int_truncate(bit, p.i32(), "")?;
        let shift = p.b.build_and(shift, p.const_i32(31), "shift")?;
        let bits = funnel_right(p, low, high, shift)?;
        if self.width == 32 {
            return Ok(bits);
        }
        let mask = p.const_i32((1i64 << self.width) - 1);
        Ok(p.b.build_and(bits, mask, "code")?)
    }
}
