//! Shared plumbing: workspace paths, running child processes with time limits, the
//! installer for the Redis tools (`redis-server`, `redis-cli`, `redis-benchmark`) that the
//! integration tests and the benchmark compare against, and the installer for the real
//! cluster clients (redis-py, ioredis) that the cluster suite drives.

use anyhow::{bail, Context as _, Result};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Every Redis command-line tool the project's tests and benchmark use.
pub const REDIS_COMMANDS: [&str; 3] = ["redis-server", "redis-cli", "redis-benchmark"];

/// Debian packages that provide [`REDIS_COMMANDS`].
const REDIS_PACKAGES: [&str; 2] = ["redis-tools", "redis-server"];

/// How often waits poll a child process.
const POLL: Duration = Duration::from_millis(50);

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Cargo's target directory (`CARGO_TARGET_DIR` if set, else `<root>/target`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

/// A `cargo` command run from the workspace root, with no standard input.
pub fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(program);
    command.current_dir(workspace_root()).stdin(Stdio::null());
    command
}

/// The path of an executable named `name` on `PATH`, if any.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// A command line as a person would type it, for progress messages.
pub fn describe(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    for arg in command.get_args() {
        let arg = arg.to_string_lossy();
        if arg.is_empty() {
            words.push("\"\"".to_owned());
        } else if arg.contains(' ') {
            words.push(format!("'{arg}'"));
        } else {
            words.push(arg.into_owned());
        }
    }
    words.join(" ")
}

/// Waits for `child` until `timeout`; kills it when the time is up. `None` means killed.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(POLL);
    }
}

/// Runs `command` with inherited output; `Ok` only if it exits with success within `timeout`.
pub fn run_checked(command: &mut Command, timeout: Duration) -> Result<()> {
    let line = describe(command);
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start `{line}`"))?;
    match wait_bounded(&mut child, timeout)? {
        Some(status) if status.success() => Ok(()),
        Some(status) => bail!("`{line}` failed ({status})"),
        None => bail!(
            "`{line}` did not finish within {}s; killed",
            timeout.as_secs()
        ),
    }
}

/// The outcome of [`run_captured`].
pub struct Captured {
    /// `None` if the process was killed for running past its time limit.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Captured {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|status| status.success())
    }
}

