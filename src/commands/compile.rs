//! `tessera compile`: runs the compiler up to the requested stage and prints it, or writes the
//! compiled program to a `.tqx` file.

use std::path::Path;

use inkwell::context::Context;
use tessera_compiler::codegen::{llvm_to_ptx, optimize_llvm, pipelines_to_llvm};
use tessera_compiler::logical::logical_to_string;
use tessera_compiler::physical::physical_to_string;
use tessera_compiler::script::OpenError;
use tessera_compiler::typed::typed_to_string;
use tessera_compiler::{open_catalog, Compilation};
use tessera_grammar::{ast_to_string, source_to_ast, source_to_tokens, tokens_to_string};
use tessera_runtime::Target;
use tessera_storage::Catalog;

use super::session::compile_script;
use crate::failure::Failure;
use crate::{CompileArgs, Emit};

pub fn run(args: &CompileArgs) -> Result<(), Failure> {
    let script = Script::read(&args.script)?;
    if args.emit.is_none() && args.output.is_none() {
        return Err(Failure::Message("say what to produce: --emit STAGE, or -o FILE.tqx".into()));
    }
    if let Some(stage) = args.emit {
        let text = emit(&script, stage, args.data.as_deref(), args.verbose, args.target)?;
        print!("{text}");
    }
    if let Some(output) = &args.output {
        let data = needs_data(args.data.as_deref(), "-o")?;
        let compiled = compile_script(&script, data, args.target)?;
        let json = serde_json::to_string(&compiled.program).map_err(|e| Failure::Message(e.to_string()))?;
        std::fs::write(output, json).map_err(|e| Failure::Message(format!("cannot write {}: {e}", output.display())))?;
        eprintln!(
            "compiled {} for {} in {:.1} ms: {}",
            args.script.display(),
            args.target,
            compiled.compile_ms,
            output.display()
        );
    }
    Ok(())
}

/// A script's name (as shown in reports) and its text.
pub struct Script {
    pub name: String,
    pub source: String,
}

impl Script {
    pub fn read(path: &Path) -> Result<Script, Failure> {
        let source = std::fs::read_to_string(path)
            .map_err(|e| Failure::Message(format!("cannot read {}: {e}", path.display())))?;
        Ok(Script {
            name: path.display().to_string(),
            source,
        })
    }

    pub fn fail(&self, diagnostics: Vec<tessera_grammar::Diagnostic>) -> Failure {
        Failure::Script {
            name: self.name.clone(),
            source: self.source.clone(),
            diagnostics,
        }
    }
}

fn needs_data<'a>(data: Option<&'a Path>, what: &str) -> Result<&'a Path, Failure> {
    data.ok_or_else(|| Failure::Message(format!("{what} needs the data the script reads: pass --data DIR")))
}

/// The text of one stage of `script`.
pub fn emit(script: &Script, stage: Emit, data: Option<&Path>, verbose: bool, target: Target) -> Result<String, Failure> {
    if stage == Emit::Tokens {
        let tokens = source_to_tokens(&script.source).map_err(|d| script.fail(d))?;
        return Ok(tokens_to_string(&tokens, &script.source));
    }
    let ast = source_to_ast(&script.source).map_err(|d| script.fail(d))?;
    if stage == Emit::Ast {
        return Ok(ast_to_string(&ast));
    }
    let name = format!("--emit {}", format!("{stage:?}").to_lowercase());
    let catalog = open(script, &ast, needs_data(data, &name)?)?;
    let compilation = Compilation::run(ast, &catalog).map_err(|d| script.fail(d))?;
    match stage {
        Emit::Typed => Ok(typed_to_string(&compilation.typed)),
        Emit::Logical => Ok(logical_to_string(&compilation.logical)),
        Emit::Optimized if verbose => Ok(compilation
            .trace
            .iter()
            .map(|step| format!("--- after {} ---\n{}", step.pass, step.plan))
            .collect()),
        Emit::Optimized => Ok(logical_to_string(&compilation.optimized)),
        Emit::Physical => Ok(physical_to_string(&compilation.physical)),
        Emit::Llvm | Emit::Ptx | Emit::Tokens | Emit::Ast => code(script, stage, &compilation, &catalog, target),
    }
}

/// LLVM IR or PTX of the compiled pipelines.
fn code(script: &Script, stage: Emit, compilation: &Compilation, catalog: &Catalog, target: Target) -> Result<String, Failure> {
    let context = Context::create();
    let (module, _) =
        pipelines_to_llvm(&context, &compilation.physical, catalog, target).map_err(|d| script.fail(vec![d]))?;
    if stage != Emit::Ptx {
        return Ok(module.print_to_string().to_string());
    }
    let Target::Nvptx { sm } = target else {
        return Err(Failure::Message("--emit ptx needs a GPU target, such as --target sm_90".into()));
    };
    optimize_llvm(&module, target).map_err(Failure::Message)?;
    llvm_to_ptx(&module, sm).map_err(Failure::Message)
}

pub fn open(script: &Script, ast: &tessera_grammar::ast::Script, data: &Path) -> Result<Catalog, Failure> {
    open_catalog(ast, data).map_err(|e| match e {
        OpenError::Declarations(d) => script.fail(d),
        OpenError::Storage(e) => Failure::Message(e.to_string()),
    })
}
