//! What one kernel settles before it is emitted, from its tile, the catalog's encodings and the
//! planner's grouping layout: the scheme each stored column is read in (the stored one, or
//! plain where the tile or the shared memory left cannot take it), and the shared memory its
//! blocks take for staged columns and for their copy of the group slots. Code generation reads
//! these and decides them nowhere else; `--emit kernels` lists them (`KernelNote`).
//!
//! A GPU block declares at most [`STATIC_SHARED_BYTES`]. Staged columns come first, within
//! [`STAGED_COLUMN_BYTES`]; the planner's copy of the group slots gets what they and the
//! block's reductions leave. Scans, staged writes and spread matches take theirs from what is
//! still free when they are emitted (each checks `Emitter::shared_bytes_declared`).

use tessera_grammar::{Diagnostic, DiagnosticKind};
use tessera_runtime::primitives::{reduce, unpack};
use tessera_runtime::program::{KernelNote, ReadPlainBecause};
use tessera_runtime::{Target, TileShape};
use tessera_storage::compress::{Scheme, MAX_BLOCK_WORDS};
use tessera_storage::Catalog;

use crate::physical::{group_copy_bytes, DenseUpdates, Input, PhysicalQuery, GROUP_COPY_BYTES};

use super::context::QueryContext;
use super::kernel::STATIC_SHARED_BYTES;
use super::sinks::SinkPlan;

/// Shared memory per thread block that staging columns packed in blocks may take on the GPU.
/// Which columns are staged is decided as if each took room for 32-bit values: past that
/// budget, columns are read plain. Packing every column of SSB's fact kernels was slower
/// (geomean 1.045 against 0.937 ms on the H100, docs/PERFORMANCE.md).
const STAGED_COLUMN_BYTES: u32 = 32 * 1024;

/// How a kernel reads one stored column.
pub(super) struct ColumnRead {
    pub table: String,
    pub column: String,
    /// The scheme decoded: the stored one, or `None` (plain values).
    pub scheme: Scheme,
    /// For a column read in blocks, the words its widest block takes: the room a staged tile's
    /// blocks get (every block's most on the host, which decodes from the column itself).
    pub block_words: u32,
}

/// Everything [`choose`] settled for one kernel.
pub(super) struct KernelChoices {
    /// The stored columns the kernel reads, each once, in the order asked.
    pub reads: Vec<ColumnRead>,
    /// Whether each block sums its rows into its own copy of the group slots first.
    pub group_copy: bool,
    pub notes: Vec<KernelNote>,
}

impl KernelChoices {
    pub fn read(&self, table: &str, column: &str) -> Option<&ColumnRead> {
        self.reads
            .iter()
            .find(|read| read.table == table && read.column == column)
    }
}

/// The tile shape of `query`'s kernels when none is asked for: the target's for the schemes
/// the stored columns its pipelines scan are kept in ([`Target::tile_for`]).
pub(super) fn query_tile(
    query: &PhysicalQuery,
    catalog: &Catalog,
    target: Target,
) -> Result<TileShape, Diagnostic> {
    let mut stored = Vec::new();
    // A pipeline over groups or a partitioning's rows reads buffers, not stored columns.
    for pipeline in query.pipelines.iter().filter(|p| p.input == Input::Table) {
        for id in &pipeline.scanned {
            if let Some(origin) = &query.columns.get(*id).origin {
                let scheme = catalog.scheme(&origin.table, &origin.column).map_err(|e| {
                    Diagnostic::new(DiagnosticKind::Data, query.span, e.to_string())
                })?;
                stored.push(scheme);
            }
        }
    }
    Ok(target.tile_for(stored))
}

/// Settles how a kernel with tiles of `tile` ending in `sink` reads the stored `columns` (each
/// a table's column; repeats are read once) and what shared memory it takes.
pub(super) fn choose(
    qc: &QueryContext<'_>,
    tile: TileShape,
    columns: &[(String, String)],
    sink: &SinkPlan,
) -> Result<KernelChoices, Diagnostic> {
    let data_error = |e: tessera_storage::StorageError| {
        Diagnostic::new(DiagnosticKind::Data, qc.query.span, e.to_string())
    };
    let gpu = qc.target.is_gpu();
    let mut choices = KernelChoices {
        reads: Vec::new(),
        group_copy: false,
        notes: Vec::new(),
    };
    // Budgeted at every block's most; allocated at the column's widest block.
    let mut staging_budgeted = 0;
    let mut staged_bytes = 0;
    for (table, column) in columns {
        if choices.read(table, column).is_some() {
            continue;
        }
        let stored = qc.catalog.scheme(table, column).map_err(data_error)?;
        let mut read = ColumnRead {
            table: table.clone(),
            column: column.clone(),
            scheme: stored,
            block_words: MAX_BLOCK_WORDS,
        };
        let mut read_plain = |because| {
            choices.notes.push(KernelNote::ReadPlain {
                table: table.clone(),
                column: column.clone(),
                stored,
                because,
            });
            Scheme::None
        };
        let reading = stored.reading();
        // Staged at every block's most when budgeted, at the column's widest when declared.
        let staged_at = |block_words| reading.staged_tile(tile.items(), block_words);
        if !unpack::fits(qc.target, tile, stored) {
            read.scheme = read_plain(ReadPlainBecause::PartialBlocks);
        } else if let (true, Some(most)) = (gpu, staged_at(MAX_BLOCK_WORDS)) {
            let needed = most.bytes();
            if staging_budgeted + needed > STAGED_COLUMN_BYTES {
                read.scheme = read_plain(ReadPlainBecause::SharedMemory {
                    needed,
                    left: STAGED_COLUMN_BYTES - staging_budgeted,
                });
            } else {
                staging_budgeted += needed;
                read.block_words = qc
                    .catalog
                    .packed(table, column, stored)
                    .map_err(data_error)?
                    .widest_block();
                let bytes = staged_at(read.block_words).map_or(needed, |tile| tile.bytes());
                staged_bytes += u64::from(bytes);
                choices.notes.push(KernelNote::Staged {
                    table: table.clone(),
                    column: column.clone(),
                    bytes,
                });
            }
        }
        choices.reads.push(read);
    }
    // The host's blocks are one thread each: a copy of the slots would save them nothing.
    if let SinkPlan::Aggregate {
        keys,
        aggregates,
        updates: DenseUpdates::BlockLocal,
        ..
    } = sink
    {
        if gpu && !keys.is_empty() {
            let slots: u64 = keys.iter().map(|(_, _, domain)| domain.slots()).product();
            let bytes = group_copy_bytes(slots, aggregates.iter().map(|a| &a.aggregate));
            // The planner sized the copy within `GROUP_COPY_BYTES`; what the staged columns
            // and reductions leave of the block's shared memory decides.
            let left = (STATIC_SHARED_BYTES - u64::from(reduce::SCRATCH_BYTES) - staged_bytes)
                .min(GROUP_COPY_BYTES);
            choices.group_copy = bytes <= left;
            choices.notes.push(match choices.group_copy {
                true => KernelNote::GroupCopy { slots, bytes },
                false => KernelNote::NoGroupCopy { bytes, left },
            });
        }
    }
    Ok(choices)
}
