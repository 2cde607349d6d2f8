//! The host backend: columns are used where the catalog holds them, buffers are ordinary
//! memory, and a kernel's tiles are handed out to one thread per core in small batches, so
//! uneven tiles (selective filters, probes that miss) still balance.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::jit::{HostKernel, LoadedObject};
use super::stream::Piece;
use super::{column_of, filled, Backend, Cancel, ColumnBytes, Gathered, RuntimeError};
use crate::program::{BufferSpec, Extent, KernelCode, KernelLaunch};
use crate::result::present_slots;

/// Tiles a thread takes at a time, at most: a kernel of few tiles hands them out one by one,
/// so that threads share them evenly and a cancel stops it after the tiles under way.
const TILES_PER_GRAB: u64 = 8;

/// A kernel hands out its tiles one by one unless each thread gets this many grabs or more.
const GRABS_PER_THREAD: u64 = 16;
/// Stack of a thread running kernels (address space only; pages are used as touched).
const KERNEL_STACK_BYTES: usize = 256 << 20;

struct HostColumn {
    _source: ColumnBytes,
    _owned: Option<Vec<u8>>,
    address: u64,
}

pub struct HostBackend {
    /// The programs loaded so far (a resident engine loads many; `None` once removed), and
    /// the one launches use.
    programs: Vec<Option<LoadedObject>>,
    active: usize,
    kernels: HashMap<(usize, String), HostKernel>,
    /// Buffers of the current query, as 8-byte words so every element is aligned.
    buffers: Vec<Vec<u64>>,
    /// Pieces of a streamed table's columns, one per column slot (`Backend::stage`).
    staged: Vec<Vec<u64>>,
    /// The most bytes of columns a query keeps in memory at once, when limited.
    budget: Option<u64>,
    /// The columns kernels read, kept alive here.
    columns: HashMap<String, HostColumn>,
    threads: usize,
    /// Times of the kernels run since the last `wait`.
    times: Vec<f64>,
    first_start: Option<Instant>,
    last_end: Option<Instant>,
}

impl HostBackend {
    /// The bytes of the buffer at `address`.
    fn buffer_bytes(&self, address: u64) -> Result<&[u8], RuntimeError> {
        let buffer = self
            .buffers
            .iter()
            .find(|b| b.as_ptr() as u64 == address)
            .ok_or_else(|| RuntimeError::Malformed("read of an unknown buffer".into()))?;
        // SAFETY: the words are plain data; the slice covers exactly their bytes.
        Ok(unsafe {
            std::slice::from_raw_parts(
                buffer.as_ptr().cast::<u8>(),
                std::mem::size_of_val(&buffer[..]),
            )
        })
    }

    /// Links hex-encoded host object files, one per kernel, into this process.
    pub fn new(objects: &[KernelCode]) -> Result<HostBackend, RuntimeError> {
        let mut backend = HostBackend::empty();
        let id = backend.add_program(objects)?;
        backend.use_program(id);
        Ok(backend)
    }

    /// Keeps the columns a query reads within `bytes` (no limit when `None`): a query reading
    /// more streams its largest table through in pieces (`Backend::memory_budget`), as a GPU
    /// does.
    pub fn set_memory_budget(&mut self, bytes: Option<u64>) {
        self.budget = bytes;
    }

