"""Horovod's build queries for features lockstep does not have.

Ported scripts call these to pick code paths; lockstep's only controller is MPI and
its GPU path is NCCL (cuda_built() is true where the build has it); the others
honestly answer False.
"""


def gloo_built():
    return False


def gloo_enabled():
    return False


def cuda_built():
    # GPU (CUDA) code is built with the NCCL backend only.
    from lockstep import _core

    return bool(_core.nccl_built())


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False
