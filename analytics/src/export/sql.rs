//! The queries of docs/ANALYSTS.md "SQL over the log", run by DuckDB (the
//! Python package `scripts/setup --tests` installs) over scripted sales
//! exported to Parquet, each answer checked against what `seckill stats`,
//! `report` and `audit` compute from the same log. `--nocapture` prints
//! the answers the page shows.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::tests::lines;
use super::*;
use crate::sale::draw_script::{draw_sale, PROMOTED, STOCK};
use crate::sale::queue_script::queue_sale;
use crate::sale::script::{busy_sale, paid_sale, Script};
use crate::sale::{Room, Timeline};
use crate::stats::{nearest_rank, Stats};

/// Runs the queries named in its input (JSON `{name: sql}`), prints JSON
/// `{name: rows}` with times in ISO 8601.
const RUNNER: &str = r#"
import datetime, decimal, json, sys
import duckdb
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
def cell(v):
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v
out = {}
for name, sql in json.load(sys.stdin).items():
    out[name] = [[cell(v) for v in row] for row in con.execute(sql).fetchall()]
print(json.dumps(out))
"#;

/// The Python `scripts/setup --tests` installs DuckDB into.
fn python() -> PathBuf {
    let path = std::env::var_os("SECKILL_DUCKDB_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        home.join(".local/share/seckill/duckdb/bin/python")
    });
    assert!(path.exists(), "{} is missing: run scripts/setup --tests (it installs DuckDB)", path.display());
    path
}

/// The `sql` blocks of the page's "SQL over the log", by their first line
/// (`-- name`).
fn queries() -> BTreeMap<String, String> {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ANALYSTS.md"))
        .expect("docs/ANALYSTS.md");
    let section = page.split("## For analysts: SQL over the log").nth(1).expect("the section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut queries = BTreeMap::new();
    for block in section.split("```sql\n").skip(1) {
        let sql = block.split("```").next().expect("a closed block");
        let name = sql.lines().next().and_then(|line| line.strip_prefix("-- ")).expect("a `-- name` first line");
        queries.insert(name.to_owned(), sql.to_owned());
    }
    queries
}

/// Exports `script` into `sale/` of a fresh directory and runs the
/// queries `names` there.
fn answers(script: &Script, names: &[&str]) -> BTreeMap<String, Vec<Vec<Value>>> {
    let records: Vec<Envelope> = script.records.iter().map(|(envelope, _)| envelope.clone()).collect();
    let dir = tempfile::tempdir().expect("a directory");
    let summary =
        export_lines(lines(&records).as_bytes(), "sale.jsonl", &ExportOptions::default(), &dir.path().join("sale"))
            .expect("exported");
    assert_eq!(summary.written(), records.len() as u64);
    let queries = queries();
    let wanted: BTreeMap<&str, &String> =
        names.iter().map(|name| (*name, queries.get(*name).unwrap_or_else(|| panic!("no query {name:?}")))).collect();
    let mut child = Command::new(python())
        .arg("-c")
        .arg(RUNNER)
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::to_string(&wanted).expect("JSON").as_bytes())
        .expect("queries written");
    let output = child.wait_with_output().expect("python ends");
    assert!(output.status.success(), "DuckDB failed: {}", String::from_utf8_lossy(&output.stderr));
    let answers: BTreeMap<String, Vec<Vec<Value>>> = serde_json::from_slice(&output.stdout).expect("JSON answers");
    for (name, rows) in &answers {
        println!("-- {name}");
        for row in rows {
            println!("{}", Value::from(row.clone()));
        }
    }
    answers
}

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().expect("a time")).expect("ISO 8601").with_timezone(&Utc)
}

fn close(got: &Value, want: Option<f64>) -> bool {
    match (got.as_f64(), want) {
        (Some(got), Some(want)) => (got - want).abs() < 1e-6,
        (None, None) => got.is_null(),
        _ => false,
    }
}

#[test]
fn the_pages_queries_are_all_there() {
    let names: Vec<String> = queries().into_keys().collect();
    assert_eq!(
        names,
        [
            "202 to decided latency",
            "orders per second",
            "queue wait by pre-queue place",
            "refunds by reason",
            "the draw's winners",
            "time to sold out"
        ]
    );
}

