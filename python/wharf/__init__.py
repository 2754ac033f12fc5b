"""wharf — a parameter server over a kernel-bypass (DPDK) TCP stack, for Python.

One script serves as a server or trains as a worker, as Paddle's fleet scripts do:

    import numpy as np, wharf
    wharf.init(model="model.json")          # role and cluster: TF_CONFIG, Paddle's variables,
                                            # WHARF_*, .endpoint_map, or keyword arguments
    emb = wharf.table("emb")                # or wharf.sparse_table("emb", dim=8, lr=0.05)
    if wharf.is_server():
        wharf.run_server()                  # until wharf.stop(), a shutdown command or a signal
    else:
        keys = np.array([1, 7, 42], dtype=np.uint64)
        rows = emb.pull(keys)               # float32 (3, 8), written in place by the library
        emb.push(keys, grads)               # the servers apply their optimizer
        wharf.barrier(wharf.step())         # sync mode: the step this worker is in
        wharf.stop()

Arrays go through the buffer protocol both ways with no copy: keys are 1-D C-contiguous
uint64, rows are C-contiguous float32 of shape (n, dim) ((n,) when dim is 1), a dense table
is any float32 array of rows * dim elements; out= arrays are written in place and returned.
Anything else is refused with TypeError or ValueError naming the argument. Every call that
waits releases the GIL, and any thread may call; the *_async forms return a Request whose
wait() returns the result (its arrays are held until the call completed).

Errors of the library raise wharf.Error (a RuntimeError) with .errno and .message (the
cause in one line); wharf.ConfigError for a refused configuration or model, and
wharf.TimeoutError for servers that did not come up within the wait timeout.
"""
import signal
import threading

import numpy as np

from . import _wharf
from ._wharf import ConfigError, Error, TimeoutError  # noqa: F401  (the API's exceptions)

__all__ = [
    "Error", "ConfigError", "TimeoutError", "init", "flags_of", "is_server", "is_worker",
    "role", "worker_index", "num_workers", "num_servers", "mode", "geo_k", "protocol",
    "sparse_table", "dense_table", "table", "tables", "run_server", "init_worker",
    "stop_worker", "stop", "barrier", "barrier_async", "step", "stats", "version", "SparseTable",
    "DenseTable", "Request",
]

Request = _wharf.Request
MAX_DIM = _wharf.MAX_DIM


class _Job:
    """What init() set up: the configuration, the model, the client once opened."""

    def __init__(self, config, model):
        self.config = config
        self.model = model
        self.client = None
        self.opening = None  # the client waiting for the servers, which stop() closes
        self.stopped = False  # by stop(): the job's tables are no longer served
        self.tables = {}
        # Reentrant: a signal handler that calls stop() while this thread opens the client
        # (it runs there, inside the wait for the servers) gets in.
        self.lock = threading.RLock()
        self.serving = False


_job = None


def version():
    """The version of the libwharf this package runs on."""
    return _wharf.version()


def flags_of(kwargs):
    """Keyword arguments as a wharf executable's flags: task_index=1 -> ['--task-index', '1'];
    a list or tuple is joined with commas, a bool is true/false, None is left out."""
    argv = []
    for k, v in kwargs.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        argv += ["--" + k.replace("_", "-"), str(v)]
    return argv


def init(argv=None, *, eal=None, model=None, **flags):
    """Loads the cluster as the wharf executables do and the model.

    Sources, strongest first: argv (flags as after `--` on a wharf executable) and the
    keyword arguments (role="worker", task_index=1, ps=["10.0.0.1:4444"], protocol="kernel",
    mode="sync", tensor_fuse=True, config="cluster.json", endpoint_map=..., wait_timeout=30,
    any other flag of `wharf-train -- --help`'s cluster part), then TF_CONFIG, Paddle's
    variables (TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, ...), DeepRec's knobs and WHARF_*
    from the environment, the --config file and .endpoint_map. eal: the EAL arguments of
    protocol dpdk (default: the environment's WHARF_EAL_ARGS, else the --config file's
    eal_args). model: a JSON model file's
    path, or None to declare tables with sparse_table() / dense_table().
    A refused source raises wharf.ConfigError naming it.
    """
    global _job
    if _job is not None:
        raise Error("wharf.init: already initialised (wharf.stop() first)")
    args = list(argv or []) + flags_of(flags)
    config = _wharf.Config(args, eal)
    m = _wharf.Model.load(model) if model is not None else _wharf.Model()
    _job = _Job(config, m)
    for i in range(len(m)):
        _add_handle(i)
    return _job.config


