//! Printing logical plans as indented trees (`--emit logical`, `--emit optimized`).

use std::fmt::Write;

use tessera_grammar::ast::{JoinKind, SetOp};

use crate::columns::{ColumnId, Columns};
use crate::expr::{aggregates_text, outputs_text};

use super::{LogicalPlan, LogicalQuery};

pub fn logical_to_string(queries: &[LogicalQuery]) -> String {
    let mut out = String::new();
    for (i, query) in queries.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let names: Vec<String> = query
            .output
            .iter()
            .map(|(name, id)| {
                let info = query.columns.get(*id);
                format!("{name}: {}", info.ty)
            })
            .collect();
        let _ = writeln!(out, "query {i} -> {}", names.join(", "));
        write_plan(&mut out, &query.plan, &query.columns, 1);
    }
    out
}

pub(crate) fn write_plan(out: &mut String, plan: &LogicalPlan, columns: &Columns, depth: usize) {
    let indent = "  ".repeat(depth);
    let list = |ids: &[ColumnId]| {
        ids.iter()
            .map(|id| columns.get(*id).name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = match plan {
        LogicalPlan::Scan(scan) => {
            let _ = write!(
                out,
                "{indent}scan {} [{}] rows={}",
                scan.table,
                list(&scan.columns),
                scan.rows
            );
            for filter in &scan.filters {
                let _ = write!(out, "\n{indent}  filter {}", filter.display(columns));
            }
            writeln!(out)
        }
        LogicalPlan::Filter(f) => writeln!(out, "{indent}filter {}", f.predicate.display(columns)),
        LogicalPlan::Project(p) => {
            writeln!(out, "{indent}project {}", outputs_text(&p.outputs, columns))
        }
        LogicalPlan::Join(j) => {
            let kind = match j.kind {
                JoinKind::Inner => "join",
                JoinKind::Semi => "semi join",
                JoinKind::Anti => "anti join",
                JoinKind::Left => "left join",
            };
            let keys: Vec<String> = j
                .keys
                .iter()
                .map(|(l, r)| format!("{} == {}", l.display(columns), r.display(columns)))
                .chain(j.residual.iter().map(|r| r.display(columns).as_conjunct()))
                .collect();
            writeln!(out, "{indent}{kind} on {}", keys.join(" and "))
        }
        LogicalPlan::Aggregate(a) => {
            let aggregates = aggregates_text(&a.aggregates, columns);
            if a.keys.is_empty() {
                writeln!(out, "{indent}aggregate {{ {aggregates} }}")
            } else {
                let keys = outputs_text(&a.keys, columns);
                writeln!(out, "{indent}group {keys} {{ {aggregates} }}")
            }
        }
        LogicalPlan::Sort(s) => {
            let keys: Vec<String> = s
                .keys
                .iter()
                .map(|k| {
                    format!(
                        "{}{}",
                        k.expr.display(columns),
                        if k.descending { " desc" } else { "" }
                    )
                })
                .collect();
            writeln!(out, "{indent}sort {}", keys.join(", "))
        }
        LogicalPlan::Limit(l) => writeln!(out, "{indent}take {}", l.count),
        LogicalPlan::Distinct(_) => writeln!(out, "{indent}distinct"),
        LogicalPlan::SetOperation(s) => {
            let op = match s.op {
                SetOp::Union => "union",
                SetOp::Intersect => "intersect",
                SetOp::Except => "except",
            };
            writeln!(
                out,
                "{indent}{op}{} -> [{}]",
                if s.all { " all" } else { "" },
                list(&s.outputs)
            )
        }
        LogicalPlan::Product(_) => writeln!(out, "{indent}product"),
    };
    for input in plan.inputs() {
        write_plan(out, input, columns, depth + 1);
    }
}
