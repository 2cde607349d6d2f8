//! Columns in memory: typed value vectors, optional validity, sorted string dictionaries and
//! the statistics the planner reads (rows, nulls, min, max, dictionary size).

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::types::{DataType, DecimalType, Value};
use crate::values::Values;

/// The values of one column. Strings are dictionary codes into a sorted dictionary, so
/// comparisons and ordering of strings are comparisons of codes.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnData {
    Bool(Values<bool>),
    I32(Values<i32>),
    I64(Values<i64>),
    F32(Values<f32>),
    F64(Values<f64>),
    Date(Values<i32>),
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(Values<i64>),
    /// Microseconds since midnight.
    Time(Values<i64>),
    Str {
        codes: Values<i32>,
        dictionary: Arc<Dictionary>,
    },
    /// Raw decimal values: counts of `10^-scale`.
    Decimal(Values<i64>, DecimalType),
    /// Raw values of a decimal of more than 18 digits.
    WideDecimal(Values<i128>, DecimalType),
}

impl ColumnData {
    pub fn ty(&self) -> DataType {
        match self {
            ColumnData::Bool(_) => DataType::Bool,
            ColumnData::I32(_) => DataType::I32,
            ColumnData::I64(_) => DataType::I64,
            ColumnData::F32(_) => DataType::F32,
            ColumnData::F64(_) => DataType::F64,
            ColumnData::Date(_) => DataType::Date,
            ColumnData::Timestamp(_) => DataType::Timestamp,
            ColumnData::Time(_) => DataType::Time,
            ColumnData::Str { .. } => DataType::Str,
            ColumnData::Decimal(_, decimal) | ColumnData::WideDecimal(_, decimal) => {
                DataType::Decimal(*decimal)
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ColumnData::Bool(v) => v.len(),
            ColumnData::I32(v) | ColumnData::Date(v) => v.len(),
            ColumnData::I64(v)
            | ColumnData::Decimal(v, _)
            | ColumnData::Timestamp(v)
            | ColumnData::Time(v) => v.len(),
            ColumnData::F32(v) => v.len(),
            ColumnData::F64(v) => v.len(),
            ColumnData::WideDecimal(v, _) => v.len(),
            ColumnData::Str { codes, .. } => codes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw bytes of the values (codes for strings), as they are laid out for kernels.
    pub fn as_bytes(&self) -> &[u8] {
        fn bytes<T: Copy>(values: &[T]) -> &[u8] {
            // SAFETY: every T used here (bool, i32, i64, f32, f64) is plain old data with no
            // padding, and the returned slice borrows `values` for its whole lifetime.
            unsafe {
                std::slice::from_raw_parts(
                    values.as_ptr().cast::<u8>(),
                    std::mem::size_of_val(values),
                )
            }
        }
        match self {
            ColumnData::Bool(v) => bytes(v),
            ColumnData::I32(v) | ColumnData::Date(v) => bytes(v),
            ColumnData::I64(v)
            | ColumnData::Decimal(v, _)
            | ColumnData::Timestamp(v)
            | ColumnData::Time(v) => bytes(v),
            ColumnData::F32(v) => bytes(v),
            ColumnData::F64(v) => bytes(v),
            ColumnData::WideDecimal(v, _) => bytes(v),
            ColumnData::Str { codes, .. } => bytes(codes),
        }
    }

    /// Whether the values are read from a mapped prepared file.
    pub fn is_mapped(&self) -> bool {
        match self {
            ColumnData::Bool(v) => v.is_mapped(),
            ColumnData::I32(v) | ColumnData::Date(v) => v.is_mapped(),
            ColumnData::I64(v)
            | ColumnData::Decimal(v, _)
            | ColumnData::Timestamp(v)
            | ColumnData::Time(v) => v.is_mapped(),
            ColumnData::F32(v) => v.is_mapped(),
            ColumnData::F64(v) => v.is_mapped(),
            ColumnData::WideDecimal(v, _) => v.is_mapped(),
            ColumnData::Str { codes, .. } => codes.is_mapped(),
        }
    }

    /// The values of a 4-byte integer column (dates, and codes for strings).
    pub fn as_i32(&self) -> Option<&[i32]> {
        match self {
            ColumnData::I32(v) | ColumnData::Date(v) => Some(v),
            ColumnData::Str { codes, .. } => Some(codes),
            _ => None,
        }
    }

    pub fn dictionary(&self) -> Option<&Arc<Dictionary>> {
        match self {
            ColumnData::Str { dictionary, .. } => Some(dictionary),
            _ => None,
        }
    }

    /// The value at `row`, decoded (strings as text).
    pub fn value(&self, row: usize) -> Value {
        match self {
            ColumnData::Bool(v) => Value::Bool(v[row]),
            ColumnData::I32(v) => Value::Int(i64::from(v[row])),
            ColumnData::I64(v) => Value::Int(v[row]),
            ColumnData::Decimal(v, decimal) => Value::Decimal(v[row], decimal.scale),
            ColumnData::WideDecimal(v, decimal) => Value::WideDecimal(v[row], decimal.scale),
            ColumnData::F32(v) => Value::Float(f64::from(v[row])),
            ColumnData::F64(v) => Value::Float(v[row]),
            ColumnData::Date(v) => Value::Date(v[row]),
            ColumnData::Timestamp(v) => Value::Timestamp(v[row]),
            ColumnData::Time(v) => Value::Time(v[row]),
            ColumnData::Str { codes, dictionary } => {
                Value::Str(dictionary.value(codes[row]).unwrap_or_default().into())
            }
        }
    }
}

/// A sorted set of distinct strings; a string's code is its position. The strings lie one
/// after another in one buffer, with each one's end: a prepared entry's dictionary is used as
/// it is mapped, with no string made for each of its millions (TPC-H's `o_comment` holds one
/// per row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dictionary {
    /// The strings' UTF-8 bytes, one after another, in order.
    text: Values<u8>,
    /// Where each string ends in `text`.
    ends: Values<u64>,
}

/// Why a dictionary's text and ends do not make a dictionary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DictionaryError {
    #[error("a dictionary string lies outside its text")]
    OutOfBounds,
    #[error("a dictionary string is not UTF-8")]
    NotUtf8,
    #[error("a dictionary is not sorted")]
    NotSorted,
    #[error("a dictionary's text has bytes after its last string")]
    TrailingText,
}

/// Strings per parallel task when a dictionary's text is checked.
const DICTIONARY_CHUNK: usize = 1 << 14;

impl Default for Dictionary {
    fn default() -> Dictionary {
        Dictionary::from_sorted_distinct(Vec::new())
    }
}

impl Dictionary {
    /// Builds a dictionary from distinct values in any order.
    pub fn from_unsorted(mut values: Vec<String>) -> Dictionary {
        values.sort_unstable();
        values.dedup();
        Dictionary::from_sorted_distinct(values)
    }

