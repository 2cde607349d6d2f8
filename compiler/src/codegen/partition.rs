//! The partitioning sinks (`Sink::Partition`): a pipeline split before a probe into a large
//! table counts the rows reaching the probe per part of the table (`primitives::partition`),
//! then, after each part has its run, writes each row's columns into its part's run. Both passes
//! count a tile's rows per part in block-shared counters, so the device's counters take one
//! atomic per part a block (counting) or a tile (writing) touches, not one per row.

use inkwell::values::{IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};
use tessera_runtime::primitives::partition::part_of;
use tessera_runtime::{CodegenError, CodegenResult};

use crate::physical::PartitionPass;

use super::kernel::Kernel;
use super::query::QueryContext;

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
        // Each part's rows of the tile take their room in the part's run at once.
        let cursors = self.buffer(qc.partitions[partitioning].cursors)?;
        em.barrier()?;
        em.for_each_strided(em.const_i64(i64::from(state.parts)), |part| {
            let count = load_count(self, state.counts, part)?;
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
                em.b.build_store(em.offset_ptr(em.i64().into(), starts, part)?, start)?;
                Ok(())
            })
        })?;
        em.barrier()?;
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
                    let value = em.get(tile.values, item)?;
                    em.b.build_store(em.offset_ptr(tile.values.elem, *values, row)?, value)?;
                    if let Some(out) = valid {
                        let flag = match tile.valid {
                            Some(valid) => em.get(valid, item)?,
                            None => em.i8().const_int(1, false).into(),
                        };
                        em.b.build_store(em.offset_ptr(em.i8().into(), *out, row)?, flag)?;
                    }
                }
                Ok(())
            })
        })
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
            let any =
                em.b.build_int_compare(IntPredicate::NE, count, em.const_i32(0), "")?;
            em.if_then(any, || {
                let count = em.b.build_int_z_extend(count, em.i64(), "")?;
                em.b.build_atomicrmw(
                    AtomicRMWBinOp::Add,
                    em.offset_ptr(em.i64().into(), cursors, part)?,
                    count,
                    AtomicOrdering::Monotonic,
                )?;
                Ok(())
            })
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
