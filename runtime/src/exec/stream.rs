//! Streaming a table through the device: when the columns a query's kernels read do not fit the
//! backend's memory budget (`--gpu-memory`) together, its largest table's columns are not made
//! resident; each kernel scanning that table runs once per piece of its rows, reading copies of
//! the pieces staged on the device, and every piece adds to the same buffers (aggregates fold,
//! rows append), as one launch over the whole table would. On the GPU a piece's copies run
//! while the kernel of the piece before reads its own (two sets of staging buffers, a stream
//! for the copies beside the kernels', ordered by events).
//!
//! A piece starts at a multiple of [`PIECE_ALIGN`] rows, so that it starts at a word of a column
//! packed at one width and at a block of one packed in blocks of 128, and the kernels need no
//! change: a piece of a packed column is its words from the piece's first one, its block starts
//! rebased to them, and the spare zero words a decoder reads past the end. A query streams only
//! where every kernel reading the table scans it in tiles and may run in pieces
//! (`KernelLaunch::runs_in_pieces`); otherwise its columns are made resident as before (and do
//! not fit).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use tessera_storage::compress::{Encoded, BLOCK_LEN};
use tessera_storage::Catalog;

use super::{
    check_rows, packing_changed, table_rows, Backend, BoundLaunch, Cancel, ColumnBytes,
    RuntimeError,
};
use crate::primitives::unpack::DEVICE_SPARE_WORDS;
use crate::program::{Extent, KernelLaunch, Param, QueryProgram};

/// Pieces start at multiples of this many rows: whole words of any bit width (32 rows), whole
/// blocks of 128 values, and whole tiles of the usual shapes.
const PIECE_ALIGN: u64 = 8 * 1024;

/// The part of the budget the staged pieces take, all columns together (the pieces of each
/// column the backend keeps staged at once, `Backend::staged_pieces`; the rest of the budget
/// holds the other tables' columns).
const PIECE_SHARE: u64 = 4;

/// The table a query streams and the rows of each piece.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Streaming {
    pub table: String,
    pub piece_rows: u64,
}

/// How one parameter of a streamed kernel is cut into pieces of rows.
pub(super) enum RowSlice {
    /// `width` bytes per row of `source`: a column's values, or its validity (one byte a row).
    Rows { source: ColumnBytes, width: usize },
    /// One byte per row, all ones: a column without nulls read as one that may have them.
    AllValid,
    /// Codes of `bits` bits each in one bit stream (`pack`, `dict`).
    Fixed { words: ColumnBytes, bits: u32 },
    /// Blocks of 128 values (`for`, `dfor`): the words of the piece's blocks.
    Blocks {
        words: ColumnBytes,
        packed: Arc<Encoded>,
    },
    /// The piece's block starts, counted from its first block's first word.
    Starts { packed: Arc<Encoded> },
}

/// What a kernel reads of a streamed column for one piece of rows.
pub enum Piece<'a> {
    /// Bytes `range` of `source` as they lie in memory (`ColumnBytes::data`), then `spare`
    /// zero bytes.
    Within {
        source: &'a ColumnBytes,
        range: Range<usize>,
        spare: usize,
    },
    /// Bytes made for the piece.
    Made(Vec<u8>),
}

