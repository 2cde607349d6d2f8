//! `build` and `lookup`: hash tables filled by one pipeline and probed by another. A table is an
//! array of fixed-size slots: a key word followed by the payload columns. Perfect tables index
//! directly by `key - min` and keep a presence word instead of the key; open tables use linear
//! probing over a power-of-two capacity. Keys are stored with their sign bit flipped, so that
//! zeroed memory is an empty table; the one key that would look empty (the type's minimum) lives
//! in an extra slot after the others.
//!
//! A perfect table with no payload is a set of keys: a bit per key (32 keys to a word), so that
//! probing it reads a table 32 times smaller, which stays in L1 where the slots would not.
//!
//! A table whose build side may hold a key more than once groups its rows by key: the slot keeps
//! the key, how many rows hold it and where they start in an array of rows, contiguous per key.
//! The build records each row (at its row number) with its slot, its rank among the slot's rows
//! and its payload; two small kernels (`primitives::chain`) then give each slot its start and
//! move every record's payload to its place. A probe finds each match's row as `start + i`, so
//! the matches of one key can be spread over a block's threads (`scan::tile_offsets`).

use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate};
use tessera_storage::DataType;

use crate::emit::{basic, CodegenError, CodegenResult, Emitter};

use super::load::{param_int, param_ptr};
use super::primitive;

/// Words of the per-query status buffer that kernels set when an assumption fails.
pub mod status {
    /// A build side had the same key twice.
    pub const DUPLICATE_KEY: u32 = 0;
    /// A build key fell outside the range a perfect table was compiled for.
    pub const KEY_OUT_OF_RANGE: u32 = 1;
    /// A group key fell outside the dense domain it was compiled for.
    pub const GROUP_OUT_OF_RANGE: u32 = 2;
    /// A grouping hash table ran out of slots.
    pub const GROUP_TABLE_FULL: u32 = 3;
    /// Rows to sort on the device numbered past 32 bits.
    pub const SORT_TOO_LARGE: u32 = 4;
    /// A selected row's integer arithmetic (or a cast) left its type.
    pub const ARITHMETIC_OVERFLOW: u32 = 5;
    /// Set by the host when the query is cancelled: a kernel's rounds over a tile's matches
    /// stop at the next round.
    pub const CANCELLED: u32 = 6;
    /// How many words the buffer has.
    pub const WORDS: u32 = 8;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HashKind {
    /// `slots` slots indexed by `key - min`.
    Perfect { min: i64, slots: u64 },
    /// Linear probing over `capacity` slots (a power of two), plus the extra slot.
    Open { capacity: u64 },
}

/// Where a payload column sits in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PayloadField {
    pub offset: u32,
    pub ty: DataType,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HashTableLayout {
    pub kind: HashKind,
    /// The key's type (open tables store it; perfect tables store a presence word).
    pub key: DataType,
    /// The slot's payload: the payload columns, or for a chained table the count and start of
    /// its rows.
    pub payload: Vec<PayloadField>,
    /// Bytes per slot.
    pub stride: u32,
    /// What inserting a key already present does.
    pub repeats: KeyRepeats,
    /// For a chained table, the layout of its rows.
    pub rows: Option<RowLayout>,
}

/// What inserting a key the table already holds does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyRepeats {
    /// It is refused and recorded in the status buffer (a join compiled for unique keys).
    Refused,
    /// It finds the slot already there (semi and anti joins, chained tables).
    Shared,
}

/// A chained table's rows: the payload columns of each, grouped by key. A build record holds
/// the row's slot (a `u32` index), its rank among the slot's rows plus one (0: not inserted),
/// then the same fields `RECORD_HEADER` bytes further on.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowLayout {
    pub payload: Vec<PayloadField>,
    /// Bytes per row (0 when the table brings no columns, only matches).
    pub stride: u32,
}

/// Bytes of a build record before its payload: the slot index and the rank.
pub const RECORD_HEADER: u32 = 8;

impl RowLayout {
    /// Bytes per build record: the header, then the row's payload.
    pub fn record_stride(&self) -> u32 {
        RECORD_HEADER + self.stride
    }
}

/// Where a chained table's slot keeps its row count and its rows' start (payload fields 0, 1).
pub const CHAIN_COUNT: usize = 0;
pub const CHAIN_START: usize = 1;

/// Places `payload` after `start` bytes: widest first, which keeps every field naturally
/// aligned without padding between fields. Returns the fields in `payload`'s order and the
/// bytes used, rounded up to the widest alignment (at least `align`).
fn place_fields(payload: &[DataType], start: u32, align: u32) -> (Vec<PayloadField>, u32) {
    let mut offset = start;
    let mut order: Vec<usize> = (0..payload.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(payload[i].width()));
    let mut placed = vec![None; payload.len()];
    for i in order {
        let width = payload[i].width() as u32;
        offset = offset.next_multiple_of(width);
        placed[i] = Some(PayloadField {
            offset,
            ty: payload[i],
        });
        offset += width;
    }
    let fields: Vec<PayloadField> = placed.into_iter().flatten().collect();
    let align = fields
        .iter()
        .map(|f| f.ty.width() as u32)
        .max()
        .unwrap_or(4)
        .max(align);
    (fields, offset.next_multiple_of(align))
}

