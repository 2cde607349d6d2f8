//! One query's code: hash-table layouts and device buffers, a kernel per pipeline, and the plan
//! for reading the result back.

use std::collections::{HashMap, HashSet};

use inkwell::context::Context;
use tessera_grammar::Diagnostic;
use tessera_runtime::primitives::chain::{build_chain_kernel, ChainKernel};
use tessera_runtime::primitives::hash::{status, HashKind, HashTableLayout};
use tessera_runtime::primitives::partition::PartitionStarts;
use tessera_runtime::program::{
    hash_table_buffer, Assumption, BufferSpec, Extent, Fill, HostAggregate, HostOp, KernelLaunch,
    Param, QueryProgram, ResultShape, ResultSpec,
};
use tessera_runtime::{CodegenResult, Target, TileShape};
use tessera_storage::compress::Scheme;
use tessera_storage::{Catalog, DataType};

use crate::columns::ColumnId;
use crate::physical::constants::Constant;
use crate::physical::{
    BuildKeys, HashLayout, HostStep, Input, PartitionPass, Partitioning, PhysicalQuery, Pipeline,
    Sink, Step,
};

use super::kernel::pipeline_to_kernel;
use super::sinks::plan_sink;
use super::KernelModule;

/// What the kernels of one query share.
pub(super) struct QueryContext<'q> {
    pub query: &'q PhysicalQuery,
    pub catalog: &'q Catalog,
    pub target: Target,
    /// The tile shape of every kernel of the query.
    pub tile: TileShape,
    pub buffers: Vec<BufferSpec>,
    pub status: usize,
    /// Per hash table: its layout and buffer.
    pub tables: Vec<(HashTableLayout, usize)>,
    /// Per hash table: the buffers of its rows, when it is chained.
    pub chains: Vec<Option<ChainBuffers>>,
    /// Per hash table: the `dict` column whose codes key it, when it is keyed by codes.
    pub coded: Vec<Option<CodedKey>>,
    pub assumptions: Vec<Assumption>,
    /// Per partitioning: its buffers.
    pub partitions: Vec<PartitionBuffers>,
    /// The first slot count of the query's grouping hash tables, if it has any (a grouping of
    /// another's groups shares it).
    pub group_capacity: Option<u64>,
    /// The grouped result of each grouping pipeline whose kernels are built (a one-row
    /// aggregate's included), by pipeline: what a pipeline over its slots reads.
    pub groupings: HashMap<usize, ResultShape>,
    /// Buffers of sinks that several pipelines share, by the sink's columns and the buffer's name.
    /// Each sink's kind and columns, numbered.
    pub sinks: HashMap<(SinkKind, Vec<crate::columns::ColumnId>), usize>,
    pub sink_buffers: HashMap<(usize, String), usize>,
}

/// What a sink does with its columns. Pipelines share a sink only when they do the same: rows
/// written out over a grouping's slots name the same columns as the grouping (its keys, then
/// its aggregates) and must not be written into its accumulators, which other tiles of the
/// same kernel are still reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SinkKind {
    Groups,
    Rows,
}

/// One field of a hash table's payload: a column's values, or whether they are valid (a byte
/// per row, for a column that may hold nulls).
#[derive(Clone, Copy, Debug)]
pub(super) struct PayloadField {
    pub column: ColumnId,
    pub validity: bool,
}

/// The fields of a hash table whose payload is `payload`: every payload column's values in
/// order, then the validity of those that may hold nulls.
pub(super) fn payload_fields(query: &PhysicalQuery, payload: &[ColumnId]) -> Vec<PayloadField> {
    let values = payload.iter().map(|&column| PayloadField {
        column,
        validity: false,
    });
    let validity = payload
        .iter()
        .filter(|c| query.columns.get(**c).nullable)
        .map(|&column| PayloadField {
            column,
            validity: true,
        });
    values.chain(validity).collect()
}

/// The parameter that translates the codes of hash table `table`'s build key (`key`) into the
/// probe column's, when the table holds the probe column's codes.
pub(super) fn key_translation(
    query: &PhysicalQuery,
    table: usize,
    key: &crate::expr::Expr,
) -> Option<Param> {
    let probe = query.hash_tables[table].key_codes_of.as_ref()?;
    let build = query.columns.get(key.as_column()?).origin.clone()?;
    Some(Param::Translation {
        from: (build.table, build.column),
        to: (probe.table.clone(), probe.column.clone()),
    })
}

