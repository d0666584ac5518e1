"""Backends: one PJRT client per plugin (the embedded XLA CPU plugin, a CUDA plugin when installed, or any plugin
named by EMBER_PJRT_PLUGIN), the default one, and their devices."""
from __future__ import annotations

import atexit
import os
import threading
import warnings

from ember._core.cache import clear_all_caches
from ember._core.config import config
from ember._hlo.lower import set_platform_provider
from ember._runtime import callbacks as _callbacks, distributed as _distributed, ffi as _ffi, pjrt as _pjrt

_client_lock = threading.Lock()
_clients: dict[str, _pjrt.Client] = {}  # one per plugin


def _close_clients_at_exit() -> None:
    """Destroy the PJRT clients when the interpreter exits, before the plugins' own static destructors run. A
    program may end right after dispatching work (a training loop that never reads its last result): the
    client's destructor waits for those executions, where otherwise the plugin's worker threads would run on
    into torn-down globals and the process would die of a segfault at exit. Buffers and executables still alive
    then see their client closed and destroy nothing. (Registered at import, so it runs after the atexit
    handlers of the programs that use ember.) A program blocked in a host callback would never end, and the
    client's destructor would wait for it forever: when such programs are still executing after
    callbacks.EXIT_WAIT_S seconds, the clients are left to the OS, with a warning."""
    blocked = _callbacks.blocked_at_exit()
    if blocked:
        warnings.warn(f"ember: at exit, {blocked} program(s) still blocked in a host callback after "
                      f"{_callbacks.EXIT_WAIT_S:g} s; exiting without waiting for them (their PJRT clients are left "
                      "to the OS)", RuntimeWarning, stacklevel=1)
        return
    for client in list(_clients.values()):
        try:
            client.close()
        except Exception:  # noqa: BLE001 - nothing to report to at exit
            pass
    # A process that goes on after its exit handlers ran (a test calling atexit._run_exitfuncs, as chex's do)
    # starts new clients at its next computation, as JAX starts new backends; arrays of the old ones say closed.
    _clients.clear()
    clear_all_caches()


atexit.register(_close_clients_at_exit)


def forget_clients() -> None:
    """Start new PJRT clients at the next computation (jax.extend.backend.clear_backends): the clients started so
    far are forgotten, not closed (arrays and programs on them keep them alive, and keep working), and every
    cache of compiled programs is emptied; options read when a backend starts (the CPU device count) are read
    again."""
    _callbacks.effects_barrier()
    with _client_lock:
        _clients.clear()
    clear_all_caches()


def _plugin_path(platform: str | None) -> str:
    """The plugin of a platform (JAX's RuntimeErrors for one this machine lacks, with ember's advice)."""
    given = platform
    platform = (platform or os.environ.get("EMBER_PLATFORM") or "").lower() or None
    if platform is None and not os.environ.get("EMBER_PJRT_PLUGIN"):
        platform, given = _configured_platform()
    if platform is None:
        if os.environ.get("EMBER_PJRT_PLUGIN"):
            return _pjrt.default_plugin_path()
        return _pjrt.find_cuda_plugin() or _pjrt.default_plugin_path()
    if platform == "cpu":
        return _pjrt.cpu_plugin_path()
    if platform in ("cuda", "gpu"):
        cuda = _pjrt.find_cuda_plugin()
        if cuda is None:
            raise RuntimeError(f"Unknown backend: {platform!r} requested, but no platforms that are instances of "
                               f"{platform} are present. Platforms present are: cpu{_where(given)} (no CUDA PJRT "
                               "plugin is installed: pip install jax-cuda12-pjrt, or set EMBER_PJRT_PLUGIN to a "
                               "plugin .so)")
        return cuda
    if platform == "tpu":
        raise RuntimeError(f"Backend 'tpu' failed to initialize: ember has no TPU PJRT plugin{_where(given)}. "
                           "Available backends are ['cpu']")
    raise RuntimeError(f"Unknown backend {platform}{_where(given)}. Available backends are ['cpu'] (ember's "
                       "platforms: 'cpu', 'cuda' or 'gpu' with a CUDA PJRT plugin)")


