//! The `tessera` command: compiles dataflow scripts into fused tile kernels, runs them, generates
//! benchmark data. Each subcommand lives in `commands/`; every failure ends in one line on
//! stderr (or a rendered report for script errors) and a non-zero exit status.

mod commands;
mod conformance;
mod failure;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Compiles relational dataflow scripts into fused GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compiles a script and prints one of its stages.
    Compile(CompileArgs),
    /// Compiles and runs a script (or runs a compiled `.tqx`), printing each query's result.
    Run(RunArgs),
    /// Runs conformance files (script + expected result) and compares the results.
    Test(TestArgs),
    /// Generates benchmark data as Parquet.
    Gen {
        #[command(subcommand)]
        dataset: GenDataset,
    },
}

#[derive(clap::Args)]
pub struct CompileArgs {
    /// The script (`.tq`).
    script: PathBuf,
    /// The data directory: one Parquet file or folder, or `.tbl` file, per table.
    #[arg(long)]
    data: Option<PathBuf>,
    /// The stage to print.
    #[arg(long, value_enum)]
    emit: Option<Emit>,
    /// With `--emit optimized`: print the plan after every pass.
    #[arg(long)]
    verbose: bool,
    /// Write the compiled program here (`.tqx`), to run later without compiling.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// The code to generate: `sm_90` (or another `sm_XX`) for NVIDIA GPUs, or `host`.
    #[arg(long, default_value = "sm_90", value_parser = parse_target)]
    target: tessera_runtime::Target,
}

fn parse_target(text: &str) -> Result<tessera_runtime::Target, String> {
    if text == "host" || text == "cpu" {
        return Ok(tessera_runtime::Target::Host);
    }
    text.strip_prefix("sm_")
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|sm| (50..=120).contains(sm))
        .map(|sm| tessera_runtime::Target::Nvptx { sm })
        .ok_or_else(|| format!("`{text}` is not a target; use sm_90 (or another sm_XX) or host"))
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The script (`.tq`) or compiled program (`.tqx`).
    script: PathBuf,
    /// The data directory.
    #[arg(long)]
    data: PathBuf,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// How to print results.
    #[arg(long, value_enum, default_value = "table")]
    format: commands::run::Format,
    /// Print compile time, each kernel's time and the bytes it read (on stderr).
    #[arg(long)]
    timing: bool,
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// Conformance files (`*.test`) or folders of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Run every file on this data instead of the data each file names.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
}

/// The stages `--emit` prints (see `tessera_compiler::emit::Stage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    Tokens,
    Ast,
    Typed,
    Logical,
    Optimized,
    Physical,
    /// The LLVM module before optimization: kernels as calls to the block-wide primitives.
    Llvm,
    /// The PTX the driver loads (with `--target sm_XX`).
    Ptx,
}

#[derive(Subcommand)]
enum GenDataset {
    /// The Star Schema Benchmark: lineorder, part, supplier, customer, date.
    Ssb {
        /// Scale factor: 1 makes about 6 million lineorder rows (fractions such as 0.01 work).
        #[arg(long)]
        sf: f64,
        /// The directory to write the tables into.
        #[arg(long)]
        out: PathBuf,
    },
}

impl Emit {
    fn stage(self) -> tessera_compiler::emit::Stage {
        use tessera_compiler::emit::Stage;
        match self {
            Emit::Tokens => Stage::Tokens,
            Emit::Ast => Stage::Ast,
            Emit::Typed => Stage::Typed,
            Emit::Logical => Stage::Logical,
            Emit::Optimized => Stage::Optimized,
            Emit::Physical => Stage::Physical,
            Emit::Llvm => Stage::Llvm,
            Emit::Ptx => Stage::Ptx,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => commands::compile::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Test(args) => commands::test::run(&args),
        Command::Gen {
            dataset: GenDataset::Ssb { sf, out },
        } => commands::gen::ssb(sf, &out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
