//! One query's code: hash-table layouts and device buffers, a kernel per pipeline, and the plan
//! for reading the result back.

use std::collections::{HashMap, HashSet};

use inkwell::context::Context;
use tessera_grammar::Diagnostic;
use tessera_runtime::primitives::chain::{build_chain_kernel, ChainKernel};
use tessera_runtime::primitives::hash::{status, HashKind, HashTableLayout};
use tessera_runtime::primitives::partition::PartitionStarts;
use tessera_runtime::program::{
    hash_table_buffer, Extent, Fill, HostAggregate, HostOp, HostSort, KernelLaunch, Param,
    QueryProgram, ResultShape, ResultSpec,
};
use tessera_runtime::{Target, TileShape};
use tessera_storage::{Catalog, DataType};

use crate::columns::ColumnId;
use crate::physical::constants::Constant;
use crate::physical::{
    BuildKeys, HashLayout, HostStep, Input, PartitionPass, Partitioning, PhysicalQuery, Pipeline,
    Sink, Step,
};

use super::context::{
    coded_key, payload_fields, ChainBuffers, PartitionBuffers, QueryContext, TableSlots,
};
use super::module::KernelModule;
use super::pipeline::pipeline_to_kernel;
use super::sinks::plan_sink;

/// The column of the rows a host step reads `expr` from: its own where it is a column, else
/// a column past the query's (`next_id`) that a host `Compute` added to `steps` fills first.
fn host_column(
    expr: &crate::expr::Expr,
    next_id: &mut u32,
    steps: &mut Vec<HostOp>,
) -> Result<u32, Diagnostic> {
    if let Some(id) = expr.as_column() {
        return Ok(id.0);
    }
    steps.push(HostOp::Compute {
        id: *next_id,
        ty: expr.ty,
        expr: super::expr::host_expr(expr)?,
    });
    *next_id += 1;
    Ok(*next_id - 1)
}

