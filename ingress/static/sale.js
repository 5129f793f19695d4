// The reference client of a flash sale: a countdown from the server clock,
// the phase and stock pushed live, a buy button, then the order's status
// pushed live with confirm and cancel. Plain JavaScript, no build step.
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

function render() {
  if (!sale) return;
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
let orderId = null;

function say(text) {
  $("message").textContent = text;
}

function showOrder(order) {
  if (order.order_id !== orderId) return;
  $("order").hidden = false;
  $("order-id").textContent = order.order_id;
  $("order-status").textContent = order.status;
  $("order-reason").textContent = order.reason ? `(${order.reason})` : "";
  $("confirm").disabled = order.status !== "CREATED";
  $("cancel").disabled = !["PENDING", "CREATED", "CONFIRMED"].includes(order.status);
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
    orderId = body.order_id;
    say("Order placed.");
    showOrder(body);
  } else {
    if (body.order_id) orderId = body.order_id;
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
$("cancel").addEventListener("click", () => act("cancel"));
const saved = identity();
if (saved) {
  $("who").textContent = saved.user;
  followOrders();
}
syncClock().then(followSale, () => followSale());
setInterval(render, 200);
setInterval(() => syncClock().catch(() => {}), 30000);
