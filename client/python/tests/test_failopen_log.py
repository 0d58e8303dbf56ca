"""The plain Client reports failing open through logging (logger "kcache"),
as kcache.torch's session does: one WARNING when kcached stops answering, one
when it answers again, not one per call (issue 17 part 5)."""

import logging
import signal

import kcache


def test_plain_client_logs_fail_open_once_per_change_of_state(daemon, caplog):
    caplog.set_level(logging.WARNING, logger="kcache")
    c = kcache.Client(daemon.url, timeout_ms=500, retries=0)
    assert c.put("x", b"1")
    assert caplog.records == []
    daemon.proc.send_signal(signal.SIGSTOP)  # no answers, same address
    try:
        for _ in range(3):
            assert c.get("x") is None
    finally:
        daemon.proc.send_signal(signal.SIGCONT)
    down = [r for r in caplog.records if r.name == "kcache"]
    assert len(down) == 1, [r.getMessage() for r in down]
    assert "fail open" in down[0].getMessage() and daemon.url in down[0].getMessage()
    assert c.get("x") == b"1"
    messages = [r.getMessage() for r in caplog.records if r.name == "kcache"]
    assert len(messages) == 2 and "answers again" in messages[1], messages


def test_strict_or_quiet_clients_log_nothing(daemon, caplog):
    caplog.set_level(logging.WARNING, logger="kcache")
    quiet = kcache.Client(daemon.url, timeout_ms=300, retries=0, log_fail_open=False)
    daemon.stop(signal.SIGKILL)
    assert quiet.get("x") is None
    assert [r for r in caplog.records if r.name == "kcache"] == []
