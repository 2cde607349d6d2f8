//! Results: reading a query's buffers back into rows of values (decoding dictionary codes to
//! strings), the host's work on those rows (sort, take, filters and computed columns over a
//! grouped result), and the final table; or, for a reader of rows as they come (a server's
//! messages), the rows handed to a [`RowWriter`] a value at a time.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use tessera_stdlib::scalar::{self, Binary, ScalarError};
use tessera_storage::column::ColumnBuilder;
use tessera_storage::derived::DerivedString;
use tessera_storage::{decimal, Catalog, DataType, DecimalType, Dictionary, Value};

use crate::exec::RuntimeError;
use crate::program::wide_key;
use crate::program::{
    AggregateKind, AggregateSlot, HashKey, HostAggregate, HostExpr, HostOp, ResultShape,
    ResultSpec, RowColumn,
};

mod write;

pub(crate) use write::{write_fetched, write_table};
pub use write::{Field, RowWriter, WriteRange};

/// A query's answer: named, typed columns and rows of values.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultTable {
    pub columns: Vec<(String, DataType)>,
    pub rows: Vec<Vec<Value>>,
}

/// Rows whose columns are known by id, while host operations run.
struct Rows {
    ids: Vec<u32>,
    types: Vec<DataType>,
    rows: Vec<Vec<Value>>,
}

impl Rows {
    fn position(&self, id: u32) -> Result<usize, RuntimeError> {
        self.ids
            .iter()
            .position(|i| *i == id)
            .ok_or_else(|| RuntimeError::Malformed(format!("the result has no column #{id}")))
    }
}

/// A query's buffers, read back after its kernels.
pub(crate) trait ResultBuffers {
    /// Buffer `buffer` whole (`range` None), or `len` bytes of it from byte `offset`
    /// (`Some((offset, len))`; fewer where the buffer ends sooner).
    fn read(&mut self, buffer: usize, range: Option<(u64, u64)>) -> Result<Vec<u8>, RuntimeError>;

    /// The slots of a grouped result that hold a group — those of the `slots` elements of
    /// buffer `flags` (`flag_bytes` each) that are not zero — with the elements of each of
    /// `columns` (a buffer and its element bytes) at those slots.
    fn present(
        &mut self,
        flags: usize,
        flag_bytes: u32,
        slots: u64,
        columns: &[(usize, u32)],
    ) -> Result<PresentSlots, RuntimeError>;
}

/// The slots of a grouped result that hold a group, in order, and the elements of the buffers
/// asked for there: either each buffer whole, or only the elements at these slots.
pub(crate) struct PresentSlots {
    pub slots: Vec<u64>,
    pub columns: Vec<Vec<u8>>,
    /// Whether `columns` hold only the present slots' elements (the `i`th at `slots[i]`).
    pub gathered: bool,
}

impl PresentSlots {
    /// Where the element of slot number `i` (of `slots`) lies in each of `columns`.
    fn element(&self, i: usize) -> usize {
        match self.gathered {
            true => i,
            false => self.slots[i] as usize,
        }
    }
}

/// The slots among the first `slots` flags of `flag_bytes` bytes each in `flags` that hold a
/// group (whose flag is not zero), in order.
pub(crate) fn present_slots(
    flags: &[u8],
    flag_bytes: u32,
    slots: u64,
) -> impl Iterator<Item = usize> + '_ {
    flags
        .chunks_exact(flag_bytes.max(1) as usize)
        .take(usize::try_from(slots).unwrap_or(usize::MAX))
        .enumerate()
        .filter(|(_, flag)| flag.iter().any(|b| *b != 0))
        .map(|(slot, _)| slot)
}

/// [`ResultBuffers::present`] by reading the flags and every column whole.
pub(crate) fn read_present<B: ResultBuffers + ?Sized>(
    buffers: &mut B,
    flags: usize,
    flag_bytes: u32,
    slots: u64,
    columns: &[(usize, u32)],
) -> Result<PresentSlots, RuntimeError> {
    let words = buffers.read(flags, None)?;
    let present = present_slots(&words, flag_bytes, slots)
        .map(|slot| slot as u64)
        .collect();
    let columns = columns
        .iter()
        .map(|(buffer, _)| buffers.read(*buffer, None))
        .collect::<Result<_, _>>()?;
    Ok(PresentSlots {
        slots: present,
        columns,
        gathered: false,
    })
}

/// A result's bytes as read back from its buffers: all that decoding it needs, so that it can
/// be decoded once the device is free for the next query.
pub struct FetchedResult {
    fetched: Fetched,
    /// The slots of the grouping hash table the query ran with.
    capacity: u64,
    /// Whether the rows were read back as written, for the host to sort
    /// ([`ResultSpec::host_sort`]).
    pub(crate) sorted_on_host: bool,
}

impl FetchedResult {
    /// The result `spec` says this one is read as: where the host sorts, its rows as written.
    fn spec<'s>(&self, spec: &'s ResultSpec) -> Result<Cow<'s, ResultSpec>, RuntimeError> {
        match self.sorted_on_host {
            false => Ok(Cow::Borrowed(spec)),
            true => spec.sorted_on_host().map(Cow::Owned).ok_or_else(|| {
                RuntimeError::Malformed("rows read back for a sort the result has not".into())
            }),
        }
    }
}

enum Fetched {
    /// Each aggregate's accumulator, and its counts.
    Scalar(Vec<Column>),
    /// The groups of a dense or hash table: their slots, and the buffers read there (a hash
    /// table's key words first, then each aggregate's accumulator and counts).
    Groups(PresentSlots),
    /// Each column's values and validity, for the rows read back.
    Rows { count: usize, columns: Vec<Column> },
}

/// A buffer's bytes, and those of its validity or counts.
type Column = (Vec<u8>, Option<Vec<u8>>);

/// The result of a query from its buffers (`capacity`: the slots of its grouping hash table).
pub(crate) fn decode_result(
    spec: &ResultSpec,
    buffers: &mut dyn ResultBuffers,
    catalog: &Catalog,
    capacity: u64,
) -> Result<ResultTable, RuntimeError> {
    decode_fetched(spec, fetch_result(spec, buffers, capacity)?, catalog)
}

/// Reads back what decoding the result needs, and nothing more.
pub(crate) fn fetch_result(
    spec: &ResultSpec,
    buffers: &mut dyn ResultBuffers,
    capacity: u64,
) -> Result<FetchedResult, RuntimeError> {
    let fetched = match &spec.shape {
        ResultShape::Scalar { aggregates } => Fetched::Scalar(
            aggregates
                .iter()
                .map(|slot| {
                    Ok((
                        buffers.read(slot.buffer, None)?,
                        slot.count.map(|b| buffers.read(b, None)).transpose()?,
                    ))
                })
                .collect::<Result<_, RuntimeError>>()?,
        ),
        ResultShape::Dense {
            keys,
            aggregates,
            presence,
        } => {
            let slots = keys
                .iter()
                .try_fold(1u64, |n, k| n.checked_mul(k.size + u64::from(k.nullable)))
                .ok_or_else(|| {
                    RuntimeError::Malformed("a dense result of too many slots".into())
                })?;
            let mut columns = Vec::with_capacity(aggregates.len());
            aggregate_columns(aggregates, &mut columns);
            Fetched::Groups(buffers.present(*presence, 1, slots, &columns)?)
        }
        ResultShape::Hash {
            aggregates,
            key_buffer,
            wide,
            ..
        } => {
            let mut columns = key_word_columns(*key_buffer, wide);
            aggregate_columns(aggregates, &mut columns);
            Fetched::Groups(buffers.present(*key_buffer, 8, capacity + 1, &columns)?)
        }
        ResultShape::Rows {
            columns,
            count_buffer,
        } => {
            let count = row_count(*count_buffer, buffers)?;
            // `take n` straight after the rows keeps the first n: only those are read back.
            let count = match spec.steps.first() {
                Some(HostOp::Limit(n)) => count.min(usize::try_from(*n).unwrap_or(usize::MAX)),
                _ => count,
            };
            Fetched::Rows {
                count,
                columns: fetch_rows(columns, 0, count, buffers)?,
            }
        }
    };
    Ok(FetchedResult {
        fetched,
        capacity,
        sorted_on_host: false,
    })
}

/// The result a fetched one decodes to: dictionary codes as strings, the host's steps done.
pub(crate) fn decode_fetched(
    spec: &ResultSpec,
    fetched: FetchedResult,
    catalog: &Catalog,
) -> Result<ResultTable, RuntimeError> {
    let spec = fetched.spec(spec)?;
    let spec = spec.as_ref();
    let FetchedResult {
        fetched, capacity, ..
    } = fetched;
    let (mut rows, applied) = match (&spec.shape, fetched) {
        (ResultShape::Scalar { aggregates }, Fetched::Scalar(columns)) => {
            let mut row = Vec::with_capacity(aggregates.len());
            for (slot, (values, counts)) in aggregates.iter().zip(&columns) {
                let dictionary = match slot.ty {
                    DataType::Str => dictionary(catalog, slot.dictionary.as_ref())?,
                    _ => None,
                };
                row.push(aggregate_value(
                    slot,
                    values,
                    counts.as_deref(),
                    0,
                    dictionary.as_ref(),
                )?);
            }
            let rows = Rows {
                ids: aggregates.iter().map(|a| a.id).collect(),
                types: aggregates.iter().map(|a| a.ty).collect(),
                rows: vec![row],
            };
            (rows, 0)
        }
        (
            ResultShape::Rows { columns, .. },
            Fetched::Rows {
                count,
                columns: bytes,
            },
        ) => match first_sort(&spec.steps) {
            // Sorted by the rows' values as stored, only the rows kept are decoded.
            Some((keys, limit, applied)) => {
                let order = sorted_rows(columns, &bytes, count, keys, limit)?;
                (decode_rows(columns, &bytes, &order, catalog)?, applied)
            }
            None => {
                let order: Vec<usize> = (0..count).collect();
                (decode_rows(columns, &bytes, &order, catalog)?, 0)
            }
        },
        (shape, Fetched::Groups(present)) => {
            let (kept, header, applied) =
                decode_groups::<KeptRows>(shape, &present, &spec.steps, catalog, capacity)?;
            (
                Rows {
                    rows: kept.rows,
                    ..header
                },
                applied,
            )
        }
        _ => {
            return Err(RuntimeError::Malformed(
                "a result read back as another shape".into(),
            ))
        }
    };
    let mut steps = spec.steps[applied..].iter().peekable();
    while let Some(op) = steps.next() {
        match (op, steps.peek()) {
            // The limit then truncates nothing more.
            (HostOp::Sort(keys), Some(HostOp::Limit(n))) => sort_first(keys, *n, &mut rows)?,
            _ => apply(op, &mut rows)?,
        }
    }
    output_table(spec, rows)
}

