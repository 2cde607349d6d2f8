//! `tessera stats`: per column of a data directory, how kernels would store it: its encoding
//! under `--compress`, bits per value, and the size next to the plain one, with the sizes in
//! `pack`, GPU-FOR and GPU-DFOR beside for the integer columns.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use tessera_storage::compress::Scheme;
use tessera_storage::packed::packable;
use tessera_storage::prepared::PreparedStore;
use tessera_storage::{Catalog, TableFormat};

use crate::failure::Failure;
use crate::progress::Bar;
use crate::StatsArgs;

pub fn run(args: &StatsArgs) -> Result<(), Failure> {
    let started = Instant::now();
    // Columns prepared already are read from the store (nothing is written to it here).
    let catalog = open(&args.data)?
        .with_compression(args.compress)
        .with_prepared(PreparedStore::for_data(&args.data));
    let tables: Vec<String> = match &args.table {
        Some(name) => {
            if catalog.table(name).is_none() {
                return Err(Failure::Message(format!(
                    "no table `{name}` in {}",
                    args.data.display()
                )));
            }
            vec![name.clone()]
        }
        None => catalog.tables().map(|t| t.name.clone()).collect(),
    };
    let mut out = format!(
        "{:<12} {:<18} {:<5} {:>12} {:<8} {:>10} {:>11} {:>8} {:>8} {:>8} {:>8}  {}\n",
        "table",
        "column",
        "type",
        "rows",
        "stored",
        "bits/value",
        "MiB",
        "of plain",
        "pack",
        "for",
        "dfor",
        "prepared (MiB)"
    );
    let mut total_plain = 0u64;
    let mut total_stored = 0u64;
    let mut total_prepared = 0u64;
    let mut total_files = 0u64;
    for table in &tables {
        let rows = catalog.table(table).map_or(0, |t| t.rows);
        let (plain, stored, prepared) = table_stats(&catalog, table, rows, &mut out)?;
        total_plain += plain;
        total_stored += stored;
        total_prepared += prepared;
        total_files += source_bytes(&catalog, table);
    }
    let folders: Vec<String> = catalog
        .prepared_store()
        .map(|store| store.folders().map(|f| f.display().to_string()).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "prepared: {:.1} MiB in {}, beside {:.1} MiB of data files",
        mib(total_prepared),
        folders.join(" and "),
        mib(total_files)
    );
    let _ = writeln!(
        out,
        "total: {:.1} MiB stored ({}), {:.1} MiB plain, {:.0}%; read in {:.1} s",
        mib(total_stored),
        args.compress,
        mib(total_plain),
        percent(total_stored, total_plain),
        started.elapsed().as_secs_f64()
    );
    print!("{out}");
    Ok(())
}

/// Bytes of `table`'s data files.
fn source_bytes(catalog: &Catalog, table: &str) -> u64 {
    let files: Vec<&std::path::Path> = match catalog.table(table).map(|t| &t.format) {
        Some(TableFormat::Parquet { files, .. }) => files.iter().map(|f| f.as_path()).collect(),
        Some(TableFormat::Tbl { path }) => vec![path.as_path()],
        _ => Vec::new(),
    };
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

/// Appends one line per column of `table`; returns its plain, stored and prepared bytes.
fn table_stats(
    catalog: &Catalog,
    table: &str,
    rows: u64,
    out: &mut String,
) -> Result<(u64, u64, u64), Failure> {
    let fields = catalog
        .table(table)
        .map(|t| t.schema.fields.clone())
        .unwrap_or_default();
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    catalog.columns_with_progress(table, &names, &Bar::new())?;
    let (mut plain_total, mut stored_total, mut prepared_total) = (0, 0, 0);
    for field in &fields {
        let plain = rows * field.ty.width() as u64;
        let bits_of = |scheme: Scheme| -> Result<f64, Failure> {
            Ok(catalog.packed(table, &field.name, scheme)?.bits_per_value())
        };
        let (scheme, stored, bits_beside) = if packable(field.ty) {
            let scheme = catalog.scheme(table, &field.name)?;
            let stored = match scheme {
                Scheme::None => plain,
                packed => catalog.packed(table, &field.name, packed)?.bytes() as u64,
            };
            let mut beside = Vec::with_capacity(3);
            for scheme in [Scheme::Pack, Scheme::For, Scheme::Dfor] {
                beside.push(format!("{:.2}", bits_of(scheme)?));
            }
            (scheme, stored, beside)
        } else {
            (Scheme::None, plain, vec!["-".to_string(); 3])
        };
        let bits = if rows == 0 {
            0.0
        } else {
            stored as f64 * 8.0 / rows as f64
        };
        let entries = catalog
            .prepared_store()
            .map(|store| store.entries_of(table, &field.name))
            .unwrap_or_default();
        let prepared_bytes: u64 = entries.iter().map(|(_, bytes)| bytes).sum();
        let prepared = if entries.is_empty() {
            "-".to_string()
        } else {
            let kinds: Vec<&str> = entries.iter().map(|(kind, _)| kind.as_str()).collect();
            format!("{} ({:.1})", kinds.join(", "), mib(prepared_bytes))
        };
        prepared_total += prepared_bytes;
        let _ = writeln!(
            out,
            "{:<12} {:<18} {:<5} {:>12} {:<8} {:>10.2} {:>11.1} {:>7.0}% {:>8} {:>8} {:>8}  {}",
            table,
            field.name,
            field.ty.name(),
            rows,
            scheme.name(),
            bits,
            mib(stored),
            percent(stored, plain),
            bits_beside[0],
            bits_beside[1],
            bits_beside[2],
            prepared
        );
        plain_total += plain;
        stored_total += stored;
    }
    Ok((plain_total, stored_total, prepared_total))
}

pub fn open(data: &Path) -> Result<Catalog, Failure> {
    // No script declares anything here; `.tbl` files use the standard schemas.
    let empty = tessera_grammar::ast::Script { items: Vec::new() };
    tessera_compiler::open_catalog(&empty, data).map_err(|e| match e {
        tessera_compiler::script::OpenError::Storage(e) => Failure::Message(e.to_string()),
        tessera_compiler::script::OpenError::Declarations(_) => {
            Failure::Message("bad standard schemas".into())
        }
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        100.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
