//! Printing results as text: an aligned table fitted to the terminal (eliding the middle rows of
//! a long result), CSV, JSON and newline-delimited JSON. Results are written piece by piece as
//! they are read back, so a large result streams unless its table needs eliding.
//!
//! A null is never spelled like a value: `NULL` in a table, an empty unquoted field in CSV (an
//! empty string is written `""`), `null` in JSON. Floats are written in the shortest form that
//! reads back as the same value of the column's type (an `f32` column as an `f32`).

mod csv;
mod table;

use std::collections::VecDeque;
use std::fmt::Write as _;

use tessera_storage::{date, DataType, Value};

use crate::result::ResultTable;
use table::TableLayout;

/// The text forms a result is printed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// An aligned table with a header and a row count.
    Table,
    /// Comma-separated values with a header row.
    Csv,
    /// A JSON array of objects, one per row, keys in column order.
    Json,
    /// One JSON object per line (newline-delimited JSON).
    NdJson,
}

/// How a table is fitted to where it is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableLimits {
    /// Rows shown at most: a longer result shows its first and last rows around a marker.
    pub max_rows: Option<usize>,
    /// Characters per line at most: wide text columns are cut, ending in `…`; numbers are
    /// never cut.
    pub width: Option<usize>,
}

impl TableLimits {
    /// No elision and no width limit, as when the output is a file or a pipe.
    pub const UNLIMITED: TableLimits = TableLimits {
        max_rows: None,
        width: None,
    };

    /// The limits for standard output: a terminal's width and 40 rows when it is a terminal,
    /// none otherwise; `max_rows` (0 for all) overrides the rows.
    pub fn for_stdout(max_rows: Option<usize>) -> TableLimits {
        let terminal = terminal_width();
        let max_rows = match max_rows {
            Some(0) => None,
            Some(n) => Some(n),
            None => terminal.map(|_| DEFAULT_TERMINAL_ROWS),
        };
        TableLimits {
            max_rows,
            width: terminal,
        }
    }
}

/// Rows of a streamed table laid out at once: the first ones settle the columns' widths.
const STREAMED_TABLE_ROWS: usize = 4096;

/// Rows a table shows on a terminal unless `--max-rows` says otherwise (DuckDB's default).
const DEFAULT_TERMINAL_ROWS: usize = 40;

/// The terminal's width in columns, when standard output is a terminal.
fn terminal_width() -> Option<usize> {
    // SAFETY: `isatty` and the TIOCGWINSZ `ioctl` only read the descriptor's state into a
    // zeroed `winsize` owned here.
    unsafe {
        if libc::isatty(libc::STDOUT_FILENO) != 1 {
            return None;
        }
        let mut size: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) == 0 && size.ws_col > 0 {
            Some(usize::from(size.ws_col))
        } else {
            Some(80)
        }
    }
}

/// Writes a result piece by piece as it is read back: the header with the first piece, each
/// piece's rows as they come, the closing line (the row count, or JSON's bracket) at the end.
/// A streamed table's columns take their widths from its first rows; a table with a row limit
/// keeps rows until it knows whether it must elide.
pub struct ResultWriter<W: std::io::Write> {
    out: W,
    format: TextFormat,
    limits: TableLimits,
    columns: Vec<(String, DataType)>,
    /// The table format's layout, once the columns are known.
    layout: Option<TableLayout>,
    rows: u64,
    started: bool,
    /// Written before anything else: what separates this result from the one before.
    prefix: &'static str,
    /// A limited table's rows held back: the first ones, and the latest ones past them.
    head: Vec<Vec<String>>,
    tail: VecDeque<Vec<String>>,
}

impl<W: std::io::Write> ResultWriter<W> {
    pub fn new(out: W, format: TextFormat) -> ResultWriter<W> {
        ResultWriter::with_limits(out, format, TableLimits::UNLIMITED)
    }

    pub fn with_limits(out: W, format: TextFormat, limits: TableLimits) -> ResultWriter<W> {
        ResultWriter {
            out,
            format,
            limits,
            columns: Vec::new(),
            layout: None,
            rows: 0,
            started: false,
            prefix: "",
            head: Vec::new(),
            tail: VecDeque::new(),
        }
    }

