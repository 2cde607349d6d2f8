//! What each scalar operation means on values: arithmetic, comparisons, `and`/`or` with SQL's
//! nulls, casts and the built-in functions. Constant folding computes constants with it and the
//! host computes the steps after a `group` with it, so the two cannot disagree; the kernels
//! compute the same in generated code, which the conformance and differential tests check
//! against DuckDB.
//!
//! Integer arithmetic that leaves its type is an overflow (an error, as in the kernels);
//! `x % 0` is null; `/` of integers or decimals is a float; decimals of `+`, `-` and `%` come
//! at one scale (analysis rescales them), `*` adds the scales.

use std::cmp::Ordering;

use tessera_storage::types::compare_floats;
use tessera_storage::{date, decimal, DataType, DecimalType, Value};

use crate::Function;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Unary {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl Binary {
    pub fn symbol(self) -> &'static str {
        match self {
            Binary::Add => "+",
            Binary::Sub => "-",
            Binary::Mul => "*",
            Binary::Div => "/",
            Binary::Rem => "%",
            Binary::Eq => "==",
            Binary::Ne => "!=",
            Binary::Lt => "<",
            Binary::Le => "<=",
            Binary::Gt => ">",
            Binary::Ge => ">=",
            Binary::And => "and",
            Binary::Or => "or",
        }
    }

    /// The truth of `order` under a comparison; `None` for other operators.
    fn holds(self, order: Ordering) -> Option<bool> {
        Some(match self {
            Binary::Eq => order == Ordering::Equal,
            Binary::Ne => order != Ordering::Equal,
            Binary::Lt => order == Ordering::Less,
            Binary::Le => order != Ordering::Greater,
            Binary::Gt => order == Ordering::Greater,
            Binary::Ge => order != Ordering::Less,
            _ => return None,
        })
    }
}

/// Why an operation has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScalarError {
    /// Integer (or decimal) arithmetic or a cast left its type.
    Overflow,
    /// Values the operation is not defined on (analysis lets none through).
    Unsupported(String),
}

/// `-x` or `not x`; null for null.
pub fn unary(op: Unary, v: Value) -> Result<Value, ScalarError> {
    Ok(match (op, v) {
        (_, Value::Null) => Value::Null,
        (Unary::Not, Value::Bool(b)) => Value::Bool(!b),
        (Unary::Neg, Value::Int(i)) => Value::Int(i.checked_neg().ok_or(ScalarError::Overflow)?),
        (Unary::Neg, Value::Decimal(i, scale)) => {
            Value::Decimal(i.checked_neg().ok_or(ScalarError::Overflow)?, scale)
        }
        (Unary::Neg, Value::Float(x)) => Value::Float(-x),
        (op, v) => return Err(unsupported(format!("{op:?} of {v}"))),
    })
}

/// `l op r`: `and` and `or` with SQL's three values (false and anything is false, true or
/// anything is true), every other operator null when an operand is.
pub fn binary(op: Binary, l: Value, r: Value) -> Result<Value, ScalarError> {
    if let Binary::And | Binary::Or = op {
        let truth = |v: &Value| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        };
        return Ok(match (op, truth(&l), truth(&r)) {
            (Binary::And, Some(false), _) | (Binary::And, _, Some(false)) => Value::Bool(false),
            (Binary::And, Some(true), Some(true)) => Value::Bool(true),
            (Binary::Or, Some(true), _) | (Binary::Or, _, Some(true)) => Value::Bool(true),
            (Binary::Or, Some(false), Some(false)) => Value::Bool(false),
            _ => Value::Null,
        });
    }
    if l == Value::Null || r == Value::Null {
        return Ok(Value::Null);
    }
    if let Some(truth) = compare(&l, &r).and_then(|order| op.holds(order)) {
        return Ok(Value::Bool(truth));
    }
    let overflow = |v: Option<i64>| v.ok_or(ScalarError::Overflow);
    Ok(match (l, r) {
        (Value::Int(x), Value::Int(y)) => match op {
            Binary::Add => Value::Int(overflow(x.checked_add(y))?),
            Binary::Sub => Value::Int(overflow(x.checked_sub(y))?),
            Binary::Mul => Value::Int(overflow(x.checked_mul(y))?),
            Binary::Rem if y == 0 => Value::Null,
            // i64::MIN % -1 is 0, though the division overflows.
            Binary::Rem => Value::Int(x.checked_rem(y).unwrap_or(0)),
            Binary::Div => Value::Float(x as f64 / y as f64),
            _ => return Err(unsupported(format!("`{}` on integers", op.symbol()))),
        },
        (Value::Decimal(x, s), Value::Decimal(y, t)) => match op {
            Binary::Mul => Value::Decimal(overflow(x.checked_mul(y))?, s + t),
            Binary::Div => Value::Float(decimal::to_float(x, s) / decimal::to_float(y, t)),
            _ if s != t => {
                return Err(unsupported(format!(
                    "`{}` on decimals of scales {s} and {t}",
                    op.symbol()
                )))
            }
            Binary::Add => Value::Decimal(overflow(x.checked_add(y))?, s),
            Binary::Sub => Value::Decimal(overflow(x.checked_sub(y))?, s),
            Binary::Rem if y == 0 => Value::Null,
            Binary::Rem => Value::Decimal(x.checked_rem(y).unwrap_or(0), s),
            _ => return Err(unsupported(format!("`{}` on decimals", op.symbol()))),
        },
        (l, r) => {
            let (Some(x), Some(y)) = (as_float(&l), as_float(&r)) else {
                return Err(unsupported(format!("`{}` on {l} and {r}", op.symbol())));
            };
            Value::Float(match op {
                Binary::Add => x + y,
                Binary::Sub => x - y,
                Binary::Mul => x * y,
                Binary::Div => x / y,
                Binary::Rem => x % y,
                _ => return Err(unsupported(format!("`{}` on numbers", op.symbol()))),
            })
        }
    })
}

