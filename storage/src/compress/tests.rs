//! Round trips of every scheme over the distributions a column meets, the exact word layout that
//! a GPU decoder will rely on, the sizes the thesis leads one to expect, and corrupt input.

use super::*;

/// xorshift64*: deterministic, and enough spread for test data.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn next_i32(&mut self) -> i32 {
        (self.next_u64() >> 32) as i32
    }

    fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * u64::from(n)) >> 32) as u32
    }
}

const LENGTHS: [usize; 7] = [0, 1, 127, 128, 129, 1000, 128 * 1000 + 5];

fn random(len: usize, seed: u64) -> Vec<i32> {
    let mut rng = XorShift(seed | 1);
    (0..len).map(|_| rng.next_i32()).collect()
}

/// Encodes in every scheme and checks the structure, `decode` and `decode_block` against `values`.
fn round_trip(values: &[i32]) {
    for scheme in Scheme::ALL {
        let encoded = encode(values, scheme);
        let context = format!("{scheme}, {} values", values.len());
        assert_eq!(encoded.scheme, scheme, "{context}");
        assert_eq!(encoded.len, values.len(), "{context}");
        if !scheme.has_blocks() {
            assert!(encoded.block_starts.is_empty(), "{context}");
        }
        if scheme.is_fixed_width() {
            assert!(encoded.width <= 32, "{context}");
            assert_eq!(
                encoded.data.len(),
                (values.len() * encoded.width as usize).div_ceil(32),
                "{context}"
            );
            for (i, &v) in values.iter().enumerate().step_by(97) {
                let code = code_at(&encoded.data, encoded.width, i);
                let decoded = match scheme {
                    Scheme::Pack => (encoded.dictionary[0] as u32).wrapping_add(code) as i32,
                    _ => encoded.dictionary[code as usize],
                };
                assert_eq!(decoded, v, "{context}, value {i}");
            }
        }
        if scheme.has_blocks() {
            assert_eq!(
                encoded.block_starts.len(),
                encoded.blocks() + 1,
                "{context}"
            );
            assert_eq!(encoded.block_starts[0], 0, "{context}");
            assert_eq!(
                *encoded.block_starts.last().unwrap() as usize,
                encoded.data.len(),
                "{context}"
            );
            assert!(
                encoded.block_starts.windows(2).all(|w| w[0] <= w[1]),
                "{context}"
            );
        }
        assert_eq!(decode(&encoded).as_deref(), Ok(values), "{context}");
        let mut block = [0; BLOCK_LEN];
        for (b, expected) in values.chunks(BLOCK_LEN).enumerate() {
            decode_block(&encoded, b, &mut block).unwrap();
            assert_eq!(&block[..expected.len()], expected, "{context}, block {b}");
        }
    }
}

#[test]
fn random_values_round_trip_at_every_length() {
    for (i, &len) in LENGTHS.iter().enumerate() {
        round_trip(&random(len, 0x5eed + i as u64));
    }
}

#[test]
fn narrow_random_values_round_trip_at_every_length() {
    // Every width from 1 to 31 bits, so that values straddle words at every offset.
    for width in 1..32u32 {
        let mut rng = XorShift(u64::from(width) * 7919);
        for &len in &LENGTHS[..6] {
            let values: Vec<i32> = (0..len)
                .map(|_| (rng.next_u64() as u32 >> (32 - width)) as i32 - 1000)
                .collect();
            round_trip(&values);
        }
    }
}

#[test]
fn sorted_values_round_trip() {
    for &len in &LENGTHS {
        let mut values = random(len, 17);
        values.sort_unstable();
        round_trip(&values);
        round_trip(&(0..len as i32).map(|i| i * 3 - 7).collect::<Vec<_>>());
        // Descending runs give negative deltas, which GPU-DFOR takes through its reference.
        round_trip(&(0..len as i32).rev().collect::<Vec<_>>());
    }
}

#[test]
fn nearly_sorted_values_round_trip() {
    let mut rng = XorShift(99);
    for &len in &LENGTHS {
        let mut values: Vec<i32> = (0..len as i32).map(|i| i * 10).collect();
        for _ in 0..len / 20 {
            let (a, b) = (
                rng.below(len as u32) as usize,
                rng.below(len as u32) as usize,
            );
            values.swap(a, b);
        }
        round_trip(&values);
        let jittered: Vec<i32> = (0..len as i32)
            .map(|i| i * 4 + rng.below(9) as i32 - 4)
            .collect();
        round_trip(&jittered);
    }
}

