//! `tessera run`: compiles a script (or loads a compiled `.tqx`), runs every query in it on the
//! chosen device, and prints the results.

use std::path::Path;

use tessera_runtime::exec::gpu::GpuBackend;
use tessera_runtime::exec::host::HostBackend;
use tessera_runtime::exec::{run_query, Backend, QueryOutcome, RuntimeError};
use tessera_runtime::program::{Code, Program, FORMAT_VERSION};
use tessera_runtime::result::ResultTable;
use tessera_storage::Catalog;

use super::cache;
use super::compile::Script;
use super::session::{choose_target, compile_script, CompileOptions, DeviceChoice};
use crate::failure::Failure;
use crate::RunArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let is_artifact = args.script.extension().is_some_and(|e| e == "tqx");
    let (program, outcomes, compile) = if is_artifact {
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
        let outcomes = execute(&program, &catalog)?;
        (program, outcomes, None)
    } else {
        let script = Script::read(&args.script)?;
        let (target, _) = choose_target(args.device)?;
        let options = CompileOptions {
            target,
            tile: args.tile,
            compress: args.compress,
        };
        let mut compiled = compile_script(&script, &args.data, &options, true)?;
        let outcomes = match execute_program(&compiled.program, &compiled.catalog) {
            // A cached program whose assumptions no longer hold: compile afresh.
            Err(RuntimeError::Stale(_)) if compiled.from_cache => {
                if let Some(key) = &compiled.cache_key {
                    cache::forget(key);
                }
                compiled = compile_script(&script, &args.data, &options, true)?;
                execute(&compiled.program, &compiled.catalog)?
            }
            other => other?,
        };
        let times = (
            compiled.compile_ms,
            compiled.plan_ms,
            compiled.codegen,
            compiled.from_cache,
        );
        (compiled.program, outcomes, Some(times))
    };
    let mut out = String::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format_table(&outcome.table, args.format));
    }
    print!("{out}");
    if args.timing {
        eprint!("{}", timing_report(&program, &outcomes, compile));
    }
    Ok(())
}

pub fn format_table(table: &ResultTable, format: Format) -> String {
    match format {
        Format::Table => table.to_text(),
        Format::Csv => table.to_csv(),
        Format::Json => table.to_json(),
    }
}

/// Runs every query of `program` on the device its code is for.
pub fn execute(program: &Program, catalog: &Catalog) -> Result<Vec<QueryOutcome>, Failure> {
    execute_program(program, catalog).map_err(Failure::from)
}

fn execute_program(
    program: &Program,
    catalog: &Catalog,
) -> Result<Vec<QueryOutcome>, RuntimeError> {
    let mut backend: Box<dyn Backend> = match &program.code {
        Code::Ptx(ptx) => Box::new(GpuBackend::new(ptx)?),
        Code::HostObject(object) => Box::new(HostBackend::new(object)?),
    };
    program
        .queries
        .iter()
        .map(|query| run_query(backend.as_mut(), query, catalog))
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
            text.push_str(&format!(
                "  {:<16} {:>10} rows of {:<10} {:>9.3} ms {:>10.1} MB\n",
                k.name,
                k.rows,
                k.table,
                k.ms,
                k.bytes as f64 / 1e6
            ));
        }
    }
    text
}
