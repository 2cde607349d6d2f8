//! Conformance files: a script, the SQL that asks the same question, and after `----` the
//! expected result as CSV, written by `tests/oracle.py` from DuckDB's answer. This module reads
//! them and compares a result with the expectation.

use std::path::{Path, PathBuf};

/// One conformance file.
pub struct Case {
    /// `ssb 0.01` and the like: which generated data the expectation was computed on.
    pub data: String,
    pub script: Script,
    /// Whether row order matters (`order: any` says it does not).
    pub ordered: bool,
    pub expected: Vec<Vec<String>>,
}

pub enum Script {
    File(PathBuf),
    Inline(String),
}

impl Case {
    pub fn read(path: &Path) -> Result<Case, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let (head, expected) = match text.split_once("\n----\n") {
            Some((head, rows)) => (head, rows),
            None => {
                return Err(format!(
                    "{}: no `----` line before the expected result",
                    path.display()
                ))
            }
        };
        let mut data = None;
        let mut script = None;
        let mut inline: Option<String> = None;
        let mut in_sql = false;
        let mut ordered = true;
        for line in head.lines() {
            if line.starts_with('#') {
                continue;
            }
            if let Some(rest) = line.strip_prefix("sql:") {
                in_sql = true;
                let _ = rest;
                continue;
            }
            if in_sql {
                continue;
            }
            if let Some(body) = inline.as_mut() {
                body.push_str(line);
                body.push('\n');
            } else if let Some(rest) = line.strip_prefix("data:") {
                let rest = rest.trim();
                data = Some(match rest.strip_prefix("folder ") {
                    // A checked-in data folder, found like a script file.
                    Some(folder) => {
                        let found = resolve(path, folder.trim(), Path::is_dir)?;
                        format!("folder {}", found.display())
                    }
                    None => rest.to_string(),
                });
            } else if let Some(rest) = line.strip_prefix("order:") {
                ordered = rest.trim() != "any";
            } else if let Some(rest) = line.strip_prefix("script:") {
                let rest = rest.trim();
                if rest.is_empty() {
                    inline = Some(String::new());
                } else {
                    script = Some(Script::File(resolve(path, rest, Path::is_file)?));
                }
            }
        }
        let script = match (script, inline) {
            (Some(s), _) => s,
            (None, Some(text)) => Script::Inline(text),
            (None, None) => return Err(format!("{}: no `script:`", path.display())),
        };
        Ok(Case {
            data: data.ok_or_else(|| format!("{}: no `data:` line", path.display()))?,
            script,
            ordered,
            expected: parse_csv(expected),
        })
    }
}

/// A script file or data folder named by a test file: a path relative to the test file's folder
/// or any folder above it, or an absolute one.
fn resolve(test: &Path, named: &str, exists: fn(&Path) -> bool) -> Result<PathBuf, String> {
    let candidate = Path::new(named);
    if candidate.is_absolute() {
        return Ok(candidate.to_path_buf());
    }
    let start = test.parent().unwrap_or(Path::new("."));
    for folder in start.ancestors() {
        let path = folder.join(candidate);
        if exists(&path) {
            return Ok(path);
        }
    }
    Err(format!(
        "{}: {named} not found next to it or above",
        test.display()
    ))
}

/// Rows of fields (the header first); quoted fields may hold commas, quotes and newlines.
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            ('\r', false) => {}
            (c, _) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// Compares rows (header first). Numbers compare with a relative tolerance of 1e-6, since
/// floating-point sums on a GPU add in a different order than DuckDB does.
pub fn compare(
    expected: &[Vec<String>],
    actual: &[Vec<String>],
    ordered: bool,
) -> Result<(), String> {
    let (Some(expected_header), Some(actual_header)) = (expected.first(), actual.first()) else {
        return Err("a result without a header".into());
    };
    if expected_header != actual_header {
        return Err(format!(
            "columns differ: expected {}, got {}",
            expected_header.join(","),
            actual_header.join(",")
        ));
    }
    let mut expected_rows: Vec<&Vec<String>> = expected[1..].iter().collect();
    let mut actual_rows: Vec<&Vec<String>> = actual[1..].iter().collect();
    if expected_rows.len() != actual_rows.len() {
        return Err(format!(
            "expected {} rows, got {}",
            expected_rows.len(),
            actual_rows.len()
        ));
    }
    if !ordered {
        expected_rows.sort_by(|a, b| compare_rows(a, b));
        actual_rows.sort_by(|a, b| compare_rows(a, b));
    }
    for (i, (e, a)) in expected_rows.iter().zip(&actual_rows).enumerate() {
        let same = e.len() == a.len() && e.iter().zip(a.iter()).all(|(x, y)| same_value(x, y));
        if !same {
            return Err(format!(
                "row {}: expected {}, got {}",
                i + 1,
                e.join(","),
                a.join(",")
            ));
        }
    }
    Ok(())
}

