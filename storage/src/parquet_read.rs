//! Reads Parquet files with the low-level `parquet` API: a table's schema from the footer (which
//! columns Tessera can read, and why not the others), and whole columns decoded row group by row
//! group in parallel, strings merged into one sorted dictionary per column.

use std::any::Any;
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{ConvertedType, Encoding, LogicalType, Repetition, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::column::reader::ColumnReaderImpl;
use parquet::data_type::{BoolType, ByteArrayType, DataType as ParquetType, DoubleType, FloatType};
use parquet::data_type::{FixedLenByteArrayType, Int32Type, Int64Type};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::file::statistics::Statistics;
use parquet::schema::types::Type as SchemaType;
use rayon::prelude::*;

use crate::column::{Column, ColumnData, Dictionary};
use crate::decimal as decimals;
use crate::error::StorageError;
use crate::progress::Progress;
use crate::spill::{filled_vec, Buffers};
use crate::string_chunks::{self, ChunkStrings};
use crate::types::{DataType, DecimalType, Field, Schema, Value};
use crate::values::{Plain, Values};

/// Rows decoded per call into the `parquet` reader: large enough to amortize the call, small
/// enough that the scratch buffers stay in cache.
const BATCH_ROWS: usize = 64 * 1024;

/// What Tessera sees in one Parquet file's footer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParquetFileSchema {
    /// The columns Tessera can read, in file order.
    pub schema: Schema,
    pub rows: u64,
    /// The other top-level columns, each with the reason it cannot be read.
    pub unsupported: Vec<(String, String)>,
    /// Per column of `schema`, the minimum, maximum and null count its row groups' statistics
    /// give, when every row group has them (never for strings, whose statistics Tessera keeps
    /// in its dictionary).
    pub statistics: Vec<Option<FooterStats>>,
    /// Columns the file's writer recorded as holding no value twice.
    pub unique: Vec<String>,
}

/// What a column's footer statistics say about all of its row groups together.
#[derive(Clone, Debug, PartialEq)]
pub struct FooterStats {
    /// `Value::Null` when no row holds a value.
    pub min: Value,
    pub max: Value,
    pub nulls: u64,
}

/// Reads the schema and row count of one Parquet file from its footer (no data pages).
pub fn read_parquet_schema(path: &Path) -> Result<ParquetFileSchema, StorageError> {
    let metadata = read_metadata(path)?;
    file_schema(path, &metadata)
}

/// How a Parquet column's stored values become a Tessera column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decoding {
    Bool,
    I32,
    /// `INT32` annotated as an unsigned 32-bit integer: widened to `i64`.
    U32AsI64,
    I64,
    /// `INT64` annotated as an unsigned 64-bit integer: read as `i64`, refused when a value
    /// is beyond its range.
    U64AsI64,
    F32,
    F64,
    Date,
    /// `INT64` counts of a unit since 1970-01-01 00:00:00 (UTC where the column says so),
    /// read as microseconds.
    Timestamp(Unit),
    /// `INT32` milliseconds or `INT64` micro- or nanoseconds since midnight, read as
    /// microseconds.
    Time(Unit),
    Str,
    /// A `DECIMAL` stored as `INT32` or `INT64` raw values.
    Decimal32(DecimalType),
    Decimal64(DecimalType),
    /// A `DECIMAL` stored as big-endian two's complement bytes (fixed-length or not), each
    /// value checked to fit the precision (38 digits for a wider declared one).
    DecimalBytes {
        decimal: DecimalType,
        fixed: bool,
    },
}

impl Decoding {
    /// The decoding a table with no files would use (an empty column of the right type).
    fn from_type(ty: DataType) -> Decoding {
        match ty {
            DataType::Bool => Decoding::Bool,
            DataType::I32 => Decoding::I32,
            DataType::I64 => Decoding::I64,
            DataType::F32 => Decoding::F32,
            DataType::F64 => Decoding::F64,
            DataType::Date => Decoding::Date,
            DataType::Timestamp => Decoding::Timestamp(Unit::Micros),
            DataType::Time => Decoding::Time(Unit::Micros),
            DataType::Str => Decoding::Str,
            DataType::Decimal(decimal) => Decoding::Decimal64(decimal),
        }
    }

    fn data_type(self) -> DataType {
        match self {
            Decoding::Bool => DataType::Bool,
            Decoding::I32 => DataType::I32,
            Decoding::U32AsI64 | Decoding::I64 | Decoding::U64AsI64 => DataType::I64,
            Decoding::F32 => DataType::F32,
            Decoding::F64 => DataType::F64,
            Decoding::Date => DataType::Date,
            Decoding::Timestamp(_) => DataType::Timestamp,
            Decoding::Time(_) => DataType::Time,
            Decoding::Str => DataType::Str,
            Decoding::Decimal32(decimal)
            | Decoding::Decimal64(decimal)
            | Decoding::DecimalBytes { decimal, .. } => DataType::Decimal(decimal),
        }
    }
}

