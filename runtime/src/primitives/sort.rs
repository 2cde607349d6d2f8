//! `sort` and `top_k` over rows written out by a pipeline. Both work on 64-bit sort words: a
//! key's order-preserving bits in the high half and the row's number in the low half, so one
//! unsigned comparison orders rows by key and breaks ties by row.
//!
//! Sorting is least-significant-digit radix sorting, 8 bits a pass, over one 32-bit key part at a
//! time from the last sort key to the first (a 64-bit key is two parts, a nullable key one more
//! for "is null"); between parts the words take the next part's bits of the rows they name. A
//! pass is three kernels: `histogram` counts the digits of each of `sort_parts` contiguous parts
//! of the words, `offsets` turns the counts into where each part's run of each digit starts
//! (one block per digit), and `scatter` moves every word there. Scattering is stable, which
//! least-significant-digit sorting needs: a block walks its part in order, a tile at a time; a
//! warp ranks its words among equal digits with eight ballots, counts per warp and digit are
//! scanned across warps, and the tile is ordered by digit in shared memory, so each digit's run
//! is written out contiguously. `decode` turns the sorted words back into the first key's
//! values, and `gather` reads every other output column in the sorted order.
//!
//! Top-k keeps, per block, the k smallest words seen so far in shared memory, sorted by a
//! bitonic network; the k-th is a threshold, and only a tile's words below it are added to the
//! candidates (a tile none of whose words pass costs one barrier). When the candidates would
//! overflow they are sorted and cut to k again. Each block writes its k words; the same kernel
//! over those candidates leaves k words in the end. On input that keeps improving on the
//! threshold (sorted the wrong way) every tile is sorted, which is bitonic top-k's own cost.

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};
use tessera_storage::DataType;

use super::hash::status;
use super::load::param_int;
use super::scan::{ballot, popcount, shfl_idx, sreg, tile_ranks, warp_inclusive_sum};
use crate::emit::{basic, CodegenResult, Emitter};
use crate::tile::{Target, TileShape};

/// Bits of a key a radix pass sorts by, and the digits they make.
pub const DIGIT_BITS: u32 = 8;
const DIGITS: u32 = 1 << DIGIT_BITS;
/// Contiguous parts the words are split into for a radix pass: a block (a host thread) sorts
/// one. On the GPU, enough that blocks are loaded evenly when there are several waves of them;
/// on the host, enough to spread over the cores. The counts are `DIGITS * parts` words.
pub fn sort_parts(target: Target) -> u32 {
    match target {
        Target::Nvptx { .. } => 4096,
        Target::Host => 256,
    }
}
/// Blocks of the first top-k stage (on the host: units of work).
pub fn top_k_parts(target: Target) -> u32 {
    match target {
        Target::Nvptx { .. } => 1024,
        Target::Host => 64,
    }
}
/// Candidates one top-k block holds: k of them and one tile more.
const TOPK_ROOM: u32 = 4096;
/// The largest k top-k takes; larger cuts sort everything.
pub const TOPK_MAX_K: u64 = 1024;
/// Words a later top-k stage gives each block.
pub const TOPK_WORDS_PER_PART: u64 = 1 << 16;

/// The tile of the sort kernels: 256 threads, one per digit, by 8 items on the GPU.
pub fn sort_tile(target: Target) -> TileShape {
    match target {
        Target::Nvptx { .. } => TileShape {
            threads: DIGITS,
            // Measured on an H100 (2^28 pairs): 12 and 16 items were no faster.
            items_per_thread: 8,
        },
        Target::Host => TileShape {
            threads: 1,
            items_per_thread: 2048,
        },
    }
}

/// The tile of top-k: its candidates hold k and a tile more.
pub fn top_k_tile(target: Target) -> TileShape {
    match target {
        Target::Nvptx { .. } => TileShape {
            threads: DIGITS,
            items_per_thread: 8,
        },
        Target::Host => sort_tile(target),
    }
}

/// The tile of `offsets`, whose blocks scan counts a thread each.
pub fn offsets_tile(target: Target) -> TileShape {
    TileShape {
        items_per_thread: 1,
        ..sort_tile(target)
    }
}

/// Which 32 bits of a key a part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    /// A key of at most 32 bits.
    Whole,
    High,
    Low,
}

/// One 32-bit part of a sort key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPart {
    /// Bits of a column's values (read from its buffer), inverted for a descending key.
    Value {
        ty: DataType,
        descending: bool,
        half: Half,
    },
    /// 1 where the column is null (read from its validity bytes): nulls come last.
    Null,
}

impl KeyPart {
    /// How many low bits of the part can differ between rows.
    pub fn bits(self) -> u32 {
        match self {
            KeyPart::Value {
                ty: DataType::Bool, ..
            }
            | KeyPart::Null => 1,
            KeyPart::Value { .. } => 32,
        }
    }
}

/// What a top-k kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopKInput {
    /// A key column (of at most 32 bits): words are made from its values and row numbers.
    Key { ty: DataType, descending: bool },
    /// Sort words, the candidates of an earlier stage.
    Words,
}

/// A kernel of the sort. Every parameter is a 64-bit value (an address or a number); the
/// parameter lists are given with each kind. `count` is the address of the `i64` row count
/// (0: `capacity` rows), and at most `capacity` rows are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKernel {
    /// `[count, capacity, column, words, status, validity, carried]`: each word gets `part`'s
    /// bits of its row, the row being the word's own position when `first`; when `nullable`,
    /// null rows get zero bits (their `Null` part orders them), as `validity` (one byte per row)
    /// says. When `carry`, a word's low half holds the row's 4 bytes of `carried` instead of the
    /// row: the value then rides through the sort and needs no gather (`Carried`), which only
    /// a sort of one key part can afford, since later parts find their rows by the low half.
    Keys {
        part: KeyPart,
        first: bool,
        nullable: bool,
        carry: bool,
    },
    /// `[count, capacity, words, counts, totals, pass, shift]`: per part, the count of each
    /// digit at `shift`; per digit, the total over parts, added to `totals[pass]`.
    Histogram,
    /// `[counts, totals, pass]`: the counts, digit by digit, become where each part's run starts.
    Offsets,
    /// `[count, capacity, words, sorted, counts, shift]`: every word moved to its place.
    Scatter,
    /// `[count, capacity, limit, words, source, target]`: `target[i] = source[row of word i]`
    /// for the first `limit` words, of elements of `width` bytes.
    Gather { width: u32 },
    /// `[count, capacity, limit, words, target]`: `target[i]` = the value of the key whose bits
    /// are word i's high half (a narrow key that is not nullable), for the first `limit` words.
    Decode { ty: DataType, descending: bool },
    /// `[count, capacity, limit, words, target]`: `target[i]` = word i's low half, the 4 bytes
    /// `Keys` carried, for the first `limit` words.
    Carried,
    /// `[count, capacity, input, candidates, status]`: each of `parts` blocks writes the `k` smallest
    /// words of its part, ascending (all ones where it has fewer).
    TopK {
        input: TopKInput,
        k: u32,
        parts: u32,
    },
}

