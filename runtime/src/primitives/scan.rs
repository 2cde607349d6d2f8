//! `scan`: the ranks of a tile's selected rows. Every selected item learns how many selected rows
//! come before it in row order (its place in the tile's compacted run), and every thread learns
//! the tile's total. On the GPU a warp ranks its 32 rows of one item with a ballot; the counts
//! per (item, warp), which in row order come item by item and warp by warp within an item, are
//! scanned by the first warp in shared memory. On the host a tile has one thread, and the scan
//! is a running count.

use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::emit::{basic, CodegenError, CodegenResult, Emitter, TileArray};

use super::primitive;

/// Shared memory the GPU scan takes: a count per (item, warp) and the total.
pub fn shared_bytes(em: &Emitter<'_, '_>) -> u32 {
    per_item_and_warp_bytes(em, 4)
}

/// Shared memory for a value of `width` bytes per (item, warp) and one more (none on the host).
fn per_item_and_warp_bytes(em: &Emitter<'_, '_>, width: u32) -> u32 {
    if em.target.is_gpu() {
        (em.tile.items_per_thread * em.tile.warps() + 1) * width
    } else {
        0
    }
}

/// Calls primitive `name` on two tile arrays, building it the first time with `body` (which
/// gets the arrays as the primitive's parameters); returns the `ret` value the primitive
/// returns, the same in every thread.
fn two_tile_primitive<'ctx>(
    em: &Emitter<'ctx, '_>,
    name: &str,
    ret: inkwell::types::IntType<'ctx>,
    (first, second): (TileArray<'ctx>, TileArray<'ctx>),
    label: &str,
    body: impl FnOnce(
        &Emitter<'ctx, '_>,
        TileArray<'ctx>,
        TileArray<'ctx>,
    ) -> CodegenResult<IntValue<'ctx>>,
) -> CodegenResult<IntValue<'ctx>> {
    let ty = ret.fn_type(&[em.local_ptr().into(), em.local_ptr().into()], false);
    let f = primitive(em, name, ty, |p| {
        let param = |i: u32| {
            p.function
                .get_nth_param(i)
                .map(|v| v.into_pointer_value())
                .ok_or_else(|| CodegenError::Invalid(format!("{name} takes two tile arrays")))
        };
        let first = TileArray {
            ptr: param(0)?,
            ..first
        };
        let second = TileArray {
            ptr: param(1)?,
            ..second
        };
        let result = body(p, first, second)?;
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    let call =
        em.b.build_call(f, &[first.ptr.into(), second.ptr.into()], label)?;
    Ok(basic(call.try_as_basic_value().basic())?.into_int_value())
}

/// Writes into `ranks` (an `i32` per item) each selected item's rank among the tile's selected
/// rows, and returns the number of selected rows (an `i32`, the same in every thread). Items
/// that are not selected get an unspecified rank.
pub fn tile_ranks<'ctx>(
    em: &Emitter<'ctx, '_>,
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    two_tile_primitive(
        em,
        "tessera.scan.ranks",
        em.i32(),
        (flags, ranks),
        "selected",
        |p, flags, ranks| {
            if p.target.is_gpu() {
                ranks_gpu(p, flags, ranks)
            } else {
                ranks_host(p, flags, ranks)
            }
        },
    )
}

fn ranks_host<'ctx>(
    p: &Emitter<'ctx, '_>,
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let running = p.alloca(p.i32().into(), "running")?;
    p.b.build_store(running, p.const_i32(0))?;
    p.for_each_item(|item| {
        let before = p.b.build_load(p.i32(), running, "")?.into_int_value();
        p.set(ranks, item, before)?;
        let flag = p.get(flags, item)?.into_int_value();
        let flag = p.b.build_int_z_extend(flag, p.i32(), "")?;
        let after = p.b.build_int_add(before, flag, "")?;
        p.b.build_store(running, after)?;
        Ok(())
    })?;
    Ok(p.b.build_load(p.i32(), running, "")?.into_int_value())
}

