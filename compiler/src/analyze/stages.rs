//! Analysis of each pipeline stage: what it computes and which columns it leaves visible.

use tessera_grammar::ast::{
    self, BinaryOp, ExprKind as AstExpr, JoinKind, LiteralValue, StageKind,
};
use tessera_grammar::{Diagnostic, Span};
use tessera_stdlib::Aggregate;
use tessera_storage::DataType;

use crate::columns::{ColumnId, ColumnInfo};
use crate::expr::{AggregateExpr, Expr};
use crate::typed::{
    AggregateBinding, Binding, ConjunctSides, CorrelatedJoin, Scope, ScopeEntry, SortKey,
    TypedPipeline, TypedRelation, TypedSource, TypedStage, TypedStageKind,
};

use super::computed::{computed_entries, ComputedEntries};
use super::expr::Operand;
use super::scope::PipelineContext;
use super::{Analyzer, Result};

impl Analyzer<'_> {
    pub(super) fn stage(
        &mut self,
        stage: &ast::Stage,
        context: &PipelineContext,
    ) -> Result<Vec<TypedStage>> {
        let input = &context.scope;
        let (kind, output) = match &stage.kind {
            StageKind::Where(predicate) => {
                let predicate = self.condition(predicate, context, "`where`")?;
                (TypedStageKind::Where(predicate), input.clone())
            }
            StageKind::Select(items) => {
                let (bindings, output) = self.select_items(items, context)?;
                (TypedStageKind::Select(bindings), output)
            }
            StageKind::Derive(assignments) => self.derive(assignments, context)?,
            StageKind::Join { kind, relation, on } => self.join(*kind, relation, on, context)?,
            StageKind::Group { keys, aggregates } => {
                let taken = keys
                    .iter()
                    .filter_map(|item| match (&item.name, &item.expr.kind) {
                        (Some(name), _) | (None, AstExpr::Column { name, .. }) => {
                            Some((name.name.clone(), name.span))
                        }
                        _ => None,
                    })
                    .collect();
                let computed = computed_entries(aggregates);
                let entries = computed.as_ref().map_or(aggregates, |c| &c.aggregates);
                let (keys, mut output) = self.select_items(keys, context)?;
                let key_count = keys.len();
                let (aggregates, distinct) =
                    self.aggregates(entries, context, &mut output, true, taken)?;
                let stages = match distinct {
                    Some(counted) => {
                        self.of_distinct_values(keys, aggregates, counted, output, stage.span)
                    }
                    None => vec![TypedStage {
                        kind: TypedStageKind::Group { keys, aggregates },
                        output,
                        span: stage.span,
                    }],
                };
                return self.then_compute(stages, key_count, computed);
            }
            StageKind::Aggregate(aggregates) => {
                let computed = computed_entries(aggregates);
                let entries = computed.as_ref().map_or(aggregates, |c| &c.aggregates);
                let mut output = Scope::default();
                let (aggregates, distinct) =
                    self.aggregates(entries, context, &mut output, false, Vec::new())?;
                let stages = match distinct {
                    Some(counted) => {
                        self.of_distinct_values(Vec::new(), aggregates, counted, output, stage.span)
                    }
                    None => vec![TypedStage {
                        kind: TypedStageKind::Aggregate(aggregates),
                        output,
                        span: stage.span,
                    }],
                };
                return self.then_compute(stages, 0, computed);
            }
            StageKind::Sort(keys) => {
                let keys = keys
                    .iter()
                    .map(|key| {
                        Ok(SortKey {
                            expr: self.value(&key.expr, context)?,
                            descending: key.descending,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                (TypedStageKind::Sort(keys), input.clone())
            }
            StageKind::Take(literal) => {
                let count = match literal.value {
                    LiteralValue::Int(n) if n >= 0 => n as u64,
                    _ => {
                        return Err(Diagnostic::type_error(
                            literal.span,
                            "`take` needs a count of rows, a whole number of zero or more",
                        ))
                    }
                };
                (TypedStageKind::Take(count), input.clone())
            }
            StageKind::Distinct => (TypedStageKind::Distinct, input.clone()),
            StageKind::SetOp { op, all, relation } => {
                let relation = self.relation(relation)?;
                let keyword = match op {
                    ast::SetOp::Union => "union",
                    ast::SetOp::Intersect => "intersect",
                    ast::SetOp::Except => "except",
                };
                let output = self.set_operation_output(keyword, input, &relation, stage.span)?;
                (
                    TypedStageKind::SetOp {
                        op: *op,
                        all: *all,
                        relation,
                    },
                    output,
                )
            }
            StageKind::Product(relation) => {
                let relation = self.relation(relation)?;
                let mut output = input.clone();
                output
                    .entries
                    .extend(relation.output.entries.iter().cloned());
                (TypedStageKind::Product(relation), output)
            }
        };
        Ok(vec![TypedStage {
            kind,
            output,
            span: stage.span,
        }])
    }

    /// `stages` (a grouping whose first `key_count` columns are its keys), followed, for a
    /// block whose entries compute with aggregates, by the `select` computing them.
    fn then_compute(
        &mut self,
        mut stages: Vec<TypedStage>,
        key_count: usize,
        computed: Option<ComputedEntries>,
    ) -> Result<Vec<TypedStage>> {
        let (Some(computed), Some(grouping)) = (computed, stages.last()) else {
            return Ok(stages);
        };
        let span = grouping.span;
        let scope = grouping.output.clone();
        let keys = scope.entries[..key_count].iter().map(|entry| {
            let ident = |name: &str| ast::Ident {
                name: name.to_string(),
                span,
            };
            ast::SelectItem {
                name: None,
                expr: ast::Expr {
                    kind: AstExpr::Column {
                        qualifier: entry.qualifier.as_deref().map(ident),
                        name: ident(&entry.name),
                    },
                    span,
                },
                span,
            }
        });
        let items: Vec<ast::SelectItem> = keys.chain(computed.entries).collect();
        let (bindings, output) = self.select_items(&items, &PipelineContext::new(scope))?;
        stages.push(TypedStage {
            kind: TypedStageKind::Select(bindings),
            output,
            span,
        });
        Ok(stages)
    }

    /// A `group` (or `aggregate`) whose aggregates all take the distinct values of `counted`
    /// (`count(distinct x)`, `sum(distinct x)`), as two: the distinct combinations of the keys
    /// and `counted` (a group without aggregates), then a group of those by the keys taking the
    /// aggregates over `counted`'s values, which are now distinct within each group (the
    /// aggregates skip the null one, as SQL's do).
    fn of_distinct_values(
        &mut self,
        keys: Vec<Binding>,
        aggregates: Vec<AggregateBinding>,
        counted: Expr,
        output: Scope,
        span: Span,
    ) -> Vec<TypedStage> {
        let fresh = |analyzer: &mut Self, name: String, expr: &Expr| {
            let origin = expr
                .as_column()
                .and_then(|c| analyzer.columns.get(c).origin.clone());
            analyzer.columns.add(ColumnInfo {
                name,
                ty: expr.ty,
                nullable: expr.nullable,
                origin,
            })
        };
        let mut inner_keys = Vec::with_capacity(keys.len() + 1);
        let mut inner_output = Scope::default();
        let mut outer_keys = Vec::with_capacity(keys.len());
        for key in &keys {
            let name = self.columns.get(key.id).name.clone();
            let id = fresh(self, name.clone(), &key.expr);
            inner_keys.push(Binding {
                id,
                expr: key.expr.clone(),
            });
            inner_output.entries.push(ScopeEntry {
                id,
                name,
                qualifier: None,
            });
            outer_keys.push(Binding {
                id: key.id,
                expr: Expr::column(id, &self.columns, span),
            });
        }
        let value = fresh(self, "distinct value".to_string(), &counted);
        inner_keys.push(Binding {
            id: value,
            expr: counted,
        });
        let column = Expr::column(value, &self.columns, span);
        let outer_aggregates = aggregates
            .into_iter()
            .map(|binding| AggregateBinding {
                id: binding.id,
                aggregate: AggregateExpr {
                    arg: Some(column.clone()),
                    ..binding.aggregate
                },
            })
            .collect();
        let inner = TypedStage {
            kind: TypedStageKind::Group {
                keys: inner_keys,
                aggregates: Vec::new(),
            },
            output: inner_output,
            span,
        };
        let kind = if keys.is_empty() {
            TypedStageKind::Aggregate(outer_aggregates)
        } else {
            TypedStageKind::Group {
                keys: outer_keys,
                aggregates: outer_aggregates,
            }
        };
        vec![inner, TypedStage { kind, output, span }]
    }

    /// `select` items and `group` keys: plain column references keep their column; anything
    /// else becomes a new column and must be named.
    fn select_items(
        &mut self,
        items: &[ast::SelectItem],
        context: &PipelineContext,
    ) -> Result<(Vec<Binding>, Scope)> {
        let mut bindings = Vec::with_capacity(items.len());
        let mut output = Scope::default();
        let mut names: Vec<(String, Span)> = Vec::new();
        for item in items {
            let expr = self.value(&item.expr, context)?;
            let plain = expr.as_column();
            let name = match (&item.name, &item.expr.kind) {
                (Some(name), _) => name.clone(),
                (None, AstExpr::Column { name, .. }) => name.clone(),
                (None, _) => {
                    return Err(Diagnostic::name(item.span, "this expression needs a name")
                        .with_hint("name it: `name = expression`"))
                }
            };
            check_unique(&mut names, &name)?;
            let (id, qualifier) = match plain {
                Some(id) if self.columns.get(id).name == name.name => {
                    let qualifier = context
                        .scope
                        .entries
                        .iter()
                        .find(|e| e.id == id)
                        .and_then(|e| e.qualifier.clone());
                    (id, qualifier)
                }
                _ => (self.new_column(&name.name, &expr), None),
            };
            output.entries.push(ScopeEntry {
                id,
                name: name.name.clone(),
                qualifier,
            });
            bindings.push(Binding { id, expr });
        }
        Ok((bindings, output))
    }

    fn derive(
        &mut self,
        assignments: &[ast::Assignment],
        context: &PipelineContext,
    ) -> Result<(TypedStageKind, Scope)> {
        let mut output = context.scope.clone();
        let mut bindings = Vec::with_capacity(assignments.len());
        let mut names: Vec<(String, Span)> = Vec::new();
        for assignment in assignments {
            let name = &assignment.name;
            if context.scope.names().any(|n| n == name.name) {
                return Err(Diagnostic::name(
                    name.span,
                    format!("column `{}` already exists", name.name),
                )
                .with_hint("`derive` only adds columns; use `select` to replace one"));
            }
            check_unique(&mut names, name)?;
            let expr = self.value(&assignment.expr, context)?;
            let id = self.new_column(&name.name, &expr);
            output.entries.push(ScopeEntry {
                id,
                name: name.name.clone(),
                qualifier: None,
            });
            bindings.push(Binding { id, expr });
        }
        Ok((TypedStageKind::Derive(bindings), output))
    }

    fn join(
        &mut self,
        kind: JoinKind,
        relation: &ast::Relation,
        on: &ast::Expr,
        context: &PipelineContext,
    ) -> Result<(TypedStageKind, Scope)> {
        let right = self.relation(relation)?;
        let left_ids = context.scope.ids();
        let right_ids = right.output.ids();
        let mut both = context.scope.clone();
        both.entries.extend(right.output.entries.iter().cloned());
        let both = PipelineContext::over(both);

        let mut keys = Vec::new();
        let mut right_filters = Vec::new();
        let mut across = Vec::new();
        let mut sides = Vec::new();
        for conjunct in split_conjunction(on) {
            if let Some((l, r, joined_first)) =
                self.join_key(conjunct, &both, &left_ids, &right_ids)?
            {
                keys.push(self.check_join_key(conjunct, l, r)?);
                sides.push(ConjunctSides::Key { joined_first });
                continue;
            }
            // Any other condition reading the joined relation only selects which of its rows
            // take part, for every kind of join, exactly as a `where` inside it would.
            let condition = self.condition(conjunct, &both, "`on`")?;
            let used = condition.columns_used();
            if used.iter().all(|c| right_ids.contains(c)) {
                right_filters.push(condition);
                sides.push(ConjunctSides::Joined);
                continue;
            }
            let reads_both = used.iter().any(|c| right_ids.contains(c));
            if reads_both && matches!(kind, JoinKind::Semi | JoinKind::Anti) {
                sides.push(ConjunctSides::Across {
                    joined_first: self.compared_across(conjunct, &both, &left_ids, &right_ids)?,
                });
                across.push(condition);
                continue;
            }
            let message = if reads_both {
                "conditions in `on` comparing both inputs other than equalities of keys are supported in `join semi` and `join anti` only"
            } else {
                "conditions in `on` on the pipeline's own columns are not supported yet"
            };
            return Err(Diagnostic::unsupported(conjunct.span, message).with_hint(
                "write keys as `left_column == right_column`; filter the pipeline with a `where` before the join",
            ));
        }
        if keys.is_empty() {
            return Err(Diagnostic::type_error(
                on.span,
                "`on` needs at least one equality between the pipeline's columns and the joined relation's",
            )
            .with_hint("write `left_column == right_column`; use `product` to pair every row with every row"));
        }
        let residual = (!across.is_empty()).then(|| Expr::conjunction(across, on.span));
        if residual.is_some() {
            self.correlated.push(CorrelatedJoin {
                on: on.span,
                conjuncts: sides,
            });
        }
        let right = filtered(right, right_filters);
        let output = match kind {
            JoinKind::Inner => both.scope,
            JoinKind::Semi | JoinKind::Anti => context.scope.clone(),
            JoinKind::Left => {
                // Unmatched rows get nulls on the right; marking the right columns nullable
                // everywhere is conservative below the join and exact above it.
                for id in &right_ids {
                    self.columns.set_nullable(*id);
                }
                both.scope
            }
        };
        Ok((
            TypedStageKind::Join {
                kind,
                relation: right,
                keys,
                residual,
            },
            output,
        ))
    }

    /// `a == b` with `a` over one input and `b` over the other, as (pipeline side, joined
    /// side, whether `a` is the joined side); `None` for any other conjunct.
    fn join_key(
        &mut self,
        conjunct: &ast::Expr,
        both: &PipelineContext,
        left_ids: &[ColumnId],
        right_ids: &[ColumnId],
    ) -> Result<Option<(Expr, Expr, bool)>> {
        let AstExpr::Binary {
            op: BinaryOp::Eq,
            left,
            right,
        } = &conjunct.kind
        else {
            return Ok(None);
        };
        Ok(self
            .operands_across(left, right, both, left_ids, right_ids)?
            .map(|(a, b, joined_first)| match joined_first {
                false => (a, b, false),
                true => (b, a, true),
            }))
    }

    /// For a comparison `a op b` (other than `==`, a key) reading both inputs: whether `a`
    /// reads the joined relation alone and `b` the pipeline alone (`Some(true)`), or the
    /// reverse (`Some(false)`); `None` for any other condition.
    fn compared_across(
        &mut self,
        conjunct: &ast::Expr,
        both: &PipelineContext,
        left_ids: &[ColumnId],
        right_ids: &[ColumnId],
    ) -> Result<Option<bool>> {
        let AstExpr::Binary { op, left, right } = &conjunct.kind else {
            return Ok(None);
        };
        if !op.is_comparison() || *op == BinaryOp::Eq {
            return Ok(None);
        }
        Ok(self
            .operands_across(left, right, both, left_ids, right_ids)?
            .map(|(_, _, joined_first)| joined_first))
    }

    /// `left` and `right` analyzed, when one reads only the pipeline's columns and the other
    /// only the joined relation's, with whether `left` is the joined one's.
    fn operands_across(
        &mut self,
        left: &ast::Expr,
        right: &ast::Expr,
        both: &PipelineContext,
        left_ids: &[ColumnId],
        right_ids: &[ColumnId],
    ) -> Result<Option<(Expr, Expr, bool)>> {
        // A string literal on either side makes this a condition, analyzed as one.
        let (Operand::Value(a), Operand::Value(b)) =
            (self.operand(left, both)?, self.operand(right, both)?)
        else {
            return Ok(None);
        };
        let over = |e: &Expr, ids: &[ColumnId]| {
            let used = e.columns_used();
            !used.is_empty() && used.iter().all(|c| ids.contains(c))
        };
        Ok(if over(&a, left_ids) && over(&b, right_ids) {
            Some((a, b, false))
        } else if over(&a, right_ids) && over(&b, left_ids) {
            Some((a, b, true))
        } else {
            None
        })
    }

    /// Checks that two keys can be compared by a hash join; integers of different widths are
    /// compared as the wider type, as SQL does.
    fn check_join_key(&self, conjunct: &ast::Expr, l: Expr, r: Expr) -> Result<(Expr, Expr)> {
        let (l, r) = match (l.ty, r.ty) {
            (DataType::I32, DataType::I64) => (l.cast(DataType::I64), r),
            (DataType::I64, DataType::I32) => (l, r.cast(DataType::I64)),
            _ => (l, r),
        };
        if l.ty != r.ty {
            return Err(Diagnostic::type_error(
                conjunct.span,
                format!("join keys have different types: `{}` and `{}`", l.ty, r.ty),
            )
            .with_secondary(l.span, format!("this is `{}`", l.ty))
            .with_secondary(r.span, format!("this is `{}`", r.ty))
            .with_hint("cast one side with `as` so both have the same type"));
        }
        if l.ty.is_float() || l.ty == DataType::Bool {
            return Err(Diagnostic::unsupported(
                conjunct.span,
                "joining on floating-point or `bool` keys is not supported",
            )
            .with_label(format!("these keys are `{}`", l.ty))
            .with_hint("cast both keys to an integer type with `as`"));
        }
        if l.ty == DataType::Str && !self.both_stored(&l, &r) {
            return Err(Diagnostic::unsupported(
                conjunct.span,
                "joining on a string that is not a column of a table is not supported yet",
            )
            .with_hint("join on the table's column itself"));
        }
        Ok((l, r))
    }

    fn aggregates(
        &mut self,
        assignments: &[ast::Assignment],
        context: &PipelineContext,
        output: &mut Scope,
        grouped: bool,
        taken: Vec<(String, Span)>,
    ) -> Result<(Vec<AggregateBinding>, Option<Expr>)> {
        let mut names = taken;
        let mut bindings = Vec::with_capacity(assignments.len());
        // The argument of `count(distinct x)` (or `sum(distinct x)`, ...), when every aggregate
        // takes the distinct values of the same one.
        let mut distinct: Option<Expr> = None;
        let mut plain = false;
        for assignment in assignments {
            check_unique(&mut names, &assignment.name)?;
            let (aggregate, counts_distinct) =
                self.aggregate_call(&assignment.expr, context, grouped)?;
            match (counts_distinct, &distinct, &aggregate.arg) {
                (false, _, _) => plain = true,
                (true, None, Some(arg)) => distinct = Some(arg.clone()),
                (true, Some(first), Some(arg)) if first.kind == arg.kind => {}
                (true, _, _) => plain = true,
            }
            if plain && distinct.is_some() {
                return Err(Diagnostic::unsupported(
                    assignment.expr.span,
                    "an aggregate of distinct values beside other aggregates is not supported yet",
                )
                .with_hint("compute it in a `group` of its own"));
            }
            // Over a group every aggregate sees at least one row; over a whole input it may not.
            let nullable = aggregate.function.is_null_on_empty()
                && (!grouped || aggregate.arg.as_ref().is_some_and(|a| a.nullable));
            let id = self.columns.add(ColumnInfo {
                name: assignment.name.name.clone(),
                ty: aggregate.ty,
                nullable,
                origin: match (&aggregate.function, &aggregate.arg) {
                    // min and max of a string column are codes of that column's dictionary.
                    (Aggregate::Min | Aggregate::Max, Some(arg)) if arg.ty == DataType::Str => {
                        self.string_origin(arg)
                    }
                    _ => None,
                },
            });
            output.entries.push(ScopeEntry {
                id,
                name: assignment.name.name.clone(),
                qualifier: None,
            });
            bindings.push(AggregateBinding { id, aggregate });
        }
        Ok((bindings, distinct))
    }

    fn aggregate_call(
        &mut self,
        expr: &ast::Expr,
        context: &PipelineContext,
        grouped: bool,
    ) -> Result<(AggregateExpr, bool)> {
        let block = if grouped {
            "group { }"
        } else {
            "aggregate { }"
        };
        let AstExpr::Call {
            function,
            args,
            distinct,
        } = &expr.kind
        else {
            return Err(Diagnostic::type_error(
                expr.span,
                format!(
                    "each entry of `{block}` must be an aggregate such as `sum(x)` or `count()`, or compute with one"
                ),
            )
            .with_hint("write an aggregate, or an expression over aggregates such as `sum(x) / count()`; a plain value belongs in a later `derive`"));
        };
        let Some(aggregate) = Aggregate::from_name(&function.name) else {
            return Err(Diagnostic::type_error(
                function.span,
                format!("`{}` is not an aggregate", function.name),
            )
            .with_hint("the aggregates are sum, count, min, max and avg"));
        };
        if *distinct && args.len() != 1 {
            return Err(Diagnostic::type_error(
                expr.span,
                format!(
                    "`{}(distinct ...)` takes one argument, but {} given",
                    function.name,
                    args.len()
                ),
            ));
        }
        let arg = match (aggregate, args.as_slice()) {
            (Aggregate::Count, []) => None,
            (_, [arg]) => Some(self.value(arg, context)?),
            _ => {
                let expected = if aggregate == Aggregate::Count {
                    "zero or one argument"
                } else {
                    "one argument"
                };
                return Err(Diagnostic::type_error(
                    expr.span,
                    format!(
                        "`{}` takes {expected}, but {} given",
                        function.name,
                        args.len()
                    ),
                ));
            }
        };
        let ty = aggregate
            .return_type(arg.as_ref().map(|a| a.ty))
            .map_err(|_| {
                let found = arg.as_ref().map_or(DataType::Bool, |a| a.ty);
                let span = arg.as_ref().map_or(expr.span, |a| a.span);
                let what = if aggregate == Aggregate::Min || aggregate == Aggregate::Max {
                    "a number, date or string"
                } else {
                    "a number"
                };
                Diagnostic::type_error(
                    span,
                    format!("cannot take `{}` of a `{found}`", function.name),
                )
                .with_label(format!("this is `{found}`, not {what}"))
            })?;
        // An average is a float: a decimal's values are summed as floats, as an integer's are
        // when the device accumulates them.
        let arg = match arg {
            Some(a) if aggregate == Aggregate::Avg && a.ty.is_decimal() => {
                Some(a.cast(DataType::F64))
            }
            arg => arg,
        };
        Ok((
            AggregateExpr {
                function: aggregate,
                arg,
                ty,
                span: expr.span,
            },
            *distinct,
        ))
    }

    fn set_operation_output(
        &mut self,
        keyword: &str,
        left: &Scope,
        right: &crate::typed::TypedRelation,
        span: Span,
    ) -> Result<Scope> {
        let (l, r) = (&left.entries, &right.output.entries);
        if l.len() != r.len() {
            return Err(Diagnostic::type_error(
                span,
                format!(
                    "`{keyword}` needs inputs with the same number of columns, but they have {} and {}",
                    l.len(),
                    r.len()
                ),
            ));
        }
        let mut output = Scope::default();
        for (a, b) in l.iter().zip(r) {
            let (ia, ib) = (
                self.columns.get(a.id).clone(),
                self.columns.get(b.id).clone(),
            );
            if ia.ty != ib.ty {
                return Err(Diagnostic::type_error(
                    right.span,
                    format!(
                        "`{keyword}` combines columns of different types: `{}` is `{}` and `{}` is `{}`",
                        a.name, ia.ty, b.name, ib.ty
                    ),
                )
                .with_hint("cast with `as` in a `select` so the columns match"));
            }
            if ia.ty == DataType::Str && (ia.origin.is_none() || ia.origin != ib.origin) {
                return Err(Diagnostic::unsupported(
                    right.span,
                    "combining two different string columns with `union`, `intersect` or `except` is not supported yet",
                )
                .with_label(format!("`{}` and `{}` are different string columns", a.name, b.name)));
            }
            let id = self.columns.add(ColumnInfo {
                name: a.name.clone(),
                ty: ia.ty,
                nullable: ia.nullable || ib.nullable,
                // Statistics of one side's stored column say nothing of the other side's
                // values: the column is that stored column's only when both sides read it.
                origin: (ia.origin == ib.origin)
                    .then(|| ia.origin.clone())
                    .flatten(),
            });
            output.entries.push(ScopeEntry {
                id,
                name: a.name.clone(),
                qualifier: None,
            });
        }
        Ok(output)
    }

    fn new_column(&mut self, name: &str, expr: &Expr) -> ColumnId {
        let origin = self.string_origin(expr).or_else(|| {
            expr.as_column()
                .and_then(|c| self.columns.get(c).origin.clone())
        });
        self.columns.add(ColumnInfo {
            name: name.to_string(),
            ty: expr.ty,
            nullable: expr.nullable,
            origin,
        })
    }
}

/// Records `name`, or reports that an earlier output column already has it.
fn check_unique(names: &mut Vec<(String, Span)>, name: &ast::Ident) -> Result<()> {
    if let Some((_, earlier)) = names.iter().find(|(n, _)| *n == name.name) {
        let mut d = Diagnostic::name(name.span, format!("duplicate column name `{}`", name.name))
            .with_label("this name is already taken");
        if !earlier.is_empty() {
            d = d.with_secondary(*earlier, "first used here");
        }
        return Err(d.with_hint("give each output column its own name"));
    }
    names.push((name.name.clone(), name.span));
    Ok(())
}

pub(crate) fn split_conjunction(expr: &ast::Expr) -> Vec<&ast::Expr> {
    match &expr.kind {
        AstExpr::Binary {
            op: BinaryOp::And,
            left,
            right,
        } => {
            let mut parts = split_conjunction(left);
            parts.extend(split_conjunction(right));
            parts
        }
        _ => vec![expr],
    }
}

/// `relation` with `conditions` applied as a `where` inside it.
fn filtered(relation: TypedRelation, conditions: Vec<Expr>) -> TypedRelation {
    if conditions.is_empty() {
        return relation;
    }
    let span = relation.span;
    let output = relation.output.clone();
    let predicate = Expr::conjunction(conditions, span);
    TypedRelation {
        source: TypedSource::Pipeline {
            name: None,
            pipeline: Box::new(TypedPipeline {
                from: relation,
                stages: vec![TypedStage {
                    kind: TypedStageKind::Where(predicate),
                    output: output.clone(),
                    span,
                }],
                output: output.clone(),
                span,
            }),
        },
        output,
        span,
    }
}
