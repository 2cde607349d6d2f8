//! Snapshots of `--emit ast` and of rendered syntax errors for whole scripts.

use insta::assert_snapshot;
use tessera_grammar::{ast_to_string, render, source_to_ast};

fn ast(source: &str) -> String {
    match source_to_ast(source) {
        Ok(script) => ast_to_string(&script),
        Err(errors) => panic!("{}", render(&errors, "test.tq", source, false)),
    }
}

/// The rendered diagnostics, without colour and without ariadne's trailing spaces.
fn errors(source: &str) -> String {
    match source_to_ast(source) {
        Ok(script) => panic!("expected errors, got {}", ast_to_string(&script)),
        Err(errors) => render(&errors, "test.tq", source, false)
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[test]
fn ssb_q2_1() {
    let source = r#"# SSB Q2.1: revenue by year and brand, category MFGR#12, American suppliers
from lineorder
| join part     on lo_partkey   == p_partkey
| join supplier on lo_suppkey   == s_suppkey
| join date     on lo_orderdate == d_datekey
| where p_category == "MFGR#12" and s_region == "AMERICA"
| group d_year, p_brand1 { revenue = sum(lo_revenue) }
| sort d_year, p_brand1
"#;
    assert_snapshot!(ast(source), @r#"
    query 76..362
      from lineorder 81..90
      join inner 93..135
        relation part 98..102
        on (lo_partkey == p_partkey) 110..135
      join inner 138..180
        relation supplier 143..151
        on (lo_suppkey == s_suppkey) 155..180
      join inner 183..225
        relation date 188..192
        on (lo_orderdate == d_datekey) 200..225
      where 228..283
        ((p_category == "MFGR#12") and (s_region == "AMERICA")) 234..283
      group 286..338
        key d_year 292..298
        key p_brand1 300..308
        aggregate revenue = sum(lo_revenue) 311..336
      sort 341..362
        key d_year asc 346..352
        key p_brand1 asc 354..362
    "#);
}

#[test]
fn every_item_and_stage() {
    let source = r#"table customer {
  c_custkey: i32,
  c_name: str?,
}
let asia = from customer | where c_region == "ASIA"
from (from asia | select c_custkey, name = c_name) as a
| join semi orders on a.c_custkey == o_custkey
| derive name_length = length(name), one = 1
| union all (from other)
| except gone as g
| product sizes
| distinct
| aggregate { n = count(), longest = max(name_length) }
| sort n desc, longest
| take 10
"#;
    assert_snapshot!(ast(source), @r#"
    table customer 0..52
      column c_custkey: i32 19..33
      column c_name: str? 37..49
    let asia 53..104
      query 64..104
        from customer 69..77
        where 80..104
          (c_region == "ASIA") 86..104
    query 105..412
      from (...) as a 110..160
        query 111..154
          from asia 116..120
          select 123..154
            item c_custkey 130..139
            item name = c_name 141..154
      join semi 163..207
        relation orders 173..179
        on (a.c_custkey == o_custkey) 183..207
      derive 210..252
        column name_length = length(name) 217..243
        column one = 1 245..252
      union all 255..277
        relation (...) 265..277
          query 266..276
            from other 271..276
      except 280..296
        relation gone as g 287..296
      product 299..312
        relation sizes 307..312
      distinct 315..323
      aggregate 326..379
        aggregate n = count() 338..349
        aggregate longest = max(name_length) 351..377
      sort 382..402
        key n desc 387..393
        key longest asc 395..402
      take 10 405..412
    "#);
}

#[test]
fn every_expression_form() {
    let source = r#"from lineorder
| where lo_orderdate between @1993-01-01 and @1993-12-31
    and lo_discount not in (1, 2, 3)
    and not lo_comment is null
    and -lo_quantity * 2 + 1 >= abs(lo_tax) as f64 / 3.5
| select revenue = case when lo_tax > 5 then lo_revenue else 0 end, year(lo_orderdate)
"#;
    assert_snapshot!(ast(source), @r#"
    query 0..283
      from lineorder 5..14
      where 17..196
        ((((lo_orderdate between @1993-01-01 and @1993-12-31) and (lo_discount not in (1, 2, 3))) and (not (lo_comment is null))) and ((((-lo_quantity) * 2) + 1) >= ((abs(lo_tax) as f64) / 3.5))) 23..196
      select 199..283
        item revenue = (case when (lo_tax > 5) then lo_revenue else 0 end) 206..263
        item year(lo_orderdate) 265..283
    "#);
}

#[test]
fn syntax_error_with_hint() {
    assert_snapshot!(errors("from t | where a = 1"), @r"
    error: syntax error: unexpected `=`
       ╭─[ test.tq:1:18 ]
       │
     1 │ from t | where a = 1
       │                  ┬
       │                  ╰── expected one of `|`, an operator, `from`, `let`, `table`
       │
       │ Help: use `==` to compare
    ───╯
    ");
}

#[test]
fn unexpected_end_of_script() {
    assert_snapshot!(errors("from lineorder | where lo_revenue > 1 and ("), @r"
    error: syntax error: unexpected end of script
       ╭─[ test.tq:1:44 ]
       │
     1 │ from lineorder | where lo_revenue > 1 and (
       │                                            │
       │                                            ╰─ expected an expression
    ───╯
    ");
}

#[test]
fn every_lexical_error_is_reported() {
    assert_snapshot!(errors("from t | take 99999999999999999999 | where d == @94-1-1 $\n| where s == \"abc"), @r#"
    error: syntax error: integer literal out of range
       ╭─[ test.tq:1:15 ]
       │
     1 │ from t | take 99999999999999999999 | where d == @94-1-1 $
       │               ──────────┬─────────
       │                         ╰─────────── larger than 9223372036854775807, the largest 64-bit integer
    ───╯
    error: syntax error: malformed date literal `@94-1-1`
       ╭─[ test.tq:1:49 ]
       │
     1 │ from t | take 99999999999999999999 | where d == @94-1-1 $
       │                                                 ───┬───
       │                                                    ╰───── expected `@yyyy-mm-dd`, e.g. `@1994-01-31`
    ───╯
    error: syntax error: invalid character `$`
       ╭─[ test.tq:1:57 ]
       │
     1 │ from t | take 99999999999999999999 | where d == @94-1-1 $
       │                                                         ┬
       │                                                         ╰── not part of any token
    ───╯
    error: syntax error: unterminated string
       ╭─[ test.tq:2:14 ]
       │
     2 │ | where s == "abc
       │              ──┬─
       │                ╰─── this string has no closing `"`
       │
       │ Help: a string ends on the line where it starts
    ───╯
    "#);
}
