//! Typing of scalar expressions. Integer arithmetic is done in 64 bits (so sums and products of
//! 32-bit columns cannot overflow; `%` of 32-bit values stays 32-bit, as a remainder is smaller
//! than its divisor), `/` divides as floating point, comparisons convert both
//! sides to a common type, and an integer literal compared with a 32-bit column stays 32-bit
//! when it fits, so the comparison costs nothing extra on the device.

use tessera_grammar::ast::{
    self, BinaryOp, ExprKind as AstExpr, IntervalUnit, LiteralValue, UnaryOp,
};
use tessera_grammar::{closest_name, Diagnostic, Span};
use tessera_stdlib::{Aggregate, Function};
use tessera_storage::derived::{case_strings_name, literal_strings_name, LITERAL_TABLE};
use tessera_storage::{date, DataType, Value};

use crate::columns::BaseColumn;
use crate::expr::{mirror, Expr, ExprKind, MatchKind, StrBound, StrCode};

use super::decimals;
use super::declarations::resolve_type;
use super::scope::PipelineContext;
use super::{Analyzer, Result};

/// The string tests written as functions (`like` is an operator).
const STRING_MATCHES: [MatchKind; 3] = [
    MatchKind::StartsWith,
    MatchKind::EndsWith,
    MatchKind::Contains,
];

/// The string functions, computed per dictionary entry (`Analyzer::string_function`).
const STRING_FUNCTIONS: [&str; 5] = ["substring", "upper", "lower", "length", "concat"];

/// An operand of a comparison: strings literals stay text until we know which column's
/// dictionary they are compared with.
pub(super) enum Operand {
    Value(Expr),
    Text(String, Span),
}

