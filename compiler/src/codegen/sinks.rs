//! Where a pipeline's selected rows go: into a hash table (a build), or into aggregates, either
//! one row's worth (reduced across the block, then one atomic per block) or one slot per group
//! of a dense array indexed by the group keys (an atomic per row and aggregate).

use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{AtomicRMWBinOp, IntPredicate};
use tessera_grammar::Diagnostic;
use tessera_runtime::emit::Item;
use tessera_runtime::primitives::hash::{self, status};
use tessera_runtime::primitives::reduce::{self, ReduceOp};
use tessera_runtime::program::{AggregateKind, AggregateSlot, DenseKey, Fill, ResultShape};
use tessera_runtime::{CodegenError, CodegenResult};
use tessera_stdlib::Aggregate;
use tessera_storage::DataType;

use crate::columns::ColumnId;
use crate::expr::Expr;
use crate::physical::{GroupLayout, KeyDomain, Pipeline, Sink};

use super::kernel::Kernel;
use super::query::QueryContext;

pub(super) enum SinkPlan {
    Build {
        table: usize,
        key: Expr,
    },
    Aggregate {
        keys: Vec<(ColumnId, Expr, KeyDomain)>,
        aggregates: Vec<AggregatePlan>,
        /// One byte per group slot (dense only).
        presence: Option<usize>,
    },
}

pub(super) struct AggregatePlan {
    kind: AggregateKind,
    arg: Option<Expr>,
    accumulator: DataType,
    buffer: usize,
    count: Option<usize>,
}

impl SinkPlan {
    pub fn expressions(&self) -> Vec<&Expr> {
        match self {
            SinkPlan::Build { key, .. } => vec![key],
            SinkPlan::Aggregate {
                keys, aggregates, ..
            } => keys
                .iter()
                .map(|(_, e, _)| e)
                .chain(aggregates.iter().filter_map(|a| a.arg.as_ref()))
                .collect(),
        }
    }

    pub fn buffers(&self, qc: &QueryContext<'_>) -> Vec<usize> {
        match self {
            SinkPlan::Build { table, .. } => vec![qc.tables[*table].1],
            SinkPlan::Aggregate {
                aggregates,
                presence,
                ..
            } => aggregates
                .iter()
                .flat_map(|a| std::iter::once(a.buffer).chain(a.count))
                .chain(*presence)
                .collect(),
        }
    }
}

