//! The GPU backend, through the CUDA driver API (cudarc): the driver started on its own thread
//! at process start ([`start_early`]), so that its second of set-up overlaps compiling and
//! reading data; kernels loaded from the cubins the driver linked for this GPU when the program
//! carries them, else linked from PTX (a module per kernel, on parallel threads) with the cubins
//! kept for next time; columns uploaded once per process and kept on the device, from memory
//! registered with the driver (page-locked in place) where it can be; buffers allocated and
//! filled per query; kernels timed with CUDA events. The driver library is probed for before
//! cudarc touches it, since its loader panics when `libcuda.so` is absent.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{
    result, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use rayon::prelude::*;

use super::stream::Piece;
use super::{column_of, Backend, Cancel, ColumnBytes, Gathered, RuntimeError};
use crate::program::{BufferSpec, Cubins, Extent, Fill, KernelCode, KernelLaunch};
use crate::tile::gpu_params_in_table;

/// What the GPU is.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub name: String,
    /// Compute capability as `major * 10 + minor` (90 for the H100).
    pub sm: u32,
    pub memory_bytes: u64,
    /// The driver's version, as `cuDriverGetVersion` gives it (13000 for CUDA 13.0).
    pub driver: i32,
}

/// The driver's start on its own thread: first what the GPU is, then its context.
#[derive(Default)]
struct EarlyStart {
    info: OnceLock<Result<GpuInfo, String>>,
    context: OnceLock<Result<Arc<CudaContext>, String>>,
    /// When the start began, and how long the context took to be ready.
    started: OnceLock<Instant>,
    ready_ms: OnceLock<f64>,
}

static EARLY: OnceLock<EarlyStart> = OnceLock::new();

/// Starts the CUDA driver on a thread of its own (at most once per process) and returns at
/// once: initialising the driver and creating the GPU's context take about 0.3 s, which then
/// overlap whatever the process does before it needs the GPU. [`probe`] and [`GpuBackend::new`]
/// wait for it. Without a driver library, nothing starts.
pub fn start_early() {
    // SAFETY: only tries to open the driver library; nothing is called through it.
    if !unsafe { sys::is_culib_present() } {
        return;
    }
    if EARLY.set(EarlyStart::default()).is_err() {
        return;
    }
    std::thread::spawn(|| {
        let Some(early) = EARLY.get() else { return };
        let started = *early.started.get_or_init(Instant::now);
        let info = probe_now().map_err(|e| e.to_string());
        let found = info.is_ok();
        let _ = early.info.set(info);
        let context = if found {
            CudaContext::new(0).map_err(|e| cuda(e).to_string())
        } else {
            Err("no GPU".into())
        };
        let _ = early.ready_ms.set(started.elapsed().as_secs_f64() * 1e3);
        let _ = early.context.set(context);
    });
}

/// Whether this process started the CUDA driver (and holds a context on a GPU).
pub fn driver_started() -> bool {
    EARLY
        .get()
        .and_then(|early| early.context.get())
        .is_some_and(|context| context.is_ok())
}

/// Milliseconds from the driver's early start to its context being ready, once it is.
pub fn early_start_ms() -> Option<f64> {
    EARLY.get().and_then(|early| early.ready_ms.get().copied())
}

/// Finds the first GPU, or says in one line why there is none (waiting for the early start
/// when there is one).
pub fn probe() -> Result<GpuInfo, RuntimeError> {
    match EARLY.get() {
        Some(early) => early.info.wait().clone().map_err(RuntimeError::Cuda),
        None => probe_now(),
    }
}

fn probe_now() -> Result<GpuInfo, RuntimeError> {
    // SAFETY: only tries to open the driver library; nothing is called through it.
    if !unsafe { sys::is_culib_present() } {
        return Err(RuntimeError::NoCuda);
    }
    result::init().map_err(cuda)?;
    let count = result::device::get_count().map_err(cuda)?;
    if count < 1 {
        return Err(RuntimeError::Cuda("the CUDA driver reports no GPU".into()));
    }
    let device = result::device::get(0).map_err(cuda)?;
    let attribute = |attribute| {
        // SAFETY: `device` is a valid device handle and the attribute an integer one.
        unsafe { result::device::get_attribute(device, attribute) }.map_err(cuda)
    };
    let major = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let mut driver = 0;
    // SAFETY: writes one integer.
    unsafe { sys::cuDriverGetVersion(&mut driver) }
        .result()
        .map_err(cuda)?;
    Ok(GpuInfo {
        name: result::device::get_name(device).map_err(cuda)?,
        sm: (major * 10 + minor) as u32,
        // SAFETY: `device` is a valid device handle.
        memory_bytes: unsafe { result::device::total_mem(device) }.map_err(cuda)? as u64,
        driver,
    })
}

/// The GPU's context: the early start's, or one created now.
fn context() -> Result<Arc<CudaContext>, RuntimeError> {
    match EARLY.get() {
        Some(early) => early.context.wait().clone().map_err(RuntimeError::Cuda),
        None => {
            probe_now()?;
            CudaContext::new(0).map_err(cuda)
        }
    }
}

/// How the kernels came to be loaded, for `--timing`.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Milliseconds spent loading (or linking and loading) the kernels.
    pub ms: f64,
    /// Whether they came from the program's cubins (no compiling at all).
    pub from_cubins: bool,
    /// Why the program's cubins were not used, when it carried some.
    pub cubins_refused: Option<String>,
    /// Cubins linked now from the PTX, to keep with the program.
    pub linked: Option<Cubins>,
}

