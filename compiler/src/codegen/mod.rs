//! Code generation: each pipeline becomes one kernel, a flat sequence of calls to the runtime's
//! block-wide primitives with the pipeline's expressions computed in between; each query becomes
//! a `QueryProgram` saying how to launch its kernels and read its result. `pipelines_to_modules`
//! builds a module per kernel, and `modules_to_code` optimizes and emits them in parallel: PTX,
//! or host object code, one unit per kernel.

mod choices;
mod context;
mod expr;
mod groups;
mod input;
mod kernel;
#[cfg(test)]
mod layers;
mod materialize;
mod module;
mod partition;
mod pipeline;
mod query;
mod sinks;
mod sort;
mod steps;
mod targets;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use inkwell::context::Context;
use tessera_grammar::{Diagnostic, Span};
use tessera_runtime::program::{Code, KernelCode, Program, QueryProgram, FORMAT_VERSION};
use tessera_runtime::{Target, TileShape};
use tessera_storage::Catalog;

use crate::physical::{Input, PhysicalQuery};

pub use module::KernelModule;
pub use targets::{
    llvm_to_object, llvm_to_ptx, optimize_llvm, optimize_llvm_with, GpuCodegen, GpuPasses,
};

/// Builds every pipeline of `queries` as a kernel for `target` over tiles of `tile` (or, where
/// none is asked for, each query's from how its columns are stored: `choices::query_tile`),
/// one module per kernel, and the launch plan of each query.
pub fn pipelines_to_modules(
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
    tile: Option<TileShape>,
) -> Result<(Vec<KernelModule>, Vec<QueryProgram>), Diagnostic> {
    let span = queries.first().map(|q| q.span).unwrap_or_default();
    if let Some(tile) = tile {
        check_tile(span, target, tile)?;
    }
    let mut modules = Vec::new();
    let mut programs = Vec::with_capacity(queries.len());
    for (index, query) in queries.iter().enumerate() {
        let tile = match tile {
            Some(tile) => tile,
            None => choices::query_tile(query, catalog, target)?,
        };
        programs.push(query::query_to_llvm(
            index,
            query,
            catalog,
            target,
            tile,
            &mut modules,
        )?);
    }
    Ok((modules, programs))
}

fn check_tile(span: Span, target: Target, tile: TileShape) -> Result<(), Diagnostic> {
    let warp_multiple = tile.threads > 0 && tile.threads.is_multiple_of(32) && tile.threads <= 1024;
    // GPU items are unrolled into registers, so their number stays small.
    let fits = if target.is_gpu() {
        warp_multiple && (1..=64).contains(&tile.items_per_thread)
    } else {
        tile.threads == 1 && tile.items_per_thread > 0
    };
    if fits {
        return Ok(());
    }
    Err(Diagnostic::unsupported(
        span,
        format!(
            "tile shape {tile} does not fit {target}: GPU tiles need a multiple of 32 threads up to 1024 and at most 64 items each; host tiles have 1 thread"
        ),
    ))
}

/// Compiles pipelines all the way to a program the runtime can execute, each query's kernels
/// over the tiles its columns' encodings take.
pub fn pipelines_to_program(
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
) -> Result<Program, Diagnostic> {
    pipelines_to_program_timed(queries, catalog, target, None, &mut CodegenTimes::default())
}

/// Settles the encoding of every stored column the kernels scan, table by table, before any
/// kernel is built (which then asks for them one at a time): the data of a column not prepared
/// yet is read and encoded here, all columns of a table at once.
fn encode_scanned_columns(queries: &[PhysicalQuery], catalog: &Catalog) -> Result<(), Diagnostic> {
    let mut by_table: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for query in queries {
        // A pipeline over groups reads the grouping's buffers, not the columns it groups.
        for pipeline in query.pipelines.iter().filter(|p| p.input == Input::Table) {
            for id in &pipeline.scanned {
                if let Some(origin) = &query.columns.get(*id).origin {
                    by_table
                        .entry(origin.table.as_str())
                        .or_default()
                        .push(origin.column.as_str());
                }
            }
        }
    }
    for (table, columns) in by_table {
        catalog.encode_columns(table, &columns).map_err(|e| {
            let span = queries.first().map(|q| q.span).unwrap_or_default();
            Diagnostic::new(tessera_grammar::DiagnosticKind::Data, span, e.to_string())
        })?;
    }
    Ok(())
}

/// How long each step of code generation took, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct CodegenTimes {
    /// Reading and encoding the columns the kernels scan (none when they are prepared).
    pub encode_ms: f64,
    /// Building the kernels' LLVM modules.
    pub build_ms: f64,
    /// Optimizing and emitting every kernel, wall-clock time.
    pub llvm_ms: f64,
    /// The worker threads that optimized and emitted the kernels.
    pub threads: usize,
    /// Kernels compiled.
    pub kernels: usize,
    /// The longest any one kernel took to optimize and emit: the floor of `llvm_ms` however
    /// many threads there are.
    pub slowest_kernel_ms: f64,
}

