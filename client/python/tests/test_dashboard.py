"""The dashboard (docs/DASHBOARD.md) in headless Chromium against a real kcached
with tokens, real entries and real compile jobs (one worker): every page loads
with no console errors, the overview's numbers are /v1/stats', a search finds
an entry, explain highlights the differing component, a running autotune
search's progress bar moves, the autotune chart has one mark per variant, a
failed job shows its compiler log, cancel and the admin buttons work, and
/ui/ without a token is 401. Screenshots at 1280x800 and 390x844 go to
build/dashboard-screenshots/.

Needs Debian's chromium and chromium-driver and Selenium in build/venv
(scripts/setup installs them); skips without them unless KCACHE_REQUIRE_DASHBOARD
is set (scripts/test sets it)."""

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import kcache

from conftest import REPO, _kcached

SHOTS = REPO / "build" / "dashboard-screenshots"
READ_TOKEN = secrets.token_hex(32)
ADMIN_TOKEN = secrets.token_hex(32)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'"
)


EXPLAINED = {
    "torch:expl:pt2:fx-graph-v1::a:c1": ("k1", "True"),
    "torch:expl:pt2:fx-graph-v1::b:c1": ("k2", "False"),
}


def _browser():
    """(chromium, chromedriver) paths, or the reason they cannot be used."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromium-driver", driver)) if not path]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (build/venv)")
    if missing:
        return None, "the dashboard test needs " + ", ".join(missing) + ": run scripts/setup"
    return (chromium, driver), None


_PATHS, _MISSING = _browser()
# The HTTP checks need no browser; the browser's test skips without one.
needs_browser = pytest.mark.skipif(
    _PATHS is None and not os.environ.get("KCACHE_REQUIRE_DASHBOARD"), reason=str(_MISSING)
)


@pytest.fixture(scope="module")
def server():
    """A kcached with a read and an admin token, holding entries in two namespaces."""
    with tempfile.TemporaryDirectory(prefix="kcache-ui-") as tmp:
        tmp = Path(tmp)
        config = tmp / "kcached.toml"
        config.write_text(
            f'[[tokens]]\nname = "viewer"\ntoken = "{READ_TOKEN}"\nrole = "read"\n\n'
            f'[[tokens]]\nname = "ops"\ntoken = "{ADMIN_TOKEN}"\nrole = "admin"\n'
        )
        config.chmod(0o600)  # kcached refuses plaintext tokens others may read
        port_file = tmp / "port"
        # One worker: a search's variants compile one after another (its
        # progress moves in steps) and later jobs wait their turn.
        args = [_kcached(), "--config", str(config), "--listen", "127.0.0.1:0",
                "--data-dir", str(tmp / "data"), "--port-file", str(port_file),
                "--threads", "2", "--log-level", "warn", "--workers", "1"]
        if not os.environ.get("KCACHE_WORKER_BINARY"):
            args += ["--worker-memory", "0"]
        with open(tmp / "kcached.log", "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 30
                while not port_file.exists():
                    assert proc.poll() is None and time.monotonic() < deadline, (
                        "kcached did not start: " + (tmp / "kcached.log").read_text())
                    time.sleep(0.02)
                url = f"http://127.0.0.1:{port_file.read_text().strip()}"
                c = kcache.Client(url, token=ADMIN_TOKEN, fail_open=False)
                keys = {
                    "dash": [f"torch:dash:pt2:fx-graph-v1::graph{i}:c1" for i in range(6)],
                    "other": [f"triton:other:kernel{i}" for i in range(3)],
                }
                for ns, names in keys.items():
                    for i, key in enumerate(names):
                        assert c.put(key, os.urandom(1000 * (i + 1)), metadata={"ns": ns}, producer="test_dashboard")
                for key in keys["dash"][:4]:
                    assert c.get(key) is not None  # hits
                assert c.get("torch:dash:pt2:fx-graph-v1::absent:c1") is None  # a miss
                # Two entries kcache.torch would store, whose hash details
                # differ in one input: what explain compares.
                for name, kwargs in EXPLAINED.items():
                    details = ["[h1] gm: graph(x) = relu(x)", f"[{kwargs[0]}] fx_kwargs[cudagraphs]: {kwargs[1]}",
                               "[h3] deterministic_algorithms_settings: (False, False, True)"]
                    assert c.put(name, b"kernel " + name.encode(), metadata={"hash_details": details})
                yield {"url": url, "keys": keys, "client": c, "log": tmp / "kcached.log"}
                c.close()
            finally:
                proc.terminate()
                proc.wait(timeout=30)


def _http(url, token=None):
    """(status, headers, body) of a GET."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_ui_files_headers_and_auth(server):
    url = server["url"]
    status, headers, body = _http(url + "/ui/")
    assert status == 401, "without a token the page is 401"
    assert headers["WWW-Authenticate"] == "Bearer"
    assert b'id="signin"' in body  # the page itself, which asks for the token
    status, headers, body = _http(url + "/ui/", READ_TOKEN)
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == CSP
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-cache"
    assert b"<script" in body and b"<script>" not in body  # no inline script
    assert _http(url + "/ui/entries.html")[0] == 401
    assert _http(url + "/ui/entries.html", READ_TOKEN)[0] == 200
    status, headers, _ = _http(url + "/ui/kcache.js")
    assert (status, headers["Content-Type"]) == (200, "text/javascript; charset=utf-8")
    assert _http(url + "/ui/style.css")[1]["Content-Type"] == "text/css; charset=utf-8"
    for path in ("/ui/nope.html", "/ui/../README.md", "/ui/%2e%2e/README.md", "/ui//etc/passwd", "/ui/index.html/"):
        assert _http(url + path, READ_TOKEN)[0] == 404, path
    assert _http(url + "/v1/stats/history")[0] == 401
    status, _, body = _http(url + "/v1/stats/history?minutes=1440", READ_TOKEN)
    history = json.loads(body)
    assert status == 200 and history["minutes"] == 1440 and len(history["hits"]) == 1440
    assert _http(url + "/v1/stats/history?minutes=1441", READ_TOKEN)[0] == 400
    stats = json.loads(_http(url + "/v1/stats", READ_TOKEN)[2])
    assert sum(history["hits"]) == stats["hits"] and sum(history["misses"]) == stats["misses"]
    listing = json.loads(_http(url + "/v1/entries?area=ac&namespace=other&sort=key&limit=2&offset=1", READ_TOKEN)[2])
    assert listing["total"] == 3
    assert [e["key"] for e in listing["entries"]] == sorted(server["keys"]["other"])[1:3]


