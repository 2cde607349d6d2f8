//! What a grouping accumulates for its aggregates: the type each one folds its values in, and,
//! where each thread sums its rows first (`DenseUpdates::PerThread`), the values the threads
//! keep, one per distinct computation.

use tessera_stdlib::Aggregate;
use tessera_storage::DataType;

use crate::expr::{AggregateExpr, Expr, ExprKind};

/// The type an aggregate folds its values in: a sum's own type, a decimal average's raw units
/// (summed exactly, `Planner::exact_average`) or any other average's float, a min's or max's
/// argument, a count's 64-bit integer.
pub fn accumulator_type(aggregate: &AggregateExpr) -> DataType {
    match aggregate.function {
        Aggregate::Sum => aggregate.ty,
        Aggregate::Count => DataType::I64,
        Aggregate::Avg => match aggregate.arg.as_ref().map(|a| a.ty) {
            Some(decimal @ DataType::Decimal(_)) => decimal,
            _ => DataType::F64,
        },
        Aggregate::Min | Aggregate::Max => aggregate.arg.as_ref().map_or(aggregate.ty, |a| a.ty),
    }
}

/// Whether a grouping (with keys) counts an aggregate's rows beside its value: an average's
/// divisor, and the rows a sum, min or max of a nullable argument saw (none makes the result
/// null).
pub fn counts_rows(aggregate: &AggregateExpr) -> bool {
    match aggregate.function {
        Aggregate::Count => false,
        Aggregate::Avg => true,
        Aggregate::Sum | Aggregate::Min | Aggregate::Max => {
            aggregate.arg.as_ref().is_some_and(|a| a.nullable)
        }
    }
}

/// Shared memory a GPU thread block may spend on its copy of a dense grouping's slots
/// (`DenseUpdates::BlockLocal`), of the 48 KB a block declares statically: the rest is for its
/// reductions and staged columns.
pub const GROUP_COPY_BYTES: u64 = 40 << 10;

/// Bytes a block's copy of `slots` group slots takes: per slot, a presence byte and each
/// aggregate's accumulator and row count. The planner sizes the copy with this and code
/// generation allocates it.
pub fn group_copy_bytes<'a>(
    slots: u64,
    aggregates: impl IntoIterator<Item = &'a AggregateExpr>,
) -> u64 {
    let per_slot: u64 = 1 + aggregates
        .into_iter()
        .map(|a| accumulator_type(a).width() as u64 + if counts_rows(a) { 8 } else { 0 })
        .sum::<u64>();
    slots.saturating_mul(per_slot)
}

/// A value each thread accumulates for every slot of a grouping summed per thread first.
#[derive(Clone, Debug, PartialEq)]
pub enum ThreadValue {
    /// The fold (sum, min or max) of `arg`, in `accumulator`.
    Fold {
        function: Aggregate,
        arg: Expr,
        accumulator: DataType,
    },
    /// The rows selected, or those where the expression is not null.
    Count(Option<Expr>),
}

impl ThreadValue {
    /// Whether the two accumulate the same bits from every row: the same fold of the same
    /// computation (`sum(x)` and `avg(x)` both add `x`'s units: a decimal's precision aside,
    /// its scale fixes them), or counts of the same rows.
    fn same(&self, other: &ThreadValue) -> bool {
        match (self, other) {
            (
                ThreadValue::Fold {
                    function: f1,
                    arg: a1,
                    accumulator: t1,
                },
                ThreadValue::Fold {
                    function: f2,
                    arg: a2,
                    accumulator: t2,
                },
            ) => {
                let same_units = match (t1, t2) {
                    (DataType::Decimal(d1), DataType::Decimal(d2)) => d1.scale == d2.scale,
                    _ => t1 == t2,
                };
                f1 == f2 && same_units && a1.same_computation(a2)
            }
            (ThreadValue::Count(None), ThreadValue::Count(None)) => true,
            (ThreadValue::Count(Some(a)), ThreadValue::Count(Some(b))) => {
                null_source(a).same_computation(null_source(b))
            }
            _ => false,
        }
    }
}

/// What decides whether `expr` is null: a cast is null exactly where its operand is (a value it
/// cannot convert is an error, not a null), so the rows `sum(x)` and the float sum checking it,
/// `sum(x as f64)`, count are one count.
fn null_source(expr: &Expr) -> &Expr {
    match &expr.kind {
        ExprKind::Cast(operand) => null_source(operand),
        _ => expr,
    }
}

