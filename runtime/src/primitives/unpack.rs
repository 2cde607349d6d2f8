//! `unpack`: a tile of a GPU-FOR or GPU-DFOR column (layout in `tessera_storage::compress`)
//! decoded into a thread's registers, in place of `load`.
//!
//! On the GPU a kernel knows where its next tile lies in each packed column a tile ahead
//! ([`tile_words`]), so at the start of a tile it requests the words of every packed column at
//! once, with coalesced 16-byte loads, and waits for memory only once ([`stage`]). The words go
//! to shared memory, where one thread per miniblock turns the block headers into a table of
//! miniblock offsets, widths and references; each thread then decodes its items with one
//! multiply and one funnel shift each (thesis §5.3, optimizations 1-3). DFOR decodes the deltas
//! into shared memory and adds them up with a prefix sum per 128-value block, one warp per
//! block (a thread sums four deltas, the warp scans the threads' totals with shuffles). On the
//! host a tile is one thread, which decodes straight from the column and keeps a running sum
//! for DFOR.
//!
//! Every thread of the block must call `stage` and `unpack` together (they wait at barriers). A
//! tile must hold whole blocks of 128 values; only the last tile of a column may end inside one.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use tessera_storage::compress::{
    Family, Scheme, StagedTile, BLOCK_LEN, MINIBLOCK_FIELDS, MINIBLOCK_LEN,
    STAGING_VECTOR_WORDS as VECTOR_WORDS,
};

use crate::emit::{basic, CodegenError, CodegenResult, Emitter, Item, TileArray};
use crate::tile::{Target, TileShape};

use super::load::{param_int, param_ptr};
use super::primitive;

/// Whether kernels with tiles of `tile` on `target` can decode columns in `scheme`
/// ([`Reading::fits_tile`](tessera_storage::compress::Reading::fits_tile)).
pub fn fits(target: Target, tile: TileShape, scheme: Scheme) -> bool {
    scheme
        .reading()
        .fits_tile(tile.items(), tile.threads, target.is_gpu())
}

/// A packed column as a kernel receives it: its scheme, its words (with
/// [`DEVICE_SPARE_WORDS`] zero words after them) and its block starts.
#[derive(Clone, Copy)]
pub struct PackedColumn<'ctx> {
    pub scheme: Scheme,
    /// Words its widest block takes, at most: the room a staged tile's blocks get.
    pub block_words: u32,
    pub words: PointerValue<'ctx>,
    pub block_starts: PointerValue<'ctx>,
}

/// Where a tile lies in a packed column, as one GPU thread needs it: the tile's first word, the
/// word after its last block, and the first word of the block whose header the thread reads.
/// A kernel loads these a tile ahead ([`tile_words`]), so staging a tile waits for one round
/// trip to memory rather than two.
#[derive(Clone, Copy)]
pub struct TileWords<'ctx> {
    pub first: IntValue<'ctx>,
    pub end: IntValue<'ctx>,
    pub header: IntValue<'ctx>,
}

impl<'ctx> TileWords<'ctx> {
    pub fn to_array(self) -> [IntValue<'ctx>; 3] {
        [self.first, self.end, self.header]
    }

