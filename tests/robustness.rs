//! Inputs and surroundings that once crashed, hung or lost output: deep and wide scripts, a
//! script that is a pipe, a thousand invalid characters, standard output closed or full, an
//! absurd thread count. Each must end promptly with a result or a one-line error.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn data() -> &'static str {
    common::ssb_data().to_str().expect("utf-8 path")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tessera` with `args`, killed if it runs past `limit`.
fn tessera_within(args: &[&str], limit: Duration, setup: impl FnOnce(&mut Command)) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command
        .args(args)
        .current_dir(common::repo())
        .env("NO_COLOR", "1")
        .env("TESSERA_CACHE_DIR", "")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut command);
    let child = command.spawn().expect("tessera starts");
    let pid = child.id();
    // The output is read while the process runs (a full pipe would stall it), on a thread, so
    // that this one can give up on a process that does not end.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(limit) {
        Ok(output) => output.expect("output"),
        Err(_) => {
            // SAFETY: signals only the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("tessera {args:?} ran past {limit:?}");
        }
    }
}

/// Limits the address space of the process `command` starts to `bytes`.
fn limit_address_space(command: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; it limits only the child's address space.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn script_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("written");
    path.to_str().expect("utf-8 path").to_string()
}

fn run_script(script: &str) -> Output {
    tessera_within(
        &[
            "run",
            script,
            "--data",
            data(),
            "--device",
            "cpu",
            "--format",
            "csv",
        ],
        Duration::from_secs(120),
        |_| {},
    )
}

#[test]
fn deep_and_wide_scripts_run() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let items: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
    let long_in = script_file(
        &dir,
        "in.tq",
        &format!(
            "from supplier | where s_suppkey in ({}) | aggregate {{ n = count() }}\n",
            items.join(", ")
        ),
    );
    let output = run_script(&long_in);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "n\n20\n");

    let columns: Vec<String> = (0..150)
        .map(|i| format!("c{i} = s_suppkey + {i}"))
        .collect();
    let wide = script_file(
        &dir,
        "wide.tq",
        &format!(
            "from supplier | select {} | aggregate {{ n = count(), s = sum(c149) }}\n",
            columns.join(", ")
        ),
    );
    let output = run_script(&wide);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "n,s\n20,3190\n");

    let unions = " | union all (from supplier | select s_suppkey)".repeat(300);
    let many_unions = script_file(
        &dir,
        "unions.tq",
        &format!("from supplier | select s_suppkey{unions} | aggregate {{ n = count() }}\n"),
    );
    let output = run_script(&many_unions);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "n\n6020\n");
}

/// Long scripts compile in time about linear in their length: 5,000 `where` stages, 10,000
/// computed columns returned, 1,000 aggregates (each once took from 30 s to minutes, as LLVM's
/// loop passes and register allocation grew with the square of a host kernel's loops).
#[test]
fn long_scripts_compile_in_time() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let timed = |name: &str, script: String| {
        let path = script_file(&dir, name, &script);
        let started = std::time::Instant::now();
        let output = run_script(&path);
        let took = started.elapsed();
        assert!(output.status.success(), "{name}: {}", text(&output.stderr));
        assert!(took < Duration::from_secs(30), "{name} took {took:?}");
        text(&output.stdout)
    };
    let wheres: String = (0..5_000)
        .map(|i| format!(" | where s_suppkey > {}", i % 7))
        .collect();
    let stdout = timed(
        "wheres.tq",
        format!("from supplier{wheres} | aggregate {{ n = count() }}\n"),
    );
    assert_eq!(stdout, "n\n14\n");

    let columns: Vec<String> = (0..10_000)
        .map(|i| format!("c{i} = s_suppkey + {i}"))
        .collect();
    let stdout = timed(
        "columns.tq",
        format!("from supplier | select {}\n", columns.join(", ")),
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 21, "a header and 20 rows");
    assert!(lines[0].ends_with(",c9999"), "{}", &lines[0][..40]);

    let aggregates: Vec<String> = (0..1_000)
        .map(|i| format!("a{i} = sum(s_suppkey + {i})"))
        .collect();
    let stdout = timed(
        "aggregates.tq",
        format!(
            "from supplier | aggregate {{ {} }}\n",
            aggregates.join(", ")
        ),
    );
    // Over s_suppkey 1..=20: sum(s_suppkey + i) = 210 + 20 i.
    assert!(
        stdout.trim_end().ends_with(",20190"),
        "{}",
        &stdout[stdout.len() - 40..]
    );
}

/// A host kernel large enough for the reduced pass pipeline, whose single round of combining
/// left work undone: LLVM reported that as an internal error (exit code 70).
#[test]
fn a_large_host_kernel_compiles_whatever_combining_leaves() {
    let sum = vec!["s_nationkey"; 240].join(" + ");
    let script = format!(
        "from lineitem | join part on l_partkey == p_partkey | where p_name like \"%green%\" \
         | join supplier on l_suppkey == s_suppkey | join nation on ({sum}) == n_nationkey"
    );
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let output = tessera_within(
        &[
            "run", "-c", &script, "--data", data, "--device", "cpu", "--format", "csv",
        ],
        Duration::from_secs(120),
        |_| {},
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("l_orderkey,"));
}

/// The PTX of `script` (over SSB data) for the GPU.
fn gpu_code(dir: &tempfile::TempDir, name: &str, script: &str) -> String {
    let script = script_file(dir, name, script);
    let args = ["compile", &script, "--data", data(), "--emit", "ptx"];
    let output = tessera_within(&args, Duration::from_secs(120), |_| {});
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

/// A GPU kernel of more parameters than CUDA passes one by one (here a hash grouping of 300
/// aggregates, which stays one kernel, a buffer each: the driver once refused the PTX) takes
/// the address of a table of them; one of fewer takes them one by one.
#[test]
fn a_gpu_kernel_of_many_parameters_reads_them_from_a_table() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let entry_params = |count: usize| {
        let aggregates: Vec<String> = (0..count)
            .map(|i| format!("a{i} = sum(s_suppkey + {i})"))
            .collect();
        let script = format!(
            "from supplier | derive k = s_suppkey * 1000003 | group k {{ {} }}\n",
            aggregates.join(", ")
        );
        let ptx = gpu_code(&dir, &format!("group{count}.tq"), &script);
        let entry = ptx.split(".entry").nth(1).expect("a kernel");
        let signature = entry.split(')').next().expect("its parameters");
        signature.matches(".param").count()
    };
    assert_eq!(entry_params(300), 1);
    let few = entry_params(20);
    assert!((20..=256).contains(&few), "{few} parameters");
}

/// An `aggregate` of many aggregates runs as kernels of at most 32 (the driver's compiler takes
/// time growing with the square of one kernel's aggregates).
#[test]
fn many_aggregates_run_as_several_kernels() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let kernels = |count: usize| {
        let aggregates: Vec<String> = (0..count)
            .map(|i| format!("a{i} = sum(s_suppkey + {i})"))
            .collect();
        let script = format!(
            "from supplier | aggregate {{ {} }}\n",
            aggregates.join(", ")
        );
        let ptx = gpu_code(&dir, &format!("aggregates{count}.tq"), &script);
        ptx.matches(".visible .entry").count()
    };
    assert_eq!(kernels(32), 1);
    assert_eq!(kernels(100), 4);
}

/// Rows of many columns are written by kernels of at most 32 columns each, compacted
/// (filtered) or in place.
#[test]
fn rows_of_many_columns_are_written_by_several_kernels() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let kernels = |count: usize, filter: &str| {
        let columns: Vec<String> = (0..count)
            .map(|i| format!("c{i} = s_suppkey + {i}"))
            .collect();
        let script = format!("from supplier{filter} | select {}\n", columns.join(", "));
        let ptx = gpu_code(&dir, &format!("select{count}.tq"), &script);
        ptx.matches(".visible .entry").count()
    };
    assert_eq!(kernels(32, ""), 1);
    assert_eq!(kernels(100, ""), 4);
    assert_eq!(kernels(100, " | where s_suppkey > 5"), 4);
}

#[test]
fn constants_after_a_take_end() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let script = script_file(&dir, "take.tq", "from supplier | take 1 | select x = 1\n");
    let output = run_script(&script);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "x\n1\n");
}

#[test]
fn many_invalid_characters_give_a_short_report() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let line = "$ ".repeat(4000);
    let script = script_file(&dir, "bad.tq", &format!("from supplier | where {line}\n"));
    let output = run_script(&script);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("more errors not shown"),
        "{}",
        &stderr[..200]
    );
    // Twenty reports of one 8,000-character line, not four thousand.
    assert!(stderr.len() < 400_000, "{} bytes", stderr.len());
}

#[test]
fn a_script_that_is_a_pipe_is_refused() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let fifo = dir.path().join("script.tq");
    let status = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let output = tessera_within(
        &["run", fifo.to_str().expect("utf-8"), "--data", data()],
        Duration::from_secs(30),
        |_| {},
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("is not a regular file"));
}

#[test]
fn closed_or_full_output_is_an_error_and_a_closed_pipe_is_not() {
    let args = [
        "run",
        "examples/ssb/q21.tq",
        "--data",
        data(),
        "--device",
        "cpu",
    ];
    let closed = tessera_within(&args, Duration::from_secs(60), |c| {
        // SAFETY: only closes the child's standard output before it starts.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(c, || {
                libc::close(1);
                Ok(())
            });
        }
    });
    assert_eq!(closed.status.code(), Some(1));
    assert!(text(&closed.stderr).contains("standard output is closed"));

    let full = tessera_within(&args, Duration::from_secs(60), |c| {
        c.stdout(std::fs::File::create("/dev/full").expect("/dev/full opens"));
    });
    assert_eq!(full.status.code(), Some(1));
    assert!(text(&full.stderr).starts_with("error: cannot write the output"));

    // A reader that stops early (`| head -1`) ends the run quietly.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "compile",
            "examples/ssb/q21.tq",
            "--data",
            data(),
            "--emit",
            "llvm",
            "--target",
            "host",
        ])
        .current_dir(common::repo())
        .env("TESSERA_CACHE_DIR", "")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tessera starts");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("output");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", text(&output.stderr));
}

#[test]
fn an_absurd_thread_count_is_capped() {
    let output = tessera_within(
        &[
            "run",
            "examples/ssb/q11.tq",
            "--data",
            data(),
            "--device",
            "cpu",
        ],
        Duration::from_secs(60),
        |c| {
            c.env("RAYON_NUM_THREADS", "100000");
        },
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("RAYON_NUM_THREADS=100000"));
    let _ = std::io::stderr().flush();
}

#[test]
fn integer_overflow_is_an_error_not_a_wrapped_value() {
    // Each of these makes DuckDB fail too ("Overflow in multiplication of INT64", …).
    let dir = tempfile::tempdir().expect("a scratch folder");
    for (name, script) in [
        (
            "product",
            "from supplier | aggregate { m = max((s_suppkey as i64) * 4611686018427387904) }",
        ),
        (
            "constant",
            "from supplier | where 9223372036854775807 + 1 > 0 | aggregate { n = count() }",
        ),
        (
            "negation",
            "from supplier | aggregate { m = min(-(s_suppkey as i64 - 9223372036854775807 - 2)) }",
        ),
        (
            "abs",
            "from supplier | aggregate { m = max(abs(s_suppkey as i64 - 9223372036854775807 - 2)) }",
        ),
        (
            "narrowing",
            "from supplier | aggregate { m = max((s_suppkey * 1000000000000) as i32) }",
        ),
        (
            "after a group",
            "from supplier | group s_region { m = max(s_suppkey * 3) } | derive y = m * 4611686018427387904",
        ),
        // DuckDB sums 64-bit integers into 128 bits; Tessera fails rather than wrap.
        (
            "sum",
            "from supplier | aggregate { s = sum((s_suppkey as i64) * 4000000000000000000 / 8) }",
        ),
        (
            "grouped sum",
            "from supplier | group s_region { s = sum(case when s_suppkey > 0 then 9000000000000000000 else 0 end) }",
        ),
        // 19 digits are not a `decimal(18, 0)` ("Could not cast value … to DECIMAL(18,0)").
        (
            "decimal precision",
            "from supplier | select x = (s_suppkey + 999999999999999999) as decimal(18, 0)",
        ),
        // About 549,000 AD has no 64-bit count of microseconds ("Date out of range").
        (
            "date as timestamp",
            "from supplier | select t = ((s_suppkey * 100000000) as date) as timestamp",
        ),
    ] {
        let path = script_file(&dir, &format!("{}.tq", name.replace(' ', "_")), script);
        let output = run_script(&path);
        assert_eq!(output.status.code(), Some(1), "{name}: {}", text(&output.stdout));
        let stderr = text(&output.stderr);
        assert!(stderr.starts_with("error: integer overflow"), "{name}: {stderr}");
        assert!(output.stdout.is_empty(), "{name}: no number printed");
    }
}

/// A query whose buffers do not fit in the memory the process may take fails with a one-line
/// error naming the buffer, and exit status 1, instead of an abort.
#[test]
fn a_query_larger_than_memory_is_a_clear_error() {
    let script = "from lineorder | product (from date | select d_year) \
                  | select lo_orderkey, lo_linenumber, lo_custkey, d_year";
    let output = tessera_within(
        &["run", "-c", script, "--data", data(), "--device", "cpu"],
        Duration::from_secs(120),
        // 2.5 GB: the program and its compiler fit, four 600 MB buffers do not.
        |command| limit_address_space(command, 2_500_000_000),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: out of memory: the query's buffer `"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// Loading a table's columns once waited, on one of rayon's threads, for a lock that the same
