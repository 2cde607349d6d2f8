//! Parse errors as diagnostics: lalrpop's list of expected terminals becomes a short phrase in
//! words ("expected an expression", "expected one of `|`, `from`, `let`, `table`"), and common
//! mistakes get a hint.

use lalrpop_util::ParseError;

use crate::diagnostic::{closest_name, Diagnostic};
use crate::lexer::TokenKind;
use crate::span::Span;

/// Terminals that can start an expression; when most of them are expected, say "an expression".
const EXPRESSION_START: &[&str] = &[
    "IDENT", "INT", "FLOAT", "STR", "TEMPORAL", "true", "false", "null", "(", "-", "not", "case",
];

/// Terminals that can continue an expression; when many are expected, say "an operator".
const OPERATORS: &[&str] = &[
    "or", "and", "not", "==", "!=", "<", "<=", ">", ">=", "between", "in", "like", "is", "+", "-",
    "*", "/", "%", "as", ".", "(",
];

const STAGES: &[&str] = &[
    "where",
    "select",
    "derive",
    "join",
    "group",
    "aggregate",
    "sort",
    "take",
    "distinct",
    "union",
    "intersect",
    "except",
    "product",
];

const ITEM_STARTS: &[&str] = &["from", "let", "table"];

const COMPARISONS: &[&str] = &["==", "!=", "<", "<=", ">", ">="];

/// The most alternatives listed in one label; more are cut short with `...`.
const MAX_LISTED: usize = 6;

pub fn parse_error_to_diagnostic(
    error: ParseError<usize, TokenKind, Diagnostic>,
    source: &str,
) -> Diagnostic {
    match error {
        ParseError::User { error } => error,
        ParseError::UnrecognizedToken {
            token: (start, kind, end),
            expected,
        } => unexpected_token(
            Span::new(start, end),
            &kind,
            &Expected::new(&expected),
            source,
        ),
        ParseError::UnrecognizedEof { location, expected } => {
            let expected = Expected::new(&expected);
            let diagnostic =
                Diagnostic::syntax(Span::new(location, location), "unexpected end of script")
                    .with_label(expected.describe());
            if expected.contains(")") {
                diagnostic.with_hint("a `(` is not closed")
            } else {
                diagnostic
            }
        }
        ParseError::ExtraToken {
            token: (start, _, end),
        } => {
            let span = Span::new(start, end);
            Diagnostic::syntax(span, format!("unexpected {}", quoted_source(span, source)))
                .with_label("expected the end of the script")
        }
        ParseError::InvalidToken { location } => {
            Diagnostic::syntax(Span::new(location, location), "invalid token")
                .with_label("not part of any token")
        }
    }
}

fn unexpected_token(span: Span, kind: &TokenKind, expected: &Expected, source: &str) -> Diagnostic {
    let diagnostic =
        Diagnostic::syntax(span, format!("unexpected {}", quoted_source(span, source)))
            .with_label(expected.describe());
    match hint(kind, expected) {
        Some(hint) => diagnostic.with_hint(hint),
        None => diagnostic,
    }
}

/// A hint for the mistakes that are easy to recognize from the token and what was expected.
fn hint(kind: &TokenKind, expected: &Expected) -> Option<String> {
    let text = kind.fixed_text();
    match kind {
        TokenKind::Assign if expected.contains("==") => return Some("use `==` to compare".into()),
        TokenKind::EqEq if expected.contains("=") => {
            return Some("use `=` to name a column".into())
        }
        TokenKind::RParen if !expected.contains(")") => {
            return Some("this `)` has no matching `(`".into())
        }
        TokenKind::Pipe if expected.wants_stage() => {
            return Some("`|` separates stages; logical or is written `or`".into())
        }
        TokenKind::All if !expected.contains("all") => {
            return Some("`all` follows `union`, `intersect` or `except`".into())
        }
        _ => {}
    }
    if expected.is_only("when") {
        return Some("`case` takes conditions: `case when x == 1 then ... end`".into());
    }
    if expected.is_only("from") {
        return Some("`let` binds a pipeline: `let name = from table | ...`".into());
    }
    if text.is_some_and(|text| COMPARISONS.contains(&text))
        && !expected.contains("==")
        && expected.contains("and")
    {
        return Some("comparisons do not chain: write `a < b and b < c`".into());
    }
    if kind.is_keyword() && expected.contains("IDENT") {
        return Some(format!(
            "`{}` is a reserved word and cannot be used as a name",
            text.unwrap_or("")
        ));
    }
    let starts_operand = matches!(
        kind,
        TokenKind::Ident(_)
            | TokenKind::Int(_)
            | TokenKind::Float(_)
            | TokenKind::Str(_)
            | TokenKind::Temporal(_)
    );
    if starts_operand && expected.contains(",") {
        return Some("a `,` may be missing before this".into());
    }
    if let TokenKind::Ident(word) = kind {
        if expected.wants_stage() {
            return Some(match closest_name(word, STAGES.iter().copied()) {
                Some(stage) => format!("did you mean `{stage}`?"),
                None => format!("the stages are {}", list_in_backticks(STAGES)),
            });
        }
        let at_item_start =
            ITEM_STARTS.iter().all(|start| expected.contains(start)) && !expected.contains("|");
        if at_item_start {
            return Some(match closest_name(word, ITEM_STARTS.iter().copied()) {
                Some(start) => format!("did you mean `{start}`?"),
                None => "a query starts with `from`, as in `from lineorder | ...`".into(),
            });
        }
    }
    None
}

