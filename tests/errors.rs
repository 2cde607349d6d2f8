//! The error corpus: each script in `tests/errors/` holds one mistake a user could make. Its
//! diagnostics, rendered without colour, are snapshots; every one must be an error report that
//! points into the script, and none may be an internal error.

mod common;

use tessera_compiler::{open_catalog, script::OpenError, Compilation};
use tessera_grammar::{render, source_to_ast, DiagnosticKind};

#[test]
fn every_mistake_is_reported() {
    insta::glob!("errors/*.tq", |path| {
        let source = std::fs::read_to_string(path).expect("readable");
        let name = format!(
            "errors/{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("?")
        );
        let diagnostics = match source_to_ast(&source) {
            Err(d) => d,
            Ok(ast) => match open_catalog(&ast, common::ssb_data()) {
                Err(OpenError::Declarations(d)) => d,
                Err(OpenError::Storage(e)) => panic!("{name}: the data does not open: {e}"),
                Ok(catalog) => match Compilation::run(ast, &catalog) {
                    Err(d) => d,
                    Ok(_) => panic!("{name} compiles, but it is in the error corpus"),
                },
            },
        };
        assert!(!diagnostics.is_empty());
        for d in &diagnostics {
            assert_ne!(d.kind, DiagnosticKind::Internal, "{name}: {d:?}");
            assert!(
                d.span.end as usize <= source.len(),
                "{name}: span outside the script"
            );
        }
        let text = render(&diagnostics, &name, &source, false);
        insta::with_settings!({ snapshot_path => "snapshots/errors", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!("diagnostics", text);
        });
    });
}
