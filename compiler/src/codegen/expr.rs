//! Expressions, evaluated per item of a tile in registers. Each value carries an optional
//! validity bit (absent when it cannot be null), and operations follow SQL: arithmetic and
//! comparisons with a null are null, `and`/`or` use three-valued logic, and a filter keeps a row
//! only when its predicate is true. Integer `%` by zero is null rather than a trap.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tessera_grammar::ast::{BinaryOp, UnaryOp};
use tessera_grammar::Diagnostic;
use tessera_runtime::emit::Item;
use tessera_runtime::primitives::math;
use tessera_runtime::program::{HostExpr, Param};
use tessera_runtime::{CodegenError, CodegenResult};
use tessera_stdlib::Function;
use tessera_storage::{DataType, Value};

use crate::expr::{Expr, ExprKind};

use super::kernel::Kernel;

/// A value in registers; booleans are `i1`.
#[derive(Clone, Copy)]
pub(super) struct Val<'ctx> {
    pub value: BasicValueEnum<'ctx>,
    /// `None`: never null.
    pub valid: Option<IntValue<'ctx>>,
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    /// The value of `expr` for one item.
    pub fn eval(&self, expr: &Expr, item: Item<'ctx>) -> CodegenResult<Val<'ctx>> {
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
                Ok(Val { value, valid })
            }
            ExprKind::Literal(value) => Ok(Val {
                value: self.constant(value, expr.ty)?,
                valid: None,
            }),
            ExprKind::StrCode(code) => {
                let param = self.param(&Param::StrCode {
                    table: code.dictionary.table.clone(),
                    column: code.dictionary.column.clone(),
                    text: code.text.clone(),
                    bound: code.bound,
                })?;
                let value =
                    em.b.build_int_truncate(param.into_int_value(), em.i32(), "code")?;
                Ok(Val {
                    value: value.into(),
                    valid: None,
                })
            }
            ExprKind::Unary { op, operand } => {
                let v = self.eval(operand, item)?;
                let value: BasicValueEnum = match (op, v.value) {
                    (UnaryOp::Not, BasicValueEnum::IntValue(b)) => em.b.build_not(b, "")?.into(),
                    (UnaryOp::Neg, BasicValueEnum::IntValue(i)) => {
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
                })
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.eval(left, item)?;
                let r = self.eval(right, item)?;
                match op {
                    BinaryOp::And | BinaryOp::Or => self.logical(*op, l, r),
                    op if op.is_comparison() => {
                        let value = self.compare(*op, l.value, r.value)?;
                        Ok(Val {
                            value: value.into(),
                            valid: self.both_valid(l.valid, r.valid)?,
                        })
                    }
                    op => self.arithmetic(*op, l, r),
                }
            }
            ExprKind::Cast(operand) => {
                let v = self.eval(operand, item)?;
                Ok(Val {
                    value: self.cast(v.value, operand.ty, expr.ty)?,
                    valid: v.valid,
                })
            }
            ExprKind::Call { function, args } => {
                let mut valid = None;
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    let v = self.eval(arg, item)?;
                    valid = self.both_valid(valid, v.valid)?;
                    values.push(v.value);
                }
                Ok(Val {
                    value: self.call(*function, &values, expr.ty)?,
                    valid,
                })
            }
            ExprKind::Case {
                branches,
                otherwise,
            } => {
                let (mut value, mut valid) = match otherwise {
                    Some(otherwise) => {
                        let v = self.eval(otherwise, item)?;
                        (v.value, v.valid)
                    }
                    // No `else`: null when no branch matches.
                    None => (
                        self.em.value_type(expr.ty).const_zero(),
                        Some(em.i1().const_zero()),
                    ),
                };
                for (when, then) in branches.iter().rev() {
                    let condition = self.truth_of(self.eval(when, item)?)?;
                    let then = self.eval(then, item)?;
                    value = em.b.build_select(condition, then.value, value, "")?;
                    valid = match (then.valid, valid) {
                        (None, None) => None,
                        (a, b) => {
                            let a = a.unwrap_or(em.i1().const_all_ones());
                            let b = b.unwrap_or(em.i1().const_all_ones());
                            Some(em.b.build_select(condition, a, b, "")?.into_int_value())
                        }
                    };
                }
                Ok(Val { value, valid })
            }
            ExprKind::IsNull { operand, negated } => {
                let v = self.eval(operand, item)?;
                let is_valid = v.valid.unwrap_or(em.i1().const_all_ones());
                let value = if *negated {
                    is_valid
                } else {
                    em.b.build_not(is_valid, "")?
                };
                Ok(Val {
                    value: value.into(),
                    valid: None,
                })
            }
        }
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
        if l.valid.is_none() && r.valid.is_none() {
            return Ok(Val {
                value: value.into(),
                valid: None,
            });
        }
        let all = self.em.i1().const_all_ones();
        let (lk, rk) = (l.valid.unwrap_or(all), r.valid.unwrap_or(all));
        // A known false decides `and`, a known true decides `or`, whatever the other side is.
        let (ld, rd) = if op == BinaryOp::And {
            (b.build_not(lv, "")?, b.build_not(rv, "")?)
        } else {
            (lv, rv)
        };
        let both = b.build_and(lk, rk, "")?;
        let left_decides = b.build_and(lk, ld, "")?;
        let right_decides = b.build_and(rk, rd, "")?;
        let valid = b.build_or(both, b.build_or(left_decides, right_decides, "")?, "")?;
        Ok(Val {
            value: value.into(),
            valid: Some(valid),
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

    fn arithmetic(&self, op: BinaryOp, l: Val<'ctx>, r: Val<'ctx>) -> CodegenResult<Val<'ctx>> {
        let em = &self.em;
        let b = &em.b;
        let mut valid = self.both_valid(l.valid, r.valid)?;
        let value: BasicValueEnum = match (l.value, r.value) {
            (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(y)) => match op {
                BinaryOp::Add => b.build_int_add(x, y, "")?.into(),
                BinaryOp::Sub => b.build_int_sub(x, y, "")?.into(),
                BinaryOp::Mul => b.build_int_mul(x, y, "")?.into(),
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
        Ok(Val { value, valid })
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

    /// Float to integer, saturating at the type's bounds and NaN as 0 (never undefined).
    fn saturating_float_to_int(
        &self,
        x: FloatValue<'ctx>,
        ty: inkwell::types::IntType<'ctx>,
    ) -> CodegenResult<IntValue<'ctx>> {
        let em = &self.em;
        let source = x.get_type();
        let name = format!(
            "llvm.fptosi.sat.i{}.{}",
            ty.get_bit_width(),
            if source == em.ctx.f32_type() {
                "f32"
            } else {
                "f64"
            }
        );
        let f = em.intrinsic(&name, ty.fn_type(&[source.into()], false));
        let call = em.b.build_call(f, &[x.into()], "")?;
        Ok(tessera_runtime::emit::basic(call.try_as_basic_value().basic())?.into_int_value())
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
                    let f = em.intrinsic(name, x.get_type().fn_type(&[x.get_type().into()], false));
                    let call = b.build_call(f, &[x.into()], "")?;
                    tessera_runtime::emit::basic(call.try_as_basic_value().basic())?
                }
                _ => return Err(invalid("abs of an unexpected value")),
            }),
            Function::Sqrt => {
                let x = as_f64(*arg)?;
                let f = em.intrinsic("llvm.sqrt.f64", f64t.fn_type(&[f64t.into()], false));
                let call = b.build_call(f, &[x.into()], "")?;
                finish(
                    tessera_runtime::emit::basic(call.try_as_basic_value().basic())?
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
        ExprKind::StrCode(_) => {
            return Err(Diagnostic::unsupported(
                expr.span,
                "comparing a string of a grouped result with a literal is not supported yet; filter before grouping",
            ))
        }
        ExprKind::Unary { op, operand } => HostExpr::Unary {
            op: op.symbol().to_string(),
            operand: Box::new(host_expr(operand)?),
        },
        ExprKind::Binary { op, left, right } => HostExpr::Binary {
            op: op.symbol().to_string(),
            left: Box::new(host_expr(left)?),
            right: Box::new(host_expr(right)?),
        },
        ExprKind::Cast(operand) => HostExpr::Cast {
            ty: expr.ty,
            operand: Box::new(host_expr(operand)?),
        },
        ExprKind::Call { function, args } => HostExpr::Call {
            function: function.name().to_string(),
            args: args.iter().map(host_expr).collect::<Result<_, _>>()?,
        },
        ExprKind::Case { branches, otherwise } => HostExpr::Case {
            branches: branches
                .iter()
                .map(|(w, t)| Ok((host_expr(w)?, host_expr(t)?)))
                .collect::<Result<_, Diagnostic>>()?,
            otherwise: otherwise.as_ref().map(|o| host_expr(o).map(Box::new)).transpose()?,
        },
        ExprKind::IsNull { operand, negated } => HostExpr::IsNull {
            operand: Box::new(host_expr(operand)?),
            negated: *negated,
        },
    })
}
