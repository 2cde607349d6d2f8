//! Tessera's reduced GPU optimization pipeline must compile every example and conformance
//! script to the same PTX as LLVM's `default<O1>` (both through `-O2` code generation, which
//! removes the copies and empty blocks two equivalent pipelines may leave), up to the order of
//! instructions within a block: that is what
//! justified each pass it leaves out, and a change in the code generator could make one of
//! them matter again.

mod common;

use std::path::Path;

use tessera_compiler::codegen::{kernel_to_code, pipelines_to_modules, GpuCodegen, GpuPasses};
use tessera_compiler::Compilation;
use tessera_grammar::source_to_ast;
use tessera_runtime::Target;
use tessera_storage::compress::{Compression, Scheme};

/// Every script: the examples, and the `script:` section of each conformance file.
fn scripts() -> Vec<(String, String)> {
    let mut scripts = Vec::new();
    let mut stack = vec![
        common::repo().join("examples"),
        common::repo().join("tests/conformance"),
    ];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .expect("readable folder")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                stack.push(path);
            } else if let Some(source) = script_of(&path).filter(|s| !runs_in_stages(s)) {
                scripts.push((path.display().to_string(), source));
            }
        }
    }
    scripts
}

/// Whether `source` runs in stages (`tessera_compiler::staging`): its queries are planned as
/// its stages run, against their results, so it has no pipelines to compile here.
fn runs_in_stages(source: &str) -> bool {
    source_to_ast(source).is_ok_and(|ast| {
        tessera_compiler::staging::runs_in_stages(&ast)
            || tessera_compiler::decorrelate::candidate(&ast)
    })
}

fn script_of(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    match path.extension()?.to_str()? {
        "tq" => Some(text),
        "test" => {
            let after = text.split_once("\nscript:\n")?.1;
            Some(after.split_once("\nsql:\n")?.0.to_string())
        }
        _ => None,
    }
}

/// PTX with registers renamed in order of first use and their declarations dropped, comments
/// dropped, and the two sources of a commutative instruction in a fixed order: two pipelines
/// may number virtual registers, name blocks and order commutative operands differently for
/// the same instructions.
fn normalized(ptx: &str) -> String {
    let mut names = std::collections::HashMap::new();
    let mut out = String::with_capacity(ptx.len());
    let lines = ptx
        .lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code).trim_end())
        .filter(|l| !l.trim_start().starts_with(".reg"));
    for line in lines {
        let renamed = rename_registers(line, &mut names);
        out.push_str(&commutative_in_order(&renamed));
        out.push('\n');
    }
    out
}

/// `line` with each virtual register replaced by its number in order of first use.
fn rename_registers(line: &str, names: &mut std::collections::HashMap<String, usize>) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut end = start + 1;
        while let Some(&(i, next)) = chars.peek() {
            if !next.is_ascii_alphanumeric() {
                break;
            }
            end = i + next.len_utf8();
            chars.next();
        }
        let token = &line[start..end];
        let kind: String = token[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        if token.len() > kind.len() + 1
            && token[kind.len() + 1..].chars().all(|c| c.is_ascii_digit())
        {
            let next = names.len();
            let id = *names.entry(token.to_string()).or_insert(next);
            out.push_str(&format!("%{kind}#{id}"));
        } else {
            out.push_str(token);
        }
    }
    out
}

/// An `add`, `mul`, `and`, `or`, `xor`, `min` or `max` with its two sources sorted.
fn commutative_in_order(line: &str) -> String {
    let trimmed = line.trim_start();
    let Some((opcode, operands)) = trimmed.split_once(char::is_whitespace) else {
        return line.to_string();
    };
    let base = opcode.split('.').next().unwrap_or("");
    let commutative = ["add", "mul", "and", "or", "xor", "min", "max"].contains(&base);
    let parts: Vec<&str> = operands
        .trim()
        .trim_end_matches(';')
        .split(',')
        .map(str::trim)
        .collect();
    if !commutative || parts.len() != 3 {
        return line.to_string();
    }
    let (mut a, mut b) = (parts[1], parts[2]);
    if b < a {
        std::mem::swap(&mut a, &mut b);
    }
    format!("{opcode} {}, {a}, {b};", parts[0])
}

