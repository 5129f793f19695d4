#!/usr/bin/env python3
"""Turns one bench/run's results into BENCHMARKS.md (printed to stdout).

Usage: bench/report.py RESULTS_DIR TUNING_NOTES.md
       bench/report.py --hot|--payments|--queue|--draw|--challenge RESULTS_DIR   (one section)

Each scenario's figure is shown with its target and its ratio to the ceiling
measured in the same run, on the same machine.
"""

import json
import re
import sys
from pathlib import Path

MIB = 1024.0


def wrk(path):
    """requests/s, p99 (ms), total and non-2xx answers from a wrk --latency report."""
    text = path.read_text()
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", text).groups()
    p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    total = int(re.search(r"(\d+) requests in", text).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {"rate": rate, "p99_ms": p99, "total": total, "non_2xx": int(non_2xx.group(1)) if non_2xx else 0}


def median_wrk(results, name):
    """The run with the median rate among `name.1.wrk`, `name.2.wrk`, ..., and every run's rate."""
    runs = sorted((wrk(path) for path in sorted(results.glob(f"{name}.*.wrk"))), key=lambda run: run["rate"])
    median = dict(runs[len(runs) // 2])
    median["runs"] = [run["rate"] for run in runs]
    median["all_requests"] = sum(run["total"] for run in runs)
    return median


def redis_benchmark(path):
    """calls/s and p99 (ms) from redis-benchmark --csv's data row (the test
    name holds the script's arguments, commas and quotes included, so the
    numbers are read from the end)."""
    fields = [f.strip('"') for f in path.read_text().strip().split(",")]
    return {"rate": float(fields[-7]), "p99_ms": float(fields[-2])}


def verdict(ok):
    return "**met**" if ok else "**missed**"


def ms(value):
    return f"{value:.2f} ms"


def live(results, name):
    """A read-side probe's JSON report, if the scenario ran."""
    path = results / f"{name}.live"
    return json.loads(path.read_text()) if path.exists() else None


def answers(results, name):
    """seckill_read_answers_total by (resource, source) from a metrics dump."""
    path = results / f"{name}.metrics"
    counts = {}
    if path.exists():
        for line in path.read_text().splitlines():
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            counts[(labels.get("resource"), labels.get("source"))] = float(line.rsplit(" ", 1)[1])
    return counts


def read_side(w, results, floor):
    """The read-side scenarios (6 to 9), against the same warp floor."""
    if not list(results.glob("page_storm.*.wrk")):
        return
    w("## The read side")
    w("")
    w("Voucher pages and order statuses answered from the ingress's memory, long-polls woken by the decisions, and")
    w("idle event streams; the services as separate processes, as above. Page storm and polling are driven by `wrk`")
    w("(2 threads, 64 connections, like the floor); waiters and streams by `live-probe` (`bench/src/live_probe/`),")
    w("over HTTP/2 with 150 requests per connection, as browsers behind a TLS load balancer send them (tens of")
    w("thousands of HTTP/1.1 connections do not fit this machine's 20,000 file descriptors per process).")
    w("")
    w("| # | scenario | measured | target | ratio to ceiling | result |")
    w("|---|---|---|---|---|---|")
    for name, label in (("page_storm", "page storm: one voucher, 64 connections"),
                        ("page_storm_revalidated", "page storm, each connection revalidating (`If-None-Match`)")):
        run = median_wrk(results, name)
        ok = run["rate"] >= 0.8 * floor["rate"] and run["p99_ms"] < 5
        w(f"| 6 | {label} | {run['rate']:,.0f} requests/s, p99 {ms(run['p99_ms'])} (runs "
          f"{', '.join(f'{r:,.0f}' for r in run['runs'])}) | ≥ 0.8 × warp floor, p99 < 5 ms "
          f"| {run['rate'] / floor['rate']:.2f} × warp floor | {verdict(ok)} |")
    counts = answers(results, "page_storm")
    if counts:
        total = sum(n for (resource, _), n in counts.items() if resource == "voucher")
        by_source = ", ".join(f"{source} {n:,.0f}" for (resource, source), n in sorted(counts.items()) if resource == "voucher")
        w(f"|  | voucher reads over both page storms, by source | {by_source} (of {total:,.0f}) | | | |")
    if list(results.glob("status_polling.*.wrk")):
        run = median_wrk(results, "status_polling")
        placed = live(results, "polling_place") or {}
        ok = run["rate"] >= 0.5 * floor["rate"] and run["p99_ms"] < 10
        counts = answers(results, "status_polling")
        sources = ", ".join(f"{source} {n:,.0f}" for (resource, source), n in sorted(counts.items()) if resource == "order")
        w(f"| 7 | status polling: {placed.get('admitted', 0):,} owners, each reading their own order with their own "
          f"token | {run['rate']:,.0f} requests/s, p99 {ms(run['p99_ms'])}; answers by source: {sources or '-'} "
          f"| ≥ 0.5 × warp floor, p99 < 10 ms | {run['rate'] / floor['rate']:.2f} × warp floor | {verdict(ok)} |")
    waiters = live(results, "waiters")
    if waiters:
        rss = live(results, "waiters_rss") or {"peak_rss_kb": 0}
        wake = waiters["wake_ms"]
        ok = (waiters["woken"] == waiters["waiters"] and wake["p99"] < 100 and rss["peak_rss_kb"] / MIB < 150)
        decided = waiters["since_decided_ms"]
        w(f"| 8 | {waiters['waiters']:,} long-polls on pending orders, then the decisions | {waiters['woken']:,} woken "
          f"(errors {waiters['errors']}); decision visible in the log → answer p50 {ms(wake['p50'])}, p99 "
          f"{ms(wake['p99'])}, max {ms(wake['max'])} (processor's decision → answer p50 {ms(decided['p50'])}, p99 "
          f"{ms(decided['p99'])}); ingress peak RSS {rss['peak_rss_kb'] / MIB:.0f} MiB | every waiter answered, "
          f"p99 < 100 ms, RSS < 150 MB | - | {verdict(ok)} |")
    streams = live(results, "streams")
    if streams:
        rss = live(results, "streams_rss") or {"rss_kb": 0}
        cpu = [json.loads(line) for line in (results / "cpu.jsonl").read_text().splitlines()]
        idle = next((row for row in cpu if row["scenario"] == "streams_idle" and row["process"] == "ingress"), None)
        idle_text = f"{idle['cpu_s'] / idle['wall_s']:.3f} cores" if idle else "-"
        w(f"| 9 | {streams['streams']:,} open user streams, idle | {streams['opened']:,} open; ingress RSS "
          f"{rss['rss_kb'] / MIB:.0f} MiB, idle CPU {idle_text} | reported | - | - |")
    w("")


def payments(w, results, floor):
    """Scenario 11: orders paid through the provider's sandbox, and the
    webhook route alone against the warp floor. Absent from older runs."""
    path = results / "payments.json"
    paid = json.loads(path.read_text()) if path.exists() else None
    route = median_wrk(results, "webhook_route") if list(results.glob("webhook_route.*.wrk")) else None
    if not (paid or route):
        return
    cpu = cpu_rows(results)
    w("## Payments")
    w("")
    w("Scenario 11: the orders of a priced voucher (2.50 EUR, one per user, ten minutes to pay), placed with")
    w("`live-probe place`, then paid by `live-probe payments`, 64 orders at a time: each owner asks the ingress for the")
    w("order's payment (`POST /api/v1/orders/{id}/payment`, which opens a checkout session at the provider and logs")
    w("it), parks a long-poll that")
    w("answers as soon as the order leaves CREATED (`GET /api/v1/orders/{id}?wait=30s&status=CREATED`), and pays at the")
    w("provider's test route. The provider is the payment sandbox (`seckill serve payments`, one more process on the")
    w("same two cores): it answers with the paid session, then delivers the signed `checkout.session.completed` callback,")
    w("which the ingress reads back from the provider (the session, its intent and charge) before logging the payment,")
    w("from its own queue, at most 32 deliveries at once, as a provider does. The latency is from the sandbox's answer")
    w("to the long-poll's. Then the webhook route alone: `wrk` (2 threads, 64 connections, like the floor) posting")
    w("signed `payment_intent.created` callbacks, each with its own event id, in turn (`bench/wrk/webhook.lua`), which")
    w("the ingress verifies (HMAC-SHA256), parses, checks against the callbacks it handled (Redis) and answers `200` as")
    w("ignored: the route's own cost, without the log's.")
    w("")
    w("| measured | figure | ratio to ceiling |")
    w("|---|---|---|")
    if paid:
        latency = paid["pay_to_paid_visible_ms"]
        errors = ", ".join(f"{reason} {n:,}" for reason, n in paid["errors"].items()) or "none"
        webhooks = paid.get("webhooks") or {}
        w(f"| orders paid and seen PAID by their owner | {paid['visible']:,} of {paid['orders']:,} (paid at the sandbox "
          f"{paid['paid']:,}; errors: {errors}) | - |")
        w(f"| payments per second (ask, pay, PAID visible; 64 at once) | {paid['payments_per_s']:,.0f}/s over "
          f"{paid['elapsed_s']:.1f} s | - |")
        w(f"| sandbox's pay answer → PAID visible to the owner | p50 {ms(latency['p50'])}, p90 {ms(latency['p90'])}, "
          f"p99 {ms(latency['p99'])}, max {ms(latency['max'])} ({latency['count']:,} orders) | - |")
        if "ask_ms" in paid:
            ask, pay = paid["ask_ms"], paid["pay_ms"]
            w(f"| the buyer's other steps: asking for the payment (the ingress has the provider create it) | p50 "
              f"{ms(ask['p50'])}, p99 {ms(ask['p99'])} ({paid['asked_while_pending']:,} orders still PENDING when "
              f"asked, waited on); paying at the sandbox: p50 {ms(pay['p50'])}, p99 {ms(pay['p99'])} | - |")
        w(f"| callbacks delivered by the sandbox (`GET /sandbox/ledger`) | {webhooks.get('delivered', 0):,} delivered, "
          f"{webhooks.get('failed', 0):,} failed, {webhooks.get('dropped', 0):,} dropped | - |")
        used = {p: cores(cpu, "payments", p) for p in ("ingress", "processor", "projector", "kafka", "redis", "sandbox")}
        if any(value is not None for value in used.values()):
            w("| cores used while paying | " + ", ".join(
                f"{p} {value:.2f}" for p, value in used.items() if value is not None) + " | - |")
    if route:
        ratio = f"{route['rate'] / floor['rate']:.2f} × warp floor" if floor else "-"
        refused = f"; {route['non_2xx']:,} not 2xx" if route["non_2xx"] else ""
        w(f"| webhook route: verify, parse, repeat check (wrk, median of {len(route['runs'])} runs: "
          f"{', '.join(f'{r:,.0f}' for r in route['runs'])}) | {route['rate']:,.0f} requests/s, p99 "
          f"{ms(route['p99_ms'])}{refused} | {ratio} |")
    w("")
    w("The payment rate is a closed loop of 64 buyers, each waiting for its own order to read PAID before the next")
    w("order starts, on the two cores the sandbox shares with the services, Kafka, Redis and the probe: it is bounded")
    w("by the latency above and by that sharing, not by the route taking the callbacks. The latency covers the")
    w("callback's delivery, its signature check, its `PaymentReceived` produced and acknowledged by Kafka, the")
    w("processor's `OrderPaid` decision and commit, and the ingress's follower waking the owner's long-poll. The wrk")
    w("row is how many callbacks the ingress can authenticate and read per second without logging them: a provider")
    signed = live(results, "webhook_route") or {}
    size = f" ({signed['mean_body_bytes']:,} bytes)" if signed.get("mean_body_bytes") else ""
    w("delivering at the measured payment rate uses a small share of it. The floor reads no body, so its ratio also")
    w(f"carries each callback's body{size} besides the HMAC, the JSON and the Redis round trip.")
    w("")


def waiting_room(w, results, floor):
    """Scenario 12: a queue-mode sale's waiting room under a crowd. Absent
    from older runs."""
    path = results / "queue.json"
    if not path.exists():
        return
    room = json.loads(path.read_text())
    metrics = {}
    metrics_path = results / "queue.metrics"
    if metrics_path.exists():
        for line in metrics_path.read_text().splitlines():
            name, _, value = line.rpartition(" ")
            metrics[name.split("{")[0]] = metrics.get(name.split("{")[0], 0) + float(value)
    rss_path = results / "queue_rss.jsonl"
    rss = json.loads(rss_path.read_text().splitlines()[0])["peak_rss_kb"] if rss_path.exists() else None
    cpu = cpu_rows(results)
    w("## Waiting room")
    w("")
    w("Scenario 12: a queue-mode sale (one unit per user, `queue_factor` 1.2, 2,000 entries a second, places idle")
    w("for 10 s skipped, entries valid 30 s). `live-probe queue` puts every user in the waiting room before the start")
    w("(`POST /api/v1/vouchers/{id}/queue`, 256 at once over HTTP/2), opens the place stream (`GET …/queue/me/stream`)")
    w("of every k-th of them and holds it, and after the start has a few more join, one after another (first come).")
    w("When a stream says `your_turn` its user orders with the entry token at once; the users without a stream are")
    w("gone, as most of a real crowd is by then, and their places are skipped when their turn comes. The push latency")
    w("is from the last unit's `202` to each waiting stream's `sold_out` event, as the probe (on the same two cores)")
    w("receives them.")
    w("")
    w("| measured | figure | ratio to ceiling |")
    w("|---|---|---|")
    ratio = f"{room['joins_per_s'] / floor['rate']:.2f} × warp floor" if floor else "-"
    w(f"| joins before the start | {room['pre_queue']:,} at {room['joins_per_s']:,.0f}/s (plus "
      f"{room['joined'] - room['pre_queue']:,} after it) | {ratio} |")
    w(f"| place streams held | {room['streams_opened']:,} of {room['streams']:,} ({room['stream_events']:,} events "
      f"pushed) | - |")
    last = room.get("last_unit_sold_after_start_ms")
    w(f"| last unit sold after the start | {ms(last) if last is not None else 'not sold out'} ({room['sold']:,} sold, "
      f"{room['refused_orders']:,} orders refused) | - |")
    issued = metrics.get("seckill_queue_entries_issued_total")
    expired = metrics.get("seckill_queue_places_expired_total")
    if issued is not None:
        w(f"| entry tokens issued / units | {issued:,.0f} / {room['sold']:,} ({expired or 0:,.0f} places skipped, "
          f"their holders gone) | - |")
    push = room["sold_out_push_ms"]
    w(f"| `sold_out` pushed to the waiting streams | p50 {ms(push['p50'])}, p90 {ms(push['p90'])}, p99 "
      f"{ms(push['p99'])}, max {ms(push['max'])} ({push['count']:,} streams) | - |")
    if rss is not None:
        w(f"| ingress peak RSS | {rss / 1024:,.0f} MiB | - |")
    pre, after = room.get("rank_correlation_pre_queue"), room.get("rank_correlation_after_start")
    fmt = lambda v: f"{v:+.3f}" if v is not None else "-"
    w(f"| rank correlation of arrival and place: pre-queue (shuffled) / after the start (first come) | {fmt(pre)} / "
      f"{fmt(after)} | - |")
    used = {p: cores(cpu, "queue", p) for p in ("ingress", "processor", "projector", "kafka", "redis")}
    if any(value is not None for value in used.values()):
        w("| cores used over the scenario | " + ", ".join(
            f"{p} {value:.2f}" for p, value in used.items() if value is not None) + " | - |")
    w("")


def load_json(path):
    """A JSON result, if the scenario wrote it."""
    return json.loads(path.read_text()) if path.exists() else None


def draws_and_bots(w, results, floor, admit):
    """Scenarios 13 (a draw of many entries: entered, made, verified) and 14
    (orders with proofs of work against the same orders without; the
    client's solving apart). Absent from older runs."""
    draw = load_json(results / "draw.json")
    solve = load_json(results / "challenge_solve.json")
    off = [load_json(p) for p in sorted(results.glob("challenge_off.*.json"))]
    on = [load_json(p) for p in sorted(results.glob("challenge_on.*.json"))]
    if not (draw or solve or off or on):
        return
    cpu = cpu_rows(results)
    w("## Draws and the cost for bots")
    w("")
    if draw:
        draw_section(w, results, draw, cpu, floor)
    if solve or off or on:
        challenge_section(w, results, solve, off, on, cpu, floor, admit)


def after(seen, key):
    """`seen[key]` (ms after draw_at) as text, or why there is none."""
    return f"{seen[key]:,.0f} ms" if seen and seen.get(key) is not None else "not seen"


def draw_section(w, results, draw, cpu, floor):
    """Scenario 13: the entries, the time to rank, the verification."""
    verify = load_json(results / "draw_verify.json") or {}
    verify_run = load_json(results / "draw_verify_run.json") or {}
    rss_path = results / "draw_rss.jsonl"
    rss = json.loads(rss_path.read_text().splitlines()[0])["peak_rss_kb"] if rss_path.exists() else None
    selected, revealed, last = draw.get("winners_selected"), draw.get("revealed"), draw.get("last_chunk")
    # The chunk is the gate's (seckill_core::draw::RANK_CHUNK): read it from the records.
    chunk = f"{round(draw['ranked_users'] / draw['chunks']):,}" if draw["chunks"] else "?"
    w(f"### Scenario 13: a draw of {draw['entrants']:,} entrants")
    w("")
    w(f"A draw-mode sale (one unit per user). `live-probe draw` enters {draw['entrants']:,} users in its entry window")
    # live-probe opens a connection per 150 requests of the larger of the two crowds, and spreads both over them.
    connections = -(-max(draw["concurrency"], draw["waiters"]) // 150)
    w(f"(`POST /api/v1/vouchers/{{id}}/entries`, {draw['concurrency']} at once over {connections} HTTP/2 connections,")
    w(f"as the waiting room's joins), then parks {draw['waiters']:,} of them, spread over the entry order, on")
    w("`GET …/entries/me?wait=10s` (asked again until it answers an outcome) and follows the sales topic. At `draw_at`")
    w("the ingress's driver (one ingress, ticking every 100 ms) closes the entries and logs the seed, keys the entries")
    w(f"in Redis {chunk} a call (`lua/draw_advance.lua`: SHA-1 of seed, list hash and user into a sorted set), logs the")
    w(f"ranking {chunk} users per `DrawRanked` record and selects the winners (`DrawWinnersSelected`). The time to rank")
    w("is measured from `draw_at` three ways: the `emitted_at` the script stamps on each record (the Redis clock: the")
    w("gate's work and the driver's calls), when the probe's follower of the sales topic received it (plus the relay")
    w("from the Redis outbox to Kafka and the fetch), and when the waiting entrants' long-polls answered `won` or")
    w("`not_selected` (plus the ingress waking them and reading their entry). One machine, one clock. Then")
    w("`seckill draw verify --voucher ID` reads the voucher's log from Kafka (the services stopped) and checks it,")
    w("recomputing the ranking from the revealed seed and the entries.")
    w("")
    w("| measured | figure | ratio to ceiling |")
    w("|---|---|---|")
    others = ", ".join(f"{code} {n:,}" for code, n in draw["entry_statuses"].items() if code != "201") or "none"
    entry = draw["entry_ms"]
    ratio = f"{draw['entries_per_s'] / floor['rate']:.3f} × warp floor" if floor else "-"
    w(f"| entries in the entry window | {draw['entered']:,} of {draw['entrants']:,} in {draw['entry_seconds']:.1f} s: "
      f"**{draw['entries_per_s']:,.0f}/s**; answer p50 {ms(entry['p50'])}, p99 {ms(entry['p99'])}; other answers: "
      f"{others} | {ratio} |")
    w(f"| entries closed, seed revealed (`DrawSeedRevealed`) | stamped {after(revealed, 'emitted_after_draw_ms')} "
      f"after `draw_at` ({draw.get('revealed_entries') or 0:,} entries) | - |")
    w(f"| entrants keyed: the first `DrawRanked` record | stamped {after(draw.get('first_chunk'), 'emitted_after_draw_ms')} "
      f"after `draw_at` (every key computed by then) | - |")
    w(f"| ranking logged: the last of {draw['chunks']:,} `DrawRanked` records ({draw['ranked_users']:,} users) | "
      f"stamped {after(last, 'emitted_after_draw_ms')} after `draw_at`, in the log {after(last, 'seen_after_draw_ms')} "
      f"| - |")
    w(f"| **time to rank**: winners selected (`DrawWinnersSelected`, {draw.get('winners') or 0:,} winners) | stamped "
      f"**{after(selected, 'emitted_after_draw_ms')}** after `draw_at`; in the log **"
      f"{after(selected, 'seen_after_draw_ms')}** | - |")
    heard = draw["outcome_heard_after_draw_ms"]
    outcomes = ", ".join(f"{state} {n:,}" for state, n in draw["waiter_outcomes"].items()) or "none"
    w(f"| outcome heard by entrants long-polling `entries/me` | {draw['waiters_answered']:,} of {draw['waiters']:,} "
      f"({outcomes}): p50 {heard['p50']:,.0f} ms, p90 {heard['p90']:,.0f} ms, max {heard['max']:,.0f} ms after "
      f"`draw_at` | - |")
    if verify_run:
        verdict_text = "PASS" if verify.get("pass") else ("FAIL" if verify else "no verdict")
        source = verify.get("source") or {}
        read = f"log read {source['read_ms'] / 1000:.2f} s ({source.get('records', 0):,} records), " if "read_ms" in source else ""
        checks = f"checks {verify['verify_ms'] / 1000:.2f} s; " if "verify_ms" in verify else ""
        checks_run = verify.get("checks") or []
        passed = sum(1 for check in checks_run if check.get("pass"))
        seen = (f"{verify.get('entries', 0):,} entries, {verify.get('winners') or 0:,} winners, {passed} of "
                f"{len(checks_run)} checks passed" if verify else "see verify.log")
        w(f"| `seckill draw verify --voucher ID` (from Kafka) | **{verdict_text}** (exit status "
          f"{verify_run['exit_status']}) in {verify_run['wall_s']:.2f} s wall: {read}{checks}{seen} | - |")
    entering = {p: row for p in PROCESSES for row in cpu if row["scenario"] == "draw_entries" and row["process"] == p}
    drawing = {p: row for p in PROCESSES for row in cpu if row["scenario"] == "draw_ranking" and row["process"] == p}
    if "redis" in entering and "redis" in drawing:
        per_entry = entering["redis"]["cpu_s"] / draw["entered"] * 1e6 if draw["entered"] else 0
        w(f"| Redis CPU | entries: {entering['redis']['cpu_s']:.2f} s over {entering['redis']['wall_s']:.1f} s "
          f"({entering['redis']['cpu_s'] / entering['redis']['wall_s']:.2f} cores, {per_entry:.0f} µs per entry); "
          f"the draw (from 1 s before `draw_at` until every waiter heard): {drawing['redis']['cpu_s']:.2f} s over "
          f"{drawing['redis']['wall_s']:.1f} s | - |")
    for label, rows in (("entries", entering), ("the draw", drawing)):
        if rows:
            wall = next(iter(rows.values()))["wall_s"]
            w(f"| cores used over {label} ({wall:.1f} s) | " + ", ".join(
                f"{p} {row['cpu_s'] / row['wall_s']:.2f}" for p, row in rows.items() if row["wall_s"]) + " | - |")
    if rss is not None:
        w(f"| ingress peak RSS | {rss / 1024:,.0f} MiB | - |")
    w("")


def m_rate_off(off):
    """The median round's rate without proofs (None without rounds)."""
    rates = sorted(run["admitted_per_s"] for run in off)
    return rates[len(rates) // 2] if rates else None


PROCESSES = ("ingress", "processor", "projector", "kafka", "redis")


def challenge_section(w, results, solve, off, on, cpu, floor, admit):
    """Scenario 14: the order route with and without proofs of work, and
    the client's solving."""
    prepare = load_json(results / "challenge_prepare.json") or {}
    bits = solve["bits"] if solve else next(iter(prepare.get("bits", {})), "?")
    w(f"### Scenario 14: a proof of work on each order ({bits} bits)")
    w("")
    if off or on:
        orders = (off or on)[0]["orders"]
        w("Two first-come vouchers on the same freshly started services, stock 1,000,000, 100 units per user, one with")
        w(f"`challenge_bits` 0 (no proof asked), one with {bits}; the ingress runs with `[challenge]")
        w("raise_above_per_second = 0`, so the difficulty stays the voucher's. Before the timed runs `live-probe")
        w("challenges` fetches one challenge per order (`GET …/challenge`, the storm's 10,000 users in turn) and solves")
        w(f"them all on both cores. The timed runs (`live-probe order-rate`: {orders:,} orders, 64 at once on 64")
        w("keep-alive HTTP/1.1 connections, as `seckill loadgen` sends them) alternate, off then on, "
          f"{max(len(off), len(on))} rounds, a")
        w("2 s pause before each; the figures are the median round's, the CPU per order is over all rounds. With a")
        w("proof each order carries `Seckill-Challenge` and `Seckill-Solution`: the ingress checks the HMAC")
        w("signature, the expiry and the solution (one SHA-256) before Redis, and `admit.lua` spends the challenge")
        w("(a sorted set of spent nonces) in the same call as the admission. So the difference is the server's cost")
        w("of a proof, without the client's.")
        w("")

        def median_run(runs):
            ordered = sorted(runs, key=lambda run: run["admitted_per_s"])
            return ordered[len(ordered) // 2] if ordered else None

        def cost(kind, process):
            rows = [row for row in cpu if row["scenario"].startswith(f"challenge_{kind}_") and row["process"] == process]
            runs = off if kind == "off" else on
            requests = sum(run["orders"] for run in runs)
            return sum(row["cpu_s"] for row in rows) / requests * 1e6 if rows and requests else None

        m_off, m_on = median_run(off), median_run(on)

        def rate(run):
            return f"**{run['admitted_per_s']:,.0f}/s**" if run else "-"

        def rounds(runs):
            return ", ".join(f"{run['admitted_per_s']:,.0f}" for run in runs)

        def ratio(a, b, digits=3):
            return f"{a / b:.{digits}f}" if a and b else "-"

        def answers(runs):
            total = {}
            for run in runs:
                for code, n in run["statuses"].items():
                    total[code] = total.get(code, 0) + n
                for error, n in run["errors"].items():
                    total[error] = total.get(error, 0) + n
            return ", ".join(f"{code} {n:,}" for code, n in total.items()) or "-"

        def latency(run):
            if not run:
                return "-"
            lat = run["latency_ms"]
            return f"{ms(lat['p50'])} / {ms(lat['p99'])}"

        off_rate = m_off["admitted_per_s"] if m_off else None
        on_rate = m_on["admitted_per_s"] if m_on else None
        w(f"| measured | challenges off (bits 0) | on ({bits} bits) | on / off |")
        w("|---|---|---|---|")
        w(f"| orders admitted per second (median round; each round) | {rate(m_off)} ({rounds(off)}) | {rate(m_on)} "
          f"({rounds(on)}) | **{ratio(on_rate, off_rate)}** |")
        pairs = [on_run["admitted_per_s"] / off_run["admitted_per_s"] for off_run, on_run in zip(off, on)]
        if pairs:
            w(f"| on / off round by round (each round off, then on) | | | "
              f"{', '.join(f'{pair:.3f}' for pair in pairs)} |")
        if admit:
            w(f"| × the `admit.lua` ceiling ({admit['rate']:,.0f} calls/s) | {ratio(off_rate, admit['rate'], 2)} | "
              f"{ratio(on_rate, admit['rate'], 2)} | |")
        if floor:
            w(f"| × the warp floor ({floor['rate']:,.0f} requests/s) | {ratio(off_rate, floor['rate'], 3)} | "
              f"{ratio(on_rate, floor['rate'], 3)} | |")
        w(f"| POST latency p50 / p99 (median round) | {latency(m_off)} | {latency(m_on)} | |")
        w(f"| answers, all rounds | {answers(off)} | {answers(on)} | |")
        totals = [0.0, 0.0]
        for process in ("ingress", "redis", "kafka", "processor", "projector"):
            a, b = cost("off", process), cost("on", process)
            if a is not None and b is not None:
                totals = [totals[0] + a, totals[1] + b]
                label = "**ingress**" if process == "ingress" else process
                w(f"| {label} CPU per order | {a:.1f} µs | {b:.1f} µs | {ratio(b, a, 2)} ({b - a:+.1f} µs) |")
        if totals[0]:
            w(f"| the five server processes' CPU per order | {totals[0]:.1f} µs | {totals[1]:.1f} µs | "
              f"{ratio(totals[1], totals[0], 2)} ({totals[1] - totals[0]:+.1f} µs) |")
        w("")
    if solve or prepare:
        w("The client's side, apart: `live-probe solve-time` solves challenges as a client does, one after another on one")
        w("core (`seckill_core::challenge::solve`: counting up from 0, the challenge's prefix hashed once), with the")
        w("platform down and nothing else running; each attempt is one SHA-256 of the challenge, `:` and the number.")
        w("")
        w("| measured | figure |")
        w("|---|---|")
    if solve:
        t = solve["solve_ms"]
        w(f"| solving one {bits}-bit challenge on one core ({solve['solves']:,} challenges of "
          f"{solve['challenge_length']} characters) | p50 **{ms(t['p50'])}**, p90 **{ms(t['p90'])}**, p99 {ms(t['p99'])}, "
          f"max {ms(t['max'])}; mean {ms(solve['mean_ms'])} |")
        w(f"| hash rate, one core | **{solve['hashes_per_s'] / 1e6:.2f} million SHA-256/s** ({solve['hashes']:,} hashes "
          f"for {solve['solves']:,} solves: {solve['hashes'] / solve['solves']:,.0f} each, 2^{bits} = "
          f"{solve['expected_hashes']:,.0f} expected) |")
    if solve and m_rate_off(off):
        rate_off = m_rate_off(off)
        # The long-run mean solve: 2^bits hashes at the measured rate.
        mean_s = solve["expected_hashes"] / solve["hashes_per_s"]
        w(f"| a client solving as fast as the route admits without proofs ({rate_off:,.0f} orders/s) | "
          f"{rate_off * mean_s:,.1f} such cores (2^{bits} hashes a solve on average: {mean_s * 1e3:.2f} ms) |")
    if prepare:
        w(f"| fetching and pre-solving the timed runs' proofs | {prepare['challenges']:,} challenges fetched at "
          f"{prepare['fetched_per_s']:,.0f}/s (64 at once), solved in {prepare['solve_seconds']:.1f} s on "
          f"{prepare['solve_threads']} threads |")
    if solve or prepare:
        w("")


def cpu_rows(results):
    """Every row of cpu.jsonl: CPU seconds of one process over one scenario's wall time."""
    path = results / "cpu.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def cores(cpu, scenario, process):
    """Cores `process` used during `scenario` (None if it was not measured)."""
    row = next((r for r in cpu if r["scenario"] == scenario and r["process"] == process), None)
    return row["cpu_s"] / row["wall_s"] if row and row["wall_s"] else None


def kafka_idle(w, cpu):
    """Kafka's CPU with the services up and no traffic."""
    rows = {r["process"]: r for r in cpu if r["scenario"] == "idle"}
    if "kafka" not in rows:
        return
    wall = rows["kafka"]["wall_s"]
    processes = [p for p in ("kafka", "ingress", "processor", "projector", "redis") if p in rows]
    w("## Kafka with the platform idle")
    w("")
    w(f"The three services up on freshly started processes, no traffic, {wall:.0f} s measured after they settled:")
    w("what Kafka costs with nothing to do (the processor's and projector's consumers waiting in their fetches, which")
    w("Kafka parks until records arrive or the wait ends, the ingress's follower of the orders topic, group heartbeats")
    w("and offset commits). CPU from `/proc/PID/stat` (Kafka's JVM, every thread), in cores (CPU seconds over wall time).")
    w("")
    w("| " + " | ".join(processes) + " |")
    w("|" + "---|" * len(processes))
    w("| " + " | ".join(f"{rows[p]['cpu_s'] / wall:.3f} cores" for p in processes) + " |")
    w("")


def fsync_diagnostic(w, load, cpu, burst, e2e):
    """Scenarios 2 and 4 again with Kafka fsyncing every appended batch."""
    burst_fsync, e2e_fsync = load.get("admission_burst_fsync"), load.get("end_to_end_fsync")
    if not (burst_fsync or e2e_fsync):
        return

    def rate(run):
        return run["status_counts"].get("202", 0) / run["elapsed_s"]

    def burst_cell(run):
        drained = run["drained_after_s"]
        return (f"{rate(run):,.0f} × 202/s, POST p99 {ms(run['latency']['p99_ms'])}, "
                + (f"drained {drained:.2f} s after" if drained is not None else "not drained in time"))

    def e2e_cell(run):
        seen = run["visible"]
        return f"202 → visible p50 {ms(seen['p50_ms'])}, p99 {ms(seen['p99_ms'])} ({seen['count']} sampled)"

    def kafka_cell(scenario):
        value = cores(cpu, scenario, "kafka")
        return f"{value:.2f} cores" if value is not None else "-"

    w("## Diagnostic: Kafka fsyncing every batch")
    w("")
    w("Scenarios 2 and 4 again, everything the same (the same Kafka node, data, port and services) except that Kafka")
    w("flushes every appended batch to disk before it acknowledges it (`log.flush.interval.messages=1`, devstack's")
    w("`--fsync-every-batch`, as `seckill dev --fsync-every-batch` runs it) instead of leaving the write-back to the")
    w("page cache. With the page cache an acknowledged record survives a crash of Kafka (SIGKILL) but not of the")
    w("machine on this single node; with a flush per batch it survives both, on a disk that honours flushes. Not a")
    w("target: the cost of that durability on one local Kafka node.")
    w("")
    w("| scenario | page cache (scenarios 2 and 4 above) | fsync every batch | fsync / page cache |")
    w("|---|---|---|---|")
    if burst_fsync:
        w(f"| 2: admission burst, {burst_fsync['requests']:,} users | {burst_cell(burst)} | {burst_cell(burst_fsync)} "
          f"| {rate(burst_fsync) / rate(burst):.2f} × the rate |")
        w(f"| 2: Kafka's CPU during the burst | {kafka_cell('burst')} | {kafka_cell('burst_fsync')} | |")
    if e2e_fsync:
        p99 = e2e["visible"]["p99_ms"]
        ratio = f"{e2e_fsync['visible']['p99_ms'] / p99:.2f} × the p99" if p99 else ""
        w(f"| 4: end to end at {e2e_fsync['requests'] / e2e_fsync['elapsed_s']:,.0f} requests/s, open loop "
          f"| {e2e_cell(e2e)} | {e2e_cell(e2e_fsync)} | {ratio} |")
        w(f"| 4: Kafka's CPU | {kafka_cell('e2e')} | {kafka_cell('e2e_fsync')} | |")
    w("")


def metric_value(path, name):
    """The sum of `name`'s series in a saved /metrics page (None if absent)."""
    if not path.exists():
        return None
    values = [float(line.rsplit(" ", 1)[1]) for line in path.read_text().splitlines()
              if line.split("{", 1)[0].split(" ", 1)[0] == name]
    return sum(values) if values else None


def replica_wait(w, results, load):
    """Scenario 15: the admission burst against Redis with one replica, the
    ingress waiting for the replica's acknowledgement (WAIT 1) and not."""
    runs = {mode: sorted((run for name, run in load.items() if name.startswith(f"replicas_{mode}_")),
                         key=lambda run: run["status_counts"].get("202", 0) / run["elapsed_s"])
            for mode in ("off", "on")}
    if not (runs["off"] and runs["on"]):
        return
    cpu = cpu_rows(results)

    def rate(run):
        return run["status_counts"].get("202", 0) / run["elapsed_s"]

    def median(mode):
        return runs[mode][len(runs[mode]) // 2]

    def row(mode, label):
        run = median(mode)
        names = sorted(name for name, r in load.items() if name.startswith(f"replicas_{mode}_"))
        timeouts = [metric_value(results / f"{name}.ingress.metrics", "seckill_replica_ack_timeouts_total")
                    for name in names]
        unacknowledged = sum(run["status_counts"].get("503", 0) for run in runs[mode])
        redis_cores = [cores(cpu, name, "redis") for name in names]
        replica_cores = [cores(cpu, name, "redis_replica") for name in names]
        w(f"| {label} | {rate(run):,.0f} | {ms(run['latency']['p50_ms'])} | {ms(run['latency']['p99_ms'])} "
          f"| {', '.join(f'{rate(r):,.0f}' for r in runs[mode])} | {unacknowledged} "
          f"| {', '.join('-' if t is None else f'{t:.0f}' for t in timeouts)} "
          f"| {', '.join('-' if c is None else f'{c:.2f}' for c in redis_cores)} "
          f"| {', '.join('-' if c is None else f'{c:.2f}' for c in replica_cores)} "
          f"| {'PASS' if all(r['invariants']['passed'] for r in runs[mode]) else 'FAIL'} |")

    w("## The replica wait: what a 202 that survives the loss of the master costs")
    w("")
    w(f"Scenario 15: the admission burst ({median('on')['requests']:,} distinct users, stock 1,000,000, 64")
    w("connections) against the same Redis with one replica (`redis-server --replicaof`, memory only, on this")
    w("machine), on freshly started services, the two settings alternated: the ingress answering each admission once")
    w("the replica has acknowledged it (`redis.replica_acks = on`: `WAIT 1` behind each pipeline of admissions,")
    w("docs/CLUSTER.md) and not (`off`). The median run by the rate (of two, the faster); each run's rate listed.")
    w("A `503` is an admission no replica acknowledged within `replica_ack_timeout_ms`.")
    w("")
    w("| ingress | 202/s (median) | POST p50 | POST p99 | each run, 202/s | 503s | waits timed out | "
      "Redis cores | replica cores | invariants |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    row("off", "no wait (`off`)")
    row("on", "waits for the replica (`on`)")
    w("")
    w(f"The wait costs {1 - rate(median('on')) / rate(median('off')):.0%} of the rate "
      f"({rate(median('on')) / rate(median('off')):.2f} × the rate without it) and moves the POST p99 from "
      f"{ms(median('off')['latency']['p99_ms'])} to {ms(median('on')['latency']['p99_ms'])}.")
    w("")


def hot_voucher(w, results, load, admit, floor):
    """Scenario 10: one voucher, every order admitted, shards 1 and 8, on one
    Redis and on a three-master cluster, with each part's CPU per admission."""
    runs = [(topology, shards, load.get(f"hot_{topology}_{shards}"))
            for topology in ("single", "cluster") for shards in (1, 8)]
    runs = [(t, k, r) for t, k, r in runs if r]
    if not runs:
        return
    cpu = cpu_rows(results)
    parts = ["redis", "redis_cluster", "ingress", "processor", "projector", "kafka"]
    w("## Hot voucher: shards on one Redis and on a Redis Cluster")
    w("")
    w(f"Scenario 10: {runs[0][2]['requests']:,} distinct users order one unit each of one voucher whose stock")
    w("covers them all (every order is admitted: the admission path, not the sold-out one), 64 connections, the")
    w("voucher created with `shards` 1 or 8, on the single Redis and on a local Redis Cluster of three masters")
    w("(no replicas, append-only file, all on this machine). Ratios are to this run's ceilings: `admit.lua` on one")
    w("Redis (redis-benchmark) and the minimal warp handler. On two cores the cluster cannot be faster (its three")
    w("masters, the services and the load generator share the same two cores): what this shows is the cost of the")
    w("cluster and of buckets, per admission, not their speed-up; see docs/SCALING.md for what it means on more")
    w("machines.")
    w("")
    w("| Redis | shards | admissions/s | × admit.lua ceiling | × warp floor | p99 | invariants | "
      + " | ".join(f"{p} µs/adm" for p in parts) + " |")
    w("|---|---|---|---|---|---|---|" + "---|" * len(parts))
    for topology, shards, run in runs:
        admitted = run["status_counts"].get("202", 0)
        rate = admitted / run["elapsed_s"]
        rows = {row["process"]: row for row in cpu if row["scenario"] == f"hot_{topology}_{shards}"}
        cost = " | ".join(
            f"{rows[p]['cpu_s'] / admitted * 1e6:.0f}" if p in rows and admitted else "-" for p in parts)
        w(f"| {topology} | {shards} | {rate:,.0f} | {rate / admit['rate']:.2f} | {rate / floor['rate']:.2f} "
          f"| {ms(run['latency']['p99_ms'])} | {'PASS' if run['invariants']['passed'] else 'FAIL'} | {cost} |")
    w("")


def main():
    results, notes = Path(sys.argv[1]), Path(sys.argv[2])
    machine = dict(line.split("=", 1) for line in (results / "machine.env").read_text().splitlines())
    load = {p.stem: json.loads(p.read_text()) for p in results.glob("*.json")}
    # The payments, waiting-room, draw and proof-of-work probes' reports are
    # not a load generator's.
    load.pop("payments", None)
    load.pop("queue", None)
    load = {name: run for name, run in load.items() if not name.startswith(("draw", "challenge"))}
    rss = [json.loads(line) for line in (results / "peak_rss.jsonl").read_text().splitlines()]
    admit = redis_benchmark(results / "redis_admit.csv")
    sold_out_script = redis_benchmark(results / "redis_sold_out.csv")
    floor = median_wrk(results, "warp_floor")
    storm = median_wrk(results, "sold_out_storm")
    storm_refusals = sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in (results / "sold_out_storm.metrics").read_text().splitlines()
        if 'outcome="sold_out"' in line
    )

    burst = load["admission_burst"]
    burst_202 = burst["status_counts"].get("202", 0) / burst["elapsed_s"]
    e2e = load["end_to_end"]
    out = []
    w = out.append
    w("# Benchmarks")
    w("")
    w("Generated by `bench/run` on " + machine["date"] + "; do not edit by hand (the tuning notes at the end")
    w("come from `bench/tuning.md`)." + (" **Quick run (BENCH_QUICK=1): smaller samples.**" if machine["quick"] == "1" else ""))
    w("")
    w("## Machine and method")
    w("")
    w(f"- {machine['cores']} cores ({machine['cpu']}), {machine['memory']}, Linux {machine['kernel']}; "
      f"{machine['rustc']}; Redis {machine['redis']}; Apache Kafka {machine['kafka']} ({machine['java']}); "
      f"{machine['wrk']}.")
    w("- Everything on this one machine over 127.0.0.1: Redis (AOF, fsync every second), one Apache Kafka node (KRaft,")
    w(f"  both roles in one JVM, the jars Maven Central publishes, heap {machine['kafka_heap']}), the ingress, processor")
    w("  and projector as separate release-mode processes (`seckill serve`, embedded stores), and the load generator.")
    w("  Client and servers share the two cores, so every figure includes the client's cost; the ceilings were")
    w("  measured the same way, in the same run.")
    w(f"- Kafka's durability in the scenarios: **{machine['kafka_durability']}**; its settings that matter here: "
      f"{machine['kafka_settings']}; topics have {machine.get('partitions', '2')} partitions, replication factor 1.")
    w("- Ceilings: `redis-benchmark` running the project's own `lua/admit.lua` by EVALSHA (50 clients, no pipelining,")
    w("  a random user per call: the admit path on a voucher with stock left, the refusal path on a sold-out one), and")
    w("  `wrk` (2 threads, 64 connections) against `warp-floor`, a warp server that answers the order route with the")
    w("  sold-out body and does nothing else, built in the same profile.")
    w("- Scenarios: each on freshly started services. The storm is driven by `wrk` too (same client as its ceiling),")
    w("  with 10,000 users' signed tokens; the others by `seckill loadgen` (keep-alive connections, closed loop, or")
    w("  open loop at a fixed rate for scenario 4, latency measured from the schedule). Rate limits are off: one")
    w("  address sends everything.")
    w("")
    w("## Ceilings")
    w("")
    w("| ceiling | rate | p99 |")
    w("|---|---|---|")
    w(f"| `admit.lua`, admit path (redis-benchmark) | {admit['rate']:,.0f} calls/s | {ms(admit['p99_ms'])} |")
    w(f"| `admit.lua`, sold-out path (redis-benchmark) | {sold_out_script['rate']:,.0f} calls/s | {ms(sold_out_script['p99_ms'])} |")
    w(f"| minimal warp handler (wrk, 64 connections; median of {len(floor['runs'])} runs: "
      f"{', '.join(f'{r:,.0f}' for r in floor['runs'])}) | {floor['rate']:,.0f} requests/s | {ms(floor['p99_ms'])} |")
    w("")
    w("## Scenarios")
    w("")
    w("| # | scenario | measured | target | ratio to ceiling | result |")
    w("|---|---|---|---|---|---|")
    storm_ok = storm["rate"] >= 0.8 * floor["rate"] and storm["p99_ms"] < 5
    w(f"| 1 | sold-out storm: stock 0, 64 connections | {storm['rate']:,.0f} requests/s, p99 {ms(storm['p99_ms'])} "
      f"| ≥ 0.8 × warp floor ({0.8 * floor['rate']:,.0f}/s), p99 < 5 ms | {storm['rate'] / floor['rate']:.2f} × warp floor "
      f"| {verdict(storm_ok)} |")
    burst_ok = (burst_202 >= 0.25 * admit["rate"] and burst["latency"]["p99_ms"] < 20
                and (burst["drained_after_s"] or 1e9) <= 5 and burst["invariants"]["passed"])
    drained = burst["drained_after_s"]
    w(f"| 2 | admission burst: {burst['requests']:,} distinct users, 64 connections | {burst_202:,.0f} × 202/s, "
      f"POST p99 {ms(burst['latency']['p99_ms'])}, drained {drained:.2f} s after | ≥ 0.25 × admit EVALSHA "
      f"({0.25 * admit['rate']:,.0f}/s), p99 < 20 ms, drained ≤ 5 s | {burst_202 / admit['rate']:.2f} × admit EVALSHA "
      f"| {verdict(burst_ok)} |" if drained is not None else
      f"| 2 | admission burst | {burst_202:,.0f} × 202/s, not drained in time | see target | - | **missed** |")
    for name in ("classic_10", "classic_10000"):
        run = load[name]
        stock = run["invariants"]["stock"]
        created = run["final_statuses"].get("CREATED", 0)
        wall = run["elapsed_s"] + (run["drained_after_s"] or 1e9)
        ok = created == stock and wall < 5 and run["invariants"]["passed"]
        w(f"| 3 | classic sale: {run['requests']:,} users, stock {stock:,}, 256 connections | {created:,} created, "
          f"{run['requests_per_s']:,.0f} requests/s, answered in {run['elapsed_s']:.2f} s + decided "
          f"{run['drained_after_s'] or float('nan'):.2f} s later = {wall:.2f} s | exactly {stock:,} created, < 5 s "
          f"| - | {verdict(ok)} |")
    visible = e2e["visible"]
    e2e_ok = visible["count"] > 0 and visible["p99_ms"] < 250 and e2e["invariants"]["passed"]
    w(f"| 4 | end-to-end at half the burst rate ({e2e['requests'] / e2e['elapsed_s']:,.0f} requests/s, open loop) "
      f"| 202 → final status visible: p50 {ms(visible['p50_ms'])}, p99 {ms(visible['p99_ms'])} "
      f"({visible['count']} sampled orders) | p99 < 250 ms | - | {verdict(e2e_ok)} |")
    rss_text = ", ".join(f"{r['service']} {r['peak_rss_kb'] / MIB:.0f} MiB" for r in rss)
    rss_ok = all(r["peak_rss_kb"] / MIB < 150 for r in rss)
    w(f"| 5 | peak RSS under scenario 2 | {rss_text} | < 150 MB each | - | {verdict(rss_ok)} |")
    w("")
    read_side(w, results, floor)
    payments(w, results, floor)
    waiting_room(w, results, floor)
    draws_and_bots(w, results, floor, admit)
    cpu = cpu_rows(results)
    kafka_idle(w, cpu)
    fsync_diagnostic(w, load, cpu, burst, e2e)
    w("## Details")
    w("")
    w(f"- Storm: median of {len(storm['runs'])} runs ({', '.join(f'{r:,.0f}' for r in storm['runs'])} requests/s); over all")
    w(f"  runs wrk completed {storm['all_requests']:,} requests and the ingress counted {storm_refusals:,} `sold_out`")
    w("  admission outcomes (memo and Redis together; requests cut off when wrk stops still count there).")
    for name, run in sorted(load.items()):
        codes = ", ".join(f"{c} {n:,}" for c, n in run["status_counts"].items())
        finals = ", ".join(f"{s} {n:,}" for s, n in run["final_statuses"].items())
        lat = run["latency"]
        w(f"- `{name}`: {run['requests']:,} requests in {run['elapsed_s']:.2f} s ({run['requests_per_s']:,.0f}/s); "
          f"answers {codes}; POST p50/p90/p99/p99.9/max {lat['p50_ms']:.2f}/{lat['p90_ms']:.2f}/{lat['p99_ms']:.2f}/"
          f"{lat['p999_ms']:.2f}/{lat['max_ms']:.2f} ms; final {finals or '-'}; accept→decided p50/p99 "
          f"{run['end_to_end']['p50_ms']:.1f}/{run['end_to_end']['p99_ms']:.1f} ms; loadgen used "
          f"{run['loadgen_cores']:.2f} cores; invariants {'PASS' if run['invariants']['passed'] else 'FAIL'}.")
    w("")
    w("## Where the CPU went")
    w("")
    w("Cores used by each server process during each scenario (CPU seconds over the scenario's wall time, from")
    w("`/proc/PID/stat`; Kafka's is its JVM, every thread); the load generator reports its own. Two cores in all.")
    w("`idle` is the platform up with no traffic; `*_fsync` the diagnostic with Kafka fsyncing every batch.")
    w("")
    processes = list(dict.fromkeys(row["process"] for row in cpu))
    # The Redis Cluster runs only during the hot-voucher scenario, Redis's
    # replica only during scenario 15, the payments sandbox only during the
    # payments one: no column without them.
    for sometimes in ("redis_cluster", "redis_replica", "sandbox"):
        if not any(row["cpu_s"] > 0.05 for row in cpu if row["process"] == sometimes):
            processes = [p for p in processes if p != sometimes]
    w("| scenario | wall | " + " | ".join(processes) + " | load generator |")
    w("|---|---" + "|---" * len(processes) + "|---|")
    loadgen_cores = {
        "burst": [load["admission_burst"]],
        "classic": [load["classic_10"], load["classic_10000"]],
        "e2e": [load["end_to_end"]],
        "burst_fsync": [load.get("admission_burst_fsync")],
        "e2e_fsync": [load.get("end_to_end_fsync")],
        **{f"hot_{t}_{k}": [load.get(f"hot_{t}_{k}")] for t in ("single", "cluster") for k in (1, 8)},
        **{name: [run] for name, run in load.items() if name.startswith("replicas_")},
    }
    for scenario in dict.fromkeys(row["scenario"] for row in cpu):
        rows = {row["process"]: row for row in cpu if row["scenario"] == scenario}
        wall = next(iter(rows.values()))["wall_s"]
        cells = " | ".join(f"{rows[p]['cpu_s'] / wall:.2f}" for p in processes)
        own = loadgen_cores.get(scenario)
        if scenario == "idle":
            generator = "none (no traffic)"
        elif own:
            generator = ", ".join(f"{run['loadgen_cores']:.2f}" for run in own if run)
        elif scenario in ("waiters", "streams_idle", "payments", "queue") or scenario.startswith(("draw", "challenge")):
            generator = "live-probe (not measured)"
        else:
            generator = "wrk (not measured)"
        w(f"| {scenario} | {wall:.1f} s | {cells} | {generator} |")
    w("")
    cpu_per_order(w, cpu, load)
    w("")
    hot_voucher(w, results, load, admit, floor)
    replica_wait(w, results, load)
    w(notes.read_text().rstrip())
    print("\n".join(out))


def hot_only():
    """`report.py --hot RESULTS`: the hot-voucher section alone (a
    `BENCH_ONLY=hot` run, which writes no BENCHMARKS.md)."""
    results = Path(sys.argv[2])
    load = {p.stem: json.loads(p.read_text()) for p in results.glob("*.json")}
    out = []
    hot_voucher(out.append, results, load, redis_benchmark(results / "redis_admit.csv"),
                median_wrk(results, "warp_floor"))
    print("\n".join(out))


def queue_only():
    """`report.py --queue RESULTS`: the waiting room's section alone."""
    results = Path(sys.argv[2])
    floor = median_wrk(results, "warp_floor") if list(results.glob("warp_floor.*.wrk")) else None
    out = []
    waiting_room(out.append, results, floor)
    print("\n".join(out))


def draws_only():
    """`report.py --draw RESULTS` or `--challenge RESULTS`: the section on
    draws and proofs of work alone (either scenario's part, or both)."""
    results = Path(sys.argv[2])
    floor = median_wrk(results, "warp_floor") if list(results.glob("warp_floor.*.wrk")) else None
    admit = redis_benchmark(results / "redis_admit.csv") if (results / "redis_admit.csv").exists() else None
    out = []
    draws_and_bots(out.append, results, floor, admit)
    print("\n".join(out))


def replicas_only():
    """`report.py --replicas RESULTS`: the replica wait's section alone (a
    `BENCH_ONLY=replicas` run, which writes no BENCHMARKS.md)."""
    results = Path(sys.argv[2])
    load = {p.stem: json.loads(p.read_text()) for p in results.glob("replicas_*.json")}
    out = []
    replica_wait(out.append, results, load)
    print("\n".join(out))


# The runs of the load generator each write scenario's CPU row covers.
WRITE_SCENARIOS = {
    "burst": ["admission_burst"],
    "classic": ["classic_10", "classic_10000"],
    "e2e": ["end_to_end"],
    "burst_fsync": ["admission_burst_fsync"],
    "e2e_fsync": ["end_to_end_fsync"],
    **{f"hot_{t}_{k}": [f"hot_{t}_{k}"] for t in ("single", "cluster") for k in (1, 8)},
}
SERVER_PROCESSES = ("redis", "redis_cluster", "redis_replica", "kafka", "ingress", "processor", "projector")


def cpu_per_order(w, cpu, load):
    """Each server process's CPU per admitted order in every write scenario
    the run measured (µs; the scenario's CPU seconds over the orders its
    load generator got 202 for), and the five servers' sum."""
    rows = []
    for scenario, runs in WRITE_SCENARIOS.items():
        runs = [load.get(name) for name in runs]
        admitted = sum(run.get("admitted_orders", 0) for run in runs if run)
        used = {r["process"]: r["cpu_s"] for r in cpu if r["scenario"] == scenario}
        if admitted and used:
            rows.append((scenario, admitted, used))
    if not rows:
        return
    processes = [p for p in SERVER_PROCESSES if any(used.get(p, 0) > 0.05 for _, _, used in rows)]
    w("CPU per admitted order, µs (each process's CPU seconds during the scenario over the orders admitted in it;")
    w("Redis's includes its append-only file's rewrites, Kafka's every thread of its JVM, warmed up by an unmeasured")
    w("burst after every start):")
    w("")
    w("| scenario | orders | " + " | ".join(processes) + " | all servers |")
    w("|---|---" + "|---" * len(processes) + "|---|")
    for scenario, admitted, used in rows:
        per = {p: used.get(p, 0.0) / admitted * 1e6 for p in processes}
        cells = " | ".join(f"{per[p]:.0f}" for p in processes)
        w(f"| {scenario} | {admitted:,} | {cells} | {sum(per.values()):.0f} |")


def cpu_only():
    """`report.py --cpu RESULTS`: the CPU per admitted order of what a
    partial run (`BENCH_ONLY`) measured."""
    results = Path(sys.argv[2])
    load = {p.stem: json.loads(p.read_text()) for p in results.glob("*.json")}
    out = []
    cpu_per_order(out.append, cpu_rows(results), load)
    print("\n".join(out))


def payments_only():
    """`report.py --payments RESULTS`: the payments section alone (a
    `BENCH_ONLY=payments` run, which writes no BENCHMARKS.md)."""
    results = Path(sys.argv[2])
    floor = median_wrk(results, "warp_floor") if list(results.glob("warp_floor.*.wrk")) else None
    out = []
    payments(out.append, results, floor)
    print("\n".join(out))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--hot"]:
        hot_only()
    elif sys.argv[1:2] == ["--cpu"]:
        cpu_only()
    elif sys.argv[1:2] == ["--payments"]:
        payments_only()
    elif sys.argv[1:2] == ["--replicas"]:
        replicas_only()
    elif sys.argv[1:2] == ["--queue"]:
        queue_only()
    elif sys.argv[1:2] in (["--draw"], ["--challenge"]):
        draws_only()
    else:
        main()
