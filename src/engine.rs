//! The resident engine behind `tessera serve` and `tessera shell`: one catalog of a data folder
//! (columns mapped from the prepared store once, then kept), one device (the GPU's context with
//! its resident columns and loaded kernels, or the host), and the programs compiled so far,
//! kept in memory by script text. Scripts compile outside the device (several at once, through
//! the kernel cache on disk as a fresh process would); queries take the device one at a time, in
//! the order they asked for it, and hold it only until their results are read back: decoding
//! them (dictionary codes to strings, the host's sort and filters) runs after the next query
//! has the device. The stages of a script that runs in stages are queries too: each takes the
//! device in turn, reads the columns resident there, and stops when the script is cancelled.
//!
//! What is kept is bounded: the scripts most recently run (by count, and by the bytes their
//! stages' results take) and the modules of the shapes most recently compiled. A module no
//! script or shape keeps any more is unloaded from the device, and the columns a forgotten
//! script's stage results had there are dropped, the next time a query takes the device.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tessera_compiler::physical::{Estimates, PartitionJoins};
use tessera_compiler::Compilation;
use tessera_grammar::source_to_ast;
use tessera_runtime::exec::gpu::GpuBackend;
use tessera_runtime::exec::host::HostBackend;
use tessera_runtime::exec::{
    run_query_until, Backend, Learned, QueryOutcome, Readback, RuntimeError,
};
use tessera_runtime::program::{Code, Program, QueryProgram};
use tessera_runtime::Target;
use tessera_storage::compress::Compression;
use tessera_storage::{Catalog, DataType};

use crate::commands::cache;
use crate::commands::compile::{open, Script};
use crate::commands::session::{
    choose_target, compile_planned, compile_with_stages, compression_for, configure, run_stage_on,
    shape_of, with_constants, CompileOptions, Compiled, DeviceChoice,
};
use crate::failure::Failure;
use crate::recently_used::RecentlyUsed;

/// Scripts kept ready to run, at most.
const KEPT_SCRIPTS: usize = 1024;
/// Bytes the results of kept scripts' stages take, at most (estimated from their rows).
const KEPT_STAGE_BYTES: u64 = 4 << 30;
/// Modules kept for the scripts of their shape to come, at most.
const KEPT_SHAPES: usize = 256;

/// How an engine is set up.
pub struct EngineOptions {
    pub data: PathBuf,
    pub device: DeviceChoice,
    pub compress: Option<Compression>,
    pub partition_joins: PartitionJoins,
    /// The most bytes of device memory resident columns may take.
    pub gpu_memory: Option<u64>,
    /// Print each script's time waiting for the device and on it to standard error.
    pub timing: bool,
    /// Read and write Tessera's cache on disk: prepared columns and compiled kernels.
    pub cache: bool,
}

pub struct Engine {
    data: PathBuf,
    options: CompileOptions,
    /// Whether compiled kernels go through the cache on disk.
    cache: bool,
    catalog: Arc<Catalog>,
    /// What the engine runs on, in words.
    pub device_name: String,
    /// The device, taken by one query at a time in the order they ask (a fair lock).
    device: tokio::sync::Mutex<Device>,
    /// Scripts ready to run, by text, the most recently run kept.
    programs: Mutex<RecentlyUsed<String, Arc<Resident>>>,
    /// Modules compiled so far, by the shape of their queries (`physical::constants::shape`):
    /// a script that differs from an earlier one only in its constants runs its code.
    shapes: Mutex<RecentlyUsed<String, Arc<Module>>>,
    /// The planner's estimates by predicate shape, kept so that scripts differing only in
    /// their constants are planned alike (`physical::Estimates`), and so share a module.
    estimates: Mutex<Estimates>,
    /// What the device holds for modules and scripts gone, to release when next it is taken.
    retired: Arc<Mutex<Vec<Retired>>>,
    timing: bool,
}

