//! The `--emit ast` form: an indented tree, one node per line with its span. Expressions are
//! printed inline, fully parenthesized, so that precedence is visible: `((a + (b * c)) > 3)`.

use std::fmt::Write as _;

use crate::ast::{
    Assignment, Expr, ExprKind, Item, JoinKind, Literal, LiteralValue, Pipeline, Relation,
    RelationSource, Script, SelectItem, SetOp, SortKey, Stage, StageKind,
};
use crate::lexer::quote_string;
use crate::span::Span;

/// Renders a script as an indented tree, for `--emit ast` and snapshot tests.
pub fn ast_to_string(script: &Script) -> String {
    let mut printer = Printer::default();
    for item in &script.items {
        printer.item(item);
    }
    printer.out
}

/// An expression in fully parenthesized infix form, without spans.
pub fn expr_to_string(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr);
    out
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line(&mut self, text: &str, span: Span) {
        // Writing into a String cannot fail.
        let _ = writeln!(
            self.out,
            "{:width$}{text} {span}",
            "",
            width = self.indent * 2
        );
    }

    fn nested(&mut self, body: impl FnOnce(&mut Printer)) {
        self.indent += 1;
        body(self);
        self.indent -= 1;
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Table(table) => {
                self.line(&format!("table {}", table.name.name), table.span);
                self.nested(|p| {
                    for column in &table.columns {
                        let nullable = if column.nullable { "?" } else { "" };
                        p.line(
                            &format!("column {}: {}{nullable}", column.name.name, column.ty),
                            column.span,
                        );
                    }
                });
            }
            Item::Let(binding) => {
                self.line(&format!("let {}", binding.name.name), binding.span);
                self.nested(|p| p.pipeline(&binding.pipeline));
            }
            Item::Query(pipeline) => self.pipeline(pipeline),
        }
    }

    fn pipeline(&mut self, pipeline: &Pipeline) {
        self.line("query", pipeline.span);
        self.nested(|p| {
            p.relation("from", &pipeline.from);
            for stage in &pipeline.stages {
                p.stage(stage);
            }
        });
    }

    fn relation(&mut self, label: &str, relation: &Relation) {
        let alias = match &relation.alias {
            Some(alias) => format!(" as {}", alias.name),
            None => String::new(),
        };
        match &relation.source {
            RelationSource::Named(name) => {
                self.line(&format!("{label} {}{alias}", name.name), relation.span)
            }
            RelationSource::Pipeline(pipeline) => {
                self.line(&format!("{label} (...){alias}"), relation.span);
                self.nested(|p| p.pipeline(pipeline));
            }
        }
    }

    fn stage(&mut self, stage: &Stage) {
        match &stage.kind {
            StageKind::Where(predicate) => {
                self.line("where", stage.span);
                self.nested(|p| p.expr(predicate));
            }
            StageKind::Select(items) => {
                self.line("select", stage.span);
                self.nested(|p| p.select_items("item", items));
            }
            StageKind::Derive(assignments) => {
                self.line("derive", stage.span);
                self.nested(|p| p.assignments("column", assignments));
            }
            StageKind::Join { kind, relation, on } => {
                self.line(&format!("join {}", join_kind_name(*kind)), stage.span);
                self.nested(|p| {
                    p.relation("relation", relation);
                    p.line(&format!("on {}", expr_to_string(on)), on.span);
                });
            }
            StageKind::Group { keys, aggregates } => {
                self.line("group", stage.span);
                self.nested(|p| {
                    p.select_items("key", keys);
                    p.assignments("aggregate", aggregates);
                });
            }
            StageKind::Aggregate(aggregates) => {
                self.line("aggregate", stage.span);
                self.nested(|p| p.assignments("aggregate", aggregates));
            }
            StageKind::Sort(keys) => {
                self.line("sort", stage.span);
                self.nested(|p| {
                    for key in keys {
                        p.sort_key(key);
                    }
                });
            }
            StageKind::Take(count) => {
                self.line(&format!("take {}", literal_to_string(count)), stage.span)
            }
            StageKind::Distinct => self.line("distinct", stage.span),
            StageKind::SetOp { op, all, relation } => {
                let all = if *all { " all" } else { "" };
                self.line(&format!("{}{all}", set_op_name(*op)), stage.span);
                self.nested(|p| p.relation("relation", relation));
            }
            StageKind::Product(relation) => {
                self.line("product", stage.span);
                self.nested(|p| p.relation("relation", relation));
            }
        }
    }

    fn expr(&mut self, expr: &Expr) {
        self.line(&expr_to_string(expr), expr.span);
    }

    fn select_items(&mut self, label: &str, items: &[SelectItem]) {
        for item in items {
            let text = match &item.name {
                Some(name) => format!("{label} {} = {}", name.name, expr_to_string(&item.expr)),
                None => format!("{label} {}", expr_to_string(&item.expr)),
            };
            self.line(&text, item.span);
        }
    }

    fn assignments(&mut self, label: &str, assignments: &[Assignment]) {
        for assignment in assignments {
            let text = format!(
                "{label} {} = {}",
                assignment.name.name,
                expr_to_string(&assignment.expr)
            );
            self.line(&text, assignment.span);
        }
    }

    fn sort_key(&mut self, key: &SortKey) {
        let direction = if key.descending { "desc" } else { "asc" };
        self.line(
            &format!("key {} {direction}", expr_to_string(&key.expr)),
            key.span,
        );
    }
}

