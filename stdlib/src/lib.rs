//! Tessera's standard library: the signatures (name, arity, types) of the built-in scalar
//! functions and aggregates, what each scalar operation means on values ([`scalar`]), and
//! standard schemas written in the language (`ssb.tq`).
//!
//! It says what a function accepts, returns and means; how it is computed in a kernel is the
//! code generator's business.

use std::fmt;

pub mod scalar;

use tessera_storage::{DataType, DecimalType};

/// The Star Schema Benchmark's tables, as `table` declarations (the schema of `.tbl` files).
pub const SSB_SCHEMA: &str = include_str!("../ssb.tq");

/// A built-in scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Function {
    Abs,
    Sqrt,
    Exp,
    Ln,
    Sigmoid,
    Year,
    Month,
    Day,
}

/// A built-in aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Aggregate {
    Sum,
    Count,
    Min,
    Max,
    Avg,
}

/// Why a call does not type-check, phrased for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureError {
    Arity {
        expected: &'static str,
        found: usize,
    },
    ArgumentType {
        index: usize,
        expected: &'static str,
        found: DataType,
    },
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureError::Arity { expected, found } => {
                write!(f, "takes {expected}, but {found} given")
            }
            SignatureError::ArgumentType {
                expected, found, ..
            } => {
                write!(f, "expects {expected}, found `{found}`")
            }
        }
    }
}

impl Function {
    pub const ALL: [Function; 8] = [
        Function::Abs,
        Function::Sqrt,
        Function::Exp,
        Function::Ln,
        Function::Sigmoid,
        Function::Year,
        Function::Month,
        Function::Day,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Function::Abs => "abs",
            Function::Sqrt => "sqrt",
            Function::Exp => "exp",
            Function::Ln => "ln",
            Function::Sigmoid => "sigmoid",
            Function::Year => "year",
            Function::Month => "month",
            Function::Day => "day",
        }
    }

    pub fn from_name(name: &str) -> Option<Function> {
        Function::ALL.into_iter().find(|f| f.name() == name)
    }

    /// One line for `--help`-style listings and hints.
    pub fn signature(self) -> &'static str {
        match self {
            Function::Abs => "abs(number) -> same type",
            Function::Sqrt => "sqrt(number) -> float",
            Function::Exp => "exp(number) -> float",
            Function::Ln => "ln(number) -> float",
            Function::Sigmoid => "sigmoid(number) -> float, 1 / (1 + exp(-x))",
            Function::Year => "year(date) -> i32",
            Function::Month => "month(date) -> i32, 1..12",
            Function::Day => "day(date) -> i32, 1..31",
        }
    }

    /// The result type for these argument types. Floating functions keep `f32` as `f32` and
    /// compute integers in `f64`.
    pub fn return_type(self, args: &[DataType]) -> Result<DataType, SignatureError> {
        let [arg] = args else {
            return Err(SignatureError::Arity {
                expected: "one argument",
                found: args.len(),
            });
        };
        let arg = *arg;
        match self {
            Function::Abs if arg.is_numeric() => Ok(arg),
            Function::Sqrt | Function::Exp | Function::Ln | Function::Sigmoid
                if arg.is_numeric() =>
            {
                Ok(if arg == DataType::F32 {
                    DataType::F32
                } else {
                    DataType::F64
                })
            }
            Function::Year | Function::Month | Function::Day if arg == DataType::Date => {
                Ok(DataType::I32)
            }
            Function::Year | Function::Month | Function::Day => Err(SignatureError::ArgumentType {
                index: 0,
                expected: "a `date` or `timestamp`",
                found: arg,
            }),
            _ => Err(SignatureError::ArgumentType {
                index: 0,
                expected: "a number",
                found: arg,
            }),
        }
    }
}

impl Aggregate {
    pub const ALL: [Aggregate; 5] = [
        Aggregate::Sum,
        Aggregate::Count,
        Aggregate::Min,
        Aggregate::Max,
        Aggregate::Avg,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Sum => "sum",
            Aggregate::Count => "count",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
            Aggregate::Avg => "avg",
        }
    }

    pub fn from_name(name: &str) -> Option<Aggregate> {
        Aggregate::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The result type over an argument of type `arg` (`None`: `count()` with no argument).
    /// Sums of integers are 64-bit, of decimals 18 digits at their scale (38 for
    /// decimals of more than 18); `min` and `max` of
    /// strings work on the sorted dictionary.
    pub fn return_type(self, arg: Option<DataType>) -> Result<DataType, SignatureError> {
        match (self, arg) {
            (Aggregate::Count, _) => Ok(DataType::I64),
            (_, None) => Err(SignatureError::Arity {
                expected: "one argument",
                found: 0,
            }),
            (Aggregate::Sum, Some(ty)) if ty.is_integer() => Ok(DataType::I64),
            (Aggregate::Sum, Some(ty)) if ty.is_float() => Ok(DataType::F64),
            // A decimal sums exactly, at its scale, with all the digits of its width: 18 for
            // 64-bit values, 38 for 128-bit ones.
            (Aggregate::Sum, Some(DataType::Decimal(decimal))) if decimal.is_wide() => Ok(
                DataType::Decimal(DecimalType::widest(u32::from(decimal.scale)).unwrap_or(decimal)),
            ),
            (Aggregate::Sum, Some(DataType::Decimal(decimal))) => Ok(DataType::Decimal(
                DecimalType::widest_narrow(u32::from(decimal.scale)).unwrap_or(decimal),
            )),
            (Aggregate::Avg, Some(ty)) if ty.is_numeric() => Ok(DataType::F64),
            (Aggregate::Min | Aggregate::Max, Some(ty)) if ty != DataType::Bool => Ok(ty),
            (Aggregate::Min | Aggregate::Max, Some(ty)) => Err(SignatureError::ArgumentType {
                index: 0,
                expected: "a number, date or string",
                found: ty,
            }),
            (_, Some(ty)) => Err(SignatureError::ArgumentType {
                index: 0,
                expected: "a number",
                found: ty,
            }),
        }
    }

    /// Over no rows, `count` is 0 and every other aggregate is null.
    pub fn is_null_on_empty(self) -> bool {
        self != Aggregate::Count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_integers_are_64_bit() {
        assert_eq!(
            Aggregate::Sum.return_type(Some(DataType::I32)),
            Ok(DataType::I64)
        );
        assert_eq!(
            Aggregate::Sum.return_type(Some(DataType::F32)),
            Ok(DataType::F64)
        );
        assert!(Aggregate::Sum.return_type(Some(DataType::Str)).is_err());
        assert_eq!(Aggregate::Count.return_type(None), Ok(DataType::I64));
        assert_eq!(
            Aggregate::Max.return_type(Some(DataType::Str)),
            Ok(DataType::Str)
        );
    }

    #[test]
    fn function_signatures() {
        assert_eq!(
            Function::Sqrt.return_type(&[DataType::I32]),
            Ok(DataType::F64)
        );
        assert_eq!(
            Function::Sigmoid.return_type(&[DataType::F32]),
            Ok(DataType::F32)
        );
        assert_eq!(
            Function::Abs.return_type(&[DataType::I64]),
            Ok(DataType::I64)
        );
        assert_eq!(
            Function::Year.return_type(&[DataType::Date]),
            Ok(DataType::I32)
        );
        assert!(Function::Year.return_type(&[DataType::I32]).is_err());
        assert!(Function::Ln.return_type(&[]).is_err());
        assert_eq!(Function::from_name("sigmoid"), Some(Function::Sigmoid));
    }
}
