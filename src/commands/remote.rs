//! `tessera run --server ADDR`: sends a script to a running `tessera serve` instead of opening a
//! device, through the PostgreSQL protocol's simple query (a client of a few messages: startup,
//! one query, its results in text), and prints the results as a local run does, with the same
//! exit status. A script error comes back with its position and help and is shown against the
//! script like a local one. A server that asks for a password gets `PGPASSWORD` (or
//! `TESSERA_PASSWORD`) through SCRAM-SHA-256.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tessera_grammar::{Diagnostic, DiagnosticKind, Span};
use tessera_runtime::output::{ScriptOutput, TableLimits, TextFormat};
use tessera_runtime::result::ResultTable;
use tessera_storage::{date, DataType, Value};

use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};

use super::compile::Script;
use crate::failure::Failure;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The reading buffer of a connection.
const RECEIVE_BUFFER_BYTES: usize = 64 << 10;

/// Authentication requests (the first word of an `R` message).
const AUTH_OK: i32 = 0;
const AUTH_SASL: i32 = 10;
const AUTH_SASL_CONTINUE: i32 = 11;
const AUTH_SASL_FINAL: i32 = 12;

/// The password a server asking for one gets: `PGPASSWORD`, as psql gives it, else
/// `TESSERA_PASSWORD`, the server's own.
fn client_password() -> Option<String> {
    ["PGPASSWORD", "TESSERA_PASSWORD"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|p| !p.is_empty()))
}

/// Runs `script` on the server at `address`, printing each result in `format`.
pub fn run(
    address: &str,
    script: &Script,
    format: TextFormat,
    limits: TableLimits,
) -> Result<(), Failure> {
    let results = Connection::open(address)?.run(address, script)?;
    print_results(&results, format, limits)
}

/// Prints `results` one after another on standard output; a reader that went away ends the
/// printing quietly.
pub fn print_results(
    results: &[ResultTable],
    format: TextFormat,
    limits: TableLimits,
) -> Result<(), Failure> {
    let stdout = std::io::stdout();
    let out = std::io::BufWriter::new(stdout.lock());
    let mut output = ScriptOutput::new(out, format, limits, results.len());
    let printed = results
        .iter()
        .try_for_each(|table| output.print(table))
        .and_then(|()| output.finish().map(|_| ()));
    match printed {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| Failure::Message(format!("cannot write the output: {e}"))),
    }
}

/// A connection to a server, for any number of scripts in turn.
pub struct Connection {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

/// An ErrorResponse's fields.
#[derive(Debug, Default)]
struct ServerError {
    code: String,
    message: String,
    hint: Option<String>,
    /// A character index into the script, from 1.
    position: Option<usize>,
}

enum QueryError {
    Server(ServerError),
    Io(std::io::Error),
    Protocol(String),
}

impl From<std::io::Error> for QueryError {
    fn from(e: std::io::Error) -> QueryError {
        QueryError::Io(e)
    }
}

impl QueryError {
    fn into_failure(self, address: &str, script: &Script) -> Failure {
        match self {
            QueryError::Server(error) => error.into_failure(script),
            QueryError::Io(e) => {
                Failure::Message(format!("the connection to {address} failed: {e}"))
            }
            QueryError::Protocol(message) => Failure::Message(format!(
                "{address} answered outside the protocol: {message}"
            )),
        }
    }
}

impl Connection {
    /// Runs `script` (at `address`, for messages), returning each of its queries' results.
    pub fn run(&mut self, address: &str, script: &Script) -> Result<Vec<ResultTable>, Failure> {
        self.query(&script.source)
            .map_err(|e| e.into_failure(address, script))
    }

    /// Sends `script` and returns its results as received, their values not yet read: what a
    /// client holds when the server's answer is in (`bench serve` times this).
    pub fn run_received(
        &mut self,
        address: &str,
        script: &Script,
    ) -> Result<Vec<Received>, Failure> {
        self.receive(&script.source)
            .map_err(|e| e.into_failure(address, script))
    }

