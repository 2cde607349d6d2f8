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

fn machine(target: Target) -> Result<TargetMachine, String> {
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
                    // `-O2` code generation: on the SSB kernels it differs from `-O3` only in
                    // the block layout of the Q1.x kernels (which ptxas schedules again anyway)
                    // and takes a quarter less time (docs/PERFORMANCE.md).
                    OptimizationLevel::Default,
                    RelocMode::Default,
                    CodeModel::Default,
                )
                .ok_or_else(|| format!("LLVM cannot target sm_{sm}"))
        }
        Target::Host => {
            let triple = TargetMachine::get_default_triple();
            let llvm_target = LlvmTarget::from_triple(&triple).map_err(|e| e.to_string())?;
            let cpu = TargetMachine::get_host_cpu_name();
            let features = TargetMachine::get_host_cpu_features();
            llvm_target
                .create_target_machine(
                    &triple,
                    cpu.to_str().unwrap_or("generic"),
                    features.to_str().unwrap_or(""),
                    OptimizationLevel::Aggressive,
                    RelocMode::PIC,
                    CodeModel::Default,
                )
                .ok_or_else(|| "LLVM cannot target this host".to_string())
        }
    }
}

/// Sets the module's triple and data layout for `target`.
pub(super) fn prepare_module(module: &Module<'_>, target: Target) -> Result<(), Diagnostic> {
    let machine = machine(target).map_err(|e| Diagnostic::internal(Span::default(), e))?;
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    Ok(())
}

/// Runs LLVM's optimizer: inlines the primitives, promotes tile arrays to registers, unrolls
/// the item loops. GPU kernels take the `-O1` pipeline: their item loops are fully unrolled and
/// their tile arrays promoted at that level already, and on every SSB query `-O3` produced the
/// same PTX in a third more time (docs/PERFORMANCE.md). Host kernels take `-O3`, whose loop
/// vectorizer their long single-thread tiles need.
pub fn optimize_llvm(module: &Module<'_>, target: Target) -> Result<(), String> {
    let machine = machine(target)?;
    let pipeline = match target {
        Target::Nvptx { .. } => "default<O1>",
        Target::Host => "default<O3>",
    };
    module
        .run_passes(pipeline, &machine, PassBuilderOptions::create())
        .map_err(|e| format!("LLVM optimization failed: {e}"))
}

pub fn llvm_to_ptx(module: &Module<'_>, sm: u32) -> Result<String, String> {
    let machine = machine(Target::Nvptx { sm })?;
    let buffer = machine
        .write_to_memory_buffer(module, FileType::Assembly)
        .map_err(|e| format!("PTX emission failed: {e}"))?;
    Ok(String::from_utf8_lossy(buffer.as_slice())
        .trim_end_matches('\0')
        .to_string())
}

pub fn llvm_to_object(module: &Module<'_>) -> Result<Vec<u8>, String> {
    let machine = machine(Target::Host)?;
    let buffer = machine
        .write_to_memory_buffer(module, FileType::Object)
        .map_err(|e| format!("object emission failed: {e}"))?;
    Ok(buffer.as_slice().to_vec())
}
