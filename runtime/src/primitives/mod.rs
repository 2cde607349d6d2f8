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
/// `define` receives an emitter positioned in the new function's body. It is always inlined.
pub fn primitive<'ctx, 'm>(
    caller: &Emitter<'ctx, 'm>,
    name: &str,
    ty: FunctionType<'ctx>,
    define: impl FnOnce(&Emitter<'ctx, 'm>) -> CodegenResult<()>,
) -> CodegenResult<FunctionValue<'ctx>> {
    primitive_called(caller, name, ty, Inlining::Always, define)
}

/// Whether calls of a primitive are inlined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inlining {
    /// Always: the fastest code, one copy per call.
    Always,
    /// Never: one copy however many calls, for kernels that would otherwise hold hundreds. The
    /// function may synchronize the block, so it is marked convergent.
    Never,
}

/// [`primitive`], inlined or called as `inlining` says.
pub fn primitive_called<'ctx, 'm>(
    caller: &Emitter<'ctx, 'm>,
    name: &str,
    ty: FunctionType<'ctx>,
    inlining: Inlining,
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
    match inlining {
        Inlining::Always => emitter.always_inline(),
        Inlining::Never => {
            for attribute in ["noinline", "convergent"] {
                let kind = inkwell::attributes::Attribute::get_named_enum_kind_id(attribute);
                emitter.function.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    emitter.ctx.create_enum_attribute(kind, 0),
                );
            }
        }
    }
    define(&emitter)?;
    Ok(emitter.function)
}
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unpack_tests;
