//! `tessera serve`: the resident engine (`crate::engine`) behind the PostgreSQL wire protocol, so
//! that psql, psycopg, JDBC and BI tools are its clients. A query's text is a Tessera script;
//! each of its queries comes back as typed columns through the simple or the extended protocol,
//! and a failing script as an ErrorResponse with an SQLSTATE, the message, the position in the
//! script and the diagnostic's help as its hint, which harms neither the server nor other
//! sessions. Queries run on worker threads and take the device one at a time, in order, giving
//! it up before their results are decoded. A client's cancel request (psql's Ctrl-C) answers
//! its running query at once with SQLSTATE 57014 and stops the query's work: in a running
//! kernel (`exec::Cancel`), before the next kernel, or at the next piece of result. `--timing`
//! prints each script's time waiting for the device and on it.
//!
//! It listens on loopback by default and accepts any user and database there. With a password
//! (`TESSERA_PASSWORD`, or the first line of `--password-file`: the password itself or a
//! PostgreSQL SCRAM verifier), every client proves it knows it through SCRAM-SHA-256, whatever
//! user name it gives. Listening on another address needs a password, or `--trust`, which says
//! that any client that reaches it may query the data.

use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, BytesMut};
use futures::{stream, Sink};
use pgwire::api::auth::mechanism::{AuthMechanism, AuthState};
use pgwire::api::auth::{
    protocol_negotiation, save_startup_parameters_to_metadata, AuthDriver, AuthOutcome,
    DefaultServerParameterProvider, StartupHandler,
};
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    DescribePortalResponse, DescribeStatementResponse, FieldFormat, FieldInfo, QueryResponse,
    Response, Tag,
};
use pgwire::api::stmt::{NoopQueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionManager, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;
use pgwire::messages::startup::{Authentication, PasswordMessageFamily};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::types::format::FormatOptions;
use pgwire::types::ToSqlText;
use postgres_types::{IsNull, ToSql};
use rayon::prelude::*;
use tessera_grammar::DiagnosticKind;
use tessera_runtime::result::{Field, RowWriter, WriteRange};
use tessera_storage::{DataType, DecimalType, Value};

use crate::commands::scram::{self, Credential, Exchange};
use crate::engine::{Columns, Engine, EngineOptions};
use crate::failure::Failure;
use crate::ServeArgs;
use tessera_runtime::exec::RuntimeError;

pub fn run(args: &ServeArgs) -> Result<(), Failure> {
    let listen = args.listen;
    let credential = credential(args)?;
    if !listen.ip().is_loopback() && credential.is_none() && !args.trust {
        return Err(Failure::Message(format!(
            "listening on {listen} lets other machines connect: set a password (TESSERA_PASSWORD, or --password-file FILE), listen on loopback (the default, 127.0.0.1), or pass --trust to let any client that reaches {listen} query the data"
        )));
    }
    let engine = Arc::new(Engine::open(EngineOptions {
        data: args.data.clone(),
        device: args.device,
        compress: args.compress,
        partition_joins: args.partition_joins,
        gpu_memory: args.gpu_memory,
        timing: args.timing,
        cache: true,
    })?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Message(format!("cannot start the server's threads: {e}")))?;
    runtime.block_on(serve(engine, listen, credential))
}

/// The password clients must prove they know: `--password-file`'s first line, else
/// `TESSERA_PASSWORD`; either the password or a PostgreSQL verifier (`SCRAM-SHA-256$…`).
fn credential(args: &ServeArgs) -> Result<Option<Credential>, Failure> {
    let (text, source) = match &args.password_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::Message(format!(
                    "cannot read the password file {}: {e}",
                    path.display()
                ))
            })?;
            let line = text.lines().next().unwrap_or_default().to_string();
            (line, format!("the password file {}", path.display()))
        }
        None => match std::env::var("TESSERA_PASSWORD") {
            Ok(text) => (text, "TESSERA_PASSWORD".to_string()),
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(Failure::Message("TESSERA_PASSWORD is not UTF-8".into()))
            }
        },
    };
    if text.is_empty() {
        return Err(Failure::Message(format!(
            "{source} holds an empty password"
        )));
    }
    if text.starts_with("SCRAM-SHA-256$") {
        return Credential::from_verifier(&text).map(Some).ok_or_else(|| {
            Failure::Message(format!(
                "{source} holds a malformed SCRAM verifier (expected SCRAM-SHA-256$<iterations>:<salt>$<stored key>:<server key>)"
            ))
        });
    }
    Credential::from_password(&text)
        .map(Some)
        .map_err(|e| Failure::Message(format!("cannot salt the password: {e}")))
}

