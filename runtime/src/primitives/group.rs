//! Grouping by hash: the slot of a group in an open-addressing table of 64-bit packed keys, found
//! or claimed with compare-and-swap, so that every thread adding a row of the same group lands
//! on the same slot. Keys are stored with their top bit flipped, so zeroed memory is an empty
//! table; the one key whose stored form is zero lives in an extra slot after the others. A key
//! of several words (`program::wide_key`) is matched and claimed word by word in the same probe
//! sequence.

use inkwell::basic_block::BasicBlock;
use inkwell::values::{IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate};

use crate::emit::{basic, CodegenResult, Emitter};

use super::hash::{report_unless, status};
use super::load::{param_int, param_ptr};
use super::primitive;

/// Slots a row may probe before the table counts as full. At the load the table is sized for
/// (half full) a probe sequence averages under two slots; runs this long only happen when the
/// estimate of the groups was far too low.
const MAX_PROBES: i64 = 256;

/// The slot of the group whose packed key is `packed` (an `i64`) in a table of `capacity` slots
/// (a power of two) at `keys`, claiming an empty one for a new group; -1 when the table is
/// full, which is recorded in `status` so the query can run again with a larger table.
pub fn group_slot<'ctx>(
    em: &Emitter<'ctx, '_>,
    keys: PointerValue<'ctx>,
    capacity: IntValue<'ctx>,
    packed: IntValue<'ctx>,
    status_words: PointerValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let i64t = em.i64();
    let ty = i64t.fn_type(
        &[
            em.global_ptr().into(),
            i64t.into(),
            i64t.into(),
            em.global_ptr().into(),
        ],
        false,
    );
    let f = primitive(em, "tessera.group_slot", ty, |p| {
        let keys = param_ptr(p, 0)?;
        let capacity = param_int(p, 1)?;
        let packed = param_int(p, 2)?;
        let status_words = param_ptr(p, 3)?;
        let top = p.i64().const_int(1 << 63, false);
        let stored = p.b.build_xor(packed, top, "stored")?;
        let zero = p.const_i64(0);
        let result = p.alloca(p.i64().into(), "result")?;

        let special = p.b.build_int_compare(IntPredicate::EQ, stored, zero, "")?;
        let extra = p.ctx.append_basic_block(p.function, "extra_slot");
        let search = p.ctx.append_basic_block(p.function, "search");
        let done = p.ctx.append_basic_block(p.function, "done");
        p.b.build_conditional_branch(special, extra, search)?;

        p.b.position_at_end(extra);
        p.b.build_store(
            p.offset_ptr(p.i64().into(), keys, capacity)?,
            p.const_i64(1),
        )?;
        p.b.build_store(result, capacity)?;
        p.b.build_unconditional_branch(done)?;

        p.b.position_at_end(search);
        probe(p, &[keys], capacity, &[stored], status_words, result, done)
    })?;
    let call = em.b.build_call(
        f,
        &[
            keys.into(),
            capacity.into(),
            packed.into(),
            status_words.into(),
        ],
        "group_slot",
    )?;
    Ok(basic(call.try_as_basic_value().basic())?.into_int_value())
}

