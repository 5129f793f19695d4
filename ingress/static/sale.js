// The reference client of a flash sale: what is sold and its price, a
// countdown from the server clock, the phase and stock pushed live, a buy
// button, then the order's status pushed live: a priced order is paid at the
// payment provider's checkout before its pay_by (counted down here), a free
// one claimed; either can be cancelled while unpaid. A queue-mode sale is
// bought through its waiting room: join (before the start, the pre-queue),
// follow the place live, and buy with the entry token when it is your turn.
// A draw sale takes entries until its draw, then lets its winners buy, each
// within their purchase window. A sale with challenge_bits asks a proof of
// work of each order, join and entry: solved in a Worker (pow.js).
// Plain JavaScript, no build step.
"use strict";

const voucherId = decodeURIComponent(location.pathname.split("/").filter(Boolean).pop() || "");
const $ = (id) => document.getElementById(id);

// ---- the server clock --------------------------------------------------
// Admission judges the window by the server's clock, so the countdown runs
// on it: offset = server time - local time, measured with the round trip.
let clockOffsetMs = 0;

async function syncClock() {
  const sent = Date.now();
  const response = await fetch("/api/v1/time", { cache: "no-store" });
  const received = Date.now();
  const body = await response.json();
  clockOffsetMs = body.unix_ms - (sent + received) / 2;
}

const serverNow = () => Date.now() + clockOffsetMs;

// ---- the sale ------------------------------------------------------------
let sale = null;

function pad(n) {
  return String(n).padStart(2, "0");
}

function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  return `${pad(Math.floor(s / 3600))}:${pad(Math.floor((s % 3600) / 60))}:${pad(s % 60)}`;
}

// The phase as of now on the server clock: the window moves with time even
// between pushes; pause and stock come from the last push.
function phaseNow() {
  if (!sale) return "";
  const now = serverNow();
  if (now < Date.parse(sale.begins_at)) return "upcoming";
  if (now >= Date.parse(sale.ends_at)) return "ended";
  if (sale.paused) return "paused";
  if (sale.available === 0) return "sold_out";
  return "open";
}

// An amount in minor units as the currency writes it ("€2.50").
function money(amount, currency) {
  if (!currency) return "free";
  const format = new Intl.NumberFormat(undefined, { style: "currency", currency });
  const digits = format.resolvedOptions().maximumFractionDigits;
  return format.format(amount / 10 ** digits);
}

function renderVoucher() {
  const title = sale.title || `Voucher ${voucherId}`;
  $("title").textContent = title;
  document.title = `${title} · seckill`;
  $("description").hidden = !sale.description;
  $("description").textContent = sale.description || "";
  $("price").textContent = sale.price > 0 ? money(sale.price, sale.currency) : "free";
}

function render() {
  renderOrderClock();
  if (!sale) return;
  renderVoucher();
  const phase = phaseNow();
  const now = serverNow();
  $("phase").textContent = phase.replace("_", " ");
  $("phase").dataset.phase = phase;
  const opensIn = Date.parse(sale.begins_at) - now;
  const drawLine = drawCountdown(now);
  if (drawLine) {
    $("countdown-label").textContent = drawLine[0];
    $("countdown").textContent = drawLine[1];
  } else if (phase === "upcoming") {
    $("countdown-label").textContent = "Opens in";
    $("countdown").textContent = duration(opensIn);
  } else {
    $("countdown-label").textContent = phase === "ended" ? "Ended" : "Closes in";
    $("countdown").textContent = duration(Date.parse(sale.ends_at) - now);
  }
  $("available").textContent = sale.available;
  $("stock").textContent = sale.stock;
  $("limit").textContent = sale.per_user_limit;
  $("quantity").max = sale.per_user_limit;
  $("server-time").textContent = new Date(now).toISOString();
  if (!renderQueue(phase) && !renderDraw()) $("buy").disabled = !(phase === "open" && identity());
}

function followSale() {
  const source = new EventSource(`/api/v1/vouchers/${voucherId}/stream`);
  source.addEventListener("voucher", (event) => {
    sale = JSON.parse(event.data);
    ensureFollowed();
    // The reader's own state may have moved with the sale.
    if (Date.now() - mineRead >= 500) readMine();
    render();
  });
  source.onerror = () => say("Reconnecting to the sale…");
  source.onopen = () => say("");
}

// ---- who is buying -------------------------------------------------------
function identity() {
  return JSON.parse(sessionStorage.getItem("seckill.identity") || "null");
}

