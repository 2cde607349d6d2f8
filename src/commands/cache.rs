//! The kernel cache: compiled programs kept in the cache folder's `kernels/` (see
//! `tessera_storage::cache`), so that running a script again skips LLVM. An entry's key is the
//! script's text, the target and tile shape, the compression setting, Tessera's version and
//! build, and a coarse statistics class of every table the script names (its columns, their
//! types and nullability, and the order of magnitude of its row count). Anything finer the code depends on (key ranges for
//! perfect hashing and dense groups) is an assumption the runtime checks before running, so a
//! stale entry is caught and compiled again, never trusted. Each column's scheme (and so the tile
//! chosen from the schemes where none is asked for) is named by the program's parameters, and the
//! runtime reads the column in that scheme whatever the catalog would choose now. A program is also stored under the
//! key of its queries' shape (`shape_key`), so that a script differing only in its constants
//! runs it, given its own.

use std::io::{Read, Write};

use tessera_compiler::physical::PartitionJoins;
use tessera_grammar::ast::{Item, Pipeline, RelationSource, Script, StageKind};
use tessera_runtime::program::{Program, FORMAT_VERSION};
use tessera_runtime::{Target, TileShape};
use tessera_storage::cache::{self, CacheFolder, KERNELS};
use tessera_storage::Catalog;

use crate::failure::Failure;

/// The size and modification time of the running executable: a program compiled by another
/// build of Tessera (the same version, a different compiler) is not reused.
fn build_stamp() -> Vec<u8> {
    let Some(metadata) = std::env::current_exe()
        .ok()
        .and_then(|exe| std::fs::metadata(exe).ok())
    else {
        return Vec::new();
    };
    let modified = metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_nanos());
    let mut stamp = metadata.len().to_le_bytes().to_vec();
    stamp.extend_from_slice(&modified.to_le_bytes());
    stamp
}

/// The cache key of a script compiled for `target` against `catalog`.
pub fn key(
    source: &str,
    ast: &Script,
    catalog: &Catalog,
    target: Target,
    tile: Option<TileShape>,
    partition_joins: PartitionJoins,
) -> String {
    let mut hash = Fnv::new();
    hash.add(env!("CARGO_PKG_VERSION").as_bytes());
    hash.add(&FORMAT_VERSION.to_le_bytes());
    hash.add(&build_stamp());
    hash.add(source.as_bytes());
    hash.add(target.to_string().as_bytes());
    hash.add(super::session::tile_text(tile).as_bytes());
    hash.add(catalog.compression().name().as_bytes());
    hash.add(format!("{partition_joins:?}").as_bytes());
    let mut tables = Vec::new();
    for item in &ast.items {
        match item {
            Item::Query(pipeline) => named_relations(pipeline, &mut tables),
            Item::Let(binding) => named_relations(&binding.pipeline, &mut tables),
            Item::Table(_) => {}
        }
    }
    tables.sort();
    tables.dedup();
    for name in tables {
        let Some(table) = catalog.table(&name) else {
            continue;
        };
        hash.add(name.as_bytes());
        for field in &table.schema.fields {
            hash.add(field.name.as_bytes());
            hash.add(field.ty.name().as_bytes());
            // Code for a column without nulls reads no validity.
            hash.add(&[u8::from(field.nullable)]);
        }
        // Plans differ with the scale of the data, not with every row added.
        let magnitude = 64 - table.rows.leading_zeros();
        hash.add(&magnitude.to_le_bytes());
    }
    format!("{:016x}", hash.finish())
}

/// The cache key of programs compiled from queries of `shape` (`session::shape_of`): what
/// they were compiled from, less their constants' values, which a program is given anew.
pub fn shape_key(shape: &str) -> String {
    let mut hash = Fnv::new();
    hash.add(env!("CARGO_PKG_VERSION").as_bytes());
    hash.add(&FORMAT_VERSION.to_le_bytes());
    hash.add(&build_stamp());
    hash.add(b"shape");
    hash.add(shape.as_bytes());
    format!("{:016x}", hash.finish())
}

