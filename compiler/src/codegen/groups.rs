//! A pipeline over a grouping's slots (`Input::Groups`): `where` after `group` run on the
//! device. Each slot is a row, selected where it holds a group. A column is one of the group's
//! keys, decoded from the slot (a dense array's index digits, or the packed key word of a hash
//! table), or one of its aggregates, read from the accumulators as the host reads them back
//! (`tessera_runtime::result`): an average is its sum over its count, and an aggregate no row
//! reached is null. A one-row aggregate is a grouping of one slot that always holds its row.
//! The sink (`keep_groups_tile`) empties the slots of the groups no longer selected, so that
//! the result is read back with only the groups kept.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate;
use tessera_runtime::emit::{Item, TileArray};
use tessera_runtime::program::{
    wide_key, AggregateKind, AggregateSlot, DenseKey, HashKey, Param, ResultShape,
};
use tessera_runtime::{CodegenError, CodegenResult};
use tessera_storage::DataType;

use crate::columns::ColumnId;

use super::context::not_grouped;
use super::kernel::{ColumnTile, Kernel};

/// The buffer saying which slots of grouping `groups` hold a group, and its element bytes: a
/// hash table's key words (zero where empty), a dense array's presence bytes; `None` for a
/// one-row aggregate's one slot, which always holds its row.
pub(super) fn group_flags(groups: &ResultShape) -> CodegenResult<Option<(usize, u32)>> {
    match groups {
        ResultShape::Hash { key_buffer, .. } => Ok(Some((*key_buffer, 8))),
        ResultShape::Dense { presence, .. } => Ok(Some((*presence, 1))),
        ResultShape::Scalar { .. } => Ok(None),
        ResultShape::Rows { .. } => Err(not_grouped()),
    }
}

/// The parameters a pipeline over the slots of `groups` reads its `used` columns with: the
/// slots' flags, each used aggregate's accumulators and counts, and a hash table's slot count.
pub(super) fn group_params(groups: &ResultShape, used: &[ColumnId]) -> CodegenResult<Vec<Param>> {
    let mut params: Vec<Param> = group_flags(groups)?
        .map(|(flags, _)| Param::Buffer(flags))
        .into_iter()
        .collect();
    let aggregates = match groups {
        ResultShape::Hash {
            aggregates, wide, ..
        } => {
            params.push(Param::GroupCapacity);
            params.extend(wide.iter().map(|&words| Param::Buffer(words)));
            aggregates
        }
        ResultShape::Dense { aggregates, .. } | ResultShape::Scalar { aggregates } => aggregates,
        ResultShape::Rows { .. } => return Err(not_grouped()),
    };
    for slot in aggregates {
        if used.contains(&ColumnId(slot.id)) {
            params.push(Param::Buffer(slot.buffer));
            params.extend(slot.count.map(Param::Buffer));
        }
    }
    Ok(params)
}