/// The groups of a grouped result (`shape`, read back as `present`) collected as `C` says,
/// under their columns (keys, then aggregates), with the leading checks among `steps`
/// applied as they are decoded; and how many steps that was.
fn decode_groups<C: Collected>(
    shape: &ResultShape,
    present: &PresentSlots,
    steps: &[HostOp],
    catalog: &Catalog,
    capacity: u64,
) -> Result<(C, Rows, usize), RuntimeError> {
    match shape {
        ResultShape::Dense {
            keys, aggregates, ..
        } => {
            // Where each aggregate lies among the buffers read at the groups (as fetched).
            let places = aggregate_columns(aggregates, &mut Vec::new());
            let columns: Vec<_> = keys
                .iter()
                .map(|k| (k.id, k.ty, k.dictionary.as_ref()))
                .collect();
            let grouped = Grouped {
                present,
                keys: &columns,
                aggregates,
                places: &places,
            };
            // Slots per step of each key's digit: the product of the later keys' slots (the
            // last key's digit varies fastest).
            let mut strides = vec![1u64; keys.len()];
            for i in (1..keys.len()).rev() {
                let slots = keys[i].size + u64::from(keys[i].nullable);
                strides[i - 1] = strides[i].saturating_mul(slots);
            }
            grouped.decode(steps, catalog, |_, slot, row, dictionaries| {
                for ((key, stride), dictionary) in keys.iter().zip(&strides).zip(dictionaries) {
                    let digit = (slot / stride) % (key.size + u64::from(key.nullable));
                    if digit == key.size {
                        row.push(Value::Null);
                        continue;
                    }
                    row.push(key_value(
                        key.ty,
                        key.min + digit as i64,
                        dictionary.as_ref(),
                    ));
                }
                Ok(())
            })
        }
        ResultShape::Hash {
            keys,
            aggregates,
            key_buffer,
            wide,
        } => {
            // The key words come back first, then the aggregates (as fetched).
            let places = aggregate_columns(aggregates, &mut key_word_columns(*key_buffer, wide));
            let columns: Vec<_> = keys
                .iter()
                .map(|k| (k.id, k.ty, k.dictionary.as_ref()))
                .collect();
            let grouped = Grouped {
                present,
                keys: &columns,
                aggregates,
                places: &places,
            };
            if !wide.is_empty() {
                let count = wide.len() + 1;
                if count > wide_key::MAX_WORDS {
                    return Err(RuntimeError::Malformed(format!(
                        "a hash table's key of {count} words"
                    )));
                }
                return grouped.decode(steps, catalog, |i, _, row, dictionaries| {
                    let mut words = [0u64; wide_key::MAX_WORDS];
                    let at = present.element(i) * 8;
                    for (word, column) in words.iter_mut().zip(&present.columns[..count]) {
                        let bytes = column.get(at..at + 8).ok_or_else(|| {
                            RuntimeError::Malformed("a hash table's key word is missing".into())
                        })?;
                        let mut le = [0u8; 8];
                        le.copy_from_slice(bytes);
                        *word = u64::from_le_bytes(le);
                    }
                    let words = &words[..count];
                    for (key, dictionary) in keys.iter().zip(dictionaries) {
                        let null =
                            key.nullable && wide_key::field(words, key.shift + key.bits, 1) == 1;
                        let field = wide_key::field(words, key.shift, key.bits);
                        row.push(hash_key_value(key, field, null, dictionary.as_ref()));
                    }
                    Ok(())
                });
            }
            grouped.decode(steps, catalog, |i, slot, row, dictionaries| {
                let Value::Int(word) =
                    element(&present.columns[0], DataType::I64, present.element(i))?
                else {
                    return Err(RuntimeError::Malformed(
                        "a hash table's key word is not an integer".into(),
                    ));
                };
                // The last slot holds the one key whose stored form is zero.
                let packed = if slot == capacity {
                    1u64 << 63
                } else {
                    (word as u64) ^ (1 << 63)
                };
                for (key, dictionary) in keys.iter().zip(dictionaries) {
                    let above = packed.checked_shr(key.shift + key.bits).unwrap_or(0);
                    let null = key.nullable && above & 1 == 1;
                    let field = packed.checked_shr(key.shift).unwrap_or(0);
                    row.push(hash_key_value(key, field, null, dictionary.as_ref()));
                }
                Ok(())
            })
        }
        _ => Err(RuntimeError::Malformed(
            "a grouped result read back as another shape".into(),
        )),
    }
}

/// A fetched result as the columns a table is made of, in the order and under the names the
/// query gives them (a stage's result becomes a table so). A grouping's groups are decoded
/// straight into their columns, on every core, never as a row of values per group; any other
/// result through its rows.
pub fn fetched_columns(
    spec: &ResultSpec,
    fetched: FetchedResult,
    catalog: &Catalog,
) -> Result<Vec<(String, tessera_storage::Column)>, RuntimeError> {
    // Where the host sorts, the rows as written (and sorted when decoded).
    let read_as = fetched.spec(spec)?;
    if let Fetched::Groups(present) = &fetched.fetched {
        let (ByColumn(built), header, applied) = decode_groups::<ByColumn>(
            &read_as.shape,
            present,
            &read_as.steps,
            catalog,
            fetched.capacity,
        )?;
        let mut ids: Vec<u32> = spec.output.iter().map(|(_, id)| *id).collect();
        ids.sort_unstable();
        let once = ids.windows(2).all(|pair| pair[0] != pair[1]);
        if applied == read_as.steps.len() && once {
            let mut built: Vec<Option<ColumnBuilder>> = built.into_iter().map(Some).collect();
            let mut columns = Vec::with_capacity(spec.output.len());
            for (name, id) in &spec.output {
                let at = header.position(*id)?;
                let column = built.get_mut(at).and_then(Option::take).ok_or_else(|| {
                    RuntimeError::Malformed(format!("the result has no column #{id}"))
                })?;
                columns.push((name.clone(), column));
            }
            return Ok(columns
                .into_par_iter()
                .map(|(name, column)| (name, column.finish()))
                .collect());
        }
    }
    let table = decode_fetched(spec, fetched, catalog)?;
    table
        .columns
        .par_iter()
        .enumerate()
        .map(|(at, (name, ty))| {
            tessera_storage::Column::from_values(*ty, table.rows.iter().map(|row| &row[at]))
                .map(|column| (name.clone(), column))
                .map_err(RuntimeError::Malformed)
        })
        .collect()
}

/// Whether a result can be read back in pieces: rows written out, with no host work after.
pub(crate) fn streams(spec: &ResultSpec) -> bool {
    matches!(spec.shape, ResultShape::Rows { .. }) && spec.steps.is_empty()
}

/// Reads rows written out back `chunk` rows at a time, handing each piece to `deliver` (at least
/// one piece, empty when no row was written); returns the number of rows.
pub(crate) fn stream_rows(
    spec: &ResultSpec,
    buffers: &mut dyn ResultBuffers,
    catalog: &Catalog,
    chunk: usize,
    deliver: &mut dyn FnMut(ResultTable) -> Result<(), RuntimeError>,
) -> Result<u64, RuntimeError> {
    let ResultShape::Rows {
        columns,
        count_buffer,
    } = &spec.shape
    else {
        return Err(RuntimeError::Malformed(
            "only rows written out can be streamed".into(),
        ));
    };
    let count = row_count(*count_buffer, buffers)?;
    let mut first = 0;
    loop {
        let rows = chunk.max(1).min(count - first);
        let bytes = fetch_rows(columns, first, rows, buffers)?;
        let order: Vec<usize> = (0..rows).collect();
        let piece = decode_rows(columns, &bytes, &order, catalog)?;
        deliver(output_table(spec, piece)?)?;
        first += rows;
        if first >= count {
            return Ok(count as u64);
        }
    }
}

/// The result's columns, in the order and under the names the query gives them.
fn output_table(spec: &ResultSpec, rows: Rows) -> Result<ResultTable, RuntimeError> {
    let mut positions = Vec::with_capacity(spec.output.len());
    for (_, id) in &spec.output {
        positions.push(rows.position(*id)?);
    }
    Ok(ResultTable {
        columns: spec
            .output
            .iter()
            .zip(&positions)
            .map(|((name, _), &p)| (name.clone(), rows.types[p]))
            .collect(),
        rows: rows
            .rows
            .into_iter()
            .map(|row| reorder(row, &positions))
            .collect(),
    })
}

/// The values of `row` at `positions`, moved rather than copied, each one copied only where a
/// later position names it again.
fn reorder(mut row: Vec<Value>, positions: &[usize]) -> Vec<Value> {
    if positions.iter().copied().eq(0..row.len()) {
        return row;
    }
    positions
        .iter()
        .enumerate()
        .map(|(i, &p)| match positions[i + 1..].contains(&p) {
            true => row[p].clone(),
            false => std::mem::replace(&mut row[p], Value::Null),
        })
        .collect()
}

/// How many rows a pipeline wrote out.
pub(crate) fn row_count(
    count_buffer: usize,
    buffers: &mut dyn ResultBuffers,
) -> Result<usize, RuntimeError> {
    match element(&buffers.read(count_buffer, Some((0, 8)))?, DataType::I64, 0)? {
        Value::Int(n) => usize::try_from(n)
            .map_err(|_| RuntimeError::Malformed(format!("{n} rows were written"))),
        _ => Ok(0),
    }
}

/// The bytes of rows `first .. first + count` of those a pipeline wrote out, column by column.
fn fetch_rows(
    columns: &[RowColumn],
    first: usize,
    count: usize,
    buffers: &mut dyn ResultBuffers,
) -> Result<Vec<Column>, RuntimeError> {
    columns
        .iter()
        .map(|column| {
            let width = column.ty.width() as u64;
            let values = buffers.read(
                column.buffer,
                Some((first as u64 * width, count as u64 * width)),
            )?;
            let validity = column
                .validity
                .map(|b| buffers.read(b, Some((first as u64, count as u64))))
                .transpose()?;
            Ok((values, validity))
        })
        .collect()
}

