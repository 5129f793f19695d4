//! The link emulator (`devstack/netem/link_emulator.py`), which slows and
//! drops what netem would on kernels without it: a Redis on an emulated
//! host answers at once unimpaired, about twice the delay later when
//! delayed (within the jitter each way), loses about what the loss says
//! both ways, bounds what waits, and is back to normal once cleared or
//! healed; the cuts work on it as on a veth host; nothing is left once the
//! net is dropped, and a TAP device a killed run left is removed by the
//! next.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use seckill_devstack::{Host, Impairment, Redis, RedisPersistence, TempDir};

use crate::test_net;

/// One connection to a Redis, kept open so a round trip is the link's and
/// Redis's, not a connect's.
struct RedisLink {
    reader: BufReader<TcpStream>,
}

impl RedisLink {
    fn open(ip: Ipv4Addr) -> Self {
        let stream =
            TcpStream::connect_timeout(&SocketAddr::from((ip, 6379)), Duration::from_secs(2)).expect("connects");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self { reader: BufReader::new(stream) }
    }

    /// One `PING`'s round trip.
    fn ping(&mut self) -> Duration {
        let started = Instant::now();
        self.reader.get_mut().write_all(b"PING\r\n").expect("sends");
        let mut answer = String::new();
        self.reader.read_line(&mut answer).expect("answered");
        assert_eq!(answer.trim_end(), "+PONG");
        started.elapsed()
    }

    /// `n` round trips, sorted.
    fn pings(&mut self, n: usize) -> Vec<Duration> {
        let mut took: Vec<Duration> = (0..n).map(|_| self.ping()).collect();
        took.sort();
        took
    }
}

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

/// A UDP echo server on a host (port 7), stopped when dropped: UDP shows
/// the link's loss, which TCP would hide by resending.
struct Echo(Child);

/// Echoes every datagram back to its sender.
const ECHO: &str = "import socket\n\
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
s.bind(('0.0.0.0', 7))\n\
while True:\n    data, peer = s.recvfrom(2048)\n    s.sendto(data, peer)\n";

