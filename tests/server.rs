//! `tessera serve` as clients meet it, on the CPU: psql (simple protocol), psycopg (extended
//! protocol, several clients at once), `tessera run --server` and the conformance files through
//! it, bad scripts, garbage and clients that vanish mid-result, none of which harms the server;
//! and `tessera shell` from a pipe and under a pseudo-terminal. Every server is started on a free
//! loopback port and stopped by its process id; every loop is bounded.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn data() -> &'static str {
    common::ssb_data().to_str().expect("utf-8 path")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A running server, stopped (by its process id) when dropped.
struct Server {
    child: Child,
    address: String,
    port: u16,
    _cache: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        Server::start_with("127.0.0.1", |_| {})
    }

    /// A server listening on `host` (connected to through loopback), its command set up by
    /// `setup` too.
    fn start_with(host: &str, setup: impl FnOnce(&mut Command)) -> Server {
        Server::start_serving(data(), host, setup)
    }

    /// A server of the data at `data`, listening on `host`.
    fn start_serving(data: &str, host: &str, setup: impl FnOnce(&mut Command)) -> Server {
        let cache = tempfile::tempdir().expect("a cache folder");
        // A port the system says is free now.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let address = format!("127.0.0.1:{port}");
        let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
        command
            .args([
                "serve",
                "--data",
                data,
                "--device",
                "cpu",
                "--listen",
                &format!("{host}:{port}"),
            ])
            .env("TESSERA_CACHE_DIR", cache.path())
            .env_remove("TESSERA_PASSWORD")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        setup(&mut command);
        let child = command.spawn().expect("the server starts");
        let server = Server {
            child,
            address,
            port,
            _cache: cache,
        };
        let started = Instant::now();
        while TcpStream::connect(&server.address).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the server did not listen within a minute"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn psql(&self, script: &str) -> Output {
        self.psql_with(script, |_| {})
    }

    fn psql_with(&self, script: &str, setup: impl FnOnce(&mut Command)) -> Output {
        let mut command = Command::new("psql");
        command
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args([
                "-U", "tessera", "-d", "tessera", "-X", "-A", "-t", "-c", script,
            ])
            .env("PGCONNECT_TIMEOUT", "10")
            .env_remove("PGPASSWORD");
        setup(&mut command);
        command
            .output()
            .expect("psql runs (the postgresql-client package)")
    }

    /// `script`'s result through `tessera run --server`, as CSV.
    fn run_csv(&self, script: &str) -> String {
        let remote = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["run", "-c", script, "--server", &self.address])
            .args(["--format", "csv"])
            .output()
            .expect("tessera runs");
        assert!(remote.status.success(), "{}", text(&remote.stderr));
        text(&remote.stdout)
    }

    /// What `tessera bench serve` with `args` prints against this server, when it succeeds.
    fn bench(&self, args: &[&str]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["bench", "serve", "--server", &self.address])
            .args(args)
            .env("TESSERA_CACHE_DIR", "")
            .output()
            .expect("tessera runs");
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    }

    /// Whether the server process is still running.
    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("waits").is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: signals only the server this test started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        while self.alive() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn psql_and_tessera_clients_get_duckdbs_answers() {
    let server = Server::start();
    let count = server.psql("from date | aggregate { n = count() }");
    assert!(count.status.success(), "{}", text(&count.stderr));
    assert_eq!(text(&count.stdout).trim(), "2556");

    // The conformance files on this data, through the server, against DuckDB's answers.
    let mut test = Command::new(env!("CARGO_BIN_EXE_tessera"));
    test.args(["test", "--device", "cpu", "--server", &server.address])
        .current_dir(common::repo())
        .env("TESSERA_CACHE_DIR", "");
    for folder in ["ssb", "rows", "joins", "operators", "floats", "functions"] {
        test.arg(PathBuf::from("tests/conformance").join(folder));
    }
    let output = test.output().expect("tessera test runs");
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");

    // A script error: an SQLSTATE, the position, and the help as a hint.
    let typo = server.psql("from lineorder | where lo_revnue > 1 | aggregate { n = count() }");
    assert!(!typo.status.success());
    let stderr = text(&typo.stderr);
    assert!(stderr.contains("unknown column `lo_revnue`"), "{stderr}");
    assert!(
        stderr.contains("HINT:  did you mean `lo_revenue`?"),
        "{stderr}"
    );
    assert!(
        stderr.contains('^'),
        "psql points at the position: {stderr}"
    );

    // `tessera run --server` prints what a local run prints, and fails as it does.
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "run",
                "examples/ssb/q21.tq",
                "--data",
                data(),
                "--format",
                "csv",
            ])
            .args(extra)
            .current_dir(common::repo())
            .env("TESSERA_CACHE_DIR", "")
            .output()
            .expect("tessera runs")
    };
    let local = run(&["--device", "cpu"]);
    let remote = run(&["--server", &server.address]);
    assert!(remote.status.success(), "{}", text(&remote.stderr));
    assert_eq!(text(&remote.stdout), text(&local.stdout));
}