impl SortKernel {
    /// The tile the kernel runs with.
    pub fn tile(self, target: Target) -> TileShape {
        match self {
            SortKernel::Offsets => offsets_tile(target),
            SortKernel::TopK { .. } => top_k_tile(target),
            _ => sort_tile(target),
        }
    }

    /// The blocks to launch (on the host: the units handed out to threads).
    pub fn parts(self, target: Target) -> u32 {
        match self {
            SortKernel::Offsets => DIGITS,
            SortKernel::TopK { parts, .. } => parts,
            _ => sort_parts(target),
        }
    }

    /// A short name of what the kernel does, for kernel names.
    pub fn label(self) -> String {
        match self {
            SortKernel::Keys { .. } => "keys".into(),
            SortKernel::Histogram => "histogram".into(),
            SortKernel::Offsets => "offsets".into(),
            SortKernel::Scatter => "scatter".into(),
            SortKernel::Gather { width } => format!("gather{width}"),
            SortKernel::Decode { .. } => "decode".into(),
            SortKernel::Carried => "carried".into(),
            SortKernel::TopK { .. } => "top_k".into(),
        }
    }

    /// How many parameters the kernel takes.
    pub fn params(self) -> usize {
        match self {
            SortKernel::Keys { carry, .. } => 6 + usize::from(carry),
            SortKernel::Histogram => 7,
            SortKernel::Offsets => 3,
            SortKernel::Scatter => 6,
            SortKernel::Gather { .. } => 6,
            SortKernel::Decode { .. } => 5,
            SortKernel::Carried => 5,
            SortKernel::TopK { .. } => 5,
        }
    }
}

/// Builds `kernel` as the function `name` of `module`.
pub fn build_sort_kernel<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    target: Target,
    name: &str,
    kernel: SortKernel,
) -> CodegenResult<()> {
    let tile = kernel.tile(target);
    let (em, params) = Emitter::new_word_kernel(ctx, module, target, tile, name, kernel.params())?;
    let k = SortEmitter { em: &em, params };
    match kernel {
        SortKernel::Keys {
            part,
            first,
            nullable,
            carry,
        } => k.keys(part, first, nullable, carry)?,
        SortKernel::Histogram => k.histogram()?,
        SortKernel::Offsets => k.offsets()?,
        SortKernel::Scatter => k.scatter()?,
        SortKernel::Gather { width } => k.gather(width)?,
        SortKernel::Decode { ty, descending } => k.decode(ty, descending)?,
        SortKernel::Carried => k.carried()?,
        SortKernel::TopK {
            input,
            k: count,
            parts,
        } => k.top_k(input, count, parts)?,
    }
    em.b.build_return(None)?;
    Ok(())
}

struct SortEmitter<'a, 'ctx, 'm> {
    em: &'a Emitter<'ctx, 'm>,
    params: Vec<IntValue<'ctx>>,
}

