//! A kernel's LLVM module: generated in a context of its own, checked, and kept as bitcode
//! until every kernel of the program is built and the modules are optimized and emitted.

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use tessera_grammar::{Diagnostic, Span};
use tessera_runtime::Target;

use super::targets::prepare_module;

/// One kernel's LLVM module, held as bitcode: kernels are built one after another (they share
/// the query's buffers and hash tables), then optimized and emitted in parallel, each in a
/// context of its own on a worker thread.
pub struct KernelModule {
    pub kernel: String,
    pub(super) bitcode: Vec<u8>,
    /// The kernel takes LLVM's own `-O1` and `-O2` code generation: it has loops whose trip
    /// counts are known only when it runs (over a probe's matches, over a sort's parts), since
    /// the reduced pipeline was checked against `-O1` on kernels without such loops, and such
    /// loops need `-O2`'s loop strength reduction and machine LICM (a chain walk at `-O0` took
    /// 16% longer, docs/PERFORMANCE.md); or it runs over a grouping's slots, whose key and
    /// slot arithmetic the reduced pipeline leaves otherwise than `-O1` does
    /// (tests/gpu_passes.rs).
    pub(super) llvm_o1: bool,
    /// The kernel decodes packed columns and probes no table: it takes `-O2` code generation,
    /// which the decoder's address arithmetic needs (decode-and-sum 0.726 -> 0.674 ms on an
    /// H100). Probing kernels keep `-O0`: there `-O2` was mixed (packed Q1.x 4-7% faster, Q3.x
    /// and Q4.3 10-15% slower; docs/PERFORMANCE.md).
    pub(super) packed_scan: bool,
}

impl KernelModule {
    /// Generates kernel `name` for `target` with `generate`, in a context and module of its
    /// own, checks the module and keeps its bitcode. It takes LLVM's `-O1` code generation
    /// unless its builder says otherwise (`query.rs` does, per pipeline).
    pub(super) fn generate<T>(
        name: &str,
        target: Target,
        span: Span,
        generate: impl for<'c> FnOnce(&'c Context, &Module<'c>) -> Result<T, Diagnostic>,
    ) -> Result<(KernelModule, T), Diagnostic> {
        let context = Context::create();
        let module = context.create_module(name);
        prepare_module(&module, target)?;
        let generated = generate(&context, &module)?;
        if let Err(message) = module.verify() {
            return Err(Diagnostic::internal(
                span,
                format!("generated LLVM IR is invalid: {message}"),
            ));
        }
        let kept = KernelModule {
            kernel: name.to_string(),
            bitcode: module.write_bitcode_to_memory().as_slice().to_vec(),
            llvm_o1: true,
            packed_scan: false,
        };
        Ok((kept, generated))
    }

    /// Reads the module back into `context`.
    pub fn parse<'ctx>(&self, context: &'ctx Context) -> Result<Module<'ctx>, String> {
        let buffer = MemoryBuffer::create_from_memory_range_copy(&self.bitcode, &self.kernel);
        Module::parse_bitcode_from_buffer(&buffer, context)
            .map_err(|e| format!("cannot read back the module of {}: {e}", self.kernel))
    }

    /// The module as LLVM assembly text.
    pub fn to_llvm_text(&self) -> Result<String, String> {
        let context = Context::create();
        let module = self.parse(&context)?;
        let text = module.print_to_string().to_string();
        Ok(text)
    }
}
