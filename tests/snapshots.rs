//! Snapshots of the compiler's stages over SSB data at scale factor 0.01 (the Wisconsin
//! relations of 10,000 rows, TPC-H at 0.1, for their examples): tokens, syntax tree, typed
//! pipelines, logical and optimized plans and physical pipelines of every example script, and
//! the kernels (the compiled program's launches), LLVM IR and PTX of a few, compiled as
//! `tessera run` compiles them for an H100. A change
//! to any stage shows up here, to be reviewed.

mod common;

use tessera_compiler::emit::{emit, emit_for_tile, EmitError, Stage};
use tessera_compiler::physical::PartitionJoins;
use tessera_runtime::Target;
use tessera_storage::compress::Compression;

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

/// The examples whose kernels are kept whole: a filtered sum, joins into a dense grouping, a
/// grouping by strings of three dimensions, decimals grouped by a hash table, rows written out,
/// groups filtered over the grouping's slots.
const CODE_EXAMPLES: [&str; 6] = [
    "rows/large_orders.tq",
    "ssb/q11.tq",
    "ssb/q21.tq",
    "ssb/q43.tq",
    "tpch/q01.tq",
    "wisconsin/projection.tq",
];

/// `stage` of `source` at the GPU's defaults: columns packed (`--compress auto`) and the tiles
/// chosen for how they are packed.
fn at_gpu_defaults(source: &str, stage: Stage) -> Result<String, EmitError> {
    let target = Target::Nvptx { sm: 90 };
    let catalog = common::catalog_for(source).with_compression(Compression::Auto);
    emit_for_tile(
        source,
        stage,
        Some(&catalog),
        target,
        None,
        false,
        PartitionJoins::default(),
    )
}

/// The code of [`CODE_EXAMPLES`] at the GPU's defaults.
fn code_snapshot(stage: Stage) {
    for example in CODE_EXAMPLES {
        let path = common::repo().join("examples").join(example);
        let source = std::fs::read_to_string(&path).expect("example readable");
        let text = at_gpu_defaults(&source, stage).unwrap_or_else(|e| panic!("{example}: {e:?}"));
        let name = format!("{}@{}", stage.name(), example.replace('/', "__"));
        insta::with_settings!({ snapshot_path => "snapshots/code", prepend_module_to_snapshot => false, input_file => &path }, {
            insta::assert_snapshot!(name, text);
        });
    }
}

#[test]
fn kernels() {
    code_snapshot(Stage::Kernels);
}

#[test]
fn llvm() {
    code_snapshot(Stage::Llvm);
}

#[test]
fn ptx() {
    code_snapshot(Stage::Ptx);
}

/// A grouping into a few slots summed in each thread reduces every slot's values over the block
/// by calls to one function per operation and type, so the PTX the driver compiles holds one
/// reduction however many slots and values there are (inlined, seven slots of three sums took
/// twenty-two copies of it).
#[test]
fn per_thread_groups_reduce_by_calls() {
    let emitted = |aggregates: &str, stage: Stage| {
        let source = format!("from lineorder | group lo_shipmode {{ {aggregates} }}");
        at_gpu_defaults(&source, stage).expect("compiles")
    };
    let shuffles = |aggregates: &str| {
        let plan = emitted(aggregates, Stage::Physical);
        assert!(plan.contains("7 slots, per thread first"), "{plan}");
        emitted(aggregates, Stage::Ptx).matches("shfl.sync").count()
    };
    let one = shuffles("r = sum(lo_revenue)");
    // The same column, so that loading it takes the same shuffles.
    let three = shuffles("r = sum(lo_revenue), s = sum(lo_revenue * 2), t = sum(lo_revenue + 1)");
    assert!(one > 0);
    assert_eq!(one, three);
}