    pub fn from_array([first, end, header]: [IntValue<'ctx>; 3]) -> TileWords<'ctx> {
        TileWords { first, end, header }
    }
}

/// A packed column's tile staged in shared memory by [`stage`], ready to decode.
pub struct StagedColumn<'ctx> {
    /// The tile's words, from the 16-byte vector holding its first word.
    words: PointerValue<'ctx>,
    /// Per miniblock: `<start word among the staged words, width, reference, mask>`.
    miniblocks: PointerValue<'ctx>,
    /// DFOR: each block's first value, and room for the tile's deltas.
    dfor: Option<(PointerValue<'ctx>, PointerValue<'ctx>)>,
    /// The number of 128-value blocks the tile touches.
    blocks: IntValue<'ctx>,
}

/// Loads where the tile starting at row `tile_start` (a multiple of 128, at most the column's
/// length) with `num_items` rows lies in `column` (GPU only).
pub fn tile_words<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: &PackedColumn<'ctx>,
    tile_start: IntValue<'ctx>,
    num_items: IntValue<'ctx>,
) -> CodegenResult<TileWords<'ctx>> {
    if !em.target.is_gpu() {
        return Err(CodegenError::Invalid(
            "packed tiles are staged on the GPU only".into(),
        ));
    }
    let first_block = first_block(em, tile_start)?;
    let blocks = blocks_in(em, num_items)?;
    let start = |block: IntValue<'ctx>| -> CodegenResult<IntValue<'ctx>> {
        let block = em.b.build_int_z_extend(block, em.i64(), "")?;
        let at = em.b.build_int_add(first_block, block, "")?;
        load_i32(em, column.block_starts, at)
    };
    Ok(TileWords {
        first: start(em.const_i32(0))?,
        end: start(blocks)?,
        header: start(header_block(
            em,
            header_lane(em, staged_tile(em, column)?)?,
            blocks,
        )?)?,
    })
}

/// Copies the tiles of `columns` into shared memory and describes their miniblocks, for
/// [`unpack`] to decode (GPU only; every thread of the block calls it, once per tile, before
/// any `unpack` of the tile). The words of all columns are requested before any arrives.
pub fn stage<'ctx>(
    em: &Emitter<'ctx, '_>,
    columns: &[(String, PackedColumn<'ctx>, TileWords<'ctx>)],
    num_items: IntValue<'ctx>,
) -> CodegenResult<Vec<StagedColumn<'ctx>>> {
    let unfit = columns
        .iter()
        .any(|(_, column, _)| !fits(em.target, em.tile, column.scheme));
    if !em.target.is_gpu() || unfit {
        return Err(CodegenError::Invalid(format!(
            "tile {} cannot stage packed columns on {}",
            em.tile, em.target
        )));
    }
    let i32t: BasicTypeEnum = em.i32().into();
    let entry = em.i32().vec_type(MINIBLOCK_FIELDS);
    let vector = em.i32().vec_type(VECTOR_WORDS);
    // Every column's tile has the same blocks and miniblocks; its words differ.
    let Some((_, first, _)) = columns.first() else {
        return Ok(Vec::new());
    };
    let layout = staged_tile(em, first)?;
    let blocks = blocks_in(em, num_items)?;
    let tid = em.tid()?;

    // The previous tile's readers are done with the shared arrays.
    em.barrier()?;
    let mut staged = Vec::with_capacity(columns.len());
    let mut pending = Vec::with_capacity(columns.len());
    for (name, column, at) in columns {
        let room = staged_tile(em, column)?;
        let array = |elem: BasicTypeEnum<'ctx>, len: u32, part: &str| {
            em.block_array(elem, len, &format!("tessera.unpack.{name}.{part}"))
        };
        let dfor = match column.scheme.reading().sums_deltas {
            true => Some((
                array(i32t, room.bases, "bases")?,
                array(i32t, room.deltas, "deltas")?,
            )),
            false => None,
        };
        staged.push(StagedColumn {
            words: array(i32t, room.words, "words")?,
            miniblocks: array(entry.into(), room.miniblocks, "miniblocks")?,
            dfor,
            blocks,
        });
        // The copy starts at the 16-byte vector holding the tile's first word, `skew` words
        // before it; threads past the tile's vectors load its last one again rather than
        // branch, and do not store it.
        let skew = em.b.build_and(at.first, em.const_i32(3), "skew")?;
        let first_vector =
            em.b.build_right_shift(at.first, em.const_i32(2), false, "")?;
        let first_vector = em.b.build_int_z_extend(first_vector, em.i64(), "")?;
        let words = em.b.build_int_sub(at.end, at.first, "tile_words")?;
        let words = em.b.build_int_add(words, skew, "")?;
        let vectors =
            em.b.build_int_add(words, em.const_i32(i64::from(VECTOR_WORDS)), "")?;
        let vectors =
            em.b.build_right_shift(vectors, em.const_i32(2), false, "vectors")?;
        let last_vector = em.b.build_int_sub(vectors, em.const_i32(1), "")?;
        let copies_per_thread = room.vectors().div_ceil(em.tile.threads);
        let mut copies = Vec::with_capacity(copies_per_thread as usize);
        for copy in 0..copies_per_thread {
            let index =
                em.b.build_int_add(tid, em.const_i32(i64::from(copy * em.tile.threads)), "")?;
            let beyond =
                em.b.build_int_compare(IntPredicate::UGT, index, last_vector, "")?;
            let source =
                em.b.build_select(beyond, last_vector, index, "")?
                    .into_int_value();
            let source = em.b.build_int_z_extend(source, em.i64(), "")?;
            let source = em.b.build_int_add(first_vector, source, "")?;
            let value = load_vector(em, em.offset_ptr(vector.into(), column.words, source)?)?;
            copies.push((index, value));
        }
        pending.push((skew, vectors, copies));
    }
    for (column, (_, vectors, copies)) in staged.iter().zip(&pending) {
        for (index, value) in copies {
            let inside =
                em.b.build_int_compare(IntPredicate::ULT, *index, *vectors, "")?;
            em.if_then(inside, || {
                em.b.build_store(em.offset_ptr(vector.into(), column.words, *index)?, *value)?;
                Ok(())
            })?;
        }
    }
    em.barrier()?;

    // One thread per miniblock describes it from its block's header; the columns take turns
    // among the block's groups of that many threads, so that one warp does not describe every
    // column while the others wait at the barrier (measured on the H100 with 128x8 tiles, SSB
    // SF 20 with `--compress auto`: geometric mean 1.35 ms with one group, 1.27 ms spread).
    let per_column = layout.miniblocks;
    let groups = em.tile.threads / per_column;
    let group =
        em.b.build_int_unsigned_div(tid, em.const_i32(i64::from(per_column)), "")?;
    let lane = header_lane(em, layout)?;
    for (i, ((_, _, at), (column, (skew, _, _)))) in
        columns.iter().zip(staged.iter().zip(&pending)).enumerate()
    {
        let turn = em.const_i32(i64::from(i as u32 % groups));
        let describes = em.b.build_int_compare(IntPredicate::EQ, group, turn, "")?;
        em.if_then(describes, || {
            let relative = em.b.build_int_sub(at.header, at.first, "")?;
            let header = em.b.build_int_add(relative, *skew, "header")?;
            describe_miniblock(em, column, header, lane)
        })?;
    }
    em.barrier()?;
    Ok(staged)
}