#[test]
fn skewed_values_with_rare_outliers_round_trip() {
    let mut rng = XorShift(2024);
    for &len in &LENGTHS {
        let values: Vec<i32> = (0..len)
            .map(|_| match rng.below(1000) {
                0 => i32::MAX - rng.below(10) as i32,
                1 => i32::MIN + rng.below(10) as i32,
                _ => rng.below(16) as i32,
            })
            .collect();
        round_trip(&values);
    }
}

#[test]
fn equal_values_round_trip_in_headers_alone() {
    for &len in &LENGTHS {
        for value in [0, -5, i32::MIN, i32::MAX] {
            let values = vec![value; len];
            round_trip(&values);
            // Width 0 everywhere: a GPU-FOR block is its two header words, GPU-DFOR adds the base.
            assert_eq!(
                encode(&values, Scheme::For).data.len(),
                2 * len.div_ceil(BLOCK_LEN)
            );
            assert_eq!(
                encode(&values, Scheme::Dfor).data.len(),
                3 * len.div_ceil(BLOCK_LEN)
            );
        }
    }
}

#[test]
fn full_i32_range_round_trips() {
    for &len in &LENGTHS[1..] {
        let mut values = random(len, 4242);
        values[0] = i32::MIN;
        values[len / 2] = i32::MAX;
        *values.last_mut().unwrap() = i32::MIN;
        round_trip(&values);
        let alternating: Vec<i32> = (0..len)
            .map(|i| if i % 2 == 0 { i32::MIN } else { i32::MAX })
            .collect();
        round_trip(&alternating);
        if len >= BLOCK_LEN {
            let encoded = encode(&alternating, Scheme::For);
            assert_eq!(encoded.data[1], 32 | 32 << 8 | 32 << 16 | 32 << 24);
        }
    }
}

#[test]
fn layout_matches_the_module_documentation() {
    // 0..128 plus 100: reference 100, miniblocks of 0..32, 32..64, 64..96, 96..128 need 5, 6, 7
    // and 7 bits.
    let values: Vec<i32> = (0..128).map(|i| i + 100).collect();
    let encoded = encode(&values, Scheme::For);
    assert_eq!(encoded.block_starts, vec![0, 2 + 5 + 6 + 7 + 7]);
    let data = &encoded.data;
    assert_eq!(data[0], 100);
    assert_eq!(data[1], 5 | 6 << 8 | 7 << 16 | 7 << 24);
    // Miniblock 0, width 5: values 0..6 fill bits 0..30, value 6 straddles into word 3.
    let expected_word_2 = (0..7u32).fold(0, |w, i| w | i << (5 * i));
    assert_eq!(data[2], expected_word_2);
    assert_eq!(data[3] & 0b111, 6 >> 2);
    // Miniblock 1 starts at word 2 + 5 with the value 32 - 0 = 32 in its low 6 bits.
    assert_eq!(data[7] & 0b11_1111, 32);

    let dfor = encode(&values, Scheme::Dfor);
    assert_eq!(dfor.data[0], 100, "base");
    assert_eq!(dfor.data[1], 0, "reference: the first delta is 0");
    assert_eq!(dfor.data[2], 1 | 1 << 8 | 1 << 16 | 1 << 24);
    assert_eq!(dfor.data[3], !1, "deltas 0, 1, 1, …");
    assert_eq!(dfor.data.len(), 3 + 4);

    let none = encode(&[-1, 7], Scheme::None);
    assert_eq!(none.data, vec![u32::MAX, 7]);
    assert!(none.block_starts.is_empty());
}

#[test]
fn padding_costs_nothing_and_decodes_harmlessly() {
    let values: Vec<i32> = (0..129).map(|i| 1_000_000 - i * 1000).collect();
    for scheme in [Scheme::For, Scheme::Dfor] {
        let encoded = encode(&values, scheme);
        let last = &encoded.data[encoded.block_starts[1] as usize..];
        let header = if scheme == Scheme::Dfor { 1 } else { 0 };
        assert_eq!(last[header + 1], 0, "{scheme}: one value needs no bits");
        assert_eq!(last.len(), header + 2, "{scheme}");
        let mut block = [1; BLOCK_LEN];
        decode_block(&encoded, 1, &mut block).unwrap();
        assert_eq!(block[0], values[128], "{scheme}");
    }
}