impl Analyzer<'_> {
    /// An expression that must be a `bool` (a `where` condition, a `case` test).
    pub(super) fn condition(
        &mut self,
        expr: &ast::Expr,
        context: &PipelineContext,
        what: &str,
    ) -> Result<Expr> {
        let typed = self.value(expr, context)?.adopt(DataType::Bool);
        if typed.ty != DataType::Bool {
            return Err(Diagnostic::type_error(
                expr.span,
                format!(
                    "{what} needs a `bool` condition, but this is `{}`",
                    typed.ty
                ),
            )
            .with_hint("compare it with something, e.g. `x > 0`"));
        }
        Ok(typed)
    }

    /// A scalar expression (no aggregates).
    pub(super) fn value(&mut self, expr: &ast::Expr, context: &PipelineContext) -> Result<Expr> {
        match self.operand(expr, context)? {
            Operand::Value(typed) => Ok(typed),
            Operand::Text(_, span) => Err(Diagnostic::unsupported(
                span,
                "a string literal can only be compared with a string column",
            )
            .with_hint("strings are dictionary-encoded columns; compare one with `==`, `<`, `between` or `in`")),
        }
    }

    pub(super) fn operand(
        &mut self,
        expr: &ast::Expr,
        context: &PipelineContext,
    ) -> Result<Operand> {
        let span = expr.span;
        let typed = match &expr.kind {
            AstExpr::Literal(literal) => return self.literal(literal),
            AstExpr::Column { qualifier, name } => {
                let id = self.resolve(qualifier.as_ref(), name, context)?;
                Expr::column(id, &self.columns, span)
            }
            AstExpr::Unary { op, operand } => self.unary(*op, operand, span, context)?,
            AstExpr::Binary {
                op: op @ (BinaryOp::Add | BinaryOp::Sub),
                left,
                right,
            } if interval_of(right).is_some()
                || (*op == BinaryOp::Add && interval_of(left).is_some()) =>
            {
                let (date, (count, unit)) = match interval_of(right) {
                    Some(interval) => (left, interval),
                    None => (right, interval_of(left).unwrap_or((0, IntervalUnit::Day))),
                };
                let count = if *op == BinaryOp::Sub {
                    count.checked_neg().unwrap_or(i64::MAX)
                } else {
                    count
                };
                self.shift_date(date, count, unit, span, context)?
            }
            AstExpr::Binary { op, left, right } => {
                let left = self.operand(left, context)?;
                let right = self.operand(right, context)?;
                self.binary(*op, left, right, span)?
            }
            AstExpr::Between {
                expr: tested,
                low,
                high,
                negated,
            } => {
                let tested = self.value(tested, context)?;
                let low = self.operand(low, context)?;
                let high = self.operand(high, context)?;
                let lower = self.binary(BinaryOp::Ge, Operand::Value(tested.clone()), low, span)?;
                let upper = self.binary(BinaryOp::Le, Operand::Value(tested), high, span)?;
                negate_if(
                    *negated,
                    Expr::binary(BinaryOp::And, lower, upper, DataType::Bool, span),
                )
            }
            AstExpr::InList {
                expr: tested,
                list,
                negated,
            } => {
                let tested = self.value(tested, context)?;
                let mut any: Option<Expr> = None;
                for item in list {
                    let item = self.operand(item, context)?;
                    let equal =
                        self.binary(BinaryOp::Eq, Operand::Value(tested.clone()), item, span)?;
                    any = Some(match any {
                        None => equal,
                        Some(previous) => {
                            Expr::binary(BinaryOp::Or, previous, equal, DataType::Bool, span)
                        }
                    });
                }
                let any = any.unwrap_or_else(|| Expr::boolean(false, span));
                negate_if(*negated, any)
            }
            AstExpr::Like {
                expr: tested,
                pattern,
                negated,
            } => negate_if(
                *negated,
                self.matches(MatchKind::Like, tested, pattern, span, context)?,
            ),
            AstExpr::IsNull {
                expr: tested,
                negated,
            } => {
                let operand = self.value(tested, context)?;
                Expr::new(
                    ExprKind::IsNull {
                        operand: Box::new(operand),
                        negated: *negated,
                    },
                    DataType::Bool,
                    false,
                    span,
                )
            }
            AstExpr::Case {
                branches,
                otherwise,
            } => self.case(branches, otherwise.as_deref(), span, context)?,
            AstExpr::Cast { expr: operand, ty } => {
                let operand = self.value(operand, context)?;
                let target = resolve_type(ty)?;
                check_cast(operand.ty, target, span)?;
                if operand.ty == target {
                    operand
                } else {
                    Expr::new(
                        ExprKind::Cast(Box::new(operand.clone())),
                        target,
                        operand.nullable,
                        span,
                    )
                }
            }
            AstExpr::Call {
                function,
                args,
                distinct,
            } => {
                if *distinct && Aggregate::from_name(&function.name).is_none() {
                    return Err(Diagnostic::type_error(
                        span,
                        format!("`{}` is not an aggregate: `distinct` is written only in `count(distinct x)`", function.name),
                    ));
                }
                self.call(function, args, span, context)?
            }
        };
        Ok(Operand::Value(typed))
    }

    fn literal(&mut self, literal: &ast::Literal) -> Result<Operand> {
        let span = literal.span;
        let typed = match &literal.value {
            LiteralValue::Int(i) => Expr::literal(Value::Int(*i), DataType::I64, span),
            LiteralValue::Float(x) => Expr::literal(Value::Float(*x), DataType::F64, span),
            LiteralValue::Bool(b) => Expr::boolean(*b, span),
            LiteralValue::Str(text) => return Ok(Operand::Text(text.clone(), span)),
            LiteralValue::Temporal(text) => temporal_literal(text, span)?,
            LiteralValue::Interval { .. } => {
                return Err(Diagnostic::type_error(
                    span,
                    "an interval can only be added to or subtracted from a date",
                )
                .with_hint("write `d + 90 days` or `@1994-01-01 - 1 year`"))
            }
            // Typed by what it meets (`Expr::adopt`); alone it is an `i32`, as in DuckDB.
            LiteralValue::Null => Expr::null(DataType::I32, span),
        };
        Ok(Operand::Value(typed))
    }

    fn unary(
        &mut self,
        op: UnaryOp,
        operand: &ast::Expr,
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        // Fold `-literal` at once, so that `x > -5` compares with a literal like `x > 5` does.
        if op == UnaryOp::Neg {
            if let AstExpr::Literal(ast::Literal {
                value: LiteralValue::Int(i),
                ..
            }) = operand.kind
            {
                return Ok(Expr::literal(
                    Value::Int(i.wrapping_neg()),
                    DataType::I64,
                    span,
                ));
            }
            if let AstExpr::Literal(ast::Literal {
                value: LiteralValue::Float(x),
                ..
            }) = operand.kind
            {
                return Ok(Expr::literal(Value::Float(-x), DataType::F64, span));
            }
        }
        let typed = self.value(operand, context)?;
        let typed = match op {
            UnaryOp::Not => typed.adopt(DataType::Bool),
            UnaryOp::Neg => typed,
        };
        let ty = match op {
            UnaryOp::Not if typed.ty == DataType::Bool => DataType::Bool,
            UnaryOp::Not => {
                return Err(Diagnostic::type_error(
                    operand.span,
                    format!("`not` needs a `bool`, but this is `{}`", typed.ty),
                ))
            }
            UnaryOp::Neg if typed.ty.is_integer() => DataType::I64,
            UnaryOp::Neg if typed.ty.is_float() || typed.ty.is_decimal() => typed.ty,
            UnaryOp::Neg => {
                return Err(Diagnostic::type_error(
                    operand.span,
                    format!("cannot negate a `{}`", typed.ty),
                ))
            }
        };
        let nullable = typed.nullable;
        Ok(Expr::new(
            ExprKind::Unary {
                op,
                operand: Box::new(typed.cast(ty)),
            },
            ty,
            nullable,
            span,
        ))
    }

    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        left: Operand,
        right: Operand,
        span: Span,
    ) -> Result<Expr> {
        if op.is_comparison() {
            return self.comparison(op, left, right, span);
        }
        let (left, right) = match (left, right) {
            (Operand::Value(l), Operand::Value(r)) => (l, r),
            (Operand::Text(_, s), _) | (_, Operand::Text(_, s)) => {
                return Err(Diagnostic::type_error(
                    s,
                    format!("`{}` cannot be applied to a string", op.symbol()),
                ))
            }
        };
        let (left, right) = if op.is_logical() {
            (left.adopt(DataType::Bool), right.adopt(DataType::Bool))
        } else {
            let (lt, rt) = (left.ty, right.ty);
            (left.adopt(rt), right.adopt(lt))
        };
        if op.is_logical() {
            for side in [&left, &right] {
                if side.ty != DataType::Bool {
                    return Err(Diagnostic::type_error(
                        side.span,
                        format!(
                            "`{}` needs `bool` operands, but this is `{}`",
                            op.symbol(),
                            side.ty
                        ),
                    ));
                }
            }
            return Ok(Expr::binary(op, left, right, DataType::Bool, span));
        }
        if !left.ty.is_numeric() || !right.ty.is_numeric() {
            let bad = if left.ty.is_numeric() { &right } else { &left };
            let mut d = Diagnostic::type_error(
                span,
                format!(
                    "`{}` needs numbers, but found `{}` and `{}`",
                    op.symbol(),
                    left.ty,
                    right.ty
                ),
            )
            .with_secondary(bad.span, format!("this is `{}`", bad.ty));
            if bad.ty == DataType::Date {
                d = d.with_hint("dates are compared, not computed with; `year()`, `month()` and `day()` extract parts");
            } else if matches!(bad.ty, DataType::Timestamp | DataType::Time) {
                d = d.with_hint("timestamps and times are compared, not computed with; `year()`, `month()` and `day()` extract a timestamp's date parts");
            }
            return Err(d);
        }
        if let Some(typed) = decimals::arithmetic(op, &left, &right, span)? {
            // A decimal `x % 0` is null, as an integer one is.
            let may_divide_by_zero = op == BinaryOp::Rem && !is_nonzero_literal(&right);
            let mut expr = Expr::binary(
                op,
                adapt(left, typed.left),
                adapt(right, typed.right),
                typed.result,
                span,
            );
            expr.nullable |= may_divide_by_zero;
            return Ok(expr);
        }
        let ty = match op {
            BinaryOp::Div => float_type(left.ty, right.ty),
            // A remainder is smaller than its divisor, so 32-bit operands need no widening.
            BinaryOp::Rem if left.ty.is_integer() && right.ty.is_integer() => {
                let narrow = |e: &Expr| {
                    e.ty == DataType::I32
                        || is_int_literal(e).is_some_and(|i| i32::try_from(i).is_ok())
                };
                if narrow(&left) && narrow(&right) {
                    DataType::I32
                } else {
                    DataType::I64
                }
            }
            _ if left.ty.is_integer() && right.ty.is_integer() => DataType::I64,
            _ => float_type(left.ty, right.ty),
        };
        // An integer `x % 0` is null, so a remainder may be null unless its divisor is a
        // literal other than zero.
        let may_divide_by_zero = op == BinaryOp::Rem
            && ty.is_integer()
            && is_int_literal(&right).is_none_or(|divisor| divisor == 0);
        let mut expr = Expr::binary(op, adapt(left, ty), adapt(right, ty), ty, span);
        expr.nullable |= may_divide_by_zero;
        Ok(expr)
    }

    fn comparison(
        &mut self,
        op: BinaryOp,
        left: Operand,
        right: Operand,
        span: Span,
    ) -> Result<Expr> {
        // A comparison with `null` is `null` whatever the other side is.
        if [&left, &right]
            .iter()
            .any(|side| matches!(side, Operand::Value(e) if e.is_null()))
        {
            return Ok(Expr::null(DataType::Bool, span));
        }
        let (left, right) = match (left, right) {
            (Operand::Value(l), Operand::Value(r)) => (l, r),
            (Operand::Value(column), Operand::Text(text, text_span)) => {
                return self.compare_with_text(op, column, &text, text_span, span)
            }
            (Operand::Text(text, text_span), Operand::Value(column)) => {
                return self.compare_with_text(mirror(op), column, &text, text_span, span)
            }
            (Operand::Text(_, a), Operand::Text(_, _)) => {
                return Err(Diagnostic::type_error(
                    a,
                    "comparing two string literals says nothing about the data",
                )
                .with_hint("compare a string column with a literal"))
            }
        };
        let rounded = decimals::at_value_scale(op, &left, &right)
            .map(|at| (op, left.clone(), at))
            .or_else(|| {
                decimals::at_value_scale(mirror(op), &right, &left)
                    .map(|at| (mirror(op), right.clone(), at))
            });
        if let Some((op, value, at)) = rounded {
            return match at {
                decimals::AtValueScale::Compare(literal) => {
                    self.comparison(op, Operand::Value(value), Operand::Value(literal), span)
                }
                // `x != x` is false and `x == x` true for every decimal or integer `x`, and
                // both are null where `x` is, as the comparison with the literal would be.
                decimals::AtValueScale::Never { equal } => {
                    let never = if equal { BinaryOp::Ne } else { BinaryOp::Eq };
                    Ok(Expr::binary(
                        never,
                        value.clone(),
                        value,
                        DataType::Bool,
                        span,
                    ))
                }
            };
        }
        let (l, r) = (left.ty, right.ty);
        let ordered = !matches!(op, BinaryOp::Eq | BinaryOp::Ne);
        let common = if l == r {
            if l == DataType::Bool && ordered {
                return Err(Diagnostic::type_error(
                    span,
                    format!("`{}` does not order `bool` values", op.symbol()),
                ));
            }
            if l == DataType::Str && !self.same_dictionary(&left, &right) {
                return self.compare_string_columns(op, left, right, span);
            }
            l
        } else if l.is_numeric() && r.is_numeric() {
            decimals::common(&left, &right).unwrap_or_else(|| comparison_type(&left, &right))
        } else if matches!(
            (l, r),
            (DataType::Date, DataType::Timestamp) | (DataType::Timestamp, DataType::Date)
        ) {
            // As SQL compares them: the date as the timestamp of its midnight.
            DataType::Timestamp
        } else {
            let mut d = Diagnostic::type_error(span, format!("cannot compare `{l}` with `{r}`"))
                .with_secondary(left.span, format!("this is `{l}`"))
                .with_secondary(right.span, format!("this is `{r}`"));
            if l == DataType::Time || r == DataType::Time {
                d = d.with_hint("a time of day is compared with another, written `@08:30:00`");
            } else if l == DataType::Date || r == DataType::Date {
                d = d.with_hint("write a date literal as `@1994-01-31`");
            }
            return Err(d);
        };
        if common.is_decimal() {
            return Ok(decimals::compare(op, left, right, common, span));
        }
        Ok(Expr::binary(
            op,
            adapt(left, common),
            adapt(right, common),
            DataType::Bool,
            span,
        ))
    }

    fn compare_with_text(
        &mut self,
        op: BinaryOp,
        column: Expr,
        text: &str,
        text_span: Span,
        span: Span,
    ) -> Result<Expr> {
        match column.ty {
            DataType::Str => self.bind_string_comparison(op, column, text, text_span, span),
            DataType::Date => Err(Diagnostic::type_error(
                text_span,
                "a date is compared with a string literal",
            )
            .with_secondary(column.span, "this is a `date`")
            .with_hint(format!("write the date as `@{text}`"))),
            ty @ (DataType::Timestamp | DataType::Time) => Err(Diagnostic::type_error(
                text_span,
                format!("a `{ty}` is compared with a string literal"),
            )
            .with_secondary(column.span, format!("this is a `{ty}`"))
            .with_hint(format!("write it as `@{}`", text.replacen(' ', "T", 1)))),
            other => Err(Diagnostic::type_error(
                text_span,
                format!("a string literal is compared with a number (`{other}`)"),
            )
            .with_secondary(column.span, format!("this is `{other}`"))
            .with_hint("remove the quotes to compare with a number")),
        }
    }

    fn case(
        &mut self,
        branches: &[(ast::Expr, ast::Expr)],
        otherwise: Option<&ast::Expr>,
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        let mut typed = Vec::with_capacity(branches.len());
        for (when, then) in branches {
            let when = self.condition(when, context, "`when`")?;
            typed.push((when, self.operand(then, context)?));
        }
        let otherwise = otherwise.map(|e| self.operand(e, context)).transpose()?;
        self.typed_case(typed, otherwise, span)
    }

    /// A `case` of analyzed conditions and results (a string literal's result as its text).
    pub(super) fn typed_case(
        &mut self,
        typed: Vec<(Expr, Operand)>,
        otherwise: Option<Operand>,
        span: Span,
    ) -> Result<Expr> {
        // Strings as results share one dictionary, which the result's codes index: the
        // literals' (`tessera_storage::derived::literal_strings_name`), or when string columns
        // are among the results, theirs and the literals' (`case_strings_name`). Each literal
        // becomes its code there, each column its codes recoded into it.
        let mut texts: Vec<&str> = Vec::new();
        let mut columns: Vec<BaseColumn> = Vec::new();
        for result in typed.iter().map(|(_, t)| t).chain(otherwise.as_ref()) {
            match result {
                Operand::Text(text, _) => texts.push(text),
                Operand::Value(value) if value.ty == DataType::Str && !value.is_null() => {
                    let origin = self
                        .string_origin(value)
                        .ok_or_else(|| case_of_strings(value.span))?;
                    columns.push(origin);
                }
                Operand::Value(_) => {}
            }
        }
        let dictionary = if !columns.is_empty() {
            let named: Vec<(String, String)> = columns
                .iter()
                .map(|c| (c.table.clone(), c.column.clone()))
                .collect();
            Some(BaseColumn::new(
                LITERAL_TABLE,
                case_strings_name(&named, &texts),
            ))
        } else {
            (!texts.is_empty())
                .then(|| BaseColumn::new(LITERAL_TABLE, literal_strings_name(&texts)))
        };
        let strings = match &dictionary {
            Some(d) => self.catalog.dictionary(&d.table, &d.column).ok().flatten(),
            None => None,
        };
        let result = |operand: Operand| match (operand, &dictionary) {
            (Operand::Value(typed), Some(dictionary))
                if typed.ty == DataType::Str && !typed.is_null() && !columns.is_empty() =>
            {
                self.recoded_into(typed, dictionary)
            }
            (Operand::Value(typed), _) => Ok(typed),
            (Operand::Text(text, text_span), Some(dictionary)) => {
                let code = strings
                    .as_ref()
                    .and_then(|d| d.code_of(&text))
                    .unwrap_or(-1);
                Ok(Expr::new(
                    ExprKind::StrCode(StrCode {
                        dictionary: dictionary.clone(),
                        text,
                        bound: StrBound::Exact,
                        code,
                    }),
                    DataType::Str,
                    false,
                    text_span,
                ))
            }
            (Operand::Text(..), None) => Err(case_of_strings(span)),
        };
        let typed = typed
            .into_iter()
            .map(|(when, then)| Ok((when, result(then)?)))
            .collect::<Result<Vec<_>>>()?;
        let otherwise = otherwise.map(result).transpose()?;
        let results: Vec<&Expr> = typed
            .iter()
            .map(|(_, t)| t)
            .chain(otherwise.as_ref())
            .collect();
        // `null` results take the type of the others.
        let typed_results: Vec<&Expr> = results.iter().copied().filter(|r| !r.is_null()).collect();
        let Some((first, rest)) = typed_results.split_first() else {
            return Ok(Expr::null(DataType::I32, span));
        };
        // A decimal beside values acting as decimals (integers, number literals) keeps the
        // results exact, as in arithmetic; beside anything else numeric, a float.
        let ty = match decimals::common_of_all(&typed_results) {
            Some(decimal) => decimal,
            None => rest
                .iter()
                .try_fold(first.ty, |ty, result| match (ty, result.ty) {
                    (a, b) if a == b => Ok(a),
                    (a, b) if a.is_integer() && b.is_integer() => Ok(DataType::I64),
                    (a, b) if a.is_numeric() && b.is_numeric() => Ok(float_type(a, b)),
                    (a, b) => Err(Diagnostic::type_error(
                        result.span,
                        format!("`case` results have different types: `{a}` and `{b}`"),
                    )),
                })?,
        };
        let nullable = otherwise.is_none() || results.iter().any(|r| r.nullable);
        let convert = |e: Expr| {
            if ty.is_decimal() {
                decimals::at_scale(e, ty)
            } else {
                e.cast(ty)
            }
        };
        let branches = typed.into_iter().map(|(w, t)| (w, convert(t))).collect();
        Ok(Expr::new(
            ExprKind::Case {
                branches,
                otherwise: otherwise.map(|o| Box::new(convert(o))),
            },
            ty,
            nullable,
            span,
        ))
    }

    /// The column whose dictionary the codes of string expression `expr` index: a stored
    /// column's, a string function's of one, or a `case`'s string literals' (`None` for other
    /// expressions).
    pub(super) fn string_origin(&self, expr: &Expr) -> Option<BaseColumn> {
        expr.code_dictionary(&|c| self.columns.get(c).origin.clone(), &|_| None)
    }

    fn call(
        &mut self,
        name: &ast::Ident,
        args: &[ast::Expr],
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        if let Some(function) = STRING_FUNCTIONS.into_iter().find(|f| *f == name.name) {
            return self.string_function(function, args, span, context);
        }
        if let Some(kind) = STRING_MATCHES.into_iter().find(|k| k.name() == name.name) {
            let [tested, pattern] = args else {
                return Err(Diagnostic::type_error(
                    span,
                    format!(
                        "`{}` takes two arguments (a string and a pattern), but {} given",
                        kind.name(),
                        args.len()
                    ),
                ));
            };
            return self.matches(kind, tested, pattern, span, context);
        }
        let Some(function) = Function::from_name(&name.name) else {
            if Aggregate::from_name(&name.name).is_some() {
                return Err(Diagnostic::type_error(
                    name.span,
                    format!(
                        "the aggregate `{}` can only be used in `group {{ }}` or `aggregate {{ }}`",
                        name.name
                    ),
                ));
            }
            let names: Vec<&str> = Function::ALL
                .map(Function::name)
                .into_iter()
                .chain(STRING_MATCHES.map(MatchKind::name))
                .chain(STRING_FUNCTIONS)
                .collect();
            let mut d = Diagnostic::name(name.span, format!("unknown function `{}`", name.name));
            d = match closest_name(&name.name, names.iter().copied()) {
                Some(suggestion) => d.with_hint(format!("did you mean `{suggestion}`?")),
                None => d.with_hint(format!("the functions are: {}", names.join(", "))),
            };
            return Err(d);
        };
        let mut typed = Vec::with_capacity(args.len());
        for arg in args {
            typed.push(self.value(arg, context)?);
        }
        // A timestamp's date parts are its day's.
        if matches!(function, Function::Year | Function::Month | Function::Day) {
            typed = typed
                .into_iter()
                .map(|a| match a.ty {
                    DataType::Timestamp => a.cast(DataType::Date),
                    _ => a,
                })
                .collect();
        }
        let arg_types: Vec<DataType> = typed.iter().map(|a| a.ty).collect();
        let ty = function.return_type(&arg_types).map_err(|e| {
            let at = typed.first().map_or(span, |a| a.span);
            Diagnostic::type_error(at, format!("`{}` {e}", function.name()))
                .with_hint(function.signature())
        })?;
        // Floating functions of integers compute in the result's float type.
        let typed: Vec<Expr> = if ty.is_float() {
            typed.into_iter().map(|a| a.cast(ty)).collect()
        } else {
            typed
        };
        let nullable = typed.iter().any(|a| a.nullable);
        Ok(Expr::new(
            ExprKind::Call {
                function,
                args: typed,
            },
            ty,
            nullable,
            span,
        ))
    }

    /// Whether both are string columns of tables, each with its dictionary: a join translates
    /// one's codes into the other's.
    pub(super) fn both_stored(&self, a: &Expr, b: &Expr) -> bool {
        let stored = |e: &Expr| {
            e.as_column()
                .is_some_and(|c| self.columns.get(c).origin.is_some())
        };
        stored(a) && stored(b)
    }

    pub(super) fn same_dictionary(&self, a: &Expr, b: &Expr) -> bool {
        match (self.string_origin(a), self.string_origin(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        }
    }
}

