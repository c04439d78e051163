// toolwire /ui: plain JS, no build step; charts by the vendored uPlot (vendor/, MIT). Everything
// shown comes from the gateway's JSON and is put on the page with textContent only (model output
// and tool results are untrusted). Views are addressed by the URL's hash, so every run has a
// deep link: /ui#/responses/<id>.
"use strict";

const KEY = "toolwire.apiKey";
const PAGE = 50;
const $ = (id) => document.getElementById(id);
const state = { me: null, offset: 0, cOffset: 0, keys: [], charts: [], timer: null, selected: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

function status(text, bad) {
  const node = $("status");
  node.textContent = text || "";
  node.className = bad ? "st-failed" : "muted";
}

class NeedsKey extends Error {}

async function api(path, options) {
  const headers = { ...(options && options.headers) };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.authorization = "Bearer " + key;
  const response = await fetch(path, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) throw new NeedsKey((body.error && body.error.message) || "");
  if (!response.ok) {
    const message = (body.error && body.error.message) || response.statusText;
    throw new Error(message);
  }
  return body;
}

const seconds = (value) => {
  if (value === undefined || value === null) return "–";
  const v = Number(value);
  return v < 1 ? `${Math.round(v * 1000)} ms` : `${v < 10 ? v.toFixed(2) : v.toFixed(1)} s`;
};
const when = (epoch) => new Date(epoch * 1000).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
const epochOf = (input) => (input.value ? Math.floor(new Date(input.value).getTime() / 1000) : "");
const number = (value) => (value === null || value === undefined ? "–" : Number(value).toLocaleString());
const keyName = (row) => row.key_name || (row.owner ? row.owner : "(no key)");

// -- sign-in -----------------------------------------------------------------------------

function signIn(message) {
  stopLive();
  $("signin").hidden = false;
  $("app").hidden = true;
  $("signin-why").textContent = sessionStorage.getItem(KEY)
    ? "That key was not accepted. Paste another API key of this server."
    : "This server needs an API key to show its runs.";
  $("signin-error").textContent = sessionStorage.getItem(KEY) && message ? message : "";
  $("api-key").focus();
}

async function start() {
  try {
    state.me = await api("/ui/api/me");
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return status(error.message, true);
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  const me = state.me;
  document.body.classList.toggle("operator", !!me.operator);
  $("nav-keys").hidden = !me.operator;
  for (const node of document.querySelectorAll(".op-only")) node.hidden = !me.operator;
  $("whoami").textContent = me.keys_in_use ? `${me.key_name || me.key_id}${me.operator ? " · operator" : " · tenant"}` : "no keys in use · all runs";
  $("sign-out").hidden = !me.keys_in_use;
  if (me.operator && me.keys_in_use) await loadKeyChoices();
  await loadModels();
  route();
  refreshApprovals();
}

async function loadKeyChoices() {
  try {
    state.keys = (await api("/ui/api/keys")).data;
  } catch (error) {
    state.keys = [];
  }
  for (const select of document.querySelectorAll(".key-select")) {
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "", text: "every key" }), el("option", { value: "none", text: "(before keys)" }));
    for (const key of state.keys) select.append(el("option", { value: key.id, text: key.name + (key.revoked_at ? " (revoked)" : "") }));
    select.value = chosen;
  }
}

async function loadModels() {
  try {
    const models = (await api("/ui/api/models")).data;
    const select = $("f-model");
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "", text: "any" }), ...models.map((m) => el("option", { value: m, text: m })));
    select.value = chosen;
  } catch (error) { /* the list still works without it */ }
}

// -- routing -----------------------------------------------------------------------------

function show(view) {
  for (const node of document.querySelectorAll(".view")) node.hidden = node.id !== "view-" + view;
  const tab = view === "run" ? "responses" : view === "conversation" ? "conversations" : view;
  for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("active", link.dataset.view === tab);
}

