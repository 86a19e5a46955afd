"""`python -m autograder.cohort DIR`: build the sample cohort (autograder.cohort.sample)."""

from autograder.cohort.sample import main

if __name__ == "__main__":
    raise SystemExit(main())
