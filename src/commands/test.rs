//! `tessera test`: runs conformance files on the chosen device and compares each result with the
//! expectation DuckDB gave. Data named by a file (`data: ssb 0.01`) is generated once into a
//! cache folder unless `--data` points at it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tessera_compiler::physical::PartitionJoins;
use tessera_storage::compress::Compression;
use tessera_storage::gen::{ensure_generated, holds_generation, Dataset};
use tessera_storage::progress::NoProgress;
use tessera_storage::Catalog;

use super::compile::Script;
use super::remote::Connection;
use super::run::execute;
use super::session::{
    choose_target, compile_with_catalog, compression_for, finish_preparing, CompileOptions,
};
use crate::conformance::{compare, parse_csv, Case, Script as CaseScript};
use crate::failure::Failure;
use crate::TestArgs;

pub fn run(args: &TestArgs) -> Result<(), Failure> {
    let files = collect(&args.paths)?;
    if files.is_empty() {
        return Err(Failure::Message(
            "no conformance files (*.test) found".into(),
        ));
    }
    let (target, gpu) = choose_target(args.device)?;
    let device = match (&args.server, &gpu) {
        (Some(server), _) => format!("the server at {server}"),
        (None, Some(gpu)) => format!("{} ({target})", gpu.name),
        (None, None) => "the CPU".to_string(),
    };
    let options = CompileOptions {
        target,
        tile: None,
        compress: compression_for(target, args.compress),
        partition_joins: args.partition_joins,
        prepare: !args.no_prepare,
        gpu_memory: None,
    };
    let compression = match options.compress {
        Compression::NONE => String::new(),
        other => format!(", columns packed: {other}"),
    };
    let partitioning = match args.partition_joins {
        PartitionJoins::Auto => "",
        PartitionJoins::Always => ", every join partitioned",
        PartitionJoins::Never => ", no join partitioned",
    };
    println!(
        "running {} conformance files on {device}{compression}{partitioning}",
        files.len()
    );
    let mut datasets: HashMap<String, PathBuf> = HashMap::new();
    // One catalog per data folder, so columns are read once for all the files that use them.
    let mut catalogs: HashMap<PathBuf, Arc<Catalog>> = HashMap::new();
    let mut failures = 0;
    // Through a server, one connection takes every file in turn.
    let mut remote: Option<Connection> = None;
    let started = Instant::now();
    for path in &files {
        let outcome = (|| -> Result<(f64, usize), String> {
            let case = Case::read(path)?;
            let data = match &args.data {
                Some(data) => data.clone(),
                None => match datasets.get(&case.data) {
                    Some(dir) => dir.clone(),
                    None => {
                        let dir = dataset(&case.data)?;
                        datasets.insert(case.data.clone(), dir.clone());
                        dir
                    }
                },
            };
            let script = match &case.script {
                CaseScript::File(file) => Script::read(file).map_err(describe)?,
                CaseScript::Inline(text) => Script {
                    name: path.display().to_string(),
                    source: text.clone(),
                },
            };
            let mut cache = |new: Option<Arc<Catalog>>| match new {
                Some(catalog) => {
                    catalogs.insert(data.clone(), Arc::clone(&catalog));
                    Some(catalog)
                }
                None => catalogs.get(&data).cloned(),
            };
            if let Some(server) = &args.server {
                let connection = match &mut remote {
                    Some(connection) => connection,
                    None => remote.insert(Connection::open(server).map_err(describe)?),
                };
                let tables = connection.run(server, &script).map_err(describe)?;
                let last = tables.last().ok_or("the script has no query")?;
                compare(&case.expected, &parse_csv(&last.to_csv()), case.ordered)?;
                return Ok((0.0, last.rows.len()));
            }
            let compiled = compile_with_catalog(&script, &data, &options, false, &mut cache)
                .map_err(describe)?;
            let outcomes = execute(&compiled.program, &compiled.catalog).map_err(describe)?;
            let last = outcomes.last().ok_or("the script has no query")?;
            let actual = parse_csv(&last.table.to_csv());
            compare(&case.expected, &actual, case.ordered)?;
            Ok((last.timing.kernel_ms(), last.table.rows.len()))
        })();
        match outcome {
            Ok((ms, rows)) => println!(
                "ok    {}  ({rows} rows, kernels {ms:.3} ms)",
                path.display()
            ),
            Err(message) => {
                failures += 1;
                println!("FAIL  {}\n      {message}", path.display());
            }
        }
    }
    let (mut read, mut written) = (0, 0);
    for catalog in catalogs.values() {
        finish_preparing(catalog);
        let (r, w) = catalog.prepared_counts();
        read += r;
        written += w;
    }
    let passed = files.len() - failures;
    let prepared = if read + written > 0 {
        format!(" ({read} prepared columns read, {written} prepared)")
    } else {
        String::new()
    };
    println!(
        "{passed} passed, {failures} failed, in {:.1} s on {device}{prepared}",
        started.elapsed().as_secs_f64()
    );
    if failures > 0 {
        return Err(Failure::Message(format!(
            "{failures} conformance files failed"
        )));
    }
    Ok(())
}

