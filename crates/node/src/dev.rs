//! `slotraft dev`: a local cluster in one command. It starts cluster-enabled
//! nodes as child processes (data under one directory), forms the cluster on
//! the first run, starts a router (`slotraft router`, a child process too) for
//! clients without cluster support, prints how to connect, and on Ctrl-C (or
//! SIGTERM) stops the router and the nodes cleanly. A second run on the same directory restarts the same cluster
//! with its data.

use crate::admin;
use crate::resp_client::call;
use anyhow::{bail, Context as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct DevOptions {
    pub dir: PathBuf,
    /// Client port of the first node; node `i` listens on `port + i`.
    pub port: u16,
    /// Raft port of the first node; node `i` uses `raft_port + i`.
    pub raft_port: u16,
    pub nodes: usize,
    pub shards: usize,
    pub replicas: usize,
    /// Client port of the router.
    pub router_port: u16,
}

/// How long a node may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long a node may take to stop after SIGTERM before it is killed.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// The child processes (nodes, then the router), with names for messages.
struct Nodes {
    children: Vec<Child>,
    names: Vec<String>,
}

impl Nodes {
    /// Asks every node to stop (SIGTERM), then kills what is left.
    fn stop(&mut self) {
        for child in &self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + STOP_LIMIT;
        for child in &mut self.children {
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        self.children.clear();
        self.names.clear();
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.stop();
    }
}

fn address(options: &DevOptions, index: usize) -> String {
    format!("127.0.0.1:{}", options.port as usize + index)
}

fn spawn_node(options: &DevOptions, index: usize) -> anyhow::Result<Child> {
    let dir = options.dir.join(format!("node-{}", index + 1));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("node.log"))
        .with_context(|| format!("opening the log in {}", dir.display()))?;
    let executable = std::env::current_exe().context("finding the slotraft executable")?;
    Command::new(executable)
        .args(["node", "--cluster-enabled", "yes", "--bind", "127.0.0.1"])
        .args(["--port", &(options.port as usize + index).to_string()])
        .args([
            "--raft-port",
            &(options.raft_port as usize + index).to_string(),
        ])
        .arg("--dir")
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting a node")
}

fn spawn_router(options: &DevOptions, seeds: &[String]) -> anyhow::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(options.dir.join("router.log"))
        .with_context(|| format!("opening router.log in {}", options.dir.display()))?;
    let executable = std::env::current_exe().context("finding the slotraft executable")?;
    Command::new(executable)
        .args(["router", "--bind", "127.0.0.1"])
        .args(["--port", &options.router_port.to_string()])
        .args(["--seeds", &seeds.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting the router")
}

async fn wait_accepting(address: &str, child: &mut Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_LIMIT;
    loop {
        if let Ok(resp::Frame::Simple(_)) = call(address, &[b"PING"]).await {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!("the process on {address} exited at start ({status}); see its log");
        }
        if Instant::now() > deadline {
            bail!(
                "the node on {address} did not start within {}s",
                START_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn created_marker(dir: &Path) -> PathBuf {
    dir.join("cluster.created")
}

pub async fn run(options: DevOptions, seed: u64) -> anyhow::Result<()> {
    if options.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    std::fs::create_dir_all(&options.dir)
        .with_context(|| format!("creating {}", options.dir.display()))?;
    let dir = options
        .dir
        .canonicalize()
        .unwrap_or_else(|_| options.dir.clone());
    let options = DevOptions { dir, ..options };
    let mut nodes = Nodes {
        children: Vec::new(),
        names: Vec::new(),
    };
    for index in 0..options.nodes {
        nodes.children.push(spawn_node(&options, index)?);
        nodes.names.push(format!("node {}", index + 1));
    }
    let addresses: Vec<String> = (0..options.nodes)
        .map(|index| address(&options, index))
        .collect();
    for (index, child) in nodes.children.iter_mut().enumerate() {
        wait_accepting(&addresses[index], child).await?;
    }
    let marker = created_marker(&options.dir);
    if marker.exists() {
        admin::wait_settled(&addresses, Duration::from_secs(60)).await?;
    } else {
        admin::create(&addresses, Some(options.shards), options.replicas, seed).await?;
        std::fs::write(&marker, b"created\n")?;
    }
    let router_address = format!("127.0.0.1:{}", options.router_port);
    let mut router = spawn_router(&options, &addresses)?;
    let started = wait_accepting(&router_address, &mut router).await;
    nodes.children.push(router);
    nodes.names.push("router".to_string());
    started?;
    println!();
    println!(
        "slotraft dev cluster ready: {} nodes, {} shards, {} replicas each",
        options.nodes, options.shards, options.replicas
    );
    println!("  data:    {}", options.dir.display());
    println!("  nodes:   {}", addresses.join(" "));
    println!("  router:  {router_address} (any Redis client, no cluster support needed)");
    println!("  connect: redis-cli -p {}", options.router_port);
    println!("  connect: redis-cli -c -p {}", options.port);
    println!("Press Ctrl-C to stop.");
    wait_for_stop(&mut nodes).await;
    println!("stopping the router and the nodes");
    nodes.stop();
    println!("stopped");
    Ok(())
}

/// Returns on Ctrl-C, SIGTERM, or when a node exits by itself.
async fn wait_for_stop(nodes: &mut Nodes) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("cannot install signal handlers; stopping");
        return;
    };
    let mut check = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = terminate.recv() => return,
            _ = interrupt.recv() => return,
            _ = check.tick() => {
                for (child, name) in nodes.children.iter_mut().zip(&nodes.names) {
                    if let Ok(Some(status)) = child.try_wait() {
                        eprintln!("{name} exited ({status}); stopping the others");
                        return;
                    }
                }
            }
        }
    }
}
