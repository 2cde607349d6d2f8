//! `tessera run`: compiles a script (or loads a compiled `.tqx`), runs every query in it on the
//! chosen device, and prints the results as they are read back (rows in pieces, so a result
//! larger than host memory streams to the output).

use std::io::Write;
use std::path::Path;

use std::sync::Arc;

use tessera_grammar::source_to_ast;
use tessera_runtime::exec::gpu::{early_start_ms, GpuBackend, LoadReport};
use tessera_runtime::exec::host::HostBackend;
use tessera_runtime::exec::{
    prefetch_columns, run_query, run_query_with, Backend, QueryOutcome, Readback, RuntimeError,
};
use tessera_runtime::output::{ScriptOutput, TableLimits, TextFormat};
use tessera_runtime::program::{Code, Program};
use tessera_runtime::result::ResultTable;
use tessera_storage::prepared::PreparedStore;
use tessera_storage::Catalog;

use super::compile::{open, Script};
use super::session::{
    choose_target, compile_with_catalog, compression_for, configure, finish_preparing,
    CompileOptions, DeviceChoice,
};
use crate::failure::Failure;
use crate::RunArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
    /// One JSON object per row and line.
    Ndjson,
}

/// Rows read back from the device at a time when a query's result streams to the output.
const STREAM_ROWS: usize = 1 << 20;

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let artifact = args
        .script
        .as_deref()
        .filter(|path| path.extension().is_some_and(|e| e == "tqx"));
    let read_script = || match (&args.command, &args.script) {
        (Some(text), _) => Ok(Script {
            name: "<command>".into(),
            source: text.clone(),
        }),
        (None, Some(path)) => Script::read(path),
        (None, None) => Err(Failure::Message("no script: name a file or pass -c".into())),
    };
    if let Some(path) = &args.output {
        super::result_file::check(path)?;
    }
    if let Some(server) = &args.server {
        if artifact.is_some() {
            return Err(Failure::Message(
                "a server runs scripts, not compiled programs: send the .tq".into(),
            ));
        }
        if let Some(path) = &args.output {
            let results = super::remote::Connection::open(server)?.run(server, &read_script()?)?;
            return super::result_file::write(path, &results);
        }
        return super::remote::run(
            server,
            &read_script()?,
            args.format.into(),
            TableLimits::for_stdout(args.max_rows),
        );
    }
    // Only a local run reads data (clap requires it unless a server does).
    let Some(data) = args.data.as_deref() else {
        return Err(Failure::Message(
            "--data is needed: the data folder or file to run on".into(),
        ));
    };
    let stdout = std::io::stdout();
    let mut printer = Printer {
        collected: args.output.as_ref().map(|_| Vec::new()),
        output: ScriptOutput::new(
            std::io::BufWriter::new(stdout.lock()),
            args.format.into(),
            TableLimits::for_stdout(args.max_rows),
            0,
        ),
    };
    let mut report = ProcessReport::default();
    let result = if let Some(artifact) = artifact {
        let program = read_artifact(artifact)?;
        if args.device == DeviceChoice::Cpu && matches!(program.code, Code::Ptx(_)) {
            return Err(Failure::Message(format!(
                "{} was compiled for {}; compile it with --target host to run on the CPU",
                artifact.display(),
                program.target
            )));
        }
        // A compiled program carries no declarations; `.tbl` files use the standard schemas.
        let mut catalog = super::stats::open(data)?;
        if !args.no_prepare {
            catalog = catalog.with_prepared(PreparedStore::for_data(data));
        }
        warn_unreadable(&program, &catalog);
        let outcomes = execute_program(
            &program,
            &catalog,
            args.gpu_memory,
            &mut printer,
            &mut report,
        );
        finish_preparing(&catalog);
        report.prepared = catalog.prepared_counts();
        outcomes.map(|outcomes| (program, outcomes, None))
    } else {
        let script = read_script()?;
        // The data's tables are found while the driver starts; the target waits for it.
        let ast = source_to_ast(&script.source).map_err(|d| script.fail(d))?;
        let opened = open(&script, &ast, data)?;
        report.mark("opened");
        let (target, _) = choose_target(args.device)?;
        report.mark("target");
        let options = CompileOptions {
            target,
            tile: args.tile,
            compress: compression_for(target, args.compress),
            partition_joins: args.partition_joins,
            prepare: !args.no_prepare,
            gpu_memory: args.gpu_memory,
        };
        let opened = Arc::new(configure(opened, data, &options));
        let mut reuse = |_: Option<Arc<Catalog>>| Some(Arc::clone(&opened));
        let mut compiled = compile_with_catalog(&script, data, &options, true, &mut reuse)?;
        report.mark("compiled");
        warn_unreadable(&compiled.program, &compiled.catalog);
        let mut outcomes = execute_program(
            &compiled.program,
            &compiled.catalog,
            args.gpu_memory,
            &mut printer,
            &mut report,
        );
        // A cached program whose assumptions no longer hold (found before any row is
        // printed): forget it and compile again. The script's entry may be followed by its
        // shape's; each is forgotten in turn, and then the code is generated afresh.
        while matches!(outcomes, Err(RuntimeError::Stale(_)))
            && compiled.from_cache
            && printer.output.printed() == 0
        {
            compiled.forget();
            if let Some(collected) = &mut printer.collected {
                collected.clear();
            }
            compiled = compile_with_catalog(&script, data, &options, true, &mut reuse)?;
            outcomes = execute_program(
                &compiled.program,
                &compiled.catalog,
                args.gpu_memory,
                &mut printer,
                &mut report,
            );
        }
        // The cubins the driver linked now spare the next run that work.
        if let Some(linked) = report.load.linked.take() {
            compiled.program.cubins = Some(linked);
            compiled.store();
        }
        report.mark("ran");
        finish_preparing(&compiled.catalog);
        report.mark("prepared");
        report.prepared = compiled.catalog.prepared_counts();
        if args.timing {
            for stage in &compiled.stages {
                eprintln!("stage {stage}");
            }
        }
        let times = (
            compiled.compile_ms,
            compiled.plan_ms,
            compiled.codegen,
            compiled.from_cache,
        );
        outcomes.map(|outcomes| (compiled.program, outcomes, Some(times)))
    };
    let (program, outcomes, compile) = match result {
        Ok(done) => done,
        // The reader went away (`tessera run ... | head`): nothing more to say.
        Err(RuntimeError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(RuntimeError::Output(e)) => {
            return Err(Failure::Message(format!("cannot write the output: {e}")))
        }
        Err(e) => return Err(e.into()),
    };
    // What is still buffered must reach the output: a closed or full one is an error.
    if let (Some(path), Some(results)) = (&args.output, &printer.collected) {
        super::result_file::write(path, results)?;
    }
    match printer.output.finish() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(Failure::Message(format!("cannot write the output: {e}"))),
        Ok(_) => {}
    }
    if args.timing {
        eprint!("{}", timing_report(&program, &outcomes, compile));
        eprintln!("{}", report.line(compile.map_or(0.0, |c| c.0), &outcomes));
    }
    Ok(())
}

