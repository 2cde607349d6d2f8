//! `unpack`: a tile of a GPU-FOR or GPU-DFOR column (layout in `tessera_storage::compress`)
//! decoded into a thread's registers, in place of `load`.
//!
//! On the GPU the block first copies the block starts of its tile, then the tile's packed words,
//! into shared memory with coalesced loads; each thread then decodes its items from shared
//! memory, finding its miniblock's offset from the block's width word with one multiply (thesis
//! §5.3, optimizations 1-3). DFOR decodes the deltas into shared memory and adds them up with a
//! prefix sum per 128-value block, one warp per block (a thread sums four deltas, the warp scans
//! the threads' totals with shuffles). On the host a tile is one thread, which decodes straight
//! from the column and keeps a running sum for DFOR.
//!
//! Every thread of the block must call `unpack` together (it waits at barriers). A tile must hold
//! whole blocks of 128 values; only the last tile of a column may end inside one.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use tessera_storage::compress::{Scheme, BLOCK_LEN, MINIBLOCKS, MINIBLOCK_LEN};

use crate::emit::{basic, CodegenError, CodegenResult, Emitter, Item, TileArray};
use crate::tile::{Target, TileShape};

use super::load::{param_int, param_ptr};
use super::primitive;

/// The most words one block takes: a DFOR base, the reference and width words, and 128 values
/// of 32 bits.
const MAX_BLOCK_WORDS: u32 = 3 + BLOCK_LEN as u32;

/// Whether kernels with tiles of `tile` can read packed columns: a tile must hold whole
/// 128-value blocks, and on the GPU a block needs a thread per miniblock of its tile.
pub fn fits(target: Target, tile: TileShape) -> bool {
    let blocks = tile.items() / BLOCK_LEN as u32;
    tile.items().is_multiple_of(BLOCK_LEN as u32)
        && (!target.is_gpu() || blocks * MINIBLOCKS as u32 <= tile.threads)
}

/// Shared memory `unpack` takes per thread block on the GPU for `scheme`.
pub fn shared_bytes(tile: TileShape, scheme: Scheme) -> u32 {
    GpuLayout::new(tile).words(tile, scheme) * 4
}

/// Decodes the tile starting at row `tile_start` (a multiple of 128) of a packed column into
/// `out` (of `i32`); items past `num_items` are zero. `words` is the column's packed data, with
/// [`DEVICE_SPARE_WORDS`] words after it, and `block_starts` its block starts.
pub fn unpack<'ctx>(
    em: &Emitter<'ctx, '_>,
    scheme: Scheme,
    words: PointerValue<'ctx>,
    block_starts: PointerValue<'ctx>,
    tile_start: IntValue<'ctx>,
    num_items: IntValue<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    if scheme == Scheme::None {
        return Err(CodegenError::Invalid("unpack needs a packed scheme".into()));
    }
    if !fits(em.target, em.tile) {
        return Err(CodegenError::Invalid(format!(
            "tile {} cannot read packed columns on {}",
            em.tile, em.target
        )));
    }
    if out.elem != em.i32().into() {
        return Err(CodegenError::Invalid(
            "packed columns hold i32 values".into(),
        ));
    }
    let ty = em.ctx.void_type().fn_type(
        &[
            em.global_ptr().into(),
            em.global_ptr().into(),
            em.i64().into(),
            em.i32().into(),
            em.local_ptr().into(),
        ],
        false,
    );
    let f = primitive(em, &format!("tessera.unpack.{scheme}"), ty, |p| {
        let column = PackedTile {
            scheme,
            words: param_ptr(p, 0)?,
            block_starts: param_ptr(p, 1)?,
            tile_start: param_int(p, 2)?,
            count: param_int(p, 3)?,
        };
        let out = TileArray {
            ptr: param_ptr(p, 4)?,
            ..out
        };
        if p.target.is_gpu() {
            unpack_gpu(p, &column, out)?;
        } else {
            unpack_host(p, &column, out)?;
        }
        p.b.build_return(None)?;
        Ok(())
    })?;
    em.b.build_call(
        f,
        &[
            words.into(),
            block_starts.into(),
            tile_start.into(),
            num_items.into(),
            out.ptr.into(),
        ],
        "",
    )?;
    Ok(())
}

