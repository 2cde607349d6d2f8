//! The steps of a pipeline on one tile: filters clear flags, probes look keys up in hash tables
//! (bringing the payload into registers), computed columns are evaluated into tile arrays.

use inkwell::values::{IntValue, PointerValue};
use tessera_grammar::ast::JoinKind;
use tessera_grammar::Diagnostic;
use tessera_runtime::emit::Item;
use tessera_runtime::emit::TileArray;
use tessera_runtime::primitives::hash::{self, HashKind, HashTableLayout};
use tessera_runtime::CodegenResult;

use crate::physical::Step;

use super::kernel::{ColumnTile, Kernel};
use super::query::QueryContext;
use super::sinks::{SinkPlan, SinkState};

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
                kind,
                selectivity,
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

    fn probe(
        &mut self,
        qc: &QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
        kind: JoinKind,
    ) -> CodegenResult<()> {
        self.load_columns(&key.columns_used())?;
        let (layout, buffer) = &qc.tables[table];
        let pointer = self.buffer(*buffer)?;
        let payload = match kind {
            JoinKind::Inner => qc.query.hash_tables[table].payload.clone(),
            _ => Vec::new(),
        };
        let outputs = self.payload_tiles(&payload)?;
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
                let k = self.eval(key, item)?;
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
        for (_, id, values) in outputs {
            self.tiles.insert(
                id,
                ColumnTile {
                    values,
                    valid: None,
                },
            );
        }
        Ok(())
    }

    /// Probes a set of keys, without branching: a bit per key keeps the table small enough for
    /// L1, so every item reads its word (rejected items the first one) and the loads of all
    /// items are in flight together.
    fn probe_key_set(
        &self,
        layout: &HashTableLayout,
        pointer: PointerValue<'ctx>,
        key: &crate::expr::Expr,
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
            let k = self.eval(key, item)?;
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
        key: &crate::expr::Expr,
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
            let k = self.eval(key, item)?;
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
        key: &crate::expr::Expr,
        kind: JoinKind,
        outputs: &[(usize, crate::columns::ColumnId, TileArray<'ctx>)],
    ) -> CodegenResult<()> {
        let em = &self.em;
        em.for_each_item(|item: Item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            for (_, _, values) in outputs {
                em.set(*values, item, values.elem.const_zero())?;
            }
            let k = self.eval(key, item)?;
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

    /// Probes a chained table, whose key may have several rows: each item's list of matches
    /// is walked one match per round, and every round runs `rest` and the sink over the tile,
    /// the rows with a match in that round selected and carrying its payload. Rounds go on
    /// while any thread of the block has a match left (the same in every thread, so the
    /// barriers of the steps and sink inside are reached by all).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn probe_chained(
        &mut self,
        qc: &mut QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
        selectivity: f64,
        rest: &[Step],
        sink: &SinkPlan,
        state: &SinkState<'ctx>,
    ) -> Result<(), Diagnostic> {
        let span = self.query.span;
        let internal = |e: tessera_runtime::CodegenError| Diagnostic::internal(span, e.to_string());
        let (cursor, outputs) = self.first_matches(qc, table, key).map_err(internal)?;
        let em = &self.em;
        let has_match = |item| -> CodegenResult<(IntValue<'ctx>, IntValue<'ctx>)> {
            let tag = em.get(cursor, item)?.into_int_value();
            let live =
                em.b.build_int_compare(inkwell::IntPredicate::NE, tag, em.const_i32(0), "")?;
            Ok((tag, live))
        };
        let header = em.ctx.append_basic_block(em.function, "chain_round");
        let round = em.ctx.append_basic_block(em.function, "chain_match");
        let done = em.ctx.append_basic_block(em.function, "chain_done");
        let next_round = || -> CodegenResult<()> {
            em.b.build_unconditional_branch(header)?;
            em.b.position_at_end(header);
            let left = em.alloca(em.i1().into(), "matches_left")?;
            em.b.build_store(left, em.i1().const_zero())?;
            em.for_each_item(|item| {
                let (_, live) = has_match(item)?;
                let before = em.b.build_load(em.i1(), left, "")?.into_int_value();
                em.b.build_store(left, em.b.build_or(before, live, "")?)?;
                Ok(())
            })?;
            let left = em.b.build_load(em.i1(), left, "")?.into_int_value();
            let any = em.block_any(left)?;
            em.b.build_conditional_branch(any, round, done)?;
            em.b.position_at_end(round);
            let (layout, _) = &qc.tables[table];
            let rows = qc.chain_rows[table]
                .map(|b| self.buffer(b))
                .transpose()?
                .ok_or_else(|| tessera_runtime::CodegenError::Invalid("no chained rows".into()))?;
            em.for_each_item(|item| {
                let (tag, live) = has_match(item)?;
                em.set(self.flags, item, em.flag(live)?)?;
                for (_, _, values) in &outputs {
                    em.set(*values, item, values.elem.const_zero())?;
                }
                em.if_then(live, || {
                    let (place, next) = hash::chain_step(em, layout, rows, tag)?;
                    for (index, _, values) in &outputs {
                        let (field, ty) = hash::row_field_ptr(em, layout, place, *index)?;
                        let value = em.b.build_load(ty, field, "")?;
                        em.set(*values, item, value)?;
                    }
                    em.set(cursor, item, next)
                })
            })
        };
        next_round().map_err(internal)?;
        for (_, id, values) in outputs {
            self.tiles.insert(
                id,
                ColumnTile {
                    values,
                    valid: None,
                },
            );
        }
        self.selected *= selectivity.min(1.0);
        self.run_steps(qc, rest, sink, state)?;
        let em = &self.em;
        em.b.build_unconditional_branch(header)
            .map_err(|e| internal(e.into()))?;
        em.b.position_at_end(done);
        Ok(())
    }

    /// Each selected item's first match in a chained table (a row number plus one; 0 for
    /// none), and the tile arrays its payload goes into.
    #[allow(clippy::type_complexity)]
    fn first_matches(
        &mut self,
        qc: &QueryContext<'_>,
        table: usize,
        key: &crate::expr::Expr,
    ) -> CodegenResult<(
        TileArray<'ctx>,
        Vec<(usize, crate::columns::ColumnId, TileArray<'ctx>)>,
    )> {
        self.load_columns(&key.columns_used())?;
        let (layout, buffer) = &qc.tables[table];
        let pointer = self.buffer(*buffer)?;
        let outputs = self.payload_tiles(&qc.query.hash_tables[table].payload)?;
        let em = &self.em;
        let cursor = em.tile_array(em.i32().into(), "chain")?;
        em.for_each_item(|item| {
            let flag = em.truth(em.get(self.flags, item)?.into_int_value())?;
            em.set(cursor, item, em.const_i32(0))?;
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
                    let head = hash::chain_head(em, layout, slot)?;
                    em.set(cursor, item, head)
                })
            })
        })?;
        Ok((cursor, outputs))
    }

    /// A tile array for each payload column a probe brings, with its place in the payload.
    fn payload_tiles(
        &self,
        payload: &[crate::columns::ColumnId],
    ) -> CodegenResult<Vec<(usize, crate::columns::ColumnId, TileArray<'ctx>)>> {
        payload
            .iter()
            .enumerate()
            .map(|(index, id)| {
                let info = self.query.columns.get(*id);
                let values = self
                    .em
                    .tile_array(self.em.value_type(info.ty), &info.name)?;
                Ok((index, *id, values))
            })
            .collect()
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