function route() {
  if (!state.me) return;
  stopLive();
  const [, view, id] = (location.hash || "#/overview").split("/").map(decodeURIComponent);
  if (view === "responses" && id) { show("run"); return showResponse(id); }
  if (view === "conversations" && id) { show("conversation"); return showConversation(id); }
  if (view === "responses") { show("responses"); return loadResponses(); }
  if (view === "conversations") { show("conversations"); return loadConversations(); }
  if (view === "approvals") { show("approvals"); return refreshApprovals(); }
  if (view === "keys" && state.me.operator) { show("keys"); return loadKeys(); }
  show("overview");
  return loadOverview();
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// -- overview ----------------------------------------------------------------------------

const COLORS = { repairs: "#8250df", leaks_recovered: "#1a7f37", leaks_given_up: "#cf222e", malformed_refused: "#bf3989", retries: "#bc4c00", responses: "#0969da", failed: "#cf222e", input_tokens: "#0969da", output_tokens: "#1a7f37", latency_p50: "#0969da", latency_p95: "#bc4c00" };
const LABELS = { repairs: "repairs", leaks_recovered: "leaks recovered", leaks_given_up: "leaks given up", malformed_refused: "malformed calls refused", retries: "upstream retries", responses: "responses", failed: "failed", input_tokens: "input", output_tokens: "output", latency_p50: "p50", latency_p95: "p95" };

async function loadOverview() {
  const range = Number($("o-range").value);
  const until = Math.floor(Date.now() / 1000);
  const query = new URLSearchParams({ since: until - range, until });
  if ($("o-key").value) query.set("key", $("o-key").value);
  let data;
  try {
    data = await api("/ui/api/overview?" + query);
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return status(error.message, true);
  }
  const t = data.total;
  const stat = (value, label, kind) => el("div", { class: "stat " + (kind || "") }, el("b", { text: value }), el("span", { text: label }));
  $("stats").replaceChildren(
    stat(number(t.repairs), "stream repairs", "fix"),
    stat(number(t.leaks_recovered), "leaked calls recovered", "fix"),
    stat(number(t.malformed_refused), "malformed calls refused", "fix"),
    stat(number(t.retries), "upstream retries", "fix"),
    stat(number(t.leaks_given_up), "leaks given up", t.leaks_given_up ? "bad" : ""),
    stat(`${number(t.upstream_failures)} / ${number(t.failed)}`, "upstream failures / failed", t.failed ? "bad" : ""),
    stat(number(t.input_tokens + t.output_tokens), `tokens (${number(t.responses)} responses)`),
    stat(`${seconds(t.latency_p50)} / ${seconds(t.latency_p95)}`, "latency p50 / p95"),
  );
  $("o-caption").textContent = `${new Date(data.since * 1000).toLocaleString()} – now, ${data.bucket_seconds >= 3600 ? data.bucket_seconds / 3600 + " h" : data.bucket_seconds / 60 + " min"} buckets`;
  drawCharts(data.series);
  const body = $("by-model").querySelector("tbody");
  body.replaceChildren();
  for (const row of data.by_model) {
    body.append(el("tr", {},
      el("td", { text: row.model }), el("td", { text: row.upstream }),
      ...[row.responses, row.repairs, row.leaks_recovered, row.leaks_given_up, row.malformed_refused, row.retries, row.failed, row.input_tokens + row.output_tokens].map((v) => el("td", { class: "n", text: number(v) })),
      el("td", { class: "n", text: seconds(row.latency_p50) }), el("td", { class: "n", text: seconds(row.latency_p95) }),
    ));
  }
  if (!data.by_model.length) body.append(el("tr", {}, el("td", { colspan: 12, class: "muted", text: "No responses in this range." })));
  const kinds = Object.entries(t.repairs_by_kind);
  const most = Math.max(1, ...kinds.map(([, n]) => n));
  $("repair-kinds").replaceChildren(...(kinds.length ? kinds.map(([kind, n]) => el("div", {}, el("span", { text: kind.replace(/_/g, " "), title: kind }), el("i", { style: `width:${Math.max(4, (100 * n) / most)}%` }), el("span", { class: "n", text: number(n) }))) : [el("p", { class: "muted", text: "No repairs in this range." })]));
  status(`${number(t.responses)} responses in range`);
  await loadUpstreams();
}

// A fleet's model servers (operators only: it names the infrastructure; absent with one).
async function loadUpstreams() {
  let rows = [];
  if (state.me && state.me.operator) {
    try {
      rows = (await api("/ui/api/upstreams")).upstreams;
    } catch (error) {
      rows = [];
    }
  }
  $("fleet").hidden = !rows.length;
  const body = $("upstreams").querySelector("tbody");
  body.replaceChildren(...rows.map((row) => el("tr", {},
    el("td", { text: row.name }), el("td", { text: row.url }),
    el("td", { class: row.state === "closed" ? "" : "st-failed", text: row.state.replace("_", "-") }),
    ...[row.outstanding, row.calls, row.failures].map((v) => el("td", { class: "n", text: number(v) })),
    el("td", { class: "n", text: `${(100 * row.error_rate).toFixed(1)} %` }),
    el("td", { class: "n", text: seconds(row.ttft) }),
    el("td", { text: row.models === null ? "unknown" : row.models.join(", ") }),
    el("td", { class: "muted", text: row.last_error || "" }),
  )));
}

function drawCharts(series) {
  for (const chart of state.charts) chart.destroy();
  state.charts = [];
  const plot = (id, names, bars) => {
    const box = $(id);
    box.replaceChildren();
    const opts = {
      width: Math.max(200, box.clientWidth),
      height: 150,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      series: [{}, ...names.map((name) => ({
        label: LABELS[name], stroke: COLORS[name], width: 2,
        fill: bars ? COLORS[name] + "cc" : COLORS[name] + "22",
        paths: bars && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.8 / names.length, 40], align: 1 }) : undefined,
        points: { show: !bars, size: 7 },
        spanGaps: !bars,
      }))],
      axes: [{}, { size: 48 }],
    };
    const columns = [series.t, ...names.map((name) => series[name])];
    state.charts.push(new uPlot(opts, columns, box));
  };
  plot("chart-fixed", ["repairs", "leaks_recovered", "malformed_refused", "retries", "leaks_given_up"], true);
  plot("chart-runs", ["responses", "failed"], true);
  plot("chart-tokens", ["input_tokens", "output_tokens"], false);
  plot("chart-latency", ["latency_p50", "latency_p95"], false);
}

