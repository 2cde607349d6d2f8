//! Predicate pushdown: moves each conjunct of a filter as far down the plan as it stays
//! correct: through projections (substituting computed columns), sorts and `distinct`, into
//! either side of a join when it reads only that side's columns (the right side only for inner
//! joins), below a grouping when it reads only group keys, and finally into the scan that
//! produces its columns. Never across `take`, which would change which rows are taken.

use std::collections::HashMap;

use tessera_grammar::ast::JoinKind;

use crate::columns::ColumnId;
use crate::expr::{Expr, ExprKind};
use crate::logical::{Filter, LogicalPlan};

use super::{Order, QueryView, Rule, Transformed};

pub struct PredicatePushdown;

impl Rule for PredicatePushdown {
    fn name(&self) -> &'static str {
        "predicate_pushdown"
    }

    /// Top-down: a filter moved below an operator is visited again there, and moves on.
    fn order(&self) -> Order {
        Order::TopDown
    }

    fn rewrite(&self, plan: LogicalPlan, _: &QueryView<'_>) -> (LogicalPlan, Transformed) {
        match plan {
            LogicalPlan::Filter(filter) => push(*filter.input, filter.predicate),
            plan => (plan, Transformed::No),
        }
    }
}

/// A filter of `predicate` over `input`, with what of it can move into `input` moved there.
fn push(input: LogicalPlan, predicate: Expr) -> (LogicalPlan, Transformed) {
    let predicates = predicate.into_conjuncts();
    let unchanged = |input: LogicalPlan, predicates: Vec<Expr>| {
        (filter_over(input, predicates), Transformed::No)
    };
    match input {
        LogicalPlan::Filter(filter) => {
            // In the script's order, earlier filters first: the planner may not move a filter
            // that can overflow ahead of those written before it.
            let mut earlier = filter.predicate.into_conjuncts();
            earlier.extend(predicates);
            (filter_over(*filter.input, earlier), Transformed::Yes)
        }
        LogicalPlan::Scan(mut scan) => {
            scan.filters.extend(predicates);
            (LogicalPlan::Scan(scan), Transformed::Yes)
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
            if below.is_empty() {
                return unchanged(LogicalPlan::Project(project), above);
            }
            project.input = Box::new(filter_over(*project.input, below));
            (
                filter_over(LogicalPlan::Project(project), above),
                Transformed::Yes,
            )
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
            if to_left.is_empty() && to_right.is_empty() {
                return unchanged(LogicalPlan::Join(join), above);
            }
            join.left = Box::new(filter_over(*join.left, to_left));
            join.right = Box::new(filter_over(*join.right, to_right));
            (
                filter_over(LogicalPlan::Join(join), above),
                Transformed::Yes,
            )
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
            if to_left.is_empty() && to_right.is_empty() {
                return unchanged(LogicalPlan::Product(product), above);
            }
            product.left = Box::new(filter_over(*product.left, to_left));
            product.right = Box::new(filter_over(*product.right, to_right));
            (
                filter_over(LogicalPlan::Product(product), above),
                Transformed::Yes,
            )
        }
        LogicalPlan::Aggregate(mut aggregate) => {
            // Only a predicate on group keys can run before grouping; with no keys there is
            // one output row whatever the input, so nothing may move.
            let keys: HashMap<ColumnId, Expr> = aggregate
                .keys
                .iter()
                .map(|(id, e)| (*id, e.clone()))
                .collect();
            if keys.is_empty() {
                return unchanged(LogicalPlan::Aggregate(aggregate), predicates);
            }
            let (below, above) = partition(predicates, |p| {
                p.columns_used()
                    .iter()
                    .all(|c| keys.contains_key(c))
                    .then(|| inline(p.clone(), &keys))
            });
            if below.is_empty() {
                return unchanged(LogicalPlan::Aggregate(aggregate), above);
            }
            aggregate.input = Box::new(filter_over(*aggregate.input, below));
            (
                filter_over(LogicalPlan::Aggregate(aggregate), above),
                Transformed::Yes,
            )
        }
        LogicalPlan::Sort(mut sort) => {
            sort.input = Box::new(filter_over(*sort.input, predicates));
            (LogicalPlan::Sort(sort), Transformed::Yes)
        }
        LogicalPlan::Distinct(mut distinct) => {
            distinct.input = Box::new(filter_over(*distinct.input, predicates));
            (LogicalPlan::Distinct(distinct), Transformed::Yes)
        }
        // Never across `take`, which would change which rows are taken, nor into a set
        // operation's inputs.
        input @ (LogicalPlan::Limit(_) | LogicalPlan::SetOperation(_)) => {
            unchanged(input, predicates)
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
        span,
    })
}
