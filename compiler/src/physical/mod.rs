//! The physical plan: a query as pipelines. A pipeline scans one table tile by tile (or the rows
//! an earlier pipeline partitioned) and runs its steps (filters, hash probes, computed columns)
//! on each tile in registers, ending in a sink (a hash-table build, an aggregation, materialized
//! rows, or rows counted or written by part); it is one kernel. Hash-table builds run before the
//! pipelines that probe them. A `where` after a `group` is a pipeline over the grouping's slots
//! that keeps the groups it selects. What remains after the last pipeline (sorting a small
//! result, `take`) runs on the host.

mod accumulators;
pub mod constants;
mod display;
mod estimate;
mod plan;
mod same_plan;

pub use accumulators::{
    accumulator_type, counts_rows, group_copy_bytes, ThreadValue, ThreadValues, GROUP_COPY_BYTES,
};
pub use display::physical_to_string;
pub use estimate::Estimates;
pub use plan::{logical_to_pipelines, logical_to_pipelines_remembering};

use tessera_grammar::ast::JoinKind;
use tessera_grammar::Span;
use tessera_runtime::program::wide_key;
use tessera_storage::DataType;

use crate::columns::{BaseColumn, ColumnId, Columns};
use crate::expr::{AggregateExpr, Expr};
use crate::typed::SortKey;

/// The values from `min` to `max`, both included: `u64::MAX` for every 64-bit integer (whose
/// count is one more), never a difference that wraps.
pub fn range_slots(min: i64, max: i64) -> u64 {
    max.abs_diff(min).saturating_add(1)
}

#[derive(Clone, Debug)]
pub struct PhysicalQuery {
    /// In the order they run.
    pub pipelines: Vec<Pipeline>,
    pub hash_tables: Vec<HashTable>,
    pub columns: Columns,
    /// The probe sides written out partitioned before their join (see [`Partitioning`]).
    pub partitionings: Vec<Partitioning>,
    /// Work on the host over the last pipeline's output.
    pub host_steps: Vec<HostStep>,
    /// Value ranges of columns the plan relies on beyond those of group keys (a sum proven
    /// not to overflow), checked against the data when the program runs.
    pub assumptions: Vec<(ColumnId, i64, i64)>,
    /// The result's columns, as the user sees them.
    pub output: Vec<(String, ColumnId)>,
    /// The values of the kernels' constants (`ExprKind::Constant`), by slot.
    pub constants: Vec<constants::Constant>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Pipeline {
    pub id: usize,
    /// The table scanned, or whose rows an earlier pipeline partitioned (`input`).
    pub table: String,
    /// The most rows the pipeline reads.
    pub rows: u64,
    /// Where the scanned columns come from.
    pub input: Input,
    /// The columns the scan produces (those the pipeline reads).
    pub scanned: Vec<ColumnId>,
    pub steps: Vec<Step>,
    pub sink: Sink,
    /// Over the slots of a grouping planned for another part of the query that asks for the
    /// same grouping again (a `let` used twice), each column read under the name this part
    /// gives it: (its name here, the grouping's column). Empty otherwise.
    pub renamed: Vec<(ColumnId, ColumnId)>,
}

/// Where a pipeline's rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The stored columns of its table.
    Table,
    /// The rows of partitioning `id`, written by the pipelines ending in
    /// `Sink::Partition { partitioning: id, .. }`, in the order of their partitions.
    Partitioned(usize),
    /// The slots of the grouping pipeline `id` ends in, once every pipeline feeding it has
    /// run: a row per slot, selected where the slot holds a group, whose columns are the
    /// group's keys and aggregates.
    Groups(usize),
}

/// A join probe into a table too large for the cache, split from the steps before it: the
/// rows reaching it are written out grouped by the part of the table their key falls in (Rui
/// and Tu's partitioned join), and a pipeline over those rows probes. Its blocks work through
/// the rows in order, so at any time they probe a few parts of the table, which stay in the L2
/// cache, instead of reading a sector from device memory per probe.
#[derive(Clone, Debug)]
pub struct Partitioning {
    pub id: usize,
    /// The hash table whose slots divide the rows.
    pub table: usize,
    /// The column holding each row's probe key.
    pub key: ColumnId,
    /// The columns written out (the key among them), which the probing pipeline scans.
    pub columns: Vec<ColumnId>,
    /// How many parts (a power of two).
    pub parts: u32,
}

