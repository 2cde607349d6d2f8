//! Resolved, typed scalar expressions, shared by the typed pipelines, the logical plan and the
//! physical plan. Columns are referred to by `ColumnId`; every binary operation has operands of
//! one type (analysis inserts the casts), and string literals are already bound to dictionary
//! codes, so later stages never see text.

use std::fmt;

use tessera_grammar::ast::{BinaryOp, UnaryOp};
use tessera_grammar::Span;
use tessera_stdlib::{scalar, Aggregate, Function};
use tessera_storage::{date, DataType, DecimalType, Value};

pub use tessera_runtime::pattern::MatchKind;
pub use tessera_runtime::program::StrBound;

use crate::columns::{BaseColumn, ColumnId, Columns};

/// What `op` means on values (`tessera_stdlib::scalar`), for constant folding and the host.
pub fn scalar_binary(op: BinaryOp) -> scalar::Binary {
    match op {
        BinaryOp::Add => scalar::Binary::Add,
        BinaryOp::Sub => scalar::Binary::Sub,
        BinaryOp::Mul => scalar::Binary::Mul,
        BinaryOp::Div => scalar::Binary::Div,
        BinaryOp::Rem => scalar::Binary::Rem,
        BinaryOp::Eq => scalar::Binary::Eq,
        BinaryOp::Ne => scalar::Binary::Ne,
        BinaryOp::Lt => scalar::Binary::Lt,
        BinaryOp::Le => scalar::Binary::Le,
        BinaryOp::Gt => scalar::Binary::Gt,
        BinaryOp::Ge => scalar::Binary::Ge,
        BinaryOp::And => scalar::Binary::And,
        BinaryOp::Or => scalar::Binary::Or,
    }
}

