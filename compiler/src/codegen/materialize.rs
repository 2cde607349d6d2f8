//! The materializing sink: a pipeline whose selected rows are the result (or the input of host
//! steps) writes them out, one column per buffer. Each tile ranks its selected rows (`scan`),
//! takes room for them with one atomic (`reserve`) and writes them compacted and coalesced
//! (`shuffle` and `store`). The buffers hold as many rows as the scanned table has when the
//! query runs, the most a pipeline of filters and key-unique probes can pass (over a
//! grouping's slots, a row per slot), so the rows are written in one pass without counting
//! them first. A probe that matches several rows can
//! pass more: rows past the buffers' end are counted, not written, and the runtime runs the
//! query again with room for all of them. A pipeline that drops no row (a projection)
//! writes each row where it was read, with no ranks and no atomics beyond one count per tile.
//!
//! Rows of many columns are written by several kernels over the same rows, each writing a
//! share of the columns ([`row_columns_per_kernel`]): compilers take time growing faster than
//! linearly with the values a kernel keeps live (300 computed columns in one kernel took 7 s to
//! load on the H100). Their rows must land on the same rows: in place they do; compacted, the
//! first kernel records where each tile's rows went and the others write theirs there, their
//! filters selecting the same rows of each tile.

use tessera_grammar::Diagnostic;
use tessera_runtime::primitives::{scan, store};
use tessera_runtime::program::{Fill, Param, ResultShape, RowColumn};
use tessera_runtime::{CodegenError, CodegenResult, Target};
use tessera_storage::DataType;

use crate::columns::ColumnId;
use crate::physical::{Input, PhysicalQuery, Pipeline, Sink, Step};

use super::context::{QueryContext, SinkKind};
use super::kernel::Kernel;

/// The most columns one kernel writes out (see the module). The GPU driver's compiler is the
/// steep one: kernels of 32 columns loaded 300 columns in 0.52 s on the H100, one kernel in
/// 7.07 s. LLVM for the host spends about 6 ms a column on a kernel of 32 (vectorizing each
/// column's loop) and under 1 ms on one of hundreds, but grows past linear beyond that
/// (measured on 2 cores: 1,000 columns 0.43 s in one kernel and 3.8 s in kernels of 32; 10,000
/// columns 19 s in one kernel).
pub(super) fn row_columns_per_kernel(target: Target) -> usize {
    match target.is_gpu() {
        true => 32,
        false => 512,
    }
}

/// Where a kernel writing rows puts each tile's selected rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum RowPlacement {
    /// Each row where it was read: the pipeline drops no row and no other pipeline writes into
    /// its columns. One kernel (the first, when several write the columns) counts the rows.
    InPlace { counts: bool },
    /// Compacted after the rows of other tiles: each tile takes room with one atomic, and
    /// records where in `record` (a slot per tile of the table) when other kernels write the
    /// rest of the columns.
    Reserved { record: Option<usize> },
    /// Compacted where the first of the kernels writing the columns recorded that the tile's
    /// rows went.
    Recorded { starts: usize },
}

impl RowPlacement {
    /// Whether the kernel needs to know which row of its table a launch starts at.
    pub fn reads_first_row(self) -> bool {
        !matches!(self, RowPlacement::Reserved { record: None })
    }
}

/// How the rows of `pipeline` (writing `columns`) are placed when one kernel writes them all.
pub(super) fn row_placement(
    query: &PhysicalQuery,
    pipeline: &Pipeline,
    columns: &[ColumnId],
) -> RowPlacement {
    let keeps_every_row = pipeline
        .steps
        .iter()
        .all(|step| matches!(step, Step::Compute { .. }));
    // Other pipelines may write into the same output (the inputs of a `union all`): their
    // rows would then land on this one's.
    let writers = query
        .pipelines
        .iter()
        .filter(|p| matches!(&p.sink, Sink::Materialize { columns: c } if c == columns))
        .count();
    // A pipeline over a grouping's slots writes only the slots that hold a group.
    let over_table = !matches!(pipeline.input, Input::Groups(_));
    match keeps_every_row && writers == 1 && over_table {
        true => RowPlacement::InPlace { counts: true },
        false => RowPlacement::Reserved { record: None },
    }
}