/// The unit a Parquet timestamp or time counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Millis,
    Micros,
    Nanos,
}

impl Unit {
    fn of(unit: &parquet::basic::TimeUnit) -> Unit {
        match unit {
            parquet::basic::TimeUnit::MILLIS => Unit::Millis,
            parquet::basic::TimeUnit::MICROS => Unit::Micros,
            parquet::basic::TimeUnit::NANOS => Unit::Nanos,
        }
    }

    /// `count` of this unit in microseconds: nanoseconds rounded down, milliseconds beyond
    /// the range of microseconds (±292,000 years) held at its ends.
    fn micros(self, count: i64) -> i64 {
        match self {
            Unit::Millis => count.saturating_mul(1000),
            Unit::Micros => count,
            Unit::Nanos => count.div_euclid(1000),
        }
    }
}

/// Decides how to read a top-level column, or says in a few words why it cannot be read.
fn classify(column: &SchemaType) -> Result<Decoding, String> {
    if column.is_group() {
        return Err("nested columns (structs, lists, maps) are not supported".into());
    }
    let info = column.get_basic_info();
    if info.has_repetition() && info.repetition() == Repetition::REPEATED {
        return Err("repeated columns are not supported".into());
    }
    let logical = info.logical_type_ref();
    let converted = info.converted_type();
    let physical = column.get_physical_type();
    let decimal = match logical {
        Some(LogicalType::Decimal(decimal)) => Some((decimal.precision, decimal.scale)),
        _ if converted == ConvertedType::DECIMAL => {
            Some((column.get_precision(), column.get_scale()))
        }
        _ => None,
    };
    if let Some((precision, scale)) = decimal {
        let precision =
            u64::try_from(precision).map_err(|_| "a decimal's precision is negative")?;
        let decimal = crate::arrow_columns::read_decimal(precision, i64::from(scale))?;
        return match physical {
            PhysicalType::INT32 => Ok(Decoding::Decimal32(decimal)),
            PhysicalType::INT64 => Ok(Decoding::Decimal64(decimal)),
            PhysicalType::FIXED_LEN_BYTE_ARRAY => Ok(Decoding::DecimalBytes {
                decimal,
                fixed: true,
            }),
            PhysicalType::BYTE_ARRAY => Ok(Decoding::DecimalBytes {
                decimal,
                fixed: false,
            }),
            other => Err(format!("DECIMAL stored as {other} is not supported")),
        };
    }
    match physical {
        PhysicalType::BOOLEAN => Ok(Decoding::Bool),
        PhysicalType::INT32 => match (logical, converted) {
            (Some(LogicalType::Date), _) | (None, ConvertedType::DATE) => Ok(Decoding::Date),
            (Some(LogicalType::Integer(int)), _) if int.is_signed || int.bit_width < 32 => {
                Ok(Decoding::I32)
            }
            (Some(LogicalType::Integer(_)), _) => Ok(Decoding::U32AsI64),
            (None, ConvertedType::UINT_32) => Ok(Decoding::U32AsI64),
            (
                None,
                ConvertedType::NONE
                | ConvertedType::INT_8
                | ConvertedType::INT_16
                | ConvertedType::INT_32
                | ConvertedType::UINT_8
                | ConvertedType::UINT_16,
            ) => Ok(Decoding::I32),
            (Some(LogicalType::Time(_)), _) | (None, ConvertedType::TIME_MILLIS) => {
                Ok(Decoding::Time(Unit::Millis))
            }
            (logical, converted) => Err(format!(
                "INT32 annotated as {} is not supported",
                annotation(logical, converted)
            )),
        },
        PhysicalType::INT64 => match (logical, converted) {
            (Some(LogicalType::Integer(int)), _) if int.is_signed => Ok(Decoding::I64),
            (Some(LogicalType::Integer(_)), _) | (None, ConvertedType::UINT_64) => {
                Ok(Decoding::U64AsI64)
            }
            (None, ConvertedType::NONE | ConvertedType::INT_64) => Ok(Decoding::I64),
            (Some(LogicalType::Timestamp(timestamp)), _) => {
                Ok(Decoding::Timestamp(Unit::of(&timestamp.unit)))
            }
            (None, ConvertedType::TIMESTAMP_MILLIS) => Ok(Decoding::Timestamp(Unit::Millis)),
            (None, ConvertedType::TIMESTAMP_MICROS) => Ok(Decoding::Timestamp(Unit::Micros)),
            (Some(LogicalType::Time(time)), _) => Ok(Decoding::Time(Unit::of(&time.unit))),
            (None, ConvertedType::TIME_MICROS) => Ok(Decoding::Time(Unit::Micros)),
            (logical, converted) => Err(format!(
                "INT64 annotated as {} is not supported",
                annotation(logical, converted)
            )),
        },
        PhysicalType::INT96 => Err("INT96 timestamps are not supported".into()),
        PhysicalType::FLOAT => Ok(Decoding::F32),
        PhysicalType::DOUBLE => Ok(Decoding::F64),
        PhysicalType::BYTE_ARRAY => match (logical, converted) {
            (Some(LogicalType::String | LogicalType::Enum | LogicalType::Json), _)
            | (None, ConvertedType::NONE | ConvertedType::UTF8 | ConvertedType::ENUM)
            | (None, ConvertedType::JSON) => Ok(Decoding::Str),
            (logical, converted) => Err(format!(
                "binary data annotated as {} is not supported",
                annotation(logical, converted)
            )),
        },
        PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            Err("fixed-length byte arrays (UUID, FLOAT16, ...) are not supported".into())
        }
    }
}

