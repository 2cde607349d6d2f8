//! The executable form of a compiled script: kernels (PTX text or host object files), and for
//! each query the kernels to launch in order with their parameters, the device buffers to
//! allocate, and how to turn those buffers into the result. It is plain data: `tessera compile
//! -o Q.tqx` writes it as JSON, and `tessera run Q.tqx` executes it without compiling anything.

mod describe;
pub mod wide_key;

use tessera_stdlib::scalar;
use tessera_stdlib::Function;
use tessera_storage::compress::Scheme;
use tessera_storage::{DataType, Value};

use crate::pattern::MatchKind;
use crate::primitives::hash::HashTableLayout;
use crate::primitives::reduce::ReduceOp;
use crate::tile::{Target, TileShape};

/// Bumped whenever the format changes, so an old artifact is refused with a clear message.
pub const FORMAT_VERSION: u32 = 22;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Program {
    pub format: u32,
    pub target: Target,
    pub code: Code,
    /// The machine code the CUDA driver linked from the PTX for one GPU and driver, which that
    /// GPU loads without compiling anything; none for host code, or before a GPU has linked it.
    pub cubins: Option<Cubins>,
    pub queries: Vec<QueryProgram>,
}

/// Kernels as the driver linked them: valid only on the GPU and driver they were linked for.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Cubins {
    /// The GPU's compute capability (`major * 10 + minor`) and the driver's version (as
    /// `cuDriverGetVersion` gives it).
    pub sm: u32,
    pub driver: i32,
    /// One per kernel of `code`, in the same order; the text is the cubin in hex.
    pub kernels: Vec<KernelCode>,
}

/// The first word of a program file.
const PROGRAM_MAGIC: &str = "TESSERA-PROGRAM";

/// Why bytes are not a program this Tessera can run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramFileError {
    #[error("it is not a Tessera program")]
    NotAProgram,
    #[error("it was written by another version of Tessera (format {found}, this one reads {FORMAT_VERSION}); compile it again")]
    OtherFormat { found: u32 },
    #[error("it is damaged (its checksum does not match)")]
    Corrupt,
    #[error("it belongs to another compilation (`{found}`, expected `{expected}`)")]
    OtherIdentity { found: String, expected: String },
    #[error("it is damaged: {0}")]
    Malformed(String),
}

impl Program {
    /// The program as a file: one header line — the magic word, the format version, a checksum
    /// of the rest of the file and `identity`, what it was compiled from (a kernel-cache key) —
    /// then the program as JSON. A program is native code that the runtime loads into the
    /// process or the GPU, so a damaged or misplaced file must never reach the loader.
    pub fn to_file(&self, identity: &str) -> Result<Vec<u8>, ProgramFileError> {
        if identity.is_empty() || identity.contains(char::is_whitespace) {
            return Err(ProgramFileError::Malformed(format!(
                "the identity `{identity}` is not one word"
            )));
        }
        let json =
            serde_json::to_vec(self).map_err(|e| ProgramFileError::Malformed(e.to_string()))?;
        let checksum = file_checksum(identity, &json);
        let mut bytes =
            format!("{PROGRAM_MAGIC} {FORMAT_VERSION} {checksum:016x} {identity}\n").into_bytes();
        bytes.extend_from_slice(&json);
        Ok(bytes)
    }

