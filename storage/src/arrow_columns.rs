//! Arrow record batches into Tessera's columns: which Arrow types Tessera reads (and as what),
//! and the columns a sequence of batches makes, nulls as validity. The CSV and Arrow IPC readers
//! share it.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal64Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time64MicrosecondType, TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as ArrowType, Schema as ArrowSchema, TimeUnit};

use crate::column::{Column, ColumnData};
use crate::error::StorageError;
use crate::progress::Progress;
use crate::string_chunks::{self, ChunkStrings};
use crate::types::{DataType, DecimalType, Field, Schema};

/// The type Tessera reads an inferred or declared column as; `Err` says why it cannot.
pub(crate) fn tessera_type(ty: &ArrowType) -> Result<DataType, String> {
    Ok(match ty {
        ArrowType::Boolean => DataType::Bool,
        // Narrower integers are widened; unsigned ones to the next signed width.
        ArrowType::Int8
        | ArrowType::Int16
        | ArrowType::Int32
        | ArrowType::UInt8
        | ArrowType::UInt16 => DataType::I32,
        // A u64 beyond i64's range fails its cast when read.
        ArrowType::Int64 | ArrowType::UInt32 | ArrowType::UInt64 => DataType::I64,
        ArrowType::Float16 | ArrowType::Float32 => DataType::F32,
        ArrowType::Float64 => DataType::F64,
        ArrowType::Date32 | ArrowType::Date64 => DataType::Date,
        // A column with no values at all: strings, all null.
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View | ArrowType::Null => {
            DataType::Str
        }
        ArrowType::Dictionary(_, values) if tessera_type(values) == Ok(DataType::Str) => {
            DataType::Str
        }
        ArrowType::Decimal32(precision, scale)
        | ArrowType::Decimal64(precision, scale)
        | ArrowType::Decimal128(precision, scale)
        | ArrowType::Decimal256(precision, scale) => {
            DataType::Decimal(read_decimal(u64::from(*precision), i64::from(*scale))?)
        }
        ArrowType::Timestamp(..) => DataType::Timestamp,
        ArrowType::Time32(_) | ArrowType::Time64(_) => DataType::Time,
        other => return Err(format!("{other} values are not supported")),
    })
}

/// The decimal type a stored `decimal(precision, scale)` is read as: itself up to 38 digits;
/// wider (Arrow's 256-bit decimals), as `decimal(38, scale)`, each value then checked to fit
/// when read.
pub(crate) fn read_decimal(precision: u64, scale: i64) -> Result<DecimalType, String> {
    let scale = u64::try_from(scale)
        .map_err(|_| format!("decimals of negative scale ({scale}) are not supported"))?;
    let max = u64::from(DecimalType::MAX_PRECISION);
    if scale > max {
        return Err(format!(
            "decimal({precision}, {scale}) has more than {max} digits after the point"
        ));
    }
    DecimalType::new(precision.min(max), scale)
}

/// The Arrow type of a column of `ty`: what a declared column is read as, and what a column
/// of `ty` is decoded from (any type [`tessera_type`] reads as `ty` is cast to it first,
/// failing on a value that does not fit).
pub(crate) fn arrow_type(ty: DataType) -> ArrowType {
    match ty {
        DataType::Bool => ArrowType::Boolean,
        DataType::I32 => ArrowType::Int32,
        DataType::I64 => ArrowType::Int64,
        DataType::F32 => ArrowType::Float32,
        DataType::F64 => ArrowType::Float64,
        DataType::Date => ArrowType::Date32,
        DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Time => ArrowType::Time64(TimeUnit::Microsecond),
        DataType::Str => ArrowType::Utf8,
        DataType::Decimal(decimal) if decimal.is_wide() => {
            ArrowType::Decimal128(decimal.precision, decimal.scale as i8)
        }
        DataType::Decimal(decimal) => ArrowType::Decimal64(decimal.precision, decimal.scale as i8),
    }
}

/// The values of one column as they are decoded, batch by batch.
pub(crate) enum Values {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Date(Vec<i32>),
    Timestamp(Vec<i64>),
    Time(Vec<i64>),
    Str(Vec<ChunkStrings>),
    Decimal(Vec<i64>, DecimalType),
    WideDecimal(Vec<i128>, DecimalType),
}

