//! Prepared columns and the cache folder as a user meets them: runs that read prepared columns
//! give the answers runs without them give, a changed data file is read anew, a damaged entry is
//! reported and rebuilt, a killed `prepare` leaves nothing that is read, and nothing is written
//! into the data folder or outside the cache. Every test has its own copy of the data and its
//! own cache folder.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tessera(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(common::repo())
        .env("NO_COLOR", "1")
        .env("TESSERA_CACHE_DIR", cache)
        .output()
        .expect("tessera runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A private copy of SSB at scale factor 0.01, and a cache folder beside it.
struct Scratch {
    _folder: tempfile::TempDir,
    data: PathBuf,
    cache: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let folder = tempfile::tempdir().expect("a scratch folder");
        let data = folder.path().join("ssb");
        copy_folder(common::ssb_data(), &data);
        let cache = folder.path().join("cache");
        Scratch {
            _folder: folder,
            data,
            cache,
        }
    }

    fn data(&self) -> &str {
        self.data.to_str().expect("utf-8 path")
    }

    /// Runs `script` on the CPU with `extra` arguments; its CSV and stderr.
    fn run(&self, script: &str, extra: &[&str]) -> (String, String) {
        let mut args = vec![
            "run",
            script,
            "--data",
            self.data(),
            "--device",
            "cpu",
            "--format",
            "csv",
            "--timing",
        ];
        args.extend_from_slice(extra);
        let output = tessera(&args, &self.cache);
        assert!(output.status.success(), "{}", text(&output.stderr));
        (text(&output.stdout), text(&output.stderr))
    }
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("made");
    for entry in std::fs::read_dir(from).expect("listed").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copied");
        }
    }
}

/// `(read, written)` from `--timing`'s account of prepared columns.
fn prepared(stderr: &str) -> (usize, usize) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("process:"))
        .unwrap_or_else(|| panic!("no process line: {stderr}"));
    let counts = line
        .split("prepared columns: ")
        .nth(1)
        .expect("prepared counts");
    let numbers: Vec<usize> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .map(|n| n.parse().expect("a count"))
        .collect();
    (numbers[0], numbers[1])
}

/// Every file below `folder`, with its size and modification time.
fn listing(folder: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut folders = vec![folder.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(listed) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in listed.flatten() {
            let metadata = entry.metadata().expect("stat");
            if metadata.is_dir() {
                folders.push(entry.path());
            } else {
                found.push((
                    entry.path(),
                    metadata.len(),
                    metadata.modified().expect("time"),
                ));
            }
        }
    }
    found.sort();
    found
}

/// Entries of the prepared store under `cache`.
fn entries(cache: &Path) -> Vec<PathBuf> {
    listing(&cache.join("prepared"))
        .into_iter()
        .map(|(path, _, _)| path)
        .filter(|p| p.extension().is_some_and(|e| e == "tqp"))
        .collect()
}

#[test]
fn prepared_runs_equal_unprepared_ones_and_leave_the_data_folder_alone() {
    let scratch = Scratch::new();
    let before = listing(&scratch.data);
    for compress in ["none", "auto", "for"] {
        for script in ["examples/ssb/q21.tq", "examples/ssb/q41.tq"] {
            let settings = ["--compress", compress];
            let (plain, _) = scratch.run(script, &[&settings[..], &["--no-prepare"]].concat());
            let (first, first_err) = scratch.run(script, &settings);
            let (second, second_err) = scratch.run(script, &settings);
            assert_eq!(first, plain, "{script} {compress}");
            assert_eq!(second, plain, "{script} {compress}");
            let (_, written) = prepared(&first_err);
            assert!(written > 0, "the first run prepares: {first_err}");
            let (read, written) = prepared(&second_err);
            assert!(read > 0 && written == 0, "the second reads: {second_err}");
        }
    }
    assert!(!entries(&scratch.cache).is_empty());
    assert_eq!(
        listing(&scratch.data),
        before,
        "nothing written in the data folder"
    );
}

#[test]
fn a_replaced_data_file_is_read_anew() {
    let scratch = Scratch::new();
    let script = scratch.data.join("count.tq");
    std::fs::write(
        &script,
        "from supplier | aggregate { n = count(), s = sum(s_suppkey) }\n",
    )
    .expect("written");
    let script = script.to_str().expect("utf-8 path");
    let (small, _) = scratch.run(script, &[]);
    assert_eq!(small, "n,s\n20,210\n");
    let (again, err) = scratch.run(script, &[]);
    assert_eq!(again, small);
    assert!(prepared(&err).0 > 0, "{err}");
    // Forty suppliers in place of twenty: the prepared columns are stale, never read.
    let larger = tempfile::tempdir().expect("a scratch folder");
    tessera_storage::gen::ssb::generate_ssb(0.02, larger.path(), &tessera_storage::NoProgress)
        .expect("generated");
    std::fs::copy(
        larger.path().join("supplier.parquet"),
        scratch.data.join("supplier.parquet"),
    )
    .expect("replaced");
    let (large, err) = scratch.run(script, &[]);
    assert_eq!(large, "n,s\n40,820\n", "{err}");
    let (_, written) = prepared(&err);
    assert!(written > 0, "prepared again: {err}");
}

