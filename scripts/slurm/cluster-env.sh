# Shared names for cluster-up.sh / cluster-down.sh (sourced, not run). Everything is namespaced
# "ddpslurm" so it cannot collide with other test clusters on the same machine.
DDPSL_DIR=/run/ddp-slurm                 # config, pid files, spool, state, logs
export SLURM_CONF=$DDPSL_DIR/slurm.conf  # srun/sbatch/squeue read this instead of /etc/slurm
DDPSL_BRIDGE=ddpsl0
DDPSL_NET=10.214
DDPSL_HOST_IP=$DDPSL_NET.0.1
DDPSL_CTL_PORT=6917                      # not 6817/6818: another SLURM may own the defaults
DDPSL_NODE_PORT=6918
DDPSL_HOSTS_BEGIN="# BEGIN ddp-slurm test cluster"
DDPSL_HOSTS_END="# END ddp-slurm cluster"
ddpsl_node() { echo "ddpslurm$1"; }
ddpsl_addr() { echo "$DDPSL_NET.0.$((10 + $1))"; }
ddpsl_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
ddpsl_strip_hosts() { sed "/^$DDPSL_HOSTS_BEGIN\$/,/^$DDPSL_HOSTS_END\$/d" /etc/hosts; }
