//! `tessera bench ssb` and `tessera bench tpch`: a benchmark's queries as `examples/` writes
//! them, each compiled a few times (the median compile time is reported), run with warm-up and
//! then timed several times on data already resident on the device. For each query it prints
//! the median, the floor (the bytes of the columns it reads, once, over the measured copy
//! bandwidth) and their ratio, with Crystal's hand-written kernels beside the GPU figures for
//! SSB.

use std::path::PathBuf;
use std::time::Instant;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tessera_runtime::exec::{run_query, run_query_until, Learned, QueryOutcome, Readback};
use tessera_runtime::program::ResultShape;
use tessera_runtime::Target;
use tessera_storage::Catalog;

use super::compile::Script;
use super::run::backend_for;
use super::session::{choose_target, compile_with_catalog, compression_for, CompileOptions};
use crate::failure::Failure;
use crate::progress::Bar;
use crate::BenchArgs;

/// The 13 SSB queries, built in so the benchmark runs anywhere.
pub const SSB_QUERIES: [(&str, &str); 13] = [
    ("q11", include_str!("../../examples/ssb/q11.tq")),
    ("q12", include_str!("../../examples/ssb/q12.tq")),
    ("q13", include_str!("../../examples/ssb/q13.tq")),
    ("q21", include_str!("../../examples/ssb/q21.tq")),
    ("q22", include_str!("../../examples/ssb/q22.tq")),
    ("q23", include_str!("../../examples/ssb/q23.tq")),
    ("q31", include_str!("../../examples/ssb/q31.tq")),
    ("q32", include_str!("../../examples/ssb/q32.tq")),
    ("q33", include_str!("../../examples/ssb/q33.tq")),
    ("q34", include_str!("../../examples/ssb/q34.tq")),
    ("q41", include_str!("../../examples/ssb/q41.tq")),
    ("q42", include_str!("../../examples/ssb/q42.tq")),
    ("q43", include_str!("../../examples/ssb/q43.tq")),
];

/// The 22 TPC-H queries of `examples/tpch`, built in likewise. Q2, Q10, Q11, Q15, Q17, Q18,
/// Q20, Q21 and Q22 run in stages: their stages' time is reported beside the main query's
/// kernels.
pub const TPCH_QUERIES: [(&str, &str); 22] = [
    ("q01", include_str!("../../examples/tpch/q01.tq")),
    ("q02", include_str!("../../examples/tpch/q02.tq")),
    ("q03", include_str!("../../examples/tpch/q03.tq")),
    ("q04", include_str!("../../examples/tpch/q04.tq")),
    ("q05", include_str!("../../examples/tpch/q05.tq")),
    ("q06", include_str!("../../examples/tpch/q06.tq")),
    ("q07", include_str!("../../examples/tpch/q07.tq")),
    ("q08", include_str!("../../examples/tpch/q08.tq")),
    ("q09", include_str!("../../examples/tpch/q09.tq")),
    ("q10", include_str!("../../examples/tpch/q10.tq")),
    ("q11", include_str!("../../examples/tpch/q11.tq")),
    ("q12", include_str!("../../examples/tpch/q12.tq")),
    ("q13", include_str!("../../examples/tpch/q13.tq")),
    ("q14", include_str!("../../examples/tpch/q14.tq")),
    ("q15", include_str!("../../examples/tpch/q15.tq")),
    ("q16", include_str!("../../examples/tpch/q16.tq")),
    ("q17", include_str!("../../examples/tpch/q17.tq")),
    ("q18", include_str!("../../examples/tpch/q18.tq")),
    ("q19", include_str!("../../examples/tpch/q19.tq")),
    ("q20", include_str!("../../examples/tpch/q20.tq")),
    ("q21", include_str!("../../examples/tpch/q21.tq")),
    ("q22", include_str!("../../examples/tpch/q22.tq")),
];