/// The primitive's parameters.
struct PackedTile<'ctx> {
    scheme: Scheme,
    words: PointerValue<'ctx>,
    block_starts: PointerValue<'ctx>,
    tile_start: IntValue<'ctx>,
    count: IntValue<'ctx>,
}

/// Shared-memory arrays of the GPU decoder, in 32-bit words.
struct GpuLayout {
    /// Tile blocks: the most 128-value blocks one tile covers.
    blocks: u32,
    /// 16-byte loads each thread issues to stage a tile's words.
    copies_per_thread: u32,
}

impl GpuLayout {
    fn new(tile: TileShape) -> GpuLayout {
        let blocks = tile.items() / BLOCK_LEN as u32;
        // The words of the tile's blocks, the up to three before them in their 16-byte
        // vector, and the word after them that a decoder reads (and ignores).
        let most_words = blocks * MAX_BLOCK_WORDS + 3 + 1;
        GpuLayout {
            blocks,
            copies_per_thread: most_words.div_ceil(VECTOR_WORDS * tile.threads),
        }
    }

    /// Staged words: every thread stores all its copies, so the array holds them all.
    fn staged_words(&self, tile: TileShape) -> u32 {
        self.copies_per_thread * tile.threads * VECTOR_WORDS
    }

    fn words(&self, tile: TileShape, scheme: Scheme) -> u32 {
        let starts = self.blocks + 1;
        let miniblocks = self.blocks * MINIBLOCKS as u32 * MINIBLOCK_FIELDS;
        let dfor = if scheme == Scheme::Dfor {
            self.blocks + tile.items()
        } else {
            0
        };
        starts + self.staged_words(tile) + miniblocks + dfor
    }
}

/// Words per 16-byte load.
const VECTOR_WORDS: u32 = 4;

/// Zero words a packed column needs after its data on the device: the GPU decoder stages whole
/// 16-byte vectors, reaching up to three words past the last block's end.
pub const DEVICE_SPARE_WORDS: usize = 4;

/// A miniblock as the GPU decoder keeps it: the staged word its bits start at, its bit width,
/// its block's reference, and the mask of `width` low bits, read with one 16-byte load.
const MINIBLOCK_FIELDS: u32 = 4;

