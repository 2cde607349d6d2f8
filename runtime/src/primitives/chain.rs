//! Grouping a chained hash table's rows by key, between its build and its probes. The build
//! counts each slot's rows and records every row with its slot, its rank and its payload
//! (`hash::chain_record`); `Starts` then gives each slot the start of its run of rows (runs
//! take their places in no particular order: a warp claims room for its slots with one atomic),
//! and `Place` copies each record's payload to `start + rank`. A key's rows end up contiguous,
//! so a probe reaches its `i`-th match directly and can hand matches to any thread.

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate};

use super::hash::{chain_rows, payload_ptr, slot_at, HashTableLayout, CHAIN_COUNT, CHAIN_START};
use super::load::param_int;
use super::scan::{shfl_idx, warp_inclusive_sum};
use crate::emit::{CodegenResult, Emitter};
use crate::tile::{Target, TileShape};

/// The two kernels that group a chained table's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainKernel {
    /// `[table, placed]`: over every slot, `start = placed.fetch_add(count)` (an `i32` counter).
    Starts,
    /// `[rows, records, table, grouped]`: over the build table's rows, each inserted record's
    /// payload copied to row `start + rank` of `grouped`.
    Place,
}

impl ChainKernel {
    /// The tile the kernel runs with: a thread per slot or row at a time.
    pub fn tile(self, target: Target) -> TileShape {
        match target {
            Target::Nvptx { .. } => TileShape {
                threads: 256,
                items_per_thread: 1,
            },
            Target::Host => TileShape {
                threads: 1,
                items_per_thread: 2048,
            },
        }
    }

    /// Blocks (on the host, units of work) `Starts` runs as over a table of `slots` slots:
    /// about 16 slots a thread, within what a GPU holds at once.
    pub fn starts_parts(target: Target, slots: u64) -> u32 {
        let per_part = match target {
            Target::Nvptx { .. } => 256 * 16,
            Target::Host => 1 << 16,
        };
        slots.div_ceil(per_part).clamp(1, 4096) as u32
    }

    pub fn label(self) -> &'static str {
        match self {
            ChainKernel::Starts => "starts",
            ChainKernel::Place => "place",
        }
    }

    fn params(self) -> usize {
        match self {
            ChainKernel::Starts => 2,
            ChainKernel::Place => 4,
        }
    }
}

/// Builds `kernel` for the chained table `layout` as the function `name` of `module`;
/// `parts` is what `Starts` is launched with.
pub fn build_chain_kernel<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    target: Target,
    name: &str,
    kernel: ChainKernel,
    layout: &HashTableLayout,
    parts: u32,
) -> CodegenResult<()> {
    let tile = kernel.tile(target);
    let (em, params) = Emitter::new_word_kernel(ctx, module, target, tile, name, kernel.params())?;
    let pointer = |i: usize| -> CodegenResult<PointerValue<'ctx>> {
        Ok(em.b.build_int_to_ptr(params[i], em.global_ptr(), "")?)
    };
    match kernel {
        ChainKernel::Starts => starts(&em, layout, pointer(0)?, pointer(1)?, parts)?,
        ChainKernel::Place => place(
            &em,
            layout,
            params[0],
            pointer(1)?,
            pointer(2)?,
            pointer(3)?,
        )?,
    }
    em.b.build_return(None)?;
    Ok(())
}

/// The first index this GPU thread takes and the step to its next, when the grid's threads
/// take every index in turn.
fn grid_stride<'ctx>(em: &Emitter<'ctx, '_>) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    let threads = em.const_i64(i64::from(em.tile.threads));
    let block = em.b.build_int_z_extend(em.block_index()?, em.i64(), "")?;
    let first = em.b.build_int_mul(block, threads, "")?;
    let grid = em.b.build_int_z_extend(em.grid_size()?, em.i64(), "")?;
    let step = em.b.build_int_mul(grid, threads, "")?;
    Ok((first, step))
}

