//! Running a compiled query: binding its parameters to the catalog's columns, checking the
//! statistics it was compiled for, allocating and filling its buffers, launching its kernels in
//! order, checking the status words kernels set, and decoding the result. The device-specific
//! part (memory and launches) is a `Backend`: the GPU through the CUDA driver, or the host.

pub mod gpu;
pub mod host;
pub mod jit;
mod readback;
mod run_buffers;
pub mod stream;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tessera_storage::compress::Encoded;
use tessera_storage::derived::DerivedString;
use tessera_storage::{Catalog, Column, DataType, StorageError, Value};

use crate::primitives::hash::status;
use crate::primitives::unpack::DEVICE_SPARE_WORDS;
use crate::program::{
    Assumption, BufferSpec, ColumnUse, Extent, Fill, KernelLaunch, Param, QueryProgram,
    ResultShape, StrBound,
};
use crate::result::{
    decode_fetched, decode_result, fetch_result, row_count, stream_rows, streams, write_fetched,
    write_table, FetchedResult, ResultBuffers, ResultTable, RowWriter,
};
pub use readback::Gathered;
use readback::QueryBuffers;
use run_buffers::RunBuffers;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Storage(#[from] StorageError),
    #[error("no CUDA driver found (libcuda.so could not be loaded)")]
    NoCuda,
    #[error("CUDA: {0}")]
    Cuda(String),
    #[error("the GPU is out of memory: {0}")]
    OutOfMemory(String),
    #[error("out of memory: {0}, more than this machine can give it")]
    HostOutOfMemory(String),
    #[error("cannot load the compiled code: {0}")]
    Load(String),
    #[error("the data has changed since this query was compiled ({0}); compile the script again")]
    Stale(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("the compiled program is malformed: {0}")]
    Malformed(String),
    #[error("cannot write the result: {0}")]
    Output(std::io::Error),
    #[error("integer overflow: a row's `+`, `-`, `*`, negation, `abs` or cast gives a value its type cannot hold (write `x as i64` to compute in 64 bits, or `x as f64`)")]
    Overflow,
    #[error("integer overflow: the sum `{0}` is beyond what its type holds (64 bits; 38 digits for a decimal of more than 18) (sum `x as f64` for an approximate total)")]
    SumOverflow(String),
    #[error("canceling statement due to user request")]
    Cancelled,
}

/// Bytes a kernel reads as a column.
#[derive(Clone)]
pub enum ColumnBytes {
    Values(Arc<Column>),
    /// One byte per row, 1 where the column holds a value.
    Validity(Arc<Column>),
    /// A validity column of all ones (compiled for nulls, but the data has none).
    AllValid(usize),
    /// A bit-packed column's words, then zero words for the decoder's reads past them.
    PackedWords(Arc<Encoded>),
    /// A bit-packed column's block starts.
    BlockStarts(Arc<Encoded>),
    /// A `pack` or `dict` column's reference or dictionary (one zero word when it has none).
    Dictionary(Arc<Encoded>),
    /// For each code of one string column's dictionary, the same string's code in another's,
    /// or -1, or its rank among the other's strings (one -1 when the first dictionary is empty).
    Translation(Arc<Vec<i32>>),
    /// For each code of a string column's dictionary, 1 where its string matches `pattern`,
    /// else 0: matched when the bytes are asked for, which a device holding them from an
    /// earlier query (under the same key) does not do.
    Matches {
        dictionary: Arc<tessera_storage::Dictionary>,
        kind: crate::pattern::MatchKind,
        pattern: String,
    },
}

/// Dictionaries below this many strings are matched against a pattern on one thread.
const PARALLEL_MATCHES: usize = 1 << 14;

impl ColumnBytes {
    pub fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        match self {
            ColumnBytes::Values(column) => Cow::Borrowed(column.data.as_bytes()),
            ColumnBytes::Validity(column) => match &column.validity {
                // SAFETY: `bool` is one byte holding 0 or 1.
                Some(valid) => Cow::Borrowed(unsafe {
                    std::slice::from_raw_parts(valid.as_ptr().cast::<u8>(), valid.len())
                }),
                None => Cow::Owned(vec![1; column.len()]),
            },
            ColumnBytes::AllValid(rows) => Cow::Owned(vec![1; *rows]),
            ColumnBytes::PackedWords(packed) => {
                // Words mapped from a prepared entry are followed by zeros there already.
                if let Some(words) = packed.data.padded(DEVICE_SPARE_WORDS) {
                    return Cow::Borrowed(word_bytes(words));
                }
                let words = word_bytes(&packed.data);
                let mut bytes = Vec::with_capacity(words.len() + DEVICE_SPARE_WORDS * 4);
                bytes.extend_from_slice(words);
                bytes.resize(words.len() + DEVICE_SPARE_WORDS * 4, 0);
                Cow::Owned(bytes)
            }
            ColumnBytes::BlockStarts(packed) => Cow::Borrowed(word_bytes(&packed.block_starts)),
            ColumnBytes::Dictionary(packed) => {
                let mut bytes: Vec<u8> = packed
                    .dictionary
                    .iter()
                    .flat_map(|value| value.to_le_bytes())
                    .collect();
                if bytes.is_empty() {
                    bytes.resize(4, 0);
                }
                Cow::Owned(bytes)
            }
            ColumnBytes::Translation(codes) => {
                let mut bytes: Vec<u8> = codes.iter().flat_map(|code| code.to_le_bytes()).collect();
                if bytes.is_empty() {
                    bytes.extend_from_slice(&(-1i32).to_le_bytes());
                }
                Cow::Owned(bytes)
            }
            ColumnBytes::Matches {
                dictionary,
                kind,
                pattern,
            } => {
                use rayon::prelude::*;
                let matched = |text: &str| i32::from(kind.matches(pattern, text));
                let matches: Vec<i32> = if dictionary.len() < PARALLEL_MATCHES {
                    dictionary.iter().map(matched).collect()
                } else {
                    dictionary.par_iter().map(matched).collect()
                };
                let mut bytes = Vec::with_capacity(matches.len() * 4);
                for matched in matches {
                    bytes.extend_from_slice(&matched.to_le_bytes());
                }
                if bytes.is_empty() {
                    bytes.extend_from_slice(&(-1i32).to_le_bytes());
                }
                Cow::Owned(bytes)
            }
        }
    }

    /// The bytes as they lie in the catalog's memory (copied only where they must be made),
    /// and how many zero bytes a device copy needs after them: [`ColumnBytes::bytes`] without
    /// the copy that appends those zeros on the host.
    pub fn data(&self) -> (std::borrow::Cow<'_, [u8]>, usize) {
        match self {
            ColumnBytes::PackedWords(packed) => (
                std::borrow::Cow::Borrowed(word_bytes(&packed.data)),
                DEVICE_SPARE_WORDS * 4,
            ),
            other => (other.bytes(), 0),
        }
    }

    /// Whether the bytes are read from a mapped file (and can be registered with the driver in
    /// place rather than copied through a staging buffer).
    pub fn is_mapped(&self) -> bool {
        match self {
            ColumnBytes::Values(column) => column.data.is_mapped(),
            ColumnBytes::Validity(column) => {
                column.validity.as_ref().is_some_and(|v| v.is_mapped())
            }
            ColumnBytes::PackedWords(packed) => packed.data.is_mapped(),
            ColumnBytes::BlockStarts(packed) => packed.block_starts.is_mapped(),
            ColumnBytes::AllValid(_)
            | ColumnBytes::Dictionary(_)
            | ColumnBytes::Translation(_)
            | ColumnBytes::Matches { .. } => false,
        }
    }

    /// Bytes a kernel reading every row reads of this column.
    fn bytes_read(&self) -> u64 {
        match self {
            ColumnBytes::Values(column) => column.data.as_bytes().len() as u64,
            ColumnBytes::Validity(column) => column.len() as u64,
            ColumnBytes::AllValid(rows) => *rows as u64,
            ColumnBytes::PackedWords(packed) => packed.data.len() as u64 * 4,
            ColumnBytes::BlockStarts(packed) => packed.block_starts.len() as u64 * 4,
            ColumnBytes::Dictionary(packed) => packed.dictionary.len() as u64 * 4,
            ColumnBytes::Translation(codes) => codes.len() as u64 * 4,
            ColumnBytes::Matches { dictionary, .. } => dictionary.len() as u64 * 4,
        }
    }
}

