"""The pipelined loader: a background thread samples the next batches and gathers their features while the
consumer computes (``Flags.pipeline_depth``; :meth:`~gnnbench.features.stores.PlacedFeatures.feed` calls it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

import torch

from gnnbench.background import BackgroundWork
from gnnbench.timing import code_path

if TYPE_CHECKING:
    from gnnbench.features.stores import PlacedFeatures

__all__ = ["pipelined"]


_DONE = object()


def pipelined(batches: Iterable, store: PlacedFeatures, depth: int, n_id_of=lambda b: b.n_id) -> Iterator[tuple]:
    """The pipelined loader: ``(batch, features)`` in the source's order, with up to ``depth`` batches sampled and
    their features gathered ahead by a background thread while the consumer computes.

    The thread owns the source iterator (sampling runs there, and with loader workers it pulls from them) and
    the feature gather (on CUDA on a side stream, the consumer's stream waiting on an event per batch, as
    :func:`~gnnbench.features.stores.prefetch_features` does). The consumer's "sample" phase is then its wait for the queue: the data
    wait left after the overlap. An exception in the thread is raised in the consumer at the batch it belongs
    to; closing the iterator stops the thread, which closes the source. Timed end to end (the registry marks
    the entry as overlap). Device-agnostic: on a CPU the overlap is what the cores allow.
    """
    import queue
    import threading

    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"pipeline depth must be an integer >= 1 (got {depth!r})")
    device = store.device
    cuda = device.type == "cuda"
    side = torch.cuda.Stream(device=device) if cuda else None
    if cuda:
        side.wait_stream(torch.cuda.current_stream(device))
    ready_q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def gather(batch) -> tuple:
        if cuda:
            with torch.cuda.device(device), torch.cuda.stream(side), code_path("gather"):
                feats = store.gather(n_id_of(batch))
                event = torch.cuda.Event()
                event.record(side)
            return feats, event
        with code_path("gather"):
            return store.gather(n_id_of(batch)), None

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready_q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    work = getattr(store, "background", None) or BackgroundWork()  # a store outside a trainer: its own

    def produce() -> None:
        it = iter(batches)
        try:
            while not stop.is_set():
                if work.has_processes:  # loader workers sample (suspended during evaluation): this thread waits
                    work.wait_if_paused(stop)  # takes no batch while the producers are held
                    if stop.is_set():
                        break
                    batch = next(it, _DONE)
                    if batch is _DONE:
                        break
                    with work.item(stop) as running:  # its gather: work of this thread
                        if not running:
                            break
                        feats, event = gather(batch)
                else:
                    # sampling and gather: work of this thread, entered only while the producers run (item()
                    # waits out a pause; drain() waits for an item entered before it)
                    with work.item(stop) as running:
                        if not running:
                            break
                        batch = next(it, _DONE)
                        if batch is _DONE:
                            break
                        feats, event = gather(batch)
                if not put((batch, feats, event)):
                    break
            put(_DONE)
        except BaseException as exc:  # raised in the consumer, at the batch it belongs to
            put(exc)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="gnnbench-pipeline", daemon=True)
    thread.start()
    try:
        while True:
            item = ready_q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            batch, feats, event = item
            if event is not None:
                consumer = torch.cuda.current_stream(device)
                consumer.wait_event(event)
                feats.record_stream(consumer)
            yield batch, feats
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue, then let it close the source
            try:
                ready_q.get_nowait()
            except queue.Empty:
                pass
            thread.join(timeout=0.05)