/// The 16 bytes at `address` (global, 16-byte aligned), as a vector of four words. Written as
/// inline assembly with a side effect so that LLVM keeps every column's loads ahead of the
/// stores that use them, rather than sinking each into its store's branch and waiting for the
/// columns one after another.
fn load_vector<'ctx>(
    em: &Emitter<'ctx, '_>,
    address: PointerValue<'ctx>,
) -> CodegenResult<inkwell::values::VectorValue<'ctx>> {
    let i32t = em.i32();
    let words = em
        .ctx
        .struct_type(&[i32t.into(); VECTOR_WORDS as usize], false);
    let ty = words.fn_type(&[em.global_ptr().into()], false);
    let asm = em.ctx.create_inline_asm(
        ty,
        "ld.global.nc.v4.u32 {$0, $1, $2, $3}, [$4];".into(),
        "=r,=r,=r,=r,l".into(),
        true,
        false,
        None,
        false,
    );
    let call =
        em.b.build_indirect_call(ty, asm, &[address.into()], "words")?;
    let loaded = basic(call.try_as_basic_value().basic())?.into_struct_value();
    let mut vector = i32t.vec_type(VECTOR_WORDS).get_undef();
    for i in 0..VECTOR_WORDS {
        let word = em.b.build_extract_value(loaded, i, "")?;
        vector =
            em.b.build_insert_element(vector, word, i32t.const_int(u64::from(i), false), "")?;
    }
    Ok(vector)
}