    /// Wraps values that are already sorted and distinct (checked in debug builds only: the
    /// callers have just sorted and deduplicated them).
    pub(crate) fn from_sorted_distinct(values: Vec<String>) -> Dictionary {
        debug_assert!(values.windows(2).all(|pair| pair[0] < pair[1]));
        let mut text = Vec::with_capacity(values.iter().map(String::len).sum());
        let mut ends = Vec::with_capacity(values.len());
        for value in &values {
            text.extend_from_slice(value.as_bytes());
            ends.push(text.len() as u64);
        }
        Dictionary {
            text: Values::from(text),
            ends: Values::from(ends),
        }
    }

    /// The dictionary of strings stored as `text` and each one's end, checked on every core:
    /// each string lies in the text, is UTF-8, and comes after the one before, and the last
    /// one ends where the text does.
    pub fn from_parts(text: Values<u8>, ends: Values<u64>) -> Result<Dictionary, DictionaryError> {
        let dictionary = Dictionary { text, ends };
        let len = dictionary.len();
        let text_end = dictionary.ends.last().map_or(0, |&end| end);
        if text_end != dictionary.text.len() as u64 {
            return Err(match text_end < dictionary.text.len() as u64 {
                true => DictionaryError::TrailingText,
                false => DictionaryError::OutOfBounds,
            });
        }
        let bytes = |i: usize| -> Result<&[u8], DictionaryError> {
            dictionary
                .text
                .get(dictionary.bounds(i))
                .ok_or(DictionaryError::OutOfBounds)
        };
        (0..len.div_ceil(DICTIONARY_CHUNK))
            .into_par_iter()
            .try_for_each(|chunk| {
                let first = chunk * DICTIONARY_CHUNK;
                let mut before: Option<&[u8]> = match first {
                    0 => None,
                    _ => Some(bytes(first - 1)?),
                };
                for i in first..len.min(first + DICTIONARY_CHUNK) {
                    let string = bytes(i)?;
                    std::str::from_utf8(string).map_err(|_| DictionaryError::NotUtf8)?;
                    if before.is_some_and(|before| before >= string) {
                        return Err(DictionaryError::NotSorted);
                    }
                    before = Some(string);
                }
                Ok(())
            })?;
        Ok(dictionary)
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The strings one after another, and where each ends: how a prepared entry stores them.
    pub fn parts(&self) -> (&[u8], &[u64]) {
        (&self.text, &self.ends)
    }

    /// The string of code `code`, when the dictionary has one.
    pub fn value(&self, code: i32) -> Option<&str> {
        usize::try_from(code)
            .ok()
            .filter(|&i| i < self.len())
            .map(|i| self.string(i))
    }

    /// Where the string at position `i` (below `len()`) lies in `text`: from the end of the
    /// one before to its own.
    fn bounds(&self, i: usize) -> std::ops::Range<usize> {
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1] as usize,
        };
        start..self.ends[i] as usize
    }

