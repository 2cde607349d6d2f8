//! `run --output FILE`: a query's result written to a file whose extension names the format —
//! Parquet (`.parquet`), Arrow IPC (`.arrow`, `.feather`, `.ipc`), CSV (`.csv`), JSON (`.json`)
//! or newline-delimited JSON (`.ndjson`, `.jsonl`). The file appears whole or not at all: it is
//! written beside its name and renamed over it once complete.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Decimal64Array, Float32Array,
    Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, Time64MicrosecondArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{Field as ArrowField, Schema as ArrowSchema};
use tessera_runtime::output::{TableLimits, TextFormat};
use tessera_runtime::result::ResultTable;
use tessera_storage::column::{ColumnData, DictionaryBuilder};
use tessera_storage::parquet_write::write_parquet;
use tessera_storage::{DataType, Field, Schema, Value};

use crate::failure::Failure;

/// The formats a result file can have, by extension.
enum FileFormat {
    Parquet,
    Arrow,
    Text(TextFormat),
}

fn format_of(path: &Path) -> Result<FileFormat, Failure> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    Ok(match extension.as_deref() {
        Some("parquet") => FileFormat::Parquet,
        Some("arrow" | "feather" | "ipc") => FileFormat::Arrow,
        Some("csv") => FileFormat::Text(TextFormat::Csv),
        Some("json") => FileFormat::Text(TextFormat::Json),
        Some("ndjson" | "jsonl") => FileFormat::Text(TextFormat::NdJson),
        _ => {
            return Err(Failure::Message(format!(
                "{}: say the format by the extension: .parquet, .arrow, .feather, .ipc, .csv, .json, .ndjson or .jsonl",
                path.display()
            )))
        }
    })
}

/// Checks, before any work, that `path` names a format and a folder that exists.
pub fn check(path: &Path) -> Result<(), Failure> {
    format_of(path)?;
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(Failure::Message(format!(
            "{}: the folder {} does not exist",
            path.display(),
            folder.display()
        )));
    }
    Ok(())
}

/// Writes the one result of a script to `path`.
pub fn write(path: &Path, results: &[ResultTable]) -> Result<(), Failure> {
    let [table] = results else {
        return Err(Failure::Message(format!(
            "--output takes the result of one query; the script has {}",
            results.len()
        )));
    };
    let fail = |e: &dyn std::fmt::Display| Failure::Message(format!("{}: {e}", path.display()));
    match format_of(path)? {
        FileFormat::Parquet => {
            let (schema, columns, validity) = columns_of(table);
            write_parquet(path, &schema, &columns, &validity).map_err(|e| fail(&e))
        }
        FileFormat::Arrow => {
            let batch = record_batch(table).map_err(|e| fail(&e))?;
            write_atomically(path, |file| {
                let mut writer = arrow_ipc::writer::FileWriter::try_new(file, &batch.schema())
                    .map_err(std::io::Error::other)?;
                writer.write(&batch).map_err(std::io::Error::other)?;
                writer.finish().map_err(std::io::Error::other)
            })
            .map_err(|e| fail(&e))
        }
        FileFormat::Text(format) => write_atomically(path, |file| {
            let mut writer = tessera_runtime::output::ResultWriter::with_limits(
                std::io::BufWriter::new(file),
                format,
                TableLimits::UNLIMITED,
            );
            writer.write(table)?;
            writer.finish(&table.columns).map(drop)
        })
        .map_err(|e| fail(&e)),
    }
}

/// Writes through a new hidden file beside `path`, renamed over it once `write` succeeds.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let mut file = tempfile::Builder::new()
        .prefix(".tessera-output-")
        .tempfile_in(folder)?;
    write(file.as_file_mut())?;
    file.as_file().sync_all()?;
    file.persist(path).map(drop).map_err(|e| e.error)
}

