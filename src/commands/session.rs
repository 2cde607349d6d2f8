//! Compiling a script for a target and choosing the device to run on: the steps `compile`,
//! `run`, `test` and `bench` share.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_compiler::codegen::{pipelines_to_program_timed, CodegenTimes};
use tessera_compiler::physical::constants::{self, Constant};
use tessera_compiler::physical::{PartitionJoins, PhysicalQuery};
use tessera_compiler::{decorrelate, staging, Compilation};
use tessera_grammar::source_to_ast;
use tessera_runtime::exec::gpu::{probe, GpuInfo};
use tessera_runtime::exec::{run_query_until, Backend, Learned, Readback, RuntimeError, Timing};
use tessera_runtime::program::{Program, QueryProgram};
use tessera_runtime::result::{fetched_columns, FetchedResult};
use tessera_runtime::{Target, TileShape};
use tessera_storage::compress::Compression;
use tessera_storage::prepared::PreparedStore;
use tessera_storage::Catalog;

use super::cache;
use super::compile::{open, Script};
use crate::failure::Failure;
use crate::progress::Bar;

/// Where the user asked to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    /// The GPU when there is one, else the CPU (saying why).
    Auto,
    Gpu,
    Cpu,
}

/// Decides the target for `choice`; with `auto` and no GPU, says so on stderr.
pub fn choose_target(choice: DeviceChoice) -> Result<(Target, Option<GpuInfo>), Failure> {
    match choice {
        DeviceChoice::Cpu => Ok((Target::Host, None)),
        DeviceChoice::Gpu => {
            let gpu = probe().map_err(|e| Failure::Message(format!("no GPU to run on: {e}")))?;
            Ok((Target::Nvptx { sm: gpu.sm }, Some(gpu)))
        }
        DeviceChoice::Auto => match probe() {
            Ok(gpu) => Ok((Target::Nvptx { sm: gpu.sm }, Some(gpu))),
            Err(e) => {
                eprintln!("note: no GPU ({e}); running on the CPU");
                Ok((Target::Host, None))
            }
        },
    }
}

/// How columns are stored when the command line does not say: bit-packed (`auto`) on the GPU,
/// where a scan's bytes set its time and SSB runs faster packed (docs/PERFORMANCE.md); plain on
/// the CPU, where the host code decodes an item with two loads instead of one.
pub fn compression_for(target: Target, asked: Option<Compression>) -> Compression {
    asked.unwrap_or(if target.is_gpu() {
        Compression::Auto
    } else {
        Compression::NONE
    })
}

/// What a script is compiled for: the target, its tile shape (where `None`, each query's from
/// how its columns are stored: `Target::tile_for`), and how the integer columns kernels read
/// are encoded.
#[derive(Clone, Copy, Debug)]
pub struct CompileOptions {
    pub target: Target,
    pub tile: Option<TileShape>,
    pub compress: Compression,
    /// Which join probes partition their rows first.
    pub partition_joins: PartitionJoins,
    /// Whether columns are read from, and written to, the prepared store.
    pub prepare: bool,
    /// The most device memory the columns of a script's stages take (`--gpu-memory`), which
    /// run as it is compiled; as much as fits when `None`.
    pub gpu_memory: Option<u64>,
}

impl CompileOptions {
    /// The kernel cache's key of `source` (parsed as `ast`) compiled with these options against
    /// `catalog`.
    pub fn cache_key(
        &self,
        source: &str,
        ast: &tessera_grammar::ast::Script,
        catalog: &Catalog,
    ) -> String {
        cache::key(
            source,
            ast,
            catalog,
            self.target,
            self.tile,
            self.partition_joins,
        )
    }
}

