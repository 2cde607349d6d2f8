//! Reads pipe-separated `.tbl` files as dbgen writes them (`1|Customer#000000001|...|`, each line
//! ending in `|`) with a schema the caller declares. The file is split at line boundaries into
//! chunks parsed in parallel; a malformed line is reported with its line number.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use rayon::prelude::*;

use crate::column::{Column, ColumnData};
use crate::date::parse_date;
use crate::error::StorageError;
use crate::progress::Progress;
use crate::string_chunks::{self, ChunkStrings};
use crate::types::{DataType, Field, Schema};

/// Bytes per parallel parsing chunk.
const CHUNK_BYTES: usize = 4 << 20;

fn io_error(path: &Path, source: std::io::Error) -> StorageError {
    StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Counts the rows of a `.tbl` file (its non-empty lines) without parsing them.
pub fn count_tbl_rows(path: &Path) -> Result<u64, StorageError> {
    let mut file = File::open(path).map_err(|e| io_error(path, e))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut rows = 0u64;
    // Whether the current line has any content yet.
    let mut in_line = false;
    loop {
        let read = file.read(&mut buffer).map_err(|e| io_error(path, e))?;
        if read == 0 {
            break;
        }
        for &byte in &buffer[..read] {
            match byte {
                b'\n' => {
                    rows += u64::from(in_line);
                    in_line = false;
                }
                b'\r' => {}
                _ => in_line = true,
            }
        }
    }
    Ok(rows + u64::from(in_line))
}

/// Reads every column of a `.tbl` file, in schema order.
pub fn read_tbl(
    path: &Path,
    schema: &Schema,
    progress: &dyn Progress,
) -> Result<Vec<Column>, StorageError> {
    read_tbl_in_chunks(path, schema, progress, CHUNK_BYTES)
}

fn read_tbl_in_chunks(
    path: &Path,
    schema: &Schema,
    progress: &dyn Progress,
    chunk_bytes: usize,
) -> Result<Vec<Column>, StorageError> {
    let text = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let chunks = split_at_lines(&text, chunk_bytes);
    let parsed: Vec<Result<ChunkColumns, LineError>> = chunks
        .par_iter()
        .map(|chunk| {
            let parsed = parse_chunk(chunk, &schema.fields);
            if let Ok(columns) = &parsed {
                progress.advance(columns.rows as u64);
            }
            parsed
        })
        .collect();
    let mut all = Vec::with_capacity(parsed.len());
    for (index, result) in parsed.into_iter().enumerate() {
        match result {
            Ok(columns) => all.push(columns),
            Err(error) => {
                // Line numbers count from 1 across the whole file.
                let lines_before: usize = chunks[..index]
                    .iter()
                    .map(|chunk| chunk.iter().filter(|&&b| b == b'\n').count())
                    .sum();
                return Err(StorageError::Text {
                    path: path.to_path_buf(),
                    line: (lines_before + error.line + 1) as u64,
                    message: error.message,
                });
            }
        }
    }
    Ok(concat_chunks(all, &schema.fields))
}

/// Splits `text` into pieces of about `target` bytes, each ending just after a newline (the
/// last one at the end of the text).
fn split_at_lines(text: &[u8], target: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = if rest.len() <= target {
            rest.len()
        } else {
            rest[target..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| target + i + 1)
        };
        let (chunk, tail) = rest.split_at(cut);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

/// A malformed line: its index within the chunk (0-based) and what is wrong.
struct LineError {
    line: usize,
    message: String,
}

/// The values of one column parsed from one chunk.
enum ColumnValues {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Date(Vec<i32>),
    Str(ChunkStrings),
}

impl ColumnValues {
    fn new(ty: DataType, rows: usize) -> ColumnValues {
        match ty {
            DataType::Bool => ColumnValues::Bool(Vec::with_capacity(rows)),
            DataType::I32 => ColumnValues::I32(Vec::with_capacity(rows)),
            DataType::I64 => ColumnValues::I64(Vec::with_capacity(rows)),
            DataType::F32 => ColumnValues::F32(Vec::with_capacity(rows)),
            DataType::F64 => ColumnValues::F64(Vec::with_capacity(rows)),
            DataType::Date => ColumnValues::Date(Vec::with_capacity(rows)),
            DataType::Str => ColumnValues::Str(ChunkStrings::with_capacity(rows)),
        }
    }

    /// Parses one field into the column; an empty field of a nullable column is null.
    fn push(&mut self, field: &[u8], nullable: bool) -> Result<bool, String> {
        let text =
            std::str::from_utf8(field).map_err(|_| "the field is not UTF-8 text".to_string())?;
        if let ColumnValues::Str(strings) = self {
            if text.is_empty() && nullable {
                strings.push_null();
                return Ok(false);
            }
            strings
                .push(field)
                .map_err(|_| "the field is not UTF-8 text".to_string())?;
            return Ok(true);
        }
        let trimmed = text.trim();
        if trimmed.is_empty() && nullable {
            self.push_default();
            return Ok(false);
        }
        let bad = |what: &str| format!("`{trimmed}` is not {what}");
        match self {
            ColumnValues::Bool(v) => v.push(parse_bool(trimmed).ok_or_else(|| bad("a boolean"))?),
            ColumnValues::I32(v) => v.push(trimmed.parse().map_err(|_| bad("a 32-bit integer"))?),
            ColumnValues::I64(v) => v.push(trimmed.parse().map_err(|_| bad("a 64-bit integer"))?),
            ColumnValues::F32(v) => v.push(trimmed.parse().map_err(|_| bad("a number"))?),
            ColumnValues::F64(v) => v.push(trimmed.parse().map_err(|_| bad("a number"))?),
            ColumnValues::Date(v) => {
                v.push(parse_date(trimmed).ok_or_else(|| bad("a date (yyyy-mm-dd)"))?)
            }
            ColumnValues::Str(_) => {}
        }
        Ok(true)
    }

    fn push_default(&mut self) {
        match self {
            ColumnValues::Bool(v) => v.push(false),
            ColumnValues::I32(v) | ColumnValues::Date(v) => v.push(0),
            ColumnValues::I64(v) => v.push(0),
            ColumnValues::F32(v) => v.push(0.0),
            ColumnValues::F64(v) => v.push(0.0),
            ColumnValues::Str(s) => s.push_null(),
        }
    }
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" => Some(true),
        "false" | "f" | "0" => Some(false),
        _ => None,
    }
}

/// One chunk's columns and, for nullable columns, which rows are valid.
struct ChunkColumns {
    rows: usize,
    values: Vec<ColumnValues>,
    validity: Vec<Option<Vec<bool>>>,
}

fn parse_chunk(chunk: &[u8], fields: &[Field]) -> Result<ChunkColumns, LineError> {
    // dbgen's lines are ~100-150 bytes; a rough count avoids most regrowth.
    let estimate = chunk.len() / 64;
    let mut values: Vec<ColumnValues> = fields
        .iter()
        .map(|f| ColumnValues::new(f.ty, estimate))
        .collect();
    let mut validity: Vec<Option<Vec<bool>>> =
        fields.iter().map(|f| f.nullable.then(Vec::new)).collect();
    let mut rows = 0;
    for (line_index, line) in chunk.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let error = |message: String| LineError {
            line: line_index,
            message,
        };
        // dbgen ends every line with the separator; tolerate lines without it too.
        let line = line.strip_suffix(b"|").unwrap_or(line);
        let found = line.split(|&b| b == b'|').count();
        if found != fields.len() {
            return Err(error(format!(
                "expected {} fields separated by `|`, found {found}",
                fields.len()
            )));
        }
        for (((text, field), column), valid) in line
            .split(|&b| b == b'|')
            .zip(fields)
            .zip(values.iter_mut())
            .zip(validity.iter_mut())
        {
            let present = column
                .push(text, field.nullable)
                .map_err(|message| error(format!("column `{}`: {message}", field.name)))?;
            if let Some(valid) = valid {
                valid.push(present);
            }
        }
        rows += 1;
    }
    Ok(ChunkColumns {
        rows,
        values,
        validity,
    })
}

