//! Entries of an aggregate block that compute with aggregates (`share = sum(x) / count()`,
//! `avg_price = sum(p) / 7.0`). Each aggregate call inside such an entry becomes an entry of
//! its own, named as it is written (one per distinct call), and the entry itself becomes an
//! expression over those names, computed by a `select` after the grouping: the grouping
//! computes only aggregates, and the arithmetic on its few rows is an ordinary stage.

use tessera_grammar::ast::{self, ExprKind as AstExpr};
use tessera_grammar::print::expr_to_string;
use tessera_stdlib::Aggregate;

/// An aggregate block split in two: the aggregates to compute, and the block's entries as
/// select items over them.
pub(super) struct ComputedEntries {
    pub aggregates: Vec<ast::Assignment>,
    pub entries: Vec<ast::SelectItem>,
}

/// The split of `assignments`, or `None` when every entry is a plain aggregate call (or has no
/// aggregate at all, which the block's analysis refuses).
pub(super) fn computed_entries(assignments: &[ast::Assignment]) -> Option<ComputedEntries> {
    let computes = |a: &ast::Assignment| !is_aggregate_call(&a.expr) && contains_aggregate(&a.expr);
    if !assignments.iter().any(computes) {
        return None;
    }
    let mut split = ComputedEntries {
        aggregates: Vec::new(),
        entries: Vec::new(),
    };
    for assignment in assignments {
        let expr = if computes(assignment) {
            over_aggregates(&assignment.expr, &mut split.aggregates)
        } else {
            split.aggregates.push(assignment.clone());
            column(&assignment.name)
        };
        split.entries.push(ast::SelectItem {
            name: Some(assignment.name.clone()),
            expr,
            span: assignment.span,
        });
    }
    Some(split)
}

fn is_aggregate_call(expr: &ast::Expr) -> bool {
    matches!(&expr.kind, AstExpr::Call { function, .. } if Aggregate::from_name(&function.name).is_some())
}

fn contains_aggregate(expr: &ast::Expr) -> bool {
    let mut found = false;
    rebuild(expr, &mut |e| {
        found |= is_aggregate_call(e);
        None
    });
    found
}

fn column(name: &ast::Ident) -> ast::Expr {
    ast::Expr {
        kind: AstExpr::Column {
            qualifier: None,
            name: name.clone(),
        },
        span: name.span,
    }
}

/// `expr` with each aggregate call replaced by the column of an entry computing it, added to
/// `aggregates` unless one computes the same call already.
fn over_aggregates(expr: &ast::Expr, aggregates: &mut Vec<ast::Assignment>) -> ast::Expr {
    rebuild(expr, &mut |e| {
        if !is_aggregate_call(e) {
            return None;
        }
        let name = expr_to_string(e);
        if !aggregates.iter().any(|a| a.name.name == name) {
            aggregates.push(ast::Assignment {
                name: ast::Ident {
                    name: name.clone(),
                    span: e.span,
                },
                expr: e.clone(),
                span: e.span,
            });
        }
        Some(column(&ast::Ident { name, span: e.span }))
    })
}

/// `expr` rebuilt bottom-up from the top, `replace` given each node first: a node it replaces
/// is not entered.
fn rebuild(
    expr: &ast::Expr,
    replace: &mut impl FnMut(&ast::Expr) -> Option<ast::Expr>,
) -> ast::Expr {
    if let Some(replaced) = replace(expr) {
        return replaced;
    }
    let mut go = |e: &ast::Expr| Box::new(rebuild(e, replace));
    let kind = match &expr.kind {
        AstExpr::Literal(_) | AstExpr::Column { .. } => expr.kind.clone(),
        AstExpr::Unary { op, operand } => AstExpr::Unary {
            op: *op,
            operand: go(operand),
        },
        AstExpr::Binary { op, left, right } => AstExpr::Binary {
            op: *op,
            left: go(left),
            right: go(right),
        },
        AstExpr::Between {
            expr: tested,
            low,
            high,
            negated,
        } => AstExpr::Between {
            expr: go(tested),
            low: go(low),
            high: go(high),
            negated: *negated,
        },
        AstExpr::InList {
            expr: tested,
            list,
            negated,
        } => AstExpr::InList {
            expr: go(tested),
            list: list.iter().map(|e| *go(e)).collect(),
            negated: *negated,
        },
        AstExpr::Like {
            expr: tested,
            pattern,
            negated,
        } => AstExpr::Like {
            expr: go(tested),
            pattern: go(pattern),
            negated: *negated,
        },
        AstExpr::IsNull {
            expr: tested,
            negated,
        } => AstExpr::IsNull {
            expr: go(tested),
            negated: *negated,
        },
        AstExpr::Case {
            branches,
            otherwise,
        } => AstExpr::Case {
            branches: branches.iter().map(|(w, t)| (*go(w), *go(t))).collect(),
            otherwise: otherwise.as_deref().map(&mut go),
        },
        AstExpr::Cast { expr: operand, ty } => AstExpr::Cast {
            expr: go(operand),
            ty: ty.clone(),
        },
        AstExpr::Call {
            function,
            args,
            distinct,
        } => AstExpr::Call {
            function: function.clone(),
            args: args.iter().map(|e| *go(e)).collect(),
            distinct: *distinct,
        },
    };
    ast::Expr {
        kind,
        span: expr.span,
    }
}
