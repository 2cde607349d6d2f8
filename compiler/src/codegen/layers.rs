//! The code-generation files form layers: none calls into a file that calls back into it,
//! however far round. A file depends on another when it names it (`super::file`, or from
//! `mod.rs` `file::`; an item of `mod.rs` named through `super::` is a dependency on `mod.rs`)
//! or calls a `Kernel` method defined there (`self.method(` or `Self::method(` inside an
//! `impl Kernel` block, or `kernel.method(` anywhere): the methods of the one `Kernel` object
//! are split over several files, and a call between them is a dependency that no `use` line
//! shows. `compiler/ARCHITECTURE.md` lists the files from the bottom layer up with what each
//! calls into, and a test holds it to that.

use std::collections::{BTreeMap, BTreeSet};

/// Per file, the files it depends on and why (`use` or the methods it calls there).
type Dependencies = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The code of each code-generation file but this one, without comments and tests, by its
/// name.
fn sources() -> BTreeMap<String, String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/codegen");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("src/codegen is readable") {
        let path = entry.expect("a directory entry").path();
        let (Some(stem), Some("rs")) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|s| s.to_str()),
        ) else {
            continue;
        };
        if stem == "layers" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file is readable");
        files.insert(stem.to_string(), code_of(&text));
    }
    files
}

/// `text` up to its unit tests (a `#[cfg(test)]` module `tests`), without comment lines, and
/// with a method call that rustfmt put on a line of its own joined to its receiver's line.
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let tests = lines
        .windows(2)
        .position(|pair| pair[0].trim() == "#[cfg(test)]" && pair[1].starts_with("mod tests"))
        .unwrap_or(lines.len());
    let mut code: Vec<String> = Vec::new();
    for line in lines[..tests]
        .iter()
        .filter(|line| !line.trim_start().starts_with("//"))
    {
        match code.last_mut() {
            Some(last) if line.trim_start().starts_with('.') => last.push_str(line.trim_start()),
            _ => code.push(line.to_string()),
        }
    }
    code.join("\n")
}

