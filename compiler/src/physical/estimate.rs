//! Estimates from catalog statistics: the fraction of rows a predicate keeps, and the value
//! domain of a column. They steer choices (probe order, table layouts); a wrong estimate makes a
//! plan slower, never wrong. A resident engine keeps the estimates it took ([`Estimates`]), so
//! that scripts differing only in their constants are planned alike and share compiled code.

use std::cell::RefCell;
use std::collections::HashMap;

use tessera_grammar::ast::{BinaryOp, UnaryOp};
use tessera_storage::{Catalog, ColumnStats, DataType, Value};

use crate::columns::{ColumnId, Columns};
use crate::expr::{Expr, ExprKind};

/// The selectivity assumed for a predicate nothing is known about.
const UNKNOWN: f64 = 1.0 / 3.0;

/// Selectivities estimated so far, by the shape of their predicate: its operators and columns
/// with the constants' values left out. A predicate of a known shape takes the estimate of the
/// first one seen, whatever its constants, as PostgreSQL runs a prepared statement's generic
/// plan: otherwise constants that move an estimate far enough (an empty year range) would
/// reorder a plan's probes, and a script differing from an earlier one only in its constants
/// would compile anew instead of running the earlier one's code. The price is the plan's
/// fit to those constants; a wrong estimate makes a plan slower, never wrong.
#[derive(Debug, Default)]
pub struct Estimates {
    by_shape: HashMap<String, f64>,
}

impl Estimates {
    /// The most shapes kept; past them the memory starts afresh.
    const MAX_SHAPES: usize = 16_384;

    fn remember(&mut self, shape: String, selectivity: f64) {
        if self.by_shape.len() >= Self::MAX_SHAPES {
            self.by_shape.clear();
        }
        self.by_shape.insert(shape, selectivity);
    }
}

pub(super) struct Estimator<'a> {
    pub catalog: &'a Catalog,
    pub columns: &'a Columns,
    /// Estimates kept from earlier scripts, when the planner runs in a resident engine.
    pub remembered: Option<&'a RefCell<Estimates>>,
}

