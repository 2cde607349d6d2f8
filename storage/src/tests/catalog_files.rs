//! The catalog over real directories: what counts as a table, schema checks, and the errors
//! bad or mismatched files give (never a panic).

use std::fs::File;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, FixedLenByteArray, FixedLenByteArrayType};
use parquet::data_type::{Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use super::TempDir;
use crate::catalog::{Catalog, TableFormat};
use crate::column::ColumnData;
use crate::error::StorageError;
use crate::parquet_write::write_parquet;
use crate::types::{DataType, Field, Schema, Value};

/// Why `table` cannot be read, in a catalog that opened.
fn broken(opened: Result<Catalog, StorageError>, table: &str) -> Arc<StorageError> {
    let catalog = opened.expect("the catalog opens");
    catalog
        .broken_table(table)
        .unwrap_or_else(|| panic!("`{table}` is readable"))
}

fn two_columns() -> Schema {
    Schema::new(vec![
        Field::new("a", DataType::I32),
        Field::new("b", DataType::F64),
    ])
}

fn write_two_columns(path: &std::path::Path, rows: i32) {
    let columns = [
        ColumnData::I32((0..rows).collect()),
        ColumnData::F64((0..rows).map(f64::from).collect()),
    ];
    write_parquet(path, &two_columns(), &columns, &[None, None]).unwrap();
}

#[test]
fn a_missing_directory_is_reported() {
    let dir = TempDir::new("missing");
    let missing = dir.path().join("nope");
    assert!(
        matches!(Catalog::open(&missing, &[]), Err(StorageError::NoDirectory(p)) if p == missing)
    );
    // There, but neither a folder nor a file.
    let device = std::path::Path::new("/dev/null");
    assert!(
        matches!(Catalog::open(device, &[]), Err(StorageError::NotFileOrFolder(p)) if p == device)
    );
}

#[test]
fn finds_files_folders_and_tbl_and_ignores_the_rest() {
    let dir = TempDir::new("scan");
    write_two_columns(&dir.path().join("single.parquet"), 5);
    std::fs::create_dir(dir.path().join("many")).unwrap();
    write_two_columns(&dir.path().join("many/b.parquet"), 3);
    write_two_columns(&dir.path().join("many/a.parquet"), 4);
    std::fs::create_dir(dir.path().join("no_parquet_inside")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    std::fs::write(dir.path().join(".hidden.parquet"), "junk").unwrap();
    std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
    std::fs::write(dir.path().join("lines.tbl"), "1|2.5|\n2|3.5|\n").unwrap();

    let declared = vec![("lines".to_string(), two_columns())];
    let catalog = Catalog::open(dir.path(), &declared).unwrap();
    let names: Vec<&str> = catalog.tables().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["lines", "many", "single"]);
    assert_eq!(catalog.table("single").unwrap().rows, 5);
    assert_eq!(catalog.table("lines").unwrap().rows, 2);
    let many = catalog.table("many").unwrap();
    assert_eq!(many.rows, 7);
    let TableFormat::Parquet { files, .. } = &many.format else {
        panic!("a folder of Parquet files");
    };
    // File-name order: a.parquet (0..4) then b.parquet (0..3).
    assert!(files[0].ends_with("a.parquet"));
    let a = catalog.column("many", "a").unwrap();
    assert_eq!(a.data, ColumnData::I32(vec![0, 1, 2, 3, 0, 1, 2].into()));

    let b = catalog.column("lines", "b").unwrap();
    assert_eq!(b.data, ColumnData::F64(vec![2.5, 3.5].into()));

    assert!(
        matches!(catalog.column("nope", "a"), Err(StorageError::UnknownTable(t)) if t == "nope")
    );
    assert!(matches!(
        catalog.column("single", "zz"),
        Err(StorageError::UnknownColumn { column, .. }) if column == "zz"
    ));
}

#[test]
fn a_tbl_file_needs_a_declared_schema_and_is_parsed_once() {
    let dir = TempDir::new("tbl");
    let path = dir.path().join("lines.tbl");
    std::fs::write(&path, "1|2.5|\n2|3.5|\n").unwrap();
    let error = broken(Catalog::open(dir.path(), &[]), "lines");
    assert!(
        error.to_string().contains("declare `table lines { ... }`"),
        "{error}"
    );

    let catalog = Catalog::open(dir.path(), &[("lines".to_string(), two_columns())]).unwrap();
    let a = catalog.column("lines", "a").unwrap();
    assert_eq!(a.data, ColumnData::I32(vec![1, 2].into()));
    // Every column was kept from that one parse: the file is no longer needed.
    std::fs::remove_file(&path).unwrap();
    let b = catalog.column("lines", "b").unwrap();
    assert_eq!(b.data.value(1), Value::Float(3.5));
}

#[test]
fn files_of_one_folder_must_share_a_schema() {
    let dir = TempDir::new("folder-mismatch");
    std::fs::create_dir(dir.path().join("t")).unwrap();
    write_two_columns(&dir.path().join("t/1.parquet"), 3);
    let other = Schema::new(vec![
        Field::new("a", DataType::I64),
        Field::new("b", DataType::F64),
    ]);
    let columns = [
        ColumnData::I64(vec![1].into()),
        ColumnData::F64(vec![1.0].into()),
    ];
    write_parquet(
        &dir.path().join("t/2.parquet"),
        &other,
        &columns,
        &[None, None],
    )
    .unwrap();
    let error = broken(Catalog::open(dir.path(), &[]), "t");
    let StorageError::SchemaMismatch { table, message } = &*error else {
        panic!("expected a schema mismatch, got {error}");
    };
    assert_eq!(table, "t");
    assert!(message.contains("2.parquet"), "{message}");
}

#[test]
fn a_declared_schema_must_agree_with_the_files() {
    let dir = TempDir::new("declared");
    write_two_columns(&dir.path().join("t.parquet"), 3);
    let open =
        |fields: Vec<Field>| Catalog::open(dir.path(), &[("t".to_string(), Schema::new(fields))]);

    let error = broken(
        open(vec![
            Field::new("a", DataType::I32),
            Field::new("b", DataType::F64),
            Field::new("c", DataType::Str),
            Field::new("d", DataType::I32),
        ]),
        "t",
    );
    assert_eq!(
        error.to_string(),
        "table `t`: declared columns missing from the files: c, d"
    );

    let error = broken(
        open(vec![
            Field::new("a", DataType::I64),
            Field::new("b", DataType::F64),
        ]),
        "t",
    );
    assert_eq!(
        error.to_string(),
        "table `t`: column `a` is declared i64 but the files hold i32"
    );

    let error = broken(open(vec![Field::new("a", DataType::I32)]), "t");
    assert!(error.to_string().contains("not declared: b"), "{error}");

    // Agreement in another order: the declaration's order wins.
    let catalog = open(vec![
        Field::new("b", DataType::F64),
        Field::new("a", DataType::I32),
    ])
    .unwrap();
    let names: Vec<&str> = catalog.table("t").unwrap().schema.names().collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn corrupt_files_give_errors_naming_the_file() {
    let dir = TempDir::new("corrupt");
    std::fs::write(
        dir.path().join("garbage.parquet"),
        b"this is not a parquet file at all",
    )
    .unwrap();
    let error = broken(Catalog::open(dir.path(), &[]), "garbage");
    assert!(
        matches!(&*error, StorageError::Parquet { path, .. } if path.ends_with("garbage.parquet")),
        "{error}"
    );
    std::fs::remove_file(dir.path().join("garbage.parquet")).unwrap();

    // A file cut short loses its footer.
    let path = dir.path().join("cut.parquet");
    write_two_columns(&path, 1000);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let error = broken(Catalog::open(dir.path(), &[]), "cut");
    assert!(
        matches!(&*error, StorageError::Parquet { path, .. } if path.ends_with("cut.parquet")),
        "{error}"
    );
    std::fs::remove_file(&path).unwrap();

    // Damaged data pages behind an intact footer: opening works, loading fails cleanly.
    let path = dir.path().join("pages.parquet");
    write_two_columns(&path, 100_000);
    let mut bytes = std::fs::read(&path).unwrap();
    let footer = 4096.min(bytes.len() / 4);
    let end = bytes.len() - footer;
    for byte in &mut bytes[8..end] {
        *byte = byte.wrapping_mul(31).wrapping_add(7);
    }
    std::fs::write(&path, &bytes).unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    for column in ["a", "b"] {
        let error = catalog.column("pages", column).expect_err("damaged pages");
        assert!(
            matches!(&error, StorageError::Parquet { path, .. } if path.ends_with("pages.parquet")),
            "{error}"
        );
    }
}

/// A file with columns Tessera cannot read, written with the low-level API.
fn write_unsupported(path: &std::path::Path) {
    let schema = parse_message_type(
        "message m {
            required int32 id;
            optional fixed_len_byte_array(4) code;
            required int64 at (TIMESTAMP(MILLIS, true));
            required int32 small (INT_16);
        }",
    )
    .unwrap();
    let file = File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(
        file,
        Arc::new(schema),
        Arc::new(WriterProperties::builder().build()),
    )
    .unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut id = group.next_column().unwrap().unwrap();
    id.typed::<Int32Type>()
        .write_batch(&[7, 8], None, None)
        .unwrap();
    id.close().unwrap();
    let mut code = group.next_column().unwrap().unwrap();
    let codes = [FixedLenByteArray::from(vec![1u8, 2, 3, 4])];
    code.typed::<FixedLenByteArrayType>()
        .write_batch(&codes, Some(&[1, 0]), None)
        .unwrap();
    code.close().unwrap();
    let mut at = group.next_column().unwrap().unwrap();
    at.typed::<Int64Type>()
        .write_batch(&[1, 2], None, None)
        .unwrap();
    at.close().unwrap();
    let mut small = group.next_column().unwrap().unwrap();
    small
        .typed::<Int32Type>()
        .write_batch(&[-3, 4], None, None)
        .unwrap();
    small.close().unwrap();
    group.close().unwrap();
    writer.close().unwrap();
}

#[test]
fn unreadable_columns_are_listed_with_a_reason() {
    let dir = TempDir::new("unsupported");
    write_unsupported(&dir.path().join("odd.parquet"));
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let odd = catalog.table("odd").unwrap();
    let names: Vec<&str> = odd.schema.names().collect();
    assert_eq!(names, ["id", "at", "small"]);
    let unsupported: Vec<&str> = odd.unsupported.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(unsupported, ["code"]);
    assert!(odd.unsupported[0].1.contains("fixed-length"));
    let error = catalog
        .column("odd", "code")
        .expect_err("fixed-length byte arrays are unsupported");
    assert!(
        matches!(error, StorageError::UnsupportedColumn { .. }),
        "{error}"
    );
    // Milliseconds since 1970 (UTC), read as microseconds.
    let at = catalog.column("odd", "at").unwrap();
    assert_eq!(at.data, ColumnData::Timestamp(vec![1000, 2000].into()));
    let small = catalog.column("odd", "small").unwrap();
    assert_eq!(small.data, ColumnData::I32(vec![-3, 4].into()));

    // Declaring an unreadable column is a mismatch that says why.
    let declared = Schema::new(vec![
        Field::new("id", DataType::I32),
        Field::new("code", DataType::I64),
    ]);
    let error = broken(
        Catalog::open(dir.path(), &[("odd".to_string(), declared)]),
        "odd",
    );
    assert!(
        error.to_string().contains("`code` cannot be read"),
        "{error}"
    );
}

#[test]
fn unannotated_byte_arrays_are_strings_when_they_are_utf8() {
    let dir = TempDir::new("binary");
    let schema =
        parse_message_type("message m { required binary text; required binary raw; }").unwrap();
    let file = File::create(dir.path().join("b.parquet")).unwrap();
    let mut writer = SerializedFileWriter::new(
        file,
        Arc::new(schema),
        Arc::new(WriterProperties::builder().build()),
    )
    .unwrap();
    let mut group = writer.next_row_group().unwrap();
    for values in [[&b"zeta"[..], b"alpha"], [b"ok", b"\xff\xfe"]] {
        let mut column = group.next_column().unwrap().unwrap();
        let values: Vec<ByteArray> = values.iter().map(|v| ByteArray::from(v.to_vec())).collect();
        column
            .typed::<ByteArrayType>()
            .write_batch(&values, None, None)
            .unwrap();
        column.close().unwrap();
    }
    group.close().unwrap();
    writer.close().unwrap();

    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let text = catalog.column("b", "text").unwrap();
    assert_eq!(text.data.value(0), Value::Str("zeta".into()));
    let error = catalog.column("b", "raw").expect_err("not UTF-8");
    assert!(
        matches!(&error, StorageError::UnsupportedColumn { column, reason, .. } if column == "raw" && reason.contains("UTF-8")),
        "{error}"
    );
}

#[test]
fn one_table_stored_twice_is_an_error() {
    let dir = TempDir::new("twice");
    write_two_columns(&dir.path().join("t.parquet"), 1);
    std::fs::create_dir(dir.path().join("t")).unwrap();
    write_two_columns(&dir.path().join("t/x.parquet"), 1);
    let error = Catalog::open(dir.path(), &[]).err().expect("t twice");
    assert!(
        error.to_string().contains("table `t` is stored twice"),
        "{error}"
    );
}

#[test]
fn memory_catalogs_check_their_columns() {
    use crate::column::Column;
    let table = |rows: [usize; 2]| {
        vec![(
            "m".to_string(),
            vec![
                (
                    "x".to_string(),
                    Column::new(ColumnData::I32(vec![0; rows[0]].into()), None),
                ),
                (
                    "y".to_string(),
                    Column::new(
                        ColumnData::F32(vec![0.0; rows[1]].into()),
                        Some(vec![false; rows[1]]),
                    ),
                ),
            ],
        )]
    };
    let catalog = Catalog::from_columns(table([3, 3]));
    let m = catalog.table("m").unwrap();
    assert_eq!(m.rows, 3);
    assert!(m.schema.field("y").unwrap().nullable);
    assert_eq!(catalog.column("m", "y").unwrap().stats.nulls, 3);
    assert!(Catalog::try_from_columns(table([3, 2])).is_err());
}

#[test]
fn columns_written_as_unique_are_known_unique_without_loading() {
    use crate::parquet_write::{write_parquet_columns, WriteColumn, WriteValues};
    let dir = TempDir::new("unique");
    let keys: Vec<i32> = vec![3, 1, 2];
    let repeated: Vec<i32> = vec![5, 5, 6];
    let schema = Schema::new(vec![
        Field::new("key", DataType::I32),
        Field::new("other", DataType::I32),
    ]);
    write_parquet_columns(
        &dir.path().join("t.parquet"),
        &schema,
        &[
            WriteColumn::new(WriteValues::I32(&keys)).unique(),
            WriteColumn::new(WriteValues::I32(&repeated)),
        ],
        2,
    )
    .unwrap();
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    assert_eq!(catalog.table("t").unwrap().unique, ["key"]);
    assert_eq!(catalog.unique("t", "key").unwrap(), Some(true));
    // Not recorded: three values in a range of two must repeat (the statistics say so), and
    // otherwise the column is loaded and checked.
    assert_eq!(catalog.unique("t", "other").unwrap(), Some(false));
}

#[test]
fn a_run_preparing_columns_keeps_large_columns_and_encodings_in_files_not_memory() {
    use crate::compress::{Compression, Scheme};
    use crate::parquet_write::{write_parquet_columns, WriteColumn, WriteValues};
    use crate::prepared::PreparedStore;
    let dir = TempDir::new("spilled");
    // 32 MiB of values a column, over the size from which buffers go to files; `spread` packs
    // into 20 bits a value (still over it), `steps` into far less.
    let rows: i32 = 8 << 20;
    let spread: Vec<i32> = (0..rows)
        .map(|i| i.wrapping_mul(7919).rem_euclid(1_000_003))
        .collect();
    let steps: Vec<i32> = (0..rows).map(|i| i / 1000).collect();
    let schema = Schema::new(vec![
        Field::new("spread", DataType::I32),
        Field::new("steps", DataType::I32),
    ]);
    write_parquet_columns(
        &dir.path().join("t.parquet"),
        &schema,
        &[
            WriteColumn::new(WriteValues::I32(&spread)),
            WriteColumn::new(WriteValues::I32(&steps)),
        ],
        1 << 20,
    )
    .unwrap();
    let names = ["spread", "steps"];
    let in_memory = Catalog::open(dir.path(), &[])
        .unwrap()
        .with_compression(Compression::Auto);
    let preparing = Catalog::open(dir.path(), &[])
        .unwrap()
        .with_compression(Compression::Auto)
        .with_prepared(PreparedStore::in_place(dir.path()));
    in_memory.encode_columns("t", &names).unwrap();
    preparing.encode_columns("t", &names).unwrap();
    for name in names {
        // Encoded, and its values dropped: their scratch file's pages are never written back.
        assert!(in_memory.is_loaded("t", name));
        assert!(!preparing.is_loaded("t", name), "{name}");
        let scheme = preparing.scheme("t", name).unwrap();
        preparing.kernel_packed("t", name, scheme).unwrap();
        assert!(!preparing.is_loaded("t", name), "{name}");
    }
    assert_eq!(preparing.finish_preparing(), Vec::<String>::new());
    for name in names {
        let kept = in_memory.column("t", name).unwrap();
        let spilled = preparing.column("t", name).unwrap();
        let mapped = |data: &ColumnData| matches!(data, ColumnData::I32(v) if v.is_mapped());
        assert!(!mapped(&kept.data));
        assert!(mapped(&spilled.data), "{name}");
        assert_eq!(kept.data.as_i32(), spilled.data.as_i32());
        let scheme = preparing.scheme("t", name).unwrap();
        assert_ne!(scheme, Scheme::None);
        assert_eq!(in_memory.scheme("t", name).unwrap(), scheme);
        let (kept, spilled) = (
            in_memory.packed("t", name, scheme).unwrap(),
            preparing.kernel_packed("t", name, scheme).unwrap(),
        );
        let large = spilled.data.len() * 4 >= crate::spill::FILE_BUFFER_BYTES;
        assert_eq!(spilled.data.is_mapped(), large, "{name}");
        assert_eq!(name == "spread", large);
        assert_eq!(kept, spilled);
    }
    assert_eq!(preparing.finish_preparing(), Vec::<String>::new());
    // The scratch files are unnamed: the store holds the entries alone.
    let listed: Vec<String> = std::fs::read_dir(dir.path().join(".tessera/t"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(std::fs::read_dir(dir.path().join(".tessera"))
        .unwrap()
        .all(|e| e.unwrap().path().is_dir()));
}

#[test]
fn encoding_a_table_held_in_memory_while_preparing_keeps_its_columns() {
    use crate::compress::Compression;
    use crate::prepared::PreparedStore;
    let dir = TempDir::new("memory-table");
    let values: Vec<Value> = (0..5000).map(|i| Value::Int(i64::from(i % 7))).collect();
    let column = crate::Column::from_values(DataType::I32, values.iter()).unwrap();
    let mut catalog = Catalog::open(dir.path(), &[])
        .unwrap()
        .with_compression(Compression::Auto)
        .with_prepared(PreparedStore::in_place(dir.path()));
    catalog
        .add_table("stage#1", vec![("k".to_string(), column)])
        .unwrap();
    catalog.encode_columns("stage#1", &["k"]).unwrap();
    // A stage's result cannot be read again: dropping its column would lose it.
    assert!(catalog.is_loaded("stage#1", "k"));
    assert_eq!(catalog.column("stage#1", "k").unwrap().len(), 5000);
}

/// Big-endian two's complement bytes of `value` in `width` bytes (sign-extended).
fn decimal_bytes(value: i128, width: usize) -> Vec<u8> {
    let fill = if value < 0 { 0xff } else { 0 };
    let mut bytes = vec![fill; width.saturating_sub(16)];
    let own = value.to_be_bytes();
    bytes.extend_from_slice(&own[16 - width.min(16)..]);
    bytes
}

/// Writes one row group of `d.parquet` in `dir`: a variable-length `wide` DECIMAL(38, 4) and a
/// 17-byte `wider` DECIMAL(38, 2), as other writers store them.
fn write_wide_decimals(dir: &std::path::Path, wide: &[i128], wider: &[i128]) {
    let schema = parse_message_type(
        "message m { required binary wide (DECIMAL(38, 4)); \
         required fixed_len_byte_array(17) wider (DECIMAL(38, 2)); }",
    )
    .unwrap();
    let file = File::create(dir.join("d.parquet")).unwrap();
    let mut writer = SerializedFileWriter::new(
        file,
        Arc::new(schema),
        Arc::new(WriterProperties::builder().build()),
    )
    .unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut column = group.next_column().unwrap().unwrap();
    let values: Vec<ByteArray> = wide
        .iter()
        .map(|&v| ByteArray::from(decimal_bytes(v, 16)))
        .collect();
    column
        .typed::<ByteArrayType>()
        .write_batch(&values, None, None)
        .unwrap();
    column.close().unwrap();
    let mut column = group.next_column().unwrap().unwrap();
    let values: Vec<FixedLenByteArray> = wider
        .iter()
        .map(|&v| FixedLenByteArray::from(decimal_bytes(v, 17)))
        .collect();
    column
        .typed::<FixedLenByteArrayType>()
        .write_batch(&values, None, None)
        .unwrap();
    column.close().unwrap();
    group.close().unwrap();
    writer.close().unwrap();
}

#[test]
fn decimals_of_38_digits_read_exactly_from_any_byte_width() {
    let dir = TempDir::new("wide_decimals");
    let nines = 10i128.pow(38) - 1;
    let wide = [123_456_789_012_345_678_901_234_567_891_234, -1, 0];
    let wider = [-nines, nines, 10i128.pow(20) + 7];
    write_wide_decimals(dir.path(), &wide, &wider);
    let catalog = Catalog::open(dir.path(), &[]).unwrap();
    let column = catalog.column("d", "wide").unwrap();
    assert_eq!(column.ty().name(), "decimal(38, 4)");
    assert_eq!(
        column.data.value(0).to_string(),
        "12345678901234567890123456789.1234"
    );
    assert_eq!(column.data.value(1), Value::WideDecimal(-1, 4));
    let column = catalog.column("d", "wider").unwrap();
    assert_eq!(
        column.data,
        ColumnData::WideDecimal(
            wider.to_vec().into(),
            crate::DecimalType::new(38, 2).unwrap()
        )
    );
    assert_eq!(column.stats.min, Value::WideDecimal(-nines, 2));

    // A value of 39 digits is more than the type holds: the column is unreadable, saying why.
    let beyond = TempDir::new("beyond_38_digits");
    write_wide_decimals(beyond.path(), &[0], &[10i128.pow(38)]);
    let catalog = Catalog::open(beyond.path(), &[]).unwrap();
    let error = catalog.column("d", "wider").expect_err("39 digits");
    assert!(
        error
            .to_string()
            .contains("more digits than its type, decimal(38, 2)"),
        "{error}"
    );
}