/// Concatenates the chunks' columns in order; strings get one sorted dictionary per column.
fn concat_chunks(chunks: Vec<ChunkColumns>, fields: &[Field]) -> Vec<Column> {
    let mut per_column: Vec<Vec<ColumnValues>> = fields.iter().map(|_| Vec::new()).collect();
    let mut per_validity: Vec<Vec<Vec<bool>>> = fields.iter().map(|_| Vec::new()).collect();
    for chunk in chunks {
        for (index, (values, valid)) in chunk.values.into_iter().zip(chunk.validity).enumerate() {
            per_column[index].push(values);
            if let Some(valid) = valid {
                per_validity[index].push(valid);
            }
        }
    }
    per_column
        .into_par_iter()
        .zip(per_validity)
        .zip(fields)
        .map(|((parts, valid), field)| {
            let data = concat_values(parts, field.ty);
            let validity = field.nullable.then(|| valid.concat());
            Column::new(data, validity)
        })
        .collect()
}

fn concat_values(parts: Vec<ColumnValues>, ty: DataType) -> ColumnData {
    fn gather<T>(
        parts: Vec<ColumnValues>,
        pick: impl Fn(ColumnValues) -> Option<Vec<T>>,
    ) -> Vec<T> {
        parts.into_iter().filter_map(pick).flatten().collect()
    }
    match ty {
        DataType::Bool => ColumnData::Bool(gather(parts, |p| match p {
            ColumnValues::Bool(v) => Some(v),
            _ => None,
        })),
        DataType::I32 => ColumnData::I32(gather(parts, |p| match p {
            ColumnValues::I32(v) => Some(v),
            _ => None,
        })),
        DataType::I64 => ColumnData::I64(gather(parts, |p| match p {
            ColumnValues::I64(v) => Some(v),
            _ => None,
        })),
        DataType::F32 => ColumnData::F32(gather(parts, |p| match p {
            ColumnValues::F32(v) => Some(v),
            _ => None,
        })),
        DataType::F64 => ColumnData::F64(gather(parts, |p| match p {
            ColumnValues::F64(v) => Some(v),
            _ => None,
        })),
        DataType::Date => ColumnData::Date(gather(parts, |p| match p {
            ColumnValues::Date(v) => Some(v),
            _ => None,
        })),
        DataType::Str => string_chunks::merge(
            parts
                .into_iter()
                .filter_map(|p| match p {
                    ColumnValues::Str(s) => Some(s),
                    _ => None,
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use crate::tests::TempDir;
    use crate::types::Value;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("key", DataType::I32),
            Field::new("name", DataType::Str),
            Field::new("day", DataType::Date),
            Field::new("price", DataType::F64).nullable(true),
        ])
    }

    #[test]
    fn splits_only_after_newlines() {
        let text = b"aaaa\nbb\ncccccc\nd";
        let chunks = split_at_lines(text, 3);
        assert_eq!(chunks, [&b"aaaa\n"[..], b"bb\ncccccc\n", b"d"]);
        assert_eq!(chunks.concat(), text);
    }

    #[test]
    fn reads_across_many_chunks_with_one_dictionary() {
        let dir = TempDir::new("tbl-chunks");
        let path = dir.path().join("t.tbl");
        let mut text = String::new();
        for i in 0..200 {
            let price = if i % 7 == 0 {
                String::new()
            } else {
                format!("{i}.5")
            };
            text.push_str(&format!(
                "{i}|name{}|1995-03-{:02}|{price}|\n",
                i % 13,
                1 + i % 28
            ));
        }
        std::fs::write(&path, &text).unwrap();
        let columns = read_tbl_in_chunks(&path, &schema(), &NoProgress, 100).unwrap();
        assert_eq!(columns.len(), 4);
        assert_eq!(columns[0].len(), 200);
        assert_eq!(columns[0].data.value(199), Value::Int(199));
        let names = columns[1].data.dictionary().unwrap();
        assert_eq!(names.len(), 13);
        assert!(names.values().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(columns[1].data.value(27), Value::Str("name1".into()));
        assert_eq!(
            columns[2].data.value(0),
            Value::Date(crate::date::parse_date("1995-03-01").unwrap())
        );
        assert!(!columns[3].is_valid(14));
        assert_eq!(columns[3].data.value(15), Value::Float(15.5));
        assert_eq!(columns[3].stats.nulls, 29);
        assert_eq!(count_tbl_rows(&path).unwrap(), 200);
    }

    #[test]
    fn reports_the_line_of_a_malformed_field() {
        let dir = TempDir::new("tbl-bad");
        let path = dir.path().join("t.tbl");
        let mut text = String::new();
        for i in 0..50 {
            text.push_str(&format!("{i}|n|1995-03-01|1.0|\n"));
        }
        text.push_str("51|n|1995-02-30|1.0|\n");
        std::fs::write(&path, &text).unwrap();
        for chunk_bytes in [16, 1 << 20] {
            let error = read_tbl_in_chunks(&path, &schema(), &NoProgress, chunk_bytes).unwrap_err();
            let StorageError::Text { line, message, .. } = &error else {
                panic!("expected a text error, got {error}");
            };
            assert_eq!(*line, 51);
            assert!(
                message.contains("`day`") && message.contains("1995-02-30"),
                "{message}"
            );
        }
    }

    #[test]
    fn reports_a_line_with_too_few_fields() {
        let dir = TempDir::new("tbl-fields");
        let path = dir.path().join("t.tbl");
        std::fs::write(&path, "1|a|1995-03-01|1.0|\n2|b|\n").unwrap();
        let error = read_tbl(&path, &schema(), &NoProgress).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{}, line 2: expected 4 fields separated by `|`, found 2",
                path.display()
            )
        );
    }
}
