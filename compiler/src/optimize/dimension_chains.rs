//! Dimension chains: a filtered table joined through another table's column joins that table
//! first. In `facts | join supplier on .. | join nation on s_nationkey == n_nationkey` with
//! `n_name == "SAUDI ARABIA"`, the fact rows would probe every supplier and only then lose 24
//! in 25 of themselves at the nation; joined as `facts | join (supplier | join nation ..)`, the
//! supplier table is built of the Saudi suppliers alone, and the fact rows' one probe of it
//! rejects them at once, before any larger table sees them (TPC-H Q5, Q7, Q8, Q21's
//! snowflakes). Inner joins only, whose order does not change their rows.

use tessera_grammar::ast::JoinKind;

use crate::expr::Expr;
use crate::logical::{Join, LogicalPlan};

use super::{Order, QueryView, Rule, Transformed};

pub struct DimensionChains;

impl Rule for DimensionChains {
    fn name(&self) -> &'static str {
        "dimension_chains"
    }

    /// Bottom-up: once the last join of a chain moved its table next to the one it joins
    /// through, that pair may move on next to the table before it.
    fn order(&self) -> Order {
        Order::BottomUp
    }

    fn rewrite(&self, plan: LogicalPlan, _: &QueryView<'_>) -> (LogicalPlan, Transformed) {
        let LogicalPlan::Join(Join {
            left,
            right: filtered,
            kind,
            keys,
            residual,
            span,
        }) = plan
        else {
            return (plan, Transformed::No);
        };
        let plain = kind == JoinKind::Inner && residual.is_none();
        match *left {
            LogicalPlan::Join(inner) if plain && joins_through(&inner, &keys, &filtered) => {
                let through = LogicalPlan::Join(Join {
                    left: inner.right,
                    right: filtered,
                    kind,
                    keys,
                    residual,
                    span,
                });
                let joined = LogicalPlan::Join(Join {
                    left: inner.left,
                    right: Box::new(through),
                    kind: inner.kind,
                    keys: inner.keys,
                    residual: inner.residual,
                    span: inner.span,
                });
                (joined, Transformed::Yes)
            }
            left => {
                let outer = Join {
                    left: Box::new(left),
                    right: filtered,
                    kind,
                    keys,
                    residual,
                    span,
                };
                (LogicalPlan::Join(outer), Transformed::No)
            }
        }
    }
}

/// Whether an inner join of `filtered` on `keys`, over `inner`, joins through `inner`'s right
/// input: `inner` is an inner join `a ⋈ s` and the keys' left sides read columns of `s` alone,
/// so that `a ⋈ (s ⋈ filtered)` joins alike.
fn joins_through(inner: &Join, keys: &[(Expr, Expr)], filtered: &LogicalPlan) -> bool {
    if inner.kind != JoinKind::Inner || inner.residual.is_some() || !filters_rows(filtered) {
        return false;
    }
    let through = inner.right.output();
    keys.iter().all(|(left, _)| {
        let used = left.columns_used();
        !used.is_empty() && used.iter().all(|c| through.contains(c))
    }) && pipelined(&inner.right)
        && pipelined(filtered)
}

/// Whether `plan` keeps fewer rows than its tables hold: a filter somewhere in it.
fn filters_rows(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Scan(scan) => !scan.filters.is_empty(),
        LogicalPlan::Filter(_) => true,
        other => other.inputs().into_iter().any(filters_rows),
    }
}

/// Whether `plan` is scans, filters, projections and joins only: rows a pipeline produces,
/// which a join can build a table of or scan.
fn pipelined(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Scan(_) => true,
        LogicalPlan::Filter(_) | LogicalPlan::Project(_) | LogicalPlan::Join(_) => {
            plan.inputs().into_iter().all(pipelined)
        }
        _ => false,
    }
}