#[test]
fn sorted_column_is_smaller_with_dfor_than_with_for() {
    let values: Vec<i32> = (0..1_000_000).collect();
    let for_ = encode(&values, Scheme::For);
    let dfor = encode(&values, Scheme::Dfor);
    println!(
        "sorted 0..1M: FOR {:.3} bits per value, DFOR {:.3} bits per value",
        for_.bits_per_value(),
        dfor.bits_per_value()
    );
    assert!(dfor.bytes() < for_.bytes());
    // Deltas of 0 and 1 take one bit: base, reference, widths, four words, one block start.
    assert!(dfor.bits_per_value() <= 2.01, "{}", dfor.bits_per_value());
    assert_eq!(choose(&values).scheme, Scheme::Dfor);
    assert_eq!(decode(&dfor).unwrap(), values);
}

#[test]
fn sixteen_bit_values_take_about_seventeen_bits_with_for() {
    let mut rng = XorShift(16);
    let values: Vec<i32> = (0..1_000_000).map(|_| rng.below(1 << 16) as i32).collect();
    let for_ = encode(&values, Scheme::For);
    println!(
        "U(0, 2^16), 1M values: FOR {:.3} bits per value",
        for_.bits_per_value()
    );
    // 16 bits of payload and 3 words of overhead per 128 values.
    assert!(for_.bits_per_value() <= 17.0, "{}", for_.bits_per_value());
    assert_eq!(decode(&for_).unwrap(), values);
    // Spread evenly over their range, they gain nothing from the headers: one width for the
    // column is smaller.
    let pack = encode(&values, Scheme::Pack);
    assert_eq!(pack.width, 16);
    assert_eq!(pack.bytes(), (1_000_000 * 16 / 32 + 1) * 4);
    assert_eq!(choose(&values).scheme, Scheme::Pack);
}

#[test]
fn fixed_width_layout_matches_the_module_documentation() {
    // Differences 0..40 from the reference -3 need 6 bits; code 5 straddles words 0 and 1.
    let values: Vec<i32> = (0..40).map(|i| i - 3).collect();
    let pack = encode(&values, Scheme::Pack);
    assert_eq!((pack.width, pack.dictionary.clone()), (6, vec![-3]));
    assert_eq!(pack.data.len(), (40 * 6usize).div_ceil(32));
    assert_eq!(pack.data[0], (0..6u32).fold(0, |w, i| w | i << (6 * i)));
    assert_eq!(pack.data[1] & 0b1111, 5 >> 2);
    assert!(pack.block_starts.is_empty());

    // Three distinct values far apart: their ranks take two bits.
    let values = [19_981_231, 19_920_101, 19_950_615, 19_920_101, 19_981_231];
    let dict = encode(&values, Scheme::Dict);
    assert_eq!(dict.dictionary, vec![19_920_101, 19_950_615, 19_981_231]);
    assert_eq!(dict.width, 2);
    // Codes 2, 0, 1, 0, 2 at two bits each.
    assert_eq!(dict.data, vec![0b10_00_01_00_10]);
    assert_eq!(decode(&dict).unwrap(), values);

    // One value: width 0, no words at all.
    let equal = encode(&[7; 300], Scheme::Pack);
    assert_eq!((equal.width, equal.data.len(), equal.bytes()), (0, 0, 4));
    assert_eq!(decode(&equal).unwrap(), vec![7; 300]);
}

#[test]
fn dates_as_yyyymmdd_choose_a_dictionary() {
    // Seven years of 28-day months in `yyyymmdd`: 2,352 values over a range of 61,000.
    let days: Vec<i32> = (1992..1999)
        .flat_map(|year| {
            (1..=12)
                .flat_map(move |month| (1..=28).map(move |day| year * 10_000 + month * 100 + day))
        })
        .collect();
    let mut rng = XorShift(1998);
    let values: Vec<i32> = (0..200_000)
        .map(|_| days[rng.below(days.len() as u32) as usize])
        .collect();
    let chosen = choose(&values);
    assert_eq!(chosen.scheme, Scheme::Dict);
    assert_eq!(chosen.width, 12, "{} distinct values", days.len());
    assert_eq!(encode(&values, Scheme::Pack).width, 16);
    assert_eq!(decode(&chosen).unwrap(), values);
}

