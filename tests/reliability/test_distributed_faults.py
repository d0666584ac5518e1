"""The distributed store's faults (docs/security.md, "Distributed store"): a coordinator that accepts and never
answers, freezes, closes, is killed, or lies (a message changed, replayed, reordered, reflected, cut or too large)
gives a bounded wait and an error that names the coordinator's host:port and the request; a peer without the key
gets nothing, and the coordinator uses no request that fails authentication. Each fault is played by a fake
coordinator on loopback (or the real one, closed or killed); every call that could hang runs on a thread that the
test waits for at most its documented timeout plus SLACK (one thread per test: a store connects once per thread)."""
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import ember.distributed as dist
from ember._runtime import distributed as state
from subproc import ROOT

KEY = b"a test key, 16 bytes or more"
SLACK = 20  # seconds beyond a documented timeout (a loaded 2-core machine)


class Worker:
    """One thread that runs calls in turn, each of which must finish within its time limit (a hang fails the test,
    not the test run)."""

    def __init__(self):
        self._calls = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            call, result, done = self._calls.get()
            try:
                result["value"] = call()
            except BaseException as err:  # (the outcome under test)
                result["error"] = err
            done.set()

    def outcome(self, call, within=SLACK):
        result, done = {}, threading.Event()
        self._calls.put((call, result, done))
        assert done.wait(within), f"still waiting after {within} s"
        return result

    def __call__(self, call, within=SLACK):
        """What call returns (it must not raise)."""
        result = self.outcome(call, within)
        assert "error" not in result, result
        return result["value"]

    def raises(self, error, call, within):
        """The message of the error (of type error) that call raises."""
        result = self.outcome(call, within)
        assert isinstance(result.get("error"), error), result
        return str(result["error"])


@pytest.fixture
def worker():
    return Worker()


class FakeCoordinator:
    """A socket on loopback that plays the coordinator: behaviour(sock) runs on a thread for each connection."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.connections = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:  # (closed)
                return
            self.connections.append(sock)
            threading.Thread(target=self._play, args=(sock,), daemon=True).start()

    def _play(self, sock):
        try:
            self.behaviour(sock)
        except (OSError, EOFError):  # (the process under test closed the connection)
            pass

    def close(self):
        for sock in [self.listener, *self.connections]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def fake():
    made = []

    def make(behaviour):
        made.append(FakeCoordinator(behaviour))
        return made[-1]
    yield make
    for coordinator in made:
        coordinator.close()


@pytest.fixture
def outside_a_run(monkeypatch):
    """A process that may call initialize (and whose run's state is restored afterwards)."""
    for name, value in (("_started_alone", False), ("_setup", None), ("_finished", False)):
        monkeypatch.setattr(state, name, value)
    for variable in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "EMBER_DISTRIBUTED_AUTHKEY"):
        monkeypatch.delenv(variable, raising=False)


def silent(sock):
    """Accepts the connection and never answers."""


def closes(sock):
    sock.close()


def handshake_then(action):
    """Proves the key (as the coordinator does), then action(channel)."""
    def behaviour(sock):
        channel = state._accept(sock, KEY)
        if channel is not None:
            action(channel)
    return behaviour


def frozen(channel):
    """After the handshake: reads the requests, never answers."""
    while channel.receive(None):
        pass


def closes_on_request(channel):
    channel.receive(None)
    channel.sock.close()


def connect(coordinator):
    return state.CoordinatorStore.connect("127.0.0.1", coordinator.port, KEY, SLACK)


# ---- bounded waits -------------------------------------------------------------------------------------------------

def test_initialize_gives_up_on_a_coordinator_that_accepts_and_never_answers(fake, outside_a_run, worker):
    coordinator = fake(silent)  # (before: initialize waited for the handshake forever)
    message = worker.raises(TimeoutError, lambda: dist.initialize(coordinator.address, 2, 1, initialization_timeout=1,
                                                                  authkey=KEY), 1 + SLACK)
    assert f"no coordinator answered at {coordinator.address} within 1 s" in message, message
    assert "no greeting came" in message and not dist.is_initialized()


def test_initialize_gives_up_on_a_coordinator_that_freezes_after_the_handshake(fake, outside_a_run, worker):
    coordinator = fake(handshake_then(frozen))
    message = worker.raises(TimeoutError, lambda: dist.initialize(coordinator.address, 2, 1, initialization_timeout=1,
                                                                  authkey=KEY), 1 + SLACK)
    assert message.startswith(f"ember.distributed.initialize: the coordinator at {coordinator.address} did not "
                              "answer join (process_id=1) within"), message


def test_initialize_alone_times_out_in_the_barrier_and_frees_its_port(outside_a_run, worker):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    message = worker.raises(TimeoutError, lambda: dist.initialize(address, 2, 0, initialization_timeout=2,
                                                                  authkey=KEY), 2 + SLACK)
    assert f"only 1 of 2 processes reached the barrier 'initialize' at the coordinator {address}" in message
    with socket.create_server(("127.0.0.1", port)):  # (the coordinator it started is closed)
        pass


