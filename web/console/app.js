// The web console of space (docs/console.md). Plain JavaScript, served by
// space-edge from its own host with a strict Content-Security-Policy:
// nothing inline, nothing from elsewhere.
//
// Every call goes to this origin with the caller's API key as a header:
//   /v1/...                          space-control, as the CLI calls it
//   /node/v1/sandboxes/{id}/...      the worker's node-api, through the edge,
//                                    which obtains the route's capability
//                                    with the same key
// A WebSocket cannot carry headers: the terminal offers the key as the
// subprotocol "space-key.<key>" beside "space.v1.json"; the edge takes it
// out before the handshake goes on.
'use strict';

const KEY = 'space.key';
const REFRESH_MS = 2000;
const $ = (id) => document.getElementById(id);

let timer = null;
let current = null;       // the sandbox shown
let filesDir = '/';
let term = null, fit = null, ws = null;

function key() { return sessionStorage.getItem(KEY); }

// True color in the terminal under the policy. xterm.js's DOM renderer
// gives a cell a 24-bit color by appending 'color:#rrggbb;' to the span's
// style attribute with setAttribute, which style-src 'self' refuses (an
// inline style); the same declaration set through the CSSOM is not an
// inline style and is allowed. So a span's style attribute whose new
// declarations are only color and background-color with a color value is
// applied through element.style (the declarations it already had are
// there); anything else goes to the browser's setAttribute, which the
// policy keeps refusing. (The 256 colors are classes: style.css has them.)
const COLOR_VALUE = /^(#[0-9a-fA-F]{3,8}|rgba?\(\s*[0-9.]+\s*,\s*[0-9.]+\s*,\s*[0-9.]+\s*(?:,\s*[0-9.]+\s*)?\))$/;
const setAttributeNative = Element.prototype.setAttribute;
Element.prototype.setAttribute = function (name, value) {
  if (name === 'style' && this instanceof HTMLSpanElement) {
    const decls = String(value).split(';').filter((d) => d.trim() !== '').map((d) => {
      const i = d.indexOf(':');
      return i < 0 ? null : [d.slice(0, i).trim(), d.slice(i + 1).trim()];
    });
    const fresh = decls.filter((d) => d && this.style.getPropertyValue(d[0]) !== d[1]);
    if (decls.every((d) => d) && fresh.every(([p, v]) =>
      (p === 'color' || p === 'background-color') && COLOR_VALUE.test(v))) {
      for (const [p, v] of fresh) this.style.setProperty(p, v);
      return;
    }
  }
  setAttributeNative.call(this, name, value);
};

function showError(msg) {
  const e = $('error');
  e.textContent = msg;
  e.classList.toggle('hidden', !msg);
}

function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'onclick') n.addEventListener('click', v);
    else if (k === 'class') n.className = v;
    else n.setAttribute(k, v);
  }
  for (const k of kids) n.append(k instanceof Node ? k : document.createTextNode(k == null ? '' : String(k)));
  return n;
}

class ApiError extends Error {
  constructor(status, body) {
    super(`${status} ${body.error || ''}${body.message ? ': ' + body.message : ''}`);
    this.status = status;
  }
}

async function call(method, path, body, raw) {
  const headers = { Authorization: 'Bearer ' + key() };
  let payload;
  if (body instanceof Blob || body instanceof ArrayBuffer) payload = body;
  else if (body !== undefined) { headers['Content-Type'] = 'application/json'; payload = JSON.stringify(body); }
  const r = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
  if (!r.ok) {
    let b = {};
    try { b = await r.json(); } catch (_) { b = { error: r.statusText }; }
    throw new ApiError(r.status, b);
  }
  if (raw) return r;
  const t = await r.text();
  return t ? JSON.parse(t) : {};
}
const api = (m, p, b) => call(m, '/v1' + p, b);
const node = (m, id, p, b, raw) => call(m, `/node/v1/sandboxes/${encodeURIComponent(id)}/${p}`, b, raw);

function fmtTime(t) { return t ? t.replace('T', ' ').replace(/\.\d+/, '') : ''; }
function fmtTimeouts(t) {
  if (!t) return '';
  const parts = [];
  if (t.idle) parts.push(`idle ${t.idle}s`);
  if (t.absolute) parts.push(`absolute ${t.absolute}s`);
  return parts.length ? parts.join(', ') + ` then ${t.action}` : 'none';
}

