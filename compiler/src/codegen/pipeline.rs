//! One pipeline as one kernel, in the order its code is generated: the kernel's parameters and
//! choices (`choices.rs`), the sink's set-up, the loop over tiles, each tile's steps
//! (`steps.rs`) and sink (`sinks.rs`), and the sink's end. The top of a kernel's generators:
//! it calls them, and none of them calls back into it (a probe that runs the rest of the
//! pipeline inside its loop over matches is handed that rest as a closure).

use inkwell::context::Context;
use inkwell::module::Module;
use tessera_grammar::ast::JoinKind;
use tessera_grammar::{Diagnostic, DiagnosticKind};
use tessera_runtime::primitives::load;
use tessera_runtime::program::{Extent, Fill, KernelLaunch, Param};
use tessera_runtime::{CodegenError, TileShape};

use crate::columns::ColumnId;
use crate::expr::Expr;
use crate::physical::{Input, Pipeline, Step};

use super::choices::{choose, KernelChoices};
use super::context::QueryContext;
use super::expr::expression_params;
use super::groups::{dense_slots, group_params};
use super::kernel::{partition_params, stored_column_params, Kernel};
use super::sinks::{SinkPlan, SinkState};
use super::steps::probe_params;

/// The kernel named `name` that runs `pipeline` into `sink` (the pipeline's, or a share of its
/// aggregates: [`SinkPlan::into_kernel_sinks`]).
pub(super) fn pipeline_to_kernel<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    qc: &mut QueryContext<'_>,
    pipeline: &Pipeline,
    sink: SinkPlan,
    name: &str,
) -> Result<KernelLaunch, Diagnostic> {
    let span = qc.query.span;
    let internal = |e: CodegenError| Diagnostic::internal(span, e.to_string());
    let folds_rows = matches!(
        sink,
        SinkPlan::Aggregate { .. } | SinkPlan::HashGroups { .. } | SinkPlan::Materialize { .. }
    );
    // A tile's rounds of matches on repeated keys take as long as its matches: blocks take
    // tiles from a counter rather than every grid-th one, so that one with a heavy tile
    // leaves the others to the rest. Over a partitioning's rows the counter keeps the blocks
    // on neighbouring tiles, hence on one or two parts of the table: striding, blocks drift
    // apart over the run, and their tiles come to span more parts than the L2 holds.
    let tile_counter = (qc.target.is_gpu()
        && (matches!(pipeline.input, Input::Partitioned(_)) || qc.probes_chains(pipeline)))
    .then(|| qc.buffer(format!("{name} tiles taken"), 1, 4, Fill::Zero));
    let tile = sink.tile(qc.target, qc.tile);
    let (mut params, choices) = collect_params(qc, pipeline, &sink, tile)?;
    if let Some(counter) = tile_counter {
        params.push(Param::Buffer(counter));
    }
    let mut kernel =
        Kernel::new(context, module, qc, pipeline, params, tile, name).map_err(internal)?;
    kernel.tile_counter = tile_counter;
    kernel.group_copy = choices.group_copy;
    if let Input::Partitioned(partitioning) = pipeline.input {
        kernel.partitioned = Some(qc.partitions[partitioning].clone());
    }
    kernel.groups = qc.grouping_read(pipeline).map_err(internal)?;
    let extent = match &kernel.groups {
        Some(groups) => Extent::GroupSlots(dense_slots(groups)),
        None => Extent::Tiles,
    };
    let state = kernel.sink_prologue(qc, &sink, name)?;
    let rows = kernel.input_rows().map_err(internal)?;
    kernel.open_tiles(rows).map_err(internal)?;
    kernel.body(qc, &sink, &state)?;
    kernel.close_tiles().map_err(internal)?;
    kernel.sink_epilogue(qc, &sink, &state)?;
    let params = kernel.finish().map_err(internal)?;
    Ok(KernelLaunch {
        name: name.to_string(),
        table: pipeline.table.clone(),
        tile,
        params,
        extent,
        // A pipeline over a grouping's slots reads no table, so nothing of it is streamed.
        runs_in_pieces: folds_rows
            && tile_counter.is_none()
            && !matches!(pipeline.input, Input::Groups(_)),
        notes: choices.notes,
    })
}

/// Every expression the pipeline evaluates.
fn expressions<'a>(pipeline: &'a Pipeline, sink: &'a SinkPlan) -> Vec<&'a Expr> {
    let mut exprs: Vec<&Expr> = pipeline.steps.iter().map(Step::expr).collect();
    exprs.extend(sink.expressions());
    exprs
}

