//! Block-wide reduction: every thread contributes one value, thread 0 gets the result. On the
//! GPU each warp reduces with shuffles, warp leaders meet in shared memory, and the first warp
//! reduces their partials; on the host a tile has one thread, so the value is the result.

use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{FloatPredicate, IntPredicate};

use crate::emit::{basic, int_constant, CodegenError, CodegenResult, Emitter};
use crate::wide_atomics;

use super::load::type_name;
use super::{primitive_called, Inlining};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    Add,
    Min,
    Max,
    /// Bitwise or, of integers (flags of a thread's slots, say).
    Or,
}

impl ReduceOp {
    fn name(self) -> &'static str {
        match self {
            ReduceOp::Add => "add",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Or => "or",
        }
    }
}

/// Shared memory the reduction needs: one 8-byte partial per warp (32 warps at most).
pub const SCRATCH_BYTES: u32 = 32 * 8;

/// Reduces `value` over the thread block; the result is valid in thread 0.
pub fn block_reduce<'ctx>(
    em: &Emitter<'ctx, '_>,
    op: ReduceOp,
    value: BasicValueEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    reduce_by_call(em, op, value, Inlining::Always)
}

/// [`block_reduce`] as a call that stays a call: one function per operation and type, so a
/// kernel reducing hundreds of values holds one call each rather than a dozen blocks each
/// (LLVM's passes grow faster than linearly in a function's blocks). Every thread must call it.
pub fn block_reduce_call<'ctx>(
    em: &Emitter<'ctx, '_>,
    op: ReduceOp,
    value: BasicValueEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    reduce_by_call(em, op, value, Inlining::Never)
}

fn reduce_by_call<'ctx>(
    em: &Emitter<'ctx, '_>,
    op: ReduceOp,
    value: BasicValueEnum<'ctx>,
    inlining: Inlining,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    let ty = value.get_type();
    let fn_ty = ty.fn_type(&[ty.into()], false);
    let called = match inlining {
        Inlining::Always => "",
        Inlining::Never => "_call",
    };
    let name = format!(
        "tessera.block_reduce{called}.{}.{}",
        op.name(),
        type_name(ty)
    );
    let f = primitive_called(em, &name, fn_ty, inlining, |p| {
        let param = p
            .function
            .get_nth_param(0)
            .ok_or_else(|| CodegenError::Invalid("block_reduce takes a value".into()))?;
        let result = if p.target.is_gpu() {
            reduce_block_gpu(p, op, param)?
        } else {
            param
        };
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    let call = em.b.build_call(f, &[value.into()], "reduced")?;
    basic(call.try_as_basic_value().basic())
}

fn reduce_block_gpu<'ctx>(
    p: &Emitter<'ctx, '_>,
    op: ReduceOp,
    value: BasicValueEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    let ty = value.get_type();
    let reduced = reduce_warp(p, op, value)?;
    let warps = p.tile.warps();
    if warps == 1 {
        return Ok(reduced);
    }
    let scratch = scratch(p)?;
    let tid = p.tid()?;
    let lane = p.b.build_and(tid, p.const_i32(31), "lane")?;
    let warp = p.b.build_right_shift(tid, p.const_i32(5), false, "warp")?;
    let leader =
        p.b.build_int_compare(IntPredicate::EQ, lane, p.const_i32(0), "")?;
    // The warps' partials pass through 8-byte slots: a 128-bit one in two rounds, its low
    // word, then its high word.
    let words = bit_width(ty)?.div_ceil(64);
    let mut partial = None;
    for word in 0..words {
        p.if_then(leader, || {
            let slot = slot_ptr(p, scratch, warp)?;
            p.b.build_store(slot, word_of(p, reduced, word, words)?)?;
            Ok(())
        })?;
        p.barrier()?;
        let into = match partial {
            Some(into) => into,
            None => {
                let into = p.alloca(ty, "partial")?;
                p.b.build_store(into, identity(op, ty)?)?;
                partial = Some(into);
                into
            }
        };
        let has_partial =
            p.b.build_int_compare(IntPredicate::ULT, tid, p.const_i32(i64::from(warps)), "")?;
        p.if_then(has_partial, || {
            let slot = slot_ptr(p, scratch, tid)?;
            let value = if words == 1 {
                p.b.build_load(ty, slot, "")?
            } else {
                let stored = p.b.build_load(p.i64(), slot, "")?;
                with_word(p, p.b.build_load(ty, into, "")?, stored, word)?
            };
            p.b.build_store(into, value)?;
            Ok(())
        })?;
        if word + 1 < words {
            // The slots are rewritten for the next word once everyone has read them.
            p.barrier()?;
        }
    }
    let partial = partial.ok_or_else(|| CodegenError::Invalid("a reduction of no words".into()))?;
    let partial = p.b.build_load(ty, partial, "")?;
    let total = reduce_warp(p, op, partial)?;
    // The scratch may be reused by the next reduction once everyone has read it.
    p.barrier()?;
    Ok(total)
}

