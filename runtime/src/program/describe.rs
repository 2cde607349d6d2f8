//! A compiled query program as text (`tessera compile --emit kernels`): what code generation
//! decided and the executor follows — each kernel's table, tile, grid and whether it may run
//! over pieces of a streamed table, how it reads each column (plain, or packed and how), the
//! buffers it writes and how they are sized, the work left to the host, and how the result is
//! read back.

use std::fmt::Write;

use super::{
    BufferSpec, Extent, HostOp, KernelLaunch, KernelNote, Param, QueryProgram, ReadPlainBecause,
    ResultShape,
};

impl QueryProgram {
    /// The program as indented text (see the module).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for kernel in &self.kernels {
            describe_kernel(&mut out, kernel, &self.buffers);
        }
        let _ = writeln!(out, "buffers");
        for (index, buffer) in self.buffers.iter().enumerate() {
            let _ = writeln!(out, "  {index}: {}", buffer_text(buffer));
        }
        if let Some(capacity) = self.group_capacity {
            let _ = writeln!(out, "group hash table: {capacity} slots at first");
        }
        let _ = writeln!(out, "result: {}", shape_text(&self.result.shape));
        for step in &self.result.steps {
            let _ = writeln!(out, "  host: {}", host_step_text(step));
        }
        if let Some(host) = &self.result.host_sort {
            let first = self
                .kernels
                .get(host.first_kernel)
                .map_or("none", |k| k.name.as_str());
            let _ = writeln!(
                out,
                "  at most {} rows written: kernels from {first} on are not launched; read \
                 back: {}",
                host.rows,
                shape_text(&host.shape)
            );
            for step in &host.steps {
                let _ = writeln!(out, "    host: {}", host_step_text(step));
            }
        }
        for assumption in &self.assumptions {
            let _ = writeln!(
                out,
                "assumes {}.{} in {}..={}",
                assumption.table, assumption.column, assumption.min, assumption.max
            );
        }
        out
    }
}

fn describe_kernel(out: &mut String, kernel: &KernelLaunch, buffers: &[BufferSpec]) {
    let grid = match kernel.extent {
        Extent::Tiles => "over the tiles".to_string(),
        Extent::Parts(parts) => format!("as {parts} blocks"),
        Extent::GroupSlots(_) => "over the tiles of the grouping's slots".to_string(),
    };
    let pieces = match kernel.runs_in_pieces {
        true => ", may run over pieces of a streamed table",
        false => "",
    };
    let _ = writeln!(
        out,
        "kernel {} on {}: tiles of {}x{}, {grid}{pieces}",
        kernel.name, kernel.table, kernel.tile.threads, kernel.tile.items_per_thread
    );
    for param in &kernel.params {
        let _ = writeln!(out, "  {}", param_text(param, buffers));
    }
    for note in &kernel.notes {
        let _ = writeln!(out, "  {}", note_text(note));
    }
}

fn note_text(note: &KernelNote) -> String {
    match note {
        KernelNote::ReadPlain {
            table,
            column,
            stored,
            because,
        } => {
            let why = match because {
                ReadPlainBecause::PartialBlocks => {
                    "the tiles do not hold whole blocks of 128".to_string()
                }
                ReadPlainBecause::SharedMemory { needed, left } => format!(
                    "staging it takes {needed} B of shared memory, {left} B of the staging budget are left"
                ),
            };
            format!("{table}.{column}: stored {stored}, read plain: {why}")
        }
        KernelNote::Staged {
            table,
            column,
            bytes,
        } => format!("shared memory: {bytes} B staging {table}.{column}"),
        KernelNote::GroupCopy { slots, bytes } => {
            format!("shared memory: {bytes} B for the block's copy of {slots} group slots")
        }
        KernelNote::NoGroupCopy { bytes, left } => format!(
            "no block copy of the group slots: it takes {bytes} B of shared memory, {left} B are left"
        ),
    }
}

