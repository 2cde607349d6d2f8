//! `load`, `load_sel` and `init_flags`: a tile of a column into a thread's registers, and the
//! selection flags a pipeline starts with. Full tiles take an unguarded path; the last tile
//! guards every item.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::emit::{CodegenResult, Emitter, TileArray};

use super::primitive;

/// Loads the tile starting at row `tile_start` of `column` into `out`; items past `num_items`
/// are zero.
pub fn load<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: PointerValue<'ctx>,
    tile_start: IntValue<'ctx>,
    num_items: IntValue<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    let elem = out.elem;
    let ty = em.ctx.void_type().fn_type(
        &[
            em.global_ptr().into(),
            em.i64().into(),
            em.i32().into(),
            em.local_ptr().into(),
        ],
        false,
    );
    let f = primitive(em, &format!("tessera.load.{}", type_name(elem)), ty, |p| {
        let column = param_ptr(p, 0)?;
        let start = param_int(p, 1)?;
        let count = param_int(p, 2)?;
        let out = TileArray {
            ptr: param_ptr(p, 3)?,
            ..out
        };
        let base = p.offset_ptr(elem, column, start)?;
        let first = p.thread_first(elem, base)?;
        full_or_last_tile(
            p,
            count,
            || {
                p.for_each_item(|item| {
                    let value = p.b.build_load(elem, p.item_ptr(elem, first, item)?, "")?;
                    p.set(out, item, value)
                })
            },
            || {
                p.for_each_item(|item| {
                    let offset = p.item_offset(item)?;
                    let inside =
                        p.b.build_int_compare(IntPredicate::SLT, offset, count, "")?;
                    p.set(out, item, elem.const_zero())?;
                    p.if_then(inside, || {
                        let value = p.b.build_load(elem, p.item_ptr(elem, first, item)?, "")?;
                        p.set(out, item, value)
                    })
                })
            },
        )?;
        p.b.build_return(None)?;
        Ok(())
    })?;
    em.b.build_call(
        f,
        &[
            column.into(),
            tile_start.into(),
            num_items.into(),
            out.ptr.into(),
        ],
        "",
    )?;
    Ok(())
}

/// Loads only the items whose flag is set, so rows already rejected cost no memory traffic
/// (whole sectors of rejected rows are never fetched).
pub fn load_sel<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: PointerValue<'ctx>,
    tile_start: IntValue<'ctx>,
    flags: TileArray<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    let elem = out.elem;
    let ty = em.ctx.void_type().fn_type(
        &[
            em.global_ptr().into(),
            em.i64().into(),
            em.local_ptr().into(),
            em.local_ptr().into(),
        ],
        false,
    );
    let f = primitive(
        em,
        &format!("tessera.load_sel.{}", type_name(elem)),
        ty,
        |p| {
            let column = param_ptr(p, 0)?;
            let start = param_int(p, 1)?;
            let flags = TileArray {
                ptr: param_ptr(p, 2)?,
                ..flags
            };
            let out = TileArray {
                ptr: param_ptr(p, 3)?,
                ..out
            };
            let base = p.offset_ptr(elem, column, start)?;
            let first = p.thread_first(elem, base)?;
            p.for_each_item(|item| {
                let selected = p.truth(p.get(flags, item)?.into_int_value())?;
                // Rejected items hold zero, so later arithmetic on them is defined (and ignored).
                // The load stays under a branch: `load_sel` runs when few rows survive, where
                // loading for every item (even from one shared address) costs more than the
                // parallelism it buys.
                p.set(out, item, elem.const_zero())?;
                p.if_then(selected, || {
                    let value = p.b.build_load(elem, p.item_ptr(elem, first, item)?, "")?;
                    p.set(out, item, value)
                })
            })?;
            p.b.build_return(None)?;
            Ok(())
        },
    )?;
    em.b.build_call(
        f,
        &[
            column.into(),
            tile_start.into(),
            flags.ptr.into(),
            out.ptr.into(),
        ],
        "",
    )?;
    Ok(())
}

/// Sets the flag of every item that is a row of the table (all of them in a full tile).
pub fn init_flags<'ctx>(
    em: &Emitter<'ctx, '_>,
    num_items: IntValue<'ctx>,
    flags: TileArray<'ctx>,
) -> CodegenResult<()> {
    let ty = em
        .ctx
        .void_type()
        .fn_type(&[em.i32().into(), em.local_ptr().into()], false);
    let f = primitive(em, "tessera.init_flags", ty, |p| {
        let count = param_int(p, 0)?;
        let flags = TileArray {
            ptr: param_ptr(p, 1)?,
            ..flags
        };
        p.for_each_item(|item| {
            let offset = p.item_offset(item)?;
            let inside =
                p.b.build_int_compare(IntPredicate::SLT, offset, count, "")?;
            p.set(flags, item, p.flag(inside)?)
        })?;
        p.b.build_return(None)?;
        Ok(())
    })?;
    em.b.build_call(f, &[num_items.into(), flags.ptr.into()], "")?;
    Ok(())
}

/// Generates `full` for a tile of `count` items that is full, `last` otherwise (the last tile
/// of a table, whose items past `count` must be left alone); the builder continues after both.
pub(crate) fn full_or_last_tile<'ctx>(
    p: &Emitter<'ctx, '_>,
    count: IntValue<'ctx>,
    full: impl FnOnce() -> CodegenResult<()>,
    last: impl FnOnce() -> CodegenResult<()>,
) -> CodegenResult<()> {
    let is_full = p.b.build_int_compare(
        IntPredicate::EQ,
        count,
        p.const_i32(i64::from(p.tile.items())),
        "full",
    )?;
    let full_block = p.ctx.append_basic_block(p.function, "full_tile");
    let last_block = p.ctx.append_basic_block(p.function, "last_tile");
    let done = p.ctx.append_basic_block(p.function, "done");
    p.b.build_conditional_branch(is_full, full_block, last_block)?;
    p.b.position_at_end(full_block);
    full()?;
    p.b.build_unconditional_branch(done)?;
    p.b.position_at_end(last_block);
    last()?;
    p.b.build_unconditional_branch(done)?;
    p.b.position_at_end(done);
    Ok(())
}

pub(crate) fn param_ptr<'ctx>(p: &Emitter<'ctx, '_>, i: u32) -> CodegenResult<PointerValue<'ctx>> {
    p.function
        .get_nth_param(i)
        .map(|v| v.into_pointer_value())
        .ok_or_else(|| crate::emit::CodegenError::Invalid(format!("missing parameter {i}")))
}

pub(crate) fn param_int<'ctx>(p: &Emitter<'ctx, '_>, i: u32) -> CodegenResult<IntValue<'ctx>> {
    p.function
        .get_nth_param(i)
        .map(|v| v.into_int_value())
        .ok_or_else(|| crate::emit::CodegenError::Invalid(format!("missing parameter {i}")))
}

/// A short name of an element type for primitive names (`i32`, `f64`, ...).
pub(crate) fn type_name(ty: BasicTypeEnum<'_>) -> String {
    match ty {
        BasicTypeEnum::IntType(t) => format!("i{}", t.get_bit_width()),
        BasicTypeEnum::FloatType(t) => {
            if t == t.get_context().f32_type() {
                "f32".into()
            } else {
                "f64".into()
            }
        }
        _ => "other".into(),
    }
}
