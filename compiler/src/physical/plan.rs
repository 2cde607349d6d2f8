//! Logical plans to pipelines. The plan is walked bottom-up; rows flow through one pipeline
//! until an operator breaks it (a hash build, an aggregation, a sort). Each join's right side
//! becomes a build pipeline, and its left side probes the table in its own pipeline. Layouts
//! and the order of steps within a pipeline come from statistics.

use std::cell::RefCell;
use std::collections::HashMap;

use tessera_grammar::ast::{BinaryOp, JoinKind, SetOp};
use tessera_grammar::{Diagnostic, Span};
use tessera_runtime::program::wide_key;
use tessera_stdlib::Aggregate;
use tessera_storage::{Catalog, DataType, DecimalType, Value};

use crate::columns::{ColumnId, ColumnInfo, Columns};
use crate::expr::{AggregateExpr, Expr, ExprKind};
use crate::logical::{LogicalPlan, LogicalQuery};

use super::estimate::{Estimates, Estimator};
use super::same_plan::canonical_text;
use super::{
    accumulator_type, counts_rows, group_copy_bytes, range_slots, BuildKeys, DenseUpdates,
    GroupLayout, HashLayout, HashTable, HostStep, Input, KeyDomain, PartitionJoins, PartitionPass,
    Partitioning, PhysicalQuery, Pipeline, Sink, Step, ThreadValues, GROUP_COPY_BYTES,
    MAX_PARTITION_PARTS, PARTITION_PART_BYTES,
};

/// Dense group arrays up to this many slots; a hash table beyond...
const MAX_DENSE_GROUPS: u64 = 1 << 22;
/// ...unless the rows expected are at least a quarter of the slots, up to this many slots: TPC-H's
/// line items grouped by order (60 million slots at SF 10, as many rows) fill the array as
/// well as a hash table's slots, which would have to grow as the query runs, and run it again.
const MAX_FILLED_DENSE_GROUPS: u64 = 1 << 27;

/// Whether a dense array of `slots` suits a grouping of `rows` rows.
fn dense_pays(slots: u64, rows: f64) -> bool {
    slots <= MAX_DENSE_GROUPS || (slots <= MAX_FILLED_DENSE_GROUPS && slots as f64 <= 4.0 * rows)
}
/// A grouping expected to hold at least this many groups is written out and sorted on the
/// device when a sort follows (`Planner::write_groups_for_sort`); fewer are read back and
/// sorted on the host. Decoding a group on the host takes about 9 ns (TPC-H Q3, 1.1 million
/// groups in 9.5 ms on the H100 machine), and the device's sort some 40 launches of a few
/// microseconds each: they cost the same near 16 thousand groups.
const GROUPS_SORTED_ON_DEVICE: f64 = 16_384.0;
/// A perfect hash table may have at most this many slots per build row...
const PERFECT_SLOTS_PER_ROW: u64 = 64;
/// ...or this many slots in any case...
const PERFECT_SLOTS_ANYWAY: u64 = 1 << 16;
/// ...and never more than this.
const MAX_PERFECT_SLOTS: u64 = 1 << 27;
/// Whether `plan`'s rows come out of a join in the same pipeline (a join under filters and
/// projections, not under a grouping or a sort, which end pipelines).
fn pipeline_joins(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Join(_) | LogicalPlan::Product(_) => true,
        LogicalPlan::Filter(_) | LogicalPlan::Project(_) => {
            plan.inputs().into_iter().any(pipeline_joins)
        }
        _ => false,
    }
}

/// Whether `plan`'s rows are groups whose keys are exactly `columns` (in any order), so that
/// no combination of their values occurs twice: a grouping (or `distinct`) under filters,
/// sorts, limits and projections that pass its keys through.
fn grouped_by(plan: &LogicalPlan, columns: &[ColumnId]) -> bool {
    match plan {
        LogicalPlan::Aggregate(aggregate) => {
            aggregate.keys.len() == columns.len()
                && aggregate.keys.iter().all(|(id, _)| columns.contains(id))
        }
        LogicalPlan::Distinct(distinct) => {
            let output = distinct.input.output();
            output.len() == columns.len() && output.iter().all(|id| columns.contains(id))
        }
        LogicalPlan::Filter(filter) => grouped_by(&filter.input, columns),
        LogicalPlan::Sort(sort) => grouped_by(&sort.input, columns),
        LogicalPlan::Limit(limit) => grouped_by(&limit.input, columns),
        LogicalPlan::Project(project) => {
            let sources: Option<Vec<ColumnId>> = columns
                .iter()
                .map(|column| {
                    project
                        .outputs
                        .iter()
                        .find(|(id, _)| id == column)
                        .and_then(|(_, expr)| expr.as_column())
                })
                .collect();
            sources.is_some_and(|sources| grouped_by(&project.input, &sources))
        }
        _ => false,
    }
}

/// Whether `plan` produces at most one row: an aggregate without keys, under steps that keep
/// or drop rows one by one.
fn at_most_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(aggregate) => aggregate.keys.is_empty(),
        LogicalPlan::Limit(limit) => limit.count <= 1 || at_most_one_row(&limit.input),
        LogicalPlan::Filter(_) | LogicalPlan::Project(_) | LogicalPlan::Sort(_) => {
            plan.inputs().into_iter().all(at_most_one_row)
        }
        _ => false,
    }
}

/// The most rows a build side whose keys may repeat can have.
const MAX_CHAINED_ROWS: u64 = (1 << 30) - 1;

/// Splits one optimized logical query into pipelines.
pub fn logical_to_pipelines(
    query: &LogicalQuery,
    catalog: &Catalog,
    partition_joins: PartitionJoins,
) -> Result<PhysicalQuery, Diagnostic> {
    plan_query(query, catalog, partition_joins, None)
}

/// [`logical_to_pipelines`] taking the estimates remembered from earlier scripts, and keeping
/// this one's (a resident engine's planning).
pub fn logical_to_pipelines_remembering(
    query: &LogicalQuery,
    catalog: &Catalog,
    partition_joins: PartitionJoins,
    estimates: &mut Estimates,
) -> Result<PhysicalQuery, Diagnostic> {
    let remembered = RefCell::new(std::mem::take(estimates));
    let planned = plan_query(query, catalog, partition_joins, Some(&remembered));
    *estimates = remembered.into_inner();
    planned
}

fn plan_query(
    query: &LogicalQuery,
    catalog: &Catalog,
    partition_joins: PartitionJoins,
    remembered: Option<&RefCell<Estimates>>,
) -> Result<PhysicalQuery, Diagnostic> {
    let mut planner = Planner {
        partition_joins,
        partitionings: Vec::new(),
        estimator: Estimator {
            catalog,
            columns: &query.columns,
            remembered,
        },
        columns: query.columns.clone(),
        span: query.span,
        pipelines: Vec::new(),
        hash_tables: Vec::new(),
        host_steps: Vec::new(),
        assumptions: Vec::new(),
        unique_packed_keys: Vec::new(),
        groupings: Vec::new(),
    };
    if let Flow::Pipelined(opens) = planner.plan(&query.plan)? {
        let columns = query.plan.output();
        planner.finish_all(opens, &Sink::Materialize { columns })?;
    }
    // Sorts on the device are decided first: they are for many rows (`write_groups_for_sort`),
    // and the rows `compute_groups_on_device` writes for a grouping's few are sorted here.
    planner.sort_on_device();
    planner.compute_groups_on_device();
    planner.filter_groups_on_device();
    let mut physical = PhysicalQuery {
        pipelines: planner.pipelines,
        hash_tables: planner.hash_tables,
        partitionings: planner.partitionings,
        columns: planner.columns,
        host_steps: planner.host_steps,
        assumptions: planner.assumptions,
        output: query.output.clone(),
        constants: Vec::new(),
        span: query.span,
    };
    // Last, once every decision that looks at a constant's value has been taken.
    super::constants::hoist(&mut physical);
    Ok(physical)
}

/// Whether a projection computes a column (rather than only keeping or renaming columns).
fn computes(outputs: &[(ColumnId, Expr)]) -> bool {
    outputs
        .iter()
        .any(|(id, expr)| expr.as_column() != Some(*id))
}

/// The values a host step reads besides its rows' columns: a sort's keys, a repeat's count.
fn values_read(step: &HostStep) -> Vec<&Expr> {
    match step {
        HostStep::Sort { keys, .. } => keys.iter().map(|key| &key.expr).collect(),
        HostStep::Repeat(copies) => vec![copies],
        _ => Vec::new(),
    }
}

/// The values of [`values_read`], for a pass to replace with columns it computes.
fn values_read_mut(step: &mut HostStep) -> Vec<&mut Expr> {
    match step {
        HostStep::Sort { keys, .. } => keys.iter_mut().map(|key| &mut key.expr).collect(),
        HostStep::Repeat(copies) => vec![copies],
        _ => Vec::new(),
    }
}

/// Where the rows of a subplan are.
enum Flow {
    /// Flowing through pipelines that are still open: one, or one per input of a `union all`,
    /// whose rows together are the relation (each ends in its own copy of the same sink).
    Pipelined(Vec<OpenPipeline>),
    /// In a result on the host, after the last pipeline's sink.
    OnHost,
}

/// The columns of a grouping's slots a pipeline over them reads (`Planner::group_columns`).
struct GroupColumns {
    /// The grouping pipeline.
    grouping: usize,
    table: String,
    slots: u64,
    /// The groups expected.
    groups: f64,
    /// Keys and aggregates read as numbers.
    numbers: Vec<ColumnId>,
    /// String keys, read as codes of their table's dictionary: only grouped by.
    string_keys: Vec<ColumnId>,
    /// A one-row aggregate's: its one row is kept whatever follows (no slot to empty), and
    /// it is not grouped again there.
    one_row: bool,
}

/// Where a pipeline's rows come from, once its steps are known.
struct Scan {
    table: String,
    rows: u64,
    input: Input,
    scanned: Vec<ColumnId>,
}

#[derive(Clone)]
struct OpenPipeline {
    table: String,
    rows: u64,
    /// A table's columns it reads, or over a grouping's slots the columns those hold.
    scanned: Vec<ColumnId>,
    steps: Vec<Step>,
    input: Input,
    /// Over the slots of a grouping planned for another part of the query, each column it
    /// reads: its name here, and the grouping's column (`Pipeline::renamed`).
    renamed: Vec<(ColumnId, ColumnId)>,
}

struct Planner<'a> {
    estimator: Estimator<'a>,
    /// The query's columns, with those the planner adds (the markers of `intersect` and
    /// `except`).
    columns: Columns,
    span: Span,
    pipelines: Vec<Pipeline>,
    hash_tables: Vec<HashTable>,
    partitionings: Vec<Partitioning>,
    partition_joins: PartitionJoins,
    host_steps: Vec<HostStep>,
    /// Value ranges the plan relies on beyond those of group keys.
    assumptions: Vec<(ColumnId, i64, i64)>,
    /// Keys of several columns packed into one (`packed_join_keys`) whose columns hold no
    /// combination twice, so that the packed key holds no value twice.
    unique_packed_keys: Vec<Expr>,
    /// The groupings planned so far, for a relation grouped the same way again to read
    /// ([`Planner::planned_grouping`]).
    groupings: Vec<PlannedGrouping>,
}

/// A grouping pipeline and the logical grouping it runs, as [`canonical_text`].
struct PlannedGrouping {
    canonical: String,
    pipeline: usize,
    /// The grouping's keys, then its aggregates.
    outputs: Vec<ColumnId>,
}