/// Loads every kernel: from `cubins` when they were linked for this GPU and driver and load,
/// else by linking the PTX (keeping the cubins), on as many threads as there are cores and
/// kernels.
fn load_modules(
    context: &Arc<CudaContext>,
    info: &GpuInfo,
    ptx: &[KernelCode],
    cubins: Option<&Cubins>,
) -> Result<(HashMap<String, Arc<CudaModule>>, LoadReport), RuntimeError> {
    let started = Instant::now();
    let mut report = LoadReport::default();
    if let Some(cubins) = cubins {
        let fits = cubins.sm == info.sm
            && cubins.driver == info.driver
            && cubins.kernels.len() == ptx.len()
            && cubins
                .kernels
                .iter()
                .zip(ptx)
                .all(|(c, p)| c.kernel == p.kernel);
        if fits {
            match parallel(ptx.len(), |i| load_cubin(context, &cubins.kernels[i])) {
                Ok(loaded) => {
                    report.from_cubins = true;
                    report.ms = started.elapsed().as_secs_f64() * 1e3;
                    return Ok((loaded.into_iter().collect(), report));
                }
                Err(e) => report.cubins_refused = Some(e.to_string()),
            }
        } else {
            report.cubins_refused = Some(format!(
                "they were linked for sm_{} with driver {}, this is sm_{} with driver {}",
                cubins.sm, cubins.driver, info.sm, info.driver
            ));
        }
    }
    let linked = parallel(ptx.len(), |i| link(context, &ptx[i]))?;
    let mut modules = HashMap::new();
    let mut kernels = Vec::with_capacity(linked.len());
    for ((name, module), cubin) in linked {
        modules.insert(name.clone(), module);
        kernels.push(KernelCode {
            kernel: name,
            text: hex(&cubin),
        });
    }
    report.linked = Some(Cubins {
        sm: info.sm,
        driver: info.driver,
        kernels,
    });
    report.ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((modules, report))
}

/// `work(0..count)` spread over the cores, results in order.
fn parallel<T: Send>(
    count: usize,
    work: impl Fn(usize) -> Result<T, RuntimeError> + Sync,
) -> Result<Vec<T>, RuntimeError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(count)
        .max(1);
    let chunk = count.div_ceil(threads).max(1);
    let work = &work;
    let done: Vec<Result<Vec<T>, RuntimeError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..count)
            .step_by(chunk)
            .map(|start| {
                scope.spawn(move || (start..(start + chunk).min(count)).map(work).collect())
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(RuntimeError::Load("a loading thread failed".into())))
            })
            .collect()
    });
    let mut all = Vec::with_capacity(count);
    for part in done {
        all.extend(part?);
    }
    Ok(all)
}

/// A kernel's name and the module holding it.
type LoadedKernel = (String, Arc<CudaModule>);

fn load_cubin(context: &Arc<CudaContext>, unit: &KernelCode) -> Result<LoadedKernel, RuntimeError> {
    let image = unhex(&unit.text)
        .ok_or_else(|| RuntimeError::Load(format!("the cubin of {} is not hex", unit.kernel)))?;
    let module = context
        .load_module(Ptx::from_binary(image))
        .map_err(|e| RuntimeError::Load(format!("the cubin of {}: {e}", unit.kernel)))?;
    Ok((unit.kernel.clone(), module))
}

/// Links one kernel's PTX into a cubin with the driver's linker (the same compiler that loading
/// PTX runs), then loads the cubin.
fn link(
    context: &Arc<CudaContext>,
    unit: &KernelCode,
) -> Result<(LoadedKernel, Vec<u8>), RuntimeError> {
    let rejected = |e: DriverError| {
        RuntimeError::Load(format!(
            "the CUDA driver rejected the PTX of {}: {e}",
            unit.kernel
        ))
    };
    context.bind_to_thread().map_err(cuda)?;
    let mut source = unit.text.clone().into_bytes();
    source.push(0);
    let name = c"kernel.ptx";
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    // SAFETY: no options are passed; `state` receives a new link state, destroyed below.
    unsafe { sys::cuLinkCreate_v2(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state) }
        .result()
        .map_err(rejected)?;
    let linked = (|| {
        // SAFETY: `source` is NUL-terminated PTX of `source.len()` bytes that outlives the call.
        unsafe {
            sys::cuLinkAddData_v2(
                state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                source.as_mut_ptr().cast::<c_void>(),
                source.len(),
                name.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        let mut cubin: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: on success the driver points `cubin` at `size` bytes owned by `state`.
        unsafe { sys::cuLinkComplete(state, &mut cubin, &mut size) }.result()?;
        // SAFETY: copied out before `state` is destroyed.
        Ok(unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) }.to_vec())
    })();
    // SAFETY: `state` was created above and is not used after this.
    unsafe { sys::cuLinkDestroy(state) };
    let cubin = linked.map_err(rejected)?;
    let module = context
        .load_module(Ptx::from_binary(cubin.clone()))
        .map_err(rejected)?;
    Ok(((unit.kernel.clone(), module), cubin))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let value = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    digits
        .chunks(2)
        .map(|pair| Some(value(pair[0])? << 4 | value(pair[1])?))
        .collect()
}

/// Host memory below this size is copied as it is; above it, registered with the driver first
/// (page-locking it in place costs far less than a copy from pageable memory).
const REGISTER_AT_LEAST: usize = 1 << 20;
const HOST_PAGE: usize = 4096;

/// A host range registered with the driver, with what keeps its memory alive.
struct Registered {
    pointer: *mut c_void,
    _source: ColumnBytes,
}

// SAFETY: the pointer is only handed back to the driver to unregister the range, which
// `_source` (shared, immutable column bytes) keeps alive from whichever thread holds it.
unsafe impl Send for Registered {}

pub struct GpuBackend {
    context: Arc<CudaContext>,
    /// How the kernels were loaded.
    pub load: LoadReport,
    /// Host memory registered for uploads, unregistered when the backend goes.
    registered: Vec<Registered>,
    /// Bytes uploaded from registered memory, and from pageable memory.
    pub uploaded: (u64, u64),
    stream: Arc<CudaStream>,
    /// The module holding each kernel, per program loaded (a resident engine loads many), and
    /// the program launches use.
    programs: Vec<HashMap<String, Arc<CudaModule>>>,
    active: usize,
    /// Kernels loaded so far, with the number of their blocks that fit on the GPU at once.
    functions: HashMap<(usize, String), (CudaFunction, u32)>,
    multiprocessors: u32,
    columns: HashMap<String, CudaSlice<u8>>,
    /// The most bytes resident columns may take (`None`: as many as fit), what they take, when
    /// each was last used (a counter of queries), and those the current query uses.
    budget: Option<u64>,
    resident_bytes: u64,
    last_used: HashMap<String, u64>,
    queries: u64,
    buffers: Vec<CudaSlice<u8>>,
    /// Pieces of a streamed table's columns, one buffer per column slot (`Backend::stage`), in
    /// two sets: a piece is copied into one set while the kernel of the piece before reads the
    /// other.
    staged: [Vec<CudaSlice<u8>>; STAGING_SETS],
    /// The stream the pieces are copied on (made when a table first streams), beside `stream`,
    /// which runs the kernels.
    copies: Option<Arc<CudaStream>>,
    /// The stream a cancel is written to the running kernels on, made the first time.
    cancels: Option<Arc<CudaStream>>,
    /// The set the piece being staged goes into, between `begin_piece` and its launch.
    piece: Option<usize>,
    /// Per set of staging buffers, when the last kernel reading it is done: the next copy into
    /// the set waits for it.
    read: [Option<CudaEvent>; STAGING_SETS],
    /// Kernels queued since the last `wait`, with events around each.
    pending: Vec<(String, CudaEvent, CudaEvent)>,
    /// The kernels that gather a grouped result's groups (`gather.ptx`), once loaded.
    gathering: Option<(CudaFunction, CudaFunction)>,
    /// Page-locked host memory large reads are copied through (`download`), made the first
    /// time one is.
    landing: Option<PinnedHostSlice<u8>>,
}

