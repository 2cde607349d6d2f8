//! The SSB generator at SF 0.01: the same bytes on any number of threads, the row counts dbgen
//! makes, and values inside the domains the 13 queries rely on.

use std::collections::BTreeSet;
use std::path::Path;

use super::TempDir;
use crate::catalog::Catalog;
use crate::column::{Column, ColumnData};
use crate::gen::{generate_ssb, ssb_schemas, GenSummary};
use crate::progress::NoProgress;
use crate::types::Value;

fn generate_on_threads(threads: usize, dir: &Path) -> GenSummary {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| generate_ssb(0.01, dir, &NoProgress))
        .unwrap()
}

fn ints(column: &Column) -> &[i32] {
    match &column.data {
        ColumnData::I32(values) => values,
        other => panic!("expected i32 values, got {:?}", other.ty()),
    }
}

/// The distinct strings of a column.
fn distinct(column: &Column) -> BTreeSet<String> {
    (0..column.len())
        .map(|row| match column.data.value(row) {
            Value::Str(s) => s.to_string(),
            other => panic!("expected a string, got {other}"),
        })
        .collect()
}

fn range(column: &Column) -> (i64, i64) {
    column.stats.int_range().unwrap()
}

#[test]
fn generation_is_deterministic_and_follows_the_ssb_domains() {
    let one = TempDir::new("ssb-1-thread");
    let three = TempDir::new("ssb-3-threads");
    let summary = generate_on_threads(1, one.path());
    generate_on_threads(3, three.path());

    // Identical bytes, file by file, whatever the thread count.
    for table in &summary.tables {
        for file in &table.files {
            let relative = file.strip_prefix(one.path()).unwrap();
            let a = std::fs::read(file).unwrap();
            let b = std::fs::read(three.path().join(relative)).unwrap();
            assert!(a == b, "{} differs between runs", relative.display());
        }
    }

    assert_eq!(summary.rows("part"), Some(2_000));
    assert_eq!(summary.rows("supplier"), Some(20));
    assert_eq!(summary.rows("customer"), Some(300));
    assert_eq!(summary.rows("date"), Some(2_556));
    // 15,000 orders of 1-7 lines: about 60,000 rows.
    let lines = summary.rows("lineorder").unwrap();
    assert!((58_000..62_000).contains(&lines), "{lines} lineorder rows");

    // The generated files agree with the declared SSB schemas.
    let catalog = Catalog::open(one.path(), &ssb_schemas()).unwrap();
    assert_eq!(catalog.table("lineorder").unwrap().rows, lines);
    let lo = |name: &str| catalog.column("lineorder", name).unwrap();
    let dim = |table: &str, name: &str| catalog.column(table, name).unwrap();

    assert_eq!(range(&lo("lo_discount")), (0, 10));
    assert_eq!(range(&lo("lo_quantity")), (1, 50));
    assert_eq!(range(&lo("lo_tax")), (0, 8));
    assert_eq!(range(&lo("lo_linenumber")), (1, 7));
    assert_eq!(range(&lo("lo_orderkey")), (1, 15_000));
    let (low, high) = range(&lo("lo_custkey"));
    assert!(low >= 1 && high <= 300);
    assert!(ints(&lo("lo_custkey")).iter().all(|k| k % 3 != 0));
    let (low, high) = range(&lo("lo_partkey"));
    assert!(low >= 1 && high <= 2_000);
    assert_eq!(range(&lo("lo_suppkey")), (1, 20));

    // Order and commit dates are keys of the date table; orders end on 1998-08-02.
    let datekeys: BTreeSet<i32> = ints(&dim("date", "d_datekey")).iter().copied().collect();
    assert_eq!(datekeys.len(), 2_556);
    assert!(ints(&lo("lo_orderdate"))
        .iter()
        .all(|d| datekeys.contains(d)));
    assert!(ints(&lo("lo_commitdate"))
        .iter()
        .all(|d| datekeys.contains(d)));
    let (first, last) = range(&lo("lo_orderdate"));
    assert!(first >= 19_920_101 && last <= 19_980_802);

    // Revenue and prices follow from quantity, discount and the part's price.
    let (extended, discount, revenue) =
        (lo("lo_extendedprice"), lo("lo_discount"), lo("lo_revenue"));
    for row in (0..lines as usize).step_by(97) {
        let expected =
            i64::from(ints(&extended)[row]) * (100 - i64::from(ints(&discount)[row])) / 100;
        assert_eq!(i64::from(ints(&revenue)[row]), expected);
    }

    assert_eq!(distinct(&lo("lo_orderpriority")).len(), 5);
    assert_eq!(distinct(&lo("lo_shipmode")).len(), 7);
    assert_eq!(
        distinct(&lo("lo_shippriority")),
        BTreeSet::from(["0".to_string()])
    );

    let regions = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"].map(String::from);
    assert_eq!(
        distinct(&dim("customer", "c_region")),
        BTreeSet::from(regions.clone())
    );
    assert!(distinct(&dim("supplier", "s_region")).is_subset(&BTreeSet::from(regions)));
    assert_eq!(distinct(&dim("customer", "c_nation")).len(), 25);
    let cities = distinct(&dim("customer", "c_city"));
    // 300 customers over 250 cities meet about 250 × (1 - e^-1.2) ≈ 175 of them.
    assert!(
        cities.len() <= 250 && cities.len() > 150,
        "{} cities",
        cities.len()
    );
    assert!(cities.iter().all(|c| c.len() == 10));
    assert!(cities.contains("UNITED KI1"));
    assert_eq!(distinct(&dim("customer", "c_mktsegment")).len(), 5);

    assert_eq!(distinct(&dim("part", "p_mfgr")).len(), 5);
    let categories = distinct(&dim("part", "p_category"));
    let expected: BTreeSet<String> = (1..=5)
        .flat_map(|m| (1..=5).map(move |c| format!("MFGR#{m}{c}")))
        .collect();
    assert_eq!(categories, expected);
    let brands = distinct(&dim("part", "p_brand1"));
    assert!(brands.len() > 800, "{} brands", brands.len());
    assert!(brands
        .iter()
        .all(|b| b.len() == 9 && b.as_str() >= "MFGR#1101" && b.as_str() <= "MFGR#5540"));
    assert_eq!(range(&dim("part", "p_size")), (1, 50));
    assert_eq!(range(&dim("part", "p_partkey")), (1, 2_000));

    assert_eq!(range(&dim("date", "d_year")), (1992, 1998));
    assert_eq!(range(&dim("date", "d_weeknuminyear")), (1, 53));
    assert!(distinct(&dim("date", "d_yearmonth")).contains("Dec1997"));
    assert_eq!(distinct(&dim("date", "d_sellingseason")).len(), 5);
}

#[test]
fn a_second_run_replaces_the_first() {
    let dir = TempDir::new("ssb-again");
    // A stale file from some earlier, larger run.
    std::fs::create_dir_all(dir.path().join("lineorder")).unwrap();
    std::fs::write(dir.path().join("lineorder/lineorder-999.parquet"), "stale").unwrap();
    let summary = generate_ssb(0.001, dir.path(), &NoProgress).unwrap();
    assert_eq!(summary.rows("customer"), Some(30));
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(
        catalog.table("lineorder").unwrap().rows,
        summary.rows("lineorder").unwrap()
    );
}
