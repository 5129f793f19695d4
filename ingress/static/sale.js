// The reference client of a flash sale: what is sold and its price, a
// countdown from the server clock, the phase and stock pushed live, a buy
// button, then the order's status pushed live: a priced order is paid at the
// payment provider's checkout before its pay_by (counted down here), a free
// one claimed; either can be cancelled while unpaid. Plain JavaScript, no
// build step.
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
  $("buy").disabled = !(phase === "open" && identity());
}

function followSale() {
  const source = new EventSource(`/api/v1/vouchers/${voucherId}/stream`);
  source.addEventListener("voucher", (event) => {
    sale = JSON.parse(event.data);
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
  $("buy").disabled = true;
  const quantity = Number($("quantity").value) || 1;
  const response = await fetch(`/api/v1/vouchers/${voucherId}/orders`, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders() },
    body: JSON.stringify({ quantity }),
  });
  const body = await response.json();
  if (response.status === 202) {
    rememberOrder(body.order_id);
    say("Order placed.");
    showOrder(body);
    watchOrder();
  } else {
    if (body.order_id) rememberOrder(body.order_id);
    say(`${body.error}: ${body.message}`);
  }
  render();
}

async function act(action) {
  const response = await fetch(`/api/v1/orders/${orderId}/${action}`, { method: "POST", headers: authHeaders() });
  const body = await response.json();
  say(response.ok ? `${action} requested` : `${body.error}: ${body.message}`);
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
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffered.indexOf("\n\n")) >= 0) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("id:")) lastEventId = line.slice(3).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          }
          if (data) showOrder(JSON.parse(data));
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// ---- start -----------------------------------------------------------------
$("voucher-id").textContent = voucherId;
$("save-identity").addEventListener("click", saveIdentity);
$("buy").addEventListener("click", buy);
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