/// How two values order: numbers by value (decimals exactly, at the finer scale), strings by
/// bytes, dates and times by time; `None` for values of kinds that do not compare.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Decimal(x, s), Value::Decimal(y, t)) => {
            let at =
                |raw: i64, scale: u8| i128::from(raw) * 10i128.pow(u32::from(*s.max(t) - scale));
            Some(at(*x, *s).cmp(&at(*y, *t)))
        }
        (Value::Float(x), Value::Float(y)) => Some(compare_floats(*x, *y)),
        (Value::Int(x), Value::Float(y)) => Some(compare_floats(*x as f64, *y)),
        (Value::Float(x), Value::Int(y)) => Some(compare_floats(*x, *y as f64)),
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Date(x), Value::Date(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) | (Value::Time(x), Value::Time(y)) => {
            Some(x.cmp(y))
        }
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// `v as ty`: a float becomes an integer rounded to the nearest, ties to even (as DuckDB and
/// PostgreSQL round), a decimal one rounded half away from zero; a value the target cannot
/// hold is an overflow. Null stays null.
pub fn cast(v: Value, ty: DataType) -> Result<Value, ScalarError> {
    let narrow = |i: i64| {
        i32::try_from(i)
            .map(i64::from)
            .map_err(|_| ScalarError::Overflow)
    };
    let float_to_int = |x: f64, bits: i32| {
        let rounded = x.round_ties_even();
        let limit = 2f64.powi(bits - 1);
        match (-limit..limit).contains(&rounded) {
            true => Ok(rounded as i64),
            false => Err(ScalarError::Overflow),
        }
    };
    let to_decimal = |raw: i64, from: u8, to: DecimalType| {
        decimal::convert(raw, from, to)
            .map(|raw| Value::Decimal(raw, to.scale))
            .ok_or(ScalarError::Overflow)
    };
    Ok(match (v, ty) {
        (Value::Null, _) => Value::Null,
        (Value::Decimal(raw, scale), DataType::Decimal(to)) => to_decimal(raw, scale, to)?,
        (Value::Decimal(raw, scale), DataType::F32) => {
            Value::Float(f64::from(decimal::to_float(raw, scale) as f32))
        }
        (Value::Decimal(raw, scale), DataType::F64) => Value::Float(decimal::to_float(raw, scale)),
        (Value::Decimal(raw, scale), DataType::I64) => {
            Value::Int(decimal::divide_rounding(raw, u32::from(scale)))
        }
        (Value::Decimal(raw, scale), DataType::I32) => {
            Value::Int(narrow(decimal::divide_rounding(raw, u32::from(scale)))?)
        }
        (Value::Int(i), DataType::Decimal(to)) => to_decimal(i, 0, to)?,
        (Value::Float(x), DataType::Decimal(to)) => Value::Decimal(
            decimal::from_float(x, to).ok_or(ScalarError::Overflow)?,
            to.scale,
        ),
        (Value::Int(i), DataType::F32) => Value::Float(f64::from(i as f32)),
        (Value::Int(i), DataType::F64) => Value::Float(i as f64),
        (Value::Int(i), DataType::I32) => Value::Int(narrow(i)?),
        (Value::Int(i), DataType::Bool) => Value::Bool(i != 0),
        (Value::Int(i), DataType::Date) => Value::Date(narrow(i)? as i32),
        (Value::Float(x), DataType::I32) => Value::Int(float_to_int(x, 32)?),
        (Value::Float(x), DataType::I64) => Value::Int(float_to_int(x, 64)?),
        (Value::Float(x), DataType::F32) => Value::Float(f64::from(x as f32)),
        (Value::Float(x), DataType::Bool) => Value::Bool(x != 0.0),
        (Value::Bool(b), DataType::F32 | DataType::F64) => Value::Float(f64::from(u8::from(b))),
        // A bool stays one; as any other type it is that type's 1 or 0.
        (Value::Bool(b), DataType::Bool) => Value::Bool(b),
        (Value::Bool(b), _) => Value::Int(i64::from(b)),
        (Value::Date(d), DataType::I32 | DataType::I64) => Value::Int(i64::from(d)),
        (Value::Date(d), DataType::Timestamp) => Value::Timestamp(
            i64::from(d)
                .checked_mul(date::MICROS_PER_DAY)
                .ok_or(ScalarError::Overflow)?,
        ),
        (Value::Timestamp(t), DataType::Date) => Value::Date(date::timestamp_day(t)),
        (Value::Timestamp(t), DataType::Time) => Value::Time(t.rem_euclid(date::MICROS_PER_DAY)),
        // A value already of the type.
        (v, _) => v,
    })
}

