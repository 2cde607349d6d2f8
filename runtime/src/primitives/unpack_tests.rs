//! `unpack` and `unpack_fixed` on the host target against the storage layer's encoder: every
//! tile of a column, the last one partial, decodes to the values encoded, and items past the end
//! (or not selected) are zero; `dict_code` finds every value of a dictionary and no other.

use inkwell::context::Context;
use tessera_storage::compress::{encode, Scheme};

use super::dict_code::dict_code;
use super::tests::{arg, call, function_for_tile, link, store_tile};
use super::unpack::{unpack, PackedColumn, DEVICE_SPARE_WORDS};
use super::unpack_fixed::{unpack_fixed, CodeBase, FixedColumn, Rows};
use crate::tile::TileShape;

const TILE: TileShape = TileShape {
    threads: 1,
    items_per_thread: 256,
};

/// Decodes `values` packed in `scheme`, tile by tile, with the generated code; with `every`,
/// only the rows whose index in their tile is a multiple of it (the others must be zero).
fn unpack_on_host(values: &[i32], scheme: Scheme, every: Option<i32>) -> Vec<i32> {
    let encoded = encode(values, scheme);
    let context = Context::create();
    let module = context.create_module("unpack");
    let rows = values.len() as i64;
    function_for_tile(&context, &module, "unpack_tile", TILE, |em| {
        let out = em.tile_array(em.i32().into(), "values").expect("array");
        let start = arg(em, 3).into_int_value();
        let left =
            em.b.build_int_sub(em.const_i64(rows), start, "")
                .expect("sub");
        let full = em.const_i64(i64::from(TILE.items()));
        let fewer =
            em.b.build_int_compare(inkwell::IntPredicate::SLT, left, full, "")
                .expect("cmp");
        let count =
            em.b.build_select(fewer, left, full, "")
                .expect("select")
                .into_int_value();
        let count = em.b.build_int_truncate(count, em.i32(), "").expect("trunc");
        if scheme.is_fixed_width() {
            let column = FixedColumn {
                scheme,
                width: encoded.width,
                words: arg(em, 0).into_pointer_value(),
                base: match scheme {
                    // `pack`'s reference is compiled in, as the compiler does.
                    Scheme::Pack => {
                        CodeBase::Reference(encoded.dictionary.first().copied().unwrap_or(0))
                    }
                    _ => CodeBase::Dictionary(arg(em, 1).into_pointer_value()),
                },
            };
            let rows = match every {
                None => Rows::First(count),
                Some(every) => {
                    let flags = em.tile_array(em.i8().into(), "flags").expect("flags");
                    em.for_each_item(|item| {
                        let offset = em.item_offset(item)?;
                        let inside =
                            em.b.build_int_compare(inkwell::IntPredicate::SLT, offset, count, "")?;
                        let rest =
                            em.b.build_int_signed_rem(offset, em.const_i32(every.into()), "")?;
                        let multiple = em.b.build_int_compare(
                            inkwell::IntPredicate::EQ,
                            rest,
                            em.const_i32(0),
                            "",
                        )?;
                        let chosen = em.b.build_and(inside, multiple, "")?;
                        em.set(flags, item, em.flag(chosen)?)
                    })
                    .expect("flags");
                    Rows::Selected(flags)
                }
            };
            unpack_fixed(em, &column, start, rows, out).expect("unpack_fixed");
        } else {
            let column = PackedColumn {
                scheme,
                block_words: tessera_storage::compress::MAX_BLOCK_WORDS,
                words: arg(em, 0).into_pointer_value(),
                block_starts: arg(em, 1).into_pointer_value(),
            };
            unpack(em, &column, None, start, count, out).expect("unpack");
        }
        store_tile(em, out, arg(em, 2).into_pointer_value());
    });
    let object = link(&module);
    let mut words = encoded.data.to_vec();
    words.resize(words.len() + DEVICE_SPARE_WORDS, 0);
    let mut starts = if scheme.is_fixed_width() {
        encoded.dictionary.iter().map(|&v| v as u32).collect()
    } else {
        encoded.block_starts.to_vec()
    };
    starts.push(0);
    let items = TILE.items() as usize;
    let mut decoded = Vec::with_capacity(values.len());
    for tile_start in (0..values.len()).step_by(items) {
        let mut out = vec![-1i32; items];
        call(
            &object,
            "unpack_tile",
            words.as_mut_ptr().cast(),
            starts.as_mut_ptr().cast(),
            out.as_mut_ptr().cast(),
            tile_start as i64,
        );
        let count = items.min(values.len() - tile_start);
        assert!(
            out[count..].iter().all(|&v| v == 0),
            "{scheme}: items past the end of the column are not zero"
        );
        if let Some(every) = every {
            for (i, &v) in out[..count].iter().enumerate() {
                if i % every as usize != 0 {
                    assert_eq!(v, 0, "{scheme}: item {i} was not selected");
                }
            }
        }
        decoded.extend_from_slice(&out[..count]);
    }
    decoded
}

/// A deterministic stream of pseudo-random words (xorshift).
fn words(seed: u64, len: usize) -> impl Iterator<Item = u32> {
    let mut state = seed;
    (0..len).map(move |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 16) as u32
    })
}