/// Every script, on plain columns with the default tile and on packed columns (each column's
/// smallest encoding) with the tiles for columns at one width and in blocks.
#[test]
fn gpu_passes_match_llvm_o1() {
    let target = Target::Nvptx { sm: 90 };
    let scripts = scripts();
    assert!(scripts.len() >= 28, "found only {} scripts", scripts.len());
    for (compression, tile) in [
        (Compression::NONE, target.default_tile()),
        (Compression::Auto, target.default_fixed_width_tile()),
        (Compression::Auto, target.default_packed_tile()),
    ] {
        for (name, source) in &scripts {
            let catalog = common::catalog_for_file(name, source).with_compression(compression);
            let name = format!("{name} (--compress {compression})");
            let ast = source_to_ast(source).unwrap_or_else(|d| panic!("{name}: {d:?}"));
            let compilation =
                Compilation::run(ast, &catalog).unwrap_or_else(|d| panic!("{name}: {d:?}"));
            let (modules, _) =
                pipelines_to_modules(&compilation.physical, &catalog, target, Some(tile))
                    .unwrap_or_else(|d| panic!("{name}: {d:?}"));
            for module in &modules {
                let [reduced, reference] = [GpuPasses::Reduced, GpuPasses::LlvmO1].map(|passes| {
                    kernel_to_code(module, target, passes, GpuCodegen::Thorough).expect("PTX")
                });
                let (reduced, reference) = (normalized(&reduced), normalized(&reference));
                if reduced == reference {
                    continue;
                }
                assert_eq!(
                    instructions_per_block(&reduced),
                    instructions_per_block(&reference),
                    "{name}, kernel {}: the reduced pipeline's PTX differs from default<O1>'s",
                    module.kernel
                );
            }
        }
    }
}

/// Each block's instructions, sorted, with registers reduced to their kind. Two pipelines can
/// give the code generator the same instructions with different function attributes (`-O1`
/// infers which parameters are only read), and its scheduler may then order them differently
/// within a block: the same work, which ptxas schedules again anyway.
fn instructions_per_block(ptx: &str) -> Vec<Vec<String>> {
    let mut blocks = vec![Vec::new()];
    for line in ptx.lines() {
        if line.ends_with(':') {
            blocks.push(Vec::new());
            continue;
        }
        let mut kinds_only = String::with_capacity(line.len());
        let mut in_number = false;
        for c in line.chars() {
            if c == '#' {
                in_number = true;
            } else if in_number && c.is_ascii_digit() {
                continue;
            } else {
                in_number = false;
            }
            kinds_only.push(c);
        }
        if let Some(block) = blocks.last_mut() {
            block.push(kinds_only);
        }
    }
    for block in &mut blocks {
        block.sort();
    }
    blocks
}

/// Static shared memory of each kernel of `ptx`, in bytes: the sum of its `.shared` arrays.
fn shared_bytes_per_kernel(ptx: &str) -> Vec<(String, u64)> {
    let mut kernels: Vec<(String, u64)> = Vec::new();
    for line in ptx.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix(".visible .entry ") {
            let name = rest.split('(').next().unwrap_or(rest).to_string();
            kernels.push((name, 0));
        } else if line.starts_with(".shared") {
            // `.shared .align A .TYPE name[N];`, or a scalar without `[N]`.
            let width = line
                .split_whitespace()
                .find_map(|word| match word {
                    ".b8" | ".u8" | ".s8" => Some(1),
                    ".b16" | ".u16" | ".s16" | ".f16" => Some(2),
                    ".b32" | ".u32" | ".s32" | ".f32" => Some(4),
                    ".b64" | ".u64" | ".s64" | ".f64" => Some(8),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("unreadable shared array: {line}"));
            let count = match line.rsplit_once('[') {
                Some((_, size)) => size
                    .trim_end_matches("];")
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("unreadable shared array: {line}")),
                None => 1,
            };
            let bytes = width * count;
            if let Some((_, total)) = kernels.last_mut() {
                *total += bytes;
            }
        }
    }
    kernels
}

/// A block may have 48 KiB of static shared memory. Kernels reading many packed columns (DFOR
/// takes the most) must stay under it, reading the columns past their budget plain.
#[test]
fn packed_kernels_fit_static_shared_memory() {
    let target = Target::Nvptx { sm: 90 };
    for (name, source) in scripts() {
        let catalog = common::catalog_for_file(&name, &source)
            .with_compression(Compression::Only(Scheme::Dfor));
        let ast = source_to_ast(&source).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let compilation =
            Compilation::run(ast, &catalog).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let (modules, _) = pipelines_to_modules(
            &compilation.physical,
            &catalog,
            target,
            Some(target.default_packed_tile()),
        )
        .unwrap_or_else(|d| panic!("{name}: {d:?}"));
        for module in &modules {
            let ptx =
                kernel_to_code(module, target, GpuPasses::Reduced, GpuCodegen::Quick).expect("ptx");
            for (kernel, bytes) in shared_bytes_per_kernel(&ptx) {
                assert!(
                    bytes <= 48 * 1024,
                    "{name}, {kernel}: {bytes} bytes of shared memory"
                );
            }
        }
    }
}
