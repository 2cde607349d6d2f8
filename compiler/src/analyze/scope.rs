//! Column lookup within a pipeline: resolving `name` and `qualifier.name` against the columns
//! visible at a stage, with the hints that make a failed lookup useful (a close name, a column
//! dropped by an earlier `select` or `group`, a column of a type Tessera cannot read).

use std::collections::HashMap;

use tessera_grammar::ast::{self, StageKind};
use tessera_grammar::{closest_name, Diagnostic, Span};

use crate::columns::ColumnId;
use crate::typed::Scope;

use super::{Analyzer, Result};

/// The columns visible at the current stage of a pipeline, and which names earlier stages
/// removed (with the stage that did it), for hints.
pub(super) struct PipelineContext {
    pub scope: Scope,
    dropped: HashMap<String, (Span, &'static str)>,
}

impl PipelineContext {
    pub fn new(scope: Scope) -> PipelineContext {
        PipelineContext {
            scope,
            dropped: HashMap::new(),
        }
    }

    /// A context for resolving names over `scope` alone (join conditions see both inputs).
    pub fn over(scope: Scope) -> PipelineContext {
        PipelineContext::new(scope)
    }

    pub fn advance(&mut self, next: Scope, stage: &ast::Stage) {
        let keyword = match stage.kind {
            StageKind::Select(_) => "select",
            StageKind::Group { .. } => "group",
            StageKind::Aggregate(_) => "aggregate",
            StageKind::Join { .. } => "join",
            StageKind::SetOp { .. } => "a set operation",
            _ => "an earlier stage",
        };
        for name in self.scope.names() {
            if !next.names().any(|n| n == name) {
                self.dropped.insert(name.to_string(), (stage.span, keyword));
            }
        }
        for name in next.names() {
            self.dropped.remove(name);
        }
        self.scope = next;
    }
}

impl Analyzer<'_> {
    pub(super) fn resolve(
        &self,
        qualifier: Option<&ast::Ident>,
        name: &ast::Ident,
        context: &PipelineContext,
    ) -> Result<ColumnId> {
        let span = qualifier.map_or(name.span, |q| q.span.to(name.span));
        let candidates: Vec<_> = context
            .scope
            .entries
            .iter()
            .filter(|e| e.name == name.name)
            .filter(|e| qualifier.is_none_or(|q| e.qualifier.as_deref() == Some(q.name.as_str())))
            .collect();
        match candidates.as_slice() {
            [one] => Ok(one.id),
            [] => Err(self.unknown_column(qualifier, name, span, context)),
            several => {
                let mut qualifiers: Vec<String> = several
                    .iter()
                    .filter_map(|e| e.qualifier.as_ref().map(|q| format!("`{q}.{}`", e.name)))
                    .collect();
                let every_one_qualified = qualifiers.len() == several.len();
                qualifiers.sort();
                qualifiers.dedup();
                let mut d = Diagnostic::name(span, format!("column `{}` is ambiguous", name.name))
                    .with_label("more than one input has a column of this name");
                if every_one_qualified && qualifiers.len() == several.len() {
                    d = d.with_hint(format!("qualify it: {}", qualifiers.join(" or ")));
                } else if every_one_qualified {
                    // One relation joined twice under its own name: qualifying cannot tell them
                    // apart.
                    let relation = several[0].qualifier.as_deref().unwrap_or_default();
                    d = d.with_hint(format!(
                        "`{relation}` is joined more than once: name each with `as` \
                         (`join {relation} as other on ...`) and qualify the column with it"
                    ));
                } else {
                    d = d.with_hint("rename one of them with `select` or `as` before this stage");
                }
                Err(d)
            }
        }
    }

    fn unknown_column(
        &self,
        qualifier: Option<&ast::Ident>,
        name: &ast::Ident,
        span: Span,
        context: &PipelineContext,
    ) -> Diagnostic {
        if let Some(qualifier) = qualifier {
            let known: Vec<&str> = context
                .scope
                .entries
                .iter()
                .filter_map(|e| e.qualifier.as_deref())
                .collect();
            if !known.contains(&qualifier.name.as_str()) {
                let mut d = Diagnostic::name(
                    qualifier.span,
                    format!("unknown table or alias `{}`", qualifier.name),
                );
                if let Some(suggestion) = closest_name(&qualifier.name, known.iter().copied()) {
                    d = d.with_hint(format!("did you mean `{suggestion}`?"));
                }
                return d;
            }
        }
        let full = match qualifier {
            Some(q) => format!("{}.{}", q.name, name.name),
            None => name.name.clone(),
        };
        let mut d = Diagnostic::name(span, format!("unknown column `{full}`"));
        if let Some((stage_span, keyword)) = context.dropped.get(&name.name) {
            let only = if *keyword == "group" {
                ": only the group keys and aggregates are"
            } else {
                ""
            };
            return d
                .with_label(format!(
                    "`{}` is not available after `{keyword}`{only}",
                    name.name
                ))
                .with_secondary(*stage_span, format!("`{}` is dropped here", name.name));
        }
        let in_scope: Vec<&str> = context
            .scope
            .entries
            .iter()
            .filter(|e| qualifier.is_none_or(|q| e.qualifier.as_deref() == Some(q.name.as_str())))
            .map(|e| e.name.as_str())
            .collect();
        d = d.with_label("no column of this name here");
        // A column the files hold but Tessera cannot read is named as such, before any guess.
        for table in self.catalog.tables() {
            if let Some((_, reason)) = table.unsupported.iter().find(|(c, _)| *c == name.name) {
                return d.with_hint(format!(
                    "table `{}` has a column `{}`, but Tessera cannot read it: {reason}",
                    table.name, name.name
                ));
            }
        }
        if let Some(suggestion) = closest_name(&name.name, in_scope.iter().copied()) {
            return d.with_hint(format!("did you mean `{suggestion}`?"));
        }
        for table in self.catalog.tables() {
            if table.schema.field(&name.name).is_some() {
                return d.with_hint(format!(
                    "`{}` is a column of `{}`, which is not part of this pipeline; `join` it first",
                    name.name, table.name
                ));
            }
        }
        d
    }
}