fn ranks_gpu<'ctx>(
    p: &Emitter<'ctx, '_>,
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let warps = p.tile.warps();
    let counts_len = p.tile.items_per_thread * warps;
    let counts = p.shared_array("tessera.scan.counts", p.i32().into(), counts_len + 1)?;
    let tid = p.tid()?;
    let lane = p.b.build_and(tid, p.const_i32(31), "lane")?;
    let warp = p.b.build_right_shift(tid, p.const_i32(5), false, "warp")?;
    let leader =
        p.b.build_int_compare(IntPredicate::EQ, lane, p.const_i32(0), "")?;
    let below = sreg(p, "llvm.nvvm.read.ptx.sreg.lanemask.lt")?;
    // Each warp ranks its lanes within each item and publishes the item's count.
    p.for_each_item(|item| {
        let flag = p.truth(p.get(flags, item)?.into_int_value())?;
        let mask = ballot(p, flag)?;
        let earlier = p.b.build_and(mask, below, "")?;
        p.set(ranks, item, popcount(p, earlier)?)?;
        let slot = item_warp_slot(p, counts, p.i32(), item.index, warp)?;
        let count = popcount(p, mask)?;
        p.if_then(leader, || {
            p.b.build_store(slot, count)?;
            Ok(())
        })
    })?;
    p.barrier()?;
    scan_counts(p, counts, p.i32(), counts_len, lane, warp, leader)?;
    p.barrier()?;
    p.for_each_item(|item| {
        let slot = item_warp_slot(p, counts, p.i32(), item.index, warp)?;
        let before = p.b.build_load(p.i32(), slot, "")?.into_int_value();
        let within = p.get(ranks, item)?.into_int_value();
        p.set(ranks, item, p.b.build_int_add(before, within, "rank")?)
    })?;
    let total = p.offset_ptr(p.i32().into(), counts, p.const_i32(i64::from(counts_len)))?;
    // Each warp reads only its own counts and the total before the next tile's scan writes
    // them again after its first barrier, so no barrier is needed here.
    Ok(p.b.build_load(p.i32(), total, "total")?.into_int_value())
}

/// The first warp turns `counts[0 .. len]` (in shared memory, `i32` or `i64`, as the array's
/// element type says through `ty`) into exclusive prefix sums, 32 at a time, and writes the
/// total at `counts[len]` (lane 0, the `leader`, does).
#[allow(clippy::too_many_arguments)]
fn scan_counts<'ctx>(
    p: &Emitter<'ctx, '_>,
    counts: PointerValue<'ctx>,
    ty: inkwell::types::IntType<'ctx>,
    len: u32,
    lane: IntValue<'ctx>,
    warp: IntValue<'ctx>,
    leader: IntValue<'ctx>,
) -> CodegenResult<()> {
    let first_warp =
        p.b.build_int_compare(IntPredicate::EQ, warp, p.const_i32(0), "")?;
    p.if_then(first_warp, || {
        let mut carry = ty.const_zero();
        for chunk in 0..len.div_ceil(32) {
            let index =
                p.b.build_int_add(lane, p.const_i32(i64::from(chunk * 32)), "")?;
            let inside =
                p.b.build_int_compare(IntPredicate::ULT, index, p.const_i32(i64::from(len)), "")?;
            let slot = p.offset_ptr(ty.into(), counts, index)?;
            let value = p.alloca(ty.into(), "count")?;
            p.b.build_store(value, ty.const_zero())?;
            p.if_then(inside, || {
                let v = p.b.build_load(ty, slot, "")?;
                p.b.build_store(value, v)?;
                Ok(())
            })?;
            let value = p.b.build_load(ty, value, "")?.into_int_value();
            let inclusive = warp_inclusive_sum(p, value, lane)?;
            let exclusive = p.b.build_int_sub(inclusive, value, "")?;
            let exclusive = p.b.build_int_add(exclusive, carry, "")?;
            p.if_then(inside, || {
                p.b.build_store(slot, exclusive)?;
                Ok(())
            })?;
            let chunk_total = if ty.get_bit_width() == 64 {
                shfl_idx_i64(p, inclusive, 31)?
            } else {
                shfl_idx(p, inclusive, 31)?
            };
            carry = p.b.build_int_add(carry, chunk_total, "carry")?;
        }
        p.if_then(leader, || {
            let total = p.offset_ptr(ty.into(), counts, p.const_i32(i64::from(len)))?;
            p.b.build_store(total, carry)?;
            Ok(())
        })
    })
}

/// `value` (an `i64`) as lane `lane` holds it.
fn shfl_idx_i64<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    lane: u32,
) -> CodegenResult<IntValue<'ctx>> {
    shuffle_halves(p, value, |half| shfl_idx(p, half, lane))
}