async fn serve(
    engine: Arc<Engine>,
    listen: SocketAddr,
    credential: Option<Credential>,
) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::Message(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener.local_addr().unwrap_or(listen);
    eprintln!(
        "serving {} on {} at postgresql://{bound} (psql -h {} -p {})",
        engine.data().display(),
        engine.device_name,
        bound.ip(),
        bound.port()
    );
    let connections = Arc::new(ConnectionManager::new());
    let handlers = Arc::new(Handlers {
        tessera: Arc::new(Tessera {
            engine,
            parser: Arc::new(NoopQueryParser::new()),
            connections: Arc::clone(&connections),
        }),
        startup: Arc::new(Startup {
            driver: AuthDriver::new(Arc::new(DefaultServerParameterProvider::default()))
                .with_connection_manager(connections),
            credential,
        }),
    });
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::Message(format!("cannot watch for signals: {e}")))?;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A failed accept (a client gone before it was taken) ends nothing.
                if let Ok((socket, _)) = accepted {
                    let handlers = Arc::clone(&handlers);
                    tokio::spawn(async move {
                        // A client's broken connection is its own business.
                        let _ = pgwire::tokio::process_socket(socket, None, handlers).await;
                    });
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        }
    }
    eprintln!("stopped");
    Ok(())
}

struct Handlers {
    tessera: Arc<Tessera>,
    startup: Arc<Startup>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.tessera)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.tessera)
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::clone(&self.startup)
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::new(DefaultCancelHandler::new(Arc::clone(
            &self.tessera.connections,
        )))
    }
}

struct Tessera {
    engine: Arc<Engine>,
    parser: Arc<NoopQueryParser>,
    /// Every connection's process id and secret key, which a cancel request names.
    connections: Arc<ConnectionManager>,
}

/// A connection's start: the protocol version and parameters, then, with a password, the SCRAM
/// exchange; each connection is registered for cancel requests.
struct Startup {
    driver: AuthDriver<Arc<DefaultServerParameterProvider>>,
    credential: Option<Credential>,
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let outcome = match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                let mechanism: Box<dyn AuthMechanism> = match &self.credential {
                    Some(credential) => Box::new(Scram(Exchange::new(credential.clone()))),
                    None => Box::new(Trust),
                };
                self.driver.begin_authentication(client, mechanism).await?
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                self.driver.advance_authentication(client, message).await?
            }
            _ => return Ok(()),
        };
        if let AuthOutcome::Authenticated { final_message, .. } = outcome {
            self.driver
                .complete_authentication(client, final_message)
                .await?;
        }
        Ok(())
    }
}

/// No password: every client is in.
struct Trust;

#[async_trait]
impl AuthMechanism for Trust {
    async fn begin(&mut self, _client: &(dyn ClientInfo + Send + Sync)) -> PgWireResult<AuthState> {
        Ok(AuthState::Ok {
            final_message: None,
            identity: None,
        })
    }

    async fn next(
        &mut self,
        _client: &(dyn ClientInfo + Send + Sync),
        _message: PasswordMessageFamily,
    ) -> PgWireResult<AuthState> {
        Err(PgWireError::NoAuthenticationInProgress)
    }
}

/// A client's SCRAM-SHA-256 exchange.
struct Scram(Exchange);

#[async_trait]
impl AuthMechanism for Scram {
    async fn begin(&mut self, _client: &(dyn ClientInfo + Send + Sync)) -> PgWireResult<AuthState> {
        Ok(AuthState::InProgress(Authentication::SASL(vec![
            scram::MECHANISM.to_string(),
        ])))
    }

    async fn next(
        &mut self,
        client: &(dyn ClientInfo + Send + Sync),
        message: PasswordMessageFamily,
    ) -> PgWireResult<AuthState> {
        let user = || {
            client
                .metadata()
                .get(pgwire::api::METADATA_USER)
                .cloned()
                .unwrap_or_default()
        };
        // Both end the connection (FATAL), in PostgreSQL's words: invalid_password, or
        // protocol_violation.
        let refused = |error: scram::ScramError| {
            let (code, message) = match error {
                scram::ScramError::WrongPassword => (
                    "28P01",
                    format!("password authentication failed for user \"{}\"", user()),
                ),
                other => ("08P01", other.to_string()),
            };
            PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".to_owned(),
                code.to_owned(),
                message,
            )))
        };
        // The first message names the mechanism; the second carries the proof.
        match message {
            PasswordMessageFamily::SASLResponse(_) => {}
            PasswordMessageFamily::Raw(_) | PasswordMessageFamily::SASLInitialResponse(_)
                if !self.0.challenged() =>
            {
                let first = message.into_sasl_initial_response()?;
                let data = first.data.unwrap_or_default();
                let challenge = self
                    .0
                    .challenge(&first.auth_method, &data)
                    .map_err(refused)?;
                return Ok(AuthState::InProgress(Authentication::SASLContinue(
                    challenge.into_bytes().into(),
                )));
            }
            _ => {}
        }
        let response = message.into_sasl_response()?;
        let signature = self.0.verify(&response.data).map_err(refused)?;
        Ok(AuthState::Ok {
            final_message: Some(Authentication::SASLFinal(signature.into_bytes().into())),
            identity: None,
        })
    }
}

