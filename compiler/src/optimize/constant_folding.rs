//! Constant folding: evaluates operations whose operands are all literals, with the meaning
//! `tessera_stdlib::scalar` gives them (the host's steps after a `group` use the same),
//! propagates `null` through the operations it makes `null`, simplifies `and`/`or` with a
//! literal side, and removes filters that are always true. Results are unchanged; an operation
//! that would overflow, or whose value its type cannot hold, is left for run time, which
//! reports it as an error.

use tessera_grammar::ast::BinaryOp;
use tessera_stdlib::scalar;
use tessera_storage::{DataType, Value};

use crate::expr::{scalar_binary, scalar_unary, Expr, ExprKind};
use crate::logical::LogicalPlan;

use super::{Order, QueryView, Rule, Transformed};

pub struct ConstantFolding;

impl Rule for ConstantFolding {
    fn name(&self) -> &'static str {
        "constant_folding"
    }

    fn order(&self) -> Order {
        Order::BottomUp
    }

    fn rewrite(&self, mut plan: LogicalPlan, _: &QueryView<'_>) -> (LogicalPlan, Transformed) {
        let mut changed = Transformed::No;
        plan.map_expressions(&mut |e| {
            e.transform(&mut |node| {
                let (folded, here) = fold_node(node);
                changed = changed.or(here);
                folded
            })
        });
        match plan {
            LogicalPlan::Scan(mut scan) => {
                let before = scan.filters.len();
                scan.filters.retain(|f| !f.is_true());
                if scan.filters.len() < before {
                    changed = Transformed::Yes;
                }
                (LogicalPlan::Scan(scan), changed)
            }
            LogicalPlan::Filter(filter) if filter.predicate.is_true() => {
                (*filter.input, Transformed::Yes)
            }
            plan => (plan, changed),
        }
    }
}

/// Folds one node whose children are already folded; says whether it did.
fn fold_node(expr: Expr) -> (Expr, Transformed) {
    let span = expr.span;
    let folded = match &expr.kind {
        // Every operation but `and`, `or`, `case` and `is null` is `null` when an operand is.
        ExprKind::Unary { operand, .. } if operand.is_null() => Some(Value::Null),
        ExprKind::Cast(operand) if operand.is_null() => Some(Value::Null),
        ExprKind::Call { args, .. } if args.iter().any(Expr::is_null) => Some(Value::Null),
        ExprKind::Binary { op, left, right }
            if !op.is_logical() && (left.is_null() || right.is_null()) =>
        {
            Some(Value::Null)
        }
        ExprKind::Binary { left, right, .. } if left.is_null() && right.is_null() => {
            Some(Value::Null)
        }
        ExprKind::IsNull { operand, negated } if operand.is_null() => Some(Value::Bool(!negated)),
        ExprKind::Unary { op, operand } => match &operand.kind {
            ExprKind::Literal(value) => scalar::unary(scalar_unary(*op), value.clone()).ok(),
            _ => None,
        },
        ExprKind::Binary { op, left, right } => {
            if let Some(simpler) = simplify_logical(*op, left, right) {
                return (simpler, Transformed::Yes);
            }
            match (&left.kind, &right.kind) {
                (ExprKind::Literal(a), ExprKind::Literal(b)) => {
                    scalar::binary(scalar_binary(*op), a.clone(), b.clone()).ok()
                }
                _ => None,
            }
        }
        ExprKind::Cast(operand) => match &operand.kind {
            ExprKind::Literal(value) => scalar::cast(value.clone(), expr.ty).ok(),
            _ => None,
        },
        ExprKind::Call { function, args } => match args.as_slice() {
            [Expr {
                kind: ExprKind::Literal(value),
                ..
            }] => scalar::call(*function, value.clone()).ok(),
            _ => None,
        },
        _ => None,
    };
    match folded.filter(|value| holds(expr.ty, value)) {
        Some(value) => (Expr::literal(value, expr.ty, span), Transformed::Yes),
        None => (expr, Transformed::No),
    }
}

