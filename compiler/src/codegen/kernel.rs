//! The object every generator of one kernel writes through: the function for the target (a
//! grid of thread blocks, one tile each, on the GPU; a loop over a range of tiles on the host)
//! and its parameters, the loop over tiles, the flags and column tiles in registers, and the
//! reading of a table's stored columns (plain, packed in blocks or at one width) or of a
//! partitioning's buffers. The order in which a kernel's code is generated is `pipeline.rs`'s.

use std::collections::HashMap;

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate;
use tessera_runtime::emit::TileArray;
use tessera_runtime::primitives::hash::status;
use tessera_runtime::primitives::unpack::{PackedColumn, StagedColumn, TileWords};
use tessera_runtime::primitives::unpack_fixed::{
    unpack_codes, unpack_fixed, CodeBase, FixedColumn, Rows,
};
use tessera_runtime::primitives::{load, unpack};
use tessera_runtime::program::{Param, ResultShape};
use tessera_runtime::{CodegenError, CodegenResult, Emitter, KernelArgs, Target, TileShape};
use tessera_storage::compress::{Part, Scheme};
use tessera_storage::{Catalog, StorageError};

use crate::columns::{BaseColumn, ColumnId};
use crate::physical::{PhysicalQuery, Pipeline};

use super::context::{PartitionBuffers, QueryContext};

/// Static shared memory a GPU thread block may declare.
pub(super) const STATIC_SHARED_BYTES: u64 = 48 << 10;

/// Below this estimated fraction of rows still selected, columns are loaded with `load_sel`:
/// with 8 rows per 32-byte sector, a sector is skipped only when all its rows are rejected.
const LOAD_SEL_BELOW: f64 = 0.1;

/// A column's values for the current tile, and which of them are valid (when nullable).
#[derive(Clone, Copy)]
pub(super) struct ColumnTile<'ctx> {
    pub values: TileArray<'ctx>,
    pub valid: Option<TileArray<'ctx>>,
}

pub(super) struct Kernel<'k, 'ctx, 'm> {
    pub em: Emitter<'ctx, 'm>,
    pub query: &'k PhysicalQuery,
    pub pipeline: &'k Pipeline,
    pub params: Vec<Param>,
    args: KernelArgs<'ctx>,
    pub tile_start: IntValue<'ctx>,
    pub num_items: IntValue<'ctx>,
    pub flags: TileArray<'ctx>,
    pub tiles: HashMap<ColumnId, ColumnTile<'ctx>>,
    /// The estimated fraction of the tile's rows still selected.
    pub selected: f64,
    /// The loop over tiles while its body is generated.
    tile_loop: Option<TileLoop<'ctx>>,
    /// The columns packed in blocks the kernel reads, and their tiles once staged.
    packed: Vec<PackedSlot<'ctx>>,
    /// The columns packed at one width the kernel reads.
    fixed: Vec<FixedSlot<'ctx>>,
    /// On the GPU, the buffer counting the tiles blocks have taken, when blocks take their
    /// next tile from it rather than striding over the grid.
    pub(super) tile_counter: Option<usize>,
    /// For a pipeline over a partitioning's rows, that partitioning's buffers.
    pub(super) partitioned: Option<PartitionBuffers>,
    /// For a pipeline over a grouping's slots, the grouping (`groups.rs`), and for the current
    /// tile, its slots' flags and which of them hold a group.
    pub(super) groups: Option<ResultShape>,
    pub(super) group_words: Option<TileArray<'ctx>>,
    /// A wide hash key's second and later words, for the current tile.
    pub(super) group_key_words: Vec<TileArray<'ctx>>,
    pub(super) group_present: Option<TileArray<'ctx>>,
    /// The query's status words (every pipeline kernel receives them).
    pub status: usize,
    /// Whether each block sums its rows into its own copy of the group slots first
    /// ([`KernelChoices::group_copy`]).
    pub(super) group_copy: bool,
}

/// A packed column of the kernel: `table.column` as the kernel receives it, and on the GPU the
/// current tile staged in shared memory.
struct PackedSlot<'ctx> {
    table: String,
    column: String,
    packed: PackedColumn<'ctx>,
    staged: Option<StagedColumn<'ctx>>,
}

/// A column packed at one width: `table.column` as the kernel receives it.
struct FixedSlot<'ctx> {
    table: String,
    column: String,
    fixed: FixedColumn<'ctx>,
}