fn unpack_gpu<'ctx>(
    p: &Emitter<'ctx, '_>,
    column: &PackedTile<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    let i32t: BasicTypeEnum = p.i32().into();
    let layout = GpuLayout::new(p.tile);
    let name = |part: &str| format!("tessera.unpack.{}.{part}", column.scheme);
    let starts = p.block_array(i32t, layout.blocks + 1, &name("starts"))?;
    let staged = p.block_array(i32t, layout.staged_words(p.tile), &name("words"))?;
    let miniblocks = p.block_array(
        p.i32().vec_type(MINIBLOCK_FIELDS).into(),
        layout.blocks * MINIBLOCKS as u32,
        &name("miniblocks"),
    )?;
    let first_block = p.b.build_right_shift(
        column.tile_start,
        p.const_i64(BLOCK_LEN.trailing_zeros() as i64),
        false,
        "first_block",
    )?;
    let blocks = blocks_in(p, column.count)?;
    let last_block = p.b.build_int_sub(blocks, p.const_i32(1), "last_block")?;
    let tid = p.tid()?;

    // The previous tile's readers are done with the shared arrays.
    p.barrier()?;
    let has_start = p.b.build_int_compare(IntPredicate::ULE, tid, blocks, "")?;
    p.if_then(has_start, || {
        let at = p.b.build_int_z_extend(tid, p.i64(), "")?;
        let at = p.b.build_int_add(first_block, at, "")?;
        let start = load_i32(p, column.block_starts, at)?;
        p.b.build_store(p.offset_ptr(i32t, starts, tid)?, start)?;
        Ok(())
    })?;
    p.barrier()?;
    let base = load_i32(p, starts, p.const_i32(0))?;
    let end = load_i32(p, starts, blocks)?;
    // The copy starts at the 16-byte vector holding the tile's first word, `skew` words before it.
    let skew = p.b.build_and(base, p.const_i32(3), "skew")?;
    let first_vector = p.b.build_right_shift(base, p.const_i32(2), false, "")?;
    let first_vector = p.b.build_int_z_extend(first_vector, p.i64(), "")?;
    let words = p.b.build_int_sub(end, base, "tile_words")?;
    let words = p.b.build_int_add(words, skew, "")?;
    let vectors =
        p.b.build_int_add(words, p.const_i32(i64::from(VECTOR_WORDS - 1)), "")?;
    let vectors = p.b.build_right_shift(vectors, p.const_i32(2), false, "")?;
    let last_vector = p.b.build_int_sub(vectors, p.const_i32(1), "")?;
    // Every load is issued before any store, so the tile's words arrive in one round trip;
    // threads past the tile's words load its last vector again rather than branch.
    let vector = p.i32().vec_type(VECTOR_WORDS);
    let mut copies = Vec::with_capacity(layout.copies_per_thread as usize);
    for copy in 0..layout.copies_per_thread {
        let index =
            p.b.build_int_add(tid, p.const_i32(i64::from(copy * p.tile.threads)), "")?;
        let beyond =
            p.b.build_int_compare(IntPredicate::UGT, index, last_vector, "")?;
        let source =
            p.b.build_select(beyond, last_vector, index, "")?
                .into_int_value();
        let source = p.b.build_int_z_extend(source, p.i64(), "")?;
        let source = p.b.build_int_add(first_vector, source, "")?;
        let value = p.b.build_load(
            vector,
            p.offset_ptr(vector.into(), column.words, source)?,
            "",
        )?;
        copies.push((index, value));
    }
    // Meanwhile one thread per miniblock (the first warps only) reads its block's header: the
    // same lines, from cache.
    let is_header_thread = p.b.build_int_compare(
        IntPredicate::ULT,
        tid,
        p.const_i32(i64::from(layout.blocks * MINIBLOCKS as u32)),
        "",
    )?;
    let bases = if column.scheme == Scheme::Dfor {
        Some(p.block_array(i32t, layout.blocks, &name("bases"))?)
    } else {
        None
    };
    p.if_then(is_header_thread, || {
        let header = miniblock_header(p, column, starts, base, skew, last_block, tid)?;
        p.b.build_store(
            p.offset_ptr(p.i32().vec_type(MINIBLOCK_FIELDS).into(), miniblocks, tid)?,
            header.fields,
        )?;
        if let (Some(bases), Some(first_value)) = (bases, header.first_value) {
            p.b.build_store(p.offset_ptr(i32t, bases, header.block)?, first_value)?;
        }
        Ok(())
    })?;
    for (index, value) in copies {
        p.b.build_store(p.offset_ptr(vector.into(), staged, index)?, value)?;
    }
    p.barrier()?;

    // Item `item`: its position in the tile, and its value's difference from the reference.
    let lane_in_miniblock =
        p.b.build_and(tid, p.const_i32(MINIBLOCK_LEN as i64 - 1), "j")?;
    let decode =
        |item: Item<'ctx>| -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>)> {
            let position = p.item_offset(item)?;
            let (block, k) = block_and_index(p, item, position)?;
            let miniblock = p.b.build_right_shift(k, p.const_i32(5), false, "")?;
            let entry = p.b.build_left_shift(block, p.const_i32(2), "")?;
            let entry = p.b.build_int_add(entry, miniblock, "")?;
            let ty = p.i32().vec_type(MINIBLOCK_FIELDS);
            let fields =
                p.b.build_load(ty, p.offset_ptr(ty.into(), miniblocks, entry)?, "miniblock")?
                    .into_vector_value();
            let field = |i: u64| -> CodegenResult<IntValue<'ctx>> {
                Ok(p.b
                    .build_extract_element(fields, p.i32().const_int(i, false), "")?
                    .into_int_value())
            };
            let (start, width, reference, mask) = (field(0)?, field(1)?, field(2)?, field(3)?);
            let j = if p.tile.threads.is_multiple_of(MINIBLOCK_LEN as u32) {
                lane_in_miniblock
            } else {
                p.b.build_and(position, p.const_i32(MINIBLOCK_LEN as i64 - 1), "")?
            };
            let bit = p.b.build_int_mul(j, width, "bit")?;
            let word = p.b.build_right_shift(bit, p.const_i32(5), false, "")?;
            let word = p.b.build_int_add(start, word, "word")?;
            let low = load_i32(p, staged, word)?;
            let next = p.b.build_int_add(word, p.const_i32(1), "")?;
            let high = load_i32(p, staged, next)?;
            let bits = funnel_right(p, low, high, bit)?;
            let difference = p.b.build_and(bits, mask, "")?;
            Ok((
                position,
                block,
                p.b.build_int_add(reference, difference, "unpacked")?,
            ))
        };
    let Some(bases) = bases else {
        return p.for_each_item(|item| {
            let (position, _, value) = decode(item)?;
            p.set(out, item, zero_past(p, position, column.count, value)?)
        });
    };

    let deltas = p.block_array(i32t, p.tile.items(), &name("deltas"))?;
    p.for_each_item(|item| {
        let (position, _, delta) = decode(item)?;
        p.b.build_store(p.offset_ptr(i32t, deltas, position)?, delta)?;
        Ok(())
    })?;
    p.barrier()?;
    scan_blocks_gpu(p, deltas, blocks)?;
    p.barrier()?;
    p.for_each_item(|item| {
        let position = p.item_offset(item)?;
        let block = block_of(p, position, blocks)?;
        let first_value = load_i32(p, bases, block)?;
        let sum = load_i32(p, deltas, position)?;
        let value = p.b.build_int_add(first_value, sum, "")?;
        p.set(out, item, zero_past(p, position, column.count, value)?)
    })
}

