//! The TPC-H generator at SF 0.01: the row counts and the first rows the reference dbgen
//! makes, read back with their types (money as exact decimals), and the same files on any
//! number of threads.

use std::path::Path;

use super::TempDir;
use crate::catalog::Catalog;
use crate::gen::tpch::{generate_tpch, tpch_schemas};
use crate::progress::NoProgress;
use crate::types::{DataType, DecimalType, Value};

fn generate_on_threads(threads: usize, dir: &Path) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| generate_tpch(0.01, dir, &NoProgress))
        .unwrap();
}

#[test]
fn writes_dbgens_rows_with_exact_money() {
    let dir = TempDir::new("tpch-rows");
    generate_on_threads(2, dir.path());
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let rows = |table: &str| catalog.table(table).unwrap().rows;
    // dbgen's counts at SF 0.01.
    for (table, count) in [
        ("region", 5),
        ("nation", 25),
        ("supplier", 100),
        ("customer", 1_500),
        ("part", 2_000),
        ("partsupp", 8_000),
        ("orders", 15_000),
        ("lineitem", 60_175),
    ] {
        assert_eq!(rows(table), count, "{table}");
    }
    let schema = &catalog.table("lineitem").unwrap().schema;
    let money = DataType::Decimal(DecimalType::new(15, 2).unwrap());
    assert_eq!(schema.field("l_extendedprice").unwrap().ty, money);
    assert_eq!(schema.field("l_shipdate").unwrap().ty, DataType::Date);
    // dbgen's first line item: 1|1552|93|1|17|24710.35|0.04|0.02|N|O|1996-03-13|...
    let value = |column: &str| catalog.column("lineitem", column).unwrap().data.value(0);
    assert_eq!(value("l_partkey"), Value::Int(1552));
    assert_eq!(value("l_quantity"), Value::Decimal(1700, 2));
    assert_eq!(value("l_extendedprice"), Value::Decimal(2_471_035, 2));
    assert_eq!(value("l_discount"), Value::Decimal(4, 2));
    assert_eq!(value("l_returnflag"), Value::Str("N".into()));
    assert_eq!(value("l_shipdate").to_string(), "1996-03-13");
    let written: Vec<&str> = tpch_schemas().iter().map(|(name, _)| *name).collect();
    assert_eq!(written.len(), 8);
}

#[test]
fn the_same_files_on_any_number_of_threads() {
    let (one, four) = (TempDir::new("tpch-one"), TempDir::new("tpch-four"));
    generate_on_threads(1, one.path());
    generate_on_threads(4, four.path());
    for (table, _) in tpch_schemas() {
        let name = format!("{table}.parquet");
        let a = std::fs::read(one.path().join(&name)).unwrap();
        let b = std::fs::read(four.path().join(&name)).unwrap();
        assert!(a == b, "{name} differs between one and four threads");
    }
}
