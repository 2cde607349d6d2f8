//! What the kernels of one query share while they are built: the buffers and hash tables
//! they use, how each hash table is keyed (by values, or by a `dict` column's codes), the
//! buffers of chained tables and partitionings, the groupings pipelines read, and the checks
//! the data must pass when the query runs. The lowest layer of code generation: every
//! generator reads it, and it reads none of them.

use std::collections::HashMap;

use tessera_runtime::primitives::hash::HashTableLayout;
use tessera_runtime::program::{Assumption, BufferSpec, Fill, Param, ResultShape};
use tessera_runtime::{CodegenError, CodegenResult, Target, TileShape};
use tessera_storage::compress::{Part, Scheme};
use tessera_storage::{Catalog, DataType};

use crate::columns::ColumnId;
use crate::physical::{BuildKeys, Input, PhysicalQuery, Pipeline, Step};

/// What the kernels of one query share.
pub(super) struct QueryContext<'q> {
    pub query: &'q PhysicalQuery,
    pub catalog: &'q Catalog,
    pub target: Target,
    /// The tile shape of every kernel of the query.
    pub tile: TileShape,
    pub buffers: Vec<BufferSpec>,
    pub status: usize,
    /// Per hash table: its layout and where its slots are.
    pub tables: Vec<(HashTableLayout, TableSlots)>,
    /// Per hash table: the buffers of its rows, when it is chained.
    pub chains: Vec<Option<ChainBuffers>>,
    /// Per hash table: the `dict` column whose codes key it, when it is keyed by codes.
    pub coded: Vec<Option<CodedKey>>,
    pub assumptions: Vec<Assumption>,
    /// Per partitioning: its buffers.
    pub partitions: Vec<PartitionBuffers>,
    /// The first slot count of the query's grouping hash tables, if it has any (a grouping of
    /// another's groups shares it).
    pub group_capacity: Option<u64>,
    /// The grouped result of each grouping pipeline whose kernels are built (a one-row
    /// aggregate's included), by pipeline: what a pipeline over its slots reads.
    pub groupings: HashMap<usize, ResultShape>,
    /// Each sink's kind and columns, numbered.
    pub sinks: HashMap<(SinkKind, Vec<crate::columns::ColumnId>), usize>,
    /// Buffers of sinks that several pipelines share, by the sink's number and the buffer's
    /// name.
    pub sink_buffers: HashMap<(usize, String), usize>,
}

/// What a sink does with its columns. Pipelines share a sink only when they do the same: rows
/// written out over a grouping's slots name the same columns as the grouping (its keys, then
/// its aggregates) and must not be written into its accumulators, which other tiles of the
/// same kernel are still reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SinkKind {
    Groups,
    Rows,
}

/// One field of a hash table's payload: a column's values, or whether they are valid (a byte
/// per row, for a column that may hold nulls).
#[derive(Clone, Copy, Debug)]
pub(super) struct PayloadField {
    pub column: ColumnId,
    pub validity: bool,
}

/// The fields of a hash table whose payload is `payload`: every payload column's values in
/// order, then the validity of those that may hold nulls.
pub(super) fn payload_fields(query: &PhysicalQuery, payload: &[ColumnId]) -> Vec<PayloadField> {
    let values = payload.iter().map(|&column| PayloadField {
        column,
        validity: false,
    });
    let validity = payload
        .iter()
        .filter(|c| query.columns.get(**c).nullable)
        .map(|&column| PayloadField {
            column,
            validity: true,
        });
    values.chain(validity).collect()
}

/// The parameter that translates the codes of hash table `table`'s build key (`key`) into the
/// probe column's, when the table holds the probe column's codes.
pub(super) fn key_translation(
    query: &PhysicalQuery,
    table: usize,
    key: &crate::expr::Expr,
) -> Option<Param> {
    let probe = query.hash_tables[table].key_codes_of.as_ref()?;
    let build = query.columns.get(key.as_column()?).origin.clone()?;
    Some(Param::Translation {
        from: (build.table, build.column),
        to: (probe.table.clone(), probe.column.clone()),
    })
}