/// Shared memory `tile_offsets` takes on the GPU: an `i64` per (item, warp) and the total.
pub fn offsets_shared_bytes(em: &Emitter<'_, '_>) -> u32 {
    per_item_and_warp_bytes(em, 8)
}

/// Writes into `offsets` (an `i64` per item) the sum of `counts` (an `i32` per item, none
/// negative) over the items before it in row order, and returns the tile's total (an `i64`,
/// the same in every thread): where each item's run begins when every item writes `count`
/// values, one after another.
pub fn tile_offsets<'ctx>(
    em: &Emitter<'ctx, '_>,
    counts: TileArray<'ctx>,
    offsets: TileArray<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    two_tile_primitive(
        em,
        "tessera.scan.offsets",
        em.i64(),
        (counts, offsets),
        "matches",
        |p, counts, offsets| {
            let count_at = |item| -> CodegenResult<IntValue<'ctx>> {
                let count = p.get(counts, item)?.into_int_value();
                Ok(p.b.build_int_z_extend(count, p.i64(), "")?)
            };
            let total = if p.target.is_gpu() {
                let warps = p.tile.warps();
                let len = p.tile.items_per_thread * warps;
                let sums = p.shared_array("tessera.scan.sums", p.i64().into(), len + 1)?;
                let tid = p.tid()?;
                let lane = p.b.build_and(tid, p.const_i32(31), "lane")?;
                let warp = p.b.build_right_shift(tid, p.const_i32(5), false, "warp")?;
                let last =
                    p.b.build_int_compare(IntPredicate::EQ, lane, p.const_i32(31), "")?;
                p.for_each_item(|item| {
                    let count = count_at(item)?;
                    let inclusive = warp_inclusive_sum(p, count, lane)?;
                    p.set(offsets, item, p.b.build_int_sub(inclusive, count, "")?)?;
                    let slot = item_warp_slot(p, sums, p.i64(), item.index, warp)?;
                    p.if_then(last, || {
                        p.b.build_store(slot, inclusive)?;
                        Ok(())
                    })
                })?;
                p.barrier()?;
                let leader =
                    p.b.build_int_compare(IntPredicate::EQ, lane, p.const_i32(0), "")?;
                scan_counts(p, sums, p.i64(), len, lane, warp, leader)?;
                p.barrier()?;
                p.for_each_item(|item| {
                    let slot = item_warp_slot(p, sums, p.i64(), item.index, warp)?;
                    let before = p.b.build_load(p.i64(), slot, "")?.into_int_value();
                    let within = p.get(offsets, item)?.into_int_value();
                    p.set(offsets, item, p.b.build_int_add(before, within, "offset")?)
                })?;
                let total = p.offset_ptr(p.i64().into(), sums, p.const_i32(i64::from(len)))?;
                // As with `tile_ranks`: the next call writes the sums only after its first barrier.
                p.b.build_load(p.i64(), total, "total")?.into_int_value()
            } else {
                let running = p.alloca(p.i64().into(), "running")?;
                p.b.build_store(running, p.const_i64(0))?;
                p.for_each_item(|item| {
                    let before = p.b.build_load(p.i64(), running, "")?.into_int_value();
                    p.set(offsets, item, before)?;
                    let after = p.b.build_int_add(before, count_at(item)?, "")?;
                    p.b.build_store(running, after)?;
                    Ok(())
                })?;
                p.b.build_load(p.i64(), running, "")?.into_int_value()
            };
            Ok(total)
        },
    )
}

/// `array[item * warps + warp]`, of `ty`: the slot of one (item, warp) pair's count.
fn item_warp_slot<'ctx>(
    p: &Emitter<'ctx, '_>,
    array: PointerValue<'ctx>,
    ty: inkwell::types::IntType<'ctx>,
    item: IntValue<'ctx>,
    warp: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let warps = p.const_i32(i64::from(p.tile.warps()));
    let index =
        p.b.build_int_add(p.b.build_int_mul(item, warps, "")?, warp, "")?;
    p.offset_ptr(ty.into(), array, index)
}