#[test]
fn psycopg_clients_at_once_get_the_same_answers() {
    let server = Server::start();
    let expected = |script: &str| {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let path = dir.path().join("q.tq");
        std::fs::write(&path, script).expect("written");
        let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["run", path.to_str().expect("utf-8"), "--data", data()])
            .args(["--device", "cpu", "--format", "csv"])
            .env("TESSERA_CACHE_DIR", "")
            .output()
            .expect("tessera runs");
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let queries = [
        std::fs::read_to_string(common::repo().join("examples/ssb/q11.tq")).expect("q11"),
        std::fs::read_to_string(common::repo().join("examples/ssb/q21.tq")).expect("q21"),
        "from supplier | group s_region { n = count(), m = max(s_suppkey) } | sort s_region"
            .to_string(),
    ];
    let answers: Vec<String> = queries.iter().map(|q| expected(q)).collect();
    // Eight clients, twenty queries each, through the extended protocol; every result is
    // compared with the local run's CSV.
    let program = r#"
import csv, io, json, sys, threading
import psycopg
port, queries, answers = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
failures = []
def cell(v):
    return "" if v is None else str(v)
def client(k):
    try:
        with psycopg.connect(f"host=127.0.0.1 port={port} user=tessera dbname=tessera", autocommit=True) as conn:
            for i in range(20):
                q = (k + i) % len(queries)
                cur = conn.execute(queries[q])
                header = [d.name for d in cur.description]
                got = [header] + [[cell(v) for v in row] for row in cur.fetchall()]
                want = list(csv.reader(io.StringIO(answers[q])))
                if got != want:
                    failures.append((k, i, got[:3], want[:3]))
    except Exception as e:
        failures.append((k, repr(e)))
threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
for t in threads: t.start()
for t in threads: t.join(120)
print(json.dumps(failures[:3]))
sys.exit(1 if failures or any(t.is_alive() for t in threads) else 0)
"#;
    let output = Command::new("python3")
        .args(["-c", program, &server.port.to_string()])
        .arg(serde_json::to_string(&queries).expect("json"))
        .arg(serde_json::to_string(&answers).expect("json"))
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "psycopg (pip install 'psycopg[binary]'): {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

#[test]
fn bad_requests_and_vanishing_clients_leave_the_server_serving() {
    let mut server = Server::start();
    for _ in 0..20 {
        // Garbage instead of a startup message.
        if let Ok(mut stream) = TcpStream::connect(&server.address) {
            let _ = stream.write_all(b"\x00\x00\x00\x08garbage\xff\xff\xff\xff");
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = stream.read(&mut [0u8; 64]);
        }
        // A script that fails.
        let bad = server.psql("from nowhere | aggregate { n = count() }");
        assert!(!bad.status.success());
        assert!(text(&bad.stderr).contains("42P01") || text(&bad.stderr).contains("nowhere"));
    }
    // Clients that ask for many rows and leave at once.
    for _ in 0..10 {
        let mut psql = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
            .args(["-U", "tessera", "-d", "tessera", "-X", "-c"])
            .arg("from lineorder | select lo_orderkey, lo_revenue")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("psql runs");
        std::thread::sleep(Duration::from_millis(30));
        let _ = psql.kill();
        let _ = psql.wait();
    }
    assert!(server.alive(), "the server survived");
    let count = server.psql("from date | aggregate { n = count() }");
    assert!(count.status.success(), "{}", text(&count.stderr));
    assert_eq!(text(&count.stdout).trim(), "2556");
}

#[test]
fn listening_beyond_loopback_needs_trust() {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "serve",
            "--data",
            data(),
            "--device",
            "cpu",
            "--listen",
            "0.0.0.0:0",
        ])
        .env("TESSERA_CACHE_DIR", "")
        .output()
        .expect("tessera runs");
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("--trust"),
        "{stderr}"
    );
}

