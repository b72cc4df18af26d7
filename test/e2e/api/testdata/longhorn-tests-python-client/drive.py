# Drives longhorn.py, Longhorn's python client from longhorn-tests (copied
# here unmodified), against a manager, with the calls and arguments of
# longhorn-tests' manager/integration/tests/common.py: create_volume,
# wait_for_volume_detached, wait_for_volume_healthy, create_snapshot,
# expand_attached_volume, cleanup_volume, create_recurring_jobs and
# check_recurring_jobs.
#
#   python3 drive.py http://127.0.0.1:9500/v1/schemas node-1
#
# It prints one line per step and exits non-zero, with the traceback, at
# the first call or check that fails.
import sys
import time

import longhorn

Mi = 1024 * 1024
SIZE = str(32 * Mi)  # common.py's SIZE
EXPAND_SIZE = str(64 * Mi)
RETRIES = 120
INTERVAL = 0.5


def step(msg):
    print("ok: " + msg, flush=True)


def wait_for(what, fn):
    for _ in range(RETRIES):
        got = fn()
        if got:
            return got
        time.sleep(INTERVAL)
    raise AssertionError("not within %ss: %s" % (RETRIES * INTERVAL, what))


def wait_for_volume_status(client, name, key, value):
    # common.py's wait_for_volume_status: the volume is listed, then its
    # field reaches the value.
    wait_for("volume %s listed" % name,
             lambda: any(v.name == name for v in client.list_volume()))
    return wait_for("volume %s %s=%s" % (name, key, value),
                    lambda: (lambda v: v if v[key] == value else None)(
                        client.by_id_volume(name)))


def main(url, node_id):
    client = longhorn.from_env(url=url)
    step("client loaded the schemas from " + url)

    before = client.list_volume()
    step("list_volume: %d volumes" % len(before))

    name = "py-client-vol"
    # common.py's create_volume, with its default data engine.
    volume = client.create_volume(name=name, size=SIZE,
                                  numberOfReplicas=1, dataEngine="v1")
    assert volume.numberOfReplicas == 1, volume
    assert volume.frontend == "blockdev", volume
    volume = wait_for_volume_status(client, name, "state", "detached")
    assert len(volume.replicas) == 1, volume.replicas
    assert volume.state == "detached"
    assert volume.created != ""
    by_name = client.by_id_volume(name)
    assert by_name.name == volume.name
    assert by_name.size == volume.size == SIZE, (by_name.size, SIZE)
    assert by_name.numberOfReplicas == volume.numberOfReplicas
    assert by_name.state == volume.state
    assert by_name.created == volume.created
    step("create_volume %s: detached, 1 replica, created %s" % (name, volume.created))

    volume.attach(hostId=node_id)
    wait_for_volume_status(client, name, "state", "attached")
    volume = wait_for_volume_status(client, name, "robustness", "healthy")
    volume = wait_for("the engine's endpoint",
                      lambda: (lambda v: v if v.controllers[0].endpoint != "" else None)(
                          client.by_id_volume(name)))
    step("attach to %s: healthy, endpoint %s" % (node_id, volume.controllers[0].endpoint))

    # common.py's create_snapshot.
    volume = client.by_id_volume(name)
    snap = volume.snapshotCRCreate()
    snap_name = snap.name
    found = wait_for("snapshot %s in snapshotList" % snap_name,
                     lambda: [s for s in volume.snapshotList(volume=name).data
                              if s.name == snap_name])
    assert found[0].usercreated, found[0]
    names = [s.name for s in volume.snapshotCRList().data]
    assert snap_name in names, names
    step("snapshotCRCreate %s, seen in snapshotList and snapshotCRList" % snap_name)
    snap2 = volume.snapshotCreate()
    assert snap2.name in [s.name for s in volume.snapshotList().data]
    step("snapshotCreate %s" % snap2.name)

    # common.py's expand_attached_volume and wait_for_volume_expansion: the
    # engine's size reaches the volume's.
    volume = client.by_id_volume(name)
    volume.expand(size=EXPAND_SIZE)
    volume = wait_for("the engine grown to %s" % EXPAND_SIZE,
                      lambda: (lambda v: v if v.size == EXPAND_SIZE and v.controllers[0].size == v.size
                               and v.controllers[0].actualSize == v.size else None)(client.by_id_volume(name)))
    step("expand to %s: the engine has %s" % (volume.size, volume.controllers[0].actualSize))

    # common.py's cleanup_volume.
    volume = client.by_id_volume(name)
    volume.detach()
    volume = wait_for_volume_status(client, name, "state", "detached")
    step("detach")
    client.delete(volume)
    wait_for("volume %s deleted" % name,
             lambda: all(v.name != name for v in client.list_volume()))
    step("delete")

    # common.py's create_recurring_jobs and check_recurring_jobs, which
    # name the fields in capitals.
    jobs = {
        "py-snap": {"task": "snapshot", "groups": ["py-group"], "cron": "0 * * * *",
                    "retain": 2, "concurrency": 1, "labels": {"from": "python"}},
        "py-backup": {"task": "backup", "groups": [], "cron": "30 1 * * *",
                      "retain": 1, "concurrency": 2, "labels": {}},
    }
    for job, spec in jobs.items():
        client.create_recurring_job(Name=job, Task=spec["task"], Groups=spec["groups"],
                                    Cron=spec["cron"], Retain=spec["retain"],
                                    Concurrency=spec["concurrency"], Labels=spec["labels"])
    for job, spec in jobs.items():
        got = client.by_id_recurring_job(job)
        assert got.name == job
        assert got.task == spec["task"], got
        if len(spec["groups"]) > 0:
            assert got.groups == spec["groups"], got
        assert got.cron == spec["cron"], got
        assert got.retain == spec["retain"], got
        assert got.concurrency == spec["concurrency"], got
        assert dict(got.labels) == spec["labels"], got.labels
    listed = [j.name for j in client.list_recurring_job()]
    assert set(jobs) <= set(listed), listed
    step("create_recurring_job x%d, by_id and list_recurring_job agree" % len(jobs))
    for job in jobs:
        client.delete(client.by_id_recurring_job(job))
    wait_for("recurring jobs deleted",
             lambda: not set(jobs) & {j.name for j in client.list_recurring_job()})
    step("delete recurring jobs")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
