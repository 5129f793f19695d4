//! The report's HTML: one page, styles inline, the charts' SVG inline, a
//! section per voucher with its summary tables.
//!
//! The markup is also well-formed XML (every element closed, only XML's
//! own entities), so XML tools read the numbers back as easily as browsers
//! show them.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};

use super::charts;
use super::duration::duration;
use super::html::{escape, figure_row};
use super::About;
use crate::sale::{Books, Buyers, Money, Room, Timeline, VoucherSale};
use crate::AnalyticsError;

const STYLE: &str = r#"
:root { color-scheme: light; --ink: #222; --muted: #5a5a5a; --rule: #ddd; --panel: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--ink); background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 21px; margin: 36px 0 4px; padding-top: 12px; border-top: 2px solid var(--rule); }
h3 { font-size: 16px; margin: 0 0 6px; }
code { font: 13px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.about, .lede { color: var(--muted); margin: 0 0 10px; }
nav ul { margin: 6px 0 0; padding-left: 20px; }
.tables { display: grid; grid-template-columns: 1fr 0.7fr 1.6fr; gap: 16px; margin: 12px 0 8px; }
.tables.payments, .tables.queue, .tables.draw { grid-template-columns: 1.4fr 1fr; }
@media (max-width: 900px) { .tables, .tables.payments, .tables.queue, .tables.draw { grid-template-columns: 1fr; } }
.note { color: var(--muted); font-size: 13px; margin: 6px 0 0; }
.tables > div { background: var(--panel); border: 1px solid var(--rule); border-radius: 6px; padding: 10px 12px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--rule); vertical-align: top; }
td.n, th.n { text-align: right; }
tr:last-child > th, tr:last-child > td { border-bottom: 0; }
thead th { font-weight: 600; color: var(--muted); }
figure { margin: 22px 0 0; }
figcaption { font-weight: 600; margin-bottom: 4px; }
figcaption small { display: block; font-weight: 400; color: var(--muted); }
ul.key { list-style: none; margin: 2px 0 6px; padding: 0; display: flex; flex-wrap: wrap; gap: 4px 18px; }
ul.key li { display: flex; align-items: center; gap: 6px; }
ul.key span { display: inline-block; width: 18px; }
ul.key .bar { height: 12px; background: var(--c); }
ul.key .line { height: 0; border-top: 3px solid var(--c); }
ul.key .dashed { height: 0; border-top: 2px dashed var(--c); }
svg.chart { display: block; width: 100%; height: auto; border: 1px solid var(--rule); border-radius: 6px; }
"#;

/// The whole page.
pub(super) fn page(about: &About, sales: &[VoucherSale]) -> Result<String, AnalyticsError> {
    let mut html = String::new();
    let title = match sales {
        [one] => format!("Sale report: voucher {}", one.log.voucher_id),
        _ => format!("Sale report: {} vouchers", sales.len()),
    };
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n\
         <meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n<header>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = writeln!(
        html,
        "<p class=\"about\">Built from the log alone: the <code>{}</code> and <code>{}</code> topics as they were \
         at {} ({} records read). Every time is UTC.</p>",
        escape(&about.sales_topic),
        escape(&about.orders_topic),
        about.generated_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        about.records
    );
    if sales.len() > 1 {
        html.push_str("<nav><ul>\n");
        for sale in sales {
            let id = sale.log.voucher_id;
            let _ = writeln!(html, "<li><a href=\"#voucher-{id}\">voucher {id}</a></li>");
        }
        html.push_str("</ul></nav>\n");
    }
    html.push_str("</header>\n");
    if sales.is_empty() {
        html.push_str("<p>No voucher matched.</p>\n");
    }
    for sale in sales {
        section(&mut html, sale)?;
    }
    html.push_str("</main>\n</body>\n</html>\n");
    Ok(html)
}

/// One voucher: what it was, its tables, its charts.
fn section(html: &mut String, sale: &VoucherSale) -> Result<(), AnalyticsError> {
    let (log, stats) = (&sale.log, &sale.stats);
    let timeline = Timeline::of(log, stats);
    let books = log.books();
    let buyers = log.buyers();
    let id = log.voucher_id;
    let _ = writeln!(html, "<section class=\"sale\" id=\"voucher-{id}\" data-voucher=\"{id}\">");
    let _ = writeln!(html, "<h2>Voucher <code>{id}</code></h2>");
    let _ = writeln!(html, "<p class=\"lede\">{}</p>", escape(&lede(sale, &books)));

    html.push_str("<div class=\"tables\">\n");
    figures_table(html, sale, &books, &timeline);
    units_table(html, &buyers);
    top_users_table(html, &buyers);
    html.push_str("</div>\n");
    let takes_payments = log.takes_payments();
    if takes_payments {
        super::payments::tables(html, &log.revenue());
    }
    let room = log.queue_mode().then(|| Room::of(log));
    if let Some(room) = &room {
        super::queue::tables(html, room);
    }
    if log.draw_mode() {
        // Only a draw-mode log is refused, and this one is a draw.
        if let Ok(verification) = crate::draw::verify(log) {
            super::draw::tables(html, log, &verification);
        }
    }

    let mut charts = vec![
        (
            charts::accepted(&timeline)?,
            format!("Orders accepted {}, by final outcome", charts::per_bucket(&timeline.buckets)),
            "Each order in the time the gate accepted it, coloured by where it ended.",
        ),
        (
            charts::units_left(&timeline)?,
            "Units left".to_owned(),
            "What the gate had left (acceptances take units; failures, cancellations and added stock give them \
             back) and what the persistent stock had left (each decision's remaining). The dashed red line is \
             the sell-out: the acceptance of the order that took the last unit.",
        ),
        (
            charts::latency_over_time(&timeline)?,
            format!("Accept → decision latency {}", charts::per_bucket(&timeline.buckets)),
            "Of the orders accepted in each interval: the median (p50) and 99th percentile (p99) time from the \
             gate's acceptance to the processor's decision.",
        ),
        (
            charts::latency_distribution(&timeline.latency_bins)?,
            "Accept → decision latency, distribution".to_owned(),
            "How many orders were decided how fast, in bins growing 1-2-5.",
        ),
        (
            charts::cancellations(&timeline)?,
            format!("Cancellations and expiries {}", charts::per_bucket(&timeline.buckets)),
            "Cancellations by when they happened: asked for by the owner or an admin, expired (not paid or \
             claimed within the hold), or a paid order an admin refunded.",
        ),
        (
            charts::returned_and_resold(&timeline)?,
            "Units returned and sold again".to_owned(),
            "Units given back by cancellations, and units sold again after being given back (units are \
             interchangeable: creations beyond the units ever offered), both cumulative.",
        ),
    ];
    if takes_payments {
        charts.push((
            charts::payments(&timeline)?,
            format!("Payments paid and refunded {}", charts::per_bucket(&timeline.buckets)),
            "Payments the provider reported, by when it took the money (each payment once, whether it paid an \
             order or was refunded), beside the refunds it acknowledged, by when it made them.",
        ));
    }
    if let Some(room) = &room {
        charts.push((
            charts::waiting_room(room)?,
            "Waiting room".to_owned(),
            "Places taken in the waiting room, places served an entry and places skipped because their holder \
             had gone, all cumulative, on the room's own time axis (the pre-queue fills before the sale starts).",
        ));
    }
    for (chart, caption, explanation) in charts {
        let _ = writeln!(
            html,
            "<figure>\n<figcaption>{}<small>{}</small></figcaption>\n<ul class=\"key\">",
            escape(&caption),
            escape(explanation)
        );
        for entry in &chart.key {
            let mark = match entry.mark {
                charts::Mark::Bar => "bar",
                charts::Mark::Line => "line",
                charts::Mark::Dashed => "dashed",
            };
            let _ = writeln!(
                html,
                "<li><span class=\"{mark}\" style=\"--c: {}\"></span>{}</li>",
                entry.color,
                escape(&entry.name)
            );
        }
        let _ = writeln!(html, "</ul>\n{}</figure>", chart.svg);
    }
    html.push_str("</section>\n");
    Ok(())
}

/// The sale's definition in a sentence.
fn lede(sale: &VoucherSale, books: &Books) -> String {
    let Some(definition) = &sale.log.definition else {
        return "The log has no definition of this voucher (its VoucherCreated is missing).".to_owned();
    };
    let mut lede = format!(
        "Sale {} to {} UTC · {} units",
        definition.begins_at.format("%Y-%m-%d %H:%M:%S"),
        definition.ends_at.format("%Y-%m-%d %H:%M:%S"),
        definition.stock
    );
    if books.added_stock > 0 {
        let _ = write!(lede, " + {} added", books.added_stock);
    }
    let _ = write!(lede, " · at most {} per user", definition.per_user_limit);
    let price = definition.currency.filter(|_| definition.price > 0).map(|c| Money::new(c, definition.price));
    if let Some(price) = price {
        let _ = write!(lede, " · {price} per unit");
    }
    if let Some(queue) = &definition.queue {
        let _ = write!(lede, " · waiting room from {} UTC", queue.opens_at.format("%Y-%m-%d %H:%M:%S"));
    }
    if let Some(draw) = &definition.draw {
        let _ = write!(
            lede,
            " · a draw at {} UTC (entries from {} UTC), {} s to buy",
            draw.draw_at.format("%Y-%m-%d %H:%M:%S"),
            draw.entries_open_at.format("%Y-%m-%d %H:%M:%S"),
            draw.purchase_seconds
        );
    }
    if definition.hold_seconds > 0 {
        let unpaid = if price.is_some() { "unpaid" } else { "unclaimed" };
        let _ = write!(lede, " · {unpaid} orders expire after {} s", definition.hold_seconds);
    }
    lede
}

/// The `stats` figures and a few more from the books.
fn figures_table(html: &mut String, sale: &VoucherSale, books: &Books, timeline: &Timeline) {
    let stats = &sale.stats;
    let expired: u64 = timeline.cancellations.iter().map(|counts| counts[1]).sum();
    let time = |at: Option<DateTime<Utc>>| at.map(|at| at.format("%H:%M:%S%.3f UTC").to_string());
    let latency = match (stats.latency_p50_ms, stats.latency_p99_ms) {
        (Some(p50), Some(p99)) => Some(format!("{} / {}", duration(p50), duration(p99))),
        _ => None,
    };
    let rows: [(&str, &str, String, Option<String>); 16] = [
        ("stock", "units offered", stats.stock.to_string(), Some(stats.stock.to_string())),
        ("added_stock", "of which added", books.added_stock.to_string(), Some(books.added_stock.to_string())),
        ("accepted", "orders accepted", stats.accepted.to_string(), Some(stats.accepted.to_string())),
        ("created", "created", stats.created.to_string(), Some(stats.created.to_string())),
        ("failed", "failed", stats.failed.to_string(), Some(stats.failed.to_string())),
        ("cancelled", "cancelled", stats.cancelled.to_string(), Some(stats.cancelled.to_string())),
        ("expired", "of which expired", expired.to_string(), Some(expired.to_string())),
        ("paid", "paid", stats.paid.to_string(), Some(stats.paid.to_string())),
        ("units_sold", "units sold", stats.units_sold.to_string(), Some(stats.units_sold.to_string())),
        ("resold_units", "units sold again", books.resold_units.to_string(), Some(books.resold_units.to_string())),
        (
            "sold_out_at",
            "sold out at",
            time(stats.sold_out_at).unwrap_or_else(|| "not sold out".to_owned()),
            stats.sold_out_at.map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true)),
        ),
        (
            "sell_out_ms",
            "sell-out (first order → last unit)",
            stats.sell_out_ms.map_or_else(|| "–".to_owned(), duration),
            stats.sell_out_ms.map(|ms| ms.to_string()),
        ),
        (
            "sell_out_since_start_ms",
            "from the sale's start",
            stats.sell_out_since_start_ms.map_or_else(|| "–".to_owned(), duration),
            stats.sell_out_since_start_ms.map(|ms| ms.to_string()),
        ),
        (
            "latency_p50_ms",
            "accept → decision p50 / p99",
            latency.unwrap_or_else(|| "–".to_owned()),
            stats.latency_p50_ms.map(|ms| ms.to_string()),
        ),
        ("first_accepted_at", "first order", time(stats.first_accepted_at).unwrap_or_else(|| "–".to_owned()), None),
        ("pending", "undecided orders", books.pending.to_string(), Some(books.pending.to_string())),
    ];
    html.push_str("<div>\n<h3>Summary</h3>\n<table class=\"figures\">\n");
    for (field, label, shown, value) in rows {
        figure_row(html, field, label, &shown, value);
    }
    html.push_str("</table>\n</div>\n");
}