fn annotation(logical: Option<&LogicalType>, converted: ConvertedType) -> String {
    match logical {
        Some(logical) => format!("{logical:?}"),
        None => format!("{converted}"),
    }
}

fn parquet_error(path: &Path, error: impl std::fmt::Display) -> StorageError {
    StorageError::Parquet {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown failure")
}

/// Runs `parquet` calls on one file, turning their errors into [`StorageError::Parquet`] naming
/// the file. Panics become errors too: the `parquet` crate still panics on some corrupt input,
/// and a bad file must never bring Tessera down.
fn guarded<T>(
    path: &Path,
    work: impl FnOnce() -> Result<T, StorageError>,
) -> Result<T, StorageError> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(panic) => Err(parquet_error(
            path,
            format!("the Parquet decoder failed: {}", panic_message(&*panic)),
        )),
    }
}

fn open(path: &Path) -> Result<File, StorageError> {
    File::open(path).map_err(|source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_metadata(path: &Path) -> Result<ParquetMetaData, StorageError> {
    let file = open(path)?;
    guarded(path, || {
        ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .map_err(|e| parquet_error(path, e))
    })
}

fn file_schema(path: &Path, metadata: &ParquetMetaData) -> Result<ParquetFileSchema, StorageError> {
    let mut fields: Vec<Field> = Vec::new();
    let mut decodings: Vec<Decoding> = Vec::new();
    let mut unsupported: Vec<(String, String)> = Vec::new();
    let root = metadata.file_metadata().schema_descr().root_schema();
    for column in root.get_fields() {
        let name = column.name().to_string();
        let seen =
            fields.iter().any(|f| f.name == name) || unsupported.iter().any(|(n, _)| *n == name);
        if seen {
            unsupported.push((name, "a second column with this name".into()));
            continue;
        }
        match classify(column) {
            Ok(decoding) => {
                decodings.push(decoding);
                fields.push(Field::new(name, decoding.data_type()).nullable(column.is_optional()))
            }
            Err(reason) => unsupported.push((name, reason)),
        }
    }
    let statistics = fields
        .iter()
        .zip(&decodings)
        .map(|(field, decoding)| footer_stats(metadata, &field.name, *decoding))
        .collect();
    let unique = metadata
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|kv| kv.key == crate::parquet_write::UNIQUE_COLUMNS_KEY)
        .filter_map(|kv| kv.value.as_deref())
        .flat_map(|names| names.split(','))
        .filter(|name| fields.iter().any(|f| f.name == *name))
        .map(str::to_string)
        .collect();
    Ok(ParquetFileSchema {
        schema: Schema::new(fields),
        rows: total_rows(path, metadata)?,
        unsupported,
        statistics,
        unique,
    })
}

/// Combines a column's statistics over every row group, or `None` when a row group lacks them.
fn footer_stats(metadata: &ParquetMetaData, name: &str, decoding: Decoding) -> Option<FooterStats> {
    let leaf = metadata
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.path().parts() == [name.to_string()])?;
    let mut combined = FooterStats {
        min: Value::Null,
        max: Value::Null,
        nulls: 0,
    };
    for group in metadata.row_groups() {
        let stats = group.column(leaf).statistics()?;
        combined.nulls += stats.null_count_opt()?;
        let range = match (stats, decoding) {
            (Statistics::Boolean(s), Decoding::Bool) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Bool(*v))
            }
            (Statistics::Int32(s), Decoding::I32) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Int(i64::from(*v)))
            }
            (Statistics::Int32(s), Decoding::Date) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Date(*v))
            }
            (Statistics::Int64(s), Decoding::I64) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Int(*v))
            }
            (Statistics::Int64(s), Decoding::Timestamp(unit)) => {
                pair(s.min_opt(), s.max_opt(), |v| {
                    Value::Timestamp(unit.micros(*v))
                })
            }
            (Statistics::Int64(s), Decoding::Time(unit)) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Time(unit.micros(*v)))
            }
            (Statistics::Int32(s), Decoding::Time(unit)) => pair(s.min_opt(), s.max_opt(), |v| {
                Value::Time(unit.micros(i64::from(*v)))
            }),
            (Statistics::Int32(s), Decoding::Decimal32(decimal)) if !decimal.is_wide() => {
                pair(s.min_opt(), s.max_opt(), |v| {
                    Value::Decimal(i64::from(*v), decimal.scale)
                })
            }
            (Statistics::Int64(s), Decoding::Decimal64(decimal)) if !decimal.is_wide() => {
                pair(s.min_opt(), s.max_opt(), |v| {
                    Value::Decimal(*v, decimal.scale)
                })
            }
            (Statistics::Float(s), Decoding::F32) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Float(f64::from(*v)))
            }
            (Statistics::Double(s), Decoding::F64) => {
                pair(s.min_opt(), s.max_opt(), |v| Value::Float(*v))
            }
            // Unsigned 32-bit values and strings: their order is not the stored one, or they
            // are not needed from the footer.
            _ => return None,
        };
        let group_rows = u64::try_from(group.num_rows()).ok()?;
        match range {
            Some((lo, hi)) => {
                combined.min = lesser(combined.min, lo)?;
                combined.max = greater(combined.max, hi)?;
            }
            // No minimum is fine only for a row group without values.
            None if stats.null_count_opt()? == group_rows => {}
            None => return None,
        }
    }
    Some(combined)
}

