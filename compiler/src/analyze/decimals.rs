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

const MAX: u8 = DecimalType::NARROW_PRECISION;
const WIDE_MAX: u8 = DecimalType::MAX_PRECISION;

/// The most digits an operation on `a` and `b` keeps: 38 where either is a 128-bit decimal,
/// 18 otherwise.
fn most_digits(a: DecimalType, b: DecimalType) -> u8 {
    if a.is_wide() || b.is_wide() {
        WIDE_MAX
    } else {
        MAX
    }
}

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

/// A decimal of `scale` with `whole` digits before the point, capped at `max` digits.
fn capped(whole: u8, scale: u8, max: u8) -> DecimalType {
    DecimalType {
        precision: whole.saturating_add(scale).clamp(scale.max(1), max),
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
    let max = most_digits(a, b);
    let at = |scale: u8| DataType::Decimal(capped(max, scale, max));
    Ok(Some(match op {
        BinaryOp::Mul => {
            let scale = a.scale + b.scale;
            if scale > max {
                return Err(Diagnostic::type_error(
                    span,
                    format!("the product has {scale} digits after the point, more than the {max} a decimal holds"),
                )
                .with_hint("cast a side to `f64`, or to a decimal of fewer digits after the point"));
            }
            Typed {
                left: at(a.scale),
                right: at(b.scale),
                result: DataType::Decimal(DecimalType {
                    precision: (a.precision + b.precision).clamp(scale.max(1), max),
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
                result: DataType::Decimal(capped(whole_digits(a, b) + carry, scale, max)),
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

/// `left op right` compared as the decimal `common` (see [`common`]). A side converted to
/// `common`'s finer scale can leave its 18 digits (`decimal(18, 2)` beside `decimal(18, 12)`:
/// values from 10^6 on); such a value lies beyond every value the other side can hold, so the
/// comparison is decided by its sign, as DuckDB's wider arithmetic decides it:
/// `case when other is null then null when side >= limit then (side above) when side <= -limit
/// then (side below) else left op right end`, where the `else` converts only values that fit.
pub(super) fn compare(op: BinaryOp, left: Expr, right: Expr, common: DataType, span: Span) -> Expr {
    let compared = |left: Expr, right: Expr| {
        Expr::binary(
            op,
            at_scale(left, common),
            at_scale(right, common),
            DataType::Bool,
            span,
        )
    };
    let Some(target) = common.decimal() else {
        return compared(left, right);
    };
    let (side, other, side_op, limit) =
        match (leaving_at(&left, target), leaving_at(&right, target)) {
            (Some(limit), _) => (left.clone(), right.clone(), op, limit),
            (None, Some(limit)) => (right.clone(), left.clone(), crate::expr::mirror(op), limit),
            (None, None) => return compared(left, right),
        };
    let truth = |value: bool| Expr::literal(Value::Bool(value), DataType::Bool, span);
    let above = matches!(side_op, BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Ne);
    let below = matches!(side_op, BinaryOp::Lt | BinaryOp::Le | BinaryOp::Ne);
    // `limit` fits the side's values (see `leaving_at`).
    let at_side = |raw: i128| {
        let value = match side.ty {
            DataType::Decimal(decimal) if decimal.is_wide() => {
                Value::WideDecimal(raw, decimal.scale)
            }
            DataType::Decimal(decimal) => Value::Decimal(raw as i64, decimal.scale),
            _ => Value::Int(raw as i64),
        };
        Expr::literal(value, side.ty, span)
    };
    let (limit, negated) = (at_side(limit), at_side(-limit));
    let mut branches = Vec::with_capacity(3);
    if other.nullable {
        let unknown = ExprKind::IsNull {
            operand: Box::new(other.clone()),
            negated: false,
        };
        branches.push((
            Expr::new(unknown, DataType::Bool, false, span),
            Expr::null(DataType::Bool, span),
        ));
    }
    let at_least = Expr::binary(BinaryOp::Ge, side.clone(), limit, DataType::Bool, span);
    let at_most = Expr::binary(BinaryOp::Le, side.clone(), negated, DataType::Bool, span);
    branches.push((at_least, truth(above)));
    branches.push((at_most, truth(below)));
    let case = ExprKind::Case {
        branches,
        otherwise: Some(Box::new(compared(left, right))),
    };
    Expr::new(case, DataType::Bool, true, span)
}

/// The least magnitude of `side` (raw, in its own units) that leaves `target`'s digits (18, or
/// 38 for a 128-bit decimal) at the scale of `target`, when it can hold one: a value read from
/// rows acting as a decimal of a coarser scale with too many whole digits. Constants are
/// converted when folded, and fail there.
fn leaving_at(side: &Expr, target: DecimalType) -> Option<i128> {
    if side.columns_used().is_empty() {
        return None;
    }
    let acting = acts_as(side)?;
    let max = if target.is_wide() { WIDE_MAX } else { MAX };
    let whole = u32::from(acting.precision - acting.scale);
    if acting.scale >= target.scale || whole + u32::from(target.scale) <= u32::from(max) {
        return None;
    }
    // 10^(max - target scale) in the side's units; a side of 64 bits never reaches one past
    // them.
    let digits = u32::from(max - target.scale + acting.scale);
    let limit = 10i128.checked_pow(digits)?;
    match side.ty.is_wide_decimal() {
        true => Some(limit),
        false => i64::try_from(limit).is_ok().then_some(limit),
    }
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
    capped(whole_digits(a, b), a.scale.max(b.scale), most_digits(a, b))
}

/// `expr` converted to the decimal `to` for an operation: unchanged when it already counts
/// units of `to`'s scale in values of `to`'s width (a precision is only ever widened here), a
/// literal when it is one.
pub(super) fn at_scale(expr: Expr, to: DataType) -> Expr {
    let Some(target) = to.decimal() else {
        return expr;
    };
    match expr.ty.decimal() {
        Some(d) if d.scale == target.scale && d.is_wide() == target.is_wide() => expr,
        _ => match literal(&expr, target) {
            Some(literal) => literal,
            None => expr.cast(to),
        },
    }
}

/// A literal as a literal of decimal type `to`, when it is exactly one.
fn literal(expr: &Expr, to: DecimalType) -> Option<Expr> {
    let raw = match expr.kind {
        ExprKind::Literal(Value::Int(i)) => decimal::rescale_wide(i128::from(i), 0, to.scale)?,
        ExprKind::Literal(Value::Float(x)) => {
            let (raw, written) = decimal::literal_type(x)?;
            decimal::rescale_wide(i128::from(raw), written.scale, to.scale)
                .filter(|_| written.scale <= to.scale)?
        }
        ExprKind::Literal(Value::Decimal(raw, scale)) if scale <= to.scale => {
            decimal::rescale_wide(i128::from(raw), scale, to.scale)?
        }
        ExprKind::Literal(Value::WideDecimal(raw, scale)) if scale <= to.scale => {
            decimal::rescale_wide(raw, scale, to.scale)?
        }
        _ => return None,
    };
    let value = if to.is_wide() {
        decimal::fits_precision_wide(raw, WIDE_MAX).then_some(Value::WideDecimal(raw, to.scale))?
    } else {
        decimal::fits_precision_wide(raw, MAX).then_some(Value::Decimal(raw as i64, to.scale))?
    };
    Some(Expr::literal(value, DataType::Decimal(to), expr.span))
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
        DataType::Decimal(decimal) if decimal.is_wide() => Expr::literal(
            Value::WideDecimal(i128::from(rounded), coarse.scale),
            DataType::Decimal(capped(WIDE_MAX, coarse.scale, WIDE_MAX)),
            literal.span,
        ),
        DataType::Decimal(_) => Expr::literal(
            Value::Decimal(rounded, coarse.scale),
            DataType::Decimal(capped(MAX, coarse.scale, MAX)),
            literal.span,
        ),
        _ => Expr::literal(Value::Int(rounded), DataType::I64, literal.span),
    };
    Some(AtValueScale::Compare(literal))
}
