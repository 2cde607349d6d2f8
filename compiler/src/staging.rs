//! Splits a script whose pipelines join, cross or combine a relation that ends on the host (a
//! grouped, aggregated, sorted, limited or deduplicated one) into stages. Each such relation
//! becomes a query of its own that runs first; its result becomes a table, and the rest of the
//! script reads that table in its place. The planner then sees the relation as it sees any table
//! — its real rows, value ranges, dictionaries and unique keys — the way adaptive query execution
//! plans a query again once a stage's output is known. A join on a sorted or limited relation,
//! or on a grouping the planner cannot read from its slots (TPC-H Q20's two keys packed over a
//! hash grouping), runs so. A `union all` that an inner or left join builds its hash table from
//! is staged too: the table then holds its rows once, in one relation, as a join on keys that
//! may repeat needs.
//!
//! A script is split only when the planner cannot run it whole: a grouping joined as it is
//! read from its slots on the device needs no stage (`split_unless_planned`).
//!
//! The rewrite keeps every span, so diagnostics of a stage point into the script as written.

use tessera_grammar::ast::{
    ExprKind, Ident, Item, JoinKind, Pipeline, Relation, RelationSource, Script, SetOp, StageKind,
};
use tessera_storage::Catalog;

use crate::physical::PartitionJoins;
use crate::script::Compilation;

/// A query to run before the script, and the table its result becomes.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub table: String,
    /// The script's declarations, the `let` bindings visible where the relation was written,
    /// and the relation as the one query.
    pub script: Script,
}

impl Stage {
    /// The names of the result's keys when the relation ends with a `group`: no combination
    /// of their values occurs twice.
    pub fn grouped_keys(&self) -> Option<Vec<String>> {
        let Some(Item::Query(pipeline)) = self.script.items.last() else {
            return None;
        };
        let StageKind::Group { keys, .. } = &pipeline.stages.last()?.kind else {
            return None;
        };
        keys.iter()
            .map(|item| match (&item.name, &item.expr.kind) {
                (Some(name), _) => Some(name.name.clone()),
                (None, ExprKind::Column { name, .. }) => Some(name.name.clone()),
                (None, _) => None,
            })
            .collect()
    }
}

/// A script split into stages: run `stages` in order, each result a table of the name it
/// gives, then `script`, which reads them.
#[derive(Clone, Debug, PartialEq)]
pub struct Staged {
    pub stages: Vec<Stage>,
    pub script: Script,
    /// Why the planner could not run the script whole, when it was asked
    /// ([`split_unless_planned`]).
    pub unplanned: Option<String>,
}

/// The stages `script` needs, or `None` when every relation it combines flows through the
/// device's pipelines. `table_name(n)` names the table of the `n`th stage (from 1).
pub fn split(script: &Script, table_name: &mut dyn FnMut(usize) -> String) -> Option<Staged> {
    let declarations: Vec<Item> = script
        .items
        .iter()
        .filter(|item| matches!(item, Item::Table(_)))
        .cloned()
        .collect();
    let mut splitter = Splitter {
        declarations,
        items: Vec::with_capacity(script.items.len()),
        stages: Vec::new(),
        table_name,
    };
    for item in &script.items {
        let item = match item {
            Item::Table(_) => item.clone(),
            Item::Let(binding) => {
                let mut binding = binding.clone();
                splitter.rewrite(&mut binding.pipeline);
                Item::Let(binding)
            }
            Item::Query(pipeline) => {
                let mut pipeline = pipeline.clone();
                splitter.rewrite(&mut pipeline);
                Item::Query(pipeline)
            }
        };
        splitter.items.push(item);
    }
    if splitter.stages.is_empty() {
        return None;
    }
    Some(Staged {
        stages: splitter.stages,
        script: Script {
            items: splitter.items,
        },
        unplanned: None,
    })
}

/// Whether `script` may run in stages: [`split`] would find some.
pub fn runs_in_stages(script: &Script) -> bool {
    split(script, &mut |n| n.to_string()).is_some()
}

