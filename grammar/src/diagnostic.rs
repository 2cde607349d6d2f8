//! Errors as data: a `Diagnostic` is a kind, a message, a primary span, secondary labels and
//! hints. Every stage of Tessera reports user errors this way; `render` is the one place where
//! they become text (through ariadne).

use std::fmt;

use ariadne::{Color, Config, Label, Report, ReportKind, Source};

use crate::span::Span;

/// What kind of problem a diagnostic reports. `Internal` is a bug in Tessera, never the
/// user's fault, and says so when rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiagnosticKind {
    /// The script is not well formed: bad characters, unterminated strings, unexpected tokens.
    Syntax,
    /// A name does not resolve, or resolves ambiguously, or is defined twice.
    Name,
    /// Types do not fit together.
    Type,
    /// The script is well typed but asks for something Tessera cannot do (yet).
    Unsupported,
    /// The data the script reads cannot be used (unreadable file, missing column).
    Data,
    /// An invariant of Tessera itself broke.
    Internal,
}

impl DiagnosticKind {
    pub fn title(self) -> &'static str {
        match self {
            DiagnosticKind::Syntax => "syntax error",
            DiagnosticKind::Name => "name error",
            DiagnosticKind::Type => "type error",
            DiagnosticKind::Unsupported => "unsupported",
            DiagnosticKind::Data => "data error",
            DiagnosticKind::Internal => "internal error (this is a bug in Tessera)",
        }
    }
}

/// A secondary span with a note, shown beside the primary one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanLabel {
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: DiagnosticKind,
    pub message: String,
    pub span: Span,
    /// What to say at the primary span; the message is used when empty.
    pub label: String,
    pub labels: Vec<SpanLabel>,
    pub hints: Vec<String>,
}

impl Diagnostic {
    pub fn new(kind: DiagnosticKind, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            kind,
            message: message.into(),
            span,
            label: String::new(),
            labels: Vec::new(),
            hints: Vec::new(),
        }
    }

    pub fn syntax(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(DiagnosticKind::Syntax, span, message)
    }

    pub fn name(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(DiagnosticKind::Name, span, message)
    }

    pub fn type_error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(DiagnosticKind::Type, span, message)
    }

    pub fn unsupported(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(DiagnosticKind::Unsupported, span, message)
    }

    pub fn internal(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(DiagnosticKind::Internal, span, message)
    }

    /// The text shown under the primary span.
    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(SpanLabel {
            span,
            message: message.into(),
        });
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hints.push(hint.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.title(), self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// Renders diagnostics against the script they refer to. `color` is off for snapshots and
/// when the output is not a terminal.
pub fn render(diagnostics: &[Diagnostic], source_name: &str, source: &str, color: bool) -> String {
    let mut out = Vec::new();
    for diagnostic in diagnostics.iter().take(MAX_RENDERED) {
        render_one(diagnostic, source_name, source, color, &mut out);
    }
    if diagnostics.len() > MAX_RENDERED {
        let more = diagnostics.len() - MAX_RENDERED;
        out.extend_from_slice(
            format!(
                "{more} more error{} not shown\n",
                if more == 1 { "" } else { "s" }
            )
            .as_bytes(),
        );
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reports rendered before the rest are only counted: each shows its source line, so a script
/// with thousands of errors on one long line would otherwise print its square.
pub const MAX_RENDERED: usize = 20;

fn render_one(d: &Diagnostic, name: &str, source: &str, color: bool, out: &mut Vec<u8>) {
    let clamp = |span: Span| {
        let end = (span.end as usize).min(source.len());
        let start = (span.start as usize).min(end);
        (name, start..end)
    };
    let primary_color = if d.kind == DiagnosticKind::Internal {
        Color::Magenta
    } else {
        Color::Red
    };
    let label_text = if d.label.is_empty() {
        d.message.clone()
    } else {
        d.label.clone()
    };
    let mut report = Report::build(ReportKind::Error, clamp(d.span))
        .with_config(Config::default().with_color(color))
        .with_message(format!("{}: {}", d.kind.title(), d.message))
        .with_label(
            Label::new(clamp(d.span))
                .with_message(label_text)
                .with_color(primary_color),
        );
    for secondary in &d.labels {
        report = report.with_label(
            Label::new(clamp(secondary.span))
                .with_message(&secondary.message)
                .with_color(Color::Blue),
        );
    }
    for hint in &d.hints {
        report = report.with_help(hint);
    }
    // Writing into a Vec cannot fail for I/O reasons; a failure here would be an ariadne bug,
    // and the message above still reaches the user through the fallback below.
    let mut rendered = Vec::new();
    if report
        .finish()
        .write((name, Source::from(source)), &mut rendered)
        .is_err()
    {
        out.extend_from_slice(format!("error: {}\n", d).as_bytes());
        return;
    }
    // ariadne titles a report `Error:`; Tessera writes `error:` like rustc and cargo, and like
    // its own one-line errors, so every refusal's first line starts the same way. (A custom
    // report kind would do it but colors its title even when color is off.)
    if let Some(at) = find(&rendered, b"Error:").filter(|at| !rendered[..*at].contains(&b'\n')) {
        rendered[at] = b'e';
    }
    out.extend_from_slice(&rendered);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Suggests the candidate closest to `wanted` by edit distance, if one is close enough to be a
/// plausible typo.
pub fn closest_name<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (wanted.chars().count() / 3).max(1) + 1;
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(wanted, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over characters, case-insensitive.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["lo_revenue", "lo_quantity", "lo_discount"];
        assert_eq!(closest_name("lo_revnue", names), Some("lo_revenue"));
        assert_eq!(closest_name("LO_QUANTITY", names), Some("lo_quantity"));
        assert_eq!(closest_name("price", names), None);
    }

    #[test]
    fn renders_without_color() {
        let source = "from lineorder | where lo_revnue > 1";
        let d = Diagnostic::name(Span::new(23, 32), "unknown column `lo_revnue`")
            .with_hint("did you mean `lo_revenue`?");
        let text = render(&[d], "q.tq", source, false);
        assert!(text.contains("unknown column `lo_revnue`"));
        assert!(text.contains("did you mean `lo_revenue`?"));
        assert!(!text.contains('\u{1b}'));
    }
}
