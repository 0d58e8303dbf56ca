// The nodes page: in cluster mode the live nodes (GET /v1/nodes), refreshed
// every 10 s (heartbeats are seconds apart); on a single node, that node.
'use strict';

(() => {
  const { api, count, ago, time, facts, row, el, showError } = kcache;
  const REFRESH_MS = 10000;
  let timer = null;

  function capabilities(list) {
    const span = document.createElement('span');
    span.className = 'caps';
    span.textContent = (list || []).join(', ') || '–';
    return span;
  }

  async function single(stats) {
    let jobs = null;
    try {
      jobs = await api('/v1/jobs?log=0&limit=1');
    } catch (error) {
      jobs = null; // no workers here: 503
    }
    el('mode').textContent = 'Single-node mode: this kcached is not in a cluster (start it with --cluster and ' +
      '--redis-url to share a Redis tier, leases and the job queue with other nodes).';
    const c = jobs ? jobs.counts : null;
    facts(el('this-node'), [
      ['version', `${stats.version} (${stats.git_revision || 'unknown revision'})`],
      ['up', kcache.duration(stats.uptime_s)],
      ['tiers', stats.tiers.map((t) => t.name).join(' → ')],
      ['workers', c ? count(c.workers) : 'none (no compile workers)'],
      ['queued / running', c ? `${count(c.queued)} / ${count(c.running)}` : '–'],
    ]);
    el('single').hidden = false;
    el('cluster').hidden = true;
  }

  async function load() {
    clearTimeout(timer);
    const stats = await api('/v1/stats');
    el('refreshed').textContent = 'as of ' + new Date().toLocaleTimeString();
    if (!stats.cluster) {
      await single(stats); // GET /v1/nodes would be 404
      return;
    }
    const list = await api('/v1/nodes');
    const one = list.nodes.length === 1;
    el('mode').textContent = `Cluster mode: ${list.nodes.length} live node${one ? ' shares' : 's share'} ` +
      'the Redis tier, the leases and the job queue.';
    const body = el('nodes').tBodies[0];
    body.replaceChildren();
    const now = Date.now();
    for (const n of list.nodes) {
      const tr = row([n.id, n.address, n.version, count(n.workers), count(n.queued), count(n.running),
        time(n.started_ms), ago(n.heartbeat_ms, now), capabilities(n.capabilities)], [3, 4, 5]);
      body.append(tr);
    }
    if (list.nodes.length === 0) {
      const empty = row(['no live nodes (is Redis up?)', '', '', '', '', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
    el('cluster').hidden = false;
    el('single').hidden = true;
    timer = setTimeout(() => load().catch(showError), REFRESH_MS);
  }

  document.addEventListener('DOMContentLoaded', () => {
    el('refresh').addEventListener('click', () => load().catch(showError));
    kcache.start(load);
  });
})();
