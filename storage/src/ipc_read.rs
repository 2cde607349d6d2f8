//! Arrow IPC files (`.arrow`, `.feather` — Feather version 2 — and `.ipc`): the schema from the
//! file's footer, the row count from its record batches, and the columns read with arrow-ipc
//! on first use (every column the table holds, as for CSV).

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use arrow_ipc::reader::FileReader;

use crate::arrow_columns::{tessera_type, ColumnsBuilder};
use crate::column::Column;
use crate::error::StorageError;
use crate::progress::Progress;
use crate::types::{Field, Schema};

/// What opening an Arrow IPC file tells about its table.
pub(crate) struct IpcTable {
    pub schema: Schema,
    /// Columns Tessera cannot read, with the reason.
    pub unsupported: Vec<(String, String)>,
    pub rows: u64,
}

fn invalid(path: &Path, message: impl std::fmt::Display) -> StorageError {
    StorageError::Invalid(format!("{}: {message}", path.display()))
}

/// A reader of the file's batches, of the columns at `projection` (all when `None`).
fn reader(
    path: &Path,
    projection: Option<Vec<usize>>,
) -> Result<FileReader<BufReader<File>>, StorageError> {
    let file = File::open(path).map_err(|source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    FileReader::try_new(BufReader::new(file), projection)
        .map_err(|e| invalid(path, format!("not a readable Arrow IPC file: {e}")))
}

/// Opens an Arrow IPC table: its schema, and its rows (counted over the record batches, none
/// of whose columns are decoded).
pub(crate) fn open_ipc(path: &Path) -> Result<IpcTable, StorageError> {
    let schema = reader(path, None)?.schema();
    let mut fields = Vec::new();
    let mut unsupported = Vec::new();
    for field in schema.fields() {
        match tessera_type(field.data_type()) {
            Ok(ty) => fields.push(Field {
                name: field.name().clone(),
                ty,
                nullable: field.is_nullable(),
            }),
            Err(reason) => unsupported.push((field.name().clone(), reason)),
        }
    }
    let mut rows = 0u64;
    for batch in reader(path, Some(Vec::new()))? {
        rows += batch.map_err(|e| invalid(path, e))?.num_rows() as u64;
    }
    Ok(IpcTable {
        schema: Schema::new(fields),
        unsupported,
        rows,
    })
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
    let positions: Vec<usize> = schema
        .fields
        .iter()
        .map(|field| {
            file_schema
                .index_of(&field.name)
                .map_err(|_| invalid(path, format!("column `{}` is gone", field.name)))
        })
        .collect::<Result<_, _>>()?;
    let mut columns = ColumnsBuilder::new(schema);
    for batch in reader(path, Some(positions))? {
        let batch = batch.map_err(|e| invalid(path, e))?;
        columns.push(&batch).map_err(|e| invalid(path, e))?;
        progress.advance(batch.num_rows() as u64);
    }
    if columns.rows() != rows {
        return Err(invalid(
            path,
            format!(
                "holds {} rows where {rows} were counted; was it changed while read?",
                columns.rows()
            ),
        ));
    }
    Ok(columns.finish())
}
