//! How a command fails: a one-line cause, or rendered diagnostics for a script, and the exit
//! status that goes with it.

use std::io::IsTerminal;
use std::process::ExitCode;

use tessera_grammar::{render, Diagnostic};

pub enum Failure {
    /// A one-line cause (bad arguments, unreadable files, no GPU).
    Message(String),
    /// Errors in a script, rendered against its source.
    Script {
        name: String,
        source: String,
        diagnostics: Vec<Diagnostic>,
    },
    /// Failures already reported as they happened (the shell reading a pipe): only the exit
    /// status is left to give.
    Reported,
}

impl Failure {
    pub fn report(self) -> ExitCode {
        match self {
            Failure::Message(message) => eprintln!("error: {message}"),
            Failure::Reported => {}
            Failure::Script {
                name,
                source,
                diagnostics,
            } => {
                let color =
                    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
                eprint!("{}", render(&diagnostics, &name, &source, color));
            }
        }
        ExitCode::FAILURE
    }
}

/// The failure as `report` would print it, without colour.
impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Message(message) => f.write_str(message),
            Failure::Reported => f.write_str("(reported)"),
            Failure::Script {
                name,
                source,
                diagnostics,
            } => f.write_str(&render(diagnostics, name, source, false)),
        }
    }
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure::Message(error.to_string())
    }
}
