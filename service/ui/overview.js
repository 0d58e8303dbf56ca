// The overview: counters over the last hour and day (GET /v1/stats/history),
// since start and per tier (GET /v1/stats), and per namespace and cache kind
// (the lookup counters of GET /metrics).
'use strict';

(() => {
  const { api, count, bytes, ratio, facts, row, el } = kcache;
  let minutes = 60;

  const sum = (values) => values.reduce((a, b) => a + b, 0);

  function span(history, last) {
    const pick = (name) => sum(history[name].slice(-last));
    const hits = pick('hits');
    const misses = pick('misses');
    return { hits, misses, errors: pick('errors'), puts: pick('puts'), bytes: pick('bytes_served'), ratio: ratio(hits, misses) };
  }

  function showWindow(dl, w, prefix) {
    facts(dl, [
      ['hits', count(w.hits), prefix + '-hits'],
      ['misses', count(w.misses), prefix + '-misses'],
      ['errors', count(w.errors), prefix + '-errors'],
      ['hit ratio', w.ratio, prefix + '-ratio'],
      ['puts', count(w.puts)],
      ['served', bytes(w.bytes)],
    ]);
  }

  // "name{a="x",b="y"} 3" lines of the Prometheus text format.
  function samples(text, name) {
    const out = [];
    for (const line of text.split('\n')) {
      if (!line.startsWith(name + '{')) {
        continue;
      }
      const close = line.lastIndexOf('}');
      const labels = {};
      for (const m of line.slice(name.length + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
        labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
      }
      out.push({ labels, value: Number(line.slice(close + 1).trim()) });
    }
    return out;
  }

  function namespaces(metrics) {
    const rows = new Map();
    for (const [name, field] of [['kcache_lookup_hits_total', 'hits'], ['kcache_lookup_misses_total', 'misses']]) {
      for (const s of samples(metrics, name)) {
        const key = s.labels.namespace + '\u0000' + s.labels.kind;
        const r = rows.get(key) || { ns: s.labels.namespace, kind: s.labels.kind, hits: 0, misses: 0 };
        r[field] += s.value;
        rows.set(key, r);
      }
    }
    const body = el('namespaces').tBodies[0];
    body.replaceChildren();
    const sorted = [...rows.values()].sort((a, b) => b.hits + b.misses - (a.hits + a.misses));
    for (const r of sorted) {
      body.append(row([r.ns, r.kind, count(r.hits), count(r.misses), ratio(r.hits, r.misses)], [2, 3, 4]));
    }
    if (sorted.length === 0) {
      const empty = row(['no lookups yet', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
  }

  function tiers(stats) {
    const body = el('tiers').tBodies[0];
    body.replaceChildren();
    for (const t of stats.tiers) {
      const used = document.createElement('meter');
      used.min = 0;
      used.max = t.capacity || 1;
      used.value = t.capacity ? t.bytes_stored || 0 : 0;
      const pct = t.capacity ? (100 * (t.bytes_stored || 0)) / t.capacity : 0;
      const share = !t.capacity ? '' : pct > 0 && pct < 0.1 ? '< 0.1 %' : pct.toFixed(1) + ' %';
      const cell = document.createElement('span');
      cell.className = 'used';
      cell.append(used, ' ' + share);
      body.append(row([t.name, count(t.entries), bytes(t.bytes_stored), t.capacity ? bytes(t.capacity) : 'unbounded', cell,
        count(t.hits), count(t.misses)], [1, 2, 3, 5, 6]));
    }
  }

  async function load() {
    const [stats, history, metrics] = await Promise.all([
      api('/v1/stats'),
      api('/v1/stats/history?minutes=1440'),
      api('/metrics', { text: true }),
    ]);
    el('version').textContent = `kcached ${stats.version} · up ${kcache.duration(stats.uptime_s)}`;
    showWindow(el('hour'), span(history, 60), 'hour');
    showWindow(el('day'), span(history, 1440), 'day');
    facts(el('total'), [
      ['hits', count(stats.hits), 'total-hits'],
      ['misses', count(stats.misses), 'total-misses'],
      ['errors', count(stats.errors), 'total-errors'],
      ['hit ratio', stats.hit_ratio === null ? '–' : (100 * stats.hit_ratio).toFixed(1) + ' %', 'total-ratio'],
    ]);
    el('zeroed').textContent = stats.zeroed_ms ? '(zeroed ' + kcache.time(stats.zeroed_ms) + ')' : '';
    const last = (name) => history[name].slice(-minutes);
    kcache.lineChart(el('chart'), [
      { name: 'hits', cls: 'hits', values: last('hits') },
      { name: 'misses', cls: 'misses', values: last('misses') },
      { name: 'errors', cls: 'errors', values: last('errors') },
    ], history.now_ms);
    tiers(stats);
    namespaces(metrics);
    el('mode').textContent = stats.cluster ? 'cluster mode' : 'single node';
    el('admin').hidden = !(await kcache.whoami()).everywhere.admin;
  }

  // "50GiB", "500 MB", "1024" -> bytes; NaN when it is none of these.
  function parseSize(text) {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGTP]i?B|B)?\s*$/i.exec(text);
    if (!m) {
      return NaN;
    }
    const unit = (m[2] || 'B').toUpperCase();
    const power = 'BKMGTP'.indexOf(unit[0]);
    const base = unit.includes('I') ? 1024 : 1000;
    return Math.round(Number(m[1]) * base ** power);
  }

  // "7d", "12h", "30min", "90s" -> seconds; NaN otherwise.
  function parseAge(text) {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(s|min|m|h|d|w)?\s*$/i.exec(text);
    if (!m) {
      return NaN;
    }
    const unit = { s: 1, min: 60, m: 60, h: 3600, d: 86400, w: 604800 }[(m[2] || 's').toLowerCase()];
    return Math.round(Number(m[1]) * unit);
  }

  async function verify() {
    const q = new URLSearchParams({ area: el('verify-area').value });
    if (el('verify-prefix').value.trim()) {
      q.set('prefix', el('verify-prefix').value.trim());
    }
    if (el('verify-repair').checked) {
      q.set('repair', '1');
    }
    const report = await kcache.api('/v1/admin/verify?' + q, { method: 'POST' });
    const problems = report.problems.map((p) => `${p.key}: ${p.problem}`);
    return `${count(report.checked)} checked, ${count(report.problems.length)} problems` +
      (el('verify-repair').checked ? `, ${count(report.repaired)} repaired` : '') +
      (problems.length ? ':\n' + problems.slice(0, 20).join('\n') + (problems.length > 20 ? '\n…' : '') : '');
  }

  async function gc() {
    const q = new URLSearchParams();
    const age = el('gc-age').value.trim();
    const size = el('gc-size').value.trim();
    if (age) {
      const s = parseAge(age);
      if (Number.isNaN(s)) {
        throw new Error(`"${age}" is not an age: give 7d, 12h, 30min or 90s`);
      }
      q.set('older_than_s', String(s));
    }
    if (size) {
      const b = parseSize(size);
      if (Number.isNaN(b)) {
        throw new Error(`"${size}" is not a size: give 50GiB, 500MB or a number of bytes`);
      }
      q.set('max_size', String(b));
    }
    if (!age && !size) {
      throw new Error('give an age, a size or both');
    }
    const r = await kcache.api('/v1/admin/gc?' + q, { method: 'POST' });
    return `removed ${count(r.removed_entries)} entries (${bytes(r.removed_bytes)}); ` +
      `${bytes(r.before_bytes)} before, ${bytes(r.after_bytes)} after`;
  }

  // Runs an admin action from its form; gc asks for a second click first.
  function adminForm(id, run, confirmFirst) {
    const button = el(id + '-run');
    const label = button.textContent;
    let armedUntil = 0;
    el(id).addEventListener('submit', async (event) => {
      event.preventDefault();
      if (confirmFirst && Date.now() > armedUntil) {
        armedUntil = Date.now() + 4000;
        button.textContent = 'Confirm: ' + label.toLowerCase();
        button.classList.add('armed');
        setTimeout(() => {
          button.textContent = label;
          button.classList.remove('armed');
        }, 4000);
        return;
      }
      armedUntil = 0;
      button.textContent = label;
      button.classList.remove('armed');
      button.disabled = true;
      el(id + '-result').textContent = 'running…';
      el(id + '-result').classList.remove('error');
      try {
        el(id + '-result').textContent = await run();
        await load();
      } catch (error) {
        el(id + '-result').textContent = String(error.message || error);
        el(id + '-result').classList.add('error');
      } finally {
        button.disabled = false;
      }
    });
  }

  document.addEventListener('DOMContentLoaded', () => {
    for (const button of document.querySelectorAll('[data-minutes]')) {
      button.addEventListener('click', () => {
        minutes = Number(button.dataset.minutes);
        for (const b of document.querySelectorAll('[data-minutes]')) {
          b.setAttribute('aria-pressed', String(b === button));
        }
        load().catch((error) => kcache.el('error').append(String(error)));
      });
    }
    adminForm('verify', verify, false);
    adminForm('gc', gc, true);
    kcache.start(load);
  });
})();
