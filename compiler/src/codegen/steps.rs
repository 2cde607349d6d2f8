//! The steps of a pipeline on one tile: filters clear flags, probes look keys up in hash tables
//! (bringing the payload into registers), computed columns are evaluated into tile arrays.

use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;
use tessera_grammar::ast::JoinKind;
use tessera_grammar::Diagnostic;
use tessera_runtime::emit::Item;
use tessera_runtime::emit::TileArray;
use tessera_runtime::primitives::hash::{self, HashKind, HashTableLayout};
use tessera_runtime::primitives::scan;
use tessera_runtime::program::{AggregateKind, AggregateSlot, Param, ResultShape};
use tessera_runtime::{CodegenError, CodegenResult};

use crate::columns::ColumnId;
use crate::physical::Step;

use super::context::{payload_fields, PayloadField, QueryContext, TableSlots};
use super::expr::Val;
use super::kernel::{ColumnTile, Kernel, STATIC_SHARED_BYTES};

/// What a probe looks up: the key expression's value, or for a table keyed by codes
/// ([`super::context::CodedKey`]) the key column's codes, read without decoding.
enum ProbeKey<'e, 'ctx> {
    Value(&'e crate::expr::Expr),
    Codes(TileArray<'ctx>),
}

/// Probes run without branches while at least this fraction of rows is estimated to survive:
/// measured on SSB at SF 20 on an H100, branch-free probing sped up Q3.1's late date probe
/// (86% of rows survive) and slowed probes that most rows skip.
const BRANCH_FREE_PROBE_ABOVE: f64 = 0.5;

/// Below branch-free probing, a probe of a perfect table requests the slots of all of a
/// thread's selected items before looking at any while at least this fraction of rows is
/// estimated to be selected; below it, most warps hold no selected row, and one branch per item
/// that skips everything is cheaper (measured on SSB at SF 20 on an H100: Q4.1 0.99 -> 0.78 ms
/// with its probes at 1-20% of rows, but Q3.3 and Q2.3 about 10% slower when probes at
/// 0.02-0.8% took the same path).
const SLOTS_REQUESTED_TOGETHER_ABOVE: f64 = 0.01;

/// The parameters the probes among `steps` read: each probed table's buffer and, when it is
/// chained, its rows; for a table that is a grouping's slots, their presence bytes and, for an
/// inner or left join, the accumulators of its payload.
pub(super) fn probe_params(qc: &QueryContext<'_>, steps: &[Step]) -> CodegenResult<Vec<Param>> {
    let mut params = Vec::new();
    for step in steps {
        let Step::Probe { table, kind, .. } = step else {
            continue;
        };
        if let Some(slots) = group_slot_table(qc, *table)? {
            params.push(Param::Buffer(slots.presence));
            if matches!(kind, JoinKind::Inner | JoinKind::Left) {
                params.extend(slots.payload.iter().map(|slot| Param::Buffer(slot.buffer)));
            }
            continue;
        }
        params.push(Param::Buffer(qc.table_buffer(*table)?));
        if let Some(rows) = qc.chains[*table].and_then(|chain| chain.rows) {
            params.push(Param::Buffer(rows));
        }
    }
    Ok(params)
}

/// A join table that is a dense grouping's slots (`TableSlots::Grouping`): the key's least
/// value and slot count as the grouping lays them out, their presence bytes, and the
/// accumulators of the table's payload columns, in its order.
struct GroupSlotTable<'q> {
    min: i64,
    slots: u64,
    presence: usize,
    payload: Vec<&'q AggregateSlot>,
}

/// Hash table `table` as the grouping slots it is, or `None` when it has a buffer of its own.
fn group_slot_table<'q>(
    qc: &'q QueryContext<'_>,
    table: usize,
) -> CodegenResult<Option<GroupSlotTable<'q>>> {
    let TableSlots::Grouping(grouping) = qc.tables[table].1 else {
        return Ok(None);
    };
    let Some(ResultShape::Dense {
        keys,
        presence,
        aggregates,
    }) = qc.groupings.get(&grouping)
    else {
        return Err(CodegenError::Invalid(format!(
            "hash table {table} is the slots of pipeline {grouping}, which is no dense grouping built before"
        )));
    };
    // The planner takes only aggregates whose accumulators hold them as read
    // (`Planner::groups_probed_in_place`).
    let payload = qc.query.hash_tables[table]
        .payload
        .iter()
        .map(|column| {
            aggregates
                .iter()
                .find(|slot| {
                    slot.id == column.0
                        && slot.kind != AggregateKind::Avg
                        && slot.count.is_none()
                        && slot.accumulator == slot.ty
                })
                .ok_or_else(|| {
                    CodegenError::Invalid(format!(
                        "column {column} is no aggregate held as read in the slots of pipeline {grouping}"
                    ))
                })
        })
        .collect::<CodegenResult<_>>()?;
    // The slots as the grouping's kernel lays them out, which the probe indexes alike.
    let [key] = keys.as_slice() else {
        return Err(CodegenError::Invalid(format!(
            "hash table {table} is the slots of a grouping by {} keys",
            keys.len()
        )));
    };
    Ok(Some(GroupSlotTable {
        min: key.min,
        slots: key.size,
        presence: *presence,
        payload,
    }))
}