/// A script compiled against a data directory.
pub struct Compiled {
    pub program: Program,
    pub catalog: Arc<Catalog>,
    /// Parse to executable code, in milliseconds.
    pub compile_ms: f64,
    /// Analysis and planning (reading the statistics and dictionaries it needs), milliseconds.
    pub plan_ms: f64,
    pub codegen: CodegenTimes,
    /// The kernel cache's keys the program is stored under (its script's, its shape's), when
    /// the cache was consulted.
    pub cache_keys: Vec<String>,
    /// Whether the program came from the kernel cache (no compiler work was done).
    pub from_cache: bool,
    /// The stages the script was split into (`stage#N` tables), as they ran.
    pub stages: Vec<StageReport>,
}

/// A stage as it ran: its table, its rows, and where its time went (milliseconds).
pub struct StageReport {
    pub table: String,
    pub rows: usize,
    pub total_ms: f64,
    pub compile_ms: f64,
    pub setup_ms: f64,
    pub kernels_ms: f64,
    /// Reading the result back.
    pub result_ms: f64,
    /// Decoding it into the table's columns, and adding the table.
    pub into_table_ms: f64,
    /// The table its columns were streamed through the device from (`--gpu-memory`), if any.
    pub streamed: Option<tessera_runtime::exec::Streamed>,
}

impl std::fmt::Display for StageReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} rows in {:.1} ms: compile {:.1}, setup {:.1}, kernels {:.3}, result {:.1}, into a table {:.1}",
            self.table,
            self.rows,
            self.total_ms,
            self.compile_ms,
            self.setup_ms,
            self.kernels_ms,
            self.result_ms,
            self.into_table_ms
        )?;
        if let Some(streamed) = &self.streamed {
            write!(f, "; {streamed}")?;
        }
        Ok(())
    }
}

impl Compiled {
    /// A program the kernel cache held under `key`, looked up since `started`.
    pub fn from_cache(
        program: Program,
        catalog: Arc<Catalog>,
        key: String,
        started: Instant,
    ) -> Compiled {
        Compiled {
            program,
            catalog,
            compile_ms: started.elapsed().as_secs_f64() * 1e3,
            plan_ms: 0.0,
            codegen: CodegenTimes::default(),
            cache_keys: vec![key],
            from_cache: true,
            stages: Vec::new(),
        }
    }

    /// The program the kernel cache holds under `key`, if it holds one, looked up since
    /// `started`.
    pub fn cached(key: &str, catalog: &Arc<Catalog>, started: Instant) -> Option<Compiled> {
        let program = cache::load(key)?;
        Some(Compiled::from_cache(
            program,
            Arc::clone(catalog),
            key.to_string(),
            started,
        ))
    }

    /// Forgets the program in the kernel cache (its assumptions no longer hold).
    pub fn forget(&self) {
        for key in &self.cache_keys {
            cache::forget(key);
        }
    }

    /// Stores the program in the kernel cache again (with the cubins the driver linked).
    pub fn store(&self) {
        for key in &self.cache_keys {
            cache::store(key, &self.program);
        }
    }
}

/// The catalog of `data` for `script`, encoding columns and reading prepared ones as
/// `options` say.
pub fn open_for(
    script: &Script,
    ast: &tessera_grammar::ast::Script,
    data: &Path,
    options: &CompileOptions,
) -> Result<Catalog, Failure> {
    Ok(configure(open(script, ast, data)?, data, options))
}

/// `catalog` (of the data in `data`) encoding columns and reading prepared ones as `options` say.
pub fn configure(catalog: Catalog, data: &Path, options: &CompileOptions) -> Catalog {
    // Reading and encoding columns the first time can take a while on large data: a bar shows
    // how far it got once it has taken a second.
    let catalog = catalog
        .with_compression(options.compress)
        .with_progress(Arc::new(Bar::after(Duration::from_secs(1))));
    if options.prepare {
        catalog.with_prepared(PreparedStore::for_data(data))
    } else {
        catalog
    }
}