fn describe(failure: Failure) -> String {
    match failure {
        Failure::Message(m) => m,
        Failure::Script {
            name,
            source,
            diagnostics,
        } => tessera_grammar::render(&diagnostics, &name, &source, false),
        Failure::Reported => String::new(),
    }
}

fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut files)
                .map_err(|e| Failure::Message(format!("cannot list {}: {e}", path.display())))?;
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(Failure::Message(format!(
                "{} does not exist",
                path.display()
            )));
        }
    }
    files.sort();
    Ok(files)
}

fn walk(folder: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "test") {
            files.push(path);
        }
    }
    Ok(())
}

/// The folder holding the data a `data:` line names (`ssb SF`, `tpch SF` or `wisconsin ROWS`),
/// generating it unless it holds a complete generation of that data already (a folder whose
/// generation was interrupted is generated again).
fn dataset(spec: &str) -> Result<PathBuf, String> {
    if let Some(folder) = spec.strip_prefix("folder ") {
        return Ok(PathBuf::from(folder));
    }
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (dataset, folder, what) = match words.as_slice() {
        ["ssb", scale] => {
            let sf: f64 = scale
                .parse()
                .map_err(|_| format!("bad scale factor in `{spec}`"))?;
            (
                Dataset::Ssb { sf },
                format!("ssb-{scale}"),
                format!("SSB at scale factor {scale}"),
            )
        }
        ["tpch", scale] => {
            let sf: f64 = scale
                .parse()
                .map_err(|_| format!("bad scale factor in `{spec}`"))?;
            (
                Dataset::Tpch { sf },
                format!("tpch-{scale}"),
                format!("TPC-H at scale factor {scale}"),
            )
        }
        ["wisconsin", rows] => {
            let rows: u64 = rows
                .parse()
                .map_err(|_| format!("bad row count in `{spec}`"))?;
            (
                Dataset::Wisconsin { rows },
                format!("wisconsin-{rows}"),
                format!("the Wisconsin relations of {rows} rows"),
            )
        }
        _ => {
            return Err(format!(
                "unknown data `{spec}` (expected `ssb SF`, `tpch SF`, `wisconsin ROWS` or `folder PATH`)"
            ))
        }
    };
    let folder = cache_root().join(folder);
    if !holds_generation(&folder, &dataset) {
        eprintln!("generating {what} into {}", folder.display());
        ensure_generated(&folder, &dataset, &NoProgress).map_err(|e| e.to_string())?;
    }
    Ok(folder)
}

/// `$TESSERA_DATA_CACHE`, else `target/conformance-data` of the enclosing Cargo project, else a
/// folder in the system's temporary directory.
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TESSERA_DATA_CACHE") {
        return PathBuf::from(dir);
    }
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(root) = cwd.ancestors().find(|a| a.join("Cargo.toml").is_file()) {
            return root.join("target").join("conformance-data");
        }
    }
    std::env::temp_dir().join("tessera-conformance")
}
