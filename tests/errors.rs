//! The error corpus: each script in `tests/errors/` holds one mistake a user could make, or one
//! limit of the language. Its diagnostics, rendered without colour, are snapshots; every one
//! must be an error report that points into the script, none may be an internal error, and a
//! limit's message must be word for word an entry of LANGUAGE.md's section 8.

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
                // Every limit is the planner's to report: code generation fails only on
                // internal errors, so what plans also compiles.
                Ok(catalog) => match Compilation::run(ast, &catalog) {
                    Err(d) => d,
                    Ok(_) => panic!("{name} plans, but it is in the error corpus"),
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
        for d in diagnostics
            .iter()
            .filter(|d| d.kind == DiagnosticKind::Unsupported)
        {
            assert!(
                documented_limits().contains(&d.message),
                "{name}: the limit `{}` is not an entry of LANGUAGE.md's section 8",
                d.message
            );
        }
        let text = render(&diagnostics, &name, &source, false);
        insta::with_settings!({ snapshot_path => "snapshots/errors", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!("diagnostics", text);
        });
    });
}

/// The entries of LANGUAGE.md's section 8, each the message of the error that refuses it: a
/// list item's text up to its explanation in parentheses, lines joined.
fn documented_limits() -> Vec<String> {
    let language = include_str!("../docs/LANGUAGE.md");
    let section = language
        .split("\n## 8. Limits")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("LANGUAGE.md has a section 8");
    let mut entries: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(item) = line.strip_prefix("- ") {
            entries.push(item.to_string());
        } else if let (Some(last), Some(more)) = (entries.last_mut(), line.strip_prefix("  ")) {
            last.push(' ');
            last.push_str(more);
        }
    }
    entries
        .into_iter()
        .map(|e| match e.find(" (") {
            Some(at) => e[..at].to_string(),
            None => e,
        })
        .collect()
}