impl HashTableLayout {
    pub fn new(kind: HashKind, key: DataType, payload: &[DataType]) -> HashTableLayout {
        let key_bytes = match kind {
            HashKind::Perfect { .. } => 4,
            HashKind::Open { .. } => key.width() as u32,
        };
        let (fields, mut stride) = place_fields(payload, key_bytes, key_bytes);
        // A perfect table's slot of at most 16 bytes is padded to a power of two, so a probe
        // reads the presence word and the payload with one vector load.
        if matches!(kind, HashKind::Perfect { .. }) && stride <= 16 {
            stride = stride.next_power_of_two();
        }
        HashTableLayout {
            kind,
            key,
            payload: fields,
            stride,
            repeats: KeyRepeats::Refused,
            rows: None,
        }
    }

    /// A table whose keys may repeat: each slot counts the rows holding its key and says
    /// where they start among the table's rows, which carry `payload`.
    pub fn chained(kind: HashKind, key: DataType, payload: &[DataType]) -> HashTableLayout {
        let (fields, stride) = if payload.is_empty() {
            (Vec::new(), 0)
        } else {
            // The record header is 8 bytes, so fields aligned here stay aligned after it.
            place_fields(payload, 0, 4)
        };
        HashTableLayout {
            repeats: KeyRepeats::Shared,
            rows: Some(RowLayout {
                payload: fields,
                stride,
            }),
            ..HashTableLayout::new(kind, key, &[DataType::I32, DataType::I32])
        }
    }

    /// The same table, finding rather than refusing a key inserted twice.
    pub fn sharing_keys(self) -> HashTableLayout {
        HashTableLayout {
            repeats: KeyRepeats::Shared,
            ..self
        }
    }

    /// Whether a slot is read whole with one vector load of 32-bit words.
    pub fn loads_whole_slot(&self) -> bool {
        matches!(self.kind, HashKind::Perfect { .. }) && matches!(self.stride, 8 | 16)
    }

    /// Whether the table is a set of keys, a bit per key: a perfect table with no payload.
    pub fn is_key_set(&self) -> bool {
        matches!(self.kind, HashKind::Perfect { .. })
            && self.payload.is_empty()
            && self.rows.is_none()
    }

    pub fn slots(&self) -> u64 {
        match self.kind {
            HashKind::Perfect { slots, .. } => slots,
            HashKind::Open { capacity } => capacity + 1,
        }
    }

    pub fn bytes(&self) -> u64 {
        if self.is_key_set() {
            return self.slots().div_ceil(32) * 4;
        }
        self.slots() * u64::from(self.stride)
    }

    fn key_bits(&self) -> u32 {
        match self.kind {
            HashKind::Perfect { .. } => 32,
            HashKind::Open { .. } => self.key.width() as u32 * 8,
        }
    }
}

