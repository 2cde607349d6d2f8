//! The Wisconsin benchmark relation (DeWitt, 1993), with Hristov's columns (appendix A of his
//! thesis): `unique1` a random permutation of `0..N`, `unique2` the row number, `two` .. `twenty`
//! and the percent columns `unique1` modulo 2 .. 100 (the percent columns as floats, Hristov's
//! change), `unique3 = unique1`, `even` and `odd` the even and odd `onepercent` multiples, and
//! three 8-character strings: `stringu1` and `stringu2` spell `unique1` and `unique2` in base 26
//! (seven letters, then `x`), `stringu4` cycles through four values. Two relations are written,
//! `wisconsin` of N rows and `wisconsin_small` of 0.6 N (the second input of Hristov's joins).

use std::path::Path;

use rayon::prelude::*;

use crate::error::StorageError;
use crate::gen::generation::{check_file_destination, Dataset, Generation, Wait};
use crate::gen::rng::mix;
use crate::gen::{GenColumn, GeneratedTable};
use crate::parquet_write::{write_parquet_columns, WriteColumn, DEFAULT_ROW_GROUP_ROWS};
use crate::progress::Progress;
use crate::types::{DataType, Field, Schema};

/// `unique1` and `unique2` must fit in 32-bit integers.
pub const MAX_ROWS: u64 = i32::MAX as u64;

