//! Snapshots of every compiler stage for every example script, over SSB data at scale factor
//! 0.01 (the Wisconsin relations of 10,000 rows for the Wisconsin examples): tokens, syntax tree, typed pipelines, logical and optimized plans, physical pipelines,
//! LLVM IR and PTX for sm_90. A change to any stage shows up here, to be reviewed.

mod common;

use tessera_compiler::emit::{emit, EmitError, Stage};
use tessera_runtime::Target;

fn snapshot(stage: Stage) {
    insta::glob!("../examples", "**/*.tq", |path| {
        let source = std::fs::read_to_string(path).expect("example readable");
        let catalog = stage.needs_data().then(|| common::catalog_for(&source));
        let text = match emit(
            &source,
            stage,
            catalog.as_ref(),
            Target::Nvptx { sm: 90 },
            true,
        ) {
            Ok(text) => text,
            Err(EmitError::Script(d)) => panic!("{} does not compile: {d:?}", path.display()),
            Err(other) => panic!("{}: {other:?}", path.display()),
        };
        insta::with_settings!({ snapshot_path => "snapshots/stages", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(stage.name(), text);
        });
    });
}

#[test]
fn tokens() {
    snapshot(Stage::Tokens);
}

#[test]
fn ast() {
    snapshot(Stage::Ast);
}

#[test]
fn typed() {
    snapshot(Stage::Typed);
}

#[test]
fn logical() {
    snapshot(Stage::Logical);
}

#[test]
fn optimized() {
    snapshot(Stage::Optimized);
}

#[test]
fn physical() {
    snapshot(Stage::Physical);
}

#[test]
fn llvm() {
    snapshot(Stage::Llvm);
}

#[test]
fn ptx() {
    snapshot(Stage::Ptx);
}