    /// Reads a program file, checking its format, its checksum and, when given, that it is
    /// the program of `identity`.
    pub fn from_file(bytes: &[u8], identity: Option<&str>) -> Result<Program, ProgramFileError> {
        let newline = bytes
            .iter()
            .position(|&b| b == b'\n')
            .filter(|&n| n < 512)
            .ok_or(ProgramFileError::NotAProgram)?;
        let header =
            std::str::from_utf8(&bytes[..newline]).map_err(|_| ProgramFileError::NotAProgram)?;
        let json = &bytes[newline + 1..];
        let words: Vec<&str> = header.split(' ').collect();
        let [magic, format, checksum, found] = words.as_slice() else {
            return Err(ProgramFileError::NotAProgram);
        };
        if *magic != PROGRAM_MAGIC {
            return Err(ProgramFileError::NotAProgram);
        }
        let format: u32 = format.parse().map_err(|_| ProgramFileError::NotAProgram)?;
        if format != FORMAT_VERSION {
            return Err(ProgramFileError::OtherFormat { found: format });
        }
        let checksum = u64::from_str_radix(checksum, 16).map_err(|_| ProgramFileError::Corrupt)?;
        if file_checksum(found, json) != checksum {
            return Err(ProgramFileError::Corrupt);
        }
        if let Some(expected) = identity.filter(|e| e != found) {
            return Err(ProgramFileError::OtherIdentity {
                found: found.to_string(),
                expected: expected.to_string(),
            });
        }
        let program: Program =
            serde_json::from_slice(json).map_err(|e| ProgramFileError::Malformed(e.to_string()))?;
        if program.format != FORMAT_VERSION {
            return Err(ProgramFileError::OtherFormat {
                found: program.format,
            });
        }
        Ok(program)
    }
}

fn file_checksum(identity: &str, json: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = twox_hash::XxHash3_64::default();
    hasher.write(identity.as_bytes());
    hasher.write(b"\n");
    hasher.write(json);
    hasher.finish()
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Code {
    /// PTX for the CUDA driver to load, a module per kernel.
    Ptx(Vec<KernelCode>),
    /// Object files for the host, hex-encoded, linked in-process at load time.
    HostObject(Vec<KernelCode>),
}

/// The compiled unit holding one kernel: kernels are compiled, and loaded, in parallel.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KernelCode {
    pub kernel: String,
    pub text: String,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct QueryProgram {
    pub kernels: Vec<KernelLaunch>,
    pub buffers: Vec<BufferSpec>,
    pub result: ResultSpec,
    /// Statistics the code was specialized for; checked against the data before running.
    pub assumptions: Vec<Assumption>,
    /// The stored columns the query reads, as the code was compiled for them; checked against
    /// the data before running.
    pub columns: Vec<ColumnUse>,
    /// The values of the constants its kernels read as parameters (`Param::Literal`,
    /// `Param::StrCode`): a query differing only in them runs the same kernels with others.
    pub constants: Vec<Value>,
    /// The first slot count to try for a grouping hash table, when the query has one; a
    /// table that fills up is replaced by one four times larger and the query runs again.
    pub group_capacity: Option<u64>,
}

/// One kernel launch: a pass over `table` in tiles of `tile`, or `parts` blocks over the
/// query's output rows.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KernelLaunch {
    pub name: String,
    pub table: String,
    pub tile: TileShape,
    pub params: Vec<Param>,
    pub extent: Extent,
    /// Whether launches over pieces of its table's rows, one after another, do what one launch
    /// over them all does (`exec::stream`): true where its sink folds or appends every row
    /// alone (aggregates, groups, rows written out) and its blocks stride over the tiles;
    /// false where a row's position is recorded (a hash table's chains, a partitioning) or
    /// blocks take tiles from a counter.
    #[serde(default)]
    pub runs_in_pieces: bool,
    /// What code generation chose for the kernel that its parameters do not show: shared
    /// memory it takes, and columns read other than as stored.
    #[serde(default)]
    pub notes: Vec<KernelNote>,
}

/// A choice made for one kernel before it was emitted (`--emit kernels` lists them).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum KernelNote {
    /// A column stored in blocks read as plain values, and why.
    ReadPlain {
        table: String,
        column: String,
        stored: Scheme,
        because: ReadPlainBecause,
    },
    /// Shared memory per thread block for staging a tile of a column's blocks.
    Staged {
        table: String,
        column: String,
        bytes: u32,
    },
    /// Shared memory per thread block for the block's copy of `slots` group slots, where rows
    /// are summed before the global slots.
    GroupCopy { slots: u64, bytes: u64 },
    /// The planner's block-local copy of the group slots left out: it needs `bytes` and the
    /// block has `left` beside its staged columns.
    NoGroupCopy { bytes: u64, left: u64 },
}

