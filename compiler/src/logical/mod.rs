//! The logical plan: relational operators over typed columns, as a tree. Each operator is a
//! struct; `LogicalPlan` holds one of them. Columns are `ColumnId`s from the query's `Columns`,
//! so a pass can move an operator without renumbering anything above it.

mod build;
mod display;

pub use build::typed_to_logical;
pub use display::logical_to_string;

use tessera_grammar::ast::{JoinKind, SetOp};
use tessera_grammar::Span;

use crate::columns::{ColumnId, Columns};
use crate::expr::{AggregateExpr, Expr};
use crate::typed::SortKey;

/// One query, ready for optimization.
#[derive(Clone, Debug)]
pub struct LogicalQuery {
    pub plan: LogicalPlan,
    pub columns: Columns,
    /// The result's columns, named as the user sees them, in order.
    pub output: Vec<(String, ColumnId)>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum LogicalPlan {
    Scan(Scan),
    Filter(Filter),
    Project(Project),
    Join(Join),
    Aggregate(Aggregate),
    Sort(Sort),
    Limit(Limit),
    Distinct(Distinct),
    SetOperation(SetOperation),
    Product(Product),
}

/// Reads columns of a stored table, keeping the rows that pass every predicate in `filters`.
#[derive(Clone, Debug)]
pub struct Scan {
    pub table: String,
    /// The columns the scan produces; its filters may read others of the table.
    pub columns: Vec<ColumnId>,
    /// Conjuncts pushed down into the scan.
    pub filters: Vec<Expr>,
    pub rows: u64,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Filter {
    pub input: Box<LogicalPlan>,
    pub predicate: Expr,
    pub span: Span,
}

/// Produces exactly `outputs`, in order; an output whose expression is its own column passes
/// the input column through.
#[derive(Clone, Debug)]
pub struct Project {
    pub input: Box<LogicalPlan>,
    pub outputs: Vec<(ColumnId, Expr)>,
    pub span: Span,
}

/// `left` joined with `right` on `keys` (each `left_expr == right_expr`).
#[derive(Clone, Debug)]
pub struct Join {
    pub left: Box<LogicalPlan>,
    pub right: Box<LogicalPlan>,
    pub kind: JoinKind,
    pub keys: Vec<(Expr, Expr)>,
    /// Semi and anti joins: what else a match must satisfy, reading both inputs. Planned over
    /// a joined relation whose keys are unique: the one match per key is looked up and this is
    /// tested on it.
    pub residual: Option<Expr>,
    pub span: Span,
}

/// Groups by `keys` (none: one row over the whole input) and computes `aggregates`.
#[derive(Clone, Debug)]
pub struct Aggregate {
    pub input: Box<LogicalPlan>,
    pub keys: Vec<(ColumnId, Expr)>,
    pub aggregates: Vec<(ColumnId, AggregateExpr)>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Sort {
    pub input: Box<LogicalPlan>,
    pub keys: Vec<SortKey>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Limit {
    pub input: Box<LogicalPlan>,
    pub count: u64,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Distinct {
    pub input: Box<LogicalPlan>,
    pub span: Span,
}

/// `union`, `intersect` or `except` of two inputs with columns matched by position; the
/// result has the columns `outputs`.
#[derive(Clone, Debug)]
pub struct SetOperation {
    pub left: Box<LogicalPlan>,
    pub right: Box<LogicalPlan>,
    pub op: SetOp,
    pub all: bool,
    pub outputs: Vec<ColumnId>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Product {
    pub left: Box<LogicalPlan>,
    pub right: Box<LogicalPlan>,
    pub span: Span,
}

impl LogicalPlan {
    /// The columns this operator produces, in order.
    pub fn output(&self) -> Vec<ColumnId> {
        match self {
            LogicalPlan::Scan(scan) => scan.columns.clone(),
            LogicalPlan::Filter(f) => f.input.output(),
            LogicalPlan::Project(p) => p.outputs.iter().map(|(id, _)| *id).collect(),
            LogicalPlan::Join(join) => match join.kind {
                JoinKind::Semi | JoinKind::Anti => join.left.output(),
                JoinKind::Inner | JoinKind::Left => {
                    let mut columns = join.left.output();
                    columns.extend(join.right.output());
                    columns
                }
            },
            LogicalPlan::Aggregate(a) => a
                .keys
                .iter()
                .map(|(id, _)| *id)
                .chain(a.aggregates.iter().map(|(id, _)| *id))
                .collect(),
            LogicalPlan::Sort(s) => s.input.output(),
            LogicalPlan::Limit(l) => l.input.output(),
            LogicalPlan::Distinct(d) => d.input.output(),
            LogicalPlan::SetOperation(s) => s.outputs.clone(),
            LogicalPlan::Product(p) => {
                let mut columns = p.left.output();
                columns.extend(p.right.output());
                columns
            }
        }
    }

    pub fn inputs(&self) -> Vec<&LogicalPlan> {
        match self {
            LogicalPlan::Scan(_) => vec![],
            LogicalPlan::Filter(f) => vec![&f.input],
            LogicalPlan::Project(p) => vec![&p.input],
            LogicalPlan::Join(j) => vec![&j.left, &j.right],
            LogicalPlan::Aggregate(a) => vec![&a.input],
            LogicalPlan::Sort(s) => vec![&s.input],
            LogicalPlan::Limit(l) => vec![&l.input],
            LogicalPlan::Distinct(d) => vec![&d.input],
            LogicalPlan::SetOperation(s) => vec![&s.left, &s.right],
            LogicalPlan::Product(p) => vec![&p.left, &p.right],
        }
    }

    pub fn inputs_mut(&mut self) -> Vec<&mut LogicalPlan> {
        match self {
            LogicalPlan::Scan(_) => vec![],
            LogicalPlan::Filter(f) => vec![&mut f.input],
            LogicalPlan::Project(p) => vec![&mut p.input],
            LogicalPlan::Join(j) => vec![&mut j.left, &mut j.right],
            LogicalPlan::Aggregate(a) => vec![&mut a.input],
            LogicalPlan::Sort(s) => vec![&mut s.input],
            LogicalPlan::Limit(l) => vec![&mut l.input],
            LogicalPlan::Distinct(d) => vec![&mut d.input],
            LogicalPlan::SetOperation(s) => vec![&mut s.left, &mut s.right],
            LogicalPlan::Product(p) => vec![&mut p.left, &mut p.right],
        }
    }

    /// Every expression this operator evaluates (not those of its inputs).
    pub fn expressions(&self) -> Vec<&Expr> {
        match self {
            LogicalPlan::Scan(scan) => scan.filters.iter().collect(),
            LogicalPlan::Filter(f) => vec![&f.predicate],
            LogicalPlan::Project(p) => p.outputs.iter().map(|(_, e)| e).collect(),
            LogicalPlan::Join(j) => j
                .keys
                .iter()
                .flat_map(|(l, r)| [l, r])
                .chain(&j.residual)
                .collect(),
            LogicalPlan::Aggregate(a) => a
                .keys
                .iter()
                .map(|(_, e)| e)
                .chain(a.aggregates.iter().filter_map(|(_, agg)| agg.arg.as_ref()))
                .collect(),
            LogicalPlan::Sort(s) => s.keys.iter().map(|k| &k.expr).collect(),
            LogicalPlan::Limit(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::SetOperation(_)
            | LogicalPlan::Product(_) => vec![],
        }
    }

    /// Applies `rewrite` to every expression this operator evaluates (not its inputs').
    pub fn map_expressions(&mut self, rewrite: &mut impl FnMut(Expr) -> Expr) {
        let mut apply = |e: &mut Expr| {
            let taken = std::mem::replace(e, Expr::boolean(true, e.span));
            *e = rewrite(taken);
        };
        match self {
            LogicalPlan::Scan(scan) => scan.filters.iter_mut().for_each(&mut apply),
            LogicalPlan::Filter(f) => apply(&mut f.predicate),
            LogicalPlan::Project(p) => p.outputs.iter_mut().for_each(|(_, e)| apply(e)),
            LogicalPlan::Join(j) => {
                j.keys.iter_mut().for_each(|(l, r)| {
                    apply(l);
                    apply(r);
                });
                j.residual.iter_mut().for_each(apply);
            }
            LogicalPlan::Aggregate(a) => {
                a.keys.iter_mut().for_each(|(_, e)| apply(e));
                a.aggregates
                    .iter_mut()
                    .filter_map(|(_, agg)| agg.arg.as_mut())
                    .for_each(apply);
            }
            LogicalPlan::Sort(s) => s.keys.iter_mut().for_each(|k| apply(&mut k.expr)),
            LogicalPlan::Limit(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::SetOperation(_)
            | LogicalPlan::Product(_) => {}
        }
    }

    /// A placeholder used while a pass moves operators around.
    pub(crate) fn empty() -> LogicalPlan {
        LogicalPlan::Scan(Scan {
            table: String::new(),
            columns: vec![],
            filters: vec![],
            rows: 0,
            span: Span::default(),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            LogicalPlan::Scan(_) => "scan",
            LogicalPlan::Filter(_) => "filter",
            LogicalPlan::Project(_) => "project",
            LogicalPlan::Join(_) => "join",
            LogicalPlan::Aggregate(_) => "aggregate",
            LogicalPlan::Sort(_) => "sort",
            LogicalPlan::Limit(_) => "limit",
            LogicalPlan::Distinct(_) => "distinct",
            LogicalPlan::SetOperation(_) => "set operation",
            LogicalPlan::Product(_) => "product",
        }
    }
}
