"""Static checks: what the trusted side reads in a submission's source before any of it runs. `source`
reads each file (parsed, never imported, within budgets); `checks` applies the import and forbidden-API
rules; `triton_rules` applies the Triton host-code rules over the data-flow analysis of `flow`."""
