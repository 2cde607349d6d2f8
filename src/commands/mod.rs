//! One module per subcommand.

pub mod bench;
pub mod bench_decode;
pub mod bench_e2e;
pub mod bench_micro;
pub mod bench_serve;
pub mod cache;
pub mod compile;
pub mod describe;
pub mod gen;
pub mod prepare;
pub mod remote;
pub mod result_file;
pub mod run;
pub mod scram;
pub mod serve;
pub mod session;
pub mod shell;
pub mod stats;
pub mod test;