// -- responses ---------------------------------------------------------------------------

function responseQuery() {
  const query = new URLSearchParams({ limit: PAGE, offset: state.offset });
  if ($("f-q").value.trim()) query.set("q", $("f-q").value.trim());
  if ($("f-status").value) query.set("status", $("f-status").value);
  if ($("f-model").value) query.set("model", $("f-model").value);
  if ($("f-key").value) query.set("key", $("f-key").value);
  if (epochOf($("f-since"))) query.set("since", epochOf($("f-since")));
  if (epochOf($("f-until"))) query.set("until", epochOf($("f-until")));
  return query;
}

async function loadResponses() {
  let page;
  try {
    page = await api("/ui/api/responses?" + responseQuery());
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return status(error.message, true);
  }
  renderResponses(page.data);
  const first = page.total ? page.offset + 1 : 0;
  $("page-info").textContent = `${number(first)}–${number(page.offset + page.data.length)} of ${number(page.total)} responses`;
  $("prev").disabled = page.offset === 0;
  $("next").disabled = !page.has_more;
  status(`${number(page.total)} responses`);
  startLive();
}

function badges(saved) {
  const out = [];
  if (saved.repairs) out.push(el("span", { class: "badge", title: "stream repairs", text: `${saved.repairs} repair${saved.repairs > 1 ? "s" : ""}` }));
  if (saved.leaks) out.push(el("span", { class: "badge", title: "tool calls written as text", text: `${saved.leaks} leak${saved.leaks > 1 ? "s" : ""}` }));
  if (saved.refused) out.push(el("span", { class: "badge refused", title: "malformed calls refused", text: `${saved.refused} refused` }));
  if (saved.retries) out.push(el("span", { class: "badge retry", title: "upstream retries", text: `${saved.retries} retr${saved.retries > 1 ? "ies" : "y"}` }));
  return out;
}

