// The Nexus console: a single page over the /v1 API, routed by the URL's hash.
// Every action is a /v1 call with the token kept in localStorage (none in `nexus dev`);
// text from the API is only ever set as textContent, never parsed as HTML.
"use strict";

const TOKEN_KEY = "nexus.token";
const view = document.getElementById("view");
const notice = document.getElementById("notice");
let leaving = []; // what the current page must stop when another one opens (its stream)

// -- small helpers ----------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(...nodes) {
  view.replaceChildren(...nodes);
}

function say(message, ok) {
  notice.textContent = message;
  notice.className = ok ? "ok" : "";
  notice.hidden = !message;
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "";
}

function short(text, length) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  return flat.length > length ? flat.slice(0, length - 1) + "…" : flat;
}

function tag(text, kind) {
  return el("span", { class: "tag " + (kind || text) }, text);
}

// A label may hold "/": each part is encoded, the slashes kept (the routes take a path).
function labelPath(label) {
  return label.split("/").map(encodeURIComponent).join("/");
}

function sessionLink(label) {
  return el("a", { href: "#/session/" + encodeURIComponent(label) }, label);
}

function turnLink(id) {
  return el("a", { href: "#/turn/" + encodeURIComponent(id) }, id);
}

// -- the API ----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function headers(extra) {
  const token = localStorage.getItem(TOKEN_KEY);
  return Object.assign(token ? { Authorization: "Bearer " + token } : {}, extra || {});
}

async function api(method, path, body) {
  const options = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) options.body = JSON.stringify(body);
  const response = await fetch(path, options);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) {
    const error = data && data.error ? data.error : { type: "http_" + response.status, message: text };
    if (response.status === 401) document.getElementById("token").focus();
    throw new ApiError(response.status, `${response.status} ${error.type}: ${error.message}`);
  }
  return data;
}

async function everything(path, pages) {
  let items = [], cursor = null;
  for (let page = 0; page < (pages || 5); page++) {
    const join = path.includes("?") ? "&" : "?";
    const found = await api("GET", path + join + "limit=200" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    items = items.concat(found.items);
    cursor = found.next_cursor;
    if (!cursor) break;
  }
  return items;
}

// An action button: runs `action`, says what failed, and never runs twice at once.
function button(label, action, attrs) {
  const node = el("button", Object.assign({ type: "button" }, attrs || {}), label);
  node.addEventListener("click", async () => {
    node.disabled = true;
    try { await action(); } catch (error) { say(error.message); } finally { node.disabled = false; }
  });
  return node;
}

// Server-sent events over fetch, so the bearer token goes in a header (EventSource sends
// none). Calls `onEvent(type, data)` per event and reconnects after the last id it saw.
function openStream(label, onEvent) {
  const controller = new AbortController();
  let lastId = null, stopped = false;
  async function run() {
    while (!stopped) {
      try {
        const query = lastId ? "?last_event_id=" + encodeURIComponent(lastId) : "";
        const response = await fetch(`/v1/sessions/${labelPath(label)}/stream${query}`, {
          headers: headers({ Accept: "text/event-stream" }), signal: controller.signal,
        });
        if (!response.ok) throw new Error("stream: " + response.status);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let type = "message", data = "", id = null;
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) type = line.slice(6).trim();
              else if (line.startsWith("data:")) data += line.slice(5).trim();
              else if (line.startsWith("id:")) id = line.slice(3).trim();
            }
            if (id) lastId = id;
            if (data) onEvent(type, JSON.parse(data));
          }
        }
      } catch (error) {
        if (stopped) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
  run();
  return () => { stopped = true; controller.abort(); };
}

// -- sessions ---------------------------------------------------------------------------------