/// Nothing learned yet, for each of `queries`.
fn learned_for(queries: &[QueryProgram]) -> Vec<Learned> {
    queries.iter().map(|_| Learned::default()).collect()
}

/// What the device holds for something the engine no longer keeps.
enum Retired {
    /// A module's code, by its id on the device.
    Program(usize),
    /// The columns of a staged script's stage result, by table name.
    Table(String),
}

/// Compiled code, and its id on the device once loaded there.
struct Module {
    program: Program,
    /// The kernel cache's keys it is stored under, when it came from or went to the cache.
    cache_keys: Vec<String>,
    loaded: Mutex<Option<usize>>,
    /// Where its code is retired once nothing holds the module.
    retired: Arc<Mutex<Vec<Retired>>>,
}

impl Drop for Module {
    fn drop(&mut self) {
        if let Some(id) = *lock(&self.loaded) {
            lock(&self.retired).push(Retired::Program(id));
        }
    }
}

/// A script ready to run: its queries over a module's code, with the script's own constants.
struct Resident {
    module: Arc<Module>,
    queries: Vec<QueryProgram>,
    /// For each query, the room its earlier runs found it needed.
    learned: Vec<Learned>,
    /// The shape its module was registered under, when it was.
    shape: Option<String>,
    origin: Origin,
    /// The catalog it runs against when not the engine's: a script that declares tables, or
    /// one run in stages (whose results are tables of its catalog alone).
    catalog: Option<Arc<Catalog>>,
    /// The tables of its stages' results, which the device may keep columns of, and their
    /// bytes as kept in memory.
    stage_tables: Vec<String>,
    stage_bytes: u64,
    retired: Arc<Mutex<Vec<Retired>>>,
}

impl Drop for Resident {
    fn drop(&mut self) {
        let tables = self.stage_tables.drain(..).map(Retired::Table);
        lock(&self.retired).extend(tables);
    }
}

/// Where a script's program came from, as `--timing` reports it.
#[derive(Clone, Copy)]
enum Origin {
    /// Ready since an earlier run of the same text.
    Resident,
    /// Planned and compiled to machine code now.
    Compiled,
    /// The kernel cache on disk.
    KernelCache,
    /// The module of an earlier script of the same shape, given this script's constants.
    SameShape,
}

impl Origin {
    fn describe(self) -> &'static str {
        match self {
            Origin::Resident => "resident (the same text ran before)",
            Origin::Compiled => "compiled",
            Origin::KernelCache => "from the kernel cache",
            Origin::SameShape => "the code of an earlier script, with its constants",
        }
    }
}

enum Device {
    Gpu(Box<GpuBackend>),
    Host(Box<HostBackend>),
}

impl Device {
    fn backend(&mut self) -> &mut dyn Backend {
        match self {
            Device::Gpu(gpu) => gpu.as_mut(),
            Device::Host(host) => host.as_mut(),
        }
    }

    /// Loads `program`'s code beside the programs loaded before; returns its id.
    fn load(&mut self, program: &Program) -> Result<usize, RuntimeError> {
        match (self, &program.code) {
            (Device::Gpu(gpu), Code::Ptx(ptx)) => {
                Ok(gpu.add_program(ptx, program.cubins.as_ref())?.0)
            }
            (Device::Host(host), Code::HostObject(objects)) => host.add_program(objects),
            _ => Err(RuntimeError::Load(
                "the program was compiled for another device".into(),
            )),
        }
    }

    /// Makes launches run the kernels of program `id`.
    fn use_program(&mut self, id: usize) {
        match self {
            Device::Gpu(gpu) => gpu.use_program(id),
            Device::Host(host) => host.use_program(id),
        }
    }

    /// Unloads program `id`, which runs no more.
    fn remove_program(&mut self, id: usize) {
        match self {
            Device::Gpu(gpu) => gpu.remove_program(id),
            Device::Host(host) => host.remove_program(id),
        }
    }