/// Reads of fewer bytes are copied straight into pageable memory: the driver's own staging
/// serves them as well.
const LANDED_FROM_BYTES: usize = 4 << 20;
/// Bytes of page-locked memory a large read lands in, a piece at a time.
const LANDING_BYTES: usize = 32 << 20;
/// Bytes each thread copies from the landing memory at a time.
const LANDED_COPY_BYTES: usize = 1 << 20;

/// Sets of staging buffers for a streamed table's pieces: one filled while the kernel of the
/// piece before reads the other.
const STAGING_SETS: usize = 2;

/// Device memory kept free beside columns and buffers when no budget is given: a launch's
/// local memory and the driver's own allocations take some.
const LAUNCH_HEADROOM: u64 = 256 << 20;

/// How long a wait for kernels spins before it polls: most queries' kernels end sooner.
const SPIN_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// How often a longer wait looks whether the kernels ended, or the query was cancelled.
const POLL_INTERVAL: std::time::Duration = std::time::Duration::from_micros(100);

/// Bytes of a query's buffers past which they are handed back to the device when it ends,
/// rather than kept pooled until the next query.
const RETURNED_AT_ONCE: usize = 1 << 30;

/// The kernels of [`GpuBackend::gather_present`].
const GATHER_PTX: &str = include_str!("gather.ptx");

/// Threads per block of the gathering kernels (whole warps, as `tessera_present_slots` needs).
const GATHER_THREADS: u32 = 256;

impl GpuBackend {
    /// The backend for a program's kernels: `ptx`, or `cubins` where they fit this GPU.
    pub fn new(ptx: &[KernelCode], cubins: Option<&Cubins>) -> Result<GpuBackend, RuntimeError> {
        let mut backend = GpuBackend::empty()?;
        let (id, load) = backend.add_program(ptx, cubins)?;
        backend.use_program(id);
        backend.load = load;
        Ok(backend)
    }

    /// Loads a program's kernels (`ptx`, or `cubins` where they fit this GPU); returns its id
    /// for [`GpuBackend::use_program`], and how the kernels were loaded.
    pub fn add_program(
        &mut self,
        ptx: &[KernelCode],
        cubins: Option<&Cubins>,
    ) -> Result<(usize, LoadReport), RuntimeError> {
        let info = probe()?;
        let (modules, load) = load_modules(&self.context, &info, ptx, cubins)?;
        self.programs.push(modules);
        Ok((self.programs.len() - 1, load))
    }

    /// Makes launches run the kernels of program `id`.
    pub fn use_program(&mut self, id: usize) {
        self.active = id;
    }

    /// Unloads program `id`, which runs no more (a stage's, once it has run); the ids of the
    /// others stay.
    pub fn remove_program(&mut self, id: usize) {
        if let Some(modules) = self.programs.get_mut(id) {
            modules.clear();
        }
        self.functions.retain(|(program, _), _| *program != id);
    }

    /// Frees the resident columns of `table` (a stage's result no query reads again).
    pub fn forget_table(&mut self, table: &str) {
        let keys: Vec<String> = self
            .columns
            .keys()
            .filter(|key| column_of(key, table))
            .cloned()
            .collect();
        for key in keys {
            self.drop_column(&key);
        }
    }

    /// Frees resident column `key`.
    fn drop_column(&mut self, key: &str) {
        self.last_used.remove(key);
        if let Some(slice) = self.columns.remove(key) {
            self.resident_bytes -= slice.len() as u64;
        }
    }

    /// The GPU's backend with no program loaded yet.
    pub fn empty() -> Result<GpuBackend, RuntimeError> {
        probe()?;
        let context = context()?;
        // Every launch and copy goes through one stream, in order; per-buffer events would
        // only add work.
        // SAFETY: no buffer is shared between streams.
        unsafe { context.disable_event_tracking() };
        let stream = context.default_stream();
        keep_freed_memory(&context);
        let multiprocessors = context
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(cuda)?
            .max(1) as u32;
        Ok(GpuBackend {
            multiprocessors,
            context,
            load: LoadReport::default(),
            registered: Vec::new(),
            uploaded: (0, 0),
            stream,
            programs: Vec::new(),
            active: 0,
            functions: HashMap::new(),
            columns: HashMap::new(),
            budget: None,
            resident_bytes: 0,
            last_used: HashMap::new(),
            queries: 0,
            buffers: Vec::new(),
            staged: Default::default(),
            copies: None,
            cancels: None,
            piece: None,
            read: Default::default(),
            pending: Vec::new(),
            gathering: None,
            landing: None,
        })
    }

    /// Keeps resident columns within `bytes` of device memory (as much as fits when `None`): a
    /// column not used by the query running is dropped, least recently used first, to make
    /// room for one it needs.
    pub fn set_memory_budget(&mut self, bytes: Option<u64>) {
        self.budget = bytes;
    }

    /// Makes room for `bytes` more of resident columns within the budget.
    fn make_room(&mut self, key: &str, bytes: u64) -> Result<(), RuntimeError> {
        let Some(budget) = self.budget else {
            return Ok(());
        };
        while self.resident_bytes + bytes > budget {
            if !self.drop_least_recent_column() {
                return Err(RuntimeError::OutOfMemory(format!(
                    "`{key}` does not fit the GPU memory budget of {budget} bytes beside the other columns this query reads"
                )));
            }
        }
        Ok(())
    }

