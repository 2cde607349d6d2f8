//! `tessera prepare`: stores, for every column of a data directory, what kernels read of it
//! under an encoding setting (see `tessera_storage::prepared`), so that runs map it instead of
//! decoding the files and encoding the column. Columns are prepared one at a time, so memory
//! holds one column, whatever the size of the data.

use std::time::Instant;

use tessera_runtime::exec::gpu::probe;
use tessera_storage::compress::Compression;
use tessera_storage::prepared::PreparedStore;
use tessera_storage::progress::Progress;

use super::stats::open;
use crate::failure::Failure;
use crate::progress::Bar;
use crate::PrepareArgs;

pub fn run(args: &PrepareArgs) -> Result<(), Failure> {
    let started = Instant::now();
    // The setting `run` would use here: packed on a GPU, plain on the CPU.
    let compression = args.compress.unwrap_or_else(|| {
        if probe().is_ok() {
            Compression::Auto
        } else {
            Compression::NONE
        }
    });
    if args.in_place && args.data.is_file() {
        return Err(Failure::Message(format!(
            "--in-place writes into a data folder, and {} is a file: prepare it into the cache instead (without --in-place)",
            args.data.display()
        )));
    }
    let store = if args.in_place {
        PreparedStore::in_place(&args.data)
    } else {
        PreparedStore::for_data(&args.data)
    };
    let Some(folder) = store.write_folder().map(|f| f.to_path_buf()) else {
        return Err(Failure::Message(
            "there is no cache folder to prepare columns in (TESSERA_CACHE_DIR is set empty, or HOME is unset); use --in-place to write beside the data".into(),
        ));
    };
    let catalog = open(&args.data)?
        .with_compression(compression)
        .with_prepared(store);
    let tables: Vec<String> = match &args.table {
        Some(name) if catalog.table(name).is_none() => {
            return Err(Failure::Message(format!(
                "no table `{name}` in {}",
                args.data.display()
            )))
        }
        Some(name) => vec![name.clone()],
        None => catalog.tables().map(|t| t.name.clone()).collect(),
    };
    let columns: Vec<(String, String)> = tables
        .iter()
        .flat_map(|table| {
            let names: Vec<String> = catalog
                .table(table)
                .map(|t| t.schema.names().map(str::to_string).collect())
                .unwrap_or_default();
            names.into_iter().map(move |c| (table.clone(), c))
        })
        .collect();
    let bar = Bar::new();
    bar.start("preparing", columns.len() as u64);
    let mut written = 0;
    for (table, column) in &columns {
        if catalog
            .prepare_column(table, column)
            .map_err(|e| Failure::Message(format!("cannot prepare {table}.{column}: {e}")))?
        {
            written += 1;
        }
        bar.advance(1);
    }
    bar.finish();
    eprintln!(
        "prepared {} columns of {} tables ({} already were) for --compress {compression} in {:.1} s, in {}",
        columns.len(),
        tables.len(),
        columns.len() - written,
        started.elapsed().as_secs_f64(),
        folder.display()
    );
    Ok(())
}