/// What one header thread learns of its miniblock.
struct MiniblockHeader<'ctx> {
    /// The tile block the miniblock belongs to.
    block: IntValue<'ctx>,
    /// `<start word among the staged words, width, reference, mask>`.
    fields: inkwell::values::VectorValue<'ctx>,
    /// DFOR: the block's first value.
    first_value: Option<IntValue<'ctx>>,
}

/// Thread `t` describes miniblock `t % 4` of the tile's block `t / 4`, reading the block's
/// header words from the column. Threads past the tile's blocks describe its last one, so that
/// items past the column's end find a real miniblock to decode (and discard).
fn miniblock_header<'ctx>(
    p: &Emitter<'ctx, '_>,
    column: &PackedTile<'ctx>,
    starts: PointerValue<'ctx>,
    base: IntValue<'ctx>,
    skew: IntValue<'ctx>,
    last_block: IntValue<'ctx>,
    tid: IntValue<'ctx>,
) -> CodegenResult<MiniblockHeader<'ctx>> {
    let block = p.b.build_right_shift(tid, p.const_i32(2), false, "")?;
    let beyond =
        p.b.build_int_compare(IntPredicate::UGT, block, last_block, "")?;
    let block =
        p.b.build_select(beyond, last_block, block, "header_block")?
            .into_int_value();
    let miniblock = p.b.build_and(tid, p.const_i32(3), "")?;
    let start = load_i32(p, starts, block)?;
    let mut first = p.b.build_int_sub(start, base, "")?;
    let global = |staged: IntValue<'ctx>| -> CodegenResult<IntValue<'ctx>> {
        let staged = p.b.build_int_z_extend(staged, p.i64(), "")?;
        let base = p.b.build_int_z_extend(base, p.i64(), "")?;
        load_i32(p, column.words, p.b.build_int_add(base, staged, "")?)
    };
    let first_value = if column.scheme == Scheme::Dfor {
        let value = global(first)?;
        first = p.b.build_int_add(first, p.const_i32(1), "")?;
        Some(value)
    } else {
        None
    };
    let reference = global(first)?;
    let widths = global(p.b.build_int_add(first, p.const_i32(1), "")?)?;
    let (width, offset) = miniblock_width_and_offset(p, widths, miniblock)?;
    let start_word = p.b.build_int_add(first, p.const_i32(2), "")?;
    let start_word = p.b.build_int_add(start_word, offset, "")?;
    let start_word = p.b.build_int_add(start_word, skew, "staged_start")?;
    // (1 << width) - 1, with width 32 (where the shift would overflow) giving all ones.
    let shift = p.b.build_and(width, p.const_i32(31), "")?;
    let mask = p.b.build_left_shift(p.const_i32(1), shift, "")?;
    let mask = p.b.build_int_sub(mask, p.const_i32(1), "")?;
    let full =
        p.b.build_int_compare(IntPredicate::EQ, width, p.const_i32(32), "")?;
    let mask =
        p.b.build_select(full, p.const_i32(-1), mask, "mask")?
            .into_int_value();
    let ty = p.i32().vec_type(MINIBLOCK_FIELDS);
    let mut fields = ty.get_undef();
    for (i, value) in [start_word, width, reference, mask].into_iter().enumerate() {
        fields =
            p.b.build_insert_element(fields, value, p.i32().const_int(i as u64, false), "")?;
    }
    Ok(MiniblockHeader {
        block,
        fields,
        first_value,
    })
}