/// A hash table keyed by the codes of a `dict` column rather than by values: every probe of it
/// reads that column's codes, and its build finds each key's code in the column's dictionary,
/// so the table has a slot per dictionary entry and probes skip the dictionary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CodedKey {
    pub table: String,
    pub column: String,
    /// The column's scheme, whose codes index its dictionary.
    pub scheme: Scheme,
    /// The dictionary's length, the table's slot count.
    pub entries: u32,
}

impl CodedKey {
    /// The dictionary a build searches (its length checked when the kernel runs).
    pub fn dictionary(&self) -> Param {
        Param::Dictionary {
            table: self.table.clone(),
            column: self.column.clone(),
            scheme: self.scheme,
            entries: Some(self.entries),
        }
    }
}

/// The column packed with a dictionary (`dict`) whose codes can key `table`, if any: every
/// probe of the table is by that one column, read from its table (a partitioning's buffers
/// hold values) and never null, and the table is not chained (its rows are grouped by slot
/// after the build) nor a grouping's slots (indexed by the key's value,
/// `HashTable::in_group_slots`).
pub(super) fn coded_key(
    query: &PhysicalQuery,
    catalog: &Catalog,
    table: &crate::physical::HashTable,
) -> Option<CodedKey> {
    if table.keys == BuildKeys::Chained || table.in_group_slots {
        return None;
    }
    let mut origin = None;
    for pipeline in &query.pipelines {
        for step in &pipeline.steps {
            let Step::Probe { table: t, key, .. } = step else {
                continue;
            };
            if *t != table.id {
                continue;
            }
            let id = key.as_column()?;
            let info = query.columns.get(id);
            // Not a partitioning's rows or a grouping's slots, which hold values, not codes.
            let read_from_table = pipeline.scanned.contains(&id) && pipeline.input == Input::Table;
            let integer = matches!(info.ty, DataType::I32 | DataType::Date);
            if !read_from_table || !integer || info.nullable {
                return None;
            }
            let column = info.origin.as_ref()?;
            match &origin {
                None => origin = Some(column),
                Some(first) if *first == column => {}
                Some(_) => return None,
            }
        }
    }
    let origin = origin?;
    // Codes index a dictionary of the column's values, so a key's code is its slot.
    let scheme = catalog.scheme(&origin.table, &origin.column).ok()?;
    if !scheme.reading().parts.contains(&Part::Dictionary) {
        return None;
    }
    let packed = catalog.packed(&origin.table, &origin.column, scheme).ok()?;
    Some(CodedKey {
        table: origin.table.clone(),
        column: origin.column.clone(),
        scheme,
        entries: u32::try_from(packed.dictionary.len())
            .ok()
            .filter(|&n| n > 0)?,
    })
}

/// The buffers of a chained table's rows.
#[derive(Clone, Copy)]
pub(super) struct ChainBuffers {
    /// A record per row of the table that builds it (at its row number): the row's slot, its
    /// rank among the slot's rows and its payload.
    pub records: usize,
    /// The rows' payloads grouped by key (none when the table brings no columns).
    pub rows: Option<usize>,
    /// How many rows slots have claimed room for (an `i32`).
    pub placed: usize,
}

/// Where a hash table's slots are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TableSlots {
    /// A buffer of the table's own (by index), which its build fills.
    Buffer(usize),
    /// The slots of the dense grouping the pipeline of this id ends in, probed in place
    /// (`physical::HashTable::in_group_slots`).
    Grouping(usize),
}

/// The buffers of a partitioning (`physical::Partitioning`).
#[derive(Clone)]
pub(super) struct PartitionBuffers {
    /// Per part (`i64`): its row count after the counting pass, then where its next row goes.
    pub cursors: usize,
    /// The number of rows written (`i64`).
    pub total: usize,
    /// Per column written: its values and, when it may be null, its validity bytes.
    pub columns: Vec<(crate::columns::ColumnId, usize, Option<usize>)>,
}

