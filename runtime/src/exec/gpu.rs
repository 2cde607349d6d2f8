//! The GPU backend, through the CUDA driver API (cudarc): PTX loaded once per program (a module
//! per kernel, loaded on parallel threads), columns
//! uploaded once per process and kept on the device, buffers allocated and filled per query,
//! kernels timed with CUDA events. The driver library is probed for before cudarc touches it,
//! since its loader panics when `libcuda.so` is absent.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::{Backend, ColumnBytes, RuntimeError};
use crate::program::{BufferSpec, Extent, Fill, KernelCode, KernelLaunch};

/// What the GPU is.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub name: String,
    /// Compute capability as `major * 10 + minor` (90 for the H100).
    pub sm: u32,
    pub memory_bytes: u64,
}

/// Finds the first GPU, or says in one line why there is none.
pub fn probe() -> Result<GpuInfo, RuntimeError> {
    // SAFETY: only tries to open the driver library; nothing is called through it.
    if !unsafe { sys::is_culib_present() } {
        return Err(RuntimeError::NoCuda);
    }
    let count = CudaContext::device_count().map_err(cuda)?;
    if count < 1 {
        return Err(RuntimeError::Cuda("the CUDA driver reports no GPU".into()));
    }
    let context = CudaContext::new(0).map_err(cuda)?;
    let (major, minor) = context.compute_capability().map_err(cuda)?;
    Ok(GpuInfo {
        name: context.name().map_err(cuda)?,
        sm: (major * 10 + minor) as u32,
        memory_bytes: context.total_mem().map_err(cuda)? as u64,
    })
}

/// Loads every kernel's PTX, on as many threads as there are cores and kernels.
fn load_modules(
    context: &Arc<CudaContext>,
    ptx: &[KernelCode],
) -> Result<HashMap<String, Arc<CudaModule>>, RuntimeError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(ptx.len())
        .max(1);
    let chunk = ptx.len().div_ceil(threads).max(1);
    let load = |units: &[KernelCode]| -> Result<Vec<(String, Arc<CudaModule>)>, RuntimeError> {
        units
            .iter()
            .map(|unit| {
                let module = context
                    .load_module(Ptx::from_src(unit.text.as_str()))
                    .map_err(|e| {
                        RuntimeError::Load(format!(
                            "the CUDA driver rejected the PTX of {}: {e}",
                            unit.kernel
                        ))
                    })?;
                Ok((unit.kernel.clone(), module))
            })
            .collect()
    };
    let loaded: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = ptx
            .chunks(chunk)
            .map(|units| scope.spawn(move || load(units)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(RuntimeError::Load("a loading thread failed".into())))
            })
            .collect()
    });
    let mut modules = HashMap::new();
    for units in loaded {
        modules.extend(units?);
    }
    Ok(modules)
}

pub struct GpuBackend {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The module holding each kernel.
    modules: HashMap<String, Arc<CudaModule>>,
    /// Kernels loaded so far, with the number of their blocks that fit on the GPU at once.
    functions: HashMap<String, (CudaFunction, u32)>,
    multiprocessors: u32,
    columns: HashMap<String, CudaSlice<u8>>,
    buffers: Vec<CudaSlice<u8>>,
    /// Kernels queued since the last `wait`, with events around each.
    pending: Vec<(String, CudaEvent, CudaEvent)>,
}

impl GpuBackend {
    pub fn new(ptx: &[KernelCode]) -> Result<GpuBackend, RuntimeError> {
        probe()?;
        let context = CudaContext::new(0).map_err(cuda)?;
        // Every launch and copy goes through one stream, in order; per-buffer events would
        // only add work.
        // SAFETY: no buffer is shared between streams.
        unsafe { context.disable_event_tracking() };
        let stream = context.default_stream();
        let modules = load_modules(&context, ptx)?;
        let multiprocessors = context
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(cuda)?
            .max(1) as u32;
        Ok(GpuBackend {
            multiprocessors,
            context,
            stream,
            modules,
            functions: HashMap::new(),
            columns: HashMap::new(),
            buffers: Vec::new(),
            pending: Vec::new(),
        })
    }

