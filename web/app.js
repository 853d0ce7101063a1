// app.js - the market page's behaviour: searches GET /market (the item box alone searches
// by the start of the item's name, item_prefix), shows a player (GET /players/{id}, and
// /players/{id}/trades with their token), buys with POST /purchase (a listing, or units of
// a stackable good across sellers at a max price; the pasted token, an Idempotency-Key per
// click), charts an item's price history (GET /items/{item}/history, drawn as SVG
// candles), lists open auctions with a countdown (GET /auctions) and bids the least they
// take (POST /auctions/{id}/bid) or puts an item up (POST /auctions), proposes, accepts
// and cancels direct trades (POST /trades/direct, GET /players/{id}/direct), and follows
// GET /events (Server-Sent Events) to show trades, listing changes and auctions as they happen, and
// to redraw the chart. No framework, no build.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
    cursor : null,
    source : null,
    refreshTimer : 0,
    searchSeq : 0,
    playerSeq : 0,
    historySeq : 0,
    historyTimer : 0
};

// ---- the API ----

function realm() {
  const r = $("realm").value.trim();
  return /^[A-Za-z0-9_-]{1,64}$/.test(r) ? r : "main";
}

// The path of a route in the chosen realm: "/realms/eu-1/market" or "/market".
function route(path) {
  return realm() === "main" ? path : "/realms/" + encodeURIComponent(realm()) + path;
}

function token() {
  return $("token").value.trim();
}

// The player a token speaks for: a JWT's sub ("<player>" or "<realm>/<player>"), or the
// "<player>" of "[<realm>/]<player>.<mac>"; "" when it cannot tell.
function tokenPlayer(t) {
  try {
    const parts = t.split(".");
    let sub = "";
    if (parts.length === 3) {
      const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
      sub = JSON.parse(atob(b64 + "===".slice((b64.length + 3) % 4))).sub || "";
    } else if (parts.length === 2) {
      sub = parts[0];
    }
    sub = String(sub);
    return sub.includes("/") ? sub.slice(sub.indexOf("/") + 1) : sub;
  } catch (e) {
    return "";
  }
}

