//! Typing of decimals, following DuckDB's rules within 18 digits. An operand combined with a
//! decimal acts as a decimal: an integer column as `decimal(10, 0)` or `decimal(18, 0)`, an
//! integer literal with its digits, a float literal as the decimal it is written as (`0.05` is
//! `decimal(3, 2)`); a float column makes the whole operation a float one. `+`, `-` and `%`
//! work at the finer scale, `*` adds the scales, `/` divides as floats. A precision past 18
//! digits is capped there: values are 64-bit, and leaving that range is an overflow error.

use tessera_grammar::ast::BinaryOp;
use tessera_grammar::{Diagnostic, Span};
use tessera_storage::{decimal, DataType, DecimalType, Value};

use crate::expr::{Expr, ExprKind};

use super::Result;

const MAX: u8 = DecimalType::MAX_PRECISION;

/// The decimal `expr` acts as beside a decimal; `None` when it does not (a float column,
/// a date, a float literal needing more than 18 digits).
fn acts_as(expr: &Expr) -> Option<DecimalType> {
    match (&expr.kind, expr.ty) {
        (_, DataType::Decimal(decimal)) => Some(decimal),
        (ExprKind::Literal(Value::Int(i)), _) => {
            let digits = i.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
            DecimalType::new(u64::from(digits), 0).ok()
        }
        (ExprKind::Literal(Value::Float(x)), _) => decimal::literal_type(*x).map(|(_, d)| d),
        (_, DataType::I32) => DecimalType::new(10, 0).ok(),
        (_, DataType::I64) => DecimalType::new(u64::from(MAX), 0).ok(),
        _ => None,
    }
}

/// A decimal of `scale` with `whole` digits before the point, capped at 18 digits.
fn capped(whole: u8, scale: u8) -> DecimalType {
    DecimalType {
        precision: (whole + scale).clamp(scale.max(1), MAX),
        scale,
    }
}

/// The most digits before the point either has.
fn whole_digits(a: DecimalType, b: DecimalType) -> u8 {
    (a.precision - a.scale).max(b.precision - b.scale)
}

/// Operands of decimal arithmetic: the types they are converted to and the result's.
pub(super) struct Typed {
    pub left: DataType,
    pub right: DataType,
    pub result: DataType,
}

/// The types of `left op right` when one side is a decimal and the other acts as one; `None`
/// when the operation is not decimal arithmetic (no decimal, a float column, or `/`).
pub(super) fn arithmetic(
    op: BinaryOp,
    left: &Expr,
    right: &Expr,
    span: Span,
) -> Result<Option<Typed>> {
    if !left.ty.is_decimal() && !right.ty.is_decimal() || op == BinaryOp::Div {
        return Ok(None);
    }
    let (Some(a), Some(b)) = (acts_as(left), acts_as(right)) else {
        return Ok(None);
    };
    let at = |scale: u8| DataType::Decimal(capped(MAX, scale));
    Ok(Some(match op {
        BinaryOp::Mul => {
            let scale = a.scale + b.scale;
            if scale > MAX {
                return Err(Diagnostic::type_error(
                    span,
                    format!("the product has {scale} digits after the point, more than the {MAX} a decimal holds"),
                )
                .with_hint("cast a side to `f64`, or to a decimal of fewer digits after the point"));
            }
            Typed {
                left: at(a.scale),
                right: at(b.scale),
                result: DataType::Decimal(DecimalType {
                    precision: (a.precision + b.precision).clamp(scale.max(1), MAX),
                    scale,
                }),
            }
        }
        _ => {
            let scale = a.scale.max(b.scale);
            let carry = u8::from(op != BinaryOp::Rem);
            Typed {
                left: at(scale),
                right: at(scale),
                result: DataType::Decimal(capped(whole_digits(a, b) + carry, scale)),
            }
        }
    }))
}

/// The type a decimal and a value acting as one are compared in: the finer scale, the most
/// digits before the point.
pub(super) fn common(left: &Expr, right: &Expr) -> Option<DataType> {
    if !left.ty.is_decimal() && !right.ty.is_decimal() {
        return None;
    }
    Some(DataType::Decimal(finer(acts_as(left)?, acts_as(right)?)))
}

/// [`common`] for all of a `case`'s results: the decimal they are converted to when one of them
/// is a decimal and every other acts as one (a float literal as the decimal it is written as).
pub(super) fn common_of_all(results: &[&Expr]) -> Option<DataType> {
    if !results.iter().any(|r| r.ty.is_decimal()) {
        return None;
    }
    let mut acting = results.iter().map(|r| acts_as(r));
    let first = acting.next()??;
    let common = acting.try_fold(first, |common, next| Some(finer(common, next?)))?;
    Some(DataType::Decimal(common))
}