/// Serves `folder` and sends `script` through psycopg, in binary (a binary cursor) and as text,
/// expecting the rows DuckDB's `sql` gives over `file` there (`{file}` in it), as Python values;
/// then through `tessera run --server`, whose CSV it returns.
fn psycopg_and_tessera_get_duckdbs_rows(
    folder: &str,
    file: &str,
    script: &str,
    sql: &str,
) -> String {
    let folder = common::repo().join(folder);
    let server = Server::start_serving(folder.to_str().expect("utf-8"), "127.0.0.1", |_| {});
    let sql = sql.replace("{file}", &folder.join(file).display().to_string());
    let check = format!(
        r#"
import duckdb, psycopg
expected = duckdb.sql({sql:?}).fetchall()
with psycopg.connect(host='127.0.0.1', port={port}, user='tessera', dbname='tessera', autocommit=True) as conn:
    for binary in (True, False):
        rows = conn.cursor(binary=binary).execute({script:?}).fetchall()
        assert [tuple(r) for r in rows] == expected, (binary, rows[:3], expected[:3])
print(len(expected))
"#,
        port = server.port,
    );
    let python = Command::new("python3")
        .args(["-c", &check])
        .output()
        .expect("python3 runs");
    assert!(
        python.status.success(),
        "psycopg (pip install 'psycopg[binary]'): {}{}",
        text(&python.stdout),
        text(&python.stderr)
    );
    assert_eq!(text(&python.stdout).trim(), "40");
    server.run_csv(script)
}

#[test]
fn decimals_reach_clients_as_numerics() {
    let csv = psycopg_and_tessera_get_duckdbs_rows(
        "tests/data/decimals",
        "lines.parquet",
        "from lines | where id < 40 | select id, price, weight, net = price * (1 - discount) | sort id",
        "SELECT id, price, weight, price * (1 - discount) AS net FROM '{file}' WHERE id < 40 ORDER BY id",
    );
    // `tessera run --server` reads the numerics back with their scale.
    assert!(
        csv.lines()
            .nth(1)
            .is_some_and(|row| row.starts_with("0,900.00,,900.0000")),
        "{csv}"
    );
}

/// A sum typed at 18 digits holds any 64-bit count of units: the SSB test data's quantities
/// as `decimal(18, 12)` sum to 19 digits, which psql and `tessera run --server` (which checks
/// each value against the declared type) both read as DuckDB gives
/// `SELECT sum(CAST(lo_quantity AS DECIMAL(18, 12))) FROM lineorder` over the same files.
#[test]
fn a_sum_past_18_digits_reaches_clients_whole() {
    let server = Server::start();
    let script = "from lineorder | aggregate { total = sum(lo_quantity as decimal(18, 12)) }";
    let psql = server.psql(script);
    assert!(psql.status.success(), "{}", text(&psql.stderr));
    assert_eq!(text(&psql.stdout).trim(), "1533411.000000000000");
    assert_eq!(server.run_csv(script), "total\n1533411.000000000000\n");
}

