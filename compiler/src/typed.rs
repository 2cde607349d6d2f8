//! The typed script: each query's pipeline as written, with every name resolved to a
//! `ColumnId`, every expression typed, and the columns available after each stage. This is
//! what `--emit typed` prints; `logical::build` turns it into a logical plan.

use std::fmt::{self, Write};

use tessera_grammar::ast::{JoinKind, SetOp};
use tessera_grammar::Span;

use crate::columns::{ColumnId, Columns};
use crate::expr::{AggregateExpr, Expr};

#[derive(Clone, Debug)]
pub struct TypedScript {
    pub queries: Vec<TypedQuery>,
    /// The semi and anti joins whose `on` compares the two inputs other than as keys, as
    /// analysis read each condition (`crate::decorrelate` rewrites them).
    pub correlated: Vec<CorrelatedJoin>,
}

/// A semi or anti join's `on` with a condition across both inputs other than a key equality.
#[derive(Clone, Debug, PartialEq)]
pub struct CorrelatedJoin {
    /// The span of the `on` condition, which names the join in the script.
    pub on: Span,
    /// What each conjunct of `on` is, in the order written.
    pub conjuncts: Vec<ConjunctSides>,
}

/// Which inputs a conjunct of a join's `on` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConjunctSides {
    /// An equality of keys; `joined_first` when its left operand reads the joined relation.
    Key { joined_first: bool },
    /// A condition on the joined relation's columns alone.
    Joined,
    /// A condition reading both inputs: `Some(joined_first)` for a comparison with one operand
    /// over each input, `None` for any other.
    Across { joined_first: Option<bool> },
}

#[derive(Clone, Debug)]
pub struct TypedQuery {
    pub pipeline: TypedPipeline,
    pub columns: Columns,
    pub span: Span,
}

/// The columns visible at a point of a pipeline, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    pub entries: Vec<ScopeEntry>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ScopeEntry {
    pub id: ColumnId,
    pub name: String,
    /// The table name or alias that qualifies the column (`alias.name`), if any.
    pub qualifier: Option<String>,
}

impl Scope {
    pub fn ids(&self) -> Vec<ColumnId> {
        self.entries.iter().map(|e| e.id).collect()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }
}

#[derive(Clone, Debug)]
pub struct TypedPipeline {
    pub from: TypedRelation,
    pub stages: Vec<TypedStage>,
    pub output: Scope,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct TypedRelation {
    pub source: TypedSource,
    pub output: Scope,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum TypedSource {
    Table {
        table: String,
        columns: Vec<ColumnId>,
    },
    /// A parenthesized pipeline or a `let` binding (analyzed afresh at each use).
    Pipeline {
        name: Option<String>,
        pipeline: Box<TypedPipeline>,
    },
}

#[derive(Clone, Debug)]
pub struct TypedStage {
    pub kind: TypedStageKind,
    pub output: Scope,
    pub span: Span,
}

/// `id = expr`: a column a stage defines. Plain column references keep their input id.
#[derive(Clone, Debug)]
pub struct Binding {
    pub id: ColumnId,
    pub expr: Expr,
}

#[derive(Clone, Debug)]
pub struct AggregateBinding {
    pub id: ColumnId,
    pub aggregate: AggregateExpr,
}

#[derive(Clone, Debug)]
pub struct SortKey {
    pub expr: Expr,
    pub descending: bool,
}

#[derive(Clone, Debug)]
pub enum TypedStageKind {
    Where(Expr),
    Select(Vec<Binding>),
    Derive(Vec<Binding>),
    Join {
        kind: JoinKind,
        relation: TypedRelation,
        /// Equalities `left == right`, left side over the pipeline, right side over `relation`.
        keys: Vec<(Expr, Expr)>,
        /// Semi and anti joins: the conditions of `on` reading both inputs other than keys. A
        /// row of the pipeline matches a row of `relation` whose keys are equal and for which
        /// this is true.
        residual: Option<Expr>,
    },
    Group {
        keys: Vec<Binding>,
        aggregates: Vec<AggregateBinding>,
    },
    Aggregate(Vec<AggregateBinding>),
    Sort(Vec<SortKey>),
    Take(u64),
    Distinct,
    SetOp {
        op: SetOp,
        all: bool,
        relation: TypedRelation,
    },
    Product(TypedRelation),
}

/// Renders a typed script for `--emit typed`.
pub fn typed_to_string(script: &TypedScript) -> String {
    let mut out = String::new();
    for (i, query) in script.queries.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "query {i} {}", query.span);
        let mut printer = Printer {
            out: &mut out,
            columns: &query.columns,
        };
        let _ = printer.pipeline(&query.pipeline, 1);
    }
    out
}

struct Printer<'a> {
    out: &'a mut String,
    columns: &'a Columns,
}

