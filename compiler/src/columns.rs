//! The columns of one query: every column a plan node produces gets a `ColumnId` once, during
//! analysis, and keeps it through every later stage. Passes move and drop columns without
//! renumbering anything.

use std::fmt;

use tessera_storage::DataType;

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct ColumnId(pub u32);

impl fmt::Display for ColumnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A column of a stored table.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct BaseColumn {
    pub table: String,
    pub column: String,
}

impl BaseColumn {
    pub fn new(table: impl Into<String>, column: impl Into<String>) -> BaseColumn {
        BaseColumn {
            table: table.into(),
            column: column.into(),
        }
    }
}

impl fmt::Display for BaseColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.table, self.column)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    /// The stored column whose values (or, for strings, whose dictionary) this column carries:
    /// set for scanned columns and for plain renames of them.
    pub origin: Option<BaseColumn>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    infos: Vec<ColumnInfo>,
}

impl Columns {
    pub fn add(&mut self, info: ColumnInfo) -> ColumnId {
        self.infos.push(info);
        ColumnId(self.infos.len() as u32 - 1)
    }

    pub fn get(&self, id: ColumnId) -> &ColumnInfo {
        &self.infos[id.0 as usize]
    }

    pub fn len(&self) -> usize {
        self.infos.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &ColumnInfo> {
        self.infos.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
}

impl Columns {
    /// Marks a column as possibly null (the right side of a `left` join).
    pub fn set_nullable(&mut self, id: ColumnId) {
        self.infos[id.0 as usize].nullable = true;
    }
}
