//! The local run killed as a closed terminal or `kill -9` kills it: its
//! Redis and Kafka run on (each in its own process group). The
//! next `seckill dev` on the same data must stop them, say so, and serve the
//! earlier run's data with servers of its own; and the README's "Try it"
//! block, pasted whole, works against it.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use seckill_devstack::{free_port, Server, StopSignal, TempDir};
use serde_json::{json, Value};

use crate::turn;

/// How much of the run's log a failure message shows.
const LOG_TAIL_LINES: usize = 120;

/// `seckill dev` on `data`, its ports fixed so a second run uses the same.
struct DevRun {
    ports: [u16; 7],
    data: std::path::PathBuf,
    /// Its output, and the pid file `Server` writes.
    run_dir: std::path::PathBuf,
}

impl DevRun {
    fn start(&self) -> Server {
        let [port, processor, projector, redis, broker, payments, beacon] = self.ports.map(|port| port.to_string());
        let mut command = Command::new(env!("CARGO_BIN_EXE_seckill"));
        command
            .args(["dev", "--data-dir"])
            .arg(&self.data)
            .args(["--port", &port, "--processor-port", &processor, "--projector-port", &projector])
            .args(["--redis-port", &redis, "--broker-port", &broker, "--payments-port", &payments])
            .args(["--beacon-port", &beacon])
            .env("RUST_LOG", "info");
        let addr = SocketAddr::from(([127, 0, 0, 1], self.ports[0]));
        // Kafka's JVM and the services' first group joins: more than a port's usual wait.
        let started = Server::spawn("seckill dev", command, &self.run_dir, "dev").and_then(|mut server| {
            server.wait_ready(addr, Duration::from_secs(120))?;
            Ok(server)
        });
        started
            .unwrap_or_else(|error| panic!("seckill dev did not start: {error}\n{}", self.log()))
            .stopped_by(StopSignal::Int)
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[0])
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir.join("dev.log")).unwrap_or_default()
    }

    /// The last lines of the run's log, for a failure message.
    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// The pids in the servers' pid files.
    fn server_pids(&self) -> [Option<u32>; 4] {
        let pid = |file: &str| {
            std::fs::read_to_string(self.data.join(file)).ok().and_then(|text| text.trim().parse::<u32>().ok())
        };
        [
            pid("redis/redis.pid"),
            pid("kafka/node-1/kafka.pid"),
            pid("payments/payments.pid"),
            pid("beacon/beacon-sandbox.pid"),
        ]
    }
}

/// Stops, when the test ends however it ends, the servers `seckill dev`
/// started in their own process groups (a failing assertion would otherwise
/// leave its Redis and Kafka running after the directory is gone).
struct StopsItsServers<'a>(&'a DevRun);