/// What `op` means on values (`tessera_stdlib::scalar`).
pub fn scalar_unary(op: UnaryOp) -> scalar::Unary {
    match op {
        UnaryOp::Neg => scalar::Unary::Neg,
        UnaryOp::Not => scalar::Unary::Not,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: DataType,
    pub nullable: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Column(ColumnId),
    /// A constant: never `Value::Str` (strings are codes, see `StrCode`), but for a pattern
    /// (`Matches`).
    Literal(Value),
    /// A string literal compared with a dictionary-encoded column, as a code of that column's
    /// dictionary. The code is resolved again from the data each time a query runs, so compiled
    /// code stays right when the data changes.
    StrCode(StrCode),
    /// A constant of a kernel, hoisted out of its code: the kernel reads
    /// `PhysicalQuery::constants[slot]` as a parameter, so a query that differs only in its
    /// constants runs the same compiled code (`physical::constants`). `bits` is what the
    /// value told [`Expr::bits_needed`], which decides where overflow is checked.
    Constant {
        slot: usize,
        bits: u32,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// Conversion of the operand to `Expr::ty`.
    Cast(Box<Expr>),
    Call {
        function: Function,
        args: Vec<Expr>,
    },
    Case {
        branches: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    IsNull {
        operand: Box<Expr>,
        negated: bool,
    },
    /// Whether a string column's value matches `pattern` (`like`, `starts_with`, ...), read by
    /// its code from a table of answers computed once per dictionary entry when the query runs.
    /// `pattern` is the literal (`Value::Str`, the one place a text literal stays) or, in
    /// kernels, the constant holding it; `entries` is the operand's dictionary size it was
    /// compiled for.
    Matches {
        operand: Box<Expr>,
        kind: MatchKind,
        pattern: Box<Expr>,
        entries: u32,
    },
    /// A string column's value placed among the sorted strings of `among`'s dictionary (an
    /// `i32`): twice the index of the first string not below it, less one when `among` lacks
    /// it. Two string columns with different dictionaries compare through their ranks in one
    /// of them (the other column's own rank is twice its code). Resolved from the data each time
    /// a query runs; `entries` is the operand's dictionary size it was compiled for.
    Rank {
        operand: Box<Expr>,
        among: BaseColumn,
        entries: u32,
    },
    /// A string function of a string column (`substring(c_phone, 1, 2)`): its value is a code
    /// of the dictionary of `derived`, the column of that name the catalog computes
    /// (`tessera_storage::derived`), read by the operand's code from a table computed once per
    /// dictionary entry when the query runs; `entries` is the operand's dictionary size it was
    /// compiled for.
    Derived {
        operand: Box<Expr>,
        derived: BaseColumn,
        entries: u32,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct StrCode {
    pub dictionary: BaseColumn,
    pub text: String,
    pub bound: StrBound,
    /// The code in the dictionary the query was compiled against.
    pub code: i32,
}

/// An aggregate over the rows of a group (or of the whole input).
#[derive(Clone, Debug, PartialEq)]
pub struct AggregateExpr {
    pub function: Aggregate,
    /// `None` for `count()`.
    pub arg: Option<Expr>,
    pub ty: DataType,
    pub span: Span,
}

impl Expr {
    /// Whether an integer expression's value always fits its type, judged from the widths of
    /// its operands (`bits_needed`): then computing it needs no overflow check. Sums and
    /// products of 32-bit columns computed in 64 bits (SSB's `lo_extendedprice * lo_discount`)
    /// are such.
    pub fn fits_its_type(&self) -> bool {
        let width = match self.ty {
            DataType::I32 | DataType::Date | DataType::Str => 32,
            // Below 2^126 in magnitude, so within 38 digits.
            DataType::Decimal(decimal) if decimal.is_wide() => 127,
            DataType::I64 | DataType::Decimal(_) => 64,
            _ => return true,
        };
        self.bits_needed() <= width
    }

    /// Whether converting this expression's values to `to` can fail: an integer narrowed past
    /// its range, a float (or NaN) outside the integer's or decimal's range, a date beyond a
    /// timestamp's range, a decimal given more digits after the point than 64 bits hold, or a
    /// value beyond a decimal's precision (under 18 digits always; at 18 when the value may need
    /// more bits than `10^18`). Code generation checks exactly these.
    pub fn cast_may_fail(&self, to: DataType) -> bool {
        if let DataType::Decimal(target) = to {
            let most = match target.is_wide() {
                true => DecimalType::MAX_PRECISION,
                false => DecimalType::NARROW_PRECISION,
            };
            let from_scale = self.ty.decimal().map_or(0, |d| d.scale);
            let more_digits = u32::from(target.scale.saturating_sub(from_scale));
            let bits = self.bits_needed() + power_of_ten_bits(more_digits);
            return self.ty.is_float()
                || target.precision < most
                || bits > power_of_ten_bits(u32::from(most));
        }
        matches!(to, DataType::I32 | DataType::I64 | DataType::Date)
            && (self.ty.is_float() || self.ty.is_integer() && !self.fits_in(to))
            || to == DataType::I32 && self.ty.is_decimal() && self.bits_needed() > 32
            || to == DataType::I64 && self.ty.is_wide_decimal() && self.bits_needed() > 64
            // A day past ±106,751,991 (2^26.7) is beyond 64 bits of microseconds.
            || self.ty == DataType::Date && to == DataType::Timestamp && self.bits_needed() > 27
    }

    /// Whether every value of this integer expression fits in `ty`.
    pub fn fits_in(&self, ty: DataType) -> bool {
        let width = match ty {
            DataType::I32 | DataType::Date => 32,
            DataType::I64 => 64,
            _ => return false,
        };
        self.ty.is_integer() && self.bits_needed() <= width
    }

    /// Whether evaluating this expression can fail a row with an integer overflow: `+`, `-`,
    /// `*`, negation or `abs` whose operands' widths do not show the result fits, or a cast to
    /// an integer from a float or a wider integer. Code generation checks exactly these.
    pub fn may_overflow(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            found |= match &e.kind {
                ExprKind::Binary {
                    op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul,
                    ..
                }
                | ExprKind::Unary {
                    op: UnaryOp::Neg, ..
                } => e.computes_as_integer() && !e.fits_its_type(),
                ExprKind::Call {
                    function: Function::Abs,
                    ..
                } => e.computes_as_integer() && !e.fits_its_type(),
                ExprKind::Cast(operand) => operand.cast_may_fail(e.ty),
                _ => false,
            };
        });
        found
    }

    /// Whether the value is computed with integer arithmetic: integers, and decimals' raw
    /// units.
    pub fn computes_as_integer(&self) -> bool {
        self.ty.is_integer() || self.ty.is_decimal()
    }

    /// An upper bound on the bits, sign included, that an integer expression's value needs,
    /// from the types of its columns.
    pub fn bits_needed(&self) -> u32 {
        self.bits_needed_with(&mut |_| None)
    }

    /// [`Expr::bits_needed`], where `column_bits` may know better for a column (from its
    /// values' range).
    pub fn bits_needed_with(&self, column_bits: &mut dyn FnMut(ColumnId) -> Option<u32>) -> u32 {
        let expr = self;
        let width = |ty: DataType| match ty {
            DataType::Bool => 2,
            DataType::I32 | DataType::Date | DataType::Str => 32,
            DataType::Decimal(decimal) if decimal.is_wide() => 128,
            _ => 64,
        };
        let bits = match &expr.kind {
            ExprKind::Column(id) => column_bits(*id).unwrap_or_else(|| width(expr.ty)),
            ExprKind::Literal(Value::Int(i) | Value::Decimal(i, _)) => {
                let magnitude = if *i < 0 { !*i } else { *i };
                65 - magnitude.leading_zeros()
            }
            ExprKind::Literal(Value::WideDecimal(i, _)) => {
                let magnitude = if *i < 0 { !*i } else { *i };
                129 - magnitude.leading_zeros()
            }
            ExprKind::Constant { bits, .. } => *bits,
            // A decimal given more digits after the point is multiplied by a power of ten;
            // fewer divide it.
            ExprKind::Cast(operand)
                if expr.ty.is_decimal() && (operand.ty.is_integer() || operand.ty.is_decimal()) =>
            {
                let from_scale = operand.ty.decimal().map_or(0, |d| d.scale);
                let to_scale = expr.ty.decimal().map_or(0, |d| d.scale);
                let more_digits = u32::from(to_scale.saturating_sub(from_scale));
                let bits = operand.bits_needed_with(column_bits);
                (bits + power_of_ten_bits(more_digits)).min(width(expr.ty))
            }
            ExprKind::Cast(operand) if operand.ty.is_decimal() && expr.ty.is_integer() => {
                operand.bits_needed_with(column_bits).min(width(expr.ty))
            }
            ExprKind::Cast(operand) if operand.ty.is_integer() || operand.ty == DataType::Bool => {
                operand.bits_needed_with(column_bits).min(width(expr.ty))
            }
            ExprKind::Binary { op, left, right } => match op {
                BinaryOp::Add | BinaryOp::Sub => {
                    left.bits_needed_with(column_bits)
                        .max(right.bits_needed_with(column_bits))
                        + 1
                }
                BinaryOp::Mul => {
                    left.bits_needed_with(column_bits) + right.bits_needed_with(column_bits)
                }
                // |a % b| is below |b| and at most |a|.
                BinaryOp::Rem => left
                    .bits_needed_with(column_bits)
                    .min(right.bits_needed_with(column_bits)),
                _ => width(expr.ty),
            },
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            } => operand.bits_needed_with(column_bits) + 1,
            ExprKind::Call {
                function: Function::Abs,
                args,
            } => args.first().map_or(64, |a| a.bits_needed_with(column_bits)) + 1,
            ExprKind::Case {
                branches,
                otherwise,
            } => {
                let mut most = 1;
                for then in branches
                    .iter()
                    .map(|(_, then)| then)
                    .chain(otherwise.as_deref())
                {
                    most = most.max(then.bits_needed_with(column_bits));
                }
                most
            }
            _ => width(expr.ty),
        };
        bits.min(128)
    }

    pub fn new(kind: ExprKind, ty: DataType, nullable: bool, span: Span) -> Expr {
        Expr {
            kind,
            ty,
            nullable,
            span,
        }
    }

    pub fn column(id: ColumnId, columns: &Columns, span: Span) -> Expr {
        let info = columns.get(id);
        Expr::new(ExprKind::Column(id), info.ty, info.nullable, span)
    }

    pub fn literal(value: Value, ty: DataType, span: Span) -> Expr {
        let nullable = value == Value::Null;
        Expr::new(ExprKind::Literal(value), ty, nullable, span)
    }

    /// The `null` literal, of type `ty`.
    pub fn null(ty: DataType, span: Span) -> Expr {
        Expr::literal(Value::Null, ty, span)
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, ExprKind::Literal(Value::Null))
    }

    /// A `null` literal takes the type of what it meets; anything else is unchanged.
    pub fn adopt(self, ty: DataType) -> Expr {
        if self.is_null() {
            Expr::null(ty, self.span)
        } else {
            self
        }
    }

    pub fn boolean(value: bool, span: Span) -> Expr {
        Expr::literal(Value::Bool(value), DataType::Bool, span)
    }

    pub fn binary(op: BinaryOp, left: Expr, right: Expr, ty: DataType, span: Span) -> Expr {
        let nullable = left.nullable || right.nullable;
        Expr::new(
            ExprKind::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            },
            ty,
            nullable,
            span,
        )
    }

    pub fn cast(self, ty: DataType) -> Expr {
        if self.ty == ty {
            return self;
        }
        let (nullable, span) = (self.nullable, self.span);
        Expr::new(ExprKind::Cast(Box::new(self)), ty, nullable, span)
    }

    /// `a and b`, simplifying a literal `true` away.
    pub fn and(self, other: Expr) -> Expr {
        if self.is_true() {
            return other;
        }
        if other.is_true() {
            return self;
        }
        let span = self.span.to(other.span);
        Expr::binary(BinaryOp::And, self, other, DataType::Bool, span)
    }

    /// True where `self` is false or null: `case when self then false else true end`.
    pub fn is_not_true(self) -> Expr {
        let span = self.span;
        Expr::new(
            ExprKind::Case {
                branches: vec![(self, Expr::boolean(false, span))],
                otherwise: Some(Box::new(Expr::boolean(true, span))),
            },
            DataType::Bool,
            false,
            span,
        )
    }

    pub fn is_true(&self) -> bool {
        matches!(self.kind, ExprKind::Literal(Value::Bool(true)))
    }

    pub fn as_column(&self) -> Option<ColumnId> {
        match self.kind {
            ExprKind::Column(id) => Some(id),
            _ => None,
        }
    }

    /// The column whose dictionary the codes of string expression `self` index: a column's
    /// stored origin (`origin`), a string function's derived column, a string literal's
    /// dictionary (`hoisted` gives the one a kernel constant stands for), or, for a `case` of
    /// string literals, its literals' (`None` for other expressions).
    pub fn code_dictionary(
        &self,
        origin: &dyn Fn(ColumnId) -> Option<BaseColumn>,
        hoisted: &dyn Fn(usize) -> Option<BaseColumn>,
    ) -> Option<BaseColumn> {
        match &self.kind {
            ExprKind::Column(id) => origin(*id),
            ExprKind::Derived { derived, .. } if self.ty == DataType::Str => Some(derived.clone()),
            ExprKind::StrCode(code) => Some(code.dictionary.clone()),
            ExprKind::Constant { slot, .. } if self.ty == DataType::Str => hoisted(*slot),
            ExprKind::Case {
                branches,
                otherwise,
            } if self.ty == DataType::Str => branches
                .iter()
                .map(|(_, then)| then)
                .chain(otherwise.as_deref())
                .find_map(|result| result.code_dictionary(origin, hoisted)),
            _ => None,
        }
    }

    /// Calls `visit` on this expression and every expression inside it, parents first.
    pub fn walk<'a>(&'a self, visit: &mut impl FnMut(&'a Expr)) {
        visit(self);
        match &self.kind {
            ExprKind::Column(_)
            | ExprKind::Literal(_)
            | ExprKind::StrCode(_)
            | ExprKind::Constant { .. } => {}
            ExprKind::Unary { operand, .. } => operand.walk(visit),
            ExprKind::Binary { left, right, .. } => {
                left.walk(visit);
                right.walk(visit);
            }
            ExprKind::Cast(operand)
            | ExprKind::IsNull { operand, .. }
            | ExprKind::Rank { operand, .. }
            | ExprKind::Derived { operand, .. } => operand.walk(visit),
            ExprKind::Matches {
                operand, pattern, ..
            } => {
                operand.walk(visit);
                pattern.walk(visit);
            }
            ExprKind::Call { args, .. } => args.iter().for_each(|arg| arg.walk(visit)),
            ExprKind::Case {
                branches,
                otherwise,
            } => {
                for (when, then) in branches {
                    when.walk(visit);
                    then.walk(visit);
                }
                if let Some(otherwise) = otherwise {
                    otherwise.walk(visit);
                }
            }
        }
    }

    /// Whether `other` computes the same value for every row: the same expression, wherever in
    /// the script each was written.
    pub fn same_computation(&self, other: &Expr) -> bool {
        let unplaced = |e: &Expr| {
            e.clone().transform(&mut |mut e| {
                e.span = Span::default();
                e
            })
        };
        unplaced(self) == unplaced(other)
    }

    /// Rebuilds the expression bottom-up, letting `rewrite` replace each node after its
    /// children were rewritten.
    pub fn transform(self, rewrite: &mut impl FnMut(Expr) -> Expr) -> Expr {
        let Expr {
            kind,
            ty,
            nullable,
            span,
        } = self;
        let kind = match kind {
            ExprKind::Column(_)
            | ExprKind::Literal(_)
            | ExprKind::StrCode(_)
            | ExprKind::Constant { .. } => kind,
            ExprKind::Unary { op, operand } => ExprKind::Unary {
                op,
                operand: Box::new(operand.transform(rewrite)),
            },
            ExprKind::Binary { op, left, right } => ExprKind::Binary {
                op,
                left: Box::new(left.transform(rewrite)),
                right: Box::new(right.transform(rewrite)),
            },
            ExprKind::Cast(operand) => ExprKind::Cast(Box::new(operand.transform(rewrite))),
            ExprKind::IsNull { operand, negated } => ExprKind::IsNull {
                operand: Box::new(operand.transform(rewrite)),
                negated,
            },
            ExprKind::Rank {
                operand,
                among,
                entries,
            } => ExprKind::Rank {
                operand: Box::new(operand.transform(rewrite)),
                among,
                entries,
            },
            ExprKind::Derived {
                operand,
                derived,
                entries,
            } => ExprKind::Derived {
                operand: Box::new(operand.transform(rewrite)),
                derived,
                entries,
            },
            ExprKind::Matches {
                operand,
                kind,
                pattern,
                entries,
            } => ExprKind::Matches {
                operand: Box::new(operand.transform(rewrite)),
                kind,
                pattern: Box::new(pattern.transform(rewrite)),
                entries,
            },
            ExprKind::Call { function, args } => ExprKind::Call {
                function,
                args: args.into_iter().map(|arg| arg.transform(rewrite)).collect(),
            },
            ExprKind::Case {
                branches,
                otherwise,
            } => ExprKind::Case {
                branches: branches
                    .into_iter()
                    .map(|(when, then)| (when.transform(rewrite), then.transform(rewrite)))
                    .collect(),
                otherwise: otherwise.map(|e| Box::new(e.transform(rewrite))),
            },
        };
        rewrite(Expr {
            kind,
            ty,
            nullable,
            span,
        })
    }

    /// The columns this expression reads, in first-use order, without repeats.
    pub fn columns_used(&self) -> Vec<ColumnId> {
        let mut used = Vec::new();
        self.walk(&mut |e| {
            if let ExprKind::Column(id) = e.kind {
                if !used.contains(&id) {
                    used.push(id);
                }
            }
        });
        used
    }

    /// Splits a conjunction `a and b and c` into its parts.
    pub fn into_conjuncts(self) -> Vec<Expr> {
        match self.kind {
            ExprKind::Binary {
                op: BinaryOp::And,
                left,
                right,
            } => {
                let mut parts = left.into_conjuncts();
                parts.extend(right.into_conjuncts());
                parts
            }
            _ => vec![self],
        }
    }

    /// Joins conjuncts back into one predicate (`true` when there are none).
    pub fn conjunction(parts: Vec<Expr>, span: Span) -> Expr {
        parts
            .into_iter()
            .reduce(Expr::and)
            .unwrap_or_else(|| Expr::boolean(true, span))
    }

    /// Displays the expression with column names from `columns`.
    pub fn display<'a>(&'a self, columns: &'a Columns) -> DisplayExpr<'a> {
        DisplayExpr {
            expr: self,
            columns,
        }
    }
}