    /// The string at position `i` (below `len()`).
    fn string(&self, i: usize) -> &str {
        let bytes = &self.text[self.bounds(i)];
        // SAFETY: every string was checked to be UTF-8 when the dictionary was made
        // (`from_parts`), or made from `String`s (`from_sorted_distinct`), and neither part
        // changes after: `Values` are immutable, and a mapped prepared entry is never written
        // in place (a new entry is written aside and renamed over it, leaving the mapped file
        // as it was).
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// The strings in code order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.string(i))
    }

    /// The strings in code order, on every core.
    pub fn par_iter(&self) -> impl IndexedParallelIterator<Item = &str> + '_ {
        (0..self.len()).into_par_iter().map(|i| self.string(i))
    }

    /// The code of `value`, if the dictionary holds it.
    pub fn code_of(&self, value: &str) -> Option<i32> {
        let at = self.lower_bound(value);
        (self.value(at) == Some(value)).then_some(at)
    }

    /// The number of dictionary values strictly less than `value`: the first code whose value
    /// is `>= value`.
    pub fn lower_bound(&self, value: &str) -> i32 {
        self.partition_point(|probe| probe < value)
    }

    /// The number of dictionary values `<= value`: the first code whose value is `> value`.
    pub fn upper_bound(&self, value: &str) -> i32 {
        self.partition_point(|probe| probe <= value)
    }

    /// The first code whose string `below` is false for (true for a prefix of the codes).
    fn partition_point(&self, below: impl Fn(&str) -> bool) -> i32 {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            if below(self.string(middle)) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low as i32
    }
}

/// Interns strings as they are read, then produces sorted codes and their dictionary.
#[derive(Default)]
pub struct DictionaryBuilder {
    ids: HashMap<String, u32>,
    first_seen: Vec<String>,
    provisional: Vec<u32>,
}

impl DictionaryBuilder {
    pub fn with_capacity(rows: usize) -> DictionaryBuilder {
        DictionaryBuilder {
            provisional: Vec::with_capacity(rows),
            ..DictionaryBuilder::default()
        }
    }

    pub fn push(&mut self, value: &str) {
        let id = match self.ids.get(value) {
            Some(&id) => id,
            None => {
                let id = self.first_seen.len() as u32;
                self.ids.insert(value.to_string(), id);
                self.first_seen.push(value.to_string());
                id
            }
        };
        self.provisional.push(id);
    }

    /// Sorts the distinct values and rewrites every provisional id as its sorted code.
    pub fn finish(self) -> ColumnData {
        let mut order: Vec<u32> = (0..self.first_seen.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            self.first_seen[a as usize].cmp(&self.first_seen[b as usize])
        });
        let mut code_of_id = vec![0i32; order.len()];
        for (code, &id) in order.iter().enumerate() {
            code_of_id[id as usize] = code as i32;
        }
        let codes = self
            .provisional
            .iter()
            .map(|&id| code_of_id[id as usize])
            .collect();
        let mut values = self.first_seen;
        let mut sorted = Vec::with_capacity(values.len());
        for &id in &order {
            sorted.push(std::mem::take(&mut values[id as usize]));
        }
        ColumnData::Str {
            codes,
            dictionary: Arc::new(Dictionary::from_sorted_distinct(sorted)),
        }
    }
}

/// Rows per parallel task when statistics are gathered.
const STATS_CHUNK: usize = 1 << 16;

/// Statistics gathered when a column is loaded, read by the planner.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ColumnStats {
    pub rows: u64,
    pub nulls: u64,
    /// Smallest non-null value (the smallest code for strings); `Null` when there is none.
    pub min: Value,
    /// Largest non-null value (the largest code for strings); `Null` when there is none.
    pub max: Value,
    /// Number of distinct strings, for string columns.
    pub dictionary_size: Option<u64>,
}