// Calls the API: resolves to {status, body} (body parsed JSON, or null), never rejects
// for an HTTP error; a network failure becomes status 0.
async function api(method, path, body, extraHeaders) {
  const headers = Object.assign({}, extraHeaders || {});
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    const r = await fetch(route(path), {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    let parsed = null;
    try { parsed = await r.json(); } catch (e) { parsed = null; }
    return { status: r.status, body: parsed };
  } catch (e) {
    return { status: 0, body: { error: "network", detail: String(e) } };
  }
}

function say(text, ok) {
  const m = $("message");
  m.textContent = text;
  m.className = ok ? "ok" : "err";
}

function why(res) {
  const b = res.body || {};
  return (b.error || "error " + res.status) + (b.detail ? ": " + b.detail : "");
}

function idempotencyKey() {
  if (window.crypto && crypto.randomUUID) return "web-" + crypto.randomUUID();
  return "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
}

// ---- the market ----

// The item box alone searches by prefix (item_prefix, in name order); with a seller, a
// price or the dearest first, it names one item (the API takes no prefix with those).
function query(cursor) {
  const q = new URLSearchParams();
  const put = (k, v) => { if (v.trim()) q.set(k, v.trim()); };
  const others = ["q-seller", "q-min", "q-max"].some((id) => $(id).value.trim()) ||
                 $("q-sort").value !== "price";
  put(others ? "item" : "item_prefix", $("q-item").value);
  put("seller", $("q-seller").value);
  put("min_price", $("q-min").value);
  put("max_price", $("q-max").value);
  if ($("q-sort").value !== "price") q.set("sort", $("q-sort").value);
  q.set("limit", "20");
  if (cursor) q.set("cursor", cursor);
  return "/market?" + q.toString();
}

function listingRow(l) {
  const tr = document.createElement("tr");
  tr.dataset.item = l.item;
  tr.dataset.seller = l.seller;
  for (const [text, cls] of [[ l.item, "item" ], [ l.seller, "" ], [ String(l.price), "num" ],
                             [ l.quantity ? String(l.quantity) : "1", "num" ]]) {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      tr.appendChild(td);
  }
  const item = tr.firstChild; // a click on the item charts its prices
  item.title = "chart the price history of " + l.item;
  if (l.ends_ms) { // a listing that ends: its time left, counted down
      const left = document.createElement("span");
      left.className = "ends muted";
      left.dataset.ends = l.ends_ms;
      left.textContent = " " + timeLeft(l.ends_ms);
      item.appendChild(left);
  }
  item.addEventListener("click", () => {
      $("h-item").value = l.item;
      chart();
  });
  const td = document.createElement("td");
  const b = document.createElement("button");
  b.textContent = "Buy";
  b.className = "buy";
  b.setAttribute("aria-label", "buy " + l.item + " from " + l.seller);
  b.addEventListener("click", () => buy(l, b));
  td.appendChild(b);
  tr.appendChild(td);
  return tr;
}

async function search(more) {
  const seq = ++state.searchSeq;
  const res = await api("GET", query(more ? state.cursor : null));
  if (seq !== state.searchSeq) return; // a newer search answers instead
  const tbody = $("listings").querySelector("tbody");
  if (res.status !== 200) {
    say("search: " + why(res), false);
    return;
  }
  if (!more) tbody.textContent = "";
  for (const l of res.body.listings) tbody.appendChild(listingRow(l));
  state.cursor = res.body.next_cursor;
  $("more").hidden = !state.cursor;
  $("total").textContent = res.body.total + (res.body.total === 1 ? " listing" : " listings");
}

// POSTs purchase body (without its buyer) for the signed-in player with button disabled
// meanwhile; resolves to the answer's body on a 200, else null (the message says why).
async function purchase(body, button) {
  const buyer = $("player").value.trim() || tokenPlayer(token());
  if (!buyer) {
    say("paste your token (or type your player id) first", false);
    return null;
  }
  button.disabled = true;
  const headers = { "Idempotency-Key": idempotencyKey() };
  if (token()) headers.Authorization = "Bearer " + token();
  const res = await api("POST", "/purchase", Object.assign({ buyer }, body), headers);
  button.disabled = false;
  if (res.status === 200) $("funds").textContent = res.body.buyer_funds;
  else say("purchase refused: " + why(res) +
           (res.body && res.body.available !== undefined ? ` (${res.body.available} available)` : ""), false);
  return res.status === 200 ? res.body : null;
}

async function buy(l, button) {
  const p = await purchase({ seller: l.seller, item: l.item, price: l.price }, button);
  if (p) say(`Bought ${p.quantity} ${p.item} from ${p.seller} for ${p.total}; funds now ${p.buyer_funds}`, true);
  await Promise.all([search(false), showPlayer()]);
}

// Buys the units form's quantity of its item from the cheapest listings at or under its
// max price, across sellers (POST /purchase without a seller), all or nothing.
async function buyUnits() {
  const item = $("u-item").value.trim();
  const quantity = Number($("u-qty").value), maxPrice = Number($("u-max").value);
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(item) || !Number.isInteger(quantity) || quantity < 1 ||
      !Number.isInteger(maxPrice) || maxPrice < 1) {
    say("units: an item, a whole quantity of 1 or more and a max price of 1 or more", false);
    return;
  }
  const p = await purchase({ item, quantity, max_price: maxPrice }, $("units-go"));
  if (p) {
    const from = (p.fills || []).map((f) => `${f.quantity} from ${f.seller} at ${f.price}`).join(", ");
    say(`Bought ${p.quantity} ${p.item} for ${p.total}` + (from ? ` (${from})` : "") +
        `; funds now ${p.buyer_funds}`, true);
  }
  await Promise.all([search(false), showPlayer()]);
}

// ---- the player ----

function fill(listId, items) {
  const ul = $(listId);
  ul.textContent = "";
  for (const text of items) {
    const li = document.createElement("li");
    li.textContent = text;
    ul.appendChild(li);
  }
}