/// Builds each pipeline of `query` as a kernel in a module of its own, appended to `modules`,
/// and returns the query's launch plan.
pub(super) fn query_to_llvm(
    index: usize,
    query: &PhysicalQuery,
    catalog: &Catalog,
    target: Target,
    tile: TileShape,
    modules: &mut Vec<KernelModule>,
) -> Result<QueryProgram, Diagnostic> {
    let mut qc = QueryContext {
        query,
        catalog,
        target,
        tile,
        buffers: Vec::new(),
        status: 0,
        tables: Vec::new(),
        chains: Vec::new(),
        coded: Vec::new(),
        partitions: Vec::new(),
        assumptions: Vec::new(),
        group_capacity: None,
        groupings: HashMap::new(),
        sinks: HashMap::new(),
        sink_buffers: HashMap::new(),
    };
    qc.status = qc.buffer("status".into(), u64::from(status::WORDS), 4, Fill::Zero);
    for &(column, min, max) in &query.assumptions {
        qc.assume_range(column, min, max);
    }
    for table in &query.hash_tables {
        let key_ty = query
            .pipelines
            .iter()
            .find_map(|p| match &p.sink {
                Sink::Build { table: t, key } if *t == table.id => Some(key.ty),
                Sink::Aggregate { keys, .. } if table.in_group_slots && p.id == table.built_by => {
                    keys.first().map(|(_, key)| key.ty)
                }
                _ => None,
            })
            .unwrap_or(DataType::I32);
        let coded = coded_key(query, catalog, table)
            .filter(|_| matches!(key_ty, DataType::I32 | DataType::Date));
        let kind = match (&coded, table.layout) {
            (Some(coded), _) => HashKind::Perfect {
                min: 0,
                slots: u64::from(coded.entries),
            },
            (None, HashLayout::Perfect { min, max }) => HashKind::Perfect {
                min,
                slots: crate::physical::range_slots(min, max),
            },
            (None, HashLayout::Open { capacity }) => HashKind::Open { capacity },
        };
        let payload: Vec<DataType> = payload_fields(query, &table.payload)
            .iter()
            .map(|field| match field.validity {
                true => DataType::Bool,
                false => query.columns.get(field.column).ty,
            })
            .collect();
        let layout = match table.keys {
            BuildKeys::Unique => HashTableLayout::new(kind, key_ty, &payload),
            BuildKeys::Shared => HashTableLayout::new(kind, key_ty, &payload).sharing_keys(),
            BuildKeys::Chained => HashTableLayout::chained(kind, key_ty, &payload),
        };
        if table.in_group_slots {
            // Probed where the grouping holds them: no buffer, no build.
            qc.tables
                .push((layout, TableSlots::Grouping(table.built_by)));
            qc.chains.push(None);
            qc.coded.push(None);
            continue;
        }
        let buffer = qc.buffers.len();
        qc.buffers
            .push(hash_table_buffer(&format!("ht{}", table.id), &layout));
        let chain = match &layout.rows {
            Some(rows) => {
                let built_from = &query.pipelines[table.built_by].table;
                let per_build_row = |qc: &mut QueryContext<'_>, name: String, stride: u32| {
                    let index = qc.buffer(name, 0, stride, Fill::Zero);
                    qc.buffers[index].per_row_of.push(built_from.clone());
                    index
                };
                let records = per_build_row(
                    &mut qc,
                    format!("ht{} records", table.id),
                    rows.record_stride(),
                );
                let grouped = (rows.stride > 0)
                    .then(|| per_build_row(&mut qc, format!("ht{} rows", table.id), rows.stride));
                let placed = qc.buffer(format!("ht{} placed", table.id), 1, 4, Fill::Zero);
                Some(ChainBuffers {
                    records,
                    rows: grouped,
                    placed,
                })
            }
            None => None,
        };
        qc.tables.push((layout, TableSlots::Buffer(buffer)));
        qc.chains.push(chain);
        qc.coded.push(coded);
    }

    for partitioning in &query.partitionings {
        let buffers = partition_buffers(&mut qc, partitioning);
        qc.partitions.push(buffers);
    }

    let mut kernels = Vec::with_capacity(query.pipelines.len());
    let mut shape = None;
    for pipeline in &query.pipelines {
        let (sink, result) = plan_sink(&mut qc, pipeline)?;
        let probes = pipeline
            .steps
            .iter()
            .any(|step| matches!(step, crate::physical::Step::Probe { .. }));
        let llvm_o1 = qc.probes_chains(pipeline) || matches!(pipeline.input, Input::Groups(_));
        let sinks = sink.into_kernel_sinks(&mut qc, pipeline);
        let parts = sinks.len();
        for (part, sink) in sinks.into_iter().enumerate() {
            let name = match parts {
                1 => format!("tessera_q{index}_p{}", pipeline.id),
                _ => format!("tessera_q{index}_p{}_{part}", pipeline.id),
            };
            // A kernel computing a share of the sink computes only what that share needs.
            let share;
            let pipeline = match parts {
                1 => pipeline,
                _ => {
                    share = steps_needed(pipeline, &sink.columns_used(&qc));
                    &share
                }
            };
            let (mut module, launch) =
                KernelModule::generate(&name, target, query.span, |context, module| {
                    pipeline_to_kernel(context, module, &mut qc, pipeline, sink, &name)
                })?;
            module.llvm_o1 = llvm_o1;
            module.packed_scan = !probes
                && launch
                    .params
                    .iter()
                    .any(|p| matches!(p, Param::PackedWords { .. }));
            modules.push(module);
            kernels.push(launch);
        }
        if let Some(
            grouped @ (ResultShape::Scalar { .. }
            | ResultShape::Dense { .. }
            | ResultShape::Hash { .. }),
        ) = &result
        {
            qc.groupings.insert(pipeline.id, grouped.clone());
        }
        if result.is_some() {
            shape = result;
        }
        if let Sink::Build { table, .. } = &pipeline.sink {
            group_chained_rows(index, &qc, *table, &pipeline.table, &mut kernels, modules)?;
        }
        if let Sink::Partition {
            partitioning,
            pass: PartitionPass::Count,
        } = &pipeline.sink
        {
            partition_starts(index, &qc, *partitioning, &mut kernels, modules)?;
        }
    }
    let Some(shape) = shape else {
        return Err(Diagnostic::internal(
            query.span,
            "the query has no pipeline producing its result",
        ));
    };
    let mut steps = Vec::new();
    // Ids past the query's columns, for values the host computes to sort or repeat rows by.
    let mut next_id = query.columns.len() as u32;
    for step in &query.host_steps {
        steps.push(match step {
            HostStep::Sort { keys, .. } => {
                let mut ids = Vec::with_capacity(keys.len());
                for key in keys {
                    let id = host_column(&key.expr, &mut next_id, &mut steps)?;
                    ids.push((id, key.descending));
                }
                steps.push(HostOp::Sort(ids));
                continue;
            }
            HostStep::Limit(n) => HostOp::Limit(*n),
            HostStep::Filter(predicate) => HostOp::Filter(super::expr::host_expr(predicate)?),
            HostStep::Repeat(copies) => {
                let copies = host_column(copies, &mut next_id, &mut steps)?;
                steps.push(HostOp::Repeat { copies });
                continue;
            }
            HostStep::CheckSum { exact, approximate } => HostOp::CheckSum {
                exact: exact.0,
                approximate: approximate.0,
                name: query.columns.get(*exact).name.clone(),
            },
            HostStep::Aggregate { keys, aggregates } => {
                let mut host_keys = Vec::with_capacity(keys.len());
                for (id, expr) in keys {
                    host_keys.push((id.0, expr.ty, super::expr::host_expr(expr)?));
                }
                let mut host_aggregates = Vec::with_capacity(aggregates.len());
                for (id, aggregate) in aggregates {
                    host_aggregates.push(HostAggregate {
                        id: id.0,
                        name: query.columns.get(*id).name.clone(),
                        kind: super::sinks::aggregate_kind(aggregate.function),
                        ty: aggregate.ty,
                        arg: aggregate
                            .arg
                            .as_ref()
                            .map(super::expr::host_expr)
                            .transpose()?,
                    });
                }
                HostOp::Aggregate {
                    keys: host_keys,
                    aggregates: host_aggregates,
                }
            }
            HostStep::Project(outputs) => {
                let mut computed = Vec::new();
                for (id, expr) in outputs {
                    if expr.as_column() != Some(*id) {
                        computed.push(HostOp::Compute {
                            id: id.0,
                            ty: expr.ty,
                            expr: super::expr::host_expr(expr)?,
                        });
                    }
                }
                steps.extend(computed);
                continue;
            }
        });
    }
    let device_sort = matches!(
        query.host_steps.first(),
        Some(HostStep::Sort {
            on_device: true,
            ..
        })
    );
    let (shape, steps, host_sort) = match device_sort {
        true => {
            let host_sort = HostSort {
                first_kernel: kernels.len(),
                rows: super::sort::rows_sorted_on_host(&steps),
                shape: shape.clone(),
                steps: steps.clone(),
            };
            let (shape, steps) = super::sort::sort_rows_on_device(
                index,
                &mut qc,
                shape,
                steps,
                &mut kernels,
                modules,
            )?;
            (shape, steps, Some(host_sort))
        }
        false => (shape, steps, None),
    };
    Ok(QueryProgram {
        kernels,
        buffers: qc.buffers,
        result: ResultSpec {
            shape,
            steps,
            output: query
                .output
                .iter()
                .map(|(name, id)| (name.clone(), id.0))
                .collect(),
            output_types: query
                .output
                .iter()
                .map(|(_, id)| query.columns.get(*id).ty)
                .collect(),
            status_buffer: qc.status,
            host_sort,
        },
        assumptions: qc.assumptions,
        columns: columns_used(query),
        constants: query.constants.iter().map(Constant::value).collect(),
        group_capacity: qc.group_capacity,
    })
}

