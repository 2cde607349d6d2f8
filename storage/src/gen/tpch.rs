//! The TPC-H tables at a scale factor: rows from the `tpchgen` crate (the same rows as the
//! reference dbgen), written as `tpchgen-cli` writes them, one `TABLE.parquet` per table: keys
//! as `i64`, money and quantities as `decimal(15, 2)`, dates as dates, text as strings. Each
//! table is generated in parts in parallel, joined in order, so a generation is deterministic.

use std::path::Path;

use rayon::prelude::*;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};

use crate::error::StorageError;
use crate::gen::generation::{check_file_destination, Dataset, Generation, Wait};
use crate::gen::{GenColumn, GeneratedTable};
use crate::parquet_write::{write_parquet_columns, WriteColumn, DEFAULT_ROW_GROUP_ROWS};
use crate::progress::Progress;
use crate::types::{DataType, DecimalType, Field, Schema};

/// The tables, in the order they are written.
pub const TABLES: [&str; 8] = [
    "region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem",
];

/// The largest scale factor: SF 1,000 makes 6 billion `lineitem` rows.
const MAX_SCALE: f64 = 1000.0;

/// Rows of a table's base unit generated per parallel part.
const PART_ROWS: i64 = 200_000;

/// TPC-H's money and quantity columns.
const MONEY: DataType = DataType::Decimal(DecimalType {
    precision: 15,
    scale: 2,
});

/// Checks a scale factor before anything is written.
pub(crate) fn check_scale(sf: f64) -> Result<(), StorageError> {
    if !(sf.is_finite() && sf > 0.0 && sf <= MAX_SCALE) {
        return Err(StorageError::Invalid(format!(
            "--sf must be a number above 0 and at most {MAX_SCALE}, not {sf}"
        )));
    }
    Ok(())
}

/// The columns of each table, as `tpchgen-cli` writes them.
pub fn tpch_schemas() -> Vec<(&'static str, Schema)> {
    use DataType::{Date as D, Str as S, I32 as I, I64 as L};
    let m = MONEY;
    let tables: [(&str, &[(&str, DataType)]); 8] = [
        (
            "region",
            &[("r_regionkey", L), ("r_name", S), ("r_comment", S)],
        ),
        (
            "nation",
            &[
                ("n_nationkey", L),
                ("n_name", S),
                ("n_regionkey", L),
                ("n_comment", S),
            ],
        ),
        (
            "supplier",
            &[
                ("s_suppkey", L),
                ("s_name", S),
                ("s_address", S),
                ("s_nationkey", L),
                ("s_phone", S),
                ("s_acctbal", m),
                ("s_comment", S),
            ],
        ),
        (
            "customer",
            &[
                ("c_custkey", L),
                ("c_name", S),
                ("c_address", S),
                ("c_nationkey", L),
                ("c_phone", S),
                ("c_acctbal", m),
                ("c_mktsegment", S),
                ("c_comment", S),
            ],
        ),
        (
            "part",
            &[
                ("p_partkey", L),
                ("p_name", S),
                ("p_mfgr", S),
                ("p_brand", S),
                ("p_type", S),
                ("p_size", I),
                ("p_container", S),
                ("p_retailprice", m),
                ("p_comment", S),
            ],
        ),
        (
            "partsupp",
            &[
                ("ps_partkey", L),
                ("ps_suppkey", L),
                ("ps_availqty", I),
                ("ps_supplycost", m),
                ("ps_comment", S),
            ],
        ),
        (
            "orders",
            &[
                ("o_orderkey", L),
                ("o_custkey", L),
                ("o_orderstatus", S),
                ("o_totalprice", m),
                ("o_orderdate", D),
                ("o_orderpriority", S),
                ("o_clerk", S),
                ("o_shippriority", I),
                ("o_comment", S),
            ],
        ),
        (
            "lineitem",
            &[
                ("l_orderkey", L),
                ("l_partkey", L),
                ("l_suppkey", L),
                ("l_linenumber", I),
                ("l_quantity", m),
                ("l_extendedprice", m),
                ("l_discount", m),
                ("l_tax", m),
                ("l_returnflag", S),
                ("l_linestatus", S),
                ("l_shipdate", D),
                ("l_commitdate", D),
                ("l_receiptdate", D),
                ("l_shipinstruct", S),
                ("l_shipmode", S),
                ("l_comment", S),
            ],
        ),
    ];
    tables
        .iter()
        .map(|(name, columns)| {
            let fields = columns.iter().map(|&(n, ty)| Field::new(n, ty)).collect();
            (*name, Schema::new(fields))
        })
        .collect()
}

