"""A Horovod script (only the import changed) that reads the worker environment
horovodrun gives: HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE,
HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE, HOROVOD_HOSTNAME and, in elastic jobs,
HOROVOD_ELASTIC=1. The test says what to expect:

  LOCKSTEP_TEST_HOSTS    comma-separated HOROVOD_HOSTNAME of each rank, by rank; or
                         "this host": the machine's own name, or what
                         LOCKSTEP_TEST_HOST_ALIASES (name=listed,...) lists it as
  LOCKSTEP_TEST_ELASTIC  "1": HOROVOD_ELASTIC must be "1"; else it must be unset
  LOCKSTEP_TEST_USER_SET NAME=VALUE the user set, which init() must keep

Then shutdown() and init() again in this process: the variables init() set do not
trip lockstep's launch check, and they still hold. Each stage is a named check
(scripts/checks.py)."""

import os
import socket

import torch
from checks import check
from rank_checks import run_main, world_rank, world_size

import lockstep.torch as hvd  # was: import horovod.torch as hvd

NAMES = ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")


def check_environment(when):
    topology = (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size())
    user_name, _, user_value = os.environ.get("LOCKSTEP_TEST_USER_SET", "").partition("=")
    for name, value in zip(NAMES, topology):
        expected = user_value if f"HOROVOD_{name}" == user_name else str(value)
        assert os.environ.get(f"HOROVOD_{name}") == expected, (
            f"{when}: HOROVOD_{name}={os.environ.get(f'HOROVOD_{name}')!r}, expected {expected!r}"
        )
    hosts = os.environ["LOCKSTEP_TEST_HOSTS"]
    # "this host": the name this machine gives itself (the pretend cluster's hosts are
    # listed under their own names), wherever the launcher placed the rank.
    aliases = dict(pair.split("=", 1) for pair in os.environ.get("LOCKSTEP_TEST_HOST_ALIASES", "").split(",") if pair)
    if hosts == "this host":
        expected_host = aliases.get(socket.gethostname(), socket.gethostname())
    else:
        expected_host = hosts.split(",")[hvd.rank()]
    assert os.environ.get("HOROVOD_HOSTNAME") == expected_host, (
        f"{when}: HOROVOD_HOSTNAME={os.environ.get('HOROVOD_HOSTNAME')!r}, expected {expected_host!r}"
    )
    expected_elastic = "1" if os.environ.get("LOCKSTEP_TEST_ELASTIC") == "1" else None
    assert os.environ.get("HOROVOD_ELASTIC") == expected_elastic, f"HOROVOD_ELASTIC={os.environ.get('HOROVOD_ELASTIC')}"
    print(
        f"rank {hvd.rank()}: {when}: "
        + " ".join(f"HOROVOD_{name}={os.environ[f'HOROVOD_{name}']}" for name in NAMES + ("HOSTNAME",)),
        flush=True,
    )


def main():
    check(check_no_variables_before_init)
    hvd.init()
    check(check_environment_after_init)
    check(check_environment_after_elastic_run)
    check(check_environment_after_shutdown_and_init)


def check_no_variables_before_init():
    before = {name: os.environ.get(f"HOROVOD_{name}") for name in NAMES + ("HOSTNAME",)}
    user_name = os.environ.get("LOCKSTEP_TEST_USER_SET", "").partition("=")[0]
    assert all(value is None for name, value in before.items() if f"HOROVOD_{name}" != user_name), before


def check_environment_after_init():
    assert (hvd.rank(), hvd.size()) == (world_rank(), world_size())
    check_environment("after init()")


def check_environment_after_elastic_run():
    state = hvd.elastic.TorchState(step=0)

    @hvd.elastic.run
    def train(state):
        total = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="env.step")
        assert total.item() == hvd.size()
        state.step += 1
        state.commit()

    train(state)
    check_environment("after elastic.run")


def check_environment_after_shutdown_and_init():
    hvd.shutdown()
    hvd.init()  # HOROVOD_SIZE is set now: the launch check must still let this through
    check_environment("after shutdown() and init()")
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="env.again").item() == hvd.size()


if __name__ == "__main__":
    run_main(main)