/// Runs `command` capturing its output, killing it after `timeout`.
pub fn run_captured(command: &mut Command, timeout: Duration) -> Result<Captured> {
    let line = describe(command);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start `{line}`"))?;
    // Drain both pipes on their own threads so a chatty child never blocks on a full pipe.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let status = wait_bounded(&mut child, timeout)?;
    let collect = |handle: Option<std::thread::JoinHandle<String>>| {
        handle
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default()
    };
    Ok(Captured {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    })
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The first line of `program --version`, or a note saying why there is none.
pub fn version_of(program: &Path) -> String {
    match run_captured(
        Command::new(program).arg("--version"),
        Duration::from_secs(20),
    ) {
        Ok(out) if out.success() => out.stdout.lines().next().unwrap_or("").trim().to_owned(),
        Ok(out) => format!("unknown ({})", out.stderr.trim()),
        Err(error) => format!("unknown ({error:#})"),
    }
}

/// `cargo xtask tools`: make sure the Redis tools and the client libraries exist, then
/// print their versions and the environment the cluster suite reads.
pub fn install_and_report(force: bool) -> Result<()> {
    ensure_redis_tools(&REDIS_COMMANDS, force)?;
    for name in REDIS_COMMANDS {
        let path = find_in_path(name).with_context(|| format!("{name} not found"))?;
        println!("{name}: {} ({})", version_of(&path), path.display());
    }
    let clients = ensure_client_libraries()?;
    println!("redis-py: {REDIS_PY_VERSION}; ioredis: {IOREDIS_VERSION}");
    println!("\nTo run the client suites with plain cargo nextest, export:");
    for (name, value) in clients.environment() {
        println!("export {name}={}", value.to_string_lossy());
    }
    Ok(())
}

/// The redis-py release the cluster suite runs (`tests/clients/scenario.py`).
pub const REDIS_PY_VERSION: &str = "5.2.1";

/// The ioredis release the cluster suite runs (`tests/clients/scenario.js`).
pub const IOREDIS_VERSION: &str = "5.4.2";

/// Where [`ensure_client_libraries`] put the client libraries, and the interpreters that
/// run them.
pub struct ClientLibraries {
    /// A `python3` that has pip.
    pub python: PathBuf,
    /// A `pip install --target` directory holding redis-py: the `PYTHONPATH`.
    pub python_path: PathBuf,
    pub node: PathBuf,
    /// The `node_modules` directory holding ioredis: the `NODE_PATH`.
    pub node_path: PathBuf,
}

impl ClientLibraries {
    /// The variables the client suites (`tests/cluster/t20_clients.rs`) read.
    pub fn environment(&self) -> [(&'static str, OsString); 4] {
        [
            ("SLOTRAFT_PYTHON", self.python.clone().into_os_string()),
            (
                "SLOTRAFT_PYTHONPATH",
                self.python_path.clone().into_os_string(),
            ),
            ("SLOTRAFT_NODE", self.node.clone().into_os_string()),
            (
                "SLOTRAFT_NODE_PATH",
                self.node_path.clone().into_os_string(),
            ),
        ]
    }
}

/// Installs the pinned redis-py and ioredis under `target/clients/` unless they are
/// already there. Each goes into a directory named after its version, filled in a
/// scratch directory first and renamed into place, so a directory that exists is complete
/// and a second run costs two `stat`s. Nothing is installed outside `target/`.
pub fn ensure_client_libraries() -> Result<ClientLibraries> {
    let root = target_dir().join("clients");
    let python = find_in_path("python3").context(
        "python3 not found: the cluster suite runs redis-py scenarios (install python3 and pip)",
    )?;
    // A version manager's shim (pyenv) resolves the interpreter on every start and may
    // read the caller's directory: pass the tests the interpreter itself.
    let python = match run_captured(
        Command::new(&python).args(["-c", "import sys; print(sys.executable)"]),
        Duration::from_secs(30),
    ) {
        Ok(out) if out.success() && !out.stdout.trim().is_empty() => {
            PathBuf::from(out.stdout.trim())
        }
        _ => python,
    };
    let node = find_in_path("node").context(
        "node not found: the cluster suite runs ioredis scenarios (install nodejs and npm)",
    )?;

    let python_path = root.join(format!("python-redis-{REDIS_PY_VERSION}"));
    if !python_path.join("redis").join("cluster.py").is_file() {
        println!(
            "==> installing redis-py {REDIS_PY_VERSION} into {}",
            python_path.display()
        );
        install_into(&python_path, |scratch| {
            let mut pip = Command::new(&python);
            // Installing as root into a directory of our own is what we want.
            pip.env("PIP_ROOT_USER_ACTION", "ignore");
            pip.args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .args(["--no-compile", "--quiet", "--target"])
            .arg(scratch)
            .arg(format!("redis=={REDIS_PY_VERSION}"));
            pip
        })?;
    }

    let node_prefix = root.join(format!("node-ioredis-{IOREDIS_VERSION}"));
    let node_path = node_prefix.join("node_modules");
    if !node_path.join("ioredis").join("package.json").is_file() {
        let npm = find_in_path("npm").context(
            "npm not found: the cluster suite runs ioredis scenarios (install nodejs and npm)",
        )?;
        println!(
            "==> installing ioredis {IOREDIS_VERSION} into {}",
            node_prefix.display()
        );
        install_into(&node_prefix, |scratch| {
            let mut install = Command::new(&npm);
            install
                .args(["install", "--no-audit", "--no-fund", "--no-save"])
                .args(["--no-package-lock", "--loglevel=error", "--prefix"])
                .arg(scratch)
                .arg(format!("ioredis@{IOREDIS_VERSION}"));
            install
        })?;
    }
    Ok(ClientLibraries {
        python,
        python_path,
        node,
        node_path,
    })
}

/// Runs the installer `command(scratch)` into a fresh scratch directory beside
/// `destination`, then renames the scratch directory to `destination`.
fn install_into(destination: &Path, command: impl FnOnce(&Path) -> Command) -> Result<()> {
    let file_name = destination
        .file_name()
        .context("an install directory needs a name")?
        .to_string_lossy();
    let scratch = destination.with_file_name(format!("{file_name}.partial"));
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("cannot remove {}", scratch.display()))?;
    }
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let mut command = command(&scratch);
    println!("$ {}", describe(&command));
    run_checked(&mut command, Duration::from_secs(600))?;
    if destination.exists() {
        std::fs::remove_dir_all(destination)
            .with_context(|| format!("cannot remove {}", destination.display()))?;
    }
    std::fs::rename(&scratch, destination).with_context(|| {
        format!(
            "cannot rename {} to {}",
            scratch.display(),
            destination.display()
        )
    })
}

