"""The dashboard (docs/DASHBOARD.md) in headless Chromium against a real kcached
with tokens and real entries: every page loads with no console errors, the
overview's numbers are /v1/stats', a search finds an entry, and /ui/ without a
token is 401. Screenshots at 1280x800 and 390x844 go to build/dashboard-screenshots/.

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
        args = [_kcached(), "--config", str(config), "--listen", "127.0.0.1:0",
                "--data-dir", str(tmp / "data"), "--port-file", str(port_file),
                "--threads", "2", "--log-level", "warn"]
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
                yield {"url": url, "keys": keys, "client": c}
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
    _wait(driver, lambda: len(driver.find_elements(By.CSS_SELECTOR, "#entries tbody button.key")) == 9, "the listing")
    driver.find_element(By.ID, "prefix").send_keys("torch:dash:")
    Select(driver.find_element(By.ID, "sort")).select_by_value("key")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda: "of 6 entries" in _text(driver, "summary"), "the search")
    keys = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#entries tbody button.key")]
    assert keys == sorted(server["keys"]["dash"])
    driver.find_element(By.ID, "prefix").clear()
    driver.find_element(By.ID, "namespace").send_keys("other")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda: "of 3 entries" in _text(driver, "summary"), "the namespace search")
    # SIZE is the artifact's (kernel0 holds 1000 bytes), STORED its record's.
    first = driver.find_elements(By.CSS_SELECTOR, "#entries tbody tr")[0].find_elements(By.TAG_NAME, "td")
    assert first[2].text == "1000 B", [td.text for td in first]
    driver.find_elements(By.CSS_SELECTOR, "#entries tbody button.key")[0].click()
    _wait(driver, lambda: driver.find_element(By.ID, "detail").is_displayed(), "an entry's record")
    assert _text(driver, "detail-key").startswith("triton:other:kernel")
    assert "test_dashboard" in _text(driver, "detail-facts")
    assert "1000 B" in _text(driver, "detail-facts")
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
