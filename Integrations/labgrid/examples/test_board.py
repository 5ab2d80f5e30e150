"""A board test with labgrid's pytest plugin and SMPDriver.

    pytest --lg-env env.yaml test_board.py

The `target` fixture is the environment's `main` target (a RemotePlace or a local serial port)."""

import pytest


@pytest.fixture
def smp(target):
    return target.get_driver("SMPDriver")


def test_board_answers(smp):
    assert smp.echo("ping") == "ping"
    assert smp.params()["buf_count"] >= 1


def test_board_runs_a_confirmed_image(smp):
    running = [slot for slot in smp.image_list() if slot.get("active")]
    assert running, "no active image"
    assert running[0]["confirmed"], f"the running image is not confirmed: {running[0]}"
