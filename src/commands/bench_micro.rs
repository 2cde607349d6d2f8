//! `tessera bench micro`: the thesis's operator micro-benchmarks (§3.4–3.5) as compiled queries
//! over generated columns: selection `y > v` over int32 at selectivity 0.1, 0.5 and 0.9, and
//! the projections `a*x1 + b*x2` and `sigmoid(a*x1 + b*x2)` over float pairs, join probes into
//! tables of 32 KB to 512 MB, joins whose build keys repeat evenly or by Zipf's law, a sort of key
//! and value pairs and top-k over floats (thesis ch. 4).
//! Each line gives the median kernel time, the bytes the query must move (the columns read, the
//! rows written), the floor (those bytes over the measured copy bandwidth) and time over floor;
//! sorts and top-k also get the time of their own kernels against the bytes those must move.
//! Results stay on the device (top-k's k rows are read back and checked): the benchmark times
//! the kernels, not the copy back.

use std::sync::Arc;

use rayon::prelude::*;
use tessera_runtime::program::ResultShape;
use tessera_storage::compress::Compression;
use tessera_storage::{Catalog, Column, ColumnData, Value};

use super::bench::{bench_target, median, print_json, random_values, time_query};
use super::compile::Script;
use super::session::CompileOptions;
use crate::failure::Failure;
use crate::MicroBenchArgs;

/// One benchmark: a query over the generated tables, and what its result must be.
struct Case {
    name: String,
    script: String,
    rows_in: u64,
    check: Check,
    /// Bytes the floor counts beyond the columns read and the rows written: a probe's random
    /// reads of a hash table too large for the L2 cache.
    table_bytes: u64,
    /// For a sort or top-k: the bytes its own kernels must move, which they are timed against.
    sort_bytes: Option<u64>,
}

/// What a benchmark's result is checked against.
enum Check {
    /// About this many rows written (the values were drawn to give it).
    Rows(f64),
    /// Exactly this one value.
    Value(i64),
    /// These key values, in this order (read back).
    Keys(Vec<f64>),
}

/// Top-k's k: from the thesis's range.
const TOP_K: [u64; 4] = [16, 32, 256, 1024];

/// Hash-table sizes of the join-probe benchmarks: 32 KB to 512 MB of 8-byte slots.
const TABLE_BYTES: [u64; 6] = [32 << 10, 256 << 10, 2 << 20, 16 << 20, 128 << 20, 512 << 20];
/// Half the H100's L2: a larger table is read from device memory, a sector per probe.
const L2_RESIDENT_BYTES: u64 = 25 << 20;
const SECTOR_BYTES: u64 = 32;

#[derive(serde::Serialize)]
struct MicroResult {
    name: String,
    rows_in: u64,
    rows_out: u64,
    bytes: u64,
    median_ms: f64,
    min_ms: f64,
    floor_ms: f64,
    time_over_floor: f64,
    /// The sort's (or top-k's) own kernels: their median time, bytes and floor.
    sort: Option<SortTime>,
}

#[derive(serde::Serialize)]
struct SortTime {
    median_ms: f64,
    bytes: u64,
    floor_ms: f64,
    time_over_floor: f64,
    /// Median milliseconds of each kind of kernel (all passes together), the gather included.
    kernels: Vec<(String, f64)>,
}