/// Why a column stored in blocks is read as plain values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReadPlainBecause {
    /// The kernel's tiles do not hold whole blocks of 128 values (with, on the GPU, a thread
    /// per 32-value miniblock).
    PartialBlocks,
    /// Staging it would take `needed` bytes of shared memory, and the staged columns before
    /// it left `left` of their budget.
    SharedMemory { needed: u32, left: u32 },
}

/// How many blocks a kernel runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Extent {
    /// As many as the table's tiles, or as many as fit on the device at once, each then
    /// looping over tiles.
    Tiles,
    /// Exactly this many (on the host: units of work handed out to threads), whatever the rows.
    Parts(u32),
    /// Like `Tiles`, a row per slot of the query's grouping: a dense array of this many slots
    /// (`Some`), or the grouping hash table's slots and its extra last one, however large it
    /// has grown.
    GroupSlots(Option<u64>),
}

/// A kernel parameter. Parameter 0 is always the table's row count.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Param {
    Rows {
        table: String,
    },
    Column {
        table: String,
        column: String,
    },
    /// One byte per row, 1 where the column holds a value.
    Validity {
        table: String,
        column: String,
    },
    /// A bit-packed column's words (`tessera_storage::compress`), then two spare zero words.
    /// The code makes room for blocks of at most `block_words` words (checked when it runs).
    PackedWords {
        table: String,
        column: String,
        scheme: Scheme,
        block_words: u32,
    },
    /// Where each 128-value block of a bit-packed column begins among its words.
    BlockStarts {
        table: String,
        column: String,
        scheme: Scheme,
    },
    /// A column packed at one width (`pack`, `dict`): its codes' bit stream, then spare zero
    /// words. The code reads codes of `width` bits and, for `pack`, adds `reference` to them
    /// (both checked when it runs).
    FixedWords {
        table: String,
        column: String,
        scheme: Scheme,
        width: u32,
        reference: Option<i32>,
    },
    /// The values a `dict` column's codes index. Code that searches it was compiled for its
    /// number of `entries` (checked when it runs).
    Dictionary {
        table: String,
        column: String,
        scheme: Scheme,
        entries: Option<u32>,
    },
    Buffer(usize),
    /// The slot count of the query's grouping hash table (a power of two), chosen at run time.
    GroupCapacity,
    /// How many rows the query's output buffers hold, chosen at run time.
    RowCapacity,
    /// The row of the scanned table that the launch's first row is: 0, or where the piece
    /// starts when the table streams through the device in pieces (`exec::stream`).
    FirstRow,
    /// A number fixed when compiling.
    Constant(u64),
    /// For each code of string column `from` (table, column), the code of the same string in
    /// column `to`'s dictionary, or -1 where `to` lacks it; computed when the query runs.
    Translation {
        from: (String, String),
        to: (String, String),
    },
    /// For each code of string column `from`, its string's rank among column `among`'s sorted
    /// strings: twice the index of the first one not below it, less one when `among` lacks it.
    /// The code was compiled for `from`'s dictionary of `entries` strings (checked when it runs).
    Ranks {
        from: (String, String),
        among: (String, String),
        entries: u32,
    },
    /// For each code of string column `from`, the code of its string's image in the dictionary
    /// of `derived`, a string function of `from` in the same table (`tessera_storage::derived`);
    /// computed when the query runs. The code was compiled for `from`'s dictionary of
    /// `entries` strings (checked when it runs).
    Derived {
        from: (String, String),
        derived: (String, String),
        entries: u32,
    },
    /// For each code of string column (table, column), 1 where its string matches the pattern
    /// `QueryProgram::constants[slot]`, else 0; computed when the query runs. The code was
    /// compiled for the column's dictionary of `entries` strings (checked when it runs).
    Matches {
        table: String,
        column: String,
        kind: MatchKind,
        slot: u32,
        entries: u32,
    },
    /// A constant of the query (`QueryProgram::constants[slot]`), as the bits of its value in
    /// type `ty`.
    Literal {
        slot: u32,
        ty: DataType,
    },
    /// The code in a column's dictionary of the string constant `QueryProgram::constants[slot]`,
    /// looked up when the query runs.
    StrCode {
        table: String,
        column: String,
        slot: u32,
        bound: StrBound,
    },
}

