use super::*;
use crate::ast::*;
use crate::print::expr_to_string;
use crate::span::Span;

fn parse(source: &str) -> Script {
    match source_to_ast(source) {
        Ok(script) => script,
        Err(errors) => panic!(
            "{}",
            crate::diagnostic::render(&errors, "test.tq", source, false)
        ),
    }
}

fn error(source: &str) -> Diagnostic {
    match source_to_ast(source) {
        Ok(script) => panic!("expected an error for {source:?}, got {script:?}"),
        Err(mut errors) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            errors.remove(0)
        }
    }
}

fn only_query(source: &str) -> Pipeline {
    let mut script = parse(source);
    assert_eq!(script.items.len(), 1);
    match script.items.remove(0) {
        Item::Query(pipeline) => pipeline,
        other => panic!("expected a query, got {other:?}"),
    }
}

fn stages(source: &str) -> Vec<StageKind> {
    only_query(source)
        .stages
        .into_iter()
        .map(|stage| stage.kind)
        .collect()
}

fn only_stage(source: &str) -> StageKind {
    let mut stages = stages(source);
    assert_eq!(stages.len(), 1);
    stages.remove(0)
}

/// The predicate of `from t | where <expression>`, printed fully parenthesized.
fn expr(expression: &str) -> String {
    match only_stage(&format!("from t | where {expression}")) {
        StageKind::Where(predicate) => expr_to_string(&predicate),
        other => panic!("expected where, got {other:?}"),
    }
}

fn where_predicate(source: &str) -> Expr {
    match only_stage(source) {
        StageKind::Where(predicate) => predicate,
        other => panic!("expected where, got {other:?}"),
    }
}

fn name(kind: &RelationSource) -> &str {
    match kind {
        RelationSource::Named(name) => &name.name,
        RelationSource::Pipeline(_) => "(...)",
    }
}

// ---- items -----------------------------------------------------------------------------

#[test]
fn empty_scripts_and_comments() {
    assert_eq!(parse("").items, vec![]);
    assert_eq!(parse("  # only a comment\n").items, vec![]);
}

#[test]
fn table_declarations() {
    let source = "table part { p_partkey: i32, p_name: str?, p_date: date, }";
    let script = parse(source);
    let Item::Table(table) = &script.items[0] else {
        panic!("expected a table")
    };
    assert_eq!(table.name.name, "part");
    let columns: Vec<_> = table
        .columns
        .iter()
        .map(|c| (c.name.name.as_str(), c.ty.name.name.as_str(), c.nullable))
        .collect();
    assert_eq!(
        columns,
        vec![
            ("p_partkey", "i32", false),
            ("p_name", "str", true),
            ("p_date", "date", false)
        ]
    );
    assert_eq!(table.span, Span::new(0, source.len()));
    assert_eq!(&source[table.columns[1].span.range()], "p_name: str?");
    assert_eq!(&source[table.columns[1].ty.span.range()], "str");
}

#[test]
fn let_bindings_and_several_items_need_no_separator() {
    let script =
        parse("let big = from t | where x > 1\nfrom big | take 3 from u table v { a: i64 }");
    assert_eq!(script.items.len(), 4);
    let Item::Let(binding) = &script.items[0] else {
        panic!("expected let")
    };
    assert_eq!(binding.name.name, "big");
    assert_eq!(binding.span, Span::new(0, 30));
    assert_eq!(binding.pipeline.span, Span::new(10, 30));
    assert!(matches!(script.items[1], Item::Query(_)));
    assert!(matches!(script.items[2], Item::Query(_)));
    assert!(matches!(script.items[3], Item::Table(_)));
}

#[test]
fn relations_with_aliases_and_subqueries() {
    let query = only_query(
        "from (from lineorder | where lo_discount > 1) as lo | join date as d on lo.x == d.y",
    );
    assert_eq!(
        query.from.alias.as_ref().map(|a| a.name.as_str()),
        Some("lo")
    );
    assert_eq!(query.from.span, Span::new(5, 51));
    let RelationSource::Pipeline(inner) = &query.from.source else {
        panic!("expected a subquery")
    };
    assert_eq!(name(&inner.from.source), "lineorder");
    assert_eq!(inner.span, Span::new(6, 44));
    let StageKind::Join { relation, on, .. } = &query.stages[0].kind else {
        panic!("expected join")
    };
    assert_eq!(name(&relation.source), "date");
    assert_eq!(relation.alias.as_ref().map(|a| a.name.as_str()), Some("d"));
    assert_eq!(expr_to_string(on), "(lo.x == d.y)");
}

