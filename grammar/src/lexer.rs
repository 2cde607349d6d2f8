//! The lexer: source text to `Token`s with spans. A logos DFA recognizes the shape of each
//! token; payloads (numbers, escapes, dates) are decoded and checked here, so that every
//! malformed token becomes a diagnostic with a precise span instead of a vague parse error.

use std::fmt;
use std::fmt::Write as _;

use logos::Logos;

use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// The deepest that parentheses may nest. Checked here, before any tree exists, so that every
/// later recursive pass (parser actions, type checker, printers) has a known bound on depth.
pub const MAX_NESTING: usize = 128;

/// One token of a script: what it is and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Declares the tokens that are always spelled the same way (keywords and punctuation) once,
/// and derives from that single list both the enum variants and the text of each.
macro_rules! tokens_with_fixed_text {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// What a token is. Keywords are reserved; type and function names are not (they are
        /// `Ident`s), since `date` is also a table name in SSB.
        #[derive(Clone, Debug, PartialEq)]
        pub enum TokenKind {
            /// A name: `[A-Za-z_][A-Za-z0-9_]*` that is not a keyword.
            Ident(String),
            /// An integer literal, without sign (`-` is an operator).
            Int(i64),
            /// A literal with a `.` or an exponent: `1.5`, `1e-3`.
            Float(f64),
            /// A string literal, escapes decoded.
            Str(String),
            /// A date `@1994-01-31`, timestamp `@1994-01-31T08:30:00` or time of day `@08:30:00`,
            /// kept as the text after `@`; the compiler checks the calendar and the clock.
            Temporal(String),
            $($(#[$doc])* $variant,)*
        }

        impl TokenKind {
            /// The spelling of a keyword or punctuation token; `None` for tokens with a payload.
            pub fn fixed_text(&self) -> Option<&'static str> {
                match self {
                    $(TokenKind::$variant => Some($text),)*
                    _ => None,
                }
            }

            fn from_fixed_text(text: &str) -> Option<TokenKind> {
                match text {
                    $($text => Some(TokenKind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

tokens_with_fixed_text! {
    From => "from",
    Where => "where",
    Select => "select",
    Derive => "derive",
    Join => "join",
    On => "on",
    Semi => "semi",
    Anti => "anti",
    Left => "left",
    Group => "group",
    Aggregate => "aggregate",
    Sort => "sort",
    Desc => "desc",
    Asc => "asc",
    Take => "take",
    Distinct => "distinct",
    Union => "union",
    All => "all",
    Intersect => "intersect",
    Except => "except",
    Product => "product",
    Table => "table",
    Let => "let",
    And => "and",
    Or => "or",
    Not => "not",
    Between => "between",
    In => "in",
    Like => "like",
    Is => "is",
    Null => "null",
    True => "true",
    False => "false",
    Case => "case",
    When => "when",
    Then => "then",
    Else => "else",
    End => "end",
    As => "as",
    Pipe => "|",
    Comma => ",",
    Dot => ".",
    LParen => "(",
    RParen => ")",
    LBrace => "{",
    RBrace => "}",
    Colon => ":",
    Question => "?",
    /// `=`: names a column (`revenue = sum(x)`); comparison is `==`.
    Assign => "=",
    EqEq => "==",
    NotEq => "!=",
    Lt => "<",
    Le => "<=",
    Gt => ">",
    Ge => ">=",
    Plus => "+",
    Minus => "-",
    Star => "*",
    Slash => "/",
    Percent => "%",
}

impl TokenKind {
    /// True for reserved words (`from`, `and`, `null`, ...).
    pub fn is_keyword(&self) -> bool {
        self.fixed_text()
            .is_some_and(|text| text.starts_with(|c: char| c.is_ascii_alphabetic()))
    }
}

/// The token as it could be written in a script (floats in Rust's shortest form).
impl fmt::Display for TokenKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenKind::Ident(name) if is_plain_name(name) => f.write_str(name),
            TokenKind::Ident(name) => write!(f, "`{name}`"),
            TokenKind::Int(value) => write!(f, "{value}"),
            TokenKind::Float(value) => write!(f, "{value:?}"),
            TokenKind::Str(value) => f.write_str(&quote_string(value)),
            TokenKind::Temporal(value) => write!(f, "@{value}"),
            fixed => f.write_str(fixed.fixed_text().unwrap_or("?")),
        }
    }
}

/// Writes a string literal back in source form: the inverse of the lexer's escape decoding.
pub fn quote_string(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// Whether `name` can be written without backquotes: an identifier that is not a keyword.
pub fn is_plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && TokenKind::from_fixed_text(name).is_none()
}

/// The raw shape of a token as the DFA sees it; `source_to_tokens` turns it into a `TokenKind`.
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
// A comment runs to the end of its line, so reading up to `\n` is exactly what is wanted.
#[logos(skip(r"#[^\n]*", allow_greedy = true))]
enum Shape {
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Word,
    #[regex(r"[0-9]+")]
    Int,
    #[regex(r"[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?")]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+")]
    Float,
    /// Strings stay on one line, so a missing `"` is reported on the line where it is missing.
    #[regex(r#""([^"\\\n]|\\[^\n])*""#)]
    Str,
    #[regex(r#""([^"\\\n]|\\[^\n])*\\?"#)]
    UnterminatedStr,
    /// Anything date- or time-like after `@`; the exact shape is checked when decoding, so
    /// that `@94-1-1` is one clear error rather than a cascade of tokens.
    #[regex(r"@[0-9A-Za-z_\-:.]*")]
    Temporal,
    /// A name that is not an identifier, or is a keyword, in backquotes: `` `Order Date` ``.
    #[regex(r"`[^`\n]+`")]
    QuotedName,
    #[regex(r"`[^`\n]*")]
    UnterminatedName,
    #[regex(r"==|!=|<=|>=|[|,.(){}:?=<>+\-*/%]")]
    Punct,
}

/// Splits a script into tokens, or reports every lexical error found.
pub fn source_to_tokens(source: &str) -> Result<Vec<Token>, Vec<Diagnostic>> {
    let mut tokens: Vec<Token> = Vec::new();
    let mut errors: Vec<Diagnostic> = Vec::new();
    let mut depth = 0usize;
    let mut nesting_reported = false;
    // The current run of invalid characters and the index of its diagnostic, so that a run
    // like `$$$` is reported once.
    let mut invalid_run: Option<(usize, Span)> = None;

    let mut lexer = Shape::lexer(source);
    while let Some(shape) = lexer.next() {
        let range = lexer.span();
        let span = Span::new(range.start, range.end);
        let text = lexer.slice();
        let shape = match shape {
            Ok(shape) => shape,
            Err(()) => {
                match invalid_run {
                    Some((index, run)) if run.end == span.start => {
                        let run = run.to(span);
                        if let Some(reported) = errors.get_mut(index) {
                            *reported = invalid_characters(source, run);
                        }
                        invalid_run = Some((index, run));
                    }
                    _ => {
                        invalid_run = Some((errors.len(), span));
                        errors.push(invalid_characters(source, span));
                    }
                }
                continue;
            }
        };

        if let Some(number) = tokens.last().filter(|t| glued_to_number(t, shape, span)) {
            // `12abc`, `1e`, `0x1f`: a number with letters stuck to it is one mistake, not two
            // tokens that happen to touch.
            let whole = number.span.to(span);
            errors.push(
                Diagnostic::syntax(
                    whole,
                    format!(
                        "malformed number `{}`",
                        source.get(whole.range()).unwrap_or("")
                    ),
                )
                .with_label("numbers are digits, with an optional `.` fraction and `e` exponent"),
            );
            tokens.pop();
            continue;
        }

        match decode(shape, text, span) {
            Ok(kind) => {
                match kind {
                    TokenKind::LParen => {
                        depth += 1;
                        if depth > MAX_NESTING && !nesting_reported {
                            nesting_reported = true;
                            errors.push(nesting_too_deep(span));
                        }
                    }
                    TokenKind::RParen => depth = depth.saturating_sub(1),
                    _ => {}
                }
                tokens.push(Token { kind, span });
            }
            Err(error) => errors.push(error),
        }
    }

    if errors.is_empty() {
        Ok(tokens)
    } else {
        Err(errors)
    }
}

fn glued_to_number(previous: &Token, shape: Shape, span: Span) -> bool {
    matches!(previous.kind, TokenKind::Int(_) | TokenKind::Float(_))
        && previous.span.end == span.start
        && matches!(shape, Shape::Word | Shape::Int | Shape::Float)
}

fn decode(shape: Shape, text: &str, span: Span) -> Result<TokenKind, Diagnostic> {
    match shape {
        Shape::Word => {
            Ok(TokenKind::from_fixed_text(text)
                .unwrap_or_else(|| TokenKind::Ident(text.to_string())))
        }
        Shape::Punct => TokenKind::from_fixed_text(text).ok_or_else(|| {
            Diagnostic::internal(span, format!("the lexer has no token for `{text}`"))
        }),
        Shape::Int => text.parse::<i64>().map(TokenKind::Int).map_err(|_| {
            Diagnostic::syntax(span, "integer literal out of range").with_label(format!(
                "larger than {}, the largest 64-bit integer",
                i64::MAX
            ))
        }),
        Shape::Float => match text.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(TokenKind::Float(value)),
            _ => Err(Diagnostic::syntax(span, "float literal out of range")
                .with_label("larger than the largest 64-bit float")),
        },
        Shape::Str => decode_string(text, span).map(TokenKind::Str),
        Shape::QuotedName => Ok(TokenKind::Ident(text[1..text.len() - 1].to_string())),
        Shape::UnterminatedName => Err(Diagnostic::syntax(span, "unterminated quoted name")
            .with_label("this name has no closing `` ` ``")
            .with_hint("a quoted name ends on the line where it starts")),
        Shape::UnterminatedStr => Err(Diagnostic::syntax(span, "unterminated string")
            .with_label("this string has no closing `\"`")
            .with_hint("a string ends on the line where it starts")),
        Shape::Temporal => decode_temporal(text, span).map(TokenKind::Temporal),
    }
}

/// Decodes the escapes `\"`, `\\`, `\n` and `\t` of a string literal, quotes included in `text`.
fn decode_string(text: &str, span: Span) -> Result<String, Diagnostic> {
    let body = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    let body_start = span.start as usize + 1;
    let mut value = String::with_capacity(body.len());
    let mut chars = body.char_indices();
    while let Some((_, c)) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        match chars.next() {
            Some((_, '"')) => value.push('"'),
            Some((_, '\\')) => value.push('\\'),
            Some((_, 'n')) => value.push('\n'),
            Some((_, 't')) => value.push('\t'),
            Some((at, other)) => {
                let escape = Span::new(body_start + at - 1, body_start + at + other.len_utf8());
                return Err(
                    Diagnostic::syntax(escape, format!("unknown escape `\\{other}`"))
                        .with_label("not an escape")
                        .with_hint("the escapes are `\\\"`, `\\\\`, `\\n` and `\\t`"),
                );
            }
            // The token's pattern makes a trailing lone `\` impossible; report it as the
            // unterminated string it would be.
            None => {
                return Err(Diagnostic::syntax(span, "unterminated string")
                    .with_label("this string has no closing `\"`"))
            }
        }
    }
    Ok(value)
}

/// Checks the `@yyyy-mm-dd` shape and returns `yyyy-mm-dd`.
/// The text of a date (`yyyy-mm-dd`), timestamp (`yyyy-mm-ddThh:mm:ss`) or time of day
/// (`hh:mm:ss`) literal, either of the last two with up to six digits of a second's fraction.
fn decode_temporal(text: &str, span: Span) -> Result<String, Diagnostic> {
    let literal = text.strip_prefix('@').unwrap_or(text);
    let shaped = |part: &str, pattern: &str| {
        part.len() == pattern.len()
            && part.bytes().zip(pattern.bytes()).all(|(b, p)| match p {
                b'9' => b.is_ascii_digit(),
                _ => b == p,
            })
    };
    let clock = |part: &str| {
        let (whole, fraction) = part.split_once('.').unwrap_or((part, "1"));
        shaped(whole, "99:99:99")
            && (1..=6).contains(&fraction.len())
            && fraction.bytes().all(|b| b.is_ascii_digit())
    };
    let well_shaped = match literal.split_once('T') {
        Some((day, time)) => shaped(day, "9999-99-99") && clock(time),
        None => shaped(literal, "9999-99-99") || clock(literal),
    };
    if well_shaped {
        return Ok(literal.to_string());
    }
    let (kind, expected) = if literal.contains('T') {
        (
            "timestamp",
            "`@yyyy-mm-ddThh:mm:ss`, e.g. `@1994-01-31T08:30:00`",
        )
    } else if literal.contains(':') {
        ("time", "`@hh:mm:ss`, e.g. `@08:30:00`")
    } else {
        ("date", "`@yyyy-mm-dd`, e.g. `@1994-01-31`")
    };
    Err(
        Diagnostic::syntax(span, format!("malformed {kind} literal `{text}`"))
            .with_label(format!("expected {expected}")),
    )
}

fn invalid_characters(source: &str, span: Span) -> Diagnostic {
    let text = source.get(span.range()).unwrap_or("");
    let plural = if text.chars().count() > 1 { "s" } else { "" };
    let diagnostic = Diagnostic::syntax(
        span,
        format!("invalid character{plural} `{}`", text.escape_debug()),
    )
    .with_label("not part of any token");
    match text.chars().next() {
        Some('\'') => diagnostic.with_hint("strings are written in double quotes: \"text\""),
        Some(';') => diagnostic.with_hint("items need no separator: remove the `;`"),
        Some('&') => diagnostic.with_hint("use `and`"),
        Some('!') => diagnostic.with_hint("use `not` to negate, or `!=` to compare"),
        Some('[' | ']') => diagnostic.with_hint("lists are written in parentheses: `x in (1, 2)`"),
        _ => diagnostic,
    }
}

fn nesting_too_deep(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        span,
        format!("parentheses nested more than {MAX_NESTING} deep"),
    )
    .with_label(format!("this `(` opens level {}", MAX_NESTING + 1))
    .with_hint(format!(
        "Tessera limits nesting to {MAX_NESTING} levels so that no later pass can overflow \
             its stack; name inner parts with `let` or `derive`"
    ))
}

/// The `--emit tokens` listing: one token per line, its span, then what it is.
pub fn tokens_to_string(tokens: &[Token], source: &str) -> String {
    let width = tokens
        .iter()
        .map(|t| t.span.to_string().len())
        .max()
        .unwrap_or(0)
        + 2;
    let mut out = String::new();
    for token in tokens {
        let what = match &token.kind {
            TokenKind::Ident(name) => format!("ident {name}"),
            TokenKind::Int(_) => format!("int {}", token.kind),
            TokenKind::Float(_) => {
                format!("float {}", source.get(token.span.range()).unwrap_or("?"))
            }
            TokenKind::Str(value) => format!("str {}", quote_string(value)),
            TokenKind::Temporal(value) => format!("date {value}"),
            fixed => fixed.to_string(),
        };
        // Writing into a String cannot fail.
        let _ = writeln!(out, "  {:<width$}{what}", token.span.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(source: &str) -> Vec<TokenKind> {
        match source_to_tokens(source) {
            Ok(tokens) => tokens.into_iter().map(|t| t.kind).collect(),
            Err(errors) => panic!("unexpected lexer errors for {source:?}: {errors:?}"),
        }
    }

    fn errors(source: &str) -> Vec<Diagnostic> {
        match source_to_tokens(source) {
            Ok(tokens) => panic!("expected errors for {source:?}, got {tokens:?}"),
            Err(errors) => errors,
        }
    }

    fn single_error(source: &str) -> Diagnostic {
        let mut errors = errors(source);
        assert_eq!(errors.len(), 1, "{errors:?}");
        errors.remove(0)
    }

    #[test]
    fn every_keyword_is_reserved() {
        let words =
            "from where select derive join on semi anti left group aggregate sort desc asc \
                     take distinct union all intersect except product table let and or not between \
                     in is null true false case when then else end as";
        let lexed = kinds(words);
        assert_eq!(lexed.len(), 38);
        for (word, kind) in words.split_whitespace().zip(&lexed) {
            assert!(kind.is_keyword(), "{word} lexed as {kind:?}");
            assert_eq!(kind.fixed_text(), Some(word));
        }
    }

    #[test]
    fn every_punctuation_token() {
        use TokenKind::*;
        assert_eq!(
            kinds("| , . ( ) { } : ? = == != < <= > >= + - * / %"),
            vec![
                Pipe, Comma, Dot, LParen, RParen, LBrace, RBrace, Colon, Question, Assign, EqEq,
                NotEq, Lt, Le, Gt, Ge, Plus, Minus, Star, Slash, Percent
            ]
        );
        // Longest match: `<=` is one token, `=<` is two.
        assert_eq!(kinds("a<=b=<c==d"), kinds("a <= b = < c == d"));
    }

    #[test]
    fn type_and_function_names_are_identifiers() {
        for name in [
            "date",
            "i32",
            "f64",
            "str",
            "bool",
            "sum",
            "count",
            "year",
            "_x1",
            "Lo_Revenue",
        ] {
            assert_eq!(kinds(name), vec![TokenKind::Ident(name.to_string())]);
        }
        assert_eq!(
            kinds("fromage selected"),
            vec![
                TokenKind::Ident("fromage".into()),
                TokenKind::Ident("selected".into())
            ]
        );
    }

    #[test]
    fn numbers() {
        use TokenKind::*;
        assert_eq!(kinds("42 0 007"), vec![Int(42), Int(0), Int(7)]);
        assert_eq!(
            kinds("1.5 1e-3 2.5E10 3e+2"),
            vec![Float(1.5), Float(1e-3), Float(2.5e10), Float(300.0)]
        );
        assert_eq!(kinds("9223372036854775807"), vec![Int(i64::MAX)]);
        // A leading minus is an operator, not part of the literal.
        assert_eq!(kinds("-5"), vec![Minus, Int(5)]);
        assert_eq!(kinds("a-1"), vec![Ident("a".into()), Minus, Int(1)]);
        assert_eq!(
            kinds("`Order Date` `from`"),
            vec![Ident("Order Date".into()), Ident("from".into())]
        );
        assert_eq!(TokenKind::Ident("my-data".into()).to_string(), "`my-data`");
        assert_eq!(TokenKind::Ident("select".into()).to_string(), "`select`");
        assert!(source_to_tokens("from `x").is_err());
        // `1.` is an integer and a dot; the parser rejects it.
        assert_eq!(kinds("1."), vec![Int(1), Dot]);
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(
            kinds(r#""MFGR#12""#),
            vec![TokenKind::Str("MFGR#12".into())]
        );
        assert_eq!(
            kinds(r#""a\"b\\c\nd\te""#),
            vec![TokenKind::Str("a\"b\\c\nd\te".into())]
        );
        assert_eq!(kinds(r#""""#), vec![TokenKind::Str(String::new())]);
        assert_eq!(kinds("\"héllo\""), vec![TokenKind::Str("héllo".into())]);
        assert_eq!(quote_string("a\"b\\c\nd\te"), r#""a\"b\\c\nd\te""#);
    }

    #[test]
    fn dates_keep_their_text() {
        assert_eq!(
            kinds("@1994-01-31"),
            vec![TokenKind::Temporal("1994-01-31".into())]
        );
        // The lexer checks the shape only; the calendar is the compiler's business.
        assert_eq!(
            kinds("@1994-13-45"),
            vec![TokenKind::Temporal("1994-13-45".into())]
        );
        assert_eq!(
            kinds("@1994-01-31T08:30:00.25 @23:59:59"),
            vec![
                TokenKind::Temporal("1994-01-31T08:30:00.25".into()),
                TokenKind::Temporal("23:59:59".into())
            ]
        );
    }

    #[test]
    fn malformed_timestamps_and_times() {
        for (text, kind) in [
            ("@1994-01-31T8:30:00", "timestamp"),
            ("@1994-01-31T08:30", "timestamp"),
            ("@1994-01-31T08:30:00.1234567", "timestamp"),
            ("@8:30:00", "time"),
            ("@08:30:00.", "time"),
        ] {
            let error = single_error(&format!("d == {text} "));
            assert_eq!(error.message, format!("malformed {kind} literal `{text}`"));
        }
    }

    #[test]
    fn comments_and_whitespace_are_skipped() {
        let tokens =
            source_to_tokens("# heading\nfrom t # trailing \"not a string\"\n\t| take 1 #")
                .unwrap_or_default();
        let lexed: Vec<_> = tokens.iter().map(|t| t.kind.clone()).collect();
        assert_eq!(
            lexed,
            vec![
                TokenKind::From,
                TokenKind::Ident("t".into()),
                TokenKind::Pipe,
                TokenKind::Take,
                TokenKind::Int(1)
            ]
        );
        assert_eq!(tokens[0].span, Span::new(10, 14));
        // `#` inside a string is text, not a comment.
        assert_eq!(
            kinds("\"a # b\" # comment"),
            vec![TokenKind::Str("a # b".into())]
        );
    }

    #[test]
    fn spans_are_byte_ranges() {
        let tokens = source_to_tokens("from lineorder | take 25").unwrap_or_default();
        let spans: Vec<_> = tokens.iter().map(|t| t.span).collect();
        assert_eq!(
            spans,
            vec![
                Span::new(0, 4),
                Span::new(5, 14),
                Span::new(15, 16),
                Span::new(17, 21),
                Span::new(22, 24)
            ]
        );
    }

    #[test]
    fn invalid_characters_are_reported_once_per_run() {
        let error = single_error("from t | where a $$ b");
        assert_eq!(error.message, "invalid characters `$$`");
        assert_eq!(error.span, Span::new(17, 19));

        let errors = errors("a ; b ' c");
        assert_eq!(errors.len(), 2);
        assert_eq!(
            errors[0].hints,
            vec!["items need no separator: remove the `;`"]
        );
        assert!(errors[1].hints[0].contains("double quotes"));

        // A multi-byte character is one character, spanned whole.
        let error = single_error("a é b");
        assert_eq!(error.message, "invalid character `é`");
        assert_eq!(error.span, Span::new(2, 4));
    }

    #[test]
    fn unterminated_strings_stop_at_the_line_end() {
        let error = single_error("where a == \"AMERICA\nfrom t");
        assert_eq!(error.message, "unterminated string");
        assert_eq!(error.span, Span::new(11, 19));
        let error = single_error("\"abc\\");
        assert_eq!(error.message, "unterminated string");
        assert_eq!(error.span, Span::new(0, 5));
        let error = single_error("\"abc\\\"");
        assert_eq!(error.message, "unterminated string");
    }

    #[test]
    fn unknown_escapes_point_at_the_escape() {
        let error = single_error(r#"x == "a\qb""#);
        assert_eq!(error.message, "unknown escape `\\q`");
        assert_eq!(error.span, Span::new(7, 9));
    }

    #[test]
    fn out_of_range_numbers() {
        let error = single_error("take 9223372036854775808");
        assert_eq!(error.message, "integer literal out of range");
        assert_eq!(error.span, Span::new(5, 24));
        assert_eq!(single_error("1e999").message, "float literal out of range");
    }

    #[test]
    fn malformed_numbers() {
        for (source, text) in [
            ("12abc", "12abc"),
            ("x + 1e", "1e"),
            ("0x1f", "0x1f"),
            ("1.5e", "1.5e"),
        ] {
            assert_eq!(
                single_error(source).message,
                format!("malformed number `{text}`")
            );
        }
    }

    #[test]
    fn malformed_dates() {
        for text in [
            "@94-01-01",
            "@1994-1-1",
            "@1994/01/01",
            "@",
            "@1994-01-01x",
            "@abcd-ef-gh",
        ] {
            let error = single_error(&format!("d == {text} "));
            assert_eq!(
                error.message,
                format!(
                    "malformed date literal `{}`",
                    text.split('/').next().unwrap_or("")
                )
            );
            assert_eq!(error.label, "expected `@yyyy-mm-dd`, e.g. `@1994-01-31`");
        }
    }

    #[test]
    fn nesting_is_limited() {
        let ok = format!("{}x{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert!(source_to_tokens(&ok).is_ok());
        // Depth counts open parentheses, not the total.
        let siblings = "(x)".repeat(1000);
        assert!(source_to_tokens(&siblings).is_ok());

        let deep = format!("{}x{}", "(".repeat(10_000), ")".repeat(10_000));
        let error = single_error(&deep);
        assert_eq!(error.message, "parentheses nested more than 128 deep");
        assert_eq!(error.span, Span::new(MAX_NESTING, MAX_NESTING + 1));
        assert!(error.hints[0].contains("overflow"));
    }

    #[test]
    fn emit_tokens_listing() {
        let source = "from lineorder | where s == \"MFGR#12\" and d < @1994-01-01 | take 25 # x\n| derive f = 1.5";
        let tokens = source_to_tokens(source).unwrap_or_default();
        let listing = tokens_to_string(&tokens, source);
        let expected = "  0..4    from
  5..14   ident lineorder
  15..16  |
  17..22  where
  23..24  ident s
  25..27  ==
  28..37  str \"MFGR#12\"
  38..41  and
  42..43  ident d
  44..45  <
  46..57  date 1994-01-01
  58..59  |
  60..64  take
  65..67  int 25
  72..73  |
  74..80  derive
  81..82  ident f
  83..84  =
  85..88  float 1.5
";
        assert_eq!(listing, expected);
    }
}
