"""lockstep-run, the launcher: host lists, the mpirun command line, and the elastic
supervisor that re-forms jobs. Plain Python that imports nothing from the compiled
core, so it runs (and reports a broken build) where the core does not load.

    cli.py                 options -> one mpirun command (or the elastic supervisor)
    host_lists.py          -H, hostfiles, Slurm allocations -> (host, slots)
    mpi_launcher.py        which mpirun belongs to this build, and its settings syntax
    elastic_supervisor.py  runs the sequence of mpirun jobs of an elastic run
    host_discovery.py      the discovery script, blacklist and slot assignment
    elastic_protocol.py    what the supervisor and the ranks tell each other
"""
