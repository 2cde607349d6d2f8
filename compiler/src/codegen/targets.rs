//! LLVM targets: the data layout and triple of each, the optimization pipeline, and emitting
//! PTX text or a host object file.

use std::sync::OnceLock;

use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetMachine,
    TargetTriple,
};
use inkwell::OptimizationLevel;
use tessera_grammar::{Diagnostic, Span};
use tessera_runtime::Target;

const NVPTX_TRIPLE: &str = "nvptx64-nvidia-cuda";
/// PTX ISA 8.0: loaded by every driver that supports sm_90.
const PTX_FEATURES: &str = "+ptx80";

/// Registers LLVM's targets once per process, before any thread asks for a target machine.
fn initialize() -> Result<(), String> {
    static NATIVE: OnceLock<Result<(), String>> = OnceLock::new();
    NATIVE
        .get_or_init(|| {
            LlvmTarget::initialize_nvptx(&InitializationConfig::default());
            LlvmTarget::initialize_native(&InitializationConfig::default())
        })
        .clone()
}

/// LLVM's machine for `target`; `codegen` applies to the GPU (host code is always `-O3`).
fn machine(target: Target, codegen: GpuCodegen) -> Result<TargetMachine, String> {
    initialize()?;
    match target {
        Target::Nvptx { sm } => {
            let triple = TargetTriple::create(NVPTX_TRIPLE);
            let llvm_target = LlvmTarget::from_triple(&triple).map_err(|e| e.to_string())?;
            llvm_target
                .create_target_machine(
                    &triple,
                    &format!("sm_{sm}"),
                    PTX_FEATURES,
                    match codegen {
                        GpuCodegen::Quick => OptimizationLevel::None,
                        GpuCodegen::Thorough => OptimizationLevel::Default,
                    },
                    RelocMode::Default,
                    CodeModel::Default,
                )
                .ok_or_else(|| format!("LLVM cannot target sm_{sm}"))
        }
        Target::Host => host_machine(OptimizationLevel::Aggressive),
    }
}

/// LLVM's machine for this host, generating code at `level`.
fn host_machine(level: OptimizationLevel) -> Result<TargetMachine, String> {
    initialize()?;
    let triple = TargetMachine::get_default_triple();
    let llvm_target = LlvmTarget::from_triple(&triple).map_err(|e| e.to_string())?;
    let cpu = TargetMachine::get_host_cpu_name();
    let features = TargetMachine::get_host_cpu_features();
    llvm_target
        .create_target_machine(
            &triple,
            cpu.to_str().unwrap_or("generic"),
            features.to_str().unwrap_or(""),
            level,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| "LLVM cannot target this host".to_string())
}

/// Sets the module's triple and data layout for `target`.
pub(super) fn prepare_module(module: &Module<'_>, target: Target) -> Result<(), Diagnostic> {
    let machine =
        machine(target, GpuCodegen::Quick).map_err(|e| Diagnostic::internal(Span::default(), e))?;
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    Ok(())
}

/// The part of `-O2` code generation that changes the machine code ptxas makes, run by the
/// optimizer so that code generation itself can run at `-O0` (`GpuCodegen::Quick`): loads and
/// stores in their own address space instead of generic ones; address arithmetic split into a
/// shared base and constant offsets, strength-reduced and reassociated across the unrolled
/// items; a hash table slot's two words read with one vector load; address computations sunk
/// next to their loads; and the empty blocks that leaves behind removed.
macro_rules! FOR_PTX {
    () => {
        concat!(
            "function(infer-address-spaces,separate-const-offset-from-gep,slsr,early-cse,",
            "nary-reassociate,early-cse,load-store-vectorizer,codegenprepare,simplifycfg)"
        )
    };
}

