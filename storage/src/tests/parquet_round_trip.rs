//! Columns written with `parquet_write` and read back through the catalog come back equal: every
//! type, with and without nulls, across several row groups and files.

use std::sync::Arc;

use super::TempDir;
use crate::catalog::Catalog;
use crate::column::{Column, ColumnData, Dictionary, DictionaryBuilder};
use crate::parquet_write::{write_parquet, write_parquet_columns, WriteColumn, WriteValues};
use crate::types::{DataType, Field, Schema, Value};

/// Each row decoded, nulls as `Value::Null`.
fn decoded(column: &Column) -> Vec<Value> {
    (0..column.len())
        .map(|row| {
            if column.is_valid(row) {
                column.data.value(row)
            } else {
                Value::Null
            }
        })
        .collect()
}

fn strings(values: &[&str]) -> ColumnData {
    let mut builder = DictionaryBuilder::default();
    for value in values {
        builder.push(value);
    }
    builder.finish()
}

/// Eleven rows of every type; the nullable columns have nulls in different places.
fn every_type() -> (Schema, Vec<ColumnData>, Vec<Option<Vec<bool>>>) {
    let n = 11;
    let mask = |k: usize| Some((0..n).map(|i| i % k != 1).collect::<Vec<bool>>());
    let words = [
        "delta", "alpha", "", "charlie", "bravo", "alpha", "écho", "delta", "x", "y", "alpha",
    ];
    let columns = vec![
        ColumnData::Bool((0..n).map(|i| i % 3 == 0).collect()),
        ColumnData::I32((0..n as i32).map(|i| i * 1_000_003 - 5).collect()),
        ColumnData::I64((0..n as i64).map(|i| i * 10_000_000_000 - 3).collect()),
        ColumnData::F32((0..n).map(|i| i as f32 * 0.5 - 1.0).collect()),
        ColumnData::F64((0..n).map(|i| i as f64 / 3.0).collect()),
        ColumnData::Date((0..n as i32).map(|i| 8035 + i * 40).collect()),
        strings(&words),
        ColumnData::I32((0..n as i32).collect()),
        ColumnData::Str {
            codes: (0..n as i32).map(|i| i % 3).collect(),
            dictionary: Arc::new(Dictionary::from_unsorted(vec![
                "b".into(),
                "a".into(),
                "c".into(),
            ])),
        },
        ColumnData::Bool(vec![true; n].into()),
        ColumnData::Date((0..n as i32).map(|i| -i).collect()),
        ColumnData::F64((0..n).map(|i| i as f64).collect()),
    ];
    let fields = vec![
        Field::new("b", DataType::Bool),
        Field::new("i", DataType::I32),
        Field::new("l", DataType::I64),
        Field::new("f", DataType::F32),
        Field::new("d", DataType::F64),
        Field::new("day", DataType::Date),
        Field::new("s", DataType::Str),
        Field::new("i_null", DataType::I32).nullable(true),
        Field::new("s_null", DataType::Str).nullable(true),
        Field::new("b_null", DataType::Bool).nullable(true),
        Field::new("day_null", DataType::Date).nullable(true),
        Field::new("d_no_nulls", DataType::F64).nullable(true),
    ];
    let validity = vec![
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        mask(2),
        mask(3),
        mask(4),
        mask(5),
        None,
    ];
    (Schema::new(fields), columns, validity)
}

#[test]
fn every_type_round_trips_with_nulls() {
    let dir = TempDir::new("round-trip");
    let (schema, columns, validity) = every_type();
    for (row_group_rows, name) in [(1 << 20, "one_group"), (3, "four_groups")] {
        let written: Vec<WriteColumn<'_>> = columns
            .iter()
            .zip(&validity)
            .map(|(data, valid)| WriteColumn {
                values: data.into(),
                validity: valid.as_deref(),
                unique: false,
            })
            .collect();
        write_parquet_columns(
            &dir.path().join(format!("{name}.parquet")),
            &schema,
            &written,
            row_group_rows,
        )
        .unwrap();
    }
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    for name in ["one_group", "four_groups"] {
        let table = catalog.table(name).unwrap();
        assert_eq!(table.rows, 11);
        assert_eq!(table.schema, schema, "{name}");
        assert!(table.unsupported.is_empty());
        let names: Vec<&str> = schema.names().collect();
        let loaded = catalog.columns(name, &names).unwrap();
        for ((field, loaded), (data, valid)) in schema
            .fields
            .iter()
            .zip(&loaded)
            .zip(columns.iter().zip(&validity))
        {
            let original = Column::new(data.clone(), valid.clone());
            assert_eq!(loaded.ty(), field.ty);
            assert_eq!(decoded(loaded), decoded(&original), "{name}.{}", field.name);
            if let Some(dictionary) = loaded.data.dictionary() {
                assert!(dictionary
                    .iter()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .all(|w| w[0] < w[1]));
            }
        }
        // A second request is served from the cache.
        let again = catalog.column(name, "s").unwrap();
        assert!(Arc::ptr_eq(&again, &loaded[6]));
    }
}