/// The two passes of a partitioning pipeline: the rows are counted per part, then written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionPass {
    Count,
    Write,
}

/// Whether join probes into large tables partition their rows first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PartitionJoins {
    /// When the table is larger than [`PARTITION_TABLE_BYTES`].
    #[default]
    Auto,
    /// Every probe of a table that a pipeline can be split before (for testing the path).
    Always,
    Never,
}

impl PartitionJoins {
    /// Whether a probe into a table whose slots take `slot_bytes` partitions its rows first.
    pub fn partitions(self, slot_bytes: u64) -> bool {
        match self {
            PartitionJoins::Never => false,
            PartitionJoins::Always => true,
            PartitionJoins::Auto => slot_bytes > PARTITION_TABLE_BYTES,
        }
    }
}

/// Tables larger than this are probed after partitioning (`PartitionJoins::Auto`): most of an
/// H100's 50 MB L2, beyond which a probe reads its slot from device memory.
pub const PARTITION_TABLE_BYTES: u64 = 32 << 20;

/// The bytes of table each part covers: a block's window of rows then spans one or two parts,
/// which the L2 holds with room to spare.
pub const PARTITION_PART_BYTES: u64 = 8 << 20;

/// The most parts a partitioning has (a block counts its rows per part in shared memory).
pub const MAX_PARTITION_PARTS: u32 = 512;

#[derive(Clone, Debug)]
pub enum Step {
    /// Clears the flag of rows where `predicate` is not true.
    Filter { predicate: Expr, selectivity: f64 },
    /// Looks `key` up in a hash table: a miss clears the row's flag (inner, semi), a hit does
    /// (anti); an inner probe brings the table's payload columns into registers.
    /// A left probe (`JoinKind::Left`) keeps every row: where none matched, the payload is
    /// null, and so is the build key's column `build_key`, which it defines as the probe key
    /// (an inner probe is followed by a `Compute` of it instead: its rows all matched).
    Probe {
        table: usize,
        key: Expr,
        kind: JoinKind,
        selectivity: f64,
        build_key: Option<ColumnId>,
    },
    /// Defines `column` as `expr` for the steps and sink after it.
    Compute { column: ColumnId, expr: Expr },
}

impl Step {
    /// The expression the step evaluates: its predicate, key or computed value.
    pub fn expr(&self) -> &Expr {
        match self {
            Step::Filter { predicate, .. } => predicate,
            Step::Probe { key, .. } => key,
            Step::Compute { expr, .. } => expr,
        }
    }

    /// The columns the step defines for the steps after it: a computed column, the payload
    /// an inner or left probe brings (and a left probe's build key).
    pub fn defines(&self, tables: &[HashTable]) -> Vec<ColumnId> {
        match self {
            Step::Filter { .. } => Vec::new(),
            Step::Probe {
                table,
                kind: JoinKind::Inner | JoinKind::Left,
                build_key,
                ..
            } => tables[*table]
                .payload
                .iter()
                .copied()
                .chain(*build_key)
                .collect(),
            Step::Probe { .. } => Vec::new(),
            Step::Compute { column, .. } => vec![*column],
        }
    }
}

#[derive(Clone, Debug)]
pub enum Sink {
    /// Inserts each selected row's `key` with the table's payload columns.
    Build { table: usize, key: Expr },
    /// Aggregates selected rows into groups (or one row when there are no keys).
    Aggregate {
        keys: Vec<(ColumnId, Expr)>,
        aggregates: Vec<(ColumnId, AggregateExpr)>,
        layout: GroupLayout,
    },
    /// Writes the selected rows' columns out.
    Materialize { columns: Vec<ColumnId> },
    /// Counts, or writes, the selected rows of partitioning `partitioning` per part.
    Partition {
        partitioning: usize,
        pass: PartitionPass,
    },
    /// Empties the slot of each group no longer selected (over `Input::Groups`): the grouped
    /// result then holds only the groups kept, and only those are read back.
    KeepGroups,
}

