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
        // Within 38 digits either way.
        (Unary::Neg, Value::WideDecimal(i, scale)) => Value::WideDecimal(-i, scale),
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
    let is_wide = |v: &Value| matches!(v, Value::WideDecimal(..));
    if is_wide(&l) || is_wide(&r) {
        if let (Some(x), Some(y)) = (any_decimal(&l), any_decimal(&r)) {
            return wide_arithmetic(op, x, y);
        }
    }
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

/// `+`, `-`, `*`, `%` and `/` of decimals of more than 18 digits: exact within 38 digits (an
/// overflow beyond), `/` as floats.
fn wide_arithmetic(
    op: Binary,
    (x, s): (i128, u8),
    (y, t): (i128, u8),
) -> Result<Value, ScalarError> {
    let within = |raw: Option<i128>, scale: u8| {
        raw.filter(|&raw| decimal::fits_precision_wide(raw, DecimalType::MAX_PRECISION))
            .map(|raw| Value::WideDecimal(raw, scale))
            .ok_or(ScalarError::Overflow)
    };
    match op {
        Binary::Mul => within(x.checked_mul(y), s + t),
        Binary::Div => Ok(Value::Float(
            decimal::to_float(x, s) / decimal::to_float(y, t),
        )),
        _ if s != t => Err(unsupported(format!(
            "`{}` on decimals of scales {s} and {t}",
            op.symbol()
        ))),
        Binary::Add => within(x.checked_add(y), s),
        Binary::Sub => within(x.checked_sub(y), s),
        Binary::Rem if y == 0 => Ok(Value::Null),
        Binary::Rem => within(Some(x % y), s),
        _ => Err(unsupported(format!("`{}` on decimals", op.symbol()))),
    }
}

/// A decimal of either width as its raw value and scale.
fn any_decimal(v: &Value) -> Option<(i128, u8)> {
    match v {
        Value::Decimal(raw, scale) => Some((i128::from(*raw), *scale)),
        Value::WideDecimal(raw, scale) => Some((*raw, *scale)),
        _ => None,
    }
}

/// How two values order: numbers by value (decimals exactly, at the finer scale), strings by
/// bytes, dates and times by time; `None` for values of kinds that do not compare.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if let (Some((x, s)), Some((y, t))) = (any_decimal(a), any_decimal(b)) {
        // A value scaled past 128 bits is beyond every decimal of 38 digits: its sign decides.
        let at = |raw: i128, scale: u8| {
            10i128
                .checked_pow(u32::from(s.max(t) - scale))
                .and_then(|factor| raw.checked_mul(factor))
                .ok_or(raw.signum())
        };
        return Some(match (at(x, s), at(y, t)) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            (Err(sign), _) => sign.cmp(&0),
            (Ok(_), Err(sign)) => 0.cmp(&sign),
        });
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
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
    let to_wide = |raw: i128, from: u8, to: DecimalType| {
        decimal::convert_wide(raw, from, to)
            .map(|raw| Value::WideDecimal(raw, to.scale))
            .ok_or(ScalarError::Overflow)
    };
    if let DataType::Decimal(to) = ty {
        if to.is_wide() {
            return match v {
                Value::Decimal(raw, scale) => to_wide(i128::from(raw), scale, to),
                Value::WideDecimal(raw, scale) => to_wide(raw, scale, to),
                Value::Int(i) => to_wide(i128::from(i), 0, to),
                Value::Float(x) => decimal::from_float_wide(x, to)
                    .map(|raw| Value::WideDecimal(raw, to.scale))
                    .ok_or(ScalarError::Overflow),
                Value::Bool(b) => to_wide(i128::from(b), 0, to),
                other => Ok(other),
            };
        }
    }
    if let Value::WideDecimal(raw, scale) = v {
        let whole = || i64::try_from(decimal::divide_rounding_wide(raw, u32::from(scale)));
        return Ok(match ty {
            DataType::Decimal(to) => decimal::convert_wide(raw, scale, to)
                .and_then(|raw| i64::try_from(raw).ok())
                .map(|raw| Value::Decimal(raw, to.scale))
                .ok_or(ScalarError::Overflow)?,
            DataType::F32 => Value::Float(f64::from(decimal::to_float(raw, scale) as f32)),
            DataType::F64 => Value::Float(decimal::to_float(raw, scale)),
            DataType::I64 => Value::Int(whole().map_err(|_| ScalarError::Overflow)?),
            DataType::I32 => Value::Int(narrow(whole().map_err(|_| ScalarError::Overflow)?)?),
            _ => Value::WideDecimal(raw, scale),
        });
    }
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
        (Function::Abs, Value::WideDecimal(i, scale)) => Value::WideDecimal(i.abs(), scale),
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
        Value::WideDecimal(raw, scale) => Some(decimal::to_float(*raw, *scale)),
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
    fn decimals_of_more_than_18_digits_compute_within_38() {
        let big = 10i128.pow(30);
        let wide = DecimalType::new(38, 2).expect("a decimal type");
        assert_eq!(
            binary(
                Binary::Add,
                Value::WideDecimal(big, 2),
                Value::WideDecimal(1, 2)
            ),
            Ok(Value::WideDecimal(big + 1, 2))
        );
        // Beyond 38 digits, though within 128 bits, is an overflow.
        assert_eq!(
            binary(
                Binary::Mul,
                Value::WideDecimal(big, 2),
                Value::WideDecimal(big, 2)
            ),
            Err(ScalarError::Overflow)
        );
        assert_eq!(
            binary(
                Binary::Mul,
                Value::WideDecimal(10i128.pow(20), 0),
                Value::WideDecimal(10i128.pow(17), 0)
            ),
            Ok(Value::WideDecimal(10i128.pow(37), 0))
        );
        assert_eq!(
            compare(&Value::WideDecimal(150, 2), &Value::Decimal(15, 1)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::WideDecimal(-big, 0), &Value::Decimal(1, 18)),
            Some(Ordering::Less)
        );
        assert_eq!(
            cast(Value::Decimal(150, 2), DataType::Decimal(wide)),
            Ok(Value::WideDecimal(150, 2))
        );
        assert_eq!(
            cast(
                Value::WideDecimal(big, 2),
                DataType::Decimal(DecimalType::new(18, 2).expect("type"))
            ),
            Err(ScalarError::Overflow)
        );
        assert_eq!(
            cast(Value::WideDecimal(-1250, 2), DataType::I64),
            Ok(Value::Int(-13))
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
