//! Generates the SSB at a scale factor and times loading it back: a manual check of the
//! generator's and the Parquet reader's speed.
//!
//! `cargo run --release -p tessera-storage --example ssb_timing -- SF DIR [--no-gen] [--no-load]`

use std::path::PathBuf;
use std::time::Instant;

use tessera_storage::gen::{generate_ssb, ssb_schemas};
use tessera_storage::progress::NoProgress;
use tessera_storage::Catalog;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(sf), Some(dir)) = (args.first(), args.get(1)) else {
        return Err("usage: ssb_timing SF DIR [--no-gen] [--no-load]".into());
    };
    let sf: f64 = sf.parse()?;
    let dir = PathBuf::from(dir);
    if !args.iter().any(|a| a == "--no-gen") {
        let summary = generate_ssb(sf, &dir, &NoProgress)?;
        println!("generated SF {sf} in {:.2?}", summary.elapsed);
        for table in &summary.tables {
            println!(
                "  {:<10} {:>12} rows in {} files",
                table.name,
                table.rows,
                table.files.len()
            );
        }
    }
    if args.iter().any(|a| a == "--no-load") {
        return Ok(());
    }
    let started = Instant::now();
    let catalog = Catalog::open(&dir, &ssb_schemas())?;
    println!("opened the catalog in {:.2?}", started.elapsed());
    for table in catalog.tables() {
        for field in &table.schema.fields {
            let started = Instant::now();
            let column = catalog.column(&table.name, &field.name)?;
            println!(
                "  {:<10} {:<20} {:>10.1?}  dictionary {:?}",
                table.name,
                field.name,
                started.elapsed(),
                column.stats.dictionary_size
            );
        }
    }
    Ok(())
}