function renderResponses(rows) {
  const body = $("responses").querySelector("tbody");
  body.replaceChildren();
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No responses match." })));
  for (const row of rows) {
    const usage = row.usage || {};
    const waiting = row.pending_approvals.length ? " · awaiting approval" : "";
    const tr = el(
      "tr",
      { "data-id": row.id, title: row.id, onclick: () => go("#/responses/" + encodeURIComponent(row.id)) },
      el("td", { text: when(row.created_at) }),
      el("td", { text: row.input || "", title: row.input || "" }),
      el("td", { text: row.model || "" }),
      el("td", { class: "op-col", text: keyName(row) }),
      el("td", { class: "st-" + row.status, text: row.status + waiting }),
      el("td", { class: "n", text: usage.total_tokens !== undefined ? `${number(usage.input_tokens)} / ${number(usage.output_tokens)}` : "" }),
      el("td", { class: "n", text: seconds(row.latency) }),
      el("td", {}, ...badges(row.saved)),
    );
    if (row.id === state.selected) tr.classList.add("selected");
    body.append(tr);
  }
}

function startLive() {
  stopLive();
  if (!$("f-live").checked) return;
  // Live: the list re-reads itself every few seconds while it is shown (its first page grows).
  state.timer = setInterval(() => {
    if (!$("view-responses").hidden && !document.hidden) loadResponses();
  }, 4000);
}

function stopLive() {
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
}

// -- one run -----------------------------------------------------------------------------

function entryBody(entry, pending, responseId) {
  const parts = [];
  switch (entry.type) {
    case "run_started":
      parts.push(`model ${entry.model}, started ${when(entry.at)}`);
      break;
    case "model_call": {
      parts.push(`call ${entry.iteration}: ${seconds(entry.duration)}, first token ${seconds(entry.ttft)}, tokens ${entry.input_tokens ?? "?"} in / ${entry.output_tokens ?? "?"} out, finish ${entry.finish_reason ?? "-"}`);
      if (entry.upstream) parts.push(el("div", { class: "muted", text: `on ${entry.upstream} (${entry.routed})` }));
      if (entry.error) parts.push(el("div", { class: "st-failed", text: entry.error }));
      if (entry.text) parts.push(el("pre", { text: entry.text }));
      for (const call of entry.calls || []) parts.push(el("div", { text: `→ ${call.name} (${call.target}) ${call.call_id}` }));
      break;
    }
    case "tool_call":
      parts.push(`${entry.name} on ${entry.server_label}: ${entry.ok ? "ok" : "error"} in ${seconds(entry.duration)}`);
      parts.push(el("div", { class: "muted", text: "arguments" }), el("pre", { text: entry.arguments }));
      if (entry.error) parts.push(el("div", { class: "st-failed", text: entry.error }));
      if (entry.output) parts.push(el("div", { class: "muted", text: "output" }), el("pre", { text: entry.output }));
      break;
    case "tool_rejected":
      parts.push(`${entry.name} refused: ${entry.error}`, el("pre", { text: entry.arguments }));
      break;
    case "repair":
      parts.push(`stream repaired: ${entry.kind}`);
      break;
    case "arguments_repaired":
      parts.push(`${entry.name} arguments repaired to fit its schema: ${entry.kind.replace(/_/g, " ")} at ${entry.path}`, el("pre", { text: entry.arguments }));
      break;
    case "arguments_misfit":
      parts.push(`${entry.name} arguments do not fit its schema: ${{ retry: "asked again", passed: "handed on as written", rejected: "refused" }[entry.action] ?? entry.action}, attempt ${entry.attempt}`, el("div", { class: "st-failed", text: entry.error }), el("pre", { text: entry.arguments }));
      break;
    case "leak":
      parts.push(`tool call written as text (${entry.format}): ${entry.action}, attempt ${entry.attempt}`, el("pre", { text: entry.snippet }));
      break;
    case "upstream_retry":
      parts.push(`upstream asked again (${entry.cause}), attempt ${entry.attempt} after ${seconds(entry.delay)}`);
      break;
    case "tools_listed":
      parts.push(`${entry.server_label}: ${entry.count} tools${entry.error ? " — " + entry.error : ""}`);
      break;
    case "calls_returned":
      for (const call of entry.calls) parts.push(el("div", { text: `${call.name} ${call.call_id}` }), el("pre", { text: call.arguments }));
      break;
    case "approval_requested":
      for (const request of entry.requests) {
        if (pending.includes(request.approval_request_id)) parts.push(approvalCard(responseId, request));
        else parts.push(el("div", { text: `${request.name} on ${request.server_label} (answered)` }), el("pre", { text: request.arguments }));
      }
      break;
    case "approval_decided":
      parts.push(`${entry.approve ? "approved" : "denied"}: ${entry.approval_request_id}`);
      break;
    case "finished":
      parts.push(`${entry.status} (${entry.reason})${entry.message ? ": " + entry.message : ""}; tokens ${entry.input_tokens} in / ${entry.output_tokens} out`);
      break;
    default:
      parts.push(JSON.stringify(entry));
  }
  return parts;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part.text ?? part.refusal ?? (part.type ? `[${part.type}]` : "")).join("\n");
  return content === undefined ? "" : JSON.stringify(content);
}

