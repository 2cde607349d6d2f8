//! The optimizer: an ordered list of passes over a logical plan. Every pass preserves the
//! query's result and its output columns; the driver checks the latter after each pass.

mod column_pruning;
mod constant_folding;
mod predicate_pushdown;

use tessera_grammar::Diagnostic;
use tessera_storage::Catalog;

use crate::logical::{logical_to_string, LogicalQuery};

pub use column_pruning::ColumnPruning;
pub use constant_folding::ConstantFolding;
pub use predicate_pushdown::PredicatePushdown;

/// A rewrite of a logical plan that keeps its meaning.
pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, query: &mut LogicalQuery, catalog: &Catalog);
}

/// The passes, in the order they run.
pub fn passes() -> Vec<Box<dyn Pass>> {
    vec![
        // First, so that predicates made of constants vanish before anything moves them.
        Box::new(ConstantFolding),
        // Moves filters into scans, in particular into the build sides of joins, so that a
        // dimension's filter runs once per dimension row and not once per fact row.
        Box::new(PredicatePushdown),
        // Last: only once filters are where they will run is it known which columns each
        // scan must read.
        Box::new(ColumnPruning),
    ]
}

/// One step of `--emit optimized --verbose`: the plan after the named pass.
pub struct PassTrace {
    pub pass: &'static str,
    pub plan: String,
}

/// Runs every pass over every query. With `trace`, records the plans after each pass.
pub fn optimize(
    mut queries: Vec<LogicalQuery>,
    catalog: &Catalog,
    mut trace: Option<&mut Vec<PassTrace>>,
) -> Result<Vec<LogicalQuery>, Diagnostic> {
    for pass in passes() {
        for query in &mut queries {
            let before: Vec<_> = query.output.iter().map(|(_, id)| *id).collect();
            pass.run(query, catalog);
            let after = query.plan.output();
            if after != before {
                return Err(Diagnostic::internal(
                    query.span,
                    format!(
                        "the `{}` pass changed the query's output columns",
                        pass.name()
                    ),
                ));
            }
        }
        if let Some(trace) = trace.as_mut() {
            trace.push(PassTrace {
                pass: pass.name(),
                plan: logical_to_string(&queries),
            });
        }
    }
    Ok(queries)
}
