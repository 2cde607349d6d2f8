//! `shuffle` and `store`: a tile's selected rows written out as one contiguous run. The block
//! takes its run's place in the output with one atomic per tile (`reserve`); each column's
//! selected items are then compacted by their `scan` ranks into shared memory, and the block
//! writes the compacted run with consecutive threads on consecutive rows, so the writes are
//! coalesced whatever the selectivity. On the host a tile has one thread, which writes its
//! selected items straight to their place: that is already in row order.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

use crate::emit::{CodegenResult, Emitter, TileArray};

/// Shared memory a block may spend staging compacted columns: one tile of 8-byte values of the
/// default GPU tile (256 x 4). Columns are staged together while they fit, one at a time when
/// not; a tile too large for even one column is written from registers.
pub const STAGE_BYTES: u32 = 8 * 1024;

/// Shared memory `store_columns` takes (for the place of the run, and the staging).
pub fn shared_bytes(em: &Emitter<'_, '_>) -> u32 {
    if em.target.is_gpu() {
        8 + STAGE_BYTES
    } else {
        0
    }
}

/// Takes room for `count` rows (an `i32`, the same in every thread) at the end of the output
/// whose row count is the `i64` at `counter`; returns where the room starts (in every thread).
pub fn reserve<'ctx>(
    em: &Emitter<'ctx, '_>,
    counter: PointerValue<'ctx>,
    count: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    if !em.target.is_gpu() {
        return add_rows(em, counter, count);
    }
    let slot = em.shared_array("tessera.store.start", em.i64().into(), 1)?;
    let first =
        em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
    em.if_then(first, || {
        let start = add_rows(em, counter, count)?;
        em.b.build_store(slot, start)?;
        Ok(())
    })?;
    em.barrier()?;
    Ok(em
        .b
        .build_load(em.i64(), slot, "run_start")?
        .into_int_value())
}

/// Records `start`, where tile `tile`'s rows were written, in the `i64` array `starts`, from
/// one thread of the block: later kernels writing other columns of the same rows read it
/// (`recorded_start`) instead of taking room of their own.
pub fn record_start<'ctx>(
    em: &Emitter<'ctx, '_>,
    starts: PointerValue<'ctx>,
    tile: IntValue<'ctx>,
    start: IntValue<'ctx>,
) -> CodegenResult<()> {
    let first =
        em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
    em.if_then(first, || {
        em.b.build_store(em.offset_ptr(em.i64().into(), starts, tile)?, start)?;
        Ok(())
    })
}

/// Where tile `tile`'s rows were written, as `record_start` recorded it (in every thread).
pub fn recorded_start<'ctx>(
    em: &Emitter<'ctx, '_>,
    starts: PointerValue<'ctx>,
    tile: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let slot = em.offset_ptr(em.i64().into(), starts, tile)?;
    Ok(em
        .b
        .build_load(em.i64(), slot, "run_start")?
        .into_int_value())
}

/// Adds `count` rows (an `i32`) to the output's row count at `counter`, from one thread of the
/// block, for a tile written in place by `store_in_place`.
pub fn count_rows<'ctx>(
    em: &Emitter<'ctx, '_>,
    counter: PointerValue<'ctx>,
    count: IntValue<'ctx>,
) -> CodegenResult<()> {
    let first =
        em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
    em.if_then(first, || add_rows(em, counter, count).map(|_| ()))
}

/// Adds `count` (an `i32`) to the row count at `counter`; returns the count before.
fn add_rows<'ctx>(
    em: &Emitter<'ctx, '_>,
    counter: PointerValue<'ctx>,
    count: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let count = em.b.build_int_z_extend(count, em.i64(), "")?;
    Ok(em.b.build_atomicrmw(
        AtomicRMWBinOp::Add,
        counter,
        count,
        AtomicOrdering::Monotonic,
    )?)
}

/// Writes every row of the tile to the same row of the output (a pipeline that keeps every
/// row): no ranks, no staging, each warp's stores of one item contiguous. Only the last tile
/// checks `num_items`.
pub fn store_in_place<'ctx>(
    em: &Emitter<'ctx, '_>,
    columns: &[StoredColumn<'ctx>],
    tile_start: IntValue<'ctx>,
    num_items: IntValue<'ctx>,
) -> CodegenResult<()> {
    let full = em.b.build_int_compare(
        IntPredicate::EQ,
        num_items,
        em.const_i32(i64::from(em.tile.items())),
        "full",
    )?;
    let full_block = em.ctx.append_basic_block(em.function, "store_full_tile");
    let last_block = em.ctx.append_basic_block(em.function, "store_last_tile");
    let done = em.ctx.append_basic_block(em.function, "stored");
    em.b.build_conditional_branch(full, full_block, last_block)?;
    for (block, guarded) in [(full_block, false), (last_block, true)] {
        em.b.position_at_end(block);
        for column in columns {
            let elem = column.values.elem;
            let out = em.offset_ptr(elem, column.out, tile_start)?;
            em.for_each_item(|item| {
                let offset = em.item_offset(item)?;
                let write = || {
                    let value = em.get(column.values, item)?;
                    em.b.build_store(em.offset_ptr(elem, out, offset)?, value)?;
                    Ok(())
                };
                if guarded {
                    let inside =
                        em.b.build_int_compare(IntPredicate::SLT, offset, num_items, "")?;
                    em.if_then(inside, write)
                } else {
                    write()
                }
            })?;
        }
        em.b.build_unconditional_branch(done)?;
    }
    em.b.position_at_end(done);
    Ok(())
}