/// Word `word` of `value` (the value itself when it is one word).
fn word_of<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: BasicValueEnum<'ctx>,
    word: u32,
    words: u32,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    if words == 1 {
        return Ok(value);
    }
    let value = value.into_int_value();
    let shift = value.get_type().const_int(u64::from(word * 64), false);
    let shifted = p.b.build_right_shift(value, shift, false, "")?;
    Ok(p.b.build_int_truncate(shifted, p.i64(), "")?.into())
}

/// The 128-bit `value` with its 64-bit word `word` replaced by `stored`.
fn with_word<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: BasicValueEnum<'ctx>,
    stored: BasicValueEnum<'ctx>,
    word: u32,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    let value = value.into_int_value();
    let ty = value.get_type();
    let shift = ty.const_int(u64::from(word * 64), false);
    let mask =
        p.b.build_left_shift(ty.const_int(u64::MAX, false), shift, "")?;
    let kept = p.b.build_and(value, p.b.build_not(mask, "")?, "")?;
    let placed = p.b.build_int_z_extend(stored.into_int_value(), ty, "")?;
    let placed = p.b.build_left_shift(placed, shift, "")?;
    Ok(p.b.build_or(kept, placed, "")?.into())
}

/// A warp-wide reduction with shuffles; the result is valid in lane 0.
fn reduce_warp<'ctx>(
    p: &Emitter<'ctx, '_>,
    op: ReduceOp,
    value: BasicValueEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    let mut v = value;
    let lanes = p.tile.threads.min(32);
    let mut offset = lanes / 2;
    while offset > 0 {
        let other = shuffle_down(p, v, offset)?;
        v = combine(p, op, v, other)?;
        offset /= 2;
    }
    Ok(v)
}

/// Shuffles any 32-, 64- or 128-bit value down by `offset` lanes, 32 bits at a time.
fn shuffle_down<'ctx>(
    p: &Emitter<'ctx, '_>,
    value: BasicValueEnum<'ctx>,
    offset: u32,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    let ty = value.get_type();
    let bits = bit_width(ty)?;
    let int_ty = p.int_type(bits);
    let as_int = p.b.build_bit_cast(value, int_ty, "")?.into_int_value();
    let shuffled: IntValue = if bits == 32 {
        p.shfl_down_i32(as_int, offset)?
    } else if bits == 64 {
        let low = p.b.build_int_truncate(as_int, p.i32(), "lo")?;
        let high =
            p.b.build_right_shift(as_int, p.i64().const_int(32, false), false, "")?;
        let high = p.b.build_int_truncate(high, p.i32(), "hi")?;
        let low = p.shfl_down_i32(low, offset)?;
        let high = p.shfl_down_i32(high, offset)?;
        let low = p.b.build_int_z_extend(low, p.i64(), "")?;
        let high = p.b.build_int_z_extend(high, p.i64(), "")?;
        let high =
            p.b.build_left_shift(high, p.i64().const_int(32, false), "")?;
        p.b.build_or(high, low, "")?
    } else {
        let mut shuffled = int_ty.const_zero();
        for part in 0..bits / 32 {
            let shift = int_ty.const_int(u64::from(part * 32), false);
            let piece = p.b.build_right_shift(as_int, shift, false, "")?;
            let piece = p.b.build_int_truncate(piece, p.i32(), "")?;
            let piece = p.shfl_down_i32(piece, offset)?;
            let piece = p.b.build_int_z_extend(piece, int_ty, "")?;
            let piece = p.b.build_left_shift(piece, shift, "")?;
            shuffled = p.b.build_or(shuffled, piece, "")?;
        }
        shuffled
    };
    Ok(p.b.build_bit_cast(shuffled, ty, "")?)
}