// A trade as a line: the player's own (me), or the market's, whose buyer and seller the
// server names only to them and the admin unless it makes them public.
function tradeLine(t, me) {
  const li = document.createElement("li");
  const named = t.buyer !== undefined;
  const verb = me ? (t.buyer === me ? "bought" : "sold") : named ? t.buyer + " bought" : "sold";
  const other = me      ? (t.buyer === me ? " from " + t.seller : " to " + t.buyer)
                : named ? " from " + t.seller
                        : "";
  li.textContent = `${new Date(t.time_ms).toLocaleTimeString()} ${verb} ${t.quantity} ${t.item}` +
                   `${other} at ${t.price}` + (t.fee ? ` (fee ${t.fee})` : "");
  return li;
}

async function showPlayer() {
  const id = $("player").value.trim();
  if (!id) return;
  const seq = ++state.playerSeq;
  const res = await api("GET", "/players/" + encodeURIComponent(id));
  if (seq !== state.playerSeq) return; // a newer refresh answers instead
  if (res.status !== 200) {
    $("player-view").hidden = true;
    say("player: " + why(res), false);
    return;
  }
  const p = res.body;
  $("player-view").hidden = false;
  $("funds").textContent = p.funds;
  $("escrow").textContent = p.escrow ? `(+${p.escrow} held by buy orders and bids)` : "";
  fill("inventory", p.inventory);
  fill("stacks", Object.entries(p.stacks).map(([k, v]) => `${k} ×${v}`));
  fill("my-listings", p.listings.map((l) => `${l.item} @${l.price}` + (l.quantity ? ` ×${l.quantity}` : "")));
  fill("my-auctions", (p.auctions || [])
                          .map((a) => `#${a} selling`)
                          .concat((p.bids || []).map((a) => `#${a} leading`)));
  const trades = $("trades");
  trades.textContent = "";
  if (!token()) {
    const li = document.createElement("li");
    li.textContent = "paste the player's token to see their trades";
    trades.appendChild(li);
    return;
  }
  showOrders(id, seq);
  showDirect(id, seq);
  const tr = await api("GET", "/players/" + encodeURIComponent(id) + "/trades?limit=20", undefined,
                       { Authorization: "Bearer " + token() });
  if (seq !== state.playerSeq) return;
  if (tr.status === 200) {
    for (const t of tr.body.trades) trades.appendChild(tradeLine(t, id));
  } else {
    const li = document.createElement("li");
    li.textContent = why(tr);
    trades.appendChild(li);
  }
}

// ---- buy orders and the book ----

// Lists the player's open buy orders, each with a Cancel button (their token's).
async function showOrders(id, seq) {
  const res = await api("GET", "/players/" + encodeURIComponent(id) + "/orders", undefined,
                        { Authorization: "Bearer " + token() });
  if (seq !== state.playerSeq) return;
  const ul = $("my-orders");
  ul.textContent = "";
  for (const o of res.status === 200 ? res.body.orders : []) {
    const li = document.createElement("li");
    li.textContent = `${o.item} ×${o.left} @${o.price} `;
    const b = document.createElement("button");
    b.className = "cancel";
    b.dataset.order = o.order_id;
    b.textContent = "Cancel";
    b.addEventListener("click", () => cancelOrder(o, b));
    li.appendChild(b);
    ul.appendChild(li);
  }
}

async function cancelOrder(o, button) {
  const buyer = $("player").value.trim();
  button.disabled = true;
  const headers = token() ? { Authorization: "Bearer " + token() } : {};
  const res = await api("DELETE", "/orders/" + o.order_id, { buyer }, headers);
  if (res.status === 200)
    say(`Cancelled the order of ${o.item}: ${res.body.refund} back; funds now ${res.body.buyer_funds}`, true);
  else
    say("cancel refused: " + why(res), false);
  await Promise.all([showPlayer(), book()]);
}

