//! The block-wide primitives kernels are made of. Each is an LLVM function, specialized for a
//! target, a tile shape and an element type, marked to be inlined into the kernels that call
//! it, and created in a module the first time a kernel asks for it. On the GPU a tile's arrays
//! live in registers once inlined; on the host the same code runs with one thread per tile.

pub mod chain;
pub mod dict_code;
pub mod group;
pub mod hash;
pub mod load;
pub mod math;
pub mod partition;
pub mod reduce;
pub mod scan;
pub mod sort;
pub mod store;
pub mod unpack;
pub mod unpack_fixed;

use inkwell::module::Linkage;
use inkwell::types::FunctionType;
use inkwell::values::FunctionValue;

use crate::emit::{CodegenResult, Emitter};

/// Returns the primitive `name` of the caller's module, creating it with `define` if needed.
/// `define` receives an emitter positioned in the new function's body.
pub fn primitive<'ctx, 'm>(
    caller: &Emitter<'ctx, 'm>,
    name: &str,
    ty: FunctionType<'ctx>,
    define: impl FnOnce(&Emitter<'ctx, 'm>) -> CodegenResult<()>,
) -> CodegenResult<FunctionValue<'ctx>> {
    let name = format!("{name}.{}.{}", caller.tile, caller.target);
    if let Some(existing) = caller.module.get_function(&name) {
        return Ok(existing);
    }
    let emitter = Emitter::new_function(
        caller.ctx,
        caller.module,
        caller.target,
        caller.tile,
        &name,
        ty,
        Linkage::Internal,
    )?;
    emitter.always_inline();
    define(&emitter)?;
    Ok(emitter.function)
}
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unpack_tests;
