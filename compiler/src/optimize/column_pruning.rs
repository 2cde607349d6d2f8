//! Column pruning: every scan produces only the columns something above it uses (and reads
//! those plus what its own filters need), projections drop
//! outputs nobody reads, aggregates nobody reads are not computed, and projections that pass
//! their input through unchanged disappear. The query's own output is always kept.

use std::collections::BTreeSet;

use crate::columns::{ColumnId, Columns};
use crate::expr::Expr;
use crate::logical::LogicalPlan;

use super::{Order, QueryView, Rule, Transformed};

pub struct ColumnPruning;

impl Rule for ColumnPruning {
    fn name(&self) -> &'static str {
        "column_pruning"
    }

    /// The whole plan: what an operator must produce follows from everything above it.
    fn order(&self) -> Order {
        Order::Whole
    }

    fn rewrite(&self, plan: LogicalPlan, query: &QueryView<'_>) -> (LogicalPlan, Transformed) {
        let wanted: Vec<ColumnId> = query.output.iter().map(|(_, id)| *id).collect();
        let required: BTreeSet<ColumnId> = wanted.iter().copied().collect();
        let mut pruned = Transformed::No;
        let plan = prune(query.columns, plan, &required, &mut pruned);
        // The root must produce exactly the query's output, in order.
        if plan.output() == wanted {
            return (plan, pruned);
        }
        let root = LogicalPlan::Project(crate::logical::Project {
            outputs: wanted
                .iter()
                .map(|&id| (id, Expr::column(id, query.columns, query.span)))
                .collect(),
            input: Box::new(plan),
            span: query.span,
        });
        (root, Transformed::Yes)
    }
}

fn used_by<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> BTreeSet<ColumnId> {
    exprs.into_iter().flat_map(Expr::columns_used).collect()
}

/// `plan` producing only what `required` needs of it (more where it must); `pruned` is set
/// when anything was dropped.
fn prune(
    columns: &Columns,
    plan: LogicalPlan,
    required: &BTreeSet<ColumnId>,
    pruned: &mut Transformed,
) -> LogicalPlan {
    match plan {
        LogicalPlan::Scan(mut scan) => {
            // Columns only the scan's own filters read are read, but not produced.
            retain(&mut scan.columns, |c| required.contains(c), pruned);
            LogicalPlan::Scan(scan)
        }
        LogicalPlan::Filter(mut filter) => {
            let mut needed = required.clone();
            needed.extend(filter.predicate.columns_used());
            filter.input = Box::new(prune(columns, *filter.input, &needed, pruned));
            LogicalPlan::Filter(filter)
        }
        LogicalPlan::Project(mut project) => {
            retain(
                &mut project.outputs,
                |(id, _)| required.contains(id),
                pruned,
            );
            let needed = used_by(project.outputs.iter().map(|(_, e)| e));
            let input = prune(columns, *project.input, &needed, pruned);
            let passes_through = input.output().len() == project.outputs.len()
                && input
                    .output()
                    .iter()
                    .zip(&project.outputs)
                    .all(|(c, (id, e))| c == id && e.as_column() == Some(*id));
            if passes_through {
                *pruned = Transformed::Yes;
                input
            } else {
                project.input = Box::new(input);
                LogicalPlan::Project(project)
            }
        }
        LogicalPlan::Join(mut join) => {
            let mut needed = required.clone();
            needed.extend(used_by(
                join.keys
                    .iter()
                    .flat_map(|(l, r)| [l, r])
                    .chain(&join.residual),
            ));
            join.left = Box::new(prune(columns, *join.left, &needed, pruned));
            let right = prune(columns, *join.right, &needed, pruned);
            join.right = Box::new(built_of(columns, right, &needed, pruned));
            LogicalPlan::Join(join)
        }
        LogicalPlan::Product(mut product) => {
            product.left = Box::new(prune(columns, *product.left, required, pruned));
            product.right = Box::new(prune(columns, *product.right, required, pruned));
            LogicalPlan::Product(product)
        }
        LogicalPlan::Aggregate(mut aggregate) => {
            retain(
                &mut aggregate.aggregates,
                |(id, _)| required.contains(id),
                pruned,
            );
            let needed = used_by(
                aggregate.keys.iter().map(|(_, e)| e).chain(
                    aggregate
                        .aggregates
                        .iter()
                        .filter_map(|(_, a)| a.arg.as_ref()),
                ),
            );
            aggregate.input = Box::new(prune(columns, *aggregate.input, &needed, pruned));
            LogicalPlan::Aggregate(aggregate)
        }
        LogicalPlan::Sort(mut sort) => {
            let mut needed = required.clone();
            needed.extend(used_by(sort.keys.iter().map(|k| &k.expr)));
            sort.input = Box::new(prune(columns, *sort.input, &needed, pruned));
            LogicalPlan::Sort(sort)
        }
        LogicalPlan::Limit(mut limit) => {
            limit.input = Box::new(prune(columns, *limit.input, required, pruned));
            LogicalPlan::Limit(limit)
        }
        LogicalPlan::Distinct(mut distinct) => {
            // Which rows are distinct depends on every column.
            let all: BTreeSet<ColumnId> = distinct.input.output().into_iter().collect();
            distinct.input = Box::new(prune(columns, *distinct.input, &all, pruned));
            LogicalPlan::Distinct(distinct)
        }
        LogicalPlan::SetOperation(mut set) => {
            let left: BTreeSet<ColumnId> = set.left.output().into_iter().collect();
            let right: BTreeSet<ColumnId> = set.right.output().into_iter().collect();
            set.left = Box::new(prune(columns, *set.left, &left, pruned));
            set.right = Box::new(prune(columns, *set.right, &right, pruned));
            LogicalPlan::SetOperation(set)
        }
    }
}

/// `items.retain(keep)`, noting in `pruned` whether it dropped any.
/// A join's built side producing only what `needed` names: a join inside it (a dimension
/// chain, `optimize::dimension_chains`) produces the columns its own keys read, which the table
/// built of it would otherwise carry as payload for every row.
fn built_of(
    columns: &Columns,
    plan: LogicalPlan,
    needed: &BTreeSet<ColumnId>,
    pruned: &mut Transformed,
) -> LogicalPlan {
    let LogicalPlan::Join(join) = &plan else {
        return plan;
    };
    let output = plan.output();
    if output.iter().all(|c| needed.contains(c)) {
        return plan;
    }
    *pruned = Transformed::Yes;
    let span = join.span;
    LogicalPlan::Project(crate::logical::Project {
        outputs: output
            .into_iter()
            .filter(|c| needed.contains(c))
            .map(|id| (id, Expr::column(id, columns, span)))
            .collect(),
        input: Box::new(plan),
        span,
    })
}

fn retain<T>(items: &mut Vec<T>, keep: impl FnMut(&T) -> bool, pruned: &mut Transformed) {
    let before = items.len();
    items.retain(keep);
    if items.len() < before {
        *pruned = Transformed::Yes;
    }
}