// Posts the units form as a buy order: what is listed at or under its price is bought
// now, the rest waits in the item's book with its price escrowed.
async function postOrder() {
  const buyer = $("player").value.trim() || tokenPlayer(token());
  const item = $("u-item").value.trim();
  const quantity = Number($("u-qty").value), maxPrice = Number($("u-max").value);
  if (!buyer || !/^[A-Za-z0-9_-]{1,64}$/.test(item) || !Number.isInteger(quantity) ||
      quantity < 1 || !Number.isInteger(maxPrice) || maxPrice < 1) {
    say("buy order: your token, an item, a whole quantity and a max price of 1 or more", false);
    return;
  }
  const headers = { "Idempotency-Key": idempotencyKey() };
  if (token()) headers.Authorization = "Bearer " + token();
  $("order-go").disabled = true;
  const res = await api("POST", "/orders", { buyer, item, quantity, max_price: maxPrice }, headers);
  $("order-go").disabled = false;
  if (res.status === 200 || res.status === 201) {
    const o = res.body;
    say(`Order of ${o.item}: ${o.filled} bought now` +
        (o.rested ? `, ${o.rested} resting at ${o.max_price} (order ${o.order_id})` : "") +
        `; funds now ${o.buyer_funds}`, true);
    $("h-item").value = item;
  } else {
    say("buy order refused: " + why(res), false);
  }
  await Promise.all([search(false), showPlayer(), book()]);
}

// Shows the book of the charted item: bids (buy orders) and asks (listings) by price level,
// best first, side by side.
async function book() {
  const item = $("h-item").value.trim();
  const tbody = $("book").querySelector("tbody");
  if (!item) return;
  const res = await api("GET", `/items/${encodeURIComponent(item)}/book?depth=5`);
  if (item !== $("h-item").value.trim()) return; // another item is charted now
  tbody.textContent = "";
  if (res.status !== 200) return;
  const { bids, asks } = res.body;
  for (let i = 0; i < Math.max(bids.length, asks.length); i++) {
    const tr = document.createElement("tr");
    const b = bids[i], a = asks[i];
    for (const v of [b && b.units, b && b.price, a && a.price, a && a.units]) {
      const td = document.createElement("td");
      td.className = "num";
      td.textContent = v === undefined ? "" : v;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
}

// ---- price history ----

const SVG = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs))
        e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
}

// Draws the candles of h (GET /items/{item}/history) into #chart: a candle an interval
// (high to low as a line, open to close as a box: up green, down red), the units traded as
// bars below, and the range's highest and lowest price.
function draw(h) {
    const svg = $("chart");
    svg.textContent = "";
    const k = h.candles;
    $("h-note").textContent = k.length ? `${h.item}: ${k.length} ${h.interval} candles, last ` +
                                             `${k[k.length - 1].close}`
                                       : `${h.item}: no trades in this range`;
    if (!k.length) return;
    const len = {"1m" : 60e3, "1h" : 3600e3, "1d" : 86400e3}[h.interval];
    const W = 600, left = 48, top = 8, priceH = 140, volTop = 160, volH = 34;
    const lo = Math.min(...k.map((c) => c.low)), hi = Math.max(...k.map((c) => c.high));
    const vmax = Math.max(...k.map((c) => c.volume));
    const from = h.from - (h.from % len), span = h.to - from + len;
    const x = (t) => left + ((t - from) / span) * (W - left);
    const y = (p) => top + (hi === lo ? priceH / 2 : ((hi - p) / (hi - lo)) * priceH);
    const w = Math.max(1, ((W - left) * len) / span * 0.7);
    svg.appendChild(svgEl("text", {x : 2, y : top + 10, class : "axis"}, String(hi)));
    svg.appendChild(svgEl("text", {x : 2, y : top + priceH, class : "axis"}, String(lo)));
    for (const c of k) {
        const cx = x(c.t) + w / 2, up = c.close >= c.open ? "up" : "down";
        svg.appendChild(
            svgEl("line", {x1 : cx, x2 : cx, y1 : y(c.high), y2 : y(c.low), class : up}));
        const y0 = y(Math.max(c.open, c.close)), y1 = y(Math.min(c.open, c.close));
        svg.appendChild(svgEl("rect", {
            x : x(c.t),
            y : y0,
            width : w,
            height : Math.max(1, y1 - y0),
            class : "candle " + up
        }));
        const vh = Math.max(1, (c.volume / vmax) * volH);
        svg.appendChild(
            svgEl("rect",
                  {x : x(c.t), y : volTop + volH - vh, width : w, height : vh, class : "volume"}));
    }
}