    pub fn open(address: &str) -> Result<Connection, Failure> {
        use std::net::ToSocketAddrs;
        let cannot = |e: &dyn std::fmt::Display| {
            Failure::Message(format!("cannot connect to the server at {address}: {e}"))
        };
        let socket = address
            .to_socket_addrs()
            .map_err(|e| cannot(&e))?
            .next()
            .ok_or_else(|| cannot(&"the address names no host"))?;
        let stream =
            TcpStream::connect_timeout(&socket, CONNECT_TIMEOUT).map_err(|e| cannot(&e))?;
        let _ = stream.set_nodelay(true);
        // Results of many rows come in many messages: read them 64 KiB at a time.
        let reader = BufReader::with_capacity(
            RECEIVE_BUFFER_BYTES,
            stream.try_clone().map_err(|e| cannot(&e))?,
        );
        let mut connection = Connection {
            reader,
            writer: BufWriter::new(stream),
        };
        connection.start().map_err(|e| match e {
            QueryError::Server(error) => cannot(&error.message),
            QueryError::Io(e) => cannot(&e),
            QueryError::Protocol(message) => cannot(&message),
        })?;
        Ok(connection)
    }

    /// The startup message (protocol 3.0), then messages up to the first ReadyForQuery.
    fn start(&mut self) -> Result<(), QueryError> {
        let mut body = Vec::new();
        body.extend_from_slice(&196_608i32.to_be_bytes());
        for (key, value) in [("user", "tessera"), ("database", "tessera")] {
            body.extend_from_slice(key.as_bytes());
            body.push(0);
            body.extend_from_slice(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        self.send(None, &body)?;
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (kind, body) = self.message()?;
            let code = body
                .get(..4)
                .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]));
            match (kind, code) {
                (b'R', Some(AUTH_OK)) => {}
                (b'R', Some(AUTH_SASL)) => {
                    let offered = body[4..]
                        .split(|b| *b == 0)
                        .any(|name| name == SCRAM_SHA_256.as_bytes());
                    let password = client_password().filter(|_| offered).ok_or_else(|| {
                        QueryError::Protocol(
                            "the server asks for a password: set PGPASSWORD (as for psql)".into(),
                        )
                    })?;
                    let exchange = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
                    let mut initial = SCRAM_SHA_256.as_bytes().to_vec();
                    initial.push(0);
                    initial.extend_from_slice(&(exchange.message().len() as i32).to_be_bytes());
                    initial.extend_from_slice(exchange.message());
                    self.send(Some(b'p'), &initial)?;
                    scram = Some(exchange);
                }
                (b'R', Some(AUTH_SASL_CONTINUE)) => {
                    let exchange = scram
                        .as_mut()
                        .ok_or_else(|| QueryError::Protocol("a SCRAM challenge unasked".into()))?;
                    exchange
                        .update(&body[4..])
                        .map_err(|e| QueryError::Protocol(format!("the server's SCRAM challenge: {e}")))?;
                    let response = exchange.message().to_vec();
                    self.send(Some(b'p'), &response)?;
                }
                (b'R', Some(AUTH_SASL_FINAL)) => {
                    let exchange = scram
                        .as_mut()
                        .ok_or_else(|| QueryError::Protocol("a SCRAM signature unasked".into()))?;
                    // The server proves it knew the password too.
                    exchange.finish(&body[4..]).map_err(|e| {
                        QueryError::Protocol(format!("the server's SCRAM signature: {e}"))
                    })?;
                }
                (b'R', _) => {
                    return Err(QueryError::Protocol(
                        "the server asks for a kind of password `tessera` does not speak (it speaks SCRAM-SHA-256)".into(),
                    ))
                }
                (b'E', _) => return Err(QueryError::Server(parse_error(&body))),
                (b'Z', _) => return Ok(()),
                _ => {}
            }
        }
    }

    /// Sends one message of type `kind` (the startup message alone has none).
    fn send(&mut self, kind: Option<u8>, body: &[u8]) -> Result<(), QueryError> {
        if let Some(kind) = kind {
            self.writer.write_all(&[kind])?;
        }
        self.writer
            .write_all(&(body.len() as i32 + 4).to_be_bytes())?;
        self.writer.write_all(body)?;
        self.writer.flush()?;
        Ok(())
    }

    /// Sends `script` as one simple query; returns each of its results.
    fn query(&mut self, script: &str) -> Result<Vec<ResultTable>, QueryError> {
        self.receive(script)?
            .into_iter()
            .map(Received::decode)
            .collect()
    }

    /// Sends `script` as one simple query; returns each of its results as received, its rows'
    /// bytes kept as they came (as libpq keeps a result until its values are asked for).
    fn receive(&mut self, script: &str) -> Result<Vec<Received>, QueryError> {
        let mut body = script.as_bytes().to_vec();
        body.push(0);
        self.send(Some(b'Q'), &body)?;
        let mut results = Vec::new();
        let mut current: Option<Received> = None;
        let mut failed = None;
        let mut body = Vec::new();
        loop {
            let kind = self.read_kind()?;
            let length = self.read_length()?;
            if let (b'D', Some(result)) = (kind, current.as_mut()) {
                // A row's body is read straight into its result's bytes.
                let start = result.rows.len();
                result.rows.resize(start + length, 0);
                self.reader.read_exact(&mut result.rows[start..])?;
                result.row_ends.push(result.rows.len());
                continue;
            }
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
            match kind {
                b'D' => return Err(QueryError::Protocol("a row before its columns".into())),
                b'T' => {
                    current = Some(Received {
                        columns: parse_columns(&body)?,
                        rows: Vec::new(),
                        row_ends: Vec::new(),
                    })
                }
                b'C' => results.extend(current.take()),
                b'E' => failed = Some(parse_error(&body)),
                b'Z' => break,
                _ => {}
            }
        }
        match failed {
            Some(error) => Err(QueryError::Server(error)),
            None => Ok(results),
        }
    }

    /// One message: its type byte and body.
    fn message(&mut self) -> Result<(u8, Vec<u8>), QueryError> {
        let kind = self.read_kind()?;
        let mut body = vec![0u8; self.read_length()?];
        self.reader.read_exact(&mut body)?;
        Ok((kind, body))
    }

    /// A message's type byte.
    fn read_kind(&mut self) -> Result<u8, QueryError> {
        let mut kind = [0u8; 1];
        self.reader.read_exact(&mut kind)?;
        Ok(kind[0])
    }

    /// The length of the message's body, after its type byte.
    fn read_length(&mut self) -> Result<usize, QueryError> {
        let mut word = [0u8; 4];
        self.reader.read_exact(&mut word)?;
        let length = i32::from_be_bytes(word);
        length
            .checked_sub(4)
            .and_then(|l| usize::try_from(l).ok())
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| QueryError::Protocol(format!("a message of length {length}")))
    }
}