impl QueryContext<'_> {
    pub fn buffer(&mut self, name: String, elements: u64, ty_bytes: u32, fill: Fill) -> usize {
        self.buffers.push(BufferSpec {
            name,
            elements,
            element_bytes: ty_bytes,
            fill,
            per_group_slot: false,
            per_row_of: Vec::new(),
            rows_per_element: 1,
            output: false,
        });
        self.buffers.len() - 1
    }

    /// The grouped result pipeline `pipeline` reads the slots of, when it runs over a
    /// grouping's slots (`Input::Groups`), its columns named as the pipeline reads them
    /// (`Pipeline::renamed`).
    pub fn grouping_read(&self, pipeline: &Pipeline) -> CodegenResult<Option<ResultShape>> {
        let Input::Groups(grouping) = pipeline.input else {
            return Ok(None);
        };
        let mut shape = self
            .groupings
            .get(&grouping)
            .ok_or_else(not_grouped)?
            .clone();
        if !pipeline.renamed.is_empty() {
            let name = |id: &mut u32| {
                if let Some((name, _)) = pipeline.renamed.iter().find(|(_, of)| of.0 == *id) {
                    *id = name.0;
                }
            };
            match &mut shape {
                ResultShape::Scalar { aggregates } => {
                    aggregates.iter_mut().for_each(|a| name(&mut a.id))
                }
                ResultShape::Dense {
                    keys, aggregates, ..
                } => {
                    keys.iter_mut().for_each(|k| name(&mut k.id));
                    aggregates.iter_mut().for_each(|a| name(&mut a.id));
                }
                ResultShape::Hash {
                    keys, aggregates, ..
                } => {
                    keys.iter_mut().for_each(|k| name(&mut k.id));
                    aggregates.iter_mut().for_each(|a| name(&mut a.id));
                }
                ResultShape::Rows { .. } => return Err(not_grouped()),
            }
        }
        Ok(Some(shape))
    }

    /// A buffer with one element per slot of the grouping hash table, however large it grows.
    pub fn group_buffer(&mut self, name: String, ty_bytes: u32, fill: Fill) -> usize {
        let index = self.buffer(name, 0, ty_bytes, fill);
        self.buffers[index].per_group_slot = true;
        index
    }

    /// The buffer of hash table `table`, which a build fills (a table that is a grouping's
    /// slots has none).
    pub fn table_buffer(&self, table: usize) -> CodegenResult<usize> {
        match self.tables[table].1 {
            TableSlots::Buffer(buffer) => Ok(buffer),
            TableSlots::Grouping(_) => Err(CodegenError::Invalid(format!(
                "hash table {table} is a grouping's slots, not a buffer"
            ))),
        }
    }

    /// Whether `pipeline` probes a hash table whose keys repeat: a tile's rows then run in
    /// rounds of matches, each a row of the tile or none.
    pub fn probes_chains(&self, pipeline: &Pipeline) -> bool {
        pipeline
            .steps
            .iter()
            .any(|step| matches!(step, Step::Probe { table, .. } if self.chains[*table].is_some()))
    }

    /// The sink that writes or groups `columns`: the same for every pipeline ending in it
    /// (the inputs of a `union`), for [`QueryContext::sink_buffer`].
    pub fn sink(&mut self, kind: SinkKind, columns: &[crate::columns::ColumnId]) -> usize {
        let next = self.sinks.len();
        *self.sinks.entry((kind, columns.to_vec())).or_insert(next)
    }

    /// Buffer `name` of `sink`: made by `make` for the first pipeline ending in that sink, and
    /// shared by the next.
    pub fn sink_buffer(
        &mut self,
        sink: usize,
        name: &str,
        make: impl FnOnce(&mut Self) -> usize,
    ) -> usize {
        let key = (sink, name.to_string());
        if let Some(&index) = self.sink_buffers.get(&key) {
            return index;
        }
        let index = make(self);
        self.sink_buffers.insert(key, index);
        index
    }

    /// Records that the stored column behind `id` must lie in `min ..= max`.
    pub fn assume_range(&mut self, id: crate::columns::ColumnId, min: i64, max: i64) {
        let info = self.query.columns.get(id);
        // Dictionary codes are rebuilt with the data; their range is checked through the
        // dictionary size instead, which the same assumption covers (codes are 0..size).
        if let Some(origin) = &info.origin {
            let assumption = Assumption {
                table: origin.table.clone(),
                column: origin.column.clone(),
                min,
                max,
            };
            if !self.assumptions.contains(&assumption) {
                self.assumptions.push(assumption);
            }
        }
    }
}

/// The error of a pipeline over a grouping's slots that has no grouping to read.
pub(super) fn not_grouped() -> CodegenError {
    CodegenError::Invalid("a pipeline over groups follows no grouping".into())
}