/// Set when dropped, unless disarmed: pgwire answers a cancel request by dropping the future
/// of the query it cancels (with SQLSTATE 57014), and this tells the worker thread running the
/// query, which nothing drops, to stop.
struct CancelOnDrop(Option<Arc<AtomicBool>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

impl Tessera {
    /// Runs `script` on a worker thread (the device is taken in turn there), which also writes
    /// each result's rows as DataRow messages in `format` (only the last result's where
    /// `last_only`, though every result is decoded, so that its host steps' errors are
    /// answered), so the connection's task only sends bytes. The worker stops at its next
    /// check when the query is cancelled.
    async fn run(
        &self,
        script: &str,
        format: Format,
        last_only: bool,
    ) -> PgWireResult<Vec<EncodedResult>> {
        let engine = Arc::clone(&self.engine);
        let text = script.to_string();
        let cancelled = Arc::new(AtomicBool::new(false));
        let mut guard = CancelOnDrop(Some(Arc::clone(&cancelled)));
        let finished = tokio::task::spawn_blocking(move || {
            // A failure to write a value as PostgreSQL's (none is expected) stops the writing
            // with a stand-in error and is answered as itself.
            let mut unwritable = None;
            let written = engine.run_then(
                "query",
                &text,
                &cancelled,
                |mut outcome, query, catalog, last| {
                    if last_only && !last {
                        outcome.decode(query, catalog)?;
                        return Ok((None, 0));
                    }
                    let columns = query.result.columns();
                    let mut writer = MessageWriter::new(&columns, &format, &cancelled)
                        .map_err(|e| stand_in(&mut unwritable, e))?;
                    let written = outcome.write(query, catalog, &mut writer);
                    if let Some(e) = writer.failed.take() {
                        return Err(stand_in(&mut unwritable, e));
                    }
                    Ok((Some(writer.finish()), written?))
                },
            );
            match (written, unwritable) {
                (_, Some(error)) => Err(error),
                (Ok(results), None) => Ok(results.into_iter().flatten().collect()),
                (Err(failure), None) => Err(error_response(failure, &text)),
            }
        })
        .await;
        guard.0 = None;
        finished.map_err(|e| internal(&format!("a query's thread failed: {e}")))?
    }

    /// The columns of `script`'s queries, compiling it on a worker thread.
    async fn describe(&self, script: &str) -> PgWireResult<Vec<Columns>> {
        let engine = Arc::clone(&self.engine);
        let text = script.to_string();
        tokio::task::spawn_blocking(move || engine.describe("query", &text))
            .await
            .map_err(|e| internal(&format!("a query's thread failed: {e}")))?
            .map_err(|failure| error_response(failure, script))
    }
}

#[async_trait]
impl SimpleQueryHandler for Tessera {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(response) = session_command(query) {
            return Ok(vec![response]);
        }
        let results = self.run(query, Format::UnifiedText, false).await?;
        Ok(results.into_iter().map(EncodedResult::respond).collect())
    }
}

#[async_trait]
impl ExtendedQueryHandler for Tessera {
    type Statement = String;
    type QueryParser = NoopQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    async fn do_query<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        no_parameters(portal.parameter_len())?;
        let script = &portal.statement.statement;
        if let Some(response) = session_command(script) {
            return Ok(response);
        }
        // A statement answers with one result: a script's last query's.
        let format = portal.result_column_format.clone();
        let result = self.run(script, format, true).await?.pop();
        Ok(result.map_or(Response::EmptyQuery, EncodedResult::respond))
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        no_parameters(target.parameter_types.len())?;
        if session_command(&target.statement).is_some() {
            return Ok(DescribeStatementResponse::new(Vec::new(), Vec::new()));
        }
        let columns = self
            .describe(&target.statement)
            .await?
            .pop()
            .unwrap_or_default();
        Ok(DescribeStatementResponse::new(
            Vec::new(),
            fields(&columns, &Format::UnifiedText),
        ))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        target: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        no_parameters(target.parameter_len())?;
        if session_command(&target.statement.statement).is_some() {
            return Ok(DescribePortalResponse::new(Vec::new()));
        }
        let columns = self
            .describe(&target.statement.statement)
            .await?
            .pop()
            .unwrap_or_default();
        Ok(DescribePortalResponse::new(fields(
            &columns,
            &target.result_column_format,
        )))
    }
}

/// The answer to what clients send besides scripts: nothing, or the statements that open and
/// close transactions (drivers such as psycopg wrap every query in one) and set session
/// options. The data is read-only, so a transaction is always trivially whole: these succeed and
/// change nothing.
fn session_command(text: &str) -> Option<Response> {
    let statement = text.trim().trim_end_matches(';').trim();
    if statement.is_empty() {
        return Some(Response::EmptyQuery);
    }
    let words: Vec<String> = statement
        .split_whitespace()
        .take(2)
        .map(str::to_ascii_uppercase)
        .collect();
    let first = words.first().map(String::as_str);
    match (first, words.get(1).map(String::as_str)) {
        (Some("BEGIN"), _) | (Some("START"), Some("TRANSACTION")) => {
            Some(Response::TransactionStart(Tag::new("BEGIN")))
        }
        (Some("COMMIT" | "END"), _) => Some(Response::TransactionEnd(Tag::new("COMMIT"))),
        (Some("ROLLBACK" | "ABORT"), _) => Some(Response::TransactionEnd(Tag::new("ROLLBACK"))),
        (Some("SET"), _) => Some(Response::Execution(Tag::new("SET"))),
        _ => None,
    }
}