fn check(name: &str, values: &[i32]) {
    for scheme in [Scheme::For, Scheme::Dfor, Scheme::Pack, Scheme::Dict] {
        assert_eq!(
            unpack_on_host(values, scheme, None),
            values,
            "{name} in {scheme}"
        );
    }
    for scheme in [Scheme::Pack, Scheme::Dict] {
        let selected = unpack_on_host(values, scheme, Some(3));
        for (i, (&got, &want)) in selected.iter().zip(values).enumerate() {
            if (i % TILE.items() as usize).is_multiple_of(3) {
                assert_eq!(got, want, "{name} in {scheme}, selected row {i}");
            }
        }
    }
}

#[test]
fn unpacks_every_fixed_width() {
    for width in 0..=32u32 {
        let values: Vec<i32> = words(u64::from(width) + 5, 600)
            .map(|w| {
                let code = if width == 32 {
                    w
                } else {
                    w & ((1u32 << width) - 1)
                };
                code.wrapping_add(12_345) as i32
            })
            .collect();
        let encoded = encode(&values, Scheme::Pack);
        assert!(encoded.width <= width);
        assert_eq!(
            unpack_on_host(&values, Scheme::Pack, None),
            values,
            "{width} bits"
        );
    }
}

#[test]
fn unpacks_random_values_over_the_full_range_with_a_partial_last_tile() {
    let values: Vec<i32> = words(7, 700).map(|w| w as i32).collect();
    check("full-range random", &values);
}

#[test]
fn unpacks_small_random_values() {
    let values: Vec<i32> = words(11, 1000).map(|w| (w % 65536) as i32).collect();
    check("U(0, 2^16)", &values);
}

#[test]
fn unpacks_sorted_values() {
    let values: Vec<i32> = (0..1000).map(|i| i * 3 + 1_000_000).collect();
    check("sorted", &values);
}

#[test]
fn unpacks_columns_of_one_value_and_of_the_extremes() {
    check("all equal", &vec![-42; 256]);
    let extremes: Vec<i32> = (0..300)
        .map(|i| if i % 3 == 0 { i32::MIN } else { i32::MAX })
        .collect();
    check("i32::MIN and i32::MAX", &extremes);
}

#[test]
fn unpacks_skewed_values_and_short_columns() {
    // Mostly small values with rare large ones: miniblocks of different widths in one block.
    let skewed: Vec<i32> = words(3, 777)
        .map(|w| {
            if w % 97 == 0 {
                w as i32
            } else {
                (w % 8) as i32
            }
        })
        .collect();
    check("skewed", &skewed);
    check("one value", &[5]);
    check("127 values", &(0..127).collect::<Vec<_>>());
    check("129 values", &(0..129).rev().collect::<Vec<_>>());
}

/// Each of `values` looked up in `dictionary` (ascending, distinct) by the generated search:
/// its code, or -1 when the dictionary does not hold it.
fn codes_on_host(dictionary: &[i32], values: &[i32]) -> Vec<i32> {
    let context = Context::create();
    let module = context.create_module("dict_code");
    let entries = dictionary.len() as u32;
    function_for_tile(&context, &module, "codes", TILE, |em| {
        let values = arg(em, 0).into_pointer_value();
        let dictionary = arg(em, 1).into_pointer_value();
        let out = arg(em, 2).into_pointer_value();
        em.for_each_item(|item| {
            let place = em.offset_ptr(em.i32().into(), values, item.index)?;
            let value = em.b.build_load(em.i32(), place, "")?.into_int_value();
            let (code, found) = dict_code(em, dictionary, entries, value)?;
            let code = em.b.build_select(found, code, em.const_i32(-1), "")?;
            let target = em.offset_ptr(em.i32().into(), out, item.index)?;
            em.b.build_store(target, code)?;
            Ok(())
        })
        .expect("codes");
    });
    let object = link(&module);
    let items = TILE.items() as usize;
    let mut codes = Vec::with_capacity(values.len());
    for chunk in values.chunks(items) {
        let mut tile = chunk.to_vec();
        tile.resize(items, 0);
        let mut entries = dictionary.to_vec();
        entries.push(0);
        let mut out = vec![0i32; items];
        call(
            &object,
            "codes",
            tile.as_mut_ptr().cast(),
            entries.as_mut_ptr().cast(),
            out.as_mut_ptr().cast(),
            0,
        );
        codes.extend_from_slice(&out[..chunk.len()]);
    }
    codes
}

#[test]
fn finds_the_code_of_every_value_a_dictionary_holds_and_no_other() {
    for entries in [1usize, 2, 3, 4, 5, 7, 8, 100, 2406] {
        // Spread out, with negative values and the extremes of `i32`, so that neighbours and
        // gaps are both searched.
        let mut dictionary: Vec<i32> = (0..entries as i64)
            .map(|i| (i * 7919 - 40_000) as i32)
            .collect();
        if entries > 2 {
            dictionary[0] = i32::MIN;
            dictionary[entries - 1] = i32::MAX;
        }
        let mut values: Vec<i32> = dictionary.clone();
        values.extend(dictionary.iter().map(|v| v.wrapping_add(1)));
        values.extend(dictionary.iter().map(|v| v.wrapping_sub(1)));
        let expected: Vec<i32> = values
            .iter()
            .map(|v| dictionary.binary_search(v).map_or(-1, |code| code as i32))
            .collect();
        assert_eq!(
            codes_on_host(&dictionary, &values),
            expected,
            "{entries} entries"
        );
    }
}
