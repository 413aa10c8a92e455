"""What an elastic worker and `lockstep-run`'s elastic supervisor agree on: exit codes,
report lines and environment variables. Plain constants, no imports, so the launcher
loads it without the compiled core."""

# sysexits' EX_TEMPFAIL and the next one: outside what Python (1) or a signal (128+n) give.
EXIT_HOSTS_UPDATED = 75  # every rank stopped at the same commit: hosts changed
EXIT_PEER_LOST = 76  # a collective failed because a peer was lost: resume from the last commit

# Lines a worker prints for the supervisor, which reads the job's output through mpirun.
REPORT_PREFIX = "[lockstep-elastic]"

JOB_ID_VARIABLE = "LOCKSTEP_ELASTIC_JOB_ID"
GENERATION_VARIABLE = "LOCKSTEP_ELASTIC_GENERATION"
COMMIT_DIR_VARIABLE = "LOCKSTEP_ELASTIC_COMMIT_DIR"
MIN_NP_VARIABLE = "LOCKSTEP_ELASTIC_MIN_NP"
# What rank 0 reports after the survivors of a lost process went on in process
# (ULFM): "recovered in process: 4 ranks on node1:2,node2:2 in ...".
RECOVERED_REPORT = "recovered in process: "
# The job's hosts as the host list or discovery script named them, comma-separated in
# the order mpirun fills them: init() sets HOROVOD_HOSTNAME from it.
HOST_NAMES_VARIABLE = "LOCKSTEP_HOST_NAMES"
# The job's secret for signing commit files (hex), made by the supervisor and passed
# only in the ranks' environment: a file it did not sign is never unpickled.
COMMIT_KEY_VARIABLE = "LOCKSTEP_ELASTIC_COMMIT_KEY"
# Set for the jobs after one that committed: they refuse to start without a commit
# rather than train again from the initial state.
COMMITTED_VARIABLE = "LOCKSTEP_ELASTIC_COMMITTED"
# What rank 0 reports at its first commit in a job, and when it resumes from one.
COMMITTED_REPORT = "first commit of this job"
RESUMED_REPORT = "resuming from commit"
# What a rank reports before it exits because the training script raised (not a lost
# peer): "rank 3 on node2 raised: ValueError: ...". Its host is blacklisted.
RAISED_REPORT = " raised: "
# What rank 0 reports once every rank has installed its signal handlers (they all
# have when they meet in the first collective of hvd.elastic.run), for a job whose
# other ranks' output does not reach the supervisor.
ALL_READY_REPORT = "every rank ready"
# The error every rank of a job raises when an earlier job committed but none of its
# hosts holds a commit: the run ends (restarting would train from the initial state).
NO_COMMIT_ERROR = "NoCommitError"
