//! Predicate pushdown: moves each conjunct of a filter as far down the plan as it stays
//! correct: through projections (substituting computed columns), sorts and `distinct`, into
//! either side of a join when it reads only that side's columns (the right side only for inner
//! joins), below a grouping when it reads only group keys, and finally into the scan that
//! produces its columns. Never across `take`, which would change which rows are taken.

use std::collections::HashMap;

use tessera_grammar::ast::JoinKind;
use tessera_storage::Catalog;

use crate::columns::ColumnId;
use crate::expr::{Expr, ExprKind};
use crate::logical::{Filter, LogicalPlan, LogicalQuery};

use super::Pass;

pub struct PredicatePushdown;

impl Pass for PredicatePushdown {
    fn name(&self) -> &'static str {
        "predicate_pushdown"
    }

    fn run(&self, query: &mut LogicalQuery, _catalog: &Catalog) {
        let plan = std::mem::replace(&mut query.plan, LogicalPlan::empty());
        query.plan = push(plan, Vec::new());
    }
}

/// Pushes `predicates` (conjuncts over `plan`'s output) into `plan`.
fn push(plan: LogicalPlan, mut predicates: Vec<Expr>) -> LogicalPlan {
    match plan {
        LogicalPlan::Filter(filter) => {
            // In the script's order, earlier filters first: the planner may not move a filter
            // that can overflow ahead of those written before it.
            let mut earlier = filter.predicate.into_conjuncts();
            earlier.append(&mut predicates);
            push(*filter.input, earlier)
        }
        LogicalPlan::Scan(mut scan) => {
            scan.filters.extend(predicates);
            LogicalPlan::Scan(scan)
        }
        LogicalPlan::Project(mut project) => {
            let definitions: HashMap<ColumnId, Expr> = project
                .outputs
                .iter()
                .filter(|(id, e)| e.as_column() != Some(*id))
                .map(|(id, e)| (*id, e.clone()))
                .collect();
            let available = project.input.output();
            let (below, above) = partition(predicates, |p| {
                let inlined = inline(p.clone(), &definitions);
                inlined
                    .columns_used()
                    .iter()
                    .all(|c| available.contains(c))
                    .then_some(inlined)
            });
            project.input = Box::new(push(*project.input, below));
            filter_over(LogicalPlan::Project(project), above)
        }
        LogicalPlan::Join(mut join) => {
            let left = join.left.output();
            let right = join.right.output();
            let mut to_left = Vec::new();
            let mut to_right = Vec::new();
            let mut above = Vec::new();
            for predicate in predicates {
                let used = predicate.columns_used();
                if used.iter().all(|c| left.contains(c)) {
                    to_left.push(predicate);
                } else if join.kind == JoinKind::Inner && used.iter().all(|c| right.contains(c)) {
                    to_right.push(predicate);
                } else {
                    above.push(predicate);
                }
            }
            join.left = Box::new(push(*join.left, to_left));
            join.right = Box::new(push(*join.right, to_right));
            filter_over(LogicalPlan::Join(join), above)
        }
        LogicalPlan::Product(mut product) => {
            let left = product.left.output();
            let right = product.right.output();
            let (to_left, rest) = partition(predicates, |p| {
                p.columns_used()
                    .iter()
                    .all(|c| left.contains(c))
                    .then(|| p.clone())
            });
            let (to_right, above) = partition(rest, |p| {
                p.columns_used()
                    .iter()
                    .all(|c| right.contains(c))
                    .then(|| p.clone())
            });
            product.left = Box::new(push(*product.left, to_left));
            product.right = Box::new(push(*product.right, to_right));
            filter_over(LogicalPlan::Product(product), above)
        }
        LogicalPlan::Aggregate(mut aggregate) => {
            // Only a predicate on group keys can run before grouping; with no keys there is
            // one output row whatever the input, so nothing may move.
            let keys: HashMap<ColumnId, Expr> = aggregate
                .keys
                .iter()
                .map(|(id, e)| (*id, e.clone()))
                .collect();
            let (below, above) = if keys.is_empty() {
                (Vec::new(), predicates)
            } else {
                partition(predicates, |p| {
                    p.columns_used()
                        .iter()
                        .all(|c| keys.contains_key(c))
                        .then(|| inline(p.clone(), &keys))
                })
            };
            aggregate.input = Box::new(push(*aggregate.input, below));
            filter_over(LogicalPlan::Aggregate(aggregate), above)
        }
        LogicalPlan::Sort(mut sort) => {
            sort.input = Box::new(push(*sort.input, predicates));
            LogicalPlan::Sort(sort)
        }
        LogicalPlan::Distinct(mut distinct) => {
            distinct.input = Box::new(push(*distinct.input, predicates));
            LogicalPlan::Distinct(distinct)
        }
        LogicalPlan::Limit(mut limit) => {
            limit.input = Box::new(push(*limit.input, Vec::new()));
            filter_over(LogicalPlan::Limit(limit), predicates)
        }
        LogicalPlan::SetOperation(mut set) => {
            set.left = Box::new(push(*set.left, Vec::new()));
            set.right = Box::new(push(*set.right, Vec::new()));
            filter_over(LogicalPlan::SetOperation(set), predicates)
        }
    }
}

/// Splits predicates into those `below` accepts (as rewritten by it) and the rest.
fn partition(
    predicates: Vec<Expr>,
    below: impl Fn(&Expr) -> Option<Expr>,
) -> (Vec<Expr>, Vec<Expr>) {
    let mut accepted = Vec::new();
    let mut rest = Vec::new();
    for predicate in predicates {
        match below(&predicate) {
            Some(rewritten) => accepted.push(rewritten),
            None => rest.push(predicate),
        }
    }
    (accepted, rest)
}

/// Replaces columns defined by `definitions` with their defining expressions.
fn inline(expr: Expr, definitions: &HashMap<ColumnId, Expr>) -> Expr {
    expr.transform(&mut |e| match e.kind {
        ExprKind::Column(id) => match definitions.get(&id) {
            Some(definition) if definition.as_column() != Some(id) => definition.clone(),
            _ => e,
        },
        _ => e,
    })
}

fn filter_over(plan: LogicalPlan, predicates: Vec<Expr>) -> LogicalPlan {
    if predicates.is_empty() {
        return plan;
    }
    let span = predicates[0].span;
    LogicalPlan::Filter(Filter {
        input: Box::new(plan),
        predicate: Expr::conjunction(predicates, span),
    })
}