/// A block's loop over its tiles: on the GPU the grid strides over all tiles (a persistent
/// grid, so per-block set-up and flushes are paid once per block, not once per tile); on the
/// host a thread runs the range of tiles it is handed.
struct TileLoop<'ctx> {
    header: inkwell::basic_block::BasicBlock<'ctx>,
    exit: inkwell::basic_block::BasicBlock<'ctx>,
    tile: inkwell::values::PhiValue<'ctx>,
    stride: IntValue<'ctx>,
    /// The block's next tile, when taken from the kernel's tile counter rather than `stride`
    /// tiles on.
    taken: Option<IntValue<'ctx>>,
    /// On the GPU, per packed column: where the current tile lies (phis) and where the block's
    /// next tile lies, loaded during this one.
    words_ahead: Vec<([inkwell::values::PhiValue<'ctx>; 3], TileWords<'ctx>)>,
}

/// The parameters through which a kernel reads stored column `origin` in `scheme`: a buffer
/// per part of its reading ([`Scheme::reading`]: plain values, codes at one width with their
/// reference or dictionary, or blocks of at most `block_words` words with where each block
/// starts) and, when `nullable`, its validity bytes. `Kernel::new` and `load_table_column`
/// read them.
pub(super) fn stored_column_params(
    catalog: &Catalog,
    origin: &BaseColumn,
    scheme: Scheme,
    block_words: u32,
    nullable: bool,
) -> Result<Vec<Param>, StorageError> {
    let (table, column) = (origin.table.clone(), origin.column.clone());
    let parts = scheme.reading().parts;
    let mut params = Vec::with_capacity(parts.len() + 1);
    for part in parts {
        params.push(match part {
            Part::Values => Param::Column {
                table: table.clone(),
                column: column.clone(),
            },
            Part::CodesFromReference | Part::CodesIntoDictionary => {
                let packed = catalog.packed(&table, &column, scheme)?;
                Param::FixedWords {
                    table: table.clone(),
                    column: column.clone(),
                    scheme,
                    width: packed.width,
                    reference: (*part == Part::CodesFromReference)
                        .then(|| packed.dictionary.first().copied().unwrap_or(0)),
                }
            }
            Part::Dictionary => Param::Dictionary {
                table: table.clone(),
                column: column.clone(),
                scheme,
                entries: None,
            },
            Part::BlockWords => Param::PackedWords {
                table: table.clone(),
                column: column.clone(),
                scheme,
                block_words,
            },
            Part::BlockStarts => Param::BlockStarts {
                table: table.clone(),
                column: column.clone(),
                scheme,
            },
        });
    }
    if nullable {
        params.push(Param::Validity { table, column });
    }
    Ok(params)
}

/// The parameters through which a kernel over a partitioning's rows reads them: how many were
/// written, and the buffers of the columns among `used` (`load_table_column`).
pub(super) fn partition_params(buffers: &PartitionBuffers, used: &[ColumnId]) -> Vec<Param> {
    let mut params = vec![Param::Buffer(buffers.total)];
    for (column, values, valid) in &buffers.columns {
        if used.contains(column) {
            params.push(Param::Buffer(*values));
            params.extend(valid.map(Param::Buffer));
        }
    }
    params
}