fn param_text(param: &Param, buffers: &[BufferSpec]) -> String {
    match param {
        Param::Rows { table } => format!("rows of {table}"),
        Param::Column { table, column } => format!("{table}.{column}: plain values"),
        Param::Validity { table, column } => format!("{table}.{column}: validity bytes"),
        Param::PackedWords {
            table,
            column,
            scheme,
            block_words,
        } => format!("{table}.{column}: {scheme} blocks of at most {block_words} words"),
        Param::BlockStarts {
            table,
            column,
            scheme,
        } => format!("{table}.{column}: {scheme} block starts"),
        Param::FixedWords {
            table,
            column,
            scheme,
            width,
            reference,
        } => match reference {
            Some(reference) => {
                format!("{table}.{column}: {scheme} codes of {width} bits, plus {reference}")
            }
            None => format!("{table}.{column}: {scheme} codes of {width} bits"),
        },
        Param::Dictionary {
            table,
            column,
            scheme,
            entries,
        } => match entries {
            Some(entries) => format!("{table}.{column}: {scheme} dictionary of {entries}"),
            None => format!("{table}.{column}: {scheme} dictionary"),
        },
        Param::Buffer(index) => match buffers.get(*index) {
            Some(buffer) => format!("buffer {index} `{}`", buffer.name),
            None => format!("buffer {index} (missing)"),
        },
        Param::GroupCapacity => "the group hash table's slot count".into(),
        Param::RowCapacity => "the output's row capacity".into(),
        Param::FirstRow => "the launch's first row of its table".into(),
        Param::Constant(value) => format!("constant {value}"),
        Param::Literal { slot, ty } => format!("${slot} as {ty}"),
        Param::StrCode {
            table,
            column,
            slot,
            bound,
        } => format!("${slot} as a code of {table}.{column} ({bound:?})"),
        Param::Translation { from, to } => format!(
            "codes of {}.{} translated to {}.{}",
            from.0, from.1, to.0, to.1
        ),
        Param::Ranks { from, among, .. } => format!(
            "ranks of {}.{}'s strings among {}.{}'s",
            from.0, from.1, among.0, among.1
        ),
        Param::Derived { from, derived, .. } => format!(
            "codes of {}.{} mapped to {}.{}",
            from.0, from.1, derived.0, derived.1
        ),
        Param::Matches {
            table,
            column,
            kind,
            slot,
            ..
        } => format!("{table}.{column} matching ${slot} ({kind:?})"),
    }
}

fn buffer_text(buffer: &BufferSpec) -> String {
    let size = if buffer.per_group_slot {
        format!("{} B per group slot", buffer.element_bytes)
    } else if !buffer.per_row_of.is_empty() {
        let per = match buffer.rows_per_element {
            0 | 1 => "row".to_string(),
            rows => format!("{rows} rows"),
        };
        format!(
            "{} B per {per} of {}",
            buffer.element_bytes,
            buffer.per_row_of.join(" + ")
        )
    } else {
        format!("{} x {} B", buffer.elements, buffer.element_bytes)
    };
    let output = match buffer.output {
        true => ", the output's",
        false => "",
    };
    format!("`{}` {size}{output}", buffer.name)
}

fn shape_text(shape: &ResultShape) -> String {
    match shape {
        ResultShape::Scalar { aggregates } => format!("one row of {} aggregates", aggregates.len()),
        ResultShape::Dense {
            keys, aggregates, ..
        } => format!(
            "the present slots of a dense grouping by {} keys, {} aggregates",
            keys.len(),
            aggregates.len()
        ),
        ResultShape::Hash {
            keys,
            aggregates,
            wide,
            ..
        } => format!(
            "the groups of a hash table of {} keys{}, {} aggregates",
            keys.len(),
            match wide.len() {
                0 => String::new(),
                more => format!(" in {} words", more + 1),
            },
            aggregates.len()
        ),
        ResultShape::Rows { columns, .. } => format!("rows of {} columns", columns.len()),
    }
}

fn host_step_text(step: &HostOp) -> String {
    match step {
        HostOp::Sort(keys) => format!("sort by {} keys", keys.len()),
        HostOp::Limit(count) => format!("take {count}"),
        HostOp::Filter(_) => "filter".into(),
        HostOp::Repeat { copies } => format!("repeat rows by column {copies}"),
        HostOp::CheckSum { name, .. } => format!("check `{name}` did not overflow"),
        HostOp::Compute { id, ty, .. } => format!("compute column {id} ({ty})"),
        HostOp::Aggregate { keys, aggregates } => format!(
            "group by {} keys, {} aggregates",
            keys.len(),
            aggregates.len()
        ),
    }
}
