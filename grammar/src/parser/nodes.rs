//! Node constructors for the grammar's actions: each sets the node's span and, for
//! expressions, tracks the depth of the tree so that no expression deeper than
//! `MAX_EXPR_DEPTH` is ever built (long operator chains nest without parentheses, so the
//! lexer's parenthesis limit alone does not bound recursion in later passes).

use lalrpop_util::ParseError;

use crate::ast::{
    BinaryOp, Expr, ExprKind, Ident, IntervalUnit, Literal, LiteralValue, TypeName, UnaryOp,
};
use crate::diagnostic::Diagnostic;
use crate::lexer::TokenKind;
use crate::span::Span;

/// The deepest expression tree the parser builds. Generous for written scripts (a chain of
/// 200 `or`s fits) and small enough for any recursive pass on a 2 MiB thread stack.
pub const MAX_EXPR_DEPTH: u32 = 256;

/// What a fallible grammar action returns on failure.
pub type Failure = ParseError<usize, TokenKind, Diagnostic>;

/// An expression and the depth of its tree, so that each new node checks the limit in O(1).
pub struct Deep {
    pub expr: Expr,
    pub depth: u32,
}

pub fn ident(start: usize, name: String, end: usize) -> Ident {
    Ident {
        name,
        span: Span::new(start, end),
    }
}

pub fn literal(start: usize, value: LiteralValue, end: usize) -> Literal {
    Literal {
        value,
        span: Span::new(start, end),
    }
}

/// `90 days`: a count and a unit.
pub fn interval(start: usize, count: i64, unit: Ident, end: usize) -> Result<Deep, Failure> {
    let Some(unit_kind) = IntervalUnit::from_word(&unit.name) else {
        // A name after a number is either a unit or the start of something a `,` should have
        // separated (`select a = 1 b = 2`).
        let error = Diagnostic::syntax(unit.span, format!("unexpected `{}`", unit.name))
            .with_label("expected an operator, or a unit of time after a count (`90 days`)")
            .with_hint("a `,` may be missing before this");
        return Err(ParseError::User { error });
    };
    Ok(literal_expr(literal(
        start,
        LiteralValue::Interval {
            count,
            unit: unit_kind,
        },
        end,
    )))
}

pub fn literal_expr(literal: Literal) -> Deep {
    Deep {
        expr: Expr {
            span: literal.span,
            kind: ExprKind::Literal(literal),
        },
        depth: 1,
    }
}

pub fn column(start: usize, qualifier: Option<Ident>, name: Ident, end: usize) -> Deep {
    Deep {
        expr: Expr {
            kind: ExprKind::Column { qualifier, name },
            span: Span::new(start, end),
        },
        depth: 1,
    }
}

pub fn unary(start: usize, op: UnaryOp, operand: Deep, end: usize) -> Result<Deep, Failure> {
    let depth = operand.depth;
    let kind = ExprKind::Unary {
        op,
        operand: Box::new(operand.expr),
    };
    node(start, kind, depth, end)
}

pub fn binary(
    start: usize,
    left: Deep,
    op: BinaryOp,
    right: Deep,
    end: usize,
) -> Result<Deep, Failure> {
    let depth = left.depth.max(right.depth);
    let kind = ExprKind::Binary {
        op,
        left: Box::new(left.expr),
        right: Box::new(right.expr),
    };
    node(start, kind, depth, end)
}

pub fn between(
    start: usize,
    expr: Deep,
    negated: bool,
    low: Deep,
    high: Deep,
    end: usize,
) -> Result<Deep, Failure> {
    let depth = expr.depth.max(low.depth).max(high.depth);
    let kind = ExprKind::Between {
        expr: Box::new(expr.expr),
        low: Box::new(low.expr),
        high: Box::new(high.expr),
        negated,
    };
    node(start, kind, depth, end)
}

pub fn in_list(
    start: usize,
    expr: Deep,
    negated: bool,
    list: Vec<Deep>,
    end: usize,
) -> Result<Deep, Failure> {
    let depth = list
        .iter()
        .map(|item| item.depth)
        .fold(expr.depth, u32::max);
    let kind = ExprKind::InList {
        expr: Box::new(expr.expr),
        list: list.into_iter().map(|item| item.expr).collect(),
        negated,
    };
    node(start, kind, depth, end)
}

pub fn like(
    start: usize,
    expr: Deep,
    negated: bool,
    pattern: Deep,
    end: usize,
) -> Result<Deep, Failure> {
    let depth = expr.depth.max(pattern.depth);
    let kind = ExprKind::Like {
        expr: Box::new(expr.expr),
        pattern: Box::new(pattern.expr),
        negated,
    };
    node(start, kind, depth, end)
}

pub fn is_null(start: usize, expr: Deep, negated: bool, end: usize) -> Result<Deep, Failure> {
    let depth = expr.depth;
    let kind = ExprKind::IsNull {
        expr: Box::new(expr.expr),
        negated,
    };
    node(start, kind, depth, end)
}

pub fn case(
    start: usize,
    branches: Vec<(Deep, Deep)>,
    otherwise: Option<Deep>,
    end: usize,
) -> Result<Deep, Failure> {
    let depth = branches
        .iter()
        .map(|(condition, value)| condition.depth.max(value.depth))
        .chain(otherwise.iter().map(|value| value.depth))
        .max()
        .unwrap_or(0);
    let kind = ExprKind::Case {
        branches: branches
            .into_iter()
            .map(|(condition, value)| (condition.expr, value.expr))
            .collect(),
        otherwise: otherwise.map(|value| Box::new(value.expr)),
    };
    node(start, kind, depth, end)
}

pub fn cast(start: usize, expr: Deep, ty: TypeName, end: usize) -> Result<Deep, Failure> {
    let depth = expr.depth;
    let kind = ExprKind::Cast {
        expr: Box::new(expr.expr),
        ty,
    };
    node(start, kind, depth, end)
}

pub fn call(
    start: usize,
    function: Ident,
    distinct: bool,
    args: Vec<Deep>,
    end: usize,
) -> Result<Deep, Failure> {
    let depth = args.iter().map(|arg| arg.depth).max().unwrap_or(0);
    let kind = ExprKind::Call {
        function,
        args: args.into_iter().map(|arg| arg.expr).collect(),
        distinct,
    };
    node(start, kind, depth, end)
}

/// A node one level above children whose deepest is `child_depth` deep.
fn node(start: usize, kind: ExprKind, child_depth: u32, end: usize) -> Result<Deep, Failure> {
    let span = Span::new(start, end);
    let depth = child_depth.saturating_add(1);
    if depth > MAX_EXPR_DEPTH {
        let error = Diagnostic::syntax(span, "expression nested too deeply")
            .with_label(format!(
                "this expression is more than {MAX_EXPR_DEPTH} levels deep"
            ))
            .with_hint(format!(
                "Tessera limits expressions to {MAX_EXPR_DEPTH} levels so that no later pass can \
                 overflow its stack; compute parts of it in earlier `derive` stages"
            ));
        return Err(ParseError::User { error });
    }
    Ok(Deep {
        expr: Expr { kind, span },
        depth,
    })
}
