//! Writes tables as Parquet files other engines read: strings as UTF-8 byte arrays, dates as
//! `INT32` with the `DATE` logical type, nullable columns as `OPTIONAL`, snappy compression,
//! row groups of about a million rows. A file appears under its name only once it is complete,
//! written through an exclusively created temporary file beside it.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::BufWriter;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::ColumnWriterImpl;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType as ParquetType, DoubleType};
use parquet::data_type::{
    FixedLenByteArray, FixedLenByteArrayType, FloatType, Int32Type, Int64Type,
};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, Type as SchemaType};

use crate::column::{ColumnData, Dictionary};
use crate::error::StorageError;
use crate::types::{DataType, DecimalType, Schema};

/// Rows per row group unless the caller asks otherwise: large enough for fast scans, small
/// enough that a table of a few million rows still splits into row groups to read in parallel.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1 << 20;

/// The values of one column to write, borrowed from wherever they live.
#[derive(Clone, Copy, Debug)]
pub enum WriteValues<'a> {
    Bool(&'a [bool]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    /// Days since 1970-01-01.
    Date(&'a [i32]),
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(&'a [i64]),
    /// Microseconds since midnight.
    Time(&'a [i64]),
    /// Dictionary codes, written as the strings they stand for.
    Codes {
        codes: &'a [i32],
        dictionary: &'a Dictionary,
    },
    /// One string per row.
    Text(&'a [String]),
    /// One string per row, each from a generator's fixed text (written without copying it).
    Words(&'a [&'static str]),
    /// Raw decimal values, written as `INT64` annotated `DECIMAL`.
    Decimal(&'a [i64], DecimalType),
    /// Raw values of a decimal of more than 18 digits, written as 16 big-endian bytes
    /// (`FIXED_LEN_BYTE_ARRAY`) annotated `DECIMAL`, as DuckDB and Arrow write them.
    WideDecimal(&'a [i128], DecimalType),
}

impl WriteValues<'_> {
    pub fn len(&self) -> usize {
        match self {
            WriteValues::Bool(v) => v.len(),
            WriteValues::I32(v) | WriteValues::Date(v) => v.len(),
            WriteValues::I64(v)
            | WriteValues::Decimal(v, _)
            | WriteValues::Timestamp(v)
            | WriteValues::Time(v) => v.len(),
            WriteValues::F32(v) => v.len(),
            WriteValues::F64(v) => v.len(),
            WriteValues::WideDecimal(v, _) => v.len(),
            WriteValues::Codes { codes, .. } => codes.len(),
            WriteValues::Text(v) => v.len(),
            WriteValues::Words(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ty(&self) -> DataType {
        match self {
            WriteValues::Bool(_) => DataType::Bool,
            WriteValues::I32(_) => DataType::I32,
            WriteValues::I64(_) => DataType::I64,
            WriteValues::Decimal(_, decimal) | WriteValues::WideDecimal(_, decimal) => {
                DataType::Decimal(*decimal)
            }
            WriteValues::F32(_) => DataType::F32,
            WriteValues::F64(_) => DataType::F64,
            WriteValues::Date(_) => DataType::Date,
            WriteValues::Timestamp(_) => DataType::Timestamp,
            WriteValues::Time(_) => DataType::Time,
            WriteValues::Codes { .. } | WriteValues::Text(_) | WriteValues::Words(_) => {
                DataType::Str
            }
        }
    }
}

impl<'a> From<&'a ColumnData> for WriteValues<'a> {
    fn from(data: &'a ColumnData) -> WriteValues<'a> {
        match data {
            ColumnData::Bool(v) => WriteValues::Bool(v),
            ColumnData::I32(v) => WriteValues::I32(v),
            ColumnData::I64(v) => WriteValues::I64(v),
            ColumnData::Decimal(v, decimal) => WriteValues::Decimal(v, *decimal),
            ColumnData::WideDecimal(v, decimal) => WriteValues::WideDecimal(v, *decimal),
            ColumnData::F32(v) => WriteValues::F32(v),
            ColumnData::F64(v) => WriteValues::F64(v),
            ColumnData::Date(v) => WriteValues::Date(v),
            ColumnData::Timestamp(v) => WriteValues::Timestamp(v),
            ColumnData::Time(v) => WriteValues::Time(v),
            ColumnData::Str { codes, dictionary } => WriteValues::Codes { codes, dictionary },
        }
    }
}

/// One column to write: its values, which rows are valid (`None`: all of them), and whether
/// its writer knows that no value repeats (recorded in the file, for the planner).
#[derive(Clone, Copy, Debug)]
pub struct WriteColumn<'a> {
    pub values: WriteValues<'a>,
    pub validity: Option<&'a [bool]>,
    pub unique: bool,
}

impl<'a> WriteColumn<'a> {
    pub fn new(values: impl Into<WriteValues<'a>>) -> WriteColumn<'a> {
        WriteColumn {
            values: values.into(),
            validity: None,
            unique: false,
        }
    }

    /// The same column, declared to hold no value twice.
    pub fn unique(self) -> WriteColumn<'a> {
        WriteColumn {
            unique: true,
            ..self
        }
    }
}

/// The footer key whose value names, comma-separated, the columns whose writer knew that no
/// value repeats.
pub const UNIQUE_COLUMNS_KEY: &str = "tessera.unique_columns";

/// Writes whole columns (`validity[i]` belongs to `columns[i]`; `None` means no nulls) to one
/// Parquet file at `path` with the default row-group size.
pub fn write_parquet(
    path: &Path,
    schema: &Schema,
    columns: &[ColumnData],
    validity: &[Option<Vec<bool>>],
) -> Result<(), StorageError> {
    if validity.len() != columns.len() {
        return Err(StorageError::Invalid(format!(
            "{}: {} columns but {} validity entries",
            path.display(),
            columns.len(),
            validity.len()
        )));
    }
    let columns: Vec<WriteColumn<'_>> = columns
        .iter()
        .zip(validity)
        .map(|(data, valid)| WriteColumn {
            values: data.into(),
            validity: valid.as_deref(),
            unique: false,
        })
        .collect();
    write_parquet_columns(path, schema, &columns, DEFAULT_ROW_GROUP_ROWS)
}

/// Writes borrowed columns to one Parquet file at `path`, `row_group_rows` rows per row group.
/// The file is written into a new temporary file in the same folder (created exclusively at a
/// random, hidden name) and renamed over `path` when complete, so a reader sees the whole file
/// or the one it replaces, and a link planted at any name is replaced, never written through.
pub fn write_parquet_columns(
    path: &Path,
    schema: &Schema,
    columns: &[WriteColumn<'_>],
    row_group_rows: usize,
) -> Result<(), StorageError> {
    let rows = check_columns(path, schema, columns)?;
    let io = |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        StorageError::Invalid(format!("{}: not the path of a file", path.display()))
    })?;
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // Hidden, so catalogs and globs skip it; 0o666 so the umask decides, as for any new file.
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let temporary = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".partial")
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(folder)
        .map_err(io)?;
    // On an error the temporary file is removed when it is dropped.
    write_file(
        temporary.as_file(),
        path,
        schema,
        columns,
        rows,
        row_group_rows.max(1),
    )?;
    temporary.persist(path).map_err(|error| io(error.error))?;
    Ok(())
}

fn check_columns(
    path: &Path,
    schema: &Schema,
    columns: &[WriteColumn<'_>],
) -> Result<usize, StorageError> {
    let invalid = |message: String| StorageError::Invalid(format!("{}: {message}", path.display()));
    if schema.fields.len() != columns.len() {
        return Err(invalid(format!(
            "the schema has {} columns but {} were given",
            schema.fields.len(),
            columns.len()
        )));
    }
    let rows = columns.first().map_or(0, |c| c.values.len());
    for (field, column) in schema.fields.iter().zip(columns) {
        if column.values.ty() != field.ty {
            return Err(invalid(format!(
                "column `{}` is declared {} but holds {}",
                field.name,
                field.ty,
                column.values.ty()
            )));
        }
        if column.values.len() != rows || column.validity.is_some_and(|v| v.len() != rows) {
            return Err(invalid(format!(
                "column `{}` does not have {rows} rows like the first column",
                field.name
            )));
        }
        if column.validity.is_some() && !field.nullable {
            return Err(invalid(format!(
                "column `{}` has a validity vector but is not nullable",
                field.name
            )));
        }
    }
    Ok(rows)
}

fn parquet_schema(schema: &Schema) -> parquet::errors::Result<SchemaType> {
    let mut fields = Vec::with_capacity(schema.fields.len());
    for field in &schema.fields {
        let (physical, logical) = match field.ty {
            DataType::Bool => (PhysicalType::BOOLEAN, None),
            DataType::I32 => (PhysicalType::INT32, None),
            DataType::I64 => (PhysicalType::INT64, None),
            DataType::F32 => (PhysicalType::FLOAT, None),
            DataType::F64 => (PhysicalType::DOUBLE, None),
            DataType::Date => (PhysicalType::INT32, Some(LogicalType::Date)),
            DataType::Timestamp => (
                PhysicalType::INT64,
                Some(LogicalType::timestamp(
                    false,
                    parquet::basic::TimeUnit::MICROS,
                )),
            ),
            DataType::Time => (
                PhysicalType::INT64,
                Some(LogicalType::time(false, parquet::basic::TimeUnit::MICROS)),
            ),
            DataType::Str => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            DataType::Decimal(decimal) => (
                if decimal.is_wide() {
                    PhysicalType::FIXED_LEN_BYTE_ARRAY
                } else {
                    PhysicalType::INT64
                },
                Some(LogicalType::Decimal(parquet::basic::DecimalType {
                    scale: i32::from(decimal.scale),
                    precision: i32::from(decimal.precision),
                })),
            ),
        };
        let repetition = if field.nullable {
            Repetition::OPTIONAL
        } else {
            Repetition::REQUIRED
        };
        let decimal = field.ty.decimal();
        let column = SchemaType::primitive_type_builder(&field.name, physical)
            .with_repetition(repetition)
            .with_logical_type(logical)
            .with_precision(decimal.map_or(-1, |d| i32::from(d.precision)))
            .with_scale(decimal.map_or(-1, |d| i32::from(d.scale)))
            .with_length(if field.ty.is_wide_decimal() { 16 } else { -1 })
            .build()?;
        fields.push(Arc::new(column));
    }
    SchemaType::group_type_builder("schema")
        .with_fields(fields)
        .build()
}

/// Writes the file into `file`; `path` names it in errors.
fn write_file(
    file: &File,
    path: &Path,
    schema: &Schema,
    columns: &[WriteColumn<'_>],
    rows: usize,
    row_group_rows: usize,
) -> Result<(), StorageError> {
    let error = |e: parquet::errors::ParquetError| StorageError::Parquet {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("tessera {}", env!("CARGO_PKG_VERSION")));
    for (field, column) in schema.fields.iter().zip(columns) {
        properties = properties.set_column_dictionary_enabled(
            ColumnPath::new(vec![field.name.clone()]),
            worth_a_dictionary(column.values),
        );
    }
    let unique: Vec<&str> = schema
        .fields
        .iter()
        .zip(columns)
        .filter(|(_, column)| column.unique)
        .map(|(field, _)| field.name.as_str())
        .collect();
    if !unique.is_empty() {
        properties = properties.set_key_value_metadata(Some(vec![KeyValue::new(
            UNIQUE_COLUMNS_KEY.to_string(),
            unique.join(","),
        )]));
    }
    let properties = properties.build();
    let mut writer = SerializedFileWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        Arc::new(parquet_schema(schema).map_err(error)?),
        Arc::new(properties),
    )
    .map_err(error)?;
    let mut start = 0;
    // An empty table still gets one (empty) row group so that every reader sees its schema.
    loop {
        let end = (start + row_group_rows).min(rows);
        let mut group = writer.next_row_group().map_err(error)?;
        for column in columns {
            let Some(mut out) = group.next_column().map_err(error)? else {
                break;
            };
            let validity = column.validity.map(|v| &v[start..end]);
            write_slice(&mut out, column.values, start..end, validity).map_err(error)?;
            out.close().map_err(error)?;
        }
        group.close().map_err(error)?;
        start = end;
        if start >= rows {
            break;
        }
    }
    writer.close().map_err(error)?;
    Ok(())
}

/// Values sampled to estimate how many distinct values a column has.
const SAMPLE: usize = 8192;
/// Dictionary-encode a column only when it has at most about this many distinct values.
const DICTIONARY_MAX_DISTINCT: usize = 1 << 16;

/// Whether dictionary encoding pays for a column. It does when values repeat; when they barely
/// do (keys, prices, names) it costs a hash lookup per value for nothing until the writer gives
/// up on it. A strided sample tells the two apart: among `n` values drawn from `d` equally
/// common ones, about `n² / 2d` are repeats.
fn worth_a_dictionary(values: WriteValues<'_>) -> bool {
    fn sampled<T>(values: &[T], fingerprint: impl Fn(&T) -> u64) -> bool {
        let n = values.len().min(SAMPLE);
        if n == 0 {
            return false;
        }
        let distinct: std::collections::HashSet<u64> = (0..n)
            .map(|i| fingerprint(&values[i * values.len() / n]))
            .collect();
        let repeats = n - distinct.len();
        if n == values.len() {
            // The whole column: a dictionary pays when values occur twice on average.
            repeats * 2 >= n
        } else {
            repeats * 2 * DICTIONARY_MAX_DISTINCT >= n * n
        }
    }
    fn text_hash(text: &impl AsRef<str>) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut hasher = DefaultHasher::new();
        text.as_ref().hash(&mut hasher);
        hasher.finish()
    }
    match values {
        // Parquet has no dictionary encoding for booleans.
        WriteValues::Bool(_) => false,
        WriteValues::I32(v) | WriteValues::Date(v) => sampled(v, |&x| x as u64),
        WriteValues::I64(v)
        | WriteValues::Decimal(v, _)
        | WriteValues::Timestamp(v)
        | WriteValues::Time(v) => sampled(v, |&x| x as u64),
        WriteValues::F32(v) => sampled(v, |x| u64::from(x.to_bits())),
        WriteValues::F64(v) => sampled(v, |x| x.to_bits()),
        WriteValues::WideDecimal(v, _) => sampled(v, |&x| (x ^ (x >> 64)) as u64),
        WriteValues::Codes { codes, .. } => sampled(codes, |&x| x as u64),
        WriteValues::Text(v) => sampled(v, text_hash),
        WriteValues::Words(v) => sampled(v, text_hash),
    }
}

fn write_slice(
    out: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    values: WriteValues<'_>,
    rows: std::ops::Range<usize>,
    validity: Option<&[bool]>,
) -> parquet::errors::Result<()> {
    match values {
        WriteValues::Bool(v) => write_typed::<BoolType>(out.typed(), &v[rows], validity),
        WriteValues::I32(v) | WriteValues::Date(v) => {
            write_typed::<Int32Type>(out.typed(), &v[rows], validity)
        }
        WriteValues::I64(v)
        | WriteValues::Decimal(v, _)
        | WriteValues::Timestamp(v)
        | WriteValues::Time(v) => write_typed::<Int64Type>(out.typed(), &v[rows], validity),
        WriteValues::F32(v) => write_typed::<FloatType>(out.typed(), &v[rows], validity),
        WriteValues::F64(v) => write_typed::<DoubleType>(out.typed(), &v[rows], validity),
        WriteValues::WideDecimal(v, _) => {
            let bytes: Vec<FixedLenByteArray> = v[rows]
                .iter()
                .map(|x| FixedLenByteArray::from(x.to_be_bytes().to_vec()))
                .collect();
            write_typed::<FixedLenByteArrayType>(out.typed(), &bytes, validity)
        }
        WriteValues::Codes { codes, dictionary } => {
            // One byte array per dictionary entry; rows share it (a reference count, no copy).
            let entries: Vec<ByteArray> = dictionary.iter().map(ByteArray::from).collect();
            let empty = ByteArray::from("");
            let strings: Vec<ByteArray> = codes[rows]
                .iter()
                .map(|&code| {
                    usize::try_from(code)
                        .ok()
                        .and_then(|i| entries.get(i))
                        .unwrap_or(&empty)
                        .clone()
                })
                .collect();
            write_typed::<ByteArrayType>(out.typed(), &strings, validity)
        }
        WriteValues::Text(v) => {
            let strings: Vec<ByteArray> = v[rows]
                .iter()
                .map(|s| ByteArray::from(s.as_str()))
                .collect();
            write_typed::<ByteArrayType>(out.typed(), &strings, validity)
        }
        WriteValues::Words(v) => {
            let strings: Vec<ByteArray> = v[rows]
                .iter()
                .map(|&s| ByteArray::from(bytes::Bytes::from_static(s.as_bytes())))
                .collect();
            write_typed::<ByteArrayType>(out.typed(), &strings, validity)
        }
    }
}

/// Writes one row group's slice of a column: all values of a required column, or the valid
/// values and one definition level per row of a nullable one.
fn write_typed<P>(
    writer: &mut ColumnWriterImpl<'_, P>,
    values: &[P::T],
    validity: Option<&[bool]>,
) -> parquet::errors::Result<()>
where
    P: ParquetType,
    P::T: Clone,
{
    match validity {
        None => {
            // A nullable column with no nulls still needs its definition levels.
            if writer.get_descriptor().max_def_level() > 0 {
                let levels = vec![1i16; values.len()];
                writer.write_batch(values, Some(&levels), None)?;
            } else {
                writer.write_batch(values, None, None)?;
            }
        }
        Some(valid) => {
            let levels: Vec<i16> = valid.iter().map(|&ok| i16::from(ok)).collect();
            let present: Vec<P::T> = values
                .iter()
                .zip(valid)
                .filter(|(_, &ok)| ok)
                .map(|(v, _)| v.clone())
                .collect();
            writer.write_batch(&present, Some(&levels), None)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionaries_only_for_columns_whose_values_repeat() {
        let few: Vec<i32> = (0..100_000).map(|i| i % 50).collect();
        let many: Vec<i32> = (0..100_000).map(|i| i * 7919 % 1_000_003).collect();
        // Pseudo-random values (a multiplicative sequence alone is too evenly spread).
        let scattered = |i: u64| {
            let z = (i ^ (i >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            ((z ^ (z >> 29)).wrapping_mul(0x94d0_49bb_1331_11eb) >> 33) as i32
        };
        let some: Vec<i32> = (0..100_000).map(|i| scattered(i) % 20_000).collect();
        assert!(worth_a_dictionary(WriteValues::I32(&few)));
        assert!(!worth_a_dictionary(WriteValues::I32(&many)));
        assert!(worth_a_dictionary(WriteValues::I32(&some)));
        let names: Vec<String> = (0..3000).map(|i| format!("Customer#{i:09}")).collect();
        assert!(!worth_a_dictionary(WriteValues::Text(&names)));
        let regions: Vec<String> = (0..3000)
            .map(|i| ["ASIA", "EUROPE"][i % 2].to_string())
            .collect();
        assert!(worth_a_dictionary(WriteValues::Text(&regions)));
        assert!(!worth_a_dictionary(WriteValues::F64(&[])));
    }
}
