"""d2l_bert.dist: training in several processes, on one machine or many,
with MXNet's parameter server (the ``dist_sync`` kvstore).

Its modules:

launcher
    The launching side (``d2l-bert launch``, ``d2l-bert pretrain
    --workers N`` or ``--hosts FILE``): a job's options checked, its
    roles started, watched and stopped whole (`prepare_job`,
    `run_job`).  It does not import `mxnet`.
roles
    The processes of a job on this machine, their ps-lite variables and
    threads, and the checks of the options (`local_roles`).  It does
    not import `mxnet`.
ssh
    The processes of a job over ssh, on the machines of a hosts file,
    and the checks that each machine answers and holds d2l-bert
    (`ssh_roles`, `probe_hosts`).  It does not import `mxnet`.
hosts_file
    The hosts file of a job over ssh, read bounded and checked line by
    line (`read_hosts`), and the range of ``--timeout``.  It does not
    import `mxnet`.
remote
    What runs on each machine of a job over ssh around a role: its
    thread count from that machine's cores, and a watchdog that stops
    the role when the launcher falls silent.  It does not import `mxnet`.
workers
    A worker's side: joining the job (`create_kvstore`), worker 0's
    weights before the first step (`share_initial_weights`), its rows of
    every batch (`worker_rows`, `worker_shards`), and the other workers
    (`Workers`).

Importing this package imports none of them.
"""
