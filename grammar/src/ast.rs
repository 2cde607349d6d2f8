//! The abstract syntax tree of a Tessera script, exactly as written. Every node carries the
//! `Span` of the source it came from. Names are not resolved here and types are not known:
//! that is the compiler's job.

use crate::span::Span;

/// A name as written, with where it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole script: table declarations, `let` bindings and queries, in source order.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    pub items: Vec<Item>,
}

impl Script {
    /// Whether the script declares tables of its own (which changes how the data is read).
    pub fn declares_tables(&self) -> bool {
        self.items.iter().any(|item| matches!(item, Item::Table(_)))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Table(TableDecl),
    Let(LetBinding),
    Query(Pipeline),
}

/// `table lineorder { lo_orderkey: i32, lo_comment: str?, ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct TableDecl {
    pub name: Ident,
    pub columns: Vec<ColumnDecl>,
    pub span: Span,
}

/// `name: type`, or `name: type?` for a column that may hold nulls.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnDecl {
    pub name: Ident,
    pub ty: TypeName,
    pub nullable: bool,
    pub span: Span,
}

/// A type as written: a name (`i32`, `date`, ...), with arguments for `decimal(15, 2)`.
/// Resolved by the compiler, since `date` is also a table name in SSB and so cannot be a
/// keyword.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeName {
    pub name: Ident,
    pub args: Vec<i64>,
    pub span: Span,
}

impl std::fmt::Display for TypeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name.name)?;
        if !self.args.is_empty() {
            let args: Vec<String> = self.args.iter().map(i64::to_string).collect();
            write!(f, "({})", args.join(", "))?;
        }
        Ok(())
    }
}

/// `let name = pipeline`
#[derive(Clone, Debug, PartialEq)]
pub struct LetBinding {
    pub name: Ident,
    pub pipeline: Pipeline,
    pub span: Span,
}

/// `from relation | stage | stage ...`
#[derive(Clone, Debug, PartialEq)]
pub struct Pipeline {
    pub from: Relation,
    pub stages: Vec<Stage>,
    pub span: Span,
}

/// Where rows come from: a table or `let` name, or a parenthesized pipeline, optionally
/// renamed with `as alias` so its columns can be qualified as `alias.column`.
#[derive(Clone, Debug, PartialEq)]
pub struct Relation {
    pub source: RelationSource,
    pub alias: Option<Ident>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RelationSource {
    Named(Ident),
    Pipeline(Box<Pipeline>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub kind: StageKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StageKind {
    /// `where predicate`
    Where(Expr),
    /// `select a, b, c = a * 2`: exactly these columns, in this order.
    Select(Vec<SelectItem>),
    /// `derive c = a * 2, d = ...`: all columns so far, plus these.
    Derive(Vec<Assignment>),
    /// `join [semi|anti|left] relation on a == b [and c == d ...]`
    Join {
        kind: JoinKind,
        relation: Relation,
        on: Expr,
    },
    /// `group k1, k2 { name = agg(expr), ... }`
    Group {
        keys: Vec<SelectItem>,
        aggregates: Vec<Assignment>,
    },
    /// `aggregate { name = agg(expr), ... }`: one row over the whole input.
    Aggregate(Vec<Assignment>),
    /// `sort a, b desc`
    Sort(Vec<SortKey>),
    /// `take n`
    Take(Literal),
    /// `distinct`
    Distinct,
    /// `union [all] relation`, `intersect relation`, `except relation`
    SetOp {
        op: SetOp,
        all: bool,
        relation: Relation,
    },
    /// `product relation`: every pair of rows.
    Product(Relation),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JoinKind {
    Inner,
    Semi,
    Anti,
    Left,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetOp {
    Union,
    Intersect,
    Except,
}

/// One output column of `select` or a `group` key: `expr`, or `name = expr`.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectItem {
    pub name: Option<Ident>,
    pub expr: Expr,
    pub span: Span,
}

/// `name = expr`
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub name: Ident,
    pub expr: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SortKey {
    pub expr: Expr,
    pub descending: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Literal(Literal),
    /// `name` or `qualifier.name`
    Column {
        qualifier: Option<Ident>,
        name: Ident,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `expr [not] between low and high` (inclusive on both ends)
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    /// `expr [not] in (a, b, c)`
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    /// `expr [not] like pattern`: `%` matches any run of characters, `_` any one.
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
    },
    /// `expr is [not] null`
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    /// `case when c1 then v1 when c2 then v2 else v3 end`
    Case {
        branches: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    /// `expr as type`
    Cast {
        expr: Box<Expr>,
        ty: TypeName,
    },
    /// `function(args)`; aggregates (`sum`, `count`, ...) are calls too, and
    /// `count(distinct x)` counts different values.
    Call {
        function: Ident,
        args: Vec<Expr>,
        distinct: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Literal {
    pub value: LiteralValue,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LiteralValue {
    Int(i64),
    Float(f64),
    Str(String),
    /// A date `@1994-01-31`, timestamp `@1994-01-31T08:30:00` or time `@08:30:00`, as
    /// written after the `@`; the compiler checks and converts it.
    Temporal(String),
    /// `90 days`, `3 months`, `1 year`: added to or subtracted from a date.
    Interval {
        count: i64,
        unit: IntervalUnit,
    },
    Bool(bool),
    Null,
}

/// What an interval counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntervalUnit {
    Day,
    Month,
    Year,
}

impl IntervalUnit {
    /// The unit as written after a count of one (`1 day`); more take an `s`.
    pub fn name(self) -> &'static str {
        match self {
            IntervalUnit::Day => "day",
            IntervalUnit::Month => "month",
            IntervalUnit::Year => "year",
        }
    }

    /// The unit named `word` (`day` or `days`, ...).
    pub fn from_word(word: &str) -> Option<IntervalUnit> {
        [IntervalUnit::Day, IntervalUnit::Month, IntervalUnit::Year]
            .into_iter()
            .find(|unit| word == unit.name() || word.strip_suffix('s') == Some(unit.name()))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem
        )
    }

    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }
}

impl UnaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Not => "not",
        }
    }
}
