//! Compiles small scripts for the host and runs them over in-memory tables, checking the
//! answers against values computed here by plain Rust.

use tessera_compiler::codegen::pipelines_to_program;
use tessera_compiler::Compilation;
use tessera_grammar::source_to_ast;
use tessera_runtime::exec::host::HostBackend;
use tessera_runtime::exec::run_query;
use tessera_runtime::program::{Code, Program};
use tessera_runtime::result::ResultTable;
use tessera_runtime::Target;
use tessera_storage::{Catalog, Column, ColumnData, DictionaryBuilder, Value};

fn catalog() -> Catalog {
    let n = 10_000usize;
    let a: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 1000).collect();
    let b: Vec<i32> = (0..n as i32).map(|i| i % 97 - 40).collect();
    let x: Vec<f64> = (0..n).map(|i| (i as f64) * 0.001).collect();
    let w: Vec<i32> = (0..n as i32).map(|i| 1000 + (i % 100) * 100).collect();
    let k: Vec<i32> = (0..n as i32).map(|i| i % 50 + 1).collect();
    let mut region = DictionaryBuilder::default();
    for i in 0..50 {
        region.push(["ASIA", "EUROPE", "AMERICA"][i % 3]);
    }
    let dim_key: Vec<i32> = (1..=50).collect();
    // A second dimension with a far wider key range than `dim`, so both get perfect tables of
    // different sizes in one module.
    let wide_key: Vec<i32> = (0..100).map(|i| 1000 + i * 100).collect();
    let wide_value: Vec<i32> = (0..100).collect();
    let dim_value: Vec<i32> = (1..=50).map(|i| i * 10).collect();
    Catalog::from_columns(vec![
        (
            "t".into(),
            vec![
                ("a".into(), Column::new(ColumnData::I32(a.into()), None)),
                ("b".into(), Column::new(ColumnData::I32(b.into()), None)),
                ("x".into(), Column::new(ColumnData::F64(x.into()), None)),
                ("k".into(), Column::new(ColumnData::I32(k.into()), None)),
                ("w".into(), Column::new(ColumnData::I32(w.into()), None)),
            ],
        ),
        (
            "dim".into(),
            vec![
                (
                    "d_key".into(),
                    Column::new(ColumnData::I32(dim_key.into()), None),
                ),
                (
                    "d_value".into(),
                    Column::new(ColumnData::I32(dim_value.into()), None),
                ),
                ("d_region".into(), Column::new(region.finish(), None)),
            ],
        ),
        (
            "wide".into(),
            vec![
                (
                    "w_key".into(),
                    Column::new(ColumnData::I32(wide_key.into()), None),
                ),
                (
                    "w_value".into(),
                    Column::new(ColumnData::I32(wide_value.into()), None),
                ),
            ],
        ),
    ])
}

/// `source` compiled for the host over `catalog`.
fn compile(source: &str, catalog: &Catalog) -> Program {
    let ast = source_to_ast(source).expect("parses");
    let compilation = Compilation::run(ast, catalog).unwrap_or_else(|d| panic!("{d:?}"));
    pipelines_to_program(&compilation.physical, catalog, Target::Host)
        .unwrap_or_else(|d| panic!("{d:?}"))
}

fn run(source: &str) -> ResultTable {
    let catalog = catalog();
    let program = compile(source, &catalog);
    let Code::HostObject(object) = &program.code else {
        panic!("host code expected")
    };
    let mut backend = HostBackend::new(object).expect("loads");
    run_query(&mut backend, &program.queries[0], &catalog)
        .expect("runs")
        .table
}

#[test]
fn scalar_aggregates_with_a_filter() {
    let result = run("from t | where a > 500 and b < 10 | aggregate { s = sum(b), n = count(), lo = min(a), hi = max(x) }");
    let n = 10_000i64;
    let rows: Vec<i64> = (0..n)
        .filter(|i| (i * 7919) % 1000 > 500 && i % 97 - 40 < 10)
        .collect();
    let s: i64 = rows.iter().map(|i| i % 97 - 40).sum();
    let lo = rows.iter().map(|i| (i * 7919) % 1000).min().unwrap();
    let hi = rows
        .iter()
        .map(|&i| i as f64 * 0.001)
        .fold(f64::MIN, f64::max);
    assert_eq!(
        result.rows,
        vec![vec![
            Value::Int(s),
            Value::Int(rows.len() as i64),
            Value::Int(lo),
            Value::Float(hi)
        ]]
    );
}

#[test]
fn join_and_group_by_string() {
    let result = run(
        "from t | join dim on k == d_key | where d_region != \"EUROPE\" \
         | group d_region { total = sum(d_value), n = count() } | sort d_region",
    );
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..10_000i64 {
        let key = i % 50 + 1;
        let region = ["ASIA", "EUROPE", "AMERICA"][(key - 1) as usize % 3];
        if region != "EUROPE" {
            let e = expected.entry(region).or_insert((0i64, 0i64));
            e.0 += key * 10;
            e.1 += 1;
        }
    }
    let expected: Vec<Vec<Value>> = expected
        .into_iter()
        .map(|(r, (s, n))| vec![Value::Str(r.into()), Value::Int(s), Value::Int(n)])
        .collect();
    assert_eq!(result.rows, expected);
}

#[test]
fn empty_input_gives_null_sums_and_zero_counts() {
    let result = run("from t | where a > 5000 | aggregate { s = sum(b), n = count(), m = avg(x) }");
    assert_eq!(
        result.rows,
        vec![vec![Value::Null, Value::Int(0), Value::Null]]
    );
}

#[test]
fn two_perfect_tables_with_different_ranges() {
    // Each table's range must reach its own probes: a shared primitive once clipped the wider
    // table to the narrower one's range.
    let result = run("from t | join dim on k == d_key | join wide on w == w_key | group w_value, d_value { n = count() }");
    assert_eq!(result.rows.len(), 100);
    assert!(result.rows.iter().all(|row| row[2] == Value::Int(100)));
}

/// A sort on the device of few rows is left to the host: its kernels are not launched, and the
/// rows come out as the device sorts them, with or without a `take`, by integers and by strings.
#[test]
fn a_sort_of_few_rows_is_left_to_the_host() {
    let catalog = catalog();
    for source in [
        "from t | where a < 40 | select a, b | sort b desc, a",
        "from t | where a < 40 | select a, b | sort b, a desc | take 17",
        "from t | join dim on k == d_key | where a < 40 | select d_region, a \
         | sort d_region desc, a | take 30",
    ] {
        let program = compile(source, &catalog);
        let Code::HostObject(object) = &program.code else {
            panic!("host code expected")
        };
        let query = &program.queries[0];
        let host = query
            .result
            .host_sort
            .as_ref()
            .expect("a sort on the device");
        let mut on_device = query.clone();
        on_device.result.host_sort = None;
        let mut backend = HostBackend::new(object).expect("loads");
        let left = run_query(&mut backend, query, &catalog).expect("runs");
        let sorted = run_query(&mut backend, &on_device, &catalog).expect("runs");
        assert!(!left.table.rows.is_empty(), "{source}");
        assert_eq!(left.table, sorted.table, "{source}");
        assert_eq!(left.timing.kernels.len(), host.first_kernel, "{source}");
        assert!(sorted.timing.kernels.len() > host.first_kernel, "{source}");
    }
}