/// `count` rows from the bytes of their columns, a row at a time: each row is written whole
/// while the columns are read in step, rather than every row revisited once per column. A
/// string column's rows share one copy of each dictionary entry they hold.
fn decode_rows(
    columns: &[RowColumn],
    bytes: &[Column],
    order: &[usize],
    catalog: &Catalog,
) -> Result<Rows, RuntimeError> {
    let count = order.len();
    let mut strings = columns
        .iter()
        .map(|column| match column.ty {
            DataType::Str => Ok(dictionary(catalog, column.dictionary.as_ref())?
                .map(|d| SharedStrings::new(d, count))),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, RuntimeError>>()?;
    let mut rows = Vec::with_capacity(count);
    for &index in order {
        let mut row = Vec::with_capacity(columns.len());
        for ((column, (values, validity)), strings) in columns.iter().zip(bytes).zip(&mut strings) {
            if validity.as_ref().is_some_and(|v| v.get(index) == Some(&0)) {
                row.push(Value::Null);
                continue;
            }
            let value = element(values, column.ty, index)?;
            row.push(match (value, strings) {
                (Value::Int(code), Some(strings)) => Value::Str(strings.get(code)),
                (value, _) => value,
            });
        }
        rows.push(row);
    }
    Ok(Rows {
        ids: columns.iter().map(|c| c.id).collect(),
        types: columns.iter().map(|c| c.ty).collect(),
        rows,
    })
}

/// The sort that host steps begin with: its keys (column id, descending), the take after it
/// if any, and how many steps they are.
type FirstSort<'a> = (&'a [(u32, bool)], Option<u64>, usize);

/// The sort that `steps` begin with ([`FirstSort`]).
fn first_sort(steps: &[HostOp]) -> Option<FirstSort<'_>> {
    match steps {
        [HostOp::Sort(keys), HostOp::Limit(limit), ..] => Some((keys, Some(*limit), 2)),
        [HostOp::Sort(keys), ..] => Some((keys, None, 1)),
        _ => None,
    }
}

/// The positions of the first `limit` (or all) of `count` rows written out, in the order of a
/// sort by `keys`, equal rows in their order: found from the keys' values as stored, each made
/// words that order as the values do ([`order_words`]), so that no row is decoded before it is
/// known to be kept (4,700 rows by four keys took 1.5 ms as rows of values).
fn sorted_rows(
    columns: &[RowColumn],
    bytes: &[Column],
    count: usize,
    keys: &[(u32, bool)],
    limit: Option<u64>,
) -> Result<Vec<usize>, RuntimeError> {
    let mut places = Vec::with_capacity(keys.len());
    for &(id, descending) in keys {
        let at = columns.iter().position(|c| c.id == id).ok_or_else(|| {
            RuntimeError::Malformed(format!("a sort key #{id} is not a column of the rows"))
        })?;
        places.push((at, descending));
    }
    let stride = places
        .iter()
        .map(|&(at, _)| {
            usize::from(bytes[at].1.is_some()) + 1 + usize::from(is_wide(columns[at].ty))
        })
        .sum();
    let mut words = Vec::with_capacity(count.saturating_mul(stride));
    for index in 0..count {
        for &(at, descending) in &places {
            let (values, validity) = &bytes[at];
            let null = validity.as_ref().map(|v| v.get(index) == Some(&0));
            order_words(values, columns[at].ty, index, null, descending, &mut words)?;
        }
    }
    let row = |index: usize| &words[index * stride..(index + 1) * stride];
    let order = |a: &usize, b: &usize| row(*a).cmp(row(*b)).then(a.cmp(b));
    let mut positions: Vec<usize> = (0..count).collect();
    let limit = limit.map_or(count, |l| usize::try_from(l).unwrap_or(usize::MAX));
    if limit == 0 {
        positions.clear();
    } else if limit < count {
        positions.select_nth_unstable_by(limit - 1, order);
        positions.truncate(limit);
    }
    positions.sort_unstable_by(order);
    Ok(positions)
}

/// Whether a value of `ty` takes two 64-bit words.
fn is_wide(ty: DataType) -> bool {
    matches!(ty, DataType::Decimal(decimal) if decimal.is_wide())
}

/// Appends the words of element `index` of `values` (of `ty`) that order as the host's sort
/// orders it ([`compare_for_sort`]): where the column has nulls (`null` is not `None`), a word
/// that is 1 for null, so that nulls come last either way; then the value's bits made unsigned
/// in order (a string's code, which orders as its text does since a dictionary is sorted; a
/// float in SQL's total order, NaN last and -0 as 0), all ones flipped when `descending`.
fn order_words(
    values: &[u8],
    ty: DataType,
    index: usize,
    null: Option<bool>,
    descending: bool,
    words: &mut Vec<u64>,
) -> Result<(), RuntimeError> {
    const SIGN: u64 = 1 << 63;
    let flip = |word: u64| if descending { !word } else { word };
    let wide = is_wide(ty);
    if let Some(null) = null {
        words.push(u64::from(null));
        if null {
            words.extend(std::iter::repeat_n(0, 1 + usize::from(wide)));
            return Ok(());
        }
    }
    // The widths most keys have, read straight from their bytes.
    let short = || RuntimeError::Malformed("a result buffer is too short".into());
    match ty {
        DataType::I32 | DataType::Str | DataType::Date => {
            let word: [u8; 4] = word_at(values, index).ok_or_else(short)?;
            words.push(flip(i64::from(i32::from_le_bytes(word)) as u64 ^ SIGN));
            return Ok(());
        }
        DataType::I64 | DataType::Timestamp | DataType::Time => {
            let word: [u8; 8] = word_at(values, index).ok_or_else(short)?;
            words.push(flip(u64::from_le_bytes(word) ^ SIGN));
            return Ok(());
        }
        DataType::Decimal(_) if !wide => {
            let word: [u8; 8] = word_at(values, index).ok_or_else(short)?;
            words.push(flip(u64::from_le_bytes(word) ^ SIGN));
            return Ok(());
        }
        _ => {}
    }
    match element(values, ty, index)? {
        Value::WideDecimal(raw, _) => {
            words.push(flip(((raw >> 64) as u64) ^ SIGN));
            words.push(flip(raw as u64));
        }
        Value::Int(x) | Value::Decimal(x, _) | Value::Timestamp(x) | Value::Time(x) => {
            words.push(flip(x as u64 ^ SIGN))
        }
        Value::Date(days) => words.push(flip(i64::from(days) as u64 ^ SIGN)),
        Value::Bool(b) => words.push(flip(u64::from(b))),
        Value::Float(x) => {
            let word = if x.is_nan() {
                u64::MAX
            } else if x == 0.0 {
                SIGN
            } else if x.is_sign_negative() {
                !x.to_bits()
            } else {
                x.to_bits() ^ SIGN
            };
            words.push(flip(word));
        }
        other => {
            return Err(RuntimeError::Malformed(format!(
                "a sort key read as {other:?}"
            )))
        }
    }
    Ok(())
}

/// Element `index` of a buffer of `N`-byte values, as its bytes.
fn word_at<const N: usize>(bytes: &[u8], index: usize) -> Option<[u8; N]> {
    let at = index.checked_mul(N)?;
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// A dictionary's entries as a result's rows hold them: each entry copied once, when first
/// read, and shared by every row that holds it. A dictionary much larger than the rows read
/// keeps no table of copies (most entries would go unread): each row gets its own.
struct SharedStrings {
    dictionary: Arc<Dictionary>,
    copies: Option<Vec<Option<Arc<str>>>>,
}

impl SharedStrings {
    /// Entries past which a table of copies is kept only for as many rows.
    const ALWAYS_SHARED: usize = 4096;

    fn new(dictionary: Arc<Dictionary>, rows: usize) -> SharedStrings {
        let entries = dictionary.len();
        let copies = (entries <= Self::ALWAYS_SHARED.max(rows.saturating_mul(2)))
            .then(|| vec![None; entries]);
        SharedStrings { dictionary, copies }
    }

    /// Entry `code` (empty when there is none: a slot no row wrote).
    fn get(&mut self, code: i64) -> Arc<str> {
        let text = || Arc::from(self.dictionary.value(code as i32).unwrap_or_default());
        let slot = usize::try_from(code)
            .ok()
            .and_then(|at| self.copies.as_mut()?.get_mut(at));
        match slot {
            Some(Some(shared)) => Arc::clone(shared),
            Some(slot @ None) => Arc::clone(slot.insert(text())),
            None => text(),
        }
    }
}

/// The low `bits` bits of `field`, sign-extended: 32-bit keys are stored as their
/// two's-complement bits.
fn sign_extended(field: u64, bits: u32) -> i64 {
    match bits {
        0 => 0,
        64.. => field as i64,
        _ => {
            let unused = 64 - bits;
            ((field << unused) as i64) >> unused
        }
    }
}

fn dictionary(
    catalog: &Catalog,
    source: Option<&(String, String)>,
) -> Result<Option<Arc<Dictionary>>, RuntimeError> {
    let Some((table, column)) = source else {
        return Ok(None);
    };
    Ok(catalog.codes_dictionary(table, column)?)
}

/// Reads element `index` of a little-endian buffer of `ty` values.
fn element(bytes: &[u8], ty: DataType, index: usize) -> Result<Value, RuntimeError> {
    let width = ty.width();
    let at = index * width;
    let raw = bytes
        .get(at..at + width)
        .ok_or_else(|| RuntimeError::Malformed("a result buffer is too short".into()))?;
    if let DataType::Decimal(decimal) = ty {
        if decimal.is_wide() {
            let mut words = [0u8; 16];
            words.copy_from_slice(raw);
            return Ok(Value::WideDecimal(
                i128::from_le_bytes(words),
                decimal.scale,
            ));
        }
    }
    let mut word = [0u8; 8];
    word[..width].copy_from_slice(raw);
    let bits = u64::from_le_bytes(word);
    Ok(match ty {
        DataType::Bool => Value::Bool(bits != 0),
        DataType::I32 | DataType::Str => Value::Int(i64::from(bits as u32 as i32)),
        DataType::Date => Value::Date(bits as u32 as i32),
        DataType::I64 => Value::Int(bits as i64),
        DataType::Timestamp => Value::Timestamp(bits as i64),
        DataType::Time => Value::Time(bits as i64),
        DataType::Decimal(decimal) => Value::Decimal(bits as i64, decimal.scale),
        DataType::F32 => Value::Float(f64::from(f32::from_bits(bits as u32))),
        DataType::F64 => Value::Float(f64::from_bits(bits)),
    })
}

/// Adds the buffers of `aggregates` to the `columns` read back at a grouped result's present
/// slots; returns where each aggregate's values and counts lie among them.
fn aggregate_columns(
    aggregates: &[AggregateSlot],
    columns: &mut Vec<(usize, u32)>,
) -> Vec<(usize, Option<usize>)> {
    aggregates
        .iter()
        .map(|slot| {
            columns.push((slot.buffer, slot.accumulator.width() as u32));
            let values = columns.len() - 1;
            let counts = slot.count.map(|buffer| {
                columns.push((buffer, 8));
                columns.len() - 1
            });
            (values, counts)
        })
        .collect()
}

/// The groups of a grouped result as fetched: the present slots, each key's column (id, type
/// and the stored column whose dictionary its codes index), the aggregates and where each lies
/// among the fetched buffers (`aggregate_columns`).
struct Grouped<'a> {
    present: &'a PresentSlots,
    keys: &'a [KeyColumn<'a>],
    aggregates: &'a [AggregateSlot],
    places: &'a [(usize, Option<usize>)],
}

