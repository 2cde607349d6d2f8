//! The command line as a user meets it: results printed, one-line causes and a non-zero exit on
//! failure, reports that point at the script, never a panic.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use tessera_runtime::program::Program;

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(common::repo())
        .env("NO_COLOR", "1")
        // No kernel cache: every run compiles (and the tests write nothing under $HOME).
        .env("TESSERA_CACHE_DIR", "")
        .output()
        .expect("tessera runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn data() -> &'static str {
    common::ssb_data().to_str().expect("utf-8 path")
}

/// `tessera run -c SCRIPT --data DATA` on the CPU, printing CSV.
fn run_csv(script: &str, data: &str) -> Output {
    tessera(&[
        "run", "-c", script, "--data", data, "--device", "cpu", "--format", "csv",
    ])
}

/// What `tessera compile SCRIPT --data DATA --emit EMIT --target host` prints for `script`
/// (written to a file, as `compile` reads one), after checking that it compiled.
fn emitted(script: &str, data: &str, emit: &str) -> String {
    emitted_with(script, data, emit, &["--target", "host"])
}

/// `tessera compile --emit EMIT` of `script` over `data`, with further `options`.
fn emitted_with(script: &str, data: &str, emit: &str, options: &[&str]) -> String {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let path = scratch.path().join("script.tq");
    std::fs::write(&path, script).expect("written");
    let path = path.to_str().expect("utf-8 path");
    let mut args = vec!["compile", path, "--data", data, "--emit", emit];
    args.extend_from_slice(options);
    let output = tessera(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

#[test]
fn a_misspelled_column_is_reported_with_the_right_name() {
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("typo.tq");
    std::fs::write(
        &script,
        "from lineorder\n| where lo_revnue > 10\n| aggregate { n = count() }\n",
    )
    .unwrap();
    let output = tessera(&[
        "compile",
        script.to_str().unwrap(),
        "--data",
        data(),
        "--emit",
        "physical",
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.contains("unknown column `lo_revnue`"), "{stderr}");
    assert!(stderr.contains("did you mean `lo_revenue`?"), "{stderr}");
    assert!(
        stderr.contains("2:9"),
        "the report points at line 2, column 9: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn run_prints_a_table_and_csv() {
    let table = tessera(&[
        "run",
        "examples/ssb/q11.tq",
        "--data",
        data(),
        "--device",
        "cpu",
    ]);
    assert!(table.status.success(), "{}", text(&table.stderr));
    let printed = text(&table.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    // psql's aligned format: a centred header, a rule crossed where the columns meet, the
    // number right-aligned under it, the row count.
    assert_eq!(lines.len(), 4, "{printed}");
    assert_eq!(lines[0].trim(), "revenue", "{printed}");
    assert!(lines[1].chars().all(|c| c == '-'), "{printed}");
    // (Its padding on the right trimmed.)
    assert_eq!(lines[2].len() + 1, lines[1].len(), "{printed}");
    assert!(lines[2].trim_start().parse::<i64>().is_ok(), "{printed}");
    assert_eq!(lines[3], "(1 row)");
    let csv = tessera(&[
        "run",
        "examples/ssb/q21.tq",
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "csv",
    ]);
    let out = text(&csv.stdout);
    assert_eq!(out.lines().next(), Some("d_year,p_brand1,revenue"));
    assert!(out.lines().count() > 10);
}

#[test]
fn a_compiled_program_runs_without_the_script() {
    let scratch = tempfile::tempdir().unwrap();
    let artifact = scratch.path().join("q21.tqx");
    let artifact = artifact.to_str().unwrap();
    let compile = tessera(&[
        "compile",
        "examples/ssb/q21.tq",
        "--data",
        data(),
        "--target",
        "host",
        "-o",
        artifact,
    ]);
    assert!(compile.status.success(), "{}", text(&compile.stderr));
    let from_artifact = tessera(&["run", artifact, "--data", data(), "--format", "csv"]);
    let from_script = tessera(&[
        "run",
        "examples/ssb/q21.tq",
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "csv",
    ]);
    assert!(
        from_artifact.status.success(),
        "{}",
        text(&from_artifact.stderr)
    );
    assert_eq!(text(&from_artifact.stdout), text(&from_script.stdout));
}

#[test]
fn a_gpu_artifact_is_refused_on_the_cpu() {
    let scratch = tempfile::tempdir().unwrap();
    let artifact = scratch.path().join("q11.tqx");
    let artifact = artifact.to_str().unwrap();
    let compile = tessera(&[
        "compile",
        "examples/ssb/q11.tq",
        "--data",
        data(),
        "--target",
        "sm_90",
        "-o",
        artifact,
    ]);
    assert!(compile.status.success(), "{}", text(&compile.stderr));
    let run = tessera(&["run", artifact, "--data", data(), "--device", "cpu"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("--target host"),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn without_a_gpu_auto_falls_back_and_gpu_fails_in_one_line() {
    if tessera_runtime::exec::gpu::probe().is_ok() {
        eprintln!("skipped: a CUDA device is present");
        return;
    }
    let auto = tessera(&["run", "examples/ssb/q11.tq", "--data", data()]);
    assert!(auto.status.success(), "{}", text(&auto.stderr));
    assert!(text(&auto.stderr).contains("running on the CPU"));
    let gpu = tessera(&[
        "run",
        "examples/ssb/q11.tq",
        "--data",
        data(),
        "--device",
        "gpu",
    ]);
    let stderr = text(&gpu.stderr);
    assert_eq!(gpu.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: no GPU"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn bad_inputs_fail_in_one_line() {
    for (args, expected) in [
        (
            vec![
                "run",
                "examples/ssb/q11.tq",
                "--data",
                "/no/such/dir",
                "--device",
                "cpu",
            ],
            "does not exist",
        ),
        (
            vec![
                "run",
                "/no/such/script.tq",
                "--data",
                "/tmp",
                "--device",
                "cpu",
            ],
            "cannot read",
        ),
        (
            vec!["gen", "ssb", "--sf", "0", "--out", "/tmp/never"],
            "positive",
        ),
        (
            vec!["compile", "examples/ssb/q11.tq", "--emit", "physical"],
            "--data",
        ),
    ] {
        let output = tessera(&args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn a_corrupt_parquet_file_is_a_clear_error() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.parquet"), b"PAR1 this is not parquet").unwrap();
    let script = dir.join("q.tq");
    std::fs::write(&script, "from t | aggregate { n = count() }").unwrap();
    let output = tessera(&[
        "run",
        script.to_str().unwrap(),
        "--data",
        dir.to_str().unwrap(),
        "--device",
        "cpu",
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.contains("t.parquet"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = Path::new(&dir);
}

fn tessera_cached(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(common::repo())
        .env("NO_COLOR", "1")
        .env("TESSERA_CACHE_DIR", cache)
        .output()
        .expect("tessera runs")
}

#[test]
fn a_repeated_query_comes_from_the_kernel_cache() {
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let args = [
        "run",
        "examples/ssb/q21.tq",
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "csv",
        "--timing",
    ];
    let first = tessera_cached(&args, &cache);
    let second = tessera_cached(&args, &cache);
    assert!(
        first.status.success() && second.status.success(),
        "{}",
        text(&second.stderr)
    );
    assert!(
        !text(&first.stderr).contains("kernel cache"),
        "{}",
        text(&first.stderr)
    );
    assert!(
        text(&second.stderr).contains("from the kernel cache"),
        "{}",
        text(&second.stderr)
    );
    assert_eq!(text(&first.stdout), text(&second.stdout));

    // The program is filed under the script's key and its shape's.
    let entries = kernel_entries(&cache);
    assert_eq!(entries.len(), 2, "{entries:?}");

    // Entries whose statistics no longer hold are noticed at run time and compiled again.
    for entry in &entries {
        let key = entry.file_stem().unwrap().to_str().unwrap().to_string();
        let mut program = Program::from_file(&std::fs::read(entry).unwrap(), Some(&key)).unwrap();
        let assumptions = &mut program.queries[0].assumptions;
        assert!(!assumptions.is_empty(), "q21 relies on key ranges");
        for assumption in assumptions.iter_mut() {
            assumption.max = assumption.min;
        }
        std::fs::write(entry, program.to_file(&key).unwrap()).unwrap();
    }
    let third = tessera_cached(&args, &cache);
    assert!(third.status.success(), "{}", text(&third.stderr));
    assert_eq!(text(&third.stdout), text(&first.stdout));

    // A damaged entry is never loaded: it is compiled again.
    for entry in &kernel_entries(&cache) {
        let mut bytes = std::fs::read(entry).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x20;
        std::fs::write(entry, &bytes).unwrap();
    }
    let fourth = tessera_cached(&args, &cache);
    assert!(fourth.status.success(), "{}", text(&fourth.stderr));
    assert!(!text(&fourth.stderr).contains("from the kernel cache"));
    assert_eq!(text(&fourth.stdout), text(&first.stdout));

    // Nor is an intact program filed under another script's key.
    let other = [
        "run",
        "examples/ssb/q11.tq",
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "csv",
        "--timing",
    ];
    let q21_entries = kernel_entries(&cache);
    let own = tessera_cached(&other, &cache);
    assert!(own.status.success(), "{}", text(&own.stderr));
    for path in kernel_entries(&cache) {
        if !q21_entries.contains(&path) {
            std::fs::copy(&q21_entries[0], &path).unwrap();
        }
    }
    let misplaced = tessera_cached(&other, &cache);
    assert!(misplaced.status.success(), "{}", text(&misplaced.stderr));
    assert!(!text(&misplaced.stderr).contains("from the kernel cache"));
    assert_eq!(text(&misplaced.stdout), text(&own.stdout));
    let _ = std::fs::remove_dir_all(&cache);
}

/// A fresh run of a script that differs from a cached one only in its constants runs the cached
/// program with its own constants (no code generated) and prints DuckDB's answer; so does a
/// script of another shape after it, compiled anew. The scripts and answers are conformance
/// files'.
#[test]
fn a_run_differing_only_in_constants_reuses_the_cached_program() {
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let folder = common::repo().join("tests/conformance/constants");
    for (name, cached) in [
        ("strings_a", false),
        ("strings_c", true),
        ("year_a", false),
        ("year_c", true),
        ("year_b", true),
    ] {
        let file = std::fs::read_to_string(folder.join(format!("{name}.test"))).unwrap();
        let (script, rest) = file
            .split_once("script:\n")
            .and_then(|(_, rest)| rest.split_once("sql:\n"))
            .unwrap();
        let (_, expected) = rest.split_once("----\n").unwrap();
        let path = scratch.path().join(format!("{name}.tq"));
        std::fs::write(&path, script).unwrap();
        let output = tessera_cached(
            &[
                "run",
                path.to_str().unwrap(),
                "--data",
                data(),
                "--device",
                "cpu",
                "--format",
                "csv",
                "--timing",
            ],
            &cache,
        );
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{name}: {stderr}");
        assert_eq!(text(&output.stdout), expected, "{name}");
        assert_eq!(
            stderr.contains("(from the kernel cache)"),
            cached,
            "{name}: {stderr}"
        );
    }
}

/// The compiled programs in a cache folder.
fn kernel_entries(cache: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache.join("kernels"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "tqx"))
        .collect()
}

#[test]
fn packed_columns_are_decoded_by_the_unpack_primitive() {
    for (target, packed_marker) in [("host", "tessera.unpack.for"), ("sm_90", "ld.global.nc.v4")] {
        let emit = |compression: &str| {
            let output = tessera(&[
                "compile",
                "examples/ssb/q11.tq",
                "--data",
                data(),
                "--target",
                target,
                "--emit",
                "llvm",
                "--compress",
                compression,
            ]);
            assert!(output.status.success(), "{}", text(&output.stderr));
            text(&output.stdout)
        };
        let packed = emit("for");
        assert!(packed.contains(packed_marker), "{target}: {packed}");
        assert!(packed.contains("tessera.unpack"), "{target}");
        let plain = emit("none");
        assert!(!plain.contains("tessera.unpack"), "{target}: {plain}");
        // Columns at one width are decoded straight from memory, staging nothing.
        if target == "host" {
            let fixed = emit("pack");
            assert!(fixed.contains("tessera.unpack_fixed.pack"), "{fixed}");
            assert!(!fixed.contains("tessera.unpack.for"), "{fixed}");
        }
    }
}

#[test]
fn columns_are_packed_by_default_for_the_gpu_and_plain_for_the_cpu() {
    let emit = |target: &str| {
        let output = tessera(&[
            "compile",
            "examples/ssb/q11.tq",
            "--data",
            data(),
            "--target",
            target,
            "--emit",
            "llvm",
        ]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let gpu = emit("sm_90");
    assert!(gpu.contains("tessera.unpack_fixed"), "{gpu}");
    let cpu = emit("host");
    assert!(!cpu.contains("tessera.unpack"), "{cpu}");
}

#[test]
fn joins_probed_by_a_dictionary_column_are_keyed_by_its_codes() {
    let emit = |compression: &str| {
        let output = tessera(&[
            "compile",
            "examples/ssb/q21.tq",
            "--data",
            data(),
            "--target",
            "host",
            "--emit",
            "llvm",
            "--compress",
            compression,
        ]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    // `auto` stores `lo_orderdate` as dictionary codes: the date table's build finds each key's
    // code, and the probe reads codes without decoding them.
    let coded = emit("auto");
    assert!(coded.contains("tessera.dict_code"), "{coded}");
    assert!(coded.contains(".sel.codes.i32"), "{coded}");
    let plain = emit("pack");
    assert!(!plain.contains("tessera.dict_code"), "{plain}");
    assert!(!plain.contains(".codes."), "{plain}");
}

#[test]
fn stats_show_each_columns_encoding_and_bits_per_value() {
    let output = tessera(&["stats", data(), "--table", "lineorder"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let orderdate = stdout
        .lines()
        .find(|line| line.contains("lo_orderdate"))
        .unwrap_or_else(|| panic!("no lo_orderdate line: {stdout}"));
    let fields: Vec<&str> = orderdate.split_whitespace().collect();
    // About 2,400 distinct dates over a range of 78,000 `yyyymmdd` values: their ranks take 12
    // bits, where a frame of reference (`pack`, or per block of 128) takes 15 to 18.
    assert_eq!(fields[4], "dict", "{orderdate}");
    let bits: f64 = fields[5].parse().expect("bits per value");
    let dictionary_bits = 2_556.0 * 32.0 / 60_175.0;
    assert!(
        (12.0..12.01 + dictionary_bits).contains(&bits),
        "{orderdate}"
    );
    for beside in &fields[8..11] {
        let beside: f64 = beside.parse().expect("bits per value");
        assert!((14.0..19.0).contains(&beside), "{orderdate}");
    }
    assert!(stdout.contains("total:"), "{stdout}");

    let plain = tessera(&[
        "stats",
        data(),
        "--table",
        "lineorder",
        "--compress",
        "none",
    ]);
    let plain = text(&plain.stdout);
    assert!(
        plain
            .lines()
            .any(|l| l.contains("lo_orderdate") && l.contains(" none ")),
        "{plain}"
    );

    let missing = tessera(&["stats", data(), "--table", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(text(&missing.stderr).trim_end().lines().count(), 1);
}

#[test]
fn an_unknown_compression_scheme_is_refused() {
    refused_option(
        &["--compress", "zip"],
        "unknown compression scheme `zip` (expected none, auto, pack, dict, for or dfor)",
    );
}

/// Runs Q1.1 on the CPU with `option` and checks that the command line refuses it (exit 2),
/// saying `message`.
fn refused_option(option: &[&str], message: &str) {
    let mut args = vec![
        "run",
        "examples/ssb/q11.tq",
        "--data",
        data(),
        "--device",
        "cpu",
    ];
    args.extend_from_slice(option);
    let output = tessera(&args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
}

#[test]
fn micro_benchmarks_run_and_report_their_floor() {
    let output = tessera(&[
        "bench",
        "micro",
        "--rows",
        "20000",
        "--probe-rows",
        "20000",
        "--max-table-bytes",
        "262144",
        "--sort-rows",
        "30000",
        "--chain-rows",
        "20000",
        "--device",
        "cpu",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let results: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let results = results.as_array().expect("a list of results");
    // Three selections, two projections, probes of a 32 KB and a 256 KB table, skewed probes of
    // the 256 KB one, joins on repeated keys spread evenly and by Zipf's law (whose sums the
    // benchmark checks itself), a sort of pairs, top-k for four k (whose keys it checks) and
    // the full sort they are compared with.
    assert_eq!(results.len(), 16, "{stdout}");
    for result in &results[10..] {
        let sort = &result["sort"];
        assert!(
            sort["median_ms"].as_f64().expect("sort time") > 0.0,
            "{result}"
        );
        assert!(
            sort["bytes"].as_f64().expect("sort bytes") > 0.0,
            "{result}"
        );
    }
    assert_eq!(results[10]["rows_out"].as_f64(), Some(30000.0), "{stdout}");
    assert_eq!(results[12]["rows_out"].as_f64(), Some(32.0), "{stdout}");
    // Selections keep about the fraction asked for, projections every row; each moves at least
    // the bytes it reads.
    for (result, kept) in results.iter().zip([0.1, 0.5, 0.9, 1.0, 1.0]) {
        let rows = result["rows_out"].as_f64().expect("rows_out");
        assert!((rows / 20000.0 - kept).abs() < 0.02, "{result}");
        assert!(
            result["bytes"].as_f64().expect("bytes") >= 20000.0 * 4.0,
            "{result}"
        );
        assert!(
            result["floor_ms"].as_f64().expect("floor") > 0.0,
            "{result}"
        );
    }
}

#[test]
fn rows_of_a_selection_print_as_csv() {
    let script =
        "from supplier | where s_suppkey <= 3 | select s_suppkey, s_name | sort s_suppkey\n";
    assert_eq!(
        csv_on_the_cpu("rows", script, &[]),
        "s_suppkey,s_name\n1,Supplier#000000001\n2,Supplier#000000002\n3,Supplier#000000003\n"
    );
}

/// What `tessera run` prints as CSV for `script` over the test data on the CPU, with `args`
/// after the rest; `label` names its temporary file.
fn csv_on_the_cpu(label: &str, script: &str, args: &[&str]) -> String {
    let mut all = vec!["--device", "cpu", "--format", "csv"];
    all.extend_from_slice(args);
    on_script("run", label, script, &all)
}

#[test]
fn the_wisconsin_generator_writes_both_relations() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("wisconsin");
    let output = tessera(&[
        "gen",
        "wisconsin",
        "--rows",
        "500",
        "--out",
        out.to_str().expect("utf-8 path"),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(out.join("wisconsin.parquet").is_file());
    assert!(out.join("wisconsin_small.parquet").is_file());
    let refused = tessera(&[
        "gen",
        "wisconsin",
        "--rows",
        "0",
        "--out",
        out.to_str().unwrap_or("."),
    ]);
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("1 to"),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn a_sort_on_one_key_carries_its_only_other_column_instead_of_gathering_it() {
    let kernels = |select: &str| {
        let script = format!("from supplier | select {select} | sort s_suppkey desc\n");
        compiled(
            &format!("carried-{}", select.len()),
            &script,
            &["--emit", "ptx"],
        )
    };
    let pair = kernels("s_suppkey, s_nation");
    assert!(pair.contains("_sort_carried("), "{pair}");
    assert!(!pair.contains("_sort_gather"), "{pair}");
    let three = kernels("s_suppkey, s_nation, s_city");
    assert!(!three.contains("_sort_carried("), "{three}");
    assert!(three.contains("_sort_gather4("), "{three}");
}

#[test]
fn a_join_on_repeated_keys_spreads_matches_over_the_block_while_the_probe_rows_columns_fit() {
    let rounds = |carried: &str, target: &str| {
        let script = format!(
            "from (from lineorder | where lo_orderkey <= 40) as a\n\
             | join (from lineorder | where lo_quantity <= 25) as b on a.lo_discount == b.lo_discount\n\
             | aggregate {{ pairs = count(), {carried}, q = sum(b.lo_quantity) }}\n"
        );
        let llvm = compiled(
            &format!("spread-{}-{target}", carried.len()),
            &script,
            // Plain columns: the GPU's 256x4 tile.
            &["--emit", "llvm", "--target", target, "--compress", "none"],
        );
        let spread = llvm.contains("\nspread_round:");
        let walk = llvm.contains("\nwalk_round:");
        assert!(spread != walk, "one way of rounds: {llvm}");
        if spread {
            "spread"
        } else {
            "walk"
        }
    };
    // Two carried columns fit the staging budget of a 256x4 GPU tile and of a 2048-row host
    // tile; four do not fit the host's, so both ways run in the CPU's conformance tests.
    let two = "r = sum(a.lo_revenue), k = max(a.lo_orderkey)";
    let four = "r = sum(a.lo_revenue), k = max(a.lo_orderkey), c = min(a.lo_custkey), p = max(a.lo_partkey)";
    assert_eq!(rounds(two, "host"), "spread");
    assert_eq!(rounds(two, "sm_90"), "spread");
    assert_eq!(rounds(four, "host"), "walk");
    assert_eq!(rounds(four, "sm_90"), "spread");
}

/// What `tessera compile` prints for `script` over the test data, with `args` after the data;
/// `label` names its temporary file.
fn compiled(label: &str, script: &str, args: &[&str]) -> String {
    on_script("compile", label, script, args)
}

/// What `tessera COMMAND SCRIPT --data DATA ARGS` prints, `script` written to a temporary file
/// named after `label`; the command must succeed.
fn on_script(command: &str, label: &str, script: &str, args: &[&str]) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let path = script_in(&scratch, &format!("{label}.tq"), script);
    let mut all = vec![command, path.as_str(), "--data", data()];
    all.extend_from_slice(args);
    let output = tessera(&all);
    let _ = std::fs::remove_file(&path);
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

#[test]
fn a_join_partitions_its_probes_only_when_asked_or_its_table_is_large() {
    let script =
        "from lineorder | join part on lo_partkey == p_partkey | group p_brand1 { n = count() }\n";
    let plan = |mode: &str| {
        compiled(
            &format!("partition-{mode}"),
            script,
            &["--emit", "physical", "--partition-joins", mode],
        )
    };
    // The part table of the test data is far below the 32 MB past which `auto` partitions.
    for mode in ["auto", "never"] {
        let physical = plan(mode);
        assert!(!physical.contains("partition"), "{mode}: {physical}");
    }
    let physical = plan("always");
    assert!(
        physical.contains("by the slot of lo_partkey in ht0, 8 parts: count lo_partkey")
            && physical.contains("8 parts: write lo_partkey")
            && physical.contains("scan partitioning 0, in order of its parts"),
        "{physical}"
    );
    // Each later probe splits the pipeline over the partitioned rows again.
    let script = std::fs::read_to_string(common::repo().join("examples/ssb/q21.tq"))
        .expect("example script");
    let physical = compiled(
        "partition-q21",
        &script,
        &["--emit", "physical", "--partition-joins", "always"],
    );
    assert!(
        physical.contains("scan partitioning 1, in order of its parts")
            && physical.contains("partition 2 by the slot of lo_orderdate in ht0")
            && physical.contains("scan partitioning 2, in order of its parts"),
        "{physical}"
    );
    refused_option(
        &["--partition-joins", "sometimes"],
        "`sometimes` is not a choice; use auto, always or never",
    );
}

#[test]
fn partitioned_rows_give_the_same_result_whether_staged_by_part_or_written_directly() {
    // A tile of 2048 rows reorders its rows by part in a block array before writing them; one
    // of 4 rows has fewer places than the 8 parts and writes each row straight to its part.
    let script = "from lineorder | join supplier on lo_suppkey == s_suppkey\n\
                  | group s_nation { revenue = sum(lo_revenue), n = count() } | sort s_nation\n";
    let run = |args: &[&str]| csv_on_the_cpu("partition", script, args);
    let plain = run(&["--partition-joins", "never"]);
    let staged = run(&["--partition-joins", "always"]);
    let direct = run(&["--partition-joins", "always", "--tile", "1x4"]);
    assert!(plain.lines().count() > 5, "{plain}");
    assert_eq!(plain, staged);
    assert_eq!(plain, direct);
}

/// Runs `args` with `input` on standard input.
fn tessera_with_input(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(common::repo())
        .env("TESSERA_CACHE_DIR", "")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tessera starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("script written");
    drop(stdin);
    child.wait_with_output().expect("tessera runs")
}

#[test]
fn scripts_come_inline_or_from_standard_input_and_print_in_every_format() {
    let script = "from supplier | where s_suppkey < 3 \
                  | select z = s_suppkey, a = s_suppkey + null, f = (s_suppkey as f32) / 10.0 \
                  | sort z\n\
                  from date | aggregate { n = count() }";
    let json = tessera(&[
        "run",
        "-c",
        script,
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "json",
    ]);
    let stdout = text(&json.stdout);
    assert!(json.status.success(), "{}", text(&json.stderr));
    // One JSON value for the whole script; keys in column order; f32 values in their shortest
    // form; a null is JSON's null.
    let parsed: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON value");
    assert_eq!(
        parsed,
        serde_json::json!([
            [{"z": 1, "a": null, "f": 0.1}, {"z": 2, "a": null, "f": 0.2}],
            [{"n": 2556}]
        ])
    );
    assert!(
        stdout.contains(r#"{"z": 1, "a": null, "f": 0.1}"#),
        "{stdout}"
    );

    let piped = tessera_with_input(
        &[
            "run",
            "-",
            "--data",
            data(),
            "--device",
            "cpu",
            "--format",
            "csv",
        ],
        script,
    );
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    assert_eq!(text(&piped.stdout), "z,a,f\n1,,0.1\n2,,0.2\n\nn\n2556\n");

    let ndjson = tessera(&[
        "run",
        "-c",
        script,
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "ndjson",
    ]);
    let lines: Vec<serde_json::Value> = text(&ndjson.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);

    let table = tessera(&["run", "-c", script, "--data", data(), "--device", "cpu"]);
    assert!(
        text(&table.stdout).contains("NULL"),
        "{}",
        text(&table.stdout)
    );
}

#[test]
fn a_long_table_is_elided_when_asked() {
    let output = tessera(&[
        "run",
        "-c",
        "from date | select d_datekey | sort d_datekey",
        "--data",
        data(),
        "--device",
        "cpu",
        "--max-rows",
        "4",
    ]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(stdout.lines().count(), 2 + 4 + 1 + 1, "{stdout}");
    assert!(stdout.ends_with("(2556 rows, 4 shown)\n"), "{stdout}");
}

#[test]
fn a_script_is_named_once() {
    let both = tessera(&[
        "run",
        "examples/ssb/q11.tq",
        "-c",
        "from date",
        "--data",
        data(),
    ]);
    assert_eq!(both.status.code(), Some(2));
    let neither = tessera(&["run", "--data", data()]);
    assert_eq!(neither.status.code(), Some(2));
}

#[test]
fn a_single_csv_or_tsv_file_is_a_table_named_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("my-sales.csv");
    std::fs::write(
        &csv,
        "region,amount,day\nnorth,10,2024-03-01\nsouth,,2024-03-02\nnorth,5,2024-03-02\n,7,\n",
    )
    .unwrap();
    let output = run_csv(
        "from `my-sales` | group region { n = count(), total = sum(amount) } | sort region",
        csv.to_str().unwrap(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "region,n,total\nnorth,2,15\nsouth,1,\n,1,7\n"
    );

    let tsv = dir.path().join("events.tsv");
    std::fs::write(&tsv, "id\tname\n1\ta, b\n2\t\n").unwrap();
    let output = tessera(&[
        "run",
        "-c",
        "from events | where name is null | select id",
        "--data",
        dir.path().to_str().unwrap(),
        "--device",
        "cpu",
        "--format",
        "csv",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "id\n2\n");

    let not_a_table = tessera(&["run", "-c", "from x", "--data", "README.md"]);
    assert_eq!(not_a_table.status.code(), Some(1));
    assert!(text(&not_a_table.stderr).contains("is not a table"));
}

/// An Arrow IPC file of two rows: `id` and `data`, a binary column Tessera cannot read.
fn write_binary_column(path: &std::path::Path) {
    use std::sync::Arc;
    let schema = Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("id", arrow_schema::DataType::Int64, false),
        arrow_schema::Field::new("data", arrow_schema::DataType::Binary, false),
    ]));
    let columns: Vec<arrow_array::ArrayRef> = vec![
        Arc::new(arrow_array::Int64Array::from(vec![1, 2])),
        Arc::new(arrow_array::BinaryArray::from(vec![&b"a"[..], &b"bc"[..]])),
    ];
    let batch = arrow_array::RecordBatch::try_new(schema.clone(), columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = arrow_ipc::writer::FileWriter::try_new(file, &schema).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
}

#[test]
fn describe_lists_tables_columns_nullability_and_unreadable_columns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("visits.csv"),
        "id,at,note\n1,2024-01-01T10:00:00,\n2,2024-01-02T11:00:00.5,x\n",
    )
    .unwrap();
    write_binary_column(&dir.path().join("blobs.arrow"));
    let folder = dir.path().to_str().unwrap();
    let output = tessera(&["describe", folder, "--format", "csv"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("table,rows,source\n"), "{stdout}");
    assert!(stdout.contains("\nvisits,2,"), "{stdout}");
    assert!(stdout.contains("visits,id,i64,nullable\n"), "{stdout}");
    assert!(
        stdout.contains("visits,at,timestamp,nullable\n"),
        "{stdout}"
    );
    assert!(stdout.contains("visits,note,str,nullable\n"), "{stdout}");
    assert!(
        stdout.contains("blobs,data,unreadable: Binary values are not supported,\n"),
        "{stdout}"
    );
    let run = |script: &str| {
        let args = ["run", "-c", script, "--data", folder, "--device", "cpu"];
        tessera(&args)
    };
    // Timestamps read from a CSV file print as DuckDB prints them.
    let visits = run("from visits | select id, at | sort id");
    assert!(visits.status.success(), "{}", text(&visits.stderr));
    assert_eq!(
        text(&visits.stdout)
            .lines()
            .filter(|l| l.contains("2024"))
            .count(),
        2
    );
    assert!(text(&visits.stdout).contains("2024-01-02 11:00:00.5"));
    // A query over a table with an unreadable column names what it leaves out.
    let all = run("from blobs");
    assert!(all.status.success(), "{}", text(&all.stderr));
    assert!(
        text(&all.stderr).contains(
            "warning: table `blobs` has columns Tessera cannot read, left out: `data` (Binary"
        ),
        "{}",
        text(&all.stderr)
    );
    // Referring to the unreadable column says why it cannot be read.
    let select = run("from blobs | select data");
    assert_eq!(select.status.code(), Some(1));
    assert!(
        text(&select.stderr).contains("Tessera cannot read it: Binary"),
        "{}",
        text(&select.stderr)
    );
    let missing = tessera(&["describe", data(), "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("no table `nope`"));
}

#[test]
fn compile_targets_the_host_without_a_gpu_unless_told() {
    if tessera_runtime::exec::gpu::probe().is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let artifact = dir.path().join("q11.tqx");
    let compile = tessera(&[
        "compile",
        "examples/ssb/q11.tq",
        "--data",
        data(),
        "-o",
        artifact.to_str().unwrap(),
    ]);
    assert!(compile.status.success(), "{}", text(&compile.stderr));
    assert!(
        text(&compile.stderr).contains(" for host "),
        "{}",
        text(&compile.stderr)
    );
    let run = tessera(&["run", artifact.to_str().unwrap(), "--data", data()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
}

#[test]
fn shell_completions_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let output = tessera(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", text(&output.stderr));
        let script = text(&output.stdout);
        for word in ["describe", "run", "serve", "format"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
}

#[test]
fn a_broken_file_fails_only_the_queries_that_read_its_table() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.csv"), "a\n1\n2\n").unwrap();
    std::fs::write(dir.path().join("bad.parquet"), b"not parquet").unwrap();
    std::fs::write(dir.path().join("lines.tbl"), "1|2|\n").unwrap();
    let data = dir.path().to_str().unwrap();
    let good = tessera(&[
        "run",
        "-c",
        "from good | aggregate { n = count() }",
        "--data",
        data,
        "--device",
        "cpu",
        "--format",
        "csv",
    ]);
    assert!(good.status.success(), "{}", text(&good.stderr));
    assert_eq!(text(&good.stdout), "n\n2\n");
    for (table, cause) in [("bad", "bad.parquet"), ("lines", "declare `table lines")] {
        let output = tessera(&[
            "run",
            "-c",
            &format!("from {table} | take 1"),
            "--data",
            data,
            "--device",
            "cpu",
        ]);
        assert_eq!(output.status.code(), Some(1));
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(&format!("table `{table}` cannot be read")),
            "{stderr}"
        );
        assert!(stderr.contains(cause), "{stderr}");
    }
    let listing = tessera(&["describe", data, "--format", "csv"]);
    assert!(
        text(&listing.stdout).contains("bad,,unreadable: "),
        "{}",
        text(&listing.stdout)
    );
}

#[test]
fn output_files_hold_the_result_in_the_format_their_extension_names() {
    let dir = tempfile::tempdir().unwrap();
    let script = "from customer | where c_custkey <= 12 \
                  | select c_custkey, c_city, ratio = (c_custkey as f32) / 8.0, big = c_custkey > 6, \
                  none = c_custkey + null \
                  | sort c_custkey";
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "-c", script, "--data", data(), "--device", "cpu"];
        args.extend_from_slice(extra);
        tessera(&args)
    };
    let printed = run(&["--format", "csv"]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    for name in ["out.parquet", "out.arrow", "out.csv"] {
        let path = dir.path().join(name);
        let written = run(&["-o", path.to_str().unwrap()]);
        assert!(
            written.status.success(),
            "{name}: {}",
            text(&written.stderr)
        );
        assert!(written.stdout.is_empty(), "{name}: nothing printed");
        // Read back through Tessera's own readers, the file's table is the result.
        let back = tessera(&[
            "run",
            "-c",
            "from out",
            "--data",
            path.to_str().unwrap(),
            "--device",
            "cpu",
            "--format",
            "csv",
        ]);
        assert!(back.status.success(), "{name}: {}", text(&back.stderr));
        assert_eq!(text(&back.stdout), text(&printed.stdout), "{name}");
    }
    let json = dir.path().join("out.json");
    assert!(run(&["-o", json.to_str().unwrap()]).status.success());
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(parsed.as_array().map(Vec::len), Some(12));
    assert_eq!(parsed[11]["c_custkey"], serde_json::json!(12));
    assert_eq!(parsed[11]["none"], serde_json::Value::Null);

    let unknown = run(&["-o", dir.path().join("out.xlsx").to_str().unwrap()]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stderr).contains("extension"));
    let two = tessera(&[
        "run",
        "-c",
        "from date | take 1\nfrom date | take 2",
        "--data",
        data(),
        "--device",
        "cpu",
        "-o",
        dir.path().join("two.csv").to_str().unwrap(),
    ]);
    assert_eq!(two.status.code(), Some(1));
    assert!(!dir.path().join("two.csv").exists());
}

#[test]
fn an_unsigned_value_beyond_64_bit_integers_is_a_clear_error() {
    // `huge.value` is a UBIGINT holding 2^64 - 1; `counters` beside it reads (see
    // tests/conformance/formats/unsigned.test).
    let output = tessera(&[
        "run",
        "-c",
        "from huge | aggregate { n = count(), top = max(value) }",
        "--data",
        "tests/data/unsigned",
        "--device",
        "cpu",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with(
            "error: table `huge`, column `value`: it holds 18446744073709551615, beyond the largest 64-bit integer"
        ),
        "{stderr}"
    );
    let types = tessera(&[
        "describe",
        "tests/data/unsigned",
        "counters",
        "--format",
        "csv",
    ]);
    assert!(
        text(&types.stdout).contains("counters,large,i64,nullable"),
        "{}",
        text(&types.stdout)
    );
}

#[test]
fn a_cut_arrow_file_is_unreadable_not_a_crash() {
    // Opening an IPC file reads its footer and each record batch's metadata: a file cut
    // anywhere, or whose footer points past its end, is an unreadable table.
    let whole = std::fs::read(common::repo().join("tests/data/arrow/readings.arrow")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (i, cut) in [10, whole.len() / 3, whole.len() - 11, whole.len() - 1]
        .iter()
        .enumerate()
    {
        let mut bytes = whole[..*cut].to_vec();
        // Some with a footer's worth of the original end, so the footer length is read.
        if i % 2 == 1 {
            bytes.extend_from_slice(&whole[whole.len() - 10..]);
        }
        std::fs::write(dir.path().join(format!("cut{i}.arrow")), bytes).unwrap();
    }
    let data = dir.path().to_str().unwrap();
    let listing = tessera(&["describe", data, "--format", "csv"]);
    assert!(listing.status.success(), "{}", text(&listing.stderr));
    for i in 0..4 {
        let line = text(&listing.stdout)
            .lines()
            .find(|l| l.starts_with(&format!("cut{i},,")))
            .map(str::to_string);
        assert!(
            line.is_some_and(|l| l.contains("unreadable: ")),
            "{}",
            text(&listing.stdout)
        );
        let run = tessera(&[
            "run",
            "-c",
            &format!("from cut{i} | aggregate {{ n = count() }}"),
            "--data",
            data,
            "--device",
            "cpu",
        ]);
        assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
        assert!(text(&run.stderr).starts_with("error: "));
    }
}

#[test]
fn the_tpch_benchmark_runs_every_query_it_writes() {
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let output = tessera(&[
        "bench", "tpch", "--sf", "0.01", "--data", data, "--device", "cpu", "--runs", "1",
        "--warmup", "0", "--json",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let queries = report["queries"].as_array().expect("queries");
    let names: Vec<&str> = queries.iter().filter_map(|q| q["query"].as_str()).collect();
    assert_eq!(
        names,
        [
            "q01", "q02", "q03", "q04", "q05", "q06", "q07", "q08", "q09", "q10", "q11", "q12",
            "q13", "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22"
        ]
    );
    // Q1 has a group per return flag and line status in the data; Q3 takes ten.
    assert_eq!(queries[0]["rows"], 4);
    assert_eq!(queries[2]["rows"], 10);
    // At this scale every query runs as one (Q2's and Q17's grouped relations are joined from
    // their slots, Q11's one-row aggregate is read from its slot): no stage time is reported.
    // (A stage's time is checked where `run --timing` reports it.)
    for query in queries {
        assert!(query["stages_ms"].is_null(), "{query}");
    }
}

/// Runs `script` on the CPU with `--timing` (as CSV), then twice through the shell's resident
/// engine (like the server's), which must answer the same both times: the answer and the
/// run's stderr.
fn answered_everywhere(script: &str) -> (String, String) {
    let run = tessera(&[
        "run",
        "-c",
        script,
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "csv",
        "--timing",
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let answer = text(&run.stdout);
    let shell = tessera_with_input(
        &["shell", "--data", data(), "--device", "cpu"],
        &format!(".format csv\n{script};\n{script};\n"),
    );
    assert!(shell.status.success(), "{}", text(&shell.stderr));
    assert_eq!(text(&shell.stdout), format!("{answer}{answer}"));
    (answer, text(&run.stderr))
}

/// A script that runs in stages: the relation it crosses is sorted and limited, which the
/// pipelines after it cannot read where it lies.
const STAGED_BEST_SUPPLIER: &str =
    "let revenue = from lineorder | group lo_suppkey { total = sum(lo_revenue) }\n\
     let best = from revenue | sort total desc | take 1 | select top = total\n\
     from revenue | product best | where total == top | select lo_suppkey, total";

/// `script` written to `name` in `dir`: the file's path.
fn script_in(dir: &tempfile::TempDir, name: &str, script: &str) -> String {
    let file = dir.path().join(name);
    std::fs::write(&file, script).expect("script written");
    file.to_str().expect("utf-8 path").to_string()
}

/// A script joining a sorted and limited relation runs in stages on every path a user takes:
/// `run` reports their time, the resident engine runs it twice with the same answer, `--emit
/// physical` lists the stages and why, and compiling it ahead of time is refused in one line.
/// Such answers are checked against DuckDB by `tests/conformance/stages`.
#[test]
fn a_script_joining_a_sorted_result_runs_in_stages() {
    let script = STAGED_BEST_SUPPLIER;
    let (answer, timing) = answered_everywhere(script);
    assert!(answer.starts_with("lo_suppkey,total\n"), "{answer}");
    assert_eq!(answer.lines().count(), 2, "{answer}");
    assert!(timing.contains("stage stage#2: 1 rows in "), "{timing}");

    let dir = tempfile::tempdir().expect("a scratch folder");
    let file = script_in(&dir, "best.tq", script);
    let file = file.as_str();
    let emitted = tessera(&[
        "compile",
        file,
        "--data",
        data(),
        "--emit",
        "physical",
        "--target",
        "host",
    ]);
    assert!(emitted.status.success(), "{}", text(&emitted.stderr));
    assert_eq!(
        text(&emitted.stdout),
        "runs in 2 stages before its queries, each planned once those before it have run; \
         `tessera run --timing` lists their kernels\n\
         not planned whole: joining or combining a grouped or sorted relation is not supported yet\n\
         stage#1 = from lineorder | group lo_suppkey { total = sum(lo_revenue) }\n\
         stage#2 = from revenue | sort total desc | take 1 | select top = total\n"
    );
    let artifact = dir.path().join("best.tqx");
    let compiled = tessera(&[
        "compile",
        file,
        "--data",
        data(),
        "--target",
        "host",
        "-o",
        artifact.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(compiled.status.code(), Some(1));
    let stderr = text(&compiled.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot be compiled ahead of time yet"),
        "{stderr}"
    );
    assert!(!artifact.exists());
}

/// A semi join comparing both inputs is decorrelated into a grouping of the joined relation,
/// whose slots the planner probes in place: no stage runs, and the script compiles ahead of
/// time into a program that gives the same answer.
#[test]
fn a_semi_join_comparing_both_inputs_is_decorrelated_and_planned_whole() {
    let script = "from lineorder as a\n\
                  | join semi lineorder as b on b.lo_orderkey == a.lo_orderkey and b.lo_suppkey != a.lo_suppkey\n\
                  | aggregate { lines = count() }";
    let (answer, timing) = answered_everywhere(script);
    assert!(answer.starts_with("lines\n"), "{answer}");
    assert!(!timing.contains("stage stage#"), "{timing}");

    let dir = tempfile::tempdir().expect("a scratch folder");
    let file = script_in(&dir, "shared.tq", script);
    let typed = tessera(&["compile", &file, "--data", data(), "--emit", "typed"]);
    assert!(typed.status.success(), "{}", text(&typed.stderr));
    assert!(
        text(&typed.stdout).contains("min(b.lo_suppkey)"),
        "{}",
        text(&typed.stdout)
    );
    compiles_ahead_of_time(script, &answer, "probed in place");
}

/// A scalar subquery, a one-row aggregate crossed with `product`, is read from the aggregate's
/// slot by the pipelines after it: no stage runs, and the script compiles ahead of time into a
/// program that gives the same answer.
#[test]
fn a_script_crossing_a_one_row_aggregate_is_planned_whole() {
    let script = "let revenue = from lineorder | group lo_suppkey { total = sum(lo_revenue) }\n\
                  let best = from revenue | aggregate { top = max(total) }\n\
                  from revenue | product best | where total == top | select lo_suppkey, total";
    let (answer, timing) = answered_everywhere(script);
    assert!(answer.starts_with("lo_suppkey,total\n"), "{answer}");
    assert_eq!(answer.lines().count(), 2, "{answer}");
    assert!(!timing.contains("stage stage#"), "{timing}");
    compiles_ahead_of_time(script, &answer, "the one row of pipeline 1's aggregate");
}

/// `script` (whose answer is `answer`) is planned whole: `--emit physical` shows `planned`
/// (how it reads a grouping's slots), and its `.tqx` compiled ahead of time gives the same
/// answer.
fn compiles_ahead_of_time(script: &str, answer: &str, planned: &str) {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let file = script_in(&dir, "whole.tq", script);
    let file = file.as_str();
    let physical = tessera(&[
        "compile",
        file,
        "--data",
        data(),
        "--emit",
        "physical",
        "--target",
        "host",
    ]);
    assert!(
        text(&physical.stdout).contains(planned),
        "{}",
        text(&physical.stdout)
    );
    let artifact = dir.path().join("whole.tqx");
    let artifact = artifact.to_str().expect("utf-8 path");
    let compiled = tessera(&[
        "compile",
        file,
        "--data",
        data(),
        "--target",
        "host",
        "-o",
        artifact,
    ]);
    assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    let ran = tessera(&[
        "run",
        artifact,
        "--data",
        data(),
        "--device",
        "cpu",
        "--format",
        "csv",
    ]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert_eq!(text(&ran.stdout), answer);
}

/// `tessera run --gpu-memory` keeps the columns within a budget: a query reading more streams
/// its largest table through the device in pieces, its grouping's groups then joined, and a
/// stage's query too, with the same answers.
#[test]
fn a_run_within_a_memory_budget_streams_its_largest_table() {
    let scripts = [
        "from lineorder | where lo_quantity < 25 \
         | aggregate { revenue = sum(lo_extendedprice * lo_discount) }",
        "let per_supplier = from lineorder | group lo_suppkey { total = sum(lo_revenue) }\n\
         from per_supplier | join supplier on lo_suppkey == s_suppkey \
         | sort total desc | take 3 | select s_name, total",
        STAGED_BEST_SUPPLIER,
    ];
    for script in scripts {
        let run = |extra: &[&str]| {
            let mut args = vec![
                "run",
                "-c",
                script,
                "--data",
                data(),
                "--device",
                "cpu",
                "--format",
                "csv",
            ];
            args.extend_from_slice(extra);
            let output = tessera(&args);
            assert!(output.status.success(), "{}", text(&output.stderr));
            output
        };
        let whole = run(&[]);
        let budgeted = run(&["--gpu-memory", "64KiB", "--timing"]);
        assert_eq!(text(&budgeted.stdout), text(&whole.stdout), "{script}");
        let timing = text(&budgeted.stderr);
        assert!(
            timing.contains("streamed `lineorder`"),
            "{script}\n{timing}"
        );
    }
}

/// A table of no columns (an empty CSV file) has no rows to make distinct: `distinct` and
/// `union` of it are empty, where a grouping without keys would give one row.
#[test]
fn distinct_rows_of_no_columns_are_none_when_there_are_no_rows() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    std::fs::write(scratch.path().join("e.csv"), "").expect("written");
    let folder = scratch.path().to_str().expect("utf-8 path");
    for script in [
        "from e | distinct | aggregate { n = count() }",
        "from e | union e | aggregate { n = count() }",
        "from e | aggregate { n = count() }",
    ] {
        let output = run_csv(script, folder);
        assert!(
            output.status.success(),
            "{script}: {}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stdout), "n\n0\n", "{script}");
    }
}

/// `union` of two tables whose keys lie at the two ends of the 64-bit range: one dense array
/// covering both would span every integer, so they are grouped in a hash table (the span
/// wrapped, and the second table's key fell outside the first's array: "the data has changed").
#[test]
fn a_union_of_keys_at_both_ends_of_the_64_bit_range_keeps_both() {
    use tessera_storage::column::ColumnData;
    use tessera_storage::parquet_write::write_parquet;
    use tessera_storage::{DataType, Field, Schema};
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let schema = Schema::new(vec![Field::new("k", DataType::I64)]);
    for (name, k) in [("a", i64::MIN), ("b", i64::MAX)] {
        let path = scratch.path().join(format!("{name}.parquet"));
        write_parquet(&path, &schema, &[ColumnData::I64(vec![k].into())], &[None])
            .expect("written");
    }
    let folder = scratch.path().to_str().expect("utf-8 path");
    let output = run_csv("from a | union b | sort k", folder);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "k\n-9223372036854775808\n9223372036854775807\n"
    );
}

/// A `case` of a decimal column and number literals is a decimal (each literal the decimal it is
/// written as), printed with every digit of its scale: the lines are DuckDB's answer to the same
/// `CASE` (tests/conformance/decimals/case_of_decimals_and_literals.test), where a float result
/// would print `0.5` and `-47530.86`.
#[test]
fn a_case_of_decimals_and_literals_prints_as_a_decimal() {
    let folder = common::repo().join("tests/data/decimals");
    let output = run_csv(
        "from ledger | select entry, x = case when entry > 3 then 0.5 else amount end, \
         y = case when entry % 2 == 0 then amount else 1.125 end | sort entry | take 5",
        folder.to_str().expect("utf-8 path"),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "entry,x,y\n0,-50000.00,-50000.000\n1,-48765.43,1.125\n2,-47530.86,-47530.860\n\
         3,-46296.29,1.125\n4,0.50,-45061.720\n"
    );
}

/// A sum over the groups of a grouping, computed on the device over its slots, still fails
/// when it leaves 64 bits: the total of a thousand first-level maxima near 2^63 does not fit,
/// and the check comparing it with the same sum in floating point must follow the second
/// grouping rather than be dropped with the host's steps (it answered a wrapped total).
#[test]
fn a_sum_over_grouped_results_that_overflows_is_an_error() {
    let folder = common::repo().join("tests/data/wide");
    let folder = folder.to_str().expect("utf-8 path");
    let script = "from events | where account > 0 | group id { m = max(account) } | aggregate { total = sum(m) }";
    let plan = emitted(script, folder, "physical");
    assert!(plan.contains("the groups of pipeline 0"), "{plan}");
    assert!(plan.contains("host: check"), "{plan}");
    let output = run_csv(script, folder);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    assert!(
        text(&output.stderr).contains("overflow"),
        "{}",
        text(&output.stderr)
    );
}

/// A grouping by keys wider than one word (two full-range 64-bit keys, one of them nullable)
/// or by floats is grouped again on the device, which reads the keys back from the slots'
/// words and a float from its bits (the results: tests/conformance/wide_keys/regroup_after_wide_keys.test
/// and having_on_float_keys.test); they were decoded and grouped again on the host.
#[test]
fn groupings_by_wide_and_float_keys_are_grouped_again_on_the_device() {
    let folder = common::repo().join("tests/data/wide");
    let folder = folder.to_str().expect("utf-8 path");
    for script in [
        "from events | select account, session | distinct | group account { n = count(), low = min(session) }",
        "from events | group score, ratio { n = count() } | group ratio { groups = count(), top = max(score) }",
    ] {
        let plan = emitted(script, folder, "physical");
        assert!(plan.contains("the groups of pipeline 0"), "{plan}");
        assert!(!plan.contains("host: group"), "{plan}");
    }
}

/// A grouping of many groups sorted and taken is written out as rows and sorted on the device,
/// so that only the rows taken are read back; a grouping of few groups is read back whole and
/// sorted on the host.
#[test]
fn groupings_of_many_groups_are_sorted_on_the_device() {
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let compile = |script: &str, emit: &str| emitted(script, data, emit);
    // 60,175 rows into a hash table of 131,072 slots.
    let many = "from lineitem | group l_orderkey, l_partkey { qty = sum(l_quantity) } \
                | where qty > 10 | derive half = qty / 2 | sort half desc, l_orderkey | take 5";
    let plan = compile(many, "physical");
    assert!(
        plan.contains("pipeline 1: the groups of pipeline 0"),
        "{plan}"
    );
    assert!(
        plan.contains("materialize l_orderkey, l_partkey, qty, half"),
        "{plan}"
    );
    assert!(
        plan.contains("device: sort half desc, l_orderkey"),
        "{plan}"
    );
    let kernels = compile(many, "kernels");
    assert!(kernels.contains("sort_scatter"), "{kernels}");
    assert!(kernels.contains("result: rows of 4 columns"), "{kernels}");
    // TPC-H Q1's four groups.
    let few = "from lineitem | group l_returnflag, l_linestatus { n = count() } \
               | sort l_returnflag, l_linestatus";
    let plan = compile(few, "physical");
    assert!(!plan.contains("the groups of pipeline"), "{plan}");
    assert!(
        plan.contains("host: sort l_returnflag, l_linestatus"),
        "{plan}"
    );
}

/// Rows written out over a grouping's slots that name the grouping's columns in its order (its
/// keys, then its aggregates) go to buffers of their own: written into the accumulators, as
/// they once were, a tile's rows overwrote slots another tile had yet to read, and a group
/// took another's sums now and then (one run in sixty on two cores).
#[test]
fn rows_written_over_a_grouping_do_not_overwrite_its_accumulators() {
    let data = common::ssb_data().to_str().expect("utf-8 path");
    let script = "from lineorder | derive bucket = lo_orderkey % 97 \
                  | group bucket { n = count(), revenue = sum(lo_revenue) } | sort bucket";
    let kernels = emitted(script, data, "kernels");
    let over_slots = kernels
        .split("kernel ")
        .find(|kernel| kernel.contains("over the tiles of the grouping's slots"))
        .unwrap_or_else(|| panic!("a kernel over the grouping's slots: {kernels}"));
    for column in ["`n`", "`revenue`"] {
        let buffers: std::collections::BTreeSet<&str> = over_slots
            .lines()
            .filter(|line| line.trim_start().starts_with("buffer ") && line.ends_with(column))
            .collect();
        assert_eq!(
            buffers.len(),
            2,
            "{column} read and written apart: {over_slots}"
        );
    }
}

/// What a kernel settles before it is emitted and its parameters do not show is listed with
/// it: the shared memory its blocks take for staged columns and for their copy of the group
/// slots, and each column stored in blocks that it reads plain, with the reason.
#[test]
fn kernels_list_their_shared_memory_and_the_columns_they_read_plain() {
    let data = common::ssb_data().to_str().expect("utf-8 path");
    let kernels = |script: &str, options: &[&str]| {
        let options = [&["--compress", "for"][..], options].concat();
        emitted_with(script, data, "kernels", &options)
    };
    let grouped = "from lineorder | group lo_discount { s = sum(lo_revenue), n = count() }";
    let gpu = kernels(grouped, &["--target", "sm_90"]);
    assert!(
        gpu.contains("B staging lineorder.lo_revenue")
            && gpu.contains("187 B for the block's copy of 11 group slots"),
        "{gpu}"
    );
    // The host's blocks are one thread each and stage nothing.
    let host = kernels(grouped, &["--target", "host"]);
    assert!(!host.contains("shared memory"), "{host}");
    // SSB Q4.1's fact kernel reads more columns in blocks than its staging budget holds.
    let q41 = std::fs::read_to_string(common::repo().join("examples/ssb/q41.tq")).expect("q41");
    let gpu = kernels(&q41, &["--target", "sm_90"]);
    assert!(
        gpu.contains("lineorder.lo_supplycost: stored for, read plain: staging it takes"),
        "{gpu}"
    );
    assert!(
        gpu.contains("lineorder.lo_supplycost: plain values"),
        "{gpu}"
    );
    // Tiles of 100 rows cut blocks of 128: every column is read plain, on any target.
    let cut = kernels(grouped, &["--target", "host", "--tile", "1x100"]);
    assert!(
        cut.contains(
            "lineorder.lo_revenue: stored for, read plain: the tiles do not hold whole blocks of 128"
        ),
        "{cut}"
    );
}

/// Without `--tile`, a query's kernels take the tile measured best for how the columns it reads
/// are stored (`--compress auto` on the GPU): columns at one width, else in blocks, else plain.
#[test]
fn a_querys_tile_follows_how_its_columns_are_stored() {
    let tiles = |script: &str, data: &Path, options: &[&str]| {
        let data = data.to_str().expect("utf-8 path");
        let options = [&["--target", "sm_90", "--compress", "auto"][..], options].concat();
        let kernels = emitted_with(script, data, "kernels", &options);
        let lines: Vec<&str> = kernels
            .lines()
            .filter(|l| l.starts_with("kernel"))
            .collect();
        lines.join("\n")
    };
    let (ssb, tpch) = (common::ssb_data(), common::tpch_data());
    // The fact table's columns are packed at one width, the dates' in blocks.
    let q21 = std::fs::read_to_string(common::repo().join("examples/ssb/q21.tq")).expect("q21");
    let fact = tiles(&q21, ssb, &[]);
    assert!(fact.contains("on lineorder: tiles of 512x4"), "{fact}");
    let dates = tiles(
        "from date | where d_year == 1994 | aggregate { n = count() }",
        ssb,
        &[],
    );
    assert!(dates.contains("tiles of 128x16"), "{dates}");
    // Decimals are stored plain.
    let prices = "from lineitem | aggregate { s = sum(l_extendedprice) }";
    let plain = tiles(prices, tpch, &[]);
    assert!(plain.contains("tiles of 256x4"), "{plain}");
    let asked = tiles(prices, tpch, &["--tile", "128x8"]);
    assert!(asked.contains("tiles of 128x8"), "{asked}");
}

/// A `count(distinct)` groups twice, the second time by keys of the first grouping: its groups
/// may be as many as the first's, so sorted they are written out and sorted on the device
/// (TPC-H Q16's 27,840 at SF 10); grouped by an aggregate, a second grouping holds few groups
/// (TPC-H Q13's) and is sorted on the host.
#[test]
fn distinct_counts_of_many_groups_are_sorted_on_the_device() {
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let distinct = "from lineitem | group l_orderkey { suppliers = count(distinct l_suppkey) } \
                    | sort suppliers desc, l_orderkey | take 5";
    let plan = emitted(distinct, data, "physical");
    assert!(
        plan.contains("pipeline 2: the groups of pipeline 1")
            && plan.contains("materialize l_orderkey, suppliers"),
        "{plan}"
    );
    assert!(
        plan.contains("device: sort suppliers desc, l_orderkey"),
        "{plan}"
    );
    // Its first grouping is a hash table of 131,072 slots, as above.
    let by_aggregate = "from lineitem | group l_orderkey, l_partkey { n = count() } \
                        | group n { pairs = count() } | sort pairs desc, n";
    let plan = emitted(by_aggregate, data, "physical");
    assert!(plan.contains("host: sort pairs desc, n"), "{plan}");
}

/// An average of decimals is their exact sum over the count, as DuckDB computes it: the digits
/// printed are DuckDB's to the last (the conformance file's expected rows, compared here as
/// text rather than with the conformance files' tolerance), where a float sum's last digits
/// depended on the order of its additions. The plan shows the decimal summed as it is.
#[test]
fn averages_of_decimals_are_exact() {
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let test = common::repo().join("tests/conformance/decimals/exact_average_of_all_rows.test");
    let test = std::fs::read_to_string(test).expect("the conformance file");
    let script = test
        .split("script:\n")
        .nth(1)
        .and_then(|rest| rest.split("sql:").next())
        .expect("a script");
    let expected = test.split("----\n").nth(1).expect("expected rows");
    let output = run_csv(script, data);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), expected.trim());
    let plan = emitted(script, data, "physical");
    assert!(plan.contains("price = avg(l_extendedprice)"), "{plan}");
}

/// A small dense grouping sums each thread's rows per slot first, holding one value per
/// distinct computation in registers for every slot: `sum(age)` and `count(age)` share the
/// count of non-null ages. On a GPU its kernel runs in blocks of at most 256 threads, each of
/// which may then have the 255 registers a thread can, whatever the query's tile (the values
/// spilled to memory in blocks of 512); smaller tiles stay as they are.
#[test]
fn groupings_summed_per_thread_share_values_and_fit_registers() {
    let folder = common::repo().join("tests/data/nullable");
    let folder = folder.to_str().expect("utf-8 path");
    let script =
        "from people | group city { total = sum(age), aged = count(age), people = count() }";
    let plan = emitted(script, folder, "physical");
    assert!(
        plan.contains("per thread first (3 values a slot)"),
        "{plan}"
    );
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let path = scratch.path().join("script.tq");
    std::fs::write(&path, script).expect("written");
    let path = path.to_str().expect("utf-8 path");
    for (tile, kernel_tile) in [("512x4", "256x4"), ("128x8", "128x8")] {
        let output = tessera(&[
            "compile", path, "--data", folder, "--emit", "kernels", "--target", "sm_90", "--tile",
            tile,
        ]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let kernels = text(&output.stdout);
        assert!(
            kernels.contains(&format!("on people: tiles of {kernel_tile}")),
            "{kernels}"
        );
    }
}

/// A join on two key pairs packs them into one key; where the built side holds no pair twice
/// (TPC-H's `partsupp` on its part and supplier, checked on the data), its table is built with
/// unique keys, probed once per row instead of walked along chains of rows.
#[test]
fn joins_on_keys_unique_together_build_unique_tables() {
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let script =
        "from lineitem | join partsupp on ps_partkey == l_partkey and ps_suppkey == l_suppkey \
                  | aggregate { cost = sum(ps_supplycost * l_quantity) }";
    let plan = emitted(script, data, "physical");
    let build = plan
        .lines()
        .find(|line| line.contains("build") && line.contains("ps_partkey"))
        .unwrap_or_else(|| panic!("no build of partsupp: {plan}"));
    assert!(build.contains("open addressing"), "{plan}");
    assert!(!build.contains("chained rows"), "{plan}");
}

/// A decimal of more than 18 digits keeps every digit through the text formats and a Parquet
/// file written and read back: DuckDB's answers for `huge` (a DECIMAL(38, 0) of 30 digits), as in
/// tests/conformance/decimals/wide_thirty_digits.test.
#[test]
fn decimals_of_more_than_eighteen_digits_keep_every_digit_in_every_format() {
    let script = "from huge | derive next = value + 1";
    let csv = run_csv(script, "tests/data/decimals");
    assert!(csv.status.success(), "{}", text(&csv.stderr));
    assert_eq!(
        text(&csv.stdout),
        "id,value,next\n1,123456789012345678901234567890,123456789012345678901234567891\n"
    );
    let json = tessera(&[
        "run",
        "-c",
        script,
        "--data",
        "tests/data/decimals",
        "--device",
        "cpu",
        "--format",
        "json",
    ]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    assert_eq!(
        text(&json.stdout),
        "[\n  {\"id\": 1, \"value\": 123456789012345678901234567890, \"next\": 123456789012345678901234567891}\n]\n"
    );
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let written = scratch.path().join("out.parquet");
    let output = tessera(&[
        "run",
        "-c",
        script,
        "--data",
        "tests/data/decimals",
        "--device",
        "cpu",
        "--output",
        written.to_str().expect("utf-8 path"),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let back = run_csv("from out", scratch.path().to_str().expect("utf-8 path"));
    assert!(back.status.success(), "{}", text(&back.stderr));
    assert_eq!(text(&back.stdout), text(&csv.stdout));
    let described = tessera(&[
        "describe",
        scratch.path().to_str().expect("utf-8 path"),
        "out",
    ]);
    assert!(
        text(&described.stdout).contains("decimal(38, 0)"),
        "{}",
        text(&described.stdout)
    );
}

/// Hash tables and the device's sorts hold keys of up to 64 bits: grouping or joining on a
/// decimal of more than 18 digits is refused at the key, with a way around it; sorting by one
/// sorts on the host.
#[test]
fn keys_of_more_than_eighteen_digits_are_refused_at_the_key() {
    let group = run_csv(
        "from big | group balance { n = count() }",
        "tests/data/decimals",
    );
    assert_eq!(group.status.code(), Some(1));
    let stderr = text(&group.stderr);
    assert!(
        stderr.contains("grouping by a decimal of more than 18 digits is not supported yet")
            && stderr.contains("x as decimal(18, 2)"),
        "{stderr}"
    );
    let join = run_csv(
        "from big | join (from big | select key = amount, other = id) on amount == key",
        "tests/data/decimals",
    );
    assert_eq!(join.status.code(), Some(1));
    assert!(
        text(&join.stderr).contains("joining on a decimal of more than 18 digits"),
        "{}",
        text(&join.stderr)
    );
    let sorted = run_csv(
        "from big | sort amount desc | take 2 | select id",
        "tests/data/decimals",
    );
    assert!(sorted.status.success(), "{}", text(&sorted.stderr));
    assert_eq!(text(&sorted.stdout), "id\n126\n125\n");
}

/// A 128-bit decimal's sum leaves its type at 38 digits (DuckDB's "Overflow in SUM"): here
/// beyond 128 bits too, where the device's two-word sum wraps and its check in floating point
/// catches it.
#[test]
fn a_decimal_sum_beyond_thirty_eight_digits_is_an_error() {
    let output = run_csv(
        "from big | aggregate { total = sum(amount * 1000000) }",
        "tests/data/decimals",
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("integer overflow: the sum `total` is beyond what its type holds"),
        "{stderr}"
    );
}
