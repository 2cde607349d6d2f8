//! `sort` (and `sort … | take k`) over rows a query writes out, on the device: the runtime's
//! radix sort over the sort keys' parts, or its top-k for one narrow key and a small k, then a
//! gather of every output column in the sorted order. The host work left is the `take`, which
//! the result's readback applies by reading only the first rows.

use std::collections::HashMap;

use inkwell::context::Context;
use tessera_grammar::Diagnostic;
use tessera_runtime::primitives::sort::{
    build_sort_kernel, Half, KeyPart, SortKernel, TopKInput, DIGIT_BITS, SORT_PARTS, TOPK_MAX_K,
    TOPK_PARTS, TOPK_WORDS_PER_PART,
};
use tessera_runtime::program::{
    BufferSpec, Extent, Fill, HostOp, KernelLaunch, Param, ResultShape, RowColumn,
};
use tessera_storage::DataType;

use super::query::QueryContext;
use super::KernelModule;

/// Sorts the rows of `shape` on the device when the first host step sorts them, returning the
/// shape to read back (the sorted copies of its columns) and the host steps still to apply.
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
        return Ok((shape, steps));
    };
    let mut sort_keys = Vec::with_capacity(keys.len());
    for &(id, descending) in keys {
        let Some(column) = columns.iter().find(|c| c.id == id) else {
            return Ok((shape, steps));
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
    let words = match (limit, sort_keys.as_slice()) {
        (Some(k), [(key, descending)])
            if (1..=TOPK_MAX_K).contains(&k) && key.validity.is_none() && narrow(key.ty) =>
        {
            sorter.top_k(key, *descending, k as u32)?
        }
        _ => sorter.radix_sort(&sort_keys)?,
    };
    let mut sorted = Vec::with_capacity(columns.len());
    for column in columns {
        let buffer = sorter.gather(column.buffer, column.ty.width() as u32, words, limit)?;
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

/// Keys whose order fits the 32 high bits of a sort word.
fn narrow(ty: DataType) -> bool {
    !matches!(ty, DataType::I64 | DataType::F64)
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
    /// Radix sorts words made from the keys, least significant part first; returns the buffer
    /// holding the sorted words.
    fn radix_sort(&mut self, keys: &[(RowColumn, bool)]) -> Result<usize, Diagnostic> {
        let mut parts = Vec::new();
        for (column, descending) in keys.iter().rev() {
            let value = |half| KeyPart::Value {
                ty: column.ty,
                descending: *descending,
                half,
            };
            if narrow(column.ty) {
                parts.push((value(Half::Whole), column.buffer));
            } else {
                parts.push((value(Half::Low), column.buffer));
                parts.push((value(Half::High), column.buffer));
            }
            if let Some(validity) = column.validity {
                parts.push((KeyPart::Null, validity));
            }
        }
        let passes: u32 = parts
            .iter()
            .map(|(part, _)| part.bits().div_ceil(DIGIT_BITS))
            .sum();
        let mut words = self.row_buffer("sort words", 8);
        let mut other = self.row_buffer("sort words (other)", 8);
        let counts = self.qc.buffer(
            "sort digit counts".into(),
            u64::from(SORT_PARTS) << DIGIT_BITS,
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
        for (i, (part, column)) in parts.iter().enumerate() {
            let keys = SortKernel::Keys {
                part: *part,
                first: i == 0,
            };
            self.launch(
                keys,
                vec![
                    Param::Buffer(self.count),
                    Param::RowCapacity,
                    Param::Buffer(*column),
                    Param::Buffer(words),
                    Param::Buffer(status),
                ],
            )?;
            for digit in 0..part.bits().div_ceil(DIGIT_BITS) {
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

    /// Keeps the `k` smallest words of one key in stages, each cutting its input to k words a
    /// block; returns the buffer holding the last stage's k words, ascending.
    fn top_k(&mut self, key: &RowColumn, descending: bool, k: u32) -> Result<usize, Diagnostic> {
        let mut parts = TOPK_PARTS;
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
                ],
            )?;
            parts = next_parts;
            candidates = next;
        }
        Ok(candidates)
    }

    /// Copies column `source` in the order of the sorted `words` (the first `limit` rows).
    fn gather(
        &mut self,
        source: usize,
        width: u32,
        words: usize,
        limit: Option<u64>,
    ) -> Result<usize, Diagnostic> {
        let mut spec = self.qc.buffers[source].clone();
        spec.name = format!("sorted {}", spec.name);
        self.qc.buffers.push(spec);
        let target = self.qc.buffers.len() - 1;
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
                let context = Context::create();
                let module = context.create_module(&name);
                super::targets::prepare_module(&module, self.qc.target)?;
                let span = self.qc.query.span;
                build_sort_kernel(&context, &module, self.qc.target, &name, kernel)
                    .map_err(|e| Diagnostic::internal(span, e.to_string()))?;
                if let Err(message) = module.verify() {
                    return Err(Diagnostic::internal(
                        span,
                        format!("generated LLVM IR is invalid: {message}"),
                    ));
                }
                self.modules.push(KernelModule {
                    kernel: name.clone(),
                    bitcode: module.write_bitcode_to_memory().as_slice().to_vec(),
                    runtime_loops: true,
                });
                self.names.insert(key, name.clone());
                name
            }
        };
        self.kernels.push(KernelLaunch {
            name,
            table: String::new(),
            tile: kernel.tile(self.qc.target),
            params,
            extent: Extent::Parts(kernel.parts()),
        });
        Ok(())
    }
}
