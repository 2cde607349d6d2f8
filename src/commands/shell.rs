//! `tessera shell`: an interactive prompt on the resident engine (`crate::engine`), in process.
//! A script may span lines and ends with `;`; its results print as `tessera run` prints them.
//! Lines starting with `.` are commands to the shell (`.help` lists them). At a terminal, lines
//! are edited with history (kept in the cache folder) and Tab completes stages, tables and
//! columns; Ctrl-C abandons the query that is running (its result is not printed) rather than
//! the shell, and Ctrl-D leaves. From a pipe, scripts are read with no prompt and their
//! results printed.

use std::io::{BufRead, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use tessera_runtime::exec::QueryOutcome;
use tessera_runtime::output::{ScriptOutput, TableLimits, TextFormat};
use tessera_storage::cache::CacheFolder;

use crate::engine::{Engine, EngineOptions};
use crate::failure::Failure;
use crate::ShellArgs;

/// The words a stage starts with, for completion.
const STAGES: [&str; 20] = [
    "from",
    "where",
    "select",
    "derive",
    "join",
    "group",
    "aggregate",
    "sort",
    "take",
    "distinct",
    "union",
    "intersect",
    "except",
    "product",
    "let",
    "desc",
    "semi",
    "anti",
    "on",
    "all",
];

pub fn run(args: &ShellArgs) -> Result<(), Failure> {
    let engine = Arc::new(Engine::open(EngineOptions {
        data: args.data.clone(),
        device: args.device,
        compress: args.compress,
        partition_joins: args.partition_joins,
        gpu_memory: None,
        timing: false,
        cache: true,
    })?);
    let mut shell = Shell {
        engine,
        format: args.format.into(),
        timer: false,
    };
    if std::io::stdin().is_terminal() {
        shell.interactive()
    } else {
        shell.piped()
    }
}

struct Shell {
    engine: Arc<Engine>,
    format: TextFormat,
    timer: bool,
}

/// What a line asks of the shell.
enum Step {
    Continue,
    Quit,
}

impl Shell {
    /// Reads scripts from a pipe: no prompt, each script's result printed, the first failure
    /// reported (the rest still run), the exit status that of the last failure.
    fn piped(&mut self) -> Result<(), Failure> {
        let stdin = std::io::stdin();
        let mut pending = String::new();
        let mut failed = None;
        for line in stdin.lock().lines() {
            let line = line.map_err(|e| Failure::Message(format!("cannot read the input: {e}")))?;
            match self.line(&line, &mut pending, &AtomicBool::new(false)) {
                Ok(Step::Continue) => {}
                Ok(Step::Quit) => return finished(failed),
                Err(failure) => {
                    report(failure);
                    failed = Some(());
                }
            }
        }
        // A last script without its `;` runs too.
        if !pending.trim().is_empty() {
            let script = std::mem::take(&mut pending);
            if let Err(failure) = self.script(&script, &AtomicBool::new(false)) {
                report(failure);
                failed = Some(());
            }
        }
        finished(failed)
    }

    fn interactive(&mut self) -> Result<(), Failure> {
        let mut editor: Editor<Completion, rustyline::history::DefaultHistory> = Editor::new()
            .map_err(|e| Failure::Message(format!("cannot start the line editor: {e}")))?;
        editor.set_helper(Some(Completion::of(&self.engine)));
        let history = CacheFolder::open_default().map(|cache| cache.root().join("shell-history"));
        if let Some(history) = &history {
            let _ = editor.load_history(history);
        }
        println!(
            "Tessera shell on {} ({}). End scripts with `;`; `.help` for commands, Ctrl-D to leave.",
            self.engine.data().display(),
            self.engine.device_name
        );
        // Ctrl-C while a query runs abandons it; at the prompt the editor sees it.
        let interrupted = Arc::new(AtomicBool::new(false));
        install_interrupt(&interrupted);
        let mut pending = String::new();
        loop {
            let prompt = if pending.is_empty() {
                "tessera> "
            } else {
                "     ...> "
            };
            match editor.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    interrupted.store(false, Ordering::SeqCst);
                    match self.line(&line, &mut pending, &interrupted) {
                        Ok(Step::Continue) => {}
                        Ok(Step::Quit) => break,
                        Err(failure) => report(failure),
                    }
                }
                // Ctrl-C at the prompt drops what was typed.
                Err(ReadlineError::Interrupted) => pending.clear(),
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(Failure::Message(format!("cannot read the input: {e}"))),
            }
        }
        if let Some(history) = &history {
            let _ = editor.save_history(history);
        }
        Ok(())
    }

    /// Takes one line: a shell command, or part of a script (run when a `;` ends it).
    fn line(
        &mut self,
        line: &str,
        pending: &mut String,
        interrupted: &AtomicBool,
    ) -> Result<Step, Failure> {
        let trimmed = line.trim();
        if pending.is_empty() && trimmed.starts_with('.') {
            return self.command(trimmed, interrupted);
        }
        pending.push_str(line);
        pending.push('\n');
        if !ends_script(pending) {
            return Ok(Step::Continue);
        }
        let script = std::mem::take(pending);
        self.script(script.trim_end().trim_end_matches(';'), interrupted)?;
        Ok(Step::Continue)
    }

    fn command(&mut self, line: &str, interrupted: &AtomicBool) -> Result<Step, Failure> {
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        let argument = words.next();
        match (name, argument) {
            (".quit" | ".exit", _) => return Ok(Step::Quit),
            (".help", _) => print!("{HELP}"),
            (".timer", Some("on")) => self.timer = true,
            (".timer", Some("off")) => self.timer = false,
            (".format", Some("table")) => self.format = TextFormat::Table,
            (".format", Some("csv")) => self.format = TextFormat::Csv,
            (".format", Some("json")) => self.format = TextFormat::Json,
            (".format", Some("ndjson")) => self.format = TextFormat::NdJson,
            (".device", _) => println!("{}", self.engine.device_name),
            (".tables", _) => {
                for table in self.engine.catalog().tables() {
                    println!("{}", table.name);
                }
            }
            (".schema", Some(table)) => {
                let info = self.engine.catalog().table(table).ok_or_else(|| {
                    Failure::Message(format!("no table `{table}` (`.tables` lists them)"))
                })?;
                let columns = super::describe::column_rows(&[info]);
                super::remote::print_results(
                    &[columns],
                    self.format,
                    TableLimits::for_stdout(Some(0)),
                )?;
            }
            (".read", Some(path)) => {
                let script = super::compile::Script::read(std::path::Path::new(path))?;
                self.script(&script.source, interrupted)?;
            }
            _ => {
                return Err(Failure::Message(format!(
                    "`{line}` is not a shell command; `.help` lists them"
                )))
            }
        }
        Ok(Step::Continue)
    }

    /// Runs a script on a worker thread, printing its results unless it was abandoned.
    fn script(&mut self, script: &str, interrupted: &AtomicBool) -> Result<(), Failure> {
        if script.trim().is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let engine = Arc::clone(&self.engine);
        let text = script.to_string();
        let (done, finished) = std::sync::mpsc::channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&cancelled);
        std::thread::spawn(move || {
            let _ = done.send(engine.run("shell", &text, &stop));
        });
        let outcomes = loop {
            match finished.recv_timeout(Duration::from_millis(20)) {
                Ok(outcomes) => break outcomes?,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if interrupted.swap(false, Ordering::SeqCst) {
                        // The worker stops in its running kernel, or at its next kernel or
                        // piece of result.
                        cancelled.store(true, Ordering::SeqCst);
                        return Err(Failure::Message(
                            "cancelled: the query stops and its result will not be printed".into(),
                        ));
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Failure::Message("the query's thread failed".into()))
                }
            }
        };
        self.print(&outcomes)?;
        if self.timer {
            let kernels: f64 = outcomes.iter().map(|o| o.timing.kernel_ms()).sum();
            println!(
                "time: {:.3} s, kernels {kernels:.3} ms",
                started.elapsed().as_secs_f64()
            );
        }
        Ok(())
    }

    fn print(&self, outcomes: &[QueryOutcome]) -> Result<(), Failure> {
        let stdout = std::io::stdout();
        let io = |e: std::io::Error| Failure::Message(format!("cannot write the output: {e}"));
        let limits = TableLimits::for_stdout(None);
        let mut output = ScriptOutput::new(stdout.lock(), self.format, limits, outcomes.len());
        for outcome in outcomes {
            output.print(&outcome.table).map_err(io)?;
        }
        output.finish().map(|_| ()).map_err(io)
    }
}