/// The order rows are matched in when their order does not matter: numbers by value (so `nan`
/// and `NaN`, or `26` and `26.0`, meet), in floating point's total order, before text.
fn compare_rows(a: &[String], b: &[String]) -> std::cmp::Ordering {
    let key = |field: &String| match field.parse::<f64>() {
        // One NaN for every spelling and sign of it.
        Ok(number) if number.is_nan() => Ok(f64::NAN),
        Ok(number) => Ok(number),
        Err(_) => Err(field.clone()),
    };
    let mut by_field = a.iter().zip(b).map(|(x, y)| match (key(x), key(y)) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(x), Err(y)) => x.cmp(&y),
    });
    by_field
        .find(|order| order.is_ne())
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

fn same_value(expected: &str, actual: &str) -> bool {
    if expected == actual {
        return true;
    }
    // A number written with more significant digits than a float's shortest form has (17) is an
    // exact decimal: equal only digit for digit.
    if exact_digits(expected) || exact_digits(actual) {
        return false;
    }
    match (expected.parse::<f64>(), actual.parse::<f64>()) {
        (Ok(x), Ok(y)) => {
            if x.is_nan() && y.is_nan() {
                return true;
            }
            (x - y).abs() <= 1e-9 + 1e-6 * x.abs().max(y.abs())
        }
        _ => false,
    }
}

/// Whether `text` is a plain number (no exponent) of more than 17 significant digits.
fn exact_digits(text: &str) -> bool {
    let digits = text.trim_start_matches('-');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return false;
    }
    let significant = digits
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&b| b == b'0')
        .count();
    significant > 17
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_beyond_a_float_compare_digit_for_digit() {
        assert!(same_value(
            "123456789012345678901234567890",
            "123456789012345678901234567890"
        ));
        assert!(!same_value(
            "123456789012345678901234567890",
            "123456789012345678901234567891"
        ));
        assert!(!same_value(
            "1.000000000000000000001",
            "1.000000000000000000002"
        ));
        // Floats, however written, keep their tolerance.
        assert!(same_value("0.30000000000000004", "0.3"));
        assert!(same_value("1.2345678901234568e29", "1.2345678901234567e29"));
    }

    #[test]
    fn parses_quoted_fields() {
        let rows = parse_csv("a,b\n\"x, y\",\"say \"\"hi\"\"\"\n,3\n");
        assert_eq!(rows[1], vec!["x, y", "say \"hi\""]);
        assert_eq!(rows[2], vec!["", "3"]);
    }

    #[test]
    fn compares_numbers_with_tolerance_and_order_when_asked() {
        let expected = parse_csv("v,n\n0.1,1\n0.2,2\n");
        let close = parse_csv("v,n\n0.10000000001,1\n0.2,2\n");
        let swapped = parse_csv("v,n\n0.2,2\n0.1,1\n");
        let wrong = parse_csv("v,n\n0.1,1\n0.3,2\n");
        assert!(compare(&expected, &close, true).is_ok());
        assert!(compare(&expected, &swapped, true).is_err());
        assert!(compare(&expected, &swapped, false).is_ok());
        assert!(compare(&expected, &wrong, false).is_err());
        assert!(compare(&expected, &parse_csv("v,m\n0.1,1\n0.2,2\n"), true).is_err());
    }

    #[test]
    fn matches_unordered_rows_by_value_whatever_the_spelling_of_numbers() {
        // DuckDB's `nan` and `inf` sort apart from Tessera's `NaN` as text.
        let expected = parse_csv("v\ninf\nnan\n2\n-inf\n");
        let actual = parse_csv("v\nNaN\n-inf\ninf\n2.0\n");
        assert!(compare(&expected, &actual, false).is_ok());
        let different = parse_csv("v\nNaN\n-inf\ninf\n3.0\n");
        assert!(compare(&expected, &different, false).is_err());
    }
}
