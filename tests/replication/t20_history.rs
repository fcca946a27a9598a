//! A history under leader kills: concurrent INCR and SET/GET clients while the
//! leader is killed twice. Every acknowledged INCR must be in the final value
//! (unknown outcomes may or may not be), and no read may return a value older
//! than one acknowledged before the read began.

use slotraft_tests::support::group::Group;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a request turned out as.
enum Outcome<T> {
    Ok(T),
    /// Certainly not applied (redirect, cluster down): safe to retry.
    Refused,
    /// May or may not have been applied.
    Unknown,
}

/// A client that follows the leader among the group's ports.
struct Client {
    ports: Vec<u16>,
    current: usize,
    connection: Option<redis::Connection>,
}

impl Client {
    fn new(ports: Vec<u16>) -> Client {
        Client {
            ports,
            current: 0,
            connection: None,
        }
    }

    fn connection(&mut self) -> Option<&mut redis::Connection> {
        if self.connection.is_none() {
            let url = format!("redis://127.0.0.1:{}/", self.ports[self.current]);
            let client = redis::Client::open(url).ok()?;
            let connection = client
                .get_connection_with_timeout(Duration::from_millis(500))
                .ok()?;
            connection
                .set_read_timeout(Some(Duration::from_secs(8)))
                .ok()?;
            self.connection = Some(connection);
        }
        self.connection.as_mut()
    }

    fn next_node(&mut self) {
        self.connection = None;
        self.current = (self.current + 1) % self.ports.len();
    }

    fn run<T: redis::FromRedisValue>(&mut self, command: &redis::Cmd) -> Outcome<T> {
        let Some(connection) = self.connection() else {
            self.next_node();
            return Outcome::Refused;
        };
        match command.query::<T>(connection) {
            Ok(value) => Outcome::Ok(value),
            Err(error) => match error.code() {
                Some("MOVED") => {
                    let port = error
                        .detail()
                        .and_then(|detail| detail.rsplit(':').next())
                        .and_then(|port| port.parse::<u16>().ok());
                    match port.and_then(|port| self.ports.iter().position(|p| *p == port)) {
                        Some(index) => {
                            self.current = index;
                            self.connection = None;
                        }
                        None => self.next_node(),
                    }
                    Outcome::Refused
                }
                Some("CLUSTERDOWN") => {
                    std::thread::sleep(Duration::from_millis(20));
                    self.next_node();
                    Outcome::Refused
                }
                Some("UNKNOWN") => {
                    self.next_node();
                    Outcome::Unknown
                }
                _ => {
                    // The connection broke or timed out mid-request.
                    self.next_node();
                    Outcome::Unknown
                }
            },
        }
    }
}

#[test]
fn acknowledged_writes_survive_two_leader_kills_and_reads_never_go_back() {
    let mut group = Group::start(3, &[]);
    let ports: Vec<u16> = group.members.iter().map(|member| member.port).collect();
    let stop = Arc::new(AtomicBool::new(false));

    // Counters: acknowledged and unknown INCRs per key.
    let counter_keys = ["counter:a", "counter:b"];
    let acknowledged: Arc<Vec<AtomicI64>> =
        Arc::new(counter_keys.iter().map(|_| AtomicI64::new(0)).collect());
    let unknown: Arc<Vec<AtomicI64>> =
        Arc::new(counter_keys.iter().map(|_| AtomicI64::new(0)).collect());
    // Registers: one writer each writes 1, 2, 3...; `floor` is the highest acknowledged.
    let register_keys = ["register:x", "register:y"];
    let floors: Arc<Vec<AtomicI64>> =
        Arc::new(register_keys.iter().map(|_| AtomicI64::new(0)).collect());
    let reads = Arc::new(AtomicU64::new(0));
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));

    let mut threads = Vec::new();
    for worker in 0..2 {
        let (stop, acknowledged, unknown, ports) = (
            stop.clone(),
            acknowledged.clone(),
            unknown.clone(),
            ports.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let mut client = Client::new(ports);
            let mut round = worker;
            while !stop.load(Ordering::Relaxed) {
                let key = round % counter_keys.len();
                round += 1;
                match client.run::<i64>(redis::cmd("INCR").arg(counter_keys[key])) {
                    Outcome::Ok(_) => {
                        acknowledged[key].fetch_add(1, Ordering::SeqCst);
                    }
                    Outcome::Unknown => {
                        unknown[key].fetch_add(1, Ordering::SeqCst);
                    }
                    Outcome::Refused => {}
                }
            }
        }));
    }
    for (key_index, key) in register_keys.into_iter().enumerate() {
        let (stop, floors, ports) = (stop.clone(), floors.clone(), ports.clone());
        threads.push(std::thread::spawn(move || {
            let mut client = Client::new(ports);
            let mut next = 1i64;
            while !stop.load(Ordering::Relaxed) {
                match client.run::<()>(redis::cmd("SET").arg(key).arg(next)) {
                    Outcome::Ok(()) => {
                        floors[key_index].fetch_max(next, Ordering::SeqCst);
                        next += 1;
                    }
                    // An unknown write may still land later: never reuse its value.
                    Outcome::Unknown => next += 1,
                    Outcome::Refused => {}
                }
            }
        }));
    }
    for _ in 0..2 {
        let (stop, floors, ports, reads, violations) = (
            stop.clone(),
            floors.clone(),
            ports.clone(),
            reads.clone(),
            violations.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let mut client = Client::new(ports);
            let mut last_seen = vec![0i64; register_keys.len()];
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = round % register_keys.len();
                round += 1;
                let floor = floors[key].load(Ordering::SeqCst);
                if let Outcome::Ok(value) =
                    client.run::<Option<i64>>(redis::cmd("GET").arg(register_keys[key]))
                {
                    let value = value.unwrap_or(0);
                    reads.fetch_add(1, Ordering::Relaxed);
                    if value < floor {
                        violations.lock().unwrap().push(format!(
                            "{}: read {value} after {floor} was acknowledged",
                            register_keys[key]
                        ));
                    }
                    if value < last_seen[key] {
                        violations.lock().unwrap().push(format!(
                            "{}: read {value} after reading {}",
                            register_keys[key], last_seen[key]
                        ));
                    }
                    last_seen[key] = last_seen[key].max(value);
                }
            }
        }));
    }

    let started = Instant::now();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(1500));
        let leader = group.wait_leader(Duration::from_secs(10));
        group.kill(leader);
        std::thread::sleep(Duration::from_millis(1500));
        group.spawn(leader);
    }
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let elapsed = started.elapsed();

    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    for (index, key) in counter_keys.iter().enumerate() {
        let value: Option<i64> = redis::cmd("GET").arg(*key).query(&mut connection).unwrap();
        let value = value.unwrap_or(0);
        let acked = acknowledged[index].load(Ordering::SeqCst);
        let maybe = unknown[index].load(Ordering::SeqCst);
        eprintln!("{key}: final {value}, acknowledged {acked}, unknown {maybe}");
        assert!(acked > 0, "no INCR was acknowledged on {key}");
        assert!(
            value >= acked && value <= acked + maybe,
            "{key}: final {value} outside [{acked}, {}]",
            acked + maybe
        );
    }
    eprintln!(
        "history: {} reads over {elapsed:?}, register floors {:?}",
        reads.load(Ordering::Relaxed),
        floors
            .iter()
            .map(|floor| floor.load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    );
    let violations = violations.lock().unwrap();
    assert!(
        violations.is_empty(),
        "linearizability violations: {violations:?}"
    );
    assert!(reads.load(Ordering::Relaxed) > 0);
}