/// Whether a script's text is complete: its last non-blank character, outside any string
/// literal or comment, is `;`.
fn ends_script(text: &str) -> bool {
    let mut in_string = false;
    let mut last = None;
    for line in text.lines() {
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_string => {
                    chars.next();
                }
                '"' => in_string = !in_string,
                '#' if !in_string => break,
                c if !c.is_whitespace() => last = Some((c, in_string)),
                _ => {}
            }
        }
    }
    matches!(last, Some((';', false)))
}

fn report(failure: Failure) {
    failure.report();
}

fn finished(failed: Option<()>) -> Result<(), Failure> {
    match failed {
        // Each failure was reported as it happened.
        Some(()) => Err(Failure::Reported),
        None => Ok(()),
    }
}

/// Sets `flag` on SIGINT (instead of ending the process) for the rest of the shell's life.
fn install_interrupt(flag: &Arc<AtomicBool>) {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    if FLAG.set(Arc::clone(flag)).is_err() {
        return;
    }
    extern "C" fn on_interrupt(_: libc::c_int) {
        if let Some(flag) = FLAG.get() {
            flag.store(true, Ordering::SeqCst);
        }
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
}

const HELP: &str = "\
Scripts end with `;` and may span lines. Commands:
  .tables              the tables of the data folder
  .schema TABLE        a table's columns: name, type, nullability
  .read FILE           run the scripts in FILE
  .format table|csv|json|ndjson
  .timer on|off        print each script's time
  .device              where queries run
  .help                this text
  .quit                leave (or Ctrl-D)
";

/// Tab completion: stage words, table names, and the columns of every table.
struct Completion {
    words: Vec<String>,
}

impl Completion {
    fn of(engine: &Engine) -> Completion {
        let mut words: Vec<String> = STAGES.iter().map(|s| s.to_string()).collect();
        for table in engine.catalog().tables() {
            words.push(table.name.clone());
            words.extend(table.schema.names().map(str::to_string));
        }
        words.sort();
        words.dedup();
        Completion { words }
    }
}

impl Completer for Completion {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = line[..pos]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let prefix = &line[start..pos];
        let matches = self
            .words
            .iter()
            .filter(|w| !prefix.is_empty() && w.starts_with(prefix))
            .map(|w| Pair {
                display: w.clone(),
                replacement: w.clone(),
            })
            .collect();
        Ok((start, matches))
    }
}

impl Hinter for Completion {
    type Hint = String;
}

impl Highlighter for Completion {}

impl Validator for Completion {}

impl Helper for Completion {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_ends_at_a_semicolon_outside_strings_and_comments() {
        assert!(ends_script("from date | aggregate { n = count() };"));
        assert!(ends_script("from date\n| take 1 ;  \n"));
        assert!(!ends_script("from date | where d_month == \"a;\""));
        assert!(!ends_script("from date # ends here;"));
        assert!(!ends_script("from date\n| take 1"));
        assert!(ends_script("from date | where d_month == \"a;\";"));
    }
}
