//! Helpers shared by the integration tests: the SSB data they compile and run against.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tessera_compiler::open_catalog;
use tessera_grammar::source_to_ast;
use tessera_storage::gen::ssb::generate_ssb;
use tessera_storage::progress::NoProgress;
use tessera_storage::Catalog;

/// SSB at scale factor 0.01, generated once into the same cache `tessera test` uses.
pub fn ssb_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join("conformance-data");
        let folder = root.join("ssb-0.01");
        if !folder.join("date.parquet").is_file() {
            // Generate beside it and rename, so a half-written folder is never read.
            let scratch = root.join(format!("ssb-0.01.tmp-{}", std::process::id()));
            generate_ssb(0.01, &scratch, &NoProgress).expect("SSB generates");
            if std::fs::rename(&scratch, &folder).is_err() {
                // Another test process won the race; its copy is identical.
                let _ = std::fs::remove_dir_all(&scratch);
            }
        }
        folder
    })
}

/// The catalog a script sees over the SSB data.
pub fn ssb_catalog(source: &str) -> Catalog {
    let ast = source_to_ast(source).unwrap_or_else(|_| source_to_ast("").expect("empty parses"));
    open_catalog(&ast, ssb_data()).expect("the SSB data opens")
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