/// The count and unit of an interval literal (`90 days`, or `-90 days`).
fn interval_of(expr: &ast::Expr) -> Option<(i64, IntervalUnit)> {
    match &expr.kind {
        AstExpr::Literal(ast::Literal {
            value: LiteralValue::Interval { count, unit },
            ..
        }) => Some((*count, *unit)),
        AstExpr::Unary {
            op: UnaryOp::Neg,
            operand,
        } => interval_of(operand).map(|(count, unit)| (count.saturating_neg(), unit)),
        _ => None,
    }
}

impl Analyzer<'_> {
    /// `date + count unit`: a literal date moves at once (a month or a year later, the day is
    /// kept, or the month's last day when the month is shorter, as DuckDB does); a date column
    /// moves by days, through its day number.
    fn shift_date(
        &mut self,
        date: &ast::Expr,
        count: i64,
        unit: IntervalUnit,
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        let date = self.value(date, context)?.adopt(DataType::Date);
        if date.ty != DataType::Date {
            return Err(Diagnostic::type_error(
                date.span,
                format!("an interval is added to a date, but this is `{}`", date.ty),
            ));
        }
        let out_of_range = || {
            Diagnostic::type_error(span, "the date is out of range").with_label(format!(
                "{count} {}s from here leaves the calendar",
                unit.name()
            ))
        };
        match (&date.kind, unit) {
            (ExprKind::Literal(Value::Null), _) => Ok(Expr::null(DataType::Date, span)),
            (ExprKind::Literal(Value::Date(day)), IntervalUnit::Day) => {
                let moved = i64::from(*day) + count;
                let moved = i32::try_from(moved).map_err(|_| out_of_range())?;
                Ok(Expr::literal(Value::Date(moved), DataType::Date, span))
            }
            (ExprKind::Literal(Value::Date(day)), IntervalUnit::Month | IntervalUnit::Year) => {
                let months = if unit == IntervalUnit::Year {
                    count.checked_mul(12).ok_or_else(out_of_range)?
                } else {
                    count
                };
                let (year, month, day_of_month) = date::civil_from_days(*day);
                let index = (i64::from(year) * 12 + i64::from(month) - 1)
                    .checked_add(months)
                    .ok_or_else(out_of_range)?;
                let year = i32::try_from(index.div_euclid(12)).map_err(|_| out_of_range())?;
                let month = index.rem_euclid(12) as u32 + 1;
                let day_of_month = day_of_month.min(date::days_in_month(year, month));
                let moved =
                    date::days_from_civil(year, month, day_of_month).ok_or_else(out_of_range)?;
                Ok(Expr::literal(Value::Date(moved), DataType::Date, span))
            }
            (_, IntervalUnit::Day) => {
                let days = Expr::literal(Value::Int(count), DataType::I64, span);
                let sum = Expr::binary(
                    BinaryOp::Add,
                    date.cast(DataType::I64),
                    days,
                    DataType::I64,
                    span,
                );
                Ok(sum.cast(DataType::Date))
            }
            (_, IntervalUnit::Month | IntervalUnit::Year) => Err(Diagnostic::unsupported(
                span,
                "adding months or years to a date that is not a literal is not supported yet",
            )
            .with_hint("add days, or move the literal date it is compared with the other way")),
        }
    }
}