/// A group key's column: its id, its type, and the stored column (table, column) whose
/// dictionary its codes index.
type KeyColumn<'a> = (u32, DataType, Option<&'a (String, String)>);

/// Groups decoded per slot below this many are decoded on one thread.
const PARALLEL_GROUPS: usize = 1 << 14;

impl Grouped<'_> {
    /// A row per present slot, in slot order, collected as `C` says: its keys, written by
    /// `keys(i, slot, row, dictionaries)` (`i`: the slot's number among the present ones;
    /// `dictionaries`: each key's, looked up once rather than per group), then its aggregates.
    /// The leading checks among `steps` run on each row as it is decoded; returns the rows
    /// kept, their columns, and how many steps that was. On every core when there are many,
    /// since a grouping's result can hold millions of groups (a stage's, `where` after `group`).
    fn decode<C: Collected>(
        &self,
        steps: &[HostOp],
        catalog: &Catalog,
        keys: impl Fn(usize, u64, &mut Vec<Value>, &[Option<Arc<Dictionary>>]) -> Result<(), RuntimeError>
            + Sync,
    ) -> Result<(C, Rows, usize), RuntimeError> {
        let key_dictionaries = self
            .keys
            .iter()
            .map(|&(_, _, source)| dictionary(catalog, source))
            .collect::<Result<Vec<_>, _>>()?;
        let aggregate_dictionaries = self
            .aggregates
            .iter()
            .map(|a| match a.ty {
                DataType::Str => dictionary(catalog, a.dictionary.as_ref()),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let checks = RowChecks::for_groups(
            steps,
            self.keys.iter().map(|&(id, ty, _)| (id, ty)),
            self.aggregates,
        );
        let width = checks.header.ids.len();
        // Decodes slot number `i` into `row` (emptied first); whether the checks keep it.
        let one = |i: usize, slot: u64, row: &mut Vec<Value>| -> Result<bool, RuntimeError> {
            row.clear();
            keys(i, slot, row, &key_dictionaries)?;
            for ((aggregate, &(values, counts)), dictionary) in self
                .aggregates
                .iter()
                .zip(self.places)
                .zip(&aggregate_dictionaries)
            {
                row.push(aggregate_value(
                    aggregate,
                    &self.present.columns[values],
                    counts.map(|c| self.present.columns[c].as_slice()),
                    self.present.element(i),
                    dictionary.as_ref(),
                )?);
            }
            checks.keep(row)
        };
        let after = &steps[checks.ops.len()..];
        let slots = &self.present.slots;
        // With a sort and a take straight after the groups, only the groups the take can keep
        // are decoded (TPC-H Q21 keeps 100 of 4,000 suppliers at SF 10).
        let chosen = match FirstRows::of(&checks.header, after) {
            Some(first) if checks.ops.is_empty() && first.limit < slots.len() => {
                self.first_slots(&first, &keys)?
            }
            _ => None,
        };
        let count = chosen.as_ref().map_or(slots.len(), Vec::len);
        // The `k`th slot decoded: its number among the present ones, and the slot.
        let nth = |k: usize| {
            let i = chosen.as_ref().map_or(k, |chosen| chosen[k]);
            (i, slots[i])
        };
        // The collection so far, and a row to decode into (reused where `C` spreads it).
        let start = || (C::new(&checks.header, after), Vec::with_capacity(width));
        let collect = |(mut collected, mut row): (C, Vec<Value>), (i, slot): (usize, u64)| {
            if one(i, slot, &mut row)? {
                collected.push(&mut row)?;
            }
            Ok::<_, RuntimeError>((collected, row))
        };
        let collected = if count < PARALLEL_GROUPS {
            (0..count).map(nth).try_fold(start(), collect)?.0
        } else {
            // Runs of consecutive slots are collected on every core, then joined in order,
            // each moved once.
            let runs = (0..count.div_ceil(PARALLEL_GROUPS))
                .into_par_iter()
                .map(|run| {
                    let end = count.min((run + 1) * PARALLEL_GROUPS);
                    Ok((run * PARALLEL_GROUPS..end)
                        .map(nth)
                        .try_fold(start(), collect)?
                        .0)
                })
                .collect::<Result<Vec<C>, RuntimeError>>()?;
            C::join(runs)
        };
        let applied = checks.ops.len();
        Ok((collected, checks.header, applied))
    }

    /// The numbers (among the present slots, ascending) of the groups that `first`, a sort and
    /// a take over the rows as decoded, keeps; chosen without decoding strings, since a
    /// dictionary is sorted and its codes order as its strings do. `None` where a string
    /// aggregate has no dictionary (every row would read as the empty string, not its code).
    fn first_slots(
        &self,
        first: &FirstRows,
        keys: &impl Fn(
            usize,
            u64,
            &mut Vec<Value>,
            &[Option<Arc<Dictionary>>],
        ) -> Result<(), RuntimeError>,
    ) -> Result<Option<Vec<usize>>, RuntimeError> {
        if self
            .aggregates
            .iter()
            .any(|a| a.ty == DataType::Str && a.dictionary.is_none())
        {
            return Ok(None);
        }
        // Without dictionaries, string keys read as their codes (`key_value`).
        let codes = vec![None; self.keys.len()];
        let width = self.keys.len() + self.aggregates.len();
        let mut kept: Vec<(usize, Vec<Value>)> = Vec::new();
        let mut row = Vec::with_capacity(width);
        // Once the kept rows are cut back, the last of them by the sort: a later row that does
        // not sort before it cannot be among the first (ties keep their order).
        let mut last: Option<Vec<Value>> = None;
        for (i, &slot) in self.present.slots.iter().enumerate() {
            row.clear();
            keys(i, slot, &mut row, &codes)?;
            for (aggregate, &(values, counts)) in self.aggregates.iter().zip(self.places) {
                let values = &self.present.columns[values];
                let counts = counts.map(|c| self.present.columns[c].as_slice());
                let at = self.present.element(i);
                row.push(
                    match aggregate_value(aggregate, values, counts, at, None)? {
                        Value::Str(_) => element(values, aggregate.accumulator, at)?,
                        value => value,
                    },
                );
            }
            if last
                .as_ref()
                .is_some_and(|last| sort_order(&first.keys, &row, last) != Ordering::Less)
            {
                continue;
            }
            kept.push((i, std::mem::replace(&mut row, Vec::with_capacity(width))));
            if kept.len() >= first.limit.saturating_mul(2).max(1024) {
                keep_first(&mut kept, &first.keys, first.limit);
                last = kept
                    .iter()
                    .max_by(|a, b| sort_order(&first.keys, &a.1, &b.1).then(a.0.cmp(&b.0)))
                    .map(|(_, row)| row.clone());
            }
        }
        keep_first(&mut kept, &first.keys, first.limit);
        let mut chosen: Vec<usize> = kept.into_iter().map(|(i, _)| i).collect();
        chosen.sort_unstable();
        Ok(Some(chosen))
    }
}

/// Where the decoded rows of a grouped result go: kept as rows, or spread over columns.
trait Collected: Send + Sized {
    /// None yet, of the columns of `header`, for rows that `after` (the host's steps after
    /// the checks applied while decoding) then take.
    fn new(header: &Rows, after: &[HostOp]) -> Self;
    /// Adds a row (of the result's columns, in order), leaving `row` empty; an error where a
    /// value is not of its column's type.
    fn push(&mut self, row: &mut Vec<Value>) -> Result<(), RuntimeError>;
    /// The rows of `runs`, one after the other.
    fn join(runs: Vec<Self>) -> Self;
}

/// Rows kept as rows, in order. When the steps after them begin with a sort and a take, only
/// the rows that can be among the first it keeps: a run cuts its rows back to the first
/// `limit` (by the sort, ties in their order) whenever it holds twice that many, so a grouping
/// of millions of groups sorted to keep ten is never held whole. The sort and the take then
/// run over what is left ([`sort_first`]), which is what they would keep of all the rows.
struct KeptRows {
    rows: Vec<Vec<Value>>,
    first: Option<FirstRows>,
}

/// The sort keys (positions in a row, descending or not) and the rows kept of a sort and take.
#[derive(Clone)]
struct FirstRows {
    keys: Vec<(usize, bool)>,
    limit: usize,
}

impl FirstRows {
    /// The sort and take that `after` begins with, over rows of `header`'s columns.
    fn of(header: &Rows, after: &[HostOp]) -> Option<FirstRows> {
        let [HostOp::Sort(keys), HostOp::Limit(limit), ..] = after else {
            return None;
        };
        Some(FirstRows {
            keys: key_positions(keys, header).ok()?,
            limit: usize::try_from(*limit).unwrap_or(usize::MAX),
        })
    }

    /// Cuts `rows` back to the first `limit` by the sort, keeping their order.
    fn cut(&self, rows: &mut Vec<Vec<Value>>) {
        if rows.len() <= self.limit {
            return;
        }
        let mut first = first_rows(std::mem::take(rows), &self.keys, self.limit);
        first.sort_unstable_by_key(|(position, _)| *position);
        *rows = first.into_iter().map(|(_, row)| row).collect();
    }
}

impl Collected for KeptRows {
    fn new(header: &Rows, after: &[HostOp]) -> Self {
        KeptRows {
            rows: Vec::new(),
            first: FirstRows::of(header, after),
        }
    }

    fn push(&mut self, row: &mut Vec<Value>) -> Result<(), RuntimeError> {
        let width = row.len();
        self.rows
            .push(std::mem::replace(row, Vec::with_capacity(width)));
        if let Some(first) = &self.first {
            if self.rows.len() >= first.limit.saturating_mul(2).max(1024) {
                first.cut(&mut self.rows);
            }
        }
        Ok(())
    }

    fn join(runs: Vec<Self>) -> Self {
        let first = runs.first().and_then(|run| run.first.clone());
        let mut rows = Vec::with_capacity(runs.iter().map(|run| run.rows.len()).sum());
        for run in runs {
            rows.extend(run.rows);
        }
        KeptRows { rows, first }
    }
}

/// Rows spread over their columns, each built in its type's vector as the rows come.
struct ByColumn(Vec<ColumnBuilder>);

impl Collected for ByColumn {
    fn new(header: &Rows, _: &[HostOp]) -> Self {
        ByColumn(
            header
                .types
                .iter()
                .map(|ty| ColumnBuilder::new(*ty, 0))
                .collect(),
        )
    }

    fn push(&mut self, row: &mut Vec<Value>) -> Result<(), RuntimeError> {
        for (column, value) in self.0.iter_mut().zip(row.drain(..)) {
            column.push_owned(value).map_err(RuntimeError::Malformed)?;
        }
        Ok(())
    }

    fn join(runs: Vec<Self>) -> Self {
        let width = runs.first().map_or(0, |ByColumn(columns)| columns.len());
        let mut by_column: Vec<Vec<ColumnBuilder>> = (0..width).map(|_| Vec::new()).collect();
        for ByColumn(columns) in runs {
            for (parts, column) in by_column.iter_mut().zip(columns) {
                parts.push(column);
            }
        }
        ByColumn(
            by_column
                .into_iter()
                .filter_map(ColumnBuilder::concat)
                .collect(),
        )
    }
}

/// The leading host steps of a grouped result that look at one row at a time and leave its
/// columns as they are (`where` filters, sum checks): applied to each group as it is decoded,
/// so that a grouping of millions of groups followed by a `where` never holds them all.
struct RowChecks<'a> {
    ops: &'a [HostOp],
    /// The columns of a row once every step has run, as the steps name them: a computed
    /// column replaces its namesake or comes after those before it.
    header: Rows,
}