/// Writes the eight TPC-H tables at scale factor `sf` into `out_dir` (created if missing),
/// replacing only those files; fails without changing anything when another generation is
/// writing there.
pub fn generate_tpch(
    sf: f64,
    out_dir: &Path,
    progress: &dyn Progress,
) -> Result<Vec<GeneratedTable>, StorageError> {
    check_scale(sf)?;
    let generation = Generation::lock(out_dir, Dataset::Tpch { sf }, Wait::No)?;
    write_tpch(generation, sf, progress)
}

/// Writes the tables into the folder `generation` holds locked, each renamed into place when
/// complete.
pub(crate) fn write_tpch(
    generation: Generation,
    sf: f64,
    progress: &dyn Progress,
) -> Result<Vec<GeneratedTable>, StorageError> {
    let path_of = |name: &str| generation.dir().join(format!("{name}.parquet"));
    for name in TABLES {
        check_file_destination(&path_of(name))?;
    }
    generation.start()?;
    let orders = OrderGenerator::calculate_row_count(sf, 1, 1);
    // About four line items per order.
    let estimate = [
        5,
        25,
        SupplierGenerator::calculate_row_count(sf, 1, 1),
        CustomerGenerator::calculate_row_count(sf, 1, 1),
        PartGenerator::calculate_row_count(sf, 1, 1),
        PartSuppGenerator::calculate_row_count(sf, 1, 1),
        orders,
        orders * 4,
    ];
    progress.start(
        &format!("generating TPC-H at scale factor {sf}"),
        estimate.iter().map(|&n| n.max(0) as u64).sum(),
    );
    let schemas = tpch_schemas();
    let mut written = Vec::with_capacity(TABLES.len());
    for ((name, schema), base_rows) in schemas.iter().zip(estimate) {
        let columns = table(name, sf, parts(base_rows));
        let rows = columns.first().map_or(0, GenColumn::len);
        let mut write: Vec<WriteColumn<'_>> = columns.iter().map(GenColumn::to_write).collect();
        // The primary keys of the tables with one key column hold each value once.
        if !matches!(name, &"partsupp" | &"lineitem") {
            write[0] = write[0].unique();
        }
        let path = path_of(name);
        write_parquet_columns(&path, schema, &write, DEFAULT_ROW_GROUP_ROWS)?;
        progress.advance(rows as u64);
        written.push(GeneratedTable {
            name: name.to_string(),
            rows: rows as u64,
            files: vec![path],
        });
    }
    progress.finish();
    generation.complete(&written)?;
    Ok(written)
}

/// How many parts a table whose base unit has `rows` rows is generated in.
fn parts(rows: i64) -> i32 {
    i32::try_from((rows / PART_ROWS).clamp(1, 4096)).unwrap_or(1)
}

/// The columns of table `name` at `sf`, generated in `parts` parts joined in order.
fn table(name: &str, sf: f64, parts: i32) -> Vec<GenColumn> {
    let generated: Vec<Vec<GenColumn>> = (1..=parts)
        .into_par_iter()
        .map(|part| table_part(name, sf, part, parts))
        .collect();
    let mut parts = generated.into_iter();
    let mut columns = parts.next().unwrap_or_default();
    for part in parts {
        for (column, more) in columns.iter_mut().zip(part) {
            column.append(more);
        }
    }
    columns
}