#[test]
fn footer_statistics_match_the_loaded_columns() {
    let dir = TempDir::new("footer-stats");
    let (schema, columns, validity) = every_type();
    let written: Vec<WriteColumn<'_>> = columns
        .iter()
        .zip(&validity)
        .map(|(data, valid)| WriteColumn {
            values: data.into(),
            validity: valid.as_deref(),
            unique: false,
        })
        .collect();
    // Several row groups, so the footer's statistics are combined.
    write_parquet_columns(&dir.path().join("t.parquet"), &schema, &written, 3).unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let table = catalog.table("t").unwrap();
    let mut from_footer = 0;
    for field in &schema.fields {
        // Asked before loading: served from the footer where it has statistics.
        let early = catalog.stats("t", &field.name).unwrap();
        let loaded = catalog.column("t", &field.name).unwrap();
        if table.statistics.contains_key(&field.name) {
            from_footer += 1;
            assert_eq!(early, loaded.stats, "{}", field.name);
        }
    }
    // Every fixed-width column has footer statistics; strings come from their dictionary.
    let fixed = schema
        .fields
        .iter()
        .filter(|f| f.ty != DataType::Str)
        .count();
    assert_eq!(from_footer, fixed);
}

#[test]
fn strings_of_several_files_share_one_sorted_dictionary() {
    let dir = TempDir::new("folder");
    let folder = dir.path().join("words");
    std::fs::create_dir(&folder).unwrap();
    let schema = Schema::new(vec![
        Field::new("k", DataType::I64),
        Field::new("w", DataType::Str),
    ]);
    let files: [&[&str]; 3] = [
        &["pear", "fig", "pear"],
        &["apple"],
        &["zucchini", "fig", "banana", "apple"],
    ];
    let mut key = 0i64;
    for (i, words) in files.iter().enumerate() {
        let keys: Vec<i64> = words
            .iter()
            .map(|_| {
                key += 1;
                key
            })
            .collect();
        let text: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let columns = [
            WriteColumn::new(WriteValues::I64(&keys)),
            WriteColumn::new(WriteValues::Text(&text)),
        ];
        // Two rows per row group, so a file's strings are spread over row groups too.
        write_parquet_columns(
            &folder.join(format!("part-{i}.parquet")),
            &schema,
            &columns,
            2,
        )
        .unwrap();
    }
    // Unrelated and hidden files in the folder are not part of the table.
    std::fs::write(folder.join("README.txt"), "not data").unwrap();
    std::fs::write(folder.join(".part-9.parquet"), "hidden").unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(catalog.table("words").unwrap().rows, 8);
    let columns = catalog.columns("words", &["w", "k"]).unwrap();
    let ColumnData::Str { codes, dictionary } = &columns[0].data else {
        panic!("w is a string column");
    };
    assert_eq!(
        dictionary.iter().collect::<Vec<_>>(),
        ["apple", "banana", "fig", "pear", "zucchini"]
    );
    assert_eq!(codes, &[3, 2, 3, 0, 4, 2, 1, 0]);
    assert_eq!(columns[1].data, ColumnData::I64((1..=8).collect()));
    assert_eq!(columns[1].stats.min, Value::Int(1));
}

#[test]
fn string_dictionaries_and_statistics_come_from_dictionary_pages() {
    let dir = TempDir::new("dictionary-pages");
    let folder = dir.path().join("t");
    std::fs::create_dir(&folder).unwrap();
    let schema = Schema::new(vec![
        Field::new("region", DataType::Str),
        Field::new("nation", DataType::Str).nullable(true),
        Field::new("name", DataType::Str),
    ]);
    let regions = ["ASIA", "EUROPE", "AFRICA", "AMERICA", "MIDDLE EAST"];
    // Two files of several row groups; the first file never holds "MIDDLE EAST".
    for (file, rows) in [(0usize, 0..3000usize), (1, 3000..5000)] {
        let region: Vec<String> = rows
            .clone()
            .map(|i| regions[i % if file == 0 { 4 } else { 5 }].to_string())
            .collect();
        let nation: Vec<String> = rows.clone().map(|i| format!("N{}", i % 25)).collect();
        let valid: Vec<bool> = rows.clone().map(|i| i % 7 != 0).collect();
        // Every name distinct: not worth a dictionary, so the writer stores it plainly.
        let name: Vec<String> = rows.clone().map(|i| format!("Customer#{i:09}")).collect();
        let columns = [
            WriteColumn::new(WriteValues::Text(&region)),
            WriteColumn {
                values: WriteValues::Text(&nation),
                validity: Some(&valid),
                unique: false,
            },
            WriteColumn::new(WriteValues::Text(&name)),
        ];
        write_parquet_columns(
            &folder.join(format!("part-{file}.parquet")),
            &schema,
            &columns,
            700,
        )
        .unwrap();
    }
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    for column in ["region", "nation"] {
        let early_stats = catalog.stats("t", column).unwrap();
        let early = catalog.dictionary("t", column).unwrap().unwrap();
        assert!(
            !catalog.is_loaded("t", column),
            "{column} was read to find its dictionary"
        );
        let loaded = catalog.column("t", column).unwrap();
        assert_eq!(Some(&early), loaded.data.dictionary(), "{column}");
        assert_eq!(early_stats, loaded.stats, "{column}");
    }
    assert_eq!(catalog.stats("t", "nation").unwrap().nulls, 715);
    // Plain pages do not list their strings: the column is read.
    let names = catalog.dictionary("t", "name").unwrap().unwrap();
    assert!(catalog.is_loaded("t", "name"));
    assert_eq!(names.len(), 5000);
}

