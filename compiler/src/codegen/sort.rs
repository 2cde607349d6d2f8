//! `sort` (and `sort … | take k`) over rows a query writes out, on the device: the runtime's
//! radix sort over the sort keys' parts, or its top-k for one narrow key and a small k, then a
//! gather of every output column in the sorted order. The host work left is the `take`, which
//! the result's readback applies by reading only the first rows.

use std::collections::HashMap;

use tessera_grammar::Diagnostic;
use tessera_runtime::primitives::sort::{
    build_sort_kernel, sort_parts, top_k_parts, Half, KeyPart, SortKernel, TopKInput, DIGIT_BITS,
    TOPK_MAX_K, TOPK_WORDS_PER_PART,
};
use tessera_runtime::program::{
    BufferSpec, Extent, Fill, HostOp, KernelLaunch, Param, ResultShape, RowColumn,
};
use tessera_storage::DataType;

use super::context::QueryContext;
use super::module::KernelModule;

/// Sorts the rows of `shape` on the device, the first host step sorting them by their columns
/// (the planner's `HostStep::Sort { on_device }`), returning the shape to read back (the sorted
/// copies of its columns) and the host steps still to apply.
pub(super) fn sort_rows_on_device(
    index: usize,
    qc: &mut QueryContext<'_>,
    shape: ResultShape,
    steps: Vec<HostOp>,
    kernels: &mut Vec<KernelLaunch>,
    modules: &mut Vec<KernelModule>,
) -> Result<(ResultShape, Vec<HostOp>), Diagnostic> {
    let (
        ResultShape::Rows {
            columns,
            count_buffer,
        },
        Some(HostOp::Sort(keys)),
    ) = (&shape, steps.first())
    else {
        return Err(Diagnostic::internal(
            qc.query.span,
            "a sort on the device follows no rows written out",
        ));
    };
    let mut sort_keys = Vec::with_capacity(keys.len());
    for &(id, descending) in keys {
        let Some(column) = columns.iter().find(|c| c.id == id) else {
            return Err(Diagnostic::internal(
                qc.query.span,
                "a key of a sort on the device is not a column written out",
            ));
        };
        sort_keys.push((column.clone(), descending));
    }
    let limit = match steps.get(1) {
        Some(HostOp::Limit(n)) => Some(*n),
        _ => None,
    };
    let mut sorter = Sorter {
        index,
        qc,
        count: *count_buffer,
        kernels,
        modules,
        names: HashMap::new(),
        like: columns[0].buffer,
    };
    // The sorted words hold the first key's bits, from which its values are decoded where they
    // fit (a gather reads a sector at random per row).
    let (first, first_descending) = &sort_keys[0];
    let decoded = (first.validity.is_none() && narrow(first.ty)).then_some(first.id);
    let (words, carried) = match (limit, sort_keys.as_slice()) {
        (Some(k), [(key, descending)])
            if (1..=TOPK_MAX_K).contains(&k) && key.validity.is_none() && narrow(key.ty) =>
        {
            (sorter.top_k(key, *descending, k as u32)?, None)
        }
        _ => {
            let carried = carried_column(&sort_keys, columns, decoded);
            let words = sorter.radix_sort(&sort_keys, carried)?;
            (words, carried.map(|c| c.id))
        }
    };
    let mut sorted = Vec::with_capacity(columns.len());
    for column in columns {
        let buffer = if decoded == Some(column.id) {
            let decode = SortKernel::Decode {
                ty: column.ty,
                descending: *first_descending,
            };
            sorter.column_from_words(column, decode, words, limit)?
        } else if carried == Some(column.id) {
            sorter.column_from_words(column, SortKernel::Carried, words, limit)?
        } else {
            sorter.gather(column.buffer, column.ty.width() as u32, words, limit)?
        };
        let validity = match column.validity {
            Some(validity) => Some(sorter.gather(validity, 1, words, limit)?),
            None => None,
        };
        sorted.push(RowColumn {
            buffer,
            validity,
            ..column.clone()
        });
    }
    let shape = ResultShape::Rows {
        columns: sorted,
        count_buffer: *count_buffer,
    };
    Ok((shape, steps.into_iter().skip(1).collect()))
}