fn negate_if(negated: bool, expr: Expr) -> Expr {
    if !negated {
        return expr;
    }
    let (span, nullable) = (expr.span, expr.nullable);
    Expr::new(
        ExprKind::Unary {
            op: UnaryOp::Not,
            operand: Box::new(expr),
        },
        DataType::Bool,
        nullable,
        span,
    )
}

fn float_type(a: DataType, b: DataType) -> DataType {
    let f32_or_int = |t: DataType| t == DataType::F32;
    if f32_or_int(a) && f32_or_int(b) {
        DataType::F32
    } else {
        DataType::F64
    }
}

/// Whether `e` is a literal number other than zero (a divisor that cannot make `%` null).
fn is_nonzero_literal(e: &Expr) -> bool {
    match e.kind {
        ExprKind::Literal(Value::Int(i)) => i != 0,
        ExprKind::Literal(Value::Float(x)) => x != 0.0,
        ExprKind::Literal(Value::Decimal(raw, _)) => raw != 0,
        ExprKind::Literal(Value::WideDecimal(raw, _)) => raw != 0,
        _ => false,
    }
}

fn is_int_literal(e: &Expr) -> Option<i64> {
    match e.kind {
        ExprKind::Literal(Value::Int(i)) => Some(i),
        _ => None,
    }
}