def test_shutdown_gives_up_on_a_frozen_coordinator(fake, outside_a_run, worker):
    coordinator = fake(handshake_then(frozen))  # (before: shutdown waited forever)
    state.configure(state.Setup(1, 2, coordinator.address, worker(lambda: connect(coordinator)), None, 1.0))
    message = worker.raises(TimeoutError, dist.shutdown, 1 + SLACK)
    assert message.startswith(f"ember.distributed.shutdown: the coordinator at {coordinator.address} did not answer "
                              "barrier 'shutdown' within"), message
    assert not dist.is_initialized()


def test_a_request_waits_no_longer_than_its_timeout_for_a_frozen_coordinator(fake, worker):
    store = worker(lambda: connect(fake(handshake_then(frozen))))
    assert "did not answer get b'k' within 0.5 s" in worker.raises(TimeoutError, lambda: store.get(b"k", 0.5),
                                                                   0.5 + SLACK)
    store.timeout_s = 0.5  # (put's and try_get's: initialize's initialization_timeout)
    assert "did not answer put b'k' within 0.5 s" in worker.raises(TimeoutError, lambda: store.put(b"k", b"v"),
                                                                   0.5 + SLACK)
    store.release()


def test_the_coordinator_drops_a_peer_that_does_not_prove_the_key_in_time(monkeypatch):
    monkeypatch.setattr(state, "HANDSHAKE_TIMEOUT_S", 0.5)
    coordinator = state.Coordinator("127.0.0.1", 0, KEY)
    try:
        with socket.create_connection(("127.0.0.1", coordinator.port), timeout=0.5 + SLACK) as sock:
            assert state._receive(sock, len(state._GREETING) + 32, None).startswith(state._GREETING)
            sock.settimeout(0.5 + SLACK)
            assert sock.recv(100) == b""  # (closed after HANDSHAKE_TIMEOUT_S)
    finally:
        coordinator.close()


# ---- a lost coordinator --------------------------------------------------------------------------------------------

def test_a_closed_coordinator_is_a_connection_error_naming_it(fake, outside_a_run, worker):
    coordinator = state.Coordinator("127.0.0.1", 0, KEY)
    store = worker(lambda: connect(coordinator))
    worker(lambda: store.put(b"k", b"v"))
    coordinator.close()  # (before: a bare EOFError)
    message = worker.raises(ConnectionError, lambda: store.get(b"k", 5), SLACK)
    assert message == (f"the coordinator at 127.0.0.1:{coordinator.port} closed the connection during get b'k' (has "
                       "process 0 exited?)"), message
    store.release()
    closing = fake(handshake_then(closes_on_request))
    state.configure(state.Setup(1, 2, closing.address, worker(lambda: connect(closing)), None, 5.0))
    message = worker.raises(ConnectionError, dist.shutdown, 5 + SLACK)
    assert message.startswith(f"ember.distributed.shutdown: the coordinator at {closing.address} closed the "
                              "connection during barrier 'shutdown'"), message


def test_a_killed_coordinator_process_is_a_connection_error_naming_it(worker):
    serve = ("import sys, time; from ember._runtime import distributed as d; "
             "c = d.Coordinator('127.0.0.1', 0, sys.argv[1].encode()); print(c.port, flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", serve, KEY.decode()], stdout=subprocess.PIPE, text=True,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        port = int(worker(process.stdout.readline, 3 * SLACK))
        store = worker(lambda: state.CoordinatorStore.connect("127.0.0.1", port, KEY, SLACK))
        worker(lambda: store.put(b"k", b"v"))
        process.send_signal(signal.SIGKILL)
        process.wait(SLACK)
        message = worker.raises(ConnectionError, lambda: store.try_get(b"k"), SLACK)
        assert f"the coordinator at 127.0.0.1:{port} closed the connection during try_get b'k'" in message, message
        # (the next request opens a new connection: nothing listens there any more)
        message = worker.raises(ConnectionError, lambda: store.try_get(b"k"), SLACK)
        assert f"the coordinator at 127.0.0.1:{port}, during try_get b'k': " in message, message
    finally:
        process.kill()
        process.wait()


def test_a_coordinator_that_closes_at_once_is_retried_until_the_timeout(fake, outside_a_run, worker):
    coordinator = fake(closes)  # (process 0 may be starting, or busy: initialize tries again)
    message = worker.raises(TimeoutError, lambda: dist.initialize(coordinator.address, 2, 1, initialization_timeout=1,
                                                                  authkey=KEY), 1 + SLACK)
    assert f"no coordinator answered at {coordinator.address} within 1 s" in message, message


# ---- authentication ------------------------------------------------------------------------------------------------

def raw_request(channel):
    """A request's bytes, read off the socket without checking them."""
    header = state._receive(channel.sock, 4, None)
    return header + state._receive(channel.sock, int.from_bytes(header, "big") + state._TAG_BYTES, None)


def changed(frame):
    """frame with one bit of its body flipped."""
    return frame[:-40] + bytes([frame[-40] ^ 1]) + frame[-39:]