/// Installs the Debian Redis packages if any of `required` is not on `PATH` (or if
/// `force`), then makes sure the freshly installed `redis-server` is not left running as a
/// system service (the tests and the benchmark start their own servers on free ports).
pub fn ensure_redis_tools(required: &[&str], force: bool) -> Result<()> {
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| find_in_path(name).is_none())
        .collect();
    if missing.is_empty() && !force {
        return Ok(());
    }
    if missing.is_empty() {
        println!("==> installing {} (forced)", REDIS_PACKAGES.join(" "));
    } else {
        println!(
            "==> installing {} (missing: {})",
            REDIS_PACKAGES.join(" "),
            missing.join(", ")
        );
    }
    if find_in_path("apt-get").is_none() {
        bail!(
            "{} not found and there is no apt-get here; install redis-server, redis-cli \
             and redis-benchmark (Redis 7) by hand",
            missing.join(", ")
        );
    }
    let elevation = Elevation::detect()?;
    apt_get_update_once(elevation)?;
    let mut install = elevation.apt_get();
    install.args([
        "-o",
        "DPkg::Lock::Timeout=300",
        "install",
        "-y",
        "--no-install-recommends",
    ]);
    install.args(REDIS_PACKAGES);
    println!("$ {}", describe(&install));
    run_checked(&mut install, Duration::from_secs(900))?;
    stop_redis_service(elevation);
    let still_missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| find_in_path(name).is_none())
        .collect();
    if !still_missing.is_empty() {
        bail!(
            "{} still not on PATH after installing {}",
            still_missing.join(", "),
            REDIS_PACKAGES.join(" ")
        );
    }
    Ok(())
}

/// How to get root for apt-get and service control.
#[derive(Clone, Copy)]
enum Elevation {
    AlreadyRoot,
    /// `sudo -n`: never prompts (there may be no terminal), fails instead.
    Sudo,
}

impl Elevation {
    fn detect() -> Result<Self> {
        if is_root() {
            Ok(Elevation::AlreadyRoot)
        } else if find_in_path("sudo").is_some() {
            Ok(Elevation::Sudo)
        } else {
            bail!("installing packages needs root: run as root or install sudo")
        }
    }

    /// `program` run as root, with `DEBIAN_FRONTEND=noninteractive` and no standard input.
    fn command(self, program: &str) -> Command {
        let mut command = match self {
            Elevation::AlreadyRoot => {
                let mut command = Command::new(program);
                command.env("DEBIAN_FRONTEND", "noninteractive");
                command
            }
            Elevation::Sudo => {
                // sudo resets the environment, so pass the variable through `env`.
                let mut command = Command::new("sudo");
                command.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive", program]);
                command
            }
        };
        command.stdin(Stdio::null());
        command
    }

    fn apt_get(self) -> Command {
        self.command("apt-get")
    }
}

fn is_root() -> bool {
    // `Uid:` in /proc/self/status lists real, effective, saved and filesystem ids.
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(line) = status.lines().find(|line| line.starts_with("Uid:")) {
            return line.split_whitespace().nth(2) == Some("0");
        }
    }
    run_captured(Command::new("id").arg("-u"), Duration::from_secs(10))
        .map(|out| out.stdout.trim() == "0")
        .unwrap_or(false)
}

/// Runs `apt-get update` at most once per xtask process.
fn apt_get_update_once(elevation: Elevation) -> Result<()> {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let mut update = elevation.apt_get();
    update.arg("update");
    println!("$ {}", describe(&update));
    run_checked(&mut update, Duration::from_secs(600))
}

/// Stops (and on systemd disables) the `redis-server` service apt may have started.
/// Best effort: every failure is tolerated and only reported.
fn stop_redis_service(elevation: Elevation) {
    let quiet = |mut command: Command| {
        println!("$ {}", describe(&command));
        command.stdout(Stdio::null()).stderr(Stdio::null());
        if let Err(error) = run_checked(&mut command, Duration::from_secs(60)) {
            println!("   (ignored: {error:#})");
        }
    };
    if Path::new("/run/systemd/system").exists() && find_in_path("systemctl").is_some() {
        let mut stop = elevation.command("systemctl");
        stop.args(["stop", "redis-server"]);
        quiet(stop);
        let mut disable = elevation.command("systemctl");
        disable.args(["disable", "redis-server"]);
        quiet(disable);
    } else if find_in_path("service").is_some() {
        let mut stop = elevation.command("service");
        stop.args(["redis-server", "stop"]);
        quiet(stop);
    }
    // Without an init system the package scripts may still have left a daemon behind:
    // stop the one named in the package's pid file, by its id.
    for pid_file in [
        "/run/redis/redis-server.pid",
        "/var/run/redis/redis-server.pid",
    ] {
        let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !comm.trim().starts_with("redis-server") {
            continue;
        }
        println!("==> stopping the packaged redis-server (pid {pid})");
        let mut kill = elevation.command("sh");
        kill.args(["-c", "kill -TERM \"$1\"", "sh", &pid.to_string()]);
        quiet(kill);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
    }
    if crate::wire::ping(6379, Duration::from_millis(500)).is_ok() {
        println!(
            "warning: something still answers PING on 127.0.0.1:6379 (a redis-server service?)"
        );
    }
}
