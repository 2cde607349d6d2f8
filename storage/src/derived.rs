//! Derived columns: a function of a table's string column (`substring(c_phone, 1, 2)`,
//! `upper(s)`, `lower(s)`, `length(s)`), computed once per dictionary entry rather than per row.
//! The column's name is its definition, so a catalog can produce one by name alone (for a
//! program compiled in another process, too). A string function's column has a dictionary of
//! its own, the function's distinct results, sorted, and each row's code is its base code's
//! result's; `length` gives each base code its string's length.
//!
//! The strings a `case` produces have one dictionary, named under [`LITERAL_TABLE`] by what it
//! holds: its string literals ([`literal_strings_name`]), and when columns are among its results,
//! those columns' strings too ([`case_strings_name`]); each such column then reads as its
//! recoding into that dictionary ([`StringFunction::Recode`]), the same strings under its codes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::column::{Column, ColumnData, Dictionary};
use crate::types::{DataType, Value};
use crate::values::Values;

/// The table under which the string literals a `case` produces have their dictionary: no file
/// names a table so.
pub const LITERAL_TABLE: &str = "";

/// The name of the dictionary of `strings` (under [`LITERAL_TABLE`]): the distinct strings,
/// sorted, as a JSON list (`strings["big","small"]`), which [`literal_strings`] reads back.
pub fn literal_strings_name(strings: &[&str]) -> String {
    let mut sorted: Vec<&str> = strings.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    format!(
        "strings{}",
        serde_json::to_string(&sorted).unwrap_or_else(|_| "[]".into())
    )
}

/// The strings a name made by [`literal_strings_name`] lists, as their dictionary.
pub fn literal_strings(name: &str) -> Option<Dictionary> {
    let list = name.strip_prefix("strings")?;
    let strings: Vec<String> = serde_json::from_str(list).ok()?;
    Some(Dictionary::from_unsorted(strings))
}

/// The strings of a `case` whose results include string columns: those columns' strings
/// (each named as `(table, column)`) and the literals'.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CaseStrings {
    pub columns: Vec<(String, String)>,
    pub literals: Vec<String>,
}

/// The name of the dictionary of a `case`'s strings (under [`LITERAL_TABLE`]), which
/// [`case_strings`] reads back: the columns and literals, each sorted and distinct, as JSON.
pub fn case_strings_name(columns: &[(String, String)], literals: &[&str]) -> String {
    let mut columns = columns.to_vec();
    columns.sort_unstable();
    columns.dedup();
    let mut literals: Vec<String> = literals.iter().map(|s| s.to_string()).collect();
    literals.sort_unstable();
    literals.dedup();
    let strings = CaseStrings { columns, literals };
    format!(
        "case{}",
        serde_json::to_string(&strings).unwrap_or_else(|_| "{}".into())
    )
}

/// What a name made by [`case_strings_name`] holds.
pub fn case_strings(name: &str) -> Option<CaseStrings> {
    serde_json::from_str(name.strip_prefix("case")?).ok()
}

/// Whether `name` names a dictionary of a `case`'s strings under [`LITERAL_TABLE`].
pub fn is_made_strings_name(name: &str) -> bool {
    literal_strings(name).is_some() || case_strings(name).is_some()
}

/// A string function applied to each string of a column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StringFunction {
    /// SQL's `substring(s, start, length)` as DuckDB defines it, in characters: `start` counts
    /// from 1, or from the end when negative; a negative length takes the characters before
    /// `start`; no length takes the rest.
    Substring {
        start: i64,
        length: Option<i64>,
    },
    Upper,
    Lower,
    /// The number of characters: an integer, not a string.
    Length,
    /// The string between `prefix` and `suffix` (SQL's `concat` with literals around a string).
    Concat {
        prefix: String,
        suffix: String,
    },
    /// The same strings, coded in the dictionary of a `case`'s strings named `into`
    /// ([`case_strings_name`]), which holds them all.
    Recode {
        into: String,
    },
}

/// A string column computed from the string column `base` of the same table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedString {
    pub base: String,
    pub function: StringFunction,
}