pub fn run(args: &MicroBenchArgs) -> Result<(), Failure> {
    if args.rows == 0 {
        return Err(Failure::Message("--rows must be at least 1".into()));
    }
    let (target, device) = bench_target(&args.run)?;
    eprintln!(
        "drawing {} rows of int32 and float pairs, {} probe keys",
        args.rows, args.probe_rows
    );
    let mut tables: Vec<(String, Vec<(String, Column)>)> = vec![
        (
            "r".into(),
            vec![(
                "y".into(),
                Column::new(
                    ColumnData::I32(random_values(args.rows, 1, |u| (u >> 33) as i32).into()),
                    None,
                ),
            )],
        ),
        (
            "p".into(),
            vec![
                (
                    "x1".into(),
                    Column::new(
                        ColumnData::F32(random_values(args.rows, 2, unit).into()),
                        None,
                    ),
                ),
                (
                    "x2".into(),
                    Column::new(
                        ColumnData::F32(random_values(args.rows, 3, unit).into()),
                        None,
                    ),
                ),
            ],
        ),
    ];
    let mut cases = Vec::new();
    let rows = args.rows as u64;
    for selectivity in [0.1, 0.5, 0.9] {
        // `y` is uniform over 0..2^31, so `y > v` keeps the fraction `1 - v / 2^31`.
        let v = ((1.0 - selectivity) * 2f64.powi(31)) as i64;
        cases.push(Case {
            name: format!("selection y > v, selectivity {selectivity}"),
            script: format!("from r | where y > {v} | select y\n"),
            rows_in: rows,
            check: Check::Rows(selectivity * rows as f64),
            table_bytes: 0,
            sort_bytes: None,
        });
    }
    cases.push(Case {
        name: "projection 0.3*x1 + 0.7*x2".into(),
        // Float literals are f64: the cast keeps the output float, as in the thesis.
        script: "from p | select z = (0.3 * x1 + 0.7 * x2) as f32\n".into(),
        rows_in: rows,
        check: Check::Rows(rows as f64),
        table_bytes: 0,
        sort_bytes: None,
    });
    cases.push(Case {
        name: "projection sigmoid(0.3*x1 + 0.7*x2)".into(),
        script: "from p | select z = sigmoid(0.3 * x1 + 0.7 * x2) as f32\n".into(),
        rows_in: rows,
        check: Check::Rows(rows as f64),
        table_bytes: 0,
        sort_bytes: None,
    });
    // Join probes: every probe key finds its row in a table of `slots` keys, whose payload
    // is summed (`value = 3 * key + 1`).
    let probe_keys = random_values(args.probe_rows, 4, |u| (u >> 34) as i32);
    for bytes in TABLE_BYTES
        .into_iter()
        .filter(|b| *b <= args.max_table_bytes)
    {
        let slots = bytes / 8;
        let expected: i64 = probe_keys
            .par_iter()
            .map(|&k| 3 * (i64::from(k) % slots as i64) + 1)
            .sum();
        cases.push(probe_case(
            format!("join probe, {} table", size(bytes)),
            &format!("k % {slots}"),
            bytes,
            args,
            expected,
        ));
        let keys: Vec<i32> = (0..slots as i32).collect();
        let values: Vec<i32> = keys.iter().map(|k| 3 * k + 1).collect();
        tables.push((
            format!("build_{slots}"),
            vec![
                (
                    "key".to_string(),
                    Column::new(ColumnData::I32(keys.into()), None),
                ),
                (
                    "value".to_string(),
                    Column::new(ColumnData::I32(values.into()), None),
                ),
            ],
        ));
    }
    // Skewed probes: Zipf-like keys (s = 1: a key's frequency falls as one over its rank) into
    // the largest table, ranks scattered over the table by a multiplicative permutation.
    let largest = TABLE_BYTES
        .into_iter()
        .filter(|b| *b <= args.max_table_bytes)
        .max();
    let mut probe_columns = vec![(
        "k".to_string(),
        Column::new(ColumnData::I32(probe_keys.into()), None),
    )];
    if let Some(bytes) = largest {
        let slots = bytes / 8;
        let skewed = random_values(args.probe_rows, 5, |u| {
            let unit = (u >> 11) as f64 / (1u64 << 53) as f64;
            let rank = ((slots as f64 + 1.0).powf(unit) - 1.0) as u64;
            (rank.wrapping_mul(0x9E37_79B1) % slots) as i32
        });
        let expected: i64 = skewed.par_iter().map(|&k| 3 * i64::from(k) + 1).sum();
        // Hot keys stay in cache; the floor still counts a sector per probe past the L2.
        cases.push(probe_case(
            format!("join probe, {} table, Zipf keys", size(bytes)),
            "z",
            bytes,
            args,
            expected,
        ));
        probe_columns.push((
            "z".to_string(),
            Column::new(ColumnData::I32(skewed.into()), None),
        ));
    }
    tables.push(("probe".into(), probe_columns));
    repeated_key_cases(args, &mut tables, &mut cases);
    sort_cases(args, &mut tables, &mut cases);
    let catalog = Arc::new(Catalog::try_from_columns(tables)?);
    let options = CompileOptions {
        target,
        tile: args.run.tile,
        compress: Compression::NONE,
        partition_joins: args.partition_joins,
        prepare: false,
        gpu_memory: None,
    };
    let mut results = Vec::with_capacity(cases.len());
    let mut bandwidth = None;
    let chosen = |case: &&Case| {
        args.only.is_empty()
            || args
                .only
                .iter()
                .any(|part| case.name.contains(part.as_str()))
    };
    for case in cases.iter().filter(chosen) {
        let script = Script {
            name: case.name.clone(),
            source: case.script.clone(),
        };
        let discard = !matches!(case.check, Check::Keys(_));
        let timed = time_query(
            &script,
            &options,
            &catalog,
            &args.run,
            discard,
            &mut bandwidth,
        )?;
        let mut times = timed.times;
        let read = timed.last.timing.bytes();
        let mut rows_out = match timed.last.table.rows.first().and_then(|r| r.first()) {
            Some(Value::Int(n)) => *n as u64,
            _ => 0,
        };
        let bytes_per_second = timed.bytes_per_second;
        match case.check {
            Check::Rows(expected) => {
                if (rows_out as f64 - expected).abs() > 0.01 * case.rows_in as f64 + 100.0 {
                    return Err(Failure::Message(format!(
                        "{}: {rows_out} rows written, about {expected:.0} expected",
                        case.name
                    )));
                }
            }
            Check::Value(expected) => {
                if rows_out as i64 != expected {
                    return Err(Failure::Message(format!(
                        "{}: the query gave {rows_out}, {expected} expected",
                        case.name
                    )));
                }
                rows_out = 0;
            }
            Check::Keys(ref expected) => {
                let found: Vec<f64> = timed
                    .last
                    .table
                    .rows
                    .iter()
                    .map(|row| match row.first() {
                        Some(Value::Float(x)) => *x,
                        _ => f64::NAN,
                    })
                    .collect();
                if found != *expected {
                    return Err(Failure::Message(format!(
                        "{}: the query returned keys other than the {} largest",
                        case.name,
                        expected.len()
                    )));
                }
                rows_out = found.len() as u64;
            }
        }
        let sort = case.sort_bytes.map(|bytes| {
            let mut own: Vec<f64> = timed
                .timings
                .iter()
                .map(|timing| {
                    timing
                        .kernels
                        .iter()
                        .filter(|k| k.name.contains("_sort_") && !k.name.contains("gather"))
                        .map(|k| k.ms)
                        .sum()
                })
                .collect();
            let median_ms = median(&mut own);
            let floor_ms = bytes as f64 / timed.bytes_per_second * 1e3;
            SortTime {
                median_ms,
                bytes,
                floor_ms,
                time_over_floor: median_ms / floor_ms.max(1e-9),
                kernels: kernel_kinds(&timed.timings),
            }
        });
        let median_ms = median(&mut times);
        let bytes = read + rows_out * row_bytes(&timed.shape) + case.table_bytes;
        let floor_ms = bytes as f64 / bytes_per_second * 1e3;
        results.push(MicroResult {
            name: case.name.clone(),
            rows_in: case.rows_in,
            rows_out,
            bytes,
            median_ms,
            min_ms: times[0],
            floor_ms,
            time_over_floor: median_ms / floor_ms.max(1e-9),
            sort,
        });
    }
    if args.run.json {
        return print_json(&results);
    }
    println!(
        "micro-benchmarks over {} rows on {device}; copy bandwidth {:.0} GB/s; median of {} runs",
        args.rows,
        bandwidth.unwrap_or(0.0) / 1e9,
        args.run.runs
    );
    println!(
        "{:<40} {:>11} {:>13} {:>10} {:>8} {:>9} {:>11}",
        "query", "rows out", "bytes moved", "median ms", "min ms", "floor ms", "time/floor"
    );
    for r in &results {
        println!(
            "{:<40} {:>11} {:>13} {:>10.3} {:>8.3} {:>9.3} {:>11.2}",
            r.name, r.rows_out, r.bytes, r.median_ms, r.min_ms, r.floor_ms, r.time_over_floor
        );
    }
    println!("\nthe sorts' and top-k's own kernels (the gather of the rows in order left out):");
    println!(
        "{:<40} {:>13} {:>10} {:>9} {:>11}",
        "query", "bytes moved", "median ms", "floor ms", "time/floor"
    );
    for r in &results {
        if let Some(sort) = &r.sort {
            let kinds: Vec<String> = sort
                .kernels
                .iter()
                .map(|(kind, ms)| format!("{kind} {ms:.3}"))
                .collect();
            println!(
                "{:<40} {:>13} {:>10.3} {:>9.3} {:>11.2}   {}",
                r.name,
                sort.bytes,
                sort.median_ms,
                sort.floor_ms,
                sort.time_over_floor,
                kinds.join(", ")
            );
        }
    }
    Ok(())
}