    /// Writes the rows of `piece` (and, the first time, the header).
    pub fn write(&mut self, piece: &ResultTable) -> std::io::Result<()> {
        if !self.started {
            self.start(piece)?;
        }
        if self.format == TextFormat::Table && self.limits.max_rows.is_none() {
            // Streamed: each piece laid out at once, in the widths the first one settled.
            // Laid out a bounded number of rows at a time, which the layout holds in memory
            // several times over; the first rows settle the widths.
            for rows in piece.rows.chunks(STREAMED_TABLE_ROWS) {
                let cells: Vec<Vec<String>> = rows.iter().map(|row| self.cells(row)).collect();
                self.rows += cells.len() as u64;
                self.print_rows(&cells)?;
            }
            return Ok(());
        }
        for row in &piece.rows {
            self.row(row)?;
            self.rows += 1;
        }
        Ok(())
    }

    /// Ends the result (`columns` name the header if no piece came); returns the writer.
    pub fn finish(mut self, columns: &[(String, DataType)]) -> std::io::Result<W> {
        if !self.started {
            self.start(&ResultTable {
                columns: columns.to_vec(),
                rows: Vec::new(),
            })?;
        }
        match self.format {
            TextFormat::Table => {
                let shown = self.flush_held()?;
                let plural = if self.rows == 1 { "" } else { "s" };
                if shown < self.rows {
                    writeln!(self.out, "({} row{plural}, {shown} shown)", self.rows)?;
                } else {
                    writeln!(self.out, "({} row{plural})", self.rows)?;
                }
            }
            TextFormat::Csv | TextFormat::NdJson => {}
            TextFormat::Json if self.rows == 0 => writeln!(self.out, "[]")?,
            TextFormat::Json => write!(self.out, "\n]\n")?,
        }
        self.out.flush()?;
        Ok(self.out)
    }

    fn start(&mut self, piece: &ResultTable) -> std::io::Result<()> {
        self.started = true;
        self.out.write_all(self.prefix.as_bytes())?;
        self.columns = piece.columns.clone();
        match self.format {
            TextFormat::Table => {
                self.layout = Some(TableLayout::new(&self.columns, self.limits.width));
                Ok(())
            }
            TextFormat::Csv => {
                let header: Vec<String> = self.columns.iter().map(|(h, _)| csv::field(h)).collect();
                writeln!(self.out, "{}", header.join(","))
            }
            TextFormat::Json | TextFormat::NdJson => Ok(()),
        }
    }

    fn row(&mut self, row: &[Value]) -> std::io::Result<()> {
        match self.format {
            TextFormat::Table => {
                // Held back (a streamed table prints its pieces whole, in `write`).
                let cells = self.cells(row);
                let max = self.limits.max_rows.unwrap_or(usize::MAX);
                if self.head.len() < max.div_ceil(2) {
                    self.head.push(cells);
                } else {
                    // At most `max` rows in all: a result that fits shows every row.
                    self.tail.push_back(cells);
                    if self.tail.len() > max / 2 {
                        self.tail.pop_front();
                    }
                }
                Ok(())
            }
            TextFormat::Csv => {
                let fields: Vec<String> = row
                    .iter()
                    .zip(&self.columns)
                    .map(|(v, (_, ty))| match v {
                        Value::Null => String::new(),
                        other => csv::field(&value_text(other, *ty)),
                    })
                    .collect();
                writeln!(self.out, "{}", fields.join(","))
            }
            TextFormat::Json => {
                let separator = if self.rows == 0 { "[\n  " } else { ",\n  " };
                let object = self.json_object(row);
                write!(self.out, "{separator}{object}")
            }
            TextFormat::NdJson => {
                let object = self.json_object(row);
                writeln!(self.out, "{object}")
            }
        }
    }

