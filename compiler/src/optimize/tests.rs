//! Each rule on its own, over a tiny in-memory catalog: the plan before and after it, and
//! that applying it again changes nothing; the driver's check of what a rule must keep.

use tessera_grammar::source_to_ast;
use tessera_storage::{Catalog, Column, ColumnData, DictionaryBuilder};

use super::{
    apply, optimize_with, ColumnPruning, ConstantFolding, DimensionChains, PredicatePushdown, Rule,
};
use super::{Order, QueryView, Transformed};
use crate::logical::{logical_to_string, LogicalPlan, LogicalQuery};
use crate::{ast_to_typed, typed_to_logical};

/// `orders` (`o_id`, `o_customer`, `o_total`), `customers` (`c_id`, `c_region`) and `zones`
/// (`z_id`, `z_size`).
pub(crate) fn catalog() -> Catalog {
    let ints = |values: &[i32]| Column::new(ColumnData::I32(values.to_vec().into()), None);
    let mut regions = DictionaryBuilder::default();
    for region in ["ASIA", "EUROPE", "ASIA"] {
        regions.push(region);
    }
    Catalog::from_columns(vec![
        (
            "orders".into(),
            vec![
                ("o_id".into(), ints(&[1, 2, 3, 4])),
                ("o_customer".into(), ints(&[1, 2, 3, 1])),
                ("o_total".into(), ints(&[10, 20, 30, 40])),
            ],
        ),
        (
            "customers".into(),
            vec![
                ("c_id".into(), ints(&[1, 2, 3])),
                ("c_region".into(), Column::new(regions.finish(), None)),
            ],
        ),
        (
            "zones".into(),
            vec![
                ("z_id".into(), ints(&[1, 2])),
                ("z_size".into(), ints(&[5, 7])),
            ],
        ),
    ])
}

/// The logical plan of `script`'s one query, before any rule.
pub(crate) fn logical(script: &str) -> LogicalQuery {
    let catalog = catalog();
    let ast = source_to_ast(script).expect("the script parses");
    let typed = ast_to_typed(&ast, &catalog).expect("the script checks");
    typed_to_logical(&typed, &catalog).remove(0)
}

/// The plan of `script` after `rule` alone; asserts that the rule changed it, and that
/// applying it again does not.
fn after(rule: &dyn Rule, script: &str) -> String {
    let mut query = logical(script);
    assert_eq!(apply(rule, &mut query), Transformed::Yes, "{}", rule.name());
    super::schema::check(&query).expect("the rule keeps the plan's invariants");
    assert_eq!(
        apply(rule, &mut query),
        Transformed::No,
        "{} again",
        rule.name()
    );
    logical_to_string(&[query])
}

