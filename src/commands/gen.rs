//! `tessera gen`: writes benchmark data.

use std::path::Path;
use std::time::Instant;

use tessera_storage::gen::ssb::generate_ssb;
use tessera_storage::gen::tpch::generate_tpch;
use tessera_storage::gen::wisconsin::generate_wisconsin;
use tessera_storage::gen::GeneratedTable;

use crate::failure::Failure;
use crate::progress::Bar;

pub fn ssb(sf: f64, out: &Path) -> Result<(), Failure> {
    if !(sf.is_finite() && sf > 0.0) {
        return Err(Failure::Message(format!(
            "--sf must be a positive number, not {sf}"
        )));
    }
    let started = Instant::now();
    let summary = generate_ssb(sf, out, &Bar::new())?;
    eprintln!(
        "wrote SSB at scale factor {sf} to {} in {:.1?}",
        out.display(),
        started.elapsed()
    );
    for table in &summary.tables {
        eprintln!("  {:<10} {:>12} rows", table.name, table.rows);
    }
    Ok(())
}

pub fn tpch(sf: f64, out: &Path) -> Result<(), Failure> {
    let started = Instant::now();
    let tables = generate_tpch(sf, out, &Bar::new())?;
    report(
        &format!("TPC-H at scale factor {sf}"),
        out,
        started,
        &tables,
    );
    Ok(())
}

pub fn wisconsin(rows: u64, out: &Path) -> Result<(), Failure> {
    let started = Instant::now();
    let tables = generate_wisconsin(rows, out, &Bar::new())?;
    report("the Wisconsin relations", out, started, &tables);
    Ok(())
}

/// What a generation wrote where, how long it took, and each table's rows.
fn report(what: &str, out: &Path, started: Instant, tables: &[GeneratedTable]) {
    eprintln!(
        "wrote {what} to {} in {:.1?}",
        out.display(),
        started.elapsed()
    );
    for table in tables {
        eprintln!("  {:<16} {:>12} rows", table.name, table.rows);
    }
}