/// The bytes of 32-bit words, as they lie in memory (the targets are little-endian).
fn word_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: `u32` is plain data with no padding; the slice borrows `words`.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

/// How a running query learns it is cancelled: the flag a client's cancel request sets, and
/// the device address of the status word ([`status::CANCELLED`]) that GPU kernels look at in
/// each round over a tile's matches (work without a bound the host can see), which the backend
/// sets once the flag is. Host kernels take no more tiles once the flag is set.
///
/// [`status::CANCELLED`]: crate::primitives::hash::status::CANCELLED
#[derive(Clone, Copy)]
pub struct Cancel<'a> {
    pub requested: &'a AtomicBool,
    pub word: u64,
}

impl Cancel<'_> {
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed)
    }

    /// [`RuntimeError::Cancelled`] once requested.
    pub fn check(&self) -> Result<(), RuntimeError> {
        check_cancelled(self.requested)
    }
}

/// [`RuntimeError::Cancelled`] once `requested` is set.
fn check_cancelled(requested: &AtomicBool) -> Result<(), RuntimeError> {
    match requested.load(Ordering::Relaxed) {
        true => Err(RuntimeError::Cancelled),
        false => Ok(()),
    }
}

/// Device memory and kernel launches.
pub trait Backend {
    /// The address of a column's bytes on the device, uploading them the first time `key` is
    /// seen.
    fn column(&mut self, key: &str, source: ColumnBytes) -> Result<u64, RuntimeError>;
    /// A fresh buffer of `bytes`, filled as `spec` says; returns its address.
    fn buffer(&mut self, spec: &BufferSpec, bytes: u64) -> Result<u64, RuntimeError>;
    /// Queues `kernel` over `rows` rows with these parameter values, after those queued before.
    /// A backend that runs kernels as they are launched stops taking tiles once `cancel` is
    /// requested, and answers [`RuntimeError::Cancelled`].
    fn launch(
        &mut self,
        kernel: &KernelLaunch,
        rows: u64,
        args: &[u64],
        cancel: Cancel<'_>,
    ) -> Result<(), RuntimeError>;
    /// Waits for every queued kernel; returns each one's milliseconds, and the milliseconds from
    /// the first one's start to the last one's end. Once `cancel` is requested meanwhile, the
    /// running kernels are told to stop ([`Cancel::word`]) and the answer is
    /// [`RuntimeError::Cancelled`].
    fn wait(&mut self, cancel: Cancel<'_>) -> Result<(Vec<f64>, f64), RuntimeError>;
    /// Device memory bandwidth: bytes read plus bytes written per second by a large copy.
    fn copy_bandwidth(&mut self) -> Result<f64, RuntimeError>;
    /// `bytes` bytes of the buffer at `address`, from byte `offset` on (fewer where the buffer
    /// ends sooner).
    fn read(&mut self, address: u64, offset: u64, bytes: u64) -> Result<Vec<u8>, RuntimeError>;
    /// Of the `slots` elements of the buffer at `flags` (`flag_bytes` each), the indices of
    /// those that are not zero, in any order, with the elements of each of `columns` (the
    /// address of a buffer and its element bytes) at those indices; `None` when more than
    /// `most` are not zero, or where the backend cannot gather these (the caller then reads
    /// the buffers whole).
    fn gather_present(
        &mut self,
        flags: u64,
        flag_bytes: u32,
        slots: u64,
        columns: &[(u64, u32)],
        most: u64,
    ) -> Result<Option<Gathered>, RuntimeError>;
    /// Copies `bytes`, a piece of a column streamed through the device, into staging buffer
    /// `slot` (made or grown as needed, kept until the query's buffers are freed); returns its
    /// address. The copy waits for the kernels that read the buffer before (on the GPU, a
    /// piece is copied while the kernel of the piece before runs: `begin_piece`).
    fn stage(&mut self, slot: usize, piece: &stream::Piece<'_>) -> Result<u64, RuntimeError>;
    /// Piece `index` of a streamed table is about to be staged, then its kernel launched: a
    /// backend that copies while kernels run stages it beside the piece before.
    fn begin_piece(&mut self, _index: usize) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// How many pieces of each streamed column the backend keeps staged at once.
    fn staged_pieces(&self) -> u64 {
        1
    }
    /// The most bytes of columns to keep on the device at once, when limited (`--gpu-memory`,
    /// or the memory a device has): a query reading more streams its largest table through in
    /// pieces.
    fn memory_budget(&self) -> Option<u64> {
        None
    }
    /// Frees the buffers of the last query.
    fn release_buffers(&mut self);
    /// A query is about to bind its columns: those it binds are in use until the next query
    /// begins (a backend that keeps columns within a budget evicts only others).
    fn begin_query(&mut self) {}
}

/// How long each kernel took and how many bytes it read.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    pub kernels: Vec<KernelTiming>,
    /// From the first kernel's start to the last one's end (milliseconds).
    pub query_ms: f64,
    /// Binding, allocation and filling before the first kernel (milliseconds): of every
    /// kernel and buffer but a device sort's that may be left to the host (`run_buffers`).
    pub setup_ms: f64,
    /// The host's time launching the kernels, which they run behind, and binding a device
    /// sort that runs, its buffers allocated (milliseconds).
    pub launch_ms: f64,
    /// The host's time waiting for the kernels once all were launched (milliseconds).
    pub wait_ms: f64,
    /// Reading the result back and decoding it (milliseconds).
    pub finish_ms: f64,
    /// The table streamed through the device, if one was.
    pub streamed: Option<Streamed>,
    /// Times the kernels ran: more than once where the grouping's table or the output was
    /// too small ([`Learned`]). The other fields are the last run's.
    pub runs: u32,
}

/// A table streamed through the device in pieces (`exec::stream`).
#[derive(Clone, Debug)]
pub struct Streamed {
    pub table: String,
    /// Launches of its kernels, one per piece each.
    pub launches: usize,
    /// Bytes of the pieces copied to the device.
    pub bytes: u64,
}

/// As `--timing` reports it, for a query or a stage, from `run` or the server.
impl std::fmt::Display for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "streamed `{}` in {} launches ({:.1} MB)",
            self.table,
            self.launches,
            self.bytes as f64 / 1e6
        )
    }
}

