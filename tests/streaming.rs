//! Rows written out are read back in pieces when a caller streams them: the pieces, in order,
//! must be exactly the rows read back whole, for pieces of any size.

mod common;

use tessera_compiler::codegen::pipelines_to_program;
use tessera_compiler::Compilation;
use tessera_grammar::source_to_ast;
use tessera_runtime::exec::host::HostBackend;
use tessera_runtime::exec::{run_query, run_query_with, Readback};
use tessera_runtime::program::Code;
use tessera_runtime::result::ResultTable;
use tessera_runtime::Target;

#[test]
fn streamed_pieces_add_up_to_the_whole_result() {
    // Every row of a table (a projection keeps row order), and a selection.
    let scripts = [
        "from lineorder | select lo_orderkey, lo_linenumber, lo_shipmode\n",
        "from lineorder | where lo_quantity < 4 | select lo_orderkey, lo_shipmode\n",
    ];
    for source in scripts {
        let catalog = common::ssb_catalog(source);
        let ast = source_to_ast(source).expect("parses");
        let compilation = Compilation::run(ast, &catalog).expect("compiles");
        let program = pipelines_to_program(&compilation.physical, &catalog, Target::Host)
            .expect("code generation");
        let Code::HostObject(objects) = &program.code else {
            panic!("host code expected");
        };
        let mut backend = HostBackend::new(objects).expect("host backend");
        let query = &program.queries[0];
        let whole = run_query(&mut backend, query, &catalog).expect("runs");
        assert!(whole.table.rows.len() > 1000, "{source}");
        for piece_rows in [1, 999, 1 << 20] {
            let mut pieces: Vec<ResultTable> = Vec::new();
            let mut deliver = |piece: ResultTable| {
                pieces.push(piece);
                Ok(())
            };
            let mut readback = Readback::Stream {
                rows: piece_rows,
                deliver: &mut deliver,
            };
            let outcome =
                run_query_with(&mut backend, query, &catalog, &mut readback).expect("runs");
            assert!(outcome.table.rows.is_empty());
            assert_eq!(outcome.table.columns, whole.table.columns);
            assert!(pieces.iter().all(|p| p.rows.len() <= piece_rows));
            assert_eq!(
                pieces.len(),
                whole.table.rows.len().div_ceil(piece_rows),
                "{source}"
            );
            let mut rows: Vec<_> = pieces.into_iter().flat_map(|p| p.rows).collect();
            let mut expected = whole.table.rows.clone();
            // Tiles of a selection land in whichever order the host's threads finish them.
            rows.sort_by_key(|r| format!("{r:?}"));
            expected.sort_by_key(|r| format!("{r:?}"));
            assert_eq!(rows, expected, "{source}, pieces of {piece_rows}");
        }
    }
}

#[test]
fn take_after_rows_returns_that_many() {
    let source =
        "from lineorder | where lo_quantity > 10 | select lo_orderkey, lo_quantity | take 5\n";
    let catalog = common::ssb_catalog(source);
    let compilation =
        Compilation::run(source_to_ast(source).expect("parses"), &catalog).expect("compiles");
    let program = pipelines_to_program(&compilation.physical, &catalog, Target::Host)
        .expect("code generation");
    let Code::HostObject(objects) = &program.code else {
        panic!("host code expected");
    };
    let mut backend = HostBackend::new(objects).expect("host backend");
    let outcome = run_query(&mut backend, &program.queries[0], &catalog).expect("runs");
    assert_eq!(outcome.table.rows.len(), 5);
    for row in &outcome.table.rows {
        assert!(
            matches!(row[1], tessera_storage::Value::Int(q) if q > 10),
            "{row:?}"
        );
    }
}
