"""The checkpoint store conformance suite as a whole: every check, and one call to run them."""

from __future__ import annotations

from collections.abc import Sequence

from agentkit.checkpoint._base import JournalingCheckPointStore, LeasingCheckPointStore
from agentkit.testing._checkpoint_checks import STORE_CHECKS
from agentkit.testing._errors import StoreConformanceError
from agentkit.testing._lease_checks import LEASE_CHECKS
from agentkit.testing._step_checks import STEP_CHECKS
from agentkit.testing._store_support import StoreCheck, StoreFactory

ALL_CHECKS: tuple[StoreCheck, ...] = STORE_CHECKS + LEASE_CHECKS + STEP_CHECKS
"""Every check, in the order :func:`check_checkpoint_store` runs them."""


def check_checkpoint_store(
    make_store: StoreFactory,
    *,
    require_leases: bool = False,
    require_steps: bool = False,
    checks: Sequence[StoreCheck] = ALL_CHECKS,
) -> None:
    """Run the conformance checks against the stores ``make_store`` returns.

    Each check uses fresh random ids and deletes what it wrote, so the suite can run against
    a shared, non-empty backend. The checks raise explicitly, so they also fail a broken
    store under ``python -O``. To get one pytest test per check, parametrize over
    :data:`ALL_CHECKS` instead::

        @pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda check: check.__name__)
        def test_my_store(check):
            check(lambda: MyStore("..."))

    Args:
        make_store: returns the store to check; it is called at least once per check.
        require_leases: fail when the store does not implement
            :class:`~agentkit.checkpoint.LeasingCheckPointStore` (stores shared by several
            processes should). Without it, the lease checks pass for stores without leases.
        require_steps: fail when the store does not implement
            :class:`~agentkit.checkpoint.JournalingCheckPointStore` (step records, which make
            ``Runner(durability="step")`` cost the same per step however long a run is).
            Without it, the step checks pass for stores without step records.
        checks: the checks to run (default: all of them).

    Raises:
        StoreConformanceError: naming the failed check and what the store did wrong.
    """
    if require_leases:
        store = make_store()
        if not isinstance(store, LeasingCheckPointStore):
            raise StoreConformanceError(
                f"{type(store).__name__} has no acquire_lease/release_lease methods; add them "
                "(see agentkit.checkpoint.LeasingCheckPointStore) or pass require_leases=False"
            )
    if require_steps:
        store = make_store()
        if not isinstance(store, JournalingCheckPointStore):
            raise StoreConformanceError(
                f"{type(store).__name__} has no append_step/read_steps/delete_steps methods; "
                "add them (see agentkit.checkpoint.JournalingCheckPointStore) or pass "
                "require_steps=False"
            )
    for check in checks:
        try:
            check(make_store)
        except AssertionError as error:
            raise StoreConformanceError(f"{check.__name__}: {error}") from error