/// Where a run's time went, for `--timing`'s last line (which `bench e2e` reads).
#[derive(Default)]
struct ProcessReport {
    /// How the GPU's kernels were loaded (nothing on the CPU).
    load: LoadReport,
    /// Milliseconds spent mapping or loading the columns kernels read, before the device was
    /// needed.
    prefetch_ms: f64,
    /// Bytes uploaded from registered and from pageable host memory.
    uploaded: (u64, u64),
    /// Prepared columns read from the store, and written to it.
    prepared: (usize, usize),
    /// Milliseconds since the process started at which each step ended.
    timeline: Vec<(&'static str, f64)>,
}

impl ProcessReport {
    fn mark(&mut self, step: &'static str) {
        self.timeline.push((step, crate::since_start()));
    }

    fn line(&self, compile_ms: f64, outcomes: &[QueryOutcome]) -> String {
        let sum = |f: fn(&QueryOutcome) -> f64| outcomes.iter().map(f).sum::<f64>();
        let total = crate::since_start();
        let driver =
            early_start_ms().map_or_else(|| "none".to_string(), |ms| format!("{ms:.1} ms"));
        let load = if self.load.from_cubins {
            "loaded from cubins".to_string()
        } else if let Some(reason) = &self.load.cubins_refused {
            format!("linked from PTX by the driver (the cached cubins were not used: {reason})")
        } else if self.load.ms > 0.0 {
            "linked from PTX by the driver".to_string()
        } else {
            "compiled for the host".to_string()
        };
        format!(
            "process: total {total:.1} ms, driver {driver}, compile {compile_ms:.1} ms, load {:.1} ms, data {:.1} ms, uploaded {:.1} MB, registered {:.1} MB, kernels {:.3} ms, result {:.1} ms; kernels {load}; prepared columns: {} read, {} written",
            self.load.ms,
            self.prefetch_ms + sum(|o| o.timing.setup_ms),
            (self.uploaded.0 + self.uploaded.1) as f64 / 1e6,
            self.uploaded.0 as f64 / 1e6,
            sum(|o| o.timing.query_ms),
            sum(|o| o.timing.finish_ms),
            self.prepared.0,
            self.prepared.1,
        ) + &self.timeline_line()
            + &Self::memory_line()
    }

