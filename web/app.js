// goai's page. The server's thread store is the source of truth: on load
// and after every run the page hydrates from GET /api/chat?threadId=,
// re-attaches to a run still going (GET ?runId=&offset=-1), and rebuilds a
// failed or cancelled run's partial answer and error from that run's log.
//
// Everything the model or a file supplies is untrusted: it reaches the DOM
// through textContent and createElement only, never as HTML.
'use strict';

const $ = id => document.getElementById(id);
const logEl = $('log'), treeEl = $('tree'), diffEl = $('diff');
const sendBtn = $('send'), stopBtn = $('stop'), input = $('q');

let threadId = localStorage.getItem('goai.threadId');
if (!threadId) newThread();
let info = { model: '?', sandbox: '?' };
let wire = [];           // wire messages sent with the next request
let currentRun = null;   // the run this page streams now
let runState = 'idle';
let pending = null;      // {runId, items:[interrupt], answers:{}}
const files = new Map(); // workspace panel: path -> {status, diff}
let selected = null;

function newThread() {
  threadId = newId('thread-');
  localStorage.setItem('goai.threadId', threadId);
}

// newId names a thread or a run with 128 random bits, so that nobody can
// guess an id before its owner has used it (the server refuses another
// user's thread, but only once it has an owner). crypto.getRandomValues,
// unlike crypto.randomUUID, also works on a plain-http address.
function newId(prefix) {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return prefix + Array.from(b, x => x.toString(16).padStart(2, '0')).join('');
}

// el builds an element; children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return e;
}

// ---- status line ----
function setState(s, detail) {
  runState = s;
  document.body.dataset.state = s;
  const st = $('status');
  st.textContent = '';
  st.append('model: ' + info.model + ' · sandbox: ' + info.sandbox + ' · ', el('span', { class: 'state-' + s, text: detail || s }));
  const busy = s === 'running' || s === 'connecting';
  sendBtn.disabled = busy || !!pending;
  stopBtn.disabled = !busy || !currentRun;
}

// ---- API ----
class AuthError extends Error {}
async function api(url, opts) {
  const res = await fetch(url, opts);
  if (res.status === 401) { showLogin(); throw new AuthError('sign in required'); }
  return res;
}
function post(url, body, headers) {
  return api(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...(headers || {}) }, body: JSON.stringify(body) });
}

// ---- markdown (a safe subset, built as DOM) ----
function inline(text) {
  const frag = document.createDocumentFragment();
  const re = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*)|(\[[^\]\n]+\]\((https?:\/\/[^)\s]+)\))/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) frag.append(text.slice(last, m.index));
    const t = m[0];
    if (m[1]) frag.append(el('code', { text: t.slice(1, -1) }));
    else if (m[2]) frag.append(el('strong', { text: t.slice(2, -2) }));
    else if (m[3]) frag.append(el('em', { text: t.slice(1, -1) }));
    else frag.append(el('a', { href: m[5], rel: 'noopener noreferrer nofollow', target: '_blank', text: t.slice(1, t.indexOf('](')) }));
    last = m.index + t.length;
  }
  if (last < text.length) frag.append(text.slice(last));
  return frag;
}
function markdown(src) {
  const out = document.createDocumentFragment();
  const lines = src.split('\n');
  let para = [], list = null;
  const flush = () => {
    if (para.length) { out.append(el('p', null, inline(para.join('\n')))); para = []; }
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)\s*$/);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      const c = el('code', { text: code.join('\n') });
      if (fence[1]) c.dataset.lang = fence[1];
      out.append(el('pre', null, c));
      continue;
    }
    const h = line.match(/^(#{1,4})\s+(.*)$/);
    if (h) { flush(); out.append(el('h' + Math.min(h[1].length + 2, 6), null, inline(h[2]))); continue; }
    const li = line.match(/^\s*(?:([-*])|(\d+)[.)])\s+(.*)$/);
    if (li) {
      if (para.length) { out.append(el('p', null, inline(para.join('\n')))); para = []; }
      const tag = li[1] ? 'ul' : 'ol';
      if (!list || list.tagName.toLowerCase() !== tag) { list = el(tag); out.append(list); }
      list.append(el('li', null, inline(li[3])));
      continue;
    }
    if (!line.trim()) { flush(); continue; }
    list = null;
    para.push(line);
  }
  flush();
  return out;
}

