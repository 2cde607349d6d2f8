//! Constants hoisted out of kernels. Every number, date and string literal a kernel evaluates
//! becomes a parameter (`ExprKind::Constant`), its value kept in `PhysicalQuery::constants`:
//! the code reads the value when it runs, as HeavyDB hoists its literals, so two queries that
//! differ only in their constants run the same compiled code. What decides whether code can be
//! shared is [`shape`]: the plan with the constants' values (and the estimates, which only
//! steer how code branches) left out. Every decision a plan took from a value (an order of
//! steps, a key range, a layout, the bits a literal needs) stays in the shape, so queries share
//! code only where no decision differs. Host steps keep their literals:
//! they run over small results and are part of the shape.

use tessera_storage::Value;

use crate::expr::{Expr, ExprKind, StrCode};

use super::{PhysicalQuery, Sink, Step};

/// The most constants a query hoists: each is an 8-byte kernel parameter, and a GPU kernel's
/// parameters have 4 KB (the columns and buffers it reads take their share). Literals beyond
/// these (a long `in` list) stay in the code, and in the query's shape.
pub const MAX_HOISTED: usize = 128;

/// A hoisted constant's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Constant {
    /// A number or a date, passed as the bits of the value in its expression's type.
    Value(Value),
    /// A string literal, passed as its code in a column's dictionary (looked up when the
    /// query runs).
    StrCode(StrCode),
}

impl Constant {
    /// The value as the program carries it: a string literal as its text.
    pub fn value(&self) -> Value {
        match self {
            Constant::Value(value) => value.clone(),
            Constant::StrCode(code) => Value::Str(code.text.as_str().into()),
        }
    }

    /// What the code depends on besides the value: the dictionary a string's code is looked
    /// up in, and which code of it.
    fn shape(&self) -> String {
        match self {
            Constant::Value(_) => String::new(),
            Constant::StrCode(code) => format!("{:?} {:?}", code.dictionary, code.bound),
        }
    }
}

/// Replaces the literals of every expression the query's kernels evaluate (steps and sinks)
/// with `ExprKind::Constant`, appending their values to `query.constants`.
pub fn hoist(query: &mut PhysicalQuery) {
    let mut constants = std::mem::take(&mut query.constants);
    for pipeline in &mut query.pipelines {
        for step in &mut pipeline.steps {
            match step {
                Step::Filter {
                    predicate: expr, ..
                }
                | Step::Probe { key: expr, .. }
                | Step::Compute { expr, .. } => hoist_expr(expr, &mut constants),
            }
        }
        match &mut pipeline.sink {
            Sink::Build { key, .. } => hoist_expr(key, &mut constants),
            Sink::Aggregate {
                keys, aggregates, ..
            } => {
                for (_, key) in keys {
                    hoist_expr(key, &mut constants);
                }
                for (_, aggregate) in aggregates {
                    if let Some(arg) = &mut aggregate.arg {
                        hoist_expr(arg, &mut constants);
                    }
                }
            }
            Sink::Materialize { .. } | Sink::Partition { .. } | Sink::KeepGroups => {}
        }
    }
    query.constants = constants;
}

fn hoist_expr(expr: &mut Expr, constants: &mut Vec<Constant>) {
    let placeholder = Expr::null(expr.ty, expr.span);
    let owned = std::mem::replace(expr, placeholder);
    *expr = owned.transform(&mut |e| {
        let constant = match &e.kind {
            // A pattern is always a parameter: the code reads the answers computed from it.
            ExprKind::Literal(value @ Value::Str(_)) => Constant::Value(value.clone()),
            _ if constants.len() >= MAX_HOISTED => return e,
            ExprKind::Literal(
                value @ (Value::Int(_)
                | Value::Float(_)
                | Value::Date(_)
                | Value::Timestamp(_)
                | Value::Time(_)
                | Value::Decimal(..)),
            ) => Constant::Value(value.clone()),
            ExprKind::StrCode(code) => Constant::StrCode(code.clone()),
            _ => return e,
        };
        // Rounded up (still an upper bound, so overflow is still checked wherever it can
        // happen) so that `x + 3` and `x - 1000` have one shape.
        let bits = e.bits_needed().next_power_of_two().max(16);
        constants.push(constant);
        Expr {
            kind: ExprKind::Constant {
                slot: constants.len() - 1,
                bits,
            },
            ..e
        }
    });
}

/// The query as compiled code depends on it: the plan with its constants' values left out
/// (and its estimates, and the positions in the script, which only diagnostics use). Two queries of one shape
/// compile to the same code, except for the constants' values it is given.
pub fn shape(query: &PhysicalQuery) -> String {
    let mut shaped = PhysicalQuery {
        constants: Vec::new(),
        ..query.clone()
    };
    // Estimates only steer how code branches (code compiled for any estimate is right for any
    // data); what the plan decided from them (an order of steps, a layout) stays in the shape.
    for step in shaped.pipelines.iter_mut().flat_map(|p| &mut p.steps) {
        match step {
            Step::Filter { selectivity, .. } | Step::Probe { selectivity, .. } => {
                *selectivity = 0.0
            }
            Step::Compute { .. } => {}
        }
    }
    for table in &mut shaped.hash_tables {
        table.estimated_rows = 0.0;
    }
    let mut shape = without_spans(&format!("{shaped:?}"));
    for constant in &query.constants {
        shape.push_str(" | ");
        shape.push_str(&constant.shape());
    }
    shape
}