impl Planner<'_> {
    fn plan(&mut self, node: &LogicalPlan) -> Result<Flow, Diagnostic> {
        match node {
            LogicalPlan::Scan(scan) => {
                if self.estimator.catalog.table(&scan.table).is_none() {
                    return Err(Diagnostic::new(
                        tessera_grammar::DiagnosticKind::Data,
                        scan.span,
                        format!("there is no data for table `{}`", scan.table),
                    )
                    .with_label("declared, but not in the data directory")
                    .with_hint(format!(
                        "the data directory needs `{0}.parquet`, a folder `{0}/` of Parquet files, or `{0}.tbl`",
                        scan.table
                    )));
                }
                let mut scanned = scan.columns.clone();
                for filter in &scan.filters {
                    for id in filter.columns_used() {
                        if !scanned.contains(&id) {
                            scanned.push(id);
                        }
                    }
                }
                let steps = scan
                    .filters
                    .iter()
                    .map(|predicate| Step::Filter {
                        selectivity: self.estimator.selectivity(predicate),
                        predicate: predicate.clone(),
                    })
                    .collect();
                Ok(Flow::Pipelined(vec![OpenPipeline {
                    table: scan.table.clone(),
                    rows: scan.rows,
                    scanned,
                    steps,
                    input: Input::Table,
                    renamed: Vec::new(),
                }]))
            }
            LogicalPlan::Filter(filter) => match self.plan(&filter.input)? {
                Flow::Pipelined(mut opens) => {
                    for predicate in filter.predicate.clone().into_conjuncts() {
                        let selectivity = self.estimator.selectivity(&predicate);
                        for open in &mut opens {
                            open.steps.push(Step::Filter {
                                predicate: predicate.clone(),
                                selectivity,
                            });
                        }
                    }
                    Ok(Flow::Pipelined(opens))
                }
                Flow::OnHost => {
                    self.host_steps
                        .push(HostStep::Filter(filter.predicate.clone()));
                    Ok(Flow::OnHost)
                }
            },
            LogicalPlan::Project(project) => match self.plan(&project.input)? {
                Flow::Pipelined(mut opens) => {
                    for open in &mut opens {
                        for (id, expr) in &project.outputs {
                            if expr.as_column() != Some(*id) {
                                open.steps.push(Step::Compute {
                                    column: *id,
                                    expr: expr.clone(),
                                });
                            }
                        }
                    }
                    Ok(Flow::Pipelined(opens))
                }
                Flow::OnHost => {
                    self.host_steps
                        .push(HostStep::Project(project.outputs.clone()));
                    Ok(Flow::OnHost)
                }
            },
            LogicalPlan::Join(join) => self.join(join),
            LogicalPlan::Aggregate(aggregate) => {
                if let Some(open) = self.planned_grouping(node) {
                    return Ok(Flow::Pipelined(vec![open]));
                }
                let Flow::Pipelined(opens) = self.plan(&aggregate.input)? else {
                    // A grouped result is grouped again over its slots where they hold what
                    // it reads; else, like a sorted result, it is grouped on the host.
                    if self.regroup_on_device(&aggregate.keys, &aggregate.aggregates)? {
                        return Ok(Flow::OnHost);
                    }
                    self.host_steps.push(HostStep::Aggregate {
                        keys: aggregate.keys.clone(),
                        aggregates: aggregate.aggregates.clone(),
                    });
                    return Ok(Flow::OnHost);
                };
                let rows = passing_rows(&opens);
                let aggregates = self.checked_sums(&aggregate.aggregates, &opens);
                let keys = constant_keys(&aggregate.input, aggregate.keys.clone());
                let layout = self.group_layout(&keys, &aggregates, rows);
                self.finish_all(opens, &grouping(keys, aggregates, layout)?)?;
                self.groupings.push(PlannedGrouping {
                    canonical: canonical_text(node, &self.columns),
                    pipeline: self.pipelines.len() - 1,
                    outputs: node.output(),
                });
                Ok(Flow::OnHost)
            }
            LogicalPlan::Sort(sort) => {
                if !self.materialize_for_host(&sort.input)? {
                    self.write_groups_for_sort(&sort.input.output(), &sort.keys);
                }
                self.host_steps.push(HostStep::Sort {
                    keys: sort.keys.clone(),
                    on_device: false,
                });
                Ok(Flow::OnHost)
            }
            LogicalPlan::Limit(limit) => {
                self.materialize_for_host(&limit.input)?;
                self.host_steps.push(HostStep::Limit(limit.count));
                Ok(Flow::OnHost)
            }
            LogicalPlan::Distinct(distinct) => {
                let keys =
                    constant_keys(&distinct.input, self.column_keys(&distinct.input.output()));
                self.group_without_aggregates(&distinct.input, None, keys)
            }
            LogicalPlan::SetOperation(set) => self.set_operation(set),
            // Every pair of rows: a join on a key that is the same for every row, so each left
            // row matches the whole right side through one chained list.
            LogicalPlan::Product(product) => {
                let same = Expr::literal(Value::Int(0), DataType::I32, product.span);
                self.join(&crate::logical::Join {
                    left: product.left.clone(),
                    right: product.right.clone(),
                    kind: JoinKind::Inner,
                    keys: vec![(same.clone(), same)],
                    residual: None,
                    span: product.span,
                })
            }
        }
    }

    /// What a pipeline over the slots of the query's grouping (its last pipeline, when that
    /// groups or aggregates) can read there, or `None` when there is no such grouping. A
    /// one-row aggregate is a grouping of one slot, which always holds its row.
    fn group_columns(&self) -> Option<GroupColumns> {
        self.group_columns_of(self.pipelines.len().checked_sub(1)?)
    }

    /// What a pipeline over the slots of grouping pipeline `pipeline` can read there
    /// ([`Planner::group_columns`]).
    fn group_columns_of(&self, pipeline: usize) -> Option<GroupColumns> {
        let grouping = self.pipelines.get(pipeline)?;
        let Sink::Aggregate {
            keys,
            aggregates,
            layout,
        } = &grouping.sink
        else {
            return None;
        };
        let slots = match layout {
            GroupLayout::Scalar => 1,
            GroupLayout::Hash { capacity, .. } => *capacity,
            GroupLayout::Dense { .. } => layout.slots(),
        };
        let groups = expected_groups(layout);
        let is_string = |id: &ColumnId| self.columns.get(*id).ty == DataType::Str;
        let numbers = keys
            .iter()
            .map(|(id, _)| *id)
            .chain(
                aggregates
                    .iter()
                    .filter(|(id, aggregate)| {
                        // Read back as their accumulators hold them: min and max in their
                        // argument's type, an average as a float.
                        let ty = self.columns.get(*id).ty;
                        match aggregate.function {
                            Aggregate::Min | Aggregate::Max => {
                                aggregate.arg.as_ref().is_some_and(|arg| arg.ty == ty)
                            }
                            Aggregate::Avg => ty == DataType::F64,
                            Aggregate::Sum | Aggregate::Count => true,
                        }
                    })
                    .map(|(id, _)| *id),
            )
            .filter(|id| !is_string(id))
            .collect();
        // A string key of a table's column holds its codes in the table's dictionary.
        let string_keys = keys
            .iter()
            .filter(|(id, expr)| {
                is_string(id)
                    && expr
                        .as_column()
                        .is_some_and(|c| self.columns.get(c).origin.is_some())
            })
            .map(|(id, _)| *id)
            .collect();
        Some(GroupColumns {
            grouping: grouping.id,
            table: grouping.table.clone(),
            slots,
            groups,
            numbers,
            string_keys,
            one_row: matches!(layout, GroupLayout::Scalar),
        })
    }

    /// Adds the pipeline over the `slots` slots of grouping pipeline `grouping`: it reads the
    /// grouping's columns its steps and sink use, save those its steps compute.
    fn push_over_groups(
        &mut self,
        grouping: usize,
        table: String,
        slots: u64,
        steps: Vec<Step>,
        sink: Sink,
    ) {
        let mut scanned = self.read_from_input(&steps, &sink);
        scanned.sort();
        self.pipelines.push(Pipeline {
            id: self.pipelines.len(),
            table,
            rows: slots,
            input: Input::Groups(grouping),
            scanned,
            steps,
            sink,
            renamed: Vec::new(),
        });
    }

    /// Groups the result of the query's grouping again on the device, in a pipeline over its
    /// slots (`Input::Groups`) that runs the host's steps since then (filters and computed
    /// columns) and ends in the new grouping: TPC-H Q13 groups customers by their order count,
    /// Q16's `count(distinct)` groups its distinct combinations by brand, type and size, each
    /// over millions of groups the host would otherwise read back and group one by one. Says
    /// whether it did; it does not when a step or the new grouping reads what the slots do not
    /// hold as numbers (a string other than a table's column grouped by, a wide or float key),
    /// or when another host step (a sort, a check of a sum) came first.
    fn regroup_on_device(
        &mut self,
        keys: &[(ColumnId, Expr)],
        aggregates: &[(ColumnId, AggregateExpr)],
    ) -> Result<bool, Diagnostic> {
        let Some(GroupColumns {
            grouping: grouped,
            table,
            slots,
            groups,
            numbers,
            string_keys,
            one_row: false,
        }) = self.group_columns()
        else {
            return Ok(false);
        };
        let mut readable = numbers;
        let Some(steps) = self.host_steps_over_groups(&mut readable) else {
            return Ok(false);
        };
        let groups_by = |expr: &Expr| match expr.as_column() {
            Some(column) if string_keys.contains(&column) => true,
            _ => {
                expr.ty != DataType::Str && expr.columns_used().iter().all(|c| readable.contains(c))
            }
        };
        // A count of a string needs only whether it is null.
        let reads = |aggregate: &AggregateExpr| match &aggregate.arg {
            None => true,
            Some(arg) if aggregate.function == Aggregate::Count => groups_by(arg),
            Some(arg) => {
                arg.ty != DataType::Str && arg.columns_used().iter().all(|c| readable.contains(c))
            }
        };
        if !keys.iter().all(|(_, key)| groups_by(key))
            || !aggregates.iter().all(|(_, aggregate)| reads(aggregate))
        {
            return Ok(false);
        }
        // The host steps become the pipeline's; the checks of its sums come after it. Each
        // group of the first grouping is one row of the second.
        self.host_steps.clear();
        let aggregates = self.checked_sums_over(aggregates, false, slots);
        let passing: f64 = steps
            .iter()
            .map(|step| match step {
                Step::Filter { selectivity, .. } => *selectivity,
                _ => 1.0,
            })
            .product();
        let layout = self.group_layout(keys, &aggregates, groups * passing);
        let sink = grouping(keys.to_vec(), aggregates, layout)?;
        self.push_over_groups(grouped, table, slots, steps, sink);
        Ok(true)
    }

    /// Plans `plan` as rows flowing through pipelines: a grouped result (`Flow::OnHost`)
    /// flows on from its grouping's slots (`Input::Groups`) where what follows the grouping
    /// can run there, so that joining a grouped relation — TPC-H Q17's average per part, Q18's
    /// large orders, the groupings Q21's `exists` becomes — needs no stage read back to the
    /// host. `None` when it cannot.
    fn plan_over_groups(
        &mut self,
        plan: &LogicalPlan,
    ) -> Result<Option<Vec<OpenPipeline>>, Diagnostic> {
        let first_pipeline = self.pipelines.len();
        let steps_before = self.host_steps.len();
        match self.plan(plan)? {
            Flow::Pipelined(opens) => Ok(Some(opens)),
            // Only a grouping of `plan` itself, with only its own steps after it.
            Flow::OnHost if steps_before == 0 => {
                Ok(self.reopen_groups(first_pipeline).map(|open| vec![open]))
            }
            Flow::OnHost => Ok(None),
        }
    }

    /// A grouping `plan` asks for that an earlier part of the query planned already (the same
    /// plan but for its columns' ids: a `let` used twice), as rows flowing from that grouping's
    /// slots under the names `plan` gives its columns (`Pipeline::renamed`); `None` where there
    /// is none, or where the slots do not hold every column as a number, or the grouping checks
    /// its sums for overflow on the host (a step of the first use's, which `plan` would not
    /// see).
    fn planned_grouping(&self, plan: &LogicalPlan) -> Option<OpenPipeline> {
        let LogicalPlan::Aggregate(aggregate) = plan else {
            return None;
        };
        if self.groupings.is_empty() {
            return None;
        }
        let canonical = canonical_text(plan, &self.columns);
        let planned = self.groupings.iter().find(|g| g.canonical == canonical)?;
        let Sink::Aggregate { aggregates, .. } = &self.pipelines[planned.pipeline].sink else {
            return None;
        };
        let columns = self.group_columns_of(planned.pipeline)?;
        if aggregates.len() != aggregate.aggregates.len()
            || !planned.outputs.iter().all(|c| columns.numbers.contains(c))
        {
            return None;
        }
        let renamed: Vec<(ColumnId, ColumnId)> = plan
            .output()
            .into_iter()
            .zip(planned.outputs.iter().copied())
            .collect();
        Some(OpenPipeline {
            table: columns.table,
            rows: columns.slots,
            scanned: renamed.iter().map(|(name, _)| *name).collect(),
            steps: Vec::new(),
            renamed,
            input: Input::Groups(planned.pipeline),
        })
    }

    /// The query's grouping, made pipeline `first_pipeline` or later, as the start of a
    /// pipeline over its slots running the host's steps since (see
    /// [`Self::host_steps_over_groups`]), which it takes; `None` when there is no such
    /// grouping or its steps cannot run there. Its columns are the numbers the slots hold.
    fn reopen_groups(&mut self, first_pipeline: usize) -> Option<OpenPipeline> {
        let GroupColumns {
            grouping,
            table,
            slots,
            numbers,
            ..
        } = self.group_columns()?;
        if grouping < first_pipeline {
            return None;
        }
        let mut readable = numbers;
        let steps = self.host_steps_over_groups(&mut readable)?;
        self.host_steps.clear();
        Some(OpenPipeline {
            table,
            rows: slots,
            scanned: readable,
            steps,
            input: Input::Groups(grouping),
            renamed: Vec::new(),
        })
    }

    /// The estimator over the query's columns and those the planner added: a step after a
    /// grouping may read the markers of `intersect` and `except`.
    fn estimator_of_added_columns(&self) -> Estimator<'_> {
        Estimator {
            catalog: self.estimator.catalog,
            columns: &self.columns,
            remembered: self.estimator.remembered,
        }
    }

    /// Whether grouping pipeline `grouping` may hold more groups than its slots when planned:
    /// a hash table grows as the query runs (the whole query then runs again).
    fn grows(&self, grouping: usize) -> bool {
        matches!(
            self.pipelines[grouping].sink,
            Sink::Aggregate {
                layout: GroupLayout::Hash { .. },
                ..
            }
        )
    }

    /// The dense grouping whose slots a join's table can be, probed where they are, and the
    /// table's layout: where the joined relation is that grouping's groups as they are (no
    /// step over them), its one key (never null) is the build key, and each payload column is
    /// an aggregate its accumulator holds as read (a count, or a sum, min or max of a value
    /// never null), or there is none and the presence bytes cost a probe what a set of keys'
    /// bits would. A key's slot in the grouping is then its slot in a perfect table of the
    /// key's domain, and copying the groups into one (TPC-H Q21's two groupings of 60 million
    /// orders at SF 10, a kernel and 1 GB to clear each) only duplicates them.
    fn groups_probed_in_place(
        &self,
        builds: &[OpenPipeline],
        key: &Expr,
        payload: &[ColumnId],
        keys: BuildKeys,
    ) -> Option<(usize, HashLayout)> {
        let [open] = builds else { return None };
        let Input::Groups(grouping) = open.input else {
            return None;
        };
        if !open.steps.is_empty() || keys == BuildKeys::Chained || !key.ty.is_integer() {
            return None;
        }
        let Sink::Aggregate {
            keys: group_keys,
            aggregates,
            layout: GroupLayout::Dense { domains, .. },
        } = &self.pipelines[grouping].sink
        else {
            return None;
        };
        let ([(group_key, _)], [domain]) = (group_keys.as_slice(), domains.as_slice()) else {
            return None;
        };
        if domain.nullable || key.as_column() != Some(*group_key) {
            return None;
        }
        let held_as_read = |column: &ColumnId| {
            aggregates.iter().any(|(id, aggregate)| {
                id == column
                    && aggregate.function != Aggregate::Avg
                    && !counts_rows(aggregate)
                    && accumulator_type(aggregate) == aggregate.ty
            })
        };
        if !payload.iter().all(held_as_read) {
            return None;
        }
        // A set of keys built as a table takes a bit per key: the grouping's presence bytes
        // serve in its place only where a probe of them costs no more (both in the same cache).
        if payload.is_empty() && probe_cost(domain.size) > probe_cost(domain.size.div_ceil(8)) {
            return None;
        }
        let max = domain
            .min
            .checked_add_unsigned(domain.size.checked_sub(1)?)?;
        Some((
            grouping,
            HashLayout::Perfect {
                min: domain.min,
                max,
            },
        ))
    }

    /// Refuses to build a join's table from the slots of grouping pipeline `grouping` where
    /// its groups may outgrow the table ([`Self::grows`]), as a table sized by its slots when
    /// planned would not. A perfect table holds any key of its range.
    fn check_built_from_groups(
        &mut self,
        grouping: usize,
        key: &Expr,
        layout: &HashLayout,
        keys: BuildKeys,
        span: Span,
    ) -> Result<(), Diagnostic> {
        // A chained table's records are numbered by the rows of the table its build reads,
        // which a grouping's slots are not.
        if keys == BuildKeys::Chained {
            return Err(Diagnostic::unsupported(
                span,
                "a join on keys that may repeat, of a grouped relation, is not supported yet",
            ));
        }
        let grows = self.grows(grouping);
        match layout {
            HashLayout::Perfect { min, max } => {
                // The keys are read from the slots, not from the column whose range sized it.
                if let Some(column) = key.as_column() {
                    self.assume((column, *min, *max));
                }
                Ok(())
            }
            _ if !grows => Ok(()),
            _ => Err(Diagnostic::unsupported(
                span,
                "a join's table built from a grouping of unknown size is not supported yet",
            )),
        }
    }

    /// The host's steps since the query's grouping (filters and computed columns) as steps of
    /// a pipeline over its slots, where each reads only what the slots hold as numbers
    /// (`readable`, to which the computed columns are added); `None` when one does not, or
    /// when another host step (a sort, a check of a sum) came first.
    fn host_steps_over_groups(&self, readable: &mut Vec<ColumnId>) -> Option<Vec<Step>> {
        self.steps_over_groups(&self.host_steps, readable, &mut Vec::new())
    }

    /// Host steps `host_steps`, filters and computed columns, as steps of a pipeline over a
    /// grouping's slots ([`Self::host_steps_over_groups`]); they may also read the strings
    /// `codes` (as codes of the dictionary their column names), to which the strings they
    /// compute with a dictionary of their own (`upper` of a key) are added.
    fn steps_over_groups(
        &self,
        host_steps: &[HostStep],
        readable: &mut Vec<ColumnId>,
        codes: &mut Vec<ColumnId>,
    ) -> Option<Vec<Step>> {
        let mut steps = Vec::new();
        for step in host_steps {
            let new: Vec<Step> = match step {
                HostStep::Filter(predicate) => predicate
                    .clone()
                    .into_conjuncts()
                    .into_iter()
                    .map(|predicate| Step::Filter {
                        selectivity: self.estimator_of_added_columns().selectivity(&predicate),
                        predicate,
                    })
                    .collect(),
                HostStep::Project(outputs) => outputs
                    .iter()
                    .filter(|(id, expr)| expr.as_column() != Some(*id))
                    .map(|(id, expr)| Step::Compute {
                        column: *id,
                        expr: expr.clone(),
                    })
                    .collect(),
                _ => return None,
            };
            for step in new {
                let expr = step.expr();
                let reads = |c: &ColumnId| readable.contains(c) || codes.contains(c);
                if !expr.columns_used().iter().all(reads) {
                    return None;
                }
                match &step {
                    // A string is written as codes of the dictionary its column names.
                    Step::Compute { column, .. } if expr.ty == DataType::Str => {
                        match self.columns.get(*column).origin {
                            Some(_) => codes.push(*column),
                            None => return None,
                        }
                    }
                    Step::Compute { column, .. } => readable.push(*column),
                    _ => {}
                }
                steps.push(step);
            }
        }
        Some(steps)
    }

    /// Writes the groups of the query's grouping out as rows on the device, in a pipeline
    /// over its slots (`Input::Groups`) that runs the host's steps since the grouping, when a
    /// sort by `keys` follows and many groups are expected: the rows are then sorted on the
    /// device (`codegen::sort`) and only those a `take` keeps are read back, where the host
    /// would read back and decode every group (TPC-H Q3 keeps 10 of 1.1 million at SF 10).
    /// Says whether it did; it does not when a row's column (`columns`) or a sort key is not a
    /// column the slots hold (as a number, or a string key as its table's codes), or the host
    /// steps since the grouping cannot run there (see [`Self::host_steps_over_groups`]).
    fn write_groups_for_sort(
        &mut self,
        columns: &[ColumnId],
        keys: &[crate::typed::SortKey],
    ) -> bool {
        let Some(GroupColumns {
            grouping,
            table,
            slots,
            groups,
            numbers,
            string_keys,
            one_row: false,
        }) = self.group_columns()
        else {
            return false;
        };
        // A hash table's size comes from the rows expected to reach it. A dense grouping's
        // groups are expected to fill its slots, and often fill few: SSB q3.2's 437,500 slots
        // (cities by cities by years) hold 600 groups; its slots are few anyway
        // (`MAX_DENSE_GROUPS`), so it is read back. A grouping of another's groups is expected
        // to hold as many, though keyed by aggregates it holds far fewer (TPC-H Q13's 1.5
        // million customers by their order count make 46 groups): it counts as large only
        // when keyed by keys of the grouping it groups, as `count(distinct)` plans it, and
        // then holds at most as many groups as that one (TPC-H Q16's 27,840 at SF 10, in
        // 187,500 dense slots).
        let large = |pipeline: &Pipeline| match &pipeline.sink {
            Sink::Aggregate {
                layout: GroupLayout::Hash { .. },
                ..
            } => true,
            Sink::Aggregate { layout, .. } => layout.slots() > MAX_DENSE_GROUPS,
            _ => false,
        };
        let grouped = &self.pipelines[grouping];
        let (large, groups) = match grouped.input {
            Input::Groups(inner) => {
                let inner = &self.pipelines[inner];
                match (&grouped.sink, &inner.sink) {
                    (
                        Sink::Aggregate { keys, .. },
                        Sink::Aggregate {
                            keys: inner_keys,
                            layout,
                            ..
                        },
                    ) if keys_of(keys, inner_keys) => {
                        (large(inner), groups.min(expected_groups(layout)))
                    }
                    _ => (false, groups),
                }
            }
            _ => (large(grouped), groups),
        };
        if !large || groups < GROUPS_SORTED_ON_DEVICE {
            return false;
        }
        let mut readable = numbers;
        let Some(steps) = self.host_steps_over_groups(&mut readable) else {
            return false;
        };
        // A string key is written as its codes in its table's dictionary, which the result
        // reads through the column's origin.
        let written = |id: &ColumnId| {
            readable.contains(id)
                || (string_keys.contains(id) && self.columns.get(*id).origin.is_some())
        };
        if !sorts_by_columns(keys, columns) || !columns.iter().all(written) {
            return false;
        }
        self.host_steps.clear();
        let sink = Sink::Materialize {
            columns: columns.to_vec(),
        };
        self.push_over_groups(grouping, table, slots, steps, sink);
        true
    }

    /// Runs the computed columns and filters that follow the query's grouping (TPC-H Q8's and
    /// Q14's shares, Q17's yearly average), and the values the next host step reads (a sort's
    /// keys, the count `intersect all` and `except all` repeat a row by), as generated code,
    /// in a pipeline over its slots that writes the rows they leave (`Sink::Materialize`), so
    /// that the host only orders, repeats and takes rows and checks sums. Checks of sums come
    /// first and stay on the host, over the written rows, which then hold each checked sum and
    /// its floating-point twin; a filter after them stays on the host too, since a group it
    /// drops on the device would no longer report its wrapped sum. Does nothing where a step
    /// reads what the slots do not hold as numbers or codes (a string other than a key of a
    /// table's column or a string function of one), or a step other than a filter or computed
    /// columns comes first.
    fn compute_groups_on_device(&mut self) {
        let Some(GroupColumns {
            grouping,
            table,
            slots,
            numbers,
            string_keys,
            one_row,
            ..
        }) = self.group_columns()
        else {
            return;
        };
        let Sink::Aggregate {
            keys, aggregates, ..
        } = &self.pipelines[grouping].sink
        else {
            return;
        };
        let mut columns: Vec<ColumnId> = keys
            .iter()
            .map(|(id, _)| *id)
            .chain(aggregates.iter().map(|(id, _)| *id))
            .collect();
        let checks = self
            .host_steps
            .iter()
            .take_while(|step| matches!(step, HostStep::CheckSum { .. }))
            .count();
        let moved = self.host_steps[checks..]
            .iter()
            .take_while(|step| match step {
                HostStep::Project(_) => true,
                HostStep::Filter(_) => checks == 0,
                _ => false,
            })
            .count();
        let host_steps = &self.host_steps[checks..checks + moved];
        let mut readable = numbers;
        // A string key read as its codes: where the key is a table's column (or a string
        // function's), whose dictionary its codes index.
        let mut codes: Vec<ColumnId> = string_keys
            .into_iter()
            .filter(|id| self.columns.get(*id).origin.is_some())
            .collect();
        let Some(mut steps) = self.steps_over_groups(host_steps, &mut readable, &mut codes) else {
            return;
        };
        // The values the next host step reads (a sort's keys, a repeat's count), where they
        // are computed from the rows' columns, are given to it as columns of the rows.
        let next = self.host_steps.get(checks + moved);
        let computable = |expr: &Expr| {
            expr.ty != DataType::Str
                && expr
                    .columns_used()
                    .iter()
                    .all(|c| readable.contains(c) || codes.contains(c))
        };
        let values = next.map(values_read).unwrap_or_default();
        let mut computed_values: Vec<usize> = (0..values.len())
            .filter(|at| values[*at].as_column().is_none())
            .collect();
        if !computed_values.iter().all(|at| computable(values[*at])) {
            computed_values.clear();
        }
        // Filters alone empty the slots of the groups they reject instead, where there is a
        // slot to empty (`filter_groups_on_device`).
        let computes_columns = host_steps
            .iter()
            .any(|step| matches!(step, HostStep::Project(outputs) if computes(outputs)));
        let filters = host_steps
            .iter()
            .any(|step| matches!(step, HostStep::Filter(_)));
        if !computes_columns && computed_values.is_empty() && !(one_row && filters) {
            return;
        }
        for step in host_steps {
            if let HostStep::Project(outputs) = step {
                columns = outputs.iter().map(|(id, _)| *id).collect();
            }
        }
        for step in &self.host_steps[..checks] {
            if let HostStep::CheckSum { exact, approximate } = step {
                for column in [exact, approximate] {
                    if !columns.contains(column) {
                        columns.push(*column);
                    }
                }
            }
        }
        let written = |id: &ColumnId| readable.contains(id) || codes.contains(id);
        if !columns.iter().all(written) {
            return;
        }
        if let Some(next) = self.host_steps.get_mut(checks + moved) {
            let name = match next {
                HostStep::Repeat(_) => "copies",
                _ => "sort_key",
            };
            let mut values = values_read_mut(next);
            for at in computed_values {
                let expr = &mut *values[at];
                let column = self.columns.add(ColumnInfo {
                    name: format!("{name}_{}", at + 1),
                    ty: expr.ty,
                    nullable: expr.nullable,
                    origin: None,
                });
                steps.push(Step::Compute {
                    column,
                    expr: expr.clone(),
                });
                columns.push(column);
                *expr = Expr::column(column, &self.columns, expr.span);
            }
        }
        self.host_steps.drain(checks..checks + moved);
        self.push_over_groups(grouping, table, slots, steps, Sink::Materialize { columns });
    }

    /// Sorts on the device when the host's first step sorts the rows the last pipeline writes
    /// out by columns of theirs: a sort by a computed value is computed and sorted here.
    fn sort_on_device(&mut self) {
        let Some(Sink::Materialize { columns }) = self.pipelines.last().map(|p| &p.sink) else {
            return;
        };
        let columns = columns.clone();
        if let Some(HostStep::Sort { keys, on_device }) = self.host_steps.first_mut() {
            *on_device = sorts_by_columns(keys, &columns);
        }
    }

    /// Moves the filters leading the host's steps after a grouping (SQL's `having`) into a
    /// pipeline over the grouping's slots (`Input::Groups`) that empties the slots of the
    /// groups they reject, so that only the groups kept are read back: a grouping of millions
    /// of groups often keeps a few (TPC-H Q18 keeps 57 of 1.5 million orders). Filters stay on
    /// the host behind a sum check, which must see every group, and where they read a string
    /// (a dictionary code the grouping may not hold as the table does).
    fn filter_groups_on_device(&mut self) {
        let Some(GroupColumns {
            grouping,
            table,
            slots,
            numbers: readable,
            one_row: false,
            ..
        }) = self.group_columns()
        else {
            return;
        };
        let mut steps = Vec::new();
        // Each leading filter's conjuncts that read only such columns; the others stay on
        // the host, where they see the groups these keep (their order does not matter: a
        // group is kept when all are true).
        let mut filters = 0;
        while let Some(HostStep::Filter(predicate)) = self.host_steps.get(filters) {
            let mut on_host: Option<Expr> = None;
            for conjunct in predicate.clone().into_conjuncts() {
                let used = conjunct.columns_used();
                if used.iter().all(|column| readable.contains(column)) {
                    let selectivity = self.estimator_of_added_columns().selectivity(&conjunct);
                    steps.push(Step::Filter {
                        predicate: conjunct,
                        selectivity,
                    });
                } else {
                    on_host = Some(match on_host {
                        Some(rest) => rest.and(conjunct),
                        None => conjunct,
                    });
                }
            }
            match on_host {
                Some(rest) => {
                    self.host_steps[filters] = HostStep::Filter(rest);
                    filters += 1;
                }
                None => {
                    self.host_steps.remove(filters);
                }
            }
        }
        if steps.is_empty() {
            return;
        }
        self.push_over_groups(grouping, table, slots, steps, Sink::KeepGroups);
    }

    /// `aggregates`, with a floating-point twin for each 64-bit integer sum that could wrap,
    /// and a host step that compares the two (the error DuckDB avoids with 128-bit sums). A sum
    /// cannot wrap when its values' bits plus the bits of the count of rows that can reach it
    /// fit in 63: rows reach it from the scanned tables, and no join repeats them. Its values'
    /// bits come from its columns' types, or failing that, from their value ranges where
    /// statistics give them (the program then relies on those ranges).
    fn checked_sums(
        &mut self,
        aggregates: &[(ColumnId, AggregateExpr)],
        opens: &[OpenPipeline],
    ) -> Vec<(ColumnId, AggregateExpr)> {
        let repeats_rows = opens.iter().any(|open| self.repeats_rows(open));
        let rows: u64 = opens.iter().map(|open| open.rows).sum();
        self.checked_sums_over(aggregates, repeats_rows, rows)
    }

    /// [`Planner::checked_sums`] of aggregates over at most `rows` rows, which a join may
    /// repeat (`repeats_rows`).
    fn checked_sums_over(
        &mut self,
        aggregates: &[(ColumnId, AggregateExpr)],
        repeats_rows: bool,
        rows: u64,
    ) -> Vec<(ColumnId, AggregateExpr)> {
        let row_bits = 64 - rows.leading_zeros();
        let mut checked = aggregates.to_vec();
        for (at, (id, aggregate)) in aggregates.iter().enumerate() {
            let Some(arg) = &aggregate.arg else { continue };
            if let Some(exact) = self.exact_average(aggregate, repeats_rows, row_bits) {
                checked[at].1.arg = Some(exact);
                continue;
            }
            // Decimals sum their raw units as integers (128-bit ones in 128 bits).
            let integer_sum = aggregate.function == Aggregate::Sum
                && (aggregate.ty.physical() == DataType::I64 || aggregate.ty.is_wide_decimal())
                && arg.computes_as_integer();
            if !integer_sum || self.sum_fits(arg, repeats_rows, row_bits) {
                continue;
            }
            let approximate = self.columns.add(ColumnInfo {
                name: format!("{}_as_float", self.columns.get(*id).name),
                ty: DataType::F64,
                nullable: true,
                origin: None,
            });
            checked.push((
                approximate,
                AggregateExpr {
                    function: Aggregate::Sum,
                    arg: Some(arg.clone().cast(DataType::F64)),
                    ty: DataType::F64,
                    span: aggregate.span,
                },
            ));
            self.host_steps.push(HostStep::CheckSum {
                exact: *id,
                approximate,
            });
        }
        checked
    }

    /// The decimal an average of a decimal sums exactly, its raw units as a 64-bit integer,
    /// when that sum cannot wrap over `row_bits` bits of rows (by its type, or by the value
    /// ranges of its columns, which the program then relies on); `None` otherwise, and the
    /// average sums floats as analysis typed it (`avg(x as f64)`). A float sum of many rows
    /// depends on the order the device adds them in, so its last digits changed from run to
    /// run (TPC-H Q1); the exact sum is divided by its count and scale once read.
    fn exact_average(
        &mut self,
        aggregate: &AggregateExpr,
        repeats_rows: bool,
        row_bits: u32,
    ) -> Option<Expr> {
        let arg = aggregate.arg.as_ref()?;
        let ExprKind::Cast(decimal) = &arg.kind else {
            return None;
        };
        if aggregate.function != Aggregate::Avg
            || !decimal.ty.is_decimal()
            || !self.sum_fits(decimal, repeats_rows, row_bits)
        {
            return None;
        }
        Some((**decimal).clone())
    }

    /// Whether a 64-bit sum of `arg` over `row_bits` bits of rows, none repeated by a join,
    /// cannot wrap: by its types, or else by its columns' value ranges, which the program then
    /// relies on (the assumptions are recorded only then). A 128-bit decimal's sum is checked
    /// always: it must also stay within 38 digits.
    fn sum_fits(&mut self, arg: &Expr, repeats_rows: bool, row_bits: u32) -> bool {
        if repeats_rows || arg.ty.is_wide_decimal() {
            return false;
        }
        if arg.bits_needed() + row_bits <= 63 {
            return true;
        }
        let mut relied = Vec::new();
        let estimator = &self.estimator;
        let bits = arg.bits_needed_with(&mut |column| {
            let (min, max) = estimator.int_range(column)?;
            relied.push((column, min, max));
            Some(signed_bits(min).max(signed_bits(max)))
        });
        if bits + row_bits > 63 {
            return false;
        }
        for assumption in relied {
            self.assume(assumption);
        }
        true
    }

    /// Groups the rows of `input` (or of the open pipelines `opened`, when given) by `keys`
    /// with no aggregates: the group table holds each distinct row once, in whichever layout
    /// suits the keys (`distinct`, and `union` over its inputs' pipelines); a grouped or
    /// sorted input is grouped on the host.
    fn group_without_aggregates(
        &mut self,
        input: &LogicalPlan,
        opened: Option<(Vec<OpenPipeline>, GroupLayout)>,
        keys: Vec<(ColumnId, Expr)>,
    ) -> Result<Flow, Diagnostic> {
        // Rows of no columns (a table read from an empty CSV file) are all the same row: one
        // if there is any, none otherwise, where a grouping without keys has one row always.
        if keys.is_empty() {
            let columns = input.output();
            match opened {
                Some((opens, _)) => self.finish_all(opens, &Sink::Materialize { columns })?,
                None => {
                    self.materialize_for_host(input)?;
                }
            }
            self.host_steps.push(HostStep::Limit(1));
            return Ok(Flow::OnHost);
        }
        let (opens, layout) = match opened {
            Some(opened) => opened,
            None => {
                let Flow::Pipelined(opens) = self.plan(input)? else {
                    // The distinct rows of a grouped result: grouped again over its slots
                    // where they hold what it reads; else, like a sorted result's, on the host.
                    if self.regroup_on_device(&keys, &[])? {
                        return Ok(Flow::OnHost);
                    }
                    self.host_steps.push(HostStep::Aggregate {
                        keys,
                        aggregates: Vec::new(),
                    });
                    return Ok(Flow::OnHost);
                };
                let rows = passing_rows(&opens);
                let layout = self.group_layout(&keys, &[], rows);
                (opens, layout)
            }
        };
        self.finish_all(opens, &grouping(keys, Vec::new(), layout)?)?;
        Ok(Flow::OnHost)
    }

    /// Each of `ids` as a group key of itself.
    fn column_keys(&self, ids: &[ColumnId]) -> Vec<(ColumnId, Expr)> {
        ids.iter()
            .map(|&id| (id, Expr::column(id, &self.columns, self.span)))
            .collect()
    }

    /// `union all` leaves each input's pipelines open, every one producing the union's columns:
    /// whatever follows runs in each and ends in one shared sink. `union` groups them by every
    /// column; `intersect` and `except` group them too, with a marker per input saying which
    /// inputs had the row, and keep the groups the operation wants.
    fn set_operation(&mut self, set: &crate::logical::SetOperation) -> Result<Flow, Diagnostic> {
        let keyword = match set.op {
            SetOp::Union => "union",
            SetOp::Intersect => "intersect",
            SetOp::Except => "except",
        };
        let markers = (set.op != SetOp::Union).then(|| {
            let mut marker = |name: &str| {
                self.columns.add(ColumnInfo {
                    name: name.to_string(),
                    ty: DataType::I32,
                    nullable: false,
                    origin: None,
                })
            };
            [marker("in_left"), marker("in_right")]
        });
        let mut opens = Vec::new();
        for (side, input) in [&set.left, &set.right].into_iter().enumerate() {
            // Set semantics keep one of each row anyway: a `distinct` input adds nothing.
            let input = match input.as_ref() {
                LogicalPlan::Distinct(distinct) if !set.all => &distinct.input,
                _ => input,
            };
            let Flow::Pipelined(mut side_opens) = self.plan(input)? else {
                return Err(Diagnostic::unsupported(
                    set.span,
                    "joining or combining a grouped or sorted relation is not supported yet",
                )
                .with_label(format!("`{keyword}` of a grouped or sorted result")));
            };
            for open in &mut side_opens {
                // Each input's columns become the operation's, position by position.
                for (&output, source) in set.outputs.iter().zip(input.output()) {
                    open.steps.push(Step::Compute {
                        column: output,
                        expr: Expr::column(source, &self.columns, self.span),
                    });
                }
                for (index, marker) in markers.iter().flatten().enumerate() {
                    let here = i64::from(index == side);
                    open.steps.push(Step::Compute {
                        column: *marker,
                        expr: Expr::literal(Value::Int(here), DataType::I32, self.span),
                    });
                }
            }
            opens.extend(side_opens);
        }
        if set.all && set.op == SetOp::Union {
            return Ok(Flow::Pipelined(opens));
        }
        let keys = self.column_keys(&set.outputs);
        let rows = passing_rows(&opens);
        let Some([in_left, in_right]) = markers else {
            let layout = self.set_layout(set, &[], rows);
            return self.group_without_aggregates(&set.left, Some((opens, layout)), keys);
        };
        // Per group: whether any row came from the left input, and from the right one; for
        // `all`, how many rows came from each.
        let (function, ty, suffix) = if set.all {
            (Aggregate::Sum, DataType::I64, "rows")
        } else {
            (Aggregate::Max, DataType::I32, "seen")
        };
        let mut aggregates = Vec::with_capacity(2);
        let mut seen = Vec::with_capacity(2);
        for marker in [in_left, in_right] {
            let name = format!("{}_{suffix}", self.columns.get(marker).name);
            let id = self.columns.add(ColumnInfo {
                name,
                ty,
                nullable: true,
                origin: None,
            });
            aggregates.push((
                id,
                AggregateExpr {
                    function,
                    arg: Some(Expr::column(marker, &self.columns, self.span)),
                    ty,
                    span: self.span,
                },
            ));
            seen.push(Expr::column(id, &self.columns, self.span));
        }
        let layout = self.set_layout(set, &aggregates, rows);
        self.finish_all(opens, &grouping(keys, aggregates, layout)?)?;
        if set.all {
            self.host_steps
                .push(HostStep::Repeat(self.copies(set.op, &seen)));
            return Ok(Flow::OnHost);
        }
        let in_right_wanted = i64::from(set.op == SetOp::Intersect);
        let test = |seen: &Expr, value: i64| {
            Expr::binary(
                BinaryOp::Eq,
                seen.clone(),
                Expr::literal(Value::Int(value), DataType::I32, self.span),
                DataType::Bool,
                self.span,
            )
        };
        let keep = test(&seen[0], 1).and(test(&seen[1], in_right_wanted));
        self.host_steps.push(HostStep::Filter(keep));
        Ok(Flow::OnHost)
    }

    /// How many copies of a row `intersect all` (the fewer of its left and right rows) or
    /// `except all` (its left rows less its right ones, or none) keeps, from the two counts.
    fn copies(&self, op: SetOp, counts: &[Expr]) -> Expr {
        let span = self.span;
        let (left, right) = (counts[0].clone(), counts[1].clone());
        let binary = |op, a: Expr, b: Expr, ty| Expr::binary(op, a, b, ty, span);
        let zero = Expr::literal(Value::Int(0), DataType::I64, span);
        let (when, then, otherwise) = match op {
            SetOp::Except => {
                let surplus = binary(BinaryOp::Sub, left.clone(), right.clone(), DataType::I64);
                (
                    binary(BinaryOp::Gt, left, right, DataType::Bool),
                    surplus,
                    zero,
                )
            }
            _ => (
                binary(BinaryOp::Lt, left.clone(), right.clone(), DataType::Bool),
                left,
                right,
            ),
        };
        let nullable = then.nullable || otherwise.nullable;
        let kind = ExprKind::Case {
            branches: vec![(when, then)],
            otherwise: Some(Box::new(otherwise)),
        };
        Expr::new(kind, DataType::I64, nullable, span)
    }

    /// The group table of a set operation must hold either input's rows: dense only over both
    /// inputs' key ranges.
    fn set_layout(
        &mut self,
        set: &crate::logical::SetOperation,
        aggregates: &[(ColumnId, AggregateExpr)],
        rows: f64,
    ) -> GroupLayout {
        let left = self.side_keys(&set.outputs, &set.left);
        let right = self.side_keys(&set.outputs, &set.right);
        match (
            self.group_layout(&left, aggregates, rows),
            self.group_layout(&right, aggregates, rows),
        ) {
            (
                GroupLayout::Dense { domains: left, .. },
                GroupLayout::Dense { domains: right, .. },
            ) => dense_over_both(&left, &right).unwrap_or(GroupLayout::Hash {
                capacity: hash_capacity(rows),
                ranges: None,
            }),
            (GroupLayout::Hash { capacity, .. }, _) | (_, GroupLayout::Hash { capacity, .. }) => {
                GroupLayout::Hash {
                    capacity,
                    ranges: None,
                }
            }
            (layout, _) => layout,
        }
    }

    /// Group keys named by `outputs` whose values (and so ranges) are those of `input`'s columns.
    fn side_keys(&self, outputs: &[ColumnId], input: &LogicalPlan) -> Vec<(ColumnId, Expr)> {
        let input = match input {
            LogicalPlan::Distinct(distinct) => &distinct.input,
            _ => input,
        };
        outputs
            .iter()
            .zip(input.output())
            .map(|(&id, source)| (id, Expr::column(source, &self.columns, self.span)))
            .collect()
    }

    /// Plans `input` and materializes its rows for host steps; says whether its rows were
    /// still in pipelines (else they are a result on the host already).
    fn materialize_for_host(&mut self, input: &LogicalPlan) -> Result<bool, Diagnostic> {
        let Flow::Pipelined(opens) = self.plan(input)? else {
            return Ok(false);
        };
        self.finish_all(
            opens,
            &Sink::Materialize {
                columns: input.output(),
            },
        )?;
        Ok(true)
    }

    fn join(&mut self, join: &crate::logical::Join) -> Result<Flow, Diagnostic> {
        refuse_wide_keys(join.keys.iter().flat_map(|(l, r)| [l, r]), "joining on")?;
        if let Some(residual) = &join.residual {
            return self.join_with_residual(join, residual);
        }
        if join.keys.len() > 1 {
            let Some(packed) = self.packed_join_keys(&join.keys) else {
                return Err(Diagnostic::unsupported(
                    join.span,
                    "joins on more than one pair of keys are not supported yet",
                ));
            };
            // The probe side's keys matter only where the build side's repeat (which side
            // builds), and checking them may sort every row of a fact table.
            let right_unique = self.unique_together(&join.right, join.keys.iter().map(|(_, r)| r));
            let left_unique =
                !right_unique && self.unique_together(&join.left, join.keys.iter().map(|(l, _)| l));
            for (unique, key) in [(left_unique, &packed.0), (right_unique, &packed.1)] {
                if unique {
                    self.unique_packed_keys.push(key.clone());
                }
            }
            return self.join(&crate::logical::Join {
                keys: vec![packed],
                ..join.clone()
            });
        }
        if join.kind == JoinKind::Left {
            return self.left_join(join);
        }
        let [(left_key, right_key)] = join.keys.as_slice() else {
            return Err(Diagnostic::internal(join.span, "a join without keys"));
        };
        // An inner join builds its table from the side whose key is unique when only one is:
        // each probe then finds at most one row, and the side with repeats is scanned once
        // rather than walked match by match.
        // Keys that repeat on both sides: the side that joins nothing itself builds, since a
        // build's rows each take one record, which a row matched several times cannot.
        let joins_within = |plan: &LogicalPlan| pipeline_joins(plan);
        let right_unique = self.unique_in(&join.right, right_key);
        let swap = !right_unique
            && (self.unique_in(&join.left, left_key)
                || (joins_within(&join.right) && !joins_within(&join.left)));
        if join.kind == JoinKind::Inner && swap {
            return self.join(&crate::logical::Join {
                left: join.right.clone(),
                right: join.left.clone(),
                kind: JoinKind::Inner,
                keys: vec![(right_key.clone(), left_key.clone())],
                residual: None,
                span: join.span,
            });
        }
        let Some(builds) = self.plan_over_groups(&join.right)? else {
            return Err(Diagnostic::unsupported(
                join.span,
                "joining or combining a grouped or sorted relation is not supported yet",
            )
            .with_label("the joined relation is grouped or sorted"));
        };
        let build_rows: u64 = builds.iter().map(|b| b.rows).sum();
        let estimated_rows = passing_rows(&builds);
        // String keys of two columns have two dictionaries: the table holds the probe
        // column's codes, and keeps the build key (its own codes) as payload.
        let origin = |key: &Expr| {
            key.as_column()
                .and_then(|c| self.columns.get(c).origin.clone())
        };
        let key_codes_of = match (left_key.ty, origin(left_key), origin(right_key)) {
            (DataType::Str, Some(probe), Some(build)) if probe != build => Some(probe),
            _ => None,
        };
        let key_column = right_key.as_column().filter(|_| key_codes_of.is_none());
        let payload: Vec<ColumnId> = match join.kind {
            JoinKind::Inner => join
                .right
                .output()
                .into_iter()
                .filter(|c| Some(*c) != key_column)
                .collect(),
            _ => Vec::new(),
        };
        let unique = right_unique;
        let keys = match join.kind {
            JoinKind::Inner if unique => BuildKeys::Unique,
            JoinKind::Inner => BuildKeys::Chained,
            _ => BuildKeys::Shared,
        };
        // A chained table names its rows, and its build records their slots, with 32-bit
        // numbers (an open table has up to twice as many slots as rows).
        if keys == BuildKeys::Chained && build_rows > MAX_CHAINED_ROWS {
            return Err(Diagnostic::unsupported(
                join.span,
                format!("a joined relation whose keys may repeat can have at most {MAX_CHAINED_ROWS} rows"),
            )
            .with_label(format!("this one has {build_rows} rows")));
        }
        if keys == BuildKeys::Chained && builds.iter().any(|open| self.repeats_rows(open)) {
            return Err(Diagnostic::unsupported(
                join.span,
                "a join on keys that may repeat, of a relation that itself joins on keys that may repeat, is not supported yet",
            ));
        }
        // Staging gives such a join a table to read (`staging`'s `builds_chained_union`).
        if keys == BuildKeys::Chained && builds.len() > 1 {
            return Err(Diagnostic::internal(
                join.span,
                "a `union all` joined on keys that may repeat was not run as a stage",
            ));
        }
        let table = self.hash_tables.len();
        let from_groups = builds.iter().find_map(|open| match open.input {
            Input::Groups(grouping) => Some(grouping),
            _ => None,
        });
        // Groups of a grouping that grows as the query runs are bounded only by the key's
        // range: a perfect table wherever the range allows one.
        let sized_for = match from_groups {
            Some(grouping) if self.grows(grouping) => MAX_PERFECT_SLOTS,
            _ => build_rows,
        };
        let in_place = match key_codes_of {
            None => self.groups_probed_in_place(&builds, right_key, &payload, keys),
            Some(_) => None,
        };
        let (built_by, layout) = match in_place {
            Some(in_place) => in_place,
            None => {
                let layout = self.hash_layout(right_key, sized_for);
                if let Some(grouping) = from_groups {
                    self.check_built_from_groups(grouping, right_key, &layout, keys, join.span)?;
                }
                (self.pipelines.len(), layout)
            }
        };
        self.hash_tables.push(HashTable {
            id: table,
            built_by,
            payload,
            layout,
            max_rows: build_rows,
            estimated_rows,
            keys,
            key_codes_of,
            in_group_slots: in_place.is_some(),
        });
        if in_place.is_none() {
            // Every pipeline of the joined relation (one per input of a `union all`) inserts
            // its rows into the same table.
            self.finish_all(
                builds,
                &Sink::Build {
                    table,
                    key: right_key.clone(),
                },
            )?;
        }

        let Some(mut probes) = self.plan_over_groups(&join.left)? else {
            return Err(Diagnostic::unsupported(join.span, "stages after a `group` or `sort` other than `where`, `select`, `derive`, `group`, `aggregate`, `sort` and `take` are not supported yet")
                .with_label("this joins a grouped or sorted result"));
        };
        let found = if build_rows == 0 {
            0.0
        } else {
            (estimated_rows / build_rows as f64).clamp(0.0, 1.0)
        };
        for probe in &mut probes {
            probe.steps.push(Step::Probe {
                table,
                key: left_key.clone(),
                kind: join.kind,
                selectivity: if join.kind == JoinKind::Anti {
                    1.0 - found
                } else {
                    found
                },
                build_key: None,
            });
            // The build key's value is the probe key's: no need to store it in the table.
            if let (JoinKind::Inner, Some(key)) = (join.kind, key_column) {
                probe.steps.push(Step::Compute {
                    column: key,
                    expr: left_key.clone(),
                });
            }
        }
        Ok(Flow::Pipelined(probes))
    }

    /// A semi or anti join whose match must also satisfy `residual`, over a joined relation
    /// whose keys are unique: the inner join looks up each row's one match and brings its
    /// columns; the semi join keeps the rows for which `residual` is true, the anti join (as a
    /// left join, unmatched rows getting nulls) those for which it is not.
    fn join_with_residual(
        &mut self,
        join: &crate::logical::Join,
        residual: &Expr,
    ) -> Result<Flow, Diagnostic> {
        let unique = match join.keys.as_slice() {
            [(_, key)] => self.unique_in(&join.right, key),
            keys => self.unique_together(&join.right, keys.iter().map(|(_, key)| key)),
        };
        if !unique {
            // `crate::decorrelate` groups the joined relation by its keys first where it can.
            return Err(Diagnostic::unsupported(
                residual.span,
                "conditions in a semi or anti join's `on` comparing both inputs, other than its keys and one comparison of an expression of each input, are not supported yet",
            ));
        }
        let (kind, keep) = match join.kind {
            JoinKind::Semi => (JoinKind::Inner, residual.clone()),
            _ => (JoinKind::Left, residual.clone().is_not_true()),
        };
        let looked_up = crate::logical::Join {
            kind,
            residual: None,
            ..join.clone()
        };
        let flow = match kind {
            JoinKind::Left => self.left_join(&looked_up)?,
            _ => self.join(&looked_up)?,
        };
        let Flow::Pipelined(mut opens) = flow else {
            return Err(Diagnostic::internal(
                join.span,
                "a join that is not pipelined",
            ));
        };
        let selectivity = self.estimator.selectivity(&keep);
        for open in &mut opens {
            open.steps.push(Step::Filter {
                predicate: keep.clone(),
                selectivity,
            });
        }
        Ok(Flow::Pipelined(opens))
    }

    /// `join left`: one probe keeping every row where the joined keys are unique
    /// ([`Self::probed_left`]); else the rows of the inner join, and beside them (as in a
    /// `union all`) the left rows the anti join keeps, with the right side's columns null.
    fn left_join(&mut self, join: &crate::logical::Join) -> Result<Flow, Diagnostic> {
        let with = |kind| crate::logical::Join {
            kind,
            ..join.clone()
        };
        let Flow::Pipelined(mut matched) = self.join(&with(JoinKind::Inner))? else {
            return Err(Diagnostic::internal(
                join.span,
                "a join that is not pipelined",
            ));
        };
        if let Some(kept) = self.probed_left(&matched, join) {
            return Ok(Flow::Pipelined(kept));
        }
        let Flow::Pipelined(mut unmatched) = self.join(&with(JoinKind::Anti))? else {
            return Err(Diagnostic::internal(
                join.span,
                "a join that is not pipelined",
            ));
        };
        for open in &mut unmatched {
            for column in join.right.output() {
                let ty = self.columns.get(column).ty;
                open.steps.push(Step::Compute {
                    column,
                    expr: Expr::null(ty, join.span),
                });
            }
        }
        matched.append(&mut unmatched);
        Ok(Flow::Pipelined(matched))
    }

    /// `join left` as one probe that keeps every row (`JoinKind::Left`), where each pipeline
    /// of its inner join (`matched`) ends in a probe of a table of unique keys by the join's
    /// key: the rows it does not match go on with the right side's columns null, rather than
    /// through a second pipeline per input that scans them again for the anti join (TPC-H
    /// Q21's `not exists` scanned, filtered and partitioned `lineitem` twice). `None` where a
    /// pipeline does not end so.
    fn probed_left(
        &self,
        matched: &[OpenPipeline],
        join: &crate::logical::Join,
    ) -> Option<Vec<OpenPipeline>> {
        let [(left_key, _)] = join.keys.as_slice() else {
            return None;
        };
        matched
            .iter()
            .map(|open| {
                let at = open
                    .steps
                    .iter()
                    .rposition(|step| matches!(step, Step::Probe { .. }))?;
                let Step::Probe {
                    table,
                    key,
                    kind: JoinKind::Inner,
                    ..
                } = &open.steps[at]
                else {
                    return None;
                };
                if key != left_key || self.hash_tables[*table].keys != BuildKeys::Unique {
                    return None;
                }
                let mut kept = open.clone();
                // The build key computed after the inner probe: the left probe defines it,
                // null where no row matched.
                let build_key = match kept.steps.get(at + 1) {
                    Some(Step::Compute { column, expr }) if expr == left_key => Some(*column),
                    _ => None,
                };
                if build_key.is_some() {
                    kept.steps.remove(at + 1);
                }
                kept.steps[at] = Step::Probe {
                    table: *table,
                    key: left_key.clone(),
                    kind: JoinKind::Left,
                    selectivity: 1.0,
                    build_key,
                };
                Some(kept)
            })
            .collect()
    }

    /// Several pairs of integer or date keys as one pair of 64-bit keys: each pair's offset
    /// from the least value either side's column holds, in the bits both sides' ranges need,
    /// side by side (TPC-H's part and supplier keys). `None` when a key is not such a column
    /// of a table, or the ranges need more than 62 bits together. The program relies on the
    /// columns' ranges, as a dense grouping does.
    fn packed_join_keys(&mut self, keys: &[(Expr, Expr)]) -> Option<(Expr, Expr)> {
        let packable = |e: &Expr| {
            matches!(e.ty, DataType::I32 | DataType::I64 | DataType::Date)
                && e.as_column().is_some()
        };
        let mut pairs = Vec::with_capacity(keys.len());
        let mut shift = 0u32;
        for (left, right) in keys.iter().rev() {
            if !packable(left) || !packable(right) || left.ty != right.ty {
                return None;
            }
            let (l_min, l_max) = self.key_range(left)?;
            let (r_min, r_max) = self.key_range(right)?;
            let domain = KeyDomain::spanning(l_min.min(r_min), l_max.max(r_max), false)?;
            pairs.push((left, right, domain, shift));
            shift += domain.offset_bits();
            if shift > 62 {
                return None;
            }
        }
        let mut packed_left: Option<Expr> = None;
        let mut packed_right: Option<Expr> = None;
        for (left, right, domain, shift) in pairs {
            let max = domain.min + domain.size as i64 - 1;
            for side in [left, right] {
                if let Some(column) = side.as_column() {
                    self.assume((column, domain.min, max));
                }
            }
            let field = |key: &Expr| {
                let span = key.span;
                let offset = Expr::binary(
                    BinaryOp::Sub,
                    key.clone().cast(DataType::I64),
                    Expr::literal(Value::Int(domain.min), DataType::I64, span),
                    DataType::I64,
                    span,
                );
                Expr::binary(
                    BinaryOp::Mul,
                    offset,
                    Expr::literal(Value::Int(1i64 << shift), DataType::I64, span),
                    DataType::I64,
                    span,
                )
            };
            let add = |packed: Option<Expr>, key: &Expr| {
                let field = field(key);
                Some(match packed {
                    None => field,
                    Some(packed) => {
                        let span = packed.span;
                        Expr::binary(BinaryOp::Add, packed, field, DataType::I64, span)
                    }
                })
            };
            packed_left = add(packed_left, left);
            packed_right = add(packed_right, right);
        }
        Some((packed_left?, packed_right?))
    }

    /// Whether a probe of `open` may match a row more than once (a chained table's).
    fn repeats_rows(&self, open: &OpenPipeline) -> bool {
        open.steps.iter().any(|step| {
            matches!(step, Step::Probe { table, .. }
                if self.hash_tables[*table].keys == BuildKeys::Chained)
        })
    }

    /// Whether `key` is a stored column known to hold no value twice.
    fn unique_key(&self, key: &Expr) -> bool {
        key.as_column()
            .and_then(|c| self.estimator.unique(c))
            .unwrap_or(false)
    }

    /// Whether `key` holds no value twice among the rows `plan` produces: its column is unique
    /// in its table, and no join in `plan` repeats the rows the column comes from.
    fn unique_in(&self, plan: &LogicalPlan, key: &Expr) -> bool {
        match key.as_column() {
            // A grouping's keys first: asking the catalog may read the column to find out.
            Some(column) => {
                grouped_by(plan, &[column])
                    || (self.unique_key(key) && self.kept_once(plan, column))
            }
            // A key every row shares: unique where there is at most one row (a product with
            // a one-row aggregate, TPC-H Q11's threshold, is a join on such a key).
            None if matches!(key.kind, ExprKind::Literal(_)) => at_most_one_row(plan),
            None => self.unique_packed_keys.contains(key),
        }
    }

    /// Whether `keys` together hold no combination of values twice among the rows `plan`
    /// produces: they are columns of one table that hold none twice (a grouped stage's keys,
    /// or as checked on the data), and no join in `plan` repeats their rows.
    fn unique_together<'k>(
        &self,
        plan: &LogicalPlan,
        keys: impl Iterator<Item = &'k Expr>,
    ) -> bool {
        let keys: Vec<&Expr> = keys.collect();
        let columns: Option<Vec<ColumnId>> = keys.iter().map(|key| key.as_column()).collect();
        if columns.is_some_and(|columns| grouped_by(plan, &columns)) {
            return true;
        }
        let mut table = None;
        let mut names = Vec::new();
        for key in keys {
            let Some(column) = key.as_column() else {
                return false;
            };
            let Some(origin) = &self.columns.get(column).origin else {
                return false;
            };
            if *table.get_or_insert(&origin.table) != &origin.table || !self.kept_once(plan, column)
            {
                return false;
            }
            names.push(origin.column.as_str());
        }
        // A column that cannot be read is reported where the plan reads it.
        table.is_some_and(|table| {
            let unique = self.estimator.catalog.unique_together(table, &names);
            unique.unwrap_or(false)
        })
    }

    /// Whether each row that `column` comes from appears at most once in `plan`'s rows. An
    /// inner join repeats one side's rows when the other side's key may repeat; a product
    /// repeats both. A column that cannot be followed to a side counts as repeated.
    fn kept_once(&self, plan: &LogicalPlan, column: ColumnId) -> bool {
        match plan {
            LogicalPlan::Join(join) => {
                let [(left_key, right_key)] = join.keys.as_slice() else {
                    return false;
                };
                let (own, other, other_key) = if join.left.output().contains(&column) {
                    (&join.left, &join.right, right_key)
                } else if join.right.output().contains(&column) {
                    (&join.right, &join.left, left_key)
                } else {
                    return false;
                };
                let other_matches_once = match join.kind {
                    JoinKind::Semi | JoinKind::Anti => true,
                    JoinKind::Inner | JoinKind::Left => self.unique_in(other, other_key),
                };
                other_matches_once && self.kept_once(own, column)
            }
            LogicalPlan::Product(_) => false,
            LogicalPlan::Filter(_) | LogicalPlan::Sort(_) | LogicalPlan::Limit(_) => plan
                .inputs()
                .into_iter()
                .all(|input| self.kept_once(input, column)),
            LogicalPlan::Project(project) => match project
                .outputs
                .iter()
                .find(|(id, _)| *id == column)
                .and_then(|(_, expr)| expr.as_column())
            {
                Some(source) => self.kept_once(&project.input, source),
                None => false,
            },
            // A set operation's columns carry their left input's statistics, which say nothing
            // of what the right input adds: a `union all` may repeat any value, a `union` only
            // whole rows; `intersect` and `except` keep a subset of the left input's rows.
            LogicalPlan::SetOperation(set) => {
                let single_distinct = !set.all && set.outputs.len() == 1;
                match set.op {
                    SetOp::Union => single_distinct,
                    SetOp::Intersect | SetOp::Except => {
                        single_distinct
                            || set
                                .outputs
                                .iter()
                                .position(|c| *c == column)
                                .and_then(|i| set.left.output().get(i).copied())
                                .is_some_and(|source| self.kept_once(&set.left, source))
                    }
                }
            }
            // The statistics of the column itself say (scans; groupings produce columns of
            // their own).
            LogicalPlan::Scan(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => true,
        }
    }

    /// Ends each of `opens` with its own copy of `sink`.
    fn finish_all(&mut self, opens: Vec<OpenPipeline>, sink: &Sink) -> Result<(), Diagnostic> {
        for open in opens {
            self.finish(open, sink.clone())?;
        }
        Ok(())
    }

    /// Ends `open` in `sink`; an error when it runs over a grouping's slots and reads a column
    /// they do not hold.
    fn finish(&mut self, open: OpenPipeline, sink: Sink) -> Result<(), Diagnostic> {
        let mut needed = sink_columns(&sink, &self.hash_tables);
        let OpenPipeline {
            table,
            rows,
            scanned,
            steps,
            input,
            renamed,
        } = open;
        let steps = drop_unused_computes(steps, &mut needed);
        let probe_costs: Vec<f64> = self
            .hash_tables
            .iter()
            .map(|t| probe_cost(t.bytes(self.estimator.columns)))
            .collect();
        let steps = order_steps(steps, &self.hash_tables, &probe_costs);
        if let Input::Groups(_) = input {
            // Its rows are the groups, read where they lie: nothing to partition.
            let mut read = self.read_from_input(&steps, &sink);
            read.sort();
            if let Some(missing) = read.iter().find(|c| !scanned.contains(c)) {
                return Err(Diagnostic::unsupported(
                    self.span,
                    format!(
                        "`{}` after a grouping is not a number its slots hold",
                        self.columns.get(*missing).name
                    ),
                ));
            }
            self.pipelines.push(Pipeline {
                id: self.pipelines.len(),
                table,
                rows,
                input,
                scanned: read,
                steps,
                sink,
                renamed,
            });
            return Ok(());
        }
        let scan = Scan {
            table,
            rows,
            input,
            scanned,
        };
        self.finish_ordered(scan, steps, 0, sink);
        Ok(())
    }

    /// The columns `sink` and `steps` read that the steps do not produce themselves (computed,
    /// or brought by a probe): what their pipeline's input must hold, each once, the sink's
    /// first.
    fn read_from_input(&self, steps: &[Step], sink: &Sink) -> Vec<ColumnId> {
        let mut produced = Vec::new();
        let mut read = sink_columns(sink, &self.hash_tables);
        for step in steps {
            read.extend(step.expr().columns_used());
            produced.extend(step.defines(&self.hash_tables));
        }
        let mut columns = Vec::new();
        for column in read {
            if !produced.contains(&column) && !columns.contains(&column) {
                columns.push(column);
            }
        }
        columns
    }

    /// Ends a pipeline over `scan` running `steps` (ordered) into `sink`, split before the
    /// first probe at or after `from` that partitions its rows.
    fn finish_ordered(&mut self, scan: Scan, steps: Vec<Step>, from: usize, sink: Sink) {
        match self.partition_point(&steps, from) {
            Some(at) => self.finish_partitioned(scan, steps, at, sink),
            None => self.pipelines.push(Pipeline {
                id: self.pipelines.len(),
                table: scan.table,
                rows: scan.rows,
                input: scan.input,
                scanned: scan.scanned,
                steps,
                sink,
                renamed: Vec::new(),
            }),
        }
    }

    /// The step before which a pipeline is split to partition its rows: the first probe at or
    /// after `from` of a table large enough (`PartitionJoins`) that no probe of repeated keys
    /// precedes (the rows written are at most the scanned ones).
    fn partition_point(&self, steps: &[Step], from: usize) -> Option<usize> {
        for (at, step) in steps.iter().enumerate() {
            let Step::Probe { table, .. } = step else {
                continue;
            };
            let table = &self.hash_tables[*table];
            let large = self
                .partition_joins
                .partitions(table.slot_bytes(self.estimator.columns));
            if large && at >= from {
                return Some(at);
            }
            if table.keys == BuildKeys::Chained {
                return None;
            }
        }
        None
    }

    /// Ends a pipeline over `scan` running `steps` (ordered) as three or more: two running the
    /// steps before `at`, which count and then write the rows reaching the probe at `at` by
    /// part of its table, and the rest over those rows (split again before a later probe that
    /// partitions).
    fn finish_partitioned(&mut self, scan: Scan, steps: Vec<Step>, at: usize, sink: Sink) {
        let Step::Probe { table, key, .. } = &steps[at] else {
            return;
        };
        let (table, key) = (*table, key.clone());
        let mut before = steps;
        let mut after = before.split_off(at);
        let key_column = match key.as_column() {
            Some(column) => column,
            None => {
                let column = self.columns.add(ColumnInfo {
                    name: format!("partition_key{}", self.partitionings.len()),
                    ty: key.ty,
                    nullable: key.nullable,
                    origin: None,
                });
                before.push(Step::Compute {
                    column,
                    expr: key.clone(),
                });
                column
            }
        };
        // The probe (and the build key computed from it) read the key as written.
        let written_key = Expr::column(key_column, &self.columns, key.span);
        for step in &mut after {
            match step {
                Step::Probe { key: k, .. } | Step::Compute { expr: k, .. } if *k == key => {
                    *k = written_key.clone();
                }
                _ => {}
            }
        }
        // What the rest reads and does not produce itself is written out.
        let mut columns = vec![key_column];
        for column in self.read_from_input(&after, &sink) {
            if !columns.contains(&column) {
                columns.push(column);
            }
        }
        let bytes = self.hash_tables[table].slot_bytes(self.estimator.columns);
        let mut parts = bytes
            .div_ceil(PARTITION_PART_BYTES)
            .next_power_of_two()
            .clamp(2, u64::from(MAX_PARTITION_PARTS)) as u32;
        if self.partition_joins == PartitionJoins::Always {
            parts = parts.max(8);
        }
        let id = self.partitionings.len();
        self.partitionings.push(Partitioning {
            id,
            table,
            key: key_column,
            columns: columns.clone(),
            parts,
        });
        for pass in [PartitionPass::Count, PartitionPass::Write] {
            self.pipelines.push(Pipeline {
                id: self.pipelines.len(),
                table: scan.table.clone(),
                rows: scan.rows,
                input: scan.input,
                scanned: scan.scanned.clone(),
                steps: before.clone(),
                sink: Sink::Partition {
                    partitioning: id,
                    pass,
                },
                renamed: Vec::new(),
            });
        }
        let rest = Scan {
            table: scan.table,
            rows: scan.rows,
            input: Input::Partitioned(id),
            scanned: columns,
        };
        self.finish_ordered(rest, after, 1, sink);
    }

    fn hash_layout(&self, key: &Expr, rows: u64) -> HashLayout {
        let range = match &key.kind {
            // The key of a product, which every row shares.
            ExprKind::Literal(Value::Int(value)) => Some((*value, *value)),
            _ => key
                .as_column()
                .filter(|_| key.ty.is_integer() || key.ty.is_decimal() || key.ty == DataType::Date)
                .and_then(|c| self.estimator.int_range(c)),
        };
        if let Some((min, max)) = range {
            let slots = range_slots(min, max);
            let limit = (rows.saturating_mul(PERFECT_SLOTS_PER_ROW)).max(PERFECT_SLOTS_ANYWAY);
            if slots <= limit && slots <= MAX_PERFECT_SLOTS {
                return HashLayout::Perfect { min, max };
            }
        }
        HashLayout::Open {
            capacity: (rows.max(8) * 2).next_power_of_two(),
        }
    }

    /// The values a group key can take, where known: a column's range, or a constant's one
    /// value (a key every row shares takes no room in a dense grouping).
    fn key_range(&self, key: &Expr) -> Option<(i64, i64)> {
        match &key.kind {
            ExprKind::Literal(Value::Int(value)) => Some((*value, *value)),
            ExprKind::Literal(Value::Date(day)) => Some((i64::from(*day), i64::from(*day))),
            ExprKind::Call { .. } => {
                let (column, min, max) = self.year_key_source(key)?;
                // A date column's raw values are days, a timestamp column's microseconds.
                let micros = self.columns.get(column).ty == DataType::Timestamp;
                let year = |raw: i64| {
                    let day = match micros {
                        true => tessera_storage::date::timestamp_day(raw),
                        false => i32::try_from(raw).ok()?,
                    };
                    Some(i64::from(tessera_storage::date::civil_from_days(day).0))
                };
                Some((year(min)?, year(max)?))
            }
            _ => self.estimator.int_range(key.as_column()?),
        }
    }

    /// For a key `year(d)` of a date column `d`: the column and its range, which the key's
    /// range is the years of (a program grouping densely by it relies on that range).
    fn year_key_source(&self, key: &Expr) -> Option<(ColumnId, i64, i64)> {
        let ExprKind::Call {
            function: tessera_stdlib::Function::Year,
            args,
        } = &key.kind
        else {
            return None;
        };
        let column = match &args.first()?.kind {
            // A timestamp's year is its day's.
            ExprKind::Cast(operand) if operand.ty == DataType::Timestamp => operand.as_column()?,
            _ => args.first()?.as_column()?,
        };
        let (min, max) = self.estimator.int_range(column)?;
        Some((column, min, max))
    }

    fn group_layout(
        &mut self,
        keys: &[(ColumnId, Expr)],
        aggregates: &[(ColumnId, AggregateExpr)],
        rows: f64,
    ) -> GroupLayout {
        if keys.is_empty() {
            return GroupLayout::Scalar;
        }
        let domains: Option<Vec<KeyDomain>> = keys
            .iter()
            .map(|(_, expr)| {
                let (min, max) = self.key_range(expr)?;
                KeyDomain::spanning(min, max, expr.nullable)
            })
            .collect();
        if let Some(domains) = domains {
            let slots = domains
                .iter()
                .try_fold(1u64, |acc, d| acc.checked_mul(d.slots()));
            if let Some(slots) = slots.filter(|&s| dense_pays(s, rows)) {
                self.assume_key_sources(keys);
                return GroupLayout::Dense {
                    domains,
                    updates: dense_updates(slots, aggregates, rows),
                };
            }
        }
        // Room for twice the groups expected: at most the combinations of key values where
        // those are known, at most the rows reaching the sink. The table grows at run time if
        // the estimate is short.
        let combinations = keys
            .iter()
            .map(|(_, e)| {
                self.key_range(e)
                    .map(|(min, max)| range_slots(min, max) as f64)
            })
            .try_fold(1.0, |acc: f64, size| size.map(|s| acc * s))
            .unwrap_or(f64::INFINITY);
        let groups = combinations.min(rows.max(1.0));
        let capacity = ((2.0 * groups).clamp(1024.0, INITIAL_GROUP_CAPACITY as f64) as u64)
            .next_power_of_two();
        let ranges = self.packed_by_range(keys);
        if ranges.is_some() {
            self.assume_key_sources(keys);
        }
        GroupLayout::Hash { capacity, ranges }
    }

    /// The keys' domains, when their types' bits do not fit one 64-bit hash key but the bits of
    /// their value ranges do (TPC-H's order key, date and priority; brand, type, size and
    /// supplier).
    fn packed_by_range(&self, keys: &[(ColumnId, Expr)]) -> Option<Vec<KeyDomain>> {
        let flags: u32 = keys.iter().map(|(_, e)| u32::from(e.nullable)).sum();
        let by_type: u32 = keys.iter().map(|(_, e)| super::type_bits(e.ty)).sum();
        let floats = keys.iter().any(|(_, e)| e.ty.is_float());
        // Keys that fit one word by their types need no ranges; wider ones are packed by range
        // when that fits one word, else by type into a wide key.
        if floats || by_type + flags <= 64 {
            return None;
        }
        let domains: Vec<KeyDomain> = keys
            .iter()
            .map(|(_, expr)| {
                let (min, max) = self.key_range(expr)?;
                KeyDomain::spanning(min, max, expr.nullable)
            })
            .collect::<Option<_>>()?;
        let bits: u32 = domains.iter().map(KeyDomain::offset_bits).sum();
        (bits + flags <= 64).then_some(domains)
    }

    /// Records the ranges of the columns whose ranges the keys' domains come from: a program
    /// grouping by those domains relies on them (a column key's own range is recorded where
    /// the code reads it).
    fn assume_key_sources(&mut self, keys: &[(ColumnId, Expr)]) {
        for (_, key) in keys {
            if let Some(assumption) = self.year_key_source(key) {
                self.assume(assumption);
            }
        }
    }

    /// Records that the program relies on `column`'s values lying in `min ..= max` (checked
    /// when it runs).
    fn assume(&mut self, assumption: (ColumnId, i64, i64)) {
        if !self.assumptions.contains(&assumption) {
            self.assumptions.push(assumption);
        }
    }
}