/// Part `part` of `parts` of table `name`.
fn table_part(name: &str, sf: f64, part: i32, parts: i32) -> Vec<GenColumn> {
    use GenColumn::{Date, Decimal, Int, Long, Text, Words};
    let money = |values: Vec<i64>| {
        Decimal(
            values,
            DecimalType {
                precision: 15,
                scale: 2,
            },
        )
    };
    match name {
        "region" => {
            let rows: Vec<_> = RegionGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.r_regionkey).collect()),
                Words(rows.iter().map(|r| r.r_name).collect()),
                Words(rows.iter().map(|r| r.r_comment).collect()),
            ]
        }
        "nation" => {
            let rows: Vec<_> = NationGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.n_nationkey).collect()),
                Words(rows.iter().map(|r| r.n_name).collect()),
                Long(rows.iter().map(|r| r.n_regionkey).collect()),
                Words(rows.iter().map(|r| r.n_comment).collect()),
            ]
        }
        "supplier" => {
            let rows: Vec<_> = SupplierGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.s_suppkey).collect()),
                Text(rows.iter().map(|r| r.s_name.to_string()).collect()),
                Text(rows.iter().map(|r| r.s_address.to_string()).collect()),
                Long(rows.iter().map(|r| r.s_nationkey).collect()),
                Text(rows.iter().map(|r| r.s_phone.to_string()).collect()),
                money(rows.iter().map(|r| r.s_acctbal.into_inner()).collect()),
                Text(rows.iter().map(|r| r.s_comment.clone()).collect()),
            ]
        }
        "customer" => {
            let rows: Vec<_> = CustomerGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.c_custkey).collect()),
                Text(rows.iter().map(|r| r.c_name.to_string()).collect()),
                Text(rows.iter().map(|r| r.c_address.to_string()).collect()),
                Long(rows.iter().map(|r| r.c_nationkey).collect()),
                Text(rows.iter().map(|r| r.c_phone.to_string()).collect()),
                money(rows.iter().map(|r| r.c_acctbal.into_inner()).collect()),
                Words(rows.iter().map(|r| r.c_mktsegment).collect()),
                Words(rows.iter().map(|r| r.c_comment).collect()),
            ]
        }
        "part" => {
            let rows: Vec<_> = PartGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.p_partkey).collect()),
                Text(rows.iter().map(|r| r.p_name.to_string()).collect()),
                Text(rows.iter().map(|r| r.p_mfgr.to_string()).collect()),
                Text(rows.iter().map(|r| r.p_brand.to_string()).collect()),
                Words(rows.iter().map(|r| r.p_type).collect()),
                Int(rows.iter().map(|r| r.p_size).collect()),
                Words(rows.iter().map(|r| r.p_container).collect()),
                money(rows.iter().map(|r| r.p_retailprice.into_inner()).collect()),
                Words(rows.iter().map(|r| r.p_comment).collect()),
            ]
        }
        "partsupp" => {
            let rows: Vec<_> = PartSuppGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.ps_partkey).collect()),
                Long(rows.iter().map(|r| r.ps_suppkey).collect()),
                Int(rows.iter().map(|r| r.ps_availqty).collect()),
                money(rows.iter().map(|r| r.ps_supplycost.into_inner()).collect()),
                Words(rows.iter().map(|r| r.ps_comment).collect()),
            ]
        }
        "orders" => {
            let rows: Vec<_> = OrderGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.o_orderkey).collect()),
                Long(rows.iter().map(|r| r.o_custkey).collect()),
                Text(rows.iter().map(|r| r.o_orderstatus.to_string()).collect()),
                money(rows.iter().map(|r| r.o_totalprice.into_inner()).collect()),
                Date(rows.iter().map(|r| r.o_orderdate.to_unix_epoch()).collect()),
                Words(rows.iter().map(|r| r.o_orderpriority).collect()),
                Text(rows.iter().map(|r| r.o_clerk.to_string()).collect()),
                Int(rows.iter().map(|r| r.o_shippriority).collect()),
                Words(rows.iter().map(|r| r.o_comment).collect()),
            ]
        }
        _ => {
            let rows: Vec<_> = LineItemGenerator::new(sf, part, parts).iter().collect();
            vec![
                Long(rows.iter().map(|r| r.l_orderkey).collect()),
                Long(rows.iter().map(|r| r.l_partkey).collect()),
                Long(rows.iter().map(|r| r.l_suppkey).collect()),
                Int(rows.iter().map(|r| r.l_linenumber).collect()),
                // Whole quantities, as hundredths.
                money(rows.iter().map(|r| r.l_quantity * 100).collect()),
                money(
                    rows.iter()
                        .map(|r| r.l_extendedprice.into_inner())
                        .collect(),
                ),
                money(rows.iter().map(|r| r.l_discount.into_inner()).collect()),
                money(rows.iter().map(|r| r.l_tax.into_inner()).collect()),
                Words(rows.iter().map(|r| r.l_returnflag).collect()),
                Words(rows.iter().map(|r| r.l_linestatus).collect()),
                Date(rows.iter().map(|r| r.l_shipdate.to_unix_epoch()).collect()),
                Date(
                    rows.iter()
                        .map(|r| r.l_commitdate.to_unix_epoch())
                        .collect(),
                ),
                Date(
                    rows.iter()
                        .map(|r| r.l_receiptdate.to_unix_epoch())
                        .collect(),
                ),
                Words(rows.iter().map(|r| r.l_shipinstruct).collect()),
                Words(rows.iter().map(|r| r.l_shipmode).collect()),
                Words(rows.iter().map(|r| r.l_comment).collect()),
            ]
        }
    }
}
