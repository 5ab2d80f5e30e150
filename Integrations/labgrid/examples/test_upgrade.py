"""Upgrades the board with $SMP_PACKAGE and checks that it runs the new image, confirmed.

    LG_PLACE=rig-a-dk1 SMP_PACKAGE=app.signed.bin pytest --lg-env env.yaml test_upgrade.py --junitxml=dk1.xml

$SMP_MODE chooses the mode (default confirm-only; test-and-confirm also ends confirmed)."""

import os


def test_upgrade(target):
    smp = target.get_driver("SMPDriver")
    result = smp.upgrade(os.environ["SMP_PACKAGE"], mode=os.environ.get("SMP_MODE", "confirm-only"))
    wanted = {image["hash"] for image in result["images"]}
    running = {slot["hash"] for slot in smp.image_list() if slot.get("active") and slot.get("confirmed")}
    assert wanted <= running, f"the board runs {running}, not the upgrade's {wanted}"