fn pair<T>(min: Option<&T>, max: Option<&T>, wrap: impl Fn(&T) -> Value) -> Option<(Value, Value)> {
    Some((wrap(min?), wrap(max?)))
}

fn lesser(a: Value, b: Value) -> Option<Value> {
    order(a, b, std::cmp::Ordering::Less)
}

fn greater(a: Value, b: Value) -> Option<Value> {
    order(a, b, std::cmp::Ordering::Greater)
}

/// The one of `a` and `b` that compares as `wanted` (`Null` yields to any value); `None` for
/// values that do not compare (NaN), which makes the footer's statistics unusable.
fn order(a: Value, b: Value, wanted: std::cmp::Ordering) -> Option<Value> {
    use std::cmp::Ordering;
    let ordering = match (&a, &b) {
        (Value::Null, _) => return Some(b),
        (_, Value::Null) => return Some(a),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y)?,
        _ => return None,
    };
    Some(if ordering == wanted || ordering == Ordering::Equal {
        a
    } else {
        b
    })
}

fn total_rows(path: &Path, metadata: &ParquetMetaData) -> Result<u64, StorageError> {
    metadata.row_groups().iter().try_fold(0u64, |sum, group| {
        u64::try_from(group.num_rows())
            .ok()
            .and_then(|rows| sum.checked_add(rows))
            .ok_or_else(|| parquet_error(path, "a row group has an impossible row count"))
    })
}

/// One row group of one file: the unit of parallel decoding.
struct RowGroup<'a> {
    /// Position of the file in the table's file list.
    file: usize,
    path: &'a Path,
    metadata: &'a ParquetMetaData,
    index: usize,
    rows: usize,
}

/// Where one column lives in one file: its leaf index and how to decode it.
#[derive(Clone, Copy)]
struct Leaf {
    index: usize,
    decoding: Decoding,
    nullable: bool,
}

/// Finds a top-level column by name in one file, checking it still has the type the catalog
/// recorded when the table was opened.
fn find_leaf(
    table: &str,
    path: &Path,
    metadata: &ParquetMetaData,
    field: &Field,
) -> Result<Leaf, StorageError> {
    let descr = metadata.file_metadata().schema_descr();
    let root = descr.root_schema().get_fields();
    let position = root.iter().position(|c| c.name() == field.name);
    let Some(position) = position else {
        return Err(StorageError::SchemaMismatch {
            table: table.into(),
            message: format!("{} has no column `{}`", path.display(), field.name),
        });
    };
    let decoding = classify(&root[position]).map_err(|reason| StorageError::UnsupportedColumn {
        table: table.into(),
        column: field.name.clone(),
        reason,
    })?;
    let index = (0..descr.num_columns())
        .find(|&leaf| descr.get_column_root_idx(leaf) == position)
        .ok_or_else(|| parquet_error(path, format!("column `{}` has no data", field.name)))?;
    if decoding.data_type() != field.ty {
        return Err(StorageError::SchemaMismatch {
            table: table.into(),
            message: format!(
                "column `{}` is {} in {} but {} elsewhere",
                field.name,
                decoding.data_type(),
                path.display(),
                field.ty
            ),
        });
    }
    Ok(Leaf {
        index,
        decoding,
        nullable: descr.column(index).max_def_level() > 0,
    })
}