// ---- conversation view ----
const views = { text: new Map(), tools: new Map() }; // messageId -> {el, text}; toolCallId -> view

// follow keeps the newest content in view while the reader is at the
// bottom of the page (a reader who scrolled up is left alone).
let atBottom = true;
window.addEventListener('scroll', () => { atBottom = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80; }, { passive: true });
function follow() { if (atBottom) requestAnimationFrame(() => window.scrollTo(0, document.documentElement.scrollHeight)); }

function clearLog() { logEl.textContent = ''; views.text.clear(); views.tools.clear(); }

function addUser(text) { logEl.append(el('div', { class: 'msg user', text })); follow(); }

function textView(id) {
  let v = views.text.get(id);
  if (!v) {
    v = { el: el('div', { class: 'msg assistant' }), text: '' };
    if (id) v.el.dataset.messageId = id;
    views.text.set(id, v);
    logEl.append(v.el);
  }
  return v;
}
function setText(v, text) { v.text = text; v.el.textContent = ''; v.el.append(markdown(text)); follow(); }

function pretty(s) {
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return s; }
}

function toolView(id, name) {
  let v = views.tools.get(id);
  if (v) return v;
  const summary = el('summary', null);
  const args = el('pre', { class: 'args' }), result = el('pre', { class: 'result' });
  const box = el('details', { class: 'tool' }, summary, el('p', { class: 'tool-label', text: 'arguments' }), args);
  box.dataset.toolCallId = id;
  v = { el: box, summary, args, result, name: name || 'tool', argText: '', done: false };
  renderSummary(v);
  views.tools.set(id, v);
  logEl.append(box);
  follow();
  return v;
}
function renderSummary(v, status) {
  v.summary.textContent = '';
  v.summary.append('⚙ ' + v.name + ' ');
  let brief = v.argText.replace(/\s+/g, ' ');
  try { const a = JSON.parse(v.argText); if (a && (a.path || a.command || a.pattern)) brief = a.command || a.path || a.pattern; } catch { /* streaming */ }
  if (brief.length > 80) brief = brief.slice(0, 80) + '…';
  v.summary.append(el('code', { text: brief }));
  if (status) v.summary.append(' ' + status);
}
function setArgs(v, text) { v.argText = text; v.args.textContent = pretty(text); renderSummary(v); }
function setResult(v, content, failed) {
  if (!v.result.isConnected) v.el.append(el('p', { class: 'tool-label', text: failed ? 'error' : 'result' }), v.result);
  let shown = content;
  try {
    const o = JSON.parse(content);
    if (o && typeof o === 'object' && !Array.isArray(o) && typeof o.error === 'string' && Object.keys(o).length === 1) { failed = true; shown = o.error; }
    else shown = JSON.stringify(o, null, 2);
  } catch { /* plain text */ }
  v.result.textContent = shown;
  v.el.classList.toggle('failed', !!failed);
  v.el.querySelector('.approval')?.remove();
  renderSummary(v, failed ? '✗' : '✓');
  // Short calls and failures stay open; long ones are collapsed.
  v.el.open = !!failed || shown.length + v.argText.length < 160;
  follow();
}

function addError(message, code) {
  const cancelled = code === 'cancelled';
  const box = el('div', { class: 'msg error', role: 'alert' }, el('strong', { text: cancelled ? 'Stopped: ' : 'Error: ' }), message || 'the run failed');
  if (code) box.dataset.code = code;
  logEl.append(box);
  follow();
}

