// The runs page: kcache.torch's compile reports (GET /v1/runs), and one run's
// reports per rank (GET /v1/runs/NS/RUN): totals, return on investment,
// recompiles and graph breaks with their reasons, misses with what differed.
// A report is whatever a writer put: every field is shown as text, and a
// missing or odd one as '–'.
'use strict';

(() => {
  const { api, count, time, facts, row, el, showError } = kcache;
  const LIMIT = 100;

  // Strings, finite numbers and booleans as text; anything else (an object,
  // an array, null) as '–': String() of an object may call its writer's
  // toString, or throw.
  const text = (v) => {
    if (typeof v === 'string') {
      return v === '' ? '–' : v;
    }
    if ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean') {
      return String(v);
    }
    return '–';
  };
  const number = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const seconds = (v) => (number(v) === null ? '–' : number(v).toFixed(2));
  const list = (v) => (Array.isArray(v) ? v : []);

  function runLink(run) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link';
    button.textContent = text(run.run);
    button.addEventListener('click', () => {
      location.hash = encodeURIComponent(run.namespace) + '/' + encodeURIComponent(run.run);
    });
    return button;
  }

  async function load() {
    const ns = el('namespace').value.trim();
    const query = `limit=${LIMIT}` + (ns ? '&namespace=' + encodeURIComponent(ns) : '');
    const answer = await api('/v1/runs?' + query);
    el('refreshed').textContent = 'as of ' + new Date().toLocaleTimeString();
    const body = el('runs').tBodies[0];
    body.replaceChildren();
    for (const r of list(answer.runs)) {
      body.append(row([runLink(r), text(r.namespace), count(list(r.ranks).length), time(r.started_ms), text(r.host),
        seconds(r.compile_seconds), count(number(r.hits) || 0), count(number(r.misses) || 0),
        count(number(r.recompiles) || 0), count(number(r.graph_breaks) || 0)], [2, 5, 6, 7, 8, 9]));
    }
    if (body.rows.length === 0) {
      const empty = row(['no run reports' + (ns ? ' in ' + ns : ''), '', '', '', '', '', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
    // A stale link or an unreadable report shows its error; the list stays.
    await showHash().catch(showError);
  }

  // A table of items with {what, reason}: recompiles, graph breaks, misses.
  function reasons(title, items, reasonName) {
    const box = document.createElement('div');
    const h = document.createElement('h3');
    h.textContent = `${title} (${items.length})`;
    box.append(h);
    if (items.length === 0) {
      return box;
    }
    const table = document.createElement('table');
    table.className = 'reasons';
    const head = table.createTHead().insertRow();
    for (const name of ['where', reasonName]) {
      const th = document.createElement('th');
      th.textContent = name;
      head.append(th);
    }
    const body = table.createTBody();
    for (const item of items) {
      body.append(row([text(item && item.what), text(item && item.reason)]));
    }
    const scroll = document.createElement('div');
    scroll.className = 'scroll';
    scroll.append(table);
    box.append(scroll);
    return box;
  }

  function rankReport(rank, report) {
    const section = document.createElement('section');
    section.className = 'rank';
    const h = document.createElement('h3');
    h.textContent = `${rank} · ${text(report.host)} · pid ${text(report.pid)} · torch ${text(report.torch)}` +
      ` · Triton ${text(report.triton)}`;
    section.append(h);
    const object = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});
    const totals = object(report.totals);
    const roi = object(report.roi);
    const dl = document.createElement('dl');
    facts(dl, [
      ['job', text(report.job)],
      ['started / updated', `${time(report.started_ms)} / ${time(report.updated_ms)}`],
      ['graphs compiled', text(totals.graphs_compiled)],
      ['compile seconds', seconds(totals.compile_seconds)],
      ['hits / misses', `${text(totals.hits)} / ${text(totals.misses)}`],
      ['seconds saved by hits (estimate)', seconds(totals.seconds_saved_by_hits)],
      ['eager / compiled step', `${seconds(roi.eager_step_s)} s / ${seconds(roi.compiled_step_s)} s`],
      ['speed-up', number(roi.speedup) === null ? '–' : number(roi.speedup).toFixed(2) + '×'],
      ['break-even step', text(roi.break_even_step)],
    ]);
    section.append(dl);
    section.append(reasons('Recompiles', list(report.recompiles), 'guard failures'));
    section.append(reasons('Graph breaks', list(report.graph_breaks), 'reason'));
    section.append(reasons('Misses', list(report.misses), 'what differed from the nearest earlier key'));
    return section;
  }

  async function showHash() {
    const [ns, run] = location.hash.slice(1).split('/').map((part) => decodeURIComponent(part || ''));
    if (!ns || !run) {
      el('detail').hidden = true;
      return;
    }
    const found = await api(`/v1/runs/${encodeURIComponent(ns)}/${encodeURIComponent(run)}`);
    el('detail-title').textContent = `${ns}/${run}`;
    const ranks = el('ranks');
    ranks.replaceChildren();
    const reports = found.reports && typeof found.reports === 'object' ? found.reports : {};
    for (const [rank, report] of Object.entries(reports)) {
      const plain = report && typeof report === 'object' && !Array.isArray(report);
      ranks.append(rankReport(rank, plain ? report : {}));
    }
    el('detail').hidden = false;
  }

  document.addEventListener('DOMContentLoaded', () => {
    el('filter').addEventListener('submit', (event) => {
      event.preventDefault();
      load().catch(showError);
    });
    el('detail-close').addEventListener('click', () => {
      history.replaceState(null, '', location.pathname);
      el('detail').hidden = true;
    });
    window.addEventListener('hashchange', () => {
      el('error').hidden = true;
      showHash().catch(showError);
    });
    kcache.start(load);
  });
})();