#[test]
fn write_parquet_takes_whole_columns() {
    let dir = TempDir::new("write-whole");
    let schema = Schema::new(vec![Field::new("x", DataType::I32).nullable(true)]);
    let path = dir.path().join("t.parquet");
    write_parquet(
        &path,
        &schema,
        &[ColumnData::I32(vec![1, 2, 3].into())],
        &[Some(vec![true, false, true])],
    )
    .unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let x = catalog.column("t", "x").unwrap();
    assert_eq!(decoded(&x), [Value::Int(1), Value::Null, Value::Int(3)]);
    // Mismatched input is refused, naming the file.
    let error = write_parquet(
        &path,
        &schema,
        &[ColumnData::F64(vec![1.0].into())],
        &[None],
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("t.parquet") && error.to_string().contains("declared i32"),
        "{error}"
    );
}

#[test]
fn an_empty_table_keeps_its_schema() {
    let dir = TempDir::new("empty");
    let schema = Schema::new(vec![
        Field::new("s", DataType::Str),
        Field::new("i", DataType::I32),
    ]);
    let columns = [strings(&[]), ColumnData::I32(vec![].into())];
    write_parquet(
        &dir.path().join("e.parquet"),
        &schema,
        &columns,
        &[None, None],
    )
    .unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(catalog.table("e").unwrap().schema, schema);
    let loaded = catalog.columns("e", &["s", "i"]).unwrap();
    assert!(loaded.iter().all(|c| c.is_empty()));
}

#[test]
fn threads_asking_at_once_share_one_load() {
    let dir = TempDir::new("concurrent");
    let schema = Schema::new(vec![
        Field::new("n", DataType::I64),
        Field::new("w", DataType::Str),
    ]);
    let n: Vec<i64> = (0..50_000).collect();
    let w: Vec<String> = n.iter().map(|i| format!("w{}", i % 17)).collect();
    let columns = [
        WriteColumn::new(WriteValues::I64(&n)),
        WriteColumn::new(WriteValues::Text(&w)),
    ];
    write_parquet_columns(&dir.path().join("t.parquet"), &schema, &columns, 4096).unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let loaded: Vec<Vec<Arc<Column>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| catalog.columns("t", &["w", "n"]).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for other in &loaded[1..] {
        assert!(Arc::ptr_eq(&loaded[0][0], &other[0]) && Arc::ptr_eq(&loaded[0][1], &other[1]));
    }
    assert_eq!(loaded[0][1].data, ColumnData::I64(n.into()));
    assert_eq!(loaded[0][0].stats.dictionary_size, Some(17));
}

#[test]
fn links_planted_at_the_temporary_or_final_name_are_replaced_not_written_through() {
    let dir = TempDir::new("write-links");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    // The name older versions wrote under before renaming, and the destination itself.
    std::os::unix::fs::symlink(&victim, dir.path().join("a.parquet.partial")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("b.parquet")).unwrap();
    let schema = Schema::new(vec![Field::new("x", DataType::I32)]);
    for name in ["a.parquet", "b.parquet"] {
        write_parquet(
            &dir.path().join(name),
            &schema,
            &[ColumnData::I32(vec![7].into())],
            &[None],
        )
        .unwrap();
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    let b = std::fs::symlink_metadata(dir.path().join("b.parquet")).unwrap();
    assert!(
        b.is_file(),
        "the link at the destination is replaced by the file"
    );
    // Nothing but the two tables, the victim and the untouched old link is left.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["a.parquet", "a.parquet.partial", "b.parquet", "victim"]
    );
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(catalog.table("a").unwrap().rows, 1);
}