#[test]
fn timestamps_and_times_reach_clients_typed() {
    let csv = psycopg_and_tessera_get_duckdbs_rows(
        "tests/data/times",
        "events.parquet",
        "from events | where id < 40 | select id, at, at_ms, clock, day | sort id",
        "SELECT id, \"at\", at_ms, clock, day FROM '{file}' WHERE id < 40 ORDER BY id",
    );
    // `tessera run --server` reads them back as a local run prints them.
    assert!(
        csv.lines().nth(2).is_some_and(|row| row
            .starts_with("1,1969-12-31 00:11:59.273757,1994-01-02 00:00:00.123,00:20:34.567891,")),
        "{csv}"
    );
}

/// With `--gpu-memory` below what a query's columns take, the server streams the fact table
/// through in pieces: every SSB query still gets DuckDB's answer (the conformance files'),
/// with plain columns and packed ones, and says it streamed.
#[test]
fn a_table_larger_than_the_memory_budget_is_streamed() {
    for compress in ["none", "auto"] {
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let stderr = log.reopen().expect("the log, for the server");
        let server = Server::start_serving(data(), "127.0.0.1", |command| {
            command
                .args(["--gpu-memory", "64KiB", "--timing", "--compress", compress])
                .stderr(stderr);
        });
        let queries = [
            "ssb/q11",
            "ssb/q21",
            "ssb/q34",
            "ssb/q41",
            "ssb/q43",
            // Rows written by several kernels: in place, and compacted.
            "operators/projection_in_several_kernels",
            "operators/rows_in_several_kernels",
        ];
        for query in queries {
            let file = common::repo().join(format!("tests/conformance/{query}.test"));
            let conformance = std::fs::read_to_string(&file).expect("the conformance file");
            let (head, expected) = conformance.split_once("\n----\n").expect("its expectation");
            let (_, script) = head.split_once("script:").expect("its script");
            let (script, _) = script.split_once("\nsql:").expect("its SQL");
            let script = match script.trim() {
                path if path.ends_with(".tq") => {
                    std::fs::read_to_string(common::repo().join(path)).expect("the script")
                }
                text => text.to_string(),
            };
            let remote = Command::new(env!("CARGO_BIN_EXE_tessera"))
                .args(["run", "-c", &script])
                .args(["--server", &server.address, "--format", "csv"])
                .output()
                .expect("tessera runs");
            assert!(remote.status.success(), "{}", text(&remote.stderr));
            assert_eq!(text(&remote.stdout), expected, "{query} with {compress}");
        }
        drop(server);
        let log = std::fs::read_to_string(log.path()).expect("the server's log");
        let streamed = log.matches("streamed `lineorder` in").count();
        assert_eq!(streamed, queries.len(), "{log}");
    }
}

#[test]
fn a_password_is_proven_through_scram() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("password");
    std::fs::write(&file, "tiles of 512\n").expect("written");
    // With a password, listening beyond loopback needs no --trust.
    let server = Server::start_with("0.0.0.0", |c| {
        c.arg("--password-file").arg(&file);
    });
    let query = "from date | aggregate { n = count() }";
    let right = server.psql_with(query, |c| {
        c.env("PGPASSWORD", "tiles of 512");
    });
    assert!(right.status.success(), "{}", text(&right.stderr));
    assert_eq!(text(&right.stdout).trim(), "2556");
    let wrong = server.psql_with(query, |c| {
        c.env("PGPASSWORD", "tiles of 256");
    });
    assert!(!wrong.status.success());
    let stderr = text(&wrong.stderr);
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    // psql asks for no password it cannot read: without one, it gives up.
    let none = server.psql_with(query, |c| {
        c.stdin(Stdio::null()).arg("-w");
    });
    assert!(!none.status.success());
    // psycopg (libpq underneath) speaks the same exchange.
    let script = format!(
        "import psycopg\nc = psycopg.connect(host='127.0.0.1', port={}, user='anyone', dbname='x', password='tiles of 512')\nprint(c.execute('{query}').fetchall())",
        server.port
    );
    let python = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 runs");
    assert!(python.status.success(), "{}", text(&python.stderr));
    assert_eq!(text(&python.stdout).trim(), "[(2556,)]");
    // `tessera run --server` (which needs no --data) gives PGPASSWORD, as psql does.
    let remote = |password: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
        command
            .args(["run", "-c", query, "--server", &server.address])
            .env_remove("PGPASSWORD")
            .env_remove("TESSERA_PASSWORD");
        if let Some(password) = password {
            command.env("PGPASSWORD", password);
        }
        command.output().expect("tessera runs")
    };
    let given = remote(Some("tiles of 512"));
    assert!(given.status.success(), "{}", text(&given.stderr));
    assert!(text(&given.stdout).contains("2556"));
    let missing = remote(None);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("PGPASSWORD"));
    let wrong = remote(Some("tiles of 128"));
    assert_eq!(wrong.status.code(), Some(1));
    assert!(text(&wrong.stderr).contains("password authentication failed"));
}

