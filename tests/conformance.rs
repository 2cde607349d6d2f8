//! Runs every conformance file on the CPU through `tessera test`, the same command that runs
//! them on a GPU. Expected results come from DuckDB (tests/oracle.py), never from Tessera.

mod common;

use std::process::Command;

/// `tessera test tests/conformance --device cpu` with `extra` arguments: its stdout, after
/// checking that every file passed.
fn conformance_on_the_cpu(extra: &[&str]) -> String {
    conformance_with_cache(extra, std::path::Path::new(""))
}

/// The same, with `cache` as the cache folder (empty: none).
fn conformance_with_cache(extra: &[&str], cache: &std::path::Path) -> String {
    // Generated once here, before the parallel `tessera test` runs could each start to.
    common::ssb_data();
    common::wisconsin_data();
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["test", "tests/conformance", "--device", "cpu"])
        .args(extra)
        .current_dir(common::repo())
        .env("TESSERA_CACHE_DIR", cache)
        .output()
        .expect("tessera runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(" 0 failed"),
        "{extra:?}:\n{}\n{stderr}",
        failures(&stdout)
    );
    stdout
}

/// Every line but those of passing files: each failure's report, the heading and the summary,
/// in place of hundreds of passing lines that a log's tail would cut them from.
fn failures(stdout: &str) -> String {
    let report: Vec<&str> = stdout
        .lines()
        .filter(|line| !line.starts_with("ok "))
        .collect();
    report.join("\n")
}

#[test]
fn conformance_files_pass_on_the_cpu() {
    conformance_on_the_cpu(&[]);
}

/// The same files with every integer column the kernels read bit-packed (at one width, as
/// dictionary codes, GPU-FOR, GPU-DFOR) or per column the smallest: results must not change with
/// the encoding.
#[test]
fn conformance_files_pass_on_packed_columns() {
    for compression in ["pack", "dict", "for", "dfor", "auto"] {
        let stdout = conformance_on_the_cpu(&["--compress", compression]);
        assert!(
            stdout.contains("columns packed"),
            "{compression}: the summary says how columns were stored: {stdout}"
        );
    }
}

/// The same files with every join that can be split before its probe partitioned first, as
/// probes of tables too large for the cache are: results must not change with the plan.
#[test]
fn conformance_files_pass_with_partitioned_joins() {
    let stdout = conformance_on_the_cpu(&["--partition-joins", "always"]);
    assert!(
        stdout.contains("partitioned"),
        "the summary says joins were partitioned: {stdout}"
    );
}

/// The same files twice over one cache folder: the first run prepares the columns it reads (as
/// plain values and as `auto` encodings), the second reads them prepared: results must not change
/// with where columns come from.
#[test]
fn conformance_files_pass_reading_prepared_columns() {
    let cache = tempfile::tempdir().expect("a cache folder");
    let first = conformance_with_cache(&["--compress", "auto"], cache.path());
    assert!(
        first.contains(" prepared)"),
        "the first run prepares: {first}"
    );
    let second = conformance_with_cache(&["--compress", "auto"], cache.path());
    assert!(
        second.contains("prepared columns read, 0 prepared)"),
        "the second run reads what the first prepared: {second}"
    );
}