/// Loads the named columns of a table stored in `files` (read in the given order), fixed-width
/// values into buffers made by `buffers`. Row groups are decoded in parallel; `progress`
/// advances by rows decoded.
pub(crate) fn read_parquet_columns(
    table: &str,
    files: &[PathBuf],
    fields: &[Field],
    buffers: &Buffers,
    progress: &dyn Progress,
) -> Result<Vec<Column>, StorageError> {
    let metadata: Vec<ParquetMetaData> = files
        .par_iter()
        .map(|path| read_metadata(path))
        .collect::<Result<_, _>>()?;
    let mut groups = Vec::new();
    for (file, (path, metadata)) in files.iter().zip(&metadata).enumerate() {
        for (index, group) in metadata.row_groups().iter().enumerate() {
            let rows = usize::try_from(group.num_rows())
                .map_err(|_| parquet_error(path, "a row group has an impossible row count"))?;
            groups.push(RowGroup {
                file,
                path,
                metadata,
                index,
                rows,
            });
        }
    }
    fields
        .par_iter()
        .map(|field| {
            let leaves = files
                .iter()
                .zip(&metadata)
                .map(|(path, metadata)| find_leaf(table, path, metadata, field))
                .collect::<Result<Vec<Leaf>, _>>()?;
            read_column(table, field, &groups, files, &leaves, buffers, progress)
        })
        .collect()
}

fn read_column(
    table: &str,
    field: &Field,
    groups: &[RowGroup<'_>],
    files: &[PathBuf],
    leaves: &[Leaf],
    buffers: &Buffers,
    progress: &dyn Progress,
) -> Result<Column, StorageError> {
    let decoding = leaves
        .first()
        .map_or(Decoding::from_type(field.ty), |leaf| leaf.decoding);
    if let Some((path, _)) = files
        .iter()
        .zip(leaves)
        .find(|(_, leaf)| leaf.decoding != decoding)
    {
        return Err(StorageError::SchemaMismatch {
            table: table.into(),
            message: format!(
                "column `{}` is stored differently in {}",
                field.name,
                path.display()
            ),
        });
    }
    let task = ReadTask {
        groups,
        leaves,
        buffers,
        progress,
    };
    let (data, validity) = match decoding {
        Decoding::Bool => {
            let mut values = filled_vec(task.rows(), false)?;
            let valid = task.fill::<BoolType, bool>(&mut values, |x| *x)?;
            (ColumnData::Bool(values.into()), valid)
        }
        Decoding::I32 => {
            let (v, valid) = task.primitive::<Int32Type, i32>(|x| *x)?;
            (ColumnData::I32(v), valid)
        }
        Decoding::Date => {
            let (v, valid) = task.primitive::<Int32Type, i32>(|x| *x)?;
            (ColumnData::Date(v), valid)
        }
        Decoding::Timestamp(unit) => {
            let (v, valid) = task.primitive::<Int64Type, i64>(|x| unit.micros(*x))?;
            (ColumnData::Timestamp(v), valid)
        }
        // Milliseconds of a day are stored as INT32, finer units as INT64.
        Decoding::Time(Unit::Millis) => {
            let (v, valid) = task.primitive::<Int32Type, i64>(|x| i64::from(*x) * 1000)?;
            (ColumnData::Time(v), valid)
        }
        Decoding::Time(unit) => {
            let (v, valid) = task.primitive::<Int64Type, i64>(|x| unit.micros(*x))?;
            (ColumnData::Time(v), valid)
        }
        Decoding::U32AsI64 => {
            let (v, valid) = task.primitive::<Int32Type, i64>(|x| i64::from(*x as u32))?;
            (ColumnData::I64(v), valid)
        }
        Decoding::I64 => {
            let (v, valid) = task.primitive::<Int64Type, i64>(|x| *x)?;
            (ColumnData::I64(v), valid)
        }
        Decoding::U64AsI64 => {
            let (v, valid) = task.primitive::<Int64Type, i64>(|x| *x)?;
            // Stored as the bits of a u64: one above i64's range reads as negative.
            let beyond = v
                .iter()
                .enumerate()
                .find(|&(row, &x)| x < 0 && valid.as_ref().is_none_or(|valid| valid[row]));
            if let Some((_, &x)) = beyond {
                return Err(StorageError::UnsupportedColumn {
                    table: table.into(),
                    column: field.name.clone(),
                    reason: format!(
                        "it holds {}, beyond the largest 64-bit integer Tessera computes with ({})",
                        x as u64,
                        i64::MAX
                    ),
                });
            }
            (ColumnData::I64(v), valid)
        }
        Decoding::F32 => {
            let (v, valid) = task.primitive::<FloatType, f32>(|x| *x)?;
            (ColumnData::F32(v), valid)
        }
        Decoding::F64 => {
            let (v, valid) = task.primitive::<DoubleType, f64>(|x| *x)?;
            (ColumnData::F64(v), valid)
        }
        Decoding::Str => task.strings(table, &field.name)?,
        Decoding::Decimal32(decimal) => {
            let (v, valid) = task.primitive::<Int32Type, i64>(|x| i64::from(*x))?;
            (decimal_data(v, decimal), valid)
        }
        Decoding::Decimal64(decimal) => {
            let (v, valid) = task.primitive::<Int64Type, i64>(|x| *x)?;
            (decimal_data(v, decimal), valid)
        }
        Decoding::DecimalBytes { decimal, fixed } => {
            let (v, valid) = if fixed {
                task.primitive::<FixedLenByteArrayType, i128>(|x| decimal_from_bytes(x.data()))?
            } else {
                task.primitive::<ByteArrayType, i128>(|x| decimal_from_bytes(x.data()))?
            };
            let is_valid = |row: usize| valid.as_ref().is_none_or(|v| v[row]);
            let beyond = v.iter().enumerate().find(|&(row, &x)| {
                is_valid(row) && !decimals::fits_precision_wide(x, decimal.precision)
            });
            if let Some((_, &x)) = beyond {
                let shown = match x {
                    BEYOND_38_DIGITS => "a value of more than 38 digits".to_string(),
                    x => decimals::format(x, decimal.scale),
                };
                return Err(StorageError::UnsupportedColumn {
                    table: table.into(),
                    column: field.name.clone(),
                    reason: format!("it holds {shown}, more digits than its type, {decimal}"),
                });
            }
            let data = if decimal.is_wide() {
                ColumnData::WideDecimal(v, decimal)
            } else {
                // Within the precision checked above, so within 64 bits.
                let narrow: Vec<i64> = v.iter().map(|&x| x as i64).collect();
                ColumnData::Decimal(narrow.into(), decimal)
            };
            (data, valid)
        }
    };
    Ok(Column::new(data, validity))
}

/// What [`decimal_from_bytes`] reads a value of more than 38 digits as: no decimal of 38
/// digits is this far from zero.
const BEYOND_38_DIGITS: i128 = i128::MIN;

/// A decimal column of the values of `decimal` stored as 32- or 64-bit integers: 128-bit
/// where the declared precision is more than 18 digits.
fn decimal_data(values: Values<i64>, decimal: DecimalType) -> ColumnData {
    if decimal.is_wide() {
        let wide: Vec<i128> = values.iter().map(|&x| i128::from(x)).collect();
        ColumnData::WideDecimal(wide.into(), decimal)
    } else {
        ColumnData::Decimal(values, decimal)
    }
}

/// A decimal's raw value from Parquet's big-endian two's complement bytes, or
/// [`BEYOND_38_DIGITS`].
fn decimal_from_bytes(bytes: &[u8]) -> i128 {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut value: i128 = if negative { -1 } else { 0 };
    for &byte in bytes {
        // Shifting out the sign bits of a value wider than i128 is caught below: such a value
        // leaves bytes that are neither all zero nor all one.
        if value >> 119 != 0 && value >> 119 != -1 {
            return BEYOND_38_DIGITS;
        }
        value = (value << 8) | i128::from(byte);
    }
    if !decimals::fits_precision_wide(value, DecimalType::MAX_PRECISION) {
        return BEYOND_38_DIGITS;
    }
    value
}

/// Decodes one column across all row groups.
struct ReadTask<'a> {
    groups: &'a [RowGroup<'a>],
    /// The column's leaf in each file, by file position.
    leaves: &'a [Leaf],
    buffers: &'a Buffers,
    progress: &'a dyn Progress,
}

