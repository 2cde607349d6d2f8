//! The invariants every optimizer rule keeps, checked by the driver after each change: the
//! plan produces the query's output columns in order; every operator reads only columns its
//! inputs produce (a scan's filters, columns of its table); a column an operator defines
//! (a projection's output, a group key) has its expression's type, and may be null where its
//! expression may; predicates are truth values; a set operation's inputs have as many columns
//! as it has.

use std::collections::HashSet;

use tessera_storage::DataType;

use crate::columns::{ColumnId, Columns};
use crate::expr::Expr;
use crate::logical::{LogicalPlan, LogicalQuery};

/// `Err` with the first invariant `query`'s plan breaks.
pub fn check(query: &LogicalQuery) -> Result<(), String> {
    let produced = query.plan.output();
    let wanted: Vec<ColumnId> = query.output.iter().map(|(_, id)| *id).collect();
    if produced != wanted {
        let names = |ids: &[ColumnId]| names(ids, &query.columns);
        return Err(format!(
            "the plan produces [{}] where the query returns [{}]",
            names(&produced),
            names(&wanted)
        ));
    }
    check_operator(&query.plan, &query.columns)
}

fn check_operator(plan: &LogicalPlan, columns: &Columns) -> Result<(), String> {
    for input in plan.inputs() {
        check_operator(input, columns)?;
    }
    let available: HashSet<ColumnId> = plan
        .inputs()
        .iter()
        .flat_map(|input| input.output())
        .collect();
    let reads = |expr: &Expr, what: &str| -> Result<(), String> {
        match expr
            .columns_used()
            .into_iter()
            .find(|c| !available.contains(c))
        {
            None => Ok(()),
            Some(missing) => Err(format!(
                "{} reads `{}`, which its input does not produce",
                what,
                columns.get(missing).name
            )),
        }
    };
    let predicate = |expr: &Expr, what: &str| match expr.ty {
        DataType::Bool => Ok(()),
        ty => Err(format!("{what} is of type {ty}, not a truth value")),
    };
    let defines = |id: ColumnId, expr: &Expr| {
        let info = columns.get(id);
        if info.ty != expr.ty {
            return Err(format!(
                "`{}` is of type {} but is defined by an expression of type {}",
                info.name, info.ty, expr.ty
            ));
        }
        if expr.nullable && !info.nullable {
            return Err(format!(
                "`{}` may not be null but is defined by an expression that may",
                info.name
            ));
        }
        Ok(())
    };
    match plan {
        LogicalPlan::Scan(scan) => {
            for filter in &scan.filters {
                predicate(filter, "a scan's filter")?;
                let foreign = filter.columns_used().into_iter().find(|c| {
                    !scan.columns.contains(c)
                        && columns
                            .get(*c)
                            .origin
                            .as_ref()
                            .is_none_or(|origin| origin.table != scan.table)
                });
                if let Some(column) = foreign {
                    return Err(format!(
                        "a filter of the scan of `{}` reads `{}`, not a column of it",
                        scan.table,
                        columns.get(column).name
                    ));
                }
            }
        }
        LogicalPlan::Filter(filter) => {
            predicate(&filter.predicate, "a filter")?;
            reads(&filter.predicate, "a filter")?;
        }
        LogicalPlan::Project(project) => {
            for (id, expr) in &project.outputs {
                reads(expr, "a projection")?;
                defines(*id, expr)?;
            }
        }
        LogicalPlan::Join(join) => {
            let (left, right) = (join.left.output(), join.right.output());
            for (l, r) in &join.keys {
                if let Some(c) = l.columns_used().into_iter().find(|c| !left.contains(c)) {
                    return Err(format!(
                        "a join's key reads `{}` from the wrong side",
                        columns.get(c).name
                    ));
                }
                if let Some(c) = r.columns_used().into_iter().find(|c| !right.contains(c)) {
                    return Err(format!(
                        "a join's key reads `{}` from the wrong side",
                        columns.get(c).name
                    ));
                }
            }
            if let Some(residual) = &join.residual {
                predicate(residual, "a join's condition")?;
                reads(residual, "a join's condition")?;
            }
        }
        LogicalPlan::Aggregate(aggregate) => {
            for (id, key) in &aggregate.keys {
                reads(key, "a group key")?;
                defines(*id, key)?;
            }
            for (_, aggregate) in &aggregate.aggregates {
                if let Some(arg) = &aggregate.arg {
                    reads(arg, "an aggregate")?;
                }
            }
        }
        LogicalPlan::Sort(sort) => {
            for key in &sort.keys {
                reads(&key.expr, "a sort key")?;
            }
        }
        LogicalPlan::SetOperation(set) => {
            let (left, right) = (set.left.output().len(), set.right.output().len());
            if left != set.outputs.len() || right != set.outputs.len() {
                return Err(format!(
                    "a set operation of {} columns has inputs of {left} and {right}",
                    set.outputs.len()
                ));
            }
        }
        LogicalPlan::Limit(_) | LogicalPlan::Distinct(_) | LogicalPlan::Product(_) => {}
    }
    Ok(())
}

fn names(ids: &[ColumnId], columns: &Columns) -> String {
    ids.iter()
        .map(|id| columns.get(*id).name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}
