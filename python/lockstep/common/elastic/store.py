"""Committed state that outlives the process: one file per commit on local tmpfs.

Layout: <root>/<job id>/<host>/commit-<generation>-<number>.pkl, directories mode
0700 and files 0600, so only the job's user can read or plant them; a root directory
that someone else owns or others can write is refused. A commit is named by the
generation (mpirun job) that made it and its number: a host cut off in generation g
may keep a commit N that generation g+1 also makes, with other contents, and the
newer generation's wins.

Each file holds an HMAC-SHA256 of its name and contents under the job's key, which
the supervisor hands the ranks in their environment (never on disk): a file that
does not match, planted or renamed, is refused before it is unpickled. Files are
opened without following links.

Files are written by a background thread (the training thread only pays for the
in-memory copy that State.save() makes), under a temporary name and then renamed, so
a process killed mid-write leaves the previous commit intact. Free space is checked
before each write, since /dev/shm is small in many containers. The two newest
commits are kept.

Arrays and CPU tensors go out of band (pickle protocol 5): the pickle holds their
shapes and dtypes, and their bytes follow it in the file, signed and written as they
lie in memory. Pickling them in band held the GIL, and so stalled the training
thread, for about 0.3 s per 100 MB of state; out of band it is held for a few
milliseconds (hashing and writing release it). The file is the magic line, the MAC,
a header (the count of sections, then each one's length, as little-endian uint64:
the pickle first, then each buffer), and the sections.
"""

import hashlib
import hmac
import io
import os
import pickle
import re
import socket
import stat
import struct
import sys
import threading

_NAME = re.compile(r"commit-(\d{6})-(\d{10})\.pkl")
_KEEP = 2
_MAGIC = b"lockstep-commit-2\n"
_MAC_BYTES = hashlib.sha256().digest_size
_LENGTH = struct.Struct("<Q")


class CommitStoreError(RuntimeError):
    """The commit directory is unsafe or full, or a commit file is not this job's."""


def _private_directory(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise CommitStoreError(
            f"refusing to keep elastic commits in {path}: it must be a directory owned "
            f"by uid {os.geteuid()} with mode 0700 (found uid {info.st_uid}, "
            f"mode {stat.S_IMODE(info.st_mode):o})"
        )


def _mac(key, commit_id, sections):
    # The name is signed too: a valid file renamed to a newer id is refused. hashlib
    # releases the GIL while it hashes a large section.
    mac = hmac.new(key, f"{commit_id[0]}-{commit_id[1]}\n".encode(), hashlib.sha256)
    for section in sections:
        mac.update(section)
    return mac.digest()


class _OutOfBandPickler(pickle.Pickler):
    """Protocol 5 with a CPU tensor pickled as the numpy array that views its memory,
    so that its bytes go out of band as numpy's do (torch pickles them in band)."""

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if torch is None or type(obj) is not torch.Tensor or obj.requires_grad or obj.device.type != "cpu":
            return NotImplemented
        try:
            return torch.from_numpy, (obj.numpy(),)
        except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16), conjugate views, ...
            return NotImplemented


def _sections(snapshot):
    """[the pickle, then each out-of-band buffer], as memoryviews."""
    buffers, file = [], io.BytesIO()
    _OutOfBandPickler(file, protocol=5, buffer_callback=buffers.append).dump(snapshot)
    return [file.getbuffer(), *(buffer.raw() for buffer in buffers)]


# The writer thread's nice value (Linux sets it per thread): where it shares a core
# with the training thread (mpirun binds a rank to one), the training thread runs first.
_WRITER_NICENESS = 10


def _yield_to_training():
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _WRITER_NICENESS)
    except (AttributeError, OSError):  # not Linux: the thread keeps the process's priority
        pass


def _split_sections(data):
    """[the header, the pickle, each buffer] of a file's contents, or None if they do
    not add up."""
    start = len(_MAGIC) + _MAC_BYTES
    if bytes(data[: len(_MAGIC)]) != _MAGIC or data.nbytes < start + _LENGTH.size:
        return None
    (count,) = _LENGTH.unpack_from(data, start)
    body = start + _LENGTH.size * (count + 1)
    if count < 1 or body > data.nbytes:
        return None
    lengths = [_LENGTH.unpack_from(data, start + _LENGTH.size * (i + 1))[0] for i in range(count)]
    if body + sum(lengths) != data.nbytes:
        return None
    sections, offset = [data[start:body]], body
    for length in lengths:
        sections.append(data[offset : offset + length])
        offset += length
    return sections


