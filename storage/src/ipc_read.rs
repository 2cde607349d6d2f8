//! Arrow IPC files (`.arrow`, `.feather` — Feather version 2 — and `.ipc`): the schema from the
//! file's footer, the row count from its record batches' metadata, and the columns read with
//! arrow-ipc on first use (every column the table holds, as for CSV).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use arrow_ipc::reader::{read_footer_length, FileReader};
use arrow_ipc::{root_as_footer, root_as_message};

use crate::arrow_columns::{file_table, positions, read_batches, FileTable};
use crate::column::Column;
use crate::error::StorageError;
use crate::progress::Progress;
use crate::types::Schema;

/// A reader of the file's batches, of the columns at `projection` (all when `None`).
fn reader(
    path: &Path,
    projection: Option<Vec<usize>>,
) -> Result<FileReader<BufReader<File>>, StorageError> {
    let file = File::open(path).map_err(|e| StorageError::io(path, e))?;
    FileReader::try_new(BufReader::new(file), projection)
        .map_err(|e| StorageError::in_file(path, format!("not a readable Arrow IPC file: {e}")))
}

/// Opens an Arrow IPC table: its schema, and its rows, counted from each record batch's
/// metadata (the batches' data is not read: a query that does not read the table costs it
/// nothing, however large the file).
pub(crate) fn open_ipc(path: &Path) -> Result<FileTable, StorageError> {
    let schema = reader(path, None)?.schema();
    let rows = count_rows(path)?;
    Ok(file_table(&schema, rows))
}

/// The rows of an IPC file: the footer lists its record batches, and each batch's metadata
/// (a flatbuffer message before its data) holds its length.
fn count_rows(path: &Path) -> Result<u64, StorageError> {
    let bad = |what: String| {
        StorageError::in_file(path, format!("not a readable Arrow IPC file: {what}"))
    };
    let mut file = File::open(path).map_err(|e| StorageError::io(path, e))?;
    let size = file
        .metadata()
        .map_err(|e| StorageError::io(path, e))?
        .len();
    let mut read_at = |offset: u64, length: usize| -> Result<Vec<u8>, StorageError> {
        if offset.saturating_add(length as u64) > size {
            return Err(bad("a part lies beyond the end of the file".into()));
        }
        let mut bytes = vec![0u8; length];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| StorageError::io(path, e))?;
        Ok(bytes)
    };
    let tail: [u8; 10] = read_at(size.saturating_sub(10), 10)?
        .try_into()
        .map_err(|_| bad("no footer".into()))?;
    let footer_length = read_footer_length(tail).map_err(|e| bad(e.to_string()))?;
    let footer_start = size
        .checked_sub(10 + footer_length as u64)
        .ok_or_else(|| bad("the footer is longer than the file".into()))?;
    let footer_bytes = read_at(footer_start, footer_length)?;
    let footer = root_as_footer(&footer_bytes).map_err(|e| bad(e.to_string()))?;
    let mut rows = 0u64;
    for block in footer.recordBatches().into_iter().flatten() {
        let (Ok(offset), Ok(length)) = (
            u64::try_from(block.offset()),
            usize::try_from(block.metaDataLength()),
        ) else {
            return Err(bad("a record batch at a negative offset".into()));
        };
        if length < 8 || length as u64 > size {
            return Err(bad(format!("a record batch's metadata of {length} bytes")));
        }
        let metadata = read_at(offset, length)?;
        // An encapsulated message: a continuation marker (in files since format 0.15) and
        // the message's length, then the message.
        let message = match metadata[..4] == [0xff; 4] {
            true => &metadata[8..],
            false => &metadata[4..],
        };
        let batch = root_as_message(message)
            .map_err(|e| bad(e.to_string()))?
            .header_as_record_batch()
            .ok_or_else(|| bad("a block that is not a record batch".into()))?;
        rows += u64::try_from(batch.length()).map_err(|_| bad("a negative row count".into()))?;
    }
    Ok(rows)
}

/// Reads every column of `schema` (a table opened by [`open_ipc`] with `rows` rows), in the
/// schema's order.
pub(crate) fn read_ipc(
    path: &Path,
    schema: &Schema,
    rows: u64,
    progress: &dyn Progress,
) -> Result<Vec<Column>, StorageError> {
    let file_schema = reader(path, None)?.schema();
    let positions = positions(&file_schema, schema).map_err(|e| StorageError::in_file(path, e))?;
    let batches = reader(path, Some(positions))?;
    read_batches(path, schema, batches, rows, progress, |e| e.to_string())
}