/// The groups a grouping of `layout` is expected to hold: one, a dense array's slots, or half a
/// hash table's (it has room for twice the groups expected).
fn expected_groups(layout: &GroupLayout) -> f64 {
    match layout {
        GroupLayout::Scalar => 1.0,
        GroupLayout::Dense { .. } => layout.slots() as f64,
        GroupLayout::Hash { capacity, .. } => *capacity as f64 / 2.0,
    }
}

/// Whether every key of a grouping is a key column of the grouping whose groups it groups.
fn keys_of(keys: &[(ColumnId, Expr)], inner_keys: &[(ColumnId, Expr)]) -> bool {
    keys.iter().all(|(_, key)| {
        key.as_column()
            .is_some_and(|column| inner_keys.iter().any(|(id, _)| *id == column))
    })
}

/// Whether every sort key is one of `columns` (not a value computed to sort by).
fn sorts_by_columns(keys: &[crate::typed::SortKey], columns: &[ColumnId]) -> bool {
    // The device sorts keys of up to 64 bits; 128-bit decimals sort on the host.
    keys.iter().all(|key| {
        !key.expr.ty.is_wide_decimal() && key.expr.as_column().is_some_and(|c| columns.contains(&c))
    })
}

/// An error at the first key that is a decimal of more than 18 digits: hash tables and the
/// device's sorts hold keys of up to 64 bits each (`what` says what the keys are for).
fn refuse_wide_keys<'a>(
    mut keys: impl Iterator<Item = &'a Expr>,
    what: &str,
) -> Result<(), Diagnostic> {
    match keys.find(|key| key.ty.is_wide_decimal()) {
        Some(key) => Err(Diagnostic::unsupported(
            key.span,
            format!(
                "{what} a decimal of more than {} digits is not supported yet",
                DecimalType::NARROW_PRECISION
            ),
        )
        .with_hint(
            "cast it to a decimal of 18 digits or fewer (`x as decimal(18, 2)`), or to `f64`",
        )),
        None => Ok(()),
    }
}

