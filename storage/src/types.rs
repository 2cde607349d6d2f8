//! Data types, fields and schemas shared by the catalog, the compiler and the runtime.

use std::fmt;

/// The types a column or expression can have.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum DataType {
    Bool,
    I32,
    I64,
    F32,
    F64,
    /// Days since 1970-01-01, stored as `i32`.
    Date,
    /// Dictionary-encoded string: an `i32` code into a sorted dictionary.
    Str,
}

impl DataType {
    pub const ALL: [DataType; 7] = [
        DataType::Bool,
        DataType::I32,
        DataType::I64,
        DataType::F32,
        DataType::F64,
        DataType::Date,
        DataType::Str,
    ];

    /// The name used in scripts (`i32`, `date`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "bool",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::Date => "date",
            DataType::Str => "str",
        }
    }

    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|ty| ty.name() == name)
    }

    /// Bytes one value occupies in memory (codes for strings).
    pub fn width(self) -> usize {
        match self {
            DataType::Bool => 1,
            DataType::I32 | DataType::F32 | DataType::Date | DataType::Str => 4,
            DataType::I64 | DataType::F64 => 8,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, DataType::I32 | DataType::I64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DataType::F32 | DataType::F64)
    }

    pub fn is_numeric(self) -> bool {
        self.is_integer() || self.is_float()
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Field {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
}

impl Field {
    pub fn new(name: impl Into<String>, ty: DataType) -> Field {
        Field {
            name: name.into(),
            ty,
            nullable: false,
        }
    }

    pub fn nullable(mut self, nullable: bool) -> Field {
        self.nullable = nullable;
        self
    }
}

/// The columns of a table, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Schema {
    pub fields: Vec<Field>,
}

impl Schema {
    pub fn new(fields: Vec<Field>) -> Schema {
        Schema { fields }
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.name.as_str())
    }
}

/// SQL's total order of floating-point values (DuckDB's): NaN is larger than every other value
/// and equal to itself, and -0 equals 0. Sorting, comparisons and `min`/`max` all follow it.
pub fn compare_floats(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal),
    }
}

/// One value of any type, used for statistics, literals and decoded results.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Date(i32),
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Date(d) => f.write_str(&crate::date::format_days(*d)),
            Value::Str(s) => f.write_str(s),
        }
    }
}
