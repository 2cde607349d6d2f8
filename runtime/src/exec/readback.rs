//! Reading a query's buffers back from its backend: whole, in ranges, or — for a grouped result
//! whose table is large — only the slots that hold a group, gathered on the device first. A
//! dense table of 1.75 million slots (SSB Q4.3's year × city × brand) holds 800 groups: reading
//! it whole moves 16 MB over the bus for 10 KB of answer.

use rayon::prelude::*;

use super::{Backend, RuntimeError};
use crate::result::{read_present, PresentSlots, ResultBuffers};

/// Tables of fewer bytes (flags and columns together) are read whole: gathering costs two
/// launches and a wait, which a small copy does not.
const GATHER_FROM_BYTES: u64 = 1 << 20;

/// Gathering pays while at most one slot in this many holds a group: beyond that, the gathered
/// elements with their 4-byte slot numbers, and sorting them back into slot order (on every
/// core), approach the cost of copying every slot of every buffer. A grouping of 15 M orders
/// in a table of 128 M slots (TPC-H Q18 at SF 10) is gathered.
const GATHER_AT_MOST_ONE_IN: u64 = 4;

/// The present slots of a grouped result as a backend gathered them: slot indices in any order,
/// with each column's element (of the width asked for) at that slot, in the same order.
#[derive(Debug, Default)]
pub struct Gathered {
    pub slots: Vec<u32>,
    pub columns: Vec<Vec<u8>>,
}

impl Gathered {
    /// The slots in increasing order, each column's elements moved along with them.
    fn in_slot_order(self, widths: &[u32], slots: u64) -> Result<PresentSlots, RuntimeError> {
        let count = self.slots.len();
        let malformed = |what: &str| RuntimeError::Malformed(format!("gathered groups: {what}"));
        if self.columns.len() != widths.len() {
            return Err(malformed("a column is missing"));
        }
        for (column, &width) in self.columns.iter().zip(widths) {
            if column.len() != count * width as usize {
                return Err(malformed("a column has the wrong length"));
            }
        }
        if self.slots.par_iter().any(|&slot| u64::from(slot) >= slots) {
            return Err(malformed("a slot lies outside the table"));
        }
        let order = slot_order(&self.slots);
        let columns = self
            .columns
            .par_iter()
            .zip(widths)
            // The usual widths as constants, so that each element's copy is a move of them.
            .map(|(column, &width)| match width {
                4 => permuted(4, column, &order),
                8 => permuted(8, column, &order),
                16 => permuted(16, column, &order),
                _ => permuted(width as usize, column, &order),
            })
            .collect();
        Ok(PresentSlots {
            slots: order
                .par_iter()
                .with_min_len(ELEMENTS_PER_TASK)
                .map(|&i| u64::from(self.slots[i]))
                .collect(),
            columns,
            gathered: true,
        })
    }
}

/// Elements a thread moves at a time when gathered groups are put in order.
const ELEMENTS_PER_TASK: usize = 1 << 12;

/// The `width`-byte elements of `column` in `order` (their places in it).
#[inline(always)]
fn permuted(width: usize, column: &[u8], order: &[usize]) -> Vec<u8> {
    let mut moved = vec![0u8; column.len()];
    if width == 0 {
        return moved;
    }
    moved
        .par_chunks_exact_mut(width)
        .with_min_len(ELEMENTS_PER_TASK)
        .zip(order)
        .for_each(|(to, &i)| to.copy_from_slice(&column[i * width..(i + 1) * width]));
    moved
}

/// Slots a warp of the device's gathering looks at together: it writes the present ones among
/// them side by side, in increasing order, at a place it takes for all of them.
const SLOTS_PER_RUN: u32 = 32;

/// The places in `slots` (distinct slot numbers) in the order of their slots. Gathered on the
/// device, the slots come in runs, one per group of [`SLOTS_PER_RUN`], each in order: ordering
/// the runs orders them all, a sort of many times fewer items than the slots. Slots that do
/// not come so are sorted whole.
fn slot_order(slots: &[u32]) -> Vec<usize> {
    let group = |slot: u32| slot / SLOTS_PER_RUN;
    let starts_run = |i: usize| i == 0 || group(slots[i]) != group(slots[i - 1]);
    let runs_in_order = (1..slots.len())
        .into_par_iter()
        .all(|i| starts_run(i) || slots[i] > slots[i - 1]);
    if runs_in_order {
        let starts: Vec<usize> = (0..slots.len())
            .into_par_iter()
            .filter(|&i| starts_run(i))
            .collect();
        // Each run's group beside its number among the runs, as one word.
        let mut runs: Vec<u64> = starts
            .par_iter()
            .enumerate()
            .map(|(run, &start)| (u64::from(group(slots[start])) << 32) | run as u64)
            .collect();
        runs.par_sort_unstable();
        if runs
            .par_windows(2)
            .all(|pair| pair[0] >> 32 != pair[1] >> 32)
        {
            // Each run's places, written where the runs before it in slot order end.
            let mut order = vec![0usize; slots.len()];
            let mut rest = order.as_mut_slice();
            let mut places = Vec::with_capacity(runs.len());
            for &word in &runs {
                let run = (word & 0xffff_ffff) as usize;
                let from = starts[run];
                let to = starts.get(run + 1).copied().unwrap_or(slots.len());
                let (place, after) = std::mem::take(&mut rest).split_at_mut(to - from);
                places.push((place, from));
                rest = after;
            }
            places
                .into_par_iter()
                .with_min_len(ELEMENTS_PER_TASK / 8)
                .for_each(|(place, from)| {
                    for (at, i) in place.iter_mut().zip(from..) {
                        *at = i;
                    }
                });
            return order;
        }
    }
    // Each slot beside its place, as one word: sorting plain words is several times faster
    // than sorting places by a slot looked up elsewhere.
    let mut keyed: Vec<u64> = slots
        .par_iter()
        .enumerate()
        .map(|(i, &slot)| (u64::from(slot) << 32) | i as u64)
        .collect();
    keyed.par_sort_unstable();
    keyed
        .par_iter()
        .map(|&k| (k & 0xffff_ffff) as usize)
        .collect()
}