#[derive(Clone, Debug)]
pub struct KernelTiming {
    pub name: String,
    pub table: String,
    pub rows: u64,
    pub ms: f64,
    /// Bytes of columns the kernel reads when every row is selected.
    pub bytes: u64,
}

impl Timing {
    /// The query's time on the device, launch gaps between its kernels included.
    pub fn kernel_ms(&self) -> f64 {
        self.query_ms
    }

    pub fn bytes(&self) -> u64 {
        self.kernels.iter().map(|k| k.bytes).sum()
    }
}

pub struct QueryOutcome {
    pub table: ResultTable,
    pub timing: Timing,
    /// With [`Readback::Fetched`], the result as read back, which [`QueryOutcome::decode`]
    /// makes the table (or [`QueryOutcome::write`] writes out).
    pub fetched: Option<FetchedResult>,
}

impl QueryOutcome {
    /// Decodes a result read back with [`Readback::Fetched`] into the outcome's table (no
    /// device needed); does nothing to one decoded already.
    pub fn decode(&mut self, query: &QueryProgram, catalog: &Catalog) -> Result<(), RuntimeError> {
        if let Some(fetched) = self.fetched.take() {
            self.table = decode_fetched(&query.result, fetched, catalog)?;
        }
        Ok(())
    }

    /// Writes the result's rows to `writer` (read back with [`Readback::Fetched`], or
    /// decoded already); returns how many it wrote. Rows written out by the device are not
    /// built as rows of values on the way ([`crate::result::RowWriter`]).
    pub fn write(
        &mut self,
        query: &QueryProgram,
        catalog: &Catalog,
        writer: &mut dyn RowWriter,
    ) -> Result<usize, RuntimeError> {
        match self.fetched.take() {
            Some(fetched) => write_fetched(&query.result, fetched, catalog, writer),
            None => write_table(&self.table, writer),
        }
    }
}

/// What becomes of a query's result once its kernels have run.
pub enum Readback<'a> {
    /// Read back and decoded into the outcome's table.
    Table,
    /// Left on the device (benchmarks time the kernels, not the transfer): for rows written
    /// out, the outcome's table holds only their count, in a column `rows`.
    Discard,
    /// Handed to `deliver` in pieces of at most `rows` rows as they are read back, so a result
    /// larger than host memory never is there whole. Only rows written out with no host work
    /// after them come in several pieces; any other result comes whole, as one. The outcome's
    /// table keeps the columns, and no rows.
    Stream {
        rows: usize,
        deliver: &'a mut dyn FnMut(ResultTable) -> Result<(), RuntimeError>,
    },
    /// Read back, and left to decode with [`QueryOutcome::decode`] (or to write out with
    /// [`QueryOutcome::write`]): a resident engine does so after giving the device to the next
    /// query.
    Fetched,
}

/// Runs one query of a program on `backend`.
pub fn run_query(
    backend: &mut dyn Backend,
    query: &QueryProgram,
    catalog: &Catalog,
) -> Result<QueryOutcome, RuntimeError> {
    run_query_with(backend, query, catalog, &mut Readback::Table)
}

/// Runs one query of a program on `backend`, reading its result back as `readback` says.
pub fn run_query_with(
    backend: &mut dyn Backend,
    query: &QueryProgram,
    catalog: &Catalog,
    readback: &mut Readback<'_>,
) -> Result<QueryOutcome, RuntimeError> {
    let (never, learned) = (AtomicBool::new(false), Learned::default());
    run_query_until(backend, query, catalog, readback, &never, &learned)
}

/// What earlier runs of one query found its room too small for: the slots of a grouping's
/// hash table that held every group, and the rows its output took where the planned room
/// held fewer. A later run starts there rather than running its kernels again (a resident
/// server runs a query many times over the same data); one that outgrows them runs again, as
/// a first run does.
#[derive(Debug, Default)]
pub struct Learned {
    group_capacity: AtomicU64,
    /// 0 while the planned room sufficed.
    output_rows: AtomicU64,
    /// Whether a run wrote more rows than the host sorts ([`crate::program::HostSort`]): later
    /// runs then launch the sort's kernels right after the others, without first waiting for
    /// them to count the rows (the wait leaves the device idle while the sort's dozens of
    /// kernels are launched: TPC-H Q16, 0.3-0.5 ms).
    sorted_on_device: AtomicBool,
}