/// Scripts take no `$1` parameters yet.
fn no_parameters(count: usize) -> PgWireResult<()> {
    if count == 0 {
        return Ok(());
    }
    Err(user_error(
        "0A000",
        "parameters ($1, …) are not supported: write the values into the script".into(),
        None,
        None,
    ))
}

/// The PostgreSQL type a column of `ty` is sent as.
fn pg_type(ty: DataType) -> Type {
    match ty {
        DataType::Bool => Type::BOOL,
        DataType::I32 => Type::INT4,
        DataType::I64 => Type::INT8,
        DataType::F32 => Type::FLOAT4,
        DataType::F64 => Type::FLOAT8,
        DataType::Date => Type::DATE,
        DataType::Timestamp => Type::TIMESTAMP,
        DataType::Time => Type::TIME,
        DataType::Str => Type::TEXT,
        DataType::Decimal(_) => Type::NUMERIC,
    }
}

/// PostgreSQL's type modifier of a column: a numeric's precision and scale. A 64-bit decimal
/// typed at the most digits a narrow one keeps (18, where analysis caps a sum or a product)
/// holds any 64-bit count of units, which may have 19 digits (TPC-H Q1's `sum_charge` at SF 10:
/// 1100937000170.591854), so it is declared with 19.
fn type_modifier(ty: DataType) -> i32 {
    match ty {
        DataType::Decimal(d) => {
            let precision = match d.precision {
                DecimalType::NARROW_PRECISION => DecimalType::NARROW_PRECISION + 1,
                precision => precision,
            };
            ((i32::from(precision) << 16) | i32::from(d.scale)) + 4
        }
        _ => -1,
    }
}

fn fields(columns: &[(String, DataType)], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            FieldInfo::new(name.clone(), None, None, pg_type(*ty), format.format_for(i))
                .with_type_modifier(type_modifier(*ty))
        })
        .collect()
}

/// A result's columns as the client is told of them and its rows as DataRow messages.
struct EncodedResult {
    schema: Arc<Vec<FieldInfo>>,
    rows: Vec<DataRow>,
}

impl EncodedResult {
    fn respond(self) -> Response {
        let rows = self.rows.into_iter().map(Ok);
        Response::Query(QueryResponse::new(self.schema, stream::iter(rows)))
    }
}

/// How a result's column is written: its type in Tessera and in PostgreSQL, and its format.
#[derive(Clone)]
struct WireColumn {
    ty: DataType,
    pg: Type,
    format: FieldFormat,
    options: Arc<FormatOptions>,
}

/// The bytes of each buffer a result's rows are written into.
const ROW_BUFFER_BYTES: usize = 64 << 10;

/// How many rows are written between two looks at whether the query was cancelled.
const ROWS_PER_CANCEL_CHECK: usize = 4096;

/// Keeps `error` to answer with, and stops the query's writing with a stand-in for it.
fn stand_in(kept: &mut Option<PgWireError>, error: PgWireError) -> RuntimeError {
    let stop = RuntimeError::Malformed(error.to_string());
    *kept = Some(error);
    stop
}

/// A result's rows written as DataRow messages in a format, into a few large buffers that the
/// messages share, as they are decoded; a cancelled query stops within a few thousand rows.
struct MessageWriter<'a> {
    schema: Arc<Vec<FieldInfo>>,
    columns: Vec<WireColumn>,
    field_count: i16,
    /// The column of the next field of the current row.
    next: usize,
    buffer: BytesMut,
    rows: Vec<DataRow>,
    cancelled: &'a AtomicBool,
    /// Why a value could not be written, which stopped the writing.
    failed: Option<PgWireError>,
}

impl<'a> MessageWriter<'a> {
    fn new(
        columns: &[(String, DataType)],
        format: &Format,
        cancelled: &'a AtomicBool,
    ) -> PgWireResult<MessageWriter<'a>> {
        let schema = Arc::new(fields(columns, format));
        let wire = columns
            .iter()
            .zip(schema.iter())
            .map(|((_, ty), field)| WireColumn {
                ty: *ty,
                pg: field.datatype().clone(),
                format: field.format(),
                options: Arc::clone(field.format_options()),
            })
            .collect();
        let field_count = i16::try_from(columns.len())
            .map_err(|_| internal("a result has more columns than the protocol's 32,767"))?;
        Ok(MessageWriter {
            schema,
            columns: wire,
            field_count,
            next: 0,
            // Each refill of a buffer the rows' messages share takes at least its first
            // capacity.
            buffer: BytesMut::with_capacity(ROW_BUFFER_BYTES),
            rows: Vec::new(),
            cancelled,
            failed: None,
        })
    }

    /// An empty writer of the same columns, for a part of the rows written on another core.
    fn part(&self) -> MessageWriter<'a> {
        MessageWriter {
            schema: Arc::clone(&self.schema),
            columns: self.columns.clone(),
            field_count: self.field_count,
            next: 0,
            buffer: BytesMut::new(),
            rows: Vec::new(),
            cancelled: self.cancelled,
            failed: None,
        }
    }

    fn finish(self) -> EncodedResult {
        EncodedResult {
            schema: self.schema,
            rows: self.rows,
        }
    }
}

