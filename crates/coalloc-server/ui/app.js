// The coalloc dashboard: plain JavaScript, no build step, served from the binary.
// It reads the API with the server's bearer token (from the URL's #token=... or the login
// form, kept for this tab only) and stays live from the event stream (GET /v1/events, read
// with fetch because EventSource cannot send a token), refreshing jobs and sites after
// events and sampling the sites' load every two seconds for the load-over-time charts.
"use strict";

const $ = (s) => document.querySelector(s);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => "&#" + c.charCodeAt(0) + ";");
const state = { jobs: [], sites: [], scheduler: null, history: {}, events: {}, selected: null, detail: null, output: [] };
const HISTORY = 180;
let token = null;

function readToken() {
  const m = location.hash.match(/token=([0-9a-fA-F]+)/);
  if (m) {
    sessionStorage.setItem("coalloc-token", m[1]);
    history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem("coalloc-token");
}

function showLogin(message) {
  $("#app").hidden = true;
  $("#login").hidden = false;
  setStatus(message || "token needed", false);
}

function setStatus(text, on) {
  const s = $("#status");
  s.textContent = text;
  s.className = "status " + (on ? "on" : "off");
}

async function api(path) {
  const r = await fetch(path, { headers: { Authorization: "Bearer " + token } });
  if (r.status === 401) {
    sessionStorage.removeItem("coalloc-token");
    showLogin("bad token");
    throw new Error("unauthorized");
  }
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

async function text(path) {
  const r = await fetch(path, { headers: { Authorization: "Bearer " + token } });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.text();
}

// The selected job's output (GET /v1/jobs/ID/output): each component's latest launch, the
// last TAIL bytes of its standard output and error.
const TAIL = 4096;
async function loadOutput(id) {
  const list = await api(`/v1/jobs/${id}/output`).catch(() => ({ launches: [] }));
  const latest = {};
  for (const l of list.launches) {
    if (!latest[l.component] || latest[l.component].launch < l.launch) latest[l.component] = l;
  }
  const part = (l, stream, size) => (size === 0 ? Promise.resolve("") :
    text(`/v1/jobs/${id}/output?component=${l.component}&launch=${l.launch}&stream=${stream}` +
      `&offset=${Math.max(0, size - TAIL)}`).catch(() => ""));
  return Promise.all(Object.values(latest).map(async (l) =>
    ({ ...l, out: await part(l, "stdout", l.stdout), err: await part(l, "stderr", l.stderr) })));
}

async function refresh() {
  const [jobs, sites] = await Promise.all([api("/v1/jobs"), api("/v1/sites")]);
  state.jobs = jobs.jobs;
  state.sites = sites.sites;
  state.scheduler = sites.scheduler;
  if (state.selected != null) {
    state.detail = await api("/v1/jobs/" + state.selected).catch(() => null);
    state.output = await loadOutput(state.selected);
  }
  render();
}

let pending = null;
function refreshSoon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh().catch(() => {}); }, 200);
}

function sample() {
  const now = Date.now();
  for (const s of state.sites) {
    const h = (state.history[s.name] ||= []);
    h.push({ t: now, coalloc: s.coalloc, other: s.other, total: s.total });
    if (h.length > HISTORY) h.shift();
  }
}

// What an event changes at once; the next refresh brings the rest.
function apply(e) {
  if (e.job != null) (state.events[e.job] ||= []).push(e);
  const job = state.jobs.find((j) => j.id === e.job);
  if (job && e.component != null) {
    const c = job.components[e.component];
    const to = { component_submitted: "submitted", component_started: "started",
      component_checked_in: "ready", component_finished: "finished", component_failed: "failed" }[e.event];
    if (c && to) { c.state = to; if (e.site) c.site = e.site; }
  }
  if (job && e.event === "committed") job.state = "running";
  if (job && (e.event === "finished" || e.event === "failed")) job.state = e.event;
  render();
  refreshSoon();
}

async function stream() {
  for (;;) {
    try {
      const r = await fetch("/v1/events", { headers: { Authorization: "Bearer " + token } });
      if (r.status === 401) return showLogin("bad token");
      setStatus("live", true);
      await refresh();
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let at;
        while ((at = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("\n");
          if (!data) continue;
          try { apply(JSON.parse(data)); } catch (_) { refreshSoon(); }
        }
      }
    } catch (_) { /* reconnect below */ }
    setStatus("reconnecting", false);
    await new Promise((ok) => setTimeout(ok, 1000));
  }
}