/// The result's columns as Tessera's storage holds them, with their validity.
fn columns_of(table: &ResultTable) -> (Schema, Vec<ColumnData>, Vec<Option<Vec<bool>>>) {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    let mut validity = Vec::new();
    for (index, (name, ty)) in table.columns.iter().enumerate() {
        let values = table.rows.iter().map(|row| &row[index]);
        let valid: Vec<bool> = values.clone().map(|v| *v != Value::Null).collect();
        let int = |v: &Value| match v {
            Value::Int(i) | Value::Timestamp(i) | Value::Time(i) => *i,
            Value::Date(d) => i64::from(*d),
            Value::Bool(b) => i64::from(*b),
            _ => 0,
        };
        let data = match ty {
            DataType::Bool => ColumnData::Bool(
                values
                    .map(|v| *v == Value::Bool(true))
                    .collect::<Vec<_>>()
                    .into(),
            ),
            DataType::I32 => {
                ColumnData::I32(values.map(|v| int(v) as i32).collect::<Vec<_>>().into())
            }
            DataType::I64 => ColumnData::I64(values.map(int).collect::<Vec<_>>().into()),
            DataType::Decimal(d) if d.is_wide() => ColumnData::WideDecimal(
                values
                    .map(|v| match v {
                        Value::WideDecimal(raw, _) => *raw,
                        _ => 0,
                    })
                    .collect::<Vec<_>>()
                    .into(),
                *d,
            ),
            DataType::Decimal(d) => ColumnData::Decimal(
                values
                    .map(|v| match v {
                        Value::Decimal(raw, _) => *raw,
                        _ => 0,
                    })
                    .collect::<Vec<_>>()
                    .into(),
                *d,
            ),
            DataType::Date => {
                ColumnData::Date(values.map(|v| int(v) as i32).collect::<Vec<_>>().into())
            }
            DataType::Timestamp => {
                ColumnData::Timestamp(values.map(int).collect::<Vec<_>>().into())
            }
            DataType::Time => ColumnData::Time(values.map(int).collect::<Vec<_>>().into()),
            DataType::F32 | DataType::F64 => {
                let floats = values.map(|v| match v {
                    Value::Float(x) => *x,
                    Value::Int(i) => *i as f64,
                    _ => 0.0,
                });
                match ty {
                    DataType::F32 => {
                        ColumnData::F32(floats.map(|x| x as f32).collect::<Vec<_>>().into())
                    }
                    _ => ColumnData::F64(floats.collect::<Vec<_>>().into()),
                }
            }
            DataType::Str => {
                let mut strings = DictionaryBuilder::with_capacity(table.rows.len());
                for value in values {
                    match value {
                        Value::Str(s) => strings.push(s),
                        _ => strings.push(""),
                    }
                }
                strings.finish()
            }
        };
        let nullable = valid.iter().any(|ok| !ok);
        fields.push(Field {
            name: name.clone(),
            ty: *ty,
            nullable,
        });
        columns.push(data);
        validity.push(nullable.then_some(valid));
    }
    (Schema::new(fields), columns, validity)
}

/// The result as one Arrow record batch.
fn record_batch(table: &ResultTable) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (index, (name, ty)) in table.columns.iter().enumerate() {
        let values = table.rows.iter().map(|row| &row[index]);
        let array: ArrayRef = match ty {
            DataType::Bool => Arc::new(BooleanArray::from_iter(values.map(|v| match v {
                Value::Bool(b) => Some(*b),
                _ => None,
            }))),
            DataType::I32 => Arc::new(Int32Array::from_iter(values.map(|v| match v {
                Value::Int(i) => i32::try_from(*i).ok(),
                _ => None,
            }))),
            DataType::I64 => Arc::new(Int64Array::from_iter(values.map(|v| match v {
                Value::Int(i) => Some(*i),
                _ => None,
            }))),
            DataType::Decimal(d) if d.is_wide() => Arc::new(
                Decimal128Array::from_iter(values.map(|v| match v {
                    Value::WideDecimal(raw, _) => Some(*raw),
                    _ => None,
                }))
                .with_precision_and_scale(d.precision, d.scale as i8)?,
            ),
            DataType::Decimal(d) => Arc::new(
                Decimal64Array::from_iter(values.map(|v| match v {
                    Value::Decimal(raw, _) => Some(*raw),
                    _ => None,
                }))
                .with_precision_and_scale(d.precision, d.scale as i8)?,
            ),
            DataType::Date => Arc::new(Date32Array::from_iter(values.map(|v| match v {
                Value::Date(d) => Some(*d),
                _ => None,
            }))),
            DataType::Timestamp => Arc::new(TimestampMicrosecondArray::from_iter(values.map(
                |v| match v {
                    Value::Timestamp(t) => Some(*t),
                    _ => None,
                },
            ))),
            DataType::Time => {
                Arc::new(Time64MicrosecondArray::from_iter(values.map(|v| match v {
                    Value::Time(t) => Some(*t),
                    _ => None,
                })))
            }
            DataType::F32 => Arc::new(Float32Array::from_iter(values.map(|v| match v {
                Value::Float(x) => Some(*x as f32),
                _ => None,
            }))),
            DataType::F64 => Arc::new(Float64Array::from_iter(values.map(|v| match v {
                Value::Float(x) => Some(*x),
                _ => None,
            }))),
            DataType::Str => Arc::new(StringArray::from_iter(values.map(|v| match v {
                Value::Str(s) => Some(&**s),
                _ => None,
            }))),
        };
        // The column's Arrow type is the array's.
        fields.push(ArrowField::new(name, array.data_type().clone(), true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), arrays)
}