/// The values the threads of a per-thread grouping keep for each slot, and which of them each
/// aggregate reads. Registers hold them all for every slot, so sharing them is what lets TPC-H
/// Q1 (eight aggregates, six slots) stay in registers: `sum_qty` and `avg_qty` add up the same
/// quantities, and `count()` is the divisor of every average of a column without nulls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadValues {
    pub values: Vec<ThreadValue>,
    /// Per aggregate, in order: the value it folds, and the count it reads (where
    /// [`counts_rows`]).
    pub of_aggregate: Vec<(usize, Option<usize>)>,
}

impl ThreadValues {
    pub fn of<'a>(aggregates: impl IntoIterator<Item = &'a AggregateExpr>) -> ThreadValues {
        let mut values = ThreadValues::default();
        for aggregate in aggregates {
            let counted_rows = aggregate.arg.clone().filter(|arg| arg.nullable);
            let value = match (aggregate.function, &aggregate.arg) {
                (Aggregate::Count, _) | (_, None) => ThreadValue::Count(counted_rows.clone()),
                (function, Some(arg)) => ThreadValue::Fold {
                    function: match function {
                        Aggregate::Avg => Aggregate::Sum,
                        other => other,
                    },
                    arg: arg.clone(),
                    accumulator: accumulator_type(aggregate),
                },
            };
            let value = values.index_of(value);
            let count =
                counts_rows(aggregate).then(|| values.index_of(ThreadValue::Count(counted_rows)));
            values.of_aggregate.push((value, count));
        }
        values
    }

    fn index_of(&mut self, value: ThreadValue) -> usize {
        match self.values.iter().position(|v| v.same(&value)) {
            Some(index) => index,
            None => {
                self.values.push(value);
                self.values.len() - 1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tessera_grammar::Span;
    use tessera_stdlib::Aggregate;
    use tessera_storage::{DataType, DecimalType};

    use super::ThreadValues;
    use crate::columns::ColumnId;
    use crate::expr::{AggregateExpr, Expr, ExprKind};

    /// Column `id` of `ty` as written at byte `at` of a script.
    fn column(id: u32, ty: DataType, nullable: bool, at: usize) -> Expr {
        Expr::new(
            ExprKind::Column(ColumnId(id)),
            ty,
            nullable,
            Span::new(at, at + 1),
        )
    }

    fn aggregate(function: Aggregate, arg: Option<Expr>, ty: DataType) -> AggregateExpr {
        AggregateExpr {
            function,
            arg,
            ty,
            span: Span::default(),
        }
    }

    #[test]
    fn aggregates_of_the_same_values_share_them() {
        let price = DataType::Decimal(DecimalType::new(15, 2).unwrap());
        let sum = DataType::Decimal(DecimalType::new(18, 2).unwrap());
        let wide = DataType::Decimal(DecimalType::new(38, 2).unwrap());
        let values = ThreadValues::of(&[
            // sum(price) and avg(price), written apart: one sum, and avg's count is count()'s.
            aggregate(Aggregate::Sum, Some(column(0, price, false, 10)), sum),
            aggregate(
                Aggregate::Avg,
                Some(column(0, price, false, 20)),
                DataType::F64,
            ),
            aggregate(Aggregate::Count, None, DataType::I64),
            // A nullable column: its sum, average and count share its count of non-nulls.
            aggregate(
                Aggregate::Sum,
                Some(column(1, DataType::F64, true, 30)),
                DataType::F64,
            ),
            aggregate(
                Aggregate::Avg,
                Some(column(1, DataType::F64, true, 40)),
                DataType::F64,
            ),
            aggregate(
                Aggregate::Count,
                Some(column(1, DataType::F64, true, 50)),
                DataType::I64,
            ),
            // A max is not a sum, and an integer's sum is not its float average's.
            aggregate(Aggregate::Max, Some(column(0, price, false, 60)), price),
            aggregate(
                Aggregate::Sum,
                Some(column(2, DataType::I64, false, 70)),
                DataType::I64,
            ),
            aggregate(
                Aggregate::Avg,
                Some(column(2, DataType::I64, false, 80).cast(DataType::F64)),
                DataType::F64,
            ),
            // A nullable decimal's sum and the float sum checking it count the same rows.
            aggregate(Aggregate::Sum, Some(column(3, wide, true, 90)), wide),
            aggregate(
                Aggregate::Sum,
                Some(column(3, wide, true, 100).cast(DataType::F64)),
                DataType::F64,
            ),
        ]);
        assert_eq!(values.values.len(), 10);
        assert_eq!(
            values.of_aggregate,
            vec![
                (0, None),
                (0, Some(1)),
                (1, None),
                (2, Some(3)),
                (2, Some(3)),
                (3, None),
                (4, None),
                (5, None),
                (6, Some(1)),
                (7, Some(8)),
                (9, Some(8)),
            ]
        );
    }
}