fn shell(input: &str) -> Output {
    shell_on(data(), input)
}

fn shell_on(data: &str, input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["shell", "--data", data, "--device", "cpu"])
        .env("TESSERA_CACHE_DIR", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the shell starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("written");
    child.wait_with_output().expect("output")
}

#[test]
fn the_shell_reads_scripts_from_a_pipe() {
    let output = shell(
        "from date\n| aggregate { n = count() };\n.format csv\n.schema supplier\n\
         from supplier | group s_region { n = count() } | sort s_region;\nfrom date | take 1 | select x = 1\n",
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("2556"), "{stdout}");
    assert!(
        stdout.contains("table,column,type,null\nsupplier,s_suppkey,i32,not null\n"),
        "`.schema` prints in the chosen format: {stdout}"
    );
    assert!(stdout.contains("s_region,n\nAFRICA,7\n"), "{stdout}");
    assert!(
        stdout.ends_with("x\n1\n"),
        "the last script runs without its `;`: {stdout}"
    );
    let failing =
        shell("from supplier | where s_nam > 1;\nfrom date | aggregate { n = count() };\n");
    assert_eq!(failing.status.code(), Some(1));
    assert!(text(&failing.stderr).contains("did you mean `s_name`?"));
    assert!(
        text(&failing.stdout).contains("2556"),
        "later scripts still run"
    );
}

#[test]
fn a_declaration_reading_a_column_as_another_type_gets_its_own_columns() {
    // The data folder's catalog reads `v` as i64; declarations read it as i32 and as f64. The
    // resident engine keeps columns on its device between scripts: each script must still
    // answer as a fresh process does.
    let data = tempfile::tempdir().expect("temporary folder");
    std::fs::write(data.path().join("t.csv"), "k,v\n1,10\n1,20\n2,5\n3,-7\n").expect("written");
    let folder = data.path().to_str().expect("utf-8 path");
    let scripts = [
        "from t | aggregate { s = sum(v), m = min(v) }",
        "table t { k: i64, v: i32 }\nfrom t | aggregate { s = sum(v), m = min(v) }",
        "table t { k: i64, v: f64 }\nfrom t | aggregate { s = sum(v), m = min(v) }",
        "from t | aggregate { s = sum(v), m = min(v) }",
    ];
    let input: String = scripts
        .iter()
        .map(|s| format!(".format csv\n{s};\n"))
        .collect();
    let resident = shell_on(folder, &input);
    assert!(resident.status.success(), "{}", text(&resident.stderr));
    let mut fresh = String::new();
    for script in scripts {
        let run = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "run", "--data", folder, "--device", "cpu", "--format", "csv", "-c", script,
            ])
            .env("TESSERA_CACHE_DIR", "")
            .output()
            .expect("tessera runs");
        assert!(run.status.success(), "{}", text(&run.stderr));
        fresh += &text(&run.stdout);
    }
    assert_eq!(text(&resident.stdout), fresh);
    assert!(fresh.contains("s,m\n28.0,-7.0\n"), "{fresh}");
}