async function sessionsPage() {
  const search = el("input", { id: "session-search", type: "search", placeholder: "Search label, persona, alias" });
  const body = el("tbody");
  const table = el("table", { id: "sessions" },
    el("thead", {}, el("tr", {}, ["Label", "Persona", "Status", "Running", "Pending", "Updated"].map((h) => el("th", {}, h)))),
    body);
  const label = el("input", { id: "new-session", placeholder: "label" });
  const open = el("form", { class: "row", onsubmit: (event) => {
    event.preventDefault();
    if (label.value.trim()) location.hash = "#/session/" + encodeURIComponent(label.value.trim());
  } }, search, el("span", { class: "muted" }, "or open (or start) a session:"), label, el("button", { type: "submit", id: "open-session" }, "Open"));
  show(el("h1", {}, "Sessions"), open, el("p"), table);
  const sessions = await everything("/v1/sessions");
  const details = new Map();
  function render() {
    const words = search.value.toLowerCase().trim();
    const shown = sessions.filter((s) =>
      !words || [s.label, s.persona || "", ...(s.aliases || [])].join(" ").toLowerCase().includes(words));
    body.replaceChildren(...shown.map((s) => {
      const running = el("td", { class: "running" }), pending = el("td", { class: "pending" });
      const fill = (d) => {
        running.textContent = d.running ? (d.running.step || "running") + " " + (d.running.turn_id || "") : "";
        pending.textContent = String(d.pending.count);
      };
      if (details.has(s.label)) fill(details.get(s.label));
      else api("GET", "/v1/sessions/" + labelPath(s.label)).then((d) => { details.set(s.label, d); fill(d); }, () => {});
      return el("tr", { "data-label": s.label }, el("td", {}, sessionLink(s.label)), el("td", {}, s.persona || ""),
        el("td", {}, s.status), running, pending, el("td", { class: "muted" }, when(s.updated_at)));
    }));
    if (!shown.length) body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No sessions.")));
  }
  search.addEventListener("input", render);
  render();
}

const SETTINGS = [
  ["queue_mode", "Queue mode", "queue_mode", "mode"],
  ["cap", "Cap", "queue_cap", "cap"],
  ["drop", "Drop policy", "drop_policy", "drop"],
  ["debounce_ms", "Debounce (ms)", "debounce_ms", "debounce_ms"],
];

function settingsForm(label, detail, reload) {
  const inputs = {};
  const row = el("div", { class: "row" }, SETTINGS.map(([name, title, column, effective]) => {
    const own = detail[column];
    const found = detail.queue[effective];
    inputs[name] = el("input", { name, value: own === null || own === undefined ? "" : String(own), size: 20,
      placeholder: `${found.value === null ? "(by source)" : found.value} from ${found.source}` });
    return el("label", {}, title, inputs[name]);
  }));
  const model = el("textarea", { name: "model_config", rows: 3 },
    detail.model_overrides ? JSON.stringify(detail.model_overrides) : "");
  const effective = el("pre", { class: "muted" }, detail.model_settings
    ? "runs with " + JSON.stringify(detail.model_settings) : "model settings refused: " + detail.model_settings_error);
  const save = button("Save settings", async () => {
    const patch = {};
    for (const [name, , column] of SETTINGS) {
      const raw = inputs[name].value.trim();
      const before = detail[column] === null || detail[column] === undefined ? "" : String(detail[column]);
      if (raw === before) continue;
      // Sent as typed (a number when it reads as one): the API says what is wrong with it.
      patch[name] = raw === "" ? null : (/^-?\d+$/.test(raw) ? Number(raw) : raw);
    }
    const before = detail.model_overrides ? JSON.stringify(detail.model_overrides) : "";
    if (model.value.trim() !== before) {
      try { patch.model_config = model.value.trim() ? JSON.parse(model.value) : null; }
      catch (error) { throw new Error("model config is not JSON: " + error.message); }
    }
    await api("PATCH", "/v1/sessions/" + labelPath(label), patch);
    delete form.parentNode.dataset.editing;
    say("Settings saved.", true);
    await reload();
  }, { id: "save-settings" });
  const form = el("form", { id: "settings", onsubmit: (e) => e.preventDefault() },
    row, el("label", {}, "Model config (JSON; empty clears)", model), effective, save);
  return form;
}

