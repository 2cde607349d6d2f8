//! Data types, fields and schemas shared by the catalog, the compiler and the runtime.

use std::fmt;
use std::sync::Arc;

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
    /// Microseconds since 1970-01-01 00:00:00, stored as `i64` (`tessera_storage::date`).
    Timestamp,
    /// Microseconds since midnight, stored as `i64`.
    Time,
    /// Dictionary-encoded string: an `i32` code into a sorted dictionary.
    Str,
    /// An exact decimal number: a count of `10^-scale` units, `i64` up to 18 digits and `i128`
    /// beyond ([`DecimalType::is_wide`]).
    Decimal(DecimalType),
}

/// The precision (digits in all) and scale (digits after the point) of a decimal, as SQL's
/// `decimal(p, s)`. Values are integers counting units of `10^-scale`: 64-bit up to
/// [`DecimalType::NARROW_PRECISION`] digits, 128-bit beyond, up to
/// [`DecimalType::MAX_PRECISION`] digits (DuckDB's and Parquet's `DECIMAL(38, s)`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct DecimalType {
    pub precision: u8,
    pub scale: u8,
}

impl DecimalType {
    /// The most digits a decimal holds: those of a 128-bit integer in full.
    pub const MAX_PRECISION: u8 = 38;

    /// The most digits a 64-bit integer holds in full: decimals up to this are 64-bit.
    pub const NARROW_PRECISION: u8 = 18;

    /// `decimal(precision, scale)`, or why it cannot be one.
    pub fn new(precision: u64, scale: u64) -> Result<DecimalType, String> {
        let max = u64::from(Self::MAX_PRECISION);
        if precision == 0 || precision > max {
            return Err(format!(
                "a decimal's precision is 1 to {max} digits, not {precision}"
            ));
        }
        if scale > precision {
            return Err(format!(
                "a decimal's scale ({scale}) cannot exceed its precision ({precision})"
            ));
        }
        Ok(DecimalType {
            precision: precision as u8,
            scale: scale as u8,
        })
    }

    /// The 64-bit decimal of `scale` with the most digits; `None` beyond them.
    pub fn widest_narrow(scale: u32) -> Option<DecimalType> {
        DecimalType::new(u64::from(Self::NARROW_PRECISION), u64::from(scale)).ok()
    }

    /// The decimal of `scale` with the most digits (38); `None` beyond them.
    pub fn widest(scale: u32) -> Option<DecimalType> {
        DecimalType::new(u64::from(Self::MAX_PRECISION), u64::from(scale)).ok()
    }

    /// Whether values are 128-bit: more than [`DecimalType::NARROW_PRECISION`] digits.
    pub fn is_wide(self) -> bool {
        self.precision > Self::NARROW_PRECISION
    }

    /// `10^scale`: the raw value of 1.
    pub fn unit(self) -> i64 {
        10i64.pow(u32::from(self.scale))
    }
}

impl fmt::Display for DecimalType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "decimal({}, {})", self.precision, self.scale)
    }
}

impl DataType {
    /// Every type without parameters (a decimal has its precision and scale).
    pub const ALL: [DataType; 9] = [
        DataType::Bool,
        DataType::I32,
        DataType::I64,
        DataType::F32,
        DataType::F64,
        DataType::Date,
        DataType::Timestamp,
        DataType::Time,
        DataType::Str,
    ];

    /// The name used in scripts (`i32`, `date`, `decimal(15, 2)`, ...).
    pub fn name(self) -> String {
        self.to_string()
    }

    /// The name of a type without parameters; `decimal` for decimals.
    pub fn base_name(self) -> &'static str {
        match self {
            DataType::Bool => "bool",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::Date => "date",
            DataType::Timestamp => "timestamp",
            DataType::Time => "time",
            DataType::Str => "str",
            DataType::Decimal(_) => "decimal",
        }
    }

    /// A type without parameters by its name (`decimal` needs its precision and scale).
    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|ty| ty.base_name() == name)
    }

    /// Bytes one value occupies in memory (codes for strings).
    pub fn width(self) -> usize {
        match self {
            DataType::Decimal(decimal) if decimal.is_wide() => 16,
            DataType::Bool => 1,
            DataType::I32 | DataType::F32 | DataType::Date | DataType::Str => 4,
            DataType::I64
            | DataType::F64
            | DataType::Decimal(_)
            | DataType::Timestamp
            | DataType::Time => 8,
        }
    }

    /// The type of the values kernels and files hold: `i64` for a decimal of up to 18 digits
    /// (its raw units), a timestamp and a time (microseconds), the type itself otherwise (a
    /// wide decimal is its own 128-bit type).
    pub fn physical(self) -> DataType {
        match self {
            DataType::Decimal(decimal) if decimal.is_wide() => self,
            DataType::Decimal(_) | DataType::Timestamp | DataType::Time => DataType::I64,
            other => other,
        }
    }

    /// The decimal's precision and scale, for a decimal.
    pub fn decimal(self) -> Option<DecimalType> {
        match self {
            DataType::Decimal(decimal) => Some(decimal),
            _ => None,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, DataType::I32 | DataType::I64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DataType::F32 | DataType::F64)
    }

    pub fn is_numeric(self) -> bool {
        self.is_integer() || self.is_float() || self.is_decimal()
    }

    pub fn is_decimal(self) -> bool {
        matches!(self, DataType::Decimal(_))
    }

    /// Whether this is a decimal of more than 18 digits, whose values are 128-bit.
    pub fn is_wide_decimal(self) -> bool {
        matches!(self, DataType::Decimal(decimal) if decimal.is_wide())
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Decimal(decimal) => decimal.fmt(f),
            other => f.write_str(other.base_name()),
        }
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
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(i64),
    /// Microseconds since midnight.
    Time(i64),
    /// Text, shared: a result's rows share one copy of each dictionary entry they hold.
    Str(Arc<str>),
    /// A decimal of up to 18 digits: its raw value (units of `10^-scale`) and its scale.
    Decimal(i64, u8),
    /// A decimal of more than 18 digits (up to 38): its raw value and its scale.
    WideDecimal(i128, u8),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Date(d) => f.write_str(&crate::date::format_days(*d)),
            Value::Timestamp(t) => f.write_str(&crate::date::format_timestamp(*t)),
            Value::Time(t) => f.write_str(&crate::date::format_time(*t)),
            Value::Str(s) => f.write_str(s),
            Value::Decimal(raw, scale) => f.write_str(&crate::decimal::format(*raw, *scale)),
            Value::WideDecimal(raw, scale) => f.write_str(&crate::decimal::format(*raw, *scale)),
        }
    }
}
