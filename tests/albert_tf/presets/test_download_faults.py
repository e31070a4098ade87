"""Downloads into the cache given a bad setting or a bad network (issue 40's poor items): one line
naming the variable or the URL (never its password), a connection that drips fails within the
timeout, and a process that waits for another's download says so once.

The servers are http.server on 127.0.0.1; the redirect loop and the drip are what urllib meets from
real servers (urllib's HTTPRedirectHandler gives up after 10 visits of one URL; a stalled CDN
connection sends bytes far apart)."""

import contextlib
import fcntl
import http.server
import threading
import time

import pytest

from albert_tf.utils.errors import UserError
from albert_tf.presets import download

pytestmark = pytest.mark.faults


@contextlib.contextmanager
def _serve(handler_class):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.parametrize("value", ["abc", "-1", "0", "inf"])
def test_a_bad_timeout_names_the_variable(value, tmp_path, monkeypatch):
    monkeypatch.setenv("ALBERT_TF_TIMEOUT", value)
    with pytest.raises(UserError) as error:
        download.fetch("http://127.0.0.1:9/x.tar.gz", str(tmp_path / "x.tar.gz"), progress=False)
    assert (str(error.value), error.value.exit_code) == (
        f"ALBERT_TF_TIMEOUT='{value}' is not a number of seconds above 0 (unset, it is 20)", 2)
    assert list(tmp_path.iterdir()) == []


def test_a_url_with_a_password_is_refused_without_echoing_it(tmp_path):
    with pytest.raises(UserError) as error:
        download.fetch("https://me:s3cret@127.0.0.1:9/albert.tar.gz#frag", str(tmp_path / "a" / "x"), progress=False)
    assert str(error.value) == (
        "https://me:***@127.0.0.1:9/albert.tar.gz#frag: a URL with a user name or password is not supported; "
        "download the file yourself and pass its path (the tarball, its unpacked folder or a converted preset folder)")
    assert list(tmp_path.iterdir()) == []


def test_a_redirect_loop_is_one_line(tmp_path):
    class Loop(_Quiet):
        def do_GET(self):
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

    with _serve(Loop) as base:
        with pytest.raises(UserError) as error:
            download.fetch(f"{base}/loop.tar.gz", str(tmp_path / "loop.tar.gz"), progress=False)
    assert str(error.value) == (
        f"could not download {base}/loop.tar.gz (HTTP 302 The HTTP server returned a redirect error that would lead "
        f"to an infinite loop. The last 30x error message was: Found); {download.HINT}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_dripping_connection_fails_within_the_timeout_and_keeps_what_came(tmp_path, monkeypatch):
    sent = []

    class Drip(_Quiet):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            # A byte every 0.05 s: each read is answered long before its own 2 s timeout, however
            # busy the machine (a read that waited 2 s would fail as "no answer within 2 s").
            for _ in range(1000):
                sent.append(1)  # counted before it is offered: the client can never have read more
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.05)

    monkeypatch.setenv("ALBERT_TF_TIMEOUT", "2")
    with _serve(Drip) as base:
        with pytest.raises(UserError) as error:
            download.fetch(f"{base}/drip.tar.gz", str(tmp_path / "drip.tar.gz"), progress=False)
    assert str(error.value) == (
        f"could not download {base}/drip.tar.gz (less than 64 KiB in 2 s: the connection is too slow or stalled; "
        f"rerun to resume (ALBERT_TF_TIMEOUT sets the seconds)); {download.HINT}")
    # Each byte was written as it came (the bar moves with it); the rerun resumes from them. How many
    # came in the window depends on the machine's load; that the window ends only after a read, which
    # is kept, does not.
    kept = (tmp_path / "drip.tar.gz.download").read_bytes()
    assert 1 <= len(kept) <= len(sent) and set(kept) == {ord("x")}


def test_a_process_waiting_for_anothers_download_says_so_once(tmp_path, capsys):
    lock = tmp_path / "locks" / "albert.lock"
    lock.parent.mkdir()
    entered = threading.Event()

    def second():
        with download.locked(str(lock)):
            entered.set()

    said = ""
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        thread = threading.Thread(target=second)
        thread.start()
        # Released only once the waiter has said it waits (found the lock taken), however late its
        # thread ran: a release before that would let it in without a word.
        deadline = time.monotonic() + 60
        while "waiting" not in said:
            assert time.monotonic() < deadline and thread.is_alive(), said
            time.sleep(0.01)
            said += capsys.readouterr().err
        thread.join(0.2)  # the time a waiter that does not wait has to get in
        assert not entered.is_set()
        fcntl.flock(held, fcntl.LOCK_UN)
    thread.join(60)
    assert entered.is_set()
    assert (said + capsys.readouterr().err).splitlines() == [
        f"waiting for another process to finish its download or conversion into the cache ({lock})"]
    with download.locked(str(lock)):  # free: no word
        pass
    assert capsys.readouterr().err == ""
