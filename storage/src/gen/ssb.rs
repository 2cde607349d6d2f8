//! The Star Schema Benchmark generator: table sizes at a scale factor, the five schemas, and
//! the parallel run that writes `lineorder/` (one Parquet file per chunk of orders, the folder
//! written whole beside the old one and swapped in) and `part.parquet`, `supplier.parquet`,
//! `customer.parquet`, `date.parquet`.
//!
//! Every row is drawn from a random stream seeded by its table and key, and chunk boundaries
//! depend only on the scale factor, so the output is the same on any number of threads.

use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::error::StorageError;
use crate::gen::generation::{check_file_destination, Dataset, Generation, Wait};
use crate::gen::ssb_dimensions::{
    customer_table, date_table, part_table, supplier_table, DATE_ROWS,
};
use crate::gen::ssb_lineorder::lineorder_chunk;
use crate::gen::GenColumn;
use crate::parquet_write::{write_parquet_columns, WriteColumn, DEFAULT_ROW_GROUP_ROWS};
use crate::progress::Progress;
use crate::types::{DataType, Field, Schema};

/// Orders per lineorder file (about four times as many rows): SF 1 makes 2 files, SF 20 makes
/// 40, enough to keep 16 cores busy while writing.
const ORDERS_PER_CHUNK: u64 = 750_000;

/// Scale factors above this would overflow the 32-bit order keys.
const MAX_SF: f64 = 1000.0;

/// Row counts of the SSB tables at one scale factor.
#[derive(Clone, Debug, PartialEq)]
pub struct SsbScale {
    pub sf: f64,
    pub customers: u64,
    pub suppliers: u64,
    pub parts: u64,
    /// Orders, each of 1 to 7 lineorder rows (4 on average).
    pub orders: u64,
}

impl SsbScale {
    /// The sizes dbgen uses: customers 30,000 × SF, suppliers 2,000 × SF, orders 1,500,000 × SF,
    /// parts 200,000 × (1 + ⌊log2 SF⌋) for SF ≥ 1 and 200,000 × SF below 1 (every table at least
    /// one row). Unlike dbgen, a fractional SF above 1 is not truncated.
    pub fn new(sf: f64) -> Result<SsbScale, StorageError> {
        if !(sf.is_finite() && sf > 0.0 && sf <= MAX_SF) {
            return Err(StorageError::Invalid(format!(
                "scale factor {sf} is out of range: it must be above 0 and at most {MAX_SF}"
            )));
        }
        // The epsilon keeps products like 30,000 × 0.07 from landing just below an integer.
        let times = |base: f64| ((base * sf + 1e-6).floor() as u64).max(1);
        let parts = if sf < 1.0 {
            times(200_000.0)
        } else {
            200_000 * (1 + floor_log2(sf))
        };
        Ok(SsbScale {
            sf,
            customers: times(30_000.0),
            suppliers: times(2_000.0),
            parts,
            orders: times(1_500_000.0),
        })
    }

    /// The order ranges of the lineorder files: as many as `ORDERS_PER_CHUNK` asks for,
    /// evenly sized.
    pub fn lineorder_chunks(&self) -> Vec<Range<u64>> {
        let chunks = self.orders.div_ceil(ORDERS_PER_CHUNK).max(1);
        (0..chunks)
            .map(|k| k * self.orders / chunks..(k + 1) * self.orders / chunks)
            .collect()
    }
}

/// ⌊log2 x⌋ for x ≥ 1, exactly (no rounding of `ln x / ln 2`).
fn floor_log2(x: f64) -> u64 {
    let mut log = 0;
    while 2f64.powi(log + 1) <= x {
        log += 1;
    }
    log as u64
}

/// The SSB tables, named and ordered as in `schema.sql`; every `INT` is `i32`, every
/// `VARCHAR` a string, and no column is nullable.
pub fn ssb_schemas() -> Vec<(String, Schema)> {
    use DataType::{Str as S, I32 as I};
    let table = |name: &str, columns: &[(&str, DataType)]| {
        let fields = columns.iter().map(|&(n, ty)| Field::new(n, ty)).collect();
        (name.to_string(), Schema::new(fields))
    };
    vec![
        table(
            "lineorder",
            &[
                ("lo_orderkey", I),
                ("lo_linenumber", I),
                ("lo_custkey", I),
                ("lo_partkey", I),
                ("lo_suppkey", I),
                ("lo_orderdate", I),
                ("lo_orderpriority", S),
                ("lo_shippriority", S),
                ("lo_quantity", I),
                ("lo_extendedprice", I),
                ("lo_ordtotalprice", I),
                ("lo_discount", I),
                ("lo_revenue", I),
                ("lo_supplycost", I),
                ("lo_tax", I),
                ("lo_commitdate", I),
                ("lo_shipmode", S),
            ],
        ),
        table(
            "part",
            &[
                ("p_partkey", I),
                ("p_name", S),
                ("p_mfgr", S),
                ("p_category", S),
                ("p_brand1", S),
                ("p_color", S),
                ("p_type", S),
                ("p_size", I),
                ("p_container", S),
            ],
        ),
        table(
            "supplier",
            &[
                ("s_suppkey", I),
                ("s_name", S),
                ("s_address", S),
                ("s_city", S),
                ("s_nation", S),
                ("s_region", S),
                ("s_phone", S),
            ],
        ),
        table(
            "customer",
            &[
                ("c_custkey", I),
                ("c_name", S),
                ("c_address", S),
                ("c_city", S),
                ("c_nation", S),
                ("c_region", S),
                ("c_phone", S),
                ("c_mktsegment", S),
            ],
        ),
        table(
            "date",
            &[
                ("d_datekey", I),
                ("d_date", S),
                ("d_dayofweek", S),
                ("d_month", S),
                ("d_year", I),
                ("d_yearmonthnum", I),
                ("d_yearmonth", S),
                ("d_daynuminweek", I),
                ("d_daynuminmonth", I),
                ("d_daynuminyear", I),
                ("d_monthnuminyear", I),
                ("d_weeknuminyear", I),
                ("d_sellingseason", S),
                ("d_lastdayinweekfl", I),
                ("d_lastdayinmonthfl", I),
                ("d_holidayfl", I),
                ("d_weekdayfl", I),
            ],
        ),
    ]
}