/// thread held further down its stack (a column's load took up another column's load of the
/// same table while waiting for its own decoding), about one run in eight with eight threads.
#[test]
fn loading_many_columns_of_a_table_at_once_never_hangs() {
    for _ in 0..24 {
        let output = tessera_within(
            &[
                "run",
                "examples/ssb/q43.tq",
                "--data",
                data(),
                "--device",
                "cpu",
                "--no-prepare",
            ],
            Duration::from_secs(30),
            |c| {
                c.env("RAYON_NUM_THREADS", "8");
            },
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
    }
}

/// Memory running out where no buffer is reserved fallibly (generating data, here) ends the
/// process with a one-line error and status 1, not Rust's abort.
#[test]
fn memory_running_out_anywhere_is_a_clear_error() {
    let out = tempfile::tempdir().expect("a folder");
    let target = out.path().join("ssb");
    let output = tessera_within(
        &[
            "gen",
            "ssb",
            "--sf",
            "3",
            "--out",
            target.to_str().expect("utf-8 path"),
        ],
        Duration::from_secs(120),
        // 1.5 GB: the program fits, SSB at scale factor 3 does not.
        |command| limit_address_space(command, 1_500_000_000),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: out of memory: an allocation of "),
        "{stderr}"
    );
}

/// Memory running out inside the code generator (LLVM, whose C++ allocations Rust does not
/// see) ends the process with a one-line error, not an abort ("Rust cannot catch foreign
/// exceptions"). Where in the compile memory runs out depends on the limit: the limits tried
/// are those just below the least a large kernel's compile needs, found by bisection, where
/// LLVM's allocations are the ones to fail.
#[test]
fn memory_running_out_in_the_code_generator_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let aggregates: Vec<String> = (0..1000)
        .map(|i| format!("a{i} = sum(lo_revenue + {i})"))
        .collect();
    let script = script_file(
        &dir,
        "large.tq",
        &format!(
            "from lineorder | derive k = lo_orderkey * 7 | group k {{ {} }}\n",
            aggregates.join(", ")
        ),
    );
    let compile = |limit: u64| {
        let args = ["compile", &script, "--data", data(), "--emit", "ptx"];
        tessera_within(&args, Duration::from_secs(120), |command| {
            // One compile thread and one heap arena: less address space set aside, so that
            // the compile's own allocations are what the limit stops.
            command
                .env("RAYON_NUM_THREADS", "1")
                .env("MALLOC_ARENA_MAX", "1");
            limit_address_space(command, limit);
        })
    };
    let (mut fails, mut fits) = (256u64 << 20, 8u64 << 30);
    assert!(compile(fits).status.success(), "the compile fits 8 GiB");
    while fits - fails > 1 << 20 {
        let middle = fails + (fits - fails) / 2;
        match compile(middle).status.success() {
            true => fits = middle,
            false => fails = middle,
        }
    }
    for step in 1..=24 {
        let output = compile(fits - step * (2 << 20));
        let stderr = text(&output.stderr);
        if output.status.success() {
            continue;
        }
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
}
