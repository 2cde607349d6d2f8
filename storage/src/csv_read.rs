//! CSV tables (`.csv`, comma-separated, and `.tsv`, tab-separated, each with a header row): the
//! schema inferred from the file's first rows by arrow-csv — or declared in the script, whose
//! types override the inferred ones — the row count from one quote-aware pass over the bytes,
//! and the columns decoded with arrow-csv on first use. The file is parsed whole then, so every
//! column it holds is kept.
//!
//! Every column may hold nulls (an empty field is null), as in DuckDB's `read_csv`.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use arrow_csv::reader::{Format, ReaderBuilder};
use arrow_schema::{DataType as ArrowType, Field as ArrowField, Schema as ArrowSchema};

use crate::arrow_columns::{arrow_type, file_table, positions, read_batches, FileTable};
use crate::column::Column;
use crate::error::StorageError;
use crate::progress::Progress;
use crate::types::Schema;

/// Rows the schema is inferred from. A later value that does not parse as its column's
/// inferred type fails the read, with a hint to declare the table.
const INFERENCE_ROWS: usize = 100_000;

/// Rows decoded at a time.
const BATCH_ROWS: usize = 1 << 16;

fn format_for(path: &Path) -> Format {
    let delimiter = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("tsv") => b'\t',
        _ => b',',
    };
    Format::default()
        .with_header(true)
        .with_delimiter(delimiter)
}

fn open(path: &Path) -> Result<File, StorageError> {
    File::open(path).map_err(|e| StorageError::io(path, e))
}

/// The schema arrow-csv reads the file with: inferred, with the declared columns' types.
fn arrow_schema(path: &Path, declared: Option<&Schema>) -> Result<ArrowSchema, StorageError> {
    let (inferred, _) = format_for(path)
        .infer_schema(open(path)?, Some(INFERENCE_ROWS))
        .map_err(|e| StorageError::in_file(path, format!("not a readable CSV file: {e}")))?;
    let mut names: Vec<String> = Vec::new();
    let mut fields = Vec::new();
    for field in inferred.fields() {
        // A header naming a column twice: the later ones become `name_1`, `name_2`, as in
        // DuckDB.
        let mut name = field.name().clone();
        let mut suffix = 0;
        while names.contains(&name) {
            suffix += 1;
            name = format!("{}_{suffix}", field.name());
        }
        let ty = match declared.and_then(|d| d.field(&name)) {
            Some(declared) => arrow_type(declared.ty),
            // Columns of nothing but empty fields are read as strings.
            None if field.data_type() == &ArrowType::Null => ArrowType::Utf8,
            None => field.data_type().clone(),
        };
        fields.push(ArrowField::new(&name, ty, true));
        names.push(name);
    }
    Ok(ArrowSchema::new(fields))
}

/// Opens a CSV table: its schema and its rows, without decoding any value.
pub(crate) fn open_csv(path: &Path, declared: Option<&Schema>) -> Result<FileTable, StorageError> {
    // Every field of the read schema may be null.
    let arrow = arrow_schema(path, declared)?;
    Ok(file_table(&arrow, count_records(path)?))
}

/// The records of a CSV file after its header: lines that are not blank, where a line ends at
/// a newline outside quotes (a quoted field may hold newlines; `""` inside one is a quote).
fn count_records(path: &Path) -> Result<u64, StorageError> {
    let mut file = open(path)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut records = 0u64;
    let mut in_quotes = false;
    // Whether the current line has anything but a carriage return.
    let mut line_has_text = false;
    loop {
        let read = file.read(&mut buffer).map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if read == 0 {
            break;
        }
        for &byte in &buffer[..read] {
            match byte {
                b'"' => {
                    in_quotes = !in_quotes;
                    line_has_text = true;
                }
                b'\n' if !in_quotes => {
                    records += u64::from(line_has_text);
                    line_has_text = false;
                }
                b'\r' => {}
                _ => line_has_text = true,
            }
        }
    }
    records += u64::from(line_has_text);
    // The header is not a record.
    Ok(records.saturating_sub(1))
}