/// The kernels writing the rows of `pipeline`, as shares of `columns` with their placement:
/// one kernel, or several of at most [`row_columns_per_kernel`] columns when the pipeline
/// selects the same rows of a tile each time it runs (no probe matching several rows, no
/// tiles taken in varying order).
pub(super) fn split_rows(
    qc: &mut QueryContext<'_>,
    pipeline: &Pipeline,
    mut columns: Vec<WrittenColumn>,
    placement: RowPlacement,
) -> Vec<(Vec<WrittenColumn>, RowPlacement)> {
    let repeatable = pipeline.input == Input::Table && !qc.probes_chains(pipeline);
    let per_kernel = row_columns_per_kernel(qc.target);
    if columns.len() <= per_kernel || !repeatable {
        return vec![(columns, placement)];
    }
    let (first, rest) = match placement {
        RowPlacement::InPlace { .. } => (placement, RowPlacement::InPlace { counts: false }),
        _ => {
            let starts = qc.buffer(format!("p{} tile starts", pipeline.id), 0, 8, Fill::Zero);
            qc.buffers[starts].per_row_of.push(pipeline.table.clone());
            qc.buffers[starts].rows_per_element = qc.tile.items();
            (
                RowPlacement::Reserved {
                    record: Some(starts),
                },
                RowPlacement::Recorded { starts },
            )
        }
    };
    let mut kernels = Vec::new();
    while !columns.is_empty() {
        let later = columns.split_off(per_kernel.min(columns.len()));
        let placement = match kernels.is_empty() {
            true => first,
            false => rest,
        };
        kernels.push((columns, placement));
        columns = later;
    }
    kernels
}

/// A column written out: its buffer, and the buffer of its validity bytes when it may be null.
pub(super) struct WrittenColumn {
    pub id: ColumnId,
    pub buffer: usize,
    pub validity: Option<usize>,
}