/// One result as the server sent it: its columns, and its DataRow bodies one after another.
pub struct Received {
    columns: Vec<(String, DataType)>,
    rows: Vec<u8>,
    /// Where each row's body ends in `rows`.
    row_ends: Vec<usize>,
}

impl Received {
    /// The result's values, read from their text; `address` and `script` name a failure.
    pub fn into_table(self, address: &str, script: &Script) -> Result<ResultTable, Failure> {
        self.decode().map_err(|e| e.into_failure(address, script))
    }

    fn decode(self) -> Result<ResultTable, QueryError> {
        let mut rows = Vec::with_capacity(self.row_ends.len());
        let mut start = 0;
        for &end in &self.row_ends {
            rows.push(parse_row(&self.rows[start..end], &self.columns)?);
            start = end;
        }
        Ok(ResultTable {
            columns: self.columns,
            rows,
        })
    }
}

/// A RowDescription's columns: their names and types.
fn parse_columns(body: &[u8]) -> Result<Vec<(String, DataType)>, QueryError> {
    let mut at = 0;
    let count = read_i16(body, &mut at)?;
    let mut columns = Vec::with_capacity(count.max(0) as usize);
    for _ in 0..count {
        let name = read_cstring(body, &mut at)?;
        at += 6; // table oid, attribute number
        let oid = read_i32(body, &mut at)?;
        at += 2; // type length
        let modifier = read_i32(body, &mut at)?;
        at += 2; // format
        let ty = match oid {
            // numeric(p, s) packs ((p << 16) | s) + 4; a numeric without one reads as text.
            1700 if modifier >= 4 => {
                let packed = modifier - 4;
                tessera_storage::DecimalType::new((packed >> 16) as u64, (packed & 0xffff) as u64)
                    .map_or(DataType::Str, DataType::Decimal)
            }
            16 => DataType::Bool,
            20 => DataType::I64,
            21 | 23 => DataType::I32,
            700 => DataType::F32,
            701 => DataType::F64,
            1082 => DataType::Date,
            1114 => DataType::Timestamp,
            1083 => DataType::Time,
            _ => DataType::Str,
        };
        columns.push((name, ty));
    }
    Ok(columns)
}

