"""Run context (session values, propagation into threads) and run options."""

from __future__ import annotations

import contextvars
import threading

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit import (
    AgentEvent,
    AgentInput,
    Role,
    Runner,
    add_session_value,
    add_session_values,
    assistant_message,
    event_from_message,
    get_impl_specific_options,
    get_session_value,
    get_session_values,
    run_in_worker,
    with_session_values,
    wrap_impl_specific_opt_fn,
)
from agentkit._options import filter_options
from agentkit.testing import no_thread_leak


def test_session_getters_outside_a_run_return_defaults() -> None:
    assert get_session_value("k") is None
    assert get_session_value("k", 5) == 5
    assert get_session_values() == {}


@pytest.mark.parametrize(
    "write", [lambda: add_session_value("k", 1), lambda: add_session_values({"k": 1})]
)
def test_session_setters_outside_a_run_raise_a_clear_error(write) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match="needs an agent run"):
        write()


class SessionAgent:
    """A custom agent that reads and writes session values from its worker and a thread."""

    name = "session"
    description = "uses the session"

    def __init__(self) -> None:
        self.seen: dict[str, object] = {}

    def run(self, input: AgentInput, *options: object):  # type: ignore[no-untyped-def]
        def work(gen) -> None:  # type: ignore[no-untyped-def]
            self.seen["worker"] = get_session_value("user")
            add_session_value("written", "by worker")
            copied: dict[str, object] = {}
            bare: dict[str, object] = {}
            ctx = contextvars.copy_context()
            t1 = threading.Thread(
                target=ctx.run, args=(lambda: copied.update(get_session_values()),)
            )
            t2 = threading.Thread(target=lambda: bare.update(get_session_values()))
            t1.start()
            t2.start()
            t1.join()
            t2.join()
            self.seen["copied"] = copied
            self.seen["bare"] = bare
            gen.send(event_from_message(assistant_message("ok"), None, Role.ASSISTANT))

        return run_in_worker(work)


def test_run_context_reaches_workers_and_copied_threads_only() -> None:
    agent = SessionAgent()
    with no_thread_leak():
        events = list(Runner(agent).query("hi", with_session_values({"user": "ada"})))
    assert events[0].get_message().content == "ok"  # type: ignore[union-attr]
    assert agent.seen["worker"] == "ada"
    assert agent.seen["copied"] == {"user": "ada", "written": "by worker"}
    assert agent.seen["bare"] == {}


def test_session_values_are_fresh_per_run() -> None:
    agent = SessionAgent()
    runner = Runner(agent)
    list(runner.query("a", with_session_values({"user": "x"})))
    list(runner.query("b"))
    assert agent.seen["worker"] is None


def test_worker_exception_becomes_final_error_event_with_traceback() -> None:
    def work(gen) -> None:  # type: ignore[no-untyped-def]
        gen.send(event_from_message(assistant_message("first"), None, Role.ASSISTANT))
        raise ValueError("worker failed")

    with no_thread_leak():
        events = list(run_in_worker(work))
    assert len(events) == 2
    err = events[-1].err
    assert isinstance(err, ValueError) and err.__traceback__ is not None


def test_closing_the_iterator_stops_the_producer() -> None:
    stopped = threading.Event()
    first_sent = threading.Event()

    def work(gen) -> None:  # type: ignore[no-untyped-def]
        count = 0
        while gen.send(AgentEvent(agent_name=str(count))):
            count += 1
            first_sent.set()
        stopped.set()

    with no_thread_leak():
        events = run_in_worker(work)
        assert first_sent.wait(10)
        events.close()
    assert stopped.is_set()


@attrs.define
class CustomOptions:
    depth: int = 0
    tags: list[str] = attrs.Factory(list)


@attrs.define
class OtherOptions:
    depth: int = 0


def test_impl_specific_options_apply_in_order_to_their_own_type_only() -> None:
    options = [
        wrap_impl_specific_opt_fn(CustomOptions, lambda o: setattr(o, "depth", 1)),
        wrap_impl_specific_opt_fn(OtherOptions, lambda o: setattr(o, "depth", 99)),
        wrap_impl_specific_opt_fn(CustomOptions, lambda o: o.tags.append("x")),
        wrap_impl_specific_opt_fn(
            CustomOptions, lambda o: CustomOptions(depth=o.depth + 1, tags=o.tags)
        ),
    ]
    result = get_impl_specific_options(CustomOptions(), *options)
    assert result == CustomOptions(depth=2, tags=["x"])


def test_option_function_returning_wrong_type_is_reported() -> None:
    option = wrap_impl_specific_opt_fn(CustomOptions, lambda o: 3)
    with pytest.raises(TypeError, match="CustomOptions"):
        get_impl_specific_options(CustomOptions(), option)


def test_designate_agent_accumulates_names() -> None:
    option = wrap_impl_specific_opt_fn(CustomOptions, lambda o: None)
    designated = option.designate_agent("a").designate_agent("b", "c")
    assert designated.agent_names == ("a", "b", "c")
    assert option.agent_names == ()
    with pytest.raises(ValueError):
        option.designate_agent()


@given(
    st.lists(st.lists(st.sampled_from(["a", "b", "c"]), max_size=2), max_size=8),
    st.sampled_from(["a", "b", "c", "d"]),
)
def test_filtering_keeps_undesignated_and_matching_options(
    designations: list[list[str]], name: str
) -> None:
    base = wrap_impl_specific_opt_fn(CustomOptions, lambda o: None)
    options = [base.designate_agent(*names) if names else base for names in designations]
    kept = filter_options(options, name)
    assert list(kept) == [o for o in options if not o.agent_names or name in o.agent_names]