/// Allocates the buffers of the rows `columns` of `pipeline`; returns them with the row
/// counter's buffer, and how the result reads them. The buffers hold a row per row of the
/// pipeline's table, or over a grouping's slots, a row per slot.
pub(super) fn plan_rows(
    qc: &mut QueryContext<'_>,
    pipeline: &Pipeline,
    columns: &[ColumnId],
) -> Result<(Vec<WrittenColumn>, usize, ResultShape), Diagnostic> {
    let slots = qc
        .grouping_read(pipeline)
        .map_err(|e| Diagnostic::internal(qc.query.span, e.to_string()))?
        .map(|groups| super::groups::dense_slots(&groups));
    let query = qc.query;
    let sink = qc.sink(SinkKind::Rows, columns);
    let count_buffer = qc.sink_buffer(sink, "rows written", |qc| {
        qc.buffer("rows written".into(), 1, 8, Fill::Zero)
    });
    let mut written = Vec::with_capacity(columns.len());
    let mut described = Vec::with_capacity(columns.len());
    for &id in columns {
        if written.iter().any(|w: &WrittenColumn| w.id == id) {
            continue;
        }
        let info = query.columns.get(id);
        let dictionary = match info.ty {
            DataType::Str => Some(
                info.origin
                    .as_ref()
                    .map(|o| (o.table.clone(), o.column.clone()))
                    .ok_or_else(|| {
                        Diagnostic::unsupported(
                            query.span,
                            "returning a computed string is not supported yet",
                        )
                        .with_label(format!("`{}` is a computed string", info.name))
                    })?,
            ),
            _ => None,
        };
        let row_buffer = |qc: &mut QueryContext<'_>, name: String, width: u32| {
            let index = qc.sink_buffer(sink, &name, |qc| {
                let index = qc.buffer(name.clone(), 0, width, Fill::Zero);
                qc.buffers[index].output = true;
                index
            });
            let buffer = &mut qc.buffers[index];
            match slots {
                // A dense grouping's slots are known; a hash table's when the query runs.
                Some(Some(slots)) => buffer.elements = slots,
                Some(None) => buffer.per_group_slot = true,
                // Pipelines sharing the buffers (a `union all`) each add their table's rows.
                None => buffer.per_row_of.push(pipeline.table.clone()),
            }
            index
        };
        let buffer = row_buffer(qc, info.name.clone(), info.ty.width() as u32);
        let validity = info
            .nullable
            .then(|| row_buffer(qc, format!("{}_valid", info.name), 1));
        written.push(WrittenColumn {
            id,
            buffer,
            validity,
        });
        described.push(RowColumn {
            id: id.0,
            ty: info.ty,
            buffer,
            validity,
            dictionary,
        });
    }
    let shape = ResultShape::Rows {
        columns: described,
        count_buffer,
    };
    Ok((written, count_buffer, shape))
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    /// Writes the tile's selected rows out.
    pub(super) fn materialize_tile(
        &mut self,
        columns: &[WrittenColumn],
        count_buffer: usize,
        placement: RowPlacement,
    ) -> CodegenResult<()> {
        let ids: Vec<ColumnId> = columns.iter().map(|c| c.id).collect();
        self.load_columns(&ids)?;
        let mut stored = Vec::with_capacity(columns.len() * 2);
        for column in columns {
            let tile = *self.tiles.get(&column.id).ok_or_else(|| {
                CodegenError::Invalid(format!("output column {} is not in registers", column.id))
            })?;
            stored.push(store::StoredColumn {
                values: tile.values,
                out: self.buffer(column.buffer)?,
            });
            if let Some(validity) = column.validity {
                let valid = match tile.valid {
                    Some(valid) => valid,
                    None => self.all_valid()?,
                };
                stored.push(store::StoredColumn {
                    values: valid,
                    out: self.buffer(validity)?,
                });
            }
        }
        let counter = self.buffer(count_buffer)?;
        let capacity = self.param(&Param::RowCapacity)?.into_int_value();
        // The tile's row in the whole table (a launch over a piece of it starts past 0).
        let table_row = match placement.reads_first_row() {
            true => {
                let first_row = self.param(&Param::FirstRow)?.into_int_value();
                self.em.b.build_int_add(first_row, self.tile_start, "")?
            }
            false => self.tile_start,
        };
        let em = &self.em;
        let table_tile = || {
            let items = em.const_i64(i64::from(em.tile.items()));
            em.b.build_int_unsigned_div(table_row, items, "table_tile")
        };
        if let RowPlacement::InPlace { counts } = placement {
            if counts {
                store::count_rows(em, counter, self.num_items)?;
            }
            return store::store_in_place(em, &stored, table_row, self.num_items);
        }
        let ranks = em.tile_array(em.i32().into(), "ranks")?;
        let selected = scan::tile_ranks(em, self.flags, ranks)?;
        // `selected` is the same in every thread, so the whole block takes the branch or not.
        let any =
            em.b.build_int_compare(inkwell::IntPredicate::NE, selected, em.const_i32(0), "")?;
        let starts = |buffer: usize| self.buffer(buffer);
        em.if_then(any, || {
            let start = match placement {
                RowPlacement::Recorded { starts: buffer } => {
                    store::recorded_start(em, starts(buffer)?, table_tile()?)?
                }
                _ => store::reserve(em, counter, selected)?,
            };
            if let RowPlacement::Reserved {
                record: Some(buffer),
            } = placement
            {
                store::record_start(em, starts(buffer)?, table_tile()?, start)?;
            }
            store::store_columns(em, &stored, self.flags, ranks, selected, start, capacity)
        })
    }

    /// A tile of validity bytes that are all 1, for a column that may be null in general but
    /// whose values here all exist.
    fn all_valid(&self) -> CodegenResult<tessera_runtime::emit::TileArray<'ctx>> {
        let em = &self.em;
        let valid = em.tile_array(em.i8().into(), "all_valid")?;
        em.for_each_item(|item| em.set(valid, item, em.i8().const_int(1, false)))?;
        Ok(valid)
    }
}
