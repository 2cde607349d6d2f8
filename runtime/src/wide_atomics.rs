//! Atomic updates of 128-bit integers (the raw values of decimals of more than 18 digits),
//! built from 64-bit atomics, since neither the GPU nor LLVM's NVPTX back end has 128-bit
//! read-modify-write atomics.
//!
//! A value is two 64-bit words, the low one first. A sum adds the low words atomically and
//! carries into the high word with a second atomic add: every carry is counted exactly once, so
//! the total is exact once all updates are done. A minimum or maximum needs both words to
//! change together: the high word doubles as a lock, holding [`LOCKED`] while one thread
//! compares and writes. No value a wide accumulator holds has that high word: decimals stay
//! within 38 digits (below 2^127 in magnitude), and the identities of a minimum and a maximum
//! are [`MIN_IDENTITY_WORD`] and [`MAX_IDENTITY_WORD`] repeated, beyond every decimal but not
//! the lock.

use inkwell::values::{IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

use crate::emit::{relaxed_and_aligned, CodegenError, CodegenResult, Emitter};

/// The high word of an accumulator while a thread holds it.
pub const LOCKED: i64 = i64::MIN;

/// Both words of a 128-bit minimum's identity: `0x7fff…ffff_7fff…ffff`, above 10^38.
pub const MIN_IDENTITY_WORD: u64 = i64::MAX as u64;

/// Both words of a 128-bit maximum's identity: `0x8000…0001_8000…0001`, below -10^38 (and
/// its high word is not [`LOCKED`]).
pub const MAX_IDENTITY_WORD: u64 = (i64::MIN + 1) as u64;

/// A 128-bit identity from the word it repeats.
pub fn identity(word: u64) -> i128 {
    ((u128::from(word) << 64) | u128::from(word)) as i128
}

/// `*ptr = *ptr op value` for a 128-bit `value`: `Add`, `Min` or `Max` (signed).
pub fn update<'ctx>(
    em: &Emitter<'ctx, '_>,
    op: AtomicRMWBinOp,
    ptr: PointerValue<'ctx>,
    value: IntValue<'ctx>,
) -> CodegenResult<()> {
    let words = Words::of(em, ptr, value)?;
    match op {
        AtomicRMWBinOp::Add => add(em, words),
        AtomicRMWBinOp::Min => exchange_if(em, words, IntPredicate::SLT),
        AtomicRMWBinOp::Max => exchange_if(em, words, IntPredicate::SGT),
        other => Err(CodegenError::Invalid(format!(
            "no 128-bit atomic {other:?}"
        ))),
    }
}

/// An accumulator's two words and the value's.
struct Words<'ctx> {
    low_ptr: PointerValue<'ctx>,
    high_ptr: PointerValue<'ctx>,
    value: IntValue<'ctx>,
    low: IntValue<'ctx>,
    high: IntValue<'ctx>,
}

impl<'ctx> Words<'ctx> {
    fn of(
        em: &Emitter<'ctx, '_>,
        ptr: PointerValue<'ctx>,
        value: IntValue<'ctx>,
    ) -> CodegenResult<Words<'ctx>> {
        let b = &em.b;
        let i64t = em.i64();
        let high_ptr = em.offset_ptr(i64t.into(), ptr, em.const_i32(1))?;
        let shifted =
            b.build_right_shift(value, value.get_type().const_int(64, false), true, "")?;
        Ok(Words {
            low_ptr: ptr,
            high_ptr,
            value,
            low: b.build_int_truncate(value, i64t, "low")?,
            high: b.build_int_truncate(shifted, i64t, "high")?,
        })
    }
}

/// Adds the low words, then the high words with the carry out of the low ones.
fn add<'ctx>(em: &Emitter<'ctx, '_>, words: Words<'ctx>) -> CodegenResult<()> {
    let b = &em.b;
    let monotonic = AtomicOrdering::Monotonic;
    let before = b.build_atomicrmw(AtomicRMWBinOp::Add, words.low_ptr, words.low, monotonic)?;
    let after = b.build_int_add(before, words.low, "")?;
    let carried = b.build_int_compare(IntPredicate::ULT, after, before, "carried")?;
    let carry = b.build_int_z_extend(carried, em.i64(), "")?;
    let high = b.build_int_add(words.high, carry, "")?;
    b.build_atomicrmw(AtomicRMWBinOp::Add, words.high_ptr, high, monotonic)?;
    Ok(())
}

