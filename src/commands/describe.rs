//! `tessera describe`: the tables of a data folder or file, with their rows and where they are
//! read from, and each column's type and nullability (columns Tessera cannot read are listed,
//! with the reason), in any of `run`'s output formats.

use std::path::Path;

use tessera_runtime::output::TableLimits;
use tessera_runtime::result::ResultTable;
use tessera_storage::catalog::{TableFormat, TableInfo};
use tessera_storage::{DataType, Value};

use crate::failure::Failure;
use crate::DescribeArgs;

pub fn run(args: &DescribeArgs) -> Result<(), Failure> {
    let catalog = super::stats::open(&args.data)?;
    let tables: Vec<&TableInfo> = match &args.table {
        Some(name) if catalog.broken_table(name).is_some() => {
            return Err(Failure::Message(format!(
                "table `{name}` cannot be read: {}",
                catalog
                    .broken_table(name)
                    .map(|e| e.to_string())
                    .unwrap_or_default()
            )))
        }
        Some(name) => vec![catalog.table(name).ok_or_else(|| {
            let known: Vec<&str> = catalog.tables().map(|t| t.name.as_str()).collect();
            Failure::Message(format!(
                "no table `{name}` in {} (its tables: {})",
                args.data.display(),
                known.join(", ")
            ))
        })?],
        None => catalog.tables().collect(),
    };
    let mut listing = table_rows(&tables);
    if args.table.is_none() {
        for (name, reason) in catalog.broken() {
            listing.rows.push(vec![
                text(name),
                Value::Null,
                text(format!("unreadable: {reason}")),
            ]);
        }
    }
    let results = [listing, column_rows(&tables)];
    super::remote::print_results(
        &results,
        args.format.into(),
        TableLimits::for_stdout(Some(0)),
    )
}

fn text(value: impl AsRef<str>) -> Value {
    Value::Str(value.as_ref().into())
}

/// One row per table: its name, rows, and the files it is read from.
fn table_rows(tables: &[&TableInfo]) -> ResultTable {
    ResultTable {
        columns: vec![
            ("table".into(), DataType::Str),
            ("rows".into(), DataType::I64),
            ("source".into(), DataType::Str),
        ],
        rows: tables
            .iter()
            .map(|table| {
                vec![
                    text(&table.name),
                    Value::Int(i64::try_from(table.rows).unwrap_or(i64::MAX)),
                    text(source(&table.format)),
                ]
            })
            .collect(),
    }
}

fn source(format: &TableFormat) -> String {
    let name = |path: &Path| path.display().to_string();
    match format {
        TableFormat::Parquet { files, .. } if files.len() == 1 => name(&files[0]),
        TableFormat::Parquet {
            files, partitions, ..
        } => match files
            .first()
            .and_then(|f| f.ancestors().nth(1 + partitions.len()))
        {
            Some(folder) => format!("{} ({} Parquet files)", name(folder), files.len()),
            None => format!("{} Parquet files", files.len()),
        },
        TableFormat::Tbl { path } | TableFormat::Csv { path } | TableFormat::Ipc { path } => {
            name(path)
        }
        TableFormat::Memory => "memory".into(),
    }
}

/// One row per column: its table, name, type and nullability; a column Tessera cannot read
/// has the reason in place of its type.
pub(crate) fn column_rows(tables: &[&TableInfo]) -> ResultTable {
    let mut rows = Vec::new();
    for table in tables {
        for field in &table.schema.fields {
            let null = if field.nullable {
                "nullable"
            } else {
                "not null"
            };
            rows.push(vec![
                text(&table.name),
                text(&field.name),
                text(field.ty.to_string()),
                text(null),
            ]);
        }
        for (column, reason) in &table.unsupported {
            rows.push(vec![
                text(&table.name),
                text(column),
                text(format!("unreadable: {reason}")),
                Value::Null,
            ]);
        }
    }
    ResultTable {
        columns: vec![
            ("table".into(), DataType::Str),
            ("column".into(), DataType::Str),
            ("type".into(), DataType::Str),
            ("null".into(), DataType::Str),
        ],
        rows,
    }
}