    /// Frees the least recently used resident column that the running query does not read;
    /// false when there is none.
    fn drop_least_recent_column(&mut self) -> bool {
        let victim = self
            .last_used
            .iter()
            .filter(|(_, &used)| used < self.queries)
            .min_by_key(|(_, &used)| used)
            .map(|(k, _)| k.clone());
        let Some(victim) = victim else {
            return false;
        };
        self.drop_column(&victim);
        true
    }

    /// Device memory from `allocate`, freeing resident columns the running query does not
    /// read, least recently used first, while the device has too little free: without a
    /// budget, columns stay resident until the memory is wanted.
    fn allocate_evicting(
        &mut self,
        what: &str,
        bytes: usize,
        allocate: impl Fn(&Arc<CudaStream>) -> Result<CudaSlice<u8>, DriverError>,
    ) -> Result<CudaSlice<u8>, RuntimeError> {
        let mut released = false;
        loop {
            match allocate(&self.stream) {
                Ok(slice) => return Ok(slice),
                Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => {
                    // What is freed already first, then the least recently used column.
                    if released && !self.drop_least_recent_column() {
                        return Err(memory(e, what, bytes));
                    }
                    self.release_freed_memory();
                    released = true;
                }
                Err(e) => return Err(memory(e, what, bytes)),
            }
        }
    }

    /// Gives the memory of the buffers freed so far back to the device. A buffer is freed in
    /// its stream's order into the device's memory pool, which keeps the memory until the
    /// stream has caught up and the pool is trimmed; until then an allocation of another size
    /// fails while another process holds the rest of the device.
    fn release_freed_memory(&self) {
        // A failure here shows as the retried allocation's error.
        if self.stream.synchronize().is_err() {
            return;
        }
        if let Some(pool) = memory_pool(&self.context) {
            // SAFETY: the pool is the device's current one, valid while the context is.
            let _ = unsafe { result::mem_pool::trim_to(pool, 0) };
        }
    }

