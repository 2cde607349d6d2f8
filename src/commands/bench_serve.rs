//! `tessera bench serve`: a load generator for a running `tessera serve` over loopback. Each of
//! N clients keeps one connection and sends M scripts of the SSB or TPC-H mix in turn; every
//! result must equal the one a first, untimed pass got for that query. It reports latency
//! percentiles per query and overall, measured by the client from sending a script to the end
//! of its answer (every row received and kept, as libpq's `PQexec` returns a result whose
//! values are read after), and the throughput of all clients together. The rows' text is read
//! into values after the clock stops, for the check.

use std::time::{Duration, Instant};

use tessera_runtime::result::ResultTable;

use super::bench::{median, Suite, SSB, TPCH};
use super::compile::Script;
use super::remote::Connection;
use crate::failure::Failure;
use crate::ServeBenchArgs;

/// The benchmark whose example queries the clients send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ServedSuite {
    Ssb,
    Tpch,
}

pub fn run(args: &ServeBenchArgs) -> Result<(), Failure> {
    if args.clients == 0 || args.queries == 0 {
        return Err(Failure::Message(
            "--clients and --queries must be at least 1".into(),
        ));
    }
    let suite: &Suite = match args.suite {
        ServedSuite::Ssb => &SSB,
        ServedSuite::Tpch => &TPCH,
    };
    let scripts: Vec<Script> = suite
        .queries
        .iter()
        .filter(|(name, _)| args.only.is_empty() || args.only.iter().any(|o| name.contains(o)))
        .map(|(name, text)| Script {
            name: name.to_string(),
            source: text.to_string(),
        })
        .collect();
    if scripts.is_empty() {
        return Err(Failure::Message(format!(
            "no {} query matches --only",
            suite.title
        )));
    }
    // The first pass warms the server (compiles, loads columns) and gives the answers.
    let mut first = Connection::open(&args.server)?;
    let answers: Vec<Vec<ResultTable>> = scripts
        .iter()
        .map(|script| first.run(&args.server, script))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let per_client: Vec<Result<Vec<(usize, Duration)>, String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..args.clients)
            .map(|client| {
                let (scripts, answers) = (&scripts, &answers);
                scope.spawn(move || -> Result<Vec<(usize, Duration)>, String> {
                    let mut connection =
                        Connection::open(&args.server).map_err(|e| describe(&e))?;
                    let mut times = Vec::with_capacity(args.queries);
                    for i in 0..args.queries {
                        let q = (client + i) % scripts.len();
                        let sent = Instant::now();
                        let received = connection
                            .run_received(&args.server, &scripts[q])
                            .map_err(|e| describe(&e))?;
                        times.push((q, sent.elapsed()));
                        // The values are read from their text after the clock stops, as a
                        // libpq client holds a result before asking for its values.
                        let got = received
                            .into_iter()
                            .map(|r| r.into_table(&args.server, &scripts[q]))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| describe(&e))?;
                        if !same(&got, &answers[q]) {
                            return Err(format!(
                                "client {client}: {} gave another answer than the first time",
                                scripts[q].name
                            ));
                        }
                    }
                    Ok(times)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a client thread failed".into()))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut times: Vec<(usize, Duration)> = Vec::new();
    for client in per_client {
        times.extend(client.map_err(Failure::Message)?);
    }
    println!(
        "{} clients x {} scripts against {}: {} results, all equal to the first pass's, in {:.2} s: {:.0} queries/s",
        args.clients,
        args.queries,
        args.server,
        times.len(),
        elapsed.as_secs_f64(),
        times.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "{:<8} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "query", "count", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    for (q, script) in scripts.iter().enumerate() {
        let mine: Vec<f64> = times
            .iter()
            .filter(|(i, _)| *i == q)
            .map(|(_, t)| t.as_secs_f64() * 1e3)
            .collect();
        println!("{}", line(&script.name, mine));
    }
    println!(
        "{}",
        line(
            "all",
            times.iter().map(|(_, t)| t.as_secs_f64() * 1e3).collect()
        )
    );
    Ok(())
}

fn line(name: &str, mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| {
        ms.get(((ms.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    let count = ms.len();
    let p50 = median(&mut ms.clone());
    format!(
        "{name:<8} {count:>8} {p50:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        at(0.95),
        at(0.99),
        ms.last().copied().unwrap_or(0.0)
    )
}

/// Whether two answers are the same rows (in the same order: the queries sort theirs).
fn same(a: &[ResultTable], b: &[ResultTable]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.columns == y.columns && x.rows == y.rows)
}

fn describe(failure: &Failure) -> String {
    match failure {
        Failure::Message(message) => message.clone(),
        Failure::Script { diagnostics, .. } => diagnostics
            .first()
            .map_or_else(String::new, |d| d.message.clone()),
        Failure::Reported => String::new(),
    }
}