/// Says on stderr what went wrong with prepared columns (entries that could not be written,
/// entries found damaged), after waiting for those still being written.
pub fn finish_preparing(catalog: &Catalog) {
    for problem in catalog.finish_preparing() {
        eprintln!("warning: {problem}");
    }
}

/// Compiles `script` against the data in `data`; with `use_cache`, through the kernel cache.
pub fn compile_script(
    script: &Script,
    data: &Path,
    options: &CompileOptions,
    use_cache: bool,
) -> Result<Compiled, Failure> {
    let (ast, mut opened) = parse_decorrelated(script, data, options)?;
    if staging::runs_in_stages(&ast) {
        let catalog = match opened.take() {
            Some(catalog) => catalog,
            None => open_for(script, &ast, data, options)?,
        };
        if split_into_stages(&ast, &catalog, options).is_none() {
            return compile_ast(script, ast, Arc::new(catalog), options, use_cache);
        }
        // A program holds the stages' code but not their results, and its main query's code
        // is made for those results.
        return Err(Failure::Message(format!(
            "{} joins, crosses or combines a grouped, sorted or limited relation, so it runs in stages, each planned once those before it have run: it cannot be compiled ahead of time yet; run it with `tessera run`",
            script.name
        )));
    }
    // No stages to run (refused above).
    let mut stages = |program: &Program, catalog: &Catalog| {
        stage_on_new_device(program, catalog, options.gpu_memory)
    };
    compile_parsed(
        script,
        ast,
        opened,
        data,
        options,
        use_cache,
        &mut |_| None,
        &mut stages,
    )
}

/// Like `compile_script`, but takes the catalog from `cached` when it has one for a script
/// that declares no tables of its own (declarations change how the data is read). Stages run
/// on a device of their own each ([`stage_on_new_device`]).
pub fn compile_with_catalog(
    script: &Script,
    data: &Path,
    options: &CompileOptions,
    use_cache: bool,
    cached: &mut dyn FnMut(Option<Arc<Catalog>>) -> Option<Arc<Catalog>>,
) -> Result<Compiled, Failure> {
    let gpu_memory = options.gpu_memory;
    let mut stages =
        |program: &Program, catalog: &Catalog| stage_on_new_device(program, catalog, gpu_memory);
    compile_with_stages(script, data, options, use_cache, cached, &mut stages)
}

/// Runs a stage's program over the catalog its tables are in, and returns its last query's
/// result as read back (to decode into a table's columns) with the time its queries took.
pub type StageRunner<'a> =
    dyn FnMut(&Program, &Catalog) -> Result<(FetchedResult, Timing), RuntimeError> + 'a;

/// [`compile_with_catalog`], its stages run by `stages`: a resident engine runs them on its
/// device, in turn with other queries.
pub fn compile_with_stages(
    script: &Script,
    data: &Path,
    options: &CompileOptions,
    use_cache: bool,
    cached: &mut dyn FnMut(Option<Arc<Catalog>>) -> Option<Arc<Catalog>>,
    stages: &mut StageRunner<'_>,
) -> Result<Compiled, Failure> {
    let (ast, opened) = parse_decorrelated(script, data, options)?;
    compile_parsed(
        script, ast, opened, data, options, use_cache, cached, stages,
    )
}

/// `script` parsed, its correlated joins decorrelated (`tessera_compiler::decorrelate`), and
/// the catalog that took when it did: telling a join's inputs apart needs the catalog.
fn parse_decorrelated(
    script: &Script,
    data: &Path,
    options: &CompileOptions,
) -> Result<(tessera_grammar::ast::Script, Option<Catalog>), Failure> {
    let ast = source_to_ast(&script.source).map_err(|d| script.fail(d))?;
    if !decorrelate::candidate(&ast) {
        return Ok((ast, None));
    }
    let catalog = open_for(script, &ast, data, options)?;
    Ok((decorrelate::rewrite(ast, &catalog), Some(catalog)))
}