impl<'ctx> SortEmitter<'_, 'ctx, '_> {
    fn param(&self, i: usize) -> IntValue<'ctx> {
        self.params[i]
    }

    fn pointer(&self, i: usize) -> CodegenResult<PointerValue<'ctx>> {
        Ok(self
            .em
            .b
            .build_int_to_ptr(self.params[i], self.em.global_ptr(), "")?)
    }

    /// The rows to read: the count at parameter 0 (all of `capacity` when it is 0), at most
    /// parameter 1.
    fn rows(&self) -> CodegenResult<IntValue<'ctx>> {
        let em = self.em;
        let capacity = self.param(1);
        let result = em.alloca(em.i64().into(), "rows")?;
        em.b.build_store(result, capacity)?;
        let counted =
            em.b.build_int_compare(IntPredicate::NE, self.param(0), em.const_i64(0), "")?;
        em.if_then(counted, || {
            let count = em.b.build_load(em.i64(), self.pointer(0)?, "count")?;
            let fewer =
                em.b.build_int_compare(IntPredicate::ULT, count.into_int_value(), capacity, "")?;
            let rows = em.b.build_select(fewer, count, capacity.into(), "")?;
            em.b.build_store(result, rows)?;
            Ok(())
        })?;
        Ok(em.b.build_load(em.i64(), result, "")?.into_int_value())
    }

    /// Runs `body` for this block's part (on the host, for each part of the thread's range).
    fn for_each_part(
        &self,
        mut body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let em = self.em;
        match em.target {
            Target::Nvptx { .. } => {
                let part =
                    em.b.build_int_z_extend(em.block_index()?, em.i64(), "part")?;
                body(part)
            }
            Target::Host => {
                let first = param_int(em, 1)?;
                let end = param_int(em, 2)?;
                em.for_range(first, end, em.const_i64(1), body)
            }
        }
    }

    /// Rows `[start, end)` of part `part` of `parts`: whole tiles, contiguous, in order.
    fn part_rows(
        &self,
        rows: IntValue<'ctx>,
        part: IntValue<'ctx>,
        parts: u32,
    ) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let em = self.em;
        let items = em.const_i64(i64::from(em.tile.items()));
        let last =
            em.b.build_int_add(rows, em.const_i64(i64::from(em.tile.items()) - 1), "")?;
        let tiles = em.b.build_int_unsigned_div(last, items, "")?;
        let spread =
            em.b.build_int_add(tiles, em.const_i64(i64::from(parts) - 1), "")?;
        let per_part =
            em.b.build_int_unsigned_div(spread, em.const_i64(i64::from(parts)), "")?;
        let per_part = em.b.build_int_mul(per_part, items, "")?;
        let start = umin(em, em.b.build_int_mul(part, per_part, "")?, rows)?;
        let end = umin(em, em.b.build_int_add(start, per_part, "")?, rows)?;
        Ok((start, end))
    }

    /// Runs `body` with the start of each tile of `[start, end)`.
    fn for_each_tile(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let items = self.em.const_i64(i64::from(self.em.tile.items()));
        self.em.for_range(start, end, items, body)
    }

    /// Runs `body(position)` for each item of the tile at `tile_start` below `end` (striped).
    fn for_each_row(
        &self,
        tile_start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        mut body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let em = self.em;
        em.for_each_item(|item| {
            let position = item_position(em, tile_start, item)?;
            let inside =
                em.b.build_int_compare(IntPredicate::SLT, position, end, "")?;
            em.if_then(inside, || body(position))
        })
    }

    /// Runs `body(position)` for every row below `rows` of this block's part (the host: of each
    /// part of its range), tile by tile: the shape of the kernels that treat rows one by one.
    fn for_each_row_of_part(
        &self,
        rows: IntValue<'ctx>,
        mut body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        self.for_each_part(|index| {
            let (start, end) = self.part_rows(rows, index, sort_parts(self.em.target))?;
            self.for_each_tile(start, end, |tile_start| {
                self.for_each_row(tile_start, end, &mut body)
            })
        })
    }

    fn keys(&self, part: KeyPart, first: bool, nullable: bool, carry: bool) -> CodegenResult<()> {
        let em = self.em;
        let rows = self.rows()?;
        let column = self.pointer(2)?;
        let words = self.pointer(3)?;
        let rows = if first {
            self.numbered_rows(rows, 4)?
        } else {
            rows
        };
        self.for_each_row_of_part(rows, |position| {
            let slot = em.offset_ptr(em.i64().into(), words, position)?;
            let row = if first {
                position
            } else {
                row_of(em, em.b.build_load(em.i64(), slot, "")?.into_int_value())?
            };
            let mut bits = key_bits(em, part, column, row)?;
            if nullable {
                let validity = self.pointer(5)?;
                let valid = em.offset_ptr(em.i8().into(), validity, row)?;
                let valid = em.b.build_load(em.i8(), valid, "")?.into_int_value();
                let valid = em.truth(valid)?;
                bits =
                    em.b.build_select(valid, bits, em.const_i32(0), "")?
                        .into_int_value();
            }
            let low = if carry {
                let carried = em.offset_ptr(em.i32().into(), self.pointer(6)?, row)?;
                let value = em.b.build_load(em.i32(), carried, "")?.into_int_value();
                em.b.build_int_z_extend(value, em.i64(), "")?
            } else {
                row
            };
            em.b.build_store(slot, word_of(em, bits, low)?)?;
            Ok(())
        })
    }

    fn histogram(&self) -> CodegenResult<()> {
        let em = self.em;
        let rows = self.rows()?;
        let words = self.pointer(2)?;
        let counts = self.pointer(3)?;
        let totals = self.pass_totals(4, self.param(5))?;
        let shift = self.param(6);
        let counts_of = em.block_array(em.i32().into(), DIGITS, "tessera.sort.histogram")?;
        self.for_each_part(|index| {
            let (start, end) = self.part_rows(rows, index, sort_parts(em.target))?;
            em.for_each_strided(em.const_i64(DIGITS.into()), |digit| {
                let slot = em.offset_ptr(em.i32().into(), counts_of, digit)?;
                em.b.build_store(slot, em.const_i32(0))?;
                Ok(())
            })?;
            em.barrier()?;
            self.for_each_tile(start, end, |tile_start| {
                if em.target.is_gpu() {
                    // A warp whose rows share one digit (a digit every key has, or sorted
                    // input) adds its count once; others add a row at a time, which random
                    // digits spread over the counters. Finding equal digits by ballots made
                    // this kernel bound by its instructions (docs/PERFORMANCE.md).
                    em.for_each_item(|item| {
                        let position = item_position(em, tile_start, item)?;
                        let (valid, word) = self.word_or_zero(words, position, start, end)?;
                        let digit = digit_of(em, word, shift)?;
                        let first = shfl_idx(em, digit, 0)?;
                        let same = em.b.build_int_compare(IntPredicate::EQ, digit, first, "")?;
                        let agrees = em.b.build_or(same, em.b.build_not(valid, "")?, "")?;
                        let agreeing = ballot(em, agrees)?;
                        let uniform = em.b.build_int_compare(
                            IntPredicate::EQ,
                            agreeing,
                            em.const_i32(-1),
                            "",
                        )?;
                        let rows = popcount(em, ballot(em, valid)?)?;
                        let lane = em.b.build_and(em.tid()?, em.const_i32(31), "")?;
                        let leader =
                            em.b.build_int_compare(IntPredicate::EQ, lane, em.const_i32(0), "")?;
                        let one_for_all =
                            em.b.build_and(uniform, em.b.build_and(leader, valid, "")?, "")?;
                        let own = em.b.build_and(em.b.build_not(uniform, "")?, valid, "")?;
                        let adds = em.b.build_or(one_for_all, own, "")?;
                        em.if_then(adds, || {
                            let count = em.b.build_select(uniform, rows, em.const_i32(1), "")?;
                            let slot = em.offset_ptr(em.i32().into(), counts_of, digit)?;
                            atomic_add(em, slot, count.into_int_value())
                        })
                    })
                } else {
                    self.for_each_row(tile_start, end, |position| {
                        let word = load_word(em, words, position)?;
                        let slot =
                            em.offset_ptr(em.i32().into(), counts_of, digit_of(em, word, shift)?)?;
                        let count = em.b.build_load(em.i32(), slot, "")?.into_int_value();
                        em.b.build_store(slot, em.b.build_int_add(count, em.const_i32(1), "")?)?;
                        Ok(())
                    })
                }
            })?;
            em.barrier()?;
            em.for_each_strided(em.const_i64(DIGITS.into()), |digit| {
                let count =
                    em.b.build_load(
                        em.i32(),
                        em.offset_ptr(em.i32().into(), counts_of, digit)?,
                        "",
                    )?
                    .into_int_value();
                let count = em.b.build_int_z_extend(count, em.i64(), "")?;
                let at = counts_index(em, digit, index)?;
                em.b.build_store(em.offset_ptr(em.i64().into(), counts, at)?, count)?;
                let some =
                    em.b.build_int_compare(IntPredicate::NE, count, em.const_i64(0), "")?;
                em.if_then(some, || {
                    atomic_add(em, em.offset_ptr(em.i64().into(), totals, digit)?, count)
                })
            })?;
            em.barrier()
        })
    }

    fn offsets(&self) -> CodegenResult<()> {
        let em = self.em;
        let counts = self.pointer(0)?;
        let totals = self.pass_totals(1, self.param(2))?;
        self.for_each_part(|digit| {
            // Where the digit's runs start: after every smaller digit's.
            let partial = em.alloca(em.i64().into(), "partial")?;
            em.b.build_store(partial, em.const_i64(0))?;
            em.for_each_strided(digit, |smaller| {
                let total =
                    em.b.build_load(
                        em.i64(),
                        em.offset_ptr(em.i64().into(), totals, smaller)?,
                        "",
                    )?
                    .into_int_value();
                let sum = em.b.build_load(em.i64(), partial, "")?.into_int_value();
                em.b.build_store(partial, em.b.build_int_add(sum, total, "")?)?;
                Ok(())
            })?;
            let partial = em.b.build_load(em.i64(), partial, "")?.into_int_value();
            let (_, start) = block_exclusive_sum(em, partial)?;
            let carry = em.alloca(em.i64().into(), "carry")?;
            em.b.build_store(carry, start)?;
            let threads = em.const_i64(i64::from(em.tile.threads));
            em.for_range(
                em.const_i64(0),
                em.const_i64(sort_parts(em.target).into()),
                threads,
                |chunk| {
                    let tid = em.b.build_int_z_extend(em.tid()?, em.i64(), "")?;
                    let part = em.b.build_int_add(chunk, tid, "")?;
                    let slot =
                        em.offset_ptr(em.i64().into(), counts, counts_index(em, digit, part)?)?;
                    let count = em.b.build_load(em.i64(), slot, "")?.into_int_value();
                    let (before, total) = block_exclusive_sum(em, count)?;
                    let base = em.b.build_load(em.i64(), carry, "")?.into_int_value();
                    em.b.build_store(slot, em.b.build_int_add(base, before, "")?)?;
                    em.b.build_store(carry, em.b.build_int_add(base, total, "")?)?;
                    Ok(())
                },
            )
        })
    }

    fn scatter(&self) -> CodegenResult<()> {
        if self.em.target.is_gpu() {
            self.scatter_gpu()
        } else {
            self.scatter_host()
        }
    }

    /// One thread per part, walking it in order: each word goes to the next place of its digit.
    fn scatter_host(&self) -> CodegenResult<()> {
        let em = self.em;
        let rows = self.rows()?;
        let words = self.pointer(2)?;
        let sorted = self.pointer(3)?;
        let counts = self.pointer(4)?;
        let shift = self.param(5);
        let next = em.block_array(em.i64().into(), DIGITS, "tessera.sort.next")?;
        self.for_each_part(|index| {
            let (start, end) = self.part_rows(rows, index, sort_parts(em.target))?;
            em.for_range(
                em.const_i64(0),
                em.const_i64(DIGITS.into()),
                em.const_i64(1),
                |digit| {
                    let at = counts_index(em, digit, index)?;
                    let offset =
                        em.b.build_load(em.i64(), em.offset_ptr(em.i64().into(), counts, at)?, "")?;
                    em.b.build_store(em.offset_ptr(em.i64().into(), next, digit)?, offset)?;
                    Ok(())
                },
            )?;
            em.for_range(start, end, em.const_i64(1), |position| {
                let word = load_word(em, words, position)?;
                let slot = em.offset_ptr(em.i64().into(), next, digit_of(em, word, shift)?)?;
                let place = em.b.build_load(em.i64(), slot, "")?.into_int_value();
                em.b.build_store(em.offset_ptr(em.i64().into(), sorted, place)?, word)?;
                em.b.build_store(slot, em.b.build_int_add(place, em.const_i64(1), "")?)?;
                Ok(())
            })
        })
    }

    /// A block walks its part a tile at a time. Warp `w` holds rows `w * 32 * items ..` of the
    /// tile, item by item, so ranking item after item within a warp, then warp after warp, is
    /// row order.
    fn scatter_gpu(&self) -> CodegenResult<()> {
        let em = self.em;
        let rows = self.rows()?;
        let words = self.pointer(2)?;
        let sorted = self.pointer(3)?;
        let counts = self.pointer(4)?;
        let shift = self.param(5);
        let warps = em.tile.warps();
        let items = em.tile.items();
        let i32t = em.i32();
        let i64t = em.i64();
        let per_warp = em.shared_array("tessera.sort.per_warp", i32t.into(), warps * DIGITS)?;
        let tile_start_of = em.shared_array("tessera.sort.tile_start", i32t.into(), DIGITS)?;
        let tile_count = em.shared_array("tessera.sort.tile_count", i32t.into(), DIGITS)?;
        let next = em.shared_array("tessera.sort.next", i64t.into(), DIGITS)?;
        let stage = em.shared_array("tessera.sort.stage", i64t.into(), items)?;
        // A thread keeps its words and their ranks (-1 past the part's end) across the tile's
        // barriers, and the next tile's words; digits are taken from the words again.
        let word_of_item = em.tile_array(i64t.into(), "words")?;
        let rank_of_item = em.tile_array(i32t.into(), "ranks")?;
        let ahead = em.tile_array(i64t.into(), "ahead")?;
        let tid = em.tid()?;
        let tid64 = em.b.build_int_z_extend(tid, i64t, "")?;
        let lane = em.b.build_and(tid, em.const_i32(31), "lane")?;
        let warp =
            em.b.build_right_shift(tid, em.const_i32(5), false, "warp")?;
        let warp_row = em.b.build_int_mul(warp, em.const_i32(DIGITS.into()), "")?;
        let warp_slot = |digit: IntValue<'ctx>| -> CodegenResult<PointerValue<'ctx>> {
            let index = em.b.build_int_add(warp_row, digit, "")?;
            em.offset_ptr(i32t.into(), per_warp, index)
        };
        let shared_i32 = |array: PointerValue<'ctx>, index: IntValue<'ctx>| {
            em.offset_ptr(i32t.into(), array, index)
        };
        self.for_each_part(|index| {
            let (start, end) = self.part_rows(rows, index, sort_parts(em.target))?;
            let at = counts_index(em, tid64, index)?;
            let first =
                em.b.build_load(i64t, em.offset_ptr(i64t.into(), counts, at)?, "")?;
            em.b.build_store(em.offset_ptr(i64t.into(), next, tid)?, first)?;
            let warp_start = em.b.build_int_mul(
                warp,
                em.const_i32(i64::from(32 * em.tile.items_per_thread)),
                "",
            )?;
            let position_of = |tile_start: IntValue<'ctx>, item: crate::emit::Item<'ctx>| {
                let within = em.b.build_int_mul(item.index, em.const_i32(32), "")?;
                let within =
                    em.b.build_int_add(em.b.build_int_add(warp_start, within, "")?, lane, "")?;
                let within = em.b.build_int_z_extend(within, i64t, "")?;
                Ok::<_, crate::emit::CodegenError>(em.b.build_int_add(tile_start, within, "")?)
            };
            let fetch = |tile_start: IntValue<'ctx>| {
                em.for_each_item(|item| {
                    let position = position_of(tile_start, item)?;
                    let (_, word) = self.word_or_zero(words, position, start, end)?;
                    em.set(ahead, item, word)
                })
            };
            // The next tile's words are requested before this one is ranked, so their loads
            // overlap its barriers (measured: 14.3 ms for 2^28 words' four passes against 17.7,
            // though the registers this takes halve the blocks resident).
            fetch(start)?;
            self.for_each_tile(start, end, |tile_start| {
                em.for_each_item(|item| {
                    let word = em.get(ahead, item)?;
                    em.set(word_of_item, item, word)
                })?;
                let following =
                    em.b.build_int_add(tile_start, em.const_i64(i64::from(items)), "")?;
                fetch(following)?;
                for j in 0..DIGITS / 32 {
                    let digit =
                        em.b.build_int_add(lane, em.const_i32(i64::from(j * 32)), "")?;
                    em.b.build_store(warp_slot(digit)?, em.const_i32(0))?;
                }
                warp_sync(em)?;
                em.for_each_item(|item| {
                    let position = position_of(tile_start, item)?;
                    let valid =
                        em.b.build_int_compare(IntPredicate::SLT, position, end, "")?;
                    let word = em.get(word_of_item, item)?.into_int_value();
                    let digit = digit_of(em, word, shift)?;
                    let peers = digit_peers(em, digit, valid)?;
                    let below = sreg(em, "llvm.nvvm.read.ptx.sreg.lanemask.lt")?;
                    let earlier = em.b.build_and(peers, below, "")?;
                    let slot = warp_slot(digit)?;
                    let base = em.b.build_load(i32t, slot, "")?.into_int_value();
                    warp_sync(em)?;
                    let lowest =
                        em.b.build_int_compare(IntPredicate::EQ, earlier, em.const_i32(0), "")?;
                    let leads = em.b.build_and(lowest, valid, "")?;
                    em.if_then(leads, || {
                        let after = em.b.build_int_add(base, popcount(em, peers)?, "")?;
                        em.b.build_store(slot, after)?;
                        Ok(())
                    })?;
                    warp_sync(em)?;
                    em.set(word_of_item, item, word)?;
                    let rank = em.b.build_int_add(base, popcount(em, earlier)?, "")?;
                    let rank = em.b.build_select(valid, rank, em.const_i32(-1), "")?;
                    em.set(rank_of_item, item, rank)
                })?;
                em.barrier()?;
                // Thread `d` turns digit d's counts per warp into where each warp's words of
                // it start, then all threads find where each digit's words start in the tile.
                let running = em.alloca(i32t.into(), "running")?;
                em.b.build_store(running, em.const_i32(0))?;
                for w in 0..warps {
                    let index =
                        em.b.build_int_add(tid, em.const_i32(i64::from(w * DIGITS)), "")?;
                    let slot = shared_i32(per_warp, index)?;
                    let count = em.b.build_load(i32t, slot, "")?.into_int_value();
                    let sum = em.b.build_load(i32t, running, "")?.into_int_value();
                    em.b.build_store(slot, sum)?;
                    em.b.build_store(running, em.b.build_int_add(sum, count, "")?)?;
                }
                let total = em.b.build_load(i32t, running, "")?.into_int_value();
                em.b.build_store(shared_i32(tile_count, tid)?, total)?;
                let wide = em.b.build_int_z_extend(total, i64t, "")?;
                let (before, _) = block_exclusive_sum(em, wide)?;
                let before = em.b.build_int_truncate(before, i32t, "")?;
                em.b.build_store(shared_i32(tile_start_of, tid)?, before)?;
                em.barrier()?;
                em.for_each_item(|item| {
                    let rank = em.get(rank_of_item, item)?.into_int_value();
                    let valid =
                        em.b.build_int_compare(IntPredicate::SGE, rank, em.const_i32(0), "")?;
                    em.if_then(valid, || {
                        let word = em.get(word_of_item, item)?;
                        let digit = digit_of(em, word.into_int_value(), shift)?;
                        let run =
                            em.b.build_load(i32t, shared_i32(tile_start_of, digit)?, "")?;
                        let warp_part = em.b.build_load(i32t, warp_slot(digit)?, "")?;
                        let place = em.b.build_int_add(
                            run.into_int_value(),
                            warp_part.into_int_value(),
                            "",
                        )?;
                        let place = em.b.build_int_add(place, rank, "")?;
                        em.b.build_store(em.offset_ptr(i64t.into(), stage, place)?, word)?;
                        Ok(())
                    })
                })?;
                em.barrier()?;
                let remaining = em.b.build_int_sub(end, tile_start, "")?;
                let in_tile = umin(em, remaining, em.const_i64(i64::from(items)))?;
                em.for_each_strided(in_tile, |j| {
                    let word =
                        em.b.build_load(i64t, em.offset_ptr(i64t.into(), stage, j)?, "")?;
                    let word = word.into_int_value();
                    let digit = digit_of(em, word, shift)?;
                    let run =
                        em.b.build_load(i32t, shared_i32(tile_start_of, digit)?, "")?;
                    let run = em.b.build_int_z_extend(run.into_int_value(), i64t, "")?;
                    let base =
                        em.b.build_load(i64t, em.offset_ptr(i64t.into(), next, digit)?, "")?;
                    let place = em.b.build_int_add(
                        base.into_int_value(),
                        em.b.build_int_sub(j, run, "")?,
                        "",
                    )?;
                    em.b.build_store(em.offset_ptr(i64t.into(), sorted, place)?, word)?;
                    Ok(())
                })?;
                em.barrier()?;
                let slot = em.offset_ptr(i64t.into(), next, tid)?;
                let base = em.b.build_load(i64t, slot, "")?.into_int_value();
                let wide = em.b.build_int_z_extend(total, i64t, "")?;
                em.b.build_store(slot, em.b.build_int_add(base, wide, "")?)?;
                Ok(())
            })
        })
    }

    fn gather(&self, width: u32) -> CodegenResult<()> {
        let em = self.em;
        let rows = umin(em, self.rows()?, self.param(2))?;
        let words = self.pointer(3)?;
        let source = self.pointer(4)?;
        let target = self.pointer(5)?;
        let element = em.int_type(width * 8);
        self.for_each_row_of_part(rows, |position| {
            let row = row_of(em, load_word(em, words, position)?)?;
            let value =
                em.b.build_load(element, em.offset_ptr(element.into(), source, row)?, "")?;
            em.b.build_store(em.offset_ptr(element.into(), target, position)?, value)?;
            Ok(())
        })
    }

    fn decode(&self, ty: DataType, descending: bool) -> CodegenResult<()> {
        let em = self.em;
        self.write_each_word(em.value_type(ty), |word| {
            let high = em.b.build_right_shift(word, em.const_i64(32), false, "")?;
            let bits = em.b.build_int_truncate(high, em.i32(), "")?;
            key_value(em, ty, descending, bits)
        })
    }

    fn carried(&self) -> CodegenResult<()> {
        let em = self.em;
        self.write_each_word(em.i32().into(), |word| {
            Ok(em.b.build_int_truncate(word, em.i32(), "")?.into())
        })
    }

    /// `[count, capacity, limit, words, target]`: `target[i] = value(word i)`, an `elem`, for
    /// the first `limit` sorted words.
    fn write_each_word(
        &self,
        elem: BasicTypeEnum<'ctx>,
        value: impl Fn(IntValue<'ctx>) -> CodegenResult<BasicValueEnum<'ctx>>,
    ) -> CodegenResult<()> {
        let em = self.em;
        let rows = umin(em, self.rows()?, self.param(2))?;
        let words = self.pointer(3)?;
        let target = self.pointer(4)?;
        self.for_each_row_of_part(rows, |position| {
            let value = value(load_word(em, words, position)?)?;
            em.b.build_store(em.offset_ptr(elem, target, position)?, value)?;
            Ok(())
        })
    }

    fn top_k(&self, input: TopKInput, k: u32, parts: u32) -> CodegenResult<()> {
        let em = self.em;
        let i64t = em.i64();
        let rows = self.numbered_rows(self.rows()?, 4)?;
        let source = self.pointer(2)?;
        let out = self.pointer(3)?;
        let items = em.tile.items();
        let candidates = em.block_array(i64t.into(), TOPK_ROOM, "tessera.topk.candidates")?;
        let words = em.tile_array(i64t.into(), "words")?;
        let flags = em.tile_array(em.i8().into(), "flags")?;
        let ranks = em.tile_array(em.i32().into(), "ranks")?;
        let count = em.alloca(i64t.into(), "candidates")?;
        let threshold = em.alloca(i64t.into(), "threshold")?;
        let any = em.alloca(em.i1().into(), "any")?;
        self.for_each_part(|index| {
            let (start, end) = self.part_rows(rows, index, parts)?;
            em.b.build_store(count, em.const_i64(0))?;
            em.b.build_store(threshold, em.const_i64(-1))?;
            self.for_each_tile(start, end, |tile_start| {
                em.b.build_store(any, em.i1().const_zero())?;
                let bound = em.b.build_load(i64t, threshold, "")?.into_int_value();
                em.for_each_item(|item| {
                    let position = item_position(em, tile_start, item)?;
                    let inside =
                        em.b.build_int_compare(IntPredicate::SLT, position, end, "")?;
                    let at =
                        em.b.build_select(inside, position, start, "")?
                            .into_int_value();
                    let word = match input {
                        TopKInput::Words => load_word(em, source, at)?,
                        TopKInput::Key { ty, descending } => {
                            let part = KeyPart::Value {
                                ty,
                                descending,
                                half: Half::Whole,
                            };
                            word_of(em, key_bits(em, part, source, at)?, at)?
                        }
                    };
                    let below = em.b.build_int_compare(IntPredicate::ULT, word, bound, "")?;
                    let flag = em.b.build_and(inside, below, "")?;
                    em.set(words, item, word)?;
                    em.set(flags, item, em.flag(flag)?)?;
                    let seen = em.b.build_load(em.i1(), any, "")?.into_int_value();
                    em.b.build_store(any, em.b.build_or(seen, flag, "")?)?;
                    Ok(())
                })?;
                let seen = em.b.build_load(em.i1(), any, "")?.into_int_value();
                let enters = em.block_any(seen)?;
                em.if_then(enters, || {
                    let entering = tile_ranks(em, flags, ranks)?;
                    let entering = em.b.build_int_z_extend(entering, i64t, "")?;
                    let held = em.b.build_load(i64t, count, "")?.into_int_value();
                    em.for_each_item(|item| {
                        let flag = em.truth(em.get(flags, item)?.into_int_value())?;
                        em.if_then(flag, || {
                            let rank = em.get(ranks, item)?.into_int_value();
                            let rank = em.b.build_int_z_extend(rank, i64t, "")?;
                            let place = em.b.build_int_add(held, rank, "")?;
                            let word = em.get(words, item)?;
                            em.b.build_store(em.offset_ptr(i64t.into(), candidates, place)?, word)?;
                            Ok(())
                        })
                    })?;
                    let held = em.b.build_int_add(held, entering, "")?;
                    em.b.build_store(count, held)?;
                    em.barrier()?;
                    let full = em.b.build_int_compare(
                        IntPredicate::UGT,
                        held,
                        em.const_i64(i64::from(TOPK_ROOM - items)),
                        "",
                    )?;
                    em.if_then(full, || self.keep_smallest(candidates, count, threshold, k))
                })
            })?;
            self.keep_smallest(candidates, count, threshold, k)?;
            let held = em.b.build_load(i64t, count, "")?.into_int_value();
            let first = em.b.build_int_mul(index, em.const_i64(k.into()), "")?;
            em.for_each_strided(em.const_i64(k.into()), |j| {
                let has = em.b.build_int_compare(IntPredicate::ULT, j, held, "")?;
                let at =
                    em.b.build_select(has, j, em.const_i64(0), "")?
                        .into_int_value();
                let word =
                    em.b.build_load(i64t, em.offset_ptr(i64t.into(), candidates, at)?, "")?;
                let word = em.b.build_select(has, word, em.const_i64(-1).into(), "")?;
                let place = em.b.build_int_add(first, j, "")?;
                em.b.build_store(em.offset_ptr(i64t.into(), out, place)?, word)?;
                Ok(())
            })?;
            em.barrier()
        })
    }

    /// Sorts the candidates ascending with a bitonic network over the next power of two (padded
    /// with all-ones words) and keeps the first `k`; once there are `k`, the k-th is the bound
    /// a word must be below to enter.
    fn keep_smallest(
        &self,
        candidates: PointerValue<'ctx>,
        count: PointerValue<'ctx>,
        threshold: PointerValue<'ctx>,
        k: u32,
    ) -> CodegenResult<()> {
        let em = self.em;
        let i64t = em.i64();
        let held = em.b.build_load(i64t, count, "")?.into_int_value();
        let at_least_two = em.b.build_select(
            em.b.build_int_compare(IntPredicate::UGT, held, em.const_i64(2), "")?,
            held,
            em.const_i64(2),
            "",
        )?;
        let ctlz = em.intrinsic(
            "llvm.ctlz.i64",
            i64t.fn_type(&[i64t.into(), em.i1().into()], false),
        );
        let below =
            em.b.build_int_sub(at_least_two.into_int_value(), em.const_i64(1), "")?;
        let zeros =
            em.b.build_call(ctlz, &[below.into(), em.i1().const_zero().into()], "")?;
        let zeros = basic(zeros.try_as_basic_value().basic())?.into_int_value();
        let log = em.b.build_int_sub(em.const_i64(64), zeros, "log")?;
        let length = em.b.build_left_shift(em.const_i64(1), log, "length")?;
        let tid = em.b.build_int_z_extend(em.tid()?, i64t, "")?;
        let threads = em.const_i64(i64::from(em.tile.threads));
        em.for_range(em.b.build_int_add(held, tid, "")?, length, threads, |j| {
            em.b.build_store(em.offset_ptr(i64t.into(), candidates, j)?, em.const_i64(-1))?;
            Ok(())
        })?;
        em.barrier()?;
        let half = em.b.build_right_shift(length, em.const_i64(1), false, "")?;
        let one = em.const_i64(1);
        em.for_range(one, em.b.build_int_add(log, one, "")?, one, |size_log| {
            let size = em.b.build_left_shift(one, size_log, "size")?;
            em.for_range(em.const_i64(0), size_log, one, |step| {
                let stride_log =
                    em.b.build_int_sub(em.b.build_int_sub(size_log, step, "")?, one, "")?;
                let stride = em.b.build_left_shift(one, stride_log, "stride")?;
                em.for_each_strided(half, |pair| {
                    let high = em.b.build_left_shift(
                        em.b.build_right_shift(pair, stride_log, false, "")?,
                        em.b.build_int_add(stride_log, one, "")?,
                        "",
                    )?;
                    let low =
                        em.b.build_and(pair, em.b.build_int_sub(stride, one, "")?, "")?;
                    let first = em.b.build_int_add(high, low, "")?;
                    let second = em.b.build_int_add(first, stride, "")?;
                    let first_slot = em.offset_ptr(i64t.into(), candidates, first)?;
                    let second_slot = em.offset_ptr(i64t.into(), candidates, second)?;
                    let a = em.b.build_load(i64t, first_slot, "")?.into_int_value();
                    let b = em.b.build_load(i64t, second_slot, "")?.into_int_value();
                    let ascending = em.b.build_int_compare(
                        IntPredicate::EQ,
                        em.b.build_and(first, size, "")?,
                        em.const_i64(0),
                        "",
                    )?;
                    let smaller = umin(em, a, b)?;
                    let larger = em.b.build_select(
                        em.b.build_int_compare(IntPredicate::UGT, a, b, "")?,
                        a,
                        b,
                        "",
                    )?;
                    let (low_value, high_value) = (
                        em.b.build_select(ascending, smaller.into(), larger, "")?,
                        em.b.build_select(ascending, larger, smaller.into(), "")?,
                    );
                    em.b.build_store(first_slot, low_value)?;
                    em.b.build_store(second_slot, high_value)?;
                    Ok(())
                })?;
                em.barrier()
            })
        })?;
        let kept = umin(em, held, em.const_i64(k.into()))?;
        em.b.build_store(count, kept)?;
        let enough =
            em.b.build_int_compare(IntPredicate::EQ, kept, em.const_i64(k.into()), "")?;
        em.if_then(enough, || {
            let last = em.offset_ptr(i64t.into(), candidates, em.const_i64(i64::from(k) - 1))?;
            let bound = em.b.build_load(i64t, last, "")?;
            em.b.build_store(threshold, bound)?;
            Ok(())
        })?;
        // Every thread has read the bound before the next tile's candidates overwrite it.
        em.barrier()
    }

    /// `rows`, or none when they are too many to number in 32 bits, which the status word at
    /// parameter `status` then reports.
    fn numbered_rows(&self, rows: IntValue<'ctx>, status: usize) -> CodegenResult<IntValue<'ctx>> {
        let em = self.em;
        let too_many =
            em.b.build_int_compare(IntPredicate::UGT, rows, em.const_i64(u32::MAX.into()), "")?;
        em.if_then(too_many, || {
            let word = em.offset_ptr(
                em.i32().into(),
                self.pointer(status)?,
                em.const_i64(status::SORT_TOO_LARGE.into()),
            )?;
            em.b.build_store(word, em.const_i32(1))?;
            Ok(())
        })?;
        Ok(em
            .b
            .build_select(too_many, em.const_i64(0), rows, "")?
            .into_int_value())
    }

    /// `totals[pass]`: the digit totals of one pass.
    fn pass_totals(&self, param: usize, pass: IntValue<'ctx>) -> CodegenResult<PointerValue<'ctx>> {
        let em = self.em;
        let first = em.b.build_int_mul(pass, em.const_i64(DIGITS.into()), "")?;
        em.offset_ptr(em.i64().into(), self.pointer(param)?, first)
    }

    /// Whether `position` lies in `[start, end)`, and the word there (0 when it does not).
    fn word_or_zero(
        &self,
        words: PointerValue<'ctx>,
        position: IntValue<'ctx>,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
    ) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let em = self.em;
        let valid =
            em.b.build_int_compare(IntPredicate::SLT, position, end, "")?;
        let at =
            em.b.build_select(valid, position, start, "")?
                .into_int_value();
        let word = load_word(em, words, at)?;
        let word = em.b.build_select(valid, word, em.const_i64(0), "")?;
        Ok((valid, word.into_int_value()))
    }
}

/// The row of `item` of the tile at `tile_start` (striped, as the tile's loads are).
fn item_position<'ctx>(
    em: &Emitter<'ctx, '_>,
    tile_start: IntValue<'ctx>,
    item: crate::emit::Item<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let offset = em.item_offset(item)?;
    let offset = em.b.build_int_z_extend(offset, em.i64(), "")?;
    Ok(em.b.build_int_add(tile_start, offset, "position")?)
}

