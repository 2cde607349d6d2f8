//! `tessera gen` with the folder it writes into, as a user meets it: other files are left alone,
//! two datasets share a folder, links planted where it writes are not written through, a
//! generation killed midway is refused by later queries until it is run again, and a foreign
//! file where a table goes stops it before anything changes.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

fn tessera() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        // No kernel cache: the tests write nothing under $HOME.
        .env("TESSERA_CACHE_DIR", "");
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("tessera runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn gen_ssb(sf: &str, out: &Path) -> Command {
    let mut command = tessera();
    command.args(["gen", "ssb", "--sf", sf, "--out"]).arg(out);
    command
}

fn gen_ssb_succeeds(sf: &str, out: &Path) {
    let output = run(&mut gen_ssb(sf, out));
    assert!(output.status.success(), "{}", text(&output.stderr));
}

fn gen_wisconsin_succeeds(rows: &str, out: &Path) {
    let output = run(tessera()
        .args(["gen", "wisconsin", "--rows", rows, "--out"])
        .arg(out));
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// Runs `from TABLE | aggregate { n = count() }` over `data` on the CPU.
fn count(table: &str, data: &Path) -> Output {
    let scripts = tempfile::tempdir().expect("a scratch folder");
    let script = scripts.path().join("count.tq");
    std::fs::write(
        &script,
        format!("from {table} | aggregate {{ n = count() }}\n"),
    )
    .expect("written");
    run(tessera()
        .arg("run")
        .arg(&script)
        .arg("--data")
        .arg(data)
        .args(["--device", "cpu", "--format", "csv"]))
}

/// The row count of `table` in `data`, which must be readable.
fn rows(table: &str, data: &Path) -> u64 {
    let output = count(table, data);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    stdout
        .lines()
        .nth(1)
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("a count: {stdout}"))
}

#[test]
fn other_files_survive_and_two_datasets_share_a_folder() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let data = dir.path();
    std::fs::write(data.join("notes.txt"), "mine").expect("written");
    std::fs::create_dir(data.join("keep")).expect("made");
    std::fs::write(data.join("keep/notes.txt"), "mine too").expect("written");
    gen_ssb_succeeds("0.01", data);
    gen_wisconsin_succeeds("1000", data);
    // A second SSB run replaces the SSB tables and nothing else.
    gen_ssb_succeeds("0.01", data);
    assert_eq!(rows("supplier", data), 20);
    assert_eq!(rows("wisconsin_small", data), 600);
    assert_eq!(
        std::fs::read_to_string(data.join("notes.txt")).expect("kept"),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(data.join("keep/notes.txt")).expect("kept"),
        "mine too"
    );
}

#[test]
fn links_planted_where_gen_used_to_write_leave_their_target_alone() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let elsewhere = tempfile::tempdir().expect("a scratch folder");
    let victim = elsewhere.path().join("victim");
    std::fs::write(&victim, "keep me").expect("written");
    let data = dir.path();
    for table in [
        "part",
        "supplier",
        "customer",
        "date",
        "wisconsin",
        "wisconsin_small",
    ] {
        std::os::unix::fs::symlink(&victim, data.join(format!("{table}.parquet.partial")))
            .expect("linked");
    }
    gen_ssb_succeeds("0.01", data);
    gen_wisconsin_succeeds("1000", data);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("read"),
        "keep me",
        "a planted link was written through"
    );
    assert_eq!(rows("part", data), 2_000);
    assert_eq!(rows("wisconsin", data), 1_000);
}

#[test]
fn a_killed_generation_is_refused_until_it_is_run_again() {
    let sf = "0.05";
    let reference = tempfile::tempdir().expect("a scratch folder");
    let started = Instant::now();
    gen_ssb_succeeds(sf, reference.path());
    let whole = started.elapsed();
    let lineorder = rows("lineorder", reference.path());

    // Kills at several points of a run the length of the one above; at least one must land
    // while tables are being written.
    let mut interrupted = 0;
    for fraction in [0.5, 0.3, 0.7, 0.15, 0.85, 0.05] {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let data = dir.path();
        let mut child = gen_ssb(sf, data)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tessera starts");
        std::thread::sleep(whole.mul_f64(fraction));
        // SIGKILL: nothing of the process runs after it.
        let _ = child.kill();
        let _ = child.wait();

        let output = count("lineorder", data);
        let stderr = text(&output.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        if output.status.success() {
            // It finished before the kill: then every row is there.
            assert_eq!(rows("lineorder", data), lineorder, "killed at {fraction}");
            continue;
        }
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(first.starts_with("error:"), "{stderr}");
        if first.contains("interrupted") {
            assert!(
                first.contains(&format!("tessera gen ssb --sf {sf}")),
                "{stderr}"
            );
            interrupted += 1;
        } else {
            // Killed before it wrote a table: no table is there to read.
            assert!(
                !data.join("date.parquet").exists() && !data.join("lineorder").exists(),
                "a partial folder read without complaint: {stderr}"
            );
        }

        // Run again, it completes and leaves the same tables and no temporaries.
        gen_ssb_succeeds(sf, data);
        assert_eq!(rows("lineorder", data), lineorder);
        assert_eq!(rows("customer", data), 1_500);
        let leftovers: Vec<String> = std::fs::read_dir(data)
            .expect("listed")
            .map(|e| {
                e.expect("listed")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.starts_with('.') && !name.starts_with(".tessera-gen-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        if interrupted > 0 {
            break;
        }
    }
    assert!(
        interrupted > 0,
        "no kill landed while SSB at SF {sf} was being written ({whole:?})"
    );
}

#[test]
fn a_foreign_file_in_lineorder_stops_gen_before_anything_changes() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let data = dir.path();
    std::fs::create_dir(data.join("lineorder")).expect("made");
    std::fs::write(data.join("lineorder/mine.parquet"), "mine").expect("written");
    let output = run(&mut gen_ssb("0.01", data));
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("lineorder")
            && stderr.contains("mine.parquet"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(data.join("lineorder/mine.parquet")).expect("kept"),
        "mine"
    );
    let names: Vec<String> = std::fs::read_dir(data)
        .expect("listed")
        .map(|e| {
            e.expect("listed")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names, ["lineorder"]);
}