/// [`compile_with_catalog`] of `ast`, parsed from `script` (and `opened`, the catalog it was
/// decorrelated against, when it was): its stages run first, each result a table.
#[allow(clippy::too_many_arguments)]
fn compile_parsed(
    script: &Script,
    ast: tessera_grammar::ast::Script,
    opened: Option<Catalog>,
    data: &Path,
    options: &CompileOptions,
    use_cache: bool,
    cached: &mut dyn FnMut(Option<Arc<Catalog>>) -> Option<Arc<Catalog>>,
    stages: &mut StageRunner<'_>,
) -> Result<Compiled, Failure> {
    if staging::runs_in_stages(&ast) {
        let catalog = match opened {
            Some(catalog) => catalog,
            None => open_for(script, &ast, data, options)?,
        };
        let Some(staged) = split_into_stages(&ast, &catalog, options) else {
            return compile_ast(script, ast, Arc::new(catalog), options, use_cache);
        };
        let mut reports = Vec::new();
        let catalog = run_stages(
            script,
            &staged.stages,
            catalog,
            options,
            use_cache,
            stages,
            &mut reports,
        )?;
        let mut compiled =
            compile_ast(script, staged.script, Arc::new(catalog), options, use_cache)?;
        compiled.stages = reports;
        return Ok(compiled);
    }
    let declares = ast.declares_tables();
    let catalog = match (opened, declares, cached(None)) {
        (Some(catalog), ..) => Arc::new(catalog),
        (None, false, Some(catalog)) => catalog,
        (None, ..) => {
            let catalog = Arc::new(open_for(script, &ast, data, options)?);
            if !declares {
                cached(Some(Arc::clone(&catalog)));
            }
            catalog
        }
    };
    compile_ast(script, ast, catalog, options, use_cache)
}

/// Compiles `ast` (parsed from `script`) against `catalog`; with `use_cache`, through the
/// kernel cache.
fn compile_ast(
    script: &Script,
    ast: tessera_grammar::ast::Script,
    catalog: Arc<Catalog>,
    options: &CompileOptions,
    use_cache: bool,
) -> Result<Compiled, Failure> {
    let started = Instant::now();
    let key = use_cache.then(|| options.cache_key(&script.source, &ast, &catalog));
    if let Some(compiled) = key
        .as_deref()
        .and_then(|key| Compiled::cached(key, &catalog, started))
    {
        return Ok(compiled);
    }
    let compilation = Compilation::run_with(ast, &catalog, options.partition_joins)
        .map_err(|d| script.fail(d))?;
    compile_planned(
        script,
        &compilation.physical,
        catalog,
        options,
        key,
        started,
    )
}

/// The stages `ast` runs in against `catalog` (`tessera_compiler::staging`), their tables
/// named `stage#N` with `N` counted over the process, so that the tables of two scripts a
/// resident engine runs never share a name (its device keeps columns by name).
fn split_into_stages(
    ast: &tessera_grammar::ast::Script,
    catalog: &Catalog,
    options: &CompileOptions,
) -> Option<staging::Staged> {
    static STAGES: AtomicUsize = AtomicUsize::new(0);
    staging::split_unless_planned(ast, catalog, options.partition_joins, &mut |_| {
        format!("stage#{}", STAGES.fetch_add(1, Ordering::Relaxed) + 1)
    })
}

