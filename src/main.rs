//! The `tessera` command: compiles dataflow scripts into fused tile kernels, runs them, generates
//! benchmark data. Each subcommand lives in `commands/`; every failure ends in one line on
//! stderr (or a rendered report for script errors) and a non-zero exit status.

mod allocator;
mod commands;
mod conformance;
mod engine;
mod failure;
mod progress;
mod recently_used;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

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
    /// Benchmarks compiled queries: median times, bandwidth floor, and reference figures.
    Bench {
        #[command(subcommand)]
        suite: BenchSuite,
    },
    /// Lists the tables of a data folder or file (rows, files) and their columns (type,
    /// nullability, and those that cannot be read, with the reason).
    Describe(DescribeArgs),
    /// Shows how each column of a data directory is stored for kernels: encoding, bits per value.
    Stats(StatsArgs),
    /// Generates benchmark data as Parquet.
    Gen {
        #[command(subcommand)]
        dataset: GenDataset,
    },
    /// Prepares every column of a data directory ahead of time: stores what kernels read, so
    /// runs skip decoding and encoding.
    Prepare(PrepareArgs),
    /// Shows or clears Tessera's cache (compiled kernels and prepared columns).
    Cache {
        #[command(subcommand)]
        action: CacheAction,
    },
    /// Keeps the data and compiled kernels resident and answers clients that speak the
    /// PostgreSQL protocol (psql, psycopg, JDBC); a query's text is a Tessera script.
    Serve(ServeArgs),
    /// An interactive prompt on the resident engine: scripts end with `;`, `.help` lists the
    /// shell's commands. Reads scripts from a pipe too.
    Shell(ShellArgs),
    /// Prints a completion script for a shell: `tessera completions bash > /etc/bash_completion.d/tessera`,
    /// or `source <(tessera completions bash)`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
pub struct DescribeArgs {
    /// The data folder, or one table's file.
    data: PathBuf,
    /// Only this table.
    table: Option<String>,
    /// How to print the listing.
    #[arg(long, value_enum, default_value = "table")]
    format: commands::run::Format,
}

#[derive(clap::Args)]
pub struct ShellArgs {
    /// The data directory.
    #[arg(long)]
    data: PathBuf,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// How to print results (`.format` changes it).
    #[arg(long, value_enum, default_value = "table")]
    format: commands::run::Format,
    /// How the integer columns kernels read are stored on the device (as `run --compress`).
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Whether joins into large tables first partition their probes (as `run`).
    #[arg(long, default_value = "auto", value_parser = parse_partition_joins)]
    partition_joins: tessera_compiler::physical::PartitionJoins,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The data directory.
    #[arg(long)]
    data: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: std::net::SocketAddr,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// How the integer columns kernels read are stored on the device (as `run --compress`).
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Whether joins into large tables first partition their probes (as `run`).
    #[arg(long, default_value = "auto", value_parser = parse_partition_joins)]
    partition_joins: tessera_compiler::physical::PartitionJoins,
    /// The most device memory resident columns take (e.g. 16GiB); least recently used columns
    /// make room for others, and a query whose columns exceed it streams its largest table
    /// through in pieces (with `--device cpu`, the same for the columns in memory). By default,
    /// as much as fits.
    #[arg(long, value_parser = parse_bytes)]
    gpu_memory: Option<u64>,
    /// A file whose first line is the password every client must give (or a PostgreSQL
    /// SCRAM-SHA-256 verifier of it); `TESSERA_PASSWORD` gives it otherwise.
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// Accept any client on an address other than loopback without a password.
    #[arg(long)]
    trust: bool,
    /// Print each script's time waiting for the device and on it (setup, kernels, reading
    /// results back) to standard error.
    #[arg(long)]
    timing: bool,
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    tessera_storage::cache::parse_size(text).ok_or_else(|| {
        format!("`{text}` is not a size; write bytes or a number with MB, GB, MiB or GiB")
    })
}