def _need():
    if _job is None:
        raise Error("wharf: call wharf.init() first")
    return _job


def is_server():
    return _need().config.role == "server"


def is_worker():
    return _need().config.role == "worker"


def role():
    return _need().config.role


def worker_index():
    """This node's index among its role's nodes (a worker's id)."""
    return _need().config.index


def num_workers():
    return _need().config.workers


def num_servers():
    return _need().config.servers


def mode():
    """'sync', 'async' or 'geo'."""
    return _need().config.mode


def geo_k():
    return _need().config.geo_k


def protocol():
    """'dpdk' or 'kernel'."""
    return _need().config.protocol


# ------------------------------------------------------------------------------ tables

class _Table:
    def __init__(self, job, tid, info):
        self._job = job
        self.id = tid
        self.name = info["name"]
        self.dim = info["dim"]
        self.info = info

    def _client(self):
        return _client(self._job)

    def __repr__(self):
        return "<wharf %s table %r id %d dim %d>" % (self.info["kind"], self.name, self.id,
                                                      self.dim)


class SparseTable(_Table):
    """Rows keyed by uint64, created on first touch; pull/push a batch of keys."""

    def _out(self, keys, out):
        if out is not None:
            return out
        # 0-d keys (an array of no length) are left for the call to refuse by their shape.
        n = len(keys) if hasattr(keys, "__len__") and getattr(keys, "ndim", 1) > 0 else 0
        return np.empty((n, self.dim), dtype=np.float32)

    def pull(self, keys, out=None):
        """The rows of keys (uint64, 1-D) into out (float32 (n, dim), made when None)."""
        return self._client().pull(self.id, keys, self._out(keys, out))

    def push(self, keys, grads):
        """Gradients (float32 (n, dim)) of keys; returns once every server applied it."""
        self._client().push(self.id, keys, grads)

    def push_pull(self, keys, grads, out=None):
        """Push, then the rows as they are after it into out."""
        return self._client().push_pull(self.id, keys, grads, self._out(keys, out))

    def pull_async(self, keys, out=None):
        return self._client().pull_async(self.id, keys, self._out(keys, out))

    def push_async(self, keys, grads):
        return self._client().push_async(self.id, keys, grads)

    def push_pull_async(self, keys, grads, out=None):
        return self._client().push_pull_async(self.id, keys, grads, self._out(keys, out))

    def geo_pull(self):
        """GEO mode: (keys uint64 (n,), rows float32 (n, dim)) that others changed since
        this worker's last geo_pull."""
        k, r, n = self._client().geo_pull(self.id)
        return (np.frombuffer(k, dtype=np.uint64),
                np.frombuffer(r, dtype=np.float32).reshape(n, self.dim))


class DenseTable(_Table):
    """rows x dim floats, pulled and pushed whole."""

    def __init__(self, job, tid, info):
        super().__init__(job, tid, info)
        self.rows = info["rows"]
        self.shape = (self.rows, self.dim)

    def _out(self, out):
        return np.empty(self.shape, dtype=np.float32) if out is None else out

    def pull(self, out=None):
        """The whole table into out (any float32 array of rows * dim, made when None)."""
        return self._client().dense_pull(self.id, self._out(out))

    def push(self, grads):
        """A gradient (GEO mode: a delta) of the whole table."""
        self._client().dense_push(self.id, grads)

    def pull_async(self, out=None):
        return self._client().dense_pull_async(self.id, self._out(out))

    def push_async(self, grads):
        return self._client().dense_push_async(self.id, grads)


def _add_handle(tid):
    info = _job.model.table(tid)
    cls = DenseTable if info["kind"] == "dense" else SparseTable
    t = cls(_job, tid, info)
    _job.tables[t.name] = t
    return t


def sparse_table(name, dim=1, **fields):
    """Declares a sparse table (before the client opens or the server runs; every node of
    the job declares the same tables). fields: optimizer ('sgd', 'adagrad', 'adam', 'ftrl'),
    lr, eps, beta1, beta2, l1, l2, init_accum, init ('zeros', 'uniform', 'normal'), init_a,
    init_b, seed; the memory policies max_rows, max_bytes, admit_after, evict_after,
    pull_inserts (docs/api.md, servers apply them). A table of that name already in the model
    (from its file) is returned when its kind and dim agree."""
    return _declare(name, "sparse", dim, 0, fields)


