//! CSV fields, quoted by `csv-core` as RFC 4180 asks (a field holding the delimiter, a quote or
//! a line break is quoted, its quotes doubled), with one rule of our own: an empty string is
//! written `""`, so that an empty unquoted field always means null, as in DuckDB's CSV.

use csv_core::{WriteResult, Writer};

/// `text` as a CSV field.
pub(super) fn field(text: &str) -> String {
    if text.is_empty() {
        return "\"\"".to_string();
    }
    let writer = Writer::new();
    if !writer.should_quote(text.as_bytes()) {
        return text.to_string();
    }
    // Doubling every quote at most doubles the text.
    let mut quoted = vec![0; 2 * text.len()];
    let (result, _, written) = csv_core::quote(text.as_bytes(), &mut quoted, b'"', b'\\', true);
    debug_assert!(matches!(result, WriteResult::InputEmpty));
    quoted.truncate(written);
    format!("\"{}\"", String::from_utf8_lossy(&quoted))
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field(""), "\"\"");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }
}