/// The header thread with lane `t` describes miniblock `t % 4` of the tile's block `t / 4`, whose
/// header is at staged word `header`. Lanes past the tile's blocks describe its last one, so
/// that items past the column's end find a real miniblock to decode (and discard).
fn describe_miniblock<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: &StagedColumn<'ctx>,
    mut header: IntValue<'ctx>,
    lane: IntValue<'ctx>,
) -> CodegenResult<()> {
    let i32t: BasicTypeEnum = em.i32().into();
    if let Some((bases, _)) = column.dfor {
        let first_value = load_i32(em, column.words, header)?;
        let block = header_block(em, lane, column.blocks)?;
        em.b.build_store(em.offset_ptr(i32t, bases, block)?, first_value)?;
        header = em.b.build_int_add(header, em.const_i32(1), "")?;
    }
    let reference = load_i32(em, column.words, header)?;
    let widths_at = em.b.build_int_add(header, em.const_i32(1), "")?;
    let widths = load_i32(em, column.words, widths_at)?;
    let miniblock = em.b.build_and(lane, em.const_i32(3), "")?;
    let (width, offset) = miniblock_width_and_offset(em, widths, miniblock)?;
    let start_word = em.b.build_int_add(header, em.const_i32(2), "")?;
    let start_word = em.b.build_int_add(start_word, offset, "staged_start")?;
    let mask = width_mask(em, width)?;
    let ty = em.i32().vec_type(MINIBLOCK_FIELDS);
    let mut fields = ty.get_undef();
    for (i, value) in [start_word, width, reference, mask].into_iter().enumerate() {
        fields =
            em.b.build_insert_element(fields, value, em.i32().const_int(i as u64, false), "")?;
    }
    em.b.build_store(em.offset_ptr(ty.into(), column.miniblocks, lane)?, fields)?;
    Ok(())
}

/// The arrays a GPU block stages a tile of `column` in ([`Reading::staged_tile`](tessera_storage::compress::Reading::staged_tile)).
fn staged_tile(em: &Emitter<'_, '_>, column: &PackedColumn<'_>) -> CodegenResult<StagedTile> {
    column
        .scheme
        .reading()
        .staged_tile(em.tile.items(), column.block_words)
        .ok_or_else(|| CodegenError::Invalid(format!("{} is not staged", column.scheme)))
}

/// The thread's place among the threads that describe a staged tile's miniblocks, one each:
/// its index modulo their number.
fn header_lane<'ctx>(em: &Emitter<'ctx, '_>, tile: StagedTile) -> CodegenResult<IntValue<'ctx>> {
    let per_column = em.const_i32(i64::from(tile.miniblocks));
    Ok(em
        .b
        .build_int_unsigned_rem(em.tid()?, per_column, "header_lane")?)
}

/// The tile's block whose header the thread with header lane `lane` reads: `lane / 4`, kept
/// inside the tile's blocks.
fn header_block<'ctx>(
    em: &Emitter<'ctx, '_>,
    lane: IntValue<'ctx>,
    blocks: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let block = em.b.build_right_shift(lane, em.const_i32(2), false, "")?;
    let none =
        em.b.build_int_compare(IntPredicate::EQ, blocks, em.const_i32(0), "")?;
    let last = em.b.build_int_sub(blocks, em.const_i32(1), "")?;
    let last =
        em.b.build_select(none, em.const_i32(0), last, "")?
            .into_int_value();
    let beyond = em.b.build_int_compare(IntPredicate::UGT, block, last, "")?;
    Ok(em
        .b
        .build_select(beyond, last, block, "header_block")?
        .into_int_value())
}