/// The inclusive sum of `value` (an `i32` or an `i64`) over lanes `0 ..= lane` of the warp.
pub(crate) fn warp_inclusive_sum<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    lane: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let mut sum = value;
    let mut offset = 1;
    while offset < 32 {
        let other = if value.get_type().get_bit_width() == 64 {
            shfl_up_i64(p, sum, offset)?
        } else {
            shfl_up(p, sum, offset)?
        };
        let has =
            p.b.build_int_compare(IntPredicate::UGE, lane, p.const_i32(i64::from(offset)), "")?;
        let add =
            p.b.build_select(has, other, value.get_type().const_zero(), "")?
                .into_int_value();
        sum = p.b.build_int_add(sum, add, "")?;
        offset *= 2;
    }
    Ok(sum)
}

pub(crate) fn sreg<'ctx>(p: &Emitter<'ctx, '_>, name: &str) -> CodegenResult<IntValue<'ctx>> {
    let f = p.intrinsic(name, p.i32().fn_type(&[], false));
    let v = p.b.build_call(f, &[], "")?;
    Ok(basic(v.try_as_basic_value().basic())?.into_int_value())
}

pub(crate) fn ballot<'ctx>(
    p: &Emitter<'ctx, '_>,
    flag: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let f = p.intrinsic(
        "llvm.nvvm.vote.ballot.sync",
        p.i32().fn_type(&[p.i32().into(), p.i1().into()], false),
    );
    let v =
        p.b.build_call(f, &[p.const_i32(-1).into(), flag.into()], "ballot")?;
    Ok(basic(v.try_as_basic_value().basic())?.into_int_value())
}

pub(crate) fn popcount<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let f = p.intrinsic("llvm.ctpop.i32", p.i32().fn_type(&[p.i32().into()], false));
    let v = p.b.build_call(f, &[value.into()], "")?;
    Ok(basic(v.try_as_basic_value().basic())?.into_int_value())
}

pub(crate) fn shfl_up<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    offset: u32,
) -> CodegenResult<IntValue<'ctx>> {
    shfl(p, "llvm.nvvm.shfl.sync.up.i32", value, offset, 0)
}

/// The value of the lane `offset` above this one (its own, past the warp's last lane).
pub(crate) fn shfl_down<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    offset: u32,
) -> CodegenResult<IntValue<'ctx>> {
    shfl(p, "llvm.nvvm.shfl.sync.down.i32", value, offset, 31)
}

/// `shfl_up` of a 64-bit value, as its two halves.
fn shfl_up_i64<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    offset: u32,
) -> CodegenResult<IntValue<'ctx>> {
    shuffle_halves(p, value, |half| shfl_up(p, half, offset))
}

/// An `i64` moved between lanes as its two 32-bit halves, each by `shuffle`.
fn shuffle_halves<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    shuffle: impl Fn(IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>>,
) -> CodegenResult<IntValue<'ctx>> {
    let (i32t, i64t) = (p.i32(), p.i64());
    let low = p.b.build_int_truncate(value, i32t, "")?;
    let high = p.b.build_right_shift(value, p.const_i64(32), false, "")?;
    let high = p.b.build_int_truncate(high, i32t, "")?;
    let low = p.b.build_int_z_extend(shuffle(low)?, i64t, "")?;
    let high = p.b.build_int_z_extend(shuffle(high)?, i64t, "")?;
    let high = p.b.build_left_shift(high, p.const_i64(32), "")?;
    Ok(p.b.build_or(high, low, "")?)
}

pub(crate) fn shfl_idx<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    lane: u32,
) -> CodegenResult<IntValue<'ctx>> {
    shfl(p, "llvm.nvvm.shfl.sync.idx.i32", value, lane, 31)
}

pub(crate) fn shfl<'ctx>(
    p: &Emitter<'ctx, '_>,
    name: &str,
    value: IntValue<'ctx>,
    operand: u32,
    clamp: i64,
) -> CodegenResult<IntValue<'ctx>> {
    let i32 = p.i32();
    let f = p.intrinsic(
        name,
        i32.fn_type(&[i32.into(), i32.into(), i32.into(), i32.into()], false),
    );
    let args = [
        p.const_i32(-1).into(),
        value.into(),
        p.const_i32(i64::from(operand)).into(),
        p.const_i32(clamp).into(),
    ];
    let v = p.b.build_call(f, &args, "shfl")?;
    Ok(basic(v.try_as_basic_value().basic())?.into_int_value())
}
