//! The table format's layout, by `comfy-table`, in psql's aligned style: a centred header,
//! columns joined by ` | `, a `-` rule crossed by `+` under the header, numbers to the right.
//!
//! A table fitted to a width narrows its text columns (never below [`MIN_TEXT_WIDTH`]) and
//! keeps numbers whole, since a cut number reads as another number; a cut cell ends in `…`
//! and every row stays on one line. A streamed table is laid out a block of rows at a time: the
//! first block settles the columns' widths and later ones keep them (cutting a wider cell), so
//! the columns line up without holding the whole result.

use comfy_table::{
    Cell, CellAlignment, ColumnConstraint, ContentArrangement, ContentLineStyle, LineStyle, Row,
    Table, TableStyle, Width,
};
use tessera_storage::DataType;

/// psql's aligned format.
const PSQL_STYLE: TableStyle = TableStyle::new()
    .header_lines(ContentLineStyle::none().junction('|'))
    .header_separator(LineStyle::none().fill('-').junction('+'))
    .content_lines(ContentLineStyle::none().junction('|'));

/// The space on either side of a cell, part of a column's width.
const CELL_PADDING: u16 = 2;

/// Text columns are never cut narrower than this many characters.
const MIN_TEXT_WIDTH: u16 = 6;

/// Lays out a result's rows as text lines.
pub(super) struct TableLayout {
    columns: Vec<(String, DataType)>,
    width: Option<usize>,
    /// Each column's width, padding included, once the first piece has settled them.
    settled: Option<Vec<u16>>,
}

impl TableLayout {
    /// A layout for `columns`, fitted to `width` characters when there is a limit.
    pub(super) fn new(columns: &[(String, DataType)], width: Option<usize>) -> TableLayout {
        TableLayout {
            columns: columns.to_vec(),
            width,
            settled: None,
        }
    }

    /// Whether the header has been laid out, and with it the columns' widths.
    pub(super) fn settled(&self) -> bool {
        self.settled.is_some()
    }

    /// The lines of `rows` (each ending in a newline), under the header the first time; later
    /// calls keep the widths the first one chose.
    pub(super) fn render(&mut self, rows: &[Vec<String>]) -> String {
        let mut table = Table::new();
        table.load_style(PSQL_STYLE).set_truncation_indicator("…");
        if self.settled.is_none() {
            let mut header: Row = self
                .columns
                .iter()
                .map(|(name, _)| Cell::new(name).set_alignment(CellAlignment::Center))
                .collect::<Vec<_>>()
                .into();
            // One line, so the rule under it is always the second line.
            header.max_height(1);
            table.set_header(header);
        }
        for cells in rows {
            let mut row = Row::from(cells);
            row.max_height(1);
            table.add_row(row);
        }
        if let (None, Some(width)) = (&self.settled, self.width) {
            table
                .set_width(u16::try_from(width).unwrap_or(u16::MAX))
                .set_content_arrangement(ContentArrangement::Dynamic);
        }
        // Columns exist once the header or the rows name them.
        for (index, (column, (_, ty))) in table.column_iter_mut().zip(&self.columns).enumerate() {
            let constraint = match &self.settled {
                Some(widths) => widths
                    .get(index)
                    .map(|&w| ColumnConstraint::Absolute(Width::Fixed(w))),
                None if self.width.is_none() => None,
                None if ty.is_numeric() => Some(ColumnConstraint::ContentWidth),
                None => Some(ColumnConstraint::LowerBoundary(Width::Fixed(
                    MIN_TEXT_WIDTH + CELL_PADDING,
                ))),
            };
            if let Some(constraint) = constraint {
                column.set_constraint(constraint);
            }
            if ty.is_numeric() {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        let mut text = String::new();
        for line in table.lines() {
            text.push_str(line.trim_end());
            text.push('\n');
        }
        if self.settled.is_none() {
            self.settled = Some(rule_widths(&text, self.columns.len()));
        }
        text
    }
}

/// The columns' widths as the rule under the header shows them: the runs of `-` between `+`.
/// (A table with no columns, or none shown yet, settles on its content's widths next time.)
fn rule_widths(text: &str, columns: usize) -> Vec<u16> {
    let rule = text
        .lines()
        .nth(1)
        .filter(|line| line.starts_with('-'))
        .unwrap_or("");
    let widths: Vec<u16> = rule
        .split('+')
        .map(|run| u16::try_from(run.chars().count()).unwrap_or(u16::MAX))
        .collect();
    if widths.len() == columns {
        widths
    } else {
        Vec::new()
    }
}