function treeList(label, tree) {
  const list = el("div", { id: "tree" });
  for (const turn of tree.turns) {
    const marks = [tag(turn.status), turn.type === "compaction" ? tag("compaction") : null,
      turn.session !== "this" ? tag("from " + turn.session, "fork") : null,
      turn.id === tree.head ? tag("head") : null];
    const branches = turn.branches.map((b) => el("div", {}, tag(b.kind, b.kind), " ", sessionLink(b.session),
      b.task ? " " + short(b.task, 80) : ""));
    const fork = button("Fork", async () => {
      const made = await api("POST", `/v1/turns/${encodeURIComponent(turn.id)}/fork`, {});
      say(`Forked into ${made.label}.`, true);
      location.hash = "#/session/" + encodeURIComponent(made.label);
    }, { class: "fork" });
    list.append(el("div", { class: "turn", "data-turn": turn.id },
      el("div", {}, turnLink(turn.id), " ", marks, " ", fork),
      turn.summary ? el("div", { class: "muted" }, "summary: " + short(turn.summary, 200)) : null,
      turn.query ? el("div", {}, el("span", { class: "msg-role" }, "user "), short(turn.query, 200)) : null,
      turn.thinking ? el("div", { class: "muted" }, "thinking: " + short(turn.thinking, 200)) : null,
      turn.answer ? el("div", {}, el("span", { class: "msg-role" }, "answer "), short(turn.answer, 300)) : null,
      branches));
  }
  if (tree.running) list.append(el("div", { class: "turn" }, tag("running"), " ", tree.running.step || ""));
  if (!tree.turns.length) list.append(el("p", { class: "muted" }, "No turns yet."));
  return list;
}

function queueTable(label, queue, reload) {
  const rows = queue.items.slice(-30).reverse().map((item) => el("tr", { "data-item": item.id },
    el("td", {}, item.id), el("td", {}, item.mode), el("td", {}, tag(item.status, item.status === "queued" ? "open" : "")),
    el("td", {}, item.disposition || ""), el("td", {}, item.position === null ? "" : String(item.position)),
    el("td", {}, item.consumed_by_turn_id ? turnLink(item.consumed_by_turn_id) : ""),
    el("td", {}, item.status === "queued" ? button("Cancel", async () => {
      await api("DELETE", `/v1/sessions/${labelPath(label)}/queue/${encodeURIComponent(item.id)}`);
      say("Cancelled " + item.id, true);
      await reload();
    }) : "")));
  return el("table", { id: "queue" },
    el("thead", {}, el("tr", {}, ["Item", "Mode", "Status", "Disposition", "Place", "Turn", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 7, class: "muted" }, "Nothing queued."))));
}