/// The bits, sign included, that `value` needs.
fn signed_bits(value: i64) -> u32 {
    let magnitude = if value < 0 { !value } else { value };
    65 - magnitude.leading_zeros()
}

/// One dense array covering both inputs' key domains, if it is small enough.
fn dense_over_both(left: &[KeyDomain], right: &[KeyDomain]) -> Option<GroupLayout> {
    // Computed from each domain's last value, without wrapping: the two may lie at the two
    // ends of the 64-bit range, and no dense array spans that.
    let last = |d: &KeyDomain| {
        d.min
            .checked_add(i64::try_from(d.size.checked_sub(1)?).ok()?)
    };
    let domains: Vec<KeyDomain> = left
        .iter()
        .zip(right)
        .map(|(l, r)| {
            let max = last(l)?.max(last(r)?);
            KeyDomain::spanning(l.min.min(r.min), max, l.nullable || r.nullable)
        })
        .collect::<Option<_>>()?;
    let slots = domains
        .iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(d.slots()))?;
    (slots <= MAX_DENSE_GROUPS).then_some(GroupLayout::Dense {
        domains,
        updates: DenseUpdates::Global,
    })
}

/// Slots for a first grouping hash table expecting up to `rows` groups.
fn hash_capacity(rows: f64) -> u64 {
    ((2.0 * rows.max(1.0)).clamp(1024.0, INITIAL_GROUP_CAPACITY as f64) as u64).next_power_of_two()
}