/// A built-in function of one value; null for null.
pub fn call(function: Function, v: Value) -> Result<Value, ScalarError> {
    if v == Value::Null {
        return Ok(Value::Null);
    }
    Ok(match (function, v) {
        (Function::Abs, Value::Int(i)) => Value::Int(i.checked_abs().ok_or(ScalarError::Overflow)?),
        (Function::Abs, Value::Decimal(i, scale)) => {
            Value::Decimal(i.checked_abs().ok_or(ScalarError::Overflow)?, scale)
        }
        (Function::Year, Value::Date(d)) => Value::Int(i64::from(date::civil_from_days(d).0)),
        (Function::Month, Value::Date(d)) => Value::Int(i64::from(date::civil_from_days(d).1)),
        (Function::Day, Value::Date(d)) => Value::Int(i64::from(date::civil_from_days(d).2)),
        (function, v) => {
            let Some(x) = as_float(&v) else {
                return Err(unsupported(format!("`{}` of {v}", function.name())));
            };
            Value::Float(match function {
                Function::Abs => x.abs(),
                Function::Sqrt => x.sqrt(),
                Function::Exp => x.exp(),
                Function::Ln => x.ln(),
                Function::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                Function::Year | Function::Month | Function::Day => {
                    return Err(unsupported(format!("`{}` of {v}", function.name())))
                }
            })
        }
    })
}

fn as_float(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(x) => Some(*x),
        Value::Decimal(raw, scale) => Some(decimal::to_float(*raw, *scale)),
        _ => None,
    }
}

fn unsupported(what: String) -> ScalarError {
    ScalarError::Unsupported(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_propagate_except_through_and_or() {
        assert_eq!(
            binary(Binary::Add, Value::Int(1), Value::Null),
            Ok(Value::Null)
        );
        assert_eq!(
            binary(Binary::And, Value::Null, Value::Bool(false)),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            binary(Binary::Or, Value::Null, Value::Bool(true)),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            binary(Binary::Or, Value::Null, Value::Bool(false)),
            Ok(Value::Null)
        );
        assert_eq!(unary(Unary::Not, Value::Null), Ok(Value::Null));
        assert_eq!(call(Function::Sqrt, Value::Null), Ok(Value::Null));
    }

    #[test]
    fn integer_arithmetic_overflows_and_remainder_by_zero_is_null() {
        assert_eq!(
            binary(Binary::Add, Value::Int(i64::MAX), Value::Int(1)),
            Err(ScalarError::Overflow)
        );
        assert_eq!(
            binary(Binary::Rem, Value::Int(7), Value::Int(0)),
            Ok(Value::Null)
        );
        assert_eq!(
            binary(Binary::Rem, Value::Int(i64::MIN), Value::Int(-1)),
            Ok(Value::Int(0))
        );
        assert_eq!(
            binary(Binary::Div, Value::Int(7), Value::Int(2)),
            Ok(Value::Float(3.5))
        );
        assert_eq!(
            unary(Unary::Neg, Value::Int(i64::MIN)),
            Err(ScalarError::Overflow)
        );
    }

    #[test]
    fn casts_round_floats_to_even_and_overflow_outside_the_type() {
        assert_eq!(cast(Value::Float(2.5), DataType::I32), Ok(Value::Int(2)));
        assert_eq!(cast(Value::Float(-3.5), DataType::I64), Ok(Value::Int(-4)));
        assert_eq!(
            cast(Value::Float(3e9), DataType::I32),
            Err(ScalarError::Overflow)
        );
        assert_eq!(
            cast(Value::Int(1 << 40), DataType::I32),
            Err(ScalarError::Overflow)
        );
        let cents = DecimalType::new(10, 2).expect("a decimal type");
        assert_eq!(
            cast(Value::Int(3), DataType::Decimal(cents)),
            Ok(Value::Decimal(300, 2))
        );
    }

    #[test]
    fn decimals_compare_exactly_across_scales() {
        assert_eq!(
            binary(Binary::Eq, Value::Decimal(150, 2), Value::Decimal(15, 1)),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            binary(Binary::Mul, Value::Decimal(150, 2), Value::Decimal(15, 1)),
            Ok(Value::Decimal(2250, 3))
        );
    }

    #[test]
    fn functions_of_dates_and_numbers() {
        let day = date::days_from_civil(2024, 2, 29).expect("a date");
        assert_eq!(call(Function::Month, Value::Date(day)), Ok(Value::Int(2)));
        assert_eq!(call(Function::Abs, Value::Int(-4)), Ok(Value::Int(4)));
        assert_eq!(call(Function::Sqrt, Value::Int(9)), Ok(Value::Float(3.0)));
    }
}