async function sessionPage(label) {
  const path = "/v1/sessions/" + labelPath(label);
  const head = el("div"), tree = el("div"), queue = el("div");
  const settings = el("div", { oninput: () => { settings.dataset.editing = "1"; } });
  const live = el("pre", { id: "live", class: "stream" });
  const status = el("div", { id: "live-status", class: "muted" });
  const box = el("textarea", { id: "message", rows: 3, placeholder: "Send a message to this session" });
  async function reload() {
    let detail;
    try { detail = await api("GET", path); } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      head.replaceChildren(el("p", { id: "running" }, "No session with this label yet: a message sent here starts it."));
      return;
    }
    const [found, items] = await Promise.all([api("GET", path + "/tree"), api("GET", path + "/queue")]);
    head.replaceChildren(
      el("p", {}, "persona ", el("b", {}, detail.persona || "?"), " · status ", tag(detail.status),
        " · origin ", detail.origin, detail.parent_session_label ? [" · from ", sessionLink(detail.parent_session_label)] : "",
        detail.aliases.length ? " · aliases " + detail.aliases.join(", ") : ""),
      el("p", { id: "running" }, detail.running ? "running: " + (detail.running.step || "") + " " + (detail.running.turn_id || "") : "idle",
        ` · ${detail.pending.count} pending`));
    // A stream event reloads the page's parts; settings being edited are left as typed.
    if (!settings.dataset.editing) settings.replaceChildren(settingsForm(label, detail, reload));
    tree.replaceChildren(treeList(label, found));
    queue.replaceChildren(queueTable(label, items, reload));
  }
  const send = button("Send", async () => {
    const content = box.value;
    await api("POST", path + "/messages", { content });
    box.value = "";
    live.textContent = "";
    status.textContent = "queued…";
    await reload();
  }, { id: "send" });
  show(el("h1", {}, "Session ", el("code", {}, label)), head,
    el("div", { class: "row" },
      button("Compact", async () => { await api("POST", path + "/compact", {}); say("Compaction queued.", true); await reload(); }, { id: "compact" }),
      button("Abort", async () => { await api("POST", path + "/abort"); say("Abort requested.", true); }, { id: "abort" }),
      el("a", { href: "#/usage/" + encodeURIComponent(label) }, "usage")),
    el("h2", {}, "Send"), box, send, status, live,
    el("h2", {}, "Settings"), settings,
    el("h2", {}, "Turns"), tree,
    el("h2", {}, "Queue"), queue);
  await reload();
  leaving.push(openStream(label, (type, data) => {
    if (type === "message.delta") live.textContent += data.text || "";
    else if (type === "step.thinking") status.textContent = "thinking…";
    else if (type === "tool.started") status.textContent = "tool " + (data.name || data.tool_name || "");
    else if (type === "session.started" || type === "step.started") status.textContent = "running…";
    else if (type === "context.compacting") status.textContent = "compacting (" + (data.trigger || "") + ")…";
    else if (type === "turn.completing") status.textContent = "completing…";
    else if (type === "session.failed") status.textContent = "failed: " + (data.error || data.message || JSON.stringify(data));
    else if (type === "turn.committed") {
      status.textContent = "committed " + data.turn_id + " (" + data.status + ")";
      reload().catch((error) => say(error.message));
    } else if (type.startsWith("queue.")) reload().catch(() => {});
  }));
}

// -- one turn ---------------------------------------------------------------------------------

function messageBody(message) {
  const content = message.content || {};
  const parts = [];
  for (const block of content.thinking || []) {
    parts.push(el("div", { class: "muted" }, "thinking"), el("pre", { class: "thinking" }, block.thinking || "[redacted]"));
  }
  if (message.role === "tool_call") parts.push(el("pre", {}, `${content.name}(${JSON.stringify(content.arguments)})`));
  else if (message.role === "tool_result") parts.push(el("pre", {}, JSON.stringify(content.error ? { error: content.error } : content.result)));
  else if (typeof content.text === "string") parts.push(el("pre", {}, content.text));
  else parts.push(el("pre", {}, JSON.stringify(content)));
  return parts;
}