    /// Drops the columns of `table` resident here, which no query reads any more.
    fn forget_table(&mut self, table: &str) {
        match self {
            Device::Gpu(gpu) => gpu.forget_table(table),
            Device::Host(host) => host.forget_table(table),
        }
    }
}

/// The columns a script's last query returns, as a client is told before any row.
pub type Columns = Vec<(String, DataType)>;

impl Engine {
    /// Opens the data folder and the device.
    pub fn open(options: EngineOptions) -> Result<Engine, Failure> {
        let (target, gpu) = choose_target(options.device)?;
        let compile = CompileOptions {
            target,
            tile: None,
            compress: compression_for(target, options.compress),
            partition_joins: options.partition_joins,
            prepare: options.cache,
            gpu_memory: options.gpu_memory,
        };
        let empty = tessera_grammar::ast::Script { items: Vec::new() };
        let script = Script {
            name: options.data.display().to_string(),
            source: String::new(),
        };
        let catalog = Arc::new(configure(
            open(&script, &empty, &options.data)?,
            &options.data,
            &compile,
        ));
        let device = match target {
            Target::Nvptx { .. } => {
                let mut backend = GpuBackend::empty()?;
                backend.set_memory_budget(options.gpu_memory);
                Device::Gpu(Box::new(backend))
            }
            Target::Host => {
                let mut backend = HostBackend::empty();
                backend.set_memory_budget(options.gpu_memory);
                Device::Host(Box::new(backend))
            }
        };
        let device_name = gpu.map_or("the CPU".to_string(), |g| format!("{} ({target})", g.name));
        Ok(Engine {
            data: options.data,
            options: compile,
            cache: options.cache,
            catalog,
            device_name,
            device: tokio::sync::Mutex::new(device),
            programs: Mutex::new(RecentlyUsed::new(KEPT_SCRIPTS, KEPT_STAGE_BYTES)),
            shapes: Mutex::new(RecentlyUsed::new(KEPT_SHAPES, u64::MAX)),
            estimates: Mutex::new(Estimates::default()),
            retired: Arc::new(Mutex::new(Vec::new())),
            timing: options.timing,
        })
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn data(&self) -> &Path {
        &self.data
    }

    /// The program of `source`: compiled on first use, through the kernel cache on disk, or
    /// the code of an earlier script of the same shape given this one's constants.
    fn compiled(
        &self,
        name: &str,
        source: &str,
        cancelled: &AtomicBool,
    ) -> Result<Arc<Resident>, Failure> {
        Ok(self.compiled_with_origin(name, source, cancelled)?.0)
    }

    /// [`Engine::compiled`], and how this call found the program: a text seen before is
    /// `Origin::Resident`, whatever its program's own origin.
    fn compiled_with_origin(
        &self,
        name: &str,
        source: &str,
        cancelled: &AtomicBool,
    ) -> Result<(Arc<Resident>, Origin), Failure> {
        if let Some(found) = lock(&self.programs).get(source) {
            return Ok((found, Origin::Resident));
        }
        let script = Script {
            name: name.to_string(),
            source: source.to_string(),
        };
        let resident = Arc::new(self.compile(&script, cancelled)?);
        let gone = lock(&self.programs).insert(
            source.to_string(),
            Arc::clone(&resident),
            resident.stage_bytes,
        );
        // Dropped outside the lock: a script's last reference retires what it held.
        drop(gone);
        let origin = resident.origin;
        Ok((resident, origin))
    }

    /// Releases on the device what modules and scripts no longer kept held there.
    fn release_retired(&self, device: &mut Device) {
        let retired = std::mem::take(&mut *lock(&self.retired));
        for leftover in retired {
            match leftover {
                Retired::Program(id) => device.remove_program(id),
                Retired::Table(table) => device.forget_table(&table),
            }
        }
    }

    /// Compiles `script`; a script that runs in stages runs them now, on the device in turn
    /// with other queries, giving up once `cancelled` is set.
    fn compile(&self, script: &Script, cancelled: &AtomicBool) -> Result<Resident, Failure> {
        let ast = source_to_ast(&script.source).map_err(|d| script.fail(d))?;
        let alone = |compiled: Compiled, catalog: Option<Arc<Catalog>>| {
            let origin = match compiled.from_cache {
                true => Origin::KernelCache,
                false => Origin::Compiled,
            };
            let stage_tables: Vec<&tessera_storage::catalog::TableInfo> = catalog
                .iter()
                .flat_map(|own| own.tables())
                .filter(|table| self.catalog.table(&table.name).is_none())
                .collect();
            let stage_bytes = stage_tables
                .iter()
                .map(|table| {
                    let row: usize = table.schema.fields.iter().map(|f| f.ty.width()).sum();
                    table.rows.saturating_mul(row as u64)
                })
                .sum();
            Resident {
                learned: learned_for(&compiled.program.queries),
                queries: compiled.program.queries.clone(),
                module: Arc::new(Module {
                    program: compiled.program,
                    cache_keys: compiled.cache_keys,
                    loaded: Mutex::new(None),
                    retired: Arc::clone(&self.retired),
                }),
                shape: None,
                origin,
                stage_tables: stage_tables.iter().map(|t| t.name.clone()).collect(),
                stage_bytes,
                catalog,
                retired: Arc::clone(&self.retired),
            }
        };
        // A decorrelated join, and a grouped relation joined, run in the engine's catalog
        // when the planner runs the script whole.
        let declares = ast.declares_tables();
        let ast = match !declares && tessera_compiler::decorrelate::candidate(&ast) {
            true => tessera_compiler::decorrelate::rewrite(ast, &self.catalog),
            false => ast,
        };
        let staged = || {
            tessera_compiler::staging::split_unless_planned(
                &ast,
                &self.catalog,
                self.options.partition_joins,
                &mut |n| n.to_string(),
            )
            .is_some()
        };
        if declares || staged() {
            // Declarations change how the data is read, and stages (which decorrelating a join
            // makes) add tables: the script gets a catalog of its own. Each stage takes the
            // device like a query, where the columns it reads may be resident already.
            let mut on_device = |program: &Program, catalog: &Catalog| {
                let mut device = self.device.blocking_lock();
                self.release_retired(&mut device);
                let id = device.load(program)?;
                device.use_program(id);
                let outcome = run_stage_on(device.backend(), program, catalog, cancelled);
                // The stage's result is kept with the script, which never runs it again.
                device.remove_program(id);
                outcome
            };
            let compiled = compile_with_stages(
                script,
                &self.data,
                &self.options,
                self.cache,
                &mut |_| None,
                &mut on_device,
            )?;
            let catalog = Arc::clone(&compiled.catalog);
            return Ok(alone(compiled, Some(catalog)));
        }
        let catalog = Arc::clone(&self.catalog);
        let key = self.options.cache_key(&script.source, &ast, &catalog);
        let started = Instant::now();
        let cached = match self.cache {
            true => Compiled::cached(&key, &catalog, started),
            false => None,
        };
        if let Some(compiled) = cached {
            // Not shared by shape: the data it was planned against may have been planned
            // otherwise than this data is, its constants in other places.
            return Ok(alone(compiled, None));
        }
        let compilation = Compilation::run_remembering(
            ast,
            &catalog,
            self.options.partition_joins,
            &mut lock(&self.estimates),
        )
        .map_err(|d| script.fail(d))?;
        let shape = shape_of(&compilation.physical, &self.options, &catalog);
        let shared = lock(&self.shapes).get(&shape);
        if let Some(module) = shared {
            let queries =
                with_constants(&module.program, &compilation.physical).ok_or_else(|| {
                    Failure::Message("internal error: a shared program's queries differ".into())
                })?;
            return Ok(Resident {
                learned: learned_for(&queries),
                queries,
                module,
                shape: Some(shape),
                origin: Origin::SameShape,
                catalog: None,
                stage_tables: Vec::new(),
                stage_bytes: 0,
                retired: Arc::clone(&self.retired),
            });
        }
        // Compiled now, or by an earlier process for a script of the same shape.
        let compiled = compile_planned(
            script,
            &compilation.physical,
            catalog,
            &self.options,
            self.cache.then_some(key),
            started,
        )?;
        let mut resident = alone(compiled, None);
        let gone = lock(&self.shapes).insert(shape.clone(), Arc::clone(&resident.module), 0);
        drop(gone);
        resident.shape = Some(shape);
        Ok(resident)
    }

    /// The columns each query of `source` returns, compiling it if need be (nothing runs).
    pub fn describe(&self, name: &str, source: &str) -> Result<Vec<Columns>, Failure> {
        let resident = self.compiled(name, source, &AtomicBool::new(false))?;
        Ok(resident
            .queries
            .iter()
            .map(|query| query.result.columns())
            .collect())
    }

    /// Runs every query of `source` (named `name` in reports), waiting for the device in turn,
    /// and gives up once `cancelled` is set (a client's cancel request, Ctrl-C in the shell):
    /// before the device is taken, in running kernels (`exec::Cancel`), and while results
    /// are read back.
    pub fn run(
        &self,
        name: &str,
        source: &str,
        cancelled: &AtomicBool,
    ) -> Result<Vec<QueryOutcome>, Failure> {
        self.run_then(name, source, cancelled, |mut outcome, query, catalog, _| {
            outcome.decode(query, catalog)?;
            let rows = outcome.table.rows.len();
            Ok((outcome, rows))
        })
    }

    /// Runs every query of `source` as [`Engine::run`] does, then hands each one's outcome,
    /// as read back, to `finish` with its program, its catalog and whether it is the
    /// script's last, once the device has gone to the next query: `finish` decodes it (or
    /// writes its rows elsewhere, [`QueryOutcome::write`]) and says how many rows it had.
    pub fn run_then<T>(
        &self,
        name: &str,
        source: &str,
        cancelled: &AtomicBool,
        mut finish: impl FnMut(
            QueryOutcome,
            &QueryProgram,
            &Catalog,
            bool,
        ) -> Result<(T, usize), RuntimeError>,
    ) -> Result<Vec<T>, Failure> {
        // A script that does not even parse never waits for the device.
        source_to_ast(source).map_err(|d| Failure::Script {
            name: name.to_string(),
            source: source.to_string(),
            diagnostics: d,
        })?;
        let (resident, origin) = self.compiled_with_origin(name, source, cancelled)?;
        let asked = Instant::now();
        let mut device = self.device.blocking_lock();
        let taken = Instant::now();
        let result = self.execute(&mut device, &resident, cancelled);
        // Results are decoded (and their host steps run) with the device given to the next
        // query.
        drop(device);
        if self.timing {
            report_timing(source, origin, asked, taken, result.as_ref().ok());
        }
        // A program not compiled for this data (from the kernel cache, or sharing code that
        // came from it) whose assumptions no longer hold: forget it and compile again. The
        // script's entry may be followed by its shape's; each is forgotten in turn, and then
        // the code is generated afresh.
        let (mut resident, mut result) = (resident, result);
        while matches!(result, Err(RuntimeError::Stale(_)))
            && !matches!(resident.origin, Origin::Compiled)
        {
            for key in &resident.module.cache_keys {
                cache::forget(key);
            }
            let forgotten = lock(&self.programs).remove(source);
            drop(forgotten);
            if let Some(shape) = &resident.shape {
                let forgotten = lock(&self.shapes).remove(shape);
                drop(forgotten);
            }
            resident = self.compiled(name, source, cancelled)?;
            let mut device = self.device.blocking_lock();
            result = self.execute(&mut device, &resident, cancelled);
        }
        let outcomes = result?;
        let catalog = resident.catalog.as_deref().unwrap_or(&self.catalog);
        let decoding = Instant::now();
        let mut rows = 0;
        let mut finished = Vec::with_capacity(outcomes.len());
        let queries = resident.queries.len();
        for (at, (outcome, query)) in outcomes.into_iter().zip(&resident.queries).enumerate() {
            let (done, count) = finish(outcome, query, catalog, at + 1 == queries)?;
            finished.push(done);
            rows += count;
        }
        if self.timing {
            eprintln!(
                "timing: {}: results decoded and written in {:.3} ms ({rows} rows)",
                script_name(source),
                decoding.elapsed().as_secs_f64() * 1e3,
            );
        }
        Ok(finished)
    }

    fn execute(
        &self,
        device: &mut Device,
        resident: &Resident,
        cancelled: &AtomicBool,
    ) -> Result<Vec<QueryOutcome>, RuntimeError> {
        self.release_retired(device);
        if cancelled.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(RuntimeError::Cancelled);
        }
        let module = &resident.module;
        let id = {
            let mut loaded = lock(&module.loaded);
            match *loaded {
                Some(id) => id,
                None => {
                    let id = device.load(&module.program)?;
                    *loaded = Some(id);
                    id
                }
            }
        };
        device.use_program(id);
        let backend = device.backend();
        let catalog = resident.catalog.as_deref().unwrap_or(&self.catalog);
        resident
            .queries
            .iter()
            .zip(&resident.learned)
            .map(|(query, learned)| {
                run_query_until(
                    backend,
                    query,
                    catalog,
                    &mut Readback::Fetched,
                    cancelled,
                    learned,
                )
            })
            .collect()
    }
}