// render draws hydrated UIMessages and rebuilds the wire history.
function render(msgs) {
  clearLog(); wire = [];
  for (const m of msgs) {
    if (m.role === 'user') {
      const text = (m.parts || []).filter(p => p.type === 'text').map(p => p.content).join('');
      addUser(text); wire.push({ id: m.id, role: 'user', content: text });
      continue;
    }
    if (m.role !== 'assistant') continue;
    let text = '', seg = 0; const calls = [], results = [];
    const flushText = () => { if (text) { setText(textView(m.id + (seg ? '#' + seg : '')), text); seg++; text = ''; } };
    let all = '';
    for (const p of m.parts || []) {
      if (p.type === 'text') { text += p.content; all += p.content; }
      if (p.type === 'tool-call') {
        flushText();
        const v = toolView(p.id, p.name);
        setArgs(v, p.arguments || '{}');
        calls.push({ id: p.id, type: 'function', function: { name: p.name, arguments: p.arguments || '{}' } });
        if (p.output !== undefined) {
          const out = typeof p.output === 'string' ? p.output : JSON.stringify(p.output);
          setResult(v, out, p.state === 'error');
          results.push({ id: 'tool-' + p.id, role: 'tool', toolCallId: p.id, content: out });
        }
      }
      if (p.type === 'tool-result') {
        const v = views.tools.get(p.toolCallId);
        const out = typeof p.content === 'string' ? p.content : JSON.stringify(p.content ?? p.error ?? '');
        if (v && !results.some(r => r.toolCallId === p.toolCallId)) {
          setResult(v, out, p.state === 'error');
          results.push({ id: 'tool-' + p.toolCallId, role: 'tool', toolCallId: p.toolCallId, content: out });
        }
      }
    }
    flushText();
    wire.push({ id: m.id, role: 'assistant', content: all, ...(calls.length ? { toolCalls: calls } : {}) }, ...results);
  }
}

// ---- approvals ----
function showApprovals(runId, items) {
  pending = { runId, items: items.filter(i => i.toolCallId), answers: {} };
  if (!pending.items.length) { pending = null; return; }
  for (const it of pending.items) {
    const v = views.tools.get(it.toolCallId) || toolView(it.toolCallId, 'tool');
    v.el.querySelector('.approval')?.remove();
    const yes = el('button', { type: 'button', class: 'approve', text: 'Approve' });
    const no = el('button', { type: 'button', class: 'deny', text: 'Deny' });
    const what = v.name === 'run_command' ? 'Run this command?' : 'Allow ' + v.name + '?';
    yes.setAttribute('aria-label', 'Approve ' + v.name);
    no.setAttribute('aria-label', 'Deny ' + v.name);
    const box = el('div', { class: 'approval', role: 'group', 'aria-label': 'Approval needed' }, el('span', { text: what }), yes, no);
    v.el.append(box);
    v.el.open = true;
    const answer = ok => {
      pending.answers[it.id] = ok;
      box.textContent = '';
      box.append(el('span', { class: 'approval-answer', text: ok ? 'Approved.' : 'Denied.' }));
      if (pending.items.every(i => i.id in pending.answers)) resume();
    };
    yes.addEventListener('click', () => answer(true));
    no.addEventListener('click', () => answer(false));
  }
  setState('waiting', 'waiting for your approval');
  pending.items.length && views.tools.get(pending.items[0].toolCallId)?.el.querySelector('button.approve')?.focus();
}

async function resume() {
  const p = pending; pending = null;
  const resumeItems = p.items.map(i => ({ interruptId: i.id, status: 'resolved', payload: p.answers[i.id] }));
  await startRun({ parentRunId: p.runId, resume: resumeItems });
}