    /// A kernel and how many blocks of `threads` can be resident on the whole GPU at once.
    fn function(&mut self, name: &str, threads: u32) -> Result<(CudaFunction, u32), RuntimeError> {
        let key = (self.active, name.to_string());
        if let Some(f) = self.functions.get(&key) {
            return Ok(f.clone());
        }
        let module = self
            .programs
            .get(self.active)
            .and_then(|modules| modules.get(name))
            .ok_or_else(|| RuntimeError::Load(format!("kernel {name} is not in the program")))?;
        let f = module
            .load_function(name)
            .map_err(|e| RuntimeError::Load(format!("kernel {name}: {e}")))?;
        let per_multiprocessor = f
            .occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)
            .map_err(cuda)?
            .max(1);
        let resident = per_multiprocessor * self.multiprocessors;
        self.functions.insert(key, (f.clone(), resident));
        Ok((f, resident))
    }

    /// The kernels that find a grouped result's present slots and gather a buffer's elements
    /// there, loaded (compiled by the driver) on first use.
    fn gathering_kernels(&mut self) -> Result<(CudaFunction, CudaFunction), RuntimeError> {
        if let Some(kernels) = &self.gathering {
            return Ok(kernels.clone());
        }
        let failed = |e: DriverError| RuntimeError::Load(format!("the gathering kernels: {e}"));
        let module = self
            .context
            .load_module(Ptx::from_src(GATHER_PTX))
            .map_err(failed)?;
        let kernels = (
            module
                .load_function("tessera_present_slots")
                .map_err(failed)?,
            module.load_function("tessera_gather").map_err(failed)?,
        );
        self.gathering = Some(kernels.clone());
        Ok(kernels)
    }

    /// Blocks for a grid-stride loop over `items`: enough to fill the GPU, no more.
    fn grid_for(&self, items: u64) -> LaunchConfig {
        let blocks = items
            .div_ceil(u64::from(GATHER_THREADS))
            .clamp(1, u64::from(self.multiprocessors) * 8);
        LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (GATHER_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// `bytes` bytes of device memory from `source`, once the work queued before has run.
    /// A large read lands in page-locked memory a piece at a time and is copied out on every
    /// core: straight into fresh pageable memory, the driver copied 15 M groups' columns (TPC-H
    /// Q21's stage at SF 10) at 1.3 GB/s, faulting the pages in one by one.
    fn download(&mut self, source: u64, bytes: usize) -> Result<Vec<u8>, RuntimeError> {
        if bytes < LANDED_FROM_BYTES {
            let mut host = vec![0u8; bytes];
            // SAFETY: `source` holds `bytes` bytes of device memory, and the copy is waited for
            // before `host` is read.
            unsafe { result::memcpy_dtoh_async(&mut host, source, self.stream.cu_stream()) }
                .map_err(cuda)?;
            self.stream.synchronize().map_err(cuda)?;
            return Ok(host);
        }
        let landing = match &mut self.landing {
            Some(landing) => landing,
            // SAFETY: only bytes a copy wrote are read. Not write-combined: the host reads it.
            none => none.insert(
                unsafe { self.context.alloc_pinned_with_flags::<u8>(LANDING_BYTES, 0) }.map_err(
                    |e| memory(e, "page-locked memory to read results into", LANDING_BYTES),
                )?,
            ),
        };
        // Zeroed pages are mapped as the threads below first write them, on every core.
        let mut host = vec![0u8; bytes];
        for (index, piece) in host.chunks_mut(LANDING_BYTES).enumerate() {
            let from = source + (index * LANDING_BYTES) as u64;
            let landed = &mut landing.as_mut_slice().map_err(cuda)?[..piece.len()];
            // SAFETY: `from` holds `piece.len()` bytes of device memory (within `bytes` from
            // `source`), `landed` as many of page-locked memory, and the copy is waited for
            // before it is read.
            unsafe { result::memcpy_dtoh_async(landed, from, self.stream.cu_stream()) }
                .map_err(cuda)?;
            self.stream.synchronize().map_err(cuda)?;
            piece
                .par_chunks_mut(LANDED_COPY_BYTES)
                .zip(landed.par_chunks(LANDED_COPY_BYTES))
                .for_each(|(to, from)| to.copy_from_slice(from));
        }
        Ok(host)
    }

    fn address(&self, slice: &CudaSlice<u8>) -> u64 {
        let (pointer, _sync) = slice.device_ptr(&self.stream);
        pointer
    }

    fn event(&self) -> Result<CudaEvent, RuntimeError> {
        self.stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda)
    }

    /// Page-locks `length` bytes at `pointer` in place so the GPU copies them at full speed;
    /// false (and a copy from pageable memory instead) when the driver will not. A mapped
    /// region is whole pages of a read-only mapping, registered as such.
    fn register(&mut self, pointer: *const u8, length: usize, mapped: bool) -> bool {
        let (start, bytes, flags) = if mapped {
            (
                pointer,
                length.div_ceil(HOST_PAGE) * HOST_PAGE,
                sys::CU_MEMHOSTREGISTER_READ_ONLY,
            )
        } else {
            (pointer, length, 0)
        };
        if self.context.bind_to_thread().is_err() {
            return false;
        }
        // SAFETY: the range lies in memory this process owns (a mapped region's last page is
        // part of its section's padding) and stays alive while registered.
        unsafe { sys::cuMemHostRegister_v2(start.cast_mut().cast::<c_void>(), bytes, flags) }
            .result()
            .is_ok()
    }

    /// What moving `host` (a mapped file's pages, as prepared columns are) to the GPU costs
    /// here: milliseconds to register a megabyte of it in place, and bytes per second copied
    /// from it once registered (the best of three copies).
    pub fn host_copy_costs(&mut self, host: &[u8]) -> Result<(f64, f64), RuntimeError> {
        let bytes = host.len();
        let mut device = unsafe { self.stream.alloc::<u8>(bytes.max(8)) }
            .map_err(|e| memory(e, "a copy test", bytes))?;
        self.context.bind_to_thread().map_err(cuda)?;
        let pointer = host.as_ptr().cast_mut().cast::<c_void>();
        let started = Instant::now();
        // SAFETY: `host` is live for this call and unregistered below.
        unsafe { sys::cuMemHostRegister_v2(pointer, bytes, sys::CU_MEMHOSTREGISTER_READ_ONLY) }
            .result()
            .map_err(cuda)?;
        let register_ms_per_mb = started.elapsed().as_secs_f64() * 1e3 / (bytes as f64 / 1e6);
        let mut best = f64::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            self.stream.memcpy_htod(host, &mut device).map_err(cuda)?;
            self.stream.synchronize().map_err(cuda)?;
            best = best.min(started.elapsed().as_secs_f64());
        }
        // SAFETY: registered above; the copies are over.
        unsafe { sys::cuMemHostUnregister(pointer) };
        Ok((register_ms_per_mb, bytes as f64 / best))
    }

    /// Whether `source`'s bytes are registered with the driver (page-locked in place),
    /// registering them the first time: borrowed bytes of at least [`REGISTER_AT_LEAST`], which
    /// stay registered (and alive) until the backend goes, so a column uploaded again after its
    /// eviction, or streamed in pieces, copies from them at the bus's speed.
    fn registered_in_place(&mut self, source: &ColumnBytes) -> bool {
        let (bytes, _) = source.data();
        let std::borrow::Cow::Borrowed(bytes) = bytes else {
            return false;
        };
        let pointer = bytes.as_ptr().cast_mut().cast::<c_void>();
        if bytes.len() < REGISTER_AT_LEAST {
            return false;
        }
        if self.registered.iter().any(|known| known.pointer == pointer) {
            return true;
        }
        if !self.register(bytes.as_ptr(), bytes.len(), source.is_mapped()) {
            return false;
        }
        self.registered.push(Registered {
            pointer,
            _source: source.clone(),
        });
        true
    }

    /// Waits until `last` has happened. Once `cancel` is requested meanwhile, sets its word on
    /// a stream of its own, beside the kernels still running, which then leave their rounds
    /// over a tile's matches (a scan runs to its end); they are still waited for, so that the
    /// query's buffers are freed unused.
    fn until_done(&mut self, last: &CudaEvent, cancel: Cancel<'_>) -> Result<(), DriverError> {
        let started = Instant::now();
        let mut told = false;
        while !last.try_is_complete()? {
            if !told && cancel.is_requested() {
                let stream = match &self.cancels {
                    Some(stream) => stream.clone(),
                    None => self.context.new_stream()?,
                };
                self.cancels = Some(stream.clone());
                // SAFETY: the word lies in the query's status buffer, which is freed only
                // after this wait; a byte of 1 makes the little-endian word non-zero.
                unsafe { result::memset_d8_async(cancel.word, 1, 1, stream.cu_stream())? };
                told = true;
            }
            // Short waits are spun, so a quick query is not answered late; longer ones poll.
            match started.elapsed() < SPIN_WAIT {
                true => std::thread::yield_now(),
                false => std::thread::sleep(POLL_INTERVAL),
            }
        }
        Ok(())
    }

    /// The stream pieces of streamed tables are copied on, made the first time.
    fn copy_stream(&mut self) -> Result<Arc<CudaStream>, RuntimeError> {
        if let Some(copies) = &self.copies {
            return Ok(copies.clone());
        }
        let copies = self.context.new_stream().map_err(cuda)?;
        self.copies = Some(copies.clone());
        Ok(copies)
    }

    /// Copies `bytes` to the start of staging buffer `slot` of the current set, through the
    /// driver's staging.
    fn copy_to_staged(&mut self, slot: usize, bytes: &[u8]) -> Result<(), RuntimeError> {
        let copies = self.copy_stream()?;
        let staged = self.staged[self.piece.unwrap_or(0)]
            .get_mut(slot)
            .ok_or_else(|| RuntimeError::Malformed(format!("staging slot {slot} skipped")))?;
        if !bytes.is_empty() {
            let mut view = staged.slice_mut(0..bytes.len());
            copies.memcpy_htod(bytes, &mut view).map_err(cuda)?;
        }
        self.uploaded.1 += bytes.len() as u64;
        Ok(())
    }

    /// Bytes of device memory free now.
    pub fn free_memory(&self) -> Option<u64> {
        self.context
            .mem_get_info()
            .ok()
            .map(|(free, _)| free as u64)
    }
}