impl ReadTask<'_> {
    fn nullable(&self) -> bool {
        self.leaves.iter().any(|leaf| leaf.nullable)
    }

    fn reader<P: ParquetType>(
        &self,
        group: &RowGroup<'_>,
    ) -> Result<ColumnReaderImpl<P>, StorageError> {
        let leaf = self.leaves[group.file];
        // Each task opens its own handle: handles cloned from one `File` share a cursor, and
        // row groups are read concurrently.
        let file = Arc::new(open(group.path)?);
        let row_group = group.metadata.row_group(group.index);
        let chunk = row_group.column(leaf.index);
        let pages = SerializedPageReader::new(file, chunk, group.rows, None)
            .map_err(|e| parquet_error(group.path, e))?;
        let descr = group
            .metadata
            .file_metadata()
            .schema_descr()
            .column(leaf.index);
        Ok(ColumnReaderImpl::<P>::new(descr, Box::new(pages)))
    }

    fn rows(&self) -> usize {
        self.groups.iter().map(|g| g.rows).sum()
    }

    /// Reads a fixed-width column into a buffer made by the task's `buffers`.
    fn primitive<P, T>(
        &self,
        convert: impl Fn(&P::T) -> T + Sync,
    ) -> Result<(Values<T>, Option<Vec<bool>>), StorageError>
    where
        P: ParquetType,
        T: Plain + Default,
    {
        let mut buffer = self.buffers.zeroed::<T>(self.rows(), 0)?;
        let validity = self.fill::<P, T>(buffer.as_mut_slice(), convert)?;
        Ok((buffer.into_values()?, validity))
    }

    /// Decodes a fixed-width column into `values`, each row group straight into its own
    /// slice; returns the validity of a nullable column.
    fn fill<P, T>(
        &self,
        values: &mut [T],
        convert: impl Fn(&P::T) -> T + Sync,
    ) -> Result<Option<Vec<bool>>, StorageError>
    where
        P: ParquetType,
        T: Copy + Default + Send + Sync,
    {
        let mut validity = if self.nullable() {
            Some(filled_vec(values.len(), true)?)
        } else {
            None
        };
        let mut slices = Vec::with_capacity(self.groups.len());
        let mut rest_values = values;
        let mut rest_valid = validity.as_deref_mut();
        for group in self.groups {
            let (head, tail) = rest_values.split_at_mut(group.rows);
            rest_values = tail;
            let valid = match rest_valid.take() {
                Some(valid) => {
                    let (head, tail) = valid.split_at_mut(group.rows);
                    rest_valid = Some(tail);
                    Some(head)
                }
                None => None,
            };
            slices.push((head, valid));
        }
        slices
            .into_par_iter()
            .zip(self.groups.par_iter())
            .try_for_each(|((out, valid), group)| {
                guarded(group.path, || {
                    let mut reader = self.reader::<P>(group)?;
                    read_group(&mut reader, out, valid, &convert)
                        .map_err(|e| parquet_error(group.path, e))?;
                    self.progress.advance(group.rows as u64);
                    Ok(())
                })
            })?;
        Ok(validity)
    }

    /// Reads a string column: each row group interns its strings, then one merge builds the
    /// sorted dictionary.
    fn strings(
        &self,
        table: &str,
        column: &str,
    ) -> Result<(ColumnData, Option<Vec<bool>>), StorageError> {
        let nullable = self.nullable();
        let chunks: Vec<(ChunkStrings, Vec<bool>)> = self
            .groups
            .par_iter()
            .map(|group| {
                guarded(group.path, || {
                    let mut reader = self.reader::<ByteArrayType>(group)?;
                    let chunk = read_string_group(&mut reader, group.rows, nullable)
                        .map_err(|e| e.into_storage(table, column, group.path))?;
                    self.progress.advance(group.rows as u64);
                    Ok(chunk)
                })
            })
            .collect::<Result<_, _>>()?;
        let validity = nullable.then(|| {
            chunks
                .iter()
                .flat_map(|(_, valid)| valid.iter().copied())
                .collect()
        });
        let data = string_chunks::merge(chunks.into_iter().map(|(strings, _)| strings).collect());
        Ok((data, validity))
    }
}