#[test]
fn a_damaged_entry_is_reported_and_rebuilt() {
    let scratch = Scratch::new();
    let (expected, _) = scratch.run("examples/ssb/q11.tq", &[]);
    for entry in entries(&scratch.cache) {
        let mut bytes = std::fs::read(&entry).expect("read");
        // A byte of the first section, just past the header page.
        bytes[4096 + 5] ^= 0x10;
        std::fs::write(&entry, bytes).expect("written");
    }
    let (damaged, err) = scratch.run("examples/ssb/q11.tq", &[]);
    assert_eq!(damaged, expected);
    assert!(
        err.contains("warning: a prepared column was damaged"),
        "{err}"
    );
    let (rebuilt, err) = scratch.run("examples/ssb/q11.tq", &[]);
    assert_eq!(rebuilt, expected);
    assert!(!err.contains("damaged"), "{err}");
    assert!(prepared(&err).0 > 0, "{err}");
    // An entry cut short is damaged too.
    for entry in entries(&scratch.cache) {
        let bytes = std::fs::read(&entry).expect("read");
        std::fs::write(&entry, &bytes[..bytes.len() / 2]).expect("written");
    }
    let (cut, err) = scratch.run("examples/ssb/q11.tq", &[]);
    assert_eq!(cut, expected);
    assert!(err.contains("damaged"), "{err}");
}

#[test]
fn a_killed_prepare_leaves_nothing_that_is_read() {
    let scratch = Scratch::new();
    let (expected, _) = scratch.run("examples/ssb/q41.tq", &["--no-prepare"]);
    for delay_ms in [5, 30, 120] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["prepare", scratch.data(), "--compress", "none"])
            .env("TESSERA_CACHE_DIR", &scratch.cache)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prepare starts");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let (killed, _) = scratch.run("examples/ssb/q41.tq", &[]);
        assert_eq!(killed, expected, "after a prepare killed at {delay_ms} ms");
    }
    let done = tessera(
        &["prepare", scratch.data(), "--compress", "none"],
        &scratch.cache,
    );
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert!(
        text(&done.stderr).contains("prepared"),
        "{}",
        text(&done.stderr)
    );
    let (prepared_run, err) = scratch.run("examples/ssb/q41.tq", &[]);
    assert_eq!(prepared_run, expected);
    assert_eq!(prepared(&err).1, 0, "everything was prepared: {err}");
}

#[test]
fn prepare_in_place_writes_beside_the_data_for_runs_without_a_cache() {
    let scratch = Scratch::new();
    let no_cache = Path::new("");
    let done = tessera(
        &[
            "prepare",
            scratch.data(),
            "--in-place",
            "--compress",
            "none",
        ],
        no_cache,
    );
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert!(scratch.data.join(".tessera").is_dir());
    let output = tessera(
        &[
            "run",
            "examples/ssb/q21.tq",
            "--data",
            scratch.data(),
            "--device",
            "cpu",
            "--format",
            "csv",
            "--timing",
        ],
        no_cache,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let (read, written) = prepared(&text(&output.stderr));
    assert!(read > 0 && written == 0, "{}", text(&output.stderr));
    let (plain, _) = scratch.run("examples/ssb/q21.tq", &["--no-prepare"]);
    assert_eq!(text(&output.stdout), plain);
    // Without a cache, there is nowhere else to prepare to.
    let refused = tessera(&["prepare", scratch.data()], no_cache);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).starts_with("error: "),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn the_cache_reports_and_clears_only_its_own_entries() {
    let scratch = Scratch::new();
    scratch.run("examples/ssb/q21.tq", &[]);
    let info = tessera(&["cache", "info"], &scratch.cache);
    let report = text(&info.stdout);
    // The program, filed under the script's key and its shape's.
    assert!(
        report.contains("compiled kernels:       2 entries"),
        "{report}"
    );
    assert!(!report.contains("prepared columns:       0"), "{report}");
    let keep = scratch.cache.join("notes.txt");
    std::fs::write(&keep, "mine").expect("written");
    let cleared = tessera(&["cache", "clear"], &scratch.cache);
    assert!(cleared.status.success(), "{}", text(&cleared.stderr));
    assert!(entries(&scratch.cache).is_empty());
    assert!(keep.exists(), "a file that is not an entry stays");
    let info = text(&tessera(&["cache", "info"], &scratch.cache).stdout);
    assert!(info.contains("compiled kernels:       0 entries"), "{info}");
}

#[test]
fn a_cache_folder_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    std::fs::create_dir_all(&scratch.cache).expect("made");
    std::fs::set_permissions(&scratch.cache, std::fs::Permissions::from_mode(0o777))
        .expect("chmod");
    let (out, err) = scratch.run("examples/ssb/q11.tq", &[]);
    assert!(out.starts_with("revenue"), "{out}");
    assert!(err.contains("is not private"), "{err}");
    assert!(listing(&scratch.cache).is_empty(), "nothing written there");
}
