//! The generators with the folder they write into: other files left alone, tables replaced
//! whole, a generation that did not finish refused until it is run again, and the records a
//! data cache asks.

use std::fs;
use std::path::Path;

use super::TempDir;
use crate::catalog::Catalog;
use crate::error::StorageError;
use crate::gen::generation::{Generation, Wait};
use crate::gen::wisconsin::generate_wisconsin;
use crate::gen::{check_generation, ensure_generated, generate_ssb, holds_generation, Dataset};
use crate::progress::NoProgress;

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn other_files_are_left_alone_and_datasets_share_a_folder() {
    let dir = TempDir::new("gen-others");
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    fs::write(dir.path().join("sub/x.txt"), "mine too").unwrap();
    generate_ssb(0.001, dir.path(), &NoProgress).unwrap();
    generate_wisconsin(100, dir.path(), &NoProgress).unwrap();
    // Again, replacing lineorder/ and every table file.
    generate_ssb(0.001, dir.path(), &NoProgress).unwrap();
    assert_eq!(
        fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("sub/x.txt")).unwrap(),
        "mine too"
    );
    assert_eq!(
        names(dir.path()),
        [
            ".tessera-gen-ssb.json",
            ".tessera-gen-wisconsin.json",
            "customer.parquet",
            "date.parquet",
            "lineorder",
            "notes.txt",
            "part.parquet",
            "sub",
            "supplier.parquet",
            "wisconsin.parquet",
            "wisconsin_small.parquet",
        ]
    );
    assert_eq!(
        names(&dir.path().join("lineorder")),
        ["lineorder-000.parquet"]
    );
    assert!(holds_generation(dir.path(), &Dataset::Ssb { sf: 0.001 }));
    assert!(!holds_generation(dir.path(), &Dataset::Ssb { sf: 0.002 }));
    assert!(holds_generation(
        dir.path(),
        &Dataset::Wisconsin { rows: 100 }
    ));
    check_generation(dir.path()).unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(catalog.table("wisconsin_small").unwrap().rows, 60);
    assert_eq!(catalog.table("supplier").unwrap().rows, 2);
}

#[test]
fn a_foreign_file_in_lineorder_refuses_the_generation_before_anything_changes() {
    let dir = TempDir::new("gen-foreign");
    fs::create_dir(dir.path().join("lineorder")).unwrap();
    fs::write(dir.path().join("lineorder/lineorder-000.parquet"), "old").unwrap();
    fs::write(dir.path().join("lineorder/README"), "mine").unwrap();
    let error = generate_ssb(0.001, dir.path(), &NoProgress).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("lineorder") && message.contains("`README`") && !message.contains('\n'),
        "{message}"
    );
    assert_eq!(names(dir.path()), ["lineorder"]);
    assert_eq!(
        names(&dir.path().join("lineorder")),
        ["README", "lineorder-000.parquet"]
    );
    // A link is not one of the generator's files either, whatever its name.
    fs::remove_file(dir.path().join("lineorder/README")).unwrap();
    std::os::unix::fs::symlink(
        "/dev/null",
        dir.path().join("lineorder/lineorder-001.parquet"),
    )
    .unwrap();
    assert!(generate_ssb(0.001, dir.path(), &NoProgress).is_err());
    assert_eq!(names(dir.path()), ["lineorder"]);
}

#[test]
fn an_interrupted_generation_is_refused_until_it_is_run_again() {
    let dir = TempDir::new("gen-interrupted");
    generate_ssb(0.001, dir.path(), &NoProgress).unwrap();
    // A generation that started, left temporaries and died.
    let generation = Generation::lock(dir.path(), Dataset::Ssb { sf: 0.002 }, Wait::No).unwrap();
    generation.start().unwrap();
    let new_folder = generation.new_folder("lineorder").unwrap();
    let leftover_folder = new_folder.path().to_path_buf();
    fs::write(leftover_folder.join("lineorder-000.parquet"), "half").unwrap();
    std::mem::forget(new_folder);
    fs::write(dir.path().join(".part.parquet.x1y2z3.partial"), "half").unwrap();

    // While it runs, a reader is told to wait, and another generation is refused.
    assert!(matches!(
        check_generation(dir.path()),
        Err(StorageError::GenerationRunning { .. })
    ));
    assert!(matches!(
        generate_ssb(0.001, dir.path(), &NoProgress),
        Err(StorageError::GenerationRunning { .. })
    ));
    drop(generation);

    let error = Catalog::open(dir.path(), &[]).err().expect("refused");
    assert_eq!(
        error.to_string(),
        format!(
            "data directory {} holds an interrupted `tessera gen ssb --sf 0.002`; run it again",
            dir.path().display()
        )
    );
    assert!(!holds_generation(dir.path(), &Dataset::Ssb { sf: 0.001 }));
    assert!(!holds_generation(dir.path(), &Dataset::Ssb { sf: 0.002 }));

    // The cache's way: generated again, leftovers gone, then reused.
    let dataset = Dataset::Ssb { sf: 0.002 };
    assert!(ensure_generated(dir.path(), &dataset, &NoProgress).unwrap());
    assert!(!ensure_generated(dir.path(), &dataset, &NoProgress).unwrap());
    assert!(!leftover_folder.exists());
    assert_eq!(
        names(dir.path()),
        [
            ".tessera-gen-ssb.json",
            "customer.parquet",
            "date.parquet",
            "lineorder",
            "part.parquet",
            "supplier.parquet",
        ]
    );
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(catalog.table("supplier").unwrap().rows, 4);
}

#[test]
fn bad_parameters_fail_before_the_folder_is_made() {
    let dir = TempDir::new("gen-bad");
    let out = dir.path().join("out");
    assert!(generate_ssb(0.0, &out, &NoProgress).is_err());
    assert!(generate_wisconsin(0, &out, &NoProgress).is_err());
    assert!(ensure_generated(&out, &Dataset::Ssb { sf: -1.0 }, &NoProgress).is_err());
    assert!(!out.exists());
}
