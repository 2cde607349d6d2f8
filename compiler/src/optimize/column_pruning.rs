//! Column pruning: every scan produces only the columns something above it uses (and reads
//! those plus what its own filters need), projections drop
//! outputs nobody reads, aggregates nobody reads are not computed, and projections that pass
//! their input through unchanged disappear. The query's own output is always kept.

use std::collections::BTreeSet;

use tessera_storage::Catalog;

use crate::columns::ColumnId;
use crate::expr::Expr;
use crate::logical::{LogicalPlan, LogicalQuery};

use super::Pass;

pub struct ColumnPruning;

impl Pass for ColumnPruning {
    fn name(&self) -> &'static str {
        "column_pruning"
    }

    fn run(&self, query: &mut LogicalQuery, _catalog: &Catalog) {
        let plan = std::mem::replace(&mut query.plan, LogicalPlan::empty());
        let required: BTreeSet<ColumnId> = query.output.iter().map(|(_, id)| *id).collect();
        let pruned = prune(plan, &required);
        // The root must produce exactly the query's output, in order.
        let wanted: Vec<ColumnId> = query.output.iter().map(|(_, id)| *id).collect();
        query.plan = if pruned.output() == wanted {
            pruned
        } else {
            let columns = &query.columns;
            LogicalPlan::Project(crate::logical::Project {
                outputs: wanted
                    .iter()
                    .map(|&id| (id, Expr::column(id, columns, query.span)))
                    .collect(),
                input: Box::new(pruned),
            })
        };
    }
}

fn used_by<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> BTreeSet<ColumnId> {
    exprs.into_iter().flat_map(Expr::columns_used).collect()
}

fn prune(plan: LogicalPlan, required: &BTreeSet<ColumnId>) -> LogicalPlan {
    match plan {
        LogicalPlan::Scan(mut scan) => {
            // Columns only the scan's own filters read are read, but not produced.
            scan.columns.retain(|c| required.contains(c));
            LogicalPlan::Scan(scan)
        }
        LogicalPlan::Filter(mut filter) => {
            let mut needed = required.clone();
            needed.extend(filter.predicate.columns_used());
            filter.input = Box::new(prune(*filter.input, &needed));
            LogicalPlan::Filter(filter)
        }
        LogicalPlan::Project(mut project) => {
            project.outputs.retain(|(id, _)| required.contains(id));
            let needed = used_by(project.outputs.iter().map(|(_, e)| e));
            let input = prune(*project.input, &needed);
            let passes_through = input.output().len() == project.outputs.len()
                && input
                    .output()
                    .iter()
                    .zip(&project.outputs)
                    .all(|(c, (id, e))| c == id && e.as_column() == Some(*id));
            if passes_through {
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
            join.left = Box::new(prune(*join.left, &needed));
            join.right = Box::new(prune(*join.right, &needed));
            LogicalPlan::Join(join)
        }
        LogicalPlan::Product(mut product) => {
            product.left = Box::new(prune(*product.left, required));
            product.right = Box::new(prune(*product.right, required));
            LogicalPlan::Product(product)
        }
        LogicalPlan::Aggregate(mut aggregate) => {
            aggregate.aggregates.retain(|(id, _)| required.contains(id));
            let needed = used_by(
                aggregate.keys.iter().map(|(_, e)| e).chain(
                    aggregate
                        .aggregates
                        .iter()
                        .filter_map(|(_, a)| a.arg.as_ref()),
                ),
            );
            aggregate.input = Box::new(prune(*aggregate.input, &needed));
            LogicalPlan::Aggregate(aggregate)
        }
        LogicalPlan::Sort(mut sort) => {
            let mut needed = required.clone();
            needed.extend(used_by(sort.keys.iter().map(|k| &k.expr)));
            sort.input = Box::new(prune(*sort.input, &needed));
            LogicalPlan::Sort(sort)
        }
        LogicalPlan::Limit(mut limit) => {
            limit.input = Box::new(prune(*limit.input, required));
            LogicalPlan::Limit(limit)
        }
        LogicalPlan::Distinct(mut distinct) => {
            // Which rows are distinct depends on every column.
            let all: BTreeSet<ColumnId> = distinct.input.output().into_iter().collect();
            distinct.input = Box::new(prune(*distinct.input, &all));
            LogicalPlan::Distinct(distinct)
        }
        LogicalPlan::SetOperation(mut set) => {
            let left: BTreeSet<ColumnId> = set.left.output().into_iter().collect();
            let right: BTreeSet<ColumnId> = set.right.output().into_iter().collect();
            set.left = Box::new(prune(*set.left, &left));
            set.right = Box::new(prune(*set.right, &right));
            LogicalPlan::SetOperation(set)
        }
    }
}