/// Rows per part of a result written on every core; fewer than two parts' rows are written on
/// one.
const ROWS_PER_PART: usize = 4096;

/// The bytes a row's field is expected to take in a message when room is made for many rows
/// at once: its length and a short value.
const FIELD_BYTES_EXPECTED: usize = 12;

/// The most room made for a result's rows before they are written; more comes as needed.
const ROWS_BYTES_RESERVED_AT_MOST: usize = 64 << 20;

impl<'a> RowWriter for MessageWriter<'a> {
    /// Room for the rows' messages and their bytes at once: growing a result's vector of
    /// messages, and its buffers 64 KB at a time, took half the time of writing TPC-H Q16's
    /// rows in a test of this writer alone.
    fn reserve(&mut self, rows: usize) {
        self.rows.reserve(rows);
        let bytes = rows.saturating_mul(2 + self.columns.len() * FIELD_BYTES_EXPECTED);
        self.buffer.reserve(bytes.min(ROWS_BYTES_RESERVED_AT_MOST));
    }

    fn field(&mut self, field: Field<'_>) -> Result<(), RuntimeError> {
        let column = self
            .columns
            .get(self.next)
            .ok_or_else(|| RuntimeError::Malformed("a row longer than its columns".into()))?;
        self.next += 1;
        let written = match field {
            // A string's text and binary forms are both its bytes.
            Field::Text(text) => put_bytes(&mut self.buffer, text.as_bytes()),
            // `put_typed` writes an integer's digits straight into the row.
            Field::Int(int) => put_field(&mut self.buffer, &Value::Int(int), column),
            Field::Value(value) => put_field(&mut self.buffer, value, column),
        };
        written.map_err(|e| stand_in(&mut self.failed, e))
    }

    fn end_row(&mut self) -> Result<(), RuntimeError> {
        self.next = 0;
        self.rows
            .push(DataRow::new(self.buffer.split(), self.field_count));
        // After the first row, and then every few thousand.
        if (self.rows.len() - 1).is_multiple_of(ROWS_PER_CANCEL_CHECK)
            && self.cancelled.load(Ordering::Relaxed)
        {
            return Err(RuntimeError::Cancelled);
        }
        Ok(())
    }

    fn write_in_parts(
        &mut self,
        count: usize,
        write: &WriteRange<'_>,
    ) -> Result<bool, RuntimeError> {
        if count < 2 * ROWS_PER_PART {
            return Ok(false);
        }
        let mut parts: Vec<MessageWriter<'a>> = (0..count.div_ceil(ROWS_PER_PART))
            .map(|_| self.part())
            .collect();
        let written: Vec<Result<(), RuntimeError>> = parts
            .par_iter_mut()
            .enumerate()
            .map(|(n, part)| {
                let rows = n * ROWS_PER_PART..count.min((n + 1) * ROWS_PER_PART);
                part.reserve(rows.len());
                write(rows, part)
            })
            .collect();
        self.rows.reserve(count);
        for (part, result) in parts.into_iter().zip(written) {
            // The first part to fail stops the writing, as a row written here would.
            if let Err(error) = result {
                self.failed = part.failed;
                return Err(error);
            }
            self.rows.extend(part.rows);
        }
        Ok(true)
    }
}

/// Appends `bytes` as a DataRow field: their length, then them.
fn put_bytes(out: &mut BytesMut, bytes: &[u8]) -> PgWireResult<()> {
    let length = i32::try_from(bytes.len())
        .map_err(|_| internal("a value longer than PostgreSQL's 2 GB"))?;
    out.put_i32(length);
    out.put_slice(bytes);
    Ok(())
}

/// Appends `value` as a DataRow field: its length (-1 for null), then its bytes in its
/// PostgreSQL form ([`put_typed`]).
fn put_field(out: &mut BytesMut, value: &Value, column: &WireColumn) -> PgWireResult<()> {
    let start = out.len();
    out.put_i32(-1);
    if matches!(put_typed(out, value, column)?, IsNull::No) {
        let length = i32::try_from(out.len() - start - 4)
            .map_err(|_| internal("a value longer than PostgreSQL's 2 GB"))?;
        out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    }
    Ok(())
}