impl Echo {
    fn start(host: &Host) -> Self {
        Self(host.command("python3").args(["-c", ECHO]).spawn().expect("python3 runs"))
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A socket that sends to the echo on `ip`, once it answers.
fn echo_socket(ip: Ipv4Addr) -> UdpSocket {
    let socket = UdpSocket::bind("0.0.0.0:0").expect("binds");
    socket.connect((ip, 7)).expect("connects");
    socket.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        socket.send(b"ready?").expect("sends");
        if socket.recv(&mut buf).is_ok() {
            return socket;
        }
    }
    panic!("the echo on {ip} never answered");
}

/// Of `n` datagrams sent one at a time, each given 100 ms: how many came
/// back. Stale echoes (a numbered one not the last sent) are not counted.
fn echoes(socket: &UdpSocket, n: u32) -> u32 {
    let mut back = 0;
    let mut buf = [0u8; 64];
    for i in 0..n {
        socket.send(&i.to_be_bytes()).expect("sends");
        let deadline = Instant::now() + Duration::from_millis(100);
        while Instant::now() < deadline {
            match socket.recv(&mut buf) {
                Ok(4) if buf[..4] == i.to_be_bytes() => {
                    back += 1;
                    break;
                }
                Ok(_) => continue,
                Err(_) => break,
            }
        }
    }
    back
}

#[test]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
fn an_emulated_link_delays_drops_bounds_and_clears() {
    let dir = TempDir::new().expect("dir");
    let mut net = test_net();
    let host = net.emulated_host("redis").expect("an emulated host");
    assert!(host.is_emulated());
    let tag = host.netns().split("-h").next().expect("a tag").to_owned();
    let redis = Redis::start_on(&host, &dir.path().join("redis"), RedisPersistence::None).expect("redis on the host");
    let mut link = RedisLink::open(host.ip());

    let unimpaired = link.pings(50);
    println!(
        "[link emulator] unimpaired PING: median {:?}, max {:?}",
        median(&unimpaired),
        unimpaired.last().expect("some")
    );
    assert!(median(&unimpaired) < Duration::from_millis(10), "unimpaired is immediate: {unimpaired:?}");

    // 100 ms ± 50 ms each way: a round trip in [100, 300] ms, about 200.
    let delayed = Impairment { delay: Duration::from_millis(100), jitter: Duration::from_millis(50), loss: 0.0 };
    host.impair(delayed).expect("impair");
    let slow = link.pings(30);
    let (low, high) = (slow[0], *slow.last().expect("some"));
    println!("[link emulator] 100 ms ± 50 ms each way: PING median {:?}, min {low:?}, max {high:?}", median(&slow));
    assert!(
        (Duration::from_millis(160)..=Duration::from_millis(240)).contains(&median(&slow)),
        "about twice the delay: {slow:?}"
    );
    assert!(
        low >= Duration::from_millis(98) && high <= Duration::from_millis(340),
        "within the jitter each way: {slow:?}"
    );

    // Loss both ways: a round trip survives with (1 - p)^2.
    host.clear_impairment().expect("clear");
    let echo = Echo::start(&host);
    let socket = echo_socket(host.ip());
    let before = host.link_stats().expect("stats");
    host.impair(Impairment { delay: Duration::ZERO, jitter: Duration::ZERO, loss: 0.1 }).expect("impair");
    let sent = 300;
    let lost = f64::from(sent - echoes(&socket, sent)) / f64::from(sent);
    println!(
        "[link emulator] 10% loss each way: {:.1}% of {sent} UDP round trips lost (expected 19%); emulator before \
         {before}, after {}",
        lost * 100.0,
        host.link_stats().expect("stats")
    );
    assert!((0.10..=0.30).contains(&lost), "about 1 - 0.9^2 of round trips lost: {lost}");

    // A burst beyond what a direction may hold (1000 frames): the rest is
    // dropped and counted.
    host.impair(Impairment { delay: Duration::from_millis(300), jitter: Duration::ZERO, loss: 0.0 }).expect("impair");
    socket.set_read_timeout(Some(Duration::from_millis(1_500))).expect("timeout");
    for i in 0..2_500u32 {
        socket.send(&i.to_be_bytes()).expect("sends");
    }
    let mut came_back = 0;
    let mut buf = [0u8; 64];
    while socket.recv(&mut buf).is_ok() {
        came_back += 1;
    }
    let stats = host.link_stats().expect("stats");
    println!("[link emulator] a burst of 2500 datagrams at 300 ms: {came_back} echoed; emulator {stats}");
    assert!(came_back <= 1_000, "at most the bound waits: {came_back}");
    let overflow: u64 = stats
        .split_whitespace()
        .find_map(|field| field.strip_prefix("overflow="))
        .and_then(|n| n.parse().ok())
        .expect("an overflow count");
    // The kernel's own device queue may drop some before the emulator
    // reads them; what it reads beyond the bound it counts.
    assert!(overflow > 0, "the rest is dropped and counted: {stats}");
    drop(echo);

    host.clear_impairment().expect("clear");
    let cleared = link.pings(30);
    println!("[link emulator] cleared: PING median {:?}", median(&cleared));
    assert!(median(&cleared) < Duration::from_millis(10), "back to normal once cleared: {cleared:?}");

    // `heal` lifts an impairment too, and the cuts work on the TAP devices.
    host.impair(delayed).expect("impair");
    host.heal().expect("heal");
    assert!(median(&link.pings(10)) < Duration::from_millis(10), "heal clears the impairment");
    host.isolate().expect("isolate");
    let cut = TcpStream::connect_timeout(&SocketAddr::from((host.ip(), 6379)), Duration::from_secs(1));
    assert!(cut.is_err(), "an isolated emulated host is cut off");
    host.heal().expect("heal");
    assert!(median(&link.pings(10)) < Duration::from_millis(10), "and answers after the heal");

    let veth = net.host("plain").expect("a veth host");
    assert!(
        matches!(veth.impair(delayed), Err(seckill_devstack::NetError::NotEmulated(_))),
        "a veth host's link is not emulated"
    );

    drop(link);
    drop(redis);
    drop(net);
    let netns = Command::new("ip").args(["netns", "list"]).output().expect("ip runs");
    assert!(!String::from_utf8_lossy(&netns.stdout).contains(&tag), "the hosts are removed with the net");
    let links = Command::new("ip").args(["-o", "link", "show"]).output().expect("ip runs");
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&tag), "and every device, the TAP devices too");
    assert!(host.impair(delayed).is_err(), "the emulator is gone with the net");
}

#[test]
#[ignore = "needs network namespaces (root): scripts/test's partitions lane runs it"]
fn a_tap_device_a_killed_run_left_is_removed_by_the_next() {
    // A process that has exited: the names it made are leftovers.
    let mut gone = Command::new("true").spawn().expect("true runs");
    gone.wait().expect("exits");
    let mut pid = gone.id();
    let mut base36 = String::new();
    loop {
        base36.insert(0, char::from_digit(pid % 36, 36).expect("digit"));
        pid /= 36;
        if pid == 0 {
            break;
        }
    }
    // A persistent one: what an emulator leaves if it dies between making
    // a device and handing it on, or what `ip tuntap` leaves.
    let tap = format!("skn{base36}_0t1");
    let made = Command::new("ip").args(["tuntap", "add", "mode", "tap", "name", &tap]).status().expect("ip runs");
    assert!(made.success(), "a TAP device is made");

    let net = test_net();
    let links = Command::new("ip").args(["-o", "link", "show"]).output().expect("ip runs");
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&tap), "the leftover TAP device is removed");
    drop(net);
}