impl ColumnStats {
    pub fn compute(data: &ColumnData, validity: Option<&[bool]>) -> ColumnStats {
        let nulls = validity.map_or(0, |v| {
            v.par_chunks(STATS_CHUNK)
                .map(|chunk| chunk.iter().filter(|&&ok| !ok).count() as u64)
                .sum()
        });

        /// The smallest and largest valid value of a slice.
        fn chunk_range<T: Copy + PartialOrd>(
            values: &[T],
            validity: Option<&[bool]>,
        ) -> Option<(T, T)> {
            let mut result: Option<(T, T)> = None;
            for (row, &x) in values.iter().enumerate() {
                // NaN never becomes a bound: comparisons with it are false.
                if validity.is_some_and(|v| !v[row]) || x.partial_cmp(&x).is_none() {
                    continue;
                }
                result = Some(match result {
                    None => (x, x),
                    Some((lo, hi)) => (if x < lo { x } else { lo }, if x > hi { x } else { hi }),
                });
            }
            result
        }
        // Loaded columns reach hundreds of millions of rows: scan them in parallel chunks.
        fn range<T: Copy + PartialOrd + Send + Sync>(
            values: &[T],
            validity: Option<&[bool]>,
        ) -> Option<(T, T)> {
            values
                .par_chunks(STATS_CHUNK)
                .enumerate()
                .map(|(i, chunk)| {
                    let start = i * STATS_CHUNK;
                    chunk_range(chunk, validity.map(|v| &v[start..start + chunk.len()]))
                })
                .reduce(
                    || None,
                    |a, b| match (a, b) {
                        (Some((lo_a, hi_a)), Some((lo_b, hi_b))) => Some((
                            if lo_b < lo_a { lo_b } else { lo_a },
                            if hi_b > hi_a { hi_b } else { hi_a },
                        )),
                        (a, None) => a,
                        (None, b) => b,
                    },
                )
        }
        let valid = validity;
        let (min, max) = match data {
            ColumnData::Bool(v) => pair(range(v, valid), Value::Bool),
            ColumnData::I32(v) => pair(range(v, valid), |x| Value::Int(i64::from(x))),
            ColumnData::I64(v) => pair(range(v, valid), Value::Int),
            ColumnData::Decimal(v, decimal) => {
                pair(range(v, valid), |x| Value::Decimal(x, decimal.scale))
            }
            ColumnData::WideDecimal(v, decimal) => {
                pair(range(v, valid), |x| Value::WideDecimal(x, decimal.scale))
            }
            ColumnData::F32(v) => pair(range(v, valid), |x| Value::Float(f64::from(x))),
            ColumnData::F64(v) => pair(range(v, valid), Value::Float),
            ColumnData::Date(v) => pair(range(v, valid), Value::Date),
            ColumnData::Timestamp(v) => pair(range(v, valid), Value::Timestamp),
            ColumnData::Time(v) => pair(range(v, valid), Value::Time),
            ColumnData::Str { codes, .. } => {
                pair(range(codes, valid), |x| Value::Int(i64::from(x)))
            }
        };
        ColumnStats {
            rows: data.len() as u64,
            nulls,
            min,
            max,
            dictionary_size: data.dictionary().map(|d| d.len() as u64),
        }
    }

    /// The integer range `[min, max]` of an integer, date or string-code column (raw units
    /// for decimals).
    pub fn int_range(&self) -> Option<(i64, i64)> {
        let as_int = |v: &Value| match v {
            Value::Int(i) | Value::Decimal(i, _) | Value::Timestamp(i) | Value::Time(i) => Some(*i),
            Value::Date(d) => Some(i64::from(*d)),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        };
        Some((as_int(&self.min)?, as_int(&self.max)?))
    }
}

fn pair<T>(range: Option<(T, T)>, wrap: impl Fn(T) -> Value) -> (Value, Value) {
    match range {
        Some((lo, hi)) => (wrap(lo), wrap(hi)),
        None => (Value::Null, Value::Null),
    }
}

/// Value ranges up to this many values are checked for repeats with a bitmap (32 MB).
const UNIQUE_BITMAP_BITS: u64 = 1 << 28;

/// Whether no combination of the values of `columns` (of one table, each integers underneath)
/// occurs twice among the rows where none is null: those a join on them matches. `None` when a
/// column is of another type, or their ranges take more than 64 bits together.
pub fn unique_combinations(columns: &[&Column]) -> Option<bool> {
    let rows = columns.first()?.len();
    let mut packed = vec![0u64; rows];
    let mut shift = 0u32;
    for column in columns {
        let values = column.integers()?;
        if values.len() != rows {
            return None;
        }
        let min = values.iter().copied().min().unwrap_or(0);
        let max = values.iter().copied().max().unwrap_or(0);
        let bits = 64 - (max.checked_sub(min)? as u64).leading_zeros();
        if shift + bits > 64 {
            return None;
        }
        for (word, value) in packed.iter_mut().zip(values) {
            *word |= (value.wrapping_sub(min) as u64) << shift;
        }
        shift += bits;
    }
    let mut packed: Vec<u64> = packed
        .into_iter()
        .enumerate()
        .filter(|(row, _)| columns.iter().all(|c| c.is_valid(*row)))
        .map(|(_, word)| word)
        .collect();
    packed.par_sort_unstable();
    Some(packed.windows(2).all(|w| w[0] != w[1]))
}

/// A loaded column: its values, which rows are valid (`None`: all), and its statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub data: ColumnData,
    pub validity: Option<Values<bool>>,
    pub stats: ColumnStats,
}

impl Column {
    pub fn new(data: ColumnData, validity: Option<Vec<bool>>) -> Column {
        // A validity vector with no nulls carries no information.
        let validity = validity.filter(|v| v.iter().any(|ok| !ok));
        let stats = ColumnStats::compute(&data, validity.as_deref());
        Column {
            data,
            validity: validity.map(Values::from),
            stats,
        }
    }