impl Param {
    /// The stored column the parameter holds (a part of): its table, its name, and the scheme
    /// of its packed form (`None` for its values or validity as stored).
    pub fn stored_column(&self) -> Option<(&str, &str, Option<Scheme>)> {
        match self {
            Param::Column { table, column } | Param::Validity { table, column } => {
                Some((table, column, None))
            }
            Param::PackedWords {
                table,
                column,
                scheme,
                ..
            }
            | Param::FixedWords {
                table,
                column,
                scheme,
                ..
            }
            | Param::BlockStarts {
                table,
                column,
                scheme,
            }
            | Param::Dictionary {
                table,
                column,
                scheme,
                ..
            } => Some((table, column, Some(*scheme))),
            _ => None,
        }
    }

    /// Whether the kernel receives the parameter as a device address (of a column, a table or
    /// a buffer) rather than as a 64-bit number.
    pub fn is_pointer(&self) -> bool {
        match self {
            Param::Column { .. }
            | Param::Validity { .. }
            | Param::PackedWords { .. }
            | Param::BlockStarts { .. }
            | Param::FixedWords { .. }
            | Param::Dictionary { .. }
            | Param::Translation { .. }
            | Param::Ranks { .. }
            | Param::Derived { .. }
            | Param::Matches { .. }
            | Param::Buffer(_) => true,
            Param::Rows { .. }
            | Param::GroupCapacity
            | Param::RowCapacity
            | Param::FirstRow
            | Param::Constant(_)
            | Param::Literal { .. }
            | Param::StrCode { .. } => false,
        }
    }
}

/// Which code of the dictionary a string literal stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum StrBound {
    /// The literal's own code, or -1 when the dictionary lacks it.
    Exact,
    /// The first code whose string is `>=` the literal.
    Lower,
    /// The first code whose string is `>` the literal.
    Upper,
}

/// A device buffer, filled with `fill` before the first kernel runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BufferSpec {
    pub name: String,
    pub elements: u64,
    pub element_bytes: u32,
    pub fill: Fill,
    /// One element per slot of the grouping hash table (plus one), however large it grows:
    /// `elements` is ignored.
    pub per_group_slot: bool,
    /// One element per row of each of these tables, as many as they have when the query runs
    /// (the most rows pipelines over them can write): `elements` is ignored unless empty.
    pub per_row_of: Vec<String>,
    /// With `per_row_of`: one element per this many rows (a tile's), rounded up; otherwise 1.
    pub rows_per_element: u32,
    /// One element per row of the query's output: as many as `per_row_of` says at first, and
    /// as many as were written when a run writes more (a join that matches rows several times).
    pub output: bool,
}

impl BufferSpec {
    /// Elements for a grouping table of `capacity` slots, when the buffer's tables (if it has
    /// any) have `table_rows` rows together.
    pub fn elements_for(&self, capacity: u64, table_rows: u64) -> u64 {
        if self.per_group_slot {
            capacity + 1
        } else if !self.per_row_of.is_empty() {
            table_rows.div_ceil(u64::from(self.rows_per_element.max(1)))
        } else {
            self.elements
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Fill {
    Zero,
    /// Every element set to this bit pattern (the element's width).
    Pattern(u64),
    /// Left as allocated: kernels write every element they read before reading it (a
    /// partitioning's rows, placed by its cursors). A backend whose memory must be initialized
    /// to be read (the host's) zeroes it.
    Unset,
}

/// A stored column a query reads, as its code was compiled for it: the column's type (and so
/// the width of its values), and whether it may hold nulls (code for a column without them
/// reads no validity).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ColumnUse {
    pub table: String,
    pub column: String,
    pub ty: DataType,
    pub nullable: bool,
}

/// A fact the compiler relied on: every value of the column lies in `min ..= max`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Assumption {
    pub table: String,
    pub column: String,
    pub min: i64,
    pub max: i64,
}

/// How the buffers become the result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ResultSpec {
    pub shape: ResultShape,
    /// Work on the host over the rows of `shape`, in order.
    pub steps: Vec<HostOp>,
    /// The result's columns: a name and the id of a column of `shape`.
    pub output: Vec<(String, u32)>,
    /// The type of each of `output`'s columns (what a client is told before any row).
    pub output_types: Vec<DataType>,
    /// The status buffer kernels report failed assumptions in.
    pub status_buffer: usize,
    /// Where `shape` is rows sorted on the device: the rows as written, sorted on the host
    /// instead when a run writes few.
    pub host_sort: Option<HostSort>,
}