/// Miniblock `m`'s bit width and its offset in words after the width word, from the width word
/// (byte `m` of `widths * 0x01010100` is `w0 + ... + w(m-1)`, each sum at most 96).
fn miniblock_width_and_offset<'ctx>(
    p: &Emitter<'ctx, '_>,
    widths: IntValue<'ctx>,
    miniblock: IntValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    let byte_shift = p.b.build_left_shift(miniblock, p.const_i32(3), "")?;
    let width = p.b.build_right_shift(widths, byte_shift, false, "")?;
    let width = p.b.build_and(width, p.const_i32(0xff), "width")?;
    let offsets =
        p.b.build_int_mul(widths, p.i32().const_int(0x0101_0100, false), "")?;
    let offset = p.b.build_right_shift(offsets, byte_shift, false, "")?;
    let offset = p.b.build_and(offset, p.const_i32(0xff), "mini_offset")?;
    Ok((width, offset))
}

/// The 32 bits at bit `shift % 32` of the 64-bit `high:low`: one `shf` instruction on the GPU.
fn funnel_right<'ctx>(
    p: &Emitter<'ctx, '_>,
    low: IntValue<'ctx>,
    high: IntValue<'ctx>,
    shift: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let i32t = p.i32();
    let ty = i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false);
    if p.target.is_gpu() {
        // LLVM's NVPTX backend expands `llvm.fshr` into six instructions; `shf.r.wrap` is one.
        let asm = p.ctx.create_inline_asm(
            ty,
            "shf.r.wrap.b32 $0, $1, $2, $3;".into(),
            "=r,r,r,r".into(),
            false,
            false,
            None,
            false,
        );
        let call =
            p.b.build_indirect_call(ty, asm, &[low.into(), high.into(), shift.into()], "funnel")?;
        return basic(call.try_as_basic_value().basic()).map(|v| v.into_int_value());
    }
    let shift = p.b.build_and(shift, p.const_i32(31), "")?;
    let funnel = p.intrinsic("llvm.fshr.i32", ty);
    let call =
        p.b.build_call(funnel, &[high.into(), low.into(), shift.into()], "funnel")?;
    basic(call.try_as_basic_value().basic()).map(|v| v.into_int_value())
}

