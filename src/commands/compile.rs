//! `tessera compile`: runs the compiler up to the requested stage and prints it, or writes the
//! compiled program to a `.tqx` file.

use std::path::Path;

use tessera_compiler::emit::{emit_for_tile as compiler_emit, EmitError};
use tessera_compiler::open_catalog;
use tessera_compiler::script::OpenError;
use tessera_grammar::source_to_ast;
use tessera_runtime::Target;
use tessera_storage::Catalog;

use super::session::{compile_script, compression_for, CompileOptions};
use crate::failure::Failure;
use crate::{CompileArgs, Emit};

pub fn run(args: &CompileArgs) -> Result<(), Failure> {
    let script = Script::read(&args.script)?;
    if args.emit.is_none() && args.output.is_none() {
        return Err(Failure::Message(
            "say what to produce: --emit STAGE, or -o FILE.tqx".into(),
        ));
    }
    let target = args.target.unwrap_or_else(|| default_target(args.emit));
    let options = CompileOptions {
        target,
        tile: args.tile,
        compress: compression_for(target, args.compress),
        partition_joins: args.partition_joins,
        prepare: true,
        gpu_memory: None,
    };
    if let Some(stage) = args.emit {
        let text = emit(&script, stage, args.data.as_deref(), args.verbose, &options)?;
        print!("{text}");
    }
    if let Some(output) = &args.output {
        let data = needs_data(args.data.as_deref(), "-o")?;
        let mut compiled = compile_script(&script, data, &options, false)?;
        let linked = link_for_this_gpu(&mut compiled.program);
        let bytes = compiled
            .program
            .to_file(super::run::ARTIFACT)
            .map_err(|e| Failure::Message(e.to_string()))?;
        std::fs::write(output, bytes)
            .map_err(|e| Failure::Message(format!("cannot write {}: {e}", output.display())))?;
        eprintln!(
            "compiled {} for {} in {:.1} ms (plan {:.1}, {}): {}{}",
            args.script.display(),
            target,
            compiled.compile_ms,
            compiled.plan_ms,
            compiled.codegen,
            output.display(),
            linked
        );
    }
    Ok(())
}

/// The target when none is named: this machine's GPU, else the host, except that PTX is asked
/// for a GPU (`sm_90`).
fn default_target(emit: Option<Emit>) -> Target {
    match tessera_runtime::exec::gpu::probe() {
        Ok(gpu) => Target::Nvptx { sm: gpu.sm },
        Err(_) if emit == Some(Emit::Ptx) => Target::Nvptx { sm: 90 },
        Err(_) => Target::Host,
    }
}

/// Adds the cubins this machine's GPU links from the program's PTX, when the program is for
/// that GPU, so the artifact loads there without compiling; says what was done.
fn link_for_this_gpu(program: &mut tessera_runtime::program::Program) -> String {
    use tessera_runtime::exec::gpu::{probe, GpuBackend};
    use tessera_runtime::program::Code;
    let (Code::Ptx(ptx), tessera_runtime::Target::Nvptx { sm }) = (&program.code, program.target)
    else {
        return String::new();
    };
    match probe() {
        Ok(gpu) if gpu.sm == sm => match GpuBackend::new(ptx, None) {
            Ok(mut backend) => {
                program.cubins = backend.load.linked.take();
                format!(
                    " (with cubins for this {}, driver {})",
                    gpu.name, gpu.driver
                )
            }
            Err(e) => format!(" (PTX only: the driver could not link it: {e})"),
        },
        _ => String::new(),
    }
}

/// A script's name (as shown in reports) and its text.
pub struct Script {
    pub name: String,
    pub source: String,
}

impl Script {
    /// The script in the file at `path`, or on standard input when `path` is `-`.
    pub fn read(path: &Path) -> Result<Script, Failure> {
        if path.as_os_str() == "-" {
            let mut source = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut source)
                .map_err(|e| Failure::Message(format!("cannot read standard input: {e}")))?;
            return Ok(Script {
                name: "<stdin>".into(),
                source,
            });
        }
        // A pipe or device nobody writes to would block the read forever.
        let metadata = std::fs::metadata(path)
            .map_err(|e| Failure::Message(format!("cannot read {}: {e}", path.display())))?;
        if !metadata.is_file() {
            return Err(Failure::Message(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
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
    data.ok_or_else(|| {
        Failure::Message(format!(
            "{what} needs the data the script reads: pass --data DIR"
        ))
    })
}

/// The text of one stage of `script`.
pub fn emit(
    script: &Script,
    stage: Emit,
    data: Option<&Path>,
    verbose: bool,
    options: &CompileOptions,
) -> Result<String, Failure> {
    let stage = stage.stage();
    let catalog = if stage.needs_data() {
        let ast = source_to_ast(&script.source).map_err(|d| script.fail(d))?;
        let data = needs_data(data, &format!("--emit {}", stage.name()))?;
        Some(open(script, &ast, data)?.with_compression(options.compress))
    } else {
        None
    };
    let target = options.target;
    let tile = options.tile;
    let emitted = compiler_emit(
        &script.source,
        stage,
        catalog.as_ref(),
        target,
        tile,
        verbose,
        options.partition_joins,
    );
    emitted.map_err(|e| match e {
        EmitError::Script(diagnostics) => script.fail(diagnostics),
        EmitError::NeedsData => Failure::Message("this stage needs --data DIR".into()),
        EmitError::NotGpu => {
            Failure::Message("--emit ptx needs a GPU target, such as --target sm_90".into())
        }
    })
}

pub fn open(
    script: &Script,
    ast: &tessera_grammar::ast::Script,
    data: &Path,
) -> Result<Catalog, Failure> {
    open_catalog(ast, data).map_err(|e| match e {
        OpenError::Declarations(d) => script.fail(d),
        OpenError::Storage(e) => Failure::Message(e.to_string()),
    })
}