def _where(given: str | None) -> str:
    if given and given.endswith(("_platforms)", "_platform_name)")):  # (an option named it: _configured_platform)
        return f" (asked for by {given})"
    return "" if given else " (asked for by EMBER_PLATFORM)"


def _configured_platform() -> tuple[str | None, str | None]:
    """The default backend's platform the options name (jax_platforms' first entry, else jax_platform_name), and
    how errors should say it was asked for."""
    platforms = config.read_canonical("platforms")
    if platforms:
        return platforms.split(",")[0].strip().lower() or None, f"{platforms!r} (jax_platforms)"
    name = config.read_canonical("platform_name")
    return (name.lower(), f"{name!r} (jax_platform_name)") if name else (None, None)


def _platform_option_changed(value: str | None) -> None:
    """jax_platforms / jax_platform_name name the default backend when it starts: naming another platform once it
    runs has no effect (as in JAX, whose backends start once), so it warns."""
    client = _clients.get("default")
    wanted = (value or "").split(",")[0].strip().lower()
    if client is not None and wanted and {"gpu": "cuda"}.get(wanted, wanted) != client.platform_name:
        warnings.warn(f"ember.config: the default backend ({client.platform_name}) has already started, so the "
                      f"platform {value!r} takes effect only in a new process (set it before the first "
                      "computation)", UserWarning, stacklevel=4)


config.on_change("platforms", _platform_option_changed)
config.on_change("platform_name", _platform_option_changed)


def get_client(platform: str | None = None) -> _pjrt.Client:
    """The PJRT client of a platform ("cpu", "cuda"); by default the plugin named by EMBER_PJRT_PLUGIN, else an
    installed CUDA plugin, else the embedded XLA CPU plugin (EMBER_PLATFORM=cpu|cuda picks the default)."""
    if _forked_while_running:
        raise RuntimeError(_FORKED_CHILD)
    if not platform:  # (the default is set below once its client exists: while another thread creates it, this
        client = _clients.get("default")  # call finds the plugin's path and waits on the lock in _client_for)
        if client is not None:
            return client
    path = _plugin_path(platform)
    try:
        client = _client_for(path)
    except _pjrt.PjrtError as err:
        auto_cuda = platform is None and not os.environ.get("EMBER_PLATFORM") and \
            not os.environ.get("EMBER_PJRT_PLUGIN")
        if not auto_cuda:
            raise
        warnings.warn(f"ember: the CUDA PJRT plugin {path} could not start ({err}); using the CPU plugin",
                      RuntimeWarning, stacklevel=2)
        client = _client_for(_pjrt.cpu_plugin_path())
    if platform is None:
        _clients["default"] = client
    return client


# XLA options the plugin reads from XLA_FLAGS once, at its first compile in the process (see shared/docs/pjrt.md):
# added to the user's XLA_FLAGS unless the user set the same flag.
# - fast_min_max=false: max/min (and reductions with them) propagate NaN, as numpy and JAX do; the plugin's
#   default drops it.
# - ynn_fusion_type=reduce: reductions (sum, softmax's max and sum, ...) become YNNPACK fusions, as jaxlib's
#   default (its list also names dot and convolution, which this plugin's YNNPACK does not take as well: "dot"
#   slows the MLP down and "dot,eltwise,reduce" crashes the plugin, so a user's list is kept as given).
_XLA_FLAGS = {"--xla_cpu_enable_fast_min_max": "false", "--xla_cpu_experimental_ynn_fusion_type": "reduce"}