/// A sort on the device left to the host when a run writes at most `rows` rows: its kernels (a
/// pass per byte of each key, three kernels a pass, then a gather per column) are not launched,
/// and the rows are read back as written. Dozens of kernels take longer than the host takes
/// to sort a few thousand rows (TPC-H Q2 at SF 10: 71 kernels, 1.1 ms, for 4,700 rows of which
/// it keeps 100; Q11: 28 kernels, 0.5 ms, for none).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostSort {
    /// The sort's first kernel; the sort's kernels end the query's.
    pub first_kernel: usize,
    /// The most rows written for which the host sorts them.
    pub rows: u64,
    /// The rows as written.
    pub shape: ResultShape,
    /// The host's steps over them, the sort first.
    pub steps: Vec<HostOp>,
}

impl ResultSpec {
    /// The result as read back where its sort was left to the host ([`ResultSpec::host_sort`]).
    pub fn sorted_on_host(&self) -> Option<ResultSpec> {
        let host = self.host_sort.as_ref()?;
        Some(ResultSpec {
            shape: host.shape.clone(),
            steps: host.steps.clone(),
            host_sort: None,
            ..self.clone()
        })
    }

    /// The result's columns, named and typed, as a client is told of them.
    pub fn columns(&self) -> Vec<(String, DataType)> {
        self.output
            .iter()
            .map(|(name, _)| name.clone())
            .zip(self.output_types.iter().copied())
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ResultShape {
    /// One row of aggregates.
    Scalar { aggregates: Vec<AggregateSlot> },
    /// One row per present slot of a dense array indexed by the group keys.
    Dense {
        keys: Vec<DenseKey>,
        aggregates: Vec<AggregateSlot>,
        /// One byte per slot, non-zero where the group exists.
        presence: usize,
    },
    /// One row per occupied slot of a hash table keyed by the group keys packed in 64 bits,
    /// or, for keys wider than that, in several words ([`wide_key`]).
    Hash {
        keys: Vec<HashKey>,
        aggregates: Vec<AggregateSlot>,
        /// The table's key words (`per_group_slot`): the packed key with its top bit flipped,
        /// 0 when the slot is empty; the extra last slot holds the packed key `1 << 63` and is
        /// non-zero when that group exists. For a wide key, each slot's first word, 0 when the
        /// slot is empty.
        key_buffer: usize,
        /// For a wide key, the buffers of each slot's second and later words (empty for a key
        /// of one word).
        wide: Vec<usize>,
    },
    /// Rows written out by a pipeline: `count` (an `i64`) of them in each column's buffer.
    Rows {
        columns: Vec<RowColumn>,
        count_buffer: usize,
    },
}

/// A column of materialized rows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RowColumn {
    pub id: u32,
    pub ty: DataType,
    pub buffer: usize,
    /// One byte per row, non-zero where the row holds a value (nullable columns).
    pub validity: Option<usize>,
    /// For strings: the dictionary the codes index.
    pub dictionary: Option<(String, String)>,
}

/// A group key of a hash-grouped result: bits `shift .. shift + bits` of the packed key (for a
/// wide key, of its stream of [`wide_key::WORD_BITS`]-bit fields).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HashKey {
    pub id: u32,
    pub ty: DataType,
    pub shift: u32,
    pub bits: u32,
    /// Packed by range: the field holds the key's offset from `min` (else its two's-complement
    /// bits).
    pub min: Option<i64>,
    /// Whether the bit above the value's is the key's null flag.
    pub nullable: bool,
    pub dictionary: Option<(String, String)>,
}

/// A group key of a dense result: slot index digit `(key - min)` in a domain of `size` values,
/// and, when `nullable`, digit `size` for null.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DenseKey {
    pub id: u32,
    pub ty: DataType,
    pub min: i64,
    pub size: u64,
    pub nullable: bool,
    pub dictionary: Option<(String, String)>,
}

