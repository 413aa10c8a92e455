"""Horovod's build queries for features lockstep does not have.

Ported scripts call these to pick code paths; lockstep's only controller is MPI,
so each honestly answers False. (cuda_built() is the shared one in
lockstep.common.basics: true where the build has GPU collectives.)
"""


def gloo_built():
    return False


def gloo_enabled():
    return False


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False