#[test]
fn constant_folding_evaluates_literals_and_drops_filters_always_true() {
    let plan = after(
        &ConstantFolding,
        "from orders | where 2 + 3 == 5 | where o_total > 10 * 2 or false | select o_id",
    );
    insta::assert_snapshot!(plan, @r"
    query 0 -> o_id: i32
      project o_id
        filter (o_total as i64) > 20
          scan orders [o_id, o_customer, o_total] rows=4
    ");
}

#[test]
fn predicate_pushdown_moves_each_conjunct_to_the_scan_it_reads() {
    let plan = after(
        &PredicatePushdown,
        r#"from orders
           | join customers on o_customer == c_id
           | where c_region == "ASIA" and o_total > 15
           | select o_id, c_region"#,
    );
    insta::assert_snapshot!(plan, @r##"
    query 0 -> o_id: i32, c_region: str
      project o_id, c_region
        join on o_customer == c_id
          scan orders [o_id, o_customer, o_total] rows=4
            filter o_total > 15
          scan customers [c_id, c_region] rows=3
            filter c_region == "ASIA"#0
    "##);
}

#[test]
fn predicate_pushdown_stops_at_take_and_passes_group_keys() {
    let plan = after(
        &PredicatePushdown,
        "from orders | take 2 | where o_total > 15 | group o_customer { n = count() } \
         | where o_customer > 1 and n > 0",
    );
    insta::assert_snapshot!(plan, @r"
    query 0 -> o_customer: i32, n: i64
      filter n > 0
        group o_customer { n = count() }
          filter (o_total > 15) and (o_customer > 1)
            take 2
              scan orders [o_id, o_customer, o_total] rows=4
    ");
}

#[test]
fn column_pruning_reads_only_what_is_used() {
    let plan = after(
        &ColumnPruning,
        "from orders | join customers on o_customer == c_id | select o_id",
    );
    insta::assert_snapshot!(plan, @r"
    query 0 -> o_id: i32
      project o_id
        join on o_customer == c_id
          scan orders [o_id, o_customer] rows=4
          scan customers [c_id] rows=3
    ");
}

#[test]
fn dimension_chains_join_a_filtered_table_to_the_one_it_is_joined_through() {
    let plan = after(
        &DimensionChains,
        "from orders | join customers on o_customer == c_id \
         | join (from zones | where z_size > 6) on c_id == z_id | select o_id",
    );
    insta::assert_snapshot!(plan, @r"
    query 0 -> o_id: i32
      project o_id
        join on o_customer == c_id
          scan orders [o_id, o_customer, o_total] rows=4
          join on c_id == z_id
            scan customers [c_id, c_region] rows=3
            filter z_size > 6
              scan zones [z_id, z_size] rows=2
    ");
    // Joined through the orders' own column, or unfiltered: the joins stay as written.
    for script in [
        "from orders | join customers on o_customer == c_id \
         | join (from zones | where z_size > 6) on o_id == z_id | select o_id",
        "from orders | join customers on o_customer == c_id | join zones on c_id == z_id \
         | select o_id",
    ] {
        let mut query = logical(script);
        assert_eq!(
            apply(&DimensionChains, &mut query),
            Transformed::No,
            "{script}"
        );
    }
}

#[test]
fn column_pruning_keeps_a_built_join_to_the_columns_used_above_it() {
    let mut query = logical(
        "from orders | join customers on o_customer == c_id \
         | join (from zones | where z_size > 6) on c_id == z_id | select o_id, c_region",
    );
    assert_eq!(apply(&DimensionChains, &mut query), Transformed::Yes);
    assert_eq!(apply(&ColumnPruning, &mut query), Transformed::Yes);
    super::schema::check(&query).expect("the rule keeps the plan's invariants");
    assert_eq!(apply(&ColumnPruning, &mut query), Transformed::No);
    insta::assert_snapshot!(logical_to_string(&[query]), @r"
    query 0 -> o_id: i32, c_region: str
      project o_id, c_region
        join on o_customer == c_id
          scan orders [o_id, o_customer] rows=4
          project c_id, c_region
            join on c_id == z_id
              scan customers [c_id, c_region] rows=3
              filter z_size > 6
                scan zones [z_id, z_size] rows=2
    ");
}

#[test]
fn the_rules_together_settle_in_a_few_rounds() {
    let rules: Vec<Box<dyn Rule>> = vec![
        Box::new(ConstantFolding),
        Box::new(PredicatePushdown),
        Box::new(ColumnPruning),
    ];
    let mut trace = Vec::new();
    let query = logical(
        r#"from orders | join customers on o_customer == c_id
           | select o_id, big = o_total > 10 + 5, c_region
           | where big and c_region == "ASIA" | select o_id"#,
    );
    let optimized = optimize_with(vec![query], &rules, Some(&mut trace)).expect("optimizes");
    let passes: Vec<&str> = trace.iter().map(|t| t.pass.as_str()).collect();
    assert_eq!(
        passes,
        ["constant_folding", "predicate_pushdown", "column_pruning"]
    );
    insta::assert_snapshot!(logical_to_string(&optimized), @r##"
    query 0 -> o_id: i32
      project o_id
        join on o_customer == c_id
          scan orders [o_id, o_customer] rows=4
            filter (o_total as i64) > 15
          scan customers [c_id] rows=3
            filter c_region == "ASIA"#0
    "##);
}

/// A rule that breaks what rules must keep: it drops the plan's last projection.
struct DropsTheRoot;

impl Rule for DropsTheRoot {
    fn name(&self) -> &'static str {
        "drops_the_root"
    }

    fn order(&self) -> Order {
        Order::Whole
    }

    fn rewrite(&self, plan: LogicalPlan, _: &QueryView<'_>) -> (LogicalPlan, Transformed) {
        match plan {
            LogicalPlan::Project(project) => (*project.input, Transformed::Yes),
            plan => (plan, Transformed::No),
        }
    }
}

#[test]
fn a_rule_that_changes_the_output_is_an_internal_error_naming_it() {
    let rules: Vec<Box<dyn Rule>> = vec![Box::new(DropsTheRoot)];
    let query = logical("from orders | select o_id");
    let Err(error) = optimize_with(vec![query], &rules, None) else {
        panic!("the broken rule went unnoticed");
    };
    let message = format!("{error:?}");
    assert!(
        message.contains("the `drops_the_root` rule broke the plan"),
        "{message}"
    );
}