impl Backend for GpuBackend {
    fn column(&mut self, key: &str, source: ColumnBytes) -> Result<u64, RuntimeError> {
        if let Some(slice) = self.columns.get(key) {
            self.last_used.insert(key.to_string(), self.queries);
            return Ok(self.address(slice));
        }
        let (bytes, zeros) = source.data();
        let length = bytes.len();
        // An empty allocation is not allowed; a column of no rows is never read anyway.
        let size = (length + zeros).max(8);
        self.make_room(key, size as u64)?;
        let pointer = bytes.as_ptr();
        let registered = self.registered_in_place(&source);
        // SAFETY: the whole allocation is written before any kernel, queued after these writes
        // on the same stream, reads it: the bytes by the copy below, the rest with zeros.
        let mut slice =
            self.allocate_evicting(key, size, |stream| unsafe { stream.alloc::<u8>(size) })?;
        let address = self.address(&slice);
        if size > length {
            // SAFETY: the zeros lie within the allocation just made, written on its stream.
            unsafe {
                sys::cuMemsetD8Async(
                    address + length as u64,
                    0,
                    size - length,
                    self.stream.cu_stream(),
                )
            }
            .result()
            .map_err(cuda)?;
        }
        if registered {
            // SAFETY: `length` bytes at `pointer` stay alive and registered until the backend
            // is dropped (`registered` keeps their owner), after the stream has finished.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    address,
                    pointer.cast::<c_void>(),
                    length,
                    self.stream.cu_stream(),
                )
            }
            .result()
            .map_err(cuda)?;
            self.uploaded.0 += length as u64;
        } else if length > 0 {
            self.uploaded.1 += length as u64;
            let mut view = slice.slice_mut(0..length);
            self.stream
                .memcpy_htod(bytes.as_ref(), &mut view)
                .map_err(cuda)?;
        }
        self.columns.insert(key.to_string(), slice);
        self.resident_bytes += size as u64;
        self.last_used.insert(key.to_string(), self.queries);
        Ok(address)
    }
    fn buffer(&mut self, spec: &BufferSpec, bytes: u64) -> Result<u64, RuntimeError> {
        let elements = bytes / u64::from(spec.element_bytes.max(1));
        let bytes = bytes.max(8) as usize;
        // Zeroes only what neither a pattern nor the kernels write: zeroing SF 10's TPC-H Q21
        // buffers whole (7 GB of partitioned rows and `min`/`max` slots) took 2 ms.
        let slice = self.allocate_evicting(&spec.name, bytes, |stream| match spec.fill {
            Fill::Zero => stream.alloc_zeros::<u8>(bytes),
            // SAFETY: device memory, never read on the host before a kernel or a fill below
            // writes it (`Fill::Unset`: kernels write what they read).
            Fill::Pattern(_) | Fill::Unset => unsafe { stream.alloc::<u8>(bytes) },
        })?;
        let address = self.address(&slice);
        if let Fill::Pattern(pattern) = spec.fill {
            let stream = self.stream.cu_stream();
            // A 16-byte element repeats the 8-byte pattern (see `wide_atomics`): two of them.
            let count = elements as usize * (spec.element_bytes as usize).div_ceil(8).max(1);
            // SAFETY: the pattern is written within the buffer just allocated, on its stream.
            unsafe {
                match spec.element_bytes {
                    1 => sys::cuMemsetD8Async(address, pattern as u8, count, stream).result(),
                    2 => sys::cuMemsetD16Async(address, pattern as u16, count, stream).result(),
                    4 => sys::cuMemsetD32Async(address, pattern as u32, count, stream).result(),
                    _ => fill_words(address, pattern, count, stream).result(),
                }
            }
            .map_err(cuda)?;
        }
        self.buffers.push(slice);
        Ok(address)
    }

    fn launch(
        &mut self,
        kernel: &KernelLaunch,
        rows: u64,
        args: &[u64],
        _: Cancel<'_>,
    ) -> Result<(), RuntimeError> {
        let (function, resident) = self.function(&kernel.name, kernel.tile.threads)?;
        let grid = match kernel.extent {
            // A persistent grid: as many blocks as fit at once, each looping over tiles.
            Extent::Tiles | Extent::GroupSlots(_) => {
                rows.div_ceil(u64::from(kernel.tile.items()))
                    .min(u64::from(resident)) as u32
            }
            Extent::Parts(parts) => parts,
        };
        // A kernel over a piece of a streamed table starts once the piece's copies are done.
        let piece = self.piece.take();
        if piece.is_some() {
            let copied = self.copy_stream()?.record_event(None).map_err(cuda)?;
            self.stream.wait(&copied).map_err(cuda)?;
        }
        let start = self.event()?;
        if grid > 0 {
            let config = LaunchConfig {
                grid_dim: (grid, 1, 1),
                block_dim: (kernel.tile.threads, 1, 1),
                shared_mem_bytes: 0,
            };
            // A kernel of many parameters reads them from a table in device memory, freed with
            // the query's buffers once its kernels are done.
            let table;
            let args = if gpu_params_in_table(args.len()) {
                let words: Vec<u8> = args.iter().flat_map(|arg| arg.to_le_bytes()).collect();
                let slice = self
                    .stream
                    .clone_htod(&words)
                    .map_err(|e| memory(e, "a kernel's parameters", words.len()))?;
                table = [self.address(&slice)];
                self.buffers.push(slice);
                &table[..]
            } else {
                args
            };
            let mut launch = self.stream.launch_builder(&function);
            for arg in args {
                launch.arg(arg);
            }
            // SAFETY: the arguments match the kernel's parameters (the compiler emitted both
            // from the same list), and every address points to live device memory of the
            // right size.
            unsafe { launch.launch(config) }
                .map_err(|e| RuntimeError::Cuda(format!("launching {}: {e}", kernel.name)))?;
        }
        let end = self.event()?;
        self.pending.push((kernel.name.clone(), start, end));
        if let Some(set) = piece {
            self.read[set] = Some(self.stream.record_event(None).map_err(cuda)?);
        }
        Ok(())
    }

    fn wait(&mut self, cancel: Cancel<'_>) -> Result<(Vec<f64>, f64), RuntimeError> {
        let pending = std::mem::take(&mut self.pending);
        if let Some((name, _, last)) = pending.last() {
            self.until_done(last, cancel)
                .map_err(|e| RuntimeError::Cuda(format!("kernel {name} failed: {e}")))?;
        }
        cancel.check()?;
        let mut each = Vec::with_capacity(pending.len());
        for (name, start, end) in &pending {
            let ms = start
                .elapsed_ms(end)
                .map_err(|e| RuntimeError::Cuda(format!("kernel {name} failed: {e}")))?;
            each.push(f64::from(ms));
        }
        let total = match (pending.first(), pending.last()) {
            (Some((_, first, _)), Some((_, _, last))) => {
                f64::from(first.elapsed_ms(last).map_err(cuda)?)
            }
            _ => 0.0,
        };
        Ok((each, total))
    }

    fn copy_bandwidth(&mut self) -> Result<f64, RuntimeError> {
        let bytes = 1usize << 30;
        let source = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| memory(e, "a bandwidth test", bytes))?;
        let mut target = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| memory(e, "a bandwidth test", bytes))?;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = self.event()?;
            self.stream
                .memcpy_dtod(&source, &mut target)
                .map_err(cuda)?;
            let end = self.event()?;
            best = best.min(f64::from(start.elapsed_ms(&end).map_err(cuda)?));
        }
        Ok(2.0 * bytes as f64 / (best * 1e-3))
    }

    fn read(&mut self, address: u64, offset: u64, bytes: u64) -> Result<Vec<u8>, RuntimeError> {
        let slice = self
            .buffers
            .iter()
            .find(|b| self.address(b) == address)
            .ok_or_else(|| RuntimeError::Malformed("read of an unknown buffer".into()))?;
        // Only the bytes asked for cross the bus: a buffer of rows is sized for the most rows
        // a query could write, and usually holds far fewer.
        let start = (offset as usize).min(slice.len());
        let end = start.saturating_add(bytes as usize).min(slice.len());
        let view = slice.slice(start..end);
        let (source, _) = view.device_ptr(&self.stream);
        self.download(source, end - start)
    }

    fn gather_present(
        &mut self,
        flags: u64,
        flag_bytes: u32,
        slots: u64,
        columns: &[(u64, u32)],
        most: u64,
    ) -> Result<Option<Gathered>, RuntimeError> {
        // Slot indices travel as 32 bits; flags are bytes or 64-bit words.
        let (Ok(_), Ok(limit)) = (u32::try_from(slots), u32::try_from(most)) else {
            return Ok(None);
        };
        if limit == 0 || !matches!(flag_bytes, 1 | 8) {
            return Ok(None);
        }
        let (find, gather) = self.gathering_kernels()?;
        let count = self
            .stream
            .alloc_zeros::<u8>(8)
            .map_err(|e| memory(e, "the count of groups", 8))?;
        let index_bytes = limit as usize * 4;
        // SAFETY: only the indices the kernel writes, below the count it returns, are read.
        let indices = unsafe { self.stream.alloc::<u8>(index_bytes) }
            .map_err(|e| memory(e, "the indices of groups", index_bytes))?;
        let (count_address, indices_address) = (self.address(&count), self.address(&indices));
        let mut launch = self.stream.launch_builder(&find);
        launch
            .arg(&flags)
            .arg(&flag_bytes)
            .arg(&slots)
            .arg(&indices_address)
            .arg(&count_address)
            .arg(&limit);
        // SAFETY: the arguments match the kernel's parameters; `flags` holds `slots` flags of
        // `flag_bytes` bytes, and the kernel writes at most `limit` indices.
        unsafe { launch.launch(self.grid_for(slots)) }
            .map_err(|e| RuntimeError::Cuda(format!("finding the groups: {e}")))?;
        let counted = self.stream.clone_dtoh(&count).map_err(cuda)?;
        let found = u32::from_le_bytes([counted[0], counted[1], counted[2], counted[3]]);
        if found > limit {
            return Ok(None);
        }
        if found == 0 {
            return Ok(Some(Gathered {
                slots: Vec::new(),
                columns: vec![Vec::new(); columns.len()],
            }));
        }
        let mut targets = Vec::with_capacity(columns.len());
        for &(source, width) in columns {
            let bytes = (found as usize * width as usize).max(8);
            let target = self
                .stream
                .alloc_zeros::<u8>(bytes)
                .map_err(|e| memory(e, "the gathered groups", bytes))?;
            let target_address = self.address(&target);
            let mut launch = self.stream.launch_builder(&gather);
            launch
                .arg(&source)
                .arg(&width)
                .arg(&indices_address)
                .arg(&count_address)
                .arg(&target_address);
            // SAFETY: the arguments match the kernel's parameters; every index is below
            // `slots`, the elements of `source`, and `target` holds `found` elements.
            unsafe { launch.launch(self.grid_for(u64::from(found))) }
                .map_err(|e| RuntimeError::Cuda(format!("gathering the groups: {e}")))?;
            targets.push((target, found as usize * width as usize));
        }
        let found = found as usize;
        let index_words = self.download(indices_address, found * 4)?;
        let mut gathered = Gathered {
            slots: index_words
                .par_chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
            columns: Vec::with_capacity(targets.len()),
        };
        for (target, bytes) in &targets {
            let address = self.address(target);
            gathered.columns.push(self.download(address, *bytes)?);
        }
        Ok(Some(gathered))
    }

    fn release_buffers(&mut self) {
        let released: usize = self.buffers.iter().map(CudaSlice::len).sum();
        self.buffers.clear();
        // Freed buffers go back to the driver's pool, which keeps them for the next query's
        // buffers and hands memory back to the device at the next synchronization. Where a
        // query took much, synchronize now: an idle server (or a process beside it) would
        // otherwise find the device full of a finished query's buffers.
        if released > RETURNED_AT_ONCE {
            let _ = self.stream.synchronize();
        }
        if let Some(copies) = &self.copies {
            // The staging buffers are freed on the copy stream: after the kernels reading them.
            if !self.staged.iter().all(Vec::is_empty) {
                let _ = copies.join(&self.stream);
            }
        }
        self.staged = Default::default();
        self.read = Default::default();
        self.piece = None;
    }

    fn begin_piece(&mut self, index: usize) -> Result<(), RuntimeError> {
        let set = index % STAGING_SETS;
        let copies = self.copy_stream()?;
        // The piece's copies overwrite the set the piece two before was read from.
        if let Some(read) = &self.read[set] {
            copies.wait(read).map_err(cuda)?;
        }
        self.piece = Some(set);
        Ok(())
    }

    fn stage(&mut self, slot: usize, piece: &Piece<'_>) -> Result<u64, RuntimeError> {
        let length = piece.len();
        let set = self.piece.unwrap_or(0);
        let copies = self.copy_stream()?;
        if self.staged[set]
            .get(slot)
            .is_none_or(|staged| staged.len() < length)
        {
            // Room for a somewhat larger piece too (a piece of a column packed in blocks varies
            // with its blocks' widths). A buffer replaced is freed in the copy stream's order,
            // which has waited for the kernels reading it (`begin_piece`).
            let size = (length + length / 4).max(8);
            let slice = copies
                .alloc_zeros::<u8>(size)
                .map_err(|e| memory(e, "a piece of a streamed column", size))?;
            match self.staged[set].get_mut(slot) {
                Some(staged) => *staged = slice,
                None => self.staged[set].push(slice),
            }
        }
        let address = {
            let staged = self.staged[set]
                .get(slot)
                .ok_or_else(|| RuntimeError::Malformed(format!("staging slot {slot} skipped")))?;
            self.address(staged)
        };
        match piece {
            Piece::Within {
                source,
                range,
                spare,
            } => {
                // Pieces of a registered column copy at the bus's speed and in stream order,
                // without a staging copy on the host.
                if !self.registered_in_place(source) {
                    self.copy_to_staged(slot, &piece.to_bytes())?;
                    return Ok(address);
                }
                let pointer = source.data().0.as_ptr();
                let stream = copies.cu_stream();
                // SAFETY: the range lies within the registered column, which the backend keeps
                // alive; the staging buffer holds `range.len() + spare` bytes.
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        address,
                        pointer.add(range.start).cast::<c_void>(),
                        range.len(),
                        stream,
                    )
                }
                .result()
                .map_err(cuda)?;
                self.uploaded.0 += range.len() as u64;
                if *spare > 0 {
                    // SAFETY: the zeros lie within the staging buffer, written on its stream.
                    unsafe {
                        sys::cuMemsetD8Async(address + range.len() as u64, 0, *spare, stream)
                    }
                    .result()
                    .map_err(cuda)?;
                }
            }
            Piece::Made(bytes) => self.copy_to_staged(slot, bytes)?,
        }
        Ok(address)
    }

    fn memory_budget(&self) -> Option<u64> {
        // Without a budget, what the device can give: its free memory, less room for what
        // a launch takes besides buffers, and the resident columns (dropped when wanted).
        // Another process may hold the rest of the device.
        self.budget.or_else(|| {
            let (free, _) = result::mem_get_info().ok()?;
            let free = free as u64 + pool_spare(&self.context);
            Some(free.saturating_sub(LAUNCH_HEADROOM) + self.resident_bytes)
        })
    }

    fn staged_pieces(&self) -> u64 {
        STAGING_SETS as u64
    }

    fn begin_query(&mut self) {
        self.queries += 1;
    }
}