/// The type two numeric operands of a comparison are compared in.
fn comparison_type(left: &Expr, right: &Expr) -> DataType {
    let (l, r) = (left.ty, right.ty);
    // A literal takes the column's type when it fits.
    if let Some(i) = is_int_literal(right) {
        if l == DataType::I32 && i32::try_from(i).is_ok() || l.is_float() {
            return l;
        }
    }
    if let Some(i) = is_int_literal(left) {
        if r == DataType::I32 && i32::try_from(i).is_ok() || r.is_float() {
            return r;
        }
    }
    if l.is_integer() && r.is_integer() {
        DataType::I64
    } else if matches!(left.kind, ExprKind::Literal(_)) && r == DataType::F32
        || matches!(right.kind, ExprKind::Literal(_)) && l == DataType::F32
    {
        DataType::F32
    } else {
        float_type(l, r)
    }
}

/// Converts to `ty`, turning literals into literals of that type rather than casts (a
/// decimal of the target's scale is already in its units).
fn adapt(expr: Expr, ty: DataType) -> Expr {
    if expr.ty == ty {
        return expr;
    }
    if ty.is_decimal() {
        return decimals::at_scale(expr, ty);
    }
    match (&expr.kind, ty) {
        (ExprKind::Literal(Value::Int(_)), DataType::I32 | DataType::I64) => Expr { ty, ..expr },
        (ExprKind::Literal(Value::Int(i)), DataType::F32 | DataType::F64) => {
            Expr::literal(Value::Float(*i as f64), ty, expr.span)
        }
        (ExprKind::Literal(Value::Float(_)), DataType::F32 | DataType::F64) => Expr { ty, ..expr },
        _ => expr.cast(ty),
    }
}