/// The optimizer's part of [`GPU_PASSES`], shared with [`LARGE_GPU_PASSES`].
macro_rules! GPU_FUNCTION_PASSES {
    () => {
        concat!(
            "function(nvvm-intr-range,",
            "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;no-switch-range-to-icmp;",
            "no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts;",
            "speculate-blocks;",
            "simplify-cond-branch;no-speculate-unpredictables>,",
            "sroa<modify-cfg>,early-cse<>),",
            "ipsccp,",
            // The arguments every call of a reduction passes alike (an aggregate that sees
            // only nulls reduces its identity), as `-O1` drops them.
            "deadargelim,",
            "function(instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>),",
            "always-inline,",
            "function(sroa<modify-cfg>,early-cse<memssa>,",
            "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>,reassociate,",
            "loop-mssa(loop-rotate<header-duplication;no-prepare-for-lto>,licm<allowspeculation>),",
            "loop(indvars,loop-deletion),",
            "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>,",
            "simplifycfg<bonus-inst-threshold=1;forward-switch-cond;switch-range-to-icmp;",
            "switch-to-lookup;no-keep-loops;hoist-common-insts;sink-common-insts;speculate-blocks;",
            "simplify-cond-branch;no-speculate-unpredictables>,",
            "vector-combine,sccp,bdce,",
            "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>,",
            "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>,",
            "loop-mssa(licm<allowspeculation>),",
            // Alignments of shared arrays, which `-O1` infers late and the code generator uses.
            "infer-alignment),",
            // Shared arrays a kernel only writes (a packed column staged for a value no row needs).
            "globalopt,",
        )
    };
}

/// LLVM's `-O1` function simplification, reduced to the passes that change Tessera's GPU
/// kernels. The item loops arrive unrolled and every primitive is marked always-inline, so of
/// `default<O1>` only these matter: clean-up before inlining, inlining, scalar replacement of
/// the tile arrays, combining, hoisting loop invariants out of the loop over tiles, ranges
/// propagated and bits nothing reads dropped (`sccp`, `bdce`: with a packed column's reference
/// compiled in, `-O1` proves its values non-negative and simplifies what they feed), and
/// dropping stores to shared arrays nothing reads. A pass
/// was dropped only when every example and every conformance script compiled to the same PTX
/// without it; `gpu_passes_match_llvm_o1` in `tests/` checks this still holds. It takes 40% less
/// time than `default<O1>` (docs/PERFORMANCE.md).
const GPU_PASSES: &str = concat!(GPU_FUNCTION_PASSES!(), FOR_PTX!());

/// For large GPU modules ([`LARGE_GPU_MODULE`]): [`GPU_PASSES`] without `codegenprepare` and
/// the strength reduction and reassociation of addresses (`slsr`, `nary-reassociate`), which
/// search earlier candidates for each address.
const LARGE_GPU_PASSES: &str = concat!(
    GPU_FUNCTION_PASSES!(),
    "function(infer-address-spaces,separate-const-offset-from-gep,early-cse,",
    "load-store-vectorizer,simplifycfg)"
);

/// How much work LLVM's NVPTX code generator does after the optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuCodegen {
    /// `-O0`, what Tessera emits: with `FOR_PTX` run by the optimizer, the rest of `-O2` code
    /// generation (copy coalescing, machine CSE and LICM, scheduling, block placement) is work
    /// ptxas does again, and it was two thirds of a fact-table kernel's LLVM time, four times
    /// what `-O0` takes (docs/PERFORMANCE.md).
    Quick,
    /// `-O2`: tests compare two optimizer pipelines through it, since their outputs can differ
    /// by copies and empty blocks that it removes and `-O0` keeps.
    Thorough,
}

/// Which optimization pipeline GPU kernels go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuPasses {
    /// Tessera's reduced pipeline, the default.
    Reduced,
    /// LLVM's own `default<O1>`, the reference the reduced one is checked against.
    LlvmO1,
}

/// Instructions in a host module (before optimization) above which it takes
/// [`LARGE_HOST_PASSES`] and `-O0` code generation. Each operation of a host kernel is a loop
/// over the tile's items, and `-O3`'s loop passes and register allocation take time that grows
/// with the square of the number of loops in a function (scalar evolution asks which earlier
/// loops guard each one): 250 computed columns (10,000 instructions) took 14 s, 1,000 took
/// minutes. The largest SSB kernel has 1,000.
const LARGE_HOST_MODULE: usize = 4_000;

/// Instructions in a GPU module above which it takes [`LARGE_GPU_PASSES`]: `codegenprepare`
/// grows with the square of a kernel's blocks (4,000 computed columns: 24 s, 9 s without it and
/// the address passes). The largest SSB kernel has 5,600, its items unrolled.
const LARGE_GPU_MODULE: usize = 20_000;