/// Fails when standard output was closed at start (`tessera run … >&-`), so results are not
/// lost without a word. Rust's runtime opens `/dev/null` read-write on a standard descriptor
/// found closed; a shell's `> /dev/null` opens it write-only, which stays allowed.
fn require_stdout() -> Result<(), failure::Failure> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // SAFETY: `fcntl(F_GETFL)` only asks about the descriptor.
    let flags = unsafe { libc::fcntl(1, libc::F_GETFL) };
    let read_write = flags != -1 && flags & libc::O_ACCMODE == libc::O_RDWR;
    let null = std::fs::metadata("/proc/self/fd/1")
        .ok()
        .zip(std::fs::metadata("/dev/null").ok())
        .is_some_and(|(out, null)| out.file_type().is_char_device() && out.rdev() == null.rdev());
    if flags == -1 || (read_write && null) {
        return Err(failure::Failure::Message(
            "standard output is closed: there is nowhere to write the results".into(),
        ));
    }
    Ok(())
}

impl Command {
    /// Whether the command writes its results to standard output.
    fn prints_results(&self) -> bool {
        !matches!(
            self,
            Command::Gen { .. } | Command::Prepare(_) | Command::Serve(_)
        )
    }

    /// Whether the command may run on a GPU (and so should start the driver early).
    fn may_use_gpu(&self) -> bool {
        use commands::session::DeviceChoice;
        match self {
            Command::Run(args) => args.device != DeviceChoice::Cpu && args.server.is_none(),
            Command::Test(args) => args.device != DeviceChoice::Cpu,
            // `bench e2e` measures fresh processes; a context of its own would speed theirs.
            Command::Bench {
                suite: BenchSuite::E2e(_) | BenchSuite::Serve(_),
            } => false,
            Command::Serve(args) => args.device != DeviceChoice::Cpu,
            Command::Shell(args) => args.device != DeviceChoice::Cpu,
            Command::Bench { .. } | Command::Prepare(_) => true,
            Command::Compile(_)
            | Command::Stats(_)
            | Command::Describe(_)
            | Command::Completions { .. }
            | Command::Gen { .. }
            | Command::Cache { .. } => false,
        }
    }
}

#[derive(clap::Args)]
pub struct PrepareArgs {
    /// The data directory.
    data: PathBuf,
    /// The encoding to prepare columns in (as `run --compress`); by default the one `run` uses
    /// on this machine: `auto` with a GPU, `none` without.
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Write beside the data (in DIR/.tessera) instead of the cache, for data shared between
    /// users or machines.
    #[arg(long)]
    in_place: bool,
    /// Only this table.
    #[arg(long)]
    table: Option<String>,
}

#[derive(Subcommand)]
enum CacheAction {
    /// Where the cache is, what it holds and its size budget.
    Info,
    /// Removes every compiled kernel and prepared column from the cache.
    Clear,
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
    /// The code to generate: `sm_90` (or another `sm_XX`) for NVIDIA GPUs, or `host`. By
    /// default this machine's GPU, else the host (`sm_90` for `--emit ptx`).
    #[arg(long, value_parser = parse_target)]
    target: Option<tessera_runtime::Target>,
    /// Tile shape of the kernels, threads x items per thread (e.g. 128x8); when omitted, each
    /// query's is the target's for how the columns it reads are stored.
    #[arg(long, value_parser = parse_tile)]
    tile: Option<tessera_runtime::TileShape>,
    /// How the integer columns kernels read are stored on the device: plain (`none`), bit-packed
    /// at one width per column (`pack`) or as dictionary codes (`dict`), in blocks with GPU-FOR
    /// (`for`) or GPU-DFOR (`dfor`), or per column the smallest (`auto`). By default `auto` on
    /// a GPU and `none` on the CPU.
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Whether joins into large tables first partition the rows that probe them by the part of
    /// the table each reaches: `auto` (tables over 32 MB), `always` or `never`.
    #[arg(long, default_value = "auto", value_parser = parse_partition_joins)]
    partition_joins: tessera_compiler::physical::PartitionJoins,
}

fn parse_tile(text: &str) -> Result<tessera_runtime::TileShape, String> {
    let parsed = text
        .split_once('x')
        .and_then(|(t, i)| Some((t.parse::<u32>().ok()?, i.parse::<u32>().ok()?)));
    match parsed {
        Some((threads, items_per_thread))
            if threads > 0 && items_per_thread > 0 && items_per_thread <= 8192 =>
        {
            Ok(tessera_runtime::TileShape {
                threads,
                items_per_thread,
            })
        }
        _ => Err(format!(
            "`{text}` is not a tile shape; write THREADSxITEMS, e.g. 128x8"
        )),
    }
}

