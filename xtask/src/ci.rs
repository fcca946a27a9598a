//! `cargo xtask ci`: the project's one test command. CI runs exactly this, as root on a
//! fresh Debian machine with no standard input; developers run it (or `--skip-lint`)
//! locally. Each step is printed before it runs; the first failure stops the run.

use crate::tools::{self, cargo, run_checked};
use anyhow::{Context as _, Result};
use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

/// Upper bound for any one cargo step (a cold build plus the whole test suite on two cores
/// fits well inside it).
const STEP_TIMEOUT: Duration = Duration::from_secs(90 * 60);

#[derive(Default)]
pub struct Options {
    /// Skip `cargo fmt --check` and `cargo clippy`.
    pub skip_lint: bool,
}

pub fn run(options: &Options) -> Result<()> {
    let started = Instant::now();
    step("test prerequisites: redis-server, redis-cli, redis-benchmark");
    tools::ensure_redis_tools(&tools::REDIS_COMMANDS, false)?;
    for name in tools::REDIS_COMMANDS {
        if let Some(path) = tools::find_in_path(name) {
            println!("{name}: {}", tools::version_of(&path));
        }
    }
    step("test prerequisites: redis-py and ioredis for the cluster client suites");
    let clients = tools::ensure_client_libraries()?;
    println!(
        "redis-py {} in {}\nioredis {} in {}",
        tools::REDIS_PY_VERSION,
        clients.python_path.display(),
        tools::IOREDIS_VERSION,
        clients.node_path.display()
    );
    let test_environment = clients.environment();

    if options.skip_lint {
        println!("==> skipping fmt and clippy (--skip-lint)");
    } else {
        cargo_step(["fmt", "--all", "--check"], &[])?;
        cargo_step(
            [
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            &[],
        )?;
    }
    cargo_step(["build", "--workspace"], &[])?;
    if nextest_available() {
        cargo_step(
            ["nextest", "run", "--workspace", "--no-fail-fast"],
            &test_environment,
        )?;
    } else {
        println!("(cargo-nextest is not installed; falling back to cargo test)");
        cargo_step(["test", "--workspace", "--no-fail-fast"], &test_environment)?;
    }
    println!("==> ci passed in {}s", started.elapsed().as_secs());
    Ok(())
}

fn step(name: &str) {
    println!("==> {name}");
}

/// Runs `cargo <args>` with `environment` added to xtask's own.
fn cargo_step<const N: usize>(args: [&str; N], environment: &[(&str, OsString)]) -> Result<()> {
    let mut command = cargo();
    command.args(args);
    command.envs(environment.iter().map(|(name, value)| (name, value)));
    step(&format!("cargo {}", args.join(" ")));
    let started = Instant::now();
    run_checked(&mut command, STEP_TIMEOUT).context("ci stopped at a failing step")?;
    println!("    ({}s)", started.elapsed().as_secs());
    Ok(())
}

fn nextest_available() -> bool {
    let mut probe: Command = cargo();
    probe.args(["nextest", "--version"]);
    tools::run_captured(&mut probe, Duration::from_secs(60))
        .map(|out| out.success())
        .unwrap_or(false)
}