/// Appends `value` in its PostgreSQL form for `column`'s type and format.
fn put_typed(out: &mut BytesMut, value: &Value, column: &WireColumn) -> PgWireResult<IsNull> {
    fn put<T: ToSql + ToSqlText>(
        out: &mut BytesMut,
        value: &T,
        column: &WireColumn,
    ) -> PgWireResult<IsNull> {
        Ok(match column.format {
            FieldFormat::Text => value.to_sql_text(&column.pg, out, &column.options)?,
            FieldFormat::Binary => value.to_sql(&column.pg, out)?,
        })
    }
    // The text of the values most results hold, written straight into the row: what
    // pgwire's `to_sql_text` writes, without its formatting machinery.
    if column.format == FieldFormat::Text {
        let mut digits = itoa::Buffer::new();
        let text = match (value, column.ty) {
            (Value::Int(i), DataType::I32) => Some(digits.format(*i as i32).as_bytes()),
            (Value::Int(i), DataType::I64) => Some(digits.format(*i).as_bytes()),
            (Value::Str(s), _) => Some(s.as_bytes()),
            _ => None,
        };
        if let Some(text) = text {
            out.put_slice(text);
            return Ok(IsNull::No);
        }
    }
    match (value, column.ty) {
        (Value::Null, _) => Ok(IsNull::Yes),
        (Value::Bool(b), _) => put(out, b, column),
        (Value::Int(i), DataType::I32) => put(out, &(*i as i32), column),
        (Value::Int(i), DataType::Bool) => put(out, &(*i != 0), column),
        (Value::Int(i), _) => put(out, i, column),
        (Value::Float(x), DataType::F32) => put(out, &(*x as f32), column),
        (Value::Float(x), _) => put(out, x, column),
        (Value::Date(days), _) => put(out, &PgValue::Date(*days), column),
        (Value::Timestamp(micros), _) => put(out, &PgValue::Timestamp(*micros), column),
        (Value::Time(micros), _) => put(out, &PgValue::Time(*micros), column),
        (Value::Str(s), _) => put(out, &&**s, column),
        (Value::Decimal(raw, scale), _) => put(
            out,
            &PgValue::Numeric {
                raw: i128::from(*raw),
                scale: *scale,
            },
            column,
        ),
        (Value::WideDecimal(raw, scale), _) => put(
            out,
            &PgValue::Numeric {
                raw: *raw,
                scale: *scale,
            },
            column,
        ),
    }
}

/// A value PostgreSQL clients read in a form of its own: a date (days since 1970-01-01) as
/// `date`, a timestamp (microseconds since 1970-01-01) as `timestamp`, a time of day
/// (microseconds since midnight) as `time`, a decimal (its raw value and scale) as `numeric`.
#[derive(Debug)]
enum PgValue {
    Date(i32),
    Timestamp(i64),
    Time(i64),
    Numeric { raw: i128, scale: u8 },
}

/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch for dates and timestamps.
const PG_EPOCH_DAYS: i32 = 10_957;

impl ToSql for PgValue {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            PgValue::Date(days) => out.put_i32(days - PG_EPOCH_DAYS),
            PgValue::Timestamp(micros) => {
                out.put_i64(micros.saturating_sub(
                    i64::from(PG_EPOCH_DAYS) * tessera_storage::date::MICROS_PER_DAY,
                ))
            }
            PgValue::Time(micros) => out.put_i64(micros),
            PgValue::Numeric { raw, scale } => put_numeric(out, raw, scale),
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        [Type::DATE, Type::TIMESTAMP, Type::TIME, Type::NUMERIC].contains(ty)
    }

    postgres_types::to_sql_checked!();
}

impl ToSqlText for PgValue {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _format_options: &FormatOptions,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let text = match *self {
            PgValue::Date(days) => tessera_storage::date::format_days(days),
            PgValue::Timestamp(micros) => tessera_storage::date::format_timestamp(micros),
            PgValue::Time(micros) => tessera_storage::date::format_time(micros),
            PgValue::Numeric { raw, scale } => tessera_storage::decimal::format(raw, scale),
        };
        out.extend_from_slice(text.as_bytes());
        Ok(IsNull::No)
    }
}

/// `numeric`'s binary form: base-10000 digits around the point, with their count, the weight
/// of the first, the sign and the scale.
fn put_numeric(out: &mut BytesMut, raw: i128, scale: u8) {
    let text = tessera_storage::decimal::format(raw.abs(), scale);
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let whole = whole.trim_start_matches('0');
    // Groups of four digits, aligned on the point.
    let left_pad = (4 - whole.len() % 4) % 4;
    let right_pad = (4 - fraction.len() % 4) % 4;
    let digits = format!(
        "{}{whole}{fraction}{}",
        "0".repeat(left_pad),
        "0".repeat(right_pad)
    );
    let mut groups: Vec<i16> = digits
        .as_bytes()
        .chunks(4)
        .map(|g| g.iter().fold(0i16, |n, d| n * 10 + i16::from(d - b'0')))
        .collect();
    let mut weight = ((left_pad + whole.len()) / 4) as i16 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let sign: u16 = if raw < 0 { 0x4000 } else { 0 };
    out.put_i16(groups.len() as i16);
    out.put_i16(weight);
    out.put_u16(sign);
    out.put_i16(i16::from(scale));
    for group in groups {
        out.put_i16(group);
    }
}

