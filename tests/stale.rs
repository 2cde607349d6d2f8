//! Compiled code meets data that changed under it: a column whose type widened or that gained
//! nulls. A `.tqx` refuses to run (a clear error, exit 1); the kernel cache compiles again; in
//! both cases no wrong number is printed.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use tessera_storage::{write_parquet, ColumnData, DataType, Field, Schema};

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

/// Writes `t.parquet` in `data`: keys 0..1000 and values `v` as the given column.
fn write_table(data: &Path, values: ColumnData, nullable: bool, validity: Option<Vec<bool>>) {
    let ty = values.ty();
    let schema = Schema::new(vec![
        Field::new("k", DataType::I32),
        Field::new("v", ty).nullable(nullable),
    ]);
    let keys = ColumnData::I32((0..1000).collect());
    write_parquet(
        &data.join("t.parquet"),
        &schema,
        &[keys, values],
        &[None, validity],
    )
    .expect("written");
}

#[test]
fn code_compiled_for_other_column_types_or_nulls_never_runs() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let data = scratch.path().join("data");
    std::fs::create_dir_all(&data).expect("made");
    let cache = scratch.path().join("cache");
    let script = scratch.path().join("sum.tq");
    std::fs::write(
        &script,
        "from t | aggregate { n = count(v), s = sum(v - k), m = min(v) }\n",
    )
    .expect("written");
    let artifact = scratch.path().join("sum.tqx");
    let (script, artifact, data_arg) = (
        script.to_str().expect("utf-8"),
        artifact.to_str().expect("utf-8"),
        data.to_str().expect("utf-8"),
    );
    let run_script = || {
        let output = tessera(
            &[
                "run", script, "--data", data_arg, "--device", "cpu", "--format", "csv",
            ],
            &cache,
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };

    // v = k: no nulls, declared NOT NULL.
    write_table(&data, ColumnData::I32((0..1000).collect()), false, None);
    let compiled = tessera(
        &[
            "compile", script, "--data", data_arg, "--target", "host", "-o", artifact,
        ],
        &cache,
    );
    assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    assert_eq!(run_script(), "n,s,m\n1000,0,0\n");

    // The same values, nullable, every other one null: the answer changes, and code compiled
    // for a column without nulls must not run on it.
    let odd: Vec<bool> = (0..1000).map(|i| i % 2 == 1).collect();
    write_table(&data, ColumnData::I32((0..1000).collect()), true, Some(odd));
    assert_eq!(run_script(), "n,s,m\n500,0,1\n");
    let refused = tessera(
        &["run", artifact, "--data", data_arg, "--format", "csv"],
        &cache,
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    let stderr = text(&refused.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("may now hold nulls"), "{stderr}");
    assert!(
        refused.stdout.is_empty(),
        "nothing printed: {}",
        text(&refused.stdout)
    );

    // Values past 32 bits in a column widened to i64.
    let big: Vec<i64> = (0..1000).map(|i| i + 48_495_338_000_000).collect();
    write_table(&data, ColumnData::I64(big.into()), false, None);
    assert_eq!(
        run_script(),
        "n,s,m\n1000,48495338000000000,48495338000000\n"
    );
    let refused = tessera(
        &["run", artifact, "--data", data_arg, "--format", "csv"],
        &cache,
    );
    assert_eq!(refused.status.code(), Some(1));
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("now holds i64, compiled for i32"),
        "{stderr}"
    );
}

#[test]
fn a_damaged_artifact_is_refused_in_one_line() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let artifact = scratch.path().join("q.tqx");
    let artifact_arg = artifact.to_str().expect("utf-8");
    let data = common::ssb_data().to_str().expect("utf-8");
    let no_cache = Path::new("");
    let compiled = tessera(
        &[
            "compile",
            "examples/ssb/q11.tq",
            "--data",
            data,
            "--target",
            "host",
            "-o",
            artifact_arg,
        ],
        no_cache,
    );
    assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    let mut bytes = std::fs::read(&artifact).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&artifact, &bytes).expect("written");
    let refused = tessera(&["run", artifact_arg, "--data", data], no_cache);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("damaged"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