async function chart() {
    const item = $("h-item").value.trim();
    if (!item) return;
    const seq = ++state.historySeq;
    const res = await api("GET", `/items/${encodeURIComponent(item)}/history?interval=` +
                                     $("h-interval").value);
    if (seq !== state.historySeq) return; // a newer chart answers instead
    book();
    if (res.status !== 200) {
        $("chart").textContent = "";
        $("h-note").textContent = "history: " + why(res);
        return;
    }
    draw(res.body);
}

function historySoon() { // trades of the charted item in a burst: one redraw
    clearTimeout(state.historyTimer);
    state.historyTimer = setTimeout(chart, 250);
}

// ---- auctions ----

// The time left until ends_ms (by the store's clock; the page takes its own for it): "m:ss",
// "1h 05m" or "2d 3h"; "ended" once it is past.
function timeLeft(endsMs) {
    const s = Math.floor((endsMs - Date.now()) / 1000);
    if (s <= 0) return "ended";
    if (s >= 86400) return `${Math.floor(s / 86400)}d ${Math.floor(s % 86400 / 3600)}h`;
    if (s >= 3600)
        return `${Math.floor(s / 3600)}h ${String(Math.floor(s % 3600 / 60)).padStart(2, "0")}m`;
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function countdown() {
    for (const td of document.querySelectorAll("#auctions td.left"))
        td.textContent = timeLeft(Number(td.dataset.ends));
    for (const s of document.querySelectorAll("#listings .ends")) // listings that end
        s.textContent = " " + timeLeft(Number(s.dataset.ends));
}

// The least bid auction a takes now: its start, or its highest bid and its increment.
function minBid(a) {
    return a.bidder ? a.bid + a.min_increment : a.start_bid;
}

// Lists the open auctions, soonest to end first, each with a Bid button that bids the least
// it takes as the signed-in player.
async function auctions() {
    const res = await api("GET", "/auctions?limit=20");
    const tbody = $("auctions").querySelector("tbody");
    if (res.status !== 200) return;
    tbody.textContent = "";
    for (const a of res.body.auctions) {
        const tr = document.createElement("tr");
        tr.dataset.auction = a.id;
        const cells = [
            a.item + (a.quantity ? ` ×${a.quantity}` : ""), a.seller,
            a.bidder ? a.bid : `from ${a.start_bid}`, a.bidder || "–"
        ];
        cells.forEach((text, i) => {
            const td = document.createElement("td");
            td.textContent = text;
            if (i === 2) td.className = "num";
            tr.appendChild(td);
        });
        const left = document.createElement("td");
        left.className = "num left";
        left.dataset.ends = a.ends_ms;
        left.textContent = timeLeft(a.ends_ms);
        tr.appendChild(left);
        const td = document.createElement("td");
        const b = document.createElement("button");
        b.className = "bid";
        b.textContent = `Bid ${minBid(a)}`;
        b.addEventListener("click", () => bid(a, b));
        td.appendChild(b);
        tr.appendChild(td);
        tbody.appendChild(tr);
    }
}

async function bid(a, button) {
    const bidder = $("player").value.trim() || tokenPlayer(token());
    if (!bidder) {
        say("paste your token (or type your player id) first", false);
        return;
    }
    const headers = {"Idempotency-Key" : idempotencyKey()};
    if (token()) headers.Authorization = "Bearer " + token();
    button.disabled = true;
    const res = await api("POST", `/auctions/${a.id}/bid`, {bidder, amount : minBid(a)}, headers);
    if (res.status === 200) {
        const x = res.body.auction;
        say(res.body.status === "sold"
                ? `Bought ${x.item} at ${x.bid}; funds now ${res.body.bidder_funds}`
                : `Leading the auction of ${x.item} at ${x.bid}; funds now ${
                      res.body.bidder_funds}`,
            true);
    } else {
        say("bid refused: " + why(res) +
                (res.body && res.body.min_bid ? ` (${res.body.min_bid} or more)` : ""),
            false);
    }
    await Promise.all([ auctions(), showPlayer() ]);
}

// Puts the form's item (a unique one of the signed-in player's) up for auction.
async function auctionNew() {
    const seller = $("player").value.trim() || tokenPlayer(token());
    const item = $("a-item").value.trim();
    const start = Number($("a-start").value), minutes = Number($("a-minutes").value);
    if (!seller || !/^[A-Za-z0-9_-]{1,64}$/.test(item) || !Number.isInteger(start) || start < 1 ||
        !Number.isInteger(minutes) || minutes < 1) {
        say("auction: your token, an item of yours, a start bid and minutes of 1 or more", false);
        return;
    }
    const headers = {"Idempotency-Key" : idempotencyKey()};
    if (token()) headers.Authorization = "Bearer " + token();
    const res = await api("POST", "/auctions",
                          {seller, item, start_bid : start, duration_s : minutes * 60}, headers);
    if (res.status === 201)
        say(`Auction ${res.body.auction.id} of ${item} opened, ${minutes} min`, true);
    else
        say("auction refused: " + why(res), false);
    await Promise.all([ auctions(), showPlayer() ]);
}

// ---- direct trades ----

// One side of a proposal from the form: "sword-1, arrow:10" (items, and units as item:n)
// and funds; null when it is not one.
function side(text, funds) {
    const g = {}, items = [], units = {};
    for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
        const m = /^([A-Za-z0-9_-]{1,64})(?::([0-9]+))?$/.exec(part);
        if (!m) return null;
        if (m[2]) units[m[1]] = Number(m[2]);
        else items.push(m[1]);
    }
    const f = Number(funds || 0);
    if (!Number.isInteger(f) || f < 0) return null;
    if (items.length) g.items = items;
    if (Object.keys(units).length) g.units = units;
    if (f) g.funds = f;
    return g;
}

