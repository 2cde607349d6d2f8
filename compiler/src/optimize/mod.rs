//! The optimizer: rules that rewrite a logical plan without changing its meaning, and the
//! driver that applies them. A rule rewrites one operator at a time (the driver walks the plan
//! top-down or bottom-up, as the rule asks) or the whole query, and says whether it changed
//! anything; the driver runs the rules in order, round after round, until none changes the
//! plan, and checks the plan's schema after every change (`schema::check`), so that a rule's
//! mistake is an internal error naming the rule rather than a wrong answer later.

mod column_pruning;
mod constant_folding;
mod dimension_chains;
mod predicate_pushdown;
mod schema;
#[cfg(test)]
pub(crate) mod tests;

use tessera_grammar::{Diagnostic, Span};

use crate::columns::{ColumnId, Columns};
use crate::logical::{logical_to_string, LogicalPlan, LogicalQuery};

pub use column_pruning::ColumnPruning;
pub use constant_folding::ConstantFolding;
pub use dimension_chains::DimensionChains;
pub use predicate_pushdown::PredicatePushdown;

/// Whether a rule changed the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transformed {
    Yes,
    No,
}

impl Transformed {
    pub fn or(self, other: Transformed) -> Transformed {
        match (self, other) {
            (Transformed::No, Transformed::No) => Transformed::No,
            _ => Transformed::Yes,
        }
    }
}

/// How the driver applies a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// To each operator before its inputs (what the rule moves down is visited again below).
    TopDown,
    /// To each operator after its inputs.
    BottomUp,
    /// Once to the whole plan, which the rule walks itself.
    Whole,
}

/// What a rule may read about the query whose plan it rewrites.
pub struct QueryView<'a> {
    /// The result's columns, in order: the plan must keep producing exactly these.
    pub output: &'a [(String, ColumnId)],
    pub columns: &'a Columns,
    pub span: Span,
}

/// A rewrite of a logical plan that keeps its meaning: its rows, and its output columns with
/// their types and nullability.
pub trait Rule {
    fn name(&self) -> &'static str;
    fn order(&self) -> Order;
    /// Rewrites `plan`: one operator (with its inputs below it, which the driver visits
    /// next or visited last), or the whole plan for [`Order::Whole`].
    fn rewrite(&self, plan: LogicalPlan, query: &QueryView<'_>) -> (LogicalPlan, Transformed);
}

/// The rules, in the order each round applies them.
pub fn rules() -> Vec<Box<dyn Rule>> {
    vec![
        // First, so that predicates made of constants vanish before anything moves them.
        Box::new(ConstantFolding),
        // Moves filters into scans, in particular into the build sides of joins, so that a
        // dimension's filter runs once per dimension row and not once per fact row.
        Box::new(PredicatePushdown),
        // Once filters are in their scans: a filtered table joined through another table's
        // column joins that table first, which is then built of the rows it keeps.
        Box::new(DimensionChains),
        // Last: only once filters are where they will run is it known which columns each
        // scan must read.
        Box::new(ColumnPruning),
    ]
}

/// Rounds of all rules at most: each round after the first only finishes what the one before
/// made possible (a constant folded once a filter moved next to it), so a plan settles in
/// two or three.
const MAX_ROUNDS: usize = 8;

/// One step of `--emit optimized --verbose`: the plans after a rule changed one of them.
pub struct PassTrace {
    pub pass: String,
    pub plan: String,
}

/// Applies the rules to every query until none changes any plan. With `trace`, records the
/// plans after each application of a rule that changed one.
pub fn optimize(
    queries: Vec<LogicalQuery>,
    trace: Option<&mut Vec<PassTrace>>,
) -> Result<Vec<LogicalQuery>, Diagnostic> {
    optimize_with(queries, &rules(), trace)
}

/// [`optimize`] with the rules given.
pub fn optimize_with(
    mut queries: Vec<LogicalQuery>,
    rules: &[Box<dyn Rule>],
    mut trace: Option<&mut Vec<PassTrace>>,
) -> Result<Vec<LogicalQuery>, Diagnostic> {
    for round in 1..=MAX_ROUNDS {
        let mut any = Transformed::No;
        for rule in rules {
            let mut changed = Transformed::No;
            for query in &mut queries {
                if apply(rule.as_ref(), query) == Transformed::Yes {
                    schema::check(query).map_err(|problem| {
                        Diagnostic::internal(
                            query.span,
                            format!("the `{}` rule broke the plan: {problem}", rule.name()),
                        )
                    })?;
                    changed = Transformed::Yes;
                }
            }
            if let (Some(trace), Transformed::Yes) = (trace.as_mut(), changed) {
                trace.push(PassTrace {
                    pass: match round {
                        1 => rule.name().to_string(),
                        _ => format!("{} (round {round})", rule.name()),
                    },
                    plan: logical_to_string(&queries),
                });
            }
            any = any.or(changed);
        }
        if any == Transformed::No {
            break;
        }
    }
    Ok(queries)
}

/// Applies `rule` to `query`'s plan, walking it as the rule asks.
pub fn apply(rule: &dyn Rule, query: &mut LogicalQuery) -> Transformed {
    let plan = std::mem::replace(&mut query.plan, LogicalPlan::empty());
    let view = QueryView {
        output: &query.output,
        columns: &query.columns,
        span: query.span,
    };
    let (plan, changed) = match rule.order() {
        Order::Whole => rule.rewrite(plan, &view),
        Order::TopDown => walk(rule, plan, &view, true),
        Order::BottomUp => walk(rule, plan, &view, false),
    };
    query.plan = plan;
    changed
}

fn walk(
    rule: &dyn Rule,
    plan: LogicalPlan,
    view: &QueryView<'_>,
    top_down: bool,
) -> (LogicalPlan, Transformed) {
    let mut changed = Transformed::No;
    let mut plan = plan;
    if top_down {
        (plan, changed) = settle(rule, plan, view);
    }
    for input in plan.inputs_mut() {
        let taken = std::mem::replace(input, LogicalPlan::empty());
        let (rewritten, below) = walk(rule, taken, view, top_down);
        *input = rewritten;
        changed = changed.or(below);
    }
    if !top_down {
        let (settled, here) = settle(rule, plan, view);
        plan = settled;
        changed = changed.or(here);
    }
    (plan, changed)
}

/// Rewrites one operator until the rule leaves it as it is (merging two filters may let the
/// merged one move on).
fn settle(
    rule: &dyn Rule,
    mut plan: LogicalPlan,
    view: &QueryView<'_>,
) -> (LogicalPlan, Transformed) {
    let mut changed = Transformed::No;
    // Each rewrite of one operator shrinks what is left to do there; the bound only keeps a
    // rule that wrongly says it changed something from looping.
    for _ in 0..MAX_REWRITES_PER_OPERATOR {
        let (rewritten, here) = rule.rewrite(plan, view);
        plan = rewritten;
        if here == Transformed::No {
            break;
        }
        changed = Transformed::Yes;
    }
    (plan, changed)
}

const MAX_REWRITES_PER_OPERATOR: usize = 64;
