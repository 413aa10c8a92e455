"""Horovod's build queries for features lockstep does not have.

Ported scripts call these to pick code paths; lockstep's only controller is MPI
and it has no GPU path yet, so each honestly answers False.
"""


def gloo_built():
    return False


def gloo_enabled():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False