/// The largest first guess at a grouping hash table (it grows when it fills up).
const INITIAL_GROUP_CAPACITY: u64 = 1 << 24;

/// About how many thread blocks share a large GPU's work at once (an H100 runs ~1,000).
const RESIDENT_BLOCKS: f64 = 1024.0;

/// Per-thread accumulators for at most this many slots.
const PER_THREAD_SLOTS: u64 = 8;
/// And at most this many accumulators in all (64-bit values and counts): registers, not spills.
const PER_THREAD_VALUES: u64 = 112;

/// Where a dense grouping of `slots` slots over `rows` rows sums rows first: in each thread
/// for a handful of slots, else in each block when [`block_local_pays`].
fn dense_updates(slots: u64, aggregates: &[(ColumnId, AggregateExpr)], rows: f64) -> DenseUpdates {
    // The values each thread keeps per slot, and the word of the slots its rows reached.
    let values = ThreadValues::of(aggregates.iter().map(|(_, a)| a))
        .values
        .len() as u64
        + 1;
    if slots <= PER_THREAD_SLOTS && slots * values <= PER_THREAD_VALUES {
        DenseUpdates::PerThread
    } else if block_local_pays(slots, aggregates, rows) {
        DenseUpdates::BlockLocal
    } else {
        DenseUpdates::Global
    }
}