/// The relations and their sizes for `rows`: the main relation, and the small one at 60%.
pub fn wisconsin_tables(rows: u64) -> [(&'static str, u64); 2] {
    [("wisconsin", rows), ("wisconsin_small", rows * 3 / 5)]
}

/// The columns of a Wisconsin relation.
pub fn wisconsin_schema() -> Schema {
    use DataType::{Str as S, F32 as F, I32 as I};
    let columns = [
        ("unique1", I),
        ("unique2", I),
        ("two", I),
        ("four", I),
        ("ten", I),
        ("twenty", I),
        ("onepercent", F),
        ("tenpercent", F),
        ("twentypercent", F),
        ("fiftypercent", F),
        ("unique3", I),
        ("even", I),
        ("odd", I),
        ("stringu1", S),
        ("stringu2", S),
        ("stringu4", S),
    ];
    Schema::new(columns.iter().map(|&(n, ty)| Field::new(n, ty)).collect())
}

/// Writes `wisconsin.parquet` (`rows` rows) and `wisconsin_small.parquet` into `out_dir`
/// (created if missing), replacing only those two files; fails without changing anything when
/// another generation is writing there.
pub fn generate_wisconsin(
    rows: u64,
    out_dir: &Path,
    progress: &dyn Progress,
) -> Result<Vec<GeneratedTable>, StorageError> {
    check_rows(rows)?;
    let generation = Generation::lock(out_dir, Dataset::Wisconsin { rows }, Wait::No)?;
    write_wisconsin(generation, rows, progress)
}

/// Checks a row count before anything is written.
pub(crate) fn check_rows(rows: u64) -> Result<(), StorageError> {
    if rows == 0 || rows > MAX_ROWS {
        return Err(StorageError::Invalid(format!(
            "the Wisconsin relation needs 1 to {MAX_ROWS} rows, not {rows}"
        )));
    }
    Ok(())
}

/// Writes the two relations into the folder `generation` holds locked, each renamed into place
/// when complete.
pub(crate) fn write_wisconsin(
    generation: Generation,
    rows: u64,
    progress: &dyn Progress,
) -> Result<Vec<GeneratedTable>, StorageError> {
    let tables = wisconsin_tables(rows);
    let path_of = |name: &str| generation.dir().join(format!("{name}.parquet"));
    for (name, _) in tables {
        check_file_destination(&path_of(name))?;
    }
    generation.start()?;
    progress.start(
        &format!("generating the Wisconsin relations ({rows} rows)"),
        tables.iter().map(|(_, n)| n).sum(),
    );
    let schema = wisconsin_schema();
    let mut written = Vec::with_capacity(tables.len());
    for (seed, (name, count)) in tables.into_iter().enumerate() {
        let columns = relation(count, seed as u64 + 1);
        let mut write: Vec<WriteColumn<'_>> = columns.iter().map(GenColumn::to_write).collect();
        // `unique1`, `unique2` and `unique3` hold every value of `0..rows` once.
        for index in [0, 1, 10] {
            write[index] = write[index].unique();
        }
        let path = path_of(name);
        write_parquet_columns(&path, &schema, &write, DEFAULT_ROW_GROUP_ROWS)?;
        progress.advance(count);
        written.push(GeneratedTable {
            name: name.to_string(),
            rows: count,
            files: vec![path],
        });
    }
    progress.finish();
    generation.complete(&written)?;
    Ok(written)
}

/// The columns of one relation of `rows` rows; `seed` picks the permutation of `unique1`.
pub(crate) fn relation(rows: u64, seed: u64) -> Vec<GenColumn> {
    let unique1 = permutation(rows, seed);
    let modulo = |m: i32| GenColumn::Int(unique1.par_iter().map(|u| u % m).collect());
    let percent = |m: i32| GenColumn::Float(unique1.par_iter().map(|u| (u % m) as f32).collect());
    let unique2: Vec<i32> = (0..rows as i32).collect();
    vec![
        GenColumn::Int(unique1.clone()),
        GenColumn::Int(unique2.clone()),
        modulo(2),
        modulo(4),
        modulo(10),
        modulo(20),
        percent(100),
        percent(10),
        percent(5),
        percent(2),
        GenColumn::Int(unique1.clone()),
        GenColumn::Int(unique1.par_iter().map(|u| u % 100 * 2).collect()),
        GenColumn::Int(unique1.par_iter().map(|u| u % 100 * 2 + 1).collect()),
        GenColumn::Text(unique1.par_iter().map(|&u| unique_string(u)).collect()),
        GenColumn::Text(unique2.par_iter().map(|&u| unique_string(u)).collect()),
        GenColumn::Text(
            unique2
                .par_iter()
                .map(|u| CYCLE[*u as usize % CYCLE.len()].to_string())
                .collect(),
        ),
    ]
}

/// The values `stringu4` cycles through.
const CYCLE: [&str; 4] = ["AAAAxxxx", "HHHHxxxx", "OOOOxxxx", "VVVVxxxx"];

/// `value` as seven base-26 letters (`A` is 0, most significant first), then `x`.
pub(crate) fn unique_string(value: i32) -> String {
    let mut letters = [b'A'; 7];
    let mut rest = value.unsigned_abs();
    for letter in letters.iter_mut().rev() {
        *letter = b'A' + (rest % 26) as u8;
        rest /= 26;
    }
    let mut text = String::with_capacity(8);
    text.extend(letters.iter().map(|&b| b as char));
    text.push('x');
    text
}

/// `0..rows` in an order drawn from `seed`: the rows sorted by a hash of their number.
fn permutation(rows: u64, seed: u64) -> Vec<i32> {
    let mut keyed: Vec<(u64, i32)> = (0..rows)
        .into_par_iter()
        .map(|i| {
            (
                mix(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ mix(i)),
                i as i32,
            )
        })
        .collect();
    keyed.par_sort_unstable();
    keyed.into_par_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique1_is_a_permutation_and_the_rest_follow_it() {
        let columns = relation(1000, 1);
        let GenColumn::Int(unique1) = &columns[0] else {
            panic!("unique1 is an integer column");
        };
        let mut sorted = unique1.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(unique1, &sorted, "unique1 is shuffled");
        let GenColumn::Int(ten) = &columns[4] else {
            panic!("ten is an integer column");
        };
        assert!(unique1.iter().zip(ten).all(|(u, t)| u % 10 == *t));
        let GenColumn::Int(odd) = &columns[12] else {
            panic!("odd is an integer column");
        };
        assert!(unique1.iter().zip(odd).all(|(u, o)| u % 100 * 2 + 1 == *o));
    }

    #[test]
    fn strings_spell_values_in_base_26() {
        assert_eq!(unique_string(0), "AAAAAAAx");
        assert_eq!(unique_string(1), "AAAAAABx");
        assert_eq!(unique_string(26), "AAAAABAx");
        assert_eq!(unique_string(26 * 26 - 1), "AAAAAZZx");
    }

    #[test]
    fn the_small_relation_is_three_fifths() {
        assert_eq!(
            wisconsin_tables(1000),
            [("wisconsin", 1000), ("wisconsin_small", 600)]
        );
    }
}
