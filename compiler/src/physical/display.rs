//! Printing physical plans (`--emit physical`).

use std::fmt::Write;

use tessera_grammar::ast::JoinKind;

use crate::columns::Columns;
use crate::expr::{aggregates_text, literal_text, outputs_text, StrBound};

use super::constants::Constant;

use super::{
    BuildKeys, DenseUpdates, GroupLayout, HashLayout, HostStep, Input, PartitionPass,
    PhysicalQuery, Sink, Step, ThreadValues,
};

pub fn physical_to_string(queries: &[PhysicalQuery]) -> String {
    let mut out = String::new();
    for (i, query) in queries.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        write_query(&mut out, i, query);
    }
    out
}

fn write_query(out: &mut String, index: usize, query: &PhysicalQuery) {
    let columns = &query.columns;
    let names: Vec<String> = query
        .output
        .iter()
        .map(|(name, id)| format!("{name}: {}", columns.get(*id).ty))
        .collect();
    let _ = writeln!(out, "query {index} -> {}", names.join(", "));
    for pipeline in &query.pipelines {
        let _ = match pipeline.input {
            Input::Table => writeln!(
                out,
                "  pipeline {}: scan {} ({} rows)",
                pipeline.id, pipeline.table, pipeline.rows
            ),
            Input::Partitioned(id) => writeln!(
                out,
                "  pipeline {}: scan partitioning {id}, in order of its parts (at most {} rows of {})",
                pipeline.id, pipeline.rows, pipeline.table
            ),
            Input::Groups(id) => match query.pipelines.get(id).map(|p| &p.sink) {
                Some(Sink::Aggregate {
                    layout: GroupLayout::Scalar,
                    ..
                }) => writeln!(
                    out,
                    "  pipeline {}: the one row of pipeline {id}'s aggregate",
                    pipeline.id
                ),
                _ => writeln!(
                    out,
                    "  pipeline {}: the groups of pipeline {id}, a row per slot",
                    pipeline.id
                ),
            },
        };
        if !pipeline.renamed.is_empty() {
            // The same names on both sides are two columns: the grouping asked for again.
            let names: Vec<&str> = pipeline
                .renamed
                .iter()
                .map(|(name, _)| query.columns.get(*name).name.as_str())
                .collect();
            let _ = writeln!(
                out,
                "    read again as this part's {} (the grouping is asked for twice)",
                names.join(", ")
            );
        }
        for step in &pipeline.steps {
            let _ = match step {
                Step::Filter {
                    predicate,
                    selectivity,
                } => writeln!(
                    out,
                    "    filter {}  [sel {}]",
                    predicate.display(columns),
                    fraction(*selectivity)
                ),
                Step::Probe {
                    table,
                    key,
                    kind,
                    selectivity,
                    ..
                } => {
                    let kind = match kind {
                        JoinKind::Inner => "probe",
                        JoinKind::Semi => "probe semi",
                        JoinKind::Anti => "probe anti",
                        JoinKind::Left => "probe left",
                    };
                    // A left probe's columns are null where no row matched.
                    let defined = step.defines(&query.hash_tables);
                    let carried = if defined.is_empty() {
                        String::new()
                    } else {
                        format!(" -> {}", names_of(&defined, columns))
                    };
                    writeln!(
                        out,
                        "    {kind} ht{table} key {}{carried}  [sel {}]",
                        key.display(columns),
                        fraction(*selectivity)
                    )
                }
                Step::Compute { column, expr } => {
                    writeln!(
                        out,
                        "    compute {} = {}",
                        columns.get(*column).name,
                        expr.display(columns)
                    )
                }
            };
        }
        let _ = match &pipeline.sink {
            Sink::Build { table, key } => {
                let ht = &query.hash_tables[*table];
                let mut layout = match ht.layout {
                    HashLayout::Perfect { min, max } if ht.is_key_set() => {
                        format!("perfect {min}..={max}, a bit per key")
                    }
                    HashLayout::Perfect { min, max } => format!("perfect {min}..={max}"),
                    HashLayout::Open { capacity } => format!("open addressing, {capacity} slots"),
                };
                match ht.keys {
                    BuildKeys::Unique => {}
                    BuildKeys::Shared => layout.push_str(", keys may repeat"),
                    BuildKeys::Chained => layout.push_str(", chained rows"),
                }
                if let Some(probe) = &ht.key_codes_of {
                    layout.push_str(&format!(", keys as codes of {probe}"));
                }
                let payload = if ht.payload.is_empty() {
                    String::new()
                } else {
                    format!(" -> {}", names_of(&ht.payload, columns))
                };
                writeln!(
                    out,
                    "    build ht{table} key {}{payload}  [{layout}, {}; ~{} of {} rows]",
                    key.display(columns),
                    size(ht.bytes(columns)),
                    ht.estimated_rows.round(),
                    ht.max_rows
                )
            }
            Sink::Aggregate {
                keys,
                aggregates,
                layout,
            } => {
                let thread_values = ThreadValues::of(aggregates.iter().map(|(_, a)| a));
                let aggregates = aggregates_text(aggregates, columns);
                let layout = match layout {
                    GroupLayout::Scalar => String::new(),
                    GroupLayout::Dense { domains, updates } => {
                        let sizes: Vec<String> = domains
                            .iter()
                            .map(|d| match d.nullable {
                                true => format!("({} + null)", d.size),
                                false => d.size.to_string(),
                            })
                            .collect();
                        let local = match updates {
                            DenseUpdates::Global => "",
                            DenseUpdates::BlockLocal => ", block-local first",
                            DenseUpdates::PerThread => &match thread_values.values.len() {
                                1 => ", per thread first (1 value a slot)".to_string(),
                                n => format!(", per thread first ({n} values a slot)"),
                            },
                        };
                        format!(
                            "  [dense {} = {} slots{local}]",
                            sizes.join(" x "),
                            layout.slots()
                        )
                    }
                    GroupLayout::Hash {
                        capacity,
                        ranges: None,
                    } => format!("  [hash, {capacity} slots]"),
                    GroupLayout::Hash {
                        capacity,
                        ranges: Some(ranges),
                    } => {
                        let bits: Vec<String> =
                            ranges.iter().map(|r| r.offset_bits().to_string()).collect();
                        format!(
                            "  [hash, {capacity} slots, keys packed by range: {} bits]",
                            bits.join(" + ")
                        )
                    }
                };
                if keys.is_empty() {
                    writeln!(out, "    aggregate {{ {aggregates} }}")
                } else {
                    let keys = outputs_text(keys, columns);
                    writeln!(out, "    group {keys} {{ {aggregates} }}{layout}")
                }
            }
            Sink::Materialize {
                columns: materialized,
            } => {
                writeln!(out, "    materialize {}", names_of(materialized, columns))
            }
            Sink::Partition { partitioning, pass } => {
                let partitioning = &query.partitionings[*partitioning];
                let pass = match pass {
                    PartitionPass::Count => "count",
                    PartitionPass::Write => "write",
                };
                writeln!(
                    out,
                    "    partition {} by the slot of {} in ht{}, {} parts: {pass} {}",
                    partitioning.id,
                    columns.get(partitioning.key).name,
                    partitioning.table,
                    partitioning.parts,
                    names_of(&partitioning.columns, columns)
                )
            }
            Sink::KeepGroups => writeln!(out, "    keep the groups selected"),
        };
        write_group_slot_tables(out, query, pipeline.id);
    }
    if !query.constants.is_empty() {
        let constants: Vec<String> = query
            .constants
            .iter()
            .enumerate()
            .map(|(slot, constant)| match constant {
                Constant::Value(value) => format!("${slot} = {}", literal_text(value)),
                Constant::StrCode(code) => {
                    let which = match code.bound {
                        StrBound::Exact => "the code of",
                        StrBound::Lower => "the first code at or above",
                        StrBound::Upper => "the first code above",
                    };
                    let text = literal_text(&constant.value());
                    format!("${slot} = {which} {text} in {}", code.dictionary)
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  constants (kernel parameters): {}",
            constants.join(", ")
        );
    }
    for (column, min, max) in &query.assumptions {
        let _ = writeln!(
            out,
            "  assumes {} in {min}..={max} (checked when the program runs)",
            columns.get(*column).name
        );
    }
    for step in &query.host_steps {
        let _ = match step {
            HostStep::Filter(predicate) => {
                writeln!(out, "  host: filter {}", predicate.display(columns))
            }
            HostStep::Aggregate { keys, aggregates } if keys.is_empty() => writeln!(
                out,
                "  host: aggregate {{ {} }}",
                aggregates_text(aggregates, columns)
            ),
            HostStep::Aggregate { keys, aggregates } => writeln!(
                out,
                "  host: group {} {{ {} }}",
                outputs_text(keys, columns),
                aggregates_text(aggregates, columns)
            ),
            HostStep::Project(outputs) => {
                let outputs: Vec<String> = outputs
                    .iter()
                    .map(|(id, e)| format!("{} = {}", columns.get(*id).name, e.display(columns)))
                    .collect();
                writeln!(out, "  host: project {}", outputs.join(", "))
            }
            HostStep::Sort { keys, on_device } => {
                let keys: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        format!(
                            "{}{}",
                            k.expr.display(columns),
                            if k.descending { " desc" } else { "" }
                        )
                    })
                    .collect();
                let place = if *on_device { "device" } else { "host" };
                writeln!(out, "  {place}: sort {}", keys.join(", "))
            }
            HostStep::Limit(n) => writeln!(out, "  host: take {n}"),
            HostStep::CheckSum { exact, approximate } => writeln!(
                out,
                "  host: check {} against {} for 64-bit overflow",
                columns.get(*exact).name,
                columns.get(*approximate).name
            ),
            HostStep::Repeat(copies) => {
                writeln!(
                    out,
                    "  host: repeat each row {} times",
                    copies.display(columns)
                )
            }
        };
    }
}

