//! Loading a host object file into this process with LLVM's ORC JIT linker: no compilation
//! happens here, only linking, so a precompiled artifact runs without LLVM's code generator.

use std::ffi::{CStr, CString};

use inkwell::llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy;
use inkwell::llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use inkwell::llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcDisposeLLJIT, LLVMOrcLLJITAddObjectFile,
    LLVMOrcLLJITGetGlobalPrefix, LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup, LLVMOrcLLJITRef,
};
use inkwell::llvm_sys::orc2::{
    LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess, LLVMOrcJITDylibAddGenerator,
};
use inkwell::targets::{InitializationConfig, Target};

use super::RuntimeError;

/// A host kernel: `(parameter block, first tile, end tile)`.
pub type HostKernel = unsafe extern "C" fn(*const u64, i64, i64);

pub struct LoadedObject {
    jit: LLVMOrcLLJITRef,
}

// The JIT's session is internally synchronized; looked-up functions are plain machine code.
unsafe impl Send for LoadedObject {}
unsafe impl Sync for LoadedObject {}

impl LoadedObject {
    /// Links `objects` into one JIT library; their only shared names are internal ones.
    pub fn load(objects: &[Vec<u8>]) -> Result<LoadedObject, RuntimeError> {
        Target::initialize_native(&InitializationConfig::default()).map_err(RuntimeError::Load)?;
        let mut jit: LLVMOrcLLJITRef = std::ptr::null_mut();
        // SAFETY: the C API is used as documented; every error is checked, and the JIT is
        // disposed of by `Drop` once created.
        unsafe {
            check(LLVMOrcCreateLLJIT(&mut jit, std::ptr::null_mut()))?;
            let loaded = LoadedObject { jit };
            let dylib = LLVMOrcLLJITGetMainJITDylib(jit);
            // Symbols the object may use from the process (`memset` and friends).
            let mut generator = std::ptr::null_mut();
            check(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                &mut generator,
                LLVMOrcLLJITGetGlobalPrefix(jit),
                None,
                std::ptr::null_mut(),
            ))?;
            LLVMOrcJITDylibAddGenerator(dylib, generator);
            let name = CString::new("tessera").unwrap_or_default();
            for object in objects {
                let buffer = LLVMCreateMemoryBufferWithMemoryRangeCopy(
                    object.as_ptr().cast(),
                    object.len(),
                    name.as_ptr(),
                );
                check(LLVMOrcLLJITAddObjectFile(jit, dylib, buffer))?;
            }
            Ok(loaded)
        }
    }

    /// The address of a function in the loaded object.
    pub fn symbol(&self, name: &str) -> Result<u64, RuntimeError> {
        let symbol = CString::new(name)
            .map_err(|_| RuntimeError::Malformed(format!("bad symbol name {name:?}")))?;
        let mut address = 0u64;
        // SAFETY: `self.jit` is live; the lookup only reads the symbol table.
        unsafe { check(LLVMOrcLLJITLookup(self.jit, &mut address, symbol.as_ptr()))? };
        if address == 0 {
            return Err(RuntimeError::Load(format!("{name} not found")));
        }
        Ok(address)
    }

    pub fn kernel(&self, name: &str) -> Result<HostKernel, RuntimeError> {
        let symbol = CString::new(name)
            .map_err(|_| RuntimeError::Malformed(format!("bad kernel name {name:?}")))?;
        let mut address = 0u64;
        // SAFETY: `self.jit` is live; the address is only turned into a function if non-zero,
        // and kernels are emitted with exactly the `HostKernel` signature.
        unsafe {
            check(LLVMOrcLLJITLookup(self.jit, &mut address, symbol.as_ptr()))?;
            if address == 0 {
                return Err(RuntimeError::Load(format!("kernel {name} not found")));
            }
            Ok(std::mem::transmute::<usize, HostKernel>(address as usize))
        }
    }
}

impl Drop for LoadedObject {
    fn drop(&mut self) {
        // SAFETY: created by `LLVMOrcCreateLLJIT` and disposed of once.
        unsafe {
            let error = LLVMOrcDisposeLLJIT(self.jit);
            let _ = check(error);
        }
    }
}

/// Turns an LLVM error into ours, consuming it.
unsafe fn check(error: LLVMErrorRef) -> Result<(), RuntimeError> {
    if error.is_null() {
        return Ok(());
    }
    let message = LLVMGetErrorMessage(error);
    let text = CStr::from_ptr(message).to_string_lossy().into_owned();
    LLVMDisposeErrorMessage(message);
    Err(RuntimeError::Load(text))
}