#[test]
fn auto_takes_blocks_only_when_they_save_a_bit_a_value() {
    // Blocks of 128 values under 2^16, some of them under 2^8: the narrow ones make GPU-FOR
    // smaller than one width for the column, by a little when they are few.
    let mut rng = XorShift(8);
    let column = |narrow_every: u32, rng: &mut XorShift| -> Vec<i32> {
        (0..1000u32)
            .flat_map(|block| {
                let bits = if block % narrow_every == 0 { 8 } else { 16 };
                (0..BLOCK_LEN).map(move |_| bits)
            })
            .map(|bits| rng.below(1 << bits) as i32)
            .collect()
    };
    let few = column(10, &mut rng);
    let (pack, for_) = (encode(&few, Scheme::Pack), encode(&few, Scheme::For));
    assert!(
        for_.bytes() < pack.bytes(),
        "{} {}",
        for_.bytes(),
        pack.bytes()
    );
    assert!(for_.bytes() + few.len() / 8 > pack.bytes());
    assert_eq!(choose(&few).scheme, Scheme::Pack);
    let many = column(2, &mut rng);
    assert_eq!(choose(&many).scheme, Scheme::For);
    assert_eq!(decode(&choose(&many)).unwrap(), many);
}

#[test]
fn auto_takes_no_dictionary_of_more_than_its_limit() {
    // Every other value of a range: a dictionary would save a bit but hold too many entries.
    let values: Vec<i32> = (0..(AUTO_DICTIONARY_ENTRIES as i32 + 10) * 2)
        .step_by(2)
        .rev()
        .collect();
    let chosen = choose(&values);
    assert_ne!(chosen.scheme, Scheme::Dict);
    let dict = encode(&values, Scheme::Dict);
    assert_eq!(dict.dictionary.len(), AUTO_DICTIONARY_ENTRIES + 10);
    assert_eq!(decode(&dict).unwrap(), values);
}

#[test]
fn choose_keeps_full_range_random_values_plain() {
    for &len in &LENGTHS {
        let values = random(len, 31337);
        let chosen = choose(&values);
        assert_eq!(chosen.scheme, Scheme::None, "{len} values");
        assert_eq!(decode(&chosen).unwrap(), values);
    }
}

/// What `choose` must pick, found the slow way: every scheme encoded and weighed by its bytes
/// under the same rules.
fn smallest_encoded(values: &[i32]) -> Encoded {
    let margin = values.len() * BLOCKS_MUST_SAVE_BITS / 8;
    let pack = encode(values, Scheme::Pack);
    let dict = encode(values, Scheme::Dict);
    let small_dict = dict.dictionary.len() <= AUTO_DICTIONARY_ENTRIES && dict.width < pack.width;
    let mut best = encode(values, Scheme::None);
    let mut best_bytes = best.bytes();
    let candidates = [
        Some(pack),
        small_dict.then_some(dict),
        Some(encode(values, Scheme::For)),
        Some(encode(values, Scheme::Dfor)),
    ];
    for candidate in candidates.into_iter().flatten() {
        let handicap = if candidate.scheme.has_blocks() {
            margin
        } else {
            0
        };
        if candidate.bytes() + handicap < best_bytes {
            best_bytes = candidate.bytes() + handicap;
            best = candidate;
        }
    }
    best
}