/// The counts array is digit-major: every part's count of digit 0, then of digit 1, ...
fn counts_index<'ctx>(
    em: &Emitter<'ctx, '_>,
    digit: IntValue<'ctx>,
    part: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let digit = em.b.build_int_z_extend_or_bit_cast(digit, em.i64(), "")?;
    let row =
        em.b.build_int_mul(digit, em.const_i64(sort_parts(em.target).into()), "")?;
    Ok(em.b.build_int_add(row, part, "")?)
}

fn load_word<'ctx>(
    em: &Emitter<'ctx, '_>,
    words: PointerValue<'ctx>,
    position: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let slot = em.offset_ptr(em.i64().into(), words, position)?;
    Ok(em.b.build_load(em.i64(), slot, "word")?.into_int_value())
}

/// The digit of `word` at bit `shift` (an `i32`).
fn digit_of<'ctx>(
    em: &Emitter<'ctx, '_>,
    word: IntValue<'ctx>,
    shift: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let shifted = em.b.build_right_shift(word, shift, false, "")?;
    let digit =
        em.b.build_and(shifted, em.const_i64(i64::from(DIGITS - 1)), "")?;
    Ok(em.b.build_int_truncate(digit, em.i32(), "digit")?)
}

/// The row a sort word names: its low 32 bits.
fn row_of<'ctx>(em: &Emitter<'ctx, '_>, word: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
    Ok(em.b.build_and(word, em.const_i64(u32::MAX.into()), "row")?)
}

