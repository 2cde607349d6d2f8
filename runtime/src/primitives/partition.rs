//! Partitioning rows by the part of a hash table their probe key falls in (Rui and Tu's
//! partitioned join). A pipeline counts its rows per part, [`PartitionStarts`] then gives each
//! part its run among the written rows (runs in no particular order: a thread claims each
//! part's room with one atomic), and the pipeline runs again to write each row into its part's
//! run. A pipeline over the written rows then probes the table part by part.

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::IntValue;
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

use super::hash::{home_slot, HashKind, HashTableLayout};
use crate::emit::{CodegenResult, Emitter};
use crate::tile::{Target, TileShape};

/// The part (an `i32` below `parts`, a power of two) of `layout`'s slots holding the slot where a
/// probe of `key` starts: the slots split into `parts` ranges of consecutive slots.
pub fn part_of<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    parts: u32,
    key: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let slot = home_slot(em, layout, key)?;
    // Probes start below `capacity` in an open table (its extra slot is for one key only).
    let homes = match layout.kind {
        HashKind::Perfect { slots, .. } => slots,
        HashKind::Open { capacity } => capacity,
    };
    let slot_bits = 64 - (homes.max(1) - 1).leading_zeros();
    let shift = slot_bits.saturating_sub(parts.trailing_zeros());
    let part =
        em.b.build_right_shift(slot, em.const_i64(i64::from(shift)), false, "")?;
    let last = em.const_i64(i64::from(parts) - 1);
    let beyond = em.b.build_int_compare(IntPredicate::UGT, part, last, "")?;
    let part = em.b.build_select(beyond, last, part, "")?.into_int_value();
    Ok(em.b.build_int_truncate(part, em.i32(), "part")?)
}

/// The kernel between a partitioning's two passes: `[cursors, total]`, where `cursors` holds
/// each part's row count (`i64`); each becomes the part's first row, claimed from `total`,
/// which ends as the number of rows.
pub struct PartitionStarts;

impl PartitionStarts {
    /// The tile it runs with, as one block (one unit of work on the host).
    pub fn tile(target: Target) -> TileShape {
        match target {
            Target::Nvptx { .. } => TileShape {
                threads: 256,
                items_per_thread: 1,
            },
            Target::Host => TileShape {
                threads: 1,
                items_per_thread: 1,
            },
        }
    }

    /// Builds the kernel as the function `name` of `module`, for `parts` parts.
    pub fn build<'ctx>(
        ctx: &'ctx Context,
        module: &Module<'ctx>,
        target: Target,
        name: &str,
        parts: u32,
    ) -> CodegenResult<()> {
        let tile = PartitionStarts::tile(target);
        let (em, params) = Emitter::new_word_kernel(ctx, module, target, tile, name, 2)?;
        let cursors = em.b.build_int_to_ptr(params[0], em.global_ptr(), "")?;
        let total = em.b.build_int_to_ptr(params[1], em.global_ptr(), "")?;
        em.for_each_strided(em.const_i64(i64::from(parts)), |part| {
            let cursor = em.offset_ptr(em.i64().into(), cursors, part)?;
            let count = em.b.build_load(em.i64(), cursor, "count")?.into_int_value();
            let start =
                em.b.build_atomicrmw(AtomicRMWBinOp::Add, total, count, AtomicOrdering::Monotonic)?;
            em.b.build_store(cursor, start)?;
            Ok(())
        })?;
        em.b.build_return(None)?;
        Ok(())
    }
}