impl Drop for GpuBackend {
    fn drop(&mut self) {
        // Copies from registered memory must be over before it is unregistered.
        let _ = self.stream.synchronize();
        if let Some(copies) = &self.copies {
            let _ = copies.synchronize();
        }
        for range in &self.registered {
            // SAFETY: each pointer was registered by `register` and not since unregistered.
            unsafe { sys::cuMemHostUnregister(range.pointer) };
        }
    }
}

/// Sets `count` eight-byte words from `address` on to `pattern`, in `stream`'s order: the first
/// written from the host, then what is written copied after itself, doubling each time. The
/// driver has no eight-byte memset, and two strided four-byte ones (`cuMemsetD2D32Async`, one
/// row per word) were slow: TPC-H Q21's 1.9 GB of `min`/`max` slots at SF 10 took 264 ms to
/// fill on an H200, about 1 ms this way.
///
/// # Safety
/// `address` must hold `count` eight-byte words, written by nothing else until `stream` has
/// run these copies.
unsafe fn fill_words(
    address: sys::CUdeviceptr,
    pattern: u64,
    count: usize,
    stream: sys::CUstream,
) -> sys::CUresult {
    let total = count * 8;
    if total == 0 {
        return sys::CUresult::CUDA_SUCCESS;
    }
    // From pageable memory the call returns once the word is staged, so it may live on the
    // stack.
    let word = pattern.to_ne_bytes();
    let mut result = sys::cuMemcpyHtoDAsync_v2(address, word.as_ptr().cast(), 8, stream);
    let mut written = 8;
    while written < total && result == sys::CUresult::CUDA_SUCCESS {
        let copied = written.min(total - written);
        result = sys::cuMemcpyDtoDAsync_v2(address + written as u64, address, copied, stream);
        written += copied;
    }
    result
}