impl Piece<'_> {
    /// The piece's bytes, spare zeros included.
    pub fn to_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Piece::Within {
                source,
                range,
                spare,
            } => {
                let (whole, _) = source.data();
                let mut bytes = Vec::with_capacity(range.len() + spare);
                bytes.extend_from_slice(&whole[range.clone()]);
                bytes.resize(range.len() + spare, 0);
                Cow::Owned(bytes)
            }
            Piece::Made(bytes) => Cow::Borrowed(bytes),
        }
    }

    /// Bytes the piece takes on the device.
    pub fn len(&self) -> usize {
        match self {
            Piece::Within { range, spare, .. } => range.len() + spare,
            Piece::Made(bytes) => bytes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RowSlice {
    /// Bytes of the whole column on the device (made-up validity counts none).
    fn bytes(&self) -> u64 {
        match self {
            RowSlice::Rows { source, .. }
            | RowSlice::Fixed { words: source, .. }
            | RowSlice::Blocks { words: source, .. } => source.data().0.len() as u64,
            RowSlice::AllValid => 0,
            RowSlice::Starts { packed } => packed.block_starts.len() as u64 * 4,
        }
    }

    /// What a kernel reads for rows `start .. end` (`start` a multiple of [`PIECE_ALIGN`]).
    pub fn piece(&self, start: u64, end: u64) -> Piece<'_> {
        let (start, end) = (start as usize, end as usize);
        let spare = DEVICE_SPARE_WORDS * 4;
        match self {
            RowSlice::Rows { source, width } => Piece::Within {
                source,
                range: start * width..end * width,
                spare: 0,
            },
            RowSlice::AllValid => Piece::Made(vec![1; end - start]),
            RowSlice::Fixed { words, bits } => {
                let bits = *bits as usize;
                let length = words.data().0.len();
                let first = (start * bits / 32 * 4).min(length);
                let last = ((end * bits).div_ceil(32) * 4).clamp(first, length);
                Piece::Within {
                    source: words,
                    range: first..last,
                    spare,
                }
            }
            RowSlice::Blocks { words, packed } => {
                let starts = &packed.block_starts;
                let (first, last) = (start / BLOCK_LEN, end.div_ceil(BLOCK_LEN));
                let word = |block: usize| starts[block.min(starts.len() - 1)] as usize * 4;
                Piece::Within {
                    source: words,
                    range: word(first)..word(last),
                    spare,
                }
            }
            RowSlice::Starts { packed } => {
                let starts = &packed.block_starts;
                let (first, last) = (start / BLOCK_LEN, end.div_ceil(BLOCK_LEN));
                let base = starts[first];
                Piece::Made(
                    starts[first..=last.min(starts.len() - 1)]
                        .iter()
                        .flat_map(|word| (word - base).to_le_bytes())
                        .collect(),
                )
            }
        }
    }
}

/// The table of `query` whose columns stream through the device (see the module), if the
/// columns its kernels read exceed the backend's budget and it can stream.
pub(super) fn streamed_table(
    backend: &dyn Backend,
    query: &QueryProgram,
    catalog: &Catalog,
) -> Result<Option<Streaming>, RuntimeError> {
    let Some(budget) = backend.memory_budget() else {
        return Ok(None);
    };
    let mut seen: Vec<&Param> = Vec::new();
    let mut per_table: Vec<(String, u64)> = Vec::new();
    for kernel in &query.kernels {
        for param in &kernel.params {
            let Some(table) = row_param_table(param) else {
                continue;
            };
            if seen.contains(&param) {
                continue;
            }
            seen.push(param);
            let bytes = row_slice(param, catalog, table_rows(catalog, table)?)?.bytes();
            match per_table.iter_mut().find(|(t, _)| t == table) {
                Some((_, total)) => *total += bytes,
                None => per_table.push((table.to_string(), bytes)),
            }
        }
    }
    let total: u64 = per_table.iter().map(|(_, bytes)| bytes).sum();
    let Some((table, bytes)) = per_table.into_iter().max_by_key(|(_, bytes)| *bytes) else {
        return Ok(None);
    };
    if total <= budget {
        return Ok(None);
    }
    let streams_in_pieces = |kernel: &KernelLaunch| {
        let reads = kernel
            .params
            .iter()
            .any(|p| row_param_table(p) == Some(table.as_str()));
        !reads || kernel.table == table && kernel.extent == Extent::Tiles && kernel.runs_in_pieces
    };
    if !query.kernels.iter().all(streams_in_pieces) {
        return Ok(None);
    }
    let rows = table_rows(catalog, &table)?;
    let row_bytes = bytes.div_ceil(rows.max(1)).max(1);
    // Pieces also start at whole tiles of every kernel over the table, so that a tile of a
    // piece is a tile of the table (kernels writing rows index per-tile records by it).
    let align = query
        .kernels
        .iter()
        .filter(|kernel| kernel.table == table)
        .fold(PIECE_ALIGN, |align, kernel| {
            least_common_multiple(align, u64::from(kernel.tile.items().max(1)))
        });
    let staged = budget / PIECE_SHARE / backend.staged_pieces().max(1);
    let piece_rows = (staged / row_bytes) / align * align;
    let piece_rows = piece_rows.max(align);
    Ok((piece_rows < rows).then_some(Streaming { table, piece_rows }))
}

fn least_common_multiple(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// The table whose rows parameter `param` holds something of per row, if any.
pub(super) fn row_param_table(param: &Param) -> Option<&str> {
    match param {
        // One entry per distinct value, not per row.
        Param::Dictionary { .. } => None,
        _ => param.stored_column().map(|(table, ..)| table),
    }
}

/// How per-row parameter `param` of a kernel over `rows` rows is cut into pieces.
pub(super) fn row_slice(
    param: &Param,
    catalog: &Catalog,
    rows: u64,
) -> Result<RowSlice, RuntimeError> {
    let not_rows = || RuntimeError::Malformed(format!("{param:?} is not a column of rows"));
    let (table, column, scheme) = param.stored_column().ok_or_else(not_rows)?;
    let Some(scheme) = scheme else {
        let loaded = catalog.kernel_column(table, column)?;
        check_rows(table, column, loaded.len(), rows)?;
        return Ok(match param {
            Param::Column { .. } => RowSlice::Rows {
                width: loaded.data.ty().width(),
                source: ColumnBytes::Values(loaded),
            },
            _ if loaded.validity.is_some() => RowSlice::Rows {
                width: 1,
                source: ColumnBytes::Validity(loaded),
            },
            _ => RowSlice::AllValid,
        });
    };
    let packed = catalog.kernel_packed(table, column, scheme)?;
    check_rows(table, column, packed.len, rows)?;
    if let Some(change) = packing_changed(param, &packed) {
        return Err(RuntimeError::Stale(format!("`{table}.{column}` {change}")));
    }
    let words = ColumnBytes::PackedWords(Arc::clone(&packed));
    Ok(match param {
        Param::BlockStarts { .. } => RowSlice::Starts { packed },
        Param::FixedWords { width, .. } => RowSlice::Fixed {
            bits: *width,
            words,
        },
        Param::PackedWords { .. } => RowSlice::Blocks { words, packed },
        _ => return Err(not_rows()),
    })
}

/// Launches `kernel` once per piece of its rows (see the module); returns how many launches,
/// and the bytes of the pieces staged.
pub(super) fn launch_in_pieces(
    backend: &mut dyn Backend,
    kernel: &KernelLaunch,
    launch: &BoundLaunch,
    piece_rows: u64,
    cancel: Cancel<'_>,
) -> Result<(usize, u64), RuntimeError> {
    let mut args = launch.args.clone();
    let mut launches = 0;
    let mut staged = 0;
    let mut start = 0;
    while start < launch.rows {
        cancel.check()?;
        let end = (start + piece_rows).min(launch.rows);
        backend.begin_piece(launches)?;
        for (slot, (index, slice)) in launch.slices.iter().enumerate() {
            let piece = slice.piece(start, end);
            staged += piece.len() as u64;
            args[*index] = backend.stage(slot, &piece)?;
        }
        for (arg, param) in args.iter_mut().zip(&kernel.params) {
            match param {
                Param::Rows { .. } => *arg = end - start,
                Param::FirstRow => *arg = start,
                _ => {}
            }
        }
        backend.launch(kernel, end - start, &args, cancel)?;
        launches += 1;
        start = end;
    }
    Ok((launches, staged))
}