function itemView(item) {
  if (item.type === "message" || item.role) {
    return el("div", { class: "item " + (item.role || "") }, el("span", { class: "role", text: item.role || "message" }), el("pre", { text: textOf(item.content) }));
  }
  const label = item.type.replace(/_/g, " ") + (item.name ? ": " + item.name : "");
  const detail = item.arguments ?? item.output ?? item.summary ?? item;
  return el("div", { class: "item" }, el("span", { class: "role", text: label }), el("pre", { text: typeof detail === "string" ? detail : JSON.stringify(detail, null, 2) }));
}

async function showResponse(id) {
  state.selected = id;
  const pane = $("detail");
  let found;
  try {
    found = await api("/ui/api/responses/" + encodeURIComponent(id));
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return pane.replaceChildren(el("p", { class: "st-failed", text: error.message }));
  }
  const { response, timeline, pending_approvals: pending } = found;
  const list = el("ol", { class: "timeline", "data-testid": "timeline" });
  for (const entry of timeline) {
    const failed = entry.ok === false || entry.status === "failed" || entry.error;
    list.append(el(
      "li",
      { class: `t-${entry.type}${failed ? " failed" : ""}`, "data-type": entry.type },
      el("span", { class: "at", text: "+" + seconds(entry.t) }),
      el("span", { class: "kind", text: entry.type.replace(/_/g, " ") }),
      ...entryBody(entry, pending, id),
    ));
  }
  const link = location.origin + "/ui#/responses/" + encodeURIComponent(response.id);
  const usage = response.usage || {};
  const head = el(
    "div",
    { class: "run-head" },
    el("h2", { text: response.id }),
    el("span", { class: "st-" + response.status, "data-testid": "run-status", text: response.status }),
    el("span", { text: `${response.model} · ${when(response.created_at)}` }),
    state.me.operator && state.me.keys_in_use ? el("span", { text: "key " + (found.key_name || found.owner || "(before keys)") }) : null,
    el("span", { text: `tokens ${number(usage.input_tokens)} in / ${number(usage.output_tokens)} out` }),
    response.previous_response_id ? el("a", { href: "#/responses/" + encodeURIComponent(response.previous_response_id), text: "← continues " + response.previous_response_id }) : null,
    response.conversation && response.conversation.id ? el("a", { href: "#/conversations/" + encodeURIComponent(response.conversation.id), text: "conversation" }) : null,
    el("a", { href: link, "data-testid": "deep-link", text: "link to this run" }),
  );
  const input = el("div", {}, el("h2", { text: "Input" }), ...(response.instructions ? [el("div", { class: "item" }, el("span", { class: "role", text: "instructions" }), el("pre", { text: response.instructions }))] : []), ...found.input_items.map(itemView));
  const output = el("div", {}, el("h2", { text: "Output" }), ...(response.output || []).map(itemView), response.error ? el("div", { class: "st-failed", text: response.error.message }) : null);
  const steps = el("div", {}, el("h2", { text: "Run" }), timeline.length ? list : el("p", { class: "muted", text: "No timeline recorded for this response." }));
  const run = el("div", { class: "run-grid" }, el("div", {}, input, output), steps);
  const raw = el("pre", { class: "raw", "data-testid": "raw", text: JSON.stringify({ response, input_items: found.input_items, timeline }, null, 2) });
  raw.hidden = true;
  const tab = (label, show) => el("button", { type: "button", class: show ? "active" : "", onclick: (event) => {
    for (const b of event.target.parentNode.children) b.classList.toggle("active", b === event.target);
    run.hidden = label !== "Run"; raw.hidden = label !== "Raw JSON";
  }, text: label });
  pane.replaceChildren(head, el("div", { class: "tabs" }, tab("Run", true), tab("Raw JSON", false)), run, raw);
  status("");
}

