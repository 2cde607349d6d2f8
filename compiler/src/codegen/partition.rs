//! The partitioning sinks (`Sink::Partition`): a pipeline split before a probe into a large
//! table counts the rows reaching the probe per part of the table (`primitives::partition`),
//! then, after each part has its run, writes each row's columns into its part's run. Both passes
//! count a tile's rows per part in block-shared counters, so the device's counters take one
//! atomic per part a block (counting) or a tile (writing) touches, not one per row.

use inkwell::values::{IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};
use tessera_runtime::emit::{Item, TileArray};
use tessera_runtime::primitives::partition::part_of;
use tessera_runtime::primitives::scan;
use tessera_runtime::{CodegenError, CodegenResult, Emitter};

use crate::physical::PartitionPass;

use super::context::QueryContext;
use super::kernel::{ColumnTile, Kernel, STATIC_SHARED_BYTES};

/// A block's per-part arrays: row counts (`i32`) and, when writing, where each part's rows of
/// the tile start (`i64`).
pub(super) struct PartCounts<'ctx> {
    counts: PointerValue<'ctx>,
    starts: Option<PointerValue<'ctx>>,
    parts: u32,
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    pub(super) fn partition_prologue(
        &mut self,
        qc: &QueryContext<'_>,
        partitioning: usize,
        pass: PartitionPass,
    ) -> CodegenResult<PartCounts<'ctx>> {
        let parts = qc.query.partitionings[partitioning].parts;
        let em = &self.em;
        let counts = em.block_array(em.i32().into(), parts, "tessera.partition.counts")?;
        let starts = match pass {
            PartitionPass::Count => None,
            PartitionPass::Write => {
                Some(em.block_array(em.i64().into(), parts, "tessera.partition.starts")?)
            }
        };
        let state = PartCounts {
            counts,
            starts,
            parts,
        };
        if pass == PartitionPass::Count {
            self.zero_counts(&state)?;
            self.em.barrier()?;
        }
        Ok(state)
    }

    /// Counts the tile's selected rows per part, or writes them into their parts.
    pub(super) fn partition_tile(
        &mut self,
        qc: &QueryContext<'_>,
        partitioning: usize,
        pass: PartitionPass,
        state: &PartCounts<'ctx>,
    ) -> CodegenResult<()> {
        let spec = &qc.query.partitionings[partitioning];
        self.load_columns(&spec.columns)?;
        let key = self
            .tiles
            .get(&spec.key)
            .ok_or_else(|| CodegenError::Invalid("the partition key is not in registers".into()))?
            .values;
        let layout = &qc.tables[spec.table].0;
        let em = &self.em;
        let ranks = em.tile_array(em.i32().into(), "part_ranks")?;
        let part_of_item = em.tile_array(em.i32().into(), "parts")?;
        if pass == PartitionPass::Write {
            self.zero_counts(state)?;
            em.barrier()?;
        }
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let key = em.get(key, item)?;
                if !key.is_int_value() {
                    return Err(CodegenError::Invalid(
                        "partitioning needs an integer key".into(),
                    ));
                }
                let part = part_of(em, layout, spec.parts, key.into_int_value())?;
                em.set(part_of_item, item, part)?;
                let counter = em.offset_ptr(em.i32().into(), state.counts, part)?;
                let rank = em.b.build_atomicrmw(
                    AtomicRMWBinOp::Add,
                    counter,
                    em.const_i32(1),
                    AtomicOrdering::Monotonic,
                )?;
                em.set(ranks, item, rank)?;
                Ok(())
            })
        })?;
        let Some(starts) = state.starts else {
            return Ok(());
        };
        let cursors = self.buffer(qc.partitions[partitioning].cursors)?;
        let mut outputs = Vec::new();
        for (column, values, valid) in &qc.partitions[partitioning].columns {
            let tile = self.tiles.get(column).ok_or_else(|| {
                CodegenError::Invalid(format!("partitioned column {column} is not in registers"))
            })?;
            outputs.push((
                *tile,
                self.buffer(*values)?,
                valid.map(|v| self.buffer(v)).transpose()?,
            ));
        }
        let em = &self.em;
        em.barrier()?;
        if self.staged_writes_fit(state.parts) {
            return self.write_parts_staged(state, starts, cursors, ranks, part_of_item, &outputs);
        }
        // Each part's rows of the tile take their room in the part's run at once, and each row
        // goes straight there.
        em.for_each_strided(em.const_i64(i64::from(state.parts)), |part| {
            let count = load_count(self, state.counts, part)?;
            claim_room(em, count, cursors, Some(starts), part)
        })?;
        em.barrier()?;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let part = em.get(part_of_item, item)?.into_int_value();
                let start =
                    em.b.build_load(em.i64(), em.offset_ptr(em.i64().into(), starts, part)?, "")?;
                let rank = em.get(ranks, item)?.into_int_value();
                let rank = em.b.build_int_z_extend(rank, em.i64(), "")?;
                let row = em.b.build_int_add(start.into_int_value(), rank, "row")?;
                for (tile, values, valid) in &outputs {
                    store_value(em, tile, item, *values, *valid, row)?;
                }
                Ok(())
            })
        })
    }

    /// Whether a tile's rows can be reordered by part in shared memory before they are
    /// written: a part per item of the tile at most, and room beside what the kernel declares.
    fn staged_writes_fit(&self, parts: u32) -> bool {
        let em = &self.em;
        let items = u64::from(em.tile.items());
        let needed = items * 16 + u64::from(parts) * 4 + u64::from(scan::offsets_shared_bytes(em));
        u64::from(parts) <= items
            && (!em.target.is_gpu() || em.shared_bytes_declared() + needed <= STATIC_SHARED_BYTES)
    }

    /// Writes the tile's rows part by part: each row's place among the tile's rows ordered by
    /// part (the part's first place, from a scan of the counts, plus its rank) and its row in
    /// the output go to shared memory; then, a column at a time, the rows are put in that order
    /// and consecutive threads write consecutive places, so a part's rows of the tile leave as
    /// one coalesced run rather than a scattered write per row.
    fn write_parts_staged(
        &self,
        state: &PartCounts<'ctx>,
        starts: PointerValue<'ctx>,
        cursors: PointerValue<'ctx>,
        ranks: TileArray<'ctx>,
        part_of_item: TileArray<'ctx>,
        outputs: &[(
            ColumnTile<'ctx>,
            PointerValue<'ctx>,
            Option<PointerValue<'ctx>>,
        )],
    ) -> CodegenResult<()> {
        let em = &self.em;
        let items = em.tile.items();
        let firsts = em.block_array(em.i32().into(), state.parts, "tessera.partition.firsts")?;
        let rows = em.block_array(em.i64().into(), items, "tessera.partition.rows")?;
        let staged = em.block_array(em.i64().into(), items, "tessera.partition.staged")?;
        // The counts, a part per item (in row order, so the scan follows part order), and
        // each part's room in its run.
        let counts = em.tile_array(em.i32().into(), "part_counts")?;
        let parts = em.const_i32(i64::from(state.parts));
        em.for_each_item(|item| {
            let part = em.item_offset(item)?;
            let inside = em.b.build_int_compare(IntPredicate::ULT, part, parts, "")?;
            em.set(counts, item, em.const_i32(0))?;
            em.if_then(inside, || {
                let count = load_count(self, state.counts, part)?;
                em.set(counts, item, count)?;
                claim_room(em, count, cursors, Some(starts), part)
            })
        })?;
        let firsts_tile = em.tile_array(em.i64().into(), "part_firsts")?;
        let total = scan::tile_offsets(em, counts, firsts_tile)?;
        em.for_each_item(|item| {
            let part = em.item_offset(item)?;
            let inside = em.b.build_int_compare(IntPredicate::ULT, part, parts, "")?;
            em.if_then(inside, || {
                let first = em.get(firsts_tile, item)?.into_int_value();
                let first = em.b.build_int_truncate(first, em.i32(), "")?;
                em.b.build_store(em.offset_ptr(em.i32().into(), firsts, part)?, first)?;
                Ok(())
            })
        })?;
        em.barrier()?;
        let places = em.tile_array(em.i32().into(), "part_places")?;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let part = em.get(part_of_item, item)?.into_int_value();
                let rank = em.get(ranks, item)?.into_int_value();
                let first =
                    em.b.build_load(em.i32(), em.offset_ptr(em.i32().into(), firsts, part)?, "")?;
                let place = em.b.build_int_add(first.into_int_value(), rank, "place")?;
                em.set(places, item, place)?;
                let start =
                    em.b.build_load(em.i64(), em.offset_ptr(em.i64().into(), starts, part)?, "")?;
                let rank = em.b.build_int_z_extend(rank, em.i64(), "")?;
                let row = em.b.build_int_add(start.into_int_value(), rank, "row")?;
                em.b.build_store(em.offset_ptr(em.i64().into(), rows, place)?, row)?;
                Ok(())
            })
        })?;
        let total = em.b.build_int_truncate(total, em.i32(), "")?;
        let mut columns = Vec::new();
        for (tile, values, valid) in outputs {
            columns.push((tile.values, *values));
            if let Some(out) = valid {
                let flags = match tile.valid {
                    Some(valid) => valid,
                    None => {
                        let ones = em.tile_array(em.i8().into(), "all_valid")?;
                        em.for_each_item(|item| em.set(ones, item, em.i8().const_int(1, false)))?;
                        ones
                    }
                };
                columns.push((flags, *out));
            }
        }
        for (values, out) in columns {
            // The previous column's writers are done with the staging array (and the rows'
            // places are all in shared memory).
            em.barrier()?;
            em.for_each_item(|item| {
                let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
                em.if_then(flag, || {
                    let place = em.get(places, item)?.into_int_value();
                    let value = em.get(values, item)?;
                    em.b.build_store(em.offset_ptr(values.elem, staged, place)?, value)?;
                    Ok(())
                })
            })?;
            em.barrier()?;
            em.for_each_item(|item| {
                let place = em.item_offset(item)?;
                let inside =
                    em.b.build_int_compare(IntPredicate::SLT, place, total, "")?;
                em.if_then(inside, || {
                    let value = em.b.build_load(
                        values.elem,
                        em.offset_ptr(values.elem, staged, place)?,
                        "",
                    )?;
                    let row = em
                        .b
                        .build_load(em.i64(), em.offset_ptr(em.i64().into(), rows, place)?, "")?
                        .into_int_value();
                    em.b.build_store(em.offset_ptr(values.elem, out, row)?, value)?;
                    Ok(())
                })
            })?;
        }
        Ok(())
    }

    /// Adds the block's counts to the partitioning's, once every tile is counted.
    pub(super) fn partition_counts_epilogue(
        &mut self,
        qc: &QueryContext<'_>,
        partitioning: usize,
        state: &PartCounts<'ctx>,
    ) -> CodegenResult<()> {
        let cursors = self.buffer(qc.partitions[partitioning].cursors)?;
        let em = &self.em;
        em.barrier()?;
        em.for_each_strided(em.const_i64(i64::from(state.parts)), |part| {
            let count = load_count(self, state.counts, part)?;
            claim_room(em, count, cursors, None, part)
        })
    }

    fn zero_counts(&self, state: &PartCounts<'ctx>) -> CodegenResult<()> {
        let em = &self.em;
        em.for_each_strided(em.const_i64(i64::from(state.parts)), |part| {
            em.b.build_store(
                em.offset_ptr(em.i32().into(), state.counts, part)?,
                em.const_i32(0),
            )?;
            Ok(())
        })
    }
}