/// `bits << 32 | low`: the row, or the 4 bytes a sort carries instead.
fn word_of<'ctx>(
    em: &Emitter<'ctx, '_>,
    bits: IntValue<'ctx>,
    low: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let high = em.b.build_int_z_extend(bits, em.i64(), "")?;
    let high = em.b.build_left_shift(high, em.const_i64(32), "")?;
    Ok(em.b.build_or(high, low, "word")?)
}

/// A key part's bits for `row` (an `i32`): unsigned order of the bits is the key's order.
fn key_bits<'ctx>(
    em: &Emitter<'ctx, '_>,
    part: KeyPart,
    column: PointerValue<'ctx>,
    row: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let i32t = em.i32();
    let i64t = em.i64();
    let (ty, descending, half) = match part {
        KeyPart::Null => {
            let valid =
                em.b.build_load(em.i8(), em.offset_ptr(em.i8().into(), column, row)?, "")?;
            let null = em.b.build_int_compare(
                IntPredicate::EQ,
                valid.into_int_value(),
                em.i8().const_zero(),
                "",
            )?;
            return Ok(em.b.build_int_z_extend(null, i32t, "")?);
        }
        KeyPart::Value {
            ty,
            descending,
            half,
        } => (ty, descending, half),
    };
    let elem = em.value_type(ty);
    let value =
        em.b.build_load(elem, em.offset_ptr(elem, column, row)?, "key")?;
    let sign32 = em.const_i32(i64::from(i32::MIN));
    let bits = match ty {
        DataType::Bool => em.b.build_int_z_extend(value.into_int_value(), i32t, "")?,
        DataType::I32 | DataType::Date | DataType::Str => {
            em.b.build_xor(value.into_int_value(), sign32, "")?
        }
        DataType::F32 => {
            let value = canonical_float(em, value.into_float_value())?;
            let raw = em.b.build_bit_cast(value, i32t, "")?.into_int_value();
            let negative = em.b.build_right_shift(raw, em.const_i32(31), true, "")?;
            let mask = em.b.build_or(negative, sign32, "")?;
            em.b.build_xor(raw, mask, "")?
        }
        // A decimal orders as its raw integer, a timestamp or time as its microseconds.
        DataType::I64
        | DataType::F64
        | DataType::Decimal(_)
        | DataType::Timestamp
        | DataType::Time => {
            let sign64 = em.const_i64(i64::MIN);
            let ordered = if ty != DataType::F64 {
                em.b.build_xor(value.into_int_value(), sign64, "")?
            } else {
                let value = canonical_float(em, value.into_float_value())?;
                let raw = em.b.build_bit_cast(value, i64t, "")?.into_int_value();
                let negative = em.b.build_right_shift(raw, em.const_i64(63), true, "")?;
                let mask = em.b.build_or(negative, sign64, "")?;
                em.b.build_xor(raw, mask, "")?
            };
            let part = match half {
                Half::High => {
                    em.b.build_right_shift(ordered, em.const_i64(32), false, "")?
                }
                Half::Low | Half::Whole => ordered,
            };
            em.b.build_int_truncate(part, i32t, "")?
        }
    };
    if descending {
        Ok(em.b.build_not(bits, "")?)
    } else {
        Ok(bits)
    }
}