/// Inclusive prefix sums of the 128 deltas of each of the tile's `blocks` blocks, in place: warp
/// `w` takes blocks `w`, `w + warps`, ...; lane `l` sums the block's deltas `4l .. 4l + 4`, and
/// the warp scans those sums with shuffles.
fn scan_blocks_gpu<'ctx>(
    p: &Emitter<'ctx, '_>,
    deltas: PointerValue<'ctx>,
    blocks: IntValue<'ctx>,
) -> CodegenResult<()> {
    const PER_LANE: u32 = (BLOCK_LEN / MINIBLOCK_LEN) as u32;
    let i32t: BasicTypeEnum = p.i32().into();
    let tid = p.tid()?;
    let warp = p.b.build_right_shift(tid, p.const_i32(5), false, "warp")?;
    let lane = p.b.build_and(tid, p.const_i32(31), "lane")?;
    let warps = p.const_i32(i64::from(p.tile.warps()));

    let before = p.current_block()?;
    let header = p.ctx.append_basic_block(p.function, "scan_block");
    let work = p.ctx.append_basic_block(p.function, "scan_work");
    let done = p.ctx.append_basic_block(p.function, "scan_done");
    p.b.build_unconditional_branch(header)?;
    p.b.position_at_end(header);
    let block = p.b.build_phi(p.i32(), "block")?;
    block.add_incoming(&[(&warp, before)]);
    let block_value = block.as_basic_value().into_int_value();
    let more =
        p.b.build_int_compare(IntPredicate::SLT, block_value, blocks, "")?;
    p.b.build_conditional_branch(more, work, done)?;
    p.b.position_at_end(work);

    let block_first =
        p.b.build_int_mul(block_value, p.const_i32(BLOCK_LEN as i64), "")?;
    let lane_first =
        p.b.build_int_mul(lane, p.const_i32(i64::from(PER_LANE)), "")?;
    let first = p.b.build_int_add(block_first, lane_first, "")?;
    let mut running = Vec::with_capacity(PER_LANE as usize);
    let mut sum = p.const_i32(0);
    for i in 0..PER_LANE {
        let at = p.b.build_int_add(first, p.const_i32(i64::from(i)), "")?;
        let delta = load_i32(p, deltas, at)?;
        sum = p.b.build_int_add(sum, delta, "")?;
        running.push((at, sum));
    }
    let lane_total = sum;
    let mut inclusive = lane_total;
    for offset in [1, 2, 4, 8, 16] {
        let below = shfl_up_i32(p, inclusive, offset)?;
        let has_below =
            p.b.build_int_compare(IntPredicate::UGE, lane, p.const_i32(i64::from(offset)), "")?;
        let added = p.b.build_int_add(inclusive, below, "")?;
        inclusive =
            p.b.build_select(has_below, added, inclusive, "")?
                .into_int_value();
    }
    let earlier_lanes = p.b.build_int_sub(inclusive, lane_total, "")?;
    for (at, partial) in running {
        let value = p.b.build_int_add(earlier_lanes, partial, "")?;
        p.b.build_store(p.offset_ptr(i32t, deltas, at)?, value)?;
    }
    let next = p.b.build_int_add(block_value, warps, "")?;
    block.add_incoming(&[(&next, p.current_block()?)]);
    p.b.build_unconditional_branch(header)?;
    p.b.position_at_end(done);
    Ok(())
}

