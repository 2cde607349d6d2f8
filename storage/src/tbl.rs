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
use crate::types::{DataType, DecimalType, Field, Schema};

/// Bytes per parallel parsing chunk.
const CHUNK_BYTES: usize = 4 << 20;

/// Counts the rows of a `.tbl` file: its lines that are not empty (a lone `\r` counts as
/// empty, as it does when parsing). The loops are simple enough for the compiler to vectorize,
/// since every `Catalog::open` pays for this on every `.tbl` table.
pub fn count_tbl_rows(path: &Path) -> Result<u64, StorageError> {
    let file = File::open(path).map_err(|e| StorageError::io(path, e))?;
    count_rows(file, 1 << 20).map_err(|e| StorageError::io(path, e))
}

fn count_rows(mut input: impl Read, buffer_size: usize) -> std::io::Result<u64> {
    let mut buffer = vec![0u8; buffer_size.max(1)];
    let mut newlines = 0u64;
    let mut empty_lines = 0u64;
    // The two bytes before the buffer, as if the file began right after a newline.
    let mut before = [b'\n', b'\n'];
    // Bytes since the last newline, to tell whether the last line is unterminated.
    let mut tail = 0usize;
    let mut tail_is_cr = false;
    loop {
        let read = input.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        let bytes = &buffer[..read];
        // The first two bytes need the two before the buffer; the rest look back within it.
        let mut window = Vec::with_capacity(4);
        window.extend_from_slice(&before);
        window.extend_from_slice(&bytes[..bytes.len().min(2)]);
        for (found, empty) in [line_ends(&window, 2), line_ends(bytes, 2)] {
            newlines += found;
            empty_lines += empty;
        }
        before = match bytes {
            [.., a, b] => [*a, *b],
            [b] => [before[1], *b],
            [] => before,
        };
        match bytes.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                tail = bytes.len() - last - 1;
                tail_is_cr = tail == 1 && bytes[last + 1] == b'\r';
            }
            None => {
                tail_is_cr = tail == 0 && bytes == b"\r";
                tail += bytes.len();
            }
        }
    }
    let unterminated = u64::from(tail > 0 && !tail_is_cr);
    Ok(newlines - empty_lines + unterminated)
}