/// A failure as PostgreSQL reports it: the first diagnostic's SQLSTATE, message, position (a
/// character index into the script, from 1) and help as its hint.
fn error_response(failure: Failure, script: &str) -> PgWireError {
    match failure {
        // Overflow is the data's doing (numeric_value_out_of_range), as in PostgreSQL.
        Failure::Message(message) if message.starts_with("integer overflow") => {
            user_error("22003", message, None, None)
        }
        // Memory is the machine's, not the query's fault (out_of_memory).
        Failure::Message(message)
            if message.starts_with("out of memory")
                || message.starts_with("the GPU is out of memory") =>
        {
            user_error("53200", message, None, None)
        }
        Failure::Message(message) if message == RuntimeError::Cancelled.to_string() => {
            cancelled_error()
        }
        Failure::Message(message) => user_error("XX000", message, None, None),
        Failure::Reported => internal("a failure was reported without its message"),
        Failure::Script { diagnostics, .. } => {
            let Some(first) = diagnostics.first() else {
                return internal("a script failed without a diagnostic");
            };
            let code = match first.kind {
                DiagnosticKind::Syntax => "42601",
                DiagnosticKind::Name if first.message.starts_with("unknown table") => "42P01",
                DiagnosticKind::Name => "42703",
                DiagnosticKind::Type => "42804",
                DiagnosticKind::Unsupported => "0A000",
                DiagnosticKind::Data => "22000",
                DiagnosticKind::Internal => "XX000",
            };
            let start = (first.span.start as usize).min(script.len());
            let position = script
                .get(..start)
                .map_or(start, |before| before.chars().count())
                + 1;
            let hint = (!first.hints.is_empty()).then(|| first.hints.join("; "));
            let mut message = format!("{}: {}", first.kind.title(), first.message);
            if diagnostics.len() > 1 {
                message.push_str(&format!(" (and {} more)", diagnostics.len() - 1));
            }
            user_error(code, message, Some(position), hint)
        }
    }
}

/// PostgreSQL's answer to a cancelled query (query_canceled).
fn cancelled_error() -> PgWireError {
    user_error("57014", RuntimeError::Cancelled.to_string(), None, None)
}

fn user_error(
    code: &str,
    message: String,
    position: Option<usize>,
    hint: Option<String>,
) -> PgWireError {
    let mut info = ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message);
    info.position = position.map(|p| p.to_string());
    info.hint = hint;
    PgWireError::UserError(Box::new(info))
}