/// The median time of each kind of sort kernel (`keys`, `histogram`, ..., kernels of one
/// kind summed within a run).
fn kernel_kinds(timings: &[tessera_runtime::exec::Timing]) -> Vec<(String, f64)> {
    let kind = |name: &str| {
        name.split_once("_sort_").map(|(_, kind)| {
            kind.trim_end_matches(|c: char| c.is_ascii_digit())
                .to_string()
        })
    };
    let mut kinds: Vec<String> = Vec::new();
    for timing in timings {
        for kernel in &timing.kernels {
            if let Some(k) = kind(&kernel.name) {
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
        }
    }
    kinds
        .into_iter()
        .map(|k| {
            let mut times: Vec<f64> = timings
                .iter()
                .map(|timing| {
                    timing
                        .kernels
                        .iter()
                        .filter(|kernel| kind(&kernel.name).as_deref() == Some(k.as_str()))
                        .map(|kernel| kernel.ms)
                        .sum()
                })
                .collect();
            let ms = median(&mut times);
            (k, ms)
        })
        .collect()
}

/// Joins whose build keys repeat: `--chain-rows` build rows over 2^16 keys, probed by as many
/// uniform keys, so that either build side yields the same matches on average (64 a probe). One
/// build side spreads its rows evenly over the keys, the other by Zipf's law (s = 1), so that a
/// few keys have long chains: the skew this measures is the build side's.
fn repeated_key_cases(
    args: &MicroBenchArgs,
    tables: &mut Vec<(String, Vec<(String, Column)>)>,
    cases: &mut Vec<Case>,
) {
    const KEYS: u64 = 1 << 16;
    let rows = args.chain_rows;
    if rows == 0 {
        return;
    }
    let probes = random_values(rows, 8, |u| ((u >> 11) % KEYS) as i32);
    let even: Vec<i32> = (0..rows).map(|i| (i as u64 % KEYS) as i32).collect();
    let zipf = random_values(rows, 9, |u| {
        let unit = (u >> 11) as f64 / (1u64 << 53) as f64;
        let rank = ((KEYS as f64 + 1.0).powf(unit) - 1.0) as u64;
        (rank.wrapping_mul(0x9E37_79B1) % KEYS) as i32
    });
    for (name, keys) in [("even", even), ("zipf", zipf)] {
        let mut per_key = vec![0i64; KEYS as usize];
        for &k in &keys {
            per_key[k as usize] += 1;
        }
        let matches: i64 = probes.iter().map(|&p| per_key[p as usize]).sum();
        let longest = per_key.iter().copied().max().unwrap_or(0);
        cases.push(Case {
            name: format!("join, repeated keys ({name}, longest {longest})"),
            script: format!(
                "from chain_probe | join chain_{name} on p == key | aggregate {{ matches = sum(one) }}\n"
            ),
            rows_in: rows as u64,
            check: Check::Value(matches),
            table_bytes: 0,
            sort_bytes: None,
        });
        tables.push((
            format!("chain_{name}"),
            vec![
                (
                    "key".to_string(),
                    Column::new(ColumnData::I32(keys.into()), None),
                ),
                (
                    "one".to_string(),
                    Column::new(ColumnData::I32(vec![1; rows].into()), None),
                ),
            ],
        ));
    }
    tables.push((
        "chain_probe".into(),
        vec![(
            "p".to_string(),
            Column::new(ColumnData::I32(probes.into()), None),
        )],
    ));
}

/// A sort of `--sort-rows` key and value pairs, and top-k of the float column `x1` for each k
/// of `TOP_K`, beside a full sort of it.
fn sort_cases(
    args: &MicroBenchArgs,
    tables: &mut Vec<(String, Vec<(String, Column)>)>,
    cases: &mut Vec<Case>,
) {
    let pairs = args.sort_rows as u64;
    tables.push((
        "kv".into(),
        vec![
            (
                "key".into(),
                Column::new(
                    ColumnData::I32(random_values(args.sort_rows, 6, |u| (u >> 32) as i32).into()),
                    None,
                ),
            ),
            (
                "value".into(),
                Column::new(
                    ColumnData::I32(random_values(args.sort_rows, 7, |u| (u >> 32) as i32).into()),
                    None,
                ),
            ),
        ],
    ));
    // Words of key and row (or key and carried value): built from the keys (4 bytes read, 4
    // more for a carried value, 8 written), per 8-bit digit read by the histogram and read
    // and written by the scatter, then read once per output column decoded from them (key,
    // carried value: 8 read, 4 written).
    let radix_bytes = |rows: u64, carried: bool| {
        let carried = u64::from(carried);
        rows * (4 + 4 * carried + 8 + 4 * (8 + 8 + 8) + 12 * (1 + carried))
    };
    cases.push(Case {
        name: format!("sort {pairs} key+value pairs"),
        script: "from kv | select key, value | sort key\n".into(),
        rows_in: pairs,
        check: Check::Rows(pairs as f64),
        table_bytes: 0,
        sort_bytes: Some(radix_bytes(pairs, true)),
    });
    let rows = args.rows as u64;
    let mut largest: Vec<f32> = match &tables[1].1[0].1.data {
        ColumnData::F32(values) => values.to_vec(),
        _ => Vec::new(),
    };
    let most = TOP_K.iter().copied().max().unwrap_or(0) as usize;
    if largest.len() > most {
        largest.select_nth_unstable_by(most, |a, b| b.total_cmp(a));
        largest.truncate(most);
    }
    largest.sort_by(|a, b| b.total_cmp(a));
    for k in TOP_K {
        let expected = largest
            .iter()
            .take(k as usize)
            .map(|&x| f64::from(x))
            .collect();
        cases.push(Case {
            name: format!("top-k k={k} of {rows} floats"),
            script: format!("from p | select x1 | sort x1 desc | take {k}\n"),
            rows_in: rows,
            check: Check::Keys(expected),
            table_bytes: 0,
            sort_bytes: Some(rows * 4),
        });
    }
    cases.push(Case {
        name: format!("sort {rows} floats (for top-k)"),
        script: "from p | select x1 | sort x1 desc\n".into(),
        rows_in: rows,
        check: Check::Rows(rows as f64),
        table_bytes: 0,
        sort_bytes: Some(radix_bytes(rows, false)),
    });
}

/// Bytes each row of a materialized result takes in device memory.
fn row_bytes(shape: &ResultShape) -> u64 {
    match shape {
        ResultShape::Rows { columns, .. } => columns
            .iter()
            .map(|c| c.ty.width() as u64 + u64::from(c.validity.is_some()))
            .sum(),
        _ => 0,
    }
}

/// Probes of `probe` keys (`key`, an expression of the probe table's columns) into the table of
/// `bytes`, summing the payload, which must come to `expected`. The floor counts the probe
/// column and the build columns; past the L2 it adds a sector per probe, unless the join is
/// partitioned, when each part of the table is read from device memory once.
fn probe_case(name: String, key: &str, bytes: u64, args: &MicroBenchArgs, expected: i64) -> Case {
    let slots = bytes / 8;
    let probes = args.probe_rows;
    let partitioned = args.partition_joins.partitions(bytes);
    Case {
        name,
        script: format!(
            "from probe | join build_{slots} on {key} == key | aggregate {{ total = sum(value) }}\n"
        ),
        rows_in: probes as u64,
        check: Check::Value(expected),
        table_bytes: if !partitioned && bytes > L2_RESIDENT_BYTES {
            probes as u64 * SECTOR_BYTES
        } else {
            0
        },
        sort_bytes: None,
    }
}

/// `bytes` as KB or MB.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{} KB", bytes >> 10)
    }
}

/// A float in `[0, 1)` from the top 24 bits.
fn unit(bits: u64) -> f32 {
    (bits >> 40) as f32 / (1u64 << 24) as f32
}