impl Drop for StopsItsServers<'_> {
    fn drop(&mut self) {
        for pid in self.0.server_pids().into_iter().flatten() {
            if running(pid) {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
        }
    }
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rfind(')').map(|end| stat[end + 1..].split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}

/// Places an order as `user` and waits until the view has it final.
async fn order(http: &reqwest::Client, run: &DevRun, voucher: &str, user: &str) -> Value {
    let answer = http
        .post(format!("{}/api/v1/vouchers/{voucher}/orders", run.base()))
        .header("x-user-id", user)
        .send()
        .await
        .expect("ingress answers");
    assert_eq!(answer.status(), StatusCode::ACCEPTED);
    let order: Value = answer.json().await.expect("json");
    read_final(http, run, order["order_id"].as_str().expect("order id"), user).await
}

async fn read_final(http: &reqwest::Client, run: &DevRun, order: &str, user: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = http.get(format!("{}/api/v1/orders/{order}", run.base())).header("x-user-id", user).send().await;
        if let Ok(answer) = answer {
            if answer.status() == StatusCode::OK {
                let body: Value = answer.json().await.expect("json");
                if body["status"] != "PENDING" {
                    return body;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "order {order} not final within 60 s; the run's log ends:\n{}",
            run.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The README's "Try it" block, as a new user pastes it.
fn try_it_block() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).expect("README");
    let (_, section) = readme.split_once("\n## Try it\n").expect("the README has a Try it section");
    let start = section.find("```sh\n").expect("a sh block in it") + "```sh\n".len();
    let end = start + section[start..].find("\n```").expect("the block ends");
    section[start..end].to_owned()
}

/// Pastes the README's "Try it" block into bash against `run`, from a
/// directory laid out as the block expects after `scripts/dev`: `.seckill`
/// (the run's data) and `target/release/seckill` (this build's binary). The
/// one change is the port (the block names the default, 8080). The block
/// ends with an event stream that never closes: it is cut after a while.
fn paste_try_it(run: &DevRun, dir: &Path) -> (Option<i32>, String) {
    let paste = dir.join("paste");
    std::fs::create_dir_all(paste.join("target/release")).expect("a directory to paste in");
    std::os::unix::fs::symlink(&run.data, paste.join(".seckill")).expect("links .seckill");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_seckill"), paste.join("target/release/seckill"))
        .expect("links the binary");
    let block = try_it_block().replace("http://127.0.0.1:8080", &run.base());
    let output =
        Command::new("timeout").args(["15", "bash", "-c", &block]).current_dir(&paste).output().expect("bash runs");
    (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
}

fn admin_token(data: &Path) -> String {
    std::fs::read_to_string(data.join("admin-token")).expect("the run's admin token").trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_local_run_leaves_servers_the_next_run_stops() {
    let _turn = turn().await;
    let dir = TempDir::new().expect("dir");
    let run =
        DevRun { ports: [(); 7].map(|()| free_port()), data: dir.path().join("data"), run_dir: dir.path().join("run") };
    std::fs::create_dir_all(&run.run_dir).expect("run dir");
    let _stops_its_servers = StopsItsServers(&run);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");

    let mut first = tokio::task::block_in_place(|| run.start());
    let now = chrono::Utc::now();
    let created: Value = http
        .post(format!("{}/api/v1/vouchers", run.base()))
        .header("authorization", format!("Bearer {}", admin_token(&run.data)))
        .json(&json!({
            "stock": 10, "per_user_limit": 1,
            "begins_at": now - chrono::Duration::seconds(1), "ends_at": now + chrono::Duration::hours(1),
        }))
        .send()
        .await
        .expect("ingress answers")
        .json()
        .await
        .expect("json");
    let voucher = created["voucher_id"].as_str().expect("voucher id").to_owned();
    let before = order(&http, &run, &voucher, "alice").await;
    assert_eq!(before["status"], "CREATED", "{before}");

    // The terminal closes: seckill dev dies at once, its servers run on.
    let orphans = run.server_pids().map(|pid| pid.expect("every server wrote its pid file"));
    first.kill();
    assert!(orphans.iter().all(|&pid| running(pid)), "the servers outlive the killed run");

    let mut second = tokio::task::block_in_place(|| run.start());
    assert!(orphans.iter().all(|&pid| !running(pid)), "the next run stopped every leftover server");
    let log = run.log();
    assert!(log.contains("stopping it"), "the next run says what it found:\n{log}");
    assert!(log.contains("stopped them, and starting afresh on the same data"), "{log}");
    let fresh = run.server_pids().map(|pid| pid.expect("pid files of the new servers"));
    assert!(fresh.iter().all(|pid| !orphans.contains(pid) && running(*pid)), "{fresh:?} vs {orphans:?}");

    // The earlier run's data is served, and the sale goes on.
    let order_id = before["order_id"].as_str().expect("order id");
    assert_eq!(read_final(&http, &run, order_id, "alice").await["status"], "CREATED");
    let after = order(&http, &run, &voucher, "bob").await;
    assert_eq!(after["status"], "CREATED", "{after}");

    // The README's Try it block works when pasted whole.
    let (status, pasted) = tokio::task::block_in_place(|| paste_try_it(&run, dir.path()));
    assert_eq!(status, Some(124), "only the final event stream is cut:\n{pasted}");
    for shown in [
        r#""status":"PENDING""#,
        "seckill-wait:",
        r#""phase":"#,
        "etag:",
        r#""unix_ms":"#,
        r#""requested":"confirm""#,
        r#""paused":true"#,
        r#""openapi":"#,
        "event:order",
    ] {
        assert!(pasted.to_lowercase().contains(&shown.to_lowercase()), "the Try it block shows {shown}:\n{pasted}");
    }

    // Ctrl-C stops everything it started.
    assert!(tokio::task::block_in_place(|| second.stop(Duration::from_secs(60))), "exit 0 on SIGINT:\n{}", run.log());
    assert!(fresh.iter().all(|&pid| !running(pid)), "Ctrl-C stopped every server");
    assert_eq!(run.server_pids(), [None, None, None, None], "and removed their pid files");
}