/// The decimal holding both: the finer scale, the most digits before the point.
fn finer(a: DecimalType, b: DecimalType) -> DecimalType {
    capped(whole_digits(a, b), a.scale.max(b.scale))
}

/// `expr` converted to the decimal `to` for an operation: unchanged when it already counts
/// units of `to`'s scale (a precision is only ever widened here), a literal when it is one.
pub(super) fn at_scale(expr: Expr, to: DataType) -> Expr {
    let Some(target) = to.decimal() else {
        return expr;
    };
    match expr.ty.decimal() {
        Some(d) if d.scale == target.scale => expr,
        _ => match literal(&expr, target) {
            Some(literal) => literal,
            None => expr.cast(to),
        },
    }
}

/// A literal as a literal of decimal type `to`, when it is exactly one.
fn literal(expr: &Expr, to: DecimalType) -> Option<Expr> {
    let raw = match expr.kind {
        ExprKind::Literal(Value::Int(i)) => i.checked_mul(to.unit())?,
        ExprKind::Literal(Value::Float(x)) => {
            let (raw, written) = decimal::literal_type(x)?;
            decimal::rescale(raw, written.scale, to.scale).filter(|_| written.scale <= to.scale)?
        }
        ExprKind::Literal(Value::Decimal(raw, scale)) if scale <= to.scale => {
            decimal::rescale(raw, scale, to.scale)?
        }
        _ => return None,
    };
    decimal::fits_precision(raw, MAX).then(|| {
        Expr::literal(
            Value::Decimal(raw, to.scale),
            DataType::Decimal(to),
            expr.span,
        )
    })
}

/// `value op literal` at the value's own scale, when the literal has more digits after the point
/// than the value (a decimal, or an integer acting as one of scale 0).
pub(super) enum AtValueScale {
    /// The comparison with the literal rounded to the value's scale, the way `op` needs.
    Compare(Expr),
    /// `==` (`!=` for `false`) with a literal no value of that scale equals: `false` (`true`)
    /// for every value, `null` for null.
    Never { equal: bool },
}

/// `value op literal` compared at the value's scale rather than the literal's, or `None` when
/// the literal has no more digits after the point than the value. Rescaling the value would
/// multiply every row's value by a power of ten and could leave 64 bits (`price > 1.0000001`
/// with `price` of scale 2 multiplies prices by 10^5), an error where the comparison has an
/// answer; the literal rounded towards the side `op` keeps is exact instead: for a value `x`
/// counting units of the coarser scale, `x > c` holds exactly when `x > floor(c)`, `x >= c`
/// when `x >= ceil(c)`, and so on.
pub(super) fn at_value_scale(op: BinaryOp, value: &Expr, literal: &Expr) -> Option<AtValueScale> {
    if matches!(value.kind, ExprKind::Literal(_))
        || !value.ty.is_decimal() && !literal.ty.is_decimal()
    {
        return None;
    }
    let coarse = acts_as(value)?;
    let (raw, scale) = match literal.kind {
        ExprKind::Literal(Value::Float(x)) => {
            decimal::literal_type(x).map(|(raw, d)| (raw, d.scale))?
        }
        ExprKind::Literal(Value::Decimal(raw, scale)) => (raw, scale),
        _ => return None,
    };
    let digits = scale.checked_sub(coarse.scale).filter(|d| *d > 0)?;
    let unit = decimal::power_of_ten(u32::from(digits));
    let floor = raw.div_euclid(unit);
    let exact = raw.rem_euclid(unit) == 0;
    let ceil = floor + i64::from(!exact);
    let rounded = match op {
        BinaryOp::Gt | BinaryOp::Le => floor,
        BinaryOp::Ge | BinaryOp::Lt => ceil,
        BinaryOp::Eq | BinaryOp::Ne if exact => floor,
        BinaryOp::Eq => return Some(AtValueScale::Never { equal: true }),
        BinaryOp::Ne => return Some(AtValueScale::Never { equal: false }),
        _ => return None,
    };
    let literal = match value.ty {
        DataType::Decimal(_) => Expr::literal(
            Value::Decimal(rounded, coarse.scale),
            DataType::Decimal(capped(MAX, coarse.scale)),
            literal.span,
        ),
        _ => Expr::literal(Value::Int(rounded), DataType::I64, literal.span),
    };
    Some(AtValueScale::Compare(literal))
}