/// The newlines at positions `from..` of `bytes` (`from >= 2`), and how many of them end an
/// empty line (one right after a newline, or after a newline and `\r`). Counting into `u8`s
/// over runs of 255 bytes, without branches, lets the compiler vectorize: about ten times
/// faster than `filter().count()`.
fn line_ends(bytes: &[u8], from: usize) -> (u64, u64) {
    let n = bytes.len();
    if n <= from {
        return (0, 0);
    }
    let (two_back, one_back, here) = (
        &bytes[from - 2..n - 2],
        &bytes[from - 1..n - 1],
        &bytes[from..],
    );
    let (mut newlines, mut empty) = (0u64, 0u64);
    for ((here, one_back), two_back) in here
        .chunks(255)
        .zip(one_back.chunks(255))
        .zip(two_back.chunks(255))
    {
        let (mut run_newlines, mut run_empty) = (0u8, 0u8);
        for ((&c, &b), &a) in here.iter().zip(one_back).zip(two_back) {
            let newline = c == b'\n';
            run_newlines += u8::from(newline);
            run_empty += u8::from(newline & ((b == b'\n') | ((b == b'\r') & (a == b'\n'))));
        }
        newlines += u64::from(run_newlines);
        empty += u64::from(run_empty);
    }
    (newlines, empty)
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
    let text = std::fs::read(path).map_err(|e| StorageError::io(path, e))?;
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
    Timestamp(Vec<i64>),
    Time(Vec<i64>),
    Str(ChunkStrings),
    Decimal(Vec<i64>, DecimalType),
    WideDecimal(Vec<i128>, DecimalType),
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
            DataType::Timestamp => ColumnValues::Timestamp(Vec::with_capacity(rows)),
            DataType::Time => ColumnValues::Time(Vec::with_capacity(rows)),
            DataType::Str => ColumnValues::Str(ChunkStrings::with_capacity(rows)),
            DataType::Decimal(decimal) if decimal.is_wide() => {
                ColumnValues::WideDecimal(Vec::with_capacity(rows), decimal)
            }
            DataType::Decimal(decimal) => ColumnValues::Decimal(Vec::with_capacity(rows), decimal),
        }
    }

    /// Parses one field into the column; an empty field of a nullable column is null. Returns
    /// whether the value is present.
    fn push(&mut self, field: &[u8], nullable: bool) -> Result<bool, String> {
        if let ColumnValues::Str(strings) = self {
            if field.is_empty() && nullable {
                strings.push_null();
                return Ok(false);
            }
            // Checked for UTF-8 once per distinct value, inside.
            strings
                .push(field)
                .map_err(|_| "the field is not UTF-8 text".to_string())?;
            return Ok(true);
        }
        let trimmed = field.trim_ascii();
        if trimmed.is_empty() && nullable {
            self.push_default();
            return Ok(false);
        }
        let bad = |what: &str| format!("`{}` is not {what}", String::from_utf8_lossy(trimmed));
        let text = || std::str::from_utf8(trimmed).ok();
        match self {
            ColumnValues::Bool(v) => v.push(
                text()
                    .and_then(parse_bool)
                    .ok_or_else(|| bad("a boolean"))?,
            ),
            ColumnValues::I32(v) => v.push(
                parse_integer(trimmed)
                    .and_then(|x| i32::try_from(x).ok())
                    .ok_or_else(|| bad("a 32-bit integer"))?,
            ),
            ColumnValues::I64(v) => {
                v.push(parse_integer(trimmed).ok_or_else(|| bad("a 64-bit integer"))?)
            }
            ColumnValues::F32(v) => v.push(
                text()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| bad("a number"))?,
            ),
            ColumnValues::F64(v) => v.push(
                text()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| bad("a number"))?,
            ),
            ColumnValues::Date(v) => v.push(
                text()
                    .and_then(parse_date)
                    .ok_or_else(|| bad("a date (yyyy-mm-dd)"))?,
            ),
            ColumnValues::Timestamp(v) => v.push(
                text()
                    .and_then(crate::date::parse_timestamp)
                    .ok_or_else(|| bad("a timestamp (yyyy-mm-dd hh:mm:ss)"))?,
            ),
            ColumnValues::Time(v) => v.push(
                text()
                    .and_then(crate::date::parse_time)
                    .ok_or_else(|| bad("a time (hh:mm:ss)"))?,
            ),
            ColumnValues::Decimal(v, decimal) => v.push(
                text()
                    .and_then(|t| crate::decimal::parse(t, decimal.scale))
                    .ok_or_else(|| bad(&format!("a {decimal}")))?,
            ),
            ColumnValues::WideDecimal(v, decimal) => v.push(
                text()
                    .and_then(|t| crate::decimal::parse_wide(t, decimal.scale))
                    .filter(|&raw| crate::decimal::fits_precision_wide(raw, decimal.precision))
                    .ok_or_else(|| bad(&format!("a {decimal}")))?,
            ),
            ColumnValues::Str(_) => {}
        }
        Ok(true)
    }

    fn push_default(&mut self) {
        match self {
            ColumnValues::Bool(v) => v.push(false),
            ColumnValues::I32(v) | ColumnValues::Date(v) => v.push(0),
            ColumnValues::I64(v)
            | ColumnValues::Decimal(v, _)
            | ColumnValues::Timestamp(v)
            | ColumnValues::Time(v) => v.push(0),
            ColumnValues::F32(v) => v.push(0.0),
            ColumnValues::F64(v) => v.push(0.0),
            ColumnValues::WideDecimal(v, _) => v.push(0),
            ColumnValues::Str(s) => s.push_null(),
        }
    }
}

