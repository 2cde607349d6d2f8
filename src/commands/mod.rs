//! One module per subcommand.

pub mod bench;
pub mod bench_decode;
pub mod bench_e2e;
pub mod bench_micro;
pub mod cache;
pub mod compile;
pub mod gen;
pub mod prepare;
pub mod run;
pub mod session;
pub mod stats;
pub mod test;