/// Inserts `key`; returns the slot to write the payload into, or null when the key cannot be
/// inserted (a duplicate, or outside a perfect table's range), which is recorded in `status`.
pub fn insert<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    key: IntValue<'ctx>,
    status: PointerValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let key_ty = em.int_type(key.get_type().get_bit_width());
    let ty = em.global_ptr().fn_type(
        &[
            em.global_ptr().into(),
            em.i64().into(),
            em.i64().into(),
            key_ty.into(),
            em.global_ptr().into(),
        ],
        false,
    );
    let name = primitive_name(layout, "insert", key_ty.get_bit_width());
    let owned = layout.clone();
    let f = primitive(em, &name, ty, |p| {
        let table = param_ptr(p, 0)?;
        let param = param_int(p, 1)?;
        let slots = param_int(p, 2)?;
        let key = param_int(p, 3)?;
        let status = param_ptr(p, 4)?;
        let result: BasicValueEnum = match owned.kind {
            HashKind::Perfect { .. } if owned.is_key_set() => {
                insert_key(p, &owned, table, param, slots, key, status)?.into()
            }
            HashKind::Perfect { .. } => {
                let slot = perfect_slot(p, &owned, table, param, slots, key, Some(status))?;
                let found = p.b.build_is_not_null(slot, "")?;
                claim(p, &owned, found, status, || {
                    let previous = swap_word(p, slot, p.const_i32(0), p.const_i32(1))?;
                    let fresh =
                        p.b.build_int_compare(IntPredicate::EQ, previous, p.const_i32(0), "")?;
                    Ok((slot, fresh))
                })?
                .into()
            }
            HashKind::Open { .. } => {
                open_insert(p, &owned, table, param, slots, key, status)?.into()
            }
        };
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    let (param, slots) = run_time_shape(em, layout);
    let call = em.b.build_call(
        f,
        &[
            table.into(),
            param.into(),
            slots.into(),
            key.into(),
            status.into(),
        ],
        "slot",
    )?;
    Ok(basic(call.try_as_basic_value().basic())?.into_pointer_value())
}

/// Finds `key`; returns its slot, or null when the table does not hold it.
pub fn find<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    key: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let key_ty = em.int_type(key.get_type().get_bit_width());
    let ty = lookup_fn_type(em, em.global_ptr().into(), key_ty);
    let name = primitive_name(layout, "find", key_ty.get_bit_width());
    let owned = layout.clone();
    let f = primitive(em, &name, ty, |p| {
        let table = param_ptr(p, 0)?;
        let param = param_int(p, 1)?;
        let slots = param_int(p, 2)?;
        let key = param_int(p, 3)?;
        let result: BasicValueEnum = match owned.kind {
            HashKind::Perfect { .. } if owned.is_key_set() => {
                let (word, bit, inside) = key_bit(p, &owned, table, param, slots, key)?;
                let present = bit_is_set(p, word, bit)?;
                let present = p.b.build_and(inside, present, "")?;
                p.b.build_select(present, word, p.global_ptr().const_null(), "")?
            }
            HashKind::Perfect { .. } => {
                let slot = perfect_slot(p, &owned, table, param, slots, key, None)?;
                let done = p.ctx.append_basic_block(p.function, "done");
                let check = p.ctx.append_basic_block(p.function, "check");
                let in_range = p.b.build_is_not_null(slot, "")?;
                let here = p.current_block()?;
                p.b.build_conditional_branch(in_range, check, done)?;
                p.b.position_at_end(check);
                let present = p.b.build_load(p.i32(), slot, "present")?.into_int_value();
                let present = p.truth(present)?;
                let hit =
                    p.b.build_select(present, slot, p.global_ptr().const_null(), "")?;
                let check_end = p.current_block()?;
                p.b.build_unconditional_branch(done)?;
                p.b.position_at_end(done);
                let phi = p.b.build_phi(p.global_ptr(), "slot")?;
                phi.add_incoming(&[(&p.global_ptr().const_null(), here), (&hit, check_end)]);
                phi.as_basic_value()
            }
            HashKind::Open { .. } => open_find(p, &owned, table, param, slots, key)?.into(),
        };
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    Ok(call_lookup(em, f, layout, table, key, "slot")?.into_pointer_value())
}

/// Whether a set of keys ([`HashTableLayout::is_key_set`]) holds `key`, without branching: a
/// key outside the table's range reads the first word and is not held.
pub fn set_contains<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    key: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    if !layout.is_key_set() {
        return Err(CodegenError::Invalid(
            "the table is not a set of keys".into(),
        ));
    }
    let key_ty = key.get_type();
    let ty = lookup_fn_type(em, em.i1().into(), key_ty);
    let name = primitive_name(layout, "contains", key_ty.get_bit_width());
    let f = primitive(em, &name, ty, |p| {
        let (word, bit, inside) = key_bit(
            p,
            layout,
            param_ptr(p, 0)?,
            param_int(p, 1)?,
            param_int(p, 2)?,
            param_int(p, 3)?,
        )?;
        let present = bit_is_set(p, word, bit)?;
        p.b.build_return(Some(&p.b.build_and(inside, present, "contains")?))?;
        Ok(())
    })?;
    Ok(call_lookup(em, f, layout, table, key, "contains")?.into_int_value())
}

/// The signature of a primitive that looks a key up: the table, its run-time shape
/// ([`run_time_shape`]) and the key, returning `result`.
fn lookup_fn_type<'ctx>(
    em: &Emitter<'ctx, '_>,
    result: BasicTypeEnum<'ctx>,
    key_ty: inkwell::types::IntType<'ctx>,
) -> inkwell::types::FunctionType<'ctx> {
    result.fn_type(
        &[
            em.global_ptr().into(),
            em.i64().into(),
            em.i64().into(),
            key_ty.into(),
        ],
        false,
    )
}

/// Calls a primitive of [`lookup_fn_type`] on `table` and `key`.
fn call_lookup<'ctx>(
    em: &Emitter<'ctx, '_>,
    f: inkwell::values::FunctionValue<'ctx>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    key: IntValue<'ctx>,
    name: &str,
) -> CodegenResult<BasicValueEnum<'ctx>> {
    let (shape, slots) = run_time_shape(em, layout);
    let call = em.b.build_call(
        f,
        &[table.into(), shape.into(), slots.into(), key.into()],
        name,
    )?;
    basic(call.try_as_basic_value().basic())
}

/// Adds `key` to a set of keys; returns its word when the key was inserted, null when it was
/// outside the range or (for a table refusing repeats) already there, which `status` records.
fn insert_key<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    min: IntValue<'ctx>,
    slots: IntValue<'ctx>,
    key: IntValue<'ctx>,
    status: PointerValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let (word, bit, inside) = key_bit(p, layout, table, min, slots, key)?;
    report_unless(p, inside, status, status::KEY_OUT_OF_RANGE)?;
    claim(p, layout, inside, status, || {
        let mask = p.b.build_left_shift(p.const_i32(1), bit, "")?;
        let before = p.b.build_atomicrmw(
            inkwell::AtomicRMWBinOp::Or,
            word,
            mask,
            AtomicOrdering::Monotonic,
        )?;
        let had = p.b.build_and(before, mask, "")?;
        let fresh =
            p.b.build_int_compare(IntPredicate::EQ, had, p.const_i32(0), "")?;
        Ok((word, fresh))
    })
}

/// Where a perfect table's insert (slots or a set of keys) takes its key, when `possible`: `take`
/// claims it and says whether it was free. Returns the claimed place, or null when the key was
/// not taken or, for a table refusing repeats, already there (recorded in `status`).
fn claim<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    possible: IntValue<'ctx>,
    status: PointerValue<'ctx>,
    take: impl FnOnce() -> CodegenResult<(PointerValue<'ctx>, IntValue<'ctx>)>,
) -> CodegenResult<PointerValue<'ctx>> {
    let done = p.ctx.append_basic_block(p.function, "done");
    let claim = p.ctx.append_basic_block(p.function, "claim");
    let here = p.current_block()?;
    p.b.build_conditional_branch(possible, claim, done)?;
    p.b.position_at_end(claim);
    let (place, fresh) = take()?;
    let claimed = match layout.repeats {
        KeyRepeats::Shared => place.as_basic_value_enum(),
        KeyRepeats::Refused => {
            let claimed =
                p.b.build_select(fresh, place, p.global_ptr().const_null(), "")?;
            report_unless(p, fresh, status, status::DUPLICATE_KEY)?;
            claimed
        }
    };
    let claim_end = p.current_block()?;
    p.b.build_unconditional_branch(done)?;
    p.b.position_at_end(done);
    let phi = p.b.build_phi(p.global_ptr(), "slot")?;
    phi.add_incoming(&[(&p.global_ptr().const_null(), here), (&claimed, claim_end)]);
    Ok(phi.as_basic_value().into_pointer_value())
}

