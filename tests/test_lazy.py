"""The lazy-import helper: names load on first use, once, and are listed before they load."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from agentkit._lazy import attach, present


@pytest.fixture
def package() -> Iterator[types.ModuleType]:
    """A throwaway package whose lazy names come from the standard library."""
    module = types.ModuleType("lazy_probe")
    module.__path__ = []  # a package, so submodules resolve under it
    sys.modules["lazy_probe"] = module
    getattr_, dir_ = attach(
        "lazy_probe", {"OrderedDict": "collections", "dedent": "textwrap"}, submodules=("sub",)
    )
    module.__getattr__ = getattr_  # type: ignore[method-assign]
    module.__dir__ = dir_  # type: ignore[method-assign]
    yield module
    del sys.modules["lazy_probe"]


def test_a_lazy_name_is_the_defining_modules_object_and_is_stored_once_loaded(
    package: types.ModuleType,
) -> None:
    import collections

    assert "OrderedDict" not in vars(package)
    assert package.OrderedDict is collections.OrderedDict
    assert vars(package)["OrderedDict"] is collections.OrderedDict  # next access skips the hook


def test_dir_lists_lazy_names_and_submodules_before_they_load(package: types.ModuleType) -> None:
    assert {"OrderedDict", "dedent", "sub"} <= set(dir(package))
    assert "dedent" not in vars(package)


def test_an_unknown_name_names_the_module_and_the_closest_public_names(
    package: types.ModuleType,
) -> None:
    with pytest.raises(AttributeError, match=r"module 'lazy_probe' has no attribute 'dedant'; did you mean 'dedent'\?"):
        package.dedant  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'zzz' \(its public names are listed in lazy_probe.__all__\)"):
        package.zzz  # noqa: B018


def test_a_missing_submodule_is_an_import_error_not_an_attribute_error(
    package: types.ModuleType,
) -> None:
    with pytest.raises(ModuleNotFoundError, match="lazy_probe.sub"):
        package.sub  # noqa: B018


def test_present_renames_the_module_of_classes_and_functions_only() -> None:
    class Thing:
        pass

    def helper() -> None:
        pass

    constant = 3
    present((Thing, helper, constant), "agentkit.probe")
    assert Thing.__module__ == "agentkit.probe" and helper.__module__ == "agentkit.probe"
