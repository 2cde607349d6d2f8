//! The front end of Tessera: it owns the language's surface. It lexes a script into tokens
//! (`lexer`, logos), parses them into an AST whose every node carries the `Span` of its source
//! (`parser` with the lalrpop grammar in `grammar.lalrpop`, and `ast`), prints tokens and trees
//! for `--emit tokens|ast` (`lexer::tokens_to_string`, `print`), and turns user errors into
//! diagnostics rendered with ariadne (`diagnostic`), the one error type every later stage
//! reports through. It must not know about types, catalogs, data or GPUs: names are not
//! resolved here, and `date` is as good a table name as any.
//!
//! | transition | entry point | `--emit` |
//! |---|---|---|
//! | source → tokens | [`source_to_tokens`] | `tokens` ([`tokens_to_string`]) |
//! | source → AST | [`source_to_ast`] | `ast` ([`ast_to_string`]) |
//! | diagnostics → text | [`render`] | |
//!
//! ```
//! let script = tessera_grammar::source_to_ast("from lineorder | take 3")?;
//! let tree = tessera_grammar::ast_to_string(&script);
//! assert_eq!(tree, "query 0..23\n  from lineorder 5..14\n  take 3 17..23\n");
//! # Ok::<(), Vec<tessera_grammar::Diagnostic>>(())
//! ```

pub mod ast;
pub mod diagnostic;
pub mod lexer;
pub mod parser;
pub mod print;
pub mod span;

pub use diagnostic::{closest_name, render, Diagnostic, DiagnosticKind};
pub use lexer::{source_to_tokens, tokens_to_string, Token, TokenKind};
pub use parser::source_to_ast;
pub use print::ast_to_string;
pub use span::{Span, Spanned};