impl AggregateExpr {
    pub fn display<'a>(&'a self, columns: &'a Columns) -> DisplayAggregate<'a> {
        DisplayAggregate {
            aggregate: self,
            columns,
        }
    }
}

/// Named expressions as plans show select items and group keys: a column that is its own
/// output by its name, any other as `name = expression`.
pub(crate) fn outputs_text(outputs: &[(ColumnId, Expr)], columns: &Columns) -> String {
    let texts: Vec<String> = outputs
        .iter()
        .map(|(id, e)| {
            let name = &columns.get(*id).name;
            if e.as_column() == Some(*id) {
                name.clone()
            } else {
                format!("{name} = {}", e.display(columns))
            }
        })
        .collect();
    texts.join(", ")
}

/// Aggregates as plans show them: `name = function(argument)`.
pub(crate) fn aggregates_text(
    aggregates: &[(ColumnId, AggregateExpr)],
    columns: &Columns,
) -> String {
    let texts: Vec<String> = aggregates
        .iter()
        .map(|(id, a)| format!("{} = {}", columns.get(*id).name, a.display(columns)))
        .collect();
    texts.join(", ")
}

pub struct DisplayExpr<'a> {
    expr: &'a Expr,
    columns: &'a Columns,
}

impl fmt::Display for DisplayExpr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_expr(f, self.expr, self.columns, true)
    }
}