impl Learned {
    fn remember(&self, group_capacity: u64, output_rows: Option<u64>) {
        self.group_capacity
            .fetch_max(group_capacity, Ordering::Relaxed);
        if let Some(rows) = output_rows {
            self.output_rows.fetch_max(rows, Ordering::Relaxed);
        }
    }
}

/// [`run_query_with`], giving up with [`RuntimeError::Cancelled`] once `cancelled` is set: it
/// is looked at before each kernel is launched, by running kernels ([`Cancel`]: on the host
/// before each tile, on the GPU in each round over a tile's matches), once they have run, and
/// as the result is read back. It starts from the room earlier runs found it needed
/// (`learned`), and adds what this one finds.
pub fn run_query_until(
    backend: &mut dyn Backend,
    query: &QueryProgram,
    catalog: &Catalog,
    readback: &mut Readback<'_>,
    cancelled: &AtomicBool,
    learned: &Learned,
) -> Result<QueryOutcome, RuntimeError> {
    let result = run_query_checked(backend, query, catalog, readback, cancelled, learned);
    if result.is_err() {
        // A cancelled or failed query leaves no buffers behind for the next one.
        backend.release_buffers();
    }
    result
}

fn run_query_checked(
    backend: &mut dyn Backend,
    query: &QueryProgram,
    catalog: &Catalog,
    readback: &mut Readback<'_>,
    cancelled: &AtomicBool,
    learned: &Learned,
) -> Result<QueryOutcome, RuntimeError> {
    check_columns(&query.columns, catalog)?;
    check_assumptions(&query.assumptions, catalog)?;
    backend.begin_query();
    let planned = query.group_capacity.unwrap_or(0);
    let mut capacity = planned.max(learned.group_capacity.load(Ordering::Relaxed));
    let mut rows = Some(learned.output_rows.load(Ordering::Relaxed)).filter(|&r| r > 0);
    // Whether `rows` is what this run counted, which then suffices.
    let mut counted = false;
    let mut runs = 1;
    loop {
        match run_with_capacity(
            backend,
            query,
            catalog,
            (capacity, rows),
            readback,
            cancelled,
            learned,
        )? {
            Attempt::Done(mut outcome) => {
                learned.remember(capacity, rows);
                outcome.timing.runs = runs;
                return Ok(*outcome);
            }
            // A join matched rows several times and the output was too small: every kernel
            // runs again with room for exactly the rows it counted.
            Attempt::RowsOverflow(written) if !counted => {
                (rows, counted) = (Some(written), true);
            }
            Attempt::RowsOverflow(written) => {
                return Err(RuntimeError::Malformed(format!(
                    "the query wrote {written} rows into room made for exactly that many"
                )))
            }
            // The grouping table filled up: every kernel runs again over a larger one.
            Attempt::TableFull if capacity < MAX_GROUP_CAPACITY => capacity *= 4,
            Attempt::TableFull => {
                return Err(RuntimeError::Unsupported(format!(
                    "the grouping needs more than {MAX_GROUP_CAPACITY} slots"
                )))
            }
        }
        runs += 1;
    }
}

/// The largest grouping hash table tried before giving up.
const MAX_GROUP_CAPACITY: u64 = 1 << 31;

enum Attempt {
    Done(Box<QueryOutcome>),
    TableFull,
    /// The query wrote more rows than its output holds (this many).
    RowsOverflow(u64),
}