/// [`group_slot`] for a key of several words (`program::wide_key`), each non-zero: word `j` of
/// the slot at `index` lies at `tables[j] + index`. Each word is matched, or claimed with its
/// own compare-and-swap when empty, in order; a word holding another value sends the row on
/// to the next slot. Words are only ever set once, so two keys can never both match every
/// word of one slot, and whoever set a slot's word goes on to its next word: once the kernel
/// ends, every word of an occupied slot is set, and the slot holds one key whole. The extra
/// last slot of the one-word table stays empty.
pub fn group_slot_wide<'ctx>(
    em: &Emitter<'ctx, '_>,
    tables: &[PointerValue<'ctx>],
    capacity: IntValue<'ctx>,
    words: &[IntValue<'ctx>],
    status_words: PointerValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let width = words.len();
    let i64t = em.i64();
    let mut params: Vec<inkwell::types::BasicMetadataTypeEnum<'ctx>> =
        vec![em.global_ptr().into(); width];
    params.push(i64t.into());
    params.extend(std::iter::repeat_n(
        inkwell::types::BasicMetadataTypeEnum::from(i64t),
        width,
    ));
    params.push(em.global_ptr().into());
    let ty = i64t.fn_type(&params, false);
    let name = format!("tessera.group_slot_wide{width}");
    let f = primitive(em, &name, ty, |p| {
        let tables = (0..width)
            .map(|j| param_ptr(p, j as u32))
            .collect::<CodegenResult<Vec<_>>>()?;
        let capacity = param_int(p, width as u32)?;
        let words = (0..width)
            .map(|j| param_int(p, (width + 1 + j) as u32))
            .collect::<CodegenResult<Vec<_>>>()?;
        let status_words = param_ptr(p, (2 * width + 1) as u32)?;
        let result = p.alloca(p.i64().into(), "result")?;
        let done = p.ctx.append_basic_block(p.function, "done");
        probe(p, &tables, capacity, &words, status_words, result, done)
    })?;
    let mut args: Vec<inkwell::values::BasicMetadataValueEnum<'ctx>> =
        tables.iter().map(|t| (*t).into()).collect();
    args.push(capacity.into());
    args.extend(
        words
            .iter()
            .map(|w| inkwell::values::BasicMetadataValueEnum::from(*w)),
    );
    args.push(status_words.into());
    let call = em.b.build_call(f, &args, "group_slot")?;
    Ok(basic(call.try_as_basic_value().basic())?.into_int_value())
}

/// The probe sequence of both tables, from the current block: starting at the slot the
/// stored key `words` hash to, each slot's words (word `j` at `tables[j] + index`) are matched
/// or claimed in turn (one word: the whole key); a word holding another key moves on to the
/// next slot. Stores the slot found, or -1 when the table counts as full (recorded in
/// `status_words`), in `result`, then returns it from block `done`.
fn probe<'ctx>(
    p: &Emitter<'ctx, '_>,
    tables: &[PointerValue<'ctx>],
    capacity: IntValue<'ctx>,
    words: &[IntValue<'ctx>],
    status_words: PointerValue<'ctx>,
    result: PointerValue<'ctx>,
    done: BasicBlock<'ctx>,
) -> CodegenResult<()> {
    let zero = p.const_i64(0);
    let mask = p.b.build_int_sub(capacity, p.const_i64(1), "mask")?;
    let mut mixed = zero;
    for word in words {
        let folded = p.b.build_xor(mixed, *word, "")?;
        mixed =
            p.b.build_int_mul(folded, p.i64().const_int(0x9E37_79B9_7F4A_7C15, false), "")?;
    }
    let high = p.b.build_right_shift(mixed, p.const_i64(29), false, "")?;
    let start = p.b.build_and(high, mask, "")?;
    let entry = p.current_block()?;
    let header = p.ctx.append_basic_block(p.function, "probe");
    let next = p.ctx.append_basic_block(p.function, "next");
    let full = p.ctx.append_basic_block(p.function, "full");
    let found = p.ctx.append_basic_block(p.function, "found");
    p.b.build_unconditional_branch(header)?;

    p.b.position_at_end(header);
    let index = p.b.build_phi(p.i64(), "index")?;
    let tries = p.b.build_phi(p.i64(), "tries")?;
    index.add_incoming(&[(&start, entry)]);
    tries.add_incoming(&[(&zero, entry)]);
    let index_value = index.as_basic_value().into_int_value();
    for (j, (table, word)) in tables.iter().zip(words).enumerate() {
        let matched = p
            .ctx
            .append_basic_block(p.function, &format!("word{j}_matched"));
        let claim = p
            .ctx
            .append_basic_block(p.function, &format!("word{j}_claim"));
        let empty_or_taken = p
            .ctx
            .append_basic_block(p.function, &format!("word{j}_empty"));
        let slot = p.offset_ptr(p.i64().into(), *table, index_value)?;
        let current = p.b.build_load(p.i64(), slot, "current")?.into_int_value();
        let mine =
            p.b.build_int_compare(IntPredicate::EQ, current, *word, "")?;
        p.b.build_conditional_branch(mine, matched, empty_or_taken)?;
        p.b.position_at_end(empty_or_taken);
        let empty = p.b.build_int_compare(IntPredicate::EQ, current, zero, "")?;
        p.b.build_conditional_branch(empty, claim, next)?;
        p.b.position_at_end(claim);
        let pair = p.b.build_cmpxchg(
            slot,
            zero,
            *word,
            AtomicOrdering::Monotonic,
            AtomicOrdering::Monotonic,
        )?;
        let previous =
            p.b.build_extract_value(pair, 0, "previous")?
                .into_int_value();
        // Claimed here, or by another row of the same key first.
        let claimed =
            p.b.build_int_compare(IntPredicate::EQ, previous, zero, "")?;
        let same =
            p.b.build_int_compare(IntPredicate::EQ, previous, *word, "")?;
        let ours = p.b.build_or(claimed, same, "")?;
        p.b.build_conditional_branch(ours, matched, next)?;
        p.b.position_at_end(matched);
    }
    p.b.build_unconditional_branch(found)?;

    p.b.position_at_end(next);
    let advanced = p.b.build_and(
        p.b.build_int_add(index_value, p.const_i64(1), "")?,
        mask,
        "",
    )?;
    let counted =
        p.b.build_int_add(tries.as_basic_value().into_int_value(), p.const_i64(1), "")?;
    index.add_incoming(&[(&advanced, next)]);
    tries.add_incoming(&[(&counted, next)]);
    // A long probe sequence means the table is overloaded: report it full (the query then
    // runs again over a larger table) rather than let every later row scan it whole.
    let short =
        p.b.build_int_compare(IntPredicate::ULT, capacity, p.const_i64(MAX_PROBES), "")?;
    let limit =
        p.b.build_select(short, capacity, p.const_i64(MAX_PROBES), "limit")?;
    let exhausted =
        p.b.build_int_compare(IntPredicate::UGE, counted, limit.into_int_value(), "")?;
    p.b.build_conditional_branch(exhausted, full, header)?;

    p.b.position_at_end(full);
    report_unless(
        p,
        p.i1().const_zero(),
        status_words,
        status::GROUP_TABLE_FULL,
    )?;
    p.b.build_store(result, p.const_i64(-1))?;
    p.b.build_unconditional_branch(done)?;

    p.b.position_at_end(found);
    p.b.build_store(result, index_value)?;
    p.b.build_unconditional_branch(done)?;

    p.b.position_at_end(done);
    let value = p.b.build_load(p.i64(), result, "")?;
    p.b.build_return(Some(&value))?;
    Ok(())
}