/// `a op b` for integers (signed) and floats.
pub fn combine<'ctx>(
    p: &Emitter<'ctx, '_>,
    op: ReduceOp,
    a: BasicValueEnum<'ctx>,
    b: BasicValueEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    Ok(match (a, b) {
        (BasicValueEnum::IntValue(a), BasicValueEnum::IntValue(b)) => match op {
            ReduceOp::Add => p.b.build_int_add(a, b, "")?.into(),
            ReduceOp::Min | ReduceOp::Max => {
                let pred = if op == ReduceOp::Min {
                    IntPredicate::SLT
                } else {
                    IntPredicate::SGT
                };
                let pick_a = p.b.build_int_compare(pred, a, b, "")?;
                p.b.build_select(pick_a, a, b, "")?
            }
            ReduceOp::Or => p.b.build_or(a, b, "")?.into(),
        },
        (BasicValueEnum::FloatValue(a), BasicValueEnum::FloatValue(b)) => match op {
            ReduceOp::Add => p.b.build_float_add(a, b, "")?.into(),
            // NaN is the largest value (as `sort` and comparisons have it): a maximum is NaN
            // once any value is, a minimum only when every value is.
            ReduceOp::Min => {
                let less = p.b.build_float_compare(FloatPredicate::OLT, a, b, "")?;
                let b_nan = p.b.build_float_compare(FloatPredicate::UNO, b, b, "")?;
                let pick_a = p.b.build_or(less, b_nan, "")?;
                p.b.build_select(pick_a, a, b, "")?
            }
            ReduceOp::Max => {
                let greater = p.b.build_float_compare(FloatPredicate::OGT, a, b, "")?;
                let a_nan = p.b.build_float_compare(FloatPredicate::UNO, a, a, "")?;
                let pick_a = p.b.build_or(greater, a_nan, "")?;
                p.b.build_select(pick_a, a, b, "")?
            }
            ReduceOp::Or => {
                return Err(CodegenError::Invalid("a bitwise or takes integers".into()))
            }
        },
        _ => {
            return Err(CodegenError::Invalid(
                "cannot combine values of different kinds".into(),
            ))
        }
    })
}

/// The floating-point value that leaves any other unchanged under `op`: NaN for a minimum,
/// since NaN is the largest value.
pub fn float_identity(op: ReduceOp) -> f64 {
    match op {
        ReduceOp::Add | ReduceOp::Or => 0.0,
        ReduceOp::Min => f64::NAN,
        ReduceOp::Max => f64::NEG_INFINITY,
    }
}