fn parse_compression(text: &str) -> Result<tessera_storage::compress::Compression, String> {
    tessera_storage::compress::Compression::parse(text).map_err(|e| e.to_string())
}

fn parse_partition_joins(text: &str) -> Result<tessera_compiler::physical::PartitionJoins, String> {
    use tessera_compiler::physical::PartitionJoins;
    match text {
        "auto" => Ok(PartitionJoins::Auto),
        "always" => Ok(PartitionJoins::Always),
        "never" => Ok(PartitionJoins::Never),
        _ => Err(format!(
            "`{text}` is not a choice; use auto, always or never"
        )),
    }
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
    /// The script (`.tq`), a compiled program (`.tqx`), or `-` to read the script from
    /// standard input.
    #[arg(required_unless_present = "command", conflicts_with = "command")]
    script: Option<PathBuf>,
    /// The script itself, instead of a file.
    #[arg(short = 'c', long = "command", value_name = "SCRIPT")]
    command: Option<String>,
    /// The data directory (or one table's file); not needed with `--server`.
    #[arg(long, required_unless_present = "server")]
    data: Option<PathBuf>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// How to print results.
    #[arg(long, value_enum, default_value = "table")]
    format: commands::run::Format,
    /// Rows a table shows at most, its first and last ones (0 for all): 40 when the output is a
    /// terminal, all otherwise.
    #[arg(long, value_name = "N")]
    max_rows: Option<usize>,
    /// Write the result to this file instead, in the format its extension names: .parquet,
    /// .arrow (.feather, .ipc), .csv, .json, .ndjson (.jsonl).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print compile time, each kernel's time and the bytes it read (on stderr).
    #[arg(long)]
    timing: bool,
    /// Neither read nor write prepared columns: decode the data files and encode columns
    /// afresh.
    #[arg(long)]
    no_prepare: bool,
    /// Send the script to a running `tessera serve` at this address (HOST:PORT) instead of
    /// running it here; `TESSERA_SERVER` gives a default.
    #[arg(long, env = "TESSERA_SERVER")]
    server: Option<String>,
    /// Tile shape of the kernels, threads x items per thread (e.g. 128x8); when omitted, each
    /// query's is the target's for how the columns it reads are stored.
    #[arg(long, value_parser = parse_tile)]
    tile: Option<tessera_runtime::TileShape>,
    /// How the integer columns kernels read are stored on the device: plain (`none`), bit-packed
    /// at one width per column (`pack`) or as dictionary codes (`dict`), in blocks with GPU-FOR
    /// (`for`) or GPU-DFOR (`dfor`), or per column the smallest (`auto`). By default `auto` on
    /// a GPU and `none` on the CPU.
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Whether joins into large tables first partition the rows that probe them by the part of
    /// the table each reaches: `auto` (tables over 32 MB), `always` or `never`.
    #[arg(long, default_value = "auto", value_parser = parse_partition_joins)]
    partition_joins: tessera_compiler::physical::PartitionJoins,
    /// The most device memory the columns take (e.g. 4GiB): a query whose columns exceed it
    /// streams its largest table through in pieces (with `--device cpu`, the same for the
    /// columns in memory). By default, as much as fits.
    #[arg(long, value_parser = parse_bytes)]
    gpu_memory: Option<u64>,
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// Conformance files (`*.test`) or folders of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Run every file on this data instead of the data each file names.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Neither read nor write prepared columns.
    #[arg(long)]
    no_prepare: bool,
    /// Run every file through a running `tessera serve` at this address (HOST:PORT), which
    /// serves the data the files name.
    #[arg(long)]
    server: Option<String>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// How the integer columns kernels read are stored on the device: plain (`none`), bit-packed
    /// at one width per column (`pack`) or as dictionary codes (`dict`), in blocks with GPU-FOR
    /// (`for`) or GPU-DFOR (`dfor`), or per column the smallest (`auto`). By default `auto` on
    /// a GPU and `none` on the CPU.
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Whether joins into large tables first partition the rows that probe them by the part of
    /// the table each reaches: `auto` (tables over 32 MB), `always` or `never`.
    #[arg(long, default_value = "auto", value_parser = parse_partition_joins)]
    partition_joins: tessera_compiler::physical::PartitionJoins,
}

