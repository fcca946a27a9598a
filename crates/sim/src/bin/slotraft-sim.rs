//! Sweeps simulation seeds: `slotraft-sim --seeds N [--from S] [--faults LIST]
//! [--window-ms MS] [--threads T] [--mutation stale-reads|ack-before-commit] [--hosts replication|node|cluster] [--spare N] [--without-streams ID,...] [--verbose]`.
//! `cargo xtask sim` builds and runs it in release mode.

use std::process::ExitCode;
use std::time::Duration;

use sim::client::ReadMode;
use sim::faults::Kind;
use sim::run::{Config, Hosts};
use sim::sweep::sweep;

const USAGE: &str = "usage: slotraft-sim [--seeds N] [--from S] [--faults all|none|KIND,...] [--window-ms MS] [--threads T] [--mutation stale-reads|ack-before-commit] [--hosts replication|node|cluster] [--spare N] [--without-streams ID,...] [--verbose]";

fn main() -> ExitCode {
    trace_from_env();
    match parse(std::env::args().skip(1).collect()) {
        Ok(options) => run(options),
        Err(error) => {
            eprintln!("slotraft-sim: {error}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

struct Options {
    template: Config,
    from: u64,
    seeds: u64,
    threads: usize,
    verbose: bool,
}

fn parse(arguments: Vec<String>) -> Result<Options, String> {
    let mut options = Options {
        template: Config::new(0),
        from: 1,
        seeds: 100,
        threads: std::thread::available_parallelism().map_or(1, |count| count.get()),
        verbose: false,
    };
    let mut spare = None;
    let mut words = arguments.into_iter();
    while let Some(word) = words.next() {
        let mut value = |name: &str| words.next().ok_or(format!("{name} needs a value"));
        let number = |text: String, name: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("{name} takes a number, not {text:?}"))
        };
        match word.as_str() {
            "--seeds" => options.seeds = number(value("--seeds")?, "--seeds")?,
            "--from" => options.from = number(value("--from")?, "--from")?,
            "--threads" => {
                options.threads = number(value("--threads")?, "--threads")?.max(1) as usize
            }
            "--window-ms" => {
                let ms = number(value("--window-ms")?, "--window-ms")?;
                options.template.window = Duration::from_millis(ms);
            }
            "--faults" => options.template.faults = Kind::parse_list(&value("--faults")?)?,
            "--mutation" => match value("--mutation")?.as_str() {
                "stale-reads" => options.template.read_mode = ReadMode::AnyReplica,
                "ack-before-commit" => options.template.ack_before_commit = true,
                other => {
                    return Err(format!(
                        "unknown mutation {other:?} (known: stale-reads, ack-before-commit)"
                    ))
                }
            },
            "--hosts" => {
                options.template.hosts = Hosts::parse(&value("--hosts")?)?;
            }
            "--spare" => spare = Some(number(value("--spare")?, "--spare")?),
            // Replicas of a version without stream sessions (a rolling
            // upgrade), replication hosts only.
            "--without-streams" => {
                for id in value("--without-streams")?.split(',') {
                    let id = number(id.to_string(), "--without-streams")?;
                    if !(1..64).contains(&id) {
                        return Err(format!("--without-streams: no replica {id}"));
                    }
                    options.template.storage.without_streams |= 1 << id;
                }
            }
            "--verbose" => options.verbose = true,
            "-h" | "--help" => return Err("help".into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    // A cluster has one spare node unless told otherwise.
    if options.template.hosts == Hosts::Cluster {
        options.template = options.template.with_spare(spare.unwrap_or(1));
    } else if spare.is_some() {
        return Err("--spare is for --hosts cluster".into());
    }
    if options.template.storage.without_streams != 0 && options.template.hosts != Hosts::Replication
    {
        return Err("--without-streams is for --hosts replication".into());
    }
    Ok(options)
}

fn run(options: Options) -> ExitCode {
    let verbose = options.verbose;
    let summary = sweep(
        &options.template,
        options.from,
        options.seeds,
        options.threads,
        &|report| {
            if verbose || !report.passed() {
                let mut migrations = if report.migrations == (0, 0) {
                    String::new()
                } else {
                    format!(
                        ", {} slot migrations ({} failed attempts)",
                        report.migrations.0, report.migrations.1
                    )
                };
                if report.changes != (0, 0) {
                    migrations.push_str(&format!(
                        ", {} cluster changes ({} failed attempts)",
                        report.changes.0, report.changes.1
                    ));
                }
                println!(
                    "seed {}: {} ({} operations, {} unknown, limiter {}/{} admitted, blocking pops {}/{} served, {} faults{migrations}, hash {:016x})",
                    report.seed,
                    if report.passed() { "ok" } else { "FAILED" },
                    report.operations,
                    report.unknown,
                    report.admissions.0,
                    report.admissions.0 + report.admissions.1,
                    report.pops.0,
                    report.pops.0 + report.pops.1,
                    report.faults_applied,
                    report.trace_hash
                );
                if verbose {
                    for line in &report.fault_log {
                        println!("    {line}");
                    }
                }
            }
        },
    );
    for (config, report) in &summary.failures {
        println!("\nseed {} failed:", report.seed);
        if let Some(error) = &report.error {
            println!("  error: {error}");
        }
        for violation in &report.violations {
            println!("  {violation}");
        }
        println!("  faults:");
        for line in &report.fault_log {
            println!("    {line}");
        }
        println!("  reproduce: {}", config.reproduce());
    }
    let mut migrations = if summary.migrations == (0, 0) {
        String::new()
    } else {
        format!(
            ", {} slot migrations ({} failed attempts, rolled forward)",
            summary.migrations.0, summary.migrations.1
        )
    };
    if summary.changes != (0, 0) {
        migrations.push_str(&format!(
            ", {} cluster changes ({} failed attempts, rerun)",
            summary.changes.0, summary.changes.1
        ));
    }
    println!(
        "\n{} seeds from {}: {} passed, {} failed; {} operations ({} unknown outcome), {} faults{migrations}; {:.2} simulated hours in {:.1}s wall",
        summary.seeds,
        options.from,
        summary.seeds as usize - summary.failures.len(),
        summary.failures.len(),
        summary.operations,
        summary.unknown,
        summary.faults_applied,
        summary.simulated.as_secs_f64() / 3600.0,
        summary.wall.as_secs_f64()
    );
    if summary.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `SIM_TRACE=FILTER` (a tracing filter such as `openraft=debug,node=info`)
/// prints the nodes' logs, stamped with simulated time: for one seed at a
/// time, to follow a failure.
fn trace_from_env() {
    let Ok(filter) = std::env::var("SIM_TRACE") else {
        return;
    };
    struct SimTime;
    impl tracing_subscriber::fmt::time::FormatTime for SimTime {
        fn format_time(
            &self,
            w: &mut tracing_subscriber::fmt::format::Writer<'_>,
        ) -> std::fmt::Result {
            match turmoil::sim_elapsed() {
                Some(elapsed) => write!(w, "{:>9.3}", elapsed.as_secs_f64() * 1000.0),
                None => write!(w, "        -"),
            }
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_timer(SimTime)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
}
