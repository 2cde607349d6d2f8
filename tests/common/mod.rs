//! Helpers shared by the integration tests: the SSB data they compile and run against.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tessera_compiler::open_catalog;
use tessera_grammar::source_to_ast;
use tessera_storage::gen::ssb::generate_ssb;
use tessera_storage::gen::wisconsin::generate_wisconsin;
use tessera_storage::progress::NoProgress;
use tessera_storage::Catalog;

/// SSB at scale factor 0.01, generated once into the same cache `tessera test` uses.
pub fn ssb_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| {
        generated("ssb-0.01", "date.parquet", |folder| {
            generate_ssb(0.01, folder, &NoProgress).expect("SSB generates");
        })
    })
}

/// The Wisconsin relations of 10,000 rows, generated once into the same cache `tessera test`
/// uses.
pub fn wisconsin_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| {
        generated("wisconsin-10000", "wisconsin_small.parquet", |folder| {
            generate_wisconsin(10_000, folder, &NoProgress).expect("Wisconsin generates");
        })
    })
}

/// `target/conformance-data/NAME`, made by `generate` unless it holds `marker` already.
fn generated(name: &str, marker: &str, generate: impl FnOnce(&Path)) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("conformance-data");
    let folder = root.join(name);
    if !folder.join(marker).is_file() {
        // Generate beside it and rename, so a half-written folder is never read.
        let scratch = root.join(format!("{name}.tmp-{}", std::process::id()));
        generate(&scratch);
        if std::fs::rename(&scratch, &folder).is_err() {
            // Another test process won the race; its copy is identical.
            let _ = std::fs::remove_dir_all(&scratch);
        }
    }
    folder
}

/// The catalog a script sees: the Wisconsin relations for scripts that read them, else SSB.
pub fn catalog_for(source: &str) -> Catalog {
    if source.contains("wisconsin") {
        let ast =
            source_to_ast(source).unwrap_or_else(|_| source_to_ast("").expect("empty parses"));
        return open_catalog(&ast, wisconsin_data()).expect("the Wisconsin data opens");
    }
    ssb_catalog(source)
}

/// The catalog a script sees over the SSB data.
pub fn ssb_catalog(source: &str) -> Catalog {
    let ast = source_to_ast(source).unwrap_or_else(|_| source_to_ast("").expect("empty parses"));
    open_catalog(&ast, ssb_data()).expect("the SSB data opens")
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