impl<'a> RowChecks<'a> {
    /// The row-at-a-time steps leading `steps` (filters, sum checks, computed columns) for a
    /// grouped result's rows: its keys (id and type), then its aggregates.
    fn for_groups(
        steps: &'a [HostOp],
        keys: impl Iterator<Item = (u32, DataType)>,
        aggregates: &[AggregateSlot],
    ) -> RowChecks<'a> {
        let count = steps
            .iter()
            .take_while(|op| {
                matches!(
                    op,
                    HostOp::Filter(_) | HostOp::CheckSum { .. } | HostOp::Compute { .. }
                )
            })
            .count();
        let (mut ids, mut types): (Vec<u32>, Vec<DataType>) =
            keys.chain(aggregates.iter().map(|a| (a.id, a.ty))).unzip();
        for op in &steps[..count] {
            if let HostOp::Compute { id, ty, .. } = op {
                if !ids.contains(id) {
                    ids.push(*id);
                    types.push(*ty);
                }
            }
        }
        RowChecks {
            ops: &steps[..count],
            header: Rows {
                ids,
                types,
                rows: Vec::new(),
            },
        }
    }

    /// Runs the steps on `row`: whether it passes every check (with its computed columns
    /// then in place); an error where a sum check fails.
    fn keep(&self, row: &mut Vec<Value>) -> Result<bool, RuntimeError> {
        for op in self.ops {
            if let HostOp::Compute { id, expr, .. } = op {
                let value = evaluate(expr, row, &self.header)?;
                match self.header.position(*id)? {
                    at if at < row.len() => row[at] = value,
                    _ => row.push(value),
                }
            } else if !check_row(op, row, &self.header)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether `row` (of the columns `header` names) passes `op`, a filter or a sum check; other
/// steps keep every row.
fn check_row(op: &HostOp, row: &[Value], header: &Rows) -> Result<bool, RuntimeError> {
    match op {
        HostOp::Filter(predicate) => Ok(evaluate(predicate, row, header)? == Value::Bool(true)),
        HostOp::CheckSum {
            exact,
            approximate,
            name,
        } => {
            let (exact, approximate) = (header.position(*exact)?, header.position(*approximate)?);
            // A wrapped sum is 2^64 units away from the true one (2^128 for a 128-bit one);
            // float rounding is far less.
            let (sum, unit, wrap_bits) = match &row[exact] {
                Value::Int(sum) => (*sum as f64, 1.0, 64),
                Value::Decimal(raw, scale) => (
                    decimal::to_float(*raw, *scale),
                    decimal::to_float(1, *scale),
                    64,
                ),
                Value::WideDecimal(raw, scale) => {
                    // A 128-bit decimal's sum leaves its type at 38 digits.
                    if !decimal::fits_precision_wide(*raw, DecimalType::MAX_PRECISION) {
                        return Err(RuntimeError::SumOverflow(name.clone()));
                    }
                    (
                        decimal::to_float(*raw, *scale),
                        decimal::to_float(1, *scale),
                        128,
                    )
                }
                _ => return Ok(true),
            };
            if let Value::Float(estimate) = row[approximate] {
                if (sum - estimate).abs() > 2f64.powi(wrap_bits - 1) * unit {
                    return Err(RuntimeError::SumOverflow(name.clone()));
                }
            }
            Ok(true)
        }
        _ => Ok(true),
    }
}

/// The buffers a hash grouping's key is read back from: its first words, then any others.
fn key_word_columns(key_buffer: usize, wide: &[usize]) -> Vec<(usize, u32)> {
    std::iter::once(key_buffer)
        .chain(wide.iter().copied())
        .map(|buffer| (buffer, 8))
        .collect()
}

/// A hash key's value from its field (its bits at the bottom of `field`, above them anything)
/// and its null flag: the field holds the key's offset from `min` when packed by range, else
/// its two's-complement bits.
fn hash_key_value(
    key: &HashKey,
    field: u64,
    null: bool,
    dictionary: Option<&Arc<Dictionary>>,
) -> Value {
    if null {
        return Value::Null;
    }
    let raw = match key.min {
        Some(min) => min.wrapping_add((field & wide_key::low_mask(key.bits)) as i64),
        None => sign_extended(field, key.bits),
    };
    key_value(key.ty, raw, dictionary)
}

/// A group key's value from the bits it was grouped by: a float's bits, a string's dictionary
/// code, the others' values.
fn key_value(ty: DataType, raw: i64, dictionary: Option<&Arc<Dictionary>>) -> Value {
    match (ty, dictionary) {
        (DataType::F64, _) => Value::Float(f64::from_bits(raw as u64)),
        (DataType::F32, _) => Value::Float(f64::from(f32::from_bits(raw as u32))),
        (DataType::Str, Some(d)) => Value::Str(d.value(raw as i32).unwrap_or_default().into()),
        (DataType::Date, _) => Value::Date(raw as i32),
        (DataType::Timestamp, _) => Value::Timestamp(raw),
        (DataType::Time, _) => Value::Time(raw),
        (DataType::Bool, _) => Value::Bool(raw != 0),
        (DataType::Decimal(decimal), _) => Value::Decimal(raw, decimal.scale),
        _ => Value::Int(raw),
    }
}

/// The average of `count` decimals of `scale` whose raw units sum to `raw`: the sum over the
/// count times the scale's unit, in floating point (as DuckDB divides a decimal's exact sum).
/// Pipelines over a grouping's slots divide the same way (`codegen::groups`).
pub fn average(raw: i64, scale: u8, count: i64) -> f64 {
    raw as f64 / (count as f64 * 10i64.pow(u32::from(scale)) as f64)
}

fn aggregate_value(
    slot: &AggregateSlot,
    values: &[u8],
    counts: Option<&[u8]>,
    index: usize,
    dictionary: Option<&Arc<Dictionary>>,
) -> Result<Value, RuntimeError> {
    let count = match counts {
        Some(bytes) => match element(bytes, DataType::I64, index)? {
            Value::Int(n) => Some(n),
            _ => None,
        },
        None => None,
    };
    if count == Some(0) {
        return Ok(Value::Null);
    }
    let value = element(values, slot.accumulator, index)?;
    Ok(match (slot.kind, value) {
        (AggregateKind::Avg, Value::Float(sum)) => Value::Float(sum / count.unwrap_or(1) as f64),
        (AggregateKind::Avg, Value::Decimal(raw, scale)) => {
            Value::Float(average(raw, scale, count.unwrap_or(1)))
        }
        (AggregateKind::Avg, Value::WideDecimal(raw, scale)) => {
            Value::Float(decimal::to_float(raw, scale) / count.unwrap_or(1) as f64)
        }
        (_, Value::Int(code)) if slot.ty == DataType::Str => {
            let text = dictionary
                .and_then(|d| d.value(code as i32))
                .unwrap_or_default();
            Value::Str(text.into())
        }
        (_, value) => value,
    })
}

fn apply(op: &HostOp, rows: &mut Rows) -> Result<(), RuntimeError> {
    match op {
        HostOp::Sort(keys) => {
            let keys = key_positions(keys, rows)?;
            let order = |a: &Vec<Value>, b: &Vec<Value>| sort_order(&keys, a, b);
            // Both sorts are stable: rows equal in every key keep their order.
            if rows.rows.len() < PARALLEL_GROUPS {
                rows.rows.sort_by(order);
            } else {
                rows.rows.par_sort_by(order);
            }
        }
        HostOp::Limit(n) => rows
            .rows
            .truncate(usize::try_from(*n).unwrap_or(usize::MAX)),
        HostOp::Filter(_) => {
            let all = std::mem::take(&mut rows.rows);
            let keep = |row: Vec<Value>| match check_row(op, &row, rows) {
                Ok(true) => Some(Ok(row)),
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            };
            rows.rows = if all.len() < PARALLEL_GROUPS {
                all.into_iter().filter_map(keep).collect::<Result<_, _>>()?
            } else {
                all.into_par_iter()
                    .filter_map(keep)
                    .collect::<Result<_, _>>()?
            };
        }
        HostOp::CheckSum { .. } => {
            for row in &rows.rows {
                check_row(op, row, rows)?;
            }
        }
        HostOp::Repeat { copies } => {
            let copies = rows.position(*copies)?;
            let mut repeated = Vec::with_capacity(rows.rows.len());
            for row in std::mem::take(&mut rows.rows) {
                let times = match row[copies] {
                    Value::Int(n) => usize::try_from(n).unwrap_or(0),
                    _ => 0,
                };
                repeated.extend(std::iter::repeat_n(row, times));
            }
            rows.rows = repeated;
        }
        HostOp::Aggregate { keys, aggregates } => *rows = grouped(rows, keys, aggregates)?,
        HostOp::Compute { id, ty, expr } => {
            let value = |row: &Vec<Value>| evaluate(expr, row, rows);
            let values: Vec<Value> = if rows.rows.len() < PARALLEL_GROUPS {
                rows.rows.iter().map(value).collect::<Result<_, _>>()?
            } else {
                rows.rows.par_iter().map(value).collect::<Result<_, _>>()?
            };
            let position = match rows.ids.iter().position(|i| i == id) {
                Some(p) => p,
                None => {
                    rows.ids.push(*id);
                    rows.types.push(*ty);
                    for row in &mut rows.rows {
                        row.push(Value::Null);
                    }
                    rows.ids.len() - 1
                }
            };
            for (row, value) in rows.rows.iter_mut().zip(values) {
                row[position] = value;
            }
        }
    }
    Ok(())
}

/// The positions among `rows`' columns of a sort's `keys` (column ids, each descending or
/// not).
fn key_positions(keys: &[(u32, bool)], rows: &Rows) -> Result<Vec<(usize, bool)>, RuntimeError> {
    keys.iter()
        .map(|(id, descending)| Ok((rows.position(*id)?, *descending)))
        .collect()
}

/// How rows `a` and `b` compare by the columns at `keys` (positions, each descending or not).
fn sort_order(keys: &[(usize, bool)], a: &[Value], b: &[Value]) -> Ordering {
    for &(p, descending) in keys {
        let order = compare_for_sort(&a[p], &b[p], descending);
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// The first `limit` of `rows` by the columns at `keys`, rows equal in every key in their
/// order, each with its position among `rows`; in no order: the rest are only partitioned off
/// (`select_nth_unstable`, linear), not sorted.
fn first_rows(
    rows: Vec<Vec<Value>>,
    keys: &[(usize, bool)],
    limit: usize,
) -> Vec<(usize, Vec<Value>)> {
    if limit == 0 {
        return Vec::new();
    }
    let mut numbered: Vec<(usize, Vec<Value>)> = rows.into_iter().enumerate().collect();
    keep_first(&mut numbered, keys, limit);
    numbered
}

/// Keeps the first `limit` of `numbered` rows by the columns at `keys`, rows equal in every key
/// by their numbers; in no order.
fn keep_first(numbered: &mut Vec<(usize, Vec<Value>)>, keys: &[(usize, bool)], limit: usize) {
    if limit == 0 {
        numbered.clear();
    } else if limit < numbered.len() {
        numbered.select_nth_unstable_by(limit - 1, |a, b| {
            sort_order(keys, &a.1, &b.1).then(a.0.cmp(&b.0))
        });
        numbered.truncate(limit);
    }
}

/// The first `limit` rows as `sort` by `keys` orders them, in that order, without sorting the
/// others. Equal rows keep their order, as a stable sort keeps it.
fn sort_first(keys: &[(u32, bool)], limit: u64, rows: &mut Rows) -> Result<(), RuntimeError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if limit >= rows.rows.len() {
        return apply(&HostOp::Sort(keys.to_vec()), rows);
    }
    let keys = key_positions(keys, rows)?;
    let mut first = first_rows(std::mem::take(&mut rows.rows), &keys, limit);
    first.sort_unstable_by(|a, b| sort_order(&keys, &a.1, &b.1).then(a.0.cmp(&b.0)));
    rows.rows = first.into_iter().map(|(_, row)| row).collect();
    Ok(())
}

/// SQL ordering for `sort`: nulls last in either direction.
fn compare_for_sort(a: &Value, b: &Value, descending: bool) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        _ => {
            let order = scalar::compare(a, b).unwrap_or(Ordering::Equal);
            if descending {
                order.reverse()
            } else {
                order
            }
        }
    }
}

/// One row per group of equal `keys` among `rows` (groups in the order they first appear),
/// holding the keys and `aggregates`; with no keys, exactly one row, as SQL gives.
fn grouped(
    rows: &Rows,
    keys: &[(u32, DataType, HostExpr)],
    aggregates: &[HostAggregate],
) -> Result<Rows, RuntimeError> {
    // A key or argument that is a column is read in place; others are computed per row.
    let place = |expr: &HostExpr| match expr {
        HostExpr::Column(id) => rows.position(*id).map(Some),
        _ => Ok(None),
    };
    let key_places = keys
        .iter()
        .map(|(_, _, expr)| place(expr))
        .collect::<Result<Vec<_>, _>>()?;
    let arg_places = aggregates
        .iter()
        .map(|a| a.arg.as_ref().map_or(Ok(None), place))
        .collect::<Result<Vec<_>, _>>()?;
    // Groups by the hash of their keys; a hash shared by several groups chains them.
    let mut first: HashMap<u64, usize> = HashMap::new();
    let mut next: Vec<Option<usize>> = Vec::new();
    let mut groups: Vec<(Vec<Value>, Vec<Accumulator>)> = Vec::new();
    let fresh = || aggregates.iter().map(|_| Accumulator::default()).collect();
    if keys.is_empty() {
        groups.push((Vec::new(), fresh()));
        next.push(None);
    }
    // Keys that are all columns are hashed ahead, on every core (strings take the time).
    let hashed: Option<Vec<u64>> =
        (rows.rows.len() >= PARALLEL_GROUPS && key_places.iter().all(Option::is_some)).then(|| {
            rows.rows
                .par_iter()
                .map(|row| group_hash(key_places.iter().flatten().map(|&at| &row[at])))
                .collect()
        });
    let counted = Value::Bool(true);
    let mut current = Vec::with_capacity(keys.len());
    for (index, row) in rows.rows.iter().enumerate() {
        current.clear();
        for ((_, _, expr), &at) in keys.iter().zip(&key_places) {
            current.push(read_or_evaluate(expr, at, row, rows)?);
        }
        let hash = match &hashed {
            Some(hashes) => hashes[index],
            None => group_hash(current.iter().map(AsRef::as_ref)),
        };
        let mut found = first.get(&hash).copied();
        while let Some(group) = found {
            let same = groups[group]
                .0
                .iter()
                .zip(&current)
                .all(|(held, value)| same_group_key(held, value));
            if same {
                break;
            }
            found = next[group];
        }
        let group = match found {
            Some(group) => group,
            None if keys.is_empty() => 0,
            None => {
                let values = current.drain(..).map(|v| v.into_owned()).collect();
                groups.push((values, fresh()));
                next.push(first.insert(hash, groups.len() - 1));
                groups.len() - 1
            }
        };
        for ((accumulator, aggregate), &at) in
            groups[group].1.iter_mut().zip(aggregates).zip(&arg_places)
        {
            match &aggregate.arg {
                Some(arg) => {
                    accumulator.add(aggregate, read_or_evaluate(arg, at, row, rows)?.as_ref())?
                }
                // `count()` counts rows: any value that is not null.
                None => accumulator.add(aggregate, &counted)?,
            }
        }
    }
    Ok(Rows {
        ids: keys
            .iter()
            .map(|(id, _, _)| *id)
            .chain(aggregates.iter().map(|a| a.id))
            .collect(),
        types: keys
            .iter()
            .map(|(_, ty, _)| *ty)
            .chain(aggregates.iter().map(|a| a.ty))
            .collect(),
        rows: groups
            .into_iter()
            .map(|(mut values, accumulators)| {
                values.extend(
                    accumulators
                        .into_iter()
                        .zip(aggregates)
                        .map(|(accumulator, aggregate)| accumulator.finish(aggregate)),
                );
                values
            })
            .collect(),
    })
}

/// `expr`'s value in `row`: borrowed from the row where it is the column at `at`.
fn read_or_evaluate<'a>(
    expr: &HostExpr,
    at: Option<usize>,
    row: &'a [Value],
    rows: &Rows,
) -> Result<std::borrow::Cow<'a, Value>, RuntimeError> {
    match at {
        Some(at) => Ok(std::borrow::Cow::Borrowed(&row[at])),
        None => evaluate(expr, row, rows).map(std::borrow::Cow::Owned),
    }
}