#[derive(clap::Args)]
pub struct StatsArgs {
    /// The data directory.
    data: PathBuf,
    /// Only this table.
    #[arg(long)]
    table: Option<String>,
    /// The encoding setting to report (as `run --compress`).
    #[arg(long, default_value = "auto", value_parser = parse_compression)]
    compress: tessera_storage::compress::Compression,
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
    /// The compiled program: each kernel's table, tile and grid, how it reads each column
    /// (plain, or packed and how), its buffers, the host's work and the result's shape.
    Kernels,
    /// The LLVM module before optimization: kernels as calls to the block-wide primitives.
    Llvm,
    /// The PTX the driver loads (with `--target sm_XX`).
    Ptx,
}

#[derive(Subcommand)]
enum BenchSuite {
    /// The 13 Star Schema Benchmark queries.
    Ssb(BenchArgs),
    /// The 22 TPC-H queries of examples/tpch.
    Tpch(BenchArgs),
    /// Summing a column of values from U(0, 2^16), stored plain, GPU-FOR and GPU-DFOR.
    Decode(DecodeBenchArgs),
    /// Selections and projections returning rows, against their bytes-moved floor.
    Micro(MicroBenchArgs),
    /// Each SSB query as a fresh `tessera run` process, cold and warm, timed whole.
    E2e(E2eBenchArgs),
    /// Many clients at once against a running `tessera serve` (SSB or TPC-H data): latency
    /// percentiles (script sent to every row received) and throughput, every result checked.
    Serve(ServeBenchArgs),
}

#[derive(clap::Args)]
pub struct ServeBenchArgs {
    /// The server's address (HOST:PORT); it must serve the benchmark's data.
    #[arg(long, default_value = "127.0.0.1:5433")]
    server: String,
    /// Whose queries the clients send: examples/ssb's or examples/tpch's.
    #[arg(long, value_enum, default_value = "ssb")]
    suite: commands::bench_serve::ServedSuite,
    /// Clients at once, each on its own connection.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Scripts each client sends.
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Only the queries whose name contains one of these.
    #[arg(long)]
    only: Vec<String>,
}

#[derive(clap::Args)]
pub struct E2eBenchArgs {
    /// The SSB data directory (from `tessera gen ssb`).
    #[arg(long)]
    data: PathBuf,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// Timed warm runs per query (after one untimed run that prepares and caches).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Timed cold runs per query, each with nothing prepared or cached (0: none).
    #[arg(long, default_value_t = 5)]
    cold_runs: usize,
    /// Only the queries whose name contains one of these (`--only q11 --only q41`).
    #[arg(long)]
    only: Vec<String>,
}

#[derive(clap::Args)]
pub struct MicroBenchArgs {
    /// Rows of each generated table (2^29 by default).
    #[arg(long, default_value_t = 1 << 29)]
    rows: usize,
    /// Keys probed into each hash table (2^28 by default).
    #[arg(long, default_value_t = 1 << 28)]
    probe_rows: usize,
    /// The largest hash table to probe (of 32 KB, 256 KB, 2 MB, 16 MB, 128 MB, 512 MB).
    #[arg(long, default_value_t = 512 << 20)]
    max_table_bytes: u64,
    /// Whether joins into large tables partition their probes first (as `run`).
    #[arg(long, default_value = "auto", value_parser = parse_partition_joins)]
    partition_joins: tessera_compiler::physical::PartitionJoins,
    /// Build rows (and probes) of the joins whose keys repeat (2^22 by default; 0: none).
    #[arg(long, default_value_t = 1 << 22)]
    chain_rows: usize,
    /// Key and value pairs to sort (2^28 by default).
    #[arg(long, default_value_t = 1 << 28)]
    sort_rows: usize,
    /// Only the benchmarks whose name contains one of these (`--only sort --only top-k`).
    #[arg(long)]
    only: Vec<String>,
    #[command(flatten)]
    run: GeneratedBenchArgs,
}

/// How a benchmark over generated data runs.
#[derive(clap::Args)]
pub struct GeneratedBenchArgs {
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// Timed runs per query.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Untimed runs before them.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Tile shape of the kernels, threads x items per thread (e.g. 128x8); when omitted, each
    /// query's is the target's for how the columns it reads are stored.
    #[arg(long, value_parser = parse_tile)]
    tile: Option<tessera_runtime::TileShape>,
}