/// The most rows written for which the host sorts them instead of the device
/// (`tessera_runtime::program::HostSort`): the host finds the first `k` of a `take k` in one
/// pass over the rows' keys as stored, a whole order in `n log n` comparisons. Under these the
/// host took less than the sort's kernels on an H200 (`docs/PERFORMANCE.md`).
pub(super) fn rows_sorted_on_host(steps: &[HostOp]) -> u64 {
    match steps.get(1) {
        Some(HostOp::Limit(_)) => 16_384,
        _ => 4_096,
    }
}

/// The column a radix sort carries in its words' low half instead of the row, saving its
/// gather: the output's only column besides a decoded key, 4 bytes wide and never null, when
/// the sort has one key part (later parts would look their rows up by the low half).
fn carried_column<'c>(
    keys: &[(RowColumn, bool)],
    columns: &'c [RowColumn],
    decoded: Option<u32>,
) -> Option<&'c RowColumn> {
    let [(key, _)] = keys else {
        return None;
    };
    if decoded != Some(key.id) {
        return None;
    }
    match columns
        .iter()
        .filter(|c| c.id != key.id)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [only] if only.ty.width() == 4 && only.validity.is_none() => Some(only),
        _ => None,
    }
}

/// Keys whose order fits the 32 high bits of a sort word.
fn narrow(ty: DataType) -> bool {
    ty.width() <= 4
}

struct Sorter<'a, 'q> {
    index: usize,
    qc: &'a mut QueryContext<'q>,
    /// The buffer of the output's row count.
    count: usize,
    kernels: &'a mut Vec<KernelLaunch>,
    modules: &'a mut Vec<KernelModule>,
    /// The kernels built so far, by what they do.
    names: HashMap<String, String>,
    /// An output column's buffer: buffers with a word per output row are sized like it.
    like: usize,
}

impl Sorter<'_, '_> {
    /// Radix sorts words made from the keys, least significant part first, with `carried`'s
    /// values in place of the rows when there is one; returns the buffer holding the sorted
    /// words.
    fn radix_sort(
        &mut self,
        keys: &[(RowColumn, bool)],
        carried: Option<&RowColumn>,
    ) -> Result<usize, Diagnostic> {
        // Each part with the buffer it is read from, the bits that can differ between rows, and
        // the validity that zeroes them in null rows.
        let mut parts = Vec::new();
        for (column, descending) in keys.iter().rev() {
            let value = |half| KeyPart::Value {
                ty: column.ty,
                descending: *descending,
                half,
            };
            if narrow(column.ty) {
                let part = value(Half::Whole);
                let bits = self.varying_bits(column).unwrap_or(part.bits());
                parts.push((part, column.buffer, bits, column.validity));
            } else {
                parts.push((value(Half::Low), column.buffer, 32, column.validity));
                parts.push((value(Half::High), column.buffer, 32, column.validity));
            }
            if let Some(validity) = column.validity {
                parts.push((KeyPart::Null, validity, KeyPart::Null.bits(), None));
            }
        }
        let passes: u32 = parts
            .iter()
            .map(|(_, _, bits, _)| bits.div_ceil(DIGIT_BITS))
            .sum();
        let mut words = self.row_buffer("sort words", 8);
        let mut other = self.row_buffer("sort words (other)", 8);
        let counts = self.qc.buffer(
            "sort digit counts".into(),
            u64::from(sort_parts(self.qc.target)) << DIGIT_BITS,
            8,
            Fill::Zero,
        );
        let totals = self.qc.buffer(
            "sort digit totals".into(),
            u64::from(passes) << DIGIT_BITS,
            8,
            Fill::Zero,
        );
        let status = self.qc.status;
        let mut pass = 0;
        for (i, (part, column, bits, validity)) in parts.iter().enumerate() {
            let carry = carried.filter(|_| parts.len() == 1);
            let keys = SortKernel::Keys {
                part: *part,
                first: i == 0,
                nullable: validity.is_some(),
                carry: carry.is_some(),
            };
            let mut params = vec![
                Param::Buffer(self.count),
                Param::RowCapacity,
                Param::Buffer(*column),
                Param::Buffer(words),
                Param::Buffer(status),
                Param::Buffer(validity.unwrap_or(status)),
            ];
            if let Some(carried) = carry {
                params.push(Param::Buffer(carried.buffer));
            }
            self.launch(keys, params)?;
            for digit in 0..bits.div_ceil(DIGIT_BITS) {
                let shift = Param::Constant(u64::from(32 + digit * DIGIT_BITS));
                self.launch(
                    SortKernel::Histogram,
                    vec![
                        Param::Buffer(self.count),
                        Param::RowCapacity,
                        Param::Buffer(words),
                        Param::Buffer(counts),
                        Param::Buffer(totals),
                        Param::Constant(pass),
                        shift.clone(),
                    ],
                )?;
                self.launch(
                    SortKernel::Offsets,
                    vec![
                        Param::Buffer(counts),
                        Param::Buffer(totals),
                        Param::Constant(pass),
                    ],
                )?;
                self.launch(
                    SortKernel::Scatter,
                    vec![
                        Param::Buffer(self.count),
                        Param::RowCapacity,
                        Param::Buffer(words),
                        Param::Buffer(other),
                        Param::Buffer(counts),
                        shift,
                    ],
                )?;
                std::mem::swap(&mut words, &mut other);
                pass += 1;
            }
        }
        Ok(words)
    }