/// A hash table keyed by the codes of a `dict` column rather than by values: every probe of it
/// reads that column's codes, and its build finds each key's code in the column's dictionary,
/// so the table has a slot per dictionary entry and probes skip the dictionary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CodedKey {
    pub table: String,
    pub column: String,
    /// The dictionary's length, the table's slot count.
    pub entries: u32,
}

impl CodedKey {
    /// The dictionary a build searches (its length checked when the kernel runs).
    pub fn dictionary(&self) -> Param {
        Param::Dictionary {
            table: self.table.clone(),
            column: self.column.clone(),
            scheme: Scheme::Dict,
            entries: Some(self.entries),
        }
    }
}

/// The `dict` column whose codes can key `table`, if any: every probe of the table is by that
/// one column, read from its table (a partitioning's buffers hold values) and never null, and
/// the table is not chained (its rows are grouped by slot after the build).
fn coded_key(
    query: &PhysicalQuery,
    catalog: &Catalog,
    table: &crate::physical::HashTable,
) -> Option<CodedKey> {
    if table.keys == BuildKeys::Chained {
        return None;
    }
    let mut origin = None;
    for pipeline in &query.pipelines {
        for step in &pipeline.steps {
            let Step::Probe { table: t, key, .. } = step else {
                continue;
            };
            if *t != table.id {
                continue;
            }
            let id = key.as_column()?;
            let info = query.columns.get(id);
            // Not a partitioning's rows or a grouping's slots, which hold values, not codes.
            let read_from_table = pipeline.scanned.contains(&id) && pipeline.input == Input::Table;
            let integer = matches!(info.ty, DataType::I32 | DataType::Date);
            if !read_from_table || !integer || info.nullable {
                return None;
            }
            let column = info.origin.as_ref()?;
            match &origin {
                None => origin = Some(column),
                Some(first) if *first == column => {}
                Some(_) => return None,
            }
        }
    }
    let origin = origin?;
    let scheme = catalog.scheme(&origin.table, &origin.column).ok()?;
    if scheme != Scheme::Dict {
        return None;
    }
    let packed = catalog
        .packed(&origin.table, &origin.column, Scheme::Dict)
        .ok()?;
    Some(CodedKey {
        table: origin.table.clone(),
        column: origin.column.clone(),
        entries: u32::try_from(packed.dictionary.len())
            .ok()
            .filter(|&n| n > 0)?,
    })
}

/// The buffers of a chained table's rows.
#[derive(Clone, Copy)]
pub(super) struct ChainBuffers {
    /// A record per row of the table that builds it (at its row number): the row's slot, its
    /// rank among the slot's rows and its payload.
    pub records: usize,
    /// The rows' payloads grouped by key (none when the table brings no columns).
    pub rows: Option<usize>,
    /// How many rows slots have claimed room for (an `i32`).
    pub placed: usize,
}

/// The buffers of a partitioning (`physical::Partitioning`).
#[derive(Clone)]
pub(super) struct PartitionBuffers {
    /// Per part (`i64`): its row count after the counting pass, then where its next row goes.
    pub cursors: usize,
    /// The number of rows written (`i64`).
    pub total: usize,
    /// Per column written: its values and, when it may be null, its validity bytes.
    pub columns: Vec<(crate::columns::ColumnId, usize, Option<usize>)>,
}