    /// A column of type `ty` holding `values` (`Value::Null` for a null), as a query's result
    /// gives them; an error names the first value that is not of the type.
    pub fn from_values<'v>(
        ty: DataType,
        values: impl ExactSizeIterator<Item = &'v Value>,
    ) -> Result<Column, String> {
        let mut builder = ColumnBuilder::new(ty, values.len());
        for value in values {
            builder.push(value)?;
        }
        Ok(builder.finish())
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Whether no value occurs twice among the valid rows of an integer, date or string column
    /// (`None` for other types). A bitmap over the value range when it is small, else a sorted
    /// copy: the planner asks this of join keys, to know whether a probe can match more than
    /// one row.
    pub fn has_unique_values(&self) -> Option<bool> {
        let values = self.integers()?;
        let mut values: Vec<i64> = match &self.validity {
            Some(valid) => values
                .into_iter()
                .zip(valid)
                .filter_map(|(v, ok)| ok.then_some(v))
                .collect(),
            None => values,
        };
        let Some((min, max)) = self.stats.int_range() else {
            return Some(true);
        };
        let span = max.checked_sub(min).and_then(|s| u64::try_from(s).ok());
        if let Some(span) = span.filter(|s| *s < UNIQUE_BITMAP_BITS) {
            use std::sync::atomic::{AtomicU64, Ordering};
            let bits: Vec<AtomicU64> = (0..span / 64 + 1).map(|_| AtomicU64::new(0)).collect();
            let repeated = values.par_iter().any(|&v| {
                let at = (v - min) as u64;
                let mask = 1u64 << (at % 64);
                bits[(at / 64) as usize].fetch_or(mask, Ordering::Relaxed) & mask != 0
            });
            return Some(!repeated);
        }
        values.par_sort_unstable();
        Some(values.windows(2).all(|w| w[0] != w[1]))
    }

    /// The values as 64-bit integers (a null row's as its placeholder), for the types that are
    /// integers underneath (strings as their codes); `None` for the others.
    fn integers(&self) -> Option<Vec<i64>> {
        Some(match &self.data {
            ColumnData::I32(v) | ColumnData::Date(v) => v.iter().map(|&x| i64::from(x)).collect(),
            ColumnData::Str { codes, .. } => codes.iter().map(|&x| i64::from(x)).collect(),
            ColumnData::I64(v) | ColumnData::Timestamp(v) | ColumnData::Time(v) => v.to_vec(),
            _ => return None,
        })
    }

    pub fn ty(&self) -> DataType {
        self.data.ty()
    }

    pub fn is_valid(&self, row: usize) -> bool {
        self.validity.as_ref().is_none_or(|v| v[row])
    }
}

/// A column of one type built a value at a time (`Value::Null` for a null), as a query's
/// result gives them: each value is stored in its type's vector as it comes, and strings in a
/// dictionary.
pub struct ColumnBuilder {
    ty: DataType,
    values: BuiltValues,
    validity: Vec<bool>,
}

enum BuiltValues {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Date(Vec<i32>),
    Timestamp(Vec<i64>),
    Time(Vec<i64>),
    Decimal(Vec<i64>),
    WideDecimal(Vec<i128>, DecimalType),
    /// A null row holds `None` until the end, when it takes the code of a string the column
    /// holds anyway (its validity hides it), so the dictionary holds only the column's strings.
    Str(Vec<Option<String>>),
}

impl ColumnBuilder {
    pub fn new(ty: DataType, capacity: usize) -> ColumnBuilder {
        let values = match ty {
            DataType::Bool => BuiltValues::Bool(Vec::with_capacity(capacity)),
            DataType::I32 => BuiltValues::I32(Vec::with_capacity(capacity)),
            DataType::I64 => BuiltValues::I64(Vec::with_capacity(capacity)),
            DataType::F32 => BuiltValues::F32(Vec::with_capacity(capacity)),
            DataType::F64 => BuiltValues::F64(Vec::with_capacity(capacity)),
            DataType::Date => BuiltValues::Date(Vec::with_capacity(capacity)),
            DataType::Timestamp => BuiltValues::Timestamp(Vec::with_capacity(capacity)),
            DataType::Time => BuiltValues::Time(Vec::with_capacity(capacity)),
            DataType::Decimal(decimal) if decimal.is_wide() => {
                BuiltValues::WideDecimal(Vec::with_capacity(capacity), decimal)
            }
            DataType::Decimal(_) => BuiltValues::Decimal(Vec::with_capacity(capacity)),
            DataType::Str => BuiltValues::Str(Vec::with_capacity(capacity)),
        };
        ColumnBuilder {
            ty,
            values,
            validity: Vec::with_capacity(capacity),
        }
    }

    /// Adds `value`, taking its string without a copy; an error where it is not of the
    /// column's type.
    pub fn push_owned(&mut self, value: Value) -> Result<(), String> {
        match (&mut self.values, value) {
            (BuiltValues::Str(v), Value::Str(s)) => {
                v.push(Some(s.to_string()));
                self.validity.push(true);
                Ok(())
            }
            (_, value) => self.push(&value),
        }
    }