function show(section) {
  for (const s of ['signin', 'list', 'sandbox']) $(s).classList.toggle('hidden', s !== section);
  $('signout').classList.toggle('hidden', section === 'signin');
}

// ---- actions (each confirmed; the API's error is shown as it came)

async function act(what, fn) {
  try { await fn(); showError(''); } catch (e) { showError(`${what}: ${e.message}`); }
  refresh();
}

async function pickWorker(id) {
  const s = await api('GET', '/sandboxes/' + id);
  const w = await api('GET', '/workers');
  const cur = s.execution && s.execution.worker;
  const names = (w.workers || []).map((x) => x.id);
  const other = names.find((n) => n !== cur) || '';
  return prompt(`Move ${s.id} to which worker? (${names.join(', ')})`, other);
}

// the buttons of one sandbox; made once per row or page (a refresh does
// not replace them under the pointer)
function actions(id) {
  const box = el('span');
  const b = (label, fn) => box.append(el('button', { 'data-act': label.toLowerCase(), onclick: fn }, label));
  b('Pause', () => confirm(`Pause ${id}?`) && act('pause', () => api('POST', `/sandboxes/${id}/pause`, {})));
  b('Resume', () => confirm(`Resume ${id}?`) && act('resume', () => api('POST', `/sandboxes/${id}/resume`, {})));
  b('Move', async () => {
    let to;
    try { to = await pickWorker(id); } catch (e) { showError(`move: ${e.message}`); return; }
    if (to && confirm(`Move ${id} to ${to}?`)) act('move', () => api('POST', `/sandboxes/${id}/move`, { to }));
  });
  b('Snapshot', () => {
    const name = prompt(`Name of the snapshot of ${id}:`, 'snap-' + Date.now());
    if (name !== null && confirm(`Snapshot ${id} as "${name}"?`))
      act('snapshot', () => api('POST', `/sandboxes/${id}/snapshots`, name ? { name } : {}));
  });
  b('Kill', () => confirm(`Kill ${id}? Its files are gone after this.`) &&
    act('kill', () => api('DELETE', `/sandboxes/${id}`)));
  return box;
}

// ---- pages

// the sandboxes not killed, page after page (the control plane answers
// 1,000 at most at once)
async function listLive() {
  let all = [], after = '';
  for (let i = 0; i < 20; i++) {
    const r = await api('GET', '/sandboxes?live=true' + (after ? '&after=' + encodeURIComponent(after) : ''));
    all = all.concat(r.sandboxes || []);
    if (!r.next) break;
    after = r.next;
  }
  return { sandboxes: all };
}

async function renderList() {
  const r = await listLive();
  const tb = $('sandboxes').querySelector('tbody');
  const old = new Map([...tb.children].map((row) => [row.dataset.id, row]));
  // a sandbox shown before and no longer listed was killed meanwhile: it
  // stays on the page, as the API now has it, until the page is left
  const listed = new Set((r.sandboxes || []).map((s) => s.id));
  const gone = [];
  for (const id of old.keys()) {
    if (listed.has(id)) continue;
    try { gone.push(await api('GET', '/sandboxes/' + id)); } catch (e) { /* unknown now: dropped */ }
  }
  const rows = (r.sandboxes || []).concat(gone).map((s) => {
    const x = s.execution || {};
    let row = old.get(s.id);
    if (!row) {
      row = el('tr', { 'data-id': s.id }, el('td', {}, el('a', { href: '#/sandbox/' + s.id }, s.id)),
        el('td', { class: 'st' }), el('td'), el('td'), el('td'), el('td'), el('td'), el('td', {}, actions(s.id)));
    }
    [s.state, s.template, x.generation, x.worker, fmtTime(s.created_at), fmtTimeouts(s.timeouts)]
      .forEach((v, i) => { row.children[i + 1].textContent = v == null ? '' : String(v); });
    return row;
  });
  tb.replaceChildren(...rows);
  $('list-empty').classList.toggle('hidden', rows.length > 0);
}

