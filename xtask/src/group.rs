//! A replicated slotraft shard for the benchmark: [`SIZE`] `slotraft node` processes on
//! 127.0.0.1 (Raft log fsync'd, the default), each of which can be SIGKILLed and restarted
//! on its own data directory and ports. Dropping the group kills every replica and removes
//! the data directories; the logs stay next to the other servers' logs.

use crate::server::{self, Launch, Server};
use crate::wire::{self, Conn};
use anyhow::{bail, Context as _, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Replicas per group.
pub const SIZE: usize = 3;
/// Attempts to start a group, each on fresh ports.
const START_ATTEMPTS: usize = 3;
/// How long a group may take to elect a leader and bring every replica up to date.
pub const WHOLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between two looks at the replicas' state.
const POLL: Duration = Duration::from_millis(20);
/// Bounds connecting to a replica and reading its INFO.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One replica as `INFO replication` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub node_id: u64,
    pub is_leader: bool,
    /// The leader this replica knows of, if any.
    pub leader_id: Option<u64>,
    pub term: u64,
    pub last_applied: u64,
}

/// Reads a [`Status`] from the text of `INFO replication`; `None` if it is not a Raft
/// replica's.
pub fn parse_status(info: &str) -> Option<Status> {
    let number = |field: &str| wire::info_text(info, field)?.trim().parse::<u64>().ok();
    Some(Status {
        node_id: number("raft_node_id")?,
        is_leader: wire::info_text(info, "role")?.trim() == "master",
        leader_id: number("raft_leader_id"),
        term: number("raft_term")?,
        last_applied: number("raft_last_applied")?,
    })
}

/// The index of the leader if the group is whole: every replica answers, exactly one says
/// it leads, all name it as leader, and every follower has applied what the leader has.
pub fn whole_leader(statuses: &[Option<Status>]) -> Option<usize> {
    let statuses: Vec<&Status> = statuses.iter().map(Option::as_ref).collect::<Option<_>>()?;
    let mut leaders = statuses.iter().enumerate().filter(|(_, s)| s.is_leader);
    let (index, leader) = leaders.next()?;
    if leaders.next().is_some() {
        return None;
    }
    let caught_up = statuses.iter().all(|status| {
        status.leader_id == Some(leader.node_id) && status.last_applied >= leader.last_applied
    });
    caught_up.then_some(index)
}