#[test]
fn orders_per_second_sold_out_and_latency_equal_stats_and_the_report() {
    let script = busy_sale();
    let sale = script.sale();
    let answers = answers(&script, &["orders per second", "time to sold out", "202 to decided latency"]);

    let timeline = Timeline::of(&sale.log, &sale.stats);
    assert_eq!(timeline.buckets.width_s, 1, "the report counts per second on this sale");
    let expected: Vec<Vec<Value>> = timeline
        .accepted
        .iter()
        .enumerate()
        .filter(|(_, outcomes)| outcomes.iter().sum::<u64>() > 0)
        .map(|(i, outcomes)| vec![json!(timeline.buckets.start(i).to_rfc3339()), json!(outcomes.iter().sum::<u64>())])
        .collect();
    assert_eq!(answers["orders per second"], expected);
    let total: u64 = answers["orders per second"].iter().map(|row| row[1].as_u64().expect("a count")).sum();
    assert_eq!(total, sale.stats.accepted);

    let sold_out = &answers["time to sold out"];
    assert_eq!(sold_out.len(), 1, "sold out: {sold_out:?}");
    assert_eq!(Some(time(&sold_out[0][0])), sale.stats.sold_out_at);
    assert!(close(&sold_out[0][1], sale.stats.sell_out_ms), "{sold_out:?} vs {:?}", sale.stats.sell_out_ms);

    let latency = &answers["202 to decided latency"][0];
    assert_eq!(latency[0].as_u64(), Some(sale.stats.created + sale.stats.failed));
    assert!(close(&latency[1], sale.stats.latency_p50_ms), "{latency:?} vs {:?}", sale.stats.latency_p50_ms);
    assert!(close(&latency[2], sale.stats.latency_p99_ms), "{latency:?} vs {:?}", sale.stats.latency_p99_ms);
}

#[test]
fn a_sale_not_sold_out_has_no_sell_out_row() {
    let mut script = Script::new(5, 2, 0);
    let order = script.accept("alice", 1, 0);
    script.decide(&order, 5);
    assert!(!script.sale().stats.sold_out);
    assert_eq!(answers(&script, &["time to sold out"])["time to sold out"], Vec::<Vec<Value>>::new());
}

#[test]
fn refunds_by_reason_equal_the_audits() {
    let script = paid_sale();
    let answers = answers(&script, &["refunds by reason"]);
    let revenue = script.sale().log.revenue();
    let got: BTreeMap<String, u64> = answers["refunds by reason"]
        .iter()
        .map(|row| (row[0].as_str().expect("a reason").to_owned(), row[1].as_u64().expect("a count")))
        .collect();
    let want: BTreeMap<String, u64> =
        revenue.refunded_by_reason.iter().map(|(reason, n)| ((*reason).to_owned(), *n)).collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 4, "every reason is in the scripted sale");
}

#[test]
fn queue_waits_equal_the_reports() {
    let script = queue_sale();
    let answers = answers(&script, &["queue wait by pre-queue place"]);
    let rows = &answers["queue wait by pre-queue place"];
    let room = Room::of(&script.sale().log);
    let wait = room.wait.expect("waits");
    assert_eq!(rows.len() as u64, wait.places);
    assert_eq!(rows.len() as u64, room.served);
    let mut waits: Vec<f64> = rows.iter().map(|row| row[3].as_f64().expect("a wait")).collect();
    waits.sort_by(f64::total_cmp);
    for (percentile, want) in [(50, wait.p50_ms), (90, wait.p90_ms), (99, wait.p99_ms), (100, wait.max_ms)] {
        let got = nearest_rank(&waits, percentile).expect("a wait");
        assert!((got - want).abs() < 1e-6, "p{percentile}: {got} from SQL, {want} from the report");
    }
    let pre_queue = rows.iter().filter(|row| row[1] == json!(true)).count() as u64;
    assert!(pre_queue > 0 && pre_queue < wait.places, "both kinds of place: {pre_queue}");
}

#[test]
fn the_draws_winners_equal_stats_and_the_logged_ranking() {
    let draw = draw_sale();
    let answers = answers(&draw.script, &["the draw's winners"]);
    let rows = &answers["the draw's winners"];
    let mut stats = Stats::new();
    for (envelope, _) in &draw.script.records {
        stats.apply(envelope);
    }
    let counted = stats.draws().into_iter().next().expect("a draw");
    assert_eq!(counted.winners, Some(STOCK));
    assert_eq!(counted.promoted, PROMOTED);
    assert_eq!(rows.len() as u64, STOCK + PROMOTED);
    for (row, rank) in rows.iter().zip(1u64..) {
        assert_eq!(row[0].as_u64(), Some(rank));
        assert_eq!(row[1].as_str(), Some(draw.ranking[rank as usize - 1].as_str()));
        assert_eq!(row[2].as_str(), Some(if rank <= STOCK { "drawn" } else { "promoted" }));
    }
}
