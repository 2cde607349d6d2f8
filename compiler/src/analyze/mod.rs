//! Analysis: from the AST to the typed script. Resolves every name (tables, `let` bindings,
//! columns, functions), gives every expression a type (inserting casts so that each operation
//! sees operands of one type), and binds string literals to dictionary codes of the column they
//! are compared with. These steps change meaning, so they live here and not among the
//! optimizer's passes. Every user error becomes a `Diagnostic` pointing at the script.

mod computed;
mod decimals;
mod declarations;
mod expr;
mod scope;
mod stages;
mod strings;

use tessera_grammar::ast::{self, Item};
use tessera_grammar::{closest_name, Diagnostic, Span};
use tessera_storage::Catalog;

use crate::columns::{BaseColumn, ColumnInfo, Columns};
use crate::typed::{
    Scope, ScopeEntry, TypedPipeline, TypedQuery, TypedRelation, TypedScript, TypedSource,
};

pub use declarations::{declared_tables, DeclaredTable};
use scope::PipelineContext;
pub(crate) use stages::split_conjunction;

type Result<T> = std::result::Result<T, Diagnostic>;

/// Resolves and type-checks every query of `script` against `catalog`. Returns all the errors
/// found (at most one per query or binding: later errors in a query would mostly echo the first).
pub fn ast_to_typed(
    script: &ast::Script,
    catalog: &Catalog,
) -> std::result::Result<TypedScript, Vec<Diagnostic>> {
    let mut diagnostics = Vec::new();
    let declared = match declared_tables(script) {
        Ok(declared) => declared,
        Err(mut errors) => {
            diagnostics.append(&mut errors);
            Vec::new()
        }
    };
    let mut analyzer = Analyzer {
        catalog,
        declared,
        lets: Vec::new(),
        visible_lets: 0,
        columns: Columns::default(),
        correlated: Vec::new(),
    };
    let mut queries = Vec::new();
    for item in &script.items {
        match item {
            Item::Table(_) => {}
            Item::Let(binding) => {
                if let Err(d) = analyzer.define_let(binding) {
                    diagnostics.push(d);
                }
            }
            Item::Query(pipeline) => {
                analyzer.columns = Columns::default();
                match analyzer.pipeline(pipeline) {
                    Ok(typed) => queries.push(TypedQuery {
                        pipeline: typed,
                        columns: std::mem::take(&mut analyzer.columns),
                        span: pipeline.span,
                    }),
                    Err(d) => diagnostics.push(d),
                }
            }
        }
    }
    if queries.is_empty() && diagnostics.is_empty() {
        let end = script
            .items
            .last()
            .map_or(Span::default(), |item| match item {
                Item::Table(t) => t.span,
                Item::Let(l) => l.span,
                Item::Query(q) => q.span,
            });
        diagnostics.push(Diagnostic::name(end, "the script has no query").with_hint(
            "a query starts with `from`, e.g. `from lineorder | aggregate { n = count() }`",
        ));
    }
    if diagnostics.is_empty() {
        let mut correlated = analyzer.correlated;
        // A `let` is analyzed where it is used: once for each use.
        let mut seen = std::collections::HashSet::new();
        correlated.retain(|join| seen.insert(join.on));
        Ok(TypedScript {
            queries,
            correlated,
        })
    } else {
        Err(diagnostics)
    }
}

struct Analyzer<'a> {
    catalog: &'a Catalog,
    /// Tables the script declares; one without data still type-checks, and planning reports
    /// the missing data.
    declared: Vec<DeclaredTable>,
    /// Every `let` seen so far, in source order.
    lets: Vec<&'a ast::LetBinding>,
    /// How many of `lets` the pipeline being analyzed may see: a binding sees only the ones
    /// before it, so bindings can never refer to themselves.
    visible_lets: usize,
    /// The columns of the query being analyzed.
    columns: Columns,
    /// Semi and anti joins seen whose `on` reads both inputs other than as keys.
    correlated: Vec<crate::typed::CorrelatedJoin>,
}