fn join_kind_name(kind: JoinKind) -> &'static str {
    match kind {
        JoinKind::Inner => "inner",
        JoinKind::Semi => "semi",
        JoinKind::Anti => "anti",
        JoinKind::Left => "left",
    }
}

fn set_op_name(op: SetOp) -> &'static str {
    match op {
        SetOp::Union => "union",
        SetOp::Intersect => "intersect",
        SetOp::Except => "except",
    }
}

fn literal_to_string(literal: &Literal) -> String {
    match &literal.value {
        LiteralValue::Int(value) => value.to_string(),
        LiteralValue::Float(value) => format!("{value:?}"),
        LiteralValue::Str(value) => quote_string(value),
        LiteralValue::Temporal(value) => format!("@{value}"),
        LiteralValue::Interval { count, unit } => {
            let plural = if *count == 1 { "" } else { "s" };
            format!("{count} {}{plural}", unit.name())
        }
        LiteralValue::Bool(value) => value.to_string(),
        LiteralValue::Null => "null".into(),
    }
}

fn write_expr(out: &mut String, expr: &Expr) {
    match &expr.kind {
        ExprKind::Literal(literal) => out.push_str(&literal_to_string(literal)),
        ExprKind::Column { qualifier, name } => {
            if let Some(qualifier) = qualifier {
                out.push_str(&qualifier.name);
                out.push('.');
            }
            out.push_str(&name.name);
        }
        ExprKind::Unary { op, operand } => {
            out.push('(');
            out.push_str(op.symbol());
            if op.symbol().ends_with(|c: char| c.is_ascii_alphabetic()) {
                out.push(' ');
            }
            write_expr(out, operand);
            out.push(')');
        }
        ExprKind::Binary { op, left, right } => {
            out.push('(');
            write_expr(out, left);
            out.push_str(&format!(" {} ", op.symbol()));
            write_expr(out, right);
            out.push(')');
        }
        ExprKind::Between {
            expr,
            low,
            high,
            negated,
        } => {
            out.push('(');
            write_expr(out, expr);
            out.push_str(if *negated {
                " not between "
            } else {
                " between "
            });
            write_expr(out, low);
            out.push_str(" and ");
            write_expr(out, high);
            out.push(')');
        }
        ExprKind::InList {
            expr,
            list,
            negated,
        } => {
            out.push('(');
            write_expr(out, expr);
            out.push_str(if *negated { " not in (" } else { " in (" });
            write_list(out, list);
            out.push_str("))");
        }
        ExprKind::Like {
            expr,
            pattern,
            negated,
        } => {
            out.push('(');
            write_expr(out, expr);
            out.push_str(if *negated { " not like " } else { " like " });
            write_expr(out, pattern);
            out.push(')');
        }
        ExprKind::IsNull { expr, negated } => {
            out.push('(');
            write_expr(out, expr);
            out.push_str(if *negated {
                " is not null)"
            } else {
                " is null)"
            });
        }
        ExprKind::Case {
            branches,
            otherwise,
        } => {
            out.push_str("(case");
            for (condition, value) in branches {
                out.push_str(" when ");
                write_expr(out, condition);
                out.push_str(" then ");
                write_expr(out, value);
            }
            if let Some(otherwise) = otherwise {
                out.push_str(" else ");
                write_expr(out, otherwise);
            }
            out.push_str(" end)");
        }
        ExprKind::Cast { expr, ty } => {
            out.push('(');
            write_expr(out, expr);
            out.push_str(" as ");
            out.push_str(&ty.to_string());
            out.push(')');
        }
        ExprKind::Call {
            function,
            args,
            distinct,
        } => {
            out.push_str(&function.name);
            out.push('(');
            if *distinct {
                out.push_str("distinct ");
            }
            write_list(out, args);
            out.push(')');
        }
    }
}

fn write_list(out: &mut String, exprs: &[Expr]) {
    for (i, expr) in exprs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, expr);
    }
}
