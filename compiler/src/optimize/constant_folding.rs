//! Constant folding: evaluates operations whose operands are all literals, propagates `null`
//! through the operations it makes `null`, simplifies `and`/`or` with a literal side, and
//! removes filters that are always true. Results are unchanged; integer arithmetic or a cast
//! that would overflow is left for run time, which reports it as an error.

use tessera_grammar::ast::{BinaryOp, UnaryOp};
use tessera_stdlib::Function;
use tessera_storage::{date, decimal, DataType, Value};

use crate::expr::{Expr, ExprKind};
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
        ExprKind::Unary { op, operand } => match (&operand.kind, op) {
            (ExprKind::Literal(Value::Bool(b)), UnaryOp::Not) => Some(Value::Bool(!b)),
            (ExprKind::Literal(Value::Int(i)), UnaryOp::Neg) => i.checked_neg().map(Value::Int),
            (ExprKind::Literal(Value::Float(x)), UnaryOp::Neg) => Some(Value::Float(-x)),
            _ => None,
        },
        ExprKind::Binary { op, left, right } => {
            if let Some(simpler) = simplify_logical(*op, left, right) {
                return (simpler, Transformed::Yes);
            }
            match (&left.kind, &right.kind) {
                (ExprKind::Literal(a), ExprKind::Literal(b)) => binary(*op, a, b),
                _ => None,
            }
        }
        ExprKind::Cast(operand) => match &operand.kind {
            ExprKind::Literal(value) => cast(value, expr.ty),
            _ => None,
        },
        ExprKind::Call { function, args } => match args.as_slice() {
            [Expr {
                kind: ExprKind::Literal(Value::Float(x)),
                ..
            }] => call(*function, *x),
            _ => None,
        },
        _ => None,
    };
    match folded {
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

fn binary(op: BinaryOp, a: &Value, b: &Value) -> Option<Value> {
    use std::cmp::Ordering;
    let order = match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        // Analysis compares decimals at one scale.
        (Value::Decimal(x, s), Value::Decimal(y, t)) if s == t => Some(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => Some(tessera_storage::types::compare_floats(*x, *y)),
        (Value::Date(x), Value::Date(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) | (Value::Time(x), Value::Time(y)) => {
            Some(x.cmp(y))
        }
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    };
    if op.is_comparison() {
        let order = order?;
        return Some(Value::Bool(match op {
            BinaryOp::Eq => order == Ordering::Equal,
            BinaryOp::Ne => order != Ordering::Equal,
            BinaryOp::Lt => order == Ordering::Less,
            BinaryOp::Le => order != Ordering::Greater,
            BinaryOp::Gt => order == Ordering::Greater,
            BinaryOp::Ge => order != Ordering::Less,
            _ => return None,
        }));
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => match op {
            BinaryOp::Add => x.checked_add(*y),
            BinaryOp::Sub => x.checked_sub(*y),
            BinaryOp::Mul => x.checked_mul(*y),
            BinaryOp::Rem => x.checked_rem(*y),
            _ => None,
        }
        .map(Value::Int),
        (Value::Float(x), Value::Float(y)) => match op {
            BinaryOp::Add => Some(x + y),
            BinaryOp::Sub => Some(x - y),
            BinaryOp::Mul => Some(x * y),
            BinaryOp::Div => Some(x / y),
            BinaryOp::Rem => Some(x % y),
            _ => None,
        }
        .map(Value::Float),
        _ => None,
    }
}

fn cast(value: &Value, to: DataType) -> Option<Value> {
    Some(match (value, to) {
        (Value::Int(i), DataType::I64) => Value::Int(*i),
        (Value::Int(i), DataType::I32) => Value::Int(i64::from(i32::try_from(*i).ok()?)),
        (Value::Int(i), DataType::F32) => Value::Float(f64::from(*i as f32)),
        (Value::Int(i), DataType::F64) => Value::Float(*i as f64),
        (Value::Float(x), DataType::F32) => Value::Float(f64::from(*x as f32)),
        (Value::Float(x), DataType::F64) => Value::Float(*x),
        (Value::Bool(b), DataType::I32 | DataType::I64) => Value::Int(i64::from(*b)),
        (Value::Int(i), DataType::Decimal(to)) => {
            Value::Decimal(decimal::convert(*i, 0, to)?, to.scale)
        }
        (Value::Decimal(raw, scale), DataType::Decimal(to)) => {
            Value::Decimal(decimal::convert(*raw, *scale, to)?, to.scale)
        }
        (Value::Decimal(raw, scale), DataType::F64) => {
            Value::Float(decimal::to_float(*raw, *scale))
        }
        (Value::Date(day), DataType::Timestamp) => {
            Value::Timestamp(i64::from(*day).checked_mul(date::MICROS_PER_DAY)?)
        }
        (Value::Timestamp(micros), DataType::Date) => Value::Date(date::timestamp_day(*micros)),
        (Value::Timestamp(micros), DataType::Time) => {
            Value::Time(micros.rem_euclid(date::MICROS_PER_DAY))
        }
        _ => return None,
    })
}

fn call(function: Function, x: f64) -> Option<Value> {
    let y = match function {
        Function::Sqrt => x.sqrt(),
        Function::Exp => x.exp(),
        Function::Ln => x.ln(),
        Function::Abs => x.abs(),
        Function::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Function::Year | Function::Month | Function::Day => return None,
    };
    Some(Value::Float(y))
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
    }
}
