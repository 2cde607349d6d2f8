//! Runs every conformance file on the CPU through `tessera test`, the same command that runs
//! them on a GPU. Expected results come from DuckDB (tests/oracle.py), never from Tessera.

mod common;

use std::process::Command;

#[test]
fn conformance_files_pass_on_the_cpu() {
    common::ssb_data();
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["test", "tests/conformance", "--device", "cpu"])
        .current_dir(common::repo())
        .env("TESSERA_CACHE_DIR", "")
        .output()
        .expect("tessera runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}