    /// A backend with no program loaded yet.
    pub fn empty() -> HostBackend {
        HostBackend {
            programs: Vec::new(),
            active: 0,
            kernels: HashMap::new(),
            buffers: Vec::new(),
            staged: Vec::new(),
            budget: None,
            columns: HashMap::new(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            times: Vec::new(),
            first_start: None,
            last_end: None,
        }
    }

    /// Links a program's host objects into this process; returns its id for
    /// [`HostBackend::use_program`].
    pub fn add_program(&mut self, objects: &[KernelCode]) -> Result<usize, RuntimeError> {
        let objects = objects
            .iter()
            .map(|unit| {
                unhex(&unit.text).ok_or_else(|| {
                    RuntimeError::Malformed(format!(
                        "the host object of {} is not hex",
                        unit.kernel
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.programs.push(Some(LoadedObject::load(&objects)?));
        Ok(self.programs.len() - 1)
    }

    /// Makes launches run the kernels of program `id`.
    pub fn use_program(&mut self, id: usize) {
        self.active = id;
    }

    /// Unloads program `id`, which runs no more (a stage's, once it has run); the ids of the
    /// others stay.
    pub fn remove_program(&mut self, id: usize) {
        if let Some(program) = self.programs.get_mut(id) {
            *program = None;
        }
        self.kernels.retain(|(program, _), _| *program != id);
    }

    /// The keys of the columns kept here.
    pub fn column_keys(&self) -> impl Iterator<Item = &str> {
        self.columns.keys().map(String::as_str)
    }

    /// How many programs are loaded.
    pub fn loaded_programs(&self) -> usize {
        self.programs.iter().flatten().count()
    }

    /// Lets go of the columns of `table` kept here (a stage's result no query reads again).
    pub fn forget_table(&mut self, table: &str) {
        self.columns.retain(|key, _| !column_of(key, table));
    }

    fn kernel(&mut self, name: &str) -> Result<HostKernel, RuntimeError> {
        let key = (self.active, name.to_string());
        if let Some(k) = self.kernels.get(&key) {
            return Ok(*k);
        }
        let program = self
            .programs
            .get(self.active)
            .and_then(Option::as_ref)
            .ok_or_else(|| RuntimeError::Load("no program is loaded".into()))?;
        let k = program.kernel(name)?;
        self.kernels.insert(key, k);
        Ok(k)
    }
}

impl Backend for HostBackend {
    fn column(&mut self, key: &str, source: ColumnBytes) -> Result<u64, RuntimeError> {
        if let Some(known) = self.columns.get(key) {
            return Ok(known.address);
        }
        // Borrowed bytes point into the catalog's column, which `source` keeps alive; owned
        // ones (made-up validity) are kept beside it.
        let (owned, address) = match source.bytes() {
            std::borrow::Cow::Borrowed(bytes) => (None, bytes.as_ptr() as u64),
            std::borrow::Cow::Owned(bytes) => {
                let address = bytes.as_ptr() as u64;
                (Some(bytes), address)
            }
        };
        self.columns.insert(
            key.to_string(),
            HostColumn {
                _source: source,
                _owned: owned,
                address,
            },
        );
        Ok(address)
    }

    fn buffer(&mut self, spec: &BufferSpec, bytes: u64) -> Result<u64, RuntimeError> {
        // Asked of the allocator first, so that a buffer larger than memory is an error that
        // names it rather than the end of the process.
        let length = usize::try_from(bytes.div_ceil(8).max(1)).unwrap_or(usize::MAX);
        let mut words: Vec<u64> = Vec::new();
        tessera_storage::memory::fallibly(|| words.try_reserve_exact(length)).map_err(|_| {
            RuntimeError::HostOutOfMemory(format!(
                "the query's buffer `{}` needs {bytes} bytes",
                spec.name
            ))
        })?;
        words.resize(length, 0);
        if matches!(spec.fill, crate::program::Fill::Pattern(_)) {
            let pattern = filled(spec, bytes);
            // SAFETY: `words` has at least `bytes` (`pattern.len()`) bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    pattern.as_ptr(),
                    words.as_mut_ptr().cast::<u8>(),
                    pattern.len(),
                );
            }
        }
        let address = words.as_ptr() as u64;
        self.buffers.push(words);
        Ok(address)
    }

    fn launch(
        &mut self,
        kernel: &KernelLaunch,
        rows: u64,
        args: &[u64],
        cancel: Cancel<'_>,
    ) -> Result<(), RuntimeError> {
        let function = self.kernel(&kernel.name)?;
        let tiles = match kernel.extent {
            Extent::Tiles | Extent::GroupSlots(_) => rows.div_ceil(u64::from(kernel.tile.items())),
            Extent::Parts(parts) => u64::from(parts),
        };
        let grab = (tiles / (self.threads as u64 * GRABS_PER_THREAD)).clamp(1, TILES_PER_GRAB);
        let next = AtomicU64::new(0);
        let started = Instant::now();
        let workers = self.threads.min(tiles.div_ceil(grab) as usize).max(1);
        let started_workers = std::thread::scope(|scope| {
            let mut started_workers = 0;
            for _ in 0..workers {
                // A kernel keeps a tile of every column it carries on its stack; a wide row
                // (hundreds of columns) outgrows a thread's usual 2 MB.
                let worker = std::thread::Builder::new().stack_size(KERNEL_STACK_BYTES);
                let spawned = worker.spawn_scoped(scope, || loop {
                    // A cancelled query's kernel takes no more tiles.
                    if cancel.is_requested() {
                        break;
                    }
                    let first = next.fetch_add(grab, Ordering::Relaxed);
                    if first >= tiles {
                        break;
                    }
                    let end = (first + grab).min(tiles);
                    // SAFETY: the kernel reads the parameters in `args` (row count, column and
                    // buffer addresses kept alive by this backend) and only the rows of its
                    // tiles; buffers shared between threads are updated atomically.
                    unsafe { function(args.as_ptr(), first as i64, end as i64) };
                });
                // Workers take tiles until none is left, so one that started does all the work.
                if spawned.is_err() {
                    break;
                }
                started_workers += 1;
            }
            started_workers
        });
        if started_workers == 0 {
            return Err(RuntimeError::Unsupported(format!(
                "no thread could be started to run {}",
                kernel.name
            )));
        }
        cancel.check()?;
        let finished = Instant::now();
        self.first_start.get_or_insert(started);
        self.last_end = Some(finished);
        self.times.push((finished - started).as_secs_f64() * 1e3);
        Ok(())
    }

    fn wait(&mut self, _: Cancel<'_>) -> Result<(Vec<f64>, f64), RuntimeError> {
        // Kernels ran as they were launched, each watching for a cancel.
        let total = match (self.first_start.take(), self.last_end.take()) {
            (Some(start), Some(end)) => (end - start).as_secs_f64() * 1e3,
            _ => 0.0,
        };
        Ok((std::mem::take(&mut self.times), total))
    }

    fn copy_bandwidth(&mut self) -> Result<f64, RuntimeError> {
        // 256 MiB copied by every core at once, as kernels read; both buffers are written
        // first, so page faults stay out of the timing, and the best of three counts.
        let bytes = 256usize << 20;
        let source = vec![1u8; bytes];
        let mut target = vec![2u8; bytes];
        let chunk = bytes.div_ceil(self.threads);
        let mut best = f64::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            std::thread::scope(|scope| {
                for (from, to) in source.chunks(chunk).zip(target.chunks_mut(chunk)) {
                    scope.spawn(move || to.copy_from_slice(from));
                }
            });
            best = best.min(started.elapsed().as_secs_f64());
        }
        Ok(2.0 * bytes as f64 / best.max(1e-9))
    }

    fn read(&mut self, address: u64, offset: u64, bytes: u64) -> Result<Vec<u8>, RuntimeError> {
        let buffer = self.buffer_bytes(address)?;
        let start = (offset as usize).min(buffer.len());
        let length = (bytes as usize).min(buffer.len() - start);
        Ok(buffer[start..start + length].to_vec())
    }

    fn gather_present(
        &mut self,
        flags: u64,
        flag_bytes: u32,
        slots: u64,
        columns: &[(u64, u32)],
        most: u64,
    ) -> Result<Option<Gathered>, RuntimeError> {
        let mut present = Vec::new();
        for slot in present_slots(self.buffer_bytes(flags)?, flag_bytes, slots) {
            if present.len() as u64 >= most {
                return Ok(None);
            }
            present.push(u32::try_from(slot).map_err(|_| {
                RuntimeError::Malformed("a grouped result of too many slots".into())
            })?);
        }
        let mut gathered = Vec::with_capacity(columns.len());
        for &(address, width) in columns {
            let bytes = self.buffer_bytes(address)?;
            let width = width as usize;
            let mut elements = Vec::with_capacity(present.len() * width);
            for &slot in &present {
                let start = slot as usize * width;
                let element = bytes.get(start..start + width).ok_or_else(|| {
                    RuntimeError::Malformed("a grouped result's buffer is too short".into())
                })?;
                elements.extend_from_slice(element);
            }
            gathered.push(elements);
        }
        Ok(Some(Gathered {
            slots: present,
            columns: gathered,
        }))
    }

    fn release_buffers(&mut self) {
        self.buffers.clear();
        self.staged.clear();
    }

    fn stage(&mut self, slot: usize, piece: &Piece<'_>) -> Result<u64, RuntimeError> {
        let bytes = piece.to_bytes();
        // Kernels run as they are launched, so a slot's piece is free for the next.
        while self.staged.len() <= slot {
            self.staged.push(Vec::new());
        }
        let staged = &mut self.staged[slot];
        staged.clear();
        staged.resize(bytes.len().div_ceil(8).max(1), 0);
        // SAFETY: the words hold at least `bytes.len()` bytes; both are plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                staged.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            )
        };
        Ok(staged.as_ptr() as u64)
    }

    fn memory_budget(&self) -> Option<u64> {
        self.budget
    }
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