function authHeaders() {
  const who = identity();
  if (!who) return {};
  return who.token ? { authorization: `Bearer ${who.token}` } : { "x-user-id": who.user };
}

// The user id a token is for (its `sub`), to name the user's stream.
function subjectOf(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload)).sub;
  } catch (_) {
    return null;
  }
}

function saveIdentity() {
  const token = $("token").value.trim();
  const user = $("user").value.trim();
  const who = token ? { token, user: subjectOf(token) } : user ? { user } : null;
  if (!who || !who.user) {
    say("Enter a valid token or a user id.");
    return;
  }
  sessionStorage.setItem("seckill.identity", JSON.stringify(who));
  $("who").textContent = who.user;
  followOrders();
  // A place or an entry is the user's: the new identity's is read afresh.
  place = null;
  placeUser = null;
  joinOpensAt = null;
  entry = null;
  entryUser = null;
  entryOpensAt = null;
  mine = null;
  mineRead = 0;
  ensureFollowed();
  render();
}

// ---- the order -----------------------------------------------------------
// The order survives a trip to the provider's checkout and back: kept per
// voucher for the browser tab.
let orderId = sessionStorage.getItem(`seckill.order.${voucherId}`);
let order = null;

function rememberOrder(id) {
  orderId = id;
  sessionStorage.setItem(`seckill.order.${voucherId}`, id);
}

// The time left to pay, on the server clock, while the order awaits it.
function renderOrderClock() {
  const awaiting = order && order.status === "CREATED" && order.pay_by && order.amount > 0;
  $("pay-by-line").hidden = !awaiting;
  if (awaiting) $("pay-by").textContent = duration(Date.parse(order.pay_by) - serverNow());
}

function say(text) {
  $("message").textContent = text;
}

function showOrder(shown) {
  if (shown.order_id !== orderId) return;
  order = shown;
  const priced = order.amount > 0;
  $("order").hidden = false;
  $("order-id").textContent = order.order_id;
  $("order-status").textContent = order.status;
  $("order-reason").textContent = order.reason ? `(${order.reason})` : "";
  $("amount-line").hidden = !priced;
  $("order-amount").textContent = priced ? money(order.amount, order.currency) : "";
  const open = order.status === "CREATED" && !(order.pay_by && Date.parse(order.pay_by) <= serverNow());
  $("pay").hidden = !priced || order.status !== "CREATED";
  $("pay").disabled = !open;
  $("confirm").hidden = priced;
  $("confirm").disabled = order.status !== "CREATED";
  $("cancel").disabled = !["PENDING", "CREATED"].includes(order.status) && !(order.status === "PAID" && !priced);
  renderOrderClock();
}

// Asks for the order's payment and goes to the provider's checkout, which
// brings the buyer back here; the status then arrives on the stream.
async function pay() {
  $("pay").disabled = true;
  const response = await fetch(`/api/v1/orders/${orderId}/payment`, { method: "POST", headers: authHeaders() });
  const body = await response.json();
  if (response.ok && body.checkout_url) {
    say("Paying at the provider…");
    location.assign(body.checkout_url);
  } else {
    say(response.ok ? "The provider gave no checkout page." : `${body.error}: ${body.message}`);
    $("pay").disabled = false;
  }
}

// The order as it stands, once, e.g. back from the checkout.
async function loadOrder() {
  if (!orderId || !identity()) return;
  const response = await fetch(`/api/v1/orders/${orderId}`, { headers: authHeaders(), cache: "no-store" });
  if (response.ok) showOrder(await response.json());
  watchOrder();
}

// While the order waits for a decision or a payment, a long-poll answers
// the moment it moves: the stream pushes the same, but only what happens
// after it is connected (a slow connection can miss the decision). One at
// a time; it ends once the order is final.
let watching = false;

async function watchOrder() {
  if (watching) return;
  watching = true;
  try {
    while (orderId && order && ["PENDING", "CREATED"].includes(order.status) && identity()) {
      const url = `/api/v1/orders/${orderId}?wait=25s&status=${order.status}`;
      const response = await fetch(url, { headers: authHeaders(), cache: "no-store" });
      if (!response.ok) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
      showOrder(await response.json());
    }
  } catch (_) {
    // A dropped connection: the stream (or the next load) carries on.
  } finally {
    watching = false;
  }
}