/// The word of a set of keys holding `key`'s bit, the bit's place in it, and whether the key is
/// inside the table's range (a key outside it points at the first word).
fn key_bit<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    min: IntValue<'ctx>,
    slots: IntValue<'ctx>,
    key: IntValue<'ctx>,
) -> CodegenResult<(PointerValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>)> {
    let (index, inside) = perfect_index(p, layout, min, slots, key)?;
    let word = p.b.build_right_shift(index, p.const_i64(5), false, "")?;
    let word = p.offset_ptr(p.i32().into(), table, word)?;
    let bit = p.b.build_int_truncate(index, p.i32(), "")?;
    let bit = p.b.build_and(bit, p.const_i32(31), "bit")?;
    Ok((word, bit, inside))
}

/// `key`'s index in a perfect table of `slots` keys from `min`, or 0 when the key is outside the
/// table's range, and whether it is inside (an `i64` and an `i1`).
fn perfect_index<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    min: IntValue<'ctx>,
    slots: IntValue<'ctx>,
    key: IntValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    // Unsigned comparisons: a key below `min` wraps to a huge index.
    if narrow_index(layout, key.get_type().get_bit_width()) {
        // 32-bit arithmetic is exact here, and the GPU does it in one instruction where 64-bit
        // takes two; the index widens for free in the address arithmetic.
        let key = p.b.build_int_s_extend_or_bit_cast(key, p.i32(), "")?;
        let min = p.b.build_int_truncate(min, p.i32(), "")?;
        let slots = p.b.build_int_truncate(slots, p.i32(), "")?;
        let index = p.b.build_int_sub(key, min, "index")?;
        let inside =
            p.b.build_int_compare(IntPredicate::ULT, index, slots, "inside")?;
        let index =
            p.b.build_select(inside, index, p.const_i32(0), "")?
                .into_int_value();
        let index = p.b.build_int_z_extend(index, p.i64(), "")?;
        return Ok((index, inside));
    }
    let wide = p.b.build_int_s_extend_or_bit_cast(key, p.i64(), "")?;
    let index = p.b.build_int_sub(wide, min, "index")?;
    let inside =
        p.b.build_int_compare(IntPredicate::ULT, index, slots, "inside")?;
    let index =
        p.b.build_select(inside, index, p.const_i64(0), "")?
            .into_int_value();
    Ok((index, inside))
}

/// Whether a perfect table's index of a `key_bits`-bit key is computed in 32 bits: exact when
/// the key fits and so do the table's first and last keys (then `key - min` wraps below `min`
/// to at least `2^32 - (max - min)`, never into the range).
fn narrow_index(layout: &HashTableLayout, key_bits: u32) -> bool {
    match layout.kind {
        HashKind::Perfect { min, slots } => {
            let max = min.saturating_add(slots as i64 - 1);
            key_bits <= 32 && min >= i64::from(i32::MIN) && max <= i64::from(i32::MAX)
        }
        HashKind::Open { .. } => false,
    }
}

/// Whether bit `bit` of the word at `word` is set.
fn bit_is_set<'ctx>(
    p: &Emitter<'ctx, '_>,
    word: PointerValue<'ctx>,
    bit: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let bits = p.b.build_load(p.i32(), word, "key_bits")?.into_int_value();
    let bits = p.b.build_right_shift(bits, bit, false, "")?;
    let bits = p.b.build_and(bits, p.const_i32(1), "")?;
    p.truth(bits)
}

/// Looks `key` up in a perfect table without branching: returns a slot that is always inside
/// the table (slot 0 when the key is out of range) and whether the key was in range. The caller
/// reads the presence word and the payload from the slot unconditionally, so a thread's probes
/// of all its items are in flight at once; rejected items' probes all read slot 0, which stays
/// in cache.
pub fn probe_perfect<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    key: IntValue<'ctx>,
) -> CodegenResult<(PointerValue<'ctx>, IntValue<'ctx>)> {
    if !matches!(layout.kind, HashKind::Perfect { .. }) {
        return Err(CodegenError::Invalid(
            "probe_perfect needs a perfect table".into(),
        ));
    }
    let key_ty = key.get_type();
    let result_ty = em
        .ctx
        .struct_type(&[em.global_ptr().into(), em.i1().into()], false);
    let ty = lookup_fn_type(em, result_ty.into(), key_ty);
    let name = primitive_name(layout, "probe", key_ty.get_bit_width());
    let stride = layout.stride;
    let f = primitive(em, &name, ty, |p| {
        let table = param_ptr(p, 0)?;
        let min = param_int(p, 1)?;
        let slots = param_int(p, 2)?;
        let key = param_int(p, 3)?;
        let (safe, inside) = perfect_index(p, layout, min, slots, key)?;
        let offset =
            p.b.build_int_mul(safe, p.const_i64(i64::from(stride)), "")?;
        let slot = p.offset_ptr(p.i8().into(), table, offset)?;
        let result = result_ty.get_undef();
        let result = p.b.build_insert_value(result, slot, 0, "")?;
        let result = p.b.build_insert_value(result, inside, 1, "")?;
        p.b.build_return(Some(&result))?;
        Ok(())
    })?;
    let pair = call_lookup(em, f, layout, table, key, "probe")?.into_struct_value();
    let slot =
        em.b.build_extract_value(pair, 0, "slot")?
            .into_pointer_value();
    let inside =
        em.b.build_extract_value(pair, 1, "inside")?
            .into_int_value();
    Ok((slot, inside))
}