async function turnPage(id) {
  const found = await api("GET", "/v1/turns/" + encodeURIComponent(id));
  const turn = found.turn;
  const cost = turn.cost_micros === null ? "unpriced" : "$" + (turn.cost_micros / 1e6).toFixed(6);
  const facts = [["status", turn.status], ["type", turn.turn_type], ["model", turn.model], ["stop reason", turn.stop_reason],
    ["started", when(turn.started_at)], ["completed", when(turn.completed_at)],
    ["tokens in / out", `${turn.prompt_tokens ?? "?"} / ${turn.completion_tokens ?? "?"}`],
    ["cache read / write", `${turn.cache_read_tokens ?? 0} / ${turn.cache_write_tokens ?? 0}`],
    ["total tokens", turn.total_tokens], ["cost", cost], ["error", turn.error_kind ? `${turn.error_kind}: ${turn.error_message}` : null]];
  show(el("h1", {}, "Turn ", el("code", {}, turn.id)),
    el("p", {}, turn.parent_turn_id ? ["parent ", turnLink(turn.parent_turn_id), " · "] : "",
      button("Fork from here", async () => {
        const made = await api("POST", `/v1/turns/${encodeURIComponent(turn.id)}/fork`, {});
        location.hash = "#/session/" + encodeURIComponent(made.label);
      })),
    el("table", { id: "turn-facts" }, el("tbody", {}, facts.filter(([, v]) => v !== null && v !== undefined)
      .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, String(v)))))),
    el("h2", {}, "Model settings"), el("pre", { id: "model-settings" }, JSON.stringify(turn.model_settings, null, 2)),
    el("h2", {}, "Messages"),
    el("div", { id: "messages" }, found.messages.map((m) => el("div", { class: "turn" },
      el("div", { class: "msg-role" }, `${m.sequence}. ${m.role}${m.source ? " (" + m.source + ")" : ""}`), messageBody(m)))),
    el("h2", {}, "Tool calls"),
    found.tool_calls.length ? el("table", { id: "tool-calls" },
      el("thead", {}, el("tr", {}, ["Tool", "Parameters", "Result", "Status"].map((h) => el("th", {}, h)))),
      el("tbody", {}, found.tool_calls.map((c) => el("tr", {}, el("td", {}, c.tool_name),
        el("td", {}, el("pre", {}, JSON.stringify(c.parameters))),
        el("td", {}, el("pre", {}, c.error ? "error: " + c.error : JSON.stringify(c.result))),
        el("td", {}, c.status, c.spawned_session_label ? [" ", sessionLink(c.spawned_session_label)] : "")))))
      : el("p", { class: "muted" }, "None."));
}

// -- operations -------------------------------------------------------------------------------