impl<'k, 'ctx, 'm> Kernel<'k, 'ctx, 'm> {
    pub(super) fn new(
        context: &'ctx Context,
        module: &'m Module<'ctx>,
        qc: &QueryContext<'k>,
        pipeline: &'k Pipeline,
        params: Vec<Param>,
        tile: TileShape,
        name: &str,
    ) -> CodegenResult<Kernel<'k, 'ctx, 'm>> {
        let target = qc.target;
        let pointers: Vec<bool> = params.iter().map(Param::is_pointer).collect();
        let (em, args) = Emitter::new_kernel(context, module, target, tile, name, &pointers)?;
        let flags = em.tile_array(em.i8().into(), "flags")?;
        let mut fixed = Vec::new();
        for (index, param) in params.iter().enumerate() {
            let Param::FixedWords {
                table,
                column,
                scheme,
                width,
                reference,
            } = param
            else {
                continue;
            };
            let base = match reference {
                Some(reference) => CodeBase::Reference(*reference),
                None => {
                    let dictionary = Param::Dictionary {
                        table: table.clone(),
                        column: column.clone(),
                        scheme: *scheme,
                        entries: None,
                    };
                    let dictionary =
                        params
                            .iter()
                            .position(|p| *p == dictionary)
                            .ok_or_else(|| {
                                CodegenError::Invalid(format!("{table}.{column} has no dictionary"))
                            })?;
                    CodeBase::Dictionary(args.get(&em, dictionary)?.into_pointer_value())
                }
            };
            fixed.push(FixedSlot {
                table: table.clone(),
                column: column.clone(),
                fixed: FixedColumn {
                    scheme: *scheme,
                    width: *width,
                    words: args.get(&em, index)?.into_pointer_value(),
                    base,
                },
            });
        }
        let mut packed = Vec::new();
        for (index, param) in params.iter().enumerate() {
            let Param::PackedWords {
                table,
                column,
                scheme,
                block_words,
            } = param
            else {
                continue;
            };
            let starts = Param::BlockStarts {
                table: table.clone(),
                column: column.clone(),
                scheme: *scheme,
            };
            let starts = params.iter().position(|p| *p == starts).ok_or_else(|| {
                CodegenError::Invalid(format!("{table}.{column} has no block starts"))
            })?;
            packed.push(PackedSlot {
                table: table.clone(),
                column: column.clone(),
                packed: PackedColumn {
                    scheme: *scheme,
                    block_words: *block_words,
                    words: args.get(&em, index)?.into_pointer_value(),
                    block_starts: args.get(&em, starts)?.into_pointer_value(),
                },
                staged: None,
            });
        }
        Ok(Kernel {
            em,
            query: qc.query,
            pipeline,
            params,
            args,
            tile_start: context.i64_type().const_zero(),
            num_items: context.i32_type().const_zero(),
            flags,
            tiles: HashMap::new(),
            selected: 1.0,
            tile_loop: None,
            packed,
            fixed,
            tile_counter: None,
            partitioned: None,
            groups: None,
            group_words: None,
            group_key_words: Vec::new(),
            group_present: None,
            status: qc.status,
            group_copy: false,
        })
    }

    /// Starts the loop over this block's (or host thread's) tiles of an input of `rows` rows
    /// (an `i64`); inside it, `tile_start` and `num_items` describe the current tile.
    pub(super) fn open_tiles(&mut self, rows: IntValue<'ctx>) -> CodegenResult<()> {
        let em = &self.em;
        let items = em.const_i64(i64::from(em.tile.items()));
        let (first, end, stride) = match em.target {
            Target::Nvptx { .. } => {
                let last =
                    em.b.build_int_add(rows, em.const_i64(i64::from(em.tile.items()) - 1), "")?;
                let tiles = em.b.build_int_signed_div(last, items, "tiles")?;
                let first = em.b.build_int_z_extend(em.block_index()?, em.i64(), "")?;
                let stride = em.b.build_int_z_extend(em.grid_size()?, em.i64(), "grid")?;
                (first, tiles, stride)
            }
            Target::Host => {
                let param = |i: u32| {
                    em.function
                        .get_nth_param(i)
                        .map(|v| v.into_int_value())
                        .ok_or_else(|| {
                            CodegenError::Invalid("host kernels take a tile range".into())
                        })
                };
                (param(1)?, param(2)?, em.const_i64(1))
            }
        };
        // Where each packed column's first tile lies, loaded before the loop (a block past
        // the last tile loads the first tile's, and leaves the loop at once).
        let mut words_ahead = Vec::new();
        if em.target.is_gpu() && !self.packed.is_empty() {
            let inside = em.b.build_int_compare(IntPredicate::SLT, first, end, "")?;
            let tile = em.b.build_select(inside, first, em.const_i64(0), "")?;
            let (start, count) = tile_extent(em, tile.into_int_value(), rows)?;
            for slot in &self.packed {
                words_ahead.push(unpack::tile_words(em, &slot.packed, start, count)?);
            }
        }
        let before = em.current_block()?;
        let header = em.ctx.append_basic_block(em.function, "tile_loop");
        let body = em.ctx.append_basic_block(em.function, "tile");
        let exit = em.ctx.append_basic_block(em.function, "tiles_done");
        em.b.build_unconditional_branch(header)?;
        em.b.position_at_end(header);
        let tile = em.b.build_phi(em.i64(), "tile")?;
        tile.add_incoming(&[(&first, before)]);
        let mut current = Vec::with_capacity(words_ahead.len());
        for words in &words_ahead {
            let phi = |value: IntValue<'ctx>| -> CodegenResult<inkwell::values::PhiValue<'ctx>> {
                let phi = em.b.build_phi(em.i32(), "tile_words")?;
                phi.add_incoming(&[(&value, before)]);
                Ok(phi)
            };
            let [first, end, header] = words.to_array();
            current.push([phi(first)?, phi(end)?, phi(header)?]);
        }
        let index = tile.as_basic_value().into_int_value();
        let more = em.b.build_int_compare(IntPredicate::SLT, index, end, "")?;
        em.b.build_conditional_branch(more, body, exit)?;
        em.b.position_at_end(body);
        let (tile_start, num_items) = tile_extent(em, index, rows)?;
        self.num_items = num_items;
        self.tile_start = tile_start;
        let taken = match self.tile_counter {
            Some(counter) => {
                let counter = self.param(&Param::Buffer(counter))?.into_pointer_value();
                Some(taken_tile(
                    em,
                    counter,
                    stride,
                    &format!("{}.next_tile", em.function.get_name().to_string_lossy()),
                )?)
            }
            None => None,
        };
        let mut words_ahead = Vec::with_capacity(current.len());
        if !current.is_empty() {
            // The block's next tile (or this one again, past the last), requested now so that
            // its words' place is known when it starts.
            let next = match taken {
                Some(next) => next,
                None => em.b.build_int_add(index, stride, "")?,
            };
            let inside = em.b.build_int_compare(IntPredicate::SLT, next, end, "")?;
            let next = em.b.build_select(inside, next, index, "")?;
            let (start, count) = tile_extent(em, next.into_int_value(), rows)?;
            let mut staging = Vec::with_capacity(current.len());
            for (slot, phis) in self.packed.iter().zip(current) {
                let next = unpack::tile_words(em, &slot.packed, start, count)?;
                words_ahead.push((phis, next));
                let now =
                    TileWords::from_array(phis.map(|phi| phi.as_basic_value().into_int_value()));
                staging.push((format!("{}.{}", slot.table, slot.column), slot.packed, now));
            }
            let staged = unpack::stage(em, &staging, num_items)?;
            for (slot, staged) in self.packed.iter_mut().zip(staged) {
                slot.staged = Some(staged);
            }
        }
        self.tile_loop = Some(TileLoop {
            header,
            exit,
            tile,
            stride,
            taken,
            words_ahead,
        });
        Ok(())
    }

    /// Whether this thread sees the query's cancel word set (an `i1`): read past the L1
    /// cache, which the host's write does not reach, as a plain load the assembler may move.
    ///
    /// Kernels look at it where their work has no bound the host can see: in each round over
    /// a tile's matches (`steps::probe_chained`: a key of many rows, a product). A scan runs
    /// to its end — milliseconds — as do those queued behind it, and the host launches no
    /// more. Looking before each tile, even once in 64, cost SSB's kernels at SF 20 2-4% on
    /// an H100.
    pub fn cancel_seen(&self) -> CodegenResult<IntValue<'ctx>> {
        let status = self.buffer(self.status)?;
        let em = &self.em;
        let word = em.const_i64(i64::from(status::CANCELLED));
        // SAFETY: the status buffer holds `status::WORDS` words.
        let at = unsafe { em.b.build_gep(em.i32(), status, &[word], "cancel_word")? };
        let ty = em.i32().fn_type(&[em.global_ptr().into()], false);
        let asm = em.ctx.create_inline_asm(
            ty,
            "ld.global.cg.u32 $0, [$1];".into(),
            "=r,l".into(),
            true,
            false,
            None,
            false,
        );
        let read =
            em.b.build_indirect_call(ty, asm, &[at.into()], "cancel_read")?;
        let read = read
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| CodegenError::Invalid("the cancel word's read has no value".into()))?
            .into_int_value();
        Ok(em
            .b
            .build_int_compare(IntPredicate::NE, read, em.const_i32(0), "")?)
    }

    /// Ends the loop over tiles; the builder continues after it.
    pub(super) fn close_tiles(&mut self) -> CodegenResult<()> {
        let tile_loop = self
            .tile_loop
            .take()
            .ok_or_else(|| CodegenError::Invalid("no tile loop to close".into()))?;
        let em = &self.em;
        let latch = em.current_block()?;
        let next = match tile_loop.taken {
            Some(next) => next,
            None => {
                let tile = tile_loop.tile.as_basic_value().into_int_value();
                em.b.build_int_add(tile, tile_loop.stride, "next_tile")?
            }
        };
        tile_loop.tile.add_incoming(&[(&next, latch)]);
        for (phis, next) in &tile_loop.words_ahead {
            for (phi, value) in phis.iter().zip(next.to_array()) {
                phi.add_incoming(&[(&value, latch)]);
            }
        }
        em.b.build_unconditional_branch(tile_loop.header)?;
        // The exit goes after the loop's last block, where LLVM's inliner and loop passes
        // would otherwise move it, each pipeline its own way.
        if let Some(last) = em.function.get_last_basic_block() {
            if last != tile_loop.exit {
                tile_loop.exit.move_after(last).map_err(|()| {
                    CodegenError::Invalid("cannot move the tile loop's exit".into())
                })?;
            }
        }
        em.b.position_at_end(tile_loop.exit);
        for slot in &mut self.packed {
            slot.staged = None;
        }
        Ok(())
    }

    /// Ends the function; returns the kernel's parameters.
    pub(super) fn finish(self) -> CodegenResult<Vec<Param>> {
        self.em.b.build_return(None)?;
        Ok(self.params)
    }

    pub fn param(&self, param: &Param) -> CodegenResult<BasicValueEnum<'ctx>> {
        self.params
            .iter()
            .position(|p| p == param)
            .ok_or_else(|| CodegenError::Invalid(format!("no kernel parameter {param:?}")))
            .and_then(|i| self.args.get(&self.em, i))
    }

    pub fn buffer(&self, index: usize) -> CodegenResult<inkwell::values::PointerValue<'ctx>> {
        Ok(self.param(&Param::Buffer(index))?.into_pointer_value())
    }

    /// The codes of scanned column `id`, stored at one width, for the tile's rows (the selected
    /// ones, when few are): what a table keyed by the column's codes is probed with.
    pub fn load_codes(&mut self, id: ColumnId) -> CodegenResult<TileArray<'ctx>> {
        let info = self.query.columns.get(id);
        let slot = info
            .origin
            .as_ref()
            .and_then(|origin| {
                self.fixed
                    .iter()
                    .find(|slot| slot.table == origin.table && slot.column == origin.column)
            })
            .ok_or_else(|| {
                CodegenError::Invalid(format!("{} is not stored at one width", info.name))
            })?;
        let codes = self
            .em
            .tile_array(self.em.i32().into(), &format!("{}_codes", info.name))?;
        unpack_codes(
            &self.em,
            &slot.fixed,
            self.tile_start,
            self.rows_to_decode(),
            codes,
        )?;
        Ok(codes)
    }

    /// Which rows of the tile a column stored at one width is decoded for: the selected ones
    /// once few are, like `load_sel`; otherwise every row.
    fn rows_to_decode(&self) -> Rows<'ctx> {
        if self.selected < LOAD_SEL_BELOW {
            Rows::Selected(self.flags)
        } else {
            Rows::First(self.num_items)
        }
    }

    /// How many rows the kernel reads (an `i64`) when they are a table's (its first parameter)
    /// or a partitioning's: a pipeline over a partitioning's rows reads how many there are, its
    /// grid sized for the most there can be.
    pub(super) fn table_rows(&self) -> CodegenResult<IntValue<'ctx>> {
        match &self.partitioned {
            Some(buffers) => {
                let total = self.buffer(buffers.total)?;
                Ok(self
                    .em
                    .b
                    .build_load(self.em.i64(), total, "rows")?
                    .into_int_value())
            }
            None => Ok(self.args.get(&self.em, 0)?.into_int_value()),
        }
    }

    /// Loads scanned column `id` of a table, or of a partitioning's buffers, into registers,
    /// with `load` or, when few rows are still selected, `load_sel`.
    pub(super) fn load_table_column(&mut self, id: ColumnId) -> CodegenResult<()> {
        let info = self.query.columns.get(id);
        let values = self
            .em
            .tile_array(self.em.value_type(info.ty), &info.name)?;
        // Where the validity bytes are, when the column may be null.
        let validity = match &self.partitioned {
            Some(buffers) => {
                let (_, values_buffer, valid_buffer) = buffers
                    .columns
                    .iter()
                    .find(|(column, _, _)| *column == id)
                    .copied()
                    .ok_or_else(|| {
                        CodegenError::Invalid(format!("{} was not partitioned", info.name))
                    })?;
                self.load_into(self.buffer(values_buffer)?, values)?;
                valid_buffer.map(|buffer| self.buffer(buffer)).transpose()?
            }
            None => {
                let origin = info.origin.clone().ok_or_else(|| {
                    CodegenError::Invalid(format!("scanned column {} has no origin", info.name))
                })?;
                let packed = self
                    .packed
                    .iter()
                    .find(|slot| slot.table == origin.table && slot.column == origin.column);
                let fixed = self
                    .fixed
                    .iter()
                    .find(|slot| slot.table == origin.table && slot.column == origin.column);
                match (packed, fixed) {
                    // A tile packed in blocks is decoded whole, however few rows are still
                    // selected.
                    (Some(slot), _) => unpack::unpack(
                        &self.em,
                        &slot.packed,
                        slot.staged.as_ref(),
                        self.tile_start,
                        self.num_items,
                        values,
                    )?,
                    (None, Some(slot)) => unpack_fixed(
                        &self.em,
                        &slot.fixed,
                        self.tile_start,
                        self.rows_to_decode(),
                        values,
                    )?,
                    (None, None) => {
                        let column = self
                            .param(&Param::Column {
                                table: origin.table.clone(),
                                column: origin.column.clone(),
                            })?
                            .into_pointer_value();
                        self.load_into(column, values)?;
                    }
                }
                if info.nullable {
                    let bytes = self.param(&Param::Validity {
                        table: origin.table,
                        column: origin.column,
                    })?;
                    Some(bytes.into_pointer_value())
                } else {
                    None
                }
            }
        };
        let valid = match validity {
            Some(bytes) => {
                let valid = self
                    .em
                    .tile_array(self.em.i8().into(), &format!("{}_valid", info.name))?;
                self.load_into(bytes, valid)?;
                Some(valid)
            }
            None => None,
        };
        self.tiles.insert(id, ColumnTile { values, valid });
        Ok(())
    }

    pub(super) fn load_into(
        &self,
        column: inkwell::values::PointerValue<'ctx>,
        out: TileArray<'ctx>,
    ) -> CodegenResult<()> {
        if self.selected < LOAD_SEL_BELOW {
            load::load_sel(&self.em, column, self.tile_start, self.flags, out)
        } else {
            load::load(&self.em, column, self.tile_start, self.num_items, out)
        }
    }
}

