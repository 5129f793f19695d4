//! Writing replayed records: JSON Lines (each event exactly as on the
//! topic) or CSV (one flat row per event), and the JSON form of a dead
//! letter shared with `seckill dead-letters list`.

use std::io::{BufWriter, Write};

use chrono::{DateTime, SecondsFormat};
use rdkafka::message::{Headers, Message};
use seckill_core::{Envelope, Event};

use super::{Filter, ReplayError, Summary};

/// Output buffer: large writes keep a replay to /dev/null or a file cheap.
const BUFFER: usize = 256 * 1024;
/// Longest payload excerpt a dead letter's JSON carries.
const PAYLOAD_EXCERPT: usize = 512;
/// The `type` column of a dead letter's CSV row.
const DEAD_LETTER: &str = "DeadLetter";

/// The CSV header row.
pub const CSV_HEADER: &str =
    "topic,partition,offset,timestamp,type,event_id,voucher_id,order_id,user_id,quantity,status_or_reason,remaining";

/// How a replay writes events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// One record per line, byte for byte as on the topic (dead letters as
    /// a JSON object with their `dlq.*` headers).
    #[default]
    JsonLines,
    /// A header row, then one row per event; see [`CSV_HEADER`].
    Csv,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "jsonl" | "json" => Ok(Self::JsonLines),
            "csv" => Ok(Self::Csv),
            other => Err(format!("unknown format {other:?}: expected jsonl or csv")),
        }
    }
}

/// The writer side of a replay: decodes, filters, counts and writes.
pub(super) struct Output<'f, W: Write> {
    out: BufWriter<W>,
    format: Format,
    filter: &'f Filter,
}

impl<'f, W: Write> Output<'f, W> {
    /// Wraps `out`, writing the CSV header if CSV.
    pub(super) fn new(out: W, format: Format, filter: &'f Filter) -> Result<Self, ReplayError> {
        let mut out = BufWriter::with_capacity(BUFFER, out);
        if format == Format::Csv {
            writeln!(out, "{CSV_HEADER}")?;
        }
        Ok(Self { out, format, filter })
    }

    /// Handles one record, whose payload decoded as `decoded` (None: not
    /// an event), and counts what became of it.
    pub(super) fn record<M: Message>(
        &mut self,
        message: &M,
        dead_letter: bool,
        decoded: Option<Envelope>,
        summary: &mut Summary,
    ) -> Result<(), ReplayError> {
        if dead_letter {
            return self.dead_letter(message, decoded, summary);
        }
        let payload = message.payload().unwrap_or_default();
        let Some(envelope) = decoded else {
            summary.undecodable += 1;
            return Ok(());
        };
        if !self.filter.matches(&envelope) {
            summary.skipped += 1;
            return Ok(());
        }
        match self.format {
            Format::JsonLines if !payload.contains(&b'\n') => self.out.write_all(payload)?,
            // A multi-line record would break the one-per-line framing.
            Format::JsonLines => serde_json::to_writer(&mut self.out, &envelope).map_err(std::io::Error::from)?,
            Format::Csv => self.csv_row(message, envelope.kind(), Some(&envelope), csv_status(&envelope.event))?,
        }
        self.out.write_all(b"\n")?;
        summary.written += 1;
        Ok(())
    }

    fn dead_letter<M: Message>(
        &mut self,
        message: &M,
        parked: Option<Envelope>,
        summary: &mut Summary,
    ) -> Result<(), ReplayError> {
        // Dead letters are raw bytes; filters look at the parked event
        // when it is one, and an undecodable one matches only no filter.
        if !self.filter.is_empty() && !parked.as_ref().is_some_and(|envelope| self.filter.matches(envelope)) {
            summary.skipped += 1;
            return Ok(());
        }
        match self.format {
            Format::JsonLines => {
                serde_json::to_writer(&mut self.out, &describe_dead_letter(message)).map_err(std::io::Error::from)?
            }
            Format::Csv => {
                let reason = dead_letter_header(message, "dlq.reason").unwrap_or_default().to_owned();
                self.csv_row(message, DEAD_LETTER, parked.as_ref(), reason)?
            }
        }
        self.out.write_all(b"\n")?;
        summary.written += 1;
        Ok(())
    }