/// The kernel's parameters, in the order its function takes them: the rows it reads, then
/// each generator's own, as declared next to its code (the input's columns, the expressions'
/// constants and per-code tables, the sink's sizes, the query's status words, the probed
/// tables, the sink's tables and buffers); and what the kernel settled on reading its columns.
fn collect_params(
    qc: &QueryContext<'_>,
    pipeline: &Pipeline,
    sink: &SinkPlan,
    tile: TileShape,
) -> Result<(Vec<Param>, KernelChoices), Diagnostic> {
    let mut params = vec![Param::Rows {
        table: pipeline.table.clone(),
    }];
    let mut push = |declared: Vec<Param>| {
        for param in declared {
            if !params.contains(&param) {
                params.push(param);
            }
        }
    };
    let exprs = expressions(pipeline, sink);
    let mut used: Vec<ColumnId> = exprs.iter().flat_map(|e| e.columns_used()).collect();
    used.extend(sink.columns_used(qc));
    let internal = |e: CodegenError| Diagnostic::internal(qc.query.span, e.to_string());
    if let Input::Partitioned(partitioning) = pipeline.input {
        // The scanned columns are the partitioning's buffers.
        push(partition_params(&qc.partitions[partitioning], &used));
        used.clear();
    }
    if let Some(groups) = qc.grouping_read(pipeline).map_err(internal)? {
        // The scanned columns are the grouping's keys and aggregates.
        push(group_params(&groups, &used).map_err(internal)?);
        used.clear();
    }
    let stored: Vec<(ColumnId, &crate::columns::BaseColumn)> = used
        .into_iter()
        .filter(|id| pipeline.scanned.contains(id))
        .filter_map(|id| Some((id, qc.query.columns.get(id).origin.as_ref()?)))
        .collect();
    let names: Vec<(String, String)> = stored
        .iter()
        .map(|(_, origin)| (origin.table.clone(), origin.column.clone()))
        .collect();
    let choices = choose(qc, tile, &names, sink)?;
    for (id, origin) in stored {
        let read = choices.read(&origin.table, &origin.column).ok_or_else(|| {
            Diagnostic::internal(
                qc.query.span,
                format!("{}.{} was not chosen for", origin.table, origin.column),
            )
        })?;
        let nullable = qc.query.columns.get(id).nullable;
        push(
            stored_column_params(qc.catalog, origin, read.scheme, read.block_words, nullable)
                .map_err(|e| Diagnostic::new(DiagnosticKind::Data, qc.query.span, e.to_string()))?,
        );
    }
    push(expression_params(qc.query, &exprs));
    push(sink.size_params());
    push(vec![Param::Buffer(qc.status)]);
    push(probe_params(qc, &pipeline.steps).map_err(internal)?);
    push(sink.table_params(qc));
    Ok((params, choices))
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    /// One tile's code: its flags, then the pipeline's steps and sink.
    fn body(
        &mut self,
        qc: &mut QueryContext<'_>,
        sink: &SinkPlan,
        state: &SinkState<'ctx>,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let internal = |e: CodegenError| Diagnostic::internal(span, e.to_string());
        load::init_flags(&self.em, self.num_items, self.flags).map_err(internal)?;
        if self.groups.is_some() {
            self.select_groups().map_err(internal)?;
        }
        // Estimates of how many rows survive are per tile: start each tile afresh.
        self.selected = 1.0;
        let pipeline = self.pipeline;
        self.run_steps(qc, &pipeline.steps, sink, state)
    }

    /// Generates `steps`, then the sink. A probe that can match several rows generates the
    /// steps after it, and the sink, inside its loop over matches.
    fn run_steps(
        &mut self,
        qc: &mut QueryContext<'_>,
        steps: &[Step],
        sink: &SinkPlan,
        state: &SinkState<'ctx>,
    ) -> Result<(), Diagnostic> {
        for (index, step) in steps.iter().enumerate() {
            if let Step::Probe {
                table,
                key,
                kind: JoinKind::Inner,
                selectivity,
                ..
            } = step
            {
                if qc.chains[*table].is_some() {
                    let rest = &steps[index + 1..];
                    let mut later: Vec<ColumnId> =
                        rest.iter().flat_map(|s| s.expr().columns_used()).collect();
                    later.extend(sink.columns_used(qc));
                    later.sort();
                    later.dedup();
                    return self.probe_chained(
                        qc,
                        *table,
                        key,
                        *selectivity,
                        &later,
                        |kernel, qc| kernel.run_steps(qc, rest, sink, state),
                    );
                }
            }
            self.step(qc, step)?;
        }
        self.sink(qc, sink, state)
    }
}