/// A string column's dictionary and null count read from the dictionary pages alone, or `None`
/// when some row group has a data page that is not dictionary-encoded (or no page encoding
/// statistics to tell), in which case only reading the column gives its strings. A writer may
/// keep strings in a dictionary page that no row uses, so the result can hold more strings
/// than the column: callers use it where a superset is safe (binding literals, sizing code
/// ranges), never to decode rows.
pub(crate) fn read_parquet_dictionary(
    table: &str,
    files: &[PathBuf],
    field: &Field,
) -> Result<Option<(Dictionary, u64)>, StorageError> {
    let mut strings: Vec<String> = Vec::new();
    let mut nulls = 0u64;
    for path in files {
        let metadata = read_metadata(path)?;
        let leaf = find_leaf(table, path, &metadata, field)?;
        if leaf.decoding != Decoding::Str {
            return Ok(None);
        }
        for (index, group) in metadata.row_groups().iter().enumerate() {
            let chunk = group.column(leaf.index);
            if chunk.num_values() == 0 {
                continue;
            }
            let all_dictionary = chunk.dictionary_page_offset().is_some()
                && chunk.page_encoding_stats_mask().is_some_and(|mask| {
                    mask.is_only(Encoding::PLAIN_DICTIONARY)
                        || mask.is_only(Encoding::RLE_DICTIONARY)
                });
            let group_nulls = if leaf.nullable {
                chunk.statistics().and_then(|s| s.null_count_opt())
            } else {
                Some(0)
            };
            let (true, Some(group_nulls)) = (all_dictionary, group_nulls) else {
                return Ok(None);
            };
            nulls += group_nulls;
            let rows = usize::try_from(group.num_rows())
                .map_err(|_| parquet_error(path, "a row group has an impossible row count"))?;
            let page = guarded(path, || {
                let file = Arc::new(open(path)?);
                let chunk = metadata.row_group(index).column(leaf.index);
                let mut pages = SerializedPageReader::new(file, chunk, rows, None)
                    .map_err(|e| parquet_error(path, e))?;
                pages.get_next_page().map_err(|e| parquet_error(path, e))
            })?;
            let Some(Page::DictionaryPage {
                buf, num_values, ..
            }) = page
            else {
                return Ok(None);
            };
            plain_strings(&buf, num_values as usize, &mut strings)
                .map_err(|e| e.into_storage(table, &field.name, path))?;
        }
    }
    Ok(Some((Dictionary::from_unsorted(strings), nulls)))
}

