// The jobs page: the live queue. GET /v1/jobs?since=N&wait_ms=M is a
// long-poll that kcached answers when a job changed after N (queued,
// started, a variant step, finished), so the page asks again only after an
// answer, and at most a few times a second while the queue is busy.
'use strict';

(() => {
  const { api, count, ago, millis, time, facts, row, el, progress, badge, showError } = kcache;
  const WAIT_MS = 25000; // one request per 25 s while nothing changes
  const GAP_MS = 300; // at least this between two requests while jobs change
  const LIMIT = 200;
  let state = '';
  let changes = null; // the count of the last answer; null: none yet
  let controller = null; // the long-poll in flight
  let generation = 0; // a new loop (filter changed, token given) stops the old one
  let who = null;
  let shown = null; // {id, state} of the job whose detail is open
  let armed = null; // {id, until}: its cancel button was clicked once
  let last = null; // the last listing, drawn again when a filter or an arming changes

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const active = (job) => job.state === 'queued' || job.state === 'running';

  function query() {
    const q = new URLSearchParams({ log: '0', limit: String(LIMIT) });
    if (state) {
      q.set('state', state);
    }
    if (changes !== null) {
      q.set('since', String(changes));
      q.set('wait_ms', String(WAIT_MS));
    }
    return q;
  }

  function what(job) {
    const parts = [];
    if (job.kind === 'autotune') {
      parts.push('autotune ' + (job.entry || ''), job.tuning_class || '');
    } else {
      parts.push(job.entry || job.output || 'compile', `${job.backend}/${job.target}`);
    }
    if (job.parents && job.parents.length) {
      parts.push('variant of ' + job.parents[0]);
    }
    if (job.waiting_for) {
      parts.push(job.waiting_for);
    }
    return parts.filter(Boolean).join(' · ');
  }

  function took(job) {
    if (!job.started_ms) {
      return '–'; // never ran (cancelled or failed while queued)
    }
    if (job.finished_ms) {
      return millis(job.kind === 'autotune' && job.started_ms ? job.finished_ms - job.started_ms : job.compile_ms);
    }
    return millis(Date.now() - job.started_ms);
  }

  function idButton(job) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link key';
    button.textContent = job.id;
    button.addEventListener('click', () => showJob(job.id).catch(showError));
    return button;
  }

  function cancelButton(job) {
    if (!active(job) || !who || !who.somewhere.submit) {
      return '';
    }
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'cancel';
    button.dataset.job = job.id;
    const isArmed = armed && armed.id === job.id && armed.until > Date.now();
    button.textContent = isArmed ? 'Confirm cancel' : 'Cancel';
    button.classList.toggle('armed', Boolean(isArmed));
    button.addEventListener('click', async () => {
      if (!(armed && armed.id === job.id && armed.until > Date.now())) {
        armed = { id: job.id, until: Date.now() + 4000 }; // a second click within 4 s cancels
        draw();
        setTimeout(draw, 4100);
        return;
      }
      armed = null;
      button.disabled = true;
      try {
        await api('/v1/jobs/' + encodeURIComponent(job.id), { method: 'DELETE' });
      } catch (error) {
        showError(error);
      }
    });
    return button;
  }

  function draw() {
    if (!last) {
      return;
    }
    const c = last.counts || {};
    facts(el('counts'), [
      ['queued', `${count(c.queued)} queued`, 'count-queued'],
      ['running', `${count(c.running)} running`, 'count-running'],
      ['finished', `${count(c.finished)} finished (kept)`],
      ['workers', `${count(c.workers)} worker${c.workers === 1 ? '' : 's'}`],
      ['queue capacity', `queue capacity ${count(c.queue_capacity)}`],
    ]);
    const variants = el('variants').checked;
    const jobs = last.jobs.filter((j) => variants || !(j.parents && j.parents.length));
    const body = el('jobs').tBodies[0];
    body.replaceChildren();
    const now = Date.now();
    for (const job of jobs) {
      const error = job.error ? `${job.error.code}: ${job.error.message}` : '';
      const tr = row([idButton(job), badge(job.state), what(job), progress(job), ago(job.submitted_ms, now), took(job),
        error, cancelButton(job)], [5]);
      tr.dataset.job = job.id;
      tr.dataset.state = job.state;
      tr.cells[2].className = 'what';
      tr.cells[6].className = 'error-cell';
      tr.cells[6].title = error;
      if (!error) {
        tr.cells[6].classList.add('none');
      }
      body.append(tr);
    }
    if (jobs.length === 0) {
      const empty = row([state ? `no ${state} jobs` : 'no jobs', '', '', '', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
  }

  function render(list) {
    last = list;
    draw();
    // The open job changed (finished, say): show it as it is now.
    if (shown) {
      const now = list.jobs.find((j) => j.id === shown.id);
      if (now && now.state !== shown.state) {
        showJob(shown.id).catch(showError);
      }
    }
  }

  async function showJob(id) {
    const job = await api('/v1/jobs/' + encodeURIComponent(id));
    shown = { id: job.id, state: job.state };
    el('detail-id').textContent = job.id;
    const pairs = [
      ['state', job.state, 'detail-state'],
      ['kind', job.kind],
      ['what', what(job)],
      ['backend / target', `${job.backend} / ${job.target}`],
      ['output', job.output || '–'],
      ['priority', String(job.priority)],
      ['submitted', time(job.submitted_ms)],
      ['started', time(job.started_ms)],
      ['finished', time(job.finished_ms)],
      ['took', took(job)],
      ['attempts', count(job.attempts)],
      ['submissions', count(job.submissions)],
      ['output size', job.finished_ms ? kcache.bytes(job.output_size) : '–'],
    ];
    if (job.queue_position !== undefined) {
      pairs.push(['queue position', count(job.queue_position)]);
    }
    if (job.progress) {
      pairs.push(['progress', `${job.progress.done} of ${job.progress.total} variant steps`]);
    }
    if (job.error) {
      pairs.push(['error', `${job.error.code}: ${job.error.message}`, 'detail-error']);
    }
    if (job.waiting_for) {
      pairs.push(['waiting for', job.waiting_for]);
    }
    for (const key of job.keys || []) {
      pairs.push(['key', key]);
    }
    facts(el('detail-facts'), pairs);
    // A search's log is its tuning table: the Autotune page draws it.
    const search = job.kind === 'autotune';
    el('detail-autotune').hidden = !search;
    el('detail-autotune-link').href = '/ui/autotune.html#' + encodeURIComponent(job.id);
    el('detail-log-title').hidden = search;
    el('detail-log').hidden = search;
    el('detail-log').textContent = job.log || (active(job) ? '(the log comes when the compile ends)' : '(no log)');
    el('detail').hidden = false;
    el('detail').scrollIntoView({ block: 'nearest' });
  }

  // Long-polls until a newer loop starts. Errors (kcached restarting, say)
  // are shown and retried after a growing pause.
  async function follow(mine) {
    let failures = 0;
    while (mine === generation) {
      const started = Date.now();
      try {
        controller = new AbortController();
        const list = await api('/v1/jobs?' + query(), { signal: controller.signal });
        if (mine !== generation) {
          return;
        }
        changes = list.changes;
        render(list);
        failures = 0;
        el('live').textContent = 'live · ' + new Date().toLocaleTimeString();
        el('live').classList.remove('stale');
      } catch (error) {
        if (mine !== generation) {
          return; // given up for a new query
        }
        failures += 1;
        changes = null;
        el('live').textContent = 'reconnecting… (' + String(error.message || error) + ')';
        el('live').classList.add('stale');
        await sleep(Math.min(30000, 1000 * 2 ** Math.min(failures, 5)));
        continue;
      }
      await sleep(Math.max(0, GAP_MS - (Date.now() - started)));
    }
  }

  // A fresh listing now, then the long-poll loop on it.
  async function load() {
    generation += 1;
    if (controller) {
      controller.abort();
    }
    changes = null;
    who = await kcache.whoami();
    const list = await api('/v1/jobs?' + query());
    changes = list.changes;
    render(list);
    el('live').textContent = 'live · ' + new Date().toLocaleTimeString();
    follow(generation);
  }

  document.addEventListener('DOMContentLoaded', () => {
    for (const button of document.querySelectorAll('[data-state]')) {
      button.addEventListener('click', () => {
        state = button.dataset.state;
        for (const b of document.querySelectorAll('[data-state]')) {
          b.setAttribute('aria-pressed', String(b === button));
        }
        load().catch(showError);
      });
    }
    el('variants').addEventListener('change', draw);
    el('detail-close').addEventListener('click', () => {
      el('detail').hidden = true;
      shown = null;
    });
    // The job named in the address (#j-...) opens with the page.
    const opened = decodeURIComponent(location.hash.slice(1));
    kcache.start(async () => {
      await load();
      if (opened.startsWith('j-') && !shown) {
        await showJob(opened);
      }
    });
  });
})();