/// The stages `script` runs in against `catalog`: none when the planner runs it whole, reading
/// each grouped relation it joins from its grouping's slots on the device (see
/// `physical::plan`'s `plan_over_groups`), else [`split`]'s.
pub fn split_unless_planned(
    script: &Script,
    catalog: &Catalog,
    partition_joins: PartitionJoins,
    table_name: &mut dyn FnMut(usize) -> String,
) -> Option<Staged> {
    let mut staged = split(script, table_name)?;
    match Compilation::run_with(script.clone(), catalog, partition_joins) {
        Ok(_) => None,
        // What it cannot plan whole (or cannot plan at all: the stages then say more).
        Err(diagnostics) => {
            staged.unplanned = diagnostics.first().map(|d| d.message.clone());
            Some(staged)
        }
    }
}

/// The split in words, for `--emit physical` and after: each stage's relation as written in
/// `source`, and the script that reads their tables. Each stage is planned only once those
/// before it have run, against their results, so no plan of it can be shown beforehand.
pub fn describe(staged: &Staged, source: &str) -> String {
    let written = |span: tessera_grammar::Span| {
        let text = source
            .get(span.start as usize..span.end as usize)
            .unwrap_or("?");
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let count = match staged.stages.len() {
        1 => "1 stage".to_string(),
        n => format!("{n} stages"),
    };
    let mut text = format!(
        "runs in {count} before its queries, each planned once those before it have run; `tessera run --timing` lists their kernels\n"
    );
    if let Some(reason) = &staged.unplanned {
        text += &format!("not planned whole: {reason}\n");
    }
    for stage in &staged.stages {
        if let Some(Item::Query(pipeline)) = stage.script.items.last() {
            text += &format!("{} = {}\n", stage.table, written(pipeline.span));
        }
    }
    text
}

/// Whether a stage leaves its rows in a result on the host rather than in an open pipeline
/// (`physical::plan`'s `Flow::OnHost`). `union all` keeps its inputs' pipelines open.
fn ends_on_host(stage: &StageKind) -> bool {
    match stage {
        StageKind::Group { .. }
        | StageKind::Aggregate(_)
        | StageKind::Sort(_)
        | StageKind::Take(_)
        | StageKind::Distinct => true,
        StageKind::SetOp { op, all, .. } => !(*op == SetOp::Union && *all),
        StageKind::Where(_)
        | StageKind::Select(_)
        | StageKind::Derive(_)
        | StageKind::Join { .. }
        | StageKind::Product(_) => false,
    }
}

struct Splitter<'a> {
    declarations: Vec<Item>,
    /// The script's items rewritten so far.
    items: Vec<Item>,
    stages: Vec<Stage>,
    table_name: &'a mut dyn FnMut(usize) -> String,
}