/// `value` with the floats that compare equal made one bit pattern, so that their ordered bits
/// sort as SQL orders them: -0.0 becomes 0.0 (adding 0.0 does that and changes no other value),
/// and every NaN the positive quiet NaN, whose bits lie above infinity's (a NaN with its sign
/// bit set, which x86 makes of 0/0, would otherwise sort below every number).
fn canonical_float<'ctx>(
    em: &Emitter<'ctx, '_>,
    value: inkwell::values::FloatValue<'ctx>,
) -> CodegenResult<inkwell::values::FloatValue<'ctx>> {
    let ty = value.get_type();
    let sum = em.b.build_float_add(value, ty.const_zero(), "")?;
    let nan =
        em.b.build_float_compare(inkwell::FloatPredicate::UNO, value, value, "")?;
    Ok(em
        .b
        .build_select(nan, ty.const_float(f64::NAN), sum, "")?
        .into_float_value())
}

/// The value of a narrow key from its bits: `key_bits` undone.
fn key_value<'ctx>(
    em: &Emitter<'ctx, '_>,
    ty: DataType,
    descending: bool,
    bits: IntValue<'ctx>,
) -> CodegenResult<inkwell::values::BasicValueEnum<'ctx>> {
    let bits = if descending {
        em.b.build_not(bits, "")?
    } else {
        bits
    };
    let sign = em.const_i32(i64::from(i32::MIN));
    Ok(match ty {
        DataType::Bool => em.b.build_int_truncate(bits, em.i8(), "")?.into(),
        DataType::F32 => {
            // Non-negative values had their sign bit set, negative ones every bit flipped.
            let was_positive =
                em.b.build_int_compare(IntPredicate::SLT, bits, em.const_i32(0), "")?;
            let raw = em.b.build_select(
                was_positive,
                em.b.build_xor(bits, sign, "")?,
                em.b.build_not(bits, "")?,
                "",
            )?;
            em.b.build_bit_cast(raw, em.ctx.f32_type(), "")?
        }
        _ => em.b.build_xor(bits, sign, "")?.into(),
    })
}