/// One line on standard error: how long a script waited for the device and held it, and what
/// its queries spent there (setting up buffers and parameters, kernels, reading results back
/// and decoding them); the rest is loading its program and launching.
fn report_timing(
    source: &str,
    origin: Origin,
    asked: Instant,
    taken: Instant,
    outcomes: Option<&Vec<QueryOutcome>>,
) {
    let first = script_name(source);
    let held = taken.elapsed().as_secs_f64() * 1e3;
    let waited = (taken - asked).as_secs_f64() * 1e3;
    let sum = |part: fn(&QueryOutcome) -> f64| outcomes.map_or(0.0, |o| o.iter().map(part).sum());
    let (setup, kernels, results) = (
        sum(|o| o.timing.setup_ms),
        sum(|o| o.timing.query_ms),
        sum(|o| o.timing.finish_ms),
    );
    let (launched, waited_for_kernels) = (sum(|o| o.timing.launch_ms), sum(|o| o.timing.wait_ms));
    // A query whose kernels ran again (its grouping's table or output too small) spent the
    // earlier runs in `rest`.
    let again = outcomes.map_or(0, |o| {
        o.iter()
            .map(|o| o.timing.runs.saturating_sub(1))
            .sum::<u32>()
    });
    let again = match again {
        0 => String::new(),
        n => format!(", of it {n} earlier run(s) of kernels whose room was too small"),
    };
    let streamed: String = outcomes
        .into_iter()
        .flatten()
        .filter_map(|o| o.timing.streamed.as_ref())
        .map(|streamed| format!("; {streamed}"))
        .collect();
    eprintln!(
        "timing: {first}: waited {waited:.3} ms for the device, held it {held:.3} ms: setup {setup:.3}, kernels {kernels:.3} (host: launching {launched:.3}, then waiting {waited_for_kernels:.3}), results {results:.3}, rest {:.3}{again}; program {}{streamed}",
        held - setup - kernels - results,
        origin.describe(),
    );
}