/// Reads a perfect table's slot: whether it is occupied, and each payload field. A slot of 8 or
/// 16 bytes is read with one vector load, so an empty slot costs one memory request like a
/// full one.
pub fn read_slot<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    slot: PointerValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, Vec<BasicValueEnum<'ctx>>)> {
    if !layout.loads_whole_slot() {
        let present = em.b.build_load(em.i32(), slot, "present")?.into_int_value();
        let mut fields = Vec::with_capacity(layout.payload.len());
        for index in 0..layout.payload.len() {
            let (field, ty) = payload_ptr(em, layout, slot, index)?;
            fields.push(em.b.build_load(ty, field, "")?);
        }
        return Ok((em.truth(present)?, fields));
    }
    let whole = load_slot_words(em, layout, slot)?;
    slot_fields(em, layout, whole)
}

/// The type a perfect table's slot is read as in one load: a vector of its two or four 32-bit
/// words ([`HashTableLayout::loads_whole_slot`]).
pub fn slot_words_type<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
) -> Option<inkwell::types::VectorType<'ctx>> {
    (matches!(layout.kind, HashKind::Perfect { .. }) && layout.loads_whole_slot())
        .then(|| em.i32().vec_type(layout.stride / 4))
}

/// Loads a perfect table's whole slot as [`slot_words_type`].
pub fn load_slot_words<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    slot: PointerValue<'ctx>,
) -> CodegenResult<inkwell::values::VectorValue<'ctx>> {
    let vector = slot_words_type(em, layout)
        .ok_or_else(|| CodegenError::Invalid("the slot is not read in one load".into()))?;
    let whole = em.b.build_load(vector, slot, "slot_words")?;
    if let Some(load) = whole.as_instruction_value() {
        load.set_alignment(layout.stride)
            .map_err(|e| CodegenError::Invalid(format!("slot alignment: {e}")))?;
    }
    Ok(whole.into_vector_value())
}

/// Whether a slot read by [`load_slot_words`] is occupied, and its payload fields.
pub fn slot_fields<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    whole: inkwell::values::VectorValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, Vec<BasicValueEnum<'ctx>>)> {
    let word = |i: u32| {
        em.b.build_extract_element(whole, em.const_i32(i64::from(i)), "")
    };
    let present = word(0)?.into_int_value();
    let mut fields = Vec::with_capacity(layout.payload.len());
    for field in &layout.payload {
        let first = field.offset / 4;
        let ty = em.value_type(field.ty);
        let value: BasicValueEnum = if field.ty.width() == 8 {
            let low =
                em.b.build_int_z_extend(word(first)?.into_int_value(), em.i64(), "")?;
            let high =
                em.b.build_int_z_extend(word(first + 1)?.into_int_value(), em.i64(), "")?;
            let high = em.b.build_left_shift(high, em.const_i64(32), "")?;
            let bits = em.b.build_or(high, low, "")?;
            em.b.build_bit_cast(bits, ty, "")?
        } else if field.ty.width() < 4 {
            // A byte (a validity flag) inside its word: both targets are little-endian.
            let shift = i64::from(field.offset % 4 * 8);
            let shifted = em.b.build_right_shift(
                word(first)?.into_int_value(),
                em.const_i32(shift),
                false,
                "",
            )?;
            em.b.build_int_truncate(shifted, ty.into_int_type(), "")?
                .into()
        } else {
            em.b.build_bit_cast(word(first)?, ty, "")?
        };
        fields.push(value);
    }
    Ok((em.truth(present)?, fields))
}

/// A pointer to the payload field `index` of `slot`.
pub fn payload_ptr<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    slot: PointerValue<'ctx>,
    index: usize,
) -> CodegenResult<(PointerValue<'ctx>, BasicTypeEnum<'ctx>)> {
    let field = layout
        .payload
        .get(index)
        .ok_or_else(|| CodegenError::Invalid(format!("no payload field {index}")))?;
    let ptr = em.offset_ptr(em.i8().into(), slot, em.const_i64(i64::from(field.offset)))?;
    Ok((ptr, em.value_type(field.ty)))
}

fn primitive_name(layout: &HashTableLayout, op: &str, key_bits: u32) -> String {
    let kind = match layout.kind {
        HashKind::Perfect { .. } if layout.is_key_set() => "key_set",
        HashKind::Perfect { .. } => "perfect",
        HashKind::Open { .. } => "open",
    };
    let repeats = match layout.repeats {
        KeyRepeats::Refused => "",
        KeyRepeats::Shared => ".shared",
    };
    // Tables of one kind share a primitive, taking their shape at run time, unless their
    // index arithmetic differs.
    let index = if narrow_index(layout, key_bits) {
        ".i32"
    } else {
        ""
    };
    format!(
        "tessera.ht_{op}.{kind}.k{key_bits}.s{}{repeats}{index}",
        layout.stride
    )
}