/// A decimal integer with an optional sign, read straight from bytes.
fn parse_integer(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulate downwards so that i64::MIN parses too.
    let mut value: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(digit))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
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
    for (line_index, line) in lines(chunk).enumerate() {
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
        let mut found = 0;
        for text in split_bytes(line, b'|') {
            // A line with too many fields fails here; one with too few after the loop. Values
            // pushed before the failure do not matter: the whole read fails.
            let (Some(field), Some(column), Some(valid)) = (
                fields.get(found),
                values.get_mut(found),
                validity.get_mut(found),
            ) else {
                found += 1;
                continue;
            };
            found += 1;
            let present = column
                .push(text, field.nullable)
                .map_err(|message| error(format!("column `{}`: {message}", field.name)))?;
            if let Some(valid) = valid {
                valid.push(present);
            }
        }
        if found != fields.len() {
            return Err(error(format!(
                "expected {} fields separated by `|`, found {found}",
                fields.len()
            )));
        }
        rows += 1;
    }
    Ok(ChunkColumns {
        rows,
        values,
        validity,
    })
}

/// The lines of `text`, without their newlines (a final newline ends the last line, not
/// starts an empty one).
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    split_bytes(text, b'\n').filter(move |_| !text.is_empty())
}

/// Splits at every `separator`; a search loop the compiler inlines, unlike `slice::split`'s
/// predicate, which showed up as the hottest function when parsing.
fn split_bytes(bytes: &[u8], separator: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(bytes);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.iter().position(|&b| b == separator) {
            Some(i) => {
                rest = Some(&current[i + 1..]);
                Some(&current[..i])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
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
    fn gather<T: Clone>(
        parts: Vec<ColumnValues>,
        pick: impl Fn(ColumnValues) -> Option<Vec<T>>,
    ) -> crate::Values<T> {
        parts
            .into_iter()
            .filter_map(pick)
            .collect::<Vec<_>>()
            .concat()
            .into()
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
        DataType::Timestamp => ColumnData::Timestamp(gather(parts, |p| match p {
            ColumnValues::Timestamp(v) => Some(v),
            _ => None,
        })),
        DataType::Time => ColumnData::Time(gather(parts, |p| match p {
            ColumnValues::Time(v) => Some(v),
            _ => None,
        })),
        DataType::Decimal(decimal) if decimal.is_wide() => ColumnData::WideDecimal(
            gather(parts, |p| match p {
                ColumnValues::WideDecimal(v, _) => Some(v),
                _ => None,
            }),
            decimal,
        ),
        DataType::Decimal(decimal) => ColumnData::Decimal(
            gather(parts, |p| match p {
                ColumnValues::Decimal(v, _) => Some(v),
                _ => None,
            }),
            decimal,
        ),
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
    fn counts_rows_as_the_parser_sees_lines() {
        // Every text of up to 7 bytes over `a`, `\n`, `\r`, read in buffers of 1 to 8 bytes.
        let alphabet = [b'a', b'\n', b'\r'];
        for len in 0..=7u32 {
            for mut n in 0..3usize.pow(len) {
                let mut text = Vec::new();
                for _ in 0..len {
                    text.push(alphabet[n % 3]);
                    n /= 3;
                }
                let expected = lines(&text)
                    .filter(|l| !l.strip_suffix(b"\r").unwrap_or(l).is_empty())
                    .count() as u64;
                for buffer in [1, 2, 3, 8] {
                    let counted = count_rows(&text[..], buffer).unwrap();
                    assert_eq!(
                        counted,
                        expected,
                        "{:?} in buffers of {buffer}",
                        String::from_utf8_lossy(&text)
                    );
                }
            }
        }
    }

    #[test]
    fn parses_integers_from_bytes() {
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"9223372036854775808"), None);
        assert_eq!(parse_integer(b"+17"), Some(17));
        assert_eq!(parse_integer(b"1.5"), None);
        assert_eq!(parse_integer(b"-"), None);
        assert_eq!(parse_integer(b""), None);
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
        assert!(names
            .iter()
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[0] < w[1]));
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