impl DisplayExpr<'_> {
    /// The text as one of several conditions joined with `and`: an `or` in parentheses.
    pub fn as_conjunct(&self) -> String {
        match &self.expr.kind {
            ExprKind::Binary {
                op: BinaryOp::Or, ..
            } => format!("({self})"),
            _ => self.to_string(),
        }
    }
}

pub struct DisplayAggregate<'a> {
    aggregate: &'a AggregateExpr,
    columns: &'a Columns,
}

impl fmt::Display for DisplayAggregate<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.aggregate.function.name())?;
        if let Some(arg) = &self.aggregate.arg {
            write_expr(f, arg, self.columns, true)?;
        }
        f.write_str(")")
    }
}

/// The bits of `10^digits` (a decimal given `digits` more digits after the point is
/// multiplied by it).
fn power_of_ten_bits(digits: u32) -> u32 {
    let power = 10u128.checked_pow(digits).unwrap_or(u128::MAX);
    128 - power.leading_zeros()
}

/// A literal as a script writes it.
pub fn literal_text(value: &Value) -> String {
    match value {
        Value::Date(_) => format!("@{value}"),
        Value::Timestamp(micros) => {
            format!("@{}", date::format_timestamp(*micros).replacen(' ', "T", 1))
        }
        Value::Time(micros) => format!("@{}", date::format_time(*micros)),
        Value::Float(x) if x.fract() == 0.0 && x.is_finite() => format!("{x:.1}"),
        Value::Str(text) => format!("{text:?}"),
        _ => value.to_string(),
    }
}