    /// A kernel and how many blocks of `threads` can be resident on the whole GPU at once.
    fn function(&mut self, name: &str, threads: u32) -> Result<(CudaFunction, u32), RuntimeError> {
        if let Some(f) = self.functions.get(name) {
            return Ok(f.clone());
        }
        let module = self
            .modules
            .get(name)
            .ok_or_else(|| RuntimeError::Load(format!("kernel {name} is not in the program")))?;
        let f = module
            .load_function(name)
            .map_err(|e| RuntimeError::Load(format!("kernel {name}: {e}")))?;
        let per_multiprocessor = f
            .occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)
            .map_err(cuda)?
            .max(1);
        let resident = per_multiprocessor * self.multiprocessors;
        self.functions
            .insert(name.to_string(), (f.clone(), resident));
        Ok((f, resident))
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
            return Ok(self.address(slice));
        }
        let bytes = source.bytes();
        // An empty allocation is not allowed; a column of no rows is never read anyway.
        let slice = if bytes.is_empty() {
            self.stream
                .alloc_zeros::<u8>(8)
                .map_err(|e| memory(e, key, 8))?
        } else {
            self.stream
                .clone_htod(bytes.as_ref())
                .map_err(|e| memory(e, key, bytes.len()))?
        };
        let address = self.address(&slice);
        self.columns.insert(key.to_string(), slice);
        Ok(address)
    }

    fn buffer(&mut self, spec: &BufferSpec, bytes: u64) -> Result<u64, RuntimeError> {
        let elements = bytes / u64::from(spec.element_bytes.max(1));
        let bytes = bytes.max(8) as usize;
        let slice = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| memory(e, &spec.name, bytes))?;
        let address = self.address(&slice);
        if let Fill::Pattern(pattern) = spec.fill {
            let stream = self.stream.cu_stream();
            let count = elements as usize;
            // SAFETY: the pattern is written within the buffer just allocated, on its stream.
            unsafe {
                match spec.element_bytes {
                    1 => sys::cuMemsetD8Async(address, pattern as u8, count, stream).result(),
                    2 => sys::cuMemsetD16Async(address, pattern as u16, count, stream).result(),
                    4 => sys::cuMemsetD32Async(address, pattern as u32, count, stream).result(),
                    _ => {
                        // Eight-byte elements: the low and the high words, each strided by 8.
                        sys::cuMemsetD2D32Async(address, 8, pattern as u32, 1, count, stream)
                            .result()
                            .and_then(|()| {
                                sys::cuMemsetD2D32Async(
                                    address + 4,
                                    8,
                                    (pattern >> 32) as u32,
                                    1,
                                    count,
                                    stream,
                                )
                                .result()
                            })
                    }
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
    ) -> Result<(), RuntimeError> {
        let (function, resident) = self.function(&kernel.name, kernel.tile.threads)?;
        let grid = match kernel.extent {
            // A persistent grid: as many blocks as fit at once, each looping over tiles.
            Extent::Tiles => rows
                .div_ceil(u64::from(kernel.tile.items()))
                .min(u64::from(resident)) as u32,
            Extent::Parts(parts) => parts,
        };
        let start = self.event()?;
        if grid > 0 {
            let config = LaunchConfig {
                grid_dim: (grid, 1, 1),
                block_dim: (kernel.tile.threads, 1, 1),
                shared_mem_bytes: 0,
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
        Ok(())
    }

    fn wait(&mut self) -> Result<(Vec<f64>, f64), RuntimeError> {
        let pending = std::mem::take(&mut self.pending);
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
        self.stream.clone_dtoh(&view).map_err(cuda)
    }

    fn release_buffers(&mut self) {
        self.buffers.clear();
    }
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
