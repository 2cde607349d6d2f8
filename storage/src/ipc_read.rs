//! Arrow IPC files (`.arrow`, `.feather` — Feather version 2 — and `.ipc`): the schema from the
//! file's footer, the row count from its record batches, and the columns read with arrow-ipc
//! on first use (every column the table holds, as for CSV).

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use arrow_ipc::reader::FileReader;

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

/// Opens an Arrow IPC table: its schema, and its rows (counted over the record batches, none
/// of whose columns are decoded).
pub(crate) fn open_ipc(path: &Path) -> Result<FileTable, StorageError> {
    let schema = reader(path, None)?.schema();
    let mut rows = 0u64;
    for batch in reader(path, Some(Vec::new()))? {
        rows += batch
            .map_err(|e| StorageError::in_file(path, e))?
            .num_rows() as u64;
    }
    Ok(file_table(&schema, rows))
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
