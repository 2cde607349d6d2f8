//! Every stage of the compiler as text: the `--emit` forms, shared by the command line and
//! the snapshot tests.

use tessera_grammar::{
    ast_to_string, source_to_ast, source_to_tokens, tokens_to_string, Diagnostic,
};
use tessera_runtime::{Target, TileShape};
use tessera_storage::Catalog;

use crate::codegen::{modules_to_code, pipelines_to_modules, worker_threads, KernelModule};
use crate::logical::logical_to_string;
use crate::physical::{physical_to_string, PartitionJoins};
use crate::script::Compilation;
use crate::typed::typed_to_string;

/// A stage that can be printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Tokens,
    Ast,
    Typed,
    Logical,
    /// With `verbose`, the plan after each pass.
    Optimized,
    Physical,
    /// The compiled program: each kernel's launch and how it reads each column, the buffers,
    /// the host's work and how the result is read back.
    Kernels,
    /// The module before optimization: kernels as calls to block-wide primitives.
    Llvm,
    Ptx,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Tokens,
        Stage::Ast,
        Stage::Typed,
        Stage::Logical,
        Stage::Optimized,
        Stage::Physical,
        Stage::Kernels,
        Stage::Llvm,
        Stage::Ptx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Tokens => "tokens",
            Stage::Ast => "ast",
            Stage::Typed => "typed",
            Stage::Logical => "logical",
            Stage::Optimized => "optimized",
            Stage::Physical => "physical",
            Stage::Kernels => "kernels",
            Stage::Llvm => "llvm",
            Stage::Ptx => "ptx",
        }
    }

    /// Whether printing the stage needs the catalog (everything after parsing does).
    pub fn needs_data(self) -> bool {
        !matches!(self, Stage::Tokens | Stage::Ast)
    }
}

#[derive(Debug)]
pub enum EmitError {
    /// Errors in the script.
    Script(Vec<Diagnostic>),
    /// A stage after parsing was asked for without a catalog.
    NeedsData,
    /// PTX was asked for a host target.
    NotGpu,
}

impl From<Vec<Diagnostic>> for EmitError {
    fn from(diagnostics: Vec<Diagnostic>) -> EmitError {
        EmitError::Script(diagnostics)
    }
}

impl From<Diagnostic> for EmitError {
    fn from(diagnostic: Diagnostic) -> EmitError {
        EmitError::Script(vec![diagnostic])
    }
}

/// The text of `stage` for a script, each query's kernels over the tiles its columns'
/// encodings take.
pub fn emit(
    source: &str,
    stage: Stage,
    catalog: Option<&Catalog>,
    target: Target,
    verbose: bool,
) -> Result<String, EmitError> {
    emit_for_tile(
        source,
        stage,
        catalog,
        target,
        None,
        verbose,
        PartitionJoins::default(),
    )
}

/// The text of `stage` for a script whose kernels use tiles of `tile` (where `None`, each
/// query's from its columns' encodings).
pub fn emit_for_tile(
    source: &str,
    stage: Stage,
    catalog: Option<&Catalog>,
    target: Target,
    tile: Option<TileShape>,
    verbose: bool,
    partition_joins: PartitionJoins,
) -> Result<String, EmitError> {
    if stage == Stage::Tokens {
        return Ok(tokens_to_string(&source_to_tokens(source)?, source));
    }
    let ast = source_to_ast(source)?;
    if stage == Stage::Ast {
        return Ok(ast_to_string(&ast));
    }
    let catalog = catalog.ok_or(EmitError::NeedsData)?;
    let ast = crate::decorrelate::rewrite(ast, catalog);
    if matches!(
        stage,
        Stage::Physical | Stage::Kernels | Stage::Llvm | Stage::Ptx
    ) {
        if let Some(staged) =
            crate::staging::split_unless_planned(&ast, catalog, partition_joins, &mut |n| {
                format!("stage#{n}")
            })
        {
            return Ok(crate::staging::describe(&staged, source));
        }
    }
    let compilation = match stage {
        Stage::Typed | Stage::Logical | Stage::Optimized => Compilation::run_logical(ast, catalog)?,
        _ => Compilation::run_with(ast, catalog, partition_joins)?,
    };
    Ok(match stage {
        Stage::Typed => typed_to_string(&compilation.typed),
        Stage::Logical => logical_to_string(&compilation.logical),
        Stage::Optimized if verbose => compilation
            .trace
            .iter()
            .map(|step| format!("--- after {} ---\n{}", step.pass, step.plan))
            .collect(),
        Stage::Optimized => logical_to_string(&compilation.optimized),
        Stage::Physical => physical_to_string(&compilation.physical),
        Stage::Kernels | Stage::Llvm | Stage::Ptx | Stage::Tokens | Stage::Ast => {
            let span = compilation
                .physical
                .first()
                .map(|q| q.span)
                .unwrap_or_default();
            let internal = |e: String| Diagnostic::internal(span, e);
            let (modules, programs) =
                pipelines_to_modules(&compilation.physical, catalog, target, tile)?;
            if stage == Stage::Kernels {
                return Ok(programs
                    .iter()
                    .enumerate()
                    .map(|(index, program)| format!("query {index}\n{}", program.describe()))
                    .collect::<Vec<_>>()
                    .join("\n"));
            }
            if stage == Stage::Llvm {
                return Ok(modules
                    .iter()
                    .map(KernelModule::to_llvm_text)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(internal)?
                    .join("\n"));
            }
            if !target.is_gpu() {
                return Err(EmitError::NotGpu);
            }
            modules_to_code(&modules, target, worker_threads(modules.len()))
                .map_err(internal)?
                .into_iter()
                .map(|(unit, _)| unit.text)
                .collect::<Vec<_>>()
                .join("\n")
        }
    })
}
