// The reference client of a flash sale: what is sold and its price, a
// countdown from the server clock, the phase and stock pushed live, a buy
// button, then the order's status pushed live: a priced order is paid at the
// payment provider's checkout before its pay_by (counted down here), a free
// one claimed; either can be cancelled while unpaid. A queue-mode sale is
// bought through its waiting room: join (before the start, the pre-queue),
// follow the place live, and buy with the entry token when it is your turn.
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
  if (phase === "upcoming") {
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
  if (!renderQueue(phase)) $("buy").disabled = !(phase === "open" && identity());
}

function followSale() {
  const source = new EventSource(`/api/v1/vouchers/${voucherId}/stream`);
  source.addEventListener("voucher", (event) => {
    sale = JSON.parse(event.data);
    ensurePlaceFollowed();
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
  // A place is the user's: the new identity's is read afresh.
  place = null;
  placeUser = null;
  joinOpensAt = null;
  ensurePlaceFollowed();
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
  // A queue-mode sale admits the order that carries the place's entry token.
  const queued = queueMode();
  const entryToken = queued && place ? place.entry_token : null;
  if (queued && !entryToken) return;
  $("buy").disabled = true;
  buying = true;
  try {
    const quantity = Number($("quantity").value) || 1;
    const request = queued ? { quantity, entry_token: entryToken } : { quantity };
    const response = await fetch(`/api/v1/vouchers/${voucherId}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", ...authHeaders() },
      body: JSON.stringify(request),
    });
    const body = await response.json();
    if (response.status === 202) {
      rememberOrder(body.order_id);
      // The entry is spent: the place's stream confirms it shortly.
      if (queued && place) place = { ...place, order_id: body.order_id, entry_token: undefined };
      say("Order placed.");
      showOrder(body);
      watchOrder();
    } else {
      if (body.order_id) rememberOrder(body.order_id);
      // The entry admitted an order already (another tab, a retry): show it.
      if (queued && body.order_id) loadOrder();
      say(`${body.error}: ${body.message}`);
    }
  } catch (_) {
    say("The order could not be sent; try again.");
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

// Follows the user's place, if this is a queue-mode sale and it is not
// followed for them yet.
function ensurePlaceFollowed() {
  const who = identity();
  if (queueMode() && who && placeUser !== who.user) followPlace();
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

async function pollPlace(signal) {
  const url = `/api/v1/vouchers/${voucherId}/queue/me`;
  let backoff = 1000;
  let streamRefusedAt = -Infinity;
  while (!signal.aborted) {
    try {
      const streaming = Date.now() - streamRefusedAt > 30000;
      const headers = streaming ? { accept: "text/event-stream", ...authHeaders() } : authHeaders();
      // The long-poll waits for a change only once the page shows a place.
      const target = streaming ? `${url}/stream` : place ? `${url}?wait=10s` : url;
      const response = await fetch(target, { headers, cache: "no-store", signal });
      if (response.status === 404) {
        // No place (not joined yet): the Join button starts the loop again.
        showPlace(null);
        return;
      }
      if ([401, 403, 409].includes(response.status)) {
        const body = await response.json().catch(() => ({}));
        say(`${body.error}: ${body.message}`);
        return;
      }
      if (!response.ok) {
        if (streaming) streamRefusedAt = Date.now();
        throw new Error(`the place answered ${response.status}`);
      }
      if (streaming) {
        await readEvents(response, (data) => {
          if (data) showPlace(JSON.parse(data));
        });
      } else {
        showPlace(await response.json());
      }
      backoff = 1000;
      if (settled(place)) return;
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
    const response = await fetch(`/api/v1/vouchers/${voucherId}/queue`, { method: "POST", headers: authHeaders() });
    const body = await response.json().catch(() => ({}));
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
  } catch (_) {
    say("The waiting room could not be reached; try again.");
  } finally {
    joining = false;
    render();
  }
}

// ---- start -----------------------------------------------------------------
$("voucher-id").textContent = voucherId;
$("save-identity").addEventListener("click", saveIdentity);
$("buy").addEventListener("click", buy);
$("join").addEventListener("click", join);
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
