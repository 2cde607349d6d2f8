#![doc = include_str!("../ARCHITECTURE.md")]
//!
//! The compiler knows the language and the catalog's statistics; it knows nothing of how
//! columns are stored on disk or how kernels are launched.

pub mod analyze;
pub mod codegen;
pub mod columns;
pub mod decorrelate;
pub mod emit;
pub mod expr;
pub mod logical;
pub mod optimize;
pub mod physical;
pub mod script;
pub mod staging;
pub mod typed;

pub use analyze::ast_to_typed;
pub use logical::typed_to_logical;
pub use physical::logical_to_pipelines;
pub use script::{open_catalog, stdlib_tables, Compilation};
