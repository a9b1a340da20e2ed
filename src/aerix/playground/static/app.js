// The aerix playground page: sends a prompt, reads the run's Server-Sent Events
// (one JSON event per frame, as Python's `to_dict()` writes it) and draws them,
// with the engine's progress ("prefill 384/1055 tokens · 3.2 s") while it works.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

const log = $("log");

function scrollDown() {
  log.scrollTop = log.scrollHeight;
}

// One run: the prompt (or, for a run that resumes a paused one, its decisions),
// then a block per generation (its streamed text, usage, and the turn, calls and
// results, or the retry), then the final or the ending; a paused run's ending
// holds Approve and Deny buttons for the calls that wait.
class RunView {
  constructor(prompt, decisions) {
    this.root = el("section", "run");
    if (prompt === null) this.root.append(el("div", "msg resumed", `resumed: ${describeDecisions(decisions || {})}`));
    else this.root.append(el("div", "msg user", prompt));
    this.open = null; // the generation being streamed
    this.last = null; // the latest generation
    this.count = 0;
    this.calls = new Map();
    this.totals = { prompt: 0, cached: 0, completion: 0 };
    this.ended = false;
    this.bar = null; // the engine's progress line, while it has something to say
    $("empty").hidden = true;
    log.append(this.root);
  }

  // A `progress` frame: what the engine is doing; an empty text means idle.
  progress(p) {
    if (this.ended) return;
    if (!p.text) {
      if (this.bar) this.bar.hidden = true;
      return;
    }
    if (!this.bar) this.bar = el("div", "progress");
    this.bar.textContent = p.text;
    this.bar.dataset.phase = p.phase;
    this.bar.hidden = false;
    this.root.append(this.bar); // kept last, below what the run has shown so far
    scrollDown();
  }

  generation() {
    if (this.open) return this.open;
    this.count += 1;
    const root = el("div", "gen");
    root.dataset.n = String(this.count);
    const head = el("div", "gen-head");
    head.append(el("span", "gen-title", `generation ${this.count}`));
    const usage = el("span", "usage", "streaming…");
    head.append(usage);
    const raw = el("details", "raw");
    raw.open = true;
    raw.append(el("summary", "", "model output"));
    const pre = el("pre", "stream");
    raw.append(pre);
    root.append(head, raw);
    this.root.append(root);
    this.open = { root, usage, raw, pre };
    this.last = this.open;
    return this.open;
  }

  handle(ev) {
    switch (ev.type) {
      case "text": {
        this.generation().pre.textContent += ev.text;
        break;
      }
      case "usage": {
        const g = this.generation();
        g.usage.textContent =
          `${ev.prompt_tokens} prompt · ${ev.cached_tokens} cached · ${ev.completion_tokens} completion tokens`;
        g.usage.classList.add("done");
        g.raw.open = false;
        this.totals.prompt += ev.prompt_tokens;
        this.totals.cached += ev.cached_tokens;
        this.totals.completion += ev.completion_tokens;
        this.open = null;
        break;
      }
      case "turn": {
        const g = this.last || this.generation();
        const turn = el("div", "turn");
        if (ev.thought) turn.append(el("div", "thought", ev.thought));
        for (const call of ev.calls) turn.append(this.callRow(call).root);
        g.root.append(turn);
        break;
      }
      case "call": {
        const row = this.calls.get(ev.id) || this.callRow(ev, true);
        row.input.textContent = JSON.stringify(ev.input);
        row.root.dataset.state = "running";
        break;
      }
      case "result": {
        const row = this.calls.get(ev.id) || this.callRow(ev, true);
        const refused = ev.error && ev.text.startsWith("refused:");
        row.result.textContent = ev.text;
        row.result.className = "result " + (refused ? "refused" : ev.error ? "error" : "ok");
        row.badge.textContent = refused ? "refused" : ev.error ? "error" : "ok";
        row.badge.className = "badge " + row.result.className.split(" ")[1];
        row.root.dataset.state = "done";
        break;
      }
      case "retry": {
        const g = this.last || this.generation();
        g.root.classList.add("bad");
        g.root.append(el("div", "retry", `retry: generation ${ev.turn} was refused (${ev.reason}); asking again`));
        break;
      }
      case "trim": {
        const what = ev.dropped ? `${ev.dropped} earlier messages are no longer sent` : "long results are sent shortened";
        this.root.append(el("div", "retry", `the conversation outgrew the model's context: ${what}`));
        break;
      }
      case "final": {
        const box = el("div", "msg final");
        if (ev.thought) box.append(el("div", "thought", ev.thought));
        box.append(el("div", "answer", ev.text));
        this.root.append(box);
        this.finish("final");
        break;
      }
      case "end": {
        const box = el("div", "ending");
        box.dataset.reason = ev.reason;
        box.append(el("strong", "", `ended: ${ev.reason}`));
        if (ev.message) box.append(el("span", "", ` · ${ev.message}`));
        this.root.append(box);
        this.finish(ev.reason, (ev.pending || []).map((call) => call.id));
        if (ev.reason === "paused" && ev.pending) this.root.append(approvalBox(ev.pending));
        break;
      }
      default:
        break;
    }
    scrollDown();
  }