fn write_expr(f: &mut fmt::Formatter<'_>, e: &Expr, columns: &Columns, top: bool) -> fmt::Result {
    match &e.kind {
        ExprKind::Column(id) => f.write_str(&columns.get(*id).name),
        ExprKind::Literal(value) => f.write_str(&literal_text(value)),
        ExprKind::Constant { slot, .. } => write!(f, "${slot}"),
        ExprKind::StrCode(code) => {
            let bound = match code.bound {
                StrBound::Exact => "",
                StrBound::Lower => "lower ",
                StrBound::Upper => "upper ",
            };
            write!(f, "{}{:?}#{}", bound, code.text, code.code)
        }
        ExprKind::Unary { op, operand } => {
            let space = if *op == UnaryOp::Not { " " } else { "" };
            write!(f, "{}{}", op.symbol(), space)?;
            write_expr(f, operand, columns, false)
        }
        ExprKind::Binary { op, left, right } => {
            if !top {
                f.write_str("(")?;
            }
            write_expr(f, left, columns, false)?;
            write!(f, " {} ", op.symbol())?;
            write_expr(f, right, columns, false)?;
            if !top {
                f.write_str(")")?;
            }
            Ok(())
        }
        ExprKind::Cast(operand) => {
            if !top {
                f.write_str("(")?;
            }
            write_expr(f, operand, columns, false)?;
            write!(f, " as {}", e.ty)?;
            if !top {
                f.write_str(")")?;
            }
            Ok(())
        }
        ExprKind::Call { function, args } => {
            write!(f, "{}(", function.name())?;
            for (i, arg) in args.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write_expr(f, arg, columns, true)?;
            }
            f.write_str(")")
        }
        ExprKind::Case {
            branches,
            otherwise,
        } => {
            f.write_str("case")?;
            for (when, then) in branches {
                f.write_str(" when ")?;
                write_expr(f, when, columns, true)?;
                f.write_str(" then ")?;
                write_expr(f, then, columns, true)?;
            }
            if let Some(otherwise) = otherwise {
                f.write_str(" else ")?;
                write_expr(f, otherwise, columns, true)?;
            }
            f.write_str(" end")
        }
        ExprKind::IsNull { operand, negated } => {
            if !top {
                f.write_str("(")?;
            }
            write_expr(f, operand, columns, false)?;
            f.write_str(if *negated { " is not null" } else { " is null" })?;
            if !top {
                f.write_str(")")?;
            }
            Ok(())
        }
        ExprKind::Matches {
            operand,
            kind: MatchKind::Like,
            pattern,
            ..
        } => {
            if !top {
                f.write_str("(")?;
            }
            write_expr(f, operand, columns, false)?;
            f.write_str(" like ")?;
            write_expr(f, pattern, columns, false)?;
            if !top {
                f.write_str(")")?;
            }
            Ok(())
        }
        ExprKind::Matches {
            operand,
            kind,
            pattern,
            ..
        } => {
            write!(f, "{}(", kind.name())?;
            write_expr(f, operand, columns, true)?;
            f.write_str(", ")?;
            write_expr(f, pattern, columns, true)?;
            f.write_str(")")
        }
        ExprKind::Rank { operand, among, .. } => {
            f.write_str("rank(")?;
            write_expr(f, operand, columns, true)?;
            write!(f, " among {among})")
        }
        ExprKind::Derived { derived, .. } => write!(f, "{}", derived.column),
    }
}

/// The comparison `b op' a` that means the same as `a op b`.
pub fn mirror(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    }
}
