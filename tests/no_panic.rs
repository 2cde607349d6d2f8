//! No input may panic: random text and mutations of the example scripts go through the lexer,
//! parser, checker and planner (and a sample of them through code generation), and each must
//! end in a result or in diagnostics that point into the script.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use tessera_compiler::codegen::pipelines_to_program;
use tessera_compiler::Compilation;
use tessera_grammar::{render, source_to_ast};
use tessera_runtime::Target;
use tessera_storage::Catalog;

/// splitmix64: small, fast and good enough to drive mutations deterministically.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "from",
    "lineorder",
    "part",
    "date",
    "|",
    "where",
    "join",
    "on",
    "==",
    "group",
    "{",
    "}",
    "(",
    ")",
    "sum(",
    "count()",
    "lo_revenue",
    "p_brand1",
    "\"MFGR#12\"",
    "and",
    "or",
    "not",
    "between",
    "in",
    ",",
    "select",
    "derive",
    "=",
    "sort",
    "desc",
    "take",
    "10",
    "1.5",
    "@1994-01-01",
    "case",
    "when",
    "then",
    "else",
    "end",
    "as",
    "f64",
    "i32",
    "str",
    "semi",
    "anti",
    "distinct",
    "union",
    "-",
    "*",
    "/",
    "%",
    "d_year",
    "lo_orderdate",
    "d_datekey",
    "lo_discount",
    "aggregate",
    "let",
    "x",
    "table",
    ":",
    "?",
    "is",
    "null",
    "sigmoid(",
    "year(",
    "min(",
    "avg(",
];

fn mutate(rng: &mut Rng, script: &str) -> String {
    let mut text: Vec<char> = script.chars().collect();
    for _ in 0..1 + rng.below(4) {
        match rng.below(4) {
            0 if !text.is_empty() => {
                let at = rng.below(text.len());
                let len = rng.below(12).min(text.len() - at);
                text.drain(at..at + len);
            }
            1 => {
                let at = rng.below(text.len() + 1);
                let piece = PIECES[rng.below(PIECES.len())];
                for (i, c) in format!(" {piece} ").chars().enumerate() {
                    text.insert(at + i, c);
                }
            }
            2 if text.len() > 2 => {
                let a = rng.below(text.len());
                let b = rng.below(text.len());
                text.swap(a, b);
            }
            _ => {
                let at = rng.below(text.len() + 1);
                text.insert(at, char::from_u32(32 + rng.below(95) as u32).unwrap_or('?'));
            }
        }
    }
    text.into_iter().collect()
}

/// Compiles as far as the script allows; panics only if Tessera does.
fn exercise(source: &str, catalog: &Catalog, codegen: bool) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let diagnostics = match source_to_ast(source) {
            Err(d) => d,
            Ok(ast) => match Compilation::run(ast, catalog) {
                Err(d) => d,
                Ok(compilation) => {
                    if codegen {
                        if let Err(d) =
                            pipelines_to_program(&compilation.physical, catalog, Target::Host)
                        {
                            assert_ne!(
                                d.kind,
                                tessera_grammar::DiagnosticKind::Internal,
                                "{source}\n{d:?}"
                            );
                        }
                    }
                    return;
                }
            },
        };
        for d in &diagnostics {
            assert!(
                d.span.end as usize <= source.len(),
                "span outside the script: {source:?} {d:?}"
            );
            assert_ne!(
                d.kind,
                tessera_grammar::DiagnosticKind::Internal,
                "{source}\n{d:?}"
            );
        }
        let _ = render(&diagnostics, "fuzz.tq", source, false);
    }));
    if outcome.is_err() {
        panic!("Tessera panicked on this script:\n{source}");
    }
}

fn examples() -> Vec<String> {
    let mut scripts = Vec::new();
    for folder in ["examples/ssb", "examples/functions"] {
        let dir = common::repo().join(folder);
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("examples")
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            scripts.push(std::fs::read_to_string(path).expect("readable"));
        }
    }
    scripts
}

#[test]
fn mutated_examples_never_panic() {
    let catalog = common::ssb_catalog("");
    let examples = examples();
    let mut rng = Rng(0x7E55_E2A0);
    for i in 0..1500 {
        let base = &examples[rng.below(examples.len())];
        let script = mutate(&mut rng, base);
        exercise(&script, &catalog, i % 25 == 0);
    }
}

#[test]
fn random_token_soup_never_panics() {
    let catalog = common::ssb_catalog("");
    let mut rng = Rng(42);
    for _ in 0..1500 {
        let mut script = String::from("from lineorder ");
        for _ in 0..rng.below(30) {
            script.push_str(PIECES[rng.below(PIECES.len())]);
            script.push(' ');
        }
        exercise(&script, &catalog, false);
    }
}

#[test]
fn random_bytes_never_panic() {
    let catalog = common::ssb_catalog("");
    let mut rng = Rng(7);
    for _ in 0..1000 {
        let bytes: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
        exercise(&String::from_utf8_lossy(&bytes), &catalog, false);
    }
}

/// A compiled program's file (`.tqx`, and a kernel-cache entry, which is the same format)
/// mutated every way a disk or a hand can: a flipped byte, a cut, a doubled piece, a changed
/// header. Reading it never panics, and no change is taken for another program.
#[test]
fn damaged_program_files_are_refused_without_panicking() {
    use tessera_runtime::program::Program;
    let catalog = common::ssb_catalog("");
    let source =
        std::fs::read_to_string(common::repo().join("examples/ssb/q21.tq")).expect("readable");
    let ast = source_to_ast(&source).expect("parses");
    let compilation = Compilation::run(ast, &catalog).expect("compiles");
    let program =
        pipelines_to_program(&compilation.physical, &catalog, Target::Host).expect("generates");
    let file = program.to_file("q21-key").expect("writes");
    assert!(Program::from_file(&file, Some("q21-key")).is_ok());
    let mut rng = Rng(0x7A9E_F11E);
    for _ in 0..2000 {
        let mut damaged = file.clone();
        match rng.below(4) {
            0 => {
                let at = rng.below(damaged.len());
                damaged[at] ^= 1 << rng.below(8);
            }
            1 => damaged.truncate(rng.below(damaged.len())),
            2 => {
                let at = rng.below(damaged.len());
                let piece = damaged[at..(at + 1 + rng.below(64)).min(damaged.len())].to_vec();
                damaged.splice(at..at, piece);
            }
            _ => {
                // A header word replaced: the identity, the checksum, the format.
                let header = damaged.iter().position(|&b| b == b'\n').expect("a header");
                let at = rng.below(header);
                damaged[at] = b"0123456789 xz\n"[rng.below(14)];
            }
        }
        if damaged == file {
            continue;
        }
        let read = catch_unwind(AssertUnwindSafe(|| {
            Program::from_file(&damaged, Some("q21-key"))
                .ok()
                .map(|p| p.to_file("q21-key"))
        }));
        match read {
            Ok(None) => {}
            // Only a change that leaves the program whole may read (a checksum digit in
            // upper case).
            Ok(Some(rewritten)) => assert!(
                rewritten.is_ok_and(|bytes| bytes == file),
                "a damaged program file was read as another program"
            ),
            Err(_) => panic!("reading a damaged program file panicked"),
        }
    }
}
