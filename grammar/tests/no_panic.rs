//! No input may panic the front end: random bytes, random token soups and mutations of a valid
//! script all go through lexing, parsing, printing and diagnostic rendering, and every span a
//! diagnostic reports must lie inside the source, on character boundaries.

use tessera_grammar::{
    ast_to_string, render, source_to_ast, source_to_tokens, tokens_to_string, Span,
};

/// splitmix64: a tiny deterministic generator, so failures reproduce exactly.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const SSB_Q21: &str = r#"# SSB Q2.1
from lineorder
| join part     on lo_partkey   == p_partkey
| join supplier on lo_suppkey   == s_suppkey
| join date     on lo_orderdate == d_datekey
| where p_category == "MFGR#12" and s_region == "AMERICA"
| group d_year, p_brand1 { revenue = sum(lo_revenue) }
| sort d_year, p_brand1
let x = from (from t as u | take 3) | where a between 1 and 2 or b not in (1, 2) and c is not null
table t { a: i32, b: str?, }
from t | select y = case when a > 1 then -a as f64 else 0.5e3 end, d == @1994-01-01
"#;

const VOCABULARY: &[&str] = &[
    "from",
    "where",
    "select",
    "derive",
    "join",
    "on",
    "semi",
    "anti",
    "left",
    "group",
    "aggregate",
    "sort",
    "desc",
    "asc",
    "take",
    "distinct",
    "union",
    "all",
    "intersect",
    "except",
    "product",
    "table",
    "let",
    "and",
    "or",
    "not",
    "between",
    "in",
    "is",
    "null",
    "true",
    "false",
    "case",
    "when",
    "then",
    "else",
    "end",
    "as",
    "|",
    ",",
    ".",
    "(",
    ")",
    "{",
    "}",
    ":",
    "?",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "x",
    "lineorder",
    "date",
    "sum",
    "count",
    "i32",
    "42",
    "1.5",
    "1e-3",
    "\"MFGR#12\"",
    "\"a\\\"b\"",
    "@1994-01-01",
    "@19-1-1",
    "\"open",
    "#",
    "\n",
    "'",
    ";",
    "é",
    "9999999999999999999999",
];

/// Runs every entry point on `source` and checks the properties that must always hold.
fn check(source: &str) {
    match source_to_tokens(source) {
        Ok(tokens) => {
            let _ = tokens_to_string(&tokens, source);
            let mut end = 0;
            for token in &tokens {
                assert!(
                    token.span.start >= end && token.span.start < token.span.end,
                    "{source:?}"
                );
                assert_on_boundaries(token.span, source);
                end = token.span.end;
            }
        }
        Err(errors) => assert!(!errors.is_empty()),
    }
    match source_to_ast(source) {
        Ok(script) => {
            let _ = ast_to_string(&script);
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "{source:?}");
            for error in &errors {
                assert_on_boundaries(error.span, source);
                for label in &error.labels {
                    assert_on_boundaries(label.span, source);
                }
            }
            let rendered = render(&errors, "fuzz.tq", source, false);
            assert!(rendered.contains("error"), "{source:?}");
        }
    }
}

fn assert_on_boundaries(span: Span, source: &str) {
    let (start, end) = (span.start as usize, span.end as usize);
    assert!(
        start <= end && end <= source.len(),
        "span {span} outside {source:?}"
    );
    assert!(
        source.is_char_boundary(start) && source.is_char_boundary(end),
        "span {span} splits a character in {source:?}"
    );
}

#[test]
fn random_bytes() {
    let mut rng = SplitMix64(1);
    for _ in 0..3_000 {
        let length = rng.below(120);
        let bytes: Vec<u8> = (0..length).map(|_| rng.next() as u8).collect();
        check(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn random_characters_of_the_language() {
    let alphabet: Vec<char> = "fromwheselctjoinagupbydsk_0123456789 \n\t|,.(){}:?=!<>+-*/%\"\\@#'é"
        .chars()
        .collect();
    let mut rng = SplitMix64(2);
    for _ in 0..3_000 {
        let length = rng.below(80);
        let source: String = (0..length)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        check(&source);
    }
}

#[test]
fn token_soups() {
    let mut rng = SplitMix64(3);
    for _ in 0..5_000 {
        let length = rng.below(40);
        let mut source = String::new();
        // Most soups start like a query, so that the parser gets past the first token.
        if rng.below(4) != 0 {
            source.push_str("from t | ");
        }
        for _ in 0..length {
            source.push_str(rng.pick(VOCABULARY));
            source.push_str(if rng.below(8) == 0 { "" } else { " " });
        }
        check(&source);
    }
}

#[test]
fn mutations_of_a_valid_script() {
    assert!(source_to_ast(SSB_Q21).is_ok(), "the seed script must parse");
    let words: Vec<&str> = SSB_Q21.split_inclusive(char::is_whitespace).collect();
    let mut rng = SplitMix64(4);
    for _ in 0..3_000 {
        let mut mutated: Vec<&str> = words.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(mutated.len());
            match rng.below(3) {
                0 => {
                    mutated.remove(at);
                }
                1 => mutated.insert(at, rng.pick(VOCABULARY)),
                _ => {
                    let other = rng.below(mutated.len());
                    mutated.swap(at, other);
                }
            }
        }
        check(&mutated.concat());
    }
}

#[test]
fn truncations_of_a_valid_script() {
    for (end, _) in SSB_Q21.char_indices() {
        check(&SSB_Q21[..end]);
    }
}
