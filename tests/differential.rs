//! The randomized differential test at a small count: `tests/differential.py` writes random
//! queries with DuckDB's answers (the oracle) as conformance files, and `tessera test` runs them
//! on the CPU. `TESSERA_DIFFERENTIAL_SEED` and `TESSERA_DIFFERENTIAL_COUNT` choose others; at
//! thousands of queries, and with `--device gpu`, the same two commands run it on demand (README).

mod common;

use std::process::Command;

#[test]
fn random_queries_answer_as_duckdb_does() {
    let seed = std::env::var("TESSERA_DIFFERENTIAL_SEED").unwrap_or_else(|_| "1".into());
    let count = std::env::var("TESSERA_DIFFERENTIAL_COUNT").unwrap_or_else(|_| "150".into());
    // Generated once here: the script reads it for DuckDB, `tessera test` for Tessera.
    common::ssb_data();
    let folder = tempfile::tempdir().expect("a temporary folder");
    let written = Command::new("python3")
        .arg("tests/differential.py")
        .args(["--out", folder.path().to_str().expect("utf-8 path")])
        .args(["--seed", &seed, "--count", &count])
        .args(["--tessera", env!("CARGO_BIN_EXE_tessera")])
        .current_dir(common::repo())
        .output()
        .expect("python3 runs");
    assert!(
        written.status.success(),
        "tests/differential.py (needs DuckDB's Python package: scripts/setup installs it): {}",
        String::from_utf8_lossy(&written.stderr)
    );
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["test", folder.path().to_str().expect("utf-8 path")])
        .args(["--device", "cpu"])
        .current_dir(common::repo())
        .env("TESSERA_CACHE_DIR", "")
        .output()
        .expect("tessera runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failures: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("ok ")).collect();
    assert!(
        output.status.success() && stdout.contains(&format!("{count} passed, 0 failed")),
        "seed {seed}: {}\n{}",
        failures.join("\n"),
        String::from_utf8_lossy(&output.stderr)
    );
}
