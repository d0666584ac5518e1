"""This process's place in a multi-process run (ember.distributed.initialize): its process id, the number of
processes, and the key-value store they share, served by process 0 at the coordinator address.

The store is a table that process 0 serves over TCP (Coordinator); every process, process 0 included, reaches it
through a CoordinatorStore, which opens one connection per thread (so the plugin's threads may wait at once). A get
waits on the coordinator for its key, up to a timeout. docs/security.md ("Distributed store") says what it trusts.

The protocol, in full (no pickles: the requests are five operations on bytes and numbers, so a peer, even one holding
the key, can read and write the table and nothing else):

- handshake (fixed sizes, so nothing unauthenticated has a length to believe): the coordinator sends _GREETING and a
  random nonce S; the process answers a random nonce C and HMAC(key, "client", S, C); the coordinator checks it and
  answers HMAC(key, "coordinator", S, C) (or 32 zero bytes: refused). Both sides have proved the key on fresh
  nonces; the connection's session key is HMAC(key, "session", S, C).
- then each message is a length (4 bytes, at most MAX_MESSAGE_BYTES, checked before the body is read), a body of
  length-prefixed fields, and HMAC(session key, direction, sequence number, length, body): a message changed, cut,
  replayed, reordered or reflected back fails, and the connection is closed without its body being used.
- a request is [operation, arguments...], numbers in ASCII; an answer is [b"ok", values...], [b"none"] (no value) or
  [b"refused", reason] (join's ValueError).

Every wait is bounded: a request waits for its answer at most its timeout (get and barrier: their own; put and
try_get: the store's, initialize's initialization_timeout), the coordinator waits HANDSHAKE_TIMEOUT_S for a new
connection to prove the key (and as long to deliver an answer). A request that fails (a timeout, a lost
connection, a message that fails authentication) closes its connection: the thread's next request opens another.
Errors name the coordinator's host:port and the request.

Backends read client_setup when they create a PJRT client: a plugin whose client spans processes (a CUDA plugin)
gets the create options node_id and num_nodes and the store (its keys prefixed with "pjrt:"). The xla-cpu-pjrt
plugin gets neither: it reads no create option but cpu_device_count and never calls the store, and newer XLA CPU
plugins reject unknown option names (docs/distributed.md)."""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
import secrets
import socket
import struct
import threading
import time
from multiprocessing import AuthenticationError

# The shared key's least length: the handshake's nonces and HMACs cross the network, so whoever records one can test
# guesses of the key offline; 16 random bytes (128 bits) are beyond that, a short password is not.
MIN_KEY_BYTES = 16
MAX_MESSAGE_BYTES = 64 << 20  # a message's body (a value put or got, with its key): larger ones are refused unread
HANDSHAKE_TIMEOUT_S = 30.0  # the coordinator's wait for a new connection's proof of the key, and to deliver an answer
_MAX_HANDSHAKES = 64  # connections at once that have not proved the key yet; more are closed at once
_CONNECT_RETRY_S = 0.05
_GREETING = b"ember.distributed/1\n"
_NONCE_BYTES = _TAG_BYTES = 32
_REFUSED = bytes(_TAG_BYTES)
_TO_COORDINATOR, _FROM_COORDINATOR = b"to coordinator\0", b"from coordinator\0"
_LENGTH = struct.Struct(">I")