fn run_with_capacity(
    backend: &mut dyn Backend,
    query: &QueryProgram,
    catalog: &Catalog,
    (capacity, output_rows): (u64, Option<u64>),
    readback: &mut Readback<'_>,
    cancelled: &AtomicBool,
    learned: &Learned,
) -> Result<Attempt, RuntimeError> {
    // Whether the rows a device sort would sort are counted first ([`Learned::sorted_on_device`]).
    let count_rows = !learned.sorted_on_device.load(Ordering::Relaxed);
    let check = || check_cancelled(cancelled);
    check()?;
    let setup = Instant::now();
    let mut sizes = Vec::with_capacity(query.buffers.len());
    let mut output_capacity = 0;
    for spec in &query.buffers {
        let mut rows = 0;
        for table in &spec.per_row_of {
            rows += table_rows(catalog, table)?;
        }
        let mut elements = spec.elements_for(capacity, rows);
        if spec.output {
            // A row per element: as many as the buffer holds at first, as many as a run
            // wrote when it wrote more.
            elements = output_rows.map_or(elements, |rows| rows.max(elements));
            output_capacity = elements;
        }
        sizes.push(elements * u64::from(spec.element_bytes));
    }
    // Every kernel sure to be launched has its buffers allocated and is bound now; a device
    // sort that may be left to the host, just before its kernels are launched.
    let mut buffers = RunBuffers::new(&query.buffers, &sizes);
    let surely_launched = match &query.result.host_sort {
        Some(host) if count_rows => host.first_kernel.min(query.kernels.len()),
        _ => query.kernels.len(),
    };
    let status = buffers.ensure(backend, query.result.status_buffer)?;
    let mut timing = Timing::default();
    let streaming = stream::streamed_table(backend, query, catalog)?;
    let streamed = streaming.as_ref().map(|s| s.table.as_str());
    let mut bound = Vec::with_capacity(query.kernels.len());
    let bind_next = |backend: &mut dyn Backend,
                     buffers: &mut RunBuffers<'_>,
                     bound: &mut Vec<BoundLaunch>|
     -> Result<(), RuntimeError> {
        let kernel = query
            .kernels
            .get(bound.len())
            .ok_or_else(|| RuntimeError::Malformed("binding a kernel past the last".into()))?;
        buffers.ensure_for(backend, kernel)?;
        bound.push(bind(
            backend,
            kernel,
            &query.constants,
            buffers.addresses(),
            catalog,
            capacity,
            output_capacity,
            streamed,
        )?);
        Ok(())
    };
    while bound.len() < surely_launched {
        bind_next(backend, &mut buffers, &mut bound)?;
    }
    let cancel = Cancel {
        requested: cancelled,
        word: status + 4 * u64::from(crate::primitives::hash::status::CANCELLED),
    };
    timing.setup_ms = setup.elapsed().as_secs_f64() * 1e3;
    let launching = Instant::now();
    let mut launches = Vec::with_capacity(query.kernels.len());
    let mut staged = 0;
    // Kernels waited for before the last ones were launched: their times, and their span.
    let mut waited: Option<(Vec<f64>, f64)> = None;
    // The rows written, where counted before a sort left to the host.
    let mut sorted_on_host = None;
    for (at, kernel) in query.kernels.iter().enumerate() {
        if let Some(host) = query.result.host_sort.as_ref().filter(|_| count_rows) {
            if host.first_kernel == at {
                // The rows the sort would sort: few are sorted on the host.
                waited = Some(backend.wait(cancel)?);
                check()?;
                let written = match &host.shape {
                    ResultShape::Rows { count_buffer, .. } => row_count(
                        *count_buffer,
                        &mut QueryBuffers {
                            backend: &mut *backend,
                            addresses: buffers.addresses(),
                            sizes: &sizes,
                        },
                    )?,
                    _ => usize::MAX,
                };
                if written as u64 <= host.rows {
                    sorted_on_host = Some(written as u64);
                    break;
                }
                learned.sorted_on_device.store(true, Ordering::Relaxed);
            }
        }
        check()?;
        if bound.len() == at {
            bind_next(backend, &mut buffers, &mut bound)?;
        }
        let launch = bound
            .get(at)
            .ok_or_else(|| RuntimeError::Malformed(format!("kernel {at} was not bound")))?;
        match &streaming {
            Some(streaming) if !launch.slices.is_empty() => {
                let (count, bytes) = stream::launch_in_pieces(
                    backend,
                    kernel,
                    launch,
                    streaming.piece_rows,
                    cancel,
                )?;
                launches.push(count);
                staged += bytes;
            }
            _ => {
                backend.launch(kernel, launch.rows, &launch.args, cancel)?;
                launches.push(1);
            }
        }
    }
    // What the result reads exists, unless only the kernels not launched name it.
    buffers.ensure_rest(backend, &query.kernels[launches.len()..])?;
    timing.launch_ms = launching.elapsed().as_secs_f64() * 1e3;
    let waiting = Instant::now();
    let (mut each, mut total) = backend.wait(cancel)?;
    if let Some((before, span)) = waited {
        each.splice(0..0, before);
        total += span;
    }
    timing.wait_ms = waiting.elapsed().as_secs_f64() * 1e3;
    check()?;
    timing.query_ms = total;
    if let Some(streaming) = &streaming {
        let pieces = launches.iter().filter(|count| **count > 1).sum();
        timing.streamed = Some(Streamed {
            table: streaming.table.clone(),
            launches: pieces,
            bytes: staged,
        });
    }
    // A kernel streamed in pieces took the time of all its launches.
    let mut times = Vec::with_capacity(launches.len());
    for count in launches {
        times.push(each.drain(..count.min(each.len())).sum::<f64>());
    }
    for ((kernel, launch), ms) in query.kernels.iter().zip(&bound).zip(times) {
        timing.kernels.push(KernelTiming {
            name: kernel.name.clone(),
            // A kernel over a grouping's slots reads none of its table's rows.
            table: match kernel.extent {
                Extent::GroupSlots(_) => format!("{} groups", kernel.table),
                _ => kernel.table.clone(),
            },
            rows: launch.rows,
            ms,
            bytes: launch.column_bytes,
        });
    }
    let finish = Instant::now();
    let host_sorted = sorted_on_host.and_then(|_| query.result.sorted_on_host());
    // The result as read back: where the host sorts, the rows as written.
    let spec = host_sorted.as_ref().unwrap_or(&query.result);
    let mut results = QueryBuffers {
        backend: &mut *backend,
        addresses: buffers.addresses(),
        sizes: &sizes,
    };
    let words = results.read(spec.status_buffer, None)?;
    if status_word(&words, status::GROUP_TABLE_FULL) != 0 {
        results.backend.release_buffers();
        return Ok(Attempt::TableFull);
    }
    check_status(&words)?;
    let written = match (&spec.shape, sorted_on_host) {
        // No kernel ran since the rows were counted.
        (ResultShape::Rows { .. }, Some(counted)) => Some(counted),
        (ResultShape::Rows { count_buffer, .. }, None) => {
            Some(row_count(*count_buffer, &mut results)? as u64)
        }
        _ => None,
    };
    // Rows of no column take no room: only an output buffer can be too small.
    let has_output = query.buffers.iter().any(|buffer| buffer.output);
    if let Some(written) = written.filter(|w| has_output && *w > output_capacity) {
        results.backend.release_buffers();
        return Ok(Attempt::RowsOverflow(written));
    }
    let mut fetched = None;
    let table = match (readback, written) {
        (Readback::Discard, Some(count)) => ResultTable {
            columns: vec![("rows".into(), tessera_storage::DataType::I64)],
            rows: vec![vec![tessera_storage::Value::Int(count as i64)]],
        },
        (Readback::Stream { rows, deliver }, _) if streams(spec) => {
            let mut columns = Vec::new();
            stream_rows(spec, &mut results, catalog, *rows, &mut |piece| {
                check()?;
                if columns.is_empty() {
                    columns.clone_from(&piece.columns);
                }
                deliver(piece)
            })?;
            ResultTable {
                columns,
                rows: Vec::new(),
            }
        }
        (Readback::Stream { deliver, .. }, _) => {
            let table = decode_result(spec, &mut results, catalog, capacity)?;
            let columns = table.columns.clone();
            deliver(table)?;
            ResultTable {
                columns,
                rows: Vec::new(),
            }
        }
        (Readback::Fetched, _) => {
            let mut result = fetch_result(spec, &mut results, capacity)?;
            result.sorted_on_host = sorted_on_host.is_some();
            fetched = Some(result);
            ResultTable {
                columns: Vec::new(),
                rows: Vec::new(),
            }
        }
        _ => decode_result(spec, &mut results, catalog, capacity)?,
    };
    check()?;
    results.backend.release_buffers();
    timing.finish_ms = finish.elapsed().as_secs_f64() * 1e3;
    Ok(Attempt::Done(Box::new(QueryOutcome {
        table,
        timing,
        fetched,
    })))
}

/// One kernel launch with its parameters bound.
struct BoundLaunch {
    rows: u64,
    args: Vec<u64>,
    /// The parameters (by position) of a streamed table, bound to a piece of it per launch.
    slices: Vec<(usize, stream::RowSlice)>,
    /// Bytes of the columns the kernel reads, were every row selected.
    column_bytes: u64,
}

