// Package disk is the agent's view of its disk: how much of it Eddy may
// use, whether a write failed because it is full, and waiting until space
// frees, so that a full disk is a state the agent waits out (with /readyz
// saying so) rather than a failure it restarts over.
//
//   - Meter (budget.go) samples each component's bytes under data_dir and
//     the file sinks' outputs, serves the eddy_disk_* gauges, and holds
//     ingest while the components use the whole budget: max_disk, or half
//     of data_dir's file system but no more than its free space plus what
//     Eddy holds, derived again at each sample.
//   - Holds (full.go) is what waits for space, per place, and the /readyz
//     "disk" detail; Holds.Rebuild and Holds.WaitRegion wait for the
//     state's rebuild and for a failover region.
//   - ShortageOf (nospace.go) tells a full file system (ENOSPC or EDQUOT
//     with less than 64 MiB free) from a device, a pipe or a quota that
//     polling free space would never see end.
//   - Watch (watch.go) is the checkpoint store's full-disk state, which the
//     checkpoint coordinator mirrors.
//   - FileSystemStats (stats_linux.go, stats_other.go) reads a file
//     system's size and free space; elsewhere than on Linux it cannot, and
//     the budget is then unknown unless max_disk is set.
//
// It knows nothing of the agent: it is handed a logger, paths, a statfs
// func, a monotonic clock and callbacks (tell the coordinator, bring the
// admin endpoint up).
package disk