    /// Adds `value`; an error where it is not of the column's type.
    pub fn push(&mut self, value: &Value) -> Result<(), String> {
        let null = matches!(value, Value::Null);
        let mismatch = || format!("the value {value} is not of type {}", self.ty.name());
        match (&mut self.values, value) {
            (BuiltValues::Bool(v), Value::Bool(b)) => v.push(*b),
            (BuiltValues::Bool(v), Value::Null) => v.push(false),
            (BuiltValues::I32(v), Value::Int(i)) => {
                v.push(i32::try_from(*i).map_err(|_| mismatch())?)
            }
            (BuiltValues::I32(v) | BuiltValues::Date(v), Value::Null) => v.push(0),
            (BuiltValues::I64(v), Value::Int(i)) => v.push(*i),
            (
                BuiltValues::I64(v)
                | BuiltValues::Decimal(v)
                | BuiltValues::Timestamp(v)
                | BuiltValues::Time(v),
                Value::Null,
            ) => v.push(0),
            (BuiltValues::F32(v), Value::Float(x)) => v.push(*x as f32),
            (BuiltValues::F32(v), Value::Null) => v.push(0.0),
            (BuiltValues::F64(v), Value::Float(x)) => v.push(*x),
            (BuiltValues::F64(v), Value::Null) => v.push(0.0),
            (BuiltValues::Date(v), Value::Date(d)) => v.push(*d),
            (BuiltValues::Timestamp(v), Value::Timestamp(t)) => v.push(*t),
            (BuiltValues::Time(v), Value::Time(t)) => v.push(*t),
            (BuiltValues::Decimal(v), Value::Decimal(raw, scale)) if matches!(self.ty, DataType::Decimal(d) if d.scale == *scale) => {
                v.push(*raw)
            }
            (BuiltValues::WideDecimal(v, decimal), Value::WideDecimal(raw, scale))
                if decimal.scale == *scale =>
            {
                v.push(*raw)
            }
            (BuiltValues::WideDecimal(v, _), Value::Null) => v.push(0),
            (BuiltValues::Str(v), Value::Str(s)) => v.push(Some(s.to_string())),
            (BuiltValues::Str(v), Value::Null) => v.push(None),
            _ => return Err(mismatch()),
        }
        self.validity.push(!null);
        Ok(())
    }

    /// The values of `parts`, builders of one type, one after the other: a result decoded on
    /// every core comes in runs, and copying millions of values run by run on one thread took
    /// longer than decoding them. Parts of another type than the first are left out.
    pub fn concat(parts: Vec<ColumnBuilder>) -> Option<ColumnBuilder> {
        let mut parts = parts.into_iter();
        let first = parts.next()?;
        let ty = first.ty;
        let mut values = vec![first.values];
        let mut validity = vec![first.validity];
        for part in parts.filter(|part| part.ty == ty) {
            values.push(part.values);
            validity.push(part.validity);
        }
        /// The vectors of the parts `of` picks, each kind's concatenated on every core.
        fn joined<T: Copy + Default + Send + Sync>(
            values: &mut [BuiltValues],
            of: impl Fn(&mut BuiltValues) -> Option<&mut Vec<T>>,
        ) -> Vec<T> {
            concatenated(
                values
                    .iter_mut()
                    .filter_map(of)
                    .map(std::mem::take)
                    .collect(),
            )
        }
        let values = match &values[0] {
            BuiltValues::Bool(_) => BuiltValues::Bool(joined(&mut values, |v| match v {
                BuiltValues::Bool(v) => Some(v),
                _ => None,
            })),
            BuiltValues::I32(_) => BuiltValues::I32(joined(&mut values, |v| match v {
                BuiltValues::I32(v) => Some(v),
                _ => None,
            })),
            BuiltValues::Date(_) => BuiltValues::Date(joined(&mut values, |v| match v {
                BuiltValues::Date(v) => Some(v),
                _ => None,
            })),
            BuiltValues::I64(_) => BuiltValues::I64(joined(&mut values, |v| match v {
                BuiltValues::I64(v) => Some(v),
                _ => None,
            })),
            BuiltValues::Decimal(_) => BuiltValues::Decimal(joined(&mut values, |v| match v {
                BuiltValues::Decimal(v) => Some(v),
                _ => None,
            })),
            BuiltValues::Timestamp(_) => BuiltValues::Timestamp(joined(&mut values, |v| match v {
                BuiltValues::Timestamp(v) => Some(v),
                _ => None,
            })),
            BuiltValues::Time(_) => BuiltValues::Time(joined(&mut values, |v| match v {
                BuiltValues::Time(v) => Some(v),
                _ => None,
            })),
            BuiltValues::F32(_) => BuiltValues::F32(joined(&mut values, |v| match v {
                BuiltValues::F32(v) => Some(v),
                _ => None,
            })),
            BuiltValues::F64(_) => BuiltValues::F64(joined(&mut values, |v| match v {
                BuiltValues::F64(v) => Some(v),
                _ => None,
            })),
            BuiltValues::WideDecimal(_, decimal) => {
                let decimal = *decimal;
                BuiltValues::WideDecimal(
                    joined(&mut values, |v| match v {
                        BuiltValues::WideDecimal(v, _) => Some(v),
                        _ => None,
                    }),
                    decimal,
                )
            }
            // Strings are moved, not copied: appending them is cheap.
            BuiltValues::Str(_) => {
                let mut strings = Vec::new();
                for part in values {
                    if let BuiltValues::Str(more) = part {
                        strings.extend(more);
                    }
                }
                BuiltValues::Str(strings)
            }
        };
        Some(ColumnBuilder {
            ty,
            values,
            validity: concatenated(validity),
        })
    }