/// How many users ended up with how many units.
fn units_table(html: &mut String, buyers: &Buyers) {
    let _ = writeln!(
        html,
        "<div>\n<h3>Units per user</h3>\n<table class=\"units-per-user\" data-users=\"{}\">\n\
         <thead><tr><th class=\"n\">units held</th><th class=\"n\">users</th></tr></thead>\n<tbody>",
        buyers.users
    );
    for (units, users) in &buyers.units_per_user {
        let _ =
            writeln!(html, "<tr data-units=\"{units}\"><td class=\"n\">{units}</td><td class=\"n\">{users}</td></tr>");
    }
    let holding: u64 = buyers.units_per_user.values().sum();
    let _ = writeln!(
        html,
        "<tr data-units=\"0\"><td class=\"n\">0</td><td class=\"n\">{}</td></tr>\n</tbody>\n</table>\n</div>",
        buyers.users - holding
    );
}

/// The users with the most orders.
fn top_users_table(html: &mut String, buyers: &Buyers) {
    html.push_str(
        "<div>\n<h3>Top users by orders</h3>\n<table class=\"top-users\">\n<thead><tr><th>user</th>\
         <th class=\"n\">orders</th><th class=\"n\">units held</th><th class=\"n\">created</th>\
         <th class=\"n\">failed</th><th class=\"n\">cancelled</th></tr></thead>\n<tbody>\n",
    );
    for user in &buyers.top {
        let _ = writeln!(
            html,
            "<tr data-user=\"{}\"><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(user.user_id.as_str()),
            escape(user.user_id.as_str()),
            user.orders,
            user.units,
            user.created,
            user.failed,
            user.cancelled
        );
    }
    html.push_str("</tbody>\n</table>\n</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_elements_and_attributes() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
    }
}
