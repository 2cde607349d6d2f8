//! Deterministic random numbers for the generators: a small SplitMix64 stream per row, seeded
//! from the table and the row's index, so a row's values depend on nothing else (not the thread
//! that makes it, not the chunk it lands in).

/// Which table a stream belongs to; part of every row's seed.
#[derive(Clone, Copy)]
pub(crate) enum Stream {
    Part = 1,
    Supplier = 2,
    Customer = 3,
    Lineorder = 4,
}

pub(crate) struct RowRng {
    state: u64,
}

/// SplitMix64's output function: a bijection on `u64` that scatters nearby inputs.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl RowRng {
    pub(crate) fn new(stream: Stream, row: u64) -> RowRng {
        RowRng {
            state: mix((stream as u64).wrapping_mul(0xd1b5_4a32_d192_ed03) ^ mix(row)),
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift: the bias is below `n / 2^64`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `low..=high`.
    pub(crate) fn between(&mut self, low: i64, high: i64) -> i64 {
        let span = (high - low + 1) as u128;
        low + ((u128::from(self.next_u64()) * span) >> 64) as i64
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_independent_repeatable_streams() {
        let first: Vec<u64> = (0..4)
            .map(|row| RowRng::new(Stream::Part, row).next_u64())
            .collect();
        let again: Vec<u64> = (0..4)
            .map(|row| RowRng::new(Stream::Part, row).next_u64())
            .collect();
        assert_eq!(first, again);
        let other = RowRng::new(Stream::Supplier, 0).next_u64();
        assert!(!first.contains(&other));
        assert!(first.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn between_covers_the_range_evenly() {
        let mut rng = RowRng::new(Stream::Lineorder, 7);
        let mut counts = [0u32; 11];
        for _ in 0..110_000 {
            let x = rng.between(0, 10);
            counts[x as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }
}