/// A hash table filled by one pipeline and probed by another.
#[derive(Clone, Debug)]
pub struct HashTable {
    pub id: usize,
    pub built_by: usize,
    /// Columns stored beside each key and produced by a probe.
    pub payload: Vec<ColumnId>,
    pub layout: HashLayout,
    /// Rows of the build side before its filters (an upper bound on the keys inserted).
    pub max_rows: u64,
    /// Estimated rows after the build side's filters.
    pub estimated_rows: f64,
    /// How the table treats a key inserted twice.
    pub keys: BuildKeys,
    /// For string keys of two different columns: the probe key's column, whose dictionary
    /// codes the table holds; the build translates its keys' codes into them (a key the probe
    /// column never holds is not inserted).
    pub key_codes_of: Option<BaseColumn>,
    /// Whether the table is the slots of the dense grouping that pipeline `built_by` ends in,
    /// probed where they are rather than copied into a table of their own: a key's slot is
    /// its offset from the grouping key's minimum, the slot's presence byte says whether the
    /// key is there, and its accumulators are the payload (`Planner::groups_probed_in_place`).
    pub in_group_slots: bool,
}

/// What the build side's keys are known to be, and so how a key inserted twice is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildKeys {
    /// Unique (an inner join whose key column holds no value twice): a repeat is an error.
    Unique,
    /// Possibly repeated, and only presence matters (semi and anti joins): one slot per key.
    Shared,
    /// Possibly repeated, with rows to bring (inner joins): each slot heads a list of its rows,
    /// and a probe matches each of them.
    Chained,
}

impl HashTable {
    /// Whether the table is a set of keys, a bit per key (a perfect table with no payload).
    pub fn is_key_set(&self) -> bool {
        !self.in_group_slots
            && matches!(self.layout, HashLayout::Perfect { .. })
            && self.payload.is_empty()
            && self.keys != BuildKeys::Chained
    }

    /// Bytes of the table's slots, where probes land at random: all of it, but for a chained
    /// table, whose rows a probe reads as one run per key, only the slots.
    pub fn slot_bytes(&self, columns: &Columns) -> u64 {
        if self.keys == BuildKeys::Chained {
            let slots = match self.layout {
                HashLayout::Perfect { min, max } => range_slots(min, max),
                HashLayout::Open { capacity } => capacity + 1,
            };
            return slots * 16;
        }
        self.bytes(columns)
    }

    /// Bytes of device memory the table takes: a 4-byte key or presence word and the payload
    /// per slot (how the runtime lays it out, to within padding).
    pub fn bytes(&self, columns: &Columns) -> u64 {
        let payload: u64 = self
            .payload
            .iter()
            .map(|c| columns.get(*c).ty.width() as u64)
            .sum();
        let slots = match self.layout {
            HashLayout::Perfect { min, max } => range_slots(min, max),
            HashLayout::Open { capacity } => capacity + 1,
        };
        if self.is_key_set() {
            return slots.div_ceil(32) * 4;
        }
        if self.in_group_slots {
            // A presence byte and an accumulator per payload column, each an array of its own.
            return slots * (1 + payload);
        }
        if self.keys == BuildKeys::Chained {
            // A key, a count and a start per slot; per row a record (slot, rank, payload) and
            // the payload again, grouped by key.
            return slots * 16 + self.max_rows * (8 + 2 * payload.next_multiple_of(4));
        }
        let stride = (4 + payload).next_multiple_of(4);
        // Small perfect-table slots are padded to a power of two (one vector load per probe).
        let stride = match self.layout {
            HashLayout::Perfect { .. } if stride <= 16 => stride.next_power_of_two(),
            _ => stride,
        };
        slots * stride
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HashLayout {
    /// Direct index by `key - min`: the key range is dense enough.
    Perfect { min: i64, max: i64 },
    /// Open addressing with linear probing over `capacity` slots (a power of two).
    Open { capacity: u64 },
}

#[derive(Clone, Debug, PartialEq)]
pub enum GroupLayout {
    /// No keys: one accumulator per aggregate.
    Scalar,
    /// One slot per combination of key values, indexed arithmetically; `updates` says where
    /// rows are summed first.
    Dense {
        domains: Vec<KeyDomain>,
        updates: DenseUpdates,
    },
    /// Open addressing over `capacity` slots at first (a power of two; the table grows at run
    /// time when more groups turn up). Keys are packed into one 64-bit word: each in its type's
    /// bits, or, with `ranges`, as its offset from its domain's minimum in the bits the domain
    /// needs (when the types' bits would not fit and the ranges' do).
    Hash {
        capacity: u64,
        ranges: Option<Vec<KeyDomain>>,
    },
}

/// The bits each key of a hash grouping takes in the key it is packed into: its value range's
/// bits with `ranges`, else its type's ([`type_bits`]); `None` when they do not fit the widest
/// key, with one bit more for each key that may be null.
pub fn hash_key_bits(keys: &[(ColumnId, Expr)], ranges: Option<&[KeyDomain]>) -> Option<Vec<u32>> {
    let bits: Vec<u32> = match ranges {
        Some(ranges) => ranges.iter().map(KeyDomain::offset_bits).collect(),
        None => keys.iter().map(|(_, e)| type_bits(e.ty)).collect(),
    };
    (packed_bits(keys, &bits) <= wide_key::MAX_BITS).then_some(bits)
}

/// The 64-bit words the packed key of a hash grouping takes, its keys taking `bits`: one when
/// they fit it, else a wide key's (`tessera_runtime::program::wide_key`), whose words hold 63.
pub fn hash_key_words(keys: &[(ColumnId, Expr)], bits: &[u32]) -> usize {
    match packed_bits(keys, bits) {
        ..=64 => 1,
        wide => wide_key::words(wide),
    }
}

/// The bits of the keys' fields and their null flags.
fn packed_bits(keys: &[(ColumnId, Expr)], bits: &[u32]) -> u32 {
    let flags = keys.iter().filter(|(_, e)| e.nullable).count() as u32;
    bits.iter().sum::<u32>() + flags
}

/// The bits a hash key packed by its type takes: 64 for 64-bit values (a float's bits
/// included), 32 for the others.
pub fn type_bits(ty: DataType) -> u32 {
    match ty.physical() {
        DataType::I64 | DataType::F64 => 64,
        _ => 32,
    }
}

/// Where a dense grouping's rows are summed before the global slots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DenseUpdates {
    /// Nowhere: each row updates the global slots, atomically.
    Global,
    /// Each thread block's copy of the slots (in shared memory on the GPU), merged once at the
    /// end.
    BlockLocal,
    /// Each thread's own accumulators for every slot, reduced over the block at the end: for a
    /// handful of slots, which every row of a block would otherwise update atomically in turn
    /// (TPC-H Q1's four groups).
    PerThread,
}

/// The values a group key can take: `min ..= min + size - 1`, and null when `nullable` (one
/// more slot, after the values': SQL puts every null key in one group).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeyDomain {
    pub min: i64,
    pub size: u64,
    pub nullable: bool,
}