/// Replaces the accumulator with the value where `value pred accumulator` (a minimum with
/// `SLT`, a maximum with `SGT`), holding the high word as a lock meanwhile. A value whose high
/// word alone already loses is dropped without the lock: the accumulator only moves away from it.
fn exchange_if<'ctx>(
    em: &Emitter<'ctx, '_>,
    words: Words<'ctx>,
    pred: IntPredicate,
) -> CodegenResult<()> {
    let b = &em.b;
    let i64t = em.i64();
    let i128t = words.value.get_type();
    let locked = i64t.const_int(LOCKED as u64, true);
    let retry = em.ctx.append_basic_block(em.function, "wide_retry");
    let unlocked = em.ctx.append_basic_block(em.function, "wide_unlocked");
    let attempt = em.ctx.append_basic_block(em.function, "wide_lock");
    let held = em.ctx.append_basic_block(em.function, "wide_held");
    let done = em.ctx.append_basic_block(em.function, "wide_done");
    b.build_unconditional_branch(retry)?;

    b.position_at_end(retry);
    let high = em.atomic_load(i64t, words.high_ptr)?;
    let is_locked = b.build_int_compare(IntPredicate::EQ, high, locked, "")?;
    b.build_conditional_branch(is_locked, retry, unlocked)?;

    b.position_at_end(unlocked);
    // The high words alone decide against the value: it cannot win, now or later.
    let loses = match pred {
        IntPredicate::SLT => IntPredicate::SGT,
        _ => IntPredicate::SLT,
    };
    let lost = b.build_int_compare(loses, words.high, high, "")?;
    b.build_conditional_branch(lost, done, attempt)?;

    b.position_at_end(attempt);
    let taken = b.build_cmpxchg(
        words.high_ptr,
        high,
        locked,
        AtomicOrdering::Monotonic,
        AtomicOrdering::Monotonic,
    )?;
    let taken = b.build_extract_value(taken, 1, "")?.into_int_value();
    b.build_conditional_branch(taken, held, retry)?;

    b.position_at_end(held);
    fence(em)?;
    let low = em.atomic_load(i64t, words.low_ptr)?;
    let high_part = b.build_int_s_extend(high, i128t, "")?;
    let high_part = b.build_left_shift(high_part, i128t.const_int(64, false), "")?;
    let current = b.build_or(high_part, b.build_int_z_extend(low, i128t, "")?, "")?;
    let wins = b.build_int_compare(pred, words.value, current, "")?;
    let kept_low = b.build_select(wins, words.low, low, "")?.into_int_value();
    let kept_high = b.build_select(wins, words.high, high, "")?.into_int_value();
    let store = b.build_store(words.low_ptr, kept_low)?;
    relaxed_and_aligned(store, 8)?;
    // The low word is written before the high word gives the lock back.
    fence(em)?;
    let release = b.build_store(words.high_ptr, kept_high)?;
    relaxed_and_aligned(release, 8)?;
    b.build_unconditional_branch(done)?;

    b.position_at_end(done);
    Ok(())
}

/// Orders the accesses to the two words around taking and giving back the lock: a memory
/// barrier over the whole GPU (NVPTX selects no `fence` instruction), a sequentially
/// consistent fence on the host.
fn fence(em: &Emitter<'_, '_>) -> CodegenResult<()> {
    if em.target.is_gpu() {
        let void = em.ctx.void_type().fn_type(&[], false);
        em.b.build_call(em.intrinsic("llvm.nvvm.membar.gl", void), &[], "")?;
    } else {
        em.b.build_fence(AtomicOrdering::SequentiallyConsistent, false, "")?;
    }
    Ok(())
}
