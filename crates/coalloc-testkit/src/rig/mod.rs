//! The test rigs: real resource managers brought up by the scripts under scripts/ (Slurm
//! clusters, Grid Engine cells, sites in network namespaces with agents), each found through
//! an environment variable naming its base directory. Unset, a test that needs a rig prints
//! "skipped" and passes (or fails, where a `COALLOC_REQUIRE_*` variable says the rig must be
//! there); set, the rig must be usable. [`netns`]: a test's own namespaces of
//! scripts/netns/sites.sh, made and removed by the test.

pub mod agents;
pub mod gridengine;
pub mod netns;
pub mod slurm;

/// The `[server]` table of the end-to-end scenarios on a rig (Slurm or Grid Engine).
pub const SERVER: &str =
    "[server]\nmonitor_interval = \"100ms\"\nsample_interval = \"500ms\"\nbarrier_hold = \"2s\"\n";