/// A benchmark: its queries, its data and what its figures are compared with.
pub struct Suite {
    pub name: &'static str,
    pub title: &'static str,
    pub queries: &'static [(&'static str, &'static str)],
    /// A table whose file says the data folder holds the benchmark.
    marker: &'static str,
    generate: fn(f64, &Path) -> Result<(), tessera_storage::StorageError>,
    /// Reference kernel times at SF 20, in milliseconds, per query.
    reference_sf20: Option<&'static [f64]>,
}

pub const SSB: Suite = Suite {
    name: "ssb",
    title: "SSB",
    queries: &SSB_QUERIES,
    marker: "date.parquet",
    generate: |sf, dir| tessera_storage::gen::ssb::generate_ssb(sf, dir, &Bar::new()).map(drop),
    reference_sf20: Some(&CRYSTAL_H100_SF20),
};

pub const TPCH: Suite = Suite {
    name: "tpch",
    title: "TPC-H",
    queries: &TPCH_QUERIES,
    marker: "lineitem.parquet",
    generate: |sf, dir| tessera_storage::gen::tpch::generate_tpch(sf, dir, &Bar::new()).map(drop),
    reference_sf20: None,
};

/// Crystal's hand-written kernels on an H100 at SF 20, in milliseconds (DESIGN §8).
const CRYSTAL_H100_SF20: [f64; 13] = [
    0.61, 0.61, 0.62, 1.00, 0.90, 0.94, 2.19, 1.30, 1.32, 1.33, 13.6, 1.66, 1.58,
];

#[derive(serde::Serialize)]
struct QueryResult {
    query: String,
    median_ms: f64,
    min_ms: f64,
    runs: usize,
    bytes: u64,
    floor_ms: f64,
    time_over_floor: f64,
    compile_ms: f64,
    /// Reading the compiled program from the kernel cache instead (no cache folder: `None`).
    cached_ms: Option<f64>,
    load_ms: f64,
    rows: usize,
    crystal_ms: Option<f64>,
    /// The query's kernels in launch order, each with its median time over the timed runs.
    kernels: Vec<KernelMedian>,
    /// For a query that runs in stages, their kernels' time and their whole time (compiling
    /// them, and their results on the host included), medians over the compiles: the stages
    /// run as the query is compiled, so `median_ms` and the floor are the last stage's reader's.
    stage_kernels_ms: Option<f64>,
    stages_ms: Option<f64>,
}

#[derive(serde::Serialize)]
struct KernelMedian {
    name: String,
    /// The table the kernel scans (empty for kernels over the query's output).
    table: String,
    rows: u64,
    median_ms: f64,
}

#[derive(serde::Serialize)]
struct Report {
    benchmark: String,
    device: String,
    scale_factor: f64,
    copy_bandwidth_gb_s: f64,
    queries: Vec<QueryResult>,
    geomean_ms: f64,
    geomean_time_over_floor: f64,
    geomean_crystal_ms: Option<f64>,
}

/// Compilations of each query, timed.
const COMPILES: usize = 5;

/// `count` values made from 64 random bits each, the same for every run: a counter hashed with
/// splitmix64 (a stream per `seed`), so values are made in parallel.
pub fn random_values<T: Send>(count: usize, seed: u64, value: impl Fn(u64) -> T + Sync) -> Vec<T> {
    use rayon::prelude::*;
    (0..count as u64)
        .into_par_iter()
        .map(|i| {
            let mut z = i
                .wrapping_add(seed.wrapping_mul(0x632b_e59b_d9b4_e019))
                .wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            value(z ^ (z >> 31))
        })
        .collect()
}

/// The target a benchmark over generated data runs on, and the device described in words;
/// refuses zero timed runs.
pub fn bench_target(run: &crate::GeneratedBenchArgs) -> Result<(Target, String), Failure> {
    if run.runs == 0 {
        return Err(Failure::Message("--runs must be at least 1".into()));
    }
    let (target, gpu) = choose_target(run.device)?;
    let device = gpu
        .as_ref()
        .map_or("CPU".to_string(), |g| format!("{} ({target})", g.name));
    Ok((target, device))
}