  callRow(call, standalone) {
    const root = el("div", "call");
    root.dataset.id = call.id;
    root.dataset.state = "pending";
    const head = el("div", "call-head");
    head.append(el("span", "tool", call.tool));
    const input = el("code", "input", JSON.stringify(call.input || {}));
    head.append(input);
    const badge = el("span", "badge", "…");
    head.append(badge);
    const result = el("div", "result pending", "");
    root.append(head, result);
    const row = { root, input, result, badge };
    this.calls.set(call.id, row);
    if (standalone) (this.last || this.generation()).root.append(root);
    return row;
  }

  finish(how, waiting) {
    this.ended = true;
    this.open = null;
    for (const [id, row] of this.calls) {  // a call the run's end cut short has no result
      if (row.root.dataset.state === "done") continue;
      if (waiting && waiting.includes(id)) {  // a paused run's call: its result comes when it resumes
        row.root.dataset.state = "waiting";
        row.badge.textContent = "waiting";
        row.badge.className = "badge waiting";
        row.result.className = "result waiting";
        row.result.textContent = "waits for a decision";
        continue;
      }
      row.root.dataset.state = "stopped";
      row.badge.textContent = "stopped";
      row.badge.className = "badge stopped";
      row.result.className = "result stopped";
      row.result.textContent = "no result: the run ended first";
    }
    if (this.bar) this.bar.remove();
    const t = this.totals;
    const line = `${this.count} generation${this.count === 1 ? "" : "s"} · ${t.prompt} prompt tokens ` +
      `(${t.cached} cached) · ${t.completion} completion tokens`;
    const foot = el("div", "totals", line);
    foot.dataset.how = how;
    this.root.append(foot);
  }
}

// --- approvals --------------------------------------------------------------

function describeDecisions(decisions) {
  const said = (d) => (d === false || (typeof d === "object" && d !== null && "deny" in d) ? "denied" : "approved");
  const words = Object.entries(decisions).map(([id, d]) => `${id} ${said(d)}`);
  return words.join(", ") || "no decisions";
}

// The calls a paused run waits on, each with Approve and Deny; once each has its
// decision, they go to `/api/resume` and the run goes on.
function approvalBox(pending) {
  const box = el("div", "approvals");
  box.append(el("div", "approvals-head", "Waiting for your decision before these calls run:"));
  const decisions = {};
  for (const call of pending) {
    const row = el("div", "approval");
    row.dataset.id = call.id;
    row.append(el("code", "tool", call.tool), el("code", "input", JSON.stringify(call.input)));
    for (const [label, value, cls] of [["Approve", true, "approve"], ["Deny", false, "deny"]]) {
      const button = el("button", cls, label);
      button.type = "button";
      button.addEventListener("click", () => {
        if (running || box.dataset.state === "closed") return;
        decisions[call.id] = value;
        row.dataset.choice = cls;
        for (const b of row.querySelectorAll("button")) b.disabled = true;
        if (Object.keys(decisions).length === pending.length) {
          closeApprovals(box);
          resume(decisions);
        }
      });
      row.append(button);
    }
    box.append(row);
  }
  return box;
}

function closeApprovals(box) {
  box.dataset.state = "closed";
  for (const b of box.querySelectorAll("button")) b.disabled = true;
}

// --- settings ---------------------------------------------------------------

let config = null;

function fillSettings(s) {
  for (const box of document.querySelectorAll("#tools input.pick")) box.checked = s.tools.includes(box.value);
  for (const box of document.querySelectorAll("#tools input.ask")) box.checked = (s.approve || []).includes(box.dataset.tool);
  for (const key of ["turns", "retries", "max_tokens", "result_chars"]) $(key).value = s.limits[key];
  $("temperature").value = s.temperature === null ? "" : s.temperature;
  $("instructions").value = s.instructions;
}

function readSettings() {
  const limits = {};
  for (const key of ["turns", "retries", "max_tokens", "result_chars"]) {
    const v = $(key).value.trim();
    if (v !== "") limits[key] = Number(v);
  }
  const t = $("temperature").value.trim();
  return {
    instructions: $("instructions").value,
    tools: [...document.querySelectorAll("#tools input.pick:checked")].map((b) => b.value),
    limits,
    temperature: t === "" ? null : Number(t),
    approve: [...document.querySelectorAll("#tools input.ask:checked")].map((b) => b.dataset.tool),
  };
}

