# shellcheck shell=bash
# common.sh — helpers shared by up.sh and down.sh (sourced, not run), on top of the Slurm
# rig's process helpers (pid_of, pid_alive, gone, descendants).

# shellcheck source=../slurm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../slurm/common.sh"

# execd_pid_file CELL_DIR: the execd's pid file. The execd names its spool directory after
# the name its address resolves to ("localhost" on a host whose name maps to 127.0.0.1),
# so it is looked for rather than assumed.
execd_pid_file() {
    local f
    for f in "$1"/spool/execd/*/execd.pid; do
        [ -e "$f" ] && { echo "$f"; return 0; }
    done
    echo "$1/spool/execd/none/execd.pid"
}

# shepherds DIR: the pids of the sge_shepherd processes whose working directory is under
# DIR (a shepherd runs in its job's directory in the execd spool, active_jobs/ID.TASK), so
# this finds exactly the jobs of the cells under DIR, even after their execd died.
shepherds() {
    local dir=${1%/}/ p cwd
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = sge_shepherd ] || continue
        cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
        [ "${cwd#"$dir"}" != "$cwd" ] && echo "${p#/proc/}"
    done
}

# kill_shepherds DIR: SIGKILL every shepherd under DIR and its job's processes, stopped
# first and the tree read again once frozen (a shell whose child dies first could start
# its next command in between; see kill_stray_stepds in ../slurm/common.sh).
kill_shepherds() {
    local pid kids
    for pid in $(shepherds "$1"); do
        kids=$(descendants "$pid" | tr '\n' ' ')
        # shellcheck disable=SC2086
        kill -STOP "$pid" $kids 2>/dev/null
        kids="$kids $(descendants "$pid" | tr '\n' ' ')"
        # shellcheck disable=SC2086
        kill -STOP $kids 2>/dev/null
        # shellcheck disable=SC2086
        kill -KILL "$pid" $kids 2>/dev/null
    done
}
