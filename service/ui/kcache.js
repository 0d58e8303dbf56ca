// Shared by the dashboard's pages: the token, fetches, formatting and the SVG
// line chart. No libraries and no inline code (the CSP forbids both); data is
// put into the page as text, never as HTML.
'use strict';

const kcache = (() => {
  const TOKEN = 'kcache.token';
  const SVG = 'http://www.w3.org/2000/svg';
  let onReady = null;

  const el = (id) => document.getElementById(id);

  // The dashboard's pages, as every page's nav lists them: a new page is
  // added here, not in each HTML file. [body data-page, address, label].
  const PAGES = [
    ['overview', '/ui/', 'Overview'],
    ['entries', '/ui/entries.html', 'Entries'],
    ['jobs', '/ui/jobs.html', 'Jobs'],
    ['autotune', '/ui/autotune.html', 'Autotune'],
    ['runs', '/ui/runs.html', 'Runs'],
    ['nodes', '/ui/nodes.html', 'Nodes'],
  ];

  function fillNav() {
    const nav = document.querySelector('header nav');
    if (!nav) {
      return;
    }
    nav.replaceChildren(...PAGES.map(([page, href, label]) => {
      const a = document.createElement('a');
      a.href = href;
      a.textContent = label;
      if (page === document.body.dataset.page) {
        a.setAttribute('aria-current', 'page');
      }
      return a;
    }));
  }
  document.addEventListener('DOMContentLoaded', fillNav);

  function token() {
    return sessionStorage.getItem(TOKEN) || '';
  }

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // `method` (GET by default) `path` with the token; JSON (or text) back,
  // HttpError otherwise. `signal` aborts it (a long-poll given up).
  async function api(path, { text = false, method = 'GET', signal } = {}) {
    const headers = {};
    if (token()) {
      headers.Authorization = 'Bearer ' + token();
    }
    const response = await fetch(path, { method, headers, cache: 'no-store', signal });
    if (!response.ok) {
      let message = response.status + ' ' + response.statusText;
      try {
        message = (await response.json()).error || message;
      } catch (e) { /* not JSON */ }
      throw new HttpError(response.status, message);
    }
    return text ? response.text() : response.json();
  }

  // What the token may do (GET /v1/whoami), asked once per page: buttons a
  // token may not use are left out (the server refuses them anyway).
  let who = null;
  function whoami() {
    if (!who) {
      who = api('/v1/whoami').catch((error) => {
        who = null;
        throw error;
      });
    }
    return who;
  }

  function showSignIn(message) {
    el('content').hidden = true;
    el('signin').hidden = false;
    el('signin-error').textContent = message || '';
    el('token').focus();
  }

  // Every page's way to show a failed request: a refused token asks for
  // another, anything else goes in the page's error line.
  function showError(error) {
    if (error instanceof HttpError && error.status === 401) {
      showSignIn(token() ? 'That token was refused: ' + error.message : '');
      return;
    }
    const box = el('error');
    box.textContent = String(error.message || error);
    box.hidden = false;
  }

  function clearError() {
    el('error').hidden = true;
  }

  // Runs the page's `load` now and after a token is given.
  function start(load) {
    onReady = async () => {
      try {
        clearError();
        await load();
        el('signin').hidden = true;
        el('content').hidden = false;
        el('signout').hidden = !token();
      } catch (error) {
        showError(error);
      }
    };
    el('signin').addEventListener('submit', (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN, el('token').value.trim());
      el('token').value = '';
      who = null;
      onReady();
    });
    el('signout').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN);
      who = null;
      showSignIn('');
      el('signout').hidden = true;
    });
    // kcached answered this page 401 (tokens configured, none sent): ask for
    // one before any fetch that would be refused too.
    const page = performance.getEntriesByType('navigation')[0];
    if (!token() && page && page.responseStatus === 401) {
      showSignIn('');
      return;
    }
    onReady();
  }

  function count(n) {
    return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US');
  }

  function bytes(n) {
    if (n === null || n === undefined) {
      return '–';
    }
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = Number(n);
    let u = 0;
    while (v >= 1024 && u < units.length - 1) {
      v /= 1024;
      u += 1;
    }
    return (u === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 2 : 1)) + ' ' + units[u];
  }

  function ratio(hits, misses) {
    const all = hits + misses;
    return all > 0 ? (100 * hits / all).toFixed(1) + ' %' : '–';
  }

  function time(ms) {
    const date = new Date(ms);
    if (!ms || typeof ms !== 'number' || !Number.isFinite(date.getTime())) {
      return '–'; // not a time (a run report holds what its writer put)
    }
    return date.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  }

  // "5 s ago", "3 min ago", "2 h ago", then the date.
  function ago(ms, now = Date.now()) {
    if (!ms) {
      return '–';
    }
    const s = Math.max(0, Math.round((now - ms) / 1000));
    if (s < 60) {
      return s + ' s ago';
    }
    if (s < 3600) {
      return Math.floor(s / 60) + ' min ago';
    }
    if (s < 86400) {
      return Math.floor(s / 3600) + ' h ago';
    }
    return time(ms);
  }

  // "850 ms", "12.3 s", "4 min 2 s".
  function millis(ms) {
    if (ms < 10000) {
      return Math.round(ms) + ' ms';
    }
    if (ms < 120000) {
      return (ms / 1000).toFixed(1) + ' s';
    }
    return duration(ms / 1000);
  }

  // "0.85 µs", "12.3 µs", "4.1 ms".
  function micros(us) {
    if (!(us > 0)) {
      return '–';
    }
    if (us >= 1000) {
      return (us / 1000).toFixed(us >= 10000 ? 1 : 2) + ' ms';
    }
    return us.toFixed(us >= 100 ? 0 : us >= 10 ? 1 : 2) + ' µs';
  }

  // A job's progress: autotune searches count variant steps (each compiled,
  // then each timed); a compile is indeterminate while it runs.
  function progress(job) {
    const bar = document.createElement('progress');
    bar.max = 1;
    const p = job.progress;
    const finished = !['queued', 'running'].includes(job.state);
    if (p && p.total > 0) {
      bar.max = p.total;
      bar.value = finished && job.state === 'succeeded' ? p.total : Math.min(p.done, p.total);
      bar.title = `${p.done} of ${p.total} variant steps`;
    } else if (job.state === 'queued') {
      bar.value = 0;
    } else if (job.state === 'running') {
      bar.removeAttribute('value'); // indeterminate: a compile reports no steps
      bar.title = 'compiling';
    } else {
      bar.value = job.state === 'succeeded' ? 1 : 0;
    }
    bar.className = 'job-progress ' + job.state;
    bar.dataset.job = job.id;
    return bar;
  }

  // A state name as a small badge.
  function badge(state) {
    const span = document.createElement('span');
    span.className = 'badge ' + state;
    span.textContent = state;
    return span;
  }

  function duration(seconds) {
    const s = Math.floor(seconds);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    return d > 0 ? `${d} d ${h} h` : h > 0 ? `${h} h ${m} min` : `${m} min ${s % 60} s`;
  }

  // <dt>/<dd> pairs into `dl`, replacing what it held.
  function facts(dl, pairs) {
    dl.replaceChildren();
    for (const [name, value, id] of pairs) {
      const dt = document.createElement('dt');
      dt.textContent = name;
      const dd = document.createElement('dd');
      dd.textContent = value;
      if (id) {
        dd.id = id;
      }
      dl.append(dt, dd);
    }
  }

  // A table row of text cells; a cell may be a Node instead of text.
  function row(cells, numeric = []) {
    const tr = document.createElement('tr');
    cells.forEach((cell, i) => {
      const td = document.createElement('td');
      if (cell instanceof Node) {
        td.append(cell);
      } else {
        td.textContent = cell;
      }
      if (numeric.includes(i)) {
        td.className = 'num';
      }
      tr.append(td);
    });
    return tr;
  }

  function svg(name, attrs) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) {
      node.setAttribute(k, v);
    }
    return node;
  }

  // A line per series over minutes: [{name, cls, values}], values oldest
  // first, one per minute ending at `endMs`.
  // Drawn at the box's width, so its text keeps its size on a phone; drawn
  // again when the window's width changes.
  function lineChart(box, series, endMs) {
    box.kcacheChart = () => lineChart(box, series, endMs);
    const W = Math.max(280, Math.round(box.clientWidth || 800));
    const H = W < 500 ? 200 : 240;
    const pad = { left: 48, right: 12, top: 30, bottom: 28 };
    const n = Math.max(1, ...series.map((s) => s.values.length));
    const top = Math.max(1, ...series.flatMap((s) => s.values));
    const x = (i) => pad.left + (n === 1 ? 0 : (i * (W - pad.left - pad.right)) / (n - 1));
    const y = (v) => H - pad.bottom - (v * (H - pad.top - pad.bottom)) / top;
    const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'line-chart' });
    const title = svg('title', {});
    title.textContent = series.map((s) => s.name).join(' and ') + ' per minute';
    chart.append(title);
    for (const frac of [0, 0.5, 1]) { // grid lines with their values
      const v = top * frac;
      chart.append(svg('line', { x1: pad.left, x2: W - pad.right, y1: y(v), y2: y(v), class: 'grid' }));
      const label = svg('text', { x: pad.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' });
      label.textContent = count(Math.round(v));
      chart.append(label);
    }
    const minutes = n;
    for (const [i, anchor] of [[0, 'start'], [n - 1, 'end']]) {
      const label = svg('text', { x: x(i), y: H - 8, class: 'axis', 'text-anchor': anchor });
      label.textContent = i === 0 ? `${minutes} min ago` : 'now';
      chart.append(label);
    }
    const legend = svg('g', { class: 'legend' });
    series.forEach((s, k) => {
      const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
      chart.append(svg('polyline', { points, class: 'series ' + s.cls, 'data-series': s.name }));
      const item = svg('text', { x: pad.left + 80 * k, y: 14, class: 'legend-item ' + s.cls });
      item.textContent = '● ' + s.name;
      legend.append(item);
    });
    chart.append(legend);
    chart.setAttribute('data-end', String(endMs));
    box.replaceChildren(chart);
  }

  let resized = null;
  window.addEventListener('resize', () => {
    clearTimeout(resized);
    resized = setTimeout(() => {
      for (const box of document.querySelectorAll('.chart')) {
        if (box.kcacheChart) {
          box.kcacheChart();
        }
      }
    }, 100);
  });

  return {
    api, start, showError, whoami, count, bytes, ratio, time, ago, millis, micros, duration, facts,
    row, progress, badge, svg, lineChart, el, HttpError,
  };
})();