async function deadLettersPage() {
  const items = await everything("/v1/dead-letters", 1);
  const rows = items.map((d) => el("tr", { "data-dead": d.id }, el("td", {}, d.id), el("td", {}, sessionLink(d.session)),
    el("td", {}, short(d.text, 80)), el("td", {}, d.detail || ""), el("td", {}, String(d.attempts)), el("td", {}, when(d.dead_at)),
    el("td", { class: "replayed" }, d.replayed_as || button("Replay", async () => {
      const done = await api("POST", `/v1/dead-letters/${encodeURIComponent(d.id)}/replay`);
      say(`Replayed as ${done.queue_item_id} in ${done.session}.`, true);
      await deadLettersPage();
    }))));
  show(el("h1", {}, "Dead letters"), el("table", { id: "dead-letters" },
    el("thead", {}, el("tr", {}, ["Item", "Session", "Text", "Why", "Attempts", "Dead at", "Replayed as"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No dead letters.")))));
}

async function hooksPage() {
  const found = await api("GET", "/v1/hooks");
  const invocations = el("div", { id: "invocations" });
  async function showInvocations(name) {
    const page = await api("GET", `/v1/hooks/${encodeURIComponent(name)}/invocations?limit=20`);
    invocations.replaceChildren(el("h2", {}, "Recent invocations of " + name), el("table", {},
      el("thead", {}, el("tr", {}, ["Started", "Event", "Fired", "Latency", "Result or error"].map((h) => el("th", {}, h)))),
      el("tbody", {}, page.items.map((i) => el("tr", {}, el("td", {}, when(i.started_at)), el("td", {}, i.event_id || ""),
        el("td", {}, i.fired ? "yes" : "no"), el("td", {}, i.latency_ms + " ms"),
        el("td", {}, i.error ? "error: " + i.error : JSON.stringify(i.result)))))));
  }
  const rows = found.items.map((h) => el("tr", { "data-hook": h.name }, el("td", {}, h.name), el("td", {}, h.description),
    el("td", {}, h.mode + (h.schedule ? " " + h.schedule : "")), el("td", {}, h.enabled ? "enabled" : "disabled"),
    el("td", {}, tag(h.breaker_state), h.consecutive_errors ? ` ${h.consecutive_errors} errors` : ""), el("td", {}, when(h.last_fired_at)),
    el("td", {}, button(h.enabled ? "Disable" : "Enable", async () => {
      await api("POST", `/v1/hooks/${encodeURIComponent(h.name)}/${h.enabled ? "disable" : "enable"}`);
      await hooksPage();
    }), " ", button("Invocations", () => showInvocations(h.name)))));
  show(el("h1", {}, "Hooks"), el("table", { id: "hooks" },
    el("thead", {}, el("tr", {}, ["Name", "Description", "Mode", "State", "Breaker", "Last fired", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No hooks.")))), invocations);
}

// A bar per day: the cost where priced, else the tokens.
function barChart(days) {
  const priced = days.some((d) => d.cost_micros);
  const value = (d) => priced ? (d.cost_micros || 0) / 1e6 : d.tokens.total;
  const width = 640, height = 160, gap = 4, top = Math.max(...days.map(value)) || 1;
  const bar = Math.min(60, Math.max(4, Math.floor((width - 40) / Math.max(days.length, 1)) - gap));
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", width); svg.setAttribute("height", height + 30); svg.setAttribute("id", "usage-chart");
  const add = (name, attrs, text) => {
    const node = document.createElementNS("http://www.w3.org/2000/svg", name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
  };
  add("text", { x: 0, y: 10 }, priced ? "USD per day" : "tokens per day");
  days.forEach((d, i) => {
    const h = Math.round((value(d) / top) * (height - 32));
    const x = 20 + i * (bar + gap);
    add("rect", { x, y: height - h, width: bar, height: h, fill: "#3b82f6" });
    add("text", { x, y: height + 12 }, d.day.slice(5));
    add("text", { x, y: height - h - 2 }, priced ? value(d).toFixed(4) : String(value(d)));
  });
  return svg;
}

async function usagePage(session) {
  const filter = el("input", { id: "usage-session", placeholder: "session (all)", value: session || "" });
  const since = el("input", { id: "usage-since", placeholder: "since YYYY-MM-DD" });
  const out = el("div");
  async function load() {
    const query = new URLSearchParams();
    if (filter.value.trim()) query.set("session", filter.value.trim());
    if (since.value.trim()) query.set("since", since.value.trim());
    const report = await api("GET", "/v1/usage?" + query);
    const cost = (u) => u.cost_usd === null ? "unpriced" : "$" + u.cost_usd;
    out.replaceChildren(
      el("p", { id: "usage-totals" }, `${report.totals.turns} turns · ${report.totals.tokens.total} tokens · ${cost(report.totals)}`),
      report.days.length ? barChart(report.days) : el("p", { class: "muted" }, "No usage."),
      el("h2", {}, "Per model"),
      el("table", { id: "usage-models" }, el("thead", {}, el("tr", {}, ["Model", "Turns", "Input", "Output", "Cache read", "Cache write", "Cost"].map((h) => el("th", {}, h)))),
        el("tbody", {}, report.models.map((m) => el("tr", {}, el("td", {}, m.model || "?"), el("td", {}, String(m.turns)),
          el("td", {}, String(m.tokens.input)), el("td", {}, String(m.tokens.output)), el("td", {}, String(m.tokens.cache_read)),
          el("td", {}, String(m.tokens.cache_write)), el("td", {}, cost(m)))))));
  }
  show(el("h1", {}, "Usage"), el("div", { class: "row" }, filter, since, button("Show", load)), out);
  await load();
}

async function peoplePage() {
  const entities = await everything("/v1/entities");
  const aliases = await everything("/v1/aliases");
  const detail = el("div", { id: "entity" });
  async function open(id) {
    const e = await api("GET", "/v1/entities/" + encodeURIComponent(id));
    detail.replaceChildren(el("h2", {}, `${e.name} (${e.id})`),
      el("p", {}, `${e.kind}, ${e.principal}`, e.merged.length ? " · merged: " + e.merged.join(", ") : ""),
      el("table", {}, el("thead", {}, el("tr", {}, ["Platform", "Sender", "Name", "Last seen"].map((h) => el("th", {}, h)))),
        el("tbody", {}, e.contacts.map((c) => el("tr", {}, el("td", {}, c.platform), el("td", {}, c.sender_id),
          el("td", {}, c.display_name || ""), el("td", {}, when(c.last_seen_at)))))),
      el("p", {}, "sessions: ", e.sessions.flatMap((s) => [sessionLink(s), " "])));
  }
  const into = el("input", { id: "merge-into", placeholder: "into entity id" });
  const merge = el("input", { id: "merge-ids", placeholder: "entity ids to merge, comma separated", size: 40 });
  const alias = el("input", { id: "alias-name", placeholder: "alias" });
  const target = el("input", { id: "alias-session", placeholder: "session label" });
  show(el("h1", {}, "People"),
    el("table", { id: "entities" }, el("thead", {}, el("tr", {}, ["Id", "Name", "Kind", "Principal", "Tags"].map((h) => el("th", {}, h)))),
      el("tbody", {}, entities.map((e) => el("tr", {}, el("td", {}, button(e.id, () => open(e.id), { class: "link" })),
        el("td", {}, e.name), el("td", {}, e.kind), el("td", {}, e.principal), el("td", {}, e.tags.join(", ")))))),
    detail,
    el("h2", {}, "Merge"), el("div", { class: "row" }, into, merge, button("Merge", async () => {
      const ids = merge.value.split(",").map((s) => s.trim()).filter(Boolean);
      const done = await api("POST", "/v1/entities/merge", { into: into.value.trim(), merge: ids });
      say(`Merged into ${done.root}; aliases ${done.aliases_created.join(", ") || "none"}.`, true);
      await peoplePage();
    })),
    el("h2", {}, "Aliases"),
    el("table", { id: "aliases" }, el("thead", {}, el("tr", {}, ["Alias", "Session", "Resolves to", "Reason", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, aliases.map((a) => el("tr", {}, el("td", {}, a.alias), el("td", {}, sessionLink(a.session)),
        el("td", {}, a.resolves_to || ""), el("td", {}, a.reason || ""),
        el("td", {}, button("Remove", async () => { await api("DELETE", "/v1/aliases/" + labelPath(a.alias)); await peoplePage(); })))))),
    el("div", { class: "row" }, alias, target, button("Add alias", async () => {
      await api("POST", "/v1/aliases", { alias: alias.value.trim(), session: target.value.trim() });
      await peoplePage();
    })));
}

// -- routing ----------------------------------------------------------------------------------

const ROUTES = [
  [/^#\/session\/(.+)$/, (m) => sessionPage(decodeURIComponent(m[1]))],
  [/^#\/turn\/(.+)$/, (m) => turnPage(decodeURIComponent(m[1]))],
  [/^#\/dead-letters$/, () => deadLettersPage()],
  [/^#\/hooks$/, () => hooksPage()],
  [/^#\/usage(?:\/(.+))?$/, (m) => usagePage(m[1] ? decodeURIComponent(m[1]) : "")],
  [/^#\/people$/, () => peoplePage()],
  [/^.*$/, () => sessionsPage()],
];

async function route() {
  for (const stop of leaving) stop();
  leaving = [];
  const hash = location.hash || "#/sessions";
  for (const [pattern, page] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    show(el("p", { class: "muted" }, "Loading…"));
    try {
      await page(match);
      view.setAttribute("data-page", hash);
    } catch (error) {
      show(el("h1", {}, "Could not load"), el("p", { id: "load-error" }, error.message));
    }
    return;
  }
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = document.getElementById("token").value.trim();
  if (value) localStorage.setItem(TOKEN_KEY, value); else localStorage.removeItem(TOKEN_KEY);
  document.getElementById("token").value = "";
  say(value ? "Token saved in this browser." : "Token cleared.", true);
  route();
});
window.addEventListener("hashchange", () => { say(""); route(); });
route();