/// Reads every column of `schema` (a table opened by [`open_csv`] with `rows` rows) from the
/// file, in the schema's order.
pub(crate) fn read_csv(
    path: &Path,
    schema: &Schema,
    rows: u64,
    progress: &dyn Progress,
) -> Result<Vec<Column>, StorageError> {
    let arrow = Arc::new(arrow_schema(path, Some(schema))?);
    let positions = positions(&arrow, schema).map_err(|e| StorageError::in_file(path, e))?;
    let reader = ReaderBuilder::new(Arc::clone(&arrow))
        .with_format(format_for(path))
        .with_batch_size(BATCH_ROWS)
        .with_projection(positions)
        .build(open(path)?)
        .map_err(|e| StorageError::in_file(path, e))?;
    read_batches(path, schema, reader, rows, progress, |e| {
        format!("{e}; declare the table's column types in the script to read it otherwise")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use crate::types::{DataType, Field, Value};

    fn write(text: &str, name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn types_are_inferred_and_empty_fields_are_null() {
        let (_dir, path) = write(
            "id,name,score,day,ok\n1,ann,1.5,2024-01-05,true\n2,,,,\n3,\"b, \"\"c\"\"\",2.0,2024-02-01,false\n",
            "t.csv",
        );
        let table = open_csv(&path, None).unwrap();
        let types: Vec<DataType> = table.schema.fields.iter().map(|f| f.ty).collect();
        assert_eq!(
            types,
            [
                DataType::I64,
                DataType::Str,
                DataType::F64,
                DataType::Date,
                DataType::Bool
            ]
        );
        assert_eq!(table.rows, 3);
        let columns = read_csv(&path, &table.schema, table.rows, &NoProgress).unwrap();
        assert_eq!(columns[1].data.value(2), Value::Str("b, \"c\"".into()));
        assert!(!columns[1].is_valid(1));
        assert!(!columns[2].is_valid(1));
        assert_eq!(columns[2].data.value(0), Value::Float(1.5));
    }

    #[test]
    fn declared_types_override_inferred_ones() {
        let (_dir, path) = write("a\tb\n1\t2\n", "t.tsv");
        let declared = Schema::new(vec![Field::new("a", DataType::I32)]);
        let table = open_csv(&path, Some(&declared)).unwrap();
        assert_eq!(table.schema.fields[0].ty, DataType::I32);
        assert_eq!(table.schema.fields[1].ty, DataType::I64);
    }

    #[test]
    fn a_repeated_column_name_gets_a_suffix() {
        let (_dir, path) = write("a,b,a,a\n1,2,3,4\n", "t.csv");
        let table = open_csv(&path, None).unwrap();
        let names: Vec<&str> = table.schema.names().collect();
        assert_eq!(names, ["a", "b", "a_1", "a_2"]);
        let columns = read_csv(&path, &table.schema, table.rows, &NoProgress).unwrap();
        assert_eq!(columns[3].data.value(0), Value::Int(4));
    }

    #[test]
    fn records_are_counted_outside_quotes() {
        let (_dir, path) = write("a,b\r\n1,\"x\ny\"\r\n\r\n2,z", "t.csv");
        assert_eq!(count_records(&path).unwrap(), 2);
    }

    #[test]
    fn a_value_that_does_not_parse_is_a_clear_error() {
        let mut text = String::from("a\n");
        for i in 0..INFERENCE_ROWS + 10 {
            text.push_str(&format!("{i}\n"));
        }
        text.push_str("oops\n");
        let (_dir, path) = write(&text, "t.csv");
        let table = open_csv(&path, None).unwrap();
        let error = read_csv(&path, &table.schema, table.rows, &NoProgress).unwrap_err();
        assert!(error.to_string().contains("declare"), "{error}");
    }
}
