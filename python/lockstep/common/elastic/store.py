"""Committed state that outlives the process: one file per commit on local tmpfs.

Layout: <root>/<job id>/<host>/commit-<number>.pkl, directories mode 0700 and files
0600, so only the job's user can read or plant them; a root directory that someone
else owns or others can write is refused. Files are written by a background thread
(the training thread only pays for the in-memory copy that State.save() makes),
under a temporary name and then renamed, so a process killed mid-write leaves the
previous commit intact. The two newest commits are kept.
"""

import os
import pickle
import re
import socket
import stat
import threading

_NAME = re.compile(r"commit-(\d{10})\.pkl")
_KEEP = 2


class CommitStoreError(RuntimeError):
    """The commit directory is unsafe or unreadable."""


def _private_directory(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise CommitStoreError(
            f"refusing to keep elastic commits in {path}: it must be a directory owned "
            f"by uid {os.geteuid()} with mode 0700 (found uid {info.st_uid}, "
            f"mode {stat.S_IMODE(info.st_mode):o})"
        )


class CommitStore:
    """This host's commits of one elastic job."""

    def __init__(self, root, job_id, host=None):
        _private_directory(root)
        _private_directory(os.path.join(root, job_id))
        self.directory = os.path.join(root, job_id, host or socket.gethostname())
        _private_directory(self.directory)
        self._writer = None
        self._error = None

    def _path(self, number):
        return os.path.join(self.directory, f"commit-{number:010d}.pkl")

    def numbers(self):
        found = (_NAME.fullmatch(name) for name in os.listdir(self.directory))
        return sorted(int(match.group(1)) for match in found if match)

    def newest(self):
        """The newest complete commit's number on this host, or -1."""
        numbers = self.numbers()
        return numbers[-1] if numbers else -1

    def load(self, number):
        with open(self._path(number), "rb") as file:
            if os.fstat(file.fileno()).st_uid != os.geteuid():
                raise CommitStoreError(f"{self._path(number)} is not owned by this user")
            return pickle.load(file)

    def write_async(self, number, snapshot):
        """Start writing `snapshot` as commit `number`; waits for the previous write
        first, so at most one is in flight."""
        self.flush()
        self._writer = threading.Thread(
            target=self._write, args=(number, snapshot), name="lockstep-elastic-commit", daemon=True
        )
        self._writer.start()

    def flush(self):
        """Wait for the write in flight, if any; raise what it failed with."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._error is not None:
            error, self._error = self._error, None
            raise CommitStoreError(f"writing an elastic commit to {self.directory} failed: {error}") from error

    def _write(self, number, snapshot):
        temporary = self._path(number) + f".{os.getpid()}.tmp"
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                pickle.dump(snapshot, file, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self._path(number))
            for old in self.numbers()[:-_KEEP]:
                os.unlink(self._path(old))
        except Exception as error:  # reported by the next flush(), on the training thread
            self._error = error
            try:
                os.unlink(temporary)
            except OSError:
                pass

    def remove(self):
        """Remove this host's commits (the job finished)."""
        self.flush()
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)
        try:
            os.rmdir(os.path.dirname(self.directory))  # the job's folder, once no host uses it
        except OSError:
            pass