fn load_count<'ctx>(
    kernel: &Kernel<'_, 'ctx, '_>,
    counts: PointerValue<'ctx>,
    part: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let em = &kernel.em;
    Ok(em
        .b
        .build_load(
            em.i32(),
            em.offset_ptr(em.i32().into(), counts, part)?,
            "count",
        )?
        .into_int_value())
}

/// Moves part `part`'s cursor on by `count` rows (an `i32`), when there are any: room claimed
/// in its run, whose start goes to `starts[part]` when given (while counting, the cursors are
/// the counts).
fn claim_room<'ctx>(
    em: &Emitter<'ctx, '_>,
    count: IntValue<'ctx>,
    cursors: PointerValue<'ctx>,
    starts: Option<PointerValue<'ctx>>,
    part: IntValue<'ctx>,
) -> CodegenResult<()> {
    let any =
        em.b.build_int_compare(IntPredicate::NE, count, em.const_i32(0), "")?;
    em.if_then(any, || {
        let count = em.b.build_int_z_extend(count, em.i64(), "")?;
        let start = em.b.build_atomicrmw(
            AtomicRMWBinOp::Add,
            em.offset_ptr(em.i64().into(), cursors, part)?,
            count,
            AtomicOrdering::Monotonic,
        )?;
        if let Some(starts) = starts {
            em.b.build_store(em.offset_ptr(em.i64().into(), starts, part)?, start)?;
        }
        Ok(())
    })
}

/// Writes `item`'s value of `tile` (and its validity, when the column has a validity buffer)
/// at `row`.
fn store_value<'ctx>(
    em: &Emitter<'ctx, '_>,
    tile: &ColumnTile<'ctx>,
    item: Item<'ctx>,
    values: PointerValue<'ctx>,
    valid: Option<PointerValue<'ctx>>,
    row: IntValue<'ctx>,
) -> CodegenResult<()> {
    let value = em.get(tile.values, item)?;
    em.b.build_store(em.offset_ptr(tile.values.elem, values, row)?, value)?;
    if let Some(out) = valid {
        let flag = match tile.valid {
            Some(valid) => em.get(valid, item)?,
            None => em.i8().const_int(1, false).into(),
        };
        em.b.build_store(em.offset_ptr(em.i8().into(), out, row)?, flag)?;
    }
    Ok(())
}
