//! A script from source to pipelines, stage by stage, keeping each stage's result so that any
//! of them can be printed; and the catalog a script reads, opened with the tables it declares.

use std::path::Path;

use tessera_grammar::ast::Script;
use tessera_grammar::{source_to_ast, Diagnostic, Span};
use tessera_storage::{Catalog, Schema, StorageError};

use crate::analyze::{ast_to_typed, declared_tables, DeclaredTable};
use crate::logical::{typed_to_logical, LogicalQuery};
use crate::optimize::{optimize, PassTrace};
use crate::physical::{
    logical_to_pipelines, logical_to_pipelines_remembering, Estimates, PartitionJoins,
    PhysicalQuery,
};
use crate::typed::TypedScript;

/// The tables of the standard library's schemas (SSB), used to read `.tbl` files the script
/// does not declare itself.
pub fn stdlib_tables() -> Vec<DeclaredTable> {
    // The schema ships with Tessera and is checked by a test, so it always parses.
    source_to_ast(tessera_stdlib::SSB_SCHEMA)
        .ok()
        .and_then(|script| declared_tables(&script).ok())
        .unwrap_or_default()
}

/// Opens the data directory with the tables `script` declares. Text files (`.tbl`) of tables
/// the script does not declare are read with the standard library's schema of that name.
pub fn open_catalog(script: &Script, dir: &Path) -> Result<Catalog, OpenError> {
    let declared = declared_tables(script).map_err(OpenError::Declarations)?;
    let mut schemas: Vec<(String, Schema)> =
        declared.into_iter().map(|t| (t.name, t.schema)).collect();
    for table in stdlib_tables() {
        let text_file = dir.join(format!("{}.tbl", table.name));
        if text_file.is_file() && !schemas.iter().any(|(name, _)| *name == table.name) {
            schemas.push((table.name, table.schema));
        }
    }
    Catalog::open(dir, &schemas).map_err(OpenError::Storage)
}

#[derive(Debug)]
pub enum OpenError {
    Declarations(Vec<Diagnostic>),
    Storage(StorageError),
}

/// Every stage of compiling one script, as far as it got.
pub struct Compilation {
    pub ast: Script,
    pub typed: TypedScript,
    pub logical: Vec<LogicalQuery>,
    pub optimized: Vec<LogicalQuery>,
    pub trace: Vec<PassTrace>,
    pub physical: Vec<PhysicalQuery>,
}

impl Compilation {
    /// Runs every stage from the syntax tree to pipelines.
    pub fn run(ast: Script, catalog: &Catalog) -> Result<Compilation, Vec<Diagnostic>> {
        Compilation::run_with(ast, catalog, PartitionJoins::default())
    }

    /// Like `run`, choosing which join probes partition their rows first.
    pub fn run_with(
        ast: Script,
        catalog: &Catalog,
        partition_joins: PartitionJoins,
    ) -> Result<Compilation, Vec<Diagnostic>> {
        Compilation::planned(ast, catalog, |query| {
            logical_to_pipelines(query, catalog, partition_joins)
        })
    }

    /// Like `run_with`, planning with the estimates a resident engine kept from earlier
    /// scripts (`physical::Estimates`), and keeping this one's.
    pub fn run_remembering(
        ast: Script,
        catalog: &Catalog,
        partition_joins: PartitionJoins,
        estimates: &mut Estimates,
    ) -> Result<Compilation, Vec<Diagnostic>> {
        Compilation::planned(ast, catalog, |query| {
            logical_to_pipelines_remembering(query, catalog, partition_joins, estimates)
        })
    }

    fn planned(
        ast: Script,
        catalog: &Catalog,
        plan: impl FnMut(&LogicalQuery) -> Result<PhysicalQuery, Diagnostic>,
    ) -> Result<Compilation, Vec<Diagnostic>> {
        let mut compilation = Compilation::run_logical(ast, catalog)?;
        compilation.physical = compilation
            .optimized
            .iter()
            .map(plan)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|d| vec![d])?;
        Ok(compilation)
    }

    /// Runs the stages up to the optimized logical plans, leaving no pipelines: what a script
    /// that runs in stages (`staging`) can show before its stages have run.
    pub fn run_logical(ast: Script, catalog: &Catalog) -> Result<Compilation, Vec<Diagnostic>> {
        let typed = ast_to_typed(&ast, catalog)?;
        let logical = typed_to_logical(&typed, catalog);
        let mut trace = Vec::new();
        let optimized = optimize(logical.clone(), Some(&mut trace)).map_err(|d| vec![d])?;
        Ok(Compilation {
            ast,
            typed,
            logical,
            optimized,
            trace,
            physical: Vec::new(),
        })
    }
}

/// A span covering nothing, for diagnostics about the script as a whole.
pub fn whole_script() -> Span {
    Span::default()
}