/// Whether each block should aggregate into its own copy of the group slots: the copy must fit
/// in shared memory, and each block must bring enough rows to be worth clearing and merging
/// every slot once. Each row saved from a global atomic pays for about two slots of that work.
fn block_local_pays(slots: u64, aggregates: &[(ColumnId, AggregateExpr)], rows: f64) -> bool {
    group_copy_bytes(slots, aggregates.iter().map(|(_, a)| a)) <= GROUP_COPY_BYTES
        && rows / RESIDENT_BLOCKS >= slots as f64 / 2.0
}

/// The columns a sink reads.
fn sink_columns(sink: &Sink, tables: &[HashTable]) -> Vec<ColumnId> {
    match sink {
        Sink::Build { table, key } => {
            let mut columns = key.columns_used();
            columns.extend(tables[*table].payload.iter().copied());
            columns
        }
        Sink::Aggregate {
            keys, aggregates, ..
        } => keys
            .iter()
            .flat_map(|(_, e)| e.columns_used())
            .chain(
                aggregates
                    .iter()
                    .filter_map(|(_, a)| a.arg.as_ref())
                    .flat_map(Expr::columns_used),
            )
            .collect(),
        Sink::Materialize { columns } => columns.clone(),
        // Partitioning pipelines are made from finished ones, and the pipeline over a
        // grouping's slots from a grouped result.
        Sink::Partition { .. } | Sink::KeepGroups => Vec::new(),
    }
}

