//! Expressions, evaluated per item of a tile in registers. Each value carries an optional
//! validity bit (absent when it cannot be null), and operations follow SQL: arithmetic and
//! comparisons with a null are null, `and`/`or` use three-valued logic, and a filter keeps a row
//! only when its predicate is true. Integer `%` by zero is null rather than a trap.
//!
//! Integer arithmetic never wraps silently: each value also carries an overflow bit (absent when
//! nothing in it can overflow) — set when `+`, `-`, `*`, negation or `abs` leaves its type, or a
//! cast cannot hold its value — which follows the value through the expression as a null
//! would, a `case` keeping only the branch it takes. Where a step uses the value, a row still
//! selected whose value overflowed sets the query's overflow status word, and the query fails
//! with an error (`docs/LANGUAGE.md`, "Integer overflow").

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tessera_grammar::ast::{BinaryOp, UnaryOp};
use tessera_grammar::Diagnostic;
use tessera_runtime::emit::int_constant;
use tessera_runtime::emit::Item;
use tessera_runtime::primitives::hash::{self, status};
use tessera_runtime::primitives::math;
use tessera_runtime::program::{HostExpr, Param};
use tessera_runtime::{CodegenError, CodegenResult};
use tessera_stdlib::scalar;
use tessera_stdlib::Function;
use tessera_storage::{date, decimal, DataType, Value};

use crate::columns::BaseColumn;
use crate::expr::{Expr, ExprKind, StrBound};
use crate::physical::constants::Constant;

use super::kernel::Kernel;