fn unpack_host<'ctx>(
    p: &Emitter<'ctx, '_>,
    column: &PackedTile<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    let first_block = p.b.build_right_shift(
        column.tile_start,
        p.const_i64(BLOCK_LEN.trailing_zeros() as i64),
        false,
        "first_block",
    )?;
    let blocks = blocks_in(p, column.count)?;
    p.for_each_item(|item| {
        let position = p.item_offset(item)?;
        let block = block_of(p, position, blocks)?;
        let block = p.b.build_int_z_extend(block, p.i64(), "")?;
        let block = p.b.build_int_add(first_block, block, "")?;
        let start = load_i32(p, column.block_starts, block)?;
        let start = p.b.build_int_z_extend(start, p.i64(), "")?;
        let k = in_block(p, position)?;
        let value = match column.scheme {
            Scheme::Dfor => {
                let delta_words = p.b.build_int_add(start, p.const_i64(1), "")?;
                let delta = decode_for(p, column.words, delta_words, k)?;
                // A block starts from its first value; later items add to the one before.
                let first_value = load_i32(p, column.words, start)?;
                let starts_block =
                    p.b.build_int_compare(IntPredicate::EQ, k, p.const_i32(0), "")?;
                let previous_item = p.b.build_int_sub(item.index, p.const_i32(1), "")?;
                let previous_item =
                    p.b.build_select(starts_block, item.index, previous_item, "")?
                        .into_int_value();
                let previous = p
                    .get(
                        out,
                        crate::emit::Item {
                            index: previous_item,
                        },
                    )?
                    .into_int_value();
                let from =
                    p.b.build_select(starts_block, first_value, previous, "")?
                        .into_int_value();
                p.b.build_int_add(from, delta, "")?
            }
            _ => decode_for(p, column.words, start, k)?,
        };
        p.set(out, item, zero_past(p, position, column.count, value)?)
    })
}

/// The tile block of `item` and its index in that block. When a tile row of threads holds whole
/// blocks, the index is the same for all of a thread's items and the block a constant apart, so
/// both fold into the thread's registers and load offsets. Blocks past the tile's last hold
/// copies of its last miniblocks (see `miniblock_header`).
fn block_and_index<'ctx>(
    p: &Emitter<'ctx, '_>,
    item: Item<'ctx>,
    position: IntValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    let per_row = p.tile.threads / BLOCK_LEN as u32;
    if per_row == 0 || !p.tile.threads.is_multiple_of(BLOCK_LEN as u32) {
        let block = p.b.build_right_shift(
            position,
            p.const_i32(BLOCK_LEN.trailing_zeros() as i64),
            false,
            "block",
        )?;
        return Ok((block, in_block(p, position)?));
    }
    let tid = p.tid()?;
    let row =
        p.b.build_int_mul(item.index, p.const_i32(i64::from(per_row)), "")?;
    let thread_block = p.b.build_right_shift(
        tid,
        p.const_i32(BLOCK_LEN.trailing_zeros() as i64),
        false,
        "",
    )?;
    let block = p.b.build_int_add(row, thread_block, "block")?;
    Ok((block, in_block(p, tid)?))
}

/// The number of blocks a tile of `count` rows touches.
fn blocks_in<'ctx>(p: &Emitter<'ctx, '_>, count: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
    let rounded =
        p.b.build_int_add(count, p.const_i32(BLOCK_LEN as i64 - 1), "")?;
    Ok(p.b.build_right_shift(
        rounded,
        p.const_i32(BLOCK_LEN.trailing_zeros() as i64),
        false,
        "blocks",
    )?)
}

/// The tile's block holding `position`, kept inside the blocks the tile has, so that items past
/// the last row decode padding instead of reading beyond the column.
fn block_of<'ctx>(
    p: &Emitter<'ctx, '_>,
    position: IntValue<'ctx>,
    blocks: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let block = p.b.build_right_shift(
        position,
        p.const_i32(BLOCK_LEN.trailing_zeros() as i64),
        false,
        "",
    )?;
    let last = p.b.build_int_sub(blocks, p.const_i32(1), "")?;
    let beyond = p.b.build_int_compare(IntPredicate::UGT, block, last, "")?;
    Ok(p.b
        .build_select(beyond, last, block, "block")?
        .into_int_value())
}