    /// How many low bits of a 32-bit integer key's sort bits can differ between rows, when the
    /// key is a stored column with known bounds: the digits above them are the same in every
    /// row, and their passes are skipped. The bounds become an assumption checked at run time.
    fn varying_bits(&mut self, column: &RowColumn) -> Option<u32> {
        if !matches!(column.ty, DataType::I32 | DataType::Date | DataType::Str) {
            return None;
        }
        let id = crate::columns::ColumnId(column.id);
        let origin = self.qc.query.columns.get(id).origin.clone()?;
        let stats = self.qc.catalog.stats(&origin.table, &origin.column).ok()?;
        let (min, max) = match stats.dictionary_size {
            Some(size) => (0, size.max(1) as i64 - 1),
            None => stats.int_range()?,
        };
        let (low, high) = (i32::try_from(min).ok()?, i32::try_from(max).ok()?);
        // The sort bits of a value are its bits with the sign flipped (inverted when descending).
        let differ = ((low as u32) ^ (1 << 31)) ^ ((high as u32) ^ (1 << 31));
        self.qc.assume_range(id, min, max);
        Some((32 - differ.leading_zeros()).max(1))
    }

    /// Keeps the `k` smallest words of one key in stages, each cutting its input to k words a
    /// block; returns the buffer holding the last stage's k words, ascending.
    fn top_k(&mut self, key: &RowColumn, descending: bool, k: u32) -> Result<usize, Diagnostic> {
        let mut parts = top_k_parts(self.qc.target);
        let mut candidates = self.candidates(parts, k);
        self.launch(
            SortKernel::TopK {
                input: TopKInput::Key {
                    ty: key.ty,
                    descending,
                },
                k,
                parts,
            },
            vec![
                Param::Buffer(self.count),
                Param::RowCapacity,
                Param::Buffer(key.buffer),
                Param::Buffer(candidates),
                Param::Buffer(self.qc.status),
            ],
        )?;
        while parts > 1 {
            let words = u64::from(parts) * u64::from(k);
            let next_parts = words.div_ceil(TOPK_WORDS_PER_PART) as u32;
            let next = self.candidates(next_parts, k);
            self.launch(
                SortKernel::TopK {
                    input: TopKInput::Words,
                    k,
                    parts: next_parts,
                },
                vec![
                    Param::Constant(0),
                    Param::Constant(words),
                    Param::Buffer(candidates),
                    Param::Buffer(next),
                    Param::Buffer(self.qc.status),
                ],
            )?;
            parts = next_parts;
            candidates = next;
        }
        Ok(candidates)
    }