/// A query's buffers (by index: their addresses and sizes) on the backend that ran it.
pub(super) struct QueryBuffers<'a> {
    pub backend: &'a mut dyn Backend,
    pub addresses: &'a [u64],
    pub sizes: &'a [u64],
}

impl QueryBuffers<'_> {
    fn address(&self, buffer: usize) -> Result<u64, RuntimeError> {
        self.addresses
            .get(buffer)
            .copied()
            .ok_or_else(|| RuntimeError::Malformed(format!("no buffer {buffer}")))
    }

    fn size(&self, buffer: usize) -> Result<u64, RuntimeError> {
        self.sizes
            .get(buffer)
            .copied()
            .ok_or_else(|| RuntimeError::Malformed(format!("no buffer {buffer}")))
    }
}

impl ResultBuffers for QueryBuffers<'_> {
    fn read(&mut self, buffer: usize, range: Option<(u64, u64)>) -> Result<Vec<u8>, RuntimeError> {
        let size = self.size(buffer)?;
        let (offset, bytes) = range.unwrap_or((0, size));
        let address = self.address(buffer)?;
        self.backend
            .read(address, offset, bytes.min(size.saturating_sub(offset)))
    }

    fn present(
        &mut self,
        flags: usize,
        flag_bytes: u32,
        slots: u64,
        columns: &[(usize, u32)],
    ) -> Result<PresentSlots, RuntimeError> {
        let mut whole = self.size(flags)?;
        for (buffer, _) in columns {
            whole += self.size(*buffer)?;
        }
        if whole >= GATHER_FROM_BYTES {
            let on_device = columns
                .iter()
                .map(|&(buffer, width)| Ok((self.address(buffer)?, width)))
                .collect::<Result<Vec<_>, RuntimeError>>()?;
            let most = slots / GATHER_AT_MOST_ONE_IN;
            let flags_address = self.address(flags)?;
            let gathered =
                self.backend
                    .gather_present(flags_address, flag_bytes, slots, &on_device, most)?;
            if let Some(gathered) = gathered {
                let widths: Vec<u32> = columns.iter().map(|&(_, width)| width).collect();
                return gathered.in_slot_order(&widths, slots);
            }
        }
        read_present(self, flags, flag_bytes, slots, columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_slots_come_back_in_order_with_their_elements() {
        let gathered = Gathered {
            slots: vec![70, 3, 41],
            columns: vec![
                [7u64, 1, 4].iter().flat_map(|v| v.to_le_bytes()).collect(),
                vec![b'c', b'a', b'b'],
            ],
        };
        let present = gathered.in_slot_order(&[8, 1], 100).expect("in order");
        assert_eq!(present.slots, vec![3, 41, 70]);
        let firsts: Vec<u64> = present.columns[0]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("eight bytes")))
            .collect();
        assert_eq!(firsts, vec![1, 4, 7]);
        assert_eq!(present.columns[1], b"abc");
    }

    /// The order of `slots` as a sort gives it.
    fn sorted_order(slots: &[u32]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..slots.len()).collect();
        order.sort_by_key(|&i| slots[i]);
        order
    }

    #[test]
    fn runs_of_gathered_slots_are_ordered_by_their_groups() {
        // Runs of the groups 3, 0, 2 and 1 of 32 slots, each in order, as warps write them.
        let slots = vec![97, 100, 127, 0, 5, 31, 64, 70, 40];
        let order = slot_order(&slots);
        assert_eq!(order, sorted_order(&slots));
        assert_eq!(order, vec![3, 4, 5, 8, 6, 7, 0, 1, 2]);
    }

    #[test]
    fn slots_not_in_runs_are_sorted_whole() {
        // Out of order within a group; a group in two runs; no runs at all.
        for slots in [
            vec![5u32, 3, 40, 1],
            vec![1, 2, 40, 3, 4],
            vec![900, 7, 64, 33, 1000, 2],
            vec![],
            vec![9],
        ] {
            assert_eq!(slot_order(&slots), sorted_order(&slots), "{slots:?}");
        }
    }

    #[test]
    fn a_slot_outside_the_table_is_refused() {
        let gathered = Gathered {
            slots: vec![5],
            columns: vec![vec![0]],
        };
        assert!(gathered.in_slot_order(&[1], 5).is_err());
    }
}