impl Estimator<'_> {
    /// Statistics of the stored column behind `id`, if it has one and they can be had (from
    /// the files' footers where possible, so planning reads no data for numeric columns).
    pub fn stats(&self, id: ColumnId) -> Option<ColumnStats> {
        let origin = self.columns.get(id).origin.as_ref()?;
        self.catalog.stats(&origin.table, &origin.column).ok()
    }

    /// Whether the stored column behind `id` holds no value twice, when that can be known.
    pub fn unique(&self, id: ColumnId) -> Option<bool> {
        let origin = self.columns.get(id).origin.as_ref()?;
        self.catalog
            .unique(&origin.table, &origin.column)
            .ok()
            .flatten()
    }

    /// The integer range `[min, max]` of a column (codes for strings, raw units for decimals,
    /// microseconds for timestamps).
    pub fn int_range(&self, id: ColumnId) -> Option<(i64, i64)> {
        let info = self.columns.get(id);
        if !(info.ty.is_integer()
            || info.ty.is_decimal()
            || matches!(
                info.ty,
                DataType::Str | DataType::Date | DataType::Timestamp | DataType::Bool
            ))
        {
            return None;
        }
        let stats = self.stats(id)?;
        if info.ty == DataType::Str {
            let size = stats.dictionary_size? as i64;
            return Some((0, size - 1));
        }
        stats.int_range()
    }

    /// The number of distinct values a column can have, as far as statistics tell.
    fn distinct(&self, id: ColumnId) -> Option<f64> {
        let stats = self.stats(id)?;
        if let Some(size) = stats.dictionary_size {
            return Some(size.max(1) as f64);
        }
        let (lo, hi) = stats.int_range()?;
        Some(
            (super::range_slots(lo, hi) as f64)
                .min(stats.rows.max(1) as f64)
                .max(1.0),
        )
    }

    /// The fraction of rows for which `predicate` is true: the remembered estimate of its
    /// shape when there is one.
    pub fn selectivity(&self, predicate: &Expr) -> f64 {
        let Some(remembered) = self.remembered else {
            return self.estimate(predicate);
        };
        let shape = self.shape(predicate);
        if let Some(&selectivity) = remembered.borrow().by_shape.get(&shape) {
            return selectivity;
        }
        let selectivity = self.estimate(predicate);
        remembered.borrow_mut().remember(shape, selectivity);
        selectivity
    }

    /// `predicate` with its constants' values left out, and the stored columns it reads (its
    /// column ids are the query's own).
    fn shape(&self, predicate: &Expr) -> String {
        let erased = predicate.clone().transform(&mut |e| match e.kind {
            ExprKind::Literal(Value::Bool(_)) => e,
            ExprKind::Literal(_) | ExprKind::StrCode(_) => Expr {
                kind: ExprKind::Constant { slot: 0, bits: 0 },
                ..e
            },
            _ => e,
        });
        let mut shape = super::constants::without_spans(&format!("{erased:?}"));
        for column in predicate.columns_used() {
            match &self.columns.get(column).origin {
                Some(origin) => shape.push_str(&format!(" {}.{}", origin.table, origin.column)),
                None => shape.push_str(" computed"),
            }
        }
        shape
    }

    /// The fraction of rows for which `predicate` is true, from the statistics.
    fn estimate(&self, predicate: &Expr) -> f64 {
        let s = match &predicate.kind {
            ExprKind::Literal(Value::Bool(b)) => f64::from(u8::from(*b)),
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => 1.0 - self.estimate(operand),
            ExprKind::Binary { op, left, right } => match op {
                BinaryOp::And => self.estimate(left) * self.estimate(right),
                BinaryOp::Or => {
                    let (a, b) = (self.estimate(left), self.estimate(right));
                    a + b - a * b
                }
                op if op.is_comparison() => self.comparison(*op, left, right),
                _ => UNKNOWN,
            },
            _ => UNKNOWN,
        };
        s.clamp(0.0, 1.0)
    }

    fn comparison(&self, op: BinaryOp, left: &Expr, right: &Expr) -> f64 {
        let (column, constant, op) = match (
            left.as_column(),
            constant(right),
            right.as_column(),
            constant(left),
        ) {
            (Some(c), Some(k), _, _) => (c, k, op),
            (_, _, Some(c), Some(k)) => (c, k, crate::expr::mirror(op)),
            _ => return UNKNOWN,
        };
        let distinct = self.distinct(column);
        match op {
            BinaryOp::Eq => distinct.map_or(UNKNOWN, |d| 1.0 / d),
            BinaryOp::Ne => distinct.map_or(1.0 - UNKNOWN, |d| 1.0 - 1.0 / d),
            _ => {
                let Some((lo, hi)) = self.int_range(column) else {
                    return UNKNOWN;
                };
                let width = super::range_slots(lo, hi) as f64;
                let below = |k: f64| ((k - lo as f64) / width).clamp(0.0, 1.0);
                match op {
                    BinaryOp::Lt => below(constant),
                    BinaryOp::Le => below(constant + 1.0),
                    BinaryOp::Gt => 1.0 - below(constant + 1.0),
                    BinaryOp::Ge => 1.0 - below(constant),
                    _ => UNKNOWN,
                }
            }
        }
    }
}

/// The value of a constant operand, as a number on the column's integer scale.
fn constant(expr: &Expr) -> Option<f64> {
    match &expr.kind {
        ExprKind::Literal(Value::Int(i)) => Some(*i as f64),
        ExprKind::Literal(Value::Float(x)) => Some(*x),
        ExprKind::Literal(Value::Date(d)) => Some(f64::from(*d)),
        ExprKind::Literal(Value::Timestamp(t) | Value::Time(t)) => Some(*t as f64),
        ExprKind::StrCode(code) => Some(f64::from(code.code)),
        _ => None,
    }
}
