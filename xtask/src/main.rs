//! `cargo xtask`: the project's automation, written in Rust so it runs the same on every
//! machine.
//!
//! * `cargo xtask ci` is the one test command (CI runs exactly this).
//! * `cargo xtask bench` compares slotraft with a real `redis-server` on loopback.
//! * `cargo xtask tools` installs the Redis command-line tools the other two need.
//!
//! Arguments are parsed by hand (no clap) to keep this crate's dependency graph at `anyhow`.

mod bench;
mod ci;
mod cluster;
mod group;
mod replication;
mod scripting;
mod server;
mod tools;
mod types;
mod wire;

use std::process::ExitCode;

const HELP: &str = "\
slotraft automation

Usage: cargo xtask <SUBCOMMAND> [OPTIONS]

Subcommands:
  ci       The project's one test command. Installs redis-server, redis-cli and
           redis-benchmark if missing (apt-get) and the pinned redis-py and ioredis
           under target/clients (pip, npm), then runs cargo fmt --all --check,
           cargo clippy --workspace --all-targets -D warnings, cargo build --workspace and
           cargo nextest run --workspace (cargo test if nextest is not installed).
             --skip-lint      skip the fmt and clippy steps
  bench    slotraft side by side with redis-server on 127.0.0.1: redis-benchmark
           throughput (SET GET INCR MSET at -P 1 and -P 16), memory per key, and a
           3-replica slotraft group against redis-server with appendfsync always and
           without persistence (SET INCR GET), plus the time to accept writes again
           after the group's leader is killed; and the slotraft dev topology (3 nodes,
           3 shards of 3 replicas) against a Redis Cluster of 3 masters + 3 replicas
           (redis-benchmark --cluster SET GET INCR at -P 1 and -P 16), plus the
           speed of moving a loaded slot with slotraft cluster reshard while a client
           writes to it; and the data-type commands (LPUSH LPOP RPOP SADD SPOP HSET
           ZADD LRANGE_100) against redis-server, with sorted-set per-command cost
           at 1k vs 1M members. Prints Markdown tables and writes them to
           target/bench/latest.md.
             --quick          small runs, a smoke test (noisy numbers)
             --requests N     requests per -P 1 run (default 200000; -P 16 runs use 10*N)
             --keys N         keys inserted for the memory comparison (default 1000000)
             --rounds N       runs per cell, median reported (default 3; 1 with --quick)
             --only LIST      run only these sections, comma-separated: throughput,
                              memory, replication, cluster, types (default: all)
  sim      Sweep deterministic simulation seeds (crates/sim, release build): one
           shard group of 3 replicas under a fault schedule drawn from each seed,
           clients recording a history, checkers over it. Prints failing seeds
           with the one-line command that replays each, and a summary.
             --seeds N        how many seeds (default 100)
             --from S         first seed (default 1)
             --faults LIST    all, none, or some of partition,one-way,
                              isolate-leader,crash,delay,slow-network,slow-disk,
                              membership (default all)
             --window-ms MS   how long the workload runs under faults (default 10000)
             --threads T      seeds run side by side (default: the cores)
             --mutation stale-reads|ack-before-commit
                              deliberately read followers as if linearizable, or
                              acknowledge writes whose commit is not confirmed,
                              to show the checkers catch it
             --hosts replication|node|cluster
                              run the replication stack alone (default), the
                              real `slotraft node` with clients speaking RESP,
                              or a 3-node cluster of them (3 shards x 3
                              replicas) whose slots move while faults run
             --verbose        a line per seed
  tools    Install the Redis tools and client libraries if missing, print their
           versions and the variables the cluster client suites read.
             --force          run apt-get install even if everything is present
  help     Print this help.
";

/// What the command line asked for.
enum Task {
    Help,
    Ci(ci::Options),
    Bench(bench::Options),
    Tools {
        force: bool,
    },
    /// The simulation sweep, with its arguments passed through.
    Sim(Vec<String>),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = match parse(&args) {
        Ok(task) => task,
        Err(message) => {
            eprintln!("xtask: {message}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    let result = match task {
        Task::Help => {
            print!("{HELP}");
            Ok(())
        }
        Task::Ci(options) => ci::run(&options),
        Task::Bench(options) => bench::run(&options),
        Task::Tools { force } => tools::install_and_report(force),
        Task::Sim(arguments) => sim(&arguments),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Turns the arguments after `cargo xtask` into a [`Task`]; `Err` is a usage message.
fn parse(args: &[String]) -> Result<Task, String> {
    let Some((subcommand, rest)) = args.split_first() else {
        return Ok(Task::Help);
    };
    let mut flags = Flags::new(rest);
    match subcommand.as_str() {
        "help" | "-h" | "--help" => Ok(Task::Help),
        "ci" => {
            let mut options = ci::Options::default();
            while let Some(flag) = flags.next_flag()? {
                match flag.as_str() {
                    "--skip-lint" => options.skip_lint = true,
                    "-h" | "--help" => return Ok(Task::Help),
                    _ => return Err(format!("unknown option '{flag}' for 'ci'")),
                }
            }
            Ok(Task::Ci(options))
        }
        "bench" => {
            let mut options = bench::Options::default();
            while let Some(flag) = flags.next_flag()? {
                match flag.as_str() {
                    "--quick" => options.quick = true,
                    "--requests" => options.requests = Some(flags.positive_number(&flag)?),
                    "--keys" => options.keys = Some(flags.positive_number(&flag)?),
                    "--rounds" => options.rounds = Some(flags.positive_number(&flag)?),
                    "--only" => options.only = bench::Section::parse_list(&flags.value(&flag)?)?,
                    "-h" | "--help" => return Ok(Task::Help),
                    _ => return Err(format!("unknown option '{flag}' for 'bench'")),
                }
            }
            Ok(Task::Bench(options))
        }
        "tools" => {
            let mut force = false;
            while let Some(flag) = flags.next_flag()? {
                match flag.as_str() {
                    "--force" => force = true,
                    "-h" | "--help" => return Ok(Task::Help),
                    _ => return Err(format!("unknown option '{flag}' for 'tools'")),
                }
            }
            Ok(Task::Tools { force })
        }
        "sim" => {
            if rest.iter().any(|word| word == "-h" || word == "--help") {
                return Ok(Task::Help);
            }
            Ok(Task::Sim(rest.to_vec()))
        }
        other => Err(format!("unknown subcommand '{other}'")),
    }
}

/// Builds the simulation sweep in release mode and runs it.
fn sim(arguments: &[String]) -> anyhow::Result<()> {
    let status = tools::cargo()
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "sim",
            "--bin",
            "slotraft-sim",
            "--",
        ])
        .args(arguments)
        .status()?;
    anyhow::ensure!(status.success(), "the simulation sweep failed ({status})");
    Ok(())
}

/// A cursor over `--flag`, `--flag value` and `--flag=value` arguments.
struct Flags<'a> {
    args: std::slice::Iter<'a, String>,
    /// The `value` of a `--flag=value` just returned, until [`Flags::value`] takes it.
    inline_value: Option<String>,
    current: String,
}

impl<'a> Flags<'a> {
    fn new(args: &'a [String]) -> Self {
        Flags {
            args: args.iter(),
            inline_value: None,
            current: String::new(),
        }
    }