function showTools(tools) {
  const box = $("tools");
  box.textContent = "";
  if (!tools.length) box.append(el("p", "hint", "No tools: the model can only answer."));
  for (const t of tools) {
    const label = el("label", "tool-pick");
    const input = el("input", "pick");
    input.type = "checkbox";
    input.value = t.name;
    input.checked = true;
    const fields = Object.entries(t.fields).map(([n, f]) => `${n}: ${f.type}${f.required ? "" : "?"}`);
    label.title = `${t.description}\n${fields.join(", ")}`;
    // Ask first: each call of the tool waits for Approve or Deny (always, for a tool made so).
    const ask = el("input", "ask");
    ask.type = "checkbox";
    ask.dataset.tool = t.name; // no value: `#tools input[value=NAME]` is the tool's own box
    ask.checked = t.needs_approval;
    ask.disabled = t.needs_approval;
    ask.title = "ask first: each call waits for Approve or Deny";
    const asking = el("label", "ask-first");
    asking.append(ask, el("span", "", "ask first"));
    label.append(input, el("code", "", t.name), el("span", "desc", t.description));
    box.append(label, asking);
  }
}

// --- running ----------------------------------------------------------------

let running = false;

function setRunning(on, state) {
  running = on;
  $("send").disabled = on;
  $("stop").disabled = !on;
  $("reset").disabled = on;
  $("status").dataset.state = state || (on ? "running" : "idle");
  $("status").textContent = state || (on ? "running" : "idle");
}

function notice(message, kind) {
  const box = $("notice");
  box.hidden = !message;
  box.textContent = message || "";
  box.dataset.kind = kind || "error";
}

async function errorOf(response) {
  try {
    const body = await response.json();
    return body.error || `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

// Reads `text/event-stream` frames from a fetch body and hands each to `onEvent(name, data)`.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) continue;
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

// Starts a run (`/api/run`, or `/api/resume` with `decisions`) and shows its events as they stream.
async function stream(path, body, prompt, decisions) {
  notice("");
  setRunning(true);
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch (err) {
    setRunning(false);
    notice(`The playground server cannot be reached: ${err}`);
    return false;
  }
  if (!response.ok) {
    setRunning(false);
    notice(await errorOf(response), response.status === 409 ? "busy" : "error");
    return false;
  }
  let view = null;
  try {
    await readEvents(response, (name, data) => {
      if (name === "session") {
        if (data.conversation === "new") log.append(el("div", "divider", "new conversation: the settings changed"));
        view = new RunView(prompt, decisions);
        return;
      }
      if (!view) view = new RunView(prompt, decisions);
      if (name === "progress") view.progress(data);
      else view.handle(data);
    });
  } catch (err) {
    notice(`The stream broke: ${err}`);
  }
  if (view && !view.ended) view.handle({ type: "end", reason: "error", message: "the stream closed before the run's end" });
  setRunning(false);
  return true;
}

async function send(prompt) {
  if (await stream("/api/run", { prompt, settings: readSettings() }, prompt)) $("prompt").value = "";
}

async function resume(decisions) {
  await stream("/api/resume", { decisions }, null, decisions);
}

async function post(path) {
  let response;
  try {
    response = await fetch(path, { method: "POST" });
  } catch (err) {
    notice(`The playground server cannot be reached: ${err}`);
    return false;
  }
  if (!response.ok) notice(await errorOf(response), response.status === 409 ? "busy" : "error");
  return response.ok;
}

async function start() {
  config = await (await fetch("/api/config")).json();
  $("model").textContent = config.model;
  showTools(config.tools);
  const session = await (await fetch("/api/session")).json();
  fillSettings(session.settings);
  for (const run of session.runs) {
    const view = new RunView(run.prompt, run.decisions);
    for (const ev of run.events) view.handle(ev);
  }
  // Only the last paused run's calls can still be decided, and only while they wait.
  const boxes = [...document.querySelectorAll(".approvals")];
  boxes.forEach((box, i) => {
    if (i < boxes.length - 1 || !session.pending.length) closeApprovals(box);
  });
  if (session.busy) notice("A run of this session is still in progress (in another tab).", "busy");

  $("ask").addEventListener("submit", (e) => {
    e.preventDefault();
    const prompt = $("prompt").value;
    if (!running && prompt.trim()) send(prompt);
  });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("stop").addEventListener("click", async () => {
    setRunning(true, "stopping");
    await post("/api/stop");
  });
  $("reset").addEventListener("click", async () => {
    if (await post("/api/reset")) {  // the calls that waited are forgotten with the rest
      for (const node of [...log.children]) if (node.id !== "empty") node.remove();
      $("empty").hidden = false;
      notice("");
    }
  });
  document.body.dataset.ready = "true";
}

start().catch((err) => notice(`The page could not start: ${err}`));