/// One table written by the generator.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedTable {
    pub name: String,
    pub rows: u64,
    /// The files holding it, in read order.
    pub files: Vec<PathBuf>,
}

/// What [`generate_ssb`] wrote.
#[derive(Clone, Debug)]
pub struct GenSummary {
    pub scale: SsbScale,
    /// `lineorder`, `part`, `supplier`, `customer`, `date`.
    pub tables: Vec<GeneratedTable>,
    pub elapsed: Duration,
}

impl GenSummary {
    pub fn rows(&self, table: &str) -> Option<u64> {
        self.tables.iter().find(|t| t.name == table).map(|t| t.rows)
    }
}

/// One unit of parallel work: a dimension table or a chunk of lineorder.
#[derive(Clone, Copy, Debug)]
enum Job {
    Part,
    Supplier,
    Customer,
    Date,
    Lineorder(usize),
}

impl Job {
    fn table(self) -> &'static str {
        match self {
            Job::Part => "part",
            Job::Supplier => "supplier",
            Job::Customer => "customer",
            Job::Date => "date",
            Job::Lineorder(_) => "lineorder",
        }
    }
}

/// Generates the SSB at scale factor `sf` into `out_dir` (created if missing), replacing only
/// its five tables; fails without changing anything when another generation is writing there,
/// or when a table it would replace holds what a generator did not write. Progress is reported
/// in rows.
pub fn generate_ssb(
    sf: f64,
    out_dir: &Path,
    progress: &dyn Progress,
) -> Result<GenSummary, StorageError> {
    let scale = SsbScale::new(sf)?;
    let generation = Generation::lock(out_dir, Dataset::Ssb { sf }, Wait::No)?;
    write_ssb(generation, scale, progress)
}

/// Writes the SSB into the folder `generation` holds locked: the dimensions each renamed into
/// place when complete, `lineorder/` written whole into a new folder that then replaces the old.
pub(crate) fn write_ssb(
    generation: Generation,
    scale: SsbScale,
    progress: &dyn Progress,
) -> Result<GenSummary, StorageError> {
    let started = Instant::now();
    let sf = scale.sf;
    let out_dir = generation.dir().to_path_buf();
    let lineorder_dir = out_dir.join("lineorder");
    // Everything that could refuse the generation is asked before anything changes.
    only_chunk_files(&lineorder_dir, &lineorder_dir)?;
    for table in DIMENSIONS {
        check_file_destination(&dimension_file(&out_dir, table))?;
    }
    generation.start()?;
    let new_lineorder = generation.new_folder("lineorder")?;

    let chunks = scale.lineorder_chunks();
    let digits = chunks.len().to_string().len().max(3);
    let lineorder_file = |k: usize| format!("lineorder-{k:0digits$}.parquet");
    let schemas = ssb_schemas();
    let schema_of = |table: &str| {
        schemas
            .iter()
            .find(|(name, _)| name == table)
            .map(|(_, schema)| schema)
            .ok_or_else(|| StorageError::Invalid(format!("no SSB schema for `{table}`")))
    };

    let mut jobs = vec![Job::Part, Job::Customer, Job::Supplier, Job::Date];
    jobs.extend((0..chunks.len()).map(Job::Lineorder));
    let expected_rows =
        scale.orders * 4 + scale.parts + scale.customers + scale.suppliers + DATE_ROWS as u64;
    progress.start(&format!("generating SSB at SF {sf}"), expected_rows);

    let written: Vec<(Job, u64)> = jobs
        .par_iter()
        .map(|&job| {
            let (columns, path) = match job {
                Job::Part => (part_table(scale.parts), dimension_file(&out_dir, "part")),
                Job::Supplier => (
                    supplier_table(scale.suppliers),
                    dimension_file(&out_dir, "supplier"),
                ),
                Job::Customer => (
                    customer_table(scale.customers),
                    dimension_file(&out_dir, "customer"),
                ),
                Job::Date => (date_table(), dimension_file(&out_dir, "date")),
                Job::Lineorder(k) => (
                    lineorder_chunk(&scale, chunks[k].clone()),
                    new_lineorder.path().join(lineorder_file(k)),
                ),
            };
            let rows = columns.first().map_or(0, GenColumn::len);
            let mut write: Vec<WriteColumn<'_>> = columns.iter().map(GenColumn::to_write).collect();
            // A dimension's first column is its key: one row per value.
            if !matches!(job, Job::Lineorder(_)) {
                if let Some(key) = write.first_mut() {
                    *key = key.unique();
                }
            }
            write_parquet_columns(
                &path,
                schema_of(job.table())?,
                &write,
                DEFAULT_ROW_GROUP_ROWS,
            )?;
            progress.advance(rows as u64);
            Ok((job, rows as u64))
        })
        .collect::<Result<_, StorageError>>()?;
    new_lineorder.replace(|old| only_chunk_files(old, &lineorder_dir))?;
    progress.finish();

    let tables: Vec<GeneratedTable> = ["lineorder", "part", "supplier", "customer", "date"]
        .into_iter()
        .map(|name| {
            let mine: Vec<&(Job, u64)> = written
                .iter()
                .filter(|(job, _)| job.table() == name)
                .collect();
            GeneratedTable {
                name: name.to_string(),
                rows: mine.iter().map(|(_, rows)| rows).sum(),
                files: mine
                    .iter()
                    .map(|(job, _)| match job {
                        Job::Lineorder(k) => lineorder_dir.join(lineorder_file(*k)),
                        _ => dimension_file(&out_dir, name),
                    })
                    .collect(),
            }
        })
        .collect();
    generation.complete(&tables)?;
    Ok(GenSummary {
        scale,
        tables,
        elapsed: started.elapsed(),
    })
}