    /// The next flag's name, `None` at the end.
    fn next_flag(&mut self) -> Result<Option<String>, String> {
        if self.inline_value.is_some() {
            return Err(format!("option '{}' takes no value", self.current));
        }
        let Some(arg) = self.args.next() else {
            return Ok(None);
        };
        if !arg.starts_with('-') {
            return Err(format!("unexpected argument '{arg}'"));
        }
        let name = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                self.inline_value = Some(value.to_owned());
                name.to_owned()
            }
            _ => arg.clone(),
        };
        self.current.clone_from(&name);
        Ok(Some(name))
    }

    /// The value of the flag just returned by [`Flags::next_flag`].
    fn value(&mut self, flag: &str) -> Result<String, String> {
        match self.inline_value.take() {
            Some(value) => Ok(value),
            None => self
                .args
                .next()
                .cloned()
                .ok_or_else(|| format!("option '{flag}' needs a value")),
        }
    }

    fn positive_number(&mut self, flag: &str) -> Result<u64, String> {
        let value = self.value(flag)?;
        match value.replace('_', "").parse::<u64>() {
            Ok(number) if number > 0 => Ok(number),
            _ => Err(format!(
                "option '{flag}' needs a positive number, got '{value}'"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn no_arguments_means_help() {
        assert!(matches!(parse(&[]), Ok(Task::Help)));
    }

    #[test]
    fn ci_flags() {
        match parse(&args(&["ci", "--skip-lint"])) {
            Ok(Task::Ci(options)) => assert!(options.skip_lint),
            _ => panic!("expected ci"),
        }
        assert!(parse(&args(&["ci", "--skip-lint=yes"])).is_err());
        assert!(parse(&args(&["ci", "--nope"])).is_err());
    }

    #[test]
    fn bench_flags() {
        match parse(&args(&[
            "bench",
            "--quick",
            "--requests",
            "1_000",
            "--keys=50",
        ])) {
            Ok(Task::Bench(options)) => {
                assert!(options.quick);
                assert_eq!(options.requests, Some(1000));
                assert_eq!(options.keys, Some(50));
            }
            _ => panic!("expected bench"),
        }
        assert!(parse(&args(&["bench", "--requests"])).is_err());
        assert!(parse(&args(&["bench", "--requests", "0"])).is_err());
        assert!(parse(&args(&["bench", "extra"])).is_err());
    }

    #[test]
    fn bench_sections() {
        match parse(&args(&["bench", "--only", "replication"])) {
            Ok(Task::Bench(options)) => {
                assert_eq!(options.only, vec![bench::Section::Replication]);
            }
            _ => panic!("expected bench"),
        }
        match parse(&args(&["bench", "--only=memory,throughput,memory"])) {
            Ok(Task::Bench(options)) => assert_eq!(
                options.only,
                vec![bench::Section::Memory, bench::Section::Throughput]
            ),
            _ => panic!("expected bench"),
        }
        match parse(&args(&["bench"])) {
            Ok(Task::Bench(options)) => assert!(options.only.is_empty()),
            _ => panic!("expected bench"),
        }
        match parse(&args(&["bench", "--only", "cluster"])) {
            Ok(Task::Bench(options)) => assert_eq!(options.only, vec![bench::Section::Cluster]),
            _ => panic!("expected bench"),
        }
        assert!(parse(&args(&["bench", "--only", "sharding"])).is_err());
        assert!(parse(&args(&["bench", "--only"])).is_err());
    }

    #[test]
    fn sim_passes_its_arguments_through() {
        match parse(&args(&["sim", "--seeds", "3", "--faults", "crash"])) {
            Ok(Task::Sim(rest)) => assert_eq!(rest, args(&["--seeds", "3", "--faults", "crash"])),
            _ => panic!("expected the sim task"),
        }
        assert!(matches!(parse(&args(&["sim", "--help"])), Ok(Task::Help)));
    }

    #[test]
    fn unknown_subcommand() {
        assert!(parse(&args(&["deploy"])).is_err());
    }
}
