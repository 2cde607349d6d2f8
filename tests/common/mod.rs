//! Helpers shared by the integration tests: the SSB data they compile and run against.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tessera_compiler::open_catalog;
use tessera_grammar::source_to_ast;
use tessera_storage::gen::{ensure_generated, Dataset};
use tessera_storage::progress::NoProgress;
use tessera_storage::Catalog;

/// SSB at scale factor 0.01, generated once into the same cache `tessera test` uses.
pub fn ssb_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| generated("ssb-0.01", Dataset::Ssb { sf: 0.01 }))
}

/// The Wisconsin relations of 10,000 rows, generated once into the same cache `tessera test`
/// uses.
pub fn wisconsin_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| generated("wisconsin-10000", Dataset::Wisconsin { rows: 10_000 }))
}

/// TPC-H at scale factor 0.01, generated once into the same cache `tessera test` uses.
pub fn tpch_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| generated("tpch-0.01", Dataset::Tpch { sf: 0.01 }))
}

/// `target/conformance-data/NAME`, generated unless it holds a complete generation of `dataset`
/// already. Another test process generating it at the same time is waited for, not raced.
fn generated(name: &str, dataset: Dataset) -> PathBuf {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("conformance-data")
        .join(name);
    if let Err(error) = ensure_generated(&folder, &dataset, &NoProgress) {
        panic!(
            "{} does not generate into {}: {error}",
            dataset.command(),
            folder.display()
        );
    }
    folder
}

/// The catalog a script sees: the Wisconsin relations or TPC-H for scripts that read them,
/// else SSB.
pub fn catalog_for(source: &str) -> Catalog {
    let ast = || source_to_ast(source).unwrap_or_else(|_| source_to_ast("").expect("empty parses"));
    if source.contains("wisconsin") {
        return open_catalog(&ast(), wisconsin_data()).expect("the Wisconsin data opens");
    }
    if source.contains("lineitem") || source.contains("TPC-H") {
        return open_catalog(&ast(), tpch_data()).expect("the TPC-H data opens");
    }
    ssb_catalog(source)
}

/// The catalog the script of file `path` sees: a conformance file's checked-in data folder
/// (`data: folder PATH`, relative to the repository) or generated benchmark (`data: tpch SF`,
/// at the scale of [`tpch_data`]; likewise `ssb` and `wisconsin`), else as [`catalog_for`].
pub fn catalog_for_file(path: &str, source: &str) -> Catalog {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let data = text.lines().find_map(|line| line.strip_prefix("data: "));
    let ast = || source_to_ast(source).unwrap_or_else(|_| source_to_ast("").expect("empty parses"));
    let folder = match data.and_then(|data| data.split_whitespace().next()) {
        Some("folder") => data
            .and_then(|data| data.strip_prefix("folder "))
            .map(|folder| repo().join(folder.trim())),
        Some("tpch") => Some(tpch_data().to_path_buf()),
        Some("wisconsin") => Some(wisconsin_data().to_path_buf()),
        Some("ssb") => Some(ssb_data().to_path_buf()),
        _ => None,
    };
    match folder {
        Some(folder) => open_catalog(&ast(), &folder).expect("the data folder opens"),
        None => catalog_for(source),
    }
}

/// The catalog a script sees over the SSB data.
pub fn ssb_catalog(source: &str) -> Catalog {
    let ast = source_to_ast(source).unwrap_or_else(|_| source_to_ast("").expect("empty parses"));
    open_catalog(&ast, ssb_data()).expect("the SSB data opens")
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