fn umin<'ctx>(
    em: &Emitter<'ctx, '_>,
    a: IntValue<'ctx>,
    b: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let less = em.b.build_int_compare(IntPredicate::ULT, a, b, "")?;
    Ok(em.b.build_select(less, a, b, "")?.into_int_value())
}

fn atomic_add<'ctx>(
    em: &Emitter<'ctx, '_>,
    slot: PointerValue<'ctx>,
    value: IntValue<'ctx>,
) -> CodegenResult<()> {
    em.b.build_atomicrmw(AtomicRMWBinOp::Add, slot, value, AtomicOrdering::Monotonic)?;
    Ok(())
}

/// The lanes of the warp holding a valid item of the same digit as this lane (GPU only), from
/// eight ballots, one per bit of the digit. Measured on an H100, `match.any` took half as long
/// again over random digits.
fn digit_peers<'ctx>(
    em: &Emitter<'ctx, '_>,
    digit: IntValue<'ctx>,
    valid: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let mut peers = ballot(em, valid)?;
    for bit in 0..DIGIT_BITS {
        let set = em.b.build_and(
            em.b.build_right_shift(digit, em.const_i32(bit.into()), false, "")?,
            em.const_i32(1),
            "",
        )?;
        let set =
            em.b.build_int_compare(IntPredicate::NE, set, em.const_i32(0), "")?;
        let votes = ballot(em, set)?;
        let others = em.b.build_not(votes, "")?;
        let same = em.b.build_select(set, votes, others, "")?.into_int_value();
        peers = em.b.build_and(peers, same, "peers")?;
    }
    Ok(peers)
}