/// Allocates the sink's buffers and says how its result is read back.
pub(super) fn plan_sink(
    qc: &mut QueryContext<'_>,
    pipeline: &Pipeline,
) -> Result<(SinkPlan, Option<ResultShape>), Diagnostic> {
    let query = qc.query;
    let span = query.span;
    match &pipeline.sink {
        Sink::Build { table, key } => Ok((
            SinkPlan::Build {
                table: *table,
                key: key.clone(),
            },
            None,
        )),
        Sink::Materialize { .. } => Err(Diagnostic::unsupported(
            span,
            "queries that return rows without aggregating them cannot run yet; end the query with `group` or `aggregate`",
        )),
        Sink::Aggregate {
            keys,
            aggregates,
            layout,
        } => {
            let (slots, grouped) = match layout {
                GroupLayout::Scalar => (1, false),
                GroupLayout::Dense { .. } => (layout.slots(), true),
                GroupLayout::Hash { .. } => {
                    return Err(Diagnostic::unsupported(
                        span,
                        "this grouping has too many possible groups for a dense array, and hash grouping is not supported yet",
                    ))
                }
            };
            let mut plans = Vec::with_capacity(aggregates.len());
            let mut slots_out = Vec::with_capacity(aggregates.len());
            for (id, aggregate) in aggregates {
                let kind = match aggregate.function {
                    Aggregate::Sum => AggregateKind::Sum,
                    Aggregate::Count => AggregateKind::Count,
                    Aggregate::Min => AggregateKind::Min,
                    Aggregate::Max => AggregateKind::Max,
                    Aggregate::Avg => AggregateKind::Avg,
                };
                let accumulator = match kind {
                    AggregateKind::Sum => aggregate.ty,
                    AggregateKind::Count => DataType::I64,
                    AggregateKind::Avg => DataType::F64,
                    AggregateKind::Min | AggregateKind::Max => aggregate.arg.as_ref().map_or(aggregate.ty, |a| a.ty),
                };
                let arg_nullable = aggregate.arg.as_ref().is_some_and(|a| a.nullable);
                let needs_count = match kind {
                    AggregateKind::Count => false,
                    AggregateKind::Avg => true,
                    _ => !grouped || arg_nullable,
                };
                let name = query.columns.get(*id).name.clone();
                let buffer = qc.buffer(name.clone(), slots, accumulator.width() as u32, identity_fill(kind, accumulator));
                let count = needs_count.then(|| qc.buffer(format!("{name}_count"), slots, 8, Fill::Zero));
                let dictionary = match (&aggregate.arg, kind) {
                    (Some(arg), AggregateKind::Min | AggregateKind::Max) if arg.ty == DataType::Str => arg
                        .as_column()
                        .and_then(|c| query.columns.get(c).origin.clone())
                        .map(|o| (o.table, o.column)),
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
                    kind,
                    arg: aggregate.arg.clone(),
                    accumulator,
                    buffer,
                    count,
                });
            }
            let GroupLayout::Dense { domains } = layout else {
                return Ok((
                    SinkPlan::Aggregate {
                        keys: Vec::new(),
                        aggregates: plans,
                        presence: None,
                    },
                    Some(ResultShape::Scalar { aggregates: slots_out }),
                ));
            };
            let mut dense_keys = Vec::with_capacity(keys.len());
            let mut plan_keys = Vec::with_capacity(keys.len());
            for ((id, expr), domain) in keys.iter().zip(domains) {
                let info = query.columns.get(*id);
                if expr.nullable {
                    return Err(Diagnostic::unsupported(
                        expr.span,
                        format!("grouping by `{}`, which may hold nulls, is not supported yet", info.name),
                    ));
                }
                if let Some(source) = expr.as_column() {
                    qc.assume_range(source, domain.min, domain.min + domain.size as i64 - 1);
                }
                let dictionary = match expr.ty {
                    DataType::Str => expr
                        .as_column()
                        .and_then(|c| query.columns.get(c).origin.clone())
                        .map(|o| (o.table, o.column)),
                    _ => None,
                };
                dense_keys.push(DenseKey {
                    id: id.0,
                    ty: info.ty,
                    min: domain.min,
                    size: domain.size,
                    dictionary,
                });
                plan_keys.push((*id, expr.clone(), *domain));
            }
            let presence = qc.buffer("groups".into(), slots, 1, Fill::Zero);
            Ok((
                SinkPlan::Aggregate {
                    keys: plan_keys,
                    aggregates: plans,
                    presence: Some(presence),
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

/// Accumulators start at the identity of their operation.
fn identity_fill(kind: AggregateKind, ty: DataType) -> Fill {
    let pattern = match (kind, ty) {
        (AggregateKind::Min, DataType::F32) => u64::from(f32::INFINITY.to_bits()),
        (AggregateKind::Min, DataType::F64) => f64::INFINITY.to_bits(),
        (AggregateKind::Min, DataType::I64) => i64::MAX as u64,
        (AggregateKind::Min, _) => i32::MAX as u32 as u64,
        (AggregateKind::Max, DataType::F32) => u64::from(f32::NEG_INFINITY.to_bits()),
        (AggregateKind::Max, DataType::F64) => f64::NEG_INFINITY.to_bits(),
        (AggregateKind::Max, DataType::I64) => i64::MIN as u64,
        (AggregateKind::Max, _) => i32::MIN as u32 as u64,
        _ => return Fill::Zero,
    };
    Fill::Pattern(pattern)
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    pub(super) fn sink(
        &mut self,
        qc: &mut QueryContext<'_>,
        sink: &SinkPlan,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let result = match sink {
            SinkPlan::Build { table, key } => self.build(qc, *table, key),
            SinkPlan::Aggregate {
                keys,
                aggregates,
                presence: None,
            } if keys.is_empty() => self.scalar_aggregates(aggregates),
            SinkPlan::Aggregate {
                keys,
                aggregates,
                presence: Some(presence),
            } => self.dense_aggregates(qc, keys, aggregates, *presence),
            SinkPlan::Aggregate { .. } => Err(CodegenError::Invalid(
                "grouped aggregates without a layout".into(),
            )),
        };
        result.map_err(|e| Diagnostic::internal(span, e.to_string()))
    }

    fn build(&mut self, qc: &QueryContext<'_>, table: usize, key: &Expr) -> CodegenResult<()> {
        let payload = qc.query.hash_tables[table].payload.clone();
        let mut needed = key.columns_used();
        needed.extend(payload.iter().copied());
        self.load_columns(&needed)?;
        let (layout, buffer) = &qc.tables[table];
        let pointer = self.buffer(*buffer)?;
        let status = self.buffer(qc.status)?;
        let fields = payload
            .iter()
            .map(|id| {
                self.tiles.get(id).map(|t| t.values).ok_or_else(|| {
                    CodegenError::Invalid(format!("payload column {id} is not in registers"))
                })
            })
            .collect::<CodegenResult<Vec<_>>>()?;
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let k = self.eval(key, item)?;
            // Rows with a null key join nothing, so they are not inserted.
            let take = match k.valid {
                Some(valid) => em.b.build_and(flag, valid, "")?,
                None => flag,
            };
            em.if_then(take, || {
                let slot = hash::insert(em, layout, pointer, k.value.into_int_value(), status)?;
                let inserted = em.b.build_is_not_null(slot, "")?;
                em.if_then(inserted, || {
                    for (index, values) in fields.iter().enumerate() {
                        let (field, _) = hash::payload_ptr(em, layout, slot, index)?;
                        em.b.build_store(field, em.get(*values, item)?)?;
                    }
                    Ok(())
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
        match &plan.arg {
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

    fn scalar_aggregates(&mut self, aggregates: &[AggregatePlan]) -> CodegenResult<()> {
        let mut needed = Vec::new();
        for a in aggregates {
            if let Some(arg) = &a.arg {
                needed.extend(arg.columns_used());
            }
        }
        self.load_columns(&needed)?;
        let em = &self.em;
        let mut accumulators = Vec::with_capacity(aggregates.len());
        for plan in aggregates {
            let ty = em.value_type(plan.accumulator);
            let acc = em.alloca(ty, "acc")?;
            em.b.build_store(acc, reduce::identity(plan.kind.reduce_op(), ty)?)?;
            let count = match plan.count {
                Some(_) => {
                    let count = em.alloca(em.i64().into(), "count")?;
                    em.b.build_store(count, em.const_i64(0))?;
                    Some(count)
                }
                None => None,
            };
            accumulators.push((acc, ty, count));
        }
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            for (plan, (acc, ty, count)) in aggregates.iter().zip(&accumulators) {
                let (value, take) = self.contribution(plan, item, flag)?;
                let current = em.b.build_load(*ty, *acc, "")?;
                let combined = reduce::combine(em, plan.kind.reduce_op(), current, value)?;
                let next = em.b.build_select(take, combined, current, "")?;
                em.b.build_store(*acc, next)?;
                if let Some(count) = count {
                    let n = em.b.build_load(em.i64(), *count, "")?.into_int_value();
                    let n =
                        em.b.build_int_add(n, em.b.build_int_z_extend(take, em.i64(), "")?, "")?;
                    em.b.build_store(*count, n)?;
                }
            }
            Ok(())
        })?;
        let first_thread =
            em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
        for (plan, (acc, ty, count)) in aggregates.iter().zip(&accumulators) {
            let value = em.b.build_load(*ty, *acc, "")?;
            let total = reduce::block_reduce(em, plan.kind.reduce_op(), value)?;
            let buffer = self.buffer(plan.buffer)?;
            em.if_then(first_thread, || {
                atomic(em, plan.kind.reduce_op(), buffer, total)
            })?;
            if let (Some(count), Some(count_buffer)) = (count, plan.count) {
                let n = em.b.build_load(em.i64(), *count, "")?;
                let total = reduce::block_reduce(em, ReduceOp::Add, n)?;
                let buffer = self.buffer(count_buffer)?;
                em.if_then(first_thread, || atomic(em, ReduceOp::Add, buffer, total))?;
            }
        }
        Ok(())
    }

    fn dense_aggregates(
        &mut self,
        qc: &QueryContext<'_>,
        keys: &[(ColumnId, Expr, KeyDomain)],
        aggregates: &[AggregatePlan],
        presence: usize,
    ) -> CodegenResult<()> {
        let mut needed = Vec::new();
        for (_, key, _) in keys {
            needed.extend(key.columns_used());
        }
        for a in aggregates {
            if let Some(arg) = &a.arg {
                needed.extend(arg.columns_used());
            }
        }
        self.load_columns(&needed)?;
        let status = self.buffer(qc.status)?;
        let presence = self.buffer(presence)?;
        let buffers = aggregates
            .iter()
            .map(|a| {
                Ok((
                    self.buffer(a.buffer)?,
                    a.count.map(|c| self.buffer(c)).transpose()?,
                ))
            })
            .collect::<CodegenResult<Vec<_>>>()?;
        let em = &self.em;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.if_then(flag, || {
                let mut index = em.const_i64(0);
                let mut inside = em.i1().const_all_ones();
                for (_, key, domain) in keys {
                    let k = self.eval(key, item)?.value.into_int_value();
                    let k = if k.get_type().get_bit_width() < 64 {
                        em.b.build_int_s_extend(k, em.i64(), "")?
                    } else {
                        k
                    };
                    let digit = em.b.build_int_sub(k, em.const_i64(domain.min), "")?;
                    let fits = em.b.build_int_compare(
                        IntPredicate::ULT,
                        digit,
                        em.const_i64(domain.size as i64),
                        "",
                    )?;
                    inside = em.b.build_and(inside, fits, "")?;
                    index =
                        em.b.build_int_mul(index, em.const_i64(domain.size as i64), "")?;
                    index = em.b.build_int_add(index, digit, "group")?;
                }
                hash::report_unless(em, inside, status, status::GROUP_OUT_OF_RANGE)?;
                em.if_then(inside, || {
                    let mark = em.offset_ptr(em.i8().into(), presence, index)?;
                    em.b.build_store(mark, em.i8().const_int(1, false))?;
                    for (plan, (buffer, count)) in aggregates.iter().zip(&buffers) {
                        let (value, take) =
                            self.contribution(plan, item, em.i1().const_all_ones())?;
                        em.if_then(take, || {
                            let ty = em.value_type(plan.accumulator);
                            let slot = em.offset_ptr(ty, *buffer, index)?;
                            atomic(em, plan.kind.reduce_op(), slot, value)?;
                            if let Some(count) = count {
                                let slot = em.offset_ptr(em.i64().into(), *count, index)?;
                                atomic(em, ReduceOp::Add, slot, em.const_i64(1).into())?;
                            }
                            Ok(())
                        })?;
                    }
                    Ok(())
                })
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
    let float = value.is_float_value();
    let op = match (op, float) {
        (ReduceOp::Add, false) => AtomicRMWBinOp::Add,
        (ReduceOp::Add, true) => AtomicRMWBinOp::FAdd,
        (ReduceOp::Min, false) => AtomicRMWBinOp::Min,
        (ReduceOp::Min, true) => AtomicRMWBinOp::FMin,
        (ReduceOp::Max, false) => AtomicRMWBinOp::Max,
        (ReduceOp::Max, true) => AtomicRMWBinOp::FMax,
    };
    em.atomic_update(op, ptr, value)
}