/// `*ptr = *ptr op value`, atomically (relaxed). Integers and floating-point sums use the
/// hardware's atomics; a floating-point minimum or maximum is a compare-and-swap loop over
/// [`combine`], since the hardware's (IEEE `minNum`/`maxNum`) would let a NaN be lost.
pub fn atomic_combine<'ctx>(
    p: &Emitter<'ctx, '_>,
    op: ReduceOp,
    ptr: PointerValue<'ctx>,
    value: BasicValueEnum<'ctx>,
) -> CodegenResult<()> {
    use inkwell::AtomicRMWBinOp;
    let float = match value {
        BasicValueEnum::FloatValue(float) => float,
        _ => {
            let op = match op {
                ReduceOp::Add => AtomicRMWBinOp::Add,
                ReduceOp::Min => AtomicRMWBinOp::Min,
                ReduceOp::Max => AtomicRMWBinOp::Max,
                ReduceOp::Or => AtomicRMWBinOp::Or,
            };
            return p.atomic_update(op, ptr, value);
        }
    };
    if op == ReduceOp::Add {
        return p.atomic_update(AtomicRMWBinOp::FAdd, ptr, value);
    }
    let float_type = float.get_type();
    let bits_type = p.int_type(bit_width(float_type.into())?);
    let before = p.current_block()?;
    let header = p.ctx.append_basic_block(p.function, "cas");
    let attempt = p.ctx.append_basic_block(p.function, "cas_try");
    let done = p.ctx.append_basic_block(p.function, "cas_done");
    let load = p.atomic_load(bits_type, ptr)?;
    p.b.build_unconditional_branch(header)?;
    p.b.position_at_end(header);
    let old = p.b.build_phi(bits_type, "old")?;
    old.add_incoming(&[(&load, before)]);
    let old_bits = old.as_basic_value().into_int_value();
    let old_value = p.b.build_bit_cast(old_bits, float_type, "")?;
    let new_value = combine(p, op, old_value, float.into())?;
    let new_bits =
        p.b.build_bit_cast(new_value, bits_type, "")?
            .into_int_value();
    let unchanged =
        p.b.build_int_compare(IntPredicate::EQ, old_bits, new_bits, "")?;
    p.b.build_conditional_branch(unchanged, done, attempt)?;
    p.b.position_at_end(attempt);
    let exchanged = p.b.build_cmpxchg(
        ptr,
        old_bits,
        new_bits,
        inkwell::AtomicOrdering::Monotonic,
        inkwell::AtomicOrdering::Monotonic,
    )?;
    let seen = p.b.build_extract_value(exchanged, 0, "")?.into_int_value();
    let stored = p.b.build_extract_value(exchanged, 1, "")?.into_int_value();
    old.add_incoming(&[(&seen, attempt)]);
    p.b.build_conditional_branch(stored, done, header)?;
    p.b.position_at_end(done);
    Ok(())
}

/// The value that leaves any other unchanged under `op`.
pub fn identity<'ctx>(
    op: ReduceOp,
    ty: BasicTypeEnum<'ctx>,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    Ok(match ty {
        BasicTypeEnum::IntType(t) if t.get_bit_width() == 128 => {
            let value = match op {
                ReduceOp::Add | ReduceOp::Or => 0,
                ReduceOp::Min => wide_atomics::identity(wide_atomics::MIN_IDENTITY_WORD),
                ReduceOp::Max => wide_atomics::identity(wide_atomics::MAX_IDENTITY_WORD),
            };
            int_constant(t, value).into()
        }
        BasicTypeEnum::IntType(t) => {
            let bits = t.get_bit_width();
            let value: u64 = match op {
                ReduceOp::Add | ReduceOp::Or => 0,
                // The largest signed value: a zero sign bit, the rest ones.
                ReduceOp::Min => (1u64 << (bits - 1)) - 1,
                ReduceOp::Max => 1u64 << (bits - 1),
            };
            t.const_int(value, false).into()
        }
        BasicTypeEnum::FloatType(t) => t.const_float(float_identity(op)).into(),
        _ => return Err(CodegenError::Invalid("no identity for this type".into())),
    })
}

fn bit_width(ty: BasicTypeEnum<'_>) -> CodegenResult<u32> {
    match ty {
        BasicTypeEnum::IntType(t) if matches!(t.get_bit_width(), 32 | 64 | 128) => {
            Ok(t.get_bit_width())
        }
        BasicTypeEnum::FloatType(t) => Ok(if t == t.get_context().f32_type() {
            32
        } else {
            64
        }),
        _ => Err(CodegenError::Invalid(
            "reductions take 32-, 64- or 128-bit values".into(),
        )),
    }
}

/// The block's reduction scratch in shared memory, declared once per module.
fn scratch<'ctx>(p: &Emitter<'ctx, '_>) -> CodegenResult<PointerValue<'ctx>> {
    p.shared_array("tessera.reduce_scratch", p.i64().into(), SCRATCH_BYTES / 8)
}

/// Partial `index` of the scratch: slots are 8 bytes apart whatever the value's width.
fn slot_ptr<'ctx>(
    p: &Emitter<'ctx, '_>,
    scratch: PointerValue<'ctx>,
    index: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    p.offset_ptr(p.i64().into(), scratch, index)
}
