//! One module per subcommand.

pub mod bench;
pub mod cache;
pub mod compile;
pub mod gen;
pub mod run;
pub mod session;
pub mod test;
