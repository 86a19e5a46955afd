"""The sandbox: where student code runs, and the only place it runs when grading.

framing  length-prefixed frames over pipes (both sides)
launch   sets rlimits and joins the pids cgroup, then execs the sandbox (a tiny standalone script)
policy   which protections this machine supports, and how to say so in the grading log
bwrap    the bubblewrap command line: what the worker may see
staging  the read-only library the worker imports (wire, worker, kernels, scenario modules)
process  the trusted side's handle on one worker: start, request with a timeout, kill, restart
worker   the worker's main loop (runs inside the sandbox)
"""
