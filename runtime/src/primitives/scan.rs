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
    if em.target.is_gpu() {
        (em.tile.items_per_thread * em.tile.warps() + 1) * 4
    } else {
        0
    }
}

/// Writes into `ranks` (an `i32` per item) each selected item's rank among the tile's selected
/// rows, and returns the number of selected rows (an `i32`, the same in every thread). Items
/// that are not selected get an unspecified rank.
pub fn tile_ranks<'ctx>(
    em: &Emitter<'ctx, '_>,
    flags: TileArray<'ctx>,
    ranks: TileArray<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let ty = em
        .i32()
        .fn_type(&[em.local_ptr().into(), em.local_ptr().into()], false);
    let f = primitive(em, "tessera.scan.ranks", ty, |p| {
        let param = |i: u32| {
            p.function
                .get_nth_param(i)
                .map(|v| v.into_pointer_value())
                .ok_or_else(|| CodegenError::Invalid("scan takes flags and ranks".into()))
        };
        let flags = TileArray {
            ptr: param(0)?,
            ..flags
        };
        let ranks = TileArray {
            ptr: param(1)?,
            ..ranks
        };
        let total = if p.target.is_gpu() {
            ranks_gpu(p, flags, ranks)?
        } else {
            ranks_host(p, flags, ranks)?
        };
        p.b.build_return(Some(&total))?;
        Ok(())
    })?;
    let call =
        em.b.build_call(f, &[flags.ptr.into(), ranks.ptr.into()], "selected")?;
    Ok(basic(call.try_as_basic_value().basic())?.into_int_value())
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
        let slot = count_slot(p, counts, item.index, warp)?;
        let count = popcount(p, mask)?;
        p.if_then(leader, || {
            p.b.build_store(slot, count)?;
            Ok(())
        })
    })?;
    p.barrier()?;
    // The first warp turns the counts into exclusive prefix sums, 32 at a time.
    let first_warp =
        p.b.build_int_compare(IntPredicate::EQ, warp, p.const_i32(0), "")?;
    p.if_then(first_warp, || {
        let mut carry = p.const_i32(0);
        for chunk in 0..counts_len.div_ceil(32) {
            let index =
                p.b.build_int_add(lane, p.const_i32(i64::from(chunk * 32)), "")?;
            let inside = p.b.build_int_compare(
                IntPredicate::ULT,
                index,
                p.const_i32(i64::from(counts_len)),
                "",
            )?;
            let slot = p.offset_ptr(p.i32().into(), counts, index)?;
            let value = p.alloca(p.i32().into(), "count")?;
            p.b.build_store(value, p.const_i32(0))?;
            p.if_then(inside, || {
                let v = p.b.build_load(p.i32(), slot, "")?;
                p.b.build_store(value, v)?;
                Ok(())
            })?;
            let value = p.b.build_load(p.i32(), value, "")?.into_int_value();
            let inclusive = warp_inclusive_sum(p, value, lane)?;
            let exclusive = p.b.build_int_sub(inclusive, value, "")?;
            let exclusive = p.b.build_int_add(exclusive, carry, "")?;
            p.if_then(inside, || {
                p.b.build_store(slot, exclusive)?;
                Ok(())
            })?;
            let chunk_total = shfl_idx(p, inclusive, 31)?;
            carry = p.b.build_int_add(carry, chunk_total, "carry")?;
        }
        p.if_then(leader, || {
            let total = p.offset_ptr(p.i32().into(), counts, p.const_i32(i64::from(counts_len)))?;
            p.b.build_store(total, carry)?;
            Ok(())
        })
    })?;
    p.barrier()?;
    p.for_each_item(|item| {
        let slot = count_slot(p, counts, item.index, warp)?;
        let before = p.b.build_load(p.i32(), slot, "")?.into_int_value();
        let within = p.get(ranks, item)?.into_int_value();
        p.set(ranks, item, p.b.build_int_add(before, within, "rank")?)
    })?;
    let total = p.offset_ptr(p.i32().into(), counts, p.const_i32(i64::from(counts_len)))?;
    // Each warp reads only its own counts and the total before the next tile's scan writes
    // them again after its first barrier, so no barrier is needed here.
    Ok(p.b.build_load(p.i32(), total, "total")?.into_int_value())
}

/// `counts[item * warps + warp]`.
fn count_slot<'ctx>(
    p: &Emitter<'ctx, '_>,
    counts: PointerValue<'ctx>,
    item: IntValue<'ctx>,
    warp: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let warps = p.const_i32(i64::from(p.tile.warps()));
    let index =
        p.b.build_int_add(p.b.build_int_mul(item, warps, "")?, warp, "")?;
    p.offset_ptr(p.i32().into(), counts, index)
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

/// `shfl_up` of a 64-bit value, as its two halves.
fn shfl_up_i64<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    offset: u32,
) -> CodegenResult<IntValue<'ctx>> {
    let (i32t, i64t) = (p.i32(), p.i64());
    let low = p.b.build_int_truncate(value, i32t, "")?;
    let high = p.b.build_right_shift(value, p.const_i64(32), false, "")?;
    let high = p.b.build_int_truncate(high, i32t, "")?;
    let low = p.b.build_int_z_extend(shfl_up(p, low, offset)?, i64t, "")?;
    let high =
        p.b.build_int_z_extend(shfl_up(p, high, offset)?, i64t, "")?;
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
