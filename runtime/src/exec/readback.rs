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
        if self.slots.iter().any(|&slot| u64::from(slot) >= slots) {
            return Err(malformed("a slot lies outside the table"));
        }
        // Each slot beside its place, as one word: sorting plain words is several times faster
        // than sorting places by a slot looked up elsewhere.
        let mut keyed: Vec<u64> = self
            .slots
            .par_iter()
            .enumerate()
            .map(|(i, &slot)| (u64::from(slot) << 32) | i as u64)
            .collect();
        keyed.par_sort_unstable();
        let order: Vec<usize> = keyed
            .par_iter()
            .map(|&k| (k & 0xffff_ffff) as usize)
            .collect();
        let columns = self
            .columns
            .par_iter()
            .zip(widths)
            .map(|(column, &width)| {
                let width = width as usize;
                let mut sorted = vec![0u8; column.len()];
                sorted
                    .par_chunks_mut(width.max(1))
                    .zip(&order)
                    .for_each(|(to, &i)| to.copy_from_slice(&column[i * width..(i + 1) * width]));
                sorted
            })
            .collect();
        Ok(PresentSlots {
            slots: keyed.par_iter().map(|&k| k >> 32).collect(),
            columns,
            gathered: true,
        })
    }
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

    #[test]
    fn a_slot_outside_the_table_is_refused() {
        let gathered = Gathered {
            slots: vec![5],
            columns: vec![vec![0]],
        };
        assert!(gathered.in_slot_order(&[1], 5).is_err());
    }
}