function goodsText(g) {
    const parts = g.items.concat(Object.entries(g.units).map(([k, v]) => `${k} ×${v}`));
    if (g.funds) parts.push(`${g.funds} funds`);
    return parts.join(", ") || "nothing";
}

// Lists the player's open direct trades (their token's): one offered to them with Accept
// and Decline, one they proposed with Withdraw.
async function showDirect(id, seq) {
    const res = await api("GET", "/players/" + encodeURIComponent(id) + "/direct", undefined,
                          {Authorization : "Bearer " + token()});
    if (seq !== state.playerSeq) return;
    const ul = $("my-direct");
    ul.textContent = "";
    for (const t of res.status === 200 ? res.body.trades : []) {
        const mine = t.from === id;
        const li = document.createElement("li");
        li.dataset.trade = t.id;
        li.textContent = mine ? `#${t.id} to ${t.to}: ${goodsText(t.give)} for ${goodsText(t.get)} `
                              : `#${t.id} from ${t.from}: ${goodsText(t.give)} for ${
                                    goodsText(t.get)} `;
        const buttons = mine ? [ [ "cancel", "Withdraw" ] ]
                             : [ [ "accept", "Accept" ], [ "cancel", "Decline" ] ];
        for (const [what, label] of buttons) {
            const b = document.createElement("button");
            b.className = what;
            b.textContent = label;
            b.addEventListener("click", () => closeTrade(t, what, b));
            li.appendChild(b);
        }
        ul.appendChild(li);
    }
}

async function closeTrade(t, what, button) {
    const player = $("player").value.trim();
    button.disabled = true;
    const headers = {"Idempotency-Key" : idempotencyKey()};
    if (token()) headers.Authorization = "Bearer " + token();
    const res = await api("POST", `/trades/direct/${t.id}/${what}`, {player}, headers);
    if (res.status === 200)
        say(what === "accept" ? `Traded with ${t.from}; funds now ${res.body.funds}`
                              : `Trade #${t.id} cancelled`,
            true);
    else
        say("refused: " + why(res) +
                (res.body && res.body.player ? ` (${res.body.player} lacks ${res.body.item || "funds"})` : ""),
            false);
    await showPlayer();
}