    /// Prints a limited table's held rows (with the header, now that its widths are known);
    /// returns how many rows were shown.
    fn flush_held(&mut self) -> std::io::Result<u64> {
        if self.limits.max_rows.is_none() {
            // Streamed: a result with no rows still shows its header.
            if !self.layout.as_ref().is_some_and(TableLayout::settled) {
                self.print_rows(&[])?;
            }
            return Ok(self.rows);
        }
        let mut shown: Vec<Vec<String>> = std::mem::take(&mut self.head);
        let tail = std::mem::take(&mut self.tail);
        let kept = (shown.len() + tail.len()) as u64;
        if kept < self.rows {
            shown.push(vec!["…".to_string(); self.columns.len()]);
        }
        shown.extend(tail);
        self.print_rows(&shown)?;
        Ok(kept)
    }

    /// Prints rows of cells laid out as a table (under the header, the first time).
    fn print_rows(&mut self, rows: &[Vec<String>]) -> std::io::Result<()> {
        let layout = self
            .layout
            .get_or_insert_with(|| TableLayout::new(&self.columns, self.limits.width));
        let text = layout.render(rows);
        self.out.write_all(text.as_bytes())
    }

    fn cells(&self, row: &[Value]) -> Vec<String> {
        row.iter()
            .zip(&self.columns)
            .map(|(v, (_, ty))| match v {
                Value::Null => "NULL".to_string(),
                other => value_text(other, *ty),
            })
            .collect()
    }

    /// A row as a JSON object, its keys in column order.
    fn json_object(&self, row: &[Value]) -> String {
        let mut object = String::from("{");
        for (i, (v, (name, ty))) in row.iter().zip(&self.columns).enumerate() {
            if i > 0 {
                object.push_str(", ");
            }
            let _ = write!(object, "{}: {}", json_string(name), json_value(v, *ty));
        }
        object.push('}');
        object
    }
}

/// Prints the results of a script's queries one after another: a blank line between tables or
/// CSV results, newline-delimited JSON back to back, and the JSON arrays of a script with
/// several queries inside one outer array, so the whole output is one JSON value.
pub struct ScriptOutput<W: std::io::Write> {
    out: W,
    format: TextFormat,
    limits: TableLimits,
    queries: usize,
    printed: usize,
}

impl<W: std::io::Write> ScriptOutput<W> {
    /// Output for a script of `queries` queries.
    pub fn new(out: W, format: TextFormat, limits: TableLimits, queries: usize) -> Self {
        ScriptOutput {
            out,
            format,
            limits,
            queries,
            printed: 0,
        }
    }

    /// The writer for the next query's result, which first writes what separates it from
    /// the last one; nothing is written until the writer writes. Call `finished` after the
    /// writer's `finish`.
    pub fn next_result(&mut self) -> ResultWriter<&mut W> {
        let nested = self.format == TextFormat::Json && self.queries > 1;
        let prefix = match (self.printed, self.format) {
            (0, _) if nested => "[\n",
            (0, _) | (_, TextFormat::NdJson) => "",
            (_, TextFormat::Json) if nested => ",\n",
            _ => "\n",
        };
        let mut writer = ResultWriter::with_limits(&mut self.out, self.format, self.limits);
        writer.prefix = prefix;
        writer
    }

    /// Sets how many queries the script has, before the first result is printed.
    pub fn set_queries(&mut self, queries: usize) {
        self.queries = queries;
    }

    /// Counts a result whose writer finished.
    pub fn finished(&mut self) {
        self.printed += 1;
    }

    /// Prints `table` as the next result.
    pub fn print(&mut self, table: &ResultTable) -> std::io::Result<()> {
        let mut writer = self.next_result();
        writer.write(table)?;
        writer.finish(&table.columns)?;
        self.finished();
        Ok(())
    }

    /// Queries printed so far.
    pub fn printed(&self) -> usize {
        self.printed
    }