/// Whether `module` is large for `target` (see [`LARGE_HOST_MODULE`], [`LARGE_GPU_MODULE`]).
fn is_large(module: &Module<'_>, target: Target) -> bool {
    let limit = match target {
        Target::Host => LARGE_HOST_MODULE,
        Target::Nvptx { .. } => LARGE_GPU_MODULE,
    };
    instruction_count(module) > limit
}

/// For large host modules: inlining, scalar replacement, combining and hoisting, as in the GPU
/// pipeline, without the loop passes (vectorizing, induction variables, strength reduction)
/// whose time grows with the square of the kernel's size. One round of combining need not
/// reach a fixed point, which is no error (`no-verify-fixpoint`, as in the GPU pipeline).
const LARGE_HOST_PASSES: &str = concat!(
    "always-inline,",
    "function(sroa<modify-cfg>,early-cse<memssa>,",
    "instcombine<max-iterations=1;no-verify-fixpoint>,",
    "simplifycfg,loop-mssa(licm<allowspeculation>),",
    "instcombine<max-iterations=1;no-verify-fixpoint>,simplifycfg)"
);

/// The number of instructions in `module`'s functions.
fn instruction_count(module: &Module<'_>) -> usize {
    module
        .get_functions()
        .flat_map(|function| function.get_basic_block_iter())
        .map(|block| block.get_instructions().count())
        .sum()
}

/// Runs LLVM's optimizer: inlines the primitives, promotes tile arrays to registers, hoists
/// what the loop over tiles does not change. GPU kernels take the reduced `-O1` pipeline above:
/// on every SSB query `-O3` produced the same PTX as `-O1` in a third more time. Host kernels
/// take `-O3`, whose loop vectorizer their long single-thread tiles need, without LLVM's loop
/// unrolling.
pub fn optimize_llvm(module: &Module<'_>, target: Target) -> Result<(), String> {
    optimize_llvm_with(module, target, GpuPasses::Reduced)
}

/// [`optimize_llvm`] with a choice of GPU pipeline.
pub fn optimize_llvm_with(
    module: &Module<'_>,
    target: Target,
    gpu: GpuPasses,
) -> Result<(), String> {
    let machine = machine(target, GpuCodegen::Quick)?;
    let large = is_large(module, target);
    let pipeline = match (target, gpu) {
        (Target::Nvptx { .. }, GpuPasses::Reduced) if large => LARGE_GPU_PASSES,
        (Target::Nvptx { .. }, GpuPasses::Reduced) => GPU_PASSES,
        (Target::Nvptx { .. }, GpuPasses::LlvmO1) => concat!("default<O1>,", FOR_PTX!()),
        (Target::Host, _) if large => LARGE_HOST_PASSES,
        (Target::Host, _) => "default<O3>",
    };
    let options = PassBuilderOptions::create();
    // Code generation unrolls the loops over a tile's items already; LLVM's unroller then only
    // grows code, superlinearly in the kernel's size (250 computed columns took 14 s with it,
    // 3 s without), and the SSB kernels on the CPU run as fast or faster without it.
    options.set_loop_unrolling(target != Target::Host);
    module
        .run_passes(pipeline, &machine, options)
        .map_err(|e| format!("LLVM optimization failed: {e}"))
}

pub fn llvm_to_ptx(module: &Module<'_>, sm: u32, codegen: GpuCodegen) -> Result<String, String> {
    let machine = machine(Target::Nvptx { sm }, codegen)?;
    let buffer = machine
        .write_to_memory_buffer(module, FileType::Assembly)
        .map_err(|e| format!("PTX emission failed: {e}"))?;
    Ok(String::from_utf8_lossy(buffer.as_slice())
        .trim_end_matches('\0')
        .to_string())
}

/// Host machine code for `module`. A large module is generated at `-O0` (fast instruction
/// selection and register allocation): at `-O3`, register allocation and loop strength
/// reduction take time that grows with the square of a kernel's size, as its optimizer does
/// ([`LARGE_HOST_MODULE`]).
pub fn llvm_to_object(module: &Module<'_>) -> Result<Vec<u8>, String> {
    let level = if is_large(module, Target::Host) {
        OptimizationLevel::None
    } else {
        OptimizationLevel::Aggressive
    };
    let machine = host_machine(level)?;
    let buffer = machine
        .write_to_memory_buffer(module, FileType::Object)
        .map_err(|e| format!("object emission failed: {e}"))?;
    Ok(buffer.as_slice().to_vec())
}