/// Decodes the tile starting at row `tile_start` (a multiple of 128) of a packed column into
/// `out` (of `i32`); items past `num_items` are zero. On the GPU the tile must have been staged
/// (`staged`); on the host it is decoded straight from the column.
pub fn unpack<'ctx>(
    em: &Emitter<'ctx, '_>,
    column: &PackedColumn<'ctx>,
    staged: Option<&StagedColumn<'ctx>>,
    tile_start: IntValue<'ctx>,
    num_items: IntValue<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    if column.scheme.reading().family != Family::Blocks {
        return Err(CodegenError::Invalid(
            "unpack needs a scheme in blocks".into(),
        ));
    }
    if !fits(em.target, em.tile, column.scheme) {
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
    if em.target.is_gpu() {
        let staged = staged.ok_or_else(|| {
            CodegenError::Invalid("a packed tile is staged before it is decoded".into())
        })?;
        return unpack_gpu(em, staged, num_items, out);
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
    let f = primitive(em, &format!("tessera.unpack.{}", column.scheme), ty, |p| {
        let column = HostTile {
            scheme: column.scheme,
            words: param_ptr(p, 0)?,
            block_starts: param_ptr(p, 1)?,
            tile_start: param_int(p, 2)?,
            count: param_int(p, 3)?,
        };
        let out = TileArray {
            ptr: param_ptr(p, 4)?,
            ..out
        };
        unpack_host(p, &column, out)?;
        p.b.build_return(None)?;
        Ok(())
    })?;
    em.b.build_call(
        f,
        &[
            column.words.into(),
            column.block_starts.into(),
            tile_start.into(),
            num_items.into(),
            out.ptr.into(),
        ],
        "",
    )?;
    Ok(())
}

/// The host primitive's parameters.
struct HostTile<'ctx> {
    scheme: Scheme,
    words: PointerValue<'ctx>,
    block_starts: PointerValue<'ctx>,
    tile_start: IntValue<'ctx>,
    count: IntValue<'ctx>,
}

/// Zero words a packed column needs after its data on the device: the GPU decoder stages whole
/// 16-byte vectors, reaching up to three words past the last block's end.
pub const DEVICE_SPARE_WORDS: usize = 4;

