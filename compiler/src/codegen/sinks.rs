//! Where a pipeline's selected rows go: into a hash table (a build), or into aggregates, either
//! one row's worth (reduced across the block, then one atomic per block) or one slot per group
//! of a dense array indexed by the group keys (an atomic per row and aggregate).

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{FloatPredicate, IntPredicate};
use tessera_grammar::Diagnostic;
use tessera_runtime::emit::{Item, TileArray};
use tessera_runtime::primitives::dict_code::dict_code;
use tessera_runtime::primitives::group;
use tessera_runtime::primitives::hash::{self, status};
use tessera_runtime::primitives::reduce::{self, ReduceOp};
use tessera_runtime::program::{
    wide_key, AggregateKind, AggregateSlot, DenseKey, Fill, HashKey, Param, ResultShape,
};
use tessera_runtime::{wide_atomics, CodegenError, CodegenResult, Target, TileShape};
use tessera_stdlib::Aggregate;
use tessera_storage::DataType;

use crate::columns::ColumnId;
use crate::expr::{AggregateExpr, Expr};
use crate::physical::{
    accumulator_type, counts_rows, hash_key_bits, hash_key_words, DenseUpdates, GroupLayout,
    KeyDomain, PartitionPass, Pipeline, Sink, ThreadValue, ThreadValues,
};

use super::context::{key_translation, payload_fields, QueryContext, SinkKind, TableSlots};
use super::expr::code_origin;
use super::kernel::Kernel;
use super::materialize::{plan_rows, row_placement, split_rows, RowPlacement, WrittenColumn};
use super::partition::PartCounts;

pub(super) enum SinkPlan {
    /// Groups found in a hash table by their keys packed in 64 bits, or in several words
    /// (`wide_key`) when they take more.
    HashGroups {
        keys: Vec<PackedKey>,
        aggregates: Vec<AggregatePlan>,
        /// The buffer of each slot's key word, or of each of its words for a wide key.
        key_buffers: Vec<usize>,
    },
    Build {
        table: usize,
        key: Expr,
    },
    /// Rows written out.
    Materialize {
        columns: Vec<WrittenColumn>,
        count_buffer: usize,
        placement: RowPlacement,
    },
    /// Rows counted, or written, per part of a partitioning.
    Partition {
        partitioning: usize,
        pass: PartitionPass,
    },
    /// Empties the slots of the groups no longer selected (`groups.rs`).
    KeepGroups,
    Aggregate {
        keys: Vec<(ColumnId, Expr, KeyDomain)>,
        aggregates: Vec<AggregatePlan>,
        /// One byte per group slot (dense only).
        presence: Option<usize>,
        /// Where rows are summed first (a block-local copy only where the target has one).
        updates: DenseUpdates,
    },
}

pub(super) struct AggregatePlan {
    /// The aggregate as planned.
    pub aggregate: AggregateExpr,
    kind: AggregateKind,
    accumulator: DataType,
    buffer: usize,
    count: Option<usize>,
}

/// A hash group key and where its bits go in the packed key: bits `shift .. shift + bits`
/// (of the stream of a wide key's words), holding its two's-complement bits (a float's, with
/// -0 as 0 and every NaN as one), or its offset from `min` when packed by range; a key that may
/// be null has its null flag in the bit above.
pub(super) struct PackedKey {
    pub expr: Expr,
    pub shift: u32,
    pub bits: u32,
    pub min: Option<i64>,
}

/// The most aggregates one kernel computes. An `aggregate` (or a dense `group`) of more runs as
/// several kernels over the same rows, each folding its share into its own buffers: one kernel
/// keeps every aggregate's accumulator live through its tile loop, and the GPU driver's
/// compiler takes time growing with the square of their number (200 aggregates took 8.5 s to
/// load on the H100, 400 took 32 s). A hash grouping stays one kernel, since kernels inserting
/// the same keys may place them in different slots.
pub(super) const AGGREGATES_PER_KERNEL: usize = 32;

/// The most threads of a block whose threads each hold a per-thread grouping's values for
/// every slot: a GPU thread has at most 255 registers, and a block's threads share the 65,536
/// of a multiprocessor, so larger blocks leave each thread fewer and its values spill to memory
/// (TPC-H Q1 at SF 10 on the H100: 8.0 ms in blocks of 512 threads, 2.7 ms in blocks of 256).
const PER_THREAD_BLOCK_THREADS: u32 = 256;

impl SinkPlan {
    /// The tile shape of the kernel running this sink: the query's `tile`, in blocks of at most
    /// [`PER_THREAD_BLOCK_THREADS`] where each thread sums its rows per slot first.
    pub fn tile(&self, target: Target, tile: TileShape) -> TileShape {
        match self {
            SinkPlan::Aggregate {
                updates: DenseUpdates::PerThread,
                ..
            } if target.is_gpu() => TileShape {
                threads: tile.threads.min(PER_THREAD_BLOCK_THREADS),
                ..tile
            },
            _ => tile,
        }
    }

    /// This sink as the sinks of the kernels that compute it: itself, an aggregate sink's
    /// aggregates in kernels of at most [`AGGREGATES_PER_KERNEL`], or the columns of rows in
    /// kernels of at most [`super::materialize::row_columns_per_kernel`].
    pub fn into_kernel_sinks(
        self,
        qc: &mut QueryContext<'_>,
        pipeline: &Pipeline,
    ) -> Vec<SinkPlan> {
        match self {
            SinkPlan::Aggregate {
                keys,
                mut aggregates,
                presence,
                updates,
            } if aggregates.len() > AGGREGATES_PER_KERNEL => {
                let mut sinks = Vec::new();
                while !aggregates.is_empty() {
                    let rest = aggregates.split_off(AGGREGATES_PER_KERNEL.min(aggregates.len()));
                    sinks.push(SinkPlan::Aggregate {
                        keys: keys.clone(),
                        aggregates,
                        presence,
                        updates,
                    });
                    aggregates = rest;
                }
                sinks
            }
            SinkPlan::Materialize {
                columns,
                count_buffer,
                placement,
            } => split_rows(qc, pipeline, columns, placement)
                .into_iter()
                .map(|(columns, placement)| SinkPlan::Materialize {
                    columns,
                    count_buffer,
                    placement,
                })
                .collect(),
            sink => vec![sink],
        }
    }

    pub fn expressions(&self) -> Vec<&Expr> {
        match self {
            SinkPlan::HashGroups {
                keys, aggregates, ..
            } => keys
                .iter()
                .map(|key| &key.expr)
                .chain(aggregates.iter().filter_map(|a| a.aggregate.arg.as_ref()))
                .collect(),
            SinkPlan::Build { key, .. } => vec![key],
            SinkPlan::Materialize { .. } | SinkPlan::Partition { .. } | SinkPlan::KeepGroups => {
                Vec::new()
            }
            SinkPlan::Aggregate {
                keys, aggregates, ..
            } => keys
                .iter()
                .map(|(_, e, _)| e)
                .chain(aggregates.iter().filter_map(|a| a.aggregate.arg.as_ref()))
                .collect(),
        }
    }

    /// Every column the sink reads.
    pub fn columns_used(&self, qc: &QueryContext<'_>) -> Vec<ColumnId> {
        let mut used: Vec<ColumnId> = self
            .expressions()
            .iter()
            .flat_map(|e| e.columns_used())
            .collect();
        match self {
            SinkPlan::Build { table, .. } => {
                used.extend(qc.query.hash_tables[*table].payload.iter().copied());
            }
            SinkPlan::Materialize { columns, .. } => used.extend(columns.iter().map(|c| c.id)),
            SinkPlan::Partition { partitioning, .. } => {
                used.extend(
                    qc.query.partitionings[*partitioning]
                        .columns
                        .iter()
                        .copied(),
                );
            }
            _ => {}
        }
        used
    }