    pub fn len(&self) -> usize {
        self.validity.len()
    }

    pub fn is_empty(&self) -> bool {
        self.validity.is_empty()
    }

    pub fn finish(self) -> Column {
        let data = match self.values {
            BuiltValues::Bool(v) => ColumnData::Bool(Values::from(v)),
            BuiltValues::I32(v) => ColumnData::I32(Values::from(v)),
            BuiltValues::I64(v) => ColumnData::I64(Values::from(v)),
            BuiltValues::F32(v) => ColumnData::F32(Values::from(v)),
            BuiltValues::F64(v) => ColumnData::F64(Values::from(v)),
            BuiltValues::Date(v) => ColumnData::Date(Values::from(v)),
            BuiltValues::Timestamp(v) => ColumnData::Timestamp(Values::from(v)),
            BuiltValues::Time(v) => ColumnData::Time(Values::from(v)),
            BuiltValues::Decimal(v) => match self.ty {
                DataType::Decimal(decimal) => ColumnData::Decimal(Values::from(v), decimal),
                _ => ColumnData::I64(Values::from(v)),
            },
            BuiltValues::WideDecimal(v, decimal) => {
                ColumnData::WideDecimal(Values::from(v), decimal)
            }
            BuiltValues::Str(strings) => {
                let filler = strings.iter().flatten().next().cloned().unwrap_or_default();
                let mut builder = DictionaryBuilder::with_capacity(strings.len());
                for string in &strings {
                    builder.push(string.as_deref().unwrap_or(&filler));
                }
                builder.finish()
            }
        };
        Column::new(data, Some(self.validity))
    }
}