impl Values {
    pub(crate) fn new(ty: DataType) -> Values {
        match ty {
            DataType::Bool => Values::Bool(Vec::new()),
            DataType::I32 => Values::I32(Vec::new()),
            DataType::I64 => Values::I64(Vec::new()),
            DataType::F32 => Values::F32(Vec::new()),
            DataType::F64 => Values::F64(Vec::new()),
            DataType::Date => Values::Date(Vec::new()),
            DataType::Timestamp => Values::Timestamp(Vec::new()),
            DataType::Time => Values::Time(Vec::new()),
            DataType::Str => Values::Str(Vec::new()),
            DataType::Decimal(decimal) if decimal.is_wide() => {
                Values::WideDecimal(Vec::new(), decimal)
            }
            DataType::Decimal(decimal) => Values::Decimal(Vec::new(), decimal),
        }
    }

    /// Appends a batch's column; a null row's value is the type's zero (validity says null).
    pub(crate) fn extend(&mut self, array: &dyn Array) -> Result<(), String> {
        let target = match (self.ty(), array.data_type()) {
            // A timestamp with a time zone counts from 1970-01-01 00:00:00 UTC: only its unit
            // changes (a cast to no zone would move it to the zone's local time).
            (DataType::Timestamp, ArrowType::Timestamp(_, zone)) => {
                ArrowType::Timestamp(TimeUnit::Microsecond, zone.clone())
            }
            (ty, _) => arrow_type(ty),
        };
        let cast;
        let array = if array.data_type() == &target {
            array
        } else {
            let options = arrow_cast::CastOptions {
                safe: false,
                ..Default::default()
            };
            cast = arrow_cast::cast_with_options(array, &target, &options)
                .map_err(|e| e.to_string())?;
            cast.as_ref()
        };
        let wrong = || format!("decoded as {} instead", array.data_type());
        match self {
            Values::Bool(values) => {
                let array = array.as_boolean_opt().ok_or_else(wrong)?;
                values.extend((0..array.len()).map(|i| array.is_valid(i) && array.value(i)));
            }
            Values::I32(values) => {
                extend_primitive::<Int32Type>(values, array).ok_or_else(wrong)?
            }
            Values::I64(values) => {
                extend_primitive::<Int64Type>(values, array).ok_or_else(wrong)?
            }
            Values::F32(values) => {
                extend_primitive::<Float32Type>(values, array).ok_or_else(wrong)?
            }
            Values::F64(values) => {
                extend_primitive::<Float64Type>(values, array).ok_or_else(wrong)?
            }
            Values::Date(values) => {
                extend_primitive::<Date32Type>(values, array).ok_or_else(wrong)?
            }
            Values::WideDecimal(values, _) => {
                extend_primitive::<Decimal128Type>(values, array).ok_or_else(wrong)?
            }
            Values::Decimal(values, _) => {
                extend_primitive::<Decimal64Type>(values, array).ok_or_else(wrong)?
            }
            Values::Timestamp(values) => {
                extend_primitive::<TimestampMicrosecondType>(values, array).ok_or_else(wrong)?
            }
            Values::Time(values) => {
                extend_primitive::<Time64MicrosecondType>(values, array).ok_or_else(wrong)?
            }
            Values::Str(chunks) => {
                let array = array.as_string_opt::<i32>().ok_or_else(wrong)?;
                let mut chunk = ChunkStrings::with_capacity(array.len());
                chunk
                    .push_batch(array.iter().map(|v| v.map(str::as_bytes)))
                    .map_err(|_| "a value is not UTF-8".to_string())?;
                chunks.push(chunk);
            }
        }
        Ok(())
    }

    fn ty(&self) -> DataType {
        match self {
            Values::Bool(_) => DataType::Bool,
            Values::I32(_) => DataType::I32,
            Values::I64(_) => DataType::I64,
            Values::F32(_) => DataType::F32,
            Values::F64(_) => DataType::F64,
            Values::Date(_) => DataType::Date,
            Values::Timestamp(_) => DataType::Timestamp,
            Values::Time(_) => DataType::Time,
            Values::Str(_) => DataType::Str,
            Values::Decimal(_, decimal) | Values::WideDecimal(_, decimal) => {
                DataType::Decimal(*decimal)
            }
        }
    }

    pub(crate) fn finish(self) -> ColumnData {
        match self {
            Values::Bool(v) => ColumnData::Bool(v.into()),
            Values::I32(v) => ColumnData::I32(v.into()),
            Values::I64(v) => ColumnData::I64(v.into()),
            Values::F32(v) => ColumnData::F32(v.into()),
            Values::F64(v) => ColumnData::F64(v.into()),
            Values::Date(v) => ColumnData::Date(v.into()),
            Values::Timestamp(v) => ColumnData::Timestamp(v.into()),
            Values::Time(v) => ColumnData::Time(v.into()),
            Values::Str(chunks) => string_chunks::merge(chunks),
            Values::Decimal(v, decimal) => ColumnData::Decimal(v.into(), decimal),
            Values::WideDecimal(v, decimal) => ColumnData::WideDecimal(v.into(), decimal),
        }
    }
}