def dense_table(name, rows, dim, **fields):
    """Declares a dense table of rows x dim floats; fields as sparse_table's."""
    return _declare(name, "dense", dim, rows, fields)


def _declare(name, kind, dim, rows, fields):
    job = _need()
    with job.lock:
        t = job.tables.get(name)
        if t is not None:
            if t.info["kind"] != kind or t.dim != dim or (kind == "dense" and t.rows != rows):
                raise ConfigError("table '%s' exists as %s dim %d%s" % (
                    name, t.info["kind"], t.dim,
                    " rows %d" % t.rows if isinstance(t, DenseTable) else ""))
            return t
        tid = job.model.add(name, kind=kind, dim=dim, rows=rows, **fields)
        return _add_handle(tid)


def table(name):
    """The table called name (KeyError when the model has none)."""
    job = _need()
    try:
        return job.tables[name]
    except KeyError:
        raise KeyError("no table '%s' in the model (tables: %s)" %
                       (name, ", ".join(job.tables) or "none")) from None


def tables():
    return dict(_need().tables)


# ------------------------------------------------------------------------------ roles

def run_server(ckpt=None, restore=None):
    """Serves the model until wharf.stop() (any thread), a "shutdown" control command, or
    SIGINT/SIGTERM (in the main thread, SIGTERM then stops it cleanly; a KeyboardInterrupt
    stops it and is raised). ckpt: checkpoint path (with its write-ahead log); restore: the
    checkpoint to start from. The GIL is released while serving."""
    job = _need()
    if job.config.role != "server":
        raise Error("run_server: this node's role is %s" % job.config.role)
    main = threading.current_thread() is threading.main_thread()
    old = None
    if main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        old = signal.signal(signal.SIGTERM, lambda *_: _wharf.server_stop())
    job.serving = True
    try:
        _wharf.run_server(job.config, job.model, ckpt, restore)
    finally:
        job.serving = False
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _open(job, refusal, spin_wait=False, queue_depth=0):
    """The job's client, opened (waiting for the servers) when it has none. A stopped job's
    tables are refused rather than served by a client of their own, which would take this
    worker's id from the job init() started since."""
    with job.lock:
        if job.stopped:
            raise Error("wharf.stop() ended the job of this table: call wharf.init() again "
                        "and take the new job's tables")
        if job.client is None:
            if job.config.role != "worker":
                raise Error(refusal % job.config.role)
            c = _wharf.Client.__new__(_wharf.Client)
            job.opening = c  # stop() closes it: the wait for the servers ends
            try:
                c.__init__(job.config, job.model, spin_wait, queue_depth)
            finally:
                job.opening = None
            job.client = c
        return job.client


def _client(job):
    c = job.client
    if c is not None:
        return c
    return _open(job, "this node's role is %s: only a worker calls the servers")


def init_worker(spin_wait=False, queue_depth=0):
    """Connects this worker to every server, waiting for them as the executables do (up to
    the wait timeout: wharf.TimeoutError). The first call on a table does it too."""
    return _open(_need(), "init_worker: this node's role is %s", spin_wait, queue_depth)


def _close_client(job):
    with job.lock:
        c, job.client = job.client, None
    if c is not None:
        c.close()


def stop_worker():
    """Completes what is in flight and disconnects (the tables can be used again after)."""
    _close_client(_need())


def stop():
    """Stops this process's servers (from any thread or a signal handler) and closes the
    worker's client, ending a wait for the servers (init_worker() then raises wharf.Error,
    errno ECANCELED); init() may be called again after, and the tables of the stopped job
    are refused."""
    global _job
    job = _job
    if job is None:
        return
    job.stopped = True
    if job.serving:
        # The library remembers a stop until a run ends: asked for only while one runs.
        _wharf.server_stop()
    opening = job.opening
    if opening is not None:
        opening.close()  # before the lock, which the opening thread holds
    _close_client(job)
    _job = None


def barrier(step):
    """Sync mode: returns once every worker reached step and its pushes were applied. step is
    step()'s (a barrier of another step is refused)."""
    _client(_need()).barrier(step)


def step():
    """Sync mode: the step this worker is in: where its servers were when it connected (a
    worker restarted under its old id resumes there: skip the batches before it), then one
    more per completed barrier."""
    return _client(_need()).step()


def barrier_async(step):
    return _client(_need()).barrier_async(step)


def stats():
    """The worker client's counters: calls, requests, replies, bytes, reconnects, resent."""
    return _client(_need()).stats()
