"""Tests of d2l_bert/dist/roles.py: the roles of a job on this machine,
their environments, and the division of the cores among workers (the
checks made before anything starts are test_dist_launcher.py's, through
`prepare_job`)."""
import pytest

from d2l_bert.dist import roles as R


def test_local_roles_put_every_process_on_the_loopback_address():
    roles = R.local_roles(['train'], 2, 1, 9999, 3, python='py')
    assert [(r.name, r.role) for r in roles] == [
        ('scheduler', 'scheduler'), ('server 0', 'server'),
        ('worker 0', 'worker'), ('worker 1', 'worker')]
    common = dict(DMLC_PS_ROOT_URI='127.0.0.1', DMLC_PS_ROOT_PORT='9999',
                  DMLC_NUM_WORKER='2', DMLC_NUM_SERVER='1')
    assert roles[0].env == dict(common, DMLC_ROLE='scheduler',
                                OMP_NUM_THREADS='1')
    assert roles[1].env == dict(common, DMLC_ROLE='server',
                                DMLC_NODE_HOST='127.0.0.1',
                                OMP_NUM_THREADS='1')
    assert roles[3].env == dict(common, DMLC_ROLE='worker',
                                DMLC_NODE_HOST='127.0.0.1',
                                OMP_NUM_THREADS='3')
    assert roles[0].argv == ['py', '-m', 'd2l_bert.dist.launcher', 'serve']
    assert roles[2].argv == ['train'] and roles[2].host is None


@pytest.mark.parametrize('workers, cores, threads', [
    (2, 2, 1), (4, 2, 1), (2, 8, 4), (3, 8, 2), (1, 2, 2)])
def test_divide_threads_shares_the_cores(workers, cores, threads):
    assert R.divide_threads(workers, cores) == threads
