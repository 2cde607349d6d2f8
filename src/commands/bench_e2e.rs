//! `tessera bench e2e`: each SSB query run the way a user runs it, as a fresh `tessera run`
//! process, timed from spawn to exit. Cold runs start with nothing prepared and an empty kernel
//! cache (each its own new cache folder, and the driver's JIT cache off); warm runs share a
//! cache folder that one untimed run filled. Each run's `--timing` account splits its time
//! (driver start, compile, kernel load, data, kernels, result), and every run's result must equal
//! the first one's. Beside the warm median stands the floor of a fresh process: the driver's
//! start, plus registering the bytes it uploads and copying them at the measured rate.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tessera_runtime::exec::gpu::GpuBackend;

use super::bench::{median, SSB_QUERIES};
use super::session::{choose_target, DeviceChoice};
use crate::failure::Failure;
use crate::E2eBenchArgs;

/// One fresh process's run of a query.
struct ProcessRun {
    wall_ms: f64,
    /// `--timing`'s account: milliseconds by phase, and megabytes uploaded.
    phases: Phases,
    output: String,
}

#[derive(Clone, Copy, Default)]
struct Phases {
    driver_ms: f64,
    compile_ms: f64,
    load_ms: f64,
    data_ms: f64,
    kernels_ms: f64,
    result_ms: f64,
    uploaded_mb: f64,
}

pub fn run(args: &E2eBenchArgs) -> Result<(), Failure> {
    if args.runs == 0 {
        return Err(Failure::Message("--runs must be at least 1".into()));
    }
    if !args.data.is_dir() {
        return Err(Failure::Message(format!(
            "{} is not a data directory (make one with `tessera gen ssb`)",
            args.data.display()
        )));
    }
    // This process touches the driver only after the runs: a context it held would make theirs
    // start faster than any user's would.
    let scratch = tempfile::Builder::new()
        .prefix("tessera-e2e-")
        .tempdir()
        .map_err(|e| Failure::Message(format!("cannot make a scratch folder: {e}")))?;

    let queries: Vec<(&str, PathBuf)> = SSB_QUERIES
        .iter()
        .filter(|(name, _)| args.only.is_empty() || args.only.iter().any(|o| name.contains(o)))
        .map(|(name, text)| {
            let path = scratch.path().join(format!("{name}.tq"));
            std::fs::write(&path, text).map(|()| (*name, path))
        })
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::Message(format!("cannot write a query: {e}")))?;
    let mut runs = Vec::new();
    let warm_cache = scratch.path().join("warm-cache");
    for (name, query) in &queries {
        let mut cold = Vec::new();
        for run in 0..args.cold_runs {
            let cache = scratch.path().join(format!("cold-{name}-{run}"));
            cold.push(run_process(query, args, &cache, true)?);
            let _ = std::fs::remove_dir_all(&cache);
        }
        // One untimed run prepares the columns and caches the kernels.
        let first = run_process(query, args, &warm_cache, false)?;
        let mut warm = Vec::new();
        for _ in 0..args.runs {
            warm.push(run_process(query, args, &warm_cache, false)?);
        }
        for other in cold.iter().chain(&warm) {
            if other.output != first.output {
                return Err(Failure::Message(format!(
                    "{name}: a run's result differs from the first run's"
                )));
            }
        }
        runs.push((name, cold, warm));
    }
    // What a fresh process cannot go under: the driver's start (as the runs measured it), and
    // moving its bytes to the GPU at the rates measured now.
    let (target, gpu) = choose_target(args.device)?;
    let device = gpu
        .as_ref()
        .map_or("the CPU".to_string(), |g| format!("{} ({target})", g.name));
    let copy_costs = match gpu {
        Some(_) => Some(copy_costs(scratch.path())?),
        None => None,
    };
    println!(
        "fresh `tessera run` processes on {device}, data {}; medians of {} runs (milliseconds)",
        args.data.display(),
        args.runs
    );
    if let Some((register_ms_per_mb, bytes_per_second)) = copy_costs {
        println!(
            "moving a mapped file to the GPU: registering {register_ms_per_mb:.4} ms/MB, copying {:.1} GB/s",
            bytes_per_second / 1e9
        );
    }
    let rows: Vec<Row> = runs
        .iter_mut()
        .map(|(name, cold, warm)| row(name, cold, warm, copy_costs))
        .collect();
    print!("{}", table(&rows, copy_costs.is_some()));
    Ok(())
}

/// What registering and copying a mapped file's pages cost on this machine: 256 MiB written to
/// a file in `scratch`, mapped as prepared columns are, registered and copied.
fn copy_costs(scratch: &Path) -> Result<(f64, f64), Failure> {
    let path = scratch.join("copy-test");
    let bytes: Vec<u8> = (0..256u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &bytes)
        .map_err(|e| Failure::Message(format!("cannot write {}: {e}", path.display())))?;
    let file = std::fs::File::open(&path)
        .map_err(|e| Failure::Message(format!("cannot read {}: {e}", path.display())))?;
    // SAFETY: the file is this benchmark's own and is not changed while mapped.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }
        .map_err(|e| Failure::Message(format!("cannot map {}: {e}", path.display())))?;
    let mut backend = GpuBackend::new(&[], None)?;
    let costs = backend.host_copy_costs(&map)?;
    drop(map);
    let _ = std::fs::remove_file(&path);
    Ok(costs)
}