impl QueryContext<'_> {
    pub fn buffer(&mut self, name: String, elements: u64, ty_bytes: u32, fill: Fill) -> usize {
        self.buffers.push(BufferSpec {
            name,
            elements,
            element_bytes: ty_bytes,
            fill,
            per_group_slot: false,
            per_row_of: Vec::new(),
            rows_per_element: 1,
            output: false,
        });
        self.buffers.len() - 1
    }

    /// The grouped result pipeline `pipeline` reads the slots of, when it runs over a
    /// grouping's slots (`Input::Groups`).
    pub fn grouping_read(&self, pipeline: &Pipeline) -> CodegenResult<Option<&ResultShape>> {
        match pipeline.input {
            Input::Groups(grouping) => self
                .groupings
                .get(&grouping)
                .map(Some)
                .ok_or_else(super::groups::not_grouped),
            _ => Ok(None),
        }
    }

    /// A buffer with one element per slot of the grouping hash table, however large it grows.
    pub fn group_buffer(&mut self, name: String, ty_bytes: u32, fill: Fill) -> usize {
        let index = self.buffer(name, 0, ty_bytes, fill);
        self.buffers[index].per_group_slot = true;
        index
    }

    /// Whether `pipeline` probes a hash table whose keys repeat: a tile's rows then run in
    /// rounds of matches, each a row of the tile or none.
    pub fn probes_chains(&self, pipeline: &Pipeline) -> bool {
        pipeline
            .steps
            .iter()
            .any(|step| matches!(step, Step::Probe { table, .. } if self.chains[*table].is_some()))
    }

    /// The sink that writes or groups `columns`: the same for every pipeline ending in it
    /// (the inputs of a `union`), for [`QueryContext::sink_buffer`].
    pub fn sink(&mut self, kind: SinkKind, columns: &[crate::columns::ColumnId]) -> usize {
        let next = self.sinks.len();
        *self.sinks.entry((kind, columns.to_vec())).or_insert(next)
    }

    /// Buffer `name` of `sink`: made by `make` for the first pipeline ending in that sink, and
    /// shared by the next.
    pub fn sink_buffer(
        &mut self,
        sink: usize,
        name: &str,
        make: impl FnOnce(&mut Self) -> usize,
    ) -> usize {
        let key = (sink, name.to_string());
        if let Some(&index) = self.sink_buffers.get(&key) {
            return index;
        }
        let index = make(self);
        self.sink_buffers.insert(key, index);
        index
    }

    /// Records that the stored column behind `id` must lie in `min ..= max`.
    pub fn assume_range(&mut self, id: crate::columns::ColumnId, min: i64, max: i64) {
        let info = self.query.columns.get(id);
        // Dictionary codes are rebuilt with the data; their range is checked through the
        // dictionary size instead, which the same assumption covers (codes are 0..size).
        if let Some(origin) = &info.origin {
            let assumption = Assumption {
                table: origin.table.clone(),
                column: origin.column.clone(),
                min,
                max,
            };
            if !self.assumptions.contains(&assumption) {
                self.assumptions.push(assumption);
            }
        }
    }
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
        qc.tables.push((layout, buffer));
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
            let context = Context::create();
            let module = context.create_module(&name);
            super::targets::prepare_module(&module, target)?;
            let launch = pipeline_to_kernel(&context, &module, &mut qc, pipeline, sink, &name)?;
            if let Err(message) = module.verify() {
                return Err(Diagnostic::internal(
                    query.span,
                    format!("generated LLVM IR is invalid: {message}"),
                ));
            }
            modules.push(KernelModule {
                kernel: name,
                bitcode: module.write_bitcode_to_memory().as_slice().to_vec(),
                llvm_o1,
                packed_scan: !probes
                    && launch
                        .params
                        .iter()
                        .any(|p| matches!(p, Param::PackedWords { .. })),
            });
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
    // Ids past the query's columns, for values the host computes to sort by.
    let mut next_id = query.columns.len() as u32;
    for step in &query.host_steps {
        steps.push(match step {
            HostStep::Sort { keys, .. } => {
                let mut ids = Vec::with_capacity(keys.len());
                let mut computed = Vec::new();
                for key in keys {
                    let id = match key.expr.as_column() {
                        Some(id) => id.0,
                        // An expression is computed into a column of its own first.
                        None => {
                            computed.push(HostOp::Compute {
                                id: next_id,
                                ty: key.expr.ty,
                                expr: super::expr::host_expr(&key.expr)?,
                            });
                            next_id += 1;
                            next_id - 1
                        }
                    };
                    ids.push((id, key.descending));
                }
                steps.extend(computed);
                steps.push(HostOp::Sort(ids));
                continue;
            }
            HostStep::Limit(n) => HostOp::Limit(*n),
            HostStep::Filter(predicate) => HostOp::Filter(super::expr::host_expr(predicate)?),
            HostStep::Repeat(copies) => HostOp::Repeat(super::expr::host_expr(copies)?),
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
    let (shape, steps) = match device_sort {
        true => {
            super::sort::sort_rows_on_device(index, &mut qc, shape, steps, &mut kernels, modules)?
        }
        false => (shape, steps),
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
    let (layout, buffer) = &qc.tables[table];
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
    let per_row = |qc: &mut QueryContext<'_>, name: String, width: u32| {
        let index = qc.buffer(name, 0, width, Fill::Zero);
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
    let context = Context::create();
    let module = context.create_module(name);
    super::targets::prepare_module(&module, qc.target)?;
    build(&context, &module).map_err(|e| Diagnostic::internal(span, e.to_string()))?;
    if let Err(message) = module.verify() {
        return Err(Diagnostic::internal(
            span,
            format!("generated LLVM IR is invalid: {message}"),
        ));
    }
    modules.push(KernelModule {
        kernel: name.to_string(),
        bitcode: module.write_bitcode_to_memory().as_slice().to_vec(),
        llvm_o1: true,
        packed_scan: false,
    });
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
