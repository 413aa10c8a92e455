"""Check that moving text between README.md and docs/ lost nothing.

    python tools/check_docs_move.py OLD_README [NEW_FILES...]

Every non-blank, non-heading line of OLD_README must appear in one of the new
files (README.md and docs/*.md by default), compared with link targets removed
and whitespace collapsed, since moved text gets new relative links. Prints the
lines that are missing and exits 1 if there are any.
"""

import glob
import re
import sys


def normalize(line):
    line = re.sub(r"\]\([^)]*\)", "]", line)  # link targets change with the file's folder
    return " ".join(line.split())


def main(argv):
    old_path, new_paths = argv[0], argv[1:] or ["README.md"] + sorted(glob.glob("docs/*.md"))
    new_text = "\n".join(normalize(line) for path in new_paths for line in open(path))
    missing = [
        line.rstrip()
        for line in open(old_path)
        if line.strip() and not line.startswith("#") and normalize(line) not in new_text
    ]
    for line in missing:
        print("missing:", line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