async function renderSandbox(id) {
  const s = await api('GET', '/sandboxes/' + id);
  $('sbx-id').textContent = s.id;
  $('sbx-state').textContent = s.state;
  if ($('sbx-actions').dataset.id !== s.id) {
    $('sbx-actions').replaceChildren(actions(s.id));
    $('sbx-actions').dataset.id = s.id;
  }
  const hist = s.history || [];
  $('timeline').querySelector('tbody').replaceChildren(...hist.map((h) => el('tr', {},
    el('td', {}, h.generation), el('td', {}, h.worker), el('td', {}, h.substrate),
    el('td', {}, h.activation), el('td', {}, h.state), el('td', {}, fmtTime(h.created_at)),
    el('td', {}, fmtTime(h.ended_at)), el('td', {}, h.error || ''))));
  const rf = s.refusals || {};
  for (const td of $('refusals').querySelectorAll('td[data-k]'))
    td.textContent = Number.isInteger(rf[td.dataset.k]) ? String(rf[td.dataset.k]) : 'unknown';
  const ports = Array.isArray(s.ports) ? s.ports : [];
  $('ports').replaceChildren(...(ports.length ? ports.map((p) => {
    const n = typeof p === 'object' ? p.port : p;
    const url = `${location.protocol}//${n}-${s.id}.${location.host}/`;
    return el('li', {}, el('a', { href: url, target: '_blank', rel: 'noopener' }, url),
      typeof p === 'object' && p.public ? ' (public)' : '');
  }) : [el('li', { class: 'muted' }, 'none declared')]));
  try {
    const sn = await api('GET', `/sandboxes/${id}/snapshots`);
    $('snapshots').querySelector('tbody').replaceChildren(...(sn.snapshots || []).map((x) => el('tr', {},
      el('td', {}, x.id), el('td', {}, x.name), el('td', {}, x.state), el('td', {}, x.size),
      el('td', {}, x.generation), el('td', {}, fmtTime(x.created_at)))));
  } catch (e) { showError(`snapshots: ${e.message}`); }
}

async function refresh() {
  if (!key()) return;
  try {
    if (!current) await renderList();
    else await renderSandbox(current);
  } catch (e) {
    if (e.status === 401) { signOut(); showError(`sign-in failed: ${e.message}`); return; }
    showError(e.message);
  }
}

