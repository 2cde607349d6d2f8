//! Decorrelates semi and anti joins whose `on` compares an expression of the joined relation
//! with one of the pipeline beside the keys — SQL's `exists (… where l2.l_orderkey =
//! l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey)`, TPC-H Q21. Whether some row of a key has
//! a value `v` with `v op x` depends only on the least and greatest values of that key:
//!
//! | condition | some match satisfies it exactly when |
//! |---|---|
//! | `v != x` | `least != x or greatest != x` |
//! | `v < x`, `v <= x` | `least < x`, `least <= x` |
//! | `v > x`, `v >= x` | `greatest > x`, `greatest >= x` |
//!
//! so the join is rewritten to join, instead, the relation grouped by its keys with those two
//! aggregates (`min` and `max` skip nulls, as the comparison never holds for a null). That
//! grouping runs as a stage (`crate::staging`); the join then looks up its one row per key and
//! tests the condition on it (`physical::plan`'s `join_with_residual`). `--emit typed` shows
//! the rewritten join.
//!
//! Telling which operand reads which input takes name resolution, so analysis reads each
//! condition (`typed::CorrelatedJoin`) and this rewrite works on the script as written.

use std::collections::HashMap;

use tessera_grammar::ast::{
    Assignment, BinaryOp, Expr, ExprKind, Ident, Item, JoinKind, Pipeline, Relation,
    RelationSource, Script, SelectItem, Stage, StageKind,
};
use tessera_grammar::Span;
use tessera_storage::Catalog;

use crate::analyze::{ast_to_typed, split_conjunction};
use crate::typed::ConjunctSides;

/// Whether `script` may hold a join that [`rewrite`] changes: a semi or anti join whose `on`
/// holds a comparison other than `==` of two operands that are not literals. Read from the
/// syntax alone; telling the inputs apart takes the catalog.
pub fn candidate(script: &Script) -> bool {
    let mut found = false;
    for pipeline in pipelines(script) {
        visit_joins(pipeline, &mut |kind, on| {
            found |= matches!(kind, JoinKind::Semi | JoinKind::Anti)
                && split_conjunction(on)
                    .iter()
                    .any(|c| compares_two_operands(c));
        });
    }
    found
}

/// `script` with every semi or anti join that compares one expression of each input beside
/// its keys joining its relation grouped by the keys instead (see the module's comment).
/// A script that does not analyze comes back unchanged: compiling it reports why.
pub fn rewrite(script: Script, catalog: &Catalog) -> Script {
    if !candidate(&script) {
        return script;
    }
    let Ok(typed) = ast_to_typed(&script, catalog) else {
        return script;
    };
    let correlated: HashMap<Span, Vec<ConjunctSides>> = typed
        .correlated
        .into_iter()
        .map(|join| (join.on, join.conjuncts))
        .collect();
    if correlated.is_empty() {
        return script;
    }
    let mut script = script;
    for item in &mut script.items {
        match item {
            Item::Table(_) => {}
            Item::Let(binding) => rewrite_pipeline(&mut binding.pipeline, &correlated),
            Item::Query(pipeline) => rewrite_pipeline(pipeline, &correlated),
        }
    }
    script
}

fn rewrite_pipeline(pipeline: &mut Pipeline, correlated: &HashMap<Span, Vec<ConjunctSides>>) {
    rewrite_relation(&mut pipeline.from, correlated);
    for stage in &mut pipeline.stages {
        match &mut stage.kind {
            StageKind::Join { kind, relation, on } => {
                rewrite_relation(relation, correlated);
                if !matches!(kind, JoinKind::Semi | JoinKind::Anti) {
                    continue;
                }
                let Some(sides) = correlated.get(&on.span) else {
                    continue;
                };
                if let Some((grouped, condition)) = decorrelated(relation, on, sides) {
                    *relation = grouped;
                    *on = condition;
                }
            }
            StageKind::SetOp { relation, .. } | StageKind::Product(relation) => {
                rewrite_relation(relation, correlated)
            }
            _ => {}
        }
    }
}

fn rewrite_relation(relation: &mut Relation, correlated: &HashMap<Span, Vec<ConjunctSides>>) {
    if let RelationSource::Pipeline(pipeline) = &mut relation.source {
        rewrite_pipeline(pipeline, correlated);
    }
}