/// The join tables that are grouping pipeline `grouping`'s slots, probed in place.
fn write_group_slot_tables(out: &mut String, query: &PhysicalQuery, grouping: usize) {
    let columns = &query.columns;
    let Some(Sink::Aggregate { keys, .. }) = query.pipelines.get(grouping).map(|p| &p.sink) else {
        return;
    };
    let tables = query
        .hash_tables
        .iter()
        .filter(|ht| ht.in_group_slots && ht.built_by == grouping);
    for ht in tables {
        let HashLayout::Perfect { min, max } = ht.layout else {
            continue;
        };
        let payload = if ht.payload.is_empty() {
            String::new()
        } else {
            format!(" -> {}", names_of(&ht.payload, columns))
        };
        let _ = writeln!(
            out,
            "    its slots are ht{} key {}{payload}  [perfect {min}..={max}, probed in place, {}]",
            ht.id,
            names_of(&keys.iter().map(|(id, _)| *id).collect::<Vec<_>>(), columns),
            size(ht.bytes(columns)),
        );
    }
}

fn names_of(ids: &[crate::columns::ColumnId], columns: &Columns) -> String {
    ids.iter()
        .map(|id| columns.get(*id).name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Bytes as B, KB or MB (powers of 1024), whole numbers.
fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} B"),
        b if b < 1 << 20 => format!("{} KB", b.div_ceil(1 << 10)),
        b => format!("{} MB", b.div_ceil(1 << 20)),
    }
}

/// Selectivities to three significant digits, so snapshots stay stable and readable.
fn fraction(x: f64) -> String {
    if x == 0.0 || x == 1.0 {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}
