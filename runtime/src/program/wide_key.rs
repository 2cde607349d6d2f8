//! The layout of a hash grouping's key when the keys' bits do not fit one 64-bit word: the
//! keys' fields (and null flags) are packed one after another into a stream of bits, cut into
//! words of [`WORD_BITS`] bits each, and every word is stored with its top bit set. A slot's
//! word is then zero only while the slot is empty, whatever the keys, so each word can be
//! claimed on its own with a compare-and-swap (`primitives::group::group_slot_wide`), and a
//! field may straddle two words. Code generation packs the words and the result decoding
//! unpacks them from the same [`parts`].

/// The key bits a word holds, below its top bit.
pub const WORD_BITS: u32 = 63;

/// The top bit every stored word has set.
pub const STORED: u64 = 1 << 63;

/// The most words a wide key takes: 1,008 bits, fifteen 64-bit keys (a 64-bit key and its
/// null flag take 65).
pub const MAX_WORDS: usize = 16;

/// The most bits a wide key holds.
pub const MAX_BITS: u32 = MAX_WORDS as u32 * WORD_BITS;

/// The words a key of `bits` bits takes.
pub fn words(bits: u32) -> usize {
    bits.div_ceil(WORD_BITS) as usize
}

/// A piece of a field in one word: bits `shift .. shift + bits` of word `word` hold the
/// field's bits `from .. from + bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub word: usize,
    pub shift: u32,
    pub bits: u32,
    pub from: u32,
}

/// The pieces of the field of `bits` bits (1 to 64) at bit `offset` of the stream.
pub fn parts(offset: u32, bits: u32) -> Vec<Part> {
    let mut parts = Vec::with_capacity(2);
    let mut from = 0;
    while from < bits {
        let at = offset + from;
        let shift = at % WORD_BITS;
        let here = (WORD_BITS - shift).min(bits - from);
        parts.push(Part {
            word: (at / WORD_BITS) as usize,
            shift,
            bits: here,
            from,
        });
        from += here;
    }
    parts
}

/// The low `bits` bits set (all 64 for 64).
pub fn low_mask(bits: u32) -> u64 {
    match bits {
        64.. => u64::MAX,
        _ => (1u64 << bits) - 1,
    }
}

/// The field of `bits` bits at bit `offset` of the stream, read from a slot's stored `words`.
pub fn field(words: &[u64], offset: u32, bits: u32) -> u64 {
    parts(offset, bits).iter().fold(0, |value, part| {
        let piece = (words[part.word] >> part.shift) & low_mask(part.bits);
        value | piece << part.from
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds the field `value` (of `bits` bits) at bit `offset` of the stream to `words`, as the
    /// generated code does.
    fn put(words: &mut [u64], offset: u32, bits: u32, value: u64) {
        for part in parts(offset, bits) {
            words[part.word] |= ((value >> part.from) & low_mask(part.bits)) << part.shift;
        }
    }

    #[test]
    fn fields_straddling_words_read_back() {
        // A 64-bit key after a 40-bit one straddles the first two words; its null flag follows.
        let mut words = vec![STORED; words(40 + 64 + 1)];
        put(&mut words, 0, 40, 0xAB_CDEF_0123);
        put(&mut words, 40, 64, u64::MAX - 5);
        put(&mut words, 104, 1, 1);
        assert_eq!(words.len(), 2);
        assert!(words.iter().all(|w| w & STORED != 0));
        assert_eq!(field(&words, 0, 40), 0xAB_CDEF_0123);
        assert_eq!(field(&words, 40, 64), u64::MAX - 5);
        assert_eq!(field(&words, 104, 1), 1);
        assert_eq!(
            parts(40, 64),
            vec![
                Part {
                    word: 0,
                    shift: 40,
                    bits: 23,
                    from: 0
                },
                Part {
                    word: 1,
                    shift: 0,
                    bits: 41,
                    from: 23
                },
            ]
        );
    }
}