/// Where an aggregate's accumulators are and what they mean.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AggregateSlot {
    pub id: u32,
    pub kind: AggregateKind,
    /// The type of the result column.
    pub ty: DataType,
    /// The accumulator buffer (per slot for grouped results).
    pub buffer: usize,
    /// The type the accumulator holds.
    pub accumulator: DataType,
    /// Rows that contributed (avg; and any aggregate that is null when nothing contributed).
    pub count: Option<usize>,
    /// For `min` and `max` of strings: the dictionary the codes index.
    pub dictionary: Option<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AggregateKind {
    Sum,
    Count,
    Min,
    Max,
    Avg,
}

impl AggregateKind {
    pub fn reduce_op(self) -> ReduceOp {
        match self {
            AggregateKind::Sum | AggregateKind::Count | AggregateKind::Avg => ReduceOp::Add,
            AggregateKind::Min => ReduceOp::Min,
            AggregateKind::Max => ReduceOp::Max,
        }
    }
}

/// Host work over a small result, on columns named by id.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum HostOp {
    Sort(Vec<(u32, bool)>),
    Limit(u64),
    /// Keeps rows where the expression is true.
    Filter(HostExpr),
    /// Each row as many times as its column `copies` (an integer) says, none when it is 0 or
    /// less or null.
    Repeat {
        copies: u32,
    },
    /// Fails with [`RuntimeError::SumOverflow`] where the integer sum `exact` wrapped: where it
    /// lies farther than 2^63 from `approximate`, the same sum in floating point.
    ///
    /// [`RuntimeError::SumOverflow`]: crate::exec::RuntimeError::SumOverflow
    CheckSum {
        exact: u32,
        approximate: u32,
        name: String,
    },
    /// Adds (or replaces) column `id` computed from the others.
    Compute {
        id: u32,
        ty: DataType,
        expr: HostExpr,
    },
    /// Replaces the rows with one per group of equal `keys` (column id, type, value; nulls
    /// form one group), holding the keys and `aggregates`; with no keys, one row in all.
    Aggregate {
        keys: Vec<(u32, DataType, HostExpr)>,
        aggregates: Vec<HostAggregate>,
    },
}

/// An aggregate the host computes over the rows of each group.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostAggregate {
    pub id: u32,
    /// The column's name, for an overflow's message.
    pub name: String,
    pub kind: AggregateKind,
    pub ty: DataType,
    /// `None` for `count()`.
    pub arg: Option<HostExpr>,
}

/// Expressions the host evaluates over result rows (after grouping, so on few rows), with the
/// meaning `tessera_stdlib::scalar` gives each operation.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum HostExpr {
    Column(u32),
    Literal(Value),
    Unary {
        op: scalar::Unary,
        operand: Box<HostExpr>,
    },
    Binary {
        op: scalar::Binary,
        left: Box<HostExpr>,
        right: Box<HostExpr>,
    },
    Cast {
        ty: DataType,
        operand: Box<HostExpr>,
    },
    Call {
        function: Function,
        args: Vec<HostExpr>,
    },
    Case {
        branches: Vec<(HostExpr, HostExpr)>,
        otherwise: Option<Box<HostExpr>>,
    },
    IsNull {
        operand: Box<HostExpr>,
        negated: bool,
    },
    /// Whether a string matches `pattern` (null for null).
    Matches {
        operand: Box<HostExpr>,
        kind: MatchKind,
        pattern: String,
    },
    /// A string function of a string (`substring(s, 1, 2)`), named as the derived column
    /// it makes (`tessera_storage::derived::DerivedString::name`).
    Derived {
        operand: Box<HostExpr>,
        function: String,
    },
}

/// A hash table's buffer as the executor sizes it.
pub fn hash_table_buffer(name: &str, layout: &HashTableLayout) -> BufferSpec {
    BufferSpec {
        name: name.to_string(),
        elements: layout.bytes(),
        element_bytes: 1,
        fill: Fill::Zero,
        per_group_slot: false,
        per_row_of: Vec::new(),
        rows_per_element: 1,
        output: false,
    }
}
