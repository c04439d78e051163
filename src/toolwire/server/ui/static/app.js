// toolwire /ui: plain JS, no build step. Everything shown comes from the gateway's JSON and is
// put on the page with textContent only (model output and tool results are untrusted).
"use strict";

const KEY = "toolwire.apiKey";
const $ = (id) => document.getElementById(id);
let selected = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (name === "text") node.textContent = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function status(text, bad) {
  const node = $("status");
  node.textContent = text || "";
  node.className = bad ? "st-failed" : "muted";
}

async function api(path, options) {
  const headers = { ...(options && options.headers) };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.authorization = "Bearer " + key;
  const response = await fetch(path, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = (body.error && body.error.message) || response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return body;
}

const seconds = (value) => (value === undefined || value === null ? "" : `${Number(value).toFixed(3)} s`);
const when = (epoch) => new Date(epoch * 1000).toLocaleString();
const epochOf = (input) => (input.value ? Math.floor(new Date(input.value).getTime() / 1000) : "");

async function loadLists() {
  const query = new URLSearchParams();
  if ($("f-status").value) query.set("status", $("f-status").value);
  if ($("f-model").value.trim()) query.set("model", $("f-model").value.trim());
  if (epochOf($("f-since"))) query.set("since", epochOf($("f-since")));
  if (epochOf($("f-until"))) query.set("until", epochOf($("f-until")));
  try {
    const [responses, conversations, approvals] = await Promise.all([
      api("/ui/api/responses?" + query),
      api("/ui/api/conversations"),
      api("/ui/api/approvals"),
    ]);
    renderResponses(responses.data);
    renderConversations(conversations.data);
    renderApprovals(approvals.data);
    status(`${responses.data.length} responses`);
  } catch (error) {
    status(error.message, true);
  }
}

function renderResponses(rows) {
  const body = $("responses").querySelector("tbody");
  body.replaceChildren();
  for (const row of rows) {
    const usage = row.usage || {};
    const tr = el(
      "tr",
      { "data-id": row.id, onclick: () => showResponse(row.id) },
      el("td", { text: when(row.created_at) }),
      el("td", { text: row.id }),
      el("td", { text: row.model || "" }),
      el("td", { class: "st-" + row.status, text: row.status + (row.pending_approvals.length ? " · awaiting approval" : "") }),
      el("td", { text: usage.total_tokens !== undefined ? `${usage.input_tokens}/${usage.output_tokens}` : "" }),
    );
    if (row.id === selected) tr.classList.add("selected");
    body.append(tr);
  }
}

function renderConversations(rows) {
  const list = $("conversations");
  list.replaceChildren();
  if (!rows.length) list.append(el("li", { class: "muted", text: "none" }));
  for (const row of rows) {
    const item = el("li", {}, el("a", { href: "#", text: row.id, onclick: async (event) => {
      event.preventDefault();
      try {
        const conversation = await api("/ui/api/conversations/" + encodeURIComponent(row.id));
        const runs = el("ul");
        for (const response of conversation.responses) {
          runs.append(el("li", {}, el("a", { href: "#", text: `${response.id} (${response.status})`, onclick: (e) => { e.preventDefault(); showResponse(response.id); } })));
        }
        item.replaceChildren(el("span", { text: row.id }), runs);
      } catch (error) { status(error.message, true); }
    } }), el("span", { class: "muted", text: " " + when(row.created_at) }));
    list.append(item);
  }
}

function renderApprovals(rows) {
  const box = $("approvals");
  box.replaceChildren();
  if (!rows.length) box.append(el("p", { class: "muted", text: "none" }));
  for (const row of rows) {
    box.append(approvalCard(row.response_id, row));
  }
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
    await loadLists();
    await showResponse(next.id);
  } catch (error) {
    status(error.message, true);
  }
}

function entryBody(entry, pending, responseId) {
  const parts = [];
  switch (entry.type) {
    case "run_started":
      parts.push(`model ${entry.model}, started ${when(entry.at)}`);
      break;
    case "model_call": {
      parts.push(`call ${entry.iteration}: ${seconds(entry.duration)}, first token ${seconds(entry.ttft)}, tokens ${entry.input_tokens ?? "?"} in / ${entry.output_tokens ?? "?"} out, finish ${entry.finish_reason ?? "-"}`);
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
      parts.push(`${entry.name} rejected: ${entry.error}`, el("pre", { text: entry.arguments }));
      break;
    case "repair":
      parts.push(`stream repaired: ${entry.kind}`);
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

async function showResponse(id) {
  selected = id;
  for (const row of document.querySelectorAll("#responses tbody tr")) row.classList.toggle("selected", row.dataset.id === id);
  const pane = $("detail");
  try {
    const { response, timeline, pending_approvals: pending } = await api("/ui/api/responses/" + encodeURIComponent(id));
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
    const head = el(
      "div",
      {},
      el("h2", { text: response.id }),
      el("div", { text: `${response.model} · ${when(response.created_at)} · ` }, el("span", { class: "st-" + response.status, text: response.status })),
      response.previous_response_id ? el("div", {}, "continues ", el("a", { href: "#", text: response.previous_response_id, onclick: (e) => { e.preventDefault(); showResponse(response.previous_response_id); } })) : null,
    );
    pane.replaceChildren(head, timeline.length ? list : el("p", { class: "muted", text: "No timeline recorded for this response." }));
  } catch (error) {
    pane.replaceChildren(el("p", { class: "st-failed", text: error.message }));
  }
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("api-key").value.trim();
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
  $("api-key").value = "";
  $("api-key").placeholder = value ? "key set for this tab" : "sk-… (kept in this tab only)";
  loadLists();
});
$("filters").addEventListener("submit", (event) => { event.preventDefault(); loadLists(); });
if (sessionStorage.getItem(KEY)) $("api-key").placeholder = "key set for this tab";
loadLists();