/// The tile this block takes after the current one: the grid's first tiles go one to a block,
/// and then each block takes the next not yet taken (`grid` plus the count of tiles taken, an
/// `i64`). Thread 0 takes it; the first barrier keeps it from overwriting the shared word
/// before every thread has read the last one, the second from being read before it is written.
fn taken_tile<'ctx>(
    em: &Emitter<'ctx, '_>,
    counter: inkwell::values::PointerValue<'ctx>,
    grid: IntValue<'ctx>,
    name: &str,
) -> CodegenResult<IntValue<'ctx>> {
    let shared = em.shared_array(name, em.i64().into(), 1)?;
    em.barrier()?;
    let first_thread =
        em.b.build_int_compare(IntPredicate::EQ, em.tid()?, em.const_i32(0), "")?;
    em.if_then(first_thread, || {
        let taken = em.b.build_atomicrmw(
            inkwell::AtomicRMWBinOp::Add,
            counter,
            em.const_i32(1),
            inkwell::AtomicOrdering::Monotonic,
        )?;
        let taken = em.b.build_int_z_extend(taken, em.i64(), "")?;
        em.b.build_store(shared, em.b.build_int_add(grid, taken, "")?)?;
        Ok(())
    })?;
    em.barrier()?;
    Ok(em
        .b
        .build_load(em.i64(), shared, "next_tile")?
        .into_int_value())
}

/// The first row (an `i64`) and the number of rows (an `i32`) of tile `index` of a table of
/// `rows` rows.
fn tile_extent<'ctx>(
    em: &Emitter<'ctx, '_>,
    index: IntValue<'ctx>,
    rows: IntValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    let items = em.const_i64(i64::from(em.tile.items()));
    let tile_start = em.b.build_int_mul(index, items, "tile_start")?;
    let remaining = em.b.build_int_sub(rows, tile_start, "")?;
    let fewer =
        em.b.build_int_compare(IntPredicate::SLT, remaining, items, "")?;
    let count =
        em.b.build_select(fewer, remaining, items, "")?
            .into_int_value();
    Ok((
        tile_start,
        em.b.build_int_truncate(count, em.i32(), "num_items")?,
    ))
}