fn starts<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    placed: PointerValue<'ctx>,
    parts: u32,
) -> CodegenResult<()> {
    let slots = em.const_i64(layout.slots() as i64);
    let claim = |total: IntValue<'ctx>| -> CodegenResult<IntValue<'ctx>> {
        Ok(em.b.build_atomicrmw(
            inkwell::AtomicRMWBinOp::Add,
            placed,
            total,
            AtomicOrdering::Monotonic,
        )?)
    };
    match em.target {
        Target::Nvptx { .. } => {
            // Whole warps go round the loop together, so that they can add up their counts.
            let (first, step) = grid_stride(em)?;
            let tid = em.tid()?;
            let lane = em.b.build_and(tid, em.const_i32(31), "lane")?;
            let tid = em.b.build_int_z_extend(tid, em.i64(), "")?;
            em.for_range(first, slots, step, |base| {
                let index = em.b.build_int_add(base, tid, "slot")?;
                let inside =
                    em.b.build_int_compare(IntPredicate::SLT, index, slots, "")?;
                let count = em.alloca(em.i32().into(), "count")?;
                em.b.build_store(count, em.const_i32(0))?;
                em.if_then(inside, || {
                    let slot = slot_at(em, layout, table, index)?;
                    let (field, _) = payload_ptr(em, layout, slot, CHAIN_COUNT)?;
                    em.b.build_store(count, em.b.build_load(em.i32(), field, "")?)?;
                    Ok(())
                })?;
                let count = em.b.build_load(em.i32(), count, "")?.into_int_value();
                let inclusive = warp_inclusive_sum(em, count, lane)?;
                let total = shfl_idx(em, inclusive, 31)?;
                let last =
                    em.b.build_int_compare(IntPredicate::EQ, lane, em.const_i32(31), "")?;
                let any =
                    em.b.build_int_compare(IntPredicate::NE, total, em.const_i32(0), "")?;
                let warp_start = em.alloca(em.i32().into(), "warp_start")?;
                em.b.build_store(warp_start, em.const_i32(0))?;
                em.if_then(em.b.build_and(last, any, "")?, || {
                    em.b.build_store(warp_start, claim(total)?)?;
                    Ok(())
                })?;
                let warp_start = em.b.build_load(em.i32(), warp_start, "")?.into_int_value();
                let warp_start = shfl_idx(em, warp_start, 31)?;
                let before = em.b.build_int_sub(inclusive, count, "")?;
                let start = em.b.build_int_add(warp_start, before, "start")?;
                let has =
                    em.b.build_int_compare(IntPredicate::NE, count, em.const_i32(0), "")?;
                em.if_then(em.b.build_and(inside, has, "")?, || {
                    let slot = slot_at(em, layout, table, index)?;
                    let (field, _) = payload_ptr(em, layout, slot, CHAIN_START)?;
                    em.b.build_store(field, start)?;
                    Ok(())
                })
            })
        }
        Target::Host => {
            // A part's slots are counted first, so that the part claims its room at once.
            let chunk = em.const_i64((layout.slots().div_ceil(u64::from(parts))) as i64);
            let first_part = param_int(em, 1)?;
            let end_part = param_int(em, 2)?;
            em.for_range(first_part, end_part, em.const_i64(1), |part| {
                let first = em.b.build_int_mul(part, chunk, "")?;
                let end = em.b.build_int_add(first, chunk, "")?;
                let past = em.b.build_int_compare(IntPredicate::SGT, end, slots, "")?;
                let end = em.b.build_select(past, slots, end, "")?.into_int_value();
                let total = em.alloca(em.i32().into(), "total")?;
                em.b.build_store(total, em.const_i32(0))?;
                let count_at = |index| -> CodegenResult<(PointerValue<'ctx>, IntValue<'ctx>)> {
                    let slot = slot_at(em, layout, table, index)?;
                    let (field, _) = payload_ptr(em, layout, slot, CHAIN_COUNT)?;
                    let count = em.b.build_load(em.i32(), field, "")?.into_int_value();
                    Ok((slot, count))
                };
                em.for_range(first, end, em.const_i64(1), |index| {
                    let (_, count) = count_at(index)?;
                    let sum = em.b.build_load(em.i32(), total, "")?.into_int_value();
                    em.b.build_store(total, em.b.build_int_add(sum, count, "")?)?;
                    Ok(())
                })?;
                let sum = em.b.build_load(em.i32(), total, "")?.into_int_value();
                em.b.build_store(total, claim(sum)?)?;
                em.for_range(first, end, em.const_i64(1), |index| {
                    let (slot, count) = count_at(index)?;
                    let start = em.b.build_load(em.i32(), total, "")?.into_int_value();
                    let (field, _) = payload_ptr(em, layout, slot, CHAIN_START)?;
                    em.b.build_store(field, start)?;
                    em.b.build_store(total, em.b.build_int_add(start, count, "")?)?;
                    Ok(())
                })
            })
        }
    }
}