// ---- workspace panel ----
function fileEvent(path, type) {
  const f = files.get(path) || { status: type, diff: '' };
  // A file created in this workspace stays "create" while it is edited.
  f.status = f.status === 'create' && type === 'change' ? 'create' : type;
  files.set(path, f);
  drawTree();
}
function fileDiff(path, diff) {
  const f = files.get(path) || { status: 'change', diff: '' };
  f.diff = diff;
  files.set(path, f);
  if (!selected) selected = path;
  drawTree();
  if (selected === path) drawDiff();
}
function drawTree() {
  $('panel-empty').hidden = files.size > 0;
  treeEl.textContent = '';
  const paths = [...files.keys()].sort();
  const shownDirs = new Set();
  for (const p of paths) {
    const rel = p.replace(/^\/workspace\//, '');
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join('/');
      if (shownDirs.has(d)) continue;
      shownDirs.add(d);
      const li = el('li', { class: 'dir', text: '📁 ' + parts[i - 1] + '/' });
      li.style.paddingLeft = (i - 1) + 'em';
      treeEl.append(li);
    }
    const f = files.get(p);
    const badge = el('span', { class: 'badge ' + f.status, text: { create: 'A', change: 'M', delete: 'D' }[f.status] || '?' });
    badge.title = f.status;
    const b = el('button', { type: 'button', 'aria-pressed': String(p === selected) }, badge, parts[parts.length - 1]);
    b.setAttribute('aria-label', rel + ' (' + f.status + '), show diff');
    b.addEventListener('click', () => { selected = p; drawTree(); drawDiff(); });
    const li = el('li', null, b);
    li.dataset.path = p;
    li.style.paddingLeft = (parts.length - 1) + 'em';
    treeEl.append(li);
  }
}
function drawDiff() {
  diffEl.textContent = '';
  const f = selected && files.get(selected);
  $('diff-title').textContent = selected ? 'Diff of ' + selected.replace(/^\/workspace\//, '') + ' since the baseline' : 'Diff';
  diffEl.hidden = $('diff-title').hidden = !f;
  if (!f) return;
  if (!f.diff) { diffEl.append(f.status === 'delete' ? 'deleted' : 'no diff (yet)'); return; }
  for (const line of f.diff.replace(/\n$/, '').split('\n')) {
    let cls = '';
    if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ') || line.startsWith('index ') || line.startsWith('new file') || line.startsWith('deleted file')) cls = 'meta';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    else if (line.startsWith('@@')) cls = 'hunk';
    diffEl.append(cls ? el('span', { class: cls, text: line }) : line + '\n');
  }
}
async function loadWorkspace() {
  const res = await api('/api/workspace?threadId=' + encodeURIComponent(threadId));
  if (!res.ok) return;
  const w = await res.json();
  files.clear();
  for (const f of w.files || []) files.set(f.path, { status: f.status, diff: f.diff });
  if (selected && !files.has(selected)) selected = null;
  if (!selected && files.size) selected = [...files.keys()].sort()[0];
  drawTree(); drawDiff();
}

// ---- streaming ----
// frames reads SSE frames from a response and calls on(event) for each.
async function frames(res, on) {
  const reader = res.body.getReader(); const dec = new TextDecoder(); let buf = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i); buf = buf.slice(i + 2);
      const data = frame.split('\n').filter(l => l.startsWith('data:')).map(l => l.slice(5).replace(/^ /, '')).join('\n');
      if (data) on(JSON.parse(data));
    }
  }
}

// apply renders one event and reports how a run ended.
function apply(ev, runId) {
  switch (ev.type) {
    case 'RUN_STARTED': if (runId === currentRun) setState('running'); break;
    case 'TEXT_MESSAGE_START': textView(ev.messageId); break;
    case 'TEXT_MESSAGE_CONTENT': { const v = textView(ev.messageId); setText(v, v.text + ev.delta); break; }
    case 'TOOL_CALL_START': toolView(ev.toolCallId, ev.toolCallName); break;
    case 'TOOL_CALL_ARGS': { const v = toolView(ev.toolCallId); setArgs(v, v.argText + ev.delta); break; }
    case 'TOOL_CALL_RESULT': setResult(toolView(ev.toolCallId), ev.content); break;
    case 'CUSTOM':
      if (ev.name === 'sandbox.file' && ev.value) fileEvent(ev.value.path, ev.value.type);
      if (ev.name === 'sandbox.file.diff' && ev.value) fileDiff(ev.value.path, ev.value.diff);
      break;
    case 'RUN_FINISHED':
      if (ev.outcome && ev.outcome.type === 'interrupt') return { interrupts: ev.outcome.interrupts || [] };
      return { finished: true };
    case 'RUN_ERROR':
      addError(ev.message, ev.code);
      return { error: ev };
  }
  return null;
}

