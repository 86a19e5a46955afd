"""A cohort of submissions: `batch` grades them into the gradebook on an executor (`executors`: local
threads or a Slurm job array, `cluster/` the single-node Slurm scripts), `course` reads the course file,
`late` applies its late policy, `answers` releases the answer keys at its date, `similarity` lists code that looks copied (its page
`similarity_page.html`), and `sample` builds the sample cohort `make grade` grades."""