/// Orders the warp's shared-memory accesses before and after it (GPU only).
fn warp_sync(em: &Emitter<'_, '_>) -> CodegenResult<()> {
    let f = em.intrinsic(
        "llvm.nvvm.bar.warp.sync",
        em.ctx.void_type().fn_type(&[em.i32().into()], false),
    );
    em.b.build_call(f, &[em.const_i32(-1).into()], "")?;
    Ok(())
}

/// The sum of `value` (an `i64`) over the block's threads before this one, and over all of
/// them. Every thread must call it.
fn block_exclusive_sum<'ctx>(
    em: &Emitter<'ctx, '_>,
    value: IntValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    if !em.target.is_gpu() {
        return Ok((em.const_i64(0), value));
    }
    let i64t = em.i64();
    let warps = em.tile.warps();
    let sums = em.shared_array("tessera.sort.warp_sums", i64t.into(), warps)?;
    let tid = em.tid()?;
    let lane = em.b.build_and(tid, em.const_i32(31), "")?;
    let warp = em.b.build_right_shift(tid, em.const_i32(5), false, "")?;
    let inclusive = warp_inclusive_sum(em, value, lane)?;
    let last =
        em.b.build_int_compare(IntPredicate::EQ, lane, em.const_i32(31), "")?;
    em.if_then(last, || {
        em.b.build_store(em.offset_ptr(i64t.into(), sums, warp)?, inclusive)?;
        Ok(())
    })?;
    em.barrier()?;
    let mut before = em.const_i64(0);
    let mut total = em.const_i64(0);
    for w in 0..warps {
        let sum =
            em.b.build_load(
                i64t,
                em.offset_ptr(i64t.into(), sums, em.const_i32(w.into()))?,
                "",
            )?
            .into_int_value();
        let earlier =
            em.b.build_int_compare(IntPredicate::ULT, em.const_i32(w.into()), warp, "")?;
        let add =
            em.b.build_select(earlier, sum, em.const_i64(0), "")?
                .into_int_value();
        before = em.b.build_int_add(before, add, "")?;
        total = em.b.build_int_add(total, sum, "")?;
    }
    // The sums are read by every warp before any thread's next call writes them.
    em.barrier()?;
    let exclusive =
        em.b.build_int_sub(em.b.build_int_add(before, inclusive, "")?, value, "")?;
    Ok((exclusive, total))
}
