//! The parser: tokens to AST through the LR grammar in `grammar.lalrpop`, with parse errors
//! turned into diagnostics that name what was expected in words.

mod errors;
mod nodes;

use crate::ast::Script;
use crate::diagnostic::Diagnostic;
use crate::lexer::{source_to_tokens, Token};

pub use nodes::MAX_EXPR_DEPTH;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused_qualifications, unused_imports)]
    grammar
);

/// Parses a whole script. Lexical errors are all reported; a syntax error stops the parse.
pub fn source_to_ast(source: &str) -> Result<Script, Vec<Diagnostic>> {
    let tokens = source_to_tokens(source)?;
    tokens_to_ast(tokens, source)
}

/// Parses tokens produced by `source_to_tokens` from `source`.
pub fn tokens_to_ast(tokens: Vec<Token>, source: &str) -> Result<Script, Vec<Diagnostic>> {
    let stream = tokens.into_iter().map(|token| {
        Ok((
            token.span.start as usize,
            token.kind,
            token.span.end as usize,
        ))
    });
    grammar::ScriptParser::new()
        .parse(stream)
        .map_err(|error| vec![errors::parse_error_to_diagnostic(error, source)])
}

#[cfg(test)]
mod tests;
