//! String comparisons over dictionary codes. A comparison of a dictionary-encoded column with a
//! string literal becomes a comparison of codes. The dictionary is sorted, so every comparison
//! maps to one code: `s == "X"` tests the code of "X" (-1, which no row has, when "X" is
//! absent), and `s < "X"`, `s <= "X"`, `s > "X"`, `s >= "X"` compare with the first code at or
//! above "X". Two string columns with different dictionaries compare through their ranks among
//! the right one's strings (`ExprKind::Rank`).

use tessera_grammar::ast::{self, BinaryOp};
use tessera_grammar::lexer::quote_string;
use tessera_grammar::{Diagnostic, Span};
use tessera_storage::derived::{DerivedString, StringFunction};
use tessera_storage::{DataType, Value};

use crate::columns::BaseColumn;
use crate::expr::{Expr, ExprKind, MatchKind, StrBound, StrCode};

use super::expr::Operand;
use super::scope::PipelineContext;
use super::{Analyzer, Result};

impl Analyzer<'_> {
    /// `tested like pattern` (or `starts_with(tested, pattern)`, ...): a string column of a
    /// table against a literal pattern, answered per dictionary entry when the query runs.
    pub(super) fn matches(
        &mut self,
        kind: MatchKind,
        tested: &ast::Expr,
        pattern: &ast::Expr,
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        let tested = self.value(tested, context)?;
        if tested.ty != DataType::Str {
            return Err(Diagnostic::type_error(
                tested.span,
                format!(
                    "`{}` tests a string, but this is `{}`",
                    kind.name(),
                    tested.ty
                ),
            ));
        }
        let Operand::Text(text, text_span) = self.operand(pattern, context)? else {
            return Err(Diagnostic::unsupported(
                pattern.span,
                "a pattern other than a string literal is not supported yet",
            ));
        };
        let origin = self.string_origin(&tested).ok_or_else(|| {
            Diagnostic::unsupported(
                tested.span,
                "matching a pattern against a computed string is not supported yet",
            )
        })?;
        let entries = self.code_entries(&origin);
        let nullable = tested.nullable;
        let pattern = Expr::new(
            ExprKind::Literal(Value::Str(text.into())),
            DataType::Str,
            false,
            text_span,
        );
        Ok(Expr::new(
            ExprKind::Matches {
                operand: Box::new(tested),
                kind,
                pattern: Box::new(pattern),
                entries,
            },
            DataType::Bool,
            nullable,
            span,
        ))
    }

    /// `left op right` for string columns of two different dictionaries: both become their
    /// rank among `right`'s strings, where equal strings have equal ranks and the order of
    /// ranks is the order of strings.
    pub(super) fn compare_string_columns(
        &mut self,
        op: BinaryOp,
        left: Expr,
        right: Expr,
        span: Span,
    ) -> Result<Expr> {
        let among = right
            .as_column()
            .and_then(|id| self.columns.get(id).origin.clone());
        let (Some(among), Some(_)) = (among, left.as_column()) else {
            return Err(Diagnostic::unsupported(
                span,
                "comparing a computed string with another string is not supported yet",
            ));
        };
        let rank = |analyzer: &Self, operand: Expr| -> Result<Expr> {
            let origin = operand
                .as_column()
                .and_then(|id| analyzer.columns.get(id).origin.clone())
                .ok_or_else(|| {
                    Diagnostic::unsupported(
                        operand.span,
                        "comparing a computed string with another string is not supported yet",
                    )
                })?;
            let entries = analyzer.code_entries(&origin);
            let (nullable, operand_span) = (operand.nullable, operand.span);
            Ok(Expr::new(
                ExprKind::Rank {
                    operand: Box::new(operand),
                    among: among.clone(),
                    entries,
                },
                DataType::I32,
                nullable,
                operand_span,
            ))
        };
        let left = rank(self, left)?;
        let right = rank(self, right)?;
        Ok(Expr::binary(op, left, right, DataType::Bool, span))
    }

    /// `substring(s, start[, length])`, `upper(s)`, `lower(s)`, `length(s)` of a string column
    /// of a table: the derived column the catalog computes (`tessera_storage::derived`), read
    /// in kernels through a table of codes (or lengths) computed once per dictionary entry.
    pub(super) fn string_function(
        &mut self,
        name: &'static str,
        args: &[ast::Expr],
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        if name == "concat" {
            return self.concat(args, span, context);
        }
        let arity = match name {
            "substring" => "a string, a start and optionally a length",
            _ => "one string",
        };
        let (text, numbers) = match (name, args) {
            ("substring", [text, rest @ ..]) if (1..=2).contains(&rest.len()) => (text, rest),
            (_, [text]) if name != "substring" => (text, &[][..]),
            _ => {
                return Err(Diagnostic::type_error(
                    span,
                    format!("`{name}` takes {arity}, but {} given", args.len()),
                ))
            }
        };
        let mut numbers = numbers.iter().map(integer_literal);
        let function = match name {
            "upper" => StringFunction::Upper,
            "lower" => StringFunction::Lower,
            "length" => StringFunction::Length,
            _ => {
                let start = numbers.next().flatten();
                let length = numbers.next();
                match (start, length) {
                    (Some(start), None) => StringFunction::Substring {
                        start,
                        length: None,
                    },
                    (Some(start), Some(Some(length))) => StringFunction::Substring {
                        start,
                        length: Some(length),
                    },
                    _ => {
                        return Err(Diagnostic::unsupported(
                            span,
                            "`substring` with a start or length other than an integer literal is not supported yet",
                        ))
                    }
                }
            }
        };
        let operand = self.value(text, context)?;
        self.derived_string(name, operand, function, span)
    }

    /// `concat(a, b, ...)` of string literals and one string column of a table (or a string
    /// function of one): the column with the literals before it and after it, a string function
    /// like `upper`. As in DuckDB, a null is left out, so a null column gives the literals
    /// alone, through a `case`.
    fn concat(
        &mut self,
        args: &[ast::Expr],
        span: Span,
        context: &PipelineContext,
    ) -> Result<Expr> {
        if args.len() < 2 {
            return Err(Diagnostic::type_error(
                span,
                format!(
                    "`concat` takes two strings or more, but {} given",
                    args.len()
                ),
            ));
        }
        let (mut prefix, mut suffix) = (String::new(), String::new());
        let mut column: Option<Expr> = None;
        for arg in args {
            match (self.operand(arg, context)?, &column) {
                (Operand::Text(text, _), None) => prefix.push_str(&text),
                (Operand::Text(text, _), Some(_)) => suffix.push_str(&text),
                (Operand::Value(value), _) if value.ty != DataType::Str => {
                    return Err(Diagnostic::type_error(
                        value.span,
                        format!("`concat` takes strings, but this is `{}`", value.ty),
                    ))
                }
                (Operand::Value(value), None) => column = Some(value),
                (Operand::Value(value), Some(_)) => return Err(Diagnostic::unsupported(
                    value.span,
                    "`concat` of more than one string that is not a literal is not supported yet",
                )),
            }
        }
        let Some(operand) = column else {
            return Err(
                Diagnostic::type_error(span, "`concat` of literals only").with_hint(format!(
                    "write the string itself: {}",
                    quote_string(&(prefix + &suffix))
                )),
            );
        };
        let alone = format!("{prefix}{suffix}");
        let nullable = operand.nullable;
        let (is_null, operand_span) = (operand.clone(), operand.span);
        let mut joined = self.derived_string(
            "concat",
            operand,
            StringFunction::Concat { prefix, suffix },
            span,
        )?;
        if !nullable {
            return Ok(joined);
        }
        // Taken only where the string is not null.
        joined.nullable = false;
        let when_null = Expr::new(
            ExprKind::IsNull {
                operand: Box::new(is_null),
                negated: false,
            },
            DataType::Bool,
            false,
            operand_span,
        );
        self.typed_case(
            vec![(when_null, Operand::Text(alone, span))],
            Some(Operand::Value(joined)),
            span,
        )
    }

    /// String function `function` (called `name` in the script) of `operand`: the derived
    /// column the catalog computes from the string column of a table it comes from.
    fn derived_string(
        &mut self,
        name: &str,
        operand: Expr,
        function: StringFunction,
        span: Span,
    ) -> Result<Expr> {
        if operand.ty != DataType::Str {
            return Err(Diagnostic::type_error(
                operand.span,
                format!("`{name}` takes a string, but this is `{}`", operand.ty),
            ));
        }
        let computed = || {
            Diagnostic::unsupported(
                operand.span,
                format!("`{name}` of a computed string is not supported yet"),
            )
            .with_hint("apply it to a string column of a table")
        };
        let Some(origin) = self.string_origin(&operand) else {
            return Err(computed());
        };
        let derived = DerivedString {
            base: origin.column.clone(),
            function,
        };
        let ty = derived.result_type();
        let derived = BaseColumn::new(origin.table.clone(), derived.name());
        if self
            .catalog
            .field(&derived.table, &derived.column)
            .is_none()
        {
            return Err(computed());
        }
        let entries = self.code_entries(&origin);
        let nullable = operand.nullable;
        Ok(Expr::new(
            ExprKind::Derived {
                operand: Box::new(operand),
                derived,
                entries,
            },
            ty,
            nullable,
            span,
        ))
    }

    /// `value`, a string column (or a string function of one), as its codes in the dictionary
    /// of a `case`'s strings, `dictionary`, which holds its strings.
    pub(super) fn recoded_into(&self, value: Expr, dictionary: &BaseColumn) -> Result<Expr> {
        let origin = self
            .string_origin(&value)
            .ok_or_else(|| super::expr::case_of_strings(value.span))?;
        let derived = DerivedString {
            base: origin.column.clone(),
            function: StringFunction::Recode {
                into: dictionary.column.clone(),
            },
        };
        let derived = BaseColumn::new(origin.table.clone(), derived.name());
        if self
            .catalog
            .field(&derived.table, &derived.column)
            .is_none()
        {
            return Err(super::expr::case_of_strings(value.span));
        }
        let entries = self.code_entries(&origin);
        let (nullable, span) = (value.nullable, value.span);
        Ok(Expr::new(
            ExprKind::Derived {
                operand: Box::new(value),
                derived,
                entries,
            },
            DataType::Str,
            nullable,
            span,
        ))
    }

    /// The size of the dictionary of the codes kernels read from `column`, which bounds them
    /// (checked against the data when the query runs).
    fn code_entries(&self, column: &BaseColumn) -> u32 {
        self.catalog
            .codes_dictionary(&column.table, &column.column)
            .ok()
            .flatten()
            .map_or(0, |d| d.len() as u32)
    }

    pub(super) fn bind_string_comparison(
        &mut self,
        op: BinaryOp,
        column: Expr,
        text: &str,
        text_span: Span,
        span: Span,
    ) -> Result<Expr> {
        let origin = self.string_origin(&column).ok_or_else(|| {
            Diagnostic::unsupported(
                column.span,
                "only a string column of a table can be compared with a string literal",
            )
        })?;
        // The codes bound here serve estimates and the plan's display; the runtime binds the
        // literal again against the loaded column's dictionary.
        let dictionary = self
            .catalog
            .dictionary(&origin.table, &origin.column)
            .map_err(|e| {
                Diagnostic::new(
                    tessera_grammar::DiagnosticKind::Data,
                    column.span,
                    format!("cannot read `{origin}`: {e}"),
                )
            })?;
        let Some(dictionary) = dictionary else {
            return Err(Diagnostic::internal(
                column.span,
                format!("`{origin}` has no dictionary"),
            ));
        };
        let (op, bound) = match op {
            BinaryOp::Eq | BinaryOp::Ne => (op, StrBound::Exact),
            BinaryOp::Lt => (BinaryOp::Lt, StrBound::Lower),
            BinaryOp::Le => (BinaryOp::Lt, StrBound::Upper),
            BinaryOp::Gt => (BinaryOp::Ge, StrBound::Upper),
            BinaryOp::Ge => (BinaryOp::Ge, StrBound::Lower),
            other => {
                return Err(Diagnostic::internal(
                    span,
                    format!("`{}` is not a comparison", other.symbol()),
                ))
            }
        };
        let code = match bound {
            StrBound::Exact => dictionary.code_of(text).unwrap_or(-1),
            StrBound::Lower => dictionary.lower_bound(text),
            StrBound::Upper => dictionary.upper_bound(text),
        };
        let literal = Expr::new(
            ExprKind::StrCode(StrCode {
                dictionary: origin,
                text: text.to_string(),
                bound,
                code,
            }),
            DataType::Str,
            false,
            text_span,
        );
        Ok(Expr::binary(op, column, literal, DataType::Bool, span))
    }
}

/// The value of an integer literal, negative ones included (`-3`); `None` for anything else.
fn integer_literal(expr: &ast::Expr) -> Option<i64> {
    match &expr.kind {
        ast::ExprKind::Literal(ast::Literal {
            value: ast::LiteralValue::Int(value),
            ..
        }) => Some(*value),
        ast::ExprKind::Unary {
            op: ast::UnaryOp::Neg,
            operand,
        } => integer_literal(operand)?.checked_neg(),
        _ => None,
    }
}