#[test]
fn choose_sizes_every_scheme_as_encoding_it_would() {
    let mut rng = XorShift(424_242);
    for &len in &LENGTHS {
        let columns: Vec<(&str, Vec<i32>)> = vec![
            ("random", random(len, 7)),
            (
                "narrow",
                (0..len).map(|_| rng.below(1 << 12) as i32).collect(),
            ),
            (
                "few distinct",
                (0..len).map(|_| rng.below(40) as i32 * 1000).collect(),
            ),
            ("sorted", (0..len as i32).map(|i| i * 3).collect()),
            ("equal", vec![-7; len]),
            (
                "dates",
                (0..len)
                    .map(|_| 19_920_101 + rng.below(7) as i32 * 10_000 + rng.below(12) as i32 * 100)
                    .collect(),
            ),
        ];
        for (name, values) in columns {
            for scheme in [Scheme::For, Scheme::Dfor] {
                let bytes = encode(&values, scheme).bytes();
                assert_eq!(
                    blocks_bytes(&values, scheme),
                    Some(bytes),
                    "{name} {scheme}"
                );
            }
            let fixed = fixed::FixedCandidates::of(&values, AUTO_DICTIONARY_ENTRIES);
            assert_eq!(
                fixed.pack_bytes(),
                encode(&values, Scheme::Pack).bytes(),
                "{name}"
            );
            if let Some(bytes) = fixed.dict_bytes() {
                assert_eq!(bytes, encode(&values, Scheme::Dict).bytes(), "{name}");
            }
            let chosen = choose(&values);
            let expected = smallest_encoded(&values);
            assert_eq!(chosen.scheme, expected.scheme, "{name}, {len} values");
            assert_eq!(chosen.bytes(), expected.bytes(), "{name}, {len} values");
            assert_eq!(decode(&chosen).unwrap(), values, "{name}, {len} values");
        }
    }
}

#[test]
fn bytes_and_bits_per_value_count_data_and_block_starts() {
    let encoded = encode(&[5; 256], Scheme::For);
    assert_eq!(encoded.bytes(), (4 + 3) * 4);
    assert_eq!(encoded.bits_per_value(), 7.0 * 32.0 / 256.0);
    assert_eq!(encode(&[], Scheme::Dfor).bits_per_value(), 0.0);
    assert_eq!(encode(&[1, 2, 3], Scheme::None).bits_per_value(), 32.0);
}

/// Every column of `corrupt` fails to decode whole, and decoding any block of it does not panic.
fn refused_whole_and_by_block(scheme: Scheme, corrupt: &[(&str, Encoded)]) {
    for (what, encoded) in corrupt {
        let result = decode(encoded);
        assert!(result.is_err(), "{scheme}, {what}: decoded to {result:?}");
        let mut block = [0; BLOCK_LEN];
        for b in 0..encoded.blocks() + 2 {
            let _ = decode_block(encoded, b, &mut block);
        }
    }
}

#[test]
fn corrupt_columns_are_errors_not_panics() {
    let values: Vec<i32> = (0..1000).map(|i| i * 37 % 1001).collect();
    for scheme in [Scheme::For, Scheme::Dfor] {
        let good = encode(&values, scheme);
        let header = if scheme == Scheme::Dfor { 1 } else { 0 };
        let mut corrupt: Vec<(&str, Encoded)> = Vec::new();

        let mut e = good.clone();
        e.block_starts.to_mut()[3] = e.data.len() as u32 + 50;
        corrupt.push(("block start past the data", e));

        let mut e = good.clone();
        e.block_starts.to_mut().swap(2, 3);
        corrupt.push(("block starts out of order", e));

        let mut e = good.clone();
        let last = e.data.len() - 1;
        e.data.to_mut().truncate(last);
        corrupt.push(("truncated data", e));

        let mut e = good.clone();
        e.data.to_mut().push(0);
        corrupt.push(("trailing data", e));

        let mut e = good.clone();
        e.block_starts.to_mut().pop();
        corrupt.push(("missing block start", e));

        let mut e = good.clone();
        e.len += BLOCK_LEN;
        corrupt.push(("length beyond the blocks", e));

        let mut e = good.clone();
        e.block_starts.to_mut()[0] = 1;
        corrupt.push(("words before the first block", e));

        let mut e = good.clone();
        e.data.to_mut()[header + 1] = 33;
        corrupt.push(("bit width over 32", e));

        let mut e = good.clone();
        e.data.to_mut()[header + 1] = 0xffff_ffff;
        corrupt.push(("bit widths of 255", e));

        let mut e = good.clone();
        e.data.to_mut()[header + 1] = e.data.to_mut()[header + 1].wrapping_add(1);
        corrupt.push(("widths disagree with the block size", e));

        let mut e = good.clone();
        e.data.to_mut().clear();
        e.block_starts.to_mut().fill(0);
        corrupt.push(("empty blocks", e));

        refused_whole_and_by_block(scheme, &corrupt);
    }

    let mut none = encode(&values, Scheme::None);
    none.data.to_mut().pop();
    assert!(decode(&none).is_err());
    let mut none = encode(&values, Scheme::None);
    none.block_starts.to_mut().push(0);
    assert!(decode(&none).is_err());

    for scheme in [Scheme::Pack, Scheme::Dict] {
        let good = encode(&values, scheme);
        let mut corrupt: Vec<(&str, Encoded)> = Vec::new();
        let mut e = good.clone();
        e.width = 33;
        corrupt.push(("width over 32", e));
        let mut e = good.clone();
        e.data.to_mut().pop();
        corrupt.push(("truncated data", e));
        let mut e = good.clone();
        e.data.to_mut().push(0);
        corrupt.push(("trailing data", e));
        let mut e = good.clone();
        e.dictionary.clear();
        corrupt.push(("no dictionary", e));
        let mut e = good.clone();
        e.block_starts = vec![0, 1].into();
        corrupt.push(("block starts", e));
        if scheme == Scheme::Dict {
            let mut e = good.clone();
            e.dictionary.truncate(10);
            corrupt.push(("codes past the dictionary", e));
        }
        refused_whole_and_by_block(scheme, &corrupt);
    }

    let good = encode(&values, Scheme::For);
    let mut block = [0; BLOCK_LEN];
    assert_eq!(
        decode_block(&good, 8, &mut block),
        Err(CompressError::NoSuchBlock {
            block: 8,
            blocks: 8
        })
    );
}