async function buy() {
  // A queue-mode sale admits the order that carries the place's entry token;
  // a draw, the order of a winner (the server knows the win).
  const queued = queueMode();
  const drawn = drawMode();
  const entryToken = queued && place ? place.entry_token : null;
  if (queued && !entryToken) return;
  if (drawn && !mayBuyWin()) return;
  $("buy").disabled = true;
  buying = true;
  try {
    const quantity = Number($("quantity").value) || 1;
    const request = queued ? { quantity, entry_token: entryToken } : { quantity };
    const { response, body } = await postWithProof(`/api/v1/vouchers/${voucherId}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", ...authHeaders() },
      body: JSON.stringify(request),
    });
    if (response.status === 202) {
      rememberOrder(body.order_id);
      // The entry (or the win) is spent: its stream confirms it shortly.
      if (queued && place) place = { ...place, order_id: body.order_id, entry_token: undefined };
      if (drawn && entry) entry = { ...entry, order_id: body.order_id };
      say("Order placed.");
      showOrder(body);
      watchOrder();
    } else {
      if (body.order_id) rememberOrder(body.order_id);
      // The entry or win admitted an order already (another tab, a retry): show it.
      if ((queued || drawn) && body.order_id) loadOrder();
      say(`${body.error}: ${body.message}`);
    }
  } catch (error) {
    say(error instanceof ProofError ? error.message : "The order could not be sent; try again.");
  } finally {
    buying = false;
  }
  render();
}

async function act(action) {
  const response = await fetch(`/api/v1/orders/${orderId}/${action}`, { method: "POST", headers: authHeaders() });
  const body = await response.json();
  say(response.ok ? `${action} requested` : `${body.error}: ${body.message}`);
}

// Reads a Server-Sent Events response to its end: `onEvent(data, id)` for
// each event (heartbeat comments carry neither).
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      let data = "";
      let id = null;
      for (const line of block.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      onEvent(data, id);
    }
  }
}

// A user's order stream carries their token, which EventSource cannot send:
// read the stream with fetch, and resume with Last-Event-ID after a drop.
let ordersStream = null;

async function followOrders() {
  const who = identity();
  if (!who) return;
  if (ordersStream) ordersStream.abort();
  const controller = new AbortController();
  ordersStream = controller;
  let lastEventId = null;
  while (!controller.signal.aborted) {
    try {
      const headers = { accept: "text/event-stream", ...authHeaders() };
      if (lastEventId) headers["last-event-id"] = lastEventId;
      const response = await fetch(`/api/v1/users/${encodeURIComponent(who.user)}/orders/stream`, {
        headers,
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(`stream answered ${response.status}`);
      // The stream carries changes from now on: what changed before it
      // opened (while the buyer was at the checkout) is read once.
      if (!lastEventId) loadOrder();
      await readEvents(response, (data, id) => {
        if (id) lastEventId = id;
        if (data) showOrder(JSON.parse(data));
      });
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// ---- the waiting room (queue-mode sales) -----------------------------------
// The user joins, then follows their place: the pre-queue before the start
// (places are drawn then), a position in line, their turn with an entry
// token that admits one order until it expires, or expired (join again).
// One loop follows the place: the place's stream read with fetch (it needs
// the user's token, as the orders stream does), or, while the stream is
// refused, a long-poll; either keeps the place watched. It ends once the
// place is settled (the entry placed an order, or the place expired).
let place = null; // the user's QueueStatus; null: no place (or not read yet)
let placeUser = null; // whose place the loop follows
let placeLoop = null; // the loop's AbortController
let joinOpensAt = null; // server ms before which a join is refused
let joining = false;
let buying = false;

const queueMode = () => Boolean(sale && sale.mode === "queue");
const settled = (status) => Boolean(status && (status.state === "expired" || status.order_id));

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

// What the page shows of the place: `data-state` of #queue-status.
function placeState() {
  if (!place) return "none";
  if (place.state === "your_turn") return place.order_id ? "ordered" : "your_turn";
  if (place.state === "waiting" && place.place == null) return "pre_queue";
  return place.state;
}

function placeText(state, phase) {
  switch (state) {
    case "pre_queue":
      return "You are in the pre-queue: places are drawn at the start";
    case "waiting": {
      if (place.position == null) return `Place ${place.place}, serving ${place.serving}`;
      const wait = place.estimated_wait_seconds;
      const about = wait == null ? "" : `, about ${Math.ceil(wait)} s`;
      return `Position ${place.position} (${place.people_ahead} ahead), serving ${place.serving}${about}`;
    }
    case "sold_out":
      return "Sold out — you keep your place in case units come back";
    case "your_turn":
      return "Your turn: buy before your entry expires";
    case "ordered":
      return "Your entry placed your order";
    case "expired":
      return "Expired — join again";
    default:
      if (phase === "ended") return "The sale is over.";
      if (joinOpensAt && serverNow() < joinOpensAt) {
        return `The waiting room opens in ${duration(joinOpensAt - serverNow())}`;
      }
      return "Join the waiting room for a place in line.";
  }
}

// Renders the waiting room of a queue-mode sale; false for any other sale.
function renderQueue(phase) {
  const queued = queueMode();
  $("queue").hidden = !queued;
  if (!queued) return false;
  const state = placeState();
  const status = $("queue-status");
  status.dataset.state = state;
  status.dataset.position = place && place.position != null ? String(place.position) : "";
  status.textContent = placeText(state, phase);
  const room = sale.queue;
  let roomLine = room
    ? `The room opens at ${clockTime(Date.parse(room.opens_at))} · ${plural(room.waiting, "place", "places")} waiting`
    : "";
  if (room && room.beacon_round != null) {
    const at = clockTime(Date.parse(room.beacon_round_at));
    // Before the start nothing is drawn yet: the round is only named.
    roomLine += phase === "upcoming"
      ? ` · places to be drawn by beacon round ${room.beacon_round} (due ${at})`
      : room.awaiting_beacon
        ? ` · waiting for beacon round ${room.beacon_round} (due ${at}) to draw the places`
        : ` · places drawn by beacon round ${room.beacon_round} (${at})`;
  }
  $("queue-timeline").textContent = roomLine;
  const numbered = place && place.place != null && ["waiting", "sold_out"].includes(state);
  $("queue-detail").textContent = numbered
    ? `Place ${place.place} of ${place.places} · ${place.serving} passed so far`
    : "";
  const turn = state === "your_turn";
  const expiresAt = turn && place.entry_expires_at ? Date.parse(place.entry_expires_at) : 0;
  $("entry-line").hidden = !turn;
  if (turn) $("entry-expires").textContent = duration(expiresAt - serverNow());
  const mayJoin = state === "none" || state === "expired";
  $("join").hidden = !mayJoin;
  $("join").textContent = state === "expired" ? "Join again" : "Join the waiting room";
  $("join").disabled = !(mayJoin && identity() && phase !== "ended" && !joining)
    || Boolean(joinOpensAt && serverNow() < joinOpensAt);
  // Buying needs the entry: the Buy button is there only on the user's turn.
  $("buy").hidden = !turn;
  $("quantity-line").hidden = !turn;
  $("buy").disabled = !(turn && identity() && !buying && expiresAt > serverNow());
  return true;
}

function showPlace(status) {
  place = status;
  // An order the entry placed (in another tab, say) is shown as well.
  if (place && place.order_id && place.order_id !== orderId) {
    rememberOrder(place.order_id);
    loadOrder();
  }
  render();
}

// Follows the user's place or entry, if this is a queue-mode or draw sale
// and it is not followed for them yet.
function ensureFollowed() {
  const who = identity();
  if (queueMode() && who && placeUser !== who.user) followPlace();
  if (drawMode() && who && entryUser !== who.user) followEntry();
}

// (Re)starts the one loop following the place.
function followPlace() {
  if (placeLoop) placeLoop.abort();
  placeLoop = null;
  const who = identity();
  placeUser = who ? who.user : null;
  if (!who || !queueMode()) return;
  const controller = new AbortController();
  placeLoop = controller;
  pollPlace(controller.signal);
}

function pollPlace(signal) {
  return followStatus(signal, `/api/v1/vouchers/${voucherId}/queue/me`, {
    show: showPlace,
    shown: () => Boolean(place),
    done: () => settled(place),
  });
}

// Follows one status of the user at `url` (a place, an entry): its
// `/stream` read with fetch, or while the stream is refused a long-poll,
// until `done()`. `show` gets each status (null: there is none, 404);
// `shown()` says whether the page shows one (a long-poll waits for a
// change only then).
async function followStatus(signal, url, { show, shown, done }) {
  let backoff = 1000;
  let streamRefusedAt = -Infinity;
  while (!signal.aborted) {
    try {
      const streaming = Date.now() - streamRefusedAt > 30000;
      const headers = streaming ? { accept: "text/event-stream", ...authHeaders() } : authHeaders();
      // The long-poll waits for a change only once the page shows a status.
      const target = streaming ? `${url}/stream` : shown() ? `${url}?wait=10s` : url;
      const response = await fetch(target, { headers, cache: "no-store", signal });
      if (response.status === 404) {
        // None yet (not joined): the Join button starts the loop again.
        show(null);
        return;
      }
      if ([401, 403, 409].includes(response.status)) {
        const body = await response.json().catch(() => ({}));
        say(`${body.error}: ${body.message}`);
        return;
      }
      if (!response.ok) {
        if (streaming) streamRefusedAt = Date.now();
        throw new Error(`${url} answered ${response.status}`);
      }
      if (streaming) {
        await readEvents(response, (data) => {
          if (data) show(JSON.parse(data));
        });
      } else {
        show(await response.json());
      }
      backoff = 1000;
      if (done()) return;
      if (!streaming) continue;
    } catch (_) {
      if (signal.aborted) return;
      backoff = Math.min(backoff * 2, 16000);
    }
    // A dropped stream or an error: again in a moment, less often each time.
    await pause(backoff, signal);
  }
}

async function join() {
  joining = true;
  render();
  try {
    const url = `/api/v1/vouchers/${voucherId}/queue`;
    const { response, body } = await postWithProof(url, { method: "POST", headers: authHeaders() });
    if (response.ok) {
      joinOpensAt = null;
      say(response.status === 201 ? "You joined the waiting room." : "You hold a place already.");
      showPlace(body);
      followPlace();
    } else if (body.error === "queue_not_open") {
      // Before the room opens (or while its seed is being committed).
      joinOpensAt = body.opens_at ? Math.max(Date.parse(body.opens_at), serverNow() + 1000) : serverNow() + 1000;
      say("The waiting room is not open yet.");
    } else {
      if (response.status === 429) joinOpensAt = serverNow() + 1000 * (Number(response.headers.get("retry-after")) || 1);
      say(`${body.error}: ${body.message}`);
    }
  } catch (error) {
    say(error instanceof ProofError ? error.message : "The waiting room could not be reached; try again.");
  } finally {
    joining = false;
    render();
  }
}

// ---- the draw (draw-mode sales) --------------------------------------------
// The user enters between entries_open_at and draw_at; at the draw every
// entry gets a rank, the first ones (as many as there are units) win and
// may order, each until their purchase_until. A unit that comes back (an
// order cancelled, a window lapsed unused) promotes the next rank. The
// entry is followed like a place: its stream, or a long-poll. The draw's
// times come with the entry (GET …/entries/me answers before entering too).
let entry = null; // the user's DrawStatus; null: not read yet
let entryUser = null; // whose entry the loop follows
let entryLoop = null; // the loop's AbortController
let entryOpensAt = null; // server ms before which an entry is refused
let entering = false;

const drawMode = () => Boolean(sale && sale.mode === "draw");
const winning = () => Boolean(entry && (entry.state === "won" || entry.state === "promoted"));
const entrySettled = (status) => Boolean(status && (status.state === "lapsed" || status.order_id));

// A win not spent yet, within its window on the server's clock.
function mayBuyWin() {
  return winning() && !entry.order_id && Boolean(entry.purchase_until)
    && Date.parse(entry.purchase_until) > serverNow();
}

// A server instant on the buyer's wall clock (the local clock may be off
// the server's): HH:MM:SS.
function clockTime(serverMs) {
  const at = new Date(serverMs - clockOffsetMs);
  return `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// Entries closed (the voucher read's timeline, on the server's clock).
function entriesClosed(now) {
  return Boolean(sale && sale.draw && now >= Date.parse(sale.draw.entries_open_until));
}

// The sale's countdown line for a draw, from its own timeline rather than
// the sale window: entries close, the beacon round awaited, the draw made.
function drawCountdown(now) {
  const draw = drawMode() && sale.draw;
  if (!draw) return null;
  if (now < Date.parse(draw.entries_open_until)) {
    return ["Entries close in", duration(Date.parse(draw.entries_open_until) - now)];
  }
  if (draw.drawn_at) return ["Drawn at", clockTime(Date.parse(draw.drawn_at))];
  if (draw.awaiting_beacon) return ["Waiting for beacon round", `#${draw.beacon_round}`];
  return ["Entries closed", "drawing…"];
}

// The draw's own timeline, for every reader (#draw-timeline).
function drawTimeline() {
  const draw = sale && sale.draw;
  if (!draw) return "";
  const parts = [`Entries open until ${clockTime(Date.parse(draw.entries_open_until))}`];
  if (draw.beacon_round != null) {
    const at = clockTime(Date.parse(draw.beacon_round_at));
    parts.push(draw.awaiting_beacon
      ? `waiting for beacon round ${draw.beacon_round} (due ${at})`
      : `ranked by beacon round ${draw.beacon_round} (${at})`);
  }
  if (draw.drawn_at) {
    parts.push(`drawn at ${clockTime(Date.parse(draw.drawn_at))}`);
    parts.push(`${plural(draw.winners, "winner", "winners")}, ${draw.promoted} promoted so far`);
  } else {
    parts.push(plural(draw.entries, "entry", "entries"));
  }
  return parts.join(" · ");
}

// What #draw-status says, and the countdown under it ([label, until] or null).
function drawText(now) {
  if (!identity()) {
    if (entriesClosed(now)) {
      return [sale.draw.drawn_at ? "Entries are closed: the draw was made" : "Entries are closed: the draw is being made",
        null];
    }
    return ["Say who is buying (above) to enter the draw.", null];
  }
  if (!entry) return ["Reading your entry…", null];
  const opensAt = Math.max(Date.parse(entry.entries_open_at), entryOpensAt || 0);
  const drawAt = Date.parse(entry.draw_at);
  const until = entry.purchase_until ? Date.parse(entry.purchase_until) : 0;
  switch (entry.state) {
    case "not_entered":
      if (now < opensAt) return [`Entries open in ${duration(opensAt - now)}`, ["Entries open in", opensAt]];
      if (now < drawAt) return ["Entries are open: enter the draw for a chance to buy", ["Draw in", drawAt]];
      return ["Entries are closed: the draw was made", null];
    case "entered":
      if (now < drawAt) return [`You are in the draw (${plural(entry.entries, "entry", "entries")})`, ["Draw in", drawAt]];
      return ["The draw is being made…", null];
    case "won":
    case "promoted": {
      const how = entry.state === "won" ? "You won" : "Promoted: a unit came back to you";
      if (entry.order_id) return [`${how} — your order is placed`, null];
      if (until <= now) return [`${how} — your purchase window is over`, null];
      return [`${how} — buy before ${clockTime(until)}`, ["Buy within", until]];
    }
    case "not_selected":
      if (entry.ranks_ahead == null) return ["Not selected — you may still be promoted if units come back", null];
      if (entry.ranks_ahead === 0) return ["Not selected — you are next in line if a unit comes back", null];
      return [
        `Not selected — ${plural(entry.ranks_ahead, "rank", "ranks")} ahead of you; you may still be promoted`,
        null,
      ];
    case "lapsed":
      return ["Your purchase window closed unused", null];
    default:
      return [`Your entry: ${entry.state}`, null];
  }
}

function drawDetail() {
  if (!entry) return "";
  const at = `the draw at ${clockTime(Date.parse(entry.draw_at))}`;
  if (entry.rank == null) return `${plural(entry.entries, "entry", "entries")} so far · ${at}`;
  return `Rank ${entry.rank} of ${entry.entries} · ${entry.winners} won at the draw, ${entry.won_through} so far`;
}

// ---- the reader's own state, in the voucher read -------------------------
// GET /api/v1/vouchers/{id} with the buyer's credentials carries `me`: their
// state in the draw and, while a win is open, its window's end. Read when
// the sale changes and every few seconds (a window may close meanwhile).
const MINE_EVERY_MS = 3000;
let mine = null; // `me` as last read; null: not read
let mineRead = 0; // local ms of the last read
let mineReading = false;

async function readMine() {
  if (!identity() || !drawMode() || mineReading) return;
  mineReading = true;
  mineRead = Date.now();
  try {
    const response = await fetch(`/api/v1/vouchers/${voucherId}`, { headers: authHeaders(), cache: "no-store" });
    if (response.ok) {
      const body = await response.json();
      mine = body.me || null;
      render();
    }
  } catch (_) {
    // Read again at the next change or after MINE_EVERY_MS.
  } finally {
    mineReading = false;
  }
}

const MINE_WORDS = {
  not_entered: "not entered",
  entered: "entered, waiting for the draw",
  not_selected: "not selected",
  won: "won",
  promoted: "promoted",
  used: "won, order placed",
  lapsed: "won, window closed unused",
};

function mineText() {
  if (!mine) return "";
  const until = mine.purchase_until ? ` until ${clockTime(Date.parse(mine.purchase_until))}` : "";
  return `Your draw: ${MINE_WORDS[mine.state] || mine.state}${until}`;
}

// Renders the draw of a draw sale; false for any other sale.
function renderDraw() {
  const drawn = drawMode();
  $("draw").hidden = !drawn;
  if (!drawn) return false;
  const now = serverNow();
  const status = $("draw-status");
  status.dataset.state = entry ? entry.state : "none";
  status.dataset.order = entry && entry.order_id ? entry.order_id : "";
  const [text, countdown] = drawText(now);
  status.textContent = text;
  $("draw-detail").textContent = drawDetail();
  $("draw-timeline").textContent = drawTimeline();
  if (identity() && Date.now() - mineRead >= MINE_EVERY_MS) readMine();
  const shown = identity() ? mine : null;
  $("draw-mine").hidden = !shown;
  $("draw-mine").textContent = shown ? mineText() : "";
  $("draw-mine").dataset.state = shown ? shown.state : "none";
  $("draw-mine").dataset.until = shown && shown.purchase_until ? shown.purchase_until : "";
  $("draw-timeline").dataset.awaitingBeacon = sale.draw && sale.draw.awaiting_beacon ? "true" : "false";
  $("draw-line").hidden = !countdown;
  if (countdown) {
    $("draw-countdown-label").textContent = countdown[0];
    $("draw-countdown").textContent = duration(countdown[1] - now);
  }
  const open = entry && entry.state === "not_entered"
    && now >= Math.max(Date.parse(entry.entries_open_at), entryOpensAt || 0) && now < Date.parse(entry.draw_at);
  const mayEnter = !entriesClosed(now)
    && (!entry || (entry.state === "not_entered" && now < Date.parse(entry.draw_at)));
  $("draw-enter").hidden = !mayEnter;
  $("draw-enter").disabled = !(open && identity() && !entering);
  // Buying needs a win: the Buy button is there only while it lasts.
  const win = winning() && !entry.order_id;
  $("buy").hidden = !win;
  $("quantity-line").hidden = !win;
  $("buy").disabled = !(mayBuyWin() && identity() && !buying);
  return true;
}

function showEntry(status) {
  entry = status;
  // An order the win placed (in another tab, say) is shown as well.
  if (entry && entry.order_id && entry.order_id !== orderId) {
    rememberOrder(entry.order_id);
    loadOrder();
  }
  render();
}

// (Re)starts the one loop following the entry.
function followEntry() {
  if (entryLoop) entryLoop.abort();
  entryLoop = null;
  const who = identity();
  entryUser = who ? who.user : null;
  if (!who || !drawMode()) return;
  const controller = new AbortController();
  entryLoop = controller;
  followStatus(controller.signal, `/api/v1/vouchers/${voucherId}/entries/me`, {
    show: showEntry,
    shown: () => Boolean(entry),
    done: () => entrySettled(entry),
  });
}

async function enterDraw() {
  entering = true;
  render();
  try {
    const url = `/api/v1/vouchers/${voucherId}/entries`;
    const { response, body } = await postWithProof(url, { method: "POST", headers: authHeaders() });
    if (response.ok) {
      entryOpensAt = null;
      say(response.status === 201 ? "You entered the draw." : "You are in the draw already.");
      showEntry(body);
      // The loop followed a user not entered yet: it follows the entry now.
      followEntry();
    } else if (body.error === "draw_not_open") {
      // Before entries open (or while the draw's seed is being committed).
      const opens = body.entries_open_at ? Date.parse(body.entries_open_at) : 0;
      entryOpensAt = Math.max(opens, serverNow() + 1000);
      say("Entries are not open yet.");
    } else {
      if (response.status === 429) {
        entryOpensAt = serverNow() + 1000 * (Number(response.headers.get("retry-after")) || 1);
      }
      say(`${body.error}: ${body.message}`);
    }
  } catch (error) {
    say(error instanceof ProofError ? error.message : "The draw could not be reached; try again.");
  } finally {
    entering = false;
    render();
  }
}

// ---- the proof of work (sales with challenge_bits) --------------------------
// Each order, join or entry of such a sale carries a solved challenge: one
// fetched just before the request (it expires, and pays for one request),
// solved in a Worker so that the page keeps counting down meanwhile.
class ProofError extends Error {}

// A spent or expired challenge (a slow solve, a retry), a difficulty raised
// meanwhile, or a sale that asks for a proof since the page last heard:
// worth one more request with a new challenge.
const NEW_CHALLENGE = ["challenge_used", "challenge_expired", "challenge_too_easy", "challenge_required"];
let solves = 0;
let solver = null; // { worker, reject } of the solve under way

function showProof(state, text, fraction, extra = {}) {
  $("pow").hidden = false;
  const bar = $("pow-progress");
  bar.dataset.state = state;
  bar.value = fraction;
  Object.assign(bar.dataset, extra);
  $("pow-text").textContent = text;
}

function solveInWorker(challenge, bits) {
  if (solver) {
    solver.worker.terminate();
    solver.reject(new ProofError("A newer proof of work replaced this one."));
  }
  const expected = 2 ** bits;
  const tried = (hashes) => `${hashes.toLocaleString()} of ~${expected.toLocaleString()} hashes expected (2^${bits})`;
  return new Promise((resolve, reject) => {
    let worker;
    try {
      worker = new Worker("/sale/assets/pow.js");
    } catch (_) {
      reject(new ProofError("This browser cannot run the proof of work this sale asks for."));
      return;
    }
    const current = { worker, reject };
    solver = current;
    const end = () => {
      worker.terminate();
      if (solver === current) solver = null;
    };
    showProof("working", `Proving this is not a bot: ${tried(0)}`, 0, { bits: String(bits), hashes: "0", ms: "" });
    worker.onmessage = (event) => {
      const message = event.data;
      if (message.type === "progress") {
        showProof("working", `Proving this is not a bot: ${tried(message.hashes)}`,
          Math.min(message.hashes / expected, 1), { hashes: String(message.hashes) });
      } else if (message.type === "done") {
        end();
        solves += 1;
        const took = message.ms < 1000 ? `${Math.round(message.ms)} ms` : `${(message.ms / 1000).toFixed(1)} s`;
        showProof("done", `Proof of work done: ${tried(message.hashes)}, in ${took}`, 1, {
          hashes: String(message.hashes),
          ms: String(message.ms),
          solved: String(solves),
        });
        resolve(message.solution);
      } else {
        end();
        showProof("failed", `The proof of work failed: ${message.message}`, 0);
        reject(new ProofError(`The proof of work failed: ${message.message}`));
      }
    };
    worker.onerror = (event) => {
      end();
      showProof("failed", "The proof of work failed to run.", 0);
      reject(new ProofError(`The proof of work failed to run: ${event.message || "worker error"}`));
    };
    worker.postMessage({ challenge, bits });
  });
}

// A solved challenge for the user on this sale; null when the sale asks
// for none.
async function proveWork() {
  const response = await fetch(`/api/v1/vouchers/${voucherId}/challenge`, {
    headers: authHeaders(),
    cache: "no-store",
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new ProofError(`No challenge to solve: ${body.error}: ${body.message}`);
  if (!body.required) return null;
  return { challenge: body.challenge, solution: await solveInWorker(body.challenge, body.bits) };
}

// POSTs with a proof of work when the sale asks for one (once more, with a
// new challenge, when the first is refused as such): the response and its
// body.
async function postWithProof(url, init) {
  let prove = Boolean(sale && sale.challenge_bits > 0);
  for (let attempt = 0; ; attempt++) {
    const headers = { ...init.headers };
    const solved = prove ? await proveWork() : null;
    if (solved) {
      headers["seckill-challenge"] = solved.challenge;
      headers["seckill-solution"] = solved.solution;
    }
    const response = await fetch(url, { ...init, headers });
    const body = await response.json().catch(() => ({ error: `http_${response.status}`, message: "no answer" }));
    if (attempt === 0 && NEW_CHALLENGE.includes(body.error)) {
      prove = true;
      continue;
    }
    return { response, body };
  }
}

// ---- start -----------------------------------------------------------------
$("voucher-id").textContent = voucherId;
$("save-identity").addEventListener("click", saveIdentity);
$("buy").addEventListener("click", buy);
$("join").addEventListener("click", join);
$("draw-enter").addEventListener("click", enterDraw);
$("confirm").addEventListener("click", () => act("confirm"));
$("pay").addEventListener("click", pay);
$("cancel").addEventListener("click", () => act("cancel"));
const saved = identity();
if (saved) {
  $("who").textContent = saved.user;
  followOrders();
  loadOrder();
}
syncClock().then(followSale, () => followSale());
setInterval(render, 200);
setInterval(() => syncClock().catch(() => {}), 30000);