/// Maps (or reads and encodes) every column the kernels of `query` read, on all cores, so that
/// this work overlaps whatever else is starting (the GPU's context); errors are left for the
/// run itself to report.
pub fn prefetch_columns(query: &QueryProgram, catalog: &Catalog) {
    let mut wanted: Vec<(&str, &str, Option<tessera_storage::compress::Scheme>)> = Vec::new();
    for kernel in &query.kernels {
        for param in &kernel.params {
            let Some(read) = param.stored_column() else {
                continue;
            };
            if !wanted.contains(&read) {
                wanted.push(read);
            }
        }
    }
    // Plain threads take the columns, not rayon's: loading holds the table's lock while its
    // files decode on rayon's threads, and a rayon thread waiting inside that decoding may
    // take up any other job of the pool — another column's load of the same table would then
    // wait, on that thread, for the lock the thread itself holds.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(wanted.len());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some((table, column, scheme)) =
                    wanted.get(next.fetch_add(1, Ordering::Relaxed))
                {
                    // A column that fails here fails again, with its message, when bound.
                    let _ = match scheme {
                        None => catalog.kernel_column(table, column).map(drop),
                        Some(scheme) => catalog.kernel_packed(table, column, *scheme).map(drop),
                    };
                }
            });
        }
    });
}

/// Whether the device column `key` (as [`bind`] names what it uploads) holds data of `table`:
/// a key starts with the table it reads, and one translating codes between tables names both.
pub fn column_of(key: &str, table: &str) -> bool {
    let prefix = format!("{table}.");
    key.starts_with(&prefix)
        || key.contains(&format!("->{prefix}"))
        || key.contains(&format!(" ranked among {prefix}"))
}

/// The row count and parameter values of one kernel launch.
#[allow(clippy::too_many_arguments)]
fn bind(
    backend: &mut dyn Backend,
    kernel: &KernelLaunch,
    constants: &[Value],
    buffers: &[u64],
    catalog: &Catalog,
    group_capacity: u64,
    output_capacity: u64,
    streamed: Option<&str>,
) -> Result<BoundLaunch, RuntimeError> {
    let rows = match kernel.extent {
        Extent::Tiles => table_rows(catalog, &kernel.table)?,
        Extent::Parts(_) => output_capacity,
        Extent::GroupSlots(slots) => slots.unwrap_or(group_capacity + 1),
    };
    let mut args = Vec::with_capacity(kernel.params.len());
    let constant = |slot: u32| {
        constants.get(slot as usize).ok_or_else(|| {
            RuntimeError::Malformed(format!(
                "kernel {} reads missing constant {slot}",
                kernel.name
            ))
        })
    };
    let text_constant = |slot: u32| match constant(slot)? {
        Value::Str(text) => Ok(text),
        _ => Err(RuntimeError::Malformed(format!(
            "constant {slot} of kernel {} is not a string",
            kernel.name
        ))),
    };
    // A column's type is part of its key: a resident engine runs scripts whose declarations
    // read a file's column as another type than the data folder's catalog does.
    let key_of = |table: &str, name: &str| match catalog.field(table, name) {
        Some(field) => format!("{table}.{name}:{}", field.ty),
        None => format!("{table}.{name}"),
    };
    let mut column_bytes = 0;
    let mut slices = Vec::new();
    let mut column = |key: String, source: ColumnBytes| {
        column_bytes += source.bytes_read();
        backend.column(&key, source)
    };
    for param in &kernel.params {
        // A streamed table's column is bound to a piece of it at each launch.
        if streamed.is_some() && stream::row_param_table(param) == streamed {
            slices.push((args.len(), stream::row_slice(param, catalog, rows)?));
            args.push(0);
            continue;
        }
        args.push(match param {
            Param::Rows { .. } => rows,
            Param::FirstRow => 0,
            Param::Column {
                table,
                column: name,
            } => {
                let loaded = catalog.kernel_column(table, name)?;
                check_rows(table, name, loaded.len(), rows)?;
                column(key_of(table, name), ColumnBytes::Values(loaded))?
            }
            Param::Validity {
                table,
                column: name,
            } => {
                let loaded = catalog.kernel_column(table, name)?;
                let source = if loaded.validity.is_some() {
                    ColumnBytes::Validity(loaded)
                } else {
                    ColumnBytes::AllValid(loaded.len())
                };
                column(format!("{}.valid", key_of(table, name)), source)?
            }
            Param::PackedWords {
                table,
                column: name,
                scheme,
                ..
            }
            | Param::FixedWords {
                table,
                column: name,
                scheme,
                ..
            } => {
                let packed = catalog.kernel_packed(table, name, *scheme)?;
                check_rows(table, name, packed.len, rows)?;
                if let Some(change) = packing_changed(param, &packed) {
                    return Err(RuntimeError::Stale(format!("`{table}.{name}` {change}")));
                }
                column(
                    format!("{}.{scheme}", key_of(table, name)),
                    ColumnBytes::PackedWords(packed),
                )?
            }
            Param::BlockStarts {
                table,
                column: name,
                scheme,
            }
            | Param::Dictionary {
                table,
                column: name,
                scheme,
                ..
            } => {
                // What a packed column's words are read through: its block starts, or its
                // dictionary.
                let packed = catalog.kernel_packed(table, name, *scheme)?;
                if let Some(change) = packing_changed(param, &packed) {
                    return Err(RuntimeError::Stale(format!("`{table}.{name}` {change}")));
                }
                let (part, source) = match param {
                    Param::BlockStarts { .. } => ("starts", ColumnBytes::BlockStarts(packed)),
                    _ => ("dictionary", ColumnBytes::Dictionary(packed)),
                };
                column(format!("{}.{scheme}.{part}", key_of(table, name)), source)?
            }
            Param::GroupCapacity => group_capacity,
            Param::RowCapacity => output_capacity,
            Param::Constant(value) => *value,
            Param::Buffer(index) => *buffers.get(*index).ok_or_else(|| {
                RuntimeError::Malformed(format!(
                    "kernel {} uses missing buffer {index}",
                    kernel.name
                ))
            })?,
            Param::Translation { from, to } => {
                let (source, target) = (
                    string_dictionary(catalog, &from.0, &from.1)?,
                    string_dictionary(catalog, &to.0, &to.1)?,
                );
                let codes: Vec<i32> = source
                    .iter()
                    .map(|text| target.code_of(text).unwrap_or(-1))
                    .collect();
                column(
                    format!("{}.{}->{}.{}", from.0, from.1, to.0, to.1),
                    ColumnBytes::Translation(Arc::new(codes)),
                )?
            }
            Param::Ranks {
                from,
                among,
                entries,
            } => {
                let (source, sorted) = (
                    compiled_dictionary(catalog, &from.0, &from.1, *entries)?,
                    string_dictionary(catalog, &among.0, &among.1)?,
                );
                let ranks: Vec<i32> = source
                    .iter()
                    .map(|text| {
                        let missing = i32::from(sorted.code_of(text).is_none());
                        2 * sorted.lower_bound(text) - missing
                    })
                    .collect();
                column(
                    format!("{}.{} ranked among {}.{}", from.0, from.1, among.0, among.1),
                    ColumnBytes::Translation(Arc::new(ranks)),
                )?
            }
            Param::Derived {
                from,
                derived,
                entries,
            } => {
                // The codes were compiled for this many strings of the base.
                compiled_dictionary(catalog, &from.0, &from.1, *entries)?;
                let stale = || {
                    RuntimeError::Stale(format!(
                        "`{}.{}` is no longer a string function of `{}`",
                        derived.0, derived.1, from.1
                    ))
                };
                let function = DerivedString::parse(&derived.1).ok_or_else(stale)?;
                if function.base != from.1 {
                    return Err(stale());
                }
                // Each string is computed once, however many rows hold it (and once per
                // catalog, however many queries read it).
                let (codes, _) = catalog
                    .derived_codes(&derived.0, &derived.1)?
                    .ok_or_else(stale)?;
                column(
                    format!("{}.{}", derived.0, derived.1),
                    ColumnBytes::Translation(codes),
                )?
            }
            Param::Literal { slot, ty } => literal_bits(constant(*slot)?, *ty)?,
            Param::Matches {
                table,
                column: name,
                kind,
                slot,
                entries,
            } => {
                let pattern = text_constant(*slot)?;
                let dictionary = compiled_dictionary(catalog, table, name, *entries)?;
                // Each string is matched once, however many rows hold it, and once while the
                // device keeps the matches.
                column(
                    format!("{table}.{name} {} {pattern:?}", kind.name()),
                    ColumnBytes::Matches {
                        dictionary,
                        kind: *kind,
                        pattern: pattern.to_string(),
                    },
                )?
            }
            Param::StrCode {
                table,
                column,
                slot,
                bound,
            } => {
                let text = text_constant(*slot)?;
                let dictionary = string_dictionary(catalog, table, column)?;
                let code = match bound {
                    StrBound::Exact => dictionary.code_of(text).unwrap_or(-1),
                    StrBound::Lower => dictionary.lower_bound(text),
                    StrBound::Upper => dictionary.upper_bound(text),
                };
                i64::from(code) as u64
            }
        });
    }
    Ok(BoundLaunch {
        rows,
        args,
        slices,
        column_bytes,
    })
}