/// Runs each stage with `run` and adds its result to `catalog` as a table the stages after
/// it, and the script, read. A stage's program can come from the kernel cache (keyed by the
/// script and the stage's place in it); one whose assumptions no longer hold there is
/// compiled afresh.
fn run_stages(
    script: &Script,
    stages: &[staging::Stage],
    catalog: Catalog,
    options: &CompileOptions,
    use_cache: bool,
    run: &mut StageRunner<'_>,
    reports: &mut Vec<StageReport>,
) -> Result<Catalog, Failure> {
    let mut catalog = Arc::new(catalog);
    for (index, stage) in stages.iter().enumerate() {
        let started = Instant::now();
        let keyed = Script {
            name: script.name.clone(),
            source: format!("{}\n-- stage {}", script.source, index + 1),
        };
        let compile = |use_cache| {
            compile_ast(
                &keyed,
                stage.script.clone(),
                Arc::clone(&catalog),
                options,
                use_cache,
            )
        };
        let mut compiled = compile(use_cache)?;
        let mut outcome = run(&compiled.program, &catalog);
        if matches!(outcome, Err(RuntimeError::Stale(_))) && compiled.from_cache {
            compiled.forget();
            compiled = compile(false)?;
            outcome = run(&compiled.program, &catalog);
        }
        let (fetched, timing) = outcome.map_err(Failure::from)?;
        let made = Instant::now();
        let last = compiled
            .program
            .queries
            .last()
            .ok_or_else(|| Failure::Message("internal error: a stage has no query".into()))?;
        let columns = fetched_columns(&last.result, fetched, &catalog).map_err(Failure::from)?;
        let rows = columns.first().map_or(0, |(_, column)| column.len());
        let compile_ms = compiled.compile_ms;
        drop(compiled);
        let adding = Arc::get_mut(&mut catalog).ok_or_else(|| {
            Failure::Message("internal error: a stage's catalog is shared".into())
        })?;
        adding
            .add_table(&stage.table, columns)
            .map_err(|e| Failure::Message(e.to_string()))?;
        if let Some(keys) = stage.grouped_keys() {
            adding.add_unique_key(&stage.table, keys);
        }
        reports.push(StageReport {
            table: stage.table.clone(),
            rows,
            total_ms: started.elapsed().as_secs_f64() * 1e3,
            compile_ms,
            setup_ms: timing.setup_ms,
            kernels_ms: timing.query_ms,
            result_ms: timing.finish_ms,
            into_table_ms: made.elapsed().as_secs_f64() * 1e3,
            streamed: timing.streamed.clone(),
        });
    }
    Arc::try_unwrap(catalog)
        .map_err(|_| Failure::Message("internal error: a stage's catalog is shared".into()))
}

/// A [`StageRunner`] for a process that runs one script: each stage on a device of its own
/// for the program's target, its columns taking at most `gpu_memory` of it.
pub fn stage_on_new_device(
    program: &Program,
    catalog: &Catalog,
    gpu_memory: Option<u64>,
) -> Result<(FetchedResult, Timing), RuntimeError> {
    let mut backend = super::run::backend_for(program, gpu_memory)?;
    run_stage_on(backend.as_mut(), program, catalog, &AtomicBool::new(false))
}

/// Runs a stage's program on `backend` (which holds its code), giving up once `cancelled` is
/// set; returns its last query's result as read back, and that query's time.
pub fn run_stage_on(
    backend: &mut dyn Backend,
    program: &Program,
    catalog: &Catalog,
    cancelled: &AtomicBool,
) -> Result<(FetchedResult, Timing), RuntimeError> {
    let Some((last, before)) = program.queries.split_last() else {
        return Err(RuntimeError::Malformed("a stage has no query".into()));
    };
    // A stage runs once per script run: each query learns nothing for a later one, and
    // nothing from the others (their rooms are their own).
    for query in before {
        let learned = Learned::default();
        run_query_until(
            backend,
            query,
            catalog,
            &mut Readback::Table,
            cancelled,
            &learned,
        )?;
    }
    let outcome = run_query_until(
        backend,
        last,
        catalog,
        &mut Readback::Fetched,
        cancelled,
        &Learned::default(),
    )?;
    let fetched = outcome
        .fetched
        .ok_or_else(|| RuntimeError::Malformed("a stage's result was not read back".into()))?;
    Ok((fetched, outcome.timing))
}