function route() {
  clearInterval(timer);
  timer = null;
  if (!key()) { show('signin'); return; }
  const m = location.hash.match(/^#\/sandbox\/([A-Za-z0-9_-]+)$/);
  const next = m ? m[1] : null;
  if (next !== current) closeTerminal();
  current = next;
  show(current ? 'sandbox' : 'list');
  if (current) tab('overview');
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

function signOut() {
  sessionStorage.removeItem(KEY);
  closeTerminal();
  current = null;
  $('who').textContent = '';
  show('signin');
}

// ---- tabs

function tab(name) {
  for (const b of document.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === name);
  for (const p of document.querySelectorAll('.tabpane')) p.classList.toggle('hidden', p.id !== 'tab-' + name);
  if (name === 'files') listFiles(filesDir);
  if (name === 'processes') listProcesses();
  if (name === 'terminal' && fit) fit.fit();
}

// ---- files

function joinPath(dir, name) { return (dir.endsWith('/') ? dir : dir + '/') + name; }

async function listFiles(dir) {
  filesDir = dir;
  $('files-path').value = dir;
  try {
    const r = await node('GET', current, 'fs/list?path=' + encodeURIComponent(dir));
    const ents = (r.entries || []).sort((a, b) => a.name.localeCompare(b.name));
    $('files').querySelector('tbody').replaceChildren(...ents.map((f) => {
      const p = joinPath(dir, f.name);
      const name = f.type === 'dir'
        ? el('a', { href: '#', 'data-dir': p, onclick: (ev) => { ev.preventDefault(); listFiles(p); } }, f.name + '/')
        : el('a', { href: '#', 'data-file': p, onclick: (ev) => { ev.preventDefault(); viewFile(p, f.size); } }, f.name);
      const acts = el('span');
      if (f.type === 'file') acts.append(el('button', { onclick: () => downloadFile(p, f.name) }, 'Download'));
      acts.append(el('button', { onclick: () => removePath(p, f.type === 'dir') }, 'Remove'));
      return el('tr', {}, el('td', {}, name), el('td', {}, f.type), el('td', {}, f.size),
        el('td', {}, typeof f.mode === 'number' ? f.mode.toString(8) : f.mode), el('td', {}, fmtTime(f.mtime)),
        el('td', {}, acts));
    }));
    showError('');
  } catch (e) { showError(`list ${dir}: ${e.message}`); }
}

const VIEW_MAX = 1 << 20;

async function viewFile(p, size) {
  $('file-name').textContent = p;
  $('file-view').classList.remove('hidden');
  if (size > VIEW_MAX) {
    $('file-text').textContent = `(${size} bytes: too large to show here, download it)`;
    return;
  }
  try {
    const r = await node('GET', current, 'files?path=' + encodeURIComponent(p), undefined, true);
    const buf = await r.arrayBuffer();
    let text;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(buf.slice(0, VIEW_MAX)); }
    catch (_) { text = `(${buf.byteLength} bytes, not UTF-8 text: download it)`; }
    $('file-text').textContent = text;
  } catch (e) { showError(`read ${p}: ${e.message}`); }
}

async function downloadFile(p, name) {
  try {
    const r = await node('GET', current, 'files?path=' + encodeURIComponent(p), undefined, true);
    const url = URL.createObjectURL(await r.blob());
    const a = el('a', { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) { showError(`download ${p}: ${e.message}`); }
}

async function removePath(p, dir) {
  if (!confirm(`Remove ${p}${dir ? ' and everything in it' : ''}?`)) return;
  try { await node('POST', current, 'fs/remove', { path: p, recursive: dir }); listFiles(filesDir); }
  catch (e) { showError(`remove ${p}: ${e.message}`); }
}

// ---- terminal: proc.start with a pty over the stream API (space.v1.json)

function closeTerminal() {
  if (ws) { ws.onclose = null; ws.close(); ws = null; }
  if (term) { term.dispose(); term = null; fit = null; }
  $('term-status').textContent = '';
  $('term-reconnect').classList.add('hidden');
}

// a new shell, or (pid) an attachment to a running process: its replay,
// then its output live, and the keys as its input (a resize only to a pty)
function openTerminal(pid, pty = true) {
  closeTerminal();
  term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 14 });
  fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open($('term'));
  fit.fit();
  const base = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/node/v1/sandboxes/` +
    `${encodeURIComponent(current)}/processes/`;
  const args = { argv: ['/bin/sh', '-i'], pty: { rows: term.rows, cols: term.cols, term: 'xterm-256color' } };
  const url = Number.isInteger(pid) ? `${base}${pid}/stream`
    : `${base}stream?args=${encodeURIComponent(JSON.stringify(args))}`;
  const sock = new WebSocket(url, ['space.v1.json', 'space-key.' + key()]);
  let exited = '';
  ws = sock;
  $('term-status').textContent = 'connecting...';
  sock.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.result) {
      $('term-status').textContent = `${Number.isInteger(pid) ? 'attached' : 'connected'}: pid ${m.result.pid}`;
      if (Number.isInteger(pid) && pty) sock.send(JSON.stringify({ type: 'resize', rows: term.rows, cols: term.cols }));
      return;
    }
    if (m.type === 'pty' || m.type === 'stdout' || m.type === 'stderr') {
      if (m.data !== undefined) term.write(m.data);
      else term.write(Uint8Array.from(atob(m.data_b64), (c) => c.charCodeAt(0)));
    } else if (m.type === 'exit') {
      exited = `The process exited (${m.signal ? 'signal ' + m.signal : 'code ' + m.exit_code}).`;
      $('term-status').textContent = exited;
    }
  };
  sock.onclose = (ev) => {
    if (ws !== sock) return;
    ws = null;
    const st = $('term-status');
    if (ev.code === 4409) {
      st.textContent = 'The session ended because its execution was replaced (the sandbox moved, ' +
        'paused or was killed).';
      st.dataset.closed = '4409';
    } else if (ev.code === 4410) {
      st.textContent = 'Another client attached to this process.';
      st.dataset.closed = '4410';
    } else if (ev.code === 1000) {
      st.textContent = exited || 'The session ended.';
      st.dataset.closed = '1000';
    } else {
      st.textContent = `The session closed (${ev.code}${ev.reason ? ' ' + ev.reason : ''}).`;
      st.dataset.closed = String(ev.code);
    }
    $('term-reconnect').classList.remove('hidden');
  };
  term.onData((d) => { if (ws === sock && sock.readyState === 1) sock.send(JSON.stringify({ type: 'stdin', data: d })); });
  term.onResize(({ rows, cols }) => {
    if (pty && ws === sock && sock.readyState === 1) sock.send(JSON.stringify({ type: 'resize', rows, cols }));
  });
  term.focus();
}

// ---- processes

const SIGNALS = [['TERM', 15], ['INT', 2], ['HUP', 1], ['KILL', 9]];

async function listProcesses() {
  try {
    const r = await node('GET', current, 'processes');
    $('processes').querySelector('tbody').replaceChildren(...(r.processes || []).map((p) => {
      const sel = el('select', {}, ...SIGNALS.map(([n, v]) => el('option', { value: String(v) }, n)));
      const btn = el('button', { onclick: async () => {
        const signo = Number(sel.value);
        if (!confirm(`Send signal ${signo} to process ${p.pid}?`)) return;
        try { await node('POST', current, `processes/${p.pid}/signal`, { signal: signo }); showError(''); }
        catch (e) { showError(`signal ${p.pid}: ${e.message}`); }
        listProcesses();
      } }, 'Signal');
      return el('tr', { 'data-pid': p.pid }, el('td', {}, p.pid), el('td', {}, (p.argv || []).join(' ')),
        el('td', {}, p.pty ? 'yes' : ''), el('td', {}, p.state), el('td', {}, fmtTime(p.started)),
        el('td', {}, p.exit_code == null ? '' : p.exit_code),
        el('td', {}, p.state === 'exited' ? '' : el('span', {}, sel, btn,
          el('button', { 'data-attach': p.pid, onclick: () => { tab('terminal'); openTerminal(p.pid, !!p.pty); } }, 'Attach'))));
    }));
    $('processes').dataset.renders = String(Number($('processes').dataset.renders || 0) + 1);
  } catch (e) { showError(`processes: ${e.message}`); }
}

// ---- wiring

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const k = $('key').value.trim();
    $('key').value = '';
    sessionStorage.setItem(KEY, k);
    try {
      await api('GET', '/sandboxes');
      showError('');
      $('who').textContent = 'signed in';
      route();
    } catch (e) {
      signOut();
      showError(`sign-in failed: ${e.message}`);
    }
  });
  $('signout').addEventListener('click', () => { signOut(); showError(''); });
  $('create-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('create-template').value.trim();
    if (!confirm(`Create a sandbox of template "${t || 'host'}"?`)) return;
    act('create', () => api('POST', '/sandboxes', t ? { template: t } : {}));
  });
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => tab(b.dataset.tab));
  $('files-form').addEventListener('submit', (ev) => { ev.preventDefault(); listFiles($('files-path').value || '/'); });
  $('files-up').addEventListener('click', () => {
    const d = filesDir.replace(/\/+$/, '');
    listFiles(d.slice(0, d.lastIndexOf('/')) || '/');
  });
  $('files-mkdir').addEventListener('click', async () => {
    const name = prompt(`New directory in ${filesDir}:`);
    if (!name) return;
    try { await node('POST', current, 'fs/mkdir', { path: joinPath(filesDir, name), parents: true }); listFiles(filesDir); }
    catch (e) { showError(`mkdir: ${e.message}`); }
  });
  $('files-upload').addEventListener('change', async (ev) => {
    const f = ev.target.files[0];
    if (!f) return;
    const p = joinPath(filesDir, f.name);
    try { await node('PUT', current, 'files?path=' + encodeURIComponent(p), f); listFiles(filesDir); }
    catch (e) { showError(`upload ${p}: ${e.message}`); }
    ev.target.value = '';
  });
  $('term-open').addEventListener('click', () => openTerminal());
  $('term-reconnect').addEventListener('click', () => openTerminal());
  $('proc-refresh').addEventListener('click', listProcesses);
  window.addEventListener('resize', () => { if (fit) fit.fit(); });
  window.addEventListener('hashchange', route);
  if (key()) $('who').textContent = 'signed in';
  route();
});