    /// `column`'s values in sorted order, written by `kernel` (`Decode` for the first key,
    /// `Carried` for a carried column) from the sorted `words` (the first `limit` rows).
    fn column_from_words(
        &mut self,
        column: &RowColumn,
        kernel: SortKernel,
        words: usize,
        limit: Option<u64>,
    ) -> Result<usize, Diagnostic> {
        let target = self.sorted_copy(column.buffer);
        self.launch(
            kernel,
            vec![
                Param::Buffer(self.count),
                Param::RowCapacity,
                Param::Constant(limit.unwrap_or(u64::MAX)),
                Param::Buffer(words),
                Param::Buffer(target),
            ],
        )?;
        Ok(target)
    }

    /// A buffer like `source`, for its rows in sorted order.
    fn sorted_copy(&mut self, source: usize) -> usize {
        let mut spec = self.qc.buffers[source].clone();
        spec.name = format!("sorted {}", spec.name);
        self.qc.buffers.push(spec);
        self.qc.buffers.len() - 1
    }

    /// Copies column `source` in the order of the sorted `words` (the first `limit` rows).
    fn gather(
        &mut self,
        source: usize,
        width: u32,
        words: usize,
        limit: Option<u64>,
    ) -> Result<usize, Diagnostic> {
        let target = self.sorted_copy(source);
        self.launch(
            SortKernel::Gather { width },
            vec![
                Param::Buffer(self.count),
                Param::RowCapacity,
                Param::Constant(limit.unwrap_or(u64::MAX)),
                Param::Buffer(words),
                Param::Buffer(source),
                Param::Buffer(target),
            ],
        )?;
        Ok(target)
    }

    /// A buffer of `width`-byte elements, one per output row.
    fn row_buffer(&mut self, name: &str, width: u32) -> usize {
        let spec = BufferSpec {
            name: name.to_string(),
            element_bytes: width,
            fill: Fill::Zero,
            ..self.qc.buffers[self.like].clone()
        };
        self.qc.buffers.push(spec);
        self.qc.buffers.len() - 1
    }

    /// The k candidates of each of `parts` top-k blocks.
    fn candidates(&mut self, parts: u32, k: u32) -> usize {
        self.qc.buffer(
            "top-k candidates".into(),
            u64::from(parts) * u64::from(k),
            8,
            Fill::Zero,
        )
    }

    /// Launches `kernel`, building it the first time the query uses it.
    fn launch(&mut self, kernel: SortKernel, params: Vec<Param>) -> Result<(), Diagnostic> {
        let key = format!("{kernel:?}");
        let name = match self.names.get(&key) {
            Some(name) => name.clone(),
            None => {
                // Kernels of one kind are told apart by a number (the key parts, top-k stages).
                let label = kernel.label();
                let same = self.names.values().filter(|n| n.contains(&label)).count();
                let name = match same {
                    0 => format!("tessera_q{}_sort_{label}", self.index),
                    n => format!("tessera_q{}_sort_{label}{n}", self.index),
                };
                let target = self.qc.target;
                let span = self.qc.query.span;
                let (module, ()) =
                    KernelModule::generate(&name, target, span, |context, module| {
                        build_sort_kernel(context, module, target, &name, kernel)
                            .map_err(|e| Diagnostic::internal(span, e.to_string()))
                    })?;
                self.modules.push(module);
                self.names.insert(key, name.clone());
                name
            }
        };
        self.kernels.push(KernelLaunch {
            name,
            table: String::new(),
            tile: kernel.tile(self.qc.target),
            params,
            extent: Extent::Parts(kernel.parts(self.qc.target)),
            runs_in_pieces: false,
            notes: Vec::new(),
        });
        Ok(())
    }
}