impl<'ctx> Kernel<'_, 'ctx, '_> {
    pub(super) fn step(
        &mut self,
        qc: &mut QueryContext<'_>,
        step: &Step,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let result = match step {
            Step::Filter {
                predicate,
                selectivity,
            } => {
                let run = self.filter(predicate);
                self.selected *= selectivity;
                run
            }
            Step::Probe {
                table,
                key,
                kind: JoinKind::Left,
                build_key,
                ..
            } => self.probe_left(qc, *table, key, *build_key),
            Step::Probe {
                table,
                key,
                kind,
                selectivity,
                ..
            } => {
                let run = self.probe(qc, *table, key, *kind);
                self.selected *= selectivity;
                run
            }
            Step::Compute { column, expr } => self.compute(*column, expr),
        };
        result.map_err(|e| Diagnostic::internal(span, e.to_string()))
    }

    fn filter(&mut self, predicate: &crate::expr::Expr) -> CodegenResult<()> {
        self.load_columns(&predicate.columns_used())?;
        let em = &self.em;
        em.for_each_item(|item| {
            let keep = self.truth_of(self.eval(predicate, item)?)?;
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let flag = em.b.build_and(flag, keep, "")?;
            em.set(self.flags, item, em.flag(flag)?)
        })
    }

    /// A left probe: the rows probe as an inner join's would, bringing the payload where they
    /// match, and then every row selected before stays selected, its payload (and the build
    /// key `build_key`, defined as the probe key) valid only where it matched.
    fn probe_left(
        &mut self,
        qc: &QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
        build_key: Option<ColumnId>,
    ) -> CodegenResult<()> {
        let kept = self.copy_of(self.flags, "kept")?;
        self.probe(qc, table, key, JoinKind::Inner)?;
        let matched = self.copy_of(self.flags, "matched")?;
        let em = &self.em;
        em.for_each_item(|item| em.set(self.flags, item, em.get(kept, item)?))?;
        if let Some(column) = build_key {
            self.compute(column, key)?;
        }
        let em = &self.em;
        let defined = qc.query.hash_tables[table]
            .payload
            .iter()
            .copied()
            .chain(build_key);
        for column in defined {
            let tile = *self.tiles.get(&column).ok_or_else(|| {
                CodegenError::Invalid(format!("a left probe did not bring column {column}"))
            })?;
            let valid = em.tile_array(em.i8().into(), "matched_valid")?;
            em.for_each_item(|item| {
                let mut bit = em.truth(em.get(matched, item)?.into_int_value())?;
                if let Some(own) = tile.valid {
                    let own = em.truth(em.get(own, item)?.into_int_value())?;
                    bit = em.b.build_and(bit, own, "")?;
                }
                em.set(valid, item, em.flag(bit)?)
            })?;
            self.tiles.insert(
                column,
                ColumnTile {
                    values: tile.values,
                    valid: Some(valid),
                },
            );
        }
        Ok(())
    }

