//! Hive-partitioned folders: a table folder whose Parquet files lie under `key=value/` folders
//! (`sales/year=2024/region=east/part-0.parquet`). Each `key` becomes a column whose value in a
//! file's rows is the file's `value`, typed as DuckDB's `hive_partitioning` does: `i64` when
//! every value is an integer, `date` when every value is a date, else `str`;
//! `__HIVE_DEFAULT_PARTITION__` is null. Keys and values are percent-decoded, as the writers
//! (DuckDB, Spark) percent-encode the characters a folder name cannot hold
//! (`city=New%20York` is `New York`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::column::{Column, ColumnData, Dictionary};
use crate::date;
use crate::error::StorageError;
use crate::types::{DataType, Field, Value};

/// The value a writer gives a partition whose key is null.
const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// A partition column: its field, and its value in each file's rows, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub field: Field,
    pub values: Vec<Value>,
}

/// The Parquet files under `folder` (in path order) and, when they lie in `key=value`
/// folders, the partition columns. Folders not named `key=value` below the table's are
/// skipped; every file must sit under the same keys, in the same order.
pub(crate) fn parquet_files(
    folder: &Path,
    read_dir: &dyn Fn(&Path) -> Result<Vec<PathBuf>, StorageError>,
) -> Result<(Vec<PathBuf>, Vec<Partition>), StorageError> {
    let mut found: Vec<(PathBuf, Vec<(String, String)>)> = Vec::new();
    collect(folder, &mut Vec::new(), read_dir, &mut found)?;
    let Some((first, keys)) = found.first() else {
        return Ok((Vec::new(), Vec::new()));
    };
    let names: Vec<&str> = keys.iter().map(|(key, _)| key.as_str()).collect();
    for (path, keys) in &found {
        let these: Vec<&str> = keys.iter().map(|(key, _)| key.as_str()).collect();
        if these != names {
            return Err(StorageError::SchemaMismatch {
                table: folder
                    .file_name()
                    .and_then(OsStr::to_str)
                    .unwrap_or_default()
                    .to_string(),
                message: format!(
                    "{} is partitioned by {}, {} by {}",
                    path.display(),
                    describe_keys(&these),
                    first.display(),
                    describe_keys(&names)
                ),
            });
        }
    }
    let partitions = names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let texts: Vec<&str> = found
                .iter()
                .map(|(_, keys)| keys[index].1.as_str())
                .collect();
            partition(name, &texts)
        })
        .collect();
    Ok((
        found.into_iter().map(|(path, _)| path).collect(),
        partitions,
    ))
}

fn describe_keys(keys: &[&str]) -> String {
    if keys.is_empty() {
        "nothing".into()
    } else {
        keys.join(", ")
    }
}

fn collect(
    folder: &Path,
    keys: &mut Vec<(String, String)>,
    read_dir: &dyn Fn(&Path) -> Result<Vec<PathBuf>, StorageError>,
    found: &mut Vec<(PathBuf, Vec<(String, String)>)>,
) -> Result<(), StorageError> {
    for path in read_dir(folder)? {
        if path.is_dir() {
            let name = path.file_name().and_then(OsStr::to_str).unwrap_or_default();
            if let Some((key, value)) = name.split_once('=') {
                keys.push((percent_decoded(key), percent_decoded(value)));
                collect(&path, keys, read_dir, found)?;
                keys.pop();
            }
        } else if path.is_file()
            && path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
        {
            found.push((path, keys.clone()));
        }
    }
    Ok(())
}

/// `text` with each `%XX` (two hex digits) replaced by its byte; left as it is where that
/// would not be UTF-8, and a `%` not followed by two hex digits stays a `%`.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).unwrap_or_else(|_| text.to_string())
}

/// A partition column from its value in each file, typed by what all of them parse as.
fn partition(name: &str, texts: &[&str]) -> Partition {
    let present = || texts.iter().filter(|t| **t != NULL_PARTITION);
    let ty = if present().all(|t| t.parse::<i64>().is_ok()) {
        DataType::I64
    } else if present().all(|t| date::parse_date(t).is_some()) {
        DataType::Date
    } else {
        DataType::Str
    };
    let values = texts
        .iter()
        .map(|text| match (*text, ty) {
            (NULL_PARTITION, _) => Value::Null,
            (text, DataType::I64) => text.parse().map_or(Value::Null, Value::Int),
            (text, DataType::Date) => date::parse_date(text).map_or(Value::Null, Value::Date),
            (text, _) => Value::Str(text.into()),
        })
        .collect();
    Partition {
        field: Field {
            name: name.to_string(),
            ty,
            nullable: texts.contains(&NULL_PARTITION),
        },
        values,
    }
}