/// A DataRow's values, read from their text form as `columns` types them.
fn parse_row(body: &[u8], columns: &[(String, DataType)]) -> Result<Vec<Value>, QueryError> {
    let mut at = 0;
    let count = read_i16(body, &mut at)?;
    let mut row = Vec::with_capacity(count.max(0) as usize);
    for (_, ty) in columns.iter().take(count.max(0) as usize) {
        let length = read_i32(body, &mut at)?;
        if length < 0 {
            row.push(Value::Null);
            continue;
        }
        let end = at + length as usize;
        let text = body
            .get(at..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| QueryError::Protocol("a value outside its row".into()))?;
        at = end;
        let bad = || QueryError::Protocol(format!("`{text}` is not a value of {ty}"));
        row.push(match ty {
            DataType::Bool => Value::Bool(text == "t" || text == "true"),
            DataType::I32 | DataType::I64 => Value::Int(text.parse().map_err(|_| bad())?),
            DataType::F32 | DataType::F64 => Value::Float(match text {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                _ => text.parse().map_err(|_| bad())?,
            }),
            DataType::Date => Value::Date(date::parse_date(text).ok_or_else(bad)?),
            DataType::Timestamp => Value::Timestamp(date::parse_timestamp(text).ok_or_else(bad)?),
            DataType::Time => Value::Time(date::parse_time(text).ok_or_else(bad)?),
            DataType::Str => Value::Str(text.into()),
            DataType::Decimal(d) if d.is_wide() => Value::WideDecimal(
                tessera_storage::decimal::parse_wide(text, d.scale).ok_or_else(bad)?,
                d.scale,
            ),
            DataType::Decimal(d) => Value::Decimal(
                tessera_storage::decimal::parse(text, d.scale).ok_or_else(bad)?,
                d.scale,
            ),
        });
    }
    Ok(row)
}

fn parse_error(body: &[u8]) -> ServerError {
    let mut error = ServerError::default();
    let mut at = 0;
    while let Some(&field) = body.get(at) {
        at += 1;
        if field == 0 {
            break;
        }
        let Ok(value) = read_cstring(body, &mut at) else {
            break;
        };
        match field {
            b'C' => error.code = value,
            b'M' => error.message = value,
            b'H' => error.hint = Some(value),
            b'P' => error.position = value.parse().ok(),
            _ => {}
        }
    }
    error
}

impl ServerError {
    /// The failure a local run would give: a script error shown against the script (the
    /// position is a character index, from 1), anything else in one line.
    fn into_failure(self, script: &Script) -> Failure {
        let kind = match self.code.as_str() {
            "42601" => DiagnosticKind::Syntax,
            "42703" | "42P01" => DiagnosticKind::Name,
            "42804" => DiagnosticKind::Type,
            "0A000" => DiagnosticKind::Unsupported,
            "22000" => DiagnosticKind::Data,
            _ => return Failure::Message(self.message),
        };
        let Some(position) = self.position else {
            return Failure::Message(self.message);
        };
        let start = script
            .source
            .char_indices()
            .nth(position.saturating_sub(1))
            .map_or(script.source.len(), |(i, _)| i);
        let end = script.source[start..]
            .find(|c: char| c.is_whitespace())
            .map_or(script.source.len(), |n| start + n.max(1));
        // The message carries the kind's title, which the report adds back.
        let message = self
            .message
            .strip_prefix(&format!("{}: ", kind.title()))
            .unwrap_or(&self.message)
            .to_string();
        let mut diagnostic = Diagnostic::new(kind, Span::new(start, end), message);
        if let Some(hint) = self.hint {
            diagnostic = diagnostic.with_hint(hint);
        }
        script.fail(vec![diagnostic])
    }
}

fn read_i16(body: &[u8], at: &mut usize) -> Result<i16, QueryError> {
    let bytes = body
        .get(*at..*at + 2)
        .ok_or_else(|| QueryError::Protocol("a message cut short".into()))?;
    *at += 2;
    Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
}

fn read_i32(body: &[u8], at: &mut usize) -> Result<i32, QueryError> {
    let bytes = body
        .get(*at..*at + 4)
        .ok_or_else(|| QueryError::Protocol("a message cut short".into()))?;
    *at += 4;
    Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

fn read_cstring(body: &[u8], at: &mut usize) -> Result<String, QueryError> {
    let rest = body
        .get(*at..)
        .ok_or_else(|| QueryError::Protocol("a message cut short".into()))?;
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| QueryError::Protocol("a string without its end".into()))?;
    *at += end + 1;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}