/// A value in registers; booleans are `i1`.
#[derive(Clone, Copy)]
pub(super) struct Val<'ctx> {
    pub value: BasicValueEnum<'ctx>,
    /// `None`: never null.
    pub valid: Option<IntValue<'ctx>>,
    /// Set when computing the value overflowed; `None`: it cannot.
    pub overflow: Option<IntValue<'ctx>>,
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    /// The value of `expr` for one item, as a step uses it: if the item is still selected and
    /// computing the value overflowed, the query's overflow status is set.
    pub fn eval(&self, expr: &Expr, item: Item<'ctx>) -> CodegenResult<Val<'ctx>> {
        let v = self.value_of(expr, item)?;
        if let Some(overflow) = v.overflow {
            let em = &self.em;
            let selected = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let failed = em.b.build_and(overflow, selected, "")?;
            let status = self.buffer(self.status)?;
            hash::report_unless(
                em,
                em.b.build_not(failed, "")?,
                status,
                status::ARITHMETIC_OVERFLOW,
            )?;
        }
        Ok(v)
    }

    /// The value of `expr` for one item, with its overflow bit.
    fn value_of(&self, expr: &Expr, item: Item<'ctx>) -> CodegenResult<Val<'ctx>> {
        let em = &self.em;
        match &expr.kind {
            ExprKind::Column(id) => {
                let tile = self.tiles.get(id).ok_or_else(|| {
                    CodegenError::Invalid(format!(
                        "column `{}` is not available in pipeline {}",
                        self.query.columns.get(*id).name,
                        self.pipeline.id
                    ))
                })?;
                let mut value = em.get(tile.values, item)?;
                if expr.ty == DataType::Bool {
                    value = em.truth(value.into_int_value())?.into();
                }
                let valid = match tile.valid {
                    Some(valid) => Some(em.truth(em.get(valid, item)?.into_int_value())?),
                    None => None,
                };
                Ok(Val {
                    value,
                    valid,
                    overflow: None,
                })
            }
            // `null` of any type: a zero that is never valid.
            ExprKind::Literal(Value::Null) => Ok(Val {
                value: match expr.ty {
                    DataType::Bool => self.em.i1().const_zero().into(),
                    ty => self.em.value_type(ty).const_zero(),
                },
                valid: Some(self.em.i1().const_int(0, false)),
                overflow: None,
            }),
            ExprKind::Literal(value) => Ok(Val {
                value: self.constant(value, expr.ty)?,
                valid: None,
                overflow: None,
            }),
            // A kernel parameter holds the bits of the value in its type.
            ExprKind::Constant { slot, .. } => {
                let param = constant_param(self.query, *slot, expr.ty)
                    .ok_or_else(|| invalid("a pattern evaluated as a value"))?;
                let param = self.param(&param)?;
                let bits = param.into_int_value();
                let value: BasicValueEnum = match expr.ty.physical() {
                    DataType::I64 => bits.into(),
                    DataType::F64 => em.b.build_bit_cast(bits, em.ctx.f64_type(), "")?,
                    DataType::F32 => {
                        let low = em.b.build_int_truncate(bits, em.i32(), "")?;
                        em.b.build_bit_cast(low, em.ctx.f32_type(), "")?
                    }
                    ty => match em.value_type(ty) {
                        BasicTypeEnum::IntType(t) => em.b.build_int_truncate(bits, t, "")?.into(),
                        _ => return Err(invalid("a constant of a non-numeric type")),
                    },
                };
                Ok(Val {
                    value,
                    valid: None,
                    overflow: None,
                })
            }
            ExprKind::StrCode(_) => Err(invalid(
                "a string literal reached code generation without being hoisted",
            )),
            ExprKind::Unary { op, operand } => {
                let v = self.value_of(operand, item)?;
                let mut overflow = v.overflow;
                let value: BasicValueEnum = match (op, v.value) {
                    (UnaryOp::Not, BasicValueEnum::IntValue(b)) => em.b.build_not(b, "")?.into(),
                    (UnaryOp::Neg, BasicValueEnum::IntValue(i)) => {
                        // Only the smallest value has no negation.
                        if !expr.fits_its_type() {
                            overflow = self.either(overflow, Some(self.is_minimum(i, v.valid)?))?;
                        }
                        em.b.build_int_neg(i, "")?.into()
                    }
                    (UnaryOp::Neg, BasicValueEnum::FloatValue(x)) => {
                        em.b.build_float_neg(x, "")?.into()
                    }
                    _ => return Err(invalid("unary operator on an unexpected value")),
                };
                Ok(Val {
                    value,
                    valid: v.valid,
                    overflow,
                })
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.value_of(left, item)?;
                let r = self.value_of(right, item)?;
                match op {
                    BinaryOp::And | BinaryOp::Or => self.logical(*op, l, r),
                    op if op.is_comparison() => {
                        let value = self.compare(*op, l.value, r.value)?;
                        Ok(Val {
                            value: value.into(),
                            valid: self.both_valid(l.valid, r.valid)?,
                            overflow: self.either(l.overflow, r.overflow)?,
                        })
                    }
                    op => {
                        let mut v = self.arithmetic(*op, l, r, expr.fits_its_type())?;
                        // A 128-bit decimal leaves its type at 38 digits, before 128 bits.
                        if expr.ty.is_wide_decimal()
                            && !expr.fits_its_type()
                            && *op != BinaryOp::Rem
                        {
                            let limit = decimal::power_of_ten_wide(u32::from(
                                tessera_storage::DecimalType::MAX_PRECISION,
                            ));
                            let outside = self.beyond(v.value.into_int_value(), limit)?;
                            let outside = match v.valid {
                                Some(valid) => em.b.build_and(outside, valid, "")?,
                                None => outside,
                            };
                            v.overflow = self.either(v.overflow, Some(outside))?;
                        }
                        Ok(v)
                    }
                }
            }
            ExprKind::Cast(operand) => {
                let v = self.value_of(operand, item)?;
                let (value, lost) = self.checked_cast(v.value, operand.ty, expr.ty)?;
                // A conversion the operand's width shows always fits needs no check.
                let lost = lost.filter(|_| operand.cast_may_fail(expr.ty));
                let lost = match (lost, v.valid) {
                    (Some(lost), Some(valid)) => Some(em.b.build_and(lost, valid, "")?),
                    (lost, _) => lost,
                };
                Ok(Val {
                    value,
                    valid: v.valid,
                    overflow: self.either(v.overflow, lost)?,
                })
            }
            ExprKind::Call { function, args } => {
                let mut valid = None;
                let mut overflow = None;
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    let v = self.value_of(arg, item)?;
                    valid = self.both_valid(valid, v.valid)?;
                    overflow = self.either(overflow, v.overflow)?;
                    values.push(v.value);
                }
                // `abs` of the smallest integer has no value of its type.
                if let (Function::Abs, [BasicValueEnum::IntValue(i)]) =
                    (function, values.as_slice())
                {
                    if !expr.fits_its_type() {
                        overflow = self.either(overflow, Some(self.is_minimum(*i, valid)?))?;
                    }
                }
                Ok(Val {
                    value: self.call(*function, &values, expr.ty)?,
                    valid,
                    overflow,
                })
            }
            ExprKind::Case {
                branches,
                otherwise,
            } => {
                let (mut value, mut valid, mut overflow) = match otherwise {
                    Some(otherwise) => {
                        let v = self.value_of(otherwise, item)?;
                        (v.value, v.valid, v.overflow)
                    }
                    // No `else`: null when no branch matches. A bool is an `i1` here, where
                    // memory holds a byte.
                    None => (
                        match expr.ty {
                            DataType::Bool => em.i1().const_zero().into(),
                            ty => em.value_type(ty).const_zero(),
                        },
                        Some(em.i1().const_zero()),
                        None,
                    ),
                };
                // Conditions are all computed; their overflow counts whichever branch is taken.
                let mut conditions_overflow = None;
                for (when, then) in branches.iter().rev() {
                    let when = self.value_of(when, item)?;
                    conditions_overflow = self.either(conditions_overflow, when.overflow)?;
                    let condition = self.truth_of(when)?;
                    let then = self.value_of(then, item)?;
                    value = em.b.build_select(condition, then.value, value, "")?;
                    valid = match (then.valid, valid) {
                        (None, None) => None,
                        (a, b) => {
                            let a = a.unwrap_or(em.i1().const_all_ones());
                            let b = b.unwrap_or(em.i1().const_all_ones());
                            Some(em.b.build_select(condition, a, b, "")?.into_int_value())
                        }
                    };
                    // Only the branch taken can fail the row.
                    overflow = match (then.overflow, overflow) {
                        (None, None) => None,
                        (a, b) => {
                            let a = a.unwrap_or(em.i1().const_zero());
                            let b = b.unwrap_or(em.i1().const_zero());
                            Some(em.b.build_select(condition, a, b, "")?.into_int_value())
                        }
                    };
                }
                Ok(Val {
                    value,
                    valid,
                    overflow: self.either(overflow, conditions_overflow)?,
                })
            }
            // A rank, or a string function's code: the operand's code looked up in a table
            // computed per dictionary entry.
            ExprKind::Rank {
                operand, entries, ..
            }
            | ExprKind::Derived {
                operand, entries, ..
            } => {
                let param = per_code_param(self.query, expr)
                    .ok_or_else(|| invalid("a per-code table is of a stored string column"))?;
                let v = self.value_of(operand, item)?;
                let mut value = self.per_code(&param, v.value.into_int_value(), *entries)?;
                // Lengths are kept in 32 bits per entry; `length` is an `i64`.
                if expr.ty == DataType::I64 {
                    value = em.b.build_int_s_extend(value, em.i64(), "wide")?;
                }
                Ok(Val {
                    value: value.into(),
                    valid: v.valid,
                    overflow: v.overflow,
                })
            }
            ExprKind::Matches {
                operand, entries, ..
            } => {
                let param = per_code_param(self.query, expr).ok_or_else(|| {
                    invalid("a pattern is matched against a stored string column")
                })?;
                let v = self.value_of(operand, item)?;
                let answer = self.per_code(&param, v.value.into_int_value(), *entries)?;
                let value =
                    em.b.build_int_compare(IntPredicate::NE, answer, em.const_i32(0), "matches")?;
                Ok(Val {
                    value: value.into(),
                    valid: v.valid,
                    overflow: v.overflow,
                })
            }
            ExprKind::IsNull { operand, negated } => {
                let v = self.value_of(operand, item)?;
                let is_valid = v.valid.unwrap_or(em.i1().const_all_ones());
                let value = if *negated {
                    is_valid
                } else {
                    em.b.build_not(is_valid, "")?
                };
                Ok(Val {
                    value: value.into(),
                    valid: None,
                    overflow: v.overflow,
                })
            }
        }
    }

    /// Either overflow bit (`None`: neither can be set).
    fn either(
        &self,
        a: Option<IntValue<'ctx>>,
        b: Option<IntValue<'ctx>>,
    ) -> CodegenResult<Option<IntValue<'ctx>>> {
        Ok(match (a, b) {
            (None, None) => None,
            (Some(x), None) | (None, Some(x)) => Some(x),
            (Some(x), Some(y)) => Some(self.em.b.build_or(x, y, "")?),
        })
    }

    /// Whether the (valid) integer `i` is its type's smallest value.
    fn is_minimum(
        &self,
        i: IntValue<'ctx>,
        valid: Option<IntValue<'ctx>>,
    ) -> CodegenResult<IntValue<'ctx>> {
        let b = &self.em.b;
        let ty = i.get_type();
        // -2^(bits - 1): the sign bit alone (128-bit values included).
        let minimum = int_constant(ty, i128::MIN >> (128 - ty.get_bit_width()));
        let is = b.build_int_compare(IntPredicate::EQ, i, minimum, "")?;
        Ok(match valid {
            Some(valid) => b.build_and(is, valid, "")?,
            None => is,
        })
    }

    /// Entry `code` of the per-code table `param` (a dictionary's `entries` strings long).
    fn per_code(
        &self,
        param: &Param,
        code: IntValue<'ctx>,
        entries: u32,
    ) -> CodegenResult<IntValue<'ctx>> {
        let em = &self.em;
        let table = self.param(param)?.into_pointer_value();
        // A row not selected may hold anything where its code would be: read entry 0.
        let inside = em.b.build_int_compare(
            IntPredicate::ULT,
            code,
            em.const_i32(i64::from(entries)),
            "",
        )?;
        let index =
            em.b.build_select(inside, code, em.const_i32(0), "")?
                .into_int_value();
        let slot = em.offset_ptr(em.i32().into(), table, index)?;
        let value = em.b.build_load(em.i32(), slot, "per_code")?;
        // The table never changes while the kernel runs: a repeated test reads it once.
        if let Some(load) = value.as_instruction_value() {
            let kind = em.ctx.get_kind_id("invariant.load");
            load.set_metadata(em.ctx.metadata_node(&[]), kind)
                .map_err(|e| invalid(&e.to_string()))?;
        }
        Ok(value.into_int_value())
    }

    /// True only when the value is valid and true (how filters read a predicate).
    pub fn truth_of(&self, v: Val<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        let value = v.value.into_int_value();
        match v.valid {
            Some(valid) => Ok(self.em.b.build_and(value, valid, "")?),
            None => Ok(value),
        }
    }

    fn both_valid(
        &self,
        a: Option<IntValue<'ctx>>,
        b: Option<IntValue<'ctx>>,
    ) -> CodegenResult<Option<IntValue<'ctx>>> {
        Ok(match (a, b) {
            (None, None) => None,
            (Some(x), None) | (None, Some(x)) => Some(x),
            (Some(x), Some(y)) => Some(self.em.b.build_and(x, y, "")?),
        })
    }

    fn constant(&self, value: &Value, ty: DataType) -> CodegenResult<BasicValueEnum<'ctx>> {
        let em = &self.em;
        Ok(match (value, ty) {
            (Value::Bool(b), _) => em.i1().const_int(u64::from(*b), false).into(),
            (Value::Int(i), DataType::F32) => em.ctx.f32_type().const_float(*i as f64).into(),
            (Value::Int(i), DataType::F64) => em.ctx.f64_type().const_float(*i as f64).into(),
            (Value::Int(i), _) => match em.value_type(ty) {
                BasicTypeEnum::IntType(t) => t.const_int(*i as u64, true).into(),
                _ => return Err(invalid("integer literal of a non-integer type")),
            },
            (Value::Float(x), DataType::F32) => em.ctx.f32_type().const_float(*x).into(),
            (Value::Float(x), _) => em.ctx.f64_type().const_float(*x).into(),
            (Value::Date(d), _) => em.const_i32(i64::from(*d)).into(),
            (Value::Decimal(raw, _) | Value::Timestamp(raw) | Value::Time(raw), _) => {
                em.const_i64(*raw).into()
            }
            (Value::WideDecimal(raw, _), _) => wide_constant(em, *raw).into(),
            (Value::Null | Value::Str(_), _) => {
                return Err(invalid("a null or text literal reached code generation"))
            }
        })
    }

    fn logical(&self, op: BinaryOp, l: Val<'ctx>, r: Val<'ctx>) -> CodegenResult<Val<'ctx>> {
        let b = &self.em.b;
        let (lv, rv) = (l.value.into_int_value(), r.value.into_int_value());
        let value = if op == BinaryOp::And {
            b.build_and(lv, rv, "")?
        } else {
            b.build_or(lv, rv, "")?
        };
        // A known false decides `and`, a known true decides `or`, whatever the other side is.
        let decides = |v: IntValue<'ctx>| match op {
            BinaryOp::And => b.build_not(v, ""),
            _ => Ok(v),
        };
        // As DuckDB evaluates from the left and stops there: the right side's overflow counts
        // only for rows whose left side does not decide.
        let right_overflow = match r.overflow {
            Some(bit) => {
                let ld = decides(lv)?;
                let left_decides = match l.valid {
                    Some(known) => b.build_and(known, ld, "")?,
                    None => ld,
                };
                Some(b.build_and(bit, b.build_not(left_decides, "")?, "")?)
            }
            None => None,
        };
        let overflow = self.either(l.overflow, right_overflow)?;
        if l.valid.is_none() && r.valid.is_none() {
            return Ok(Val {
                value: value.into(),
                valid: None,
                overflow,
            });
        }
        let all = self.em.i1().const_all_ones();
        let (lk, rk) = (l.valid.unwrap_or(all), r.valid.unwrap_or(all));
        let (ld, rd) = (decides(lv)?, decides(rv)?);
        let both = b.build_and(lk, rk, "")?;
        let left_decides = b.build_and(lk, ld, "")?;
        let right_decides = b.build_and(rk, rd, "")?;
        let valid = b.build_or(both, b.build_or(left_decides, right_decides, "")?, "")?;
        Ok(Val {
            value: value.into(),
            valid: Some(valid),
            overflow,
        })
    }

    fn compare(
        &self,
        op: BinaryOp,
        l: BasicValueEnum<'ctx>,
        r: BasicValueEnum<'ctx>,
    ) -> CodegenResult<IntValue<'ctx>> {
        let b = &self.em.b;
        Ok(match (l, r) {
            (BasicValueEnum::IntValue(l), BasicValueEnum::IntValue(r)) => {
                let predicate = match op {
                    BinaryOp::Eq => IntPredicate::EQ,
                    BinaryOp::Ne => IntPredicate::NE,
                    BinaryOp::Lt => IntPredicate::SLT,
                    BinaryOp::Le => IntPredicate::SLE,
                    BinaryOp::Gt => IntPredicate::SGT,
                    _ => IntPredicate::SGE,
                };
                b.build_int_compare(predicate, l, r, "")?
            }
            // Floats compare in SQL's total order (DuckDB's): NaN is larger than every other
            // value and equal to itself, so `x > 0` keeps NaN and `x == x` always holds.
            (BasicValueEnum::FloatValue(l), BasicValueEnum::FloatValue(r)) => {
                let l_nan = b.build_float_compare(FloatPredicate::UNO, l, l, "")?;
                let r_nan = b.build_float_compare(FloatPredicate::UNO, r, r, "")?;
                // l < r: ordered and less, or only r is NaN.
                let less = |l, r, l_nan, r_nan| -> CodegenResult<IntValue<'ctx>> {
                    let ordered = b.build_float_compare(FloatPredicate::OLT, l, r, "")?;
                    let only_r = b.build_and(b.build_not(l_nan, "")?, r_nan, "")?;
                    Ok(b.build_or(ordered, only_r, "")?)
                };
                let equal = || -> CodegenResult<IntValue<'ctx>> {
                    let ordered = b.build_float_compare(FloatPredicate::OEQ, l, r, "")?;
                    Ok(b.build_or(ordered, b.build_and(l_nan, r_nan, "")?, "")?)
                };
                match op {
                    BinaryOp::Eq => equal()?,
                    BinaryOp::Ne => b.build_not(equal()?, "")?,
                    BinaryOp::Lt => less(l, r, l_nan, r_nan)?,
                    BinaryOp::Gt => less(r, l, r_nan, l_nan)?,
                    BinaryOp::Le => b.build_not(less(r, l, r_nan, l_nan)?, "")?,
                    _ => b.build_not(less(l, r, l_nan, r_nan)?, "")?,
                }
            }
            _ => return Err(invalid("comparison of values of different kinds")),
        })
    }

    /// `l op r`; `fits` says the result cannot leave its type (no check is made then).
    fn arithmetic(
        &self,
        op: BinaryOp,
        l: Val<'ctx>,
        r: Val<'ctx>,
        fits: bool,
    ) -> CodegenResult<Val<'ctx>> {
        let em = &self.em;
        let b = &em.b;
        let mut valid = self.both_valid(l.valid, r.valid)?;
        let mut overflow = self.either(l.overflow, r.overflow)?;
        let value: BasicValueEnum = match (l.value, r.value) {
            (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(y)) => match op {
                BinaryOp::Add if fits => b.build_int_add(x, y, "")?.into(),
                BinaryOp::Sub if fits => b.build_int_sub(x, y, "")?.into(),
                BinaryOp::Mul if fits => b.build_int_mul(x, y, "")?.into(),
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => {
                    let (result, lost) = self.checked_int(op, x, y)?;
                    // Values of null operands are arbitrary: only valid ones can overflow.
                    let lost = match valid {
                        Some(valid) => b.build_and(lost, valid, "")?,
                        None => lost,
                    };
                    overflow = self.either(overflow, Some(lost))?;
                    result.into()
                }
                BinaryOp::Rem => {
                    let ty = y.get_type();
                    let zero = b.build_int_compare(IntPredicate::EQ, y, ty.const_zero(), "")?;
                    let minus_one =
                        b.build_int_compare(IntPredicate::EQ, y, ty.const_all_ones(), "")?;
                    // x % 0 is null, and x % -1 is 0 (computing it could trap on the minimum).
                    let unsafe_divisor = b.build_or(zero, minus_one, "")?;
                    let divisor = b.build_select(unsafe_divisor, ty.const_int(1, false), y, "")?;
                    let rem = b.build_int_signed_rem(x, divisor.into_int_value(), "")?;
                    valid = self.both_valid(valid, Some(b.build_not(zero, "")?))?;
                    b.build_select(minus_one, ty.const_zero(), rem, "")?
                }
                _ => return Err(invalid("integer division reached code generation")),
            },
            (BasicValueEnum::FloatValue(x), BasicValueEnum::FloatValue(y)) => match op {
                BinaryOp::Add => b.build_float_add(x, y, "")?.into(),
                BinaryOp::Sub => b.build_float_sub(x, y, "")?.into(),
                BinaryOp::Mul => b.build_float_mul(x, y, "")?.into(),
                BinaryOp::Div => b.build_float_div(x, y, "")?.into(),
                BinaryOp::Rem => b.build_float_rem(x, y, "")?.into(),
                _ => return Err(invalid("unexpected float operator")),
            },
            _ => return Err(invalid("arithmetic on values of different kinds")),
        };
        Ok(Val {
            value,
            valid,
            overflow,
        })
    }

    /// `x op y` for `+`, `-`, `*` on integers, and whether the result left the type.
    fn checked_int(
        &self,
        op: BinaryOp,
        x: IntValue<'ctx>,
        y: IntValue<'ctx>,
    ) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let em = &self.em;
        let ty = x.get_type();
        let name = match op {
            BinaryOp::Add => "sadd",
            BinaryOp::Sub => "ssub",
            _ => "smul",
        };
        let bits = ty.get_bit_width();
        let pair = em.ctx.struct_type(&[ty.into(), em.i1().into()], false);
        let both = em
            .call_intrinsic(
                &format!("llvm.{name}.with.overflow.i{bits}"),
                pair.into(),
                &[x.into(), y.into()],
            )?
            .into_struct_value();
        let result = em.b.build_extract_value(both, 0, "")?.into_int_value();
        let lost = em.b.build_extract_value(both, 1, "")?.into_int_value();
        Ok((result, lost))
    }

    /// [`Kernel::cast`], and whether the value does not fit the target: an integer narrowed
    /// past its range, or a float (or NaN) outside the integer's range.
    fn checked_cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DataType,
        to: DataType,
    ) -> CodegenResult<(BasicValueEnum<'ctx>, Option<IntValue<'ctx>>)> {
        if from.is_decimal() || to.is_decimal() {
            return self.decimal_cast(v, from, to);
        }
        if let Some(cast) = self.temporal_cast(v, from, to)? {
            return Ok(cast);
        }
        let value = self.cast(v, from, to)?;
        let b = &self.em.b;
        let lost = match (v, value) {
            (BasicValueEnum::IntValue(i), BasicValueEnum::IntValue(n))
                if from != DataType::Bool
                    && to != DataType::Bool
                    && n.get_type().get_bit_width() < i.get_type().get_bit_width() =>
            {
                let back = b.build_int_s_extend(n, i.get_type(), "")?;
                Some(b.build_int_compare(IntPredicate::NE, back, i, "")?)
            }
            (BasicValueEnum::FloatValue(x), BasicValueEnum::IntValue(n))
                if to != DataType::Bool =>
            {
                let bits = n.get_type().get_bit_width();
                let limit = 2f64.powi(bits as i32 - 1);
                let ft = x.get_type();
                // The range the rounded value must fall in (2^31 - 0.5 rounds to 2^31).
                let x = self.round_to_even(x)?;
                let low =
                    b.build_float_compare(FloatPredicate::OGE, x, ft.const_float(-limit), "")?;
                let high =
                    b.build_float_compare(FloatPredicate::OLT, x, ft.const_float(limit), "")?;
                Some(b.build_not(b.build_and(low, high, "")?, "")?)
            }
            _ => None,
        };
        Ok((value, lost))
    }

    pub fn cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DataType,
        to: DataType,
    ) -> CodegenResult<BasicValueEnum<'ctx>> {
        let em = &self.em;
        let b = &em.b;
        if from == to {
            return Ok(v);
        }
        if from.is_decimal() || to.is_decimal() {
            return Ok(self.decimal_cast(v, from, to)?.0);
        }
        if let Some((value, _)) = self.temporal_cast(v, from, to)? {
            return Ok(value);
        }
        let target = em.value_type(to);
        Ok(match (v, to) {
            (BasicValueEnum::IntValue(i), DataType::Bool) => b
                .build_int_compare(IntPredicate::NE, i, i.get_type().const_zero(), "")?
                .into(),
            (BasicValueEnum::FloatValue(x), DataType::Bool) => b
                .build_float_compare(FloatPredicate::UNE, x, x.get_type().const_zero(), "")?
                .into(),
            (BasicValueEnum::IntValue(i), DataType::F32 | DataType::F64) => {
                let ft = target.into_float_type();
                if from == DataType::Bool {
                    b.build_unsigned_int_to_float(i, ft, "")?.into()
                } else {
                    b.build_signed_int_to_float(i, ft, "")?.into()
                }
            }
            (BasicValueEnum::IntValue(i), _) => {
                let it = target.into_int_type();
                if from == DataType::Bool {
                    b.build_int_z_extend(i, it, "")?.into()
                } else {
                    let (from_bits, to_bits) = (i.get_type().get_bit_width(), it.get_bit_width());
                    if to_bits > from_bits {
                        b.build_int_s_extend(i, it, "")?.into()
                    } else if to_bits < from_bits {
                        b.build_int_truncate(i, it, "")?.into()
                    } else {
                        i.into()
                    }
                }
            }
            (BasicValueEnum::FloatValue(x), DataType::F32 | DataType::F64) => {
                b.build_float_cast(x, target.into_float_type(), "")?.into()
            }
            (BasicValueEnum::FloatValue(x), _) => self
                .saturating_float_to_int(x, target.into_int_type())?
                .into(),
            _ => return Err(invalid("cast of an unexpected value")),
        })
    }

    /// A date as the timestamp of its midnight (and whether it lies beyond the timestamps'
    /// ±292,000 years), a timestamp as its day or its time of day; `None` for other casts.
    #[allow(clippy::type_complexity)]
    fn temporal_cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DataType,
        to: DataType,
    ) -> CodegenResult<Option<(BasicValueEnum<'ctx>, Option<IntValue<'ctx>>)>> {
        let em = &self.em;
        let b = &em.b;
        let day = em.const_i64(date::MICROS_PER_DAY);
        let (value, lost) = match (from, to) {
            (DataType::Date, DataType::Timestamp) => {
                let days = b.build_int_s_extend(v.into_int_value(), em.i64(), "")?;
                let limit = i64::MAX / date::MICROS_PER_DAY;
                let high = b.build_int_compare(IntPredicate::SGT, days, em.const_i64(limit), "")?;
                let low = b.build_int_compare(IntPredicate::SLT, days, em.const_i64(-limit), "")?;
                let micros = b.build_int_mul(days, day, "")?;
                (micros.into(), Some(b.build_or(high, low, "")?))
            }
            (DataType::Timestamp, DataType::Date | DataType::Time) => {
                // Division rounding down and a remainder that is never negative, so instants
                // before 1970 fall on their own day.
                let micros = v.into_int_value();
                let quotient = b.build_int_signed_div(micros, day, "")?;
                let remainder = b.build_int_signed_rem(micros, day, "")?;
                let negative =
                    b.build_int_compare(IntPredicate::SLT, remainder, em.const_i64(0), "")?;
                if to == DataType::Date {
                    let borrow = b.build_int_z_extend(negative, em.i64(), "")?;
                    let days = b.build_int_sub(quotient, borrow, "")?;
                    (b.build_int_truncate(days, em.i32(), "")?.into(), None)
                } else {
                    let shifted = b.build_int_add(remainder, day, "")?;
                    (b.build_select(negative, shifted, remainder, "")?, None)
                }
            }
            _ => return Ok(None),
        };
        Ok(Some((value, lost)))
    }

    /// A conversion to or from a decimal, and whether the value does not fit (see
    /// [`Expr::cast_may_fail`]). Integers are decimals of scale 0; digits dropped round half
    /// away from zero, as in `tessera_storage::decimal`. A conversion from or to a decimal of
    /// more than 18 digits works in 128 bits.
    fn decimal_cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DataType,
        to: DataType,
    ) -> CodegenResult<(BasicValueEnum<'ctx>, Option<IntValue<'ctx>>)> {
        let em = &self.em;
        let b = &em.b;
        let f64t = em.ctx.f64_type();
        let work = if from.is_wide_decimal() || to.is_wide_decimal() {
            em.ctx.i128_type()
        } else {
            em.i64()
        };
        let from_scale = u32::from(from.decimal().map_or(0, |d| d.scale));
        match (v, to) {
            (BasicValueEnum::IntValue(i), _) => {
                let x = if i.get_type().get_bit_width() < work.get_bit_width() {
                    b.build_int_s_extend(i, work, "")?
                } else {
                    i
                };
                match to {
                    DataType::Decimal(target) => {
                        let to_scale = u32::from(target.scale);
                        let (raw, mut lost) = if to_scale > from_scale {
                            let factor = wide_power(work, to_scale - from_scale);
                            let (raw, lost) = self.checked_int(BinaryOp::Mul, x, factor)?;
                            (raw, Some(lost))
                        } else {
                            (self.divide_rounding(x, from_scale - to_scale)?, None)
                        };
                        let limit = decimal::power_of_ten_wide(u32::from(target.precision));
                        let outside = self.beyond(raw, limit)?;
                        lost = self.either(lost, Some(outside))?;
                        // Within the target's precision, so within its width.
                        let raw = narrowed(em, raw, em.value_type(to).into_int_type())?;
                        Ok((raw.into(), lost))
                    }
                    DataType::F32 | DataType::F64 => {
                        let x = self.int_to_f64(x)?;
                        let unit = f64t.const_float(decimal::power_of_ten_wide(from_scale) as f64);
                        let value = b.build_float_div(x, unit, "")?;
                        let value = if to == DataType::F32 {
                            b.build_float_trunc(value, em.ctx.f32_type(), "")?
                        } else {
                            value
                        };
                        Ok((value.into(), None))
                    }
                    DataType::I64 | DataType::I32 => {
                        let whole = self.divide_rounding(x, from_scale)?;
                        let target = em.value_type(to).into_int_type();
                        if target.get_bit_width() == work.get_bit_width() {
                            return Ok((whole.into(), None));
                        }
                        let narrow = b.build_int_truncate(whole, target, "")?;
                        let back = b.build_int_s_extend(narrow, work, "")?;
                        let lost = b.build_int_compare(IntPredicate::NE, back, whole, "")?;
                        Ok((narrow.into(), Some(lost)))
                    }
                    _ => Err(invalid("a decimal cast to a type other than a number")),
                }
            }
            (BasicValueEnum::FloatValue(x), DataType::Decimal(target)) => {
                let x = if x.get_type() == f64t {
                    x
                } else {
                    b.build_float_ext(x, f64t, "")?
                };
                let unit =
                    f64t.const_float(decimal::power_of_ten_wide(u32::from(target.scale)) as f64);
                let scaled = b.build_float_mul(x, unit, "")?;
                let rounded = em
                    .call_intrinsic("llvm.round.f64", f64t.into(), &[scaled.into()])?
                    .into_float_value();
                let limit = 10f64.powi(i32::from(target.precision));
                // Ordered comparisons: NaN is outside too.
                let above = b.build_float_compare(
                    FloatPredicate::OGT,
                    rounded,
                    f64t.const_float(-limit),
                    "",
                )?;
                let below = b.build_float_compare(
                    FloatPredicate::OLT,
                    rounded,
                    f64t.const_float(limit),
                    "",
                )?;
                let lost = b.build_not(b.build_and(above, below, "")?, "")?;
                let raw = if target.is_wide() {
                    self.integral_f64_to_i128(rounded)?
                } else {
                    self.saturating_float_to_int_rounded(rounded, em.i64())?
                };
                Ok((raw.into(), Some(lost)))
            }
            _ => Err(invalid("a decimal cast of an unexpected value")),
        }
    }

    /// A 64- or 128-bit integer as the nearest `f64`, ties to even (as Rust's `as f64`, which
    /// constant folding uses). The GPU has no 128-bit conversion: a magnitude whose high word
    /// is not zero is shifted to its top 64 bits (a funnel shift of its two words), any bit
    /// shifted out kept as the lowest one (it only breaks ties, far below the 53 bits a float
    /// keeps), converted, and scaled back up by the power of two.
    fn int_to_f64(&self, x: IntValue<'ctx>) -> CodegenResult<FloatValue<'ctx>> {
        let em = &self.em;
        let b = &em.b;
        let f64t = em.ctx.f64_type();
        let i64t = em.i64();
        if x.get_type().get_bit_width() <= 64 {
            return Ok(b.build_signed_int_to_float(x, f64t, "")?);
        }
        let ty = x.get_type();
        let negative = b.build_int_compare(IntPredicate::SLT, x, ty.const_zero(), "")?;
        let magnitude = b
            .build_select(negative, b.build_int_neg(x, "")?, x, "")?
            .into_int_value();
        let low = b.build_int_truncate(magnitude, i64t, "")?;
        let high = b.build_right_shift(magnitude, ty.const_int(64, false), false, "")?;
        let high = b.build_int_truncate(high, i64t, "")?;
        let call = |name: &str, args: &[BasicValueEnum<'ctx>]| -> CodegenResult<IntValue<'ctx>> {
            Ok(em.call_intrinsic(name, i64t.into(), args)?.into_int_value())
        };
        // Leading zeros of the high word: 64 when it is zero, and then the low word converts
        // alone.
        let zeros = call("llvm.ctlz.i64", &[high.into(), em.i1().const_zero().into()])?;
        let top = call("llvm.fshl.i64", &[high.into(), low.into(), zeros.into()])?;
        let dropped = b.build_left_shift(low, zeros, "")?;
        let sticky = b.build_int_compare(IntPredicate::NE, dropped, i64t.const_zero(), "")?;
        let top = b.build_or(top, b.build_int_z_extend(sticky, i64t, "")?, "")?;
        let large = b.build_unsigned_int_to_float(top, f64t, "")?;
        let scale = math::pow2(em, b.build_int_sub(em.const_i64(64), zeros, "")?)?;
        let large = b.build_float_mul(large, scale, "")?;
        let small = b.build_unsigned_int_to_float(low, f64t, "")?;
        let fits = b.build_int_compare(IntPredicate::EQ, high, i64t.const_zero(), "")?;
        let value = b.build_select(fits, small, large, "")?.into_float_value();
        let negated = b.build_float_neg(value, "")?;
        Ok(b.build_select(negative, negated, value, "")?
            .into_float_value())
    }

    /// An integral `f64` within 2^127 as a 128-bit integer, exactly: within 2^63 through a
    /// 64-bit integer; beyond, its high word is the floor of its quotient by 2^64 and its low
    /// word the remainder (exact, since such a float is a multiple of 2^11).
    fn integral_f64_to_i128(&self, x: FloatValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        let em = &self.em;
        let b = &em.b;
        let f64t = em.ctx.f64_type();
        let i128t = em.ctx.i128_type();
        let small = self.saturating_float_to_int_rounded(x, em.i64())?;
        let small = b.build_int_s_extend(small, i128t, "")?;
        let magnitude = em
            .call_intrinsic("llvm.fabs.f64", f64t.into(), &[x.into()])?
            .into_float_value();
        let within = b.build_float_compare(
            FloatPredicate::OLT,
            magnitude,
            f64t.const_float(2f64.powi(63)),
            "",
        )?;
        let two_64 = f64t.const_float(2f64.powi(64));
        let quotient = b.build_float_div(x, two_64, "")?;
        let high = em
            .call_intrinsic("llvm.floor.f64", f64t.into(), &[quotient.into()])?
            .into_float_value();
        let low = b.build_float_sub(x, b.build_float_mul(high, two_64, "")?, "")?;
        let high = self.saturating_float_to_int_rounded(high, em.i64())?;
        let name = format!("llvm.fptoui.sat.i64.{}", float_suffix(f64t));
        let low = em
            .call_intrinsic(&name, em.i64().into(), &[low.into()])?
            .into_int_value();
        let high = b.build_int_s_extend(high, i128t, "")?;
        let high = b.build_left_shift(high, i128t.const_int(64, false), "")?;
        let large = b.build_or(high, b.build_int_z_extend(low, i128t, "")?, "")?;
        Ok(b.build_select(within, small, large, "")?.into_int_value())
    }

    /// `x / 10^digits` rounded half away from zero (`x` itself for no digits).
    fn divide_rounding(&self, x: IntValue<'ctx>, digits: u32) -> CodegenResult<IntValue<'ctx>> {
        if digits == 0 {
            return Ok(x);
        }
        let em = &self.em;
        let b = &em.b;
        let ty = x.get_type();
        let divisor = wide_power(ty, digits);
        let quotient = b.build_int_signed_div(x, divisor, "")?;
        // A 128-bit division is a loop on the GPU: the remainder is taken from the quotient
        // rather than by a second one.
        let remainder = if ty.get_bit_width() > 64 {
            b.build_int_sub(x, b.build_int_mul(quotient, divisor, "")?, "")?
        } else {
            b.build_int_signed_rem(x, divisor, "")?
        };
        let zero = ty.const_zero();
        let negative = b.build_int_compare(IntPredicate::SLT, remainder, zero, "")?;
        let magnitude = b.build_select(negative, b.build_int_neg(remainder, "")?, remainder, "")?;
        // |remainder| < 10^18 (10^38 in 128 bits), so twice it stays in range.
        let twice = b.build_int_add(magnitude.into_int_value(), magnitude.into_int_value(), "")?;
        let half_or_more = b.build_int_compare(IntPredicate::SGE, twice, divisor, "")?;
        let x_negative = b.build_int_compare(IntPredicate::SLT, x, zero, "")?;
        let step = b.build_select(x_negative, ty.const_all_ones(), ty.const_int(1, false), "")?;
        let step = b.build_select(half_or_more, step, zero.into(), "")?;
        Ok(b.build_int_add(quotient, step.into_int_value(), "")?)
    }

    /// Whether `|x| >= limit`.
    fn beyond(&self, x: IntValue<'ctx>, limit: i128) -> CodegenResult<IntValue<'ctx>> {
        let em = &self.em;
        let ty = x.get_type();
        let high =
            em.b.build_int_compare(IntPredicate::SGE, x, int_constant(ty, limit), "")?;
        let low =
            em.b.build_int_compare(IntPredicate::SLE, x, int_constant(ty, -limit), "")?;
        Ok(em.b.build_or(high, low, "")?)
    }

    /// Float to integer: rounded to the nearest integer, ties to even (as DuckDB and PostgreSQL
    /// cast), then saturating at the type's bounds and NaN as 0 (never undefined; the overflow
    /// check of [`Kernel::checked_cast`] reports a value out of range).
    fn saturating_float_to_int(
        &self,
        x: FloatValue<'ctx>,
        ty: inkwell::types::IntType<'ctx>,
    ) -> CodegenResult<IntValue<'ctx>> {
        let rounded = self.round_to_even(x)?;
        self.saturating_float_to_int_rounded(rounded, ty)
    }

    /// An integral float to integer, saturating at the type's bounds and NaN as 0.
    fn saturating_float_to_int_rounded(
        &self,
        rounded: FloatValue<'ctx>,
        ty: inkwell::types::IntType<'ctx>,
    ) -> CodegenResult<IntValue<'ctx>> {
        let em = &self.em;
        let source = rounded.get_type();
        let name = format!(
            "llvm.fptosi.sat.i{}.{}",
            ty.get_bit_width(),
            float_suffix(source)
        );
        Ok(em
            .call_intrinsic(&name, ty.into(), &[rounded.into()])?
            .into_int_value())
    }

    /// `x` rounded to the nearest integer, ties to even.
    fn round_to_even(&self, x: FloatValue<'ctx>) -> CodegenResult<FloatValue<'ctx>> {
        let em = &self.em;
        let source = x.get_type();
        let name = format!("llvm.roundeven.{}", float_suffix(source));
        Ok(em
            .call_intrinsic(&name, source.into(), &[x.into()])?
            .into_float_value())
    }

    fn call(
        &self,
        function: Function,
        args: &[BasicValueEnum<'ctx>],
        ty: DataType,
    ) -> CodegenResult<BasicValueEnum<'ctx>> {
        let em = &self.em;
        let b = &em.b;
        let [arg] = args else {
            return Err(invalid("built-in functions take one argument"));
        };
        let f64t = em.ctx.f64_type();
        // Floating functions compute in f64 and round to f32 at the end when the type is f32.
        let as_f64 = |v: BasicValueEnum<'ctx>| -> CodegenResult<FloatValue<'ctx>> {
            Ok(b.build_float_cast(v.into_float_value(), f64t, "")?)
        };
        let finish = |x: FloatValue<'ctx>| -> CodegenResult<BasicValueEnum<'ctx>> {
            Ok(
                b.build_float_cast(x, em.value_type(ty).into_float_type(), "")?
                    .into(),
            )
        };
        match function {
            Function::Abs => Ok(match *arg {
                BasicValueEnum::IntValue(i) => {
                    let negative =
                        b.build_int_compare(IntPredicate::SLT, i, i.get_type().const_zero(), "")?;
                    let negated = b.build_int_neg(i, "")?;
                    b.build_select(negative, negated, i, "")?
                }
                BasicValueEnum::FloatValue(x) => {
                    let name = if x.get_type() == em.ctx.f32_type() {
                        "llvm.fabs.f32"
                    } else {
                        "llvm.fabs.f64"
                    };
                    em.call_intrinsic(name, x.get_type().into(), &[x.into()])?
                }
                _ => return Err(invalid("abs of an unexpected value")),
            }),
            Function::Sqrt => {
                let x = as_f64(*arg)?;
                finish(
                    em.call_intrinsic("llvm.sqrt.f64", f64t.into(), &[x.into()])?
                        .into_float_value(),
                )
            }
            Function::Exp => finish(math::exp(em, as_f64(*arg)?)?),
            Function::Ln => finish(math::ln(em, as_f64(*arg)?)?),
            Function::Sigmoid => {
                let x = as_f64(*arg)?;
                let e = math::exp(em, b.build_float_neg(x, "")?)?;
                let one = f64t.const_float(1.0);
                finish(b.build_float_div(one, b.build_float_add(one, e, "")?, "")?)
            }
            Function::Year | Function::Month | Function::Day => {
                let (year, month, day) = self.civil_from_days(arg.into_int_value())?;
                Ok(match function {
                    Function::Year => year,
                    Function::Month => month,
                    _ => day,
                }
                .into())
            }
        }
    }

    /// Year, month and day (as `i32`) of a day number, by Hinnant's civil-from-days.
    fn civil_from_days(
        &self,
        days: IntValue<'ctx>,
    ) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>)> {
        let em = &self.em;
        let b = &em.b;
        let c = |v: i64| em.const_i64(v);
        let z = b.build_int_add(b.build_int_s_extend(days, em.i64(), "")?, c(719_468), "")?;
        let negative = b.build_int_compare(IntPredicate::SLT, z, c(0), "")?;
        let adjusted = b
            .build_select(negative, b.build_int_sub(z, c(146_096), "")?, z, "")?
            .into_int_value();
        let era = b.build_int_signed_div(adjusted, c(146_097), "era")?;
        let doe = b.build_int_sub(z, b.build_int_mul(era, c(146_097), "")?, "doe")?;
        let yoe = b.build_int_sub(doe, b.build_int_signed_div(doe, c(1460), "")?, "")?;
        let yoe = b.build_int_add(yoe, b.build_int_signed_div(doe, c(36_524), "")?, "")?;
        let yoe = b.build_int_sub(yoe, b.build_int_signed_div(doe, c(146_096), "")?, "")?;
        let yoe = b.build_int_signed_div(yoe, c(365), "yoe")?;
        let doy = b.build_int_add(
            b.build_int_mul(c(365), yoe, "")?,
            b.build_int_signed_div(yoe, c(4), "")?,
            "",
        )?;
        let doy = b.build_int_sub(doy, b.build_int_signed_div(yoe, c(100), "")?, "")?;
        let doy = b.build_int_sub(doe, doy, "doy")?;
        let mp = b.build_int_signed_div(
            b.build_int_add(b.build_int_mul(c(5), doy, "")?, c(2), "")?,
            c(153),
            "mp",
        )?;
        let day = b.build_int_sub(
            doy,
            b.build_int_signed_div(
                b.build_int_add(b.build_int_mul(c(153), mp, "")?, c(2), "")?,
                c(5),
                "",
            )?,
            "",
        )?;
        let day = b.build_int_add(day, c(1), "day")?;
        let early = b.build_int_compare(IntPredicate::SLT, mp, c(10), "")?;
        let month = b
            .build_select(
                early,
                b.build_int_add(mp, c(3), "")?,
                b.build_int_sub(mp, c(9), "")?,
                "month",
            )?
            .into_int_value();
        let year = b.build_int_add(yoe, b.build_int_mul(era, c(400), "")?, "")?;
        let january_or_february = b.build_int_compare(IntPredicate::SLE, month, c(2), "")?;
        let year = b.build_int_add(
            year,
            b.build_int_z_extend(january_or_february, em.i64(), "")?,
            "year",
        )?;
        let narrow = |v: IntValue<'ctx>| b.build_int_truncate(v, em.i32(), "");
        Ok((narrow(year)?, narrow(month)?, narrow(day)?))
    }
}

fn invalid(message: &str) -> CodegenError {
    CodegenError::Invalid(message.to_string())
}

/// An expression for the host to evaluate over result rows.
pub(super) fn host_expr(expr: &Expr) -> Result<HostExpr, Diagnostic> {
    Ok(match &expr.kind {
        ExprKind::Column(id) => HostExpr::Column(id.0),
        ExprKind::Literal(value) => HostExpr::Literal(value.clone()),
        ExprKind::Constant { .. } => {
            return Err(Diagnostic::internal(
                expr.span,
                "a kernel's constant reached a step on the host",
            ))
        }
        // A string a `case` produces: the host holds strings as text.
        ExprKind::StrCode(code) if code.bound == StrBound::Exact => {
            HostExpr::Literal(Value::Str(code.text.as_str().into()))
        }
        ExprKind::StrCode(_) => {
            return Err(Diagnostic::unsupported(
                expr.span,
                "comparing a string of a grouped result with a literal is not supported yet",
            )
            .with_hint("filter before grouping"))
        }
        ExprKind::Unary { op, operand } => HostExpr::Unary {
            op: crate::expr::scalar_unary(*op),
            operand: Box::new(host_expr(operand)?),
        },
        // The host holds a grouped result's strings as text: a comparison with a literal's
        // code is again one with the literal.
        ExprKind::Binary { op, left, right } if matches!(right.kind, ExprKind::StrCode(_)) => {
            let ExprKind::StrCode(code) = &right.kind else {
                return Err(Diagnostic::internal(expr.span, "a string code"));
            };
            let op = match (op, code.bound) {
                (BinaryOp::Eq, _) => scalar::Binary::Eq,
                (BinaryOp::Ne, _) => scalar::Binary::Ne,
                (BinaryOp::Lt, StrBound::Lower) => scalar::Binary::Lt,
                (BinaryOp::Lt, StrBound::Upper) => scalar::Binary::Le,
                (BinaryOp::Ge, StrBound::Upper) => scalar::Binary::Gt,
                (BinaryOp::Ge, StrBound::Lower) => scalar::Binary::Ge,
                (other, _) => {
                    return Err(Diagnostic::internal(
                        expr.span,
                        format!("`{}` with a string code", other.symbol()),
                    ))
                }
            };
            HostExpr::Binary {
                op,
                left: Box::new(host_expr(left)?),
                right: Box::new(HostExpr::Literal(Value::Str(code.text.as_str().into()))),
            }
        }
        ExprKind::Binary { op, left, right } => HostExpr::Binary {
            op: crate::expr::scalar_binary(*op),
            left: Box::new(host_expr(left)?),
            right: Box::new(host_expr(right)?),
        },
        ExprKind::Cast(operand) => HostExpr::Cast {
            ty: expr.ty,
            operand: Box::new(host_expr(operand)?),
        },
        ExprKind::Call { function, args } => HostExpr::Call {
            function: *function,
            args: args.iter().map(host_expr).collect::<Result<_, _>>()?,
        },
        ExprKind::Case {
            branches,
            otherwise,
        } => HostExpr::Case {
            branches: branches
                .iter()
                .map(|(w, t)| Ok((host_expr(w)?, host_expr(t)?)))
                .collect::<Result<_, Diagnostic>>()?,
            otherwise: otherwise
                .as_ref()
                .map(|o| host_expr(o).map(Box::new))
                .transpose()?,
        },
        ExprKind::IsNull { operand, negated } => HostExpr::IsNull {
            operand: Box::new(host_expr(operand)?),
            negated: *negated,
        },
        ExprKind::Matches {
            operand,
            kind,
            pattern,
            ..
        } => {
            let ExprKind::Literal(Value::Str(pattern)) = &pattern.kind else {
                return Err(Diagnostic::internal(expr.span, "a pattern on the host"));
            };
            HostExpr::Matches {
                operand: Box::new(host_expr(operand)?),
                kind: *kind,
                pattern: pattern.to_string(),
            }
        }
        ExprKind::Derived {
            operand, derived, ..
        } => HostExpr::Derived {
            operand: Box::new(host_expr(operand)?),
            function: derived.column.clone(),
        },
        ExprKind::Rank { .. } => {
            return Err(Diagnostic::unsupported(
                expr.span,
                "comparing two string columns of a grouped or sorted result is not supported yet",
            )
            .with_hint("compare them before grouping"))
        }
    })
}

/// The parameters `exprs` read: their constants and the per-code tables of their string
/// functions, ranks and patterns.
pub(super) fn expression_params(
    query: &crate::physical::PhysicalQuery,
    exprs: &[&Expr],
) -> Vec<Param> {
    let mut params = Vec::new();
    for expr in exprs {
        expr.walk(&mut |e| {
            if let ExprKind::Constant { slot, .. } = e.kind {
                params.extend(constant_param(query, slot, e.ty));
            }
            params.extend(per_code_param(query, e));
        });
    }
    params
}

/// The kernel parameter carrying constant `slot` of `query`, of type `ty` (`None` for a
/// pattern, which kernels read through the answers computed from it, `Param::Matches`).
fn constant_param(
    query: &crate::physical::PhysicalQuery,
    slot: usize,
    ty: DataType,
) -> Option<Param> {
    match query.constants.get(slot)? {
        Constant::StrCode(code) => Some(Param::StrCode {
            table: code.dictionary.table.clone(),
            column: code.dictionary.column.clone(),
            slot: slot as u32,
            bound: code.bound,
        }),
        Constant::Value(Value::Str(_)) => None,
        Constant::Value(_) => Some(Param::Literal {
            slot: slot as u32,
            ty,
        }),
    }
}

/// The parameter holding the per-code table an [`ExprKind::Rank`], [`ExprKind::Derived`] or
/// [`ExprKind::Matches`] reads (`None` for other expressions).
fn per_code_param(query: &crate::physical::PhysicalQuery, expr: &Expr) -> Option<Param> {
    match &expr.kind {
        ExprKind::Rank {
            operand,
            among,
            entries,
        } => {
            let from = code_origin(query, operand)?;
            Some(Param::Ranks {
                from: (from.table, from.column),
                among: (among.table.clone(), among.column.clone()),
                entries: *entries,
            })
        }
        ExprKind::Derived {
            operand,
            derived,
            entries,
        } => {
            let from = code_origin(query, operand)?;
            Some(Param::Derived {
                from: (from.table, from.column),
                derived: (derived.table.clone(), derived.column.clone()),
                entries: *entries,
            })
        }
        ExprKind::Matches {
            operand,
            kind,
            pattern,
            entries,
        } => {
            let of = code_origin(query, operand)?;
            let ExprKind::Constant { slot, .. } = pattern.kind else {
                return None;
            };
            Some(Param::Matches {
                table: of.table,
                column: of.column,
                kind: *kind,
                slot: slot as u32,
                entries: *entries,
            })
        }
        _ => None,
    }
}

/// The column whose dictionary the codes of string expression `operand` index
/// ([`Expr::code_dictionary`]), a kernel constant's among `query`'s constants.
pub(super) fn code_origin(
    query: &crate::physical::PhysicalQuery,
    operand: &Expr,
) -> Option<BaseColumn> {
    operand.code_dictionary(
        &|c| query.columns.get(c).origin.clone(),
        &|slot| match query.constants.get(slot) {
            Some(Constant::StrCode(code)) => Some(code.dictionary.clone()),
            _ => None,
        },
    )
}

/// The suffix LLVM's intrinsics give a float type: `f32` or `f64`.
fn float_suffix(ty: inkwell::types::FloatType<'_>) -> &'static str {
    if ty == ty.get_context().f32_type() {
        "f32"
    } else {
        "f64"
    }
}

/// The 128-bit constant `raw`.
fn wide_constant<'ctx>(em: &tessera_runtime::Emitter<'ctx, '_>, raw: i128) -> IntValue<'ctx> {
    int_constant(em.ctx.i128_type(), raw)
}

/// `10^digits` as a constant of `ty`.
fn wide_power<'ctx>(ty: inkwell::types::IntType<'ctx>, digits: u32) -> IntValue<'ctx> {
    int_constant(ty, decimal::power_of_ten_wide(digits))
}

/// `x` truncated to `ty` when it is wider (its value known to fit).
fn narrowed<'ctx>(
    em: &tessera_runtime::Emitter<'ctx, '_>,
    x: IntValue<'ctx>,
    ty: inkwell::types::IntType<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    if x.get_type().get_bit_width() > ty.get_bit_width() {
        Ok(em.b.build_int_truncate(x, ty, "")?)
    } else {
        Ok(x)
    }
}