fn extend_primitive<T: arrow_array::ArrowPrimitiveType>(
    values: &mut Vec<T::Native>,
    array: &dyn Array,
) -> Option<()> {
    let array = array.as_primitive_opt::<T>()?;
    // Null rows hold the zero arrow-csv leaves there.
    values.extend_from_slice(array.values());
    Some(())
}

/// Columns of `schema` built from batches whose columns are the schema's, in order.
struct ColumnsBuilder<'s> {
    schema: &'s Schema,
    values: Vec<Values>,
    validity: Vec<Vec<bool>>,
    rows: u64,
}

impl<'s> ColumnsBuilder<'s> {
    fn new(schema: &'s Schema) -> ColumnsBuilder<'s> {
        ColumnsBuilder {
            schema,
            values: schema.fields.iter().map(|f| Values::new(f.ty)).collect(),
            validity: vec![Vec::new(); schema.fields.len()],
            rows: 0,
        }
    }

    /// Appends a batch; `Err` names the column that does not decode as its type.
    fn push(&mut self, batch: &RecordBatch) -> Result<(), String> {
        for (index, array) in batch.columns().iter().enumerate() {
            let field = &self.schema.fields[index];
            self.values[index]
                .extend(array.as_ref())
                .map_err(|e| format!("column `{}`: {e}", field.name))?;
            self.validity[index].extend((0..array.len()).map(|row| array.is_valid(row)));
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// The columns, once the batches held the `rows` rows counted when the file was opened.
    fn finish(self, rows: u64) -> Result<Vec<Column>, String> {
        if self.rows != rows {
            return Err(format!(
                "holds {} rows where {rows} were counted; was it changed while read?",
                self.rows
            ));
        }
        Ok(self
            .values
            .into_iter()
            .zip(self.validity)
            .map(|(values, valid)| Column::new(values.finish(), Some(valid)))
            .collect())
    }
}

/// The columns of `schema` from `batches` read from `path`, which held `rows` rows when it was
/// opened, advancing `progress` batch by batch; `batch_error` says what a batch that cannot be
/// read means.
pub(crate) fn read_batches<E>(
    path: &Path,
    schema: &Schema,
    batches: impl IntoIterator<Item = Result<RecordBatch, E>>,
    rows: u64,
    progress: &dyn Progress,
    batch_error: impl Fn(E) -> String,
) -> Result<Vec<Column>, StorageError> {
    let in_file = |message: String| StorageError::in_file(path, message);
    let mut columns = ColumnsBuilder::new(schema);
    for batch in batches {
        let batch = batch.map_err(|e| in_file(batch_error(e)))?;
        columns.push(&batch).map_err(in_file)?;
        progress.advance(batch.num_rows() as u64);
    }
    columns.finish(rows).map_err(in_file)
}

/// What opening a file read whole (CSV, Arrow IPC) tells about its table.
pub(crate) struct FileTable {
    pub schema: Schema,
    /// Columns Tessera cannot read, with the reason.
    pub unsupported: Vec<(String, String)>,
    pub rows: u64,
}

/// The table of a file of `rows` rows whose columns are `file`'s: those Tessera reads, and the
/// others with the reason it cannot.
pub(crate) fn file_table(file: &ArrowSchema, rows: u64) -> FileTable {
    let mut fields = Vec::new();
    let mut unsupported = Vec::new();
    for field in file.fields() {
        match tessera_type(field.data_type()) {
            Ok(ty) => fields.push(Field {
                name: field.name().clone(),
                ty,
                nullable: field.is_nullable(),
            }),
            Err(reason) => unsupported.push((field.name().clone(), reason)),
        }
    }
    FileTable {
        schema: Schema::new(fields),
        unsupported,
        rows,
    }
}

/// Where each column of `schema` is among a file's columns (`file`).
pub(crate) fn positions(file: &ArrowSchema, schema: &Schema) -> Result<Vec<usize>, String> {
    schema
        .fields
        .iter()
        .map(|field| {
            file.index_of(&field.name)
                .map_err(|_| format!("column `{}` is gone", field.name))
        })
        .collect()
}