/// A script as a timing line names it: its first line names it well enough in a log.
pub(crate) fn script_name(source: &str) -> String {
    source
        .trim()
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_runtime::exec::column_of;
    use tessera_storage::Value;

    /// A script in two stages (its `let` is a sorted, limited relation of one row, then
    /// crossed); `bound` varies its text.
    fn staged(bound: i64) -> String {
        format!(
            "let top = from t | sort v desc | take 1 | select most = v\n\
             from t | product top | where v > {bound} | select k, v, most | sort v"
        )
    }

    /// An engine on the CPU over the data folder `data`, with no cache on disk.
    fn cpu_engine(data: &std::path::Path) -> Engine {
        Engine::open(EngineOptions {
            data: data.to_path_buf(),
            device: DeviceChoice::Cpu,
            compress: None,
            partition_joins: PartitionJoins::Auto,
            gpu_memory: None,
            timing: false,
            cache: false,
        })
        .expect("engine")
    }

    #[test]
    fn a_query_whose_room_was_too_small_starts_with_enough_when_run_again() {
        // 20,000 groups of a computed key behind filters the planner cannot estimate (it
        // guesses a third each): the grouping's first table is far too small.
        let data = tempfile::tempdir().expect("temporary folder");
        let rows: String = (0..20_000).map(|i| format!("{i},{}\n", i % 7)).collect();
        std::fs::write(data.path().join("t.csv"), format!("k,v\n{rows}")).expect("written");
        let engine = cpu_engine(data.path());
        let script = "from t | where v == v and k == k and v + k == k + v\n\
                      | derive g = k * 3 | group g { n = count() } | aggregate { groups = count() }";
        let run = || {
            let outcome = engine
                .run("groups", script, &AtomicBool::new(false))
                .expect("runs")
                .remove(0);
            (outcome.table.rows, outcome.timing.runs)
        };
        let (first, first_runs) = run();
        assert_eq!(first, vec![vec![Value::Int(20_000)]]);
        assert!(
            first_runs > 1,
            "the first run's table was large enough: {first_runs} run"
        );
        let (again, runs) = run();
        assert_eq!(again, first);
        assert_eq!(
            runs, 1,
            "the second run started with the table the first one grew to"
        );
    }

    #[test]
    fn scripts_past_the_bound_are_forgotten_with_what_the_device_held_for_them() {
        let data = tempfile::tempdir().expect("temporary folder");
        std::fs::write(data.path().join("t.csv"), "k,v\n1,10\n1,20\n2,5\n3,7\n").expect("written");
        let mut engine = cpu_engine(data.path());
        engine.programs = Mutex::new(RecentlyUsed::new(2, u64::MAX));
        let run = |engine: &Engine, bound: i64| {
            let outcomes = engine
                .run("staged", &staged(bound), &AtomicBool::new(false))
                .expect("runs");
            outcomes[0].table.rows.clone()
        };
        let row =
            |k: i64, v: i64, total: i64| vec![Value::Int(k), Value::Int(v), Value::Int(total)];
        let all = vec![row(2, 5, 20), row(3, 7, 20), row(1, 10, 20), row(1, 20, 20)];
        assert_eq!(run(&engine, 0), all);
        let first_stage_columns = |engine: &Engine| {
            let device = engine.device.blocking_lock();
            let Device::Host(host) = &*device else {
                panic!("the engine runs on the CPU")
            };
            let keys: Vec<String> = host.column_keys().map(str::to_string).collect();
            (keys, host.loaded_programs())
        };
        let (keys, _) = first_stage_columns(&engine);
        let stage = keys
            .iter()
            .find(|key| key.starts_with("stage#"))
            .and_then(|key| key.split('.').next())
            .expect("the script's last query read its stage's result")
            .to_string();
        assert_eq!(run(&engine, 6), all[1..].to_vec());
        assert_eq!(run(&engine, 9), all[2..].to_vec());
        assert_eq!(lock(&engine.programs).len(), 2);
        let (keys, programs) = first_stage_columns(&engine);
        assert!(
            !keys.iter().any(|key| column_of(key, &stage)),
            "the first script's stage result is gone from the device: {keys:?}"
        );
        assert_eq!(programs, 2, "one module per script kept");
        // Forgotten, it runs again from the start.
        assert_eq!(run(&engine, 0), all);
    }
}