function approvalCard(responseId, request) {
  return el(
    "div",
    { class: "approval", "data-approval": request.approval_request_id },
    el("div", {}, el("span", { class: "kind", text: request.name }), el("span", { class: "muted", text: `on ${request.server_label} · ${responseId}` })),
    el("pre", { text: request.arguments || "{}" }),
    el("button", { class: "approve", type: "button", text: "Approve", onclick: () => decide(responseId, request.approval_request_id, true) }),
    " ",
    el("button", { class: "deny", type: "button", text: "Deny", onclick: () => decide(responseId, request.approval_request_id, false) }),
  );
}

async function decide(responseId, approvalId, approve) {
  // Continue the run exactly as a client would: an mcp_approval_response on a new response.
  status(approve ? "approving…" : "denying…");
  try {
    const { response } = await api("/ui/api/responses/" + encodeURIComponent(responseId));
    const next = await api("/v1/responses", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: response.model,
        previous_response_id: responseId,
        tools: response.tools || [],
        input: [{ type: "mcp_approval_response", approval_request_id: approvalId, approve }],
      }),
    });
    status(`${approve ? "approved" : "denied"}: continued as ${next.id} (${next.status})`);
    refreshApprovals();
    go("#/responses/" + encodeURIComponent(next.id));
  } catch (error) {
    status(error.message, true);
  }
}

async function refreshApprovals() {
  try {
    const rows = (await api("/ui/api/approvals")).data;
    $("approval-count").textContent = rows.length ? String(rows.length) : "";
    const box = $("approvals");
    box.replaceChildren();
    if (!rows.length) box.append(el("p", { class: "muted", text: "none" }));
    for (const row of rows) box.append(approvalCard(row.response_id, row));
  } catch (error) { /* shown where it matters: the lists */ }
}

// -- conversations -----------------------------------------------------------------------

async function loadConversations() {
  let page;
  try {
    page = await api(`/ui/api/conversations?limit=${PAGE}&offset=${state.cOffset}`);
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return status(error.message, true);
  }
  const body = $("conversations").querySelector("tbody");
  body.replaceChildren();
  if (!page.data.length) body.append(el("tr", {}, el("td", { colspan: 5, class: "muted", text: "No conversations." })));
  for (const row of page.data) {
    body.append(el("tr", { "data-id": row.id, onclick: () => go("#/conversations/" + encodeURIComponent(row.id)) },
      el("td", { text: when(row.created_at) }), el("td", { text: row.id }), el("td", { class: "op-col", text: keyName(row) }),
      el("td", { class: "n", text: number(row.items) }), el("td", { text: JSON.stringify(row.metadata) })));
  }
  $("c-page-info").textContent = `${number(page.total ? page.offset + 1 : 0)}–${number(page.offset + page.data.length)} of ${number(page.total)} conversations`;
  $("c-prev").disabled = page.offset === 0;
  $("c-next").disabled = page.offset + page.data.length >= page.total;
  status(`${number(page.total)} conversations`);
}

