"""A rank script whose one check fails (test_harness.py): whatever the environment
asks of Python, it must be reported as failing."""

from rank_checks import run_main


def main():
    assert 1 + 1 == 3, "this check always fails"


if __name__ == "__main__":
    run_main(main)
