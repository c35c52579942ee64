"""The cluster's local state: durable demand, intents, node states and events."""

from autoscaler.lifecycle import NodeRecord
from autoscaler.state import (
    FAILED_INTENT,
    LAUNCHED_INTENT,
    PENDING_INTENT,
    Event,
    Intent,
    StateStore,
)


def test_state_survives_reopening(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.set_demand({"bundles": [{"GPU": 1}], "placement_groups": []}, 1.0)
    store.record_intent(Intent("r1", "gpu", 2, 1.0, PENDING_INTENT))
    store.save_node_records([NodeRecord("i-1", "gpu", "worker", "allocated", 2.0)])
    store.add_event(Event(3.0, "launched", "launched 2 x gpu", "gpu"))
    store.close()
    reopened = StateStore(tmp_path / "state.db")
    assert reopened.demand()["bundles"] == [{"GPU": 1}]
    assert [i.request_id for i in reopened.intents(PENDING_INTENT)] == ["r1"]
    assert reopened.node_records()["i-1"].state == "allocated"
    assert [e.message for e in reopened.events()] == ["launched 2 x gpu"]


def test_intents_settle_and_demand_is_replaced(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.record_intent(Intent("r1", "gpu", 2, 1.0, PENDING_INTENT))
    store.record_intent(Intent("r2", "gpu", 1, 2.0, PENDING_INTENT))
    store.settle_intent("r1", LAUNCHED_INTENT, ("i-1", "i-2"))
    store.settle_intent("r2", FAILED_INTENT, detail="capacity")
    assert store.intents(PENDING_INTENT) == []
    assert store.intents(LAUNCHED_INTENT)[0].node_ids == ("i-1", "i-2")
    store.set_demand({"bundles": [{"CPU": 1}]}, 1.0)
    store.set_demand({"bundles": []}, 2.0)
    assert store.demand() == {"bundles": []}


def test_clear_forgets_everything(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.set_demand({"bundles": [{"CPU": 1}]}, 1.0)
    store.add_event(Event(1.0, "x", "y"))
    store.clear()
    assert store.demand() == {"bundles": [], "placement_groups": []}
    assert store.events() == []


def test_boot_failure_streaks_survive_reopening_and_clear(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.save_boot_failures("gpu", {"cause": "waiting_for_report", "count": 2})
    store.close()
    reopened = StateStore(tmp_path / "state.db")
    assert reopened.boot_failures() == {"gpu": {"cause": "waiting_for_report", "count": 2}}
    reopened.save_boot_failures("gpu", None)
    assert reopened.boot_failures() == {}
    reopened.save_boot_failures("gpu", {"count": 3})
    reopened.clear()
    assert reopened.boot_failures() == {}


def test_a_state_file_from_before_streaks_reads_as_none(tmp_path):
    import sqlite3

    path = tmp_path / "state.db"
    StateStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE boot_failures")
    store = StateStore.open_read_only(path)
    assert store.boot_failures() == {}
    store.close()