    /// `\nmemory: …`: the process's resident memory now (anonymous, and pages of mapped files)
    /// and at its peak, from `/proc/self/status` (nothing where there is none).
    fn memory_line() -> String {
        let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
            return String::new();
        };
        let field = |name: &str| -> f64 {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
                .map_or(0.0, |kb| kb / 1024.0)
        };
        format!(
            "\nmemory: {:.0} MiB anonymous and {:.0} MiB of mapped files resident at the end, {:.0} MiB resident at the peak",
            field("RssAnon:"),
            field("RssFile:"),
            field("VmHWM:")
        )
    }

    /// `\ntimeline (ms since start): opened 8.1, target 140.3, …`: when each step ended.
    fn timeline_line(&self) -> String {
        let mut steps: Vec<(&str, f64)> = self.timeline.clone();
        if let Some(ready) = early_start_ms() {
            steps.push(("driver ready", ready));
        }
        steps.sort_by(|a, b| a.1.total_cmp(&b.1));
        let steps: Vec<String> = steps
            .iter()
            .map(|(step, ms)| format!("{step} {ms:.1}"))
            .collect();
        format!("\ntimeline (ms since start): {}", steps.join(", "))
    }
}

impl From<Format> for TextFormat {
    fn from(format: Format) -> TextFormat {
        match format {
            Format::Table => TextFormat::Table,
            Format::Csv => TextFormat::Csv,
            Format::Json => TextFormat::Json,
            Format::Ndjson => TextFormat::NdJson,
        }
    }
}

/// Prints each query's result as it is read back, or keeps it for `--output`.
struct Printer<W: Write> {
    output: ScriptOutput<W>,
    /// With `--output`: each query's whole result, for the file.
    collected: Option<Vec<ResultTable>>,
}

impl<W: Write> Printer<W> {
    /// Runs `query`, printing its result piece by piece.
    fn run(
        &mut self,
        backend: &mut dyn Backend,
        query: &tessera_runtime::program::QueryProgram,
        catalog: &Catalog,
    ) -> Result<QueryOutcome, RuntimeError> {
        if let Some(collected) = &mut self.collected {
            let mut rows = Vec::new();
            let mut deliver = |piece: ResultTable| {
                rows.extend(piece.rows);
                Ok(())
            };
            let mut readback = Readback::Stream {
                rows: STREAM_ROWS,
                deliver: &mut deliver,
            };
            let outcome = run_query_with(backend, query, catalog, &mut readback)?;
            collected.push(ResultTable {
                columns: outcome.table.columns.clone(),
                rows,
            });
            return Ok(outcome);
        }
        let mut writer = self.output.next_result();
        let mut deliver = |piece: ResultTable| writer.write(&piece).map_err(RuntimeError::Output);
        let mut readback = Readback::Stream {
            rows: STREAM_ROWS,
            deliver: &mut deliver,
        };
        let outcome = run_query_with(backend, query, catalog, &mut readback)?;
        writer
            .finish(&outcome.table.columns)
            .map_err(RuntimeError::Output)?;
        self.output.finished();
        Ok(outcome)
    }
}

/// Says on stderr which columns of the tables `program` reads Tessera cannot read and leaves
/// out (a timestamp column of a Parquet file, say), with the reason.
fn warn_unreadable(program: &Program, catalog: &Catalog) {
    let mut tables: Vec<&str> = program
        .queries
        .iter()
        .flat_map(|query| {
            let scanned = query.kernels.iter().map(|kernel| kernel.table.as_str());
            scanned.chain(query.columns.iter().map(|used| used.table.as_str()))
        })
        .collect();
    tables.sort_unstable();
    tables.dedup();
    for table in tables {
        let Some(info) = catalog.table(table) else {
            continue;
        };
        if info.unsupported.is_empty() {
            continue;
        }
        let columns: Vec<String> = info
            .unsupported
            .iter()
            .map(|(column, reason)| format!("`{column}` ({reason})"))
            .collect();
        eprintln!(
            "warning: table `{table}` has columns Tessera cannot read, left out: {}",
            columns.join(", ")
        );
    }
}