impl KeyDomain {
    /// The domain of the values `min ..= max`; `None` when it spans more than 64 bits.
    pub fn spanning(min: i64, max: i64, nullable: bool) -> Option<KeyDomain> {
        let size = u64::try_from(max.checked_sub(min)?).ok()?.checked_add(1)?;
        Some(KeyDomain {
            min,
            size,
            nullable,
        })
    }

    /// The slots the key spans: one per value, and one for null.
    pub fn slots(&self) -> u64 {
        self.size + u64::from(self.nullable)
    }

    /// The bits an offset from `min` needs.
    pub fn offset_bits(&self) -> u32 {
        64 - self.size.saturating_sub(1).leading_zeros()
    }
}

impl GroupLayout {
    pub fn slots(&self) -> u64 {
        match self {
            GroupLayout::Scalar => 1,
            GroupLayout::Dense { domains, .. } => domains.iter().map(KeyDomain::slots).product(),
            GroupLayout::Hash { capacity, .. } => *capacity,
        }
    }
}

/// Work on the host over a small result.
#[derive(Clone, Debug)]
pub enum HostStep {
    Filter(Expr),
    /// A `group` (or `aggregate`, with no keys) of a grouped or sorted result: few rows,
    /// grouped where they are.
    Aggregate {
        keys: Vec<(ColumnId, Expr)>,
        aggregates: Vec<(ColumnId, crate::expr::AggregateExpr)>,
    },
    /// Each row as many times as the expression says (none when it is 0 or less).
    Repeat(Expr),
    Project(Vec<(ColumnId, Expr)>),
    /// Orders the rows by `keys`: on the device (`on_device`, `codegen::sort`) when they are
    /// the rows the last pipeline writes out and each key is one of their columns, else here.
    Sort {
        keys: Vec<SortKey>,
        on_device: bool,
    },
    Limit(u64),
    /// Fails the query when the 64-bit integer sum `exact` wrapped: when it lies farther than
    /// 2^63 from `approximate`, the same sum in floating point (a wrap moves it by 2^64).
    CheckSum {
        exact: ColumnId,
        approximate: ColumnId,
    },
}