// stream follows a run's events to its end, then re-hydrates.
async function stream(runId, res) {
  currentRun = runId;
  setState('running');
  let end = null;
  try {
    if (!res.ok) {
      let msg = 'HTTP ' + res.status;
      try { const b = await res.json(); if (b.error) msg = b.error; } catch { /* not JSON */ }
      addError(msg, 'http-' + res.status);
      end = { error: { message: msg } };
    } else {
      await frames(res, ev => { const r = apply(ev, runId); if (r) end = r; });
    }
  } catch (e) {
    if (e instanceof AuthError) return;
    addError('connection lost: ' + e.message, 'network');
    end = { error: { message: e.message } };
  }
  currentRun = null;
  // A run's record leaves running just after its log ends, so a hydrate in
  // between still calls the run active, and its transcript lacks what a
  // failed run's log holds (the partial answer, the error). Until the
  // record has caught up, the live view stays as it is.
  for (let i = 0; i < 50; i++) {
    if (await hydrate(false, end && end.error ? runId : '') !== 'lagging') break;
    await new Promise(r => setTimeout(r, 40));
  }
  if (!pending) {
    if (end && end.error) setState(end.error.code === 'cancelled' ? 'cancelled' : 'error', end.error.code === 'cancelled' ? 'cancelled' : 'error: ' + (end.error.message || ''));
    else if (end && end.finished) setState('finished');
    else if (runState === 'running') setState('finished', 'ended');
  }
  document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
}

async function startRun(extra) {
  const runId = newId('run-');
  currentRun = runId;
  setState('running');
  let res;
  try {
    res = await post('/api/chat', { threadId, runId, state: {}, messages: wire, tools: [], context: [], forwardedProps: {}, ...extra }, { 'X-Run-Id': runId });
  } catch (e) {
    currentRun = null;
    if (!(e instanceof AuthError)) { addError('request failed: ' + e.message, 'network'); setState('error'); }
    return;
  }
  await stream(runId, res);
}

async function send(text) {
  addUser(text);
  wire.push({ id: 'msg-' + Date.now(), role: 'user', content: text });
  await startRun({});
}

// rebuild replays a failed or cancelled run's log after the transcript:
// what the transcript lacks (the partial answer, tool calls it did not
// keep) and the error.
async function rebuild(lastRun) {
  let res;
  try { res = await api('/api/chat?runId=' + encodeURIComponent(lastRun.runId) + '&offset=-1'); } catch { return; }
  if (!res.ok) { addError(lastRun.error?.message, lastRun.error?.code); return; }
  const evs = [];
  await frames(res, ev => evs.push(ev));
  const haveText = new Set([...views.text.values()].map(v => v.text.trim()));
  const full = new Map();
  for (const ev of evs) if (ev.type === 'TEXT_MESSAGE_CONTENT') full.set(ev.messageId, (full.get(ev.messageId) || '') + ev.delta);
  let sawError = false;
  for (const ev of evs) {
    if (ev.type.startsWith('TEXT_MESSAGE') && (haveText.has((full.get(ev.messageId) || '').trim()))) continue;
    if (ev.type.startsWith('TOOL_CALL') && views.tools.has(ev.toolCallId) && ev.type !== 'TOOL_CALL_RESULT') continue;
    if (ev.type === 'TOOL_CALL_RESULT' && views.tools.get(ev.toolCallId)?.result.isConnected) continue;
    if (ev.type === 'CUSTOM' || ev.type === 'RUN_STARTED') continue;
    if (ev.type === 'RUN_ERROR') sawError = true;
    apply(ev, lastRun.runId);
  }
  if (!sawError && lastRun.error) addError(lastRun.error.message, lastRun.error.code);
}