#[derive(clap::Args)]
pub struct DecodeBenchArgs {
    /// How many values to sum.
    #[arg(long, default_value_t = 500_000_000)]
    values: usize,
    #[command(flatten)]
    run: GeneratedBenchArgs,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Scale factor of the data (generated into data/SUITE-SF unless --data is given).
    #[arg(long)]
    sf: f64,
    /// Use this data directory (it must hold the benchmark at that scale factor).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Where to run.
    #[arg(long, value_enum, default_value = "auto")]
    device: commands::session::DeviceChoice,
    /// Timed runs per query.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Untimed runs before them.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Tile shape of the kernels, threads x items per thread (e.g. 128x8); when omitted, each
    /// query's is the target's for how the columns it reads are stored.
    #[arg(long, value_parser = parse_tile)]
    tile: Option<tessera_runtime::TileShape>,
    /// How the integer columns kernels read are stored on the device: plain (`none`), bit-packed
    /// at one width per column (`pack`) or as dictionary codes (`dict`), in blocks with GPU-FOR
    /// (`for`) or GPU-DFOR (`dfor`), or per column the smallest (`auto`). By default `auto` on
    /// a GPU and `none` on the CPU.
    #[arg(long, value_parser = parse_compression)]
    compress: Option<tessera_storage::compress::Compression>,
    /// Also print each query's kernels: the median time of each over the timed runs.
    #[arg(long)]
    kernels: bool,
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
    /// TPC-H: lineitem, orders, customer, part, partsupp, supplier, nation, region (the same
    /// rows as the reference dbgen; money as decimal(15, 2)).
    Tpch {
        /// Scale factor: 1 makes about 6 million lineitem rows (fractions such as 0.01 work).
        #[arg(long)]
        sf: f64,
        /// The directory to write the tables into.
        #[arg(long)]
        out: PathBuf,
    },
    /// The Wisconsin benchmark relations: `wisconsin` of N rows and `wisconsin_small` of 0.6 N.
    Wisconsin {
        /// Rows of the larger relation.
        #[arg(long)]
        rows: u64,
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
            Emit::Kernels => Stage::Kernels,
            Emit::Llvm => Stage::Llvm,
            Emit::Ptx => Stage::Ptx,
        }
    }
}

/// When the process started, for `run --timing`'s account of where its time went.
static PROCESS_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Milliseconds since the process started.
fn since_start() -> f64 {
    PROCESS_START
        .get()
        .map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3)
}

fn main() -> ExitCode {
    PROCESS_START.get_or_init(std::time::Instant::now);
    allocator::catch_code_generator_failures();
    let cli = Cli::parse();
    // The CUDA driver takes a third of a second to start: begin now, on its own thread, for
    // the commands that may run on a GPU.
    if cli.command.may_use_gpu() {
        tessera_runtime::exec::gpu::start_early();
    }
    // Panics are bugs in Tessera, never the user's fault. Some are caught where they happen
    // (inside the Parquet decoder, which panics on some corrupt files, and which the data layer
    // turns into a clean error); none should print Rust's panic banner. One that reaches here is
    // reported in one line.
    std::panic::set_hook(Box::new(|info| {
        let message = info.to_string();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(message);
        }
    }));
    limit_worker_threads();
    // Deeply nested scripts recurse as deep in the parser and the compiler: the command runs
    // on a thread with room for them (address space; pages are used only as touched).
    let command = std::thread::Builder::new()
        .name("tessera".into())
        .stack_size(COMMAND_STACK_BYTES)
        .spawn(move || std::panic::catch_unwind(|| run(cli)));
    let outcome = match command {
        Ok(thread) => thread.join().unwrap_or_else(Err),
        Err(e) => Ok(Err(failure::Failure::Message(format!(
            "cannot start a thread: {e}"
        )))),
    };
    let code: u8 = match outcome {
        Ok(Ok(())) => 0,
        Ok(Err(failure)) => {
            failure.report();
            1
        }
        Err(_) => {
            let message = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut last| last.take())
                .unwrap_or_else(|| "a worker thread failed".into());
            output_failure(&message).unwrap_or_else(|| {
                eprintln!("error: internal error (this is a bug in Tessera): {message}");
                EXIT_INTERNAL
            })
        }
    };
    if tessera_runtime::exec::gpu::driver_started() {
        leave_now(code);
    }
    ExitCode::from(code)
}

/// The exit status of an internal error (a bug in Tessera), as sysexits' EX_SOFTWARE; a user's
/// error exits with 1 and a usage error (clap's) with 2.
const EXIT_INTERNAL: u8 = 70;