fn place<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    rows: IntValue<'ctx>,
    records: PointerValue<'ctx>,
    table: PointerValue<'ctx>,
    grouped: PointerValue<'ctx>,
) -> CodegenResult<()> {
    let row_layout = chain_rows(layout)?;
    let record_stride = i64::from(row_layout.record_stride());
    let stride = i64::from(row_layout.stride);
    let copy = |row: IntValue<'ctx>| -> CodegenResult<()> {
        let offset = em.b.build_int_mul(row, em.const_i64(record_stride), "")?;
        let record = em.offset_ptr(em.i8().into(), records, offset)?;
        let rank_ptr = em.offset_ptr(em.i8().into(), record, em.const_i64(4))?;
        let rank =
            em.b.build_load(em.i32(), rank_ptr, "rank")?
                .into_int_value();
        let inserted =
            em.b.build_int_compare(IntPredicate::NE, rank, em.const_i32(0), "")?;
        em.if_then(inserted, || {
            let index = em.b.build_load(em.i32(), record, "slot")?.into_int_value();
            let index = em.b.build_int_z_extend(index, em.i64(), "")?;
            let slot = slot_at(em, layout, table, index)?;
            let (field, _) = payload_ptr(em, layout, slot, CHAIN_START)?;
            let start = em.b.build_load(em.i32(), field, "")?.into_int_value();
            let at = em.b.build_int_add(start, rank, "")?;
            let at = em.b.build_int_sub(at, em.const_i32(1), "")?;
            let at = em.b.build_int_z_extend(at, em.i64(), "")?;
            let target = em.b.build_int_mul(at, em.const_i64(stride), "")?;
            let target = em.offset_ptr(em.i8().into(), grouped, target)?;
            // Payload fields are 4 or 8 bytes wide and aligned, so the row copies as words.
            for word in 0..stride / 4 {
                let from = em.offset_ptr(
                    em.i8().into(),
                    record,
                    em.const_i64(i64::from(super::hash::RECORD_HEADER) + word * 4),
                )?;
                let to = em.offset_ptr(em.i8().into(), target, em.const_i64(word * 4))?;
                em.b.build_store(to, em.b.build_load(em.i32(), from, "")?)?;
            }
            Ok(())
        })
    };
    match em.target {
        Target::Nvptx { .. } => {
            let (first, step) = grid_stride(em)?;
            let tid = em.b.build_int_z_extend(em.tid()?, em.i64(), "")?;
            let first = em.b.build_int_add(first, tid, "")?;
            em.for_range(first, rows, step, copy)
        }
        Target::Host => {
            let items = em.const_i64(i64::from(em.tile.items()));
            let first = em.b.build_int_mul(param_int(em, 1)?, items, "")?;
            let end = em.b.build_int_mul(param_int(em, 2)?, items, "")?;
            let past = em.b.build_int_compare(IntPredicate::SGT, end, rows, "")?;
            let end = em.b.build_select(past, rows, end, "")?.into_int_value();
            em.for_range(first, end, em.const_i64(1), copy)
        }
    }
}