/// Runs `tessera run QUERY` as a fresh process with `cache` as its cache folder.
fn run_process(
    query: &Path,
    args: &E2eBenchArgs,
    cache: &Path,
    cold: bool,
) -> Result<ProcessRun, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Message(format!("cannot find the tessera executable: {e}")))?;
    let device = match args.device {
        DeviceChoice::Auto => "auto",
        DeviceChoice::Gpu => "gpu",
        DeviceChoice::Cpu => "cpu",
    };
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg(query)
        .arg("--data")
        .arg(&args.data)
        .args(["--device", device, "--format", "csv", "--timing"])
        .env("TESSERA_CACHE_DIR", cache);
    if cold {
        // The driver's own cache of compiled PTX would make a "cold" run warm.
        command.env("CUDA_CACHE_DISABLE", "1");
    }
    let started = Instant::now();
    let output = command
        .output()
        .map_err(|e| Failure::Message(format!("cannot run tessera: {e}")))?;
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(Failure::Message(format!(
            "{} failed: {}",
            query.display(),
            stderr.lines().last().unwrap_or("")
        )));
    }
    let line = stderr
        .lines()
        .find(|l| l.starts_with("process:"))
        .unwrap_or("");
    Ok(ProcessRun {
        wall_ms,
        phases: phases(line),
        output: String::from_utf8_lossy(&output.stdout).into_owned(),
    })
}

/// Reads `--timing`'s `process:` line: `driver 305.1 ms, compile 2.1 ms, load 1.2 ms, data 45.0
/// ms, uploaded 12.0 MB, registered 12.0 MB, kernels 0.512 ms, result 0.3 ms; …`.
fn phases(line: &str) -> Phases {
    let number_after = |label: &str| -> f64 {
        line.split(label)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0)
    };
    Phases {
        driver_ms: number_after("driver "),
        compile_ms: number_after("compile "),
        load_ms: number_after("load "),
        data_ms: number_after("data "),
        kernels_ms: number_after("kernels "),
        result_ms: number_after("result "),
        uploaded_mb: number_after("uploaded "),
    }
}

struct Row {
    query: String,
    cold_ms: Option<f64>,
    warm_ms: f64,
    /// The median warm run's phases.
    phases: Phases,
    floor_ms: Option<f64>,
}

fn row(
    name: &str,
    cold: &mut [ProcessRun],
    warm: &mut [ProcessRun],
    copy_costs: Option<(f64, f64)>,
) -> Row {
    let mut cold_walls: Vec<f64> = cold.iter().map(|r| r.wall_ms).collect();
    warm.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
    let middle = &warm[warm.len() / 2];
    let mut drivers: Vec<f64> = warm.iter().map(|r| r.phases.driver_ms).collect();
    let floor_ms = copy_costs.map(|(register_ms_per_mb, bytes_per_second)| {
        let mb = middle.phases.uploaded_mb;
        median(&mut drivers) + mb * register_ms_per_mb + mb * 1e6 / bytes_per_second * 1e3
    });
    Row {
        query: name.to_string(),
        cold_ms: (!cold_walls.is_empty()).then(|| median(&mut cold_walls)),
        warm_ms: middle.wall_ms,
        phases: middle.phases,
        floor_ms,
    }
}

fn table(rows: &[Row], gpu: bool) -> String {
    let mut out = format!(
        "{:<6} {:>9} {:>9} | {:>8} {:>8} {:>7} {:>8} {:>8} {:>7} {:>9} | {:>8} {:>7}\n",
        "query",
        "cold",
        "warm",
        "driver",
        "compile",
        "load",
        "data",
        "kernels",
        "result",
        "MB up",
        "floor",
        "/floor"
    );
    for r in rows {
        let p = r.phases;
        let (floor, ratio) = match r.floor_ms {
            Some(floor) if gpu => (format!("{floor:.1}"), format!("{:.2}", r.warm_ms / floor)),
            _ => ("-".into(), "-".into()),
        };
        out.push_str(&format!(
            "{:<6} {:>9} {:>9.1} | {:>8.1} {:>8.1} {:>7.1} {:>8.1} {:>8.3} {:>7.1} {:>9.1} | {:>8} {:>7}\n",
            r.query,
            r.cold_ms.map_or("-".into(), |c| format!("{c:.1}")),
            r.warm_ms,
            p.driver_ms,
            p.compile_ms,
            p.load_ms,
            p.data_ms,
            p.kernels_ms,
            p.result_ms,
            p.uploaded_mb,
            floor,
            ratio
        ));
    }
    out
}