fn unpack_gpu<'ctx>(
    p: &Emitter<'ctx, '_>,
    column: &StagedColumn<'ctx>,
    count: IntValue<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    let i32t: BasicTypeEnum = p.i32().into();
    let tid = p.tid()?;
    // Item `item`: its position in the tile, and its value's difference from the reference.
    let lane_in_miniblock =
        p.b.build_and(tid, p.const_i32(MINIBLOCK_LEN as i64 - 1), "j")?;
    let decode = |item: Item<'ctx>| -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let position = p.item_offset(item)?;
        let (block, k) = block_and_index(p, item, position)?;
        let miniblock = p.b.build_right_shift(k, p.const_i32(5), false, "")?;
        let entry = p.b.build_left_shift(block, p.const_i32(2), "")?;
        let entry = p.b.build_int_add(entry, miniblock, "")?;
        let ty = p.i32().vec_type(MINIBLOCK_FIELDS);
        let fields =
            p.b.build_load(
                ty,
                p.offset_ptr(ty.into(), column.miniblocks, entry)?,
                "miniblock",
            )?
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
        let low = load_i32(p, column.words, word)?;
        let next = p.b.build_int_add(word, p.const_i32(1), "")?;
        let high = load_i32(p, column.words, next)?;
        let bits = funnel_right(p, low, high, bit)?;
        let difference = p.b.build_and(bits, mask, "")?;
        Ok((
            position,
            p.b.build_int_add(reference, difference, "unpacked")?,
        ))
    };
    let Some((bases, deltas)) = column.dfor else {
        return p.for_each_item(|item| {
            let (position, value) = decode(item)?;
            p.set(out, item, zero_past(p, position, count, value)?)
        });
    };

    p.for_each_item(|item| {
        let (position, delta) = decode(item)?;
        p.b.build_store(p.offset_ptr(i32t, deltas, position)?, delta)?;
        Ok(())
    })?;
    p.barrier()?;
    scan_blocks_gpu(p, deltas, column.blocks)?;
    p.barrier()?;
    p.for_each_item(|item| {
        let position = p.item_offset(item)?;
        let block = block_of(p, position, column.blocks)?;
        let first_value = load_i32(p, bases, block)?;
        let sum = load_i32(p, deltas, position)?;
        let value = p.b.build_int_add(first_value, sum, "")?;
        p.set(out, item, zero_past(p, position, count, value)?)
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

/// `(1 << width) - 1` for a bit width of 0 to 32, width 32 (where the shift would overflow)
/// giving all ones.
fn width_mask<'ctx>(p: &Emitter<'ctx, '_>, width: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
    let shift = p.b.build_and(width, p.const_i32(31), "")?;
    let mask = p.b.build_left_shift(p.const_i32(1), shift, "")?;
    let mask = p.b.build_int_sub(mask, p.const_i32(1), "")?;
    let full =
        p.b.build_int_compare(IntPredicate::EQ, width, p.const_i32(32), "")?;
    Ok(p.b
        .build_select(full, p.const_i32(-1), mask, "mask")?
        .into_int_value())
}

/// The 32 bits at bit `shift % 32` of the 64-bit `high:low`: one `shf` instruction on the GPU.
pub(super) fn funnel_right<'ctx>(
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

    // The lane's four deltas are one aligned 16-byte vector: vector `32 * block + lane`.
    let vector = p.i32().vec_type(PER_LANE);
    let block_first = p.b.build_int_mul(
        block_value,
        p.const_i32(i64::from(BLOCK_LEN as u32 / PER_LANE)),
        "",
    )?;
    let at = p.b.build_int_add(block_first, lane, "")?;
    let slot = p.offset_ptr(vector.into(), deltas, at)?;
    let deltas_of_lane = p.b.build_load(vector, slot, "deltas")?.into_vector_value();
    let mut running = Vec::with_capacity(PER_LANE as usize);
    let mut sum = p.const_i32(0);
    for i in 0..PER_LANE {
        let delta =
            p.b.build_extract_element(deltas_of_lane, p.i32().const_int(u64::from(i), false), "")?
                .into_int_value();
        sum = p.b.build_int_add(sum, delta, "")?;
        running.push(sum);
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
    let mut sums = vector.get_undef();
    for (i, partial) in running.into_iter().enumerate() {
        let value = p.b.build_int_add(earlier_lanes, partial, "")?;
        sums =
            p.b.build_insert_element(sums, value, p.i32().const_int(i as u64, false), "")?;
    }
    p.b.build_store(slot, sums)?;
    let next = p.b.build_int_add(block_value, warps, "")?;
    block.add_incoming(&[(&next, p.current_block()?)]);
    p.b.build_unconditional_branch(header)?;
    p.b.position_at_end(done);
    Ok(())
}

fn unpack_host<'ctx>(
    p: &Emitter<'ctx, '_>,
    column: &HostTile<'ctx>,
    out: TileArray<'ctx>,
) -> CodegenResult<()> {
    let first_block = first_block(p, column.tile_start)?;
    let blocks = blocks_in(p, column.count)?;
    p.for_each_item(|item| {
        let position = p.item_offset(item)?;
        let block = block_of(p, position, blocks)?;
        let block = p.b.build_int_z_extend(block, p.i64(), "")?;
        let block = p.b.build_int_add(first_block, block, "")?;
        let start = load_i32(p, column.block_starts, block)?;
        let start = p.b.build_int_z_extend(start, p.i64(), "")?;
        let k = in_block(p, position)?;
        let value = match column.scheme.reading().sums_deltas {
            true => {
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
            false => decode_for(p, column.words, start, k)?,
        };
        p.set(out, item, zero_past(p, position, column.count, value)?)
    })
}

/// The tile block of `item` and its index in that block. When a tile row of threads holds whole
/// blocks, the index is the same for all of a thread's items and the block a constant apart, so
/// both fold into the thread's registers and load offsets. Blocks past the tile's last hold
/// copies of its last miniblocks (see `describe_miniblock`).
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

/// The column's block a tile starting at row `tile_start` (an `i64`) begins with.
fn first_block<'ctx>(
    p: &Emitter<'ctx, '_>,
    tile_start: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    Ok(p.b.build_right_shift(
        tile_start,
        p.const_i64(BLOCK_LEN.trailing_zeros() as i64),
        false,
        "first_block",
    )?)
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
    let mask = width_mask(p, width)?;
    let difference = p.b.build_and(bits, mask, "")?;
    Ok(p.b.build_int_add(reference, difference, "unpacked")?)
}

pub(super) fn load_i32<'ctx>(
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