/// A benchmark query over generated data, timed.
pub struct TimedQuery {
    /// Kernel milliseconds of each timed run.
    pub times: Vec<f64>,
    /// Each timed run's kernels.
    pub timings: Vec<tessera_runtime::exec::Timing>,
    /// The last run's outcome.
    pub last: QueryOutcome,
    pub shape: ResultShape,
    /// The device's copy bandwidth (bytes read plus written per second).
    pub bytes_per_second: f64,
}

/// Compiles `script` over `catalog`, runs its query `warmup + runs` times (the result read
/// back, or left on the device when `discard`), and times the runs after the warm-up. The copy
/// bandwidth is measured the first time and kept in `bandwidth`.
pub fn time_query(
    script: &Script,
    options: &CompileOptions,
    catalog: &Arc<Catalog>,
    run: &crate::GeneratedBenchArgs,
    discard: bool,
    bandwidth: &mut Option<f64>,
) -> Result<TimedQuery, Failure> {
    let compiled = compile_with_catalog(script, Path::new("."), options, false, &mut |_| {
        Some(Arc::clone(catalog))
    })?;
    let mut backend = backend_for(&compiled.program, None)?;
    let bytes_per_second = match *bandwidth {
        Some(b) => b,
        None => *bandwidth.insert(backend.copy_bandwidth()?),
    };
    let query = compiled
        .program
        .queries
        .first()
        .ok_or_else(|| Failure::Message("the benchmark script has no query".into()))?;
    let mut times = Vec::with_capacity(run.runs);
    let mut timings = Vec::with_capacity(run.runs);
    let mut last = None;
    // Each run starts with the room the runs before it needed, as a resident server's do.
    let learned = Learned::default();
    for index in 0..run.warmup + run.runs {
        let mut readback = if discard {
            Readback::Discard
        } else {
            Readback::Table
        };
        let outcome = run_query_until(
            backend.as_mut(),
            query,
            catalog,
            &mut readback,
            &AtomicBool::new(false),
            &learned,
        )?;
        if index >= run.warmup {
            times.push(outcome.timing.kernel_ms());
            timings.push(outcome.timing.clone());
        }
        last = Some(outcome);
    }
    let last = last.ok_or_else(|| Failure::Message("the benchmark ran no query".into()))?;
    Ok(TimedQuery {
        times,
        timings,
        last,
        shape: query.result.shape.clone(),
        bytes_per_second,
    })
}