def lying(how):
    """After the handshake, answers the first request with a message that is not the coordinator's next one."""
    def action(channel):
        request = raw_request(channel)
        first, second = channel.frame([b"ok", b"v1"]), channel.frame([b"ok", b"v2"])
        if how == "changed":
            channel.sock.sendall(changed(first))
        elif how == "reordered":
            channel.sock.sendall(second)
        elif how == "replayed":
            channel.sock.sendall(first)
            raw_request(channel)
            channel.sock.sendall(first)
        elif how == "reflected":
            channel.sock.sendall(request)  # (the process's own request, sent back)
        elif how == "of another connection":
            channel.sock.sendall(state._Channel(channel.sock, bytes(32), state._FROM_COORDINATOR,
                                                state._TO_COORDINATOR).frame([b"ok", b"v1"]))
        frozen(channel)
    return action


@pytest.mark.parametrize("how", ["changed", "reordered", "replayed", "reflected", "of another connection"])
def test_a_message_that_fails_authentication_is_refused_and_its_connection_closed(fake, how, worker):
    coordinator = fake(handshake_then(lying(how)))
    store = worker(lambda: connect(coordinator))
    if how == "replayed":
        assert worker(lambda: store.get(b"k", 5)) == b"v1"
    message = worker.raises(state.AuthenticationError, lambda: store.get(b"k", 5), 5 + SLACK)
    assert message.startswith(f"the coordinator at {coordinator.address}, during get b'k': a message failed "
                              "authentication"), message
    assert message.endswith("the connection is closed") and not store._client._channels


def test_a_peer_without_the_key_gets_nothing(fake, worker):
    coordinator = state.Coordinator("127.0.0.1", 0, KEY)
    try:
        message = worker.raises(state.AuthenticationError, lambda: state.CoordinatorStore.connect(
            "127.0.0.1", coordinator.port, b"another key, 16 bytes or more", SLACK), SLACK)
        assert f"the coordinator at 127.0.0.1:{coordinator.port} refused this process's authentication key" in message
    finally:
        coordinator.close()

    def impostor(sock):  # (claims to accept any key: the process checks the coordinator's proof)
        sock.sendall(state._GREETING + os.urandom(32))
        state._receive(sock, 64, None)
        sock.sendall(os.urandom(32))
    impostor = fake(impostor)
    message = worker.raises(state.AuthenticationError, lambda: connect(impostor), SLACK)
    assert f"the coordinator at {impostor.address} does not know this process's authentication key" in message
    stranger = fake(lambda sock: sock.sendall(b"HTTP/1.1 400 Bad Request\r\n" + bytes(64)))
    message = worker.raises(ConnectionError, lambda: connect(stranger), SLACK)
    assert f"at {stranger.address}, what answers there is not an ember.distributed coordinator" in message


def test_the_coordinator_uses_no_request_that_fails_authentication(worker):
    coordinator = state.Coordinator("127.0.0.1", 0, KEY)
    store = worker(lambda: connect(coordinator))
    try:
        for change in ("a bit of the body", "replayed", "too large"):
            channel = state._open("127.0.0.1", coordinator.port, KEY, time.monotonic() + SLACK)
            first = channel.frame([b"put", b"k", b"first"])
            if change == "a bit of the body":
                channel.sock.sendall(changed(first))
            elif change == "replayed":
                for message in (first, channel.frame([b"put", b"k", b"second"])):
                    channel.sock.sendall(message)
                    assert channel.receive(None) == [b"ok"]
                channel.sock.sendall(first)  # (the first put again, after the second)
            else:  # (a length over MAX_MESSAGE_BYTES: refused before any of it is read)
                channel.sock.sendall((state.MAX_MESSAGE_BYTES + 1).to_bytes(4, "big"))
            channel.sock.settimeout(SLACK)
            assert channel.sock.recv(100) == b"", change  # (closed, without an answer)
            channel.sock.close()
            assert worker(lambda: store.try_get(b"k")) == (None if change == "a bit of the body" else b"second")
    finally:
        store.release()
        coordinator.close()


# ---- message sizes -------------------------------------------------------------------------------------------------

def test_message_sizes_are_bounded_before_reading(fake, monkeypatch, worker):
    def huge(channel):
        channel.receive(None)
        channel.sock.sendall((2 ** 32 - 1).to_bytes(4, "big"))  # (and never the 4 GiB it announces)
        frozen(channel)
    coordinator = fake(handshake_then(huge))
    store = worker(lambda: connect(coordinator))
    message = worker.raises(ConnectionError, lambda: store.get(b"k", 5), 5 + SLACK)
    assert "a message of 4294967295 bytes, over the limit of" in message and "during get b'k'" in message
    monkeypatch.setattr(state, "MAX_MESSAGE_BYTES", 1024)
    coordinator = state.Coordinator("127.0.0.1", 0, KEY)
    try:
        store = worker(lambda: connect(coordinator))
        message = worker.raises(ValueError, lambda: store.put(b"k", bytes(1024)), SLACK)
        assert re.fullmatch(r"a message of 10\d\d bytes is over the limit of 1024 bytes .*", message), message
        worker(lambda: store.put(b"k", b"small"))  # (nothing was sent: the connection still works)
        assert worker(lambda: store.get(b"k", 5)) == b"small"
    finally:
        coordinator.close()
