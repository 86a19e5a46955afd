"""Public tests of assignment 1, resource_accounting (handout: assignments/resource_accounting/README.md)."""
