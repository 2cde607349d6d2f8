//! `tessera bench decode`: the thesis's decode-and-sum micro-benchmark (§5.6). A column of N
//! values drawn from U(0, 2^16) is summed by a compiled query, once stored plain and once packed
//! with GPU-FOR (and GPU-DFOR); each line gives the median kernel time, the bytes read, the
//! floor (those bytes over the measured copy bandwidth) and the values decoded per second.

use std::sync::Arc;

use tessera_storage::compress::{Compression, Scheme};
use tessera_storage::{Catalog, Column, ColumnData};

use super::bench::{bench_target, median, print_json, random_values, time_query};
use super::compile::Script;
use super::session::CompileOptions;
use crate::failure::Failure;
use crate::DecodeBenchArgs;

const SCRIPT: &str = "from numbers | aggregate { total = sum(x) }\n";

#[derive(serde::Serialize)]
struct DecodeResult {
    encoding: String,
    bits_per_value: f64,
    bytes: u64,
    median_ms: f64,
    min_ms: f64,
    floor_ms: f64,
    time_over_floor: f64,
    values_per_second: f64,
    sum: String,
}

pub fn run(args: &DecodeBenchArgs) -> Result<(), Failure> {
    if args.values == 0 {
        return Err(Failure::Message("--values must be at least 1".into()));
    }
    let (target, device) = bench_target(&args.run)?;
    eprintln!("drawing {} values from U(0, 2^16)", args.values);
    let values = random_values(args.values, 0, |bits| (bits & 0xffff) as i32);
    let mut catalog = Catalog::try_from_columns(vec![(
        "numbers".into(),
        vec![(
            "x".into(),
            Column::new(ColumnData::I32(values.into()), None),
        )],
    )])?;
    let script = Script {
        name: "decode-and-sum".into(),
        source: SCRIPT.into(),
    };
    let mut results = Vec::new();
    let mut bandwidth = None;
    for compress in [
        Compression::NONE,
        Compression::Only(Scheme::Pack),
        Compression::Only(Scheme::For),
        Compression::Only(Scheme::Dfor),
    ] {
        let shared = Arc::new(catalog.with_compression(compress));
        let options = CompileOptions {
            target,
            tile: args.run.tile,
            compress,
            partition_joins: Default::default(),
            prepare: false,
            gpu_memory: None,
        };
        let timed = time_query(&script, &options, &shared, &args.run, false, &mut bandwidth)?;
        let mut times = timed.times;
        let bytes = timed.last.timing.bytes();
        let sum = timed
            .last
            .table
            .to_csv()
            .lines()
            .nth(1)
            .unwrap_or("")
            .to_string();
        let bytes_per_second = timed.bytes_per_second;
        let median_ms = median(&mut times);
        let floor_ms = bytes as f64 / bytes_per_second * 1e3;
        results.push(DecodeResult {
            encoding: compress.to_string(),
            bits_per_value: bytes as f64 * 8.0 / args.values as f64,
            bytes,
            median_ms,
            min_ms: times[0],
            floor_ms,
            time_over_floor: median_ms / floor_ms.max(1e-9),
            values_per_second: args.values as f64 / (median_ms / 1e3),
            sum,
        });
        catalog = Arc::try_unwrap(shared)
            .map_err(|_| Failure::Message("the benchmark's catalog is still in use".into()))?;
    }
    if let Some(differs) = results.iter().find(|r| r.sum != results[0].sum) {
        return Err(Failure::Message(format!(
            "the sums differ: {} plain, {} with {}",
            results[0].sum, differs.sum, differs.encoding
        )));
    }
    if args.run.json {
        return print_json(&results);
    }
    println!(
        "decode-and-sum of {} values from U(0, 2^16) on {device}; copy bandwidth {:.0} GB/s; median of {} runs",
        args.values,
        bandwidth.unwrap_or(0.0) / 1e9,
        args.run.runs
    );
    println!(
        "encoding  bits/value        bytes  median ms   min ms  floor ms  time/floor  Gvalues/s"
    );
    for r in &results {
        println!(
            "{:<9} {:>10.2} {:>12} {:>10.3} {:>8.3} {:>9.3} {:>11.2} {:>10.1}",
            r.encoding,
            r.bits_per_value,
            r.bytes,
            r.median_ms,
            r.min_ms,
            r.floor_ms,
            r.time_over_floor,
            r.values_per_second / 1e9
        );
    }
    println!("sum: {} (the same for every encoding)", results[0].sum);
    Ok(())
}