/// The program of `queries`, planned from `script` against `catalog` since `started`: with a
/// kernel cache key (the script's), the cached program of the same shape given these queries'
/// constants, if there is one; else code generated, and stored under both keys.
pub fn compile_planned(
    script: &Script,
    queries: &[PhysicalQuery],
    catalog: Arc<Catalog>,
    options: &CompileOptions,
    key: Option<String>,
    started: Instant,
) -> Result<Compiled, Failure> {
    let Some(key) = key else {
        return generate(script, queries, catalog, options, Vec::new(), started);
    };
    let shape_key = cache::shape_key(&shape_of(queries, options, &catalog));
    let shared = cache::load(&shape_key).and_then(|mut program| {
        program.queries = with_constants(&program, queries)?;
        Some(program)
    });
    match shared {
        Some(program) => {
            let mut compiled = Compiled::from_cache(program, catalog, shape_key, started);
            // Stored under the script's key too, with its constants, once it has run.
            compiled.cache_keys.push(key);
            Ok(compiled)
        }
        None => generate(
            script,
            queries,
            catalog,
            options,
            vec![key, shape_key],
            started,
        ),
    }
}

/// What decides whether two scripts can run the same code: their queries' shapes
/// (`physical::constants::shape`) and how they are compiled.
pub fn shape_of(queries: &[PhysicalQuery], options: &CompileOptions, catalog: &Catalog) -> String {
    let mut shape = format!(
        "{} {} {:?} {}",
        options.target,
        tile_text(options.tile),
        options.partition_joins,
        catalog.compression().name()
    );
    for query in queries {
        shape.push('\n');
        shape.push_str(&constants::shape(query));
    }
    shape
}

/// The tile shape asked for, or `by encoding` where each query's is chosen from how its
/// columns are stored.
pub fn tile_text(tile: Option<TileShape>) -> String {
    tile.map_or_else(|| "by encoding".to_string(), |tile| tile.to_string())
}

/// `program`'s queries, compiled for queries of the same shapes as `queries`, given the
/// constants of `queries` (`None` when the program has another number of queries).
pub fn with_constants(program: &Program, queries: &[PhysicalQuery]) -> Option<Vec<QueryProgram>> {
    if program.queries.len() != queries.len() {
        return None;
    }
    Some(
        program
            .queries
            .iter()
            .zip(queries)
            .map(|(compiled, planned)| QueryProgram {
                constants: planned.constants.iter().map(Constant::value).collect(),
                ..compiled.clone()
            })
            .collect(),
    )
}

/// The program of `queries`, planned from `script` against `catalog` since `started`: code
/// generated, and stored in the kernel cache under `keys`.
pub fn generate(
    script: &Script,
    queries: &[PhysicalQuery],
    catalog: Arc<Catalog>,
    options: &CompileOptions,
    keys: Vec<String>,
    started: Instant,
) -> Result<Compiled, Failure> {
    let plan_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut codegen = CodegenTimes::default();
    let program = pipelines_to_program_timed(
        queries,
        &catalog,
        options.target,
        options.tile,
        &mut codegen,
    )
    .map_err(|d| script.fail(vec![d]))?;
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    let compiled = Compiled {
        program,
        catalog,
        compile_ms,
        plan_ms,
        codegen,
        cache_keys: keys,
        from_cache: false,
        stages: Vec::new(),
    };
    compiled.store();
    Ok(compiled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_storage::compress::Scheme;

    #[test]
    fn columns_are_packed_by_default_on_the_gpu_only() {
        let gpu = Target::Nvptx { sm: 90 };
        assert_eq!(compression_for(gpu, None), Compression::Auto);
        assert_eq!(compression_for(Target::Host, None), Compression::NONE);
        // What the command line asks for wins on either.
        assert_eq!(
            compression_for(gpu, Some(Compression::NONE)),
            Compression::NONE
        );
        assert_eq!(
            compression_for(Target::Host, Some(Compression::Only(Scheme::Pack))),
            Compression::Only(Scheme::Pack)
        );
    }
}