/// Decodes `count` PLAIN byte arrays (each a 4-byte little-endian length, then the bytes).
fn plain_strings(
    mut bytes: &[u8],
    count: usize,
    out: &mut Vec<String>,
) -> Result<(), StringReadError> {
    let truncated = || StringReadError::Parquet("a dictionary page is truncated".into());
    for _ in 0..count {
        let (length, rest) = bytes.split_first_chunk::<4>().ok_or_else(truncated)?;
        let length = u32::from_le_bytes(*length) as usize;
        let value = rest.get(..length).ok_or_else(truncated)?;
        let text = std::str::from_utf8(value).map_err(|_| StringReadError::NotUtf8)?;
        out.push(text.to_string());
        bytes = &rest[length..];
    }
    Ok(())
}

/// Decodes one row group's column chunk into `out` (and `valid` for a nullable column).
fn read_group<P, T>(
    reader: &mut ColumnReaderImpl<P>,
    out: &mut [T],
    mut valid: Option<&mut [bool]>,
    convert: &impl Fn(&P::T) -> T,
) -> parquet::errors::Result<()>
where
    P: ParquetType,
    T: Copy + Default,
{
    let mut values: Vec<P::T> = Vec::with_capacity(BATCH_ROWS.min(out.len()));
    let mut levels: Vec<i16> = Vec::new();
    let mut filled = 0;
    while filled < out.len() {
        values.clear();
        levels.clear();
        let want = BATCH_ROWS.min(out.len() - filled);
        let (rows, _, _) = reader.read_records(
            want,
            valid.is_some().then_some(&mut levels),
            None,
            &mut values,
        )?;
        if rows == 0 {
            return Err(parquet::errors::ParquetError::General(format!(
                "a column chunk ends after {filled} of its {} rows",
                out.len()
            )));
        }
        let out = &mut out[filled..filled + rows];
        match valid.as_deref_mut() {
            // A required column: one value per row.
            None => {
                for (slot, value) in out.iter_mut().zip(&values) {
                    *slot = convert(value);
                }
            }
            Some(valid) => {
                let valid = &mut valid[filled..filled + rows];
                if levels.is_empty() {
                    // The file's column is required although the table's is nullable.
                    for (slot, value) in out.iter_mut().zip(&values) {
                        *slot = convert(value);
                    }
                } else {
                    let mut next = values.iter();
                    for ((slot, ok), &level) in out.iter_mut().zip(valid.iter_mut()).zip(&levels) {
                        // A top-level optional column is defined at level 1.
                        *ok = level >= 1;
                        if *ok {
                            *slot = next.next().map_or_else(T::default, convert);
                        }
                    }
                }
            }
        }
        filled += rows;
    }
    Ok(())
}

enum StringReadError {
    Parquet(String),
    NotUtf8,
}

impl StringReadError {
    fn into_storage(self, table: &str, column: &str, path: &Path) -> StorageError {
        match self {
            StringReadError::Parquet(message) => parquet_error(path, message),
            StringReadError::NotUtf8 => StorageError::UnsupportedColumn {
                table: table.into(),
                column: column.into(),
                reason: format!("{} holds bytes that are not UTF-8 text", path.display()),
            },
        }
    }
}

fn read_string_group(
    reader: &mut ColumnReaderImpl<ByteArrayType>,
    rows: usize,
    nullable: bool,
) -> Result<(ChunkStrings, Vec<bool>), StringReadError> {
    let mut strings = ChunkStrings::with_capacity(rows);
    let mut valid = Vec::with_capacity(if nullable { rows } else { 0 });
    let mut values = Vec::with_capacity(BATCH_ROWS.min(rows));
    let mut levels: Vec<i16> = Vec::new();
    while strings.len() < rows {
        values.clear();
        levels.clear();
        let want = BATCH_ROWS.min(rows - strings.len());
        let (read, _, _) = reader
            .read_records(want, nullable.then_some(&mut levels), None, &mut values)
            .map_err(|e| StringReadError::Parquet(e.to_string()))?;
        if read == 0 {
            return Err(StringReadError::Parquet(format!(
                "a column chunk ends after {} of its {rows} rows",
                strings.len()
            )));
        }
        if levels.is_empty() {
            strings
                .push_batch(values.iter().map(|v| Some(v.data())))
                .map_err(|_| StringReadError::NotUtf8)?;
            valid.extend(std::iter::repeat_n(true, if nullable { read } else { 0 }));
        } else {
            // A top-level optional column is defined at level 1; values come only for those.
            let mut next = values.iter();
            let rows = levels
                .iter()
                .map(|&level| (level >= 1).then(|| next.next()).flatten());
            let rows: Vec<Option<&[u8]>> = rows.map(|v| v.map(|v| v.data())).collect();
            valid.extend(rows.iter().map(Option::is_some));
            strings
                .push_batch(rows)
                .map_err(|_| StringReadError::NotUtf8)?;
        }
    }
    Ok((strings, valid))
}