/// Records build row `row` (an `i64` row number) of `slot` in a chained table: the slot counts
/// it, and its record (in `records`, at its row number) keeps the slot and the row's rank among
/// the slot's rows. Returns where the record's payload goes (`record_field_ptr`).
pub fn chain_record<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    slot: PointerValue<'ctx>,
    records: PointerValue<'ctx>,
    row: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let row_layout = chain_rows(layout)?;
    let (count, _) = payload_ptr(em, layout, slot, CHAIN_COUNT)?;
    let rank = em.b.build_atomicrmw(
        inkwell::AtomicRMWBinOp::Add,
        count,
        em.const_i32(1),
        AtomicOrdering::Monotonic,
    )?;
    let stride = i64::from(row_layout.record_stride());
    let offset = em.b.build_int_mul(row, em.const_i64(stride), "")?;
    let record = em.offset_ptr(em.i8().into(), records, offset)?;
    let index = slot_index(em, layout, table, slot)?;
    em.b.build_store(record, index)?;
    let rank_ptr = em.offset_ptr(em.i8().into(), record, em.const_i64(4))?;
    em.b.build_store(rank_ptr, em.b.build_int_add(rank, em.const_i32(1), "")?)?;
    em.offset_ptr(
        em.i8().into(),
        record,
        em.const_i64(i64::from(RECORD_HEADER)),
    )
}

/// The index of `slot` in `table`, as a `u32`.
fn slot_index<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    slot: PointerValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let at = em.b.build_ptr_to_int(slot, em.i64(), "")?;
    let base = em.b.build_ptr_to_int(table, em.i64(), "")?;
    let bytes = em.b.build_int_sub(at, base, "")?;
    let index =
        em.b.build_int_unsigned_div(bytes, em.const_i64(i64::from(layout.stride)), "slot_index")?;
    Ok(em.b.build_int_truncate(index, em.i32(), "")?)
}

/// How many rows `slot` of a chained table has, and where the first of them is (`i32`s).
pub fn chain_range<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    slot: PointerValue<'ctx>,
) -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
    let (count, _) = payload_ptr(em, layout, slot, CHAIN_COUNT)?;
    let (start, _) = payload_ptr(em, layout, slot, CHAIN_START)?;
    let count =
        em.b.build_load(em.i32(), count, "matches")?
            .into_int_value();
    let start =
        em.b.build_load(em.i32(), start, "first_row")?
            .into_int_value();
    Ok((count, start))
}

/// A pointer to payload field `index` of row `row` (an `i64`) of a chained table's rows.
pub fn row_field_ptr<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    rows: PointerValue<'ctx>,
    row: IntValue<'ctx>,
    index: usize,
) -> CodegenResult<(PointerValue<'ctx>, BasicTypeEnum<'ctx>)> {
    let row_layout = chain_rows(layout)?;
    let field = row_layout
        .payload
        .get(index)
        .ok_or_else(|| CodegenError::Invalid(format!("no row field {index}")))?;
    let offset =
        em.b.build_int_mul(row, em.const_i64(i64::from(row_layout.stride)), "")?;
    let offset =
        em.b.build_int_add(offset, em.const_i64(i64::from(field.offset)), "")?;
    let ptr = em.offset_ptr(em.i8().into(), rows, offset)?;
    Ok((ptr, em.value_type(field.ty)))
}

/// A pointer to payload field `index` of a build record whose payload starts at `place`.
pub fn record_field_ptr<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    place: PointerValue<'ctx>,
    index: usize,
) -> CodegenResult<(PointerValue<'ctx>, BasicTypeEnum<'ctx>)> {
    let field = chain_rows(layout)?
        .payload
        .get(index)
        .ok_or_else(|| CodegenError::Invalid(format!("no row field {index}")))?;
    let ptr = em.offset_ptr(em.i8().into(), place, em.const_i64(i64::from(field.offset)))?;
    Ok((ptr, em.value_type(field.ty)))
}

/// The layout of a chained table's rows.
pub fn chain_rows(layout: &HashTableLayout) -> CodegenResult<&RowLayout> {
    layout
        .rows
        .as_ref()
        .ok_or_else(|| CodegenError::Invalid("the table is not chained".into()))
}

/// A table's shape as the primitives take it, so that one primitive serves every table of a
/// layout kind: the minimum key and slot count (perfect), or the slot mask and capacity (open).
fn run_time_shape<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
) -> (IntValue<'ctx>, IntValue<'ctx>) {
    match layout.kind {
        HashKind::Perfect { min, slots } => (em.const_i64(min), em.const_i64(slots as i64)),
        HashKind::Open { capacity } => (
            em.const_i64(capacity as i64 - 1),
            em.const_i64(capacity as i64),
        ),
    }
}

/// The slot where a probe of `key` starts (an `i64` below the table's slot count): `key - min`
/// in a perfect table (0 for a key outside its range), the key's hash in an open one.
pub fn home_slot<'ctx>(
    em: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    key: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let (param, slots) = run_time_shape(em, layout);
    match layout.kind {
        HashKind::Perfect { .. } => Ok(perfect_index(em, layout, param, slots, key)?.0),
        HashKind::Open { .. } => hash(em, key, param),
    }
}

