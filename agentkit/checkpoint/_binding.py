"""How the Runner calls a serializer for a store: with the store's namespace when it can."""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from agentkit.checkpoint._base import CheckPointStore, legacy_namespaces_of, namespace_of
from agentkit.errors import CheckpointError

__all__ = ["dumps_for_store", "encoder_for", "loads_for_store"]


def dumps_for_store(
    serializer: Any,
    store: CheckPointStore | None,
    checkpoint_id: str,
    obj: Any,
    namespace: str | None = None,
) -> bytes:
    """``serializer.dumps(obj, ...)`` for ``store``, passing its namespace when accepted.

    ``namespace``: the store's namespace, when the caller has it already (a durable run's
    writer asks once, not at every step).
    """
    if store is not None and _takes_namespace(type(serializer)):
        if namespace is None:
            namespace = namespace_of(store)
        data = serializer.dumps(obj, checkpoint_id=checkpoint_id, namespace=namespace)
    else:
        data = serializer.dumps(obj, checkpoint_id=checkpoint_id)
    return data  # type: ignore[no-any-return]


def encoder_for(
    serializer: Any, store: CheckPointStore, checkpoint_id: str, namespace: str
) -> Callable[[Any], bytes]:
    """:func:`dumps_for_store` with its arguments fixed, worked out once: what a durable run
    calls for every step record (not thread-safe: the run's writer calls it under its lock).

    A :class:`~agentkit.checkpoint.PickleSerializer` (whose ``dumps`` is not overridden) gives
    its :meth:`~agentkit.checkpoint.PickleSerializer.bound_encoder`: the same bytes for less
    work per record.
    """
    from agentkit.checkpoint._serializer import PickleSerializer

    if isinstance(serializer, PickleSerializer) and (
        type(serializer).dumps is PickleSerializer.dumps
    ):
        return serializer.bound_encoder(checkpoint_id=checkpoint_id, namespace=namespace)
    if _takes_namespace(type(serializer)):
        return functools.partial(serializer.dumps, checkpoint_id=checkpoint_id,
                                 namespace=namespace)
    return functools.partial(serializer.dumps, checkpoint_id=checkpoint_id)


def loads_for_store(
    serializer: Any, store: CheckPointStore, checkpoint_id: str, data: bytes
) -> Any:
    """``serializer.loads(data, ...)`` for ``store``, passing its namespace when accepted.

    A checkpoint refused in the store's namespace is tried in the namespaces the store used
    in earlier releases (:func:`~agentkit.checkpoint.legacy_namespaces_of`), so an upgrade
    does not strand pending checkpoints; if none accepts it, the first refusal is raised.
    """
    if not _takes_namespace(type(serializer)):
        return serializer.loads(data, checkpoint_id=checkpoint_id)
    try:
        return serializer.loads(data, checkpoint_id=checkpoint_id, namespace=namespace_of(store))
    except CheckpointError as refused:
        for legacy in legacy_namespaces_of(store):
            try:
                return serializer.loads(data, checkpoint_id=checkpoint_id, namespace=legacy)
            except CheckpointError:
                continue
        raise refused from None


def _takes_namespace(serializer_type: type) -> bool:
    """Whether both ``dumps`` and ``loads`` accept a ``namespace`` keyword (user serializers
    written for the original two-argument protocol keep working)."""
    known = _TAKES_NAMESPACE.get(serializer_type)
    if known is None:
        known = _TAKES_NAMESPACE[serializer_type] = _inspect(serializer_type)
    return known


_TAKES_NAMESPACE: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _inspect(serializer_type: type) -> bool:
    for method in ("dumps", "loads"):
        try:
            parameters = inspect.signature(getattr(serializer_type, method)).parameters
        except (AttributeError, TypeError, ValueError):
            return False
        parameter = parameters.get("namespace")
        if parameter is None or parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            return False
    return True
