# A DCS batch file (seed 003 appendix A.2): one job file per line, relative to this file.
poisson_4x8.uno
master-worker.rsl
poisson.toml
total.json