#[test]
fn none_blocks_decode_with_zero_padding() {
    let values: Vec<i32> = (0..130).collect();
    let encoded = encode(&values, Scheme::None);
    let mut block = [7; BLOCK_LEN];
    decode_block(&encoded, 1, &mut block).unwrap();
    assert_eq!(&block[..2], &[128, 129]);
    assert!(block[2..].iter().all(|&v| v == 0));
}

#[test]
fn schemes_parse_and_display() {
    for scheme in Scheme::ALL {
        assert_eq!(scheme.to_string().parse::<Scheme>(), Ok(scheme));
        assert_eq!(
            Scheme::parse(&scheme.to_string().to_uppercase()),
            Ok(scheme)
        );
    }
    assert_eq!(Scheme::For.to_string(), "for");
    assert_eq!(Scheme::Dfor.to_string(), "dfor");
    assert_eq!(Scheme::Pack.to_string(), "pack");
    assert_eq!(Scheme::Dict.to_string(), "dict");
    assert_eq!(
        "rle".parse::<Scheme>(),
        Err(CompressError::UnknownScheme("rle".to_string()))
    );
}

#[test]
fn the_widest_block_bounds_every_blocks_words() {
    // A block of equal values, one spanning up to 16 bits, one spanning 5: the middle one is
    // the widest.
    let mut values = vec![7; BLOCK_LEN];
    values.extend((0..BLOCK_LEN as i32).map(|i| (i * 511) % (1 << 16)));
    values.extend((0..BLOCK_LEN as i32).map(|i| i % 32));
    let encoded = encode(&values, Scheme::For);
    let words: Vec<u32> = encoded
        .block_starts
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    assert_eq!(encoded.widest_block(), words[1]);
    assert!(words[1] > words[0] && words[1] > words[2], "{words:?}");
    assert_eq!(encode(&[], Scheme::For).widest_block(), 0);
    assert_eq!(encode(&values, Scheme::None).widest_block(), 0);
}

#[test]
fn encodings_made_in_file_buffers_equal_those_made_in_memory() {
    let folder = tempfile::tempdir().expect("a folder");
    let files = Buffers::Files {
        folder: folder.path().to_path_buf(),
        min_bytes: 0,
    };
    // Runs of blocks are packed in parallel pieces: more than one piece, a partial last block.
    let mut rng = XorShift(7);
    let values: Vec<i32> = (0..128 * 2500 + 77)
        .map(|i| i / 3 + rng.below(1 << 9) as i32)
        .collect();
    for scheme in Scheme::ALL {
        let in_memory = encode(&values, scheme);
        let in_file = try_encode_in(&values, scheme, &files).expect("encoded");
        assert_eq!(
            in_file.data.is_mapped(),
            !in_memory.data.is_empty(),
            "{scheme}"
        );
        assert_eq!(in_file, in_memory, "{scheme}");
        assert_eq!(decode(&in_file).expect("decoded"), values, "{scheme}");
    }
    let chosen = choose_in(&values, &files).expect("chosen");
    assert_eq!(chosen, choose(&values));
}