function spark(h) {
  if (!h || h.length < 2) return "";
  const w = 300, ht = 48, n = h.length;
  const x = (i) => (i * w) / (n - 1);
  const y = (v, t) => ht - (t ? (v / t) * ht : 0);
  const area = (f) => h.map((p, i) => `${x(i).toFixed(1)},${y(f(p), p.total).toFixed(1)}`).join(" ");
  const busy = area((p) => p.coalloc + p.other), ours = area((p) => p.coalloc);
  return `<svg class="spark" viewBox="0 0 ${w} ${ht}" preserveAspectRatio="none">
    <rect width="${w}" height="${ht}" fill="#c9d3de"/>
    <polygon fill="#ff7f0e" points="0,${ht} ${busy} ${w},${ht}"/>
    <polygon fill="#1f77b4" points="0,${ht} ${ours} ${w},${ht}"/></svg>`;
}

function siteCard(s) {
  const pct = (v) => (s.total ? (100 * v) / s.total : 0).toFixed(1) + "%";
  const flags = [!s.healthy && "down", s.usable === false && "unusable"].filter(Boolean);
  const cloud = s.cloud
    ? `<div class="cloud">cloud: ${s.cloud.vms} VMs (${s.cloud.capacity} processors), ` +
      `${s.cloud.vm_hours} VM-hours, $${s.cloud.cost.toFixed(3)}${s.cloud.nodes.length ? " — " + esc(s.cloud.nodes.join(", ")) : ""}</div>`
    : "";
  return `<div class="site" data-site="${esc(s.name)}">
    <div class="head"><span class="name">${esc(s.name)}</span>
      <span>${flags.map((f) => `<span class="badge bad">${f}</span>`).join(" ")}
      <span class="badge">${esc(s.kind)} · ${esc(s.backend)}</span></span></div>
    <div>${s.coalloc} coalloc · ${s.other} other · ${s.idle} idle of ${s.total}</div>
    <div class="bar"><i class="coalloc" style="width:${pct(s.coalloc)}"></i><i class="other" style="width:${pct(s.other)}"></i></div>
    ${spark(state.history[s.name])}${cloud}</div>`;
}

function comps(j) {
  return j.components.map((c) =>
    `<span class="comp ${esc(c.state)}" data-site="${esc(c.site || "")}">c${c.index} · ${esc(c.site || "-")} · ${esc(c.state)} (${c.count})</span>`
  ).join("");
}

function secs(ms) { return ms == null ? "-" : (ms / 1000).toFixed(1) + " s"; }

function render() {
  $("#scheduler").textContent = state.scheduler
    ? `policy ${state.scheduler.policy} · fit ${state.scheduler.fit} · claiming ${state.scheduler.claiming}` : "";
  $("#sites").innerHTML = state.sites.map(siteCard).join("");
  const queued = state.jobs.filter((j) => j.state === "queued");
  $("#queue-count").textContent = `(${queued.length})`;
  $("#queue").innerHTML = queued.map((j) => `<span class="comp">${j.id} ${esc(j.name || "")} · ${j.processors}</span>`).join("")
    || '<p class="hint">empty</p>';
  const jobs = [...state.jobs].sort((a, b) => b.id - a.id).slice(0, 200);
  $("#jobs tbody").innerHTML = jobs.map((j) => `<tr data-job="${j.id}" data-state="${esc(j.state)}" class="${j.id === state.selected ? "sel" : ""}">
    <td>${j.id}</td><td>${esc(j.name || "")}</td><td class="state ${esc(j.state)}">${esc(j.state)}</td>
    <td>${j.processors}</td><td class="comps">${comps(j)}</td><td>${j.placement_tries}</td>
    <td title="${esc(j.last_abort || "")}">${j.submit_failures + j.completion_failures}</td>
    <td>${j.start ? secs(j.start - j.submit) : "-"}</td></tr>`).join("");
  renderTimeline();
}

