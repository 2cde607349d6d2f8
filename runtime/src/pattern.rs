//! String patterns: SQL's `like` (`%` any run of characters, `_` any one character, no escape
//! character, case-sensitive, as DuckDB's) and the prefix, suffix and substring tests written as
//! functions. One matcher serves both places a pattern meets strings: once per entry of a
//! column's dictionary when a query runs (kernels then read a row's answer by its code), and
//! per row on the host, over a grouped result's strings.

/// How a pattern is matched against a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum MatchKind {
    Like,
    StartsWith,
    EndsWith,
    Contains,
}

impl MatchKind {
    /// The function's name in scripts (`like` is the operator's).
    pub fn name(self) -> &'static str {
        match self {
            MatchKind::Like => "like",
            MatchKind::StartsWith => "starts_with",
            MatchKind::EndsWith => "ends_with",
            MatchKind::Contains => "contains",
        }
    }

    /// Whether `text` matches `pattern`.
    pub fn matches(self, pattern: &str, text: &str) -> bool {
        match self {
            MatchKind::Like if pattern.contains('_') => like(pattern, text),
            MatchKind::Like => like_runs(pattern, text),
            MatchKind::StartsWith => text.starts_with(pattern),
            MatchKind::EndsWith => text.ends_with(pattern),
            MatchKind::Contains => text.contains(pattern),
        }
    }
}

/// SQL `text LIKE pattern` for a pattern without `_`: its text before the first `%` is a prefix,
/// after the last a suffix, and each run between them is found in order, each as early as it
/// can be (which leaves the most room for those after it). Substring search rather than a
/// walk over characters, and nothing allocated: millions of dictionary entries are matched
/// (TPC-H Q13's `o_comment`).
fn like_runs(pattern: &str, text: &str) -> bool {
    let Some((first, after)) = pattern.split_once('%') else {
        return text == pattern;
    };
    let Some(rest) = text.strip_prefix(first) else {
        return false;
    };
    let (middle, last) = after.rsplit_once('%').unwrap_or(("", after));
    let Some(mut rest) = rest.strip_suffix(last) else {
        return false;
    };
    for run in middle.split('%').filter(|run| !run.is_empty()) {
        match rest.find(run) {
            Some(at) => rest = &rest[at + run.len()..],
            None => return false,
        }
    }
    true
}

/// SQL `text LIKE pattern`, over characters. A `%` that fails to extend backtracks only to
/// the latest `%` (each earlier one matched as little as it could), so the cost is at most the
/// product of the two lengths.
fn like(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // Where the latest `%` was, and the text position it matches up to so far.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('%') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '_' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // The latest `%` takes one more character.
                Some((star_p, star_t)) => {
                    star = Some((star_p, star_t + 1));
                    p = star_p + 1;
                    t = star_t + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '%')
}

#[cfg(test)]
mod tests {
    use super::MatchKind;

    #[test]
    fn like_follows_sql() {
        let like = |p: &str, t: &str| MatchKind::Like.matches(p, t);
        assert!(like("%BRASS", "LARGE BRUSHED BRASS"));
        assert!(!like("%BRASS", "LARGE BRUSHED BRASS "));
        assert!(like("PROMO%", "PROMO PLATED TIN"));
        assert!(like("%green%", "forest green linen"));
        assert!(like(
            "%special%requests%",
            "a special kind of requests here"
        ));
        assert!(!like("%special%requests%", "requests special"));
        assert!(like("MFGR#1_1_", "MFGR#1213"));
        assert!(!like("MFGR#1_1_", "MFGR#121"));
        assert!(like("", ""));
        assert!(!like("", "a"));
        assert!(like("%", ""));
        assert!(like("_é%", "aé"));
        assert!(!like("abc", "ABC"));
        assert!(like("a%%b", "ab"));
    }

    /// Patterns without `_` are matched by runs; they agree with the walk over characters on
    /// every pattern and text made of a few letters and `%`.
    #[test]
    fn runs_agree_with_the_walk_over_characters() {
        let alphabet = ['a', 'b', 'é', '%'];
        let words = |len: usize, with_percent: bool| -> Vec<String> {
            let letters: Vec<char> = alphabet
                .iter()
                .copied()
                .filter(|&c| with_percent || c != '%')
                .collect();
            let mut words = vec![String::new()];
            for _ in 0..len {
                let longer: Vec<String> = words
                    .iter()
                    .flat_map(|w| letters.iter().map(move |c| format!("{w}{c}")))
                    .collect();
                words.extend(longer);
            }
            words.sort();
            words.dedup();
            words
        };
        let texts = words(4, false);
        for pattern in words(4, true) {
            for text in &texts {
                assert_eq!(
                    super::like_runs(&pattern, text),
                    super::like(&pattern, text),
                    "{text:?} like {pattern:?}"
                );
            }
        }
    }

    #[test]
    fn functions_test_prefixes_suffixes_and_substrings() {
        assert!(MatchKind::StartsWith.matches("SM", "SM CASE"));
        assert!(MatchKind::EndsWith.matches("BOX", "LG BOX"));
        assert!(MatchKind::Contains.matches("%", "100%"));
        assert!(!MatchKind::StartsWith.matches("_M", "SM CASE"));
    }
}