    /// The sizes the sink's kernel is told when it runs: a hash grouping's slots, or the room
    /// for written rows and, when they are placed after the last run's, where they start.
    pub fn size_params(&self) -> Vec<Param> {
        match self {
            SinkPlan::HashGroups { .. } => vec![Param::GroupCapacity],
            SinkPlan::Materialize { placement, .. } if placement.reads_first_row() => {
                vec![Param::RowCapacity, Param::FirstRow]
            }
            SinkPlan::Materialize { .. } => vec![Param::RowCapacity],
            _ => Vec::new(),
        }
    }

    /// The sink's tables and buffers as the kernel's parameters: a build's chained rows, the
    /// translation of its key's codes and the dictionary that codes it, then [`Self::buffers`].
    pub fn table_params(&self, qc: &QueryContext<'_>) -> Vec<Param> {
        let mut params = Vec::new();
        if let SinkPlan::Build { table, key } = self {
            if let Some(chain) = qc.chains[*table] {
                params.push(Param::Buffer(chain.records));
            }
            params.extend(key_translation(qc.query, *table, key));
            if let Some(coded) = &qc.coded[*table] {
                params.push(coded.dictionary());
            }
        }
        params.extend(self.buffers(qc).into_iter().map(Param::Buffer));
        params
    }

    pub fn buffers(&self, qc: &QueryContext<'_>) -> Vec<usize> {
        match self {
            SinkPlan::HashGroups {
                aggregates,
                key_buffers,
                ..
            } => key_buffers
                .iter()
                .copied()
                .chain(
                    aggregates
                        .iter()
                        .flat_map(|a| std::iter::once(a.buffer).chain(a.count)),
                )
                .collect(),
            SinkPlan::Build { table, .. } => match qc.tables[*table].1 {
                TableSlots::Buffer(buffer) => vec![buffer],
                TableSlots::Grouping(_) => Vec::new(),
            },
            SinkPlan::Materialize {
                columns,
                count_buffer,
                placement,
            } => {
                let starts = match *placement {
                    RowPlacement::Reserved { record } => record,
                    RowPlacement::Recorded { starts } => Some(starts),
                    RowPlacement::InPlace { .. } => None,
                };
                std::iter::once(*count_buffer)
                    .chain(
                        columns
                            .iter()
                            .flat_map(|c| std::iter::once(c.buffer).chain(c.validity)),
                    )
                    .chain(starts)
                    .collect()
            }
            SinkPlan::Aggregate {
                aggregates,
                presence,
                ..
            } => aggregates
                .iter()
                .flat_map(|a| std::iter::once(a.buffer).chain(a.count))
                .chain(*presence)
                .collect(),
            SinkPlan::Partition { partitioning, pass } => {
                let buffers = &qc.partitions[*partitioning];
                let mut used = vec![buffers.cursors];
                if *pass == PartitionPass::Write {
                    for (_, values, valid) in &buffers.columns {
                        used.push(*values);
                        used.extend(*valid);
                    }
                }
                used
            }
            // Its one buffer, the grouping's flags, is among the pipeline's inputs.
            SinkPlan::KeepGroups => Vec::new(),
        }
    }
}

/// Allocates the sink's buffers and says how its result is read back.
pub(super) fn plan_sink(
    qc: &mut QueryContext<'_>,
    pipeline: &Pipeline,
) -> Result<(SinkPlan, Option<ResultShape>), Diagnostic> {
    let query = qc.query;
    match &pipeline.sink {
        Sink::Build { table, key } => Ok((
            SinkPlan::Build {
                table: *table,
                key: key.clone(),
            },
            None,
        )),
        Sink::Partition { partitioning, pass } => Ok((
            SinkPlan::Partition {
                partitioning: *partitioning,
                pass: *pass,
            },
            None,
        )),
        Sink::KeepGroups => Ok((SinkPlan::KeepGroups, None)),
        Sink::Materialize { columns } => {
            let placement = row_placement(query, pipeline, columns);
            let (columns, count_buffer, shape) = plan_rows(qc, pipeline, columns)?;
            Ok((
                SinkPlan::Materialize {
                    columns,
                    count_buffer,
                    placement,
                },
                Some(shape),
            ))
        }
        Sink::Aggregate {
            keys,
            aggregates,
            layout,
        } => {
            let (slots, grouped) = match layout {
                GroupLayout::Scalar => (1, false),
                GroupLayout::Dense { .. } => (layout.slots(), true),
                GroupLayout::Hash { capacity, .. } => {
                    // A grouping over another's slots shares the query's one slot count.
                    qc.group_capacity = Some(qc.group_capacity.unwrap_or(0).max(*capacity));
                    (0, true)
                }
            };
            let hashed = matches!(layout, GroupLayout::Hash { .. });
            // Pipelines ending in the same grouping (the inputs of a set operation) share its
            // buffers.
            let sink_ids: Vec<ColumnId> = keys
                .iter()
                .map(|(id, _)| *id)
                .chain(aggregates.iter().map(|(id, _)| *id))
                .collect();
            let sink = qc.sink(SinkKind::Groups, &sink_ids);
            let mut plans = Vec::with_capacity(aggregates.len());
            let mut slots_out = Vec::with_capacity(aggregates.len());
            for (id, aggregate) in aggregates {
                let kind = aggregate_kind(aggregate.function);
                let accumulator = accumulator_type(aggregate);
                // One row's worth counts every aggregate but a count: with no rows, it is null.
                let needs_count = match grouped {
                    true => counts_rows(aggregate),
                    false => kind != AggregateKind::Count,
                };
                let name = query.columns.get(*id).name.clone();
                let fill = identity_fill(kind, accumulator);
                let width = accumulator.width() as u32;
                let count_name = format!("{name}_count");
                let (buffer, count) = if hashed {
                    let buffer = qc
                        .sink_buffer(sink, &name, |qc| qc.group_buffer(name.clone(), width, fill));
                    let count = needs_count.then(|| {
                        qc.sink_buffer(sink, &count_name, |qc| {
                            qc.group_buffer(count_name.clone(), 8, Fill::Zero)
                        })
                    });
                    (buffer, count)
                } else {
                    let buffer = qc.sink_buffer(sink, &name, |qc| {
                        qc.buffer(name.clone(), slots, width, fill)
                    });
                    let count = needs_count.then(|| {
                        qc.sink_buffer(sink, &count_name, |qc| {
                            qc.buffer(count_name.clone(), slots, 8, Fill::Zero)
                        })
                    });
                    (buffer, count)
                };
                let dictionary = match (&aggregate.arg, kind) {
                    (Some(arg), AggregateKind::Min | AggregateKind::Max)
                        if arg.ty == DataType::Str =>
                    {
                        code_origin(query, arg).map(|o| (o.table, o.column))
                    }
                    _ => None,
                };
                slots_out.push(AggregateSlot {
                    id: id.0,
                    kind,
                    ty: aggregate.ty,
                    buffer,
                    accumulator,
                    count,
                    dictionary,
                });
                plans.push(AggregatePlan {
                    aggregate: aggregate.clone(),
                    kind,
                    accumulator,
                    buffer,
                    count,
                });
            }
            if let GroupLayout::Hash { ranges, .. } = layout {
                return hash_groups(qc, keys, ranges.as_deref(), plans, slots_out);
            }
            let GroupLayout::Dense { domains, updates } = layout else {
                return Ok((
                    SinkPlan::Aggregate {
                        keys: Vec::new(),
                        aggregates: plans,
                        presence: None,
                        updates: DenseUpdates::Global,
                    },
                    Some(ResultShape::Scalar {
                        aggregates: slots_out,
                    }),
                ));
            };
            let mut dense_keys = Vec::with_capacity(keys.len());
            let mut plan_keys = Vec::with_capacity(keys.len());
            for ((id, expr), domain) in keys.iter().zip(domains) {
                let info = query.columns.get(*id);
                if let Some(source) = expr.as_column() {
                    qc.assume_range(source, domain.min, domain.min + domain.size as i64 - 1);
                }
                let dictionary = match expr.ty {
                    DataType::Str => code_origin(query, expr).map(|o| (o.table, o.column)),
                    _ => None,
                };
                dense_keys.push(DenseKey {
                    id: id.0,
                    ty: info.ty,
                    min: domain.min,
                    size: domain.size,
                    nullable: domain.nullable,
                    dictionary,
                });
                plan_keys.push((*id, expr.clone(), *domain));
            }
            let presence = qc.sink_buffer(sink, "groups", |qc| {
                qc.buffer("groups".into(), slots, 1, Fill::Zero)
            });
            Ok((
                SinkPlan::Aggregate {
                    keys: plan_keys,
                    aggregates: plans,
                    presence: Some(presence),
                    updates: *updates,
                },
                Some(ResultShape::Dense {
                    keys: dense_keys,
                    aggregates: slots_out,
                    presence,
                }),
            ))
        }
    }
}