impl DerivedString {
    /// The column's name, which [`DerivedString::parse`] reads back.
    pub fn name(&self) -> String {
        let base = &self.base;
        match &self.function {
            StringFunction::Substring {
                start,
                length: Some(length),
            } => format!("substring({base}, {start}, {length})"),
            StringFunction::Substring {
                start,
                length: None,
            } => format!("substring({base}, {start})"),
            StringFunction::Upper => format!("upper({base})"),
            StringFunction::Lower => format!("lower({base})"),
            StringFunction::Length => format!("length({base})"),
            StringFunction::Recode { into } => format!(
                "recode{}",
                serde_json::to_string(&(base, into)).unwrap_or_default()
            ),
            StringFunction::Concat { prefix, suffix } => format!(
                "concat{}",
                serde_json::to_string(&(base, prefix, suffix)).unwrap_or_default()
            ),
        }
    }

    /// The derived column a name stands for, if it is one.
    pub fn parse(name: &str) -> Option<DerivedString> {
        if let Some(json) = name.strip_prefix("concat") {
            let (base, prefix, suffix): (String, String, String) =
                serde_json::from_str(json).ok()?;
            return (!base.is_empty()).then_some(DerivedString {
                base,
                function: StringFunction::Concat { prefix, suffix },
            });
        }
        if let Some(json) = name.strip_prefix("recode") {
            let (base, into): (String, String) = serde_json::from_str(json).ok()?;
            return case_strings(&into).map(|_| DerivedString {
                base,
                function: StringFunction::Recode { into },
            });
        }
        let (function, rest) = name.split_once('(')?;
        let inner = rest.strip_suffix(')')?;
        let derived = |base: &str, function| {
            (!base.is_empty()).then(|| DerivedString {
                base: base.to_string(),
                function,
            })
        };
        match function {
            "upper" => derived(inner, StringFunction::Upper),
            "length" => derived(inner, StringFunction::Length),
            "lower" => derived(inner, StringFunction::Lower),
            "substring" => {
                // The base comes first and may itself hold ", ": the numbers are read from the end.
                let parts: Vec<&str> = inner.rsplitn(3, ", ").collect();
                let number = |text: &str| text.parse::<i64>().ok();
                match parts.as_slice() {
                    [length, start, base] if number(start).is_some() => derived(
                        base,
                        StringFunction::Substring {
                            start: number(start)?,
                            length: Some(number(length)?),
                        },
                    ),
                    [start, base] | [start, .., base] => derived(
                        base,
                        StringFunction::Substring {
                            start: number(start)?,
                            length: None,
                        },
                    ),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The function's result for one string: a piece of it for `substring`, so that most calls
    /// allocate nothing.
    pub fn apply<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match &self.function {
            StringFunction::Recode { .. } => Cow::Borrowed(text),
            StringFunction::Upper => Cow::Owned(text.to_uppercase()),
            StringFunction::Lower => Cow::Owned(text.to_lowercase()),
            StringFunction::Length => Cow::Owned(length(text).to_string()),
            StringFunction::Concat { prefix, suffix } => {
                Cow::Owned(format!("{prefix}{text}{suffix}"))
            }
            StringFunction::Substring { start, length } => {
                Cow::Borrowed(substring(text, *start, *length))
            }
        }
    }

    /// The type of the column's values: `str`, or `i64` for `length`.
    pub fn result_type(&self) -> DataType {
        match self.function {
            StringFunction::Length => DataType::I64,
            _ => DataType::Str,
        }
    }

    /// The function's value for one string, as a query's result holds it.
    pub fn value(&self, text: &str) -> Value {
        match self.function {
            StringFunction::Length => Value::Int(length(text)),
            _ => Value::Str(self.apply(text).into()),
        }
    }

    /// For each entry of `dictionary`, the code of its result in the dictionary of the
    /// distinct results (sorted), returned beside it; for `length`, the entry's length (and no
    /// dictionary); for a recoding, the entry's code in `target`, the dictionary it names
    /// (`None` when that is not given or lacks an entry). Each distinct result is sorted once,
    /// not once per entry: 1.5 million phone numbers have 25 distinct prefixes.
    pub fn recode(
        &self,
        dictionary: &Dictionary,
        target: Option<&Arc<Dictionary>>,
    ) -> Option<(Vec<i32>, Arc<Dictionary>)> {
        if let StringFunction::Recode { .. } = self.function {
            let target = target?;
            let codes = dictionary
                .iter()
                .map(|text| target.code_of(text))
                .collect::<Option<Vec<i32>>>()?;
            return Some((codes, Arc::clone(target)));
        }
        let (codes, dictionary) = self.recode_own(dictionary);
        Some((codes, Arc::new(dictionary)))
    }

    fn recode_own(&self, dictionary: &Dictionary) -> (Vec<i32>, Dictionary) {
        if self.function == StringFunction::Length {
            let lengths = dictionary
                .iter()
                .map(|text| i32::try_from(length(text)).unwrap_or(i32::MAX))
                .collect();
            return (lengths, Dictionary::from_sorted_distinct(Vec::new()));
        }
        let mut ids: HashMap<Cow<'_, str>, u32> = HashMap::new();
        let provisional: Vec<u32> = dictionary
            .iter()
            .map(|text| {
                let next = ids.len() as u32;
                *ids.entry(self.apply(text)).or_insert(next)
            })
            .collect();
        let mut distinct: Vec<(Cow<'_, str>, u32)> = ids.into_iter().collect();
        distinct.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut code_of = vec![0i32; distinct.len()];
        for (code, (_, id)) in distinct.iter().enumerate() {
            code_of[*id as usize] = code as i32;
        }
        let codes = provisional.iter().map(|id| code_of[*id as usize]).collect();
        let values = distinct
            .into_iter()
            .map(|(text, _)| text.into_owned())
            .collect();
        (codes, Dictionary::from_sorted_distinct(values))
    }

    /// The derived column of `base`, a string column, given its recoding (what
    /// [`DerivedString::recode`] gives for `base`'s dictionary): its codes mapped from `base`'s,
    /// its nulls `base`'s.
    pub fn compute(
        &self,
        base: &Column,
        recode: &[i32],
        derived: &Arc<Dictionary>,
    ) -> Option<Column> {
        let ColumnData::Str { codes, .. } = &base.data else {
            return None;
        };
        let validity = base.validity.as_ref().map(|valid| valid.to_vec());
        if self.function == StringFunction::Length {
            let lengths: Vec<i64> = codes
                .par_iter()
                .map(|&code| {
                    usize::try_from(code)
                        .ok()
                        .and_then(|c| recode.get(c))
                        .map_or(0, |&n| i64::from(n))
                })
                .collect();
            return Some(Column::new(
                ColumnData::I64(Values::from(lengths)),
                validity,
            ));
        }
        let codes: Vec<i32> = codes
            .par_iter()
            .map(|&code| {
                usize::try_from(code)
                    .ok()
                    .and_then(|c| recode.get(c))
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        Some(Column::new(
            ColumnData::Str {
                codes: Values::from(codes),
                dictionary: Arc::clone(derived),
            },
            validity,
        ))
    }
}

/// The number of characters of `text`, as DuckDB's `length` counts them.
fn length(text: &str) -> i64 {
    text.chars().count() as i64
}

/// `substring(text, start, length)` over characters, as DuckDB computes it.
fn substring(text: &str, start: i64, length: Option<i64>) -> &str {
    let count = text.chars().count() as i64;
    // Positions count from 1; a negative start counts back from the end (-1: the last).
    let start = if start < 0 { count + start + 1 } else { start };
    let (from, to) = match length {
        None => (start, i64::MAX),
        Some(length) if length >= 0 => (start, start.saturating_add(length)),
        Some(length) => (start.saturating_add(length), start),
    };
    let (from, to) = (from.max(1), to.min(count + 1));
    if from >= to {
        return "";
    }
    // Character positions `from..to` (from 1) as byte offsets.
    let mut offsets = text
        .char_indices()
        .map(|(at, _)| at)
        .chain([text.len()])
        .skip((from - 1) as usize);
    let start = offsets.next().unwrap_or(text.len());
    let end = offsets.nth((to - from - 1) as usize).unwrap_or(text.len());
    &text[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substrings_follow_duckdb() {
        // Each expectation is DuckDB 1.x's `substring('héllo', start, length)`.
        let cases = [
            ((1, Some(2)), "hé"),
            ((0, Some(2)), "h"),
            ((-1, Some(2)), "o"),
            ((-3, Some(2)), "ll"),
            ((2, Some(0)), ""),
            ((2, Some(-1)), "h"),
            ((4, Some(5)), "lo"),
            ((0, Some(1)), ""),
            ((-10, Some(3)), ""),
            ((3, Some(100)), "llo"),
            ((2, None), "éllo"),
            ((-1, None), "o"),
            ((0, None), "héllo"),
            ((-10, None), "héllo"),
        ];
        for ((start, length), expected) in cases {
            assert_eq!(
                substring("héllo", start, length),
                expected,
                "{start} {length:?}"
            );
        }
    }

    #[test]
    fn names_read_back() {
        for function in [
            StringFunction::Substring {
                start: 1,
                length: Some(2),
            },
            StringFunction::Substring {
                start: -3,
                length: None,
            },
            StringFunction::Upper,
            StringFunction::Lower,
            StringFunction::Length,
            StringFunction::Concat {
                prefix: "(\"".into(),
                suffix: ", ) ".into(),
            },
        ] {
            let derived = DerivedString {
                base: "c_phone".into(),
                function,
            };
            assert_eq!(DerivedString::parse(&derived.name()), Some(derived));
        }
        assert_eq!(DerivedString::parse("c_phone"), None);
        let name = literal_strings_name(&["small", "b\"ig", "small"]);
        assert_eq!(name, r#"strings["b\"ig","small"]"#);
        let read = literal_strings(&name).expect("a list of strings");
        assert_eq!(read.iter().collect::<Vec<_>>(), ["b\"ig", "small"]);
        assert!(literal_strings("strings[1]").is_none());
        assert_eq!(DerivedString::parse("substring(c_phone, x)"), None);
        assert_eq!(DerivedString::parse("upper()"), None);
        let concat = DerivedString::parse(r##"concat["s_name","#",""]"##).expect("a concat");
        assert_eq!(concat.apply("x"), "#x");
        assert_eq!(DerivedString::parse(r##"concat["","#",""]"##), None);
    }

    #[test]
    fn a_derived_column_maps_codes_through_its_own_dictionary() {
        let values: Vec<Value> = [Some("13-555"), None, Some("31-1"), Some("13-9")]
            .into_iter()
            .map(|s| s.map_or(Value::Null, |s| Value::Str(s.into())))
            .collect();
        let base = Column::from_values(DataType::Str, values.iter()).expect("a string column");
        let function = DerivedString::parse("substring(x, 1, 2)").expect("a derived name");
        let dictionary = base.data.dictionary().expect("a dictionary");
        let (codes, into) = function.recode(dictionary, None).expect("a recoding");
        let derived = function
            .compute(&base, &codes, &into)
            .expect("of a string column");
        let texts: Vec<Value> = (0..derived.len())
            .map(
                |row| match derived.validity.as_ref().is_some_and(|v| !v[row]) {
                    true => Value::Null,
                    false => derived.data.value(row),
                },
            )
            .collect();
        let text = |s: &str| Value::Str(s.into());
        assert_eq!(texts, vec![text("13"), Value::Null, text("31"), text("13")]);
        assert_eq!(derived.data.dictionary().map(|d| d.len()), Some(2));
    }

    #[test]
    fn a_case_of_columns_and_literals_has_one_dictionary_each_column_recodes_into() {
        let columns = [
            ("supplier".to_string(), "s_city".to_string()),
            ("customer".to_string(), "c_city".to_string()),
        ];
        let name = case_strings_name(&columns, &["other", "a\"b", "other"]);
        let read = case_strings(&name).expect("a case's strings");
        assert_eq!(read.columns, [columns[1].clone(), columns[0].clone()]);
        assert_eq!(read.literals, ["a\"b", "other"]);
        assert!(is_made_strings_name(&name) && !is_made_strings_name("s_city"));
        let recode = DerivedString {
            base: "substring(s_city, 1, 2)".into(),
            function: StringFunction::Recode { into: name.clone() },
        };
        assert_eq!(DerivedString::parse(&recode.name()), Some(recode.clone()));
        assert_eq!(recode.value("LIMA"), Value::Str("LIMA".into()));
        let base = Dictionary::from_unsorted(vec!["b".into(), "d".into()]);
        let target = Arc::new(Dictionary::from_unsorted(
            ["a", "b", "c", "d"].map(String::from).to_vec(),
        ));
        let (codes, into) = recode
            .recode(&base, Some(&target))
            .expect("every string in it");
        assert_eq!((codes, into.len()), (vec![1, 3], 4));
        // A target without one of the column's strings is no recoding (the data changed).
        let short = Arc::new(Dictionary::from_unsorted(vec!["b".into()]));
        assert!(recode.recode(&base, Some(&short)).is_none());
        assert!(recode.recode(&base, None).is_none());
    }
}