/// `debug` (a value's `{:?}` form) without its `span: START..END` fields. Text inside quotes
/// (a column's name) is kept whatever it holds.
pub(super) fn without_spans(debug: &str) -> String {
    const FIELD: &str = "span: ";
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    let mut quoted = false;
    while let Some(c) = rest.chars().next() {
        if !quoted && rest.starts_with(FIELD) {
            let after = &rest[FIELD.len()..];
            let range = after
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(after.len());
            if range > 0 {
                rest = &after[range..];
                continue;
            }
        }
        match c {
            '\\' if quoted => {
                // An escaped character, the quote included, stays inside the text.
                let escaped: usize = rest.chars().take(2).map(char::len_utf8).sum();
                out.push_str(&rest[..escaped]);
                rest = &rest[escaped..];
                continue;
            }
            '"' => quoted = !quoted,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use tessera_storage::column::{Column, ColumnData, DictionaryBuilder};
    use tessera_storage::{Catalog, Value};

    use super::{shape, without_spans, MAX_HOISTED};
    use crate::physical::{Estimates, PartitionJoins, PhysicalQuery};
    use crate::Compilation;

    /// `t`: `k` 0..1000, `s` one of four strings.
    fn catalog() -> Catalog {
        let mut strings = DictionaryBuilder::with_capacity(1000);
        for k in 0..1000 {
            strings.push(["a", "b", "c", "d"][k % 4]);
        }
        let k = ColumnData::I32((0..1000).collect::<Vec<i32>>().into());
        Catalog::from_columns(vec![(
            "t".into(),
            vec![
                ("k".into(), Column::new(k, None)),
                ("s".into(), Column::new(strings.finish(), None)),
            ],
        )])
    }

    fn planned(source: &str) -> PhysicalQuery {
        let ast = tessera_grammar::source_to_ast(source).expect("parses");
        let mut compilation = Compilation::run(ast, &catalog()).expect("compiles");
        compilation.physical.remove(0)
    }

    fn same_shape(a: &str, b: &str) -> bool {
        shape(&planned(a)) == shape(&planned(b))
    }

    #[test]
    fn queries_differing_only_in_constants_share_a_shape() {
        let count =
            |condition: &str| format!("from t | where {condition} | aggregate {{ n = count() }}");
        assert!(same_shape(&count("k == 3"), &count("k == 5")));
        assert!(same_shape(&count(r#"s == "a""#), &count(r#"s == "zzz""#)));
        assert!(same_shape(
            "from t | select x = k * 2.5 | aggregate { m = max(x) }",
            "from t | select x = k * 7.25 | aggregate { m = max(x) }"
        ));
        let query = planned(&count(r#"k == 3 and s == "b""#));
        let values: Vec<Value> = query.constants.iter().map(|c| c.value()).collect();
        assert_eq!(values, [Value::Int(3), Value::Str("b".into())]);

        // Ranges estimated to keep other fractions of the rows, while the plan decides nothing
        // else from them.
        assert!(same_shape(&count("k < 100"), &count("k < 900")));
        // Both bounds of a range stay in the script's order, whichever keeps fewer rows.
        assert!(same_shape(
            &count("k >= 100 and k <= 200"),
            &count("k >= 800 and k <= 900")
        ));

        // Another operator, another type, or a decision taken from the value: another shape.
        assert!(!same_shape(&count("k == 3"), &count("k < 3")));
        // A constant group key's one value is its group's slot range.
        assert!(!same_shape(
            "from t | select c = 7, s | group c, s { n = count() }",
            "from t | select c = 8, s | group c, s { n = count() }"
        ));
        assert!(!same_shape(
            "from t | select x = k + 5 | aggregate { m = max(x) }",
            "from t | select x = k + 5000000000 | aggregate { m = max(x) }"
        ));
    }

    #[test]
    fn remembered_estimates_plan_variants_alike() {
        let count = |bound: u32| {
            format!(r#"from t | where k < {bound} and s == "a" | aggregate {{ n = count() }}"#)
        };
        // Planned alone, each variant orders its two filters by its own estimates.
        assert!(!same_shape(&count(100), &count(900)));
        let mut estimates = Estimates::default();
        let mut planned_remembering = |source: &str| {
            let ast = tessera_grammar::source_to_ast(source).expect("parses");
            let catalog = catalog();
            let partition_joins = PartitionJoins::default();
            let mut compilation =
                Compilation::run_remembering(ast, &catalog, partition_joins, &mut estimates)
                    .expect("compiles");
            shape(&compilation.physical.remove(0))
        };
        let first = planned_remembering(&count(100));
        assert_eq!(planned_remembering(&count(900)), first);
    }

    #[test]
    fn a_long_list_keeps_the_constants_beyond_the_parameters_in_the_code() {
        let list: Vec<String> = (0..MAX_HOISTED * 2).map(|k| k.to_string()).collect();
        let source = format!(
            "from t | where k in ({}) | aggregate {{ n = count() }}",
            list.join(", ")
        );
        assert_eq!(planned(&source).constants.len(), MAX_HOISTED);
    }

    #[test]
    fn spans_go_and_quoted_text_stays() {
        assert_eq!(
            without_spans(r#"Expr { ty: I32, span: 12..15 }"#),
            "Expr { ty: I32,  }"
        );
        assert_eq!(
            without_spans(r#"name: "a span: 1..2 \" span: 3..4", span: 0..9"#),
            r#"name: "a span: 1..2 \" span: 3..4", "#
        );
    }
}