/// The identifier starting `text`, if one does.
fn identifier(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// Whether `line[..at]` ends inside a name or path (so that what starts at `at` is not a name
/// of its own).
fn continues_a_name(line: &str, at: usize) -> bool {
    line[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The identifiers following each occurrence of `prefix` in `line` (a call's, when `call`: the
/// identifier must be followed by `(`).
fn names_after<'a>(line: &'a str, prefix: &'a str, call: bool) -> Vec<&'a str> {
    line.match_indices(prefix)
        .filter(|(at, _)| !continues_a_name(line, *at))
        .filter_map(|(at, _)| {
            let rest = &line[at + prefix.len()..];
            let name = identifier(rest)?;
            (!call || rest[name.len()..].starts_with('(')).then_some(name)
        })
        .collect()
}

/// What `line` names through `super::`: a name, or each first name of a `super::{...}` group.
fn named_through_super(line: &str) -> Vec<&str> {
    let mut names = names_after(line, "super::", false);
    for (at, _) in line.match_indices("super::{") {
        let group = &line[at + "super::{".len()..];
        let group = &group[..group.find('}').unwrap_or(group.len())];
        names.extend(group.split(',').filter_map(|item| identifier(item.trim())));
    }
    names
}

/// Whether `line` opens an `impl` block of `Kernel`.
fn opens_kernel_impl(line: &str) -> bool {
    line.starts_with("impl") && line.contains(" Kernel<")
}

/// Each line of `code`, and whether it lies in an `impl Kernel` block (an item's closing
/// brace, at the start of a line, ends one).
fn lines_in_kernel_impls(code: &str) -> impl Iterator<Item = (&str, bool)> {
    code.lines().scan(false, |inside, line| {
        if line.starts_with("impl") {
            *inside = opens_kernel_impl(line);
        } else if line == "}" {
            *inside = false;
        }
        Some((line, *inside))
    })
}

/// The `Kernel` methods each file defines: method name to the files defining one so named.
fn kernel_methods(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut methods: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, code) in files {
        for (line, inside) in lines_in_kernel_impls(code) {
            if inside {
                let signature = line
                    .trim_start_matches("    ")
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ");
                if let Some(name) = signature.strip_prefix("fn ").and_then(identifier) {
                    methods
                        .entry(name.to_string())
                        .or_default()
                        .insert(file.clone());
                }
            }
        }
    }
    methods
}

fn dependencies(files: &BTreeMap<String, String>) -> Dependencies {
    let methods = kernel_methods(files);
    let mut dependencies = Dependencies::new();
    for (file, code) in files {
        let on = dependencies.entry(file.clone()).or_default();
        let mut add = |other: &str, why: &str| {
            if other != file {
                on.entry(other.to_string())
                    .or_default()
                    .insert(why.to_string());
            }
        };
        for (line, inside) in lines_in_kernel_impls(code) {
            for name in named_through_super(line) {
                // Anything else named through `super::` is an item of `mod.rs`.
                add(
                    if files.contains_key(name) {
                        name
                    } else {
                        "mod"
                    },
                    "use",
                );
            }
            if file == "mod" {
                // `mod.rs` names its own modules as `module::item`.
                for (at, _) in line.match_indices("::") {
                    let start = line[..at]
                        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .map_or(0, |i| i + 1);
                    let name = &line[start..at];
                    if files.contains_key(name) && !continues_a_name(line, start) {
                        add(name, "use");
                    }
                }
            }
            let mut called = names_after(line, "kernel.", true);
            if inside {
                called.extend(names_after(line, "self.", true));
                called.extend(names_after(line, "Self::", true));
            }
            for method in called {
                // A name defined in several files is not told apart: it says nothing.
                if let Some([definer]) = methods
                    .get(method)
                    .map(|d| d.iter().collect::<Vec<_>>())
                    .as_deref()
                {
                    add(definer, method);
                }
            }
        }
    }
    dependencies
}

/// A round of files each depending on the next, the last on the first, if there is one.
fn cycle(dependencies: &Dependencies) -> Option<Vec<String>> {
    fn visit(
        file: &str,
        dependencies: &Dependencies,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|f| f == file) {
            return Some(path[at..].to_vec());
        }
        if done.contains(file) {
            return None;
        }
        path.push(file.to_string());
        for next in dependencies.get(file).into_iter().flat_map(|d| d.keys()) {
            if let Some(round) = visit(next, dependencies, path, done) {
                return Some(round);
            }
        }
        path.pop();
        done.insert(file.to_string());
        None
    }
    let mut done = BTreeSet::new();
    dependencies
        .keys()
        .find_map(|file| visit(file, dependencies, &mut Vec::new(), &mut done))
}

/// `round` with each step's reasons, for a failure's message.
fn describe(round: &[String], dependencies: &Dependencies) -> String {
    let mut text = String::new();
    for (at, file) in round.iter().enumerate() {
        let next = &round[(at + 1) % round.len()];
        let why = &dependencies[file][next];
        text.push_str(&format!("{file}.rs -> {next}.rs ({why:?})\n"));
    }
    text
}

#[test]
fn no_code_generation_file_calls_back_into_one_that_calls_it() {
    let files = sources();
    assert!(files.contains_key("kernel") && files.contains_key("pipeline"));
    let dependencies = dependencies(&files);
    if let Some(round) = cycle(&dependencies) {
        panic!(
            "code-generation files call each other round a loop:\n{}",
            describe(&round, &dependencies)
        );
    }
}

#[test]
fn a_call_back_through_the_kernel_is_a_loop() {
    // Two files that name only the one below, but whose `Kernel` methods call each other.
    let files = BTreeMap::from([
        (
            "kernel".to_string(),
            code_of(
                "impl<'ctx> Kernel<'_, 'ctx, '_> {\n    pub fn load(&self) {\n        self\n            .step();\n    }\n}",
            ),
        ),
        (
            "steps".to_string(),
            code_of(
                "use super::kernel::Kernel;\n// self.nothing() in a comment\nimpl<'ctx> Kernel<'_, 'ctx, '_> {\n    pub(super) fn step(&self) {\n        self.load();\n    }\n}\n#[cfg(test)]\nmod tests {\n    use super::sinks;\n}",
            ),
        ),
    ]);
    let dependencies = dependencies(&files);
    assert_eq!(
        dependencies["kernel"]["steps"],
        BTreeSet::from(["step".to_string()])
    );
    assert_eq!(dependencies["steps"].len(), 1, "{dependencies:?}");
    let round = cycle(&dependencies).expect("a loop");
    assert_eq!(round, ["kernel", "steps"]);
    // Without the call back, the files are layers.
    let mut layered = files.clone();
    layered.insert(
        "kernel".to_string(),
        code_of("impl<'ctx> Kernel<'_, 'ctx, '_> {\n    pub fn load(&self) {}\n}"),
    );
    assert_eq!(cycle(&self::dependencies(&layered)), None);
}

#[test]
fn names_through_super_and_mod_are_dependencies() {
    let files = BTreeMap::from([
        (
            "mod".to_string(),
            code_of("mod query;\npub use query::run;\nfn f() { inkwell::query::x(); }"),
        ),
        (
            "query".to_string(),
            code_of("use super::{sort, KernelModule};"),
        ),
        ("sort".to_string(), code_of("use super::targets::prepare;")),
        ("targets".to_string(), String::new()),
    ]);
    let dependencies = dependencies(&files);
    let on = |file: &str| -> Vec<&str> { dependencies[file].keys().map(String::as_str).collect() };
    assert_eq!(on("mod"), ["query"]);
    assert_eq!(on("query"), ["mod", "sort"]);
    assert_eq!(on("sort"), ["targets"]);
    assert_eq!(
        cycle(&dependencies),
        Some(vec!["mod".into(), "query".into()])
    );
}

#[test]
fn the_architecture_lists_the_files_in_layers() {
    // `compiler/ARCHITECTURE.md`'s table of code-generation files: a row per file, from the
    // bottom layer up, its last cell the files it calls into, each listed in a row above.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).expect("ARCHITECTURE.md is readable");
    let files = sources();
    let dependencies = dependencies(&files);
    let mut listed: Vec<String> = Vec::new();
    for row in text.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let Some(file) = cells[0].trim_matches('`').strip_suffix(".rs") else {
            continue;
        };
        assert!(
            files.contains_key(file),
            "ARCHITECTURE.md lists {file}.rs, which code generation does not have"
        );
        let calls: BTreeSet<&str> = cells[cells.len() - 1]
            .split(',')
            .map(|name| name.trim().trim_matches('`'))
            .filter(|name| !name.is_empty())
            .collect();
        let found: BTreeSet<&str> = dependencies[file].keys().map(String::as_str).collect();
        assert_eq!(
            calls, found,
            "what {file}.rs calls into, in ARCHITECTURE.md"
        );
        for callee in &calls {
            assert!(
                listed.iter().any(|above| above == callee),
                "ARCHITECTURE.md lists {file}.rs above {callee}.rs, which it calls"
            );
        }
        listed.push(file.to_string());
    }
    let unlisted: Vec<&String> = files.keys().filter(|file| !listed.contains(file)).collect();
    assert!(
        unlisted.is_empty(),
        "ARCHITECTURE.md lists no row for {unlisted:?}"
    );
}