class _Table:
    """The coordinator's table: values by key, the processes that joined, and barrier counts (process 0 only)."""

    def __init__(self) -> None:
        self._values: dict[bytes, bytes] = {}
        self._joined: dict[int, int] = {}  # process id -> the process count it was started with
        self._arrived: dict[str, int] = {}  # barrier name -> processes arrived
        self._changed = threading.Condition()

    def put(self, key: bytes, value: bytes) -> None:
        with self._changed:
            self._values[bytes(key)] = bytes(value)
            self._changed.notify_all()

    def get(self, key: bytes, timeout_s: float) -> bytes | None:
        with self._changed:
            self._changed.wait_for(lambda: key in self._values, timeout_s)
            return self._values.get(key)

    def try_get(self, key: bytes) -> bytes | None:
        with self._changed:
            return self._values.get(key)

    def join(self, process_id: int, num_processes: int) -> None:
        """Record a process; a second process with its id, or one started with another process count, is refused."""
        with self._changed:
            counts = set(self._joined.values()) | {num_processes}
            if process_id in self._joined:
                raise ValueError(f"two processes were started with process_id={process_id}")
            if len(counts) > 1:
                raise ValueError(f"the processes were started with different num_processes: {sorted(counts)}")
            self._joined[process_id] = num_processes
            self._changed.notify_all()

    def barrier(self, name: str, count: int, timeout_s: float) -> int:
        """Wait until count processes have arrived at the barrier name; returns how many have (fewer: timed out)."""
        with self._changed:
            self._arrived[name] = self._arrived.get(name, 0) + 1
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._arrived[name] >= count, timeout_s)
            return self._arrived[name]


class _ProtocolError(Exception):
    """A peer broke the protocol: a greeting that is not ember's, a message over MAX_MESSAGE_BYTES, a malformed
    request or answer."""


def _tag(key: bytes, *parts: bytes) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(part)
    return mac.digest()


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


def _send(sock: socket.socket, data: bytes, deadline: float | None) -> None:
    sock.settimeout(_remaining(deadline))  # (sendall's timeout bounds the whole send)
    sock.sendall(data)