#[test]
fn the_shell_works_at_a_terminal() {
    // `script` runs the shell under a pseudo-terminal and passes it these keys.
    let tessera = env!("CARGO_BIN_EXE_tessera");
    let command = format!("{tessera} shell --data {} --device cpu", data());
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("TESSERA_CACHE_DIR", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script runs (util-linux)");
    let mut keys = child.stdin.take().expect("stdin");
    let type_slowly = |keys: &mut std::process::ChildStdin, text: &str| {
        keys.write_all(text.as_bytes()).expect("typed");
        keys.flush().expect("typed");
        std::thread::sleep(Duration::from_millis(400));
    };
    std::thread::sleep(Duration::from_millis(1500));
    type_slowly(&mut keys, "from date\r");
    type_slowly(&mut keys, "| aggregate { n = count() };\r");
    // Tab completes a table's name.
    type_slowly(&mut keys, "from supp\t");
    type_slowly(&mut keys, " | aggregate { suppliers = count() };\r");
    type_slowly(&mut keys, ".device\r");
    type_slowly(&mut keys, "\x04");
    drop(keys);
    let output = child.wait_with_output().expect("output");
    let screen = text(&output.stdout);
    assert!(screen.contains("tessera> "), "{screen}");
    assert!(screen.contains("2556"), "{screen}");
    assert!(screen.contains("from supplier"), "completed: {screen}");
    assert!(screen.contains("suppliers"), "{screen}");
    assert!(screen.contains("the CPU"), "{screen}");
}

#[test]
fn the_load_generator_checks_every_result() {
    let server = Server::start();
    let stdout = server.bench(&["--clients", "3", "--queries", "13"]);
    assert!(stdout.contains("39 results, all equal"), "{stdout}");
    assert!(stdout.contains("\nall "), "{stdout}");
}

/// The TPC-H mix: each of the 22 queries sent by two clients, each answer equal to the first.
#[test]
fn the_load_generator_sends_the_tpch_queries() {
    let data = common::tpch_data().to_str().expect("utf-8 path");
    let server = Server::start_serving(data, "127.0.0.1", |_| {});
    let stdout = server.bench(&["--suite", "tpch", "--clients", "2", "--queries", "22"]);
    assert!(stdout.contains("44 results, all equal"), "{stdout}");
    for query in ["q01", "q11", "q22"] {
        assert!(stdout.contains(&format!("\n{query} ")), "{stdout}");
    }
}

/// A cancel request (what psql sends on Ctrl-C) answers the running script at once with
/// SQLSTATE 57014 and stops its work: the same connection's next query is answered without
/// waiting for the rest of the cancelled script, and the server serves on.
#[test]
fn a_cancel_request_stops_the_running_query() {
    // Thirty queries of 150 million joined rows each: seconds of work in all, and a place to
    // stop between any two of them.
    let slow = "from lineorder | product (from date | select d_year) \
                | aggregate { s = sum(lo_quantity + d_year) }\n"
        .repeat(30);
    // Compiling the thirty queries can outlast the second before the cancel, and goes on
    // after it: only the next query's wait is checked.
    cancel_stops(&slow, false);
}

/// A cancel stops a kernel that is running: it takes no more tiles.
#[test]
fn a_cancel_request_stops_a_running_kernel() {
    // One kernel over 30 tiles of `lineorder`, each crossed with all of its 60,200 rows: half
    // a minute of work on two cores, a second or two a tile.
    cancel_stops(
        "from lineorder | product (from lineorder | select q = lo_quantity) \
         | aggregate { s = sum(lo_quantity + q) }",
        true,
    );
}

/// A cancel stops a query's stages: a stage takes the device like any query, and stops like one.
#[test]
fn a_cancel_request_stops_a_running_stage() {
    // The sorted, limited relation crossed with `supplier` runs as a stage first: the kernel
    // of the test above.
    cancel_stops(
        "from supplier | product (from lineorder | product (from lineorder | select q = lo_quantity) \
         | aggregate { s = sum(lo_quantity + q) } | sort s | take 1) | aggregate { n = count() }",
        true,
    );
}

/// Cancels `slow` a second after it starts; checks that the cancel is answered at once, that
/// the next query does not wait for the cancelled work, and, with `idle_after`, that none of it
/// goes on after (the server then uses next to no processor time).
fn cancel_stops(slow: &str, idle_after: bool) {
    let server = Server::start();
    let program = r#"
import os, sys, threading, time
import psycopg
port, slow, pid, idle_after = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "true"
def cpu_seconds():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
with psycopg.connect(f"host=127.0.0.1 port={port} user=tessera dbname=tessera", autocommit=True) as conn:
    # Compiled now, so that its time after the cancel is the wait for the device and its run.
    next_query = "from supplier | aggregate { n = count() }"
    conn.execute(next_query).fetchall()
    outcome = {}
    def run():
        try:
            conn.execute(slow)
            outcome["error"] = "finished"
        except psycopg.Error as e:
            outcome["error"] = e.sqlstate
            outcome["at"] = time.monotonic()
    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(1.0)
    cancelled_at = time.monotonic()
    conn.cancel_safe(timeout=10)
    worker.join(30)
    assert outcome.get("error") == "57014", outcome
    answered = outcome["at"] - cancelled_at
    assert answered < 3, f"the cancel was answered after {answered:.1f} s"
    started = time.monotonic()
    rows = conn.execute(next_query).fetchall()
    waited = time.monotonic() - started
    assert rows == [(20,)], rows
    print(f"cancel answered in {answered:.2f} s, next query in {waited:.2f} s")
    assert waited < 5, f"the next query waited {waited:.1f} s for the cancelled work"
    if idle_after:
        before = cpu_seconds()
        time.sleep(2.0)
        busy = cpu_seconds() - before
        assert busy < 0.5, f"the server worked {busy:.1f} s of processor time in the 2 s after"
"#;
    let output = Command::new("python3")
        .args([
            "-c",
            program,
            &server.port.to_string(),
            slow,
            &server.child.id().to_string(),
            &idle_after.to_string(),
        ])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "psycopg: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let alive = server.psql("from date | aggregate { n = count() }");
    assert_eq!(text(&alive.stdout).trim(), "2556");
}

/// Scripts that differ from an earlier one only in their constants run its compiled code with
/// their own values (`--timing` says which program each script ran), and each still gets
/// DuckDB's answer.
#[test]
fn scripts_differing_in_constants_share_compiled_code() {
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let stderr = log.reopen().expect("the log reopens");
    let server = Server::start_with("127.0.0.1", |command| {
        command.arg("--timing").stderr(stderr);
    });
    // Five shapes, three scripts each (`tests/conformance/constants`); the variants of one
    // (`probes_*`) would be planned otherwise but for the estimates the server keeps.
    let run_folder = || {
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["test", "--device", "cpu", "--server", &server.address])
            .arg("tests/conformance/constants")
            .current_dir(common::repo())
            .env("TESSERA_CACHE_DIR", "")
            .output()
            .expect("tessera test runs")
    };
    let output = run_folder();
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("15 passed, 0 failed"), "{stdout}");
    // Again: every text is resident now.
    let again = run_folder();
    assert!(again.status.success(), "{}", text(&again.stdout));
    drop(server);
    let log = std::fs::read_to_string(log.path()).expect("the log reads");
    let shared = log
        .lines()
        .filter(|line| line.contains("; program the code of an earlier script"))
        .count();
    assert_eq!(shared, 10, "{log}");
    let resident = log
        .lines()
        .filter(|line| line.contains("; program resident (the same text ran before)"))
        .count();
    assert_eq!(resident, 15, "{log}");
}