const WHAT = {
  submitted: () => "submitted", placed: (e) => "placed on " + (e.sites || []).map((s) => s || "-").join(", "),
  component_submitted: (e) => `component ${e.component} sent to ${e.site}`,
  component_started: (e) => `component ${e.component} started on ${e.site}`,
  component_checked_in: (e) => `component ${e.component} checked in at the barrier`,
  committed: () => "barrier released (committed)", requeued: (e) => "aborted, queued again: " + e.reason,
  component_finished: (e) => `component ${e.component} finished`,
  component_failed: (e) => `component ${e.component} failed: ${e.reason}`,
  finished: () => "finished", failed: (e) => "failed: " + e.reason, cancelled: () => "cancelled",
  preempted: (e) => "preempted for job " + e.by,
};

function renderTimeline() {
  const j = state.detail;
  if (!j) return;
  $("#timeline-job").textContent = `— job ${j.id} ${j.name || ""} (${j.state})`;
  const t0 = j.submit;
  const rel = (t) => (t == null ? "" : "+" + ((t - t0) / 1000).toFixed(2) + " s");
  const evs = state.events[j.id] || [];
  // What happened before the page was opened comes from the job's record.
  const seen = new Set(evs.map((e) => e.event));
  const record = [[j.submit, "submitted", "submitted"], [j.placed, "placed", "placed"],
    [j.barrier_release, "barrier released (committed)", "committed"], [j.end, j.state, j.state]]
    .filter((r) => r[0] != null && !seen.has(r[2])).map((r) => [r[0], r[1]]);
  const items = record.concat(evs.map((e) => [e.time, (WHAT[e.event] || (() => e.event))(e)]))
    .sort((a, b) => a[0] - b[0]);
  const end = j.end || Date.now();
  const span = Math.max(end - t0, 1);
  const bar = (a, b, cls) => (a == null ? "" :
    `<i class="span ${cls}" style="left:${(100 * (a - t0)) / span}%;width:${Math.max((100 * ((b ?? end) - a)) / span, 0.5)}%"></i>`);
  const sent = (i) => (evs.find((e) => e.event === "component_submitted" && e.component === i) || {}).time;
  const rows = j.components.map((c) => `<div class="row"><span class="label">c${c.index} on ${esc(c.site || "-")}</span>
    <span class="track">${bar(sent(c.index), j.barrier_release, "wait")}${bar(j.barrier_release, j.end, "")}</span></div>`).join("");
  $("#timeline").innerHTML = `<div class="gantt">${rows}</div>
    <p>placement tries ${j.placement_tries}, claiming tries ${j.claiming_tries}, aborted starts ${j.submit_failures},
    failures after start ${j.completion_failures}${j.last_abort ? " — last: " + esc(j.last_abort) : ""}</p>
    <ol>${items.map(([t, w]) => `<li><span class="t">${rel(t)}</span>${esc(w)}</li>`).join("")}</ol>
    ${renderOutput()}`;
}

function renderOutput() {
  const part = (l, name, size, body) => (size === 0 ? "" :
    `<h3>c${l.component} launch L${l.launch}: ${name} (${size} bytes${size > TAIL ? ", the last " + TAIL : ""})</h3>
    <pre class="output" data-component="${l.component}" data-stream="${name}">${esc(body)}</pre>`);
  const html = state.output.map((l) => part(l, "stdout", l.stdout, l.out) + part(l, "stderr", l.stderr, l.err)).join("");
  return `<div id="output"><h2>Output</h2>${html || '<p class="hint">no output yet</p>'}</div>`;
}

$("#jobs tbody").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr[data-job]");
  if (!tr) return;
  state.selected = Number(tr.dataset.job);
  refresh().catch(() => {});
});

$("#login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("coalloc-token", $("#token").value.trim());
  location.reload();
});

token = readToken();
if (!token) {
  showLogin();
} else {
  $("#app").hidden = false;
  stream();
  setInterval(() => api("/v1/sites").then((s) => { state.sites = s.sites; sample(); render(); }).catch(() => {}), 2000);
  // The selected job's output, followed every two seconds.
  setInterval(() => {
    if (state.selected == null) return;
    loadOutput(state.selected).then((o) => { state.output = o; renderTimeline(); }).catch(() => {});
  }, 2000);
}