/// The column of `partition` over files of `rows` rows each.
pub(crate) fn partition_column(partition: &Partition, rows: &[u64]) -> Column {
    let total = rows.iter().sum::<u64>() as usize;
    let mut valid = Vec::with_capacity(total);
    let data = match partition.field.ty {
        DataType::Str => {
            let texts: Vec<String> = partition
                .values
                .iter()
                .filter_map(|v| match v {
                    Value::Str(s) => Some(s.to_string()),
                    _ => None,
                })
                .collect();
            let dictionary = Dictionary::from_unsorted(texts);
            let mut codes = Vec::with_capacity(total);
            for (value, &count) in partition.values.iter().zip(rows) {
                let code = match value {
                    Value::Str(s) => dictionary.code_of(s).unwrap_or(0),
                    _ => 0,
                };
                codes.extend(std::iter::repeat_n(code, count as usize));
            }
            ColumnData::Str {
                codes: codes.into(),
                dictionary: Arc::new(dictionary),
            }
        }
        ty => {
            let mut numbers = Vec::with_capacity(total);
            for (value, &count) in partition.values.iter().zip(rows) {
                let number = match value {
                    Value::Int(i) => *i,
                    Value::Date(d) => i64::from(*d),
                    _ => 0,
                };
                numbers.extend(std::iter::repeat_n(number, count as usize));
            }
            match ty {
                DataType::Date => {
                    ColumnData::Date(numbers.iter().map(|&d| d as i32).collect::<Vec<_>>().into())
                }
                _ => ColumnData::I64(numbers.into()),
            }
        }
    };
    for (value, &count) in partition.values.iter().zip(rows) {
        valid.extend(std::iter::repeat_n(*value != Value::Null, count as usize));
    }
    Column::new(data, partition.field.nullable.then_some(valid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_typed_as_duckdb_types_them() {
        let years = partition("year", &["2023", "2024", NULL_PARTITION]);
        assert_eq!(years.field.ty, DataType::I64);
        assert!(years.field.nullable);
        assert_eq!(years.values[2], Value::Null);
        let days = partition("day", &["2024-01-05", "2024-02-01"]);
        assert_eq!(days.field.ty, DataType::Date);
        let regions = partition("region", &["east", "10"]);
        assert_eq!(regions.field.ty, DataType::Str);
    }

    #[test]
    fn keys_and_values_are_percent_decoded_as_duckdb_writes_them() {
        // The folders DuckDB's `COPY … (PARTITION_BY (city))` writes for these cities.
        assert_eq!(percent_decoded("New%20York"), "New York");
        assert_eq!(percent_decoded("a%2Fb"), "a/b");
        assert_eq!(percent_decoded("50%25"), "50%");
        assert_eq!(percent_decoded("x%3Dy"), "x=y");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("%zz%4"), "%zz%4");
        assert_eq!(percent_decoded("%C3%A9t%C3%A9"), "été");
        // Bytes that are not UTF-8 leave the name as it is.
        assert_eq!(percent_decoded("%FF"), "%FF");

        let folder = tempfile::tempdir().expect("a folder");
        let city = folder.path().join("city=New%20York");
        std::fs::create_dir(&city).expect("created");
        std::fs::write(city.join("part-0.parquet"), b"").expect("written");
        let list = |dir: &Path| -> Result<Vec<PathBuf>, StorageError> {
            Ok(std::fs::read_dir(dir)
                .expect("listed")
                .map(|e| e.expect("an entry").path())
                .collect())
        };
        let (files, partitions) = parquet_files(folder.path(), &list).expect("partitioned");
        assert_eq!(files.len(), 1);
        assert_eq!(partitions[0].field.name, "city");
        assert_eq!(partitions[0].values, [Value::Str("New York".into())]);
    }

    #[test]
    fn a_partition_column_repeats_each_files_value() {
        let regions = partition("region", &["west", "east", NULL_PARTITION]);
        let column = partition_column(&regions, &[2, 1, 2]);
        let values: Vec<Value> = (0..5)
            .map(|row| match column.is_valid(row) {
                true => column.data.value(row),
                false => Value::Null,
            })
            .collect();
        assert_eq!(
            values,
            [
                Value::Str("west".into()),
                Value::Str("west".into()),
                Value::Str("east".into()),
                Value::Null,
                Value::Null
            ]
        );
    }
}