fn named_relations(pipeline: &Pipeline, names: &mut Vec<String>) {
    let relation = |source: &RelationSource, names: &mut Vec<String>| match source {
        RelationSource::Named(name) => names.push(name.name.clone()),
        RelationSource::Pipeline(inner) => named_relations(inner, names),
    };
    relation(&pipeline.from.source, names);
    for stage in &pipeline.stages {
        match &stage.kind {
            StageKind::Join { relation: r, .. }
            | StageKind::SetOp { relation: r, .. }
            | StageKind::Product(r) => relation(&r.source, names),
            _ => {}
        }
    }
}

/// The program stored under `key`, if the cache holds an intact one of this format compiled
/// under that key; a damaged entry is removed (the caller compiles and stores it again).
pub fn load(key: &str) -> Option<Program> {
    let folder = CacheFolder::open_default()?;
    let path = folder.root().join(KERNELS).join(entry_name(key));
    let mut file = cache::open_entry(&path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    match Program::from_file(&bytes, Some(key)) {
        Ok(program) => Some(program),
        Err(_) => {
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

/// Stores `program` under `key`, keeping the cache within its budget. A cache that cannot be
/// written is no error: the next run compiles again.
pub fn store(key: &str, program: &Program) {
    let Some(folder) = CacheFolder::open_default() else {
        return;
    };
    let (Ok(kernels), Ok(bytes)) = (folder.subfolder(KERNELS), program.to_file(key)) else {
        return;
    };
    if cache::write_entry(&kernels, &entry_name(key), |out| out.write_all(&bytes)).is_ok() {
        folder.evict_to_budget();
    }
}

/// Forgets the entry under `key` (its assumptions no longer hold).
pub fn forget(key: &str) {
    if let Some(folder) = CacheFolder::location() {
        let _ = std::fs::remove_file(folder.join(KERNELS).join(entry_name(key)));
    }
}

/// `tessera cache info`: where the cache is, what it holds, and its budget.
pub fn info() -> Result<(), Failure> {
    let Some(root) = CacheFolder::location() else {
        println!("no cache (TESSERA_CACHE_DIR is set empty, or HOME is unset)");
        return Ok(());
    };
    if !root.exists() {
        println!("cache folder: {} (empty)", root.display());
        return Ok(());
    }
    let folder = CacheFolder::open(&root)?;
    let usage = folder.usage();
    let budget = cache::budget(&root)?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    println!("cache folder: {}", root.display());
    println!(
        "compiled kernels:  {:>6} entries {:>10.1} MiB",
        usage.kernel_entries,
        mib(usage.kernel_bytes)
    );
    println!(
        "prepared columns:  {:>6} entries {:>10.1} MiB",
        usage.prepared_entries,
        mib(usage.prepared_bytes)
    );
    println!(
        "total {:.1} MiB of a {:.1} MiB budget (TESSERA_CACHE_SIZE sets it); least recently used entries go first",
        mib(usage.bytes()),
        mib(budget)
    );
    Ok(())
}

/// `tessera cache clear`: removes every entry.
pub fn clear() -> Result<(), Failure> {
    let Some(root) = CacheFolder::location().filter(|r| r.exists()) else {
        println!("the cache is empty");
        return Ok(());
    };
    let freed = CacheFolder::open(&root)?.clear()?;
    println!(
        "removed {:.1} MiB from {}",
        freed as f64 / f64::from(1 << 20),
        root.display()
    );
    Ok(())
}

fn entry_name(key: &str) -> String {
    format!("{key}.tqx")
}

/// 64-bit FNV-1a: stable across runs and machines, which a cache key on disk must be.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        // Separates consecutive fields, so ("ab", "c") and ("a", "bc") differ.
        self.0 ^= 0xff;
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