def _set_xla_flags() -> None:
    flags = os.environ.get("XLA_FLAGS", "").split()
    given = {flag.split("=", 1)[0] for flag in flags}
    flags += [f"{name}={value}" for name, value in _XLA_FLAGS.items() if name not in given]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    # The plugin logs its options at INFO level to stderr (absl, before any log set-up): only warnings and errors.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def _client_for(path: str) -> _pjrt.Client:
    client = _clients.get(path)
    if client is None:
        with _client_lock:
            client = _clients.get(path)
            if client is None:
                # One CPU device by default, as JAX: the plugin's thread pool has max(cores, devices) threads, and
                # its default of 4 devices oversubscribes small machines. The count is settled now, as JAX's CPU
                # client reads XLA_FLAGS' device count when it is created (the plugin ignores that flag).
                cpu = path == _pjrt.cpu_plugin_path()
                options = {"cpu_device_count": config.read_at_backend_start("num_cpu_devices")} if cpu else {}
                _set_xla_flags()
                # In a multi-process run (ember.distributed.initialize), a plugin whose client spans the processes
                # gets node_id, num_nodes and the run's key-value store.
                run_options, kv_store = _distributed.client_setup(cpu)
                client = _clients[path] = _pjrt.Client(_pjrt.Plugin(path), {**options, **run_options}, kv_store)
                _ffi.attach(client.plugin)  # ember's own custom-call handlers (LAPACK kernels)
    return client


def _check_num_cpu_devices(count: int) -> None:
    """Refuse a device count the started CPU backend does not have, as JAX refuses a late jax_num_cpu_devices (a
    RuntimeError, with JAX's words in the message); the count it has is accepted."""
    started = [c for c in _clients.values() if c.platform_name == "cpu" and c.handle]
    if started and len(started[0].devices) != count:
        raise RuntimeError(f"ember.config: num_cpu_devices={count} comes too late: the CPU backend has started "
                           f"with {len(started[0].devices)} device(s). jax_num_cpu_devices should be updated before "
                           "backends are initialized, i.e. before the first computation: update it right after "
                           "`import ember`, or set $EMBER_NUM_CPU_DEVICES or "
                           "XLA_FLAGS=--xla_force_host_platform_device_count=N before then")


config.on_change("num_cpu_devices", _check_num_cpu_devices)


def _default_platform() -> str | None:
    """The platform programs are lowered for: the default backend's; None (portable forms) where there is no
    backend to ask (a forked child of a process that ran computations, a plugin that does not start)."""
    try:
        return get_client().platform_name
    except Exception:  # noqa: BLE001 (lowering itself needs no backend: the plain forms serve anywhere)
        return None


set_platform_provider(_default_platform)
# the option changes how sums are lowered: programs lowered before are dropped (lowered again when next called)
config.on_change("cpu_backend_forms", lambda value: clear_all_caches())
# programs compiled (and eager operations cached) for one default device keep it: a new default drops them
config.on_change("default_device", lambda value: clear_all_caches())


def default_device() -> _pjrt.Device:
    """The device computations run on when no argument is committed to one: jax_default_device's (a Device, or a
    platform's first device), else the default backend's first device."""
    chosen = config.read_canonical("default_device")
    if chosen is None:
        return get_client().devices[0]
    if isinstance(chosen, str):
        return get_client(chosen.lower()).devices[0]
    return chosen


def devices(platform: str | None = None) -> list[_pjrt.Device]:
    """The addressable devices of a platform (by default, of the default backend)."""
    return list(get_client(platform).devices)


_FORKED = ("was created before os.fork(), in the parent process; arrays and compiled programs do not cross a "
           "fork")
_FORKED_CHILD = (
    "ember cannot run in this process: it was forked (os.fork, or multiprocessing's 'fork' start method) from a "
    "process that had already started XLA, whose threads and locks do not survive a fork (a new XLA client would "
    "abort the process). Start workers with multiprocessing.get_context('spawn') or 'forkserver', or fork before "
    "the first ember computation.")
_forked_while_running = False


def _after_fork_in_child() -> None:
    """In a child forked after XLA started, the parent's PJRT clients are unusable (their threads did not survive
    the fork) and must not even be destroyed, and a new client would abort the process inside XLA (a lock held
    by a thread that did not survive): abandon the clients, forget every cached program, and make every later
    ember computation in the child raise a RuntimeError that says why. A child forked before the first
    computation is unaffected. Locks another thread of the parent may have held are replaced."""
    global _client_lock, _forked_while_running
    _client_lock = threading.Lock()
    if _clients:
        _forked_while_running = True
    for client in _clients.values():
        client.abandon(_FORKED)
    _clients.clear()
    clear_all_caches()


os.register_at_fork(after_in_child=_after_fork_in_child)
