// The autotune page: the searches kcached remembers (GET /v1/jobs?kind=autotune)
// and one search's tuning table (a finished search's log, or a stored
// result's autotune_table) as an SVG chart of each variant's time against
// its parameters, drawn here (no chart library), and as a table with the
// reasons of the variants that have no time.
'use strict';

(() => {
  const { api, count, ago, micros, facts, row, el, progress, badge, svg, showError } = kcache;
  let open = null; // the job id shown, while its long-poll runs

  const paramText = (params) => Object.entries(params || {}).map(([k, v]) => `${k}=${v}`).join(' ');
  const timed = (r) => r.median_us > 0;

  // Variants in parameter order (names sorted, values as numbers), so the
  // chart reads left to right as the parameters grow.
  function ordered(rows) {
    const names = [...new Set(rows.flatMap((r) => Object.keys(r.params || {})))].sort();
    const sorted = rows.slice().sort((a, b) => {
      for (const n of names) {
        const d = Number(a.params[n] ?? -Infinity) - Number(b.params[n] ?? -Infinity);
        if (d !== 0 && !Number.isNaN(d)) {
          return d;
        }
      }
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    });
    return { names, sorted };
  }

  // A tick's label: "100 ms", "50 µs", "2.5 µs" (no needless decimals).
  function tick(us) {
    if (!(us > 0)) {
      return '0';
    }
    const [v, unit] = us >= 1000 ? [us / 1000, 'ms'] : [us, 'µs'];
    return `${Number(v.toPrecision(3))} ${unit}`;
  }

  // y ticks: 1-2-5 steps over [lo, hi] (log) or up to hi (linear).
  function ticks(lo, hi, log) {
    const out = [];
    if (log) {
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e += 1) {
        for (const m of [1, 2, 5]) {
          const v = m * 10 ** e;
          if (v >= lo / 1.001 && v <= hi * 1.001) {
            out.push(v);
          }
        }
      }
      return out.length >= 2 ? out : [lo, hi];
    }
    const step = 10 ** Math.floor(Math.log10(hi / 4));
    const unit = [1, 2, 5, 10].map((m) => m * step).find((s) => hi / s <= 5);
    for (let v = 0; v <= hi * 1.001; v += unit) {
      out.push(v);
    }
    return out;
  }

  // One mark per variant: a dot at its median for a timed one, a cross in
  // the "no time" band below for one pruned, failed, wrong or not timed.
  function chart(box, table) {
    box.kcacheChart = () => chart(box, table);
    const { names, sorted } = ordered(table.rows);
    const W = Math.max(300, Math.round(box.clientWidth || 800));
    const narrow = W < 560;
    const H = narrow ? 280 : 320;
    // On a phone the legend takes a line of its own, under the axis title.
    const pad = { left: 62, right: 14, top: narrow ? 46 : 30, bottom: narrow ? 70 : 62 };
    const band = 30; // the no-time band, at the plot's foot
    const plotBottom = H - pad.bottom - band;
    const times = sorted.filter(timed).map((r) => r.median_us);
    const lo = times.length ? Math.min(...times) : 1;
    const hi = times.length ? Math.max(...times) : 1;
    const log = times.length > 1 && hi / lo > 8;
    const top = log ? hi * 1.15 : hi * 1.1;
    const bottom = log ? lo / 1.15 : 0;
    const y = log
      ? (v) => plotBottom - ((Math.log(v) - Math.log(bottom)) / (Math.log(top) - Math.log(bottom))) * (plotBottom - pad.top)
      : (v) => plotBottom - (v / top) * (plotBottom - pad.top);
    const step = (W - pad.left - pad.right) / Math.max(1, sorted.length);
    const x = (i) => pad.left + (i + 0.5) * step;
    const chartSvg = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'tune-chart' });
    const title = svg('title', {});
    title.textContent = `median time of each variant against ${names.join(', ') || 'its parameters'}`;
    chartSvg.append(title);
    for (const v of ticks(log ? bottom * 1.15 : 0, hi, log)) {
      if (log && v <= 0) {
        continue;
      }
      chartSvg.append(svg('line', { x1: pad.left, x2: W - pad.right, y1: y(v), y2: y(v), class: 'grid' }));
      const label = svg('text', { x: pad.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' });
      label.textContent = tick(v);
      chartSvg.append(label);
    }
    chartSvg.append(svg('rect', { x: pad.left, y: plotBottom + 6, width: W - pad.left - pad.right, height: band - 8, class: 'band' }));
    const bandLabel = svg('text', { x: pad.left - 6, y: plotBottom + band / 2 + 6, class: 'axis', 'text-anchor': 'end' });
    bandLabel.textContent = 'no time';
    chartSvg.append(bandLabel);
    const axisTitle = svg('text', { x: pad.left, y: 14, class: 'axis' });
    axisTitle.textContent = 'median' + (log ? ' (log scale)' : '') + ' · lower is faster';
    chartSvg.append(axisTitle);
    // The legend, right-aligned: what the three kinds of mark are.
    const legend = narrow
      ? svg('text', { x: pad.left, y: 32, class: 'axis legend' })
      : svg('text', { x: W - pad.right, y: 14, class: 'axis legend', 'text-anchor': 'end' });
    for (const [cls, text] of [['dot-key', '● timed  '], ['winner-key', '◉ winner  '], ['cross-key', '× no time']]) {
      const part = svg('tspan', { class: cls });
      part.textContent = text;
      legend.append(part);
    }
    chartSvg.append(legend);
    // Parameter values under the marks, as many as fit.
    const every = Math.max(1, Math.ceil(sorted.length / Math.floor((W - pad.left - pad.right) / 26)));
    sorted.forEach((r, i) => {
      const g = svg('g', { class: 'mark ' + r.status + (r.id === table.winner ? ' winner' : ''), 'data-variant': r.id, 'data-status': r.status });
      const tip = svg('title', {});
      tip.textContent = `${r.id} (${paramText(r.params)}): ${r.status}` +
        (timed(r) ? ', ' + micros(r.median_us) : '') + (r.error ? ' — ' + r.error : '') +
        (r.id === table.winner ? ' — the winner' : '');
      g.append(tip);
      if (timed(r)) {
        if (r.id === table.winner) {
          g.append(svg('circle', { cx: x(i), cy: y(r.median_us), r: 10, class: 'ring' }));
        }
        g.append(svg('circle', { cx: x(i), cy: y(r.median_us), r: r.id === table.winner ? 6 : 5, class: 'dot' }));
      } else {
        const cx = x(i);
        const cy = plotBottom + band / 2 + 2;
        g.append(svg('path', { d: `M${cx - 5},${cy - 5}L${cx + 5},${cy + 5}M${cx - 5},${cy + 5}L${cx + 5},${cy - 5}`, class: 'cross' }));
      }
      chartSvg.append(g);
      if (i % every === 0) {
        const values = names.map((n) => r.params[n]).join('·');
        const lx = x(i);
        const ly = H - pad.bottom + 16;
        const label = svg('text', { x: lx, y: ly, class: 'axis tick', 'text-anchor': names.length > 1 ? 'end' : 'middle' });
        if (names.length > 1) {
          label.setAttribute('transform', `rotate(-35 ${lx} ${ly})`);
        }
        label.textContent = values;
        chartSvg.append(label);
      }
    });
    const xTitle = svg('text', { x: W - pad.right, y: H - 6, class: 'axis', 'text-anchor': 'end' });
    xTitle.textContent = names.join(' · ');
    chartSvg.append(xTitle);
    box.replaceChildren(chartSvg);
  }

  // "the winner v3 (UNROLL=8): 12.3 µs, 1.42× faster than the runner-up …"
  function summary(table) {
    const rows = table.rows;
    const byStatus = {};
    for (const r of rows) {
      byStatus[r.status] = (byStatus[r.status] || 0) + 1;
    }
    const statuses = Object.entries(byStatus).map(([s, n]) => `${n} ${s}`).join(', ');
    const winner = rows.find((r) => r.id === table.winner);
    if (!winner) {
      return `No winner: no variant ran correctly. ${rows.length} variants: ${statuses}.`;
    }
    const others = rows.filter((r) => timed(r) && r.id !== winner.id).map((r) => r.median_us).sort((a, b) => a - b);
    const params = paramText(winner.params);
    let text = `Winner ${winner.id}${params && params !== winner.id ? ` (${params})` : ''}: ${micros(winner.median_us)}`;
    if (others.length) {
      const median = others[Math.floor((others.length - 1) / 2)];
      text += `, ${(others[0] / winner.median_us).toFixed(2)}× faster than the runner-up, ` +
        `${(median / winner.median_us).toFixed(2)}× faster than the median of the other ${others.length} timed, ` +
        `${(others[others.length - 1] / winner.median_us).toFixed(2)}× faster than the slowest`;
    }
    return text + `. ${rows.length} variants: ${statuses}.`;
  }

  function show(titleText, table, extra) {
    el('search-title').textContent = titleText;
    el('search-summary').textContent = summary(table);
    chart(el('chart'), table);
    el('chart-note').textContent = table.stopped ? 'Stopped: ' + table.stopped : '';
    const best = (table.rows.find((r) => r.id === table.winner) || {}).median_us;
    const body = el('variants').tBodies[0];
    body.replaceChildren();
    const timedFirst = table.rows.slice().sort((a, b) => (timed(b) - timed(a)) || (a.median_us - b.median_us));
    for (const r of timedFirst) {
      const id = r.id === table.winner ? r.id + ' (winner)' : r.id;
      const label = r.id === paramText(r.params) ? id : `${id} · ${paramText(r.params)}`;
      const tr = row([label, micros(r.median_us), timed(r) && best ? (r.median_us / best).toFixed(2) + '×' : '–',
        kcache.badge(r.status), r.error || '', String(r.rounds || 0)], [1, 2, 5]);
      tr.dataset.variant = r.id;
      tr.cells[4].className = 'reason';
      if (r.id === table.winner) {
        tr.className = 'winner';
      }
      body.append(tr);
    }
    facts(el('search-facts'), [
      ['variants benchmarked', count(table.benchmarked)],
      ['timed runs', count(table.timed_runs)],
      ['benchmark time', table.bench_seconds ? table.bench_seconds.toFixed(2) + ' s' : '–'],
      ['round times', (table.round_seconds || []).map((s) => s.toFixed(2) + ' s').join(', ') || '–'],
      ['bench workers', table.bench_workers === undefined ? '–' : String(table.bench_workers)],
      ...extra,
    ]);
    el('search').hidden = false;
  }

  function showPending(job) {
    el('search-title').textContent = job.id;
    el('search-summary').textContent = job.state === 'queued' || job.state === 'running'
      ? `${job.state}: ${job.progress.done} of ${job.progress.total} variant steps; the table comes when the benchmark ends.`
      : `${job.state}${job.error ? ': ' + job.error.message : ''}; no tuning table.`;
    el('chart').replaceChildren(progress(job));
    el('chart-note').textContent = '';
    el('variants').tBodies[0].replaceChildren();
    el('search-facts').replaceChildren();
    el('search').hidden = false;
  }

  function tableOf(text) {
    try {
      const t = JSON.parse(text || '');
      return t && Array.isArray(t.rows) ? t : null;
    } catch (e) {
      return null;
    }
  }

  // A search by job id; while it runs, a long-poll on it (GET
  // /v1/jobs/{id}?wait_ms=) answers when it finishes.
  async function openJob(id) {
    open = id;
    let job = await api('/v1/jobs/' + encodeURIComponent(id));
    for (;;) {
      if (open !== id) {
        return;
      }
      const table = tableOf(job.log);
      if (table) {
        show(`${job.id} · ${job.entry} · ${job.tuning_class}`, table, [
          ['state', job.state], ['submitted', kcache.time(job.submitted_ms)],
          ['keys', (job.keys || []).join(', ')],
        ]);
        location.hash = job.id;
        return;
      }
      showPending(job);
      if (job.state !== 'queued' && job.state !== 'running') {
        return;
      }
      job = await api('/v1/jobs/' + encodeURIComponent(id) + '?wait_ms=25000');
      if (!['queued', 'running'].includes(job.state)) {
        listSearches().catch(showError);
      }
    }
  }

  async function openKey(key) {
    open = null;
    const entry = await api('/v1/entries/' + key.replace(/[^A-Za-z0-9._:+=-]/g, encodeURIComponent));
    const table = tableOf((entry.metadata || {}).autotune_table);
    if (!table) {
      throw new Error(key + ' holds no tuning table (not an autotune result)');
    }
    const meta = entry.metadata || {};
    show(key, table, [['tuning class', meta.tuning_class || '–'], ['job', meta.job || '–'],
      ['stored', kcache.time(entry.created_ms)]]);
  }

  function jobButton(job) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link key';
    button.textContent = job.id;
    button.addEventListener('click', () => openJob(job.id).catch(showError));
    return button;
  }

  async function listSearches() {
    const list = await api('/v1/jobs?kind=autotune&log=0&limit=100');
    const body = el('searches').tBodies[0];
    body.replaceChildren();
    const now = Date.now();
    for (const job of list.jobs) {
      const tr = row([jobButton(job), badge(job.state), job.entry, job.tuning_class, progress(job), ago(job.submitted_ms, now)]);
      tr.dataset.job = job.id;
      body.append(tr);
    }
    if (list.jobs.length === 0) {
      const empty = row(['no autotune searches in the job history', '', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
    return list;
  }

  document.addEventListener('DOMContentLoaded', () => {
    el('by-key').addEventListener('submit', (event) => {
      event.preventDefault();
      el('error').hidden = true;
      openKey(el('key').value.trim()).catch(showError);
    });
    el('search-close').addEventListener('click', () => {
      el('search').hidden = true;
      open = null;
      history.replaceState(null, '', location.pathname);
    });
    kcache.start(async () => {
      await listSearches();
      const id = decodeURIComponent(location.hash.slice(1));
      if (id.startsWith('j-')) {
        openJob(id).catch(showError);
      }
    });
  });
})();