async function showConversation(id) {
  const pane = $("conversation");
  let found;
  try {
    found = await api("/ui/api/conversations/" + encodeURIComponent(id));
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return pane.replaceChildren(el("p", { class: "st-failed", text: error.message }));
  }
  const runs = el("ul", {}, ...found.responses.map((r) => el("li", {}, el("a", { href: "#/responses/" + encodeURIComponent(r.id), text: `${r.id} (${r.status})` }))));
  pane.replaceChildren(
    el("div", { class: "run-head" }, el("h2", { text: found.id }), el("span", { text: when(found.created_at) }), el("span", { text: `${found.items.length} items` })),
    el("div", { class: "run-grid" },
      el("div", { "data-testid": "messages" }, el("h2", { text: "Messages" }), ...(found.items.length ? found.items.map(itemView) : [el("p", { class: "muted", text: "No items yet." })])),
      el("div", {}, el("h2", { text: "Responses" }), runs)),
  );
  status("");
}

// -- keys (operator) ---------------------------------------------------------------------

function meter(used, limit) {
  if (limit === null || limit === undefined) return el("span", { class: "muted", text: "no limit" });
  const share = Math.min(1, used / limit);
  return el("span", { class: "usage" }, el("span", { class: "meter" + (share >= 1 ? " full" : "") }, el("i", { style: `width:${(100 * share).toFixed(1)}%` })), `${number(used)} / ${number(limit)}`);
}

async function loadKeys() {
  let keys;
  try {
    keys = (await api("/ui/api/keys")).data;
  } catch (error) {
    if (error instanceof NeedsKey) return signIn(error.message);
    return status(error.message, true);
  }
  const body = $("keys").querySelector("tbody");
  body.replaceChildren();
  for (const key of keys) {
    const used = key.usage || { requests_this_minute: 0, tokens_this_minute: 0, budget_used: 0 };
    const limits = key.limits;
    body.append(el("tr", { "data-key": key.name },
      el("td", { text: key.name }), el("td", { text: key.operator ? "operator" : "tenant" }), el("td", { text: key.prefix + "…" }),
      el("td", {}, meter(used.requests_this_minute, limits.rpm)),
      el("td", {}, meter(used.tokens_this_minute, limits.tpm)),
      el("td", {}, meter(used.budget_used, limits.budget), limits.budget ? el("span", { class: "muted", text: " a " + limits.budget_period }) : null),
      el("td", { text: when(key.created_at) }),
      el("td", { class: key.revoked_at ? "st-failed" : "st-completed", text: key.revoked_at ? "revoked" : "active" })));
  }
  status(`${keys.length} keys`);
}

// -- wiring ------------------------------------------------------------------------------

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("api-key").value.trim();
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
  $("api-key").value = "";
  start();
});
$("sign-out").addEventListener("click", () => { sessionStorage.removeItem(KEY); state.me = null; signIn(""); });
$("filters").addEventListener("submit", (event) => { event.preventDefault(); state.offset = 0; loadResponses(); });
for (const id of ["f-status", "f-model", "f-key", "f-since", "f-until"]) $(id).addEventListener("change", () => { state.offset = 0; loadResponses(); });
$("f-live").addEventListener("change", startLive);
$("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); loadResponses(); });
$("next").addEventListener("click", () => { state.offset += PAGE; loadResponses(); });
$("c-prev").addEventListener("click", () => { state.cOffset = Math.max(0, state.cOffset - PAGE); loadConversations(); });
$("c-next").addEventListener("click", () => { state.cOffset += PAGE; loadConversations(); });
$("o-range").addEventListener("change", loadOverview);
$("o-key").addEventListener("change", loadOverview);
window.addEventListener("hashchange", route);
window.addEventListener("resize", () => { if (!$("view-overview").hidden) loadOverview(); });
start();
