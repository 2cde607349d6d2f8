//! `unpack` on the host target against the storage layer's encoder: every tile of a column,
//! the last one partial, decodes to the values encoded, and items past the end are zero.

use inkwell::context::Context;
use tessera_storage::compress::{encode, Scheme};

use super::tests::{arg, call, function_for_tile, link, store_tile};
use super::unpack::{unpack, PackedColumn, DEVICE_SPARE_WORDS};
use crate::tile::TileShape;

const TILE: TileShape = TileShape {
    threads: 1,
    items_per_thread: 256,
};

/// Decodes `values` packed in `scheme`, tile by tile, with the generated code.
fn unpack_on_host(values: &[i32], scheme: Scheme) -> Vec<i32> {
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
        let column = PackedColumn {
            scheme,
            block_words: super::unpack::MAX_BLOCK_WORDS,
            words: arg(em, 0).into_pointer_value(),
            block_starts: arg(em, 1).into_pointer_value(),
        };
        unpack(em, &column, None, start, count, out).expect("unpack");
        store_tile(em, out, arg(em, 2).into_pointer_value());
    });
    let object = link(&module);
    let mut words = encoded.data.clone();
    words.resize(words.len() + DEVICE_SPARE_WORDS, 0);
    let mut starts = encoded.block_starts.clone();
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
    for scheme in [Scheme::For, Scheme::Dfor] {
        assert_eq!(unpack_on_host(values, scheme), values, "{name} in {scheme}");
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
