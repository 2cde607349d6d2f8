//! `tessera run`: compiles a script (or loads a compiled `.tqx`), runs every query in it on the
//! chosen device, and prints the results as they are read back (rows in pieces, so a result
//! larger than host memory streams to the output).

use std::io::Write;
use std::path::Path;

use tessera_runtime::exec::gpu::GpuBackend;
use tessera_runtime::exec::host::HostBackend;
use tessera_runtime::exec::{
    run_query, run_query_with, Backend, QueryOutcome, Readback, RuntimeError,
};
use tessera_runtime::program::{Code, Program, FORMAT_VERSION};
use tessera_runtime::result::{ResultTable, ResultWriter, TextFormat};
use tessera_storage::Catalog;

use super::cache;
use super::compile::Script;
use super::session::{
    choose_target, compile_script, compression_for, CompileOptions, DeviceChoice,
};
use crate::failure::Failure;
use crate::RunArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// Rows read back from the device at a time when a query's result streams to the output.
const STREAM_ROWS: usize = 1 << 20;

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let is_artifact = args.script.extension().is_some_and(|e| e == "tqx");
    let stdout = std::io::stdout();
    let mut printer = Printer {
        out: std::io::BufWriter::new(stdout.lock()),
        format: args.format.into(),
        queries: 0,
    };
    let result = if is_artifact {
        let program = read_artifact(&args.script)?;
        if args.device == DeviceChoice::Cpu && matches!(program.code, Code::Ptx(_)) {
            return Err(Failure::Message(format!(
                "{} was compiled for {}; compile it with --target host to run on the CPU",
                args.script.display(),
                program.target
            )));
        }
        // A compiled program carries no declarations; `.tbl` files use the standard schemas.
        let empty = tessera_grammar::ast::Script { items: Vec::new() };
        let catalog = tessera_compiler::open_catalog(&empty, &args.data).map_err(|e| match e {
            tessera_compiler::script::OpenError::Storage(e) => Failure::Message(e.to_string()),
            tessera_compiler::script::OpenError::Declarations(_) => {
                Failure::Message("bad standard schemas".into())
            }
        })?;
        execute_program(&program, &catalog, &mut printer).map(|outcomes| (program, outcomes, None))
    } else {
        let script = Script::read(&args.script)?;
        let (target, _) = choose_target(args.device)?;
        let options = CompileOptions {
            target,
            tile: args.tile,
            compress: compression_for(target, args.compress),
            partition_joins: args.partition_joins,
        };
        let mut compiled = compile_script(&script, &args.data, &options, true)?;
        let outcomes = match execute_program(&compiled.program, &compiled.catalog, &mut printer) {
            // A cached program whose assumptions no longer hold (found before any row is
            // printed): compile afresh.
            Err(RuntimeError::Stale(_)) if compiled.from_cache && printer.queries == 0 => {
                if let Some(key) = &compiled.cache_key {
                    cache::forget(key);
                }
                compiled = compile_script(&script, &args.data, &options, true)?;
                execute_program(&compiled.program, &compiled.catalog, &mut printer)
            }
            other => other,
        };
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
        Err(e) => return Err(e.into()),
    };
    if args.timing {
        eprint!("{}", timing_report(&program, &outcomes, compile));
    }
    Ok(())
}

impl From<Format> for TextFormat {
    fn from(format: Format) -> TextFormat {
        match format {
            Format::Table => TextFormat::Table,
            Format::Csv => TextFormat::Csv,
            Format::Json => TextFormat::Json,
        }
    }
}

/// Prints each query's result as it is read back, a blank line between queries.
struct Printer<W: Write> {
    out: W,
    format: TextFormat,
    /// Queries printed so far.
    queries: usize,
}

impl<W: Write> Printer<W> {
    /// Runs `query`, printing its result piece by piece.
    fn run(
        &mut self,
        backend: &mut dyn Backend,
        query: &tessera_runtime::program::QueryProgram,
        catalog: &Catalog,
    ) -> Result<QueryOutcome, RuntimeError> {
        if self.queries > 0 {
            writeln!(self.out).map_err(RuntimeError::Output)?;
        }
        let mut writer = ResultWriter::new(&mut self.out, self.format);
        let mut deliver = |piece: ResultTable| writer.write(&piece).map_err(RuntimeError::Output);
        let mut readback = Readback::Stream {
            rows: STREAM_ROWS,
            deliver: &mut deliver,
        };
        let outcome = run_query_with(backend, query, catalog, &mut readback)?;
        writer
            .finish(&outcome.table.columns)
            .map_err(RuntimeError::Output)?;
        self.queries += 1;
        Ok(outcome)
    }
}

/// Runs every query of `program` on the device its code is for.
pub fn execute(program: &Program, catalog: &Catalog) -> Result<Vec<QueryOutcome>, Failure> {
    let mut backend = backend_for(program)?;
    program
        .queries
        .iter()
        .map(|query| run_query(backend.as_mut(), query, catalog).map_err(Failure::from))
        .collect()
}

/// Runs every query of `program`, printing each result as it is read back.
fn execute_program<W: Write>(
    program: &Program,
    catalog: &Catalog,
    printer: &mut Printer<W>,
) -> Result<Vec<QueryOutcome>, RuntimeError> {
    let mut backend: Box<dyn Backend> = match &program.code {
        Code::Ptx(ptx) => Box::new(GpuBackend::new(ptx)?),
        Code::HostObject(object) => Box::new(HostBackend::new(object)?),
    };
    program
        .queries
        .iter()
        .map(|query| printer.run(backend.as_mut(), query, catalog))
        .collect()
}

pub fn backend_for(program: &Program) -> Result<Box<dyn Backend>, Failure> {
    Ok(match &program.code {
        Code::Ptx(ptx) => Box::new(GpuBackend::new(ptx)?),
        Code::HostObject(object) => Box::new(HostBackend::new(object)?),
    })
}

fn read_artifact(path: &Path) -> Result<Program, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Message(format!("cannot read {}: {e}", path.display())))?;
    let program: Program = serde_json::from_str(&text).map_err(|e| {
        Failure::Message(format!("{} is not a Tessera program: {e}", path.display()))
    })?;
    if program.format != FORMAT_VERSION {
        return Err(Failure::Message(format!(
            "{} was written by another version of Tessera (format {}, this one reads {FORMAT_VERSION}); compile it again",
            path.display(),
            program.format
        )));
    }
    Ok(program)
}

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