// hydrate paints the thread's transcript and state; ended names a run
// whose log just ended in error: if the thread still calls it active,
// nothing is painted and hydrate answers 'lagging'.
async function hydrate(attach, ended) {
  let h;
  try {
    const res = await api('/api/chat?threadId=' + encodeURIComponent(threadId));
    if (!res.ok) return;
    h = await res.json();
  } catch (e) { if (!(e instanceof AuthError)) addError('loading the conversation failed: ' + e.message); return; }
  if (ended && h.activeRun && h.activeRun.runId === ended) return 'lagging';
  render(h.messages || []);
  pending = null;
  const last = h.lastRun;
  if (!h.activeRun && last && (last.status === 'failed' || last.status === 'aborted')) {
    await rebuild(last);
    setState(last.error?.code === 'cancelled' ? 'cancelled' : 'error', last.error?.code === 'cancelled' ? 'cancelled' : 'error: ' + (last.error?.message || ''));
  } else if (!h.activeRun && last && last.status === 'completed' && !currentRun) {
    setState('finished');
  }
  if (h.interrupts && !h.activeRun) showApprovals(h.interrupts.runId, JSON.parse(JSON.stringify(h.interrupts.pending)));
  if (h.activeRun && attach) {
    // Re-attach: the log from its start fills in the run so far, then
    // follows it live; the panel is first painted from the workspace.
    await loadWorkspace();
    document.body.dataset.attached = h.activeRun.runId;
    await stream(h.activeRun.runId, await api('/api/chat?runId=' + encodeURIComponent(h.activeRun.runId) + '&offset=-1'));
    return;
  }
  if (!currentRun) await loadWorkspace();
}

// ---- login ----
function showLogin() {
  $('app').hidden = true; $('login').hidden = false;
  setState('signed-out', 'sign in required');
  $('token').focus();
}
$('login-form').addEventListener('submit', async e => {
  e.preventDefault();
  $('login-error').textContent = '';
  const res = await fetch('/api/login', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token: $('token').value }) });
  if (res.status === 204 || res.ok) { $('token').value = ''; $('login').hidden = true; start(); return; }
  $('login-error').textContent = res.status === 401 ? 'That token is not right.' : 'Sign-in failed (HTTP ' + res.status + ').';
});

// ---- controls ----
$('f').addEventListener('submit', e => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || sendBtn.disabled) return;
  input.value = '';
  send(text);
});
input.addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); $('f').requestSubmit(); }
});
stopBtn.addEventListener('click', async () => {
  if (!currentRun) return;
  stopBtn.disabled = true;
  setState('running', 'stopping…');
  try { await post('/api/chat/cancel', { runId: currentRun }); } catch { /* shown by the stream's end */ }
});
$('new').addEventListener('click', () => {
  newThread(); clearLog(); wire = []; pending = null; files.clear(); selected = null;
  drawTree(); drawDiff(); setState('idle', 'new conversation'); input.focus();
});

// ?q= sends a first message once: it is removed from the URL before
// sending, so a reload does not send it again.
const initial = new URLSearchParams(location.search).get('q');
if (initial !== null) window.history.replaceState(null, '', location.pathname + location.hash);

async function start() {
  try {
    const s = await fetch('/api/session');
    if (s.ok) {
      const sess = await s.json();
      if (sess.authRequired && !sess.authenticated) { showLogin(); return; }
    }
    const i = await api('/api/info');
    if (i.ok) info = await i.json();
  } catch (e) { if (e instanceof AuthError) return; }
  $('login').hidden = true; $('app').hidden = false;
  $('demo').hidden = !info.demo;
  setState('idle', 'ready');
  await hydrate(true);
  if (initial && initial.trim() && !currentRun && !pending) await send(initial.trim());
  if (runState === 'idle' || runState === 'loading') setState('idle', 'ready');
  document.body.dataset.done = 'true';
  input.focus();
}
start();