/// The slot of `key` in a perfect table, or null (recorded in `status` when given) when the key
/// is outside the table's range.
fn perfect_slot<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    min: IntValue<'ctx>,
    slots: IntValue<'ctx>,
    key: IntValue<'ctx>,
    status: Option<PointerValue<'ctx>>,
) -> CodegenResult<PointerValue<'ctx>> {
    let (safe, inside) = perfect_index(p, layout, min, slots, key)?;
    if let Some(status) = status {
        report_unless(p, inside, status, status::KEY_OUT_OF_RANGE)?;
    }
    let offset =
        p.b.build_int_mul(safe, p.const_i64(i64::from(layout.stride)), "")?;
    let slot = p.offset_ptr(p.i8().into(), table, offset)?;
    Ok(p.b
        .build_select(inside, slot, p.global_ptr().const_null(), "")?
        .into_pointer_value())
}

fn open_insert<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    mask: IntValue<'ctx>,
    capacity: IntValue<'ctx>,
    key: IntValue<'ctx>,
    status: PointerValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let bits = layout.key_bits();
    let key_ty = p.int_type(bits);
    let stored = stored_key(p, key)?;
    let zero = key_ty.const_zero();
    let result = p.alloca(p.global_ptr().into(), "result")?;

    let special =
        p.b.build_int_compare(IntPredicate::EQ, stored, zero, "min_key")?;
    let extra = p.ctx.append_basic_block(p.function, "extra_slot");
    let probe = p.ctx.append_basic_block(p.function, "probe");
    let done = p.ctx.append_basic_block(p.function, "done");
    p.b.build_conditional_branch(special, extra, probe)?;

    // The key whose stored form is zero: claim the extra slot by writing a one.
    p.b.position_at_end(extra);
    let slot = slot_at(p, layout, table, capacity)?;
    let previous = swap_word(p, slot, zero, key_ty.const_int(1, false))?;
    let fresh =
        p.b.build_int_compare(IntPredicate::EQ, previous, zero, "")?;
    let claimed = match layout.repeats {
        KeyRepeats::Shared => slot.as_basic_value_enum(),
        KeyRepeats::Refused => {
            report_unless(p, fresh, status, status::DUPLICATE_KEY)?;
            p.b.build_select(fresh, slot, p.global_ptr().const_null(), "")?
        }
    };
    p.b.build_store(result, claimed)?;
    p.b.build_unconditional_branch(done)?;

    p.b.position_at_end(probe);
    let start = hash(p, key, mask)?;
    let header = p.ctx.append_basic_block(p.function, "probe_slot");
    let next = p.ctx.append_basic_block(p.function, "next_slot");
    let entry = p.current_block()?;
    p.b.build_unconditional_branch(header)?;
    p.b.position_at_end(header);
    let index = p.b.build_phi(p.i64(), "index")?;
    index.add_incoming(&[(&start, entry)]);
    let index_value = index.as_basic_value().into_int_value();
    let slot = slot_at(p, layout, table, index_value)?;
    let previous = swap_word(p, slot, zero, stored)?;
    let claimed =
        p.b.build_int_compare(IntPredicate::EQ, previous, zero, "claimed")?;
    let duplicate =
        p.b.build_int_compare(IntPredicate::EQ, previous, stored, "duplicate")?;
    let finished = p.b.build_or(claimed, duplicate, "")?;
    let finish = p.ctx.append_basic_block(p.function, "finish");
    p.b.build_conditional_branch(finished, finish, next)?;

    p.b.position_at_end(finish);
    let chosen = match layout.repeats {
        KeyRepeats::Shared => slot.as_basic_value_enum(),
        KeyRepeats::Refused => {
            report_unless(p, claimed, status, status::DUPLICATE_KEY)?;
            p.b.build_select(claimed, slot, p.global_ptr().const_null(), "")?
        }
    };
    p.b.build_store(result, chosen)?;
    p.b.build_unconditional_branch(done)?;

    p.b.position_at_end(next);
    let advanced = p.b.build_int_add(index_value, p.const_i64(1), "")?;
    let wrapped = p.b.build_and(advanced, mask, "")?;
    index.add_incoming(&[(&wrapped, next)]);
    p.b.build_unconditional_branch(header)?;

    p.b.position_at_end(done);
    Ok(p.b
        .build_load(p.global_ptr(), result, "")?
        .into_pointer_value())
}