impl Splitter<'_> {
    /// The latest `let` binding `name` among the first `limit` items: what `name` means inside
    /// item `limit` (a `let` may read an earlier binding of its own name).
    fn binding_before(&self, name: &str, limit: usize) -> Option<usize> {
        self.items[..limit]
            .iter()
            .rposition(|item| matches!(item, Item::Let(b) if b.name.name == name))
    }

    /// The pipeline a relation reads: its own, or the `let` its name refers to among the first
    /// `limit` items, with the items visible inside that pipeline.
    fn pipeline_of<'p>(
        &'p self,
        relation: &'p Relation,
        limit: usize,
    ) -> Option<(&'p Pipeline, usize)> {
        match &relation.source {
            RelationSource::Named(name) => {
                let at = self.binding_before(&name.name, limit)?;
                match &self.items[at] {
                    Item::Let(binding) => Some((&binding.pipeline, at)),
                    _ => None,
                }
            }
            RelationSource::Pipeline(pipeline) => Some((pipeline, limit)),
        }
    }

    /// Whether `stage` joins a `union all` in a way that builds one hash table from several
    /// pipelines whose keys may repeat (an inner or left join, or a `product`, whose every row
    /// matches): its rows become a table first, whose repeated keys the join then chains as any
    /// table's. A semi or anti join needs only each key once, and reads the `union all`'s
    /// pipelines as they are.
    fn builds_chained_union(&self, stage: &StageKind) -> bool {
        let relation = match stage {
            StageKind::Join {
                kind: JoinKind::Inner | JoinKind::Left,
                relation,
                ..
            } => relation,
            StageKind::Product(relation) => relation,
            _ => return false,
        };
        self.unions_all(relation, self.items.len())
    }

    /// Whether the rows of `relation` come from a `union all`: one among the stages of its
    /// pipeline (or its `let` name's), or of the relation that pipeline reads, and so on.
    fn unions_all(&self, relation: &Relation, limit: usize) -> bool {
        let Some((pipeline, limit)) = self.pipeline_of(relation, limit) else {
            return false;
        };
        let unions = pipeline.stages.iter().any(|s| {
            matches!(
                s.kind,
                StageKind::SetOp {
                    op: SetOp::Union,
                    all: true,
                    ..
                }
            )
        });
        unions || self.unions_all(&pipeline.from, limit)
    }

    fn relation_ends_on_host(&self, relation: &Relation) -> bool {
        self.relation_ends_on_host_before(relation, self.items.len())
    }

    fn relation_ends_on_host_before(&self, relation: &Relation, limit: usize) -> bool {
        self.pipeline_of(relation, limit)
            .is_some_and(|(pipeline, limit)| self.pipeline_ends_on_host(pipeline, limit))
    }

    /// Whether `pipeline`, with the first `limit` items visible, ends on the host.
    fn pipeline_ends_on_host(&self, pipeline: &Pipeline, limit: usize) -> bool {
        self.relation_ends_on_host_before(&pipeline.from, limit)
            || pipeline.stages.iter().any(|s| ends_on_host(&s.kind))
    }

    /// Rewrites `pipeline` so that no stage of it combines a relation ending on the host.
    fn rewrite(&mut self, pipeline: &mut Pipeline) {
        if let RelationSource::Pipeline(inner) = &mut pipeline.from.source {
            self.rewrite(inner);
        }
        let mut at = 0;
        while at < pipeline.stages.len() {
            let chained_union = self.builds_chained_union(&pipeline.stages[at].kind);
            let relation = match &mut pipeline.stages[at].kind {
                StageKind::Join { relation, .. }
                | StageKind::Product(relation)
                | StageKind::SetOp { relation, .. } => relation,
                _ => {
                    at += 1;
                    continue;
                }
            };
            if let RelationSource::Pipeline(inner) = &mut relation.source {
                self.rewrite(inner);
            }
            if chained_union || self.relation_ends_on_host(relation) {
                self.stage_relation(relation, self.items.len());
            }
            // The rows arriving at the stage end on the host: they become a table too.
            if self.relation_ends_on_host(&pipeline.from) {
                self.stage_relation(&mut pipeline.from, self.items.len());
            }
            if pipeline.stages[..at].iter().any(|s| ends_on_host(&s.kind)) {
                let stages: Vec<_> = pipeline.stages.drain(..at).collect();
                let span = tessera_grammar::Span {
                    start: pipeline.span.start,
                    end: stages.last().map_or(pipeline.span.end, |s| s.span.end),
                };
                let before = Pipeline {
                    from: pipeline.from.clone(),
                    stages,
                    span,
                };
                let table = self.stage(before, self.items.len());
                pipeline.from = Relation {
                    source: RelationSource::Named(Ident { name: table, span }),
                    alias: None,
                    span,
                };
                at = 0;
            }
            at += 1;
        }
    }

    /// Makes `relation`, read inside item `limit`, read the table of a new stage: a `let`
    /// name's binding is staged (once, for all its uses), a parenthesized pipeline in place.
    fn stage_relation(&mut self, relation: &mut Relation, limit: usize) {
        match &mut relation.source {
            RelationSource::Named(name) => {
                let Some(at) = self.binding_before(&name.name, limit) else {
                    return;
                };
                let Item::Let(binding) = &self.items[at] else {
                    return;
                };
                let pipeline = binding.pipeline.clone();
                let span = pipeline.span;
                let table = self.stage(pipeline, at);
                if let Item::Let(binding) = &mut self.items[at] {
                    binding.pipeline = Pipeline {
                        from: Relation {
                            source: RelationSource::Named(Ident { name: table, span }),
                            alias: None,
                            span,
                        },
                        stages: Vec::new(),
                        span,
                    };
                }
            }
            RelationSource::Pipeline(pipeline) => {
                let span = pipeline.span;
                let table = self.stage(pipeline.as_ref().clone(), limit);
                relation.source = RelationSource::Named(Ident { name: table, span });
            }
        }
    }

    /// A new stage running `pipeline` with the `let` bindings among the first `visible`
    /// items; returns its table's name.
    fn stage(&mut self, mut pipeline: Pipeline, visible: usize) -> String {
        // A `let` it reads that ends on the host is staged first, to be computed once for
        // this stage and every other use of it.
        if let RelationSource::Named(name) = &pipeline.from.source {
            let visible_let = self.binding_before(&name.name, visible).is_some();
            if visible_let && self.relation_ends_on_host_before(&pipeline.from, visible) {
                self.stage_relation(&mut pipeline.from, visible);
            }
        }
        let table = (self.table_name)(self.stages.len() + 1);
        let mut items = self.declarations.clone();
        items.extend(
            self.items[..visible]
                .iter()
                .filter(|item| matches!(item, Item::Let(_)))
                .cloned(),
        );
        items.push(Item::Query(pipeline));
        self.stages.push(Stage {
            table: table.clone(),
            script: Script { items },
        });
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_grammar::source_to_ast;

    /// The stages of `source` and the script left, each written as its pipelines' table names
    /// and stage keywords.
    fn split_source(source: &str) -> Vec<String> {
        let ast = source_to_ast(source).expect("parses");
        let Some(staged) = split(&ast, &mut |n| format!("stage{n}")) else {
            return vec!["(no stages)".into()];
        };
        let mut lines: Vec<String> = staged
            .stages
            .iter()
            .map(|stage| format!("{} <- {}", stage.table, outline(&stage.script)))
            .collect();
        lines.push(format!("main: {}", outline(&staged.script)));
        lines
    }

    fn outline(script: &Script) -> String {
        script
            .items
            .iter()
            .map(|item| match item {
                Item::Table(t) => format!("table {}", t.name.name),
                Item::Let(b) => format!("let {} = {}", b.name.name, pipeline(&b.pipeline)),
                Item::Query(p) => pipeline(p),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn relation(relation: &Relation) -> String {
        match &relation.source {
            RelationSource::Named(name) => name.name.clone(),
            RelationSource::Pipeline(p) => format!("({})", pipeline(p)),
        }
    }

    fn pipeline(pipeline: &Pipeline) -> String {
        let mut words = vec![format!("from {}", relation(&pipeline.from))];
        for stage in &pipeline.stages {
            words.push(match &stage.kind {
                StageKind::Where(_) => "where".into(),
                StageKind::Select(_) => "select".into(),
                StageKind::Derive(_) => "derive".into(),
                StageKind::Join { relation: r, .. } => format!("join {}", relation(r)),
                StageKind::Group { .. } => "group".into(),
                StageKind::Aggregate(_) => "aggregate".into(),
                StageKind::Sort(_) => "sort".into(),
                StageKind::Take(_) => "take".into(),
                StageKind::Distinct => "distinct".into(),
                StageKind::SetOp { relation: r, .. } => format!("setop {}", relation(r)),
                StageKind::Product(r) => format!("product {}", relation(r)),
            });
        }
        words.join(" | ")
    }

    #[test]
    fn pipelines_that_stay_on_the_device_need_no_stages() {
        let lines = split_source(
            "let big = from part | where p_size > 10\n\
             from lineitem | join big on l_partkey == p_partkey | group l_returnflag { n = count() } | sort l_returnflag",
        );
        assert_eq!(lines, ["(no stages)"]);
    }

    #[test]
    fn a_grouped_let_joined_is_staged_once_for_all_its_uses() {
        let lines = split_source(
            "let revenue = from lineitem | group l_suppkey { total = sum(l_extendedprice) }\n\
             let top = from revenue | aggregate { best = max(total) }\n\
             from supplier | join revenue on s_suppkey == l_suppkey | product top | where total == best",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from lineitem | group",
                "stage2 <- let revenue = from stage1; from revenue | aggregate",
                "main: let revenue = from stage1; let top = from stage2; \
                 from supplier | join revenue | product top | where",
            ]
        );
    }

    #[test]
    fn a_parenthesized_grouping_is_staged_in_place() {
        let lines = split_source(
            "from lineitem\n\
             | join (from lineitem | group l_partkey { limit = 0.2 * avg(l_quantity) }) as a on l_partkey == a.l_partkey\n\
             | where l_quantity < limit | aggregate { n = count() }",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from lineitem | group",
                "main: from lineitem | join stage1 | where | aggregate",
            ]
        );
    }

    #[test]
    fn rows_grouped_before_a_join_are_staged_up_to_it() {
        let lines = split_source(
            "from lineitem | group l_orderkey { quantity = sum(l_quantity) } | where quantity > 300\n\
             | join orders on l_orderkey == o_orderkey | sort o_totalprice desc | take 100",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from lineitem | group | where",
                "main: from stage1 | join orders | sort | take",
            ]
        );
    }

    #[test]
    fn a_grouped_let_read_by_a_staged_relation_is_staged_first() {
        let lines = split_source(
            "let revenue = from lineorder | group lo_suppkey { total = sum(lo_revenue) }\n\
             let best = from revenue | aggregate { top = max(total) }\n\
             from revenue | product best | where total == top",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from lineorder | group",
                "stage2 <- let revenue = from stage1; from revenue | aggregate",
                "main: let revenue = from stage1; let best = from stage2; \
                 from revenue | product best | where",
            ]
        );
    }

    #[test]
    fn stages_nest_inside_out() {
        let lines = split_source(
            "from supplier\n\
             | join semi (from partsupp | join (from lineitem | group l_partkey { q = sum(l_quantity) }) on ps_partkey == l_partkey | where ps_availqty > q) on s_suppkey == ps_suppkey",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from lineitem | group",
                "main: from supplier | join (from partsupp | join stage1 | where)",
            ]
        );
    }

    #[test]
    fn union_all_of_pipelines_stays_on_the_device_but_union_of_groups_does_not() {
        assert_eq!(
            split_source("from part | select p_size | union all (from part | select p_size)"),
            ["(no stages)"]
        );
        let lines = split_source(
            "from part | group p_size {} | union all (from supplier | group s_nation {} | select p_size = 1)",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from supplier | group | select",
                "stage2 <- from part | group",
                "main: from stage2 | setop stage1",
            ]
        );
    }

    #[test]
    fn a_union_all_joined_on_keys_that_may_repeat_is_staged_but_one_only_matched_is_not() {
        let lines = split_source(
            "let suppliers = from supplier | select s_suppkey | union all (from supplier | select s_suppkey)\n\
             let some = from suppliers | where s_suppkey > 3\n\
             from lineorder | join some on lo_suppkey == s_suppkey | join semi suppliers on lo_suppkey == s_suppkey | aggregate { n = count() }",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- let suppliers = from supplier | select | setop (from supplier | select); \
                 from suppliers | where",
                "main: let suppliers = from supplier | select | setop (from supplier | select); \
                 let some = from stage1; from lineorder | join some | join suppliers | aggregate",
            ]
        );
    }

    #[test]
    fn a_union_all_crossed_by_a_product_is_staged() {
        let lines = split_source(
            "from supplier | product (from supplier | union all supplier) | aggregate { n = count() }",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from supplier | setop supplier",
                "main: from supplier | product stage1 | aggregate",
            ]
        );
    }

    #[test]
    fn a_let_reading_an_earlier_binding_of_its_own_name_is_followed_there() {
        // Each `s` inside a `let s` is the one before it: following it to itself never ends.
        let lines = split_source(
            "let s = from lineitem | group l_suppkey { n = count() }\n\
             let s = from s | where n > 3\n\
             from supplier | join s on s_suppkey == l_suppkey",
        );
        assert_eq!(
            lines,
            [
                "stage1 <- from lineitem | group",
                "stage2 <- let s = from stage1; from s | where",
                "main: let s = from stage1; let s = from stage2; from supplier | join s",
            ]
        );
    }
}