// Proposes the form's trade as the signed-in player.
async function directNew() {
    const from = $("player").value.trim() || tokenPlayer(token());
    const to = $("d-to").value.trim();
    const give = side($("d-give").value, $("d-give-funds").value);
    const get = side($("d-get").value, $("d-get-funds").value);
    if (!from || !/^[A-Za-z0-9_-]{1,64}$/.test(to) || !give || !get) {
        say("trade: your token, another player, and items (units as item:n) or funds", false);
        return;
    }
    const headers = {"Idempotency-Key" : idempotencyKey()};
    if (token()) headers.Authorization = "Bearer " + token();
    const res = await api("POST", "/trades/direct", {from, to, give, get}, headers);
    if (res.status === 201)
        say(`Trade #${res.body.trade.id} proposed to ${to}`, true);
    else
        say("trade refused: " + why(res) +
                (res.body && res.body.player ? ` (${res.body.player} lacks ${res.body.item || "funds"})` : ""),
            false);
    await showPlayer();
}

// ---- live ----

function refreshSoon() { // many events in a burst: one refresh
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(() => {
      search(false);
      showPlayer();
      auctions();
  }, 250);
}

function feed(text) {
  const ol = $("feed");
  const li = document.createElement("li");
  li.textContent = text;
  ol.insertBefore(li, ol.firstChild);
  while (ol.children.length > 50) ol.removeChild(ol.lastChild);
}

function live() {
  if (state.source) state.source.close();
  if (!window.EventSource) return;
  const src = new EventSource(route("/events"));
  state.source = src;
  const dot = $("live");
  let opened = false;
  src.onopen = () => {
    dot.textContent = "live";
    dot.className = "live on";
    if (opened) refreshSoon(); // a reconnect: what changed meanwhile was not streamed
    opened = true;
  };
  src.onerror = () => { dot.textContent = "reconnecting"; dot.className = "live off"; };
  src.addEventListener("trade", (e) => {
    const t = JSON.parse(e.data);
    feed(tradeLine(t, null).textContent);
    refreshSoon();
    if (t.item === $("h-item").value.trim()) historySoon();
  });
  src.addEventListener("auction", (e) => {
      const {action, auction : a} = JSON.parse(e.data);
      feed(action === "opened" ? `${a.seller} auctions ${a.item} from ${a.start_bid}`
           : action === "bid" ? `${a.bidder} bids ${a.bid} on ${a.item}`
           : action === "sold" ? `${a.item} sold at auction for ${a.bid}`
                               : `the auction of ${a.item} ended unsold`);
      refreshSoon();
  });
  src.addEventListener("listing", (e) => {
    const l = JSON.parse(e.data);
    feed(`${l.seller} ${l.action} ${l.item}` + (l.price ? ` at ${l.price}` : ""));
    refreshSoon();
    if (l.item === $("h-item").value.trim()) historySoon(); // its book changed
  });
}

// ---- wiring ----

$("search").addEventListener("submit", (e) => { e.preventDefault(); search(false); });
$("more").addEventListener("click", () => search(true));
$("units").addEventListener("submit", (e) => { e.preventDefault(); buyUnits(); });
$("order-go").addEventListener("click", postOrder);
$("history").addEventListener("submit", (e) => {
    e.preventDefault();
    chart();
});
$("h-interval").addEventListener("change", chart);
$("direct-new").addEventListener("submit", (e) => {
    e.preventDefault();
    directNew();
});
$("auction-new").addEventListener("submit", (e) => {
    e.preventDefault();
    auctionNew();
});
setInterval(countdown, 1000);
setInterval(auctions, 30000); // also refreshed by the live feed's auction events
$("signin").addEventListener("submit", (e) => {
  e.preventDefault();
  if (!$("player").value.trim()) $("player").value = tokenPlayer(token());
  sessionStorage.setItem("market.token", token());
  showPlayer();
});
$("token").addEventListener("change", () => {
  const p = tokenPlayer(token());
  if (p) $("player").value = p;
});
$("realm").addEventListener("change", () => {
    search(false);
    showPlayer();
    auctions();
    live();
});

$("token").value = sessionStorage.getItem("market.token") || "";
if (token()) $("player").value = tokenPlayer(token());
search(false);
showPlayer();
auctions();
live();