/// The terminals lalrpop says could come next, by their grammar names (`"from"`, `IDENT`).
struct Expected {
    names: Vec<String>,
}

impl Expected {
    fn new(raw: &[String]) -> Expected {
        let mut expected = Expected {
            names: raw
                .iter()
                .map(|name| name.trim_matches('"').to_string())
                .collect(),
        };
        // After a complete operand a name can only be an interval's unit (`90 days`), which
        // is not what a user who left something out is missing.
        if expected.wants_operator() {
            expected.names.retain(|name| name != "IDENT");
        }
        expected
    }

    fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    fn is_only(&self, name: &str) -> bool {
        matches!(self.names.as_slice(), [only] if only == name)
    }

    fn count_of(&self, group: &[&str]) -> usize {
        group.iter().filter(|name| self.contains(name)).count()
    }

    fn wants_expression(&self) -> bool {
        self.contains("INT") && self.contains("STR") && self.contains("(")
    }

    fn wants_operator(&self) -> bool {
        self.count_of(OPERATORS) >= 5
    }

    fn wants_stage(&self) -> bool {
        self.count_of(STAGES) >= 5
    }

    /// "expected ..." in words, with the usual groups summarized.
    fn describe(&self) -> String {
        let mut phrases: Vec<String> = Vec::new();
        let mut rest: Vec<&str> = self.names.iter().map(String::as_str).collect();

        if self.wants_expression() {
            phrases.push("an expression".into());
            remove_group(&mut rest, EXPRESSION_START);
        }
        if self.wants_stage() {
            phrases.push("a stage (`where`, `select`, `join`, `group`, ...)".into());
            remove_group(&mut rest, STAGES);
        }
        let operator = self.wants_operator();
        if operator {
            remove_group(&mut rest, OPERATORS);
        }
        let item_starts: Vec<&str> = ITEM_STARTS
            .iter()
            .copied()
            .filter(|name| rest.contains(name))
            .collect();
        remove_group(&mut rest, ITEM_STARTS);

        // Closing and separating punctuation is usually what the user forgot, so it comes first.
        let closing = [")", "}", ",", "|"];
        rest.sort_by_key(|name| !closing.contains(name));
        phrases.extend(rest.iter().map(|name| terminal_in_words(name)));
        if operator {
            phrases.push("an operator".into());
        }
        phrases.extend(item_starts.iter().map(|name| terminal_in_words(name)));

        format!("expected {}", join_alternatives(&phrases))
    }
}

fn remove_group(names: &mut Vec<&str>, group: &[&str]) {
    names.retain(|name| !group.contains(name));
}

fn terminal_in_words(name: &str) -> String {
    match name {
        "IDENT" => "a name".into(),
        "INT" => "an integer".into(),
        "FLOAT" => "a float".into(),
        "STR" => "a string".into(),
        "TEMPORAL" => "a date or time".into(),
        fixed => format!("`{fixed}`"),
    }
}

fn join_alternatives(phrases: &[String]) -> String {
    match phrases {
        [] => "nothing more".into(),
        [one] => one.clone(),
        [first, second] => format!("{first} or {second}"),
        many if many.len() > MAX_LISTED => format!("one of {}, ...", many[..MAX_LISTED].join(", ")),
        many => format!("one of {}", many.join(", ")),
    }
}

fn list_in_backticks(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The token's source text in backticks, shortened if long, for "unexpected ..." messages.
fn quoted_source(span: Span, source: &str) -> String {
    const MAX_CHARS: usize = 30;
    let text = source.get(span.range()).unwrap_or("");
    if text.chars().count() > MAX_CHARS {
        let short: String = text.chars().take(MAX_CHARS - 3).collect();
        format!("`{short}...`")
    } else {
        format!("`{text}`")
    }
}