/// The stack of the thread that runs the command.
const COMMAND_STACK_BYTES: usize = 1 << 30;

/// The exit status for a panic of the standard library's printing macros, which panic when
/// standard output cannot be written: none at all when the reader went away (`tessera … |
/// head`), which is a normal end; 1, with the cause, when the output cannot take the text (a
/// full disk, a closed descriptor). `None` for any other panic.
fn output_failure(message: &str) -> Option<u8> {
    let cause = message.split("failed printing to stdout: ").nth(1)?;
    if cause.contains("Broken pipe") {
        return Some(0);
    }
    eprintln!("error: cannot write the output: {}", cause.trim());
    Some(1)
}

/// Caps rayon's worker threads: `RAYON_NUM_THREADS` set to thousands would stall the machine
/// starting them. More than four per core is refused in favour of one per core.
fn limit_worker_threads() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let asked = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|n| n.trim().parse::<usize>().ok());
    let threads = match asked {
        Some(n) if n >= 1 && n <= 4 * cores => n,
        Some(n) => {
            eprintln!(
                "note: RAYON_NUM_THREADS={n} is not between 1 and {} (four per core); using {cores}",
                4 * cores
            );
            cores
        }
        None => cores,
    };
    // Fails only when a pool exists already, which then stays as it is.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
}

/// Ends the process without waiting for the CUDA driver to tear down its context (about 0.1 s,
/// which the kernel's driver spends when the process's last handle on the GPU closes, after
/// every result is out). The process forks; the parent, whose output is flushed and whose files
/// are all renamed into place by now, leaves at once, and the child, which holds the last
/// handles, closes its standard streams (so no reader waits for it) and leaves too, the
/// driver's work then done in the background. The child runs nothing but those two system
/// calls. Where the fork fails, the process simply leaves.
fn leave_now(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: the child calls only `close` and `_exit`, both async-signal-safe, so the state
    // of other threads' locks at the fork does not matter; the parent goes on to `_exit`.
    unsafe {
        if libc::fork() == 0 {
            for fd in 0..3 {
                libc::close(fd);
            }
            libc::_exit(0);
        }
        libc::_exit(i32::from(code))
    }
}

/// The message of the last panic, for the one-line report of an internal error.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn run(cli: Cli) -> Result<(), failure::Failure> {
    if cli.command.prints_results() {
        require_stdout()?;
    }
    match cli.command {
        Command::Compile(args) => commands::compile::run(&args),
        Command::Run(args) => commands::run::run(&args),
        Command::Test(args) => commands::test::run(&args),
        Command::Stats(args) => commands::stats::run(&args),
        Command::Describe(args) => commands::describe::run(&args),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "tessera", &mut script);
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(
                    failure::Failure::Message(format!("cannot write the output: {e}")),
                ),
                _ => Ok(()),
            }
        }
        Command::Bench {
            suite: BenchSuite::Ssb(args),
        } => commands::bench::run(&commands::bench::SSB, &args),
        Command::Bench {
            suite: BenchSuite::Tpch(args),
        } => commands::bench::run(&commands::bench::TPCH, &args),
        Command::Bench {
            suite: BenchSuite::Decode(args),
        } => commands::bench_decode::run(&args),
        Command::Bench {
            suite: BenchSuite::Micro(args),
        } => commands::bench_micro::run(&args),
        Command::Bench {
            suite: BenchSuite::E2e(args),
        } => commands::bench_e2e::run(&args),
        Command::Bench {
            suite: BenchSuite::Serve(args),
        } => commands::bench_serve::run(&args),
        Command::Gen {
            dataset: GenDataset::Ssb { sf, out },
        } => commands::gen::ssb(sf, &out),
        Command::Gen {
            dataset: GenDataset::Tpch { sf, out },
        } => commands::gen::tpch(sf, &out),
        Command::Gen {
            dataset: GenDataset::Wisconsin { rows, out },
        } => commands::gen::wisconsin(rows, &out),
        Command::Prepare(args) => commands::prepare::run(&args),
        Command::Serve(args) => commands::serve::run(&args),
        Command::Shell(args) => commands::shell::run(&args),
        Command::Cache {
            action: CacheAction::Info,
        } => commands::cache::info(),
        Command::Cache {
            action: CacheAction::Clear,
        } => commands::cache::clear(),
    }
}