/// The sink of a hash grouping: keys of up to 32 bits each are packed two to a 64-bit word
/// (a 64-bit key alone), which the table compares whole. A key that may be null takes one bit
/// more, set for null (its value bits then zero, so all nulls make one group). Keys taking
/// more than 64 bits are packed one after another into the words of a wide key.
fn hash_groups(
    qc: &mut QueryContext<'_>,
    keys: &[(ColumnId, Expr)],
    ranges: Option<&[KeyDomain]>,
    aggregates: Vec<AggregatePlan>,
    slots: Vec<AggregateSlot>,
) -> Result<(SinkPlan, Option<ResultShape>), Diagnostic> {
    let query = qc.query;
    let widths = hash_key_bits(keys, ranges).ok_or_else(|| {
        Diagnostic::internal(
            query.span,
            "a hash grouping's keys do not fit its packed key",
        )
    })?;
    let words = hash_key_words(keys, &widths);
    let mut offset = 0;
    let mut packed = Vec::with_capacity(keys.len());
    let mut described = Vec::with_capacity(keys.len());
    for (index, ((id, expr), bits)) in keys.iter().zip(widths).enumerate() {
        let width = bits + u32::from(expr.nullable);
        // One word is filled from its top, the stream of a wide key's words from its start.
        let shift = if words == 1 {
            64 - offset - width
        } else {
            offset
        };
        offset += width;
        let min = ranges.map(|ranges| ranges[index].min);
        if let (Some(range), Some(source)) = (ranges.map(|r| r[index]), expr.as_column()) {
            qc.assume_range(source, range.min, range.min + range.size as i64 - 1);
        }
        let dictionary = match expr.ty {
            DataType::Str => code_origin(query, expr).map(|o| (o.table, o.column)),
            _ => None,
        };
        described.push(HashKey {
            id: id.0,
            ty: expr.ty,
            shift,
            bits,
            min,
            nullable: expr.nullable,
            dictionary,
        });
        packed.push(PackedKey {
            expr: expr.clone(),
            shift,
            bits,
            min,
        });
    }
    let sink_ids: Vec<ColumnId> = keys
        .iter()
        .map(|(id, _)| *id)
        .chain(slots.iter().map(|slot| ColumnId(slot.id)))
        .collect();
    let sink = qc.sink(SinkKind::Groups, &sink_ids);
    let key_buffers: Vec<usize> = (0..words)
        .map(|word| {
            let name = match word {
                0 => "group keys".to_string(),
                _ => format!("group key words {}", word + 1),
            };
            qc.sink_buffer(sink, &name, |qc| {
                qc.group_buffer(name.clone(), 8, Fill::Zero)
            })
        })
        .collect();
    Ok((
        SinkPlan::HashGroups {
            keys: packed,
            aggregates,
            key_buffers: key_buffers.clone(),
        },
        Some(ResultShape::Hash {
            keys: described,
            aggregates: slots,
            key_buffer: key_buffers[0],
            wide: key_buffers[1..].to_vec(),
        }),
    ))
}

/// A payload field's value for `item`: from its tile array, or 1 (valid) for the validity of a
/// column whose rows are all valid.
fn field_value<'ctx>(
    em: &tessera_runtime::Emitter<'ctx, '_>,
    values: Option<TileArray<'ctx>>,
    item: Item<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    match values {
        Some(values) => em.get(values, item),
        None => Ok(em.i8().const_int(1, false).into()),
    }
}

/// Accumulators start at the identity of their operation.
fn identity_fill(kind: AggregateKind, ty: DataType) -> Fill {
    // A 128-bit accumulator's identity repeats one word (see `wide_atomics`).
    if ty.is_wide_decimal() {
        return match kind {
            AggregateKind::Min => Fill::Pattern(wide_atomics::MIN_IDENTITY_WORD),
            AggregateKind::Max => Fill::Pattern(wide_atomics::MAX_IDENTITY_WORD),
            _ => Fill::Zero,
        };
    }
    let pattern = match (kind, ty.physical()) {
        (AggregateKind::Min, DataType::F32) => {
            u64::from((reduce::float_identity(ReduceOp::Min) as f32).to_bits())
        }
        (AggregateKind::Min, DataType::F64) => reduce::float_identity(ReduceOp::Min).to_bits(),
        (AggregateKind::Min, DataType::I64) => i64::MAX as u64,
        (AggregateKind::Min, _) => i32::MAX as u32 as u64,
        (AggregateKind::Max, DataType::F32) => {
            u64::from((reduce::float_identity(ReduceOp::Max) as f32).to_bits())
        }
        (AggregateKind::Max, DataType::F64) => reduce::float_identity(ReduceOp::Max).to_bits(),
        (AggregateKind::Max, DataType::I64) => i64::MIN as u64,
        (AggregateKind::Max, _) => i32::MIN as u32 as u64,
        _ => return Fill::Zero,
    };
    Fill::Pattern(pattern)
}

/// What a sink keeps across the tiles of a block.
pub(super) enum SinkState<'ctx> {
    Nothing,
    /// Per-thread accumulators (and counts) of scalar aggregates, reduced once per block.
    Scalar(Vec<Accumulator<'ctx>>),
    /// Dense groups: a block-local copy of the group arrays when they fit in shared memory.
    Dense(Option<SharedGroups<'ctx>>),
    /// Dense groups summed in each thread: per slot, its accumulators.
    PerThread(PerThreadSlots<'ctx>),
    /// A partitioning pass's per-part arrays.
    Partition(PartCounts<'ctx>),
}

/// A thread's values for each slot of a small dense grouping (`values.values`, shared by the
/// aggregates that read them), and the slots a row of the thread reached, as bits of one
/// integer (so the block reduces one value for all of them).
pub(super) struct PerThreadSlots<'ctx> {
    values: ThreadValues,
    /// Each value's type, and per slot where each value is kept.
    types: Vec<BasicTypeEnum<'ctx>>,
    slots: Vec<Vec<PointerValue<'ctx>>>,
    reached: PointerValue<'ctx>,
}

pub(super) struct Accumulator<'ctx> {
    value: PointerValue<'ctx>,
    ty: BasicTypeEnum<'ctx>,
    count: Option<PointerValue<'ctx>>,
}

/// A block's copy of the group arrays: updated with shared-memory atomics, so rows of a hot
/// group contend inside one block rather than across the whole GPU, and flushed to the global
/// arrays once per block with one atomic per present group.
pub(super) struct SharedGroups<'ctx> {
    values: Vec<PointerValue<'ctx>>,
    counts: Vec<Option<PointerValue<'ctx>>>,
    presence: PointerValue<'ctx>,
    slots: u64,
}

/// A block-wide reduction: [`reduce::block_reduce`] or [`reduce::block_reduce_call`].
type BlockReduce<'ctx> = fn(
    &tessera_runtime::Emitter<'ctx, '_>,
    ReduceOp,
    BasicValueEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>>;