/// The SSB tables stored as one file each.
const DIMENSIONS: [&str; 4] = ["part", "supplier", "customer", "date"];

fn dimension_file(out_dir: &Path, table: &str) -> PathBuf {
    out_dir.join(format!("{table}.parquet"))
}

/// Checks that `folder`, when it exists, is a folder of what the generator writes there (chunk
/// files `lineorder-NNN.parquet` and their temporaries), so that replacing it loses nothing
/// else. Errors name it `named` (where it was before being moved aside).
fn only_chunk_files(folder: &Path, named: &Path) -> Result<(), StorageError> {
    let io = |source| StorageError::Io {
        path: folder.to_path_buf(),
        source,
    };
    let refuse = |what: String| {
        Err(StorageError::Invalid(format!(
            "{} holds {what}, which `tessera gen` did not write and would replace; move it \
             elsewhere or generate into another folder",
            named.display()
        )))
    };
    match fs::symlink_metadata(folder) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(error)),
        Ok(metadata) if !metadata.is_dir() => {
            return Err(StorageError::Invalid(format!(
                "{} is not a folder `tessera gen` wrote (a file or a link); move it elsewhere \
                 or generate into another folder",
                named.display()
            )))
        }
        Ok(_) => {}
    }
    for entry in fs::read_dir(folder).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_chunk_file(&name) {
            return refuse(format!("`{name}`"));
        }
        // The entry itself, not what a link points at.
        if !entry.file_type().map_err(io)?.is_file() {
            return refuse(format!("`{name}`, not a regular file"));
        }
    }
    Ok(())
}

/// Whether `name` is one the generator gives a lineorder chunk: `lineorder-NNN.parquet`, its
/// temporary `.lineorder-NNN.parquet.XXXXXX.partial`, or the `lineorder-NNN.parquet.partial`
/// of older versions.
fn is_chunk_file(name: &str) -> bool {
    let name = name.strip_prefix('.').unwrap_or(name);
    let Some(rest) = name.strip_prefix("lineorder-") else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    digits > 0
        && (tail == ".parquet" || tail.starts_with(".parquet.") && tail.ends_with(".partial"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sizes_follow_dbgen() {
        let small = SsbScale::new(0.01).unwrap();
        assert_eq!(
            (small.customers, small.suppliers, small.parts, small.orders),
            (300, 20, 2_000, 15_000)
        );
        let one = SsbScale::new(1.0).unwrap();
        assert_eq!(
            (one.customers, one.suppliers, one.parts, one.orders),
            (30_000, 2_000, 200_000, 1_500_000)
        );
        let twenty = SsbScale::new(20.0).unwrap();
        assert_eq!(twenty.parts, 1_000_000);
        assert_eq!(SsbScale::new(8.0).unwrap().parts, 800_000);
        assert_eq!(SsbScale::new(0.07).unwrap().customers, 2_100);
        assert_eq!(twenty.lineorder_chunks().len(), 40);
        assert_eq!(one.lineorder_chunks(), [0..750_000, 750_000..1_500_000]);
        assert!(SsbScale::new(0.0).is_err());
        assert!(SsbScale::new(f64::NAN).is_err());
        assert!(SsbScale::new(5000.0).is_err());
    }
}