/// The sink grouping rows by `keys` into `aggregates`, laid out as `layout`; an error at the
/// first key when a hash table's packed key cannot hold the keys.
fn grouping(
    keys: Vec<(ColumnId, Expr)>,
    aggregates: Vec<(ColumnId, AggregateExpr)>,
    layout: GroupLayout,
) -> Result<Sink, Diagnostic> {
    refuse_wide_keys(keys.iter().map(|(_, e)| e), "grouping by")?;
    if let GroupLayout::Hash { ranges, .. } = &layout {
        if super::hash_key_bits(&keys, ranges.as_deref()).is_none() {
            let span = keys.first().map(|(_, e)| e.span).unwrap_or_default();
            return Err(Diagnostic::unsupported(
                span,
                format!(
                    "grouping by these keys needs a hash table, whose key holds at most {} bits: 64 for each 64-bit key, 32 for each other, and one more for each key that may be null",
                    wide_key::MAX_BITS
                ),
            ));
        }
    }
    Ok(Sink::Aggregate {
        keys,
        aggregates,
        layout,
    })
}

/// Removes computed columns that no later step and not the sink reads (`needed` starts as the
/// sink's columns).
fn drop_unused_computes(steps: Vec<Step>, needed: &mut Vec<ColumnId>) -> Vec<Step> {
    let mut kept = Vec::with_capacity(steps.len());
    for step in steps.into_iter().rev() {
        if let Step::Compute { column, .. } = &step {
            if !needed.contains(column) {
                continue;
            }
        }
        needed.extend(step.expr().columns_used());
        kept.push(step);
    }
    kept.reverse();
    kept
}

