"""REST endpoints of the live service: jobs, the queue, clusters and hosts."""
