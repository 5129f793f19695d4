//! A headless Chromium driven over WebDriver: Debian's `chromium` and
//! `chromedriver` (installed by `scripts/setup`), a fresh profile per test,
//! and the flags that keep it off the network it cannot reach here.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use seckill_devstack::{free_port, TempDir};
use serde_json::json;

/// Where the tests leave screenshots for people to look at.
pub fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).expect("an artifacts directory");
    dir
}

/// A chromedriver and one browser session on it; both go when dropped,
/// the browser too: chromedriver runs in a process group of its own with
/// the Chromium it starts, and the whole group is killed (killing only
/// chromedriver, as a test that panics before [`Browser::close`] did,
/// left its Chromium running after the test).
pub struct Browser {
    pub client: Client,
    driver: tokio::process::Child,
    /// chromedriver's process group, until it is killed.
    group: Option<u32>,
    _profile: TempDir,
}

fn executable(name: &str) -> PathBuf {
    let path = Path::new("/usr/bin").join(name);
    assert!(path.exists(), "{} is missing: run scripts/setup (Debian's chromium and chromium-driver)", path.display());
    path
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless session.
    pub async fn start() -> Self {
        let port = free_port();
        let driver = tokio::process::Command::new(executable("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let group = driver.id();
        let profile = TempDir::new().expect("a profile directory");
        let mut capabilities = Capabilities::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": executable("chromium"),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-first-run", "--disable-quic", "--window-size=900,1300",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let client = loop {
            let mut builder = ClientBuilder::new(HttpConnector::new());
            match builder.capabilities(capabilities.clone()).connect(&url).await {
                Ok(client) => break client,
                // chromedriver takes a moment to listen.
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("no browser session on {url}: {error}"),
            }
        };
        Self { client, driver, group, _profile: profile }
    }

    /// Ends the session and the driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
        kill_group(self.group.take());
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        kill_group(self.group.take());
    }
}

/// SIGKILLs every process of the group `group` (chromedriver and its
/// Chromium), if any is left.
fn kill_group(group: Option<u32>) {
    if let Some(group) = group {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .stderr(Stdio::null())
            .status();
    }
}