/// Runs every query of `program` on the device its code is for.
pub fn execute(program: &Program, catalog: &Catalog) -> Result<Vec<QueryOutcome>, Failure> {
    let mut backend = backend_for(program, None)?;
    program
        .queries
        .iter()
        .map(|query| run_query(backend.as_mut(), query, catalog).map_err(Failure::from))
        .collect()
}

/// Runs every query of `program`, printing each result as it is read back; with `gpu_memory`,
/// the columns resident on the device stay within it and a query that needs more streams its
/// largest table through in pieces.
fn execute_program<W: Write>(
    program: &Program,
    catalog: &Catalog,
    gpu_memory: Option<u64>,
    printer: &mut Printer<W>,
    report: &mut ProcessReport,
) -> Result<Vec<QueryOutcome>, RuntimeError> {
    // The columns are mapped (or read and encoded) while the GPU's context is still starting.
    let started = std::time::Instant::now();
    for query in &program.queries {
        prefetch_columns(query, catalog);
    }
    report.prefetch_ms += started.elapsed().as_secs_f64() * 1e3;
    report.mark("columns mapped");
    printer.output.set_queries(program.queries.len());
    match &program.code {
        Code::Ptx(ptx) => {
            let mut backend = GpuBackend::new(ptx, program.cubins.as_ref())?;
            backend.set_memory_budget(gpu_memory);
            report.mark("kernels loaded");
            report.load = std::mem::take(&mut backend.load);
            let outcomes = program
                .queries
                .iter()
                .map(|query| printer.run(&mut backend, query, catalog))
                .collect();
            report.uploaded = backend.uploaded;
            outcomes
        }
        Code::HostObject(object) => {
            let mut backend = HostBackend::new(object)?;
            backend.set_memory_budget(gpu_memory);
            program
                .queries
                .iter()
                .map(|query| printer.run(&mut backend, query, catalog))
                .collect()
        }
    }
}

/// The backend `program`'s code runs on, its columns within `gpu_memory` (`--gpu-memory`).
pub fn backend_for(
    program: &Program,
    gpu_memory: Option<u64>,
) -> Result<Box<dyn Backend>, RuntimeError> {
    Ok(match &program.code {
        Code::Ptx(ptx) => {
            let mut gpu = GpuBackend::new(ptx, program.cubins.as_ref())?;
            gpu.set_memory_budget(gpu_memory);
            Box::new(gpu)
        }
        Code::HostObject(object) => {
            let mut host = HostBackend::new(object)?;
            host.set_memory_budget(gpu_memory);
            Box::new(host)
        }
    })
}

fn read_artifact(path: &Path) -> Result<Program, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Message(format!("cannot read {}: {e}", path.display())))?;
    Program::from_file(&bytes, Some(ARTIFACT))
        .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))
}

/// The identity a `.tqx` file's header carries (kernel-cache entries carry their key).
pub const ARTIFACT: &str = "tqx";

fn timing_report(
    program: &Program,
    outcomes: &[QueryOutcome],
    compile: Option<(f64, f64, tessera_compiler::codegen::CodegenTimes, bool)>,
) -> String {
    let mut text = String::new();
    if let Some((ms, _, _, true)) = compile {
        text.push_str(&format!(
            "compile: {ms:.1} ms for {} (from the kernel cache)\n",
            program.target
        ));
    } else if let Some((ms, plan, codegen, false)) = compile {
        text.push_str(&format!(
            "compile: {ms:.1} ms for {} (plan {plan:.1}, {codegen})\n",
            program.target
        ));
    }
    for (i, outcome) in outcomes.iter().enumerate() {
        let t = &outcome.timing;
        let bytes = t.bytes();
        let ms = t.kernel_ms();
        let rate = if ms > 0.0 {
            bytes as f64 / (ms * 1e-3) / 1e9
        } else {
            0.0
        };
        text.push_str(&format!(
            "query {i}: kernels {ms:.3} ms, {:.1} MB read ({rate:.1} GB/s); setup {:.1} ms, result {:.1} ms\n",
            bytes as f64 / 1e6,
            t.setup_ms,
            t.finish_ms
        ));
        if let Some(streamed) = &t.streamed {
            text.push_str(&format!("  {streamed}\n"));
        }
        for k in &t.kernels {
            // Sort kernels run over the query's output rather than a table.
            let over = if k.table.is_empty() {
                "output"
            } else {
                &k.table
            };
            text.push_str(&format!(
                "  {:<16} {:>10} rows of {:<10} {:>9.3} ms {:>10.1} MB\n",
                k.name,
                k.rows,
                over,
                k.ms,
                k.bytes as f64 / 1e6
            ));
        }
    }
    text
}
