"""`python -m autograder ...`: see autograder.cli."""

from autograder.cli import main

raise SystemExit(main())