/// One column of a run: the tile's values and the output array they go to.
#[derive(Clone, Copy)]
pub struct StoredColumn<'ctx> {
    pub values: TileArray<'ctx>,
    pub out: PointerValue<'ctx>,
}

/// Writes each column's selected items (`flags`) to `out[start + rank]`, `ranks` and `count`
/// coming from `scan::tile_ranks`, the rows past `capacity` (an `i64`: the rows the output
/// holds) left out. Every thread of the block must call it with the same `count` and `start`.
pub fn store_columns<'ctx>(
    em: &Emitter<'ctx, '_>,
    columns: &[StoredColumn<'ctx>],
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
    count: IntValue<'ctx>,
    start: IntValue<'ctx>,
    capacity: IntValue<'ctx>,
) -> CodegenResult<()> {
    // The rows of the run that fit: the runtime runs the query again with room for all of
    // them when some do not.
    let room = em.b.build_int_sub(capacity, start, "")?;
    let room = pick(em, IntPredicate::SGT, room, em.const_i64(0))?;
    let count = em.b.build_int_z_extend(count, em.i64(), "")?;
    let count = pick(em, IntPredicate::SLT, count, room)?;
    let width = |c: &StoredColumn| value_bytes(c.values.elem);
    let tile_bytes = |c: &StoredColumn| em.tile.items() * width(c);
    if !em.target.is_gpu() || columns.iter().any(|c| tile_bytes(c) > STAGE_BYTES) {
        for column in columns {
            scatter(em, *column, flags, ranks, start, count)?;
        }
        return Ok(());
    }
    let stage = em.shared_array("tessera.store.stage", em.i64().into(), STAGE_BYTES / 8)?;
    let mut batch: Vec<(StoredColumn, u32)> = Vec::new();
    let mut used = 0;
    for column in columns {
        if used + tile_bytes(column) > STAGE_BYTES {
            store_batch(em, &batch, stage, flags, ranks, count, start)?;
            batch.clear();
            used = 0;
        }
        batch.push((*column, used));
        used += tile_bytes(column);
    }
    store_batch(em, &batch, stage, flags, ranks, count, start)
}

/// Compacts the batch's columns into their parts of the stage (at byte offsets), then copies
/// the compacted runs out.
fn store_batch<'ctx>(
    em: &Emitter<'ctx, '_>,
    batch: &[(StoredColumn<'ctx>, u32)],
    stage: PointerValue<'ctx>,
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
    count: IntValue<'ctx>,
    start: IntValue<'ctx>,
) -> CodegenResult<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let part = |offset: u32| em.offset_ptr(em.i8().into(), stage, em.const_i32(i64::from(offset)));
    for (column, offset) in batch {
        let staged = part(*offset)?;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let rank = em.get(ranks, item)?.into_int_value();
                let value = em.get(column.values, item)?;
                let slot = em.offset_ptr(column.values.elem, staged, rank)?;
                em.b.build_store(slot, value)?;
                Ok(())
            })
        })?;
    }
    em.barrier()?;
    for (column, offset) in batch {
        let staged = part(*offset)?;
        let elem = column.values.elem;
        let out = em.offset_ptr(elem, column.out, start)?;
        em.for_each_strided(count, |index| {
            let value =
                em.b.build_load(elem, em.offset_ptr(elem, staged, index)?, "")?;
            em.b.build_store(em.offset_ptr(elem, out, index)?, value)?;
            Ok(())
        })?;
    }
    // The stage is written again by the next batch or tile.
    em.barrier()
}

/// Writes each selected item straight to `out[start + rank]`, for ranks below `room` (an
/// `i64`).
fn scatter<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: StoredColumn<'ctx>,
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
    start: IntValue<'ctx>,
    room: IntValue<'ctx>,
) -> CodegenResult<()> {
    let elem = column.values.elem;
    let out = em.offset_ptr(elem, column.out, start)?;
    em.for_each_item(|item| {
        let flag = em.truth(em.get(flags, item)?.into_int_value())?;
        let rank = em.get(ranks, item)?.into_int_value();
        let wide = em.b.build_int_z_extend(rank, em.i64(), "")?;
        let fits = em.b.build_int_compare(IntPredicate::SLT, wide, room, "")?;
        let write = em.b.build_and(flag, fits, "")?;
        em.if_then(write, || {
            let value = em.get(column.values, item)?;
            em.b.build_store(em.offset_ptr(elem, out, rank)?, value)?;
            Ok(())
        })
    })
}

/// `a` or `b`, whichever `predicate` prefers.
fn pick<'ctx>(
    em: &Emitter<'ctx, '_>,
    predicate: IntPredicate,
    a: IntValue<'ctx>,
    b: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let first = em.b.build_int_compare(predicate, a, b, "")?;
    Ok(em.b.build_select(first, a, b, "")?.into_int_value())
}

fn value_bytes(ty: BasicTypeEnum<'_>) -> u32 {
    match ty {
        BasicTypeEnum::IntType(t) => t.get_bit_width().div_ceil(8),
        BasicTypeEnum::FloatType(t) if t == t.get_context().f32_type() => 4,
        _ => 8,
    }
}
