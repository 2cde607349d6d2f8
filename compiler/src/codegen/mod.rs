//! Code generation: each pipeline becomes one kernel, a flat sequence of calls to the runtime's
//! block-wide primitives with the pipeline's expressions computed in between; each query becomes
//! a `QueryProgram` saying how to launch its kernels and read its result. `pipelines_to_llvm`
//! builds the module, `optimize_llvm` runs LLVM's optimizer over it, and `llvm_to_ptx` /
//! `llvm_to_object` produce the code the runtime loads.

mod expr;
mod kernel;
mod query;
mod sinks;
mod steps;
mod targets;

use inkwell::context::Context;
use inkwell::module::Module;
use tessera_grammar::Diagnostic;
use tessera_runtime::program::{Code, Program, QueryProgram, FORMAT_VERSION};
use tessera_runtime::{Target, TileShape};
use tessera_storage::Catalog;

use crate::physical::PhysicalQuery;

pub use targets::{llvm_to_object, llvm_to_ptx, optimize_llvm};

/// Builds one module holding every pipeline of `queries` as a kernel for `target` with the
/// target's default tile shape, and the launch plan of each query.
pub fn pipelines_to_llvm<'ctx>(
    context: &'ctx Context,
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
) -> Result<(Module<'ctx>, Vec<QueryProgram>), Diagnostic> {
    pipelines_to_llvm_tiled(context, queries, catalog, target, target.default_tile())
}

/// Like `pipelines_to_llvm`, with kernels over tiles of `tile`.
pub fn pipelines_to_llvm_tiled<'ctx>(
    context: &'ctx Context,
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
    tile: TileShape,
) -> Result<(Module<'ctx>, Vec<QueryProgram>), Diagnostic> {
    let module = context.create_module("tessera");
    targets::prepare_module(&module, target)?;
    let mut programs = Vec::with_capacity(queries.len());
    for (index, query) in queries.iter().enumerate() {
        programs.push(query::query_to_llvm(
            context, &module, index, query, catalog, target, tile,
        )?);
    }
    if let Err(message) = module.verify() {
        let span = queries.first().map(|q| q.span).unwrap_or_default();
        return Err(Diagnostic::internal(
            span,
            format!("generated LLVM IR is invalid: {message}"),
        ));
    }
    Ok((module, programs))
}

/// Compiles pipelines all the way to a program the runtime can execute.
pub fn pipelines_to_program(
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
) -> Result<Program, Diagnostic> {
    pipelines_to_program_tiled(queries, catalog, target, target.default_tile())
}

/// How long each step of code generation took, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct CodegenTimes {
    /// Building the LLVM module.
    pub build_ms: f64,
    /// LLVM's optimizer.
    pub optimize_ms: f64,
    /// PTX or object emission.
    pub emit_ms: f64,
}

/// Like `pipelines_to_program`, with kernels over tiles of `tile`.
pub fn pipelines_to_program_tiled(
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
    tile: TileShape,
) -> Result<Program, Diagnostic> {
    pipelines_to_program_timed(queries, catalog, target, tile, &mut CodegenTimes::default())
}

/// Like `pipelines_to_program_tiled`, recording how long each step took.
pub fn pipelines_to_program_timed(
    queries: &[PhysicalQuery],
    catalog: &Catalog,
    target: Target,
    tile: TileShape,
    times: &mut CodegenTimes,
) -> Result<Program, Diagnostic> {
    let since = |start: std::time::Instant| start.elapsed().as_secs_f64() * 1e3;
    let span = queries.first().map(|q| q.span).unwrap_or_default();
    let warp_multiple = tile.threads > 0 && tile.threads.is_multiple_of(32) && tile.threads <= 1024;
    // GPU items are unrolled into registers, so their number stays small.
    let fits = if target.is_gpu() {
        warp_multiple && (1..=64).contains(&tile.items_per_thread)
    } else {
        tile.threads == 1 && tile.items_per_thread > 0
    };
    if !fits {
        return Err(Diagnostic::unsupported(
            span,
            format!(
                "tile shape {tile} does not fit {target}: GPU tiles need a multiple of 32 threads up to 1024 and at most 64 items each; host tiles have 1 thread"
            ),
        ));
    }
    let started = std::time::Instant::now();
    let context = Context::create();
    let (module, queries_programs) =
        pipelines_to_llvm_tiled(&context, queries, catalog, target, tile)?;
    times.build_ms = since(started);
    let started = std::time::Instant::now();
    optimize_llvm(&module, target).map_err(|e| Diagnostic::internal(span, e))?;
    times.optimize_ms = since(started);
    let started = std::time::Instant::now();
    let code = match target {
        Target::Nvptx { sm } => {
            Code::Ptx(llvm_to_ptx(&module, sm).map_err(|e| Diagnostic::internal(span, e))?)
        }
        Target::Host => Code::HostObject(hex(
            &llvm_to_object(&module).map_err(|e| Diagnostic::internal(span, e))?
        )),
    };
    times.emit_ms = since(started);
    Ok(Program {
        format: FORMAT_VERSION,
        target,
        code,
        queries: queries_programs,
    })
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