def _receive(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    """Exactly size bytes (EOFError if the peer closes first, TimeoutError at the deadline)."""
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        sock.settimeout(_remaining(deadline))
        count = sock.recv_into(view[got:])
        if not count:
            raise EOFError("the connection was closed")
        got += count
    return bytes(data)


def _encode(fields: list[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(field)) + field for field in fields)


def _decode(body: bytes) -> list[bytes]:
    fields, at = [], 0
    while at < len(body):
        if at + _LENGTH.size > len(body):
            raise _ProtocolError("a malformed message")
        (size,), at = _LENGTH.unpack_from(body, at), at + _LENGTH.size
        if at + size > len(body):
            raise _ProtocolError("a malformed message")
        fields.append(body[at:at + size])
        at += size
    return fields


class _Channel:
    """One connection after the handshake: each message carries an HMAC, under the connection's session key, of its
    direction, its sequence number in that direction, its length and its body."""

    def __init__(self, sock: socket.socket, session_key: bytes, sending: bytes, receiving: bytes):
        self.sock = sock
        self._key, self._sending, self._receiving = session_key, sending, receiving
        self._sent = self._received = 0

    def send(self, fields: list[bytes], deadline: float | None) -> None:
        _send(self.sock, self.frame(fields), deadline)

    def frame(self, fields: list[bytes]) -> bytes:
        """The next message's bytes (ValueError, before any is sent, for a body over MAX_MESSAGE_BYTES)."""
        body = _encode(fields)
        if len(body) > MAX_MESSAGE_BYTES:
            raise ValueError(f"a message of {len(body)} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes "
                             "(ember._runtime.distributed.MAX_MESSAGE_BYTES)")
        header = _LENGTH.pack(len(body))
        tag = _tag(self._key, self._sending, self._sent.to_bytes(8, "big"), header, body)
        self._sent += 1
        return header + body + tag

    def receive(self, deadline: float | None) -> list[bytes]:
        header = _receive(self.sock, _LENGTH.size, deadline)
        (size,) = _LENGTH.unpack(header)
        if size > MAX_MESSAGE_BYTES:  # (before reading it: the length is not authenticated yet)
            raise _ProtocolError(f"a message of {size} bytes, over the limit of {MAX_MESSAGE_BYTES} "
                                 "(ember._runtime.distributed.MAX_MESSAGE_BYTES)")
        body = _receive(self.sock, size, deadline)
        tag = _receive(self.sock, _TAG_BYTES, deadline)
        if not hmac.compare_digest(tag, _tag(self._key, self._receiving, self._received.to_bytes(8, "big"), header,
                                             body)):
            raise AuthenticationError("a message failed authentication (changed, replayed or reordered on the way, "
                                      "or not from this connection's peer)")
        self._received += 1
        return _decode(body)


def _open(host: str, port: int, key: bytes, deadline: float) -> _Channel:
    """A connection to the coordinator, after the handshake (the module docstring)."""
    sock = socket.create_connection((host, port), timeout=_remaining(deadline))
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            greeting = _receive(sock, len(_GREETING) + _NONCE_BYTES, deadline)
        except TimeoutError:
            raise TimeoutError("a connection was accepted, but no greeting came") from None
        except EOFError:
            raise EOFError("the connection was closed before the greeting") from None
        if not greeting.startswith(_GREETING):
            raise _ProtocolError("what answers there is not an ember.distributed coordinator (or is one of another "
                                 "ember version): its greeting is not ember's")
        theirs, mine = greeting[len(_GREETING):], secrets.token_bytes(_NONCE_BYTES)
        _send(sock, mine + _tag(key, b"client\0", theirs, mine), deadline)
        proof = _receive(sock, _TAG_BYTES, deadline)
        if proof == _REFUSED:
            raise AuthenticationError("refused this process's authentication key: give every process the same key "
                                      "($EMBER_DISTRIBUTED_AUTHKEY)")
        if not hmac.compare_digest(proof, _tag(key, b"coordinator\0", theirs, mine)):
            raise AuthenticationError("does not know this process's authentication key: it is not this run's "
                                      "coordinator")
        return _Channel(sock, _tag(key, b"session\0", theirs, mine), _TO_COORDINATOR, _FROM_COORDINATOR)
    except BaseException:
        sock.close()
        raise


def _accept(sock: socket.socket, key: bytes) -> _Channel | None:
    """The coordinator's side of the handshake: a channel, or None for a peer without the key."""
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    mine = secrets.token_bytes(_NONCE_BYTES)
    _send(sock, _GREETING + mine, deadline)
    answer = _receive(sock, _NONCE_BYTES + _TAG_BYTES, deadline)
    theirs, proof = answer[:_NONCE_BYTES], answer[_NONCE_BYTES:]
    if not hmac.compare_digest(proof, _tag(key, b"client\0", mine, theirs)):
        _send(sock, _REFUSED, deadline)
        return None
    _send(sock, _tag(key, b"coordinator\0", mine, theirs), deadline)
    return _Channel(sock, _tag(key, b"session\0", mine, theirs), _FROM_COORDINATOR, _TO_COORDINATOR)


def _peer(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _integer(field: bytes) -> int:
    if not field.isdigit() or len(field) > 18:
        raise _ProtocolError(f"a malformed number {field[:20]!r}")
    return int(field)


def _seconds(field: bytes) -> float:
    try:
        seconds = float(field.decode("ascii"))
    except ValueError:
        raise _ProtocolError(f"a malformed timeout {field[:20]!r}") from None
    if not 0 <= seconds < math.inf:
        raise _ProtocolError(f"a timeout of {seconds} s")
    return seconds


def _answer(table: _Table, request: list[bytes]) -> list[bytes]:
    """What the coordinator answers a request (the module docstring)."""
    operation, arguments = (request[0], request[1:]) if request else (b"", [])
    if operation == b"put" and len(arguments) == 2:
        table.put(arguments[0], arguments[1])
        return [b"ok"]
    if operation in (b"get", b"try_get") and len(arguments) == (2 if operation == b"get" else 1):
        value = table.get(arguments[0], _seconds(arguments[1])) if operation == b"get" else \
            table.try_get(arguments[0])
        return [b"none"] if value is None else [b"ok", value]
    if operation == b"join" and len(arguments) == 2:
        try:
            table.join(_integer(arguments[0]), _integer(arguments[1]))
        except ValueError as err:
            return [b"refused", str(err).encode()]
        return [b"ok"]
    if operation == b"barrier" and len(arguments) == 3:
        name = arguments[0].decode("utf-8", "replace")
        return [b"ok", str(table.barrier(name, _integer(arguments[1]), _seconds(arguments[2]))).encode()]
    raise _ProtocolError(f"an unknown request {operation[:20]!r} of {len(arguments)} arguments")


class Coordinator:
    """Process 0's service: the table, served on daemon threads (one per connection) until the process exits or
    close is called."""

    def __init__(self, host: str, port: int, authkey: bytes):
        self._key = bytes(authkey)
        self._table = _Table()
        try:
            self._listener = socket.create_server(
                (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=128)
        except OSError as err:
            raise OSError(f"ember.distributed.initialize: process 0 cannot serve the coordinator at {host}:{port}: "
                          f"{err}") from None
        self.host: str = self._listener.getsockname()[0]
        self.port: int = self._listener.getsockname()[1]
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._handshakes = threading.BoundedSemaphore(_MAX_HANDSHAKES)
        self._closed = False
        threading.Thread(target=self._accept_forever, name="ember.distributed coordinator", daemon=True).start()

    def close(self) -> None:
        """Stop serving: close the listening socket and every connection (as the process's exit does)."""
        with self._lock:
            self._closed = True
            sockets = [self._listener, *self._connections]
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # (wakes the threads waiting in accept or recv)
            except OSError:  # (not connected)
                pass
            sock.close()

    def _accept_forever(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                if self._closed:
                    return
                time.sleep(_CONNECT_RETRY_S)  # (out of descriptors, say: try again)
                continue
            if not self._handshakes.acquire(blocking=False):
                sock.close()  # (too many connections that have not proved the key)
                continue
            threading.Thread(target=self._serve, args=(sock,), name="ember.distributed connection",
                             daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        """Serve one connection: the handshake (HANDSHAKE_TIMEOUT_S), then its requests in order, until the peer
        closes it or breaks the protocol (then it is closed: nothing of a message that failed is used)."""
        with self._lock:
            closed = self._closed
            self._connections.add(sock)
        try:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                channel = None if closed else _accept(sock, self._key)
            finally:
                self._handshakes.release()
            while channel is not None:
                request = channel.receive(None)  # (an idle process may send its next request much later)
                channel.send(_answer(self._table, request), time.monotonic() + HANDSHAKE_TIMEOUT_S)
        except (OSError, EOFError, AuthenticationError, _ProtocolError, ValueError):
            pass  # (the peer left, stalled or broke the protocol: its connection closes)
        finally:
            with self._lock:
                self._connections.discard(sock)
            sock.close()


class _Client:
    """A process's connections to the coordinator: one per thread, opened on the thread's first request. A request
    that fails closes its connection (its sequence numbers can no longer be trusted to match)."""

    def __init__(self, host: str, port: int, key: bytes, first: _Channel):
        self.peer = _peer(host, port)
        self._host, self._port, self._key = host, port, key
        self._local = threading.local()
        self._local.channel = first
        self._channels = {first}
        self._lock = threading.Lock()
        self._released = False

    def request(self, what: str, fields: list[bytes], timeout_s: float) -> list[bytes]:
        """The coordinator's answer to a request, within timeout_s; what names the request in errors."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        channel = getattr(self._local, "channel", None)
        if self._released:
            raise ConnectionError(f"the connection to the coordinator at {self.peer} was closed (shutdown): {what}")
        try:
            if channel is None:
                channel = self._local.channel = _open(self._host, self._port, self._key, deadline)
                with self._lock:
                    self._channels.add(channel)
            channel.send(fields, deadline)
            answer = channel.receive(deadline)
            if not answer or answer[0] not in (b"ok", b"none", b"refused"):
                raise _ProtocolError("a malformed answer")
        except ValueError:  # (too large to send: nothing was sent)
            raise
        except BaseException as err:
            self._drop(channel)
            if isinstance(err, TimeoutError):
                raise TimeoutError(f"the coordinator at {self.peer} did not answer {what} within {timeout_s:g} "
                                   "s") from None
            if isinstance(err, (EOFError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
                raise ConnectionError(f"the coordinator at {self.peer} closed the connection during {what} (has "
                                      "process 0 exited?)") from None
            if isinstance(err, AuthenticationError):
                raise AuthenticationError(f"the coordinator at {self.peer}, during {what}: {err}; the connection is "
                                          "closed") from None
            if isinstance(err, (OSError, _ProtocolError)):
                raise ConnectionError(f"the coordinator at {self.peer}, during {what}: {err}") from None
            raise
        if answer[0] == b"refused":
            raise ValueError(b" ".join(answer[1:]).decode(errors="replace"))
        return answer

    def _drop(self, channel: _Channel | None) -> None:
        if channel is not None:
            channel.sock.close()
            with self._lock:
                self._channels.discard(channel)
        self._local.channel = None

    def release(self) -> None:
        """Close every connection; later requests raise ConnectionError."""
        with self._lock:
            self._released = True
            channels, self._channels = self._channels, set()
        for channel in channels:
            channel.sock.close()


def _server_wait(timeout_s: float) -> bytes:
    """How long the coordinator waits in a get or barrier of timeout_s: up to a second less (half of a short one), so
    that its answer arrives before the process stops waiting for it."""
    return repr(max(0.0, timeout_s - min(1.0, timeout_s / 2))).encode()


class CoordinatorStore:
    """A process's view of the coordinator's table, as PJRT's key-value store wants it (get waits, try_get does
    not, put), plus the join and barriers of initialize and shutdown. Keys and values are bytes; keys are prefixed
    with this view's namespace. timeout_s: how long put, try_get and join wait for the coordinator's answer (get
    and barrier wait their own timeout, the coordinator's answer included)."""

    def __init__(self, client: _Client, namespace: bytes = b"", timeout_s: float = 300.0):
        self._client = client
        self._namespace = namespace
        self.timeout_s = float(timeout_s)

    @classmethod
    def connect(cls, host: str, port: int, authkey: bytes, timeout_s: float) -> CoordinatorStore:
        """Connect to the coordinator, retrying until it listens (process 0 may start later) or timeout_s passes;
        the store's requests then wait timeout_s for their answers."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return cls(_Client(host, port, authkey, _open(host, port, authkey, deadline)), timeout_s=timeout_s)
            except AuthenticationError as err:
                raise AuthenticationError(f"ember.distributed.initialize: the coordinator at {_peer(host, port)} "
                                          f"{err}") from None
            except _ProtocolError as err:
                raise ConnectionError(f"ember.distributed.initialize: at {_peer(host, port)}, {err}") from None
            except (OSError, EOFError) as err:  # (not listening yet, or busy: try again until the deadline)
                if isinstance(err, TimeoutError) or time.monotonic() + _CONNECT_RETRY_S > deadline:
                    raise TimeoutError(
                        f"ember.distributed.initialize: no coordinator answered at {_peer(host, port)} within "
                        f"{timeout_s:g} s (process 0 serves it; is it running, and is the address reachable?): "
                        f"{err or type(err).__name__}") from None
            time.sleep(_CONNECT_RETRY_S)

    def release(self) -> None:
        """Close this process's connections to the coordinator (every view's)."""
        self._client.release()

    def namespaced(self, prefix: bytes) -> CoordinatorStore:
        """The same table, with every key prefixed with prefix (PJRT asks each user of a store to avoid collisions)."""
        return CoordinatorStore(self._client, self._namespace + prefix, self.timeout_s)

    def get(self, key: bytes, timeout_s: float) -> bytes:
        """The value of key, waiting up to timeout_s (TimeoutError) for a process to put it."""
        timeout_s = float(timeout_s)
        answer = self._client.request(f"get {bytes(key)!r}", [b"get", self._namespace + bytes(key),
                                                              _server_wait(timeout_s)], timeout_s)
        if answer[0] == b"none":
            raise TimeoutError(f"key {bytes(key)!r} was not set within {timeout_s:g} s")
        return answer[1]

    def try_get(self, key: bytes, timeout_s: float | None = None) -> bytes | None:
        """The value of key, or None; timeout_s: for the answer (default: the store's)."""
        answer = self._client.request(f"try_get {bytes(key)!r}", [b"try_get", self._namespace + bytes(key)],
                                      self.timeout_s if timeout_s is None else timeout_s)
        return None if answer[0] == b"none" else answer[1]

    def put(self, key: bytes, value: bytes, timeout_s: float | None = None) -> None:
        """Set key to value; timeout_s: for the answer (default: the store's)."""
        self._client.request(f"put {bytes(key)!r}", [b"put", self._namespace + bytes(key), bytes(value)],
                             self.timeout_s if timeout_s is None else timeout_s)

    def join(self, process_id: int, num_processes: int, timeout_s: float) -> None:
        self._client.request(f"join (process_id={process_id})", [b"join", str(process_id).encode(),
                                                                  str(num_processes).encode()], timeout_s)

    def barrier(self, name: str, count: int, timeout_s: float) -> None:
        timeout_s = float(timeout_s)
        answer = self._client.request(f"barrier {name!r}", [b"barrier", name.encode(), str(count).encode(),
                                                             _server_wait(timeout_s)], timeout_s)
        arrived = int(answer[1])
        if arrived < count:
            raise TimeoutError(f"only {arrived} of {count} processes reached the barrier {name!r} at the coordinator "
                               f"{self._client.peer} within {timeout_s:g} s")


@dataclasses.dataclass(frozen=True)
class Setup:
    """This process's place in a multi-process run."""
    process_id: int
    num_processes: int
    coordinator_address: str
    store: CoordinatorStore
    coordinator: Coordinator | None  # (process 0's service; None elsewhere)
    shutdown_timeout_s: float


_setup: Setup | None = None
_finished = False  # a run ended in this process (shutdown): there is no second one
_started_alone = False  # a client of a plugin that could span processes started before initialize


def configure(setup: Setup | None, finished: bool = False) -> None:
    """Record this process's multi-process set-up; with None, forget it (finished: at the end of the run)."""
    global _setup, _finished
    _setup = setup
    _finished = _finished or finished


def current() -> Setup | None:
    return _setup


def finished() -> bool:
    """Whether this process has left a run (shutdown): process 0's coordinator still holds the address."""
    return _finished


def started_alone() -> bool:
    """Whether a client of a plugin that could span processes (not the CPU plugin) started outside a run: too early
    for initialize, whose options it did not get."""
    return _started_alone


def process_index() -> int:
    return _setup.process_id if _setup is not None else 0


def process_count() -> int:
    return _setup.num_processes if _setup is not None else 1


def client_setup(cpu_plugin: bool) -> tuple[dict[str, int], CoordinatorStore | None]:
    """The create options and key-value store for a new PJRT client of a plugin: node_id, num_nodes and the store
    for a plugin that takes them (a CUDA plugin) once initialize has run; nothing for the xla-cpu-pjrt plugin,
    which has no cross-process collectives (see the module docstring)."""
    global _started_alone
    if _setup is None or cpu_plugin:
        _started_alone = _started_alone or not cpu_plugin
        return {}, None
    return {"node_id": _setup.process_id, "num_nodes": _setup.num_processes}, _setup.store.namespaced(b"pjrt:")