/// Every stored column the query reads, with the type and nullability its code assumes.
fn columns_used(query: &PhysicalQuery) -> Vec<tessera_runtime::program::ColumnUse> {
    let mut used: Vec<tessera_runtime::program::ColumnUse> = Vec::new();
    for info in query.columns.iter() {
        // A `case`'s string literals index a dictionary of their own, not stored data.
        let stored = info
            .origin
            .as_ref()
            .filter(|o| o.table != tessera_storage::derived::LITERAL_TABLE);
        if let Some(origin) = stored {
            let column = tessera_runtime::program::ColumnUse {
                table: origin.table.clone(),
                column: origin.column.clone(),
                ty: info.ty,
                nullable: info.nullable,
            };
            if !used.contains(&column) {
                used.push(column);
            }
        }
    }
    used
}

/// After the build of a chained table, the kernels that group its rows by key
/// (`primitives::chain`): each slot's start, then each row's payload moved there.
fn group_chained_rows(
    index: usize,
    qc: &QueryContext<'_>,
    table: usize,
    built_from: &str,
    kernels: &mut Vec<KernelLaunch>,
    modules: &mut Vec<KernelModule>,
) -> Result<(), Diagnostic> {
    let Some(chain) = qc.chains[table] else {
        return Ok(());
    };
    let layout = &qc.tables[table].0;
    let buffer = &qc
        .table_buffer(table)
        .map_err(|e| Diagnostic::internal(qc.query.span, e.to_string()))?;
    let parts = ChainKernel::starts_parts(qc.target, layout.slots());
    let mut launch = |kernel: ChainKernel, params: Vec<Param>, extent: Extent, from: &str| {
        let name = format!("tessera_q{index}_ht{table}_{}", kernel.label());
        runtime_kernel(qc, &name, modules, |context, module| {
            build_chain_kernel(context, module, qc.target, &name, kernel, layout, parts)
        })?;
        kernels.push(KernelLaunch {
            name,
            table: from.to_string(),
            tile: kernel.tile(qc.target),
            params,
            extent,
            runs_in_pieces: false,
            notes: Vec::new(),
        });
        Ok(())
    };
    launch(
        ChainKernel::Starts,
        vec![Param::Buffer(*buffer), Param::Buffer(chain.placed)],
        Extent::Parts(parts),
        "",
    )?;
    if let Some(rows) = chain.rows {
        launch(
            ChainKernel::Place,
            vec![
                Param::Rows {
                    table: built_from.to_string(),
                },
                Param::Buffer(chain.records),
                Param::Buffer(*buffer),
                Param::Buffer(rows),
            ],
            Extent::Tiles,
            built_from,
        )?;
    }
    Ok(())
}