/// `parts` one after the other, copied into place on every core.
fn concatenated<T: Copy + Default + Send + Sync>(parts: Vec<Vec<T>>) -> Vec<T> {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    // Zeroed (for the numbers and flags held here, fresh pages), then filled in parallel.
    let mut joined = vec![T::default(); parts.iter().map(Vec::len).sum()];
    let mut rest = joined.as_mut_slice();
    let mut places = Vec::with_capacity(parts.len());
    for part in &parts {
        let (place, after) = rest.split_at_mut(part.len());
        places.push(place);
        rest = after;
    }
    places
        .into_par_iter()
        .zip(parts.par_iter())
        .for_each(|(place, part)| place.copy_from_slice(part));
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_of_columns_are_unique_where_no_pair_repeats() {
        let ints = |v: Vec<i32>| Column::new(ColumnData::I32(v.into()), None);
        let part = ints(vec![1, 1, 2, 2, 3]);
        let supplier = ints(vec![10, 20, 10, 20, 10]);
        assert_eq!(unique_combinations(&[&part, &supplier]), Some(true));
        // (2, 10) twice.
        let repeated = ints(vec![10, 20, 10, 10, 10]);
        assert_eq!(unique_combinations(&[&part, &repeated]), Some(false));
        // Rows with a null key match nothing in a join, so they repeat nothing.
        let nullable = Column::new(
            ColumnData::I64(vec![10, 20, 10, 10, 10].into()),
            Some(vec![true, true, true, false, true]),
        );
        assert_eq!(unique_combinations(&[&part, &nullable]), Some(true));
        // Ranges wider than 64 bits together cannot be told.
        let wide = Column::new(
            ColumnData::I64(vec![i64::MIN, 0, 1, 2, i64::MAX].into()),
            None,
        );
        assert_eq!(unique_combinations(&[&wide, &supplier]), None);
        let floats = Column::new(ColumnData::F64(vec![0.0; 5].into()), None);
        assert_eq!(unique_combinations(&[&part, &floats]), None);
    }

    #[test]
    fn a_builder_keeps_values_and_nulls_in_order_across_concatenated_runs() {
        let text = |s: &str| Value::Str(s.into());
        let mut first = ColumnBuilder::new(DataType::Str, 2);
        first.push(&Value::Null).expect("a null");
        first.push_owned(text("b")).expect("a string");
        let mut second = ColumnBuilder::new(DataType::Str, 2);
        second.push(&text("a")).expect("a string");
        second.push(&Value::Null).expect("a null");
        let read = |column: &Column| -> Vec<Value> {
            (0..column.len())
                .map(
                    |row| match column.validity.as_ref().is_some_and(|v| !v[row]) {
                        true => Value::Null,
                        false => column.data.value(row),
                    },
                )
                .collect()
        };
        let column = ColumnBuilder::concat(vec![first, second])
            .expect("parts")
            .finish();
        assert_eq!(
            read(&column),
            vec![Value::Null, text("b"), text("a"), Value::Null]
        );
        // Numbers are copied into place run by run, an empty run among them.
        let run = |values: &[Option<i64>]| {
            let mut builder = ColumnBuilder::new(DataType::I64, values.len());
            for value in values {
                builder
                    .push(&value.map_or(Value::Null, Value::Int))
                    .expect("an integer");
            }
            builder
        };
        let parts = vec![run(&[Some(1), None]), run(&[]), run(&[Some(3), Some(4)])];
        let numbers = ColumnBuilder::concat(parts).expect("parts").finish();
        assert_eq!(
            read(&numbers),
            vec![Value::Int(1), Value::Null, Value::Int(3), Value::Int(4)]
        );
        // The dictionary holds the column's strings only.
        assert_eq!(column.data.dictionary().map(|d| d.len()), Some(2));
        let mut numbers = ColumnBuilder::new(DataType::I32, 1);
        assert!(numbers.push(&Value::Int(1 << 40)).is_err());
        assert!(numbers.push(&text("x")).is_err());
    }

    #[test]
    fn dictionary_codes_preserve_order() {
        let mut builder = DictionaryBuilder::default();
        for s in ["ASIA", "AMERICA", "EUROPE", "ASIA", "AFRICA"] {
            builder.push(s);
        }
        let ColumnData::Str { codes, dictionary } = builder.finish() else {
            panic!("a dictionary builder makes a string column");
        };
        assert_eq!(
            dictionary.iter().collect::<Vec<_>>(),
            ["AFRICA", "AMERICA", "ASIA", "EUROPE"]
        );
        assert_eq!(codes, [2, 1, 3, 2, 0]);
        assert_eq!(dictionary.code_of("EUROPE"), Some(3));
        assert_eq!(dictionary.code_of("MIDDLE EAST"), None);
        assert_eq!(dictionary.lower_bound("AMERICA"), 1);
        assert_eq!(dictionary.upper_bound("AMERICA"), 2);
        // "B" sorts after ASIA and before EUROPE.
        assert_eq!(dictionary.lower_bound("B"), 3);
        assert_eq!(dictionary.lower_bound("F"), 4);
    }

    #[test]
    fn a_dictionary_from_parts_is_checked_whole() {
        let parts = |text: &[u8], ends: &[u64]| {
            Dictionary::from_parts(Values::from(text.to_vec()), Values::from(ends.to_vec()))
        };
        let dictionary = parts(b"ASIAEUROPE", &[4, 10]).expect("a dictionary");
        assert_eq!(dictionary.iter().collect::<Vec<_>>(), ["ASIA", "EUROPE"]);
        assert_eq!(parts(b"", &[]).map(|d| d.len()), Ok(0));
        assert_eq!(
            parts(b"ASIAEUROPE", &[4, 11]),
            Err(DictionaryError::OutOfBounds)
        );
        assert_eq!(
            parts(b"ASIAEUROPE", &[4, 9]),
            Err(DictionaryError::TrailingText)
        );
        assert_eq!(parts(b"x", &[]), Err(DictionaryError::TrailingText));
        // An end before the one before it makes a range that runs backwards.
        assert_eq!(
            parts(b"ASIAEUROPE", &[5, 4, 10]),
            Err(DictionaryError::OutOfBounds)
        );
        assert_eq!(
            parts(b"EUROPEASIA", &[6, 10]),
            Err(DictionaryError::NotSorted)
        );
        assert_eq!(parts(b"ASIAASIA", &[4, 8]), Err(DictionaryError::NotSorted));
        assert_eq!(parts(b"A\xffB", &[1, 3]), Err(DictionaryError::NotUtf8));
    }

    #[test]
    fn stats_skip_nulls() {
        let column = Column::new(
            ColumnData::I32(vec![5, -3, 100, 7].into()),
            Some(vec![true, true, false, true]),
        );
        assert_eq!(column.stats.nulls, 1);
        assert_eq!(column.stats.min, Value::Int(-3));
        assert_eq!(column.stats.max, Value::Int(7));
        let empty = Column::new(ColumnData::F64(vec![].into()), None);
        assert_eq!(empty.stats.min, Value::Null);
    }

    #[test]
    fn repeated_key_values_are_found_in_small_and_wide_ranges() {
        let unique = |values: Vec<i64>, valid: Option<Vec<bool>>| {
            Column::new(ColumnData::I64(values.into()), valid).has_unique_values()
        };
        assert_eq!(unique(vec![3, 1, 2], None), Some(true));
        assert_eq!(unique(vec![3, 1, 3], None), Some(false));
        // A range too wide for the bitmap takes the sorted path.
        assert_eq!(unique(vec![i64::MIN + 1, 0, i64::MAX], None), Some(true));
        assert_eq!(unique(vec![-1 << 40, 7, 1 << 40, 7], None), Some(false));
        // A repeat among nulls is no repeat.
        assert_eq!(
            unique(vec![4, 4, 5], Some(vec![true, false, true])),
            Some(true)
        );
        assert_eq!(unique(vec![], None), Some(true));
        let floats = Column::new(ColumnData::F64(vec![1.0, 1.0].into()), None);
        assert_eq!(floats.has_unique_values(), None);
    }
}