    /// A copy of tile array `array` (a byte per item).
    fn copy_of(&self, array: TileArray<'ctx>, name: &str) -> CodegenResult<TileArray<'ctx>> {
        let em = &self.em;
        let copy = em.tile_array(em.i8().into(), name)?;
        em.for_each_item(|item| em.set(copy, item, em.get(array, item)?))?;
        Ok(copy)
    }

    fn probe(
        &mut self,
        qc: &QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
        kind: JoinKind,
    ) -> CodegenResult<()> {
        let key = match (&qc.coded[table], key.as_column()) {
            (Some(_), Some(id)) => ProbeKey::Codes(self.load_codes(id)?),
            (Some(_), None) => {
                return Err(tessera_runtime::CodegenError::Invalid(
                    "a table keyed by codes is probed by a column".into(),
                ))
            }
            (None, _) => {
                self.load_columns(&key.columns_used())?;
                ProbeKey::Value(key)
            }
        };
        let key = &key;
        let layout = &qc.tables[table].0;
        let payload = match kind {
            JoinKind::Inner => payload_fields(qc.query, &qc.query.hash_tables[table].payload),
            _ => Vec::new(),
        };
        let outputs = self.payload_tiles(&payload)?;
        if let Some(slots) = group_slot_table(qc, table)? {
            self.probe_group_slots(&slots, &payload, key, kind, &outputs)?;
            self.attach_payload(&payload, &outputs);
            return Ok(());
        }
        let pointer = self.buffer(qc.table_buffer(table)?)?;
        if layout.is_key_set() {
            return self.probe_key_set(layout, pointer, key, kind);
        }
        let em = &self.em;
        // Branch-free probing puts every item's loads in flight together, which pays while most
        // rows are still selected; when most are rejected, branching lets them skip the loads.
        let branch_free = self.selected >= BRANCH_FREE_PROBE_ABOVE;
        if let (true, HashKind::Perfect { min, .. }) = (branch_free, layout.kind) {
            em.for_each_item(|item: Item| {
                let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
                let k = self.probe_key(key, item)?;
                let steered = self.steered_key(flag, k.value.into_int_value(), min)?;
                let (slot, inside) = hash::probe_perfect(em, layout, pointer, steered)?;
                let (present, fields) = hash::read_slot(em, layout, slot)?;
                let mut hit =
                    em.b.build_and(flag, em.b.build_and(inside, present, "")?, "hit")?;
                if let Some(valid) = k.valid {
                    hit = em.b.build_and(hit, valid, "")?;
                }
                self.set_matched_payload(item, hit, &fields, &outputs)?;
                self.keep_matched(item, flag, hit, kind)
            })?;
        } else if self.selected >= SLOTS_REQUESTED_TOGETHER_ABOVE
            && hash::slot_words_type(em, layout).is_some()
        {
            self.probe_selected_slots(layout, pointer, key, kind, &outputs)?;
        } else {
            self.probe_branching(layout, pointer, key, kind, &outputs)?;
        }
        self.attach_payload(&payload, &outputs);
        Ok(())
    }

    /// Probes a dense grouping's slots in place: a key's slot is its offset from the
    /// grouping key's minimum, its presence byte says whether the key is there, and its
    /// accumulators are the payload (`fields`: values, then a validity that is the match).
    /// Without branches while most rows are selected, as for a perfect table (rejected items
    /// read the first slot); else only selected items touch the slots.
    fn probe_group_slots(
        &self,
        slots: &GroupSlotTable<'_>,
        fields: &[PayloadField],
        key: &ProbeKey<'_, 'ctx>,
        kind: JoinKind,
        outputs: &[(usize, ColumnId, TileArray<'ctx>)],
    ) -> CodegenResult<()> {
        let (min, count) = (slots.min, slots.slots);
        let presence = self.buffer(slots.presence)?;
        let em = &self.em;
        // Only an inner join brings the payload (a left join probes as one; `probe_params`
        // passes the accumulators for both).
        let brought = match kind {
            JoinKind::Inner => slots.payload.as_slice(),
            _ => &[],
        };
        let accumulators = brought
            .iter()
            .map(|slot| Ok((self.buffer(slot.buffer)?, em.value_type(slot.accumulator))))
            .collect::<CodegenResult<Vec<_>>>()?;
        let branch_free = self.selected >= BRANCH_FREE_PROBE_ABOVE;
        // The payload's fields in slot `index`: each column's accumulator, and its validity
        // (any value is valid where the key is present).
        let read_fields = |index: IntValue<'ctx>| -> CodegenResult<Vec<BasicValueEnum<'ctx>>> {
            let mut values = Vec::with_capacity(fields.len());
            for (at, field) in fields.iter().enumerate() {
                if field.validity {
                    values.push(em.i8().const_int(1, false).into());
                    continue;
                }
                let (pointer, ty) = accumulators.get(at).ok_or_else(|| {
                    tessera_runtime::CodegenError::Invalid("a payload field without slots".into())
                })?;
                let at = em.offset_ptr(*ty, *pointer, index)?;
                values.push(em.b.build_load(*ty, at, "")?);
            }
            Ok(values)
        };
        em.for_each_item(|item: Item| {
            let b = &em.b;
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let k = self.probe_key(key, item)?;
            let value = k.value.into_int_value();
            let value = match value.get_type().get_bit_width() {
                64 => value,
                _ => b.build_int_s_extend(value, em.i64(), "")?,
            };
            let offset = b.build_int_sub(value, em.const_i64(min), "slot")?;
            let inside =
                b.build_int_compare(IntPredicate::ULT, offset, em.const_i64(count as i64), "")?;
            // A null key matches nothing.
            let mut look = b.build_and(flag, inside, "")?;
            if let Some(valid) = k.valid {
                look = b.build_and(look, valid, "")?;
            }
            let present_at = |index: IntValue<'ctx>| -> CodegenResult<IntValue<'ctx>> {
                let at = em.offset_ptr(em.i8().into(), presence, index)?;
                let byte = b.build_load(em.i8(), at, "")?.into_int_value();
                Ok(b.build_int_compare(IntPredicate::NE, byte, em.i8().const_zero(), "")?)
            };
            let hit = if branch_free {
                let index = b
                    .build_select(look, offset, em.const_i64(0), "")?
                    .into_int_value();
                let hit = b.build_and(look, present_at(index)?, "hit")?;
                self.set_matched_payload(item, hit, &read_fields(index)?, outputs)?;
                hit
            } else {
                for (_, _, values) in outputs {
                    em.set(*values, item, values.elem.const_zero())?;
                }
                let found = em.alloca(em.i1().into(), "found")?;
                b.build_store(found, em.i1().const_zero())?;
                em.if_then(look, || {
                    let hit = present_at(offset)?;
                    b.build_store(found, hit)?;
                    em.if_then(hit, || {
                        let read = read_fields(offset)?;
                        for (index, _, values) in outputs {
                            em.set(*values, item, read[*index])?;
                        }
                        Ok(())
                    })
                })?;
                b.build_load(em.i1(), found, "")?.into_int_value()
            };
            self.keep_matched(item, flag, hit, kind)
        })
    }

    /// Probes a set of keys, without branching: a bit per key keeps the table small enough for
    /// L1, so every item reads its word (rejected items the first one) and the loads of all
    /// items are in flight together.
    fn probe_key_set(
        &self,
        layout: &HashTableLayout,
        pointer: PointerValue<'ctx>,
        key: &ProbeKey<'_, 'ctx>,
        kind: JoinKind,
    ) -> CodegenResult<()> {
        let HashKind::Perfect { min, .. } = layout.kind else {
            return Err(tessera_runtime::CodegenError::Invalid(
                "a set of keys is a perfect table".into(),
            ));
        };
        let em = &self.em;
        em.for_each_item(|item: Item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let k = self.probe_key(key, item)?;
            let steered = self.steered_key(flag, k.value.into_int_value(), min)?;
            let present = hash::set_contains(em, layout, pointer, steered)?;
            let mut hit = em.b.build_and(flag, present, "hit")?;
            // A null key matches nothing.
            if let Some(valid) = k.valid {
                hit = em.b.build_and(hit, valid, "")?;
            }
            self.keep_matched(item, flag, hit, kind)
        })
    }

    /// Probes a perfect table whose slot is read in one load, for the selected items only, in
    /// two passes: every selected item's slot is requested before any is looked at, so a
    /// thread waits for the table once per probe rather than once per item, and rejected items
    /// touch nothing (as `load_sel` does for columns).
    fn probe_selected_slots(
        &self,
        layout: &HashTableLayout,
        pointer: PointerValue<'ctx>,
        key: &ProbeKey<'_, 'ctx>,
        kind: JoinKind,
        outputs: &[(usize, crate::columns::ColumnId, TileArray<'ctx>)],
    ) -> CodegenResult<()> {
        let em = &self.em;
        let words_ty = hash::slot_words_type(em, layout)
            .ok_or_else(|| tessera_runtime::CodegenError::Invalid("no whole-slot load".into()))?;
        // Each word of the slot in a tile array of its own: pass 1 only moves loaded words
        // into registers, so nothing in it waits for memory.
        let words: Vec<TileArray<'ctx>> = (0..words_ty.get_size())
            .map(|i| em.tile_array(em.i32().into(), &format!("slot_word{i}")))
            .collect::<CodegenResult<_>>()?;
        let looked = em.tile_array(em.i8().into(), "looked")?;
        em.for_each_item(|item: Item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let k = self.probe_key(key, item)?;
            let (slot, inside) =
                hash::probe_perfect(em, layout, pointer, k.value.into_int_value())?;
            // A null key matches nothing.
            let mut look = em.b.build_and(flag, inside, "")?;
            if let Some(valid) = k.valid {
                look = em.b.build_and(look, valid, "")?;
            }
            em.set(looked, item, em.flag(look)?)?;
            for word in &words {
                em.set(*word, item, em.const_i32(0))?;
            }
            em.if_then(look, || {
                let loaded = hash::load_slot_words(em, layout, slot)?;
                for (i, word) in words.iter().enumerate() {
                    let value =
                        em.b.build_extract_element(loaded, em.const_i32(i as i64), "")?;
                    em.set(*word, item, value)?;
                }
                Ok(())
            })
        })?;
        em.for_each_item(|item: Item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            let look = em.truth(em.get(looked, item)?.into_int_value())?;
            let mut whole = words_ty.get_undef();
            for (i, word) in words.iter().enumerate() {
                let value = em.get(*word, item)?.into_int_value();
                whole =
                    em.b.build_insert_element(whole, value, em.const_i32(i as i64), "")?;
            }
            let (present, fields) = hash::slot_fields(em, layout, whole)?;
            let hit = em.b.build_and(look, present, "hit")?;
            self.set_matched_payload(item, hit, &fields, outputs)?;
            self.keep_matched(item, flag, hit, kind)
        })
    }

    /// The key `item` probes with: the key expression's value, or the key column's code.
    fn probe_key(&self, key: &ProbeKey<'_, 'ctx>, item: Item<'ctx>) -> CodegenResult<Val<'ctx>> {
        match key {
            ProbeKey::Value(expr) => self.eval(expr, item),
            ProbeKey::Codes(codes) => Ok(Val {
                value: self.em.get(*codes, item)?,
                valid: None,
                overflow: None,
            }),
        }
    }

    /// `key` for a selected item, the perfect table's first key for a rejected one: rejected
    /// items then all read one cached line rather than a random one each.
    fn steered_key(
        &self,
        flag: IntValue<'ctx>,
        key: IntValue<'ctx>,
        min: i64,
    ) -> CodegenResult<IntValue<'ctx>> {
        let first = key.get_type().const_int(min as u64, true);
        Ok(self
            .em
            .b
            .build_select(flag, key, first, "")?
            .into_int_value())
    }

    /// Sets each payload column of `item` to the matched slot's field, or zero without a match.
    fn set_matched_payload(
        &self,
        item: Item<'ctx>,
        hit: IntValue<'ctx>,
        fields: &[inkwell::values::BasicValueEnum<'ctx>],
        outputs: &[(usize, crate::columns::ColumnId, TileArray<'ctx>)],
    ) -> CodegenResult<()> {
        let em = &self.em;
        for (index, _, values) in outputs {
            let value = fields[*index];
            let value =
                em.b.build_select(hit, value, value.get_type().const_zero(), "")?;
            em.set(*values, item, value)?;
        }
        Ok(())
    }

    /// Keeps `item` selected when it matched (an anti join: when it was selected and did not).
    fn keep_matched(
        &self,
        item: Item<'ctx>,
        flag: IntValue<'ctx>,
        hit: IntValue<'ctx>,
        kind: JoinKind,
    ) -> CodegenResult<()> {
        let em = &self.em;
        let keep = match kind {
            JoinKind::Anti => em.b.build_and(flag, em.b.build_not(hit, "")?, "")?,
            _ => hit,
        };
        em.set(self.flags, item, em.flag(keep)?)
    }

    /// Probes with a branch per item: only selected items touch the table (and open tables'
    /// probe sequences are loops, which branch anyway).
    fn probe_branching(
        &self,
        layout: &HashTableLayout,
        pointer: PointerValue<'ctx>,
        key: &ProbeKey<'_, 'ctx>,
        kind: JoinKind,
        outputs: &[(usize, crate::columns::ColumnId, TileArray<'ctx>)],
    ) -> CodegenResult<()> {
        let em = &self.em;
        em.for_each_item(|item: Item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            for (_, _, values) in outputs {
                em.set(*values, item, values.elem.const_zero())?;
            }
            let k = self.probe_key(key, item)?;
            // A null key matches nothing.
            let look = match k.valid {
                Some(valid) => em.b.build_and(flag, valid, "")?,
                None => flag,
            };
            let found = em.alloca(em.i1().into(), "found")?;
            em.b.build_store(found, em.i1().const_zero())?;
            em.if_then(look, || {
                let slot = hash::find(em, layout, pointer, k.value.into_int_value())?;
                let hit = em.b.build_is_not_null(slot, "hit")?;
                em.b.build_store(found, hit)?;
                em.if_then(hit, || {
                    for (index, _, values) in outputs {
                        let (field, ty) = hash::payload_ptr(em, layout, slot, *index)?;
                        let value = em.b.build_load(ty, field, "")?;
                        em.set(*values, item, value)?;
                    }
                    Ok(())
                })
            })?;
            let hit = em.b.build_load(em.i1(), found, "")?.into_int_value();
            self.keep_matched(item, flag, hit, kind)
        })
    }

    /// Probes a chained table, whose key may have several rows, contiguous among the table's
    /// rows. The matches of the tile are spread over the block: each item's match count is
    /// scanned into where its matches begin among the tile's, and in rounds of a tile's worth
    /// the block's items take consecutive matches, each finding its probe row by a binary
    /// search of those beginnings and its probe row's columns in shared memory, and `rest` (the
    /// steps after the probe, and the sink, which read the columns `later`) is generated to run
    /// once a round. A key with many rows thus keeps every thread busy rather than one. Where
    /// the probe row's columns do not fit the block's static shared memory (`spread_fits`),
    /// each item walks its own matches instead, one a round.
    pub(super) fn probe_chained(
        &mut self,
        qc: &mut QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
        selectivity: f64,
        later: &[ColumnId],
        rest: impl FnOnce(&mut Self, &mut QueryContext<'_>) -> Result<(), Diagnostic>,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let internal = |e: tessera_runtime::CodegenError| Diagnostic::internal(span, e.to_string());
        // Items change places from here on: the probe side's columns that later steps and the
        // sink read are loaded now, and carried along.
        let scanned: Vec<ColumnId> = later
            .iter()
            .copied()
            .filter(|c| self.pipeline.scanned.contains(c))
            .collect();
        self.load_columns(&scanned).map_err(internal)?;
        let carried: Vec<(ColumnId, ColumnTile<'ctx>)> = later
            .iter()
            .filter_map(|c| self.tiles.get(c).map(|tile| (*c, *tile)))
            .collect();
        let (counts, starts, outputs) = self.match_ranges(qc, table, key).map_err(internal)?;
        let rows = qc.chains[table]
            .and_then(|chain| chain.rows)
            .map(|b| self.buffer(b))
            .transpose()
            .map_err(internal)?;
        let ranges = MatchRanges {
            table,
            counts,
            starts,
            rows,
            outputs: &outputs,
        };
        let rounds = if self.spread_fits(&carried) {
            self.selected = 1.0;
            self.spread_matches(qc, &ranges, &carried)
        } else {
            self.selected *= selectivity.min(1.0);
            self.walk_matches(qc, &ranges)
        }
        .map_err(internal)?;
        self.attach_payload(
            &payload_fields(qc.query, &qc.query.hash_tables[table].payload),
            &outputs,
        );
        rest(self, qc)?;
        self.end_rounds(rounds).map_err(internal)
    }

    /// Whether spreading matches over the block can stage the probe rows' `carried` columns,
    /// where each match begins and its first build row in shared memory, beside what the
    /// kernel has declared already and what the sink's scans and reductions may need.
    /// The host applies the same bound to its staged arrays (a tile's working set beside its
    /// columns, kept within what a core's caches hold), so that both ways are exercised there.
    fn spread_fits(&self, carried: &[(ColumnId, ColumnTile<'ctx>)]) -> bool {
        let em = &self.em;
        let items = u64::from(em.tile.items());
        let width =
            |array: TileArray<'ctx>| u64::from(tessera_runtime::emit::byte_width(array.elem));
        let staged: u64 = carried
            .iter()
            .map(|(_, tile)| width(tile.values) + tile.valid.map_or(0, width))
            .sum();
        let needed = items * (staged + 8 + 4);
        let reserve = u64::from(
            tessera_runtime::primitives::reduce::SCRATCH_BYTES
                + tessera_runtime::primitives::scan::shared_bytes(em)
                + tessera_runtime::primitives::scan::offsets_shared_bytes(em)
                + tessera_runtime::primitives::store::shared_bytes(em),
        );
        em.shared_bytes_declared() + reserve + needed <= STATIC_SHARED_BYTES
    }

    /// The rounds of `spread_matches`: see `probe_chained`.
    fn spread_matches(
        &mut self,
        qc: &QueryContext<'_>,
        ranges: &MatchRanges<'_, 'ctx>,
        carried: &[(ColumnId, ColumnTile<'ctx>)],
    ) -> CodegenResult<Rounds<'ctx>> {
        let em = &self.em;
        let items = em.tile.items();
        let offsets = em.tile_array(em.i64().into(), "match_offsets")?;
        let total = scan::tile_offsets(em, ranges.counts, offsets)?;
        let name = |what: &str| format!("tessera.spread{}.{what}", ranges.table);
        let begins = em.block_array(em.i64().into(), items, &name("begins"))?;
        let firsts = em.block_array(em.i32().into(), items, &name("first_rows"))?;
        let mut staged = Vec::with_capacity(carried.len());
        for (id, tile) in carried {
            let values = em.block_array(tile.values.elem, items, &name(&format!("c{}", id.0)))?;
            let valid = match tile.valid {
                Some(valid) => Some((
                    valid,
                    em.block_array(valid.elem, items, &name(&format!("c{}_valid", id.0)))?,
                )),
                None => None,
            };
            staged.push((*id, *tile, values, valid));
        }
        let at = |array: PointerValue<'ctx>, elem, position| em.offset_ptr(elem, array, position);
        em.for_each_item(|item| {
            let position = em.item_offset(item)?;
            em.b.build_store(
                at(begins, em.i64().into(), position)?,
                em.get(offsets, item)?,
            )?;
            em.b.build_store(
                at(firsts, em.i32().into(), position)?,
                em.get(ranges.starts, item)?,
            )?;
            for (_, tile, values, valid) in &staged {
                em.b.build_store(
                    at(*values, tile.values.elem, position)?,
                    em.get(tile.values, item)?,
                )?;
                if let Some((from, to)) = valid {
                    em.b.build_store(at(*to, from.elem, position)?, em.get(*from, item)?)?;
                }
            }
            Ok(())
        })?;
        em.barrier()?;
        // Rounds while matches are left: `total` is the same in every thread, so all take the
        // same branches and reach the barriers inside.
        let base = em.alloca(em.i64().into(), "round_base")?;
        em.b.build_store(base, em.const_i64(0))?;
        let header = em.ctx.append_basic_block(em.function, "spread_round");
        let round = em.ctx.append_basic_block(em.function, "spread_matches");
        let done = em.ctx.append_basic_block(em.function, "spread_done");
        em.b.build_unconditional_branch(header)?;
        em.b.position_at_end(header);
        let first = em.b.build_load(em.i64(), base, "")?.into_int_value();
        let mut left =
            em.b.build_int_compare(IntPredicate::SLT, first, total, "")?;
        // A key of many rows makes rounds without end: a cancelled query's block stops them.
        if em.target.is_gpu() {
            let cancelled = em.block_any(self.cancel_seen()?)?;
            left = em.b.build_and(left, em.b.build_not(cancelled, "")?, "")?;
        }
        em.b.build_conditional_branch(left, round, done)?;
        em.b.position_at_end(round);
        let mut moved = Vec::with_capacity(staged.len());
        for (id, tile, _, valid) in &staged {
            let info = self.query.columns.get(*id);
            let values = em.tile_array(tile.values.elem, &format!("{}_spread", info.name))?;
            let valid = match valid {
                Some((from, _)) => {
                    Some(em.tile_array(from.elem, &format!("{}_valid_spread", info.name))?)
                }
                None => None,
            };
            moved.push(ColumnTile { values, valid });
        }
        em.for_each_item(|item| {
            let position = em.item_offset(item)?;
            let position = em.b.build_int_z_extend(position, em.i64(), "")?;
            let index = em.b.build_int_add(first, position, "match")?;
            let live =
                em.b.build_int_compare(IntPredicate::SLT, index, total, "")?;
            em.set(self.flags, item, em.flag(live)?)?;
            for (_, _, values) in ranges.outputs {
                em.set(*values, item, values.elem.const_zero())?;
            }
            for tile in &moved {
                em.set(tile.values, item, tile.values.elem.const_zero())?;
                if let Some(valid) = tile.valid {
                    em.set(valid, item, valid.elem.const_zero())?;
                }
            }
            em.if_then(live, || {
                let source = source_of(em, begins, index, items)?;
                let begin =
                    em.b.build_load(em.i64(), at(begins, em.i64().into(), source)?, "")?;
                let row =
                    em.b.build_load(em.i32(), at(firsts, em.i32().into(), source)?, "")?;
                let within = em.b.build_int_sub(index, begin.into_int_value(), "")?;
                let row =
                    em.b.build_int_z_extend(row.into_int_value(), em.i64(), "")?;
                let row = em.b.build_int_add(row, within, "build_row")?;
                for ((_, tile, values, valid), to) in staged.iter().zip(&moved) {
                    let value = em.b.build_load(
                        tile.values.elem,
                        at(*values, tile.values.elem, source)?,
                        "",
                    )?;
                    em.set(to.values, item, value)?;
                    if let (Some((from, array)), Some(to)) = (valid, to.valid) {
                        let value =
                            em.b.build_load(from.elem, at(*array, from.elem, source)?, "")?;
                        em.set(to, item, value)?;
                    }
                }
                self.load_payload(qc, ranges, row, item)
            })
        })?;
        for ((id, _, _, _), tile) in staged.iter().zip(moved) {
            self.tiles.insert(*id, tile);
        }
        let next =
            em.b.build_int_add(first, em.const_i64(i64::from(items)), "")?;
        em.b.build_store(base, next)?;
        Ok(Rounds {
            header,
            done,
            spread: true,
        })
    }

    /// The rounds of a probe whose items each walk their own matches, one a round; rounds go
    /// on while any thread of the block has a match left.
    fn walk_matches(
        &mut self,
        qc: &QueryContext<'_>,
        ranges: &MatchRanges<'_, 'ctx>,
    ) -> CodegenResult<Rounds<'ctx>> {
        let em = &self.em;
        let header = em.ctx.append_basic_block(em.function, "walk_round");
        let round = em.ctx.append_basic_block(em.function, "walk_matches");
        let done = em.ctx.append_basic_block(em.function, "walk_done");
        em.b.build_unconditional_branch(header)?;
        em.b.position_at_end(header);
        let left = em.alloca(em.i1().into(), "matches_left")?;
        em.b.build_store(left, em.i1().const_zero())?;
        let has_match = |item| -> CodegenResult<IntValue<'ctx>> {
            let count = em.get(ranges.counts, item)?.into_int_value();
            Ok(em
                .b
                .build_int_compare(IntPredicate::NE, count, em.const_i32(0), "")?)
        };
        em.for_each_item(|item| {
            let live = has_match(item)?;
            let before = em.b.build_load(em.i1(), left, "")?.into_int_value();
            em.b.build_store(left, em.b.build_or(before, live, "")?)?;
            Ok(())
        })?;
        let mut left = em.b.build_load(em.i1(), left, "")?.into_int_value();
        // A cancelled query's threads stop walking (the block agrees on it in the same step).
        if em.target.is_gpu() {
            left =
                em.b.build_and(left, em.b.build_not(self.cancel_seen()?, "")?, "")?;
        }
        let any = em.block_any(left)?;
        em.b.build_conditional_branch(any, round, done)?;
        em.b.position_at_end(round);
        em.for_each_item(|item| {
            let live = has_match(item)?;
            em.set(self.flags, item, em.flag(live)?)?;
            for (_, _, values) in ranges.outputs {
                em.set(*values, item, values.elem.const_zero())?;
            }
            em.if_then(live, || {
                let count = em.get(ranges.counts, item)?.into_int_value();
                let row = em.get(ranges.starts, item)?.into_int_value();
                em.set(
                    ranges.counts,
                    item,
                    em.b.build_int_sub(count, em.const_i32(1), "")?,
                )?;
                em.set(
                    ranges.starts,
                    item,
                    em.b.build_int_add(row, em.const_i32(1), "")?,
                )?;
                let row = em.b.build_int_z_extend(row, em.i64(), "build_row")?;
                self.load_payload(qc, ranges, row, item)
            })
        })?;
        Ok(Rounds {
            header,
            done,
            spread: false,
        })
    }

    /// The payload of build row `row` (an `i64`) into `item` of the probe's output tiles.
    fn load_payload(
        &self,
        qc: &QueryContext<'_>,
        ranges: &MatchRanges<'_, 'ctx>,
        row: IntValue<'ctx>,
        item: Item<'ctx>,
    ) -> CodegenResult<()> {
        let em = &self.em;
        let Some(rows) = ranges.rows else {
            return Ok(());
        };
        let (layout, _) = &qc.tables[ranges.table];
        for (index, _, values) in ranges.outputs {
            let (field, ty) = hash::row_field_ptr(em, layout, rows, row, *index)?;
            let value = em.b.build_load(ty, field, "")?;
            em.set(*values, item, value)?;
        }
        Ok(())
    }

    /// Closes a probe's rounds: back to its next round, and after the last one,
    /// (when its matches were spread) a barrier before the block's shared arrays are refilled.
    fn end_rounds(&self, rounds: Rounds<'ctx>) -> CodegenResult<()> {
        let em = &self.em;
        em.b.build_unconditional_branch(rounds.header)?;
        em.b.position_at_end(rounds.done);
        if rounds.spread {
            em.barrier()?;
        }
        Ok(())
    }

    /// Each selected item's matches in a chained table: how many (0 for none) and the first
    /// of its rows (`i32`s), and the tile arrays the payload goes into.
    #[allow(clippy::type_complexity)]
    fn match_ranges(
        &mut self,
        qc: &QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
    ) -> CodegenResult<(
        TileArray<'ctx>,
        TileArray<'ctx>,
        Vec<(usize, ColumnId, TileArray<'ctx>)>,
    )> {
        self.load_columns(&key.columns_used())?;
        let layout = &qc.tables[table].0;
        let pointer = self.buffer(qc.table_buffer(table)?)?;
        let outputs = self.payload_tiles(&payload_fields(
            qc.query,
            &qc.query.hash_tables[table].payload,
        ))?;
        let em = &self.em;
        let counts = em.tile_array(em.i32().into(), "match_counts")?;
        let starts = em.tile_array(em.i32().into(), "first_rows")?;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.set(counts, item, em.const_i32(0))?;
            em.set(starts, item, em.const_i32(0))?;
            let k = self.eval(key, item)?;
            // A null key matches nothing.
            let look = match k.valid {
                Some(valid) => em.b.build_and(flag, valid, "")?,
                None => flag,
            };
            em.if_then(look, || {
                let slot = hash::find(em, layout, pointer, k.value.into_int_value())?;
                let hit = em.b.build_is_not_null(slot, "hit")?;
                em.if_then(hit, || {
                    let (count, start) = hash::chain_range(em, layout, slot)?;
                    em.set(counts, item, count)?;
                    em.set(starts, item, start)
                })
            })
        })?;
        Ok((counts, starts, outputs))
    }

    /// A tile array for each payload field a probe brings, with its place in the payload: a
    /// column's values, or its validity bytes.
    fn payload_tiles(
        &self,
        payload: &[PayloadField],
    ) -> CodegenResult<Vec<(usize, crate::columns::ColumnId, TileArray<'ctx>)>> {
        payload
            .iter()
            .enumerate()
            .map(|(index, field)| {
                let info = self.query.columns.get(field.column);
                let values = match field.validity {
                    true => self
                        .em
                        .tile_array(self.em.i8().into(), &format!("{}_valid", info.name))?,
                    false => self
                        .em
                        .tile_array(self.em.value_type(info.ty), &info.name)?,
                };
                Ok((index, field.column, values))
            })
            .collect()
    }

    /// Makes the columns a probe brought available to the steps after it: each payload
    /// column's values, with its validity when it may hold nulls (zero, null, where no row
    /// matched).
    fn attach_payload(
        &mut self,
        payload: &[PayloadField],
        outputs: &[(usize, crate::columns::ColumnId, TileArray<'ctx>)],
    ) {
        let validity = |column| {
            payload
                .iter()
                .zip(outputs)
                .find(|(field, _)| field.validity && field.column == column)
                .map(|(_, (_, _, valid))| *valid)
        };
        for (field, (_, column, values)) in payload.iter().zip(outputs) {
            if !field.validity {
                let valid = validity(*column);
                self.tiles.insert(
                    *column,
                    ColumnTile {
                        values: *values,
                        valid,
                    },
                );
            }
        }
    }

    fn compute(
        &mut self,
        column: crate::columns::ColumnId,
        expr: &crate::expr::Expr,
    ) -> CodegenResult<()> {
        if self.tiles.contains_key(&column) {
            return Ok(());
        }
        self.load_columns(&expr.columns_used())?;
        let info = self.query.columns.get(column);
        let em = &self.em;
        let values = em.tile_array(em.value_type(info.ty), &info.name)?;
        let valid = if expr.nullable {
            Some(em.tile_array(em.i8().into(), &format!("{}_valid", info.name))?)
        } else {
            None
        };
        em.for_each_item(|item| {
            let v = self.eval(expr, item)?;
            let stored = if info.ty == tessera_storage::DataType::Bool {
                em.flag(v.value.into_int_value())?.into()
            } else {
                v.value
            };
            em.set(values, item, stored)?;
            if let Some(valid) = valid {
                let bit = v.valid.unwrap_or(em.i1().const_all_ones());
                em.set(valid, item, em.flag(bit)?)?;
            }
            Ok(())
        })?;
        self.tiles.insert(column, ColumnTile { values, valid });
        Ok(())
    }
}

/// A chained probe's matches per item, and where their payload comes from and goes.
struct MatchRanges<'o, 'ctx> {
    table: usize,
    counts: TileArray<'ctx>,
    starts: TileArray<'ctx>,
    /// The table's rows grouped by key (none when it brings no columns).
    rows: Option<PointerValue<'ctx>>,
    outputs: &'o [(usize, ColumnId, TileArray<'ctx>)],
}

/// The rounds of a chained probe being generated: where the next round starts, and the block
/// after the last.
struct Rounds<'ctx> {
    header: inkwell::basic_block::BasicBlock<'ctx>,
    done: inkwell::basic_block::BasicBlock<'ctx>,
    /// The matches were spread over the block through shared memory.
    spread: bool,
}

/// The position of the tile's item whose matches include match `index` (an `i64`): the last
/// position whose matches begin at or before it, found by halving steps over `begins` (the
/// `items` positions' beginnings, in order).
fn source_of<'ctx>(
    em: &tessera_runtime::Emitter<'ctx, '_>,
    begins: PointerValue<'ctx>,
    index: IntValue<'ctx>,
    items: u32,
) -> CodegenResult<IntValue<'ctx>> {
    let mut position = em.const_i32(0);
    let mut step = items.next_power_of_two() / 2;
    while step > 0 {
        let candidate =
            em.b.build_int_add(position, em.const_i32(i64::from(step)), "")?;
        let inside = em.b.build_int_compare(
            IntPredicate::ULT,
            candidate,
            em.const_i32(i64::from(items)),
            "",
        )?;
        let clamped =
            em.b.build_select(inside, candidate, em.const_i32(i64::from(items - 1)), "")?
                .into_int_value();
        let begin = em.offset_ptr(em.i64().into(), begins, clamped)?;
        let begin = em.b.build_load(em.i64(), begin, "")?.into_int_value();
        let before =
            em.b.build_int_compare(IntPredicate::SLE, begin, index, "")?;
        let take = em.b.build_and(inside, before, "")?;
        position =
            em.b.build_select(take, candidate, position, "")?
                .into_int_value();
        step /= 2;
    }
    Ok(position)
}