/// Allocates a partitioning's buffers: a cursor per part, the row total, and a buffer per
/// column written (room for every row of the table the partitioning pipelines scan).
fn partition_buffers(qc: &mut QueryContext<'_>, partitioning: &Partitioning) -> PartitionBuffers {
    let query = qc.query;
    let id = partitioning.id;
    let table = query
        .pipelines
        .iter()
        .find(|p| p.input == Input::Partitioned(id))
        .map(|p| p.table.clone())
        .unwrap_or_default();
    let cursors = qc.buffer(
        format!("part{id} cursors"),
        u64::from(partitioning.parts),
        8,
        Fill::Zero,
    );
    let total = qc.buffer(format!("part{id} rows"), 1, 8, Fill::Zero);
    // The partitioning kernel writes each row it places, and parts are read no further than
    // their rows: its columns need no zeroing.
    let per_row = |qc: &mut QueryContext<'_>, name: String, width: u32| {
        let index = qc.buffer(name, 0, width, Fill::Unset);
        qc.buffers[index].per_row_of.push(table.clone());
        index
    };
    let columns = partitioning
        .columns
        .iter()
        .map(|&column| {
            let info = query.columns.get(column);
            let values = per_row(
                qc,
                format!("part{id} {}", info.name),
                info.ty.width() as u32,
            );
            let valid = info
                .nullable
                .then(|| per_row(qc, format!("part{id} {}_valid", info.name), 1));
            (column, values, valid)
        })
        .collect();
    PartitionBuffers {
        cursors,
        total,
        columns,
    }
}

/// After a partitioning's counting pass, the kernel giving each part its run of rows.
fn partition_starts(
    index: usize,
    qc: &QueryContext<'_>,
    partitioning: usize,
    kernels: &mut Vec<KernelLaunch>,
    modules: &mut Vec<KernelModule>,
) -> Result<(), Diagnostic> {
    let buffers = &qc.partitions[partitioning];
    let parts = qc.query.partitionings[partitioning].parts;
    let name = format!("tessera_q{index}_part{partitioning}_starts");
    runtime_kernel(qc, &name, modules, |context, module| {
        PartitionStarts::build(context, module, qc.target, &name, parts)
    })?;
    kernels.push(KernelLaunch {
        name,
        table: String::new(),
        tile: PartitionStarts::tile(qc.target),
        params: vec![Param::Buffer(buffers.cursors), Param::Buffer(buffers.total)],
        extent: Extent::Parts(1),
        runs_in_pieces: false,
        notes: Vec::new(),
    });
    Ok(())
}

/// Builds one of the runtime's own kernels (not a pipeline's) with `build` in a module of its
/// own named `name`, and adds it to `modules`.
fn runtime_kernel<'ctx>(
    qc: &QueryContext<'_>,
    name: &str,
    modules: &mut Vec<KernelModule>,
    build: impl for<'c> FnOnce(
        &'c Context,
        &inkwell::module::Module<'c>,
    ) -> tessera_runtime::CodegenResult<()>,
) -> Result<(), Diagnostic> {
    let span = qc.query.span;
    let (module, ()) = KernelModule::generate(name, qc.target, span, |context, module| {
        build(context, module).map_err(|e| Diagnostic::internal(span, e.to_string()))
    })?;
    modules.push(module);
    Ok(())
}

/// `pipeline` without the computed columns that neither its sink (reading `sink_columns`) nor
/// a later step uses: its filters and probes stay, since they select the rows.
fn steps_needed(pipeline: &Pipeline, sink_columns: &[ColumnId]) -> Pipeline {
    let mut needed: HashSet<ColumnId> = sink_columns.iter().copied().collect();
    let mut steps = Vec::with_capacity(pipeline.steps.len());
    for step in pipeline.steps.iter().rev() {
        if let Step::Compute { column, .. } = step {
            if !needed.contains(column) {
                continue;
            }
        }
        needed.extend(step.expr().columns_used());
        steps.push(step.clone());
    }
    steps.reverse();
    Pipeline {
        steps,
        ..pipeline.clone()
    }
}