/// A date (`1994-01-31`), timestamp (`1994-01-31T08:30:00`) or time of day (`08:30:00`)
/// literal, its shape checked by the lexer and its calendar and clock here.
fn temporal_literal(text: &str, span: Span) -> Result<Expr> {
    let (value, ty, kind) = if text.contains('T') {
        let micros = date::parse_timestamp(text).map(Value::Timestamp);
        (micros, DataType::Timestamp, "a timestamp")
    } else if text.contains(':') {
        (
            date::parse_time(text).map(Value::Time),
            DataType::Time,
            "a time of day",
        )
    } else {
        (
            date::parse_date(text).map(Value::Date),
            DataType::Date,
            "a date",
        )
    };
    match value {
        Some(value) => Ok(Expr::literal(value, ty, span)),
        None => Err(
            Diagnostic::type_error(span, format!("`@{text}` is not {kind}")).with_label(match ty {
                DataType::Date => "no such day in the calendar",
                DataType::Time => "no such time on the clock",
                _ => "no such day or time on the clock",
            }),
        ),
    }
}

fn check_cast(from: DataType, to: DataType, span: Span) -> Result<()> {
    use DataType::*;
    let allowed = from == to
        || (from.is_numeric() || from == Bool)
            && to.is_numeric()
            && !(from == Bool && to.is_decimal())
        || from.is_numeric() && !from.is_decimal() && to == Bool
        || from == Date && to.is_integer()
        || from.is_integer() && to == Date
        || from == Date && to == Timestamp
        || from == Timestamp && matches!(to, Date | Time);
    if allowed {
        Ok(())
    } else {
        let mut d = Diagnostic::type_error(span, format!("cannot cast `{from}` to `{to}`"));
        if from == Str || to == Str {
            d = d.with_hint("strings are dictionary codes and cannot be converted");
        }
        Err(d)
    }
}

/// A string result of a `case` whose codes index no known dictionary: every string expression
/// the language has (literals, columns, string functions, `case`s) has one, so this is a bug.
pub(super) fn case_of_strings(span: Span) -> Diagnostic {
    Diagnostic::internal(
        span,
        "a string result of `case` indexes no known dictionary",
    )
}
