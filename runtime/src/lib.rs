//! Tessera's runtime: the block-wide primitives that generated kernels call (as LLVM IR, for the
//! GPU and the host), the executable form of a compiled query, and the executors that run it on
//! an NVIDIA GPU (through the CUDA driver) or on the host's cores, with the device memory,
//! hash tables and result buffers they need.
//!
//! It knows nothing of the query language: a compiled program says which columns to bind, which
//! buffers to allocate, which kernels to launch and how to read the result back.

pub mod emit;
pub mod exec;
pub mod output;
pub mod pattern;
pub mod primitives;
pub mod program;
pub mod result;
pub mod tile;
pub mod wide_atomics;

pub use emit::{CodegenError, CodegenResult, Emitter, KernelArgs};
pub use tile::{Target, TileShape};
