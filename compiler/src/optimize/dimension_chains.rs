//! Dimension chains: a filtered table joined through another table's column joins that table
//! first. In `facts | join supplier on .. | join nation on s_nationkey == n_nationkey` with
//! `n_name == "SAUDI ARABIA"`, the fact rows would probe every supplier and only then lose 24
//! in 25 of themselves at the nation; joined as `facts | join (supplier | join nation ..)`, the
//! supplier table is built of the Saudi suppliers alone, and the fact rows' one probe of it
//! rejects them at once, before any larger table sees them (TPC-H Q5, Q7, Q8, Q21's
//! snowflakes). Inner joins only, whose order does not change their rows.

use tessera_grammar::ast::JoinKind;

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
        let LogicalPlan::Join(outer) = plan else {
            return (plan, Transformed::No);
        };
        if !chains_through_its_left_input(&outer) {
            return (LogicalPlan::Join(outer), Transformed::No);
        }
        let Join {
            left,
            right: filtered,
            kind,
            keys,
            residual,
            span,
        } = outer;
        let inner = match *left {
            LogicalPlan::Join(inner) => inner,
            left => {
                let outer = Join {
                    left: Box::new(left),
                    right: filtered,
                    kind,
                    keys,
                    residual,
                    span,
                };
                return (LogicalPlan::Join(outer), Transformed::No);
            }
        };
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
}

/// Whether `outer` is an inner join of a filtered relation whose keys on the left all come
/// from the right input of an inner join: `(a ⋈ s) ⋈ n` on columns of `s` alone, which
/// `a ⋈ (s ⋈ n)` joins alike.
fn chains_through_its_left_input(outer: &Join) -> bool {
    let LogicalPlan::Join(inner) = outer.left.as_ref() else {
        return false;
    };
    let plain = |join: &Join| join.kind == JoinKind::Inner && join.residual.is_none();
    if !plain(outer) || !plain(inner) || !filters_rows(&outer.right) {
        return false;
    }
    let through = inner.right.output();
    outer.keys.iter().all(|(left, _)| {
        let used = left.columns_used();
        !used.is_empty() && used.iter().all(|c| through.contains(c))
    }) && pipelined(&inner.right)
        && pipelined(&outer.right)
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