impl Printer<'_> {
    fn line(&mut self, depth: usize, text: fmt::Arguments<'_>) -> fmt::Result {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.write_fmt(text)?;
        self.out.push('\n');
        Ok(())
    }

    fn scope(&self, scope: &Scope) -> String {
        let mut text = String::new();
        for (i, entry) in scope.entries.iter().enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            let info = self.columns.get(entry.id);
            let null = if info.nullable { "?" } else { "" };
            let _ = write!(text, "{}{}: {}{}", entry.name, entry.id, info.ty, null);
        }
        text
    }

    fn pipeline(&mut self, pipeline: &TypedPipeline, depth: usize) -> fmt::Result {
        self.relation("from", &pipeline.from, depth)?;
        for stage in &pipeline.stages {
            self.stage(stage, depth)?;
        }
        Ok(())
    }

    fn relation(&mut self, keyword: &str, relation: &TypedRelation, depth: usize) -> fmt::Result {
        match &relation.source {
            TypedSource::Table { table, .. } => {
                self.line(depth, format_args!("{keyword} {table} {}", relation.span))?;
            }
            TypedSource::Pipeline { name, pipeline } => {
                let name = name.as_deref().unwrap_or("(pipeline)");
                self.line(depth, format_args!("{keyword} {name} {}", relation.span))?;
                self.pipeline(pipeline, depth + 2)?;
            }
        }
        let scope = self.scope(&relation.output);
        self.line(depth + 1, format_args!("-> {scope}"))
    }

    fn stage(&mut self, stage: &TypedStage, depth: usize) -> fmt::Result {
        let columns = self.columns;
        let span = stage.span;
        match &stage.kind {
            TypedStageKind::Where(predicate) => {
                self.line(
                    depth,
                    format_args!("where {} {span}", predicate.display(columns)),
                )?;
            }
            TypedStageKind::Select(bindings) | TypedStageKind::Derive(bindings) => {
                let keyword = if matches!(stage.kind, TypedStageKind::Select(_)) {
                    "select"
                } else {
                    "derive"
                };
                self.line(depth, format_args!("{keyword} {span}"))?;
                for binding in bindings {
                    self.binding(binding, depth + 1)?;
                }
            }
            TypedStageKind::Join {
                kind,
                relation,
                keys,
                residual,
            } => {
                let kind = match kind {
                    JoinKind::Inner => "join",
                    JoinKind::Semi => "join semi",
                    JoinKind::Anti => "join anti",
                    JoinKind::Left => "join left",
                };
                self.relation(kind, relation, depth)?;
                for (left, right) in keys {
                    self.line(
                        depth + 1,
                        format_args!(
                            "on {} == {}: {}",
                            left.display(columns),
                            right.display(columns),
                            left.ty
                        ),
                    )?;
                }
                if let Some(residual) = residual {
                    self.line(
                        depth + 1,
                        format_args!("and {}", residual.display(columns).as_conjunct()),
                    )?;
                }
            }
            TypedStageKind::Group { keys, aggregates } => {
                self.line(depth, format_args!("group {span}"))?;
                for key in keys {
                    self.binding(key, depth + 1)?;
                }
                for aggregate in aggregates {
                    self.aggregate(aggregate, depth + 1)?;
                }
            }
            TypedStageKind::Aggregate(aggregates) => {
                self.line(depth, format_args!("aggregate {span}"))?;
                for aggregate in aggregates {
                    self.aggregate(aggregate, depth + 1)?;
                }
            }
            TypedStageKind::Sort(keys) => {
                let keys: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        let order = if k.descending { " desc" } else { "" };
                        format!("{}{order}", k.expr.display(columns))
                    })
                    .collect();
                self.line(depth, format_args!("sort {} {span}", keys.join(", ")))?;
            }
            TypedStageKind::Take(n) => self.line(depth, format_args!("take {n} {span}"))?,
            TypedStageKind::Distinct => self.line(depth, format_args!("distinct {span}"))?,
            TypedStageKind::SetOp { op, all, relation } => {
                let op = match op {
                    SetOp::Union => "union",
                    SetOp::Intersect => "intersect",
                    SetOp::Except => "except",
                };
                let all = if *all { " all" } else { "" };
                self.relation(&format!("{op}{all}"), relation, depth)?;
            }
            TypedStageKind::Product(relation) => self.relation("product", relation, depth)?,
        }
        let scope = self.scope(&stage.output);
        self.line(depth + 1, format_args!("-> {scope}"))
    }

    fn binding(&mut self, binding: &Binding, depth: usize) -> fmt::Result {
        let info = self.columns.get(binding.id);
        let expr = binding.expr.display(self.columns);
        self.line(
            depth,
            format_args!("{}{} = {expr}: {}", info.name, binding.id, binding.expr.ty),
        )
    }

    fn aggregate(&mut self, binding: &AggregateBinding, depth: usize) -> fmt::Result {
        let info = self.columns.get(binding.id);
        let aggregate = binding.aggregate.display(self.columns);
        self.line(
            depth,
            format_args!(
                "{}{} = {aggregate}: {}",
                info.name, binding.id, binding.aggregate.ty
            ),
        )
    }
}
