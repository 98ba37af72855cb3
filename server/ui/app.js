// tollgated's status page (server/status_page.h, docs/operations.md "Status page").
//
// Reads GET /v1/status every second with the admin token the operator typed
// (kept in this tab's sessionStorage only) and acts through the admin API
// (POST /v1/rollback/trip|clear, /v1/keys/get|reset), which checks the
// token's scope and keeps other sites out (server/admin_guard.h).
//
// Every value from the server is client or policy data: it reaches the page
// through textContent and element properties only, never as HTML.
'use strict';

(function () {
  const TOKEN_KEY = 'tollgate.admin_token';
  const POLL_MS = 1000;
  const HISTORY = 120;  // samples per rule: two minutes at one a second
  // The outcomes come from /v1/status ("outcomes"): the page draws whatever
  // the server counts. Known ones have a colour (app.css has the same); any
  // other gets one of the spare colours, in order.
  let OUTCOMES = [];
  const COLORS = {
    allowed: '#2e7d32', rejected: '#c62828', shadow_rejected: '#ef6c00',
    unenforced: '#6a1b9a', unavailable: '#616161', blocked: '#000000', soft_exceeded: '#f9a825',
  };
  const SPARE_COLORS = ['#00838f', '#ad1457', '#4e342e', '#283593'];
  const KNOWN_CLASS = new Set(Object.keys(COLORS));
  function colorOf(o) {
    if (!(o in COLORS)) COLORS[o] = SPARE_COLORS[(Object.keys(COLORS).length) % SPARE_COLORS.length];
    return COLORS[o];
  }
  function outcomeClass(o) { return KNOWN_CLASS.has(o) ? o : 'outcome-other'; }
  function outcomeName(o) { return o.replace(/_/g, ' '); }

  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem(TOKEN_KEY);
  let status = null;         // the last /v1/status document
  const history = new Map(); // rule -> [{t, decisions}]
  const rows = new Map();    // rule -> its table row's cells
  const firstSeen = new Map(); // "rule\n identity" -> Date this page first listed it
  let timer = null;

  // An element with text (never parsed as HTML) and properties.
  function el(tag, text, props) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (props) Object.assign(e, props);
    return e;
  }

  function canWrite() {
    return status !== null && status.caller.scope === 'write';
  }

  async function api(method, path, body) {
    const headers = {};
    if (token) headers.Authorization = 'Bearer ' + token;
    // State changes carry JSON (a body, or none): the admin guard holds them
    // to Content-Type application/json, which no other site can send here.
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    const r = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store', credentials: 'omit', redirect: 'error',
    });
    let doc = null;
    try { doc = await r.json(); } catch (e) { doc = null; }
    return { status: r.status, doc };
  }

  function problemText(res) {
    const d = res.doc || {};
    let text = 'HTTP ' + res.status;
    if (d.title) text += ': ' + d.title;
    if (d.detail) text += ' (' + d.detail + ')';
    if (Array.isArray(d.errors)) {
      for (const e of d.errors) text += '; ' + e.path + ': ' + e.message;
    }
    return text;
  }

  function showLogin(message) {
    $('main').hidden = true;
    $('login').hidden = false;
    $('forget').hidden = true;
    $('login-error').textContent = message || '';
    $('token').focus();
  }

  function showMain() {
    $('login').hidden = true;
    $('main').hidden = false;
    $('forget').hidden = !token;
  }

  function notice(text, isError) {
    $(isError ? 'error' : 'notice').textContent = text;
    $(isError ? 'notice' : 'error').textContent = '';
  }

  async function poll() {
    timer = null;
    const raw = canWrite() && status.caller.may_show_raw && $('raw').checked;
    try {
      const res = await api('GET', '/v1/status' + (raw ? '?raw=1' : ''));
      if (res.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        token = null;
        showLogin(status === null ? '' : 'The token was refused (rotated?): enter it again.');
        status = null;
        return;
      }
      if (res.status !== 200 || !res.doc) {
        $('error').textContent = 'status: ' + problemText(res);
      } else {
        status = res.doc;
        showMain();
        render(status);
      }
    } catch (e) {
      $('error').textContent = 'status: ' + e;
    }
    timer = setTimeout(poll, POLL_MS);
  }

  function pollNow() {
    if (timer !== null) clearTimeout(timer);
    poll();
  }

  function render(s) {
    $('error').textContent = '';
    const health = $('health');
    const healthy = s.ready && s.store.healthy;
    health.textContent = s.draining ? 'draining' : !s.ready ? 'not ready'
      : healthy ? 'ready' : 'store unhealthy';
    health.className = 'badge ' + (healthy && !s.draining ? 'ok' : 'bad');
    $('caller').textContent = (s.caller.token === null ? 'no token' : 'token ' + s.caller.token) +
      ', scope ' + s.caller.scope;
    $('updated').textContent = 'updated ' + new Date(s.wall_time_ns / 1e6).toLocaleTimeString();
    for (const e of document.querySelectorAll('.write-only')) e.hidden = !canWrite();
    $('raw-control').hidden = !(canWrite() && s.caller.may_show_raw);
    renderFacts(s);
    setOutcomes(s);
    renderRules(s);
    renderTop(s);
    renderFleet(s.rollback);
  }

  // The rules table's outcome columns and the legend, rebuilt when the list
  // changes (the rows are then made again).
  function setOutcomes(s) {
    const list = Array.isArray(s.outcomes) ? s.outcomes.map(String)
      : Object.keys((s.rules[0] || { decisions: {} }).decisions);
    if (list.join('\n') === OUTCOMES.join('\n')) return;
    OUTCOMES = list;
    const legend = $('legend');
    legend.replaceChildren();
    for (const o of OUTCOMES) {
      colorOf(o);
      legend.append(el('span', outcomeName(o), { className: outcomeClass(o) }), ' ');
    }
    legend.append('per second, last two minutes');
    const head = $('rules').tHead.rows[0];
    head.replaceChildren(el('th', 'rule'), el('th', 'limit'), el('th', 'mode'),
      el('th', 'decisions/s'), ...OUTCOMES.map((o) => el('th', outcomeName(o))), el('th'));
    for (const cells of rows.values()) cells.tr.remove();
    rows.clear();
  }

  function ms(v) {
    return v === null || v === undefined ? 'n/a' : '\u2264 ' + v + ' ms';
  }

  function figure(v) {
    return v === null || v === undefined ? 'n/a' : String(v);
  }

  function renderDl(dl, pairs) {
    dl.replaceChildren();
    for (const [name, value] of pairs) {
      dl.append(el('dt', name), el('dd', value));
    }
  }

  function when(ns) {
    return ns ? new Date(ns / 1e6).toLocaleString() : 'never';
  }

  function renderFacts(s) {
    const last = s.policy.last_reload;
    const reload = (last.ok ? 'ok' : 'FAILED') + ' at ' + when(last.wall_time_ns) +
      (last.errors.length ? ': ' + last.errors.map((e) => e.path + ': ' + e.message).join('; ') : '');
    renderDl($('facts'), [
      ['ready', s.ready ? 'yes' : 'no'],
      ['store', s.store.description],
      ['store healthy', s.store.healthy ? 'yes' : 'no'],
      ['failure mode', s.store.failure_mode],
      ['breaker', figure(s.store.breaker)],
      ['keys in use', figure(s.store.keys) +
        (s.store.max_keys !== null && s.store.max_keys !== undefined ? ' of ' + s.store.max_keys : '')],
      ['keys evicted', figure(s.store.keys_evicted) + (s.store.keys_evicted_in_debt
        ? ' (' + s.store.keys_evicted_in_debt + ' in debt)' : '')],
      ['decision latency', 'p50 ' + ms(s.store.latency.p50_ms) + ', p90 ' +
        ms(s.store.latency.p90_ms) + ', p99 ' + ms(s.store.latency.p99_ms) + ' (' +
        s.store.latency.decisions + ' decisions)'],
      ['store errors', s.store.errors + ' of ' + s.store.calls + ' calls'],
      ['policy source', s.policy.source],
      ['policy version', s.policy.version],
      ['policy generation', s.policy.generation],
      ['last reload', reload],
      ['reload failures', s.policy.reload_failures],
      ['started', when(s.start_wall_time_ns)],
    ]);
  }

  function modeText(r) {
    if (r.rolled_back) {
      return 'ROLLED BACK to shadow (' + r.rollback.trigger + ': ' + r.rollback.reason + ')' +
        (r.rollback.origin ? ' by ' + r.rollback.origin : '');
    }
    if (r.shadow) return 'shadow';
    if (r.enforce_percent < 100) return 'rollout ' + r.enforce_percent + '%';
    return 'enforce';
  }

  function rowFor(name) {
    let cells = rows.get(name);
    if (cells) return cells;
    const tr = el('tr');
    tr.dataset.rule = name;
    cells = { tr, name: el('td', name), limit: el('td'), mode: el('td'), counts: {} };
    const chartCell = el('td');
    cells.canvas = el('canvas', null, { width: 240, height: 40 });
    chartCell.append(cells.canvas);
    cells.action = el('button', null, { type: 'button' });
    cells.action.dataset.action = 'rollback';
    cells.action.addEventListener('click', () => rollbackAction(name));
    const actionCell = el('td');
    actionCell.append(cells.action);
    tr.append(cells.name, cells.limit, cells.mode, chartCell);
    for (const o of OUTCOMES) {
      cells.counts[o] = el('td', '0', { className: 'num ' + outcomeClass(o) });
      tr.append(cells.counts[o]);
    }
    tr.append(actionCell);
    rows.set(name, cells);
    return cells;
  }

  function renderRules(s) {
    const body = $('rules').tBodies[0];
    const names = new Set();
    const now = s.wall_time_ns / 1e9;
    for (const r of s.rules) {
      names.add(r.name);
      const cells = rowFor(r.name);
      body.append(cells.tr);  // keeps the policy's order
      cells.limit.textContent = r.limit;
      cells.limit.title = r.description;
      cells.mode.textContent = modeText(r);
      cells.tr.classList.toggle('tripped', r.rolled_back);
      for (const o of OUTCOMES) cells.counts[o].textContent = figure(r.decisions[o]);
      cells.action.textContent = r.rolled_back ? 'clear' : 'trip';
      cells.action.hidden = !canWrite();
      const h = history.get(r.name) || [];
      h.push({ t: now, d: r.decisions });
      while (h.length > HISTORY + 1) h.shift();
      history.set(r.name, h);
      drawChart(cells.canvas, h);
    }
    for (const [name, cells] of rows) {
      if (!names.has(name)) {
        cells.tr.remove();
        rows.delete(name);
        history.delete(name);
      }
    }
    const select = $('key-rule');
    const chosen = select.value;
    const current = Array.from(select.options).map((o) => o.value).join('\n');
    if (current !== s.rules.map((r) => r.name).join('\n')) {
      select.replaceChildren(...s.rules.map((r) => el('option', r.name, { value: r.name })));
      if (names.has(chosen)) select.value = chosen;
    }
  }

  // Decisions per second between samples, one line per outcome.
  function drawChart(canvas, h) {
    const ctx = canvas.getContext('2d');
    const w = canvas.width;
    const ht = canvas.height;
    ctx.clearRect(0, 0, w, ht);
    if (h.length < 2) return;
    const rates = {};
    let max = 1;
    for (const o of OUTCOMES) {
      rates[o] = [];
      for (let i = 1; i < h.length; i++) {
        const dt = Math.max(h[i].t - h[i - 1].t, 0.001);
        const v = Math.max(0, ((h[i].d[o] || 0) - (h[i - 1].d[o] || 0)) / dt);
        rates[o].push(v);
        max = Math.max(max, v);
      }
    }
    const step = w / HISTORY;
    for (const o of OUTCOMES) {
      const values = rates[o];
      ctx.strokeStyle = colorOf(o);
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      values.forEach((v, i) => {
        const x = w - (values.length - 1 - i) * step - 1;
        const y = ht - 2 - (v / max) * (ht - 4);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke();
    }
    ctx.fillStyle = '#333';
    ctx.font = '10px sans-serif';
    ctx.fillText(Math.round(max) + '/s', 2, 10);
  }

  // The values an identity (as /v1/top shows it raw) stands for: its parts
  // split at unescaped '|', with NormalizeKeyValue's escapes undone. null
  // when a part is a long value's hash ("~..."), which names no value.
  function identityValues(identity) {
    const values = [];
    let cur = '';
    for (let i = 0; i < identity.length; i++) {
      const c = identity[i];
      if (c === '\\' && i + 1 < identity.length) {
        const n = identity[i + 1];
        if (n === 'x' && i + 3 < identity.length) {
          cur += String.fromCharCode(parseInt(identity.substr(i + 2, 2), 16));
          i += 3;
        } else {
          cur += n;
          i += 1;
        }
      } else if (c === '|') {
        values.push(cur);
        cur = '';
      } else {
        cur += c;
      }
    }
    values.push(cur);
    return values.some((v) => v.startsWith('~')) ? null : values;
  }

  function renderTop(s) {
    const body = $('top').tBodies[0];
    const raw = s.top.raw;
    $('top-note').textContent = 'Counted over the last ' + s.top.window_seconds + ' to ' +
      2 * s.top.window_seconds + ' seconds; identities ' + (raw ? 'raw' : 'hashed') + '.';
    const trs = [];
    for (const rule of s.top.rules) {
      for (const e of rule.top) {
        const seenKey = rule.rule + '\n' + e.key;
        if (!firstSeen.has(seenKey)) firstSeen.set(seenKey, new Date());
        const tr = el('tr');
        tr.append(el('td', rule.rule), el('td', e.key, { className: 'identity' }),
          el('td', e.rejected + (e.error ? ' (±' + e.error + ')' : ''), { className: 'num' }),
          el('td', firstSeen.get(seenKey).toLocaleTimeString()));
        const actions = el('td');
        const values = raw ? identityValues(e.key) : null;
        if (values) {
          const look = el('button', 'look up', { type: 'button' });
          look.dataset.action = 'key-get';
          look.addEventListener('click', () => keyAction('get', rule.rule, values));
          actions.append(look);
          if (canWrite()) {
            const reset = el('button', 'reset', { type: 'button' });
            reset.dataset.action = 'key-reset';
            reset.addEventListener('click', () => keyAction('reset', rule.rule, values));
            actions.append(reset);
          }
        } else if (!raw) {
          actions.append(el('span', 'hashed', { className: 'muted' }));
        }
        tr.append(actions);
        trs.push(tr);
      }
    }
    if (trs.length === 0) {
      trs.push(el('tr'));
      trs[0].append(el('td', 'nobody refused in the window', { colSpan: 5, className: 'muted' }));
    }
    body.replaceChildren(...trs);
  }

  function renderFleet(view) {
    const pairs = [['scope', view.scope]];
    for (const [k, v] of Object.entries(view)) {
      if (k === 'scope' || k === 'rules') continue;
      pairs.push([k, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)]);
    }
    const tripped = view.rules.filter((r) => r.tripped);
    pairs.push(['tripped rules', tripped.length === 0 ? 'none'
      : tripped.map((r) => r.rule + ' (' + r.trigger + ': ' + r.reason + ')').join(', ')]);
    renderDl($('fleet'), pairs);
  }

  async function rollbackAction(rule) {
    const r = status.rules.find((x) => x.name === rule);
    if (!r) return;
    const trip = !r.rolled_back;
    let path = '/v1/rollback/' + (trip ? 'trip' : 'clear') + '?rule=' + encodeURIComponent(rule);
    if (trip) path += '&reason=' + encodeURIComponent($('trip-reason').value || 'status page');
    const res = await api('POST', path);
    if (res.status === 200) {
      notice((trip ? 'Tripped ' : 'Cleared ') + rule + '.', false);
    } else {
      notice((trip ? 'trip ' : 'clear ') + rule + ': ' + problemText(res), true);
    }
    pollNow();
  }

  async function keyAction(action, rule, values) {
    $('key-rule').value = rule;
    $('key-values').value = values.map((v) => v.replace(/[\\|]/g, '\\$&')).join('|');
    const res = await api('POST', '/v1/keys/' + action, { rule, values, raw: true });
    $('key-result').textContent = res.status === 200 ? JSON.stringify(res.doc, null, 2)
      : problemText(res);
    if (res.status === 200) {
      notice(action === 'reset' ? 'Reset ' + rule + ': the key starts full again.'
        : 'Looked up a key of ' + rule + '.', false);
    } else {
      notice('key ' + action + ': ' + problemText(res), true);
    }
    if (action === 'reset') pollNow();
  }

  function keyFormValues() {
    return identityValues($('key-values').value) || [$('key-values').value];
  }

  function start() {
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      token = $('token').value.trim();
      $('token').value = '';
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      pollNow();
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      token = null;
      status = null;
      showLogin('');
    });
    $('key-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      keyAction('get', $('key-rule').value, keyFormValues());
    });
    $('key-reset').addEventListener('click', () => {
      keyAction('reset', $('key-rule').value, keyFormValues());
    });
    $('raw').addEventListener('change', pollNow);
    // Without a token in this tab, ask for one first (an empty one: the
    // listener has none configured) rather than probing with a request the
    // browser would log as a failed load.
    if (token === null) showLogin(''); else pollNow();
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