fn internal(message: &str) -> PgWireError {
    user_error(
        "XX000",
        format!("internal error (this is a bug in Tessera): {message}"),
        None,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgwire::api::results::DataRowEncoder;

    /// The rows written here are byte for byte those pgwire's own encoder writes from the same
    /// values, in text and in binary, nulls and extremes included.
    #[test]
    fn rows_are_written_as_pgwire_writes_them() {
        let columns = vec![
            ("small".to_string(), DataType::I32),
            ("large".to_string(), DataType::I64),
            ("name".to_string(), DataType::Str),
            ("day".to_string(), DataType::Date),
            ("flag".to_string(), DataType::Bool),
        ];
        let rows = vec![
            vec![
                Value::Int(-7),
                Value::Int(i64::MIN),
                Value::Str("Brand#45".into()),
                Value::Date(9_000),
                Value::Int(1),
            ],
            vec![
                Value::Int(i64::from(i32::MIN)),
                Value::Int(0),
                Value::Str("".into()),
                Value::Null,
                Value::Bool(false),
            ],
            // An I32 column's value is written as its 32 bits, in text as in binary.
            vec![
                Value::Int(1 << 31),
                Value::Int(i64::MAX),
                Value::Null,
                Value::Date(-1),
                Value::Null,
            ],
        ];
        let formats = [
            Format::UnifiedText,
            Format::UnifiedBinary,
            Format::Individual(vec![1, 0, 1, 0, 1]),
            Format::Individual(vec![0, 1, 0, 1, 0]),
        ];
        let not_cancelled = AtomicBool::new(false);
        for format in formats {
            let schema = Arc::new(fields(&columns, &format));
            let mut expected = DataRowEncoder::new(Arc::clone(&schema));
            // Values as a decoded row holds them, and strings and integers as read from their
            // columns.
            let mut as_values =
                MessageWriter::new(&columns, &format, &not_cancelled).expect("a writer");
            let mut as_read =
                MessageWriter::new(&columns, &format, &not_cancelled).expect("a writer");
            for row in &rows {
                for (value, (_, ty)) in row.iter().zip(&columns) {
                    as_values.field(Field::Value(value)).expect("writes");
                    as_read
                        .field(match (value, ty) {
                            (Value::Str(text), _) => Field::Text(text),
                            (Value::Int(int), DataType::I32 | DataType::I64) => Field::Int(*int),
                            (value, _) => Field::Value(value),
                        })
                        .expect("writes");
                }
                as_values.end_row().expect("a row");
                as_read.end_row().expect("a row");
            }
            let (as_values, as_read) = (as_values.finish(), as_read.finish());
            assert_eq!(as_values.rows, as_read.rows, "{format:?}");
            assert_eq!(as_values.rows.len(), rows.len());
            for (row, written) in rows.iter().zip(&as_values.rows) {
                for (value, (_, ty)) in row.iter().zip(&columns) {
                    match (value, ty) {
                        (Value::Null, _) => expected.encode_field(&None::<i32>),
                        (Value::Int(i), DataType::I32) => expected.encode_field(&(*i as i32)),
                        (Value::Int(i), DataType::Bool) => expected.encode_field(&(*i != 0)),
                        (Value::Bool(b), _) => expected.encode_field(b),
                        (Value::Int(i), _) => expected.encode_field(i),
                        (Value::Str(s), _) => expected.encode_field(&&**s),
                        (Value::Date(days), _) => expected.encode_field(&PgValue::Date(*days)),
                        _ => unreachable!("only the values above are written"),
                    }
                    .expect("pgwire encodes");
                }
                assert_eq!(written, &expected.take_row(), "{format:?}: {row:?}");
            }
        }
    }

    /// Rows written in parts on every core are the rows written one after another, in order;
    /// a part that fails stops the writing with its error.
    #[test]
    fn rows_written_in_parts_are_those_written_in_order() {
        let columns = vec![
            ("name".to_string(), DataType::Str),
            ("n".to_string(), DataType::I64),
        ];
        let count = 5 * ROWS_PER_PART + 17;
        let row = |index: usize, writer: &mut dyn RowWriter| {
            writer.field(Field::Text(&format!("row {index}")))?;
            writer.field(Field::Int(index as i64 * 3))?;
            writer.end_row()
        };
        let not_cancelled = AtomicBool::new(false);
        let mut in_order =
            MessageWriter::new(&columns, &Format::UnifiedText, &not_cancelled).expect("a writer");
        for index in 0..count {
            row(index, &mut in_order).expect("a row");
        }
        let mut in_parts =
            MessageWriter::new(&columns, &Format::UnifiedText, &not_cancelled).expect("a writer");
        let write = |rows: std::ops::Range<usize>, writer: &mut dyn RowWriter| {
            rows.into_iter().try_for_each(|index| row(index, writer))
        };
        assert!(in_parts.write_in_parts(count, &write).expect("writes"));
        assert_eq!(in_parts.finish().rows, in_order.finish().rows);
        // Too few rows for two parts: left to the caller.
        let mut few =
            MessageWriter::new(&columns, &Format::UnifiedText, &not_cancelled).expect("a writer");
        assert!(!few.write_in_parts(ROWS_PER_PART, &write).expect("writes"));
        // A row of the third part stops the writing; the parts before it are kept, as rows
        // written in order before it would be.
        let mut failing =
            MessageWriter::new(&columns, &Format::UnifiedText, &not_cancelled).expect("a writer");
        let bad = 2 * ROWS_PER_PART + 5;
        let write = |rows: std::ops::Range<usize>, writer: &mut dyn RowWriter| {
            rows.into_iter().try_for_each(|index| match index {
                i if i == bad => Err(RuntimeError::Cancelled),
                i => row(i, writer),
            })
        };
        assert!(matches!(
            failing.write_in_parts(count, &write),
            Err(RuntimeError::Cancelled)
        ));
        assert_eq!(failing.finish().rows.len(), 2 * ROWS_PER_PART);
    }

    #[test]
    fn dates_count_from_postgresql_epoch() {
        let mut out = BytesMut::new();
        PgValue::Date(PG_EPOCH_DAYS + 3)
            .to_sql(&Type::DATE, &mut out)
            .expect("encodes");
        assert_eq!(&out[..], &3i32.to_be_bytes());
        let mut text = BytesMut::new();
        PgValue::Date(0)
            .to_sql_text(&Type::DATE, &mut text, &FormatOptions::default())
            .expect("encodes");
        assert_eq!(&text[..], b"1970-01-01");
    }

    #[test]
    fn decimals_are_numerics_in_base_10000() {
        // -12345.678: digits 1 2345 6780 around the point, weight 1, negative, scale 3.
        let mut out = BytesMut::new();
        PgValue::Numeric {
            raw: -12_345_678,
            scale: 3,
        }
        .to_sql(&Type::NUMERIC, &mut out)
        .expect("encodes");
        let words: Vec<i16> = out
            .chunks(2)
            .map(|w| i16::from_be_bytes([w[0], w[1]]))
            .collect();
        assert_eq!(words, [3, 1, 0x4000, 3, 1, 2345, 6780]);
        let mut zero = BytesMut::new();
        PgValue::Numeric { raw: 0, scale: 2 }
            .to_sql(&Type::NUMERIC, &mut zero)
            .expect("encodes");
        assert_eq!(&zero[..], &[0, 0, 0, 0, 0, 0, 0, 2]);
        let mut text = BytesMut::new();
        PgValue::Numeric { raw: -5, scale: 2 }
            .to_sql_text(&Type::NUMERIC, &mut text, &FormatOptions::default())
            .expect("encodes");
        assert_eq!(&text[..], b"-0.05");
    }

    #[test]
    fn a_script_error_keeps_its_position_and_help() {
        let script = "from lineorder\n| where lo_revnue > 1";
        let diagnostic = tessera_grammar::Diagnostic::name(
            tessera_grammar::Span::new(23, 32),
            "unknown column `lo_revnue`",
        )
        .with_hint("did you mean `lo_revenue`?");
        let error = error_response(
            Failure::Script {
                name: "q".into(),
                source: script.into(),
                diagnostics: vec![diagnostic],
            },
            script,
        );
        let PgWireError::UserError(info) = error else {
            panic!("a user error");
        };
        assert_eq!(info.code, "42703");
        assert_eq!(info.position.as_deref(), Some("24"));
        assert_eq!(info.hint.as_deref(), Some("did you mean `lo_revenue`?"));
    }
}