fn in_block<'ctx>(
    p: &Emitter<'ctx, '_>,
    position: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    Ok(p.b.build_and(position, p.const_i32(BLOCK_LEN as i64 - 1), "in_block")?)
}

/// `value` for a row of the column, zero for an item past its end.
fn zero_past<'ctx>(
    p: &Emitter<'ctx, '_>,
    position: IntValue<'ctx>,
    count: IntValue<'ctx>,
    value: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let inside =
        p.b.build_int_compare(IntPredicate::SLT, position, count, "")?;
    Ok(p.b
        .build_select(inside, value, p.const_i32(0), "")?
        .into_int_value())
}

/// Value `k` of the GPU-FOR block whose reference word is `words[first]`: the reference plus the
/// `w`-bit difference at bit `j * w` of miniblock `m`, where `k = 32m + j`, the miniblock starts
/// `w0 + ... + w(m-1)` words after the width word, and `w = wm`.
fn decode_for<'ctx>(
    p: &Emitter<'ctx, '_>,
    words: PointerValue<'ctx>,
    first: IntValue<'ctx>,
    k: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let index_ty = first.get_type();
    let at = |offset: u64| {
        p.b.build_int_add(first, index_ty.const_int(offset, false), "")
    };
    let reference = load_i32(p, words, first)?;
    let widths = load_i32(p, words, at(1)?)?;
    let miniblock = p.b.build_right_shift(k, p.const_i32(5), false, "")?;
    let (width, offset) = miniblock_width_and_offset(p, widths, miniblock)?;
    let j =
        p.b.build_and(k, p.const_i32(MINIBLOCK_LEN as i64 - 1), "")?;
    let bit = p.b.build_int_mul(j, width, "bit")?;
    let word_in_mini = p.b.build_right_shift(bit, p.const_i32(5), false, "")?;
    let word_offset = p.b.build_int_add(offset, word_in_mini, "")?;
    let word_offset =
        p.b.build_int_z_extend_or_bit_cast(word_offset, index_ty, "")?;
    let word = p.b.build_int_add(at(2)?, word_offset, "word")?;
    let low = load_i32(p, words, word)?;
    let next = p.b.build_int_add(word, index_ty.const_int(1, false), "")?;
    let high = load_i32(p, words, next)?;
    let bits = funnel_right(p, low, high, bit)?;
    // (1 << w) - 1 in 64 bits, since w may be 32.
    let width_wide = p.b.build_int_z_extend(width, p.i64(), "")?;
    let mask = p.b.build_left_shift(p.const_i64(1), width_wide, "")?;
    let mask = p.b.build_int_sub(mask, p.const_i64(1), "")?;
    let mask = p.b.build_int_truncate(mask, p.i32(), "mask")?;
    let difference = p.b.build_and(bits, mask, "")?;
    Ok(p.b.build_int_add(reference, difference, "unpacked")?)
}

fn load_i32<'ctx>(
    p: &Emitter<'ctx, '_>,
    base: PointerValue<'ctx>,
    index: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let i32t: BasicTypeEnum = p.i32().into();
    Ok(p.b
        .build_load(i32t, p.offset_ptr(i32t, base, index)?, "")?
        .into_int_value())
}

/// The value of `value` held by the lane `offset` below this one (its own below that).
fn shfl_up_i32<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
    offset: u32,
) -> CodegenResult<IntValue<'ctx>> {
    let i32t = p.i32();
    let f = p.intrinsic(
        "llvm.nvvm.shfl.sync.up.i32",
        i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into(), i32t.into()], false),
    );
    let args = [
        p.const_i32(-1).into(),
        value.into(),
        p.const_i32(i64::from(offset)).into(),
        p.const_i32(0).into(),
    ];
    let v = p.b.build_call(f, &args, "shfl_up")?;
    basic(v.try_as_basic_value().basic()).map(|v| v.into_int_value())
}