    /// One CSV row without its line end.
    fn csv_row<M: Message>(
        &mut self,
        message: &M,
        kind: &str,
        envelope: Option<&Envelope>,
        status: String,
    ) -> Result<(), ReplayError> {
        let out = &mut self.out;
        let timestamp = message
            .timestamp()
            .to_millis()
            .and_then(DateTime::from_timestamp_millis)
            .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
            .unwrap_or_default();
        csv_field(out, message.topic())?;
        write!(out, ",{},{},{timestamp},", message.partition(), message.offset())?;
        csv_field(out, kind)?;
        let event = envelope.map(|envelope| &envelope.event);
        match envelope {
            Some(envelope) => write!(out, ",{},{}", envelope.event_id, envelope.event.voucher_id())?,
            None => write!(out, ",,")?,
        }
        match event.and_then(order_id_of) {
            Some(order_id) => write!(out, ",{order_id}")?,
            None => write!(out, ",")?,
        }
        write!(out, ",")?;
        match event.and_then(Event::order) {
            Some(order) => {
                csv_field(out, order.user_id.as_str())?;
                write!(out, ",{}", order.quantity)?;
            }
            None => write!(out, ",")?,
        }
        write!(out, ",")?;
        csv_field(out, &status)?;
        match event.and_then(remaining_of) {
            Some(remaining) => write!(out, ",{remaining}")?,
            None => write!(out, ",")?,
        }
        Ok(())
    }

    /// Flushes everything written.
    pub(super) fn finish(&mut self) -> Result<(), ReplayError> {
        self.out.flush()?;
        Ok(())
    }
}

/// Writes `value` as one CSV field, quoted when it has to be.
fn csv_field(out: &mut impl Write, value: &str) -> std::io::Result<()> {
    if value.contains([',', '"', '\n', '\r']) {
        write!(out, "\"{}\"", value.replace('"', "\"\""))
    } else {
        out.write_all(value.as_bytes())
    }
}

fn order_id_of(event: &Event) -> Option<String> {
    match event {
        Event::CancelRequested(request) | Event::ConfirmRequested(request) => Some(request.order_id.to_string()),
        other => other.order().map(|order| order.order_id.to_string()),
    }
}

/// The `status_or_reason` column: why an order failed or was cancelled, or
/// what an update did to the sale.
fn csv_status(event: &Event) -> String {
    match event {
        Event::OrderFailed(e) => e.reason.as_str().to_owned(),
        Event::OrderCancelled(e) => e.reason.as_str().to_owned(),
        Event::CancelRequested(request) => request.reason.map(|reason| reason.as_str()).unwrap_or_default().to_owned(),
        Event::VoucherUpdated(update) => match update.paused {
            Some(true) => "paused".to_owned(),
            Some(false) => "resumed".to_owned(),
            None => String::new(),
        },
        _ => String::new(),
    }
}

/// The `remaining` column: persistent stock after the event (a new
/// voucher's is its stock).
fn remaining_of(event: &Event) -> Option<u64> {
    match event {
        Event::VoucherCreated(voucher) => Some(voucher.stock),
        Event::OrderCreated(e) => Some(e.remaining),
        Event::OrderCancelled(e) => Some(e.remaining),
        _ => None,
    }
}

/// A header of a dead letter as text.
pub fn dead_letter_header<'m, M: Message>(message: &'m M, key: &str) -> Option<&'m str> {
    let headers = message.headers()?;
    headers.iter().find(|header| header.key == key).and_then(|header| std::str::from_utf8(header.value?).ok())
}

/// A dead letter as one JSON object: why it was parked, by which service,
/// where it came from, its key and (an excerpt of) its payload as text.
pub fn describe_dead_letter<M: Message>(message: &M) -> serde_json::Value {
    let payload = String::from_utf8_lossy(message.payload().unwrap_or_default());
    let excerpt: String = payload.chars().take(PAYLOAD_EXCERPT).collect();
    serde_json::json!({
        "offset": message.offset(),
        "partition": message.partition(),
        "service": dead_letter_header(message, "dlq.service"),
        "reason": dead_letter_header(message, "dlq.reason"),
        "source": {
            "topic": dead_letter_header(message, "dlq.source.topic"),
            "partition": dead_letter_header(message, "dlq.source.partition").and_then(|p| p.parse::<i32>().ok()),
            "offset": dead_letter_header(message, "dlq.source.offset").and_then(|o| o.parse::<i64>().ok()),
        },
        "key": message.key().map(String::from_utf8_lossy),
        "payload": excerpt,
        "payload_bytes": message.payload().map_or(0, <[u8]>::len),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        let mut out = Vec::new();
        for value in ["plain", "a,b", "say \"hi\"", "two\nlines"] {
            csv_field(&mut out, value).expect("writes");
            out.push(b'|');
        }
        assert_eq!(String::from_utf8(out).expect("utf-8"), "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"|");
    }
}