/// The memory pool the device's stream-ordered allocations take from.
fn memory_pool(context: &CudaContext) -> Option<sys::CUmemoryPool> {
    let mut pool = std::ptr::null_mut();
    // SAFETY: `pool` receives the device's current pool.
    unsafe { sys::cuDeviceGetMemPool(&mut pool, context.cu_device()) }
        .result()
        .ok()
        .map(|()| pool)
}

/// Bytes the device's pool holds that no buffer uses (kept for later allocations, and not
/// counted free by the driver).
fn pool_spare(context: &CudaContext) -> u64 {
    let Some(pool) = memory_pool(context) else {
        return 0;
    };
    let attribute = |attribute| {
        let mut bytes = 0u64;
        // SAFETY: these attributes are `u64`s, which `bytes` is.
        unsafe { result::mem_pool::get_attribute(pool, attribute, (&mut bytes as *mut u64).cast()) }
            .map(|()| bytes)
            .unwrap_or(0)
    };
    let reserved = attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    let used = attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    reserved.saturating_sub(used)
}

/// Keeps the memory of freed buffers in the device's pool for later allocations. By default
/// the pool gives it back to the driver whenever the host waits for the device, so each query's
/// buffers (hash tables, outputs, allocated anew each run) were mapped again from scratch: a
/// cost that grows with their size. [`GpuBackend::release_freed_memory`] still gives it back
/// when an allocation fails.
fn keep_freed_memory(context: &CudaContext) {
    let Some(pool) = memory_pool(context) else {
        return;
    };
    let mut threshold = u64::MAX;
    // SAFETY: the attribute takes a `u64`, which `threshold` is.
    let _ = unsafe {
        result::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    };
}

fn cuda(error: DriverError) -> RuntimeError {
    RuntimeError::Cuda(error.to_string())
}

fn memory(error: DriverError, what: &str, bytes: usize) -> RuntimeError {
    if error.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        RuntimeError::OutOfMemory(format!(
            "{what} needs {bytes} bytes more than the device has free"
        ))
    } else {
        cuda(error)
    }
}