/// The slots of a dense grouping or a one-row aggregate (`None` for a hash table's, known
/// when the query runs).
pub(super) fn dense_slots(groups: &ResultShape) -> Option<u64> {
    match groups {
        ResultShape::Dense { keys, .. } => Some(
            keys.iter()
                .map(|k| k.size + u64::from(k.nullable))
                .product(),
        ),
        ResultShape::Scalar { .. } => Some(1),
        _ => None,
    }
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    fn groups(&self) -> CodegenResult<&ResultShape> {
        self.groups.as_ref().ok_or_else(not_grouped)
    }

    /// The rows of a pipeline over the grouping's slots (an `i64`): a dense array's slots, or
    /// a hash table's and its extra last one.
    pub(super) fn group_slots(&self) -> CodegenResult<IntValue<'ctx>> {
        match dense_slots(self.groups()?) {
            Some(slots) => Ok(self.em.const_i64(slots as i64)),
            None => {
                Ok(self
                    .em
                    .b
                    .build_int_add(self.hash_capacity()?, self.em.const_i64(1), "slots")?)
            }
        }
    }

    fn hash_capacity(&self) -> CodegenResult<IntValue<'ctx>> {
        Ok(self.param(&Param::GroupCapacity)?.into_int_value())
    }

    /// Reads the tile's slot flags, and deselects the slots that hold no group.
    pub(super) fn select_groups(&mut self) -> CodegenResult<()> {
        // The one slot of a one-row aggregate holds its row: the tile's flags say so already.
        let Some((buffer, bytes)) = group_flags(self.groups()?)? else {
            return Ok(());
        };
        let elem = self.em.int_type(bytes * 8);
        let words = self.em.tile_array(elem.into(), "group_flags")?;
        self.load_into(self.buffer(buffer)?, words)?;
        let present = self.em.tile_array(self.em.i8().into(), "group_present")?;
        let em = &self.em;
        em.for_each_item(|item| {
            let word = em.get(words, item)?.into_int_value();
            let holds =
                em.b.build_int_compare(IntPredicate::NE, word, elem.const_zero(), "")?;
            // Slots past the last hold no group, whatever their words read.
            let inside = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let holds = em.flag(em.b.build_and(holds, inside, "")?)?;
            em.set(present, item, holds)?;
            em.set(self.flags, item, holds)
        })?;
        self.group_words = Some(words);
        self.group_present = Some(present);
        // A wide key's other words, read with the first so that any key can be decoded.
        self.group_key_words.clear();
        if let ResultShape::Hash { wide, .. } = self.groups()?.clone() {
            for buffer in wide {
                let words = self
                    .em
                    .tile_array(self.em.i64().into(), "group_key_words")?;
                self.load_into(self.buffer(buffer)?, words)?;
                self.group_key_words.push(words);
            }
        }
        Ok(())
    }

    /// Decodes column `id` of the groups into a tile: a key from the slot, an aggregate from
    /// its accumulators.
    pub(super) fn load_group_column(&mut self, id: ColumnId) -> CodegenResult<()> {
        let groups = self.groups()?.clone();
        let info = self.query.columns.get(id);
        let values = self
            .em
            .tile_array(self.em.value_type(info.ty), &info.name)?;
        let valid = self
            .em
            .tile_array(self.em.i8().into(), &format!("{}_valid", info.name))?;
        let (aggregates, nullable) = match &groups {
            ResultShape::Hash {
                keys,
                aggregates,
                wide,
                ..
            } => match keys.iter().find(|k| k.id == id.0) {
                Some(key) if !wide.is_empty() => {
                    self.wide_hash_key(key, values, valid)?;
                    (None, key.nullable)
                }
                Some(key) => {
                    self.hash_key(key, values, valid)?;
                    (None, key.nullable)
                }
                None => (Some(aggregates), false),
            },
            ResultShape::Dense {
                keys, aggregates, ..
            } => match keys.iter().position(|k| k.id == id.0) {
                Some(at) => {
                    self.dense_key(&keys[at..], values, valid)?;
                    (None, keys[at].nullable)
                }
                None => (Some(aggregates), false),
            },
            ResultShape::Scalar { aggregates } => (Some(aggregates), false),
            ResultShape::Rows { .. } => return Err(not_grouped()),
        };
        let nullable = match aggregates {
            None => nullable,
            Some(aggregates) => {
                let slot = aggregates.iter().find(|a| a.id == id.0).ok_or_else(|| {
                    CodegenError::Invalid(format!("the groups have no column {}", info.name))
                })?;
                self.aggregate(slot, values, valid)?;
                slot.count.is_some()
            }
        };
        self.tiles.insert(
            id,
            ColumnTile {
                values,
                valid: nullable.then_some(valid),
            },
        );
        Ok(())
    }

    /// The slot of `item` (an `i64`).
    fn slot_of(&self, item: Item<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        let em = &self.em;
        let offset = em.item_offset(item)?;
        let offset = em.b.build_int_s_extend(offset, em.i64(), "")?;
        Ok(em.b.build_int_add(self.tile_start, offset, "slot")?)
    }

    /// A hash key's value (bits `shift .. shift + bits` of the packed key, by range or sign
    /// extended) and whether it is null (the bit above), where the packed key is the key
    /// word with its top bit flipped, or `1 << 63` in the extra last slot.
    fn hash_key(
        &self,
        key: &HashKey,
        values: TileArray<'ctx>,
        valid: TileArray<'ctx>,
    ) -> CodegenResult<()> {
        let words = self
            .group_words
            .ok_or_else(|| CodegenError::Invalid("the groups' key words are not read".into()))?;
        let capacity = self.hash_capacity()?;
        let em = &self.em;
        let top = em.const_i64(i64::MIN);
        em.for_each_item(|item| {
            let b = &em.b;
            let word = em.get(words, item)?.into_int_value();
            let last = b.build_int_compare(IntPredicate::EQ, self.slot_of(item)?, capacity, "")?;
            let flipped = b.build_xor(word, top, "")?;
            let packed = b
                .build_select(last, top, flipped, "packed")?
                .into_int_value();
            let field =
                b.build_right_shift(packed, em.const_i64(i64::from(key.shift)), false, "")?;
            let null = || match key.nullable && key.shift + key.bits < 64 {
                true => {
                    let above = em.const_i64(i64::from(key.shift + key.bits));
                    let bit = b.build_right_shift(packed, above, false, "")?;
                    let bit = b.build_and(bit, em.const_i64(1), "")?;
                    Ok(b.build_int_compare(IntPredicate::NE, bit, em.const_i64(0), "")?)
                }
                false => Ok(em.i1().const_zero()),
            };
            self.set_hash_key(key, item, field, null, (values, valid))
        })
    }

    /// Sets `item` of `values` and `valid` to a hash key's value, from its field (its bits at
    /// the bottom of `field`, above them anything) and whether it is null, as the result's
    /// decoding takes it (`tessera_runtime::result`): the field holds the key's offset from
    /// its range's minimum when packed by range, else its two's-complement bits.
    fn set_hash_key(
        &self,
        key: &HashKey,
        item: Item<'ctx>,
        field: IntValue<'ctx>,
        null: impl FnOnce() -> CodegenResult<IntValue<'ctx>>,
        (values, valid): (TileArray<'ctx>, TileArray<'ctx>),
    ) -> CodegenResult<()> {
        let em = &self.em;
        let b = &em.b;
        let raw = match key.min {
            Some(min) => {
                let mask = em.const_i64(wide_key::low_mask(key.bits) as i64);
                let offset = b.build_and(field, mask, "")?;
                b.build_int_add(offset, em.const_i64(min), "")?
            }
            None if key.bits >= 64 => field,
            None => {
                let unused = em.const_i64(i64::from(64 - key.bits));
                let high = b.build_left_shift(field, unused, "")?;
                b.build_right_shift(high, unused, true, "")?
            }
        };
        em.set(values, item, self.key_value(raw, values.elem)?)?;
        em.set(valid, item, em.flag(b.build_not(null()?, "")?)?)
    }

    /// A wide hash key's value and whether it is null, as `tessera_runtime::result` decodes
    /// them: its field's pieces gathered from the slot's words (`wide_key::parts`), offset by
    /// its range's minimum or sign extended, and the bit after the field for null.
    fn wide_hash_key(
        &self,
        key: &HashKey,
        values: TileArray<'ctx>,
        valid: TileArray<'ctx>,
    ) -> CodegenResult<()> {
        let first = self
            .group_words
            .ok_or_else(|| CodegenError::Invalid("the groups' key words are not read".into()))?;
        let words: Vec<TileArray<'ctx>> = std::iter::once(first)
            .chain(self.group_key_words.iter().copied())
            .collect();
        let em = &self.em;
        em.for_each_item(|item| {
            let b = &em.b;
            let field = |offset: u32, bits: u32| -> CodegenResult<IntValue<'ctx>> {
                let mut value = em.const_i64(0);
                for part in wide_key::parts(offset, bits) {
                    let word = words.get(part.word).ok_or_else(|| {
                        CodegenError::Invalid(format!("the key has no word {}", part.word))
                    })?;
                    let word = em.get(*word, item)?.into_int_value();
                    let shift = em.const_i64(i64::from(part.shift));
                    let piece = b.build_right_shift(word, shift, false, "")?;
                    let mask = em.const_i64(wide_key::low_mask(part.bits) as i64);
                    let piece = b.build_and(piece, mask, "")?;
                    let from = em.const_i64(i64::from(part.from));
                    let piece = b.build_left_shift(piece, from, "")?;
                    value = b.build_or(value, piece, "")?;
                }
                Ok(value)
            };
            let null = || match key.nullable {
                true => {
                    let flag = field(key.shift + key.bits, 1)?;
                    Ok(b.build_int_compare(IntPredicate::NE, flag, em.const_i64(0), "")?)
                }
                false => Ok(em.i1().const_zero()),
            };
            let value = field(key.shift, key.bits)?;
            self.set_hash_key(key, item, value, null, (values, valid))
        })
    }

    /// The first of `keys`' value in a dense array's slot: digit `(slot / stride) % slots` of
    /// the slot index, where the keys after it take `stride` slots; the digit past its
    /// domain is null.
    fn dense_key(
        &self,
        keys: &[DenseKey],
        values: TileArray<'ctx>,
        valid: TileArray<'ctx>,
    ) -> CodegenResult<()> {
        let key = &keys[0];
        let stride: u64 = keys[1..]
            .iter()
            .map(|k| k.size + u64::from(k.nullable))
            .product();
        let slots = key.size + u64::from(key.nullable);
        let em = &self.em;
        em.for_each_item(|item| {
            let b = &em.b;
            let slot = self.slot_of(item)?;
            let above = b.build_int_unsigned_div(slot, em.const_i64(stride as i64), "")?;
            let digit = b.build_int_unsigned_rem(above, em.const_i64(slots as i64), "digit")?;
            let raw = b.build_int_add(digit, em.const_i64(key.min), "")?;
            em.set(values, item, self.key_value(raw, values.elem)?)?;
            let null =
                b.build_int_compare(IntPredicate::EQ, digit, em.const_i64(key.size as i64), "")?;
            let null = match key.nullable {
                true => null,
                false => em.i1().const_zero(),
            };
            em.set(valid, item, em.flag(b.build_not(null, "")?)?)
        })
    }

    /// A key's raw `i64` as its column's register type: a boolean is whether it is not zero,
    /// a float the value of its bits (floats are grouped by their bits).
    fn key_value(
        &self,
        raw: IntValue<'ctx>,
        elem: BasicTypeEnum<'ctx>,
    ) -> CodegenResult<BasicValueEnum<'ctx>> {
        let b = &self.em.b;
        let ty = match elem {
            BasicTypeEnum::IntType(ty) => ty,
            BasicTypeEnum::FloatType(ty) => {
                let bits = self.em.int_type(ty.get_bit_width());
                let raw = match bits.get_bit_width() {
                    64 => raw,
                    _ => b.build_int_truncate(raw, bits, "")?,
                };
                return Ok(b.build_bit_cast(raw, ty, "")?);
            }
            _ => {
                return Err(CodegenError::Invalid(
                    "a group key that is not a number".into(),
                ))
            }
        };
        Ok(match ty.get_bit_width() {
            64 => raw,
            8 => {
                let set = b.build_int_compare(IntPredicate::NE, raw, self.em.const_i64(0), "")?;
                self.em.flag(set)?
            }
            _ => b.build_int_truncate(raw, ty, "")?,
        }
        .into())
    }

    /// An aggregate's value: its accumulator (over its count, for an average), null where its
    /// count is zero.
    fn aggregate(
        &self,
        slot: &AggregateSlot,
        values: TileArray<'ctx>,
        valid: TileArray<'ctx>,
    ) -> CodegenResult<()> {
        // Read back as the host's decoder reads it: an average is a float sum (or a decimal's
        // exact one) over its count, any other aggregate its accumulator as it is.
        let as_held = match slot.kind {
            AggregateKind::Avg => {
                slot.ty == DataType::F64
                    && slot.count.is_some()
                    && (slot.accumulator == DataType::F64 || slot.accumulator.is_decimal())
            }
            _ => slot.accumulator == slot.ty,
        };
        if !as_held {
            return Err(CodegenError::Invalid(format!(
                "aggregate #{} of {} is not read back from its {} accumulator as it is",
                slot.id, slot.ty, slot.accumulator
            )));
        }
        let em = &self.em;
        let accumulators = em.tile_array(em.value_type(slot.accumulator), "accumulators")?;
        self.load_into(self.buffer(slot.buffer)?, accumulators)?;
        let counts = match slot.count {
            Some(buffer) => {
                let counts = em.tile_array(em.i64().into(), "counts")?;
                self.load_into(self.buffer(buffer)?, counts)?;
                Some(counts)
            }
            None => None,
        };
        em.for_each_item(|item| {
            let b = &em.b;
            let accumulator = em.get(accumulators, item)?;
            let count = match counts {
                Some(counts) => Some(em.get(counts, item)?.into_int_value()),
                None => None,
            };
            let value = match (slot.kind, count) {
                (AggregateKind::Avg, Some(count)) => {
                    let f64t = em.ctx.f64_type();
                    let count = b.build_signed_int_to_float(count, f64t, "")?;
                    match slot.accumulator {
                        // Raw units over the count and the scale, as the host divides them
                        // (`tessera_runtime::result::average`).
                        DataType::Decimal(decimal) => {
                            let sum = accumulator.into_int_value();
                            let sum = b.build_signed_int_to_float(sum, f64t, "")?;
                            let unit = f64t.const_float(decimal.unit() as f64);
                            let divisor = b.build_float_mul(count, unit, "")?;
                            b.build_float_div(sum, divisor, "average")?.into()
                        }
                        _ => b
                            .build_float_div(accumulator.into_float_value(), count, "average")?
                            .into(),
                    }
                }
                _ => accumulator,
            };
            em.set(values, item, value)?;
            if let Some(count) = count {
                let some = b.build_int_compare(IntPredicate::NE, count, em.const_i64(0), "")?;
                em.set(valid, item, em.flag(some)?)?;
            }
            Ok(())
        })
    }

    /// The sink of a pipeline over groups: empties the slot of each group no longer selected.
    pub(super) fn keep_groups_tile(&self) -> CodegenResult<()> {
        let (buffer, bytes) = group_flags(self.groups()?)?.ok_or_else(|| {
            CodegenError::Invalid("a one-row aggregate's row cannot be dropped".into())
        })?;
        let present = self
            .group_present
            .ok_or_else(|| CodegenError::Invalid("the groups' flags are not read".into()))?;
        let flags = self.buffer(buffer)?;
        let em = &self.em;
        let elem = em.int_type(bytes * 8);
        em.for_each_item(|item| {
            let b = &em.b;
            let holds = em.truth(em.get(present, item)?.into_int_value())?;
            let selected = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let dropped = b.build_and(holds, b.build_not(selected, "")?, "dropped")?;
            em.if_then(dropped, || {
                let at = em.offset_ptr(elem.into(), flags, self.slot_of(item)?)?;
                b.build_store(at, elem.const_zero())?;
                Ok(())
            })
        })
    }
}