fn open_find<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    mask: IntValue<'ctx>,
    capacity: IntValue<'ctx>,
    key: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let bits = layout.key_bits();
    let key_ty = p.int_type(bits);
    let stored = stored_key(p, key)?;
    let zero = key_ty.const_zero();
    let result = p.alloca(p.global_ptr().into(), "result")?;

    let special =
        p.b.build_int_compare(IntPredicate::EQ, stored, zero, "min_key")?;
    let extra = p.ctx.append_basic_block(p.function, "extra_slot");
    let probe = p.ctx.append_basic_block(p.function, "probe");
    let done = p.ctx.append_basic_block(p.function, "done");
    p.b.build_conditional_branch(special, extra, probe)?;

    p.b.position_at_end(extra);
    let slot = slot_at(p, layout, table, capacity)?;
    let word = p.b.build_load(key_ty, slot, "")?.into_int_value();
    let present = p.b.build_int_compare(IntPredicate::NE, word, zero, "")?;
    let hit =
        p.b.build_select(present, slot, p.global_ptr().const_null(), "")?;
    p.b.build_store(result, hit)?;
    p.b.build_unconditional_branch(done)?;

    p.b.position_at_end(probe);
    let start = hash(p, key, mask)?;
    let header = p.ctx.append_basic_block(p.function, "probe_slot");
    let next = p.ctx.append_basic_block(p.function, "next_slot");
    let entry = p.current_block()?;
    p.b.build_unconditional_branch(header)?;
    p.b.position_at_end(header);
    let index = p.b.build_phi(p.i64(), "index")?;
    index.add_incoming(&[(&start, entry)]);
    let index_value = index.as_basic_value().into_int_value();
    let slot = slot_at(p, layout, table, index_value)?;
    let word = p.b.build_load(key_ty, slot, "")?.into_int_value();
    let hit =
        p.b.build_int_compare(IntPredicate::EQ, word, stored, "hit")?;
    let empty =
        p.b.build_int_compare(IntPredicate::EQ, word, zero, "empty")?;
    let finished = p.b.build_or(hit, empty, "")?;
    let finish = p.ctx.append_basic_block(p.function, "finish");
    p.b.build_conditional_branch(finished, finish, next)?;

    p.b.position_at_end(finish);
    let chosen =
        p.b.build_select(hit, slot, p.global_ptr().const_null(), "")?;
    p.b.build_store(result, chosen)?;
    p.b.build_unconditional_branch(done)?;

    p.b.position_at_end(next);
    let advanced = p.b.build_int_add(index_value, p.const_i64(1), "")?;
    let wrapped = p.b.build_and(advanced, mask, "")?;
    index.add_incoming(&[(&wrapped, next)]);
    p.b.build_unconditional_branch(header)?;

    p.b.position_at_end(done);
    Ok(p.b
        .build_load(p.global_ptr(), result, "")?
        .into_pointer_value())
}

/// The key as stored: sign bit flipped, so that zero means an empty slot.
fn stored_key<'ctx>(p: &Emitter<'ctx, '_>, key: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
    let ty = key.get_type();
    let sign = ty.const_int(1, false);
    let sign = p.b.build_left_shift(
        sign,
        ty.const_int(u64::from(ty.get_bit_width() - 1), false),
        "",
    )?;
    Ok(p.b.build_xor(key, sign, "stored")?)
}

/// Fibonacci hashing: the high half of `key × 2^64/φ`, masked to the table.
fn hash<'ctx>(
    p: &Emitter<'ctx, '_>,
    key: IntValue<'ctx>,
    mask: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let wide = p.b.build_int_s_extend_or_bit_cast(key, p.i64(), "")?;
    let mixed =
        p.b.build_int_mul(wide, p.i64().const_int(0x9E37_79B9_7F4A_7C15, false), "")?;
    let high = p.b.build_right_shift(mixed, p.const_i64(32), false, "")?;
    Ok(p.b.build_and(high, mask, "hash")?)
}

/// Slot `index` (an `i64`) of `table`.
pub(super) fn slot_at<'ctx>(
    p: &Emitter<'ctx, '_>,
    layout: &HashTableLayout,
    table: PointerValue<'ctx>,
    index: IntValue<'ctx>,
) -> CodegenResult<PointerValue<'ctx>> {
    let offset =
        p.b.build_int_mul(index, p.const_i64(i64::from(layout.stride)), "")?;
    p.offset_ptr(p.i8().into(), table, offset)
}

/// Atomically replaces `expected` by `new` at `ptr`; returns the value found there.
fn swap_word<'ctx>(
    p: &Emitter<'ctx, '_>,
    ptr: PointerValue<'ctx>,
    expected: IntValue<'ctx>,
    new: IntValue<'ctx>,
) -> CodegenResult<IntValue<'ctx>> {
    let pair = p.b.build_cmpxchg(
        ptr,
        expected,
        new,
        AtomicOrdering::Monotonic,
        AtomicOrdering::Monotonic,
    )?;
    Ok(p.b
        .build_extract_value(pair, 0, "previous")?
        .into_int_value())
}

/// Sets status word `word` unless `ok` holds.
pub fn report_unless<'ctx>(
    p: &Emitter<'ctx, '_>,
    ok: IntValue<'ctx>,
    status: PointerValue<'ctx>,
    word: u32,
) -> CodegenResult<()> {
    let failed = p.b.build_not(ok, "")?;
    p.if_then(failed, || {
        let ptr = p.offset_ptr(p.i32().into(), status, p.const_i64(i64::from(word)))?;
        p.b.build_store(ptr, p.const_i32(1))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_fields_are_aligned_and_packed() {
        let layout = HashTableLayout::new(
            HashKind::Open { capacity: 16 },
            DataType::I32,
            &[DataType::I32, DataType::F64, DataType::Str],
        );
        // key (4), then the f64 at 8, then the two 4-byte fields.
        assert_eq!(layout.payload[1].offset, 8);
        assert_eq!(layout.payload[0].offset, 16);
        assert_eq!(layout.payload[2].offset, 20);
        assert_eq!(layout.stride, 24);
        assert_eq!(layout.slots(), 17);
        let perfect = HashTableLayout::new(
            HashKind::Perfect { min: 1, slots: 100 },
            DataType::I32,
            &[DataType::I32],
        );
        assert_eq!(perfect.stride, 8);
    }
}