/// The `--group-members` value: `ID=127.0.0.1:PORT@RAFTPORT,...`.
pub fn members_option(members: &[(u64, u16, u16)]) -> String {
    members
        .iter()
        .map(|(id, port, raft_port)| format!("{id}=127.0.0.1:{port}@{raft_port}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The arguments of replica `id` listening on `port` and `raft_port`.
fn replica_args(id: u64, port: u16, raft_port: u16, members: &str, dir: &Path) -> Vec<String> {
    [
        "node",
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--raft-port",
        &raft_port.to_string(),
        "--node-id",
        &id.to_string(),
        "--group-members",
        members,
        "--dir",
        &dir.to_string_lossy(),
        "--raft-fsync",
        "yes",
        "--save",
        "",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect()
}

/// A running group; every replica is killed and the data removed when dropped.
pub struct Group {
    launches: Vec<Launch>,
    servers: Vec<Option<Server>>,
    /// Holds the replicas' data directories.
    dir: PathBuf,
}

impl Group {
    /// Starts [`SIZE`] replicas of `program` with logs in `work_dir` and waits until the
    /// group is whole (see [`whole_leader`]).
    pub fn start(program: &Path, work_dir: &Path) -> Result<Group> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(program, work_dir) {
                Ok(group) => return Ok(group),
                Err(error) => {
                    eprintln!("   the replica group did not start: {error:#}");
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
            .context("starting a replica group")
    }

    fn start_once(program: &Path, work_dir: &Path) -> Result<Group> {
        let ports = server::free_ports(SIZE * 2)?;
        let ids: Vec<(u64, u16, u16)> = (0..SIZE)
            .map(|index| (index as u64 + 1, ports[index * 2], ports[index * 2 + 1]))
            .collect();
        let members = members_option(&ids);
        let dir = work_dir.join(format!("group-{}", ports[0]));
        let _ = std::fs::remove_dir_all(&dir);
        let launches = ids
            .iter()
            .map(|&(id, port, raft_port)| {
                let data_dir = dir.join(format!("node-{id}"));
                Launch {
                    name: format!("slotraft-replica-{id}"),
                    program: program.to_path_buf(),
                    args: replica_args(id, port, raft_port, &members, &data_dir),
                    port,
                    data_dir,
                    log: work_dir.join(format!("slotraft-replica-{id}-{port}.log")),
                    owns_data: false,
                    check_process: true,
                }
            })
            .collect();
        let mut group = Group {
            launches,
            servers: (0..SIZE).map(|_| None).collect(),
            dir,
        };
        for index in 0..SIZE {
            group.restart(index)?;
        }
        group.wait_whole(WHOLE_TIMEOUT)?;
        Ok(group)
    }

    /// The client port of replica `index`.
    pub fn port(&self, index: usize) -> u16 {
        self.launches[index].port
    }

    /// Replica `index`, if it is running.
    pub fn server_mut(&mut self, index: usize) -> Result<&mut Server> {
        self.servers[index]
            .as_mut()
            .with_context(|| format!("replica {} is not running", index + 1))
    }

    /// What replica `index` reports, `None` if it is down or does not answer.
    pub fn status(&self, index: usize) -> Option<Status> {
        self.servers[index].as_ref()?;
        let mut conn = Conn::connect(self.port(index), PROBE_TIMEOUT).ok()?;
        parse_status(&wire::info(&mut conn, "replication").ok()?)
    }

    fn statuses(&self) -> Vec<Option<Status>> {
        (0..SIZE).map(|index| self.status(index)).collect()
    }

    /// Waits until the group is whole and returns its leader's index and status.
    pub fn wait_whole(&mut self, timeout: Duration) -> Result<(usize, Status)> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            let statuses = self.statuses();
            if let Some(index) = whole_leader(&statuses) {
                if let Some(status) = statuses[index].clone() {
                    return Ok((index, status));
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "the group was not whole (all replicas up, one leader, followers caught \
                     up) within {}s; last statuses: {statuses:?}",
                    timeout.as_secs()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Fails if a replica that should be running has exited.
    fn check_running(&mut self) -> Result<()> {
        for server in self.servers.iter_mut().flatten() {
            if !server.alive() {
                bail!("{} exited; log tail:\n{}", server.name, server.log_tail());
            }
        }
        Ok(())
    }

    /// SIGKILLs replica `index`; returns the moment the signal was sent.
    pub fn kill(&mut self, index: usize) -> Result<Instant> {
        let mut server = self.servers[index]
            .take()
            .with_context(|| format!("replica {} is not running", index + 1))?;
        Ok(server.kill())
    }

    /// Starts replica `index` (again) on its ports and data directory and waits until it
    /// answers PING.
    pub fn restart(&mut self, index: usize) -> Result<()> {
        if self.servers[index].is_some() {
            bail!("replica {} is already running", index + 1);
        }
        self.servers[index] = Some(Server::launch(&self.launches[index])?);
        Ok(())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for server in self.servers.iter_mut().flatten() {
            server.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEADER_INFO: &str = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
        master_repl_offset:7\r\nraft_node_id:2\r\nraft_leader_id:2\r\nraft_term:3\r\n\
        raft_last_log_index:7\r\nraft_last_applied:7\r\n";

    fn status(node_id: u64, is_leader: bool, leader_id: Option<u64>, applied: u64) -> Status {
        Status {
            node_id,
            is_leader,
            leader_id,
            term: 3,
            last_applied: applied,
        }
    }

    #[test]
    fn parses_a_leader() {
        assert_eq!(parse_status(LEADER_INFO), Some(status(2, true, Some(2), 7)));
    }

    #[test]
    fn parses_a_follower_without_leader() {
        let info = "role:slave\r\nmaster_link_status:down\r\nraft_node_id:1\r\n\
                    raft_leader_id:\r\nraft_term:4\r\nraft_last_applied:0\r\n";
        let parsed = parse_status(info);
        assert_eq!(parsed.as_ref().map(|s| s.leader_id), Some(None));
        assert_eq!(parsed.map(|s| s.is_leader), Some(false));
    }

    #[test]
    fn plain_redis_is_not_a_replica() {
        assert_eq!(parse_status("# Replication\r\nrole:master\r\n"), None);
    }

    #[test]
    fn whole_group_needs_everyone_caught_up() {
        let leader = Some(status(2, true, Some(2), 7));
        let follower = |applied| Some(status(1, false, Some(2), applied));
        let other = Some(status(3, false, Some(2), 7));
        assert_eq!(
            whole_leader(&[follower(7), leader.clone(), other.clone()]),
            Some(1)
        );
        assert_eq!(
            whole_leader(&[follower(6), leader.clone(), other.clone()]),
            None
        );
        assert_eq!(whole_leader(&[None, leader.clone(), other.clone()]), None);
        let confused = Some(status(1, false, None, 7));
        assert_eq!(whole_leader(&[confused, leader, other]), None);
    }

    #[test]
    fn two_leaders_are_not_whole() {
        let one = Some(status(1, true, Some(1), 5));
        let two = Some(status(2, true, Some(1), 5));
        assert_eq!(whole_leader(&[one, two]), None);
    }

    #[test]
    fn a_group_that_cannot_start_is_reported_and_removed() {
        let work_dir =
            std::env::temp_dir().join(format!("xtask-group-test-{}", std::process::id()));
        let error = Group::start(Path::new("/bin/false"), &work_dir)
            .err()
            .map(|error| format!("{error:#}"))
            .unwrap_or_default();
        let leftovers: Vec<String> = std::fs::read_dir(&work_dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .filter(|name| name.starts_with("group-"))
                    .collect()
            })
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&work_dir);
        assert!(error.contains("exited during startup"), "{error}");
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn member_list_and_arguments() {
        let members = members_option(&[(1, 7001, 8001), (2, 7002, 8002)]);
        assert_eq!(members, "1=127.0.0.1:7001@8001,2=127.0.0.1:7002@8002");
        let args = replica_args(2, 7002, 8002, &members, Path::new("/d/node-2")).join(" ");
        assert_eq!(
            args,
            format!(
                "node --bind 127.0.0.1 --port 7002 --raft-port 8002 --node-id 2 \
                 --group-members {members} --dir /d/node-2 --raft-fsync yes --save "
            )
        );
    }
}