/// An accumulator's total over the block, and the buffer it folds into.
struct Total<'ctx> {
    op: ReduceOp,
    ty: BasicTypeEnum<'ctx>,
    total: BasicValueEnum<'ctx>,
    buffer: PointerValue<'ctx>,
}

/// Aggregates of one `aggregate` whose block reductions are inlined, each folded in a branch of
/// its own (the fastest code for the few a query usually has); more are reduced by calls.
const INLINE_REDUCTIONS: usize = 16;

impl<'ctx> Kernel<'_, 'ctx, '_> {
    /// Code before the loop over tiles: initializes what the sink keeps across tiles.
    pub(super) fn sink_prologue(
        &mut self,
        qc: &QueryContext<'_>,
        sink: &SinkPlan,
        kernel: &str,
    ) -> Result<SinkState<'ctx>, Diagnostic> {
        let span = self.query.span;
        let result = match sink {
            SinkPlan::Build { .. }
            | SinkPlan::HashGroups { .. }
            | SinkPlan::Materialize { .. }
            | SinkPlan::KeepGroups => Ok(SinkState::Nothing),
            SinkPlan::Partition { partitioning, pass } => self
                .partition_prologue(qc, *partitioning, *pass)
                .map(SinkState::Partition),
            SinkPlan::Aggregate {
                keys, aggregates, ..
            } if keys.is_empty() => self.scalar_prologue(aggregates).map(SinkState::Scalar),
            SinkPlan::Aggregate {
                keys,
                aggregates,
                updates: DenseUpdates::PerThread,
                ..
            } => self.per_thread_prologue(keys, aggregates),
            SinkPlan::Aggregate {
                keys, aggregates, ..
            } => self
                .shared_groups_prologue(keys, aggregates, kernel)
                .map(SinkState::Dense),
        };
        result.map_err(|e| Diagnostic::internal(span, e.to_string()))
    }

    /// The sink's work on one tile.
    pub(super) fn sink(
        &mut self,
        qc: &mut QueryContext<'_>,
        sink: &SinkPlan,
        state: &SinkState<'ctx>,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let result = match (sink, state) {
            (SinkPlan::Build { table, key }, _) => self.build(qc, *table, key),
            (SinkPlan::Partition { partitioning, pass }, SinkState::Partition(counts)) => {
                self.partition_tile(qc, *partitioning, *pass, counts)
            }
            (
                SinkPlan::Materialize {
                    columns,
                    count_buffer,
                    placement,
                },
                _,
            ) => self.materialize_tile(columns, *count_buffer, *placement),
            (
                SinkPlan::HashGroups {
                    keys,
                    aggregates,
                    key_buffers,
                },
                _,
            ) => self.hash_tile(qc, keys, aggregates, key_buffers),
            (SinkPlan::KeepGroups, _) => self.keep_groups_tile(),
            (SinkPlan::Aggregate { aggregates, .. }, SinkState::Scalar(accumulators)) => {
                self.scalar_tile(aggregates, accumulators)
            }
            (
                SinkPlan::Aggregate {
                    keys,
                    aggregates,
                    presence: Some(presence),
                    ..
                },
                SinkState::Dense(shared),
            ) => self.dense_tile(qc, keys, aggregates, *presence, shared.as_ref()),
            (
                SinkPlan::Aggregate {
                    keys, aggregates, ..
                },
                SinkState::PerThread(slots),
            ) => self.per_thread_tile(qc, keys, aggregates, slots),
            _ => Err(CodegenError::Invalid("a sink without its state".into())),
        };
        result.map_err(|e| Diagnostic::internal(span, e.to_string()))
    }

    /// Code after the loop over tiles: combines what the block kept into the global result.
    pub(super) fn sink_epilogue(
        &mut self,
        qc: &QueryContext<'_>,
        sink: &SinkPlan,
        state: &SinkState<'ctx>,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let result = match (sink, state) {
            (SinkPlan::Aggregate { aggregates, .. }, SinkState::Scalar(accumulators)) => {
                self.scalar_epilogue(aggregates, accumulators)
            }
            (
                SinkPlan::Aggregate {
                    aggregates,
                    presence: Some(presence),
                    ..
                },
                SinkState::Dense(Some(shared)),
            ) => self.shared_groups_epilogue(aggregates, *presence, shared),
            (
                SinkPlan::Aggregate {
                    aggregates,
                    presence: Some(presence),
                    ..
                },
                SinkState::PerThread(slots),
            ) => self.per_thread_epilogue(aggregates, *presence, slots),
            (
                SinkPlan::Partition {
                    partitioning,
                    pass: PartitionPass::Count,
                },
                SinkState::Partition(counts),
            ) => self.partition_counts_epilogue(qc, *partitioning, counts),
            _ => Ok(()),
        };
        result.map_err(|e| Diagnostic::internal(span, e.to_string()))
    }

    fn build(&mut self, qc: &QueryContext<'_>, table: usize, key: &Expr) -> CodegenResult<()> {
        let payload = qc.query.hash_tables[table].payload.clone();
        let mut needed = key.columns_used();
        needed.extend(payload.iter().copied());
        self.load_columns(&needed)?;
        let layout = &qc.tables[table].0;
        let pointer = self.buffer(qc.table_buffer(table)?)?;
        let status = self.buffer(qc.status)?;
        // Each field's tile array; `None` for the validity of a column whose tile has every
        // row valid.
        let fields = payload_fields(qc.query, &payload)
            .iter()
            .map(|field| {
                let tile = self.tiles.get(&field.column).ok_or_else(|| {
                    CodegenError::Invalid(format!(
                        "payload column {} is not in registers",
                        field.column
                    ))
                })?;
                Ok(match field.validity {
                    true => tile.valid,
                    false => Some(tile.values),
                })
            })
            .collect::<CodegenResult<Vec<_>>>()?;
        let records = qc.chains[table]
            .map(|chain| self.buffer(chain.records))
            .transpose()?;
        let coded = match &qc.coded[table] {
            Some(coded) => Some((
                self.param(&coded.dictionary())?.into_pointer_value(),
                coded.entries,
            )),
            None => None,
        };
        // String keys stored as the probe column's codes: each key's code translated.
        let translation = match key_translation(qc.query, table, key) {
            Some(param) => Some(self.param(&param)?.into_pointer_value()),
            None if qc.query.hash_tables[table].key_codes_of.is_some() => {
                return Err(CodegenError::Invalid(
                    "a translated key is a stored string column".into(),
                ))
            }
            None => None,
        };
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let k = self.eval(key, item)?;
            // Rows with a null key join nothing, so they are not inserted.
            let mut take = match k.valid {
                Some(valid) => em.b.build_and(flag, valid, "")?,
                None => flag,
            };
            let mut key = k.value.into_int_value();
            if let Some(codes) = translation {
                // A row not taken may hold anything where its key would be: read code 0.
                let index =
                    em.b.build_select(take, key, key.get_type().const_zero(), "")?
                        .into_int_value();
                let slot = em.offset_ptr(em.i32().into(), codes, index)?;
                key = em.b.build_load(em.i32(), slot, "code")?.into_int_value();
                let held =
                    em.b.build_int_compare(IntPredicate::SGE, key, em.const_i32(0), "held")?;
                take = em.b.build_and(take, held, "")?;
            }
            // A table keyed by codes takes the key's code; a key the probe column never holds
            // has none and can match nothing.
            if let Some((dictionary, entries)) = coded {
                let (code, found) = dict_code(em, dictionary, entries, key)?;
                take = em.b.build_and(take, found, "")?;
                key = code;
            }
            em.if_then(take, || {
                let slot = hash::insert(em, layout, pointer, key, status)?;
                let inserted = em.b.build_is_not_null(slot, "")?;
                em.if_then(inserted, || match records {
                    // A chained table: the slot counts the row, and the row is recorded at its
                    // row number with its payload, to be grouped by key once all are in.
                    Some(records) => {
                        let offset = em.item_offset(item)?;
                        let offset = em.b.build_int_s_extend(offset, em.i64(), "")?;
                        let row = em.b.build_int_add(self.tile_start, offset, "row")?;
                        let place = hash::chain_record(em, layout, pointer, slot, records, row)?;
                        for (index, values) in fields.iter().enumerate() {
                            let (field, _) = hash::record_field_ptr(em, layout, place, index)?;
                            em.b.build_store(field, field_value(em, *values, item)?)?;
                        }
                        Ok(())
                    }
                    None => {
                        for (index, values) in fields.iter().enumerate() {
                            let (field, _) = hash::payload_ptr(em, layout, slot, index)?;
                            em.b.build_store(field, field_value(em, *values, item)?)?;
                        }
                        Ok(())
                    }
                })
            })
        })
    }

    /// The value an aggregate folds in for one item, and whether it takes part.
    fn contribution(
        &self,
        plan: &AggregatePlan,
        item: Item<'ctx>,
        flag: IntValue<'ctx>,
    ) -> CodegenResult<(BasicValueEnum<'ctx>, IntValue<'ctx>)> {
        let em = &self.em;
        match &plan.aggregate.arg {
            None => Ok((em.i64().const_int(1, false).into(), flag)),
            Some(arg) => {
                let v = self.eval(arg, item)?;
                let take = match v.valid {
                    Some(valid) => em.b.build_and(flag, valid, "")?,
                    None => flag,
                };
                let value = match plan.kind {
                    AggregateKind::Count => em.i64().const_int(1, false).into(),
                    _ => self.cast(v.value, arg.ty, plan.accumulator)?,
                };
                Ok((value, take))
            }
        }
    }

    fn scalar_prologue(
        &mut self,
        aggregates: &[AggregatePlan],
    ) -> CodegenResult<Vec<Accumulator<'ctx>>> {
        let em = &self.em;
        let mut accumulators = Vec::with_capacity(aggregates.len());
        for plan in aggregates {
            let ty = em.value_type(plan.accumulator);
            let value = em.alloca(ty, "acc")?;
            em.b.build_store(value, reduce::identity(plan.kind.reduce_op(), ty)?)?;
            let count = match plan.count {
                Some(_) => {
                    let count = em.alloca(em.i64().into(), "count")?;
                    em.b.build_store(count, em.const_i64(0))?;
                    Some(count)
                }
                None => None,
            };
            accumulators.push(Accumulator { value, ty, count });
        }
        Ok(accumulators)
    }

    fn scalar_tile(
        &mut self,
        aggregates: &[AggregatePlan],
        accumulators: &[Accumulator<'ctx>],
    ) -> CodegenResult<()> {
        let mut needed = Vec::new();
        for a in aggregates {
            if let Some(arg) = &a.aggregate.arg {
                needed.extend(arg.columns_used());
            }
        }
        self.load_columns(&needed)?;
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            for (plan, acc) in aggregates.iter().zip(accumulators) {
                let (value, take) = self.contribution(plan, item, flag)?;
                self.accumulate(plan, acc, value, take)?;
            }
            Ok(())
        })
    }

    /// Folds `value` into a thread's accumulator (and its count) where `take` holds.
    fn accumulate(
        &self,
        plan: &AggregatePlan,
        acc: &Accumulator<'ctx>,
        value: BasicValueEnum<'ctx>,
        take: IntValue<'ctx>,
    ) -> CodegenResult<()> {
        let em = &self.em;
        let current = em.b.build_load(acc.ty, acc.value, "")?;
        let combined = reduce::combine(em, plan.kind.reduce_op(), current, value)?;
        let next = em.b.build_select(take, combined, current, "")?;
        em.b.build_store(acc.value, next)?;
        if let Some(count) = acc.count {
            let n = em.b.build_load(em.i64(), count, "")?.into_int_value();
            let n =
                em.b.build_int_add(n, em.b.build_int_z_extend(take, em.i64(), "")?, "")?;
            em.b.build_store(count, n)?;
        }
        Ok(())
    }

    /// Reduces a thread's accumulator (and its count) over the block; where `store` holds (in
    /// one thread), folds the totals into the aggregate's buffers at `slot` (their first
    /// element when `None`).
    fn fold_accumulator(
        &self,
        plan: &AggregatePlan,
        acc: &Accumulator<'ctx>,
        slot: Option<IntValue<'ctx>>,
        store: IntValue<'ctx>,
    ) -> CodegenResult<()> {
        let em = &self.em;
        let reduce = reduce::block_reduce;
        let value = self.reduced(
            plan.kind.reduce_op(),
            acc.ty,
            acc.value,
            plan.buffer,
            reduce,
        )?;
        em.if_then(store, || self.fold_total(&value, slot))?;
        if let (Some(count), Some(count_buffer)) = (acc.count, plan.count) {
            let n = self.reduced(ReduceOp::Add, em.i64().into(), count, count_buffer, reduce)?;
            em.if_then(store, || self.fold_total(&n, slot))?;
        }
        Ok(())
    }

    /// The value at `from` (a thread's accumulator or count, of type `ty`) reduced over the
    /// block by `reduce` ([`reduce::block_reduce`] or [`reduce::block_reduce_call`]), with the
    /// buffer it folds into.
    fn reduced(
        &self,
        op: ReduceOp,
        ty: BasicTypeEnum<'ctx>,
        from: PointerValue<'ctx>,
        buffer: usize,
        reduce: BlockReduce<'ctx>,
    ) -> CodegenResult<Total<'ctx>> {
        let value = self.em.b.build_load(ty, from, "")?;
        Ok(Total {
            op,
            ty,
            total: reduce(&self.em, op, value)?,
            buffer: self.buffer(buffer)?,
        })
    }

    /// Each accumulator (and count) of `aggregates` reduced over the block by `reduce`, with the
    /// buffers they fold into.
    fn totals(
        &self,
        aggregates: &[AggregatePlan],
        accumulators: &[Accumulator<'ctx>],
        reduce: BlockReduce<'ctx>,
    ) -> CodegenResult<Vec<Total<'ctx>>> {
        let mut totals = Vec::with_capacity(aggregates.len());
        for (plan, acc) in aggregates.iter().zip(accumulators) {
            let op = plan.kind.reduce_op();
            totals.push(self.reduced(op, acc.ty, acc.value, plan.buffer, reduce)?);
            if let (Some(count), Some(count_buffer)) = (acc.count, plan.count) {
                let i64 = self.em.i64().into();
                totals.push(self.reduced(ReduceOp::Add, i64, count, count_buffer, reduce)?);
            }
        }
        Ok(totals)
    }

    /// Folds a reduced total into its buffer at `slot` (its first element when `None`).
    fn fold_total(&self, total: &Total<'ctx>, slot: Option<IntValue<'ctx>>) -> CodegenResult<()> {
        let at = match slot {
            Some(slot) => self.em.offset_ptr(total.ty, total.buffer, slot)?,
            None => total.buffer,
        };
        atomic(&self.em, total.op, at, total.total)
    }

    /// Reduces each accumulator over the block; thread 0 folds it into the result. Past
    /// [`INLINE_REDUCTIONS`] aggregates, each reduction is a call and thread 0 folds every total
    /// in one branch, so compile time grows linearly with the aggregates (a thousand inlined
    /// reductions took 9 s of LLVM for the GPU).
    fn scalar_epilogue(
        &mut self,
        aggregates: &[AggregatePlan],
        accumulators: &[Accumulator<'ctx>],
    ) -> CodegenResult<()> {
        let em = &self.em;
        let first_thread =
            em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
        if aggregates.len() <= INLINE_REDUCTIONS {
            for (plan, acc) in aggregates.iter().zip(accumulators) {
                self.fold_accumulator(plan, acc, None, first_thread)?;
            }
            return Ok(());
        }
        let totals = self.totals(aggregates, accumulators, reduce::block_reduce_call)?;
        em.if_then(first_thread, || {
            totals
                .iter()
                .try_for_each(|total| self.fold_total(total, None))
        })
    }

    /// Allocates and clears the block's copy of the group arrays, when it is worth having one.
    /// (`choices::choose` settled whether it is: `group_copy`.)
    fn shared_groups_prologue(
        &mut self,
        keys: &[(ColumnId, Expr, KeyDomain)],
        aggregates: &[AggregatePlan],
        kernel: &str,
    ) -> CodegenResult<Option<SharedGroups<'ctx>>> {
        if !self.group_copy {
            return Ok(None);
        }
        let slots: u64 = keys.iter().map(|(_, _, d)| d.slots()).product();
        let em = &self.em;
        let len = slots as u32;
        let mut values = Vec::with_capacity(aggregates.len());
        let mut counts = Vec::with_capacity(aggregates.len());
        for (i, plan) in aggregates.iter().enumerate() {
            let ty = em.value_type(plan.accumulator);
            values.push(em.block_array(ty, len, &format!("{kernel}.group{i}"))?);
            counts.push(match plan.count {
                Some(_) => Some(em.block_array(
                    em.i64().into(),
                    len,
                    &format!("{kernel}.group{i}_count"),
                )?),
                None => None,
            });
        }
        let presence = em.block_array(em.i8().into(), len, &format!("{kernel}.groups"))?;
        em.for_each_strided(em.const_i64(slots as i64), |slot| {
            for (plan, (value, count)) in aggregates.iter().zip(values.iter().zip(&counts)) {
                let ty = em.value_type(plan.accumulator);
                em.b.build_store(
                    em.offset_ptr(ty, *value, slot)?,
                    reduce::identity(plan.kind.reduce_op(), ty)?,
                )?;
                if let Some(count) = count {
                    em.b.build_store(
                        em.offset_ptr(em.i64().into(), *count, slot)?,
                        em.const_i64(0),
                    )?;
                }
            }
            em.b.build_store(
                em.offset_ptr(em.i8().into(), presence, slot)?,
                em.i8().const_zero(),
            )?;
            Ok(())
        })?;
        em.barrier()?;
        Ok(Some(SharedGroups {
            values,
            counts,
            presence,
            slots,
        }))
    }

    fn dense_tile(
        &mut self,
        qc: &QueryContext<'_>,
        keys: &[(ColumnId, Expr, KeyDomain)],
        aggregates: &[AggregatePlan],
        presence: usize,
        shared: Option<&SharedGroups<'ctx>>,
    ) -> CodegenResult<()> {
        self.load_group_columns(keys.iter().map(|(_, key, _)| key), aggregates)?;
        let status = self.buffer(qc.status)?;
        // Where each row's update goes: the block's copy, or straight to the global arrays.
        let targets = match shared {
            Some(groups) => groups
                .values
                .iter()
                .copied()
                .zip(groups.counts.iter().copied())
                .collect(),
            None => self.global_targets(aggregates)?,
        };
        let marks = match shared {
            Some(groups) => groups.presence,
            None => self.buffer(presence)?,
        };
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let (index, inside) = self.dense_slot(keys, item)?;
                hash::report_unless(em, inside, status, status::GROUP_OUT_OF_RANGE)?;
                em.if_then(inside, || {
                    let mark = em.offset_ptr(em.i8().into(), marks, index)?;
                    em.b.build_store(mark, em.i8().const_int(1, false))?;
                    self.update_group(aggregates, &targets, item, index)
                })
            })
        })
    }

    /// The dense slot of an item's keys, and whether its keys lie inside their domains.
    fn dense_slot(
        &self,
        keys: &[(ColumnId, Expr, KeyDomain)],
        item: Item<'ctx>,
    ) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let em = &self.em;
        let mut index = em.const_i64(0);
        let mut inside = em.i1().const_all_ones();
        for (_, key, domain) in keys {
            let evaluated = self.eval(key, item)?;
            let k = evaluated.value.into_int_value();
            let k = match k.get_type().get_bit_width() {
                // A `bool` is 0 or 1, not 0 or -1.
                1 => em.b.build_int_z_extend(k, em.i64(), "")?,
                64 => k,
                _ => em.b.build_int_s_extend(k, em.i64(), "")?,
            };
            let mut digit = em.b.build_int_sub(k, em.const_i64(domain.min), "")?;
            let mut fits = em.b.build_int_compare(
                IntPredicate::ULT,
                digit,
                em.const_i64(domain.size as i64),
                "",
            )?;
            // A null key's digit is the slot after the values'.
            if let (true, Some(valid)) = (domain.nullable, evaluated.valid) {
                let null_slot = em.const_i64(domain.size as i64);
                digit =
                    em.b.build_select(valid, digit, null_slot, "")?
                        .into_int_value();
                let null = em.b.build_not(valid, "")?;
                fits = em.b.build_or(fits, null, "")?;
            }
            inside = em.b.build_and(inside, fits, "")?;
            index =
                em.b.build_int_mul(index, em.const_i64(domain.slots() as i64), "")?;
            index = em.b.build_int_add(index, digit, "group")?;
        }
        Ok((index, inside))
    }

    /// Each thread's values for every slot (one per distinct computation of the aggregates,
    /// [`ThreadValues`]), and the bits of the slots a row reached.
    fn per_thread_prologue(
        &mut self,
        keys: &[(ColumnId, Expr, KeyDomain)],
        aggregates: &[AggregatePlan],
    ) -> CodegenResult<SinkState<'ctx>> {
        let slot_count: u64 = keys.iter().map(|(_, _, d)| d.slots()).product();
        if slot_count > 64 {
            return Err(CodegenError::Invalid(format!(
                "{slot_count} slots summed in each thread (at most 64)"
            )));
        }
        let values = ThreadValues::of(aggregates.iter().map(|plan| &plan.aggregate));
        let em = &self.em;
        let types: Vec<BasicTypeEnum<'ctx>> = values
            .values
            .iter()
            .map(|value| match value {
                ThreadValue::Fold { accumulator, .. } => em.value_type(*accumulator),
                ThreadValue::Count(_) => em.i64().into(),
            })
            .collect();
        let mut slots = Vec::with_capacity(slot_count as usize);
        for _ in 0..slot_count {
            let mut kept = Vec::with_capacity(types.len());
            for (value, ty) in values.values.iter().zip(&types) {
                let at = em.alloca(*ty, "acc")?;
                em.b.build_store(at, reduce::identity(thread_value_op(value), *ty)?)?;
                kept.push(at);
            }
            slots.push(kept);
        }
        let reached = em.alloca(em.i64().into(), "reached")?;
        em.b.build_store(reached, em.const_i64(0))?;
        Ok(SinkState::PerThread(PerThreadSlots {
            values,
            types,
            slots,
            reached,
        }))
    }

    /// Folds each item into its slot's values: every slot's are updated with a select, so they
    /// stay in registers.
    fn per_thread_tile(
        &mut self,
        qc: &QueryContext<'_>,
        keys: &[(ColumnId, Expr, KeyDomain)],
        aggregates: &[AggregatePlan],
        slots: &PerThreadSlots<'ctx>,
    ) -> CodegenResult<()> {
        self.load_group_columns(keys.iter().map(|(_, key, _)| key), aggregates)?;
        let status = self.buffer(qc.status)?;
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let (index, inside) = self.dense_slot(keys, item)?;
            let outside = em.b.build_and(flag, em.b.build_not(inside, "")?, "")?;
            hash::report_unless(
                em,
                em.b.build_not(outside, "")?,
                status,
                status::GROUP_OUT_OF_RANGE,
            )?;
            let counted = em.b.build_and(flag, inside, "")?;
            let bit = em.b.build_left_shift(em.const_i64(1), index, "")?;
            let bit = em.b.build_select(counted, bit, em.const_i64(0), "")?;
            let seen = em.b.build_load(em.i64(), slots.reached, "")?;
            let seen =
                em.b.build_or(seen.into_int_value(), bit.into_int_value(), "")?;
            em.b.build_store(slots.reached, seen)?;
            // Each value is computed once, then offered to every slot.
            let mut contributions = Vec::with_capacity(slots.values.values.len());
            for value in &slots.values.values {
                contributions.push(self.thread_contribution(value, item, counted)?);
            }
            for (slot, kept) in slots.slots.iter().enumerate() {
                let here =
                    em.b.build_int_compare(IntPredicate::EQ, index, em.const_i64(slot as i64), "")?;
                for (((value, at), ty), (contribution, take)) in slots
                    .values
                    .values
                    .iter()
                    .zip(kept)
                    .zip(&slots.types)
                    .zip(&contributions)
                {
                    let take = em.b.build_and(*take, here, "")?;
                    let current = em.b.build_load(*ty, *at, "")?;
                    let next = match contribution {
                        Some(contribution) => {
                            let op = thread_value_op(value);
                            let combined = reduce::combine(em, op, current, *contribution)?;
                            em.b.build_select(take, combined, current, "")?
                        }
                        None => {
                            let one = em.b.build_int_z_extend(take, em.i64(), "")?;
                            em.b.build_int_add(current.into_int_value(), one, "")?
                                .into()
                        }
                    };
                    em.b.build_store(*at, next)?;
                }
            }
            Ok(())
        })
    }

    /// What an item brings to a thread value, and whether it brings it: a fold's argument (in
    /// the accumulator's type), or `None` for a count, which counts the item when it is taken.
    fn thread_contribution(
        &self,
        value: &ThreadValue,
        item: Item<'ctx>,
        counted: IntValue<'ctx>,
    ) -> CodegenResult<(Option<BasicValueEnum<'ctx>>, IntValue<'ctx>)> {
        let em = &self.em;
        let (arg, accumulator) = match value {
            ThreadValue::Fold {
                arg, accumulator, ..
            } => (Some(arg), Some(*accumulator)),
            ThreadValue::Count(arg) => (arg.as_ref(), None),
        };
        let Some(arg) = arg else {
            return Ok((None, counted));
        };
        let v = self.eval(arg, item)?;
        let take = match v.valid {
            Some(valid) => em.b.build_and(counted, valid, "")?,
            None => counted,
        };
        let contribution = match accumulator {
            Some(accumulator) => Some(self.cast(v.value, arg.ty, accumulator)?),
            None => None,
        };
        Ok((contribution, take))
    }

    /// Reduces the reached slots and each slot's values over the block, each value once; thread
    /// 0 marks the slots a row reached present and folds their totals into every aggregate
    /// reading them. Each reduction is a call ([`reduce::block_reduce_call`]): inlined, the
    /// slots times the values made as many copies of a two-round reduction, and the driver's
    /// compiler took 323 ms over seven slots of two sums (89 ms with calls; the H100's `ptxas`,
    /// SSB at SF 20).
    fn per_thread_epilogue(
        &mut self,
        aggregates: &[AggregatePlan],
        presence: usize,
        slots: &PerThreadSlots<'ctx>,
    ) -> CodegenResult<()> {
        let em = &self.em;
        let reduce = reduce::block_reduce_call;
        let first_thread =
            em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
        let reached = em.b.build_load(em.i64(), slots.reached, "")?;
        let reached = reduce(em, ReduceOp::Or, reached)?.into_int_value();
        let marks = self.buffer(presence)?;
        let mut totals = Vec::with_capacity(slots.slots.len());
        for kept in &slots.slots {
            let mut reduced = Vec::with_capacity(kept.len());
            for ((value, at), ty) in slots.values.values.iter().zip(kept).zip(&slots.types) {
                let op = thread_value_op(value);
                let held = em.b.build_load(*ty, *at, "")?;
                reduced.push((op, *ty, reduce(em, op, held)?));
            }
            let mut slot_totals = Vec::with_capacity(aggregates.len());
            for (plan, (value, count)) in aggregates.iter().zip(&slots.values.of_aggregate) {
                let (op, ty, total) = reduced[*value];
                slot_totals.push(Total {
                    op,
                    ty,
                    total,
                    buffer: self.buffer(plan.buffer)?,
                });
                match (count, plan.count) {
                    (Some(count), Some(count_buffer)) => {
                        let (op, ty, total) = reduced[*count];
                        slot_totals.push(Total {
                            op,
                            ty,
                            total,
                            buffer: self.buffer(count_buffer)?,
                        });
                    }
                    (None, None) => {}
                    // The planner's `counts_rows` and the sink's count buffers disagree.
                    _ => {
                        return Err(CodegenError::Invalid(
                            "a per-thread grouping's counts do not match its aggregates".into(),
                        ))
                    }
                }
            }
            totals.push(slot_totals);
        }
        em.if_then(first_thread, || {
            for (slot, slot_totals) in totals.iter().enumerate() {
                let at = em.const_i64(slot as i64);
                let bit = em.b.build_and(
                    em.b.build_right_shift(reached, at, false, "")?,
                    em.const_i64(1),
                    "",
                )?;
                let any =
                    em.b.build_int_compare(IntPredicate::NE, bit, em.const_i64(0), "")?;
                em.if_then(any, || {
                    let mark = em.offset_ptr(em.i8().into(), marks, at)?;
                    em.b.build_store(mark, em.i8().const_int(1, false))?;
                    slot_totals
                        .iter()
                        .try_for_each(|total| self.fold_total(total, Some(at)))
                })?;
            }
            Ok(())
        })
    }

    /// Loads what a grouping sink reads: its keys' and its aggregates' columns.
    fn load_group_columns<'e>(
        &mut self,
        keys: impl Iterator<Item = &'e Expr>,
        aggregates: &[AggregatePlan],
    ) -> CodegenResult<()> {
        let mut needed: Vec<ColumnId> = keys.flat_map(Expr::columns_used).collect();
        for a in aggregates {
            if let Some(arg) = &a.aggregate.arg {
                needed.extend(arg.columns_used());
            }
        }
        self.load_columns(&needed)
    }

    /// The global accumulator (and count) buffers of each aggregate.
    fn global_targets(
        &self,
        aggregates: &[AggregatePlan],
    ) -> CodegenResult<Vec<(PointerValue<'ctx>, Option<PointerValue<'ctx>>)>> {
        aggregates
            .iter()
            .map(|a| {
                Ok((
                    self.buffer(a.buffer)?,
                    a.count.map(|c| self.buffer(c)).transpose()?,
                ))
            })
            .collect()
    }

    /// Folds one item into each aggregate's slot `slot` of `targets` (with its count), atomically.
    fn update_group(
        &self,
        aggregates: &[AggregatePlan],
        targets: &[(PointerValue<'ctx>, Option<PointerValue<'ctx>>)],
        item: Item<'ctx>,
        slot: IntValue<'ctx>,
    ) -> CodegenResult<()> {
        let em = &self.em;
        for (plan, (values, count)) in aggregates.iter().zip(targets) {
            let (value, take) = self.contribution(plan, item, em.i1().const_all_ones())?;
            em.if_then(take, || {
                let ty = em.value_type(plan.accumulator);
                atomic(
                    em,
                    plan.kind.reduce_op(),
                    em.offset_ptr(ty, *values, slot)?,
                    value,
                )?;
                if let Some(count) = count {
                    let at = em.offset_ptr(em.i64().into(), *count, slot)?;
                    atomic(em, ReduceOp::Add, at, em.const_i64(1).into())?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Each selected row finds (or claims) its group's slot and updates the aggregates there.
    fn hash_tile(
        &mut self,
        qc: &QueryContext<'_>,
        keys: &[PackedKey],
        aggregates: &[AggregatePlan],
        key_buffers: &[usize],
    ) -> CodegenResult<()> {
        self.load_group_columns(keys.iter().map(|key| &key.expr), aggregates)?;
        let status = self.buffer(qc.status)?;
        let tables = key_buffers
            .iter()
            .map(|buffer| self.buffer(*buffer))
            .collect::<CodegenResult<Vec<_>>>()?;
        let capacity = self.param(&Param::GroupCapacity)?.into_int_value();
        let targets = self.global_targets(aggregates)?;
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let slot = if tables.len() == 1 {
                    let mut packed = em.const_i64(0);
                    for key in keys {
                        let (mut field, valid) = self.key_field(key, item)?;
                        // A null: no value bits, and the flag above them.
                        if let Some(valid) = valid {
                            let flag = em.const_i64(1i64 << key.bits);
                            field = em.b.build_select(valid, field, flag, "")?.into_int_value();
                        }
                        let field =
                            em.b.build_left_shift(field, em.const_i64(i64::from(key.shift)), "")?;
                        packed = em.b.build_or(packed, field, "packed")?;
                    }
                    group::group_slot(em, tables[0], capacity, packed, status)?
                } else {
                    let mut words = vec![em.const_i64(wide_key::STORED as i64); tables.len()];
                    for key in keys {
                        let (mut field, valid) = self.key_field(key, item)?;
                        if let Some(valid) = valid {
                            field =
                                em.b.build_select(valid, field, em.const_i64(0), "")?
                                    .into_int_value();
                            let null = em.b.build_not(valid, "")?;
                            let null = em.b.build_int_z_extend(null, em.i64(), "")?;
                            self.put_wide_field(&mut words, key.shift + key.bits, 1, null)?;
                        }
                        self.put_wide_field(&mut words, key.shift, key.bits, field)?;
                    }
                    group::group_slot_wide(em, &tables, capacity, &words, status)?
                };
                let placed =
                    em.b.build_int_compare(IntPredicate::SGE, slot, em.const_i64(0), "")?;
                em.if_then(placed, || {
                    self.update_group(aggregates, &targets, item, slot)
                })
            })
        })
    }

    /// A hash key's field for `item`, as an `i64` of `key.bits` bits, and, for a key that may
    /// be null, whether it holds a value.
    fn key_field(
        &self,
        key: &PackedKey,
        item: Item<'ctx>,
    ) -> CodegenResult<(IntValue<'ctx>, Option<IntValue<'ctx>>)> {
        let em = &self.em;
        let evaluated = self.eval(&key.expr, item)?;
        let value = match evaluated.value {
            BasicValueEnum::FloatValue(x) => {
                // Equal floats group together: -0 with 0, and every NaN with every other.
                let ty = x.get_type();
                let zero = ty.const_zero();
                let is_zero = em.b.build_float_compare(FloatPredicate::OEQ, x, zero, "")?;
                let x = em.b.build_select(is_zero, zero, x, "")?.into_float_value();
                let is_nan = em.b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
                let nan = ty.const_float(f64::NAN);
                let x = em.b.build_select(is_nan, nan, x, "")?.into_float_value();
                let bits = match ty.get_bit_width() {
                    32 => em.i32(),
                    _ => em.i64(),
                };
                em.b.build_bit_cast(x, bits, "")?.into_int_value()
            }
            value => value.into_int_value(),
        };
        let value = if value.get_type().get_bit_width() == 1 {
            em.b.build_int_z_extend(value, em.i32(), "")?
        } else {
            value
        };
        let field = match key.min {
            // Its offset from the range's minimum (the range is checked when the program runs).
            Some(min) => {
                let wide = if value.get_type().get_bit_width() < 64 {
                    em.b.build_int_s_extend(value, em.i64(), "")?
                } else {
                    value
                };
                em.b.build_int_sub(wide, em.const_i64(min), "")?
            }
            // A key's two's-complement bits, zero-extended into its field.
            None if key.bits == 64 => value,
            None => em.b.build_int_z_extend(value, em.i64(), "")?,
        };
        let valid = evaluated.valid.filter(|_| key.expr.nullable);
        Ok((field, valid))
    }

    /// Ors `field` (an `i64` of `bits` bits) into the words of a wide key at bit `offset` of
    /// their stream, in the pieces `wide_key::parts` cuts it into.
    fn put_wide_field(
        &self,
        words: &mut [IntValue<'ctx>],
        offset: u32,
        bits: u32,
        field: IntValue<'ctx>,
    ) -> CodegenResult<()> {
        let b = &self.em.b;
        for part in wide_key::parts(offset, bits) {
            let piece =
                b.build_right_shift(field, self.em.const_i64(i64::from(part.from)), false, "")?;
            let piece = b.build_and(
                piece,
                self.em.const_i64(wide_key::low_mask(part.bits) as i64),
                "",
            )?;
            let piece = b.build_left_shift(piece, self.em.const_i64(i64::from(part.shift)), "")?;
            words[part.word] = b.build_or(words[part.word], piece, "word")?;
        }
        Ok(())
    }

    /// Folds the block's copy of the group arrays into the global ones.
    fn shared_groups_epilogue(
        &mut self,
        aggregates: &[AggregatePlan],
        presence: usize,
        shared: &SharedGroups<'ctx>,
    ) -> CodegenResult<()> {
        let global_presence = self.buffer(presence)?;
        let globals = self.global_targets(aggregates)?;
        let em = &self.em;
        em.barrier()?;
        em.for_each_strided(em.const_i64(shared.slots as i64), |slot| {
            let mark = em.b.build_load(
                em.i8(),
                em.offset_ptr(em.i8().into(), shared.presence, slot)?,
                "",
            )?;
            let present = em.truth(mark.into_int_value())?;
            em.if_then(present, || {
                em.b.build_store(
                    em.offset_ptr(em.i8().into(), global_presence, slot)?,
                    em.i8().const_int(1, false),
                )?;
                for (plan, ((value, count), (global, global_count))) in aggregates
                    .iter()
                    .zip(shared.values.iter().zip(&shared.counts).zip(&globals))
                {
                    let ty = em.value_type(plan.accumulator);
                    let partial = em.b.build_load(ty, em.offset_ptr(ty, *value, slot)?, "")?;
                    atomic(
                        em,
                        plan.kind.reduce_op(),
                        em.offset_ptr(ty, *global, slot)?,
                        partial,
                    )?;
                    if let (Some(count), Some(global_count)) = (count, global_count) {
                        let n = em.b.build_load(
                            em.i64(),
                            em.offset_ptr(em.i64().into(), *count, slot)?,
                            "",
                        )?;
                        atomic(
                            em,
                            ReduceOp::Add,
                            em.offset_ptr(em.i64().into(), *global_count, slot)?,
                            n,
                        )?;
                    }
                }
                Ok(())
            })
        })
    }
}

/// `*ptr = *ptr op value`, atomically.
fn atomic<'ctx>(
    em: &tessera_runtime::Emitter<'ctx, '_>,
    op: ReduceOp,
    ptr: inkwell::values::PointerValue<'ctx>,
    value: BasicValueEnum<'ctx>,
) -> CodegenResult<()> {
    reduce::atomic_combine(em, op, ptr, value)
}

/// How a thread value folds rows in: its function's combination, or a count's addition.
fn thread_value_op(value: &ThreadValue) -> ReduceOp {
    match value {
        ThreadValue::Fold { function, .. } => aggregate_kind(*function).reduce_op(),
        ThreadValue::Count(_) => ReduceOp::Add,
    }
}

/// The runtime's name for an aggregate function (device slots and host steps alike).
pub(super) fn aggregate_kind(function: Aggregate) -> AggregateKind {
    match function {
        Aggregate::Sum => AggregateKind::Sum,
        Aggregate::Count => AggregateKind::Count,
        Aggregate::Min => AggregateKind::Min,
        Aggregate::Max => AggregateKind::Max,
        Aggregate::Avg => AggregateKind::Avg,
    }
}