impl<'a> Analyzer<'a> {
    fn define_let(&mut self, binding: &'a ast::LetBinding) -> Result<()> {
        let name = &binding.name;
        if let Some(earlier) = self.lets.iter().find(|l| l.name.name == name.name) {
            return Err(
                Diagnostic::name(name.span, format!("`{}` is defined twice", name.name))
                    .with_label("defined again here")
                    .with_secondary(earlier.name.span, "first defined here"),
            );
        }
        if self.catalog.table(&name.name).is_some() {
            return Err(Diagnostic::name(
                name.span,
                format!("`{}` is already the name of a table", name.name),
            )
            .with_hint("choose another name for this `let`"));
        }
        // Check the body now so that its errors are reported once, where it is written.
        self.columns = Columns::default();
        self.pipeline(&binding.pipeline)?;
        self.lets.push(binding);
        self.visible_lets = self.lets.len();
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<TypedPipeline> {
        let from = self.relation(&pipeline.from)?;
        let mut context = PipelineContext::new(from.output.clone());
        let mut stages = Vec::with_capacity(pipeline.stages.len());
        for stage in &pipeline.stages {
            // One stage of the script may become two (`count(distinct x)`).
            for typed in self.stage(stage, &context)? {
                context.advance(typed.output.clone(), stage);
                stages.push(typed);
            }
        }
        Ok(TypedPipeline {
            from,
            stages,
            output: context.scope,
            span: pipeline.span,
        })
    }

    fn relation(&mut self, relation: &ast::Relation) -> Result<TypedRelation> {
        let alias = relation.alias.as_ref().map(|a| a.name.clone());
        match &relation.source {
            ast::RelationSource::Named(name) => {
                if let Some(index) = self.lets[..self.visible_lets]
                    .iter()
                    .position(|l| l.name.name == name.name)
                {
                    let binding = self.lets[index];
                    let saved = self.visible_lets;
                    self.visible_lets = index;
                    let pipeline = self.pipeline(&binding.pipeline);
                    self.visible_lets = saved;
                    let pipeline = pipeline?;
                    let qualifier = alias.unwrap_or_else(|| name.name.clone());
                    return Ok(TypedRelation {
                        output: requalify(&pipeline.output, &qualifier),
                        source: TypedSource::Pipeline {
                            name: Some(name.name.clone()),
                            pipeline: Box::new(pipeline),
                        },
                        span: relation.span,
                    });
                }
                self.table(name, alias, relation.span)
            }
            ast::RelationSource::Pipeline(pipeline) => {
                let pipeline = self.pipeline(pipeline)?;
                let output = match &alias {
                    Some(alias) => requalify(&pipeline.output, alias),
                    None => pipeline.output.clone(),
                };
                Ok(TypedRelation {
                    output,
                    source: TypedSource::Pipeline {
                        name: None,
                        pipeline: Box::new(pipeline),
                    },
                    span: relation.span,
                })
            }
        }
    }

    fn table(
        &mut self,
        name: &ast::Ident,
        alias: Option<String>,
        span: Span,
    ) -> Result<TypedRelation> {
        if let Some(reason) = self.catalog.broken_table(&name.name) {
            return Err(Diagnostic::new(
                tessera_grammar::DiagnosticKind::Data,
                name.span,
                format!("table `{}` cannot be read: {reason}", name.name),
            ));
        }
        let schema = match self.catalog.table(&name.name) {
            Some(table) => table.schema.clone(),
            None => match self.declared.iter().find(|t| t.name == name.name) {
                Some(declared) => declared.schema.clone(),
                None => return Err(self.unknown_table(name)),
            },
        };
        let table = TableRef {
            name: name.name.clone(),
            schema,
        };
        let qualifier = alias.unwrap_or_else(|| table.name.clone());
        let mut entries = Vec::with_capacity(table.schema.fields.len());
        for field in &table.schema.fields {
            let id = self.columns.add(ColumnInfo {
                name: field.name.clone(),
                ty: field.ty,
                nullable: field.nullable,
                origin: Some(BaseColumn::new(&table.name, &field.name)),
            });
            entries.push(ScopeEntry {
                id,
                name: field.name.clone(),
                qualifier: Some(qualifier.clone()),
            });
        }
        let output = Scope { entries };
        Ok(TypedRelation {
            source: TypedSource::Table {
                table: table.name.clone(),
                columns: output.ids(),
            },
            output,
            span,
        })
    }
}

/// A table's name and schema, from the data or from a declaration.
struct TableRef {
    name: String,
    schema: tessera_storage::Schema,
}

impl Analyzer<'_> {
    fn unknown_table(&self, name: &ast::Ident) -> Diagnostic {
        let known: Vec<&str> = self
            .catalog
            .tables()
            .map(|t| t.name.as_str())
            .chain(
                self.lets[..self.visible_lets]
                    .iter()
                    .map(|l| l.name.name.as_str()),
            )
            .collect();
        let d = Diagnostic::name(name.span, format!("unknown table `{}`", name.name))
            .with_label("no table or `let` of this name");
        if let Some(suggestion) = closest_name(&name.name, known.iter().copied()) {
            d.with_hint(format!("did you mean `{suggestion}`?"))
        } else if known.is_empty() {
            d.with_hint("the data directory holds no tables")
        } else {
            d.with_hint(format!("the tables are: {}", known.join(", ")))
        }
    }
}

fn requalify(scope: &Scope, qualifier: &str) -> Scope {
    Scope {
        entries: scope
            .entries
            .iter()
            .map(|e| ScopeEntry {
                qualifier: Some(qualifier.to_string()),
                ..e.clone()
            })
            .collect(),
    }
}