/// The grouped relation and the new `on` for a join of `relation` on `on`, whose conjuncts
/// analysis read as `sides`; `None` unless exactly one conjunct compares the two inputs, one
/// expression each.
fn decorrelated(
    relation: &Relation,
    on: &Expr,
    sides: &[ConjunctSides],
) -> Option<(Relation, Expr)> {
    let conjuncts = split_conjunction(on);
    if conjuncts.len() != sides.len() {
        return None;
    }
    let mut keys = Vec::new();
    let mut filters = Vec::new();
    let mut compared = None;
    for (conjunct, side) in conjuncts.into_iter().zip(sides) {
        match *side {
            ConjunctSides::Key { joined_first } => {
                let (joined, own) = operands(conjunct, joined_first)?;
                keys.push((joined, own));
            }
            ConjunctSides::Joined => filters.push(conjunct.clone()),
            ConjunctSides::Across {
                joined_first: Some(joined_first),
            } if compared.is_none() => {
                let ExprKind::Binary { op, .. } = &conjunct.kind else {
                    return None;
                };
                let op = if joined_first {
                    *op
                } else {
                    crate::expr::mirror(*op)
                };
                let (joined, own) = operands(conjunct, joined_first)?;
                compared = Some((op, joined, own, conjunct.span));
            }
            ConjunctSides::Across { .. } => return None,
        }
    }
    let (op, joined, own, span) = compared?;

    let name = |text: &str, span: Span| Ident {
        name: text.to_string(),
        span,
    };
    let column = |text: &str, span: Span| Expr {
        kind: ExprKind::Column {
            qualifier: None,
            name: name(text, span),
        },
        span,
    };
    let call = |function: &str, arg: &Expr| Expr {
        kind: ExprKind::Call {
            function: name(function, arg.span),
            args: vec![arg.clone()],
            distinct: false,
        },
        span: arg.span,
    };
    let binary = |op: BinaryOp, left: Expr, right: Expr| {
        let span = left.span.to(right.span);
        Expr {
            kind: ExprKind::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            },
            span,
        }
    };

    let mut stages = Vec::new();
    if let Some(filter) = filters
        .into_iter()
        .reduce(|a, b| binary(BinaryOp::And, a, b))
    {
        let span = filter.span;
        stages.push(Stage {
            kind: StageKind::Where(filter),
            span,
        });
    }
    // Names no script can write (the lexer takes no `.` or `(` in one), so the grouping's
    // columns never meet a column of the pipeline, and that read as what they hold.
    let key_names: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(index, (joined, _))| written(joined).unwrap_or_else(|| format!("key {}", index + 1)))
        .collect();
    let key_name = |index: usize| key_names[index].clone();
    let compared = written(&joined).unwrap_or_else(|| "value".to_string());
    let (least, greatest) = (format!("min({compared})"), format!("max({compared})"));
    let (least, greatest) = (least.as_str(), greatest.as_str());
    stages.push(Stage {
        kind: StageKind::Group {
            keys: keys
                .iter()
                .enumerate()
                .map(|(index, (joined, _))| SelectItem {
                    name: Some(name(&key_name(index), joined.span)),
                    expr: joined.clone(),
                    span: joined.span,
                })
                .collect(),
            aggregates: [(least, "min"), (greatest, "max")]
                .into_iter()
                .map(|(entry, function)| Assignment {
                    name: name(entry, joined.span),
                    expr: call(function, &joined),
                    span: joined.span,
                })
                .collect(),
        },
        span: on.span,
    });
    let grouped = Relation {
        source: RelationSource::Pipeline(Box::new(Pipeline {
            from: relation.clone(),
            stages,
            span: relation.span.to(on.span),
        })),
        alias: None,
        span: relation.span,
    };

    let compare = |bound: &str, op: BinaryOp| binary(op, column(bound, span), own.clone());
    let condition = match op {
        BinaryOp::Ne => binary(
            BinaryOp::Or,
            compare(least, BinaryOp::Ne),
            compare(greatest, BinaryOp::Ne),
        ),
        BinaryOp::Lt | BinaryOp::Le => compare(least, op),
        BinaryOp::Gt | BinaryOp::Ge => compare(greatest, op),
        _ => return None,
    };
    let condition = keys
        .iter()
        .enumerate()
        .map(|(index, (joined, own))| {
            binary(
                BinaryOp::Eq,
                column(&key_name(index), joined.span),
                own.clone(),
            )
        })
        .chain([condition])
        .reduce(|a, b| binary(BinaryOp::And, a, b))?;
    Some((grouped, condition))
}

/// The operands of a binary conjunct as (the joined relation's, the pipeline's).
fn operands(conjunct: &Expr, joined_first: bool) -> Option<(Expr, Expr)> {
    let ExprKind::Binary { left, right, .. } = &conjunct.kind else {
        return None;
    };
    let (left, right) = ((**left).clone(), (**right).clone());
    Some(if joined_first {
        (left, right)
    } else {
        (right, left)
    })
}

/// `column` or `qualifier.column` for a column as written; `None` for other expressions.
fn written(expr: &Expr) -> Option<String> {
    match &expr.kind {
        ExprKind::Column {
            qualifier: Some(qualifier),
            name,
        } => Some(format!("{}.{}", qualifier.name, name.name)),
        ExprKind::Column { name, .. } => Some(name.name.clone()),
        _ => None,
    }
}

/// A comparison other than `==` of two operands that are not literals.
fn compares_two_operands(conjunct: &Expr) -> bool {
    let ExprKind::Binary { op, left, right } = &conjunct.kind else {
        return false;
    };
    let literal = |e: &Expr| matches!(e.kind, ExprKind::Literal(_));
    op.is_comparison() && *op != BinaryOp::Eq && !literal(left) && !literal(right)
}

/// Every pipeline the script's items hold at their top.
fn pipelines(script: &Script) -> impl Iterator<Item = &Pipeline> {
    script.items.iter().filter_map(|item| match item {
        Item::Table(_) => None,
        Item::Let(binding) => Some(&binding.pipeline),
        Item::Query(pipeline) => Some(pipeline),
    })
}

/// Calls `visit` with each join of `pipeline` and of the pipelines nested in it.
fn visit_joins(pipeline: &Pipeline, visit: &mut dyn FnMut(JoinKind, &Expr)) {
    let nested = |relation: &Relation, visit: &mut dyn FnMut(JoinKind, &Expr)| {
        if let RelationSource::Pipeline(inner) = &relation.source {
            visit_joins(inner, visit);
        }
    };
    nested(&pipeline.from, visit);
    for stage in &pipeline.stages {
        match &stage.kind {
            StageKind::Join { kind, relation, on } => {
                nested(relation, visit);
                visit(*kind, on);
            }
            StageKind::SetOp { relation, .. } | StageKind::Product(relation) => {
                nested(relation, visit)
            }
            _ => {}
        }
    }
}