impl std::fmt::Display for CodegenTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "encode columns {:.1}, LLVM IR {:.1}, optimize and emit {:.1}: {} kernels on {} threads, the slowest {:.1}",
            self.encode_ms, self.build_ms, self.llvm_ms, self.kernels, self.threads, self.slowest_kernel_ms
        )
    }
}

/// Like `pipelines_to_program`, with kernels over tiles of `tile` where one is asked for,
/// recording how long each step took.
pub fn pipelines_to_program_timed(
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
    tile: Option<TileShape>,
    times: &mut CodegenTimes,
) -> Result<Program, Diagnostic> {
    let span = queries.first().map(|q| q.span).unwrap_or_default();
    let started = Instant::now();
    encode_scanned_columns(queries, catalog)?;
    times.encode_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let (modules, queries_programs) = pipelines_to_modules(queries, catalog, target, tile)?;
    times.build_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let threads = worker_threads(modules.len());
    let kernels =
        modules_to_code(&modules, target, threads).map_err(|e| Diagnostic::internal(span, e))?;
    times.llvm_ms = started.elapsed().as_secs_f64() * 1e3;
    times.slowest_kernel_ms = kernels.iter().map(|k| k.1).fold(0.0, f64::max);
    let kernels = kernels.into_iter().map(|k| k.0).collect();
    times.threads = threads;
    times.kernels = modules.len();
    let code = match target {
        Target::Nvptx { .. } => Code::Ptx(kernels),
        Target::Host => Code::HostObject(kernels),
    };
    Ok(Program {
        format: FORMAT_VERSION,
        target,
        code,
        cubins: None,
        queries: queries_programs,
    })
}

/// Threads worth compiling `kernels` kernels on: one per kernel, at most one per core.
pub fn worker_threads(kernels: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(kernels).max(1)
}

/// Optimizes and emits every module on `threads` worker threads: PTX text for the GPU, a
/// hex-encoded object file for the host. The result keeps the modules' order; each kernel
/// comes with the milliseconds it took.
pub fn modules_to_code(
    modules: &[KernelModule],
    target: Target,
    threads: usize,
) -> Result<Vec<(KernelCode, f64)>, String> {
    // The largest modules first: with fewer threads than kernels, the fact table's kernel (by
    // far the largest) would otherwise start only after the dimension tables' builds, and the
    // query would wait for them and then for it.
    let mut order: Vec<usize> = (0..modules.len()).collect();
    order.sort_by_key(|&index| std::cmp::Reverse(modules[index].bitcode.len()));
    let next = AtomicUsize::new(0);
    /// A kernel's code and the milliseconds it took, or why it failed.
    type Compiled = Result<(String, f64), String>;
    let done: Mutex<Vec<Option<Compiled>>> = Mutex::new(modules.iter().map(|_| None).collect());
    let compile_one = |index: usize| {
        let started = Instant::now();
        let code = kernel_to_code(
            &modules[index],
            target,
            GpuPasses::Reduced,
            GpuCodegen::Quick,
        );
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if let Ok(mut done) = done.lock() {
            done[index] = Some(code.map(|text| (text, ms)));
        }
    };
    let work = || {
        while let Some(&index) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            compile_one(index);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    let done = done
        .into_inner()
        .map_err(|_| "a code generation thread failed".to_string())?;
    modules
        .iter()
        .zip(done)
        .map(|(module, code)| {
            let (text, ms) =
                code.unwrap_or_else(|| Err(format!("{} was not compiled", module.kernel)))?;
            let code = KernelCode {
                kernel: module.kernel.clone(),
                text,
            };
            Ok((code, ms))
        })
        .collect()
}

/// Optimizes and emits one kernel: PTX text, or a hex-encoded host object file. `codegen`
/// applies to the GPU only.
pub fn kernel_to_code(
    module: &KernelModule,
    target: Target,
    gpu_passes: GpuPasses,
    codegen: GpuCodegen,
) -> Result<String, String> {
    let context = Context::create();
    let llvm = module.parse(&context)?;
    let (gpu_passes, codegen) = if module.llvm_o1 {
        (GpuPasses::LlvmO1, GpuCodegen::Thorough)
    } else if module.packed_scan {
        (gpu_passes, GpuCodegen::Thorough)
    } else {
        (gpu_passes, codegen)
    };
    optimize_llvm_with(&llvm, target, gpu_passes)?;
    match target {
        Target::Nvptx { sm } => llvm_to_ptx(&llvm, sm, codegen),
        Target::Host => Ok(hex(&llvm_to_object(&llvm)?)),
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}