/// The hash of a group's key values, as [`same_group_key`] compares them.
fn group_hash<'a>(values: impl Iterator<Item = &'a Value>) -> u64 {
    let mut hasher = twox_hash::XxHash3_64::default();
    for value in values {
        std::hash::Hash::hash(&GroupKey::of(value), &mut hasher);
    }
    std::hash::Hasher::finish(&hasher)
}

/// Whether two values of one key put their rows in one group: nulls together, floats by their
/// bits with every NaN one value and -0.0 equal to 0.0 (as `group` on the device and SQL's
/// GROUP BY treat them).
fn same_group_key(a: &Value, b: &Value) -> bool {
    GroupKey::of(a) == GroupKey::of(b)
}

/// A group key's value as it is hashed and compared, borrowed from the value: floats by their
/// bits, with every NaN one value and -0.0 equal to 0.0; the values of one key share a type,
/// so a decimal's scale.
#[derive(PartialEq, Eq, Hash)]
enum GroupKey<'a> {
    Null,
    Int(i64),
    Wide(i128),
    Float(u64),
    Str(&'a str),
    Date(i32),
    Bool(bool),
}

impl<'a> GroupKey<'a> {
    fn of(value: &'a Value) -> GroupKey<'a> {
        match value {
            Value::Null => GroupKey::Null,
            Value::Int(i) | Value::Decimal(i, _) | Value::Timestamp(i) | Value::Time(i) => {
                GroupKey::Int(*i)
            }
            Value::WideDecimal(i, _) => GroupKey::Wide(*i),
            Value::Float(x) if x.is_nan() => GroupKey::Float(f64::NAN.to_bits()),
            Value::Float(x) if *x == 0.0 => GroupKey::Float(0),
            Value::Float(x) => GroupKey::Float(x.to_bits()),
            Value::Str(s) => GroupKey::Str(s),
            Value::Date(d) => GroupKey::Date(*d),
            Value::Bool(b) => GroupKey::Bool(*b),
        }
    }
}

/// An aggregate of one group so far, over its non-null values.
#[derive(Default)]
struct Accumulator {
    count: i64,
    /// Integer sums, exact (an `i64` sum that leaves its range is an error, as on the device).
    int_sum: i128,
    float_sum: f64,
    /// The least or greatest value (floats ordered with NaN above every number).
    best: Option<Value>,
}

impl Accumulator {
    fn add(&mut self, aggregate: &HostAggregate, value: &Value) -> Result<(), RuntimeError> {
        if *value == Value::Null {
            return Ok(());
        }
        self.count += 1;
        match (aggregate.kind, value) {
            (AggregateKind::Avg, Value::Decimal(raw, scale)) => {
                self.float_sum += decimal::to_float(*raw, *scale);
            }
            (AggregateKind::Avg, Value::WideDecimal(raw, scale)) => {
                self.float_sum += decimal::to_float(*raw, *scale);
            }
            // A 128-bit decimal's sum stays within 38 digits, as on the device.
            (AggregateKind::Sum, Value::WideDecimal(raw, _)) => {
                self.int_sum = self
                    .int_sum
                    .checked_add(*raw)
                    .filter(|&sum| decimal::fits_precision_wide(sum, DecimalType::MAX_PRECISION))
                    .ok_or_else(|| RuntimeError::SumOverflow(aggregate.name.clone()))?;
            }
            (AggregateKind::Sum | AggregateKind::Avg, Value::Int(i) | Value::Decimal(i, _)) => {
                self.int_sum += i128::from(*i);
                if aggregate.kind == AggregateKind::Sum && i64::try_from(self.int_sum).is_err() {
                    return Err(RuntimeError::SumOverflow(aggregate.name.clone()));
                }
            }
            (AggregateKind::Sum | AggregateKind::Avg, Value::Float(x)) => self.float_sum += x,
            (AggregateKind::Min | AggregateKind::Max, _) => {
                let wanted = match aggregate.kind {
                    AggregateKind::Min => Ordering::Less,
                    _ => Ordering::Greater,
                };
                let better = self
                    .best
                    .as_ref()
                    .is_none_or(|best| scalar::compare(value, best) == Some(wanted));
                if better {
                    self.best = Some(value.clone());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self, aggregate: &HostAggregate) -> Value {
        if aggregate.kind == AggregateKind::Count {
            return Value::Int(self.count);
        }
        if self.count == 0 {
            return Value::Null;
        }
        match aggregate.kind {
            AggregateKind::Sum if aggregate.ty.is_float() => Value::Float(self.float_sum),
            AggregateKind::Sum => match aggregate.ty {
                DataType::Decimal(decimal) if decimal.is_wide() => {
                    Value::WideDecimal(self.int_sum, decimal.scale)
                }
                DataType::Decimal(decimal) => Value::Decimal(self.int_sum as i64, decimal.scale),
                _ => Value::Int(self.int_sum as i64),
            },
            AggregateKind::Avg => {
                let total = self.float_sum + self.int_sum as f64;
                Value::Float(total / self.count as f64)
            }
            _ => self.best.unwrap_or(Value::Null),
        }
    }
}

/// Evaluates a host expression over one row, with SQL null semantics.
fn evaluate(expr: &HostExpr, row: &[Value], rows: &Rows) -> Result<Value, RuntimeError> {
    Ok(match expr {
        HostExpr::Column(id) => row[rows.position(*id)?].clone(),
        HostExpr::Literal(value) => value.clone(),
        HostExpr::Unary { op, operand } => {
            scalar::unary(*op, evaluate(operand, row, rows)?).map_err(scalar_error)?
        }
        HostExpr::Binary { op, left, right } => {
            let l = evaluate(left, row, rows)?;
            // A left side that decides `and` (false) or `or` (true) leaves the right side
            // unevaluated, as the kernels leave its overflow uncounted.
            match (op, &l) {
                (Binary::And, Value::Bool(false)) | (Binary::Or, Value::Bool(true)) => l,
                _ => scalar::binary(*op, l, evaluate(right, row, rows)?).map_err(scalar_error)?,
            }
        }
        HostExpr::Cast { ty, operand } => {
            scalar::cast(evaluate(operand, row, rows)?, *ty).map_err(scalar_error)?
        }
        HostExpr::Call { function, args } => {
            let [arg] = args.as_slice() else {
                return Err(RuntimeError::Malformed(format!(
                    "`{}` takes one argument",
                    function.name()
                )));
            };
            scalar::call(*function, evaluate(arg, row, rows)?).map_err(scalar_error)?
        }
        HostExpr::Case {
            branches,
            otherwise,
        } => {
            for (when, then) in branches {
                if evaluate(when, row, rows)? == Value::Bool(true) {
                    return evaluate(then, row, rows);
                }
            }
            match otherwise {
                Some(e) => evaluate(e, row, rows)?,
                None => Value::Null,
            }
        }
        HostExpr::IsNull { operand, negated } => {
            let null = evaluate(operand, row, rows)? == Value::Null;
            Value::Bool(null != *negated)
        }
        HostExpr::Matches {
            operand,
            kind,
            pattern,
        } => match evaluate(operand, row, rows)? {
            Value::Null => Value::Null,
            Value::Str(text) => Value::Bool(kind.matches(pattern, &text)),
            other => {
                return Err(RuntimeError::Malformed(format!(
                    "`{}` of the non-string {other}",
                    kind.name()
                )))
            }
        },
        HostExpr::Derived { operand, function } => {
            let derived = DerivedString::parse(function).ok_or_else(|| {
                RuntimeError::Malformed(format!("`{function}` is not a string function"))
            })?;
            match evaluate(operand, row, rows)? {
                Value::Null => Value::Null,
                Value::Str(text) => derived.value(&text),
                other => {
                    return Err(RuntimeError::Malformed(format!(
                        "`{function}` of the non-string {other}"
                    )))
                }
            }
        }
    })
}

/// The host's error for an operation without a value.
fn scalar_error(error: ScalarError) -> RuntimeError {
    match error {
        ScalarError::Overflow => RuntimeError::Overflow,
        ScalarError::Unsupported(what) => RuntimeError::Malformed(what),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::DenseKey;

    #[test]
    fn rows_kept_for_a_sort_and_take_give_its_rows() {
        // Runs of decoded rows, each cut back as it grows, then joined: the sort and the take
        // over what is left give what they give over every row, ties in their order.
        let keys: Vec<i64> = (0..20_000).map(|i| i * 7919 % 13).collect();
        let header = Rows {
            ids: vec![0, 1],
            types: vec![DataType::I64, DataType::I64],
            rows: Vec::new(),
        };
        let row = |i: usize| vec![Value::Int(keys[i]), Value::Int(i as i64)];
        for descending in [false, true] {
            for limit in [0, 1, 10, 700, 30_000] {
                let after = [HostOp::Sort(vec![(0, descending)]), HostOp::Limit(limit)];
                let runs: Vec<KeptRows> = (0..keys.len())
                    .collect::<Vec<_>>()
                    .chunks(3_000)
                    .map(|chunk| {
                        let mut run = KeptRows::new(&header, &after);
                        for &i in chunk {
                            run.push(&mut row(i)).expect("pushed");
                        }
                        run
                    })
                    .collect();
                let mut kept = Rows {
                    ids: header.ids.clone(),
                    types: header.types.clone(),
                    rows: KeptRows::join(runs).rows,
                };
                sort_first(&[(0, descending)], limit, &mut kept).expect("sorts");
                let mut all = Rows {
                    ids: header.ids.clone(),
                    types: header.types.clone(),
                    rows: (0..keys.len()).map(row).collect(),
                };
                apply(&HostOp::Sort(vec![(0, descending)]), &mut all).expect("sorts");
                all.rows.truncate(limit as usize);
                assert_eq!(kept.rows, all.rows, "descending {descending}, {limit} rows");
            }
        }
    }

    #[test]
    fn the_first_rows_of_a_sort_are_those_a_whole_sort_gives() {
        // Keys with ties and nulls; the second column numbers the rows, so that the order of
        // equal rows shows.
        let keys: Vec<Option<i64>> = (0..500)
            .map(|i| (i % 7 != 3).then_some(i * 37 % 11))
            .collect();
        let rows = || Rows {
            ids: vec![0, 1],
            types: vec![DataType::I64, DataType::I64],
            rows: keys
                .iter()
                .enumerate()
                .map(|(i, k)| vec![k.map_or(Value::Null, Value::Int), Value::Int(i as i64)])
                .collect(),
        };
        for sort in [vec![(0, false)], vec![(0, true)]] {
            let mut whole = rows();
            apply(&HostOp::Sort(sort.clone()), &mut whole).expect("sorts");
            for limit in [0, 1, 5, 64, 499, 500, 900] {
                let mut first = rows();
                sort_first(&sort, limit, &mut first).expect("sorts");
                let expected = &whole.rows[..whole.rows.len().min(limit as usize)];
                assert_eq!(first.rows, expected, "{sort:?}, {limit} rows");
            }
        }
    }

    fn aggregate(id: u32, kind: AggregateKind, ty: DataType, arg: u32) -> HostAggregate {
        HostAggregate {
            id,
            name: format!("a{id}"),
            kind,
            ty,
            arg: Some(HostExpr::Column(arg)),
        }
    }

    #[test]
    fn host_groups_follow_sql() {
        let rows = Rows {
            ids: vec![1, 2],
            types: vec![DataType::F64, DataType::F64],
            rows: vec![
                vec![Value::Float(0.0), Value::Float(1.0)],
                vec![Value::Float(-0.0), Value::Float(f64::NAN)],
                vec![Value::Null, Value::Null],
                vec![Value::Float(f64::NAN), Value::Float(2.0)],
                vec![Value::Float(f64::NAN), Value::Float(3.0)],
            ],
        };
        let keys = [(1, DataType::F64, HostExpr::Column(1))];
        let aggregates = [
            aggregate(3, AggregateKind::Max, DataType::F64, 2),
            aggregate(4, AggregateKind::Min, DataType::F64, 2),
            aggregate(5, AggregateKind::Count, DataType::I64, 2),
            aggregate(6, AggregateKind::Sum, DataType::F64, 2),
        ];
        let grouped = grouped(&rows, &keys, &aggregates).expect("grouped");
        // 0.0 and -0.0 are one group, as are the NaNs; NaN is the greatest value.
        assert_eq!(grouped.rows.len(), 3);
        let zero = &grouped.rows[0];
        assert!(matches!(zero[1], Value::Float(x) if x.is_nan()));
        assert_eq!(zero[2], Value::Float(1.0));
        assert_eq!(zero[3], Value::Int(2));
        assert_eq!(
            grouped.rows[1][1..],
            [Value::Null, Value::Null, Value::Int(0), Value::Null]
        );
        assert_eq!(grouped.rows[2][4], Value::Float(5.0));
    }

    #[test]
    fn large_host_groupings_hash_ahead_and_group_alike() {
        // Enough rows that column keys are hashed ahead on every core; a computed key (the
        // same string, through a `case`) takes the row-by-row path. Both group alike.
        let rows = Rows {
            ids: vec![1, 2],
            types: vec![DataType::Str, DataType::F64],
            rows: (0..3 * PARALLEL_GROUPS)
                .map(|i| {
                    let key = match i % 4 {
                        0 => Value::Null,
                        n => Value::Str(format!("key {n}").into()),
                    };
                    let x = if i % 2 == 0 { 0.0 } else { -0.0 };
                    vec![key, Value::Float(x)]
                })
                .collect(),
        };
        let computed = HostExpr::Case {
            branches: vec![(HostExpr::Literal(Value::Bool(true)), HostExpr::Column(1))],
            otherwise: None,
        };
        let count = [aggregate(3, AggregateKind::Count, DataType::I64, 2)];
        let by = |key: HostExpr| {
            let keys = [
                (1, DataType::Str, key),
                (2, DataType::F64, HostExpr::Column(2)),
            ];
            let mut rows = grouped(&rows, &keys, &count).expect("grouped").rows;
            rows.sort_by(|a, b| compare_for_sort(&a[0], &b[0], false));
            rows
        };
        let ahead = by(HostExpr::Column(1));
        assert_eq!(ahead, by(computed));
        // Four keys (null one of them), 0.0 and -0.0 one value.
        assert_eq!(ahead.len(), 4);
        assert!(ahead
            .iter()
            .all(|row| row[2] == Value::Int((3 * PARALLEL_GROUPS / 4) as i64)));
    }

    #[test]
    fn a_host_integer_sum_beyond_64_bits_is_an_error() {
        let rows = Rows {
            ids: vec![1],
            types: vec![DataType::I64],
            rows: vec![vec![Value::Int(i64::MAX)], vec![Value::Int(1)]],
        };
        let sum = [aggregate(2, AggregateKind::Sum, DataType::I64, 1)];
        assert!(matches!(
            grouped(&rows, &[], &sum),
            Err(RuntimeError::SumOverflow(name)) if name == "a2"
        ));
        // An average of the same values is exact enough to be computed.
        let avg = [aggregate(2, AggregateKind::Avg, DataType::F64, 1)];
        let averaged = grouped(&rows, &[], &avg).expect("averaged");
        assert_eq!(
            averaged.rows,
            vec![vec![Value::Float(i64::MAX as f64 / 2.0 + 0.5)]]
        );
    }

    #[test]
    fn rows_share_one_copy_of_each_dictionary_entry() {
        let words = |n: usize| (0..n).map(|i| format!("w{i:05}")).collect::<Vec<_>>();
        let mut strings = SharedStrings::new(Arc::new(Dictionary::from_unsorted(words(3))), 10);
        let (first, again) = (strings.get(1), strings.get(1));
        assert_eq!(&*first, "w00001");
        assert!(Arc::ptr_eq(&first, &again));
        // A code no entry has (a slot no row wrote) reads as the empty string.
        assert_eq!(&*strings.get(7), "");
        assert_eq!(&*strings.get(-1), "");
        // Far more entries than rows: each row gets its own copy, of the right entry.
        let mut sparse = SharedStrings::new(Arc::new(Dictionary::from_unsorted(words(20_000))), 2);
        assert!(sparse.copies.is_none());
        assert_eq!(&*sparse.get(12_345), "w12345");
    }

    #[test]
    fn reordering_moves_values_and_copies_only_repeats() {
        let row = vec![Value::Int(1), Value::Str("b".into()), Value::Int(3)];
        assert_eq!(reorder(row.clone(), &[0, 1, 2]), row);
        assert_eq!(
            reorder(row.clone(), &[2, 1, 1, 0]),
            vec![
                Value::Int(3),
                Value::Str("b".into()),
                Value::Str("b".into()),
                Value::Int(1)
            ]
        );
    }

    #[test]
    fn a_sort_and_take_of_groups_decodes_what_sorting_every_group_keeps() {
        // Groups keyed by a string, chosen by their codes before any string is decoded: the
        // dictionary's order is not the order the strings were met in.
        let names: Vec<Value> = (0..500)
            .map(|i| Value::Str(format!("name {}", i * 7919 % 500).into()))
            .collect();
        let catalog = Catalog::from_columns(vec![(
            "s".into(),
            vec![(
                "name".into(),
                tessera_storage::Column::from_values(DataType::Str, names.iter())
                    .expect("a column"),
            )],
        )]);
        let source = Some(("s".to_string(), "name".to_string()));
        let shape = ResultShape::Dense {
            keys: vec![DenseKey {
                id: 0,
                ty: DataType::Str,
                min: 0,
                size: 500,
                nullable: true,
                dictionary: source.clone(),
            }],
            aggregates: vec![
                AggregateSlot {
                    id: 1,
                    kind: AggregateKind::Count,
                    ty: DataType::I64,
                    buffer: 1,
                    accumulator: DataType::I64,
                    count: None,
                    dictionary: None,
                },
                AggregateSlot {
                    id: 2,
                    kind: AggregateKind::Max,
                    ty: DataType::Str,
                    buffer: 2,
                    accumulator: DataType::I32,
                    count: Some(3),
                    dictionary: source,
                },
            ],
            presence: 0,
        };
        // Slot 500 is the null key's; counts tie often, and some maxima are null.
        let slots: Vec<u64> = (0..=500).filter(|slot| slot % 3 != 0).collect();
        let bytes = |value: &dyn Fn(u64) -> Vec<u8>| (0..=500).flat_map(value).collect();
        let fetched = || FetchedResult {
            fetched: Fetched::Groups(PresentSlots {
                slots: slots.clone(),
                columns: vec![
                    bytes(&|slot| ((slot * 31) % 9).to_le_bytes().to_vec()),
                    bytes(&|slot| (((slot * 17) % 500) as i32).to_le_bytes().to_vec()),
                    bytes(&|slot| (slot % 5).to_le_bytes().to_vec()),
                ],
                gathered: false,
            }),
            capacity: 0,
            sorted_on_host: false,
        };
        let spec = |steps: Vec<HostOp>| ResultSpec {
            shape: shape.clone(),
            steps,
            output: vec![("key".into(), 0), ("n".into(), 1), ("top".into(), 2)],
            output_types: vec![DataType::Str, DataType::I64, DataType::Str],
            status_buffer: 4,
            host_sort: None,
        };
        for keys in [
            vec![(1, true), (0, false)],
            vec![(2, false), (0, true)],
            vec![(0, true)],
            vec![(1, false)],
        ] {
            let sorted =
                decode_fetched(&spec(vec![HostOp::Sort(keys.clone())]), fetched(), &catalog)
                    .expect("decodes")
                    .rows;
            for limit in [0, 1, 7, 100, 10_000] {
                let steps = vec![HostOp::Sort(keys.clone()), HostOp::Limit(limit)];
                let taken = decode_fetched(&spec(steps), fetched(), &catalog).expect("decodes");
                let kept = &sorted[..sorted.len().min(limit as usize)];
                assert_eq!(taken.rows, kept, "{keys:?}, {limit} rows");
            }
        }
    }

    /// Rows sorted from their keys as stored come in the order the host's sort of their values
    /// gives: nulls last either way, NaN above every float and -0 equal to 0, strings by their
    /// text, ties in their order; with and without a take.
    #[test]
    fn rows_sorted_as_stored_follow_the_sort_of_their_values() {
        let names: Vec<Value> = (0..40)
            .map(|i| Value::Str(format!("n{}", i * 7 % 40).into()))
            .collect();
        let catalog = Catalog::from_columns(vec![(
            "t".into(),
            vec![(
                "name".into(),
                tessera_storage::Column::from_values(DataType::Str, names.iter())
                    .expect("a column"),
            )],
        )]);
        let count = 300usize;
        let decimal = DataType::Decimal(tessera_storage::DecimalType {
            precision: 15,
            scale: 2,
        });
        let wide = DataType::Decimal(tessera_storage::DecimalType {
            precision: 30,
            scale: 2,
        });
        let column = |id: u32, ty: DataType, validity: bool| RowColumn {
            id,
            ty,
            buffer: id as usize,
            validity: validity.then_some(10 + id as usize),
            dictionary: (ty == DataType::Str).then(|| ("t".to_string(), "name".to_string())),
        };
        let columns = vec![
            column(0, DataType::I32, true),
            column(1, DataType::Str, false),
            column(2, DataType::F64, true),
            column(3, decimal, false),
            column(4, DataType::Date, false),
            column(5, wide, true),
            column(6, DataType::Bool, false),
        ];
        let floats = [
            f64::NAN,
            -0.0,
            0.0,
            -1.5,
            2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let bytes: Vec<Column> = vec![
            (
                (0..count)
                    .flat_map(|i| ((i % 7) as i32 - 3).to_le_bytes())
                    .collect(),
                Some((0..count).map(|i| u8::from(i % 11 != 0)).collect()),
            ),
            (
                (0..count)
                    .flat_map(|i| ((i * 13 % 40) as i32).to_le_bytes())
                    .collect(),
                None,
            ),
            (
                (0..count)
                    .flat_map(|i| floats[i % floats.len()].to_le_bytes())
                    .collect(),
                Some((0..count).map(|i| u8::from(i % 13 != 0)).collect()),
            ),
            (
                (0..count)
                    .flat_map(|i| ((i as i64 % 5) * -250).to_le_bytes())
                    .collect(),
                None,
            ),
            (
                (0..count)
                    .flat_map(|i| ((i as i32 % 9) * 400 - 1800).to_le_bytes())
                    .collect(),
                None,
            ),
            (
                (0..count)
                    .flat_map(|i| ((i as i128 % 4 - 2) << 70).to_le_bytes())
                    .collect(),
                Some((0..count).map(|i| u8::from(i % 5 != 0)).collect()),
            ),
            ((0..count).map(|i| u8::from(i % 3 == 0)).collect(), None),
        ];
        let spec = |steps: Vec<HostOp>| ResultSpec {
            shape: ResultShape::Rows {
                columns: columns.clone(),
                count_buffer: 20,
            },
            steps,
            output: columns
                .iter()
                .map(|c| (format!("c{}", c.id), c.id))
                .collect(),
            output_types: columns.iter().map(|c| c.ty).collect(),
            status_buffer: 21,
            host_sort: None,
        };
        let fetched = || FetchedResult {
            fetched: Fetched::Rows {
                count,
                columns: bytes.clone(),
            },
            capacity: 0,
            sorted_on_host: false,
        };
        let all = decode_fetched(&spec(Vec::new()), fetched(), &catalog).expect("decodes");
        for keys in [
            vec![(0, false), (1, true)],
            vec![(2, true), (3, false)],
            vec![(2, false), (4, true), (1, false)],
            vec![(5, true), (6, false), (0, true)],
            vec![(6, true), (3, true)],
        ] {
            let mut rows = Rows {
                ids: columns.iter().map(|c| c.id).collect(),
                types: columns.iter().map(|c| c.ty).collect(),
                rows: all.rows.clone(),
            };
            apply(&HostOp::Sort(keys.clone()), &mut rows).expect("sorts");
            for limit in [None, Some(0), Some(1), Some(29), Some(1000)] {
                let mut steps = vec![HostOp::Sort(keys.clone())];
                steps.extend(limit.map(HostOp::Limit));
                let sorted = decode_fetched(&spec(steps), fetched(), &catalog).expect("decodes");
                let kept = limit.map_or(count, |l| (l as usize).min(count));
                // NaN is not equal to itself as a value: compare the rows' text.
                let text = |rows: &[Vec<Value>]| format!("{rows:?}");
                assert_eq!(
                    text(&sorted.rows),
                    text(&rows.rows[..kept]),
                    "{keys:?}, {limit:?}"
                );
            }
        }
    }
}
