//! Typed pipelines to logical plans: each stage wraps the plan built so far.

use tessera_storage::Catalog;

use crate::columns::{ColumnId, Columns};
use crate::expr::Expr;
use crate::typed::{
    TypedPipeline, TypedQuery, TypedRelation, TypedScript, TypedSource, TypedStageKind,
};

use super::{
    Aggregate, Distinct, Filter, Join, Limit, LogicalPlan, LogicalQuery, Product, Project, Scan,
    SetOperation, Sort,
};

pub fn typed_to_logical(script: &TypedScript, catalog: &Catalog) -> Vec<LogicalQuery> {
    script
        .queries
        .iter()
        .map(|query| query_to_logical(query, catalog))
        .collect()
}

fn query_to_logical(query: &TypedQuery, catalog: &Catalog) -> LogicalQuery {
    let builder = Builder {
        columns: &query.columns,
        catalog,
    };
    let plan = builder.pipeline(&query.pipeline);
    let output = query
        .pipeline
        .output
        .entries
        .iter()
        .map(|e| (e.name.clone(), e.id))
        .collect();
    LogicalQuery {
        plan,
        columns: query.columns.clone(),
        output,
        span: query.span,
    }
}

struct Builder<'a> {
    columns: &'a Columns,
    catalog: &'a Catalog,
}

impl Builder<'_> {
    fn pipeline(&self, pipeline: &TypedPipeline) -> LogicalPlan {
        let mut plan = self.relation(&pipeline.from);
        for stage in &pipeline.stages {
            plan = match &stage.kind {
                TypedStageKind::Where(predicate) => LogicalPlan::Filter(Filter {
                    input: Box::new(plan),
                    predicate: predicate.clone(),
                    span: stage.span,
                }),
                TypedStageKind::Select(bindings) => LogicalPlan::Project(Project {
                    input: Box::new(plan),
                    outputs: bindings.iter().map(|b| (b.id, b.expr.clone())).collect(),
                    span: stage.span,
                }),
                TypedStageKind::Derive(bindings) => {
                    let mut outputs = self.pass_through(&plan.output(), stage.span);
                    outputs.extend(bindings.iter().map(|b| (b.id, b.expr.clone())));
                    LogicalPlan::Project(Project {
                        input: Box::new(plan),
                        outputs,
                        span: stage.span,
                    })
                }
                TypedStageKind::Join {
                    kind,
                    relation,
                    keys,
                    residual,
                } => LogicalPlan::Join(Join {
                    left: Box::new(plan),
                    right: Box::new(self.relation(relation)),
                    kind: *kind,
                    keys: keys.clone(),
                    residual: residual.clone(),
                    span: stage.span,
                }),
                TypedStageKind::Group { keys, aggregates } => LogicalPlan::Aggregate(Aggregate {
                    input: Box::new(plan),
                    keys: keys.iter().map(|b| (b.id, b.expr.clone())).collect(),
                    aggregates: aggregates
                        .iter()
                        .map(|a| (a.id, a.aggregate.clone()))
                        .collect(),
                    span: stage.span,
                }),
                TypedStageKind::Aggregate(aggregates) => LogicalPlan::Aggregate(Aggregate {
                    input: Box::new(plan),
                    keys: vec![],
                    aggregates: aggregates
                        .iter()
                        .map(|a| (a.id, a.aggregate.clone()))
                        .collect(),
                    span: stage.span,
                }),
                TypedStageKind::Sort(keys) => LogicalPlan::Sort(Sort {
                    input: Box::new(plan),
                    keys: keys.clone(),
                    span: stage.span,
                }),
                TypedStageKind::Take(count) => LogicalPlan::Limit(Limit {
                    input: Box::new(plan),
                    count: *count,
                    span: stage.span,
                }),
                TypedStageKind::Distinct => LogicalPlan::Distinct(Distinct {
                    input: Box::new(plan),
                    span: stage.span,
                }),
                TypedStageKind::SetOp { op, all, relation } => {
                    LogicalPlan::SetOperation(SetOperation {
                        left: Box::new(plan),
                        right: Box::new(self.relation(relation)),
                        op: *op,
                        all: *all,
                        outputs: stage.output.ids(),
                        span: stage.span,
                    })
                }
                TypedStageKind::Product(relation) => LogicalPlan::Product(Product {
                    left: Box::new(plan),
                    right: Box::new(self.relation(relation)),
                    span: stage.span,
                }),
            };
        }
        // A pipeline's visible columns can be fewer than its operators produce (a semi join
        // or a stage that drops columns); the plan's output must match what the user sees.
        let visible = pipeline.output.ids();
        if plan.output() != visible {
            plan = LogicalPlan::Project(Project {
                outputs: self.pass_through(&visible, pipeline.span),
                input: Box::new(plan),
                span: pipeline.span,
            });
        }
        plan
    }

    fn relation(&self, relation: &TypedRelation) -> LogicalPlan {
        match &relation.source {
            TypedSource::Table { table, columns } => LogicalPlan::Scan(Scan {
                table: table.clone(),
                columns: columns.clone(),
                filters: vec![],
                rows: self.catalog.table(table).map_or(0, |t| t.rows),
                span: relation.span,
            }),
            TypedSource::Pipeline { pipeline, .. } => self.pipeline(pipeline),
        }
    }

    fn pass_through(&self, ids: &[ColumnId], span: tessera_grammar::Span) -> Vec<(ColumnId, Expr)> {
        ids.iter()
            .map(|&id| (id, Expr::column(id, self.columns, span)))
            .collect()
    }
}