/// The bits a kernel reads for constant `value` of type `ty` (sign-extended integers, floats as
/// their IEEE bits).
fn literal_bits(value: &Value, ty: DataType) -> Result<u64, RuntimeError> {
    Ok(match (value, ty) {
        (Value::Int(i), DataType::F32) => u64::from((*i as f32).to_bits()),
        (Value::Int(i), DataType::F64) => (*i as f64).to_bits(),
        (Value::Int(i), _) => *i as u64,
        (Value::Float(x), DataType::F32) => u64::from((*x as f32).to_bits()),
        (Value::Float(x), DataType::F64) => x.to_bits(),
        (Value::Date(day), _) => i64::from(*day) as u64,
        (Value::Timestamp(micros) | Value::Time(micros), _) => *micros as u64,
        (Value::Bool(b), _) => u64::from(*b),
        // A decimal constant is hoisted at its expression's scale.
        (Value::Decimal(raw, scale), DataType::Decimal(decimal)) if *scale == decimal.scale => {
            *raw as u64
        }
        (other, ty) => {
            return Err(RuntimeError::Malformed(format!(
                "the constant {other} cannot be passed as {ty}"
            )))
        }
    })
}

/// The dictionary of string column (table, column), which the code was compiled to read as one.
fn string_dictionary(
    catalog: &Catalog,
    table: &str,
    column: &str,
) -> Result<Arc<tessera_storage::Dictionary>, RuntimeError> {
    catalog.codes_dictionary(table, column)?.ok_or_else(|| {
        RuntimeError::Stale(format!("`{table}.{column}` is no longer a string column"))
    })
}

/// The dictionary of string column (table, column), which the code was compiled for as one of
/// `entries` strings.
fn compiled_dictionary(
    catalog: &Catalog,
    table: &str,
    column: &str,
    entries: u32,
) -> Result<Arc<tessera_storage::Dictionary>, RuntimeError> {
    let dictionary = string_dictionary(catalog, table, column)?;
    if dictionary.len() != entries as usize {
        return Err(RuntimeError::Stale(format!(
            "`{table}.{column}` now has {} strings, compiled for {entries}",
            dictionary.len()
        )));
    }
    Ok(dictionary)
}

fn table_rows(catalog: &Catalog, table: &str) -> Result<u64, RuntimeError> {
    catalog
        .table(table)
        .map(|t| t.rows)
        .ok_or_else(|| RuntimeError::Storage(StorageError::UnknownTable(table.to_string())))
}

/// How a packed column no longer fits the code compiled for it, if it does not: the GPU stages a
/// tile's blocks in room for the widest block it was compiled for (host programs make room for
/// any block, and need not look), shifts and masks are compiled for one width, `pack`'s
/// reference is compiled in, and a search of a dictionary is unrolled for its length.
fn packing_changed(param: &Param, packed: &Encoded) -> Option<String> {
    match param {
        Param::PackedWords { block_words, .. }
            if *block_words < tessera_storage::compress::MAX_BLOCK_WORDS
                && packed.widest_block() > *block_words =>
        {
            Some(format!(
                "now packs blocks of {} words, compiled for at most {block_words}",
                packed.widest_block()
            ))
        }
        Param::FixedWords { width, .. } if packed.width != *width => Some(format!(
            "now packs {} bits a value, compiled for {width}",
            packed.width
        )),
        Param::FixedWords {
            reference: Some(reference),
            ..
        } if packed.dictionary.first() != Some(reference) => Some(format!(
            "now packs values from {}, compiled for {reference}",
            packed
                .dictionary
                .first()
                .map_or("nothing".into(), |r| r.to_string())
        )),
        Param::Dictionary {
            entries: Some(entries),
            ..
        } if packed.dictionary.len() != *entries as usize => Some(format!(
            "now has {} distinct values, compiled for {entries}",
            packed.dictionary.len()
        )),
        _ => None,
    }
}

