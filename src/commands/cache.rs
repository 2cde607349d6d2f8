//! The kernel cache: compiled programs kept on disk, so that running a script again skips
//! LLVM. An entry's key is the script's text, the target and tile shape, the compression
//! setting, Tessera's version, and
//! a coarse statistics class of every table the script names (its columns and types, and the
//! order of magnitude of its row count). Anything finer the code depends on (key ranges for
//! perfect hashing and dense groups) is an assumption the runtime checks before running, so a
//! stale entry is caught and compiled again, never trusted.

use std::path::PathBuf;

use tessera_compiler::physical::PartitionJoins;
use tessera_grammar::ast::{Item, Pipeline, RelationSource, Script, StageKind};
use tessera_runtime::program::{Program, FORMAT_VERSION};
use tessera_runtime::{Target, TileShape};
use tessera_storage::Catalog;

/// Where entries live: `$TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera`, else
/// `~/.cache/tessera`; `None` (no caching) when none of these can be found.
pub fn folder() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TESSERA_CACHE_DIR") {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("tessera"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache").join("tessera"))
}

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
    tile: TileShape,
    partition_joins: PartitionJoins,
) -> String {
    let mut hash = Fnv::new();
    hash.add(env!("CARGO_PKG_VERSION").as_bytes());
    hash.add(&FORMAT_VERSION.to_le_bytes());
    hash.add(&build_stamp());
    hash.add(source.as_bytes());
    hash.add(target.to_string().as_bytes());
    hash.add(tile.to_string().as_bytes());
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
        }
        // Plans differ with the scale of the data, not with every row added.
        let magnitude = 64 - table.rows.leading_zeros();
        hash.add(&magnitude.to_le_bytes());
    }
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

/// The program stored under `key`, if there is a readable one of this format.
pub fn load(key: &str) -> Option<Program> {
    let path = folder()?.join(format!("{key}.tqx"));
    let text = std::fs::read_to_string(path).ok()?;
    let program: Program = serde_json::from_str(&text).ok()?;
    (program.format == FORMAT_VERSION).then_some(program)
}

/// Stores `program` under `key`. A cache that cannot be written is no error: the next run
/// compiles again.
pub fn store(key: &str, program: &Program) {
    let Some(folder) = folder() else { return };
    if std::fs::create_dir_all(&folder).is_err() {
        return;
    }
    let Ok(json) = serde_json::to_string(program) else {
        return;
    };
    // Written beside and renamed, so a reader never sees half an entry.
    let partial = folder.join(format!("{key}.{}.partial", std::process::id()));
    if std::fs::write(&partial, json).is_ok()
        && std::fs::rename(&partial, folder.join(format!("{key}.tqx"))).is_err()
    {
        let _ = std::fs::remove_file(partial);
    }
}

/// Forgets the entry under `key` (its assumptions no longer hold).
pub fn forget(key: &str) {
    if let Some(folder) = folder() {
        let _ = std::fs::remove_file(folder.join(format!("{key}.tqx")));
    }
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