/// Prints benchmark results as pretty JSON.
pub fn print_json(results: &impl serde::Serialize) -> Result<(), Failure> {
    let text =
        serde_json::to_string_pretty(results).map_err(|e| Failure::Message(e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// The median of `values` (sorted in place); 0 for none.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

pub fn run(suite: &Suite, args: &BenchArgs) -> Result<(), Failure> {
    if !(args.sf.is_finite() && args.sf > 0.0) {
        return Err(Failure::Message(format!(
            "--sf must be a positive number, not {}",
            args.sf
        )));
    }
    if args.runs == 0 {
        return Err(Failure::Message("--runs must be at least 1".into()));
    }
    let data = args
        .data
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("data/{}-{}", suite.name, args.sf)));
    if !data.join(suite.marker).is_file() {
        eprintln!(
            "generating {} at scale factor {} into {}",
            suite.name,
            args.sf,
            data.display()
        );
        (suite.generate)(args.sf, &data)?;
    }
    let (target, gpu) = choose_target(args.device)?;
    let options = CompileOptions {
        target,
        tile: args.tile,
        compress: compression_for(target, args.compress),
        partition_joins: Default::default(),
        prepare: true,
        gpu_memory: None,
    };
    let device = gpu
        .as_ref()
        .map_or("CPU".to_string(), |g| format!("{} ({target})", g.name));
    let mut catalog = None;
    let mut results = Vec::with_capacity(suite.queries.len());
    let mut bandwidth = None;
    for (i, (name, source)) in suite.queries.iter().enumerate() {
        let script = Script {
            name: format!("examples/{}/{name}.tq", suite.name),
            source: source.to_string(),
        };
        let mut cache = |new: Option<std::sync::Arc<tessera_storage::Catalog>>| match new {
            Some(c) => {
                catalog = Some(std::sync::Arc::clone(&c));
                Some(c)
            }
            None => catalog.clone(),
        };
        // Compile times vary with what else the host is doing; the median of a few is the
        // figure to report.
        let mut compile_times = Vec::with_capacity(COMPILES);
        let (mut stage_kernels, mut stage_totals) = (Vec::new(), Vec::new());
        let mut compiled = compile_with_catalog(&script, &data, &options, false, &mut cache)?;
        for compile in 0..COMPILES {
            if compile > 0 {
                compiled = compile_with_catalog(&script, &data, &options, false, &mut cache)?;
            }
            compile_times.push(compiled.compile_ms);
            if !compiled.stages.is_empty() {
                stage_kernels.push(compiled.stages.iter().map(|s| s.kernels_ms).sum::<f64>());
                stage_totals.push(compiled.stages.iter().map(|s| s.total_ms).sum::<f64>());
            }
        }
        // What a repeated query pays instead of compiling: storing and reading the program.
        let key = format!("bench-{name}-{}", std::process::id());
        super::cache::store(&key, &compiled.program);
        let reading = Instant::now();
        let cached_ms = super::cache::load(&key).map(|_| reading.elapsed().as_secs_f64() * 1e3);
        super::cache::forget(&key);
        let loading = Instant::now();
        let mut backend = backend_for(&compiled.program, None)?;
        let load_ms = loading.elapsed().as_secs_f64() * 1e3;
        let bytes_per_second = match bandwidth {
            Some(b) => b,
            None => {
                let b = backend.copy_bandwidth()?;
                bandwidth = Some(b);
                b
            }
        };
        let query = compiled
            .program
            .queries
            .first()
            .ok_or_else(|| Failure::Message(format!("{name} has no query")))?;
        let mut times = Vec::with_capacity(args.runs);
        let mut timings = Vec::with_capacity(args.runs);
        let mut bytes = 0;
        let mut rows = 0;
        for run in 0..args.warmup + args.runs {
            let outcome = run_query(backend.as_mut(), query, &compiled.catalog)?;
            if run >= args.warmup {
                times.push(outcome.timing.kernel_ms());
                timings.push(outcome.timing.kernels.clone());
            }
            bytes = outcome.timing.bytes();
            rows = outcome.table.rows.len();
        }
        let median_ms = median(&mut times);
        let floor_ms = bytes as f64 / bytes_per_second * 1e3;
        results.push(QueryResult {
            query: name.to_string(),
            median_ms,
            min_ms: times[0],
            runs: times.len(),
            bytes,
            floor_ms,
            time_over_floor: median_ms / floor_ms.max(1e-9),
            compile_ms: median(&mut compile_times),
            cached_ms,
            load_ms,
            rows,
            crystal_ms: gpu
                .is_some()
                .then_some(suite.reference_sf20)
                .flatten()
                .map(|reference| reference[i] * args.sf / 20.0),
            kernels: kernel_medians(&timings),
            stage_kernels_ms: (!stage_kernels.is_empty()).then(|| median(&mut stage_kernels)),
            stages_ms: (!stage_totals.is_empty()).then(|| median(&mut stage_totals)),
        });
    }
    let geomean = |values: &mut dyn Iterator<Item = f64>| {
        let (sum, n) = values.fold((0.0, 0), |(s, n), v| (s + v.max(1e-12).ln(), n + 1));
        (sum / f64::from(n.max(1))).exp()
    };
    let report = Report {
        benchmark: suite.title.to_string(),
        device,
        scale_factor: args.sf,
        copy_bandwidth_gb_s: bandwidth.unwrap_or(0.0) / 1e9,
        geomean_ms: geomean(&mut results.iter().map(|r| r.median_ms)),
        // A staged query's floor counts only the bytes its last query reads.
        geomean_time_over_floor: geomean(
            &mut results
                .iter()
                .filter(|r| r.stages_ms.is_none())
                .map(|r| r.time_over_floor),
        ),
        geomean_crystal_ms: (gpu.is_some() && suite.reference_sf20.is_some())
            .then(|| geomean(&mut results.iter().filter_map(|r| r.crystal_ms))),
        queries: results,
    };
    if args.json {
        return print_json(&report);
    }
    print!("{}", table(&report));
    if args.kernels {
        print!("{}", kernel_table(&report));
    }
    Ok(())
}

/// Each kernel of a query (by launch position) with its median time over `runs`. A query
/// launches the same kernels every run; should a run launch fewer, a position's median is over
/// the runs that reached it.
fn kernel_medians(runs: &[Vec<tessera_runtime::exec::KernelTiming>]) -> Vec<KernelMedian> {
    let launched = runs.iter().map(Vec::len).max().unwrap_or(0);
    (0..launched)
        .filter_map(|position| {
            let mut times: Vec<f64> = runs
                .iter()
                .filter_map(|kernels| kernels.get(position).map(|k| k.ms))
                .collect();
            let first = runs.iter().find_map(|kernels| kernels.get(position))?;
            Some(KernelMedian {
                name: first.name.clone(),
                table: first.table.clone(),
                rows: first.rows,
                median_ms: median(&mut times),
            })
        })
        .collect()
}

fn kernel_table(report: &Report) -> String {
    let mut out = String::from("\nkernels (median ms over the timed runs):\n");
    for q in &report.queries {
        for k in &q.kernels {
            let over = if k.table.is_empty() {
                "output"
            } else {
                &k.table
            };
            out.push_str(&format!(
                "{:<5} {:<16} {:>10} rows of {:<10} {:>9.3}\n",
                q.query, k.name, k.rows, over, k.median_ms
            ));
        }
    }
    out
}

fn table(report: &Report) -> String {
    let mut out = format!(
        "{} at SF {} on {}; copy bandwidth {:.0} GB/s (read + write); {} timed runs after warm-up; compile: median of {COMPILES}\n",
        report.benchmark,
        report.scale_factor,
        report.device,
        report.copy_bandwidth_gb_s,
        report.queries.first().map_or(0, |q| q.runs)
    );
    let crystal = report.geomean_crystal_ms.is_some();
    out.push_str("query  median ms   min ms  floor ms  time/floor");
    if crystal {
        out.push_str("  Crystal ms  vs Crystal");
    }
    out.push_str("  compile ms  cached ms  load ms   rows");
    let staged = report.queries.iter().any(|q| q.stages_ms.is_some());
    if staged {
        out.push_str("  stages: kernels ms  all ms");
    }
    out.push('\n');
    for q in &report.queries {
        out.push_str(&format!(
            "{:<5} {:>10.3} {:>8.3}",
            q.query, q.median_ms, q.min_ms
        ));
        match q.stages_ms {
            None => out.push_str(&format!(" {:>9.3} {:>11.2}", q.floor_ms, q.time_over_floor)),
            Some(_) => out.push_str(&format!(" {:>9} {:>11}", "-", "-")),
        }
        if let Some(c) = q.crystal_ms {
            out.push_str(&format!(" {:>11.2} {:>11.2}", c, q.median_ms / c));
        }
        let cached = q.cached_ms.map_or("-".to_string(), |ms| format!("{ms:.1}"));
        out.push_str(&format!(
            " {:>11.1} {:>10} {:>8.1} {:>6}",
            q.compile_ms, cached, q.load_ms, q.rows
        ));
        if let (Some(kernels), Some(all)) = (q.stage_kernels_ms, q.stages_ms) {
            out.push_str(&format!(" {kernels:>19.3} {all:>7.1}"));
        }
        out.push('\n');
    }
    if staged {
        out.push_str("(a query that runs in stages: median ms is the query after its stages, which run as it is compiled; its floor, counting only that query's bytes, is left out)\n");
    }
    out.push_str(&format!(
        "geomean {:>8.3} {:>8} {:>9} {:>11.2}",
        report.geomean_ms, "", "", report.geomean_time_over_floor
    ));
    if let Some(c) = report.geomean_crystal_ms {
        out.push_str(&format!(" {:>11.2} {:>11.2}", c, report.geomean_ms / c));
    }
    out.push('\n');
    out
}