fn check_rows(table: &str, column: &str, found: usize, rows: u64) -> Result<(), RuntimeError> {
    if found as u64 == rows {
        return Ok(());
    }
    Err(RuntimeError::Stale(format!(
        "`{table}.{column}` has {found} rows, the table {rows}"
    )))
}

/// Checks that each stored column the query reads still has the type its code was compiled
/// for, and holds nulls only if the code reads them.
fn check_columns(columns: &[ColumnUse], catalog: &Catalog) -> Result<(), RuntimeError> {
    for used in columns {
        let field = catalog.field(&used.table, &used.column).ok_or_else(|| {
            match catalog.table(&used.table) {
                None => RuntimeError::Stale(format!("table `{}` is gone", used.table)),
                Some(_) => RuntimeError::Stale(format!("`{}.{}` is gone", used.table, used.column)),
            }
        })?;
        if field.ty != used.ty {
            return Err(RuntimeError::Stale(format!(
                "`{}.{}` now holds {}, compiled for {}",
                used.table, used.column, field.ty, used.ty
            )));
        }
        if field.nullable && !used.nullable {
            return Err(RuntimeError::Stale(format!(
                "`{}.{}` may now hold nulls, compiled for a column without them",
                used.table, used.column
            )));
        }
    }
    Ok(())
}

fn check_assumptions(assumptions: &[Assumption], catalog: &Catalog) -> Result<(), RuntimeError> {
    for a in assumptions {
        if let Some((min, max)) = catalog.value_range(&a.table, &a.column)? {
            if min < a.min || max > a.max {
                return Err(RuntimeError::Stale(format!(
                    "`{}.{}` now ranges over {min}..={max}, compiled for {}..={}",
                    a.table, a.column, a.min, a.max
                )));
            }
        }
    }
    Ok(())
}

fn status_word(bytes: &[u8], index: u32) -> u32 {
    let at = index as usize * 4;
    bytes
        .get(at..at + 4)
        .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

fn check_status(bytes: &[u8]) -> Result<(), RuntimeError> {
    let word = |i: u32| status_word(bytes, i);
    if word(status::DUPLICATE_KEY) != 0 {
        // Joins are compiled for unique keys only where the planner knew them unique.
        return Err(RuntimeError::Stale(
            "a joined relation's key repeats, which it did not when the query was compiled".into(),
        ));
    }
    if word(status::ARITHMETIC_OVERFLOW) != 0 {
        return Err(RuntimeError::Overflow);
    }
    if word(status::SORT_TOO_LARGE) != 0 {
        return Err(RuntimeError::Unsupported(
            "sorting more than 2^32 rows on the device is not supported".into(),
        ));
    }
    if word(status::KEY_OUT_OF_RANGE) != 0 || word(status::GROUP_OUT_OF_RANGE) != 0 {
        return Err(RuntimeError::Stale(
            "a key fell outside the range it was compiled for".into(),
        ));
    }
    Ok(())
}

/// The bytes of a buffer as its fill says, for backends that fill on the host.
pub(crate) fn filled(spec: &BufferSpec, bytes: u64) -> Vec<u8> {
    let bytes = bytes as usize;
    match spec.fill {
        Fill::Zero | Fill::Unset => vec![0; bytes],
        Fill::Pattern(pattern) => {
            // A 16-byte element repeats the 8-byte pattern (see `wide_atomics`).
            let width = (spec.element_bytes as usize).min(8);
            let pattern = pattern.to_le_bytes();
            let mut out = Vec::with_capacity(bytes);
            while out.len() < bytes {
                out.extend_from_slice(&pattern[..width]);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_storage::compress::{encode, Scheme};

    fn fixed_words(width: u32, reference: i32) -> Param {
        Param::FixedWords {
            table: "t".into(),
            column: "c".into(),
            scheme: Scheme::Pack,
            width,
            reference: Some(reference),
        }
    }

    #[test]
    fn a_packed_column_no_longer_fitting_its_code_is_stale() {
        // Values below 2^6 pack in 6 bits; code compiled for 5 or 7 bits cannot read them.
        let packed = encode(&(10..74).collect::<Vec<i32>>(), Scheme::Pack);
        assert_eq!(packing_changed(&fixed_words(6, 10), &packed), None);
        for width in [5, 7] {
            let change = packing_changed(&fixed_words(width, 10), &packed).expect("stale");
            assert!(change.contains("6 bits"), "{change}");
        }
        // Nor can code that adds another reference.
        let change = packing_changed(&fixed_words(6, 9), &packed).expect("stale");
        assert!(change.contains("from 10, compiled for 9"), "{change}");
        // Nor a search of a dictionary that has grown or shrunk.
        let dict = encode(&[5, 7, 7, 9], Scheme::Dict);
        let searched = |entries| Param::Dictionary {
            table: "t".into(),
            column: "c".into(),
            scheme: Scheme::Dict,
            entries,
        };
        assert_eq!(packing_changed(&searched(Some(3)), &dict), None);
        assert_eq!(packing_changed(&searched(None), &dict), None);
        let change = packing_changed(&searched(Some(4)), &dict).expect("stale");
        assert!(
            change.contains("3 distinct values, compiled for 4"),
            "{change}"
        );

        let blocks = encode(
            &(0..256).map(|i| i * 1000).collect::<Vec<i32>>(),
            Scheme::For,
        );
        let widest = blocks.widest_block();
        let room = |block_words| Param::PackedWords {
            table: "t".into(),
            column: "c".into(),
            scheme: Scheme::For,
            block_words,
        };
        assert_eq!(packing_changed(&room(widest), &blocks), None);
        assert!(packing_changed(&room(widest - 1), &blocks).is_some());
        // Host code makes room for any block.
        let any = room(tessera_storage::compress::MAX_BLOCK_WORDS);
        assert_eq!(packing_changed(&any, &blocks), None);
    }
}