/// The estimated rows that reach the sinks of `opens`.
fn passing_rows(opens: &[OpenPipeline]) -> f64 {
    opens
        .iter()
        .map(|open| open.rows as f64 * pass_fraction(&open.steps))
        .sum()
}

/// The estimated fraction of scanned rows that survive these steps.
fn pass_fraction(steps: &[Step]) -> f64 {
    steps
        .iter()
        .map(|s| match s {
            Step::Filter { selectivity, .. } | Step::Probe { selectivity, .. } => *selectivity,
            Step::Compute { .. } => 1.0,
        })
        .product()
}

/// The relative cost of one probe into a table of `bytes`, by where the table lives while the
/// probing kernel runs: a table that stays in the L1 cache costs little, one in L2 a sector read
/// from L2, one larger than L2 a sector read from device memory.
fn probe_cost(bytes: u64) -> f64 {
    const L1: u64 = 256 << 10;
    const HALF_L2: u64 = 24 << 20;
    if bytes <= L1 {
        1.0
    } else if bytes <= HALF_L2 {
        4.0
    } else {
        16.0
    }
}

/// Orders a pipeline's steps: among the steps whose inputs are available, filters first, then
/// probes, then computed columns only when something needs them next. Filters go most selective
/// first (those over the same columns together, in the script's order); probes by cost per
/// rejected row, `cost / (1 - selectivity)`, so that a cheap probe of a small table that rejects
/// most rows runs before an expensive one into a large table (Q2.1 probes the supplier table, in
/// L1, before the part table, in L2). Cheap filters on scanned columns thus drop rows before any
/// probe touches memory.
fn order_steps(steps: Vec<Step>, tables: &[HashTable], probe_costs: &[f64]) -> Vec<Step> {
    let defines = |step: &Step| step.defines(tables);
    let uses = |step: &Step| -> Vec<ColumnId> { step.expr().columns_used() };
    // Filters over the same columns (`d_year >= 1992` and `d_year <= 1997`) go together, in
    // the script's order, ranked by their joint selectivity: ordered by their own estimates, two
    // bounds of a range would swap when only their constants change, and the script would
    // compile as another shape instead of reusing the code of its variants.
    // A filter's group is named by its first filter; `joint[first]` is the group's selectivity.
    let mut first_over: HashMap<Vec<ColumnId>, usize> = HashMap::new();
    let mut group = vec![0; steps.len()];
    let mut joint = vec![1.0; steps.len()];
    for (index, step) in steps.iter().enumerate() {
        if let Step::Filter { selectivity, .. } = step {
            let mut columns = uses(step);
            columns.sort_unstable();
            columns.dedup();
            let first = *first_over.entry(columns).or_insert(index);
            group[index] = first;
            joint[first] *= selectivity;
        }
    }
    // (class, cost, the first step of its group); the least goes first.
    let rank = |index: usize, step: &Step| -> (u8, f64, usize) {
        match step {
            Step::Filter { .. } => (0, joint[group[index]], group[index]),
            // A probe that can match several rows multiplies the rows after it: last.
            Step::Probe { table, .. } if tables[*table].keys == BuildKeys::Chained => {
                (1, f64::INFINITY, index)
            }
            Step::Probe {
                table, selectivity, ..
            } => {
                let rejected = (1.0 - selectivity).max(1e-9);
                (1, probe_costs[*table] / rejected, index)
            }
            Step::Compute { .. } => (2, 1.0, index),
        }
    };
    // Kahn's algorithm: a step is ready once every step defining a column it uses has been
    // placed; of the ready steps the cheapest by rank goes first, ties in input order. Linear in
    // the steps and their columns (up to a log for the queue), for scripts with thousands.
    let mut definer: HashMap<ColumnId, usize> = HashMap::new();
    for (index, step) in steps.iter().enumerate() {
        for column in defines(step) {
            definer.entry(column).or_insert(index);
        }
    }
    let overflows = |step: &Step| matches!(step, Step::Filter { .. }) && step.expr().may_overflow();
    let mut waiting_on = vec![0usize; steps.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (index, step) in steps.iter().enumerate() {
        let mut needed: Vec<usize> = uses(step)
            .iter()
            .filter_map(|column| definer.get(column).copied())
            .filter(|&other| other != index)
            .collect();
        // A filter that can fail a row with an overflow sees only rows every other condition
        // keeps (LANGUAGE.md, "Integer overflow"): it runs after the pipeline's other filters
        // and probes (those written before it may have become either), in the script's order
        // among such filters.
        if overflows(step) {
            needed.extend(
                steps
                    .iter()
                    .enumerate()
                    .filter(|(other, earlier)| match earlier {
                        Step::Probe { .. } => true,
                        Step::Filter { .. } => !overflows(earlier) || *other < index,
                        Step::Compute { .. } => false,
                    })
                    .map(|(other, _)| other),
            );
        }
        needed.sort_unstable();
        needed.dedup();
        waiting_on[index] = needed.len();
        for other in needed {
            dependents[other].push(index);
        }
    }
    let key = |index: usize, step: &Step| {
        let (class, cost, first) = rank(index, step);
        std::cmp::Reverse((class, total_order_bits(cost), first, index))
    };
    let mut ready: std::collections::BinaryHeap<_> = steps
        .iter()
        .enumerate()
        .filter(|(index, _)| waiting_on[*index] == 0)
        .map(|(index, step)| key(index, step))
        .collect();
    let mut slots: Vec<Option<Step>> = steps.into_iter().map(Some).collect();
    let mut ordered = Vec::with_capacity(slots.len());
    while let Some(std::cmp::Reverse((_, _, _, index))) = ready.pop() {
        let Some(step) = slots[index].take() else {
            continue;
        };
        ordered.push(step);
        for &dependent in &dependents[index] {
            waiting_on[dependent] -= 1;
            if waiting_on[dependent] == 0 {
                if let Some(step) = &slots[dependent] {
                    ready.push(key(dependent, step));
                }
            }
        }
    }
    // A dependency cycle cannot arise from a plan tree; keep the input order if it did.
    ordered.extend(slots.into_iter().flatten());
    ordered
}

/// `x`'s bits as an unsigned integer that orders as `f64::total_cmp` orders the floats.
fn total_order_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// Group `keys` with each column that `input` computes as a constant (`select c = 1`) replaced
/// by that constant: so grouped, the key has a domain of one value, which a dense table holds
/// in one slot (a constant written as the key itself, `group c = 1`, is one already).
fn constant_keys(input: &LogicalPlan, keys: Vec<(ColumnId, Expr)>) -> Vec<(ColumnId, Expr)> {
    let LogicalPlan::Project(project) = input else {
        return keys;
    };
    keys.into_iter()
        .map(|(id, key)| {
            let constant = key.as_column().and_then(|column| {
                project
                    .outputs
                    .iter()
                    .find(|(output, _)| *output == column)
                    .map(|(_, expr)| expr)
                    .filter(|expr| {
                        matches!(expr.kind, ExprKind::Literal(Value::Int(_) | Value::Date(_)))
                    })
            });
            (id, constant.cloned().unwrap_or(key))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_grammar::Span;
    use tessera_stdlib::Aggregate;
    use tessera_storage::DataType;

    fn sum() -> Vec<(ColumnId, AggregateExpr)> {
        vec![(
            ColumnId(0),
            AggregateExpr {
                function: Aggregate::Sum,
                arg: None,
                ty: DataType::I64,
                span: Span::default(),
            },
        )]
    }

    /// The physical plan of `script`'s query, optimized, over the optimizer tests' catalog.
    fn physical(script: &str) -> String {
        use crate::optimize::tests::{catalog, logical};
        let query = crate::optimize::optimize(vec![logical(script)], None)
            .expect("the rules apply")
            .remove(0);
        let planned = logical_to_pipelines(&query, &catalog(), PartitionJoins::Auto)
            .expect("the query plans");
        crate::physical::physical_to_string(&[planned])
    }

    #[test]
    fn columns_computed_after_the_last_grouping_run_over_its_slots() {
        let plan = physical(
            "from orders | group o_customer { total = sum(o_total), n = count() }
             | derive mean = total / n | where mean > 5.0 | sort total - n desc",
        );
        assert!(plan.contains("the groups of pipeline 0"), "{plan}");
        assert!(plan.contains("compute mean"), "{plan}");
        assert!(plan.contains("compute sort_key_1"), "{plan}");
        assert!(plan.contains("host: sort sort_key_1 desc"), "{plan}");
        assert!(!plan.contains("host: project"), "{plan}");
        assert!(!plan.contains("host: filter"), "{plan}");
    }

    #[test]
    fn a_one_row_aggregate_is_filtered_and_computed_over_its_slot() {
        let plan = physical(
            "from orders | aggregate { total = sum(o_total), n = count() }
             | where n > 2 | derive mean = total / n",
        );
        assert!(plan.contains("the one row of pipeline 0"), "{plan}");
        assert!(plan.contains("materialize total, n, mean"), "{plan}");
        assert!(!plan.contains("host:"), "{plan}");
    }

    #[test]
    fn the_copies_intersect_all_keeps_are_counted_over_the_slots() {
        let plan = physical(
            "from orders | select o_customer | intersect all (from orders | select o_customer)",
        );
        assert!(plan.contains("compute copies_1 = case"), "{plan}");
        assert!(
            plan.contains("host: repeat each row copies_1 times"),
            "{plan}"
        );
    }

    #[test]
    fn a_string_key_is_read_over_the_slots_as_its_codes() {
        let plan = physical(
            "from customers | group c_region { n = count() }
             | derive l = length(c_region), lower = lower(c_region)",
        );
        assert!(plan.contains("compute l = length(c_region)"), "{plan}");
        assert!(plan.contains("materialize c_region, n, l, lower"), "{plan}");
        assert!(!plan.contains("host: project"), "{plan}");
    }

    #[test]
    fn a_string_the_slots_do_not_hold_as_codes_stays_on_the_host() {
        // The least region is held as a code, but returned by the host.
        let plan = physical(
            "from customers | group c_id { least = min(c_region) } | derive l = length(least)",
        );
        assert!(plan.contains("host: project"), "{plan}");
    }

    #[test]
    fn block_local_groups_need_few_slots_and_many_rows() {
        // SSB Q4.1 at SF 20: 35 groups, about two million rows reach the sink.
        assert!(block_local_pays(35, &sum(), 1.9e6));
        // Q4.2: 4,375 slots but only half a million rows: clearing and merging would dominate.
        assert!(!block_local_pays(4375, &sum(), 5.5e5));
        // Q2.1's 7,000 slots of 9 bytes do not fit in the shared-memory budget at any volume.
        assert!(!block_local_pays(7000, &sum(), 1e9));
    }

    #[test]
    fn dense_groups_past_four_million_slots_need_rows_to_fill_them() {
        // SSB Q3.2's cities by cities by years, whatever the rows.
        assert!(dense_pays(437_500, 1.0));
        // TPC-H's line items by order at SF 10: 60 million slots, as many rows (and a third of
        // them after Q21's filter); 4.4 million slots for 40,000 rows take a hash table.
        assert!(dense_pays(60_000_000, 6e7));
        assert!(dense_pays(60_000_000, 2e7));
        assert!(!dense_pays(4_400_000, 4e4));
        // At SF 50, 300 million orders are past any dense array.
        assert!(!dense_pays(300_000_000, 3e8));
    }
}