// ---- stages ----------------------------------------------------------------------------

#[test]
fn select_items_may_be_named() {
    let StageKind::Select(items) = only_stage("from t | select a, total = a * 2, t.b,") else {
        panic!("expected select")
    };
    let printed: Vec<_> = items
        .iter()
        .map(|item| {
            (
                item.name.as_ref().map(|n| n.name.clone()),
                expr_to_string(&item.expr),
            )
        })
        .collect();
    assert_eq!(
        printed,
        vec![
            (None, "a".to_string()),
            (Some("total".to_string()), "(a * 2)".to_string()),
            (None, "t.b".to_string())
        ]
    );
    assert_eq!(items[1].span, Span::new(19, 32));
}

#[test]
fn derive_assigns_names() {
    let StageKind::Derive(columns) = only_stage("from t | derive x = a + 1, y = -a") else {
        panic!("expected derive")
    };
    assert_eq!(columns.len(), 2);
    assert_eq!(columns[1].name.name, "y");
    assert_eq!(expr_to_string(&columns[1].expr), "(-a)");
}

#[test]
fn join_kinds() {
    let kinds: Vec<_> = stages("from a | join b on x == y | join semi c on x == z | join anti d on x == w | join left e on x == v")
        .into_iter()
        .map(|stage| match stage {
            StageKind::Join { kind, .. } => kind,
            other => panic!("expected join, got {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            JoinKind::Inner,
            JoinKind::Semi,
            JoinKind::Anti,
            JoinKind::Left
        ]
    );
}

#[test]
fn group_with_keys_and_aggregates() {
    let StageKind::Group { keys, aggregates } = only_stage(
        "from t | group d_year, brand = p_brand1, { revenue = sum(lo_revenue), n = count(), }",
    ) else {
        panic!("expected group")
    };
    assert_eq!(keys.len(), 2);
    assert_eq!(
        keys[1].name.as_ref().map(|n| n.name.as_str()),
        Some("brand")
    );
    assert_eq!(aggregates.len(), 2);
    assert_eq!(expr_to_string(&aggregates[1].expr), "count()");

    // An empty block groups by the keys alone: distinct keys.
    let StageKind::Group { aggregates, .. } = only_stage("from t | group a {}") else {
        panic!("expected group")
    };
    assert!(aggregates.is_empty());
}

#[test]
fn aggregate_without_keys() {
    let StageKind::Aggregate(aggregates) = only_stage("from t | aggregate { total = sum(x * y) }")
    else {
        panic!("expected aggregate")
    };
    assert_eq!(aggregates[0].name.name, "total");
    assert_eq!(expr_to_string(&aggregates[0].expr), "sum((x * y))");
}

#[test]
fn sort_directions() {
    let source = "from t | sort a, b desc, c asc, d + 1 desc";
    let StageKind::Sort(keys) = only_stage(source) else {
        panic!("expected sort")
    };
    let directions: Vec<_> = keys.iter().map(|k| k.descending).collect();
    assert_eq!(directions, vec![false, true, false, true]);
    assert_eq!(&source[keys[3].span.range()], "d + 1 desc");
    assert_eq!(&source[keys[3].expr.span.range()], "d + 1");
}

#[test]
fn take_distinct_and_set_operations() {
    let stages = stages(
        "from t | take 10 | distinct | union u | union all (from v) | intersect w | except x as y | product z",
    );
    let StageKind::Take(count) = &stages[0] else {
        panic!("expected take")
    };
    assert_eq!(count.value, LiteralValue::Int(10));
    assert_eq!(count.span, Span::new(14, 16));
    assert_eq!(stages[1], StageKind::Distinct);
    let set_ops: Vec<_> = stages[2..6]
        .iter()
        .map(|stage| match stage {
            StageKind::SetOp { op, all, relation } => {
                (*op, *all, name(&relation.source).to_string())
            }
            other => panic!("expected a set operation, got {other:?}"),
        })
        .collect();
    assert_eq!(
        set_ops,
        vec![
            (SetOp::Union, false, "u".to_string()),
            (SetOp::Union, true, "(...)".to_string()),
            (SetOp::Intersect, false, "w".to_string()),
            (SetOp::Except, false, "x".to_string()),
        ]
    );
    assert!(matches!(&stages[6], StageKind::Product(relation) if name(&relation.source) == "z"));
}

// ---- expressions -----------------------------------------------------------------------

#[test]
fn literals() {
    assert_eq!(expr("x == 42"), "(x == 42)");
    assert_eq!(expr("x == 1.5"), "(x == 1.5)");
    assert_eq!(expr("x == 1e-3"), "(x == 0.001)");
    assert_eq!(expr(r#"x == "MFGR#12""#), r#"(x == "MFGR#12")"#);
    assert_eq!(expr(r#"x == "say \"hi\"""#), r#"(x == "say \"hi\"")"#);
    assert_eq!(expr("x >= @1994-01-01"), "(x >= @1994-01-01)");
    assert_eq!(expr("true or false or null"), "((true or false) or null)");
}

#[test]
fn literal_values_are_decoded() {
    let predicate = where_predicate("from t | where x == @1994-01-31");
    let ExprKind::Binary { right, .. } = predicate.kind else {
        panic!("expected a comparison")
    };
    assert_eq!(
        right.kind,
        ExprKind::Literal(Literal {
            value: LiteralValue::Temporal("1994-01-31".into()),
            span: Span::new(20, 31)
        })
    );
}

#[test]
fn columns_and_calls() {
    assert_eq!(expr("lo.revenue > 0"), "(lo.revenue > 0)");
    assert_eq!(expr("year(d) == 1994"), "(year(d) == 1994)");
    assert_eq!(expr("f() and g(a, b + 1,)"), "(f() and g(a, (b + 1)))");
    assert_eq!(expr("abs(sqrt(x)) < 1"), "(abs(sqrt(x)) < 1)");
}

#[test]
fn between_in_and_is_null() {
    assert_eq!(expr("x between 1 and 3"), "(x between 1 and 3)");
    assert_eq!(expr("x not between 1 and 3"), "(x not between 1 and 3)");
    assert_eq!(expr("x in (1, 2, 3)"), "(x in (1, 2, 3))");
    assert_eq!(expr(r#"x not in ("a",)"#), r#"(x not in ("a"))"#);
    assert_eq!(expr("x is null"), "(x is null)");
    assert_eq!(expr("x is not null"), "(x is not null)");
}

#[test]
fn case_expressions() {
    assert_eq!(
        expr("case when a > 1 then 1 when a < 0 then -1 else 0 end == 1"),
        "((case when (a > 1) then 1 when (a < 0) then (-1) else 0 end) == 1)"
    );
    assert_eq!(expr("case when a then b end"), "(case when a then b end)");
}

#[test]
fn casts() {
    assert_eq!(expr("x as f64 > 1.0"), "((x as f64) > 1.0)");
    assert_eq!(expr("x as f64 as i32 == 1"), "(((x as f64) as i32) == 1)");
    assert_eq!(
        expr("d as date == @1994-01-01"),
        "((d as date) == @1994-01-01)"
    );
}

#[test]
fn precedence() {
    for (source, printed) in [
        ("a + b * c > 3", "((a + (b * c)) > 3)"),
        ("a - b - c", "((a - b) - c)"),
        ("a / b % c * d", "(((a / b) % c) * d)"),
        ("a or b and c", "(a or (b and c))"),
        ("a and b or c and d", "((a and b) or (c and d))"),
        ("not a == b", "(not (a == b))"),
        ("not a and b", "((not a) and b)"),
        ("not not a", "(not (not a))"),
        ("-x as f64", "(-(x as f64))"),
        ("- -x * y", "((-(-x)) * y)"),
        ("-a * b", "((-a) * b)"),
        ("(a + b) * c", "((a + b) * c)"),
        ("x between 1 and 2 and y", "((x between 1 and 2) and y)"),
        (
            "x + 1 between a - 1 and b * 2",
            "((x + 1) between (a - 1) and (b * 2))",
        ),
        (
            "not x in (1) or y is null",
            "((not (x in (1))) or (y is null))",
        ),
        ("a + 1 is not null", "((a + 1) is not null)"),
    ] {
        assert_eq!(expr(source), printed, "{source}");
    }
}

#[test]
fn spans_cover_exact_source() {
    let source = "from t | where (a + b) * c > 3";
    let predicate = where_predicate(source);
    assert_eq!(predicate.span, Span::new(15, 30));
    let ExprKind::Binary { left: product, .. } = &predicate.kind else {
        panic!("expected a comparison")
    };
    // A parenthesized expression keeps the span of its contents; its parent covers the parens.
    assert_eq!(&source[product.span.range()], "(a + b) * c");
    let ExprKind::Binary { left: sum, .. } = &product.kind else {
        panic!("expected a product")
    };
    assert_eq!(&source[sum.span.range()], "a + b");

    let query = only_query(source);
    assert_eq!(query.span, Span::new(0, 30));
    assert_eq!(query.from.span, Span::new(5, 6));
    assert_eq!(query.stages[0].span, Span::new(9, 30));
}

#[test]
fn spans_of_calls_casts_and_case() {
    let source = "from t | where case when f(x, y) as i64 > 1 then true end";
    let predicate = where_predicate(source);
    assert_eq!(
        &source[predicate.span.range()],
        "case when f(x, y) as i64 > 1 then true end"
    );
    let ExprKind::Case { branches, .. } = &predicate.kind else {
        panic!("expected case")
    };
    let ExprKind::Binary { left: cast, .. } = &branches[0].0.kind else {
        panic!("expected a comparison")
    };
    assert_eq!(&source[cast.span.range()], "f(x, y) as i64");
    let ExprKind::Cast { expr: call, ty } = &cast.kind else {
        panic!("expected a cast")
    };
    assert_eq!(&source[call.span.range()], "f(x, y)");
    assert_eq!(&source[ty.span.range()], "i64");
}

// ---- errors ----------------------------------------------------------------------------

#[test]
fn assignment_where_comparison_was_meant() {
    let d = error("from t | where a = 1");
    assert_eq!(d.message, "unexpected `=`");
    assert_eq!(d.span, Span::new(17, 18));
    assert_eq!(d.hints, vec!["use `==` to compare"]);
}

#[test]
fn comparison_where_assignment_was_meant() {
    let d = error("from t | derive x == 1");
    assert_eq!(d.label, "expected `=`");
    assert_eq!(d.hints, vec!["use `=` to name a column"]);
}

#[test]
fn comparisons_do_not_chain() {
    let d = error("from t | where a < b < c");
    assert_eq!(d.message, "unexpected `<`");
    assert_eq!(d.span, Span::new(21, 22));
    assert!(d.hints[0].contains("do not chain"));
}

#[test]
fn missing_expression() {
    let d = error("from t | where a + * b");
    assert_eq!(d.message, "unexpected `*`");
    assert_eq!(d.label, "expected an expression");
}

#[test]
fn unexpected_end_of_script() {
    let d = error("from t | where");
    assert_eq!(d.message, "unexpected end of script");
    assert_eq!(d.label, "expected an expression");
    assert_eq!(d.span, Span::new(14, 14));

    let d = error("from t | where (a + 1");
    assert_eq!(d.label, "expected `)` or an operator");
    assert_eq!(d.hints, vec!["a `(` is not closed"]);
}

#[test]
fn after_a_complete_query() {
    let d = error("from t | where a )");
    assert_eq!(d.message, "unexpected `)`");
    assert_eq!(
        d.label,
        "expected one of `|`, an operator, `from`, `let`, `table`"
    );
    assert_eq!(d.hints, vec!["this `)` has no matching `(`"]);
    let d = error("from t )");
    assert_eq!(d.label, "expected one of `|`, `as`, `from`, `let`, `table`");
}

#[test]
fn unknown_stages() {
    let d = error("from t | selct a");
    assert_eq!(
        d.label,
        "expected a stage (`where`, `select`, `join`, `group`, ...)"
    );
    assert_eq!(d.hints, vec!["did you mean `select`?"]);
    let d = error("from t | filter a > 1");
    assert!(d.hints[0].starts_with("the stages are `where`, `select`"));
}

#[test]
fn scripts_start_with_an_item() {
    let d = error("lineorder | where a");
    assert_eq!(d.message, "unexpected `lineorder`");
    assert_eq!(d.label, "expected one of `from`, `let`, `table`");
    assert!(d.hints[0].contains("starts with `from`"));
    assert_eq!(error("form t").hints, vec!["did you mean `from`?"]);
}

#[test]
fn keywords_are_not_names() {
    let d = error("from t | select end = 1");
    assert_eq!(d.message, "unexpected `end`");
    assert_eq!(
        d.hints,
        vec!["`end` is a reserved word and cannot be used as a name"]
    );
    let d = error("table t { from: i32 }");
    assert_eq!(d.label, "expected a name");
}

#[test]
fn take_needs_an_integer_literal() {
    assert_eq!(error("from t | take -1").label, "expected an integer");
    assert_eq!(error("from t | take n").label, "expected an integer");
}

#[test]
fn join_needs_on() {
    let d = error("from t | join u where a");
    assert_eq!(d.label, "expected `on` or `as`");
}

#[test]
fn hints_for_common_mistakes() {
    let hint = |source: &str| error(source).hints.join("; ");
    assert_eq!(
        hint("from t || where a"),
        "`|` separates stages; logical or is written `or`"
    );
    assert_eq!(
        hint("from t | distinct all"),
        "`all` follows `union`, `intersect` or `except`"
    );
    assert_eq!(
        hint("from t | where case x when 1 then 2 end"),
        "`case` takes conditions: `case when x == 1 then ... end`"
    );
    assert_eq!(
        hint("let x = t"),
        "`let` binds a pipeline: `let name = from table | ...`"
    );
    assert_eq!(
        hint("from t | select a b"),
        "a `,` may be missing before this"
    );
    assert_eq!(
        hint("from t | where f(a b)"),
        "a `,` may be missing before this"
    );
    assert_eq!(hint("from t | where a && b"), "use `and`");
}

#[test]
fn labels_name_what_was_expected() {
    let label = |source: &str| error(source).label;
    assert_eq!(
        label("from t | join"),
        "expected one of a name, `semi`, `anti`, `left`, `(`"
    );
    assert_eq!(label("from t | group a {"), "expected `}` or a name");
    assert_eq!(label("table t { a }"), "expected `:`");
    assert_eq!(label("from t | where x in 1"), "expected `(`");
    assert_eq!(label("from t | where x is 1"), "expected `not` or `null`");
    assert_eq!(
        label("from t | union"),
        "expected one of a name, `all`, `(`"
    );
    assert_eq!(label("from t | aggregate {}"), "expected a name");
    assert_eq!(
        label("from t | where x == 1 |"),
        "expected a stage (`where`, `select`, `join`, `group`, ...)"
    );
    assert_eq!(
        label("from t | select a b"),
        "expected one of `|`, `,`, `=`, an operator, `from`, `let`, ..."
    );
}

#[test]
fn long_tokens_are_shortened_in_messages() {
    let d = error(r#"from t "a very long string literal that goes on and on""#);
    assert_eq!(d.message, "unexpected `\"a very long string literal...`");
}

#[test]
fn lexer_errors_are_all_reported() {
    let errors = source_to_ast("from t | where a == 'x' and b ; c")
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 3);
}

// ---- limits ----------------------------------------------------------------------------

#[test]
fn parenthesis_nesting_is_limited() {
    let nested =
        |depth: usize| format!("from t | where {}x{}", "(".repeat(depth), ")".repeat(depth));
    assert!(source_to_ast(&nested(crate::lexer::MAX_NESTING)).is_ok());
    let d = error(&nested(crate::lexer::MAX_NESTING + 1));
    assert_eq!(d.message, "parentheses nested more than 128 deep");

    let pipelines = |depth: usize| format!("{}from t{}", "from (".repeat(depth), ")".repeat(depth));
    assert!(source_to_ast(&pipelines(100)).is_ok());
    assert!(source_to_ast(&pipelines(100_000)).is_err());
}

#[test]
fn expression_depth_is_limited() {
    let limit = MAX_EXPR_DEPTH as usize;
    // A chain of n additions is n + 1 levels deep.
    let chain = |terms: usize| format!("from t | where {} > 0", vec!["x"; terms].join(" + "));
    assert!(source_to_ast(&chain(limit - 1)).is_ok());
    let d = error(&chain(limit + 1));
    assert_eq!(d.message, "expression nested too deeply");
    assert!(d.hints[0].contains("derive"));

    // Long chains fail fast, without building (or dropping) a deep tree.
    assert!(source_to_ast(&chain(200_000)).is_err());
    let negations = format!("from t | where {}x", "- ".repeat(100_000));
    assert_eq!(error(&negations).message, "expression nested too deeply");
    let nots = format!("from t | where {}x", "not ".repeat(100_000));
    assert_eq!(error(&nots).message, "expression nested too deeply");
    let cases = format!(
        "from t | where {}1{}",
        "case when true then ".repeat(10_000),
        " end".repeat(10_000)
    );
    assert_eq!(error(&cases).message, "expression nested too deeply");
    let casts = format!("from t | where x{}", " as i64".repeat(100_000));
    assert_eq!(error(&casts).message, "expression nested too deeply");
}

#[test]
fn wide_expressions_are_fine() {
    let list = vec!["1"; 20_000].join(", ");
    assert!(source_to_ast(&format!("from t | where x in ({list})")).is_ok());
    assert!(source_to_ast(&format!(
        "from t | select {}",
        vec!["a + 1"; 5_000].join(", ")
    ))
    .is_ok());
}
