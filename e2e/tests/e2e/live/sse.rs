//! A small Server-Sent Events client for the tests: reads events off a
//! response as they arrive.

use std::time::Duration;

use reqwest::{Response, StatusCode};

/// One event as sent: its `id:`, `event:` and `data:` lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// The data as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).expect("event data is JSON")
    }
}

/// An open event stream.
pub struct SseStream {
    response: Response,
    buffer: String,
}

impl SseStream {
    /// Opens `url` with `headers`; panics unless it answers `200` with an
    /// event stream.
    pub async fn open(http: &reqwest::Client, url: &str, headers: &[(&str, String)]) -> Self {
        let response = Self::request(http, url, headers).await;
        let status = response.status();
        assert_eq!(status, StatusCode::OK, "{url}: {}", response.text().await.unwrap_or_default());
        let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(content_type.starts_with("text/event-stream"), "{content_type}");
        Self { response, buffer: String::new() }
    }

    /// The answer to opening `url`, whatever it is.
    pub async fn request(http: &reqwest::Client, url: &str, headers: &[(&str, String)]) -> Response {
        let mut request = http.get(url).timeout(Duration::from_secs(3_600));
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.send().await.expect("the stream answers")
    }

    /// The next event within `within` (heartbeat comments are skipped);
    /// None when none came or the stream ended.
    pub async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(event) = self.take_event() {
                return Some(event);
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk()).await.ok()?.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Parses one complete event off the buffer, if there is one.
    fn take_event(&mut self) -> Option<SseEvent> {
        loop {
            let end = self.buffer.find("\n\n")?;
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut event = SseEvent::default();
            let mut fields = 0;
            for line in block.lines() {
                let (name, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match name {
                    "id" => event.id = Some(value.to_owned()),
                    "event" => event.event = Some(value.to_owned()),
                    "data" => {
                        if !event.data.is_empty() {
                            event.data.push('\n');
                        }
                        event.data.push_str(value);
                    }
                    _ => continue,
                }
                fields += 1;
            }
            if fields > 0 {
                return Some(event);
            }
        }
    }
}