class CommitStore:
    """This host's commits of one elastic job. Commits are named (generation, number)."""

    def __init__(self, root, job_id, key, host=None, generation=0):
        if not key:
            raise CommitStoreError("no key to sign elastic commits with (lockstep-run's supervisor sets one)")
        _private_directory(root)
        _private_directory(os.path.join(root, job_id))
        self.directory = os.path.join(root, job_id, host or socket.gethostname())
        _private_directory(self.directory)
        self._key = key
        self.generation = generation
        self._writer = None
        self._error = None

    def _path(self, commit_id):
        return os.path.join(self.directory, f"commit-{commit_id[0]:06d}-{commit_id[1]:010d}.pkl")

    def commit_ids(self):
        """The (generation, number) of every complete commit here, oldest first."""
        found = (_NAME.fullmatch(name) for name in os.listdir(self.directory))
        return sorted((int(match.group(1)), int(match.group(2))) for match in found if match)

    def newest(self):
        """The newest complete commit's (generation, number) on this host, or None."""
        ids = self.commit_ids()
        return ids[-1] if ids else None

    def load(self, commit_id):
        path = self._path(commit_id)
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as error:
            raise CommitStoreError(f"cannot open {path} (links are not followed): {error.strerror}") from None
        with os.fdopen(descriptor, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise CommitStoreError(f"{path} is not a regular file owned by this user")
            # Writable, so that the arrays and tensors built on it are too.
            data = memoryview(bytearray(info.st_size))
            file.readinto(data)
        sections = _split_sections(data)
        mac = data[len(_MAGIC) : len(_MAGIC) + _MAC_BYTES]
        if sections is None or not hmac.compare_digest(mac, _mac(self._key, commit_id, sections)):
            raise CommitStoreError(f"{path} is not signed with this job's key: refusing to unpickle it")
        return pickle.loads(sections[1], buffers=sections[2:])

    def write_async(self, number, snapshot, generation=None):
        """Start writing `snapshot` as commit (generation, number), by default this
        job's generation; waits for the previous write first, so at most one is in flight."""
        self.flush()
        commit_id = (self.generation if generation is None else generation, number)
        self._writer = threading.Thread(
            target=self._write, args=(commit_id, snapshot), name="lockstep-elastic-commit", daemon=True
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

    def _write(self, commit_id, snapshot):
        temporary = self._path(commit_id) + f".{os.getpid()}.tmp"
        _yield_to_training()
        try:
            sections = _sections(snapshot)
            header = _LENGTH.pack(len(sections)) + b"".join(_LENGTH.pack(section.nbytes) for section in sections)
            sections = [memoryview(header), *sections]
            self._check_space(sum(section.nbytes for section in sections))
            mac = _mac(self._key, commit_id, sections)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(temporary, flags, 0o600), "wb") as file:
                file.write(_MAGIC + mac)
                for section in sections:
                    file.write(section)
            os.replace(temporary, self._path(commit_id))
            for old in self.commit_ids()[:-_KEEP]:
                os.unlink(self._path(old))
        except Exception as error:  # reported by the next flush(), on the training thread
            self._error = error
            try:
                os.unlink(temporary)
            except OSError:
                pass

    def _check_space(self, size):
        """A full tmpfs fails the write with ENOSPC midway; say how much is needed instead."""
        info = os.statvfs(self.directory)
        free = info.f_bavail * info.f_frsize
        if size + len(_MAGIC) + _MAC_BYTES > free:
            raise CommitStoreError(
                f"a commit needs {size / 2**20:.1f} MiB but {self.directory} has {free / 2**20:.1f} MiB free "
                f"(two commits are kept): enlarge /dev/shm (docker run --shm-size) or point "
                f"LOCKSTEP_ELASTIC_COMMIT_DIR at a larger local filesystem"
            )

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
