//! When two parts of a query compute the same thing: a `let` is analyzed where it is used, so
//! one used twice (TPC-H Q15's revenue per supplier, read by its `max` and by its join) is two
//! copies of one plan, alike in all but the ids of their columns. [`canonical_text`] writes a plan
//! with each column named by its place of first use and what it is, so that two plans have the
//! same text exactly when they compute the same columns from the same data.

use std::collections::HashMap;
use std::fmt::Write;

use crate::columns::{ColumnId, Columns};
use crate::logical::LogicalPlan;

/// `plan` as text in which each column id is replaced by the order it first appears in and its
/// name, type, nullability and stored origin: equal for two plans exactly when one is the other
/// with its columns renumbered (the same operators, expressions, spans and tables).
pub(super) fn canonical_text(plan: &LogicalPlan, columns: &Columns) -> String {
    const ID: &str = "ColumnId(";
    let text = format!("{plan:?}");
    let mut numbered: HashMap<u32, usize> = HashMap::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(ID) {
        out.push_str(&rest[..at]);
        let after = &rest[at + ID.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<u32>() {
            Ok(id) if after[digits..].starts_with(')') && (id as usize) < columns.len() => {
                let next = numbered.len();
                let place = *numbered.entry(id).or_insert(next);
                let info = columns.get(ColumnId(id));
                let _ = write!(
                    out,
                    "Column#{place}({:?} {:?} {} {:?})",
                    info.name, info.ty, info.nullable, info.origin
                );
                rest = &after[digits + 1..];
            }
            // Not an id (the text of a literal): kept as it is.
            _ => {
                out.push_str(ID);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::canonical_text;
    use crate::logical::LogicalPlan;
    use crate::optimize::tests::logical;

    /// The canonical texts of the groupings of `script`'s query once optimized, in the order a walk
    /// from its root meets them.
    fn grouping_texts(script: &str) -> Vec<String> {
        let query = crate::optimize::optimize(vec![logical(script)], None)
            .expect("the rules apply")
            .remove(0);
        let mut texts = Vec::new();
        let mut pending = vec![&query.plan];
        while let Some(plan) = pending.pop() {
            if let LogicalPlan::Aggregate(_) = plan {
                texts.push(canonical_text(plan, &query.columns));
            }
            pending.extend(plan.inputs());
        }
        texts
    }

    const PER_CUSTOMER: &str = "let per = from orders | where o_total > 15
        | group o_customer { total = sum(o_total), most = max(o_total) }";

    #[test]
    fn a_let_grouped_and_used_twice_is_one_plan() {
        let texts = grouping_texts(&format!(
            "{PER_CUSTOMER}
             from per | join (from per | select c = o_customer, t = total, m = most) on o_customer == c"
        ));
        assert_eq!(texts.len(), 2);
        assert_eq!(texts[0], texts[1]);
    }

    #[test]
    fn uses_that_read_other_columns_of_a_let_differ() {
        // The second use reads no `most`, which column pruning drops from its grouping.
        let texts = grouping_texts(&format!(
            "{PER_CUSTOMER}
             from per | join (from per | select c = o_customer, t = total) on o_customer == c"
        ));
        assert_eq!(texts.len(), 2);
        assert_ne!(texts[0], texts[1]);
    }

    #[test]
    fn the_same_pipeline_written_twice_is_two_plans() {
        // Their spans differ: only a `let` used twice is known to be the same.
        let texts = grouping_texts(
            "from orders | group o_customer { total = sum(o_total) }
             | join (from orders | group o_customer { total = sum(o_total) } | select c = o_customer, t = total)
               on o_customer == c",
        );
        assert_eq!(texts.len(), 2);
        assert_ne!(texts[0], texts[1]);
    }
}