@pytest.fixture(scope="module")
def browser():
    if _PATHS is None:
        pytest.fail(str(_MISSING) + " (KCACHE_REQUIRE_DASHBOARD is set)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = _PATHS
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def _viewport(driver, width, height):
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def _wait(driver, predicate, what, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:  # the element is not there yet
            pass
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what + "; console: " + str(driver.get_log("browser")))


def _console_errors(driver, allowed=()):
    return [
        entry for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and not any(a in entry["message"] for a in allowed)
    ]


def _shots(driver, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((1280, 800), (390, 844)):
        _viewport(driver, width, height)
        time.sleep(0.3)  # a relayout, and the chart drawn again at its width
        driver.save_screenshot(str(SHOTS / f"{name}-{width}x{height}.png"))
        # And the whole page at that width, for what lies below the fold.
        full = driver.execute_script("return document.documentElement.scrollHeight")
        _viewport(driver, width, max(height, min(full, 4000)))
        time.sleep(0.1)
        driver.save_screenshot(str(SHOTS / f"{name}-{width}x{height}-full.png"))
    _viewport(driver, 1280, 800)


def _click(driver, selector):
    """Clicks what `selector` finds, again if the page redrew it meanwhile
    (the job list redraws on every change)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(20):
        try:
            driver.find_element(By.CSS_SELECTOR, selector).click()
            return
        except StaleElementReferenceException:
            time.sleep(0.02)
    raise AssertionError("could not click " + selector)


def _text(driver, element_id):
    return driver.find_element("id", element_id).text


@needs_browser
def test_pages_in_chromium(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url = server["url"]
    driver = browser
    # As a proxy in front would: the token on every request, the page's own included.
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer " + READ_TOKEN}})
    driver.get(url + "/ui/")
    _wait(driver, lambda: driver.find_element(By.ID, "content").is_displayed(), "the overview")
    stats = json.loads(_http(url + "/v1/stats", READ_TOKEN)[2])
    count = lambda n: f"{n:,}"  # noqa: E731 (as the page writes numbers)
    assert _text(driver, "total-hits") == count(stats["hits"]) != "0"
    assert _text(driver, "total-misses") == count(stats["misses"])
    assert _text(driver, "total-errors") == count(stats["errors"])
    assert _text(driver, "hour-hits") == _text(driver, "day-hits") == count(stats["hits"])
    assert _text(driver, "hour-misses") == count(stats["misses"])
    assert _text(driver, "total-ratio") == f"{100 * stats['hit_ratio']:.1f} %"
    assert len(driver.find_elements(By.CSS_SELECTOR, "#chart polyline")) == 3
    tiers = driver.find_elements(By.CSS_SELECTOR, "#tiers tbody tr")
    assert len(tiers) == len(stats["tiers"])
    namespaces = driver.find_element(By.ID, "namespaces").text
    assert "dash" in namespaces and "fx-graph" in namespaces
    assert _console_errors(driver) == []
    _shots(driver, "overview")

    driver.get(url + "/ui/entries.html")
    every = len(server["keys"]["dash"]) + len(server["keys"]["other"]) + len(EXPLAINED)
    _wait(driver, lambda: len(driver.find_elements(By.CSS_SELECTOR, "#entries tbody button.key")) == every, "the listing")
    assert "(the last page) in key order" in _text(driver, "summary")
    driver.find_element(By.ID, "prefix").send_keys("torch:dash:")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda: _text(driver, "summary").startswith("1–6 (the last page)"), "the search")
    keys = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#entries tbody button.key")]
    assert keys == sorted(server["keys"]["dash"])
    # Sorted by anything but the key, the server reads every entry and counts them.
    Select(driver.find_element(By.ID, "sort")).select_by_value("size")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda: "of 6 entries" in _text(driver, "summary"), "the sorted search")
    Select(driver.find_element(By.ID, "sort")).select_by_value("key")
    driver.find_element(By.ID, "prefix").clear()
    driver.find_element(By.ID, "namespace").send_keys("other")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda: _text(driver, "summary").startswith("1–3 (the last page)"), "the namespace search")
    # SIZE is the artifact's (kernel0 holds 1000 bytes), STORED its record's.
    first = driver.find_elements(By.CSS_SELECTOR, "#entries tbody tr")[0].find_elements(By.TAG_NAME, "td")
    assert first[3].text == "1000 B", [td.text for td in first]
    driver.find_elements(By.CSS_SELECTOR, "#entries tbody button.key")[0].click()
    _wait(driver, lambda: driver.find_element(By.ID, "detail").is_displayed(), "an entry's record")
    assert _text(driver, "detail-key").startswith("triton:other:kernel")
    assert "test_dashboard" in _text(driver, "detail-facts")
    assert "1000 B" in _text(driver, "detail-facts")
    # Explain: two records picked (A/B) are compared side by side, the
    # differing component marked.
    driver.find_element(By.ID, "namespace").clear()
    driver.find_element(By.ID, "prefix").send_keys("torch:expl:")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda: _text(driver, "summary").startswith("1–2 (the last page)"), "the explain pair")
    for box in driver.find_elements(By.CSS_SELECTOR, "#entries tbody input.pick"):
        box.click()
    _wait(driver, lambda: driver.find_element(By.ID, "explained").is_displayed(), "the explanation")
    assert driver.find_element(By.ID, "key-a").get_attribute("value") == sorted(EXPLAINED)[0]
    differing = [tr.get_attribute("data-component") for tr in driver.find_elements(By.CSS_SELECTOR, "#explain-table tr.differs")]
    same = [tr.get_attribute("data-component") for tr in driver.find_elements(By.CSS_SELECTOR, "#explain-table tr.same")]
    assert differing == ["fx_kwargs[cudagraphs]"], differing
    assert same == ["gm", "deterministic_algorithms_settings"], same
    assert "1 component differs: fx_kwargs[cudagraphs]" in _text(driver, "explain-summary")
    highlighted = driver.find_element(By.CSS_SELECTOR, "#explain-table tr.differs td").value_of_css_property("background-color")
    plain = driver.find_element(By.CSS_SELECTOR, "#explain-table tr.same td").value_of_css_property("background-color")
    assert highlighted != plain, (highlighted, plain)
    assert _console_errors(driver) == []
    _shots(driver, "entries")

    # A person's browser sends no token on its own: the page is 401 and asks for one.
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
    driver.get(url + "/ui/")
    driver.execute_script("sessionStorage.clear()")
    driver.refresh()
    _wait(driver, lambda: driver.find_element(By.ID, "signin").is_displayed(), "the token form")
    _shots(driver, "signin")
    driver.find_element(By.ID, "token").send_keys(READ_TOKEN)
    driver.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    _wait(driver, lambda: _text(driver, "total-hits") == count(stats["hits"]), "the overview after the token")
    # The 401 of the page itself is the one error the console may show.
    assert _console_errors(driver, allowed=[url + "/ui/ - Failed to load resource"]) == []


# A CPU autotune search whose variants nap MS milliseconds per call (the same
# on a loaded host): its benchmark takes about a second, MS=300 is pruned. The
# 100 small functions make each variant's compile take a few tenths of a
# second, so the search's progress moves in steps the page can show.
NAP = "\n".join(
    ['extern "C" int usleep(unsigned);']
    + [f"static float f{i}(float x) {{ for (int j = 0; j < {i % 7 + 2}; ++j) x = x * 1.0001f + {i}.5f / (x + 1.0f); "
       "return x; }" for i in range(100)]
    + ['extern "C" void nap(float* out, int n) {', "  usleep(MS * 1000);", "  float s = 0;"]
    + [f"  s += f{i}(static_cast<float>(n));" for i in range(100)]
    + ["  out[0] = s == s ? static_cast<float>(n) : 0.0f;", "}"]
)
SEARCH = {
    "backend": "cpp", "source": {"name": "nap.cpp", "text": NAP}, "name_expressions": ["nap"],
    "options": ["-O1"], "target": "x86-64-v2", "output": "shared",
    "autotune": {
        "params": {"MS": [10, 40, 80, 160, 300]},
        "constraints": ["MS <= 200"],
        "benchmark": {"args": [{"buffer": "out", "count": "1", "output": True}, {"scalar": "7", "dtype": "i32"}],
                      "reference": {"MS": 10}, "warmup": 0, "repeats": 2},
        "strategy": {"kind": "exhaustive"},
    },
}


def _compile(text):
    return {"backend": "cpp", "source": {"name": "k.cpp", "text": text}, "options": ["-O1"],
            "target": "x86-64-v2", "output": "object"}


@needs_browser
def test_jobs_autotune_nodes_and_admin_in_chromium(server, browser):
    from selenium.webdriver.common.by import By

    url, c, driver = server["url"], server["client"], browser
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer " + ADMIN_TOKEN}})
    driver.get(url + "/ui/jobs.html")
    driver.execute_script("sessionStorage.clear()")
    driver.refresh()
    _wait(driver, lambda: _text(driver, "live").startswith("live"), "the live job list")

    # Submitted with the page open: the long-poll brings each change.
    search = c.submit(SEARCH, key="torch:dash:autotune:nap", priority=0)
    assert search.get("status") == "queued", search
    search_id = search["job"]["id"]
    failing = c.submit(_compile("int broken( {"), priority=-5)["job"]["id"]
    doomed = c.submit(_compile("int kept() { return 7; }"), priority=-10)["job"]["id"]

    # The search's bar, read as the page redraws it, until the search ends.
    seen, deadline = [], time.monotonic() + 120
    bar = f'progress[data-job="{search_id}"]'
    cancelled = False
    while time.monotonic() < deadline:
        try:
            state = driver.find_element(By.CSS_SELECTOR, f'tr[data-job="{search_id}"]').get_attribute("data-state")
            value = float(driver.find_element(By.CSS_SELECTOR, bar).get_attribute("value"))
        except Exception:  # redrawn between the two reads
            continue
        if not seen or seen[-1] != (state, value):
            seen.append((state, value))
        if not cancelled and driver.find_elements(By.CSS_SELECTOR, f'button.cancel[data-job="{doomed}"]'):
            # Queued behind the search (one worker): cancel it, with a confirming second click.
            _click(driver, f'button.cancel[data-job="{doomed}"]')
            _wait(driver, lambda: "Confirm" in driver.find_element(By.CSS_SELECTOR, f'button.cancel[data-job="{doomed}"]').text, "the armed cancel")
            _click(driver, f'button.cancel[data-job="{doomed}"]')
            cancelled = True
        if state in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.03)
    assert seen and seen[-1][0] == "succeeded", seen
    running = sorted({v for s, v in seen if s == "running"})
    assert len(running) >= 2, f"the bar did not move while the search ran: {seen}"
    assert seen[-1][1] > running[0], seen
    assert cancelled
    _wait(driver, lambda: driver.find_element(By.CSS_SELECTOR, f'tr[data-job="{doomed}"]').get_attribute("data-state") == "cancelled",
          "the cancelled job", timeout=30)
    assert c.wait(failing, timeout_s=60)["state"] == "failed"
    _wait(driver, lambda: driver.find_element(By.CSS_SELECTOR, f'tr[data-job="{failing}"]').get_attribute("data-state") == "failed",
          "the failed job", timeout=30)
    _click(driver, f'tr[data-job="{failing}"] button.key')
    _wait(driver, lambda: driver.find_element(By.ID, "detail-log").is_displayed(), "the failed job's log")
    assert "error" in _text(driver, "detail-log"), _text(driver, "detail-log")
    assert "compile-failed" in _text(driver, "detail-error")
    assert _console_errors(driver) == []
    _shots(driver, "jobs")

    # The search's tuning table: one mark per variant, the pruned one with its reason.
    table = json.loads(json.loads(_http(url + "/v1/jobs/" + search_id, READ_TOKEN)[2])["log"])
    driver.get(url + "/ui/autotune.html")
    _wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, f'#searches tr[data-job="{search_id}"] button.key'), "the searches")
    driver.find_element(By.CSS_SELECTOR, f'#searches tr[data-job="{search_id}"] button.key').click()
    _wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#chart g.mark"), "the chart")
    marks = driver.find_elements(By.CSS_SELECTOR, "#chart g.mark")
    assert sorted(m.get_attribute("data-variant") for m in marks) == sorted(r["id"] for r in table["rows"])
    assert len(marks) == 5
    winner = [w.get_attribute("data-variant") for w in driver.find_elements(By.CSS_SELECTOR, "#chart g.mark.winner")]
    assert winner == [table["winner"]], (winner, table)
    pruned = driver.find_element(By.CSS_SELECTOR, '#variants tr[data-variant="MS=300"]')
    assert "pruned" in pruned.text and "MS <= 200" in pruned.text, pruned.text
    assert _text(driver, "search-summary").startswith("Winner MS=10: "), _text(driver, "search-summary")
    assert "faster than the runner-up" in _text(driver, "search-summary")
    assert _console_errors(driver) == []
    _shots(driver, "autotune")

    driver.get(url + "/ui/nodes.html")
    _wait(driver, lambda: driver.find_element(By.ID, "single").is_displayed(), "the nodes page")
    assert _text(driver, "mode").startswith("Single-node mode")
    assert _console_errors(driver) == []
    _shots(driver, "nodes")

    # Admin buttons: shown to an admin token, and they run.
    driver.get(url + "/ui/")
    _wait(driver, lambda: driver.find_element(By.ID, "admin").is_displayed(), "the admin panel")
    driver.find_element(By.ID, "verify-run").click()
    _wait(driver, lambda: "checked" in _text(driver, "verify-result"), "verify")
    assert ", 0 problems" in _text(driver, "verify-result"), _text(driver, "verify-result")
    driver.find_element(By.ID, "gc-age").send_keys("30d")
    driver.find_element(By.ID, "gc-run").click()
    assert "Confirm" in driver.find_element(By.ID, "gc-run").text
    driver.find_element(By.ID, "gc-run").click()
    _wait(driver, lambda: "removed" in _text(driver, "gc-result"), "gc")
    assert _text(driver, "gc-result").startswith("removed 0 entries"), _text(driver, "gc-result")
    assert _console_errors(driver) == []
    _shots(driver, "overview-admin")
    # A read token sees no admin buttons.
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer " + READ_TOKEN}})
    driver.refresh()
    _wait(driver, lambda: driver.find_element(By.ID, "content").is_displayed(), "the overview")
    time.sleep(0.3)
    assert not driver.find_element(By.ID, "admin").is_displayed()
    driver.get(url + "/ui/jobs.html")
    _wait(driver, lambda: _text(driver, "live").startswith("live"), "the jobs page")
    assert not driver.find_elements(By.CSS_SELECTOR, "button.cancel")
    assert _console_errors(driver) == []


@needs_browser
def test_runs_page_in_chromium(server, browser):
    """The Runs page lists kcache.torch's run reports and shows one run's
    recompiles, graph breaks and misses with their reasons; a report whose
    fields are of the wrong type, or hold markup, shows as text."""
    from selenium.webdriver.common.by import By

    url, c, driver = server["url"], server["client"], browser
    now = int(time.time() * 1000)
    report = {
        "schema": 1, "host": "node-7", "pid": 42, "torch": "2.11.0", "triton": "3.6.0", "job": "train.py",
        "started_ms": now - 60_000, "updated_ms": now,
        "totals": {"graphs_compiled": 3, "compile_seconds": 12.5, "hits": 1, "misses": 2, "recompiles": 1,
                   "graph_breaks": 1, "seconds_saved_by_hits": 4.1},
        "recompiles": [{"what": "forward (model.py:10)",
                        "reason": "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"}],
        "graph_breaks": [{"what": "forward (model.py:12)", "reason": "Unsupported: builtin print"}],
        "misses": [{"what": "fx-graph fabc", "reason": "differs from fdef in: example_inputs[1], gm"}],
        "hits": [{"what": "fx-graph f123"}],
        "roi": {"eager_step_s": 0.02, "compiled_step_s": 0.01, "speedup": 2.0, "break_even_step": 1251},
    }
    assert c.put_run_report("dash", "run-7", "rank0", report)
    odd = {"host": "<img src=x id=planted>", "started_ms": "yesterday", "updated_ms": 1e300, "totals": [],
           "recompiles": "many", "graph_breaks": [None, 5, {"what": {"toString": 1}, "reason": ["x"]}],
           "roi": None, "job": {"toString": 1}, "pid": {"valueOf": 1}}
    assert c.put_run_report("dash", "run-odd", "rank0", odd)

    driver.execute_cdp_cmd("Network.enable", {})  # this test may run alone
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer " + READ_TOKEN}})
    driver.get(url + "/ui/runs.html")
    _wait(driver, lambda: "run-7" in _text(driver, "runs"), "the runs list")
    assert driver.find_element(By.CSS_SELECTOR, 'nav a[aria-current="page"]').text == "Runs"
    listed = _text(driver, "runs")
    assert "run-odd" in listed and "12.50" in listed, listed
    run7 = next(r for r in driver.find_elements(By.CSS_SELECTOR, "#runs tbody tr") if r.text.startswith("run-7"))
    assert run7.find_elements(By.TAG_NAME, "td")[2].text == "1"  # one rank
    next(b for b in driver.find_elements(By.CSS_SELECTOR, "#runs button.link") if b.text == "run-7").click()
    _wait(driver, lambda: "expected 8, actual 16" in _text(driver, "detail"), "run-7's report")
    detail = _text(driver, "detail")
    for shown in ("node-7", "Unsupported: builtin print", "differs from fdef in: example_inputs[1], gm", "1251",
                  "2.00×", "Recompiles (1)", "Graph breaks (1)", "Misses (1)"):
        assert shown in detail, (shown, detail)
    _shots(driver, "runs")

    driver.get(url + "/ui/runs.html#dash/run-odd")
    _wait(driver, lambda: "<img src=x id=planted>" in _text(driver, "detail"), "the odd report, as text")
    assert not driver.find_elements(By.ID, "planted")
    assert "Recompiles (0)" in _text(driver, "detail") and "Graph breaks (3)" in _text(driver, "detail")
    assert "[object Object]" not in _text(driver, "detail")
    # A link to a run that is not there: its error, and the list still shows.
    driver.get(url + "/ui/runs.html#dash/no-such-run")
    _wait(driver, lambda: "no run no-such-run" in _text(driver, "error"), "the missing run's error")
    assert "run-7" in _text(driver, "runs")
    assert _console_errors(driver, allowed=("404",)) == []


def test_jobs_long_poll_answers_on_a_change(server):
    """GET /v1/jobs?since=N&wait_ms=M waits while nothing changes and answers
    when a job does; ?log=0 leaves the logs out, ?kind= filters."""
    url, c = server["url"], server["client"]
    first = json.loads(_http(url + "/v1/jobs?log=0", READ_TOKEN)[2])
    assert isinstance(first["changes"], int)
    start = time.monotonic()
    again = json.loads(_http(url + f"/v1/jobs?since={first['changes']}&wait_ms=600", READ_TOKEN)[2])
    assert time.monotonic() - start >= 0.5, "nothing changed: it waited"
    assert again["changes"] == first["changes"]
    assert all("log" not in j for j in first["jobs"])
    import threading
    answer = {}

    def poll():
        t0 = time.monotonic()
        answer["body"] = json.loads(_http(url + f"/v1/jobs?since={first['changes']}&wait_ms=20000", READ_TOKEN)[2])
        answer["s"] = time.monotonic() - t0

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(0.3)
    submitted = c.submit(_compile("int long_poll_probe() { return 1; }"))
    waiter.join(timeout=30)
    assert answer["s"] < 15, answer["s"]
    assert answer["body"]["changes"] > first["changes"]
    assert submitted["job"]["id"] in [j["id"] for j in answer["body"]["jobs"]]
    c.wait(submitted["job"]["id"], timeout_s=60)
    kinds = json.loads(_http(url + "/v1/jobs?kind=autotune&log=0", READ_TOKEN)[2])
    assert all(j["kind"] == "autotune" for j in kinds["jobs"])
    assert _http(url + "/v1/jobs?kind=nope", READ_TOKEN)[0] == 400


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_browser
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server (scripts/setup)")
def test_nodes_page_in_cluster_mode(browser):
    """A kcached in cluster mode (a real redis-server) lists its node."""
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory(prefix="kcache-ui-cluster-") as tmp:
        tmp = Path(tmp)
        port = _free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL)
        kcached = None
        try:
            port_file = tmp / "port"
            args = [_kcached(), "--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--port-file",
                    str(port_file), "--threads", "2", "--log-level", "warn", "--cluster", "--node-id", "dash-node",
                    "--redis-url", f"redis://127.0.0.1:{port}"]
            if not os.environ.get("KCACHE_WORKER_BINARY"):
                args += ["--worker-memory", "0"]
            log = open(tmp / "kcached.log", "ab")
            kcached = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 30
            while not port_file.exists():
                assert kcached.poll() is None and time.monotonic() < deadline, (tmp / "kcached.log").read_text()
                time.sleep(0.02)
            url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            driver = browser
            driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
            driver.get(url + "/ui/nodes.html")
            _wait(driver, lambda: driver.find_element(By.ID, "cluster").is_displayed(), "the cluster's nodes", timeout=20)
            _wait(driver, lambda: "dash-node" in driver.find_element(By.ID, "nodes").text, "this node's row", timeout=20)
            assert _text(driver, "mode").startswith("Cluster mode: 1 live node")
            assert _console_errors(driver) == []
            _shots(driver, "nodes-cluster")
        finally:
            if kcached is not None:
                kcached.terminate()
                kcached.wait(timeout=30)
                log.close()
            redis.terminate()
            redis.wait(timeout=10)