    /// Closes the outer array of a JSON output with several queries, and flushes.
    pub fn finish(mut self) -> std::io::Result<W> {
        if self.format == TextFormat::Json && self.queries > 1 && self.printed > 0 {
            self.out.write_all(b"]\n")?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

impl ResultTable {
    /// The table in `format`, as `tessera run` prints it to a file.
    pub fn to_format(&self, format: TextFormat) -> String {
        let mut writer = ResultWriter::new(Vec::new(), format);
        let written = writer
            .write(self)
            .and_then(|()| writer.finish(&self.columns));
        String::from_utf8_lossy(&written.unwrap_or_default()).into_owned()
    }

    /// An aligned text table with a header.
    pub fn to_text(&self) -> String {
        self.to_format(TextFormat::Table)
    }

    /// Comma-separated values with a header row.
    pub fn to_csv(&self) -> String {
        self.to_format(TextFormat::Csv)
    }

    /// A JSON array of objects, one per row.
    pub fn to_json(&self) -> String {
        self.to_format(TextFormat::Json)
    }
}

/// A value of a column of type `ty` as text: integers plainly, floats in their shortest exact
/// form for the column's width, dates as ISO dates. Nulls are the caller's to spell.
pub fn value_text(v: &Value, ty: DataType) -> String {
    match v {
        Value::Float(x) => float_text(*x, ty == DataType::F32),
        other => other.to_string(),
    }
}

/// The shortest text that reads back as `x` (as an `f32` when `single`): a fraction always
/// shows a point (`2.0`), and very large or small magnitudes take an exponent.
pub fn float_text(x: f64, single: bool) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let magnitude = x.abs();
    let exponent = magnitude != 0.0 && !(1e-5..1e16).contains(&magnitude);
    let text = match (single, exponent) {
        (true, true) => format!("{:e}", x as f32),
        (true, false) => (x as f32).to_string(),
        (false, true) => format!("{x:e}"),
        (false, false) => x.to_string(),
    };
    if exponent || text.contains('.') {
        text
    } else {
        format!("{text}.0")
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// A value as JSON. JSON has no NaN or infinities: they are written as strings, as PostgreSQL's
/// `to_json` does.
fn json_value(v: &Value, ty: DataType) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(x) if x.is_nan() => "\"NaN\"".into(),
        Value::Float(x) if x.is_infinite() && *x > 0.0 => "\"Infinity\"".into(),
        Value::Float(x) if x.is_infinite() => "\"-Infinity\"".into(),
        Value::Float(x) => float_text(*x, ty == DataType::F32),
        Value::Date(d) => json_string(&date::format_days(*d)),
        Value::Timestamp(t) => json_string(&date::format_timestamp(*t)),
        Value::Time(t) => json_string(&date::format_time(*t)),
        Value::Str(s) => json_string(s),
        // Exact in JSON, which has no fixed precision for numbers.
        Value::Decimal(raw, scale) => tessera_storage::decimal::format(*raw, *scale),
        Value::WideDecimal(raw, scale) => tessera_storage::decimal::format(*raw, *scale),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_width::UnicodeWidthStr;

    fn table(columns: &[(&str, DataType)], rows: Vec<Vec<Value>>) -> ResultTable {
        ResultTable {
            columns: columns
                .iter()
                .map(|(name, ty)| (name.to_string(), *ty))
                .collect(),
            rows,
        }
    }

    #[test]
    fn nulls_are_never_spelled_like_strings() {
        let t = table(
            &[("s", DataType::Str), ("n", DataType::I64)],
            vec![
                vec![Value::Null, Value::Null],
                vec![Value::Str("".into()), Value::Int(1)],
                vec![Value::Str("null".into()), Value::Int(2)],
            ],
        );
        assert_eq!(t.to_csv(), "s,n\n,\n\"\",1\nnull,2\n");
        assert_eq!(
            t.to_json(),
            "[\n  {\"s\": null, \"n\": null},\n  {\"s\": \"\", \"n\": 1},\n  {\"s\": \"null\", \"n\": 2}\n]\n"
        );
        assert!(t.to_text().contains("NULL"));
    }

    #[test]
    fn json_keys_keep_column_order() {
        let t = table(
            &[("z", DataType::I32), ("a", DataType::I32)],
            vec![vec![Value::Int(1), Value::Int(2)]],
        );
        assert_eq!(t.to_json(), "[\n  {\"z\": 1, \"a\": 2}\n]\n");
        assert_eq!(
            t.to_format(TextFormat::NdJson),
            "{\"z\": 1, \"a\": 2}\n".to_string()
        );
    }

    #[test]
    fn several_json_results_make_one_array() {
        let t = table(&[("a", DataType::I32)], vec![vec![Value::Int(1)]]);
        let mut output = ScriptOutput::new(Vec::new(), TextFormat::Json, TableLimits::UNLIMITED, 2);
        output.print(&t).unwrap();
        output.print(&t).unwrap();
        let text = String::from_utf8(output.finish().unwrap()).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, serde_json::json!([[{"a": 1}], [{"a": 1}]]));
    }

    #[test]
    fn floats_are_shortest_for_their_type() {
        assert_eq!(float_text(f64::from(0.1f32), true), "0.1");
        assert_eq!(float_text(0.1, false), "0.1");
        assert_eq!(float_text(2.0, false), "2.0");
        assert_eq!(float_text(1e300, false), "1e300");
        assert_eq!(float_text(-2.5e-7, false), "-2.5e-7");
        assert_eq!("1e300".parse::<f64>().ok(), Some(1e300));
        assert_eq!(
            json_value(&Value::Float(f64::NAN), DataType::F64),
            "\"NaN\""
        );
    }

    #[test]
    fn a_long_table_shows_its_first_and_last_rows() {
        let rows = (0..100).map(|i| vec![Value::Int(i)]).collect();
        let t = table(&[("i", DataType::I64)], rows);
        let limits = TableLimits {
            max_rows: Some(4),
            width: None,
        };
        let mut writer = ResultWriter::with_limits(Vec::new(), TextFormat::Table, limits);
        writer.write(&t).unwrap();
        let text = String::from_utf8(writer.finish(&t.columns).unwrap()).unwrap();
        assert_eq!(
            text,
            "  i\n----\n  0\n  1\n  …\n 98\n 99\n(100 rows, 4 shown)\n"
        );
    }

    #[test]
    fn a_streamed_table_keeps_the_first_pieces_widths() {
        let columns = [("n", DataType::I64), ("s", DataType::Str)];
        let first = table(&columns, vec![vec![Value::Int(1), Value::Str("ab".into())]]);
        let second = table(
            &columns,
            vec![vec![Value::Int(12345), Value::Str("abcdefghij".into())]],
        );
        let mut writer = ResultWriter::new(Vec::new(), TextFormat::Table);
        writer.write(&table(&columns, Vec::new())).unwrap();
        writer.write(&first).unwrap();
        writer.write(&second).unwrap();
        let text = String::from_utf8(writer.finish(&first.columns).unwrap()).unwrap();
        assert_eq!(
            text, " n |  s\n---+----\n 1 | ab\n … | a…\n(2 rows)\n",
            "a later cell wider than its column is cut"
        );
    }

    #[test]
    fn an_empty_result_shows_its_header() {
        let columns = [("n", DataType::I64), ("name", DataType::Str)];
        for limits in [TableLimits::UNLIMITED, TableLimits::for_stdout(Some(10))] {
            let mut writer = ResultWriter::with_limits(Vec::new(), TextFormat::Table, limits);
            writer.write(&table(&columns, Vec::new())).unwrap();
            let names: Vec<(String, DataType)> =
                columns.iter().map(|(n, t)| (n.to_string(), *t)).collect();
            let text = String::from_utf8(writer.finish(&names).unwrap()).unwrap();
            assert_eq!(text, " n | name\n---+------\n(0 rows)\n");
        }
    }

    #[test]
    fn a_wide_table_is_cut_to_the_width() {
        let t = table(
            &[("id", DataType::I32), ("text", DataType::Str)],
            vec![vec![Value::Int(7), Value::Str("é".repeat(40).into())]],
        );
        let limits = TableLimits {
            max_rows: None,
            width: Some(20),
        };
        let mut writer = ResultWriter::with_limits(Vec::new(), TextFormat::Table, limits);
        writer.write(&t).unwrap();
        let text = String::from_utf8(writer.finish(&t.columns).unwrap()).unwrap();
        assert!(text.lines().all(|l| l.width() <= 20), "{text}");
        assert!(text.contains('…'));
        assert!(text.contains(" 7 |"), "numbers are never cut: {text}");
    }
}