fn simplify_logical(op: BinaryOp, left: &Expr, right: &Expr) -> Option<Expr> {
    let as_bool = |e: &Expr| match e.kind {
        ExprKind::Literal(Value::Bool(b)) => Some(b),
        _ => None,
    };
    match (op, as_bool(left), as_bool(right)) {
        (BinaryOp::And, Some(true), _) => Some(right.clone()),
        (BinaryOp::And, _, Some(true)) => Some(left.clone()),
        (BinaryOp::And, Some(false), _) | (BinaryOp::And, _, Some(false)) => {
            Some(Expr::boolean(false, left.span.to(right.span)))
        }
        (BinaryOp::Or, Some(false), _) => Some(right.clone()),
        (BinaryOp::Or, _, Some(false)) => Some(left.clone()),
        (BinaryOp::Or, Some(true), _) | (BinaryOp::Or, _, Some(true)) => {
            Some(Expr::boolean(true, left.span.to(right.span)))
        }
        _ => None,
    }
}

/// Whether a literal of type `ty` can hold `value`: an `i32` sum computed in 64 bits may not,
/// and is left to the kernels, which report the overflow.
fn holds(ty: DataType, value: &Value) -> bool {
    match (ty, value) {
        (_, Value::Null) => true,
        (DataType::I32, Value::Int(i)) => i32::try_from(*i).is_ok(),
        (DataType::I64, Value::Int(_))
        | (DataType::F32 | DataType::F64, Value::Float(_))
        | (DataType::Bool, Value::Bool(_))
        | (DataType::Date, Value::Date(_))
        | (DataType::Timestamp, Value::Timestamp(_))
        | (DataType::Time, Value::Time(_)) => true,
        (DataType::Decimal(decimal), Value::Decimal(_, scale)) => {
            !decimal.is_wide() && decimal.scale == *scale
        }
        (DataType::Decimal(decimal), Value::WideDecimal(_, scale)) => {
            decimal.is_wide() && decimal.scale == *scale
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_grammar::Span;

    fn int(i: i64) -> Expr {
        Expr::literal(Value::Int(i), DataType::I64, Span::default())
    }

    #[test]
    fn folds_arithmetic_and_comparisons() {
        let sum = Expr::binary(
            BinaryOp::Add,
            int(2),
            int(3),
            DataType::I64,
            Span::default(),
        );
        let cmp = Expr::binary(BinaryOp::Lt, sum, int(6), DataType::Bool, Span::default());
        assert!(cmp.transform(&mut |e| fold_node(e).0).is_true());
    }

    #[test]
    fn leaves_overflow_to_run_time() {
        let big = Expr::binary(
            BinaryOp::Mul,
            int(i64::MAX),
            int(2),
            DataType::I64,
            Span::default(),
        );
        assert!(matches!(
            big.transform(&mut |e| fold_node(e).0).kind,
            ExprKind::Binary { .. }
        ));
        // Within 64 bits, but not the `i32` the expression is.
        let narrow = |i| Expr::literal(Value::Int(i), DataType::I32, Span::default());
        let sum = Expr::binary(
            BinaryOp::Add,
            narrow(i64::from(i32::MAX)),
            narrow(1),
            DataType::I32,
            Span::default(),
        );
        assert!(matches!(
            sum.transform(&mut |e| fold_node(e).0).kind,
            ExprKind::Binary { .. }
        ));
    }

    #[test]
    fn folds_as_the_host_computes() {
        // `%` by zero is null, `/` of integers a float, a cast rounds ties to even.
        let rem = Expr::binary(
            BinaryOp::Rem,
            int(7),
            int(0),
            DataType::I64,
            Span::default(),
        );
        assert!(rem.transform(&mut |e| fold_node(e).0).is_null());
        let half = Expr::literal(Value::Float(2.5), DataType::F64, Span::default());
        let cast = half.cast(DataType::I64);
        assert_eq!(
            cast.transform(&mut |e| fold_node(e).0).kind,
            ExprKind::Literal(Value::Int(2))
        );
    }
}
